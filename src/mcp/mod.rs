//! MCP tools (docs/reference.md#mcp-tools): the client side of the Model Context Protocol, for
//! tasks written `@SERVER.TOOL {json}`.
//!
//! Invariants:
//!
//! - Only [`client`], `http`, [`server`] and `stdio` know the SDK (`rmcp`, pinned exactly in
//!   `Cargo.toml`); every other part of heartbeat sees the blocking types re-exported here,
//!   so an SDK upgrade touches one file.
//! - The API is synchronous: heartbeat has no async code. Each [`Server`] owns a private
//!   current-thread runtime that runs only while one of its methods is being called.
//! - A [`Server`] never outlives its value: [`Server::stop`] and `Drop` both close its stdin,
//!   signal its whole process group and reap it (over HTTP: end its session).
//! - Server-initiated sampling, elicitation and roots requests are always refused.
//! - Nothing here redacts: captured stderr, tool output and error messages may hold a
//!   server's secrets, and go through heartbeat's one redaction step (docs/reference.md#redaction)
//!   before any sink.

mod client;
mod http;
pub(crate) mod schema;
pub(crate) mod server;
mod stdio;

use std::collections::BTreeMap;

pub(crate) use client::{
    CallOutcome, McpError, PASSED_ENV, Server, ServerSpec, ToolInfo, Transport,
};
pub(crate) use schema::validate_input;

/// What is known of each server's tools, by server name. A server that is absent is not
/// known (never listed, or it could not be reached this time): its tasks' inputs cannot be
/// checked yet, and the call itself finds out.
pub(crate) type Catalog = BTreeMap<String, Listing>;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Listing {
    /// Its tools, as listed.
    Tools(Vec<ToolInfo>),
    /// `check` and `mcp-tools` could not list them: why.
    Unavailable(String),
}

#[cfg(test)]
mod tests;
