//! Retention: what is old enough to go, pruned at most once a day.
//!
//! Invariants:
//! - Never pruned: pending, approved, running or retrying approvals, a denial that still holds its
//!   task (decided within `approval_ttl`), grants, the pause, task state (last attempt, last
//!   success, failure counts, trips: what schedules and the breaker read), held starts,
//!   cached MCP listings and proposals.
//! - Pruned in one transaction: history rows and runs older than `retention.history`,
//!   approvals decided before it (but for the denials above), and the record of sent
//!   messages older than it; Telegram messages with buttons once older than `approval_ttl`
//!   too (a press edits them), and the reply tokens used once older than both (a reply's
//!   token is refused as expired by then, before it could be taken for a fresh one).
//!   `approval_ttl` holds back nothing else.

use chrono::{DateTime, Utc};
use rusqlite::{TransactionBehavior, params};

use super::{Outbox, Result, Sqlite};
use crate::audit::format_ts;

/// `meta` key: the local day of the last prune.
pub(super) const PRUNED_DAY: &str = "pruned_day";

/// Pruning what is old, at most once a local day.
pub(crate) trait Retention {
    /// Prune what is older than `cutoff`, unless already done on `day` (a local date).
    /// `holding_since` is `approval_ttl` back from now: a denial decided since still holds its
    /// task and stays, and so does a message with buttons sent since. Returns the rows
    /// removed, or None when it had already run that day.
    fn prune_once_a_day(
        &mut self,
        day: &str,
        cutoff: DateTime<Utc>,
        holding_since: DateTime<Utc>,
    ) -> Result<Option<u64>>;
}

