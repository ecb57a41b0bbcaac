//! `heartbeat grants` / `heartbeat revoke TASK_ID`: the always-grants, tasks that run without
//! asking because a person approved them with *always*.

use serde_json::{Value, json};

use super::{Ctx, Out};
use crate::audit::Event;
use crate::audit::Secrets;
use crate::cli::JsonArg;
use crate::error::{Error, Result, exit};
use crate::store::Store;

pub fn list(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let grants = match Store::open_existing(&cfg.state_dir)? {
        Some(store) => store.grants()?,
        None => Vec::new(),
    };
    let mut out = Out::new();
    if args.json {
        let list: Vec<Value> = grants
            .iter()
            .map(|g| {
                json!({
                    "task_id": g.task_id,
                    "tool": g.tool,
                    "input": g.input,
                    "file": g.file,
                    "text": g.text,
                    "created_at": g.created_at,
                    "created_by": g.created_by,
                    "approval_id": g.approval_id,
                })
            })
            .collect();
        out.json(&Value::Array(list));
        return Ok(exit::OK);
    }
    if grants.is_empty() {
        out.line("no grants");
    }
    for g in &grants {
        out.line(&format!(
            "{}  @{:<12} {}  {}  (by {} at {})",
            g.task_id,
            g.tool,
            g.file,
            Secrets::taken().redact(&g.input.to_string()).first_line(80),
            g.created_by,
            g.created_at
        ));
    }
    Ok(exit::OK)
}

pub fn revoke(ctx: &Ctx, task_id: &str) -> Result<u8> {
    let mut d = super::approve::decider(ctx)?;
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
    Out::new().line(&format!(
        "revoked the grant of task {task_id}; it asks again"
    ));
    Ok(exit::OK)
}
