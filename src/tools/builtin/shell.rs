//! `shell`: a command, as an argv array or a string run by `sh -c`.

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{BuiltinTool, failed};
use crate::config::Approval;
use crate::tools::input::{ShellCmd, ShellInput};
use crate::tools::{Invocation, Outcome, ToolSpec, base_request, process};

pub(super) struct Shell;

impl BuiltinTool for Shell {
    fn name(&self) -> &'static str {
        "shell"
    }

    fn approval(&self) -> Approval {
        Approval::Ask
    }

    fn description(&self) -> &'static str {
        "Run a command (argv array, or a string run by sh -c)"
    }

    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String> {
        ShellInput::parse(tool, input).map(drop)
    }

    fn execute(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        inv: &Invocation,
        stop: Option<&AtomicBool>,
    ) -> Outcome {
        let shell = match ShellInput::parse(&spec.name, input) {
            Ok(shell) => shell,
            Err(e) => return failed(e),
        };
        let mut req = base_request(spec, inv, stop);
        req.argv = match shell.cmd(&spec.name) {
            Ok(ShellCmd::Argv(argv)) => argv,
            Ok(ShellCmd::Script(script)) => {
                vec!["/bin/sh".to_string(), "-c".to_string(), script]
            }
            Err(e) => return failed(e),
        };
        if let Some(cwd) = &shell.cwd {
            req.cwd = inv.workdir.join(cwd);
        }
        if let Some(env) = &shell.env {
            // Heartbeat's own variables stay authoritative.
            req.env
                .splice(0..0, env.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(stdin) = &shell.stdin {
            req.stdin = Some(stdin.as_bytes().to_vec());
        }
        if let Ok(Some(t)) = shell.timeout(&spec.name) {
            req.timeout = t;
        }
        process::run(&req)
    }
}
