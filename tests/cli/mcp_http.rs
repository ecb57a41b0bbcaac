//! MCP servers reached over Streamable HTTP (`[mcp.NAME] url`, docs/reference.md#mcp-tools), end to
//! end against a small MCP server double on 127.0.0.1: it answers `initialize` with a session id,
//! lists four tools, answers `tools/call` as a stream of server-sent events (`echo`, `flood`: one
//! event of 17 MiB), as JSON (`fail`, `isError`), after 3 s (`slow`) or not as MCP at all
//! (`page`, `junk`), answers 403 with a page that quotes its credential (`refuse`), and
//! refuses any request without the configured header or, after `initialize`, without the
//! session.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::common::*;
use crate::test_server::{Reply, Request, TestServer};

const SESSION: &str = "session-7f3a";

/// The double and every request it received.
pub(crate) struct McpHttpDouble {
    server: TestServer,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl McpHttpDouble {
    /// Requests must carry `Authorization: <authorization>`.
    pub(crate) fn start(authorization: &str) -> McpHttpDouble {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let authorization = authorization.to_string();
        let server = TestServer::start(move |r| {
            seen.lock().unwrap().push(r.clone());
            answer(r, &authorization)
        });
        McpHttpDouble { server, requests }
    }

    pub(crate) fn url(&self) -> String {
        format!("{}/mcp", self.server.url())
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The JSON-RPC methods posted, in order.
    pub(crate) fn methods(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter_map(|v| v["method"].as_str().map(str::to_owned))
            .collect()
    }
}

fn answer(r: &Request, authorization: &str) -> Reply {
    if r.header("authorization") != Some(authorization) {
        return Reply::raw(401, "text/plain", "who are you?");
    }
    match r.method.as_str() {
        "POST" => {}
        "DELETE" => return Reply::raw(200, "text/plain", ""),
        // No stream of its own for server-initiated messages.
        _ => return Reply::raw(405, "text/plain", ""),
    }
    let Ok(message) = serde_json::from_slice::<Value>(&r.body) else {
        return Reply::raw(400, "text/plain", "not JSON");
    };
    let method = message["method"].as_str().unwrap_or_default();
    if method != "initialize" && r.header("mcp-session-id") != Some(SESSION) {
        return Reply::raw(400, "text/plain", "no session");
    }
    let Some(id) = message.get("id").cloned() else {
        // A notification.
        return Reply::raw(202, "text/plain", "");
    };
    let result = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    match method {
        "initialize" => Reply::json(
            200,
            &result(json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-double", "version": "1.0.0"}
            })),
        )
        .with_header("Mcp-Session-Id", SESSION),
        "tools/list" => Reply::json(
            200,
            &result(json!({"tools": [
                {
                    "name": "echo",
                    "description": "Says the text back, with the Authorization it was sent",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                        "additionalProperties": false
                    },
                    "annotations": {"readOnlyHint": true}
                },
                {"name": "fail", "inputSchema": {"type": "object"}},
                {"name": "flood", "inputSchema": {"type": "object"}},
                {"name": "slow", "inputSchema": {"type": "object"}},
                {"name": "page", "inputSchema": {"type": "object"}},
                {"name": "junk", "inputSchema": {"type": "object"}},
                {"name": "refuse", "inputSchema": {"type": "object"}},
                {"name": "deep", "inputSchema": {"type": "object"}}
            ]})),
        ),
        "tools/call" => {
            let args = &message["params"]["arguments"];
            match message["params"]["name"].as_str() {
                // As a stream of server-sent events: a progress notification, then the result.
                Some("echo") => {
                    let text = format!(
                        "{} (sent with {})",
                        args["text"].as_str().unwrap_or_default(),
                        r.header("authorization").unwrap_or_default()
                    );
                    let progress = json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": "echoing"}});
                    let done = result(json!({"content": [{"type": "text", "text": text}]}));
                    Reply::raw(
                        200,
                        "text/event-stream",
                        format!(
                            "event: message\ndata: {progress}\n\nevent: message\ndata: {done}\n\n"
                        ),
                    )
                }
                // One event larger than any answer heartbeat keeps.
                Some("flood") => {
                    let huge = "x".repeat(17 << 20);
                    Reply::raw(
                        200,
                        "text/event-stream",
                        format!("event: message\ndata: {huge}\n\n"),
                    )
                }
                // An answer nested deeper than the JSON parser reads, as an event (or JSON).
                Some("deep") => {
                    let depth = 200;
                    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                    let done = format!(
                        "{{\"jsonrpc\": \"2.0\", \"id\": {id}, \"result\": {{\"content\": [], \
                         \"structuredContent\": {{\"nested\": {nested}}}}}}}"
                    );
                    if args["json"] == true {
                        Reply::raw(200, "application/json", done)
                    } else {
                        Reply::raw(
                            200,
                            "text/event-stream",
                            format!("event: message\ndata: {done}\n\n"),
                        )
                    }
                }
                // Not MCP at all: a web page, or JSON that is no JSON-RPC message.
                Some("page") => Reply::raw(200, "text/html", "<html>maintenance</html>"),
                Some("junk") => Reply::raw(200, "application/json", "{\"hello\": "),
                // An error page that quotes the credential it was sent, bare, 180
                // characters in.
                Some("refuse") => {
                    let sent = r.header("authorization").unwrap_or_default();
                    let credential = sent.strip_prefix("Bearer ").unwrap_or(sent);
                    let page = format!("{} you sent {credential}", "-".repeat(171));
                    Reply::raw(403, "text/plain", page)
                }
                // Answers after the caller gave up.
                Some("slow") => {
                    std::thread::sleep(std::time::Duration::from_secs(3));
                    Reply::json(200, &result(json!({"content": []})))
                }
                Some("fail") => Reply::json(
                    200,
                    &result(
                        json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
                    ),
                ),
                _ => Reply::json(
                    200,
                    &json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": "no such tool"}}),
                ),
            }
        }
        _ => Reply::json(
            200,
            &json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}),
        ),
    }
}

