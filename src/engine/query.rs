//! The read-only questions: what `status`, `check`, `approvals`, `grants` and `log` show, as
//! data, and the JSON their `--json` prints. The commands (`cmd/`) render it as text or print
//! the JSON; `heartbeat mcp` answers its agents with the same JSON, built by the same
//! functions.
//!
//! Invariants: nothing here writes, and nothing creates the state dir (a state dir that does
//! not exist yet reads as empty); the time is the caller's `now`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Map, Value, json};

use super::files::{Loaded, all_tasks, read_files, read_snapshot};
use super::mcp::{Servers, named_servers};
use crate::audit::filter::{Filter, Selection};
use crate::audit::reader::{AuditReader, ReadError};
use crate::clock::{SINCE_FORMS, Since, TIME_FORMS};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::lock;
use crate::mcp::{Catalog, Listing};
use crate::model::{Problem, Section, Severity, Task};
use crate::plan::{self, Decision, Plan, PlanInput};
use crate::schedule::{self, local_midnight};
use crate::store::{ApprovalRow, GrantRow, PauseRow, RunSummary, Snapshot, SnoozeRow, Store};
use crate::tools::Registry;

// ----- problems -----

/// The files' warnings, in file order then position, each once. `check` lists exactly these
/// and `run` prints exactly these: one function, so the two never disagree.
pub(crate) fn file_warnings(files: &[Loaded]) -> Vec<Problem> {
    let mut warnings: Vec<Problem> = files
        .iter()
        .flat_map(|f| f.parsed.problems.iter())
        .filter(|p| p.severity == Severity::Warning)
        .cloned()
        .collect();
    sort_problems(&mut warnings);
    warnings
}

/// By file, line and column (then message, so that equal ones sit together); identical ones
/// once (the tasks below one bad heading share its error).
pub(crate) fn sort_problems(problems: &mut Vec<Problem>) {
    problems.sort_by(|a, b| {
        (&a.file, a.line, a.column, &a.message).cmp(&(&b.file, b.line, b.column, &b.message))
    });
    problems.dedup();
}

// ----- grants -----

/// Whether a grant no longer matches a task: an edited task has a new id, so its grant is
/// left behind silently unless someone says so. Judged for the grants of the files read
/// (and of files that are gone); a grant of a file this command did not read (`check
/// --file` of another one) is not judged.
fn is_orphaned(g: &GrantRow, files: &[Loaded], ids: &HashSet<&str>) -> bool {
    let file = Path::new(&g.file);
    let read = files.iter().any(|f| f.source.path == file);
    (read || !file.exists()) && !ids.contains(g.task_id.as_str())
}

/// The task ids of the files read.
fn task_ids(files: &[Loaded]) -> HashSet<&str> {
    files
        .iter()
        .flat_map(|f| &f.parsed.tasks)
        .map(|t| t.id.as_str())
        .collect()
}

/// The grants of the state dir that no longer match a task of `files`.
pub(crate) fn orphaned(cfg: &Config, files: &[Loaded]) -> Result<Vec<GrantRow>> {
    let Some(store) = crate::store::open_existing(cfg)? else {
        return Ok(Vec::new());
    };
    let ids = task_ids(files);
    Ok(store
        .grants()?
        .into_iter()
        .filter(|g| is_orphaned(g, files, &ids))
        .collect())
}

/// What `check`, `status` and `run` say about a grant left behind.
pub(crate) fn orphan_message(g: &GrantRow) -> String {
    format!(
        "the grant for @{} (task {}) no longer matches a task: the task was edited or \
         removed, so it asks again; approve it with --always to grant it again, or `heartbeat \
         revoke {}`",
        g.tool, g.task_id, g.task_id
    )
}

/// The orphaned grants as warnings, at the line the task had.
pub(crate) fn orphan_problems(cfg: &Config, files: &[Loaded]) -> Result<Vec<Problem>> {
    Ok(orphaned(cfg, files)?
        .iter()
        .map(|g| Problem {
            file: PathBuf::from(&g.file),
            line: g.line.map_or(0, |l| l as usize),
            column: 0,
            severity: Severity::Warning,
            message: orphan_message(g),
        })
        .collect())
}

/// An always-grant, and whether it was left behind by an edit.
pub(crate) struct Grant {
    pub row: GrantRow,
    pub orphaned: bool,
}

/// Every always-grant (`heartbeat grants`). A file that cannot be read leaves its grants
/// unjudged, as `check` would fail on it.
pub(crate) fn grants(cfg: &Config) -> Result<Vec<Grant>> {
    let rows = match crate::store::open_existing(cfg)? {
        Some(store) => store.grants()?,
        None => Vec::new(),
    };
    let files = if rows.is_empty() {
        Vec::new()
    } else {
        read_files(cfg, true).unwrap_or_default()
    };
    let ids = task_ids(&files);
    let orphaned: Vec<bool> = rows.iter().map(|g| is_orphaned(g, &files, &ids)).collect();
    Ok(rows
        .into_iter()
        .zip(orphaned)
        .map(|(row, orphaned)| Grant { row, orphaned })
        .collect())
}

/// `grants --json`.
pub(crate) fn grants_json(grants: &[Grant]) -> Value {
    let list: Vec<Value> = grants
        .iter()
        .map(|Grant { row: g, orphaned }| {
            json!({
                "task_id": g.task_id,
                "file": g.file,
                "line": g.line,
                "tool": g.tool,
                "granted_at": g.created_at,
                "granted_by": g.created_by,
                "orphaned": orphaned,
                "input": g.input,
                "text": g.text,
                "created_at": g.created_at,
                "created_by": g.created_by,
                "approval_id": g.approval_id,
            })
        })
        .collect();
    Value::Array(list)
}

// ----- approvals -----

/// The approvals in `state` (None: all), from a state dir that may not exist yet.
pub(crate) fn approvals(
    cfg: &Config,
    state: Option<crate::model::ApprovalState>,
) -> Result<Vec<ApprovalRow>> {
    Ok(match crate::store::open_existing(cfg)? {
        Some(store) => store.approvals(state)?,
        None => Vec::new(),
    })
}

