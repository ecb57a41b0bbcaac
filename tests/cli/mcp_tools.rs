//! MCP tools in tasks (docs/reference.md#mcp-tools), end to end: `@SERVER.TOOL {json}` tasks run
//! against `examples/mcp_test_server.rs` (built by `cargo test`) under the same policy as every
//! tool.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::tools::is_dead;

/// `<target>/debug/examples/mcp_test_server`, beside the heartbeat binary's directory.
pub(crate) fn server_bin() -> PathBuf {
    let bin = PathBuf::from(BIN);
    let path = bin
        .parent()
        .expect("the binary's directory")
        .join("examples/mcp_test_server");
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds it (or `cargo build --example mcp_test_server`)",
        path.display()
    );
    path
}

/// A config with `[mcp.srv]` started through `sh`, which counts the starts in `starts.log`
/// (in the Env's root) before it becomes the test server. `extra` goes at the end.
fn config(env: Env, extra: &str) -> Env {
    let starts = env.path("starts.log");
    let toml = format!(
        r#"autonomy = "cautious"

[mcp.srv]
command = ["sh", "-c", "echo start >> '{}'; exec '{}'"]
timeout = "3s"
approval = "auto"
{extra}"#,
        starts.display(),
        server_bin().display()
    );
    env.config(&toml)
}

