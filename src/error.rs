//! The errors that end a command, and the exit-code table of docs/reference.md#exit-codes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::ConfigError;
use crate::markdown::FileError;
use crate::store::StoreError;
use crate::text::Redacted;

/// Exit codes (docs/reference.md#exit-codes).
pub mod exit {
    /// Done; nothing failed (also: skipped outside active hours or because of the lock).
    pub const OK: u8 = 0;
    /// At least one task failed, was invalid or tripped; or an error after work had started.
    pub const TASK_FAILED: u8 = 1;
    /// Usage error, invalid config, unreadable or invalid HEARTBEAT.md: nothing run.
    pub const USAGE: u8 = 2;
}

/// What decides the exit code of an error that ends a command (docs/reference.md#exit-codes):
/// whether work had started. One per command, made by `app.rs` and handed to whatever starts
/// tools (a run's session, through `Tick` and `Decider::run_now`); a clone shares the flag.
#[derive(Clone, Debug, Default)]
pub struct WorkStarted(Arc<AtomicBool>);

impl WorkStarted {
    /// Called by whatever starts a tool: from then on an error is not "nothing run".
    pub fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// The exit code of an error now: [`exit::USAGE`] while nothing has run, else
    /// [`exit::TASK_FAILED`] (a state or I/O failure after tools ran must not say "nothing
    /// run").
    pub fn failure_code(&self) -> u8 {
        if self.0.load(Ordering::SeqCst) {
            exit::TASK_FAILED
        } else {
            exit::USAGE
        }
    }
}

/// Anything that stops a command. Printed as `heartbeat: <what>: <why>`; exits with
/// [`WorkStarted::failure_code`].
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
    /// A tool ran and its outcome could not be stored (in SQLite, or then in the audit log):
    /// the run stops and says which task did its work (a one-time task whose outcome SQLite
    /// lacks is reported `interrupted` by the next run, never run again by itself).
    #[error("{task} ran, but {what}: {source}")]
    Unrecorded {
        task: String,
        what: &'static str,
        source: Box<Error>,
    },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// A line on stderr: a redaction step. The line goes through the one redaction step
/// ([`crate::audit::Secrets::redact`], with every secret this process took), and only the
/// [`Redacted`] text it makes is written ([`say_redacted`]): errors and warnings can carry a
/// server's answer, a URL or a tool's output.
pub fn say(line: &str) {
    say_redacted(&crate::audit::Secrets::taken().redact(line));
}

/// A line on stderr, already redacted: standard error is a sink, and takes only that.
pub fn say_redacted(line: &Redacted) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_nothing_ran_until_work_started_in_any_clone() {
        let work = WorkStarted::default();
        assert_eq!(work.failure_code(), exit::USAGE);
        let session = work.clone();
        session.set();
        assert_eq!(work.failure_code(), exit::TASK_FAILED);
        assert_eq!(WorkStarted::default().failure_code(), exit::USAGE);
    }
}
