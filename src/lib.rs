//! heartbeat: run the check-list in HEARTBEAT.md on a schedule, safely, with a human in the
//! loop. The binary in `main.rs` is a thin shell around this library. Only `app` (the entry)
//! and `cli` (the command line, for completions and man pages) are public; every other
//! module is private, so the compiler finds unused code, and an item is `pub(crate)` unless
//! it is reachable from here (the `unreachable_pub` lint).

pub mod app;
mod audit;
pub mod cli;
mod clock;
mod cmd;
mod codec;
mod config;
mod cron;
mod engine;
mod error;
mod exit;
mod fault;
mod lock;
pub mod man;
mod markdown;
mod mcp;
mod metrics;
mod model;
mod monitor;
mod net;
mod notify;
mod plan;
mod redact;
mod render;
mod report;
mod schedule;
mod store;
mod sys;
mod telegram;
mod text;
mod tools;

/// What the integration tests reach inside: the parser, the tick and the schedule rules
/// (their property tests), and an old database schema (a migration test). Not an API.
#[doc(hidden)]
pub mod testing {
    pub use crate::cron::CronLine;
    pub use crate::markdown::parse;
    pub use crate::markdown::tick::{TickOutcome, tick_text};
    pub use crate::model::{DaySet, Schedule, Section};
    pub use crate::schedule::{is_due, local_instant, next_due};
    pub use crate::store::schema_at_version;
}