fn starts(env: &Env) -> usize {
    std::fs::read_to_string(env.path("starts.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_due_task_calls_the_server_and_succeeds() {
    let env = config(
        Env::new("## Recurring\n- [ ] @srv.echo {\"text\": \"hello from mcp\"}\n"),
        "",
    );
    let out = env.run_once(NOW);
    out.code(0);
    let ok = env.events_n("task_succeeded", 1);
    assert_eq!(ok[0]["tool"], "srv.echo");
    assert_eq!(ok[0]["output"], "hello from mcp");
    assert_eq!(starts(&env), 1);
}

#[test]
fn ask_queues_and_approve_runs_it_exactly_once() {
    let env = config(
        Env::new("## One-time\n- [ ] @srv.echo {\"text\": \"once\"}\n"),
        "[mcp.srv.tools.echo]\napproval = \"ask\"\n",
    );
    env.run_once(NOW).code(0);
    assert!(env.events("task_succeeded").is_empty());
    let queued = env.events_n("approval_requested", 1);
    let id = queued[0]["approval_id"].as_i64().unwrap().to_string();
    env.cmd(["approve", id.as_str()]).output().code(0);
    // A second approve and a later run do not run it again.
    env.cmd(["approve", id.as_str()]).output().no_panic();
    env.run_once("2026-05-01T11:00:00Z").code(0);
    let ok = env.events_n("task_succeeded", 1);
    assert_eq!(ok[0]["output"], "once");
    assert!(env.read("HEARTBEAT.md").contains("- [x] @srv.echo"));
}

#[test]
fn check_reports_schema_violations_and_unknown_tools_at_their_place() {
    let env = config(
        Env::new(
            "## Recurring\n- [ ] @srv.echo {\"text\": 5}\n- [ ] @srv.ecko {\"text\": \"x\"}\n\
             - [ ] @srv.echo {\"text\": \"fine\"}\n",
        ),
        "",
    );
    let out = env.cmd(["check"]).output();
    out.code(1);
    assert!(
        out.stdout.contains("HEARTBEAT.md:2:7") && out.stdout.contains("/text"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("has no tool \"ecko\"") && out.stdout.contains("@srv.echo?"),
        "{}",
        out.stdout
    );
    let json = env.cmd(["check", "--json"]).output().json();
    let decisions: Vec<&str> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["invalid", "invalid", "run"]);
    assert_eq!(json["tasks"][2]["tool"], "srv.echo");
    // `check` writes nothing, not even the run's cache.
    assert!(!env.state().join("heartbeat.db").exists());
}

#[test]
fn a_run_refuses_an_input_the_schema_refuses() {
    let env = config(
        Env::new("## Recurring\n- [ ] @srv.echo {\"text\": 5}\n"),
        "",
    );
    let out = env.run_once(NOW);
    out.code(1);
    let invalid = env.events_n("task_invalid", 1);
    assert!(error_of(&invalid[0]).contains("/text"));
    assert!(env.events("task_succeeded").is_empty() && env.events("task_failed").is_empty());
}

#[test]
fn is_error_fails_the_task_and_a_timeout_is_cancelled() {
    let env = config(
        Env::new(
            "## Recurring\n- [ ] @srv.fail {}\n- [ ] @srv.sleep {\"secs\": 30, \"child\": true}\n\
             - [ ] @srv.echo {\"text\": \"after\"}\n",
        ),
        "env = [\"HB_TEST_MARK\"]\n",
    );
    let mark = format!("{}-{}", std::process::id(), env.root().display());
    let out = env
        .cmd(["run", "--once"])
        .env("HB_TEST_MARK", &mark)
        .output();
    out.code(1);
    let failed = env.events_n("task_failed", 2);
    assert!(
        error_of(&failed[0]).contains("reported an error: failed on purpose"),
        "{}",
        failed[0]
    );
    assert!(
        failed[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("timed out after 3s"),
        "{}",
        failed[1]
    );
    // The timed-out server is replaced for the next task.
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["output"], "after");
    assert_eq!(starts(&env), 2);
    // Nothing of the servers (nor the sleeping child) outlives the run: no process carries
    // this test's mark in its environment.
    assert_eq!(marked_processes(&mark), Vec::<String>::new());
}

#[test]
fn a_message_too_large_or_too_deep_fails_its_call_at_once_naming_the_limit() {
    // The calls may take 10 minutes: failing them must not wait for that (the deadline).
    let env = config(
        Env::new(&format!(
            "## Recurring\n- [ ] @srv.big {{\"bytes\": {}}}\n- [ ] @srv.deep {{\"depth\": 200}}\n\
             - [ ] @srv.deep {{\"depth\": 100}}\n- [ ] @srv.echo {{\"text\": \"after\"}}\n",
            17 << 20
        )),
        "[mcp.srv.tools.big]\ntimeout = \"10m\"\n[mcp.srv.tools.deep]\ntimeout = \"10m\"\n",
    );
    let out = wait_output(
        env.cmd(["run", "--once"]).now(NOW).spawn(),
        "run --once",
        WAIT,
    );
    out.code(1);
    let failed = env.events_n("task_failed", 2);
    let error = |i: usize| failed[i]["error"].as_str().unwrap().to_string();
    assert_eq!(
        error(0),
        "MCP server \"srv\" broke the MCP protocol: it sent a message larger than 16 MiB, the \
         most heartbeat reads"
    );
    assert_eq!(
        error(1),
        "MCP server \"srv\" broke the MCP protocol: it sent a message nested deeper than 127 \
         levels, the most the JSON parser reads"
    );
    // Each cut-off server is replaced; a message within the limits is read as ever.
    let ok = env.events_n("task_succeeded", 2);
    assert!(
        ok[0]["output"].as_str().unwrap().contains("bottom"),
        "{}",
        ok[0]
    );
    assert_eq!(ok[1]["output"], "after");
    assert_eq!(starts(&env), 3);
}

/// Processes whose environment holds `HB_TEST_MARK=<mark>`, as /proc shows them.
fn marked_processes(mark: &str) -> Vec<String> {
    let needle = format!("HB_TEST_MARK={mark}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{pid}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    found
}

#[test]
fn a_server_that_will_not_start_fails_its_task_but_not_the_run() {
    for command in [
        "\"/nonexistent/mcp-server\"".to_string(),
        format!("\"{}\", \"--exit-at-start\"", server_bin().display()),
    ] {
        a_server_that_will_not_start(&command);
    }
}

fn a_server_that_will_not_start(command: &str) {
    let env = Env::new(
        "## Recurring\n- [ ] @broken.echo {\"text\": \"x\"}\n- [ ] @log {\"text\": \"still runs\"}\n",
    )
    .config(&format!(
        "autonomy = \"full\"\n[mcp.broken]\ncommand = [{command}]\napproval = \"auto\"\n"
    ));
    let out = env.run_once(NOW);
    out.code(1);
    let failed = env.events_n("task_failed", 1);
    assert_eq!(failed[0]["tool"], "broken.echo");
    assert!(
        error_of(&failed[0]).contains("did not start"),
        "{}",
        failed[0]
    );
    assert_eq!(env.events("task_succeeded").len(), 1);
    // check says so before 3 a.m.
    let check = env.cmd(["check"]).output();
    check.code(1);
    assert!(check.stdout.contains("did not start"), "{}", check.stdout);
}

/// `run --once` at `now` as cron starts it: a short PATH, which does not find
/// `mcp_test_server`.
fn run_from_cron(env: &Env, now: &str) -> Output {
    env.cmd(["run", "--once"])
        .now(now)
        .env("PATH", "/usr/bin:/bin")
        .output()
}

#[test]
fn a_server_not_on_crons_path_fails_its_tasks_instead_of_queuing_them() {
    // As cron starts it: a short PATH, and a command that the user's shell finds elsewhere.
    let env = Env::new(
        "## Recurring\n- [ ] @gh.echo {\"text\": \"x\"}\n## One-time\n- [ ] @gh.echo {\"text\": \"y\"}\n",
    )
    .config("[mcp.gh]\ncommand = [\"mcp_test_server\"]\n");
    let out = run_from_cron(&env, NOW);
    out.code(1);
    assert!(
        env.events("approval_requested").is_empty(),
        "{}",
        env.audit_text()
    );
    assert!(env.approval_rows().is_empty());
    let failed = env.events_n("task_failed", 2);
    for f in &failed {
        assert_eq!(f["tool"], "gh.echo");
        let error = f["error"].as_str().unwrap();
        assert!(
            error.starts_with("MCP server \"gh\" did not start: cannot run \"mcp_test_server\"")
                && error.contains("PATH \"/usr/bin:/bin\"")
                && error.contains("absolute path"),
            "{error}"
        );
    }
    assert!(out.stdout.contains("absolute path"), "{out:?}");
}

#[test]
fn a_server_listed_from_the_shell_but_not_on_crons_path_fails_instead_of_queuing() {
    // From the shell, whose PATH finds the server, a run lists its tools (cached for an hour).
    let shell_path = format!("{}:/usr/bin:/bin", server_bin().parent().unwrap().display());
    let env = Env::new("## Recurring\n- [ ] @gh.echo {\"text\": \"x\"}\n")
        .config("[mcp.gh]\ncommand = [\"mcp_test_server\"]\napproval = \"auto\"\n");
    env.cmd(["run", "--once"])
        .now(NOW)
        .env("PATH", &shell_path)
        .output()
        .code(0);
    assert_eq!(
        env.events("task_succeeded").len(),
        1,
        "{}",
        env.audit_text()
    );
    // Then the person makes it ask first, and cron runs it ten minutes later.
    env.write(
        "heartbeat.toml",
        "[mcp.gh]\ncommand = [\"mcp_test_server\"]\napproval = \"ask\"\n",
    );
    let out = run_from_cron(&env, "2026-05-01T10:10:00Z");
    out.code(1);
    assert!(
        env.events("approval_requested").is_empty(),
        "{}",
        env.audit_text()
    );
    let failed = env.events_n("task_failed", 1);
    assert!(
        error_of(&failed[0]).contains("cannot run \"mcp_test_server\""),
        "{}",
        failed[0]
    );
}

#[test]
fn sampling_requests_are_refused() {
    let env = config(Env::new("## Recurring\n- [ ] @srv.sampling {}\n"), "");
    env.run_once(NOW).code(0);
    let ok = env.events_n("task_succeeded", 1);
    assert!(
        ok[0]["output"]
            .as_str()
            .unwrap()
            .starts_with("sampling refused"),
        "{}",
        ok[0]
    );
}

#[test]
fn structured_content_is_kept_and_its_cost_counts() {
    let env = config(Env::new("## Recurring\n- [ ] @srv.structured {}\n"), "");
    env.run_once(NOW).code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok[0]["cost_usd"], 0.25);
    assert_eq!(ok[0]["summary"], "3 open issues");
    let output: Value = serde_json::from_str(ok[0]["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["issues"], serde_json::json!([1, 2, 3]));
}

/// A server that reports a negative cost gets no budget back: the cost is ignored.
#[test]
fn a_negative_cost_from_a_server_is_ignored() {
    let env = config(
        Env::new("## Recurring\n- [ ] @srv.structured {\"cost\": -100}\n"),
        "",
    );
    env.run_once(NOW).code(0);
    let ok = env.events_n("task_succeeded", 1);
    assert_eq!(ok[0]["cost_usd"], Value::Null, "{}", ok[0]);
    let status = env.cmd(["status", "--json"]).output();
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["budget"]["spent_usd"], 0.0, "{status}");
}

/// A summary is one line of at most 200 characters, however much a server sends.
#[test]
fn a_huge_summary_is_cut_to_one_short_line() {
    let huge = format!("first line {}\nsecond line", "x".repeat(100_000));
    let input = serde_json::json!({ "summary": huge });
    let env = config(
        Env::new(&format!("## Recurring\n- [ ] @srv.structured {input}\n")),
        "",
    );
    let out = env.run_once(NOW);
    out.code(0);
    let ok = env.events("task_succeeded");
    let summary = ok[0]["summary"].as_str().unwrap();
    assert!(summary.starts_with("first line xxx"), "{summary}");
    assert!(
        summary.ends_with('…') && summary.chars().count() == 201,
        "{summary}"
    );
    assert!(!out.stdout.contains("second line"), "{}", out.stdout);
    assert!(out.stdout.len() < 1000, "{}", out.stdout);
}

#[test]
fn mcp_tools_lists_what_servers_offer() {
    let env = config(Env::new("## Recurring\n"), "");
    let json = env.cmd(["mcp-tools", "--json"]).output();
    json.code(0);
    let doc = json.json();
    let server = &doc["servers"][0];
    assert_eq!(server["server"], "srv");
    let echo = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo listed");
    assert_eq!(echo["read_only"], true);
    assert_eq!(echo["task"], "@srv.echo");
    assert_eq!(echo["input_schema"]["required"][0], "text");
    let human = env.cmd(["mcp-tools", "srv"]).output();
    human.code(0);
    assert!(
        human.stdout.contains("@srv.echo  (read-only)"),
        "{}",
        human.stdout
    );
    // Its parameters, as a person writes the task's input.
    assert!(
        human.stdout.contains("parameters: text (string, required)"),
        "{}",
        human.stdout
    );
    let unknown = env.cmd(["mcp-tools", "sr"]).output();
    unknown.code(2);
    assert!(
        unknown.stderr.contains("did you mean \"srv\"?"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn the_runs_listing_is_cached_for_an_hour_and_refreshed_on_config_change() {
    let md = "## Recurring\n### Every 10m\n- [ ] @srv.echo {\"text\": 5}\n";
    let env = config(Env::new(md), "");
    // Listed at the first run (the input is invalid: no call is made).
    env.run_once(NOW).code(1);
    assert_eq!(starts(&env), 1);
    // Within the hour: the cache answers, no server starts.
    env.run_once("2026-05-01T10:30:00Z").code(1);
    assert_eq!(starts(&env), 1);
    assert_eq!(env.events("task_invalid").len(), 2);
    // Past the hour: listed again.
    env.run_once("2026-05-01T11:05:00Z").code(1);
    assert_eq!(starts(&env), 2);
    // A changed config (another cwd) is listed again at once.
    let env = config(env, "cwd = \".\"\n");
    env.run_once("2026-05-01T11:20:00Z").code(1);
    assert_eq!(starts(&env), 3);
}

#[test]
fn trust_annotations_loosen_ask_for_read_only_tools_only() {
    let md = "## Recurring\n- [ ] @srv.echo {\"text\": \"ro\"}\n- [ ] @srv.stderr {}\n";
    let toml = |trust: bool| {
        format!(
            "[mcp.srv]\ncommand = [\"{}\"]\ntrust_annotations = {trust}\n",
            server_bin().display()
        )
    };
    let env = Env::new(md).config(&toml(false));
    env.run_once(NOW).code(0);
    assert_eq!(env.events("approval_requested").len(), 2);

    let env = Env::new(md).config(&toml(true));
    env.run_once(NOW).code(0);
    let ok = env.events_n("task_succeeded", 1);
    assert_eq!(ok[0]["tool"], "srv.echo");
    let queued = env.events("approval_requested");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0]["tool"], "srv.stderr");
}

#[test]
fn config_errors_name_the_key() {
    let env = Env::new("## Recurring\n").config("[mcp.srv]\ncommand = [\"x\"]\nenvv = []\n");
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr.contains("mcp.srv") && out.stderr.contains("did you mean \"env\""),
        "{}",
        out.stderr
    );
    let env = Env::new("## Recurring\n").config("[mcp.srv]\ntimeout = \"1s\"\n");
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr.contains("missing key \"command\""),
        "{}",
        out.stderr
    );
    let env = Env::new("## Recurring\n- [ ] @srx.echo {}\n").config(&format!(
        "[mcp.srv]\ncommand = [\"{}\"]\n",
        server_bin().display()
    ));
    let out = env.cmd(["check"]).output();
    out.code(1);
    assert!(
        out.stdout.contains("unknown MCP server \"srx\"") && out.stdout.contains("\"srv\"?"),
        "{}",
        out.stdout
    );
}

/// With a widely used third-party server, which CI does not install: run it with
/// `--ignored` after `npm install -g @modelcontextprotocol/server-filesystem`.
#[test]
#[ignore = "needs mcp-server-filesystem on PATH (npm install -g @modelcontextprotocol/server-filesystem)"]
fn interop_with_the_reference_filesystem_server() {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mcp-server-filesystem"))
            .find(|p| p.is_file())
    });
    let server = found.expect(
        "mcp-server-filesystem on PATH (npm install -g @modelcontextprotocol/server-filesystem)",
    );
    let env = Env::empty();
    env.write("notes/a.txt", "hello from a file\n");
    let dir = env.path("notes").display().to_string();
    env.write(
        "HEARTBEAT.md",
        format!(
            "## Recurring\n- [ ] @fs.read_text_file {{\"path\": \"{dir}/a.txt\"}}\n\
             - [ ] @fs.read_text_file {{\"pathh\": \"x\"}}\n"
        ),
    );
    let env = env.config(&format!(
        "[mcp.fs]\ncommand = [\"{}\", \"{dir}\"]\napproval = \"auto\"\n",
        server.display()
    ));
    let check = env.cmd(["check"]).output();
    check.code(1);
    assert!(
        check.stdout.contains("HEARTBEAT.md:3:7"),
        "{}",
        check.stdout
    );
    env.run_once(NOW).code(1);
    let ok = env.events_n("task_succeeded", 1);
    assert!(
        ok[0]["output"]
            .as_str()
            .unwrap()
            .contains("hello from a file")
    );
    assert_eq!(env.events("task_invalid").len(), 1);
}

