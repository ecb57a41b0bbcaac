//! `notify`: a message to the Telegram chats. It needs the outbox, so the session carries
//! it out (`engine/session.rs`); here it is only named and validated.

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{BuiltinTool, failed};
use crate::config::Approval;
use crate::tools::input::TextInput;
use crate::tools::{Invocation, Outcome, ToolSpec};

pub(super) struct Notify;

impl BuiltinTool for Notify {
    fn name(&self) -> &'static str {
        "notify"
    }

    fn approval(&self) -> Approval {
        Approval::Auto
    }

    fn description(&self) -> &'static str {
        "Send a message to the Telegram chats (through the outbox)"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        TextInput::parse_message(tool, input).map(drop)
    }

    fn runs_in_session(&self) -> bool {
        true
    }

    fn execute(
        &self,
        spec: &ToolSpec,
        _input: &Map<String, Value>,
        _inv: &Invocation,
        _stop: Option<&AtomicBool>,
    ) -> Outcome {
        failed(format!(
            "{} is carried out by the run itself, not by execute",
            spec.name
        ))
    }
}
