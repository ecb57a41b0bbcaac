//! Terminal output of a run or an approval: one line per task, then the counts.

use std::collections::HashMap;
use std::path::Path;

use crate::model::Outcome;
use crate::plan::SkipReason;
use crate::report::Report;
use crate::text::{Redacted, clean};

use super::show_path;

/// How many of the first non-blank lines of a success's output are shown.
pub(crate) const OUTPUT_LINES: usize = 5;

/// What agents did since the last run, one line each (printed also with `-q`: a person
/// hears what an agent did, at the terminal too).
pub(crate) fn agent_actions(r: &Report) -> Vec<String> {
    r.agent_actions
        .iter()
        .map(|line| format!("{:<9} {}", "AGENT", line.clean().as_str()))
        .collect()
}

/// One line for each approval this run expired, never decided (printed also with `-q`:
/// cron's mail says that a question went unanswered).
pub(crate) fn expired(r: &Report, tz: chrono_tz::Tz, cwd: &Path) -> Vec<String> {
    r.expired
        .iter()
        .map(|e| {
            let queued = e
                .queued_at
                .map_or_else(|| "?".to_string(), |t| super::show_time(t, tz));
            format!(
                "EXPIRED   #{} @{} {}:{} — queued {queued}, never decided",
                e.id,
                clean(&e.tool),
                clean(&show_path(&e.file, cwd)),
                e.line
            )
        })
        .collect()
}

/// One line per slot this run reported missed (printed also with `-q`: a run that did not
/// happen is news, docs/reference.md#missed-slots), times in `tz`.
pub(crate) fn missed(r: &Report, tz: chrono_tz::Tz, cwd: &Path) -> Vec<String> {
    r.missed
        .iter()
        .map(|m| {
            let what = m
                .tool
                .as_deref()
                .map_or("reminder".into(), |t| format!("@{t}"));
            let place = format!("{}:{}", show_path(&m.file, cwd), m.line);
            let when = super::show_time(m.slot, tz);
            match m.count {
                None => format!(
                    "{:<9} {what} {place} — slot {when} ({})",
                    "MISSED", m.reason
                ),
                Some(n) => format!(
                    "{:<9} {what} {place} — {n} earlier slot(s), from {when} ({})",
                    "MISSED", m.reason
                ),
            }
        })
        .collect()
}

/// The one line `-q` prints for an approval this run queued or a reminder it gave.
fn quiet_notice(t: &crate::report::TaskReport, what: &str, place: &str) -> Option<String> {
    match (t.outcome, t.approval_id) {
        (Outcome::Queued, Some(id)) => Some(format!(
            "APPROVE   #{id} {what} {place} — heartbeat approve {id}"
        )),
        (Outcome::Reminded, _) => Some(format!(
            "REMIND    {place} {}",
            t.text.first_line(120).clean().as_str()
        )),
        _ => None,
    }
}

fn reason(t: &crate::report::TaskReport) -> Option<&str> {
    t.reason.as_ref().map(Redacted::as_str)
}

