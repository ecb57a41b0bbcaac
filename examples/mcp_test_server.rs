//! An MCP server over stdio for heartbeat's tests, written with the same SDK as the client.
//!
//! Invariants:
//!
//! - It only ever writes MCP messages to stdout; everything else goes to stderr.
//! - Each tool exercises one behaviour of the client (see `TOOLS`), and its input schema is
//!   real, so schema validation can be tested against what it lists.
//! - `--many N` adds N tools (`extra_0` …) and serves the list in pages of `PAGE` with
//!   numeric cursors; `--exit-at-start` exits before reading anything; `--hang-at-start
//!   MARK` writes its pid to the file MARK and never answers.
//!
//! Tools: `echo` (read-only; returns `text`), `fail` (an `isError` result), `sleep` (waits
//! `secs`, in a child `sleep` process when `child` is true), `stderr` (writes `text` to
//! stderr), `structured` (structuredContent with `cost_usd` and `summary`), `image` (one
//! image item and one text item), `sampling`, `roots` and `elicit` (ask the client and report
//! its answer), `env` (its environment, one `NAME=value` per line, sorted), `crash` (exits
//! with status 3 mid-call), `big` (a text of `bytes` bytes), `deep` (structured content
//! nested `depth` arrays deep), `hang` (writes its pid to `mark`, then never answers).

// Sampling and roots are deprecated in the SDK, but servers in use still send them: the tests
// need a server that does.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, SamplingMessage, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// Tools per `tools/list` page.
const PAGE: usize = 10;

struct TestServer {
    tools: Vec<Tool>,
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("schemas are objects")
    };
    Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
}

fn tools(extra: usize) -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    let mut tools = vec![
        tool(
            "echo",
            "Returns its text.",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            }),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool(
            "fail",
            "Fails with isError: its text (default \"failed on purpose\"), then the value \
             of the variable `var` when given.",
            none.clone(),
        ),
        tool(
            "sleep",
            "Sleeps for secs seconds, in a child process when child is true.",
            json!({
                "type": "object",
                "properties": {"secs": {"type": "number"}, "child": {"type": "boolean"}},
                "required": ["secs"]
            }),
        ),
        tool(
            "stderr",
            "Writes text to stderr.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ),
        tool(
            "structured",
            "Returns structured content, with the cost (default 0.25) and summary given.",
            json!({
                "type": "object",
                "properties": {"cost": {"type": "number"}, "summary": {"type": "string"}}
            }),
        ),
        tool("image", "Returns an image.", none.clone()),
        tool("sampling", "Asks the client for sampling.", none.clone()),
        tool("roots", "Asks the client for its roots.", none.clone()),
        tool("elicit", "Asks the client to elicit input.", none.clone()),
        // A server that puts its environment in its listing: $MCP_TEST_DESCRIPTION.
        tool(
            "env",
            &format!(
                "Returns its environment.{}",
                std::env::var("MCP_TEST_DESCRIPTION")
                    .map(|d| format!(" {d}"))
                    .unwrap_or_default()
            ),
            none.clone(),
        ),
        tool("crash", "Exits mid-call.", none.clone()),
        tool(
            "big",
            "Returns a text of bytes bytes.",
            json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer"}},
                "required": ["bytes"]
            }),
        ),
        tool(
            "deep",
            "Returns structured content nested depth arrays deep.",
            json!({
                "type": "object",
                "properties": {"depth": {"type": "integer"}},
                "required": ["depth"]
            }),
        ),
        tool(
            "hang",
            "Writes its pid to the file mark, then never answers, not even a cancellation.",
            json!({
                "type": "object",
                "properties": {"mark": {"type": "string"}},
                "required": ["mark"]
            }),
        ),
    ];
    for i in 0..extra {
        tools.push(tool(&format!("extra_{i}"), "A filler tool.", none.clone()));
    }
    tools
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

