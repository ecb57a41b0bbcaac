//! Retries (docs/reference.md#retries): a failed task with attempts left is tried again
//! later, outside its schedule, and only when a second call cannot have a second effect.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::common::{Env, NOW};

/// `NOW` moved by `minutes`.
fn at(minutes: i64) -> String {
    (NOW.parse::<DateTime<Utc>>().unwrap() + Duration::minutes(minutes))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

/// A tool that counts its calls in `calls` (one line each) and fails its first `fails`
/// calls with exit code `code`.
fn counting_tool(env: &Env, name: &str, fails: usize, code: i32, rest: &str) -> String {
    let calls = env.path(&format!("{name}.calls")).display().to_string();
    format!(
        "[tools.{name}]\ncommand = [\"sh\", \"-c\", \"echo x >> '{calls}'; \
         test $(wc -l < '{calls}') -gt {fails} || exit {code}\"]\napproval = \"auto\"\n{rest}"
    )
}

fn calls(env: &Env, name: &str) -> usize {
    let file = format!("{name}.calls");
    if !env.exists(&file) {
        return 0;
    }
    env.read(&file).lines().count()
}

fn task_lines(run: &Value) -> Vec<Value> {
    run["tasks"].as_array().expect("tasks").clone()
}

fn decision(env: &Env, now: &str) -> Value {
    let out = env.cmd(["check", "--json"]).now(now).output();
    out.code(0);
    out.json()["tasks"][0].clone()
}

#[test]
fn a_failure_with_attempts_left_is_tried_again_by_the_next_run_after_its_time() {
    let env = Env::new("## Recurring\n### Every 1d\n- [ ] @flaky {}\n");
    let toml = counting_tool(&env, "flaky", 1, 3, "retries = 2\nidempotent = true\n");
    let env = env.config(&toml);

    // The first attempt fails: not a failure yet, the run exits 0.
    let out = env.cmd(["run", "--once", "--json"]).now(NOW).output();
    out.code(0);
    let run = out.json();
    let line = &task_lines(&run)[0];
    assert_eq!(line["outcome"], "retry_scheduled", "{run:#}");
    assert_eq!(line["trigger"], "schedule", "{run:#}");
    assert_eq!(run["failed"], 0, "{run:#}");
    assert!(env.events("task_failed").is_empty());
    let scheduled = env.events("task_retry_scheduled");
    assert_eq!(scheduled.len(), 1);
    let event = &scheduled[0];
    let keys: Vec<&str> = event
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["ts", "event", "run_id", "task_id", "attempt", "at", "error"]
    );
    assert_eq!(event["attempt"], 1);
    assert_eq!(event["error"], "exit status 3");
    // The failure's time plus the backoff of a minute.
    let retry = time(&event["at"]);
    assert!(retry >= time(&Value::from(at(1))), "{event}");
    assert!(
        retry <= time(&event["ts"]) + Duration::minutes(1),
        "{event}"
    );
    assert_eq!(calls(&env, "flaky"), 1);
    // `heartbeat metrics` counts the outcome as `run --json` says it.
    let out = env.cmd(["metrics"]).now(NOW).output();
    out.code(0);
    assert!(
        out.stdout
            .contains("heartbeat_tasks_total{tool=\"flaky\",outcome=\"retry_scheduled\"} 1"),
        "{}",
        out.stdout
    );

    // `check` says a retry waits, and when.
    let t = decision(&env, &at(0));
    assert_eq!(t["decision"], "retry", "{t:#}");
    assert_eq!(time(&t["next_due"]), retry, "{t:#}");

    // A run before that time leaves it alone.
    env.run_once(&at(0)).code(0);
    assert_eq!(calls(&env, "flaky"), 1);

    // The first run after it (cron alone, no daemon) runs it outside its daily schedule.
    let out = env.cmd(["run", "--once", "--json"]).now(&at(5)).output();
    out.code(0);
    let run = out.json();
    let line = &task_lines(&run)[0];
    assert_eq!(line["outcome"], "succeeded", "{run:#}");
    assert_eq!(line["trigger"], "retry", "{run:#}");
    assert_eq!(calls(&env, "flaky"), 2);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["trigger"], "retry");
    // The retry was not a new attempt: the daily schedule still counts from the first one,
    // and nothing waits any more.
    let t = decision(&env, &at(10));
    assert_eq!(t["decision"], "not_due", "{t:#}");
    assert_eq!(
        time(&t["next_due"]),
        time(&Value::from(at(24 * 60))) - Duration::minutes(1),
        "{t:#}"
    );
}