/// `approvals --json` of these rows (also the `approvals` tool of `heartbeat mcp`).
pub(crate) fn approvals_json(rows: &[ApprovalRow]) -> Value {
    let list: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "task_id": r.task_id,
                "state": r.state,
                "tool": r.tool,
                "input": r.input,
                "file": r.file,
                "line": r.line,
                "section": r.section,
                "text": r.text,
                "created_at": r.created_at,
                "decided_at": r.decided_at,
                "decided_by": r.decided_by,
                "reason": r.reason,
                "config": r.config,
                "retry_at": r.retry_at,
            })
        })
        .collect();
    Value::Array(list)
}

// ----- status -----

/// A held task (tripped, interrupted, or a reminder given) as a person finds it: its tool and
/// place in the files as they are now, when it is still there.
pub(crate) struct Held {
    pub task_id: String,
    pub tool: Option<String>,
    pub file: Option<PathBuf>,
    pub line: Option<usize>,
    /// The task's text, for a reminder.
    pub text: Option<String>,
}

impl Held {
    fn json(&self) -> Value {
        json!({"task_id": self.task_id, "tool": self.tool, "file": self.file, "line": self.line})
    }
}

/// What `status` shows, read once.
pub(crate) struct Status {
    pub state_dir: PathBuf,
    pub daily_usd: f64,
    pub last_run: Option<RunSummary>,
    pub pending: i64,
    /// Spent since local midnight in the configured zone.
    pub spent: f64,
    pub outbox: i64,
    /// The pause in force now (a timed pause that has ended no longer counts).
    pub pause: Option<PauseRow>,
    pub tripped: Vec<Held>,
    /// One-time tasks held after an interrupted run.
    pub interrupted: Vec<Held>,
    /// One-time reminders already given and not ticked yet: they wait for the person.
    pub reminded: Vec<Held>,
    pub orphaned_grants: Vec<GrantRow>,
    /// The snoozes in force, the soonest to end first (docs/reference.md#snooze).
    pub snoozed: Vec<SnoozeRow>,
    /// Who holds the run lock.
    pub holder: Option<lock::Holder>,
    /// The daemon running on this state dir.
    pub daemon: Option<lock::Holder>,
    /// Until when Telegram asked not to be sent anything (HTTP 429), if that is still ahead.
    pub telegram_wait: Option<String>,
    /// Every configured channel, Telegram first.
    pub channels: Vec<ChannelState>,
    /// In a fleet: the nodes, what differs between them, and who ran the latest tasks
    /// (docs/fleet.md#visible). None on one host.
    pub fleet: Option<FleetState>,
    /// Of the pending approvals, those past `approval_ttl` at `now`: no longer approvable,
    /// the next run marks them expired.
    pub expiring: i64,
    /// The open task due soonest, and when.
    pub next_due: Option<(Held, DateTime<Utc>)>,
}

/// The fleet as `status` and `doctor` show it.
#[derive(Clone, Debug)]
pub(crate) struct FleetState {
    pub nodes: Vec<crate::store::NodeRow>,
    pub warnings: Vec<String>,
    pub recent: Vec<crate::store::RecentRun>,
    pub leases: Vec<crate::store::LeaseRow>,
}

impl FleetState {
    pub(crate) fn read(store: &dyn Store) -> Result<FleetState> {
        let nodes = store.nodes()?;
        Ok(FleetState {
            warnings: fleet_warnings(&nodes),
            nodes,
            recent: store.recent_runs(20)?,
            leases: store.leases()?,
        })
    }

    fn json(&self) -> (Value, Value, Value) {
        let nodes = self
            .nodes
            .iter()
            .map(|n| {
                json!({
                    "node": n.name,
                    "host": n.host,
                    "last_seen": crate::audit::format_ts(n.last_seen),
                    "version": n.version,
                    "files": n.files,
                })
            })
            .collect::<Vec<_>>();
        let recent = self
            .recent
            .iter()
            .map(
                |r| json!({"task_id": r.task_id, "node": r.node, "at": r.at, "outcome": r.outcome}),
            )
            .collect::<Vec<_>>();
        (json!(nodes), json!(self.warnings), json!(recent))
    }
}

/// What should be the same on every node and is not: a HEARTBEAT file's content, the
/// version of heartbeat.
fn fleet_warnings(nodes: &[crate::store::NodeRow]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut by_file: std::collections::BTreeMap<&str, Vec<(&str, &str)>> = Default::default();
    for n in nodes {
        for (file, hash) in &n.files {
            by_file.entry(file).or_default().push((&n.name, hash));
        }
    }
    for (file, seen) in by_file {
        if seen.iter().any(|(_, h)| *h != seen[0].1) {
            let shown: Vec<String> = seen
                .iter()
                .map(|(node, hash)| format!("{node} {}", &hash[..hash.len().min(12)]))
                .collect();
            warnings.push(format!(
                "{file} differs between nodes ({}): sync the clones",
                shown.join(", ")
            ));
        }
    }
    let versions: std::collections::BTreeSet<&str> =
        nodes.iter().map(|n| n.version.as_str()).collect();
    if versions.len() > 1 {
        let shown: Vec<String> = nodes
            .iter()
            .map(|n| format!("{} {}", n.name, n.version))
            .collect();
        warnings.push(format!(
            "the nodes run different versions of heartbeat ({})",
            shown.join(", ")
        ));
    }
    warnings
}

/// A configured channel as `status` and `check` show it (docs/reference.md#status-json).
pub(crate) struct ChannelState {
    pub name: String,
    /// `telegram`, `ntfy`, `slack`, …
    pub kind: &'static str,
    /// Its messages waiting in the outbox.
    pub queued: usize,
    /// The error of its last delivery, when that failed: a later send that succeeds clears
    /// it (`engine/outbox.rs` `deliver_channel`).
    pub last_error: Option<String>,
    /// When it last accepted a message.
    pub last_sent: Option<String>,
}

impl ChannelState {
    fn json(&self) -> Value {
        json!({
            "kind": self.kind,
            "queued": self.queued,
            "last_error": self.last_error,
            "last_sent": self.last_sent,
        })
    }

