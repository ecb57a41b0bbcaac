//! What button presses and chat commands do (docs/reference.md#telegram-buttons-and-commands).
//!
//! Invariants:
//! - Only chats in `telegram.chat_ids` decide anything. Anything from another chat is
//!   answered (presses), ignored and audited as `telegram_rejected`.
//! - A press acts exactly like `heartbeat approve`/`deny`: the same `Decider` (only pending
//!   approvals, the decision stored and audited first), `by: telegram:<chat id>`. Running is
//!   left to the caller's session (stale check, exactly-once claim); the pressed message is
//!   edited afterwards to show the outcome.
//! - Every press is answered (`answerCallbackQuery`), also when refused.
//! - The update offset is stored after each update, so an update is acted on once.

use std::time::Duration;

use crate::audit::{self, Event, event::Pause};
use crate::config::TelegramConfig;
use crate::engine::decide::Decider;
use crate::error::Result;
use crate::model::{ApprovalState, ButtonAction, MessageKind};
use crate::render::show_time;
use crate::render::telegram::{ApprovalView, Entry, approval_alone, with_approvals};
use crate::store::{NewMessage, NewPause, Store};
use crate::telegram::{Button, Incoming, Received, Telegram};
use crate::text::escape;
use chrono::{DateTime, Datelike, Utc};

const OFFSET_KEY: &str = crate::store::TELEGRAM_OFFSET;

/// A pressed message whose text must show the outcome once the approval ran.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pressed {
    pub chat_id: i64,
    pub message_id: i64,
    pub approval_id: i64,
}

/// What the updates asked of the caller.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Effects {
    /// Approved from Telegram: edit these messages after the run.
    pub pressed: Vec<Pressed>,
    /// `/run`: tick now (the daemon; a run is ticking anyway).
    pub run_now: bool,
    /// Getting updates failed (Telegram unreachable): a note for diagnostics.
    pub error: Option<String>,
}

/// Read the updates waiting at the Bot API (`wait` 0: without waiting) and act on them.
pub(crate) fn handle_updates(
    tg: &Telegram,
    d: &mut Decider,
    cfg: &TelegramConfig,
    wait: Duration,
) -> Result<Effects> {
    match tg.updates(stored_offset(&*d.store)?, wait) {
        Ok(updates) => process(tg, d, cfg, &updates),
        Err(e) => Ok(Effects {
            error: Some(e.to_string()),
            ..Effects::default()
        }),
    }
}

/// The offset to ask Telegram for next (the update after the last one acted on).
pub(crate) fn stored_offset(store: &dyn Store) -> Result<Option<i32>> {
    Ok(store.meta(OFFSET_KEY)?.and_then(|v| v.parse::<i32>().ok()))
}

/// Act on updates already fetched, storing the offset after each.
pub(crate) fn process(
    tg: &Telegram,
    d: &mut Decider,
    cfg: &TelegramConfig,
    updates: &[Received],
) -> Result<Effects> {
    let mut fx = Effects::default();
    for u in updates {
        if let Some((incoming, seen)) = u.read.clone() {
            let title = d.audit.secrets().redact(&seen.title);
            d.store.saw_chat(seen.chat_id, &seen.kind, &title, d.now)?;
            handle(tg, d, cfg, incoming, &mut fx)?;
        }
        d.store.set_meta(OFFSET_KEY, &u.next_offset.to_string())?;
    }
    Ok(fx)
}

fn handle(
    tg: &Telegram,
    d: &mut Decider,
    cfg: &TelegramConfig,
    incoming: Incoming,
    fx: &mut Effects,
) -> Result<()> {
    let (chat_id, kind) = match &incoming {
        Incoming::Press { chat_id, .. } => (*chat_id, "button"),
        Incoming::Command { chat_id, .. } => (*chat_id, "command"),
        Incoming::Message { chat_id } => (*chat_id, "message"),
    };
    if !cfg.chat_ids.contains(&chat_id) {
        d.record(&Event::TelegramRejected { chat_id, kind })?;
        if let Incoming::Press { callback_id, .. } = &incoming {
            let _ = tg.answer(callback_id, &"This chat may not decide here.".into());
        }
        return Ok(());
    }
    d.by = format!("telegram:{chat_id}");
    match incoming {
        Incoming::Press {
            callback_id,
            message_id,
            action,
            ..
        } => press(tg, d, chat_id, &callback_id, message_id, action, fx),
        Incoming::Command { command, arg, .. } => command_reply(d, chat_id, &command, &arg, fx),
        // Chatter is not a command; nothing to do.
        Incoming::Message { .. } => Ok(()),
    }
}

