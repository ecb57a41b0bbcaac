//! `heartbeat grants` / `heartbeat revoke TASK_ID`: the always-grants, tasks that run without
//! asking because a person approved them with *always*.

use std::path::Path;

use super::Ctx;
use crate::audit::Event;
use crate::audit::Secrets;
use crate::cli::JsonArg;
use crate::engine::query::{self, Grant};
use crate::error::{Error, Result, exit};

pub(crate) fn list(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let grants = query::grants(&cfg)?;
    let mut out = ctx.out();
    if args.json {
        out.json(&query::grants_json(&grants));
        return Ok(exit::OK);
    }
    if grants.is_empty() {
        out.line("no grants");
    }
    for Grant { row: g, orphaned } in &grants {
        let place = match g.line {
            Some(line) => format!(
                "{}:{line}",
                crate::render::show_path(Path::new(&g.file), &ctx.cwd)
            ),
            None => crate::render::show_path(Path::new(&g.file), &ctx.cwd),
        };
        let orphaned = if *orphaned {
            " ORPHANED: no task matches it any more (edited or removed)"
        } else {
            ""
        };
        out.line(&format!(
            "{}  @{:<12} {place}  {}  (by {} at {}){orphaned}",
            g.task_id,
            g.tool,
            Secrets::taken().redact(&g.input.to_string()).first_line(80),
            g.created_by,
            super::show_stored(&g.created_at, &cfg)
        ));
    }
    Ok(exit::OK)
}

pub(crate) fn revoke(ctx: &Ctx, task_id: &str) -> Result<u8> {
    let mut d = ctx.decider()?;
    let granted: Vec<String> = d.store.grants()?.into_iter().map(|g| g.task_id).collect();
    let task_id = super::resolve_task_id(task_id, &granted, "`heartbeat grants` and `check`")?;
    if !d.store.revoke(&task_id)? {
        return Err(Error::Usage(format!(
            "no grant for task {task_id} (see `heartbeat grants`)"
        )));
    }
    let by = d.by.clone();
    d.record(&Event::GrantRevoked {
        task_id: &task_id,
        by: &by,
    })?;
    ctx.out().line(&format!(
        "revoked the grant of task {task_id}; it asks again"
    ));
    Ok(exit::OK)
}
