//! Messages to people in the store: the outbox of messages to send and what was sent (for
//! the dedupe and the daily cap), both keyed by channel and destination; Telegram's
//! messages with approval buttons and the chats that wrote to the bot; small `meta`
//! values; and the pause.
//!
//! Invariants:
//! - A message is in the outbox until its channel accepted it or rejected it for good (then
//!   it is dropped, audited), or it expired; a row is deleted only then.
//! - There is at most one pause (the row with id 1); setting and clearing it is durable.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

use super::{Result, Sqlite, format_ts, parse_ts};
use crate::text::Redacted;

/// A message waiting in the outbox.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OutboxRow {
    pub id: i64,
    /// The channel that sends it (its name: `telegram`, or `[channels.NAME]`).
    pub channel: String,
    /// The idempotency key the channel sends with it (`webhook-id`, `Message-ID`, …).
    pub delivery_id: String,
    /// A line that says what it is about, plain text, redacted.
    pub title: String,
    /// The audit keys of what it is about (JSON, redacted), for the channels that send the
    /// event as data.
    pub data: String,
    /// Where, in that channel's terms (a Telegram chat id as text).
    pub destination: String,
    pub kind: String,
    /// What the channel sends (Telegram: HTML), redacted.
    pub payload: String,
    pub urgent: bool,
    pub direct: bool,
    pub approvals: Vec<i64>,
    /// Tasks that get a Reset button (a tripped task's message).
    pub resets: Vec<String>,
    pub created_at: String,
    pub attempts: i64,
    /// The noise rule it was last audited as held under, if any.
    pub held: Option<crate::model::HoldReason>,
}

/// Where a message goes: a channel and a destination in that channel's terms (the key of
/// the outbox and of what was sent).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Destination {
    pub channel: String,
    pub destination: String,
}

/// A message to put in the outbox.
pub(crate) struct NewMessage<'a> {
    pub channel: &'a str,
    pub delivery_id: &'a str,
    pub title: &'a Redacted,
    /// JSON, redacted.
    pub data: &'a Redacted,
    pub destination: &'a str,
    pub kind: &'a str,
    /// What is sent, in the channel's format: redacted, as every row is.
    pub payload: &'a Redacted,
    pub urgent: bool,
    /// Exempt from the dedupe and the daily cap (a reply to a command, a test message).
    pub direct: bool,
    pub approvals: &'a [i64],
    pub resets: &'a [String],
}

/// The current pause.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PauseRow {
    pub since: String,
    pub until: Option<String>,
    pub reason: Option<String>,
    pub by: String,
}

/// A pause to set: its reason redacted, as every row is.
pub(crate) struct NewPause<'a> {
    pub since: String,
    pub until: Option<String>,
    pub reason: Option<&'a Redacted>,
    pub by: &'a str,
}

/// The `meta` key of the next Telegram update to ask for: a number that only moves forward
/// (a fleet's store keeps the greater when nodes race to store it).
pub(crate) const TELEGRAM_OFFSET: &str = "telegram_offset";

/// What every agent's `by` starts with (`mcp:<client>`), on pauses and decisions alike.
pub(crate) const AGENT_BY: &str = "mcp:";

impl PauseRow {
    /// Made by an agent, not by a person.
    pub(crate) fn by_agent(&self) -> bool {
        self.by.starts_with(AGENT_BY)
    }

    /// In force at `now`: no end, or an end still to come.
    pub(crate) fn in_force(&self, now: DateTime<Utc>) -> bool {
        self.until
            .as_deref()
            .and_then(parse_ts)
            .is_none_or(|u| u > now)
    }
}

fn pause_row(r: &rusqlite::Row) -> rusqlite::Result<PauseRow> {
    Ok(PauseRow {
        since: r.get(0)?,
        until: r.get(1)?,
        reason: r.get(2)?,
        by: r.get(3)?,
    })
}

/// The outbox and what was sent (both keyed by channel and destination), messages with
/// buttons, chats seen, `meta` values and the pause (durable).
pub(crate) trait Outbox {
    fn enqueue(&mut self, m: &NewMessage, now: DateTime<Utc>) -> Result<i64>;

    /// The outbox, oldest first.
    fn outbox(&self) -> Result<Vec<OutboxRow>>;

    fn outbox_len(&self) -> Result<i64>;

    fn outbox_delete(&mut self, id: i64) -> Result<()>;

    /// Remember that the message was audited as held under `rule`.
    fn outbox_held(&mut self, id: i64, rule: crate::model::HoldReason) -> Result<()>;

