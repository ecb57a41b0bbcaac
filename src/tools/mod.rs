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
//!   new one, keeps its mode, and no temp file stays behind (docs/reference.md#built-in-tools).

pub(crate) mod builtin;
pub(crate) mod http;
pub(crate) mod input;
pub(crate) mod process;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub(crate) use builtin::BuiltinTool;
pub(crate) use input::{FileInput, input_timeout, type_name};

use crate::config::{Approval, Config, McpServerConfig, RetryOn, ToolConfig};
use crate::mcp::{Catalog, Listing};

/// The largest input also given in `$HEARTBEAT_INPUT` (Linux's limit for one environment
/// string is 128 KiB, name included).
pub(crate) const MAX_ENV_INPUT: usize = 120 * 1024;

/// A tool's timeout when neither its config nor its input sets one.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Always removed from a tool's environment, whatever `telegram.bot_token_env` says.
pub(crate) const TOKEN_ENV: &str = "HEARTBEAT_TELEGRAM_TOKEN";

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToolKind {
    /// One of [`builtin::BUILTINS`].
    Builtin(&'static dyn BuiltinTool),
    /// A config tool (also `agent`): argv with `{key}` placeholders, no shell.
    Command(Vec<String>),
    /// `@SERVER.TOOL`: a tool of an MCP server (docs/reference.md#mcp-tools). The session carries
    /// it out over the run's connection to the server. `schema` is its `inputSchema` when the
    /// server's tools are known.
    Mcp {
        server: String,
        tool: String,
        schema: Option<Value>,
        /// The server marks it `idempotentHint` and the config trusts its annotations.
        idempotent: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ToolSpec {
    pub name: String,
    pub kind: ToolKind,
    pub timeout: Duration,
    pub approval: Approval,
    pub description: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Registry {
    tools: BTreeMap<String, ToolSpec>,
    /// The names of the configured channels (`telegram` and `[channels.NAME]`), which an
    /// `@notify` may name.
    channels: Vec<String>,
    /// `[mcp.NAME]` servers, and what is known of their tools.
    mcp: BTreeMap<String, McpServer>,
}

#[derive(Clone, Debug)]
struct McpServer {
    config: McpServerConfig,
    listing: Option<Listing>,
}

impl Registry {
    /// Built-ins, config tools and the MCP servers, whose tools are not known yet (see
    /// [`Registry::with_catalog`]).
    pub(crate) fn from_config(cfg: &Config) -> Registry {
        let mut registry = Registry::new(&cfg.tools);
        registry.channels = cfg
            .telegram
            .iter()
            .map(|_| "telegram".to_string())
            .chain(cfg.channels.iter().map(|c| c.name.clone()))
            .collect();
        registry.mcp = cfg
            .mcp
            .iter()
            .map(|(name, config)| {
                let server = McpServer {
                    config: config.clone(),
                    listing: None,
                };
                (name.clone(), server)
            })
            .collect();
        registry
    }

    /// What is known of the MCP servers' tools.
    pub(crate) fn with_catalog(mut self, catalog: &Catalog) -> Registry {
        for (name, server) in &mut self.mcp {
            server.listing = catalog.get(name).cloned();
        }
        self
    }

    /// The built-ins, with `[tools.NAME]` overrides of their timeout, approval and
    /// description, plus every `[tools.NAME]` that has a `command` (default approval `ask`).
    /// A `[tools.NAME]` with a `command` and a built-in's name replaces that built-in; one
    /// without a `command` and without a built-in's name is not a tool (the config loader
    /// reports it).
    pub(crate) fn new(tools: &BTreeMap<String, ToolConfig>) -> Registry {
        let mut map = BTreeMap::new();
        for b in builtin::BUILTINS {
            map.insert(
                b.name().to_string(),
                ToolSpec {
                    name: b.name().to_string(),
                    kind: ToolKind::Builtin(b),
                    timeout: DEFAULT_TIMEOUT,
                    approval: b.approval(),
                    description: Some(b.description().to_string()),
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
        Registry {
            tools: map,
            channels: Vec::new(),
            mcp: BTreeMap::new(),
        }
    }

    /// Check an input against the config beyond its shape: an `@notify` that names a
    /// channel names one that is configured (else its task is invalid, and says which
    /// there are).
    pub(crate) fn check_config(
        &self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
    ) -> Result<(), String> {
        let notify = matches!(spec.kind, ToolKind::Builtin(b) if b.name() == "notify");
        match input.get("channel").and_then(Value::as_str) {
            Some(name) if notify && !self.channels.iter().any(|c| c == name) => {
                let mut why = format!(
                    "key \"channel\" for {}: no channel named {name:?}",
                    spec.name
                );
                match crate::text::did_you_mean(name, &self.channels) {
                    Some(near) => why.push_str(&format!(" (did you mean {near:?}?)")),
                    None if self.channels.is_empty() => why.push_str(
                        " (none is configured: add [telegram] or a [channels.NAME] table)",
                    ),
                    None => why.push_str(&format!(" (configured: {})", self.channels.join(", "))),
                }
                Err(why)
            }
            _ => Ok(()),
        }
    }

    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<Cow<'_, ToolSpec>> {
        self.resolve(name).ok()
    }

    /// The tool a task names, or why there is none: an unknown tool (with the names there
    /// are and a did-you-mean), an unknown MCP server or tool, or a server that could not be
    /// listed. An MCP tool of a server whose tools are not known yet resolves, with no schema.
    pub(crate) fn resolve(&self, name: &str) -> Result<Cow<'_, ToolSpec>, String> {
        if let Some(spec) = self.tools.get(name) {
            return Ok(Cow::Borrowed(spec));
        }
        let Some((server_name, tool)) = name.split_once('.') else {
            return Err(self.unknown(name));
        };
        let Some(server) = self.mcp.get(server_name) else {
            let servers: Vec<&str> = self.mcp.keys().map(String::as_str).collect();
            let mut message = format!("unknown MCP server \"{server_name}\" in @{name}");
            match crate::text::did_you_mean(server_name, &servers) {
                Some(near) => message.push_str(&format!(" (did you mean \"{near}\"?)")),
                None if servers.is_empty() => {
                    message.push_str(" (no [mcp.NAME] server is configured)")
                }
                None => message.push_str(&format!(" (servers: {})", servers.join(", "))),
            }
            return Err(message);
        };
        let info = match &server.listing {
            None => None,
            Some(Listing::Unavailable(why)) => {
                return Err(format!("MCP server \"{server_name}\" {why}"));
            }
            Some(Listing::Tools(tools)) => match tools.iter().find(|t| t.name == tool) {
                Some(info) => Some(info),
                None => {
                    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                    let mut message =
                        format!("MCP server \"{server_name}\" has no tool \"{tool}\"");
                    if let Some(near) = crate::text::did_you_mean(tool, &names) {
                        message.push_str(&format!(" (did you mean @{server_name}.{near}?)"));
                    }
                    message.push_str(&format!(" (tools: {})", names.join(", ")));
                    return Err(message);
                }
            },
        };
        let config = &server.config;
        let own = config.tools.get(tool);
        // The tool's own table, else the server's default; a read-only hint loosens `ask`
        // only when the config trusts the server's annotations.
        let mut approval = own.and_then(|t| t.approval).unwrap_or(config.approval);
        if own.and_then(|t| t.approval).is_none()
            && approval == Approval::Ask
            && config.trust_annotations
            && info.is_some_and(|i| i.read_only)
        {
            approval = Approval::Auto;
        }
        Ok(Cow::Owned(ToolSpec {
            name: name.to_string(),
            kind: ToolKind::Mcp {
                server: server_name.to_string(),
                tool: tool.to_string(),
                schema: info.map(|i| i.input_schema.clone()),
                idempotent: config.trust_annotations && info.is_some_and(|i| i.idempotent),
            },
            timeout: own.and_then(|t| t.timeout).unwrap_or(config.timeout),
            approval,
            description: info.and_then(|i| i.description.clone()),
        }))
    }

    fn unknown(&self, name: &str) -> String {
        let names = self.names();
        let mut message = format!("unknown tool \"{name}\"");
        if let Some(near) = crate::text::did_you_mean(name, &names) {
            message.push_str(&format!(" (did you mean @{near}?)"));
        }
        message.push_str(&format!(" (tools: {})", names.join(", ")));
        message
    }

    /// Names of every tool that exists, sorted.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }
}

impl ToolSpec {
    /// Carried out by the session itself (the outbox, the run's MCP connections), never on
    /// a worker thread.
    pub(crate) fn runs_in_session(&self) -> bool {
        match &self.kind {
            ToolKind::Builtin(b) => b.runs_in_session(),
            ToolKind::Mcp { .. } => true,
            ToolKind::Command(_) => false,
        }
    }

    /// Check the input's shape before anything runs (missing `cmd`, a placeholder key that
    /// the input lacks, …). The error is shown as the task's reason.
    pub(crate) fn validate(&self, input: &Map<String, Value>) -> Result<(), String> {
        match &self.kind {
            ToolKind::Builtin(b) => b.validate(&self.name, input),
            ToolKind::Command(argv) => self.command_argv(argv, input).map(drop),
            ToolKind::Mcp { schema: None, .. } => Ok(()),
            ToolKind::Mcp {
                schema: Some(schema),
                ..
            } => crate::mcp::validate_input(schema, &Value::Object(input.clone()))
                .map_err(|e| format!("input does not match the inputSchema of {}: {e}", self.name)),
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

/// Where and as what a tool runs.
pub(crate) struct Invocation<'a> {
    pub task_id: &'a str,
    pub run_id: &'a str,
    /// The HEARTBEAT.md's directory.
    pub workdir: &'a Path,
    /// Environment variables removed from the tool's environment (the Telegram token's).
    pub remove_env: &'a [String],
}

/// What a tool did.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Outcome {
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
    /// What kind of failure it was, where the tool can tell (docs/reference.md#retries):
    /// what `retry_on` is matched against. None on success and for other failures.
    pub failure: Option<FailureKind>,
}

impl FailureKind {
    /// Whether `retry_on` names this failure; None (not written) names every kind.
    pub(crate) fn retried_by(self, on: Option<&[RetryOn]>) -> bool {
        let Some(on) = on else { return true };
        on.iter().any(|word| match (word, self) {
            (RetryOn::Timeout, FailureKind::Timeout) | (RetryOn::Spawn, FailureKind::Spawn) => true,
            (RetryOn::Exit(n), FailureKind::Exit(code)) => *n == code,
            (RetryOn::Http5xx, FailureKind::Http(status)) => (500..600).contains(&status),
            (RetryOn::Http429, FailureKind::Http(status)) => status == 429,
            _ => false,
        })
    }
}

/// Whether calling the tool twice has no second outside effect, when the config does not
/// say (docs/reference.md#retries): `log`, `http` with `GET` or `HEAD`, and an MCP tool
/// marked `idempotentHint` by a server whose annotations the config trusts.
pub(crate) fn idempotent_by_default(spec: &ToolSpec, input: &Map<String, Value>) -> bool {
    match &spec.kind {
        ToolKind::Builtin(b) if b.name() == "log" => true,
        ToolKind::Builtin(b) if b.name() == "http" => {
            let method = input.get("method").and_then(Value::as_str).unwrap_or("GET");
            method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
        }
        ToolKind::Mcp { idempotent, .. } => *idempotent,
        _ => false,
    }
}

/// The kinds of failure a retry may be asked for (docs/reference.md#retries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// It ran past its timeout.
    Timeout,
    /// A process ended on its own with this non-zero exit code.
    Exit(i32),
    /// An HTTP request was answered with this status, which it did not expect.
    Http(u16),
    /// It never started: no process, no request, no server.
    Spawn,
}

#[cfg(test)]
pub(crate) fn execute(spec: &ToolSpec, input: &Map<String, Value>, inv: &Invocation) -> Outcome {
    execute_with_stop(spec, input, inv, None)
}

/// [`execute`], with an external "stop now" flag: once it is set, a running process's group
/// is stopped (SIGTERM, SIGKILL after the grace period) and the outcome's error is `stopped`.
/// An `http` request is not sent once it is set, and a running one is abandoned.
pub(crate) fn execute_with_stop(
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
    let mut outcome = match &spec.kind {
        ToolKind::Builtin(b) => b.execute(spec, input, inv, stop),
        ToolKind::Mcp { .. } => Outcome {
            error: Some(format!(
                "{} is carried out by the run itself, not by execute",
                spec.name
            )),
            ..Outcome::default()
        },
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

/// A process request with what every tool process gets (the task and run ids, the tokens
/// removed, the stop flag).
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
fn write_file(file: &FileInput, inv: &Invocation, append: bool) -> Outcome {
    let path: PathBuf = inv.workdir.join(&file.path);
    let text = file.text.as_str();
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
                "{} {} byte{} to {}",
                if append { "appended" } else { "wrote" },
                text.len(),
                if text.len() == 1 { "" } else { "s" },
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
