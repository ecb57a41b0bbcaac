//! Times typed on the command line (`--now`, `log --since`; docs/reference.md#clock): RFC 3339, a
//! local time or date in the configured zone, and for `--since` a duration, `today` or
//! `yesterday`; a bad one names the flag and the forms it takes.

use serde_json::Value;

use crate::common::*;

const BERLIN: &str = "timezone = \"Europe/Berlin\"\n";
const DAILY: &str = "## Recurring\n### Daily at 02:00\n- [ ] @log {\"text\": \"a\"}\n";

/// `check --json` at `now` (as typed), its one task.
fn task_at(env: &Env, now: &str) -> Value {
    let doc = env.cmd(["check", "--json"]).now(now).output().json();
    doc["tasks"][0].clone()
}

#[test]
fn now_takes_a_local_time_or_date_in_the_configured_zone() {
    let env = Env::new(DAILY).config(BERLIN);
    // 02:00 in Berlin is 01:00 UTC in December: the local form is that instant.
    for (local, instant, decision) in [
        ("2026-12-07T02:00", "2026-12-07T01:00:00Z", "run"),
        ("2026-12-07 01:59", "2026-12-07T00:59:00Z", "not_due"),
        ("2026-12-07", "2026-12-06T23:00:00Z", "not_due"),
    ] {
        let by_local = task_at(&env, local);
        assert_eq!(by_local["decision"], decision, "{local}: {by_local}");
        assert_eq!(by_local, task_at(&env, instant), "{local} is {instant}");
    }
    // A dry run decides the same, and runs nothing.
    let out = env
        .cmd(["run", "--once", "--dry-run", "--json"])
        .now("2026-12-07T02:00")
        .output();
    out.code(0);
    let plan = out.json();
    assert_eq!(plan["tasks"].as_array().map(Vec::len), Some(1), "{plan:#}");
    let out = env
        .cmd(["run", "--once", "--dry-run", "--json"])
        .now("2026-12-07T01:59")
        .output();
    out.code(0);
    assert_eq!(out.json()["tasks"], serde_json::json!([]), "{out:?}");
    assert!(env.audit_text().is_empty());
    // The DST night: 02:30 does not exist on 2026-03-29 and is read as the end of the gap,
    // as schedules read it.
    assert_eq!(
        task_at(&env, "2026-03-29T02:30")["next_due"],
        task_at(&env, "2026-03-29T03:00:00+02:00")["next_due"]
    );
}

#[test]
fn a_bad_now_names_the_flag_and_the_forms() {
    let env = Env::new(DAILY).config(BERLIN);
    for bad in ["yesterday", "2026-12-07T25:00", "7 Dec 2026"] {
        let out = env.cmd(["check"]).now(bad).output();
        out.code(2);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!(
                "heartbeat: invalid value '{bad}' for '--now <RFC3339>'"
            )) && first.contains("RFC 3339")
                && first.contains("2026-12-07T02:00")
                && first.contains("2026-12-07 02:00"),
            "{out:?}"
        );
    }
}

#[test]
fn since_takes_today_yesterday_and_local_times() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"a\"}\n").config(BERLIN);
    // Runs on 6 December at 22:30 and 23:30 Berlin time, and on 7 December at 09:00.
    for now in [
        "2026-12-06T21:30:00Z",
        "2026-12-06T22:30:00Z",
        "2026-12-07T08:00:00Z",
    ] {
        env.run_once(now).code(0);
    }
    let runs = |since: &str| {
        let out = env
            .cmd(["log", "--json", "--event", "run_started", "--since", since])
            .now("2026-12-07T10:00:00Z")
            .output();
        out.code(0);
        out.stdout.lines().count()
    };
    assert_eq!(runs("today"), 1);
    assert_eq!(runs("yesterday"), 3);
    assert_eq!(runs("2026-12-07"), 1);
    // Berlin is an hour ahead of UTC in December.
    assert_eq!(runs("2026-12-06T23:00"), 2);
    assert_eq!(runs("2026-12-06 22:30"), 3);
    assert_eq!(runs("2026-12-06T22:30:00Z"), 2);
    assert_eq!(runs("2h"), 1);
    assert_eq!(runs("1d"), 3);

    let out = env
        .cmd(["log", "--since", "last week"])
        .now("2026-12-07T10:00:00Z")
        .output();
    out.code(2);
    let err = out.stderr.trim_end();
    assert!(
        err.starts_with("heartbeat: --since: \"last week\" is not a time: expected")
            && err.contains("yesterday")
            && err.contains("2026-12-07T02:00"),
        "{err}"
    );
}
