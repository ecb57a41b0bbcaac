//! Every audit event, as one typed enum: the table of docs/reference.md#audit-events in Rust.
//!
//! Invariants:
//! - Serialised by serde alone (`#[serde(tag = "event")]`): the variant's snake_case name is
//!   the `event` word, and its fields follow in declaration order, which is the documented order.
//! - Events that belong to a run carry `run_id` as their first field, so that it lands third
//!   in the line, after `ts` and `event` (which [`super::AuditLog`] puts first). Events that
//!   are sometimes written outside a run hold it as an `Option` that is left out when absent.
//! - Keys added later (`holder_pid`, a task's `summary` and `stderr`, …) come after the
//!   original keys, as typed fields too.
//! - Values are borrowed: an event is built where it happens and written at once.
//! - Free text (a tool's output and errors, a task's text, an error message, a reason) is
//!   [`Redacted`], and a task's input [`RedactedJson`]: it went through the redaction step
//!   before anything cut it. A reason that is one of heartbeat's fixed words is
//!   `&'static str`; other `&str` fields hold ids, names, modes, sections and times.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::model::{RunSkipReason, Trigger, UnknownWord};
use crate::text::{Redacted, RedactedJson};
use serde::{Serialize, Serializer};

/// Declares [`Event`] and, from the same list of variants, [`EventKind`] (one variant each,
/// without the fields) and [`Event::kind`]: a new event is known to `log --event` the moment
/// it exists, and [`EventKind::as_str`] and `heartbeat log`'s human lines
/// (`render/log.rs`) do not compile until they say how it is written and shown.
macro_rules! events {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident<$lt:lifetime> {
            $( $(#[$vmeta:meta])* $variant:ident $fields:tt ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name<$lt> {
            $( $(#[$vmeta])* $variant $fields ),*
        }

        /// Which event an [`Event`] is, without its fields: what `log --event` names and what
        /// `heartbeat log` matches on to describe a line.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum EventKind {
            $( $variant ),*
        }

        impl EventKind {
            /// Every event, in the order of [`Event`].
            $vis const ALL: &'static [EventKind] = &[$(EventKind::$variant),*];

            /// Every variant's name as written in Rust (`RunStarted`), parallel to `ALL`.
            #[cfg(test)]
            const VARIANTS: &'static [&'static str] = &[$(stringify!($variant)),*];
        }

        impl $name<'_> {
            #[cfg(test)]
            $vis fn kind(&self) -> EventKind {
                match self {
                    $( $name::$variant { .. } => EventKind::$variant ),*
                }
            }
        }
    };
}

