//! `heartbeat run --once`: one tick ([`crate::engine::run::tick`]), printed; or with
//! `--dry-run`, the plan printed without running anything.
//!
//! Files are read and validated before anything is written: a bad file exits 2 and leaves
//! no trace but the message.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::{Ctx, Out};
use crate::audit::Secrets;
use crate::cli::{AutonomyArg, RunArgs};
use crate::config::{Autonomy, Config};
use crate::engine::files::{all_tasks, read_files, read_snapshot};
use crate::engine::run::{Tick, connect_telegram, selected, tick};
use crate::engine::session::new_run_id;
use crate::error::{Error, Result, exit};
use crate::model::{Outcome, RunSkipReason, Task, Trigger};
use crate::plan::{self, Decision, PlanInput};
use crate::report::{Report, TaskReport};
use crate::text::Redacted;
use crate::tools::Registry;

pub(crate) fn run(ctx: &Ctx, args: &RunArgs) -> Result<u8> {
    if !args.once && args.tasks.is_empty() {
        return Err(Error::Usage(
            "`heartbeat run` needs --once: `heartbeat run --once` runs the due tasks once \
             (from cron or a systemd timer), `heartbeat daemon` stays up; `heartbeat check` \
             shows what a run would do"
                .into(),
        ));
    }
    let cfg = ctx.load_config(&args.files.files)?;
    let autonomy = args.autonomy.map(autonomy_of).unwrap_or(cfg.autonomy);
    let files = read_files(&cfg, args.files.allow_missing)?;
    // `--task`: the tasks a person named, found before anything is written.
    let only = match args.tasks.is_empty() {
        true => None,
        false => Some(named_tasks(&args.tasks, &all_tasks(&files), &ctx.cwd)?),
    };
    // A run a person asked for by naming its tasks (docs/reference.md#run-one-task-now).
    let trigger = match only {
        Some(_) => Trigger::Manual,
        None => Trigger::Schedule,
    };
    super::print_file_warnings(&files, &ctx.cwd);
    // A grant left behind by an edit (also with -q: the task now asks again).
    // A fleet's database that cannot be reached is the run's to report (`store_unavailable`).
    let orphans = match crate::engine::query::orphan_problems(&cfg, &files) {
        Err(Error::Store(crate::store::StoreError::Unavailable { .. })) => Vec::new(),
        other => other?,
    };
    for p in orphans {
        crate::error::say(&format!("heartbeat: {}", super::show_problem(&p, &ctx.cwd)));
    }
    let mut out = ctx.out();

    // Taken from the environment before anything runs, so that no tool can read it there,
    // and so that a dry run's output hides them too.
    let secrets = Secrets::from_config(&cfg);
    if args.dry_run {
        // What MCP servers offered when last listed: a dry run starts nothing.
        let store = crate::store::open_existing(&cfg)?;
        let (catalog, _) = crate::engine::mcp::cached(&cfg, store.as_deref(), ctx.now)?;
        let registry = Registry::from_config(&cfg).with_catalog(&catalog);
        let tasks = selected(all_tasks(&files), only.as_ref());
        let run_id = new_run_id(ctx.now);
        return dry_run(
            ctx, args, &cfg, &registry, &tasks, autonomy, run_id, &mut out,
        );
    }

    let telegram = connect_telegram(&cfg, Duration::ZERO, &|m| ctx.diag(1, || m));
    let report = tick(&Tick {
        cfg: &cfg,
        files: &files,
        clock: ctx.clock,
        force: args.force,
        autonomy,
        mode: crate::model::RunMode::Once,
        // For cron and timers, `run --once` is the schedule's run; `--task` a person's.
        trigger,
        telegram: telegram.as_ref(),
        secrets: &secrets,
        read_updates: true,
        pressed: &[],
        stop: None,
        plan: true,
        only: only.as_ref(),
        diag: &|m| ctx.diag(1, || m),
        work: &ctx.work,
    })?;
    if args.json {
        out.json(&report.to_json());
    } else {
        out.lines(crate::render::terminal::agent_actions(&report));
        out.lines(crate::render::terminal::expired(
            &report,
            cfg.tz(),
            &ctx.cwd,
        ));
        out.lines(crate::render::terminal::missed(&report, cfg.tz(), &ctx.cwd));
        // A person who named the tasks waits for them: every skip is news.
        let named = !args.tasks.is_empty();
        let lines = crate::render::terminal::report(&report, args.quiet, named, &ctx.cwd);
        if lines.is_empty() && !args.quiet {
            // A run that did nothing says why (docs/reference.md#run-output); silence means nothing
            // was due.
            out.lines(why_nothing_ran(ctx, &cfg, &report, named)?);
        }
        out.lines(lines);
    }
    Ok(report.exit_code())
}

