//! A test double of the Telegram Bot API (docs/reference.md#telegram) on the shared [`TestServer`]:
//! it answers `POST /bot<TOKEN>/<method>` with a JSON body like `api.telegram.org`, records every
//! call and can be scripted to fail. Point the binary at it with `telegram.api_url = double.url()`;
//! tests must never reach the real Telegram.
//!
//! It knows the four methods heartbeat calls (`sendMessage`, `editMessageText`,
//! `answerCallbackQuery`, `getUpdates`); any other answers 404 `Not Found: method not found`.
//! Beyond echoing:
//! - HTML parse mode is checked like Telegram does it ([`parse_html`], the rules of tdlib's
//!   `parse_html`): an unsupported or unclosed tag, a stray `<` or a mismatched end tag answers
//!   400 `Bad Request: can't parse entities: …`; the stored text has the tags stripped and the
//!   entities decoded. Texts over 4096 characters answer `Bad Request: message is too long`,
//!   callback data over 64 bytes `Bad Request: BUTTON_DATA_INVALID`.
//! - Messages it sent (or that a pushed update carries) are kept, and `editMessageText`
//!   changes them; an edit without `reply_markup` drops the keyboard, and one that changes
//!   nothing answers `Bad Request: message is not modified: …`, as on Telegram.
//! - `getUpdates` keeps updates until an `offset` above their id confirms them, honours
//!   `limit`, and long-polls up to `min(timeout, 5)` seconds (a push answers it at once).
//!
//! What teloxide 0.17 sends: method names capitalised (`/SendMessage`; [`Call::method`] is
//! normalised to `sendMessage`), an `application/json` body with only the fields that were
//! set, `chat_id` as a bare integer, `parse_mode: "HTML"`, and `reply_markup` as
//! `{"inline_keyboard": [[{"text": …, "callback_data": …}]]}`. How it reads the answers:
//! - 400 `Bad Request: can't parse entities: …` → `ApiError::CantParseEntities`; 401 →
//!   `ApiError::InvalidToken`; a description it does not know → `ApiError::Unknown`.
//! - A non-JSON body → `RequestError::InvalidJson`; a connection error or an answer that is not
//!   HTTP ([`TgDouble::drop_next`]) → `RequestError::Network`.
//! - **Any 5xx status makes teloxide sleep 10 s before it reads the body**
//!   (`DELAY_ON_SERVER_ERROR` in teloxide-core's `net/request.rs`): a scripted 502 costs that
//!   much per request; use [`TgDouble::drop_next`] for a fast "Telegram is down".
//!
//! Invariants: every request is recorded before any scripted failure or check applies; scripted
//! failures for a method are used up in order, one per call; dropping the double ends its long
//! polls and joins every handler thread.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::test_server::{Reply, Request, TestServer};

/// The bot's `first_name` in `from` of the messages it sends.
pub(crate) const BOT_FIRST_NAME: &str = "Heartbeat Test";
/// The bot's username.
pub(crate) const BOT_USERNAME: &str = "heartbeat_test_bot";
/// The bot's id when the token does not start with `<digits>:` (real tokens do, and then the
/// bot id is those digits, as on Telegram).
pub(crate) const DEFAULT_BOT_ID: i64 = 7_000_000_001;
/// Long polls never wait longer than this, whatever `timeout` asks.
pub(crate) const MAX_LONG_POLL: Duration = Duration::from_secs(5);
/// Telegram's limit on a message text, in characters after entity parsing.
pub(crate) const MAX_TEXT_CHARS: usize = 4096;

const FIRST_UPDATE_ID: i64 = 500_000_001;
const FIRST_MESSAGE_ID: i64 = 1001;

/// One request as the double received it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Call {
    /// The Bot API method as the Bot API docs spell it (`sendMessage`): teloxide writes it
    /// capitalised (`/SendMessage`) and the Bot API ignores case; the first letter is
    /// lower-cased here, the rest kept as sent.
    pub method: String,
    /// The token from the URL.
    pub token: String,
    /// The JSON body (`{}` when empty; the raw text as a JSON string when it is not JSON).
    pub body: Value,
    /// The request's `Content-Type` without parameters (`application/json`), empty if none.
    pub content_type: String,
}

/// A scripted answer instead of the method's own.
enum Failure {
    Json(u16, Value),
    Raw(u16, String, String),
    NotHttp,
    /// Answered as usual (to script a failure after some calls succeed).
    Pass,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    failures: HashMap<String, VecDeque<Failure>>,
    chat_failures: HashMap<i64, (u16, String)>,
    updates: VecDeque<Value>,
    next_update_id: i64,
    next_message_id: i64,
    next_callback_id: u64,
    expected_token: Option<String>,
    last_token: Option<String>,
    /// Messages the double knows, by (chat id, message id): what `editMessageText` edits.
    messages: HashMap<(i64, i64), Value>,
    shutdown: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when an update is pushed or the double shuts down (wakes long polls).
    updates_cv: Condvar,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fake Bot API server. Stops on drop.
pub(crate) struct TgDouble {
    shared: Arc<Shared>,
    server: TestServer,
}

impl TgDouble {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub(crate) fn start() -> TgDouble {
        let shared = Arc::new(Shared::default());
        {
            let mut state = shared.state();
            state.next_update_id = FIRST_UPDATE_ID;
            state.next_message_id = FIRST_MESSAGE_ID;
            state.next_callback_id = 1;
        }
        let handler_shared = shared.clone();
        let server = TestServer::start(move |request| handle(&handler_shared, request));
        TgDouble { shared, server }
    }