    /// What a person reads about a channel whose last delivery failed.
    pub(crate) fn failure(&self) -> Option<String> {
        let error = self.last_error.as_deref()?;
        Some(format!(
            "channel {} ({}): its last delivery failed: {}; {} message(s) queued",
            self.name,
            self.kind,
            crate::text::clean(error),
            self.queued
        ))
    }
}

/// Every configured channel's state as the store holds it (none without a store yet).
fn channel_states(cfg: &Config, store: Option<&dyn Store>) -> Result<Vec<ChannelState>> {
    let rows = match store {
        Some(s) => s.outbox()?,
        None => Vec::new(),
    };
    let mut states = Vec::new();
    for channel in crate::notify::open(cfg, None) {
        let name = channel.name();
        let (sent_key, error_key) = super::outbox::state_keys(name);
        let meta = |key: &str| -> Result<Option<String>> {
            Ok(match store {
                Some(s) => s.meta(key)?.filter(|v| !v.is_empty()),
                None => None,
            })
        };
        states.push(ChannelState {
            name: name.to_string(),
            kind: channel.kind(),
            queued: rows.iter().filter(|r| r.channel == name).count(),
            last_error: meta(&error_key)?,
            last_sent: meta(&sent_key)?,
        });
    }
    Ok(states)
}

/// Look the held task ids up in the files.
fn place(cfg: &Config, files: &[Loaded], ids: &[String]) -> Vec<Held> {
    let tasks = all_tasks(files);
    ids.iter()
        .map(|id| {
            let task = tasks.iter().find(|t| &t.id == id);
            Held {
                task_id: id.clone(),
                tool: task.and_then(|t| {
                    plan::tool_call(t, cfg.plain_tasks).map(|(name, _)| name.to_string())
                }),
                file: task.map(|t| t.file.to_path_buf()),
                line: task.map(|t| t.line),
                text: None,
            }
        })
        .collect()
}

/// One-time reminders already given and not ticked yet.
fn reminded(cfg: &Config, files: &[Loaded], snapshot: &Snapshot) -> Vec<Held> {
    if snapshot.reminded.is_empty() {
        return Vec::new();
    }
    all_tasks(files)
        .into_iter()
        .filter(|t| {
            t.section == Section::OneTime
                && !t.done
                && snapshot.reminded.contains(&t.id)
                && plan::tool_call(t, cfg.plain_tasks).is_none()
        })
        .map(|t| Held {
            task_id: t.id.clone(),
            tool: None,
            file: Some(t.file.to_path_buf()),
            line: Some(t.line),
            text: Some(crate::report::safe_text(t)),
        })
        .collect()
}

/// The pending approvals created at or before `now - ttl`: what the next run expires
/// (`store::Approvals::expire_pending`).
fn expiring(store: &dyn Store, now: DateTime<Utc>, ttl: std::time::Duration) -> Result<i64> {
    let ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    let cutoff = now
        .checked_sub_signed(ttl)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let pending = store.approvals(Some(crate::model::ApprovalState::Pending))?;
    Ok(pending
        .iter()
        .filter(|a| crate::store::parse_ts(&a.created_at).is_some_and(|at| at <= cutoff))
        .count() as i64)
}

/// The open task due soonest by the plan of the files at `now` (what `check` shows as
/// "next due"), and when; a task that waits for a person's decision is left out. MCP tools
/// are known from the cached listings: no server is started.
fn next_due(
    cfg: &Config,
    files: &[Loaded],
    store: Option<&dyn Store>,
    snapshot: &Snapshot,
    now: DateTime<Utc>,
) -> Result<Option<(Held, DateTime<Utc>)>> {
    let (catalog, _) = super::mcp::cached(cfg, store, now)?;
    let registry = Registry::from_config(cfg).with_catalog(&catalog);
    let tasks = all_tasks(files);
    let plan = plan::plan(
        &tasks,
        &PlanInput {
            config: cfg,
            registry: &registry,
            state: snapshot,
            now,
            force: false,
            autonomy: cfg.autonomy,
            manual: false,
        },
    );
    let soonest = plan
        .items
        .iter()
        .filter(|p| !matches!(p.decision, Decision::Pending(_) | Decision::Denied))
        .filter_map(|p| p.next_due.map(|at| (at, p)))
        .min_by_key(|(at, _)| *at);
    Ok(soonest.map(|(at, p)| {
        let held = place(cfg, files, std::slice::from_ref(&p.task.id)).remove(0);
        (held, at)
    }))
}

/// `heartbeat status`: the state dir at `now`, and the files as they are now (one that
/// cannot be read is left out: `status` works whatever state the files are in).
pub(crate) fn status(cfg: &Config, now: DateTime<Utc>) -> Result<Status> {
    let store = crate::store::open_existing(cfg)?;
    let interrupted = match &store {
        Some(s) => s.unsettled()?,
        None => Vec::new(),
    };
    let telegram_wait = match &store {
        Some(s) => s
            .meta(super::outbox::RETRY_AT_KEY)?
            .filter(|at| crate::store::parse_ts(at).is_some_and(|at| at > now)),
        None => None,
    };
    let snoozed = match &store {
        Some(s) => s.snoozes(now)?,
        None => Vec::new(),
    };
    let (last_run, pending, spent, outbox, pause, tripped) = match &store {
        Some(s) => {
            // The budget day starts at local midnight in the configured zone.
            let midnight = local_midnight(cfg.tz(), now);
            // A timed pause that has ended no longer counts (the next run records it).
            let pause = s.pause_row()?.filter(|p: &PauseRow| p.in_force(now));
            (
                s.last_run()?,
                s.count_pending()?,
                s.spent_since(midnight)?,
                s.outbox_len()?,
                pause,
                s.tripped()?,
            )
        }
        None => (None, 0, 0.0, 0, None, Vec::new()),
    };
    let lock_path = cfg.state_dir.join(lock::LOCK_FILE);
    let holder = lock::probe(&cfg.state_dir).map_err(|e| Error::io(&lock_path, e))?;
    let daemon = lock::probe_daemon(&cfg.state_dir)
        .map_err(|e| Error::io(cfg.state_dir.join(lock::DAEMON_FILE), e))?;
    let files = read_files(cfg, true).unwrap_or_default();
    let tripped = place(cfg, &files, &tripped);
    let interrupted = place(cfg, &files, &interrupted);
    let snapshot = read_snapshot(cfg, now)?;
    let reminded = reminded(cfg, &files, &snapshot);
    let orphaned_grants = orphaned(cfg, &files)?;
    let channels = channel_states(cfg, store.as_deref())?;
    let fleet = match (&cfg.fleet, &store) {
        (Some(_), Some(s)) => Some(FleetState::read(&**s)?),
        _ => None,
    };
    let expiring = match &store {
        Some(s) => expiring(s.as_ref(), now, cfg.approval_ttl)?,
        None => 0,
    };
    let next_due = next_due(cfg, &files, store.as_deref(), &snapshot, now)?;
    Ok(Status {
        state_dir: cfg.state_dir.clone(),
        daily_usd: cfg.daily_usd,
        last_run,
        pending,
        spent,
        outbox,
        pause,
        tripped,
        interrupted,
        reminded,
        orphaned_grants,
        snoozed,
        holder,
        daemon,
        telegram_wait,
        channels,
        fleet,
        expiring,
        next_due,
    })
}

