//! `log`: a line of text, recorded as the task's output.

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{BuiltinTool, failed};
use crate::config::Approval;
use crate::tools::input::TextInput;
use crate::tools::{Invocation, Outcome, ToolSpec};

pub(super) struct Log;

impl BuiltinTool for Log {
    fn name(&self) -> &'static str {
        "log"
    }

    fn approval(&self) -> Approval {
        Approval::Auto
    }

    fn description(&self) -> &'static str {
        "Record a line of text"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        TextInput::parse(tool, input).map(drop)
    }

    fn outside_effects(&self) -> bool {
        false
    }

    fn execute(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        _inv: &Invocation,
        _stop: Option<&AtomicBool>,
    ) -> Outcome {
        match TextInput::parse(&spec.name, input) {
            Ok(log) => Outcome {
                success: true,
                stdout: log.text,
                ..Outcome::default()
            },
            Err(e) => failed(e),
        }
    }
}
