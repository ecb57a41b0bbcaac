//! The effects on the world, in one layer: one run (lock, decisions, the session applying a
//! plan, ticks), approvals, the Telegram bot's updates and outbox delivery. Commands call in
//! here; nothing here knows about the command line.

pub mod agent;
pub mod bot;
pub mod daemon;
pub mod decide;
pub mod executor;
pub mod files;
pub mod guard;
pub mod ledger;
pub mod mcp;
pub mod outbox;
pub mod propose;
pub mod query;
pub mod recovery;
pub mod run;
pub mod session;
pub mod ticks;
