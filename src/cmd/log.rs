//! `heartbeat log`: the audit log, filtered. (Being written.)

use super::Ctx;
use crate::cli::LogArgs;
use crate::error::{Error, Result};

pub fn run(_ctx: &Ctx, _args: &LogArgs) -> Result<u8> {
    Err(Error::Usage("heartbeat log is not built yet".into()))
}
