//! The tool registry (built-ins and `[tools.NAME]`), input validation, and execution.
//! OWNER: tools helper.
//!
//! Invariants:
//!
//! - [`ToolSpec::validate`] is the only judge of an input's shape and runs before anything
//!   executes; [`execute`] runs it again, so a bad input is an `Outcome` failure, never a panic.
//! - A config tool's argv is its `command` with `{key}` placeholders replaced in one
//!   left-to-right pass; a placeholder never splits or joins arguments (one element in, one
//!   element out) and a substituted value is never scanned again.
//! - No shell is involved unless the `shell` tool is given a string `cmd`.
//! - Every process gets `HEARTBEAT_TASK_ID` and `HEARTBEAT_RUN_ID`, and loses
//!   `HEARTBEAT_TELEGRAM_TOKEN` and every name in [`Invocation::remove_env`].
//! - `write_file` never leaves a partial file: the target holds its old content or the whole
//!   new one, keeps its mode, and no temp file stays behind (SPEC §4).

pub mod http;
pub mod process;

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::config::{Approval, Config, ToolConfig};

/// The largest input also given in `$HEARTBEAT_INPUT` (Linux's limit for one environment
/// string is 128 KiB, name included).
pub const MAX_ENV_INPUT: usize = 120 * 1024;

/// A tool's timeout when neither its config nor its input sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Always removed from a tool's environment, whatever `telegram.bot_token_env` says.
pub const TOKEN_ENV: &str = "HEARTBEAT_TELEGRAM_TOKEN";

#[derive(Clone, Debug, PartialEq)]
pub enum ToolKind {
    Shell,
    Log,
    WriteFile,
    AppendFile,
    /// One HTTP request (see [`http`]).
    Http,
    /// A message to the Telegram chats. It needs the outbox, so the session carries it
    /// out (`execute` only validates).
    Notify,
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

/// Built-in tools: name, kind, default approval, description.
const BUILTINS: [(&str, ToolKind, Approval, &str); 6] = [
    (
        "shell",
        ToolKind::Shell,
        Approval::Ask,
        "Run a command (argv array, or a string run by sh -c)",
    ),
    (
        "log",
        ToolKind::Log,
        Approval::Auto,
        "Record a line of text",
    ),
    (
        "write_file",
        ToolKind::WriteFile,
        Approval::Ask,
        "Replace a file's content",
    ),
    (
        "append_file",
        ToolKind::AppendFile,
        Approval::Ask,
        "Append text to a file",
    ),
    (
        "http",
        ToolKind::Http,
        Approval::Ask,
        "Make an HTTP request (url, method, headers, body, expect_status)",
    ),
    (
        "notify",
        ToolKind::Notify,
        Approval::Auto,
        "Send a message to the Telegram chats (through the outbox)",
    ),
];

impl Registry {
    pub fn from_config(cfg: &Config) -> Registry {
        Registry::new(&cfg.tools)
    }

    /// The built-ins, with `[tools.NAME]` overrides of their timeout, approval and
    /// description, plus every `[tools.NAME]` that has a `command` (default approval `ask`).
    /// A `[tools.NAME]` with a `command` and a built-in's name replaces that built-in; one
    /// without a `command` and without a built-in's name is not a tool (the config loader
    /// reports it).
    pub fn new(tools: &BTreeMap<String, ToolConfig>) -> Registry {
        let mut map = BTreeMap::new();
        for (name, kind, approval, description) in BUILTINS {
            map.insert(
                name.to_string(),
                ToolSpec {
                    name: name.to_string(),
                    kind,
                    timeout: DEFAULT_TIMEOUT,
                    approval,
                    description: Some(description.to_string()),
                },
            );
        }
        for (name, tc) in tools {
            if let Some(command) = &tc.command {
                map.insert(
                    name.clone(),
                    ToolSpec {
                        name: name.clone(),
                        kind: ToolKind::Command(command.clone()),
                        timeout: tc.timeout.unwrap_or(DEFAULT_TIMEOUT),
                        approval: tc.approval.unwrap_or(Approval::Ask),
                        description: tc.description.clone(),
                    },
                );
            } else if let Some(spec) = map.get_mut(name) {
                if let Some(t) = tc.timeout {
                    spec.timeout = t;
                }
                if let Some(a) = tc.approval {
                    spec.approval = a;
                }
                if let Some(d) = &tc.description {
                    spec.description = Some(d.clone());
                }
            }
        }
        Registry { tools: map }
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    /// Names of every tool that exists, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }
}

const SHELL_KEYS: &str = "cmd, cwd, env, stdin, timeout";

impl ToolSpec {
    /// Check the input's shape before anything runs (missing `cmd`, a placeholder key that
    /// the input lacks, …). The error is shown as the task's reason.
    pub fn validate(&self, input: &Map<String, Value>) -> Result<(), String> {
        match &self.kind {
            ToolKind::Shell => validate_shell(&self.name, input),
            ToolKind::Log | ToolKind::Notify => {
                only_keys(&self.name, input, &["text"])?;
                required_str(&self.name, input, "text").map(drop)
            }
            ToolKind::WriteFile | ToolKind::AppendFile => {
                only_keys(&self.name, input, &["path", "text"])?;
                let path = required_str(&self.name, input, "path")?;
                if path.is_empty() {
                    return Err(format!("key \"path\" for {} must not be empty", self.name));
                }
                if path.contains('\0') {
                    return Err(format!(
                        "key \"path\" for {} contains a NUL byte",
                        self.name
                    ));
                }
                required_str(&self.name, input, "text").map(drop)
            }
            ToolKind::Http => http::validate(&self.name, input),
            ToolKind::Command(argv) => self.command_argv(argv, input).map(drop),
        }
    }

