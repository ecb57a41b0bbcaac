//! Signed replies (docs/reference.md#approvals-by-ntfy): the install key, the token an
//! Approve or Deny button carries, and reading a reply `hb1 <decision> <approval id>
//! <expiry> <token>`.
//!
//! Invariants:
//! - A token binds one approval, its task, its input (by hash), one decision and an expiry:
//!   it decides nothing else, and a reply is compared with the token as written (never
//!   another spelling of the same bytes), so "used once" holds for the text a phone sends.
//! - The install key is created once and never overwritten: written whole under a name of
//!   its own (mode 0600), then hard-linked into place, which fails when a key is there
//!   already; of two processes that race, both end with the one key that was linked. A key
//!   file of another size, or one that others may read, is an error naming it.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{KeyInit, Mac};
use sha2::Sha256;

use crate::codec::{BASE64_URL, base64};

/// The install key's file in the state directory.
pub(crate) const KEY_FILE: &str = "channel.key";

/// The install key's length in bytes.
const KEY_LEN: usize = 32;

/// What a button answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Approve,
    Deny,
}

impl Decision {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }
}

/// A reply in the `hb1` form, not yet checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reply<'a> {
    pub decision: Decision,
    pub approval_id: i64,
    /// Unix seconds.
    pub expiry: i64,
    pub token: &'a str,
}

/// `hb1 approve 7 1772449200 <token>` (surrounding white space aside); None for anything
/// else.
pub(crate) fn parse(text: &str) -> Option<Reply<'_>> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let [version, decision, id, expiry, token] = words.as_slice() else {
        return None;
    };
    if *version != "hb1" {
        return None;
    }
    let decision = match *decision {
        "approve" => Decision::Approve,
        "deny" => Decision::Deny,
        _ => return None,
    };
    let approval_id = id.parse::<i64>().ok().filter(|&id| id > 0)?;
    let expiry = expiry.parse::<i64>().ok()?;
    let url_safe = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
    if token.is_empty() || !token.bytes().all(url_safe) {
        return None;
    }
    Some(Reply {
        decision,
        approval_id,
        expiry,
        token,
    })
}

/// The token of one decision on one approval: base64url, unpadded, of
/// HMAC-SHA256(key, `hb1|<approval id>|<task id>|<input hash>|<decision>|<expiry>`).
pub(crate) fn token(
    key: &[u8],
    approval_id: i64,
    task_id: &str,
    input_hash: &str,
    decision: Decision,
    expiry: i64,
) -> String {
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .expect("HMAC takes a key of any length");
    mac.update(
        format!(
            "hb1|{approval_id}|{task_id}|{input_hash}|{}|{expiry}",
            decision.as_str()
        )
        .as_bytes(),
    );
    base64(&mac.finalize().into_bytes(), BASE64_URL)
        .trim_end_matches('=')
        .to_string()
}

/// What a button POSTs: `hb1 <decision> <approval id> <expiry> <token>`.
pub(crate) fn body(decision: Decision, approval_id: i64, expiry: i64, token: &str) -> String {
    format!("hb1 {} {approval_id} {expiry} {token}", decision.as_str())
}

