//! `heartbeat approve`: a person says yes. By id, `--all`, or one by one on a terminal.
//!
//! Invariants:
//! - Only `pending` approvals are approved; an id in any other state is an error that names
//!   the state, and nothing is decided (all ids are checked before any is approved).
//! - `--all` approves exactly the approvals it showed (or listed, with `--yes`), never one
//!   queued after it looked.
//! - The decision is stored (synchronously) and audited before anything runs; running takes
//!   the run lock, re-reads the task's file and claims the approval atomically (see
//!   `session`), so an approved task runs at most once whoever else is trying.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Ctx, Out};
use crate::audit::Secrets;
use crate::cli::ApproveArgs;
use crate::config::Config;
use crate::engine::decide::{Decider, LOCK_WAIT, RunNow};
use crate::error::{Error, Result, exit};
use crate::model::ApprovalState;
use crate::render::{show_local, show_path};
use crate::store::{ApprovalRow, config_key};
use crate::text::clean;

pub(crate) fn run(ctx: &Ctx, args: &ApproveArgs) -> Result<u8> {
    let mut d = ctx.decider()?;
    // Replies waiting on the channels' reply topics are decided first, as a run would.
    crate::engine::replies::read(&mut d, &|m| ctx.diag(1, || m))?;
    let mut out = ctx.out();
    let interactive = std::io::stdin().is_terminal();

    let targets = if !args.ids.is_empty() {
        // An approval already approved (say with --later) is run now, not refused.
        d.decidable_by_id(&args.ids, true)?
    } else if args.all {
        let pending = d.store.approvals(Some(ApprovalState::Pending))?;
        if pending.is_empty() {
            out.line("no pending approvals");
            return Ok(exit::OK);
        }
        for row in &pending {
            out.line(&super::describe(row, &ctx.cwd));
        }
        if !args.yes {
            if !interactive {
                return Err(Error::Usage(
                    "approve --all needs --yes when not on a terminal (the list above is what it would approve)".into(),
                ));
            }
            out.flush();
            if !confirm(&format!("Approve these {}? [y/N] ", pending.len()))? {
                out.line("nothing approved");
                return Ok(exit::OK);
            }
        }
        pending
    } else if interactive {
        return walk(&mut d, ctx, &mut out, args.later, args.always);
    } else {
        let pending = d.store.approvals(Some(ApprovalState::Pending))?;
        for row in &pending {
            out.line(&super::describe(row, &ctx.cwd));
        }
        return Err(Error::Usage(format!(
            "{} pending approval(s); not on a terminal, so give ids: `heartbeat approve ID…` (or `approve --all --yes`)",
            pending.len()
        )));
    };

    // Under the config they were queued under, or not at all: another config re-reads
    // their tasks with other files and tools, and they would go stale, used up.
    match under(ctx, &d.cfg, &targets) {
        Under::Same => {}
        Under::Switch(path) => {
            let ids: Vec<String> = targets.iter().map(|r| format!("#{}", r.id)).collect();
            crate::error::say(&format!(
                "heartbeat: {} queued under the config {}; approving under it",
                ids.join(", "),
                path.display()
            ));
            d = switch_config(ctx, d, &path)?;
        }
        Under::Refuse(why) => return Err(Error::Usage(format!("{why} (nothing was approved)"))),
    }

    // Every decision in one durable transaction: `approve --all` of a thousand costs one
    // sync, not a thousand.
    let pending: Vec<&ApprovalRow> = targets
        .iter()
        .filter(|r| r.state == ApprovalState::Pending)
        .collect();
    let decided = d.approve_many(&pending, args.always)?;
    // The rows in hand, not re-read: running re-reads each task from its file anyway.
    let mut approved: Vec<&ApprovalRow> = Vec::new();
    for row in &targets {
        if row.state == ApprovalState::Approved {
            out.line(&format!(
                "#{} was already approved by {}",
                row.id,
                row.decided_by.as_deref().unwrap_or("?")
            ));
            if args.always {
                d.grant(row)?;
            }
            approved.push(row);
        } else if decided.contains(&row.id) {
            approved.push(row);
            if args.later {
                out.line(&format!(
                    "approved #{} @{} {}:{}; it runs at the next run",
                    row.id,
                    row.tool,
                    show_path(row.file.as_ref(), &ctx.cwd),
                    row.line
                ));
            }
        } else {
            out.line(&format!(
                "#{} was decided by someone else meanwhile",
                row.id
            ));
        }
    }
    // In a fleet, what this node may not run waits for the nodes its tool's hosts name.
    let (approved, elsewhere): (Vec<&ApprovalRow>, Vec<&ApprovalRow>) =
        approved.into_iter().partition(|r| d.cfg.runs_here(&r.tool));
    for row in &elsewhere {
        let hosts = d
            .cfg
            .tools
            .get(&row.tool)
            .and_then(|t| t.hosts.as_ref())
            .map(|h| h.join(", "))
            .unwrap_or_default();
        out.line(&format!(
            "approved #{} @{}; it runs on {hosts} (its hosts), at their next run or tick",
            row.id, row.tool
        ));
    }
    if args.later || approved.is_empty() {
        return Ok(exit::OK);
    }
    execute(&mut d, ctx, &approved, &mut out)
}

