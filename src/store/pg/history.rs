//! [`History`] on PostgreSQL: tool runs, task state, runs and the day's spend, as
//! `store/history.rs` keeps them, for every node of the fleet at once.
//!
//! Invariants (besides those of `store/history.rs`):
//! - A run holds its session advisory lock from `start_run` to `finish_run` (see
//!   `pg/mod.rs`), taken once: before its `runs` row is written, and given back when that
//!   write fails.
//! - `runs` and `task_runs` rows name the node that wrote them.
//! - A task's failure streak and the totals are added to in SQL, never read and written back
//!   from Rust: two nodes recording failures of one task at once both count.

use chrono::{DateTime, Utc};
use postgres::Transaction;

use super::{Pg, metrics};
use crate::audit::{format_ts, parse_ts};
use crate::model::ApprovalState;
use crate::report::RunCounts;
use crate::store::history::{History, RunSummary, TaskRunRecord, counted_outcome, run_outcome};
use crate::store::{Result, RunTally};
use crate::text::Redacted;

type PgResult<T> = std::result::Result<T, postgres::Error>;

/// The advisory lock key of run `$1` (the same expression as `super::RUN_IS_GONE`'s).
const RUN_LOCK: &str = "hashtextextended($1, 0)";

impl History for Pg {
    fn record_task_run(&mut self, r: &TaskRunRecord) -> Result<u32> {
        let node = &self.node;
        self.tx(|tx| write_task_run(tx, r, node))
    }

    fn record_task_runs(&mut self, runs: &[TaskRunRecord]) -> Result<()> {
        let node = &self.node;
        self.tx(|tx| {
            for r in runs {
                write_task_run(tx, r, node)?;
            }
            Ok(())
        })
    }