impl Retention for Sqlite {
    fn prune_once_a_day(
        &mut self,
        day: &str,
        cutoff: DateTime<Utc>,
        holding_since: DateTime<Utc>,
    ) -> Result<Option<u64>> {
        if self.meta(PRUNED_DAY)?.as_deref() == Some(day) {
            return Ok(None);
        }
        let before = format_ts(cutoff);
        let holding = format_ts(holding_since);
        let rows = self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut rows = 0;
            for sql in [
                "DELETE FROM task_runs WHERE started_at < ?1",
                "DELETE FROM runs WHERE started_at < ?1 AND finished_at IS NOT NULL",
                "DELETE FROM sent WHERE sent_at < ?1",
                "DELETE FROM run_skips WHERE at < ?1",
                // A snooze that ended before the cutoff (one in force is kept).
                "DELETE FROM snoozes WHERE until < ?1",
            ] {
                rows += tx.execute(sql, params![before])? as u64;
            }
            // A message with buttons is edited when one is pressed, for as long as its
            // approval can be decided.
            rows += tx.execute(
                "DELETE FROM tg_messages WHERE sent_at < ?1 AND sent_at < ?2",
                params![before, holding],
            )? as u64;
            // A token is signed with its approval's expiry, at most `approval_ttl` after
            // its use: older, it is refused as expired before its use is looked up.
            rows += tx.execute(
                "DELETE FROM channel_replies WHERE seen_at < ?1 AND seen_at < ?2",
                params![before, holding],
            )? as u64;
            rows += tx.execute(
                "DELETE FROM approvals WHERE state NOT IN ('pending', 'approved', 'running', 'retrying')
                    AND COALESCE(decided_at, created_at) < ?1
                    AND NOT (state = 'denied' AND decided_at >= ?2)",
                params![before, holding],
            )? as u64;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![PRUNED_DAY, day],
            )?;
            tx.commit()?;
            Ok(rows)
        })?;
        Ok(Some(rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_util::{conn, ts};
    use crate::store::{Approvals, History, Outbox, Retention, Snapshots};
    use crate::store::{NewApproval, TaskRunRecord};

    fn count(s: &Sqlite, table: &str) -> i64 {
        conn(s)
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn old_history_and_decided_approvals_go_pending_work_and_task_state_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let old = ts("2026-01-01T10:00:00Z");
        let new = ts("2026-05-01T10:00:00Z");
        for (run, at) in [("r-old", old), ("r-new", new)] {
            s.start_run(run, "once", at).unwrap();
            s.record_task_run(&TaskRunRecord {
                run_id: run,
                task_id: "aaaaaaaaaaaa",
                tool: "log",
                started_at: at,
                finished_at: at,
                succeeded: true,
                interrupted: false,
                cost_usd: None,
                approval_id: None,
                error: None,
                retried: false,
                retry_at: None,
                not_started: false,
            })
            .unwrap();
            let tally = crate::store::RunTally {
                result: crate::store::RunResult::Ok,
                tasks: vec![],
            };
            s.finish_run(run, at, Default::default(), &tally).unwrap();
        }
        let input = serde_json::json!({});
        let approval = |id: &'static str| NewApproval {
            task_id: id,
            file: "/h.md",
            line: 1,
            section: "recurring",
            tool: "shell",
            input: crate::audit::Secrets::default().redact_json(input.clone()),
            text: "x".into(),
            config: None,
        };
        let decided = s
            .queue_approval(&approval("bbbbbbbbbbbb"), old)
            .unwrap()
            .unwrap();
        s.decide(
            decided,
            &crate::store::Decision {
                approve: false,
                by: "cli:me".into(),
                reason: None,
                always: false,
            },
            old,
        )
        .unwrap();
        let pending = s
            .queue_approval(&approval("cccccccccccc"), old)
            .unwrap()
            .unwrap();

        let cutoff = ts("2026-02-01T00:00:00Z");
        // One run old, one new; the old decided approval.
        assert_eq!(
            s.prune_once_a_day("2026-05-01", cutoff, cutoff).unwrap(),
            Some(3)
        );
        assert_eq!(
            s.prune_once_a_day("2026-05-01", cutoff, cutoff).unwrap(),
            None
        );
        assert_eq!(count(&s, "task_runs"), 1);
        assert_eq!(count(&s, "runs"), 1);
        assert!(s.approval(decided).unwrap().is_none());
        assert!(s.approval(pending).unwrap().is_some());
        // What schedules read survives.
        let snap = s
            .snapshot(new, std::time::Duration::from_secs(86400), new)
            .unwrap();
        assert!(snap.succeeded.contains("aaaaaaaaaaaa"));
        assert!(snap.last_attempt.contains_key("aaaaaaaaaaaa"));
    }

    #[test]
    fn a_message_with_buttons_stays_while_its_approval_can_be_decided() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let sent = ts("2026-05-01T10:00:00Z");
        s.save_button_message(1, 7, &"<b>x</b>".into(), &[1], sent)
            .unwrap();
        // Past `history` (1 day), within `approval_ttl` (30 days).
        let (cutoff, holding) = (ts("2026-05-09T10:00:00Z"), ts("2026-04-10T10:00:00Z"));
        s.prune_once_a_day("2026-05-10", cutoff, holding).unwrap();
        assert_eq!(count(&s, "tg_messages"), 1);
        // Past both.
        let (cutoff, holding) = (ts("2026-06-09T10:00:00Z"), ts("2026-05-10T10:00:00Z"));
        s.prune_once_a_day("2026-06-10", cutoff, holding).unwrap();
        assert_eq!(count(&s, "tg_messages"), 0);
    }

    #[test]
    fn a_used_reply_token_stays_until_it_would_have_expired() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        assert!(
            s.use_reply_token("phone", "tok", ts("2026-05-01T10:00:00Z"))
                .unwrap()
        );
        // Past `history` (1 day), within `approval_ttl` (30 days).
        let (cutoff, holding) = (ts("2026-05-09T10:00:00Z"), ts("2026-04-10T10:00:00Z"));
        s.prune_once_a_day("2026-05-10", cutoff, holding).unwrap();
        assert_eq!(count(&s, "channel_replies"), 1);
        // Past both.
        let (cutoff, holding) = (ts("2026-06-09T10:00:00Z"), ts("2026-05-10T10:00:00Z"));
        assert_eq!(
            s.prune_once_a_day("2026-06-10", cutoff, holding).unwrap(),
            Some(1)
        );
        assert_eq!(count(&s, "channel_replies"), 0);
    }
}
