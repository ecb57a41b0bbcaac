//! The audit log: one JSON object per line, appended to `<state_dir>/audit.jsonl`.
//!
//! Invariants:
//! - `ts` and `event` are the first keys of every line, `run_id` the third on lines of a run.
//! - A line is serialised completely, then written with one `write` call on a file opened
//!   with O_APPEND, so lines of concurrent processes never interleave.
//! - Values under secret-looking keys are written as `"***"`, and so is a registered secret
//!   (the Telegram token) wherever it appears inside a string.
//! - Long texts are cut to [`TEXT_LIMIT`] bytes before they reach a line.
//! - Lines are not synced one by one; [`AuditLog::sync`] is called once at the end of a run.

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

/// The most bytes of a tool's output (or any other free text) kept in one audit line.
pub const TEXT_LIMIT: usize = 4096;

pub struct AuditLog {
    file: File,
    path: PathBuf,
    secrets: Vec<String>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the registered secrets.
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .finish()
    }
}

impl AuditLog {
    /// Open (creating, mode 0600) the log for appending.
    pub fn open(path: &Path) -> io::Result<AuditLog> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        // A crash can leave half a line at the end: start ours on a line of its own, so that
        // only the torn line is lost, never the next one.
        let len = file.metadata()?.len();
        if len > 0 {
            use std::os::unix::fs::FileExt;
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, len - 1)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(AuditLog {
            file,
            path: path.to_path_buf(),
            secrets: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Strings that must never appear in the log (the Telegram token).
    pub fn add_secret(&mut self, secret: String) {
        if !secret.is_empty() {
            self.secrets.push(secret);
        }
    }

    /// Append one event. `fields` keep their order after `ts`, `event` and `run_id`.
    pub fn record(
        &mut self,
        ts: DateTime<Utc>,
        event: &str,
        run_id: Option<&str>,
        fields: Map<String, Value>,
    ) -> io::Result<()> {
        let line = self.render(ts, event, run_id, fields);
        self.write_line(line.as_bytes())
    }

    /// Append a line from [`AuditLog::render`].
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        torn_point(&mut self.file, line);
        self.file.write_all(line)
    }

    /// The full line, newline included, as `record` writes it.
    pub fn render(
        &self,
        ts: DateTime<Utc>,
        event: &str,
        run_id: Option<&str>,
        fields: Map<String, Value>,
    ) -> String {
        let mut line = self.line(ts, event, run_id);
        for (k, v) in &fields {
            line.value(k, v);
        }
        line.finish()
    }

    /// A line written field by field straight into its buffer, redacted on the way: the
    /// same bytes as [`AuditLog::render`] of those fields, without building a map.
    pub fn line(&self, ts: DateTime<Utc>, event: &str, run_id: Option<&str>) -> Line<'_> {
        let mut line = Line {
            buf: Vec::with_capacity(256),
            secrets: &self.secrets,
        };
        line.plain("ts", &format_ts(ts));
        line.plain("event", event);
        if let Some(id) = run_id {
            line.plain("run_id", id);
        }
        line
    }

    /// Flush everything written so far to disk (once per run).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// See [`AuditLog::line`]. Keys are heartbeat's own; values under secret-looking keys are
/// written as `"***"`, and registered secrets are cut out of strings.
pub struct Line<'a> {
    buf: Vec<u8>,
    secrets: &'a [String],
}

impl Line<'_> {
    fn key(&mut self, key: &str) {
        self.buf.push(if self.buf.is_empty() { b'{' } else { b',' });
        let _ = serde_json::to_writer(&mut self.buf, key);
        self.buf.push(b':');
    }

    /// A string known to hold no secret (ids, timestamps, names of ours).
    fn plain(&mut self, key: &str, s: &str) {
        self.key(key);
        let _ = serde_json::to_writer(&mut self.buf, s);
    }

    /// Whether `key` hides its value (a null stays null).
    fn hidden(&mut self, key: &str, is_null: bool) -> bool {
        self.key(key);
        if hides(key, is_null) {
            self.buf.extend_from_slice(b"\"***\"");
            return true;
        }
        false
    }

    pub fn value(&mut self, key: &str, v: &Value) -> &mut Self {
        if !self.hidden(key, v.is_null()) {
            write_redacted(&mut self.buf, v, self.secrets);
        }
        self
    }

    pub fn map(&mut self, key: &str, m: &Map<String, Value>) -> &mut Self {
        if !self.hidden(key, false) {
            write_redacted_map(&mut self.buf, m, self.secrets);
        }
        self
    }

    pub fn str(&mut self, key: &str, s: &str) -> &mut Self {
        if !self.hidden(key, false) {
            write_redacted_str(&mut self.buf, s, self.secrets);
        }
        self
    }

    pub fn opt_str(&mut self, key: &str, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.str(key, s),
            None => self.value(key, &Value::Null),
        }
    }

    /// A path, as text (not UTF-8 bytes replaced).
    pub fn path(&mut self, key: &str, p: &Path) -> &mut Self {
        self.str(key, &p.to_string_lossy())
    }

    /// A number, a bool, or an option of one: nothing in it can be a secret (strings go
    /// through [`Line::str`] or [`Line::value`]). Keys here are heartbeat's own, never
    /// secret-looking.
    pub fn scalar<T: serde::Serialize>(&mut self, key: &str, v: T) -> &mut Self {
        debug_assert!(!is_secret_key(key), "{key}");
        self.key(key);
        // Serialising a scalar into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, &v);
        self
    }

    pub fn finish(mut self) -> String {
        self.buf.extend_from_slice(b"}\n");
        String::from_utf8(self.buf).unwrap_or_default()
    }
}

