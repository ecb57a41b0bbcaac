//! Redaction (docs/reference.md#redaction): the one step that stands before every sink — audit
//! lines, stdout and stderr, SQLite rows, Telegram messages.
//!
//! Invariants:
//! - Values under secret-looking keys ([`is_secret_key`]) become `"***"` at any depth,
//!   objects inside arrays too (a null stays null: nothing to hide).
//! - In every string, the values of secret-looking URL query parameters become `***`, and
//!   so does every registered secret (the Telegram token, MCP servers' secret values, and
//!   in a task's outcome the values under its input's secret keys), also inside longer
//!   strings, in every spelling (`spellings`: a header's bare credential, URL-encoded,
//!   base64, hex), also cut into lines (a block of whole base64-alphabet lines that holds
//!   one is hidden whole). A registered value shorter than [`MIN_SECRET`] is not looked
//!   for. Text shaped like a Telegram bot token is hidden without being registered.
//! - In every string, so does the value of a secret-looking key written as `KEY=VALUE`, as
//!   JSON text (`"access_token": "…"`, a key after `{` or `,`) or as an HTTP credential
//!   (`Bearer …`): tool output and command lines carry secrets in those forms. A key
//!   followed by `: ` and prose (`Authorization: the variable …`) is left alone. A quoted
//!   value ends at its closing quote or, when that was cut off, at the end of its line.
//! - Redaction runs before any text is cut to a limit: a secret that straddles the cut
//!   would otherwise survive minus its tail. [`crate::text::Redacted`], the text a sink
//!   takes, is made here ([`Secrets::redact`]) and is the only text that can be cut.
//! - Redaction is idempotent: `***` holds no secret.
//! - A secret file (`bot_token_file`) is read once per process ([`take_file`]) and only
//!   when no one but its owner may read it; its value is registered like a variable's.
//! - A secret variable is read from the environment once per process ([`take_env`]): it is
//!   then removed from heartbeat's environment and its bytes overwritten in the process's
//!   original environment block, and the process is made non-dumpable, so that neither a
//!   tool nor another process of the user can read it back.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::codec::{BASE64, BASE64_URL, base64, base64_decode, percent_decode};

/// What a redacted value becomes.
pub(crate) const STARS: &str = "***";

/// Fragments of key names whose values are secret (compared without case, `-` or `_`).
const SECRET_KEY_PARTS: [&str; 11] = [
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "authorization",
    "cookie",
    "credential",
    "privatekey",
    "session",
    "bearer",
];

/// The shortest value under a secret key of a task's input that is also cut out of the
/// tool's output wherever it appears ([`Secrets::with_input`]).
const MIN_INPUT_SECRET: usize = 4;

/// URL query parameters that are secret besides those with a secret-looking name.
const SECRET_PARAMS: [&str; 4] = ["key", "sig", "signature", "accesstoken"];

/// The shortest registered secret that is replaced inside other text: a shorter value
/// (`DEBUG=1`) would cut ordinary words and digits out of every line. It is still removed
/// from inputs and environments by its key, and `check` warns about it
/// ([`crate::audit::short_secrets`]).
pub(crate) const MIN_SECRET: usize = 6;

/// The shortest derived spelling of a secret (a piece of a longer base64 text) replaced.
const MIN_SPELLING: usize = 8;

/// The strings this process must never show: the Telegram token, MCP servers' secret values,
/// and every spelling of each (see `spellings`). Cheap to clone; never printed by `Debug`.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    values: Arc<Vec<String>>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} spellings)", self.values.len())
    }
}

/// Secret variables this process took out of its environment, and the [`Secrets`] they
/// make (built once, not at every line printed).
struct Taken {
    vars: Vec<(String, String)>,
    secrets: Option<Secrets>,
}

impl Taken {
    /// The value taken for `name` (a variable, or `file:PATH`), if it was.
    fn remembered(&self, name: &str) -> Option<&String> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

static TAKEN: Mutex<Taken> = Mutex::new(Taken {
    vars: Vec::new(),
    secrets: None,
});

impl Secrets {
    /// These registered secrets, each in every spelling; values shorter than
    /// [`MIN_SECRET`] characters are left out (see there).
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        Secrets::of(
            values
                .into_iter()
                .flat_map(|v| {
                    let parts = url_parts(&v);
                    std::iter::once(v).chain(parts)
                })
                .filter(|v| v.chars().count() >= MIN_SECRET),
        )
    }

    /// These values, each in every spelling (empty ones are ignored: they would match
    /// everywhere).
    fn of(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut all = Vec::new();
        for v in values {
            spellings(&v, &mut all);
        }
        all.retain(|v| !v.is_empty() && v != STARS);
        // Longest first, so that a secret containing another is replaced whole.
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Secrets {
            values: Arc::new(all),
        }
    }

