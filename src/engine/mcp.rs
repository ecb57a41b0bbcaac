//! The MCP servers of one run, daemon tick, `check` or `mcp-tools` (docs/reference.md#mcp-tools).
//!
//! Invariants:
//! - A server starts on first use and is reused for the rest of the command; every server
//!   still running is stopped when the [`Servers`] value ends ([`Servers::stop_all`] or drop):
//!   stdin closed, SIGTERM to its group after 2 s, SIGKILL 5 s later. No server outlives the
//!   run or the daemon tick that started it.
//! - A server that would not start is not tried again in the same command: its other tasks
//!   fail at once with the same reason. One that died or timed out is stopped and started
//!   again for the next call.
//! - Its variables (`env`, `headers_env`) are taken from heartbeat's environment as secrets
//!   (`redact::take_env`): every sink redacts their values.
//! - Nothing here redacts or records: outcomes go back to the session, which does.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::audit::Secrets;
use crate::config::{Config, McpServerConfig, McpTransport};
use crate::mcp::{
    CallOutcome, Catalog, Listing, McpError, PASSED_ENV, Server, ServerSpec, ToolInfo, Transport,
};
use crate::redact::take_env;
use crate::store::Store;
use crate::tools::{FailureKind, Outcome, ToolKind, ToolSpec};

/// How long a cached listing is trusted by `run`.
pub(crate) const LISTING_TTL: Duration = Duration::from_secs(3600);

pub(crate) struct Servers<'a> {
    cfg: &'a Config,
    /// Set when heartbeat is stopping (the daemon's SIGTERM): a server starting or listing
    /// its tools is abandoned and stopped.
    stop: Option<&'a AtomicBool>,
    running: HashMap<String, Server>,
    /// Servers that would not start in this command, and why.
    failed: HashMap<String, String>,
}

