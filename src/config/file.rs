//! The config file exactly as written: one serde type per table.
//!
//! Invariants:
//! - Every table denies unknown keys, so a typo is an error, never a silently dropped
//!   setting; an absent key is `None` and its default is chosen in `load`.
//! - A value with a rule of its own is a type from `types`, checked as it is read; its
//!   error gets its line and column from the deserializer. Values that `load` checks further
//!   (rules that join two keys) keep their span (`Spanned`) for their errors.

use std::collections::BTreeMap;

use super::de::Spanned;
use serde::Deserialize;

use super::types::{
    ApiUrl, ChannelName, ChatId, Command, Concurrency, Days, Failures, Files, History, Hours,
    Human, Interval, Keep, Lease, McpUrl, MessageCap, MonitorName, NodeName, PathText, Retries,
    RetryOn, SecretVar, ServerName, Size, TaskCap, TokenVar, ToolCommand, ToolName, Usd, Zone,
};
use super::{Approval, Autonomy, FleetTick, PlainTasks, SummaryMode};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub files: Option<Spanned<Files>>,
    pub timezone: Option<Zone>,
    pub active_hours: Option<Hours>,
    pub active_days: Option<Days>,
    pub autonomy: Option<Autonomy>,
    pub plain_tasks: Option<Spanned<PlainTasks>>,
    pub state_dir: Option<Spanned<PathText>>,
    pub audit_log: Option<Spanned<PathText>>,
    pub approval_ttl: Option<Human>,
    pub concurrency: Option<Concurrency>,
    pub max_tasks_per_run: Option<TaskCap>,
    pub stuck_after: Option<Human>,
    pub max_lateness: Option<Human>,
    #[serde(default)]
    pub tools: BTreeMap<ToolName, Spanned<ToolFile>>,
    pub telegram: Option<TelegramFile>,
    pub daemon: Option<DaemonFile>,
    pub budget: Option<BudgetFile>,
    pub max_consecutive_failures: Option<Failures>,
    #[serde(default)]
    pub mcp: BTreeMap<ServerName, Spanned<McpFile>>,
    pub mcp_server: Option<McpServerFile>,
    pub retention: Option<RetentionFile>,
    #[serde(default)]
    pub channels: BTreeMap<ChannelName, Spanned<ChannelFile>>,
    #[serde(default)]
    pub monitors: Vec<Spanned<MonitorFile>>,
    pub metrics: Option<MetricsFile>,
    pub fleet: Option<Spanned<FleetFile>>,
}

/// `[fleet]` (docs/fleet.md#config).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FleetFile {
    pub postgres_url_env: Option<Spanned<SecretVar>>,
    pub node: Option<NodeName>,
    pub lease: Option<Lease>,
    pub every: Option<Interval>,
    pub tick: Option<FleetTick>,
}

/// `[[monitors]]` (docs/reference.md#monitors): the keys of every kind; `load` refuses the
/// ones that do not belong to the monitor's kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MonitorFile {
    pub name: Option<Spanned<MonitorName>>,
    pub kind: Option<MonitorKindName>,
    // healthchecks, uptime_kuma
    pub url_env: Option<Spanned<SecretVar>>,
    // url
    pub start_url_env: Option<Spanned<SecretVar>>,
    pub success_url_env: Option<Spanned<SecretVar>>,
    pub fail_url_env: Option<Spanned<SecretVar>>,
}

/// `[[monitors]] kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum MonitorKindName {
    Healthchecks,
    UptimeKuma,
    Url,
}

/// `[metrics]` (docs/reference.md#metrics).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MetricsFile {
    pub textfile: Option<Spanned<PathText>>,
}

/// `[channels.NAME]` (docs/reference.md#channels): the keys of every kind; `load` refuses
/// the ones that do not belong to the channel's kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChannelFile {
    pub kind: Option<KindName>,
    pub events: Option<Vec<Spanned<EventName>>>,
    pub quiet_hours: Option<Hours>,
    pub max_messages_per_day: Option<MessageCap>,
    pub timeout: Option<Human>,
    // ntfy
    pub server: Option<Spanned<ApiUrl>>,
    pub topic_env: Option<Spanned<SecretVar>>,
    pub token_env: Option<Spanned<SecretVar>>,
    pub approvals: Option<Spanned<bool>>,
    pub reply_topic_env: Option<Spanned<SecretVar>>,
    pub tags: Option<Spanned<Vec<String>>>,
    // slack, discord, webhook
    pub url: Option<Spanned<ApiUrl>>,
    pub url_env: Option<Spanned<SecretVar>>,
    pub secret_env: Option<Spanned<SecretVar>>,
    // email
    pub transport: Option<Spanned<MailKind>>,
    pub smtp_url_env: Option<Spanned<SecretVar>>,
    pub sendmail: Option<Spanned<String>>,
    pub from: Option<Spanned<String>>,
    pub to: Option<Spanned<Vec<String>>>,
    // command
    pub command: Option<Spanned<Command>>,
}