#[test]
fn a_tool_not_known_to_be_idempotent_is_never_called_again_after_a_real_failure() {
    let env = Env::new("## Recurring\n- [ ] @send {}\n");
    let toml = counting_tool(&env, "send", 5, 3, "retries = 3\n");
    let env = env.config(&toml);
    let out = env.cmd(["run", "--once", "--json"]).now(NOW).output();
    out.code(1);
    assert_eq!(task_lines(&out.json())[0]["outcome"], "failed");
    assert!(env.events("task_retry_scheduled").is_empty());
    assert_eq!(env.events("task_failed").len(), 1);
    assert_ne!(decision(&env, &at(5))["decision"], "retry");
}

#[test]
fn retry_on_names_the_failures_that_are_retried() {
    let env = Env::new("## Recurring\n- [ ] @t75 {}\n- [ ] @t3 {}\n");
    let rest = "retries = 1\nidempotent = true\nretry_on = [\"exit:75\"]\n";
    let toml = format!(
        "{}{}",
        counting_tool(&env, "t75", 5, 75, rest),
        counting_tool(&env, "t3", 5, 3, rest)
    );
    let env = env.config(&toml);
    let out = env.cmd(["run", "--once", "--json"]).now(NOW).output();
    out.code(1);
    let lines = task_lines(&out.json());
    assert_eq!(lines[0]["outcome"], "retry_scheduled");
    assert_eq!(lines[1]["outcome"], "failed");
    assert_eq!(lines[1]["exit_code"], 3);

    // The last attempt of the chain fails: now it is a failure, said as a retry's.
    let out = env.cmd(["run", "--once", "--json"]).now(&at(5)).output();
    out.code(1);
    let lines = task_lines(&out.json());
    assert_eq!(lines[0]["outcome"], "failed");
    assert_eq!(lines[0]["trigger"], "retry");
    assert_eq!(calls(&env, "t75"), 2);
    let failed = env.events("task_failed");
    let t75: Vec<&Value> = failed.iter().filter(|e| e["tool"] == "t75").collect();
    assert_eq!(t75.len(), 1);
    assert_eq!(t75[0]["trigger"], "retry");
    assert!(
        failed
            .iter()
            .all(|e| e["tool"] == "t75" || e["trigger"] == "schedule")
    );
}

#[test]
fn the_breaker_counts_a_chain_once() {
    let env = Env::new("## Recurring\n- [ ] @down {}\n");
    let toml = format!(
        "max_consecutive_failures = 2\n{}",
        counting_tool(&env, "down", 100, 3, "retries = 1\nidempotent = true\n")
    );
    let env = env.config(&toml);
    env.run_once(&at(0)).code(0);
    env.run_once(&at(5)).code(1);
    // Two attempts, one chain: one failure, no trip.
    assert_eq!(calls(&env, "down"), 2);
    assert!(env.events("task_tripped").is_empty());
    assert_eq!(env.events("task_failed").len(), 1);
    // The second chain trips it.
    env.run_once(&at(60)).code(0);
    env.run_once(&at(65)).code(1);
    assert_eq!(calls(&env, "down"), 4);
    let tripped = env.events("task_tripped");
    assert_eq!(tripped.len(), 1);
    assert_eq!(tripped[0]["failures"], 2);
}