impl Status {
    /// `status --json` (also the `status` tool of `heartbeat mcp`).
    pub(crate) fn json(&self) -> Value {
        let ids = |held: &[Held]| held.iter().map(|h| h.task_id.clone()).collect::<Vec<_>>();
        let mut status = json!({
            "paused": self.pause.is_some(),
            "paused_until": self.pause.as_ref().and_then(|p| p.until.clone()),
            "pause_reason": self.pause.as_ref().and_then(|p| p.reason.clone()),
            "paused_by": self.pause.as_ref().map(|p| p.by.clone()),
            "last_run": self.last_run.as_ref().map(|r| json!({
                "run_id": r.run_id,
                "at": r.started_at,
                "succeeded": r.succeeded,
                "failed": r.failed,
            })),
            "pending_approvals": self.pending,
            "budget": {"spent_usd": self.spent, "daily_usd": self.daily_usd},
            "tripped": ids(&self.tripped),
            "tripped_tasks": self.tripped.iter().map(Held::json).collect::<Vec<_>>(),
            "interrupted": ids(&self.interrupted),
            "interrupted_tasks": self.interrupted.iter().map(Held::json).collect::<Vec<_>>(),
            "reminded": self.reminded
                .iter()
                .map(|r| json!({"task_id": r.task_id, "file": r.file, "line": r.line, "text": r.text}))
                .collect::<Vec<_>>(),
            "orphaned_grants": self.orphaned_grants
                .iter()
                .map(|g| g.task_id.clone())
                .collect::<Vec<_>>(),
            "snoozed": self.snoozed
                .iter()
                .map(|s| json!({
                    "task_id": s.task_id,
                    "until": crate::audit::format_ts(s.until),
                    "reason": s.reason,
                    "by": s.by,
                }))
                .collect::<Vec<_>>(),
            "outbox": self.outbox,
            "channels": self.channels
                .iter()
                .map(|c| (c.name.clone(), c.json()))
                .collect::<Map<String, Value>>(),
            "lock": {
                "held": self.holder.is_some(),
                "pid": self.holder.as_ref().and_then(|h| h.pid),
                "since": self.holder.as_ref().and_then(|h| h.since).map(crate::audit::format_ts),
            },
            "daemon": {
                "running": self.daemon.is_some(),
                "pid": self.daemon.as_ref().and_then(|h| h.pid),
                "since": self.daemon.as_ref().and_then(|h| h.since).map(crate::audit::format_ts),
                "next_tick": self.daemon.as_ref().and_then(|h| h.next).map(crate::audit::format_ts),
            },
            "state_dir": self.state_dir,
            "expiring_approvals": self.expiring,
            "next_due": self.next_due.as_ref().map(|(held, at)| {
                let mut next = held.json();
                next["at"] = json!(crate::audit::format_ts(*at));
                next
            }),
        });
        if let (Some(fleet), Value::Object(keys)) = (&self.fleet, &mut status) {
            let (nodes, warnings, recent) = fleet.json();
            keys.insert("nodes".into(), nodes);
            keys.insert("warnings".into(), warnings);
            keys.insert("recent".into(), recent);
        }
        status
    }
}

// ----- check -----

/// What `check` reads: the config, its files, the tools their tasks name and the stored
/// state. [`Checked::report`] plans the tasks (borrowed from the files) and finds the
/// problems.
pub(crate) struct Checked {
    pub cfg: Config,
    pub files: Vec<Loaded>,
    pub snapshot: Snapshot,
    registry: Registry,
    now: DateTime<Utc>,
    /// The problems found without the plan: the files' warnings, orphaned state, the
    /// config's warnings, short secrets, future attempt times.
    problems: Vec<Problem>,
}

/// What `check` finds: every task with its decision, and the problems.
pub(crate) struct CheckReport<'a> {
    pub checked: &'a Checked,
    /// Every task of every file, in file order; the plan's items belong to them in order.
    pub tasks: Vec<&'a Task>,
    pub plan: Plan<'a>,
    pub problems: Vec<Problem>,
    pub errors: usize,
}

