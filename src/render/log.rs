//! `heartbeat log`'s lines for people: one line per audit event, `<local time>  <event>
//! <what happened>`, and below a success whose output has several lines, its first
//! non-blank ones (up to 5), indented. Pure: the caller reads and prints.
//!
//! Invariants:
//! - Every text taken from the log passes through [`clean`] (no control characters reach a
//!   terminal), and every free text is redacted, then cut to lines of [`TEXT_MAX`].
//! - Every event heartbeat writes is matched by its [`EventKind`], exhaustively: a new event
//!   does not compile until it has a line here (which may be the plain `key=value …` one).
//! - An event this build does not know (a line from another version, or not heartbeat's) is
//!   shown as `key=value …`, so a line is never lost for want of a description.

use std::path::Path;

use chrono_tz::Tz;
use serde_json::{Map, Value};

use super::{show_path, show_time};
use crate::audit::{EventKind, Secrets, parse_ts};
use crate::text::clean;

/// Longest free text in a human line.
const TEXT_MAX: usize = 120;

/// How audit lines are shown: in which zone, relative to which directory, hiding what.
pub(crate) struct LogView<'a> {
    pub tz: Tz,
    pub cwd: &'a Path,
    /// Hidden again when shown: the log is redacted when written, but a config read later
    /// may have registered more.
    pub secrets: Secrets,
}

impl LogView<'_> {
    /// One event for people: `<local time>  <event>  <what happened>`.
    pub(crate) fn line(&self, obj: &Map<String, Value>) -> String {
        let ts = obj.get("ts").and_then(Value::as_str);
        let time = match ts.and_then(parse_ts) {
            Some(t) => t
                .with_timezone(&self.tz)
                .format("%Y-%m-%d %H:%M:%S %Z")
                .to_string(),
            None => clean(ts.unwrap_or("-")),
        };
        let event = obj.get("event").and_then(Value::as_str).unwrap_or("-");
        let f = Fields { obj, view: self };
        let what = f.describe(event);
        let mut line = format!("{time}  {}  {what}", clean(event))
            .trim_end()
            .to_string();
        // A success's output of several lines: its first ones below, under the event's name.
        if event == EventKind::TaskSucceeded.as_str() && f.text("summary").is_none() {
            let lines = f.output_lines();
            if lines.len() > 1 {
                let indent = time.chars().count() + 2;
                for l in lines {
                    line.push_str(&format!("\n{:indent$}{l}", ""));
                }
            }
        }
        line
    }

    /// One line of `text`, cut to [`TEXT_MAX`] after redaction.
    fn cut(&self, text: &str) -> String {
        self.secrets.redact(text).first_line(TEXT_MAX).into_string()
    }
}

/// The fields of one line, read for [`LogView::line`]; every text comes out cleaned.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    view: &'a LogView<'a>,
}