/// Whether `given` is `expected`, in time that does not depend on where they differ.
pub(crate) fn same_token(expected: &str, given: &str) -> bool {
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The install key of `state_dir`, created the first time (see the module). An error
/// names the file and says what is wrong with it.
pub(crate) fn install_key(state_dir: &Path) -> Result<[u8; KEY_LEN], String> {
    if let Some(key) = FLEET_KEY.get() {
        return Ok(*key);
    }
    private_key(state_dir, KEY_FILE, "the channel key")
}

/// In a fleet, the channel key all nodes share, kept in the store (docs/fleet.md): set once
/// the store is open, and used instead of the state dir's.
static FLEET_KEY: std::sync::OnceLock<[u8; KEY_LEN]> = std::sync::OnceLock::new();

/// Use the fleet's channel key for the rest of this process.
pub(crate) fn use_fleet_key(key: [u8; KEY_LEN]) {
    let _ = FLEET_KEY.set(key);
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
    let suffix: String = crate::sys::random_bytes::<8>()?
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
        file.write_all(&crate::sys::random_bytes::<KEY_LEN>()?)?;
        file.sync_all()
    })();
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = {
        let mut k = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            k[i] = i as u8;
            i += 1;
        }
        k
    };
    const HASH: &str = "f40dced4402bcd4a24598c3186175f92612477a5f8c81cf2dd48507d7ca7e0cb";

    #[test]
    fn a_token_is_the_hmac_of_its_approval_and_decision() {
        // Computed independently with Python's hmac module:
        //   key = bytes(range(32))
        //   msg = b"hb1|7|0123456789ab|" + HASH + b"|approve|1772449200"
        //   base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).rstrip(b"=")
        let approve = token(
            &KEY,
            7,
            "0123456789ab",
            HASH,
            Decision::Approve,
            1_772_449_200,
        );
        assert_eq!(approve, "MklYMv-LS3tyF6hrVty8d1Rio4NBrE8KPZQ1qEnRY8I");
        // The same with b"|deny|".
        let deny = token(&KEY, 7, "0123456789ab", HASH, Decision::Deny, 1_772_449_200);
        assert_eq!(deny, "NHRSC68cvOwQ3ANEilXqey1UxY5Xwzw2YXN4pUBsHPg");
        // Another approval, expiry or key: another token.
        assert_ne!(
            token(
                &KEY,
                8,
                "0123456789ab",
                HASH,
                Decision::Approve,
                1_772_449_200
            ),
            approve
        );
        assert_ne!(
            token(
                &KEY,
                7,
                "0123456789ab",
                HASH,
                Decision::Approve,
                1_772_449_201
            ),
            approve
        );
        assert_ne!(
            token(
                &[1; 32],
                7,
                "0123456789ab",
                HASH,
                Decision::Approve,
                1_772_449_200
            ),
            approve
        );
        assert!(same_token(&approve, &approve.clone()));
        assert!(!same_token(&approve, &deny));
        assert!(!same_token(&approve, &format!("{approve}=")));
    }

    #[test]
    fn a_reply_is_read_only_in_the_hb1_form() {
        let body = body(Decision::Deny, 7, 1_772_449_200, "ab-_9");
        assert_eq!(body, "hb1 deny 7 1772449200 ab-_9");
        assert_eq!(
            parse(&format!("  {body}\n")),
            Some(Reply {
                decision: Decision::Deny,
                approval_id: 7,
                expiry: 1_772_449_200,
                token: "ab-_9",
            })
        );
        for other in [
            "",
            "approve 7",
            "hb1 approve 7 1772449200",
            "hb2 approve 7 1772449200 tok",
            "hb1 always 7 1772449200 tok",
            "hb1 approve -7 1772449200 tok",
            "hb1 approve 7 soon tok",
            "hb1 approve 7 1772449200 tok=",
            "hb1 approve 7 1772449200 tok extra",
        ] {
            assert_eq!(parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn the_install_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let key = install_key(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), key);
        assert_eq!(
            install_key(dir.path()).unwrap(),
            key,
            "read, not made again"
        );
        // Nothing but the key is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn racing_processes_end_with_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<[u8; 32]> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| install_key(dir.path()).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
        assert_eq!(std::fs::read(dir.path().join(KEY_FILE)).unwrap(), keys[0]);
    }

    #[test]
    fn a_key_file_of_the_wrong_size_or_mode_is_an_error_naming_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        std::fs::write(&path, [7u8; 16]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = install_key(dir.path()).unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("16 bytes, not 32"), "{err}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [7u8; 16],
            "never overwritten"
        );

        std::fs::write(&path, [7u8; 32]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = install_key(dir.path()).unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("mode 0644"), "{err}");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(install_key(dir.path()).unwrap(), [7u8; 32]);
    }
}
