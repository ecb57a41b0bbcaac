//! The TOML config (docs/reference.md#config): the validated [`Config`] the rest of the program
//! reads.
//!
//! Invariants:
//! - A `Config` is fully validated: windows, zones, days and durations are parsed once, at
//!   load, and nothing downstream falls back to a default because a value was half-parsed.
//! - Every error names the file, the dotted key, the bad value and, when it comes from the
//!   file, its line and column. Unknown keys are refused rather than ignored: a typo must not
//!   silently disable a guardrail.
//! - The process environment and the host's directories are injected (`LoadOptions::env`,
//!   [`Host`]), so tests never depend on the machine they run on.
//!
//! `file` mirrors the TOML as written (serde, `deny_unknown_fields`) in the value types of
//! `types`, each checked as it is read; `de` reads it from the parsed document, with each
//! error's kind and place; `load` finds the file, reads it, applies the rules that join two
//! keys and turns it into a `Config`.

mod channel;
mod de;
mod file;
mod load;
mod shell;
#[cfg(test)]
mod tests;
mod types;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono_tz::Tz;
use serde::Deserialize;

use crate::schedule::{ActiveHours, Window};

pub(crate) use channel::{
    ChannelConfig, ChannelKind, EmailConfig, MailTransport, NtfyConfig, Target,
};
pub(crate) use load::{fallback, load};
pub(crate) use types::RetryOn;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Autonomy {
    Observe,
    Cautious,
    Full,
}

impl Autonomy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Autonomy::Observe => "observe",
            Autonomy::Cautious => "cautious",
            Autonomy::Full => "full",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlainTasks {
    Remind,
    Agent,
}

/// A tool's approval policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Approval {
    Auto,
    Ask,
    Deny,
}

impl Approval {}

/// `[tools.NAME]` as written; absent keys are None (the tool's defaults apply).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ToolConfig {
    pub command: Option<Vec<String>>,
    pub timeout: Option<Duration>,
    pub approval: Option<Approval>,
    pub description: Option<String>,
    /// Not started while another task of this tool started within this time.
    pub cooldown: Option<Duration>,
    /// Estimated cost of one call, for the budget (when the tool does not report one).
    pub cost_usd: Option<f64>,
    /// Overrides the global `max_consecutive_failures` for this tool's tasks.
    pub max_consecutive_failures: Option<u32>,
    /// Overrides the global `max_lateness` for this tool's calendar slots.
    pub max_lateness: Option<Duration>,
    /// The variable holding a healthchecks-style URL pinged around each run of this tool's
    /// tasks (docs/reference.md#monitors); its value is a secret.
    pub monitor_url_env: Option<String>,
    /// `retries`, `retry_backoff`, `retry_on`, `idempotent`.
    pub retry: RetryConfig,
    /// In a fleet, the only nodes that run this tool's tasks (docs/fleet.md#affinity);
    /// None: every node.
    pub hosts: Option<Vec<String>>,
}

/// `[fleet]`: this node of several sharing their state in PostgreSQL (docs/fleet.md).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FleetConfig {
    /// The variable holding the database's URL (a secret).
    pub url_env: String,
    /// This node's name, unique in the fleet.
    pub node: String,
    /// How long a singleton lease lasts unless renewed.
    pub lease: Duration,
    /// Tasks without a schedule heading run at most once per this, fleet-wide.
    pub every: Duration,
    pub tick: FleetTick,
}

/// `[fleet] tick`: which clones of the file get a one-time task's `[x]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FleetTick {
    /// The node that ran it (the others get it through the person's own sync).
    Runner,
    /// Every node's copy.
    All,
    /// None: the file is never written by the fleet.
    None,
}

