//! Tools end to end (docs/reference.md#config-tools): config tools with placeholders, the
//! environment and stdin they get, timeouts that kill the whole process group, cost/summary lines,
//! exit codes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// Records everything a tool process receives, in its working directory.
const RECORDER: &str = r#"#!/bin/sh
printf '%s\0' "$#" "$@" > argv.out
printf '%s' "$HEARTBEAT_INPUT" > input-env.out
printf '%s\n%s\n' "$HEARTBEAT_TASK_ID" "$HEARTBEAT_RUN_ID" > ids.out
cat > stdin.out
pwd -P > pwd.out
"#;

#[test]
fn placeholders_arrive_as_exactly_one_argument_each() {
    let env = Env::empty();
    env.write("recorder.sh", RECORDER);
    let hostile_a = "two words; touch pwned-a $(touch pwned-b) `touch pwned-c` && echo \"q\" 'sq'";
    let hostile_b = "line one\nline two\t$HOME * ? [x] {a} \\ end";
    let input = json!({"a": hostile_a, "b": hostile_b, "n": 42, "flag": true, "empty": ""});
    env.write(
        "notes/HEARTBEAT.md",
        format!("## Recurring\n- [ ] @rec {input}\n"),
    );
    let recorder = env.path("recorder.sh");
    let env = env.config(&format!(
        r#"[tools.rec]
command = ["sh", "{}", "{{a}}", "{{b}}", "pre-{{a}}-post", "{{n}}", "{{flag}}", "{{empty}}", "{{a}}{{n}}", "{{not a placeholder}}"]
approval = "auto"
"#,
        recorder.display()
    ));
    let out = env
        .cmd(["run", "--once", "--file", "notes/HEARTBEAT.md"])
        .output();
    out.code(0);

    let argv_raw = env.read("notes/argv.out");
    let argv: Vec<&str> = argv_raw.strip_suffix('\0').unwrap().split('\0').collect();
    let expected = [
        "8",
        hostile_a,
        hostile_b,
        &format!("pre-{hostile_a}-post"),
        "42",
        "true",
        "",
        &format!("{hostile_a}42"),
        "{not a placeholder}",
    ];
    assert_eq!(argv, expected);
    for f in ["pwned-a", "pwned-b", "pwned-c"] {
        assert!(
            !env.exists(f) && !env.exists(&format!("notes/{f}")),
            "{f}: a shell ran"
        );
    }

    // The whole input on stdin as one JSON line, and in $HEARTBEAT_INPUT.
    let stdin = env.read("notes/stdin.out");
    assert!(
        stdin.ends_with('\n') && stdin.matches('\n').count() == 1,
        "{stdin:?}"
    );
    assert_eq!(serde_json::from_str::<Value>(&stdin).unwrap(), input);
    let input_env = env.read("notes/input-env.out");
    assert_eq!(serde_json::from_str::<Value>(&input_env).unwrap(), input);

    // Task and run ids, as the audit log has them.
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    let ids = env.read("notes/ids.out");
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids[0], ok[0]["task_id"].as_str().unwrap());
    assert_eq!(ids[1], ok[0]["run_id"].as_str().unwrap());

    // The working directory is the HEARTBEAT.md's directory, not the caller's.
    let expected_dir = std::fs::canonicalize(env.path("notes")).unwrap();
    assert_eq!(
        env.read("notes/pwd.out").trim_end(),
        expected_dir.to_str().unwrap()
    );
}

#[test]
fn shell_argv_form_runs_without_a_shell() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": [\"printf\", \"%s|\", \"$(touch pwned)\", \"a b\"]}\n",
    );
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["output"], "$(touch pwned)|a b|");
    assert!(!env.exists("pwned"));
}

/// Whether `pid` is gone (or a zombie nobody reaped yet: dead all the same).
pub(crate) fn is_dead(pid: i32) -> bool {
    if !process_exists(pid) {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[test]
fn timeout_kills_the_whole_group_and_fails_the_task() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"sleep 60 & echo $! > grandchild.pid; wait\"}\n",
    )
    .config("[tools.shell]\ntimeout = \"1s\"\napproval = \"auto\"\n");
    let out = env.run_once(NOW);
    out.code(1);
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    let error = failed[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("timed out after 1s"), "{}", failed[0]);
    assert!(out.stdout.contains("timed out after 1s"), "{}", out.stdout);

    let pid: i32 = env.read("grandchild.pid").trim().parse().unwrap();
    let deadline = Instant::now() + WAIT;
    while !is_dead(pid) {
        assert!(
            Instant::now() < deadline,
            "the grandchild {pid} (sleep 60) outlived its task"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn input_timeout_applies_too() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"sleep 30\", \"timeout\": \"1s\"}\n");
    env.run_with(NOW, &["--autonomy", "full"]).code(1);
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("timed out after 1s")),
        "{}",
        failed[0]
    );
}

#[test]
fn cost_and_summary_from_the_last_line_are_recorded() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"echo working; echo '{\\\"cost_usd\\\": 0.5, \\\"summary\\\": \\\"did it\\\"}'; echo\"}\n",
    );
    let out = env.run_with(NOW, &["--autonomy", "full"]);
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["cost_usd"], 0.5);
    assert_eq!(ok[0]["summary"], "did it");
    assert!(
        ok[0]["output"]
            .as_str()
            .is_some_and(|o| o.starts_with("working\n")),
        "{}",
        ok[0]
    );
    // The summary stands for the output in the human report.
    assert!(out.stdout.contains("did it"), "{}", out.stdout);
    let cost: f64 = env
        .db()
        .query_row("SELECT cost_usd FROM task_runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(cost, 0.5);
    let status = env.cmd(["status", "--json"]).output();
    status.code(0);
    assert_eq!(status.json()["budget"]["spent_usd"], 0.5);
}