impl TestServer {
    async fn run(
        &self,
        name: &str,
        args: &JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arg = |key: &str| args.get(key).cloned().unwrap_or(Value::Null);
        Ok(match name {
            "echo" => match arg("text") {
                Value::String(s) => text(s),
                _ => return Err(ErrorData::invalid_params("text must be a string", None)),
            },
            "fail" => {
                let mut said = arg("text")
                    .as_str()
                    .unwrap_or("failed on purpose")
                    .to_owned();
                if let Some(var) = arg("var").as_str() {
                    said.push_str(&std::env::var(var).unwrap_or_default());
                }
                CallToolResult::error(vec![ContentBlock::text(said)])
            }
            "sleep" => {
                let secs = arg("secs").as_f64().unwrap_or(1.0);
                let wait = async {
                    if arg("child") == Value::Bool(true) {
                        // A second process in the server's group, left running when the call
                        // is cancelled: stopping the server must end it too.
                        let status = tokio::process::Command::new("sleep")
                            .arg(secs.to_string())
                            .status()
                            .await;
                        format!("child sleep ended: {status:?}")
                    } else {
                        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                        "slept".to_owned()
                    }
                };
                tokio::select! {
                    done = wait => text(done),
                    () = context.ct.cancelled() => {
                        // The tests look for this line to know the cancellation arrived.
                        eprintln!("sleep cancelled by the client");
                        text("cancelled")
                    }
                }
            }
            "stderr" => {
                eprintln!("{}", arg("text").as_str().unwrap_or("a line on stderr"));
                text("written")
            }
            "structured" => CallToolResult::structured(json!({
                "cost_usd": arg("cost").as_f64().unwrap_or(0.25),
                "summary": arg("summary").as_str().unwrap_or("3 open issues"),
                "issues": [1, 2, 3]
            })),
            "image" => CallToolResult::success(vec![
                // A 1x1 transparent PNG.
                ContentBlock::image(
                    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
                    "image/png",
                ),
                ContentBlock::text("one image"),
            ]),
            "sampling" => {
                let params =
                    CreateMessageRequestParams::new(vec![SamplingMessage::user_text("hello")], 16);
                let answer = context.peer.create_message(params).await;
                match answer {
                    Ok(_) => text("sampling answered"),
                    Err(e) => text(format!("sampling refused: {e}")),
                }
            }
            "roots" => {
                let answer = context.peer.list_roots().await;
                match answer {
                    Ok(roots) => text(format!("roots answered: {roots:?}")),
                    Err(e) => text(format!("roots refused: {e}")),
                }
            }
            "elicit" => {
                let params: ElicitRequestParams = serde_json::from_value(json!({
                    "mode": "url",
                    "message": "open this",
                    "url": "https://example.invalid/",
                    "elicitationId": "e1"
                }))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                match context.peer.create_elicitation(params).await {
                    Ok(answer) => text(format!("elicitation answered: {answer:?}")),
                    Err(e) => text(format!("elicitation refused: {e}")),
                }
            }
            "env" => {
                let mut vars: Vec<String> = std::env::vars_os()
                    .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                    .collect();
                vars.sort();
                text(vars.join("\n"))
            }
            "crash" => {
                eprintln!("crashing on purpose");
                std::process::exit(3);
            }
            "big" => text("x".repeat(arg("bytes").as_u64().unwrap_or(0) as usize)),
            "deep" => {
                let mut nested = json!("bottom");
                for _ in 0..arg("depth").as_u64().unwrap_or(1) {
                    nested = json!([nested]);
                }
                CallToolResult::structured(json!({ "nested": nested }))
            }
            "hang" => {
                let mark = arg("mark");
                let mark = mark.as_str().unwrap_or("hang.pid");
                // Whole or absent: the tests read it as soon as it exists.
                let part = format!("{mark}.part");
                std::fs::write(&part, std::process::id().to_string())
                    .and_then(|()| std::fs::rename(&part, mark))
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                std::future::pending::<()>().await;
                unreachable!("pending never ends")
            }
            other if other.starts_with("extra_") => text(other.to_owned()),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        })
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mcp_test_server", "0.0.0"))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let end = (start + PAGE).min(self.tools.len());
        let mut page = ListToolsResult::with_all_items(self.tools[start.min(end)..end].to_vec());
        page.next_cursor = (end < self.tools.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.run(&request.name, &args, context)
            .await
            .map(Into::into)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--hang-at-start") {
        // Writes its pid to the file named next, then never answers `initialize`.
        let mark = args.get(i + 1).map_or("hang.pid", String::as_str);
        let part = format!("{mark}.part");
        std::fs::write(&part, std::process::id().to_string()).expect("write the mark");
        std::fs::rename(&part, mark).expect("write the mark");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("mcp_test_server: exiting at start on purpose");
        std::process::exit(1);
    }
    let extra = args
        .iter()
        .position(|a| a == "--many")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let server = TestServer {
            tools: tools(extra),
        };
        match server.serve(rmcp::transport::stdio()).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => eprintln!("mcp_test_server: {e}"),
        }
    });
}
