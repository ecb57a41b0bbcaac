//! A session is one stretch of work under the run lock: a `run --once`, or the execution of
//! approvals by `approve`. Every effect of a session goes through here: tools, SQLite
//! bookkeeping, audit lines, ticks.
//!
//! Invariants:
//! - Only constructed while the caller holds the run lock (`Session::begin` takes the lock
//!   guard by reference to make that visible at every call site).
//! - A tool's outcome is recorded (SQLite, audit) right after it finishes, before the next
//!   tool starts, so a crash loses at most the task that was running.
//! - An audit line is written after the SQLite commit that records what it tells: the log
//!   never shows an outcome, a claim or a decision that SQLite does not know.
//! - An approved task runs only after its file was re-read and the task found unchanged and
//!   open, its tool's policy, its trip and the budget checked again, and only after the
//!   one-statement claim `approved → running` succeeded.
//! - One-time ticks are written once per file, in `finish`, after re-reading the file.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::audit::event::{Ended, Mark, TaskRun};
use crate::audit::{AuditLog, Event, Secrets, TEXT_LIMIT};
use crate::clock::Clock;
use crate::config::{Approval, Config, TelegramConfig};
use crate::error::{Error, Result, WorkStarted};
use crate::lock::RunLock;
use crate::markdown::tick::{self, TickOutcome};
use crate::markdown::{self, FileError, SourceFile};
use crate::model::{Section, Task, Trigger};
use crate::plan::{Decision, Planned, SkipReason};
use crate::report::{Report, TaskReport, safe_text};
use crate::store::{ApprovalRow, NewApproval, Store, TaskRunRecord};
use crate::text::Redacted;
use crate::tools::{self, Invocation, Outcome, Registry, ToolKind, ToolSpec};

/// The error of a task whose tool ran and whose outcome could not be kept (`what`).
fn unrecorded(task: &Task, tool: &str, what: &'static str, source: Error) -> Error {
    Error::Unrecorded {
        task: format!("@{tool} {}:{}", task.file.display(), task.line),
        what,
        source: Box::new(source),
    }
}

/// The longest summary a tool can report, in characters (longer ones are cut, with `…`).
const SUMMARY_CHARS: usize = 200;

/// How an approval of a task an agent proposed names its proposer.
pub const PROPOSED_BY: &str = "proposed by an agent, ";

/// The local day on which `budget_exhausted` was last audited.
const BUDGET_DAY_KEY: &str = "budget_exhausted_day";

/// Create the state dir and the audit log's directory (0700) and open the audit log, which
/// never shows `secrets`.
pub fn open_audit(cfg: &Config, secrets: &Secrets) -> Result<AuditLog> {
    super::files::ensure_state_dir(&cfg.state_dir)?;
    if let Some(dir) = cfg.audit_log.parent() {
        super::files::ensure_state_dir(dir)?;
    }
    AuditLog::open(&cfg.audit_log, secrets.clone()).map_err(|e| Error::io(&cfg.audit_log, e))
}

/// A stop request (the daemon's SIGTERM): `no_new` keeps tasks from starting, `kill` stops
/// the tools that are running.
#[derive(Debug, Default)]
pub struct Stop {
    pub no_new: AtomicBool,
    pub kill: AtomicBool,
}

impl Stop {
    pub fn stopping(&self) -> bool {
        self.no_new.load(Ordering::SeqCst)
    }
}

pub struct Session<'a> {
    /// Set by the daemon: honoured before every task.
    pub stop: Option<&'a Stop>,
    cfg: &'a Config,
    registry: &'a Registry,
    pub store: Store,
    audit: AuditLog,
    /// What no sink of this session shows: the audit log's secrets.
    secrets: Secrets,
    pub run_id: String,
    /// When the run started: what schedules, attempts and the budget's day compare.
    pub now: DateTime<Utc>,
    /// Where each audit line reads the time it happened.
    clock: Clock,
    pub report: Report,
    /// File → one-time task ids to tick, in the order they succeeded.
    ticks: BTreeMap<Arc<Path>, Vec<String>>,
    /// The files as read at the start of the run, with their tasks: the tick of a file that
    /// has not changed since need not parse it again.
    pub known: Vec<(&'a SourceFile, &'a [Task])>,
    /// Files of approved tasks, re-read only when they change.
    file_cache: FileCache,
    /// Tasks run from an approval in this session: the plan leaves them alone this time.
    pub handled: HashSet<String>,
    /// Spent since local midnight, including what this session ran (for the budget).
    spent: f64,
    /// Tools started in this session (for cooldowns).
    started_tools: HashSet<String>,
    /// Estimated costs of the tools running now (so parallel starts cannot overspend).
    reserved: f64,
    started: Instant,
    /// What started this run: every task line and report says it too.
    trigger: Trigger,
    /// The MCP servers this session started (or was given), stopped when it finishes.
    pub mcp: super::mcp::Servers<'a>,
    /// Set before any tool starts: the command's errors no longer say "nothing run".
    work: WorkStarted,
}

