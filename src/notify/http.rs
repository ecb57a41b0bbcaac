//! One HTTP request of a channel (ntfy, Slack, Discord, webhooks), and how its answer is
//! classed (docs/reference.md#channels): 2xx sent; 429 wait as `Retry-After` says; 408 and
//! 5xx, a timeout or no connection try again later; any other 4xx can never succeed.
//!
//! Invariants:
//! - The channel's timeout bounds the whole request, body included: the request runs on a
//!   thread of its own and is abandoned at the deadline. That thread is outside any async
//!   runtime, so a blocking client is safe whoever calls (the daemon, `heartbeat mcp`).
//! - No error names the URL (a webhook's URL is a secret); redaction stands behind this too.
//! - A loopback URL is reached directly, never through a proxy (`net::is_loopback`).

use std::sync::mpsc;
use std::time::Duration;

use reqwest::Url;

use super::SendError;
use crate::net::is_loopback;

/// The longest answer body read (an error's first line is all that is shown of it).
const BODY_CAP: u64 = 64 * 1024;

/// A request to send.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    /// `POST` or `GET`.
    pub post: bool,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A POST of a JSON document.
    pub(crate) fn json(url: &str, body: &serde_json::Value) -> Request {
        Request {
            post: true,
            url: url.to_string(),
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }
}

/// A 2xx answer's body (up to [`BODY_CAP`]).
pub(crate) type Body = String;

/// Send `req`, waiting at most `timeout` for all of it; a non-2xx answer is a [`SendError`]
/// classed as the module says.
pub(crate) fn send(req: Request, timeout: Duration) -> Result<Body, SendError> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("channel-http".into())
        .spawn(move || {
            let _ = tx.send(blocking(req, timeout));
        })
        .map_err(|e| SendError::Unavailable(format!("cannot start a request: {e}")))?;
    match rx.recv_timeout(timeout + Duration::from_millis(250)) {
        Ok(result) => result,
        Err(_) => Err(SendError::Unavailable(format!(
            "no answer within {}",
            humantime::format_duration(timeout)
        ))),
    }
}

fn blocking(req: Request, timeout: Duration) -> Result<Body, SendError> {
    let url = Url::parse(&req.url).map_err(|e| SendError::Rejected(format!("not a URL: {e}")))?;
    let mut client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .user_agent(concat!("heartbeat/", env!("CARGO_PKG_VERSION")));
    if is_loopback(&url) {
        client = client.no_proxy();
    }
    let client = client
        .build()
        .map_err(|e| SendError::Unavailable(format!("cannot build an HTTP client: {e}")))?;
    let mut builder = if req.post {
        client.post(url).body(req.body)
    } else {
        client.get(url)
    };
    for (name, value) in &req.headers {
        builder = builder.header(name, value);
    }
    let response = builder.send().map_err(|e| {
        let e = e.without_url();
        if e.is_timeout() {
            SendError::Unavailable(format!(
                "no answer within {}",
                humantime::format_duration(timeout)
            ))
        } else {
            SendError::Unavailable(format!("request failed: {}", source_chain(&e)))
        }
    })?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut body = String::new();
    {
        use std::io::Read;
        let _ = response.take(BODY_CAP).read_to_string(&mut body);
    }
    classify(
        status.as_u16(),
        status.canonical_reason(),
        retry_after,
        body,
    )
}

/// What an answer means for the message (see the module).
pub(crate) fn classify(
    status: u16,
    reason: Option<&str>,
    retry_after: Option<Duration>,
    body: String,
) -> Result<Body, SendError> {
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let mut what = format!("HTTP {status}");
    if let Some(r) = reason {
        what.push(' ');
        what.push_str(r);
    }
    let first = body.lines().map(str::trim).find(|l| !l.is_empty());
    if let Some(line) = first {
        what.push_str(": ");
        what.extend(line.chars().take(200));
    }
    Err(match status {
        429 => SendError::RetryAfter(retry_after.unwrap_or(Duration::from_secs(60)), what),
        408 | 500..=599 => SendError::Unavailable(what),
        400..=499 => SendError::Rejected(what),
        _ => SendError::Refused(what),
    })
}

/// An error and its causes, `: `-joined (reqwest's own message is only the outermost).
pub(crate) fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_classed_as_the_outbox_needs() {
        assert_eq!(classify(204, None, None, String::new()), Ok(String::new()));
        assert!(matches!(
            classify(404, Some("Not Found"), None, "no such hook\n".into()),
            Err(SendError::Rejected(m)) if m == "HTTP 404 Not Found: no such hook"
        ));
        assert!(matches!(
            classify(429, None, Some(Duration::from_secs(7)), String::new()),
            Err(SendError::RetryAfter(d, _)) if d == Duration::from_secs(7)
        ));
        assert!(matches!(
            classify(408, None, None, String::new()),
            Err(SendError::Unavailable(_))
        ));
        assert!(matches!(
            classify(503, None, None, String::new()),
            Err(SendError::Unavailable(_))
        ));
    }

    #[test]
    fn a_server_that_does_not_answer_costs_the_timeout_and_no_more() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let started = std::time::Instant::now();
        let err = send(
            Request::json(&url, &serde_json::json!({"text": "hi"})),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(err, SendError::Unavailable(_)), "{err:?}");
        assert!(!err.message().contains("/hook"), "{err:?}");
        // Generous: a loaded machine may be slow to wake the waiting thread.
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(listener);
    }
}
