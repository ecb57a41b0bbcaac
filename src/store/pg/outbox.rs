//! [`Outbox`] on PostgreSQL: the outbox, what was sent, Telegram's messages and chats,
//! `meta` values and the pause, shared by the nodes of a fleet.
//!
//! Invariants (beyond the trait's):
//! - A reply token is used once in the fleet: of two nodes that read the same reply, the one
//!   whose insert wins gets true, the other false (the primary key of `channel_replies`).
//! - There is one pause for the fleet (the row with id 1). A timed pause that ended is
//!   removed and returned as ended by exactly one caller; clearing it returns the removed row
//!   to exactly one caller.
//! - The Telegram offset in `meta` only moves forward: a node that acted on older updates
//!   never takes it back below what another node stored.

use chrono::{DateTime, Utc};

use super::{Pg, Word};
use crate::audit::format_ts;
use crate::model::HoldReason;
use crate::store::outbox::AGENT_BY;
use crate::store::{
    Destination, NewMessage, NewPause, Outbox, OutboxRow, PauseRow, Result, TELEGRAM_OFFSET,
};
use crate::text::Redacted;

/// A word of a closed set (`HoldReason`) read back from a row: one heartbeat does not know
/// is an error that names it, never a default.
/// `meta` keys whose value is a number that only moves forward when nodes race to store it.
const FORWARD_ONLY: &[&str] = &[TELEGRAM_OFFSET];

/// A JSON list of ids or task ids as the outbox and `tg_messages` store it.
fn json_list<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// A flag as its BIGINT column holds it (0 or 1, as in SQLite).
fn flag(b: bool) -> i64 {
    i64::from(b)
}