    /// These secrets and the values a task's input holds under secret keys, at any depth:
    /// a tool given `{"env": {"API_TOKEN": "…"}}` may print the value back, bare, in its
    /// output or errors. Values shorter than [`MIN_INPUT_SECRET`] characters are left out:
    /// they would cut ordinary words out of the output.
    pub(crate) fn with_input(&self, input: &Map<String, Value>) -> Secrets {
        fn leaves(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::String(s) => out.push(s.clone()),
                Value::Number(n) => out.push(n.to_string()),
                Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
                Value::Object(m) => m.values().for_each(|v| leaves(v, out)),
                Value::Bool(_) | Value::Null => {}
            }
        }
        fn members(m: &Map<String, Value>, out: &mut Vec<String>) {
            for (k, v) in m {
                if is_secret_key(k) {
                    leaves(v, out);
                } else {
                    nested(v, out);
                }
            }
        }
        fn nested(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => members(m, out),
                Value::Array(items) => items.iter().for_each(|v| nested(v, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        members(input, &mut found);
        found.retain(|v| v.chars().count() >= MIN_INPUT_SECRET && v != STARS);
        if found.is_empty() {
            return self.clone();
        }
        let mut values = self.values.to_vec();
        values.extend(Secrets::of(found).values.iter().cloned());
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Secrets {
            values: Arc::new(values),
        }
    }

    /// Every secret this process took from its environment so far. Used for its standard
    /// output and error, which are the process's own, whatever the command.
    pub(crate) fn taken() -> Secrets {
        let mut taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
        let Taken { vars, secrets } = &mut *taken;
        secrets
            .get_or_insert_with(|| Secrets::new(vars.iter().map(|(_, v)| v.clone())))
            .clone()
    }

    /// `s` with registered secrets, the secrets of URLs and the values of secret keys in
    /// free text replaced by `***`. For [`Secrets::redact`], which makes the text a sink
    /// takes: nothing else turns redaction into plain text.
    pub(crate) fn text<'s>(&self, s: &'s str) -> Cow<'s, str> {
        let cut = match self.cut(s) {
            Cow::Borrowed(b) => redact_bot_tokens(b),
            Cow::Owned(o) => Cow::Owned(redact_bot_tokens(&o).into_owned()),
        };
        let urls = match redact_urls(&cut) {
            Cow::Borrowed(_) => cut,
            Cow::Owned(o) => Cow::Owned(o),
        };
        match redact_pairs(&urls) {
            Cow::Borrowed(_) => urls,
            Cow::Owned(o) => Cow::Owned(o),
        }
    }

    /// Redact a JSON value in place: secret keys at any depth, and every string. For
    /// [`Secrets::redact_json`], which makes the text a sink takes.
    pub(crate) fn value(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if hides(k, v) {
                        *v = Value::String(STARS.into());
                    } else {
                        self.value(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::String(s) => {
                if let Cow::Owned(o) = self.text(s) {
                    *s = o;
                }
            }
            _ => {}
        }
    }

    /// Registered secrets in `s` replaced by `***`, also one wrapped over lines.
    fn cut<'s>(&self, s: &'s str) -> Cow<'s, str> {
        if !self.values.iter().any(|secret| s.contains(secret.as_str())) {
            return self.wrapped(s);
        }
        let mut s = s.to_string();
        for secret in self.values.iter() {
            s = s.replace(secret.as_str(), STARS);
        }
        // A line that held a whole secret now holds `***`, and is no part of a block.
        Cow::Owned(self.wrapped(&s).into_owned())
    }
}

impl Secrets {
    /// `s` with every block of two or more whole lines of base64 characters (what `base64`
    /// and `fold` print: a long value cut into lines) replaced by `***` when the block,
    /// joined, holds a registered secret in any of its spellings.
    fn wrapped<'s>(&self, s: &'s str) -> Cow<'s, str> {
        if self.values.is_empty() || !s.contains('\n') {
            return Cow::Borrowed(s);
        }
        let is_b64 = |l: &str| {
            !l.is_empty()
                && l.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=')
                })
        };
        let mut out = String::new();
        let mut copied = 0;
        // The block being read: its start, its end, its lines joined, how many lines.
        let mut block: Option<(usize, usize, String, usize)> = None;
        let mut close = |block: &mut Option<(usize, usize, String, usize)>, out: &mut String| {
            if let Some((start, end, joined, lines)) = block.take()
                && lines >= 2
                && self.values.iter().any(|v| joined.contains(v.as_str()))
            {
                out.push_str(&s[copied..start]);
                out.push_str(STARS);
                copied = end;
            }
        };
        let mut at = 0;
        for line in s.split_inclusive('\n') {
            let bare = line.trim_end_matches(['\n', '\r']);
            if is_b64(bare) {
                let b = block.get_or_insert_with(|| (at, at, String::new(), 0));
                b.1 = at + bare.len();
                b.2.push_str(bare);
                b.3 += 1;
            } else {
                close(&mut block, &mut out);
            }
            at += line.len();
        }
        close(&mut block, &mut out);
        if copied == 0 {
            return Cow::Borrowed(s);
        }
        out.push_str(&s[copied..]);
        Cow::Owned(out)
    }
}

/// The value of the secret environment variable `name` (trimmed; None when unset or
/// blank). The first time, it is taken out of the environment: removed from heartbeat's
/// own, overwritten in the original block that `/proc/<pid>/environ` shows, and the process
/// becomes non-dumpable. Later calls return the value remembered.
pub(crate) fn take_env(name: &str) -> Option<String> {
    let mut taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(v) = taken.remembered(name) {
        return Some(v.clone()).filter(|v| !v.is_empty());
    }
    let raw = std::env::var_os(name)?;
    crate::sys::forget_env(name);
    crate::sys::set_non_dumpable();
    let value = raw.to_string_lossy().trim().to_string();
    taken.vars.push((name.to_string(), value.clone()));
    taken.secrets = None;
    Some(value).filter(|v| !v.is_empty())
}