impl ChannelFile {
    /// The keys of one kind or another that are written, with where.
    pub(super) fn kind_keys(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut keys = Vec::new();
        let mut add = |name, span: Option<std::ops::Range<usize>>| {
            if let Some(span) = span {
                keys.push((name, span));
            }
        };
        add("server", self.server.as_ref().map(Spanned::span));
        add("topic_env", self.topic_env.as_ref().map(Spanned::span));
        add("token_env", self.token_env.as_ref().map(Spanned::span));
        add("approvals", self.approvals.as_ref().map(Spanned::span));
        add(
            "reply_topic_env",
            self.reply_topic_env.as_ref().map(Spanned::span),
        );
        add("tags", self.tags.as_ref().map(Spanned::span));
        add("url", self.url.as_ref().map(Spanned::span));
        add("url_env", self.url_env.as_ref().map(Spanned::span));
        add("secret_env", self.secret_env.as_ref().map(Spanned::span));
        add("transport", self.transport.as_ref().map(Spanned::span));
        add(
            "smtp_url_env",
            self.smtp_url_env.as_ref().map(Spanned::span),
        );
        add("sendmail", self.sendmail.as_ref().map(Spanned::span));
        add("from", self.from.as_ref().map(Spanned::span));
        add("to", self.to.as_ref().map(Spanned::span));
        add("command", self.command.as_ref().map(Spanned::span));
        keys
    }
}

/// `[channels.NAME] kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum KindName {
    Ntfy,
    Slack,
    Discord,
    Webhook,
    Email,
    Command,
}

/// `[channels.NAME] transport` of an e-mail channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum MailKind {
    Smtp,
    Sendmail,
}

/// A name in a channel's `events`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum EventName {
    Approval,
    Reminder,
    Failure,
    Trip,
    Missed,
    Notify,
    Budget,
    Agent,
    Summary,
    Test,
}

/// `[retention]` (docs/reference.md#retention).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetentionFile {
    pub history: Option<History>,
    pub audit_max_size: Option<Size>,
    pub audit_keep: Option<Keep>,
}

/// `[mcp_server]`: what `heartbeat mcp` lets agents do (docs/reference.md#heartbeat-mcp).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServerFile {
    pub allow_approve: Option<bool>,
}

/// `[mcp.NAME]`: an MCP server (docs/reference.md#mcp-tools).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpFile {
    pub command: Option<Spanned<Command>>,
    pub url: Option<McpUrl>,
    pub env: Option<Vec<Spanned<SecretVar>>>,
    pub headers_env: Option<BTreeMap<String, Spanned<SecretVar>>>,
    pub cwd: Option<PathText>,
    pub timeout: Option<Human>,
    pub startup_timeout: Option<Human>,
    pub approval: Option<Approval>,
    pub trust_annotations: Option<bool>,
    pub cost_usd: Option<Usd>,
    pub max_lateness: Option<Human>,
    pub retries: Option<Retries>,
    pub retry_backoff: Option<Human>,
    pub retry_on: Option<Vec<RetryOn>>,
    pub idempotent: Option<bool>,
    #[serde(default)]
    pub tools: BTreeMap<String, Spanned<McpToolFile>>,
}

/// `[mcp.NAME.tools.TOOL]`: one tool's policy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpToolFile {
    pub approval: Option<Approval>,
    pub cost_usd: Option<Usd>,
    pub cooldown: Option<Human>,
    pub timeout: Option<Human>,
    pub max_consecutive_failures: Option<Failures>,
    pub retries: Option<Retries>,
    pub retry_backoff: Option<Human>,
    pub retry_on: Option<Vec<RetryOn>>,
    pub idempotent: Option<bool>,
}

/// `[tools.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolFile {
    pub command: Option<Spanned<ToolCommand>>,
    pub timeout: Option<Human>,
    pub approval: Option<Approval>,
    pub description: Option<String>,
    pub cooldown: Option<Human>,
    pub cost_usd: Option<Usd>,
    pub max_consecutive_failures: Option<Failures>,
    pub monitor_url_env: Option<SecretVar>,
    pub max_lateness: Option<Human>,
    pub retries: Option<Retries>,
    pub retry_backoff: Option<Human>,
    pub retry_on: Option<Vec<RetryOn>>,
    pub idempotent: Option<bool>,
    pub hosts: Option<Vec<NodeName>>,
}

/// `[telegram]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TelegramFile {
    pub bot_token_env: Option<TokenVar>,
    pub bot_token_file: Option<Spanned<PathText>>,
    pub chat_ids: Option<Vec<ChatId>>,
    pub api_url: Option<ApiUrl>,
    pub summary: Option<SummaryMode>,
    pub quiet_hours: Option<Hours>,
    pub max_messages_per_day: Option<MessageCap>,
    pub events: Option<Vec<Spanned<EventName>>>,
}

/// `[daemon]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DaemonFile {
    pub every: Option<Interval>,
}

/// `[budget]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BudgetFile {
    pub daily_usd: Option<Usd>,
}
