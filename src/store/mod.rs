//! State: task history, approvals, grants, runs, the outbox. The engine and the commands use
//! it through the [`Store`] trait (a `Box<dyn Store>` from [`open`] or [`open_existing`]);
//! SQLite (`<state_dir>/heartbeat.db`, [`Sqlite`]) is its one implementation.
//!
//! The trait is the traits of its concerns combined, each declared beside its rows and its
//! SQLite implementation: [`Approvals`], [`Fleet`], [`Grants`], [`History`], [`McpCache`], [`Metrics`],
//! [`Notices`], [`Outbox`], [`Proposals`], [`Retention`], [`Slots`], [`Snapshots`], [`Snoozes`], [`Starts`]. What any
//! implementation must keep:
//! - Every write is committed before the method returns: nothing is held back for later, so
//!   what a caller audits after a call returned is stored.
//! - What one method does is atomic: all of it is committed or none of it (a tool run's
//!   history row, its task's state and its approval's outcome; a claim; a batch of
//!   decisions). Nothing in the trait spans several calls.
//! - Approval changes, grants, starts, trips and the pause are durable when their method
//!   returns.
//! - A task has at most one open approval.
//! - Approval rows hold the input already redacted: the input that runs is always re-read
//!   from the HEARTBEAT.md.
//! - No database type appears in the trait or in [`StoreError`]: a failure is a
//!   [`DbError`], the database's own message.
//!
//! How SQLite keeps them is in `store/sqlite.rs`.

mod approvals;
mod fleet;
mod grants;
mod history;
mod mcp;
mod metrics;
mod migrations;
mod notices;
mod outbox;
mod pg;
mod proposals;
mod retention;
mod slots;
mod snapshot;
mod snoozes;
mod sqlite;
mod starts;
mod words;

use std::path::PathBuf;

pub(crate) use approvals::{ApprovalRow, Approvals, Decision, NewApproval, config_key};
pub(crate) use fleet::{Claim, Fleet, LeaseRow, NodeRow, RecentRun};
pub(crate) use grants::{GrantRow, Grants, NewGrant};
pub(crate) use history::{History, RunSummary, TaskRunRecord};
pub(crate) use mcp::McpCache;
pub(crate) use metrics::{Metrics, RunResult, RunTally};
pub use migrations::schema_at_version;
pub(crate) use notices::Notices;
pub(crate) use outbox::{
    Destination, NewMessage, NewPause, Outbox, OutboxRow, PauseRow, TELEGRAM_OFFSET,
};
pub(crate) use proposals::Proposals;
pub(crate) use retention::Retention;
pub(crate) use slots::{SlotChange, Slots};
pub(crate) use snapshot::{Snapshot, Snapshots};
pub(crate) use snoozes::{NewSnooze, SnoozeRow, Snoozes};
pub(crate) use sqlite::{DB_FILE, Sqlite, sqlite_version};
pub(crate) use starts::{NewStart, Starts};

use migrations::SCHEMA_VERSION;
use sqlite::{format_ts, sql_err};

use crate::config::Config;

/// The state the engine and the commands use, whatever holds it. Object-safe: callers hold
/// a `Box<dyn Store>` or a `&mut dyn Store`.
pub(crate) trait Store:
    Approvals
    + Fleet
    + Grants
    + History
    + McpCache
    + Metrics
    + Notices
    + Outbox
    + Proposals
    + Retention
    + Slots
    + Snapshots
    + Snoozes
    + Starts
{
}

impl<T> Store for T where
    T: Approvals
        + Fleet
        + Grants
        + History
        + McpCache
        + Metrics
        + Notices
        + Outbox
        + Proposals
        + Retention
        + Slots
        + Snapshots
        + Snoozes
        + Starts
{
}

/// Open (creating if needed) the store `cfg` names, brought to the current schema. The one
/// place that picks the implementation: SQLite in `cfg.state_dir`, or in a fleet its
/// PostgreSQL (docs/fleet.md), this node registered.
pub(crate) fn open(cfg: &Config) -> Result<Box<dyn Store>> {
    if cfg.fleet.is_some() {
        return Ok(Box::new(pg::open_fleet(cfg)?));
    }
    Ok(Box::new(Sqlite::open(&cfg.state_dir)?))
}

/// Mark this process as a fleet daemon (its node's registration says so; see `pg`).
pub(crate) fn running_as_daemon() {
    pg::running_as_daemon();
}

/// Open the store `cfg` names without creating anything; None when there is none yet. For
/// read-only commands (`status`, `approvals`, `check`, dry runs). Picks the implementation
/// as [`open`] does.
pub(crate) fn open_existing(cfg: &Config) -> Result<Option<Box<dyn Store>>> {
    if cfg.fleet.is_some() {
        return open(cfg).map(Some);
    }
    Ok(Sqlite::open_existing(&cfg.state_dir)?.map(|s| Box::new(s) as Box<dyn Store>))
}

