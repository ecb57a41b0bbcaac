//! heartbeat: run the check-list in HEARTBEAT.md on a schedule, safely, with a human in the
//! loop. The binary in `main.rs` is a thin shell around this library.

pub mod app;
pub mod audit;
pub mod bot;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod error;
pub mod fault;
pub mod json;
pub mod lock;
pub mod markdown;
pub mod mcp;
pub mod memory;
pub mod model;
pub mod notify;
pub mod plan;
pub mod schedule;
pub mod session;
pub mod store;
pub mod telegram;
pub mod tools;