fn press(
    tg: &Telegram,
    d: &mut Decider,
    chat_id: i64,
    callback_id: &str,
    message_id: Option<i64>,
    action: Option<Button>,
    fx: &mut Effects,
) -> Result<()> {
    let (action, id) = match action {
        Some(Button::Approval(action, id)) => (action, id),
        Some(Button::Reset(task_id)) => {
            // The same checks as `heartbeat reset`, by the chat that pressed it.
            let answer = match d.reset_task(&task_id)? {
                Some(_) => format!("Task {task_id} reset; it runs again when due."),
                None => format!("heartbeat has no record of task {task_id}."),
            };
            let _ = tg.answer(callback_id, &d.audit.secrets().redact(&answer));
            return Ok(());
        }
        None => {
            let _ = tg.answer(callback_id, &"This button is not heartbeat's.".into());
            return Ok(());
        }
    };
    let Some(row) = d.store.approval(id)? else {
        let _ = tg.answer(
            callback_id,
            &d.audit
                .secrets()
                .redact(&format!("There is no approval #{id}.")),
        );
        return Ok(());
    };
    // No message shows all of such an input, so no button may approve it (one that an old
    // message or a forged press carries): the terminal, where it can be read, decides.
    let hidden = crate::render::telegram::hidden_values(&row.input, d.audit.secrets());
    if hidden > 0
        && matches!(action, ButtonAction::Approve | ButtonAction::Always)
        && matches!(row.state, ApprovalState::Pending | ApprovalState::Approved)
    {
        // A callback answer holds 200 characters: the file by its name.
        let name = std::path::Path::new(&row.file)
            .file_name()
            .map_or(row.file.clone(), |n| n.to_string_lossy().into_owned());
        let answer = format!(
            "#{id}: {hidden} value(s) hidden — read {}:{} and run heartbeat approve {id}",
            d.audit.secrets().redact(&name).first_line(60),
            row.line
        );
        let _ = tg.answer(callback_id, &d.audit.secrets().redact(&answer));
        return Ok(());
    }
    let answer = match (row.state, action) {
        (ApprovalState::Pending, ButtonAction::Approve | ButtonAction::Always) => {
            if d.approve(&row, action == ButtonAction::Always)? {
                if let Some(m) = message_id {
                    fx.pressed.push(Pressed {
                        chat_id,
                        message_id: m,
                        approval_id: id,
                    });
                }
                format!("Approved #{id}; running it now.")
            } else {
                format!("#{id} was decided elsewhere meanwhile.")
            }
        }
        (ApprovalState::Pending, ButtonAction::Deny) => {
            if d.deny(&row, None)? {
                if let Some(m) = message_id {
                    let line = format!("🚫 #{id} denied by {}", d.by);
                    edit_with(tg, &mut *d.store, chat_id, m, id, &line, d.now)?;
                }
                format!("Denied #{id}.")
            } else {
                format!("#{id} was decided elsewhere meanwhile.")
            }
        }
        (ApprovalState::Approved, ButtonAction::Approve | ButtonAction::Always) => {
            if action == ButtonAction::Always {
                d.grant(&row)?;
            }
            if let Some(m) = message_id {
                fx.pressed.push(Pressed {
                    chat_id,
                    message_id: m,
                    approval_id: id,
                });
            }
            format!("#{id} is already approved; it runs now.")
        }
        (state, _) => {
            if let Some(m) = message_id {
                let line = format!("#{id} is {state}");
                edit_with(tg, &mut *d.store, chat_id, m, id, &line, d.now)?;
            }
            format!("#{id} is already {state}.")
        }
    };
    let _ = tg.answer(callback_id, &d.audit.secrets().redact(&answer));
    Ok(())
}

/// Append an outcome line to a message with buttons and drop that approval's buttons.
fn edit_with(
    tg: &Telegram,
    store: &mut dyn Store,
    chat_id: i64,
    message_id: i64,
    approval_id: i64,
    line: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    let Some((html, approvals)) = store.button_message(chat_id, message_id)? else {
        return Ok(());
    };
    let html = crate::audit::Secrets::taken().redact(&format!("{html}\n{}", escape(line)));
    let rest: Vec<i64> = approvals
        .into_iter()
        .filter(|&a| a != approval_id)
        .collect();
    // An edit that does not go through is cosmetic: the decision stands either way.
    if tg.edit(chat_id, message_id, &html, &rest).is_ok() {
        store.save_button_message(chat_id, message_id, &html, &rest, now)?;
    }
    Ok(())
}

