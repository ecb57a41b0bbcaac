//! What `heartbeat metrics` reads (docs/reference.md#metrics): stored totals that retention
//! never lowers, and the gauges the state holds.
//!
//! Invariants:
//! - A total (`runs` by result, `tasks` by tool and outcome, `missed_slots`) is only ever
//!   incremented, and no prune touches the `metrics` table: a counter never falls.
//! - A tool run's outcome is counted in the transaction that records it
//!   (`history::write_task_run`); a run's result and the outcomes no tool run recorded
//!   (queued, reminded, skipped, invalid, stale, interrupted) in the one that finishes the
//!   run ([`History::finish_run`](super::History::finish_run)), or, for a run that skipped
//!   its tasks, in [`Metrics::count_run`].
//! - `last_run` only moves forward.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, TransactionBehavior, params};

use super::{Result, Sqlite};
use crate::metrics::Values;
use crate::model::Outcome;

/// The migration that made the `metrics` table: an older database (read-only commands do
/// not migrate) has no totals yet.
const METRICS_SCHEMA: i64 = 18;

/// The total of slots reported missed (`heartbeat_missed_slots_total`): whatever records a
/// missed slot adds its count in the same transaction, `increment(tx, MISSED_SLOTS, "", "",
/// n)`.
pub(super) const MISSED_SLOTS: &str = "missed_slots";

/// How a run ended, for `heartbeat_runs_total{result}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunResult {
    /// Nothing failed.
    Ok,
    /// A task failed, was invalid or tripped, or a tick could not be written.
    Failed,
    /// Paused or outside active hours: no task of the plan ran.
    Skipped,
}

impl RunResult {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunResult::Ok => "ok",
            RunResult::Failed => "failed",
            RunResult::Skipped => "skipped",
        }
    }
}

/// What a finished run adds to the totals: its result and the outcomes of its tasks that no
/// tool run counted (tool, or `""` for a task without one; outcome).
#[derive(Clone, Debug)]
pub(crate) struct RunTally<'a> {
    pub result: RunResult,
    pub tasks: Vec<(&'a str, Outcome)>,
}

/// The totals and what they are read with.
pub(crate) trait Metrics {
    /// Count a run that skipped its tasks (paused, outside active hours) or any other run
    /// not finished through [`History::finish_run`](super::History::finish_run), and move
    /// `last_run` to `started` if later: one transaction.
    fn count_run(&mut self, tally: &RunTally, started: DateTime<Utc>) -> Result<()>;

    /// The totals and the gauges of the state (all but the day's spend, which
    /// [`History::spent_since`](super::History::spent_since) reads).
    fn metrics(&self) -> Result<Values>;
}

/// Add one run's tally to the totals, inside the caller's transaction.
pub(super) fn add_tally(
    conn: &Connection,
    tally: &RunTally,
    started: DateTime<Utc>,
) -> rusqlite::Result<()> {
    increment(conn, "runs", "", tally.result.as_str(), 1)?;
    for (tool, outcome) in &tally.tasks {
        increment(conn, "tasks", tool, outcome.as_str(), 1)?;
    }
    conn.prepare_cached(
        "INSERT INTO metrics (name, value) VALUES ('last_run', ?1)
         ON CONFLICT(name, tool, label) DO UPDATE SET value = MAX(value, excluded.value)",
    )?
    .execute([started.timestamp()])?;
    Ok(())
}

/// Add `n` to one total.
pub(super) fn increment(
    conn: &Connection,
    name: &str,
    tool: &str,
    label: &str,
    n: u64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO metrics (name, tool, label, value) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(name, tool, label) DO UPDATE SET value = value + excluded.value",
    )?
    .execute(params![name, tool, label, n as i64])?;
    Ok(())
}