/// `[mcp.web]` at the double's URL, its Authorization header read from `WEB_MCP_AUTH`.
pub(crate) fn web_toml(url: &str) -> String {
    format!(
        "[mcp.web]\nurl = \"{url}\"\nheaders_env = {{ Authorization = \"WEB_MCP_AUTH\" }}\n\
         timeout = \"10s\"\napproval = \"auto\"\n"
    )
}

/// A `run --once` of `md` with `[mcp.web]` at a new double (and `extra` config), sending
/// `auth` as the header's value.
fn web_run(md: &str, extra: &str, auth: &str) -> (McpHttpDouble, Env, Output) {
    let double = McpHttpDouble::start(AUTH);
    let env = Env::new(md).config(&format!(
        "autonomy = \"cautious\"\n{}\n{extra}",
        web_toml(&double.url())
    ));
    let out = env
        .cmd(["run", "--once"])
        .now(NOW)
        .env("WEB_MCP_AUTH", auth)
        .output();
    out.no_panic();
    (double, env, out)
}

/// The task after the failing ones (`@web.echo {"text": "after"}`) ran, and the header it
/// echoes is hidden.
#[track_caller]
fn assert_the_next_task_ran(env: &Env) {
    let ok = env.events_n("task_succeeded", 1);
    assert_eq!(ok[0]["output"], "after (sent with ***)");
}

pub(crate) const AUTH: &str = "Bearer web-mcp-token-51d9c0";

