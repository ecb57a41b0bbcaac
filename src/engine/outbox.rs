//! Messages to people: queueing them in the outbox and delivering them through their
//! channel (`notify/`), with the noise rules of docs/reference.md#outbox.
//!
//! Invariants:
//! - Every message is stored in the outbox before it is sent, and deleted only once the
//!   channel accepted it or rejected it for good; a failed send stays queued for the next
//!   run, for 24 h at most.
//! - One delivery for every channel: what becomes of a message is decided here from the
//!   channel's [`SendError`], never inside a channel.
//! - Delivery never fails a run: channel errors become audit lines, not errors.
//! - Telegram's payload is HTML with dynamic text escaped; no tag spans a line, so a message
//!   can be cut at any line.
//! - The same text is not sent to the same destination twice within 6 h; in quiet hours only
//!   urgent messages go out; past the daily cap non-urgent messages fold into one.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sha2::{Digest, Sha256};

use crate::audit::event::{Notified, Withheld};
use crate::audit::{Event, Secrets};
use crate::config::Config;
use crate::model::{HoldReason, MessageKind};
use crate::notify::{self, Channel, Message, SendError};
use crate::render::telegram::{MAX_BUTTON_ROWS, Rendered};
use crate::schedule::local_midnight;
use crate::store::{self, Destination, NewMessage, OutboxRow, Store};
use crate::telegram::Transport;
use crate::text::Redacted;

