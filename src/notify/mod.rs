//! Channels: where messages to people go (docs/reference.md#channels). Telegram and every
//! `[channels.NAME]` are each one implementation of [`Channel`]; the outbox
//! (`engine/outbox.rs`) queues, sends, retries, drops and expires messages for all of them
//! alike, through the trait. [`open`] is the one list of configured channels.
//!
//! Invariants:
//! - A channel renders, sends and classifies: what becomes of a message (kept for the next
//!   run, dropped `rejected`, dropped `expired`, held, folded, deduplicated) is decided once,
//!   in `engine/outbox.rs`, from the [`SendError`] the channel answers with.
//! - Every send gives up by its channel's own time limit: a hung channel never blocks a run
//!   for longer than that.
//! - What a channel is given is redacted ([`Redacted`]): a message leaves the process.
//! - A channel reads its secrets from the environment when it sends, never at load: a
//!   variable unset then fails that delivery, naming the variable, and it is tried again.

pub(crate) mod command;
pub(crate) mod discord;
pub(crate) mod email;
pub(crate) mod hb1;
pub(crate) mod http;
pub(crate) mod ntfy;
pub(crate) mod slack;
pub(crate) mod telegram;
pub(crate) mod webhook;

use serde_json::Value;

use crate::config::{ChannelConfig, ChannelKind, Config};
use crate::model::MessageKind;
use crate::render::telegram::{Rendered, html_to_plain};
use crate::schedule::Window;
use crate::telegram::Transport;
use crate::text::Redacted;

/// Why a send did not go through: the one classification every channel answers with.
pub(crate) use crate::net::SendError;

/// One message (or one part of it) as a channel is given it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Message<'a> {
    /// The delivery id: the idempotency key the channel sends (`.N` added for part N > 0
    /// of a message sent in parts).
    pub id: &'a str,
    /// Its kind's word (`approval`, `failure`, …).
    pub kind: &'a str,
    /// One line, plain text.
    pub title: &'a Redacted,
    /// What the channel shows, in its own format ([`Channel::render`]).
    pub payload: &'a Redacted,
    /// The audit keys of what it is about (redacted).
    pub data: &'a Value,
    /// When it was queued (RFC 3339, UTC).
    pub created_at: &'a str,
    /// The approvals it may carry buttons for: only those whose whole input it shows.
    pub approvals: &'a [i64],
    /// The tripped tasks it may carry a Reset button for.
    pub resets: &'a [String],
}

/// The noise rules' settings of one channel (docs/reference.md#outbox).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Rules {
    /// Non-urgent messages wait until these hours end.
    pub quiet_hours: Option<Window>,
    /// Past this many messages a local day, non-urgent ones are folded; 0 = no limit.
    pub max_per_day: u32,
}

/// A place messages go. The outbox holds each message under the channel's [`name`] and a
/// destination in the channel's own terms, and calls [`send`] with them.
///
/// [`name`]: Channel::name
/// [`send`]: Channel::send
pub(crate) trait Channel {
    /// Its name, the kinds of message it takes and its noise rules.
    fn settings(&self) -> Settings<'_>;

    /// Its name, in its outbox rows and audit lines: `telegram`, or `[channels.NAME]`'s.
    fn name(&self) -> &str {
        self.settings().name
    }

    /// Its kind (`telegram`, `ntfy`, …), for `status`.
    fn kind(&self) -> &'static str;

    /// The kinds of message it takes.
    fn events(&self) -> &[MessageKind] {
        self.settings().events
    }

    /// Whether a message of `kind` goes here (a test always does).
    fn takes(&self, kind: MessageKind) -> bool {
        kind == MessageKind::Test || self.events().contains(&kind)
    }

    /// The destinations configured now, as the outbox stores them. A queued message to any
    /// other is dropped. One, empty, for a channel that has only one.
    fn destinations(&self) -> Vec<String> {
        vec![String::new()]
    }

