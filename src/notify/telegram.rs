//! Telegram as a [`Channel`]: the `[telegram]` config and the Bot API client (through the
//! [`Transport`] trait, which tests replace with a fake). Destinations are chat ids as
//! text; the payload is Telegram HTML (`render/telegram.rs`).

use super::{Channel, Message, Rules, SendError, Settings};
use crate::config::TelegramConfig;
use crate::render::telegram::{MAX_MESSAGE, Rendered, split};
use crate::telegram::Transport;
use crate::text::Redacted;

/// The channel's name in outbox rows and audit lines.
pub(crate) const KIND: &str = "telegram";

/// The Telegram channel: its config, and the client if one could be built.
pub(crate) struct TelegramChannel<'a> {
    pub cfg: &'a TelegramConfig,
    pub transport: Option<&'a dyn Transport>,
}

/// A chat id as an outbox destination.
pub(crate) fn destination(chat_id: i64) -> String {
    chat_id.to_string()
}

impl Channel for TelegramChannel<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings {
            name: KIND,
            events: &self.cfg.events,
            rules: Rules {
                quiet_hours: self.cfg.quiet_hours,
                max_per_day: self.cfg.max_messages_per_day,
            },
        }
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn render(&self, msg: &Rendered) -> String {
        msg.html.clone()
    }

    fn destinations(&self) -> Vec<String> {
        self.cfg.chat_ids.iter().map(|&c| destination(c)).collect()
    }

    fn unconfigured(&self) -> &'static str {
        "the chat is no longer in telegram.chat_ids"
    }

    fn connected(&self) -> bool {
        self.transport.is_some()
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A chat, the HTML, the approvals and the resets of one message.
    type Sent = (i64, String, Vec<i64>, Vec<String>);

    /// Records what the Bot API would have been asked to send.
    #[derive(Default)]
    struct Recorder {
        sent: RefCell<Vec<Sent>>,
    }

    impl Transport for Recorder {
        fn send(
            &self,
            chat_id: i64,
            html: &Redacted,
            approvals: &[i64],
            resets: &[String],
        ) -> Result<i64, SendError> {
            let mut sent = self.sent.borrow_mut();
            sent.push((
                chat_id,
                html.to_string(),
                approvals.to_vec(),
                resets.to_vec(),
            ));
            Ok(41 + sent.len() as i64)
        }
    }

    #[test]
    fn chat_ids_are_the_destinations_and_a_send_reaches_the_bot_api_as_is() {
        let cfg = TelegramConfig {
            chat_ids: vec![5, -100200],
            max_messages_per_day: 3,
            ..TelegramConfig::default()
        };
        let bot = Recorder::default();
        let channel = TelegramChannel {
            cfg: &cfg,
            transport: Some(&bot),
        };
        assert_eq!(channel.destinations(), ["5", "-100200"]);
        assert_eq!(channel.rules().max_per_day, 3);
        assert!(channel.connected());
        let payload = Redacted::from("<b>hi</b>");
        let resets = vec!["0123456789ab".to_string()];
        let title = Redacted::from("hi");
        let message = Message {
            id: "d1",
            kind: "approval",
            title: &title,
            payload: &payload,
            data: &serde_json::Value::Null,
            created_at: "2026-01-01T00:00:00.000Z",
            approvals: &[7],
            resets: &resets,
        };
        assert_eq!(channel.send("-100200", &message), Ok(42));
        assert_eq!(
            bot.sent.borrow()[0],
            (-100200, "<b>hi</b>".to_string(), vec![7], resets.clone())
        );
        // A destination that is not a chat id can never be sent to.
        assert!(matches!(
            channel.send("me", &message),
            Err(SendError::Rejected(_))
        ));
        // Without a client nothing is sent: everything waits.
        let offline = TelegramChannel {
            cfg: &cfg,
            transport: None,
        };
        assert!(!offline.connected());
        assert_eq!(bot.sent.borrow().len(), 1);
    }
}