/// A node name: 1 to 64 letters, digits, `.`, `_` or `-`.
pub(crate) fn is_node_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The retry keys of `[tools.NAME]`, `[mcp.NAME]` and `[mcp.NAME.tools.TOOL]` as written
/// (docs/reference.md#retries); absent keys are None.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RetryConfig {
    /// Extra attempts after a failure.
    pub retries: Option<u32>,
    /// The wait before the first retry, doubled before each next one.
    pub backoff: Option<Duration>,
    /// The failures retried; None: every kind.
    pub on: Option<Vec<RetryOn>>,
    /// Whether a second call has no second outside effect.
    pub idempotent: Option<bool>,
}

/// How a tool's failed tasks are tried again (docs/reference.md#retries): its own table's
/// keys over its MCP server's, over the defaults.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RetryPolicy {
    pub retries: u32,
    pub backoff: Duration,
    /// The failures retried; None: every kind.
    pub on: Option<Vec<RetryOn>>,
    /// As written; None: the tool's own default.
    pub idempotent: Option<bool>,
}

/// The longest wait before a retry, however often the backoff doubled.
pub(crate) const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(3600);

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (from 1): the backoff, doubled for each
    /// attempt before it, at most [`MAX_RETRY_BACKOFF`].
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(31);
        self.backoff
            .checked_mul(1 << doublings)
            .unwrap_or(MAX_RETRY_BACKOFF)
            .min(MAX_RETRY_BACKOFF)
    }
}

/// `[[monitors]]` (docs/reference.md#monitors): an outside watcher told that runs happen.
/// Its URLs are secrets: only the names of the variables that hold them are here.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MonitorConfig {
    /// As written, else `<kind>-<n>` (n from 1, in file order): in audit lines.
    pub name: String,
    pub kind: MonitorKind,
}

/// How a monitor is pinged.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MonitorKind {
    /// healthchecks.io and compatible: `/start`, success, `/fail`, with `rid`.
    Healthchecks { url_env: String },
    /// An Uptime Kuma push URL, at the end of the run, with `status`, `msg` and `ping`.
    UptimeKuma { url_env: String },
    /// Plain GETs, each optional.
    Url {
        start_url_env: Option<String>,
        success_url_env: Option<String>,
        fail_url_env: Option<String>,
    },
}

impl MonitorKind {
    /// The variables whose values are secrets.
    pub(crate) fn secret_vars(&self) -> Vec<&str> {
        match self {
            MonitorKind::Healthchecks { url_env } | MonitorKind::UptimeKuma { url_env } => {
                vec![url_env.as_str()]
            }
            MonitorKind::Url {
                start_url_env,
                success_url_env,
                fail_url_env,
            } => [start_url_env, success_url_env, fail_url_env]
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect(),
        }
    }
}

/// How heartbeat reaches an MCP server.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum McpTransport {
    /// `command`: a child process speaking MCP on its stdin and stdout.
    Stdio(Vec<String>),
    /// `url`: Streamable HTTP, with `headers_env` (header name, variable name).
    Http {
        url: String,
        headers_env: Vec<(String, String)>,
    },
}

/// `[mcp.NAME]` (docs/reference.md#mcp-tools).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct McpServerConfig {
    pub transport: McpTransport,
    /// Names of the variables passed through; their values are secrets.
    pub env: Vec<String>,
    /// Absolute; None: the directory of the HEARTBEAT.md whose task starts it.
    pub cwd: Option<PathBuf>,
    /// Per call.
    pub timeout: Duration,
    /// For starting and listing the tools.
    pub startup_timeout: Duration,
    /// The default of all its tools (`ask` when not written).
    pub approval: Approval,
    /// Tools the server marks read-only (and not destructive) default to `auto` instead of
    /// `ask`.
    pub trust_annotations: bool,
    /// The default estimate per call.
    pub cost_usd: Option<f64>,
    /// The default `max_lateness` of its tools' calendar slots.
    pub max_lateness: Option<Duration>,
    /// The default retry keys of its tools.
    pub retry: RetryConfig,
    /// `[mcp.NAME.tools.TOOL]`: approval, cost_usd, cooldown, timeout,
    /// max_consecutive_failures.
    pub tools: BTreeMap<String, ToolConfig>,
}

