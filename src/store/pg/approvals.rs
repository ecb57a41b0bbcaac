//! [`Approvals`] in PostgreSQL: the approval queue of a fleet, every node deciding, claiming
//! and recovering approvals in the one `approvals` table.
//!
//! Invariants (beside those of `store/approvals.rs`, which hold as they are):
//! - Every change of state is one `UPDATE … WHERE id = $1 AND state = <from>` in a
//!   serializable transaction: of several nodes making the same change at once, exactly one
//!   changes the row (the others' transactions are retried and find it moved on). A claim
//!   is committed before the method returns, so before its tool can start.
//! - A task has at most one open approval across the fleet: the partial unique index
//!   `approvals_one_open` refuses a second, and a node that loses the race to queue one gets
//!   None, as when one was open before.
//! - A batch (`decide_many`, `claim_many`) changes its rows in ascending id order, so that
//!   two nodes' batches over the same approvals never wait for each other in a cycle.
//! - `interrupt_running` fails only the `running` approvals whose run holds no run lock any
//!   more ([`RUN_IS_GONE`]): another node's live run keeps its own.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Pg, RUN_IS_GONE, Word};
use crate::audit::{format_ts, parse_ts};
use crate::model::ApprovalState;
use crate::store::proposals::AGENT_PREFIX;
use crate::store::{ApprovalRow, Approvals, Decision, NewApproval, Result};
use crate::text::Redacted;

/// The columns [`approval_row`] reads, in its order.
const COLUMNS: &str = "id, task_id, state, tool, input, file, line, section, text, created_at, \
                       decided_at, decided_by, reason, config";

fn approval_row(r: &postgres::Row) -> std::result::Result<ApprovalRow, postgres::Error> {
    let input: String = r.try_get(4)?;
    Ok(ApprovalRow {
        id: r.try_get(0)?,
        task_id: r.try_get(1)?,
        state: r.try_get::<_, Word<ApprovalState>>(2)?.0,
        tool: r.try_get(3)?,
        input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
        file: r.try_get(5)?,
        line: r.try_get(6)?,
        section: r.try_get(7)?,
        text: r.try_get(8)?,
        created_at: r.try_get(9)?,
        decided_at: r.try_get(10)?,
        decided_by: r.try_get(11)?,
        reason: r.try_get(12)?,
        config: r.try_get(13)?,
        retry_at: None,
    })
}

fn approval_rows(rows: &[postgres::Row]) -> std::result::Result<Vec<ApprovalRow>, postgres::Error> {
    let mut rows = rows
        .iter()
        .map(approval_row)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// `ids` once each, in ascending order: the order a batch changes its rows in.
fn in_lock_order(ids: &[i64]) -> Vec<i64> {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
}

/// The ids of `changed` in the order `asked` gives them, each once.
fn in_asked_order(asked: &[i64], changed: &[i64]) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::with_capacity(changed.len());
    for id in asked {
        if changed.contains(id) && !out.contains(id) {
            out.push(*id);
        }
    }
    out
}

impl Approvals for Pg {
    fn queue_approval(&mut self, a: &NewApproval, now: DateTime<Utc>) -> Result<Option<i64>> {
        let input = a.input.to_text();
        let (input, text, ts, line) = (input.as_str(), a.text.as_str(), format_ts(now), a.line);
        let line = line as i64;
        // Two nodes queueing the same task at once: the second insert waits for the first,
        // its transaction is retried, and the retry finds the open approval (no row, None).
        self.tx(|tx| {
            tx.query_opt(
                "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                    created_at, config)
                 VALUES ($1, $10, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT DO NOTHING RETURNING id",
                &[
                    &a.task_id,
                    &a.file,
                    &line,
                    &a.section,
                    &a.tool,
                    &input,
                    &text,
                    &ts,
                    &a.config,
                    &ApprovalState::Pending.as_str(),
                ],
            )
            .map(|row| row.map(|r| r.get(0)))
        })
    }

    fn approval(&self, id: i64) -> Result<Option<ApprovalRow>> {
        self.with(|c| {
            c.query_opt(
                &format!("SELECT {COLUMNS} FROM approvals WHERE id = $1"),
                &[&id],
            )?
            .as_ref()
            .map(approval_row)
            .transpose()
        })
    }

    fn approvals(&self, state: Option<ApprovalState>) -> Result<Vec<ApprovalRow>> {
        // A retrying approval's retry time is its task's, read in the same statement.
        let retry_at = format!(
            "(SELECT t.retry_at FROM task_state t
              WHERE t.task_id = approvals.task_id AND approvals.state = '{}')",
            ApprovalState::Retrying.as_str()
        );
        let state = state.map(ApprovalState::as_str);
        self.with(|c| {
            let rows = match state {
                Some(state) => c.query(
                    &format!(
                        "SELECT {COLUMNS}, {retry_at} FROM approvals WHERE state = $1 ORDER BY id"
                    ),
                    &[&state],
                )?,
                None => c.query(
                    &format!("SELECT {COLUMNS}, {retry_at} FROM approvals ORDER BY id"),
                    &[],
                )?,
            };
            rows.iter()
                .map(|r| {
                    let mut row = approval_row(r)?;
                    let at: Option<String> = r.try_get(14)?;
                    row.retry_at = at.as_deref().and_then(parse_ts).map(format_ts);
                    Ok(row)
                })
                .collect()
        })
    }

