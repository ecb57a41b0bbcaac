//! The Telegram Bot API, through teloxide: send (HTML, plain-text fallback, approval
//! buttons), edit, answer button presses, read updates.
//!
//! Invariants:
//! - The token never leaves this module: `Telegram` has no `Debug` that prints it (teloxide's
//!   `Bot` derives one with the token inside, so the `Bot` is never exposed), and every error
//!   text passes through [`Telegram::scrub`] (reqwest errors name the URL, which holds it).
//! - The tokio runtime and the HTTP client are built only when Telegram is configured and
//!   a token is present; nothing else in heartbeat needs them.
//! - Every request has a timeout: a hung Telegram never blocks a run for long.

use crate::text::Redacted;
use std::fmt;
use std::time::Duration;

use teloxide::payloads::{
    AnswerCallbackQuerySetters, EditMessageTextSetters, GetUpdatesSetters, SendMessageSetters,
};
use teloxide::prelude::Requester;
use teloxide::types::{
    ChatId, InlineKeyboardButton, InlineKeyboardMarkup, MessageId, ParseMode, Update, UpdateKind,
};
use teloxide::{ApiError, Bot, RequestError};

use crate::config::TelegramConfig;
use crate::model::ButtonAction;
use crate::render::telegram::html_to_plain;

/// Extra time the HTTP client allows beyond a long poll's own timeout.
const SLACK: Duration = Duration::from_secs(10);
/// The longest a request other than a long poll may take. teloxide waits 10 s before it
/// reads any 5xx answer; a run must not stall that long per message when Telegram is down.
pub(crate) const REQUEST_LIMIT: Duration = Duration::from_secs(5);

/// Why a send did not go through: the classification every channel shares.
pub(crate) use crate::net::SendError;

/// Whether Telegram's error answer is an HTTP 4xx other than 408 and 429: one that the same
/// request can never pass (docs/reference.md#outbox). teloxide keeps the answer's
/// description, not its status; Telegram starts each description with the status's reason
/// phrase (`Bad Request: chat not found`, `Forbidden: bot was blocked by the user`).
fn never_succeeds(e: &ApiError) -> bool {
    const FINAL: [&str; 7] = [
        "Bad Request",
        "Unauthorized",
        "Forbidden",
        "Not Found",
        "Conflict",
        "Request Entity Too Large",
        "Method Not Allowed",
    ];
    let text = match e {
        // "Unauthorized" or "Not Found": a token Telegram does not know.
        ApiError::InvalidToken => return true,
        ApiError::Unknown(text) => text.clone(),
        known => known.to_string(),
    };
    FINAL.iter().any(|phrase| text.starts_with(phrase))
}

/// Why reading updates failed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PollError {
    /// Telegram does not know the bot token (401 `Unauthorized`, or 404 `Not Found` for a
    /// token that is not even shaped like one): nothing will work until it is fixed.
    TokenRejected(String),
    /// Anything else: Telegram unreachable, down or refusing this once.
    Failed(String),
}

impl fmt::Display for PollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PollError::TokenRejected(m) | PollError::Failed(m) => f.write_str(m),
        }
    }
}

/// The Bot API's send, as the Telegram channel (`notify/telegram.rs`) uses it. Implemented
/// by the Telegram client; tests use a fake.
pub(crate) trait Transport {
    /// Send one message (HTML, falling back to plain text if the HTML is refused), with a
    /// row of Approve / Always / Deny buttons per approval id and a Reset button per task id
    /// in `resets`. Returns the message id. The text is redacted: a message leaves the process.
    fn send(
        &self,
        chat_id: i64,
        html: &Redacted,
        approvals: &[i64],
        resets: &[String],
    ) -> Result<i64, SendError>;
}

/// One update from the Bot API: what it means (None for kinds heartbeat ignores) and the
/// offset that confirms it.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub next_offset: i32,
    pub read: Option<(Incoming, ChatSeen)>,
}

pub(crate) struct Telegram {
    bot: Bot,
    rt: tokio::runtime::Runtime,
    token: String,
}

impl fmt::Debug for Telegram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Telegram { token: *** }")
    }
}

/// A button press or a message, reduced to what heartbeat acts on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Incoming {
    Press {
        callback_id: String,
        chat_id: i64,
        message_id: Option<i64>,
        /// None for data heartbeat did not make.
        action: Option<Button>,
    },
    Command {
        chat_id: i64,
        command: String,
        arg: String,
    },
    Message {
        chat_id: i64,
    },
}

