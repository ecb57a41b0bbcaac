//! The built-in `http` tool (docs/reference.md#built-in-tools): one HTTP request with reqwest's
//! blocking client. OWNER: tools helper.
//!
//! Input (unknown keys are an error):
//!
//! - `url` (required): an absolute `http://` or `https://` URL. A `user:password@` in it is
//!   sent as basic authentication (reqwest's behaviour).
//! - `method`: one of [`METHODS`], any case; default `GET`.
//! - `headers`: an object of strings. Names and values must be valid HTTP (no control
//!   characters or line breaks); a name may appear only once, ignoring case. A
//!   `User-Agent` header replaces the default `heartbeat/VERSION`.
//! - `body`: a string is sent as its UTF-8 bytes, with no content type unless a header gives
//!   one; any other JSON value (including `null`) is sent as compact JSON with
//!   `Content-Type: application/json`, unless a `content-type` header is given.
//! - `expect_status`: the statuses that count as success; default `"2xx"`. Either one
//!   pattern or a non-empty array of patterns (success when any matches). A pattern is
//!   a status code 100–599, as a number (`204`) or a string (`"204"`), or a class: a string
//!   of a digit 1–5 followed by `xx` (`"2xx"`, `"3XX"`).
//! - `timeout`: a humantime string (`"30s"`) or a positive number of seconds; replaces the
//!   tool's timeout (`[tools.http] timeout`, default 5 min) for this request.
//!
//! Outcome: `stdout` is the response body (lossy UTF-8, the first [`OUTPUT_CAP`] bytes kept,
//! the rest counted in `stdout_dropped`) on success and on failure; `exit_code` is None;
//! `cost_usd`/`summary` come from a last-line JSON object of the body, as for processes; a
//! success without a summary of its own has its status as summary (`HTTP 200 OK`).
//! Errors: `HTTP 503 Service Unavailable (expected 2xx)`, `connection refused: HOST:PORT`,
//! `request failed: …`,
//! `timed out after 5s`, `stopped`.
//!
//! Invariants:
//!
//! - Only the input is used: no variable of heartbeat's environment is read or sent (reqwest
//!   itself honours `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY`, except for a loopback `url`, which
//!   is always reached directly).
//! - Redirects are followed up to [`MAX_REDIRECTS`] times (reqwest drops `Authorization`
//!   and cookies on a redirect to another host); one more is a `request failed` error.
//! - The timeout bounds the whole request, body included: the request runs on its own thread
//!   and the caller waits with a deadline (reqwest's blocking timeout applies to each read, a
//!   trickling body would escape it). A request still running at the deadline or at a stop
//!   request is abandoned: its thread ends at its next read, or at reqwest's own timeout.
//! - The stop flag is checked before anything is sent and every 50 ms while the request runs.
//! - No error message contains the URL's user information, query or fragment.

use std::error::Error as StdError;
use std::fmt;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Map, Value};

use super::process::{OUTPUT_CAP, last_line_report};
use super::{FailureKind, Outcome, input_timeout, type_name};
use serde::Deserialize;

/// Redirects followed before the request fails (reqwest's default is 10).
pub(crate) const MAX_REDIRECTS: usize = 5;

/// The methods the tool sends.
pub(crate) const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

const KEYS: [&str; 6] = [
    "url",
    "method",
    "headers",
    "body",
    "expect_status",
    "timeout",
];

/// How much of the end of the body is kept to find its last line (cost/summary).
const TAIL_KEEP: usize = 64 * 1024;

/// How often the stop flag is looked at while a request runs.
const POLL: Duration = Duration::from_millis(50);

/// One `expect_status` pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusPattern {
    /// One status code, 100–599.
    Code(u16),
    /// A class `Nxx`: the codes N00–N99, N in 1–5.
    Class(u8),
}

impl StatusPattern {
    pub(crate) fn matches(self, status: u16) -> bool {
        match self {
            StatusPattern::Code(c) => c == status,
            StatusPattern::Class(n) => status / 100 == u16::from(n),
        }
    }

