//! [`Retention`] on PostgreSQL: what is old enough to go, pruned at most once a day, as
//! `store/retention.rs` prunes it.
//!
//! Invariants (besides those of `store/retention.rs`):
//! - Whether the day was pruned is read in the transaction that prunes and marks it: of the
//!   nodes pruning on the same day, one prunes and the others find it done.

use chrono::{DateTime, Utc};

use super::Pg;
use crate::audit::format_ts;
use crate::store::Result;
use crate::store::retention::{PRUNED_DAY, Retention};

impl Retention for Pg {
    fn prune_once_a_day(
        &mut self,
        day: &str,
        cutoff: DateTime<Utc>,
        holding_since: DateTime<Utc>,
    ) -> Result<Option<u64>> {
        let before = format_ts(cutoff);
        let holding = format_ts(holding_since);
        self.tx(|tx| {
            let done: Option<String> = tx
                .query_opt("SELECT value FROM meta WHERE key = $1", &[&PRUNED_DAY])?
                .map(|r| r.try_get(0))
                .transpose()?;
            if done.as_deref() == Some(day) {
                return Ok(None);
            }
            let mut rows = 0;
            for sql in [
                "DELETE FROM task_runs WHERE started_at < $1",
                "DELETE FROM runs WHERE started_at < $1 AND finished_at IS NOT NULL",
                "DELETE FROM sent WHERE sent_at < $1",
                "DELETE FROM run_skips WHERE at < $1",
                // A snooze that ended before the cutoff (one in force is kept).
                "DELETE FROM snoozes WHERE until < $1",
            ] {
                rows += tx.execute(sql, &[&before])?;
            }
            // A message with buttons is edited when one is pressed, for as long as its
            // approval can be decided.
            rows += tx.execute(
                "DELETE FROM tg_messages WHERE sent_at < $1 AND sent_at < $2",
                &[&before, &holding],
            )?;
            // A token is signed with its approval's expiry, at most `approval_ttl` after
            // its use: older, it is refused as expired before its use is looked up.
            rows += tx.execute(
                "DELETE FROM channel_replies WHERE seen_at < $1 AND seen_at < $2",
                &[&before, &holding],
            )?;
            rows += tx.execute(
                "DELETE FROM approvals
                 WHERE state NOT IN ('pending', 'approved', 'running', 'retrying')
                    AND COALESCE(decided_at, created_at) < $1
                    AND NOT (state = 'denied' AND decided_at >= $2)",
                &[&before, &holding],
            )?;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&PRUNED_DAY, &day],
            )?;
            Ok(Some(rows))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_util::ts;
    use crate::store::{History, RunResult, RunTally, TaskRunRecord};

    fn count(s: &Pg, table: &str) -> i64 {
        s.with(|c| c.query_one(&format!("SELECT COUNT(*) FROM {table}"), &[]))
            .unwrap()
            .get(0)
    }

    /// An approval of `task` in `state`, created and (unless pending) decided at `at`.
    fn approval(s: &Pg, task: &str, state: &str, at: DateTime<Utc>) -> i64 {
        let at = format_ts(at);
        let decided = (state != "pending").then_some(at.clone());
        s.with(|c| {
            c.query_one(
                "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                    created_at, decided_at)
                 VALUES ($1, $2, '/h.md', 1, 'recurring', 'shell', '{}', 'x', $3, $4)
                 RETURNING id",
                &[&task, &state, &at, &decided],
            )
        })
        .unwrap()
        .get(0)
    }

    fn approval_exists(s: &Pg, id: i64) -> bool {
        s.with(|c| {
            c.query_one(
                "SELECT EXISTS (SELECT 1 FROM approvals WHERE id = $1)",
                &[&id],
            )
        })
        .unwrap()
        .get(0)
    }

    #[test]
    fn old_history_and_decided_approvals_go_pending_work_and_task_state_stay() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
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
            let tally = RunTally {
                result: RunResult::Ok,
                tasks: vec![],
            };
            s.finish_run(run, at, Default::default(), &tally).unwrap();
        }
        let decided = approval(&s, "bbbbbbbbbbbb", "denied", old);
        let pending = approval(&s, "cccccccccccc", "pending", old);
        // Unfinished runs stay, however old.
        s.start_run("r-unfinished", "once", old).unwrap();

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
        assert_eq!(count(&s, "runs"), 2);
        assert!(!approval_exists(&s, decided));
        assert!(approval_exists(&s, pending));
        // What schedules read survives.
        let (succeeded, attempted): (bool, bool) = {
            let r = s
                .with(|c| {
                    c.query_one(
                        "SELECT last_success IS NOT NULL, last_attempt IS NOT NULL
                         FROM task_state WHERE task_id = 'aaaaaaaaaaaa'",
                        &[],
                    )
                })
                .unwrap();
            (r.get(0), r.get(1))
        };
        assert!(succeeded && attempted);
    }

    #[test]
    fn a_denial_that_still_holds_its_task_stays() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
        let holding = approval(&s, "a", "denied", ts("2026-05-05T10:00:00Z"));
        let expired = approval(&s, "b", "expired", ts("2026-05-05T10:00:00Z"));
        let (cutoff, holding_since) = (ts("2026-05-09T10:00:00Z"), ts("2026-04-10T10:00:00Z"));
        assert_eq!(
            s.prune_once_a_day("2026-05-10", cutoff, holding_since)
                .unwrap(),
            Some(1)
        );
        assert!(approval_exists(&s, holding));
        assert!(!approval_exists(&s, expired));
    }

    #[test]
    fn a_message_with_buttons_stays_while_its_approval_can_be_decided() {
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
        s.with(|c| {
            c.batch_execute(
                "INSERT INTO tg_messages (chat_id, message_id, html, approvals, sent_at)
                 VALUES (1, 7, '<b>x</b>', '[1]', '2026-05-01T10:00:00.000Z')",
            )
        })
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
        let Some(mut s) = super::super::test_util::store("n1") else {
            return;
        };
        s.with(|c| {
            c.batch_execute(
                "INSERT INTO channel_replies (channel, token, seen_at)
                 VALUES ('phone', 'hash', '2026-05-01T10:00:00.000Z')",
            )
        })
        .unwrap();
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

    #[test]
    fn of_two_nodes_pruning_the_same_day_one_prunes() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let url = url.as_str();
        let cutoff = ts("2026-06-01T00:00:00Z");
        let pruned: Vec<Option<u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ["n1", "n2"]
                .map(|node| {
                    scope.spawn(move || {
                        let mut s = Pg::connect(url, node).unwrap();
                        s.prune_once_a_day("2026-06-01", cutoff, cutoff).unwrap()
                    })
                })
                .into_iter()
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut pruned = pruned;
        pruned.sort();
        assert_eq!(pruned, [None, Some(0)]);
    }
}
