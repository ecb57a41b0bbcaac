//! Closed sets of words that heartbeat stores and sends: an approval's state, why a run was
//! skipped, why a message waits in the outbox, the action of an approval's Telegram button.
//! Each is an enum whose spelling is written once, in `words!`, and read back through
//! `FromStr`: a word outside the set is an [`UnknownWord`] naming it, never a silent default.
//! SQLite reads and writes them in `store/words.rs`.
//!
//! Invariants:
//! - `as_str`, `Display` and `Serialize` all write the same word, the one SQLite, the audit
//!   log, JSON output and callback data hold (docs/reference.md#approvals); the tests below
//!   pin each spelling, as bytes on disk must not change.
//! - `ALL` lists every variant, so that a test, a help text or a did-you-mean can walk them.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// A word read from SQLite, callback data or input that names no value of its set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnknownWord {
    /// What the word should have named (`approval state`).
    pub what: &'static str,
    pub word: String,
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:?}", self.what, self.word)
    }
}

impl std::error::Error for UnknownWord {}

/// Declares a closed enum of words: the enum, `ALL`, `as_str`, `FromStr`, `Display` (which
/// honours width, for tables) and `Serialize` (as the word).
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),*
        }

        impl $name {
            /// Every value, in declaration order.
            #[cfg(test)]
            $vis const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The word as stored and sent.
            $vis fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word ),*
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;

            fn from_str(word: &str) -> Result<Self, UnknownWord> {
                match word {
                    $( $word => Ok($name::$variant), )*
                    _ => Err(UnknownWord {
                        what: $what,
                        word: word.to_string(),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

words! {
    /// Where an approval is (docs/reference.md#approvals): `pending` → `approved` → `running`
    /// → `succeeded` | `failed`; `pending` → `denied` | `expired`; `approved` → `stale`.
    /// The `state` column of `approvals` and the `state` of `approvals --json`.
    pub(crate) enum ApprovalState("approval state") {
        Pending = "pending",
        Approved = "approved",
        Running = "running",
        /// Its run failed and is tried again (docs/reference.md#retries): only the retry
        /// claims it back to `running`.
        Retrying = "retrying",
        Succeeded = "succeeded",
        Failed = "failed",
        Denied = "denied",
        Expired = "expired",
        Stale = "stale",
    }
}

words! {
    /// Why a run did not run its tasks: the `reason` of `run_skipped` and the `skipped` of
    /// `run --once --json` (docs/reference.md#audit-events).
    pub(crate) enum RunSkipReason("run skip reason") {
        /// Another run holds the run lock.
        Locked = "locked",
        /// A pause is in force (and the run was not forced).
        Paused = "paused",
        /// Outside active hours (and not forced).
        OutsideActiveHours = "outside_active_hours",
        /// In a fleet, PostgreSQL cannot be reached: nothing runs (docs/fleet.md#fail-closed).
        StoreUnavailable = "store_unavailable",
    }
}

words! {
    /// Why a message waits in the outbox (docs/reference.md#outbox): the `held` column, which
    /// remembers the rule it was last audited under, and the `reason` of `notification_held`.
    pub(crate) enum HoldReason("hold reason") {
        /// Quiet hours: only urgent messages and replies are sent.
        QuietHours = "quiet_hours",
        /// No messages left for the day, and no urgent message to ride along with.
        DailyCap = "daily_cap",
    }
}

words! {
    /// What an approval's Telegram button asks for: the `<action>` of its callback data
    /// `hb:<action>:<approval id>` (docs/reference.md#telegram-buttons-and-commands). A
    /// tripped task's Reset button (`hb:r:<task id>`) names a task, not an approval, and is
    /// not one of these.
    pub(crate) enum ButtonAction("button action") {
        Approve = "y",
        Always = "a",
        Deny = "n",
    }
}

words! {
    /// What a message to a person is about (docs/reference.md#channels): the `kind` of an
    /// outbox row and of `notification_*` lines, and the names a channel's `events` list.
    pub(crate) enum MessageKind("message kind") {
        /// An approval queued, or what became of it.
        Approval = "approval",
        /// A plain task due.
        Reminder = "reminder",
        /// A task failed or is invalid; a daemon tick that could not run.
        Failure = "failure",
        /// A task stopped by its failure breaker.
        Trip = "trip",
        /// Slots that passed without a run.
        Missed = "missed",
        /// An explicit `@notify`.
        Notify = "notify",
        /// The daily budget used up.
        Budget = "budget",
        /// An agent's pause, resume, deny or approval.
        Agent = "agent",
        /// The summary of a run.
        Summary = "summary",
        /// `heartbeat notify-test`.
        Test = "test",
        /// A Telegram bot's answer to a command (never chosen in `events`).
        Reply = "reply",
    }
}

impl MessageKind {
    /// A channel's `events` when it has none: all but `summary` and `test` (a test is always
    /// delivered).
    pub(crate) const DEFAULT: [MessageKind; 8] = [
        MessageKind::Approval,
        MessageKind::Reminder,
        MessageKind::Failure,
        MessageKind::Trip,
        MessageKind::Missed,
        MessageKind::Notify,
        MessageKind::Budget,
        MessageKind::Agent,
    ];

    /// Sent in quiet hours too.
    pub(crate) fn urgent(self) -> bool {
        matches!(
            self,
            MessageKind::Failure
                | MessageKind::Trip
                | MessageKind::Missed
                | MessageKind::Budget
                | MessageKind::Agent
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value's word, spelled out once more: what SQLite and JSON hold.
    fn pinned<T: Copy + PartialEq + fmt::Debug + fmt::Display + Serialize + FromStr>(
        table: &[(T, &str)],
        all: &[T],
    ) where
        T::Err: fmt::Debug,
    {
        assert_eq!(table.iter().map(|(v, _)| *v).collect::<Vec<_>>(), all);
        for &(value, word) in table {
            assert_eq!(value.to_string(), word);
            assert_eq!(serde_json::to_value(value).unwrap(), word);
            assert_eq!(word.parse::<T>().unwrap(), value, "{word}");
        }
    }

    #[test]
    fn approval_states_keep_their_words() {
        use ApprovalState::*;
        pinned(
            &[
                (Pending, "pending"),
                (Approved, "approved"),
                (Running, "running"),
                (Retrying, "retrying"),
                (Succeeded, "succeeded"),
                (Failed, "failed"),
                (Denied, "denied"),
                (Expired, "expired"),
                (Stale, "stale"),
            ],
            ApprovalState::ALL,
        );
        assert_eq!(Pending.as_str(), "pending");
    }

    #[test]
    fn run_skip_reasons_keep_their_words() {
        use RunSkipReason::*;
        pinned(
            &[
                (Locked, "locked"),
                (Paused, "paused"),
                (OutsideActiveHours, "outside_active_hours"),
                (StoreUnavailable, "store_unavailable"),
            ],
            RunSkipReason::ALL,
        );
    }

    #[test]
    fn message_kinds_keep_their_words() {
        use MessageKind::*;
        pinned(
            &[
                (Approval, "approval"),
                (Reminder, "reminder"),
                (Failure, "failure"),
                (Trip, "trip"),
                (Missed, "missed"),
                (Notify, "notify"),
                (Budget, "budget"),
                (Agent, "agent"),
                (Summary, "summary"),
                (Test, "test"),
                (Reply, "reply"),
            ],
            MessageKind::ALL,
        );
        assert!(!MessageKind::DEFAULT.contains(&Summary) && !MessageKind::DEFAULT.contains(&Test));
    }

    #[test]
    fn hold_reasons_keep_their_words() {
        use HoldReason::*;
        pinned(
            &[(QuietHours, "quiet_hours"), (DailyCap, "daily_cap")],
            HoldReason::ALL,
        );
    }

    #[test]
    fn button_actions_keep_their_words() {
        use ButtonAction::*;
        pinned(
            &[(Approve, "y"), (Always, "a"), (Deny, "n")],
            ButtonAction::ALL,
        );
        let err = "r".parse::<ButtonAction>().unwrap_err();
        assert_eq!(err.to_string(), r#"unknown button action "r""#);
    }

    #[test]
    fn an_unknown_word_is_an_error_that_names_it() {
        let err = "Pending".parse::<ApprovalState>().unwrap_err();
        assert_eq!(
            err,
            UnknownWord {
                what: "approval state",
                word: "Pending".into()
            }
        );
        assert_eq!(err.to_string(), r#"unknown approval state "Pending""#);
        assert!("".parse::<ApprovalState>().is_err());
    }

    #[test]
    fn display_pads_like_a_str() {
        assert_eq!(format!("{:<9}|", ApprovalState::Stale), "stale    |");
    }
}