    /// Why a message to a destination no longer configured is dropped (an audit line).
    fn unconfigured(&self) -> &'static str {
        "the destination is no longer configured"
    }

    /// Quiet hours and the daily cap.
    fn rules(&self) -> Rules {
        self.settings().rules
    }

    /// Whether it can send at all now (a token is set, a client is built). When it cannot,
    /// every message waits in the outbox.
    fn connected(&self) -> bool {
        true
    }

    /// What the outbox stores as the message's payload: the text this channel shows, in its
    /// own format. Plain text lines unless the channel says otherwise (Telegram: HTML).
    fn render(&self, msg: &Rendered) -> String {
        html_to_plain(&msg.html)
    }

    /// The longest payload one message may carry; a longer one is sent in parts, cut at
    /// lines by [`split`].
    ///
    /// [`split`]: Channel::split
    fn max_len(&self) -> usize {
        4000
    }

    /// Cut a payload into parts of at most `limit` (in the channel's own measure: bytes
    /// unless it says otherwise), at lines.
    fn split(&self, payload: &Redacted, limit: usize) -> Vec<Redacted> {
        payload.split_lines(limit, char::len_utf8)
    }

    /// The payload of the line that heads `n` messages folded into one by the daily cap.
    fn folded_header(&self, n: usize) -> String {
        format!(
            "heartbeat: {n} message(s) folded into one (channels.{}.max_messages_per_day)",
            self.name()
        )
    }

    /// Whether a sent message with approval buttons is remembered (its destination as a
    /// Telegram chat id), so that a press can edit it later.
    fn keeps_button_messages(&self) -> bool {
        false
    }

    /// Send one message (one part) to `destination`; the channel's id for it (0 if it has
    /// none). Gives up by the channel's own time limit.
    fn send(&self, destination: &str, message: &Message) -> Result<i64, SendError>;
}

/// What the outbox needs of a channel besides sending: its name, the kinds of message it
/// takes and its noise rules.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings<'a> {
    pub name: &'a str,
    pub events: &'a [MessageKind],
    pub rules: Rules,
}

impl<'a> Settings<'a> {
    /// Those of a `[channels.NAME]` table.
    pub(crate) fn of(cfg: &'a ChannelConfig) -> Settings<'a> {
        Settings {
            name: &cfg.name,
            events: &cfg.events,
            rules: Rules {
                quiet_hours: cfg.quiet_hours,
                max_per_day: cfg.max_messages_per_day,
            },
        }
    }
}

/// The value of a channel's secret variable now, or why it cannot send: a delivery fails,
/// naming the variable, and is tried again at the next run.
pub(crate) fn secret(var: &str) -> Result<String, SendError> {
    crate::redact::take_env(var).ok_or_else(|| SendError::Unavailable(format!("${var} is not set")))
}

/// Every configured channel: Telegram (through `telegram`, or offline without it) and
/// each `[channels.NAME]`, in that order.
pub(crate) fn open<'a>(
    cfg: &'a Config,
    telegram: Option<&'a dyn Transport>,
) -> Vec<Box<dyn Channel + 'a>> {
    let mut channels: Vec<Box<dyn Channel + 'a>> = Vec::new();
    if let Some(tc) = &cfg.telegram {
        channels.push(Box::new(telegram::TelegramChannel {
            cfg: tc,
            transport: telegram,
        }));
    }
    for c in &cfg.channels {
        channels.push(of_kind(cfg, c));
    }
    channels
}

/// The channel of one `[channels.NAME]` table: one line per kind.
fn of_kind<'a>(cfg: &'a Config, c: &'a ChannelConfig) -> Box<dyn Channel + 'a> {
    match &c.kind {
        ChannelKind::Ntfy(ntfy) => Box::new(ntfy::Ntfy {
            cfg: c,
            ntfy,
            // The install key that signs its buttons lives there.
            state_dir: &cfg.state_dir,
        }),
        ChannelKind::Slack { url } => Box::new(slack::Slack { cfg: c, url }),
        ChannelKind::Discord { url } => Box::new(discord::Discord { cfg: c, url }),
        ChannelKind::Webhook { url, secret_env } => Box::new(webhook::Webhook {
            cfg: c,
            url,
            secret_env: secret_env.as_deref(),
        }),
        ChannelKind::Command { argv } => Box::new(command::Command {
            cfg: c,
            argv,
            cwd: cfg
                .source
                .as_deref()
                .and_then(std::path::Path::parent)
                .unwrap_or(&cfg.state_dir)
                .to_path_buf(),
            // As out of a tool's: every variable of the config that holds a secret.
            remove_env: crate::audit::secret_vars(cfg)
                .into_iter()
                .map(str::to_string)
                .collect(),
        }),
        ChannelKind::Email(mail) => Box::new(email::Email { cfg: c, mail }),
    }
}

/// The URL a channel posts to: written in the config, or read from its variable now.
pub(crate) fn url_of(target: &crate::config::Target) -> Result<String, SendError> {
    match target {
        crate::config::Target::Url(u) => Ok(u.clone()),
        crate::config::Target::Env(var) => secret(var),
    }
}