/// One line on why a run did nothing, when there is a reason to tell: skipped (paused,
/// outside active hours, another run going) or tasks waiting for the budget.
fn why_nothing_ran(
    ctx: &Ctx,
    cfg: &Config,
    report: &Report,
    named: bool,
) -> Result<Option<String>> {
    let store = || crate::store::open_existing(cfg);
    Ok(match report.skipped {
        Some(RunSkipReason::Paused) => {
            let pause = match store()? {
                Some(s) => s.pause_row()?,
                None => None,
            };
            let until = pause
                .as_ref()
                .and_then(|p| p.until.as_deref())
                .and_then(crate::store::parse_ts)
                .map_or("resumed".to_string(), |t| super::show_time(t, cfg));
            // An agent's pause says whose it is: the person did not make it.
            let by = pause
                .as_ref()
                .filter(|p| p.by_agent())
                .map(|p| format!(" by {}", p.by))
                .unwrap_or_default();
            let reason = pause
                .and_then(|p| p.reason)
                .map(|r| format!(" ({})", Secrets::taken().redact(&r).first_line(80)))
                .unwrap_or_default();
            Some(format!("skipped: paused{by} until {until}{reason}"))
        }
        Some(RunSkipReason::OutsideActiveHours) => {
            let next = cfg
                .active
                .next_active(ctx.now)
                .map_or("never".to_string(), |t| super::show_time(t, cfg));
            Some(format!("skipped: outside active hours; next active {next}"))
        }
        Some(RunSkipReason::Locked) => Some("skipped: another run holds the lock".to_string()),
        // The cause is on stderr already.
        Some(RunSkipReason::StoreUnavailable) => {
            Some("skipped: the fleet's PostgreSQL cannot be reached; nothing ran".to_string())
        }
        None => {
            let waiting = report
                .tasks
                .iter()
                .filter(|t| t.reason.as_ref().map(Redacted::as_str) == Some("budget"))
                .count();
            if waiting == 0 {
                // A person named the tasks: silence would not tell them anything.
                return Ok(named.then(|| {
                    "nothing ran: the named task(s) are done, waiting for a person, held or \
                     snoozed; `heartbeat check` says which"
                        .to_string()
                }));
            }
            let spent = match store()? {
                Some(s) => s.spent_since(crate::schedule::local_midnight(cfg.tz(), ctx.now))?,
                None => 0.0,
            };
            Some(format!(
                "{waiting} task(s) waiting for budget (${spent:.2} of ${:.2} spent today)",
                cfg.daily_usd
            ))
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn dry_run(
    ctx: &Ctx,
    args: &RunArgs,
    cfg: &Config,
    registry: &Registry,
    tasks: &[&Task],
    autonomy: Autonomy,
    run_id: String,
    out: &mut Out,
) -> Result<u8> {
    let now = ctx.now;
    let snapshot = read_snapshot(cfg, now)?;
    let plan = plan::plan(
        tasks,
        &PlanInput {
            config: cfg,
            registry,
            state: &snapshot,
            now,
            force: args.force,
            autonomy,
            manual: !args.tasks.is_empty(),
        },
    );
    let mut report = Report {
        run_id,
        ..Report::default()
    };
    if !plan.active && !args.force {
        report.skipped = Some(RunSkipReason::OutsideActiveHours);
    }
    for (task, planned) in tasks.iter().zip(&plan.items) {
        let tool = planned.shown_tool(cfg.plain_tasks);
        let tool = tool.as_deref();
        let outcome = match &planned.decision {
            Decision::Run(_) => Outcome::WouldRun,
            Decision::Approve(_) => Outcome::WouldQueue,
            Decision::Remind => Outcome::Reminded,
            Decision::Invalid { .. } => Outcome::Invalid,
            Decision::Skip(_) => Outcome::Skipped,
            _ => continue,
        };
        let mut r = TaskReport::new(task, tool, outcome, &Secrets::taken());
        match &planned.decision {
            Decision::Skip(reason) => r.reason = Some(reason.as_str().into()),
            Decision::Invalid {
                line,
                column,
                error,
            } => {
                r.line = *line;
                r.column = Some(*column);
                r.reason = Some(Secrets::taken().redact(error));
            }
            _ => {}
        }
        r.trigger = Some(match args.tasks.is_empty() {
            true => Trigger::Schedule,
            false => Trigger::Manual,
        });
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
        out.lines(crate::render::terminal::report(
            &report,
            args.quiet,
            !args.tasks.is_empty(),
            &ctx.cwd,
        ));
        if report.tasks.is_empty() && !args.quiet {
            out.line("dry run: nothing to do now");
        }
    }
    Ok(if report.count(Outcome::Invalid) > 0 {
        exit::TASK_FAILED
    } else {
        exit::OK
    })
}

/// The ids of the tasks `--task` names: each an id or a unique prefix of one
/// ([`super::find_task`]), or `FILE:LINE` with FILE relative to the current directory and
/// LINE any line of the item. One that names no task, or more than one, is a usage error.
fn named_tasks(named: &[String], tasks: &[&Task], cwd: &Path) -> Result<HashSet<String>> {
    let mut ids = HashSet::new();
    for raw in named {
        let place = raw
            .rsplit_once(':')
            .and_then(|(file, line)| Some((file, line.parse::<usize>().ok()?)))
            .filter(|(file, _)| !file.is_empty());
        let task = match place {
            Some((file, line)) => task_at(Path::new(file), line, tasks, cwd)?,
            None => super::find_task(raw, tasks, cwd)?,
        };
        ids.insert(task.id.clone());
    }
    Ok(ids)
}

/// The task whose item holds `line` of `file`: from its marker's line to the last line of
/// its text (an input may go on over several lines).
fn task_at<'a>(file: &Path, line: usize, tasks: &[&'a Task], cwd: &Path) -> Result<&'a Task> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let wanted = canonical(&cwd.join(file));
    let shown = || Secrets::taken().redact(&format!("{}:{line}", file.display()));
    let in_file: Vec<&&Task> = tasks
        .iter()
        .filter(|t| canonical(&t.file) == wanted)
        .collect();
    if in_file.is_empty() {
        return Err(Error::Usage(format!(
            "--task {}: {} is not one of the files this run reads (see `heartbeat check`)",
            shown().first_line(200),
            file.display()
        )));
    }
    let last_line = |t: &Task| t.text_line + t.text.lines().count().saturating_sub(1);
    in_file
        .into_iter()
        .filter(|t| t.line <= line && line <= last_line(t).max(t.line))
        .max_by_key(|t| t.line)
        .copied()
        .ok_or_else(|| {
            Error::Usage(format!(
                "--task {}: no task there (see `heartbeat check` for the tasks and their lines)",
                shown().first_line(200)
            ))
        })
}

fn autonomy_of(a: AutonomyArg) -> Autonomy {
    match a {
        AutonomyArg::Observe => Autonomy::Observe,
        AutonomyArg::Cautious => Autonomy::Cautious,
        AutonomyArg::Full => Autonomy::Full,
    }
}