impl Fields<'_> {
    /// A string field (not empty), cleaned and cut to one line.
    fn text(&self, key: &str) -> Option<String> {
        match self.obj.get(key)? {
            Value::String(s) if !s.trim().is_empty() => Some(self.view.cut(s)),
            _ => None,
        }
    }

    /// A scalar field as text (numbers, booleans, strings); None for null and missing.
    fn scalar(&self, key: &str) -> Option<String> {
        match self.obj.get(key)? {
            Value::String(_) => self.text(key),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    fn count(&self, key: &str) -> u64 {
        self.obj.get(key).and_then(Value::as_u64).unwrap_or(0)
    }

    /// A time field in the configured zone.
    fn time(&self, key: &str) -> Option<String> {
        let raw = self.obj.get(key)?.as_str()?;
        Some(match parse_ts(raw) {
            Some(t) => show_time(t, self.view.tz),
            None => self.view.cut(raw),
        })
    }

    /// The first non-blank lines of the `output` field, each cleaned, redacted and cut.
    fn output_lines(&self) -> Vec<String> {
        match self.obj.get("output") {
            Some(Value::String(s)) => self
                .view
                .secrets
                .redact(s)
                .first_lines(crate::render::terminal::OUTPUT_LINES, TEXT_MAX)
                .into_iter()
                .map(crate::text::Redacted::into_string)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the `error` field already holds the first line of the text field `key`: a
    /// failed process's error carries the first line of its stderr
    /// (docs/reference.md#tool-output), which is not said twice.
    fn error_holds(&self, key: &str) -> bool {
        let raw = |k: &str| self.obj.get(k).and_then(Value::as_str).unwrap_or("");
        let first: String = clean(
            raw(key)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or(""),
        )
        .trim()
        .chars()
        .take(100)
        .collect();
        !first.is_empty() && clean(raw("error")).contains(&first)
    }

    /// `@tool`.
    fn tool(&self) -> Option<String> {
        self.text("tool").map(|t| format!("@{t}"))
    }

    /// `HEARTBEAT.md:3` (`:column` too when there is one), relative to the working directory.
    fn place(&self) -> Option<String> {
        let file = self.obj.get("file")?.as_str()?;
        let mut place = clean(&show_path(Path::new(file), self.view.cwd));
        for key in ["line", "column"] {
            match self.obj.get(key).and_then(Value::as_u64) {
                Some(n) => place.push_str(&format!(":{n}")),
                None => break,
            }
        }
        Some(place)
    }

    /// Where the task is, or else its id.
    fn place_or_task(&self) -> Option<String> {
        self.place().or_else(|| self.task())
    }

    fn task(&self) -> Option<String> {
        self.text("task_id").map(|id| format!("task {id}"))
    }

    /// `#3`.
    fn approval(&self) -> Option<String> {
        self.obj
            .get("approval_id")
            .and_then(Value::as_i64)
            .map(|id| format!("#{id}"))
    }

    /// ` (12 ms)`, or nothing.
    fn took(&self) -> String {
        self.obj
            .get("duration_ms")
            .and_then(Value::as_u64)
            .map(|ms| format!(" ({ms} ms)"))
            .unwrap_or_default()
    }

    /// A tool's input as compact JSON, cut.
    fn input(&self) -> Option<String> {
        let input = self.obj.get("input").filter(|v| !v.is_null())?;
        Some(self.view.cut(&input.to_string()))
    }

    fn describe(&self, event: &str) -> String {
        match event.parse() {
            Ok(kind) => self.describe_kind(kind),
            Err(_) => self.generic(),
        }
    }

    fn describe_kind(&self, kind: EventKind) -> String {
        match kind {
            EventKind::RunStarted => {
                let mut parts = vec![];
                parts.extend(self.text("mode"));
                parts.extend(self.text("autonomy").map(|a| format!("autonomy {a}")));
                if let Some(files) = self.obj.get("files").and_then(Value::as_array) {
                    let n = files.len();
                    parts.push(format!("{n} file{}", if n == 1 { "" } else { "s" }));
                }
                if let Some(pid) = self.scalar("pid") {
                    parts.push(match self.text("host") {
                        Some(host) => format!("pid {pid} on {host}"),
                        None => format!("pid {pid}"),
                    });
                }
                let run = self.text("run_id").map(|r| format!("run {r}"));
                join2(run, Some(parts.join(", ")))
            }
            EventKind::RunSkipped => {
                let mut s = self.text("reason").unwrap_or_default();
                if let Some(t) = self.time("next_active") {
                    s.push_str(&format!(", next active {t}"));
                }
                if let Some(t) = self.time("until") {
                    s.push_str(&format!(" until {t}"));
                }
                if let Some(pid) = self.scalar("holder_pid") {
                    s.push_str(&format!(", held by pid {pid}"));
                    if let Some(t) = self.time("holder_since") {
                        s.push_str(&format!(" since {t}"));
                    }
                }
                s
            }
            EventKind::RunFinished => {
                let counts: Vec<String> = ["succeeded", "failed", "queued", "skipped", "invalid"]
                    .iter()
                    .filter_map(|k| {
                        let n = self.count(k);
                        (n > 0).then(|| format!("{n} {k}"))
                    })
                    .collect();
                let counts = if counts.is_empty() {
                    "nothing ran".to_string()
                } else {
                    counts.join(", ")
                };
                format!("{counts}{}", self.took())
            }
            EventKind::TaskInvalid => join2(self.place_or_task(), self.text("error")),
            EventKind::TaskSucceeded => {
                // An output of several lines follows on lines of its own.
                let what = match self.text("summary") {
                    None if self.output_lines().len() > 1 => String::new(),
                    summary => summary.or_else(|| self.text("output")).unwrap_or_default(),
                };
                let mut s = join2(
                    self.task_head(),
                    Some(format!("{what}{}", self.took()).trim_start().to_string()),
                );
                if let Some(cost) = self.obj.get("cost_usd").and_then(Value::as_f64) {
                    s.push_str(&format!(" ${cost:.2}"));
                }
                s
            }
            EventKind::TaskFailed => {
                let error = self.text("error").unwrap_or_else(|| "failed".into());
                let key = ["output", "stderr"]
                    .into_iter()
                    .find(|k| self.text(k).is_some());
                let why = match key.and_then(|k| self.text(k).map(|out| (k, out))) {
                    Some((k, out)) if !self.error_holds(k) => format!("{error}: {out}"),
                    _ => error,
                };
                join2(self.task_head(), Some(format!("{why}{}", self.took())))
            }
            EventKind::TaskReminded => join2(self.place_or_task(), self.text("text")),
            EventKind::TaskMissed => join2(
                words([self.tool(), self.place_or_task()]),
                Some(match self.text("slot") {
                    Some(slot) => format!(
                        "slot {slot} missed ({}){}",
                        self.text("reason").unwrap_or_default(),
                        self.scalar("count")
                            .map(|n| format!(", and {n} earlier"))
                            .unwrap_or_default()
                    ),
                    None => "a slot missed".into(),
                }),
            ),
            EventKind::TaskSkipped => join2(
                words([self.tool(), self.place_or_task()]),
                self.text("reason"),
            ),
            EventKind::TaskTripped => join2(
                words([self.tool(), self.place_or_task()]),
                Some(format!("{} failures in a row", self.count("failures"))),
            ),
            EventKind::TaskRetryScheduled => join2(
                self.task(),
                Some(format!(
                    "attempt {} failed, tried again at {}{}",
                    self.count("attempt"),
                    self.text("at").unwrap_or_default(),
                    self.text("error")
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                )),
            ),
            EventKind::TaskMarkedDone | EventKind::TaskMarkSkipped => {
                join2(self.place_or_task(), self.text("reason"))
            }
            EventKind::TaskReset => {
                let mut s = format!("{} failures cleared", self.count("failures"));
                if self.obj.get("tripped") == Some(&Value::Bool(true)) {
                    s.push_str(" (was tripped)");
                }
                if let Some(by) = self.text("by") {
                    s.push_str(&format!(" by {by}"));
                }
                join2(self.task(), Some(s))
            }
            EventKind::ApprovalRequested => join2(
                words([self.approval(), self.tool(), self.place_or_task()]),
                self.input(),
            ),
            EventKind::ApprovalApproved | EventKind::ApprovalDenied => {
                let mut s = words([self.approval(), self.text("by").map(|b| format!("by {b}"))]);
                if self.obj.get("always") == Some(&Value::Bool(true)) {
                    s.push_str(" (always)");
                }
                if let Some(reason) = self.text("reason") {
                    s.push_str(&format!(": {reason}"));
                }
                s
            }
            EventKind::ApprovalExpired | EventKind::ApprovalStale => {
                let head = words([self.approval(), self.task()]);
                match self.text("reason") {
                    Some(reason) => format!("{head}: {reason}"),
                    None => head,
                }
            }
            EventKind::NotificationSent => words([
                self.text("channel"),
                self.scalar("chat_id"),
                self.text("kind"),
            ]),
            EventKind::NotificationFailed => {
                let mut s = words([self.text("channel"), self.scalar("chat_id")]);
                if let Some(error) = self.text("error") {
                    s.push_str(&format!(": {error}"));
                }
                let mut notes: Vec<String> = self.text("kind").into_iter().collect();
                if self.obj.get("queued") == Some(&Value::Bool(true)) {
                    notes.push("kept to retry".into());
                }
                if !notes.is_empty() {
                    s.push_str(&format!(" ({})", notes.join(", ")));
                }
                s
            }
            EventKind::BudgetExhausted => {
                let usd = |k| self.obj.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                format!("${:.2} of ${:.2} spent", usd("spent_usd"), usd("daily_usd"))
            }
            EventKind::Paused | EventKind::Resumed => {
                let mut s = if kind == EventKind::Paused {
                    match self.time("until") {
                        Some(t) => format!("until {t}"),
                        None => "until resumed".into(),
                    }
                } else {
                    String::new()
                };
                if let Some(by) = self.text("by") {
                    s = words([Some(s).filter(|s| !s.is_empty()), Some(format!("by {by}"))]);
                }
                if let Some(reason) = self.text("reason") {
                    s = if s.is_empty() {
                        reason
                    } else {
                        format!("{s}: {reason}")
                    };
                }
                s
            }
            EventKind::DaemonStarted
            | EventKind::DaemonStopped
            | EventKind::ConfigReloaded
            | EventKind::TickFailed => {
                let mut s = words([
                    self.scalar("pid").map(|p| format!("pid {p}")),
                    self.text("signal"),
                ]);
                if let Some(error) = self.text("error") {
                    s = if s.is_empty() {
                        error
                    } else {
                        format!("{s}: {error}")
                    };
                }
                s
            }
            EventKind::TelegramRejected => words([
                self.scalar("chat_id").map(|c| format!("chat {c}")),
                self.text("kind"),
            ]),
            EventKind::ChannelRejected => words([
                self.text("channel").map(|c| format!("reply on {c}")),
                self.text("reason"),
            ]),
            EventKind::MonitorPingFailed => match (self.text("monitor"), self.text("error")) {
                (Some(m), Some(e)) => format!("{m}: {e}"),
                (m, e) => words([m, e]),
            },
            EventKind::GrantRevoked => {
                words([self.task(), self.text("by").map(|b| format!("by {b}"))])
            }
            EventKind::NodeForgotten => words([
                self.text("node").map(|n| format!("node {n}")),
                self.text("by").map(|b| format!("by {b}")),
            ]),
            EventKind::TaskSnoozed | EventKind::TaskUnsnoozed => {
                let until = match kind {
                    EventKind::TaskSnoozed => self.time("until").map(|t| format!("until {t}")),
                    _ => None,
                };
                join2(
                    self.place_or_task(),
                    Some(words([
                        until,
                        self.text("by").map(|b| format!("by {b}")),
                        self.text("reason").map(|r| format!("({r})")),
                    ]))
                    .filter(|s| !s.is_empty()),
                )
            }
            // Their fields say it best.
            EventKind::TaskProposed
            | EventKind::ProposalRefused
            | EventKind::NotificationHeld
            | EventKind::NotificationFolded
            | EventKind::NotificationDropped
            | EventKind::StatePruned
            | EventKind::AuditRotated => self.generic(),
        }
    }

    /// `@tool HEARTBEAT.md:3 #2`: the head of a task's outcome.
    fn task_head(&self) -> Option<String> {
        Some(words([self.tool(), self.place_or_task(), self.approval()])).filter(|s| !s.is_empty())
    }

    /// `key=value …`: for an event this build does not know, and those whose fields say it
    /// best.
    fn generic(&self) -> String {
        let mut parts = vec![];
        for (k, v) in self.obj {
            if k == "ts" || k == "event" || v.is_null() {
                continue;
            }
            let value = match v {
                Value::String(s)
                    if !s.is_empty()
                        && !s
                            .chars()
                            .any(|c| c.is_whitespace() || c.is_control() || c == '"') =>
                {
                    s.clone()
                }
                other => other.to_string(),
            };
            parts.push(format!("{}={}", clean(k), self.view.cut(&value)));
        }
        parts.join(" ")
    }
}

/// The parts that are there, joined by a space.
fn words<const N: usize>(parts: [Option<String>; N]) -> String {
    parts
        .into_iter()
        .flatten()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Two parts joined by two spaces (either may be missing).
fn join2(a: impl Into<Option<String>>, b: impl Into<Option<String>>) -> String {
    let (a, b) = (a.into(), b.into());
    match (a.filter(|s| !s.is_empty()), b.filter(|s| !s.is_empty())) {
        (Some(a), Some(b)) => format!("{a}  {b}"),
        (Some(a), None) => a,
        (None, Some(b)) => b,
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(line: Value) -> String {
        let view = LogView {
            tz: chrono_tz::Europe::Berlin,
            cwd: Path::new("/home/me"),
            secrets: Secrets::new(["s3cr3t-token".to_string()]),
        };
        let Value::Object(obj) = line else {
            panic!("not an object")
        };
        view.line(&obj)
    }

    #[test]
    fn a_line_is_time_in_the_zone_event_and_what_happened() {
        let line = show(
            json!({"ts": "2026-05-01T10:00:00.000Z", "event": "task_succeeded",
            "tool": "http", "file": "/home/me/HEARTBEAT.md", "line": 3, "summary": "ok",
            "duration_ms": 12, "cost_usd": 0.5}),
        );
        assert_eq!(
            line,
            "2026-05-01 12:00:00 CEST  task_succeeded  @http HEARTBEAT.md:3  ok (12 ms) $0.50"
        );
    }

    #[test]
    fn an_output_of_several_lines_follows_a_success_unless_it_has_a_summary() {
        let ok = |summary: Value| {
            show(
                json!({"ts": "2026-05-01T10:00:00.000Z", "event": "task_succeeded",
            "tool": "shell", "file": "/home/me/HEARTBEAT.md", "line": 3, "summary": summary,
            "output": "{\n  \"a\": 1\n}\n", "duration_ms": 2}),
            )
        };
        let pad = " ".repeat("2026-05-01 12:00:00 CEST  ".len());
        let lines = format!(
            "2026-05-01 12:00:00 CEST  task_succeeded  @shell HEARTBEAT.md:3  (2 ms)\n\
             {pad}{{\n{pad}  \"a\": 1\n{pad}}}"
        );
        assert_eq!(ok(Value::Null), lines);
        assert_eq!(ok(json!("")), lines);
        assert_eq!(
            ok(json!("done")),
            "2026-05-01 12:00:00 CEST  task_succeeded  @shell HEARTBEAT.md:3  done (2 ms)"
        );
    }

    #[test]
    fn a_failure_whose_error_holds_its_stderr_says_it_once() {
        let failed = |error: &str, output: &str, stderr: &str| {
            show(
                json!({"ts": "2026-05-01T10:00:00.000Z", "event": "task_failed",
            "tool": "shell", "file": "/home/me/HEARTBEAT.md", "line": 3, "error": error,
            "output": output, "stderr": stderr}),
            )
        };
        let tar = "tar: /nope: Cannot stat: No such file or directory";
        assert!(
            failed(
                &format!("exit status 2: {tar}"),
                "",
                &format!("{tar}\nmore\n")
            )
            .ends_with(&format!("@shell HEARTBEAT.md:3  exit status 2: {tar}")),
            "{}",
            failed(&format!("exit status 2: {tar}"), "", tar)
        );
        // Standard output is not in the error: said after it.
        assert!(
            failed("exit status 1", "boom\n", "").ends_with("  exit status 1: boom"),
            "{}",
            failed("exit status 1", "boom\n", "")
        );
    }

    #[test]
    fn a_run_that_counted_nothing_says_so() {
        let line = show(
            json!({"ts": "2026-05-01T10:00:00.000Z", "event": "run_finished",
            "run_id": "r1", "succeeded": 0, "duration_ms": 3}),
        );
        assert!(
            line.ends_with("  run_finished  nothing ran (3 ms)"),
            "{line}"
        );
        let line = show(
            json!({"ts": "2026-05-01T10:00:00.000Z", "event": "run_finished",
            "succeeded": 2, "failed": 1}),
        );
        assert!(line.ends_with("  2 succeeded, 1 failed"), "{line}");
    }

    #[test]
    fn an_unknown_event_shows_its_fields_and_a_bad_time_as_it_is() {
        let line = show(
            json!({"ts": "yesterday", "event": "new_thing", "a": "b c", "n": 2,
            "gone": null}),
        );
        assert_eq!(line, r#"yesterday  new_thing  a="b c" n=2"#);
        assert_eq!(show(json!({})), "-  -");
    }

    #[test]
    fn an_event_whose_fields_say_it_best_shows_them() {
        let line = show(
            json!({"ts": "2026-05-01T10:00:00.000Z", "event": "state_pruned",
            "run_id": "r1", "rows": 3}),
        );
        assert_eq!(
            line,
            "2026-05-01 12:00:00 CEST  state_pruned  run_id=r1 rows=3"
        );
    }

    #[test]
    fn a_pause_says_until_when_and_a_resume_does_not() {
        let at = |event: &str| {
            show(
                json!({"ts": "2026-05-01T10:00:00.000Z", "event": event, "until": null,
            "reason": "holiday", "by": "cli:ann"}),
            )
        };
        assert!(
            at("paused").ends_with("  paused  until resumed by cli:ann: holiday"),
            "{}",
            at("paused")
        );
        assert!(
            at("resumed").ends_with("  resumed  by cli:ann: holiday"),
            "{}",
            at("resumed")
        );
    }

    #[test]
    fn texts_are_cleaned_redacted_and_cut() {
        let line = show(
            json!({"ts": "2026-05-01T10:00:00.000Z", "event": "task_failed\u{1b}[2J",
            "error": format!("bad s3cr3t-token\nsecond line {}", "x".repeat(300))}),
        );
        assert!(!line.contains('\u{1b}') && !line.contains('\n'), "{line}");
        assert!(!line.contains("s3cr3t-token"), "{line}");
        assert!(line.chars().count() < 250, "{line}");
    }

    #[test]
    fn parts_join_by_one_space_and_halves_by_two() {
        assert_eq!(
            words([
                Some("a".into()),
                None,
                Some(String::new()),
                Some("b".into())
            ]),
            "a b"
        );
        assert_eq!(join2(Some("a".to_string()), Some("b".to_string())), "a  b");
        assert_eq!(join2(None, Some("b".to_string())), "b");
        assert_eq!(join2(Some(String::new()), None), "");
    }
}