impl<'a> Session<'a> {
    /// Write `run_started` and open the run's record. `mode`: once, daemon, approve.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        _lock: &RunLock,
        cfg: &'a Config,
        registry: &'a Registry,
        store: Store,
        audit: AuditLog,
        run_id: String,
        clock: Clock,
        now: DateTime<Utc>,
        mode: &str,
        trigger: Trigger,
        files: &[&Path],
        autonomy: &str,
        work: &WorkStarted,
    ) -> Result<Session<'a>> {
        let mut s = Session {
            stop: None,
            cfg,
            registry,
            store,
            secrets: audit.secrets().clone(),
            audit,
            report: Report {
                run_id: run_id.clone(),
                ..Report::default()
            },
            run_id,
            now,
            clock,
            ticks: BTreeMap::new(),
            known: Vec::new(),
            file_cache: FileCache::default(),
            handled: HashSet::new(),
            spent: 0.0,
            started_tools: HashSet::new(),
            reserved: 0.0,
            started: Instant::now(),
            trigger,
            mcp: super::mcp::Servers::new(cfg),
            work: work.clone(),
        };
        let (run_id, now) = (s.run_id.clone(), s.now);
        // A previous start in the future (a clock that stepped back) counts as now.
        let since_last_run_s = s
            .store
            .last_start()?
            .map(|at| (now - at).num_seconds().max(0));
        s.store.start_run(&run_id, mode, now)?;
        // Stamped with the run's start, which schedules compare.
        let event = Event::RunStarted {
            run_id: &run_id,
            mode,
            files,
            autonomy,
            host: hostname(),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION"),
            since_last_run_s,
            trigger,
        };
        s.audit
            .record(now, &event)
            .map_err(|e| Error::io(s.audit.path(), e))?;
        s.spent = s
            .store
            .spent_since(crate::schedule::local_midnight(cfg.tz(), now))?;
        Ok(s)
    }

    /// A task's line in the report, with what started it.
    fn push(&mut self, mut r: TaskReport) {
        r.trigger = Some(self.trigger);
        self.report.tasks.push(r);
    }

    /// One audit line, stamped with the time it is written.
    pub fn record(&mut self, event: &Event) -> Result<()> {
        self.audit
            .record(self.clock.now(), event)
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    /// Approvals left `running` by a process that died become failed (`interrupted`).
    pub fn recover_interrupted(&mut self) -> Result<()> {
        self.recover_starts()?;
        for row in self.store.interrupt_running(self.now)? {
            self.store.record_task_run(&TaskRunRecord {
                run_id: &self.run_id,
                task_id: &row.task_id,
                tool: &row.tool,
                started_at: self.now,
                finished_at: self.now,
                succeeded: false,
                cost_usd: None,
                approval_id: Some(row.id),
                error: None,
            })?;
            self.interrupted(
                Lost {
                    task_id: &row.task_id,
                    file: &row.file,
                    line: row.line,
                    section: &row.section,
                    tool: &row.tool,
                    input: &row.input,
                    text: &row.text,
                    approval_id: Some(row.id),
                },
                "interrupted: the process running it died".into(),
            )?;
        }
        Ok(())
    }

    /// One-time tasks whose run died before recording their outcome: reported failed
    /// (`interrupted`) once, and held until `heartbeat reset` (docs/reference.md#at-most-once).
    fn recover_starts(&mut self) -> Result<()> {
        for row in self.store.hold_unsettled_starts(&self.run_id)? {
            let reason = format!(
                "interrupted: the run stopped before its outcome was recorded, so it may have \
                 run; it stays held until `heartbeat reset {}`",
                row.task_id
            );
            let lost = Lost {
                task_id: &row.task_id,
                file: &row.file,
                line: row.line,
                section: &row.section,
                tool: &row.tool,
                input: &row.input,
                text: "",
                approval_id: None,
            };
            self.interrupted(lost, reason)?;
        }
        Ok(())
    }

    /// A task whose run died before its outcome was recorded, said once: `task_failed` with
    /// reason `interrupted`, and an `interrupted` line in the report (a failure: it counts
    /// among the failed).
    fn interrupted(&mut self, lost: Lost, reason: String) -> Result<()> {
        let run_id = self.run_id.clone();
        let text = self.secrets.redact(lost.text);
        let reason = self.secrets.redact(&reason);
        let input = self.secrets.redact_json(lost.input.clone());
        self.record(&Event::TaskFailed(TaskRun {
            run_id: &run_id,
            task_id: lost.task_id,
            file: Path::new(lost.file),
            line: lost.line,
            section: lost.section,
            tool: lost.tool,
            input: &input,
            exit_code: None,
            duration_ms: None,
            output: None,
            error: Some(&"interrupted".into()),
            cost_usd: None,
            approval_id: lost.approval_id,
            reason: Some("interrupted"),
            trigger: self.trigger,
            summary: None,
            stderr: None,
        }))?;
        self.push(TaskReport {
            task_id: lost.task_id.to_string(),
            file: Arc::from(Path::new(lost.file)),
            line: usize::try_from(lost.line).unwrap_or(0),
            column: None,
            text,
            tool: Some(lost.tool.to_string()),
            outcome: "interrupted",
            reason: Some(reason),
            approval_id: lost.approval_id,
            exit_code: None,
            output: None,
            summary: None,
            duration_ms: None,
            tripped: None,
            trigger: None,
        });
        Ok(())
    }

    /// Before a one-time task with outside effects starts: its start, durably. If that
    /// cannot be written, the tool does not start.
    fn record_start(&mut self, task: &Task, name: &str, input: &Map<String, Value>) -> Result<()> {
        if task.section != Section::OneTime || name == "log" {
            return Ok(());
        }
        let file = task.file.to_string_lossy();
        let row = crate::store::NewStart {
            task_id: &task.id,
            run_id: &self.run_id,
            tool: name,
            input: self.secrets.redact_map(input),
            file: &file,
            line: task.line as i64,
            section: task.section.as_str(),
        };
        Ok(self.store.record_start(&row, self.clock.now())?)
    }

    /// Run approved tasks (all of them, or only these ids), each after re-reading its file.
    pub fn run_approved(&mut self, only: Option<&[i64]>) -> Result<()> {
        let only: Option<HashSet<i64>> = only.map(|ids| ids.iter().copied().collect());
        let rows = self.store.approvals(Some("approved"))?;
        for row in rows {
            if only.as_ref().is_none_or(|ids| ids.contains(&row.id)) {
                self.run_one_approved(&row)?;
            }
        }
        Ok(())
    }

    fn run_one_approved(&mut self, row: &ApprovalRow) -> Result<()> {
        // Queued under another config that still exists (a second config on this state
        // dir): its tools and files are not these, so it would go stale here. It stays
        // approved for a run under its own config.
        if let Some(recorded) = row.config.as_deref()
            && Some(recorded) != crate::store::config_key(self.cfg.source.as_deref()).as_deref()
            && Path::new(recorded).is_file()
        {
            return Ok(());
        }
        let task = match self.file_cache.find(Path::new(&row.file), &row.task_id) {
            Err(reason) => return self.stale(row, &reason),
            Ok(None) => return self.stale(row, "the task changed or was removed"),
            Ok(Some(t)) if t.done => return self.stale(row, "the task is already done"),
            Ok(Some(t)) => t,
        };
        let Some((name, input)) = crate::plan::tool_call(&task, self.cfg.plain_tasks) else {
            return self.stale(row, "the task is no longer a valid tool call");
        };
        let Some(spec) = self.registry.get(&name) else {
            return self.stale(row, &format!("tool \"{name}\" no longer exists"));
        };
        if let Err(e) = spec.validate(&input) {
            return self.stale(row, &format!("invalid input: {e}"));
        }
        if self.stopping() {
            // Shutting down: it stays approved and runs at the next tick.
            return Ok(());
        }
        // A yes does not outrank the guardrails: a tool now denied by policy, a trip or the
        // budget blocks it; it stays approved (not used up) and the run says why.
        if spec.approval == Approval::Deny {
            return self.skip(&task, Some(&name), SkipReason::DeniedByPolicy);
        }
        if self.store.is_tripped(&task.id)? {
            return self.skip(&task, Some(&name), SkipReason::Tripped);
        }
        if !self
            .cfg
            .within_budget(self.spent, self.cfg.cost_estimate(&name))
        {
            return self.skip(&task, Some(&name), SkipReason::Budget);
        }
        if !self.store.claim(row.id, &self.run_id)? {
            // Another process claimed it first: it runs there, exactly once.
            return Ok(());
        }
        crate::fault::point("approval_claimed");
        // Its outcome, the approval's included, is recorded with the tool run.
        self.run_tool(&task, &name, &input, Some(row.id))?;
        self.handled.insert(task.id.clone());
        Ok(())
    }

    fn stale(&mut self, row: &ApprovalRow, reason: &str) -> Result<()> {
        // Why may quote the input (an invalid value): redacted before it is stored.
        let reason = self.secrets.redact(reason);
        if !self.store.mark_stale(row.id, &reason, self.now)? {
            return Ok(());
        }
        let run_id = self.run_id.clone();
        self.record(&Event::ApprovalStale(Ended {
            run_id: Some(&run_id),
            approval_id: row.id,
            task_id: &row.task_id,
            reason: &reason,
        }))?;
        let mut r = row_report(row, "stale", &self.secrets);
        r.reason = Some(reason);
        self.push(r);
        Ok(())
    }

    fn stopping(&self) -> bool {
        self.stop.is_some_and(Stop::stopping)
    }

    /// Carry out one planned decision.
    pub fn apply(&mut self, task: &Task, planned: &Planned) -> Result<()> {
        if self.handled.contains(&task.id) || self.stopping() {
            return Ok(());
        }
        let tool = planned.tool.as_deref();
        match &planned.decision {
            Decision::Run => {
                if let (Some(name), Some(input)) = (&planned.tool, &planned.input)
                    && self.may_start(task, name)?
                {
                    self.record_start(task, name, input)?;
                    self.run_tool(task, name, input, None)?;
                }
            }
            Decision::Approve => {
                // An MCP server that will not start (a command cron's PATH does not find) fails
                // its tasks now: asking a person to approve a call that cannot be made would
                // only hide the failure until then.
                let workdir = task.file.parent().unwrap_or(Path::new("/"));
                let unstartable = match &planned.tool {
                    Some(name) => self.mcp.start_for(name, workdir).err(),
                    None => None,
                };
                match (unstartable, &planned.tool, &planned.input) {
                    (Some(why), Some(name), Some(input)) => {
                        if self.may_start(task, name)? {
                            let outcome = Outcome {
                                error: Some(why),
                                ..Outcome::default()
                            };
                            self.record_outcome(task, name, input, None, outcome)?;
                        }
                    }
                    _ => self.queue(task, planned)?,
                }
            }
            Decision::Remind => {
                if task.section == Section::OneTime {
                    self.store.record_reminded(&task.id, self.now)?;
                } else {
                    self.store.record_attempt(&task.id, self.now)?;
                }
                let run_id = self.run_id.clone();
                let mut r = TaskReport::new(task, None, "reminded", &self.secrets);
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
                self.record(&Event::TaskInvalid {
                    run_id: &run_id,
                    file: &task.file,
                    line: *line,
                    column: *column,
                    error: &error,
                    task_id: &task.id,
                    tool,
                })?;
                let mut r = TaskReport::new(task, tool, "invalid", &self.secrets);
                r.line = *line;
                r.column = Some(*column);
                r.reason = Some(error);
                self.push(r);
            }
            Decision::Skip(reason) => self.skip(task, tool, *reason)?,
            // A one-time success whose tick did not land: try the tick again, run nothing.
            Decision::Done if !task.done && task.section == Section::OneTime => {
                self.want_tick(task);
            }
            Decision::Pending(_)
            | Decision::Approved(_)
            | Decision::NotDue
            | Decision::Reminded
            | Decision::Denied
            | Decision::Ignored
            | Decision::Done
            | Decision::Inactive
            | Decision::Interrupted => {}
        }
        Ok(())
    }

    /// Whether a planned task may start now, given what this run already did: another task
    /// of a tool with a cooldown started (then it is not due: nothing to say), or the
    /// spending so far, with the estimates of running tasks reserved, leaves no room
    /// (`task_skipped`, budget). When it may, its tool counts as started and its estimate
    /// is reserved until its outcome is recorded.
    fn may_start(&mut self, task: &Task, name: &str) -> Result<bool> {
        if self.cfg.cooldown(name).is_some() && self.started_tools.contains(name) {
            return Ok(false);
        }
        let estimate = self.cfg.cost_estimate(name);
        if !self.cfg.within_budget(self.spent + self.reserved, estimate) {
            self.skip(task, Some(name), SkipReason::Budget)?;
            return Ok(false);
        }
        self.tool_started(name);
        self.reserved += estimate;
        Ok(true)
    }

    fn tool_started(&mut self, name: &str) {
        if !self.started_tools.contains(name) {
            self.started_tools.insert(name.to_string());
        }
    }

    /// Carry out the plan. With `concurrency` above 1, up to that many tools run at once,
    /// started in file order; everything else (checks, records, the audit) stays on this
    /// thread, so lines stay whole and the guardrails see every start and every outcome.
    pub fn apply_all(&mut self, tasks: &[&Task], items: &[Planned]) -> Result<()> {
        let limit = self.cfg.concurrency.max(1);
        if limit == 1 {
            for (task, planned) in tasks.iter().zip(items) {
                self.apply(task, planned)?;
            }
            return Ok(());
        }
        let stop = self.stop;
        let run_id = self.run_id.clone();
        let remove_env = self.token_env();
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::channel::<(usize, Outcome)>();
            let mut running = 0usize;
            for (i, (task, planned)) in tasks.iter().zip(items).enumerate() {
                let parallel = match (&planned.decision, &planned.tool, &planned.input) {
                    (Decision::Run, Some(name), Some(_)) => self
                        .registry
                        .get(name)
                        .filter(|spec| !spec.runs_in_session())
                        .map(Cow::into_owned),
                    _ => None,
                };
                let Some(spec) = parallel else {
                    self.apply(task, planned)?;
                    continue;
                };
                if self.handled.contains(&task.id) || self.stopping() {
                    continue;
                }
                // A free slot first: record what finished meanwhile.
                while running >= limit {
                    // Every worker sends its outcome; a closed channel only ends the wait.
                    let Ok((j, outcome)) = rx.recv() else { break };
                    running -= 1;
                    self.finish_parallel(tasks[j], &items[j], outcome)?;
                }
                if !self.may_start(task, &spec.name)? {
                    continue;
                }
                let input = planned.input.clone().unwrap_or_default();
                self.record_start(task, &spec.name, &input)?;
                self.work.set();
                let task_id = task.id.clone();
                let workdir = task.file.parent().unwrap_or(Path::new("/")).to_path_buf();
                let (tx, run_id, remove_env) = (tx.clone(), run_id.clone(), remove_env.clone());
                scope.spawn(move || {
                    let outcome = tools::execute_with_stop(
                        &spec,
                        &input,
                        &Invocation {
                            task_id: &task_id,
                            run_id: &run_id,
                            workdir: &workdir,
                            remove_env: &remove_env,
                        },
                        stop.map(|s| &s.kill),
                    );
                    let _ = tx.send((i, outcome));
                });
                running += 1;
            }
            drop(tx);
            for (j, outcome) in rx {
                self.finish_parallel(tasks[j], &items[j], outcome)?;
            }
            Ok(())
        })
    }

    fn finish_parallel(&mut self, task: &Task, planned: &Planned, outcome: Outcome) -> Result<()> {
        if let (Some(name), Some(input)) = (&planned.tool, &planned.input) {
            self.record_outcome(task, name, input, None, outcome)?;
        }
        Ok(())
    }

    /// The Telegram token's variable, removed from every tool's environment.
    fn token_env(&self) -> Vec<String> {
        self.cfg
            .telegram
            .iter()
            .map(|t| t.bot_token_env.clone())
            .collect()
    }

    /// `task_skipped`; the first budget stop of a local day also audits `budget_exhausted`
    /// and alerts Telegram.
    fn skip(&mut self, task: &Task, tool: Option<&str>, reason: SkipReason) -> Result<()> {
        if reason == SkipReason::Budget {
            self.budget_exhausted()?;
        }
        let run_id = self.run_id.clone();
        self.record(&Event::TaskSkipped {
            run_id: &run_id,
            task_id: &task.id,
            reason: reason.as_str(),
            tool,
        })?;
        if reason == SkipReason::Tripped && !self.first_mention_today(&task.id)? {
            // Said at the trip and once a day since (docs/reference.md#guardrails): cron would mail
            // it every run.
            return Ok(());
        }
        let mut r = TaskReport::new(task, tool, "skipped", &self.secrets);
        r.reason = Some(reason.as_str().into());
        self.push(r);
        Ok(())
    }

    /// Whether a tripped task's skip is the first said today (local day), remembering it.
    fn first_mention_today(&mut self, task_id: &str) -> Result<bool> {
        let key = format!("tripped_said:{task_id}");
        let day = self
            .now
            .with_timezone(&self.cfg.tz())
            .date_naive()
            .to_string();
        if self.store.meta(&key)?.as_deref() == Some(day.as_str()) {
            return Ok(false);
        }
        self.store.set_meta(&key, &day)?;
        Ok(true)
    }

    fn budget_exhausted(&mut self) -> Result<()> {
        let day = self
            .now
            .with_timezone(&self.cfg.tz())
            .date_naive()
            .to_string();
        if self.store.meta(BUDGET_DAY_KEY)?.as_deref() == Some(day.as_str()) {
            return Ok(());
        }
        self.store.set_meta(BUDGET_DAY_KEY, &day)?;
        // What is spent or committed to the tools running now.
        let (spent, daily) = (self.spent + self.reserved, self.cfg.daily_usd);
        let run_id = self.run_id.clone();
        self.record(&Event::BudgetExhausted {
            run_id: &run_id,
            spent_usd: spent,
            daily_usd: daily,
        })?;
        self.alert(&format!(
            "💸 <b>heartbeat</b>: the daily budget is used up (${spent:.2} of ${daily:.2}); paid \
             tasks wait until tomorrow"
        ), Vec::new())
    }

    /// An urgent message to the Telegram chats (trips, the budget), with a Reset button for
    /// each task id in `resets`.
    fn alert(&mut self, html: &str, resets: Vec<String>) -> Result<()> {
        if let Some(tc) = &self.cfg.telegram {
            self.enqueue(tc, "alert", html.to_string(), true, resets)?;
        }
        Ok(())
    }

    /// A message of its own to every configured chat, through the outbox.
    fn enqueue(
        &mut self,
        tc: &TelegramConfig,
        kind: &'static str,
        html: String,
        urgent: bool,
        resets: Vec<String>,
    ) -> Result<()> {
        let msg = crate::render::telegram::Rendered {
            kind,
            html,
            urgent,
            approvals: Vec::new(),
            resets,
        };
        crate::engine::outbox::enqueue_all(
            &mut self.store,
            tc,
            &msg,
            false,
            self.now,
            &self.secrets,
        )?;
        Ok(())
    }

    fn want_tick(&mut self, task: &Task) {
        let ids = self.ticks.entry(task.file.clone()).or_default();
        if !ids.contains(&task.id) {
            ids.push(task.id.clone());
        }
    }

    /// Run one tool and record its outcome.
    fn run_tool(
        &mut self,
        task: &Task,
        name: &str,
        input: &Map<String, Value>,
        approval_id: Option<i64>,
    ) -> Result<Outcome> {
        let Some(spec) = self.registry.get(name) else {
            // The plan only runs tools that exist.
            return Ok(Outcome::default());
        };
        let outcome = match spec.kind {
            ToolKind::Notify => self.notify(input)?,
            ToolKind::Mcp { .. } => {
                let workdir = task.file.parent().unwrap_or(Path::new("/"));
                self.work.set();
                self.mcp
                    .call(&spec, input, workdir, self.stop.map(|s| &s.kill))
            }
            _ => self.execute(task, &spec, input),
        };
        self.record_outcome(task, name, input, approval_id, outcome)
    }

    /// `notify`: put the text in the outbox for every chat; delivered at the end of the run.
    fn notify(&mut self, input: &Map<String, Value>) -> Result<Outcome> {
        let started = Instant::now();
        let text = input
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(tc) = &self.cfg.telegram else {
            return Ok(Outcome {
                error: Some("notify needs a [telegram] table in the config".into()),
                duration: started.elapsed(),
                ..Outcome::default()
            });
        };
        if tc.chat_ids.is_empty() {
            return Ok(Outcome {
                error: Some("telegram.chat_ids is empty: nobody to notify".into()),
                duration: started.elapsed(),
                ..Outcome::default()
            });
        }
        self.enqueue(tc, "notify", crate::text::escape(text), false, Vec::new())?;
        Ok(Outcome {
            success: true,
            stdout: format!("queued for {} chat(s)", tc.chat_ids.len()),
            duration: started.elapsed(),
            ..Outcome::default()
        })
    }

    fn execute(&self, task: &Task, spec: &ToolSpec, input: &Map<String, Value>) -> Outcome {
        let workdir = task.file.parent().unwrap_or(Path::new("/"));
        let remove_env = self.token_env();
        self.work.set();
        tools::execute_with_stop(
            spec,
            input,
            &Invocation {
                task_id: &task.id,
                run_id: &self.run_id,
                workdir,
                remove_env: &remove_env,
            },
            self.stop.map(|s| &s.kill),
        )
    }

    /// Audit and store a tool's outcome, and remember a one-time success for its tick.
    fn record_outcome(
        &mut self,
        task: &Task,
        name: &str,
        input: &Map<String, Value>,
        approval_id: Option<i64>,
        outcome: Outcome,
    ) -> Result<Outcome> {
        let duration_ms = outcome.duration.as_millis() as u64;
        let finished = self.now + chrono::Duration::milliseconds(duration_ms as i64);
        // Redacted before they are cut: a secret straddling the cut would keep all but its
        // tail. Everything below (audit, report, stdout, Telegram) sees only these. The
        // input's own secrets too: a tool may print back a token it was given.
        let secrets = self.secrets.with_input(input);
        let stdout = secrets.redact(&outcome.stdout);
        let stderr = secrets.redact(&outcome.stderr);
        let output = stdout.truncate(TEXT_LIMIT, outcome.stdout_dropped);
        // An error may repeat a tool's whole first line (an MCP tool's `isError` text, an
        // HTTP error page): cut, after redaction, like any text kept in a line.
        let bare_error = outcome
            .error
            .as_deref()
            .map(|e| secrets.redact(e).truncate(TEXT_LIMIT, 0));
        let error = bare_error.as_ref().map(|e| {
            let stderr = stderr.first_line(200);
            if stderr.is_empty() {
                e.clone()
            } else {
                secrets.redact(&format!("{e}: {stderr}"))
            }
        });
        // One line (docs/reference.md#tool-output), cut after redaction: a tool's "summary" of a
        // megabyte would otherwise become a flood of Telegram messages.
        let summary = outcome
            .summary
            .as_deref()
            .map(|s| secrets.redact(s).first_line(SUMMARY_CHARS));
        // What it cost: as reported by the tool, else the configured estimate.
        let estimate = self.cfg.cost_estimate(name);
        let cost = outcome.cost_usd.or((estimate > 0.0).then_some(estimate));
        self.spent += cost.unwrap_or(0.0);
        if approval_id.is_none() {
            // Started through `may_start`, which reserved the estimate.
            self.reserved = (self.reserved - estimate).max(0.0);
        }
        self.tool_started(name);
        crate::fault::point("task_done");
        let failures = self
            .store
            .record_task_run(&TaskRunRecord {
                run_id: &self.run_id,
                task_id: &task.id,
                tool: name,
                started_at: self.now,
                finished_at: finished,
                succeeded: outcome.success,
                cost_usd: cost,
                approval_id,
                error: bare_error.as_ref(),
            })
            .map_err(|e| unrecorded(task, name, "its outcome could not be recorded", e.into()))?;
        let stderr = stderr.truncate(TEXT_LIMIT, outcome.stderr_dropped);
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
            trigger: self.trigger,
            summary: summary.as_ref(),
            stderr: Some(&stderr),
        };
        let event = if outcome.success {
            Event::TaskSucceeded(run)
        } else {
            Event::TaskFailed(run)
        };
        self.audit.record(self.clock.now(), &event).map_err(|e| {
            let e = Error::io(self.audit.path(), e);
            unrecorded(task, name, "its audit line could not be written", e)
        })?;
        crate::fault::point("task_recorded");
        let limit = self.cfg.failure_limit(name);
        let trips = !outcome.success && limit > 0 && failures >= limit;
        if trips {
            self.store.trip(&task.id, self.now)?;
            // The TRIPPED line is today's mention: later runs today skip it quietly.
            self.first_mention_today(&task.id)?;
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
            self.alert(
                &format!(
                    "⛔ <b>heartbeat</b>: <b>@{}</b> {} failed {failures} times in a row and is \
                 stopped: <code>heartbeat reset {}</code>",
                    crate::text::escape(name),
                    self.secrets.redact(rest.trim()).first_line(80).escape(),
                    task.id
                ),
                vec![task.id.clone()],
            )?;
        }
        if outcome.success && task.section == Section::OneTime {
            self.want_tick(task);
        }
        let mut r = TaskReport::new(
            task,
            Some(name),
            if outcome.success {
                "succeeded"
            } else {
                "failed"
            },
            &self.secrets,
        );
        r.exit_code = outcome.exit_code;
        r.tripped = trips.then_some(failures);
        r.output = Some(output);
        r.summary = summary;
        r.reason = error;
        r.duration_ms = Some(duration_ms);
        r.approval_id = approval_id;
        self.push(r);
        Ok(outcome)
    }

    fn queue(&mut self, task: &Task, planned: &Planned) -> Result<()> {
        let (Some(name), Some(input)) = (&planned.tool, &planned.input) else {
            return Ok(());
        };
        let file = task.file.to_string_lossy();
        let mut text = safe_text(task);
        // Whoever decides sees that an agent wrote this task (docs/reference.md#proposal-mark): the
        // terminal and `approvals` show the approval's text, the Telegram summary the report's
        // reason. The mark in the file makes it asked for in every state dir; remembered here, a
        // person's approval releases it (and an agent's approve tool refuses it).
        let proposer = match &task.proposed_by {
            Some(by) => {
                self.store.record_proposal(&task.id, by, &file, self.now)?;
                Some(by.clone())
            }
            None => self.store.proposed_by(&task.id)?,
        };
        let proposed = proposer.map(|by| format!("{PROPOSED_BY}{by}"));
        if let Some(note) = &proposed {
            text.push_str(&format!(" ({note})"));
        }
        // `approve` from another directory must run it under this same config.
        let config = crate::store::config_key(self.cfg.source.as_deref());
        // Stored redacted: what runs is always re-read from the file.
        let shown_input = self.secrets.redact_map(input);
        let id = self.store.queue_approval(
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
        self.store.record_attempt(&task.id, self.now)?;
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
        let mut r = TaskReport::new(task, Some(name), "queued", &self.secrets);
        r.approval_id = Some(id);
        r.reason = proposed.map(|p| self.secrets.redact(&p));
        self.push(r);
        Ok(())
    }

    fn tick(&mut self, file: &Path, ids: &[String]) -> Result<()> {
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let known = self.known.iter().find(|(src, _)| src.path == file).copied();
        let results = match tick::tick_file(file, &refs, known) {
            // The file was removed during the run: every task in it is gone.
            Err(FileError::Missing(_)) => Ok(ids
                .iter()
                .map(|id| tick::TickResult {
                    task_id: id.clone(),
                    outcome: TickOutcome::Gone,
                    line: 0,
                })
                .collect()),
            other => other,
        };
        match results {
            Ok(results) => {
                for r in results {
                    let (marked, reason): (bool, Option<Redacted>) = match r.outcome {
                        TickOutcome::Marked => (true, None),
                        TickOutcome::AlreadyDone => (false, Some("already_done".into())),
                        TickOutcome::Gone => (false, Some("gone".into())),
                    };
                    let run_id = self.run_id.clone();
                    let mark = Mark {
                        run_id: &run_id,
                        task_id: &r.task_id,
                        file,
                        line: Some(r.line),
                        reason: reason.as_ref(),
                    };
                    self.record(&if marked {
                        Event::TaskMarkedDone(mark)
                    } else {
                        Event::TaskMarkSkipped(mark)
                    })?;
                }
            }
            Err(e) => {
                let run_id = self.run_id.clone();
                let reason = self.secrets.redact(&format!("error: {e}"));
                for id in ids {
                    self.record(&Event::TaskMarkSkipped(Mark {
                        run_id: &run_id,
                        task_id: id,
                        file,
                        line: None,
                        reason: Some(&reason),
                    }))?;
                }
                let error = self.secrets.redact(&format!("cannot tick done tasks: {e}"));
                self.report.errors.push(error);
            }
        }
        Ok(())
    }

    /// Tick what succeeded, write `run_finished`, sync the audit log. Hands back the store
    /// and the audit log for what follows the run (notifications).
    pub fn finish(mut self) -> Result<(Report, Store, AuditLog)> {
        // No server outlives the run (docs/reference.md#mcp-tools); the run's end is the time after
        // this.
        self.mcp.stop_all();
        for (file, ids) in std::mem::take(&mut self.ticks) {
            self.tick(&file, &ids)?;
        }
        let counts = self.report.counts();
        let duration_ms = self.started.elapsed().as_millis() as u64;
        self.store.finish_run(&self.run_id, self.now, counts)?;
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
        self.audit
            .sync()
            .map_err(|e| Error::io(self.audit.path(), e))?;
        Ok((self.report, self.store, self.audit))
    }
}

