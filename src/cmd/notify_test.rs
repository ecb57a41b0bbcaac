//! `heartbeat notify-test [--channel NAME]`: a test message to every configured channel, or
//! to the one named, sent now (past the outbox): the way to check a channel's set-up.

use std::time::Duration;

use super::Ctx;
use crate::audit::Secrets;
use crate::engine::{outbox, session};
use crate::error::{Error, Result, exit};
use crate::model::MessageKind;
use crate::notify::{self, telegram::KIND as TELEGRAM};
use crate::render::telegram::Rendered;
use crate::telegram::Telegram;
use crate::text::clean;

pub(crate) fn notify_test(ctx: &Ctx, only: Option<&str>) -> Result<u8> {
    let cfg = ctx.load_config(&[])?;
    let secrets = Secrets::from_config(&cfg);
    let mut names: Vec<String> = cfg.channels.iter().map(|c| c.name.clone()).collect();
    if cfg.telegram.is_some() {
        names.insert(0, TELEGRAM.to_string());
    }
    if names.is_empty() {
        return Err(Error::Usage(
            "no channel is configured: add a [telegram] table or a [channels.NAME] table to \
             the config (see README, Channels)"
                .into(),
        ));
    }
    if let Some(name) = only
        && !names.iter().any(|n| n == name)
    {
        let mut why = format!("--channel {name:?}: no such channel");
        match crate::text::did_you_mean(name, &names) {
            Some(near) => why.push_str(&format!(" (did you mean {near:?}?)")),
            None => why.push_str(&format!(" (configured: {})", names.join(", "))),
        }
        return Err(Error::Usage(why));
    }
    let wanted = |name: &str| only.is_none_or(|o| o == name);
    let telegram = match &cfg.telegram {
        Some(tc) if wanted(TELEGRAM) => {
            if tc.chat_ids.is_empty() {
                return Err(Error::Usage(
                    "telegram.chat_ids is empty: `heartbeat telegram-chats` lists the chats \
                     that wrote to the bot"
                        .into(),
                ));
            }
            let env = |name: &str| crate::redact::take_env(name);
            match Telegram::connect(tc, &env, Duration::from_secs(5)) {
                Ok(Some(tg)) => Some(tg),
                Ok(None) => {
                    return Err(Error::Usage(format!(
                        "telegram: ${} is not set; put the bot token from @BotFather in it",
                        tc.bot_token_env
                    )));
                }
                Err(e) => return Err(Error::Usage(format!("telegram: {e}"))),
            }
        }
        _ => None,
    };
    let mut audit = session::open_audit(&cfg, &secrets)?;
    let host = session::hostname();
    let mut msg = Rendered::new(
        MessageKind::Test,
        format!("test message from {host}"),
        format!(
            "<b>heartbeat</b>: test message from {} ✅",
            crate::text::escape(&host)
        ),
    );
    msg.data = serde_json::json!({ "host": host });
    let transport = telegram
        .as_ref()
        .map(|t| t as &dyn crate::telegram::Transport);
    let mut out = ctx.out();
    let mut code = exit::OK;
    for channel in notify::open(&cfg, transport) {
        if !wanted(channel.name()) {
            continue;
        }
        for (notice, result) in outbox::send_now(&*channel, &msg, ctx.now, &secrets) {
            audit
                .record(ctx.clock.now(), &notice.event(None))
                .map_err(|e| Error::io(audit.path(), e))?;
            let to = if channel.name() == TELEGRAM {
                format!("chat {}", notice.destination)
            } else {
                format!("{} ({})", channel.name(), channel.kind())
            };
            match result {
                Ok(id) if channel.name() == TELEGRAM => {
                    out.line(&format!("sent to {to} (message {id})"))
                }
                Ok(_) => out.line(&format!("sent to {to}")),
                Err(e) => {
                    code = exit::TASK_FAILED;
                    let why = secrets.redact(e.message());
                    out.line(&format!("FAILED for {to}: {}", clean(why.as_str())));
                }
            }
        }
    }
    audit.sync().map_err(|e| Error::io(audit.path(), e))?;
    Ok(code)
}
