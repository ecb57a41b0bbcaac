//! [`Snapshots`] on PostgreSQL: the planner's whole view of the fleet's stored state.
//!
//! Invariants (beyond the trait's):
//! - A snapshot is read in one REPEATABLE READ, READ ONLY transaction: every query sees the
//!   same committed state of every node, and a reader never aborts a writer nor is aborted
//!   for a conflict. One query per table, never one per task.
//! - It reads the rows the other concerns' methods would read (spend, unsettled starts,
//!   snoozes in force, proposals, the pause) with their own meaning, inside that transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use postgres::{IsolationLevel, Transaction};

use super::Pg;
use super::outbox::{PAUSE_COLUMNS, pause_row};
use crate::audit::{format_ts, parse_ts};
use crate::model::ApprovalState;
use crate::store::{Result, Snapshot, Snapshots};

impl Snapshots for Pg {
    fn clamp_future_times(&self, now: DateTime<Utc>) -> Result<usize> {
        let now = format_ts(now);
        self.tx(|tx| {
            let attempts = tx.execute(
                "UPDATE task_state SET last_attempt = $1 WHERE last_attempt > $1",
                &[&now],
            )?;
            let starts = tx.execute(
                "UPDATE tool_state SET last_start = $1 WHERE last_start > $1",
                &[&now],
            )?;
            Ok((attempts + starts) as usize)
        })
    }

    fn snapshot(
        &self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
        day_start: DateTime<Utc>,
    ) -> Result<Snapshot> {
        self.with(|c| {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let snap = read(&mut tx, now, approval_ttl, day_start)?;
            tx.commit()?;
            Ok(snap)
        })
    }
}

