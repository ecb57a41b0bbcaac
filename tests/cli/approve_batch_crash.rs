//! `approve --all` of many `@log` approvals, aborted around their batches
//! (docs/reference.md#at-most-once): approved work of tools without outside effects is claimed
//! up to 50 at a time in one durable commit, run, and its outcomes committed together. Aborted
//! before, inside or after a batch's claim commit, after some of its tools ran, or inside the
//! commit of their outcomes: no approval runs twice, every audit line has its SQLite record,
//! and the approvals left `running` are reported interrupted exactly once by the next run.

use std::collections::HashMap;

use crate::common::*;
use crate::crash::{assert_db_ok, many_tasks, scan_audit};

/// Approvals queued: two full batches and a part of one.
const APPROVALS: usize = 120;

/// Every `@log` task asks for a yes.
const ASK: &str =
    "autonomy = \"cautious\"\nmax_tasks_per_run = 0\n[tools.log]\napproval = \"ask\"\n";

/// Per approval id: its whole `task_succeeded` lines and `task_failed` lines.
fn outcome_lines(env: &Env) -> (HashMap<i64, usize>, HashMap<i64, usize>) {
    let (mut ok, mut failed) = (HashMap::new(), HashMap::new());
    for line in scan_audit(env).lines {
        let Some(id) = line["approval_id"].as_i64() else {
            continue;
        };
        match line["event"].as_str() {
            Some("task_succeeded") => *ok.entry(id).or_insert(0) += 1,
            Some("task_failed") => *failed.entry(id).or_insert(0) += 1,
            _ => {}
        }
    }
    (ok, failed)
}

