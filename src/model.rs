//! Domain types shared by the parser, the planner and the commands.
//!
//! Nothing here does I/O. A `Task` is what the parser found in one HEARTBEAT.md; whether it
//! runs is decided later by `plan`, which also knows the configured tools.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{NaiveDateTime, NaiveTime, Weekday};
use serde::Serialize;
use serde_json::{Map, Value};

mod words;
pub(crate) use words::{
    ApprovalState, ButtonAction, HoldReason, MessageKind, RunSkipReason, UnknownWord,
};

/// The level-2 section a task sits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Recurring,
    OneTime,
    Other,
}

impl Section {
    /// The spelling used in JSON, the audit log and SQLite.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Recurring => "recurring",
            Section::OneTime => "one_time",
            Section::Other => "other",
        }
    }
}

/// What started a run, or one task's run: its schedule (cron, a timer, a daemon's tick) or a
/// person (`approve`, a button, SIGUSR1, `/run`). Written as `trigger` in the audit log and
/// in `run --once --json` (docs/reference.md#audit-events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Trigger {
    Schedule,
    Manual,
    /// A task's run that retries a failed one (docs/reference.md#retries): task lines only.
    Retry,
}

/// What became of one task in a run: the `outcome` of `run --once --json`'s tasks, of
/// `task_runs` rows (succeeded, failed), of the report lines (docs/reference.md#run-json).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Succeeded,
    Failed,
    /// A failure: the run before died while the task ran.
    Interrupted,
    /// Queued for approval.
    Queued,
    Skipped,
    Invalid,
    Reminded,
    /// An approval whose task changed or went away.
    Stale,
    /// It failed, and is tried again later (docs/reference.md#retries): not a failure yet.
    RetryScheduled,
    /// Dry runs: what a run would do.
    WouldRun,
    WouldQueue,
}

impl Outcome {
    #[cfg(test)]
    pub(crate) const ALL: [Outcome; 11] = [
        Outcome::Succeeded,
        Outcome::Failed,
        Outcome::Interrupted,
        Outcome::Queued,
        Outcome::Skipped,
        Outcome::Invalid,
        Outcome::Reminded,
        Outcome::Stale,
        Outcome::RetryScheduled,
        Outcome::WouldRun,
        Outcome::WouldQueue,
    ];

    /// The spelling in JSON and SQLite.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
            Outcome::Queued => "queued",
            Outcome::Skipped => "skipped",
            Outcome::Invalid => "invalid",
            Outcome::Reminded => "reminded",
            Outcome::Stale => "stale",
            Outcome::RetryScheduled => "retry_scheduled",
            Outcome::WouldRun => "would_run",
            Outcome::WouldQueue => "would_queue",
        }
    }

    /// A tool run's outcome: succeeded or failed.
    pub(crate) fn of_run(success: bool) -> Outcome {
        if success {
            Outcome::Succeeded
        } else {
            Outcome::Failed
        }
    }
}

/// What kind of run a run is: the `mode` of `run_started` and of the `runs` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunMode {
    /// `run --once`.
    Once,
    /// A daemon tick.
    Daemon,
    /// Approved work run by `approve` (or a press, a chat command, `heartbeat mcp`).
    Approve,
}

impl RunMode {
    #[cfg(test)]
    pub(crate) const ALL: [RunMode; 3] = [RunMode::Once, RunMode::Daemon, RunMode::Approve];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunMode::Once => "once",
            RunMode::Daemon => "daemon",
            RunMode::Approve => "approve",
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of weekdays (bit 0 = Monday … bit 6 = Sunday).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DaySet(pub u8);

impl DaySet {
    pub const ALL: DaySet = DaySet(0b111_1111);
    pub const WEEKDAYS: DaySet = DaySet(0b001_1111);
    pub const WEEKENDS: DaySet = DaySet(0b110_0000);
    pub const EMPTY: DaySet = DaySet(0);

    pub fn contains(self, day: Weekday) -> bool {
        self.0 & (1 << day.num_days_from_monday()) != 0
    }

