//! Approvals (docs/reference.md#approvals): `pending` → `approved` → `running` → `succeeded` |
//! `failed`; `pending` → `denied` | `expired`; `approved` → `stale`.
//!
//! Invariants:
//! - Every change of state is one UPDATE that names the state it moves from, committed with
//!   `synchronous = FULL` before the method returns: of several processes making the same
//!   change, exactly one sees a changed row.
//! - Claiming (`approved → running`) is that UPDATE in its own IMMEDIATE transaction, with
//!   RETURNING: a claimed approval is `running` on disk before its tool can start. Several
//!   approvals may be claimed in one such transaction ([`Approvals::claim_many`]): each is
//!   claimed or not on its own, and all of them are on disk before any of their tools starts.

use crate::model::ApprovalState;
use crate::text::{Redacted, RedactedJson};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Result, Sqlite, format_ts};

/// One approval row, as `approvals --json` shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ApprovalRow {
    pub id: i64,
    pub task_id: String,
    pub state: ApprovalState,
    pub tool: String,
    pub input: serde_json::Value,
    pub file: String,
    pub line: i64,
    pub section: String,
    pub text: String,
    pub created_at: String,
    pub decided_at: Option<String>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    /// The config file it was queued under (absolute, symlinks resolved), if any.
    pub config: Option<String>,
    /// When a `retrying` approval's task is tried again (docs/reference.md#retries); filled
    /// by [`Approvals::approvals`], None elsewhere.
    pub retry_at: Option<String>,
}

/// How an approval records the config file it was queued under: absolute, symlinks
/// resolved, so that the same file named from another directory compares equal.
pub(crate) fn config_key(source: Option<&std::path::Path>) -> Option<String> {
    source
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
        .map(|p| p.to_string_lossy().into_owned())
}

/// A person's decision on a pending approval.
pub(crate) struct Decision {
    pub approve: bool,
    /// `cli:<user>` or `telegram:<chat id>`.
    pub by: String,
    /// A person's or an agent's words, redacted like every row.
    pub reason: Option<Redacted>,
    pub always: bool,
}

/// A new approval to queue.
pub(crate) struct NewApproval<'a> {
    pub task_id: &'a str,
    pub file: &'a str,
    pub line: usize,
    pub section: &'a str,
    pub tool: &'a str,
    /// Shown to whoever decides, as every row is: redacted (what runs is re-read from the
    /// file).
    pub input: RedactedJson,
    pub text: Redacted,
    /// The config file of the run that queues it (absolute, symlinks resolved).
    pub config: Option<&'a str>,
}

/// The columns [`approval_row`] reads, in its order.
const COLUMNS: &str = "id, task_id, state, tool, input, file, line, section, text, created_at, \
                       decided_at, decided_by, reason, config";

fn approval_row(r: &rusqlite::Row) -> rusqlite::Result<ApprovalRow> {
    let input: String = r.get(4)?;
    Ok(ApprovalRow {
        id: r.get(0)?,
        task_id: r.get(1)?,
        state: r.get(2)?,
        tool: r.get(3)?,
        input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
        file: r.get(5)?,
        line: r.get(6)?,
        section: r.get(7)?,
        text: r.get(8)?,
        created_at: r.get(9)?,
        decided_at: r.get(10)?,
        decided_by: r.get(11)?,
        reason: r.get(12)?,
        config: r.get(13)?,
        retry_at: None,
    })
}

/// The approval queue: a task that needs a yes waits here until it is decided, claimed, run
/// and finished.
pub(crate) trait Approvals {
    /// Queue a pending approval. None when the task already has an open one (never a second).
    fn queue_approval(&mut self, a: &NewApproval, now: DateTime<Utc>) -> Result<Option<i64>>;

    fn approval(&self, id: i64) -> Result<Option<ApprovalRow>>;

    /// Approvals in a state (None = all), oldest first.
    fn approvals(&self, state: Option<ApprovalState>) -> Result<Vec<ApprovalRow>>;

    fn count_pending(&self) -> Result<i64>;

