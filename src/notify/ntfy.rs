//! `kind = "ntfy"` (docs/reference.md#ntfy): one message published as JSON to the server's
//! root, `{"topic", "title": "heartbeat: <title>", "message", "priority", "tags",
//! "actions", "sequence_id"}`; and reading the replies on the reply topic
//! (docs/reference.md#approvals-by-ntfy), which `engine/replies.rs` decides.
//!
//! Invariants:
//! - The topic, the reply topic and the bearer token are read when a message is sent or
//!   replies are read, never at load, and are never part of an error.
//! - An approval's message carries Approve and Deny buttons only when the channel has
//!   `approvals = true` and the message shows that approval's whole input (its
//!   `approvals` is exactly that one id: the renderer decides). Each button's body is
//!   signed for that approval, that decision and its expiry (`notify/hb1.rs`).
//! - The delivery id is the message's `sequence_id`, the same at every try: a retry of a
//!   message ntfy already took replaces it on the phone instead of adding another.

use std::path::Path;

use chrono::DateTime;
use serde_json::{Value, json};

use super::hb1::{self, Decision};
use super::{Channel, Message, SendError, Settings, http};
use crate::config::{ChannelConfig, NtfyConfig};
use crate::model::MessageKind;

pub(crate) struct Ntfy<'a> {
    pub cfg: &'a ChannelConfig,
    pub ntfy: &'a NtfyConfig,
    /// Where the install key that signs the buttons is kept.
    pub state_dir: &'a Path,
}

/// ntfy's priority of a message: 5 for an urgent kind, 4 for an approval, else 3.
pub(crate) fn priority(kind: &str) -> u8 {
    match kind.parse::<MessageKind>() {
        Ok(k) if k.urgent() => 5,
        Ok(MessageKind::Approval) => 4,
        _ => 3,
    }
}

/// ntfy's sequence id of a delivery id: the same, with a part's `.N` as `-N` (a sequence
/// id is letters, digits, `-` and `_`).
fn sequence_id(delivery_id: &str) -> String {
    delivery_id.replace('.', "-")
}

/// The JSON one message is published as.
pub(crate) fn body(topic: &str, message: &Message, tags: &[String], actions: Vec<Value>) -> Value {
    json!({
        "topic": topic,
        "title": format!("heartbeat: {}", message.title),
        "message": message.payload.as_str(),
        "priority": priority(message.kind),
        "tags": tags,
        "actions": actions,
        "sequence_id": sequence_id(message.id),
    })
}

/// What an approval's message needs for its buttons, from its audit keys (put there when
/// it was queued): (approval id, task id, input hash, expiry in Unix seconds).
fn signed_approval(message: &Message) -> Option<(i64, String, String, i64)> {
    let [id] = message.approvals else {
        return None;
    };
    let data = message.data;
    if message.kind != MessageKind::Approval.as_str() || data["approval_id"].as_i64() != Some(*id) {
        return None;
    }
    let expires = DateTime::parse_from_rfc3339(data["expires_at"].as_str()?).ok()?;
    Some((
        *id,
        data["task_id"].as_str()?.to_string(),
        data["input_hash"].as_str()?.to_string(),
        expires.timestamp(),
    ))
}

/// A bearer token header, when `token_env` is set.
fn authorization(ntfy: &NtfyConfig) -> Result<Option<(String, String)>, SendError> {
    ntfy.token_env
        .as_deref()
        .map(|var| {
            Ok((
                "Authorization".into(),
                format!("Bearer {}", super::secret(var)?),
            ))
        })
        .transpose()
}

impl Ntfy<'_> {
    /// The Approve and Deny buttons of an approval's message; none for any other.
    fn actions(&self, message: &Message) -> Result<Vec<Value>, SendError> {
        if !self.ntfy.approvals {
            return Ok(Vec::new());
        }
        let Some((id, task_id, input_hash, expiry)) = signed_approval(message) else {
            return Ok(Vec::new());
        };
        let Some(var) = self.ntfy.reply_topic_env.as_deref() else {
            return Ok(Vec::new());
        };
        let reply_url = format!("{}/{}", self.ntfy.server, super::secret(var)?);
        let key = hb1::install_key(self.state_dir).map_err(SendError::Unavailable)?;
        Ok([(Decision::Approve, "Approve"), (Decision::Deny, "Deny")]
            .into_iter()
            .map(|(decision, label)| {
                let token = hb1::token(&key, id, &task_id, &input_hash, decision, expiry);
                json!({
                    "action": "http",
                    "label": label,
                    "url": reply_url,
                    "method": "POST",
                    "body": hb1::body(decision, id, expiry, &token),
                    "clear": true,
                })
            })
            .collect())
    }
}

