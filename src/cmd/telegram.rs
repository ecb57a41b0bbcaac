//! `heartbeat telegram-chats`: finding the chat ids for `[telegram] chat_ids`.

use std::time::Duration;

use serde_json::{Value, json};

use super::Ctx;
use crate::audit::{AuditLog, Secrets};
use crate::cli::JsonArg;
use crate::config::{Config, TelegramConfig};
use crate::engine::session;
use crate::error::{Error, Result, exit};
use crate::telegram::{PollError, Telegram};
use crate::text::clean;

/// Config, Telegram client and audit log, or a usage error saying what is missing.
fn setup(ctx: &Ctx) -> Result<(Config, TelegramConfig, Telegram, AuditLog)> {
    let cfg = ctx.load_config(&[])?;
    let Some(tc) = cfg.telegram.clone() else {
        return Err(Error::Usage(
            "telegram is not configured: add a [telegram] table to the config (see README)".into(),
        ));
    };
    let secrets = Secrets::from_config(&cfg);
    let env = |name: &str| crate::redact::take_env(name);
    let tg = match Telegram::connect(&tc, &env, Duration::from_secs(5)) {
        Ok(Some(tg)) => tg,
        Ok(None) => {
            return Err(Error::Usage(format!(
                "telegram: ${} is not set; put the bot token from @BotFather in it",
                tc.bot_token_env
            )));
        }
        Err(e) => return Err(Error::Usage(format!("telegram: {e}"))),
    };
    let audit = session::open_audit(&cfg, &secrets)?;
    Ok((cfg, tc, tg, audit))
}

pub(crate) fn chats(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let (cfg, tc, tg, _) = setup(ctx)?;
    crate::engine::files::ensure_state_dir(&cfg.state_dir)?;
    let mut store = crate::store::open(&cfg)?;
    // Look without confirming anything: the updates stay for the next run or the daemon.
    let offset = store
        .meta("telegram_offset")?
        .and_then(|v| v.parse::<i32>().ok());
    let mut note = None;
    match tg.updates(offset, Duration::ZERO) {
        Ok(updates) => {
            for u in &updates {
                if let Some((_, seen)) = &u.read {
                    let title = crate::audit::Secrets::taken().redact(&seen.title);
                    store.saw_chat(seen.chat_id, &seen.kind, &title, ctx.now)?;
                }
            }
        }
        // A wrong token is not "no chats yet": nothing works until it is fixed.
        Err(PollError::TokenRejected(why)) => {
            return Err(Error::Usage(format!(
                "telegram: Telegram rejected the bot token in {} ({}); put the token \
                 @BotFather gave you in it",
                tc.token_origin(),
                clean(&why)
            )));
        }
        Err(e) => note = Some(e.to_string()),
    }
    let chats = store.chats()?;
    let mut out = ctx.out();
    if args.json {
        let list: Vec<Value> = chats
            .iter()
            .map(|(id, kind, title, seen)| {
                json!({
                    "chat_id": id,
                    "kind": kind,
                    "title": title,
                    "last_seen": seen,
                    "allowed": tc.chat_ids.contains(id),
                })
            })
            .collect();
        out.json(&Value::Array(list));
    } else if chats.is_empty() {
        out.line("no chats yet: send your bot a message (e.g. /start), then run this again");
    } else {
        for (id, kind, title, seen) in &chats {
            let allowed = if tc.chat_ids.contains(id) {
                "in chat_ids"
            } else {
                "not in chat_ids"
            };
            out.line(&format!(
                "{id:>15}  {kind:<10} {:<30} last seen {seen}  ({allowed})",
                clean(title)
            ));
        }
    }
    if let Some(e) = note {
        crate::error::say(&format!("heartbeat: warning: telegram: {}", clean(&e)));
    }
    Ok(exit::OK)
}
