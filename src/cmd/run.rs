//! `heartbeat run --once`: parse → plan → apply (tools, approvals, audit) → tick → report.
//!
//! Order of effects, and why:
//! - Files are read and validated before anything is written: a bad file exits 2 and
//!   leaves no trace but the message.
//! - The run lock is taken before the database is opened for writing, so runs never
//!   overlap; a run that finds the lock held writes `run_skipped` and exits 0.
//! - A tool's outcome is recorded (SQLite, audit) right after it finishes, before the next
//!   tool starts, so a crash loses at most the task that was running.
//! - One-time ticks are written once per file at the end, after re-reading the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{Ctx, Out, all_tasks, clean, ensure_state_dir, first_line, read_files, show_path};
use crate::audit::{self, AuditLog, TEXT_LIMIT};
use crate::cli::{AutonomyArg, RunArgs};
use crate::config::{Autonomy, Config};
use crate::error::{Error, Result, exit};
use crate::lock::{self, Attempt};
use crate::markdown::FileError;
use crate::markdown::tick::{self, TickOutcome};
use crate::model::{Body, Section, Task};
use crate::plan::{self, Decision, PlanInput, Planned, SkipReason};
use crate::store::{NewApproval, RunCounts, Store, TaskRunRecord};
use crate::tools::{self, Invocation, Registry};

/// What happened to one task in this run (the `tasks` of `run --once --json`).
#[derive(Clone, Debug)]
struct TaskReport {
    task_id: String,
    file: PathBuf,
    line: usize,
    /// Where an invalid task's error is.
    column: Option<usize>,
    text: String,
    tool: Option<String>,
    outcome: &'static str,
    reason: Option<String>,
    approval_id: Option<i64>,
    exit_code: Option<i32>,
    output: Option<String>,
    summary: Option<String>,
    duration_ms: Option<u64>,
}

impl TaskReport {
    fn new(task: &Task, tool: Option<String>, outcome: &'static str) -> TaskReport {
        TaskReport {
            task_id: task.id.clone(),
            file: task.file.clone(),
            line: task.line,
            column: None,
            text: safe_text(task),
            tool,
            outcome,
            reason: None,
            approval_id: None,
            exit_code: None,
            output: None,
            summary: None,
            duration_ms: None,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "task_id": self.task_id,
            "tool": self.tool,
            "outcome": self.outcome,
            "reason": self.reason,
            "approval_id": self.approval_id,
            "exit_code": self.exit_code,
            "output": self.output,
            "duration_ms": self.duration_ms,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "text": self.text,
            "summary": self.summary,
        })
    }
}

#[derive(Default)]
struct Report {
    run_id: String,
    skipped: Option<&'static str>,
    tasks: Vec<TaskReport>,
    /// Problems that are not a task's (a tick that could not be written).
    errors: Vec<String>,
}

impl Report {
    fn count(&self, outcome: &str) -> usize {
        self.tasks.iter().filter(|t| t.outcome == outcome).count()
    }

    fn counts(&self) -> RunCounts {
        RunCounts {
            succeeded: self.count("succeeded"),
            failed: self.count("failed"),
            queued: self.count("queued"),
            skipped: self.count("skipped"),
            invalid: self.count("invalid"),
        }
    }

    fn exit_code(&self) -> u8 {
        let c = self.counts();
        if c.failed > 0 || c.invalid > 0 || !self.errors.is_empty() {
            exit::TASK_FAILED
        } else {
            exit::OK
        }
    }

    fn to_json(&self) -> Value {
        let c = self.counts();
        json!({
            "run_id": self.run_id,
            "skipped": self.skipped,
            "tasks": self.tasks.iter().map(TaskReport::to_json).collect::<Vec<_>>(),
            "succeeded": c.succeeded,
            "failed": c.failed,
            "queued": c.queued,
            "skipped_tasks": c.skipped,
            "invalid": c.invalid,
            "reminded": self.count("reminded"),
            "errors": self.errors,
        })
    }
}