/// After a run: show on each pressed message what became of its approval.
pub(crate) fn show_outcomes(
    tg: &Telegram,
    store: &mut dyn Store,
    pressed: &[Pressed],
    now: DateTime<Utc>,
) -> Result<()> {
    for p in pressed {
        let Some(row) = store.approval(p.approval_id)? else {
            continue;
        };
        let by = row.decided_by.as_deref().unwrap_or("?");
        let id = row.id;
        let line = match row.state {
            ApprovalState::Succeeded => format!("✅ #{id} approved by {by}: done"),
            ApprovalState::Failed => format!(
                "❌ #{id} approved by {by}: failed ({})",
                crate::audit::Secrets::taken()
                    .redact(row.reason.as_deref().unwrap_or("?"))
                    .first_line(120)
            ),
            ApprovalState::Stale => format!(
                "🚫 #{id} stale: {}",
                crate::audit::Secrets::taken()
                    .redact(row.reason.as_deref().unwrap_or("?"))
                    .first_line(120)
            ),
            ApprovalState::Approved => {
                format!("☑️ #{id} approved by {by}; it runs at the next run")
            }
            state => format!("#{id} is {state}"),
        };
        edit_with(tg, store, p.chat_id, p.message_id, id, &line, now)?;
    }
    Ok(())
}

/// Denials made elsewhere (at the terminal, by an agent) leave their message's buttons
/// live: show each on its message, as a press would, and drop its buttons. An edit that
/// does not go through is tried again at the next run.
pub(crate) fn show_denials(tg: &Telegram, store: &mut dyn Store, now: DateTime<Utc>) -> Result<()> {
    for (chat_id, message_id, approvals) in store.open_button_messages()? {
        for id in approvals {
            let Some(row) = store.approval(id)? else {
                continue;
            };
            if row.state == ApprovalState::Denied {
                let by = row.decided_by.as_deref().unwrap_or("?");
                let line = format!("🚫 #{id} denied by {by}");
                edit_with(tg, store, chat_id, message_id, id, &line, now)?;
            }
        }
    }
    Ok(())
}

fn reply(d: &mut Decider, chat_id: i64, html: &str, approvals: &[i64]) -> Result<()> {
    let html = d.audit.secrets().redact(html);
    d.store.enqueue(
        &NewMessage {
            channel: crate::notify::telegram::KIND,
            delivery_id: &super::outbox::delivery_id(),
            title: &"reply".into(),
            data: &"{}".into(),
            destination: &crate::notify::telegram::destination(chat_id),
            kind: MessageKind::Reply.as_str(),
            payload: &html,
            urgent: true,
            direct: true,
            approvals,
            resets: &[],
        },
        d.now,
    )?;
    Ok(())
}

const HELP: &str = "Commands: /status, /pending, /pause [duration], /resume, /run";

fn command_reply(
    d: &mut Decider,
    chat_id: i64,
    command: &str,
    arg: &str,
    fx: &mut Effects,
) -> Result<()> {
    match command {
        "status" => {
            let text = status_text(&*d.store, d.now, d.cfg.tz())?;
            reply(d, chat_id, &text, &[])
        }
        "pending" => {
            let rows = d.store.approvals(Some(ApprovalState::Pending))?;
            if rows.is_empty() {
                return reply(d, chat_id, "No pending approvals.", &[]);
            }
            // Each with its whole input: a button approves only what the reply shows.
            let mut entries = vec![Entry {
                html: format!("<b>{} pending approval(s)</b>", rows.len()),
                approval: None,
            }];
            for r in &rows {
                entries.push(Entry {
                    html: format!(
                        "⏳ #{} <b>@{}</b> {}:{} — <code>heartbeat approve {}</code>",
                        r.id,
                        escape(&r.tool),
                        escape(&r.file),
                        r.line,
                        r.id
                    ),
                    approval: Some(ApprovalView {
                        id: r.id,
                        tool: &r.tool,
                        place: format!("{}:{}", r.file, r.line),
                        input: &r.input,
                    }),
                });
            }
            let secrets = d.audit.secrets().clone();
            let composed = with_approvals(entries, Vec::new(), &secrets);
            reply(d, chat_id, &composed.html, &composed.buttons)?;
            // Those it had no room for, each in a reply of its own with its buttons.
            for view in composed.spilled {
                let (html, ids) = approval_alone(view, &secrets);
                reply(d, chat_id, &html, &ids)?;
            }
            Ok(())
        }
        "pause" => {
            let until = if arg.is_empty() {
                None
            } else {
                match humantime::parse_duration(arg).map(|dur| pause_end(d.now, dur)) {
                    Ok(Some(end)) => Some(end),
                    Ok(None) => {
                        let text = "Too long; /pause without a duration pauses until /resume.";
                        return reply(d, chat_id, text, &[]);
                    }
                    Err(e) => {
                        let text = format!("Not a duration: {} ({e}). Try /pause 2h.", escape(arg));
                        return reply(d, chat_id, &text, &[]);
                    }
                }
            };
            pause(d, until, None)?;
            let text = match until {
                // In the configured zone, as people read times (docs/reference.md#telegram).
                Some(u) => format!("Paused until {}.", show_time(u, d.cfg.tz())),
                None => "Paused until /resume.".into(),
            };
            reply(d, chat_id, &text, &[])
        }
        "resume" => {
            let text = if resume(d, "resumed")? {
                "Resumed."
            } else {
                "Not paused."
            };
            reply(d, chat_id, text, &[])
        }
        "run" => {
            fx.run_now = true;
            reply(d, chat_id, "Running now.", &[])
        }
        _ => reply(d, chat_id, HELP, &[]),
    }
}