/// Read the config's files and state as `check` does, at `now`.
pub(crate) fn check(cfg: Config, now: DateTime<Utc>, allow_missing: bool) -> Result<Checked> {
    let files = read_files(&cfg, allow_missing)?;
    let registry =
        Registry::from_config(&cfg).with_catalog(&list_mcp_servers(&cfg, &all_tasks(&files)));
    let snapshot = read_snapshot(&cfg, now)?;

    let mut problems: Vec<Problem> = file_warnings(&files);
    problems.extend(orphan_problems(&cfg, &files)?);
    // The config's own warnings (a file named twice, a glob that matches nothing), by the
    // config file (or `--file`) they come from.
    for warning in &cfg.warnings {
        let config = cfg.source.as_ref().map(|p| format!("{}: ", p.display()));
        let (file, message) = match warning.strip_prefix("--file: ") {
            Some(rest) => ("--file".into(), rest),
            None => match config.as_deref().and_then(|c| warning.strip_prefix(c)) {
                Some(rest) => (cfg.source.clone().unwrap_or_default(), rest),
                None => (cfg.source.clone().unwrap_or_default(), warning.as_str()),
            },
        };
        problems.push(Problem {
            message: message.to_string(),
            file,
            line: 0,
            column: 0,
            severity: Severity::Warning,
        });
    }
    // Secrets too short to be looked for inside other text: said, since they are not hidden.
    for name in crate::audit::short_secrets(&cfg) {
        problems.push(Problem {
            file: cfg.source.clone().unwrap_or_default(),
            line: 0,
            column: 0,
            severity: Severity::Warning,
            message: format!(
                "the value of ${name} is shorter than {} characters: it is kept out of tools' \
                 environments, but it is not hidden inside other text (audit lines, messages, \
                 output), where it would cut out every ordinary occurrence; a secret needs a \
                 longer value",
                crate::redact::MIN_SECRET
            ),
        });
    }
    // A channel whose last delivery failed: its messages wait (only when one is configured:
    // check opens no store for nothing).
    if cfg.telegram.is_some() || !cfg.channels.is_empty() {
        let store = crate::store::open_existing(&cfg)?;
        for failure in channel_states(&cfg, store.as_deref())?
            .iter()
            .filter_map(ChannelState::failure)
        {
            problems.push(Problem {
                file: cfg.source.clone().unwrap_or_default(),
                line: 0,
                column: 0,
                severity: Severity::Warning,
                message: failure,
            });
        }
    }
    problems.extend(never_active_slots(&cfg, &files, now));
    problems.extend(past_one_time_dates(&cfg, &files, &snapshot, now));
    problems.extend(unexpanded_shell_words(&files));
    if snapshot.future_times > 0 {
        // Not a file's problem: it is named by the database that holds the times.
        problems.push(Problem {
            file: cfg.state_dir.join(crate::store::DB_FILE),
            line: 0,
            column: 0,
            severity: Severity::Warning,
            message: format!(
                "{} stored attempt time(s) are later than now ({}); they count as now (a \
                 clock that stepped back, or a run with a future --now) and the next run \
                 stores them as now",
                snapshot.future_times,
                crate::audit::format_ts(now)
            ),
        });
    }
    Ok(Checked {
        cfg,
        files,
        snapshot,
        registry,
        now,
        problems,
    })
}

/// A warning at a task's place.
fn warning_at(task: &Task, message: String) -> Problem {
    Problem {
        file: task.file.to_path_buf(),
        line: task.line,
        column: task.column,
        severity: Severity::Warning,
        message,
    }
}

/// A warning for each `@shell` task whose argv-form `cmd` holds a `~` or a `$VAR`: no shell
/// runs, so nothing expands them, and the program gets them as written.
fn unexpanded_shell_words(files: &[Loaded]) -> Vec<Problem> {
    let home = std::env::var("HOME").unwrap_or_default();
    let mut out = Vec::new();
    for task in files.iter().flat_map(|f| f.parsed.tasks.iter()) {
        let crate::model::Body::Tool { name, input } = &task.body else {
            continue;
        };
        let Some(Value::Array(argv)) = input.get("cmd").filter(|_| name == "shell") else {
            continue;
        };
        for word in argv.iter().filter_map(Value::as_str) {
            let tilde = word.starts_with('~');
            let var = word.contains('$');
            if !(tilde || var) {
                continue;
            }
            let fix = match word.strip_prefix("~/") {
                Some(rest) if !home.is_empty() && !var => {
                    format!("write {:?}", format!("{home}/{rest}"))
                }
                _ => "write its value, or give cmd as one string, which `sh -c` runs and \
                      expands"
                    .to_string(),
            };
            out.push(warning_at(
                task,
                format!(
                    "{word:?} in an argv-form cmd is not expanded: no shell runs it, so the \
                     program gets {} as written; {fix}",
                    if tilde { "the ~" } else { "the $" }
                ),
            ));
        }
    }
    out
}

/// A warning for each open one-time task whose date has passed and that has not run yet: a
/// year typed wrong (`At 2025-12-24` meant for 2026) would make it run at the next run.
fn past_one_time_dates(
    cfg: &Config,
    files: &[Loaded],
    snapshot: &Snapshot,
    now: DateTime<Utc>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    for task in files.iter().flat_map(|f| f.parsed.tasks.iter()) {
        let Some(crate::model::Schedule::Once(at)) = &task.schedule else {
            continue;
        };
        if task.done
            || snapshot.succeeded.contains(&task.id)
            || snapshot.reminded.contains(&task.id)
            || snapshot.pending.contains_key(&task.id)
        {
            continue;
        }
        let tz = task.zone_or(cfg.tz());
        let when = schedule::local_instant(tz, *at);
        if when < now {
            out.push(warning_at(
                task,
                format!(
                    "its date {} is already past ({} ago): it runs at the next run; is the \
                     year right?",
                    crate::render::show_time(when, tz),
                    crate::render::ago(when, now)
                ),
            ));
        }
    }
    out
}

/// A warning for each open task of a calendar schedule none of whose slots (over the next
/// year, up to 2,000 of them) leaves any active time before its deadline: active hours
/// would hold it back at every slot, and it would never run (a heading in another zone, a
/// night job under day hours).
fn never_active_slots(cfg: &Config, files: &[Loaded], now: DateTime<Utc>) -> Vec<Problem> {
    let year = now + chrono::Duration::days(366);
    let mut out = Vec::new();
    for task in files.iter().flat_map(|f| f.parsed.tasks.iter()) {
        let schedule = task.schedule.as_ref();
        if task.done || task.section != Section::Recurring || !schedule::has_slots(schedule) {
            continue;
        }
        let tz = task.zone_or(cfg.tz());
        let rules = crate::plan::slot_rules(cfg, task);
        let mut slots = schedule::slots(schedule, tz, now, year, rules)
            .take(2000)
            .peekable();
        if slots.peek().is_none() {
            continue;
        }
        let reachable = slots.any(|s| {
            cfg.active
                .next_active(s.at)
                .is_some_and(|active| active < s.deadline)
        });
        if !reachable {
            let w = cfg.active.window;
            out.push(warning_at(
                task,
                format!(
                    "its schedule's slots never fall inside active hours ({:02}:{:02}-{:02}:{:02} \
                     in {}): it would never run",
                    w.start / 60,
                    w.start % 60,
                    w.end / 60,
                    w.end % 60,
                    cfg.tz()
                ),
            ));
        }
    }
    out
}