    /// A number or a string: `204`, `"204"`, `"2xx"` (any case).
    pub(crate) fn parse(v: &Value) -> Option<StatusPattern> {
        match v {
            Value::Number(n) => {
                let c = n.as_u64()?;
                (100..=599)
                    .contains(&c)
                    .then_some(StatusPattern::Code(c as u16))
            }
            Value::String(s) => {
                let b = s.as_bytes();
                if b.len() != 3 {
                    return None;
                }
                if b.iter().all(u8::is_ascii_digit) {
                    let c: u16 = s.parse().ok()?;
                    (100..=599).contains(&c).then_some(StatusPattern::Code(c))
                } else if (b'1'..=b'5').contains(&b[0]) && b[1..].eq_ignore_ascii_case(b"xx") {
                    Some(StatusPattern::Class(b[0] - b'0'))
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

impl fmt::Display for StatusPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusPattern::Code(c) => write!(f, "{c}"),
            StatusPattern::Class(n) => write!(f, "{n}xx"),
        }
    }
}

/// A validated request.
#[derive(Debug)]
struct Plan {
    method: Method,
    url: Url,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    /// The body is JSON (not a string input): it gets a JSON content type unless a header
    /// names one.
    json: bool,
    expect: Vec<StatusPattern>,
    timeout: Option<Duration>,
}

/// Check an `http` input (see the module documentation); errors name the key.
pub(super) fn validate(tool: &str, input: &Map<String, Value>) -> Result<(), String> {
    plan(tool, input).map(drop)
}

/// The `http` input as given; [`plan`] checks what serde cannot.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpInput {
    url: String,
    method: Option<String>,
    headers: Option<Map<String, Value>>,
    body: Option<Value>,
    expect_status: Option<Value>,
    timeout: Option<Value>,
}

fn plan(tool: &str, input: &Map<String, Value>) -> Result<Plan, String> {
    let input: HttpInput = super::input::parse(tool, input, &KEYS)?;
    let url = Url::parse(input.url.trim())
        .map_err(|e| format!("key \"url\" for {tool} is not a valid absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "key \"url\" for {tool} must be an http:// or https:// URL, not {}://",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("key \"url\" for {tool} has no host"));
    }

    let method = match &input.method {
        None => Method::GET,
        Some(m) => {
            let upper = m.trim().to_ascii_uppercase();
            if !METHODS.contains(&upper.as_str()) {
                return Err(format!(
                    "key \"method\" for {tool} must be one of {}, not {m:?}",
                    METHODS.join(", ")
                ));
            }
            Method::from_bytes(upper.as_bytes()).map_err(|e| e.to_string())?
        }
    };

    let mut headers = HeaderMap::new();
    if let Some(h) = &input.headers {
        for (k, v) in h {
            let Value::String(s) = v else {
                return Err(format!(
                    "key \"headers\" for {tool} must be an object of strings; \"{k}\" is {}",
                    type_name(v)
                ));
            };
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                format!("key \"headers\" for {tool}: {k:?} is not a valid header name")
            })?;
            // The value is not echoed: it may be a secret.
            let value = HeaderValue::from_str(s).map_err(|_| {
                    format!(
                        "key \"headers\" for {tool}: the value of \"{k}\" is not a valid header value (visible ASCII, spaces and tabs; no line breaks)"
                    )
                })?;
            if headers.contains_key(&name) {
                return Err(format!(
                    "key \"headers\" for {tool} gives \"{name}\" twice (header names ignore case)"
                ));
            }
            headers.insert(name, value);
        }
    }

    let (body, json) = match &input.body {
        None => (None, false),
        Some(Value::String(s)) => (Some(s.as_bytes().to_vec()), false),
        Some(v) => (Some(v.to_string().into_bytes()), true),
    };

    let bad_expect = |what: String| {
        format!(
            "key \"expect_status\" for {tool} must be a status code (100-599), a class like \"2xx\", or a non-empty array of them, {what}"
        )
    };
    let expect = match &input.expect_status {
        None => vec![StatusPattern::Class(2)],
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(bad_expect("not an empty array".to_string()));
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match StatusPattern::parse(item) {
                    Some(p) => out.push(p),
                    None => return Err(bad_expect(format!("but element {i} is {item}"))),
                }
            }
            out
        }
        Some(v) => match StatusPattern::parse(v) {
            Some(p) => vec![p],
            None => return Err(bad_expect(format!("not {v}"))),
        },
    };

    let timeout = input
        .timeout
        .as_ref()
        .map(|v| input_timeout(tool, v))
        .transpose()?;

    Ok(Plan {
        method,
        url,
        headers,
        body,
        json,
        expect,
        timeout,
    })
}

/// "2xx", "200 or 204", "200, 204 or 3xx".
fn expected_text(expect: &[StatusPattern]) -> String {
    let parts: Vec<String> = expect.iter().map(ToString::to_string).collect();
    match parts.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// The body read so far.
#[derive(Default)]
struct Capture {
    /// The first `OUTPUT_CAP` bytes.
    kept: Vec<u8>,
    /// Every byte read.
    total: u64,
    /// At least the last `min(total, TAIL_KEEP)` bytes.
    tail: Vec<u8>,
}

impl Capture {
    fn push(&mut self, chunk: &[u8]) {
        let room = OUTPUT_CAP.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..room.min(chunk.len())]);
        self.total += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > 2 * TAIL_KEEP {
            let cut = self.tail.len() - TAIL_KEEP;
            self.tail.drain(..cut);
        }
    }
}

/// Why the request thread gave up.
enum Failure {
    TimedOut,
    Other(String),
}