impl McpServerConfig {
    /// What decides how the server starts and which tools it lists: a listing cached under
    /// another fingerprint is out of date.
    pub(crate) fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = format!("{:?}|{:?}|{:?}", self.transport, self.env, self.cwd);
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// When a run's summary goes to Telegram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SummaryMode {
    /// After runs that did something (default).
    OnChange,
    /// After every run, empty ones too.
    Always,
    /// Only failures (and other urgent messages).
    Never,
}

/// `[telegram]`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TelegramConfig {
    /// The name of the environment variable that holds the bot token (never the token).
    pub bot_token_env: String,
    /// The file that holds the bot token instead (`bot_token_file`), when set: read once,
    /// as the config is loaded ([`crate::redact::take_file`]).
    pub bot_token_file: Option<PathBuf>,
    /// The only chats that receive messages and may approve.
    pub chat_ids: Vec<i64>,
    /// The Bot API server, without a trailing slash.
    pub api_url: String,
    pub summary: SummaryMode,
    /// Non-urgent messages wait until these hours end.
    pub quiet_hours: Option<Window>,
    /// Past this many messages a local day, non-urgent ones are folded; 0 = no limit.
    pub max_messages_per_day: u32,
    /// The kinds of message it takes; `summary` governs only the run summary.
    pub events: Vec<crate::model::MessageKind>,
}

impl TelegramConfig {
    /// Where the token comes from, for messages: `$VAR`, or `the file PATH`.
    pub(crate) fn token_origin(&self) -> String {
        match &self.bot_token_file {
            Some(path) => format!("the file {}", path.display()),
            None => format!("${}", self.bot_token_env),
        }
    }
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            bot_token_env: "HEARTBEAT_TELEGRAM_TOKEN".into(),
            bot_token_file: None,
            chat_ids: Vec::new(),
            api_url: "https://api.telegram.org".into(),
            summary: SummaryMode::OnChange,
            quiet_hours: None,
            max_messages_per_day: 20,
            events: crate::model::MessageKind::DEFAULT
                .into_iter()
                .chain([crate::model::MessageKind::Summary])
                .collect(),
        }
    }
}

/// `[daemon]`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DaemonConfig {
    /// Tick interval; ticks align to multiples of it in local time.
    pub every: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            every: Duration::from_secs(30 * 60),
        }
    }
}

/// `[retention]` (docs/reference.md#retention).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Retention {
    /// History rows, decided approvals and delivered messages older than this are pruned.
    pub history: Duration,
    /// The audit log is rotated when it passes this many bytes.
    pub audit_max_size: u64,
    /// Rotated audit files kept.
    pub audit_keep: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            history: Duration::from_secs(90 * 86400),
            audit_max_size: 64 * 1024 * 1024,
            audit_keep: 5,
        }
    }
}

