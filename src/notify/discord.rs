//! `kind = "discord"` (docs/reference.md#channels): a Discord webhook, `{"content": …}`,
//! cut into parts of at most 2,000 characters (Discord's limit) at lines.

use super::{Channel, Message, SendError, Settings, http};
use crate::config::{ChannelConfig, Target};
use crate::text::Redacted;

/// Discord's limit on a message's content, in characters.
pub(crate) const MAX_CONTENT: usize = 2000;

pub(crate) struct Discord<'a> {
    pub cfg: &'a ChannelConfig,
    pub url: &'a Target,
}

impl Channel for Discord<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings::of(self.cfg)
    }

    fn kind(&self) -> &'static str {
        "discord"
    }

    fn render(&self, msg: &crate::render::telegram::Rendered) -> String {
        // The title leads, in bold: each part of a long message is its own post.
        format!(
            "**heartbeat: {}**\n{}",
            msg.title,
            crate::render::telegram::html_to_plain(&msg.html)
        )
    }

    fn max_len(&self) -> usize {
        MAX_CONTENT
    }

    fn split(&self, payload: &Redacted, limit: usize) -> Vec<Redacted> {
        payload.split_lines(limit, |_| 1)
    }

    fn send(&self, _: &str, message: &Message) -> Result<i64, SendError> {
        let url = super::url_of(self.url)?;
        let body = serde_json::json!({
            "content": message.payload.as_str(),
            // Mentions in a task's output must not page a whole server.
            "allowed_mentions": {"parse": []},
        });
        http::send(http::Request::json(&url, &body), self.cfg.timeout).map(|_| 0)
    }
}