#[test]
fn a_url_server_is_checked_listed_and_called_over_streamable_http() {
    let double = McpHttpDouble::start(AUTH);
    let env = Env::new(
        "## Recurring\n- [ ] @web.echo {\"text\": \"hello over http\"}\n\
         - [ ] @web.echo {\"txt\": \"typo\"}\n- [ ] @web.fail {}\n",
    )
    .config(&format!(
        "autonomy = \"cautious\"\n{}",
        web_toml(&double.url())
    ));

    // check: the schema violation at its place, the rest would run.
    let out = env.cmd(["check"]).env("WEB_MCP_AUTH", AUTH).output();
    out.code(1);
    assert!(
        out.stdout.contains("HEARTBEAT.md:3:7") && out.stdout.contains("txt"),
        "{}",
        out.stdout
    );
    // mcp-tools: what the server offers, read-only per its annotations.
    let listed = env
        .cmd(["mcp-tools", "web", "--json"])
        .env("WEB_MCP_AUTH", AUTH)
        .output();
    listed.code(0);
    let tools = &listed.json()["servers"][0]["tools"];
    assert_eq!(tools[0]["name"], "echo", "{}", listed.stdout);
    assert_eq!(tools[0]["task"], "@web.echo");
    assert_eq!(tools[0]["read_only"], true);
    assert_eq!(tools[1]["name"], "fail");

    let out = env
        .cmd(["run", "--once"])
        .now(NOW)
        .env("WEB_MCP_AUTH", AUTH)
        .output();
    out.code(1);
    let ok = env.events_n("task_succeeded", 1);
    assert_eq!(ok[0]["tool"], "web.echo");
    // The server had the header; the log shows its value hidden.
    assert_eq!(ok[0]["output"], "hello over http (sent with ***)");
    let failed = env.events_n("task_failed", 1);
    assert_eq!(failed[0]["tool"], "web.fail");
    assert!(error_of(&failed[0]).contains("it broke"), "{failed:#?}");
    assert_eq!(env.events("task_invalid").len(), 1);
    assert!(!env.audit_text().contains("web-mcp-token"));
    assert!(!out.stdout.contains("web-mcp-token") && !out.stderr.contains("web-mcp-token"));

    // Every request carried the header, and every one after `initialize` the session; the
    // session was ended when the run stopped the server.
    let methods = double.methods();
    assert_eq!(methods.first().map(String::as_str), Some("initialize"));
    assert!(methods.iter().any(|m| m == "tools/call"), "{methods:?}");
    let requests = double.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.header("authorization") == Some(AUTH))
    );
    assert!(
        requests
            .iter()
            .any(|r| r.method == "DELETE" && r.header("mcp-session-id") == Some(SESSION)),
        "the session was not ended: {:?}",
        requests.iter().map(|r| &r.method).collect::<Vec<_>>()
    );
}

#[test]
fn a_url_server_that_refuses_or_cannot_be_reached_fails_its_task_and_the_run_goes_on() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    // The wrong header: the server answers 401.
    let (_double, env, out) = web_run(
        "## Recurring\n- [ ] @web.echo {\"text\": \"a\"}\n- [ ] @gone.echo {\"text\": \"b\"}\n\
         - [ ] @log {\"text\": \"still runs\"}\n",
        &format!(
            "[mcp.gone]\nurl = \"http://127.0.0.1:{closed}/mcp\"\napproval = \"auto\"\n\
             startup_timeout = \"5s\"\n"
        ),
        "Bearer wrong",
    );
    out.code(1);
    let failed = env.events_n("task_failed", 2);
    for f in &failed {
        assert!(
            f["error"].as_str().unwrap().contains("did not start"),
            "{f:#}"
        );
    }
    assert!(error_of(&failed[0]).contains("401"), "{:#}", failed[0]);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["tool"], "log");
}

#[test]
fn an_endless_answer_fails_its_task_at_the_cap() {
    let (_double, env, out) = web_run(
        "## Recurring\n- [ ] @web.flood {}\n- [ ] @web.echo {\"text\": \"after\"}\n",
        "",
        AUTH,
    );
    out.code(1);
    let failed = env.events_n("task_failed", 1);
    assert_eq!(failed[0]["tool"], "web.flood");
    let error = failed[0]["error"].as_str().unwrap();
    assert!(error.contains("passed 16 MiB"), "{error}");
    // The server is used again (or anew) for the next task.
    assert_the_next_task_ran(&env);
}