fn write_redacted(buf: &mut Vec<u8>, v: &Value, secrets: &[String]) {
    match v {
        Value::Object(m) => write_redacted_map(buf, m, secrets),
        Value::Array(items) => {
            buf.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                write_redacted(buf, item, secrets);
            }
            buf.push(b']');
        }
        Value::String(s) => write_redacted_str(buf, s, secrets),
        other => {
            let _ = serde_json::to_writer(&mut *buf, other);
        }
    }
}

fn write_redacted_map(buf: &mut Vec<u8>, m: &Map<String, Value>, secrets: &[String]) {
    buf.push(b'{');
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let _ = serde_json::to_writer(&mut *buf, k);
        buf.push(b':');
        if hides(k, v.is_null()) {
            buf.extend_from_slice(b"\"***\"");
        } else {
            write_redacted(buf, v, secrets);
        }
    }
    buf.push(b'}');
}

fn write_redacted_str(buf: &mut Vec<u8>, s: &str, secrets: &[String]) {
    let _ = serde_json::to_writer(&mut *buf, &cut_secrets(s, secrets));
}

/// `s` with every registered secret in it replaced by `***`, also inside longer strings (an
/// error message that quotes a URL with the token). Borrowed when there is none.
fn cut_secrets<'s>(s: &'s str, secrets: &[String]) -> Cow<'s, str> {
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

/// The `audit_torn` fault point (debug builds): a crash while `line` is written, leaving
/// half of it.
fn torn_point(file: &mut File, line: &[u8]) {
    crate::fault::point_then("audit_torn", || {
        let _ = file.write_all(&line[..line.len() / 2]);
    });
}

