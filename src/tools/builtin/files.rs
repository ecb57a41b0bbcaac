//! `write_file` (replace a file's content, atomically) and `append_file` (one `O_APPEND`
//! write), relative to the HEARTBEAT.md's directory.

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{BuiltinTool, failed};
use crate::config::Approval;
use crate::tools::input::FileInput;
use crate::tools::{Invocation, Outcome, ToolSpec, write_file};

pub(super) struct WriteFile;
pub(super) struct AppendFile;

fn run(spec: &ToolSpec, input: &Map<String, Value>, inv: &Invocation, append: bool) -> Outcome {
    match FileInput::parse(&spec.name, input) {
        Ok(file) => write_file(&file, inv, append),
        Err(e) => failed(e),
    }
}

impl BuiltinTool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn approval(&self) -> Approval {
        Approval::Ask
    }

    fn description(&self) -> &'static str {
        "Replace a file's content"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        FileInput::parse(tool, input).map(drop)
    }

    fn execute(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        inv: &Invocation,
        _stop: Option<&AtomicBool>,
    ) -> Outcome {
        run(spec, input, inv, false)
    }
}

impl BuiltinTool for AppendFile {
    fn name(&self) -> &'static str {
        "append_file"
    }

    fn approval(&self) -> Approval {
        Approval::Ask
    }

    fn description(&self) -> &'static str {
        "Append text to a file"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        FileInput::parse(tool, input).map(drop)
    }

    fn execute(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        inv: &Invocation,
        _stop: Option<&AtomicBool>,
    ) -> Outcome {
        run(spec, input, inv, true)
    }
}
