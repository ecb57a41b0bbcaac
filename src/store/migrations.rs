//! The schema, as a list of migrations, and bringing a database up to date.
//!
//! Invariants:
//! - Append-only: a released migration is never edited; a change is a new entry.
//! - `user_version` is the number of migrations applied; they run inside one IMMEDIATE
//!   transaction that reads it itself, so two processes opening a fresh database at once
//!   cannot both migrate, and a failed migration leaves the database as it was.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::{Result, StoreError, sql_err};

/// The schema version this binary writes.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(super) const MIGRATIONS: [&str; 21] = [
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
    r#"
-- One history row per tool run again: every task_batches row becomes the task_runs rows it
-- stood for (finished_at as the task_history view computed it), and each one-time task in
-- its `done` list gets the task_state row its success would have written, so it is not
-- run again.
INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at, outcome, cost_usd,
        approval_id)
    SELECT b.run_id, json_extract(t.value, '$[0]'), json_extract(t.value, '$[1]'),
        b.started_at,
        strftime('%Y-%m-%dT%H:%M:%fZ', b.started_at,
            '+' || (json_extract(t.value, '$[2]') / 1000.0) || ' seconds'),
        'succeeded', NULL, json_extract(t.value, '$[3]')
    FROM task_batches AS b, json_each(b.tasks) AS t
    ORDER BY b.id, t.key;
INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome,
        consecutive_failures)
    SELECT json_extract(t.value, '$[0]') AS task_id, MAX(b.started_at),
        MAX(strftime('%Y-%m-%dT%H:%M:%fZ', b.started_at,
            '+' || (json_extract(t.value, '$[2]') / 1000.0) || ' seconds')),
        'succeeded', 0
    FROM task_batches AS b, json_each(b.tasks) AS t
    WHERE b.done IS NOT NULL AND EXISTS
        (SELECT 1 FROM json_each(b.done) AS d WHERE d.value = json_extract(t.value, '$[0]'))
    GROUP BY task_id
    ON CONFLICT(task_id) DO UPDATE SET
        last_success = CASE
            WHEN task_state.last_success IS NULL
                OR task_state.last_success < excluded.last_success
            THEN excluded.last_success ELSE task_state.last_success END,
        last_outcome = CASE
            WHEN task_state.last_attempt IS NULL
                OR task_state.last_attempt <= excluded.last_attempt
            THEN 'succeeded' ELSE task_state.last_outcome END,
        last_attempt = CASE
            WHEN task_state.last_attempt IS NULL
                OR task_state.last_attempt < excluded.last_attempt
            THEN excluded.last_attempt ELSE task_state.last_attempt END;
DROP VIEW task_history;
DROP INDEX task_batches_done;
DROP TABLE task_batches;
-- Every tool run, one row each (the README shows queries over this name).
CREATE VIEW task_history AS
    SELECT run_id, task_id, tool, started_at, finished_at, outcome, cost_usd, approval_id
    FROM task_runs;
"#,
    // 9: the tools each MCP server listed (docs/reference.md#mcp-tools), for `run` to check inputs
    // against.
    r#"
CREATE TABLE mcp_listings (
    server TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    listed_at TEXT NOT NULL,
    tools TEXT NOT NULL
);
"#,
    // 10: tasks an agent proposed through `heartbeat mcp` (docs/reference.md#proposal-mark): asked
    // for until a person approves one run of them.
    r#"
CREATE TABLE proposals (
    task_id TEXT PRIMARY KEY,
    proposed_by TEXT NOT NULL,
    file TEXT NOT NULL,
    proposed_at TEXT NOT NULL,
    approved_by TEXT,
    approved_at TEXT
);
"#,
    // 11: one-time tasks with outside effects, started and not yet settled
    // (docs/reference.md#at-most-once): a start that a later run finds unsettled holds the task
    // until `heartbeat reset`.
    r#"
CREATE TABLE starts (
    task_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    section TEXT NOT NULL,
    held INTEGER NOT NULL DEFAULT 0
);
"#,
    // 12: a message's Reset buttons (task ids), like its approval buttons.
    r#"
ALTER TABLE outbox ADD COLUMN resets TEXT NOT NULL DEFAULT '[]';
"#,
    // 13: the rule a waiting message was audited as held under (`quiet_hours`,
    // `daily_cap`): said when it starts waiting, not again at every run.
    r#"
