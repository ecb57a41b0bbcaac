//! What ran: one `task_runs` row per tool run, each task's state (attempts, outcome, failure
//! streak, trip, reminder), each tool's latest start, the day's spend, and the runs.
//!
//! Invariants:
//! - A tool run is recorded in one IMMEDIATE transaction: its history row, its tool's start,
//!   its task's state and, for approved work, the approval's outcome (`running → succeeded |
//!   failed`) are committed together or not at all. Successes of tools without outside
//!   effects may share one transaction ([`Store::record_task_runs`]), approved ones too: that
//!   transaction is then committed with `synchronous = FULL`, like every approval's outcome.
//! - A task that succeeded has `last_success` set: that is what keeps a one-time task from
//!   running again.
//! - `tool_state` holds, per tool, the latest `started_at` of its `task_runs` rows.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::metrics::RunTally;
use super::{Result, Sqlite, format_ts};
use crate::report::RunCounts;

/// A finished tool run, for history and the day's spend.
pub(crate) struct TaskRunRecord<'a> {
    pub run_id: &'a str,
    pub task_id: &'a str,
    pub tool: &'a str,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub succeeded: bool,
    /// The run that started it died (an approval found `running`): its outcome is
    /// `interrupted` (a failure, for the task's streak).
    pub interrupted: bool,
    pub cost_usd: Option<f64>,
    pub approval_id: Option<i64>,
    /// Why it failed, kept as the approval's reason (redacted: a row is a sink).
    pub error: Option<&'a crate::text::Redacted>,
    /// It retried a failed run of its task (docs/reference.md#retries): not a new attempt,
    /// so the task's last attempt stays the chain's first.
    pub retried: bool,
    /// A failure that is tried again at this time: the chain goes on, and the task's
    /// failure streak does not grow (the chain counts once, when its last attempt fails).
    pub retry_at: Option<DateTime<Utc>>,
    /// A failure tried again because the tool never started: its outcome is `not_started`.
    pub not_started: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunSummary {
    pub run_id: String,
    pub started_at: String,
    pub succeeded: i64,
    pub failed: i64,
}

/// `cost_usd IS NOT NULL` (SUM ignores NULLs anyway) lets the partial index task_runs_cost
/// answer this alone.
const SPENT_SINCE: &str = "SELECT COALESCE(SUM(cost_usd), 0.0) FROM task_runs
     WHERE started_at >= ?1 AND cost_usd IS NOT NULL";

/// What ran: tool runs (their history row, tool start, task state and, for approved work,
/// the approval's outcome committed together), attempts, trips, runs and the day's spend.
pub(crate) trait History {
    /// Record a finished tool run: history, the tool's start, the task's outcome and failure
    /// streak, and an approval's outcome. Returns the task's failures in a row after this run.
    /// Approved work is committed with `synchronous = FULL`, like every change of an
    /// approval's state.
    fn record_task_run(&mut self, r: &TaskRunRecord) -> Result<u32>;

    /// Record several finished tool runs in one transaction, each as [`record_task_run`]
    /// records it. Only for successes of tools without outside effects, whose loss in a
    /// crash costs nothing but running them again, or, for approved work (claimed before it
    /// ran), its being reported interrupted (docs/reference.md#at-most-once). Committed at
    /// `synchronous = NORMAL`; with approved work among them, `FULL`.
    ///
    /// [`record_task_run`]: History::record_task_run
    fn record_task_runs(&mut self, runs: &[TaskRunRecord]) -> Result<()>;

