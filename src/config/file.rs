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
    ApiUrl, ChatId, Command, Concurrency, Days, Failures, Files, History, Hours, Human, Interval,
    Keep, McpUrl, MessageCap, PathText, SecretVar, ServerName, Size, TaskCap, TokenVar,
    ToolCommand, ToolName, Usd, Zone,
};
use super::{Approval, Autonomy, PlainTasks, SummaryMode};

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
}

/// `[telegram]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TelegramFile {
    pub bot_token_env: Option<TokenVar>,
    pub chat_ids: Option<Vec<ChatId>>,
    pub api_url: Option<ApiUrl>,
    pub summary: Option<SummaryMode>,
    pub quiet_hours: Option<Hours>,
    pub max_messages_per_day: Option<MessageCap>,
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