/// When a pause of `dur` from `now` ends; None when that is after the year 9999, which no
/// RFC 3339 time (in `status --json`, the audit log) can name.
pub(crate) fn pause_end(now: DateTime<Utc>, dur: Duration) -> Option<DateTime<Utc>> {
    chrono::Duration::from_std(dur)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .filter(|end| end.year() <= 9999)
}

/// Pause runs (until a time, or until resumed); audited `paused`.
pub(crate) fn pause(
    d: &mut Decider,
    until: Option<DateTime<Utc>>,
    reason: Option<&str>,
) -> Result<()> {
    let reason = reason.map(|r| d.audit.secrets().redact(r));
    let by = d.by.clone();
    let row = NewPause {
        since: audit::format_ts(d.now),
        until: until.map(audit::format_ts),
        reason: reason.as_ref(),
        by: &by,
    };
    d.store.set_pause(&row)?;
    let until = row.until.clone();
    d.record(&Event::Paused(Pause {
        until: until.as_deref(),
        reason: reason.as_ref(),
        by: &by,
    }))
}

/// End a pause; false when there was none. Audited `resumed`.
pub(crate) fn resume(d: &mut Decider, reason: &'static str) -> Result<bool> {
    let Some(row) = d.store.clear_pause()? else {
        return Ok(false);
    };
    let by = d.by.clone();
    d.record(&Event::Resumed(Pause {
        until: row.until.as_deref(),
        reason: Some(&reason.into()),
        by: &by,
    }))?;
    Ok(true)
}

/// A short status for `/status`.
pub(crate) fn status_text(
    store: &dyn Store,
    now: DateTime<Utc>,
    tz: chrono_tz::Tz,
) -> Result<String> {
    let mut lines = vec!["<b>heartbeat</b> status".to_string()];
    match store.last_run()? {
        Some(r) => lines.push(format!(
            "last run {} at {}: {} succeeded, {} failed",
            escape(&r.run_id),
            escape(&r.started_at),
            r.succeeded,
            r.failed
        )),
        None => lines.push("no run yet".into()),
    }
    lines.push(format!("pending approvals: {}", store.count_pending()?));
    match store.pause_row()? {
        Some(p) if !p.in_force(now) => lines.push("pause ending".into()),
        Some(p) => lines.push(match &p.until {
            Some(u) => match crate::store::parse_ts(u) {
                Some(t) => format!("paused until {}", escape(&show_time(t, tz))),
                None => format!("paused until {}", escape(u)),
            },
            None => "paused until resumed".into(),
        }),
        None => lines.push("not paused".into()),
    }
    lines.push(format!("outbox: {}", store.outbox_len()?));
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_ends_within_what_rfc_3339_can_write() {
        let now = "2026-11-26T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let day = Duration::from_secs(86_400);
        assert_eq!(
            pause_end(now, day),
            Some("2026-11-27T12:00:00Z".parse().unwrap())
        );
        assert_eq!(pause_end(now, day * 365 * 8_000), None);
        assert_eq!(pause_end(now, Duration::MAX), None);
    }
}