    /// Remember that a task was attempted (run, queued or reminded) at `now`.
    fn record_attempt(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()>;

    /// Remember a one-time reminder as given.
    fn record_reminded(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()>;

    /// Mark a task tripped by the failure breaker.
    fn trip(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()>;

    /// Clear a task's failure count and trip. None when heartbeat knows nothing of the
    /// task; else the failures in a row it had and whether it was tripped.
    fn reset(&mut self, task_id: &str) -> Result<Option<(u32, bool)>>;

    /// Every task id with a stored state (for resolving an id prefix).
    fn task_ids(&self) -> Result<Vec<String>>;

    /// Whether the failure breaker tripped this task.
    fn is_tripped(&self, task_id: &str) -> Result<bool>;

    /// Tasks tripped by the failure breaker.
    fn tripped(&self) -> Result<Vec<String>>;

    /// Sum of reported costs of tool runs started at or after `since`.
    fn spent_since(&self, since: DateTime<Utc>) -> Result<f64>;

    /// When the latest run recorded in this state dir began (before this one is recorded).
    fn last_start(&self) -> Result<Option<DateTime<Utc>>>;

    fn start_run(&mut self, run_id: &str, mode: &str, now: DateTime<Utc>) -> Result<()>;

    /// Record the run's counts and add its tally to the totals (`super::metrics`), in one
    /// transaction.
    fn finish_run(
        &mut self,
        run_id: &str,
        now: DateTime<Utc>,
        c: RunCounts,
        tally: &RunTally,
    ) -> Result<()>;

    /// The most recent run that finished.
    fn last_run(&self) -> Result<Option<RunSummary>>;

    /// The failed attempts of the task's retry chain and when it is tried again, while a
    /// retry of it waits (docs/reference.md#retries); None when none does.
    fn retry_chain(&self, task_id: &str) -> Result<Option<(u32, DateTime<Utc>)>>;

    /// The earliest time a stored retry waits for (the daemon wakes for it).
    fn next_retry(&self) -> Result<Option<DateTime<Utc>>>;
}

impl History for Sqlite {
    fn retry_chain(&self, task_id: &str) -> Result<Option<(u32, DateTime<Utc>)>> {
        let row: Option<(u32, String)> = self
            .conn
            .query_row(
                "SELECT retry_failures, retry_at FROM task_state
                 WHERE task_id = ?1 AND retry_at IS NOT NULL",
                [task_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(row.and_then(|(n, at)| Some((n, super::parse_ts(&at)?))))
    }

    fn next_retry(&self) -> Result<Option<DateTime<Utc>>> {
        let at: Option<String> = self
            .conn
            .query_row(
                "SELECT MIN(retry_at) FROM task_state WHERE retry_at IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(at.as_deref().and_then(super::parse_ts))
    }

    fn record_task_run(&mut self, r: &TaskRunRecord) -> Result<u32> {
        let write = |conn: &mut Connection| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let failures = write_task_run(&tx, r)?;
            crate::fault::point("sqlite_commit");
            tx.commit()?;
            Ok(failures)
        };
        if r.approval_id.is_some() {
            self.durable(write)
        } else {
            write(&mut self.conn).map_err(|e| self.err(e))
        }
    }

    fn record_task_runs(&mut self, runs: &[TaskRunRecord]) -> Result<()> {
        let write = |conn: &mut Connection| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for r in runs {
                write_task_run(&tx, r)?;
                // Reached once per run, as in `record_task_run`.
                crate::fault::point("sqlite_commit");
            }
            tx.commit()
        };
        if runs.iter().any(|r| r.approval_id.is_some()) {
            self.durable(write)
        } else {
            write(&mut self.conn).map_err(|e| self.err(e))
        }
    }

    fn record_attempt(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO task_state (task_id, last_attempt) VALUES (?1, ?2)
                 ON CONFLICT(task_id) DO UPDATE SET last_attempt = excluded.last_attempt",
                params![task_id, format_ts(now)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn record_reminded(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO task_state (task_id, last_attempt, reminded_at) VALUES (?1, ?2, ?2)
                 ON CONFLICT(task_id) DO UPDATE SET last_attempt = ?2, reminded_at = ?2",
                params![task_id, format_ts(now)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn trip(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        self.durable(|conn| {
            conn.execute(
                "UPDATE task_state SET tripped_at = ?2 WHERE task_id = ?1",
                params![task_id, format_ts(now)],
            )
        })
        .map(drop)
    }

    fn reset(&mut self, task_id: &str) -> Result<Option<(u32, bool)>> {
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let before = tx
                .query_row(
                    "SELECT consecutive_failures, tripped_at IS NOT NULL FROM task_state
                     WHERE task_id = ?1",
                    [task_id],
                    |r| Ok((r.get::<_, u32>(0)?, r.get::<_, bool>(1)?)),
                )
                .optional()?;
            if before.is_some() {
                tx.execute(
                    "UPDATE task_state SET consecutive_failures = 0, tripped_at = NULL
                     WHERE task_id = ?1",
                    [task_id],
                )?;
            }
            tx.commit()?;
            Ok(before)
        })
    }

    fn task_ids(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id FROM task_state UNION SELECT task_id FROM starts ORDER BY task_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn is_tripped(&self, task_id: &str) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM task_state
                 WHERE task_id = ?1 AND tripped_at IS NOT NULL)",
                [task_id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    fn tripped(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT task_id FROM task_state WHERE tripped_at IS NOT NULL ORDER BY task_id")
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn spent_since(&self, since: DateTime<Utc>) -> Result<f64> {
        self.conn
            .query_row(SPENT_SINCE, [format_ts(since)], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    fn last_start(&self) -> Result<Option<DateTime<Utc>>> {
        let at: Option<String> = self
            .conn
            .query_row(
                "SELECT started_at FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(at.as_deref().and_then(super::parse_ts))
    }

    fn start_run(&mut self, run_id: &str, mode: &str, now: DateTime<Utc>) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO runs (run_id, mode, started_at) VALUES (?1, ?2, ?3)",
                params![run_id, mode, format_ts(now)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn finish_run(
        &mut self,
        run_id: &str,
        now: DateTime<Utc>,
        c: RunCounts,
        tally: &RunTally,
    ) -> Result<()> {
        let write = |conn: &mut Connection| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute(
                "UPDATE runs SET finished_at = ?2, succeeded = ?3, failed = ?4, queued = ?5,
                 skipped = ?6, invalid = ?7 WHERE run_id = ?1",
                params![
                    run_id,
                    format_ts(now),
                    c.succeeded as i64,
                    c.failed as i64,
                    c.queued as i64,
                    c.skipped as i64,
                    c.invalid as i64
                ],
            )?;
            super::metrics::add_tally(&tx, tally, now)?;
            tx.commit()
        };
        write(&mut self.conn).map_err(|e| self.err(e))
    }

    fn last_run(&self) -> Result<Option<RunSummary>> {
        self.conn
            .query_row(
                "SELECT run_id, started_at, succeeded, failed FROM runs
                 WHERE finished_at IS NOT NULL ORDER BY started_at DESC, rowid DESC LIMIT 1",
                [],
                |r| {
                    Ok(RunSummary {
                        run_id: r.get(0)?,
                        started_at: r.get(1)?,
                        succeeded: r.get(2)?,
                        failed: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}

/// The `outcome` of a tool run's history row: succeeded or failed, or `not_started` for an
/// attempt that never started and is tried again (docs/reference.md#retries).
pub(super) fn run_outcome(r: &TaskRunRecord) -> &'static str {
    if r.not_started && r.retry_at.is_some() {
        NOT_STARTED
    } else {
        crate::model::Outcome::of_run(r.succeeded).as_str()
    }
}

/// The outcome word of an attempt that never started.
const NOT_STARTED: &str = "not_started";

/// The outcome a tool run adds to the `tasks` total, as `run --json` says it: a failure
/// tried again is `retry_scheduled`.
pub(super) fn counted_outcome(r: &TaskRunRecord) -> crate::model::Outcome {
    match (r.interrupted, r.retry_at) {
        (true, _) => crate::model::Outcome::Interrupted,
        (false, Some(_)) => crate::model::Outcome::RetryScheduled,
        (false, None) => crate::model::Outcome::of_run(r.succeeded),
    }
}

/// The statements of [`History::record_task_run`], inside its transaction. They run at every
/// tool run, so they are prepared once per connection (rusqlite's statement cache).
fn write_task_run(tx: &Transaction, r: &TaskRunRecord) -> rusqlite::Result<u32> {
    let (started, finished) = (format_ts(r.started_at), format_ts(r.finished_at));
    // The outcome settles the start this run recorded (with the history row, atomically).
    tx.prepare_cached("DELETE FROM starts WHERE task_id = ?1 AND run_id = ?2")?
        .execute(params![r.task_id, r.run_id])?;
    tx.prepare_cached(
        "INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at, outcome,
            cost_usd, approval_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        r.run_id,
        r.task_id,
        r.tool,
        started,
        finished,
        run_outcome(r),
        r.cost_usd,
        r.approval_id
    ])?;
    tx.prepare_cached(
        "INSERT INTO tool_state (tool, last_start) VALUES (?1, ?2)
         ON CONFLICT(tool) DO UPDATE SET last_start = excluded.last_start
            WHERE excluded.last_start > tool_state.last_start",
    )?
    .execute(params![r.tool, started])?;
    if let Some(id) = r.approval_id {
        let retried = r.retry_at.is_some();
        super::approvals::finish_approval(tx, id, r.succeeded, retried, r.error, r.finished_at)?;
    }
    let outcome = counted_outcome(r).as_str();
    super::metrics::increment(tx, "tasks", r.tool, outcome, 1)?;
    // A retry is not a new attempt: the chain's first attempt stays the task's last one.
    let attempt = match r.retried {
        true => None,
        false => Some(started),
    };
    // A failure tried again later does not add to the streak: the chain counts once.
    let (retry_at, counted) = match r.retry_at {
        Some(at) => (Some(format_ts(at)), 0),
        None => (None, 1),
    };
    if r.succeeded {
        tx.prepare_cached(
            "INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome,
                consecutive_failures, last_success_tool) VALUES (?1, ?2, ?3, 'succeeded', 0, ?4)
             ON CONFLICT(task_id) DO UPDATE SET
                last_attempt = COALESCE(excluded.last_attempt, task_state.last_attempt),
                last_success = excluded.last_success, last_outcome = 'succeeded',
                consecutive_failures = 0, last_success_tool = excluded.last_success_tool,
                retry_at = NULL, retry_failures = 0",
        )?
        .execute(params![r.task_id, attempt, finished, r.tool])?;
        return Ok(0);
    }
    tx.prepare_cached(
        "INSERT INTO task_state (task_id, last_attempt, last_outcome, consecutive_failures,
            retry_at, retry_failures)
            VALUES (?1, ?2, 'failed', ?3, ?4, CASE WHEN ?4 IS NULL THEN 0 ELSE 1 END)
         ON CONFLICT(task_id) DO UPDATE SET
            last_attempt = COALESCE(excluded.last_attempt, task_state.last_attempt),
            last_outcome = 'failed',
            consecutive_failures = task_state.consecutive_failures + ?3,
            retry_at = excluded.retry_at,
            retry_failures = CASE WHEN excluded.retry_at IS NULL THEN 0
                ELSE task_state.retry_failures + 1 END
         RETURNING consecutive_failures",
    )?
    .query_row(params![r.task_id, attempt, counted, retry_at], |row| {
        row.get(0)
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::test_util::{conn, ts};
    use super::*;
    use crate::store::{History, Snapshots};
    use rusqlite::Connection;
    use std::time::Duration;

    pub(in crate::store) fn run_of<'a>(
        task: &'a str,
        tool: &'a str,
        at: &str,
        ok: bool,
    ) -> TaskRunRecord<'a> {
        TaskRunRecord {
            run_id: "r",
            task_id: task,
            tool,
            started_at: ts(at),
            finished_at: ts(at) + chrono::Duration::seconds(1),
            succeeded: ok,
            interrupted: false,
            cost_usd: None,
            approval_id: None,
            error: None,
            retried: false,
            retry_at: None,
            not_started: false,
        }
    }

    pub(in crate::store) fn task_state_rows(conn: &Connection) -> Vec<Vec<Option<String>>> {
        let mut st = conn
            .prepare(
                "SELECT task_id, last_attempt, last_success, last_outcome,
                 CAST(consecutive_failures AS TEXT), reminded_at, tripped_at
                 FROM task_state ORDER BY task_id",
            )
            .unwrap();
        st.query_map([], |r| (0..7).map(|i| r.get(i)).collect())
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// tool_state holds what `MAX(started_at) ... GROUP BY tool` over the history says.
    pub(in crate::store) fn assert_tool_state_matches_history(s: &Sqlite) {
        let read = |sql: &str| -> Vec<(String, String)> {
            let mut st = conn(s).prepare(sql).unwrap();
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        assert_eq!(
            read("SELECT tool, last_start FROM tool_state ORDER BY tool"),
            read("SELECT tool, MAX(started_at) FROM task_runs GROUP BY tool ORDER BY tool")
        );
    }

    #[test]
    fn a_batch_of_runs_finishes_the_approvals_among_them() {
        use crate::store::Approvals;
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let now = ts("2026-01-01T10:00:00Z");
        let input = serde_json::json!({"text": "x"});
        let approval = super::super::approvals::tests::new_approval("a", &input);
        let id = s.queue_approval(&approval, now).unwrap().unwrap();
        let yes = crate::store::Decision {
            approve: true,
            by: "cli:ann".into(),
            reason: None,
            always: false,
        };
        assert!(s.decide(id, &yes, now).unwrap());
        assert_eq!(s.claim_many(&[id], "r").unwrap(), [id]);
        let approved = TaskRunRecord {
            approval_id: Some(id),
            retried: false,
            retry_at: None,
            not_started: false,
            ..run_of("a", "log", "2026-01-01T10:00:00Z", true)
        };
        s.record_task_runs(&[run_of("b", "log", "2026-01-01T10:00:00Z", true), approved])
            .unwrap();
        let state = s.approval(id).unwrap().unwrap().state;
        assert_eq!(state, crate::model::ApprovalState::Succeeded);
        let with_approval: i64 = conn(&s)
            .query_row(
                "SELECT COUNT(*) FROM task_runs WHERE approval_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(with_approval, 1);
        assert_eq!(task_state_rows(conn(&s)).len(), 2);
    }

    #[test]
    fn task_runs_track_spend_and_streaks() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let rec = |ok: bool, at: &str, cost: Option<f64>| TaskRunRecord {
            cost_usd: cost,
            finished_at: ts(at),
            retried: false,
            retry_at: None,
            not_started: false,
            ..run_of("t", "shell", at, ok)
        };
        let fails = |s: &Sqlite| -> i64 {
            conn(s)
                .query_row("SELECT consecutive_failures FROM task_state", [], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        s.record_task_run(&rec(false, "2026-01-01T10:00:00Z", Some(0.5)))
            .unwrap();
        s.record_task_run(&rec(false, "2026-01-02T10:00:00Z", Some(0.25)))
            .unwrap();
        assert_eq!(fails(&s), 2);
        s.record_task_run(&rec(true, "2026-01-02T11:00:00Z", None))
            .unwrap();
        assert_eq!(fails(&s), 0);
        assert_eq!(s.spent_since(ts("2026-01-02T00:00:00Z")).unwrap(), 0.25);
        let snap = s
            .snapshot(
                ts("2026-01-03T00:00:00Z"),
                Duration::from_secs(60),
                ts("2000-01-01T00:00:00Z"),
            )
            .unwrap();
        assert_eq!(snap.last_attempt["t"], ts("2026-01-02T11:00:00Z"));
    }

    #[test]
    fn every_run_is_a_history_row_and_one_time_successes_are_done() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let at = "2026-01-01T10:00:00Z";
        for r in [
            run_of("o1", "log", at, true),
            run_of("f", "log", "2026-01-01T09:00:00Z", false),
            run_of("f", "log", at, true),
            TaskRunRecord {
                cost_usd: Some(0.25),
                retried: false,
                retry_at: None,
                not_started: false,
                ..run_of("paid", "llm", at, true)
            },
            TaskRunRecord {
                approval_id: Some(7),
                retried: false,
                retry_at: None,
                not_started: false,
                ..run_of("asked", "log", at, true)
            },
            run_of("x", "log", at, false),
        ] {
            s.record_task_run(&r).unwrap();
        }
        let rows: Vec<(String, String, Option<f64>, Option<i64>)> = conn(&s)
            .prepare(
                "SELECT task_id, outcome, cost_usd, approval_id FROM task_history
                 ORDER BY task_id, started_at",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let row = |t: &str, o: &str, c, a| (t.to_string(), o.to_string(), c, a);
        assert_eq!(
            rows,
            [
                row("asked", "succeeded", None, Some(7)),
                row("f", "failed", None, None),
                row("f", "succeeded", None, None),
                row("o1", "succeeded", None, None),
                row("paid", "succeeded", Some(0.25), None),
                row("x", "failed", None, None),
            ]
        );
        let snap = s
            .snapshot(
                ts("2026-01-01T11:00:00Z"),
                Duration::from_secs(60),
                ts("2026-01-01T00:00:00Z"),
            )
            .unwrap();
        let mut done: Vec<&str> = snap.succeeded.iter().map(String::as_str).collect();
        done.sort();
        assert_eq!(done, ["asked", "f", "o1", "paid"]);
        assert_eq!(
            snap.failures,
            std::collections::HashMap::from([("x".to_string(), 1)])
        );
        assert_eq!(snap.spent_today, 0.25);
        // `reset` knows a done task, with nothing to clear.
        assert_eq!(s.reset("o1").unwrap(), Some((0, false)));
        assert_eq!(s.reset("x").unwrap(), Some((1, false)));
        assert_eq!(s.reset("nothing").unwrap(), None);
    }

    #[test]
    fn tool_state_keeps_each_tools_latest_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        for (task, tool, at, ok) in [
            ("a", "log", "2026-01-01T10:00:00Z", true),
            ("b", "log", "2026-01-01T10:00:00Z", true),
            ("c", "shell", "2026-01-01T10:00:00Z", true),
            ("d", "log", "2026-01-01T11:00:00Z", true),
            // An earlier start after a later one does not move it back.
            ("e", "log", "2026-01-01T09:00:00Z", true),
            ("a", "log", "2026-01-01T08:00:00Z", false),
            ("c", "shell", "2026-01-01T12:00:00Z", true),
            ("b", "log", "2026-01-01T12:00:00Z", true),
        ] {
            s.record_task_run(&run_of(task, tool, at, ok)).unwrap();
            assert_tool_state_matches_history(&s);
        }
        let snap = s
            .snapshot(
                ts("2026-01-02T00:00:00Z"),
                Duration::from_secs(60),
                ts("2026-01-01T00:00:00Z"),
            )
            .unwrap();
        assert_eq!(snap.tool_last_start["log"], ts("2026-01-01T12:00:00Z"));
        assert_eq!(snap.tool_last_start["shell"], ts("2026-01-01T12:00:00Z"));
        // Cooldowns look a week back.
        let snap = s
            .snapshot(
                ts("2026-01-08T12:30:00Z"),
                Duration::from_secs(60),
                ts("2026-01-08T00:00:00Z"),
            )
            .unwrap();
        assert!(
            snap.tool_last_start.is_empty(),
            "{:?}",
            snap.tool_last_start
        );
    }

    #[test]
    fn a_run_that_cannot_be_recorded_records_nothing_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        conn(&s)
            .execute_batch(
                "CREATE TRIGGER frozen BEFORE INSERT ON task_state
                 BEGIN SELECT RAISE(ABORT, 'frozen'); END;",
            )
            .unwrap();
        let err = s
            .record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", true))
            .unwrap_err();
        assert!(err.to_string().contains("frozen"), "{err}");
        let runs: i64 = conn(&s)
            .query_row("SELECT COUNT(*) FROM task_runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 0);
        let tools: i64 = conn(&s)
            .query_row("SELECT COUNT(*) FROM tool_state", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tools, 0);
        // The store goes on working.
        conn(&s).execute_batch("DROP TRIGGER frozen").unwrap();
        s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", true))
            .unwrap();
    }

    #[test]
    fn task_state_after_successes_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let row = |s: &Sqlite| task_state_rows(conn(s)).remove(0);
        let some = |v: &str| Some(v.to_string());
        s.record_reminded("t", ts("2026-01-01T09:00:00Z")).unwrap();
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", false))
                .unwrap(),
            1
        );
        assert_eq!(
            row(&s),
            [
                some("t"),
                some("2026-01-01T10:00:00.000Z"),
                None,
                some("failed"),
                some("1"),
                some("2026-01-01T09:00:00.000Z"),
                None
            ]
        );
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T11:00:00Z", true))
                .unwrap(),
            0
        );
        s.trip("t", ts("2026-01-01T11:30:00Z")).unwrap();
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T12:00:00Z", false))
                .unwrap(),
            1
        );
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T13:00:00Z", false))
                .unwrap(),
            2
        );
        // A failure keeps the last success; neither touches the reminder or the trip.
        assert_eq!(
            row(&s),
            [
                some("t"),
                some("2026-01-01T13:00:00.000Z"),
                some("2026-01-01T11:00:01.000Z"),
                some("failed"),
                some("2"),
                some("2026-01-01T09:00:00.000Z"),
                some("2026-01-01T11:30:00.000Z")
            ]
        );
        assert_eq!(s.tripped().unwrap(), ["t"]);
        assert_eq!(s.reset("t").unwrap(), Some((2, true)));
        assert!(s.tripped().unwrap().is_empty());
        // A first run that succeeds.
        assert_eq!(
            s.record_task_run(&run_of("u", "log", "2026-01-01T10:00:00Z", true))
                .unwrap(),
            0
        );
        assert_eq!(
            task_state_rows(conn(&s))[1],
            [
                some("u"),
                some("2026-01-01T10:00:00.000Z"),
                some("2026-01-01T10:00:01.000Z"),
                some("succeeded"),
                some("0"),
                None,
                None
            ]
        );
    }

    #[test]
    fn the_days_spend_is_read_from_the_cost_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        assert_eq!(s.spent_since(ts("2000-01-01T00:00:00Z")).unwrap(), 0.0);
        for (at, cost) in [
            ("2026-01-01T10:00:00Z", Some(0.5)),
            ("2026-01-02T10:00:00Z", None),
            ("2026-01-02T11:00:00Z", Some(0.25)),
        ] {
            let mut r = run_of("t", "llm", at, true);
            r.cost_usd = cost;
            s.record_task_run(&r).unwrap();
        }
        assert_eq!(s.spent_since(ts("2026-01-01T10:00:00Z")).unwrap(), 0.75);
        assert_eq!(s.spent_since(ts("2026-01-02T00:00:00Z")).unwrap(), 0.25);
        assert_eq!(s.spent_since(ts("2026-01-03T00:00:00Z")).unwrap(), 0.0);
        let plan: String = conn(&s)
            .query_row(
                &format!("EXPLAIN QUERY PLAN {SPENT_SINCE}"),
                ["2026-01-02T00:00:00.000Z"],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("COVERING INDEX task_runs_cost"), "{plan}");
    }

    #[test]
    fn a_retry_chain_counts_one_failure_and_keeps_the_first_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let last_attempt = |s: &Sqlite| {
            conn(s)
                .query_row(
                    "SELECT last_attempt FROM task_state WHERE task_id = 't'",
                    [],
                    |r| r.get::<_, String>(0),
                )
                .unwrap()
        };
        // Attempt 1 fails, tried again at 10:01.
        let mut first = run_of("t", "x", "2026-01-01T10:00:00Z", false);
        first.retry_at = Some(ts("2026-01-01T10:01:00Z"));
        assert_eq!(s.record_task_run(&first).unwrap(), 0);
        assert_eq!(
            s.retry_chain("t").unwrap(),
            Some((1, ts("2026-01-01T10:01:00Z")))
        );
        assert_eq!(s.next_retry().unwrap(), Some(ts("2026-01-01T10:01:00Z")));
        // Attempt 2 fails, tried again at 10:03: still no failure counted.
        let mut second = run_of("t", "x", "2026-01-01T10:01:00Z", false);
        second.retried = true;
        second.retry_at = Some(ts("2026-01-01T10:03:00Z"));
        assert_eq!(s.record_task_run(&second).unwrap(), 0);
        assert_eq!(
            s.retry_chain("t").unwrap(),
            Some((2, ts("2026-01-01T10:03:00Z")))
        );
        assert_eq!(last_attempt(&s), "2026-01-01T10:00:00.000Z");
        // The last attempt fails: the chain counts once, and nothing waits.
        let mut last = run_of("t", "x", "2026-01-01T10:03:00Z", false);
        last.retried = true;
        assert_eq!(s.record_task_run(&last).unwrap(), 1);
        assert_eq!(s.retry_chain("t").unwrap(), None);
        assert_eq!(s.next_retry().unwrap(), None);
        assert_eq!(last_attempt(&s), "2026-01-01T10:00:00.000Z");
        // A retry that succeeds ends its chain too.
        let mut again = run_of("t", "x", "2026-01-02T10:00:00Z", false);
        again.retry_at = Some(ts("2026-01-02T10:01:00Z"));
        s.record_task_run(&again).unwrap();
        let mut ok = run_of("t", "x", "2026-01-02T10:01:00Z", true);
        ok.retried = true;
        assert_eq!(s.record_task_run(&ok).unwrap(), 0);
        assert_eq!(s.retry_chain("t").unwrap(), None);
        assert_eq!(last_attempt(&s), "2026-01-02T10:00:00.000Z");
    }
}
