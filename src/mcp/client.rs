//! The one wrapper around the MCP SDK (`rmcp`): a blocking client for one server.
//!
//! Invariants:
//!
//! - This file and `http.rs` (Streamable HTTP) are the only ones that name `rmcp`. Its types
//!   never appear in the public API.
//! - heartbeat spawns, signals and reaps the server itself; rmcp only speaks JSON-RPC over the
//!   child's pipes. (rmcp's own child-process transport kills on drop by spawning a task on
//!   the runtime, which is lost when the runtime shuts down, and uses other grace periods.)
//! - The server is started by the process supervisor ([`supervisor::spawn`], as tools are):
//!   it leads its own process group, and should heartbeat die, it gets SIGTERM and its whole
//!   group SIGTERM, then SIGKILL 5 s later. It starts with a cleared environment holding
//!   only [`PASSED_ENV`] (those set in heartbeat's) and the spec's `env` pairs.
//! - Its stderr is read on a thread by the same capture as a tool's output
//!   (`sys/capture.rs`), keeping [`STDERR_CAP`] bytes and counting the rest, so the server
//!   never blocks on a full stderr pipe.
//! - Every path out of a [`Server`] (`stop`, `Drop`, a failed `start`) closes the server's
//!   stdin, gives it 2 s to exit, then SIGTERMs its group, SIGKILLs the group 5 s later if a
//!   member still lives, and reaps the leader ([`Group::stop_and_reap`]). A group id is only
//!   signalled while its leader is not yet reaped, so it cannot have been reused.
//! - The current-thread runtime runs only inside `start`, `list_tools`, `call` and `stop`;
//!   between calls nothing reads the server's stdout, which is harmless because heartbeat
//!   never waits for a server outside a call.
//! - The client advertises no capabilities and refuses sampling, elicitation and roots
//!   requests with an MCP error; each refusal is remembered for the audit.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::ErrorData;
// Sampling and roots types are deprecated in the SDK; they are named here only to refuse them.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ContentBlock, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, Implementation, ListRootsResult,
    PaginatedRequestParams, ProtocolVersion, ResourceContents, ServerResult, Tool,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, PeerRequestOptions,
    RequestContext, RoleClient, RunningService, ServiceError,
};
use serde_json::{Map, Value};

use crate::sys;
use crate::sys::capture::{Capture, read_capped};
use crate::sys::supervisor::{self, Environment, Group, Launch};

/// Variables passed from heartbeat's environment to every server (when set); everything else
/// is cleared (docs/reference.md#mcp-tools).
pub(crate) const PASSED_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TZ"];

/// Bytes of a server's stderr kept, like a tool's (docs/reference.md#tool-processes); the rest is
/// counted.
pub(crate) const STDERR_CAP: usize = 1024 * 1024;

/// Bytes of a call's text output kept, like a tool's standard output
/// (docs/reference.md#tool-processes).
pub(crate) const OUTPUT_CAP: usize = 1024 * 1024;

/// From closing the server's stdin to SIGTERM (docs/reference.md#mcp-tools).
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// From SIGTERM to SIGKILL (docs/reference.md#mcp-tools).
const KILL_GRACE: Duration = Duration::from_secs(5);

/// How long the stderr reader may take to drain once the group is gone; after that it is
/// abandoned (a process that left the group still holds the pipe).
const READER_GRACE: Duration = Duration::from_secs(2);

/// Past a call's timeout, how long the cancellation notification may take to be written
/// before the call gives up on it (a server that reads nothing fills its stdin pipe).
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// How long to wait for the leader's exit status once its connection closed, to say why.
const DEATH_GRACE: Duration = Duration::from_millis(500);

/// How often a dying group is looked at (there is no way to wait for non-children).
const POLL: Duration = Duration::from_millis(20);

/// How often a call looks at its stop flag, like a tool's process.
const STOP_POLL: Duration = Duration::from_millis(50);

/// A server that pages forever is a broken server, not a long list.
const MAX_PAGES: usize = 1000;

/// The longest MCP message read from a server's stdout, the newline included: the SDK's own
/// limit, past which it would drop the message without a word (and the call would wait
/// out its timeout).
const MAX_MESSAGE: usize = 16 << 20;

