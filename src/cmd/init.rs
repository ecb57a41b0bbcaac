//! `heartbeat init [DIR]`: a commented HEARTBEAT.md and heartbeat.toml. (Being written.)

use std::path::Path;

use super::Ctx;
use crate::error::{Error, Result};

pub fn run(_ctx: &Ctx, _dir: Option<&Path>) -> Result<u8> {
    Err(Error::Usage("heartbeat init is not built yet".into()))
}
