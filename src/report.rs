//! What a run or an approval did, as data: one [`TaskReport`] per task that did something,
//! with the counts, the exit code and the JSON shape of `run --once --json`
//! (docs/reference.md#run-json). Rendering it for people is in [`crate::render`].

use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::exit;
use crate::model::{Body, Outcome, RunSkipReason, Task, Trigger};
use crate::redact::{self, Secrets};
use crate::text::Redacted;

/// What happened to one task (the `tasks` of `run --once --json`). Its texts are redacted:
/// they are shown on stdout and in messages, cut to a line.
#[derive(Clone, Debug)]
pub(crate) struct TaskReport {
    pub task_id: String,
    pub file: Arc<Path>,
    pub line: usize,
    /// Where an invalid task's error is.
    pub column: Option<usize>,
    pub text: Redacted,
    pub tool: Option<String>,
    pub outcome: Outcome,
    pub reason: Option<Redacted>,
    pub approval_id: Option<i64>,
    pub exit_code: Option<i32>,
    pub output: Option<Redacted>,
    pub summary: Option<Redacted>,
    pub duration_ms: Option<u64>,
    /// Failures in a row, when this run tripped the task's breaker.
    pub tripped: Option<u32>,
    /// What started it (set by the session that reports it).
    pub trigger: Option<Trigger>,
}

impl TaskReport {
    /// Whether it failed: ran and failed, or was interrupted by a run that died.
    pub(crate) fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed | Outcome::Interrupted)
    }

    pub(crate) fn new(
        task: &Task,
        tool: Option<&str>,
        outcome: Outcome,
        secrets: &Secrets,
    ) -> TaskReport {
        TaskReport::at(
            task.id.clone(),
            task.file.clone(),
            task.line,
            secrets.redact(&safe_text(task)),
            tool.map(str::to_string),
            outcome,
        )
    }

    /// Who, where, what and its outcome, nothing else yet: also for a task known only by a
    /// stored row (an approval's, a start's) when its file no longer says it.
    pub(crate) fn at(
        task_id: String,
        file: Arc<Path>,
        line: usize,
        text: Redacted,
        tool: Option<String>,
        outcome: Outcome,
    ) -> TaskReport {
        TaskReport {
            task_id,
            file,
            line,
            column: None,
            text,
            tool,
            outcome,
            reason: None,
            approval_id: None,
            exit_code: None,
            output: None,
            summary: None,
            duration_ms: None,
            tripped: None,
            trigger: None,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "task_id": self.task_id,
            "tool": self.tool,
            "outcome": self.outcome,
            "reason": self.reason,
            "approval_id": self.approval_id,
            "exit_code": self.exit_code,
            "output": self.output,
            "duration_ms": self.duration_ms,
            "tripped": self.tripped.is_some(),
            "file": &*self.file,
            "line": self.line,
            "column": self.column,
            "text": self.text,
            "summary": self.summary,
            "trigger": self.trigger,
        })
    }
}

/// How many tasks ended each way (stored with the run's row).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RunCounts {
    pub succeeded: usize,
    pub failed: usize,
    pub queued: usize,
    pub skipped: usize,
    pub invalid: usize,
}

/// One `task_missed` line (docs/reference.md#missed-slots).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MissedSlot {
    pub task_id: String,
    pub file: Arc<Path>,
    pub line: usize,
    pub tool: Option<String>,
    pub slot: DateTime<Utc>,
    /// `no_run`, or the reason of the last run that skipped it.
    pub reason: String,
    /// On the line after 100 others: how many earlier slots it stands for (its
    /// `slot` is the earliest of them).
    pub count: Option<usize>,
}

/// What a session did.
#[derive(Default)]
pub(crate) struct Report {
    pub run_id: String,
    pub skipped: Option<RunSkipReason>,
    pub tasks: Vec<TaskReport>,
    /// Problems that are not a task's (a tick that could not be written).
    pub errors: Vec<Redacted>,
    /// What agents did since the last run (pause, resume, deny through `heartbeat mcp`),
    /// one line each, printed once.
    pub agent_actions: Vec<Redacted>,
    /// Approvals that expired in this run, never decided (past `approval_ttl`).
    pub expired: Vec<ExpiredApproval>,
    /// Slots of calendar schedules that passed without a run, reported by this run.
    pub missed: Vec<MissedSlot>,
}

