//! Redaction (SPEC §7, Secrets): the one step that stands before every sink — audit lines,
//! stdout and stderr, SQLite rows, Telegram messages.
//!
//! Invariants:
//! - Values under secret-looking keys ([`is_secret_key`]) become `"***"` at any depth,
//!   objects inside arrays too (a null stays null: nothing to hide).
//! - In every string, the values of secret-looking URL query parameters become `***`, and
//!   so does every registered secret (the Telegram token), also inside longer strings.
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

    /// Every secret this process took from its environment so far. Used for its standard
    /// output and error, which are the process's own, whatever the command.
    pub fn taken() -> Secrets {
        let taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
        Secrets::new(taken.iter().map(|(_, v)| v.clone()))
    }

    /// `s` with registered secrets and secret URL parameters replaced by `***`.
    pub fn text<'s>(&self, s: &'s str) -> Cow<'s, str> {
        let cut = self.cut(s);
        match redact_urls(&cut) {
            Cow::Borrowed(_) => cut,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn token() -> Secrets {
        Secrets::new(["123:ABC".to_string()])
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
            ("no url ?token=abc", "no url ?token=abc"),
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