/// The value of the secret variable `name` if this process took it already (None
/// otherwise; nothing is read from the environment): whether a variable a config names was
/// set, after `take_env` removed it (a long-lived process loads its config again).
pub(crate) fn taken_env(name: &str) -> Option<String> {
    let taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
    taken.remembered(name).filter(|v| !v.is_empty()).cloned()
}

/// The secret held in the file at `path` (`[telegram] bot_token_file`), trimmed. Read once
/// per process: later calls return the value remembered, so a daemon's reloads do not read
/// it again. Refused when group or others may read the file (`mode & 0o077`), when it is not
/// a regular file or over 4 KiB, and when it holds nothing but white space. The value is
/// registered like a taken variable: every sink hides it from then on.
pub(crate) fn take_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    const MAX: u64 = 4096;

    let key = format!("file:{}", path.display());
    let mut taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(v) = taken.remembered(&key) {
        return Ok(v.clone());
    }
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{shown} has mode {mode:04o}: group or others may read the token; \
             run chmod 600 {shown}"
        ));
    }
    if meta.len() > MAX {
        return Err(format!(
            "{shown} is {} bytes, more than a token ({MAX} at most)",
            meta.len()
        ));
    }
    let mut text = String::new();
    file.take(MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let value = text.trim().to_string();
    if value.is_empty() {
        return Err(format!(
            "{shown} is empty: put the token @BotFather gave you in it"
        ));
    }
    crate::sys::set_non_dumpable();
    taken.vars.push((key, value.clone()));
    taken.secrets = None;
    Ok(value)
}

/// The parts of a secret URL that are secrets of their own (docs/reference.md#redaction): a
/// webhook's path and query (`/services/T0/B0/XYZ`, which an error may quote without the
/// host) and the password of its user info (`smtps://me:pw@host`), also percent-decoded.
/// Nothing for a value that is not a URL. A PostgreSQL URL (`[fleet] postgres_url_env`)
/// gives only its password: its path is the database's name, which messages name (and may
/// be a common word), not a credential; in `key=value` form, the value of `password=`.
fn url_parts(value: &str) -> Vec<String> {
    let Some((scheme, rest)) = value.trim().split_once("://") else {
        return pg_password(value).into_iter().collect();
    };
    let postgres = matches!(scheme, "postgres" | "postgresql");
    let mut parts = Vec::new();
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if let Some((user_info, _)) = authority.rsplit_once('@')
        && let Some((_, password)) = user_info.split_once(':')
    {
        parts.push(password.to_string());
        // As it is sent (an SMTP login): `p%40ss` is `p@ss`.
        let decoded = percent_decode(password);
        if decoded != password {
            parts.push(decoded);
        }
    }
    let path = path.trim_start_matches('/');
    if path.len() > 1 && !postgres {
        parts.push(path.to_string());
        if let Some((before, query)) = path.split_once('?') {
            parts.extend([before.to_string(), query.to_string()]);
        }
    }
    parts
}

/// The password of a PostgreSQL connection string in `key=value` form (`host=/run/postgresql
/// user=hb password=s3cret`), quoted or not.
fn pg_password(value: &str) -> Option<String> {
    let at = value.find("password")?;
    let rest = value[at + "password".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start();
    let password = match rest.strip_prefix('\'') {
        Some(quoted) => quoted.split('\'').next()?,
        None => rest.split_whitespace().next()?,
    };
    (!password.is_empty()).then(|| password.to_string())
}

/// Push to `out` every spelling of the secret `value` that may reach a sink: itself; the
/// credential of an HTTP header value (`Bearer X`, `Basic X`, and for Basic the decoded
/// `user:password` and the password); and each of these URL-encoded, base64 (standard and
/// URL-safe, padded or not, also the part of a longer base64 text that encodes it) and hex
/// (lower and upper case).
fn spellings(value: &str, out: &mut Vec<String>) {
    let mut plain = vec![value.to_string()];
    if let Some((scheme, credential)) = value.trim().split_once(' ') {
        let credential = credential.trim();
        if scheme.eq_ignore_ascii_case("bearer") && credential.chars().count() >= MIN_SECRET {
            plain.push(credential.to_string());
        }
        if scheme.eq_ignore_ascii_case("basic") {
            plain.push(credential.to_string());
            if let Some(pair) = base64_decode(credential).and_then(|b| String::from_utf8(b).ok()) {
                if let Some((_, password)) = pair.split_once(':')
                    && password.chars().count() >= MIN_SECRET
                {
                    plain.push(password.to_string());
                }
                plain.push(pair);
            }
        }
    }
    for v in plain {
        let bytes = v.as_bytes();
        out.push(url_encode(&v, HEX_UPPER));
        out.push(url_encode(&v, HEX_LOWER));
        out.push(hex(bytes, HEX_LOWER));
        out.push(hex(bytes, HEX_UPPER));
        for alphabet in [BASE64, BASE64_URL] {
            let whole = base64(bytes, alphabet);
            out.push(whole.clone());
            out.push(whole.trim_end_matches('=').to_string());
            // Inside a longer base64 text the secret starts at any of three offsets: the
            // characters that encode only its bytes are the same whatever surrounds it.
            for offset in 0..3 {
                let mut shifted = vec![0u8; offset];
                shifted.extend_from_slice(bytes);
                let encoded = base64(&shifted, alphabet);
                let first = [0, 2, 3][offset];
                let last = shifted.len() / 3 * 4;
                if last >= first + MIN_SPELLING {
                    out.push(encoded[first..last].to_string());
                }
            }
        }
        out.push(v);
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

fn hex(bytes: &[u8], digits: &[u8; 16]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(digits[usize::from(b >> 4)] as char);
        out.push(digits[usize::from(b & 15)] as char);
    }
    out
}

/// Percent-encoding of every byte but the unreserved ones (RFC 3986).
fn url_encode(s: &str, digits: &[u8; 16]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(digits[usize::from(b >> 4)] as char);
            out.push(digits[usize::from(b & 15)] as char);
        }
    }
    out
}

