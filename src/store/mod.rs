//! State in SQLite (`<state_dir>/heartbeat.db`): task history, approvals, runs.
//!
//! Invariants:
//! - The schema is migrated inside one IMMEDIATE transaction that reads `user_version`
//!   itself, so two processes opening a fresh database at once cannot both migrate.
//! - A task has at most one `pending` approval: a partial unique index enforces it, not
//!   only the code.
//! - All times are stored as RFC 3339 UTC strings with milliseconds (they sort as text).
//! - Approval rows hold the input already redacted: the input that runs is always re-read
//!   from the HEARTBEAT.md.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::audit::format_ts;

pub const DB_FILE: &str = "heartbeat.db";

/// How long a statement waits for another connection's lock before failing as busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema version this binary writes.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Append-only: a released migration is never edited, a change is a new entry.
const MIGRATIONS: [&str; 7] = [
    r#"
CREATE TABLE task_state (
    task_id TEXT PRIMARY KEY,
    last_attempt TEXT,
    last_success TEXT,
    last_outcome TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    reminded_at TEXT
);
CREATE TABLE approvals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN
        ('pending', 'approved', 'running', 'succeeded', 'failed', 'denied', 'expired', 'stale')),
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    section TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    reason TEXT,
    always INTEGER NOT NULL DEFAULT 0,
    run_id TEXT,
    finished_at TEXT
);
CREATE UNIQUE INDEX approvals_one_pending ON approvals(task_id) WHERE state = 'pending';
CREATE INDEX approvals_state ON approvals(state);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    queued INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    invalid INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_started ON runs(started_at);
CREATE TABLE task_runs (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    cost_usd REAL,
    approval_id INTEGER
);
CREATE INDEX task_runs_started ON task_runs(started_at);
"#,
    r#"
-- A task has at most one open approval: pending, approved (waiting to run) or running.
DROP INDEX approvals_one_pending;
CREATE UNIQUE INDEX approvals_one_open ON approvals(task_id)
    WHERE state IN ('pending', 'approved', 'running');
CREATE TABLE grants (
    task_id TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    file TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    approval_id INTEGER
);
"#,
    r#"
-- Every message goes here first; a row is deleted once Telegram accepted it.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    html TEXT NOT NULL,
    urgent INTEGER NOT NULL DEFAULT 0,
    -- Exempt from the 6 h dedupe and the daily cap (replies, tests).
    direct INTEGER NOT NULL DEFAULT 0,
    approvals TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
-- What was sent, for the 6 h dedupe and the daily cap.
CREATE TABLE sent (
    chat_id INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    counted INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX sent_chat_time ON sent(chat_id, sent_at);
-- Messages that carry approval buttons, to edit them when a button is pressed.
CREATE TABLE tg_messages (
    chat_id INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    html TEXT NOT NULL,
    approvals TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
-- Chats that wrote to the bot (`heartbeat telegram-chats`).
CREATE TABLE tg_chats (
    chat_id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    last_seen TEXT NOT NULL
);
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- At most one row: the current pause.
CREATE TABLE pause (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    since TEXT NOT NULL,
    until TEXT,
    reason TEXT,
    by TEXT NOT NULL
);
"#,
    r#"
-- Set when a task's failures in a row reached its limit; cleared by `heartbeat reset`.
ALTER TABLE task_state ADD COLUMN tripped_at TEXT;
CREATE INDEX task_runs_tool ON task_runs(tool, started_at);
"#,
    r#"
-- Each tool's latest start, for cooldowns: kept by record_task_run (a run of a thousand
-- tasks of one tool writes it once) instead of an index over all of task_runs.
CREATE TABLE tool_state (
    tool TEXT PRIMARY KEY NOT NULL,
    last_start TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO tool_state (tool, last_start)
    SELECT tool, MAX(started_at) FROM task_runs GROUP BY tool;
DROP INDEX task_runs_tool;
-- The day's spend reads only rows with a cost; a run of tools that report none (`@log`)
-- adds nothing to this index.
DROP INDEX task_runs_started;
CREATE INDEX task_runs_cost ON task_runs(started_at, cost_usd) WHERE cost_usd IS NOT NULL;
"#,
    r#"
-- The tasks of one batch (one transaction of in-process tools) that succeeded at no cost:
-- one row for all of them instead of a task_runs row each. A one-time task that succeeded
-- is done for good, so it needs no task_state row either.
CREATE TABLE task_batches (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    -- The one-time tasks among them, as a JSON array of task ids; NULL when there are none.
    done TEXT,
    -- Every one of them, as a JSON array of [task_id, tool, duration_ms] or, run on
    -- approval, [task_id, tool, duration_ms, approval_id].
    tasks TEXT NOT NULL
);
CREATE INDEX task_batches_done ON task_batches(id) WHERE done IS NOT NULL;
-- Every tool run, one row each, wherever it is kept.
CREATE VIEW task_history AS
    SELECT run_id, task_id, tool, started_at, finished_at, outcome, cost_usd, approval_id
    FROM task_runs
    UNION ALL
    SELECT b.run_id, json_extract(t.value, '$[0]'), json_extract(t.value, '$[1]'), b.started_at,
        strftime('%Y-%m-%dT%H:%M:%fZ', b.started_at,
            '+' || (json_extract(t.value, '$[2]') / 1000.0) || ' seconds'),
        'succeeded', NULL, json_extract(t.value, '$[3]')
    FROM task_batches AS b, json_each(b.tasks) AS t;
"#,
    r#"
-- The CHECK on approvals.state and the partial index of open approvals, with OR instead of
-- IN: SQLite builds an IN list's lookup table anew for every row an UPDATE changes (the
-- index's twice), which was most of the time that deciding a thousand approvals took. A
-- CHECK cannot be altered: the table is built again, its ids and AUTOINCREMENT's
-- high-water mark kept.
CREATE TABLE approvals_v7 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state = 'pending' OR state = 'approved' OR state = 'running'
        OR state = 'succeeded' OR state = 'failed' OR state = 'denied' OR state = 'expired'
        OR state = 'stale'),
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    section TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    reason TEXT,
    always INTEGER NOT NULL DEFAULT 0,
    run_id TEXT,
    finished_at TEXT
);
INSERT INTO approvals_v7 (id, task_id, state, file, line, section, tool, input, text,
        created_at, decided_at, decided_by, reason, always, run_id, finished_at)
    SELECT id, task_id, state, file, line, section, tool, input, text, created_at,
        decided_at, decided_by, reason, always, run_id, finished_at
    FROM approvals;
DELETE FROM sqlite_sequence WHERE name = 'approvals_v7';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'approvals_v7', seq FROM sqlite_sequence WHERE name = 'approvals';
DROP TABLE approvals;
ALTER TABLE approvals_v7 RENAME TO approvals;
CREATE INDEX approvals_state ON approvals(state);
CREATE UNIQUE INDEX approvals_one_open ON approvals(task_id)
    WHERE state = 'pending' OR state = 'approved' OR state = 'running';
"#,
];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", .path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "{}: written by a newer heartbeat (schema {found}, this version knows {SCHEMA_VERSION}); nothing was run",
        .path.display()
    )]
    TooNew { path: PathBuf, found: i64 },
    #[error("{}: {what}", .path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// What a run needs to know about stored state to plan.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub last_attempt: HashMap<String, DateTime<Utc>>,
    /// One-time reminders already given.
    pub reminded: HashSet<String>,
    /// Tasks that succeeded at least once (a one-time task never runs twice, even when its
    /// tick could not be written).
    pub succeeded: HashSet<String>,
    /// Task id → id of its open approval (pending, or approved and waiting to run).
    pub pending: HashMap<String, i64>,
    /// Task ids with an *always* grant: `ask` counts as `auto` for them.
    pub granted: HashSet<String>,
    /// A pause is in force (runs are skipped).
    pub paused: bool,
    /// Task id → failures in a row.
    pub failures: HashMap<String, u32>,
    /// Tasks tripped by the failure breaker.
    pub tripped: HashSet<String>,
    /// Tool → when a task of it last started (for cooldowns).
    pub tool_last_start: HashMap<String, DateTime<Utc>>,
    /// Spent since the start of the budget day (`snapshot`'s `day_start`).
    pub spent_today: f64,
    /// Task id → when its latest denial stops holding.
    pub denied_until: HashMap<String, DateTime<Utc>>,
}

/// One approval row, as `approvals --json` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRow {
    pub id: i64,
    pub task_id: String,
    pub state: String,
    pub tool: String,
    pub input: serde_json::Value,
    pub file: String,
    pub line: i64,
    pub section: String,
    pub text: String,
    pub created_at: String,
    pub decided_at: Option<String>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
}

/// A person's decision on a pending approval.
pub struct Decision {
    pub approve: bool,
    /// `cli:<user>` or `telegram:<chat id>`.
    pub by: String,
    pub reason: Option<String>,
    pub always: bool,
}

/// An *always* grant: this exact task (tool + input) runs without asking.
#[derive(Clone, Debug, PartialEq)]
pub struct GrantRow {
    pub task_id: String,
    pub tool: String,
    pub input: serde_json::Value,
    pub file: String,
    pub text: String,
    pub created_at: String,
    pub created_by: String,
    pub approval_id: Option<i64>,
}

/// A new approval to queue.
pub struct NewApproval<'a> {
    pub task_id: &'a str,
    pub file: &'a str,
    pub line: usize,
    pub section: &'a str,
    pub tool: &'a str,
    /// Already redacted.
    pub input: &'a serde_json::Value,
    pub text: &'a str,
}

/// A finished tool run, for history and the day's spend.
pub struct TaskRunRecord<'a> {
    pub run_id: &'a str,
    pub task_id: &'a str,
    /// From `## One-time`: once it succeeded, it is done for good.
    pub one_time: bool,
    pub tool: &'a str,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub succeeded: bool,
    pub cost_usd: Option<f64>,
    pub approval_id: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub run_id: String,
    pub started_at: String,
    pub succeeded: i64,
    pub failed: i64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct RunCounts {
    pub succeeded: usize,
    pub failed: usize,
    pub queued: usize,
    pub skipped: usize,
    pub invalid: usize,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// A batch transaction is open (see [`Store::batch`]).
    batching: bool,
    /// Tool → the start this batch's transaction already wrote to `tool_state` (emptied when
    /// the batch ends: only that transaction may skip rewriting it).
    tool_starts: HashMap<String, DateTime<Utc>>,
    /// Approvals claimed (and perhaps finished) inside the open batch, not yet written (see
    /// [`Store::claim`]). A cell: reads through `&self` write them first.
    claims: RefCell<Claims>,
    /// The batch's cost-less successes, not yet written (see [`Store::record_task_run`]).
    successes: RefCell<Successes>,
    /// Tasks with failures in a row or a trip, as of the last snapshot (or the first need,
    /// see [`Store::is_failing`]) and what this store recorded since.
    failing: RefCell<Option<HashSet<String>>>,
    /// The audit log, and the lines of the open batch waiting to be written to it (see
    /// [`Store::hold_line`]).
    audit: Option<(File, PathBuf)>,
    held: Vec<u8>,
}

/// Held audit lines are written once this many bytes wait (still whole lines, still before
/// the commit).
const HOLD_LIMIT: usize = 256 * 1024;

/// What a batch's claims and finishes will write, kept until the batch commits or
/// something reads approvals: then a few statements over all of them, not two per approval.
#[derive(Default)]
struct Claims {
    /// In the order claimed.
    rows: Vec<Claimed>,
    /// Approval id → its index in `rows`.
    index: HashMap<i64, usize>,
}

struct Claimed {
    id: i64,
    run_id: String,
    /// Once finished: the state (succeeded or failed), `finished_at` and the reason.
    end: Option<(&'static str, String, Option<String>)>,
}

/// A `task_batches` row being gathered: successes of one run that started at one time.
#[derive(Default)]
struct Successes {
    run_id: String,
    started_at: Option<DateTime<Utc>>,
    /// The JSON arrays so far, each without its closing bracket; empty when nothing is in it.
    tasks: Vec<u8>,
    done: Vec<u8>,
}

impl Successes {
    fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Whether `r` belongs in this row (or the row is empty and can take it).
    fn fits(&self, r: &TaskRunRecord) -> bool {
        self.is_empty() || (self.started_at == Some(r.started_at) && self.run_id == r.run_id)
    }