/// The token's SHA-256, as hex: all that is kept of a reply token.
fn token_hash(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The columns of the pause that [`pause_row`] reads, in its order.
pub(super) const PAUSE_COLUMNS: &str = "since, until, reason, by";

pub(super) fn pause_row(r: &postgres::Row) -> std::result::Result<PauseRow, postgres::Error> {
    Ok(PauseRow {
        since: r.try_get(0)?,
        until: r.try_get(1)?,
        reason: r.try_get(2)?,
        by: r.try_get(3)?,
    })
}

impl Outbox for Pg {
    fn enqueue(&mut self, m: &NewMessage, now: DateTime<Utc>) -> Result<i64> {
        let approvals = json_list(m.approvals);
        let resets = json_list(m.resets);
        let now = format_ts(now);
        self.tx(|tx| {
            tx.query_one(
                "INSERT INTO outbox (channel, destination, kind, payload, urgent, direct,
                    approvals, created_at, resets, delivery_id, title, data)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                 RETURNING id",
                &[
                    &m.channel,
                    &m.destination,
                    &m.kind,
                    &m.payload.as_str(),
                    &flag(m.urgent),
                    &flag(m.direct),
                    &approvals,
                    &now,
                    &resets,
                    &m.delivery_id,
                    &m.title.as_str(),
                    &m.data.as_str(),
                ],
            )?
            .try_get(0)
        })
    }

    fn outbox(&self) -> Result<Vec<OutboxRow>> {
        self.with(|c| {
            c.query(
                "SELECT id, channel, destination, kind, payload, urgent, direct, approvals,
                    created_at, attempts, resets, held,
                    COALESCE(delivery_id, 'hb-' || id), title, data
                 FROM outbox ORDER BY id",
                &[],
            )?
            .iter()
            .map(|r| {
                let approvals: String = r.try_get(7)?;
                let resets: String = r.try_get(10)?;
                let row = OutboxRow {
                    id: r.try_get(0)?,
                    channel: r.try_get(1)?,
                    destination: r.try_get(2)?,
                    kind: r.try_get(3)?,
                    payload: r.try_get(4)?,
                    urgent: r.try_get::<_, i64>(5)? != 0,
                    direct: r.try_get::<_, i64>(6)? != 0,
                    approvals: serde_json::from_str(&approvals).unwrap_or_default(),
                    resets: serde_json::from_str(&resets).unwrap_or_default(),
                    created_at: r.try_get(8)?,
                    attempts: r.try_get(9)?,
                    held: r.try_get::<_, Option<Word<HoldReason>>>(11)?.map(|w| w.0),
                    delivery_id: r.try_get(12)?,
                    title: r.try_get(13)?,
                    data: r.try_get(14)?,
                };
                Ok(row)
            })
            .collect()
        })
    }

    fn outbox_len(&self) -> Result<i64> {
        self.with(|c| c.query_one("SELECT COUNT(*) FROM outbox", &[])?.try_get(0))
    }

    fn outbox_delete(&mut self, id: i64) -> Result<()> {
        self.tx(|tx| {
            tx.execute("DELETE FROM outbox WHERE id = $1", &[&id])
                .map(drop)
        })
    }

    fn outbox_held(&mut self, id: i64, rule: HoldReason) -> Result<()> {
        self.tx(|tx| {
            tx.execute(
                "UPDATE outbox SET held = $2 WHERE id = $1",
                &[&id, &rule.as_str()],
            )
            .map(drop)
        })
    }

    fn outbox_failed(&mut self, id: i64, error: &Redacted) -> Result<()> {
        self.tx(|tx| {
            tx.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1",
                &[&id, &error.as_str()],
            )
            .map(drop)
        })
    }

    fn record_sent(
        &mut self,
        to: &Destination,
        hash: &str,
        counted: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO sent (channel, destination, text_hash, sent_at, counted)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&to.channel, &to.destination, &hash, &now, &flag(counted)],
            )
            .map(drop)
        })
    }

    fn sent_since(&self, to: &Destination, hash: &str, since: DateTime<Utc>) -> Result<bool> {
        let since = format_ts(since);
        self.with(|c| {
            c.query_one(
                "SELECT EXISTS (SELECT 1 FROM sent
                 WHERE channel = $1 AND destination = $2 AND text_hash = $3 AND sent_at >= $4)",
                &[&to.channel, &to.destination, &hash, &since],
            )?
            .try_get(0)
        })
    }

    fn count_sent(&self, to: &Destination, since: DateTime<Utc>) -> Result<u32> {
        let since = format_ts(since);
        let n: i64 = self.with(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM sent
                 WHERE channel = $1 AND destination = $2 AND counted <> 0 AND sent_at >= $3",
                &[&to.channel, &to.destination, &since],
            )?
            .try_get(0)
        })?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    fn prune_sent(&mut self, before: DateTime<Utc>) -> Result<()> {
        let before = format_ts(before);
        self.tx(|tx| {
            tx.execute("DELETE FROM sent WHERE sent_at < $1", &[&before])
                .map(drop)
        })
    }

    fn save_button_message(
        &mut self,
        chat_id: i64,
        message_id: i64,
        html: &Redacted,
        approvals: &[i64],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let approvals = json_list(approvals);
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO tg_messages (chat_id, message_id, html, approvals, sent_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (chat_id, message_id) DO UPDATE SET html = excluded.html,
                    approvals = excluded.approvals, sent_at = excluded.sent_at",
                &[&chat_id, &message_id, &html.as_str(), &approvals, &now],
            )
            .map(drop)
        })
    }

    fn button_message(&self, chat_id: i64, message_id: i64) -> Result<Option<(String, Vec<i64>)>> {
        self.with(|c| {
            c.query_opt(
                "SELECT html, approvals FROM tg_messages WHERE chat_id = $1 AND message_id = $2",
                &[&chat_id, &message_id],
            )?
            .map(|r| {
                let approvals: String = r.try_get(1)?;
                Ok((
                    r.try_get(0)?,
                    serde_json::from_str(&approvals).unwrap_or_default(),
                ))
            })
            .transpose()
        })
    }

    fn open_button_messages(&self) -> Result<Vec<(i64, i64, Vec<i64>)>> {
        self.with(|c| {
            c.query(
                "SELECT chat_id, message_id, approvals FROM tg_messages
                 WHERE approvals != '[]' ORDER BY sent_at, message_id",
                &[],
            )?
            .iter()
            .map(|r| {
                let approvals: String = r.try_get(2)?;
                Ok((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    serde_json::from_str(&approvals).unwrap_or_default(),
                ))
            })
            .collect()
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.with(|c| {
            c.query_opt("SELECT value FROM meta WHERE key = $1", &[&key])?
                .map(|r| r.try_get(0))
                .transpose()
        })
    }

    /// A forward-only key keeps the greater of the stored number and `value`: two nodes
    /// storing the offsets they reached keep the further one, whatever the order.
    fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        let forward_only = FORWARD_ONLY.contains(&key);
        self.tx(|tx| {
            if forward_only {
                let stored: Option<String> = tx
                    .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])?
                    .map(|r| r.try_get(0))
                    .transpose()?;
                let stored = stored.and_then(|v| v.parse::<i64>().ok());
                if let (Some(stored), Ok(new)) = (stored, value.parse::<i64>())
                    && stored > new
                {
                    return Ok(());
                }
            }
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&key, &value],
            )
            .map(drop)
        })
    }

    fn use_reply_token(&mut self, channel: &str, token: &str, now: DateTime<Utc>) -> Result<bool> {
        let hash = token_hash(token);
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO channel_replies (channel, token, seen_at) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                &[&channel, &hash, &now],
            )
            .map(|n| n == 1)
        })
    }

    fn saw_chat(
        &mut self,
        chat_id: i64,
        kind: &str,
        title: &Redacted,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO tg_chats (chat_id, kind, title, last_seen) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (chat_id) DO UPDATE SET kind = excluded.kind,
                    title = excluded.title, last_seen = excluded.last_seen",
                &[&chat_id, &kind, &title.as_str(), &now],
            )
            .map(drop)
        })
    }

    fn chats(&self) -> Result<Vec<(i64, String, String, String)>> {
        self.with(|c| {
            c.query(
                "SELECT chat_id, kind, title, last_seen FROM tg_chats ORDER BY last_seen DESC",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
            .collect()
        })
    }

    fn pause_row(&self) -> Result<Option<PauseRow>> {
        self.with(|c| {
            c.query_opt(
                &format!("SELECT {PAUSE_COLUMNS} FROM pause WHERE id = 1"),
                &[],
            )?
            .as_ref()
            .map(pause_row)
            .transpose()
        })
    }

    /// Read and, when it ended, removed in one transaction: of two nodes that find it
    /// ended, one removes it and returns it as ended, the other finds no pause.
    fn current_pause(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<Option<PauseRow>, PauseRow>> {
        self.tx(|tx| {
            let row = tx
                .query_opt(
                    &format!("SELECT {PAUSE_COLUMNS} FROM pause WHERE id = 1"),
                    &[],
                )?
                .as_ref()
                .map(pause_row)
                .transpose()?;
            match row {
                Some(p) if !p.in_force(now) => {
                    tx.execute("DELETE FROM pause WHERE id = 1", &[])?;
                    Ok(Err(p))
                }
                other => Ok(Ok(other)),
            }
        })
    }

    fn set_pause(&mut self, p: &NewPause) -> Result<()> {
        let reason = p.reason.map(Redacted::as_str);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO pause (id, since, until, reason, by) VALUES (1, $1, $2, $3, $4)
                 ON CONFLICT (id) DO UPDATE SET since = excluded.since, until = excluded.until,
                    reason = excluded.reason, by = excluded.by",
                &[&p.since, &p.until, &reason, &p.by],
            )
            .map(drop)
        })
    }

    fn clear_pause(&mut self) -> Result<Option<PauseRow>> {
        self.tx(|tx| {
            tx.query_opt(
                &format!("DELETE FROM pause WHERE id = 1 RETURNING {PAUSE_COLUMNS}"),
                &[],
            )?
            .as_ref()
            .map(pause_row)
            .transpose()
        })
    }

    fn set_agent_pause(&mut self, p: &NewPause, now: DateTime<Utc>) -> Result<bool> {
        let reason = p.reason.map(Redacted::as_str);
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO pause (id, since, until, reason, by)
                 SELECT 1, $1, $2, $3, $4 WHERE NOT EXISTS (
                    SELECT 1 FROM pause WHERE substr(by, 1, length($5)) <> $5
                        AND (until IS NULL OR until > $6))
                 ON CONFLICT (id) DO UPDATE SET since = excluded.since, until = excluded.until,
                    reason = excluded.reason, by = excluded.by",
                &[&p.since, &p.until, &reason, &p.by, &AGENT_BY, &now],
            )
            .map(|n| n > 0)
        })
    }

    fn clear_agent_pause(&mut self) -> Result<Option<PauseRow>> {
        self.tx(|tx| {
            tx.query_opt(
                &format!(
                    "DELETE FROM pause WHERE substr(by, 1, length($1)) = $1
                     RETURNING {PAUSE_COLUMNS}"
                ),
                &[&AGENT_BY],
            )?
            .as_ref()
            .map(pause_row)
            .transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::super::test_util;
    use super::*;
    use crate::store::StoreError;
    use crate::store::test_util::ts;

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

    /// Two nodes on one new database; None where PostgreSQL cannot run.
    fn two_nodes() -> Option<(Pg, Pg)> {
        let url = test_util::url()?;
        Some((
            Pg::connect(&url, "n1").unwrap(),
            Pg::connect(&url, "n2").unwrap(),
        ))
    }

    /// `f` on both nodes at once (from one barrier), each on a thread of its own.
    fn at_once<T: Send>(a: &mut Pg, b: &mut Pg, f: impl Fn(&mut Pg) -> T + Sync) -> (T, T) {
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            let (f, start) = (&f, &start);
            let one = s.spawn(move || {
                start.wait();
                f(a)
            });
            let two = s.spawn(move || {
                start.wait();
                f(b)
            });
            (one.join().unwrap(), two.join().unwrap())
        })
    }

    fn message<'a>(
        title: &'a Redacted,
        payload: &'a Redacted,
        data: &'a Redacted,
    ) -> NewMessage<'a> {
        NewMessage {
            channel: "telegram",
            delivery_id: "",
            title,
            data,
            destination: "42",
            kind: "approval",
            payload,
            urgent: true,
            direct: false,
            approvals: &[3, 4],
            resets: &[],
        }
    }

    #[test]
    fn the_outbox_keeps_each_message_whole_until_it_is_deleted() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let (title, payload, data) = ("t".into(), "<b>p</b>".into(), r#"{"k":1}"#.into());
        let resets = ["a".to_string()];
        let first = s
            .enqueue(
                &NewMessage {
                    delivery_id: "d-1",
                    resets: &resets,
                    ..message(&title, &payload, &data)
                },
                ts("2026-05-01T10:00:00Z"),
            )
            .unwrap();
        let second = s
            .enqueue(
                &NewMessage {
                    channel: "phone",
                    urgent: false,
                    direct: true,
                    approvals: &[],
                    ..message(&title, &payload, &data)
                },
                ts("2026-05-01T10:01:00Z"),
            )
            .unwrap();
        assert!(second > first);
        s.outbox_held(first, HoldReason::QuietHours).unwrap();
        s.outbox_failed(first, &"refused".into()).unwrap();
        s.outbox_failed(first, &"refused again".into()).unwrap();
        // A row without a delivery id (as SQLite's from before the column) reads as hb-<id>.
        s.with(|c| {
            c.execute(
                "UPDATE outbox SET delivery_id = NULL WHERE id = $1",
                &[&second],
            )
        })
        .unwrap();
        let rows = s.outbox().unwrap();
        assert_eq!(
            rows,
            [
                OutboxRow {
                    id: first,
                    channel: "telegram".into(),
                    delivery_id: "d-1".into(),
                    title: "t".into(),
                    data: r#"{"k":1}"#.into(),
                    destination: "42".into(),
                    kind: "approval".into(),
                    payload: "<b>p</b>".into(),
                    urgent: true,
                    direct: false,
                    approvals: vec![3, 4],
                    resets: vec!["a".into()],
                    created_at: "2026-05-01T10:00:00.000Z".into(),
                    attempts: 2,
                    held: Some(HoldReason::QuietHours),
                },
                OutboxRow {
                    id: second,
                    channel: "phone".into(),
                    delivery_id: format!("hb-{second}"),
                    title: "t".into(),
                    data: r#"{"k":1}"#.into(),
                    destination: "42".into(),
                    kind: "approval".into(),
                    payload: "<b>p</b>".into(),
                    urgent: false,
                    direct: true,
                    approvals: vec![],
                    resets: vec![],
                    created_at: "2026-05-01T10:01:00.000Z".into(),
                    attempts: 0,
                    held: None,
                },
            ]
        );
        let error: Option<String> = s
            .with(|c| c.query_one("SELECT last_error FROM outbox WHERE id = $1", &[&first]))
            .unwrap()
            .get(0);
        assert_eq!(error.as_deref(), Some("refused again"));
        assert_eq!(s.outbox_len().unwrap(), 2);
        s.outbox_delete(first).unwrap();
        assert_eq!(s.outbox_len().unwrap(), 1);
        assert_eq!(s.outbox().unwrap()[0].id, second);
    }

    #[test]
    fn a_hold_reason_heartbeat_does_not_know_is_an_error_that_names_it() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let (title, payload, data) = ("t".into(), "p".into(), "{}".into());
        s.enqueue(
            &message(&title, &payload, &data),
            ts("2026-05-01T10:00:00Z"),
        )
        .unwrap();
        s.with(|c| c.execute("UPDATE outbox SET held = 'later'", &[]))
            .unwrap();
        let err = s.outbox().unwrap_err();
        assert!(matches!(err, StoreError::Postgres { .. }), "{err}");
        assert!(
            err.to_string()
                .ends_with(r#": unknown hold reason "later""#),
            "{err}"
        );
    }

    #[test]
    fn sends_are_counted_per_destination_and_pruned_by_age() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let to = |channel: &str, destination: &str| Destination {
            channel: channel.into(),
            destination: destination.into(),
        };
        let tg = to("telegram", "42");
        s.record_sent(&tg, "h1", true, ts("2026-05-01T10:00:00Z"))
            .unwrap();
        s.record_sent(&tg, "h2", false, ts("2026-05-01T11:00:00Z"))
            .unwrap();
        s.record_sent(&tg, "h3", true, ts("2026-05-01T12:00:00Z"))
            .unwrap();
        s.record_sent(&to("telegram", "7"), "h1", true, ts("2026-05-01T12:00:00Z"))
            .unwrap();
        s.record_sent(&to("phone", "42"), "h1", true, ts("2026-05-01T12:00:00Z"))
            .unwrap();
        assert!(s.sent_since(&tg, "h1", ts("2026-05-01T10:00:00Z")).unwrap());
        assert!(!s.sent_since(&tg, "h1", ts("2026-05-01T10:00:01Z")).unwrap());
        assert!(!s.sent_since(&tg, "h9", ts("2026-05-01T00:00:00Z")).unwrap());
        // Uncounted sends (direct replies) dedupe but do not use the cap.
        assert!(s.sent_since(&tg, "h2", ts("2026-05-01T00:00:00Z")).unwrap());
        assert_eq!(s.count_sent(&tg, ts("2026-05-01T00:00:00Z")).unwrap(), 2);
        assert_eq!(s.count_sent(&tg, ts("2026-05-01T11:00:00Z")).unwrap(), 1);
        s.prune_sent(ts("2026-05-01T11:00:00Z")).unwrap();
        assert!(!s.sent_since(&tg, "h1", ts("2026-05-01T00:00:00Z")).unwrap());
        assert!(s.sent_since(&tg, "h2", ts("2026-05-01T00:00:00Z")).unwrap());
        assert_eq!(s.count_sent(&tg, ts("2026-05-01T00:00:00Z")).unwrap(), 1);
    }

    #[test]
    fn button_messages_are_replaced_and_only_those_with_approvals_are_open() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let at = ts("2026-05-01T10:00:00Z");
        s.save_button_message(1, 10, &"<b>a</b>".into(), &[5, 6], at)
            .unwrap();
        s.save_button_message(1, 11, &"b".into(), &[], at).unwrap();
        s.save_button_message(2, 9, &"c".into(), &[7], at + chrono::Duration::minutes(1))
            .unwrap();
        assert_eq!(
            s.button_message(1, 10).unwrap(),
            Some(("<b>a</b>".to_string(), vec![5, 6]))
        );
        assert_eq!(s.button_message(1, 12).unwrap(), None);
        assert_eq!(
            s.open_button_messages().unwrap(),
            [(1, 10, vec![5, 6]), (2, 9, vec![7])]
        );
        // A new text for a message replaces its row.
        s.save_button_message(1, 10, &"done".into(), &[], at)
            .unwrap();
        assert_eq!(
            s.button_message(1, 10).unwrap(),
            Some(("done".to_string(), vec![]))
        );
        assert_eq!(s.open_button_messages().unwrap(), [(2, 9, vec![7])]);
    }

    #[test]
    fn chats_are_kept_once_each_most_recent_first() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        s.saw_chat(1, "private", &"me".into(), ts("2026-05-01T10:00:00Z"))
            .unwrap();
        s.saw_chat(2, "group", &"ops".into(), ts("2026-05-01T11:00:00Z"))
            .unwrap();
        s.saw_chat(1, "private", &"me again".into(), ts("2026-05-01T12:00:00Z"))
            .unwrap();
        let chat = |id, kind: &str, title: &str, at: &str| {
            (id, kind.to_string(), title.to_string(), at.to_string())
        };
        assert_eq!(
            s.chats().unwrap(),
            [
                chat(1, "private", "me again", "2026-05-01T12:00:00.000Z"),
                chat(2, "group", "ops", "2026-05-01T11:00:00.000Z"),
            ]
        );
    }

    #[test]
    fn meta_values_are_replaced_and_the_telegram_offset_only_moves_forward() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        assert_eq!(s.meta("k").unwrap(), None);
        s.set_meta("k", "10").unwrap();
        s.set_meta("k", "5").unwrap();
        assert_eq!(s.meta("k").unwrap().as_deref(), Some("5"));
        let offset = TELEGRAM_OFFSET;
        s.set_meta(offset, "10").unwrap();
        s.set_meta(offset, "5").unwrap();
        assert_eq!(s.meta(offset).unwrap().as_deref(), Some("10"));
        s.set_meta(offset, "11").unwrap();
        assert_eq!(s.meta(offset).unwrap().as_deref(), Some("11"));
    }

    #[test]
    fn two_nodes_storing_telegram_offsets_at_once_keep_the_furthest() {
        let Some((mut a, mut b)) = two_nodes() else {
            return;
        };
        let offset = TELEGRAM_OFFSET;
        // One node stores the even offsets, the other the odd ones, each in order.
        let parity = std::sync::atomic::AtomicI64::new(0);
        at_once(&mut a, &mut b, |s| {
            let first = parity.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            for n in (first..100).step_by(2) {
                s.set_meta(offset, &n.to_string()).unwrap();
            }
        });
        assert_eq!(a.meta(offset).unwrap().as_deref(), Some("99"));
    }

    #[test]
    fn a_reply_token_is_used_once_per_channel_and_kept_only_as_a_hash() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let now = ts("2026-05-01T10:00:00Z");
        assert!(s.use_reply_token("phone", "tok-1", now).unwrap());
        assert!(
            !s.use_reply_token("phone", "tok-1", now).unwrap(),
            "a replay"
        );
        assert!(s.use_reply_token("phone", "tok-2", now).unwrap());
        assert!(s.use_reply_token("other", "tok-1", now).unwrap());
        let kept: Vec<String> = s
            .with(|c| c.query("SELECT token FROM channel_replies", &[]))
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(kept.len(), 3);
        assert!(
            kept.iter().all(|t| t.len() == 64 && !t.contains("tok")),
            "{kept:?}"
        );
    }

    #[test]
    fn of_two_nodes_reading_the_same_replies_exactly_one_uses_each_token() {
        let Some((mut a, mut b)) = two_nodes() else {
            return;
        };
        let now = ts("2026-05-01T10:00:00Z");
        let (ours, theirs) = at_once(&mut a, &mut b, |s| {
            (0..50)
                .map(|i| {
                    s.use_reply_token("phone", &format!("tok-{i}"), now)
                        .unwrap()
                })
                .collect::<Vec<bool>>()
        });
        for (i, (x, y)) in ours.iter().zip(&theirs).enumerate() {
            assert!(x ^ y, "token {i}: {x} and {y}");
        }
    }

    #[test]
    fn an_agent_never_replaces_or_clears_a_persons_pause() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let now = ts("2026-05-01T10:00:00Z");
        let agent = pause("mcp:a", Some("2026-05-01T11:00:00.000Z"));
        // No pause, or an agent's: the agent's is set.
        assert!(s.set_agent_pause(&agent, now).unwrap());
        assert!(s.set_agent_pause(&agent, now).unwrap());
        assert_eq!(s.clear_agent_pause().unwrap(), Some(row(&agent)));
        // A person's pause in force stays, whatever the agent does.
        let person = pause("cli:me", None);
        s.set_pause(&person).unwrap();
        assert!(!s.set_agent_pause(&agent, now).unwrap());
        assert_eq!(s.clear_agent_pause().unwrap(), None);
        assert_eq!(s.pause_row().unwrap(), Some(row(&person)));
        // A person's pause that has ended no longer holds anything.
        let ended = pause("telegram:1", Some("2026-05-01T09:00:00.000Z"));
        s.set_pause(&ended).unwrap();
        assert!(s.set_agent_pause(&agent, now).unwrap());
        assert!(s.pause_row().unwrap().unwrap().by_agent());
    }

    #[test]
    fn a_pause_is_one_row_replaced_read_and_cleared() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let now = ts("2026-05-01T10:30:00Z");
        assert_eq!(s.current_pause(now).unwrap(), Ok(None));
        assert_eq!(s.clear_pause().unwrap(), None);
        let reason = "maintenance".into();
        let first = NewPause {
            reason: Some(&reason),
            ..pause("cli:me", None)
        };
        s.set_pause(&first).unwrap();
        let timed = pause("cli:you", Some("2026-05-01T11:00:00.000Z"));
        s.set_pause(&timed).unwrap();
        let count: i64 = s
            .with(|c| c.query_one("SELECT COUNT(*) FROM pause", &[]))
            .unwrap()
            .get(0);
        assert_eq!(count, 1);
        assert_eq!(s.current_pause(now).unwrap(), Ok(Some(row(&timed))));
        // Once its end has passed it is removed, and said ended once.
        let later = ts("2026-05-01T11:00:00Z");
        assert_eq!(s.current_pause(later).unwrap(), Err(row(&timed)));
        assert_eq!(s.current_pause(later).unwrap(), Ok(None));
        assert_eq!(s.pause_row().unwrap(), None);
        s.set_pause(&first).unwrap();
        assert_eq!(s.clear_pause().unwrap(), Some(row(&first)));
        assert_eq!(s.pause_row().unwrap(), None);
    }

    #[test]
    fn of_two_nodes_finding_a_pause_ended_or_clearing_it_exactly_one_gets_it() {
        let Some((mut a, mut b)) = two_nodes() else {
            return;
        };
        let timed = pause("cli:me", Some("2026-05-01T11:00:00.000Z"));
        let later = ts("2026-05-01T12:00:00Z");
        for _ in 0..10 {
            a.set_pause(&timed).unwrap();
            let (x, y) = at_once(&mut a, &mut b, |s| s.current_pause(later).unwrap());
            let mut got = [x, y];
            got.sort_by_key(|r| r.is_ok());
            assert_eq!(got, [Err(row(&timed)), Ok(None)]);

            a.set_pause(&timed).unwrap();
            let (x, y) = at_once(&mut a, &mut b, |s| s.clear_pause().unwrap());
            let mut got = [x, y];
            got.sort_by_key(Option::is_none);
            assert_eq!(got, [Some(row(&timed)), None]);
        }
    }
}