/// Files read for approved tasks, kept parsed while they do not change on disk: a
/// thousand approvals in one file read it once, and a tool that edits the file makes the
/// next lookup read it again.
#[derive(Default)]
struct FileCache {
    files: HashMap<PathBuf, (Stamp, HashMap<String, Task>)>,
}

/// What tells that a file changed: size, modification and change times, inode.
type Stamp = (u64, i64, i64, i64, i64, u64);

impl FileCache {
    /// The task with this id as the file is now. Err: the file could not be read.
    fn find(&mut self, path: &Path, task_id: &str) -> std::result::Result<Option<Task>, String> {
        use std::os::unix::fs::MetadataExt;
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read the file: {e}")),
        };
        let stamp = (
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino(),
        );
        if let Some((seen, tasks)) = self.files.get(path)
            && *seen == stamp
        {
            return Ok(tasks.get(task_id).cloned());
        }
        let tasks: HashMap<String, Task> = match markdown::read_source(path) {
            Ok(src) => markdown::parse(&src.path, &src.canonical, &src.text)
                .tasks
                .into_iter()
                .map(|t| (t.id.clone(), t))
                .collect(),
            Err(FileError::Missing(_)) => return Ok(None),
            Err(e) => return Err(format!("cannot read the file: {e}")),
        };
        let found = tasks.get(task_id).cloned();
        self.files.insert(path.to_path_buf(), (stamp, tasks));
        Ok(found)
    }
}

/// A report for an approval row (when its task could not be found in its file).
fn row_report(row: &ApprovalRow, outcome: &'static str, secrets: &Secrets) -> TaskReport {
    TaskReport {
        task_id: row.task_id.clone(),
        file: Arc::from(Path::new(&row.file)),
        line: row.line.max(0) as usize,
        column: None,
        text: secrets.redact(&row.text),
        tool: Some(row.tool.clone()),
        outcome,
        reason: None,
        approval_id: Some(row.id),
        exit_code: None,
        output: None,
        summary: None,
        duration_ms: None,
        tripped: None,
        trigger: None,
    }
}

/// A task run whose outcome was lost, as stored (an approval's row or a start record).
struct Lost<'a> {
    task_id: &'a str,
    file: &'a str,
    line: i64,
    section: &'a str,
    tool: &'a str,
    input: &'a Value,
    text: &'a str,
    approval_id: Option<i64>,
}

/// 12 hex digits, unique across processes and runs.
pub fn new_run_id(now: DateTime<Utc>) -> String {
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

pub use crate::sys::hostname;
