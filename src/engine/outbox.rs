//! Messages to people: the run summary (pure rendering), and delivery from the outbox with
//! the noise rules of docs/reference.md#outbox.
//!
//! Invariants:
//! - Every message is stored in the outbox before it is sent, and deleted only once the
//!   transport accepted it or rejected it for good; a failed send stays queued for the next
//!   run, for 24 h at most.
//! - Delivery never fails a run: transport errors become audit lines, not errors.
//! - Dynamic text is HTML-escaped; no tag spans a line, so a message can be cut at any line.
//! - The same text is not sent to the same chat twice within 6 h; in quiet hours only urgent
//!   messages go out; past `max_messages_per_day` non-urgent messages fold into one.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sha2::{Digest, Sha256};

use crate::audit::event::{Notified, Withheld};
use crate::audit::{Event, Secrets};
use crate::config::TelegramConfig;
use crate::model::HoldReason;
use crate::render::telegram::{MAX_BUTTON_ROWS, MAX_MESSAGE, Rendered, split};
use crate::schedule::local_midnight;
use crate::store::{self, NewMessage, OutboxRow, Store};
use crate::telegram::{SendError, Transport};
use crate::text::Redacted;

/// Put a message in the outbox for every configured chat, `secrets` redacted (the row is
/// what is sent).
pub fn enqueue_all(
    store: &mut Store,
    cfg: &TelegramConfig,
    msg: &Rendered,
    direct: bool,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> store::Result<()> {
    let html = secrets.redact(&msg.html);
    for &chat in &cfg.chat_ids {
        store.enqueue(
            &NewMessage {
                chat_id: chat,
                kind: msg.kind,
                html: &html,
                urgent: msg.urgent,
                direct,
                approvals: &msg.approvals,
                resets: &msg.resets,
            },
            now,
        )?;
    }
    Ok(())
}

/// The stored input of each approval a run queued, for its approval message to show.
pub fn approval_inputs(
    store: &Store,
    report: &crate::report::Report,
) -> store::Result<HashMap<i64, serde_json::Value>> {
    let mut inputs = HashMap::new();
    for t in &report.tasks {
        if t.outcome == "queued"
            && let Some(id) = t.approval_id
            && let Some(row) = store.approval(id)?
        {
            inputs.insert(id, row.input);
        }
    }
    Ok(inputs)
}

/// Identical text to the same chat within this time is not sent again.
pub const DEDUPE: Duration = Duration::from_secs(6 * 3600);
/// Undelivered messages older than this are dropped.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// What `deliver` did, for the caller's report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delivery {
    pub sent: usize,
    pub failed: usize,
    pub waiting: usize,
    pub dropped: usize,
}

/// A message sent, one that could not be, or one held back, folded or dropped by the noise
/// rules: the caller writes it to the audit log (`notification_sent`, `notification_failed`,
/// `notification_held`, `notification_folded`, `notification_dropped`).
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub chat_id: i64,
    pub kind: String,
    /// None: sent.
    pub error: Option<Redacted>,
    /// Whether the message stays in the outbox for another try.
    pub queued: bool,
    /// Not sent by a noise rule, and why.
    pub withheld: Option<Withhold>,
}