pub fn run(ctx: &Ctx, args: &RunArgs) -> Result<u8> {
    if !args.once {
        return Err(Error::Usage(
            "`heartbeat run` needs --once: `heartbeat run --once` runs the due tasks once \
             (from cron or a systemd timer); `heartbeat check` shows what it would do"
                .into(),
        ));
    }
    let cfg = ctx.load_config(&args.files.files)?;
    let autonomy = args.autonomy.map(autonomy_of).unwrap_or(cfg.autonomy);
    let files = read_files(&cfg, args.files.allow_missing)?;
    let registry = Registry::from_config(&cfg);
    let tasks = all_tasks(&files);
    let now = ctx.now;
    let run_id = new_run_id(now);
    let mut out = Out::new();

    if args.dry_run {
        return dry_run(
            ctx, args, &cfg, &registry, &tasks, autonomy, run_id, &mut out,
        );
    }

    ensure_state_dir(&cfg.state_dir)?;
    if let Some(dir) = cfg.audit_log.parent() {
        ensure_state_dir(dir)?;
    }
    let mut audit = AuditLog::open(&cfg.audit_log).map_err(|e| Error::io(&cfg.audit_log, e))?;
    let audit_path = cfg.audit_log.clone();
    let audit_err = move |e| Error::io(&audit_path, e);

    let lock_path = cfg.state_dir.join(lock::LOCK_FILE);
    let _lock = match lock::try_acquire(&cfg.state_dir, now)
        .map_err(|e| Error::io(&lock_path, e))?
    {
        Attempt::Acquired(l) => l,
        Attempt::Held(holder) => {
            let mut fields = fields([("reason", json!("locked"))]);
            fields.insert("holder_pid".into(), json!(holder.pid));
            fields.insert(
                "holder_since".into(),
                json!(holder.since.map(audit::format_ts)),
            );
            audit
                .record(now, "run_skipped", Some(&run_id), fields)
                .map_err(&audit_err)?;
            audit.sync().map_err(&audit_err)?;
            if let Some(since) = holder.since {
                let held = now.signed_duration_since(since);
                if held.to_std().is_ok_and(|d| d >= cfg.stuck_after) {
                    eprintln!(
                        "heartbeat: warning: the run lock {} has been held since {} by pid {} (longer than stuck_after = {}); is that run stuck?",
                        lock_path.display(),
                        super::show_local(since),
                        holder.pid.map_or("?".into(), |p| p.to_string()),
                        humantime::format_duration(cfg.stuck_after),
                    );
                }
            }
            ctx.diag(1, || "another run holds the lock; skipped".into());
            let report = Report {
                run_id,
                skipped: Some("locked"),
                ..Report::default()
            };
            if args.json {
                out.json(&report.to_json());
            }
            return Ok(exit::OK);
        }
    };

    if !args.force && !cfg.active.is_active(now) {
        let next = cfg.active.next_active(now);
        let f = fields([
            ("reason", json!("outside_active_hours")),
            ("next_active", json!(next.map(audit::format_ts))),
        ]);
        audit
            .record(now, "run_skipped", Some(&run_id), f)
            .map_err(&audit_err)?;
        audit.sync().map_err(&audit_err)?;
        ctx.diag(1, || "outside active hours; skipped".into());
        if args.json {
            let report = Report {
                run_id,
                skipped: Some("outside_active_hours"),
                ..Report::default()
            };
            out.json(&report.to_json());
        }
        return Ok(exit::OK);
    }

    let mut store = Store::open(&cfg.state_dir)?;
    let started = Instant::now();
    audit
        .record(
            now,
            "run_started",
            Some(&run_id),
            fields([
                ("mode", json!("once")),
                (
                    "files",
                    json!(files.iter().map(|f| &f.source.path).collect::<Vec<_>>()),
                ),
                ("autonomy", json!(autonomy.as_str())),
                ("host", json!(hostname())),
                ("pid", json!(std::process::id())),
                ("version", json!(env!("CARGO_PKG_VERSION"))),
            ]),
        )
        .map_err(&audit_err)?;
    store.start_run(&run_id, "once", now)?;

    for row in store.expire_pending(now, cfg.approval_ttl)? {
        let f = fields([
            ("approval_id", json!(row.id)),
            ("task_id", json!(row.task_id)),
            ("reason", json!("ttl")),
        ]);
        audit
            .record(now, "approval_expired", Some(&run_id), f)
            .map_err(&audit_err)?;
    }

    let snapshot = store.snapshot(now, cfg.approval_ttl)?;
    let plan = plan::plan(
        &tasks,
        &PlanInput {
            config: &cfg,
            registry: &registry,
            state: &snapshot,
            now,
            force: args.force,
            autonomy,
        },
    );

    let mut report = Report {
        run_id: run_id.clone(),
        ..Report::default()
    };
    let mut apply = Apply {
        registry: &registry,
        store: &mut store,
        audit: &mut audit,
        run_id: &run_id,
        now,
        report: &mut report,
        ticks: BTreeMap::new(),
    };
    for (task, planned) in tasks.iter().zip(&plan.items) {
        apply.task(task, planned)?;
    }
    let ticks = std::mem::take(&mut apply.ticks);
    for (file, ids) in ticks {
        apply.tick(&file, &ids)?;
    }

    let counts = report.counts();
    let duration_ms = started.elapsed().as_millis() as u64;
    audit
        .record(
            now,
            "run_finished",
            Some(&run_id),
            fields([
                ("succeeded", json!(counts.succeeded)),
                ("failed", json!(counts.failed)),
                ("queued", json!(counts.queued)),
                ("skipped", json!(counts.skipped)),
                ("invalid", json!(counts.invalid)),
                ("duration_ms", json!(duration_ms)),
            ]),
        )
        .map_err(&audit_err)?;
    store.finish_run(&run_id, now, counts)?;
    audit.sync().map_err(&audit_err)?;

    if args.json {
        out.json(&report.to_json());
    } else {
        print_human(&report, args.quiet, &ctx.cwd, &mut out);
    }
    Ok(report.exit_code())
}