    /// Whether approved approvals wait to run, or a `running` one needs recovering: such
    /// work is done even outside active hours.
    fn has_approved_work(&self) -> Result<bool>;

    /// Pending approvals created at or before `now - ttl` become `expired`; returns them.
    fn expire_pending(
        &mut self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
    ) -> Result<Vec<ApprovalRow>>;

    /// `pending → approved` or `pending → denied`. False when the approval was not pending
    /// any more (someone else decided first).
    fn decide(&mut self, id: i64, d: &Decision, now: DateTime<Utc>) -> Result<bool>;

    /// Decide several approvals in one durable transaction (`approve --all`: one sync, not
    /// one per approval): the ids that were still pending and are now decided, in the order
    /// given, each once.
    fn decide_many(&mut self, ids: &[i64], d: &Decision, now: DateTime<Utc>) -> Result<Vec<i64>>;

    /// `approved → running`, as one statement in its own immediate transaction: of several
    /// processes claiming the same approval, exactly one gets true.
    fn claim(&mut self, id: i64, run_id: &str) -> Result<bool>;

    /// `approved → running` for each of `ids`, all in one immediate transaction committed
    /// with `synchronous = FULL` (approved work of tools without outside effects, claimed
    /// by the batch): the ids claimed here, in the order given. An id another process
    /// claimed first, or not approved, is left out.
    fn claim_many(&mut self, ids: &[i64], run_id: &str) -> Result<Vec<i64>>;

    /// `retrying → running`, committed with `synchronous = FULL` before the retry's tool
    /// starts: false when another process claimed it first, or it no longer waits.
    fn claim_retry(&mut self, id: i64, run_id: &str) -> Result<bool>;

    /// `approved | retrying → stale`: the task changed or vanished before it could run.
    fn mark_stale(&mut self, id: i64, reason: &Redacted, now: DateTime<Utc>) -> Result<bool>;

    /// Approvals left `running` by a process that died. Only call while holding the run
    /// lock: then no live process is running any of them. They become `failed` with reason
    /// `interrupted` and are never re-run silently.
    fn interrupt_running(&mut self, now: DateTime<Utc>) -> Result<Vec<ApprovalRow>>;
}

