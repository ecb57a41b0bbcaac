//! The server side of MCP over stdio, for `heartbeat mcp` (docs/reference.md#heartbeat-mcp).
//!
//! Invariants:
//!
//! - Only this file, `stdio.rs` (and `client.rs`) know the SDK: heartbeat's tools are
//!   described and answered through [`Handler`], in plain JSON.
//! - Nothing but MCP messages is written to stdout; the transport (`stdio.rs`) owns it.
//! - A call with an argument its tool does not declare is refused (invalid params, naming
//!   the key) before the handler sees it.
//! - The handler knows the client by a name of `[A-Za-z0-9._-]{1,64}` only
//!   ([`client_name`]), whatever `clientInfo.name` said.
//! - A client that leaves, before `initialize` or after, is the normal end of a session.
//! - A tool call runs on a thread of its own, outside the SDK's runtime, so that handlers may
//!   block (SQLite, locks) and may start MCP servers of their own (`check`).
//! - A handler's `Err` is a tool error (`isError: true`, its message as text), which the
//!   agent sees; an unknown tool or a call that cannot be carried out is a JSON-RPC error.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServerInitializeError};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Map, Value};

use super::stdio::{Guarded, MAX_MESSAGE};
use crate::text::{Redacted, RedactedJson};

/// One tool as heartbeat offers it.
#[derive(Clone, Debug)]
pub(crate) struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    /// A JSON Schema object.
    pub input_schema: Value,
    pub read_only: bool,
    pub destructive: bool,
}

/// What `heartbeat mcp` serves.
pub(crate) trait Handler: Send + Sync + 'static {
    fn tools(&self) -> Vec<ToolDef>;

    /// What the server is and how to use it, sent in the `initialize` result's
    /// `instructions` for the client to show its model.
    fn instructions(&self) -> &'static str;

    /// Carries out one call for the client named `client` (its `clientInfo.name` as
    /// [`client_name`] makes it). `Ok` is the result as JSON; `Err` a message for the agent.
    /// Both redacted: an answer leaves the process.
    fn call(
        &self,
        client: &str,
        tool: &str,
        input: Map<String, Value>,
    ) -> Result<RedactedJson, Redacted>;

    /// A text the client sent, made safe to quote back to it.
    fn redact(&self, text: &str) -> Redacted;
}

/// The longest client name kept.
pub(crate) const MAX_CLIENT_NAME: usize = crate::markdown::parse::MAX_NAME;

/// The name a client is known by (`mcp:NAME` in records and in the file): every character
/// of `clientInfo.name` outside `[A-Za-z0-9._-]` becomes `_`, and the result is cut to 64
/// characters; no name, or one of spaces only, is `unknown`. The same name always gives
/// the same result.
pub(crate) fn client_name(raw: &str) -> String {
    let raw = raw.trim();
    if raw.is_empty() {
        return "unknown".into();
    }
    raw.chars()
        .take(MAX_CLIENT_NAME)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// An argument `schema` does not declare, when it declares its arguments (an object
/// schema with `additionalProperties: false`).
fn undeclared<'a>(schema: &Value, input: &'a Map<String, Value>) -> Option<&'a str> {
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return None;
    }
    let declared = schema.get("properties").and_then(Value::as_object);
    input
        .keys()
        .find(|k| !declared.is_some_and(|d| d.contains_key(*k)))
        .map(String::as_str)
}

struct Adapter<H> {
    handler: Arc<H>,
    tools: Vec<ToolDef>,
    name: String,
    version: String,
    instructions: &'static str,
}

