//! What a new user meets in the first hour: times in the configured zone at every command,
//! and `status` saying what to do when nothing has run yet.

use crate::common::Env;

#[test]
fn approvals_grants_pause_and_status_show_times_in_the_configured_zone() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"true\"}\n")
        .config("timezone = \"Europe/Berlin\"\n");
    let status = env.cmd(["status"]).output();
    status.code(0);
    assert!(
        status
            .stdout
            .contains("last run:    never (set up cron or a timer: `heartbeat init`"),
        "{}",
        status.stdout
    );
    env.run_once("2026-05-04T08:00:00Z").code(0);
    let approvals = env.cmd(["approvals"]).output();
    assert!(
        approvals.stdout.contains("(since 2026-05-04 10:00 CEST)"),
        "{}",
        approvals.stdout
    );
    let pause = env
        .cmd(["pause", "--for", "1h"])
        .now("2026-05-04T08:05:00Z")
        .output();
    pause.code(0);
    assert!(
        pause
            .stdout
            .starts_with("paused until 2026-05-04 11:05 CEST;"),
        "{}",
        pause.stdout
    );
    let status = env.cmd(["status"]).now("2026-05-04T08:06:00Z").output();
    assert!(
        status
            .stdout
            .contains("paused:      since 2026-05-04 10:05 CEST until 2026-05-04 11:05 CEST"),
        "{}",
        status.stdout
    );
    // --json keeps RFC 3339 UTC.
    let json = env.cmd(["approvals", "--json"]).output().json();
    assert_eq!(json[0]["created_at"], "2026-05-04T08:00:00.000Z");
    // An always-grant says when, in the zone too.
    env.cmd(["resume"])
        .now("2026-05-04T08:07:00Z")
        .output()
        .code(0);
    env.cmd(["approve", "1", "--always"])
        .now("2026-05-04T08:10:00Z")
        .output()
        .code(0);
    let grants = env.cmd(["grants"]).output();
    assert!(
        grants.stdout.contains("at 2026-05-04 10:10 CEST)"),
        "{}",
        grants.stdout
    );
}

#[test]
fn a_refused_connection_reads_like_one() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env::new(&format!(
        "## Recurring\n- [ ] @http {{\"url\": \"http://127.0.0.1:{port}/health?token=s3cr3t-tok\"}}\n"
    ))
    .config("timezone = \"UTC\"\n[tools.http]\napproval = \"auto\"\n");
    let out = env.run_once("2026-05-04T08:00:00Z");
    out.code(1);
    let failed = env.events("task_failed");
    assert_eq!(
        failed[0]["error"],
        format!("connection refused: 127.0.0.1:{port}"),
        "{:#?}",
        failed[0]
    );
    assert!(
        out.stdout.contains("connection refused: 127.0.0.1:"),
        "{}",
        out.stdout
    );
    assert!(!env.audit_text().contains("s3cr3t-tok"));
}

/// A shell task running the script `name`, written into the sandbox.
fn script_task(env: &Env, name: &str, body: &str) -> String {
    env.write(name, body);
    format!(
        "- [ ] @shell {{\"cmd\": [\"sh\", \"{}\"]}}\n",
        env.path(name).display()
    )
}

