//! `heartbeat reset TASK_ID`: clear a task's failure count, so a tripped task runs again, and
//! release a one-time task held after an interrupted run.

use super::Ctx;
use crate::error::{Error, Result, exit};

pub(crate) fn run(ctx: &Ctx, task_id: &str) -> Result<u8> {
    let mut d = ctx.decider()?;
    let known = d.store.task_ids()?;
    let task_id = super::resolve_task_id(task_id, &known, "`heartbeat check` and `status`")?;
    let Some((failures, tripped, interrupted)) = d.reset_task(&task_id)? else {
        return Err(Error::Usage(format!(
            "heartbeat has no record of task {task_id} (see `heartbeat check`)"
        )));
    };
    ctx.out().line(&if interrupted {
        format!(
            "task {task_id} released: its interrupted run is forgotten and it runs again when \
             due (check first whether the interrupted run did its work)"
        )
    } else if tripped {
        format!("task {task_id} reset ({failures} failures in a row); it runs again when due")
    } else {
        format!("task {task_id} was not tripped ({failures} failures in a row); count cleared")
    });
    Ok(exit::OK)
}
