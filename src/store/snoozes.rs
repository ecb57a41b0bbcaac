//! Snoozes (docs/reference.md#snooze): one task held back until a time, by a person, with
//! the file left untouched.
//!
//! Invariants:
//! - At most one snooze per task id (the primary key): snoozing a snoozed task replaces its
//!   end (and its reason and who); a task whose snooze ended starts a new one.
//! - A snooze is in force while `until` is later than now; an ended one is simply over. Its
//!   row stays (unsnoozing ends it now), so that the slots it held are never reported
//!   missed, until the task is snoozed again or retention prunes it.
//! - Its `task_skipped` line is said once per snooze: `said` is set by the one statement that
//!   finds it unset.
//! - Written with `synchronous = FULL`, as the pause is: a person's decision.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::{Result, Sqlite, format_ts, parse_ts};
use crate::text::Redacted;

/// A snooze to record.
#[derive(Clone, Debug)]
pub(crate) struct NewSnooze<'a> {
    pub task_id: &'a str,
    pub file: &'a str,
    pub line: usize,
    pub until: DateTime<Utc>,
    pub reason: Option<&'a Redacted>,
    pub by: &'a str,
}

/// A snooze as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SnoozeRow {
    pub task_id: String,
    pub file: String,
    pub line: i64,
    pub since: String,
    pub until: DateTime<Utc>,
    pub reason: Option<String>,
    pub by: String,
}

/// From when to when a snooze held its task.
pub(crate) type Window = (DateTime<Utc>, DateTime<Utc>);

/// Tasks a person snoozed.
pub(crate) trait Snoozes {
    /// Snooze a task from `now` until `s.until`, replacing the end (reason, who) of a snooze
    /// in force; one that ended is replaced by a new one, to be said again.
    fn snooze(&mut self, s: &NewSnooze, now: DateTime<Utc>) -> Result<()>;

    /// End a task's snooze at `now`; the row as it was, if it was in force.
    fn unsnooze(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<Option<SnoozeRow>>;

    /// Per task, the time its latest snooze held it: from its start to its end (or to when
    /// it was unsnoozed), ended or not.
    fn snooze_windows(&self) -> Result<HashMap<String, Window>>;

    /// The snoozes in force at `now`, the soonest to end first.
    fn snoozes(&self, now: DateTime<Utc>) -> Result<Vec<SnoozeRow>>;

    /// Whether this is the first skip of the task's snooze to be said, remembering it.
    fn first_snooze_skip(&mut self, task_id: &str) -> Result<bool>;
}

const COLUMNS: &str = "task_id, file, line, since, until, reason, by";

fn row(r: &rusqlite::Row) -> rusqlite::Result<SnoozeRow> {
    let until: String = r.get(4)?;
    Ok(SnoozeRow {
        task_id: r.get(0)?,
        file: r.get(1)?,
        line: r.get(2)?,
        since: r.get(3)?,
        until: parse_ts(&until).unwrap_or(DateTime::<Utc>::MIN_UTC),
        reason: r.get(5)?,
        by: r.get(6)?,
    })
}

impl Snoozes for Sqlite {
    fn snooze(&mut self, s: &NewSnooze, now: DateTime<Utc>) -> Result<()> {
        let now = format_ts(now);
        self.durable(|conn| {
            conn.execute(
                "INSERT INTO snoozes (task_id, file, line, since, until, reason, by, said)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)
                 ON CONFLICT(task_id) DO UPDATE SET file = excluded.file,
                    line = excluded.line, until = excluded.until, reason = excluded.reason,
                    by = excluded.by,
                    since = CASE WHEN snoozes.until > ?4 THEN snoozes.since ELSE ?4 END,
                    said = CASE WHEN snoozes.until > ?4 THEN snoozes.said ELSE 0 END",
                params![
                    s.task_id,
                    s.file,
                    s.line as i64,
                    now,
                    format_ts(s.until),
                    s.reason.map(Redacted::as_str),
                    s.by
                ],
            )
        })
        .map(drop)
    }

