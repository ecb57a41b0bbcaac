//! The TOML config: lookup order, validation of every key, defaults.
//! OWNER: schedule/config helper. Signatures are the contract; bodies to be written.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono_tz::Tz;

use crate::schedule::ActiveHours;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Autonomy {
    Observe,
    Cautious,
    Full,
}

impl Autonomy {
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::Observe => "observe",
            Autonomy::Cautious => "cautious",
            Autonomy::Full => "full",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainTasks {
    Remind,
    Agent,
}

/// A tool's approval policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Auto,
    Ask,
    Deny,
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Auto => "auto",
            Approval::Ask => "ask",
            Approval::Deny => "deny",
        }
    }
}

/// `[tools.NAME]` as written; absent keys are None (the tool's defaults apply).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolConfig {
    pub command: Option<Vec<String>>,
    pub timeout: Option<Duration>,
    pub approval: Option<Approval>,
    pub description: Option<String>,
}

/// A loaded, validated config. Every value is parsed once here.
#[derive(Clone, Debug)]
pub struct Config {
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
    pub tools: BTreeMap<String, ToolConfig>,
    /// Non-fatal notes (a glob that matched nothing).
    pub warnings: Vec<String>,
}

impl Config {
    pub fn tz(&self) -> Tz {
        self.active.tz
    }
}

/// A config error: names the file, the key and the bad value. Exit code 2.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    pub file: Option<PathBuf>,
    pub key: Option<String>,
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        let mut s = String::new();
        if let Some(f) = &self.file {
            s.push_str(&f.display().to_string());
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
pub struct LoadOptions<'a> {
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

pub fn load(_opts: &LoadOptions) -> Result<Config, ConfigError> {
    unimplemented!()
}
