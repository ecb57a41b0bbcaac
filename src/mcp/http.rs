//! Streamable HTTP to MCP servers with a `url` (docs/reference.md#mcp-tools): rmcp's transport
//! (sessions, SSE streams, resumption) over the `reqwest` client heartbeat already builds. rmcp's
//! own reqwest client is a second reqwest major (0.13, beside the 0.12 that Telegram's client
//! uses); this is the small part of it heartbeat needs: three requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{RequestBuilder, Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse, SseStream};

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// A whole answer, or one stream of events, larger than this is refused: a JSON-RPC message
/// is small, and a tool's output is cut at 1 MiB anyway.
const MAX_BODY: usize = 16 << 20;

/// How much of an error page goes into the message.
const ERROR_PREVIEW: usize = 200;

type Error = StreamableHttpError<HttpError>;

/// A request that failed before an answer, with its causes (`tcp connect error: Connection
/// refused`), which the SDK's message would otherwise leave out.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct HttpError(String);

fn sent(e: reqwest::Error) -> Error {
    StreamableHttpError::Client(HttpError(causes(&e)))
}

/// The client of one server. Redirects are not followed: the headers carry secrets.
#[derive(Clone)]
pub(super) struct HttpClient {
    client: reqwest::Client,
    /// Why the last request or stream failed: the SDK only says that the connection
    /// closed.
    last_error: Arc<Mutex<Option<String>>>,
    /// A message that could not be read (see [`super::client::nesting_fault`]): the SDK
    /// would skip it, or fail with the parser's words.
    fault: Arc<Mutex<Option<String>>>,
}

impl HttpClient {
    /// For the server at `url` (a loopback one is reached without a proxy).
    pub(super) fn new(
        url: &reqwest::Url,
        connect_timeout: Duration,
    ) -> reqwest::Result<HttpClient> {
        let mut client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none());
        if crate::net::is_loopback(url) {
            client = client.no_proxy();
        }
        let client = client.build()?;
        Ok(HttpClient {
            client,
            last_error: Arc::default(),
            fault: Arc::default(),
        })
    }

    /// The message that could not be read, if one could not.
    pub(super) fn fault(&self) -> Option<String> {
        self.fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `message` as it came, or why it cannot be read (remembered).
    fn readable(&self, message: &[u8]) -> Result<(), String> {
        match super::client::nesting_fault(message) {
            None => Ok(()),
            Some(why) => {
                remember(&self.fault, why.clone());
                Err(why)
            }
        }
    }

    /// Why the last request or event stream failed, if one did.
    pub(super) fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn remember<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        match &result {
            // What a server may not offer is no failure.
            Err(
                StreamableHttpError::ServerDoesNotSupportSse
                | StreamableHttpError::ServerDoesNotSupportDeleteSession,
            )
            | Ok(_) => {}
            Err(e) => remember(&self.last_error, e.to_string()),
        }
        result
    }

    /// The events of `response`; one whose data cannot be read ends the stream with an
    /// error.
    fn events(&self, response: Response) -> BoxStream<'static, Result<Sse, SseError>> {
        let this = self.clone();
        events(response, Arc::clone(&self.last_error))
            .map(move |event| match event {
                Ok(sse) => match sse.data.as_deref().map(|d| this.readable(d.as_bytes())) {
                    Some(Err(why)) => Err(SseError::Body(why.into())),
                    _ => Ok(sse),
                },
                other => other,
            })
            .boxed()
    }
}

fn remember(slot: &Mutex<Option<String>>, error: String) {
    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
}