ALTER TABLE outbox ADD COLUMN held TEXT;
"#,
    // 14: what an agent did through `heartbeat mcp` (pause, resume, deny), one line each,
    // until a run prints it: the person hears it, also at the terminal.
    r#"
CREATE TABLE agent_notices (
    id INTEGER PRIMARY KEY,
    line TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"#,
    // 15: the config file an approval was queued under (NULL: none, or queued before this
    // column): `approve` from another directory runs it under that config, or refuses.
    r#"
ALTER TABLE approvals ADD COLUMN config TEXT;
"#,
    // 16: the outbox and the sent hashes are keyed by channel and destination, so that
    // channels other than Telegram can share them: `channel` names a channel's kind
    // (`notify::Channel::kind`; every row so far is Telegram's), `destination` is where it
    // goes in that channel's terms (a Telegram chat id as text), `payload` is what that
    // channel sends (Telegram's HTML, as `html` was). Ids and the id sequence are kept.
    r#"
CREATE TABLE outbox_v16 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    destination TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    urgent INTEGER NOT NULL DEFAULT 0,
    -- Exempt from the 6 h dedupe and the daily cap (replies, tests).
    direct INTEGER NOT NULL DEFAULT 0,
    approvals TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    resets TEXT NOT NULL DEFAULT '[]',
    held TEXT
);
INSERT INTO outbox_v16 (id, channel, destination, kind, payload, urgent, direct, approvals,
        created_at, attempts, last_error, resets, held)
    SELECT id, 'telegram', CAST(chat_id AS TEXT), kind, html, urgent, direct, approvals,
        created_at, attempts, last_error, resets, held
    FROM outbox;
DELETE FROM sqlite_sequence WHERE name = 'outbox_v16';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'outbox_v16', seq FROM sqlite_sequence WHERE name = 'outbox';
DROP TABLE outbox;
ALTER TABLE outbox_v16 RENAME TO outbox;
CREATE TABLE sent_v16 (
    channel TEXT NOT NULL,
    destination TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    counted INTEGER NOT NULL DEFAULT 1
);
INSERT INTO sent_v16 (channel, destination, text_hash, sent_at, counted)
    SELECT 'telegram', CAST(chat_id AS TEXT), text_hash, sent_at, counted FROM sent;
DROP TABLE sent;
ALTER TABLE sent_v16 RENAME TO sent;
CREATE INDEX sent_destination_time ON sent(channel, destination, sent_at);
"#,
    // 17: every channel of docs/reference.md#channels shares the outbox. `channel` is now a
    // channel's name (`telegram`, or `[channels.NAME]`); a message keeps its delivery id (the
    // idempotency key a channel sends; NULL on rows queued before: `hb-<id>`), its title and
    // its audit keys (`data`, JSON). The replies a channel read back (an ntfy approval's
    // token), so that a token is used once.
    r#"
ALTER TABLE outbox ADD COLUMN delivery_id TEXT;
ALTER TABLE outbox ADD COLUMN title TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN data TEXT NOT NULL DEFAULT '{}';
CREATE TABLE channel_replies (
    channel TEXT NOT NULL,
    token TEXT NOT NULL,
    seen_at TEXT NOT NULL,
    PRIMARY KEY (channel, token)
);
"#,
    // 18: the slots of calendar schedules (docs/reference.md#missed-slots): per task, the
    // latest slot handled (every slot at or before it is) and why the latest run that found
    // a slot due did not run it; the runs skipped as a whole, for the reason of a slot missed
    // while nothing ran it.
    r#"
CREATE TABLE task_slots (
    task_id TEXT PRIMARY KEY,
    handled TEXT NOT NULL,
    skip_reason TEXT,
    skip_at TEXT
);
CREATE TABLE run_skips (
    at TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX run_skips_at ON run_skips(at);
"#,
    // 19: what `heartbeat metrics` shows that retention must never lower
    // (docs/reference.md#metrics): stored totals (`runs` by result, `tasks` by tool and
    // outcome, `missed_slots`), each only ever incremented and never pruned, and the time of
    // the latest run (`last_run`, Unix seconds, only moved forward). A task's state keeps
    // the tool of its last success (filled from the history still kept).
    r#"
CREATE TABLE metrics (
    name TEXT NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    label TEXT NOT NULL DEFAULT '',
    value INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, tool, label)
) WITHOUT ROWID;
ALTER TABLE task_state ADD COLUMN last_success_tool TEXT;
UPDATE task_state SET last_success_tool = (
    SELECT tool FROM task_runs
    WHERE task_runs.task_id = task_state.task_id AND outcome = 'succeeded'
    ORDER BY finished_at DESC LIMIT 1)
