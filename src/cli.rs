//! The command line, as clap types only: completions are generated from these.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

use crate::clock::{TIME_FORMS, When};
use crate::model::ApprovalState;

#[derive(Debug, Parser)]
#[command(
    name = "heartbeat",
    version,
    about = "Run the check-list in HEARTBEAT.md on a schedule, safely, with a human in the loop",
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct NotifyTestArgs {
    /// Only this channel (`telegram`, or a [channels.NAME] name)
    #[arg(long, value_name = "NAME")]
    pub channel: Option<String>,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Config file (default: $HEARTBEAT_CONFIG, heartbeat.toml beside the first HEARTBEAT.md,
    /// then the platform config dir)
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Directory for heartbeat.db, audit.jsonl and heartbeat.lock
    #[arg(long, global = true, value_name = "PATH")]
    pub state_dir: Option<PathBuf>,

    /// Act as if it were this time, for decisions and records: RFC 3339, or a local
    /// 2026-12-07T02:00 or 2026-12-07 in the configured zone
    #[arg(long, global = true, env = "HEARTBEAT_NOW", value_name = "RFC3339", value_parser = parse_now)]
    pub now: Option<When>,

    /// Diagnostics on stderr (-vv for more)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the due tasks once (for cron and systemd timers)
    Run(RunArgs),
    /// Stay up: tick every interval, answer Telegram buttons and commands
    Daemon(DaemonArgs),
    /// Validate the config and files; list tasks, what would happen now and when they are due
    Check(CheckArgs),
    /// Last run, pause, pending approvals, spend, tripped tasks, outbox and the run lock
    Status(JsonArg),
    /// Is anything wrong or missed? Read-only checks of the scheduler, runs, lock, tasks,
    /// approvals, delivery, files, clock and state dir
    Doctor(DoctorArgs),
    /// Approve pending approvals (by id, all, or one by one on a terminal) and run them
    Approve(ApproveArgs),
    /// Deny pending approvals
    Deny(DenyArgs),
    /// List approvals
    Approvals(ApprovalsArgs),
    /// List the always-grants (tasks that run without asking)
    Grants(JsonArg),
    /// Remove the always-grant of a task
    Revoke {
        /// The task's id (12 hex digits, as `heartbeat grants` shows)
        task_id: String,
    },
    /// Clear a tripped task's failure count, or release an interrupted one-time task, so it runs again
    Reset {
        /// The task's id (12 hex digits, as `heartbeat check` and `status` show)
        task_id: String,
    },
    /// Hold one task back for a while (the file is not touched)
    Snooze(SnoozeArgs),
    /// End a task's snooze
    Unsnooze {
        /// The task's id, or a unique prefix of it (as `heartbeat status` shows)
        task_id: String,
    },
    /// Pause runs (until resumed, or for a while)
    Pause(PauseArgs),
    /// End a pause
    Resume,
    /// Send a test message to every configured channel (Telegram chats included), or one
    NotifyTest(NotifyTestArgs),
    /// List the chats that recently wrote to the bot, with their ids (for telegram.chat_ids)
    TelegramChats(JsonArg),
    /// List the tools the configured MCP servers offer (starts each server)
    McpTools(McpToolsArgs),
    /// Serve MCP on stdin/stdout for agents: read the check-list, propose tasks; a person decides
    Mcp,
    /// Show the audit log, filtered; human-readable unless --json
    Log(LogArgs),
    /// Print Prometheus metrics (text format 0.0.4) computed from the state dir
    Metrics,
    /// Write a commented HEARTBEAT.md and heartbeat.toml to start from (never overwrites)
    Init {
        /// Where to write them (default: the current directory)
        dir: Option<PathBuf>,
    },
    /// Print the man page, or install every page where `man` finds them (--install)
    Man(ManArgs),
    /// Fleet mode: several hosts sharing one PostgreSQL
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write heartbeat.1 and a page per subcommand into the directory `man` searches for
    /// your own installs, so that `man heartbeat` works
    #[arg(long)]
    pub install: bool,

    /// Where --install writes the pages (default: ~/.local/share/man/man1)
    #[arg(long, value_name = "DIR", requires = "install")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FileArgs {
    /// HEARTBEAT.md to use instead of the config's `files` (repeatable)
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,

    /// A missing HEARTBEAT.md counts as empty instead of an error
    #[arg(long)]
    pub allow_missing: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run once and exit (the daemon is `heartbeat daemon`)
    #[arg(long)]
    pub once: bool,

    /// Run only this task, now, whatever its schedule or cooldown say (repeatable; implies
    /// --once): its id or a unique prefix of it, or FILE:LINE (any line of the item)
    #[arg(long = "task", value_name = "ID|FILE:LINE")]
    pub tasks: Vec<String>,

    #[command(flatten)]
    pub files: FileArgs,

    /// Run even outside active hours or while paused
    #[arg(long)]
    pub force: bool,

    /// Decide and print the plan; run, queue and write nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Override the configured autonomy for this run
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub autonomy: Option<AutonomyArg>,

    /// Print one JSON document
    #[arg(long)]
    pub json: bool,

    /// Print only failures and errors
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Tick interval (default: daemon.every, 30m); ticks align to multiples of it
    #[arg(long, value_name = "DURATION", value_parser = parse_every)]
    pub every: Option<std::time::Duration>,

    #[command(flatten)]
    pub files: FileArgs,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only lines at or after this: a duration back from now (`2h`, `1d`), `today`,
    /// `yesterday`, an RFC 3339 time, or a local `2026-12-07T02:00` or `2026-12-07`
    #[arg(long, value_name = "DURATION|TIME")]
    pub since: Option<String>,

    /// Only this event (repeatable), e.g. task_failed
    #[arg(long = "event", value_name = "NAME")]
    pub events: Vec<String>,

    /// Only lines about this task id (or its first 4 or more hex digits)
    #[arg(long = "task", value_name = "ID")]
    pub task: Option<String>,

    /// Only lines of this run id
    #[arg(long = "run", value_name = "ID")]
    pub run: Option<String>,

    /// Print the matching lines as they are (JSON Lines)
    #[arg(long)]
    pub json: bool,

    /// Keep printing lines as they are appended (from the end, unless --since or -n is given)
    #[arg(short = 'f', long)]
    pub follow: bool,

    /// Only the last N matching lines
    #[arg(short = 'n', long = "lines", value_name = "N")]
    pub lines: Option<usize>,

    /// Also show runs that did nothing (hidden by default)
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// End the pause by itself after this long (default: until `heartbeat resume`)
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub for_: Option<std::time::Duration>,

    /// Why (recorded and shown)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Free a node's name (a node that is gone for good), so another state dir may take it
    Forget {
        /// The node's name, as `heartbeat status` lists it
        node: String,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("end").required(true).args(["for_", "until"])))]