    /// The base URL for `telegram.api_url`: `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        self.server.url()
    }

    /// From now on, any other token answers 401 `Unauthorized` (still recorded).
    pub(crate) fn expect_token(&self, token: &str) {
        self.shared.state().expected_token = Some(token.to_owned());
    }

    /// Every request so far, in arrival order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.shared.state().calls.clone()
    }

    /// The requests to `method` (case-insensitive, like the Bot API), in arrival order.
    pub(crate) fn calls_to(&self, method: &str) -> Vec<Call> {
        let state = self.shared.state();
        state
            .calls
            .iter()
            .filter(|c| c.method.eq_ignore_ascii_case(method))
            .cloned()
            .collect()
    }

    /// Waits until at least `n` calls to `method` were received and returns all of them.
    /// Panics, listing what was received, if that takes longer than `timeout`.
    #[track_caller]
    pub(crate) fn wait_for_calls(&self, method: &str, n: usize, timeout: Duration) -> Vec<Call> {
        let deadline = Instant::now() + timeout;
        loop {
            let calls = self.calls_to(method);
            if calls.len() >= n {
                return calls;
            }
            if Instant::now() >= deadline {
                let seen: Vec<String> = self
                    .calls()
                    .iter()
                    .map(|c| format!("{} {}", c.method, c.body))
                    .collect();
                panic!(
                    "Telegram double: expected {n} call(s) to {method} within {timeout:?}, got {}; \
                     all calls received:\n{}",
                    calls.len(),
                    seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The next `times` calls to `method` answer `status` with
    /// `{"ok":false,"error_code":status,"description":description}`.
    /// Scripted failures for one method queue up behind each other.
    pub(crate) fn fail_next(&self, method: &str, times: usize, status: u16, description: &str) {
        let body = json!({"ok": false, "error_code": status, "description": description});
        self.script(method, times, || Failure::Json(status, body.clone()));
    }

    /// The next `times` calls to `method` answer `status` with a non-JSON body, like the page
    /// a proxy in front of a down Telegram serves.
    pub(crate) fn fail_next_raw(
        &self,
        method: &str,
        times: usize,
        status: u16,
        content_type: &str,
        body: &str,
    ) {
        self.script(method, times, || {
            Failure::Raw(status, content_type.to_owned(), body.to_owned())
        });
    }

    /// The next `times` calls to `method` are answered as usual (a scripted failure queued
    /// after them then hits a later call).
    pub(crate) fn pass_next(&self, method: &str, times: usize) {
        self.script(method, times, || Failure::Pass);
    }

    /// The next `times` calls to `method` are recorded and answered with bytes that are not
    /// HTTP: a network error for the client at once, without teloxide's 10 s 5xx sleep.
    pub(crate) fn drop_next(&self, method: &str, times: usize) {
        self.script(method, times, || Failure::NotHttp);
    }

    fn script(&self, method: &str, times: usize, make: impl Fn() -> Failure) {
        let mut state = self.shared.state();
        let queue = state
            .failures
            .entry(method.to_ascii_lowercase())
            .or_default();
        queue.extend((0..times).map(|_| make()));
    }

    /// Until the double is dropped, `sendMessage` and `editMessageText` to `chat_id` answer
    /// this error (e.g. 403 `Forbidden: bot was blocked by the user`), after any scripted
    /// per-method failure.
    pub(crate) fn fail_chat(&self, chat_id: i64, status: u16, description: &str) {
        self.shared
            .state()
            .chat_failures
            .insert(chat_id, (status, description.to_owned()));
    }

    /// Queues an update for `getUpdates` and returns its `update_id`: the given one if the value
    /// has it (later automatic ids continue above it), else the next one. A message the update
    /// carries becomes known, so it can be edited.
    pub(crate) fn push_update(&self, mut update: Value) -> i64 {
        let mut state = self.shared.state();
        let id = match update.get("update_id").and_then(Value::as_i64) {
            Some(id) => id,
            None => state.next_update_id,
        };
        state.next_update_id = state.next_update_id.max(id + 1);
        update["update_id"] = json!(id);
        let carried = update
            .get("callback_query")
            .and_then(|q| q.get("message"))
            .or_else(|| update.get("message"));
        if let Some(message) = carried
            && let (Some(chat), Some(mid)) = (
                message.pointer("/chat/id").and_then(Value::as_i64),
                message.get("message_id").and_then(Value::as_i64),
            )
        {
            state
                .messages
                .entry((chat, mid))
                .or_insert_with(|| message.clone());
        }
        state.updates.push_back(update);
        drop(state);
        self.shared.updates_cv.notify_all();
        id
    }

    /// Updates still queued (not yet confirmed by an `offset`).
    pub(crate) fn pending_updates(&self) -> Vec<Value> {
        self.shared.state().updates.iter().cloned().collect()
    }

    /// A message the double knows (sent through it or carried by a pushed update), as it is
    /// after the edits it received.
    pub(crate) fn message(&self, chat_id: i64, message_id: i64) -> Option<Value> {
        self.shared
            .state()
            .messages
            .get(&(chat_id, message_id))
            .cloned()
    }

    /// An update with a button press: `from_id` pressed a button carrying `data` under message
    /// `message_id` in chat `chat_id`. The message is the one the double sent if it knows it
    /// (text and keyboard included), else a plain bot message. Push it with
    /// [`push_update`](Self::push_update).
    pub(crate) fn callback_update(
        &self,
        chat_id: i64,
        from_id: i64,
        message_id: i64,
        data: &str,
    ) -> Value {
        let mut state = self.shared.state();
        let query_id = format!("{}{:06}", DEFAULT_BOT_ID, state.next_callback_id);
        state.next_callback_id += 1;
        let token = state
            .expected_token
            .clone()
            .or_else(|| state.last_token.clone());
        let message = state
            .messages
            .get(&(chat_id, message_id))
            .cloned()
            .unwrap_or_else(|| {
                json!({
                    "message_id": message_id,
                    "from": bot_user(token.as_deref()),
                    "chat": chat_json(chat_id),
                    "date": now(),
                    "text": "approval request",
                })
            });
        json!({
            "callback_query": {
                "id": query_id,
                "from": user_json(from_id),
                "message": message,
                "chat_instance": format!("{}", -(chat_id.unsigned_abs() as i64) - 4_000_000_000),
                "data": data,
            }
        })
    }

    /// An update with a text message from `from_id` in chat `chat_id` (private when positive, a
    /// group when negative). A text starting with `/` carries a `bot_command` entity at offset 0.
    pub(crate) fn text_update(&self, chat_id: i64, from_id: i64, text: &str) -> Value {
        let mut state = self.shared.state();
        let message_id = state.next_message_id;
        state.next_message_id += 1;
        let mut message = json!({
            "message_id": message_id,
            "from": user_json(from_id),
            "chat": chat_json(chat_id),
            "date": now(),
            "text": text,
        });
        if text.starts_with('/') {
            let command = text.split_whitespace().next().unwrap_or(text);
            message["entities"] = json!([{
                "type": "bot_command",
                "offset": 0,
                "length": command.encode_utf16().count(),
            }]);
        }
        json!({ "message": message })
    }

    /// A text message written in a group chat (`chat_id` negative: `-100…` is a supergroup,
    /// other negative ids a basic group) titled `title`: what `telegram-chats` lists.
    pub(crate) fn group_text_update(
        &self,
        chat_id: i64,
        title: &str,
        from_id: i64,
        text: &str,
    ) -> Value {
        assert!(chat_id < 0, "group chat ids are negative, got {chat_id}");
        let mut update = self.text_update(chat_id, from_id, text);
        update["message"]["chat"]["title"] = json!(title);
        update
    }
}

impl Drop for TgDouble {
    fn drop(&mut self) {
        // Long polls end now; the server (dropped right after this) then joins its handlers.
        self.shared.state().shutdown = true;
        self.shared.updates_cv.notify_all();
    }
}

fn api_error(status: u16, description: &str) -> Reply {
    Reply::json(
        status,
        &json!({"ok": false, "error_code": status, "description": description}),
    )
}

fn ok(result: Value) -> Reply {
    Reply::json(200, &json!({"ok": true, "result": result}))
}

fn handle(shared: &Shared, request: &Request) -> Reply {
    let Some((token, method)) = request
        .path()
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
    else {
        return api_error(404, "Not Found");
    };
    let content_type = request
        .header("content-type")
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let parsed: Result<Value, String> = if request.body.iter().all(u8::is_ascii_whitespace) {
        Ok(json!({}))
    } else {
        serde_json::from_slice(&request.body).map_err(|e| format!("can't parse JSON: {e}"))
    };
    let body = match &parsed {
        Ok(body) => body.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&request.body).into_owned()),
    };

    let mut state = shared.state();
    let mut chars = method.chars();
    let canonical: String = chars
        .next()
        .map(|c| c.to_ascii_lowercase())
        .into_iter()
        .chain(chars)
        .collect();
    state.calls.push(Call {
        method: canonical,
        token: token.to_owned(),
        body: body.clone(),
        content_type,
    });
    if let Some(expected) = &state.expected_token
        && expected != token
    {
        return api_error(401, "Unauthorized");
    }
    state.last_token = Some(token.to_owned());
    let key = method.to_ascii_lowercase();
    if let Some(failure) = state.failures.get_mut(&key).and_then(VecDeque::pop_front) {
        match failure {
            Failure::Json(status, body) => return Reply::json(status, &body),
            Failure::Raw(status, content_type, body) => {
                return Reply::raw(status, &content_type, body);
            }
            Failure::NotHttp => return Reply::NotHttp,
            Failure::Pass => {}
        }
    }
    if let Err(e) = parsed {
        return api_error(400, &format!("Bad Request: {e}"));
    }
    match key.as_str() {
        "sendmessage" => send_message(&mut state, &body, bot_user(Some(token))),
        "editmessagetext" => edit_message(&mut state, &body),
        "getupdates" => get_updates(shared, state, &body),
        "answercallbackquery" => {
            if body.get("callback_query_id").is_none_or(Value::is_null) {
                return api_error(
                    400,
                    "Bad Request: query is too old and response timeout expired or query ID is invalid",
                );
            }
            ok(json!(true))
        }
        _ => api_error(404, "Not Found: method not found"),
    }
}

fn send_message(state: &mut State, body: &Value, bot: Value) -> Reply {
    let Some(chat_id) = int_field(body, "chat_id") else {
        return api_error(400, "Bad Request: chat not found");
    };
    if let Some((status, description)) = state.chat_failures.get(&chat_id) {
        return api_error(*status, &description.clone());
    }
    let text = match render_text(body) {
        Ok(text) => text,
        Err(reply) => return reply,
    };
    if let Err(reply) = check_markup(body) {
        return reply;
    }
    let message_id = state.next_message_id;
    state.next_message_id += 1;
    let mut message = json!({
        "message_id": message_id,
        "from": bot,
        "chat": chat_json(chat_id),
        "date": now(),
        "text": text,
    });
    if let Some(markup) = body.get("reply_markup").filter(|m| !m.is_null()) {
        message["reply_markup"] = markup.clone();
    }
    state
        .messages
        .insert((chat_id, message_id), message.clone());
    ok(message)
}

fn edit_message(state: &mut State, body: &Value) -> Reply {
    let (Some(chat_id), Some(message_id)) =
        (int_field(body, "chat_id"), int_field(body, "message_id"))
    else {
        return api_error(400, "Bad Request: message identifier is not specified");
    };
    if let Some((status, description)) = state.chat_failures.get(&chat_id) {
        return api_error(*status, &description.clone());
    }
    let text = match render_text(body) {
        Ok(text) => text,
        Err(reply) => return reply,
    };
    if let Err(reply) = check_markup(body) {
        return reply;
    }
    let known = state.messages.get(&(chat_id, message_id)).cloned();
    let mut message = known.clone().unwrap_or_else(|| {
        json!({
            "message_id": message_id,
            "from": bot_user(state.last_token.as_deref()),
            "chat": chat_json(chat_id),
            "date": now(),
        })
    });
    message["text"] = json!(text);
    let fields = message.as_object_mut().expect("messages are objects");
    match body.get("reply_markup").filter(|m| !m.is_null()) {
        Some(markup) => fields.insert("reply_markup".into(), markup.clone()),
        None => fields.remove("reply_markup"),
    };
    if let Some(before) = &known
        && before.get("text") == message.get("text")
        && before.get("reply_markup") == message.get("reply_markup")
    {
        return api_error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    }
    message["edit_date"] = json!(now());
    state
        .messages
        .insert((chat_id, message_id), message.clone());
    ok(message)
}

/// The text of a sendMessage/editMessageText as Telegram would store it, or the error reply.
fn render_text(body: &Value) -> Result<String, Reply> {
    let Some(text) = body.get("text").and_then(Value::as_str) else {
        return Err(api_error(400, "Bad Request: message text is empty"));
    };
    let html = body
        .get("parse_mode")
        .and_then(Value::as_str)
        .is_some_and(|m| m.eq_ignore_ascii_case("html"));
    let text = if html {
        parse_html(text)
            .map_err(|e| api_error(400, &format!("Bad Request: can't parse entities: {e}")))?
    } else {
        text.to_owned()
    };
    if text.trim().is_empty() {
        return Err(api_error(400, "Bad Request: message text is empty"));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(api_error(400, "Bad Request: message is too long"));
    }
    Ok(text)
}

/// Telegram's limit on callback data: 1 to 64 bytes.
fn check_markup(body: &Value) -> Result<(), Reply> {
    let buttons = body
        .pointer("/reply_markup/inline_keyboard")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten();
    for button in buttons {
        if let Some(data) = button.get("callback_data").and_then(Value::as_str)
            && (data.is_empty() || data.len() > 64)
        {
            return Err(api_error(400, "Bad Request: BUTTON_DATA_INVALID"));
        }
    }
    Ok(())
}

fn get_updates(shared: &Shared, mut state: MutexGuard<'_, State>, body: &Value) -> Reply {
    let offset = int_field(body, "offset").unwrap_or(0);
    let limit = int_field(body, "limit").unwrap_or(100).clamp(1, 100) as usize;
    let timeout = int_field(body, "timeout").unwrap_or(0).max(0) as u64;
    // An offset confirms every update below it, for good.
    state
        .updates
        .retain(|u| u.get("update_id").and_then(Value::as_i64).unwrap_or(0) >= offset);
    let deadline = Instant::now() + Duration::from_secs(timeout).min(MAX_LONG_POLL);
    while state.updates.is_empty() && !state.shutdown {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        state = shared
            .updates_cv
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let result: Vec<Value> = state.updates.iter().take(limit).cloned().collect();
    ok(Value::Array(result))
}

fn int_field(body: &Value, name: &str) -> Option<i64> {
    body.get(name)?.as_i64()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(1)
}

fn bot_user(token: Option<&str>) -> Value {
    let id = token
        .and_then(|t| t.split_once(':'))
        .and_then(|(id, _)| id.parse().ok())
        .unwrap_or(DEFAULT_BOT_ID);
    json!({
        "id": id,
        "is_bot": true,
        "first_name": BOT_FIRST_NAME,
        "username": BOT_USERNAME,
    })
}

/// A human user `id`.
pub(crate) fn user_json(id: i64) -> Value {
    json!({
        "id": id,
        "is_bot": false,
        "first_name": "Tester",
        "last_name": format!("{id}"),
        "username": format!("tester{id}"),
        "language_code": "en",
    })
}

/// A chat: private for a positive id (a private chat's id is the user's id), a supergroup for
/// `-100…` ids, a basic group for other negative ids.
pub(crate) fn chat_json(id: i64) -> Value {
    if id > 0 {
        json!({
            "id": id,
            "type": "private",
            "first_name": "Tester",
            "last_name": format!("{id}"),
            "username": format!("tester{id}"),
        })
    } else if id <= -1_000_000_000_000 {
        json!({"id": id, "type": "supergroup", "title": format!("Group {id}")})
    } else {
        json!({"id": id, "type": "group", "title": format!("Group {id}")})
    }
}

/// The tags Telegram's HTML parse mode accepts.
const HTML_TAGS: &[&str] = &[
    "a",
    "b",
    "strong",
    "i",
    "em",
    "s",
    "strike",
    "del",
    "u",
    "ins",
    "span",
    "tg-spoiler",
    "tg-emoji",
    "pre",
    "code",
    "blockquote",
];

/// Telegram's HTML parse mode: the text without tags and with entities decoded, or the reason
/// Telegram gives after `can't parse entities: ` (messages and byte offsets as in tdlib).
pub(crate) fn parse_html(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut out = String::with_capacity(s.len());
    let mut open: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'&' => match decode_entity(&s[i..]) {
                Some((ch, len)) => {
                    out.push(ch);
                    i += len;
                }
                None => {
                    out.push('&');
                    i += 1;
                }
            },
            b'<' if b.get(i + 1) == Some(&b'/') => {
                let begin = i;
                let Some(expected) = open.pop() else {
                    return Err(format!("Unexpected end tag at byte offset {begin}"));
                };
                i += 2;
                let name_start = i;
                while i < b.len() && !is_space(b[i]) && b[i] != b'>' {
                    i += 1;
                }
                let name = &s[name_start..i];
                while i < b.len() && is_space(b[i]) {
                    i += 1;
                }
                if i >= b.len() || b[i] != b'>' {
                    return Err(format!("Unclosed end tag at byte offset {begin}"));
                }
                if !name.is_empty() && !name.eq_ignore_ascii_case(&expected) {
                    return Err(format!(
                        "Unmatched end tag at byte offset {begin}, expected \"</{expected}>\", found \"</{name}>\""
                    ));
                }
                i += 1;
            }
            b'<' => {
                let begin = i;
                i += 1;
                let name_start = i;
                while i < b.len() && !is_space(b[i]) && b[i] != b'>' {
                    i += 1;
                }
                if i >= b.len() {
                    return Err(format!("Unclosed start tag at byte offset {begin}"));
                }
                let name = s[name_start..i].to_lowercase();
                if !HTML_TAGS.contains(&name.as_str()) {
                    return Err(format!(
                        "Unsupported start tag \"{name}\" at byte offset {begin}"
                    ));
                }
                // Attributes: anything up to the `>` that is not inside quotes.
                let mut quote = None;
                while i < b.len() {
                    match (quote, b[i]) {
                        (None, b'>') => break,
                        (None, q @ (b'"' | b'\'')) => quote = Some(q),
                        (Some(q), c) if c == q => quote = None,
                        _ => {}
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err(format!(
                        "Unclosed start tag \"{name}\" at byte offset {begin}"
                    ));
                }
                i += 1;
                open.push(name);
            }
            _ => {
                let ch = s[i..].chars().next().expect("in bounds");
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    if let Some(tag) = open.last() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{tag}\""
        ));
    }
    Ok(out)
}

/// `&lt;` `&gt;` `&amp;` `&quot;` (the `;` optional) and numeric entities; any other `&…` stays
/// as written, as on Telegram.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'#') {
        let (digits_at, radix) = if matches!(b.get(2), Some(b'x' | b'X')) {
            (3, 16)
        } else {
            (2, 10)
        };
        let is_digit = |c: &&u8| {
            if radix == 16 {
                c.is_ascii_hexdigit()
            } else {
                c.is_ascii_digit()
            }
        };
        let end = digits_at + b[digits_at..].iter().take_while(is_digit).count();
        let code = u32::from_str_radix(&s[digits_at..end], radix).ok()?;
        let ch = char::from_u32(code)?;
        let len = if b.get(end) == Some(&b';') {
            end + 1
        } else {
            end
        };
        return Some((ch, len));
    }
    let end = 1 + b[1..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let ch = match &s[1..end] {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => return None,
    };
    let len = if b.get(end) == Some(&b';') {
        end + 1
    } else {
        end
    };
    Some((ch, len))
}

