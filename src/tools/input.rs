//! The inputs of the built-in tools as types (docs/reference.md#built-in-tools): one serde struct
//! per tool, parsed once from the task's JSON object. Config tools and `agent` take any keys and
//! stay maps.
//!
//! Invariants:
//! - A key a tool does not take is an error naming it and the keys it does take, before
//!   anything else is looked at (a typo never silently drops a setting).
//! - Errors name the key in quotes and say what it must be, in one wording for every tool
//!   (`key "cwd" for shell must be a string, not a number`).
//! - What serde cannot say (non-empty, no NUL byte, durations) is checked here too: a value
//!   of these types is ready to run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// `log` and `notify`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TextInput {
    pub text: String,
}

/// `notify`: the text, and the one channel it goes to (else every channel that takes
/// `notify`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotifyInput {
    pub text: String,
    pub channel: Option<String>,
}

/// `write_file` and `append_file`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileInput {
    pub path: String,
    pub text: String,
}

/// `shell`. `cmd` and `timeout` take two shapes each, checked by hand for their messages;
/// `stdin` is passed as it is (a NUL byte is fine on a pipe).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShellInput {
    cmd: Value,
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub stdin: Option<String>,
    timeout: Option<Value>,
}

/// What `shell` runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ShellCmd {
    /// Run by `sh -c`.
    Script(String),
    /// Run directly.
    Argv(Vec<String>),
}

const TEXT_KEYS: &[&str] = &["text"];
const NOTIFY_KEYS: &[&str] = &["text", "channel"];
const FILE_KEYS: &[&str] = &["path", "text"];
const SHELL_KEYS: &[&str] = &["cmd", "cwd", "env", "stdin", "timeout"];

impl TextInput {
    pub(crate) fn parse(tool: &str, input: &Map<String, Value>) -> Result<TextInput, String> {
        parse(tool, input, TEXT_KEYS)
    }
}

impl NotifyInput {
    /// A message to send (`notify`): Telegram refuses an empty one, and it would stay in the
    /// outbox, failing at every run for a day.
    pub(crate) fn parse(tool: &str, input: &Map<String, Value>) -> Result<NotifyInput, String> {
        let message: NotifyInput = parse(tool, input, NOTIFY_KEYS)?;
        if message.text.trim().is_empty() {
            return Err(format!("key \"text\" for {tool} must not be empty"));
        }
        if message.channel.as_deref().is_some_and(str::is_empty) {
            return Err(format!("key \"channel\" for {tool} must not be empty"));
        }
        Ok(message)
    }
}

impl FileInput {
    pub(crate) fn parse(tool: &str, input: &Map<String, Value>) -> Result<FileInput, String> {
        let file: FileInput = parse(tool, input, FILE_KEYS)?;
        if file.path.is_empty() {
            return Err(format!("key \"path\" for {tool} must not be empty"));
        }
        no_nul(tool, "path", &file.path)?;
        Ok(file)
    }
}

impl ShellInput {
    pub(crate) fn parse(tool: &str, input: &Map<String, Value>) -> Result<ShellInput, String> {
        let shell: ShellInput = parse(tool, input, SHELL_KEYS)?;
        shell.cmd(tool)?;
        if let Some(cwd) = &shell.cwd {
            if cwd.is_empty() {
                return Err(format!("key \"cwd\" for {tool} must not be empty"));
            }
            no_nul(tool, "cwd", cwd)?;
        }
        for (k, v) in shell.env.iter().flatten() {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(format!(
                    "key \"env\" for {tool}: {k:?} is not a valid variable name"
                ));
            }
            no_nul(tool, "env", v)?;
        }
        shell.timeout(tool)?;
        Ok(shell)
    }

    /// The command: a non-empty script, or a non-empty argv whose program is not empty.
    pub(crate) fn cmd(&self, tool: &str) -> Result<ShellCmd, String> {
        let bad = || {
            format!(
                "key \"cmd\" for {tool} must be a non-empty string or a non-empty array of strings"
            )
        };
        match &self.cmd {
            Value::String(s) => {
                if s.trim().is_empty() {
                    return Err(bad());
                }
                no_nul(tool, "cmd", s)?;
                Ok(ShellCmd::Script(s.clone()))
            }
            Value::Array(items) if !items.is_empty() => {
                let mut argv = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let Value::String(s) = item else {
                        return Err(format!("{}; element {i} is {}", bad(), type_name(item)));
                    };
                    if i == 0 && s.is_empty() {
                        return Err(format!("{}; the program (element 0) is empty", bad()));
                    }
                    no_nul(tool, "cmd", s)?;
                    argv.push(s.clone());
                }
                Ok(ShellCmd::Argv(argv))
            }
            Value::Array(_) => Err(bad()),
            other => Err(format!("{}, not {}", bad(), type_name(other))),
        }
    }

    /// The task's own timeout, when it sets one.
    pub(crate) fn timeout(&self, tool: &str) -> Result<Option<Duration>, String> {
        self.timeout
            .as_ref()
            .map(|v| input_timeout(tool, v))
            .transpose()
    }
}

