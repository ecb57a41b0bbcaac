//! The stdio transport of `heartbeat mcp`: JSON-RPC messages, one per line, read by
//! heartbeat itself so that no request goes unanswered or runs twice.
//!
//! Invariants:
//!
//! - A line never grows past [`MAX_MESSAGE`] in memory. A longer request is read to its end
//!   without being kept, and answered with an error naming its size (and its id, when the
//!   id can be found in it), never dropped silently.
//! - A request id is used once per session: a request that repeats an id is answered with
//!   an error and never reaches the server, so nothing it asks is done twice.
//! - An error is redacted on its way out, whoever made it (the SDK quotes an unknown
//!   method back).
//! - Answers are written by the SDK's own framing (one JSON line each); an answer that
//!   heartbeat writes here is sent whole before the next line is read, also when the SDK
//!   drops a `receive` half-way (it polls it in a `select!`).

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use rmcp::RoleServer;
use rmcp::model::{ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

use crate::redact::Secrets;
use crate::text::Redacted;

/// The largest request, in bytes (without its newline): the SDK's own limit for one MCP
/// message, so that heartbeat takes from an agent what it takes from an MCP server.
pub(super) const MAX_MESSAGE: usize = DEFAULT_MAX_LINE_LENGTH;

type Sending = Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;

/// Reads requests from `R`, answers on `W`.
pub(super) struct Guarded<R, W: AsyncWrite> {
    read: BufReader<R>,
    limit: usize,
    /// The line read so far.
    line: Vec<u8>,
    /// Reading past the end of an oversized line: its size so far, and its id as found.
    oversized: Option<(usize, IdScan)>,
    /// The writing half (the SDK's framing; its reader is never used).
    out: AsyncRwTransport<RoleServer, tokio::io::Empty, W>,
    /// An answer of ours being written.
    sending: Option<Sending>,
    /// Every request id seen in this session, as its digest (an id may be a long string;
    /// a digest costs 32 bytes whatever its length).
    ids: HashSet<[u8; 32]>,
}

impl<R, W> Guarded<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(super) fn new(read: R, write: W, limit: usize) -> Self {
        Guarded {
            read: BufReader::new(read),
            limit,
            line: Vec::new(),
            oversized: None,
            out: AsyncRwTransport::new(tokio::io::empty(), write),
            sending: None,
            ids: HashSet::new(),
        }
    }

    /// Answer a request ourselves with an invalid-request error saying `message` (written
    /// before the next line is read). An answer is a sink: it takes only redacted text.
    fn answer(&mut self, message: Redacted, id: Option<RequestId>) {
        let error = ErrorData::invalid_request(message.into_string(), None);
        let msg: TxJsonRpcMessage<RoleServer> = JsonRpcMessage::error(error, id);
        self.sending = Some(Box::pin(self.out.send(msg)));
    }

    /// The next whole line, or what ended the input. Cancel-safe: everything read is kept
    /// in `self` before the next await.
    async fn next_line(&mut self) -> Read {
        loop {
            let (used, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(a) => a,
                    Err(_) => return Read::End,
                };
                if available.is_empty() {
                    // The input ended; an oversized last line is still answered.
                    return match self.oversized.take() {
                        Some((size, scan)) => Read::Oversized(size, scan.id()),
                        None => Read::End,
                    };
                }
                let newline = memchr::memchr(b'\n', available);
                let take = newline.map_or(available.len(), |i| i + 1);
                let chunk = &available[..newline.unwrap_or(take)];
                if let Some((size, scan)) = &mut self.oversized {
                    *size += chunk.len();
                    scan.feed(chunk);
                } else if self.line.len() + chunk.len() > self.limit {
                    let mut scan = IdScan::default();
                    scan.feed(&self.line);
                    scan.feed(chunk);
                    self.oversized = Some((self.line.len() + chunk.len(), scan));
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
                (take, newline.is_some())
            };
            self.read.consume(used);
            if done {
                return match self.oversized.take() {
                    Some((size, scan)) => Read::Oversized(size, scan.id()),
                    None => Read::Line,
                };
            }
        }
    }
}

enum Read {
    Line,
    /// A line over the limit: its size without the newline, and its id if found.
    Oversized(usize, Option<RequestId>),
    End,
}

impl<R, W> Transport<RoleServer> for Guarded<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Every error leaves redacted, also those the SDK makes itself from what the client
        // sent (an unknown method is quoted back as the message).
        if let JsonRpcMessage::Error(e) = &mut item {
            let secrets = crate::redact::Secrets::taken();
            e.error.message = secrets.redact(&e.error.message).into_string().into();
            if let Some(data) = e.error.data.take() {
                e.error.data = Some(secrets.redact_json(data).into_value());
            }
        }
        self.out.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(sending) = &mut self.sending {
                let sent = sending.await;
                self.sending = None;
                // Nobody reads our answers any more: the session is over.
                sent.ok()?;
            }
            match self.next_line().await {
                Read::End => return None,
                Read::Oversized(size, id) => {
                    self.answer(oversized(size, self.limit), id);
                    continue;
                }
                Read::Line => {}
            }
            let line = std::mem::take(&mut self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
                Ok(JsonRpcMessage::Request(request)) => {
                    if !self.ids.insert(digest(&request.id)) {
                        let error = Secrets::taken().redact(&format!(
                            "request id {} was already used in this session: a request id is \
                             used once; this request was not carried out",
                            id_text(&request.id)
                        ));
                        self.answer(error, Some(request.id));
                        continue;
                    }
                    return Some(JsonRpcMessage::Request(request));
                }
                Ok(other) => return Some(other),
                Err(e) => {
                    // Not JSON at all: nothing to answer to (answering could start an
                    // error storm with a peer that echoes). JSON that is not a message
                    // we know: a request is answered, a notification ignored.
                    let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(line) else {
                        continue;
                    };
                    let Some(id) = msg.get("id").and_then(request_id) else {
                        continue;
                    };
                    if msg.contains_key("method") {
                        // The parser's message may quote the request.
                        let error = Secrets::taken().redact(&format!("invalid request: {e}"));
                        self.answer(error, Some(id));
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(sending) = self.sending.take() {
            let _ = sending.await;
        }
        self.out.close().await
    }
}

fn oversized(size: usize, limit: usize) -> Redacted {
    Secrets::taken().redact(&format!(
        "this request is {size} bytes, over heartbeat mcp's limit of {limit} bytes ({} MiB) \
         for one message; it was not read or carried out",
        limit / (1024 * 1024)
    ))
}

/// An id as a person reads it in a message: a number as itself, a string quoted and cut.
fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => {
            let shown = Secrets::taken().redact(s).first_line(64);
            format!("{:?}", shown.as_str())
        }
    }
}

