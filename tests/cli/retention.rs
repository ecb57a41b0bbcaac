//! Retention (docs/reference.md#retention): the audit log is rotated past
//! `retention.audit_max_size`, whole lines only, keeping `audit_keep` files that `log` reads too;
//! old state is pruned once a day (`state_pruned`); bad values are refused at load.

use std::fs;

use serde_json::Value;

use crate::common::*;

const MD: &str = "## Recurring\n- [ ] @log {\"text\": \"a line of text long enough to fill the log a little faster, again and again\"}\n";

/// Every line of one audit file, parsed (panics on a torn or bad line).
fn lines_of(env: &Env, name: &str) -> Vec<Value> {
    let text = fs::read_to_string(env.state().join(name)).unwrap();
    assert!(text.ends_with('\n'), "{name} does not end with a newline");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

#[test]
fn the_audit_log_is_rotated_whole_and_log_reads_every_file_in_order() {
    let env = Env::new(MD)
        .config("autonomy = \"full\"\n[retention]\naudit_max_size = \"1KiB\"\naudit_keep = 2\n");
    for hour in 10..20 {
        env.run_once(&format!("2026-05-01T{hour}:00:00Z")).code(0);
    }
    assert!(env.state().join("audit.jsonl.1").exists());
    assert!(env.state().join("audit.jsonl.2").exists());
    assert!(
        !env.state().join("audit.jsonl.3").exists(),
        "audit_keep = 2"
    );
    let current = lines_of(&env, "audit.jsonl");
    assert_eq!(current[0]["event"], "audit_rotated", "{:?}", current[0]);
    assert!(
        current[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("audit.jsonl.1")
    );
    assert!(current[0]["bytes"].as_u64().unwrap() > 1024);
    // Each rotated file is whole lines, and starts where a run starts or a rotation left off.
    let older = lines_of(&env, "audit.jsonl.2");
    let old = lines_of(&env, "audit.jsonl.1");
    // `log` reads them all, oldest first.
    let out = env.cmd(["log", "--json"]).output();
    out.code(0);
    let shown: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let in_order: Vec<Value> = older.into_iter().chain(old).chain(current).collect();
    assert_eq!(shown, in_order, "log shows the files oldest first");
    // --since starts inside them.
    let since = env
        .cmd(["log", "--json", "--since", "2026-05-01T18:00:00Z"])
        .output();
    since.code(0);
    assert!(since.stdout.lines().count() < shown.len());
    assert!(since.stdout.contains("2026-05-01T18:00:00.000Z"));
}

#[test]
fn old_state_is_pruned_once_a_day_and_what_schedules_need_stays() {
    let env = Env::new(MD).config("autonomy = \"full\"\n[retention]\nhistory = \"30d\"\n");
    env.run_once("2026-01-01T10:00:00Z").code(0);
    env.run_once("2026-01-01T11:00:00Z").code(0);
    // Retention ran, and says so, although nothing was old yet; once that day.
    let pruned = env.events("state_pruned");
    assert_eq!(pruned.len(), 1, "{}", env.audit_text());
    assert_eq!(pruned[0]["rows"], 0);
    env.run_once("2026-05-01T10:00:00Z").code(0);
    let pruned = env.events("state_pruned");
    assert_eq!(pruned.len(), 2, "{}", env.audit_text());
    // Two old runs and their two task runs.
    assert_eq!(pruned[1]["rows"], 4);
    // Once a day.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.events("state_pruned").len(), 2);
    let runs: i64 = env
        .db()
        .query_row("SELECT COUNT(*) FROM task_runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 2);
    env.cmd(["status"]).output().code(0);
}

/// `approval_ttl` holds back only the denials that still hold their task: history older than
/// `retention.history` goes even when `approval_ttl` is longer.
#[test]
fn a_long_approval_ttl_keeps_only_the_denials_that_still_hold_a_task() {
    let env =
        Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n- [ ] @shell {\"cmd\": \"true\"}\n")
            .config("approval_ttl = \"30d\"\n[retention]\nhistory = \"1d\"\n");
    env.run_once("2026-05-01T10:00:00Z").code(0);
    let denied = env.approval_rows();
    assert_eq!(denied.len(), 1, "{denied:?}");
    env.cmd(["deny", "1"])
        .now("2026-05-01T10:05:00Z")
        .output()
        .code(0);
    // Nine days on: the first day's history is past `history`, the denial within the ttl.
    env.run_once("2026-05-10T10:00:00Z").code(0);
    let pruned = env.events("state_pruned");
    assert_eq!(pruned.len(), 2, "{}", env.audit_text());
    assert!(
        pruned[1]["rows"].as_u64().unwrap() >= 2,
        "the first day's run and its @log: {}",
        pruned[1]
    );
    let old_runs: i64 = env
        .db()
        .query_row(
            "SELECT COUNT(*) FROM task_runs WHERE started_at < '2026-05-02'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        old_runs, 0,
        "history older than retention.history is pruned"
    );
    assert_eq!(env.approval_state(1).as_deref(), Some("denied"));
    // The denial still holds the task: it is not asked for again.
    assert!(
        env.events("approval_requested").len() == 1,
        "{}",
        env.audit_text()
    );
}

#[test]
fn bad_retention_values_are_refused_naming_the_key() {
    for (toml, key) in [
        ("[retention]\nhistory = \"1h\"\n", "retention.history"),
        (
            "[retention]\naudit_max_size = \"12 parsecs\"\n",
            "retention.audit_max_size",
        ),
        ("[retention]\naudit_keep = 0\n", "retention.audit_keep"),
        ("[retention]\nkeep = 3\n", "retention"),
    ] {
        let env = Env::new(MD).config(toml);
        let out = env.run_once(NOW);
        out.code(2);
        assert!(out.stderr.contains(key), "{toml}: {}", out.stderr);
        assert!(!env.audit_path().exists(), "{toml}: something ran");
    }
}

/// A broken config must not lock the person out of what they need to debug it
/// (docs/reference.md#config): `status`, `log`, `approvals` and `grants` read the state dir named
/// by `--state-dir` or by the broken file's `state_dir` line, with the config error as a warning.
#[test]
fn read_only_commands_work_with_a_broken_config() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": [\"true\"]}\n")
        .config("state_dir = \"mystate\"\n");
    let run = env.cmd(["run", "--once"]).without_state_dir().output();
    run.code(0);
    assert!(env.path("mystate/audit.jsonl").exists());
    // Now a typo breaks the config.
    env.write(
        "heartbeat.toml",
        "state_dir = \"mystate\"\nautonomy = \"ful\"\n",
    );
    for args in [
        vec!["status", "--json"],
        vec!["approvals", "--json"],
        vec!["log", "--json"],
        vec!["grants", "--json"],
    ] {
        let out = env.cmd(args.clone()).without_state_dir().output();
        out.code(0);
        assert!(
            out.stderr.contains("warning") && out.stderr.contains("autonomy"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("mystate"), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.is_empty(), "{args:?}");
        for line in out.stdout.lines().filter(|_| args[0] == "log") {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
        if args[0] != "log" {
            out.json();
        }
    }
    let approvals = env
        .cmd(["approvals", "--json"])
        .without_state_dir()
        .output()
        .json();
    assert_eq!(
        approvals.as_array().unwrap().len(),
        1,
        "the run's approval shows"
    );
    // Everything else still refuses.
    let out = env.cmd(["run", "--once"]).without_state_dir().output();
    out.code(2);
    let out = env.cmd(["check"]).without_state_dir().output();
    out.code(2);
    // --state-dir wins over the file's line.
    let out = env.cmd(["status", "--json"]).output();
    out.code(0);
    assert!(
        out.stderr.contains(&env.state().display().to_string()),
        "{}",
        out.stderr
    );
}