/// The deepest nesting of arrays and objects in a message that the JSON parser reads
/// (serde_json stops at 128 levels); the SDK would drop a deeper message without a word.
const MAX_DEPTH: usize = 127;

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// A child process speaking MCP on its stdin and stdout. `command[0]` is looked up in
    /// `PATH` unless it holds a `/`; a relative path is relative to [`ServerSpec::cwd`].
    Stdio { command: Vec<String> },
    /// Streamable HTTP: `headers` (name, value) go with every request; the values are
    /// secrets (docs/reference.md#redaction).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// Everything needed to start one server.
#[derive(Clone, Debug)]
pub(crate) struct ServerSpec {
    /// The config key (`[mcp.NAME]`), for messages.
    pub name: String,
    pub transport: Transport,
    /// Variables given to the server besides [`PASSED_ENV`]: the config's `env` names with
    /// their values. The values are secrets (docs/reference.md#redaction).
    pub env: Vec<(String, String)>,
    /// The server's working directory.
    pub cwd: PathBuf,
    /// Limit for the `initialize` handshake, and for listing the tools.
    pub startup_timeout: Duration,
}

/// One tool as the server lists it (also as cached in SQLite).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ToolInfo {
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema of its input (an object schema).
    pub input_schema: Value,
    /// The server's hint that the tool changes nothing: `readOnlyHint` and not
    /// `destructiveHint`. A hint only: it never loosens policy unless the config trusts it.
    pub read_only: bool,
    /// The server's hint that calling it twice does no more than once (`idempotentHint`).
    /// A hint only: a retry trusts it only when the config trusts the server's annotations.
    #[serde(default)]
    pub idempotent: bool,
}

/// What a completed `tools/call` returned. A tool-level failure is `is_error`, not an `Err`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CallOutcome {
    /// `isError: true`: the task fails.
    pub is_error: bool,
    /// Text items (and embedded text resources) joined by newlines, at most [`OUTPUT_CAP`]
    /// bytes.
    pub text: String,
    /// Bytes of text beyond [`OUTPUT_CAP`], counted and not kept.
    pub text_dropped: u64,
    /// `structuredContent`, as sent.
    pub structured: Option<Value>,
    /// Items that are not text (images, audio, blobs, resource links): counted, not kept.
    pub binary_items: usize,
    /// `structuredContent.cost_usd`, when a number.
    pub cost_usd: Option<f64>,
    /// `structuredContent.summary`, when a string.
    pub summary: Option<String>,
}

/// Why a server could not be used. Messages read as the end of a sentence about the server:
/// the caller prefixes the server's (and the task's) name.
#[derive(Debug, thiserror::Error)]
pub(crate) enum McpError {
    /// The server could not be spawned, or did not complete `initialize`. Its tasks fail.
    #[error("did not start: {0}")]
    Start(String),
    /// The connection closed (the server exited or closed stdout). Restart it for the next
    /// call.
    #[error("died: {0}")]
    Died(String),
    /// No answer within the limit; a `notifications/cancelled` was sent. The server may still
    /// be busy: stop it and start a new one for the next call.
    #[error("timed out after {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// The server answered with a JSON-RPC error (unknown tool, invalid arguments, …).
    #[error("refused the request: {0}")]
    Rejected(String),
    /// The server broke the protocol or asked for something heartbeat does not do.
    #[error("broke the MCP protocol: {0}")]
    Protocol(String),
    /// The call was abandoned because heartbeat is stopping (the daemon's SIGTERM): stop
    /// the server.
    #[error("stopped")]
    Stopped,
}

/// A running MCP server and the connection to it. Not `Sync`: one caller at a time.
pub(crate) struct Server {
    name: String,
    /// Declared before `rt` on purpose: nothing here relies on field drop order (`Drop`
    /// shuts everything down explicitly), but the service must never outlive the runtime.
    service: Option<RunningService<RoleClient, Refuser>>,
    rt: Option<tokio::runtime::Runtime>,
    /// The group leader of a spawned server, until reaped.
    child: Option<Child>,
    /// A spawned server's process group, watched until it is stopped; none for a server
    /// reached over HTTP.
    group: Option<Group>,
    /// A server reached over HTTP: its client, which knows why a connection failed.
    http: Option<super::http::HttpClient>,
    startup_timeout: Duration,
    stderr: Arc<Mutex<Capture>>,
    stderr_reader: Option<thread::JoinHandle<()>>,
    refused: Arc<Mutex<Vec<String>>>,
    /// Why the server's stdout was cut off: a message heartbeat cannot read (see [`Framed`]).
    fault: Arc<Mutex<Option<String>>>,
    usable: bool,
}