    fn push(&mut self, r: &TaskRunRecord, done: bool) {
        if self.is_empty() {
            self.run_id.clear();
            self.run_id.push_str(r.run_id);
            self.started_at = Some(r.started_at);
        }
        let tasks = &mut self.tasks;
        tasks.push(if tasks.is_empty() { b'[' } else { b',' });
        tasks.push(b'[');
        crate::json::write_str(tasks, r.task_id);
        tasks.push(b',');
        crate::json::write_str(tasks, r.tool);
        tasks.push(b',');
        let ms = (r.finished_at - r.started_at).num_milliseconds().max(0);
        // Writing into a Vec cannot fail.
        let _ = match r.approval_id {
            Some(id) => write!(tasks, "{ms},{id}]"),
            None => write!(tasks, "{ms}]"),
        };
        if done {
            self.done
                .push(if self.done.is_empty() { b'[' } else { b',' });
            crate::json::write_str(&mut self.done, r.task_id);
        }
    }

    /// The row's columns (run_id, started_at, done, tasks), leaving this empty.
    fn take(&mut self) -> (String, String, Option<String>, String) {
        let close = |mut v: Vec<u8>| {
            v.push(b']');
            // Built from whole UTF-8 strings and ASCII.
            String::from_utf8(v).unwrap_or_default()
        };
        let started = self.started_at.map(format_ts).unwrap_or_default();
        let done = (!self.done.is_empty()).then(|| close(std::mem::take(&mut self.done)));
        let tasks = close(std::mem::take(&mut self.tasks));
        (std::mem::take(&mut self.run_id), started, done, tasks)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // A batch holds finished work: keep it (an error path must not lose records).
        let _ = self.flush();
    }
}

impl Store {
    /// A store on an open connection: no batch, no audit log attached.
    fn with_conn(conn: Connection, path: PathBuf) -> Store {
        Store {
            conn,
            path,
            batching: false,
            tool_starts: HashMap::new(),
            claims: RefCell::default(),
            successes: RefCell::default(),
            failing: RefCell::new(None),
            audit: None,
            held: Vec::new(),
        }
    }

