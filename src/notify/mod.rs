//! Channels: where messages to people go (docs/reference.md#outbox). Every channel is one
//! implementation of [`Channel`], named by its [`kind`](Channel::kind); the outbox
//! (`engine/outbox.rs`) queues, sends, retries, drops and expires messages for all of them
//! alike, through the trait.
//!
//! Invariants:
//! - A channel only sends and classifies: what becomes of a message (kept for the next run,
//!   dropped `rejected`, dropped `expired`, held, folded, deduplicated) is decided once, in
//!   `engine/outbox.rs`, from the [`SendError`] the channel answers with.
//! - Every send gives up by its channel's own time limit (Telegram: `REQUEST_LIMIT`): a
//!   hung channel never blocks a run for long.
//! - What a channel is given is redacted ([`Redacted`]): a message leaves the process.

pub(crate) mod telegram;

use crate::schedule::Window;
use crate::text::Redacted;

/// Why a send did not go through: the one classification every channel answers with.
pub(crate) use crate::net::SendError;

/// One message as a channel is given it: the payload in the channel's own format (Telegram:
/// HTML), and the approvals and tripped tasks it may show buttons for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Message<'a> {
    pub payload: &'a Redacted,
    pub approvals: &'a [i64],
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

/// A place messages go. The outbox holds each message under the channel's [`kind`] and a
/// destination in the channel's own terms, and calls [`send`] with them.
///
/// [`kind`]: Channel::kind
/// [`send`]: Channel::send
pub(crate) trait Channel {
    /// Its kind's name, in its outbox rows and in its audit lines.
    fn kind(&self) -> &'static str;

    /// The destinations configured now, as the outbox stores them. A queued message to any
    /// other is dropped.
    fn destinations(&self) -> Vec<String>;

    /// Why a message to a destination no longer configured is dropped (an audit line).
    fn unconfigured(&self) -> &'static str;

    /// Quiet hours and the daily cap.
    fn rules(&self) -> Rules;

    /// Whether it can send at all now (a token is set, a client is built). When it cannot,
    /// every message waits in the outbox.
    fn connected(&self) -> bool;

    /// The longest payload one message may carry; a longer one is sent in parts, cut at
    /// lines by [`split`].
    ///
    /// [`split`]: Channel::split
    fn max_len(&self) -> usize;

    /// Cut a payload into parts of at most `limit` (in the channel's own measure), at lines.
    fn split(&self, payload: &Redacted, limit: usize) -> Vec<Redacted>;

    /// The payload of the line that heads `n` messages folded into one by the daily cap.
    fn folded_header(&self, n: usize) -> String;

    /// Whether a sent message with approval buttons is remembered (its destination as a
    /// Telegram chat id), so that a press can edit it later.
    fn keeps_button_messages(&self) -> bool {
        false
    }

    /// Send one message (one part) to `destination`; the channel's id for it (0 if it has
    /// none). Gives up by the channel's own time limit.
    fn send(&self, destination: &str, message: &Message) -> Result<i64, SendError>;
}
