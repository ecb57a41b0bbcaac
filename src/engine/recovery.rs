//! Work a run that died left behind (docs/reference.md#at-most-once): one-time tasks started
//! whose outcome was never recorded, and approvals left `running`. Each is settled in the
//! store and said once, as a failure with reason `interrupted`: a `task_failed` line after
//! the commit, and an `interrupted` line in the report.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::ledger::Ledger;
use crate::audit::Event;
use crate::audit::event::TaskRun;
use crate::error::Result;
use crate::model::{Outcome, Trigger};
use crate::report::TaskReport;
use crate::store::TaskRunRecord;

/// The run that recovers: its id, its start and what started it.
pub(crate) struct Recovering<'a> {
    pub run_id: &'a str,
    pub now: DateTime<Utc>,
    pub trigger: Trigger,
}

/// Settle and say what died: one-time tasks' unsettled starts are held until `heartbeat
/// reset` (they may have had their effect), approvals left `running` become failed. Returns
/// the report lines, in the order said.
pub(crate) fn recover(ledger: &mut Ledger, run: &Recovering) -> Result<Vec<TaskReport>> {
    let mut reports = Vec::new();
    for row in ledger.store.hold_unsettled_starts(run.run_id)? {
        let reason = format!(
            "interrupted: the run stopped before its outcome was recorded, so it may have \
             run; it stays held until `heartbeat reset {}`",
            row.task_id
        );
        let lost = Lost {
            task_id: &row.task_id,
            file: &row.file,
            line: row.line,
            section: &row.section,
            tool: &row.tool,
            input: &row.input,
            text: "",
            approval_id: None,
        };
        reports.push(interrupted(ledger, run, lost, reason)?);
    }
    for row in ledger.store.interrupt_running(run.now)? {
        ledger.store.record_task_run(&TaskRunRecord {
            run_id: run.run_id,
            task_id: &row.task_id,
            tool: &row.tool,
            started_at: run.now,
            finished_at: run.now,
            succeeded: false,
            interrupted: true,
            cost_usd: None,
            approval_id: Some(row.id),
            error: None,
            retried: false,
            retry_at: None,
            not_started: false,
        })?;
        let lost = Lost {
            task_id: &row.task_id,
            file: &row.file,
            line: row.line,
            section: &row.section,
            tool: &row.tool,
            input: &row.input,
            text: &row.text,
            approval_id: Some(row.id),
        };
        let reason = "interrupted: the process running it died".to_string();
        reports.push(interrupted(ledger, run, lost, reason)?);
    }
    Ok(reports)
}

/// A task run whose outcome was lost, as stored (an approval's row or a start record).
struct Lost<'a> {
    task_id: &'a str,
    file: &'a str,
    line: i64,
    section: &'a str,
    tool: &'a str,
    input: &'a Value,
    text: &'a str,
    approval_id: Option<i64>,
}

/// `task_failed` with reason `interrupted`, and its report line (a failure: it counts among
/// the failed).
fn interrupted(
    ledger: &mut Ledger,
    run: &Recovering,
    lost: Lost,
    reason: String,
) -> Result<TaskReport> {
    let secrets = ledger.secrets().clone();
    let text = secrets.redact(lost.text);
    let reason = secrets.redact(&reason);
    let input = secrets.redact_json(lost.input.clone());
    ledger.record(&Event::TaskFailed(TaskRun {
        run_id: run.run_id,
        task_id: lost.task_id,
        file: Path::new(lost.file),
        line: lost.line,
        section: lost.section,
        tool: lost.tool,
        input: &input,
        exit_code: None,
        duration_ms: None,
        output: None,
        error: Some(&"interrupted".into()),
        cost_usd: None,
        approval_id: lost.approval_id,
        reason: Some("interrupted"),
        trigger: run.trigger,
        summary: None,
        stderr: None,
    }))?;
    Ok(TaskReport {
        reason: Some(reason),
        approval_id: lost.approval_id,
        ..TaskReport::at(
            lost.task_id.to_string(),
            Arc::from(Path::new(lost.file)),
            usize::try_from(lost.line).unwrap_or(0),
            text,
            Some(lost.tool.to_string()),
            Outcome::Interrupted,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ledger::tests::{NOW, ledger, lines};
    use crate::store::NewStart;

    #[test]
    fn a_start_without_an_outcome_becomes_interrupted_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = ledger(dir.path());
        let now: DateTime<Utc> = NOW.parse().unwrap();
        let input = crate::audit::Secrets::default().redact_json(serde_json::json!({"cmd": "x"}));
        ledger
            .store
            .record_start(
                &NewStart {
                    task_id: "aaaaaaaaaaaa",
                    run_id: "died",
                    tool: "shell",
                    input,
                    file: "/h.md",
                    line: 3,
                    section: "one_time",
                },
                now,
            )
            .unwrap();
        let run = Recovering {
            run_id: "run2",
            now,
            trigger: Trigger::Schedule,
        };
        let reports = recover(&mut ledger, &run).unwrap();
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].task_id, "aaaaaaaaaaaa");
        assert_eq!(reports[0].outcome, Outcome::Interrupted);
        assert!(reports[0].failed());
        let said = lines(dir.path());
        assert_eq!(said.len(), 1);
        assert_eq!(said[0]["event"], "task_failed");
        assert_eq!(said[0]["reason"], "interrupted");
        assert_eq!(said[0]["run_id"], "run2");
        assert_eq!(said[0]["input"]["cmd"], "x");
        // Said once: the next run finds it held, not new.
        let again = Recovering {
            run_id: "run3",
            ..run
        };
        assert!(recover(&mut ledger, &again).unwrap().is_empty());
        assert_eq!(lines(dir.path()).len(), 1);
        assert_eq!(ledger.store.unsettled().unwrap(), ["aaaaaaaaaaaa"]);
    }
}
