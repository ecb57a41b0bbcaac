//! [`Metrics`] on PostgreSQL: the totals `heartbeat metrics` reads, as `store/metrics.rs`
//! keeps them, for every node of the fleet at once.
//!
//! Invariants (besides those of `store/metrics.rs`):
//! - A total is added to in SQL (`value = metrics.value + $n`), never read and written back
//!   from Rust: of two nodes counting at once, both counts stay (a conflict retries the
//!   whole transaction).

use chrono::{DateTime, Utc};
use postgres::Transaction;

use super::Pg;
use crate::metrics::Values;
use crate::store::Result;
use crate::store::metrics::{MISSED_SLOTS, Metrics, RunTally};

/// Add one run's tally to the totals, inside the caller's transaction; `last_run` moves to
/// `started` if later.
pub(super) fn add_tally(
    tx: &mut Transaction,
    tally: &RunTally,
    started: DateTime<Utc>,
) -> std::result::Result<(), postgres::Error> {
    increment(tx, "runs", "", tally.result.as_str(), 1)?;
    for (tool, outcome) in &tally.tasks {
        increment(tx, "tasks", tool, outcome.as_str(), 1)?;
    }
    tx.execute(
        "INSERT INTO metrics (name, value) VALUES ('last_run', $1)
         ON CONFLICT (name, tool, label)
         DO UPDATE SET value = GREATEST(metrics.value, excluded.value)",
        &[&started.timestamp()],
    )?;
    Ok(())
}

/// Add `n` to one total, inside the caller's transaction.
pub(super) fn increment(
    tx: &mut Transaction,
    name: &str,
    tool: &str,
    label: &str,
    n: u64,
) -> std::result::Result<(), postgres::Error> {
    tx.execute(
        "INSERT INTO metrics (name, tool, label, value) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name, tool, label) DO UPDATE SET value = metrics.value + excluded.value",
        &[&name, &tool, &label, &(n as i64)],
    )?;
    Ok(())
}

impl Metrics for Pg {
    fn count_run(&mut self, tally: &RunTally, started: DateTime<Utc>) -> Result<()> {
        self.tx(|tx| add_tally(tx, tally, started))
    }

    fn metrics(&self) -> Result<Values> {
        self.tx(|tx| {
            let mut m = Values {
                approvals_pending: tx
                    .query_one(
                        "SELECT COUNT(*) FROM approvals WHERE state = 'pending'",
                        &[],
                    )?
                    .try_get(0)?,
                tasks_tripped: tx
                    .query_one(
                        "SELECT COUNT(*) FROM task_state WHERE tripped_at IS NOT NULL",
                        &[],
                    )?
                    .try_get(0)?,
                ..Values::default()
            };
            for r in tx.query(
                "SELECT channel, COUNT(*) FROM outbox GROUP BY channel ORDER BY channel",
                &[],
            )? {
                m.queued.push((r.try_get(0)?, r.try_get(1)?));
            }
            for r in tx.query(
                "SELECT name, tool, label, value FROM metrics ORDER BY 1, 2, 3",
                &[],
            )? {
                let (name, tool, label, value): (String, String, String, i64) =
                    (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?);
                match name.as_str() {
                    "last_run" => m.last_run = Some(value),
                    "runs" => m.runs.push((label, value.max(0) as u64)),
                    "tasks" => m.tasks.push((tool, label, value.max(0) as u64)),
                    MISSED_SLOTS => m.missed_slots = value.max(0) as u64,
                    _ => {}
                }
            }
            for r in tx.query(
                "SELECT task_id, COALESCE(last_success_tool, ''), last_success FROM task_state
                 WHERE last_success IS NOT NULL ORDER BY task_id",
                &[],
            )? {
                let at: String = r.try_get(2)?;
                if let Some(at) = crate::audit::parse_ts(&at) {
                    m.last_successes.push((r.try_get(0)?, r.try_get(1)?, at));
                }
            }
            Ok(m)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Outcome;
    use crate::store::test_util::ts;
    use crate::store::{History, Retention, RunResult, TaskRunRecord};

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
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
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
        s.tx(|tx| increment(tx, MISSED_SLOTS, "", "", 3)).unwrap();
        s.tx(|tx| increment(tx, MISSED_SLOTS, "", "", 0)).unwrap();
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

    #[test]
    fn the_gauges_count_pending_approvals_tripped_tasks_and_queued_messages() {
        let Some(s) = super::super::test_util::store("n1") else {
            return;
        };
        s.with(|c| {
            c.batch_execute(
                "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                    created_at)
                 VALUES ('a', 'pending', 'f', 1, 's', 'shell', '{}', 'x', 't'),
                    ('b', 'pending', 'f', 1, 's', 'shell', '{}', 'x', 't'),
                    ('c', 'denied', 'f', 1, 's', 'shell', '{}', 'x', 't');
                 INSERT INTO task_state (task_id, tripped_at) VALUES ('a', 't'), ('b', NULL);
                 INSERT INTO outbox (channel, destination, kind, payload, created_at)
                 VALUES ('ntfy', 'd', 'k', 'p', 't'), ('ntfy', 'd', 'k', 'p', 't'),
                    ('email', 'd', 'k', 'p', 't');",
            )
        })
        .unwrap();
        let m = s.metrics().unwrap();
        assert_eq!(m.approvals_pending, 2);
        assert_eq!(m.tasks_tripped, 1);
        assert_eq!(
            m.queued,
            [("email".to_string(), 1), ("ntfy".to_string(), 2)]
        );
        assert_eq!(m.last_run, None);
    }

    #[test]
    fn two_nodes_counting_at_once_both_count() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let url = url.as_str();
        let skipped = RunTally {
            result: RunResult::Skipped,
            tasks: vec![("shell", Outcome::Queued)],
        };
        std::thread::scope(|scope| {
            for node in ["n1", "n2"] {
                let skipped = &skipped;
                scope.spawn(move || {
                    let mut s = Pg::connect(url, node).unwrap();
                    for _ in 0..100 {
                        s.count_run(skipped, ts("2026-01-01T10:00:00Z")).unwrap();
                    }
                });
            }
        });
        let m = Pg::connect(url, "n3").unwrap().metrics().unwrap();
        assert_eq!(m.runs, [("skipped".to_string(), 200)]);
        assert_eq!(m.tasks, [("shell".to_string(), "queued".to_string(), 200)]);
    }
}