/// Whether approvals can be decided under the config loaded now.
enum Under {
    /// Queued under this config (or before approvals recorded one, or with none).
    Same,
    /// Queued under this other config file, which still exists: approve under it.
    Switch(PathBuf),
    /// Not here: why, and what to run instead.
    Refuse(String),
}

/// Compare the config each approval was queued under with the one loaded now. Without a
/// config named by `--config` or `$HEARTBEAT_CONFIG` (found from the working directory, or
/// none), the recorded one is used; a config the person named is used only when the recorded
/// one is gone (they moved it), else refused with the command that works.
fn under(ctx: &Ctx, loaded: &Config, rows: &[ApprovalRow]) -> Under {
    // In a fleet each node has its own config, at its own path: any node decides.
    if loaded.fleet.is_some() {
        return Under::Same;
    }
    let current = config_key(loaded.source.as_deref());
    let mut wanted: Option<(&str, Vec<i64>)> = None;
    // One queued under the config loaded now: then none may be switched to another.
    let mut here: Option<i64> = None;
    for row in rows {
        let Some(recorded) = row.config.as_deref() else {
            continue;
        };
        if Some(recorded) == current.as_deref() {
            here.get_or_insert(row.id);
            continue;
        }
        match &mut wanted {
            None => wanted = Some((recorded, vec![row.id])),
            Some((path, ids)) if *path == recorded => ids.push(row.id),
            Some((path, ids)) => {
                return Under::Refuse(format!(
                    "approvals #{} and #{} were queued under different configs ({path} and \
                     {recorded}): approve them one config at a time, with `heartbeat --config \
                     FILE approve ID`",
                    ids[0], row.id
                ));
            }
        }
    }
    let Some((recorded, ids)) = wanted else {
        return Under::Same;
    };
    if let Some(id) = here {
        return Under::Refuse(format!(
            "approvals #{id} and #{} were queued under different configs ({} and {recorded}): \
             approve them one config at a time, with `heartbeat --config FILE approve ID`",
            ids[0],
            current.as_deref().unwrap_or("none")
        ));
    }
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    let named =
        ctx.config.is_some() || std::env::var_os("HEARTBEAT_CONFIG").is_some_and(|v| !v.is_empty());
    let exists = Path::new(recorded).is_file();
    match (named, exists) {
        (false, true) => Under::Switch(PathBuf::from(recorded)),
        (true, true) => Under::Refuse(format!(
            "approval #{} was queued under the config {recorded}, not {}: run `heartbeat \
             --config {recorded} approve {}`",
            ids[0],
            current.as_deref().unwrap_or("the defaults"),
            ids.join(" ")
        )),
        (true, false) => Under::Same,
        (false, false) => Under::Refuse(format!(
            "approval #{} was queued under the config {recorded}, which is gone: name the \
             config it belongs to now, `heartbeat --config FILE approve {}`",
            ids[0],
            ids.join(" ")
        )),
    }
}

/// The decider again, under the config file `path` (the same state dir, or an error).
fn switch_config(ctx: &Ctx, d: Decider, path: &Path) -> Result<Decider> {
    let named = Ctx {
        now: ctx.now,
        clock: ctx.clock,
        cwd: ctx.cwd.clone(),
        config: Some(path.to_path_buf()),
        state_dir: ctx.state_dir.clone(),
        verbose: ctx.verbose,
        work: ctx.work.clone(),
        output: ctx.output.clone(),
    };
    let cfg = named.load_config(&[])?;
    let same = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if same(&cfg.state_dir) != same(&d.cfg.state_dir) {
        return Err(Error::Usage(format!(
            "the config {} keeps its state in {}, not {}: run `heartbeat --config {} approve …` \
             (nothing was approved)",
            path.display(),
            cfg.state_dir.display(),
            d.cfg.state_dir.display(),
            path.display()
        )));
    }
    let by = d.by.clone();
    drop(d);
    Decider::open(cfg, by, ctx.clock)
}