/// What `heartbeat mcp` shows instead of the text of a task whose input does not parse.
const INVALID_TEXT: &str = "(not shown: its input does not parse; see problems)";

impl Checked {
    /// The plan of every task, and every problem (an invalid task's among them), sorted.
    pub(crate) fn report(&self) -> CheckReport<'_> {
        let cfg = &self.cfg;
        let tasks = all_tasks(&self.files);
        let plan = plan::plan(
            &tasks,
            &PlanInput {
                config: cfg,
                registry: &self.registry,
                state: &self.snapshot,
                now: self.now,
                force: false,
                autonomy: cfg.autonomy,
                manual: false,
            },
        );
        let mut problems = self.problems.clone();
        for (task, planned) in tasks.iter().zip(&plan.items) {
            if let Decision::Invalid {
                line,
                column,
                error,
            } = &planned.decision
            {
                problems.push(Problem {
                    file: task.file.to_path_buf(),
                    line: *line,
                    column: *column,
                    severity: Severity::Error,
                    message: error.clone(),
                });
            }
        }
        sort_problems(&mut problems);
        let errors = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        CheckReport {
            checked: self,
            tasks,
            plan,
            problems,
            errors,
        }
    }

    /// Who proposed a task: its mark in the file, or the store for a task proposed before
    /// marks were written. None for a person's own task.
    pub(crate) fn provenance<'a>(&'a self, task: &'a Task) -> Option<&'a str> {
        task.proposed_by
            .as_deref()
            .or_else(|| self.snapshot.proposed_by.get(&task.id).map(String::as_str))
    }
}