    fn outbox_failed(&mut self, id: i64, error: &Redacted) -> Result<()>;

    /// Remember a text sent to a destination (by hash) for the dedupe and, if `counted`,
    /// the daily cap.
    fn record_sent(
        &mut self,
        to: &Destination,
        hash: &str,
        counted: bool,
        now: DateTime<Utc>,
    ) -> Result<()>;

    /// Whether this text went to this destination at or after `since`.
    fn sent_since(&self, to: &Destination, hash: &str, since: DateTime<Utc>) -> Result<bool>;

    /// Counted messages sent to a destination at or after `since`.
    fn count_sent(&self, to: &Destination, since: DateTime<Utc>) -> Result<u32>;

    /// Forget sends older than `before` (they no longer matter for dedupe or the cap).
    fn prune_sent(&mut self, before: DateTime<Utc>) -> Result<()>;

    fn save_button_message(
        &mut self,
        chat_id: i64,
        message_id: i64,
        html: &Redacted,
        approvals: &[i64],
        now: DateTime<Utc>,
    ) -> Result<()>;

    /// The stored HTML and still-open approvals of a message with buttons.
    fn button_message(&self, chat_id: i64, message_id: i64) -> Result<Option<(String, Vec<i64>)>>;

    /// Every message that still has approval buttons: (chat, message id, its approvals).
    fn open_button_messages(&self) -> Result<Vec<(i64, i64, Vec<i64>)>>;

    fn meta(&self, key: &str) -> Result<Option<String>>;

    fn set_meta(&mut self, key: &str, value: &str) -> Result<()>;

    /// Mark a reply's token as used on `channel` (docs/reference.md#approvals-by-ntfy):
    /// true the first time, false when it was used already (a replay). Of two processes
    /// that read the same reply, exactly one gets true. Only the token's SHA-256 is kept.
    fn use_reply_token(&mut self, channel: &str, token: &str, now: DateTime<Utc>) -> Result<bool>;

    /// Remember a chat that wrote to the bot.
    fn saw_chat(
        &mut self,
        chat_id: i64,
        kind: &str,
        title: &Redacted,
        now: DateTime<Utc>,
    ) -> Result<()>;

    /// Chats that wrote to the bot, most recent first: (id, kind, title, last seen).
    fn chats(&self) -> Result<Vec<(i64, String, String, String)>>;

    /// The pause as stored, without ending a timed one (read-only commands).
    fn pause_row(&self) -> Result<Option<PauseRow>>;

