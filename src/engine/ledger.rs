//! The run's records: SQLite and the audit log, and the order between them.
//!
//! Invariant (docs/reference.md#audit-events): an audit line is written after the SQLite
//! commit that records what it tells, so the log never shows an outcome, a claim or a
//! decision that SQLite does not know. A tool run is recorded by [`Ledger::tool_run`]: its
//! row first, its line only once the row is committed. Every other line of a session is
//! written by [`Ledger::record`] after the store call that commits its fact returned.

use std::path::Path;

use chrono::{DateTime, Utc};

use crate::audit::{AuditLog, Event, Secrets, TEXT_LIMIT};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::store::{Store, TaskRunRecord};
use crate::text::Redacted;
use crate::tools;

/// The longest summary a tool can report, in characters (longer ones are cut, with `…`).
const SUMMARY_CHARS: usize = 200;

pub struct Ledger {
    pub store: Box<dyn Store>,
    audit: AuditLog,
    /// Where each audit line reads the time it happened.
    clock: Clock,
}

/// A tool run that could not be kept: its row (then no line was written), or its line (the
/// row is committed).
#[derive(Debug)]
pub enum NotKept {
    Row(Error),
    Line(Error),
}

impl Ledger {
    pub fn new(store: Box<dyn Store>, audit: AuditLog, clock: Clock) -> Ledger {
        Ledger {
            store,
            audit,
            clock,
        }
    }

    /// What no sink of the run shows: the audit log's secrets.
    pub fn secrets(&self) -> &Secrets {
        self.audit.secrets()
    }

    /// The time now, as audit lines read it.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// One audit line, stamped with the time it is written.
    pub fn record(&mut self, event: &Event) -> Result<()> {
        self.record_at(self.clock.now(), event)
    }

