//! `heartbeat metrics`: Prometheus text format 0.0.4 computed from the state dir
//! (docs/reference.md#metrics). Reads only; never creates the state dir.

use super::Ctx;
use crate::engine::metrics;
use crate::error::{Result, exit};

pub(crate) fn run(ctx: &Ctx) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let text = metrics::read(&cfg, ctx.now)?;
    let mut out = ctx.out();
    out.lines(text.lines().map(str::to_string));
    Ok(exit::OK)
}
