//! One small HTTP/1.1 server on 127.0.0.1 for the tests (tiny_http underneath): every request
//! is read whole (body included) and handed to the test's handler on a thread of its own, so
//! a handler that waits (a long poll) never holds up another request. Nothing here listens
//! on any other address.
//!
//! Invariants: a handler sees each request once, in a thread that ends when it returns; on
//! drop the server stops taking requests and waits for every running handler, so a handler
//! that may wait must also end when the test's own state says so (see the Telegram double's
//! long poll). tiny_http's own connection threads end when their clients hang up.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use serde_json::Value;

/// One request as the server received it.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    /// `GET`, `POST`, … as sent.
    pub method: String,
    /// The request target: path and query (`/bot123:abc/SendMessage`).
    pub url: String,
    /// Every header in arrival order, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of a header (names are case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query.
    pub(crate) fn path(&self) -> &str {
        self.url.split('?').next().unwrap_or_default()
    }
}

/// What the handler answers.
pub(crate) enum Reply {
    /// A response with this status, `Content-Type`, other headers and body.
    Body {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Bytes that are not an HTTP response: the client fails at once with a connection-level
    /// error, as when a proxy drops the connection (and without any 5xx status).
    NotHttp,
}

impl Reply {
    pub(crate) fn json(status: u16, body: &Value) -> Reply {
        Reply::raw(status, "application/json", body.to_string())
    }

    pub(crate) fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Body {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// The same reply with one more header.
    pub(crate) fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Body { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// The running server; stops on drop.
pub(crate) struct TestServer {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    dispatcher: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Binds 127.0.0.1 on a free port and answers every request with `handler`.
    pub(crate) fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> TestServer {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1"));
        let addr = server
            .server_addr()
            .to_ip()
            .expect("a TCP address on 127.0.0.1");
        let handler: Arc<Handler> = Arc::new(handler);
        let incoming = server.clone();
        let dispatcher = std::thread::Builder::new()
            .name("test-server".into())
            .spawn(move || {
                let mut running: Vec<JoinHandle<()>> = Vec::new();
                // `recv` fails once `unblock` was called: the server is being dropped.
                while let Ok(request) = incoming.recv() {
                    let handler = handler.clone();
                    running.retain(|h| !h.is_finished());
                    running.push(std::thread::spawn(move || serve(request, &*handler)));
                }
                for h in running {
                    let _ = h.join();
                }
            })
            .expect("spawn the test server");
        TestServer {
            addr,
            server,
            dispatcher: Some(dispatcher),
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
    }
}

fn serve(mut request: tiny_http::Request, handler: &Handler) {
    let mut body = Vec::new();
    if request.as_reader().read_to_end(&mut body).is_err() {
        return;
    }
    let received = Request {
        method: request.method().as_str().to_owned(),
        url: request.url().to_owned(),
        headers: request
            .headers()
            .iter()
            .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_owned()))
            .collect(),
        body,
    };
    match handler(&received) {
        Reply::Body {
            status,
            content_type,
            headers,
            body,
        } => {
            let header = tiny_http::Header::from_bytes("Content-Type", content_type)
                .expect("a valid Content-Type");
            let mut response = tiny_http::Response::from_data(body)
                .with_status_code(status)
                .with_header(header);
            for (name, value) in headers {
                let header = tiny_http::Header::from_bytes(name, value).expect("a valid header");
                response = response.with_header(header);
            }
            let _ = request.respond(response);
        }
        Reply::NotHttp => {
            let mut raw = request.into_writer();
            let _ = raw.write_all(b"not HTTP\r\n\r\n");
            let _ = raw.flush();
        }
    }
}