/// A `timeout` input value: a humantime string (`"30s"`) or a positive number of seconds.
pub(crate) fn input_timeout(tool: &str, v: &Value) -> Result<Duration, String> {
    let bad = |why: String| format!("key \"timeout\" for {tool} {why}");
    let d = match v {
        Value::String(s) => humantime::parse_duration(s.trim()).map_err(|e| {
            bad(format!(
                "is not a duration like \"30s\" or \"5m\" ({s:?}: {e})"
            ))
        })?,
        Value::Number(n) => {
            let secs = n.as_f64().unwrap_or(f64::NAN);
            if !(secs.is_finite() && secs > 0.0) {
                return Err(bad(format!(
                    "must be a positive number of seconds, not {n}"
                )));
            }
            Duration::try_from_secs_f64(secs)
                .map_err(|e| bad(format!("is out of range ({n}: {e})")))?
        }
        other => {
            return Err(bad(format!(
                "must be a duration string like \"30s\" or a number of seconds, not {}",
                type_name(other)
            )));
        }
    };
    if d.is_zero() {
        return Err(bad("must be positive".to_string()));
    }
    Ok(d)
}

/// Parse `input` as `T`: first the keys (the exact unknown-key message), then serde, whose
/// errors are put in the one wording of this module.
pub(super) fn parse<T: DeserializeOwned>(
    tool: &str,
    input: &Map<String, Value>,
    keys: &[&str],
) -> Result<T, String> {
    if let Some(k) = input.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!(
            "unknown key \"{k}\" for {tool} (expected {})",
            keys.join(", ")
        ));
    }
    serde_path_to_error::deserialize(input).map_err(|e| {
        let mut path = e.path().iter().map(|s| s.to_string());
        let key = path.next().unwrap_or_default();
        // Inside an object of strings (`env`): which entry is wrong.
        let entry = path.next();
        let inner = e.into_inner().to_string();
        if let Some(field) = inner
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            return format!("missing key \"{field}\" for {tool}");
        }
        match inner
            .strip_prefix("invalid type: ")
            .and_then(|r| r.split_once(", expected "))
        {
            Some((got, _)) if entry.is_some() => format!(
                "key \"{key}\" for {tool} must be an object of strings; \"{}\" is {}",
                entry.unwrap_or_default(),
                serde_kind(got)
            ),
            Some((got, expected)) => {
                let expected = match expected {
                    "a map" => "an object of strings",
                    e => e,
                };
                format!(
                    "key \"{key}\" for {tool} must be {expected}, not {}",
                    serde_kind(got)
                )
            }
            None => format!("key \"{key}\" for {tool}: {inner}"),
        }
    })
}

/// serde's name of what it found (`integer `5``, `map`) as the module's (`a number`).
fn serde_kind(got: &str) -> &'static str {
    let word = got.split([' ', '`']).next().unwrap_or(got);
    match word {
        "integer" | "floating" => "a number",
        "boolean" => "a boolean",
        "string" | "char" => "a string",
        "sequence" => "an array",
        "map" => "an object",
        "null" | "unit" => "null",
        _ => "something else",
    }
}

/// What a JSON value is, for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn no_nul(tool: &str, key: &str, s: &str) -> Result<(), String> {
    if s.contains('\0') {
        Err(format!("key \"{key}\" for {tool} contains a NUL byte"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn serde_errors_name_the_key_in_one_wording() {
        let e = FileInput::parse("write_file", &obj(json!({"path": true, "text": "x"})));
        assert_eq!(
            e.unwrap_err(),
            "key \"path\" for write_file must be a string, not a boolean"
        );
        let e = TextInput::parse("log", &obj(json!({"text": ["a"]})));
        assert_eq!(
            e.unwrap_err(),
            "key \"text\" for log must be a string, not an array"
        );
        for blank in ["", " \n"] {
            let e = NotifyInput::parse("notify", &obj(json!({ "text": blank })));
            assert_eq!(e.unwrap_err(), "key \"text\" for notify must not be empty");
        }
        let e = ShellInput::parse("shell", &obj(json!({"cmd": "true", "env": [1]})));
        assert_eq!(
            e.unwrap_err(),
            "key \"env\" for shell must be an object of strings, not an array"
        );
        let ok = ShellInput::parse("shell", &obj(json!({"cmd": ["ls", "-l"], "timeout": 5})));
        let ok = ok.unwrap();
        assert_eq!(
            ok.cmd("shell").unwrap(),
            ShellCmd::Argv(vec!["ls".into(), "-l".into()])
        );
        assert_eq!(ok.timeout("shell").unwrap(), Some(Duration::from_secs(5)));
    }
}
