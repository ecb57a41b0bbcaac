//! The config file exactly as written: one serde type per table.
//!
//! Invariants:
//! - Every table denies unknown keys, so a typo is an error, never a silently dropped
//!   setting; an absent key is `None` and its default is chosen in `load`.
//! - Values that `load` checks further keep their span (`Spanned`), so that its errors can
//!   point at the line and column. Types checked here (numbers, strings, enums, durations)
//!   get theirs from the deserializer's error.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::Spanned;

use super::{Approval, Autonomy, PlainTasks, SummaryMode};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub files: Option<Spanned<Vec<String>>>,
    pub timezone: Option<Spanned<String>>,
    pub active_hours: Option<Spanned<String>>,
    pub active_days: Option<Spanned<Vec<Spanned<String>>>>,
    pub autonomy: Option<Autonomy>,
    pub plain_tasks: Option<Spanned<PlainTasks>>,
    pub state_dir: Option<Spanned<String>>,
    pub audit_log: Option<Spanned<String>>,
    pub approval_ttl: Option<Human>,
    pub concurrency: Option<Spanned<i64>>,
    pub max_tasks_per_run: Option<Spanned<i64>>,
    pub stuck_after: Option<Human>,
    #[serde(default)]
    pub tools: BTreeMap<Spanned<String>, Spanned<ToolFile>>,
    pub telegram: Option<TelegramFile>,
    pub daemon: Option<DaemonFile>,
    pub budget: Option<BudgetFile>,
    pub max_consecutive_failures: Option<Spanned<i64>>,
    #[serde(default)]
    pub mcp: BTreeMap<Spanned<String>, Spanned<McpFile>>,
    pub mcp_server: Option<McpServerFile>,
    pub retention: Option<RetentionFile>,
}

/// `[retention]` (SPEC §11).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionFile {
    pub history: Option<Spanned<Human>>,
    /// A size: `"64MiB"`, `"500KB"`, or a number of bytes.
    pub audit_max_size: Option<Spanned<toml::Value>>,
    pub audit_keep: Option<Spanned<i64>>,
}

/// `[mcp_server]`: what `heartbeat mcp` lets agents do (SPEC §13).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerFile {
    pub allow_approve: Option<bool>,
}

/// `[mcp.NAME]`: an MCP server (SPEC §12).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpFile {
    pub command: Option<Spanned<Vec<String>>>,
    pub url: Option<Spanned<String>>,
    pub env: Option<Vec<Spanned<String>>>,
    pub headers_env: Option<BTreeMap<String, Spanned<String>>>,
    pub cwd: Option<Spanned<String>>,
    pub timeout: Option<Human>,
    pub startup_timeout: Option<Human>,
    pub approval: Option<Approval>,
    pub trust_annotations: Option<bool>,
    pub cost_usd: Option<Spanned<f64>>,
    #[serde(default)]
    pub tools: BTreeMap<String, Spanned<McpToolFile>>,
}

/// `[mcp.NAME.tools.TOOL]`: one tool's policy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToolFile {
    pub approval: Option<Approval>,
    pub cost_usd: Option<Spanned<f64>>,
    pub cooldown: Option<Human>,
    pub timeout: Option<Human>,
    pub max_consecutive_failures: Option<Spanned<i64>>,
}

/// `[tools.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFile {
    pub command: Option<Spanned<Vec<String>>>,
    pub timeout: Option<Human>,
    pub approval: Option<Approval>,
    pub description: Option<String>,
    pub cooldown: Option<Human>,
    pub cost_usd: Option<Spanned<f64>>,
    pub max_consecutive_failures: Option<Spanned<i64>>,
}

/// `[telegram]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramFile {
    pub bot_token_env: Option<Spanned<String>>,
    /// Any value, so that `["me"]` is reported as "not a chat id" with the value.
    pub chat_ids: Option<Vec<Spanned<toml::Value>>>,
    pub api_url: Option<Spanned<String>>,
    pub summary: Option<SummaryMode>,
    pub quiet_hours: Option<Spanned<String>>,
    pub max_messages_per_day: Option<Spanned<i64>>,
}

/// `[daemon]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonFile {
    pub every: Option<Spanned<Human>>,
}

/// `[budget]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetFile {
    pub daily_usd: Option<Spanned<f64>>,
}

/// A humantime duration (`90s`, `10m`, `6h`, `1d`), longer than zero and at most
/// [`LONGEST`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Human(pub Duration);

/// 100 years (humantime's `100y`): longer would be no guardrail, and a time computed from it
/// (a cooldown's next due time) could pass what RFC 3339 can write.
const LONGEST: Duration = Duration::from_secs(100 * 31_557_600);

impl<'de> Deserialize<'de> for Human {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Human;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Human, E> {
                // The value as TOML writes it, like every other message about a value.
                let shown = toml::Value::String(s.to_string()).to_string();
                let d = humantime::parse_duration(s.trim())
                    .map_err(|e| E::custom(format!("{shown} is not a duration: {e}")))?;
                if d.is_zero() {
                    return Err(E::custom(format!("{shown}: must be longer than zero")));
                }
                if d > LONGEST {
                    return Err(E::custom(format!("{shown}: must be at most 100 years")));
                }
                Ok(Human(d))
            }
        }
        d.deserialize_str(V)
    }
}
