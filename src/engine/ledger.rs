//! The run's records: SQLite and the audit log, and the order between them.
//!
//! Invariant (docs/reference.md#audit-events): an audit line is written after the SQLite
//! commit that records what it tells, so the log never shows an outcome, a claim or a
//! decision that SQLite does not know. A tool run is recorded by [`Ledger::tool_run`]: its
//! row first, its line only once the row is committed. Every other line of a session is
//! written by [`Ledger::record`] after the store call that commits its fact returned.
//!
//! Batches: the success of a tool without outside effects (`@log`) changes nothing but
//! heartbeat's own records, so losing it in a crash costs no more than running it again;
//! for approved work, claimed durably before it ran, no more than its being reported
//! interrupted at the next run (docs/reference.md#at-most-once). Up to [`BATCH`] of them are
//! kept (their rows, their lines rendered) and committed in one transaction
//! ([`Store::record_task_runs`]), their lines written after that commit with one `write`.
//! Every other record flushes the batch first ([`Ledger::flush`]), so the log keeps its
//! order and nothing reads the store before the batch is in it; so do the session before it
//! ticks or ends and at the end of its plan.

use chrono::{DateTime, Utc};

use crate::audit::{AuditLog, Event, Secrets, TEXT_LIMIT};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::store::{Store, TaskRunRecord};
use crate::text::Redacted;
use crate::tools;

/// The longest summary a tool can report, in characters (longer ones are cut, with `…`).
const SUMMARY_CHARS: usize = 200;

/// The most outcomes committed in one batch.
pub(crate) const BATCH: usize = 50;

pub(crate) struct Ledger {
    pub store: Box<dyn Store>,
    audit: AuditLog,
    /// Where each audit line reads the time it happened.
    clock: Clock,
    /// Outcomes waiting for their batch's commit, each with its rendered line.
    pending: Vec<(PendingRun, Vec<u8>)>,
}

/// A batched tool run's row, kept until its batch is committed: a success.
struct PendingRun {
    run_id: String,
    task_id: String,
    tool: String,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
    cost_usd: Option<f64>,
    approval_id: Option<i64>,
    /// It retried a failed run (docs/reference.md#retries).
    retried: bool,
}

impl PendingRun {
    fn of(r: &TaskRunRecord) -> PendingRun {
        PendingRun {
            run_id: r.run_id.to_string(),
            task_id: r.task_id.to_string(),
            tool: r.tool.to_string(),
            started_at: r.started_at,
            finished_at: r.finished_at,
            cost_usd: r.cost_usd,
            approval_id: r.approval_id,
            retried: r.retried,
        }
    }

    fn row(&self) -> TaskRunRecord<'_> {
        TaskRunRecord {
            run_id: &self.run_id,
            task_id: &self.task_id,
            tool: &self.tool,
            started_at: self.started_at,
            finished_at: self.finished_at,
            succeeded: true,
            interrupted: false,
            cost_usd: self.cost_usd,
            approval_id: self.approval_id,
            error: None,
            retried: self.retried,
            retry_at: None,
            not_started: false,
        }
    }
}

/// A tool run that could not be kept: its row (then no line was written), or its line (the
/// row is committed).
#[derive(Debug)]
pub(crate) enum NotKept {
    Row(Error),
    Line(Error),
}

impl Ledger {
    pub(crate) fn new(store: Box<dyn Store>, audit: AuditLog, clock: Clock) -> Ledger {
        Ledger {
            store,
            audit,
            clock,
            pending: Vec::new(),
        }
    }

    /// What no sink of the run shows: the audit log's secrets.
    pub(crate) fn secrets(&self) -> &Secrets {
        self.audit.secrets()
    }

    /// The time now, as audit lines read it.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// One audit line, stamped with the time it is written.
    pub(crate) fn record(&mut self, event: &Event) -> Result<()> {
        self.record_at(self.clock.now(), event)
    }

    /// One audit line, stamped with `at` (`run_started` carries the run's start), after
    /// the batch.
    pub(crate) fn record_at(&mut self, at: DateTime<Utc>, event: &Event) -> Result<()> {
        self.flush().map_err(NotKept::into_error)?;
        self.audit
            .record(at, event)
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    /// A finished tool run: its row (history, the task's streak, an approval's outcome)
    /// committed, then its `task_succeeded` / `task_failed` line. Returns the task's
    /// failures in a row. `effect_free`: its tool changes nothing outside heartbeat; its
    /// success then joins the batch.
    pub(crate) fn tool_run(
        &mut self,
        row: &TaskRunRecord,
        event: &Event,
        effect_free: bool,
    ) -> std::result::Result<u32, NotKept> {
        crate::fault::point("task_done");
        if effect_free && row.succeeded {
            let line = self.audit.render(self.clock.now(), event);
            self.pending.push((PendingRun::of(row), line));
            if self.pending.len() >= BATCH {
                self.flush()?;
            }
            // A success ends any streak of failures.
            return Ok(0);
        }
        self.flush()?;
        let failures = self
            .store
            .record_task_run(row)
            .map_err(|e| NotKept::Row(e.into()))?;
        self.record(event).map_err(NotKept::Line)?;
        crate::fault::point("task_recorded");
        Ok(failures)
    }

    /// Commit the batch, then write its lines.
    pub(crate) fn flush(&mut self) -> std::result::Result<(), NotKept> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let rows: Vec<TaskRunRecord> = pending.iter().map(|(run, _)| run.row()).collect();
        self.store
            .record_task_runs(&rows)
            .map_err(|e| NotKept::Row(e.into()))?;
        crate::fault::point("batch_committed");
        let lines: Vec<Vec<u8>> = pending.into_iter().map(|(_, line)| line).collect();
        self.audit
            .append(&lines)
            .map_err(|e| NotKept::Line(Error::io(self.audit.path(), e)))?;
        // Reached once per tool run, as in `tool_run`.
        for _ in &lines {
            crate::fault::point("task_recorded");
        }
        Ok(())
    }