    fn record_attempt(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO task_state (task_id, last_attempt) VALUES ($1, $2)
                 ON CONFLICT (task_id) DO UPDATE SET last_attempt = excluded.last_attempt",
                &[&task_id, &now],
            )
            .map(drop)
        })
    }

    fn record_reminded(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO task_state (task_id, last_attempt, reminded_at) VALUES ($1, $2, $2)
                 ON CONFLICT (task_id) DO UPDATE SET last_attempt = $2, reminded_at = $2",
                &[&task_id, &now],
            )
            .map(drop)
        })
    }

    fn trip(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "UPDATE task_state SET tripped_at = $2 WHERE task_id = $1",
                &[&task_id, &now],
            )
            .map(drop)
        })
    }

    fn reset(&mut self, task_id: &str) -> Result<Option<(u32, bool)>> {
        self.tx(|tx| {
            let Some(before) = tx.query_opt(
                "SELECT consecutive_failures, tripped_at IS NOT NULL FROM task_state
                 WHERE task_id = $1",
                &[&task_id],
            )?
            else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE task_state SET consecutive_failures = 0, tripped_at = NULL
                 WHERE task_id = $1",
                &[&task_id],
            )?;
            Ok(Some((streak(before.try_get(0)?), before.try_get(1)?)))
        })
    }

    fn task_ids(&self) -> Result<Vec<String>> {
        self.with(|c| {
            c.query(
                "SELECT task_id FROM task_state UNION SELECT task_id FROM starts ORDER BY task_id",
                &[],
            )?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
        })
    }

    fn is_tripped(&self, task_id: &str) -> Result<bool> {
        self.with(|c| {
            c.query_one(
                "SELECT EXISTS (SELECT 1 FROM task_state
                 WHERE task_id = $1 AND tripped_at IS NOT NULL)",
                &[&task_id],
            )?
            .try_get(0)
        })
    }

    fn tripped(&self) -> Result<Vec<String>> {
        self.with(|c| {
            c.query(
                "SELECT task_id FROM task_state WHERE tripped_at IS NOT NULL ORDER BY task_id",
                &[],
            )?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
        })
    }

    fn spent_since(&self, since: DateTime<Utc>) -> Result<f64> {
        let since = format_ts(since);
        self.with(|c| {
            c.query_one(
                "SELECT COALESCE(SUM(cost_usd), 0) FROM task_runs
                 WHERE started_at >= $1 AND cost_usd IS NOT NULL",
                &[&since],
            )?
            .try_get(0)
        })
    }

    /// Of every node's runs. Runs that started in the same millisecond (rare: from two
    /// nodes) are told apart by their id, as PostgreSQL keeps no insertion order.
    fn last_start(&self) -> Result<Option<DateTime<Utc>>> {
        let at: Option<String> = self.with(|c| {
            c.query_opt(
                "SELECT started_at FROM runs ORDER BY started_at DESC, run_id DESC LIMIT 1",
                &[],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })?;
        Ok(at.as_deref().and_then(parse_ts))
    }

    fn start_run(&mut self, run_id: &str, mode: &str, now: DateTime<Utc>) -> Result<()> {
        // Outside the transaction: a session lock is not undone by a rollback, and a retried
        // transaction would take it once more.
        self.with(|c| {
            c.execute(&format!("SELECT pg_advisory_lock({RUN_LOCK})"), &[&run_id])
                .map(drop)
        })?;
        let now = format_ts(now);
        let node = &self.node;
        let written = self.tx(|tx| {
            tx.execute(
                "INSERT INTO runs (run_id, mode, started_at, node) VALUES ($1, $2, $3, $4)",
                &[&run_id, &mode, &now, node],
            )
            .map(drop)
        });
        if written.is_err() {
            // Not started: nothing of it holds the lock. Its own failure is what is said.
            let _ = self.release_run(run_id);
        }
        written
    }

    fn finish_run(
        &mut self,
        run_id: &str,
        now: DateTime<Utc>,
        c: RunCounts,
        tally: &RunTally,
    ) -> Result<()> {
        let at = format_ts(now);
        let counts = [c.succeeded, c.failed, c.queued, c.skipped, c.invalid].map(|n| n as i64);
        let written = self.tx(|tx| {
            tx.execute(
                "UPDATE runs SET finished_at = $2, succeeded = $3, failed = $4, queued = $5,
                 skipped = $6, invalid = $7 WHERE run_id = $1",
                &[
                    &run_id, &at, &counts[0], &counts[1], &counts[2], &counts[3], &counts[4],
                ],
            )?;
            metrics::add_tally(tx, tally, now)
        });
        // The run is over whether or not its counts could be written.
        let released = self.release_run(run_id);
        written.and(released)
    }

    fn last_run(&self) -> Result<Option<RunSummary>> {
        self.with(|c| {
            c.query_opt(
                "SELECT run_id, started_at, succeeded, failed FROM runs
                 WHERE finished_at IS NOT NULL
                 ORDER BY started_at DESC, run_id DESC LIMIT 1",
                &[],
            )?
            .map(|r| {
                Ok(RunSummary {
                    run_id: r.try_get(0)?,
                    started_at: r.try_get(1)?,
                    succeeded: r.try_get(2)?,
                    failed: r.try_get(3)?,
                })
            })
            .transpose()
        })
    }

    fn retry_chain(&self, task_id: &str) -> Result<Option<(u32, DateTime<Utc>)>> {
        let row: Option<(i64, String)> = self.with(|c| {
            c.query_opt(
                "SELECT retry_failures, retry_at FROM task_state
                 WHERE task_id = $1 AND retry_at IS NOT NULL",
                &[&task_id],
            )?
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
        })?;
        Ok(row.and_then(|(n, at)| Some((streak(n), parse_ts(&at)?))))
    }

    fn next_retry(&self) -> Result<Option<DateTime<Utc>>> {
        let at: Option<String> = self.with(|c| {
            c.query_one(
                "SELECT MIN(retry_at) FROM task_state WHERE retry_at IS NOT NULL",
                &[],
            )?
            .try_get(0)
        })?;
        Ok(at.as_deref().and_then(parse_ts))
    }
}

impl Pg {
    /// Give back the run's advisory lock, which `start_run` took.
    fn release_run(&self, run_id: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                &format!("SELECT pg_advisory_unlock({RUN_LOCK})"),
                &[&run_id],
            )
            .map(drop)
        })
    }
}