/// What a noise rule did with a message (docs/reference.md#outbox).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Withhold {
    /// Waits in the outbox (`quiet_hours`).
    Held(&'static str),
    /// Sent inside another message (`daily_cap`).
    Folded(&'static str),
    /// Not sent at all (`duplicate`).
    Dropped(&'static str),
}

impl Notice {
    fn withheld(chat_id: i64, kind: &str, w: Withhold) -> Notice {
        Notice {
            chat_id,
            kind: kind.to_string(),
            error: None,
            queued: matches!(w, Withhold::Held(_)),
            withheld: Some(w),
        }
    }

    pub fn event<'a>(&'a self, run_id: Option<&'a str>) -> Event<'a> {
        if let Some(w) = self.withheld {
            let line = |reason| Withheld {
                run_id,
                channel: "telegram",
                chat_id: self.chat_id,
                kind: &self.kind,
                reason,
            };
            return match w {
                Withhold::Held(r) => Event::NotificationHeld(line(r)),
                Withhold::Folded(r) => Event::NotificationFolded(line(r)),
                Withhold::Dropped(r) => Event::NotificationDropped(line(r)),
            };
        }
        let n = Notified {
            run_id,
            channel: "telegram",
            chat_id: self.chat_id,
            kind: &self.kind,
            error: self.error.as_ref(),
            queued: self.queued,
        };
        if self.error.is_none() {
            Event::NotificationSent(n)
        } else {
            Event::NotificationFailed(n)
        }
    }
}

/// One message to send, made of one or more outbox rows: its text redacted again as a whole
/// (rows are stored redacted) before anything cuts it into parts.
struct Planned {
    rows: Vec<OutboxRow>,
    html: Redacted,
    approvals: Vec<i64>,
    resets: Vec<String>,
    counted: bool,
    kind: String,
}

impl Planned {
    /// One outbox row as its own message; a direct one (a reply, a test) does not count
    /// toward the daily cap.
    fn one(r: OutboxRow) -> Planned {
        Planned {
            html: Secrets::taken().redact(&r.html),
            approvals: r.approvals.clone(),
            resets: r.resets.clone(),
            counted: !r.direct,
            kind: r.kind.clone(),
            rows: vec![r],
        }
    }
}

/// A message waits in the outbox under `rule`: audited when it starts waiting under it, not
/// again at every run while it waits.
fn hold(
    store: &mut Store,
    audit: &mut Vec<Notice>,
    row: &OutboxRow,
    rule: HoldReason,
) -> store::Result<()> {
    if row.held != Some(rule) {
        store.outbox_held(row.id, rule)?;
        audit.push(Notice::withheld(
            row.chat_id,
            &row.kind,
            Withhold::Held(rule.as_str()),
        ));
    }
    Ok(())
}

/// The `meta` key of the time before which Telegram asked not to be sent anything.
pub const RETRY_AT_KEY: &str = "telegram_retry_at";

/// Send what the outbox holds, obeying quiet hours, the dedupe, the daily cap and
/// Telegram's "retry after". Returns what happened and what to audit (the caller owns the
/// audit log).
pub fn deliver(
    store: &mut Store,
    transport: Option<&dyn Transport>,
    cfg: &TelegramConfig,
    tz: Tz,
    now: DateTime<Utc>,
) -> store::Result<(Delivery, Vec<Notice>)> {
    let mut stats = Delivery::default();
    let mut audit = Vec::new();
    let mut by_chat: BTreeMap<i64, Vec<OutboxRow>> = BTreeMap::new();
    for row in store.outbox()? {
        by_chat.entry(row.chat_id).or_default().push(row);
    }
    store.prune_sent(now - chrono::Duration::hours(25))?;
    let quiet = cfg
        .quiet_hours
        .is_some_and(|w| w.contains(now.with_timezone(&tz).naive_local()));
    let day_start = local_midnight(tz, now);
    // After Telegram's "retry after" nothing is sent before that time; it all waits.
    let wait_until = store
        .meta(RETRY_AT_KEY)?
        .as_deref()
        .and_then(store::parse_ts);
    let mut transport = transport.filter(|_| wait_until.is_none_or(|at| now >= at));

    for (chat, rows) in by_chat {
        let mut live = Vec::new();
        for row in rows {
            let too_old = store::parse_ts(&row.created_at).is_none_or(|t| {
                now.signed_duration_since(t).to_std().unwrap_or_default() >= MAX_AGE
            });
            if !cfg.chat_ids.contains(&chat) {
                store.outbox_delete(row.id)?;
                stats.dropped += 1;
                let why = "the chat is no longer in telegram.chat_ids".into();
                audit.push(failed_line(chat, &row.kind, why, false));
            } else if too_old {
                // Undelivered for 24 h: dropped, and said so (docs/reference.md#audit-events,
                // reason `expired`).
                store.outbox_delete(row.id)?;
                stats.dropped += 1;
                audit.push(Notice::withheld(
                    chat,
                    &row.kind,
                    Withhold::Dropped("expired"),
                ));
            } else {
                live.push(row);
            }
        }
        // The same text within 6 h is not sent again, nor twice from one batch (runs that
        // queued it while Telegram was down). Replies, tests and an explicit @notify are
        // exempt: a person asked for each of those.
        let mut fresh = Vec::new();
        let mut batch = std::collections::HashSet::new();
        for row in live {
            let deduped = !row.direct && row.kind != "notify";
            if deduped && !batch.insert(hash(&row.html)) {
                store.outbox_delete(row.id)?;
                audit.push(Notice::withheld(
                    chat,
                    &row.kind,
                    Withhold::Dropped("duplicate"),
                ));
                continue;
            }
            if deduped
                && store.sent_since(
                    chat,
                    &hash(&row.html),
                    now - chrono::Duration::from_std(DEDUPE).unwrap_or_default(),
                )?
            {
                store.outbox_delete(row.id)?;
                audit.push(Notice::withheld(
                    chat,
                    &row.kind,
                    Withhold::Dropped("duplicate"),
                ));
                continue;
            }
            fresh.push(row);
        }
        let (urgent, normal): (Vec<_>, Vec<_>) =
            fresh.into_iter().partition(|r| r.urgent || r.direct);
        let normal = if quiet {
            stats.waiting += normal.len();
            for row in &normal {
                hold(store, &mut audit, row, HoldReason::QuietHours)?;
            }
            Vec::new()
        } else {
            normal
        };
        let budget = match cfg.max_messages_per_day {
            0 => usize::MAX,
            max => (max as usize).saturating_sub(store.count_sent(chat, day_start)? as usize),
        };
        let mut plan: Vec<Planned> = urgent.into_iter().map(Planned::one).collect();
        if normal.len() <= budget {
            plan.extend(normal.into_iter().map(Planned::one));
        } else if budget >= 1 {
            let mut normal = normal;
            let rest = normal.split_off(budget - 1);
            plan.extend(normal.into_iter().map(Planned::one));
            audit.extend(folded(chat, &rest));
            plan.push(fold(rest, None));
        } else if !normal.is_empty() {
            // No budget left today: ride along with the next urgent message, or wait.
            match plan.pop() {
                Some(last) => {
                    audit.extend(folded(chat, &normal));
                    plan.push(fold(normal, Some(last)));
                }
                None => {
                    stats.waiting += normal.len();
                    for row in &normal {
                        hold(store, &mut audit, row, HoldReason::DailyCap)?;
                    }
                }
            }
        }

        for p in plan {
            let Some(t) = transport else {
                stats.waiting += p.rows.len();
                continue;
            };
            match send_parts(t, store, chat, &p, now)? {
                Ok(message_id) => {
                    for r in &p.rows {
                        store.outbox_delete(r.id)?;
                        store.record_sent(chat, &hash(&r.html), false, now)?;
                    }
                    store.record_sent(chat, &hash(p.html.as_str()), p.counted, now)?;
                    let parts = split(&p.html, MAX_MESSAGE);
                    if !p.approvals.is_empty() && parts.len() == 1 {
                        store.save_button_message(chat, message_id, &p.html, &p.approvals, now)?;
                    }
                    stats.sent += 1;
                    audit.push(Notice {
                        chat_id: chat,
                        kind: p.kind.clone(),
                        error: None,
                        queued: false,
                        withheld: None,
                    });
                }
                Err(SendError::Rejected(why)) => {
                    // It can never be sent: dropped at once, with Telegram's words first.
                    let error = Secrets::taken().redact(&why);
                    for r in &p.rows {
                        store.outbox_delete(r.id)?;
                    }
                    stats.dropped += 1;
                    audit.push(failed_line(chat, &p.kind, error, false));
                    audit.push(Notice::withheld(
                        chat,
                        &p.kind,
                        Withhold::Dropped("rejected"),
                    ));
                }
                Err(e) => {
                    // A transport's error may quote the request (the token is in its URL).
                    let error = Secrets::taken().redact(e.message());
                    for r in &p.rows {
                        store.outbox_failed(r.id, &error)?;
                    }
                    stats.failed += 1;
                    audit.push(failed_line(chat, &p.kind, error, true));
                    match &e {
                        SendError::Refused(_) | SendError::Rejected(_) => {}
                        SendError::Unavailable(_) => {
                            // Telegram is down or unreachable: the rest waits for the next run.
                            transport = None;
                        }
                        SendError::RetryAfter(wait, _) => {
                            // Asking again sooner would only prolong the flood limit. A
                            // message waits at most a day anyway (then it expires).
                            let wait = chrono::Duration::from_std((*wait).min(MAX_AGE))
                                .unwrap_or_default();
                            store.set_meta(RETRY_AT_KEY, &crate::audit::format_ts(now + wait))?;
                            transport = None;
                        }
                    }
                }
            }
        }
    }
    Ok((stats, audit))
}

fn failed_line(chat: i64, kind: &str, error: Redacted, queued: bool) -> Notice {
    Notice {
        chat_id: chat,
        kind: kind.to_string(),
        error: Some(error),
        queued,
        withheld: None,
    }
}

/// The notices of messages folded into one because of the daily cap.
fn folded(chat: i64, rows: &[OutboxRow]) -> Vec<Notice> {
    rows.iter()
        .map(|r| Notice::withheld(chat, &r.kind, Withhold::Folded("daily_cap")))
        .collect()
}

/// Send a message in as many parts as it needs; buttons go on the last part. A part that
/// Telegram accepted is remembered, so that a retry after a failed later part sends only
/// the rest, never part 1 again (docs/reference.md#outbox).
fn send_parts(
    t: &dyn Transport,
    store: &mut Store,
    chat: i64,
    p: &Planned,
    now: DateTime<Utc>,
) -> store::Result<Result<i64, SendError>> {
    let parts = split(&p.html, MAX_MESSAGE);
    let last = parts.len() - 1;
    // Approval buttons only under a message that shows all it approves: one part. (The
    // renderer keeps such messages to one part; this holds whatever built the text.)
    let approvals: &[i64] = if last == 0 { &p.approvals } else { &[] };
    let whole = hash(p.html.as_str());
    let since = now - chrono::Duration::from_std(MAX_AGE).unwrap_or_default();
    let mut id = 0;
    for (i, part) in parts.iter().enumerate() {
        let key = format!("part {i} of {whole}");
        if i < last && store.sent_since(chat, &key, since)? {
            continue;
        }
        let (buttons, resets): (&[i64], &[String]) = if i == last {
            (approvals, &p.resets)
        } else {
            (&[], &[])
        };
        // Each part cut from the whole message redacted (see [`Planned`]).
        match t.send(chat, part, buttons, resets) {
            Ok(sent) => id = sent,
            Err(e) => return Ok(Err(e)),
        }
        if i < last {
            store.record_sent(chat, &key, false, now)?;
        }
    }
    Ok(Ok(id))
}

/// Fold several messages into one (cut to one message's length), after `head` if given.
fn fold(rows: Vec<OutboxRow>, head: Option<Planned>) -> Planned {
    let n = rows.len();
    let mut html = match &head {
        Some(h) => format!("{}\n\n", h.html),
        None => String::new(),
    };
    html.push_str(&format!(
        "<b>heartbeat</b>: {n} message(s) folded into one (telegram.max_messages_per_day)"
    ));
    let mut resets = head.as_ref().map(|h| h.resets.clone()).unwrap_or_default();
    for r in &rows {
        html.push_str("\n\n");
        html.push_str(&r.html);
        resets.extend(r.resets.iter().cloned());
    }
    // Redacted as a whole before it is cut.
    let mut parts = split(&Secrets::taken().redact(&html), MAX_MESSAGE - 40);
    let cut = parts.len() > 1;
    let html = parts.swap_remove(0);
    let html = if cut {
        html.append("\n… (cut to fit one message)")
    } else {
        html
    };
    // A message cut to fit keeps the buttons of the approvals it still shows whole only.
    let whole = |text: &str| html.as_str().contains(text);
    let mut approvals: Vec<i64> = head
        .as_ref()
        .filter(|h| whole(h.html.as_str()))
        .map(|h| h.approvals.clone())
        .unwrap_or_default();
    for r in rows.iter().filter(|r| whole(&r.html)) {
        approvals.extend(&r.approvals);
    }
    approvals.truncate(MAX_BUTTON_ROWS);
    resets.truncate(MAX_BUTTON_ROWS);
    let mut all = head.map(|h| h.rows).unwrap_or_default();
    let kind = all.first().map_or("folded".to_string(), |r| r.kind.clone());
    all.extend(rows);
    Planned {
        rows: all,
        html,
        approvals,
        resets,
        counted: true,
        kind,
    }
}

fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Window;

    /// A transport that records what it was given and fails as told.
    #[derive(Default)]
    struct Fake {
        sent: std::cell::RefCell<Vec<(i64, String, Vec<i64>)>>,
        fail: Option<SendError>,
    }

    impl Fake {
        fn sent(&self) -> Vec<(i64, String, Vec<i64>)> {
            self.sent.borrow().clone()
        }
    }

    impl Transport for Fake {
        fn send(
            &self,
            chat: i64,
            html: &Redacted,
            approvals: &[i64],
            _resets: &[String],
        ) -> Result<i64, SendError> {
            if let Some(e) = &self.fail {
                return Err(e.clone());
            }
            let mut sent = self.sent.borrow_mut();
            sent.push((chat, html.to_string(), approvals.to_vec()));
            Ok(sent.len() as i64)
        }
    }

    fn tg(chats: &[i64]) -> TelegramConfig {
        TelegramConfig {
            chat_ids: chats.to_vec(),
            ..TelegramConfig::default()
        }
    }

    fn msg(html: &str, urgent: bool) -> Rendered {
        Rendered {
            kind: "summary",
            html: html.into(),
            urgent,
            approvals: vec![],
            resets: vec![],
        }
    }

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn queued_messages_survive_a_failure_and_go_out_later() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let cfg = tg(&[1, 2]);
        let t0 = ts("2026-01-01T10:00:00Z");
        enqueue_all(
            &mut s,
            &cfg,
            &msg("a", false),
            false,
            t0,
            &Secrets::default(),
        )
        .unwrap();
        let down = Fake {
            fail: Some(SendError::Unavailable("502 Bad Gateway".into())),
            ..Fake::default()
        };
        let (d, lines) = deliver(&mut s, Some(&down), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(d.failed, 1, "stops at the first unavailable");
        assert!(lines[0].error.is_some());
        assert!(lines[0].queued);
        assert_eq!(s.outbox_len().unwrap(), 2);
        let up = Fake::default();
        let (d, _) = deliver(&mut s, Some(&up), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(d.sent, 2);
        assert_eq!(s.outbox_len().unwrap(), 0);
        assert_eq!(
            up.sent().iter().map(|m| m.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn dedupe_within_six_hours_and_drop_after_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let cfg = tg(&[1]);
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        enqueue_all(
            &mut s,
            &cfg,
            &msg("same", false),
            false,
            t0,
            &Secrets::default(),
        )
        .unwrap();
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        let t1 = ts("2026-01-01T15:59:00Z");
        enqueue_all(
            &mut s,
            &cfg,
            &msg("same", false),
            false,
            t1,
            &Secrets::default(),
        )
        .unwrap();
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t1).unwrap();
        assert_eq!(t.sent().len(), 1, "identical text within 6h is not re-sent");
        assert_eq!(s.outbox_len().unwrap(), 0);
        let t2 = ts("2026-01-01T16:00:01Z");
        enqueue_all(
            &mut s,
            &cfg,
            &msg("same", false),
            false,
            t2,
            &Secrets::default(),
        )
        .unwrap();
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t2).unwrap();
        assert_eq!(t.sent().len(), 2, "after 6h it goes again");

        enqueue_all(
            &mut s,
            &cfg,
            &msg("old", false),
            false,
            t2,
            &Secrets::default(),
        )
        .unwrap();
        let (d, lines) = deliver(&mut s, None, &cfg, chrono_tz::UTC, t2).unwrap();
        assert_eq!(d.waiting, 1);
        let later = ts("2026-01-02T16:00:01Z");
        let (d, lines2) = deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, later).unwrap();
        assert!(lines.is_empty());
        assert_eq!(d.dropped, 1);
        assert_eq!(lines2[0].withheld, Some(Withhold::Dropped("expired")));
        assert!(!lines2[0].queued);
        assert!(matches!(
            lines2[0].event(None),
            Event::NotificationDropped(ref w) if w.reason == "expired"
        ));
    }

    #[test]
    fn identical_messages_waiting_together_go_out_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let cfg = tg(&[1]);
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        for _ in 0..3 {
            enqueue_all(
                &mut s,
                &cfg,
                &msg("same", false),
                false,
                t0,
                &Secrets::default(),
            )
            .unwrap();
        }
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(t.sent().len(), 1);
        assert_eq!(s.outbox_len().unwrap(), 0);
    }

    #[test]
    fn an_explicit_notify_is_never_deduplicated_and_what_is_withheld_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        let notify = Rendered {
            kind: "notify",
            ..msg("call grandma", false)
        };
        let put = |s: &mut Store, cfg: &TelegramConfig, m: &Rendered, at| {
            enqueue_all(s, cfg, m, false, at, &Secrets::default()).unwrap();
        };
        put(&mut s, &cfg, &notify, t0);
        put(&mut s, &cfg, &notify, t0);
        put(&mut s, &cfg, &msg("same summary", false), t0);
        put(&mut s, &cfg, &msg("same summary", false), t0);
        let (_, notices) = deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        let texts: Vec<String> = t.sent().into_iter().map(|(_, html, _)| html).collect();
        assert_eq!(
            texts.iter().filter(|h| *h == "call grandma").count(),
            2,
            "{texts:?}"
        );
        assert_eq!(texts.iter().filter(|h| *h == "same summary").count(), 1);
        let dropped: Vec<_> = notices.iter().filter(|n| n.withheld.is_some()).collect();
        assert_eq!(dropped.len(), 1, "{notices:?}");
        assert_eq!(dropped[0].withheld, Some(Withhold::Dropped("duplicate")));
        assert_eq!(dropped[0].kind, "summary");

        // Quiet hours: held, with a line.
        cfg.quiet_hours = Some(Window::parse("22:00-07:00").unwrap());
        let night = ts("2026-01-01T23:00:00Z");
        put(&mut s, &cfg, &msg("later", false), night);
        let (_, notices) = deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, night).unwrap();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].withheld, Some(Withhold::Held("quiet_hours")));
        assert!(matches!(notices[0].event(None), Event::NotificationHeld(_)));
        // Still waiting at the next run: said once, not at every run.
        let later = ts("2026-01-01T23:05:00Z");
        let (d, notices) = deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, later).unwrap();
        assert_eq!(d.waiting, 1);
        assert!(notices.is_empty(), "{notices:?}");
    }

    #[test]
    fn quiet_hours_hold_all_but_urgent() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        cfg.quiet_hours = Some(Window::parse("22:00-07:00").unwrap());
        let t = Fake::default();
        let night = ts("2026-01-01T23:00:00Z");
        enqueue_all(
            &mut s,
            &cfg,
            &msg("fine", false),
            false,
            night,
            &Secrets::default(),
        )
        .unwrap();
        enqueue_all(
            &mut s,
            &cfg,
            &msg("broken", true),
            false,
            night,
            &Secrets::default(),
        )
        .unwrap();
        let (d, _) = deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, night).unwrap();
        assert_eq!((d.sent, d.waiting), (1, 1));
        assert_eq!(t.sent()[0].1, "broken");
        let morning = ts("2026-01-02T07:00:00Z");
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, morning).unwrap();
        assert_eq!(t.sent()[1].1, "fine");
    }

    #[test]
    fn past_the_daily_cap_messages_fold_into_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        cfg.max_messages_per_day = 3;
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        for i in 0..6 {
            enqueue_all(
                &mut s,
                &cfg,
                &msg(&format!("m{i}"), false),
                false,
                t0,
                &Secrets::default(),
            )
            .unwrap();
        }
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(t.sent().len(), 3);
        assert_eq!(t.sent()[0].1, "m0");
        assert_eq!(t.sent()[1].1, "m1");
        assert!(
            t.sent()[2].1.contains("4 message(s) folded"),
            "{}",
            t.sent()[2].1
        );
        assert!(t.sent()[2].1.contains("m5"));
        assert_eq!(s.outbox_len().unwrap(), 0);
        // The day is used up: the next one waits, then rides along with an urgent one.
        enqueue_all(
            &mut s,
            &cfg,
            &msg("later", false),
            false,
            t0,
            &Secrets::default(),
        )
        .unwrap();
        let (d, _) = deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(d.waiting, 1);
        enqueue_all(
            &mut s,
            &cfg,
            &msg("fire", true),
            false,
            t0,
            &Secrets::default(),
        )
        .unwrap();
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(t.sent().len(), 4);
        assert!(t.sent()[3].1.starts_with("fire\n\n"), "{}", t.sent()[3].1);
        assert!(t.sent()[3].1.contains("later"));
    }

    #[test]
    fn replies_are_exempt_from_dedupe_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        cfg.max_messages_per_day = 1;
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        for _ in 0..3 {
            enqueue_all(
                &mut s,
                &cfg,
                &msg("status: ok", false),
                true,
                t0,
                &Secrets::default(),
            )
            .unwrap();
        }
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(t.sent().len(), 3);
    }

    #[test]
    fn approval_buttons_go_only_on_a_message_of_one_part_and_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let cfg = tg(&[1]);
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        // In two parts, no part shows all that the buttons would approve: none.
        let long = vec!["y".repeat(1000); 6].join("\n");
        let m = Rendered {
            kind: "summary",
            html: long,
            urgent: false,
            approvals: vec![7],
            resets: vec![],
        };
        enqueue_all(&mut s, &cfg, &m, false, t0, &Secrets::default()).unwrap();
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(t.sent().len(), 2);
        assert!(t.sent().iter().all(|(_, _, buttons)| buttons.is_empty()));
        assert_eq!(s.button_message(1, 2).unwrap(), None);
        // In one part: the buttons, remembered for the edit after a press.
        let m = Rendered {
            html: "short".into(),
            ..m
        };
        enqueue_all(&mut s, &cfg, &m, false, t0, &Secrets::default()).unwrap();
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        assert_eq!(t.sent()[2].2, vec![7]);
        let (_, approvals) = s.button_message(1, 3).unwrap().unwrap();
        assert_eq!(approvals, vec![7]);
    }

    #[test]
    fn a_folded_message_keeps_the_buttons_of_approvals_it_shows_whole_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let cfg = TelegramConfig {
            max_messages_per_day: 1,
            ..tg(&[1])
        };
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        let with = |html: String, id: i64| Rendered {
            kind: "summary",
            html,
            urgent: false,
            approvals: vec![id],
            resets: vec![],
        };
        // The first fits whole in the folded message, the second is cut off.
        for m in [
            with("approve #1".into(), 1),
            with(vec!["z".repeat(1000); 5].join("\n"), 2),
        ] {
            enqueue_all(&mut s, &cfg, &m, false, t0, &Secrets::default()).unwrap();
        }
        deliver(&mut s, Some(&t), &cfg, chrono_tz::UTC, t0).unwrap();
        let sent = t.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].1.contains("cut to fit"), "{}", sent[0].1);
        assert_eq!(sent[0].2, vec![1]);
    }
}