/// The double itself, spoken to as the Bot API (JSON over HTTP, as any client sees it).
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::{MAX_LONG_POLL, MAX_TEXT_CHARS, TgDouble};

    const TOKEN: &str = "123456:TEST-token";

    /// POSTs `body` as JSON to `method`; the status and the JSON answer.
    fn call(double: &TgDouble, method: &str, body: Value) -> (u16, Value) {
        let response = reqwest::blocking::Client::new()
            .post(format!("{}/bot{TOKEN}/{method}", double.url()))
            .json(&body)
            .send()
            .expect("the double answers");
        let status = response.status().as_u16();
        (status, response.json().expect("a JSON answer"))
    }

    fn description(answer: &Value) -> &str {
        answer["description"].as_str().unwrap_or_default()
    }

    fn keyboard() -> Value {
        json!({"inline_keyboard": [[
            {"text": "Approve", "callback_data": "hb:y:1"},
            {"text": "Deny", "callback_data": "hb:n:1"},
        ]]})
    }

    #[test]
    fn tg_double_sends_records_and_remembers_messages() {
        let double = TgDouble::start();
        double.expect_token(TOKEN);
        let (status, sent) = call(
            &double,
            "SendMessage",
            json!({
                "chat_id": 42,
                "text": "<b>1 failed</b>: check &lt;disk&gt; &amp; more",
                "parse_mode": "HTML",
                "reply_markup": keyboard(),
            }),
        );
        assert_eq!(status, 200, "{sent}");
        let message = &sent["result"];
        assert_eq!(message["text"], "1 failed: check <disk> & more");
        assert_eq!(message["chat"]["type"], "private");
        assert_eq!(message["from"]["id"], 123456, "the bot id is the token's");
        assert_eq!(message["reply_markup"], keyboard());
        let id = message["message_id"].as_i64().unwrap();
        assert_eq!(double.message(42, id).unwrap(), *message);

        let calls = double.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            calls[0].method, "sendMessage",
            "normalised from SendMessage"
        );
        assert_eq!(calls[0].token, TOKEN);
        assert_eq!(calls[0].content_type, "application/json");
        assert_eq!(calls[0].body["chat_id"], 42);

        let (_, second) = call(
            &double,
            "sendMessage",
            json!({"chat_id": -1001234567890_i64, "text": "x"}),
        );
        assert_eq!(second["result"]["message_id"], id + 1, "ids increase");
        assert_eq!(second["result"]["chat"]["type"], "supergroup");

        // Edits change the stored message; without reply_markup the keyboard goes.
        let edit = json!({"chat_id": 42, "message_id": id, "text": "❌ <b>denied</b>", "parse_mode": "HTML"});
        let (status, edited) = call(&double, "editMessageText", edit.clone());
        assert_eq!(status, 200, "{edited}");
        assert_eq!(edited["result"]["text"], "❌ denied");
        assert!(edited["result"].get("reply_markup").is_none());
        assert!(edited["result"]["edit_date"].is_i64());
        assert_eq!(double.message(42, id).unwrap()["text"], "❌ denied");
        let (status, same) = call(&double, "editMessageText", edit);
        assert_eq!(status, 400);
        assert!(
            description(&same).starts_with("Bad Request: message is not modified"),
            "{same}"
        );
        // A message the double never saw can still be edited.
        let (status, _) = call(
            &double,
            "editMessageText",
            json!({"chat_id": 42, "message_id": 77, "text": "ok"}),
        );
        assert_eq!(status, 200);

        let (status, answered) = call(
            &double,
            "answerCallbackQuery",
            json!({"callback_query_id": "1", "text": "Denied"}),
        );
        assert_eq!((status, &answered["result"]), (200, &json!(true)));
    }

    #[test]
    fn tg_double_refuses_like_telegram() {
        let double = TgDouble::start();
        double.expect_token(TOKEN);
        let send = |body: Value| call(&double, "sendMessage", body);

        let (status, answer) =
            send(json!({"chat_id": 42, "text": "ran <foo> & bar", "parse_mode": "HTML"}));
        assert_eq!(status, 400);
        assert_eq!(
            description(&answer),
            "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 4"
        );
        let (status, _) = send(json!({"chat_id": 42, "text": "ran <foo> & bar"}));
        assert_eq!(status, 200, "plain text is not parsed");

        let (_, answer) = send(json!({"chat_id": 42, "text": "x".repeat(MAX_TEXT_CHARS + 1)}));
        assert_eq!(description(&answer), "Bad Request: message is too long");
        let (status, _) = send(json!({"chat_id": 42, "text": "é".repeat(MAX_TEXT_CHARS)}));
        assert_eq!(status, 200, "4096 characters fit");
        let (_, answer) = send(json!({"chat_id": 42, "text": " "}));
        assert_eq!(description(&answer), "Bad Request: message text is empty");
        let long_data =
            json!({"inline_keyboard": [[{"text": "A", "callback_data": "x".repeat(65)}]]});
        let (_, answer) = send(json!({"chat_id": 42, "text": "a", "reply_markup": long_data}));
        assert_eq!(description(&answer), "Bad Request: BUTTON_DATA_INVALID");

        double.fail_chat(43, 403, "Forbidden: bot was blocked by the user");
        let (status, _) = send(json!({"chat_id": 43, "text": "a"}));
        assert_eq!(status, 403);
        let (status, _) = send(json!({"chat_id": 42, "text": "a"}));
        assert_eq!(status, 200, "other chats still work");

        // Scripted failures are used up in order, one per call.
        double.fail_next(
            "sendMessage",
            1,
            400,
            "Bad Request: can't parse entities: scripted",
        );
        double.fail_next_raw(
            "sendMessage",
            1,
            502,
            "text/html",
            "<h1>502 Bad Gateway</h1>",
        );
        let (status, answer) = send(json!({"chat_id": 42, "text": "a"}));
        assert_eq!(
            (status, description(&answer)),
            (400, "Bad Request: can't parse entities: scripted")
        );
        let raw = reqwest::blocking::Client::new()
            .post(format!("{}/bot{TOKEN}/sendMessage", double.url()))
            .json(&json!({"chat_id": 42, "text": "a"}))
            .send()
            .unwrap();
        assert_eq!(raw.status().as_u16(), 502);
        assert_eq!(raw.headers()["content-type"], "text/html");
        assert_eq!(raw.text().unwrap(), "<h1>502 Bad Gateway</h1>");
        let (status, _) = send(json!({"chat_id": 42, "text": "a"}));
        assert_eq!(status, 200);

        let wrong = reqwest::blocking::Client::new()
            .post(format!("{}/bot999:wrong/sendMessage", double.url()))
            .json(&json!({"chat_id": 42, "text": "hi"}))
            .send()
            .unwrap();
        assert_eq!(wrong.status().as_u16(), 401);
        assert_eq!(
            double.calls().last().unwrap().token,
            "999:wrong",
            "recorded all the same"
        );

        let (status, answer) = call(&double, "sendTelepathy", json!({"chat_id": 1}));
        assert_eq!(status, 404);
        assert_eq!(
            answer,
            json!({"ok": false, "error_code": 404, "description": "Not Found: method not found"})
        );
        let not_json = reqwest::blocking::Client::new()
            .post(format!("{}/bot{TOKEN}/sendMessage", double.url()))
            .header("content-type", "application/json")
            .body("{x")
            .send()
            .unwrap();
        assert_eq!(not_json.status().as_u16(), 400);
        let answer: Value = not_json.json().unwrap();
        assert!(
            description(&answer).starts_with("Bad Request: can't parse JSON"),
            "{answer}"
        );
    }

    #[test]
    fn tg_double_drop_next_fails_at_once_at_the_connection_level() {
        let double = TgDouble::start();
        double.drop_next("sendMessage", 1);
        let dropped = reqwest::blocking::Client::new()
            .post(format!("{}/bot{TOKEN}/sendMessage", double.url()))
            .json(&json!({"chat_id": 42, "text": "hi"}))
            .timeout(Duration::from_secs(60))
            .send();
        let err = dropped.expect_err("no HTTP answer");
        assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");
        let (status, _) = call(&double, "sendMessage", json!({"chat_id": 42, "text": "hi"}));
        assert_eq!(status, 200, "only the next call is dropped");
        assert_eq!(double.calls_to("sendMessage").len(), 2, "both recorded");
        assert!(double.message(42, super::FIRST_MESSAGE_ID + 1).is_none());
    }

    #[test]
    fn tg_double_updates_stay_until_an_offset_confirms_them() {
        let double = TgDouble::start();
        let (_, sent) = call(
            &double,
            "sendMessage",
            json!({"chat_id": 42, "text": "approve?", "reply_markup": keyboard()}),
        );
        let mid = sent["result"]["message_id"].as_i64().unwrap();
        let press = double.push_update(double.callback_update(42, 42, mid, "hb:y:1"));
        let status = double.push_update(double.text_update(42, 42, "/status"));
        let group =
            double.push_update(double.group_text_update(-4012345, "Ops", 77, "/pause@bot 2h"));
        assert!(press < status && status < group);
        assert_eq!(
            double.push_update(json!({"update_id": 900, "message": {}})),
            900
        );
        let after = double.push_update(double.text_update(5, 5, "a"));
        assert!(after > group, "automatic ids continue above the highest");

        let (_, all) = call(&double, "getUpdates", json!({}));
        let updates = all["result"].as_array().unwrap();
        assert_eq!(updates.len(), 5);
        let pressed = &updates[0]["callback_query"];
        assert_eq!(pressed["data"], "hb:y:1");
        assert_eq!(pressed["from"]["id"], 42);
        assert_eq!(
            pressed["message"]["text"], "approve?",
            "the message the double sent"
        );
        assert_eq!(pressed["message"]["reply_markup"], keyboard());
        let command = &updates[1]["message"];
        assert_eq!(command["text"], "/status");
        assert_eq!(command["entities"][0]["type"], "bot_command");
        assert_eq!(command["entities"][0]["length"], 7);
        assert_eq!(updates[2]["message"]["chat"]["title"], "Ops");
        assert_eq!(updates[2]["message"]["chat"]["type"], "group");

        let (_, two) = call(&double, "getUpdates", json!({"limit": 2}));
        assert_eq!(two["result"].as_array().unwrap().len(), 2);
        let (_, rest) = call(
            &double,
            "getUpdates",
            json!({"offset": status + 1, "timeout": 0}),
        );
        let ids: Vec<i64> = rest["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["update_id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, [group, after], "900 is below the offset too");
        assert_eq!(double.pending_updates().len(), 2, "confirmed for good");
        let (_, none) = call(&double, "getUpdates", json!({"offset": after + 1}));
        assert_eq!(none["result"], json!([]));
        assert!(double.pending_updates().is_empty());
    }

    /// Long polls: the bounds are several times what each step takes, so that only a poll that
    /// ignored its timeout, or a push that did not wake it, can miss them.
    #[test]
    fn tg_double_long_poll_ends_at_its_timeout_on_a_push_or_on_drop() {
        let double = TgDouble::start();
        let started = Instant::now();
        let (_, empty) = call(&double, "getUpdates", json!({"timeout": 1}));
        let waited = started.elapsed();
        assert_eq!(empty["result"], json!([]));
        assert!(
            waited >= Duration::from_millis(900)
                && waited < MAX_LONG_POLL - Duration::from_millis(500),
            "{waited:?}"
        );

        std::thread::scope(|scope| {
            scope.spawn(|| {
                double.wait_for_calls("getUpdates", 2, Duration::from_secs(30));
                double.push_update(double.text_update(42, 42, "/run"));
            });
            let started = Instant::now();
            let (_, pushed) = call(&double, "getUpdates", json!({"timeout": 30}));
            assert_eq!(pushed["result"].as_array().unwrap().len(), 1);
            assert!(started.elapsed() < MAX_LONG_POLL - Duration::from_secs(1));
        });

        // Dropping the double answers a poll still waiting.
        let url = double.url();
        let poller = std::thread::spawn(move || {
            reqwest::blocking::Client::new()
                .post(format!("{url}/bot{TOKEN}/getUpdates"))
                .json(&json!({"offset": i64::MAX, "timeout": 30}))
                .send()
                .and_then(|r| r.json::<Value>())
        });
        double.wait_for_calls("getUpdates", 3, Duration::from_secs(30));
        let started = Instant::now();
        drop(double);
        assert!(started.elapsed() < MAX_LONG_POLL - Duration::from_secs(1));
        let answer = poller.join().unwrap().expect("answered");
        assert_eq!(answer["result"], json!([]));
    }

    #[test]
    #[should_panic(expected = "expected 1 call(s) to sendMessage within")]
    fn tg_double_wait_for_calls_panics_on_timeout() {
        let double = TgDouble::start();
        double.wait_for_calls("sendMessage", 1, Duration::from_millis(30));
    }

    #[test]
    fn tg_double_parse_html_like_telegram() {
        use super::parse_html;
        assert_eq!(
            parse_html("&lt;&gt;&amp;&quot;&laquo;&#128512;&#x41;&lt"),
            Ok("<>&\"&laquo;😀A<".into())
        );
        assert_eq!(
            parse_html(
                "<b>a</b> <i>b</i> <code>c</code> <pre><code class=\"language-sh\">d</code></pre> <a href=\"https://x/?a=1&amp;b=2\">e</a> <tg-spoiler>f</tg-spoiler> <blockquote expandable>g</blockquote>"
            ),
            Ok("a b c d e f g".into())
        );
        assert_eq!(
            parse_html("🏟 🏟&lt;<abacaba"),
            Err("Unclosed start tag at byte offset 13".into())
        );
        assert_eq!(
            parse_html("🏟 🏟&lt;<abac aba>"),
            Err("Unsupported start tag \"abac\" at byte offset 13".into())
        );
        assert_eq!(
            parse_html("a < b"),
            Err("Unsupported start tag \"\" at byte offset 2".into())
        );
        assert_eq!(
            parse_html("<br>"),
            Err("Unsupported start tag \"br\" at byte offset 0".into())
        );
        assert_eq!(
            parse_html("🏟 🏟&lt;</"),
            Err("Unexpected end tag at byte offset 13".into())
        );
        assert_eq!(
            parse_html("🏟 🏟&lt;<b></b></"),
            Err("Unexpected end tag at byte offset 20".into())
        );
        assert_eq!(
            parse_html("🏟 🏟&lt;<i>a</i   "),
            Err("Unclosed end tag at byte offset 17".into())
        );
        assert_eq!(
            parse_html("🏟 🏟&lt;<i>a</em   >"),
            Err("Unmatched end tag at byte offset 17, expected \"</i>\", found \"</em>\"".into())
        );
        assert_eq!(
            parse_html("<b>x"),
            Err("Can't find end tag corresponding to start tag \"b\"".into())
        );
        assert_eq!(parse_html("<i>a</>"), Ok("a".into()));
        assert_eq!(parse_html("a > b & c"), Ok("a > b & c".into()));
    }
}