/// A count as the trait gives it (never negative in the table).
fn streak(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// A `running` approval's outcome, inside the caller's transaction (as
/// `approvals::finish_approval` on SQLite): `succeeded`, `failed`, or `retrying` for a
/// failure tried again. An approval no longer `running` is left as it is.
pub(super) fn finish_approval(
    tx: &mut Transaction,
    id: i64,
    succeeded: bool,
    retried: bool,
    reason: Option<&Redacted>,
    now: DateTime<Utc>,
) -> PgResult<()> {
    // A failure tried again waits under its approval (docs/reference.md#retries).
    let state = match (succeeded, retried) {
        (true, _) => ApprovalState::Succeeded,
        (false, true) => ApprovalState::Retrying,
        (false, false) => ApprovalState::Failed,
    };
    tx.execute(
        "UPDATE approvals SET state = $2, finished_at = $3, reason = COALESCE($4, reason)
         WHERE id = $1 AND state = $5",
        &[
            &id,
            &state.as_str(),
            &format_ts(now),
            &reason.map(Redacted::as_str),
            &ApprovalState::Running.as_str(),
        ],
    )
    .map(drop)
}

/// The statements of [`History::record_task_run`], inside its transaction: as
/// `history::write_task_run` on SQLite, the history row naming `node`.
fn write_task_run(tx: &mut Transaction, r: &TaskRunRecord, node: &str) -> PgResult<u32> {
    let (started, finished) = (format_ts(r.started_at), format_ts(r.finished_at));
    // The outcome settles the start this run recorded (with the history row, atomically).
    tx.execute(
        "DELETE FROM starts WHERE task_id = $1 AND run_id = $2",
        &[&r.task_id, &r.run_id],
    )?;
    tx.execute(
        "INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at, outcome,
            cost_usd, approval_id, node) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &r.run_id,
            &r.task_id,
            &r.tool,
            &started,
            &finished,
            &run_outcome(r),
            &r.cost_usd,
            &r.approval_id,
            &node,
        ],
    )?;
    tx.execute(
        "INSERT INTO tool_state (tool, last_start) VALUES ($1, $2)
         ON CONFLICT (tool) DO UPDATE SET last_start = excluded.last_start
            WHERE excluded.last_start > tool_state.last_start",
        &[&r.tool, &started],
    )?;
    if let Some(id) = r.approval_id {
        let retried = r.retry_at.is_some();
        finish_approval(tx, id, r.succeeded, retried, r.error, r.finished_at)?;
    }
    metrics::increment(tx, "tasks", r.tool, counted_outcome(r).as_str(), 1)?;
    // A retry is not a new attempt: the chain's first attempt stays the task's last one.
    let attempt = match r.retried {
        true => None,
        false => Some(started),
    };
    if r.succeeded {
        tx.execute(
            "INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome,
                consecutive_failures, last_success_tool) VALUES ($1, $2, $3, 'succeeded', 0, $4)
             ON CONFLICT (task_id) DO UPDATE SET
                last_attempt = COALESCE(excluded.last_attempt, task_state.last_attempt),
                last_success = excluded.last_success, last_outcome = 'succeeded',
                consecutive_failures = 0, last_success_tool = excluded.last_success_tool,
                retry_at = NULL, retry_failures = 0",
            &[&r.task_id, &attempt, &finished, &r.tool],
        )?;
        return Ok(0);
    }
    // A failure tried again later does not add to the streak: the chain counts once.
    let (retry_at, counted) = match r.retry_at {
        Some(at) => (Some(format_ts(at)), 0i64),
        None => (None, 1),
    };
    let failures: i64 = tx
        .query_one(
            "INSERT INTO task_state (task_id, last_attempt, last_outcome, consecutive_failures,
                retry_at, retry_failures)
                VALUES ($1, $2, 'failed', $3, $4::text,
                    CASE WHEN $4::text IS NULL THEN 0 ELSE 1 END)
             ON CONFLICT (task_id) DO UPDATE SET
                last_attempt = COALESCE(excluded.last_attempt, task_state.last_attempt),
                last_outcome = 'failed',
                consecutive_failures = task_state.consecutive_failures + $3,
                retry_at = excluded.retry_at,
                retry_failures = CASE WHEN excluded.retry_at IS NULL THEN 0
                    ELSE task_state.retry_failures + 1 END
             RETURNING consecutive_failures",
            &[&r.task_id, &attempt, &counted, &retry_at],
        )?
        .try_get(0)?;
    Ok(streak(failures))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::history::tests::run_of;
    use crate::store::test_util::ts;
    use crate::store::{RunResult, RunTally};

    fn store() -> Option<Pg> {
        super::super::test_util::store("n1")
    }

    fn no_tally() -> RunTally<'static> {
        RunTally {
            result: RunResult::Ok,
            tasks: vec![],
        }
    }

    /// Whether another connection finds run `run_id`'s lock free (`RUN_IS_GONE`).
    fn lock_is_free(url: &str, run_id: &str) -> bool {
        let other = Pg::connect(url, "probe").unwrap();
        other
            .tx(|tx| tx.query_one(&format!("SELECT {}", super::super::RUN_IS_GONE), &[&run_id]))
            .unwrap()
            .get(0)
    }

    fn task_state_rows(s: &Pg) -> Vec<Vec<Option<String>>> {
        s.with(|c| {
            c.query(
                "SELECT task_id, last_attempt, last_success, last_outcome,
                 consecutive_failures::text, reminded_at, tripped_at
                 FROM task_state ORDER BY task_id",
                &[],
            )
        })
        .unwrap()
        .iter()
        .map(|r| (0..7).map(|i| r.get(i)).collect())
        .collect()
    }

    fn failures(s: &Pg, task: &str) -> i64 {
        s.with(|c| {
            c.query_one(
                "SELECT consecutive_failures FROM task_state WHERE task_id = $1",
                &[&task],
            )
        })
        .unwrap()
        .get(0)
    }

    fn count(s: &Pg, sql: &str) -> i64 {
        s.with(|c| c.query_one(sql, &[])).unwrap().get(0)
    }

    /// A `running` approval of task `task`, as a claim leaves it.
    fn running_approval(s: &Pg, task: &str) -> i64 {
        s.with(|c| {
            c.query_one(
                "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                    created_at, decided_at, decided_by, reason, run_id)
                 VALUES ($1, 'running', '/x/HEARTBEAT.md', 3, 'recurring', 'shell', '{}', 'x',
                    '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:00.000Z', 'cli:ann',
                    'ok by me', 'r')
                 RETURNING id",
                &[&task],
            )
        })
        .unwrap()
        .get(0)
    }

    fn approval(s: &Pg, id: i64) -> (String, Option<String>, Option<String>) {
        let r = s
            .with(|c| {
                c.query_one(
                    "SELECT state, reason, finished_at FROM approvals WHERE id = $1",
                    &[&id],
                )
            })
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    }

    #[test]
    fn a_started_run_holds_its_lock_until_it_finishes_or_its_connection_ends() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let at = ts("2026-01-01T10:00:00Z");
        let mut a = Pg::connect(&url, "n1").unwrap();
        assert!(lock_is_free(&url, "r1"));
        a.start_run("r1", "once", at).unwrap();
        assert!(!lock_is_free(&url, "r1"));
        // Another run's lock is its own.
        assert!(lock_is_free(&url, "r2"));
        a.finish_run("r1", at, Default::default(), &no_tally())
            .unwrap();
        assert!(lock_is_free(&url, "r1"));
        // A run that never finishes: its lock goes with its connection.
        a.start_run("r2", "once", at).unwrap();
        assert!(!lock_is_free(&url, "r2"));
        drop(a);
        assert!(lock_is_free(&url, "r2"));
        // Its row names its node.
        let b = Pg::connect(&url, "n2").unwrap();
        let nodes: Vec<(String, String)> = b
            .with(|c| c.query("SELECT run_id, node FROM runs ORDER BY run_id", &[]))
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(
            nodes,
            [("r1".into(), "n1".into()), ("r2".into(), "n1".into())]
        );
    }

    #[test]
    fn a_run_that_cannot_be_started_holds_no_lock() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let at = ts("2026-01-01T10:00:00Z");
        let mut a = Pg::connect(&url, "n1").unwrap();
        a.start_run("r1", "once", at).unwrap();
        a.finish_run("r1", at, Default::default(), &no_tally())
            .unwrap();
        // The same id again: refused by the primary key.
        assert!(a.start_run("r1", "once", at).is_err());
        assert!(lock_is_free(&url, "r1"));
    }

    #[test]
    fn a_tool_runs_history_row_names_its_node() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let at = "2026-01-01T10:00:00Z";
        Pg::connect(&url, "n1")
            .unwrap()
            .record_task_run(&run_of("a", "log", at, true))
            .unwrap();
        Pg::connect(&url, "n2")
            .unwrap()
            .record_task_runs(&[run_of("b", "log", at, true)])
            .unwrap();
        let s = Pg::connect(&url, "n3").unwrap();
        let nodes: Vec<(String, String)> = s
            .with(|c| c.query("SELECT task_id, node FROM task_runs ORDER BY task_id", &[]))
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(
            nodes,
            [("a".into(), "n1".into()), ("b".into(), "n2".into())]
        );
    }

    #[test]
    fn two_nodes_recording_failures_at_once_both_count() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let url = url.as_str();
        std::thread::scope(|scope| {
            for node in ["n1", "n2"] {
                scope.spawn(move || {
                    let mut s = Pg::connect(url, node).unwrap();
                    for _ in 0..50 {
                        s.record_task_run(&run_of("t", "shell", "2026-01-01T10:00:00Z", false))
                            .unwrap();
                    }
                });
            }
        });
        let s = Pg::connect(url, "n3").unwrap();
        assert_eq!(failures(&s, "t"), 100);
        assert_eq!(count(&s, "SELECT COUNT(*) FROM task_runs"), 100);
        let m = crate::store::Metrics::metrics(&s).unwrap();
        assert_eq!(m.tasks, [("shell".into(), "failed".into(), 100)]);
    }

    #[test]
    fn a_batch_of_runs_finishes_the_approvals_among_them() {
        let Some(mut s) = store() else { return };
        let id = running_approval(&s, "a");
        let approved = TaskRunRecord {
            approval_id: Some(id),
            ..run_of("a", "log", "2026-01-01T10:00:00Z", true)
        };
        s.record_task_runs(&[run_of("b", "log", "2026-01-01T10:00:00Z", true), approved])
            .unwrap();
        assert_eq!(approval(&s, id).0, "succeeded");
        let with_approval = s
            .with(|c| {
                c.query_one(
                    "SELECT COUNT(*) FROM task_runs WHERE approval_id = $1",
                    &[&id],
                )
            })
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(with_approval, 1);
        assert_eq!(task_state_rows(&s).len(), 2);
    }

    #[test]
    fn an_approvals_outcome_is_written_once_from_running() {
        let Some(mut s) = store() else { return };
        let (ok, failed, retried) = (
            running_approval(&s, "a"),
            running_approval(&s, "b"),
            running_approval(&s, "c"),
        );
        let at = "2026-01-01T12:00:00Z";
        let finished = Some("2026-01-01T12:00:01.000Z".to_string());
        s.record_task_run(&TaskRunRecord {
            approval_id: Some(ok),
            ..run_of("a", "shell", at, true)
        })
        .unwrap();
        let why: Redacted = "exit 1".into();
        s.record_task_run(&TaskRunRecord {
            approval_id: Some(failed),
            error: Some(&why),
            ..run_of("b", "shell", at, false)
        })
        .unwrap();
        s.record_task_run(&TaskRunRecord {
            approval_id: Some(retried),
            retry_at: Some(ts("2026-01-01T12:05:00Z")),
            ..run_of("c", "shell", at, false)
        })
        .unwrap();
        assert_eq!(
            approval(&s, ok),
            (
                "succeeded".into(),
                Some("ok by me".into()),
                finished.clone()
            )
        );
        assert_eq!(
            approval(&s, failed),
            ("failed".into(), Some("exit 1".into()), finished.clone())
        );
        assert_eq!(
            approval(&s, retried),
            ("retrying".into(), Some("ok by me".into()), finished.clone())
        );
        // Finished twice: the first finish counts, as the state moved on.
        let again: Redacted = "again".into();
        s.tx(|tx| finish_approval(tx, failed, true, false, Some(&again), ts(at)))
            .unwrap();
        assert_eq!(
            approval(&s, failed),
            ("failed".into(), Some("exit 1".into()), finished)
        );
    }

    #[test]
    fn task_runs_track_spend_and_streaks() {
        let Some(mut s) = store() else { return };
        let rec = |ok: bool, at: &str, cost: Option<f64>| TaskRunRecord {
            cost_usd: cost,
            finished_at: ts(at),
            ..run_of("t", "shell", at, ok)
        };
        s.record_task_run(&rec(false, "2026-01-01T10:00:00Z", Some(0.5)))
            .unwrap();
        s.record_task_run(&rec(false, "2026-01-02T10:00:00Z", Some(0.25)))
            .unwrap();
        assert_eq!(failures(&s, "t"), 2);
        s.record_task_run(&rec(true, "2026-01-02T11:00:00Z", None))
            .unwrap();
        assert_eq!(failures(&s, "t"), 0);
        assert_eq!(s.spent_since(ts("2026-01-02T00:00:00Z")).unwrap(), 0.25);
        assert_eq!(s.spent_since(ts("2026-01-01T10:00:00Z")).unwrap(), 0.75);
        assert_eq!(s.spent_since(ts("2026-01-03T00:00:00Z")).unwrap(), 0.0);
        assert_eq!(
            task_state_rows(&s)[0][1].as_deref(),
            Some("2026-01-02T11:00:00.000Z")
        );
    }

    #[test]
    fn every_run_is_a_history_row_and_one_time_successes_are_done() {
        let Some(mut s) = store() else { return };
        let at = "2026-01-01T10:00:00Z";
        for r in [
            run_of("o1", "log", at, true),
            run_of("f", "log", "2026-01-01T09:00:00Z", false),
            run_of("f", "log", at, true),
            TaskRunRecord {
                cost_usd: Some(0.25),
                ..run_of("paid", "llm", at, true)
            },
            TaskRunRecord {
                approval_id: Some(7),
                ..run_of("asked", "log", at, true)
            },
            run_of("x", "log", at, false),
        ] {
            s.record_task_run(&r).unwrap();
        }
        let rows: Vec<(String, String, Option<f64>, Option<i64>)> = s
            .with(|c| {
                c.query(
                    "SELECT task_id, outcome, cost_usd, approval_id FROM task_runs
                     ORDER BY task_id, started_at",
                    &[],
                )
            })
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
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
        let done: Vec<String> = s
            .with(|c| {
                c.query(
                    "SELECT task_id FROM task_state WHERE last_success IS NOT NULL
                     ORDER BY task_id",
                    &[],
                )
            })
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(done, ["asked", "f", "o1", "paid"]);
        assert_eq!(failures(&s, "x"), 1);
        assert_eq!(s.task_ids().unwrap(), ["asked", "f", "o1", "paid", "x"]);
        // `reset` knows a done task, with nothing to clear.
        assert_eq!(s.reset("o1").unwrap(), Some((0, false)));
        assert_eq!(s.reset("x").unwrap(), Some((1, false)));
        assert_eq!(s.reset("nothing").unwrap(), None);
    }

    #[test]
    fn tool_state_keeps_each_tools_latest_start() {
        let Some(mut s) = store() else { return };
        let read = |s: &Pg, sql: &str| -> Vec<(String, String)> {
            s.with(|c| c.query(sql, &[]))
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect()
        };
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
            assert_eq!(
                read(&s, "SELECT tool, last_start FROM tool_state ORDER BY tool"),
                read(
                    &s,
                    "SELECT tool, MAX(started_at) FROM task_runs GROUP BY tool ORDER BY tool"
                )
            );
        }
    }

    #[test]
    fn a_run_that_cannot_be_recorded_records_nothing_of_it() {
        let Some(mut s) = store() else { return };
        let approval = running_approval(&s, "t");
        s.with(|c| {
            c.batch_execute(
                "CREATE FUNCTION frozen() RETURNS trigger LANGUAGE plpgsql
                    AS $$ BEGIN RAISE EXCEPTION 'frozen'; END $$;
                 CREATE TRIGGER frozen BEFORE INSERT ON task_state
                    FOR EACH ROW EXECUTE FUNCTION frozen();",
            )
        })
        .unwrap();
        let run = TaskRunRecord {
            approval_id: Some(approval),
            ..run_of("t", "log", "2026-01-01T10:00:00Z", true)
        };
        let err = s.record_task_run(&run).unwrap_err();
        let mut said = err.to_string();
        let mut cause = std::error::Error::source(&err);
        while let Some(c) = cause {
            said += &format!(": {c}");
            cause = c.source();
        }
        assert!(said.contains("frozen"), "{said}");
        assert_eq!(count(&s, "SELECT COUNT(*) FROM task_runs"), 0);
        assert_eq!(count(&s, "SELECT COUNT(*) FROM tool_state"), 0);
        assert_eq!(count(&s, "SELECT COUNT(*) FROM metrics"), 0);
        assert_eq!(approval_state(&s, approval), "running");
        // The store goes on working.
        s.with(|c| c.batch_execute("DROP TRIGGER frozen ON task_state"))
            .unwrap();
        s.record_task_run(&run).unwrap();
        assert_eq!(approval_state(&s, approval), "succeeded");
    }

    fn approval_state(s: &Pg, id: i64) -> String {
        approval(s, id).0
    }

    #[test]
    fn task_state_after_successes_and_failures() {
        let Some(mut s) = store() else { return };
        let some = |v: &str| Some(v.to_string());
        s.record_reminded("t", ts("2026-01-01T09:00:00Z")).unwrap();
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", false))
                .unwrap(),
            1
        );
        assert_eq!(
            task_state_rows(&s)[0],
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
        assert!(s.is_tripped("t").unwrap());
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
            task_state_rows(&s)[0],
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
        assert!(!s.is_tripped("t").unwrap());
        // A first run that succeeds.
        assert_eq!(
            s.record_task_run(&run_of("u", "log", "2026-01-01T10:00:00Z", true))
                .unwrap(),
            0
        );
        assert_eq!(
            task_state_rows(&s)[1],
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
        // An attempt alone moves the last attempt only.
        s.record_attempt("u", ts("2026-01-02T10:00:00Z")).unwrap();
        assert_eq!(
            task_state_rows(&s)[1][1].as_deref(),
            Some("2026-01-02T10:00:00.000Z")
        );
    }

    #[test]
    fn a_retry_chain_counts_one_failure_and_keeps_the_first_attempt() {
        let Some(mut s) = store() else { return };
        let last_attempt = |s: &Pg| task_state_rows(s)[0][1].clone().unwrap();
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
        // A retry that never started is recorded as such.
        let mut unstarted = run_of("t", "x", "2026-01-03T10:00:00Z", false);
        unstarted.retry_at = Some(ts("2026-01-03T10:01:00Z"));
        unstarted.not_started = true;
        s.record_task_run(&unstarted).unwrap();
        assert_eq!(
            count(
                &s,
                "SELECT COUNT(*) FROM task_runs WHERE outcome = 'not_started'"
            ),
            1
        );
    }

    #[test]
    fn the_last_run_is_the_latest_finished_one_and_the_last_start_any() {
        let Some(mut s) = store() else { return };
        assert_eq!(s.last_start().unwrap(), None);
        assert_eq!(s.last_run().unwrap(), None);
        let (t1, t2) = (ts("2026-01-01T10:00:00Z"), ts("2026-01-01T11:00:00Z"));
        s.start_run("r1", "once", t1).unwrap();
        let counts = RunCounts {
            succeeded: 2,
            failed: 1,
            ..Default::default()
        };
        s.finish_run("r1", t1, counts, &no_tally()).unwrap();
        s.start_run("r2", "daemon", t2).unwrap();
        assert_eq!(s.last_start().unwrap(), Some(t2));
        assert_eq!(
            s.last_run().unwrap(),
            Some(RunSummary {
                run_id: "r1".into(),
                started_at: "2026-01-01T10:00:00.000Z".into(),
                succeeded: 2,
                failed: 1,
            })
        );
    }
}