    /// The argv of a config tool: `{key}` in each argument replaced by the string form of
    /// `input.key`, in one pass; one element in, one element out.
    fn command_argv(
        &self,
        argv: &[String],
        input: &Map<String, Value>,
    ) -> Result<Vec<String>, String> {
        if argv.first().is_none_or(String::is_empty) {
            return Err(format!(
                "tools.{}.command is empty: it needs at least a program",
                self.name
            ));
        }
        let mut out = Vec::with_capacity(argv.len());
        for arg in argv {
            let mut s = String::with_capacity(arg.len());
            let mut rest = arg.as_str();
            while let Some(open) = rest.find('{') {
                s.push_str(&rest[..open]);
                let after = &rest[open + 1..];
                // `{{key}}` is the literal text `{key}` (for `${HOME}` in an `sh -c` script).
                if let Some(inner) = after.strip_prefix('{')
                    && let Some(key) = placeholder_key(inner)
                    && inner[key.len() + 1..].starts_with('}')
                {
                    s.push('{');
                    s.push_str(key);
                    s.push('}');
                    rest = &inner[key.len() + 2..];
                    continue;
                }
                match placeholder_key(after) {
                    Some(key) => {
                        let value = match input.get(key) {
                            None => {
                                return Err(format!(
                                    "missing input key \"{key}\" for placeholder {{{key}}} in tools.{}.command",
                                    self.name
                                ));
                            }
                            Some(Value::Null) => {
                                return Err(format!(
                                    "input key \"{key}\" is null, but placeholder {{{key}}} in tools.{}.command needs a value",
                                    self.name
                                ));
                            }
                            Some(v) => string_form(v),
                        };
                        if value.contains('\0') {
                            return Err(format!(
                                "input key \"{key}\" for placeholder {{{key}}} in tools.{}.command contains a NUL byte",
                                self.name
                            ));
                        }
                        s.push_str(&value);
                        rest = &after[key.len() + 1..];
                    }
                    None => {
                        s.push('{');
                        rest = after;
                    }
                }
            }
            s.push_str(rest);
            out.push(s);
        }
        Ok(out)
    }
}

/// The key of a placeholder whose `{` was just consumed: `[A-Za-z_][A-Za-z0-9_-]*` followed by
/// `}`. Anything else (`{"a": 1}`, `{ x }`, `{}`) is literal text.
fn placeholder_key(after_brace: &str) -> Option<&str> {
    let close = after_brace.find('}')?;
    let key = &after_brace[..close];
    let mut chars = key.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(key)
}

/// Strings as they are; numbers and booleans as JSON text; arrays and objects as compact JSON.
fn string_form(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn only_keys(tool: &str, input: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match input.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown key \"{k}\" for {tool} (expected {})",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

fn required_str<'a>(
    tool: &str,
    input: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, String> {
    match input.get(key) {
        None => Err(format!("missing key \"{key}\" for {tool}")),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(format!(
            "key \"{key}\" for {tool} must be a string, not {}",
            type_name(v)
        )),
    }
}

fn no_nul(tool: &str, key: &str, s: &str) -> Result<(), String> {
    if s.contains('\0') {
        Err(format!("key \"{key}\" for {tool} contains a NUL byte"))
    } else {
        Ok(())
    }
}

fn validate_shell(tool: &str, input: &Map<String, Value>) -> Result<(), String> {
    if let Some(k) = input
        .keys()
        .find(|k| !["cmd", "cwd", "env", "stdin", "timeout"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown key \"{k}\" for {tool} (expected {SHELL_KEYS})"
        ));
    }
    let bad_cmd = || {
        format!("key \"cmd\" for {tool} must be a non-empty string or a non-empty array of strings")
    };
    match input.get("cmd") {
        None => return Err(format!("missing key \"cmd\" for {tool}")),
        Some(Value::String(s)) => {
            if s.trim().is_empty() {
                return Err(bad_cmd());
            }
            no_nul(tool, "cmd", s)?;
        }
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(bad_cmd());
            }
            for (i, item) in items.iter().enumerate() {
                let Value::String(s) = item else {
                    return Err(format!("{}; element {i} is {}", bad_cmd(), type_name(item)));
                };
                if i == 0 && s.is_empty() {
                    return Err(format!("{}; the program (element 0) is empty", bad_cmd()));
                }
                no_nul(tool, "cmd", s)?;
            }
        }
        Some(v) => return Err(format!("{}, not {}", bad_cmd(), type_name(v))),
    }
    if input.contains_key("cwd") {
        let cwd = required_str(tool, input, "cwd")?;
        if cwd.is_empty() {
            return Err(format!("key \"cwd\" for {tool} must not be empty"));
        }
        no_nul(tool, "cwd", cwd)?;
    }
    match input.get("env") {
        None => {}
        Some(Value::Object(env)) => {
            for (k, v) in env {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err(format!(
                        "key \"env\" for {tool}: {k:?} is not a valid variable name"
                    ));
                }
                let Value::String(s) = v else {
                    return Err(format!(
                        "key \"env\" for {tool} must be an object of strings; \"{k}\" is {}",
                        type_name(v)
                    ));
                };
                no_nul(tool, "env", s)?;
            }
        }
        Some(v) => {
            return Err(format!(
                "key \"env\" for {tool} must be an object of strings, not {}",
                type_name(v)
            ));
        }
    }
    if input.contains_key("stdin") {
        required_str(tool, input, "stdin")?;
    }
    if let Some(v) = input.get("timeout") {
        input_timeout(tool, v)?;
    }
    Ok(())
}

