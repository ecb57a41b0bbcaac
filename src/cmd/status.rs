//! `heartbeat status`: last run, pause, pending approvals, the day's spend, the outbox and
//! the run lock. Reads only; never creates the state dir.

use serde_json::json;

use super::{Ctx, Out};
use crate::cli::JsonArg;
use crate::error::{Error, Result, exit};
use crate::lock;
use crate::render::show_local;
use crate::schedule::local_midnight;
use crate::store::{PauseRow, Store};

pub fn run(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config(&[])?;
    let store = Store::open_existing(&cfg.state_dir)?;
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

    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "paused": pause.is_some(),
            "paused_until": pause.as_ref().and_then(|p| p.until.clone()),
            "pause_reason": pause.as_ref().and_then(|p| p.reason.clone()),
            "last_run": last_run.as_ref().map(|r| json!({
                "run_id": r.run_id,
                "at": r.started_at,
                "succeeded": r.succeeded,
                "failed": r.failed,
            })),
            "pending_approvals": pending,
            "budget": {"spent_usd": spent, "daily_usd": cfg.daily_usd},
            "tripped": tripped,
            "outbox": outbox,
            "lock": {
                "held": holder.is_some(),
                "pid": holder.as_ref().and_then(|h| h.pid),
                "since": holder.as_ref().and_then(|h| h.since).map(crate::audit::format_ts),
            },
            "state_dir": cfg.state_dir,
        }));
        return Ok(exit::OK);
    }
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
    if !tripped.is_empty() {
        out.line(&format!(
            "tripped:     {} (heartbeat reset TASK_ID)",
            tripped.join(", ")
        ));
    }
    out.line(&format!("outbox:      {outbox} message(s) waiting"));
    out.line(&match holder {
        Some(h) => format!(
            "lock:        held by pid {} since {}",
            h.pid.map_or("?".into(), |p| p.to_string()),
            h.since.map_or("?".into(), show_local)
        ),
        None => "lock:        free".into(),
    });
    Ok(exit::OK)
}
