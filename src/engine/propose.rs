//! A task an agent proposes through `heartbeat mcp`: checked as `check` would, then appended
//! to its file with the agent's mark (docs/reference.md#heartbeat-mcp).
//!
//! Invariants:
//! - A proposed task is appended, never inserted: its line ends with the agent's mark and is
//!   written with one `O_APPEND` write, under the file's proposal lock, so that a proposed
//!   task can never be in the file without the mark that makes it ask a person first.
//! - An agent has at most one of each of its tasks in a file (same section and content):
//!   proposing it again returns the one there.
//! - A refusal writes nothing to the file; the caller audits it (`proposal_refused`) with
//!   the [`Refusal`]'s reason.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::decide::Decider;
use super::query;
use crate::audit::Event;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::markdown;
use crate::model::{Section, Task};
use crate::plan::Decision;

/// Proposals one client may make in a day (in this state dir).
const PROPOSALS_PER_DAY: usize = 100;

/// What a file keeps free of proposals: they may fill it only up to its size limit less this.
const KEEP_FREE: u64 = 1 << 20;

/// Why a proposal wrote nothing: the audit's word, and the error the agent is given.
pub(crate) struct Refusal {
    pub reason: &'static str,
    pub error: Error,
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Refusal {
        let reason = match error {
            Error::Usage(_) => "invalid",
            _ => "error",
        };
        Refusal { reason, error }
    }
}

impl From<markdown::proposal::Refusal> for Refusal {
    fn from(r: markdown::proposal::Refusal) -> Refusal {
        Refusal {
            reason: r.reason,
            error: Error::Usage(r.message),
        }
    }
}

/// A refusal for `reason`, telling the agent `message`.
pub(crate) fn refuse(reason: &'static str, message: String) -> Refusal {
    Refusal {
        reason,
        error: Error::Usage(message),
    }
}

/// A task as an agent asked for it, its own checks passed (the caller made `line` with
/// [`markdown::proposal::line`]).
pub(crate) struct Proposal<'a> {
    pub section: Section,
    /// The schedule heading it goes under, if any.
    pub heading: Option<&'a str>,
    /// The task's line, ending with the agent's mark.
    pub line: String,
    /// The configured file it goes in.
    pub path: PathBuf,
}

/// Append `p` to its file as the agent `by`, after checking it as `check` would at `now`.
/// Returns the task, where it is and `check`'s decision for it now (with the config as
/// `load_config` reads it then); the task already there when the agent proposed it before.
pub(crate) fn propose(
    d: &mut Decider,
    p: &Proposal,
    by: &str,
    now: DateTime<Utc>,
    load_config: &dyn Fn() -> Result<Config>,
) -> std::result::Result<Value, Refusal> {
    let (section, heading, line, path) = (p.section, p.heading, &p.line, p.path.as_path());
    // A missing file says what to do about it, as every command does.
    markdown::read_source(path).map_err(Error::from)?;
    // Read, checked and appended while holding the file's proposal lock.
    let locked = markdown::append::lock(path).map_err(|e| Error::io(path, e))?;
    let source = markdown::read_source(path).map_err(Error::from)?;
    let (block, task) = markdown::append::block(
        &source.path,
        &source.canonical,
        &source.text,
        section,
        heading,
        line,
    )
    .map_err(|why| Error::Usage(format!("{}: {why}", path.display())))?;
    // The same task by the same agent is already in the file (an agent's retry), open or
    // ticked, under whatever schedule: it is returned, never copied. A copy would be
    // numbered after it, and take over its id (a person's approval of it) once a person
    // deleted the first line, however the person answered the copy.
    let same = |t: &&Task| {
        t.section == task.section
            && t.proposed_by == task.proposed_by
            && markdown::parse::same_content(t, &task)
    };
    let parsed = markdown::parse(&source.path, &source.canonical, &source.text);
    if let Some(existing) = parsed.tasks.iter().find(same) {
        drop(locked);
        d.record(&Event::ProposalRefused {
            by,
            reason: "duplicate",
        })?;
        return Ok(answer(load_config()?, now, path, existing, by, true)?);
    }
    let limit = markdown::MAX_FILE_BYTES - KEEP_FREE;
    let size = (source.text.len() + block.len() + 2) as u64;
    if size > limit {
        return Err(refuse(
            "file_full",
            format!(
                "{}: the file would be {size} bytes, past the {limit} bytes proposals may \
                 fill (its 8 MiB limit less 1 MiB kept for people)",
                path.display()
            ),
        ));
    }
    let since = d.now - chrono::Duration::hours(24);
    if d.store.proposals_since(by, since).map_err(Error::from)? >= PROPOSALS_PER_DAY {
        return Err(refuse(
            "rate_limit",
            format!(
                "{by} has proposed {PROPOSALS_PER_DAY} tasks in the last 24 hours; a person \
                 has enough to review"
            ),
        ));
    }
    // Checked as `check` checks it, in the file as it would be.
    if let Decision::Invalid {
        line,
        column,
        error,
    } = query::decide_one(&d.cfg, now, &task)?
    {
        return Err(refuse(
            "invalid",
            format!("{}:{line}:{column}: {error}", path.display()),
        ));
    }
    if heading.is_some() && task.schedule.is_none() {
        return Err(refuse(
            "invalid",
            format!(
                "\"schedule\": {:?} is not a schedule (such as \"Every 6h\", \"Weekdays at \
                 09:00\", \"At 2026-12-24 18:00\")",
                heading.unwrap_or_default()
            ),
        ));
    }
    let file = path.display().to_string();
    // Counted for the daily bound; the mark in the line is what makes it ask.
    d.store
        .record_proposal(&task.id, by, &file, d.now)
        .map_err(Error::from)?;
    let eol = markdown::append::line_ending(&source.text);
    markdown::append::append(&locked, &block, eol).map_err(|e| Error::io(path, e))?;
    drop(locked);
    d.record(&Event::TaskProposed {
        task_id: &task.id,
        file: path,
        line: task.line,
        section: section.as_str(),
        text: &d.audit.secrets().redact(&task.text),
        by,
    })?;
    Ok(answer(load_config()?, now, path, &task, by, false)?)
}