/// A key name without case, `-` or `_`.
fn normal(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether values under this key are never shown (docs/reference.md#redaction).
pub(crate) fn is_secret_key(key: &str) -> bool {
    // A key shorter than every part cannot hold one (most keys: `text`, `cmd`, `url`), and
    // free text asks this of every quoted key it meets.
    if key.len() < SECRET_KEY_PARTS.iter().map(|p| p.len()).min().unwrap_or(0) {
        return false;
    }
    let key = normal(key);
    SECRET_KEY_PARTS.iter().any(|part| key.contains(part))
}

/// Whether a URL query parameter of this name carries a secret.
fn is_secret_param(name: &str) -> bool {
    is_secret_key(name) || SECRET_PARAMS.contains(&normal(name).as_str())
}

/// Whether the value `v` under `key` is replaced (a null stays null: nothing to hide).
fn hides(key: &str, v: &Value) -> bool {
    !v.is_null() && is_secret_key(key)
}

/// Whether [`Secrets::value`] would hide a value under a key anywhere in `map`.
pub(crate) fn has_secret_keys(map: &Map<String, Value>) -> bool {
    fn value(v: &Value) -> bool {
        match v {
            Value::Object(m) => has_secret_keys(m),
            Value::Array(items) => items.iter().any(value),
            _ => false,
        }
    }
    map.iter().any(|(k, v)| hides(k, v) || value(v))
}

/// Where a URL found in free text ends: at white space, a quote, an angle bracket, a
/// backslash (an escaped quote in JSON text) or a control character.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '\\')
}

/// `s` with the secrets of every URL in it replaced by `***`: the password of its user
/// info (or the whole user info when it has no password: `https://TOKEN@host`), and the
/// values of secret query parameters.
fn redact_urls(s: &str) -> Cow<'_, str> {
    if !s.contains("://") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut changed = false;
    let mut rest = s;
    while let Some(at) = rest.find("://") {
        let end = rest[at..].find(ends_url).map_or(rest.len(), |e| at + e);
        out.push_str(&rest[..at]);
        changed |= redact_url(&rest[at..end], &mut out);
        rest = &rest[end..];
    }
    if !changed {
        return Cow::Borrowed(s);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Push `url` (from its `://` on) to `out` with its secrets replaced; whether any was.
fn redact_url(url: &str, out: &mut String) -> bool {
    let mut changed = false;
    // The user info: between `://` and the last `@` before the path, query or fragment.
    let authority_end = url[3..].find(['/', '?', '#']).map_or(url.len(), |e| 3 + e);
    let (head, url) = match url[3..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &url[3..3 + at];
            let shown = match userinfo.split_once(':') {
                Some((user, password)) if !password.is_empty() && password != STARS => {
                    format!("{user}:{STARS}")
                }
                None if !userinfo.is_empty() && userinfo != STARS => STARS.to_string(),
                _ => userinfo.to_string(),
            };
            changed |= shown != userinfo;
            (format!("://{shown}"), &url[3 + at..])
        }
        None => (String::new(), url),
    };
    out.push_str(&head);
    let Some(q) = url.find('?') else {
        out.push_str(url);
        return changed;
    };
    out.push_str(&url[..=q]);
    let query_end = url[q..].find('#').map_or(url.len(), |f| q + f);
    for (i, param) in url[q + 1..query_end].split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match param.split_once('=') {
            Some((name, value)) if is_secret_param(name) && !value.is_empty() && value != STARS => {
                changed = true;
                out.push_str(name);
                out.push('=');
                out.push_str(STARS);
            }
            _ => out.push_str(param),
        }
    }
    out.push_str(&url[query_end..]);
    changed
}

/// A byte of a key name in free text.
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Where a bare value in free text ends (`--password=x y`, `TOKEN=x;`).
fn ends_bare_value(b: u8) -> bool {
    b.is_ascii_whitespace()
        || b.is_ascii_control()
        || matches!(
            b,
            b'&' | b';' | b',' | b'"' | b'\'' | b'<' | b'>' | b')' | b']' | b'}' | b'\\'
        )
}

/// A byte of an HTTP credential (RFC 9110 token68).
fn is_credential_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// A quote at `at`, plain or escaped (`"` or `\"`: JSON text inside a JSON string): the
/// index after it and whether it was escaped.
fn quote_at(b: &[u8], at: usize) -> Option<(usize, bool)> {
    match (b.get(at), b.get(at + 1)) {
        (Some(b'"'), _) => Some((at + 1, false)),
        (Some(b'\\'), Some(b'"')) => Some((at + 2, true)),
        _ => None,
    }
}

fn skip_spaces(b: &[u8], mut at: usize) -> usize {
    while b.get(at).is_some_and(|c| *c == b' ' || *c == b'\t') {
        at += 1;
    }
    at
}

/// Whether a quote after `before` can open a JSON object's key: after `{` or `,` (and
/// white space), not after `= ` or `: ` as in `bot_token_env = "MY_TOKEN": …`.
fn starts_member(before: &str) -> bool {
    before.trim_end().ends_with(['{', ','])
}