/// A `timeout` input value: a humantime string (`"30s"`) or a positive number of seconds.
fn input_timeout(tool: &str, v: &Value) -> Result<Duration, String> {
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

pub fn execute(spec: &ToolSpec, input: &Map<String, Value>, inv: &Invocation) -> Outcome {
    execute_with_stop(spec, input, inv, None)
}

/// [`execute`], with an external "stop now" flag: once it is set, a running process's group
/// is stopped (SIGTERM, SIGKILL after the grace period) and the outcome's error is `stopped`.
/// An `http` request is not sent once it is set, and a running one is abandoned.
pub fn execute_with_stop(
    spec: &ToolSpec,
    input: &Map<String, Value>,
    inv: &Invocation,
    stop: Option<&AtomicBool>,
) -> Outcome {
    let started = Instant::now();
    if let Err(e) = spec.validate(input) {
        return Outcome {
            error: Some(e),
            duration: started.elapsed(),
            ..Outcome::default()
        };
    }
    crate::error::work_started();
    let mut outcome = match &spec.kind {
        ToolKind::Log => Outcome {
            success: true,
            stdout: str_key(input, "text").to_string(),
            ..Outcome::default()
        },
        ToolKind::WriteFile => write_file(input, inv, false),
        ToolKind::AppendFile => write_file(input, inv, true),
        ToolKind::Http => http::run(&spec.name, input, spec.timeout, stop),
        ToolKind::Notify => Outcome {
            error: Some("notify is delivered by the run itself, not by execute".into()),
            ..Outcome::default()
        },
        ToolKind::Shell => {
            let mut req = base_request(spec, inv, stop);
            match input.get("cmd") {
                Some(Value::Array(items)) => {
                    req.argv = items.iter().map(string_form).collect();
                }
                other => {
                    let script = other.map(string_form).unwrap_or_default();
                    req.argv = vec!["/bin/sh".to_string(), "-c".to_string(), script];
                }
            }
            if let Some(Value::String(cwd)) = input.get("cwd") {
                req.cwd = inv.workdir.join(cwd);
            }
            if let Some(Value::Object(env)) = input.get("env") {
                let user = env.iter().map(|(k, v)| (k.clone(), string_form(v)));
                // Heartbeat's own variables stay authoritative.
                req.env.splice(0..0, user);
            }
            if let Some(Value::String(s)) = input.get("stdin") {
                req.stdin = Some(s.as_bytes().to_vec());
            }
            if let Some(t) = input
                .get("timeout")
                .and_then(|v| input_timeout("shell", v).ok())
            {
                req.timeout = t;
            }
            process::run(&req)
        }
        ToolKind::Command(argv) => {
            let argv = match spec.command_argv(argv, input) {
                Ok(a) => a,
                Err(e) => return failed(e, started),
            };
            let json = Value::Object(input.clone()).to_string();
            let mut req = base_request(spec, inv, stop);
            req.argv = argv;
            // Linux refuses one environment string over 128 KiB (the program would not even
            // start): a larger input is only on standard input.
            if json.len() <= MAX_ENV_INPUT {
                req.env.push(("HEARTBEAT_INPUT".to_string(), json.clone()));
            }
            req.stdin = Some(format!("{json}\n").into_bytes());
            process::run(&req)
        }
    };
    outcome.duration = started.elapsed();
    outcome
}

fn failed(error: String, started: Instant) -> Outcome {
    Outcome {
        error: Some(error),
        duration: started.elapsed(),
        ..Outcome::default()
    }
}

fn str_key<'a>(input: &'a Map<String, Value>, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// What every tool process shares: working directory, timeout, heartbeat's variables, and
/// the token variables removed.
fn base_request<'a>(
    spec: &ToolSpec,
    inv: &Invocation,
    stop: Option<&'a AtomicBool>,
) -> process::Request<'a> {
    let mut req = process::Request::new(Vec::new(), inv.workdir.to_path_buf(), spec.timeout);
    req.env_remove = inv.remove_env.to_vec();
    req.env_remove.push(TOKEN_ENV.to_string());
    req.env = vec![
        ("HEARTBEAT_TASK_ID".to_string(), inv.task_id.to_string()),
        ("HEARTBEAT_RUN_ID".to_string(), inv.run_id.to_string()),
    ];
    req.stop = stop;
    req
}

