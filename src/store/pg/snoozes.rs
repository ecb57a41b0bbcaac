//! [`Snoozes`] on PostgreSQL: tasks a person held back until a time, as `store/snoozes.rs`
//! keeps them.
//!
//! Invariants (besides those of `store/snoozes.rs`):
//! - A snooze's `task_skipped` line is said once in the fleet: `said` is set by the one
//!   transaction that finds it unset; another node's, at the same moment, finds it set.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use postgres::Row;

use super::Pg;
use crate::audit::{format_ts, parse_ts};
use crate::store::Result;
use crate::store::snoozes::{NewSnooze, SnoozeRow, Snoozes, Window};
use crate::text::Redacted;

const COLUMNS: &str = "task_id, file, line, since, until, reason, by";

fn row(r: &Row) -> std::result::Result<SnoozeRow, postgres::Error> {
    let until: String = r.try_get(4)?;
    Ok(SnoozeRow {
        task_id: r.try_get(0)?,
        file: r.try_get(1)?,
        line: r.try_get(2)?,
        since: r.try_get(3)?,
        until: parse_ts(&until).unwrap_or(DateTime::<Utc>::MIN_UTC),
        reason: r.try_get(5)?,
        by: r.try_get(6)?,
    })
}

impl Snoozes for Pg {
    fn snooze(&mut self, s: &NewSnooze, now: DateTime<Utc>) -> Result<()> {
        let now = format_ts(now);
        let until = format_ts(s.until);
        let line = s.line as i64;
        let reason = s.reason.map(Redacted::as_str);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO snoozes (task_id, file, line, since, until, reason, by, said)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 0)
                 ON CONFLICT (task_id) DO UPDATE SET file = excluded.file,
                    line = excluded.line, until = excluded.until, reason = excluded.reason,
                    by = excluded.by,
                    since = CASE WHEN snoozes.until > $4 THEN snoozes.since ELSE $4 END,
                    said = CASE WHEN snoozes.until > $4 THEN snoozes.said ELSE 0 END",
                &[&s.task_id, &s.file, &line, &now, &until, &reason, &s.by],
            )
            .map(drop)
        })
    }

    fn unsnooze(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<Option<SnoozeRow>> {
        let now = format_ts(now);
        self.tx(|tx| {
            let sql = format!("SELECT {COLUMNS} FROM snoozes WHERE task_id = $1 AND until > $2");
            let Some(found) = tx.query_opt(&sql, &[&task_id, &now])? else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE snoozes SET until = $2 WHERE task_id = $1",
                &[&task_id, &now],
            )?;
            row(&found).map(Some)
        })
    }

    fn snooze_windows(&self) -> Result<HashMap<String, Window>> {
        let rows: Vec<(String, String, String)> = self.with(|c| {
            c.query("SELECT task_id, since, until FROM snoozes", &[])?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                .collect()
        })?;
        let mut windows = HashMap::new();
        for (task, since, until) in rows {
            if let (Some(since), Some(until)) = (parse_ts(&since), parse_ts(&until)) {
                windows.insert(task, (since, until));
            }
        }
        Ok(windows)
    }

    fn snoozes(&self, now: DateTime<Utc>) -> Result<Vec<SnoozeRow>> {
        let now = format_ts(now);
        self.with(|c| {
            let sql =
                format!("SELECT {COLUMNS} FROM snoozes WHERE until > $1 ORDER BY until, task_id");
            c.query(&sql, &[&now])?.iter().map(row).collect()
        })
    }

    fn first_snooze_skip(&mut self, task_id: &str) -> Result<bool> {
        self.tx(|tx| {
            tx.execute(
                "UPDATE snoozes SET said = 1 WHERE task_id = $1 AND said = 0",
                &[&task_id],
            )
            .map(|n| n == 1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Retention;
    use crate::store::test_util::ts;

    fn snooze<'a>(task_id: &'a str, until: &str, reason: Option<&'a Redacted>) -> NewSnooze<'a> {
        NewSnooze {
            task_id,
            file: "/x/HEARTBEAT.md",
            line: 3,
            until: ts(until),
            reason,
            by: "cli:ann",
        }
    }

    #[test]
    fn a_snooze_holds_until_its_end_is_replaced_and_is_said_once() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
        let t0 = ts("2026-05-01T10:00:00Z");
        let why: Redacted = "away".into();
        s.snooze(&snooze("a", "2026-05-03T10:00:00Z", Some(&why)), t0)
            .unwrap();
        let rows = s.snoozes(t0).unwrap();
        assert_eq!(
            rows,
            [SnoozeRow {
                task_id: "a".into(),
                file: "/x/HEARTBEAT.md".into(),
                line: 3,
                since: format_ts(t0),
                until: ts("2026-05-03T10:00:00Z"),
                reason: Some("away".into()),
                by: "cli:ann".into(),
            }]
        );
        assert!(s.first_snooze_skip("a").unwrap());
        assert!(!s.first_snooze_skip("a").unwrap());
        // A new end for the snooze in force: the same snooze, already said.
        s.snooze(&snooze("a", "2026-05-05T10:00:00Z", None), t0)
            .unwrap();
        let rows = s.snoozes(t0).unwrap();
        assert_eq!(rows[0].until, ts("2026-05-05T10:00:00Z"));
        assert_eq!(rows[0].since, format_ts(t0));
        assert!(!s.first_snooze_skip("a").unwrap());
        // In force while its end is later than now, and not after.
        assert_eq!(s.snoozes(ts("2026-05-04T00:00:00Z")).unwrap().len(), 1);
        assert!(s.snoozes(ts("2026-05-05T10:00:00Z")).unwrap().is_empty());
        // Over: a new snooze is a new one, said again.
        let later = ts("2026-05-06T00:00:00Z");
        assert!(s.snoozes(later).unwrap().is_empty());
        s.snooze(&snooze("a", "2026-05-07T00:00:00Z", None), later)
            .unwrap();
        assert!(s.first_snooze_skip("a").unwrap());
        // Unsnoozed: over now, its window kept; unsnoozing again finds nothing.
        let row = s.unsnooze("a", later).unwrap().unwrap();
        assert_eq!(row.until, ts("2026-05-07T00:00:00Z"));
        assert!(s.unsnooze("a", later).unwrap().is_none());
        assert!(s.snoozes(later).unwrap().is_empty());
        assert_eq!(s.snooze_windows().unwrap()["a"], (later, later));
    }

    #[test]
    fn of_two_nodes_skipping_a_snoozed_task_at_once_one_says_it() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let url = url.as_str();
        let t0 = ts("2026-05-01T10:00:00Z");
        let tasks: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
        let mut s = Pg::connect(url, "n0").unwrap();
        for t in &tasks {
            s.snooze(&snooze(t, "2026-05-03T10:00:00Z", None), t0)
                .unwrap();
        }
        let said: Vec<usize> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["n1", "n2"]
                .map(|node| {
                    let tasks = &tasks;
                    scope.spawn(move || {
                        let mut s = Pg::connect(url, node).unwrap();
                        tasks
                            .iter()
                            .filter(|t| s.first_snooze_skip(t).unwrap())
                            .count()
                    })
                })
                .into_iter()
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(said.iter().sum::<usize>(), tasks.len(), "{said:?}");
    }

    #[test]
    fn pruning_drops_the_snoozes_that_ended_before_the_cutoff_only() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
        let t0 = ts("2026-01-01T00:00:00Z");
        s.snooze(&snooze("old", "2026-01-02T00:00:00Z", None), t0)
            .unwrap();
        s.snooze(&snooze("held", "2027-01-01T00:00:00Z", None), t0)
            .unwrap();
        let cutoff = ts("2026-03-01T00:00:00Z");
        s.prune_once_a_day("2026-06-01", cutoff, cutoff).unwrap();
        let left: Vec<String> = s
            .with(|c| c.query("SELECT task_id FROM snoozes", &[]))
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(left, ["held"]);
    }
}