/// Who wrote: for `heartbeat telegram-chats`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChatSeen {
    pub chat_id: i64,
    pub kind: String,
    pub title: String,
}

/// The callback data of a button: `hb:<action>:<approval id>` (well under 64 bytes).
pub(crate) fn button_data(action: ButtonAction, approval: i64) -> String {
    format!("hb:{}:{approval}", action.as_str())
}

/// The callback data of a tripped task's Reset button: `hb:r:<task id>`.
pub(crate) fn reset_data(task_id: &str) -> String {
    format!("hb:r:{task_id}")
}

/// What a button of heartbeat's asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Button {
    /// Approve, always or deny, and the approval's id.
    Approval(ButtonAction, i64),
    /// Reset a tripped task (its id).
    Reset(String),
}

fn parse_button(data: &str) -> Option<Button> {
    let rest = data.strip_prefix("hb:")?;
    let (action, id) = rest.split_once(':')?;
    if action == "r" {
        let task = id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit());
        return task.then(|| Button::Reset(id.to_string()));
    }
    Some(Button::Approval(action.parse().ok()?, id.parse().ok()?))
}

/// Approve / Always / Deny, one row per approval; a Reset button per tripped task.
pub(crate) fn keyboard(approvals: &[i64], resets: &[String]) -> InlineKeyboardMarkup {
    let approve = approvals.iter().map(|&id| {
        vec![
            InlineKeyboardButton::callback(
                format!("Approve #{id}"),
                button_data(ButtonAction::Approve, id),
            ),
            InlineKeyboardButton::callback("Always", button_data(ButtonAction::Always, id)),
            InlineKeyboardButton::callback("Deny", button_data(ButtonAction::Deny, id)),
        ]
    });
    let reset = resets.iter().map(|id| {
        vec![InlineKeyboardButton::callback(
            format!("Reset {id}"),
            reset_data(id),
        )]
    });
    InlineKeyboardMarkup::new(approve.chain(reset))
}

impl Telegram {
    /// Build the client from the config; None when the token variable is unset or empty.
    /// With `bot_token_file`, the token is the file's (read once, when the config was
    /// loaded). `poll` is the longest long-poll this client will make.
    pub(crate) fn connect(
        cfg: &TelegramConfig,
        env: &dyn Fn(&str) -> Option<String>,
        poll: Duration,
    ) -> Result<Option<Telegram>, String> {
        let token = match &cfg.bot_token_file {
            Some(path) => Some(crate::redact::take_file(path)?),
            None => env(&cfg.bot_token_env),
        };
        let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        let token = token.trim().to_string();
        let url = reqwest::Url::parse(&cfg.api_url)
            .map_err(|e| format!("telegram.api_url {:?}: {e}", cfg.api_url))?;
        let mut client = teloxide::net::default_reqwest_settings()
            .connect_timeout(Duration::from_secs(5))
            .timeout(poll + SLACK);
        if crate::net::is_loopback(&url) {
            client = client.no_proxy();
        }
        let client = client
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        let bot = Bot::with_client(token.clone(), client).set_api_url(url);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the Telegram runtime: {e}"))?;
        Ok(Some(Telegram { bot, rt, token }))
    }

