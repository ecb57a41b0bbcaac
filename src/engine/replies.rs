//! Approvals answered on a channel's reply topic (docs/reference.md#approvals-by-ntfy):
//! every `run --once`, `heartbeat approve` and daemon tick reads what was posted there since
//! the last read and decides each valid reply as `heartbeat approve`/`deny` would.
//!
//! Invariants:
//! - A reply decides only through the [`Decider`] (only pending approvals, the decision
//!   stored and audited before anything runs, once whoever else decides), `by:
//!   ntfy:<channel>`; running is left to the caller, as for Telegram's buttons.
//! - A reply that decides nothing changes nothing else and is audited `channel_rejected`
//!   with the first reason that applies, in this order: `unknown` (not the `hb1` form),
//!   `bad_token`, `expired`, `replayed`, `decided`. A token that passed the first three is
//!   used, whatever follows.
//! - A token is used once whoever reads it (`channel_replies`): of two processes that read
//!   the same reply, one decides and the other finds it `replayed`. Where reading stopped
//!   is stored after each message (`meta`), so the next read starts after it.
//! - An unreachable server, an unset variable or an unusable key is a diagnostic, never an
//!   error: nothing is decided, and the next read tries again.

use super::decide::Decider;
use crate::audit::Event;
use crate::config::{ChannelConfig, ChannelKind, Config, NtfyConfig};
use crate::error::Result;
use crate::model::ApprovalState;
use crate::notify::hb1::{self, Decision};
use crate::notify::ntfy;

/// Why a reply decided nothing: the `reason` of `channel_rejected`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rejected {
    /// Not in the `hb1` form.
    Unknown,
    /// Not signed for this approval and this decision (or no such approval).
    BadToken,
    /// Its expiry passed, or the approval expired.
    Expired,
    /// This token was used already.
    Replayed,
    /// The approval was decided another way first.
    Decided,
}

impl Rejected {
    fn as_str(self) -> &'static str {
        match self {
            Rejected::Unknown => "unknown",
            Rejected::BadToken => "bad_token",
            Rejected::Expired => "expired",
            Rejected::Replayed => "replayed",
            Rejected::Decided => "decided",
        }
    }
}

/// The `meta` key of where reading a channel's reply topic stopped (ntfy's message id).
fn since_key(channel: &str) -> String {
    format!("reply_since.{channel}")
}

/// The channels whose replies decide approvals.
fn reply_channels(cfg: &Config) -> Vec<(&ChannelConfig, &NtfyConfig)> {
    cfg.channels
        .iter()
        .filter_map(|c| match &c.kind {
            ChannelKind::Ntfy(n) if n.approvals => Some((c, n)),
            _ => None,
        })
        .collect()
}

/// Whether any channel takes replies (the daemon then reads them at least every 30 s).
pub(crate) fn configured(cfg: &Config) -> bool {
    !reply_channels(cfg).is_empty()
}

/// Read every reply channel's new messages and decide each. The approvals approved here,
/// for a caller that runs them now.
pub(crate) fn read(d: &mut Decider, diag: &dyn Fn(String)) -> Result<Vec<i64>> {
    // Copies: deciding needs the decider, config and all.
    let channels: Vec<(ChannelConfig, NtfyConfig)> = reply_channels(&d.cfg)
        .into_iter()
        .map(|(c, n)| (c.clone(), n.clone()))
        .collect();
    let mut approved = Vec::new();
    for (channel, ntfy_cfg) in &channels {
        let name = channel.name.as_str();
        // In a fleet, one node at a time reads a reply topic.
        if !d.store.lease(&format!("ntfy:{name}"))? {
            continue;
        }
        let key_name = since_key(name);
        let since = d.store.meta(&key_name)?;
        let say = |what: String| {
            diag(
                d.audit
                    .secrets()
                    .redact(&format!("{name}: {what}; nothing decided from it"))
                    .into_string(),
            );
        };
        let received = match ntfy::poll(channel, ntfy_cfg, since.as_deref()) {
            Ok(received) => received,
            Err(e) => {
                say(format!("cannot read replies: {}", e.message()));
                continue;
            }
        };
        if received.is_empty() {
            continue;
        }
        let key = match hb1::install_key(&d.cfg.state_dir) {
            Ok(key) => key,
            Err(e) => {
                say(e);
                continue;
            }
        };
        for message in &received {
            match decide(d, name, &key, &message.text)? {
                Ok(Some(id)) => approved.push(id),
                Ok(None) => {}
                Err(why) => d.record(&Event::ChannelRejected {
                    channel: name,
                    reason: why.as_str(),
                })?,
            }
            d.store.set_meta(&key_name, &message.id)?;
        }
    }
    Ok(approved)
}

/// Decide one reply: the approval approved (Some) or denied (None), or why nothing was.
fn decide(
    d: &mut Decider,
    channel: &str,
    key: &[u8],
    text: &str,
) -> Result<std::result::Result<Option<i64>, Rejected>> {
    let Some(reply) = hb1::parse(text) else {
        return Ok(Err(Rejected::Unknown));
    };
    let Some(row) = d.store.approval(reply.approval_id)? else {
        return Ok(Err(Rejected::BadToken));
    };
    let expected = hb1::token(
        key,
        row.id,
        &row.task_id,
        &crate::markdown::parse::input_hash(&row.input),
        reply.decision,
        reply.expiry,
    );
    if !hb1::same_token(&expected, reply.token) {
        return Ok(Err(Rejected::BadToken));
    }
    if d.now.timestamp() >= reply.expiry || row.state == ApprovalState::Expired {
        return Ok(Err(Rejected::Expired));
    }
    if !d.store.use_reply_token(channel, reply.token, d.now)? {
        return Ok(Err(Rejected::Replayed));
    }
    if row.state != ApprovalState::Pending {
        return Ok(Err(Rejected::Decided));
    }
    let by = std::mem::replace(&mut d.by, format!("ntfy:{channel}"));
    let decided = match reply.decision {
        Decision::Approve => d.approve(&row, false),
        Decision::Deny => d.deny(&row, None),
    };
    d.by = by;
    Ok(match decided? {
        true => Ok((reply.decision == Decision::Approve).then_some(row.id)),
        false => Err(Rejected::Decided),
    })
}