/// `propose_task`'s answer: the task, where it is, and `check`'s decision for it now.
/// `existing`: it was already there (nothing was written).
fn answer(
    cfg: Config,
    now: DateTime<Utc>,
    path: &Path,
    task: &Task,
    by: &str,
    existing: bool,
) -> Result<Value> {
    let checked = query::check(cfg, now, false)?;
    let decision = checked
        .report()
        .decision_of(&task.id)
        .map_or("unknown", Decision::as_str);
    Ok(json!({
        "task_id": task.id,
        "file": path,
        "line": task.line,
        "section": task.section.as_str(),
        "schedule": task.heading.as_deref(),
        "text": task.text,
        "decision": decision,
        "provenance": by,
        "existing": existing,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::config::LoadOptions;
    use markdown::proposal::{Proposed, line};

    const MD: &str = "# H\n\n## Recurring\n\n- [ ] @log {\"text\": \"hi\"}\n";

    /// A config in a temp dir whose one HEARTBEAT.md holds [`MD`], and a loader for it.
    fn setup() -> (tempfile::TempDir, impl Fn() -> Result<Config>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("HEARTBEAT.md"), MD).unwrap();
        let toml = dir.path().join("heartbeat.toml");
        std::fs::write(
            &toml,
            "files = [\"HEARTBEAT.md\"]\nstate_dir = \"state\"\ntimezone = \"UTC\"\n",
        )
        .unwrap();
        let cwd = dir.path().to_path_buf();
        let load = move || {
            let env = |_: &str| None;
            Ok(crate::config::load(&LoadOptions {
                config: Some(toml.clone()),
                files: Vec::new(),
                state_dir: None,
                cwd: cwd.clone(),
                env: &env,
            })?)
        };
        (dir, load)
    }

    #[test]
    fn a_proposal_is_appended_with_its_mark_once() {
        let (dir, load) = setup();
        let now: DateTime<Utc> = "2026-05-04T10:00:00Z".parse().unwrap();
        let cfg = load().unwrap();
        let path = cfg.files[0].clone();
        let by = "mcp:bot";
        let mut d = Decider::open(cfg, by.into(), Clock::starting_at(now)).unwrap();
        let proposal = Proposal {
            section: Section::Recurring,
            heading: None,
            line: line(&Proposed::Reminder("water the plants"), None, by).unwrap(),
            path,
        };
        let first =
            propose(&mut d, &proposal, by, now, &load).unwrap_or_else(|r| panic!("{}", r.error));
        assert_eq!(first["existing"], false);
        assert_eq!(first["provenance"], by);
        assert_eq!(first["text"], "water the plants");
        let text = std::fs::read_to_string(dir.path().join("HEARTBEAT.md")).unwrap();
        assert!(text.starts_with(MD), "appended, never inserted: {text}");
        assert_eq!(text.matches("water the plants").count(), 1);
        assert!(
            text.contains(by),
            "the line carries the agent's mark: {text}"
        );

        // Proposed again: the one there is returned, nothing is written.
        let again =
            propose(&mut d, &proposal, by, now, &load).unwrap_or_else(|r| panic!("{}", r.error));
        assert_eq!(again["existing"], true);
        assert_eq!(again["task_id"], first["task_id"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("HEARTBEAT.md")).unwrap(),
            text
        );
    }

    #[test]
    fn a_proposal_under_a_heading_that_is_no_schedule_is_refused_and_writes_nothing() {
        let (dir, load) = setup();
        let now: DateTime<Utc> = "2026-05-04T10:00:00Z".parse().unwrap();
        let cfg = load().unwrap();
        let path = cfg.files[0].clone();
        let by = "mcp:bot";
        let mut d = Decider::open(cfg, by.into(), Clock::starting_at(now)).unwrap();
        let heading = Some("Whenever you like");
        let proposal = Proposal {
            section: Section::Recurring,
            heading,
            line: line(&Proposed::Reminder("stretch"), heading, by).unwrap(),
            path,
        };
        let Err(refused) = propose(&mut d, &proposal, by, now, &load) else {
            panic!("accepted a heading that is not a schedule");
        };
        assert_eq!(refused.reason, "invalid");
        assert!(
            refused.error.to_string().contains("is not a schedule"),
            "{}",
            refused.error
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("HEARTBEAT.md")).unwrap(),
            MD
        );
    }
}
