//! What an agent may do to the pause and to approvals through `heartbeat mcp`, and how the
//! person hears of it.
//!
//! Invariants:
//! - An agent's pause lasts at most [`MAX_PAUSE`]: asked for longer, or for no end, it is
//!   cut to that, and the answer says so.
//! - An agent never changes a person's pause: it can neither lift it (resume) nor replace
//!   it (pause). Who paused is the pause's `by`; an agent is `mcp:<client>`.
//! - Everything an agent decides is told to the person twice over: an urgent message of
//!   kind `agent` to every chat (through the outbox, so it survives Telegram being down),
//!   and a line that the next run prints once, also with `-q`.
//! - A told line is redacted before it is stored or cut.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::bot;
use super::decide::Decider;
use super::outbox;
use crate::error::{Error, Result};
use crate::render::telegram::Rendered;
use crate::render::{show_path, show_time};
use crate::store::{ApprovalRow, PauseRow};
use crate::text::{escape, first_line};

/// The longest an agent's pause lasts.
pub const MAX_PAUSE: Duration = Duration::from_secs(24 * 3600);

/// Whether `by` (a decision's or a pause's) is an agent's.
pub fn is_agent(by: &str) -> bool {
    by.starts_with("mcp:")
}

/// An agent's pause as made.
pub struct Paused {
    pub until: DateTime<Utc>,
    /// Asked for longer than [`MAX_PAUSE`] (or for no end), and cut to it.
    pub capped: bool,
}

/// The pause in force now, if any.
fn in_force(d: &Decider) -> Result<Option<PauseRow>> {
    Ok(d.store.pause_row()?.filter(|p| p.in_force(d.now)))
}

fn until_text(p: &PauseRow, d: &Decider) -> String {
    match p.until.as_deref().and_then(crate::store::parse_ts) {
        Some(t) => format!("until {}", show_time(t, d.cfg.tz())),
        None => "until resumed".into(),
    }
}

/// Pause runs for `asked` (at most [`MAX_PAUSE`]), as the agent `d.by`.
pub fn pause(d: &mut Decider, asked: Option<Duration>, reason: Option<&str>) -> Result<Paused> {
    if let Some(p) = in_force(d)?
        && !is_agent(&p.by)
    {
        return Err(Error::Usage(format!(
            "runs are already paused by {} {}: a person's pause is theirs to change or end; \
             nothing was done",
            p.by,
            until_text(&p, d)
        )));
    }
    let capped = asked.is_none_or(|a| a > MAX_PAUSE);
    let length = asked.unwrap_or(MAX_PAUSE).min(MAX_PAUSE);
    let until = bot::pause_end(d.now, length)
        .ok_or_else(|| Error::Usage("a pause cannot end after the year 9999".into()))?;
    bot::pause(d, Some(until), reason)?;
    let why = reason
        .map(|r| format!(" ({})", first_line(&d.audit.secrets().string(r), 120)))
        .unwrap_or_default();
    let line = format!(
        "{} paused runs until {}{why}; heartbeat resume ends it",
        d.by,
        show_time(until, d.cfg.tz())
    );
    tell(d, &line)?;
    Ok(Paused { until, capped })
}

/// End an agent's pause, as the agent `d.by`; false when runs were not paused. A person's
/// pause is refused, and stays.
pub fn resume(d: &mut Decider) -> Result<bool> {
    let Some(p) = in_force(d)? else {
        return Ok(false);
    };
    if !is_agent(&p.by) {
        return Err(Error::Usage(format!(
            "runs are paused by {} {}: an agent cannot lift a person's pause (a person \
             resumes with heartbeat resume, or /resume in Telegram); nothing was done",
            p.by,
            until_text(&p, d)
        )));
    }
    if !bot::resume(d, "resumed")? {
        return Ok(false);
    }
    let line = format!("{} resumed runs (paused by {})", d.by, p.by);
    tell(d, &line)?;
    Ok(true)
}

/// Tell the person that the agent `d.by` decided approval `row` (`state`: denied or
/// approved). `cwd` is where its file is shown from.
pub fn decided(
    d: &mut Decider,
    row: &ApprovalRow,
    state: &str,
    reason: Option<&str>,
    cwd: &Path,
) -> Result<()> {
    let why = reason
        .map(|r| format!(": {}", first_line(&d.audit.secrets().string(r), 120)))
        .unwrap_or_default();
    let line = format!(
        "{} {state} #{} @{} {}:{}{why}",
        d.by,
        row.id,
        row.tool,
        show_path(Path::new(&row.file), cwd),
        row.line
    );
    tell(d, &line)
}

/// The line for the next run to print, and an urgent message of kind `agent` to every chat.
fn tell(d: &mut Decider, line: &str) -> Result<()> {
    let line = d.audit.secrets().string(line);
    d.store.add_notice(&line, d.now)?;
    if let Some(tc) = &d.cfg.telegram {
        let msg = Rendered {
            kind: "agent",
            html: format!("🤖 {}", escape(&line)),
            urgent: true,
            approvals: Vec::new(),
            resets: Vec::new(),
        };
        // Every action is news: not folded into the daily cap, nor dropped as a repeat.
        outbox::enqueue_all(&mut d.store, tc, &msg, true, d.now, d.audit.secrets())?;
    }
    Ok(())
}