/// Run an `http` input: `default_timeout` is the tool's, replaced by the input's `timeout`.
pub(super) fn run(
    tool: &str,
    input: &Map<String, Value>,
    default_timeout: Duration,
    stop: Option<&AtomicBool>,
) -> Outcome {
    let plan = match plan(tool, input) {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    let timeout = plan.timeout.unwrap_or(default_timeout);
    let stopped = || stop.is_some_and(|s| s.load(Ordering::SeqCst));
    if stopped() {
        return failed("stopped".to_string());
    }
    let secrets = Secrets::new(input, &plan.url);
    let expect = plan.expect.clone();

    // None: a timeout too large to represent, i.e. none (reqwest adds it to `Instant::now()`
    // and would panic on an overflow, so leave it a year of room).
    let deadline = Instant::now()
        .checked_add(timeout.saturating_add(Duration::from_secs(366 * 86_400)))
        .and_then(|_| Instant::now().checked_add(timeout));
    let capture = Arc::new(Mutex::new(Capture::default()));
    let abandon = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let spawned = {
        let capture = Arc::clone(&capture);
        let abandon = Arc::clone(&abandon);
        let client_timeout = deadline.map(|_| timeout);
        thread::Builder::new()
            .name("tool-http".to_string())
            .spawn(move || {
                let _ = tx.send(perform(plan, client_timeout, &capture, &abandon));
            })
    };
    if let Err(e) = spawned {
        return Outcome {
            failure: Some(FailureKind::Spawn),
            ..failed(format!("cannot start the request thread: {e}"))
        };
    }

    let result = loop {
        if stopped() {
            break Err(("stopped".to_string(), None));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break Err((timed_out(timeout), Some(FailureKind::Timeout)));
        }
        let mut wait = deadline.map_or(Duration::MAX, |d| d - now);
        if stop.is_some() {
            wait = wait.min(POLL);
        }
        match rx.recv_timeout(wait) {
            Ok(Ok(status)) => break Ok(status),
            Ok(Err(Failure::TimedOut)) => {
                break Err((timed_out(timeout), Some(FailureKind::Timeout)));
            }
            Ok(Err(Failure::Other(e))) => break Err((secrets.scrub(e), None)),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                break Err((
                    "request failed: the request thread ended without a result".into(),
                    None,
                ));
            }
        }
    };
    abandon.store(true, Ordering::SeqCst);

    let body = std::mem::take(&mut *capture.lock().unwrap_or_else(PoisonError::into_inner));
    let (cost_usd, summary) = last_line_report(&body.tail, body.total == body.tail.len() as u64);
    let failure = match &result {
        Ok(status) if expect.iter().any(|p| p.matches(status.as_u16())) => None,
        Ok(status) => Some(FailureKind::Http(status.as_u16())),
        Err((_, failure)) => *failure,
    };
    // A success says its status, unless the body gave a summary of its own.
    let summary = match &result {
        Ok(status) if failure.is_none() => summary.or_else(|| Some(status_line(*status))),
        _ => summary,
    };
    let error = match result {
        Ok(status) if expect.iter().any(|p| p.matches(status.as_u16())) => None,
        Ok(status) => Some(format!(
            "{} (expected {})",
            status_line(status),
            expected_text(&expect)
        )),
        Err((e, _)) => Some(e),
    };
    Outcome {
        success: error.is_none(),
        exit_code: None,
        stdout: String::from_utf8_lossy(&body.kept).into_owned(),
        stdout_dropped: body.total - body.kept.len() as u64,
        error,
        cost_usd,
        summary,
        failure,
        ..Outcome::default()
    }
}

/// `HTTP 200 OK`: the code and its reason phrase, when it has one.
fn status_line(status: StatusCode) -> String {
    format!(
        "HTTP {}{}",
        status.as_u16(),
        status
            .canonical_reason()
            .map_or(String::new(), |r| format!(" {r}"))
    )
}

fn failed(error: String) -> Outcome {
    Outcome {
        error: Some(error),
        ..Outcome::default()
    }
}

fn timed_out(timeout: Duration) -> String {
    format!("timed out after {}", humantime::format_duration(timeout))
}