impl<'a> Servers<'a> {
    pub(crate) fn new(cfg: &'a Config) -> Servers<'a> {
        Servers {
            cfg,
            stop: None,
            running: HashMap::new(),
            failed: HashMap::new(),
        }
    }

    /// Abandon a server's start or listing once `stop` is set.
    pub(crate) fn with_stop(mut self, stop: Option<&'a AtomicBool>) -> Servers<'a> {
        self.stop = stop;
        self
    }

    /// The running server `name`, started (in `workdir` unless its config names a `cwd`)
    /// if it is not running yet. `Err` reads as the end of a sentence about the server.
    fn server(&mut self, name: &str, workdir: &Path) -> Result<&mut Server, String> {
        if let Some(why) = self.failed.get(name) {
            return Err(why.clone());
        }
        if !self.running.contains_key(name) {
            let Some(config) = self.cfg.mcp.get(name) else {
                return Err("is not configured".into());
            };
            let stop = self.stop;
            match spec(name, config, workdir).and_then(|spec| Server::start_with_stop(&spec, stop))
            {
                Ok(server) => {
                    self.running.insert(name.to_string(), server);
                }
                Err(e) => {
                    let why = e.to_string();
                    self.failed.insert(name.to_string(), why.clone());
                    return Err(why);
                }
            }
        }
        Ok(self.running.get_mut(name).expect("inserted above"))
    }

    /// Starts the server of `tool` when it is an MCP tool (`SERVER.TOOL`) and its server is
    /// not running yet. `Err`: why it would not start, as the failure of a call to it reads.
    pub(crate) fn start_for(&mut self, tool: &str, workdir: &Path) -> Result<(), String> {
        let Some((_, server, _)) = self.cfg.mcp_tool(tool) else {
            return Ok(());
        };
        let server = server.to_string();
        match self.server(&server, workdir) {
            Ok(_) => Ok(()),
            Err(why) => Err(format!("MCP server \"{server}\" {why}")),
        }
    }

    /// The tools server `name` offers (following pagination).
    pub(crate) fn list(&mut self, name: &str, workdir: &Path) -> Result<Vec<ToolInfo>, String> {
        let stop = self.stop;
        let server = self.server(name, workdir)?;
        match server.list_tools_with_stop(stop) {
            Ok(tools) => Ok(tools),
            Err(e) => {
                let stderr = server.stderr();
                self.discard(name);
                let why = with_stderr(e.to_string(), &stderr);
                self.failed.insert(name.to_string(), why.clone());
                Err(why)
            }
        }
    }

    /// One `tools/call` of an MCP tool task, as an [`Outcome`] like any tool's. Once `stop`
    /// is set (the daemon shutting down) the call is abandoned, its server stopped, and the
    /// task fails with `stopped`, as a tool's process does.
    pub(crate) fn call(
        &mut self,
        spec: &ToolSpec,
        input: &Map<String, Value>,
        workdir: &Path,
        stop: Option<&AtomicBool>,
    ) -> Outcome {
        let started = Instant::now();
        let ToolKind::Mcp { server, tool, .. } = &spec.kind else {
            return failed(format!("{} is not an MCP tool", spec.name), started);
        };
        if let Err(e) = spec.validate(input) {
            return failed(e, started);
        }
        let call = self.server(server, workdir).map(|s| {
            let (stderr_before, refused_before) = (s.stderr().len(), s.refused().len());
            let result = s.call_with_stop(tool, input, spec.timeout, stop);
            let stderr = s.stderr();
            let mut news = stderr.get(stderr_before..).unwrap_or(&stderr).to_string();
            for request in s.refused().iter().skip(refused_before) {
                news.push_str(&format!(
                    "\n[heartbeat refused the server's request {request}]"
                ));
            }
            (result, news, s.is_usable())
        });
        let (result, stderr, usable) = match call {
            // The server did not start (or list its tools): the call never began.
            Err(why) => {
                let outcome = failed(format!("MCP server \"{server}\" {why}"), started);
                return Outcome {
                    failure: Some(FailureKind::Spawn),
                    ..outcome
                };
            }
            Ok(c) => c,
        };
        if !usable {
            // Timed out, died or abandoned: stopped now, and the next call gets a new one.
            self.discard(server);
        }
        let mut outcome = match result {
            Ok(done) => from_call(done),
            Err(e @ McpError::Timeout(_)) => Outcome {
                error: Some(e.to_string()),
                failure: Some(FailureKind::Timeout),
                ..Outcome::default()
            },
            Err(e @ McpError::Stopped) => Outcome {
                error: Some(e.to_string()),
                ..Outcome::default()
            },
            Err(e) => Outcome {
                error: Some(format!("MCP server \"{server}\" {e}")),
                ..Outcome::default()
            },
        };
        if !outcome.success {
            // The server's stderr belongs to the failing task's audit line.
            outcome.stderr = stderr.trim().to_string();
        }
        outcome.duration = started.elapsed();
        outcome
    }

    fn discard(&mut self, name: &str) {
        if let Some(server) = self.running.remove(name) {
            server.stop();
        }
    }

    /// Stop every server still running.
    pub(crate) fn stop_all(&mut self) {
        for (_, server) in self.running.drain() {
            server.stop();
        }
    }
}

impl Drop for Servers<'_> {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// How to start server `name`. A header whose variable is not set is an error: without it
/// the server would refuse every request, and the likely cause (a variable cron does not
/// see) deserves its own message.
fn spec(name: &str, config: &McpServerConfig, workdir: &Path) -> Result<ServerSpec, McpError> {
    let transport = match &config.transport {
        McpTransport::Stdio(command) => Transport::Stdio {
            command: command.clone(),
        },
        McpTransport::Http { url, headers_env } => Transport::Http {
            url: url.clone(),
            headers: headers_env
                .iter()
                .map(|(header, var)| match take_env(var) {
                    Some(value) => Ok((header.clone(), value)),
                    None => Err(McpError::Start(format!(
                        "headers_env {header}: the variable {var} is not set (cron and \
                         systemd do not see the variables of your shell)"
                    ))),
                })
                .collect::<Result<_, _>>()?,
        },
    };
    Ok(ServerSpec {
        name: name.to_string(),
        transport,
        // Those every server gets are passed as they are, not taken as secrets.
        env: config
            .env
            .iter()
            .filter(|var| !PASSED_ENV.contains(&var.as_str()))
            .filter_map(|var| Some((var.clone(), take_env(var)?)))
            .collect(),
        cwd: config.cwd.clone().unwrap_or_else(|| workdir.to_path_buf()),
        startup_timeout: config.startup_timeout,
    })
}

/// A completed call as a tool's outcome: `isError` is a failure; text is the output, then
/// `structuredContent` as JSON; binary items are counted.
fn from_call(done: CallOutcome) -> Outcome {
    let mut stdout = done.text;
    // Servers often send the structured result as text too: kept once.
    let repeated = |s: &Value| serde_json::from_str::<Value>(&stdout).is_ok_and(|t| &t == s);
    if let Some(structured) = done.structured.as_ref().filter(|s| !repeated(s)) {
        if !stdout.is_empty() {
            stdout.push('\n');
        }
        stdout.push_str(&structured.to_string());
    }
    if done.binary_items > 0 {
        if !stdout.is_empty() {
            stdout.push('\n');
        }
        stdout.push_str(&format!("[{} binary item(s) not kept]", done.binary_items));
    }
    let error = done.is_error.then(|| {
        // Its first line whole: the session redacts it before it is cut to a length, so
        // that a secret that straddles a cut is not shown minus its tail.
        match stdout.lines().map(str::trim).find(|l| !l.is_empty()) {
            Some(said) => format!("the tool reported an error: {said}"),
            None => "the tool reported an error (isError)".to_string(),
        }
    });
    Outcome {
        success: !done.is_error,
        stdout,
        stdout_dropped: done.text_dropped,
        error,
        cost_usd: done.cost_usd,
        summary: done.summary,
        ..Outcome::default()
    }
}

fn failed(error: String, started: Instant) -> Outcome {
    Outcome {
        error: Some(error),
        duration: started.elapsed(),
        ..Outcome::default()
    }
}

fn with_stderr(why: String, stderr: &str) -> String {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    match last {
        Some(line) if !why.contains(line.trim()) => format!("{why} ({})", line.trim()),
        _ => why,
    }
}

/// The servers the tasks name, each with the directory of the first file that names it.
pub(crate) fn named_servers<'t>(
    cfg: &Config,
    tools: impl IntoIterator<Item = (&'t str, &'t Path)>,
) -> BTreeMap<String, &'t Path> {
    let mut named = BTreeMap::new();
    for (tool, file) in tools {
        if let Some((_, server, _)) = cfg.mcp_tool(tool) {
            named
                .entry(server.to_string())
                .or_insert(file.parent().unwrap_or(Path::new("/")));
        }
    }
    named
}