#[test]
fn an_answer_nested_too_deep_fails_its_task_at_once_naming_the_depth() {
    let (_double, env, out) = web_run(
        "## Recurring\n- [ ] @web.deep {}\n- [ ] @web.deep {\"json\": true}\n\
         - [ ] @web.echo {\"text\": \"after\"}\n",
        "",
        AUTH,
    );
    out.code(1);
    let failed = env.events_n("task_failed", 2);
    for f in &failed {
        assert_eq!(
            f["error"],
            "MCP server \"web\" broke the MCP protocol: it sent a message nested deeper than \
             127 levels, the most the JSON parser reads"
        );
    }
    assert_the_next_task_ran(&env);
}

#[test]
fn a_call_past_its_timeout_is_cancelled_and_the_run_goes_on() {
    let (double, env, out) = web_run(
        "## Recurring\n- [ ] @web.slow {}\n- [ ] @web.echo {\"text\": \"after\"}\n",
        "[mcp.web.tools.slow]\ntimeout = \"1s\"\n",
        AUTH,
    );
    out.code(1);
    let failed = env.events_n("task_failed", 1);
    assert_eq!(failed[0]["error"], "timed out after 1s");
    assert_eq!(env.events("task_succeeded").len(), 1);
    assert!(
        double
            .methods()
            .iter()
            .any(|m| m == "notifications/cancelled"),
        "{:?}",
        double.methods()
    );
}

#[test]
fn a_header_whose_variable_is_not_set_is_named_and_nothing_is_sent() {
    let double = McpHttpDouble::start(AUTH);
    let env = Env::new("## Recurring\n- [ ] @web.echo {\"text\": \"a\"}\n").config(&format!(
        "autonomy = \"cautious\"\n{}",
        web_toml(&double.url())
    ));
    // As from cron: the variable was exported in a shell, not here.
    let out = env.cmd(["run", "--once"]).now(NOW).output();
    out.code(1);
    let failed = env.events_n("task_failed", 1);
    assert!(
        error_of(&failed[0])
            .contains("headers_env Authorization: the variable WEB_MCP_AUTH is not set"),
        "{:#}",
        failed[0]
    );
    assert!(double.requests().is_empty(), "{:?}", double.requests());
}

#[test]
fn an_answer_that_is_not_mcp_fails_its_task_and_the_next_one_runs() {
    let (_double, env, out) = web_run(
        "## Recurring\n- [ ] @web.page {}\n- [ ] @web.junk {}\n\
         - [ ] @web.echo {\"text\": \"after\"}\n",
        "",
        AUTH,
    );
    out.code(1);
    let failed = env.events_n("task_failed", 2);
    let errors: Vec<&str> = failed
        .iter()
        .map(|f| f["error"].as_str().unwrap())
        .collect();
    assert!(
        errors[0].contains("the answer is not MCP: its Content-Type is text/html"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("the answer is not MCP: its JSON is no JSON-RPC message"),
        "{errors:?}"
    );
    assert_eq!(
        env.events("task_succeeded").len(),
        1,
        "{}",
        env.audit_text()
    );
}

/// A proxy set for the whole machine (often there for package registries) cannot reach
/// this machine's loopback: loopback servers (here the MCP and Telegram doubles) are reached
/// directly.
#[test]
fn a_machine_wide_proxy_is_not_used_for_loopback_servers() {
    let tg = crate::tg_double::TgDouble::start();
    tg.expect_token(TG_TOKEN);
    let double = McpHttpDouble::start(AUTH);
    let env = Env::new("## Recurring\n- [ ] @web.echo {\"text\": \"direct\"}\n").config(&format!(
        "autonomy = \"cautious\"\n{}\n{}",
        web_toml(&double.url()),
        tg_toml(&tg.url(), &[77], "summary = \"always\"")
    ));
    // Port 9 on loopback refuses every connection.
    let proxy = "http://127.0.0.1:9";
    let mut cmd = env
        .cmd(["run", "--once"])
        .now(NOW)
        .token()
        .env("WEB_MCP_AUTH", AUTH);
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
    ] {
        cmd = cmd.env(var, proxy);
    }
    let out = cmd.output();
    out.code(0);
    assert_eq!(
        env.events("task_succeeded").len(),
        1,
        "{}",
        env.audit_text()
    );
    tg.wait_for_calls("sendMessage", 1, std::time::Duration::from_secs(10));
}
