//! `heartbeat snooze TASK_ID --for D | --until TIME [--reason TEXT]` and `heartbeat unsnooze
//! TASK_ID` (docs/reference.md#snooze): stored in SQLite, audited (`task_snoozed`,
//! `task_unsnoozed`); the HEARTBEAT.md is not touched.

use super::Ctx;
use crate::audit::event::Snooze;
use crate::audit::{Event, format_ts};
use crate::cli::SnoozeArgs;
use crate::engine::files::{all_tasks, read_files};
use crate::error::{Error, Result, exit};
use crate::render::show_path;
use crate::store::NewSnooze;
use crate::text::Redacted;

pub(crate) fn snooze(ctx: &Ctx, args: &SnoozeArgs) -> Result<u8> {
    let mut d = ctx.decider()?;
    let files = read_files(&d.cfg, false)?;
    let tasks = all_tasks(&files);
    let task = super::find_task(&args.task_id, &tasks, &ctx.cwd)?;
    let until = match (args.for_, args.until) {
        (Some(dur), _) => crate::engine::bot::pause_end(d.now, dur).ok_or_else(|| {
            Error::Usage(format!(
                "--for {}: too long",
                humantime::format_duration(dur)
            ))
        })?,
        (None, Some(when)) => when.instant(d.cfg.tz()),
        (None, None) => return Err(Error::Usage("snooze needs --for or --until".into())),
    };
    if until <= d.now {
        return Err(Error::Usage(format!(
            "the snooze would end at {}, which is not later than now",
            super::show_time(until, &d.cfg)
        )));
    }
    let reason: Option<Redacted> = args.reason.as_deref().map(|r| d.audit.secrets().redact(r));
    let by = d.by.clone();
    let file = task.file.display().to_string();
    d.store.snooze(
        &NewSnooze {
            task_id: &task.id,
            file: &file,
            line: task.line,
            until,
            reason: reason.as_ref(),
            by: &by,
        },
        d.now,
    )?;
    d.record(&Event::TaskSnoozed(Snooze {
        task_id: &task.id,
        file: &file,
        line: task.line as i64,
        by: &by,
        until: &format_ts(until),
        reason: reason.as_ref(),
    }))?;
    ctx.out().line(&format!(
        "task {} ({}:{}) snoozed until {}; `heartbeat unsnooze {}` ends it sooner",
        task.id,
        show_path(&task.file, &ctx.cwd),
        task.line,
        super::show_time(until, &d.cfg),
        task.id
    ));
    Ok(exit::OK)
}

pub(crate) fn unsnooze(ctx: &Ctx, raw: &str) -> Result<u8> {
    let mut d = ctx.decider()?;
    // Found among the snoozes in force: also a task since edited or removed from its file.
    let snoozed: Vec<String> = d
        .store
        .snoozes(d.now)?
        .into_iter()
        .map(|s| s.task_id)
        .collect();
    let id = super::resolve_task_id(raw, &snoozed, "`heartbeat check` and `status`")?;
    let Some(row) = d.store.unsnooze(&id, d.now)? else {
        return Err(Error::Usage(format!(
            "task {id} is not snoozed (see `heartbeat status`)"
        )));
    };
    let by = d.by.clone();
    // Stored redacted; through the redaction step again, as every text a sink takes.
    let reason = row.reason.as_deref().map(|r| d.audit.secrets().redact(r));
    d.record(&Event::TaskUnsnoozed(Snooze {
        task_id: &row.task_id,
        file: &row.file,
        line: row.line,
        by: &by,
        until: &format_ts(row.until),
        reason: reason.as_ref(),
    }))?;
    ctx.out().line(&format!(
        "task {} unsnoozed; it runs again when due",
        row.task_id
    ));
    Ok(exit::OK)
}
