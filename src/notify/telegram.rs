//! Telegram as a [`Channel`]: the `[telegram]` config and the Bot API client (through the
//! [`Transport`] trait, which tests replace with a fake). Destinations are chat ids as
//! text; the payload is Telegram HTML (`render/telegram.rs`).

use std::time::Duration;

use super::{Channel, Message, Rules, SendError};
use crate::config::TelegramConfig;
use crate::render::telegram::{MAX_MESSAGE, split};
use crate::telegram::{REQUEST_LIMIT, Transport};
use crate::text::Redacted;

/// The channel's name in outbox rows and audit lines.
pub const KIND: &str = "telegram";

/// The Telegram channel: its config, and the client if one could be built.
pub struct TelegramChannel<'a> {
    pub cfg: &'a TelegramConfig,
    pub transport: Option<&'a dyn Transport>,
}

/// A chat id as an outbox destination.
pub fn destination(chat_id: i64) -> String {
    chat_id.to_string()
}

impl Channel for TelegramChannel<'_> {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn destinations(&self) -> Vec<String> {
        self.cfg.chat_ids.iter().map(|&c| destination(c)).collect()
    }

    fn unconfigured(&self) -> &'static str {
        "the chat is no longer in telegram.chat_ids"
    }

    fn rules(&self) -> Rules {
        Rules {
            quiet_hours: self.cfg.quiet_hours,
            max_per_day: self.cfg.max_messages_per_day,
        }
    }

    fn connected(&self) -> bool {
        self.transport.is_some()
    }

    fn timeout(&self) -> Duration {
        REQUEST_LIMIT
    }

    fn max_len(&self) -> usize {
        MAX_MESSAGE
    }

    fn split(&self, payload: &Redacted, limit: usize) -> Vec<Redacted> {
        split(payload, limit)
    }

    fn folded_header(&self, n: usize) -> String {
        format!("<b>heartbeat</b>: {n} message(s) folded into one (telegram.max_messages_per_day)")
    }

    fn keeps_button_messages(&self) -> bool {
        true
    }

    fn send(&self, destination: &str, message: &Message) -> Result<i64, SendError> {
        let Some(t) = self.transport else {
            return Err(SendError::Unavailable("telegram is not connected".into()));
        };
        let Ok(chat) = destination.parse::<i64>() else {
            return Err(SendError::Rejected(format!(
                "{destination:?} is not a Telegram chat id"
            )));
        };
        t.send(chat, message.payload, message.approvals, message.resets)
    }
}
