//! `heartbeat run --once`: parse → plan → apply (tools, approvals, audit) → tick → report.
//!
//! Order of effects, and why:
//! - Files are read and validated before anything is written: a bad file exits 2 and
//!   leaves no trace but the message.
//! - The run lock is taken before the database is opened for writing, so runs never
//!   overlap; a run that finds the lock held writes `run_skipped` and exits 0.
//! - Approvals a person approved run first, even outside active hours (a person said yes),
//!   each after its file was re-read; then the plan for everything else.
//! - The effects themselves are in [`crate::session`].

use std::path::Path;

use serde_json::json;

use super::{Ctx, Out, all_tasks, read_files};
use crate::audit;
use crate::cli::{AutonomyArg, RunArgs};
use crate::config::{Autonomy, Config};
use crate::error::{Error, Result, exit};
use crate::lock::{self, Attempt};
use crate::model::Task;
use crate::plan::{self, Decision, PlanInput};
use crate::session::{self, Report, Session, TaskReport, fields, new_run_id};
use crate::store::Store;
use crate::tools::Registry;

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

    let mut audit = session::open_audit(&cfg)?;
    let audit_path = cfg.audit_log.clone();
    let audit_err = move |e| Error::io(&audit_path, e);
    let skip = |audit: &mut audit::AuditLog,
                reason: &'static str,
                extra: serde_json::Map<_, _>,
                out: &mut Out|
     -> Result<u8> {
        let mut f = fields([("reason", json!(reason))]);
        f.extend(extra);
        audit
            .record(now, "run_skipped", Some(&run_id), f)
            .map_err(&audit_err)?;
        audit.sync().map_err(&audit_err)?;
        ctx.diag(1, || format!("run skipped: {reason}"));
        if args.json {
            let report = Report {
                run_id: run_id.clone(),
                skipped: Some(reason),
                ..Report::default()
            };
            out.json(&report.to_json());
        }
        Ok(exit::OK)
    };

    let lock_path = cfg.state_dir.join(lock::LOCK_FILE);
    let lock = match lock::try_acquire(&cfg.state_dir, now).map_err(|e| Error::io(&lock_path, e))? {
        Attempt::Acquired(l) => l,
        Attempt::Held(holder) => {
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
            let extra = fields([
                ("holder_pid", json!(holder.pid)),
                ("holder_since", json!(holder.since.map(audit::format_ts))),
            ]);
            return skip(&mut audit, "locked", extra, &mut out);
        }
    };

    let store = Store::open(&cfg.state_dir)?;
    let active = args.force || cfg.active.is_active(now);
    if !active && !store.has_approved_work()? {
        let next = cfg.active.next_active(now);
        let extra = fields([("next_active", json!(next.map(audit::format_ts)))]);
        return skip(&mut audit, "outside_active_hours", extra, &mut out);
    }

    let paths: Vec<&Path> = files.iter().map(|f| f.source.path.as_path()).collect();
    let mut session = Session::begin(
        &lock,
        &cfg,
        &registry,
        store,
        audit,
        run_id.clone(),
        now,
        "once",
        &paths,
        autonomy.as_str(),
    )?;
    session.expire()?;
    session.recover_interrupted()?;
    session.run_approved(None)?;

    if active {
        let snapshot = session.store.snapshot(now, cfg.approval_ttl)?;
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
        for (task, planned) in tasks.iter().zip(&plan.items) {
            session.apply(task, planned)?;
        }
    } else {
        // Only approved work ran; the rest waits for active hours.
        let next = cfg.active.next_active(now);
        session.record(
            "run_skipped",
            fields([
                ("reason", json!("outside_active_hours")),
                ("next_active", json!(next.map(audit::format_ts))),
            ]),
        )?;
        session.report.skipped = Some("outside_active_hours");
    }
    let report = session.finish()?;

    if args.json {
        out.json(&report.to_json());
    } else {
        report.print(args.quiet, &ctx.cwd, &mut out);
    }
    Ok(report.exit_code())
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
        report.print(args.quiet, &ctx.cwd, out);
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

fn autonomy_of(a: AutonomyArg) -> Autonomy {
    match a {
        AutonomyArg::Observe => Autonomy::Observe,
        AutonomyArg::Cautious => Autonomy::Cautious,
        AutonomyArg::Full => Autonomy::Full,
    }
}