impl Channel for Ntfy<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings::of(self.cfg)
    }

    fn kind(&self) -> &'static str {
        "ntfy"
    }

    fn max_len(&self) -> usize {
        // ntfy turns a message over 4,096 bytes into an attachment.
        4000
    }

    fn send(&self, _: &str, message: &Message) -> Result<i64, SendError> {
        let topic = super::secret(&self.ntfy.topic_env)?;
        let actions = self.actions(message)?;
        let mut req = http::Request::json(
            &format!("{}/", self.ntfy.server),
            &body(&topic, message, &self.ntfy.tags, actions),
        );
        req.headers.extend(authorization(self.ntfy)?);
        http::send(req, self.cfg.timeout).map(|_| 0)
    }
}

/// One message read from the reply topic.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Received {
    /// ntfy's id of it: where the next read starts (`since=`).
    pub id: String,
    /// Its text.
    pub text: String,
}

/// The messages on the reply topic after `since` (a message id; None: all that the
/// server keeps), oldest first.
pub(crate) fn poll(
    cfg: &ChannelConfig,
    ntfy: &NtfyConfig,
    since: Option<&str>,
) -> Result<Vec<Received>, SendError> {
    let Some(var) = ntfy.reply_topic_env.as_deref() else {
        return Ok(Vec::new());
    };
    let reply_topic = super::secret(var)?;
    let url = format!(
        "{}/{reply_topic}/json?poll=1&since={}",
        ntfy.server,
        since.unwrap_or("all")
    );
    let req = http::Request {
        post: false,
        url,
        headers: authorization(ntfy)?.into_iter().collect(),
        body: Vec::new(),
    };
    Ok(parse_lines(&http::send(req, cfg.timeout)?))
}

/// ntfy's JSON lines: each `message` event, in order; any other line (`open`, `keepalive`,
/// `poll_request`, or not JSON at all) is skipped.
pub(crate) fn parse_lines(body: &str) -> Vec<Received> {
    body.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v["event"] == "message")
        .filter_map(|v| {
            Some(Received {
                id: v["id"].as_str()?.to_string(),
                text: v["message"].as_str().unwrap_or("").to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Redacted;

    #[test]
    fn priorities_follow_the_kind() {
        assert_eq!(priority("failure"), 5);
        assert_eq!(priority("trip"), 5);
        assert_eq!(priority("approval"), 4);
        assert_eq!(priority("reminder"), 3);
        assert_eq!(priority("summary"), 3);
    }

    #[test]
    fn the_published_json_has_the_title_priority_tags_and_sequence_id() {
        let title = Redacted::from("@backup failed (HEARTBEAT.md:3)");
        let payload = Redacted::from("line one\nline two");
        let data = json!({});
        let message = Message {
            id: "hb_00ff.1",
            kind: "failure",
            title: &title,
            payload: &payload,
            data: &data,
            created_at: "2026-03-02T10:00:00.000Z",
            approvals: &[],
            resets: &[],
        };
        let v = body("topic-x", &message, &["robot".into()], Vec::new());
        assert_eq!(
            v,
            json!({
                "topic": "topic-x",
                "title": "heartbeat: @backup failed (HEARTBEAT.md:3)",
                "message": "line one\nline two",
                "priority": 5,
                "tags": ["robot"],
                "actions": [],
                "sequence_id": "hb_00ff-1",
            })
        );
    }

    #[test]
    fn only_message_events_are_read_from_the_reply_topic() {
        let body = concat!(
            r#"{"id":"a1","time":1,"event":"open","topic":"r"}"#,
            "\n",
            r#"{"id":"b2","time":2,"event":"message","topic":"r","message":"hb1 deny 1 2 x"}"#,
            "\nnot json\n",
            r#"{"id":"c3","time":3,"event":"keepalive","topic":"r"}"#,
            "\n",
            r#"{"id":"d4","time":4,"event":"message","topic":"r"}"#,
            "\n",
        );
        assert_eq!(
            parse_lines(body),
            [
                Received {
                    id: "b2".into(),
                    text: "hb1 deny 1 2 x".into()
                },
                Received {
                    id: "d4".into(),
                    text: String::new()
                },
            ]
        );
    }
}