events! {
/// One audit event. See docs/reference.md#audit-events for what each means.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event<'a> {
    RunStarted {
        run_id: &'a str,
        mode: &'a str,
        #[serde(serialize_with = "paths")]
        files: &'a [&'a Path],
        autonomy: &'a str,
        host: String,
        pid: u32,
        version: &'static str,
        /// Whole seconds since the previous run in this state dir began; None for the first.
        since_last_run_s: Option<i64>,
        trigger: Trigger,
    },
    RunSkipped {
        run_id: &'a str,
        reason: RunSkipReason,
        #[serde(skip_serializing_if = "Option::is_none")]
        next_active: Option<Option<String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        until: Option<Option<&'a str>>,
        /// Who paused (a skip for a pause).
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        holder_pid: Option<Option<u32>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        holder_since: Option<Option<String>>,
    },
    RunFinished {
        run_id: &'a str,
        succeeded: usize,
        failed: usize,
        queued: usize,
        skipped: usize,
        invalid: usize,
        duration_ms: u64,
    },
    TaskInvalid {
        run_id: &'a str,
        #[serde(serialize_with = "path")]
        file: &'a Path,
        line: usize,
        column: usize,
        error: &'a Redacted,
        task_id: &'a str,
        tool: Option<&'a str>,
    },
    TaskSucceeded(TaskRun<'a>),
    TaskFailed(TaskRun<'a>),
    TaskReminded {
        run_id: &'a str,
        task_id: &'a str,
        #[serde(serialize_with = "path")]
        file: &'a Path,
        line: usize,
        text: &'a Redacted,
    },
    /// An agent appended a task through `heartbeat mcp` (docs/reference.md#heartbeat-mcp).
    TaskProposed {
        task_id: &'a str,
        #[serde(serialize_with = "path")]
        file: &'a Path,
        line: usize,
        section: &'a str,
        text: &'a Redacted,
        by: &'a str,
    },
    /// `propose_task` wrote nothing: `reason` is a fixed word (secret, character, markup,
    /// too_long, file_full, rate_limit, duplicate, invalid, error).
    ProposalRefused {
        by: &'a str,
        reason: &'static str,
    },
    /// A slot of a calendar schedule passed its deadline without the task running
    /// (docs/reference.md#missed-slots).
    TaskMissed {
        run_id: &'a str,
        task_id: &'a str,
        #[serde(serialize_with = "path")]
        file: &'a Path,
        line: usize,
        slot: String,
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        count: Option<usize>,
    },
    TaskSkipped {
        run_id: &'a str,
        task_id: &'a str,
        reason: &'static str,
        tool: Option<&'a str>,
    },
    TaskTripped {
        run_id: &'a str,
        task_id: &'a str,
        failures: u32,
        tool: &'a str,
        #[serde(serialize_with = "path")]
        file: &'a Path,
        line: usize,
    },
    /// A failed run tried again at `at`: said instead of `task_failed`
    /// (docs/reference.md#retries).
    TaskRetryScheduled {
        run_id: &'a str,
        task_id: &'a str,
        /// The number of the attempt that failed, from 1.
        attempt: u32,
        at: String,
        error: Option<&'a Redacted>,
    },
    TaskMarkedDone(Mark<'a>),
    TaskMarkSkipped(Mark<'a>),
    ApprovalRequested {
        run_id: &'a str,
        approval_id: i64,
        task_id: &'a str,
        tool: &'a str,
        input: &'a RedactedJson,
        #[serde(serialize_with = "path")]
        file: &'a Path,
        line: usize,
    },
    ApprovalApproved(Decided<'a>),
    ApprovalDenied(Decided<'a>),
    ApprovalExpired(Ended<'a>),
    ApprovalStale(Ended<'a>),
    NotificationSent(Notified<'a>),
    NotificationFailed(Notified<'a>),
    NotificationHeld(Withheld<'a>),
    NotificationFolded(Withheld<'a>),
    NotificationDropped(Withheld<'a>),
    StatePruned {
        run_id: &'a str,
        rows: u64,
    },
    AuditRotated {
        #[serde(serialize_with = "path")]
        file: &'a Path,
        bytes: u64,
    },
    BudgetExhausted {
        run_id: &'a str,
        spent_usd: f64,
        daily_usd: f64,
    },
    Paused(Pause<'a>),
    Resumed(Pause<'a>),
    DaemonStarted(Daemon<'a>),
    DaemonStopped(Daemon<'a>),
    ConfigReloaded(Daemon<'a>),
    /// A daemon tick that could not read its config or its files (once per distinct error).
    TickFailed {
        error: &'a Redacted,
    },
    TelegramRejected {
        chat_id: i64,
        kind: &'a str,
    },
    /// A reply on a channel's reply topic that decided nothing, and why (`unknown`,
    /// `bad_token`, `expired`, `replayed`, `decided`).
    ChannelRejected {
        channel: &'a str,
        reason: &'a str,
    },
    /// A dead-man ping that did not go through (docs/reference.md#monitors).
    MonitorPingFailed {
        #[serde(skip_serializing_if = "Option::is_none")]
        run_id: Option<&'a str>,
        monitor: &'a str,
        error: &'a Redacted,
    },
    /// Written by `heartbeat revoke`.
    GrantRevoked {
        task_id: &'a str,
        by: &'a str,
    },
    /// Written by `heartbeat reset` (and the Reset button).
    TaskReset {
        task_id: &'a str,
        failures: u32,
        tripped: bool,
        /// A one-time task held after an interrupted run, released.
        interrupted: bool,
        by: &'a str,
    },
    TaskSnoozed(Snooze<'a>),
    TaskUnsnoozed(Snooze<'a>),
    /// Written by `heartbeat fleet forget` (docs/fleet.md#one-name-one-node).
    NodeForgotten {
        #[serde(rename = "node")]
        node_name: &'a str,
        by: &'a str,
    },
}
}

impl EventKind {
    /// The `event` word of its lines: serde's snake_case of the variant's name (a unit test
    /// holds the two together).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStarted => "run_started",
            EventKind::RunSkipped => "run_skipped",
            EventKind::RunFinished => "run_finished",
            EventKind::TaskInvalid => "task_invalid",
            EventKind::TaskSucceeded => "task_succeeded",
            EventKind::TaskFailed => "task_failed",
            EventKind::TaskReminded => "task_reminded",
            EventKind::TaskProposed => "task_proposed",
            EventKind::ProposalRefused => "proposal_refused",
            EventKind::TaskMissed => "task_missed",
            EventKind::TaskSkipped => "task_skipped",
            EventKind::TaskTripped => "task_tripped",
            EventKind::TaskRetryScheduled => "task_retry_scheduled",
            EventKind::TaskMarkedDone => "task_marked_done",
            EventKind::TaskMarkSkipped => "task_mark_skipped",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::ApprovalApproved => "approval_approved",
            EventKind::ApprovalDenied => "approval_denied",
            EventKind::ApprovalExpired => "approval_expired",
            EventKind::ApprovalStale => "approval_stale",
            EventKind::NotificationSent => "notification_sent",
            EventKind::NotificationFailed => "notification_failed",
            EventKind::NotificationHeld => "notification_held",
            EventKind::NotificationFolded => "notification_folded",
            EventKind::NotificationDropped => "notification_dropped",
            EventKind::StatePruned => "state_pruned",
            EventKind::AuditRotated => "audit_rotated",
            EventKind::BudgetExhausted => "budget_exhausted",
            EventKind::Paused => "paused",
            EventKind::Resumed => "resumed",
            EventKind::DaemonStarted => "daemon_started",
            EventKind::DaemonStopped => "daemon_stopped",
            EventKind::ConfigReloaded => "config_reloaded",
            EventKind::TickFailed => "tick_failed",
            EventKind::TelegramRejected => "telegram_rejected",
            EventKind::ChannelRejected => "channel_rejected",
            EventKind::MonitorPingFailed => "monitor_ping_failed",
            EventKind::GrantRevoked => "grant_revoked",
            EventKind::TaskReset => "task_reset",
            EventKind::TaskSnoozed => "task_snoozed",
            EventKind::TaskUnsnoozed => "task_unsnoozed",
            EventKind::NodeForgotten => "node_forgotten",
        }
    }

    /// Every `event` word heartbeat writes, in the order of [`Event`].
    pub(crate) fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.iter().map(|k| k.as_str())
    }
}

impl FromStr for EventKind {
    type Err = UnknownWord;

    fn from_str(word: &str) -> Result<Self, UnknownWord> {
        EventKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == word)
            .ok_or_else(|| UnknownWord {
                what: "event",
                word: word.to_string(),
            })
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// `task_succeeded` / `task_failed`.
#[derive(Debug, Serialize)]
pub(crate) struct TaskRun<'a> {
    pub run_id: &'a str,
    pub task_id: &'a str,
    #[serde(serialize_with = "path")]
    pub file: &'a Path,
    pub line: i64,
    pub section: &'a str,
    pub tool: &'a str,
    pub input: &'a RedactedJson,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub output: Option<&'a Redacted>,
    pub error: Option<&'a Redacted>,
    pub cost_usd: Option<f64>,
    pub approval_id: Option<i64>,
    /// A fixed word when the failure has a kind: `interrupted` (the run died mid-task).
    pub reason: Option<&'static str>,
    pub trigger: Trigger,
    /// What the tool said about itself in one line (`summary` in its JSON output).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<&'a Redacted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<&'a Redacted>,
}

/// `task_marked_done` / `task_mark_skipped`.
#[derive(Debug, Serialize)]
pub(crate) struct Mark<'a> {
    pub run_id: &'a str,
    pub task_id: &'a str,
    #[serde(serialize_with = "path")]
    pub file: &'a Path,
    pub line: Option<usize>,
    pub reason: Option<&'a Redacted>,
}

/// `approval_approved` / `approval_denied`: written by whoever decided, outside any run.
#[derive(Debug, Serialize)]
pub(crate) struct Decided<'a> {
    pub approval_id: i64,
    pub task_id: &'a str,
    pub by: &'a str,
    pub always: bool,
    pub reason: Option<&'a Redacted>,
}

/// `approval_expired` / `approval_stale`.
#[derive(Debug, Serialize)]
pub(crate) struct Ended<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<&'a str>,
    pub approval_id: i64,
    pub task_id: &'a str,
    pub reason: &'a Redacted,
}

/// `notification_sent` / `notification_failed`.
#[derive(Debug, Serialize)]
pub(crate) struct Notified<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<&'a str>,
    pub channel: &'a str,
    /// A Telegram message's chat; other channels have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<i64>,
    pub kind: &'a str,
    pub error: Option<&'a Redacted>,
    pub queued: bool,
}

/// `notification_held` / `notification_folded` / `notification_dropped`.
#[derive(Debug, Serialize)]
pub(crate) struct Withheld<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<&'a str>,
    pub channel: &'a str,
    /// A Telegram message's chat; other channels have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<i64>,
    pub kind: &'a str,
    pub reason: &'static str,
}

/// `paused` / `resumed`.
#[derive(Debug, Serialize)]
pub(crate) struct Pause<'a> {
    pub until: Option<&'a str>,
    pub reason: Option<&'a Redacted>,
    pub by: &'a str,
}

/// `task_snoozed` / `task_unsnoozed` (docs/reference.md#snooze): `until` is the snooze's
/// end (for `task_unsnoozed`, the end it had).
#[derive(Debug, Serialize)]
pub(crate) struct Snooze<'a> {
    pub task_id: &'a str,
    pub file: &'a str,
    pub line: i64,
    pub by: &'a str,
    pub until: &'a str,
    pub reason: Option<&'a Redacted>,
}

/// `daemon_started` / `daemon_stopped` / `config_reloaded`.
#[derive(Debug, Serialize)]
pub(crate) struct Daemon<'a> {
    pub signal: Option<&'a str>,
    pub error: Option<&'a Redacted>,
    /// `daemon_started` only: which process, which build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'static str>,
}

impl<'a> Daemon<'a> {
    pub(crate) fn new(signal: Option<&'a str>, error: Option<&'a Redacted>) -> Daemon<'a> {
        Daemon {
            signal,
            error,
            pid: None,
            version: None,
        }
    }

    /// `daemon_started`: which process, which build.
    pub(crate) fn started() -> Daemon<'a> {
        Daemon {
            pid: Some(std::process::id()),
            version: Some(env!("CARGO_PKG_VERSION")),
            ..Daemon::new(None, None)
        }
    }
}

/// A path as text, even when it is not UTF-8 (serde refuses those).
fn path<S: Serializer>(p: &&Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

fn paths<S: Serializer>(ps: &&[&Path], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ps.iter().map(|p| p.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event the audit log documents: `log --event` knows no other.
    const TABLE: &[&str] = &[
        "run_started",
        "run_skipped",
        "run_finished",
        "task_invalid",
        "task_succeeded",
        "task_failed",
        "task_reminded",
        "task_skipped",
        "task_missed",
        "task_retry_scheduled",
        "task_proposed",
        "task_snoozed",
        "task_unsnoozed",
        "proposal_refused",
        "task_reset",
        "grant_revoked",
        "node_forgotten",
        "task_tripped",
        "task_marked_done",
        "task_mark_skipped",
        "approval_requested",
        "approval_approved",
        "approval_denied",
        "approval_expired",
        "approval_stale",
        "notification_sent",
        "notification_failed",
        "notification_held",
        "notification_folded",
        "notification_dropped",
        "state_pruned",
        "audit_rotated",
        "budget_exhausted",
        "paused",
        "resumed",
        "daemon_started",
        "daemon_stopped",
        "config_reloaded",
        "tick_failed",
        "telegram_rejected",
        "channel_rejected",
        "monitor_ping_failed",
    ];

    #[test]
    fn names_are_the_words_serde_writes() {
        let withheld = |_| Withheld {
            run_id: None,
            channel: "telegram",
            chat_id: Some(1),
            kind: "summary",
            reason: "quiet_hours",
        };
        let events = [
            Event::StatePruned {
                run_id: "r1",
                rows: 0,
            },
            Event::AuditRotated {
                file: Path::new("a"),
                bytes: 1,
            },
            Event::NotificationHeld(withheld(())),
            Event::NotificationFolded(withheld(())),
            Event::NotificationDropped(withheld(())),
            Event::TelegramRejected {
                chat_id: 1,
                kind: "button",
            },
            Event::ChannelRejected {
                channel: "phone",
                reason: "bad_token",
            },
        ];
        for event in &events {
            let v = serde_json::to_value(event).unwrap();
            assert_eq!(v["event"], event.kind().as_str());
        }
        let names: Vec<&str> = EventKind::names().collect();
        for name in &names {
            assert!(TABLE.contains(name), "{name} is not in the table");
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    /// `RunStarted` → `run_started`: serde's `rename_all = "snake_case"` for a variant name.
    fn snake_case(name: &str) -> String {
        let mut out = String::with_capacity(name.len() + 4);
        for (i, c) in name.char_indices() {
            if c.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    }

    #[test]
    fn each_kind_is_spelled_as_serde_spells_its_variant_and_reads_back() {
        assert_eq!(EventKind::ALL.len(), EventKind::VARIANTS.len());
        for (&kind, variant) in EventKind::ALL.iter().zip(EventKind::VARIANTS) {
            assert_eq!(kind.as_str(), snake_case(variant), "{kind:?}");
            assert_eq!(format!("{kind:?}"), *variant);
            assert_eq!(kind.as_str().parse::<EventKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert_eq!(snake_case("TaskMarkSkipped"), "task_mark_skipped");
    }

    #[test]
    fn an_event_heartbeat_does_not_write_is_an_error_that_names_it() {
        for word in ["task_mised", "RunStarted", "run_started ", ""] {
            let err = word.parse::<EventKind>().unwrap_err();
            assert_eq!(err.word, word);
            assert_eq!(err.to_string(), format!("unknown event {word:?}"));
        }
    }
}
