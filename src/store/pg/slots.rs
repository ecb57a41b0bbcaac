//! [`Slots`] on PostgreSQL: calendar schedules' handled slots and the runs skipped as a
//! whole, as `store/slots.rs` keeps them.
//!
//! Invariants (besides those of `store/slots.rs`):
//! - A handled slot moves forward in SQL (an upsert that only writes a later time), so that
//!   of two nodes moving one task's slot at once the later time stays.
//! - The missed slots a run reports are added to their total in the same transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{Pg, metrics};
use crate::audit::{format_ts, parse_ts};
use crate::store::Result;
use crate::store::metrics::MISSED_SLOTS;
use crate::store::slots::{SlotChange, SlotState, Slots};

impl Slots for Pg {
    fn slot_states(&self) -> Result<HashMap<String, SlotState>> {
        let rows: Vec<(String, String, Option<String>, Option<String>)> = self.with(|c| {
            c.query(
                "SELECT task_id, handled, skip_reason, skip_at FROM task_slots",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
            .collect()
        })?;
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
        self.tx(|tx| {
            for c in changes {
                if let Some(h) = c.handled {
                    // Forward only: RFC 3339 UTC with milliseconds sorts as time does.
                    tx.execute(
                        "INSERT INTO task_slots (task_id, handled) VALUES ($1, $2)
                         ON CONFLICT (task_id) DO UPDATE SET handled = excluded.handled
                         WHERE excluded.handled > task_slots.handled",
                        &[&c.task_id, &format_ts(h)],
                    )?;
                }
                if let Some(reason) = &c.skip {
                    tx.execute(
                        "UPDATE task_slots SET skip_reason = $2, skip_at = $3 WHERE task_id = $1",
                        &[&c.task_id, reason, &at],
                    )?;
                }
            }
            if missed > 0 {
                metrics::increment(tx, MISSED_SLOTS, "", "", missed)?;
            }
            Ok(())
        })
    }

    fn record_run_skip(&mut self, reason: &str, now: DateTime<Utc>) -> Result<()> {
        let at = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO run_skips (at, reason) VALUES ($1, $2)",
                &[&at, &reason],
            )
            .map(drop)
        })
    }

    /// Of skips at the same millisecond (from two nodes), either one: PostgreSQL keeps no
    /// insertion order.
    fn run_skip_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Option<String>> {
        let (from, to) = (format_ts(from), format_ts(to));
        self.with(|c| {
            c.query_opt(
                "SELECT reason FROM run_skips WHERE at >= $1 AND at < $2
                 ORDER BY at DESC LIMIT 1",
                &[&from, &to],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Metrics;
    use crate::store::test_util::ts;

    #[test]
    fn handled_slots_only_move_forward_and_skips_are_remembered() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
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

    #[test]
    fn missed_slots_are_counted_with_the_changes_that_report_them() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
        let change = SlotChange {
            task_id: "t1".into(),
            handled: Some(ts("2026-05-02T02:00:00Z")),
            skip: None,
        };
        s.save_slots(&[change], 2, ts("2026-05-02T03:00:00Z"))
            .unwrap();
        s.save_slots(&[], 1, ts("2026-05-02T04:00:00Z")).unwrap();
        // Nothing to save: nothing written.
        s.save_slots(&[], 0, ts("2026-05-02T05:00:00Z")).unwrap();
        assert_eq!(s.metrics().unwrap().missed_slots, 3);
        assert_eq!(
            s.slot_states().unwrap()["t1"],
            SlotState {
                handled: ts("2026-05-02T02:00:00Z"),
                skip: None
            }
        );
    }

    #[test]
    fn two_nodes_reporting_missed_slots_at_once_both_count() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let url = url.as_str();
        std::thread::scope(|scope| {
            for node in ["n1", "n2"] {
                scope.spawn(move || {
                    let mut s = Pg::connect(url, node).unwrap();
                    for i in 0..50 {
                        let change = SlotChange {
                            task_id: "t1".into(),
                            handled: Some(ts("2026-05-02T02:00:00Z") + chrono::Duration::hours(i)),
                            skip: None,
                        };
                        s.save_slots(&[change], 1, ts("2026-05-02T03:00:00Z"))
                            .unwrap();
                    }
                });
            }
        });
        let s = Pg::connect(url, "n3").unwrap();
        assert_eq!(s.metrics().unwrap().missed_slots, 100);
        assert_eq!(
            s.slot_states().unwrap()["t1"].handled,
            ts("2026-05-02T02:00:00Z") + chrono::Duration::hours(49)
        );
    }
}