/// heartbeat killed with SIGKILL while an MCP server runs: the server's whole process group
/// is stopped, not only the server (the only process the kernel's parent-death signal
/// reaches): a process the server started does not run on unwatched.
#[test]
fn a_servers_whole_group_is_stopped_when_heartbeat_is_killed() {
    let env = Env::empty();
    let (grandchild, hang) = (env.path("grandchild.pid"), env.path("hang.pid"));
    env.write(
        "HEARTBEAT.md",
        format!(
            "## Recurring\n- [ ] @srv.hang {{\"mark\": \"{}\"}}\n",
            hang.display()
        ),
    );
    let env = env.config(&format!(
        r#"autonomy = "full"

[mcp.srv]
command = ["sh", "-c", "sleep 60 & echo $! > '{}'; exec '{}'"]
timeout = "10m"
approval = "auto"
"#,
        grandchild.display(),
        server_bin().display()
    ));
    let mut run = env.cmd(["run", "--once"]).now(NOW).spawn();
    let pid_in = |path: &std::path::Path| -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(pid) = std::fs::read_to_string(path)
                .unwrap_or_default()
                .trim()
                .parse()
            {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "{} was never written",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The server answers `initialize` before the call writes hang.pid: it is in use.
    let server = pid_in(&hang);
    let sleep = pid_in(&grandchild);
    run.kill().expect("kill -9 heartbeat");
    run.wait().expect("reap heartbeat");
    let deadline = Instant::now() + WAIT;
    for (pid, what) in [(server, "the server"), (sleep, "its sleep 60")] {
        while !is_dead(pid) {
            assert!(
                Instant::now() < deadline,
                "{what} ({pid}) outlived heartbeat"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