#[test]
fn a_last_line_that_is_not_a_cost_object_is_just_output() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"echo '{\\\"other\\\": 1}'\"}\n");
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok[0]["cost_usd"], Value::Null);
    assert_eq!(ok[0]["output"], "{\"other\": 1}\n");
}

#[test]
fn non_zero_exit_fails_the_task_with_its_exit_code() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"echo partial; echo oops >&2; exit 3\"}\n- [ ] @log {\"text\": \"after\"}\n",
    );
    let out = env.run_with(NOW, &["--autonomy", "full", "--json"]);
    out.code(1);
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["exit_code"], 3);
    assert_eq!(failed[0]["output"], "partial\n");
    assert!(failed[0]["error"].as_str().is_some_and(|e| !e.is_empty()));
    // The next task still runs.
    assert_eq!(env.events("task_succeeded").len(), 1);

    let doc = out.json();
    let t = &doc["tasks"][0];
    assert_eq!(t["outcome"], "failed");
    assert_eq!(t["exit_code"], 3);
    assert_eq!(doc["failed"], 1);
    assert_eq!(doc["succeeded"], 1);

    let state: (String, i64) = env
        .db()
        .query_row(
            "SELECT last_outcome, consecutive_failures FROM task_state WHERE task_id = ?1",
            [failed[0]["task_id"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(state, ("failed".to_string(), 1));
}

#[test]
fn a_program_that_cannot_start_fails_the_task() {
    let env = Env::new("## Recurring\n- [ ] @missing {}\n").config(
        "[tools.missing]\ncommand = [\"/nonexistent/heartbeat-test-program\"]\napproval = \"auto\"\n",
    );
    let out = env.run_once(NOW);
    out.code(1);
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("heartbeat-test-program")),
        "{}",
        failed[0]
    );
}

#[test]
fn the_telegram_token_variable_is_not_passed_to_tools() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"printf '%s' \\\"${HEARTBEAT_TELEGRAM_TOKEN-unset}\\\"\"}\n",
    );
    let out = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .env("HEARTBEAT_TELEGRAM_TOKEN", "123:SECRET")
        .output();
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok[0]["output"], "unset");
}

#[test]
fn audit_lines_carry_at_most_4_kib_of_output() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"head -c 3000000 /dev/zero | tr '\\\\0' a; head -c 3000000 /dev/zero | tr '\\\\0' e >&2\"}\n",
    );
    // Succeeds: the output is drained as it comes, never held whole (a tool blocked on a
    // full pipe would time out and fail).
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    let output = ok[0]["output"].as_str().unwrap();
    assert!(
        output.starts_with(&"a".repeat(4096)),
        "the first 4 KiB kept"
    );
    assert!(!output.contains(&"a".repeat(4097)), "no more than 4 KiB");
    assert!(output.len() < 4096 + 200, "{} bytes", output.len());
    // Everything left out is counted: 3,000,000 produced, 4096 kept.
    assert!(
        output.ends_with(&format!("[{} more bytes]", 3_000_000 - 4096)),
        "{}",
        &output[4096..]
    );
    let line = env
        .audit_text()
        .lines()
        .find(|l| l.contains("task_succeeded"))
        .unwrap()
        .len();
    assert!(line < 3 * 4096, "audit line of {line} bytes");
}

#[test]
fn http_tool_posts_to_a_server_and_records_its_answer() {
    use std::sync::{Arc, Mutex};

    use crate::test_server::{Reply, TestServer};

    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let server = TestServer::start(move |request| {
        record.lock().unwrap().push(request.clone());
        Reply::raw(
            201,
            "text/plain",
            "created\n{\"summary\": \"hook called\"}\n",
        )
    });
    let input =
        json!({"url": format!("{}/hook?x=1", server.url()), "method": "POST", "body": {"a": 1}});
    let env = Env::new(&format!("## Recurring\n- [ ] @http {input}\n"));
    let out = env.run_with(NOW, &["--autonomy", "full"]);
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["tool"], "http");
    assert_eq!(ok[0]["summary"], "hook called");
    assert!(out.stdout.contains("hook called"), "{}", out.stdout);

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].url, "/hook?x=1");
    assert_eq!(seen[0].header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Value>(&seen[0].body).unwrap(),
        json!({"a": 1})
    );
}

/// heartbeat killed with SIGKILL while a tool runs: the tool's whole process group is
/// stopped, not only its first process (the only one the kernel's parent-death signal
/// reaches): a shell's children do not run on unwatched.
#[test]
fn a_tools_whole_group_is_stopped_when_heartbeat_is_killed() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"sleep 60 & echo $! > grandchild.pid; echo $$ > leader.pid; wait\"}\n",
    );
    let mut run = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now(NOW)
        .spawn();
    let pid_in = |name: &str| -> i32 {
        let path = env.path(name);
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(pid) = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .trim()
                .parse()
            {
                return pid;
            }
            assert!(Instant::now() < deadline, "{name} was never written");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let leader = pid_in("leader.pid");
    let grandchild = pid_in("grandchild.pid");
    run.kill().expect("kill -9 heartbeat");
    run.wait().expect("reap heartbeat");
    let deadline = Instant::now() + WAIT;
    for (pid, what) in [(leader, "the tool's shell"), (grandchild, "its sleep 60")] {
        while !is_dead(pid) {
            assert!(
                Instant::now() < deadline,
                "{what} ({pid}) outlived heartbeat"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
