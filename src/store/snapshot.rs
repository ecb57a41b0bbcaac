//! What a run needs to know about stored state to plan, read in one go.
//!
//! Invariants:
//! - Reading only: a snapshot changes nothing in the database.
//! - Everything `plan` looks at comes from here, so `check`, dry runs and runs plan from the
//!   same facts.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::params;

use crate::model::ApprovalState;

use super::{History, Outbox, Proposals, Result, Snoozes, Sqlite, Starts, format_ts, parse_ts};

/// What a run needs to know about stored state to plan.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    pub last_attempt: HashMap<String, DateTime<Utc>>,
    /// One-time reminders already given.
    pub reminded: HashSet<String>,
    /// Tasks that succeeded at least once (a one-time task never runs twice, even when its
    /// tick could not be written).
    pub succeeded: HashSet<String>,
    /// Task id → id of its open approval (pending, or approved and waiting to run).
    pub pending: HashMap<String, i64>,
    /// Of those, the tasks whose approval a person gave and that wait for the next run
    /// (`approve --later`, or blocked when `approve` tried to run them).
    pub approved: HashSet<String>,
    /// Task ids with an *always* grant: `ask` counts as `auto` for them.
    pub granted: HashSet<String>,
    /// A pause is in force (runs are skipped).
    pub paused: bool,
    /// Task id → failures in a row.
    pub failures: HashMap<String, u32>,
    /// Tasks tripped by the failure breaker.
    pub tripped: HashSet<String>,
    /// Tool → when a task of it last started (for cooldowns).
    pub tool_last_start: HashMap<String, DateTime<Utc>>,
    /// Spent since the start of the budget day (`snapshot`'s `day_start`).
    pub spent_today: f64,
    /// Task id → when its latest denial stops holding.
    pub denied_until: HashMap<String, DateTime<Utc>>,
    /// Stored attempt and start times later than `now` (a clock that stepped back, a run with
    /// a future `--now`): each is read as `now`, so it silences a schedule for one interval at
    /// most; `check` warns about them.
    pub future_times: usize,
    /// Task id → who proposed it (`mcp:<client>`), for tasks an agent proposed.
    pub proposed_by: HashMap<String, String>,
    /// Proposed tasks no person has approved yet: they ask, whatever the policy
    /// (docs/reference.md#proposal-mark).
    pub unapproved: HashSet<String>,
    /// Proposed tasks a person has approved once in this state dir: ordinary policy from
    /// then on. A task marked as proposed in its file and not in here asks first.
    pub released: HashSet<String>,
    /// One-time tasks started and never settled: held until `heartbeat reset`.
    pub interrupted: HashSet<String>,
    /// Task id → when its snooze ends, for the snoozes in force (docs/reference.md#snooze).
    pub snoozed: HashMap<String, DateTime<Utc>>,
    /// Task id → when its failed run is tried again (docs/reference.md#retries).
    pub retry_at: HashMap<String, DateTime<Utc>>,
}

impl Snapshot {
    /// A stored time as planning reads it: never later than `now` (counted when it was).
    pub(super) fn not_after(&mut self, t: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        if t > now {
            self.future_times += 1;
            now
        } else {
            t
        }
    }
}

/// The planner's whole view of the stored state, read in one go and changing nothing.
pub(crate) trait Snapshots {
    /// Stored attempt and start times later than `now` become `now` (run at a run's start:
    /// a future time read as now by the plan is then also stored as now, so it cannot hold a
    /// schedule back past one interval). Returns how many were changed.
    fn clamp_future_times(&self, now: DateTime<Utc>) -> Result<usize>;

    /// Everything `plan` needs. `day_start`: local midnight, for the budget.
    fn snapshot(
        &self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
        day_start: DateTime<Utc>,
    ) -> Result<Snapshot>;
}

impl Snapshots for Sqlite {
    fn clamp_future_times(&self, now: DateTime<Utc>) -> Result<usize> {
        let now = format_ts(now);
        let clamp = |sql: &str| self.conn.execute(sql, [&now]).map_err(|e| self.err(e));
        Ok(
            clamp("UPDATE task_state SET last_attempt = ?1 WHERE last_attempt > ?1")?
                + clamp("UPDATE tool_state SET last_start = ?1 WHERE last_start > ?1")?,
        )
    }

    fn snapshot(
        &self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
        day_start: DateTime<Utc>,
    ) -> Result<Snapshot> {
        let mut snap = Snapshot {
            spent_today: self.spent_since(day_start)?,
            ..Snapshot::default()
        };
        snap.interrupted = self.unsettled()?.into_iter().collect();
        snap.snoozed = self
            .snoozes(now)?
            .into_iter()
            .map(|s| (s.task_id, s.until))
            .collect();
        for p in self.proposals()? {
            if p.approved_by.is_none() {
                snap.unapproved.insert(p.task_id.clone());
            } else {
                snap.released.insert(p.task_id.clone());
            }
            snap.proposed_by.insert(p.task_id, p.proposed_by);
        }
        // Cooldowns are hours, not weeks: a week back is plenty.
        let week = format_ts(now - chrono::Duration::days(7));
        let mut stmt = self
            .conn
            .prepare("SELECT tool, last_start FROM tool_state WHERE last_start >= ?1")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([week], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (tool, at) = row.map_err(|e| self.err(e))?;
            if let Some(t) = parse_ts(&at) {
                let t = snap.not_after(t, now);
                snap.tool_last_start.insert(tool, t);
            }
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, last_attempt, reminded_at, last_success, consecutive_failures,
                 tripped_at, retry_at FROM task_state",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, u32>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (id, attempt, reminded, success, failures, tripped, retry) =
                row.map_err(|e| self.err(e))?;
            if let Some(t) = retry.as_deref().and_then(parse_ts) {
                snap.retry_at.insert(id.clone(), t);
            }
            if failures > 0 {
                snap.failures.insert(id.clone(), failures);
            }
            if tripped.is_some() {
                snap.tripped.insert(id.clone());
            }
            if success.is_some() {
                snap.succeeded.insert(id.clone());
            }
            if let Some(t) = attempt.as_deref().and_then(parse_ts) {
                let t = snap.not_after(t, now);
                snap.last_attempt.insert(id.clone(), t);
            }
            if reminded.is_some() {
                snap.reminded.insert(id);
            }
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, id, state FROM approvals
                 WHERE state IN ('pending', 'approved', 'running', 'retrying')",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, ApprovalState>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (task, id, state) = row.map_err(|e| self.err(e))?;
            // A retrying approval runs as approved work when its retry comes.
            if matches!(state, ApprovalState::Approved | ApprovalState::Retrying) {
                snap.approved.insert(task.clone());
            }
            snap.pending.insert(task, id);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT task_id FROM grants")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        for row in rows {
            snap.granted.insert(row.map_err(|e| self.err(e))?);
        }
        snap.paused = self.pause_row()?.is_some_and(|p| p.in_force(now));
        // A denial holds for approval_ttl after it was made.
        let ttl = chrono::Duration::from_std(approval_ttl).unwrap_or(chrono::Duration::MAX);
        let since = now
            .checked_sub_signed(ttl)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, MAX(decided_at) FROM approvals
                 WHERE state = ?2 AND decided_at > ?1 GROUP BY task_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![format_ts(since), ApprovalState::Denied], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (task, decided) = row.map_err(|e| self.err(e))?;
            if let Some(t) = parse_ts(&decided) {
                snap.denied_until
                    .insert(task, t.checked_add_signed(ttl).unwrap_or(t));
            }
        }
        Ok(snap)
    }
}