WHERE last_success IS NOT NULL;
"#,
    // 20: snoozes (docs/reference.md#snooze): one per task, in force until `until`; `said`
    // once its `task_skipped` line was written.
    r#"
CREATE TABLE snoozes (
    task_id TEXT PRIMARY KEY,
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    since TEXT NOT NULL,
    until TEXT NOT NULL,
    reason TEXT,
    by TEXT NOT NULL,
    said INTEGER NOT NULL DEFAULT 0
);
"#,
    // 21: retries (docs/reference.md#retries): when a failed task is tried again, and how
    // many attempts of that chain failed so far (0 when none waits).
    r#"
ALTER TABLE task_state ADD COLUMN retry_at TEXT;
ALTER TABLE task_state ADD COLUMN retry_failures INTEGER NOT NULL DEFAULT 0;
-- An approval whose run failed and is tried again waits as 'retrying' (open: it holds its
-- task like a pending one). A CHECK cannot be altered: the table is built again, as in 7.
CREATE TABLE approvals_v21 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state = 'pending' OR state = 'approved' OR state = 'running'
        OR state = 'retrying' OR state = 'succeeded' OR state = 'failed' OR state = 'denied'
        OR state = 'expired' OR state = 'stale'),
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
    finished_at TEXT,
    config TEXT
);
INSERT INTO approvals_v21 (id, task_id, state, file, line, section, tool, input, text,
        created_at, decided_at, decided_by, reason, always, run_id, finished_at, config)
    SELECT id, task_id, state, file, line, section, tool, input, text, created_at,
        decided_at, decided_by, reason, always, run_id, finished_at, config
    FROM approvals;
DELETE FROM sqlite_sequence WHERE name = 'approvals_v21';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'approvals_v21', seq FROM sqlite_sequence WHERE name = 'approvals';
DROP TABLE approvals;
ALTER TABLE approvals_v21 RENAME TO approvals;
CREATE INDEX approvals_state ON approvals(state);
CREATE UNIQUE INDEX approvals_one_open ON approvals(task_id)
    WHERE state = 'pending' OR state = 'approved' OR state = 'running' OR state = 'retrying';
"#,
];

/// The schema an older heartbeat left: the first `version` migrations, and that
/// `user_version`. Only for tests of upgrades (heartbeat itself always migrates to the end).
#[doc(hidden)]
pub fn schema_at_version(conn: &Connection, version: usize) -> rusqlite::Result<()> {
    for sql in &MIGRATIONS[..version.min(MIGRATIONS.len())] {
        conn.execute_batch(sql)?;
    }
    conn.pragma_update(None, "user_version", version as i64)
}

/// Bring the database up to `SCHEMA_VERSION`; refuse one a newer heartbeat wrote.
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    // Most opens find the schema current: they need not wait for the write lock, which
    // other processes may be taking over and over.
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| sql_err(path, e))?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_err(path, e))?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| sql_err(path, e))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql).map_err(|e| sql_err(path, e))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(|e| sql_err(path, e))?;
    }
    tx.commit().map_err(|e| sql_err(path, e))
}

#[cfg(test)]
mod tests {
    use crate::store::{Approvals, History, Outbox, Snapshots};
    use std::collections::HashSet;
    use std::path::Path;
    use std::time::Duration;

    use rusqlite::Connection;

    use super::super::approvals::tests::new_approval;
    use super::super::history::tests::{assert_tool_state_matches_history, task_state_rows};
    use super::super::test_util::{conn, ts};
    use super::super::{DB_FILE, Sqlite};
    use super::*;

