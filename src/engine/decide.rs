//! Deciding approvals (docs/reference.md#approvals): approve, deny, grant, expire, and running
//! approved work now. Used alike by `heartbeat approve`/`deny`, Telegram buttons and the chat
//! commands.
//!
//! Invariants:
//! - Only `pending` approvals are decided; a decision is stored (synchronously) and audited
//!   before anything runs.
//! - Running takes the run lock, re-reads the task's file and claims the approval atomically
//!   (see [`super::session`]), so an approved task runs at most once whoever else is trying.
//! - Nothing approved runs while paused: the approval stays approved.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use super::session::{RunStart, Session, new_run_id, open_audit};
use crate::audit::event::{Decided, Ended, Pause};
use crate::audit::{self, AuditLog, Event, Secrets};
use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Error, Result, WorkStarted};
use crate::lock::{self, Holder};
use crate::model::{ApprovalState, RunSkipReason};
use crate::render::telegram::{ApprovalView, expired_message};
use crate::report::Report;
use crate::store::{ApprovalRow, Decision, NewGrant, PauseRow, Store};
use crate::tools::Registry;
use chrono::{DateTime, Utc};

/// The state an approving command works with.
pub(crate) struct Decider {
    pub cfg: Config,
    pub store: Box<dyn Store>,
    pub audit: AuditLog,
    pub by: String,
    /// When the command started: what approvals expire against.
    pub now: DateTime<Utc>,
    /// Where each decision and audit line reads its own time.
    pub clock: Clock,
}

impl Decider {
    /// Open the state for deciding, and let expired approvals expire first: an approval
    /// past its `approval_ttl` can no longer be approved. `by` is who decides
    /// (`cli:<user>`, `telegram:<chat id>`). The config's secrets are taken from the
    /// environment here: running approved work may print them.
    pub(crate) fn open(cfg: Config, by: String, clock: Clock) -> Result<Decider> {
        let audit = open_audit(&cfg, &Secrets::from_config(&cfg))?;
        let store = crate::store::open(&cfg)?;
        let mut d = Decider::from_parts(cfg, store, audit, by, clock);
        d.expire()?;
        Ok(d)
    }

    /// From state a caller already holds (a run that handles Telegram button presses).
    pub(crate) fn from_parts(
        cfg: Config,
        store: Box<dyn Store>,
        audit: AuditLog,
        by: String,
        clock: Clock,
    ) -> Decider {
        Decider {
            cfg,
            store,
            audit,
            by,
            now: clock.start(),
            clock,
        }
    }

    pub(crate) fn into_parts(self) -> (Box<dyn Store>, AuditLog) {
        (self.store, self.audit)
    }

    /// Pending approvals past `approval_ttl` become `expired` (audited), and each is an
    /// `approval` message to the channels that take those (docs/reference.md#events). The
    /// approvals that expired now.
    pub(crate) fn expire(&mut self) -> Result<Vec<ApprovalRow>> {
        let expired = self.store.expire_pending(self.now, self.cfg.approval_ttl)?;
        for row in &expired {
            self.record(&Event::ApprovalExpired(Ended {
                run_id: None,
                approval_id: row.id,
                task_id: &row.task_id,
                reason: &"ttl".into(),
            }))?;
            let view = ApprovalView {
                id: row.id,
                tool: &row.tool,
                place: format!("{}:{}", row.file, row.line),
                input: &row.input,
            };
            let msg = expired_message(
                &view,
                &row.task_id,
                crate::store::parse_ts(&row.created_at),
                self.cfg.tz(),
            );
            super::outbox::enqueue_all(
                &mut *self.store,
                &self.cfg,
                &msg,
                false,
                self.now,
                self.audit.secrets(),
            )?;
        }
        Ok(expired)
    }

    /// One audit line, synced.
    pub(crate) fn record(&mut self, event: &Event) -> Result<()> {
        self.append(event)?;
        self.sync_audit()
    }