/// On the request thread: send, then read the body into `capture` until its end or until
/// `abandon` is set.
fn perform(
    plan: Plan,
    timeout: Option<Duration>,
    capture: &Mutex<Capture>,
    abandon: &AtomicBool,
) -> Result<StatusCode, Failure> {
    let mut builder = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
        .user_agent(concat!("heartbeat/", env!("CARGO_PKG_VERSION")))
        .timeout(timeout);
    if crate::net::is_loopback(&plan.url) {
        builder = builder.no_proxy();
    }
    let client = builder.build().map_err(|e| {
        Failure::Other(format!(
            "request failed: cannot set up the HTTP client: {}",
            describe(&e.without_url())
        ))
    })?;
    let content_type = plan.json && !plan.headers.contains_key(CONTENT_TYPE);
    let address = format!(
        "{}:{}",
        plan.url.host_str().unwrap_or("?"),
        plan.url.port_or_known_default().unwrap_or(0)
    );
    let mut request = client.request(plan.method, plan.url).headers(plan.headers);
    if content_type {
        request = request.header(CONTENT_TYPE, "application/json");
    }
    if let Some(body) = plan.body {
        request = request.body(body);
    }
    let mut response = request.send().map_err(|e| {
        let e = e.without_url();
        // Said as a person would: nothing listens there.
        let refused = chain(&e).iter().any(|c| {
            c.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
        });
        if refused {
            Failure::Other(format!("connection refused: {address}"))
        } else {
            fail(&e)
        }
    })?;
    let status = response.status();
    let mut buf = vec![0u8; 64 * 1024];
    while !abandon.load(Ordering::SeqCst) {
        let n = match response.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail(&e)),
        };
        capture
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(&buf[..n]);
    }
    Ok(status)
}

