//! Signed replies (docs/reference.md#approvals-by-ntfy): the install key, the token an
//! Approve or Deny button carries, and reading a reply `hb1 <decision> <approval id>
//! <expiry> <token>`.
//!
//! Invariants:
//! - A token binds one approval, its task, its input (by hash), one decision and an expiry:
//!   it decides nothing else, and a reply is compared with the token as written (never
//!   another spelling of the same bytes), so "used once" holds for the text a phone sends.
//! - The install key is created once and never overwritten (`sys/key.rs`); in a fleet it is
//!   the one the fleet's database holds.

use std::path::Path;

use hmac::{KeyInit, Mac};
use sha2::Sha256;

use crate::codec::{BASE64_URL, base64};

/// The install key's file in the state directory.
pub(crate) const KEY_FILE: &str = "channel.key";

/// The install key's length in bytes.
const KEY_LEN: usize = crate::sys::key::KEY_LEN;

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
    if let Some(key) = crate::sys::key::fleet_channel_key() {
        return Ok(key);
    }
    crate::sys::key::private_key(state_dir, KEY_FILE, "the channel key")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

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
