//! The built-in tools (docs/reference.md#built-in-tools): one [`BuiltinTool`] each, and one
//! list, [`BUILTINS`], that the registry, validation, execution and the config loader (the
//! names `[tools.NAME]` may only tune and no MCP server may take) all read.
//!
//! Adding a built-in: a file here with a unit struct implementing [`BuiltinTool`], and its
//! line in [`BUILTINS`].
//!
//! Invariants:
//! - [`BuiltinTool::validate`] is the whole check of an input's shape; [`BuiltinTool::execute`]
//!   is only called with an input that passed it.
//! - Names are unique and are valid tool names (checked by a unit test).

mod files;
mod http;
mod log;
mod notify;
mod shell;

use std::fmt;
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{Invocation, Outcome, ToolSpec};
use crate::config::Approval;

/// Every built-in tool (the registry lists tools by name, whatever the order here).
pub(crate) const BUILTINS: [&dyn BuiltinTool; 6] = [
    &shell::Shell,
    &log::Log,
    &files::WRITE_FILE,
    &files::APPEND_FILE,
    &http::Http,
    &notify::Notify,
];

/// One tool that exists without a `command`.
pub(crate) trait BuiltinTool: Sync {
    /// What a task calls it (`@name`); also the `[tools.name]` that tunes it.
    fn name(&self) -> &'static str;

    /// Whether it asks first, unless `[tools.name] approval` says otherwise.
    fn approval(&self) -> Approval;

    /// One line for listings.
    fn description(&self) -> &'static str;

    /// Check the input's shape before anything runs; the error is the task's reason. `tool`
    /// is the name the task used (the messages name it).
    fn validate(&self, tool: &str, input: &Map<String, Value>) -> Result<(), String>;

    /// Whether running it changes anything outside heartbeat: a one-time task's start is
    /// then recorded durably before it runs (never run twice).
    fn outside_effects(&self) -> bool {
        true
    }

    /// Whether the session carries it out itself (it needs the store or the outbox, as
    /// `notify` does); [`execute`](BuiltinTool::execute) is then never called on a worker.
    fn runs_in_session(&self) -> bool {
        false
    }

    /// Run it with an input that passed [`validate`](BuiltinTool::validate). `stop` set
    /// means stop now (a running process's group is stopped).
    fn execute(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        inv: &Invocation,
        stop: Option<&AtomicBool>,
    ) -> Outcome;
}

impl fmt::Debug for dyn BuiltinTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Builtin({})", self.name())
    }
}

impl PartialEq for dyn BuiltinTool {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// The built-in tool called `name`.
pub(crate) fn builtin(name: &str) -> Option<&'static dyn BuiltinTool> {
    BUILTINS.into_iter().find(|b| b.name() == name)
}

/// Whether `name` is a built-in tool's (reserved in the config).
#[cfg(test)]
pub(crate) fn is_builtin(name: &str) -> bool {
    crate::model::is_builtin_tool(name)
}

/// A failed outcome that says why.
fn failed(error: String) -> Outcome {
    Outcome {
        error: Some(error),
        ..Outcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::config::ToolConfig;
    use crate::tools::{Registry, ToolKind};

    #[test]
    fn every_builtin_is_listed_once_under_a_valid_name() {
        let mut names: Vec<&str> = BUILTINS.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BUILTINS.len(), "a name is listed twice");
        for b in BUILTINS {
            assert_eq!(builtin(b.name()).map(|f| f.name()), Some(b.name()));
            let first = b.name().chars().next().unwrap();
            assert!(first.is_ascii_lowercase(), "{}", b.name());
            assert!(
                b.name()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                b.name()
            );
            assert!(!b.description().is_empty(), "{}", b.name());
        }
        assert!(builtin("agent").is_none());
    }

    /// The config reserves the names of `model::BUILTIN_TOOLS`: the same names, in the same
    /// order, as the tools that exist.
    #[test]
    fn the_reserved_names_are_the_builtins() {
        let names: Vec<&str> = BUILTINS.iter().map(|b| b.name()).collect();
        assert_eq!(names, crate::model::BUILTIN_TOOLS);
    }

    #[test]
    fn every_builtin_is_in_the_registry_and_validates_its_input() {
        let registry = Registry::new(&BTreeMap::new());
        let good = |name: &str| -> Map<String, Value> {
            let v = match name {
                "shell" => serde_json::json!({"cmd": ["true"]}),
                "log" | "notify" => serde_json::json!({"text": "hi"}),
                "write_file" | "append_file" => serde_json::json!({"path": "f", "text": "x"}),
                "http" => serde_json::json!({"url": "http://127.0.0.1:9/"}),
                other => panic!("a new built-in, {other}: give it a valid input here"),
            };
            v.as_object().unwrap().clone()
        };
        for b in BUILTINS {
            let spec = registry.get(b.name()).unwrap();
            assert_eq!(spec.kind, ToolKind::Builtin(b), "{}", b.name());
            assert_eq!(spec.approval, b.approval());
            assert_eq!(spec.validate(&good(b.name())), Ok(()), "{}", b.name());
            let mut bad = good(b.name());
            bad.insert("no_such_key".into(), Value::Null);
            let err = spec.validate(&bad).unwrap_err();
            assert!(err.contains("no_such_key"), "{}: {err}", b.name());
            // `[tools.NAME]` without a command tunes it.
            let tools = BTreeMap::from([(
                b.name().to_string(),
                ToolConfig {
                    approval: Some(Approval::Deny),
                    ..ToolConfig::default()
                },
            )]);
            let tuned = Registry::new(&tools).get(b.name()).unwrap().into_owned();
            assert_eq!(tuned.approval, Approval::Deny, "{}", b.name());
        }
    }
}