#[test]
fn a_one_time_task_is_retried_only_when_its_tool_never_started() {
    let md = "## One-time\n### At 2026-05-01 09:00\n- [ ] @ghost {}\n- [ ] @once {}\n";
    let env = Env::new(md);
    let toml = format!(
        "timezone = \"UTC\"\n[tools.ghost]\ncommand = [\"{}\"]\napproval = \"auto\"\n\
         retries = 1\n{}",
        env.path("no-such-program").display(),
        counting_tool(&env, "once", 5, 3, "retries = 1\nidempotent = true\n")
    );
    let env = env.config(&toml);
    let out = env.cmd(["run", "--once", "--json"]).now(NOW).output();
    out.code(1);
    let lines = task_lines(&out.json());
    // It never started: tried again, and its start does not hold it.
    assert_eq!(lines[0]["outcome"], "retry_scheduled", "{lines:#?}");
    // It ran and failed: a one-time task with outside effects is not called twice.
    assert_eq!(lines[1]["outcome"], "failed");
    let starts: i64 = env
        .db()
        .query_row("SELECT COUNT(*) FROM starts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(starts, 0);
    // Its history row says it never started.
    let outcome: String = env
        .db()
        .query_row(
            "SELECT outcome FROM task_runs WHERE tool = 'ghost'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(outcome, "not_started");
    assert_eq!(decision(&env, &at(0))["decision"], "retry");
    let out = env.cmd(["run", "--once", "--json"]).now(&at(5)).output();
    let ghost = task_lines(&out.json())
        .into_iter()
        .find(|l| l["tool"] == "ghost")
        .expect("ghost ran again");
    assert_eq!(ghost["outcome"], "failed");
    assert_eq!(ghost["trigger"], "retry");
}

#[test]
fn retry_keys_are_checked_where_they_are_written() {
    for (toml, words) in [
        (
            "[tools.x]\ncommand = [\"true\"]\nretry_on = [\"timeout\", \"sometimes\"]\n",
            &["tools.x.retry_on[1]", "\"sometimes\"", ":3:"][..],
        ),
        (
            "[tools.x]\ncommand = [\"true\"]\nretry_on = [\"exit:0\"]\n",
            &["tools.x.retry_on[0]", "exit:N"][..],
        ),
        (
            "[tools.x]\ncommand = [\"true\"]\nretries = -1\n",
            &["tools.x.retries", "-1"][..],
        ),
        (
            "[tools.x]\ncommand = [\"true\"]\nretry_backoff = \"soon\"\n",
            &["tools.x.retry_backoff", "soon"][..],
        ),
        (
            "[mcp.s]\ncommand = [\"true\"]\nretry_on = [\"http:404\"]\n",
            &["mcp.s.retry_on[0]", "http:404"][..],
        ),
        (
            "[mcp.s]\ncommand = [\"true\"]\n[mcp.s.tools.t]\nidempotent = \"yes\"\n",
            &["mcp.s.tools.t.idempotent"][..],
        ),
    ] {
        let env = Env::new("## Recurring\n- [ ] Stretch\n").config(toml);
        let out = env.cmd(["check"]).output();
        out.code(2);
        let file = env.path("heartbeat.toml").display().to_string();
        assert!(out.stderr.contains(&file), "{toml}: {}", out.stderr);
        for word in words {
            assert!(out.stderr.contains(word), "{toml}: {word}: {}", out.stderr);
        }
    }
    // The words it takes.
    let env = Env::new("## Recurring\n- [ ] Stretch\n").config(
        "[tools.x]\ncommand = [\"true\"]\nretries = 2\nretry_backoff = \"30s\"\n\
         retry_on = [\"timeout\", \"exit:75\", \"http:5xx\", \"http:429\", \"spawn\"]\n\
         idempotent = false\n",
    );
    env.cmd(["check"]).output().code(0);
}

#[test]
fn an_approved_task_retries_under_its_approval() {
    let env = Env::new("## Recurring\n### Every 1d\n- [ ] @flaky {}\n");
    let toml = counting_tool(&env, "flaky", 1, 3, "retries = 1\nidempotent = true\n")
        .replace("approval = \"auto\"", "approval = \"ask\"");
    let env = env.config(&format!("timezone = \"UTC\"\n{toml}"));
    env.run_once(NOW).code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    // Approved, run, failed: it waits for its retry under the same approval.
    let out = env
        .cmd(["approve", "1"])
        .now(NOW)
        .user(crate::approve::USER)
        .output();
    out.code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("retrying"));
    assert_eq!(env.events("task_retry_scheduled").len(), 1);
    let t = decision(&env, &at(0));
    assert_eq!(t["decision"], "retry", "{t:#}");
    // `approvals` shows when.
    let out = env
        .cmd(["approvals", "--state", "retrying", "--json"])
        .now(&at(0))
        .output();
    out.code(0);
    let rows = out.json();
    assert_eq!(rows[0]["state"], "retrying", "{rows:#}");
    assert_eq!(
        rows[0]["retry_at"],
        env.events("task_retry_scheduled")[0]["at"],
        "{rows:#}"
    );
    let out = env
        .cmd(["approvals", "--state", "retrying"])
        .now(&at(0))
        .output();
    out.code(0);
    assert!(
        out.stdout.contains("(retry at 2026-05-01 10:01 UTC)"),
        "{}",
        out.stdout
    );
    // Nothing asks again meanwhile.
    env.run_once(&at(0)).code(0);
    assert_eq!(env.events("approval_requested").len(), 1);
    assert_eq!(calls(&env, "flaky"), 1);
    // The first run after its time runs it, under that approval, without asking again.
    let out = env.cmd(["run", "--once", "--json"]).now(&at(5)).output();
    out.code(0);
    let run = out.json();
    let line = &task_lines(&run)[0];
    assert_eq!(line["outcome"], "succeeded", "{run:#}");
    assert_eq!(line["approval_id"], 1, "{run:#}");
    assert_eq!(line["trigger"], "retry", "{run:#}");
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(env.events("approval_requested").len(), 1);
    assert_eq!(calls(&env, "flaky"), 2);
}