pub struct SnoozeArgs {
    /// The task's id, or a unique prefix of it (as `heartbeat check` shows)
    pub task_id: String,

    /// Snooze it for this long (`2h`, `3d`)
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub for_: Option<std::time::Duration>,

    /// Snooze it until this time: RFC 3339, or a local `2026-12-07 09:00` in the configured
    /// zone
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    pub until: Option<When>,

    /// Why (recorded and shown)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub files: FileArgs,

    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The window looked at: a duration back from now (`7d`, `12h`), `today`, `yesterday`,
    /// or a time
    #[arg(long, value_name = "DURATION|TIME", default_value = "7d")]
    pub since: String,

    /// Also start each configured MCP server and list its tools
    #[arg(long)]
    pub deep: bool,

    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct McpToolsArgs {
    /// Only this server (a key of [mcp.NAME] in the config)
    pub server: Option<String>,

    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// Approval ids (as `heartbeat approvals` shows)
    #[arg(value_name = "ID", value_parser = parse_approval_id)]
    pub ids: Vec<i64>,

    /// Approve every pending approval (on a terminal: shown first, asked once)
    #[arg(long, conflicts_with = "ids")]
    pub all: bool,

    /// With --all: do not ask
    #[arg(long, requires = "all")]
    pub yes: bool,

    /// Also grant these exact tasks from now on: later runs do not ask again
    #[arg(long)]
    pub always: bool,

    /// Do not run now: the next run runs them
    #[arg(long)]
    pub later: bool,
}

#[derive(Debug, Args)]
pub struct DenyArgs {
    /// Approval ids
    #[arg(value_name = "ID", value_parser = parse_approval_id, required_unless_present = "all")]
    pub ids: Vec<i64>,

    /// Deny every pending approval
    #[arg(long, conflicts_with = "ids")]
    pub all: bool,

    /// Why (recorded and shown)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Which approvals to list
    #[arg(long, value_enum, default_value = "pending")]
    pub state: StateFilter,

    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AutonomyArg {
    Observe,
    Cautious,
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StateFilter {
    All,
    Pending,
    Approved,
    Running,
    Retrying,
    Succeeded,
    Failed,
    Denied,
    Expired,
    Stale,
}

impl StateFilter {
    /// The state it keeps; None for all.
    pub(crate) fn as_state(self) -> Option<ApprovalState> {
        Some(match self {
            StateFilter::All => return None,
            StateFilter::Pending => ApprovalState::Pending,
            StateFilter::Approved => ApprovalState::Approved,
            StateFilter::Running => ApprovalState::Running,
            StateFilter::Retrying => ApprovalState::Retrying,
            StateFilter::Succeeded => ApprovalState::Succeeded,
            StateFilter::Failed => ApprovalState::Failed,
            StateFilter::Denied => ApprovalState::Denied,
            StateFilter::Expired => ApprovalState::Expired,
            StateFilter::Stale => ApprovalState::Stale,
        })
    }
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(s.trim()) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("must be more than 0".into()),
        Err(e) => Err(format!(
            "\"{s}\" is not a duration (like 90s, 10m, 6h, 1d): {e}"
        )),
    }
}

/// A duration the daemon can tick at: 1 s to 366 days, like `[daemon] every`.
fn parse_every(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("\"{s}\" is not a duration (like 90s, 10m, 6h, 1d): {e}"))?;
    crate::schedule::check_tick_interval(d)
}

/// `3` or `#3`.
fn parse_approval_id(s: &str) -> Result<i64, String> {
    let digits = s.trim().trim_start_matches('#');
    match digits.parse::<i64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(format!(
            "\"{s}\" is not an approval id (a number, as `heartbeat approvals` shows)"
        )),
    }
}

fn parse_now(s: &str) -> Result<When, String> {
    When::parse(s).ok_or_else(|| format!("\"{s}\" is not a time: expected {TIME_FORMS}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn now_accepts_offsets_and_local_times() {
        let t = parse_now("2026-03-29T02:30:00+02:00").unwrap();
        assert_eq!(
            t,
            When::At("2026-03-29T00:30:00Z".parse::<DateTime<Utc>>().unwrap())
        );
        assert!(parse_now("2026-12-07T02:00").is_ok_and(|w| w.is_local()));
        let err = parse_now("yesterday").unwrap_err();
        assert!(
            err.contains("RFC 3339") && err.contains("2026-12-07T02:00"),
            "{err}"
        );
    }
}
