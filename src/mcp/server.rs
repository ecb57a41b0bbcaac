//! The server side of MCP over stdio, for `heartbeat mcp` (SPEC §13).
//!
//! Invariants:
//!
//! - Only this file (and `client.rs`) knows the SDK: heartbeat's tools are described and
//!   answered through [`Handler`], in plain JSON.
//! - Nothing but MCP messages is written to stdout; the SDK's transport owns it.
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
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Map, Value};

use crate::text::{Redacted, RedactedJson};

/// One tool as heartbeat offers it.
#[derive(Clone, Debug)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    /// A JSON Schema object.
    pub input_schema: Value,
    pub read_only: bool,
    pub destructive: bool,
}

/// What `heartbeat mcp` serves.
pub trait Handler: Send + Sync + 'static {
    fn tools(&self) -> Vec<ToolDef>;

    /// Carries out one call for the client named `client` (its `clientInfo.name`). `Ok` is
    /// the result as JSON; `Err` a message for the agent. Both redacted: an answer leaves the
    /// process.
    fn call(
        &self,
        client: &str,
        tool: &str,
        input: Map<String, Value>,
    ) -> Result<RedactedJson, Redacted>;
}

struct Adapter<H> {
    handler: Arc<H>,
    tools: Vec<ToolDef>,
    name: String,
    version: String,
}

impl<H: Handler> ServerHandler for Adapter<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), self.version.clone()))
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
        if !self.tools.iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(
                format!("no tool named {name:?}"),
                None,
            ));
        }
        let client = context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| "unknown".into());
        let input = request.arguments.unwrap_or_default();
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

/// Serves `handler` on stdin/stdout until the client closes the connection.
pub fn serve_stdio(handler: impl Handler, name: &str, version: &str) -> std::io::Result<()> {
    let adapter = Adapter {
        tools: handler.tools(),
        handler: Arc::new(handler),
        name: name.to_string(),
        version: version.to_string(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let running = adapter
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        running
            .waiting()
            .await
            .map(drop)
            .map_err(|e| std::io::Error::other(e.to_string()))
    })
}
