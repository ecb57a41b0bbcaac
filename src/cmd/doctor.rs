//! `heartbeat doctor [--since D] [--deep] [--json]` (docs/reference.md#doctor): the checks
//! of `engine/doctor.rs`, one line each, with the advice below those that are not ok.
//! Writes nothing. Exits 0 when nothing failed, 1 when something did, 2 when it could not
//! check (no state dir, a config that does not load).

use super::Ctx;
use crate::cli::DoctorArgs;
use crate::clock::{SINCE_FORMS, Since, TIME_FORMS};
use crate::engine::doctor::{self, Ask, Status};
use crate::error::{Error, Result};

pub(crate) fn run(ctx: &Ctx, args: &DoctorArgs) -> Result<u8> {
    let cfg = ctx.load_config(&[])?;
    let Some(since) = Since::parse(&args.since) else {
        return Err(Error::Usage(format!(
            "--since: {:?} is not a time: expected {SINCE_FORMS}, or {TIME_FORMS}",
            crate::text::clean(&args.since)
        )));
    };
    let since = since
        .start(ctx.now, cfg.tz())
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let facts = doctor::read(
        &cfg,
        &Ask {
            now: ctx.now,
            since,
            deep: args.deep,
            cwd: &ctx.cwd,
        },
    );
    let checks = match facts {
        Ok(facts) => doctor::judge(&facts),
        // A fleet whose database cannot be reached: that is the finding (exit 1).
        Err(Error::Store(e @ crate::store::StoreError::Unavailable { .. })) => {
            vec![doctor::store_unreachable(&e.to_string())]
        }
        Err(e) => return Err(e),
    };
    let mut out = ctx.out();
    if args.json {
        out.json(&doctor::json(&checks));
    } else {
        for c in &checks {
            out.line(&format!(
                "{:<6}{:<12}{}",
                c.status.as_str(),
                c.id,
                crate::text::clean(&c.message)
            ));
            if c.status != Status::Ok
                && let Some(advice) = &c.advice
            {
                out.line(&format!("{:18}{}", "", crate::text::clean(advice)));
            }
        }
    }
    Ok(doctor::exit_code(&checks))
}
