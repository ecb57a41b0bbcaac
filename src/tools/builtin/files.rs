//! `write_file` (replace a file's content, atomically) and `append_file` (one `O_APPEND`
//! write), relative to the HEARTBEAT.md's directory.

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{BuiltinTool, failed};
use crate::config::Approval;
use crate::tools::input::FileInput;
use crate::tools::{Invocation, Outcome, ToolSpec, write_file};

/// One of the two file tools: they differ only in their name, description and whether they
/// append.
pub(super) struct FileTool {
    name: &'static str,
    description: &'static str,
    append: bool,
}

pub(super) const WRITE_FILE: FileTool = FileTool {
    name: "write_file",
    description: "Replace a file's content",
    append: false,
};

pub(super) const APPEND_FILE: FileTool = FileTool {
    name: "append_file",
    description: "Append text to a file",
    append: true,
};

impl BuiltinTool for FileTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn approval(&self) -> Approval {
        Approval::Ask
    }

    fn description(&self) -> &'static str {
        self.description
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
        match FileInput::parse(&spec.name, input) {
            Ok(file) => write_file(&file, inv, self.append),
            Err(e) => failed(e),
        }
    }
}