impl CheckReport<'_> {
    /// The decision for the task with this id, if it is in the files.
    pub(crate) fn decision_of(&self, id: &str) -> Option<&Decision<'_>> {
        self.plan
            .items
            .iter()
            .find(|p| p.task.id == id)
            .map(|p| &p.decision)
    }

    /// The `check` tool of `heartbeat mcp`: `check --json`, with a task whose input does not
    /// parse shown by its place and error only: its source may hold a secret that redaction
    /// cannot find (a password in single quotes), and the answer leaves the person's machine.
    pub(crate) fn agent_json(&self) -> Value {
        let mut json = self.json();
        if let Some(shown) = json["tasks"].as_array_mut() {
            for (task, shown) in self.tasks.iter().zip(shown) {
                if matches!(task.body, crate::model::Body::Invalid { .. }) {
                    shown["text"] = Value::from(INVALID_TEXT);
                }
            }
        }
        json
    }

    /// `check --json`.
    pub(crate) fn json(&self) -> Value {
        let checked = self.checked;
        let tasks_json: Vec<Value> = self
            .tasks
            .iter()
            .zip(&self.plan.items)
            .map(|(task, planned)| {
                let (tool, input) = planned.shown_call(checked.cfg.plain_tasks);
                json!({
                    "task_id": task.id,
                    "file": &*task.file,
                    "line": task.line,
                    "section": task.section.as_str(),
                    "text": task.text,
                    "tool": tool.as_deref().or_else(|| task.tool_name()),
                    "input": input,
                    "schedule": task.schedule.as_ref().and(task.heading.as_deref()),
                    "heading": task.heading.as_deref(),
                    "done": task.done,
                    "decision": planned.decision.as_str(),
                    "reason": match &planned.decision {
                        Decision::Skip(r) => Some(r.as_str()),
                        _ => None,
                    },
                    "approval_id": match planned.decision {
                        Decision::Pending(id) | Decision::Approved(id) => Some(id),
                        _ => None,
                    },
                    "next_due": planned.next_due.map(crate::audit::format_ts),
                    "provenance": checked.provenance(task).unwrap_or("file"),
                })
            })
            .collect();
        json!({
            "files": checked.files.iter().map(|f| &f.source.path).collect::<Vec<_>>(),
            "config": checked.cfg.source,
            "active": self.plan.active,
            "next_active": self.plan.next_active.map(crate::audit::format_ts),
            "tasks": tasks_json,
            "problems": self.problems.iter().map(|p| json!({
                "file": p.file,
                "line": p.line,
                "column": p.column,
                "severity": p.severity,
                "message": p.message,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Every MCP server that an open task names, started and asked for its tools now (check
/// writes nothing: the run's cache is left alone). A server that cannot be listed makes its
/// tasks invalid, with the reason.
fn list_mcp_servers(cfg: &Config, tasks: &[&Task]) -> Catalog {
    let mut catalog = Catalog::new();
    if cfg.mcp.is_empty() {
        return catalog;
    }
    crate::audit::Secrets::from_config(cfg);
    let named = named_servers(
        cfg,
        tasks
            .iter()
            .filter(|t| !t.done && t.section != Section::Other)
            .filter_map(|t| Some((t.tool_name()?, &*t.file))),
    );
    let mut servers = Servers::new(cfg);
    for (server, workdir) in named {
        let listing = match servers.list(&server, workdir) {
            Ok(tools) => Listing::Tools(tools),
            Err(why) => Listing::Unavailable(why),
        };
        catalog.insert(server, listing);
    }
    catalog
}

/// What `check` decides for one task (a task about to be proposed), with the file's other
/// tasks left out; a call it makes is copied out of the registry made for it.
pub(crate) fn decide_one(
    cfg: &Config,
    now: DateTime<Utc>,
    task: &Task,
) -> Result<Decision<'static>> {
    let tasks = &[task];
    let registry = Registry::from_config(cfg).with_catalog(&list_mcp_servers(cfg, tasks));
    let snapshot = read_snapshot(cfg, now)?;
    let plan = plan::plan(
        tasks,
        &PlanInput {
            config: cfg,
            registry: &registry,
            state: &snapshot,
            now,
            force: false,
            autonomy: cfg.autonomy,
            manual: false,
        },
    );
    Ok(plan
        .items
        .into_iter()
        .next()
        .map_or(Decision::Ignored, |p| p.decision.into_owned()))
}

// ----- log -----

/// Which audit lines to show, as typed (`heartbeat log`'s options, or the `log` tool's input).
#[derive(Default)]
pub(crate) struct LogQuery<'a> {
    /// `--since`: a duration back from now, or a time.
    pub since: Option<&'a str>,
    pub events: Vec<String>,
    pub task: Option<&'a str>,
    pub run: Option<&'a str>,
}

/// The filter `query` asks for at `now`; `zone` is asked for only when `since` is a local
/// time.
pub(crate) fn log_filter(
    query: &LogQuery,
    now: DateTime<Utc>,
    zone: impl FnOnce() -> Tz,
) -> Result<Filter> {
    let since = query
        .since
        .map(|s| parse_since(s, now, zone))
        .transpose()?
        .flatten();
    Filter::new(since, query.events.clone(), query.task, query.run).map_err(Error::Usage)
}

/// `--since` (see [`Since`]); a local time is read in `zone`. None: no lower bound (a
/// duration reaching before the start of time).
fn parse_since(
    raw: &str,
    now: DateTime<Utc>,
    zone: impl FnOnce() -> Tz,
) -> Result<Option<DateTime<Utc>>> {
    let Some(since) = Since::parse(raw) else {
        return Err(Error::Usage(format!(
            "--since: {:?} is not a time: expected {SINCE_FORMS}, or {TIME_FORMS}",
            crate::text::clean(raw)
        )));
    };
    let tz = if since.is_local() { zone() } else { Tz::UTC };
    Ok(since.start(now, tz))
}

/// A failed read of one of the log's files, as the command's error.
pub(crate) fn read_error(e: ReadError) -> Error {
    Error::io(e.path, e.source)
}

/// The log's lines that `filter` selects (as `log --json --all` would print them, parsed),
/// the last `limit` of them: the `log` tool of `heartbeat mcp`.
pub(crate) fn log_lines(
    cfg: &Config,
    filter: Filter,
    limit: usize,
) -> Result<Vec<Map<String, Value>>> {
    let mut reader = AuditReader::from_start(&cfg.audit_log, filter.since());
    let mut selection = Selection::new(filter, false, Some(limit));
    let mut found = Vec::new();
    while let Some(line) = reader.next_line().map_err(read_error)? {
        selection.line(line, |_, obj| obj.clone(), &mut |obj| found.push(obj));
    }
    selection.end(&mut |obj| found.push(obj));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;
    use crate::store::{NewGrant, TaskRunRecord};

    /// A config in a temp dir: one HEARTBEAT.md with `md`, the state dir `state` beside it,
    /// Berlin time.
    fn setup(md: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("HEARTBEAT.md"), md).unwrap();
        let toml = dir.path().join("heartbeat.toml");
        std::fs::write(
            &toml,
            "files = [\"HEARTBEAT.md\"]\nstate_dir = \"state\"\ntimezone = \"Europe/Berlin\"\n",
        )
        .unwrap();
        let env = |_: &str| None;
        let cfg = crate::config::load(&LoadOptions {
            config: Some(toml),
            files: Vec::new(),
            state_dir: None,
            cwd: dir.path().to_path_buf(),
            env: &env,
        })
        .unwrap();
        (dir, cfg)
    }

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn open_store(cfg: &Config) -> Box<dyn crate::store::Store> {
        crate::engine::files::ensure_state_dir(&cfg.state_dir).unwrap();
        crate::store::open(cfg).unwrap()
    }

    const NOW: &str = "2026-05-04T10:00:00Z";

    const MD: &str = "# H\n\n## Recurring\n\n- [ ] @log {\"text\": \"hi\"}\n- [ ] @nosuchtool {}\n\n\
                      ## One-time\n\n- [ ] water the plants\n";

    fn task_id(cfg: &Config, text: &str) -> String {
        let files = read_files(cfg, false).unwrap();
        all_tasks(&files)
            .iter()
            .find(|t| t.text.contains(text))
            .map(|t| t.id.clone())
            .unwrap()
    }

    #[test]
    fn status_of_a_state_dir_not_made_yet_is_empty_and_makes_nothing() {
        let (_dir, cfg) = setup(MD);
        let status = status(&cfg, ts(NOW)).unwrap();
        assert!(status.last_run.is_none() && status.pause.is_none());
        assert_eq!((status.pending, status.outbox, status.spent), (0, 0, 0.0));
        assert!(status.tripped.is_empty() && status.reminded.is_empty());
        assert!(!cfg.state_dir.exists(), "status created the state dir");
        let json = status.json();
        assert_eq!(json["paused"], false);
        assert_eq!(json["last_run"], Value::Null);
        assert_eq!(json["lock"]["held"], false);
    }

    #[test]
    fn status_places_held_tasks_in_the_files_and_counts_the_local_day() {
        let (_dir, cfg) = setup(MD);
        let log = task_id(&cfg, "@log");
        let plants = task_id(&cfg, "water");
        let mut store = open_store(&cfg);
        store
            .start_run("r1", "once", ts("2026-05-04T09:00:00Z"))
            .unwrap();
        // 21:59 UTC on the 3rd is before Berlin's midnight; 22:01 is after it.
        for (at, cost) in [
            ("2026-05-03T21:59:00Z", 1.0),
            ("2026-05-03T22:01:00Z", 0.25),
        ] {
            store
                .record_task_run(&TaskRunRecord {
                    run_id: "r1",
                    task_id: &log,
                    tool: "log",
                    started_at: ts(at),
                    finished_at: ts(at),
                    succeeded: false,
                    interrupted: false,
                    cost_usd: Some(cost),
                    approval_id: None,
                    error: None,
                    retried: false,
                    retry_at: None,
                    not_started: false,
                })
                .unwrap();
        }
        store.trip(&log, ts("2026-05-04T09:00:00Z")).unwrap();
        store
            .trip("0123456789ab", ts("2026-05-04T09:00:00Z"))
            .unwrap();
        store
            .record_reminded(&plants, ts("2026-05-04T09:00:00Z"))
            .unwrap();
        drop(store);

        let status = status(&cfg, ts(NOW)).unwrap();
        assert_eq!(status.spent, 0.25);
        let tripped: Vec<_> = status.tripped.iter().map(|h| h.task_id.as_str()).collect();
        assert_eq!(tripped, [log.as_str()]);
        assert_eq!(status.tripped[0].tool.as_deref(), Some("log"));
        assert_eq!(status.tripped[0].line, Some(5));
        assert_eq!(status.reminded.len(), 1);
        assert_eq!(status.reminded[0].task_id, plants);
        assert_eq!(status.reminded[0].text.as_deref(), Some("water the plants"));
        let json = status.json();
        assert_eq!(json["tripped"], json!([log]));
        assert_eq!(json["tripped_tasks"][0]["tool"], "log");
        assert_eq!(json["budget"]["spent_usd"], 0.25);
    }

    #[test]
    fn check_lists_every_task_with_its_decision_and_the_errors() {
        let (_dir, cfg) = setup(MD);
        let loaded = check(cfg, ts(NOW), false).unwrap();
        let checked = loaded.report();
        assert_eq!(checked.tasks.len(), 3);
        assert_eq!(checked.errors, 1);
        let error = checked
            .problems
            .iter()
            .find(|p| p.severity == Severity::Error)
            .unwrap();
        assert_eq!(error.line, 6);
        assert!(error.message.contains("nosuchtool"), "{}", error.message);
        let log = checked.tasks[0].id.clone();
        assert_eq!(checked.decision_of(&log).map(Decision::as_str), Some("run"));
        assert!(checked.decision_of("ffffffffffff").is_none());
        let json = checked.json();
        assert_eq!(json["tasks"][1]["decision"], "invalid");
        assert_eq!(json["tasks"][0]["provenance"], "file");
    }

    #[test]
    fn a_task_about_to_be_proposed_is_decided_alone() {
        let (_dir, cfg) = setup(MD);
        let files = read_files(&cfg, false).unwrap();
        let tasks = all_tasks(&files);
        let decided = decide_one(&cfg, ts(NOW), tasks[1]).unwrap();
        assert!(matches!(decided, Decision::Invalid { .. }), "{decided:?}");
        assert_eq!(decide_one(&cfg, ts(NOW), tasks[0]).unwrap().as_str(), "run");
    }

    #[test]
    fn grants_left_behind_by_an_edit_are_orphaned() {
        let (dir, cfg) = setup(MD);
        let log = task_id(&cfg, "@log");
        let file = dir.path().join("HEARTBEAT.md").display().to_string();
        let mut store = open_store(&cfg);
        for id in [log.as_str(), "0123456789ab"] {
            store
                .add_grant(&NewGrant {
                    task_id: id.into(),
                    tool: "log".into(),
                    input: crate::audit::Secrets::default().redact_json(json!({})),
                    file: file.clone(),
                    text: "x".into(),
                    created_at: "2026-05-01T10:00:00.000Z".into(),
                    created_by: "cli:me".into(),
                    approval_id: None,
                })
                .unwrap();
        }
        drop(store);
        let grants = grants(&cfg).unwrap();
        let judged: Vec<(&str, bool)> = grants
            .iter()
            .map(|g| (g.row.task_id.as_str(), g.orphaned))
            .collect();
        assert_eq!(judged.len(), 2);
        assert!(judged.contains(&(log.as_str(), false)));
        assert!(judged.contains(&("0123456789ab", true)));
        let files = read_files(&cfg, false).unwrap();
        let problems = orphan_problems(&cfg, &files).unwrap();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("revoke 0123456789ab"));
        let json = grants_json(&grants);
        assert_eq!(json.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn approvals_of_a_state_dir_not_made_yet_are_none() {
        let (_dir, cfg) = setup(MD);
        assert!(approvals(&cfg, None).unwrap().is_empty());
        assert_eq!(approvals_json(&[]), json!([]));
        assert!(!cfg.state_dir.exists());
    }

    #[test]
    fn a_local_since_is_read_in_the_zone_and_only_then_asks_for_it() {
        let now = ts(NOW);
        let local = LogQuery {
            since: Some("2026-05-04 09:00"),
            ..LogQuery::default()
        };
        let filter = log_filter(&local, now, || chrono_tz::Europe::Berlin).unwrap();
        assert_eq!(filter.since(), Some(ts("2026-05-04T07:00:00Z")));
        let back = LogQuery {
            since: Some("2h"),
            ..LogQuery::default()
        };
        let filter = log_filter(&back, now, || panic!("a duration needs no zone")).unwrap();
        assert_eq!(filter.since(), Some(ts("2026-05-04T08:00:00Z")));
        let bad = LogQuery {
            since: Some("yesterday-ish"),
            ..LogQuery::default()
        };
        assert!(matches!(
            log_filter(&bad, now, || Tz::UTC),
            Err(Error::Usage(_))
        ));
    }

    #[test]
    fn log_lines_are_the_last_matching_ones_in_order() {
        let (_dir, cfg) = setup(MD);
        std::fs::create_dir_all(cfg.audit_log.parent().unwrap()).unwrap();
        let mut log = String::new();
        for (i, event) in [
            "run_started",
            "task_failed",
            "task_succeeded",
            "task_failed",
        ]
        .iter()
        .enumerate()
        {
            log.push_str(&format!(
                "{{\"ts\":\"2026-05-04T09:0{i}:00.000Z\",\"event\":\"{event}\",\"n\":{i}}}\n"
            ));
        }
        std::fs::write(&cfg.audit_log, log).unwrap();
        let failed = LogQuery {
            events: vec!["task_failed".into()],
            ..LogQuery::default()
        };
        let filter = log_filter(&failed, ts(NOW), || Tz::UTC).unwrap();
        let lines = log_lines(&cfg, filter, 10).unwrap();
        let n: Vec<_> = lines.iter().map(|l| l["n"].clone()).collect();
        assert_eq!(n, [json!(1), json!(3)]);
        let filter = log_filter(&LogQuery::default(), ts(NOW), || Tz::UTC).unwrap();
        let last = log_lines(&cfg, filter, 1).unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(last[0]["n"], 3);
    }
}