impl Metrics for Sqlite {
    fn count_run(&mut self, tally: &RunTally, started: DateTime<Utc>) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate);
        let write = tx.and_then(|tx| {
            add_tally(&tx, tally, started)?;
            tx.commit()
        });
        write.map_err(|e| self.err(e))
    }

    fn metrics(&self) -> Result<Values> {
        let read = |conn: &Connection, totals: bool| -> rusqlite::Result<Values> {
            let mut m = Values {
                approvals_pending: conn.query_row(
                    "SELECT COUNT(*) FROM approvals WHERE state = 'pending'",
                    [],
                    |r| r.get(0),
                )?,
                tasks_tripped: conn.query_row(
                    "SELECT COUNT(*) FROM task_state WHERE tripped_at IS NOT NULL",
                    [],
                    |r| r.get(0),
                )?,
                ..Values::default()
            };
            let mut stmt = conn.prepare(
                "SELECT channel, COUNT(*) FROM outbox GROUP BY channel ORDER BY channel",
            )?;
            m.queued = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            if !totals {
                return Ok(m);
            }
            let mut stmt =
                conn.prepare("SELECT name, tool, label, value FROM metrics ORDER BY 1, 2, 3")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })?;
            for row in rows {
                let (name, tool, label, value) = row?;
                match name.as_str() {
                    "last_run" => m.last_run = Some(value),
                    "runs" => m.runs.push((label, value.max(0) as u64)),
                    "tasks" => m.tasks.push((tool, label, value.max(0) as u64)),
                    MISSED_SLOTS => m.missed_slots = value.max(0) as u64,
                    _ => {}
                }
            }
            let mut stmt = conn.prepare(
                "SELECT task_id, COALESCE(last_success_tool, ''), last_success FROM task_state
                 WHERE last_success IS NOT NULL ORDER BY task_id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?;
            for row in rows {
                let (task_id, tool, at) = row?;
                if let Some(at) = super::parse_ts(&at) {
                    m.last_successes.push((task_id, tool, at));
                }
            }
            Ok(m)
        };
        let totals = self.user_version()? >= METRICS_SCHEMA;
        read(&self.conn, totals).map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;
    use crate::store::{History, Retention, TaskRunRecord};

    fn run_of(task: &'static str, ok: bool, at: &str) -> TaskRunRecord<'static> {
        TaskRunRecord {
            run_id: "r",
            task_id: task,
            tool: "shell",
            started_at: ts(at),
            finished_at: ts(at),
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

    #[test]
    fn totals_grow_with_each_outcome_and_survive_pruning() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let at = "2026-01-01T09:00:00Z";
        s.start_run("r", "once", ts(at)).unwrap();
        s.record_task_run(&run_of("t1", true, at)).unwrap();
        s.record_task_run(&run_of("t2", false, at)).unwrap();
        s.record_task_runs(&[run_of("t1", true, at)]).unwrap();
        let tally = RunTally {
            result: RunResult::Failed,
            tasks: vec![("", Outcome::Reminded), ("http", Outcome::Queued)],
        };
        s.finish_run("r", ts(at), Default::default(), &tally)
            .unwrap();
        let skipped = RunTally {
            result: RunResult::Skipped,
            tasks: vec![],
        };
        s.count_run(&skipped, ts("2026-01-01T10:00:00Z")).unwrap();
        // An earlier start does not move the last run back.
        s.count_run(&skipped, ts("2025-12-01T10:00:00Z")).unwrap();
        increment(super::super::test_util::conn(&s), MISSED_SLOTS, "", "", 3).unwrap();
        increment(super::super::test_util::conn(&s), MISSED_SLOTS, "", "", 0).unwrap();
        let before = s.metrics().unwrap();
        assert_eq!(
            before.last_run,
            Some(ts("2026-01-01T10:00:00Z").timestamp())
        );
        assert_eq!(
            before.runs,
            [("failed".to_string(), 1), ("skipped".to_string(), 2)]
        );
        assert_eq!(
            before.tasks,
            [
                ("".to_string(), "reminded".to_string(), 1),
                ("http".to_string(), "queued".to_string(), 1),
                ("shell".to_string(), "failed".to_string(), 1),
                ("shell".to_string(), "succeeded".to_string(), 2),
            ]
        );
        assert_eq!(before.missed_slots, 3);
        assert_eq!(
            before.last_successes,
            [("t1".to_string(), "shell".to_string(), ts(at))]
        );
        // A prune of everything older than a year from now keeps every total.
        let later = ts("2027-06-01T00:00:00Z");
        let pruned = s.prune_once_a_day("2027-06-01", later, later).unwrap();
        assert!(pruned.is_some_and(|rows| rows > 0), "{pruned:?}");
        let after = s.metrics().unwrap();
        assert_eq!(after, before);
    }
}