    pub fn with(self, day: Weekday) -> DaySet {
        DaySet(self.0 | (1 << day.num_days_from_monday()))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// A schedule set by a level-3 heading.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// Recurring `Every <duration>`: due when not attempted within the duration.
    Every(std::time::Duration),
    /// Recurring `Daily at` / `Weekdays at` / `Mondays at` …: once on each matching local day,
    /// at the first run at or after `time`.
    At { days: DaySet, time: NaiveTime },
    /// One-time `At YYYY-MM-DD[ HH:MM]`: not due before that local time.
    Once(NaiveDateTime),
    /// Recurring `Cron M H DOM MON DOW` (or the five fields bare): once per slot, at the first
    /// run at or after it and before its deadline (docs/reference.md#missed-slots).
    Cron(crate::cron::CronLine),
}

impl Schedule {
    /// The section whose headings may set it.
    pub fn section(&self) -> Section {
        match self {
            Schedule::Once(_) => Section::OneTime,
            _ => Section::Recurring,
        }
    }
}

/// What the task text says to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// No `@tool`: a reminder (or an `agent` prompt with `plain_tasks = "agent"`).
    Plain,
    /// `@name {json}`; the input is always a JSON object (`{}` when empty).
    Tool {
        name: String,
        input: Map<String, Value>,
    },
    /// `@name` followed by something that is not one JSON object. `line`/`column` point at
    /// the error in the file (1-based); `error` is the reason (the JSON parser's message).
    Invalid {
        tool: Option<String>,
        error: String,
        line: usize,
        column: usize,
    },
}

/// One GFM task-list item.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// First 12 hex digits of SHA-256 over canonical path, section, proposal mark and
    /// normalised content (and the occurrence index from the second copy on).
    pub id: String,
    /// The file as the user named it, made absolute (not symlink-resolved); shared by the
    /// file's tasks.
    pub file: Arc<Path>,
    /// 1-based line and column of the task marker `[ ]`.
    pub line: usize,
    pub column: usize,
    pub section: Section,
    /// Text of the level-3 heading above the task inside its section, if any.
    pub heading: Option<Arc<str>>,
    /// The schedule from that heading, when it is a valid schedule for the section.
    pub schedule: Option<Schedule>,
    /// The zone the heading names for its schedule (` in Asia/Tokyo`); None: the configured
    /// zone.
    pub zone: Option<chrono_tz::Tz>,
    /// The heading's jitter `~D`: its slots fall a fixed offset in [0, D) later
    /// (docs/reference.md#schedule-headings).
    pub jitter: Option<std::time::Duration>,
    /// `[x]` / `[X]`.
    pub done: bool,
    /// The item's own first paragraph, from the source bytes, container prefixes removed,
    /// trimmed.
    pub text: String,
    /// 1-based line and column where `text` starts (used for errors about the text).
    pub text_line: usize,
    pub text_column: usize,
    pub body: Body,
    /// Byte range of the `[ ]` marker in the file (BOM included in the count).
    pub marker: Range<usize>,
    /// `mcp:NAME` when the item's first line ends with an agent's proposal mark
    /// (`<!-- proposed by mcp:NAME -->`): such a task asks a person before it first runs,
    /// wherever the file is read. None for a person's own task.
    pub proposed_by: Option<String>,
}

impl Task {
    /// The zone of its schedule's times: its heading's, else `default` (the configured one).
    pub fn zone_or(&self, default: chrono_tz::Tz) -> chrono_tz::Tz {
        self.zone.unwrap_or(default)
    }

    pub fn tool_name(&self) -> Option<&str> {
        match &self.body {
            Body::Tool { name, .. } => Some(name),
            Body::Invalid { tool, .. } => tool.as_deref(),
            Body::Plain => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// Something `check` reports about a file or the config.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub severity: Severity,
    pub message: String,
}

/// The result of parsing one HEARTBEAT.md.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedFile {
    pub path: PathBuf,
    pub tasks: Vec<Task>,
    /// Warnings only (a title heading in an active section, a near-miss section heading,
    /// `- []`, an empty task). Invalid tasks, including those below a schedule heading that
    /// does not parse, are tasks with `Body::Invalid`, not problems.
    pub problems: Vec<Problem>,
}

/// The built-in tools' names, reserved in the config (no `[tools.NAME] command`, no
/// `[mcp.NAME]`). Here, below the config, because the config checks names against it;
/// `tools::builtin::BUILTINS` implements each, and a test there keeps the two lists alike.
pub(crate) const BUILTIN_TOOLS: [&str; 6] = [
    "shell",
    "log",
    "write_file",
    "append_file",
    "http",
    "notify",
];

/// Whether `name` is a built-in tool's.
pub(crate) fn is_builtin_tool(name: &str) -> bool {
    BUILTIN_TOOLS.contains(&name)
}

/// A cost a tool reported (its last output line, an MCP result's `structuredContent`):
/// a number of dollars, 0 or more. Anything else is ignored: a negative cost would give
/// the day's budget back.
pub(crate) fn reported_cost(value: Option<&Value>) -> Option<f64> {
    value
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are stored in SQLite and the audit log and shown in JSON: they never change.
    #[test]
    fn outcome_and_run_mode_spellings_are_pinned() {
        let outcomes: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            outcomes,
            [
                "succeeded",
                "failed",
                "interrupted",
                "queued",
                "skipped",
                "invalid",
                "reminded",
                "stale",
                "retry_scheduled",
                "would_run",
                "would_queue"
            ]
        );
        for o in Outcome::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
        let modes: Vec<&str> = RunMode::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(modes, ["once", "daemon", "approve"]);
        for m in RunMode::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        assert_eq!(Outcome::of_run(true), Outcome::Succeeded);
        assert_eq!(Outcome::of_run(false), Outcome::Failed);
    }
}
