//! `http`: one HTTP request (the client is `tools/http.rs`).

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::BuiltinTool;
use crate::config::Approval;
use crate::tools::{Invocation, Outcome, ToolSpec, http};

pub(super) struct Http;

impl BuiltinTool for Http {
    fn name(&self) -> &'static str {
        "http"
    }

    fn approval(&self) -> Approval {
        Approval::Ask
    }

    fn description(&self) -> &'static str {
        "Make an HTTP request (url, method, headers, body, expect_status)"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        http::validate(tool, input)
    }

    fn execute(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        _inv: &Invocation,
        stop: Option<&AtomicBool>,
    ) -> Outcome {
        http::run(&spec.name, input, spec.timeout, stop)
    }
}
