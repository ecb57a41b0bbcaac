//! What only a fleet shares (docs/fleet.md): claims of (task, slot), singleton leases, the
//! nodes. On one host the run lock already makes every run the only one, so SQLite wins
//! every claim and holds every lease without writing anything: single-host runs pay nothing
//! for this concern.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{Result, Sqlite};

/// What a node claims before it acts on a task (docs/fleet.md#exactly-once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// A key only one node can insert for the task: a calendar slot's time, `once` for a
    /// one-time task, a retry's time.
    Key(String),
    /// An interval: won when the task's last attempt is before this time (or it has none),
    /// and the attempt is set to now in the same statement.
    Every { before: DateTime<Utc> },
}

/// A node of the fleet, as `status` and `doctor` show it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NodeRow {
    pub name: String,
    pub host: String,
    pub version: String,
    /// Each HEARTBEAT file (relative to the config's directory) and its content's SHA-256.
    pub files: BTreeMap<String, String>,
    pub last_seen: DateTime<Utc>,
    /// Whether it last said it runs as a daemon.
    pub daemon: bool,
}

/// A singleton lease (`telegram`, `ntfy:<channel>`, `delivery`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LeaseRow {
    pub name: String,
    /// None when nobody holds it (released, or expired).
    pub holder: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A task run, with the node that ran it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecentRun {
    pub task_id: String,
    pub node: String,
    pub at: String,
    pub outcome: String,
}

pub(crate) trait Fleet {
    /// Claim the task for this node's run: true when this node won it and acts on it; a
    /// loser does nothing for the task.
    fn claim_task(
        &mut self,
        task_id: &str,
        claim: &Claim,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// Take or renew the lease `name` for the configured time, from the database's clock:
    /// true while this node holds it. A holder that cannot renew stops acting (it returns
    /// an error or false) before the lease ends.
    fn lease(&mut self, name: &str) -> Result<bool>;

    /// Whether this node still holds the lease `name` by its own clock: a holder asks
    /// before each act of a long job (each delivery), and stops when it no longer does.
    fn holds(&self, name: &str) -> bool;

    /// Give up every lease this node holds (`run --once` at exit).
    fn release_leases(&mut self) -> Result<()>;

    /// Every node that registered, by name.
    fn nodes(&self) -> Result<Vec<NodeRow>>;

    /// Every lease, by name.
    fn leases(&self) -> Result<Vec<LeaseRow>>;

    /// The latest task runs, newest first, with the node that ran each.
    fn recent_runs(&self, limit: i64) -> Result<Vec<RecentRun>>;

    /// `heartbeat fleet forget NODE`: free the name. True when it was registered.
    fn forget_node(&mut self, name: &str) -> Result<bool>;
}

impl Fleet for Sqlite {
    fn claim_task(&mut self, _: &str, _: &Claim, _: &str, _: DateTime<Utc>) -> Result<bool> {
        Ok(true)
    }

    fn lease(&mut self, _: &str) -> Result<bool> {
        Ok(true)
    }

    fn holds(&self, _: &str) -> bool {
        true
    }

    fn release_leases(&mut self) -> Result<()> {
        Ok(())
    }

    fn nodes(&self) -> Result<Vec<NodeRow>> {
        Ok(Vec::new())
    }

    fn leases(&self) -> Result<Vec<LeaseRow>> {
        Ok(Vec::new())
    }

    fn recent_runs(&self, _: i64) -> Result<Vec<RecentRun>> {
        Ok(Vec::new())
    }

    fn forget_node(&mut self, _: &str) -> Result<bool> {
        Ok(false)
    }
}