#[test]
fn a_multi_line_output_shows_its_first_lines_and_an_error_is_said_once() {
    let env = Env::empty();
    let md = format!(
        "## Recurring\n{}{}{}",
        script_task(
            &env,
            "json.sh",
            "printf '\\n{\\n  \"a\": 1,\\n\\n  \"b\": 2\\n}\\n'\n"
        ),
        script_task(&env, "seq.sh", "seq 1 9\n"),
        script_task(
            &env,
            "tar.sh",
            "echo 'tar: /nope: Cannot stat' >&2\necho 'tar: exiting' >&2\nexit 2\n"
        ),
    );
    env.write("HEARTBEAT.md", &md);
    let env = env.config("timezone = \"UTC\"\n[tools.shell]\napproval = \"auto\"\n");
    let out = env.run_once("2026-05-04T08:00:00Z");
    out.code(1);
    assert!(
        out.stdout.contains(
            "HEARTBEAT.md:2\n          {\n            \"a\": 1,\n            \"b\": 2\n          }\n"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("HEARTBEAT.md:3\n          1\n          2\n          3\n          4\n          5\n          …\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("HEARTBEAT.md:4  exit status 2: tar: /nope: Cannot stat\n"),
        "{}",
        out.stdout
    );
    // The audit keeps the output as it was.
    assert_eq!(
        env.events("task_succeeded")[0]["output"],
        "\n{\n  \"a\": 1,\n\n  \"b\": 2\n}\n"
    );
    let log = env.cmd(["log"]).output();
    log.code(0);
    let pad = " ".repeat("2026-05-04 08:00:00 UTC  ".len());
    assert!(
        log.stdout.contains(&format!(
            " ms)\n{pad}{{\n{pad}  \"a\": 1,\n{pad}  \"b\": 2\n{pad}}}\n"
        )),
        "{}",
        log.stdout
    );
    assert_eq!(
        crate::common::count_matches(&log.stdout, "tar: /nope: Cannot stat"),
        1,
        "{}",
        log.stdout
    );
}

#[test]
fn an_http_success_records_its_status() {
    use crate::test_server::{Reply, TestServer};

    let server =
        TestServer::start(|_| Reply::json(200, &serde_json::json!({"status": "up", "n": 1})));
    let env = Env::new(&format!(
        "## Recurring\n- [ ] @http {{\"url\": \"{}/health\"}}\n",
        server.url()
    ))
    .config("timezone = \"UTC\"\n[tools.http]\napproval = \"auto\"\n");
    let out = env.run_once("2026-05-04T08:00:00Z");
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok[0]["summary"], "HTTP 200 OK", "{:#?}", ok[0]);
    assert!(
        out.stdout.contains("HEARTBEAT.md:2  HTTP 200 OK\n"),
        "{}",
        out.stdout
    );
    let log = env.cmd(["log"]).output();
    assert!(
        log.stdout.contains("@http HEARTBEAT.md:2  HTTP 200 OK ("),
        "{}",
        log.stdout
    );
}

#[test]
fn a_bullet_glued_to_its_marker_below_a_task_is_a_warning_on_its_own_line() {
    let env = Env::new(
        "## Recurring\n* [ ] @log {\"text\": \"a\"}\n-[ ] @log {\"text\": \"b\"\n- [ ] @log {\"text\": \"c\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    let out = env.cmd(["check"]).output();
    out.code(0);
    assert!(
        out.stdout.contains(
            "HEARTBEAT.md:3:1: warning: \"-[ ]\" is not a task: write a space after \"-\" (\"- [ ] @log {\"text\": \"b\"\")"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("0 error(s), 1 warning(s)"),
        "{}",
        out.stdout
    );
    let run = env.run_once("2026-05-04T08:00:00Z");
    run.code(0);
    assert_eq!(env.events("task_succeeded").len(), 2, "{}", run.stdout);
    assert!(run.stderr.contains("HEARTBEAT.md:3:1"), "{}", run.stderr);
}

#[test]
fn a_task_with_a_bad_heading_and_bad_json_shows_both_errors_at_once() {
    let env = Env::new("## Recurring\n### Evry day at 09:00\n- [ ] @http {'url': 'http://x'}\n")
        .config("timezone = \"UTC\"\n");
    let check = env.cmd(["check"]).output();
    check.code(1);
    let problem = check
        .stdout
        .lines()
        .find(|l| l.starts_with("HEARTBEAT.md:2:1: error:"))
        .unwrap_or_else(|| panic!("{}", check.stdout));
    assert!(
        problem.contains("schedule heading \"Evry day at 09:00\" is not a valid")
            && problem.contains("; and the task at line 3, column 14 is invalid too: ")
            && problem.contains("JSON needs double quotes"),
        "{problem}"
    );
    env.run_once("2026-05-04T08:00:00Z").code(1);
    let invalid = env.events("task_invalid");
    let error = invalid[0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("schedule heading \"Evry day at 09:00\"")
            && error.contains("JSON needs double quotes"),
        "{error}"
    );
}

#[test]
fn status_shows_the_next_task_due_the_counts_and_an_approval_past_its_ttl_as_expiring() {
    let env = Env::new(
        "## Recurring\n### Daily at 09:00\n- [ ] @log {\"text\": \"hi\"}\n\
         - [ ] @shell {\"cmd\": \"true\"}\n## One-time\n- [ ] call mum\n",
    )
    .config("timezone = \"Europe/Berlin\"\n");
    env.run_once("2026-05-04T07:30:00Z").code(0);
    let log_id = env.events("task_succeeded")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();

    let status = env.cmd(["status"]).now("2026-05-04T08:00:00Z").output();
    status.code(0);
    for want in [
        format!(
            "next due:    @log HEARTBEAT.md:3 (task {log_id}) at 2026-05-05 09:00 CEST (in 23h)\n"
        ),
        "pending:     1 approval(s) (heartbeat approvals)\n".to_string(),
        "reminders:   1 given, waiting to be ticked\n".to_string(),
    ] {
        assert!(status.stdout.contains(&want), "{want}\n{}", status.stdout);
    }

    // A day later the approval is past approval_ttl (24h): expiring, no longer pending.
    let status = env.cmd(["status"]).now("2026-05-05T08:00:00Z").output();
    for want in [
        format!("next due:    @log HEARTBEAT.md:3 (task {log_id}) now (the next run takes it)\n"),
        "pending:     0 approval(s); 1 expiring (past approval_ttl: the next run expires them)\n"
            .to_string(),
    ] {
        assert!(status.stdout.contains(&want), "{want}\n{}", status.stdout);
    }
    let json = env
        .cmd(["status", "--json"])
        .now("2026-05-04T08:00:00Z")
        .output()
        .json();
    assert_eq!(json["pending_approvals"], 1);
    assert_eq!(json["expiring_approvals"], 0);
    assert_eq!(json["next_due"]["task_id"], log_id.as_str());
    assert_eq!(json["next_due"]["tool"], "log");
    assert_eq!(json["next_due"]["line"], 3);
    assert_eq!(json["next_due"]["at"], "2026-05-05T07:00:00.000Z");
    let json = env
        .cmd(["status", "--json"])
        .now("2026-05-05T08:00:00Z")
        .output()
        .json();
    assert_eq!(json["pending_approvals"], 1);
    assert_eq!(json["expiring_approvals"], 1);
}