/// The human summary: one line per task, then the counts. Prints nothing when nothing
/// happened that a person should see (cron mails any output, docs/reference.md#run-output); tasks
/// skipped by policy, the budget or the run cap alone are not news. `quiet` keeps only failures.
/// `all_skips`: every skip is news (a person just approved and waits for the result).
pub(crate) fn report(r: &Report, quiet: bool, all_skips: bool, cwd: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let observe = Some(SkipReason::Observe.as_str());
    let news = !r.errors.is_empty()
        || r.tasks
            .iter()
            .any(|t| all_skips || t.outcome != Outcome::Skipped || reason(t) == observe);
    if !news {
        return out;
    }
    let mut invalid_lines: HashMap<String, (usize, usize)> = HashMap::new();
    for t in &r.tasks {
        let failure = t.failed() || t.outcome == Outcome::Invalid;
        let mut place = format!("{}:{}", show_path(&t.file, cwd), t.line);
        if let Some(column) = t.column {
            place.push_str(&format!(":{column}"));
        }
        let what = match &t.tool {
            Some(tool) => format!("@{tool}"),
            None => "reminder".into(),
        };
        if quiet && !failure {
            // What waits for a person is said under -q too: cron's mail is a channel of its
            // own (docs/reference.md#run-output).
            out.extend(quiet_notice(t, &what, &place));
            continue;
        }
        let observed = t.outcome == Outcome::Skipped && reason(t) == observe;
        // A success's output of several lines: its first ones, each on a line of its own
        // below the task's (docs/reference.md#run-output).
        let output_lines = match (t.outcome, &t.summary, &t.output) {
            (Outcome::Succeeded, None, Some(output)) => output.first_lines(OUTPUT_LINES, 120),
            _ => Vec::new(),
        };
        let detail = match t.outcome {
            _ if output_lines.len() > 1 => String::new(),
            Outcome::Succeeded => t
                .summary
                .clone()
                .or_else(|| t.output.as_ref().map(|o| o.first_line(120)))
                .unwrap_or_default()
                .into_string(),
            Outcome::Queued => match t.approval_id {
                Some(id) => format!("approval {id}: heartbeat approve {id}"),
                None => String::new(),
            },
            Outcome::Skipped if observed => t.text.first_line(120).into_string(),
            // A reminder an agent proposed says so.
            Outcome::Reminded => match reason(t) {
                Some(why) => format!("{} ({why})", t.text.first_line(120).as_str()),
                None => t.text.first_line(120).into_string(),
            },
            Outcome::Failed
            | Outcome::Interrupted
            | Outcome::RetryScheduled
            | Outcome::Invalid
            | Outcome::Skipped
            | Outcome::Stale => t
                .reason
                .as_ref()
                .map(Redacted::clean)
                .unwrap_or_default()
                .into_string(),
            _ => t.text.first_line(120).into_string(),
        };
        let label = match t.outcome {
            Outcome::Succeeded => "ok",
            Outcome::Failed | Outcome::Interrupted => "FAILED",
            Outcome::Invalid => "INVALID",
            Outcome::Stale => "STALE",
            Outcome::RetryScheduled => "retry",
            Outcome::WouldRun => "would run",
            Outcome::WouldQueue => "would queue",
            Outcome::Skipped if observed => "would run",
            other => other.as_str(),
        };
        let approval = t
            .approval_id
            .map(|id| format!(" #{id}"))
            .unwrap_or_default();
        let line = if t.outcome == Outcome::Invalid {
            let line = format!("{label:<9} {place}: {}", clean(&detail));
            // The tasks below one bad schedule heading share its place and error: one line,
            // with how many tasks it holds back.
            if let Some((i, n)) = invalid_lines.get_mut(&line) {
                *n += 1;
                out[*i] = format!("{line} ({n} tasks)");
                continue;
            }
            invalid_lines.insert(line.clone(), (out.len(), 1));
            line
        } else if t.outcome == Outcome::Queued {
            format!("{label:<9} {what:<14} {place}  {}", clean(&detail))
        } else {
            format!(
                "{label:<9} {what:<14} {place}{approval}  {}",
                clean(&detail)
            )
        };
        out.push(line.trim_end().to_string());
        if output_lines.len() > 1 {
            out.extend(
                output_lines
                    .iter()
                    .map(|l| format!("{:10}{}", "", l.as_str())),
            );
        }
        if let Some(failures) = t.tripped {
            // Said also with -q: the task stays stopped until a person resets it.
            out.push(format!(
                "TRIPPED   {what} {place}: failed {failures} times in a row; run heartbeat reset {}",
                t.task_id
            ));
        }
    }
    for e in &r.errors {
        out.push(format!("ERROR     {}", e.clean()));
    }
    if quiet {
        return out;
    }
    let parts = r.tally_words();
    if !parts.is_empty() {
        out.push(format!("heartbeat: {}", parts.join(", ")));
    }
    out
}