/// A loaded, validated config. Every value is parsed once here.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The file it came from; None when no config file was found.
    pub source: Option<PathBuf>,
    /// HEARTBEAT.md files, absolute, globs expanded, in order, without duplicates.
    pub files: Vec<PathBuf>,
    /// Zone, window and days.
    pub active: ActiveHours,
    pub autonomy: Autonomy,
    pub plain_tasks: PlainTasks,
    /// Absolute.
    pub state_dir: PathBuf,
    /// Absolute (`audit_log` joined to `state_dir`).
    pub audit_log: PathBuf,
    pub approval_ttl: Duration,
    pub concurrency: usize,
    /// 0 = no cap.
    pub max_tasks_per_run: usize,
    pub stuck_after: Duration,
    /// A calendar slot not run within this is not run late, and is reported missed
    /// (`too_late`); None: its deadline is the end of its local day.
    pub max_lateness: Option<Duration>,
    pub tools: BTreeMap<String, ToolConfig>,
    /// `[mcp.NAME]`: MCP servers whose tools tasks call as `@NAME.TOOL`.
    pub mcp: BTreeMap<String, McpServerConfig>,
    /// `[mcp_server] allow_approve`: `heartbeat mcp` offers an approve tool (which still
    /// refuses proposed tasks and never grants *always*).
    pub agent_may_approve: bool,
    /// `[telegram]`; None when the table is absent.
    pub telegram: Option<TelegramConfig>,
    /// `[channels.NAME]`, by name.
    pub channels: Vec<ChannelConfig>,
    /// `[[monitors]]`, in file order.
    pub monitors: Vec<MonitorConfig>,
    /// `[metrics] textfile`: absolute; rewritten at the end of every run and tick.
    pub metrics_textfile: Option<PathBuf>,
    pub daemon: DaemonConfig,
    pub retention: Retention,
    /// `[budget] daily_usd`; 0 = no budget.
    pub daily_usd: f64,
    /// After this many failures in a row a task is tripped; 0 = never.
    pub max_consecutive_failures: u32,
    /// `[fleet]`; None: one host, SQLite.
    pub fleet: Option<FleetConfig>,
    /// Non-fatal notes (a glob that matched nothing).
    pub warnings: Vec<String>,
}

impl Config {
    pub(crate) fn tz(&self) -> Tz {
        self.active.tz
    }

    /// Whether this node runs the tool's tasks: always on one host; in a fleet, unless the
    /// tool's `hosts` leave this node out (docs/fleet.md#affinity).
    pub(crate) fn runs_here(&self, tool: &str) -> bool {
        let Some(fleet) = &self.fleet else {
            return true;
        };
        self.tool_config(tool)
            .and_then(|t| t.hosts.as_ref())
            .is_none_or(|hosts| hosts.contains(&fleet.node))
    }

    /// The server and tool of an MCP tool name `SERVER.TOOL`, when `SERVER` is configured.
    pub(crate) fn mcp_tool<'n>(
        &self,
        name: &'n str,
    ) -> Option<(&McpServerConfig, &'n str, &'n str)> {
        let (server, tool) = name.split_once('.')?;
        Some((self.mcp.get(server)?, server, tool))
    }

    /// A tool's own table: `[tools.NAME]`, or `[mcp.SERVER.tools.TOOL]`.
    fn tool_config(&self, name: &str) -> Option<&ToolConfig> {
        match self.mcp_tool(name) {
            Some((server, _, tool)) => server.tools.get(tool),
            None => self.tools.get(name),
        }
    }

    /// The estimated cost of one call of a tool (its `cost_usd`, an MCP server's
    /// `cost_usd`, else 0).
    pub(crate) fn cost_estimate(&self, tool: &str) -> f64 {
        self.tool_config(tool)
            .and_then(|t| t.cost_usd)
            .or_else(|| self.mcp_tool(tool).and_then(|(s, _, _)| s.cost_usd))
            .unwrap_or(0.0)
    }

    /// How late a calendar slot of a task of this tool may still run
    /// (docs/reference.md#missed-slots): the tool's `max_lateness`, else its MCP server's, else
    /// the global one.
    pub(crate) fn max_lateness(&self, tool: Option<&str>) -> Option<Duration> {
        let own = tool.and_then(|t| {
            self.tool_config(t)
                .and_then(|c| c.max_lateness)
                .or_else(|| self.mcp_tool(t).and_then(|(s, _, _)| s.max_lateness))
        });
        own.or(self.max_lateness)
    }

    /// A tool's cooldown, if it has one.
    pub(crate) fn cooldown(&self, tool: &str) -> Option<Duration> {
        self.tool_config(tool).and_then(|t| t.cooldown)
    }

    /// How this tool's failed tasks are tried again (docs/reference.md#retries).
    pub(crate) fn retry_policy(&self, tool: &str) -> RetryPolicy {
        let own = self.tool_config(tool).map(|t| &t.retry);
        let server = self.mcp_tool(tool).map(|(s, _, _)| &s.retry);
        let layers = [own, server];
        RetryPolicy {
            retries: layers.iter().flatten().find_map(|r| r.retries).unwrap_or(0),
            backoff: layers
                .iter()
                .flatten()
                .find_map(|r| r.backoff)
                .unwrap_or(Duration::from_secs(60)),
            on: layers.iter().flatten().find_map(|r| r.on.clone()),
            idempotent: layers.iter().flatten().find_map(|r| r.idempotent),
        }
    }

    /// Failures in a row after which a task of this tool is tripped; 0 = never.
    pub(crate) fn failure_limit(&self, tool: &str) -> u32 {
        self.tool_config(tool)
            .and_then(|t| t.max_consecutive_failures)
            .unwrap_or(self.max_consecutive_failures)
    }

    /// Whether a task with this estimate may start after `spent` today
    /// (docs/reference.md#guardrails): not once the cap is reached, nor when the estimate would
    /// pass it. Always with no budget.
    pub(crate) fn within_budget(&self, spent: f64, estimate: f64) -> bool {
        self.daily_usd <= 0.0 || (spent < self.daily_usd && spent + estimate <= self.daily_usd)
    }
}