/// The byte range of the secret value that follows the key `b[start..end]` in free text,
/// if it is one of the forms heartbeat recognises: `KEY=VALUE` (`--password=x`,
/// `API_TOKEN='x'`), JSON text (`"access_token": "x"`, also escaped inside a JSON string),
/// or a bearer credential (`Bearer x`, `Authorization: Basic x`).
fn secret_value(s: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let b = s.as_bytes();
    let key = &s[start..end];
    // JSON text: a quoted key, a colon, a string or a scalar. A quoted value ends at its
    // closing quote, or else at the end of its line: a JSON string holds no raw line break,
    // and a value whose closing quote was cut off (a line shortened for a table) must not
    // take the rest of the text with it.
    let opened = (start > 0 && b[start - 1] == b'"').then(|| start >= 2 && b[start - 2] == b'\\');
    if let Some(escaped) = opened
        && starts_member(&s[..start - 1 - usize::from(escaped)])
        && let Some((after_key, e)) = quote_at(b, end)
        && e == escaped
    {
        let colon = skip_spaces(b, after_key);
        if b.get(colon) != Some(&b':') || !is_secret_key(key) {
            return None;
        }
        let value = skip_spaces(b, colon + 1);
        if let Some((from, e)) = quote_at(b, value)
            && e == escaped
        {
            let close = (from..b.len()).find(|&i| match b[i] {
                b'\n' | b'\r' => true,
                b'"' => escaped || b[i - 1] != b'\\',
                b'\\' => escaped && b.get(i + 1) == Some(&b'"'),
                _ => false,
            });
            return Some((from, close.unwrap_or(b.len())));
        }
        // A number or a boolean; null, objects and arrays are left (their keys are read
        // on their own).
        let to = value
            + b[value..]
                .iter()
                .take_while(|c| !ends_bare_value(**c))
                .count();
        let scalar = &s[value..to];
        let nested = scalar.starts_with(['{', '[']);
        return (!scalar.is_empty() && scalar != "null" && !nested).then_some((value, to));
    }
    if b.get(end) == Some(&b'=') && is_secret_key(key) {
        let value = end + 1;
        if let Some(&q) = b.get(value).filter(|q| **q == b'"' || **q == b'\'') {
            let to = b[value + 1..]
                .iter()
                .position(|c| *c == q || *c == b'\n' || *c == b'\r')
                .map_or(b.len(), |p| value + 1 + p);
            return Some((value + 1, to));
        }
        let to = value
            + b[value..]
                .iter()
                .take_while(|c| !ends_bare_value(**c))
                .count();
        return Some((value, to));
    }
    let scheme = key.eq_ignore_ascii_case("bearer")
        || (key.eq_ignore_ascii_case("basic")
            && s[..start]
                .trim_end()
                .to_ascii_lowercase()
                .ends_with("authorization:"));
    if scheme && b.get(end) == Some(&b' ') {
        let from = skip_spaces(b, end);
        let to = from
            + b[from..]
                .iter()
                .take_while(|c| is_credential_byte(**c))
                .count();
        // A credential is long; "bearer of bad news" is prose.
        return (to - from >= 8).then_some((from, to));
    }
    None
}

/// Whether `b` may stand in a Telegram bot token's secret part.
fn is_bot_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
}

/// `s` with every text shaped like a Telegram bot token (`123456789:` and 30 to 50 of
/// `A-Z a-z 0-9 _ -`, standing alone or after `bot` in a URL) replaced by `***`: a process
/// started without the token's variable (`heartbeat mcp` as an agent's client starts it)
/// cannot know its value, and a token written into a file would otherwise show.
fn redact_bot_tokens(s: &str) -> Cow<'_, str> {
    let b = s.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    for colon in memchr::memchr_iter(b':', b) {
        if colon < copied {
            continue;
        }
        let digits = b[..colon]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let start = colon - digits;
        if !(5..=15).contains(&digits)
            || (start > 0 && is_bot_token_byte(b[start - 1]) && !b[..start].ends_with(b"bot"))
        {
            continue;
        }
        let secret = b[colon + 1..]
            .iter()
            .take_while(|c| is_bot_token_byte(**c))
            .count();
        if !(30..=50).contains(&secret) {
            continue;
        }
        out.push_str(&s[copied..start]);
        out.push_str(STARS);
        copied = colon + 1 + secret;
    }
    if copied == 0 {
        return Cow::Borrowed(s);
    }
    out.push_str(&s[copied..]);
    Cow::Owned(out)
}

