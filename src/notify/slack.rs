//! `kind = "slack"` (docs/reference.md#channels): a Slack incoming webhook, which Mattermost
//! and Rocket.Chat also take: `{"text": …}`, the title in bold on the first line.

use super::{Channel, Message, SendError, Settings, http};
use crate::config::{ChannelConfig, Target};

pub(crate) struct Slack<'a> {
    pub cfg: &'a ChannelConfig,
    pub url: &'a Target,
}

/// The JSON Slack is sent.
pub(crate) fn body(message: &Message) -> serde_json::Value {
    serde_json::json!({
        "text": format!("*heartbeat: {}*\n{}", message.title, message.payload),
    })
}

impl Channel for Slack<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings::of(self.cfg)
    }

    fn kind(&self) -> &'static str {
        "slack"
    }

    fn max_len(&self) -> usize {
        // Slack truncates a message's text past 40,000 characters.
        35_000
    }

    fn send(&self, _: &str, message: &Message) -> Result<i64, SendError> {
        let url = super::url_of(self.url)?;
        http::send(http::Request::json(&url, &body(message)), self.cfg.timeout).map(|_| 0)
    }
}
