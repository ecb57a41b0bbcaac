//! The effects on the world, in one layer: one run (lock, decisions, the session applying a
//! plan, ticks), approvals, the Telegram bot's updates and outbox delivery. Commands call in
//! here; nothing here knows about the command line.

pub(crate) mod agent;
pub(crate) mod bot;
pub(crate) mod daemon;
pub(crate) mod decide;
pub(crate) mod doctor;
pub(crate) mod executor;
pub(crate) mod files;
pub(crate) mod guard;
pub(crate) mod ledger;
pub(crate) mod mcp;
pub(crate) mod metrics;
pub(crate) mod missed;
pub(crate) mod outbox;
pub(crate) mod propose;
pub(crate) mod query;
pub(crate) mod recovery;
pub(crate) mod replies;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) mod ticks;
