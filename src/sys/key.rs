//! Keys kept in a state dir: the channel key (ntfy's reply tokens) and a fleet node's key.
//!
//! Invariants:
//! - A key is created once and never overwritten: written whole under a name of its own
//!   (mode 0600), then hard-linked into place, which fails when a key is there already; of
//!   two processes that race, both end with the one key that was linked. A key file of
//!   another size, or one that others may read, is an error naming it.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A key's length in bytes.
pub(crate) const KEY_LEN: usize = 32;

/// In a fleet, the channel key all nodes share, kept in the store (docs/fleet.md): set once
/// the store is open, and used instead of the state dir's.
static FLEET_KEY: std::sync::OnceLock<[u8; KEY_LEN]> = std::sync::OnceLock::new();

/// Use the fleet's channel key for the rest of this process.
pub(crate) fn use_fleet_channel_key(key: [u8; KEY_LEN]) {
    let _ = FLEET_KEY.set(key);
}

/// The fleet's channel key, once the store has set it.
pub(crate) fn fleet_channel_key() -> Option<[u8; KEY_LEN]> {
    FLEET_KEY.get().copied()
}

/// The 32 random bytes in `state_dir/file`, created the first time as the channel key is
/// (see the module): the channel key, and a fleet node's key. An error names the file as
/// `what`.
pub(crate) fn private_key(
    state_dir: &Path,
    file: &str,
    what: &str,
) -> Result<[u8; KEY_LEN], String> {
    let path = state_dir.join(file);
    let key_error = |e: std::io::Error| format!("{what} {}: {e}", path.display());
    match read_key(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => return other.map_err(key_error),
    }
    create_key(state_dir, &path).map_err(key_error)?;
    // Linked here, or by a process that raced this one: the key is what the file holds.
    read_key(&path).map_err(key_error)
}

/// The key as the file holds it, if the file is a regular file of 32 bytes that only its
/// owner may read.
fn read_key(path: &Path) -> std::io::Result<[u8; KEY_LEN]> {
    use std::io::{Error, ErrorKind};
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(Error::new(ErrorKind::InvalidData, "not a regular file"));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("mode {mode:04o} lets others read it; it must be 0600"),
        ));
    }
    if meta.len() != KEY_LEN as u64 {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("{} bytes, not {KEY_LEN}", meta.len()),
        ));
    }
    let mut key = [0u8; KEY_LEN];
    let mut file = std::fs::File::open(path)?;
    file.read_exact(&mut key)?;
    Ok(key)
}

/// Write a new key under a name of its own, then link it into place, unless another
/// process linked its key first.
fn create_key(state_dir: &Path, path: &Path) -> std::io::Result<()> {
    let suffix: String = super::random_bytes::<8>()?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp: PathBuf = state_dir.join(format!("{name}.{}.{suffix}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&super::random_bytes::<KEY_LEN>()?)?;
        file.sync_all()
    })();
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    linked
}