/// An approval nobody approved or denied within `approval_ttl`, expired by this run.
#[derive(Clone, Debug)]
pub(crate) struct ExpiredApproval {
    pub id: i64,
    pub tool: String,
    pub file: std::path::PathBuf,
    pub line: usize,
    /// When it was queued (None if the stored time does not read).
    pub queued_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Report {
    pub(crate) fn count(&self, outcome: Outcome) -> usize {
        self.tasks.iter().filter(|t| t.outcome == outcome).count()
    }

    pub(crate) fn counts(&self) -> RunCounts {
        RunCounts {
            succeeded: self.count(Outcome::Succeeded),
            // An interrupted task failed too (`task_failed`): the run exits 1 for it.
            failed: self.count(Outcome::Failed) + self.count(Outcome::Interrupted),
            queued: self.count(Outcome::Queued),
            skipped: self.count(Outcome::Skipped),
            invalid: self.count(Outcome::Invalid),
        }
    }

    /// What the run did, as people read it: `3 succeeded`, `1 failed`, … for each outcome
    /// it had, in one order (the terminal's last line, the monitors' pings).
    pub(crate) fn tally_words(&self) -> Vec<String> {
        let c = self.counts();
        [
            (c.succeeded, "succeeded"),
            (c.failed, "failed"),
            (c.queued, "queued"),
            (c.skipped, "skipped"),
            (c.invalid, "invalid"),
            (self.count(Outcome::Reminded), "reminded"),
            (self.count(Outcome::Stale), "stale"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, word)| format!("{n} {word}"))
        .collect()
    }

    pub(crate) fn exit_code(&self) -> u8 {
        let c = self.counts();
        let unavailable = self.skipped == Some(crate::model::RunSkipReason::StoreUnavailable);
        if c.failed > 0 || c.invalid > 0 || !self.errors.is_empty() || unavailable {
            exit::TASK_FAILED
        } else {
            exit::OK
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let c = self.counts();
        json!({
            "run_id": self.run_id,
            "skipped": self.skipped,
            "tasks": self.tasks.iter().map(TaskReport::to_json).collect::<Vec<_>>(),
            "succeeded": c.succeeded,
            "failed": c.failed,
            "queued": c.queued,
            "skipped_tasks": c.skipped,
            "invalid": c.invalid,
            "reminded": self.count(Outcome::Reminded),
            "stale": self.count(Outcome::Stale),
            "errors": self.errors,
            "agent_actions": self.agent_actions,
        })
    }
}

/// The task's text, for records and output: a tool task whose input holds a secret is shown
/// as its tool and redacted input instead of its raw source text.
pub(crate) fn safe_text(task: &Task) -> String {
    if let Body::Tool { name, input } = &task.body
        && redact::has_secret_keys(input)
    {
        let shown = Secrets::default().redact_map(input).to_text();
        return format!("@{name} {shown}");
    }
    task.text.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupted_task_is_a_failure_of_the_run() {
        let task = TaskReport {
            task_id: "aaaaaaaaaaaa".into(),
            file: Arc::from(Path::new("/h.md")),
            line: 1,
            column: None,
            text: "x".into(),
            tool: Some("shell".into()),
            outcome: Outcome::Interrupted,
            reason: None,
            approval_id: None,
            exit_code: None,
            output: None,
            summary: None,
            duration_ms: None,
            tripped: None,
            trigger: Some(Trigger::Schedule),
        };
        let report = Report {
            tasks: vec![task],
            ..Report::default()
        };
        assert!(report.tasks[0].failed());
        assert_eq!(report.counts().failed, 1);
        assert_eq!(report.exit_code(), exit::TASK_FAILED);
        let doc = report.to_json();
        assert_eq!(doc["tasks"][0]["outcome"], "interrupted");
        assert_eq!(doc["tasks"][0]["trigger"], "schedule");
        assert_eq!(doc["failed"], 1);
    }
}
