//! `notify`: a message to every channel that takes `notify`, or to the one its `channel`
//! names (docs/reference.md#channels). It needs the outbox, so the session carries it out
//! (`engine/session.rs`); here it is only named and validated (the registry checks that a
//! named channel is configured).

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{BuiltinTool, failed};
use crate::config::Approval;
use crate::tools::input::NotifyInput;
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
        "Send a message to the channels that take notify, or to the one named by \"channel\" (through the outbox)"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        NotifyInput::parse(tool, input).map(drop)
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