/// `write_file` replaces the file atomically ([`replace_file`]); `append_file` is one
/// `O_APPEND` write.
fn write_file(input: &Map<String, Value>, inv: &Invocation, append: bool) -> Outcome {
    let path: PathBuf = inv.workdir.join(str_key(input, "path"));
    let text = str_key(input, "text");
    let result = if append {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
    } else {
        replace_file(&path, text.as_bytes())
    };
    match result {
        Ok(()) => Outcome {
            success: true,
            stdout: format!(
                "{} {} bytes to {}",
                if append { "appended" } else { "wrote" },
                text.len(),
                path.display()
            ),
            ..Outcome::default()
        },
        Err(e) => Outcome {
            error: Some(format!("cannot write {:?}: {e}", path)),
            ..Outcome::default()
        },
    }
}

static TEMP_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Replace `path` (a symlink's target, the link kept) with `contents`: a temp file in the
/// same directory, with the old file's mode and owner (a new file's mode is what
/// `File::create` gives: 0666 less the umask), synced, renamed over the target, then the
/// directory synced. Readers see the old content or the new, never a part; on failure (a
/// full disk) the old file is intact and the temp file is removed.
fn replace_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let target = resolve_links(path)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy());
    let old = match fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let pid = std::process::id();
    let (tmp, file) = loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.heartbeat-{pid}-{n}.tmp"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            // Left by a crashed process with the same pid: try the next number.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1_000_000 => {}
            Err(e) => return Err(e),
        }
    };
    let written = fill_temp(file, old.as_ref(), contents).and_then(|()| fs::rename(&tmp, &target));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is what makes the new content visible: sync the directory so that it
    // survives a crash. Some filesystems refuse fsync on a directory; the file is replaced
    // all the same.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Write and sync the temp file, with the old file's owner (best effort: only root may give
/// a file away) and mode (set after the chown, which clears set-id bits).
fn fill_temp(mut file: fs::File, old: Option<&fs::Metadata>, contents: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::{MetadataExt, fchown};
    if let Some(old) = old {
        let ours = file.metadata()?;
        if ours.uid() != old.uid() || ours.gid() != old.gid() {
            let _ = fchown(&file, Some(old.uid()), Some(old.gid()))
                .or_else(|_| fchown(&file, None, Some(old.gid())));
        }
        file.set_permissions(old.permissions())?;
    }
    file.write_all(contents)?;
    file.sync_all()
}

/// `path` with its symlinks followed to the last one's target, which may not exist yet (a
/// dangling link is written through, like `open` does).
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // Linux's own limit on links followed in one lookup.
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&p)?;
                // A relative link is relative to its directory; an absolute one replaces it.
                p = p.parent().map_or_else(|| to.clone(), |d| d.join(&to));
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

#[cfg(test)]
mod tests;