/// An id's digest: its JSON text hashed, so that `1` and `"1"` stay two ids.
fn digest(id: &RequestId) -> [u8; 32] {
    let text = serde_json::to_vec(id).unwrap_or_default();
    Sha256::digest(&text).into()
}

fn request_id(v: &Value) -> Option<RequestId> {
    match v {
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        Value::String(s) => Some(RequestId::String(s.as_str().into())),
        _ => None,
    }
}

/// Finds the value of the top-level `"id"` key of a JSON object read in pieces, without
/// keeping the rest: for answering a request too large to keep.
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, what comes next.
    expect: Expect,
    /// The key being read or last read at depth 1 (only its first bytes matter).
    key: Vec<u8>,
    /// The raw text of the id's value, while it is read.
    value: Option<Vec<u8>>,
    found: Option<Vec<u8>>,
}

#[derive(Default, PartialEq)]
enum Expect {
    #[default]
    Key,
    Colon,
    Value,
    Comma,
}

/// Longer ids are not looked for (an id is a number or a short string).
const MAX_ID: usize = 256;

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() {
                return;
            }
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        let top = self.depth == 1;
        if self.in_string {
            if top {
                self.keep(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if top && self.expect == Expect::Key {
                    self.expect = Expect::Colon;
                } else if top && self.expect == Expect::Value {
                    self.end_value();
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if top && self.expect == Expect::Key {
                    self.key.clear();
                } else if top {
                    self.start_value(b);
                }
            }
            b'{' | b'[' => {
                if top && self.expect == Expect::Value {
                    // An object or array is not an id.
                    self.expect = Expect::Comma;
                }
                self.depth += 1;
            }
            b'}' | b']' => {
                if top && self.expect == Expect::Value {
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 1 {
                    self.expect = Expect::Comma;
                }
            }
            b':' if top && self.expect == Expect::Colon => self.expect = Expect::Value,
            b',' if top => {
                if self.expect == Expect::Value {
                    self.end_value();
                }
                self.expect = Expect::Key;
            }
            b' ' | b'\t' | b'\r' | b'\n'
                if top && self.expect == Expect::Value && self.value.is_some() =>
            {
                self.end_value()
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if top && self.expect == Expect::Value => self.start_value(b),
            _ => {}
        }
    }

    /// A byte of a value at depth 1 (the key's bytes are kept while it is read).
    fn keep(&mut self, b: u8) {
        match self.expect {
            Expect::Key if self.key.len() < 8 => self.key.push(b),
            Expect::Value => {
                if let Some(v) = &mut self.value
                    && v.len() < MAX_ID
                {
                    v.push(b);
                }
            }
            _ => {}
        }
    }

    fn start_value(&mut self, b: u8) {
        if self.value.is_none() {
            // The key as read, with its closing quote.
            self.value = (self.key == b"id\"").then(Vec::new);
        }
        self.keep(b);
    }

    fn end_value(&mut self) {
        self.found = self.value.take().filter(|_| self.key == b"id\"");
        self.expect = Expect::Comma;
    }

    fn id(&self) -> Option<RequestId> {
        let raw = self.found.as_deref()?;
        request_id(&serde_json::from_slice(raw).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str, piece: usize) -> Option<RequestId> {
        let mut s = IdScan::default();
        for chunk in text.as_bytes().chunks(piece) {
            s.feed(chunk);
        }
        // The end of the input ends a bare number too.
        if s.found.is_none() && s.expect == Expect::Value {
            s.end_value();
        }
        s.id()
    }

    #[test]
    fn the_id_is_found_wherever_it_is_in_the_object() {
        let big = "x".repeat(1000);
        for text in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#.to_string(),
            format!(r#"{{"method":"tools/call","params":{{"a":"{big}","id":9}},"id":7}}"#),
            r#"{ "params" : [ {"id": 1} ], "id" : 7 }"#.to_string(),
            format!(r#"{{"params":{{"text":"\"id\": 3, {big}"}}, "id":7}}"#),
        ] {
            for piece in [1, 3, 7, 4096] {
                assert_eq!(scan(&text, piece), Some(RequestId::Number(7)), "{text}");
            }
        }
        assert_eq!(
            scan(r#"{"id":"a\"b","method":"x"}"#, 2),
            Some(RequestId::String("a\"b".into()))
        );
        assert_eq!(scan(r#"{"method":"x","params":{"id":4}}"#, 5), None);
        assert_eq!(scan(r#"{"id":{"n":4},"method":"x"}"#, 5), None);
        assert_eq!(scan(r#"{"idx":4,"method":"x"}"#, 5), None);
    }
}