    /// One audit line, stamped with `at` (`run_started` carries the run's start).
    pub fn record_at(&mut self, at: DateTime<Utc>, event: &Event) -> Result<()> {
        self.audit
            .record(at, event)
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    /// A finished tool run: its row (history, the task's streak, an approval's outcome)
    /// committed, then its `task_succeeded` / `task_failed` line. Returns the task's
    /// failures in a row.
    pub fn tool_run(
        &mut self,
        row: &TaskRunRecord,
        event: &Event,
    ) -> std::result::Result<u32, NotKept> {
        crate::fault::point("task_done");
        let failures = self
            .store
            .record_task_run(row)
            .map_err(|e| NotKept::Row(e.into()))?;
        self.record(event).map_err(NotKept::Line)?;
        crate::fault::point("task_recorded");
        Ok(failures)
    }

    /// Flush the audit log to disk.
    pub fn sync(&mut self) -> Result<()> {
        self.audit
            .sync()
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    pub fn audit_path(&self) -> &Path {
        self.audit.path()
    }

    /// The store and the audit log, for what follows the run.
    pub fn into_parts(self) -> (Box<dyn Store>, AuditLog) {
        (self.store, self.audit)
    }
}

/// A tool's outcome as its records show it. Redacted before anything is cut: a secret
/// straddling the cut would keep all but its tail.
#[derive(Debug)]
pub struct Shown {
    /// Standard output, cut to the line limit.
    pub output: Redacted,
    /// Standard error, cut to the line limit.
    pub stderr: Redacted,
    /// The tool's error alone (an approval's reason).
    pub bare_error: Option<Redacted>,
    /// The error with the first line of standard error.
    pub error: Option<Redacted>,
    /// The tool's one-line summary (docs/reference.md#tool-output).
    pub summary: Option<Redacted>,
}

impl Shown {
    pub fn of(outcome: &tools::Outcome, secrets: &Secrets) -> Shown {
        let stdout = secrets.redact(&outcome.stdout);
        let stderr = secrets.redact(&outcome.stderr);
        // An error may repeat a tool's whole first line (an MCP tool's `isError` text, an
        // HTTP error page): cut, after redaction, like any text kept in a line.
        let bare_error = outcome
            .error
            .as_deref()
            .map(|e| secrets.redact(e).truncate(TEXT_LIMIT, 0));
        let error = bare_error.as_ref().map(|e| {
            let stderr = stderr.first_line(200);
            if stderr.is_empty() {
                e.clone()
            } else {
                secrets.redact(&format!("{e}: {stderr}"))
            }
        });
        // One line, cut after redaction: a tool's "summary" of a megabyte would otherwise
        // become a flood of Telegram messages.
        let summary = outcome
            .summary
            .as_deref()
            .map(|s| secrets.redact(s).first_line(SUMMARY_CHARS));
        Shown {
            output: stdout.truncate(TEXT_LIMIT, outcome.stdout_dropped),
            stderr: stderr.truncate(TEXT_LIMIT, outcome.stderr_dropped),
            bare_error,
            error,
            summary,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::audit::event::TaskRun;
    use crate::text::RedactedJson;

    pub(crate) const NOW: &str = "2026-05-01T10:00:00Z";

    /// A ledger on a fresh store and audit log in `dir`, its clock fixed at [`NOW`].
    pub(crate) fn ledger(dir: &Path) -> Ledger {
        let store = Box::new(crate::store::Sqlite::open(dir).unwrap());
        let audit = AuditLog::open(&dir.join("audit.jsonl"), Secrets::default()).unwrap();
        Ledger::new(store, audit, Clock::starting_at(NOW.parse().unwrap()))
    }

    pub(crate) fn lines(dir: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.join("audit.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn row(succeeded: bool) -> TaskRunRecord<'static> {
        let now = NOW.parse().unwrap();
        TaskRunRecord {
            run_id: "run1",
            task_id: "aaaaaaaaaaaa",
            tool: "shell",
            started_at: now,
            finished_at: now,
            succeeded,
            cost_usd: None,
            approval_id: None,
            error: None,
        }
    }

    fn failed_line(input: &RedactedJson) -> Event<'_> {
        Event::TaskFailed(TaskRun {
            run_id: "run1",
            task_id: "aaaaaaaaaaaa",
            file: Path::new("/h.md"),
            line: 3,
            section: "recurring",
            tool: "shell",
            input,
            exit_code: Some(1),
            duration_ms: Some(5),
            output: None,
            error: None,
            cost_usd: None,
            approval_id: None,
            reason: None,
            trigger: crate::model::Trigger::Schedule,
            summary: None,
            stderr: None,
        })
    }

    #[test]
    fn a_tool_run_is_committed_then_audited() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = ledger(dir.path());
        let input = Secrets::default().redact_json(serde_json::json!({"cmd": "false"}));
        assert_eq!(
            ledger.tool_run(&row(false), &failed_line(&input)).unwrap(),
            1
        );
        assert_eq!(
            ledger.tool_run(&row(false), &failed_line(&input)).unwrap(),
            2
        );
        let lines = lines(dir.path());
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "task_failed");
        assert!(
            lines[0]["ts"]
                .as_str()
                .unwrap()
                .starts_with("2026-05-01T10:00")
        );
        assert_eq!(
            crate::store::test_util::count_rows(dir.path(), "task_runs"),
            2
        );
    }

    #[test]
    fn no_line_is_written_for_a_row_that_was_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = ledger(dir.path());
        crate::store::test_util::drop_table(dir.path(), "task_runs");
        let input = Secrets::default().redact_json(serde_json::json!({"cmd": "false"}));
        let err = ledger.tool_run(&row(false), &failed_line(&input));
        assert!(matches!(err, Err(NotKept::Row(_))), "{err:?}");
        assert!(lines(dir.path()).is_empty());
    }

    #[test]
    fn an_outcome_is_shown_redacted_then_cut() {
        let mut input = serde_json::Map::new();
        input.insert("api_token".into(), "tok-0123456789abcdef".into());
        let secrets = Secrets::default().with_input(&input);
        let outcome = tools::Outcome {
            stdout: "got tok-0123456789abcdef back\n".into(),
            stderr: "oops tok-0123456789abcdef\nsecond line\n".into(),
            error: Some("exit status 1".into()),
            summary: Some(format!("{}\nmore", "s".repeat(300))),
            ..tools::Outcome::default()
        };
        let shown = Shown::of(&outcome, &secrets);
        for text in [&shown.output, &shown.stderr, shown.error.as_ref().unwrap()] {
            assert!(!text.as_str().contains("tok-0123456789abcdef"), "{text:?}");
        }
        assert!(shown.output.as_str().starts_with("got "));
        assert_eq!(shown.bare_error.as_ref().unwrap().as_str(), "exit status 1");
        let error = shown.error.as_ref().unwrap().as_str();
        assert!(error.starts_with("exit status 1: oops "), "{error}");
        assert!(!error.contains("second line"), "{error}");
        let summary = shown.summary.as_ref().unwrap().as_str();
        assert!(!summary.contains('\n') && summary.chars().count() <= SUMMARY_CHARS + 1);
    }
}