    /// `text` with the token replaced by `***`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        text.replace(&self.token, "***")
    }

    fn error(&self, e: &RequestError) -> String {
        self.scrub(&e.to_string())
    }

    /// Run one request on the runtime, giving up after `limit` (an `Io` timeout error).
    fn block<T>(
        &self,
        limit: Duration,
        req: impl std::future::IntoFuture<Output = Result<T, RequestError>>,
    ) -> Result<T, RequestError> {
        self.rt.block_on(async {
            match tokio::time::timeout(limit, req.into_future()).await {
                Ok(result) => result,
                Err(_) => Err(RequestError::Io(std::sync::Arc::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer from Telegram within {}s", limit.as_secs()),
                )))),
            }
        })
    }

    fn send_error(&self, e: &RequestError) -> SendError {
        match e {
            RequestError::Api(api) if never_succeeds(api) => SendError::Rejected(self.error(e)),
            // A group that became a supergroup: this chat id is gone (a 400).
            RequestError::MigrateToChatId(_) => SendError::Rejected(self.error(e)),
            RequestError::Api(_) => SendError::Refused(self.error(e)),
            RequestError::RetryAfter(wait) => SendError::RetryAfter(wait.duration(), self.error(e)),
            _ => SendError::Unavailable(self.error(e)),
        }
    }

    /// Send one message; Telegram's message id.
    pub(crate) fn send_message(
        &self,
        chat_id: i64,
        html: &Redacted,
        approvals: &[i64],
        resets: &[String],
    ) -> Result<i64, SendError> {
        // The last guard: whatever built the text, the token is not in it.
        let html = &self.scrub(html.as_str());
        let send = |html_mode: bool| {
            let text = if html_mode {
                html.to_string()
            } else {
                html_to_plain(html)
            };
            let mut req = self.bot.send_message(ChatId(chat_id), text);
            if html_mode {
                req = req.parse_mode(ParseMode::Html);
            }
            if !approvals.is_empty() || !resets.is_empty() {
                req = req.reply_markup(keyboard(approvals, resets));
            }
            self.block(REQUEST_LIMIT, req)
        };
        match send(true) {
            Ok(m) => Ok(i64::from(m.id.0)),
            // Telegram could not parse our HTML: the same content as plain text.
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => send(false)
                .map(|m| i64::from(m.id.0))
                .map_err(|e| self.send_error(&e)),
            Err(e) => Err(self.send_error(&e)),
        }
    }

    /// Replace a message's text and buttons.
    pub(crate) fn edit(
        &self,
        chat_id: i64,
        message_id: i64,
        html: &Redacted,
        approvals: &[i64],
    ) -> Result<(), String> {
        let html = &self.scrub(html.as_str());
        let id = MessageId(i32::try_from(message_id).map_err(|_| "bad message id".to_string())?);
        let edit = |html_mode: bool| {
            let text = if html_mode {
                html.to_string()
            } else {
                html_to_plain(html)
            };
            let mut req = self.bot.edit_message_text(ChatId(chat_id), id, text);
            if html_mode {
                req = req.parse_mode(ParseMode::Html);
            }
            req = req.reply_markup(keyboard(approvals, &[]));
            self.block(REQUEST_LIMIT, req)
        };
        match edit(true) {
            Ok(_) => Ok(()),
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                edit(false).map(drop).map_err(|e| self.error(&e))
            }
            Err(e) => Err(self.error(&e)),
        }
    }

    /// Answer a button press (Telegram shows `text` briefly).
    pub(crate) fn answer(&self, callback_id: &str, text: &Redacted) -> Result<(), String> {
        let req = self
            .bot
            .answer_callback_query(teloxide::types::CallbackQueryId(callback_id.to_string()))
            .text(self.scrub(text.as_str()));
        self.block(REQUEST_LIMIT, req)
            .map(drop)
            .map_err(|e| self.error(&e))
    }

    /// Updates after `offset` (exclusive of those already confirmed). `timeout` 0 returns at
    /// once (for `run --once`); the daemon long-polls.
    pub(crate) fn updates(
        &self,
        offset: Option<i32>,
        timeout: Duration,
    ) -> Result<Vec<Received>, PollError> {
        let mut req = self
            .bot
            .get_updates()
            .timeout(timeout.as_secs() as u32)
            .limit(100);
        if let Some(offset) = offset {
            req = req.offset(offset);
        }
        let updates = self
            .block(timeout + REQUEST_LIMIT, req)
            .map_err(|e| match e {
                RequestError::Api(ApiError::InvalidToken) => {
                    PollError::TokenRejected(self.error(&e))
                }
                _ => PollError::Failed(self.error(&e)),
            })?;
        Ok(updates
            .iter()
            .map(|u| Received {
                next_offset: u.id.0 as i32 + 1,
                read: read_update(u),
            })
            .collect())
    }
}

impl Transport for Telegram {
    fn send(
        &self,
        chat_id: i64,
        html: &Redacted,
        approvals: &[i64],
        resets: &[String],
    ) -> Result<i64, SendError> {
        self.send_message(chat_id, html, approvals, resets)
    }
}