impl Approvals for Sqlite {
    fn queue_approval(&mut self, a: &NewApproval, now: DateTime<Utc>) -> Result<Option<i64>> {
        self.durable(|conn| {
            conn.query_row(
                "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                    created_at, config)
                 VALUES (?1, ?10, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT DO NOTHING RETURNING id",
                params![
                    a.task_id,
                    a.file,
                    a.line as i64,
                    a.section,
                    a.tool,
                    a.input.to_text().as_str(),
                    a.text.as_str(),
                    format_ts(now),
                    a.config,
                    ApprovalState::Pending
                ],
                |r| r.get(0),
            )
            .optional()
        })
    }

    fn approval(&self, id: i64) -> Result<Option<ApprovalRow>> {
        self.conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
                [id],
                approval_row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn approvals(&self, state: Option<ApprovalState>) -> Result<Vec<ApprovalRow>> {
        let sql = match state {
            Some(_) => format!("SELECT {COLUMNS} FROM approvals WHERE state = ?1 ORDER BY id"),
            None => format!("SELECT {COLUMNS} FROM approvals ORDER BY id"),
        };
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let mut rows: Vec<ApprovalRow> = stmt
            .query_map(rusqlite::params_from_iter(state), approval_row)
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        for row in rows
            .iter_mut()
            .filter(|r| r.state == ApprovalState::Retrying)
        {
            row.retry_at =
                super::History::retry_chain(self, &row.task_id)?.map(|(_, at)| format_ts(at));
        }
        Ok(rows)
    }

    fn count_pending(&self) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM approvals WHERE state = ?1",
                [ApprovalState::Pending],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    fn has_approved_work(&self) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM approvals
                 WHERE state = ?1 OR state = ?2 OR state = ?3)",
                [
                    ApprovalState::Approved,
                    ApprovalState::Running,
                    ApprovalState::Retrying,
                ],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
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
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut expired = tx
                .prepare(&format!(
                    "UPDATE approvals SET state = ?3, decided_at = ?1, reason = 'ttl'
                     WHERE state = ?4 AND created_at <= ?2 RETURNING {COLUMNS}"
                ))?
                .query_map(
                    params![
                        format_ts(now),
                        format_ts(cutoff),
                        ApprovalState::Expired,
                        ApprovalState::Pending
                    ],
                    approval_row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            tx.commit()?;
            expired.sort_by_key(|r| r.id);
            Ok(expired)
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
        let ts = format_ts(now);
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut decided = Vec::new();
            {
                let mut update = tx.prepare(
                    "UPDATE approvals SET state = ?2, decided_at = ?3, decided_by = ?4,
                     reason = ?5, always = ?6 WHERE id = ?1 AND state = ?7",
                )?;
                // A person's approval of a task an agent proposed ends its "ask first"
                // (docs/reference.md#proposal-mark); an agent's own approval never does.
                let mut release = tx.prepare(
                    "UPDATE proposals SET approved_by = ?2, approved_at = ?3
                     WHERE approved_at IS NULL
                       AND task_id = (SELECT task_id FROM approvals WHERE id = ?1)",
                )?;
                let person = d.approve && !d.by.starts_with(super::proposals::AGENT_PREFIX);
                for &id in ids {
                    if update.execute(params![
                        id,
                        state,
                        ts,
                        d.by,
                        d.reason.as_ref().map(Redacted::as_str),
                        d.always,
                        ApprovalState::Pending
                    ])? == 1
                    {
                        decided.push(id);
                        if person {
                            release.execute(params![id, d.by, ts])?;
                        }
                    }
                }
            }
            tx.commit()?;
            Ok(decided)
        })
    }

    fn claim(&mut self, id: i64, run_id: &str) -> Result<bool> {
        Ok(!self.claim_many(&[id], run_id)?.is_empty())
    }

    fn claim_many(&mut self, ids: &[i64], run_id: &str) -> Result<Vec<i64>> {
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut claimed = Vec::with_capacity(ids.len());
            {
                let mut claim = tx.prepare_cached(
                    "UPDATE approvals SET state = ?3, run_id = ?2
                     WHERE id = ?1 AND state = ?4 RETURNING id",
                )?;
                for &id in ids {
                    let row = claim
                        .query_row(
                            params![id, run_id, ApprovalState::Running, ApprovalState::Approved],
                            |r| r.get::<_, i64>(0),
                        )
                        .optional()?;
                    claimed.extend(row);
                    // Inside the transaction: a crash here claims none of them.
                    crate::fault::point("claiming");
                }
            }
            tx.commit()?;
            Ok(claimed)
        })
    }

    fn claim_retry(&mut self, id: i64, run_id: &str) -> Result<bool> {
        self.durable(|conn| {
            conn.execute(
                "UPDATE approvals SET state = ?3, run_id = ?2 WHERE id = ?1 AND state = ?4",
                params![id, run_id, ApprovalState::Running, ApprovalState::Retrying],
            )
        })
        .map(|n| n == 1)
    }

    fn mark_stale(&mut self, id: i64, reason: &Redacted, now: DateTime<Utc>) -> Result<bool> {
        self.durable(|conn| {
            conn.execute(
                "UPDATE approvals SET state = ?4, finished_at = ?2, reason = ?3
                 WHERE id = ?1 AND (state = ?5 OR state = ?6)",
                params![
                    id,
                    format_ts(now),
                    reason.as_str(),
                    ApprovalState::Stale,
                    ApprovalState::Approved,
                    ApprovalState::Retrying
                ],
            )
        })
        .map(|n| n == 1)
    }

    fn interrupt_running(&mut self, now: DateTime<Utc>) -> Result<Vec<ApprovalRow>> {
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut rows = tx
                .prepare(&format!(
                    "UPDATE approvals SET state = ?2, finished_at = ?1,
                     reason = 'interrupted' WHERE state = ?3 RETURNING {COLUMNS}"
                ))?
                .query_map(
                    params![
                        format_ts(now),
                        ApprovalState::Failed,
                        ApprovalState::Running
                    ],
                    approval_row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            tx.commit()?;
            rows.sort_by_key(|r| r.id);
            Ok(rows)
        })
    }
}

