//! HEARTBEAT.md: reading with limits, parsing into tasks, ticking one-time tasks.
//! OWNER: markdown helper. Signatures are the contract; bodies to be written.

pub mod parse;
pub mod tick;

use std::path::{Path, PathBuf};

pub use parse::parse;

/// Files larger than this are refused.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: no such file", .0.display())]
    Missing(PathBuf),
    #[error("{}: file is {size} bytes, larger than the 8 MiB limit", .path.display())]
    TooLarge { path: PathBuf, size: u64 },
    #[error("{}:{line}: not valid UTF-8", .path.display())]
    NotUtf8 { path: PathBuf, line: usize },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A HEARTBEAT.md read from disk.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// As the user named it, made absolute (not symlink-resolved).
    pub path: PathBuf,
    /// Symlinks resolved: used for task ids and as the rewrite target.
    pub canonical: PathBuf,
    /// The whole file, BOM included.
    pub text: String,
}

/// Read `path` (made absolute by the caller) with the size and UTF-8 checks.
pub fn read_source(_path: &Path) -> Result<SourceFile, FileError> {
    unimplemented!()
}
