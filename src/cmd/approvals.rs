//! `heartbeat approvals`: list approvals (pending by default). Reads only.

use super::Ctx;
use crate::audit::Secrets;
use crate::cli::ApprovalsArgs;
use crate::engine::query;
use crate::error::{Result, exit};

pub(crate) fn run(ctx: &Ctx, args: &ApprovalsArgs) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let rows = query::approvals(&cfg, args.state.as_state())?;
    let mut out = ctx.out();
    if args.json {
        out.json(&query::approvals_json(&rows));
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        out.line("no approvals");
        return Ok(exit::OK);
    }
    for r in &rows {
        out.line(&format!(
            "#{:<4} {:<9} @{:<12} {}:{}  {}  (since {}){}{}",
            r.id,
            r.state,
            r.tool,
            r.file,
            r.line,
            Secrets::taken().redact(&r.input.to_string()).first_line(80),
            super::show_stored(&r.created_at, &cfg),
            r.retry_at
                .as_ref()
                .map(|at| format!(" (retry at {})", super::show_stored(at, &cfg)))
                .unwrap_or_default(),
            super::proposal_note(r)
        ));
    }
    Ok(exit::OK)
}
