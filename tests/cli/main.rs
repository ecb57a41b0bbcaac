//! Integration tests: drive the built `heartbeat` binary in temp dirs (one test crate, one
//! link step). Each module covers one part of docs/reference.md; the harness is in `common`.

mod common;

mod active;
mod approve;
mod approve_batch_crash;
mod approve_concurrency;
mod audit;
mod channels;
mod commands;
mod config;
mod crash;
mod daemon;
mod guardrails;
mod hook_double;
mod hostile;
mod init;
mod invalid;
mod layers;
mod lock;
mod log;
mod lost_lines;
mod man;
mod mcp_agent;
mod mcp_http;
mod mcp_server;
mod mcp_tools;
mod metrics;
mod monitors;
mod parse;
mod paths;
mod props;
mod props2;
mod retention;
mod run;
mod secrets;
mod telegram;
mod test_server;
mod tg_double;
mod tick;
mod times;
mod tools;
mod typos;
