//! `heartbeat status`: last run, pause, pending approvals, the day's spend, the outbox and
//! the run lock. Reads only; never creates the state dir.

use serde_json::{Value, json};

use super::{Ctx, Out};
use crate::cli::JsonArg;
use crate::config::Config;
use crate::engine::files::Loaded;
use crate::error::{Error, Result, exit};
use crate::lock;
use crate::render::show_local;
use crate::schedule::local_midnight;
use crate::store::{PauseRow, RunSummary};

/// What `status` shows, read once.
struct Facts {
    last_run: Option<RunSummary>,
    pending: i64,
    spent: f64,
    outbox: i64,
    pause: Option<PauseRow>,
    tripped: Vec<String>,
    /// One-time tasks held after an interrupted run.
    interrupted: Vec<String>,
    holder: Option<lock::Holder>,
    /// The daemon running on this state dir.
    daemon: Option<lock::Holder>,
    /// Until when Telegram asked not to be sent anything (HTTP 429), if that is still ahead.
    telegram_wait: Option<String>,
}

/// A held task (tripped, or interrupted) as a person finds it: its tool and place in the
/// files as they are now, when it is still there.
struct Held {
    task_id: String,
    tool: Option<String>,
    file: Option<std::path::PathBuf>,
    line: Option<usize>,
    /// The task's text, for a reminder.
    text: Option<String>,
}

/// The files as they are now; one that cannot be read is left out (`status` works whatever
/// state the files are in).
fn files_now(cfg: &Config) -> Vec<Loaded> {
    crate::engine::files::read_files(cfg, true).unwrap_or_default()
}

/// Look the held task ids up in the files.
fn place(cfg: &Config, files: &[Loaded], ids: &[String]) -> Vec<Held> {
    let tasks = crate::engine::files::all_tasks(files);
    ids.iter()
        .map(|id| {
            let task = tasks.iter().find(|t| &t.id == id);
            Held {
                task_id: id.clone(),
                tool: task
                    .and_then(|t| crate::plan::tool_call(t, cfg.plain_tasks).map(|(name, _)| name)),
                file: task.map(|t| t.file.to_path_buf()),
                line: task.map(|t| t.line),
                text: None,
            }
        })
        .collect()
}

