//! The PostgreSQL schema, as a list of migrations (its own, numbered from 1; SQLite's are
//! in `store/migrations.rs`), and bringing a database up to date.
//!
//! Invariants:
//! - Append-only: a released migration is never edited; a change is a new entry.
//! - `heartbeat_schema.version` is the number of migrations applied. They run in one
//!   transaction under `pg_advisory_xact_lock`, which reads the version itself, so that the
//!   nodes of a fleet starting at once migrate once, and a failed migration leaves the
//!   database as it was.
//! - A database that holds tables of the same names that heartbeat did not create is
//!   refused, never used or changed.
//! - The tables mirror SQLite's (the same names, columns and meanings), so each concern's
//!   SQL reads the same in both; integers are BIGINT, times RFC 3339 UTC text with
//!   milliseconds (they sort as text), except the fleet's own clocks (`nodes`, `leases`),
//!   which are the database's `timestamptz`.

/// The schema version this binary writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The key of the advisory lock migrations run under (any fixed number; "hbschema").
pub(super) const MIGRATION_LOCK: i64 = 0x6862_7363_6865_6d61;

/// The tables migration 1 creates: a database that has any of them without
/// `heartbeat_schema` is not heartbeat's.
pub(super) const TABLES: &[&str] = &[
    "task_state",
    "runs",
    "task_runs",
    "grants",
    "tg_messages",
    "tg_chats",
    "meta",
    "pause",
    "tool_state",
    "mcp_listings",
    "proposals",
    "starts",
    "agent_notices",
    "outbox",
    "sent",
    "channel_replies",
    "task_slots",
    "run_skips",
    "metrics",
    "snoozes",
    "approvals",
    "claims",
    "leases",
    "nodes",
];

pub(super) const MIGRATIONS: [&str; 1] = [r#"
CREATE TABLE task_state (
    task_id TEXT PRIMARY KEY,
    last_attempt TEXT,
    last_success TEXT,
    last_outcome TEXT,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    reminded_at TEXT,
    tripped_at TEXT,
    last_success_tool TEXT,
    retry_at TEXT,
    retry_failures BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    succeeded BIGINT NOT NULL DEFAULT 0,
    failed BIGINT NOT NULL DEFAULT 0,
    queued BIGINT NOT NULL DEFAULT 0,
    skipped BIGINT NOT NULL DEFAULT 0,
    invalid BIGINT NOT NULL DEFAULT 0,
    node TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_started ON runs(started_at);
CREATE TABLE task_runs (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    cost_usd DOUBLE PRECISION,
    approval_id BIGINT,
    node TEXT NOT NULL DEFAULT ''
);
CREATE INDEX task_runs_cost ON task_runs(started_at, cost_usd) WHERE cost_usd IS NOT NULL;
CREATE INDEX task_runs_task ON task_runs(task_id, finished_at);
CREATE TABLE grants (
    task_id TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    file TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    approval_id BIGINT
);
CREATE TABLE tg_messages (
    chat_id BIGINT NOT NULL,
    message_id BIGINT NOT NULL,
    html TEXT NOT NULL,
    approvals TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
CREATE TABLE tg_chats (
    chat_id BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    last_seen TEXT NOT NULL
);
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE pause (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    since TEXT NOT NULL,
    until TEXT,
    reason TEXT,
    by TEXT NOT NULL
);
CREATE TABLE tool_state (
    tool TEXT PRIMARY KEY,
    last_start TEXT NOT NULL
);
CREATE TABLE mcp_listings (
    server TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    listed_at TEXT NOT NULL,
    tools TEXT NOT NULL
);
CREATE TABLE proposals (
    task_id TEXT PRIMARY KEY,
    proposed_by TEXT NOT NULL,
    file TEXT NOT NULL,
    proposed_at TEXT NOT NULL,
    approved_by TEXT,
    approved_at TEXT
);
CREATE TABLE starts (
    task_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    file TEXT NOT NULL,
    line BIGINT NOT NULL,
    section TEXT NOT NULL,
    held BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE agent_notices (
    id BIGSERIAL PRIMARY KEY,
    line TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE outbox (
    id BIGSERIAL PRIMARY KEY,
    channel TEXT NOT NULL,
    destination TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    urgent BIGINT NOT NULL DEFAULT 0,
    direct BIGINT NOT NULL DEFAULT 0,
    approvals TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    resets TEXT NOT NULL DEFAULT '[]',
    held TEXT,
    delivery_id TEXT,
    title TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE sent (
    channel TEXT NOT NULL,
    destination TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    counted BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX sent_destination_time ON sent(channel, destination, sent_at);
CREATE TABLE channel_replies (
    channel TEXT NOT NULL,
    token TEXT NOT NULL,
    seen_at TEXT NOT NULL,
    PRIMARY KEY (channel, token)
);
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
CREATE TABLE metrics (
    name TEXT NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    label TEXT NOT NULL DEFAULT '',
    value BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name, tool, label)
);
CREATE TABLE snoozes (
    task_id TEXT PRIMARY KEY,
    file TEXT NOT NULL,
    line BIGINT NOT NULL,
    since TEXT NOT NULL,
    until TEXT NOT NULL,
    reason TEXT,
    by TEXT NOT NULL,
    said BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE approvals (
    id BIGSERIAL PRIMARY KEY,
    task_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'running', 'retrying',
        'succeeded', 'failed', 'denied', 'expired', 'stale')),
    file TEXT NOT NULL,
    line BIGINT NOT NULL,
    section TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    reason TEXT,
    always BIGINT NOT NULL DEFAULT 0,
    run_id TEXT,
    finished_at TEXT,
    config TEXT
);
CREATE INDEX approvals_state ON approvals(state);
CREATE UNIQUE INDEX approvals_one_open ON approvals(task_id)
    WHERE state IN ('pending', 'approved', 'running', 'retrying');
-- Exactly once per slot: the node whose insert wins runs the task for that slot.
CREATE TABLE claims (
    task_id TEXT NOT NULL,
    slot TEXT NOT NULL,
    node TEXT NOT NULL,
    run_id TEXT NOT NULL,
    claimed_at TEXT NOT NULL,
    PRIMARY KEY (task_id, slot)
);
-- Singletons (the Telegram poller, reply pollers, delivery): one holder at a time.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT,
    term BIGINT NOT NULL DEFAULT 0,
    expires_at TIMESTAMPTZ
);
-- One name, one node: the key in the node's state dir owns the name.
CREATE TABLE nodes (
    name TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    host TEXT NOT NULL,
    version TEXT NOT NULL,
    files TEXT NOT NULL DEFAULT '{}',
    daemon BIGINT NOT NULL DEFAULT 0,
    first_seen TIMESTAMPTZ NOT NULL,
    last_seen TIMESTAMPTZ NOT NULL
);
"#];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_created_is_listed_as_ours() {
        let created: Vec<&str> = MIGRATIONS
            .iter()
            .flat_map(|m| m.lines())
            .filter_map(|l| l.strip_prefix("CREATE TABLE "))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        let mut listed = TABLES.to_vec();
        listed.sort_unstable();
        let mut created_sorted = created.clone();
        created_sorted.sort_unstable();
        assert_eq!(created_sorted, listed);
    }
}