/// Everything `plan` needs, read in `tx`, as SQLite's snapshot reads it.
fn read(
    tx: &mut Transaction,
    now: DateTime<Utc>,
    approval_ttl: Duration,
    day_start: DateTime<Utc>,
) -> std::result::Result<Snapshot, postgres::Error> {
    let mut snap = Snapshot {
        spent_today: tx
            .query_one(
                "SELECT COALESCE(SUM(cost_usd), 0)::float8 FROM task_runs
                 WHERE started_at >= $1 AND cost_usd IS NOT NULL",
                &[&format_ts(day_start)],
            )?
            .try_get(0)?,
        ..Snapshot::default()
    };
    for r in tx.query("SELECT task_id FROM starts", &[])? {
        snap.interrupted.insert(r.try_get(0)?);
    }
    for r in tx.query(
        "SELECT task_id, until FROM snoozes WHERE until > $1",
        &[&format_ts(now)],
    )? {
        let until: String = r.try_get(1)?;
        snap.snoozed.insert(
            r.try_get(0)?,
            parse_ts(&until).unwrap_or(DateTime::<Utc>::MIN_UTC),
        );
    }
    for r in tx.query(
        "SELECT task_id, proposed_by, approved_by FROM proposals",
        &[],
    )? {
        let task: String = r.try_get(0)?;
        if r.try_get::<_, Option<String>>(2)?.is_none() {
            snap.unapproved.insert(task.clone());
        } else {
            snap.released.insert(task.clone());
        }
        snap.proposed_by.insert(task, r.try_get(1)?);
    }
    // Cooldowns are hours, not weeks: a week back is plenty.
    let week = format_ts(now - chrono::Duration::days(7));
    for r in tx.query(
        "SELECT tool, last_start FROM tool_state WHERE last_start >= $1",
        &[&week],
    )? {
        let at: String = r.try_get(1)?;
        if let Some(t) = parse_ts(&at) {
            let t = snap.not_after(t, now);
            snap.tool_last_start.insert(r.try_get(0)?, t);
        }
    }
    for r in tx.query(
        "SELECT task_id, last_attempt, reminded_at, last_success, consecutive_failures,
            tripped_at, retry_at FROM task_state",
        &[],
    )? {
        let id: String = r.try_get(0)?;
        let attempt: Option<String> = r.try_get(1)?;
        let failures: i64 = r.try_get(4)?;
        let retry: Option<String> = r.try_get(6)?;
        if let Some(t) = retry.as_deref().and_then(parse_ts) {
            snap.retry_at.insert(id.clone(), t);
        }
        if failures > 0 {
            // A streak past u32 is beyond any real one: it stays the largest.
            let failures = u32::try_from(failures).unwrap_or(u32::MAX);
            snap.failures.insert(id.clone(), failures);
        }
        if r.try_get::<_, Option<String>>(5)?.is_some() {
            snap.tripped.insert(id.clone());
        }
        if r.try_get::<_, Option<String>>(3)?.is_some() {
            snap.succeeded.insert(id.clone());
        }
        if let Some(t) = attempt.as_deref().and_then(parse_ts) {
            let t = snap.not_after(t, now);
            snap.last_attempt.insert(id.clone(), t);
        }
        if r.try_get::<_, Option<String>>(2)?.is_some() {
            snap.reminded.insert(id);
        }
    }
    // A retrying approval runs as approved work when its retry comes.
    for r in tx.query(
        "SELECT task_id, id, state IN ($1, $2) FROM approvals
         WHERE state IN ('pending', 'approved', 'running', 'retrying')",
        &[
            &ApprovalState::Approved.as_str(),
            &ApprovalState::Retrying.as_str(),
        ],
    )? {
        let task: String = r.try_get(0)?;
        if r.try_get(2)? {
            snap.approved.insert(task.clone());
        }
        snap.pending.insert(task, r.try_get(1)?);
    }
    for r in tx.query("SELECT task_id FROM grants", &[])? {
        snap.granted.insert(r.try_get(0)?);
    }
    let pause = tx.query_opt(
        &format!("SELECT {PAUSE_COLUMNS} FROM pause WHERE id = 1"),
        &[],
    )?;
    snap.paused = match pause {
        Some(r) => pause_row(&r)?.in_force(now),
        None => false,
    };
    // A denial holds for approval_ttl after it was made.
    let ttl = chrono::Duration::from_std(approval_ttl).unwrap_or(chrono::Duration::MAX);
    let since = now
        .checked_sub_signed(ttl)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    for r in tx.query(
        "SELECT task_id, MAX(decided_at) FROM approvals
         WHERE state = $2 AND decided_at > $1 GROUP BY task_id",
        &[&format_ts(since), &ApprovalState::Denied.as_str()],
    )? {
        let decided: String = r.try_get(1)?;
        if let Some(t) = parse_ts(&decided) {
            snap.denied_until
                .insert(r.try_get(0)?, t.checked_add_signed(ttl).unwrap_or(t));
        }
    }
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::super::test_util;
    use super::*;
    use crate::store::Sqlite;
    use crate::store::test_util::ts;

    /// One state of every table a snapshot reads, as SQL both stores take. "Now" is
    /// 2026-05-01T12:00:00Z, the budget day starts at midnight, approvals live an hour.
    const STATE: &str = "
        INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at, outcome, cost_usd)
        VALUES ('r', 'paid', 'llm', '2026-04-30T23:00:00.000Z', '2026-04-30T23:01:00.000Z',
                'succeeded', 1.0),
               ('r', 'paid', 'llm', '2026-05-01T08:00:00.000Z', '2026-05-01T08:01:00.000Z',
                'succeeded', 0.25),
               ('r', 'paid', 'llm', '2026-05-01T09:00:00.000Z', '2026-05-01T09:01:00.000Z',
                'failed', 0.5),
               ('r', 'free', 'log', '2026-05-01T09:00:00.000Z', '2026-05-01T09:01:00.000Z',
                'succeeded', NULL);
        INSERT INTO starts (task_id, run_id, started_at, tool, input, file, line, section)
        VALUES ('once', 'r', '2026-05-01T08:00:00.000Z', 'shell', '{}', 'H.md', 3, 'Once');
        INSERT INTO snoozes (task_id, file, line, since, until, by)
        VALUES ('napping', 'H.md', 4, '2026-05-01T10:00:00.000Z', '2026-05-02T10:00:00.000Z',
                'cli:me'),
               ('awake', 'H.md', 5, '2026-05-01T10:00:00.000Z', '2026-05-01T11:00:00.000Z',
                'cli:me');
        INSERT INTO proposals (task_id, proposed_by, file, proposed_at, approved_by, approved_at)
        VALUES ('new', 'mcp:a', 'H.md', '2026-05-01T10:00:00.000Z', NULL, NULL),
               ('kept', 'mcp:b', 'H.md', '2026-05-01T10:00:00.000Z', 'cli:me',
                '2026-05-01T10:30:00.000Z');
        INSERT INTO tool_state (tool, last_start)
        VALUES ('log', '2026-05-01T09:00:00.000Z'),
               ('llm', '2026-05-01T13:00:00.000Z'),
               ('shell', '2026-04-20T09:00:00.000Z');
        INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome,
                consecutive_failures, reminded_at, tripped_at, retry_at)
        VALUES ('paid', '2026-05-01T09:00:00.000Z', '2026-05-01T08:01:00.000Z', 'failed', 2,
                NULL, '2026-05-01T09:01:00.000Z', '2026-05-01T12:30:00.000Z'),
               ('free', '2026-05-01T14:00:00.000Z', '2026-05-01T09:01:00.000Z',
                'succeeded', 0, '2026-05-01T09:02:00.000Z', NULL, NULL),
               ('never', NULL, NULL, NULL, 0, NULL, NULL, NULL);
        INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                created_at, decided_at)
        VALUES ('asks', 'pending', 'H.md', 6, 'S', 'shell', '{}', 't',
                '2026-05-01T11:00:00.000Z', NULL),
               ('later', 'approved', 'H.md', 7, 'S', 'shell', '{}', 't',
                '2026-05-01T11:00:00.000Z', '2026-05-01T11:10:00.000Z'),
               ('busy', 'running', 'H.md', 8, 'S', 'shell', '{}', 't',
                '2026-05-01T11:00:00.000Z', '2026-05-01T11:10:00.000Z'),
               ('again', 'retrying', 'H.md', 9, 'S', 'shell', '{}', 't',
                '2026-05-01T11:00:00.000Z', '2026-05-01T11:10:00.000Z'),
               ('no', 'denied', 'H.md', 10, 'S', 'shell', '{}', 't',
                '2026-05-01T11:00:00.000Z', '2026-05-01T11:15:00.000Z'),
               ('no', 'denied', 'H.md', 10, 'S', 'shell', '{}', 't',
                '2026-05-01T11:00:00.000Z', '2026-05-01T11:20:00.000Z'),
               ('long-ago', 'denied', 'H.md', 11, 'S', 'shell', '{}', 't',
                '2026-05-01T09:00:00.000Z', '2026-05-01T10:00:00.000Z'),
               ('done', 'succeeded', 'H.md', 12, 'S', 'shell', '{}', 't',
                '2026-05-01T09:00:00.000Z', '2026-05-01T09:10:00.000Z');
        INSERT INTO grants (task_id, tool, input, file, text, created_at, created_by)
        VALUES ('trusted', 'shell', '{}', 'H.md', 't', '2026-05-01T09:00:00.000Z', 'cli:me');
        INSERT INTO pause (id, since, until, reason, by)
        VALUES (1, '2026-05-01T10:00:00.000Z', '2026-05-01T13:00:00.000Z', NULL, 'cli:me');
    ";

    fn read(store: &dyn Snapshots) -> Snapshot {
        store
            .snapshot(
                ts("2026-05-01T12:00:00Z"),
                Duration::from_secs(3600),
                ts("2026-05-01T00:00:00Z"),
            )
            .unwrap()
    }

    /// Every field of two snapshots, one by one (a snapshot has no `PartialEq`).
    fn assert_same(pg: &Snapshot, sqlite: &Snapshot) {
        assert_eq!(pg.last_attempt, sqlite.last_attempt);
        assert_eq!(pg.reminded, sqlite.reminded);
        assert_eq!(pg.succeeded, sqlite.succeeded);
        assert_eq!(pg.pending, sqlite.pending);
        assert_eq!(pg.approved, sqlite.approved);
        assert_eq!(pg.granted, sqlite.granted);
        assert_eq!(pg.paused, sqlite.paused);
        assert_eq!(pg.failures, sqlite.failures);
        assert_eq!(pg.tripped, sqlite.tripped);
        assert_eq!(pg.tool_last_start, sqlite.tool_last_start);
        assert_eq!(pg.spent_today, sqlite.spent_today);
        assert_eq!(pg.denied_until, sqlite.denied_until);
        assert_eq!(pg.future_times, sqlite.future_times);
        assert_eq!(pg.proposed_by, sqlite.proposed_by);
        assert_eq!(pg.unapproved, sqlite.unapproved);
        assert_eq!(pg.released, sqlite.released);
        assert_eq!(pg.interrupted, sqlite.interrupted);
        assert_eq!(pg.snoozed, sqlite.snoozed);
        assert_eq!(pg.retry_at, sqlite.retry_at);
    }

    #[test]
    fn a_snapshot_reads_the_same_rows_as_sqlites_does() {
        let Some(pg) = test_util::store("n1") else {
            return;
        };
        pg.with(|c| c.batch_execute(STATE)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Sqlite::open(dir.path()).unwrap();
        crate::store::test_util::conn(&sqlite)
            .execute_batch(STATE)
            .unwrap();
        let (snap, theirs) = (read(&pg), read(&sqlite));
        assert_same(&snap, &theirs);

        // And what that is, so that the comparison is not of two empty snapshots.
        let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect();
        let now = ts("2026-05-01T12:00:00Z");
        assert_eq!(snap.spent_today, 0.75);
        assert_eq!(snap.interrupted, set(&["once"]));
        assert_eq!(
            snap.snoozed,
            [("napping".to_string(), ts("2026-05-02T10:00:00Z"))].into()
        );
        assert_eq!(snap.unapproved, set(&["new"]));
        assert_eq!(snap.released, set(&["kept"]));
        assert_eq!(snap.proposed_by["new"], "mcp:a");
        // A week back, and a future start read as now (counted).
        assert_eq!(
            snap.tool_last_start,
            [
                ("log".to_string(), ts("2026-05-01T09:00:00Z")),
                ("llm".to_string(), now)
            ]
            .into()
        );
        assert_eq!(snap.last_attempt["free"], now);
        assert_eq!(snap.last_attempt["paid"], ts("2026-05-01T09:00:00Z"));
        assert_eq!(snap.future_times, 2);
        assert_eq!(snap.failures, [("paid".to_string(), 2)].into());
        assert_eq!(snap.tripped, set(&["paid"]));
        assert_eq!(snap.succeeded, set(&["paid", "free"]));
        assert_eq!(snap.reminded, set(&["free"]));
        assert_eq!(
            snap.retry_at,
            [("paid".to_string(), ts("2026-05-01T12:30:00Z"))].into()
        );
        assert_eq!(snap.pending.len(), 4);
        assert_eq!(snap.approved, set(&["later", "again"]));
        assert_eq!(snap.granted, set(&["trusted"]));
        assert!(snap.paused);
        // The latest denial, an hour on; one older than an hour holds nothing.
        assert_eq!(
            snap.denied_until,
            [("no".to_string(), ts("2026-05-01T12:20:00Z"))].into()
        );
    }

    #[test]
    fn future_times_are_clamped_to_now_once() {
        let Some(pg) = test_util::store("n1") else {
            return;
        };
        pg.with(|c| c.batch_execute(STATE)).unwrap();
        let now = ts("2026-05-01T12:00:00Z");
        assert_eq!(read(&pg).future_times, 2);
        assert_eq!(pg.clamp_future_times(now).unwrap(), 2);
        assert_eq!(pg.clamp_future_times(now).unwrap(), 0);
        let snap = read(&pg);
        assert_eq!(snap.future_times, 0);
        assert_eq!(snap.last_attempt["free"], now);
        assert_eq!(snap.tool_last_start["llm"], now);
        let stored: String = pg
            .with(|c| c.query_one("SELECT last_start FROM tool_state WHERE tool = 'llm'", &[]))
            .unwrap()
            .get(0);
        assert_eq!(stored, "2026-05-01T12:00:00.000Z");
    }
}