/// One-time reminders already given and not ticked yet: they wait for the person.
fn reminded(
    cfg: &Config,
    files: &[Loaded],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Held>> {
    let snapshot = crate::engine::files::read_snapshot(cfg, now)?;
    if snapshot.reminded.is_empty() {
        return Ok(Vec::new());
    }
    Ok(crate::engine::files::all_tasks(files)
        .into_iter()
        .filter(|t| {
            t.section == crate::model::Section::OneTime
                && !t.done
                && snapshot.reminded.contains(&t.id)
                && crate::plan::tool_call(t, cfg.plain_tasks).is_none()
        })
        .map(|t| Held {
            task_id: t.id.clone(),
            tool: None,
            file: Some(t.file.to_path_buf()),
            line: Some(t.line),
            text: Some(crate::report::safe_text(t)),
        })
        .collect())
}

impl Held {
    fn json(&self) -> Value {
        json!({"task_id": self.task_id, "tool": self.tool, "file": self.file, "line": self.line})
    }

    /// `@shell HEARTBEAT.md:3 (task 0123abcd4567)`, or what of it is known.
    fn show(&self, cwd: &std::path::Path) -> String {
        let tool = self
            .tool
            .as_deref()
            .map_or(String::new(), |t| format!("@{t} "));
        match (&self.file, self.line) {
            (Some(file), Some(line)) => format!(
                "{tool}{}:{line} (task {})",
                crate::render::show_path(file, cwd),
                self.task_id
            ),
            _ => format!("{tool}task {} (not in the files any more)", self.task_id),
        }
    }
}

fn gather(ctx: &Ctx, cfg: &Config) -> Result<Facts> {
    let store = crate::store::open_existing(cfg)?;
    let interrupted = match &store {
        Some(s) => s.unsettled()?,
        None => Vec::new(),
    };
    let telegram_wait = match &store {
        Some(s) => s
            .meta(crate::engine::outbox::RETRY_AT_KEY)?
            .filter(|at| crate::store::parse_ts(at).is_some_and(|at| at > ctx.now)),
        None => None,
    };
    let (last_run, pending, spent, outbox, pause, tripped) = match &store {
        Some(s) => {
            // The budget day starts at local midnight in the configured zone.
            let midnight = local_midnight(cfg.tz(), ctx.now);
            // A timed pause that has ended no longer counts (the next run records it).
            let pause = s.pause_row()?.filter(|p: &PauseRow| p.in_force(ctx.now));
            (
                s.last_run()?,
                s.count_pending()?,
                s.spent_since(midnight)?,
                s.outbox_len()?,
                pause,
                s.tripped()?,
            )
        }
        None => (None, 0, 0.0, 0, None, Vec::new()),
    };
    let lock_path = cfg.state_dir.join(lock::LOCK_FILE);
    let holder = lock::probe(&cfg.state_dir).map_err(|e| Error::io(&lock_path, e))?;
    let daemon = lock::probe_daemon(&cfg.state_dir)
        .map_err(|e| Error::io(cfg.state_dir.join(lock::DAEMON_FILE), e))?;
    Ok(Facts {
        last_run,
        pending,
        spent,
        outbox,
        pause,
        tripped,
        interrupted,
        holder,
        daemon,
        telegram_wait,
    })
}

/// `status --json` (also the `status` tool of `heartbeat mcp`).
pub(super) fn json(ctx: &Ctx, cfg: &Config) -> Result<Value> {
    let f = gather(ctx, cfg)?;
    let files = files_now(cfg);
    Ok(json!({
        "paused": f.pause.is_some(),
        "paused_until": f.pause.as_ref().and_then(|p| p.until.clone()),
        "pause_reason": f.pause.as_ref().and_then(|p| p.reason.clone()),
        "paused_by": f.pause.as_ref().map(|p| p.by.clone()),
        "last_run": f.last_run.as_ref().map(|r| json!({
            "run_id": r.run_id,
            "at": r.started_at,
            "succeeded": r.succeeded,
            "failed": r.failed,
        })),
        "pending_approvals": f.pending,
        "budget": {"spent_usd": f.spent, "daily_usd": cfg.daily_usd},
        "tripped": f.tripped,
        "tripped_tasks": place(cfg, &files, &f.tripped).iter().map(Held::json).collect::<Vec<_>>(),
        "interrupted": f.interrupted,
        "interrupted_tasks": place(cfg, &files, &f.interrupted).iter().map(Held::json).collect::<Vec<_>>(),
        "reminded": reminded(cfg, &files, ctx.now)?
            .iter()
            .map(|r| json!({"task_id": r.task_id, "file": r.file, "line": r.line, "text": r.text}))
            .collect::<Vec<_>>(),
        "orphaned_grants": super::grants::orphaned(cfg, &files)?
            .iter()
            .map(|g| g.task_id.clone())
            .collect::<Vec<_>>(),
        "outbox": f.outbox,
        "lock": {
            "held": f.holder.is_some(),
            "pid": f.holder.as_ref().and_then(|h| h.pid),
            "since": f.holder.as_ref().and_then(|h| h.since).map(crate::audit::format_ts),
        },
        "daemon": {
            "running": f.daemon.is_some(),
            "pid": f.daemon.as_ref().and_then(|h| h.pid),
            "since": f.daemon.as_ref().and_then(|h| h.since).map(crate::audit::format_ts),
            "next_tick": f.daemon.as_ref().and_then(|h| h.next).map(crate::audit::format_ts),
        },
        "state_dir": cfg.state_dir,
    }))
}

pub fn run(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let mut out = Out::new();
    if args.json {
        out.json(&json(ctx, &cfg)?);
        return Ok(exit::OK);
    }
    let Facts {
        last_run,
        pending,
        spent,
        outbox,
        pause,
        tripped,
        interrupted,
        holder,
        daemon,
        telegram_wait,
    } = gather(ctx, &cfg)?;
    let files = files_now(&cfg);
    out.line(&format!("state dir:   {}", cfg.state_dir.display()));
    out.line(&match &last_run {
        Some(r) => format!(
            "last run:    {} at {} ({} succeeded, {} failed)",
            r.run_id, r.started_at, r.succeeded, r.failed
        ),
        None => "last run:    never".into(),
    });
    out.line(&match &pause {
        Some(p) => format!(
            "paused:      since {} {} by {}{}",
            p.since,
            p.until
                .as_ref()
                .map_or("until `heartbeat resume`".into(), |u| format!("until {u}")),
            p.by,
            p.reason
                .as_ref()
                .map_or(String::new(), |r| format!(" ({})", crate::text::clean(r)))
        ),
        None => "paused:      no".into(),
    });
    out.line(&format!(
        "pending:     {pending} approval(s){}",
        if pending > 0 {
            " (heartbeat approvals)"
        } else {
            ""
        }
    ));
    out.line(&if cfg.daily_usd > 0.0 {
        format!("spent today: ${spent:.2} of ${:.2}", cfg.daily_usd)
    } else {
        format!("spent today: ${spent:.2} (no budget set)")
    });
    for held in place(&cfg, &files, &tripped) {
        out.line(&format!(
            "tripped:     {}: failed too often in a row; fix it, then `heartbeat reset {}`",
            held.show(&ctx.cwd),
            held.task_id
        ));
    }
    for held in place(&cfg, &files, &interrupted) {
        out.line(&format!(
            "interrupted: {}: its run stopped before its outcome was recorded; check what it \
             did, then `heartbeat reset {}` (or approve its approval)",
            held.show(&ctx.cwd),
            held.task_id
        ));
    }
    for r in reminded(&cfg, &files, ctx.now)? {
        out.line(&format!(
            "reminded:    {}:{} {} (given; tick it when done)",
            r.file
                .as_deref()
                .map_or(String::new(), |f| crate::render::show_path(f, &ctx.cwd)),
            r.line.unwrap_or(0),
            crate::audit::Secrets::taken()
                .redact(r.text.as_deref().unwrap_or(""))
                .first_line(80)
        ));
    }
    for g in super::grants::orphaned(&cfg, &files)? {
        out.line(&format!(
            "warning:     {}",
            super::grants::orphan_message(&g)
        ));
    }
    out.line(&format!(
        "outbox:      {outbox} message(s) waiting{}",
        telegram_wait.map_or(String::new(), |at| format!(
            " (Telegram asked heartbeat to wait until {at})"
        ))
    ));
    out.line(&match holder {
        Some(h) => format!(
            "lock:        held by pid {} since {}",
            h.pid.map_or("?".into(), |p| p.to_string()),
            h.since.map_or("?".into(), show_local)
        ),
        None => "lock:        free".into(),
    });
    if let Some(d) = daemon {
        out.line(&format!(
            "daemon:      pid {} since {}",
            d.pid.map_or("?".into(), |p| p.to_string()),
            d.since.map_or("?".into(), show_local)
        ));
        if let Some(next) = d.next {
            out.line(&format!("next tick:   {}", show_local(next)));
        }
    }
    Ok(exit::OK)
}