/// RFC 3339, UTC, milliseconds, `Z`.
pub fn format_ts(ts: DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Whether values under this key are never written: it contains `token`, `secret`,
/// `password`, `passwd`, `api_key` or `authorization`, in any case.
fn is_secret_key(key: &str) -> bool {
    // Case-insensitive substring search without allocating: this runs for every key of
    // every audit line. A comparison starts only where a fragment's first letter is.
    let key = key.as_bytes();
    let at = |i: usize, fragment: &str| {
        key.get(i..i + fragment.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(fragment.as_bytes()))
    };
    (0..key.len()).any(|i| match key[i].to_ascii_lowercase() {
        b't' => at(i, "token"),
        b's' => at(i, "secret"),
        b'p' => at(i, "password") || at(i, "passwd"),
        b'a' => at(i, "api_key") || at(i, "authorization"),
        _ => false,
    })
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

/// Replace, recursively, values under secret-looking keys and strings equal to a secret.
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

/// `text` cut to at most `limit` bytes on a character boundary, with a note of how much
/// was left out: what was cut here plus `dropped`, bytes the producer never kept.
pub fn truncate(text: &str, limit: usize, dropped: u64) -> String {
    if text.len() <= limit && dropped == 0 {
        return text.to_string();
    }
    let mut end = limit.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let left_out = (text.len() - end) as u64 + dropped;
    format!("{}… [{left_out} more bytes]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn ts_event_and_run_id_come_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(&dir.path().join("a.jsonl")).unwrap();
        let ts = "2026-03-29T01:00:00Z".parse().unwrap();
        let line = log.render(
            ts,
            "run_started",
            Some("r1"),
            fields(json!({"mode": "once"})),
        );
        assert_eq!(
            line,
            "{\"ts\":\"2026-03-29T01:00:00.000Z\",\"event\":\"run_started\",\"run_id\":\"r1\",\"mode\":\"once\"}\n"
        );
    }

    #[test]
    fn secret_keys_and_secret_values_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = AuditLog::open(&dir.path().join("a.jsonl")).unwrap();
        log.add_secret("123:ABC".into());
        let input = json!({
            "api_key": "k", "Authorization": "Bearer x", "nested": {"db_PASSWORD": "p", "ok": "123:ABC"},
            "error": "GET https://api/bot123:ABC/getMe failed",
            "list": [{"passwd": 1}], "my_token": null, "url": "https://x"
        });
        let line = log.render(
            Utc::now(),
            "task_succeeded",
            None,
            fields(json!({"input": input})),
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v["input"],
            json!({
                "api_key": "***", "Authorization": "***", "nested": {"db_PASSWORD": "***", "ok": "***"},
                "error": "GET https://api/bot***/getMe failed",
                "list": [{"passwd": "***"}], "my_token": null, "url": "https://x"
            })
        );
    }

    #[test]
    fn a_line_field_by_field_is_the_rendered_map() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = AuditLog::open(&dir.path().join("a.jsonl")).unwrap();
        log.add_secret("123:ABC".into());
        let ts = Utc::now();
        let input = json!({"cmd": ["ls", "x 123:ABC y"], "api_token": "t", "n": 1.5, "z": null});
        let map = input.as_object().unwrap();
        let expected = log.render(
            ts,
            "task_failed",
            Some("r1"),
            fields(json!({
                "task_id": "abc", "file": "/x/HEARTBEAT.md", "line": 3, "input": input,
                "exit_code": null, "output": "bot123:ABC\n\"q\"", "error": "boom",
                "cost_usd": 0.25, "approval_id": 7, "summary": null,
                "password": "hidden", "secret_but_null": null
            })),
        );
        let mut line = log.line(ts, "task_failed", Some("r1"));
        line.str("task_id", "abc")
            .path("file", Path::new("/x/HEARTBEAT.md"))
            .scalar("line", 3usize)
            .map("input", map)
            .scalar("exit_code", None::<i32>)
            .str("output", "bot123:ABC\n\"q\"")
            .opt_str("error", Some("boom"))
            .scalar("cost_usd", Some(0.25))
            .scalar("approval_id", Some(7i64))
            .opt_str("summary", None)
            .str("password", "hidden")
            .value("secret_but_null", &Value::Null);
        let got = line.finish();
        assert_eq!(got, expected);
        let v: Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["input"]["api_token"], "***");
        assert_eq!(v["input"]["cmd"][1], "x *** y");
        assert_eq!(v["output"], "bot***\n\"q\"");
        assert_eq!(v["password"], "***");
        assert_eq!(v["secret_but_null"], Value::Null);
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
        // Long keys too.
        assert!(is_secret_key(&format!("{}SECRET", "k".repeat(80))));
        assert!(!is_secret_key(&"k".repeat(80)));
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

    #[test]
    fn lines_are_appended_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut a = AuditLog::open(&path).unwrap();
        let mut b = AuditLog::open(&path).unwrap();
        let big = "x".repeat(100_000);
        for i in 0..20 {
            let log = if i % 2 == 0 { &mut a } else { &mut b };
            log.record(Utc::now(), "e", None, fields(json!({"i": i, "big": big})))
                .unwrap();
        }
        a.sync().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 20);
        for (i, line) in lines.iter().enumerate() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["i"], json!(i));
        }
    }

    #[test]
    fn a_torn_last_line_is_ended_before_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{\"ts\":\"x\",\"event\":\"a\"}\n{\"ts\":\"x\",\"ev").unwrap();
        let mut log = AuditLog::open(&path).unwrap();
        log.record(Utc::now(), "b", None, Map::new()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(serde_json::from_str::<Value>(lines[2]).is_ok(), "{text}");
        // A file that ends properly gets nothing extra.
        drop(AuditLog::open(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn truncate_keeps_char_boundaries() {
        assert_eq!(truncate("abc", 3, 0), "abc");
        assert_eq!(truncate("aé", 2, 0), "a… [2 more bytes]");
        assert_eq!(truncate("abcdef", 4, 0), "abcd… [2 more bytes]");
        // Bytes the producer dropped count too.
        assert_eq!(truncate("abcdef", 4, 10), "abcd… [12 more bytes]");
        assert_eq!(truncate("abc", 4, 10), "abc… [10 more bytes]");
    }
}