impl Server {
    /// Starts the server (spawns it, or reaches its URL) and completes the MCP handshake
    /// within `startup_timeout`. A server that cannot be spawned or reached, exits, or does
    /// not answer is a [`McpError::Start`] (with the end of its stderr), and nothing of it is
    /// left running.
    ///
    /// A spawned server gets SIGTERM if heartbeat dies: the kernel sends it when the *thread*
    /// that spawned it ends, so call this from a thread that outlives the server (the run's).
    #[cfg(test)]
    pub(crate) fn start(spec: &ServerSpec) -> Result<Server, McpError> {
        Server::start_with_stop(spec, None)
    }

    /// [`Server::start`], abandoned as soon as `stop` is set: [`McpError::Stopped`], and
    /// nothing of the server is left running.
    pub(crate) fn start_with_stop(
        spec: &ServerSpec,
        stop: Option<&AtomicBool>,
    ) -> Result<Server, McpError> {
        match &spec.transport {
            Transport::Stdio { command } => Server::spawn(spec, command, stop),
            Transport::Http { url, headers } => Server::reach(spec, url, headers, stop),
        }
    }

    fn spawn(
        spec: &ServerSpec,
        command: &[String],
        stop: Option<&AtomicBool>,
    ) -> Result<Server, McpError> {
        let Some(program) = command.first() else {
            return Err(McpError::Start("empty command".into()));
        };
        if !spec.cwd.is_dir() {
            return Err(McpError::Start(format!(
                "working directory {:?} is not a directory",
                spec.cwd
            )));
        }
        // Like a tool: its own group, watched should heartbeat die; but a cleared
        // environment.
        let launch = Launch {
            argv: command,
            cwd: &spec.cwd,
            env: Environment::Cleared { pass: &PASSED_ENV },
            set: &spec.env,
            stdin_piped: true,
            kill_grace: KILL_GRACE,
        };
        let (mut child, group) =
            supervisor::spawn(&launch).map_err(|e| McpError::Start(cannot_run(program, &e)))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = Arc::new(Mutex::new(Capture::new(STDERR_CAP, 0)));
        let stderr_reader = child.stderr.take().map(|pipe| {
            let cap = Arc::clone(&stderr);
            thread::spawn(move || read_capped(pipe, &cap, None))
        });
        // From here on, dropping `server` stops the child on every error path.
        let mut server = Server::unstarted(spec);
        server.child = Some(child);
        server.group = Some(group);
        server.stderr = stderr;
        server.stderr_reader = stderr_reader;
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(server.failed_start("its pipes were not set up".into()));
        };
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return Err(server.failed_start(e)),
        };
        let pipes = {
            // Registering the pipes with the runtime's reactor needs its context.
            let _entered = rt.enter();
            tokio::process::ChildStdout::from_std(stdout).and_then(|out| {
                let out = Framed::new(out, Arc::clone(&server.fault));
                Ok((out, tokio::process::ChildStdin::from_std(stdin)?))
            })
        };
        match pipes {
            Ok(pipes) => server.handshake(rt, pipes, stop),
            Err(e) => Err(server.failed_start(format!("cannot watch its pipes: {e}"))),
        }
    }

    /// A server over Streamable HTTP: nothing to spawn; `headers` go with every request.
    fn reach(
        spec: &ServerSpec,
        url: &str,
        headers: &[(String, String)],
        stop: Option<&AtomicBool>,
    ) -> Result<Server, McpError> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

        let mut custom = std::collections::HashMap::new();
        for (name, value) in headers {
            // The value is a secret: never in a message.
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| McpError::Start(format!("{name:?} is not a valid header name")))?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                McpError::Start(format!(
                    "the value of header {name} is not a valid header value"
                ))
            })?;
            custom.insert(header, value);
        }
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| McpError::Start(format!("{url:?} is not a URL: {e}")))?;
        let client = super::http::HttpClient::new(&parsed, spec.startup_timeout)
            .map_err(|e| McpError::Start(format!("cannot set up an HTTP client: {e}")))?;
        let mut server = Server::unstarted(spec);
        server.http = Some(client.clone());
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return Err(server.failed_start(e)),
        };
        let transport = {
            // The transport's worker task is spawned on the runtime.
            let _entered = rt.enter();
            StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom),
            )
        };
        server.handshake(rt, transport, stop)
    }

    /// A server with nothing running yet.
    fn unstarted(spec: &ServerSpec) -> Server {
        Server {
            name: spec.name.clone(),
            service: None,
            rt: None,
            child: None,
            group: None,
            http: None,
            startup_timeout: spec.startup_timeout,
            stderr: Arc::new(Mutex::new(Capture::new(STDERR_CAP, 0))),
            stderr_reader: None,
            refused: Arc::new(Mutex::new(Vec::new())),
            fault: Arc::new(Mutex::new(None)),
            usable: false,
        }
    }

    /// The `initialize` handshake over `transport`, within `startup_timeout`, unless `stop`
    /// is set first.
    fn handshake<T, E, A>(
        mut self,
        rt: tokio::runtime::Runtime,
        transport: T,
        stop: Option<&AtomicBool>,
    ) -> Result<Server, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let handler = Refuser {
            refused: Arc::clone(&self.refused),
        };
        let limit = self.startup_timeout;
        // Timers must be created inside the runtime, hence the `async` blocks.
        let started = rt.block_on(abandonable(stop, async {
            tokio::time::timeout(
                limit,
                // The `initialize` handshake, which every server in use speaks; probing for the
                // newer `server/discover` first would cost old servers a 10 s wait.
                handler.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
            )
            .await
        }));
        self.rt = Some(rt);
        let Some(started) = started else {
            // Dropping `self` stops the server.
            return Err(McpError::Stopped);
        };
        match started {
            Ok(Ok(service)) => {
                self.service = Some(service);
                self.usable = true;
                Ok(self)
            }
            Ok(Err(e)) => {
                let reason = match &e {
                    // Without the transport's type name, with the causes (refused, 401, …).
                    ClientInitializeError::TransportError { error, .. } => {
                        super::http::causes(&*error.error)
                    }
                    other => other.to_string(),
                };
                Err(self.failed_start(format!("the MCP handshake failed: {reason}")))
            }
            Err(_) => Err(self.failed_start(format!(
                "no answer to initialize within {}",
                humantime::format_duration(limit)
            ))),
        }
    }

    /// A spawned server's process id, which is also its process group id.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> Option<u32> {
        self.group.as_ref().map(|g| g.id() as u32)
    }

    /// False once a call timed out or the connection closed: the caller should [`stop`] this
    /// server and start a new one for the next call (docs/reference.md#mcp-tools).
    ///
    /// [`stop`]: Server::stop
    pub(crate) fn is_usable(&self) -> bool {
        self.usable
    }

    /// Every tool the server offers, following `nextCursor` to the last page, within the
    /// spec's `startup_timeout`.
    #[cfg(test)]
    pub(crate) fn list_tools(&mut self) -> Result<Vec<ToolInfo>, McpError> {
        self.list_tools_with_stop(None)
    }

    /// [`Server::list_tools`], abandoned as soon as `stop` is set: [`McpError::Stopped`],
    /// and the server is no longer usable.
    pub(crate) fn list_tools_with_stop(
        &mut self,
        stop: Option<&AtomicBool>,
    ) -> Result<Vec<ToolInfo>, McpError> {
        let peer = self.service()?.peer().clone();
        let limit = self.startup_timeout;
        // Timers must be created inside the runtime, hence the outer `async`.
        let listed = self.block_on(abandonable(stop, async move {
            tokio::time::timeout(limit, async move {
                let mut tools: Vec<Tool> = Vec::new();
                let mut cursor: Option<String> = None;
                let mut seen = HashSet::new();
                for _ in 0..MAX_PAGES {
                    let params = cursor
                        .take()
                        .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
                    let page = peer.list_tools(params).await.map_err(Failure::Service)?;
                    tools.extend(page.tools);
                    match page.next_cursor {
                        None => return Ok(tools),
                        Some(next) if !seen.insert(next.clone()) => {
                            return Err(Failure::Protocol(format!(
                                "tools/list repeated the cursor {next:?}"
                            )));
                        }
                        Some(next) => cursor = Some(next),
                    }
                }
                Err(Failure::Protocol(format!(
                    "tools/list has more than {MAX_PAGES} pages"
                )))
            })
            .await
        }))?;
        let Some(listed) = listed else {
            self.usable = false;
            return Err(McpError::Stopped);
        };
        match listed {
            Ok(Ok(tools)) => Ok(tools.into_iter().map(tool_info).collect()),
            Ok(Err(failure)) => Err(self.failure(failure)),
            Err(_elapsed) => {
                self.usable = false;
                Err(McpError::Timeout(limit))
            }
        }
    }

    /// Calls one tool. Past `timeout` the request is cancelled (`notifications/cancelled`)
    /// and the result is [`McpError::Timeout`]; the server is then no longer
    /// [`is_usable`](Server::is_usable).
    #[cfg(test)]
    pub(crate) fn call(
        &mut self,
        tool: &str,
        input: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<CallOutcome, McpError> {
        self.call_with_stop(tool, input, timeout, None)
    }

    /// [`Server::call`], abandoned as soon as `stop` is set (the daemon shutting down):
    /// the result is [`McpError::Stopped`] and the server is no longer usable, so the caller
    /// stops it.
    pub(crate) fn call_with_stop(
        &mut self,
        tool: &str,
        input: &Map<String, Value>,
        timeout: Duration,
        stop: Option<&AtomicBool>,
    ) -> Result<CallOutcome, McpError> {
        let peer = self.service()?.peer().clone();
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(input.clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            return Err(McpError::Stopped);
        }
        // The SDK's own timeout sends the cancellation; the outer one only guards against a
        // cancellation that cannot be written.
        // Timers must be created inside the runtime, hence the outer `async`.
        let answered = self.block_on(abandonable(stop, async move {
            tokio::time::timeout(timeout.saturating_add(CANCEL_GRACE), async move {
                let handle = peer
                    .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
                    .await?;
                handle.await_response().await
            })
            .await
        }))?;
        let Some(answered) = answered else {
            self.usable = false;
            return Err(McpError::Stopped);
        };
        match answered {
            Err(_) | Ok(Err(ServiceError::Timeout { .. })) => {
                self.usable = false;
                Err(McpError::Timeout(timeout))
            }
            Ok(Err(e)) => Err(self.failure(Failure::Service(e))),
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(outcome(result)),
            // A result with nothing but metadata.
            Ok(Ok(ServerResult::EmptyResult(_))) => Ok(CallOutcome::default()),
            Ok(Ok(ServerResult::InputRequiredResult(_))) => Err(McpError::Protocol(
                "the server asked for input during the call (sampling, elicitation or roots), \
                 which heartbeat refuses"
                    .into(),
            )),
            Ok(Ok(ServerResult::CreateTaskResult(_))) => Err(McpError::Protocol(
                "the server answered with a task to poll, which heartbeat does not do".into(),
            )),
            Ok(Ok(_)) => Err(McpError::Protocol(
                "the answer to tools/call is not a tool result".into(),
            )),
        }
    }

    /// The server's stderr so far: at most [`STDERR_CAP`] bytes, then a note of how many more
    /// were written. Unredacted.
    pub(crate) fn stderr(&self) -> String {
        let cap = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::from_utf8_lossy(&cap.kept).into_owned();
        let dropped = cap.dropped();
        if dropped > 0 {
            text.push_str(&format!("\n[{dropped} more bytes not kept]"));
        }
        text
    }

    /// The server-initiated requests refused so far (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`), in order.
    pub(crate) fn refused(&self) -> Vec<String> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Ends the server: closes its stdin, SIGTERMs its group after 2 s if a member still
    /// lives, SIGKILLs it 5 s later, and reaps it. Returns its whole captured stderr.
    pub(crate) fn stop(mut self) -> String {
        self.shutdown();
        self.stderr()
    }

    fn service(&self) -> Result<&RunningService<RoleClient, Refuser>, McpError> {
        self.service
            .as_ref()
            .ok_or_else(|| McpError::Died("it was already stopped".into()))
    }

    fn block_on<F: Future>(&self, f: F) -> Result<F::Output, McpError> {
        match &self.rt {
            Some(rt) => Ok(rt.block_on(f)),
            None => Err(McpError::Died("it was already stopped".into())),
        }
    }

    fn failure(&mut self, failure: Failure) -> McpError {
        match failure {
            Failure::Protocol(message) => McpError::Protocol(message),
            Failure::Service(ServiceError::McpError(data)) => {
                McpError::Rejected(format!("{} (code {})", data.message, data.code.0))
            }
            Failure::Service(ServiceError::Timeout { timeout }) => {
                self.usable = false;
                McpError::Timeout(timeout)
            }
            Failure::Service(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                self.usable = false;
                match self.fault() {
                    Some(fault) => McpError::Protocol(fault),
                    None => McpError::Died(self.death()),
                }
            }
            Failure::Service(e) => McpError::Protocol(e.to_string()),
        }
    }

    /// The message that cut the connection off, if one did.
    fn fault(&self) -> Option<String> {
        let own = self
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        own.or_else(|| self.http.as_ref().and_then(|h| h.fault()))
    }

    /// Why the connection closed, as far as the leader's exit status tells.
    fn death(&self) -> String {
        if let Some(why) = self.http.as_ref().and_then(|h| h.last_error()) {
            return format!("the connection failed: {why}");
        }
        match self.exit_soon() {
            Some(status) => format!("it exited ({status})"),
            None => "it closed the connection".into(),
        }
    }

    /// The leader's exit status, waiting [`DEATH_GRACE`] for it: a closed stdout usually
    /// comes just before the exit.
    fn exit_soon(&self) -> Option<String> {
        let pgid = self.group.as_ref()?.id();
        let deadline = Instant::now() + DEATH_GRACE;
        loop {
            let status = sys::exit_without_reaping(pgid);
            if status.is_some() || Instant::now() >= deadline {
                return status;
            }
            thread::sleep(POLL);
        }
    }

    /// Stops everything and builds the `Start` error, with the end of stderr and the exit
    /// status when the server exited.
    fn failed_start(mut self, reason: String) -> McpError {
        let exited = self.exit_soon();
        self.shutdown();
        let mut message = match self.fault() {
            Some(fault) => format!("{reason}: {fault}"),
            None => reason,
        };
        if let Some(status) = exited {
            message.push_str(&format!(" (it exited: {status})"));
        }
        let stderr = self.stderr();
        if let Some(last) = stderr.lines().rev().find(|l| !l.trim().is_empty()) {
            message.push_str(&format!("; stderr: {}", last.trim()));
        }
        McpError::Start(message)
    }

    /// Idempotent; see [`Server::stop`].
    fn shutdown(&mut self) {
        self.usable = false;
        let began = Instant::now();
        // A graceful end of the SDK's loop closes its side of the pipes (over HTTP: ends the
        // session)…
        if let (Some(rt), Some(service)) = (&self.rt, self.service.take()) {
            let _ =
                rt.block_on(async { tokio::time::timeout(CLOSE_GRACE, service.cancel()).await });
        }
        // …and dropping the runtime drops whatever is left of it, the pipe ends included, so
        // the server sees EOF on stdin now whatever the SDK did.
        drop(self.service.take());
        drop(self.rt.take());

        let (Some(child), Some(group)) = (self.child.take(), self.group.take()) else {
            return;
        };
        let _ = group.stop_and_reap(child, began + CLOSE_GRACE, KILL_GRACE);

        if let Some(reader) = self.stderr_reader.take() {
            let deadline = Instant::now() + READER_GRACE;
            while !reader.is_finished() && Instant::now() < deadline {
                thread::sleep(POLL);
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("pgid", &self.group.as_ref().map(Group::id))
            .field("usable", &self.usable)
            .finish_non_exhaustive()
    }
}

/// `work`'s output, or None when `stop` is set first (looked at every [`STOP_POLL`]).
async fn abandonable<F: Future>(stop: Option<&AtomicBool>, work: F) -> Option<F::Output> {
    let work = std::pin::pin!(work);
    let watch = std::pin::pin!(async {
        while !stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            tokio::time::sleep(STOP_POLL).await;
        }
    });
    match futures::future::select(work, watch).await {
        futures::future::Either::Left((output, _)) => Some(output),
        futures::future::Either::Right(((), _)) => None,
    }
}

/// The private runtime of one server's connection.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot create a runtime: {e}"))
}
/// A failure inside the runtime, turned into an [`McpError`] outside it.
enum Failure {
    Service(ServiceError),
    Protocol(String),
}

