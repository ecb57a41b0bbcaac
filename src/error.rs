//! The errors that end a command; the exit-code table of docs/reference.md#exit-codes is
//! [`crate::exit`], re-exported here.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::markdown::FileError;
use crate::store::StoreError;
use crate::text::Redacted;

/// The exit-code table and whether work has started live in [`crate::exit`], below the
/// modules that need them without this error type (`report`, the engine); the commands take
/// them from here with [`Error`].
pub(crate) use crate::exit::{self, WorkStarted};

/// Anything that stops a command. Printed as `heartbeat: <what>: <why>`; exits with
/// [`WorkStarted::failure_code`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
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
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// A line on stderr: a redaction step. The line goes through the one redaction step
/// ([`crate::redact::Secrets::redact`], with every secret this process took), and only the
/// [`Redacted`] text it makes is written ([`say_redacted`]): errors and warnings can carry a
/// server's answer, a URL or a tool's output.
pub(crate) fn say(line: &str) {
    say_redacted(&crate::redact::Secrets::taken().redact(line));
}

/// A line on stderr, already redacted: standard error is a sink, and takes only that.
pub(crate) fn say_redacted(line: &Redacted) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
