//! A session is one stretch of work under the run lock: a `run --once`, or the execution of
//! approvals by `approve`. It coordinates the parts that do the work: the plan's calls run
//! through [`super::executor`], the guardrails are [`super::guard`]'s, every record goes
//! through [`super::ledger`] (SQLite, then the audit line), and what a run that died left
//! behind is settled by [`super::recovery`].
//!
//! Invariants:
//! - Only constructed while the caller holds the run lock (`Session::begin` takes the lock
//!   guard by reference to make that visible at every call site).
//! - A tool's outcome is recorded (SQLite, audit) right after it finishes, before the next
//!   tool starts, so a crash loses at most the task that was running; or, for successes of
//!   tools without outside effects, the batch they wait in ([`super::ledger`]), which is
//!   flushed at the end of the plan and before the ticks.
//! - An approved task runs only after its file was re-read and the task found unchanged and
//!   open, its tool's policy, its trip and the budget checked again, and only after its
//!   claim `approved → running` was committed: alone, or, for tools without outside
//!   effects, with up to [`BATCH`] others in one commit before any of them starts.
//! - One-time ticks are written once per file, in `finish`, after re-reading the file.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::executor::{Executor, Pool};
use super::files::FileCache;
use super::guard::{Guard, Start};
use super::ledger::{BATCH, Ledger, NotKept, Shown};
use super::outbox;
use super::recovery::{self, Recovering};
use super::ticks::Ticks;
use crate::audit::event::{Ended, TaskRun};
use crate::audit::{AuditLog, Event, Secrets};
use crate::clock::Clock;
use crate::config::{Approval, Autonomy, Config};
use crate::error::{Error, Result, WorkStarted};
use crate::lock::RunLock;
use crate::markdown::SourceFile;
use crate::model::{MessageKind, Outcome, RunMode, Section, Task, Trigger};
use crate::plan::{CallError, Decision, Planned, SkipReason, ToolCall};
use crate::render::telegram::Rendered;
use crate::report::{Report, TaskReport, safe_text};
use crate::store::{ApprovalRow, NewApproval, Store, TaskRunRecord};
use crate::tools::{self, Registry, ToolKind};

/// The error of a task whose tool ran and whose outcome could not be kept (`what`).
fn unrecorded(task: &Task, tool: &str, what: &'static str, source: Error) -> Error {
    Error::Unrecorded {
        task: format!("@{tool} {}:{}", task.file.display(), task.line),
        what,
        source: Box::new(source),
    }
}

/// When this node's runs were skipped because its fleet's database could not be reached
/// (`run_skipped`, `store_unavailable`), as its audit log (and the rotated files it keeps)
/// says. A log that cannot be read gives none: the slots are then reported `no_run`.
fn unavailable_skips(audit_log: &Path) -> Vec<DateTime<Utc>> {
    let mut reader = crate::audit::reader::AuditReader::from_start(audit_log, None);
    let mut found = Vec::new();
    while let Ok(Some(line)) = reader.next_line() {
        let Some((_, obj)) = crate::audit::reader::parse_line(line, crate::audit::reader::object)
        else {
            continue;
        };
        if obj.get("event").and_then(|v| v.as_str()) == Some("run_skipped")
            && obj.get("reason").and_then(|v| v.as_str()) == Some("store_unavailable")
            && let Some(at) = obj
                .get("ts")
                .and_then(|v| v.as_str())
                .and_then(crate::audit::parse_ts)
        {
            found.push(at);
        }
    }
    found
}

/// How an approval of a task an agent proposed names its proposer.
pub(crate) const PROPOSED_BY: &str = "proposed by an agent, ";

/// Create the state dir and the audit log's directory (0700) and open the audit log, which
/// never shows `secrets`.
pub(crate) fn open_audit(cfg: &Config, secrets: &Secrets) -> Result<AuditLog> {
    super::files::ensure_state_dir(&cfg.state_dir)?;
    if let Some(dir) = cfg.audit_log.parent() {
        super::files::ensure_state_dir(dir)?;
    }
    let node = cfg.fleet.as_ref().map(|f| f.node.as_str());
    AuditLog::open(&cfg.audit_log, secrets.clone())
        .map(|log| log.with_node(node))
        .map_err(|e| Error::io(&cfg.audit_log, e))
}

pub(crate) use super::executor::Stop;

/// What a run is, for its `run_started` line and its `runs` row.
pub(crate) struct RunStart<'f> {
    pub run_id: String,
    /// Where each audit line reads the time it happened.
    pub clock: Clock,
    /// When the run started: what schedules, attempts and the budget's day compare.
    pub now: DateTime<Utc>,
    pub mode: RunMode,
    /// What started it: every task line and report says it too.
    pub trigger: Trigger,
    /// The files it reads.
    pub files: &'f [&'f Path],
    pub autonomy: Autonomy,
    /// Set just before a tool starts: from then on a late error exits 1, not 2.
    pub work: WorkStarted,
}

pub(crate) struct Session<'a> {
    /// Set by the daemon: honoured before every task.
    pub stop: Option<&'a Stop>,
    cfg: &'a Config,
    registry: &'a Registry,
    /// SQLite and the audit log, written in that order.
    ledger: Ledger,
    /// What no sink of this session shows: the audit log's secrets.
    secrets: Secrets,
    pub run_id: String,
    /// When the run started: what schedules, attempts and the budget's day compare.
    pub now: DateTime<Utc>,
    pub report: Report,
    /// One-time tasks that succeeded, ticked at the end.
    ticks: Ticks,
    /// The files as read at the start of the run, with their tasks: the tick of a file that
    /// has not changed since need not parse it again.
    pub known: Vec<(&'a SourceFile, &'a [Task])>,
    /// Files of approved tasks, re-read only when they change.
    file_cache: FileCache,
    /// Tasks run from an approval in this session: the plan leaves them alone this time.
    pub handled: HashSet<String>,
    /// The budget, cooldowns within the run and the failure breaker.
    guard: Guard,
    started: Instant,
    /// What started this run: every task line and report says it too.
    trigger: Trigger,
    /// The MCP servers this session started (or was given), stopped when it finishes.
    pub mcp: super::mcp::Servers<'a>,
    /// Set before any tool starts: the command's errors no longer say "nothing run".
    work: WorkStarted,
    /// A person named the tasks (`run --task`): in a fleet they run without a claim.
    pub named: bool,
}