/// A config error: names the file, the key and the bad value. Exit code 2.
///
/// Rendered `FILE:LINE:COLUMN: KEY: MESSAGE`, each part only when known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub(crate) struct ConfigError {
    pub file: Option<PathBuf>,
    /// Where in the file, 1-based (line, column), when the error is about a value in it.
    pub at: Option<(usize, usize)>,
    pub key: Option<String>,
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        let mut s = String::new();
        if let Some(f) = &self.file {
            s.push_str(&f.display().to_string());
            if let Some((line, column)) = self.at {
                s.push_str(&format!(":{line}:{column}"));
            }
            s.push_str(": ");
        }
        if let Some(k) = &self.key {
            s.push_str(k);
            s.push_str(": ");
        }
        s.push_str(&self.message);
        s
    }
}

/// What the command line and environment contribute to loading.
pub(crate) struct LoadOptions<'a> {
    /// `--config PATH`.
    pub config: Option<PathBuf>,
    /// `--file PATH`… (overrides `files`); relative to `cwd`.
    pub files: Vec<PathBuf>,
    /// `--state-dir PATH` (overrides `state_dir`); relative to `cwd`.
    pub state_dir: Option<PathBuf>,
    pub cwd: PathBuf,
    /// Environment lookup (`HEARTBEAT_CONFIG`, `TZ`, `HOME`); injected for tests.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// What tests elsewhere build a config from.
#[cfg(test)]
pub(crate) mod test_util {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::model::DaySet;
    use crate::schedule::{ActiveHours, Window};

    /// A config of these tools, active 08:00-22:00 in Berlin, cautious, no budget.
    pub(crate) fn config(tools: BTreeMap<String, ToolConfig>) -> Config {
        Config {
            source: None,
            files: vec![],
            active: ActiveHours {
                tz: chrono_tz::Europe::Berlin,
                window: Window::parse("08:00-22:00").unwrap(),
                days: DaySet::ALL,
            },
            autonomy: Autonomy::Cautious,
            plain_tasks: PlainTasks::Remind,
            state_dir: PathBuf::from("/state"),
            audit_log: PathBuf::from("/state/audit.jsonl"),
            approval_ttl: Duration::from_secs(86400),
            concurrency: 1,
            max_tasks_per_run: 50,
            stuck_after: Duration::from_secs(1800),
            max_lateness: None,
            tools,
            mcp: BTreeMap::new(),
            agent_may_approve: false,
            telegram: None,
            channels: Vec::new(),
            monitors: Vec::new(),
            metrics_textfile: None,
            daemon: Default::default(),
            retention: Default::default(),
            daily_usd: 0.0,
            max_consecutive_failures: 3,
            fleet: None,
            warnings: vec![],
        }
    }
}
