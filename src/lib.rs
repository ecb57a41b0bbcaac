//! heartbeat: run the check-list in HEARTBEAT.md on a schedule, safely, with a human in the
//! loop. The binary in `main.rs` is a thin shell around this library.

pub mod audit;
pub mod config;
pub mod lock;
pub mod markdown;
pub mod model;
pub mod schedule;
pub mod store;
pub mod tools;
