//! `heartbeat pause [--for D] [--reason …]` / `heartbeat resume`: stored in SQLite, audited
//! (`paused` / `resumed`), honoured by `run --once` and the daemon (unless `--force`).

use super::Ctx;
use crate::cli::PauseArgs;
use crate::engine::bot;
use crate::error::{Result, exit};

pub(crate) fn pause(ctx: &Ctx, args: &PauseArgs) -> Result<u8> {
    let mut d = ctx.decider()?;
    let until = match args.for_ {
        None => None,
        Some(dur) => Some(bot::pause_end(d.now, dur).ok_or_else(|| {
            crate::error::Error::Usage(format!(
                "--for {}: too long; leave --for out to pause until `heartbeat resume`",
                humantime::format_duration(dur)
            ))
        })?),
    };
    bot::pause(&mut d, until, args.reason.as_deref())?;
    let mut out = ctx.out();
    out.line(&match until {
        Some(u) => format!(
            "paused until {}; `heartbeat resume` ends it sooner",
            crate::render::show_time(u, d.cfg.tz())
        ),
        None => "paused until `heartbeat resume`".into(),
    });
    Ok(exit::OK)
}

pub(crate) fn resume(ctx: &Ctx) -> Result<u8> {
    let mut d = ctx.decider()?;
    let resumed = bot::resume(&mut d, "resumed")?;
    ctx.out()
        .line(if resumed { "resumed" } else { "not paused" });
    Ok(exit::OK)
}
