//! HEARTBEAT.md: reading with limits, parsing into tasks, ticking one-time tasks.
//!
//! `read_source` is the only way a HEARTBEAT.md enters the program: it refuses files over
//! [`MAX_FILE_BYTES`] (without reading past the limit) and text that is not UTF-8, and
//! resolves symlinks once so that ids and rewrites use the same target.

pub(crate) mod append;
pub mod parse;
pub(crate) mod proposal;
pub(crate) mod tick;

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use parse::parse;

/// Files larger than this are refused.
pub(crate) const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    #[error(
        "{}: no such file (`heartbeat init` writes one to start from; --file names another)",
        .0.display()
    )]
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

/// In a fleet, the directory task ids are relative to (the config file's, symlinks
/// resolved); unset on one host, where ids hash the absolute path.
static FLEET_ID_BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Make task ids fleet ids (docs/fleet.md#fleet-task-ids) for the rest of this process:
/// the same line in clones of a repository at different paths has one id. Called once,
/// right after the config loaded, before any file is parsed.
pub(crate) fn use_fleet_ids(config_dir: &Path) {
    let base = fs::canonicalize(config_dir).unwrap_or_else(|_| config_dir.to_path_buf());
    let _ = FLEET_ID_BASE.set(base);
}

/// The path a task id hashes: `canonical` itself, or in a fleet the path relative to the
/// config's directory (a file outside it keeps its absolute path).
pub(crate) fn id_path(canonical: &Path) -> String {
    let relative = FLEET_ID_BASE
        .get()
        .and_then(|base| canonical.strip_prefix(base).ok());
    relative.unwrap_or(canonical).to_string_lossy().into_owned()
}

/// A HEARTBEAT.md read from disk.
#[derive(Clone, Debug)]
pub(crate) struct SourceFile {
    /// As the user named it, made absolute (not symlink-resolved).
    pub path: PathBuf,
    /// Symlinks resolved: used for task ids and as the rewrite target.
    pub canonical: PathBuf,
    /// The whole file, BOM included.
    pub text: String,
}

impl FileError {
    /// An I/O error on `path`: a missing file is [`FileError::Missing`] (with its hint).
    pub(crate) fn from_io(path: &Path, source: io::Error) -> FileError {
        if source.kind() == io::ErrorKind::NotFound {
            FileError::Missing(path.to_path_buf())
        } else {
            FileError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }
}

/// Read `path` (made absolute by the caller) with the size and UTF-8 checks.
pub(crate) fn read_source(path: &Path) -> Result<SourceFile, FileError> {
    let io_err = |source| FileError::from_io(path, source);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_text_as_is_and_resolves_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.md");
        fs::write(&real, "\u{feff}## Once\r\n- [ ] a").unwrap();
        let link = dir.path().join("HEARTBEAT.md");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let s = read_source(&link).unwrap();
        assert_eq!(s.path, link);
        assert_eq!(s.canonical, fs::canonicalize(&real).unwrap());
        assert_eq!(s.text, "\u{feff}## Once\r\n- [ ] a");
    }

    #[test]
    fn missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let err = read_source(&path).unwrap_err();
        assert!(matches!(&err, FileError::Missing(p) if *p == path));
        assert!(
            err.to_string().starts_with(&format!(
                "{}: no such file (`heartbeat init`",
                path.display()
            )),
            "{err}"
        );
        // A dangling symlink is missing too.
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &path).unwrap();
        assert!(matches!(read_source(&path), Err(FileError::Missing(_))));
    }

    #[test]
    fn size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let f = fs::File::create(&path).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let err = read_source(&path).unwrap_err();
        assert!(
            matches!(err, FileError::TooLarge { size, .. } if size == MAX_FILE_BYTES + 1),
            "{err:?}"
        );
        assert!(err.to_string().contains("larger than the 8 MiB limit"));
        // Exactly at the limit is fine.
        f.set_len(MAX_FILE_BYTES).unwrap();
        assert_eq!(
            read_source(&path).unwrap().text.len() as u64,
            MAX_FILE_BYTES
        );
    }

    #[test]
    fn not_utf8_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        for (bytes, line) in [
            (&b"\xff"[..], 1),
            (b"a\nb\n- [ ] \xc3(", 3),
            (b"a\r\nb\r\nc\xe2\x82", 3),
            (b"a\rb\r\r\xfe", 4),
            (b"\xef\xbb\xbfok\n\x80", 2),
        ] {
            fs::write(&path, bytes).unwrap();
            match read_source(&path) {
                Err(FileError::NotUtf8 { line: got, path: p }) => {
                    assert_eq!((got, &p), (line, &path), "{bytes:?}")
                }
                other => panic!("{bytes:?}: {other:?}"),
            }
        }
        let err = read_source(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:2: not valid UTF-8", path.display())
        );
    }

    #[test]
    fn directory_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_source(dir.path()).unwrap_err();
        assert!(matches!(err, FileError::Io { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&dir.path().display().to_string())
        );
    }
}
