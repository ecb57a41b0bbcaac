//! heartbeat: run the check-list in HEARTBEAT.md on a schedule, safely, with a human in the
//! loop. The binary in `main.rs` is a thin shell around this library.

pub mod app;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod engine;
pub mod error;
pub mod exit;
pub mod fault;
pub mod lock;
pub mod markdown;
pub mod mcp;
pub mod model;
pub mod net;
pub mod notify;
pub mod plan;
pub mod redact;
pub mod render;
pub mod report;
pub mod schedule;
pub mod store;
pub mod sys;
pub mod telegram;
pub mod text;
pub mod tools;
