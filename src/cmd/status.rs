//! `heartbeat status`: last run, the next task due, pause, pending (and expiring) approvals,
//! reminders given, the day's spend, the outbox and the run lock. Reads only; never creates
//! the state dir.

use super::Ctx;
use crate::cli::JsonArg;
use crate::engine::query::{self, Held, Status};
use crate::error::{Result, exit};
use crate::render::show_local;

/// `@shell HEARTBEAT.md:3 (task 0123abcd4567)`, or what of it is known.
fn show(held: &Held, cwd: &std::path::Path) -> String {
    let tool = held
        .tool
        .as_deref()
        .map_or(String::new(), |t| format!("@{t} "));
    match (&held.file, held.line) {
        (Some(file), Some(line)) => format!(
            "{tool}{}:{line} (task {})",
            crate::render::show_path(file, cwd),
            held.task_id
        ),
        _ => format!("{tool}task {} (not in the files any more)", held.task_id),
    }
}

pub(crate) fn run(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let mut out = ctx.out();
    let status = query::status(&cfg, ctx.now)?;
    if args.json {
        out.json(&status.json());
        return Ok(exit::OK);
    }
    let Status {
        state_dir,
        daily_usd,
        last_run,
        pending,
        spent,
        outbox,
        pause,
        tripped,
        interrupted,
        reminded,
        orphaned_grants,
        snoozed,
        holder,
        daemon,
        telegram_wait,
        channels,
        fleet,
        expiring,
        next_due,
    } = status;
    out.line(&format!("state dir:   {}", state_dir.display()));
    out.line(&match &last_run {
        Some(r) => match crate::store::parse_ts(&r.started_at) {
            Some(at) => format!(
                "last run:    {} at {} ({} ago; {} succeeded, {} failed)",
                r.run_id,
                super::show_time(at, &cfg),
                crate::render::ago(at, ctx.now),
                r.succeeded,
                r.failed
            ),
            None => format!(
                "last run:    {} at {} ({} succeeded, {} failed)",
                r.run_id, r.started_at, r.succeeded, r.failed
            ),
        },
        None => {
            "last run:    never (set up cron or a timer: `heartbeat init` prints the line)".into()
        }
    });
    out.line(&match &next_due {
        Some((held, at)) if *at <= ctx.now => {
            format!(
                "next due:    {} now (the next run takes it)",
                show(held, &ctx.cwd)
            )
        }
        Some((held, at)) => format!(
            "next due:    {} at {} (in {})",
            show(held, &ctx.cwd),
            super::show_time(*at, &cfg),
            crate::render::ago(ctx.now, *at)
        ),
        None => "next due:    none".into(),
    });
    out.line(&match &pause {
        Some(p) => format!(
            "paused:      since {} {} by {}{}",
            super::show_stored(&p.since, &cfg),
            p.until
                .as_ref()
                .map_or("until `heartbeat resume`".into(), |u| format!(
                    "until {}",
                    super::show_stored(u, &cfg)
                )),
            p.by,
            p.reason
                .as_ref()
                .map_or(String::new(), |r| format!(" ({})", crate::text::clean(r)))
        ),
        None => "paused:      no".into(),
    });
    // An approval past its TTL is no longer approvable: expiring, not pending.
    let pending = (pending - expiring).max(0);
    out.line(&format!(
        "pending:     {pending} approval(s){}{}",
        if pending > 0 {
            " (heartbeat approvals)"
        } else {
            ""
        },
        if expiring > 0 {
            format!("; {expiring} expiring (past approval_ttl: the next run expires them)")
        } else {
            String::new()
        }
    ));
    out.line(&format!(
        "reminders:   {} given, waiting to be ticked",
        reminded.len()
    ));
    out.line(&if daily_usd > 0.0 {
        format!("spent today: ${spent:.2} of ${daily_usd:.2}")
    } else {
        format!("spent today: ${spent:.2} (no budget set)")
    });
    for held in &tripped {
        out.line(&format!(
            "tripped:     {}: failed too often in a row; fix it, then `heartbeat reset {}`",
            show(held, &ctx.cwd),
            held.task_id
        ));
    }
    for held in &interrupted {
        out.line(&format!(
            "interrupted: {}: its run stopped before its outcome was recorded; check what it \
             did, then `heartbeat reset {}` (or approve its approval)",
            show(held, &ctx.cwd),
            held.task_id
        ));
    }
    for r in &reminded {
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
    for s in &snoozed {
        out.line(&format!(
            "snoozed:     {}:{} (task {}) until {} by {}{}; `heartbeat unsnooze {}` ends it",
            crate::render::show_path(std::path::Path::new(&s.file), &ctx.cwd),
            s.line,
            s.task_id,
            crate::render::show_time(s.until, cfg.tz()),
            s.by,
            s.reason
                .as_ref()
                .map_or(String::new(), |r| format!(" ({})", crate::text::clean(r))),
            s.task_id
        ));
    }
    for g in &orphaned_grants {
        out.line(&format!("warning:     {}", query::orphan_message(g)));
    }
    out.line(&format!(
        "outbox:      {outbox} message(s) waiting{}",
        telegram_wait.map_or(String::new(), |at| format!(
            " (Telegram asked heartbeat to wait until {at})"
        ))
    ));
    for failure in channels.iter().filter_map(|c| c.failure()) {
        out.line(&format!("warning:     {failure}"));
    }
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
    if let Some(fleet) = fleet {
        for n in &fleet.nodes {
            out.line(&format!(
                "node:        {} (host {}, heartbeat {}) last seen {} ({} ago)",
                n.name,
                n.host,
                n.version,
                crate::render::show_time(n.last_seen, cfg.tz()),
                crate::render::ago(n.last_seen, chrono::Utc::now()),
            ));
        }
        for w in &fleet.warnings {
            out.line(&format!("warning:     {w}"));
        }
        for r in fleet.recent.iter().take(5) {
            let at =
                crate::store::parse_ts(&r.at).map_or(r.at.clone(), |t| super::show_time(t, &cfg));
            out.line(&format!(
                "recent:      task {} {} on {} at {at}",
                r.task_id, r.outcome, r.node
            ));
        }
    }
    Ok(exit::OK)
}
