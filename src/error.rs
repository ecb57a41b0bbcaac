//! The errors that end a command, and the exit-code table of SPEC §8.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::markdown::FileError;
use crate::store::StoreError;

/// Exit codes (SPEC §8).
pub mod exit {
    /// Done; nothing failed (also: skipped outside active hours or because of the lock).
    pub const OK: u8 = 0;
    /// At least one task failed or was invalid.
    pub const TASK_FAILED: u8 = 1;
    /// Usage error, invalid config, unreadable or invalid HEARTBEAT.md: nothing run.
    pub const USAGE: u8 = 2;
}

/// Anything that stops a command before it could do its work. Printed as
/// `heartbeat: <what>: <why>`; every variant exits with [`exit::USAGE`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    File(#[from] FileError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        exit::USAGE
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