/// The effects of one run: everything that writes goes through here.
struct Apply<'a> {
    registry: &'a Registry,
    store: &'a mut Store,
    audit: &'a mut AuditLog,
    run_id: &'a str,
    now: DateTime<Utc>,
    report: &'a mut Report,
    /// File → one-time task ids to tick, in file order.
    ticks: BTreeMap<PathBuf, Vec<String>>,
}

impl Apply<'_> {
    fn record(&mut self, event: &str, fields: Map<String, Value>) -> Result<()> {
        self.audit
            .record(self.now, event, Some(self.run_id), fields)
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    fn task(&mut self, task: &Task, planned: &Planned) -> Result<()> {
        let tool = planned.tool.clone();
        match &planned.decision {
            Decision::Run => self.run_tool(task, planned)?,
            Decision::Approve => self.queue(task, planned)?,
            Decision::Remind => {
                self.record(
                    "task_reminded",
                    fields([
                        ("task_id", json!(task.id)),
                        ("file", json!(task.file)),
                        ("line", json!(task.line)),
                        ("text", json!(task.text)),
                    ]),
                )?;
                if task.section == Section::OneTime {
                    self.store.record_reminded(&task.id, self.now)?;
                } else {
                    self.store.record_attempt(&task.id, self.now)?;
                }
                self.report
                    .tasks
                    .push(TaskReport::new(task, None, "reminded"));
            }
            Decision::Invalid {
                line,
                column,
                error,
            } => {
                self.record(
                    "task_invalid",
                    fields([
                        ("task_id", json!(task.id)),
                        ("file", json!(task.file)),
                        ("line", json!(line)),
                        ("column", json!(column)),
                        ("error", json!(error)),
                        ("tool", json!(tool)),
                    ]),
                )?;
                let mut r = TaskReport::new(task, tool, "invalid");
                r.line = *line;
                r.column = Some(*column);
                r.reason = Some(error.clone());
                self.report.tasks.push(r);
            }
            Decision::Skip(reason) => {
                self.record(
                    "task_skipped",
                    fields([
                        ("task_id", json!(task.id)),
                        ("reason", json!(reason.as_str())),
                        ("tool", json!(tool)),
                    ]),
                )?;
                let mut r = TaskReport::new(task, tool, "skipped");
                r.reason = Some(reason.as_str().into());
                self.report.tasks.push(r);
            }
            // A one-time success whose tick did not land: try the tick again, run nothing.
            Decision::Done if !task.done && task.section == Section::OneTime => {
                self.want_tick(task);
            }
            Decision::Pending(_)
            | Decision::NotDue
            | Decision::Denied
            | Decision::Ignored
            | Decision::Done
            | Decision::Inactive => {}
        }
        Ok(())
    }

    fn want_tick(&mut self, task: &Task) {
        self.ticks
            .entry(task.file.clone())
            .or_default()
            .push(task.id.clone());
    }

    fn run_tool(&mut self, task: &Task, planned: &Planned) -> Result<()> {
        let (Some(name), Some(input)) = (&planned.tool, &planned.input) else {
            return Ok(());
        };
        let Some(spec) = self.registry.get(name) else {
            return Ok(());
        };
        let workdir = task.file.parent().unwrap_or(Path::new("/"));
        let outcome = tools::execute(
            spec,
            input,
            &Invocation {
                task_id: &task.id,
                run_id: self.run_id,
                workdir,
                remove_env: &[],
            },
        );
        let duration_ms = outcome.duration.as_millis() as u64;
        let finished = self.now + chrono::Duration::milliseconds(duration_ms as i64);
        let output = audit::truncate(&outcome.stdout, TEXT_LIMIT, outcome.stdout_dropped);
        let error = outcome.error.as_ref().map(|e| {
            let stderr = first_line(&outcome.stderr, 200);
            if stderr.is_empty() {
                e.clone()
            } else {
                format!("{e}: {stderr}")
            }
        });
        let event = if outcome.success {
            "task_succeeded"
        } else {
            "task_failed"
        };
        self.record(
            event,
            fields([
                ("task_id", json!(task.id)),
                ("file", json!(task.file)),
                ("line", json!(task.line)),
                ("section", json!(task.section.as_str())),
                ("tool", json!(name)),
                ("input", Value::Object(input.clone())),
                ("exit_code", json!(outcome.exit_code)),
                ("duration_ms", json!(duration_ms)),
                ("output", json!(output)),
                ("error", json!(error)),
                ("cost_usd", json!(outcome.cost_usd)),
                ("approval_id", Value::Null),
                ("summary", json!(outcome.summary)),
                (
                    "stderr",
                    json!(audit::truncate(
                        &outcome.stderr,
                        TEXT_LIMIT,
                        outcome.stderr_dropped
                    )),
                ),
            ]),
        )?;
        self.store.record_task_run(&TaskRunRecord {
            run_id: self.run_id,
            task_id: &task.id,
            tool: name,
            started_at: self.now,
            finished_at: finished,
            succeeded: outcome.success,
            cost_usd: outcome.cost_usd,
            approval_id: None,
        })?;
        if outcome.success && task.section == Section::OneTime {
            self.want_tick(task);
        }
        let mut r = TaskReport::new(
            task,
            Some(name.clone()),
            if outcome.success {
                "succeeded"
            } else {
                "failed"
            },
        );
        r.exit_code = outcome.exit_code;
        r.output = Some(output);
        r.summary = outcome.summary.clone();
        r.reason = error;
        r.duration_ms = Some(duration_ms);
        self.report.tasks.push(r);
        Ok(())
    }

    fn queue(&mut self, task: &Task, planned: &Planned) -> Result<()> {
        let (Some(name), Some(input)) = (&planned.tool, &planned.input) else {
            return Ok(());
        };
        let mut shown = Value::Object(input.clone());
        audit::redact(&mut shown, &[]);
        let file = task.file.to_string_lossy();
        let text = safe_text(task);
        let id = self.store.queue_approval(
            &NewApproval {
                task_id: &task.id,
                file: &file,
                line: task.line,
                section: task.section.as_str(),
                tool: name,
                input: &shown,
                text: &text,
            },
            self.now,
        )?;
        // None: another process queued it a moment ago; it is pending, nothing to add.
        let Some(id) = id else { return Ok(()) };
        self.record(
            "approval_requested",
            fields([
                ("approval_id", json!(id)),
                ("task_id", json!(task.id)),
                ("tool", json!(name)),
                ("input", Value::Object(input.clone())),
                ("file", json!(task.file)),
                ("line", json!(task.line)),
            ]),
        )?;
        self.store.record_attempt(&task.id, self.now)?;
        let mut r = TaskReport::new(task, Some(name.clone()), "queued");
        r.approval_id = Some(id);
        self.report.tasks.push(r);
        Ok(())
    }

    fn tick(&mut self, file: &Path, ids: &[String]) -> Result<()> {
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let results = match tick::tick_file(file, &refs) {
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
                    let (event, reason) = match r.outcome {
                        TickOutcome::Marked => ("task_marked_done", None),
                        TickOutcome::AlreadyDone => ("task_mark_skipped", Some("already_done")),
                        TickOutcome::Gone => ("task_mark_skipped", Some("gone")),
                    };
                    self.record(
                        event,
                        fields([
                            ("task_id", json!(r.task_id)),
                            ("file", json!(file)),
                            ("line", json!(r.line)),
                            ("reason", json!(reason)),
                        ]),
                    )?;
                }
            }
            Err(e) => {
                let msg = format!("cannot tick done tasks: {e}");
                for id in ids {
                    self.record(
                        "task_mark_skipped",
                        fields([
                            ("task_id", json!(id)),
                            ("file", json!(file)),
                            ("line", Value::Null),
                            ("reason", json!(format!("error: {e}"))),
                        ]),
                    )?;
                }
                self.report.errors.push(msg);
            }
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn dry_run(
    ctx: &Ctx,
    args: &RunArgs,
    cfg: &Config,
    registry: &Registry,
    tasks: &[Task],
    autonomy: Autonomy,
    run_id: String,
    out: &mut Out,
) -> Result<u8> {
    let now = ctx.now;
    let snapshot = super::read_snapshot(cfg, now)?;
    let plan = plan::plan(
        tasks,
        &PlanInput {
            config: cfg,
            registry,
            state: &snapshot,
            now,
            force: args.force,
            autonomy,
        },
    );
    let mut report = Report {
        run_id,
        ..Report::default()
    };
    if !plan.active && !args.force {
        report.skipped = Some("outside_active_hours");
    }
    for (task, planned) in tasks.iter().zip(&plan.items) {
        let tool = planned.tool.clone();
        let outcome = match &planned.decision {
            Decision::Run => "would_run",
            Decision::Approve => "queued",
            Decision::Remind => "reminded",
            Decision::Invalid { .. } => "invalid",
            Decision::Skip(_) => "skipped",
            _ => continue,
        };
        let mut r = TaskReport::new(task, tool, outcome);
        match &planned.decision {
            Decision::Skip(reason) => r.reason = Some(reason.as_str().into()),
            Decision::Invalid {
                line,
                column,
                error,
            } => {
                r.line = *line;
                r.column = Some(*column);
                r.reason = Some(error.clone());
            }
            _ => {}
        }
        report.tasks.push(r);
    }
    if args.json {
        let mut doc = report.to_json();
        doc["dry_run"] = json!(true);
        out.json(&doc);
    } else {
        if let Some(skip) = report.skipped {
            let next = plan.next_active.map(|t| super::show_time(t, cfg));
            out.line(&format!(
                "dry run: {skip}; next active {}",
                next.unwrap_or_else(|| "never".into())
            ));
        }
        print_human(&report, args.quiet, &ctx.cwd, out);
        if report.tasks.is_empty() && !args.quiet {
            out.line("dry run: nothing to do now");
        }
    }
    Ok(if report.count("invalid") > 0 {
        exit::TASK_FAILED
    } else {
        exit::OK
    })
}

fn print_human(report: &Report, quiet: bool, cwd: &Path, out: &mut Out) {
    // Cron mails any output: print only when something happened that a person should see
    // (SPEC §8). Tasks skipped by policy or by the run cap alone are not news.
    let news = !report.errors.is_empty()
        || report.tasks.iter().any(|t| {
            t.outcome != "skipped" || t.reason.as_deref() == Some(SkipReason::Observe.as_str())
        });
    if !news {
        return;
    }
    for t in &report.tasks {
        let failure = matches!(t.outcome, "failed" | "invalid");
        if quiet && !failure {
            continue;
        }
        let mut place = format!("{}:{}", show_path(&t.file, cwd), t.line);
        if let Some(column) = t.column {
            place.push_str(&format!(":{column}"));
        }
        let what = match &t.tool {
            Some(tool) => format!("@{tool}"),
            None => "reminder".into(),
        };
        let detail = match t.outcome {
            "succeeded" => t
                .summary
                .clone()
                .or_else(|| t.output.as_deref().map(|o| first_line(o, 120)))
                .unwrap_or_default(),
            "failed" => t.reason.clone().unwrap_or_default(),
            "queued" => match t.approval_id {
                Some(id) => format!("approval {id}: heartbeat approve {id}"),
                None => String::new(),
            },
            "invalid" => t.reason.clone().unwrap_or_default(),
            "skipped" if t.reason.as_deref() == Some(SkipReason::Observe.as_str()) => {
                first_line(&t.text, 120)
            }
            "skipped" => t.reason.clone().unwrap_or_default(),
            _ => first_line(&t.text, 120),
        };
        let label = match t.outcome {
            "succeeded" => "ok",
            "failed" => "FAILED",
            "invalid" => "INVALID",
            "would_run" => "would run",
            "skipped" if t.reason.as_deref() == Some(SkipReason::Observe.as_str()) => "would run",
            other => other,
        };
        let line = if t.outcome == "invalid" {
            format!("{label:<9} {place}: {}", clean(&detail))
        } else {
            format!("{label:<9} {what:<14} {place}  {}", clean(&detail))
        };
        out.line(line.trim_end());
    }
    for e in &report.errors {
        out.line(&format!("ERROR     {}", clean(e)));
    }
    let c = report.counts();
    let reminded = report.count("reminded");
    let any = !report.tasks.is_empty() || !report.errors.is_empty();
    if any && !quiet {
        let mut parts = vec![];
        for (n, word) in [
            (c.succeeded, "succeeded"),
            (c.failed, "failed"),
            (c.queued, "queued"),
            (c.skipped, "skipped"),
            (c.invalid, "invalid"),
            (reminded, "reminded"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {word}"));
            }
        }
        if !parts.is_empty() {
            out.line(&format!("heartbeat: {}", parts.join(", ")));
        }
    }
}

fn autonomy_of(a: AutonomyArg) -> Autonomy {
    match a {
        AutonomyArg::Observe => Autonomy::Observe,
        AutonomyArg::Cautious => Autonomy::Cautious,
        AutonomyArg::Full => Autonomy::Full,
    }
}

/// The task's text, for records and output: a tool task whose input holds a secret is shown
/// as its tool and redacted input instead of its raw source text.
fn safe_text(task: &Task) -> String {
    if let Body::Tool { name, input } = &task.body {
        let mut shown = Value::Object(input.clone());
        audit::redact(&mut shown, &[]);
        if shown != Value::Object(input.clone()) {
            return format!("@{name} {shown}");
        }
    }
    task.text.clone()
}

/// An ordered JSON object from key/value pairs.
pub(crate) fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// 12 hex digits, unique across processes and runs.
fn new_run_id(now: DateTime<Utc>) -> String {
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

pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // or truncates, and we stop at the first NUL or the end.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