fn fail(err: &(dyn StdError + 'static)) -> Failure {
    if chain(err).iter().any(|e| is_timeout(*e)) {
        Failure::TimedOut
    } else {
        Failure::Other(format!("request failed: {}", describe(err)))
    }
}

fn is_timeout(e: &(dyn StdError + 'static)) -> bool {
    e.downcast_ref::<reqwest::Error>()
        .is_some_and(reqwest::Error::is_timeout)
        || e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
}

/// An error and its sources, looking inside `io::Error`s (whose `source` skips the error
/// they wrap).
fn chain<'a>(err: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur
        && out.len() < 16
    {
        out.push(e);
        cur = match e.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    out
}

/// `error sending request: client error (Connect): tcp connect error: Connection refused …`,
/// a message repeated by its wrapper said once.
fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in chain(err) {
        let msg = e.to_string();
        if msg.is_empty() || parts.last().is_some_and(|p| p.contains(&msg)) {
            continue;
        }
        parts.push(msg);
    }
    parts.join(": ")
}

/// What must never appear in an error message: the URL as written and as parsed (replaced by
/// its redacted form), its password and its query.
struct Secrets {
    urls: Vec<String>,
    redacted: String,
    words: Vec<String>,
}

impl Secrets {
    fn new(input: &Map<String, Value>, url: &Url) -> Secrets {
        let mut redacted = url.clone();
        let _ = redacted.set_username("");
        let _ = redacted.set_password(None);
        redacted.set_query(None);
        redacted.set_fragment(None);
        let mut urls = vec![url.as_str().to_string()];
        if let Some(Value::String(raw)) = input.get("url") {
            urls.push(raw.trim().to_string());
        }
        // Longest first, so that a URL is replaced before a prefix of it.
        urls.sort_by_key(|u| std::cmp::Reverse(u.len()));
        // Short ones would mangle ordinary words; they only appear inside a URL anyway.
        let words = [url.password(), url.query(), url.fragment()]
            .into_iter()
            .flatten()
            .filter(|w| w.len() >= 4)
            .map(str::to_string)
            .collect();
        Secrets {
            urls,
            redacted: redacted.to_string(),
            words,
        }
    }

    fn scrub(&self, mut msg: String) -> String {
        for u in &self.urls {
            msg = msg.replace(u.as_str(), &self.redacted);
        }
        for w in &self.words {
            msg = msg.replace(w.as_str(), "***");
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    //! Against tiny_http servers on 127.0.0.1 started by each test (never any other address).

    use std::collections::BTreeMap;
    use std::io::Write;
    use std::net::TcpListener;
    use std::path::Path;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use std::thread;
    use std::time::{Duration, Instant};

    use serde_json::{Map, Value, json};

    use super::super::{Invocation, Outcome, Registry, ToolKind, ToolSpec, execute_with_stop};
    use super::*;

    /// One request as the server read it.
    struct Received {
        /// `GET /path?q=1 HTTP/1.1`.
        request_line: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Received {
        fn read(request: &mut tiny_http::Request) -> Received {
            let mut body = Vec::new();
            request
                .as_reader()
                .read_to_end(&mut body)
                .expect("read the body");
            Received {
                request_line: format!(
                    "{} {} HTTP/{}",
                    request.method(),
                    request.url(),
                    request.http_version()
                ),
                headers: request
                    .headers()
                    .iter()
                    .map(|h| (h.field.to_string(), h.value.to_string()))
                    .collect(),
                body,
            }
        }

        fn request_line(&self) -> &str {
            &self.request_line
        }

        fn header(&self, name: &str) -> Option<String> {
            let all: Vec<&String> = self
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
                .collect();
            assert!(all.len() <= 1, "{name} sent {} times", all.len());
            all.first().map(|v| v.to_string())
        }
    }

    /// What a server answers: status, extra headers, body.
    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    fn reply(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.to_vec(),
        }
    }

    fn bind() -> (tiny_http::Server, String) {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = server.server_addr().to_ip().expect("a TCP address");
        (server, format!("http://{addr}"))
    }

    /// Answers up to `n` requests with `respond`. Returns the base URL (`http://127.0.0.1:PORT`)
    /// and the requests as they arrive.
    fn serve(
        n: usize,
        respond: impl Fn(&Received) -> Reply + Send + 'static,
    ) -> (String, mpsc::Receiver<Received>) {
        let (server, base) = bind();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for mut request in server.incoming_requests().take(n) {
                let received = Received::read(&mut request);
                let answer = respond(&received);
                let mut response =
                    tiny_http::Response::from_data(answer.body).with_status_code(answer.status);
                for (k, v) in &answer.headers {
                    response.add_header(
                        tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap(),
                    );
                }
                let _ = request.respond(response);
                let _ = tx.send(received);
            }
        });
        (base, rx)
    }

    /// Takes one request and never answers it (holds it for 30 s, longer than any client here
    /// waits).
    fn silent() -> String {
        let (server, base) = bind();
        thread::spawn(move || {
            if let Ok(request) = server.recv() {
                thread::sleep(Duration::from_secs(30));
                drop(request);
            }
        });
        base
    }

    /// A 127.0.0.1 port nothing listens on.
    fn closed_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn spec() -> ToolSpec {
        Registry::new(&BTreeMap::new())
            .get("http")
            .unwrap()
            .into_owned()
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    fn run_spec(spec: &ToolSpec, input: Value, stop: Option<&AtomicBool>) -> Outcome {
        let inv = Invocation {
            task_id: "0123456789ab",
            run_id: "run-42",
            workdir: Path::new("/"),
            remove_env: &[],
        };
        execute_with_stop(spec, &obj(input), &inv, stop)
    }

    fn http(input: Value) -> Outcome {
        run_spec(&spec(), input, None)
    }

    fn received(rx: &mpsc::Receiver<Received>) -> Received {
        rx.recv_timeout(Duration::from_secs(2))
            .expect("the server got no request")
    }

    fn invalid(input: Value) -> String {
        let err = spec().validate(&obj(input.clone())).unwrap_err();
        // execute refuses the same input the same way, before anything is sent.
        let out = http(input);
        assert!(!out.success);
        assert_eq!(out.error.as_deref(), Some(err.as_str()));
        err
    }

    #[test]
    fn registered_as_a_builtin_asking_for_approval() {
        let s = spec();
        assert_eq!(
            s.kind,
            ToolKind::Builtin(super::super::builtin::builtin("http").unwrap())
        );
        assert_eq!(s.approval, crate::config::Approval::Ask);
        assert_eq!(s.timeout, super::super::DEFAULT_TIMEOUT);
        assert!(super::super::builtin::is_builtin("http"));
    }

    #[test]
    fn get_200_body_on_stdout() {
        let (base, rx) = serve(1, |_| reply(200, &[], b"hello\nworld"));
        let out = http(json!({"url": format!("{base}/path?q=1")}));
        assert!(out.success, "{out:?}");
        assert_eq!(out.stdout, "hello\nworld");
        assert_eq!(out.stdout_dropped, 0);
        assert_eq!(out.exit_code, None);
        assert_eq!(out.error, None);
        // With no summary in the body, the status is the summary.
        assert_eq!(out.cost_usd, None);
        assert_eq!(out.summary.as_deref(), Some("HTTP 200 OK"));
        let req = received(&rx);
        assert_eq!(req.request_line(), "GET /path?q=1 HTTP/1.1");
        assert_eq!(
            req.header("user-agent").unwrap(),
            concat!("heartbeat/", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(req.header("content-type"), None);
        assert!(req.body.is_empty());
    }

    #[test]
    fn json_body_is_sent_as_json() {
        let (base, rx) = serve(1, |_| reply(201, &[], b""));
        let body = json!({"a": [1, 2.5, null], "b": "x\u{e9}\n", "c": {"d": true}});
        let out = http(json!({"url": base, "method": "post", "body": body}));
        assert!(out.success, "{out:?}");
        let req = received(&rx);
        assert_eq!(req.request_line(), "POST / HTTP/1.1");
        assert_eq!(req.header("content-type").unwrap(), "application/json");
        assert_eq!(req.body, serde_json::to_vec(&body).unwrap());

        // Any JSON value that is not a string; a given content type wins.
        let (base, rx) = serve(1, |_| reply(200, &[], b""));
        let out = http(json!({
            "url": base,
            "method": "Patch",
            "body": [1, "two"],
            "headers": {"Content-Type": "application/vnd.api+json"},
        }));
        assert!(out.success, "{out:?}");
        let req = received(&rx);
        assert_eq!(req.request_line(), "PATCH / HTTP/1.1");
        assert_eq!(
            req.header("content-type").unwrap(),
            "application/vnd.api+json"
        );
        assert_eq!(req.body, b"[1,\"two\"]");
    }

    #[test]
    fn string_body_is_sent_as_is() {
        let (base, rx) = serve(1, |_| reply(204, &[], b""));
        let text = "{\"not\": \"re-encoded\"}\r\nline 2 \u{1F600}";
        let out = http(json!({"url": base, "method": "PUT", "body": text}));
        assert!(out.success, "{out:?}");
        assert_eq!(out.stdout, "");
        let req = received(&rx);
        assert_eq!(req.request_line(), "PUT / HTTP/1.1");
        assert_eq!(req.header("content-type"), None);
        assert_eq!(req.body, text.as_bytes());
    }

    #[test]
    fn headers_and_url_credentials_arrive() {
        let (base, rx) = serve(1, |_| reply(200, &[], b"ok"));
        let url = base.replace("http://", "http://user:secret@");
        let out = http(json!({
            "url": url,
            "method": "delete",
            "headers": {"X-Token": "abc def", "Accept": "text/plain", "User-Agent": "mine/1"},
        }));
        assert!(out.success, "{out:?}");
        let req = received(&rx);
        assert_eq!(req.request_line(), "DELETE / HTTP/1.1");
        assert_eq!(req.header("x-token").unwrap(), "abc def");
        assert_eq!(req.header("accept").unwrap(), "text/plain");
        assert_eq!(req.header("user-agent").unwrap(), "mine/1");
        // "user:secret" in base64.
        assert_eq!(
            req.header("authorization").unwrap(),
            "Basic dXNlcjpzZWNyZXQ="
        );
    }

    #[test]
    fn unexpected_status_fails_with_the_body_on_stdout() {
        let (base, _rx) = serve(1, |_| reply(404, &[], b"no such thing"));
        let out = http(json!({"url": base}));
        assert!(!out.success);
        assert_eq!(
            out.error.as_deref(),
            Some("HTTP 404 Not Found (expected 2xx)")
        );
        assert_eq!(out.stdout, "no such thing");
        assert_eq!(out.exit_code, None);
        // What `retry_on` is matched against (docs/reference.md#retries).
        assert_eq!(out.failure, Some(FailureKind::Http(404)));

        let (base, _rx) = serve(1, |_| reply(200, &[], b""));
        let out = http(json!({"url": base, "expect_status": [204, "3xx"]}));
        assert_eq!(
            out.error.as_deref(),
            Some("HTTP 200 OK (expected 204 or 3xx)")
        );

        // A status without a canonical reason.
        let (base, _rx) = serve(1, |_| reply(599, &[], b""));
        let out = http(json!({"url": base, "expect_status": [200, 201, "2xx"]}));
        assert_eq!(
            out.error.as_deref(),
            Some("HTTP 599 (expected 200, 201 or 2xx)")
        );
    }

    #[test]
    fn expect_status_makes_other_statuses_succeed() {
        for expect in [
            json!(404),
            json!("404"),
            json!("4xx"),
            json!("4XX"),
            json!([200, 404]),
        ] {
            let (base, _rx) = serve(1, |_| reply(404, &[], b"gone"));
            let out = http(json!({"url": base, "expect_status": expect}));
            assert!(out.success, "{expect}: {out:?}");
            assert_eq!(out.stdout, "gone");
        }
        // With an explicit pattern, a 2xx is no longer implied.
        let (base, _rx) = serve(1, |_| reply(200, &[], b""));
        let out = http(json!({"url": base, "expect_status": 404}));
        assert!(!out.success);
    }

    #[test]
    fn status_patterns() {
        let p = |v: Value| StatusPattern::parse(&v);
        assert_eq!(p(json!(204)), Some(StatusPattern::Code(204)));
        assert_eq!(p(json!("599")), Some(StatusPattern::Code(599)));
        assert_eq!(p(json!("1xx")), Some(StatusPattern::Class(1)));
        assert_eq!(p(json!("5Xx")), Some(StatusPattern::Class(5)));
        for bad in [
            json!(99),
            json!(600),
            json!(-200),
            json!(200.5),
            json!("6xx"),
            json!("0xx"),
            json!("2x"),
            json!("2xxx"),
            json!("x2x"),
            json!(" 200"),
            json!("２００"),
            json!(true),
            json!(null),
            json!({}),
        ] {
            assert_eq!(p(bad.clone()), None, "{bad}");
        }
        assert!(StatusPattern::Class(2).matches(200));
        assert!(StatusPattern::Class(2).matches(299));
        assert!(!StatusPattern::Class(2).matches(300));
        assert!(!StatusPattern::Class(2).matches(199));
        assert_eq!(StatusPattern::Class(3).to_string(), "3xx");
        assert_eq!(StatusPattern::Code(418).to_string(), "418");
    }

    #[test]
    fn a_server_that_never_answers_times_out() {
        let base = silent();
        let started = Instant::now();
        let out = http(json!({"url": base, "timeout": "1s"}));
        let took = started.elapsed();
        assert!(!out.success);
        // The timeout, not the end of the 30 s the server holds the request; not before it.
        assert_eq!(out.error.as_deref(), Some("timed out after 1s"));
        assert!(took >= Duration::from_millis(900), "{took:?}");
        assert_eq!(out.failure, Some(FailureKind::Timeout));

        // A number of seconds; and the tool's own timeout when the input has none.
        let base = silent();
        let out = http(json!({"url": base, "timeout": 0.3}));
        assert_eq!(out.error.as_deref(), Some("timed out after 300ms"));
        let base = silent();
        let mut s = spec();
        s.timeout = Duration::from_millis(250);
        let out = run_spec(&s, json!({"url": base}), None);
        assert_eq!(out.error.as_deref(), Some("timed out after 250ms"));
    }

    #[test]
    fn a_trickling_body_cannot_outlast_the_timeout() {
        let (server, base) = bind();
        thread::spawn(move || {
            let Ok(request) = server.recv() else { return };
            // Written by hand: tiny_http buffers a response body, and each byte must go out
            // on its own.
            let mut raw = request.into_writer();
            let _ = raw.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
            // One byte every 100 ms: each read is quick, the whole is not.
            for _ in 0..100 {
                if raw.write_all(b"x").and_then(|()| raw.flush()).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        // Timed out: the whole body would take 10 s, and arrive.
        let out = http(json!({"url": base, "timeout": "700ms"}));
        assert_eq!(out.error.as_deref(), Some("timed out after 700ms"));
        assert_eq!(out.failure, Some(FailureKind::Timeout));
        // What arrived is kept.
        assert!(!out.stdout.is_empty() && out.stdout.bytes().all(|b| b == b'x'));
    }

    #[test]
    fn stop_flag() {
        // Set before: nothing is sent (a closed port would say "connection refused").
        let stop = AtomicBool::new(true);
        let url = format!("http://127.0.0.1:{}/", closed_port());
        let out = run_spec(&spec(), json!({"url": url}), Some(&stop));
        assert_eq!(out.error.as_deref(), Some("stopped"));

        // Set while the request waits: it is abandoned.
        let base = silent();
        let stop = AtomicBool::new(false);
        let out = thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(200));
                stop.store(true, Ordering::SeqCst);
            });
            run_spec(&spec(), json!({"url": base, "timeout": "10s"}), Some(&stop))
        });
        // Stopped, before the request's own 10 s timeout.
        assert_eq!(out.error.as_deref(), Some("stopped"));
    }

    #[test]
    fn connection_errors_hide_credentials_and_query() {
        let port = closed_port();
        let out = http(json!({
            "url": format!("http://alice:s3cr3tpw@127.0.0.1:{port}/hook?token=hunter2222#frag"),
        }));
        assert!(!out.success);
        let err = out.error.unwrap();
        // A refused connection is said as one, naming only where it went.
        assert_eq!(err, format!("connection refused: 127.0.0.1:{port}"));
        for secret in ["alice", "s3cr3tpw", "hunter2222", "token", "frag"] {
            assert!(!err.contains(secret), "{secret} in {err}");
        }
    }

    #[test]
    fn redirects_are_followed_up_to_five() {
        // /r/N redirects to /r/N-1; /r/0 answers.
        let respond = |req: &Received| {
            let path = req.request_line().split(' ').nth(1).unwrap().to_string();
            let path = path.split('?').next().unwrap();
            let n: u32 = path.trim_start_matches("/r/").parse().unwrap();
            if n == 0 {
                reply(200, &[], b"landed")
            } else {
                let to = format!("/r/{}", n - 1);
                reply(302, &[("Location", &to)], b"")
            }
        };
        let (base, rx) = serve(6, respond);
        let out = http(json!({"url": format!("{base}/r/5")}));
        assert!(out.success, "{out:?}");
        assert_eq!(out.stdout, "landed");
        // The server may record the last request just after the client has its answer.
        let seen = (0..6)
            .take_while(|_| rx.recv_timeout(Duration::from_secs(10)).is_ok())
            .count();
        assert_eq!(seen, 6);
        assert!(rx.try_recv().is_err(), "no seventh request");

        let (base, _rx) = serve(7, respond);
        let out = http(json!({"url": format!("{base}/r/6?key=abcdefgh")}));
        let err = out.error.unwrap();
        assert!(err.starts_with("request failed: "), "{err}");
        assert!(err.contains("redirect"), "{err}");
        assert!(!err.contains("abcdefgh"), "{err}");
    }

    #[test]
    fn a_large_body_is_capped_and_the_rest_counted() {
        let body = vec![b'a'; 2 * 1024 * 1024 + 10];
        let (base, _rx) = serve(1, move |_| reply(200, &[], &body));
        let out = http(json!({"url": base}));
        assert!(out.success, "{out:?}");
        assert_eq!(out.stdout.len(), OUTPUT_CAP);
        assert_eq!(out.stdout_dropped, 1024 * 1024 + 10);
    }

    #[test]
    fn cost_and_summary_from_the_last_line_of_the_body() {
        let (base, _rx) = serve(1, |_| {
            reply(
                200,
                &[],
                b"log line\n{\"summary\": \"3 new\", \"cost_usd\": 0.25}\n\n",
            )
        });
        let out = http(json!({"url": base}));
        assert!(out.success, "{out:?}");
        assert_eq!(out.summary.as_deref(), Some("3 new"));
        assert_eq!(out.cost_usd, Some(0.25));
    }

    #[test]
    fn invalid_utf8_is_lossy() {
        let (base, _rx) = serve(1, |_| reply(200, &[], b"a\xffb"));
        let out = http(json!({"url": base}));
        assert_eq!(out.stdout, "a\u{fffd}b");
    }

    #[test]
    fn validation_errors_name_the_key() {
        let url = "http://127.0.0.1:9/";
        let cases: Vec<(Value, &[&str])> = vec![
            (json!({}), &["missing key \"url\" for http"]),
            (json!({"url": 5}), &["\"url\"", "must be a string"]),
            (
                json!({"url": "ftp://example.com/x"}),
                &["\"url\"", "http:// or https://", "ftp://"],
            ),
            (
                json!({"url": "file:///etc/passwd"}),
                &["\"url\"", "file://"],
            ),
            (
                json!({"url": "/relative"}),
                &["\"url\"", "not a valid absolute URL"],
            ),
            (json!({"url": "http://"}), &["\"url\""]),
            (
                json!({"url": url, "method": "FETCH"}),
                &[
                    "\"method\"",
                    "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
                    "\"FETCH\"",
                ],
            ),
            (json!({"url": url, "method": "CONNECT"}), &["\"method\""]),
            (
                json!({"url": url, "method": 1}),
                &["\"method\"", "a number"],
            ),
            (
                json!({"url": url, "headers": ["a"]}),
                &["\"headers\"", "an array"],
            ),
            (
                json!({"url": url, "headers": {"X-Count": 3}}),
                &["\"headers\"", "\"X-Count\" is a number"],
            ),
            (
                json!({"url": url, "headers": {"Bad Name": "v"}}),
                &["\"headers\"", "\"Bad Name\"", "header name"],
            ),
            (
                json!({"url": url, "headers": {"X-A": "v\r\nX-Injected: 1"}}),
                &["\"headers\"", "\"X-A\"", "header value"],
            ),
            (
                json!({"url": url, "headers": {"Accept": "a", "accept": "b"}}),
                &["\"headers\"", "\"accept\" twice"],
            ),
            (
                json!({"url": url, "expect_status": 600}),
                &["\"expect_status\"", "not 600"],
            ),
            (
                json!({"url": url, "expect_status": "2x"}),
                &["\"expect_status\"", "\"2x\""],
            ),
            (
                json!({"url": url, "expect_status": []}),
                &["\"expect_status\"", "empty array"],
            ),
            (
                json!({"url": url, "expect_status": [200, true]}),
                &["\"expect_status\"", "element 1 is true"],
            ),
            (json!({"url": url, "timeout": "soon"}), &["\"timeout\""]),
            (
                json!({"url": url, "timeout": 0}),
                &["\"timeout\"", "positive"],
            ),
            (
                json!({"url": url, "cmd": "x"}),
                &[
                    "unknown key \"cmd\" for http",
                    "url, method, headers, body, expect_status, timeout",
                ],
            ),
        ];
        for (input, wanted) in cases {
            let err = invalid(input.clone());
            for w in wanted {
                assert!(err.contains(w), "{input}: {err:?} lacks {w:?}");
            }
        }
        // A secret header value is not echoed.
        let err = invalid(json!({"url": url, "headers": {"Authorization": "Bearer tok\nen"}}));
        assert!(!err.contains("tok"), "{err}");
        // Valid shapes.
        for ok in [
            json!({"url": "https://example.com"}),
            json!({"url": " HTTP://Example.COM/a?b=c ", "method": " get "}),
            json!({"url": url, "method": "options", "headers": {}, "body": null, "expect_status": "3xx", "timeout": "2m"}),
            json!({"url": url, "body": {"a": 1}, "expect_status": ["204", 200], "timeout": 1.5}),
        ] {
            assert_eq!(spec().validate(&obj(ok.clone())), Ok(()), "{ok}");
        }
    }
}