/// Why `program` could not be spawned. A bare name that is not found is named with the PATH
/// it was looked up in: cron and systemd give a much shorter one than a login shell.
fn cannot_run(program: &str, e: &io::Error) -> String {
    if e.kind() != io::ErrorKind::NotFound || program.contains('/') {
        return format!("cannot run {program:?}: {e}");
    }
    let path = match std::env::var_os("PATH") {
        Some(path) => format!("PATH {:?}", path.to_string_lossy()),
        None => "PATH, which is not set,".to_string(),
    };
    format!(
        "cannot run {program:?}: it is not in any directory of {path} (cron and systemd \
         give a shorter PATH than your shell): write its absolute path in command"
    )
}

/// The client side of the session: no capabilities, and every server-initiated request that
/// would act behind the person's back is refused (docs/reference.md#mcp-tools).
struct Refuser {
    refused: Arc<Mutex<Vec<String>>>,
}

impl Refuser {
    fn refuse(&self, method: &str) -> ErrorData {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(method.to_owned());
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("heartbeat refuses {method}: scheduled tasks run without a person or a model"),
            None,
        )
    }
}

// Sampling and roots are deprecated in the SDK, but servers still send them and they must be
// refused explicitly (the SDK's default answers roots/list with an empty list).
#[allow(deprecated)]
impl ClientHandler for Refuser {
    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(self.refuse("sampling/createMessage"))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Err(self.refuse("roots/list"))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Err(self.refuse("elicitation/create"))
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("heartbeat", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

fn tool_info(tool: Tool) -> ToolInfo {
    let read_only = tool
        .annotations
        .as_ref()
        .is_some_and(|a| a.read_only_hint == Some(true) && a.destructive_hint != Some(true));
    let idempotent = tool
        .annotations
        .as_ref()
        .is_some_and(|a| a.idempotent_hint == Some(true));
    ToolInfo {
        name: tool.name.into_owned(),
        description: tool.description.map(Cow::into_owned),
        input_schema: Value::Object((*tool.input_schema).clone()),
        read_only,
        idempotent,
    }
}

fn outcome(result: CallToolResult) -> CallOutcome {
    let mut out = CallOutcome {
        is_error: result.is_error == Some(true),
        ..CallOutcome::default()
    };
    for block in result.content {
        let text = match block {
            ContentBlock::Text(t) => t.text,
            ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents { text, .. } => text,
                _ => {
                    out.binary_items += 1;
                    continue;
                }
            },
            _ => {
                out.binary_items += 1;
                continue;
            }
        };
        let sep = if out.text.is_empty() { "" } else { "\n" };
        push_capped(&mut out, sep);
        push_capped(&mut out, &text);
    }
    if let Some(Value::Object(fields)) = &result.structured_content {
        out.cost_usd = crate::model::reported_cost(fields.get("cost_usd"));
        out.summary = fields
            .get("summary")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    out.structured = result.structured_content;
    out
}

/// Appends what fits under [`OUTPUT_CAP`] (cut at a character boundary) and counts the rest.
fn push_capped(out: &mut CallOutcome, piece: &str) {
    let room = OUTPUT_CAP.saturating_sub(out.text.len());
    let mut keep = piece.len().min(room);
    while !piece.is_char_boundary(keep) {
        keep -= 1;
    }
    out.text.push_str(&piece[..keep]);
    out.text_dropped += (piece.len() - keep) as u64;
}

/// A server's stdout as the SDK reads it, one message a line, cut off at the first message
/// it could not read: longer than [`MAX_MESSAGE`] or nested deeper than [`MAX_DEPTH`]. The
/// SDK would skip such a message without a word, leaving its call to wait out the timeout;
/// cut off, the connection closes, the call fails at once, and [`Server::fault`] says why.
/// The bytes of the message before the limit are handed on; the SDK drops them with the
/// closed connection.
struct Framed<R> {
    inner: R,
    scan: Scan,
    fault: Arc<Mutex<Option<String>>>,
    cut: bool,
}

impl<R> Framed<R> {
    fn new(inner: R, fault: Arc<Mutex<Option<String>>>) -> Framed<R> {
        Framed {
            inner,
            scan: Scan::default(),
            fault,
            cut: false,
        }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Framed<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = &mut *self;
        let cut = || io::Error::new(io::ErrorKind::InvalidData, "a message over the limits");
        if this.cut {
            return std::task::Poll::Ready(Err(cut()));
        }
        let before = buf.filled().len();
        std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if let Some((at, why)) = this.scan.bytes(&buf.filled()[before..]) {
            buf.set_filled(before + at);
            *this.fault.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
            this.cut = true;
            if at == 0 {
                return std::task::Poll::Ready(Err(cut()));
            }
        }
        std::task::Poll::Ready(Ok(()))
    }
}

/// Why one whole message (an HTTP answer, an event's data) cannot be read: nested deeper
/// than [`MAX_DEPTH`]. Its size is the transport's to limit.
pub(super) fn nesting_fault(message: &[u8]) -> Option<String> {
    let mut scan = Scan {
        one_message: true,
        ..Scan::default()
    };
    scan.bytes(message).map(|(_, why)| why)
}

/// Where a reader is in a stream of newline-delimited JSON messages (or in one message).
#[derive(Default)]
struct Scan {
    /// One message, whose newlines are whitespace and whose size is not checked.
    one_message: bool,
    /// Bytes of the current line so far.
    line: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Scan {
    /// Reads on; the offset of the first byte that breaks a limit, and what it broke.
    fn bytes(&mut self, bytes: &[u8]) -> Option<(usize, String)> {
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' && !self.one_message {
                *self = Scan::default();
                continue;
            }
            self.line += 1;
            // This byte, and the newline still to come, would not fit.
            if self.line >= MAX_MESSAGE && !self.one_message {
                return Some((
                    i,
                    format!(
                        "it sent a message larger than {} MiB, the most heartbeat reads",
                        MAX_MESSAGE >> 20
                    ),
                ));
            }
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Some((
                            i,
                            format!(
                                "it sent a message nested deeper than {MAX_DEPTH} levels, the \
                                 most the JSON parser reads"
                            ),
                        ));
                    }
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod framing_tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_depth_limit_is_the_json_parsers() {
        assert!(serde_json::from_str::<Value>(&nested(MAX_DEPTH)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(MAX_DEPTH + 1)).is_err());
        let mut scan = Scan::default();
        assert_eq!(
            scan.bytes(format!("{}\n", nested(MAX_DEPTH)).as_bytes()),
            None
        );
        let (at, why) = scan.bytes(nested(MAX_DEPTH + 1).as_bytes()).unwrap();
        assert_eq!(at, MAX_DEPTH);
        assert!(why.contains("nested deeper than 127 levels"), "{why}");
    }

    #[test]
    fn brackets_in_strings_do_not_nest_and_a_newline_starts_over() {
        let mut scan = Scan::default();
        let text = format!(r#"{{"a": "{}\"[{{", "b": ["#, "[".repeat(500));
        assert_eq!(scan.bytes(text.as_bytes()), None);
        assert_eq!(scan.depth, 2);
        // Each line counts alone: an unclosed line does not nest the next one.
        let mut scan = Scan::default();
        let line = format!("{}\n", "[".repeat(MAX_DEPTH));
        for _ in 0..3 {
            assert_eq!(scan.bytes(line.as_bytes()), None);
        }
    }

    #[test]
    fn one_message_may_span_lines_and_be_of_any_size() {
        let pretty = format!("{}\n{}", "[\n".repeat(MAX_DEPTH), "]\n".repeat(MAX_DEPTH));
        assert_eq!(nesting_fault(pretty.as_bytes()), None);
        let deeper = format!("[\n{pretty}]");
        assert!(nesting_fault(deeper.as_bytes()).is_some_and(|why| why.contains("127 levels")));
        assert_eq!(nesting_fault(&vec![b' '; MAX_MESSAGE + 1]), None);
    }

    #[test]
    fn a_line_over_the_size_limit_is_cut_where_it_passes_it() {
        let mut scan = Scan::default();
        let fits = vec![b' '; MAX_MESSAGE - 1];
        assert_eq!(scan.bytes(&fits), None);
        assert_eq!(scan.bytes(b"\n"), None);
        assert_eq!(scan.bytes(&fits), None);
        let (at, why) = scan.bytes(b"  ").unwrap();
        assert_eq!(at, 0);
        assert!(why.contains("larger than 16 MiB"), "{why}");
    }
}