/// `s` with the values of secret-looking keys in free text (tool output, errors, commands)
/// replaced by `***`: see [`secret_value`] for the forms.
fn redact_pairs(s: &str) -> Cow<'_, str> {
    let b = s.as_bytes();
    let mut out = String::new();
    let (mut copied, mut at) = (0, 0);
    while at < b.len() {
        if !is_key_byte(b[at]) || (at > 0 && is_key_byte(b[at - 1])) {
            at += 1;
            continue;
        }
        let end = at + b[at..].iter().take_while(|c| is_key_byte(**c)).count();
        match secret_value(s, at, end) {
            // Already hidden (also when a table cut the line after it: `"***…`).
            Some((from, to)) if from < to && s[from..to].trim_end_matches('…') != STARS => {
                out.push_str(&s[copied..from]);
                out.push_str(STARS);
                copied = to;
                at = to;
            }
            _ => at = end,
        }
    }
    if out.is_empty() {
        // Nothing was replaced.
        return Cow::Borrowed(s);
    }
    out.push_str(&s[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn token() -> Secrets {
        Secrets::new(["123:ABC".to_string()])
    }

    #[test]
    fn secret_keys_in_free_text_lose_their_values() {
        let s = Secrets::default();
        for (text, shown) in [
            (
                r#"{"access_token": "AT-1", "user": {"password": "P\"W"}, "n": 1}"#,
                r#"{"access_token": "***", "user": {"password": "***"}, "n": 1}"#,
            ),
            (r#"{"token":12345,"ok":true}"#, r#"{"token":***,"ok":true}"#),
            (
                r#"out: {\"api_key\": \"K9\", \"n\": 2}"#,
                r#"out: {\"api_key\": \"***\", \"n\": 2}"#,
            ),
            (
                "mysql --password=hunter2 -u me",
                "mysql --password=*** -u me",
            ),
            ("export API_TOKEN='a b'; ls", "export API_TOKEN='***'; ls"),
            ("DB_SECRET=x&next=1", "DB_SECRET=***&next=1"),
            (
                "-H 'Authorization: Bearer sk-live-AAAA1111'",
                "-H 'Authorization: Bearer ***'",
            ),
            (
                "Authorization: Basic dXNlcjpwYXNzd29yZA==",
                "Authorization: Basic ***",
            ),
        ] {
            assert_eq!(s.text(text), shown, "{text}");
            assert_eq!(s.text(shown), shown, "idempotent: {shown}");
        }
        // Prose, heartbeat's own messages and harmless values stay as they are.
        for text in [
            "headers_env Authorization: the variable SEARCH_MCP_AUTH is not set",
            "telegram.bot_token_env = \"HB_TOKEN\": expected a name",
            "used 1200 tokens; tokens: 5",
            "the basic idea, and the bearer of bad news",
            r#"{"token": null, "session": {"id": 1}}"#,
            "cost_usd=0.02 keyboard=us",
            "password=",
        ] {
            assert_eq!(s.text(text), text);
        }
    }

    #[test]
    fn a_quoted_secret_without_its_closing_quote_ends_at_its_line() {
        let s = Secrets::default();
        let text = "{\"password\": \"hunter2\n2 task(s), 0 error(s)\n";
        assert_eq!(
            s.text(text),
            "{\"password\": \"***\n2 task(s), 0 error(s)\n"
        );
        let text = "export API_TOKEN='abc\nls -l\n";
        assert_eq!(s.text(text), "export API_TOKEN='***\nls -l\n");
        // A value already hidden and then cut for a table stays as it is.
        let cut = "{\"Authorization\": \"***…\nnext";
        assert_eq!(s.text(cut), cut);
    }

    #[test]
    fn values_under_secret_keys_of_an_input_are_cut_out_of_any_text() {
        let input = json!({
            "env": {"API_TOKEN": "tk-123456", "HOME": "/home/me"},
            "auth": [{"password": "pw-98765"}],
            "credentials": {"user": "me", "pin": 73519, "admin": true},
            "session": "abc",
            "text": "hello",
        });
        let s = token().with_input(input.as_object().unwrap());
        assert_eq!(
            s.text("tk-123456 pw-98765 73519 123:ABC"),
            "*** *** *** ***"
        );
        // Short values, booleans and ordinary keys' values are left: they would cut
        // ordinary words out of the output.
        assert_eq!(
            s.text("me abc true hello /home/me"),
            "me abc true hello /home/me"
        );
        // An input without secrets adds nothing.
        let plain = json!({"text": "tk-123456"});
        let s = token().with_input(plain.as_object().unwrap());
        assert_eq!(s.text("tk-123456 123:ABC"), "tk-123456 ***");
    }

    proptest::proptest! {
        /// Any text, of the pieces secrets are written with: no panic (every cut is at a
        /// character boundary), and a second pass changes nothing.
        #[test]
        fn free_text_redaction_is_total_and_idempotent(
            text in r#"([ a-zé{},:="'\\&;]|token|Bearer |Basic |Authorization: |password|\\")*"#
        ) {
            let s = Secrets::default();
            let once = s.text(&text).into_owned();
            proptest::prop_assert_eq!(s.text(&once).into_owned(), once);
        }
    }

    #[test]
    fn secret_keys_and_secret_values_are_redacted() {
        let mut v = json!({
            "api_key": "k", "Authorization": "Bearer x", "nested": {"db_PASSWORD": "p", "ok": "123:ABC"},
            "error": "GET https://api/bot123:ABC/getMe failed",
            "list": [{"passwd": 1}], "my_token": null, "url": "https://x"
        });
        token().value(&mut v);
        assert_eq!(
            v,
            json!({
                "api_key": "***", "Authorization": "***", "nested": {"db_PASSWORD": "***", "ok": "***"},
                "error": "GET https://api/bot***/getMe failed",
                "list": [{"passwd": "***"}], "my_token": null, "url": "https://x"
            })
        );
    }

    #[test]
    fn every_secret_key_name_is_hidden_at_any_depth() {
        for key in [
            "token",
            "MY_TOKEN",
            "db_Password",
            "x-api_key-y",
            "Authorization",
            "apikey",
            "x-api-key",
            "X-Api-Key",
            "api_key",
            "cookie",
            "Set-Cookie",
            "credential",
            "credentials",
            "aws_credentials",
            "private_key",
            "privateKey",
            "PRIVATE-KEY",
            "session",
            "session_id",
            "bearer",
            "bearer_auth",
            "client_secret",
            "passwd",
            "access_token",
        ] {
            assert!(is_secret_key(key), "{key}");
            let mut v = json!({"headers": [{"a": 1}, {key: "s3cret"}], key: {"deep": 1}});
            Secrets::default().value(&mut v);
            assert_eq!(v["headers"][1][key], "***", "{key}");
            assert_eq!(v[key], "***", "{key}");
            assert_eq!(v["headers"][0]["a"], 1);
        }
        for key in [
            "task_id", "tok", "pass", "input", "é_note", "", "key", "section",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
        // has_secret_keys agrees with what redaction changes.
        for v in [
            json!({"a": 1, "b": {"c": [1, {"d": 2}]}}),
            json!({"a": 1, "b": {"c": [1, {"token": 2}]}}),
            json!({"password": null}),
            json!({"Api_Key": "x"}),
        ] {
            let map = v.as_object().unwrap();
            let mut redacted = v.clone();
            Secrets::default().value(&mut redacted);
            assert_eq!(has_secret_keys(map), redacted != v, "{v}");
        }
    }

    #[test]
    fn secret_url_parameters_are_hidden_wherever_a_url_appears() {
        let s = Secrets::default();
        for (given, want) in [
            ("https://x/y?token=abc", "https://x/y?token=***"),
            (
                "https://x/y?access_token=abc&page=2",
                "https://x/y?access_token=***&page=2",
            ),
            ("https://x/?key=abc#frag", "https://x/?key=***#frag"),
            ("https://x/?api_key=abc", "https://x/?api_key=***"),
            ("https://x/?apiKey=abc", "https://x/?apiKey=***"),
            (
                "https://x/?sig=abc&Signature=def",
                "https://x/?sig=***&Signature=***",
            ),
            (
                "https://x/?a=1&X-Amz-Credential=abc",
                "https://x/?a=1&X-Amz-Credential=***",
            ),
            ("https://x/?session=abc", "https://x/?session=***"),
            (
                "https://x/?client_secret=abc",
                "https://x/?client_secret=***",
            ),
            (
                "error: GET http://h:1/a?password=p1 failed; see \"https://b/?bearer=z\"",
                "error: GET http://h:1/a?password=*** failed; see \"https://b/?bearer=***\"",
            ),
            ("https://x/?page=2&q=key", "https://x/?page=2&q=key"),
            // Not a URL, but a secret key's value in free text all the same.
            ("no url ?token=abc&sig=def", "no url ?token=***&sig=def"),
            ("https://x/?token=", "https://x/?token="),
            // User info: the password, or a lone token in the user's place.
            (
                "git clone https://me:ghp_abc123@github.com/me/x.git",
                "git clone https://me:***@github.com/me/x.git",
            ),
            (
                "https://ghp_abc123@github.com/x",
                "https://***@github.com/x",
            ),
            (
                "https://u:p@h/a?token=t&x=1",
                "https://u:***@h/a?token=***&x=1",
            ),
            // An @ in the path or query is no user info.
            ("https://h/@me?to=a@b", "https://h/@me?to=a@b"),
            ("https://me:@h/", "https://me:@h/"),
        ] {
            assert_eq!(s.text(given), want, "{given}");
        }
        // Inside a JSON value's strings too.
        let mut v = json!({"output": ["see https://x/?sig=abc"]});
        s.value(&mut v);
        assert_eq!(v["output"][0], "see https://x/?sig=***");
    }

    #[test]
    fn registered_secrets_are_cut_out_of_any_string() {
        let s = Secrets::new(["123:ABC".into(), "123:ABC-longer".into(), String::new()]);
        assert_eq!(s.text("a 123:ABC-longer b 123:ABC c"), "a *** b *** c");
        assert_eq!(s.text("nothing"), "nothing");
        assert!(matches!(s.text("nothing"), Cow::Borrowed(_)));
        assert!(!format!("{s:?}").contains("123"));
    }

    #[test]
    fn a_secret_is_found_in_every_spelling() {
        let secret = "s3cr3t/Tok+en=42";
        let s = Secrets::new([secret.to_string()]);
        let bytes = secret.as_bytes();
        let mut spelled = vec![
            // URL-encoded (upper and lower case escapes), hex.
            "s3cr3t%2FTok%2Ben%3D42".to_string(),
            "s3cr3t%2fTok%2ben%3d42".to_string(),
            hex(bytes, HEX_LOWER),
            hex(bytes, HEX_UPPER),
        ];
        for alphabet in [BASE64, BASE64_URL] {
            let whole = base64(bytes, alphabet);
            spelled.push(whole.trim_end_matches('=').to_string());
            spelled.push(whole);
        }
        // As the reference tools spell them.
        assert!(spelled.contains(&"czNjcjN0L1Rvaytlbj00Mg==".to_string()));
        assert!(spelled.contains(&"czNjcjN0L1Rvaytlbj00Mg".to_string()));
        assert!(spelled.contains(&"7333637233742f546f6b2b656e3d3432".to_string()));
        for form in &spelled {
            assert_eq!(
                s.text(&format!("got <{form}> back")),
                "got <***> back",
                "{form}"
            );
        }
        // Inside a longer base64 text, at any offset: nothing of it is left readable.
        for prefix in ["", "a", "ab", "abc"] {
            let text = base64(format!("{prefix}{secret}!").as_bytes(), BASE64);
            let shown = s.text(&text);
            assert!(shown.contains(STARS), "{prefix:?}: {text} -> {shown}");
            let decodable: String = shown.split(STARS).collect();
            assert!(decodable.len() < text.len() - 16, "{text} -> {shown}");
        }
    }

    #[test]
    fn the_credential_of_a_header_value_is_a_secret_of_its_own() {
        let s = Secrets::new(["Bearer sk-live-0123456789".to_string()]);
        assert_eq!(s.text("token=sk-live-0123456789"), "token=***");
        assert_eq!(s.text("x sk-live-0123456789 y"), "x *** y");
        // Basic: the encoded pair, the pair decoded, and the password alone.
        let pair = "me:pa55-word-9";
        let encoded = base64(pair.as_bytes(), BASE64);
        let s = Secrets::new([format!("Basic {encoded}")]);
        assert_eq!(s.text(&format!("auth {encoded}")), "auth ***");
        assert_eq!(s.text("login me:pa55-word-9"), "login ***");
        assert_eq!(s.text("password is pa55-word-9."), "password is ***.");
        assert_eq!(
            s.text(&format!("u={}", url_encode("pa55-word-9", HEX_UPPER))),
            "u=***"
        );
    }

    #[test]
    fn a_secret_wrapped_over_lines_is_hidden_with_its_block() {
        let secret = "srv-secret-value-99xyz-abcdef";
        let secrets = Secrets::new([secret.to_string()]);
        let wrapped = |text: &str, width: usize| {
            text.as_bytes()
                .chunks(width)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let encoded = base64(format!("user:{secret}").as_bytes(), BASE64);
        for text in [wrapped(&encoded, 16), wrapped(secret, 10)] {
            let shown = format!("encoded:\n{text}\ndone.");
            assert_eq!(secrets.text(&shown), "encoded:\n***\ndone.", "{text}");
        }
        // Lines of base64 that hold no secret stay.
        let other = wrapped(&base64(b"nothing to hide here at all", BASE64), 16);
        assert_eq!(secrets.text(&other), other);
    }

    #[test]
    fn a_bot_token_is_hidden_by_its_shape_alone() {
        let token = "7000000001:AAHbTestSecretTokenXYZ-0123456789abcd";
        let none = Secrets::default();
        for (text, shown) in [
            (
                format!("GET /bot{token}/getMe"),
                "GET /bot***/getMe".to_string(),
            ),
            (
                format!("bot is {token}, now"),
                "bot is ***, now".to_string(),
            ),
            (token.to_string(), "***".to_string()),
        ] {
            assert_eq!(none.text(&text), shown);
        }
        // Times, ports, ids and short or long runs after a colon are left alone.
        for text in [
            "2026-05-01T10:00:00Z",
            "127.0.0.1:8080/abc",
            "run 123456:abc",
            "x7000000001:AAHbTestSecretTokenXYZ-0123456789abcd",
            "7000000001:AAHbTestSecretTokenXYZ-0123456789abcdAAHbTestSecretTokenXYZ",
        ] {
            assert_eq!(none.text(text), text);
        }
    }

    #[test]
    fn a_short_registered_secret_is_not_replaced_inside_other_text() {
        let s = Secrets::new(["1".to_string(), "abcde".to_string()]);
        let line = r#"{"ts":"2026-11-23T10:00:00.000Z","event":"run_finished","succeeded":1}"#;
        assert_eq!(s.text(line), line);
        assert_eq!(s.text("abcde"), "abcde");
        // Six characters are enough.
        let s = Secrets::new(["abcdef".to_string()]);
        assert_eq!(s.text("xabcdefx"), "x***x");
        // A task input's own secret values keep their lower bound.
        let input = json!({"password": "pw-9"});
        let s = Secrets::default().with_input(input.as_object().unwrap());
        assert_eq!(s.text("it was pw-9"), "it was ***");
    }

    #[test]
    fn a_secret_url_hides_its_path_query_and_password_on_their_own() {
        let s = Secrets::new([
            "https://hooks.slack.com/services/T000/B000/XXXXXXXX".to_string(),
            "smtps://me:hunter2pw@mail.example:465".to_string(),
        ]);
        let shown = s
            .redact("POST /services/T000/B000/XXXXXXXX failed; pass hunter2pw")
            .into_string();
        assert_eq!(shown, "POST /*** failed; pass ***");
        // The host alone is no secret.
        assert_eq!(
            s.redact("hooks.slack.com: refused").as_str(),
            "hooks.slack.com: refused"
        );
        assert!(url_parts("not a url").is_empty());
        // A percent-encoded password also as it is sent.
        let s = Secrets::new(["smtp://me:pw%40Zq8rT4@mail.example".to_string()]);
        assert_eq!(
            s.redact("login pw@Zq8rT4 refused").as_str(),
            "login *** refused"
        );
    }

    #[test]
    fn a_postgres_url_hides_its_password_and_not_its_database_name() {
        let s = Secrets::new([
            "postgres://hb:Pg-pass-4u@db.example/heartbeat".to_string(),
            "host=/run/postgresql user=hb password='Kv-9 x' dbname=heartbeat".to_string(),
            "host=db user=hb password=Plain-77q dbname=heartbeat".to_string(),
        ]);
        let shown = s
            .redact("heartbeat: auth Pg-pass-4u, Kv-9 x, Plain-77q failed for db heartbeat")
            .into_string();
        assert_eq!(
            shown,
            "heartbeat: auth ***, ***, *** failed for db heartbeat"
        );
    }
}