    /// A database as heartbeat with schema `version` left it.
    fn old_database(dir: &Path, version: usize) -> Connection {
        let conn = Connection::open(dir.join(DB_FILE)).unwrap();
        schema_at_version(&conn, version).unwrap();
        conn
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
        let db = old_database(dir.path(), 4);
        db.execute_batch(
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
        let before = task_state_rows(&db);
        assert_eq!(before.len(), 3);
        drop(db);

        // A read-only command after an upgrade brings it up to date too.
        let s = Sqlite::open_existing(dir.path()).unwrap().unwrap();
        assert_eq!(s.user_version().unwrap(), SCHEMA_VERSION);
        let runs: i64 = conn(&s)
            .query_row("SELECT COUNT(*) FROM task_history", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 4);
        assert_eq!(task_state_rows(conn(&s)), before);
        assert_eq!(indexes(conn(&s), "task_runs"), ["task_runs_cost"]);
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
        let s = Sqlite::open(dir.path()).unwrap();
        assert_eq!(task_state_rows(conn(&s)), before);
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
        let db = old_database(dir.path(), 4);
        db.execute_batch(
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
        let before = approval_rows(&db);
        drop(db);

        let mut s = Sqlite::open(dir.path()).unwrap();
        // The same rows; columns added since (the config it was queued under) are NULL.
        let after = approval_rows(conn(&s));
        let width = before[0].len();
        let kept: Vec<Vec<String>> = after.iter().map(|r| r[..width].to_vec()).collect();
        assert_eq!(kept, before);
        assert!(after.iter().all(|r| r[width..].iter().all(|v| v == "Null")));
        assert_eq!(
            indexes(conn(&s), "approvals"),
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
        let bad = conn(&s)
            .execute("UPDATE approvals SET state = 'maybe' WHERE id = 1", [])
            .unwrap_err();
        assert!(bad.to_string().contains("CHECK"), "{bad}");
    }

    #[test]
    fn approvals_keep_their_rows_and_ids_across_the_rebuild_of_schema_20() {
        let dir = tempfile::tempdir().unwrap();
        let db = old_database(dir.path(), 19);
        db.execute_batch(
            "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text,
                created_at, decided_at, decided_by, reason, always, run_id, finished_at, config)
             VALUES
                ('aaa', 'running', '/f', 3, 'recurring', 'shell', '{}', 't', '2026-01-01',
                 '2026-01-02', 'cli:me', NULL, 0, 'r1', NULL, '/c.toml'),
                ('bbb', 'failed', '/f', 4, 'one-time', 'log', '{}', 'u', '2026-01-01',
                 '2026-01-02', 'cli:me', 'exit 3', 1, 'r1', '2026-01-03', NULL);
             UPDATE sqlite_sequence SET seq = 10 WHERE name = 'approvals';",
        )
        .unwrap();
        let before = approval_rows(&db);
        drop(db);

        let mut s = Sqlite::open(dir.path()).unwrap();
        assert_eq!(approval_rows(conn(&s)), before);
        assert_eq!(
            indexes(conn(&s), "approvals"),
            ["approvals_one_open", "approvals_state"]
        );
        // A retry waits as `retrying`, which holds its task open like `running`.
        conn(&s)
            .execute("UPDATE approvals SET state = 'retrying' WHERE id = 1", [])
            .unwrap();
        let input = serde_json::json!({});
        let now = ts("2026-01-04T00:00:00Z");
        // The next id follows the highest ever handed out.
        assert_eq!(
            s.queue_approval(&new_approval("bbb", &input), now).unwrap(),
            Some(11)
        );
        assert_eq!(
            s.queue_approval(&new_approval("aaa", &input), now).unwrap(),
            None
        );
        let bad = conn(&s)
            .execute("UPDATE approvals SET state = 'maybe' WHERE id = 1", [])
            .unwrap_err();
        assert!(bad.to_string().contains("CHECK"), "{bad}");
    }

    /// `task_history` rows, every column as SQLite gives it, in one order.
    fn history(db: &Connection) -> Vec<Vec<String>> {
        let mut st = db
            .prepare(
                "SELECT run_id, task_id, tool, started_at, finished_at, outcome, cost_usd,
                 approval_id FROM task_history ORDER BY task_id, started_at, outcome",
            )
            .unwrap();
        st.query_map([], |r| {
            (0..8)
                .map(|i| r.get_ref(i).map(|v| format!("{v:?}")))
                .collect()
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    #[test]
    fn batch_rows_of_schema_7_become_history_rows_with_the_same_answers() {
        let dir = tempfile::tempdir().unwrap();
        let db = old_database(dir.path(), 7);
        db.execute_batch(
            r#"INSERT INTO task_runs (run_id, task_id, tool, started_at, finished_at, outcome,
                cost_usd, approval_id) VALUES
                ('r1', 'f', 'log', '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:01.000Z',
                 'failed', NULL, NULL),
                ('r1', 'paid', 'llm', '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:03.000Z',
                 'succeeded', 0.25, NULL),
                ('r1', 'x', 'log', '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:00.000Z',
                 'failed', NULL, NULL);
             INSERT INTO task_state (task_id, last_attempt, last_success, last_outcome,
                consecutive_failures) VALUES
                ('f', '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:01.000Z', 'succeeded', 0),
                ('paid', '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:03.000Z', 'succeeded', 0),
                ('r1', '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:01.000Z', 'succeeded', 0),
                ('x', '2026-01-01T10:00:00.000Z', NULL, 'failed', 1),
                ('rec', '2026-01-01T10:10:00.000Z', '2026-01-01T10:10:00.000Z', 'succeeded', 0);
             -- Queued before it was approved and ran in a batch.
             INSERT INTO task_state (task_id, last_attempt) VALUES
                ('asked', '2026-01-01T09:30:00.000Z');
             INSERT INTO tool_state (tool, last_start) VALUES
                ('log', '2026-01-01T10:10:00.000Z'), ('llm', '2026-01-01T10:00:00.000Z');
             INSERT INTO task_batches (run_id, started_at, done, tasks) VALUES
                ('r1', '2026-01-01T10:00:00.000Z', '["o1","o2","asked"]',
                 '[["o1","log",1000],["o2","log",1000],["f","log",1000],["r1","log",1000],["asked","log",1500,7]]'),
                ('r2', '2026-01-01T10:05:00.000Z', '["o3"]', '[["o3","log",250]]'),
                ('r3', '2026-01-01T10:10:00.000Z', NULL, '[["rec","log",0]]');"#,
        )
        .unwrap();
        let history_before = history(&db);
        assert_eq!(history_before.len(), 10);
        let spent_before: f64 = db
            .query_row("SELECT SUM(cost_usd) FROM task_history", [], |r| r.get(0))
            .unwrap();
        let done_before: HashSet<String> = {
            let mut st = db
                .prepare(
                    "SELECT task_id FROM task_state WHERE last_success IS NOT NULL
                     UNION SELECT d.value FROM task_batches AS b, json_each(b.done) AS d",
                )
                .unwrap();
            st.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        drop(db);

        let mut s = Sqlite::open(dir.path()).unwrap();
        assert_eq!(s.user_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(history(conn(&s)), history_before);
        let runs: i64 = conn(&s)
            .query_row("SELECT COUNT(*) FROM task_runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 10, "one task_runs row per tool run");
        let gone: i64 = conn(&s)
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'task_batches%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(gone, 0);
        assert_eq!(indexes(conn(&s), "task_runs"), ["task_runs_cost"]);
        assert_tool_state_matches_history(&s);
        let snap = s
            .snapshot(
                ts("2026-01-01T11:00:00Z"),
                Duration::from_secs(60),
                ts("2026-01-01T00:00:00Z"),
            )
            .unwrap();
        assert_eq!(snap.succeeded, done_before);
        assert_eq!(snap.spent_today, spent_before);
        assert_eq!(
            snap.failures,
            std::collections::HashMap::from([("x".to_string(), 1)])
        );
        let some = |v: &str| Some(v.to_string());
        let state = |id: &str| {
            task_state_rows(conn(&s))
                .into_iter()
                .find(|r| r[0].as_deref() == Some(id))
                .unwrap()
        };
        // What recording each success on its own would have written.
        assert_eq!(
            state("o3"),
            [
                some("o3"),
                some("2026-01-01T10:05:00.000Z"),
                some("2026-01-01T10:05:00.250Z"),
                some("succeeded"),
                some("0"),
                None,
                None
            ]
        );
        assert_eq!(
            state("asked"),
            [
                some("asked"),
                some("2026-01-01T10:00:00.000Z"),
                some("2026-01-01T10:00:01.500Z"),
                some("succeeded"),
                some("0"),
                None,
                None
            ]
        );
        // A task that was recorded in full keeps its row as it was.
        assert_eq!(state("f")[2].as_deref(), Some("2026-01-01T10:00:01.000Z"));
        // `reset` knows a done one-time task, with nothing to clear.
        assert_eq!(s.reset("o2").unwrap(), Some((0, false)));
        let before = task_state_rows(conn(&s));
        drop(s);
        // Opened again: nothing more to do, nothing changed.
        let s = Sqlite::open(dir.path()).unwrap();
        assert_eq!(task_state_rows(conn(&s)), before);
        assert_eq!(history(conn(&s)), history_before);
    }

    #[test]
    fn outbox_and_sent_rows_of_schema_15_move_to_channel_and_destination_intact() {
        let dir = tempfile::tempdir().unwrap();
        let db = old_database(dir.path(), 15);
        db.execute_batch(
            r#"INSERT INTO outbox (id, chat_id, kind, html, urgent, direct, approvals, created_at,
                attempts, last_error, resets, held) VALUES
                (3, 123, 'summary', '<b>run</b> ok', 0, 0, '[7]', '2026-01-01T10:00:00.000Z',
                 2, 'Bad Gateway', '[]', 'quiet_hours'),
                (5, -100200, 'alert', 'tripped', 1, 1, '[]', '2026-01-01T10:05:00.000Z',
                 0, NULL, '["0123456789ab"]', NULL);
             -- Later messages that were sent: their ids are not handed out again.
             UPDATE sqlite_sequence SET seq = 9 WHERE name = 'outbox';
             INSERT INTO sent (chat_id, text_hash, sent_at, counted) VALUES
                (123, 'aaaa', '2026-01-01T09:00:00.000Z', 1),
                (-100200, 'bbbb', '2026-01-01T09:30:00.000Z', 0);"#,
        )
        .unwrap();
        drop(db);

        let mut s = Sqlite::open(dir.path()).unwrap();
        assert_eq!(s.user_version().unwrap(), SCHEMA_VERSION);
        let row = |id, destination: &str, kind: &str, payload: &str| super::super::OutboxRow {
            id,
            channel: "telegram".into(),
            destination: destination.into(),
            kind: kind.into(),
            payload: payload.into(),
            urgent: false,
            direct: false,
            approvals: vec![],
            resets: vec![],
            created_at: String::new(),
            attempts: 0,
            held: None,
            // Queued before delivery ids: one made of its row id.
            delivery_id: format!("hb-{id}"),
            title: String::new(),
            data: "{}".into(),
        };
        assert_eq!(
            s.outbox().unwrap(),
            [
                super::super::OutboxRow {
                    approvals: vec![7],
                    created_at: "2026-01-01T10:00:00.000Z".into(),
                    attempts: 2,
                    held: Some(crate::model::HoldReason::QuietHours),
                    ..row(3, "123", "summary", "<b>run</b> ok")
                },
                super::super::OutboxRow {
                    urgent: true,
                    direct: true,
                    resets: vec!["0123456789ab".into()],
                    created_at: "2026-01-01T10:05:00.000Z".into(),
                    ..row(5, "-100200", "alert", "tripped")
                },
            ]
        );
        let last_error: Option<String> = conn(&s)
            .query_row("SELECT last_error FROM outbox WHERE id = 3", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(last_error.as_deref(), Some("Bad Gateway"));
        // What was sent still counts for the dedupe and the daily cap, per chat.
        let to = |d: &str| super::super::Destination {
            channel: "telegram".into(),
            destination: d.into(),
        };
        let since = ts("2026-01-01T00:00:00Z");
        assert!(s.sent_since(&to("123"), "aaaa", since).unwrap());
        assert!(!s.sent_since(&to("-100200"), "aaaa", since).unwrap());
        assert!(s.sent_since(&to("-100200"), "bbbb", since).unwrap());
        assert_eq!(s.count_sent(&to("123"), since).unwrap(), 1);
        assert_eq!(s.count_sent(&to("-100200"), since).unwrap(), 0);
        assert_eq!(indexes(conn(&s), "sent"), ["sent_destination_time"]);
        // The next id follows the highest ever handed out.
        let payload = crate::text::Redacted::from("next");
        let id = s
            .enqueue(
                &super::super::NewMessage {
                    channel: "telegram",
                    delivery_id: "hb_next",
                    title: &payload,
                    data: &"{}".into(),
                    destination: "123",
                    kind: "summary",
                    payload: &payload,
                    urgent: false,
                    direct: false,
                    approvals: &[],
                    resets: &[],
                },
                ts("2026-01-01T11:00:00Z"),
            )
            .unwrap();
        assert_eq!(id, 10);
    }
}
