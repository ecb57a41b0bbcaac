//! HEARTBEAT.md: reading with limits, parsing into tasks, ticking one-time tasks.
//!
//! `read_source` is the only way a HEARTBEAT.md enters the program: it refuses files over
//! [`MAX_FILE_BYTES`] (without reading past the limit) and text that is not UTF-8, and
//! resolves symlinks once so that ids and rewrites use the same target.

pub mod parse;
pub mod tick;

use std::fs;
use std::io::{self, Read};
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
pub fn read_source(path: &Path) -> Result<SourceFile, FileError> {
    let io_err = |source: io::Error| {
        if source.kind() == io::ErrorKind::NotFound {
            FileError::Missing(path.to_path_buf())
        } else {
            FileError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    let meta = fs::metadata(path).map_err(io_err)?;
    // A FIFO or device would block or never end; a directory cannot be a check-list.
    if meta.is_dir() {
        return Err(io_err(io::Error::other("is a directory")));
    }
    if !meta.is_file() {
        return Err(io_err(io::Error::other("not a regular file")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    let file = fs::File::open(path).map_err(io_err)?;
    // The file may grow between `metadata` and the read: never read past the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        FileError::NotUtf8 {
            path: path.to_path_buf(),
            line: 1 + line_breaks(valid),
        }
    })?;
    let canonical = fs::canonicalize(path).map_err(io_err)?;
    Ok(SourceFile {
        path: path.to_path_buf(),
        canonical,
        text,
    })
}

/// Line breaks in `bytes`, counting `\r\n` once and a lone `\r` as one, like the parser.
fn line_breaks(bytes: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => n += 1,
            b'\r' => {
                n += 1;
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    n
}