/// The schema of the store `cfg` names when an earlier heartbeat wrote it (what
/// [`open_existing`] would bring up to date, a write); None otherwise. Reads only.
pub(crate) fn older_schema(cfg: &Config) -> Result<Option<i64>> {
    if cfg.fleet.is_some() {
        return Ok(None);
    }
    Sqlite::older_schema(&cfg.state_dir)
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("{}: {source}", .path.display())]
    Database { path: PathBuf, source: DbError },
    /// The database could not write and the disk has no room: said plainly, since "disk I/O
    /// error" reads like failing hardware.
    #[error("{}: its disk is full ({source})", .path.display())]
    DiskFull { path: PathBuf, source: DbError },
    #[error(
        "{}: written by a newer heartbeat (schema {found}, this version knows {SCHEMA_VERSION}); nothing was run",
        .path.display()
    )]
    TooNew { path: PathBuf, found: i64 },
    /// The fleet's PostgreSQL cannot be reached: nothing runs (docs/fleet.md#fail-closed).
    #[error("{store} cannot be reached: {source}")]
    Unavailable { store: String, source: DbError },
    /// PostgreSQL refused a statement.
    #[error("{store}: {source}")]
    Postgres { store: String, source: DbError },
    #[error(
        "{store} has tables heartbeat did not create ({tables}); give the fleet a database of its own"
    )]
    NotOurs { store: String, tables: String },
    #[error(
        "{store}: written by a newer heartbeat (schema {found}, this version knows {}); nothing was run",
        pg::SCHEMA_VERSION
    )]
    TooNewPg { store: String, found: i64 },
    /// Another node's key holds this node's name (docs/fleet.md#one-name-one-node).
    #[error(
        "the node name {node:?} belongs to another node (host {host}, last seen {last_seen}); \
         give this one another [fleet] node, or run `heartbeat fleet forget {node}` if that \
         node is gone"
    )]
    NodeTaken {
        node: String,
        host: String,
        last_seen: String,
    },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A failure the database reported, shown in its own words. Opaque, so that no database
/// library's type reaches the engine: an implementation wraps its own error in it.
#[derive(Debug)]
pub(crate) struct DbError(Box<dyn std::error::Error + Send + Sync>);

impl DbError {
    pub(crate) fn new(e: impl std::error::Error + Send + Sync + 'static) -> DbError {
        DbError(Box::new(e))
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

pub(crate) type Result<T> = std::result::Result<T, StoreError>;

pub(crate) use crate::audit::parse_ts;

/// Helpers for the unit tests of every part of the store.
#[cfg(test)]
pub(crate) mod test_util {
    use chrono::{DateTime, Utc};
    use rusqlite::Connection;

    pub(crate) fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    pub(crate) fn conn(s: &super::Sqlite) -> &Connection {
        &s.conn
    }

    /// The rows of `table` in the SQLite database in `state_dir`, read on a connection of
    /// its own: for tests outside the store that hold only a `dyn Store`.
    pub(crate) fn count_rows(state_dir: &std::path::Path, table: &str) -> i64 {
        Connection::open(state_dir.join(super::DB_FILE))
            .unwrap()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    /// Drop `table` from the SQLite database in `state_dir`: every later write to it fails.
    pub(crate) fn drop_table(state_dir: &std::path::Path, table: &str) {
        Connection::open(state_dir.join(super::DB_FILE))
            .unwrap()
            .execute_batch(&format!("DROP TABLE {table}"))
            .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_names_the_database_and_its_cause_in_the_stores_own_types() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::config::test_util::config(Default::default());
        cfg.state_dir = dir.path().to_path_buf();
        let path = dir.path().join(DB_FILE);
        std::fs::write(&path, "this is not sqlite, just text ".repeat(100)).unwrap();
        let err = open(&cfg).err().unwrap();
        let shown = err.to_string();
        let StoreError::Database {
            path: named,
            source,
        } = err
        else {
            panic!("{shown}");
        };
        assert_eq!(named, path);
        assert!(source.to_string().contains("not a database"), "{source}");
        assert_eq!(shown, format!("{}: {source}", path.display()));
    }

    #[test]
    fn nothing_is_opened_or_created_where_there_is_no_store_yet() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::config::test_util::config(Default::default());
        cfg.state_dir = dir.path().to_path_buf();
        assert!(open_existing(&cfg).unwrap().is_none());
        assert!(!dir.path().join(DB_FILE).exists());
        drop(open(&cfg).unwrap());
        assert!(open_existing(&cfg).unwrap().is_some());
    }

    fn names_in(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn reading_an_existing_store_leaves_no_file_behind_and_sees_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::config::test_util::config(Default::default());
        cfg.state_dir = dir.path().to_path_buf();
        let at = test_util::ts("2026-05-04T09:00:00Z");
        let mut store = open(&cfg).unwrap();
        store.start_run("r1", "once", at).unwrap();
        drop(store);
        assert_eq!(names_in(dir.path()), [DB_FILE]);
        let db = dir.path().join(DB_FILE);
        let before = (
            std::fs::read(&db).unwrap(),
            db.metadata().unwrap().modified().unwrap(),
        );

        let read = open_existing(&cfg).unwrap().unwrap();
        assert_eq!(read.last_start().unwrap(), Some(at));
        drop(read);
        assert_eq!(names_in(dir.path()), [DB_FILE], "a read left files behind");
        let after = (
            std::fs::read(&db).unwrap(),
            db.metadata().unwrap().modified().unwrap(),
        );
        assert!(before == after, "a read changed the database file");

        // While another connection has the database open, its WAL is read too.
        let mut writer = open(&cfg).unwrap();
        writer
            .start_run("r2", "once", at + chrono::Duration::hours(1))
            .unwrap();
        let read = open_existing(&cfg).unwrap().unwrap();
        assert_eq!(
            read.last_start().unwrap(),
            Some(at + chrono::Duration::hours(1))
        );
    }
}