impl<'a> Session<'a> {
    /// Write `run_started` and open the run's record.
    pub(crate) fn begin(
        _lock: &RunLock,
        cfg: &'a Config,
        registry: &'a Registry,
        store: Box<dyn Store>,
        audit: AuditLog,
        run: RunStart,
    ) -> Result<Session<'a>> {
        let RunStart {
            run_id,
            clock,
            now,
            mode,
            trigger,
            files,
            autonomy,
            work,
        } = run;
        let secrets = audit.secrets().clone();
        let mut ledger = Ledger::new(store, audit, clock);
        // A previous start in the future (a clock that stepped back) counts as now.
        let since_last_run_s = ledger
            .store
            .last_start()?
            .map(|at| (now - at).num_seconds().max(0));
        ledger.store.start_run(&run_id, mode.as_str(), now)?;
        // Stamped with the run's start, which schedules compare.
        ledger.record_at(
            now,
            &Event::RunStarted {
                run_id: &run_id,
                mode: mode.as_str(),
                files,
                autonomy: autonomy.as_str(),
                host: hostname(),
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION"),
                since_last_run_s,
                trigger,
            },
        )?;
        let spent = ledger
            .store
            .spent_since(crate::schedule::local_midnight(cfg.tz(), now))?;
        Ok(Session {
            stop: None,
            cfg,
            registry,
            ledger,
            secrets,
            report: Report {
                run_id: run_id.clone(),
                ..Report::default()
            },
            run_id,
            now,
            ticks: Ticks::default(),
            known: Vec::new(),
            file_cache: FileCache::default(),
            handled: HashSet::new(),
            guard: Guard::new(spent),
            started: Instant::now(),
            trigger,
            mcp: super::mcp::Servers::new(cfg),
            work,
            named: false,
        })
    }

    /// A run whose tasks a person named (`run --task`): their tools' cooldowns do not hold
    /// them back within the run either.
    pub(crate) fn ignore_cooldowns(&mut self) {
        self.guard.ignore_cooldowns();
    }

    /// The run's store, read-only (the plan's snapshot reads it).
    pub(crate) fn store(&self) -> &dyn Store {
        &*self.ledger.store
    }

    /// Report the slots of the planned calendar tasks that passed without a run
    /// (`task_missed`), and remember what this run decides for their open slots
    /// (docs/reference.md#missed-slots). Before the plan is applied.
    pub(crate) fn account_slots(
        &mut self,
        items: &[Planned],
        last_attempt: &std::collections::HashMap<String, DateTime<Utc>>,
    ) -> Result<()> {
        // Read from this node's audit log only when a slot asks (a fleet's, with no other
        // reason), and once.
        let skips: std::cell::OnceCell<Vec<DateTime<Utc>>> = std::cell::OnceCell::new();
        let audit_log = self.cfg.audit_log.clone();
        let fleet = self.cfg.fleet.is_some();
        let unreachable = |slot: &crate::schedule::Slot| {
            fleet
                && skips
                    .get_or_init(|| unavailable_skips(&audit_log))
                    .iter()
                    .any(|at| *at >= slot.at && *at < slot.deadline)
        };
        let missed = super::missed::account(
            &mut *self.ledger.store,
            items,
            last_attempt,
            self.cfg,
            self.now,
            &unreachable,
        )?;
        let run_id = self.run_id.clone();
        for m in &missed {
            self.record(&Event::TaskMissed {
                run_id: &run_id,
                task_id: &m.task_id,
                file: &m.file,
                line: m.line,
                slot: crate::audit::format_ts(m.slot),
                reason: &m.reason,
                count: m.count,
            })?;
        }
        self.report.missed = missed;
        Ok(())
    }

    /// Remember that this run ran none of the plan (only approved work, outside active
    /// hours): the reason of a slot it leaves to pass.
    pub(crate) fn note_run_skip(&mut self, reason: crate::model::RunSkipReason) -> Result<()> {
        self.ledger
            .store
            .record_run_skip(reason.as_str(), self.now)?;
        Ok(())
    }

    /// A task's line in the report, with what started it (the run, unless the line says).
    fn push(&mut self, mut r: TaskReport) {
        r.trigger.get_or_insert(self.trigger);
        self.report.tasks.push(r);
    }

    /// One audit line, stamped with the time it is written.
    pub(crate) fn record(&mut self, event: &Event) -> Result<()> {
        self.ledger.record(event)
    }

    /// What a run that died left behind: one-time tasks started without an outcome, and
    /// approvals left `running`, each said once as `interrupted` (docs/reference.md#at-most-once).
    pub(crate) fn recover_interrupted(&mut self) -> Result<()> {
        let run = Recovering {
            run_id: &self.run_id,
            now: self.now,
            trigger: self.trigger,
        };
        for r in recovery::recover(&mut self.ledger, &run)? {
            self.push(r);
        }
        Ok(())
    }

    /// Before a one-time task with outside effects starts: its start, durably. If that
    /// cannot be written, the tool does not start.
    fn record_start(&mut self, task: &Task, call: &ToolCall) -> Result<()> {
        let no_effects = tools::builtin::builtin(call.name()).is_some_and(|b| !b.outside_effects());
        if task.section != Section::OneTime || no_effects {
            return Ok(());
        }
        let file = task.file.to_string_lossy();
        let row = crate::store::NewStart {
            task_id: &task.id,
            run_id: &self.run_id,
            tool: call.name(),
            input: self.secrets.redact_map(&call.input),
            file: &file,
            line: task.line as i64,
            section: task.section.as_str(),
        };
        let now = self.ledger.now();
        Ok(self.ledger.store.record_start(&row, now)?)
    }

    /// Run approved tasks (all of them, or only these ids), each after re-reading its file.
    /// Approved work of tools without outside effects is claimed up to [`BATCH`] at a time
    /// ([`Session::run_batch`]); any other approval is claimed and run alone, after the
    /// batch gathered before it ran, so the log keeps the order of the approvals.
    pub(crate) fn run_approved(&mut self, only: Option<&[i64]>) -> Result<()> {
        let only: Option<HashSet<i64>> = only.map(|ids| ids.iter().copied().collect());
        let mut rows = self
            .ledger
            .store
            .approvals(Some(crate::model::ApprovalState::Approved))?;
        // Approvals whose failed run is tried again now (docs/reference.md#retries).
        for row in self
            .ledger
            .store
            .approvals(Some(crate::model::ApprovalState::Retrying))?
        {
            let due = self.ledger.store.retry_chain(&row.task_id)?;
            if due.is_some_and(|(_, at)| at <= self.now) {
                rows.push(row);
            }
        }
        let mut batch = Vec::new();
        for row in rows {
            let retrying = row.state == crate::model::ApprovalState::Retrying;
            if only.as_ref().is_some_and(|ids| !ids.contains(&row.id)) {
                continue;
            }
            let (task, call) = match self.check_approved(&row)? {
                Checked::Left => continue,
                Checked::Ready(task, call) => (task, *call),
                Checked::Stale(reason) => {
                    self.run_batch(&mut batch)?;
                    self.stale(&row, &reason)?;
                    continue;
                }
                Checked::Blocked(task, name, reason) => {
                    self.run_batch(&mut batch)?;
                    self.skip(&task, Some(&name), reason)?;
                    continue;
                }
            };
            let name = call.name().to_string();
            if effect_free(&call) && !retrying {
                // The budget counts the estimates of the batch's approvals, not yet run.
                if self.guard.reserve(self.cfg, &name) {
                    batch.push((row.id, task, call));
                    if batch.len() == BATCH {
                        self.run_batch(&mut batch)?;
                    }
                } else {
                    self.run_batch(&mut batch)?;
                    self.skip(&task, Some(&name), SkipReason::Budget)?;
                }
                continue;
            }
            self.run_batch(&mut batch)?;
            if !self.guard.within_budget(self.cfg, &name) {
                self.skip(&task, Some(&name), SkipReason::Budget)?;
                continue;
            }
            let claimed = match retrying {
                true => self.ledger.store.claim_retry(row.id, &self.run_id)?,
                false => self.ledger.store.claim(row.id, &self.run_id)?,
            };
            if !claimed {
                // Another process claimed it first: it runs there, exactly once.
                continue;
            }
            crate::fault::point("approval_claimed");
            // Its outcome, the approval's included, is recorded with the tool run.
            self.run_tool(&task, &call, Some(row.id))?;
            self.handled.insert(task.id.clone());
        }
        self.run_batch(&mut batch)
    }

    /// What must hold before an approved task may run: its file re-read, the task found
    /// unchanged and open, its call valid, its tool not denied, the task not tripped.
    fn check_approved(&mut self, row: &ApprovalRow) -> Result<Checked> {
        // Queued under another config that still exists (a second config on this state
        // dir): its tools and files are not these, so it would go stale here. It stays
        // approved for a run under its own config.
        // In a fleet every node has its own config, and its own paths to the same files.
        if let Some(recorded) = row.config.as_deref()
            && self.cfg.fleet.is_none()
            && Some(recorded) != crate::store::config_key(self.cfg.source.as_deref()).as_deref()
            && Path::new(recorded).is_file()
        {
            return Ok(Checked::Left);
        }
        let file = self.local_file(row)?;
        let task = match self.file_cache.find(&file, &row.task_id) {
            Err(reason) => return Ok(Checked::Stale(reason)),
            Ok(None) => return Ok(Checked::Stale("the task changed or was removed".into())),
            Ok(Some(t)) if t.done => return Ok(Checked::Stale("the task is already done".into())),
            Ok(Some(t)) => t,
        };
        // The call as the file says it now, resolved and validated again.
        let call = match ToolCall::resolve(&task, self.cfg.plain_tasks, self.registry) {
            // Its own copy: the task it borrows from moves on with it.
            Ok(Some(call)) => call.into_owned(),
            Ok(None) => {
                return Ok(Checked::Stale(
                    "the task is no longer a valid tool call".into(),
                ));
            }
            Err(CallError::Unknown { name, .. }) => {
                return Ok(Checked::Stale(format!("tool \"{name}\" no longer exists")));
            }
            Err(CallError::Input { why, .. }) => {
                return Ok(Checked::Stale(format!("invalid input: {why}")));
            }
        };
        if self.stopping() {
            // Shutting down: it stays approved and runs at the next tick.
            return Ok(Checked::Left);
        }
        // A yes does not outrank the guardrails: a tool now denied by policy, a trip or the
        // budget (checked by the caller) blocks it; it stays approved (not used up) and the
        // run says why.
        let name = call.name().to_string();
        // In a fleet, left for the nodes its tool's `hosts` name (docs/fleet.md#affinity).
        if !self.cfg.runs_here(&name) {
            return Ok(Checked::Left);
        }
        if call.spec.approval == Approval::Deny {
            return Ok(Checked::Blocked(task, name, SkipReason::DeniedByPolicy));
        }
        if self.ledger.store.is_tripped(&task.id)? {
            return Ok(Checked::Blocked(task, name, SkipReason::Tripped));
        }
        Ok(Checked::Ready(task, Box::new(call)))
    }

    /// The file an approved task is in on this node: the one it was queued from, or in a
    /// fleet (where another node may have queued it from its own clone, at another path)
    /// the configured file that has a task of that id.
    fn local_file(&mut self, row: &ApprovalRow) -> Result<std::path::PathBuf> {
        let queued = Path::new(&row.file);
        if self.cfg.fleet.is_none() || self.cfg.files.iter().any(|f| f == queued) {
            return Ok(queued.to_path_buf());
        }
        for file in &self.cfg.files {
            if let Ok(Some(_)) = self.file_cache.find(file, &row.task_id) {
                return Ok(file.clone());
            }
        }
        Ok(queued.to_path_buf())
    }

    /// Run a batch of approved work of tools without outside effects, each checked and its
    /// estimate reserved: all claimed in one durable commit before any of them starts, then
    /// run one after another, their outcomes committed together ([`super::ledger`]). A crash
    /// in between leaves them `running`: reported interrupted, never run again
    /// (docs/reference.md#at-most-once). Empties `batch`.
    fn run_batch(&mut self, batch: &mut Vec<(i64, Task, ToolCall<'static>)>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(batch);
        let ids: Vec<i64> = batch.iter().map(|(id, _, _)| *id).collect();
        let claimed: HashSet<i64> = self
            .ledger
            .store
            .claim_many(&ids, &self.run_id)?
            .into_iter()
            .collect();
        let ran = self.run_claimed(batch, &claimed);
        // What ran is recorded whatever stopped the batch.
        let flushed = self.ledger.flush().map_err(NotKept::into_error);
        ran.and(flushed)
    }

    fn run_claimed(
        &mut self,
        batch: Vec<(i64, Task, ToolCall<'static>)>,
        claimed: &HashSet<i64>,
    ) -> Result<()> {
        for (id, task, call) in batch {
            if !claimed.contains(&id) {
                // Another process claimed it first: it runs there, exactly once.
                self.guard.release(self.cfg, call.name());
                continue;
            }
            crate::fault::point("approval_claimed");
            self.run_tool(&task, &call, Some(id))?;
            self.handled.insert(task.id.clone());
        }
        Ok(())
    }

    fn stale(&mut self, row: &ApprovalRow, reason: &str) -> Result<()> {
        // Why may quote the input (an invalid value): redacted before it is stored.
        let reason = self.secrets.redact(reason);
        if !self.ledger.store.mark_stale(row.id, &reason, self.now)? {
            return Ok(());
        }
        let run_id = self.run_id.clone();
        self.record(&Event::ApprovalStale(Ended {
            run_id: Some(&run_id),
            approval_id: row.id,
            task_id: &row.task_id,
            reason: &reason,
        }))?;
        let mut r = row_report(row, Outcome::Stale, &self.secrets);
        r.reason = Some(reason);
        self.push(r);
        Ok(())
    }

    fn stopping(&self) -> bool {
        self.stop.is_some_and(Stop::stopping)
    }

    /// Carry out one planned decision.
    pub(crate) fn apply(&mut self, planned: &Planned) -> Result<()> {
        let task = &planned.task;
        if self.handled.contains(&task.id) || self.stopping() {
            return Ok(());
        }
        // In a fleet, the slot is claimed before the node acts on it (a run claims it once
        // its budget allows: a slot the budget holds back stays for a later run).
        let claims_first = match planned.decision {
            Decision::Remind => true,
            // A one-time task's approval is the fleet's one open approval of it (a unique
            // index), asked again after a deny hold as on one host; a recurring slot's
            // approval is claimed with its slot.
            Decision::Approve(_) => task.section != Section::OneTime,
            _ => false,
        };
        if claims_first && !self.claimed(task)? {
            return Ok(());
        }
        match &planned.decision {
            Decision::Run(call) => {
                if self.may_start_claimed(task, call.name())? {
                    self.record_start(task, call)?;
                    self.run_tool(task, call, None)?;
                }
            }
            Decision::Approve(call) => {
                // An MCP server that will not start (a command cron's PATH does not find) fails
                // its tasks now: asking a person to approve a call that cannot be made would
                // only hide the failure until then.
                let workdir = task.file.parent().unwrap_or(Path::new("/"));
                match self.mcp.start_for(call.name(), workdir) {
                    Err(why) => {
                        if self.may_start(task, call.name())? {
                            let outcome = tools::Outcome {
                                error: Some(why),
                                failure: Some(tools::FailureKind::Spawn),
                                ..tools::Outcome::default()
                            };
                            self.record_outcome(task, call, None, outcome)?;
                        }
                    }
                    Ok(_) => self.queue(task, call)?,
                }
            }
            Decision::Remind => {
                if task.section == Section::OneTime {
                    self.ledger.store.record_reminded(&task.id, self.now)?;
                } else {
                    self.ledger.store.record_attempt(&task.id, self.now)?;
                }
                let run_id = self.run_id.clone();
                let mut r = TaskReport::new(task, None, Outcome::Reminded, &self.secrets);
                self.record(&Event::TaskReminded {
                    run_id: &run_id,
                    task_id: &task.id,
                    file: &task.file,
                    line: task.line,
                    text: &r.text,
                })?;
                // A reminder an agent proposed says so.
                r.reason = task
                    .proposed_by
                    .as_ref()
                    .map(|by| self.secrets.redact(&format!("{PROPOSED_BY}{by}")));
                self.push(r);
            }
            Decision::Invalid {
                line,
                column,
                error,
            } => {
                let run_id = self.run_id.clone();
                let error = self.secrets.redact(error);
                let tool = planned.shown_tool(self.cfg.plain_tasks);
                let tool = tool.as_deref();
                self.record(&Event::TaskInvalid {
                    run_id: &run_id,
                    file: &task.file,
                    line: *line,
                    column: *column,
                    error: &error,
                    task_id: &task.id,
                    tool,
                })?;
                let mut r = TaskReport::new(task, tool, Outcome::Invalid, &self.secrets);
                r.line = *line;
                r.column = Some(*column);
                r.reason = Some(error);
                self.push(r);
            }
            Decision::Skip(reason) => {
                let tool = planned.shown_tool(self.cfg.plain_tasks);
                self.skip(task, tool.as_deref(), *reason)?
            }
            // A one-time success whose tick did not land: try the tick again, run nothing.
            Decision::Done if !task.done && task.section == Section::OneTime => {
                // In a fleet, only `tick = "all"` ticks the copies of nodes that did not
                // run it (docs/fleet.md#exactly-once).
                let all = self
                    .cfg
                    .fleet
                    .as_ref()
                    .is_none_or(|f| f.tick == crate::config::FleetTick::All);
                if all {
                    self.ticks.want(task);
                }
            }
            Decision::Pending(_)
            | Decision::Approved(_)
            | Decision::NotDue
            | Decision::Reminded
            | Decision::Denied
            | Decision::Ignored
            | Decision::Done
            | Decision::Inactive
            | Decision::Interrupted
            | Decision::Retry(_)
            | Decision::Elsewhere => {}
        }
        Ok(())
    }

    /// In a fleet, whether this node won the task's slot (docs/fleet.md#exactly-once): the
    /// loser does nothing for the task. On one host, and for tasks a person named, always.
    fn claimed(&mut self, task: &Task) -> Result<bool> {
        if self.cfg.fleet.is_none() || self.named {
            return Ok(true);
        }
        // A one-time task is claimed once for ever: its retry time does not matter.
        let retry_at = match task.section {
            Section::OneTime => None,
            _ => self.ledger.store.retry_chain(&task.id)?.map(|(_, at)| at),
        };
        let claim = crate::plan::claim_of(self.cfg, task, retry_at, self.now);
        let won = self
            .ledger
            .store
            .claim_task(&task.id, &claim, &self.run_id, self.now)?;
        if !won {
            // Another node has it: not this run's to report.
            self.handled.insert(task.id.clone());
        }
        Ok(won)
    }

    /// Whether a planned task may start now, given what this run already did: another task
    /// of a tool with a cooldown started (then it is not due: nothing to say), or the
    /// spending so far, with the estimates of running tasks reserved, leaves no room
    /// (`task_skipped`, budget). When it may, its tool counts as started and its estimate
    /// is reserved until its outcome is recorded.
    fn may_start(&mut self, task: &Task, name: &str) -> Result<bool> {
        match self.guard.may_start(self.cfg, name) {
            Start::Go => Ok(true),
            Start::Cooldown => Ok(false),
            Start::Budget => {
                self.skip(task, Some(name), SkipReason::Budget)?;
                Ok(false)
            }
        }
    }

    /// [`Session::may_start`], and then in a fleet the task's slot claimed: a slot another
    /// node won gives back what starting it reserved.
    fn may_start_claimed(&mut self, task: &Task, name: &str) -> Result<bool> {
        if !self.may_start(task, name)? {
            return Ok(false);
        }
        if !self.claimed(task)? {
            self.guard.release(self.cfg, name);
            return Ok(false);
        }
        Ok(true)
    }

    /// Carry out the plan. With `concurrency` above 1, up to that many tools run at once,
    /// started in file order; everything else (checks, records, the audit) stays on this
    /// thread, so lines stay whole and the guardrails see every start and every outcome.
    pub(crate) fn apply_all(&mut self, items: &[Planned]) -> Result<()> {
        let applied = self.apply_each(items);
        // What ran is recorded whatever stopped the plan.
        let flushed = self.ledger.flush().map_err(NotKept::into_error);
        applied.and(flushed)
    }

    fn apply_each(&mut self, items: &[Planned]) -> Result<()> {
        let limit = self.cfg.concurrency.max(1);
        if limit == 1 {
            for planned in items {
                self.apply(planned)?;
            }
            return Ok(());
        }
        let executor = self.executor();
        std::thread::scope(|scope| -> Result<()> {
            let mut pool = Pool::new(scope, &executor, limit);
            for (i, planned) in items.iter().enumerate() {
                let task = &planned.task;
                let call = match &planned.decision {
                    Decision::Run(call) if !call.spec.runs_in_session() => call,
                    _ => {
                        self.apply(planned)?;
                        continue;
                    }
                };
                if self.handled.contains(&task.id) || self.stopping() {
                    continue;
                }
                // A free slot first: record what finished meanwhile.
                while pool.full() {
                    let Some((j, outcome)) = pool.wait() else {
                        break;
                    };
                    self.finish_parallel(&items[j], outcome)?;
                }
                if !self.may_start_claimed(task, call.name())? {
                    continue;
                }
                self.record_start(task, call)?;
                self.tool_ping(call.name(), None)?;
                self.work.set();
                pool.start(i, task, call);
            }
            while let Some((j, outcome)) = pool.wait() {
                self.finish_parallel(&items[j], outcome)?;
            }
            Ok(())
        })
    }

    /// Where this run's tools run.
    fn executor(&self) -> Executor<'a> {
        Executor::new(self.cfg, &self.run_id, self.stop)
    }

    fn finish_parallel(&mut self, planned: &Planned, outcome: tools::Outcome) -> Result<()> {
        if let Decision::Run(call) = &planned.decision {
            let outcome = self.record_outcome(planned.task, call, None, outcome)?;
            self.tool_ping(call.name(), Some(outcome.success))?;
        }
        Ok(())
    }

    /// `task_skipped`; the first budget stop of a local day also audits `budget_exhausted`
    /// and alerts Telegram.
    fn skip(&mut self, task: &Task, tool: Option<&str>, reason: SkipReason) -> Result<()> {
        if reason == SkipReason::Budget {
            self.budget_exhausted()?;
        }
        // A snoozed task's skip is said once per snooze (docs/reference.md#snooze).
        if reason == SkipReason::Snoozed && !self.ledger.store.first_snooze_skip(&task.id)? {
            return Ok(());
        }
        let run_id = self.run_id.clone();
        self.record(&Event::TaskSkipped {
            run_id: &run_id,
            task_id: &task.id,
            reason: reason.as_str(),
            tool,
        })?;
        if reason == SkipReason::Tripped
            && !Guard::first_mention_today(&mut *self.ledger.store, self.cfg, &task.id, self.now)?
        {
            // Said at the trip and once a day since (docs/reference.md#guardrails): cron would mail
            // it every run.
            return Ok(());
        }
        let mut r = TaskReport::new(task, tool, Outcome::Skipped, &self.secrets);
        r.reason = Some(reason.as_str().into());
        self.push(r);
        Ok(())
    }

    fn budget_exhausted(&mut self) -> Result<()> {
        if !Guard::first_budget_stop_today(&mut *self.ledger.store, self.cfg, self.now)? {
            return Ok(());
        }
        // What is spent or committed to the tools running now.
        let (spent, daily) = (self.guard.committed(), self.cfg.daily_usd);
        let run_id = self.run_id.clone();
        self.record(&Event::BudgetExhausted {
            run_id: &run_id,
            spent_usd: spent,
            daily_usd: daily,
        })?;
        let mut msg = Rendered::new(
            MessageKind::Budget,
            format!("daily budget used up (${spent:.2} of ${daily:.2})"),
            format!(
                "💸 <b>heartbeat</b>: the daily budget is used up (${spent:.2} of ${daily:.2}); \
                 paid tasks wait until tomorrow"
            ),
        );
        msg.data = serde_json::json!({ "spent_usd": spent, "daily_usd": daily });
        self.alert(msg)
    }

    /// An urgent message to every channel that takes its kind (trips, the budget), with a
    /// Reset button for each task id in `resets`.
    fn alert(&mut self, mut msg: Rendered) -> Result<()> {
        msg.urgent = true;
        crate::engine::outbox::enqueue_all(
            &mut *self.ledger.store,
            self.cfg,
            &msg,
            false,
            self.now,
            &self.secrets,
        )?;
        Ok(())
    }

    /// Run one tool call as planned and record its outcome.
    fn run_tool(
        &mut self,
        task: &Task,
        call: &ToolCall,
        approval_id: Option<i64>,
    ) -> Result<tools::Outcome> {
        self.tool_ping(call.name(), None)?;
        let outcome = match call.spec.kind {
            ToolKind::Builtin(b) if b.name() == "notify" => self.notify(&call.input)?,
            ToolKind::Mcp { .. } => {
                let workdir = task.file.parent().unwrap_or(Path::new("/"));
                self.work.set();
                self.mcp
                    .call(&call.spec, &call.input, workdir, self.stop.map(|s| &s.kill))
            }
            _ => {
                self.work.set();
                self.executor().run(task, call)
            }
        };
        let outcome = self.record_outcome(task, call, approval_id, outcome)?;
        self.tool_ping(call.name(), Some(outcome.success))?;
        Ok(outcome)
    }

    /// A tool's `monitor_url_env`, pinged when one of its tasks starts (`ended` None) or
    /// ends (docs/reference.md#monitors); a ping that did not go through is audited, and the
    /// run goes on.
    fn tool_ping(&mut self, tool: &str, ended: Option<bool>) -> Result<()> {
        let Some(var) = self
            .cfg
            .tools
            .get(tool)
            .and_then(|t| t.monitor_url_env.as_deref())
        else {
            return Ok(());
        };
        let Some(failure) = crate::monitor::tool_ping(tool, var, &self.run_id, ended) else {
            return Ok(());
        };
        let error = self.secrets.redact(&failure.error);
        let run_id = self.run_id.clone();
        self.record(&Event::MonitorPingFailed {
            run_id: Some(&run_id),
            monitor: &failure.monitor,
            error: &error,
        })
    }

    /// `notify`: put the text in the outbox for every channel that takes `notify`, or for
    /// the one it names; delivered at the end of the run.
    fn notify(&mut self, input: &Map<String, Value>) -> Result<tools::Outcome> {
        let started = Instant::now();
        let text = input
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let outcome = |result: std::result::Result<String, String>| {
            let mut o = tools::Outcome {
                duration: started.elapsed(),
                ..tools::Outcome::default()
            };
            match result {
                Ok(out) => {
                    o.success = true;
                    o.stdout = out;
                }
                Err(e) => o.error = Some(e),
            }
            Ok(o)
        };
        if let Some(tc) = &self.cfg.telegram
            && tc.chat_ids.is_empty()
            && self.cfg.channels.is_empty()
        {
            return outcome(Err("telegram.chat_ids is empty: nobody to notify".into()));
        }
        let first = self.secrets.redact(text).first_line(80).into_string();
        let mut msg = Rendered::new(MessageKind::Notify, first, crate::text::escape(text));
        msg.data = serde_json::json!({ "text": text });
        let store = &mut *self.ledger.store;
        match input.get("channel").and_then(Value::as_str) {
            Some(name) => {
                let sent =
                    outbox::enqueue_to(store, self.cfg, name, &msg, self.now, &self.secrets)?;
                outcome(match sent {
                    true => Ok(format!("queued for channel {name}")),
                    false => Err(format!("no channel named {name:?} is configured")),
                })
            }
            None => {
                let n = outbox::enqueue_all(store, self.cfg, &msg, false, self.now, &self.secrets)?;
                outcome(match n {
                    0 => Err("no channel takes notify: add a [telegram] table or a \
                              [channels.NAME] table (docs: Channels)"
                        .into()),
                    n => Ok(format!("queued for {n} channel(s)")),
                })
            }
        }
    }

    /// Audit and store a tool's outcome, and remember a one-time success for its tick.
    fn record_outcome(
        &mut self,
        task: &Task,
        call: &ToolCall,
        approval_id: Option<i64>,
        outcome: tools::Outcome,
    ) -> Result<tools::Outcome> {
        let (name, input) = (call.name(), &call.input);
        let duration_ms = outcome.duration.as_millis() as u64;
        let finished = self.now + chrono::Duration::milliseconds(duration_ms as i64);
        // Everything below (audit, report, stdout, Telegram) sees only these. The input's own
        // secrets too: a tool may print back a token it was given.
        let Shown {
            output,
            stderr,
            bare_error,
            error,
            summary,
        } = Shown::of(&outcome, &self.secrets.with_input(input));
        // What it cost: as reported by the tool, else the configured estimate.
        let estimate = self.cfg.cost_estimate(name);
        let cost = outcome.cost_usd.or((estimate > 0.0).then_some(estimate));
        // No effect outside heartbeat: its record may wait for the batch (super::ledger).
        let effect_free = effect_free(call);
        // A run of a retry chain (docs/reference.md#retries): the attempts that failed.
        let chain = self.ledger.store.retry_chain(&task.id)?;
        let attempt = chain.map_or(1, |(failed, _)| failed + 1);
        let trigger = match chain {
            Some(_) => Trigger::Retry,
            None => self.trigger,
        };
        let retry_at = self.retry_time(task, call, &outcome, attempt, finished);
        // Approved work with outside effects started alone; the rest through `may_start`
        // or a batch of approvals, which reserved the estimate.
        self.guard
            .settle(self.cfg, name, cost, approval_id.is_none() || effect_free);
        let row = TaskRunRecord {
            run_id: &self.run_id,
            task_id: &task.id,
            tool: name,
            started_at: self.now,
            finished_at: finished,
            succeeded: outcome.success,
            interrupted: false,
            cost_usd: cost,
            approval_id,
            error: bare_error.as_ref(),
            retried: chain.is_some(),
            retry_at,
            not_started: outcome.failure == Some(tools::FailureKind::Spawn),
        };
        let shown_input = self.secrets.redact_map(input);
        let run = TaskRun {
            run_id: &self.run_id,
            task_id: &task.id,
            file: &task.file,
            line: task.line as i64,
            section: task.section.as_str(),
            tool: name,
            input: &shown_input,
            exit_code: outcome.exit_code,
            duration_ms: Some(duration_ms),
            output: Some(&output),
            error: error.as_ref(),
            cost_usd: outcome.cost_usd,
            approval_id,
            reason: None,
            trigger,
            summary: summary.as_ref(),
            stderr: Some(&stderr),
        };
        let at = retry_at.map(crate::audit::format_ts);
        let event = match (outcome.success, &at) {
            (true, _) => Event::TaskSucceeded(run),
            (false, None) => Event::TaskFailed(run),
            (false, Some(at)) => Event::TaskRetryScheduled {
                run_id: &self.run_id,
                task_id: &task.id,
                attempt,
                at: at.clone(),
                error: error.as_ref(),
            },
        };
        let failures = self
            .ledger
            .tool_run(&row, &event, effect_free)
            .map_err(|e| match e {
                NotKept::Row(e) => unrecorded(task, name, "its outcome could not be recorded", e),
                NotKept::Line(e) => {
                    unrecorded(task, name, "its audit line could not be written", e)
                }
            })?;
        let store = &mut *self.ledger.store;
        let trips = !outcome.success
            && retry_at.is_none()
            && Guard::breaker(store, self.cfg, &task.id, name, failures, self.now)?;
        if trips {
            // The TRIPPED line is today's mention: later runs today skip it quietly.
            Guard::first_mention_today(store, self.cfg, &task.id, self.now)?;
            let run_id = self.run_id.clone();
            self.record(&Event::TaskTripped {
                run_id: &run_id,
                task_id: &task.id,
                failures,
                tool: name,
                file: &task.file,
                line: task.line,
            })?;
            // The tool once: a task's text usually starts with it.
            let text = safe_text(task);
            let rest = text.strip_prefix(&format!("@{name}")).unwrap_or(&text);
            let mut msg = Rendered::new(
                MessageKind::Trip,
                format!("@{name} stopped after {failures} failures in a row"),
                format!(
                    "⛔ <b>heartbeat</b>: <b>@{}</b> {} failed {failures} times in a row and is \
                     stopped: <code>heartbeat reset {}</code>",
                    crate::text::escape(name),
                    self.secrets.redact(rest.trim()).first_line(80).escape(),
                    task.id
                ),
            );
            msg.resets = vec![task.id.clone()];
            msg.data = serde_json::json!({
                "task_id": task.id,
                "tool": name,
                "failures": failures,
                "file": task.file.display().to_string(),
                "line": task.line,
            });
            self.alert(msg)?;
        }
        let ticks = self
            .cfg
            .fleet
            .as_ref()
            .is_none_or(|f| f.tick != crate::config::FleetTick::None);
        if outcome.success && task.section == Section::OneTime && ticks {
            self.ticks.want(task);
        }
        let shown_outcome = match retry_at {
            Some(_) => Outcome::RetryScheduled,
            None => Outcome::of_run(outcome.success),
        };
        let mut r = TaskReport::new(task, Some(name), shown_outcome, &self.secrets);
        r.exit_code = outcome.exit_code;
        r.tripped = trips.then_some(failures);
        r.output = Some(output);
        r.summary = summary;
        r.reason = error;
        r.duration_ms = Some(duration_ms);
        r.approval_id = approval_id;
        r.trigger = Some(trigger);
        self.push(r);
        Ok(outcome)
    }

    /// When a failed run is tried again, if it is (docs/reference.md#retries): attempt
    /// `attempt` of its chain failed with attempts left, in a way its `retry_on` names, and
    /// a second call cannot have a second outside effect: the tool never started
    /// (`spawn`), or the tool is idempotent and the task not a one-time task with outside
    /// effects. Approved work is retried under its approval, which waits as `retrying`.
    fn retry_time(
        &self,
        task: &Task,
        call: &ToolCall,
        outcome: &tools::Outcome,
        attempt: u32,
        finished: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        if outcome.success {
            return None;
        }
        let policy = self.cfg.retry_policy(call.name());
        let kind = outcome.failure?;
        if attempt > policy.retries || !kind.retried_by(policy.on.as_deref()) {
            return None;
        }
        let one_time_effect = task.section == Section::OneTime && !effect_free(call);
        let repeatable = policy
            .idempotent
            .unwrap_or_else(|| tools::idempotent_by_default(call.spec.as_ref(), &call.input));
        if kind != tools::FailureKind::Spawn && (one_time_effect || !repeatable) {
            return None;
        }
        let delay = chrono::Duration::from_std(policy.delay(attempt)).ok()?;
        finished.checked_add_signed(delay)
    }

    fn queue(&mut self, task: &Task, call: &ToolCall) -> Result<()> {
        let (name, input) = (call.name(), &call.input);
        let file = task.file.to_string_lossy();
        let mut text = safe_text(task);
        // Whoever decides sees that an agent wrote this task (docs/reference.md#proposal-mark): the
        // terminal and `approvals` show the approval's text, the Telegram summary the report's
        // reason. The mark in the file makes it asked for in every state dir; remembered here, a
        // person's approval releases it (and an agent's approve tool refuses it).
        let proposer = match &task.proposed_by {
            Some(by) => {
                self.ledger
                    .store
                    .record_proposal(&task.id, by, &file, self.now)?;
                Some(by.clone())
            }
            None => self.ledger.store.proposed_by(&task.id)?,
        };
        let proposed = proposer.map(|by| format!("{PROPOSED_BY}{by}"));
        if let Some(note) = &proposed {
            text.push_str(&format!(" ({note})"));
        }
        // `approve` from another directory must run it under this same config.
        let config = crate::store::config_key(self.cfg.source.as_deref());
        // Stored redacted: what runs is always re-read from the file.
        let shown_input = self.secrets.redact_map(input);
        let id = self.ledger.store.queue_approval(
            &NewApproval {
                task_id: &task.id,
                file: &file,
                line: task.line,
                section: task.section.as_str(),
                tool: name,
                input: shown_input.clone(),
                text: self.secrets.redact(&text),
                config: config.as_deref(),
            },
            self.now,
        )?;
        // None: another process queued it a moment ago; it is pending, nothing to add.
        let Some(id) = id else { return Ok(()) };
        self.ledger.store.record_attempt(&task.id, self.now)?;
        let run_id = self.run_id.clone();
        self.record(&Event::ApprovalRequested {
            run_id: &run_id,
            approval_id: id,
            task_id: &task.id,
            tool: name,
            input: &shown_input,
            file: &task.file,
            line: task.line,
        })?;
        let mut r = TaskReport::new(task, Some(name), Outcome::Queued, &self.secrets);
        r.approval_id = Some(id);
        r.reason = proposed.map(|p| self.secrets.redact(&p));
        self.push(r);
        Ok(())
    }

    /// Tick what succeeded, write `run_finished`, sync the audit log. Hands back the store
    /// and the audit log for what follows the run (notifications).
    pub(crate) fn finish(mut self) -> Result<(Report, Box<dyn Store>, AuditLog)> {
        // No server outlives the run (docs/reference.md#mcp-tools); the run's end is the time after
        // this.
        self.mcp.stop_all();
        // A tick follows what SQLite knows.
        self.ledger.flush().map_err(NotKept::into_error)?;
        let errors =
            std::mem::take(&mut self.ticks).write(&mut self.ledger, &self.run_id, &self.known)?;
        self.report.errors.extend(errors);
        let counts = self.report.counts();
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let tally = run_tally(&self.report);
        self.ledger
            .store
            .finish_run(&self.run_id, self.now, counts, &tally)?;
        let run_id = self.run_id.clone();
        self.record(&Event::RunFinished {
            run_id: &run_id,
            succeeded: counts.succeeded,
            failed: counts.failed,
            queued: counts.queued,
            skipped: counts.skipped,
            invalid: counts.invalid,
            duration_ms,
        })?;
        self.ledger.sync()?;
        let (store, audit) = self.ledger.into_parts();
        Ok((self.report, store, audit))
    }
}

