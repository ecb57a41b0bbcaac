//! `heartbeat status`: last run, pending approvals, the day's spend and the run lock.
//! Reads only; never creates the state dir.

use chrono::{TimeZone, Utc};
use serde_json::json;

use super::{Ctx, Out, show_local};
use crate::cli::JsonArg;
use crate::error::{Error, Result, exit};
use crate::lock;
use crate::store::Store;

pub fn run(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config(&[])?;
    let store = Store::open_existing(&cfg.state_dir)?;
    let (last_run, pending, spent) = match &store {
        Some(s) => {
            // The budget day starts at local midnight in the configured zone.
            let local = ctx.now.with_timezone(&cfg.tz()).date_naive();
            let midnight = local
                .and_hms_opt(0, 0, 0)
                .and_then(|t| cfg.tz().from_local_datetime(&t).earliest())
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(ctx.now);
            (s.last_run()?, s.count_pending()?, s.spent_since(midnight)?)
        }
        None => (None, 0, 0.0),
    };
    let lock_path = cfg.state_dir.join(lock::LOCK_FILE);
    let holder = lock::probe(&cfg.state_dir).map_err(|e| Error::io(&lock_path, e))?;

    let mut out = Out::new();
    if args.json {
        out.json(&json!({
            "paused": false,
            "paused_until": null,
            "last_run": last_run.as_ref().map(|r| json!({
                "run_id": r.run_id,
                "at": r.started_at,
                "succeeded": r.succeeded,
                "failed": r.failed,
            })),
            "pending_approvals": pending,
            "budget": {"spent_usd": spent, "daily_usd": 0.0},
            "tripped": [],
            "outbox": 0,
            "lock": {
                "held": holder.is_some(),
                "pid": holder.as_ref().and_then(|h| h.pid),
                "since": holder.as_ref().and_then(|h| h.since).map(crate::audit::format_ts),
            },
            "state_dir": cfg.state_dir,
        }));
        return Ok(exit::OK);
    }
    out.line(&format!("state dir:  {}", cfg.state_dir.display()));
    out.line(&match &last_run {
        Some(r) => format!(
            "last run:   {} at {} ({} succeeded, {} failed)",
            r.run_id, r.started_at, r.succeeded, r.failed
        ),
        None => "last run:   never".into(),
    });
    out.line(&format!(
        "pending:    {pending} approval(s){}",
        if pending > 0 {
            " (heartbeat approvals)"
        } else {
            ""
        }
    ));
    out.line(&format!("spent today: ${spent:.2} (no budget set)"));
    out.line(&match holder {
        Some(h) => format!(
            "lock:       held by pid {} since {}",
            h.pid.map_or("?".into(), |p| p.to_string()),
            h.since.map_or("?".into(), show_local)
        ),
        None => "lock:       free".into(),
    });
    Ok(exit::OK)
}