    /// One audit line, not yet synced (see [`Decider::sync_audit`]).
    fn append(&mut self, event: &Event) -> Result<()> {
        self.audit
            .record(self.clock.now(), event)
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    fn sync_audit(&self) -> Result<()> {
        self.audit
            .sync()
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    /// The rows for these ids, all pending (or, with `approved_too`, already approved and
    /// waiting to run); otherwise an error naming what is wrong.
    pub(crate) fn decidable_by_id(
        &self,
        ids: &[i64],
        approved_too: bool,
    ) -> Result<Vec<ApprovalRow>> {
        let mut rows = Vec::with_capacity(ids.len());
        let mut problems = Vec::new();
        let mut seen = Vec::with_capacity(ids.len());
        for &id in ids {
            // `approve 3 3` asks once.
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            match self.store.approval(id)? {
                None => problems.push(format!("no approval #{id}")),
                Some(row)
                    if row.state != ApprovalState::Pending
                        && !(approved_too && row.state == ApprovalState::Approved) =>
                {
                    let by = match (&row.decided_by, &row.decided_at) {
                        (Some(by), Some(at)) => format!(" (by {by} at {at})"),
                        (None, Some(at)) => format!(" (at {at})"),
                        _ => String::new(),
                    };
                    problems.push(format!(
                        "approval #{id} is already {}{by}; only pending approvals can be decided",
                        row.state
                    ));
                }
                Some(row) => rows.push(row),
            }
        }
        if problems.is_empty() {
            Ok(rows)
        } else {
            Err(Error::Usage(format!(
                "{}; nothing was decided",
                problems.join("; ")
            )))
        }
    }

    /// `pending → approved`, audited; with `always`, grant the task id. False when someone
    /// else decided it first.
    pub(crate) fn approve(&mut self, row: &ApprovalRow, always: bool) -> Result<bool> {
        let decision = Decision {
            approve: true,
            by: self.by.clone(),
            reason: None,
            always,
        };
        if !self.store.decide(row.id, &decision, self.clock.now())? {
            return Ok(false);
        }
        self.record(&Event::ApprovalApproved(decided_event(row, &decision)))?;
        if always {
            self.grant(row)?;
        }
        Ok(true)
    }

    /// Grant the approval's exact task from now on.
    pub(crate) fn grant(&mut self, row: &ApprovalRow) -> Result<()> {
        self.store.add_grant(&self.grant_row(row))?;
        Ok(())
    }

    /// The grant of an approval's task: its input and text as the approval stored them,
    /// through the one redaction step again (a grant row is a sink too).
    fn grant_row(&self, row: &ApprovalRow) -> NewGrant {
        let secrets = self.audit.secrets();
        NewGrant {
            task_id: row.task_id.clone(),
            tool: row.tool.clone(),
            input: secrets.redact_json(row.input.clone()),
            file: row.file.clone(),
            text: secrets.redact(&row.text),
            created_at: audit::format_ts(self.clock.now()),
            created_by: self.by.clone(),
            approval_id: Some(row.id),
        }
    }

    /// Approve several pending approvals at once (one durable transaction, one audit
    /// sync); with `always`, grant each task. The ids that were decided here.
    pub(crate) fn approve_many(
        &mut self,
        rows: &[&ApprovalRow],
        always: bool,
    ) -> Result<HashSet<i64>> {
        let decision = Decision {
            approve: true,
            by: self.by.clone(),
            reason: None,
            always,
        };
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let decided: HashSet<i64> = self
            .store
            .decide_many(&ids, &decision, self.clock.now())?
            .into_iter()
            .collect();
        let mut grants = Vec::new();
        for row in rows.iter().filter(|r| decided.contains(&r.id)) {
            self.append(&Event::ApprovalApproved(decided_event(row, &decision)))?;
            if always {
                grants.push(self.grant_row(row));
            }
        }
        // All grants in one durable transaction too.
        self.store.add_grants(&grants)?;
        self.sync_audit()?;
        Ok(decided)
    }

    /// `pending → denied`, audited. False when someone else decided it first.
    /// `heartbeat reset` (and Telegram's Reset button): clear a task's failure count and
    /// release it if it was held after an interrupted run; audited `task_reset`. None when
    /// heartbeat has no record of the task; else (failures, tripped, interrupted).
    pub(crate) fn reset_task(&mut self, task_id: &str) -> Result<Option<(u32, bool, bool)>> {
        let interrupted = self.store.release_start(task_id)?;
        let (failures, tripped) = match self.store.reset(task_id)? {
            Some(counts) => counts,
            None if interrupted => (0, false),
            None => return Ok(None),
        };
        let by = self.by.clone();
        self.record(&Event::TaskReset {
            task_id,
            failures,
            tripped,
            interrupted,
            by: &by,
        })?;
        Ok(Some((failures, tripped, interrupted)))
    }

    pub(crate) fn deny(&mut self, row: &ApprovalRow, reason: Option<&str>) -> Result<bool> {
        let decision = Decision {
            approve: false,
            by: self.by.clone(),
            reason: reason.map(|r| self.audit.secrets().redact(r)),
            always: false,
        };
        if !self.store.decide(row.id, &decision, self.clock.now())? {
            return Ok(false);
        }
        self.record(&Event::ApprovalDenied(decided_event(row, &decision)))?;
        Ok(true)
    }

    /// Run approved approvals now, under the run lock (waiting for it up to 30 s). `rows`:
    /// as this process last read them (only their ids and files are used: what runs is
    /// claimed and re-read from the file by the session). `work` is set when a tool starts.
    pub(crate) fn run_now(&mut self, rows: &[&ApprovalRow], work: &WorkStarted) -> Result<RunNow> {
        let lock_path = self.cfg.state_dir.join(lock::LOCK_FILE);
        // This run starts now, after the decisions (a person may have taken minutes).
        let now = self.clock.now();
        let lock = match lock::acquire_wait(&self.cfg.state_dir, now, LOCK_WAIT)
            .map_err(|e| Error::io(&lock_path, e))?
        {
            Ok(lock) => lock,
            Err(holder) => return Ok(RunNow::Locked(holder)),
        };
        // A pause holds approved work too: it stays approved for the first run after it.
        match self.store.current_pause(now)? {
            Ok(Some(pause)) => {
                let run_id = new_run_id(now);
                self.record(&Event::RunSkipped {
                    run_id: &run_id,
                    reason: RunSkipReason::Paused,
                    next_active: None,
                    until: Some(pause.until.as_deref()),
                    by: Some(&pause.by),
                    holder_pid: None,
                    holder_since: None,
                })?;
                return Ok(RunNow::Paused(pause));
            }
            Err(ended) => self.record(&Event::Resumed(Pause {
                until: ended.until.as_deref(),
                reason: Some(&"the pause ended".into()),
                by: &ended.by,
            }))?,
            Ok(None) => {}
        }
        // The session takes its own handles; ours stay usable for the next decision.
        let store = crate::store::open(&self.cfg)?;
        // An approved MCP task's input is checked against its server's cached tools; the
        // call itself starts the server.
        let (catalog, _) = super::mcp::cached(&self.cfg, Some(&*store), now)?;
        let registry = Registry::from_config(&self.cfg).with_catalog(&catalog);
        let audit = open_audit(&self.cfg, self.audit.secrets())?;
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        // Each file once, in the order first seen.
        let mut files: Vec<&Path> = Vec::new();
        let mut seen = HashSet::new();
        for r in rows {
            if seen.insert(r.file.as_str()) {
                files.push(Path::new(&r.file));
            }
        }
        let mut session = Session::begin(
            &lock,
            &self.cfg,
            &registry,
            store,
            audit,
            RunStart {
                run_id: new_run_id(now),
                clock: self.clock,
                now,
                mode: crate::model::RunMode::Approve,
                // A person approved: the run is theirs.
                trigger: crate::model::Trigger::Manual,
                files: &files,
                autonomy: self.cfg.autonomy,
                work: work.clone(),
            },
        )?;
        session.recover_interrupted()?;
        session.run_approved(Some(&ids))?;
        let (report, _, _) = session.finish()?;
        Ok(RunNow::Ran(report))
    }
}

/// What [`Decider::run_now`] did.
pub(crate) enum RunNow {
    Ran(Report),
    /// Another run held the lock past the wait: the approvals stand for the next run.
    Locked(Holder),
    /// Paused: nothing ran; the approvals stand for the first run after the pause.
    Paused(PauseRow),
}

/// How long running approved work waits for a run that holds the lock.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(30);

/// What `approval_approved` / `approval_denied` say.
fn decided_event<'a>(row: &'a ApprovalRow, d: &'a Decision) -> Decided<'a> {
    Decided {
        approval_id: row.id,
        task_id: &row.task_id,
        by: &d.by,
        always: d.always,
        reason: d.reason.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewApproval;

    #[test]
    fn a_decider_works_through_the_store_the_config_opens() {
        // The store is the `Box<dyn Store>` that `store::open` picked for the config: the
        // decider reaches it only through the trait.
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::config::test_util::config(Default::default());
        cfg.state_dir = dir.path().to_path_buf();
        cfg.audit_log = dir.path().join("audit.jsonl");
        let clock = Clock::starting_at("2026-05-01T10:00:00Z".parse().unwrap());
        let mut d = Decider::open(cfg.clone(), "ann".into(), clock).unwrap();
        let input = Secrets::default().redact_json(serde_json::json!({"msg": "hi"}));
        let id = d
            .store
            .queue_approval(
                &NewApproval {
                    task_id: "aaaaaaaaaaaa",
                    file: "/h.md",
                    line: 2,
                    section: "recurring",
                    tool: "log",
                    input,
                    text: "@log hi".into(),
                    config: None,
                },
                d.now,
            )
            .unwrap()
            .unwrap();
        let row = d.decidable_by_id(&[id], false).unwrap().remove(0);
        assert!(d.approve(&row, true).unwrap());
        assert!(!d.deny(&row, None).unwrap(), "decided once");
        let (store, _) = d.into_parts();
        drop(store);

        let store = crate::store::open_existing(&cfg).unwrap().unwrap();
        let row = store.approval(id).unwrap().unwrap();
        assert_eq!(row.state, ApprovalState::Approved);
        assert_eq!(row.decided_by.as_deref(), Some("ann"));
        let grants = store.grants().unwrap();
        assert_eq!(grants.len(), 1);
        assert_eq!(grants[0].task_id, "aaaaaaaaaaaa");
        let audit = std::fs::read_to_string(&cfg.audit_log).unwrap();
        assert!(audit.contains("\"approval_approved\""), "{audit}");
    }
}