    fn count_pending(&self) -> Result<i64> {
        self.with(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM approvals WHERE state = $1",
                &[&ApprovalState::Pending.as_str()],
            )
            .map(|r| r.get(0))
        })
    }

    fn has_approved_work(&self) -> Result<bool> {
        self.with(|c| {
            c.query_one(
                "SELECT EXISTS (SELECT 1 FROM approvals
                 WHERE state = $1 OR state = $2 OR state = $3)",
                &[
                    &ApprovalState::Approved.as_str(),
                    &ApprovalState::Running.as_str(),
                    &ApprovalState::Retrying.as_str(),
                ],
            )
            .map(|r| r.get(0))
        })
    }

    fn expire_pending(
        &mut self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
    ) -> Result<Vec<ApprovalRow>> {
        let ttl = chrono::Duration::from_std(approval_ttl).unwrap_or(chrono::Duration::MAX);
        let cutoff = now
            .checked_sub_signed(ttl)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let (now, cutoff) = (format_ts(now), format_ts(cutoff));
        self.tx(|tx| {
            let rows = tx.query(
                &format!(
                    "UPDATE approvals SET state = $3, decided_at = $1, reason = 'ttl'
                     WHERE state = $4 AND created_at <= $2 RETURNING {COLUMNS}"
                ),
                &[
                    &now,
                    &cutoff,
                    &ApprovalState::Expired.as_str(),
                    &ApprovalState::Pending.as_str(),
                ],
            )?;
            approval_rows(&rows)
        })
    }

    fn decide(&mut self, id: i64, d: &Decision, now: DateTime<Utc>) -> Result<bool> {
        self.decide_many(&[id], d, now).map(|ids| ids == [id])
    }

    fn decide_many(&mut self, ids: &[i64], d: &Decision, now: DateTime<Utc>) -> Result<Vec<i64>> {
        let state = if d.approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        let (state, ts) = (state.as_str(), format_ts(now));
        let (by, reason) = (d.by.as_str(), d.reason.as_ref().map(Redacted::as_str));
        let always = d.always as i64;
        // A person's approval of a task an agent proposed ends its "ask first"
        // (docs/reference.md#proposal-mark); an agent's own approval never does.
        let person = d.approve && !d.by.starts_with(AGENT_PREFIX);
        let order = in_lock_order(ids);
        let decided = self.tx(|tx| {
            let update = tx.prepare(
                "UPDATE approvals SET state = $2, decided_at = $3, decided_by = $4,
                 reason = $5, always = $6 WHERE id = $1 AND state = $7",
            )?;
            let release = tx.prepare(
                "UPDATE proposals SET approved_by = $2, approved_at = $3
                 WHERE approved_at IS NULL
                   AND task_id = (SELECT task_id FROM approvals WHERE id = $1)",
            )?;
            let mut decided = Vec::new();
            for id in &order {
                let pending = ApprovalState::Pending.as_str();
                let params: [&(dyn postgres::types::ToSql + Sync); 7] =
                    [id, &state, &ts, &by, &reason, &always, &pending];
                if tx.execute(&update, &params)? == 1 {
                    decided.push(*id);
                    if person {
                        tx.execute(&release, &[id, &by, &ts])?;
                    }
                }
            }
            Ok(decided)
        })?;
        Ok(in_asked_order(ids, &decided))
    }

    fn claim(&mut self, id: i64, run_id: &str) -> Result<bool> {
        Ok(!self.claim_many(&[id], run_id)?.is_empty())
    }

    fn claim_many(&mut self, ids: &[i64], run_id: &str) -> Result<Vec<i64>> {
        let order = in_lock_order(ids);
        let claimed = self.tx(|tx| {
            let claim = tx.prepare(
                "UPDATE approvals SET state = $3, run_id = $2
                 WHERE id = $1 AND state = $4 RETURNING id",
            )?;
            let mut claimed = Vec::with_capacity(order.len());
            for id in &order {
                let row = tx.query_opt(
                    &claim,
                    &[
                        id,
                        &run_id,
                        &ApprovalState::Running.as_str(),
                        &ApprovalState::Approved.as_str(),
                    ],
                )?;
                claimed.extend(row.map(|r| r.get::<_, i64>(0)));
                // Inside the transaction: a crash here claims none of them.
                crate::fault::point("claiming");
            }
            Ok(claimed)
        })?;
        Ok(in_asked_order(ids, &claimed))
    }

    fn claim_retry(&mut self, id: i64, run_id: &str) -> Result<bool> {
        self.tx(|tx| {
            tx.execute(
                "UPDATE approvals SET state = $3, run_id = $2 WHERE id = $1 AND state = $4",
                &[
                    &id,
                    &run_id,
                    &ApprovalState::Running.as_str(),
                    &ApprovalState::Retrying.as_str(),
                ],
            )
        })
        .map(|n| n == 1)
    }

    fn mark_stale(&mut self, id: i64, reason: &Redacted, now: DateTime<Utc>) -> Result<bool> {
        let (reason, ts) = (reason.as_str(), format_ts(now));
        self.tx(|tx| {
            tx.execute(
                "UPDATE approvals SET state = $4, finished_at = $2, reason = $3
                 WHERE id = $1 AND (state = $5 OR state = $6)",
                &[
                    &id,
                    &ts,
                    &reason,
                    &ApprovalState::Stale.as_str(),
                    &ApprovalState::Approved.as_str(),
                    &ApprovalState::Retrying.as_str(),
                ],
            )
        })
        .map(|n| n == 1)
    }

    /// In a fleet, only the `running` approvals whose run holds no run lock any more: a
    /// live run on another node keeps its own. A run lock this same connection holds does
    /// not stop its own test ([`RUN_IS_GONE`]), so this connection's own runs count as gone
    /// too: it is called at the start of a run, before that run claims anything, and must
    /// never be called while a run of this connection has approvals running.
    fn interrupt_running(&mut self, now: DateTime<Utc>) -> Result<Vec<ApprovalRow>> {
        let now = format_ts(now);
        self.tx(|tx| {
            let running = tx.query(
                "SELECT id, COALESCE(run_id, '') FROM approvals WHERE state = $1 ORDER BY id",
                &[&ApprovalState::Running.as_str()],
            )?;
            let is_gone = tx.prepare(&format!("SELECT {RUN_IS_GONE}"))?;
            let fail = tx.prepare(&format!(
                "UPDATE approvals SET state = $2, finished_at = $3, reason = 'interrupted'
                 WHERE id = $1 AND state = $4 RETURNING {COLUMNS}"
            ))?;
            let mut rows = Vec::new();
            for r in &running {
                let (id, run_id): (i64, String) = (r.try_get(0)?, r.try_get(1)?);
                let gone: bool = tx.query_one(&is_gone, &[&run_id])?.try_get(0)?;
                if !gone {
                    continue;
                }
                rows.extend(tx.query_opt(
                    &fail,
                    &[
                        &id,
                        &ApprovalState::Failed.as_str(),
                        &now,
                        &ApprovalState::Running.as_str(),
                    ],
                )?);
            }
            approval_rows(&rows)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util;
    use super::*;
    use crate::store::approvals::tests::new_approval;
    use crate::store::test_util::ts;
    use serde_json::json;
    use std::sync::Barrier;

    fn by_cli(approve: bool) -> Decision {
        Decision {
            approve,
            by: "cli:ann".into(),
            reason: None,
            always: false,
        }
    }

    /// Every column of an approval row that changes, as stored (for comparing whole rows).
    fn stored(s: &Pg, id: i64) -> Vec<Option<String>> {
        s.with(|c| {
            c.query_one(
                "SELECT state, decided_at, decided_by, reason, always::text, run_id,
                 finished_at FROM approvals WHERE id = $1",
                &[&id],
            )
        })
        .map(|r| (0..7).map(|i| r.get(i)).collect())
        .unwrap()
    }

    /// `running → succeeded`, as the history's finish does it.
    fn finish(s: &Pg, id: i64) {
        let n = s
            .with(|c| {
                c.execute(
                    "UPDATE approvals SET state = 'succeeded', finished_at = 'x'
                     WHERE id = $1 AND state = 'running'",
                    &[&id],
                )
            })
            .unwrap();
        assert_eq!(n, 1);
    }

    /// `n` approvals of tasks t0, t1, … (after the tasks' count so far), approved unless
    /// `decide` is false.
    fn approvals_of(s: &mut Pg, n: usize, decide: bool) -> Vec<i64> {
        let before: i64 = s
            .with(|c| c.query_one("SELECT COUNT(*) FROM approvals", &[]))
            .unwrap()
            .get(0);
        let input = json!({"text": "x"});
        let now = ts("2026-01-01T10:00:00Z");
        (0..n)
            .map(|i| {
                let task = format!("t{}", before as usize + i);
                let id = s
                    .queue_approval(&new_approval(&task, &input), now)
                    .unwrap()
                    .unwrap();
                if decide {
                    assert!(s.decide(id, &by_cli(true), now).unwrap());
                }
                id
            })
            .collect()
    }

    /// `err` and every cause under it, as `a: b: c`.
    pub(in crate::store::pg) fn shown(err: &crate::store::StoreError) -> String {
        let mut shown = err.to_string();
        let mut cause = std::error::Error::source(err);
        while let Some(c) = cause {
            shown = format!("{shown}: {c}");
            cause = c.source();
        }
        shown
    }

    /// Take run `run_id`'s run lock on `s`'s connection, as a run does.
    fn hold_run_lock(s: &Pg, run_id: &str) {
        s.with(|c| {
            c.execute(
                "SELECT pg_advisory_lock(hashtextextended($1, 0))",
                &[&run_id],
            )
        })
        .unwrap();
    }

    fn release_run_lock(s: &Pg, run_id: &str) {
        let released: bool = s
            .with(|c| {
                c.query_one(
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                    &[&run_id],
                )
            })
            .unwrap()
            .get(0);
        assert!(released);
    }

    /// Run `f(i, store)` on `n` threads at once, each with a connection of its own to the
    /// database at `url`; their results in thread order.
    fn racing<T: Send>(url: &str, n: usize, f: impl Fn(usize, &mut Pg) -> T + Sync) -> Vec<T> {
        let start = Barrier::new(n);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let (start, f) = (&start, &f);
                    scope.spawn(move || {
                        let mut s = Pg::connect(url, &format!("n{i}")).unwrap();
                        start.wait();
                        f(i, &mut s)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn one_pending_approval_per_task() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let input = json!({"cmd": "true"});
        let now = ts("2026-01-01T10:00:00Z");
        let first = s.queue_approval(&new_approval("aaa", &input), now).unwrap();
        assert!(first.is_some());
        assert_eq!(
            s.queue_approval(&new_approval("aaa", &input), now).unwrap(),
            None
        );
        assert!(
            s.queue_approval(&new_approval("bbb", &input), now)
                .unwrap()
                .is_some()
        );
        // The index, not only the code, refuses a second pending row.
        let dup = s.with(|c| {
            c.execute(
                "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                    created_at)
                 VALUES ('aaa', 'pending', 'f', 1, 'recurring', 't', '{}', 't', 'x')",
                &[],
            )
        });
        assert!(dup.is_err());
        assert_eq!(s.count_pending().unwrap(), 2);
        let row = s.approval(first.unwrap()).unwrap().unwrap();
        assert_eq!(
            (row.task_id.as_str(), row.state, row.line, row.input),
            ("aaa", ApprovalState::Pending, 3, input)
        );
        assert_eq!(row.created_at, "2026-01-01T10:00:00.000Z");
        assert_eq!(s.approval(999).unwrap(), None);
    }

    #[test]
    fn nodes_queueing_the_same_tasks_at_once_queue_each_once() {
        let Some(url) = test_util::url() else { return };
        let now = ts("2026-01-01T10:00:00Z");
        let input = json!({});
        let queued: Vec<Vec<Option<i64>>> = racing(&url, 2, |_, s| {
            (0..50)
                .map(|t| {
                    s.queue_approval(&new_approval(&format!("t{t}"), &input), now)
                        .unwrap()
                })
                .collect()
        });
        for t in 0..50 {
            let ids: Vec<i64> = queued.iter().filter_map(|q| q[t]).collect();
            assert_eq!(ids.len(), 1, "task t{t} queued by exactly one node");
        }
        let s = Pg::connect(&url, "n9").unwrap();
        let rows = s.approvals(None).unwrap();
        assert_eq!(rows.len(), 50);
        let mut ids: Vec<i64> = queued.concat().into_iter().flatten().collect();
        ids.sort_unstable();
        assert_eq!(ids, rows.iter().map(|r| r.id).collect::<Vec<_>>());
    }

    #[test]
    fn lifecycle_claims_exactly_once() {
        let Some(url) = test_util::url() else { return };
        let mut a = Pg::connect(&url, "n1").unwrap();
        let mut b = Pg::connect(&url, "n2").unwrap();
        let input = json!({});
        let now = ts("2026-01-01T10:00:00Z");
        let id = a
            .queue_approval(&new_approval("t", &input), now)
            .unwrap()
            .unwrap();
        // Not claimable before a person approved it.
        assert!(!a.claim(id, "r1").unwrap());
        assert!(a.decide(id, &by_cli(true), now).unwrap());
        // Deciding twice does nothing.
        assert!(!b.decide(id, &by_cli(false), now).unwrap());
        // While approved (and running), the task cannot be queued again.
        assert_eq!(
            b.queue_approval(&new_approval("t", &input), now).unwrap(),
            None
        );
        assert!(a.claim(id, "r1").unwrap());
        // Claimed: committed at once, for every other node.
        assert_eq!(stored(&b, id)[0].as_deref(), Some("running"));
        assert!(!b.claim(id, "r2").unwrap());
        assert!(!a.claim(id, "r1").unwrap());
        assert!(!b.mark_stale(id, &"gone".into(), now).unwrap());
        assert!(!b.claim_retry(id, "r2").unwrap());
        finish(&a, id);
        let row = b.approval(id).unwrap().unwrap();
        assert_eq!(row.state, ApprovalState::Succeeded);
        assert_eq!(row.decided_by.as_deref(), Some("cli:ann"));
        // Closed: a new approval may be queued.
        assert!(
            b.queue_approval(&new_approval("t", &input), now)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_retrying_approval_is_claimed_again_once_or_goes_stale() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let ids = approvals_of(&mut s, 2, true);
        let now = ts("2026-01-01T12:00:00Z");
        assert!(
            !s.claim_retry(ids[0], "r1").unwrap(),
            "approved, not retrying"
        );
        assert_eq!(s.claim_many(&ids, "r1").unwrap(), ids);
        s.with(|c| c.execute("UPDATE approvals SET state = 'retrying'", &[]))
            .unwrap();
        s.with(|c| {
            c.execute(
                "INSERT INTO task_state (task_id, retry_at, retry_failures)
                 VALUES ('t0', '2026-01-01T13:00:00Z', 1)",
                &[],
            )
        })
        .unwrap();
        let retrying = s.approvals(Some(ApprovalState::Retrying)).unwrap();
        assert_eq!(
            retrying
                .iter()
                .map(|r| r.retry_at.as_deref())
                .collect::<Vec<_>>(),
            [Some("2026-01-01T13:00:00.000Z"), None]
        );
        assert!(s.claim_retry(ids[0], "r2").unwrap());
        assert!(!s.claim_retry(ids[0], "r3").unwrap());
        assert_eq!(stored(&s, ids[0])[5].as_deref(), Some("r2"));
        // Only a running approval's retry time is shown.
        assert_eq!(s.approval(ids[0]).unwrap().unwrap().retry_at, None);
        assert!(s.mark_stale(ids[1], &"changed".into(), now).unwrap());
        assert!(!s.mark_stale(ids[1], &"changed".into(), now).unwrap());
        let row = stored(&s, ids[1]);
        assert_eq!(row[0].as_deref(), Some("stale"));
        assert_eq!(row[3].as_deref(), Some("changed"));
        assert_eq!(row[6].as_deref(), Some("2026-01-01T12:00:00.000Z"));
    }

    #[test]
    fn a_batch_claims_each_approved_approval_once_in_one_commit() {
        let Some(url) = test_util::url() else { return };
        let mut a = Pg::connect(&url, "n1").unwrap();
        let mut b = Pg::connect(&url, "n2").unwrap();
        let ids = approvals_of(&mut a, 5, true);
        let now = ts("2026-01-01T12:00:00Z");
        // One is claimed elsewhere first, one was never approved (pending again here).
        assert!(b.claim(ids[1], "other").unwrap());
        a.with(|c| {
            c.execute(
                "UPDATE approvals SET state = 'pending' WHERE id = $1",
                &[&ids[3]],
            )
        })
        .unwrap();
        // Asked twice in one batch: claimed once, in the order asked.
        let asked = [ids[4], ids[0], ids[1], ids[2], ids[3], ids[0]];
        assert_eq!(
            a.claim_many(&asked, "r1").unwrap(),
            [ids[4], ids[0], ids[2]]
        );
        for id in [ids[0], ids[2], ids[4]] {
            let row = stored(&b, id);
            assert_eq!(row[0].as_deref(), Some("running"));
            assert_eq!(row[5].as_deref(), Some("r1"));
        }
        assert_eq!(stored(&b, ids[1])[5].as_deref(), Some("other"));
        assert_eq!(stored(&b, ids[3])[0].as_deref(), Some("pending"));
        assert!(b.claim_many(&ids, "r2").unwrap().is_empty());
        assert!(a.claim_many(&[], "r3").unwrap().is_empty());
        // Left running by runs that hold no run lock: each is recovered once.
        let interrupted: Vec<i64> = b
            .interrupt_running(now)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(interrupted, [ids[0], ids[1], ids[2], ids[4]]);
        assert!(b.interrupt_running(now).unwrap().is_empty());
    }

    #[test]
    fn a_batch_claim_that_cannot_be_written_claims_none_of_them() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let ids = approvals_of(&mut s, 3, true);
        // The last one's claim fails: the first two's are rolled back with it.
        s.with(|c| {
            c.batch_execute(&format!(
                "CREATE FUNCTION frozen() RETURNS trigger LANGUAGE plpgsql
                   AS $$ BEGIN RAISE EXCEPTION 'frozen'; END $$;
                 CREATE TRIGGER frozen BEFORE UPDATE ON approvals FOR EACH ROW
                   WHEN (OLD.id = {}) EXECUTE FUNCTION frozen();",
                ids[2]
            ))
        })
        .unwrap();
        let err = s.claim_many(&ids, "r").unwrap_err();
        assert!(
            matches!(err, crate::store::StoreError::Postgres { .. }),
            "{err}"
        );
        assert!(shown(&err).contains("frozen"), "{}", shown(&err));
        for &id in &ids {
            assert_eq!(stored(&s, id)[0].as_deref(), Some("approved"));
        }
        s.with(|c| c.batch_execute("DROP TRIGGER frozen ON approvals"))
            .unwrap();
        assert_eq!(s.claim_many(&ids, "r").unwrap(), ids);
    }

    #[test]
    fn decide_many_decides_what_is_pending_once_in_the_order_given() {
        let Some(url) = test_util::url() else { return };
        let mut s = Pg::connect(&url, "n1").unwrap();
        let mut other = Pg::connect(&url, "n2").unwrap();
        let ids = approvals_of(&mut s, 5, false);
        let now = ts("2026-01-01T11:00:00Z");
        // Decided elsewhere first: one denied, one approved.
        assert!(other.decide(ids[1], &by_cli(false), now).unwrap());
        assert!(other.decide(ids[3], &by_cli(true), now).unwrap());
        let d = Decision {
            approve: true,
            by: "cli:bob".into(),
            reason: Some("fine".into()),
            always: true,
        };
        let asked = [ids[4], ids[0], ids[1], ids[4], 999, ids[2], ids[3]];
        assert_eq!(
            s.decide_many(&asked, &d, now).unwrap(),
            [ids[4], ids[0], ids[2]]
        );
        let some = |v: &str| Some(v.to_string());
        for &id in &[ids[0], ids[2], ids[4]] {
            assert_eq!(
                stored(&other, id),
                [
                    some("approved"),
                    some("2026-01-01T11:00:00.000Z"),
                    some("cli:bob"),
                    some("fine"),
                    some("1"),
                    None,
                    None
                ]
            );
        }
        // What decide() wrote stays.
        assert_eq!(stored(&other, ids[1])[0].as_deref(), Some("denied"));
        assert_eq!(stored(&other, ids[3])[2].as_deref(), Some("cli:ann"));
        // Nothing left to decide; nothing to decide at all.
        assert!(s.decide_many(&ids, &d, now).unwrap().is_empty());
        assert!(s.decide_many(&[], &d, now).unwrap().is_empty());
        // A denial the same way.
        let more = approvals_of(&mut s, 7, false);
        let denied = s.decide_many(&more[5..], &by_cli(false), now).unwrap();
        assert_eq!(denied, &more[5..]);
        assert_eq!(stored(&other, more[6])[0].as_deref(), Some("denied"));
        assert_eq!(s.count_pending().unwrap(), 5);
    }

    #[test]
    fn nodes_deciding_at_once_decide_each_approval_once() {
        let Some(url) = test_util::url() else { return };
        let ids = approvals_of(&mut Pg::connect(&url, "n0").unwrap(), 100, false);
        let now = ts("2026-01-01T11:00:00Z");
        let decided: Vec<Vec<i64>> = racing(&url, 4, |i, s| {
            // Overlapping sets, in different orders; one node one by one.
            let mut mine: Vec<i64> = ids[i * 20..].to_vec();
            if i % 2 == 1 {
                mine.reverse();
            }
            if i == 3 {
                return mine
                    .into_iter()
                    .filter(|&id| s.decide(id, &by_cli(false), now).unwrap())
                    .collect();
            }
            s.decide_many(&mine, &by_cli(true), now).unwrap()
        });
        let mut all: Vec<i64> = decided.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each decided exactly once");
        let s = Pg::connect(&url, "n9").unwrap();
        for &id in &decided[3] {
            assert_eq!(stored(&s, id)[0].as_deref(), Some("denied"));
        }
    }

    #[test]
    fn a_decision_and_an_expiry_at_once_change_each_approval_once() {
        let Some(url) = test_util::url() else { return };
        let ids = approvals_of(&mut Pg::connect(&url, "n0").unwrap(), 40, false);
        let later = ts("2026-01-05T10:00:00Z");
        let ttl = Duration::from_secs(3600);
        let changed: Vec<Vec<i64>> = racing(&url, 2, |i, s| {
            if i == 0 {
                let mut mine: Vec<i64> = ids.clone();
                mine.reverse();
                mine.into_iter()
                    .filter(|&id| s.decide(id, &by_cli(true), later).unwrap())
                    .collect()
            } else {
                let mut expired = Vec::new();
                while expired.len() + s.approvals(Some(ApprovalState::Approved)).unwrap().len()
                    < ids.len()
                {
                    expired.extend(s.expire_pending(later, ttl).unwrap().iter().map(|r| r.id));
                }
                expired
            }
        });
        let mut all = changed.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each decided or expired, never both");
        let s = Pg::connect(&url, "n9").unwrap();
        for &id in &changed[1] {
            assert_eq!(stored(&s, id)[0].as_deref(), Some("expired"));
        }
    }

    #[test]
    fn nodes_claiming_at_once_claim_each_approval_once() {
        let Some(url) = test_util::url() else { return };
        let ids = approvals_of(&mut Pg::connect(&url, "n0").unwrap(), 50, true);
        let claimed: Vec<Vec<i64>> = racing(&url, 2, |i, s| {
            let run = format!("r{i}");
            let mut mine = Vec::new();
            for &id in &ids {
                if s.claim(id, &run).unwrap() {
                    finish(s, id);
                    mine.push(id);
                }
            }
            mine
        });
        let mut all = claimed.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each claimed exactly once");
        let s = Pg::connect(&url, "n9").unwrap();
        for (i, mine) in claimed.iter().enumerate() {
            for &id in mine {
                let row = stored(&s, id);
                assert_eq!(row[0].as_deref(), Some("succeeded"));
                assert_eq!(
                    row[5],
                    Some(format!("r{i}")),
                    "claimed by the run that ran it"
                );
            }
        }
    }

    #[test]
    fn nodes_claiming_batches_at_once_claim_each_approval_once() {
        let Some(url) = test_util::url() else { return };
        let ids = approvals_of(&mut Pg::connect(&url, "n0").unwrap(), 50, true);
        let claimed: Vec<Vec<i64>> = racing(&url, 3, |i, s| {
            let run = format!("r{i}");
            let mut mine: Vec<i64> = ids.clone();
            if i == 1 {
                mine.reverse();
            }
            // In batches of 10, the third node one by one.
            if i == 2 {
                return mine
                    .into_iter()
                    .filter(|&id| s.claim(id, &run).unwrap())
                    .collect();
            }
            mine.chunks(10)
                .flat_map(|batch| s.claim_many(batch, &run).unwrap())
                .collect()
        });
        let mut all = claimed.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each claimed exactly once");
    }

    #[test]
    fn approvals_of_one_state_in_id_order() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let ids = approvals_of(&mut s, 4, false);
        let now = ts("2026-01-01T11:00:00Z");
        s.decide(ids[2], &by_cli(true), now).unwrap();
        s.decide(ids[0], &by_cli(true), now).unwrap();
        s.decide(ids[1], &by_cli(false), now).unwrap();
        let of = |state: Option<ApprovalState>| -> Vec<i64> {
            s.approvals(state).unwrap().iter().map(|r| r.id).collect()
        };
        assert_eq!(of(Some(ApprovalState::Approved)), [ids[0], ids[2]]);
        assert_eq!(of(Some(ApprovalState::Pending)), [ids[3]]);
        assert!(of(Some(ApprovalState::Running)).is_empty());
        assert_eq!(of(None), ids);
        assert!(s.has_approved_work().unwrap());
        assert_eq!(
            s.approvals(None).unwrap()[0],
            s.approval(ids[0]).unwrap().unwrap()
        );
    }

    #[test]
    fn a_state_heartbeat_does_not_know_is_an_error_that_names_it() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let ids = approvals_of(&mut s, 1, false);
        // The CHECK refuses such a word; a database changed by something else may hold one.
        s.with(|c| {
            c.batch_execute(
                "ALTER TABLE approvals DROP CONSTRAINT approvals_state_check;
                 UPDATE approvals SET state = 'on_hold';",
            )
        })
        .unwrap();
        let err = s.approval(ids[0]).unwrap_err();
        assert!(
            matches!(err, crate::store::StoreError::Postgres { .. }),
            "{err}"
        );
        let err = shown(&err);
        assert!(err.contains(r#"unknown approval state "on_hold""#), "{err}");
        assert!(s.approvals(None).is_err());
    }

    #[test]
    fn running_rows_of_runs_that_are_gone_become_interrupted_failures() {
        let Some(url) = test_util::url() else { return };
        let mut s = Pg::connect(&url, "n1").unwrap();
        let other = Pg::connect(&url, "n2").unwrap();
        let ids = approvals_of(&mut s, 3, true);
        let now = ts("2026-01-01T10:00:00Z");
        // r-live runs on the other node; r-dead's node is gone.
        hold_run_lock(&other, "r-live");
        assert!(s.claim(ids[0], "r-live").unwrap());
        assert!(s.claim(ids[1], "r-dead").unwrap());
        let rows = s.interrupt_running(now).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].id, ids[1]);
        assert_eq!(rows[0].state, ApprovalState::Failed);
        assert_eq!(rows[0].reason.as_deref(), Some("interrupted"));
        assert_eq!(Some(&rows[0]), s.approval(ids[1]).unwrap().as_ref());
        assert_eq!(
            stored(&s, ids[1])[6].as_deref(),
            Some("2026-01-01T10:00:00.000Z")
        );
        assert_eq!(stored(&s, ids[0])[0].as_deref(), Some("running"));
        assert!(s.interrupt_running(now).unwrap().is_empty());
        assert!(s.has_approved_work().unwrap());
        // The live run ends without finishing it: now it is recovered, once.
        release_run_lock(&other, "r-live");
        let rows = s.interrupt_running(now).unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[0]]);
        assert!(s.interrupt_running(now).unwrap().is_empty());
        // A run lock held by this same connection does not keep its approvals.
        hold_run_lock(&s, "r-own");
        assert!(s.claim(ids[2], "r-own").unwrap());
        let rows = s.interrupt_running(now).unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[2]]);
        assert!(!s.has_approved_work().unwrap());
    }

    #[test]
    fn a_run_whose_connection_ended_is_gone() {
        let Some(url) = test_util::url() else { return };
        let mut s = Pg::connect(&url, "n1").unwrap();
        let other = Pg::connect(&url, "n2").unwrap();
        let ids = approvals_of(&mut s, 1, true);
        hold_run_lock(&other, "r2");
        assert!(s.claim(ids[0], "r2").unwrap());
        let now = ts("2026-01-01T10:00:00Z");
        assert!(s.interrupt_running(now).unwrap().is_empty());
        let pid: i32 = other
            .with(|c| c.query_one("SELECT pg_backend_pid()", &[]))
            .unwrap()
            .get(0);
        drop(other);
        // The server ends the other node's session a moment after its connection closed.
        for _ in 0..1000 {
            let ended: bool = s
                .with(|c| {
                    c.query_one(
                        "SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1)",
                        &[&pid],
                    )
                })
                .unwrap()
                .get(0);
            if ended {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let rows = s.interrupt_running(now).unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    }

    #[test]
    fn pending_approvals_expire_after_ttl() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let input = json!({});
        let ttl = Duration::from_secs(24 * 3600);
        s.queue_approval(&new_approval("aaa", &input), ts("2026-01-01T10:00:00Z"))
            .unwrap();
        assert!(
            s.expire_pending(ts("2026-01-02T09:59:59Z"), ttl)
                .unwrap()
                .is_empty()
        );
        let expired = s.expire_pending(ts("2026-01-02T10:00:00Z"), ttl).unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].state, ApprovalState::Expired);
        // What was returned is what is stored.
        assert_eq!(
            Some(&expired[0]),
            s.approval(expired[0].id).unwrap().as_ref()
        );
        assert_eq!(
            expired[0].decided_at.as_deref(),
            Some("2026-01-02T10:00:00.000Z")
        );
        assert_eq!(expired[0].reason.as_deref(), Some("ttl"));
        // The task may be queued again.
        assert!(
            s.queue_approval(&new_approval("aaa", &input), ts("2026-01-02T10:00:00Z"))
                .unwrap()
                .is_some()
        );
        // A ttl too long to subtract expires nothing.
        assert!(
            s.expire_pending(ts("2026-01-03T10:00:00Z"), Duration::MAX)
                .unwrap()
                .is_empty()
        );
    }
}