/// Per approval id: (state, reason, `task_runs` rows).
fn stored(env: &Env) -> HashMap<i64, (String, Option<String>, i64)> {
    let db = env.db();
    let mut stmt = db
        .prepare(
            "SELECT id, state, reason,
             (SELECT COUNT(*) FROM task_runs WHERE approval_id = approvals.id)
             FROM approvals",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Every outcome line of an approval has its SQLite record: a success line an approval that
/// succeeded with its history row, a failure line one that failed; and no approval has more
/// than one outcome line or history row.
#[track_caller]
fn assert_lines_have_records(env: &Env) {
    let (ok, failed) = outcome_lines(env);
    let rows = stored(env);
    for (id, n) in &ok {
        assert_eq!(*n, 1, "approval #{id} has {n} success lines");
        let (state, _, runs) = &rows[id];
        assert_eq!((state.as_str(), *runs), ("succeeded", 1), "approval #{id}");
    }
    for (id, n) in &failed {
        assert_eq!(*n, 1, "approval #{id} has {n} failure lines");
        assert!(
            !ok.contains_key(id),
            "approval #{id} both succeeded and failed"
        );
        assert_eq!(rows[id].0, "failed", "approval #{id}");
    }
    for (id, (_, _, runs)) in &rows {
        assert!(*runs <= 1, "approval #{id} ran {runs} times");
    }
}

/// `approve --all --yes` aborted at `fault`, with `running` approvals left `running`; then
/// the next run recovers them (`interrupted`) and runs what stayed approved.
/// `lines_lost`: approvals whose outcome was committed but whose lines were never written.
fn abort_approve_all(fault: &str, running: usize, lines_lost: usize) {
    let env = Env::new(&many_tasks(APPROVALS)).config(ASK);
    env.run_once(NOW).code(0);
    assert_eq!(env.approval_rows().len(), APPROVALS);

    let out = env
        .cmd(["approve", "--all", "--yes"])
        .user("alice")
        .env("HEARTBEAT_FAULT", fault)
        .output();
    assert_eq!(out.code, None, "{fault}: not aborted: {}", out.stderr);
    let (point, nth) = fault.split_once(':').unwrap();
    assert!(
        out.stderr
            .contains(&format!("fault point {point} reached ({nth})")),
        "{}",
        out.stderr
    );
    assert_db_ok(&env);
    let scan = scan_audit(&env);
    assert!(scan.bad.is_empty() && scan.tail.is_none(), "{scan:?}");
    let rows = stored(&env);
    let left_running: Vec<i64> = rows
        .iter()
        .filter(|(_, (state, _, _))| state == "running")
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(
        left_running.len(),
        running,
        "{fault}: running after the crash"
    );
    // A running approval was claimed, and its outcome is not known: no line says one.
    let (ok, failed) = outcome_lines(&env);
    for id in &left_running {
        assert!(!ok.contains_key(id) && !failed.contains_key(id), "#{id}");
    }
    assert_lines_have_records(&env);

    // The next run says each running approval interrupted, and runs what stayed approved.
    let rec = env.run_once("2026-05-01T10:05:00Z");
    rec.code(if running > 0 { 1 } else { 0 });
    let rows = stored(&env);
    let (ok, failed) = outcome_lines(&env);
    for (id, (state, reason, runs)) in &rows {
        if *id > APPROVALS as i64 {
            // The task of an interrupted approval asks a person again; nothing runs it.
            assert_eq!(state, "pending", "#{id}");
        } else if left_running.contains(id) {
            assert_eq!(state, "failed", "#{id}");
            assert_eq!(reason.as_deref(), Some("interrupted"), "#{id}");
            assert_eq!(failed.get(id), Some(&1), "#{id}: interrupted once");
            // Its recovery record, never a run of its own.
            assert_eq!(*runs, 1, "#{id}");
        } else {
            assert_eq!(state, "succeeded", "#{id}");
        }
    }
    assert_eq!(failed.len(), running);
    assert_eq!(ok.len(), APPROVALS - running - lines_lost);
    assert_eq!(
        rec.stdout.contains("interrupted"),
        running > 0,
        "{}",
        rec.stdout
    );
    assert_lines_have_records(&env);

    // Nothing of these approvals runs again: more runs, and a person approving everything
    // pending (new approvals of the interrupted tasks, which may run), change none of their
    // records.
    let of_these = |env: &Env| {
        let (ok, failed) = outcome_lines(env);
        let mut rows = stored(env);
        rows.retain(|id, _| *id <= APPROVALS as i64);
        (ok, failed, rows)
    };
    let before = of_these(&env);
    env.run_once("2026-05-01T11:00:00Z").no_panic();
    env.cmd(["approve", "--all", "--yes"])
        .user("bob")
        .output()
        .no_panic();
    env.run_once("2026-05-01T12:00:00Z").no_panic();
    let (ok, failed, rows) = of_these(&env);
    assert_eq!(rows, before.2, "{fault}: ran again");
    for id in 1..=APPROVALS as i64 {
        let lines = |m: &HashMap<i64, usize>| m.get(&id).copied().unwrap_or(0);
        assert_eq!(lines(&ok), lines(&before.0), "#{id}");
        assert_eq!(lines(&failed), lines(&before.1), "#{id}");
    }
    assert_lines_have_records(&env);
}

#[test]
fn aborted_inside_the_first_claim_claims_nothing() {
    abort_approve_all("claiming:1", 0, 0);
    abort_approve_all("claiming:50", 0, 0);
}

#[test]
fn aborted_after_the_claim_commit_leaves_the_batch_interrupted() {
    abort_approve_all("approval_claimed:1", 50, 0);
}

#[test]
fn aborted_after_some_of_the_batch_ran_leaves_the_batch_interrupted() {
    // 19 ran, the 20th ran too, none recorded: nobody knows how they went.
    abort_approve_all("task_done:20", 50, 0);
}

#[test]
fn aborted_inside_the_commit_of_the_outcomes_leaves_the_batch_interrupted() {
    abort_approve_all("sqlite_commit:30", 50, 0);
}

#[test]
fn aborted_after_the_outcomes_commit_keeps_them_without_their_lines() {
    abort_approve_all("batch_committed:1", 0, 50);
}

#[test]
fn aborted_in_the_second_batch_keeps_the_first_and_interrupts_the_second() {
    // The first batch recorded, the second claimed.
    abort_approve_all("approval_claimed:51", 50, 0);
    // The last batch (20) inside its claim, after two recorded.
    abort_approve_all("claiming:110", 0, 0);
}
