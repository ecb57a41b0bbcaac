//! What heartbeat remembers of calendar schedules' slots (docs/reference.md#missed-slots):
//! per task, the latest slot it handled (ran, queued, reported missed, or that passed
//! before the task was first seen) and why the latest run that found a slot due did not run
//! it; and the runs skipped as a whole (paused, outside active hours), with their reason.
//!
//! Invariants:
//! - A run's slot changes are written in one transaction, before the missed slots they
//!   report are audited: a slot is reported once, never again by a later run.
//! - Nothing here ever moves a task's handled slot back.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{TransactionBehavior, params};

use super::{Result, Sqlite, format_ts, parse_ts};

/// A task's slot memory.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SlotState {
    /// Every slot at or before this time is handled.
    pub handled: DateTime<Utc>,
    /// Why the latest run that found a slot due did not run it, and when.
    pub skip: Option<(String, DateTime<Utc>)>,
}

/// One task's change in a run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SlotChange {
    pub task_id: String,
    /// Moves the handled slot forward (never back).
    pub handled: Option<DateTime<Utc>>,
    /// Why this run did not run its due slot.
    pub skip: Option<String>,
}

/// Slots of calendar schedules, and the runs skipped as a whole.
pub(crate) trait Slots {
    /// Every task's slot memory, by task id.
    fn slot_states(&self) -> Result<HashMap<String, SlotState>>;

    /// A run's slot changes at `now`, and the number of slots it reports missed (for the
    /// metric's total), in one transaction.
    fn save_slots(&mut self, changes: &[SlotChange], missed: u64, now: DateTime<Utc>)
    -> Result<()>;

    /// Remember a run skipped as a whole (`paused`, `outside_active_hours`).
    fn record_run_skip(&mut self, reason: &str, now: DateTime<Utc>) -> Result<()>;

    /// The reason of the latest run skipped as a whole at or after `from` and before `to`.
    fn run_skip_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Option<String>>;
}

impl Slots for Sqlite {
    fn slot_states(&self) -> Result<HashMap<String, SlotState>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT task_id, handled, skip_reason, skip_at FROM task_slots")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, handled, reason, at)| {
                let skip = reason.zip(at.as_deref().and_then(parse_ts));
                Some((
                    id,
                    SlotState {
                        handled: parse_ts(&handled)?,
                        skip,
                    },
                ))
            })
            .collect())
    }

    fn save_slots(
        &mut self,
        changes: &[SlotChange],
        missed: u64,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if changes.is_empty() && missed == 0 {
            return Ok(());
        }
        let at = format_ts(now);
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for c in changes {
                if let Some(h) = c.handled {
                    // Forward only: RFC 3339 UTC with milliseconds sorts as time does.
                    tx.execute(
                        "INSERT INTO task_slots (task_id, handled) VALUES (?1, ?2)
                         ON CONFLICT(task_id) DO UPDATE SET handled = excluded.handled
                         WHERE excluded.handled > task_slots.handled",
                        params![c.task_id, format_ts(h)],
                    )?;
                }
                if let Some(reason) = &c.skip {
                    tx.execute(
                        "UPDATE task_slots SET skip_reason = ?2, skip_at = ?3 WHERE task_id = ?1",
                        params![c.task_id, reason, at],
                    )?;
                }
            }
            if missed > 0 {
                super::metrics::increment(&tx, super::metrics::MISSED_SLOTS, "", "", missed)?;
            }
            tx.commit()
        })
    }

    fn record_run_skip(&mut self, reason: &str, now: DateTime<Utc>) -> Result<()> {
        self.durable(|conn| {
            conn.execute(
                "INSERT INTO run_skips (at, reason) VALUES (?1, ?2)",
                params![format_ts(now), reason],
            )
        })
        .map(drop)
    }

    fn run_skip_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row(
                "SELECT reason FROM run_skips WHERE at >= ?1 AND at < ?2
                 ORDER BY at DESC, rowid DESC LIMIT 1",
                params![format_ts(from), format_ts(to)],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;

    #[test]
    fn handled_slots_only_move_forward_and_skips_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let change = |handled: &str, skip: Option<&str>| SlotChange {
            task_id: "t1".into(),
            handled: Some(ts(handled)),
            skip: skip.map(str::to_string),
        };
        s.save_slots(
            &[change("2026-05-02T02:00:00Z", None)],
            0,
            ts("2026-05-02T03:00:00Z"),
        )
        .unwrap();
        s.save_slots(
            &[change("2026-05-01T02:00:00Z", Some("budget"))],
            0,
            ts("2026-05-02T04:00:00Z"),
        )
        .unwrap();
        let st = &s.slot_states().unwrap()["t1"];
        assert_eq!(st.handled, ts("2026-05-02T02:00:00Z"));
        assert_eq!(
            st.skip,
            Some(("budget".to_string(), ts("2026-05-02T04:00:00Z")))
        );

        s.record_run_skip("paused", ts("2026-05-03T01:00:00Z"))
            .unwrap();
        s.record_run_skip("outside_active_hours", ts("2026-05-03T05:00:00Z"))
            .unwrap();
        let between = |a, b| s.run_skip_between(ts(a), ts(b)).unwrap();
        assert_eq!(
            between("2026-05-03T00:00:00Z", "2026-05-04T00:00:00Z").as_deref(),
            Some("outside_active_hours")
        );
        assert_eq!(
            between("2026-05-03T00:00:00Z", "2026-05-03T05:00:00Z").as_deref(),
            Some("paused")
        );
        assert_eq!(
            between("2026-05-04T00:00:00Z", "2026-05-05T00:00:00Z"),
            None
        );
    }
}