impl<H: Handler> ServerHandler for Adapter<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), self.version.clone()))
            .with_instructions(self.instructions)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .tools
            .iter()
            .map(|t| {
                let Value::Object(schema) = t.input_schema.clone() else {
                    return Err(ErrorData::internal_error("a schema is not an object", None));
                };
                let annotations = ToolAnnotations::new()
                    .read_only(t.read_only)
                    .destructive(t.destructive);
                Ok(Tool::new(t.name, t.description, Arc::new(schema)).annotate(annotations))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let quoted = |s: &str| {
            let shown = self.handler.redact(s).first_line(80);
            format!("{:?}", shown.as_str())
        };
        let Some(def) = self.tools.iter().find(|t| t.name == name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named {}", quoted(&name)),
                None,
            ));
        };
        let input = request.arguments.unwrap_or_default();
        if let Some(key) = undeclared(&def.input_schema, &input) {
            let takes: Vec<String> = def
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().map(|k| format!("{k:?}")).collect())
                .unwrap_or_default();
            let takes = if takes.is_empty() {
                "no arguments".to_string()
            } else {
                format!("only {}", takes.join(", "))
            };
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown argument {} for tool {name:?}: it takes {takes}; nothing was done",
                    quoted(key)
                ),
                None,
            ));
        }
        let client = client_name(
            &context
                .peer
                .peer_info()
                .map(|info| info.client_info.name.clone())
                .unwrap_or_default(),
        );
        let handler = Arc::clone(&self.handler);
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(handler.call(&client, &name, input));
        });
        let result = rx
            .await
            .map_err(|_| ErrorData::internal_error("the call ended without an answer", None))?;
        let answer = match result {
            Ok(value) => {
                let text = value.to_pretty().into_string();
                let mut ok = CallToolResult::success(vec![ContentBlock::text(text)]);
                // Objects also as structured content, for clients that read it.
                if value.as_value().is_object() {
                    ok.structured_content = Some(value.into_value());
                }
                ok
            }
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message.into_string())]),
        };
        Ok(answer.into())
    }
}

/// Serves `handler` on stdin/stdout until the client closes the connection (also before
/// it initialized: that is a client that left, not an error).
pub(crate) fn serve_stdio(handler: impl Handler, name: &str, version: &str) -> std::io::Result<()> {
    let adapter = Adapter {
        tools: handler.tools(),
        instructions: handler.instructions(),
        handler: Arc::new(handler),
        name: name.to_string(),
        version: version.to_string(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (stdin, stdout) = rmcp::transport::stdio();
        let transport = Guarded::new(stdin, stdout, MAX_MESSAGE);
        let running = match adapter.serve(transport).await {
            Ok(running) => running,
            // The client left before the session began: closed its end, or stopped reading
            // before our answer to `initialize` could be written.
            Err(
                ServerInitializeError::ConnectionClosed(_)
                | ServerInitializeError::TransportError { .. },
            ) => return Ok(()),
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        };
        running
            .waiting()
            .await
            .map(drop)
            .map_err(|e| std::io::Error::other(e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_client_name_is_plain_bounded_and_always_the_same() {
        assert_eq!(client_name("claude-code"), "claude-code");
        assert_eq!(client_name("Claude Code 1.2"), "Claude_Code_1.2");
        assert_eq!(client_name(" ✨ "), "_");
        assert_eq!(client_name(""), "unknown");
        assert_eq!(client_name("\t"), "unknown");
        assert_eq!(client_name("a -->\n<!--"), "a_--____--");
        let long = "é".repeat(100);
        assert_eq!(client_name(&long), "_".repeat(MAX_CLIENT_NAME));
        assert_eq!(client_name(&long), client_name(&long));
    }

    #[test]
    fn only_declared_arguments_pass() {
        let schema =
            json!({"type": "object", "properties": {"for": {}}, "additionalProperties": false});
        let input = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(undeclared(&schema, &input(json!({"for": "1h"}))), None);
        assert_eq!(undeclared(&schema, &input(json!({"x": 1}))), Some("x"));
        let none = json!({"type": "object", "properties": {}, "additionalProperties": false});
        assert_eq!(undeclared(&none, &input(json!({"x": 1}))), Some("x"));
        let open = json!({"type": "object"});
        assert_eq!(undeclared(&open, &input(json!({"x": 1}))), None);
    }
}