/// What [`Session::check_approved`] found.
enum Checked {
    /// It stays approved, nothing said: queued under another config, or the run stops.
    Left,
    /// It can no longer run as approved (why).
    Stale(String),
    /// A guardrail holds it: it stays approved, the run says why (with its tool's name).
    Blocked(Task, String, SkipReason),
    /// It may run, its budget aside: the task as the file says it now, and its call.
    Ready(Task, Box<ToolCall<'static>>),
}

/// What a run adds to the totals of `heartbeat metrics`: its result, and the outcomes of
/// its tasks that no tool run counted (a tool run is counted with its record).
pub(crate) fn run_tally(report: &Report) -> crate::store::RunTally<'_> {
    use crate::store::RunResult;
    let result = if report.exit_code() != crate::exit::OK
        || report.tasks.iter().any(|t| t.tripped.is_some())
    {
        RunResult::Failed
    } else if report.skipped.is_some() {
        RunResult::Skipped
    } else {
        RunResult::Ok
    };
    let tasks = report
        .tasks
        .iter()
        .filter(|t| match t.outcome {
            // A tool run, counted with its record (a retried failure as `failed`).
            Outcome::Succeeded | Outcome::Failed | Outcome::RetryScheduled => false,
            // An approval found `running` is settled with a tool run row; a held start is not.
            Outcome::Interrupted => t.approval_id.is_none(),
            _ => true,
        })
        .map(|t| (t.tool.as_deref().unwrap_or(""), t.outcome))
        .collect();
    crate::store::RunTally { result, tasks }
}

/// Whether the call's tool changes nothing outside heartbeat (`log`).
fn effect_free(call: &ToolCall) -> bool {
    matches!(call.spec.kind, ToolKind::Builtin(b) if !b.outside_effects())
}

/// A report for an approval row (when its task could not be found in its file).
fn row_report(row: &ApprovalRow, outcome: Outcome, secrets: &Secrets) -> TaskReport {
    TaskReport {
        approval_id: Some(row.id),
        ..TaskReport::at(
            row.task_id.clone(),
            Arc::from(Path::new(&row.file)),
            row.line.max(0) as usize,
            secrets.redact(&row.text),
            Some(row.tool.clone()),
            outcome,
        )
    }
}

/// 12 hex digits, unique across processes and runs.
pub(crate) fn new_run_id(now: DateTime<Utc>) -> String {
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(format!(
        "{}:{}:{}",
        std::process::id(),
        real,
        now.timestamp_millis()
    ));
    let digest = h.finalize();
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) use crate::sys::hostname;
