//! `heartbeat approvals`: list approvals (pending by default). Reads only.

use serde_json::{Value, json};

use super::{Ctx, Out};
use crate::audit::Secrets;
use crate::cli::ApprovalsArgs;
use crate::config::Config;
use crate::error::{Result, exit};
use crate::store::ApprovalRow;

/// `approvals --json` of these rows (also the `approvals` tool of `heartbeat mcp`).
pub(super) fn json(rows: &[ApprovalRow]) -> Value {
    let list: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "task_id": r.task_id,
                "state": r.state,
                "tool": r.tool,
                "input": r.input,
                "file": r.file,
                "line": r.line,
                "section": r.section,
                "text": r.text,
                "created_at": r.created_at,
                "decided_at": r.decided_at,
                "decided_by": r.decided_by,
                "reason": r.reason,
                "config": r.config,
            })
        })
        .collect();
    Value::Array(list)
}

/// The approvals in `state` (None: all), from a state dir that may not exist yet.
pub(super) fn rows(
    cfg: &Config,
    state: Option<crate::model::ApprovalState>,
) -> Result<Vec<ApprovalRow>> {
    Ok(match crate::store::open_existing(cfg)? {
        Some(store) => store.approvals(state)?,
        None => Vec::new(),
    })
}

pub fn run(ctx: &Ctx, args: &ApprovalsArgs) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let rows = rows(&cfg, args.state.as_state())?;
    let mut out = Out::new();
    if args.json {
        out.json(&json(&rows));
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        out.line("no approvals");
        return Ok(exit::OK);
    }
    for r in &rows {
        out.line(&format!(
            "#{:<4} {:<9} @{:<12} {}:{}  {}  (since {}){}",
            r.id,
            r.state,
            r.tool,
            r.file,
            r.line,
            Secrets::taken().redact(&r.input.to_string()).first_line(80),
            r.created_at,
            super::approve::proposal_note(r)
        ));
    }
    Ok(exit::OK)
}