    fn unsnooze(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<Option<SnoozeRow>> {
        let now = format_ts(now);
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let sql = format!("SELECT {COLUMNS} FROM snoozes WHERE task_id = ?1 AND until > ?2");
            let found = tx.query_row(&sql, params![task_id, now], row).optional()?;
            if found.is_some() {
                tx.execute(
                    "UPDATE snoozes SET until = ?2 WHERE task_id = ?1",
                    params![task_id, now],
                )?;
            }
            tx.commit()?;
            Ok(found)
        })
    }

    fn snooze_windows(&self) -> Result<HashMap<String, Window>> {
        let mut st = self
            .conn
            .prepare("SELECT task_id, since, until FROM snoozes")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut windows = HashMap::new();
        for r in rows {
            let (task, since, until) = r.map_err(|e| self.err(e))?;
            if let (Some(since), Some(until)) = (parse_ts(&since), parse_ts(&until)) {
                windows.insert(task, (since, until));
            }
        }
        Ok(windows)
    }

    fn snoozes(&self, now: DateTime<Utc>) -> Result<Vec<SnoozeRow>> {
        let sql = format!("SELECT {COLUMNS} FROM snoozes WHERE until > ?1 ORDER BY until, task_id");
        let mut st = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = st
            .query_map([format_ts(now)], row)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn first_snooze_skip(&mut self, task_id: &str) -> Result<bool> {
        self.conn
            .execute(
                "UPDATE snoozes SET said = 1 WHERE task_id = ?1 AND said = 0",
                [task_id],
            )
            .map(|n| n == 1)
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;
    use crate::store::Snapshots;
    use std::time::Duration;

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
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let t0 = ts("2026-05-01T10:00:00Z");
        let why: Redacted = "away".into();
        s.snooze(&snooze("a", "2026-05-03T10:00:00Z", Some(&why)), t0)
            .unwrap();
        let rows = s.snoozes(t0).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].until, ts("2026-05-03T10:00:00Z"));
        assert_eq!(rows[0].reason.as_deref(), Some("away"));
        assert!(s.first_snooze_skip("a").unwrap());
        assert!(!s.first_snooze_skip("a").unwrap());
        // A new end for the snooze in force: the same snooze, already said.
        s.snooze(&snooze("a", "2026-05-05T10:00:00Z", None), t0)
            .unwrap();
        let rows = s.snoozes(t0).unwrap();
        assert_eq!(rows[0].until, ts("2026-05-05T10:00:00Z"));
        assert_eq!(rows[0].since, format_ts(t0));
        assert!(!s.first_snooze_skip("a").unwrap());
        // The planner sees it while it holds, and not after.
        let snap = |now| {
            s.snapshot(ts(now), Duration::from_secs(60), ts("2000-01-01T00:00:00Z"))
                .unwrap()
        };
        assert_eq!(
            snap("2026-05-04T00:00:00Z").snoozed.get("a"),
            Some(&ts("2026-05-05T10:00:00Z"))
        );
        assert!(snap("2026-05-05T10:00:00Z").snoozed.is_empty());
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
    fn pruning_drops_the_snoozes_that_ended_before_the_cutoff_only() {
        use crate::store::Retention;
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let t0 = ts("2026-01-01T00:00:00Z");
        s.snooze(&snooze("old", "2026-01-02T00:00:00Z", None), t0)
            .unwrap();
        s.snooze(&snooze("held", "2027-01-01T00:00:00Z", None), t0)
            .unwrap();
        let cutoff = ts("2026-03-01T00:00:00Z");
        s.prune_once_a_day("2026-06-01", cutoff, cutoff).unwrap();
        let left: Vec<String> = crate::store::test_util::conn(&s)
            .prepare("SELECT task_id FROM snoozes")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(left, ["held"]);
    }
}