/// Put a message in the outbox for every configured channel that takes its kind
/// (docs/reference.md#channels), `secrets` redacted (the row is what is sent). The number
/// of channels it went to.
pub(crate) fn enqueue_all(
    store: &mut dyn Store,
    cfg: &Config,
    msg: &Rendered,
    direct: bool,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> store::Result<usize> {
    let mut n = 0;
    for channel in notify::open(cfg, None) {
        if channel.takes(msg.kind) {
            enqueue(store, &*channel, msg, direct, now, secrets)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Put a message in the outbox for the channel named `name` only, whatever its `events`
/// say (an `@notify` that names its channel). False when no channel has that name.
pub(crate) fn enqueue_to(
    store: &mut dyn Store,
    cfg: &Config,
    name: &str,
    msg: &Rendered,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> store::Result<bool> {
    for channel in notify::open(cfg, None) {
        if channel.name() == name {
            enqueue(store, &*channel, msg, false, now, secrets)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// The messages after a run, to every channel: a channel that takes `summary` gets the
/// run's summary (Telegram by default, as its `summary` key says), which already shows the
/// run's approvals, reminders and failures; any other channel gets a message of its own for
/// each of those it takes. An invalid task's failure goes to those only when its error is
/// new or changed (docs/reference.md#channels).
pub(crate) fn enqueue_run(
    store: &mut dyn Store,
    cfg: &Config,
    report: &crate::report::Report,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> store::Result<()> {
    let channels = notify::open(cfg, None);
    if channels.is_empty() {
        return Ok(());
    }
    let inputs = approval_inputs(store, report)?;
    let fresh = fresh_invalid(store, report)?;
    let mut events = crate::render::telegram::run_events(report, &inputs, &fresh, secrets);
    for msg in events
        .iter_mut()
        .filter(|m| m.kind == MessageKind::Approval)
    {
        with_signing_keys(store, cfg, msg)?;
    }
    let missed = crate::render::telegram::missed_message(report, cfg.tz());
    for channel in &channels {
        // Missed slots are in no summary: their own message, wherever `missed` goes.
        if let Some(m) = missed.as_ref().filter(|m| channel.takes(m.kind)) {
            enqueue(store, &**channel, m, false, now, secrets)?;
        }
        if channel.takes(MessageKind::Summary) {
            let mode = match &cfg.telegram {
                Some(tc) if channel.name() == notify::telegram::KIND => tc.summary,
                _ => crate::config::SummaryMode::OnChange,
            };
            for msg in crate::render::telegram::summary(report, mode, &inputs, secrets) {
                enqueue(store, &**channel, &msg, false, now, secrets)?;
            }
        } else {
            for msg in events.iter().filter(|m| channel.takes(m.kind)) {
                enqueue(store, &**channel, msg, false, now, secrets)?;
            }
        }
    }
    Ok(())
}

/// Add to an approval's message what signing its buttons needs (ntfy,
/// docs/reference.md#approvals-by-ntfy): `expires_at`, when the approval expires, and
/// `input_hash`, the hash of its input as stored, which a reply is checked against.
fn with_signing_keys(store: &dyn Store, cfg: &Config, msg: &mut Rendered) -> store::Result<()> {
    let Some(id) = msg.data["approval_id"].as_i64() else {
        return Ok(());
    };
    let Some(row) = store.approval(id)? else {
        return Ok(());
    };
    let expires = store::parse_ts(&row.created_at)
        .zip(chrono::Duration::from_std(cfg.approval_ttl).ok())
        .and_then(|(created, ttl)| created.checked_add_signed(ttl));
    if let (Some(expires), serde_json::Value::Object(data)) = (expires, &mut msg.data) {
        data.insert("expires_at".into(), crate::audit::format_ts(expires).into());
        data.insert(
            "input_hash".into(),
            crate::markdown::parse::input_hash(&row.input).into(),
        );
    }
    Ok(())
}

/// The `meta` key of the invalid tasks' errors already reported.
const INVALID_KEY: &str = "invalid_reported";

/// The places of the run's invalid tasks whose error was not reported the run before (or
/// changed since); remembers this run's.
fn fresh_invalid(
    store: &mut dyn Store,
    report: &crate::report::Report,
) -> store::Result<std::collections::HashSet<(String, usize)>> {
    let before: Vec<String> = store
        .meta(INVALID_KEY)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    let mut now_seen = Vec::new();
    let mut fresh = std::collections::HashSet::new();
    for t in &report.tasks {
        if t.outcome == crate::model::Outcome::Invalid {
            let error = t.reason.as_ref().map(Redacted::as_str).unwrap_or("");
            let key = hash(&format!("{}:{}:{error}", t.file.display(), t.line));
            if !before.contains(&key) {
                fresh.insert((t.file.display().to_string(), t.line));
            }
            now_seen.push(key);
        }
    }
    if now_seen != before {
        let value = serde_json::to_string(&now_seen).unwrap_or_else(|_| "[]".into());
        store.set_meta(INVALID_KEY, &value)?;
    }
    Ok(fresh)
}

/// Put a message in the outbox for every destination of `channel`, rendered for it,
/// `secrets` redacted (the row is what is sent), each with a delivery id of its own.
pub(crate) fn enqueue(
    store: &mut dyn Store,
    channel: &dyn Channel,
    msg: &Rendered,
    direct: bool,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> store::Result<()> {
    let payload = secrets.redact(&channel.render(msg));
    let title = secrets.redact(&msg.title);
    let data = secrets.redact(&secrets.redact_json(msg.data.clone()).as_value().to_string());
    for destination in channel.destinations() {
        store.enqueue(
            &NewMessage {
                channel: channel.name(),
                delivery_id: &delivery_id(),
                title: &title,
                data: &data,
                destination: &destination,
                kind: msg.kind.as_str(),
                payload: &payload,
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

/// A new delivery id: `hb_` and 16 random bytes in hex, unique across hosts and databases,
/// so that a receiver that de-duplicates by it never drops a message as a repeat of
/// another's.
pub(crate) fn delivery_id() -> String {
    // Unique, not secret: without the kernel's random source, the time, the process and a
    // counter stand in.
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let bytes = crate::sys::random_bytes::<16>().unwrap_or_else(|_| {
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seed = format!(
            "{:?}|{}|{n}",
            std::time::SystemTime::now(),
            std::process::id()
        );
        let digest = Sha256::digest(seed.as_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        out
    });
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("hb_{hex}")
}

/// Send `msg` to every destination of `channel` now, past the outbox and its rules (a test
/// of the connection, `heartbeat notify-test`); what each destination answered, and the
/// notices to audit.
pub(crate) fn send_now(
    channel: &dyn Channel,
    msg: &Rendered,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> Vec<(Notice, Result<i64, SendError>)> {
    let payload = secrets.redact(&channel.render(msg));
    let title = secrets.redact(&msg.title);
    let data = secrets.redact_json(msg.data.clone()).into_value();
    let created_at = crate::audit::format_ts(now);
    let mut out = Vec::new();
    for destination in channel.destinations() {
        let id = delivery_id();
        let message = Message {
            id: &id,
            kind: msg.kind.as_str(),
            title: &title,
            payload: &payload,
            data: &data,
            created_at: &created_at,
            approvals: &[],
            resets: &[],
        };
        let result = channel.send(&destination, &message);
        let to = To::new(channel, destination);
        let notice = match &result {
            Ok(_) => Notice::sent(&to, msg.kind.as_str()),
            Err(e) => Notice::failed(&to, msg.kind.as_str(), secrets.redact(e.message()), false),
        };
        out.push((notice, result));
    }
    out
}

/// The stored input of each approval a run queued, for its approval message to show.
pub(crate) fn approval_inputs(
    store: &dyn Store,
    report: &crate::report::Report,
) -> store::Result<HashMap<i64, serde_json::Value>> {
    let mut inputs = HashMap::new();
    for t in &report.tasks {
        if t.outcome == crate::model::Outcome::Queued
            && let Some(id) = t.approval_id
            && let Some(row) = store.approval(id)?
        {
            inputs.insert(id, row.input);
        }
    }
    Ok(inputs)
}

/// Identical text to the same destination within this time is not sent again.
pub(crate) const DEDUPE: Duration = Duration::from_secs(6 * 3600);
/// Undelivered messages older than this are dropped.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// What `deliver` did, for the caller's report.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Delivery {
    pub sent: usize,
    pub failed: usize,
    pub waiting: usize,
    pub dropped: usize,
}

/// A message sent, one that could not be, or one held back, folded or dropped by the noise
/// rules: the caller writes it to the audit log (`notification_sent`, `notification_failed`,
/// `notification_held`, `notification_folded`, `notification_dropped`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Notice {
    /// The channel's name (`telegram`, or `[channels.NAME]`'s).
    pub channel: String,
    /// The destination in the channel's terms (a Telegram chat id as text).
    pub destination: String,
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
pub(crate) enum Withhold {
    /// Waits in the outbox (`quiet_hours`).
    Held(&'static str),
    /// Sent inside another message (`daily_cap`).
    Folded(&'static str),
    /// Not sent at all (`duplicate`, `expired`, `rejected`).
    Dropped(&'static str),
}

impl Notice {
    fn withheld(to: &To, kind: &str, w: Withhold) -> Notice {
        Notice {
            channel: to.channel.clone(),
            destination: to.destination.clone(),
            kind: kind.to_string(),
            error: None,
            queued: matches!(w, Withhold::Held(_)),
            withheld: Some(w),
        }
    }

    fn sent(to: &To, kind: &str) -> Notice {
        Notice {
            channel: to.channel.clone(),
            destination: to.destination.clone(),
            kind: kind.to_string(),
            error: None,
            queued: false,
            withheld: None,
        }
    }

    fn failed(to: &To, kind: &str, error: Redacted, queued: bool) -> Notice {
        Notice {
            error: Some(error),
            queued,
            ..Notice::sent(to, kind)
        }
    }

    /// The audit line. A Telegram message's has its chat id.
    pub(crate) fn event<'a>(&'a self, run_id: Option<&'a str>) -> Event<'a> {
        let chat_id = (self.channel == notify::telegram::KIND)
            .then(|| self.destination.parse().ok())
            .flatten();
        if let Some(w) = self.withheld {
            let line = |reason| Withheld {
                run_id,
                channel: &self.channel,
                chat_id,
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
            channel: &self.channel,
            chat_id,
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

/// One destination of one channel, as delivery works through it.
struct To {
    channel: String,
    destination: String,
    key: Destination,
}

impl To {
    fn new(channel: &dyn Channel, destination: String) -> To {
        To {
            channel: channel.name().to_string(),
            key: Destination {
                channel: channel.name().to_string(),
                destination: destination.clone(),
            },
            destination,
        }
    }
}

/// One message to send, made of one or more outbox rows: its payload redacted again as a
/// whole (rows are stored redacted) before anything cuts it into parts.
struct Planned {
    rows: Vec<OutboxRow>,
    /// The first row's delivery id, title, audit keys and time.
    id: String,
    title: Redacted,
    data: serde_json::Value,
    created_at: String,
    payload: Redacted,
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
            id: r.delivery_id.clone(),
            title: Secrets::taken().redact(&r.title),
            data: serde_json::from_str(&r.data).unwrap_or(serde_json::Value::Null),
            created_at: r.created_at.clone(),
            payload: Secrets::taken().redact(&r.payload),
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
    store: &mut dyn Store,
    audit: &mut Vec<Notice>,
    to: &To,
    row: &OutboxRow,
    rule: HoldReason,
) -> store::Result<()> {
    if row.held != Some(rule) {
        store.outbox_held(row.id, rule)?;
        audit.push(Notice::withheld(
            to,
            &row.kind,
            Withhold::Held(rule.as_str()),
        ));
    }
    Ok(())
}

/// The `meta` key of the time before which Telegram asked not to be sent anything.
pub(crate) const RETRY_AT_KEY: &str = "telegram_retry_at";

/// The `meta` key of the time before which a channel asked not to be sent anything.
pub(crate) fn retry_at_key(channel: &str) -> String {
    format!("{channel}_retry_at")
}

/// Send what the outbox holds for every configured channel (Telegram through
/// `transport`; see [`deliver_channel`]), and drop what waits for a channel no longer
/// configured.
pub(crate) fn deliver(
    store: &mut dyn Store,
    transport: Option<&dyn Transport>,
    cfg: &Config,
    now: DateTime<Utc>,
) -> store::Result<(Delivery, Vec<Notice>)> {
    let mut stats = Delivery::default();
    let mut audit = Vec::new();
    // In a fleet, one node at a time delivers (docs/fleet.md#singletons).
    if !store.lease("delivery")? {
        return Ok((stats, audit));
    }
    let channels = notify::open(cfg, transport);
    for row in store.outbox()? {
        if !channels.iter().any(|c| c.name() == row.channel) {
            store.outbox_delete(row.id)?;
            stats.dropped += 1;
            audit.push(Notice {
                channel: row.channel.clone(),
                destination: row.destination.clone(),
                kind: row.kind.clone(),
                error: Some("the channel is no longer configured".into()),
                queued: false,
                withheld: None,
            });
        }
    }
    for channel in &channels {
        // A node whose lease ran out meanwhile stops: another may be delivering now.
        if !store.holds("delivery") {
            break;
        }
        let (s, a) = deliver_channel(store, &**channel, cfg.tz(), now)?;
        stats.sent += s.sent;
        stats.failed += s.failed;
        stats.waiting += s.waiting;
        stats.dropped += s.dropped;
        audit.extend(a);
    }
    Ok((stats, audit))
}

/// The `meta` keys of a channel's last delivery (its time) and last failure (its error;
/// empty once a later send succeeded), for `status` and `check`.
pub(crate) fn state_keys(channel: &str) -> (String, String) {
    (
        format!("channel_last_sent:{channel}"),
        format!("channel_last_error:{channel}"),
    )
}

/// Send what the outbox holds for `channel`, obeying quiet hours, the dedupe, the daily cap
/// and the channel's "retry after"; drop what the channel rejects for good and what waited
/// 24 h. Rows of other channels are left alone. Returns what happened and what to audit
/// (the caller owns the audit log).
pub(crate) fn deliver_channel(
    store: &mut dyn Store,
    channel: &dyn Channel,
    tz: Tz,
    now: DateTime<Utc>,
) -> store::Result<(Delivery, Vec<Notice>)> {
    let mut stats = Delivery::default();
    let mut audit = Vec::new();
    let mut by_destination: BTreeMap<String, Vec<OutboxRow>> = BTreeMap::new();
    for row in store.outbox()? {
        if row.channel == channel.name() {
            by_destination
                .entry(row.destination.clone())
                .or_default()
                .push(row);
        }
    }
    // Telegram's destinations are numbers: they go in numeric order, as they always have.
    let mut by_destination: Vec<_> = by_destination.into_iter().collect();
    by_destination.sort_by_key(|(d, _)| (d.parse::<i64>().ok(), d.clone()));
    store.prune_sent(now - chrono::Duration::hours(25))?;
    let rules = channel.rules();
    let quiet = rules
        .quiet_hours
        .is_some_and(|w| w.contains(now.with_timezone(&tz).naive_local()));
    let day_start = local_midnight(tz, now);
    let configured = channel.destinations();
    // After the channel's "retry after" nothing is sent before that time; it all waits.
    let retry_key = retry_at_key(channel.name());
    let wait_until = store.meta(&retry_key)?.as_deref().and_then(store::parse_ts);
    let mut sending = channel.connected() && wait_until.is_none_or(|at| now >= at);

    for (destination, rows) in by_destination {
        let to = To::new(channel, destination);
        let mut live = Vec::new();
        for row in rows {
            let too_old = store::parse_ts(&row.created_at).is_none_or(|t| {
                now.signed_duration_since(t).to_std().unwrap_or_default() >= MAX_AGE
            });
            if !configured.contains(&to.destination) {
                store.outbox_delete(row.id)?;
                stats.dropped += 1;
                let why = channel.unconfigured().into();
                audit.push(Notice::failed(&to, &row.kind, why, false));
            } else if too_old {
                // Undelivered for 24 h: dropped, and said so (docs/reference.md#audit-events,
                // reason `expired`).
                store.outbox_delete(row.id)?;
                stats.dropped += 1;
                audit.push(Notice::withheld(
                    &to,
                    &row.kind,
                    Withhold::Dropped("expired"),
                ));
            } else {
                live.push(row);
            }
        }
        // The same text within 6 h is not sent again, nor twice from one batch (runs that
        // queued it while the channel was down). Replies, tests and an explicit @notify are
        // exempt: a person asked for each of those.
        let mut fresh = Vec::new();
        let mut batch = std::collections::HashSet::new();
        for row in live {
            let deduped = !row.direct && row.kind != "notify";
            if deduped && !batch.insert(hash(&row.payload)) {
                store.outbox_delete(row.id)?;
                audit.push(Notice::withheld(
                    &to,
                    &row.kind,
                    Withhold::Dropped("duplicate"),
                ));
                continue;
            }
            if deduped
                && store.sent_since(
                    &to.key,
                    &hash(&row.payload),
                    now - chrono::Duration::from_std(DEDUPE).unwrap_or_default(),
                )?
            {
                store.outbox_delete(row.id)?;
                audit.push(Notice::withheld(
                    &to,
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
                hold(store, &mut audit, &to, row, HoldReason::QuietHours)?;
            }
            Vec::new()
        } else {
            normal
        };
        let budget = match rules.max_per_day {
            0 => usize::MAX,
            max => (max as usize).saturating_sub(store.count_sent(&to.key, day_start)? as usize),
        };
        let mut plan: Vec<Planned> = urgent.into_iter().map(Planned::one).collect();
        if normal.len() <= budget {
            plan.extend(normal.into_iter().map(Planned::one));
        } else if budget >= 1 {
            let mut normal = normal;
            let rest = normal.split_off(budget - 1);
            plan.extend(normal.into_iter().map(Planned::one));
            audit.extend(folded(&to, &rest));
            plan.push(fold(channel, rest, None));
        } else if !normal.is_empty() {
            // No budget left today: ride along with the next urgent message, or wait.
            match plan.pop() {
                Some(last) => {
                    audit.extend(folded(&to, &normal));
                    plan.push(fold(channel, normal, Some(last)));
                }
                None => {
                    stats.waiting += normal.len();
                    for row in &normal {
                        hold(store, &mut audit, &to, row, HoldReason::DailyCap)?;
                    }
                }
            }
        }

        for p in plan {
            if !sending {
                stats.waiting += p.rows.len();
                continue;
            }
            match send_parts(channel, store, &to, &p, now)? {
                Ok(message_id) => {
                    for r in &p.rows {
                        store.outbox_delete(r.id)?;
                        store.record_sent(&to.key, &hash(&r.payload), false, now)?;
                    }
                    store.record_sent(&to.key, &hash(p.payload.as_str()), p.counted, now)?;
                    let parts = channel.split(&p.payload, channel.max_len());
                    if channel.keeps_button_messages()
                        && !p.approvals.is_empty()
                        && parts.len() == 1
                        && let Ok(chat) = to.destination.parse()
                    {
                        store.save_button_message(
                            chat,
                            message_id,
                            &p.payload,
                            &p.approvals,
                            now,
                        )?;
                    }
                    stats.sent += 1;
                    let (sent_key, error_key) = state_keys(channel.name());
                    store.set_meta(&sent_key, &crate::audit::format_ts(now))?;
                    // The last delivery went through: an older failure is no longer news.
                    if store.meta(&error_key)?.is_some_and(|e| !e.is_empty()) {
                        store.set_meta(&error_key, "")?;
                    }
                    audit.push(Notice::sent(&to, &p.kind));
                }
                Err(SendError::Rejected(why)) => {
                    // It can never be sent: dropped at once, with the channel's words first.
                    let error = Secrets::taken().redact(&why);
                    for r in &p.rows {
                        store.outbox_delete(r.id)?;
                    }
                    stats.dropped += 1;
                    store.set_meta(&state_keys(channel.name()).1, error.as_str())?;
                    audit.push(Notice::failed(&to, &p.kind, error, false));
                    audit.push(Notice::withheld(
                        &to,
                        &p.kind,
                        Withhold::Dropped("rejected"),
                    ));
                }
                Err(e) => {
                    // A channel's error may quote the request (Telegram's token is in its URL).
                    let error = Secrets::taken().redact(e.message());
                    for r in &p.rows {
                        store.outbox_failed(r.id, &error)?;
                    }
                    stats.failed += 1;
                    store.set_meta(&state_keys(channel.name()).1, error.as_str())?;
                    audit.push(Notice::failed(&to, &p.kind, error, true));
                    match &e {
                        SendError::Refused(_) | SendError::Rejected(_) => {}
                        SendError::Unavailable(_) => {
                            // The channel is down or unreachable: the rest waits for the next run.
                            sending = false;
                        }
                        SendError::RetryAfter(wait, _) => {
                            // Asking again sooner would only prolong the flood limit. A
                            // message waits at most a day anyway (then it expires).
                            let wait = chrono::Duration::from_std((*wait).min(MAX_AGE))
                                .unwrap_or_default();
                            store.set_meta(&retry_key, &crate::audit::format_ts(now + wait))?;
                            sending = false;
                        }
                    }
                }
            }
        }
    }
    Ok((stats, audit))
}

/// The notices of messages folded into one because of the daily cap.
fn folded(to: &To, rows: &[OutboxRow]) -> Vec<Notice> {
    rows.iter()
        .map(|r| Notice::withheld(to, &r.kind, Withhold::Folded("daily_cap")))
        .collect()
}

/// Send a message in as many parts as it needs; buttons go on the last part. A part that
/// the channel accepted is remembered, so that a retry after a failed later part sends only
/// the rest, never part 1 again (docs/reference.md#outbox).
fn send_parts(
    channel: &dyn Channel,
    store: &mut dyn Store,
    to: &To,
    p: &Planned,
    now: DateTime<Utc>,
) -> store::Result<Result<i64, SendError>> {
    let parts = channel.split(&p.payload, channel.max_len());
    let last = parts.len() - 1;
    // Approval buttons only under a message that shows all it approves: one part. (The
    // renderer keeps such messages to one part; this holds whatever built the text.)
    let approvals: &[i64] = if last == 0 { &p.approvals } else { &[] };
    let whole = hash(p.payload.as_str());
    let since = now - chrono::Duration::from_std(MAX_AGE).unwrap_or_default();
    let mut id = 0;
    for (i, part) in parts.iter().enumerate() {
        let key = format!("part {i} of {whole}");
        if i < last && store.sent_since(&to.key, &key, since)? {
            continue;
        }
        let (buttons, resets): (&[i64], &[String]) = if i == last {
            (approvals, &p.resets)
        } else {
            (&[], &[])
        };
        // Each part cut from the whole message redacted (see [`Planned`]); each part its own
        // delivery id, so that a receiver that de-duplicates keeps them all.
        let id_of_part = match i {
            0 => p.id.clone(),
            i => format!("{}.{i}", p.id),
        };
        let message = Message {
            id: &id_of_part,
            kind: &p.kind,
            title: &p.title,
            payload: part,
            data: &p.data,
            created_at: &p.created_at,
            approvals: buttons,
            resets,
        };
        match channel.send(&to.destination, &message) {
            Ok(sent) => id = sent,
            Err(e) => return Ok(Err(e)),
        }
        if i < last {
            store.record_sent(&to.key, &key, false, now)?;
        }
    }
    Ok(Ok(id))
}

/// Fold several messages into one (cut to one message's length), after `head` if given.
fn fold(channel: &dyn Channel, rows: Vec<OutboxRow>, head: Option<Planned>) -> Planned {
    let n = rows.len();
    let mut payload = match &head {
        Some(h) => format!("{}\n\n", h.payload),
        None => String::new(),
    };
    payload.push_str(&channel.folded_header(n));
    let mut resets = head.as_ref().map(|h| h.resets.clone()).unwrap_or_default();
    for r in &rows {
        payload.push_str("\n\n");
        payload.push_str(&r.payload);
        resets.extend(r.resets.iter().cloned());
    }
    // Redacted as a whole before it is cut.
    let mut parts = channel.split(&Secrets::taken().redact(&payload), channel.max_len() - 40);
    let cut = parts.len() > 1;
    let payload = parts.swap_remove(0);
    let payload = if cut {
        payload.append("\n… (cut to fit one message)")
    } else {
        payload
    };
    // A message cut to fit keeps the buttons of the approvals it still shows whole only.
    let whole = |text: &str| payload.as_str().contains(text);
    let mut approvals: Vec<i64> = head
        .as_ref()
        .filter(|h| whole(h.payload.as_str()))
        .map(|h| h.approvals.clone())
        .unwrap_or_default();
    for r in rows.iter().filter(|r| whole(&r.payload)) {
        approvals.extend(&r.approvals);
    }
    approvals.truncate(MAX_BUTTON_ROWS);
    resets.truncate(MAX_BUTTON_ROWS);
    let first = match head {
        Some(h) => h,
        None => Planned::one(rows[0].clone()),
    };
    let title = Secrets::taken().redact(&format!("{} (+{n} folded)", first.title));
    let mut all = first.rows;
    if all.first().map(|r| r.id) == rows.first().map(|r| r.id) {
        all.clear();
    }
    all.extend(rows);
    Planned {
        rows: all,
        id: first.id,
        title,
        data: first.data,
        created_at: first.created_at,
        kind: first.kind,
        payload,
        approvals,
        resets,
        counted: true,
    }
}

fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TelegramConfig;
    use crate::render::telegram::split;
    use crate::schedule::Window;
    use crate::store::{Outbox, Sqlite};

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

    /// A config whose only channel is Telegram, to these chats, in UTC.
    fn tg(chats: &[i64]) -> Config {
        let mut cfg = crate::config::test_util::config(Default::default());
        cfg.active.tz = chrono_tz::UTC;
        cfg.telegram = Some(TelegramConfig {
            chat_ids: chats.to_vec(),
            ..TelegramConfig::default()
        });
        cfg
    }

    /// Its Telegram table, to change a rule.
    fn rules(cfg: &mut Config) -> &mut TelegramConfig {
        cfg.telegram.as_mut().unwrap()
    }

    fn msg(html: &str, urgent: bool) -> Rendered {
        let mut m = Rendered::new(MessageKind::Summary, "summary", html.into());
        m.urgent = urgent;
        m
    }

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn queued_messages_survive_a_failure_and_go_out_later() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
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
        let (d, lines) = deliver(&mut s, Some(&down), &cfg, t0).unwrap();
        assert_eq!(d.failed, 1, "stops at the first unavailable");
        assert!(lines[0].error.is_some());
        assert!(lines[0].queued);
        assert_eq!(s.outbox_len().unwrap(), 2);
        let up = Fake::default();
        let (d, _) = deliver(&mut s, Some(&up), &cfg, t0).unwrap();
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
        let mut s = Sqlite::open(dir.path()).unwrap();
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
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
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
        deliver(&mut s, Some(&t), &cfg, t1).unwrap();
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
        deliver(&mut s, Some(&t), &cfg, t2).unwrap();
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
        let (d, lines) = deliver(&mut s, None, &cfg, t2).unwrap();
        assert_eq!(d.waiting, 1);
        let later = ts("2026-01-02T16:00:01Z");
        let (d, lines2) = deliver(&mut s, Some(&t), &cfg, later).unwrap();
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
        let mut s = Sqlite::open(dir.path()).unwrap();
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
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
        assert_eq!(t.sent().len(), 1);
        assert_eq!(s.outbox_len().unwrap(), 0);
    }

    #[test]
    fn an_explicit_notify_is_never_deduplicated_and_what_is_withheld_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        let notify = Rendered {
            kind: MessageKind::Notify,
            ..msg("call grandma", false)
        };
        let put = |s: &mut dyn Store, cfg: &Config, m: &Rendered, at| {
            enqueue_all(s, cfg, m, false, at, &Secrets::default()).unwrap();
        };
        put(&mut s, &cfg, &notify, t0);
        put(&mut s, &cfg, &notify, t0);
        put(&mut s, &cfg, &msg("same summary", false), t0);
        put(&mut s, &cfg, &msg("same summary", false), t0);
        let (_, notices) = deliver(&mut s, Some(&t), &cfg, t0).unwrap();
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
        rules(&mut cfg).quiet_hours = Some(Window::parse("22:00-07:00").unwrap());
        let night = ts("2026-01-01T23:00:00Z");
        put(&mut s, &cfg, &msg("later", false), night);
        let (_, notices) = deliver(&mut s, Some(&t), &cfg, night).unwrap();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].withheld, Some(Withhold::Held("quiet_hours")));
        assert!(matches!(notices[0].event(None), Event::NotificationHeld(_)));
        // Still waiting at the next run: said once, not at every run.
        let later = ts("2026-01-01T23:05:00Z");
        let (d, notices) = deliver(&mut s, Some(&t), &cfg, later).unwrap();
        assert_eq!(d.waiting, 1);
        assert!(notices.is_empty(), "{notices:?}");
    }

    #[test]
    fn quiet_hours_hold_all_but_urgent() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        rules(&mut cfg).quiet_hours = Some(Window::parse("22:00-07:00").unwrap());
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
        let (d, _) = deliver(&mut s, Some(&t), &cfg, night).unwrap();
        assert_eq!((d.sent, d.waiting), (1, 1));
        assert_eq!(t.sent()[0].1, "broken");
        let morning = ts("2026-01-02T07:00:00Z");
        deliver(&mut s, Some(&t), &cfg, morning).unwrap();
        assert_eq!(t.sent()[1].1, "fine");
    }

    #[test]
    fn past_the_daily_cap_messages_fold_into_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        rules(&mut cfg).max_messages_per_day = 3;
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
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
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
        let (d, _) = deliver(&mut s, Some(&t), &cfg, t0).unwrap();
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
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
        assert_eq!(t.sent().len(), 4);
        assert!(t.sent()[3].1.starts_with("fire\n\n"), "{}", t.sent()[3].1);
        assert!(t.sent()[3].1.contains("later"));
    }

    #[test]
    fn replies_are_exempt_from_dedupe_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        rules(&mut cfg).max_messages_per_day = 1;
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
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
        assert_eq!(t.sent().len(), 3);
    }

    #[test]
    fn approval_buttons_go_only_on_a_message_of_one_part_and_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let cfg = tg(&[1]);
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        // In two parts, no part shows all that the buttons would approve: none.
        let long = vec!["y".repeat(1000); 6].join("\n");
        let mut m = Rendered::new(MessageKind::Summary, "summary", long);
        m.approvals = vec![7];
        enqueue_all(&mut s, &cfg, &m, false, t0, &Secrets::default()).unwrap();
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
        assert_eq!(t.sent().len(), 2);
        assert!(t.sent().iter().all(|(_, _, buttons)| buttons.is_empty()));
        assert_eq!(s.button_message(1, 2).unwrap(), None);
        // In one part: the buttons, remembered for the edit after a press.
        let m = Rendered {
            html: "short".into(),
            ..m
        };
        enqueue_all(&mut s, &cfg, &m, false, t0, &Secrets::default()).unwrap();
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
        assert_eq!(t.sent()[2].2, vec![7]);
        let (_, approvals) = s.button_message(1, 3).unwrap().unwrap();
        assert_eq!(approvals, vec![7]);
    }

    #[test]
    fn a_folded_message_keeps_the_buttons_of_approvals_it_shows_whole_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let mut cfg = tg(&[1]);
        rules(&mut cfg).max_messages_per_day = 1;
        let t = Fake::default();
        let t0 = ts("2026-01-01T10:00:00Z");
        let with = |html: String, id: i64| {
            let mut m = Rendered::new(MessageKind::Summary, "summary", html);
            m.approvals = vec![id];
            m
        };
        // The first fits whole in the folded message, the second is cut off.
        for m in [
            with("approve #1".into(), 1),
            with(vec!["z".repeat(1000); 5].join("\n"), 2),
        ] {
            enqueue_all(&mut s, &cfg, &m, false, t0, &Secrets::default()).unwrap();
        }
        deliver(&mut s, Some(&t), &cfg, t0).unwrap();
        let sent = t.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].1.contains("cut to fit"), "{}", sent[0].1);
        assert_eq!(sent[0].2, vec![1]);
    }

    /// A channel that is not Telegram: destinations are names, sends are recorded and
    /// answered as told (first the queued answers, then success).
    struct FakeChannel {
        destinations: Vec<String>,
        answers: std::cell::RefCell<Vec<SendError>>,
        sent: std::cell::RefCell<Vec<(String, String)>>,
    }

    impl FakeChannel {
        fn new(destinations: &[&str]) -> FakeChannel {
            FakeChannel {
                destinations: destinations.iter().map(|d| d.to_string()).collect(),
                answers: Default::default(),
                sent: Default::default(),
            }
        }

        fn answer(&self, e: SendError) {
            self.answers.borrow_mut().push(e);
        }

        fn sent(&self) -> Vec<(String, String)> {
            self.sent.borrow().clone()
        }
    }

    impl Channel for FakeChannel {
        fn settings(&self) -> crate::notify::Settings<'_> {
            crate::notify::Settings {
                name: "fake",
                events: &MessageKind::DEFAULT,
                rules: crate::notify::Rules::default(),
            }
        }
        fn kind(&self) -> &'static str {
            "fake"
        }
        fn destinations(&self) -> Vec<String> {
            self.destinations.clone()
        }
        fn unconfigured(&self) -> &'static str {
            "not a fake destination"
        }
        fn connected(&self) -> bool {
            true
        }
        fn max_len(&self) -> usize {
            100
        }
        fn split(&self, payload: &Redacted, limit: usize) -> Vec<Redacted> {
            split(payload, limit)
        }
        fn folded_header(&self, n: usize) -> String {
            format!("{n} folded")
        }
        fn send(&self, destination: &str, message: &Message) -> Result<i64, SendError> {
            let mut answers = self.answers.borrow_mut();
            if !answers.is_empty() {
                return Err(answers.remove(0));
            }
            let mut sent = self.sent.borrow_mut();
            sent.push((destination.to_string(), message.payload.to_string()));
            Ok(sent.len() as i64)
        }
    }

    fn rows(s: &dyn Store) -> Vec<(String, String, String)> {
        s.outbox()
            .unwrap()
            .into_iter()
            .map(|r| (r.channel, r.destination, r.payload))
            .collect()
    }

    #[test]
    fn any_channel_queues_sends_retries_rejects_and_expires_through_the_trait() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let fake = FakeChannel::new(&["alice", "bob"]);
        let t0 = ts("2026-01-01T10:00:00Z");
        let put = |s: &mut dyn Store, html: &str, at| {
            enqueue(s, &fake, &msg(html, false), false, at, &Secrets::default()).unwrap();
        };
        // Queued: one row per destination, under the channel's kind.
        put(&mut s, "hello", t0);
        assert_eq!(
            rows(&s),
            [
                ("fake".into(), "alice".into(), "hello".into()),
                ("fake".into(), "bob".into(), "hello".into())
            ]
        );
        // Telegram's delivery leaves another channel's rows alone.
        let cfg = tg(&[1]);
        let telegram = crate::notify::telegram::TelegramChannel {
            cfg: cfg.telegram.as_ref().unwrap(),
            transport: None,
        };
        let (d, notices) = deliver_channel(&mut s, &telegram, chrono_tz::UTC, t0).unwrap();
        assert_eq!((d, notices), (Delivery::default(), vec![]));
        assert_eq!(s.outbox_len().unwrap(), 2);

        // Retry later: a refusal keeps the message queued, the next destination still goes.
        fake.answer(SendError::Refused("try later".into()));
        let (d, notices) = deliver_channel(&mut s, &fake, chrono_tz::UTC, t0).unwrap();
        assert_eq!((d.sent, d.failed), (1, 1));
        assert_eq!(fake.sent(), [("bob".to_string(), "hello".to_string())]);
        assert_eq!(notices[0].channel, "fake");
        assert_eq!(notices[0].destination, "alice");
        assert!(notices[0].queued);
        assert_eq!(rows(&s), [("fake".into(), "alice".into(), "hello".into())]);
        // Send ok at the next run.
        let (d, _) = deliver_channel(&mut s, &fake, chrono_tz::UTC, t0).unwrap();
        assert_eq!(d.sent, 1);
        assert_eq!(s.outbox_len().unwrap(), 0);

        // Unavailable: nothing more is tried in this run; all of it waits.
        put(&mut s, "second", t0);
        fake.answer(SendError::Unavailable("down".into()));
        let (d, _) = deliver_channel(&mut s, &fake, chrono_tz::UTC, t0).unwrap();
        assert_eq!((d.failed, d.waiting, d.sent), (1, 1, 0));
        assert_eq!(s.outbox_len().unwrap(), 2);

        // Rejected: dropped at once, said twice (the failure, then `rejected`).
        fake.answer(SendError::Rejected("no such topic".into()));
        let (d, notices) = deliver_channel(&mut s, &fake, chrono_tz::UTC, t0).unwrap();
        assert_eq!((d.dropped, d.sent), (1, 1));
        assert_eq!(notices[0].error.as_ref().unwrap().as_str(), "no such topic");
        assert!(!notices[0].queued);
        assert_eq!(notices[1].withheld, Some(Withhold::Dropped("rejected")));
        assert_eq!(s.outbox_len().unwrap(), 0);

        // Retry after: nothing is sent on this channel before that time.
        put(&mut s, "third", t0);
        fake.answer(SendError::RetryAfter(
            Duration::from_secs(60),
            "slow down".into(),
        ));
        deliver_channel(&mut s, &fake, chrono_tz::UTC, t0).unwrap();
        assert_eq!(
            s.meta(&retry_at_key("fake")).unwrap().as_deref(),
            Some("2026-01-01T10:01:00.000Z")
        );
        let (d, _) = deliver_channel(&mut s, &fake, chrono_tz::UTC, t0).unwrap();
        assert_eq!((d.sent, d.waiting), (0, 2));
        let later = ts("2026-01-01T10:01:00Z");
        let (d, _) = deliver_channel(&mut s, &fake, chrono_tz::UTC, later).unwrap();
        assert_eq!(d.sent, 2);

        // Expired: undelivered for 24 h, dropped and said so.
        put(&mut s, "fourth", t0);
        let next_day = ts("2026-01-02T10:00:00Z");
        let (d, notices) = deliver_channel(&mut s, &fake, chrono_tz::UTC, next_day).unwrap();
        assert_eq!((d.dropped, d.sent), (2, 0));
        assert!(
            notices
                .iter()
                .all(|n| n.withheld == Some(Withhold::Dropped("expired")))
        );
        assert_eq!(s.outbox_len().unwrap(), 0);

        // A destination taken out of the config: its messages are dropped, with the reason.
        put(&mut s, "fifth", next_day);
        let fewer = FakeChannel::new(&["alice"]);
        let (d, notices) = deliver_channel(&mut s, &fewer, chrono_tz::UTC, next_day).unwrap();
        assert_eq!((d.sent, d.dropped), (1, 1));
        let gone = notices.iter().find(|n| n.destination == "bob").unwrap();
        assert_eq!(
            gone.error.as_ref().unwrap().as_str(),
            "not a fake destination"
        );
    }

    #[test]
    fn telegram_keeps_its_retry_key_and_its_rows_name_the_chat() {
        assert_eq!(retry_at_key(crate::notify::telegram::KIND), RETRY_AT_KEY);
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let t0 = ts("2026-01-01T10:00:00Z");
        enqueue_all(
            &mut s,
            &tg(&[-100200]),
            &msg("<b>hi</b>", false),
            false,
            t0,
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(
            rows(&s),
            [("telegram".into(), "-100200".into(), "<b>hi</b>".into())]
        );
    }

    #[test]
    fn messages_for_a_channel_no_longer_configured_are_dropped_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let fake = FakeChannel::new(&["alice"]);
        let t0 = ts("2026-01-01T10:00:00Z");
        enqueue(
            &mut s,
            &fake,
            &msg("hello", false),
            false,
            t0,
            &Secrets::default(),
        )
        .unwrap();
        let (d, notices) = deliver(&mut s, None, &tg(&[1]), t0).unwrap();
        assert_eq!(d.dropped, 1);
        assert_eq!(notices[0].channel, "fake");
        assert_eq!(
            notices[0].error.as_ref().map(Redacted::as_str),
            Some("the channel is no longer configured")
        );
        assert_eq!(s.outbox_len().unwrap(), 0);
    }
}
