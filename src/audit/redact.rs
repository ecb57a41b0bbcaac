//! Redaction (SPEC §7, Secrets): the one step that stands before every sink — audit lines,
//! stdout and stderr, SQLite rows, Telegram messages.
//!
//! Invariants:
//! - Values under secret-looking keys ([`is_secret_key`]) become `"***"` at any depth,
//!   objects inside arrays too (a null stays null: nothing to hide).
//! - In every string, the values of secret-looking URL query parameters become `***`, and
//!   so does every registered secret (the Telegram token, MCP servers' secret values, and
//!   in a task's outcome the values under its input's secret keys), also inside longer
//!   strings.
//! - In every string, so does the value of a secret-looking key written as `KEY=VALUE`, as
//!   JSON text (`"access_token": "…"`, a key after `{` or `,`) or as an HTTP credential
//!   (`Bearer …`): tool output and command lines carry secrets in those forms. A key
//!   followed by `: ` and prose (`Authorization: the variable …`) is left alone. A quoted
//!   value ends at its closing quote or, when that was cut off, at the end of its line.
//! - Redaction runs before any text is cut to a limit: a secret that straddles the cut
//!   would otherwise survive minus its tail.
//! - Redaction is idempotent: `***` holds no secret.
//! - A secret variable is read from the environment once per process ([`take_env`]): it is
//!   then removed from heartbeat's environment and its bytes overwritten in the process's
//!   original environment block, and the process is made non-dumpable, so that neither a
//!   tool nor another process of the user can read it back.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::config::{Config, McpTransport};

/// What a redacted value becomes.
pub const STARS: &str = "***";

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

/// The strings this process must never show: the Telegram token (and, later, the secret
/// environment values of MCP servers). Cheap to clone; never printed by `Debug`.
#[derive(Clone, Default)]
pub struct Secrets {
    values: Arc<Vec<String>>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} registered)", self.values.len())
    }
}

/// Secret variables this process took out of its environment: (name, value).
static TAKEN: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

impl Secrets {
    /// These strings (empty ones are ignored: they would match everywhere).
    pub fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut values: Vec<String> = values.into_iter().filter(|v| !v.is_empty()).collect();
        // Longest first, so that a secret containing another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Secrets {
            values: Arc::new(values),
        }
    }

    /// The secrets a command works with: the config's token variable, taken from the
    /// environment (see [`take_env`]), with every secret this process took before (a
    /// daemon whose reloaded config names another variable still hides the old token).
    pub fn from_config(cfg: &Config) -> Secrets {
        if let Some(tc) = &cfg.telegram {
            take_env(&tc.bot_token_env);
        }
        // MCP servers' variables (SPEC §12): `env` and `headers_env` values are secrets.
        for server in cfg.mcp.values() {
            for name in &server.env {
                take_env(name);
            }
            if let McpTransport::Http { headers_env, .. } = &server.transport {
                for (_, name) in headers_env {
                    take_env(name);
                }
            }
        }
        Secrets::taken()
    }

    /// These secrets and the values a task's input holds under secret keys, at any depth:
    /// a tool given `{"env": {"API_TOKEN": "…"}}` may print the value back, bare, in its
    /// output or errors. Values shorter than [`MIN_INPUT_SECRET`] characters are left out:
    /// they would cut ordinary words out of the output.
    pub fn with_input(&self, input: &Map<String, Value>) -> Secrets {
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
        Secrets::new(self.values.iter().cloned().chain(found))
    }

    /// Every secret this process took from its environment so far. Used for its standard
    /// output and error, which are the process's own, whatever the command.
    pub fn taken() -> Secrets {
        let taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
        Secrets::new(taken.iter().map(|(_, v)| v.clone()))
    }

    /// `s` with registered secrets, the secrets of URLs and the values of secret keys in
    /// free text replaced by `***`.
    pub fn text<'s>(&self, s: &'s str) -> Cow<'s, str> {
        let cut = self.cut(s);
        let urls = match redact_urls(&cut) {
            Cow::Borrowed(_) => cut,
            Cow::Owned(o) => Cow::Owned(o),
        };
        match redact_pairs(&urls) {
            Cow::Borrowed(_) => urls,
            Cow::Owned(o) => Cow::Owned(o),
        }
    }

    /// [`Secrets::text`], owned.
    pub fn string(&self, s: &str) -> String {
        self.text(s).into_owned()
    }

    /// Redact a JSON value in place: secret keys at any depth, and every string.
    pub fn value(&self, value: &mut Value) {
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

    /// A task input as it may be shown or stored.
    pub fn map(&self, input: &Map<String, Value>) -> Value {
        let mut v = Value::Object(input.clone());
        self.value(&mut v);
        v
    }

    /// Registered secrets in `s` replaced by `***`.
    fn cut<'s>(&self, s: &'s str) -> Cow<'s, str> {
        if !self.values.iter().any(|secret| s.contains(secret.as_str())) {
            return Cow::Borrowed(s);
        }
        let mut s = s.to_string();
        for secret in self.values.iter() {
            s = s.replace(secret.as_str(), STARS);
        }
        Cow::Owned(s)
    }
}

/// The value of the secret environment variable `name` (trimmed; None when unset or
/// blank). The first time, it is taken out of the environment: removed from heartbeat's
/// own, overwritten in the original block that `/proc/<pid>/environ` shows, and the process
/// becomes non-dumpable. Later calls return the value remembered.
pub fn take_env(name: &str) -> Option<String> {
    let mut taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, v)) = taken.iter().find(|(n, _)| n == name) {
        return Some(v.clone()).filter(|v| !v.is_empty());
    }
    let raw = std::env::var_os(name)?;
    crate::sys::forget_env(name);
    crate::sys::set_non_dumpable();
    let value = raw.to_string_lossy().trim().to_string();
    taken.push((name.to_string(), value.clone()));
    Some(value).filter(|v| !v.is_empty())
}

/// A key name without case, `-` or `_`.
fn normal(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether values under this key are never shown (SPEC §7).
pub fn is_secret_key(key: &str) -> bool {
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
pub fn has_secret_keys(map: &Map<String, Value>) -> bool {
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
        assert_eq!(format!("{s:?}"), "Secrets(2 registered)");
    }
}