/// `running → succeeded | failed`, inside the transaction that records the tool run
/// ([`History::record_task_run`]): the approval's outcome and the history row are one commit.
pub(super) fn finish_approval(
    conn: &Connection,
    id: i64,
    succeeded: bool,
    retried: bool,
    reason: Option<&Redacted>,
    now: DateTime<Utc>,
) -> rusqlite::Result<()> {
    // A failure tried again waits under its approval (docs/reference.md#retries).
    let state = match (succeeded, retried) {
        (true, _) => ApprovalState::Succeeded,
        (false, true) => ApprovalState::Retrying,
        (false, false) => ApprovalState::Failed,
    };
    conn.prepare_cached(
        "UPDATE approvals SET state = ?2, finished_at = ?3, reason = COALESCE(?4, reason)
         WHERE id = ?1 AND state = ?5",
    )?
    .execute(params![
        id,
        state,
        format_ts(now),
        reason.map(Redacted::as_str),
        ApprovalState::Running
    ])
    .map(drop)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::test_util::{conn, ts};
    use super::*;
    use crate::store::{Approvals, Snapshots};
    use serde_json::json;

    pub(in crate::store) fn new_approval<'a>(
        task: &'a str,
        input: &'a serde_json::Value,
    ) -> NewApproval<'a> {
        NewApproval {
            task_id: task,
            file: "/x/HEARTBEAT.md",
            line: 3,
            section: "recurring",
            tool: "shell",
            input: crate::audit::Secrets::default().redact_json(input.clone()),
            text: "@shell {}".into(),
            config: None,
        }
    }

    fn by_cli(approve: bool) -> Decision {
        Decision {
            approve,
            by: "cli:ann".into(),
            reason: None,
            always: false,
        }
    }

    /// Every column of an approval row, as stored (for comparing whole rows).
    fn stored(s: &Sqlite, id: i64) -> Vec<Option<String>> {
        conn(s)
            .query_row(
                "SELECT state, decided_at, decided_by, reason, CAST(always AS TEXT), run_id,
                 finished_at FROM approvals WHERE id = ?1",
                [id],
                |r| (0..7).map(|i| r.get(i)).collect(),
            )
            .unwrap()
    }

    /// `n` approvals of tasks t0, t1, … (after the tasks' count so far), approved unless
    /// `decide` is false.
    fn approvals_of(s: &mut Sqlite, n: usize, decide: bool) -> Vec<i64> {
        let before: i64 = conn(s)
            .query_row("SELECT COUNT(*) FROM approvals", [], |r| r.get(0))
            .unwrap();
        let before = before as usize;
        let input = json!({"text": "x"});
        let now = ts("2026-01-01T10:00:00Z");
        (0..n)
            .map(|i| {
                let task = format!("t{}", before + i);
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

    #[test]
    fn one_pending_approval_per_task() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
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
        let dup = conn(&s).execute(
            "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text, created_at)
             VALUES ('aaa', 'pending', 'f', 1, 'recurring', 't', '{}', 't', 'x')",
            [],
        );
        assert!(dup.is_err());
        let snap = s
            .snapshot(now, Duration::from_secs(3600), ts("2000-01-01T00:00:00Z"))
            .unwrap();
        assert_eq!(snap.pending.get("aaa"), first.as_ref());
        assert_eq!(s.count_pending().unwrap(), 2);
    }

    #[test]
    fn lifecycle_claims_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Sqlite::open(dir.path()).unwrap();
        let mut b = Sqlite::open(dir.path()).unwrap();
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
        // Claimed: on disk at once, for every other connection.
        assert_eq!(stored(&b, id)[0].as_deref(), Some("running"));
        assert!(!b.claim(id, "r2").unwrap());
        assert!(!a.claim(id, "r1").unwrap());
        assert!(!b.mark_stale(id, &"gone".into(), now).unwrap());
        finish_approval(conn(&a), id, true, false, None, now).unwrap();
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
    fn a_claim_and_a_finish_write_the_whole_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 4, true);
        let now = ts("2026-01-01T12:00:00Z");
        conn(&s)
            .execute("UPDATE approvals SET reason = 'ok by me'", [])
            .unwrap();
        assert!(s.claim(ids[0], "r0").unwrap());
        finish_approval(conn(&s), ids[0], true, false, None, now).unwrap();
        assert!(s.claim(ids[1], "r1").unwrap());
        finish_approval(conn(&s), ids[1], false, false, Some(&"exit 1".into()), now).unwrap();
        // Finished twice: the first finish counts, as the state moved on.
        finish_approval(conn(&s), ids[1], true, false, Some(&"again".into()), now).unwrap();
        assert!(s.claim(ids[2], "r1").unwrap());
        let ran = |state: &str, run: &str, reason: &str| {
            let some = |v: &str| Some(v.to_string());
            vec![
                some(state),
                some("2026-01-01T10:00:00.000Z"),
                some("cli:ann"),
                some(reason),
                some("0"),
                some(run),
                (state != "running").then(|| "2026-01-01T12:00:00.000Z".to_string()),
            ]
        };
        assert_eq!(stored(&s, ids[0]), ran("succeeded", "r0", "ok by me"));
        assert_eq!(stored(&s, ids[1]), ran("failed", "r1", "exit 1"));
        assert_eq!(stored(&s, ids[2]), ran("running", "r1", "ok by me"));
        let mut untouched = ran("approved", "", "ok by me");
        untouched[5] = None;
        untouched[6] = None;
        assert_eq!(stored(&s, ids[3]), untouched);
        // A claim left running is recovered.
        let interrupted = s.interrupt_running(now).unwrap();
        assert_eq!(
            interrupted.iter().map(|r| r.id).collect::<Vec<_>>(),
            [ids[2]]
        );
    }

    #[test]
    fn a_batch_claims_each_approved_approval_once_in_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Sqlite::open(dir.path()).unwrap();
        let mut b = Sqlite::open(dir.path()).unwrap();
        let ids = approvals_of(&mut a, 5, true);
        let now = ts("2026-01-01T12:00:00Z");
        // One is claimed elsewhere first, one was never approved (pending again here).
        assert!(b.claim(ids[1], "other").unwrap());
        conn(&a)
            .execute(
                "UPDATE approvals SET state = 'pending' WHERE id = ?1",
                [ids[3]],
            )
            .unwrap();
        // Asked twice in one batch: claimed once.
        let asked = [ids[4], ids[0], ids[1], ids[2], ids[3], ids[0]];
        assert_eq!(
            a.claim_many(&asked, "r1").unwrap(),
            [ids[4], ids[0], ids[2]]
        );
        // Committed: every other connection sees them running, and none can claim them.
        for id in [ids[0], ids[2], ids[4]] {
            let row = stored(&b, id);
            assert_eq!(row[0].as_deref(), Some("running"));
            assert_eq!(row[5].as_deref(), Some("r1"));
        }
        assert_eq!(stored(&b, ids[1])[5].as_deref(), Some("other"));
        assert_eq!(stored(&b, ids[3])[0].as_deref(), Some("pending"));
        assert!(b.claim_many(&ids, "r2").unwrap().is_empty());
        assert!(a.claim_many(&[], "r3").unwrap().is_empty());
        // Left running by a run that died: each is recovered once.
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
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 3, true);
        // The last one's claim fails: the first two's are rolled back with it.
        conn(&s)
            .execute_batch(&format!(
                "CREATE TRIGGER frozen BEFORE UPDATE ON approvals WHEN OLD.id = {}
                 BEGIN SELECT RAISE(ABORT, 'frozen'); END;",
                ids[2]
            ))
            .unwrap();
        let err = s.claim_many(&ids, "r").unwrap_err();
        assert!(err.to_string().contains("frozen"), "{err}");
        for &id in &ids {
            assert_eq!(stored(&s, id)[0].as_deref(), Some("approved"));
        }
        conn(&s).execute_batch("DROP TRIGGER frozen").unwrap();
        assert_eq!(s.claim_many(&ids, "r").unwrap(), ids);
    }

    #[test]
    fn a_claim_that_cannot_be_written_claims_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 1, true);
        // From here on, no approval row can change.
        conn(&s)
            .execute_batch(
                "CREATE TRIGGER frozen BEFORE UPDATE ON approvals
                 BEGIN SELECT RAISE(ABORT, 'frozen'); END;",
            )
            .unwrap();
        let err = s.claim(ids[0], "r").unwrap_err();
        assert!(err.to_string().contains("frozen"), "{err}");
        // Still waiting to run, and the store goes on working.
        assert_eq!(stored(&s, ids[0])[0].as_deref(), Some("approved"));
        conn(&s).execute_batch("DROP TRIGGER frozen").unwrap();
        assert!(s.claim(ids[0], "r").unwrap());
    }

    #[test]
    fn decide_many_decides_what_is_pending_once_in_the_order_given() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let mut other = Sqlite::open(dir.path()).unwrap();
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
    fn concurrent_decide_many_decide_each_approval_once() {
        let dir = tempfile::tempdir().unwrap();
        let ids = approvals_of(&mut Sqlite::open(dir.path()).unwrap(), 300, false);
        let now = ts("2026-01-01T11:00:00Z");
        let decided: Vec<Vec<i64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let (path, ids) = (dir.path(), &ids);
                    scope.spawn(move || {
                        let mut s = Sqlite::open(path).unwrap();
                        // Overlapping sets, in different orders.
                        let mut mine: Vec<i64> = ids[i * 50..].to_vec();
                        if i % 2 == 1 {
                            mine.reverse();
                        }
                        s.decide_many(&mine, &by_cli(true), now).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<i64> = decided.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each decided exactly once");
    }

    #[test]
    fn concurrent_claims_claim_each_approval_once() {
        let dir = tempfile::tempdir().unwrap();
        let ids = approvals_of(&mut Sqlite::open(dir.path()).unwrap(), 40, true);
        let now = ts("2026-01-01T12:00:00Z");
        let claimed: Vec<Vec<i64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let (path, ids) = (dir.path(), &ids);
                    scope.spawn(move || {
                        let mut s = Sqlite::open(path).unwrap();
                        let run = format!("r{i}");
                        let mut mine = Vec::new();
                        for &id in ids {
                            if s.claim(id, &run).unwrap() {
                                finish_approval(conn(&s), id, true, false, None, now).unwrap();
                                mine.push(id);
                            }
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = claimed.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each claimed exactly once");
        let s = Sqlite::open(dir.path()).unwrap();
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
    fn approvals_of_one_state_in_id_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
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
    }

    #[test]
    fn a_state_heartbeat_does_not_know_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 1, false);
        // The CHECK refuses such a word; a file written by something else may still hold one.
        conn(&s)
            .execute_batch(
                "PRAGMA ignore_check_constraints = ON;
                 UPDATE approvals SET state = 'on_hold';",
            )
            .unwrap();
        let err = s.approval(ids[0]).unwrap_err().to_string();
        assert!(err.contains(r#"unknown approval state "on_hold""#), "{err}");
        assert!(s.approvals(None).is_err());
    }

    #[test]
    fn running_rows_become_interrupted_failures() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let input = json!({});
        let now = ts("2026-01-01T10:00:00Z");
        let id = s
            .queue_approval(&new_approval("t", &input), now)
            .unwrap()
            .unwrap();
        s.decide(id, &by_cli(true), now).unwrap();
        s.claim(id, "r1").unwrap();
        let rows = s.interrupt_running(now).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].state, ApprovalState::Failed);
        assert_eq!(rows[0].reason.as_deref(), Some("interrupted"));
        assert_eq!(Some(&rows[0]), s.approval(id).unwrap().as_ref());
        assert!(s.interrupt_running(now).unwrap().is_empty());
        assert!(!s.has_approved_work().unwrap());
    }

    #[test]
    fn pending_approvals_expire_after_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
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
    }
}
