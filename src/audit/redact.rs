//! Redaction: what never reaches a line of the audit log.
//!
//! Invariants:
//! - Values under secret-looking keys are replaced by `"***"` at any depth (a null stays
//!   null: nothing to hide), and a registered secret (the Telegram token) is cut out of
//!   every string, also inside longer ones.
//! - Redaction is idempotent: `***` holds no secret.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// `s` with every registered secret in it replaced by `***`, also inside longer strings (an
/// error message that quotes a URL with the token). Borrowed when there is none.
pub fn cut_secrets<'s>(s: &'s str, secrets: &[String]) -> Cow<'s, str> {
    if !secrets.iter().any(|secret| s.contains(secret.as_str())) {
        return Cow::Borrowed(s);
    }
    let mut s = s.to_string();
    for secret in secrets {
        s = s.replace(secret.as_str(), "***");
    }
    Cow::Owned(s)
}

/// Whether a value under `key` is written as `"***"` (a null stays null: nothing to hide).
fn hides(key: &str, is_null: bool) -> bool {
    !is_null && is_secret_key(key)
}

/// Whether values under this key are never written: it contains `token`, `secret`,
/// `password`, `passwd`, `api_key` or `authorization`, in any case.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "api_key",
        "authorization",
    ]
    .iter()
    .any(|f| key.contains(f))
}

/// Whether [`redact`] would change anything in `map` (no registered secrets), without
/// copying it.
pub fn has_secret_keys(map: &Map<String, Value>) -> bool {
    fn value(v: &Value) -> bool {
        match v {
            Value::Object(m) => has_secret_keys(m),
            Value::Array(items) => items.iter().any(value),
            _ => false,
        }
    }
    map.iter().any(|(k, v)| hides(k, v.is_null()) || value(v))
}

/// Replace, recursively, values under secret-looking keys and registered secrets in strings.
pub fn redact(value: &mut Value, secrets: &[String]) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if hides(k, v.is_null()) {
                    *v = Value::String("***".into());
                } else {
                    redact(v, secrets);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, secrets)),
        Value::String(s) => {
            if let Cow::Owned(cut) = cut_secrets(s, secrets) {
                *s = cut;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_and_secret_values_are_redacted() {
        let mut v = json!({
            "api_key": "k", "Authorization": "Bearer x", "nested": {"db_PASSWORD": "p", "ok": "123:ABC"},
            "error": "GET https://api/bot123:ABC/getMe failed",
            "list": [{"passwd": 1}], "my_token": null, "url": "https://x"
        });
        redact(&mut v, &["123:ABC".to_string()]);
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
    fn secret_key_detection() {
        for key in [
            "token",
            "MY_TOKEN",
            "db_Password",
            "x-api_key-y",
            "Authorization",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in ["task_id", "tok", "pass", "input", "é_note", ""] {
            assert!(!is_secret_key(key), "{key}");
        }
        // has_secret_keys agrees with what redact changes.
        for v in [
            json!({"a": 1, "b": {"c": [1, {"d": 2}]}}),
            json!({"a": 1, "b": {"c": [1, {"token": 2}]}}),
            json!({"password": null}),
            json!({"Api_Key": "x"}),
        ] {
            let map = v.as_object().unwrap();
            let mut redacted = v.clone();
            redact(&mut redacted, &[]);
            assert_eq!(has_secret_keys(map), redacted != v, "{v}");
        }
    }
}