    /// Open (creating if needed) the database in `state_dir`, migrated to the current schema.
    pub fn open(state_dir: &Path) -> Result<Store> {
        let path = state_dir.join(DB_FILE);
        // Created private; SQLite gives its -wal and -shm files the same mode.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        let conn = Connection::open(&path).map_err(|e| sql_err(&path, e))?;
        let mut store = Store::with_conn(conn, path);
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Open an existing database without creating anything; None when there is no database
    /// yet. For read-only commands (`status`, `approvals`, `check`, dry runs). A database of
    /// an earlier schema is migrated (read-only, it would show nothing).
    pub fn open_existing(state_dir: &Path) -> Result<Option<Store>> {
        let path = state_dir.join(DB_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_err(&path, e))?;
        let store = Store::with_conn(conn, path);
        store
            .conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_err(&store.path, e))?;
        let version = store.user_version()?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: store.path.clone(),
                found: version,
            });
        }
        if version == 0 {
            // A database that was never migrated holds nothing to show.
            return Ok(None);
        }
        if version < SCHEMA_VERSION {
            // Written by an earlier heartbeat: brought up to date first, as the next run
            // would, so that what it holds shows right after an upgrade.
            drop(store);
            return Store::open(state_dir).map(Some);
        }
        Ok(Some(store))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn configure(&mut self) -> Result<()> {
        let path = self.path.clone();
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_err(&path, e))?;
        // journal_mode returns a row; it also fails here first when the file is not a database.
        // Switching a new database to WAL reads its header under a SHARED lock, then upgrades
        // to write it. Of several connections doing that at once, all but one fail that
        // upgrade with SQLITE_BUSY without calling the busy handler (waiting could deadlock
        // them); once the winner has switched, the same statement only reads and succeeds.
        retry_busy(|| {
            self.conn
                .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        })
        .map_err(|e| sql_err(&path, e))?;
        // Temporary data (a statement journal, the list of a multi-row UPDATE) stays in
        // memory: it is small, and a spill to a file in /var/tmp costs a file and its I/O.
        self.conn
            .execute_batch(
                "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
                 PRAGMA temp_store = MEMORY;",
            )
            .map_err(|e| sql_err(&path, e))
    }

    fn user_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| sql_err(&self.path, e))
    }

    fn migrate(&mut self) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_err(&path, e))?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| sql_err(&path, e))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path,
                found: version,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(|e| sql_err(&path, e))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(|e| sql_err(&path, e))?;
        }
        tx.commit().map_err(|e| sql_err(&path, e))
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        sql_err(&self.path, e)
    }

    /// Everything `plan` needs, read in one go. `day_start`: local midnight, for the budget.
    pub fn snapshot(
        &self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
        day_start: DateTime<Utc>,
    ) -> Result<Snapshot> {
        self.settle()?;
        let mut snap = Snapshot {
            spent_today: self.spent_since(day_start)?,
            ..Snapshot::default()
        };
        let mut stmt = self
            .conn
            .prepare("SELECT tool, last_start FROM tool_state WHERE last_start >= ?1")
            .map_err(|e| self.err(e))?;
        // Cooldowns are hours, not weeks: a week back is plenty.
        let week = format_ts(now - chrono::Duration::days(7));
        let rows = stmt
            .query_map([week], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (tool, at) = row.map_err(|e| self.err(e))?;
            if let Some(t) = parse_ts(&at) {
                snap.tool_last_start.insert(tool, t);
            }
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, last_attempt, reminded_at, last_success, consecutive_failures,
                 tripped_at FROM task_state",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, u32>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (id, attempt, reminded, success, failures, tripped) =
                row.map_err(|e| self.err(e))?;
            if failures > 0 {
                snap.failures.insert(id.clone(), failures);
            }
            if tripped.is_some() {
                snap.tripped.insert(id.clone());
            }
            if success.is_some() {
                snap.succeeded.insert(id.clone());
            }
            if let Some(t) = attempt.as_deref().and_then(parse_ts) {
                snap.last_attempt.insert(id.clone(), t);
            }
            if reminded.is_some() {
                snap.reminded.insert(id);
            }
        }
        let failing = snap.failures.keys().chain(&snap.tripped).cloned().collect();
        *self.failing.borrow_mut() = Some(failing);
        for ids in self.done_lists()? {
            snap.succeeded.extend(ids);
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, id FROM approvals WHERE state IN ('pending', 'approved', 'running')",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (task, id) = row.map_err(|e| self.err(e))?;
            snap.pending.insert(task, id);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT task_id FROM grants")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        for row in rows {
            snap.granted.insert(row.map_err(|e| self.err(e))?);
        }
        snap.paused = self.pause_row()?.is_some_and(|p| p.in_force(now));
        // A denial holds for approval_ttl after it was made.
        let ttl = chrono::Duration::from_std(approval_ttl).unwrap_or(chrono::Duration::MAX);
        let since = now
            .checked_sub_signed(ttl)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, MAX(decided_at) FROM approvals
                 WHERE state = 'denied' AND decided_at > ?1 GROUP BY task_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([format_ts(since)], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (task, decided) = row.map_err(|e| self.err(e))?;
            if let Some(t) = parse_ts(&decided) {
                snap.denied_until
                    .insert(task, t.checked_add_signed(ttl).unwrap_or(t));
            }
        }
        Ok(snap)
    }

    /// Pending approvals created at or before `now - ttl` become `expired`; returns them.
    pub fn expire_pending(
        &mut self,
        now: DateTime<Utc>,
        approval_ttl: Duration,
    ) -> Result<Vec<ApprovalRow>> {
        let ttl = chrono::Duration::from_std(approval_ttl).unwrap_or(chrono::Duration::MAX);
        let cutoff = now
            .checked_sub_signed(ttl)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_err(&path, e))?;
        let (now, cutoff) = (format_ts(now), format_ts(cutoff));
        // Read, then change what was read: the immediate transaction holds the write lock,
        // so nothing else changes these rows in between (and no RETURNING temp table).
        let mut expired = tx
            .prepare_cached(EXPIRABLE)
            .and_then(|mut st| {
                st.query_map([&cutoff], approval_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| sql_err(&path, e))?;
        if !expired.is_empty() {
            tx.prepare_cached(
                "UPDATE approvals SET state = 'expired', decided_at = ?1, reason = 'ttl'
                 WHERE state = 'pending' AND created_at <= ?2",
            )
            .and_then(|mut st| st.execute([&now, &cutoff]))
            .map_err(|e| sql_err(&path, e))?;
            for row in &mut expired {
                row.state = "expired".into();
                row.decided_at = Some(now.clone());
                row.reason = Some("ttl".into());
            }
        }
        tx.commit().map_err(|e| sql_err(&path, e))?;
        Ok(expired)
    }

    /// Start collecting bookkeeping in one transaction (a run's in-process tools: a
    /// thousand `@log` tasks cost one commit, not a thousand). Until [`Store::flush`], a
    /// crash loses what the batch holds; callers flush before any tool with effects outside
    /// heartbeat, and every approval change flushes first.
    pub fn batch(&mut self) -> Result<()> {
        if !self.batching {
            self.conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(|e| self.err(e))?;
            self.batching = true;
            self.tool_starts.clear();
        }
        Ok(())
    }

    /// Commit the batch, if one is open (with the approval changes it holds).
    pub fn flush(&mut self) -> Result<()> {
        if self.batching {
            self.batching = false;
            self.tool_starts.clear();
            // The claims and outcomes of approved work go with the rest of the batch, or
            // nothing does: records committed without the claims would let an approval run
            // again. Rolled back, nothing happened: its lines are dropped too.
            if let Err(e) = self.settle() {
                self.held.clear();
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(e);
            }
            // The batch's audit lines first: what is committed is in the log. Without them
            // nothing is committed (the work runs again, and is logged then).
            if let Err(e) = self.write_held() {
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(e);
            }
            self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Write the audit lines of batches to `file` (the audit log, opened for appending):
    /// see [`Store::hold_line`].
    pub fn attach_audit(&mut self, file: File, path: &Path) {
        self.audit = Some((file, path.to_path_buf()));
    }

    /// Inside a batch, with an audit log attached: keep `line` (whole, with its newline) to
    /// be written with the batch's other lines, in one write, just before the batch
    /// commits. A crash before the commit loses lines and records together, so the log
    /// never shows work SQLite does not know. False: no batch; the caller writes the line.
    pub fn hold_line(&mut self, line: &[u8]) -> Result<bool> {
        let Some((file, _)) = self.audit.as_mut() else {
            return Ok(false);
        };
        if !self.batching {
            return Ok(false);
        }
        crate::audit::torn_point(file, &self.held, line);
        if self.held.capacity() == 0 {
            // Room for what is held before a write: one allocation, not a dozen doublings
            // each copying what came before.
            self.held.reserve(HOLD_LIMIT + line.len());
        }
        self.held.extend_from_slice(line);
        if self.held.len() >= HOLD_LIMIT {
            self.write_held()?;
        }
        Ok(true)
    }

    fn write_held(&mut self) -> Result<()> {
        let (Some((file, path)), false) = (self.audit.as_mut(), self.held.is_empty()) else {
            return Ok(());
        };
        let written = file.write_all(&self.held);
        self.held.clear();
        written.map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })
    }

    /// Write what the batch holds back: its gathered successes (see
    /// [`Store::record_task_run`]), and its claims and finishes (see [`Store::claim`]): one
    /// UPDATE per kind of change (state, run, time, reason), each over all its approvals.
    /// Each changes only rows still `approved`, which they are while the batch's transaction
    /// holds the write lock.
    fn settle(&self) -> Result<()> {
        let claims = std::mem::take(&mut *self.claims.borrow_mut());
        self.write_successes()?;
        if claims.rows.is_empty() {
            return Ok(());
        }
        type Key<'a> = (&'a str, Option<(&'a str, &'a str, Option<&'a str>)>);
        let mut groups: Vec<(Key, Vec<i64>)> = Vec::new();
        let mut group_of: HashMap<Key, usize> = HashMap::new();
        for c in &claims.rows {
            let key: Key = (
                &c.run_id,
                c.end
                    .as_ref()
                    .map(|(state, at, reason)| (*state, at.as_str(), reason.as_deref())),
            );
            let i = *group_of.entry(key).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(c.id);
        }
        for ((run_id, end), ids) in groups {
            let list = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
            match end {
                // Claimed, still running: what a claim outside a batch writes.
                None => self
                    .conn
                    .prepare_cached(
                        "UPDATE approvals SET state = 'running', run_id = ?2
                         WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'approved'",
                    )
                    .and_then(|mut st| st.execute(params![list, run_id])),
                // Claimed and finished: what the claim and then `finish_approval` write.
                Some((state, at, reason)) => self
                    .conn
                    .prepare_cached(
                        "UPDATE approvals SET state = ?2, run_id = ?3, finished_at = ?4,
                         reason = COALESCE(?5, reason)
                         WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'approved'",
                    )
                    .and_then(|mut st| st.execute(params![list, state, run_id, at, reason])),
            }
            .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn durable<T>(&mut self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        // Never inside a batch: this change is committed and synced on its own.
        self.flush()?;
        self.conn
            .execute_batch("PRAGMA synchronous = FULL")
            .map_err(|e| self.err(e))?;
        let result = f(&mut self.conn).map_err(|e| sql_err(&self.path, e));
        self.conn
            .execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(|e| self.err(e))?;
        result
    }

    /// Queue a pending approval. None when the task already has an open one (never a second).
    pub fn queue_approval(&mut self, a: &NewApproval, now: DateTime<Utc>) -> Result<Option<i64>> {
        self.durable(|conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text, created_at)
                     VALUES (?1, 'pending', ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT DO NOTHING",
                )?
                .execute(params![
                    a.task_id,
                    a.file,
                    a.line as i64,
                    a.section,
                    a.tool,
                    a.input.to_string(),
                    a.text,
                    format_ts(now)
                ])?;
            // The row this statement inserted (none on a conflict): no RETURNING temp table.
            Ok((inserted == 1).then(|| conn.last_insert_rowid()))
        })
    }

    pub fn approval(&self, id: i64) -> Result<Option<ApprovalRow>> {
        self.settle()?;
        self.conn
            .prepare_cached(APPROVAL_BY_ID)
            .and_then(|mut st| st.query_row([id], approval_row).optional())
            .map_err(|e| self.err(e))
    }

    /// Decide many approvals in one durable transaction (`approve --all`): the ids that
    /// were still pending and are now decided.
    pub fn decide_many(
        &mut self,
        ids: &[i64],
        d: &Decision,
        now: DateTime<Utc>,
    ) -> Result<Vec<i64>> {
        let state = if d.approve { "approved" } else { "denied" };
        let ts = format_ts(now);
        // The ids as one JSON array, for `json_each`: one statement for all of them, so
        // SQLite sets up the UPDATE once, not once per approval.
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Which are still pending, read under the write lock this transaction holds:
            // exactly the rows the UPDATE below changes.
            let pending: HashSet<i64> = tx
                .prepare_cached(
                    "SELECT id FROM approvals
                     WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'",
                )?
                .query_map([&list], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            if !pending.is_empty() {
                tx.prepare_cached(
                    "UPDATE approvals SET state = ?2, decided_at = ?3, decided_by = ?4,
                     reason = ?5, always = ?6
                     WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'",
                )?
                .execute(params![list, state, ts, d.by, d.reason, d.always])?;
            }
            tx.commit()?;
            // In the order given, each once.
            let mut seen = HashSet::with_capacity(pending.len());
            Ok(ids
                .iter()
                .copied()
                .filter(|id| pending.contains(id) && seen.insert(*id))
                .collect())
        })
    }

    /// `pending → approved` or `pending → denied`. False when the approval was not pending
    /// any more (someone else decided first).
    pub fn decide(&mut self, id: i64, d: &Decision, now: DateTime<Utc>) -> Result<bool> {
        let state = if d.approve { "approved" } else { "denied" };
        self.durable(|conn| {
            conn.prepare_cached(
                "UPDATE approvals SET state = ?2, decided_at = ?3, decided_by = ?4, reason = ?5,
                 always = ?6 WHERE id = ?1 AND state = 'pending'",
            )?
            .execute(params![id, state, format_ts(now), d.by, d.reason, d.always])
        })
        .map(|n| n == 1)
    }

    /// `approved → running`, as one statement in one immediate transaction: of several
    /// processes claiming the same approval, exactly one gets true.
    ///
    /// Inside a batch (an in-process tool) the batch's transaction already holds the write
    /// lock, which gives the same exclusivity: no other process can claim, decide or change
    /// the row until it commits, and nothing it wrote is visible before. So the claim only
    /// checks that the row is `approved` (and not claimed here already) and remembers it;
    /// it and the approval's finish are written together with the batch's other claims
    /// before the batch commits (or before anything here reads approvals), each as an
    /// UPDATE of rows still `approved`. What is committed is what claiming and finishing
    /// one by one would have committed; a crash before the commit loses the batch either
    /// way.
    pub fn claim(&mut self, id: i64, run_id: &str) -> Result<bool> {
        const CLAIM: &str = "UPDATE approvals SET state = 'running', run_id = ?2
                             WHERE id = ?1 AND state = 'approved'";
        // Only while the batch's transaction is open (an I/O error can end it early).
        if self.batching && !self.conn.is_autocommit() {
            let mut claims = self.claims.borrow_mut();
            if claims.index.contains_key(&id) {
                return Ok(false);
            }
            let approved = self
                .conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM approvals WHERE id = ?1 AND state = 'approved')",
                )
                .and_then(|mut st| st.query_row([id], |r| r.get::<_, bool>(0)))
                .map_err(|e| sql_err(&self.path, e))?;
            if approved {
                let i = claims.rows.len();
                claims.rows.push(Claimed {
                    id,
                    run_id: run_id.to_string(),
                    end: None,
                });
                claims.index.insert(id, i);
            }
            return Ok(approved);
        }
        if self.batching {
            return self
                .conn
                .prepare_cached(CLAIM)
                .and_then(|mut st| st.execute(params![id, run_id]))
                .map(|n| n == 1)
                .map_err(|e| self.err(e));
        }
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // The count of changed rows says whether this UPDATE claimed it (no RETURNING).
            let claimed = tx.prepare_cached(CLAIM)?.execute(params![id, run_id])? == 1;
            tx.commit()?;
            Ok(claimed)
        })
    }

    /// `running → succeeded | failed`.
    pub fn finish_approval(
        &mut self,
        id: i64,
        succeeded: bool,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let state = if succeeded { "succeeded" } else { "failed" };
        if self.batching {
            // Claimed in this batch: written with the claim (see `claim`).
            let claims = &mut *self.claims.borrow_mut();
            if let Some(&i) = claims.index.get(&id) {
                let c = &mut claims.rows[i];
                if c.end.is_none() {
                    c.end = Some((state, format_ts(now), reason.map(str::to_string)));
                }
                return Ok(());
            }
        }
        let sql = "UPDATE approvals SET state = ?2, finished_at = ?3,
                 reason = COALESCE(?4, reason) WHERE id = ?1 AND state = 'running'";
        let args = params![id, state, format_ts(now), reason];
        if self.batching {
            return self
                .conn
                .prepare_cached(sql)
                .and_then(|mut st| st.execute(args))
                .map(drop)
                .map_err(|e| self.err(e));
        }
        self.durable(|conn| conn.prepare_cached(sql)?.execute(args))
            .map(drop)
    }

    /// `approved → stale`: the task changed or vanished before it could run.
    pub fn mark_stale(&mut self, id: i64, reason: &str, now: DateTime<Utc>) -> Result<bool> {
        self.durable(|conn| {
            conn.prepare_cached(
                "UPDATE approvals SET state = 'stale', finished_at = ?2, reason = ?3
                 WHERE id = ?1 AND state = 'approved'",
            )?
            .execute(params![id, format_ts(now), reason])
        })
        .map(|n| n == 1)
    }

    /// Approvals left `running` by a process that died. Only call while holding the run
    /// lock: then no live process is running any of them. They become `failed` with reason
    /// `interrupted` and are never re-run silently.
    pub fn interrupt_running(&mut self, now: DateTime<Utc>) -> Result<Vec<ApprovalRow>> {
        let now = format_ts(now);
        self.durable(|conn| {
            // Read, then change what was read, in one immediate transaction (no RETURNING
            // temp table); most runs find nothing and write nothing.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut rows = tx
                .prepare_cached(APPROVALS_RUNNING)?
                .query_map([], approval_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            if !rows.is_empty() {
                tx.prepare_cached(
                    "UPDATE approvals SET state = 'failed', finished_at = ?1,
                     reason = 'interrupted' WHERE state = 'running'",
                )?
                .execute([&now])?;
                for row in &mut rows {
                    row.state = "failed".into();
                    row.reason = Some("interrupted".into());
                }
            }
            tx.commit()?;
            Ok(rows)
        })
    }

    /// Record an *always* grant for a task id (replacing an older one).
    pub fn add_grant(&mut self, g: &GrantRow) -> Result<()> {
        self.add_grants(std::slice::from_ref(g))
    }

    /// Record several grants in one durable transaction (`approve --all --always`: one
    /// sync, not one per task).
    pub fn add_grants(&mut self, grants: &[GrantRow]) -> Result<()> {
        if grants.is_empty() {
            return Ok(());
        }
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO grants (task_id, tool, input, file, text, created_at, created_by, approval_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT(task_id) DO UPDATE SET tool = excluded.tool, input = excluded.input,
                        file = excluded.file, text = excluded.text, created_at = excluded.created_at,
                        created_by = excluded.created_by, approval_id = excluded.approval_id",
                )?;
                for g in grants {
                    st.execute(params![
                        g.task_id,
                        g.tool,
                        g.input.to_string(),
                        g.file,
                        g.text,
                        g.created_at,
                        g.created_by,
                        g.approval_id
                    ])?;
                }
            }
            tx.commit()
        })
    }

    pub fn grants(&self) -> Result<Vec<GrantRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, tool, input, file, text, created_at, created_by, approval_id
                 FROM grants ORDER BY created_at, task_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let input: String = r.get(2)?;
                Ok(GrantRow {
                    task_id: r.get(0)?,
                    tool: r.get(1)?,
                    input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
                    file: r.get(3)?,
                    text: r.get(4)?,
                    created_at: r.get(5)?,
                    created_by: r.get(6)?,
                    approval_id: r.get(7)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// Remove a grant; false when there was none.
    pub fn revoke(&mut self, task_id: &str) -> Result<bool> {
        self.durable(|conn| conn.execute("DELETE FROM grants WHERE task_id = ?1", [task_id]))
            .map(|n| n == 1)
    }

    /// Remember that a task was attempted (run, queued or reminded) at `now`.
    pub fn record_attempt(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO task_state (task_id, last_attempt) VALUES (?1, ?2)
                 ON CONFLICT(task_id) DO UPDATE SET last_attempt = excluded.last_attempt",
            )
            .and_then(|mut st| st.execute(params![task_id, format_ts(now)]))
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Remember a one-time reminder as given.
    pub fn record_reminded(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        let ts = format_ts(now);
        self.conn
            .execute(
                "INSERT INTO task_state (task_id, last_attempt, reminded_at) VALUES (?1, ?2, ?2)
                 ON CONFLICT(task_id) DO UPDATE SET last_attempt = ?2, reminded_at = ?2",
                params![task_id, ts],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Record a finished tool run: history, the task's outcome and failure streak. Returns
    /// the task's failures in a row after this run.
    ///
    /// Inside a batch, a success at no cost goes into the batch's one `task_batches` row
    /// (written before the batch commits, or before anything reads), not a `task_runs` row
    /// of its own. A one-time task among them with no failures to clear gets no
    /// `task_state` row either: its id in that row marks it done.
    pub fn record_task_run(&mut self, r: &TaskRunRecord) -> Result<u32> {
        let err = |e| sql_err(&self.path, e);
        // Inside a batch the batch's transaction holds these statements; outside, a
        // transaction of their own. An I/O error can end a batch's transaction early: then
        // each record is written on its own, as outside.
        let in_batch = self.batching && !self.conn.is_autocommit();
        let tx = if self.batching {
            None
        } else {
            Some(self.conn.unchecked_transaction().map_err(err)?)
        };
        // Formatted where written: a gathered one-time success writes no time of its own.
        let started = || format_ts(r.started_at);
        let gathered = in_batch && r.succeeded && r.cost_usd.is_none();
        let done = gathered && r.one_time && !self.is_failing(r.task_id)?;
        if gathered {
            if !self.successes.borrow().fits(r) {
                self.write_successes()?;
            }
            self.successes.get_mut().push(r, done);
        } else {
            // Cached statements: a run of a thousand tasks parses this SQL once.
            self.conn
                .prepare_cached(
                    "INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at,
                     outcome, cost_usd, approval_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        r.run_id,
                        r.task_id,
                        r.tool,
                        started(),
                        format_ts(r.finished_at),
                        if r.succeeded { "succeeded" } else { "failed" },
                        r.cost_usd,
                        r.approval_id
                    ])
                })
                .map_err(err)?;
        }
        // A batch's tasks of one tool mostly start at the same `now`: write it once, while
        // the batch's transaction is open.
        let written = in_batch
            && self
                .tool_starts
                .get(r.tool)
                .is_some_and(|&t| t >= r.started_at);
        if !written {
            self.conn
                .prepare_cached(
                    "INSERT INTO tool_state (tool, last_start) VALUES (?1, ?2)
                     ON CONFLICT(tool) DO UPDATE SET last_start = excluded.last_start
                        WHERE excluded.last_start > tool_state.last_start",
                )
                .and_then(|mut st| st.execute(params![r.tool, started()]))
                .map_err(err)?;
            if self.batching {
                self.tool_starts.insert(r.tool.to_string(), r.started_at);
            }
        }
        let failures = if done {
            0
        } else if r.succeeded {
            // The streak is over: nothing to read back. (RETURNING costs a temporary table
            // per execution, about a third of this method's time.)
            self.conn
                .prepare_cached(
                    "INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome,
                     consecutive_failures) VALUES (?1, ?2, ?3, 'succeeded', 0)
                     ON CONFLICT(task_id) DO UPDATE SET last_attempt = excluded.last_attempt,
                        last_success = excluded.last_success, last_outcome = 'succeeded',
                        consecutive_failures = 0",
                )
                .and_then(|mut st| {
                    st.execute(params![r.task_id, started(), format_ts(r.finished_at)])
                })
                .map_err(err)?;
            0
        } else {
            if let Some(failing) = self.failing.get_mut() {
                failing.insert(r.task_id.to_string());
            }
            self.conn
                .prepare_cached(
                    "INSERT INTO task_state (task_id, last_attempt, last_outcome,
                     consecutive_failures) VALUES (?1, ?2, 'failed', 1)
                     ON CONFLICT(task_id) DO UPDATE SET last_attempt = excluded.last_attempt,
                        last_outcome = 'failed',
                        consecutive_failures = task_state.consecutive_failures + 1
                     RETURNING consecutive_failures",
                )
                .and_then(|mut st| st.query_row(params![r.task_id, started()], |row| row.get(0)))
                .map_err(err)?
        };
        crate::fault::point("sqlite_commit");
        if let Some(tx) = tx {
            tx.commit().map_err(err)?;
        }
        Ok(failures)
    }

    /// Whether the task has failures in a row or a trip. Read from `task_state` when no
    /// snapshot said it yet (`approve` runs without one); inside a batch that read is under
    /// the batch's write lock.
    fn is_failing(&self, task_id: &str) -> Result<bool> {
        if self.failing.borrow().is_none() {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT task_id FROM task_state
                     WHERE consecutive_failures > 0 OR tripped_at IS NOT NULL",
                )
                .map_err(|e| self.err(e))?;
            let ids = stmt
                .query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<HashSet<String>>>())
                .map_err(|e| self.err(e))?;
            *self.failing.borrow_mut() = Some(ids);
        }
        Ok(self
            .failing
            .borrow()
            .as_ref()
            .is_some_and(|f| f.contains(task_id)))
    }

    /// Write the gathered successes as one `task_batches` row (see
    /// [`Store::record_task_run`]).
    fn write_successes(&self) -> Result<()> {
        let mut successes = self.successes.borrow_mut();
        if successes.is_empty() {
            return Ok(());
        }
        let (run_id, started, done, tasks) = successes.take();
        self.conn
            .prepare_cached(
                "INSERT INTO task_batches (run_id, started_at, done, tasks) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| st.execute(params![run_id, started, done, tasks]))
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The `done` lists of `task_batches`: one-time tasks that succeeded there.
    fn done_lists(&self) -> Result<Vec<Vec<String>>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, done FROM task_batches WHERE done IS NOT NULL")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        let mut lists = Vec::new();
        for row in rows {
            let (id, done) = row.map_err(|e| self.err(e))?;
            let ids = serde_json::from_str(&done).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                what: format!("task_batches row {id}: done is not a list of task ids ({e})"),
            })?;
            lists.push(ids);
        }
        Ok(lists)
    }

    /// Mark a task tripped by the failure breaker.
    pub fn trip(&mut self, task_id: &str, now: DateTime<Utc>) -> Result<()> {
        self.durable(|conn| {
            conn.execute(
                "UPDATE task_state SET tripped_at = ?2 WHERE task_id = ?1",
                params![task_id, format_ts(now)],
            )
        })
        .map(drop)
    }

    /// Clear a task's failure count and trip. None when heartbeat knows nothing of the
    /// task; else the failures in a row it had and whether it was tripped.
    pub fn reset(&mut self, task_id: &str) -> Result<Option<(u32, bool)>> {
        let before = self
            .conn
            .query_row(
                "SELECT consecutive_failures, tripped_at IS NOT NULL FROM task_state
                 WHERE task_id = ?1",
                [task_id],
                |r| Ok((r.get::<_, u32>(0)?, r.get::<_, bool>(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        if before.is_some() {
            self.durable(|conn| {
                conn.execute(
                    "UPDATE task_state SET consecutive_failures = 0, tripped_at = NULL
                     WHERE task_id = ?1",
                    [task_id],
                )
            })?;
            return Ok(before);
        }
        // A one-time task done in a batch has no task_state row, and nothing to clear.
        let done = self.done_lists()?.iter().flatten().any(|id| id == task_id);
        Ok(done.then_some((0, false)))
    }

    /// Tasks tripped by the failure breaker.
    pub fn tripped(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT task_id FROM task_state WHERE tripped_at IS NOT NULL ORDER BY task_id")
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    pub fn start_run(&mut self, run_id: &str, mode: &str, now: DateTime<Utc>) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO runs (run_id, mode, started_at) VALUES (?1, ?2, ?3)",
                params![run_id, mode, format_ts(now)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    pub fn finish_run(&mut self, run_id: &str, now: DateTime<Utc>, c: RunCounts) -> Result<()> {
        self.conn
            .execute(
                "UPDATE runs SET finished_at = ?2, succeeded = ?3, failed = ?4, queued = ?5,
                 skipped = ?6, invalid = ?7 WHERE run_id = ?1",
                params![
                    run_id,
                    format_ts(now),
                    c.succeeded as i64,
                    c.failed as i64,
                    c.queued as i64,
                    c.skipped as i64,
                    c.invalid as i64
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The most recent run that finished.
    pub fn last_run(&self) -> Result<Option<RunSummary>> {
        self.conn
            .query_row(
                "SELECT run_id, started_at, succeeded, failed FROM runs
                 WHERE finished_at IS NOT NULL ORDER BY started_at DESC, rowid DESC LIMIT 1",
                [],
                |r| {
                    Ok(RunSummary {
                        run_id: r.get(0)?,
                        started_at: r.get(1)?,
                        succeeded: r.get(2)?,
                        failed: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Sum of reported costs of tool runs started at or after `since`.
    pub fn spent_since(&self, since: DateTime<Utc>) -> Result<f64> {
        self.conn
            .query_row(SPENT_SINCE, [format_ts(since)], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// Whether approved approvals wait to run, or a `running` one needs recovering: such
    /// work is done even outside active hours.
    pub fn has_approved_work(&self) -> Result<bool> {
        self.settle()?;
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM approvals WHERE state IN ('approved', 'running'))",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    pub fn count_pending(&self) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM approvals WHERE state = 'pending'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Approvals in a state (None = all), oldest first.
    pub fn approvals(&self, state: Option<&str>) -> Result<Vec<ApprovalRow>> {
        self.settle()?;
        // Of one state: through the state index, not a scan of every approval ever made.
        let sql = match state {
            Some(_) => APPROVALS_IN_STATE,
            None => APPROVALS_ALL,
        };
        self.conn
            .prepare_cached(sql)
            .and_then(|mut st| {
                st.query_map(rusqlite::params_from_iter(state), approval_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.err(e))
    }
}

/// A message waiting in the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub chat_id: i64,
    pub kind: String,
    pub html: String,
    pub urgent: bool,
    pub direct: bool,
    pub approvals: Vec<i64>,
    pub created_at: String,
    pub attempts: i64,
}

/// A message to put in the outbox.
pub struct NewMessage<'a> {
    pub chat_id: i64,
    pub kind: &'a str,
    pub html: &'a str,
    pub urgent: bool,
    /// Exempt from the dedupe and the daily cap (a reply to a command, a test message).
    pub direct: bool,
    pub approvals: &'a [i64],
}

/// The current pause.
#[derive(Clone, Debug, PartialEq)]
pub struct PauseRow {
    pub since: String,
    pub until: Option<String>,
    pub reason: Option<String>,
    pub by: String,
}

impl PauseRow {
    /// In force at `now`: no end, or an end still to come.
    pub fn in_force(&self, now: DateTime<Utc>) -> bool {
        self.until
            .as_deref()
            .and_then(parse_ts)
            .is_none_or(|u| u > now)
    }
}

fn pause_row(r: &rusqlite::Row) -> rusqlite::Result<PauseRow> {
    Ok(PauseRow {
        since: r.get(0)?,
        until: r.get(1)?,
        reason: r.get(2)?,
        by: r.get(3)?,
    })
}

impl Store {
    pub fn enqueue(&mut self, m: &NewMessage, now: DateTime<Utc>) -> Result<i64> {
        self.conn
            .query_row(
                "INSERT INTO outbox (chat_id, kind, html, urgent, direct, approvals, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                params![
                    m.chat_id,
                    m.kind,
                    m.html,
                    m.urgent,
                    m.direct,
                    serde_json::to_string(m.approvals).unwrap_or_else(|_| "[]".into()),
                    format_ts(now)
                ],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// The outbox, oldest first.
    pub fn outbox(&self) -> Result<Vec<OutboxRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, chat_id, kind, html, urgent, direct, approvals, created_at, attempts
                 FROM outbox ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let approvals: String = r.get(6)?;
                Ok(OutboxRow {
                    id: r.get(0)?,
                    chat_id: r.get(1)?,
                    kind: r.get(2)?,
                    html: r.get(3)?,
                    urgent: r.get(4)?,
                    direct: r.get(5)?,
                    approvals: serde_json::from_str(&approvals).unwrap_or_default(),
                    created_at: r.get(7)?,
                    attempts: r.get(8)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    pub fn outbox_len(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    pub fn outbox_delete(&mut self, id: i64) -> Result<()> {
        self.conn
            .execute("DELETE FROM outbox WHERE id = ?1", [id])
            .map(drop)
            .map_err(|e| self.err(e))
    }

    pub fn outbox_failed(&mut self, id: i64, error: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1",
                params![id, error],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Remember a sent text (by hash) for the dedupe and, if `counted`, the daily cap.
    pub fn record_sent(
        &mut self,
        chat_id: i64,
        hash: &str,
        counted: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO sent (chat_id, text_hash, sent_at, counted) VALUES (?1, ?2, ?3, ?4)",
                params![chat_id, hash, format_ts(now), counted],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Whether this text went to this chat at or after `since`.
    pub fn sent_since(&self, chat_id: i64, hash: &str, since: DateTime<Utc>) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sent
                 WHERE chat_id = ?1 AND text_hash = ?2 AND sent_at >= ?3)",
                params![chat_id, hash, format_ts(since)],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Counted messages sent to a chat at or after `since`.
    pub fn count_sent(&self, chat_id: i64, since: DateTime<Utc>) -> Result<u32> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM sent WHERE chat_id = ?1 AND counted AND sent_at >= ?2",
                params![chat_id, format_ts(since)],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Forget sends older than `before` (they no longer matter for dedupe or the cap).
    pub fn prune_sent(&mut self, before: DateTime<Utc>) -> Result<()> {
        self.conn
            .execute("DELETE FROM sent WHERE sent_at < ?1", [format_ts(before)])
            .map(drop)
            .map_err(|e| self.err(e))
    }

    pub fn save_button_message(
        &mut self,
        chat_id: i64,
        message_id: i64,
        html: &str,
        approvals: &[i64],
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO tg_messages (chat_id, message_id, html, approvals, sent_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    chat_id,
                    message_id,
                    html,
                    serde_json::to_string(approvals).unwrap_or_else(|_| "[]".into()),
                    format_ts(now)
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The stored HTML and still-open approvals of a message with buttons.
    pub fn button_message(
        &self,
        chat_id: i64,
        message_id: i64,
    ) -> Result<Option<(String, Vec<i64>)>> {
        self.conn
            .query_row(
                "SELECT html, approvals FROM tg_messages WHERE chat_id = ?1 AND message_id = ?2",
                params![chat_id, message_id],
                |r| {
                    let approvals: String = r.get(1)?;
                    Ok((
                        r.get::<_, String>(0)?,
                        serde_json::from_str(&approvals).unwrap_or_default(),
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Remember a chat that wrote to the bot.
    pub fn saw_chat(
        &mut self,
        chat_id: i64,
        kind: &str,
        title: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO tg_chats (chat_id, kind, title, last_seen) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(chat_id) DO UPDATE SET kind = excluded.kind, title = excluded.title,
                    last_seen = excluded.last_seen",
                params![chat_id, kind, title, format_ts(now)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Chats that wrote to the bot, most recent first: (id, kind, title, last seen).
    pub fn chats(&self) -> Result<Vec<(i64, String, String, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT chat_id, kind, title, last_seen FROM tg_chats ORDER BY last_seen DESC")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// The pause as stored, without ending a timed one (read-only commands).
    pub fn pause_row(&self) -> Result<Option<PauseRow>> {
        self.conn
            .query_row(
                "SELECT since, until, reason, by FROM pause WHERE id = 1",
                [],
                pause_row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The pause in force at `now`. A timed pause whose end has passed is removed here and
    /// returned as `Err` (so the caller can audit `resumed`).
    pub fn current_pause(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<Option<PauseRow>, PauseRow>> {
        match self.pause_row()? {
            Some(p) if !p.in_force(now) => {
                self.durable(|conn| conn.execute("DELETE FROM pause", []))?;
                Ok(Err(p))
            }
            other => Ok(Ok(other)),
        }
    }

    pub fn set_pause(&mut self, p: &PauseRow) -> Result<()> {
        self.durable(|conn| {
            conn.execute(
                "INSERT OR REPLACE INTO pause (id, since, until, reason, by)
                 VALUES (1, ?1, ?2, ?3, ?4)",
                params![p.since, p.until, p.reason, p.by],
            )
        })
        .map(drop)
    }

    /// Remove the pause; the removed row, if there was one.
    pub fn clear_pause(&mut self) -> Result<Option<PauseRow>> {
        let row = self.pause_row()?;
        self.durable(|conn| conn.execute("DELETE FROM pause", []))?;
        Ok(row)
    }
}

/// `cost_usd IS NOT NULL` (SUM ignores NULLs anyway) lets the partial index task_runs_cost
/// answer this alone.
const SPENT_SINCE: &str = "SELECT COALESCE(SUM(cost_usd), 0.0) FROM task_runs
     WHERE started_at >= ?1 AND cost_usd IS NOT NULL";

/// The columns [`approval_row`] reads, in its order (a macro, to build SQL text at compile
/// time: statements with it are cached by their text).
macro_rules! approval_columns {
    () => {
        "id, task_id, state, tool, input, file, line, section, text, created_at, decided_at, \
         decided_by, reason"
    };
}

const APPROVAL_BY_ID: &str = concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals WHERE id = ?1"
);
const APPROVALS_IN_STATE: &str = concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals WHERE state = ?1 ORDER BY id"
);
const APPROVALS_ALL: &str = concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals ORDER BY id"
);
const APPROVALS_RUNNING: &str = concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals WHERE state = 'running' ORDER BY id"
);
const EXPIRABLE: &str = concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals WHERE state = 'pending' AND created_at <= ?1 ORDER BY id"
);

fn approval_row(r: &rusqlite::Row) -> rusqlite::Result<ApprovalRow> {
    let input: String = r.get(4)?;
    Ok(ApprovalRow {
        id: r.get(0)?,
        task_id: r.get(1)?,
        state: r.get(2)?,
        tool: r.get(3)?,
        input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
        file: r.get(5)?,
        line: r.get(6)?,
        section: r.get(7)?,
        text: r.get(8)?,
        created_at: r.get(9)?,
        decided_at: r.get(10)?,
        decided_by: r.get(11)?,
        reason: r.get(12)?,
    })
}

/// Run `op` again while it fails with SQLITE_BUSY, for up to [`BUSY_TIMEOUT`] in all: for a
/// statement SQLite can answer with SQLITE_BUSY without waiting in the busy handler (a lock
/// upgrade). Any other result, or the last busy error past the deadline, is returned.
fn retry_busy<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && Instant::now() + pause < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

fn sql_err(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

pub fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn new_approval<'a>(task: &'a str, input: &'a serde_json::Value) -> NewApproval<'a> {
        NewApproval {
            task_id: task,
            file: "/x/HEARTBEAT.md",
            line: 3,
            section: "recurring",
            tool: "shell",
            input,
            text: "@shell {}",
        }
    }

    #[test]
    fn fresh_database_opened_by_several_connections_at_once() {
        // Converting a new database to WAL takes a read lock, then upgrades it; SQLite
        // answers a connection that loses that race with SQLITE_BUSY at once, without its
        // busy handler. Every open must still succeed.
        const THREADS: usize = 4;
        const ROUNDS: usize = 40;
        for round in 0..ROUNDS {
            let dir = tempfile::tempdir().unwrap();
            let start = std::sync::Barrier::new(THREADS);
            std::thread::scope(|scope| {
                let opens: Vec<_> = (0..THREADS)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            Store::open(dir.path()).map(|s| s.user_version())
                        })
                    })
                    .collect();
                for open in opens {
                    match open.join().unwrap() {
                        Ok(Ok(version)) => assert_eq!(version, SCHEMA_VERSION),
                        Ok(Err(e)) | Err(e) => panic!("round {round}: {e}"),
                    }
                }
            });
        }
    }

    #[test]
    fn one_pending_approval_per_task() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let input = json!({"cmd": "true"});
        let now = ts("2026-01-01T10:00:00Z");
        let first = s.queue_approval(&new_approval("aaa", &input), now).unwrap();
        assert!(first.is_some());
        assert_eq!(
            s.queue_approval(&new_approval("aaa", &input), now).unwrap(),
            None
        );
        assert!(
            s.queue_approval(&new_approval("bbb", &input), now)
                .unwrap()
                .is_some()
        );
        // The index, not only the code, refuses a second pending row.
        let dup = s.conn.execute(
            "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text, created_at)
             VALUES ('aaa', 'pending', 'f', 1, 'recurring', 't', '{}', 't', 'x')",
            [],
        );
        assert!(dup.is_err());
        let snap = s
            .snapshot(now, Duration::from_secs(3600), ts("2000-01-01T00:00:00Z"))
            .unwrap();
        assert_eq!(snap.pending.get("aaa"), first.as_ref());
        assert_eq!(s.count_pending().unwrap(), 2);
    }

    fn by_cli(approve: bool) -> Decision {
        Decision {
            approve,
            by: "cli:ann".into(),
            reason: None,
            always: false,
        }
    }

    #[test]
    fn lifecycle_claims_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Store::open(dir.path()).unwrap();
        let mut b = Store::open(dir.path()).unwrap();
        let input = json!({});
        let now = ts("2026-01-01T10:00:00Z");
        let id = a
            .queue_approval(&new_approval("t", &input), now)
            .unwrap()
            .unwrap();
        // Not claimable before a person approved it.
        assert!(!a.claim(id, "r1").unwrap());
        assert!(a.decide(id, &by_cli(true), now).unwrap());
        // Deciding twice does nothing.
        assert!(!b.decide(id, &by_cli(false), now).unwrap());
        // While approved (and running), the task cannot be queued again.
        assert_eq!(
            b.queue_approval(&new_approval("t", &input), now).unwrap(),
            None
        );
        assert!(a.claim(id, "r1").unwrap());
        assert!(!b.claim(id, "r2").unwrap());
        assert!(!b.mark_stale(id, "gone", now).unwrap());
        a.finish_approval(id, true, None, now).unwrap();
        let row = b.approval(id).unwrap().unwrap();
        assert_eq!(row.state, "succeeded");
        assert_eq!(row.decided_by.as_deref(), Some("cli:ann"));
        // Closed: a new approval may be queued.
        assert!(
            b.queue_approval(&new_approval("t", &input), now)
                .unwrap()
                .is_some()
        );
    }

    /// Every column of an approval row, as stored (for comparing whole rows).
    fn stored(s: &Store, id: i64) -> Vec<Option<String>> {
        s.conn
            .query_row(
                "SELECT state, decided_at, decided_by, reason, CAST(always AS TEXT), run_id,
                 finished_at FROM approvals WHERE id = ?1",
                [id],
                |r| (0..7).map(|i| r.get(i)).collect(),
            )
            .unwrap()
    }

    /// `n` approvals of tasks t0, t1, … (after the tasks' count so far), approved unless
    /// `decide` is false.
    fn approvals_of(s: &mut Store, n: usize, decide: bool) -> Vec<i64> {
        let before: usize = s
            .conn
            .query_row("SELECT COUNT(*) FROM approvals", [], |r| r.get(0))
            .unwrap();
        let input = json!({"text": "x"});
        let now = ts("2026-01-01T10:00:00Z");
        (0..n)
            .map(|i| {
                let task = format!("t{}", before + i);
                let id = s
                    .queue_approval(&new_approval(&task, &input), now)
                    .unwrap()
                    .unwrap();
                if decide {
                    assert!(s.decide(id, &by_cli(true), now).unwrap());
                }
                id
            })
            .collect()
    }

    #[test]
    fn decide_many_decides_what_is_pending_once_in_the_order_given() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let mut other = Store::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 5, false);
        let now = ts("2026-01-01T11:00:00Z");
        // Decided elsewhere first: one denied, one approved.
        assert!(other.decide(ids[1], &by_cli(false), now).unwrap());
        assert!(other.decide(ids[3], &by_cli(true), now).unwrap());
        let d = Decision {
            approve: true,
            by: "cli:bob".into(),
            reason: Some("fine".into()),
            always: true,
        };
        let asked = [ids[4], ids[0], ids[1], ids[4], 999, ids[2], ids[3]];
        assert_eq!(
            s.decide_many(&asked, &d, now).unwrap(),
            [ids[4], ids[0], ids[2]]
        );
        let some = |v: &str| Some(v.to_string());
        for &id in &[ids[0], ids[2], ids[4]] {
            assert_eq!(
                stored(&other, id),
                [
                    some("approved"),
                    some("2026-01-01T11:00:00.000Z"),
                    some("cli:bob"),
                    some("fine"),
                    some("1"),
                    None,
                    None
                ]
            );
        }
        // What decide() wrote stays.
        assert_eq!(stored(&other, ids[1])[0].as_deref(), Some("denied"));
        assert_eq!(stored(&other, ids[3])[2].as_deref(), Some("cli:ann"));
        // Nothing left to decide; nothing to decide at all.
        assert!(s.decide_many(&ids, &d, now).unwrap().is_empty());
        assert!(s.decide_many(&[], &d, now).unwrap().is_empty());
        // A denial the same way.
        let more = approvals_of(&mut s, 7, false);
        let denied = s.decide_many(&more[5..], &by_cli(false), now).unwrap();
        assert_eq!(denied, &more[5..]);
        assert_eq!(stored(&other, more[6])[0].as_deref(), Some("denied"));
        assert_eq!(s.count_pending().unwrap(), 5);
    }

    #[test]
    fn concurrent_decide_many_decide_each_approval_once() {
        let dir = tempfile::tempdir().unwrap();
        let ids = approvals_of(&mut Store::open(dir.path()).unwrap(), 300, false);
        let now = ts("2026-01-01T11:00:00Z");
        let decided: Vec<Vec<i64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let (path, ids) = (dir.path(), &ids);
                    scope.spawn(move || {
                        let mut s = Store::open(path).unwrap();
                        // Overlapping sets, in different orders.
                        let mut mine: Vec<i64> = ids[i * 50..].to_vec();
                        if i % 2 == 1 {
                            mine.reverse();
                        }
                        s.decide_many(&mine, &by_cli(true), now).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<i64> = decided.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each decided exactly once");
    }

    #[test]
    fn claims_in_a_batch_commit_what_claiming_one_by_one_commits() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let other = Store::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 8, true);
        let now = ts("2026-01-01T12:00:00Z");
        s.conn
            .execute("UPDATE approvals SET reason = 'ok by me'", [])
            .unwrap();
        // One by one, outside a batch: the reference.
        assert!(s.claim(ids[0], "r0").unwrap());
        s.finish_approval(ids[0], true, None, now).unwrap();
        assert!(s.claim(ids[1], "r0").unwrap());
        s.finish_approval(ids[1], false, Some("exit 1"), now)
            .unwrap();
        assert!(s.claim(ids[2], "r0").unwrap());

        s.batch().unwrap();
        assert!(s.claim(ids[3], "r1").unwrap());
        // Claimed already: here, and (before this batch) outside it.
        assert!(!s.claim(ids[3], "r1").unwrap());
        assert!(!s.claim(ids[0], "r1").unwrap());
        s.finish_approval(ids[3], true, None, now).unwrap();
        assert!(!s.claim(ids[3], "r1").unwrap());
        assert!(s.claim(ids[4], "r1").unwrap());
        s.finish_approval(ids[4], false, Some("exit 1"), now)
            .unwrap();
        // Claimed, not finished when the batch ends.
        assert!(s.claim(ids[5], "r1").unwrap());
        // Another run's claim in the same batch.
        assert!(s.claim(ids[6], "r2").unwrap());
        s.finish_approval(ids[6], true, None, now).unwrap();
        // Finished twice: the first finish counts, as when the state moved on.
        s.finish_approval(ids[6], false, Some("again"), now)
            .unwrap();
        // Nothing of it is visible elsewhere before the batch commits.
        for &id in &ids[3..] {
            assert_eq!(stored(&other, id)[0].as_deref(), Some("approved"));
        }
        s.flush().unwrap();

        let ran = |state: &str, run: &str, reason: &str| {
            let some = |v: &str| Some(v.to_string());
            vec![
                some(state),
                some("2026-01-01T10:00:00.000Z"),
                some("cli:ann"),
                some(reason),
                some("0"),
                some(run),
                (state != "running").then(|| "2026-01-01T12:00:00.000Z".to_string()),
            ]
        };
        assert_eq!(stored(&other, ids[0]), ran("succeeded", "r0", "ok by me"));
        assert_eq!(stored(&other, ids[1]), ran("failed", "r0", "exit 1"));
        assert_eq!(stored(&other, ids[2]), ran("running", "r0", "ok by me"));
        assert_eq!(stored(&other, ids[3]), ran("succeeded", "r1", "ok by me"));
        assert_eq!(stored(&other, ids[4]), ran("failed", "r1", "exit 1"));
        assert_eq!(stored(&other, ids[5]), ran("running", "r1", "ok by me"));
        assert_eq!(stored(&other, ids[6]), ran("succeeded", "r2", "ok by me"));
        let mut untouched = ran("approved", "", "ok by me");
        untouched[5] = None;
        untouched[6] = None;
        assert_eq!(stored(&other, ids[7]), untouched);
        // A claim left running is recovered as before.
        let interrupted = s.interrupt_running(now).unwrap();
        let ids_of = |rows: &[ApprovalRow]| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids_of(&interrupted), [ids[2], ids[5]]);
    }

    #[test]
    fn reads_in_a_batch_see_its_claims() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 3, true);
        let now = ts("2026-01-01T12:00:00Z");
        s.batch().unwrap();
        assert!(s.claim(ids[0], "r").unwrap());
        assert!(s.claim(ids[1], "r").unwrap());
        s.finish_approval(ids[1], true, None, now).unwrap();
        assert_eq!(s.approval(ids[0]).unwrap().unwrap().state, "running");
        assert_eq!(s.approval(ids[1]).unwrap().unwrap().state, "succeeded");
        // Written now: the finish after it is an UPDATE of a running row, as outside.
        s.finish_approval(ids[0], false, Some("boom"), now).unwrap();
        let states = |s: &Store| -> Vec<String> {
            s.approvals(None)
                .unwrap()
                .into_iter()
                .map(|r| r.state)
                .collect()
        };
        assert_eq!(states(&s), ["failed", "succeeded", "approved"]);
        assert!(s.claim(ids[2], "r").unwrap());
        assert_eq!(s.approvals(Some("running")).unwrap().len(), 1);
        assert!(s.has_approved_work().unwrap());
        // Not finished: the open-approvals snapshot still holds it.
        let snap = s
            .snapshot(now, Duration::from_secs(60), ts("2000-01-01T00:00:00Z"))
            .unwrap();
        assert_eq!(snap.pending.len(), 1);
        s.finish_approval(ids[2], true, None, now).unwrap();
        assert!(!s.has_approved_work().unwrap());
        assert!(!s.claim(ids[2], "r").unwrap());
        s.flush().unwrap();
        assert_eq!(
            states(&Store::open(dir.path()).unwrap()),
            ["failed", "succeeded", "succeeded"]
        );
    }

    #[test]
    fn a_batch_whose_claims_cannot_be_written_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let mut s = Store::open(dir.path()).unwrap();
        s.attach_audit(
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&log)
                .unwrap(),
            &log,
        );
        let ids = approvals_of(&mut s, 1, true);
        // From here on, no approval row can change.
        s.conn
            .execute_batch(
                "CREATE TRIGGER frozen BEFORE UPDATE ON approvals
                 BEGIN SELECT RAISE(ABORT, 'frozen'); END;",
            )
            .unwrap();
        s.batch().unwrap();
        assert!(s.claim(ids[0], "r").unwrap());
        s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", true))
            .unwrap();
        s.finish_approval(ids[0], true, None, ts("2026-01-01T10:00:01Z"))
            .unwrap();
        assert!(s.hold_line(b"outcome\n").unwrap());
        let err = s.flush().unwrap_err();
        assert!(err.to_string().contains("frozen"), "{err}");
        // Neither the task's record nor its line: the approval is still waiting to run.
        let runs: i64 = s
            .conn
            .query_row("SELECT COUNT(*) FROM task_history", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 0);
        assert_eq!(stored(&s, ids[0])[0].as_deref(), Some("approved"));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
    }

    #[test]
    fn a_dropped_store_commits_its_batchs_claims() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 2, true);
        s.batch().unwrap();
        assert!(s.claim(ids[0], "r").unwrap());
        s.finish_approval(ids[0], true, None, ts("2026-01-01T12:00:00Z"))
            .unwrap();
        assert!(s.claim(ids[1], "r").unwrap());
        drop(s);
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(stored(&s, ids[0])[0].as_deref(), Some("succeeded"));
        assert_eq!(stored(&s, ids[1])[0].as_deref(), Some("running"));
    }

    #[test]
    fn concurrent_batches_claim_each_approval_once() {
        let dir = tempfile::tempdir().unwrap();
        let ids = approvals_of(&mut Store::open(dir.path()).unwrap(), 200, true);
        let now = ts("2026-01-01T12:00:00Z");
        let claimed: Vec<Vec<i64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let (path, ids) = (dir.path(), &ids);
                    scope.spawn(move || {
                        let mut s = Store::open(path).unwrap();
                        let run = format!("r{i}");
                        let mut mine = Vec::new();
                        // Batches of 10, committed one after the other, as a run does
                        // between tools with effects.
                        for chunk in ids.chunks(10) {
                            s.batch().unwrap();
                            for &id in chunk {
                                if s.claim(id, &run).unwrap() {
                                    s.finish_approval(id, true, None, now).unwrap();
                                    mine.push(id);
                                }
                            }
                            s.flush().unwrap();
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = claimed.concat();
        all.sort_unstable();
        assert_eq!(all, ids, "each claimed exactly once");
        let s = Store::open(dir.path()).unwrap();
        for (i, mine) in claimed.iter().enumerate() {
            for &id in mine {
                let row = stored(&s, id);
                assert_eq!(row[0].as_deref(), Some("succeeded"));
                assert_eq!(
                    row[5],
                    Some(format!("r{i}")),
                    "claimed by the run that ran it"
                );
            }
        }
    }

    #[test]
    fn approvals_of_one_state_are_read_through_the_state_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let ids = approvals_of(&mut s, 4, false);
        let now = ts("2026-01-01T11:00:00Z");
        s.decide(ids[2], &by_cli(true), now).unwrap();
        s.decide(ids[0], &by_cli(true), now).unwrap();
        s.decide(ids[1], &by_cli(false), now).unwrap();
        let of = |state: Option<&str>| -> Vec<i64> {
            s.approvals(state).unwrap().iter().map(|r| r.id).collect()
        };
        assert_eq!(of(Some("approved")), [ids[0], ids[2]]);
        assert_eq!(of(Some("pending")), [ids[3]]);
        assert!(of(Some("running")).is_empty());
        assert_eq!(of(None), ids);
        let plan: String = s
            .conn
            .query_row(
                &format!("EXPLAIN QUERY PLAN {APPROVALS_IN_STATE}"),
                ["approved"],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("INDEX approvals_state"), "{plan}");
    }

    #[test]
    fn many_grants_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let grant = |task: &str, by: &str| GrantRow {
            task_id: task.into(),
            tool: "log".into(),
            input: json!({"text": task}),
            file: "/x".into(),
            text: "@log {}".into(),
            created_at: "2026-01-01T10:00:00.000Z".into(),
            created_by: by.into(),
            approval_id: Some(1),
        };
        s.add_grant(&grant("b", "cli:ann")).unwrap();
        s.add_grants(&[]).unwrap();
        let all = [
            grant("a", "cli:bob"),
            grant("b", "cli:bob"),
            grant("c", "cli:bob"),
        ];
        s.add_grants(&all).unwrap();
        assert_eq!(s.grants().unwrap(), all);
    }

    #[test]
    fn running_rows_become_interrupted_failures() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let input = json!({});
        let now = ts("2026-01-01T10:00:00Z");
        let id = s
            .queue_approval(&new_approval("t", &input), now)
            .unwrap()
            .unwrap();
        s.decide(id, &by_cli(true), now).unwrap();
        s.claim(id, "r1").unwrap();
        let rows = s.interrupt_running(now).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].state, "failed");
        assert_eq!(rows[0].reason.as_deref(), Some("interrupted"));
        assert_eq!(Some(&rows[0]), s.approval(id).unwrap().as_ref());
        assert!(s.interrupt_running(now).unwrap().is_empty());
    }

    #[test]
    fn grants_are_kept_per_task_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let g = GrantRow {
            task_id: "t".into(),
            tool: "shell".into(),
            input: json!({"cmd": "true"}),
            file: "/x".into(),
            text: "@shell {}".into(),
            created_at: "2026-01-01T10:00:00.000Z".into(),
            created_by: "cli:ann".into(),
            approval_id: Some(1),
        };
        s.add_grant(&g).unwrap();
        s.add_grant(&g).unwrap();
        assert_eq!(s.grants().unwrap(), vec![g]);
        let snap = s
            .snapshot(
                ts("2026-01-01T10:00:00Z"),
                Duration::from_secs(60),
                ts("2000-01-01T00:00:00Z"),
            )
            .unwrap();
        assert!(snap.granted.contains("t"));
        assert!(s.revoke("t").unwrap());
        assert!(!s.revoke("t").unwrap());
        assert!(s.grants().unwrap().is_empty());
    }

    #[test]
    fn pending_approvals_expire_after_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let input = json!({});
        let ttl = Duration::from_secs(24 * 3600);
        s.queue_approval(&new_approval("aaa", &input), ts("2026-01-01T10:00:00Z"))
            .unwrap();
        assert!(
            s.expire_pending(ts("2026-01-02T09:59:59Z"), ttl)
                .unwrap()
                .is_empty()
        );
        let expired = s.expire_pending(ts("2026-01-02T10:00:00Z"), ttl).unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].state, "expired");
        // What was returned is what is stored.
        assert_eq!(
            Some(&expired[0]),
            s.approval(expired[0].id).unwrap().as_ref()
        );
        assert_eq!(
            expired[0].decided_at.as_deref(),
            Some("2026-01-02T10:00:00.000Z")
        );
        assert_eq!(expired[0].reason.as_deref(), Some("ttl"));
        // The task may be queued again.
        assert!(
            s.queue_approval(&new_approval("aaa", &input), ts("2026-01-02T10:00:00Z"))
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn migration_is_idempotent_and_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path()).unwrap());
        drop(Store::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = Store::open(dir.path()).err().unwrap();
        assert!(err.to_string().contains("newer heartbeat"), "{err}");
        assert!(Store::open_existing(dir.path()).is_err());
    }

    #[test]
    fn the_database_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        s.record_attempt("t", ts("2026-01-01T00:00:00Z")).unwrap();
        for name in [DB_FILE, "heartbeat.db-wal"] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clean_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(DB_FILE),
            "this is not sqlite, just text ".repeat(100),
        )
        .unwrap();
        let err = Store::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("heartbeat.db"), "{err}");
        assert!(err.contains("not a database"), "{err}");
    }

    #[test]
    fn task_runs_track_spend_and_streaks() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let rec = |ok: bool, at: &str, cost: Option<f64>| TaskRunRecord {
            run_id: "r",
            task_id: "t",
            one_time: false,
            tool: "shell",
            started_at: ts(at),
            finished_at: ts(at),
            succeeded: ok,
            cost_usd: cost,
            approval_id: None,
        };
        s.record_task_run(&rec(false, "2026-01-01T10:00:00Z", Some(0.5)))
            .unwrap();
        s.record_task_run(&rec(false, "2026-01-02T10:00:00Z", Some(0.25)))
            .unwrap();
        let fails: i64 = s
            .conn
            .query_row("SELECT consecutive_failures FROM task_state", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(fails, 2);
        s.record_task_run(&rec(true, "2026-01-02T11:00:00Z", None))
            .unwrap();
        let fails: i64 = s
            .conn
            .query_row("SELECT consecutive_failures FROM task_state", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(fails, 0);
        assert_eq!(s.spent_since(ts("2026-01-02T00:00:00Z")).unwrap(), 0.25);
        let snap = s
            .snapshot(
                ts("2026-01-03T00:00:00Z"),
                Duration::from_secs(60),
                ts("2000-01-01T00:00:00Z"),
            )
            .unwrap();
        assert_eq!(snap.last_attempt["t"], ts("2026-01-02T11:00:00Z"));
    }

    /// A database as heartbeat with schema 4 left it.
    fn v4_database(dir: &Path) -> Connection {
        let conn = Connection::open(dir.join(DB_FILE)).unwrap();
        for sql in &MIGRATIONS[..4] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 4).unwrap();
        conn
    }

    fn task_state_rows(conn: &Connection) -> Vec<Vec<Option<String>>> {
        let mut st = conn
            .prepare(
                "SELECT task_id, last_attempt, last_success, last_outcome,
                 CAST(consecutive_failures AS TEXT), reminded_at, tripped_at
                 FROM task_state ORDER BY task_id",
            )
            .unwrap();
        st.query_map([], |r| (0..7).map(|i| r.get(i)).collect())
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    fn indexes(conn: &Connection, table: &str) -> Vec<String> {
        let mut st = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1
                 AND sql IS NOT NULL ORDER BY name",
            )
            .unwrap();
        st.query_map([table], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn a_schema_4_database_migrates_with_its_state_intact() {
        let dir = tempfile::tempdir().unwrap();
        let conn = v4_database(dir.path());
        conn.execute_batch(
            "INSERT INTO task_state VALUES
                ('aaa', '2026-01-02T10:00:00.000Z', '2026-01-01T10:00:01.000Z', 'failed', 3,
                 NULL, '2026-01-02T10:00:02.000Z');
             INSERT INTO task_state (task_id, last_attempt, reminded_at)
                VALUES ('bbb', '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:00.000Z');
             INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome)
                VALUES ('ccc', '2026-01-02T08:00:00.000Z', '2026-01-02T08:00:05.000Z', 'succeeded');
             INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at, outcome,
                cost_usd) VALUES
                ('r1', 'aaa', 'shell', '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:01.000Z',
                 'succeeded', 0.5),
                ('r2', 'aaa', 'shell', '2026-01-02T10:00:00.000Z', '2026-01-02T10:00:01.000Z',
                 'failed', NULL),
                ('r2', 'ccc', 'log', '2026-01-02T08:00:00.000Z', '2026-01-02T08:00:05.000Z',
                 'succeeded', 0.25),
                ('r0', 'ccc', 'log', '2025-12-01T08:00:00.000Z', '2025-12-01T08:00:05.000Z',
                 'succeeded', 1.0);",
        )
        .unwrap();
        let before = task_state_rows(&conn);
        assert_eq!(before.len(), 3);
        drop(conn);

        // A read-only command after an upgrade brings it up to date too.
        let s = Store::open_existing(dir.path()).unwrap().unwrap();
        assert_eq!(s.user_version().unwrap(), SCHEMA_VERSION);
        let runs: i64 = s
            .conn
            .query_row("SELECT COUNT(*) FROM task_history", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 4);
        assert_eq!(task_state_rows(&s.conn), before);
        assert_eq!(indexes(&s.conn, "task_runs"), ["task_runs_cost"]);
        let snap = s
            .snapshot(
                ts("2026-01-03T00:00:00Z"),
                Duration::from_secs(60),
                ts("2026-01-01T00:00:00Z"),
            )
            .unwrap();
        // Each tool's latest start, from the history.
        assert_eq!(snap.tool_last_start.len(), 2);
        assert_eq!(snap.tool_last_start["shell"], ts("2026-01-02T10:00:00Z"));
        assert_eq!(snap.tool_last_start["log"], ts("2026-01-02T08:00:00Z"));
        assert_eq!(snap.spent_today, 0.75);
        assert_eq!(snap.failures["aaa"], 3);
        assert!(snap.tripped.contains("aaa"));
        assert!(snap.reminded.contains("bbb"));
        assert_eq!(
            snap.succeeded,
            HashSet::from(["aaa".to_string(), "ccc".to_string()])
        );
        drop(s);
        // Opened again: nothing more to do, nothing changed.
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(task_state_rows(&s.conn), before);
    }

    fn approval_rows(conn: &Connection) -> Vec<Vec<String>> {
        let mut st = conn.prepare("SELECT * FROM approvals ORDER BY id").unwrap();
        let n = st.column_count();
        st.query_map([], |r| {
            (0..n)
                .map(|i| r.get_ref(i).map(|v| format!("{v:?}")))
                .collect()
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    #[test]
    fn approvals_keep_their_rows_and_ids_across_the_rebuild_of_schema_7() {
        let dir = tempfile::tempdir().unwrap();
        let conn = v4_database(dir.path());
        conn.execute_batch(
            "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                created_at, decided_at, decided_by, reason, always, run_id, finished_at)
             VALUES
                ('aaa', 'pending', '/f', 3, 'recurring', 'shell', '{}', 't', '2026-01-01', NULL,
                 NULL, NULL, 0, NULL, NULL),
                ('bbb', 'succeeded', '/f', 4, 'one-time', 'log', '{\"text\":\"x\"}', 'u',
                 '2026-01-01', '2026-01-02', 'cli:me', 'ok', 1, 'r1', '2026-01-03'),
                ('ccc', 'approved', '/g', 5, 'recurring', 'log', '{}', 'v', '2026-01-01',
                 '2026-01-02', 'telegram:1', NULL, 0, NULL, NULL);
             -- Later approvals that were removed: their ids are not handed out again.
             UPDATE sqlite_sequence SET seq = 10 WHERE name = 'approvals';",
        )
        .unwrap();
        let before = approval_rows(&conn);
        drop(conn);

        let mut s = Store::open(dir.path()).unwrap();
        assert_eq!(approval_rows(&s.conn), before);
        assert_eq!(
            indexes(&s.conn, "approvals"),
            ["approvals_one_open", "approvals_state"]
        );
        let input = serde_json::json!({});
        let now = ts("2026-01-04T00:00:00Z");
        // The next id follows the highest ever handed out.
        assert_eq!(
            s.queue_approval(&new_approval("bbb", &input), now).unwrap(),
            Some(11)
        );
        // Still at most one open approval per task.
        for task in ["aaa", "bbb", "ccc"] {
            assert_eq!(
                s.queue_approval(&new_approval(task, &input), now).unwrap(),
                None
            );
        }
        // Still only the known states.
        let bad = s
            .conn
            .execute("UPDATE approvals SET state = 'maybe' WHERE id = 1", [])
            .unwrap_err();
        assert!(bad.to_string().contains("CHECK"), "{bad}");
        // Deciding many builds no lookup table per row (the IN lists did: 5).
        let opened = |sql: &str| -> usize {
            let mut st = s.conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let ops: Vec<String> = st
                .query_map([], |r| r.get(1))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            ops.iter().filter(|op| *op == "OpenEphemeral").count()
        };
        assert_eq!(
            opened(
                "UPDATE approvals SET state = 'approved' WHERE id IN (SELECT value FROM
                 json_each('[1]')) AND state = 'pending'"
            ),
            2
        );
    }

    #[test]
    fn a_database_one_schema_ahead_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = Store::open(dir.path()).err().unwrap();
        assert!(
            matches!(err, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1),
            "{err}"
        );
        assert!(matches!(
            Store::open_existing(dir.path()),
            Err(StoreError::TooNew { .. })
        ));
        // Left as it was.
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION + 1);
    }

    #[test]
    fn a_batchs_audit_lines_are_written_just_before_it_commits() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap();
        let read = || std::fs::read_to_string(&log).unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let other = Store::open(dir.path()).unwrap();
        let runs = || -> i64 {
            other
                .conn
                .query_row("SELECT COUNT(*) FROM task_history", [], |r| r.get(0))
                .unwrap()
        };
        // Nothing attached, or no batch: the caller writes the line.
        assert!(!s.hold_line(b"x\n").unwrap());
        s.attach_audit(file, &log);
        assert!(!s.hold_line(b"x\n").unwrap());

        s.batch().unwrap();
        assert!(s.hold_line(b"a\n").unwrap());
        s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", false))
            .unwrap();
        assert_eq!((read(), runs()), (String::new(), 0));
        // A change that must be durable commits the batch: its lines go first.
        s.trip("t", ts("2026-01-01T10:00:01Z")).unwrap();
        assert_eq!((read(), runs()), ("a\n".to_string(), 1));

        s.batch().unwrap();
        assert!(s.hold_line(b"b\n").unwrap());
        assert!(s.hold_line(b"c\n").unwrap());
        s.record_task_run(&run_of("u", "log", "2026-01-01T10:00:00Z", true))
            .unwrap();
        s.flush().unwrap();
        assert_eq!((read(), runs()), ("a\nb\nc\n".to_string(), 2));

        // Dropped with a batch open (an error path): lines, then records.
        s.batch().unwrap();
        assert!(s.hold_line(b"d\n").unwrap());
        s.record_task_run(&run_of("v", "log", "2026-01-01T10:00:00Z", true))
            .unwrap();
        drop(s);
        assert_eq!((read(), runs()), ("a\nb\nc\nd\n".to_string(), 3));
    }

    #[test]
    fn a_batch_whose_audit_lines_cannot_be_written_is_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        std::fs::write(&log, "").unwrap();
        // Read-only: every write fails.
        let file = File::open(&log).unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        s.attach_audit(file, &log);
        s.batch().unwrap();
        assert!(s.hold_line(b"a\n").unwrap());
        s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", true))
            .unwrap();
        let err = s.flush().unwrap_err();
        assert!(err.to_string().contains("audit.jsonl"), "{err}");
        let n: i64 = s
            .conn
            .query_row("SELECT COUNT(*) FROM task_history", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
        // The store goes on working.
        s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", true))
            .unwrap();
    }

    fn run_of<'a>(task: &'a str, tool: &'a str, at: &str, ok: bool) -> TaskRunRecord<'a> {
        TaskRunRecord {
            run_id: "r",
            task_id: task,
            one_time: false,
            tool,
            started_at: ts(at),
            finished_at: ts(at) + chrono::Duration::seconds(1),
            succeeded: ok,
            cost_usd: None,
            approval_id: None,
        }
    }

    /// tool_state holds what `MAX(started_at) ... GROUP BY tool` over the history says (with
    /// the batch's gathered successes written, as any read writes them).
    fn assert_tool_state_matches_history(s: &Store) {
        s.settle().unwrap();
        let read = |sql: &str| -> Vec<(String, String)> {
            let mut st = s.conn.prepare(sql).unwrap();
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        assert_eq!(
            read("SELECT tool, last_start FROM tool_state ORDER BY tool"),
            read("SELECT tool, MAX(started_at) FROM task_history GROUP BY tool ORDER BY tool")
        );
    }

    #[test]
    fn tool_state_keeps_each_tools_latest_start_in_and_out_of_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        s.batch().unwrap();
        for (task, tool, at) in [
            ("a", "log", "2026-01-01T10:00:00Z"),
            ("b", "log", "2026-01-01T10:00:00Z"),
            ("c", "shell", "2026-01-01T10:00:00Z"),
            ("d", "log", "2026-01-01T11:00:00Z"),
            // An earlier start after a later one does not move it back.
            ("e", "log", "2026-01-01T09:00:00Z"),
        ] {
            s.record_task_run(&run_of(task, tool, at, true)).unwrap();
        }
        assert_tool_state_matches_history(&s);
        s.flush().unwrap();
        // Out of a batch, and in a later batch: earlier and later starts.
        s.record_task_run(&run_of("a", "log", "2026-01-01T08:00:00Z", false))
            .unwrap();
        s.record_task_run(&run_of("c", "shell", "2026-01-01T12:00:00Z", true))
            .unwrap();
        assert_tool_state_matches_history(&s);
        s.batch().unwrap();
        s.record_task_run(&run_of("a", "log", "2026-01-01T10:30:00Z", true))
            .unwrap();
        s.record_task_run(&run_of("b", "log", "2026-01-01T12:00:00Z", true))
            .unwrap();
        s.record_task_run(&run_of("b", "log", "2026-01-01T12:00:00Z", true))
            .unwrap();
        s.flush().unwrap();
        assert_tool_state_matches_history(&s);
        let snap = s
            .snapshot(
                ts("2026-01-02T00:00:00Z"),
                Duration::from_secs(60),
                ts("2026-01-01T00:00:00Z"),
            )
            .unwrap();
        assert_eq!(snap.tool_last_start["log"], ts("2026-01-01T12:00:00Z"));
        assert_eq!(snap.tool_last_start["shell"], ts("2026-01-01T12:00:00Z"));
        // Cooldowns look a week back, as before.
        let snap = s
            .snapshot(
                ts("2026-01-08T12:30:00Z"),
                Duration::from_secs(60),
                ts("2026-01-08T00:00:00Z"),
            )
            .unwrap();
        assert!(
            snap.tool_last_start.is_empty(),
            "{:?}",
            snap.tool_last_start
        );
        // What another connection sees once the batch is committed.
        drop(s);
        let s = Store::open(dir.path()).unwrap();
        assert_tool_state_matches_history(&s);
    }

    fn snapshot_at(s: &Store, at: &str) -> Result<Snapshot> {
        s.snapshot(
            ts(at),
            Duration::from_secs(3600),
            ts("2026-01-01T00:00:00Z"),
        )
    }

    fn one_time<'a>(task: &'a str, at: &str, ok: bool) -> TaskRunRecord<'a> {
        TaskRunRecord {
            one_time: true,
            ..run_of(task, "log", at, ok)
        }
    }

    /// `task_history` rows (task, tool, started, finished, outcome, cost, approval), sorted.
    fn history(s: &Store) -> Vec<[Option<String>; 7]> {
        s.settle().unwrap();
        let mut st = s
            .conn
            .prepare(
                "SELECT task_id, tool, started_at, finished_at, outcome, cost_usd, approval_id
                 FROM task_history ORDER BY task_id, started_at",
            )
            .unwrap();
        st.query_map([], |r| {
            let text = |i| -> rusqlite::Result<Option<String>> {
                Ok(match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Null => None,
                    rusqlite::types::ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into()),
                    v => Some(format!("{v:?}")),
                })
            };
            Ok([
                text(0)?,
                text(1)?,
                text(2)?,
                text(3)?,
                text(4)?,
                text(5)?,
                text(6)?,
            ])
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    #[test]
    fn a_batchs_costless_successes_share_one_row_and_one_time_ones_need_no_state_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let at = "2026-01-01T10:00:00Z";
        // "f" failed once before: its success must clear that.
        s.record_task_run(&one_time("f", "2026-01-01T09:00:00Z", false))
            .unwrap();
        snapshot_at(&s, at).unwrap();
        s.batch().unwrap();
        for r in [
            one_time("o1", at, true),
            one_time("o2", at, true),
            one_time("f", at, true),
            run_of("r1", "log", at, true),
            TaskRunRecord {
                cost_usd: Some(0.25),
                ..one_time("paid", at, true)
            },
            TaskRunRecord {
                approval_id: Some(7),
                ..one_time("asked", at, true)
            },
            one_time("x", at, false),
        ] {
            s.record_task_run(&r).unwrap();
        }
        // A read inside the batch sees what it gathered.
        let snap = snapshot_at(&s, at).unwrap();
        let mut done: Vec<&str> = snap.succeeded.iter().map(String::as_str).collect();
        done.sort();
        assert_eq!(done, ["asked", "f", "o1", "o2", "paid", "r1"]);
        // Another start (a later tick of a daemon) goes into a row of its own.
        s.record_task_run(&one_time("o3", "2026-01-01T10:05:00Z", true))
            .unwrap();
        s.flush().unwrap();

        let batches: Vec<(String, String, Option<String>, String)> = s
            .conn
            .prepare("SELECT run_id, started_at, done, tasks FROM task_batches ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            batches,
            [
                (
                    "r".to_string(),
                    "2026-01-01T10:00:00.000Z".to_string(),
                    Some(r#"["o1","o2","asked"]"#.to_string()),
                    r#"[["o1","log",1000],["o2","log",1000],["f","log",1000],["r1","log",1000],["asked","log",1000,7]]"#
                        .to_string()
                ),
                (
                    "r".to_string(),
                    "2026-01-01T10:05:00.000Z".to_string(),
                    Some(r#"["o3"]"#.to_string()),
                    r#"[["o3","log",1000]]"#.to_string()
                ),
            ]
        );
        // State rows: none for the clean one-time successes.
        let ids: Vec<String> = task_state_rows(&s.conn)
            .into_iter()
            .map(|r| r[0].clone().unwrap())
            .collect();
        assert_eq!(ids, ["f", "paid", "r1", "x"]);
        let snap = snapshot_at(&s, "2026-01-01T11:00:00Z").unwrap();
        for id in ["o1", "o2", "o3", "f", "r1", "paid", "asked"] {
            assert!(snap.succeeded.contains(id), "{id}");
        }
        assert_eq!(snap.failures, HashMap::from([("x".to_string(), 1)]));

        // The history view: one row per run, wherever it is kept.
        let some = |v: &str| Some(v.to_string());
        let row = |task: &str, start: &str, end: &str, outcome: &str| {
            [
                some(task),
                some("log"),
                some(start),
                some(end),
                some(outcome),
                None,
                None,
            ]
        };
        let (t0, t1) = ("2026-01-01T10:00:00.000Z", "2026-01-01T10:00:01.000Z");
        let mut paid = row("paid", t0, t1, "succeeded");
        paid[5] = some("Real(0.25)");
        let mut asked = row("asked", t0, t1, "succeeded");
        asked[6] = some("Integer(7)");
        assert_eq!(
            history(&s),
            [
                asked,
                row(
                    "f",
                    "2026-01-01T09:00:00.000Z",
                    "2026-01-01T09:00:01.000Z",
                    "failed"
                ),
                row("f", t0, t1, "succeeded"),
                row("o1", t0, t1, "succeeded"),
                row("o2", t0, t1, "succeeded"),
                row(
                    "o3",
                    "2026-01-01T10:05:00.000Z",
                    "2026-01-01T10:05:01.000Z",
                    "succeeded"
                ),
                paid,
                row("r1", t0, t1, "succeeded"),
                row("x", t0, t1, "failed"),
            ]
        );
        // The day's spend still counts what cost something.
        assert_eq!(s.spent_since(ts("2026-01-01T00:00:00Z")).unwrap(), 0.25);
        // `reset` knows a done one-time task, with nothing to clear.
        assert_eq!(s.reset("o2").unwrap(), Some((0, false)));
        assert_eq!(s.reset("f").unwrap(), Some((0, false)));
        assert_eq!(s.reset("nothing").unwrap(), None);
    }

    #[test]
    fn without_a_snapshot_the_store_reads_which_tasks_are_failing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        s.record_task_run(&one_time("f", "2026-01-01T09:00:00Z", false))
            .unwrap();
        s.record_task_run(&one_time("t", "2026-01-01T09:00:00Z", false))
            .unwrap();
        s.trip("t", ts("2026-01-01T09:00:01Z")).unwrap();
        s.reset("t").unwrap();
        s.trip("t", ts("2026-01-01T09:00:02Z")).unwrap();
        drop(s);
        // Another process (`approve`): no snapshot before its batch.
        let mut s = Store::open(dir.path()).unwrap();
        s.batch().unwrap();
        for task in ["f", "t", "o"] {
            s.record_task_run(&one_time(task, "2026-01-01T10:00:00Z", true))
                .unwrap();
        }
        s.flush().unwrap();
        let rows = task_state_rows(&s.conn);
        let streaks: Vec<(&str, &str, bool)> = rows
            .iter()
            .map(|r| {
                let id = r[0].as_deref().unwrap();
                (id, r[4].as_deref().unwrap(), r[6].is_some())
            })
            .collect();
        // Their failures are cleared (a trip stays until `reset`); the clean one needs no row.
        assert_eq!(streaks, [("f", "0", false), ("t", "0", true)]);
        let done: String = s
            .conn
            .query_row("SELECT done FROM task_batches", [], |r| r.get(0))
            .unwrap();
        assert_eq!(done, r#"["o"]"#);
    }

    #[test]
    fn a_damaged_done_list_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        s.conn
            .execute(
                "INSERT INTO task_batches (run_id, started_at, done, tasks)
                 VALUES ('r', '2026-01-01T10:00:00.000Z', '[\"a\", 3]', '[]')",
                [],
            )
            .unwrap();
        let err = snapshot_at(&s, "2026-01-01T11:00:00Z")
            .unwrap_err()
            .to_string();
        assert!(err.contains("heartbeat.db"), "{err}");
        assert!(err.contains("task_batches row 1"), "{err}");
    }

    #[test]
    fn task_state_after_successes_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let row = |s: &Store| task_state_rows(&s.conn).remove(0);
        let some = |v: &str| Some(v.to_string());
        s.record_reminded("t", ts("2026-01-01T09:00:00Z")).unwrap();
        s.batch().unwrap();
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T10:00:00Z", false))
                .unwrap(),
            1
        );
        assert_eq!(
            row(&s),
            [
                some("t"),
                some("2026-01-01T10:00:00.000Z"),
                None,
                some("failed"),
                some("1"),
                some("2026-01-01T09:00:00.000Z"),
                None
            ]
        );
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T11:00:00Z", true))
                .unwrap(),
            0
        );
        s.flush().unwrap();
        s.trip("t", ts("2026-01-01T11:30:00Z")).unwrap();
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T12:00:00Z", false))
                .unwrap(),
            1
        );
        assert_eq!(
            s.record_task_run(&run_of("t", "log", "2026-01-01T13:00:00Z", false))
                .unwrap(),
            2
        );
        // A failure keeps the last success; neither touches the reminder or the trip.
        assert_eq!(
            row(&s),
            [
                some("t"),
                some("2026-01-01T13:00:00.000Z"),
                some("2026-01-01T11:00:01.000Z"),
                some("failed"),
                some("2"),
                some("2026-01-01T09:00:00.000Z"),
                some("2026-01-01T11:30:00.000Z")
            ]
        );
        // A first run that succeeds.
        assert_eq!(
            s.record_task_run(&run_of("u", "log", "2026-01-01T10:00:00Z", true))
                .unwrap(),
            0
        );
        assert_eq!(
            task_state_rows(&s.conn)[1],
            [
                some("u"),
                some("2026-01-01T10:00:00.000Z"),
                some("2026-01-01T10:00:01.000Z"),
                some("succeeded"),
                some("0"),
                None,
                None
            ]
        );
    }

    #[test]
    fn the_days_spend_is_read_from_the_cost_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        assert_eq!(s.spent_since(ts("2000-01-01T00:00:00Z")).unwrap(), 0.0);
        for (at, cost) in [
            ("2026-01-01T10:00:00Z", Some(0.5)),
            ("2026-01-02T10:00:00Z", None),
            ("2026-01-02T11:00:00Z", Some(0.25)),
        ] {
            let mut r = run_of("t", "llm", at, true);
            r.cost_usd = cost;
            s.record_task_run(&r).unwrap();
        }
        assert_eq!(s.spent_since(ts("2026-01-01T10:00:00Z")).unwrap(), 0.75);
        assert_eq!(s.spent_since(ts("2026-01-02T00:00:00Z")).unwrap(), 0.25);
        assert_eq!(s.spent_since(ts("2026-01-03T00:00:00Z")).unwrap(), 0.0);
        let plan: String = s
            .conn
            .query_row(
                &format!("EXPLAIN QUERY PLAN {SPENT_SINCE}"),
                ["2026-01-02T00:00:00.000Z"],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("COVERING INDEX task_runs_cost"), "{plan}");
    }
}