    /// Flush the audit log to disk.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.audit
            .sync()
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    /// The store and the audit log, for what follows the run (the batch flushed before).
    pub(crate) fn into_parts(self) -> (Box<dyn Store>, AuditLog) {
        debug_assert!(self.pending.is_empty(), "a batch was not flushed");
        (self.store, self.audit)
    }
}

impl NotKept {
    /// The error, whichever record it was.
    pub(crate) fn into_error(self) -> Error {
        match self {
            NotKept::Row(e) | NotKept::Line(e) => e,
        }
    }
}

/// A tool's outcome as its records show it. Redacted before anything is cut: a secret
/// straddling the cut would keep all but its tail.
#[derive(Debug)]
pub(crate) struct Shown {
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
    pub(crate) fn of(outcome: &tools::Outcome, secrets: &Secrets) -> Shown {
        let stdout = secrets.redact(&outcome.stdout);
        let stderr = secrets.redact(&outcome.stderr);
        // An error may repeat a tool's whole first line (an MCP tool's `isError` text, an
        // HTTP error page): cut, after redaction, like any text kept in a line.
        let bare_error = outcome
            .error
            .as_deref()
            .map(|e| secrets.redact(e).truncate(TEXT_LIMIT, 0));
        // With the first line of stderr, unless the error already says it (an MCP server's
        // error carries the end of its stderr): never the same words twice.
        let error = bare_error.as_ref().map(|e| {
            let stderr = stderr.first_line(200);
            if stderr.is_empty() || e.as_str().contains(stderr.as_str()) {
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
    use std::path::Path;

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
            interrupted: false,
            cost_usd: None,
            approval_id: None,
            error: None,
            retried: false,
            retry_at: None,
            not_started: false,
        }
    }

    fn failed_line(input: &RedactedJson) -> Event<'_> {
        Event::TaskFailed(run_line(input))
    }

    fn run_line(input: &RedactedJson) -> TaskRun<'_> {
        TaskRun {
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
        }
    }

    fn task_runs(state_dir: &Path) -> i64 {
        crate::store::test_util::count_rows(state_dir, "task_runs")
    }

    #[test]
    fn effect_free_successes_wait_for_their_batch_and_the_log_keeps_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = ledger(dir.path());
        let input = Secrets::default().redact_json(serde_json::json!({"text": "hi"}));
        let succeeded = Event::TaskSucceeded(run_line(&input));
        for _ in 0..3 {
            assert_eq!(ledger.tool_run(&row(true), &succeeded, true).unwrap(), 0);
        }
        assert_eq!(task_runs(dir.path()), 0);
        assert!(lines(dir.path()).is_empty());
        // Any other line flushes the batch first: committed, then written, in order.
        ledger
            .record(&Event::StatePruned {
                run_id: "run1",
                rows: 0,
            })
            .unwrap();
        assert_eq!(task_runs(dir.path()), 3);
        let events: Vec<String> = lines(dir.path())
            .iter()
            .map(|l| l["event"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            events,
            [
                "task_succeeded",
                "task_succeeded",
                "task_succeeded",
                "state_pruned"
            ]
        );
        // A full batch is committed at once.
        for _ in 0..BATCH {
            ledger.tool_run(&row(true), &succeeded, true).unwrap();
        }
        assert_eq!(task_runs(dir.path()), 3 + BATCH as i64);
        assert_eq!(lines(dir.path()).len(), 4 + BATCH);
        // A success of a tool with outside effects, and a failure, are not batched; each
        // commits what waits before it.
        ledger.tool_run(&row(true), &succeeded, true).unwrap();
        ledger.tool_run(&row(true), &succeeded, false).unwrap();
        assert_eq!(task_runs(dir.path()), 5 + BATCH as i64);
        ledger.tool_run(&row(true), &succeeded, true).unwrap();
        assert_eq!(
            ledger
                .tool_run(&row(false), &failed_line(&input), true)
                .unwrap(),
            1
        );
        assert_eq!(task_runs(dir.path()), 7 + BATCH as i64);
        assert_eq!(lines(dir.path()).len(), 8 + BATCH);
    }

    #[test]
    fn a_tool_run_is_committed_then_audited() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = ledger(dir.path());
        let input = Secrets::default().redact_json(serde_json::json!({"cmd": "false"}));
        assert_eq!(
            ledger
                .tool_run(&row(false), &failed_line(&input), false)
                .unwrap(),
            1
        );
        assert_eq!(
            ledger
                .tool_run(&row(false), &failed_line(&input), false)
                .unwrap(),
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
        let err = ledger.tool_run(&row(false), &failed_line(&input), false);
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

    #[test]
    fn an_error_that_already_says_its_stderr_line_is_not_followed_by_it_again() {
        let outcome = tools::Outcome {
            stderr: "boom: no such table\n".into(),
            error: Some("MCP server \"s\" exited (status 1); stderr: boom: no such table".into()),
            ..tools::Outcome::default()
        };
        let shown = Shown::of(&outcome, &Secrets::default());
        assert_eq!(
            shown.error.unwrap().as_str(),
            "MCP server \"s\" exited (status 1); stderr: boom: no such table"
        );
    }
}
