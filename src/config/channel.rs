//! `[channels.NAME]` (docs/reference.md#channels): where messages go besides Telegram, as
//! the rest of the program reads it. Every channel has the same noise rules as Telegram
//! (quiet hours, a daily cap, a timeout) and the list of message kinds it takes; its kind
//! says how it is reached. Secrets are never here, only the names of the variables that
//! hold them.

use std::time::Duration;

use crate::model::MessageKind;
use crate::schedule::Window;

/// One `[channels.NAME]` table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChannelConfig {
    /// `NAME`: in outbox rows, audit lines, `@notify`'s `channel` and `--channel`.
    pub name: String,
    /// The kinds of message it takes (`test` is always delivered).
    pub events: Vec<MessageKind>,
    /// Non-urgent messages wait until these hours end.
    pub quiet_hours: Option<Window>,
    /// Past this many messages a local day, non-urgent ones are folded; 0 = no limit.
    pub max_messages_per_day: u32,
    /// The longest one send may take.
    pub timeout: Duration,
    pub kind: ChannelKind,
}

/// How a channel is reached: one variant per kind. Adding a kind is a variant here, its
/// keys in `config/load.rs` and a file in `notify/`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ChannelKind {
    Ntfy(NtfyConfig),
    /// A Slack incoming webhook (also Mattermost and Rocket.Chat): `{"text": …}`.
    Slack {
        url: Target,
    },
    /// A Discord webhook: `{"content": …}`.
    Discord {
        url: Target,
    },
    /// A JSON POST of the event, signed when a secret is set.
    Webhook {
        url: Target,
        /// The variable holding the `whsec_…` signing secret.
        secret_env: Option<String>,
    },
    Email(EmailConfig),
    /// A program run with the event as one JSON line on stdin; no shell.
    Command {
        argv: Vec<String>,
    },
}

impl ChannelKind {
    /// The variables whose values are secrets.
    pub(crate) fn secret_vars(&self) -> Vec<&str> {
        match self {
            ChannelKind::Ntfy(n) => [
                Some(&n.topic_env),
                n.token_env.as_ref(),
                n.reply_topic_env.as_ref(),
            ]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect(),
            ChannelKind::Slack { url: t } | ChannelKind::Discord { url: t } => {
                t.var().into_iter().collect()
            }
            ChannelKind::Webhook { url: t, secret_env } => {
                t.var().into_iter().chain(secret_env.as_deref()).collect()
            }
            ChannelKind::Email(e) => match &e.transport {
                MailTransport::Smtp { url_env } => vec![url_env.as_str()],
                MailTransport::Sendmail { .. } => Vec::new(),
            },
            ChannelKind::Command { .. } => Vec::new(),
        }
    }
}

/// A URL written in the config, or the variable that holds it (then the whole URL is a
/// secret).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Target {
    Url(String),
    Env(String),
}

impl Target {
    /// The variable that holds the URL, if it is in one.
    pub(crate) fn var(&self) -> Option<&str> {
        match self {
            Target::Env(name) => Some(name),
            Target::Url(_) => None,
        }
    }
}

/// `kind = "ntfy"`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NtfyConfig {
    /// Without a trailing slash.
    pub server: String,
    /// The variable holding the topic (on a public server, the topic name is the secret).
    pub topic_env: String,
    /// The variable holding a bearer token.
    pub token_env: Option<String>,
    /// Approval messages carry Approve and Deny buttons that answer on the reply topic.
    pub approvals: bool,
    /// The variable holding the reply topic; set whenever `approvals` is.
    pub reply_topic_env: Option<String>,
    /// ntfy tags added to every message.
    pub tags: Vec<String>,
}

/// `kind = "email"`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EmailConfig {
    pub transport: MailTransport,
    pub from: String,
    pub to: Vec<String>,
}

/// How an e-mail leaves the machine.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MailTransport {
    /// An SMTP server, from the URL in `url_env` (`smtps://` TLS, `smtp://` STARTTLS, plain
    /// only to a loopback host).
    Smtp { url_env: String },
    /// The local `sendmail` program.
    Sendmail { program: String },
}