    /// The pause in force at `now`. A timed pause whose end has passed is removed here and
    /// returned as `Err` (so the caller can audit `resumed`).
    fn current_pause(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<Option<PauseRow>, PauseRow>>;

    fn set_pause(&mut self, p: &NewPause) -> Result<()>;

    /// Remove the pause; the removed row, if there was one.
    fn clear_pause(&mut self) -> Result<Option<PauseRow>>;

    /// Set an agent's pause, unless a person's pause is in force at `now`: checked and set
    /// in one statement, so a person's pause made meanwhile is never replaced. False when a
    /// person's pause stands.
    fn set_agent_pause(&mut self, p: &NewPause, now: DateTime<Utc>) -> Result<bool>;

    /// Remove the pause if an agent made it (one statement: a person's pause made
    /// meanwhile stays); the removed row.
    fn clear_agent_pause(&mut self) -> Result<Option<PauseRow>>;
}

impl Outbox for Sqlite {
    fn enqueue(&mut self, m: &NewMessage, now: DateTime<Utc>) -> Result<i64> {
        self.conn
            .query_row(
                "INSERT INTO outbox (channel, destination, kind, payload, urgent, direct,
                    approvals, created_at, resets, delivery_id, title, data)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                    RETURNING id",
                params![
                    m.channel,
                    m.destination,
                    m.kind,
                    m.payload.as_str(),
                    m.urgent,
                    m.direct,
                    serde_json::to_string(m.approvals).unwrap_or_else(|_| "[]".into()),
                    format_ts(now),
                    serde_json::to_string(m.resets).unwrap_or_else(|_| "[]".into()),
                    m.delivery_id,
                    m.title.as_str(),
                    m.data.as_str()
                ],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    fn outbox(&self) -> Result<Vec<OutboxRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, channel, destination, kind, payload, urgent, direct, approvals,
                    created_at, attempts, resets, held,
                    COALESCE(delivery_id, 'hb-' || id), title, data
                 FROM outbox ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let approvals: String = r.get(7)?;
                let resets: String = r.get(10)?;
                Ok(OutboxRow {
                    id: r.get(0)?,
                    channel: r.get(1)?,
                    destination: r.get(2)?,
                    kind: r.get(3)?,
                    payload: r.get(4)?,
                    urgent: r.get(5)?,
                    direct: r.get(6)?,
                    approvals: serde_json::from_str(&approvals).unwrap_or_default(),
                    resets: serde_json::from_str(&resets).unwrap_or_default(),
                    created_at: r.get(8)?,
                    attempts: r.get(9)?,
                    held: r.get(11)?,
                    delivery_id: r.get(12)?,
                    title: r.get(13)?,
                    data: r.get(14)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn outbox_len(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    fn outbox_delete(&mut self, id: i64) -> Result<()> {
        self.conn
            .execute("DELETE FROM outbox WHERE id = ?1", [id])
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn outbox_held(&mut self, id: i64, rule: crate::model::HoldReason) -> Result<()> {
        self.conn
            .execute(
                "UPDATE outbox SET held = ?2 WHERE id = ?1",
                params![id, rule],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn outbox_failed(&mut self, id: i64, error: &Redacted) -> Result<()> {
        self.conn
            .execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1",
                params![id, error.as_str()],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn record_sent(
        &mut self,
        to: &Destination,
        hash: &str,
        counted: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO sent (channel, destination, text_hash, sent_at, counted)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![to.channel, to.destination, hash, format_ts(now), counted],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn sent_since(&self, to: &Destination, hash: &str, since: DateTime<Utc>) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sent
                 WHERE channel = ?1 AND destination = ?2 AND text_hash = ?3 AND sent_at >= ?4)",
                params![to.channel, to.destination, hash, format_ts(since)],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    fn count_sent(&self, to: &Destination, since: DateTime<Utc>) -> Result<u32> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM sent
                 WHERE channel = ?1 AND destination = ?2 AND counted AND sent_at >= ?3",
                params![to.channel, to.destination, format_ts(since)],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    fn prune_sent(&mut self, before: DateTime<Utc>) -> Result<()> {
        self.conn
            .execute("DELETE FROM sent WHERE sent_at < ?1", [format_ts(before)])
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn save_button_message(
        &mut self,
        chat_id: i64,
        message_id: i64,
        html: &Redacted,
        approvals: &[i64],
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO tg_messages (chat_id, message_id, html, approvals, sent_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    chat_id,
                    message_id,
                    html.as_str(),
                    serde_json::to_string(approvals).unwrap_or_else(|_| "[]".into()),
                    format_ts(now)
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn button_message(&self, chat_id: i64, message_id: i64) -> Result<Option<(String, Vec<i64>)>> {
        self.conn
            .query_row(
                "SELECT html, approvals FROM tg_messages WHERE chat_id = ?1 AND message_id = ?2",
                params![chat_id, message_id],
                |r| {
                    let approvals: String = r.get(1)?;
                    Ok((
                        r.get::<_, String>(0)?,
                        serde_json::from_str(&approvals).unwrap_or_default(),
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn open_button_messages(&self) -> Result<Vec<(i64, i64, Vec<i64>)>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT chat_id, message_id, approvals FROM tg_messages
                 WHERE approvals != '[]' ORDER BY sent_at, message_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let approvals: String = r.get(2)?;
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    serde_json::from_str(&approvals).unwrap_or_default(),
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn use_reply_token(&mut self, channel: &str, token: &str, now: DateTime<Utc>) -> Result<bool> {
        use sha2::{Digest, Sha256};
        let hash: String = Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.conn
            .execute(
                "INSERT OR IGNORE INTO channel_replies (channel, token, seen_at) VALUES (?1, ?2, ?3)",
                params![channel, hash, format_ts(now)],
            )
            .map(|n| n == 1)
            .map_err(|e| self.err(e))
    }

    fn saw_chat(
        &mut self,
        chat_id: i64,
        kind: &str,
        title: &Redacted,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO tg_chats (chat_id, kind, title, last_seen) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(chat_id) DO UPDATE SET kind = excluded.kind, title = excluded.title,
                    last_seen = excluded.last_seen",
                params![chat_id, kind, title.as_str(), format_ts(now)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn chats(&self) -> Result<Vec<(i64, String, String, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT chat_id, kind, title, last_seen FROM tg_chats ORDER BY last_seen DESC")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn pause_row(&self) -> Result<Option<PauseRow>> {
        self.conn
            .query_row(
                "SELECT since, until, reason, by FROM pause WHERE id = 1",
                [],
                pause_row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn current_pause(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<Option<PauseRow>, PauseRow>> {
        match self.pause_row()? {
            Some(p) if !p.in_force(now) => {
                self.durable(|conn| conn.execute("DELETE FROM pause", []))?;
                Ok(Err(p))
            }
            other => Ok(Ok(other)),
        }
    }

    fn set_pause(&mut self, p: &NewPause) -> Result<()> {
        self.durable(|conn| {
            conn.execute(
                "INSERT OR REPLACE INTO pause (id, since, until, reason, by)
                 VALUES (1, ?1, ?2, ?3, ?4)",
                params![p.since, p.until, p.reason.map(Redacted::as_str), p.by],
            )
        })
        .map(drop)
    }

    fn clear_pause(&mut self) -> Result<Option<PauseRow>> {
        let row = self.pause_row()?;
        self.durable(|conn| conn.execute("DELETE FROM pause", []))?;
        Ok(row)
    }

    fn set_agent_pause(&mut self, p: &NewPause, now: DateTime<Utc>) -> Result<bool> {
        self.durable(|conn| {
            conn.execute(
                "INSERT OR REPLACE INTO pause (id, since, until, reason, by)
                 SELECT 1, ?1, ?2, ?3, ?4 WHERE NOT EXISTS (
                    SELECT 1 FROM pause WHERE substr(by, 1, length(?5)) != ?5
                        AND (until IS NULL OR until > ?6))",
                params![
                    p.since,
                    p.until,
                    p.reason.map(Redacted::as_str),
                    p.by,
                    AGENT_BY,
                    format_ts(now)
                ],
            )
        })
        .map(|n| n > 0)
    }

    fn clear_agent_pause(&mut self) -> Result<Option<PauseRow>> {
        self.durable(|conn| {
            conn.query_row(
                "DELETE FROM pause WHERE substr(by, 1, length(?1)) = ?1
                 RETURNING since, until, reason, by",
                [AGENT_BY],
                pause_row,
            )
            .optional()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;
    use crate::store::Outbox;

    fn pause<'a>(by: &'a str, until: Option<&str>) -> NewPause<'a> {
        NewPause {
            since: "2026-05-01T10:00:00.000Z".into(),
            until: until.map(str::to_string),
            reason: None,
            by,
        }
    }

    /// The row a pause becomes.
    fn row(p: &NewPause) -> PauseRow {
        PauseRow {
            since: p.since.clone(),
            until: p.until.clone(),
            reason: p.reason.map(|r| r.as_str().to_string()),
            by: p.by.to_string(),
        }
    }

    #[test]
    fn a_reply_token_is_used_once_per_channel_and_kept_only_as_a_hash() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Sqlite::open(dir.path()).unwrap();
        let now = ts("2026-05-01T10:00:00Z");
        assert!(store.use_reply_token("phone", "tok-1", now).unwrap());
        assert!(
            !store.use_reply_token("phone", "tok-1", now).unwrap(),
            "a replay"
        );
        assert!(store.use_reply_token("phone", "tok-2", now).unwrap());
        assert!(store.use_reply_token("other", "tok-1", now).unwrap());
        let kept: Vec<String> = store
            .conn
            .prepare("SELECT token FROM channel_replies")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(kept.len(), 3);
        assert!(
            kept.iter().all(|t| t.len() == 64 && !t.contains("tok")),
            "{kept:?}"
        );
    }

    #[test]
    fn an_agent_never_replaces_or_clears_a_persons_pause() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Sqlite::open(dir.path()).unwrap();
        let now = ts("2026-05-01T10:00:00Z");
        let agent = pause("mcp:a", Some("2026-05-01T11:00:00.000Z"));
        // No pause, or an agent's: the agent's is set.
        assert!(store.set_agent_pause(&agent, now).unwrap());
        assert!(store.set_agent_pause(&agent, now).unwrap());
        assert_eq!(store.clear_agent_pause().unwrap(), Some(row(&agent)));
        // A person's pause in force stays, whatever the agent does.
        let person = pause("cli:me", None);
        store.set_pause(&person).unwrap();
        assert!(!store.set_agent_pause(&agent, now).unwrap());
        assert_eq!(store.clear_agent_pause().unwrap(), None);
        assert_eq!(store.pause_row().unwrap(), Some(row(&person)));
        // A person's pause that has ended no longer holds anything.
        let ended = pause("telegram:1", Some("2026-05-01T09:00:00.000Z"));
        store.set_pause(&ended).unwrap();
        assert!(store.set_agent_pause(&agent, now).unwrap());
        assert!(store.pause_row().unwrap().unwrap().by_agent());
    }
}