/// The cached listings that still describe the configured servers (same fingerprint), and
/// which of them are older than [`LISTING_TTL`] at `now`.
pub(crate) fn cached(
    cfg: &Config,
    store: Option<&dyn Store>,
    now: DateTime<Utc>,
) -> crate::error::Result<(Catalog, Vec<String>)> {
    let mut catalog = Catalog::new();
    let mut stale = Vec::new();
    let Some(store) = store else {
        return Ok((catalog, stale));
    };
    for (server, listing) in store.mcp_listings()? {
        let Some(config) = cfg.mcp.get(&server) else {
            continue;
        };
        if listing.fingerprint != config.fingerprint() {
            continue;
        }
        let age = now.signed_duration_since(listing.listed_at);
        if age
            .to_std()
            .map_or(listing.listed_at > now, |a| a > LISTING_TTL)
        {
            stale.push(server.clone());
        }
        catalog.insert(server, Listing::Tools(listing.tools));
    }
    Ok((catalog, stale))
}

/// List server `name` now and remember what it offers. A server that cannot be listed keeps
/// its older listing, if any (its tasks then fail when they call it).
pub(crate) fn refresh(
    servers: &mut Servers,
    store: &mut dyn Store,
    catalog: &mut Catalog,
    name: &str,
    workdir: &Path,
    now: DateTime<Utc>,
) -> crate::error::Result<()> {
    let Some(config) = servers.cfg.mcp.get(name) else {
        return Ok(());
    };
    if let Ok(tools) = servers.list(name, workdir) {
        // Stored redacted, and used as stored: a run that lists the server afresh sees what
        // a run reading the cache sees.
        let listed = serde_json::to_value(&tools).unwrap_or_default();
        let listed = Secrets::taken().redact_strings(listed);
        store.save_mcp_listing(name, &config.fingerprint(), now, &listed)?;
        let tools = serde_json::from_value(listed.into_value()).unwrap_or(tools);
        catalog.insert(name.to_string(), Listing::Tools(tools));
    }
    Ok(())
}
