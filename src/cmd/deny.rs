//! `heartbeat deny`: a person says no. The task is not queued again until `approval_ttl`
//! has passed since the denial (a changed task is a new task and asks again).

use super::Ctx;
use super::describe;
use crate::cli::DenyArgs;
use crate::error::{Result, exit};
use crate::model::ApprovalState;

pub(crate) fn run(ctx: &Ctx, args: &DenyArgs) -> Result<u8> {
    let mut d = ctx.decider()?;
    let mut out = ctx.out();
    let targets = if args.all {
        d.store.approvals(Some(ApprovalState::Pending))?
    } else {
        d.decidable_by_id(&args.ids, false)?
    };
    if targets.is_empty() {
        out.line("no pending approvals");
        return Ok(exit::OK);
    }
    for row in &targets {
        if d.deny(row, args.reason.as_deref())? {
            out.line(&format!("denied {}", describe(row, &ctx.cwd)));
        } else {
            out.line(&format!(
                "#{} was decided by someone else meanwhile",
                row.id
            ));
        }
    }
    Ok(exit::OK)
}