/// What an update means to heartbeat, and who sent it. None for kinds it ignores.
fn read_update(u: &Update) -> Option<(Incoming, ChatSeen)> {
    match &u.kind {
        UpdateKind::CallbackQuery(q) => {
            let message = q.message.as_ref();
            let chat = message.map(|m| m.chat());
            // A press on a message we cannot see: fall back to the presser's own chat.
            let chat_id = chat.map_or(q.from.id.0 as i64, |c| c.id.0);
            let seen = ChatSeen {
                chat_id,
                kind: chat.map_or("private".into(), chat_kind),
                title: chat.map_or_else(|| user_title(&q.from), chat_title),
            };
            Some((
                Incoming::Press {
                    callback_id: q.id.0.clone(),
                    chat_id,
                    message_id: message.map(|m| i64::from(m.id().0)),
                    action: q.data.as_deref().and_then(parse_button),
                },
                seen,
            ))
        }
        UpdateKind::Message(m) | UpdateKind::EditedMessage(m) | UpdateKind::ChannelPost(m) => {
            let chat_id = m.chat.id.0;
            let seen = ChatSeen {
                chat_id,
                kind: chat_kind(&m.chat),
                title: chat_title(&m.chat),
            };
            let text = m.text().unwrap_or("").trim();
            let incoming = match text.strip_prefix('/') {
                Some(rest) => {
                    let (cmd, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    // `/status@my_bot` in groups.
                    let cmd = cmd.split('@').next().unwrap_or(cmd);
                    Incoming::Command {
                        chat_id,
                        command: cmd.to_ascii_lowercase(),
                        arg: arg.trim().to_string(),
                    }
                }
                None => Incoming::Message { chat_id },
            };
            Some((incoming, seen))
        }
        _ => None,
    }
}

fn chat_kind(c: &teloxide::types::Chat) -> String {
    if c.is_private() {
        "private"
    } else if c.is_channel() {
        "channel"
    } else if c.is_supergroup() {
        "supergroup"
    } else {
        "group"
    }
    .into()
}

fn chat_title(c: &teloxide::types::Chat) -> String {
    if let Some(t) = c.title() {
        return t.to_string();
    }
    let mut name = [c.first_name(), c.last_name()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(u) = c.username() {
        if !name.is_empty() {
            name.push(' ');
        }
        name.push_str(&format!("@{u}"));
    }
    name
}

fn user_title(u: &teloxide::types::User) -> String {
    match &u.username {
        Some(name) => format!("{} @{name}", u.first_name),
        None => u.first_name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_data_round_trips_and_stays_small() {
        for (&action, data) in ButtonAction::ALL.iter().zip(["hb:y:", "hb:a:", "hb:n:"]) {
            assert_eq!(button_data(action, 7), format!("{data}7"));
            let data = button_data(action, i64::MAX);
            assert!(data.len() < 64);
            assert_eq!(
                parse_button(&data),
                Some(Button::Approval(action, i64::MAX))
            );
        }
        let reset = reset_data("0123456789ab");
        assert!(reset.len() < 64);
        assert_eq!(
            parse_button(&reset),
            Some(Button::Reset("0123456789ab".into()))
        );
        assert_eq!(parse_button("hb:r:not-an-id"), None);
        assert_eq!(parse_button("hb:x:1"), None);
        assert_eq!(parse_button("other"), None);
        assert_eq!(parse_button("hb:y:abc"), None);
    }

    #[test]
    fn only_a_4xx_other_than_408_and_429_is_rejected_for_good() {
        let api = |text: &str| ApiError::Unknown(text.into());
        for final_answer in [
            ApiError::ChatNotFound,
            ApiError::BotBlocked,
            ApiError::InvalidToken,
            api("Bad Request: something new"),
            api("Forbidden: something new"),
        ] {
            assert!(never_succeeds(&final_answer), "{final_answer:?}");
        }
        for passing in [
            api("Too Many Requests: retry after 5"),
            api("Request Timeout"),
            api("Internal Server Error"),
            api("Bad Gateway"),
            api("something else"),
        ] {
            assert!(!never_succeeds(&passing), "{passing:?}");
        }
    }

    #[test]
    fn debug_and_errors_never_show_the_token() {
        let cfg = TelegramConfig {
            api_url: "http://127.0.0.1:9".into(),
            ..TelegramConfig::default()
        };
        let env = |_: &str| Some("123456:SECRET-token".to_string());
        let tg = Telegram::connect(&cfg, &env, Duration::from_secs(1))
            .unwrap()
            .unwrap();
        assert!(!format!("{tg:?}").contains("SECRET"));
        assert_eq!(
            tg.scrub("https://x/bot123456:SECRET-token/sendMessage"),
            "https://x/bot***/sendMessage"
        );
        // Port 9 on loopback refuses: the error names the URL, scrubbed.
        let err = tg.send_message(1, &"hi".into(), &[], &[]).unwrap_err();
        assert!(matches!(err, SendError::Unavailable(_)), "{err:?}");
        assert!(!err.message().contains("SECRET"), "{}", err.message());
        let none = |_: &str| None;
        assert!(
            Telegram::connect(&cfg, &none, Duration::from_secs(1))
                .unwrap()
                .is_none()
        );
    }
}
