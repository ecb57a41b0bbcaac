//! The tool registry (built-ins and `[tools.NAME]`), input validation, and execution.
//! OWNER: tools helper. Signatures are the contract; bodies to be written.

pub mod process;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{Approval, Config};

#[derive(Clone, Debug, PartialEq)]
pub enum ToolKind {
    Shell,
    Log,
    WriteFile,
    AppendFile,
    /// A config tool (also `agent`): argv with `{key}` placeholders, no shell.
    Command(Vec<String>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub kind: ToolKind,
    pub timeout: Duration,
    pub approval: Approval,
    pub description: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Registry {
    tools: BTreeMap<String, ToolSpec>,
}

impl Registry {
    pub fn from_config(_cfg: &Config) -> Registry {
        unimplemented!()
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    /// Names of every tool that exists, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }
}

impl ToolSpec {
    /// Check the input's shape before anything runs (missing `cmd`, a placeholder key that
    /// the input lacks, …). The error is shown as the task's reason.
    pub fn validate(&self, _input: &Map<String, Value>) -> Result<(), String> {
        unimplemented!()
    }
}

/// Where and as what a tool runs.
pub struct Invocation<'a> {
    pub task_id: &'a str,
    pub run_id: &'a str,
    /// The HEARTBEAT.md's directory.
    pub workdir: &'a Path,
    /// Environment variables removed from the tool's environment (the Telegram token's).
    pub remove_env: &'a [String],
}

/// What a tool did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub success: bool,
    pub exit_code: Option<i32>,
    /// Standard output, lossy UTF-8, at most 1 MiB kept.
    pub stdout: String,
    /// Bytes of standard output beyond the cap (counted, not kept).
    pub stdout_dropped: u64,
    pub stderr: String,
    pub stderr_dropped: u64,
    /// Why it failed (`exit status 3`, `timed out after 5s`, `cannot start …`); None on success.
    pub error: Option<String>,
    pub duration: Duration,
    /// From a last-line JSON object on standard output.
    pub cost_usd: Option<f64>,
    pub summary: Option<String>,
}

pub fn execute(_spec: &ToolSpec, _input: &Map<String, Value>, _inv: &Invocation) -> Outcome {
    unimplemented!()
}