/// The headers every request carries: the config's (`headers_env`), the bearer token the
/// SDK may hold, the session.
fn with_headers(
    mut request: RequestBuilder,
    session_id: Option<&str>,
    auth_token: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> RequestBuilder {
    request = request.headers(custom.into_iter().collect::<HeaderMap>());
    if let Some(token) = auth_token {
        request = request.bearer_auth(token);
    }
    if let Some(id) = session_id {
        request = request.header(SESSION_ID, id);
    }
    request
}

/// The media type of the answer, without parameters, lower-case.
fn media_type(response: &Response) -> Option<String> {
    let value = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next().unwrap_or_default().trim();
    Some(essence.to_ascii_lowercase())
}

/// The whole body, at most [`MAX_BODY`] bytes.
async fn body(response: Response) -> Result<Vec<u8>, Error> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(sent)?;
        if body.len() + chunk.len() > MAX_BODY {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: MAX_BODY });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A failed request: a JSON-RPC error when the body is one (the SDK reports it as the
/// server's refusal), else the status and the start of the page.
async fn failure(response: Response) -> Result<StreamableHttpPostResponse, Error> {
    let status = response.status();
    let session = session_of(&response);
    let bytes = body(response).await.unwrap_or_default();
    if let Ok(message @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&bytes) {
        return Ok(StreamableHttpPostResponse::Json(message, session));
    }
    // Redacted before it is cut: a page that echoes a credential must not show all of it but
    // the part past the cut.
    let text = String::from_utf8_lossy(&bytes);
    let preview = crate::redact::Secrets::taken()
        .redact(text.trim())
        .cut_chars(ERROR_PREVIEW);
    Err(StreamableHttpError::UnexpectedServerResponse(
        format!("HTTP {status}: {preview}").into(),
    ))
}

/// An answer that is not MCP (a web page, a proxy's error, broken JSON): why.
fn not_mcp(why: String) -> Error {
    StreamableHttpError::UnexpectedServerResponse(format!("the answer is not MCP: {why}").into())
}

fn content_type(media_type: Option<&str>) -> String {
    match media_type {
        Some(t) => format!("its Content-Type is {t}, not {JSON} or {EVENT_STREAM}"),
        None => "it has no Content-Type".into(),
    }
}

fn session_of(response: &Response) -> Option<String> {
    response
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The answer as server-sent events, ending with an error once it passed [`MAX_BODY`]
/// bytes (a server that never stops sending costs no more memory than that).
fn events(
    response: Response,
    last_error: Arc<Mutex<Option<String>>>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let bytes = response
        .bytes_stream()
        .scan((0usize, false), move |(seen, failed), chunk| {
            if *failed {
                return futures::future::ready(None);
            }
            let item = match chunk {
                Err(e) => Err(std::io::Error::other(causes(&e))),
                Ok(chunk) if *seen + chunk.len() > MAX_BODY => Err(std::io::Error::other(format!(
                    "the event stream passed {} MiB",
                    MAX_BODY >> 20
                ))),
                Ok(chunk) => {
                    *seen += chunk.len();
                    Ok(chunk)
                }
            };
            if let Err(e) = &item {
                remember(&last_error, e.to_string());
                *failed = true;
            }
            futures::future::ready(Some(item))
        });
    SseStream::from_bytes_stream(bytes).boxed()
}

impl HttpClient {
    async fn send_post(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let request = self
            .client
            .post(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .json(&message);
        let response = with_headers(request, session_id.as_deref(), auth_token, custom_headers)
            .send()
            .await
            .map_err(sent)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return failure(response).await;
        }
        let session = session_of(&response);
        // Some servers answer a notification with an empty 200 instead of 202.
        let answers_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if answers_nothing && response.content_length() == Some(0) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        match media_type(&response).as_deref() {
            Some(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                self.events(response),
                session,
            )),
            Some(JSON) => {
                let body = body(response).await?;
                self.readable(&body).map_err(not_mcp)?;
                match serde_json::from_slice(&body) {
                    Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
                    Err(e) => Err(not_mcp(format!("its JSON is no JSON-RPC message ({e})"))),
                }
            }
            other => Err(not_mcp(content_type(other))),
        }
    }

    async fn send_delete(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let request = self.client.delete(uri.as_ref());
        let response = with_headers(request, Some(&session_id), auth_token, custom_headers)
            .send()
            .await
            .map_err(sent)?;
        match response.status() {
            StatusCode::METHOD_NOT_ALLOWED => {
                Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
            }
            // Already gone is as good as deleted.
            s if s.is_success() || s == StatusCode::NOT_FOUND => Ok(()),
            _ => failure(response).await.map(drop),
        }
    }

    async fn open_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut request = self.client.get(uri.as_ref()).header(ACCEPT, EVENT_STREAM);
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        let response = with_headers(request, session_id.as_deref(), auth_token, custom_headers)
            .send()
            .await
            .map_err(sent)?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(failure(response).await.err().unwrap_or_else(|| {
                StreamableHttpError::UnexpectedServerResponse(format!("HTTP {status}").into())
            }));
        }
        match media_type(&response).as_deref() {
            Some(EVENT_STREAM) => Ok(self.events(response)),
            other => Err(not_mcp(content_type(other))),
        }
    }
}

/// Every failure is remembered for the message when the connection ends.
impl StreamableHttpClient for HttpClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let sent = self.send_post(uri, message, session_id, auth_token, custom_headers);
        self.remember(sent.await)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let sent = self.send_delete(uri, session_id, auth_token, custom_headers);
        self.remember(sent.await)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let sent = self.open_stream(uri, session_id, last_event_id, auth_token, custom_headers);
        self.remember(sent.await)
    }
}

/// An error and its sources, each said once: `error sending request …: tcp connect error:
/// Connection refused`.
pub(super) fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}