/// The state for deciding, as the person at this terminal (`by: cli:<user>`).
/// Run approved approvals now and print what they did.
fn execute(d: &mut Decider, ctx: &Ctx, rows: &[&ApprovalRow], out: &mut Out) -> Result<u8> {
    match d.run_now(rows, &ctx.work)? {
        RunNow::Locked(holder) => {
            crate::error::say(&format!(
                "heartbeat: approved, but another run still holds the run lock after {}s (pid {}, since {}); the approval stands and runs at the next run",
                LOCK_WAIT.as_secs(),
                holder.pid.map_or("?".into(), |p| p.to_string()),
                holder.since.map_or("?".into(), show_local),
            ));
            Ok(exit::TASK_FAILED)
        }
        RunNow::Paused(pause) => {
            let until = match pause.until.as_deref().and_then(crate::store::parse_ts) {
                Some(t) => format!("until {}", show_local(t)),
                None => "until `heartbeat resume`".into(),
            };
            out.line(&format!(
                "approved, but heartbeat is paused {until} (by {}): nothing ran; the approval stands and runs at the first run after the pause",
                clean(&pause.by)
            ));
            Ok(exit::OK)
        }
        RunNow::Ran(report) => {
            if report.tasks.is_empty() {
                out.line("nothing ran: another process ran it already");
            }
            out.lines(crate::render::terminal::report(
                &report, false, true, &ctx.cwd,
            ));
            Ok(report.exit_code())
        }
    }
}

/// On a terminal: one pending approval at a time. `later` and `always` apply to every
/// yes given here, as on the command line.
fn walk(d: &mut Decider, ctx: &Ctx, out: &mut Out, later: bool, always: bool) -> Result<u8> {
    let pending = d.store.approvals(Some(ApprovalState::Pending))?;
    if pending.is_empty() {
        out.line("no pending approvals");
        return Ok(exit::OK);
    }
    let mut code = exit::OK;
    let total = pending.len();
    'rows: for (n, row) in pending.iter().enumerate() {
        // It may have been decided elsewhere while we were asking about another one.
        let Some(row) = d.store.approval(row.id)? else {
            continue;
        };
        if row.state != ApprovalState::Pending {
            continue;
        }
        out.line("");
        out.line(&format!(
            "[{}/{total}] {}",
            n + 1,
            super::describe(&row, &ctx.cwd)
        ));
        match under(ctx, &d.cfg, std::slice::from_ref(&row)) {
            Under::Same => {}
            Under::Switch(path) => {
                out.line(&format!(
                    "  queued under the config {}: approve it with `heartbeat --config {} \
                     approve {}`",
                    path.display(),
                    path.display(),
                    row.id
                ));
                continue;
            }
            Under::Refuse(why) => {
                out.line(&format!("  {why}"));
                continue;
            }
        }
        out.line(&format!("  queued {} ago", age(&row.created_at, d.now)));
        out.line("  input:");
        let pretty = serde_json::to_string_pretty(&row.input).unwrap_or_default();
        for line in pretty.lines() {
            out.line(&format!("    {}", clean(line)));
        }
        out.line(&format!(
            "  task: {}",
            Secrets::taken().redact(&row.text).first_line(200)
        ));
        loop {
            out.flush();
            let Some(answer) =
                ask("[y] approve and run  [a] always  [n] deny  [s] skip  [q] quit: ")?
            else {
                break 'rows;
            };
            match answer.trim().to_ascii_lowercase().chars().next() {
                Some(c @ ('y' | 'a')) => {
                    if !d.approve(&row, always || c == 'a')? {
                        out.line("  decided by someone else meanwhile");
                    } else if later {
                        out.line(&format!("  approved #{}; it runs at the next run", row.id));
                    } else {
                        let c = execute(d, ctx, &[&row], out)?;
                        code = code.max(c);
                    }
                    break;
                }
                Some('n') => {
                    out.flush();
                    let reason = ask("  reason (optional): ")?.unwrap_or_default();
                    let reason = reason.trim();
                    let reason = (!reason.is_empty()).then_some(reason);
                    if d.deny(&row, reason)? {
                        out.line(&format!("  denied #{}", row.id));
                    } else {
                        out.line("  decided by someone else meanwhile");
                    }
                    break;
                }
                Some('s') => break,
                Some('q') => break 'rows,
                _ => out.line("  please answer y, a, n, s or q"),
            }
        }
    }
    Ok(code)
}

/// How long ago an RFC 3339 time was, to the minute.
fn age(created_at: &str, now: DateTime<Utc>) -> String {
    let Some(t) = crate::store::parse_ts(created_at) else {
        return "?".into();
    };
    let secs = now.signed_duration_since(t).num_seconds().max(0) as u64;
    if secs < 60 {
        return format!("{secs}s");
    }
    humantime::format_duration(Duration::from_secs(secs / 60 * 60)).to_string()
}

/// Print a prompt and read one line; None at end of input. The prompt is written as
/// [`super::Out`] writes: through the one redaction step.
fn ask(prompt: &str) -> Result<Option<String>> {
    let prompt = crate::audit::Secrets::taken().redact(prompt);
    let mut stdout = std::io::stdout();
    let _ = write!(stdout, "{prompt}");
    let _ = stdout.flush();
    let mut line = String::new();
    let n = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::io("<stdin>", e))?;
    Ok((n > 0).then_some(line))
}

fn confirm(prompt: &str) -> Result<bool> {
    Ok(ask(prompt)?
        .map(|a| matches!(a.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
        .unwrap_or(false))
}
