//! What an agent may do to the pause and to approvals through `heartbeat mcp`, and how the
//! person hears of it.
//!
//! Invariants:
//! - An agent's pause lasts at most [`MAX_PAUSE`]: asked for longer, or for no end, it is
//!   cut to that, and the answer says so.
//! - An agent never changes a person's pause: it can neither lift it (resume) nor replace
//!   it (pause), checked and changed in one SQLite statement. Who paused is the pause's
//!   `by`; an agent is `mcp:<client>` ([`crate::store::AGENT_BY`]).
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
use crate::audit::{self, Event, event::Pause};
use crate::error::{Error, Result};
use crate::model::{ApprovalState, MessageKind};
use crate::render::telegram::Rendered;
use crate::render::{show_path, show_time};
use crate::store::{ApprovalRow, NewPause};

/// The longest an agent's pause lasts.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(24 * 3600);

/// An agent's pause as made.
pub(crate) struct Paused {
    pub until: DateTime<Utc>,
    /// Asked for longer than [`MAX_PAUSE`] (or for no end), and cut to it.
    pub capped: bool,
}

/// The refusal when a person's pause stands.
fn persons_pause(d: &Decider, what: &str) -> Result<Error> {
    let Some(p) = d.store.pause_row()? else {
        return Ok(Error::Usage(format!("{what}; nothing was done")));
    };
    let until = match p.until.as_deref().and_then(crate::store::parse_ts) {
        Some(t) => format!("until {}", show_time(t, d.cfg.tz())),
        None => "until resumed".into(),
    };
    Ok(Error::Usage(format!(
        "runs are paused by {} {until}: {what}; nothing was done",
        p.by
    )))
}

/// Pause runs for `asked` (at most [`MAX_PAUSE`]), as the agent `d.by`. Audited `paused`.
pub(crate) fn pause(
    d: &mut Decider,
    asked: Option<Duration>,
    reason: Option<&str>,
) -> Result<Paused> {
    let capped = asked.is_none_or(|a| a > MAX_PAUSE);
    let length = asked.unwrap_or(MAX_PAUSE).min(MAX_PAUSE);
    let until = bot::pause_end(d.now, length)
        .ok_or_else(|| Error::Usage("a pause cannot end after the year 9999".into()))?;
    // Stored, audited and told as every text is: redacted.
    let reason = reason.map(|r| d.audit.secrets().redact(r));
    let by = d.by.clone();
    let row = NewPause {
        since: audit::format_ts(d.now),
        until: Some(audit::format_ts(until)),
        reason: reason.as_ref(),
        by: &by,
    };
    if !d.store.set_agent_pause(&row, d.now)? {
        return Err(persons_pause(
            d,
            "a person's pause is theirs to change or end",
        )?);
    }
    let until_ts = row.until.clone();
    d.record(&Event::Paused(Pause {
        until: until_ts.as_deref(),
        reason: reason.as_ref(),
        by: &by,
    }))?;
    let why = reason
        .map(|r| format!(" ({})", r.first_line(120)))
        .unwrap_or_default();
    let line = format!(
        "{by} paused runs until {}{why}; heartbeat resume ends it",
        show_time(until, d.cfg.tz())
    );
    tell(d, &line)?;
    Ok(Paused { until, capped })
}

/// End an agent's pause, as the agent `d.by`; false when runs were not paused. A person's
/// pause is refused, and stays. Audited `resumed`.
pub(crate) fn resume(d: &mut Decider) -> Result<bool> {
    let Some(ended) = d.store.clear_agent_pause()? else {
        return match d.store.pause_row()? {
            Some(p) if p.in_force(d.now) => Err(persons_pause(
                d,
                "an agent cannot lift a person's pause (a person resumes with heartbeat \
                 resume, or /resume in Telegram)",
            )?),
            _ => Ok(false),
        };
    };
    if !ended.in_force(d.now) {
        // It had ended by itself: recorded as a run would record it.
        d.record(&Event::Resumed(Pause {
            until: ended.until.as_deref(),
            reason: Some(&"the pause ended".into()),
            by: &ended.by,
        }))?;
        return Ok(false);
    }
    let by = d.by.clone();
    d.record(&Event::Resumed(Pause {
        until: ended.until.as_deref(),
        reason: Some(&"resumed".into()),
        by: &by,
    }))?;
    let line = format!("{by} resumed runs (paused by {})", ended.by);
    tell(d, &line)?;
    Ok(true)
}

/// Tell the person that the agent `d.by` decided approval `row` (`state`: denied or
/// approved). `cwd` is where its file is shown from.
pub(crate) fn decided(
    d: &mut Decider,
    row: &ApprovalRow,
    state: ApprovalState,
    reason: Option<&str>,
    cwd: &Path,
) -> Result<()> {
    let why = reason
        .map(|r| format!(": {}", d.audit.secrets().redact(r).first_line(120)))
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
    let line = d.audit.secrets().redact(line);
    d.store.add_notice(&line, d.now)?;
    let mut msg = Rendered::new(
        MessageKind::Agent,
        line.first_line(80).into_string(),
        format!("🤖 {}", line.escape()),
    );
    msg.data = serde_json::json!({ "text": line.as_str() });
    // Every action is news: not folded into the daily cap, nor dropped as a repeat.
    outbox::enqueue_all(&mut *d.store, &d.cfg, &msg, true, d.now, d.audit.secrets())?;
    Ok(())
}
