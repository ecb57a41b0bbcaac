//! `heartbeat doctor` (docs/reference.md#doctor): is anything wrong or missed? [`read`]
//! gathers what the checks look at (the state dir, the audit log, the files as `check`
//! reads them, the scheduler outside heartbeat); [`judge`] turns it into one [`Check`] per
//! question, in a fixed order, as a pure function of what was read and `now`.
//!
//! Invariants:
//! - Nothing here writes: no audit line, no SQLite write (the store is opened read-only and
//!   leaves no file behind), no file in the state dir; the state dir's writability is asked
//!   of the kernel (`access`), never tried.
//! - A scheduler is never a failure: what cannot be told is `info`.
//! - The checks come in one order, [`judge`]'s (and `mcp` last, only when asked for).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Map, Value, json};

use super::mcp::Servers;
use super::query;
use crate::audit::reader::{AuditReader, object, parse_line};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::lock::Holder;
use crate::model::{ApprovalState, Problem, Severity};
use crate::render::show_time;

/// With no usual interval known, a last run older than this fails.
const NO_INTERVAL_LIMIT: Duration = Duration::from_secs(2 * 3600);

/// A queued message older than this is late.
const LATE_MESSAGE: Duration = Duration::from_secs(3600);

/// Less free space than this in the state dir fails.
const MIN_FREE: u64 = 64 * 1024 * 1024;

/// How long `crontab` and `systemctl` may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// What those two programs see of heartbeat's environment: where programs are, who the user
/// is, and how to reach the user's systemd.
const ASK_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check: what was found, and what to do about it (none when all is well).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Check {
    pub id: &'static str,
    pub status: Status,
    pub message: String,
    pub advice: Option<String>,
}

impl Check {
    fn ok(id: &'static str, message: impl Into<String>) -> Check {
        Check {
            id,
            status: Status::Ok,
            message: message.into(),
            advice: None,
        }
    }

    fn with(
        id: &'static str,
        status: Status,
        message: impl Into<String>,
        advice: impl Into<String>,
    ) -> Check {
        Check {
            id,
            status,
            message: message.into(),
            advice: Some(advice.into()),
        }
    }
}

/// What a program outside heartbeat says about it (`crontab -l`, the user's systemd timers).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    /// It names heartbeat (for a timer: the unit's name).
    Names(String),
    /// It answered, and does not name heartbeat.
    Nothing,
    /// It is not there, failed or did not answer in time.
    Unknown,
}

/// A slot a `task_missed` line reported.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Missed {
    pub slot: DateTime<Utc>,
    /// `FILE:LINE`, or the task id when the line does not say.
    pub place: String,
    pub reason: Option<String>,
    /// How many slots it stands for (1, or 1 + the `count` of earlier ones not listed).
    pub slots: u64,
}

/// A channel's delivery as stored.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Channel {
    pub name: String,
    /// When each waiting message was queued.
    pub queued: Vec<DateTime<Utc>>,
    /// The error of its last failed delivery, when that was its last delivery.
    pub failed: Option<String>,
}

/// A pending approval.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pending {
    pub id: i64,
    pub created_at: DateTime<Utc>,
}

/// What the checks look at, read once.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    pub now: DateTime<Utc>,
    pub tz: Tz,
    /// The window's start (`--since`).
    pub since: DateTime<Utc>,
    /// The daemon holding the state dir, if one does.
    pub daemon: Option<Holder>,
    /// `[daemon] every`.
    pub daemon_every: Duration,
    pub crontab: Found,
    pub timers: Found,
    /// When the window's scheduled runs started (cron, timers, daemon ticks; not `approve`
    /// or a tick asked for), oldest first.
    pub runs: Vec<DateTime<Utc>>,
    /// When the last run started, also before the window.
    pub last_run: Option<DateTime<Utc>>,
    pub missed: Vec<Missed>,
    /// Who holds the run lock.
    pub lock: Option<Holder>,
    pub stuck_after: Duration,
    /// Tripped tasks, as shown (`@tool FILE:LINE (task ID)`).
    pub tripped: Vec<(String, String)>,
    pub pending: Vec<Pending>,
    /// Approvals that expired in the window (nobody decided them).
    pub expired: Vec<i64>,
    pub approval_ttl: Duration,
    pub channels: Vec<Channel>,
    /// The files' errors and warnings as `check` finds them; Err: they could not be read.
    pub files: std::result::Result<(Vec<String>, Vec<String>), String>,
    /// Stored times later than now.
    pub future_times: usize,
    pub state_dir: PathBuf,
    /// Err: why it cannot be written.
    pub writable: std::result::Result<(), String>,
    /// Bytes free for an ordinary user on its file system.
    pub free: Option<u64>,
    pub monitors: Vec<String>,
    /// With `--deep`: each MCP server and how many tools it listed, or why it could not.
    pub mcp: Option<Vec<(String, std::result::Result<usize, String>)>>,
    /// In a fleet: its database and what it holds (docs/fleet.md#visible). None on one host.
    pub fleet: Option<query::FleetState>,
}

// ----- judging -----

/// Every check, in the order they are shown, then `mcp` when it was asked for.
pub(crate) fn judge(f: &Facts) -> Vec<Check> {
    let mut checks = vec![
        scheduler(f),
        last_run(f),
        missed(f),
        run_lock(f),
        tripped(f),
        approvals(f),
        delivery(f),
        files(f),
        clock(f),
        state_dir(f),
        monitors(f),
    ];
    if let Some(fleet) = &f.fleet {
        checks.extend(fleet_checks(fleet, f.now));
    }
    if let Some(servers) = &f.mcp {
        checks.push(mcp(servers));
    }
    checks
}

/// `store`, `nodes` and `leases` of a fleet whose database answered.
fn fleet_checks(f: &query::FleetState, now: DateTime<Utc>) -> Vec<Check> {
    let store = Check::ok("store", "the fleet's PostgreSQL answers");
    let nodes = if f.warnings.is_empty() {
        Check::ok(
            "nodes",
            format!("{} node(s), files and versions agree", f.nodes.len()),
        )
    } else {
        Check::with(
            "nodes",
            Status::Warn,
            f.warnings.join("; "),
            "give every node the same HEARTBEAT files (one git repository, synced) and the same heartbeat",
        )
    };
    // A daemon is expected when a node said it runs one; then the singletons need a holder.
    let daemons = f.nodes.iter().any(|n| n.daemon);
    let idle: Vec<&str> = f
        .leases
        .iter()
        .filter(|l| l.holder.is_none() || l.expires_at.is_some_and(|t| t <= now))
        .map(|l| l.name.as_str())
        .collect();
    let leases = if daemons && !idle.is_empty() {
        Check::with(
            "leases",
            Status::Warn,
            format!("no node holds {}", idle.join(", ")),
            "a daemon should hold them: is every node's daemon running and reaching the database?",
        )
    } else {
        let held = f.leases.iter().filter(|l| l.holder.is_some()).count();
        Check::ok("leases", format!("{held} of {} held", f.leases.len()))
    };
    vec![store, nodes, leases]
}

/// The one check a fleet gets when its database cannot be reached: nothing runs.
pub(crate) fn store_unreachable(why: &str) -> Check {
    Check::with(
        "store",
        Status::Fail,
        why.to_string(),
        "nothing runs until PostgreSQL answers: is it up, is the URL's password right?",
    )
}

/// `doctor --json`.
pub(crate) fn json(checks: &[Check]) -> Value {
    json!({
        "checks": checks.iter().map(|c| json!({
            "id": c.id,
            "status": c.status.as_str(),
            "message": c.message,
            "advice": c.advice,
        })).collect::<Vec<_>>(),
    })
}

/// 0 when nothing failed, 1 when something did.
pub(crate) fn exit_code(checks: &[Check]) -> u8 {
    if checks.iter().any(|c| c.status == Status::Fail) {
        crate::exit::TASK_FAILED
    } else {
        crate::exit::OK
    }
}

/// A span for people, to the second under a minute, else to the minute.
fn span(d: Duration) -> String {
    let secs = d.as_secs();
    let shown = if secs < 60 { secs } else { secs / 60 * 60 };
    humantime::format_duration(Duration::from_secs(shown)).to_string()
}

fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> Duration {
    (now - then).to_std().unwrap_or_default()
}

/// The gaps between runs, when there are any.
fn gaps(runs: &[DateTime<Utc>]) -> Vec<Duration> {
    runs.windows(2)
        .filter_map(|w| (w[1] - w[0]).to_std().ok())
        .filter(|d| !d.is_zero())
        .collect()
}

/// The median gap between the window's runs.
pub(crate) fn usual_interval(runs: &[DateTime<Utc>]) -> Option<Duration> {
    let mut gaps = gaps(runs);
    if gaps.is_empty() {
        return None;
    }
    gaps.sort();
    Some(gaps[gaps.len() / 2])
}

/// The interval the runs came at, when they came regularly: three runs or more, and three
/// gaps in four within a tenth (at least 5 s) of the median.
pub(crate) fn regular_interval(runs: &[DateTime<Utc>]) -> Option<Duration> {
    let gaps = gaps(runs);
    if gaps.len() < 2 {
        return None;
    }
    let usual = usual_interval(runs)?;
    let slack = (usual / 10).max(Duration::from_secs(5));
    let near = gaps.iter().filter(|g| g.abs_diff(usual) <= slack).count();
    (near * 4 >= gaps.len() * 3).then_some(usual)
}

fn scheduler(f: &Facts) -> Check {
    const ID: &str = "scheduler";
    if let Some(d) = &f.daemon {
        let pid = d.pid.map_or("?".into(), |p| p.to_string());
        return Check::ok(ID, format!("a daemon (pid {pid}) runs heartbeat"));
    }
    if let Found::Names(_) = f.crontab {
        return Check::ok(ID, "a crontab line names heartbeat");
    }
    if let Found::Names(unit) = &f.timers {
        return Check::ok(ID, format!("a systemd user timer names heartbeat ({unit})"));
    }
    if let Some(every) = regular_interval(&f.runs) {
        return Check::ok(
            ID,
            format!(
                "the window's {} runs came every {}: something starts heartbeat",
                f.runs.len(),
                span(every)
            ),
        );
    }
    let looked = match (&f.crontab, &f.timers) {
        (Found::Unknown, Found::Unknown) => {
            "no daemon runs, and no crontab or systemd could be asked"
        }
        _ => "no daemon runs, and no crontab line or systemd user timer names heartbeat",
    };
    Check::with(
        ID,
        Status::Info,
        format!(
            "cannot tell what starts heartbeat: {looked}, and the window's runs came at no regular interval"
        ),
        "if nothing does, add a crontab line such as `*/5 * * * * heartbeat run --once -q`, \
         or run `heartbeat daemon`",
    )
}

fn last_run(f: &Facts) -> Check {
    const ID: &str = "last_run";
    let usual = usual_interval(&f.runs);
    let (limit, basis) = match (&f.daemon, usual) {
        (Some(d), _) => {
            // The daemon's interval: `[daemon] every`, or longer when it was started with a
            // longer --every (its next tick says so).
            let every = match (d.next, f.last_run) {
                (Some(next), Some(last)) if next > last => f.daemon_every.max(age(next, last)),
                _ => f.daemon_every,
            };
            (
                every * 3,
                format!("3× the daemon's interval of {}", span(every)),
            )
        }
        (None, Some(usual)) => (
            usual * 3,
            format!("3× the usual interval of {}", span(usual)),
        ),
        (None, None) => (
            NO_INTERVAL_LIMIT,
            "2 h (no usual interval is known)".to_string(),
        ),
    };
    let Some(last) = f.last_run else {
        return Check::with(
            ID,
            Status::Fail,
            "no run of heartbeat is recorded in this state dir",
            "start it from cron (`*/5 * * * * heartbeat run --once -q`), a systemd timer, or \
             `heartbeat daemon`",
        );
    };
    let ago = age(f.now, last);
    let when = show_time(last, f.tz);
    if ago <= limit {
        return Check::ok(
            ID,
            format!("the last run started {} ago ({when})", span(ago)),
        );
    }
    let advice = match (&f.daemon, &f.timers) {
        (Some(d), _) => format!(
            "the daemon (pid {}) has not ticked since {when}; is it stuck? `heartbeat status` \
             shows its next tick",
            d.pid.map_or("?".into(), |p| p.to_string())
        ),
        (None, Found::Names(unit)) => format!(
            "nothing has run heartbeat since {when}; is its systemd timer {unit} still active \
             (`systemctl --user status {unit}`)?"
        ),
        (None, _) => format!(
            "nothing has run heartbeat since {when}; is its crontab line still there \
             (`crontab -l`)?"
        ),
    };
    Check::with(
        ID,
        Status::Fail,
        format!(
            "the last run started {} ago ({when}), more than {basis}",
            span(ago)
        ),
        advice,
    )
}

fn missed(f: &Facts) -> Check {
    const ID: &str = "missed";
    let since = show_time(f.since, f.tz);
    let Some(latest) = f.missed.iter().max_by_key(|m| m.slot) else {
        return Check::ok(ID, format!("no slot reported missed since {since}"));
    };
    let slots: u64 = f.missed.iter().map(|m| m.slots).sum();
    let tasks: HashSet<&str> = f.missed.iter().map(|m| m.place.as_str()).collect();
    let reason = latest
        .reason
        .as_deref()
        .map_or(String::new(), |r| format!(", {r}"));
    Check::with(
        ID,
        Status::Warn,
        format!(
            "{slots} slot(s) of {} task(s) missed since {since}; the latest {} ({}{reason})",
            tasks.len(),
            show_time(latest.slot, f.tz),
            latest.place
        ),
        "`heartbeat log --event task_missed` lists them: no run came (or runs were skipped) \
         before each slot's deadline",
    )
}

fn run_lock(f: &Facts) -> Check {
    const ID: &str = "lock";
    let Some(holder) = &f.lock else {
        return Check::ok(ID, "the run lock is free");
    };
    let pid = holder.pid.map_or("?".into(), |p| p.to_string());
    match holder.since {
        Some(since) if age(f.now, since) > f.stuck_after => Check::with(
            ID,
            Status::Fail,
            format!(
                "the run lock has been held by pid {pid} since {} ({}, longer than stuck_after \
                 = {})",
                show_time(since, f.tz),
                span(age(f.now, since)),
                span(f.stuck_after)
            ),
            format!(
                "is that run stuck? look at pid {pid} (`ps -p {pid}`); the lock is released \
                 when it exits, and every run until then is skipped"
            ),
        ),
        Some(since) => Check::ok(
            ID,
            format!(
                "held by pid {pid} since {}: a run is under way",
                show_time(since, f.tz)
            ),
        ),
        None => Check::ok(ID, "held by a run (its start is not recorded)"),
    }
}

fn tripped(f: &Facts) -> Check {
    const ID: &str = "tripped";
    match f.tripped.as_slice() {
        [] => Check::ok(ID, "no task is tripped"),
        tasks => {
            let shown: Vec<&str> = tasks.iter().take(3).map(|(s, _)| s.as_str()).collect();
            let more = if tasks.len() > 3 {
                format!(" and {} more", tasks.len() - 3)
            } else {
                String::new()
            };
            Check::with(
                ID,
                Status::Fail,
                format!(
                    "{} task(s) failed too often in a row and are skipped: {}{more}",
                    tasks.len(),
                    shown.join(", ")
                ),
                format!(
                    "fix what makes it fail, then `heartbeat reset {}`",
                    tasks[0].1
                ),
            )
        }
    }
}

fn approvals(f: &Facts) -> Check {
    const ID: &str = "approvals";
    let half = f.approval_ttl / 2;
    let old: Vec<String> = f
        .pending
        .iter()
        .filter(|p| age(f.now, p.created_at) > half)
        .map(|p| format!("#{}", p.id))
        .collect();
    let mut said = Vec::new();
    if !old.is_empty() {
        said.push(format!(
            "{} approval(s) pending for more than half of approval_ttl ({}): {}",
            old.len(),
            span(half),
            old.join(", ")
        ));
    }
    if !f.expired.is_empty() {
        said.push(format!(
            "{} approval(s) expired since {} with nobody deciding",
            f.expired.len(),
            show_time(f.since, f.tz)
        ));
    }
    if said.is_empty() {
        return Check::ok(
            ID,
            format!("{} pending, none waiting long", f.pending.len()),
        );
    }
    Check::with(
        ID,
        Status::Warn,
        said.join("; "),
        format!(
            "`heartbeat approvals` lists them; approve or deny within approval_ttl ({}), or \
             they expire unrun",
            span(f.approval_ttl)
        ),
    )
}

fn delivery(f: &Facts) -> Check {
    const ID: &str = "delivery";
    let mut said = Vec::new();
    for c in &f.channels {
        let late: Vec<&DateTime<Utc>> = c
            .queued
            .iter()
            .filter(|q| age(f.now, **q) > LATE_MESSAGE)
            .collect();
        if let Some(oldest) = late.iter().min() {
            said.push(format!(
                "{}: {} message(s) waiting for over 1 h, the oldest since {}",
                c.name,
                late.len(),
                show_time(**oldest, f.tz)
            ));
        }
        if let Some(error) = &c.failed {
            said.push(format!("{}: its last delivery failed: {error}", c.name));
        }
    }
    if said.is_empty() {
        let queued: usize = f.channels.iter().map(|c| c.queued.len()).sum();
        return Check::ok(
            ID,
            match f.channels.len() {
                0 => "no channel is configured".to_string(),
                n => format!("{n} channel(s), {queued} message(s) waiting, none late"),
            },
        );
    }
    Check::with(
        ID,
        Status::Warn,
        said.join("; "),
        "`heartbeat notify-test` tries each channel now; `heartbeat log --event \
         notification_failed` shows why sends failed",
    )
}

fn files(f: &Facts) -> Check {
    const ID: &str = "files";
    match &f.files {
        Err(why) => Check::with(
            ID,
            Status::Fail,
            format!("the files cannot be read: {why}"),
            "runs cannot read them either: `heartbeat check` says the same",
        ),
        Ok((errors, _)) if !errors.is_empty() => Check::with(
            ID,
            Status::Fail,
            format!("{} error(s), the first: {}", errors.len(), errors[0]),
            "`heartbeat check` lists them; a task with an error never runs",
        ),
        Ok((_, warnings)) if !warnings.is_empty() => Check::with(
            ID,
            Status::Warn,
            format!("{} warning(s), the first: {}", warnings.len(), warnings[0]),
            "`heartbeat check` lists them",
        ),
        Ok(_) => Check::ok(ID, "the config and the files check cleanly"),
    }
}

fn clock(f: &Facts) -> Check {
    const ID: &str = "clock";
    let runs_ahead = f.last_run.is_some_and(|t| t > f.now);
    if f.future_times == 0 && !runs_ahead {
        return Check::ok(ID, "no stored time is later than now");
    }
    let mut said = Vec::new();
    if f.future_times > 0 {
        said.push(format!("{} stored attempt time(s)", f.future_times));
    }
    if runs_ahead {
        said.push("the last run's start".to_string());
    }
    Check::with(
        ID,
        Status::Warn,
        format!(
            "{} later than now ({})",
            said.join(" and "),
            show_time(f.now, f.tz)
        ),
        "a clock that stepped back, or a run with a future --now; they count as now, and the \
         next run stores them as now",
    )
}

fn state_dir(f: &Facts) -> Check {
    const ID: &str = "state_dir";
    let dir = f.state_dir.display();
    if let Err(why) = &f.writable {
        return Check::with(
            ID,
            Status::Fail,
            format!("{dir} is not writable: {why}"),
            format!("runs cannot record anything there; give it back to its user (`ls -ld {dir}`)"),
        );
    }
    let free = f.free.map(|b| format!("{} MiB free", b / (1024 * 1024)));
    match f.free {
        Some(bytes) if bytes < MIN_FREE => Check::with(
            ID,
            Status::Fail,
            format!(
                "{dir} has only {} MiB free (less than 64 MiB)",
                bytes / (1024 * 1024)
            ),
            "free space on its disk: a run that cannot write its database or audit log stops",
        ),
        _ => Check::ok(
            ID,
            format!(
                "{dir} is writable{}",
                free.map_or(String::new(), |f| format!(", {f}"))
            ),
        ),
    }
}

fn monitors(f: &Facts) -> Check {
    const ID: &str = "monitors";
    if f.monitors.is_empty() {
        return Check::with(
            ID,
            Status::Info,
            "no monitors configured",
            "nothing outside this machine notices when heartbeat stops running",
        );
    }
    Check::ok(ID, format!("configured: {}", f.monitors.join(", ")))
}

fn mcp(servers: &[(String, std::result::Result<usize, String>)]) -> Check {
    const ID: &str = "mcp";
    if servers.is_empty() {
        return Check::ok(ID, "no MCP server is configured");
    }
    let failed: Vec<String> = servers
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|why| format!("{name}: {why}")))
        .collect();
    if let Some(first) = failed.first() {
        return Check::with(
            ID,
            Status::Fail,
            format!(
                "{} of {} MCP server(s) cannot start or list their tools; {first}",
                failed.len(),
                servers.len()
            ),
            "`heartbeat mcp-tools` shows each server's answer; tasks calling them fail",
        );
    }
    let listed: Vec<String> = servers
        .iter()
        .map(|(name, r)| format!("{name} ({} tools)", r.as_ref().map_or(0, |n| *n)))
        .collect();
    Check::ok(ID, format!("listed: {}", listed.join(", ")))
}

// ----- reading -----

/// What to look at.
pub(crate) struct Ask<'a> {
    pub now: DateTime<Utc>,
    pub since: DateTime<Utc>,
    /// Start each MCP server and list its tools.
    pub deep: bool,
    /// Where paths are shown from.
    pub cwd: &'a Path,
}

/// What the checks look at. Err when there is nothing to check: no state dir.
pub(crate) fn read(cfg: &Config, ask: &Ask) -> Result<Facts> {
    let dir = &cfg.state_dir;
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "no state dir at {}: heartbeat has not run with this config yet (or --state-dir \
             names another one), so there is nothing to check",
            dir.display()
        )));
    }
    // Reading an earlier schema would bring it up to date first: a write.
    if let Some(version) = crate::store::older_schema(cfg)? {
        return Err(Error::Usage(format!(
            "{} was written by an earlier heartbeat (schema {version}): the next run, or \
             `heartbeat status`, brings it up to date; ask again then",
            cfg.state_dir.join(crate::store::DB_FILE).display()
        )));
    }
    let now = ask.now;
    let status = query::status(cfg, now)?;
    let store = crate::store::open_existing(cfg)?;
    let audit = read_audit(&cfg.audit_log, ask.since)?;

    let last_run = match (audit.runs.last(), &store) {
        (Some(t), _) => Some(*t),
        (None, Some(s)) => s.last_start()?,
        (None, None) => None,
    };
    let tripped = status
        .tripped
        .iter()
        .map(|h| {
            let tool = h
                .tool
                .as_deref()
                .map_or(String::new(), |t| format!("@{t} "));
            let place = match (&h.file, h.line) {
                (Some(file), Some(line)) => {
                    format!("{}:{line}", crate::render::show_path(file, ask.cwd))
                }
                _ => "not in the files any more".to_string(),
            };
            (
                format!("{tool}{place} (task {})", h.task_id),
                h.task_id.clone(),
            )
        })
        .collect();
    let pending = query::approvals(cfg, Some(ApprovalState::Pending))?
        .into_iter()
        .filter_map(|a| {
            Some(Pending {
                id: a.id,
                created_at: crate::store::parse_ts(&a.created_at)?,
            })
        })
        .collect();
    let expired = query::approvals(cfg, Some(ApprovalState::Expired))?
        .into_iter()
        .filter(|a| {
            a.decided_at
                .as_deref()
                .and_then(crate::store::parse_ts)
                .is_some_and(|t| t >= ask.since)
        })
        .map(|a| a.id)
        .collect();
    let channels = match &store {
        Some(s) => channels(cfg, &**s, &audit.last_delivery)?,
        None => Vec::new(),
    };
    let (files, future_times) = match query::check(cfg.clone(), now, false) {
        Ok(checked) => {
            let report = checked.report();
            // Stored times later than now are the clock's to report, not the files'.
            let db = cfg.state_dir.join(crate::store::DB_FILE);
            let shown = |severity| {
                report
                    .problems
                    .iter()
                    .filter(|p| p.severity == severity && p.file != db)
                    .map(|p| show_problem(p, ask.cwd))
                    .collect::<Vec<_>>()
            };
            (
                Ok((shown(Severity::Error), shown(Severity::Warning))),
                checked.snapshot.future_times,
            )
        }
        Err(e) => (
            Err(e.to_string()),
            super::files::read_snapshot(cfg, now)?.future_times,
        ),
    };
    let writable = nix::unistd::access(dir.as_path(), nix::unistd::AccessFlags::W_OK)
        .map_err(|e| std::io::Error::from(e).to_string());
    let free = nix::sys::statvfs::statvfs(dir.as_path())
        .ok()
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()));
    let mcp = ask.deep.then(|| list_mcp(cfg, ask.cwd));

    Ok(Facts {
        now,
        tz: cfg.tz(),
        since: ask.since,
        daemon: status.daemon,
        daemon_every: cfg.daemon.every,
        crontab: crontab(),
        timers: timers(),
        runs: audit.runs,
        last_run,
        missed: audit.missed,
        lock: status.holder,
        stuck_after: cfg.stuck_after,
        tripped,
        pending,
        expired,
        approval_ttl: cfg.approval_ttl,
        channels,
        files,
        future_times,
        state_dir: dir.clone(),
        writable,
        free,
        monitors: cfg.monitors.iter().map(|m| m.name.clone()).collect(),
        mcp,
        fleet: status.fleet,
    })
}

/// `FILE:LINE:COLUMN: message`, as `check` shows a problem.
fn show_problem(p: &Problem, cwd: &Path) -> String {
    format!(
        "{}:{}:{}: {}",
        crate::render::show_path(&p.file, cwd),
        p.line,
        p.column,
        crate::text::clean(&p.message)
    )
}

/// What the audit log says of the window.
#[derive(Debug, Default)]
struct AuditFacts {
    runs: Vec<DateTime<Utc>>,
    missed: Vec<Missed>,
    /// Channel → whether its last `notification_sent` / `notification_failed` was a failure.
    last_delivery: HashMap<String, bool>,
}

/// Read the audit log (and the rotated files that reach into the window) for the window's
/// scheduled runs, missed slots and deliveries.
fn read_audit(path: &Path, since: DateTime<Utc>) -> Result<AuditFacts> {
    let mut facts = AuditFacts::default();
    let mut started = HashSet::new();
    let mut reader = AuditReader::from_start(path, Some(since));
    while let Some(line) = reader.next_line().map_err(query::read_error)? {
        let Some((_, obj)) = parse_line(line, object) else {
            continue;
        };
        audit_line(&obj, since, &mut started, &mut facts);
    }
    facts.runs.sort();
    Ok(facts)
}

/// One audit line's part in [`AuditFacts`].
fn audit_line(
    obj: &Map<String, Value>,
    since: DateTime<Utc>,
    started: &mut HashSet<String>,
    facts: &mut AuditFacts,
) {
    let text = |key: &str| obj.get(key).and_then(Value::as_str);
    let Some(ts) = text("ts").and_then(crate::audit::parse_ts) else {
        return;
    };
    match text("event") {
        Some("task_missed") => {
            let Some(slot) = text("slot").and_then(crate::audit::parse_ts) else {
                return;
            };
            if slot < since {
                return;
            }
            let place = match (text("file"), obj.get("line").and_then(Value::as_u64)) {
                (Some(file), Some(line)) => format!("{file}:{line}"),
                _ => format!("task {}", text("task_id").unwrap_or("?")),
            };
            facts.missed.push(Missed {
                slot,
                place,
                reason: text("reason").map(str::to_string),
                slots: 1 + obj.get("count").and_then(Value::as_u64).unwrap_or(0),
            });
        }
        _ if ts < since => {}
        Some("run_started") => {
            // A run a person asked for (`approve`, SIGUSR1, /run) says nothing of the
            // scheduler.
            let manual = text("trigger") == Some("manual") || text("mode") == Some("approve");
            if let Some(id) = text("run_id") {
                started.insert(id.to_string());
            }
            if !manual {
                facts.runs.push(ts);
            }
        }
        // A run skipped before it started (the lock held, a pause, outside active hours)
        // was still started by the scheduler.
        Some("run_skipped") if text("run_id").is_some_and(|id| !started.contains(id)) => {
            facts.runs.push(ts);
        }
        Some(event @ ("notification_sent" | "notification_failed")) => {
            if let Some(channel) = text("channel") {
                facts
                    .last_delivery
                    .insert(channel.to_string(), event == "notification_failed");
            }
        }
        _ => {}
    }
}

/// Each configured channel (and any other that still has messages waiting): what waits,
/// and its last delivery's error when that delivery failed. Whether the last delivery
/// failed is the audit log's word in the window; without one, a stored error with no
/// delivery ever recorded.
fn channels(
    cfg: &Config,
    store: &dyn crate::store::Store,
    last_delivery: &HashMap<String, bool>,
) -> Result<Vec<Channel>> {
    let mut names: Vec<String> = Vec::new();
    if cfg.telegram.is_some() {
        names.push(crate::notify::telegram::KIND.to_string());
    }
    names.extend(cfg.channels.iter().map(|c| c.name.clone()));
    let rows = store.outbox()?;
    for row in &rows {
        if !names.contains(&row.channel) {
            names.push(row.channel.clone());
        }
    }
    let mut found = Vec::new();
    for name in names {
        let (sent_key, error_key) = super::outbox::state_keys(&name);
        let error = store.meta(&error_key)?;
        let failed_last = match last_delivery.get(&name) {
            Some(failed) => *failed,
            None => error.is_some() && store.meta(&sent_key)?.is_none(),
        };
        let failed = failed_last.then(|| {
            error.map_or("(no error recorded)".to_string(), |e| {
                crate::text::clean(
                    crate::audit::Secrets::taken()
                        .redact(&e)
                        .first_line(120)
                        .as_str(),
                )
            })
        });
        let queued = rows
            .iter()
            .filter(|r| r.channel == name)
            .filter_map(|r| crate::store::parse_ts(&r.created_at))
            .collect();
        found.push(Channel {
            name,
            queued,
            failed,
        });
    }
    Ok(found)
}

/// Whether a line of a scheduler's listing names heartbeat (a comment does not).
fn names_heartbeat(line: &str) -> bool {
    let line = line.trim();
    !line.starts_with('#') && line.to_ascii_lowercase().contains("heartbeat")
}

/// What `crontab -l` says (no such program, no crontab, or no answer: unknown).
fn crontab() -> Found {
    let argv = ["crontab".to_string(), "-l".to_string()];
    match crate::sys::command::ask(&argv, ASK_ENV, ASK_TIMEOUT) {
        Ok(Some(answer)) if answer.success => {
            match answer.stdout.lines().find(|l| names_heartbeat(l)) {
                Some(line) => Found::Names(line.trim().to_string()),
                None => Found::Nothing,
            }
        }
        _ => Found::Unknown,
    }
}

/// What `systemctl --user list-timers --all` says: the first timer unit on a line that
/// names heartbeat.
fn timers() -> Found {
    let argv: Vec<String> = [
        "systemctl",
        "--user",
        "list-timers",
        "--all",
        "--no-pager",
        "--no-legend",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    match crate::sys::command::ask(&argv, ASK_ENV, ASK_TIMEOUT) {
        Ok(Some(answer)) if answer.success => {
            match answer.stdout.lines().find(|l| names_heartbeat(l)) {
                Some(line) => Found::Names(
                    line.split_whitespace()
                        .find(|w| w.ends_with(".timer"))
                        .unwrap_or("heartbeat")
                        .to_string(),
                ),
                None => Found::Nothing,
            }
        }
        _ => Found::Unknown,
    }
}

/// Start each configured MCP server, list its tools, stop it (as `heartbeat mcp-tools`).
fn list_mcp(cfg: &Config, cwd: &Path) -> Vec<(String, std::result::Result<usize, String>)> {
    crate::audit::Secrets::from_config(cfg);
    let workdir = cfg
        .files
        .first()
        .and_then(|f| f.parent())
        .unwrap_or(cwd)
        .to_path_buf();
    let mut servers = Servers::new(cfg);
    let listed = cfg
        .mcp
        .keys()
        .map(|name| (name.clone(), servers.list(name, &workdir).map(|t| t.len())))
        .collect();
    servers.stop_all();
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    const NOW: &str = "2026-05-04T10:00:00Z";

    /// What a clean install looks like a minute after its first run.
    fn facts() -> Facts {
        Facts {
            now: ts(NOW),
            tz: chrono_tz::Europe::Berlin,
            since: ts("2026-04-27T10:00:00Z"),
            daemon: None,
            daemon_every: Duration::from_secs(1800),
            crontab: Found::Unknown,
            timers: Found::Unknown,
            runs: vec![ts("2026-05-04T09:59:00Z")],
            last_run: Some(ts("2026-05-04T09:59:00Z")),
            missed: Vec::new(),
            lock: None,
            stuck_after: Duration::from_secs(1800),
            tripped: Vec::new(),
            pending: Vec::new(),
            expired: Vec::new(),
            approval_ttl: Duration::from_secs(24 * 3600),
            channels: Vec::new(),
            files: Ok((Vec::new(), Vec::new())),
            future_times: 0,
            state_dir: PathBuf::from("/state"),
            writable: Ok(()),
            free: Some(1 << 30),
            monitors: Vec::new(),
            mcp: None,
            fleet: None,
        }
    }

    fn find(f: &Facts, id: &str) -> Check {
        judge(f).into_iter().find(|c| c.id == id).unwrap()
    }

    /// Runs every `minutes`, `n` of them, the last at `last`.
    fn every(minutes: i64, n: i64, last: &str) -> Vec<DateTime<Utc>> {
        (0..n)
            .rev()
            .map(|i| ts(last) - chrono::Duration::minutes(minutes * i))
            .collect()
    }

    #[test]
    fn the_checks_come_in_their_order_and_mcp_only_when_asked() {
        let mut f = facts();
        let ids: Vec<&str> = judge(&f).iter().map(|c| c.id).collect();
        assert_eq!(
            ids,
            [
                "scheduler",
                "last_run",
                "missed",
                "lock",
                "tripped",
                "approvals",
                "delivery",
                "files",
                "clock",
                "state_dir",
                "monitors"
            ]
        );
        assert_eq!(exit_code(&judge(&f)), 0);
        f.mcp = Some(vec![
            ("a".into(), Ok(3)),
            ("b".into(), Err("cannot start \"x\"".into())),
        ]);
        let checks = judge(&f);
        let mcp = checks.last().unwrap();
        assert_eq!((mcp.id, mcp.status), ("mcp", Status::Fail));
        assert!(mcp.message.contains("b: cannot start"), "{}", mcp.message);
        assert_eq!(exit_code(&checks), 1);
        let json = json(&checks);
        assert_eq!(json["checks"][11]["id"], "mcp");
        assert_eq!(json["checks"][1]["advice"], Value::Null);
        assert_eq!(json["checks"][10]["status"], "info");
    }

    #[test]
    fn the_usual_interval_is_the_median_gap_and_regular_runs_name_it() {
        let runs = every(5, 10, NOW);
        assert_eq!(usual_interval(&runs), Some(Duration::from_secs(300)));
        assert_eq!(regular_interval(&runs), Some(Duration::from_secs(300)));
        // Two runs are no pattern; scattered runs neither.
        assert_eq!(regular_interval(&runs[..2]), None);
        let scattered = vec![
            ts("2026-05-04T01:00:00Z"),
            ts("2026-05-04T01:07:00Z"),
            ts("2026-05-04T03:00:00Z"),
            ts("2026-05-04T03:01:00Z"),
        ];
        assert_eq!(regular_interval(&scattered), None);
        assert_eq!(usual_interval(&[]), None);
    }

    #[test]
    fn the_scheduler_is_the_daemon_a_crontab_a_timer_or_regular_runs_else_unknown() {
        let mut f = facts();
        let unknown = find(&f, "scheduler");
        assert_eq!(unknown.status, Status::Info);
        assert!(unknown.advice.unwrap().contains("crontab"));
        f.runs = every(10, 6, NOW);
        assert_eq!(find(&f, "scheduler").status, Status::Ok);
        assert!(find(&f, "scheduler").message.contains("every 10m"));
        f.runs.clear();
        f.timers = Found::Names("hb.timer".into());
        assert!(find(&f, "scheduler").message.contains("hb.timer"));
        f.crontab = Found::Names("*/5 * * * * heartbeat run --once".into());
        assert!(find(&f, "scheduler").message.contains("crontab"));
        f.daemon = Some(Holder {
            pid: Some(123),
            ..Holder::default()
        });
        assert_eq!(
            find(&f, "scheduler").message,
            "a daemon (pid 123) runs heartbeat"
        );
    }

    #[test]
    fn last_run_fails_past_three_intervals_or_two_hours() {
        let mut f = facts();
        // No usual interval: 2 h.
        f.runs = vec![ts("2026-05-04T08:01:00Z")];
        f.last_run = Some(ts("2026-05-04T08:01:00Z"));
        assert_eq!(find(&f, "last_run").status, Status::Ok);
        f.runs = vec![ts("2026-05-04T07:59:00Z")];
        f.last_run = Some(ts("2026-05-04T07:59:00Z"));
        let late = find(&f, "last_run");
        assert_eq!(late.status, Status::Fail);
        // Shown in the configured zone.
        assert_eq!(
            late.advice.as_deref(),
            Some(
                "nothing has run heartbeat since 2026-05-04 09:59 CEST; is its crontab line \
                 still there (`crontab -l`)?"
            )
        );
        // Every 5 minutes, the last 16 minutes ago: past 15.
        f.runs = every(5, 10, "2026-05-04T09:44:00Z");
        f.last_run = f.runs.last().copied();
        assert_eq!(find(&f, "last_run").status, Status::Fail);
        f.runs = every(5, 10, "2026-05-04T09:46:00Z");
        f.last_run = f.runs.last().copied();
        assert_eq!(find(&f, "last_run").status, Status::Ok);
        // A daemon's interval counts instead while one runs: 3 × 30m.
        f.runs = every(5, 10, "2026-05-04T08:40:00Z");
        f.last_run = f.runs.last().copied();
        f.daemon = Some(Holder {
            pid: Some(7),
            ..Holder::default()
        });
        assert_eq!(find(&f, "last_run").status, Status::Ok);
        f.last_run = Some(ts("2026-05-04T08:29:00Z"));
        let stuck = find(&f, "last_run");
        assert_eq!(stuck.status, Status::Fail);
        assert!(stuck.advice.unwrap().contains("the daemon (pid 7)"));
        // Never: a failure too.
        f.last_run = None;
        assert_eq!(find(&f, "last_run").status, Status::Fail);
    }

    #[test]
    fn the_audit_log_gives_scheduled_runs_missed_slots_and_deliveries() {
        let since = ts("2026-05-04T00:00:00Z");
        let lines = [
            r#"{"ts":"2026-05-03T23:00:00.000Z","event":"run_started","run_id":"r0","mode":"once","trigger":"schedule"}"#,
            r#"{"ts":"2026-05-04T01:00:00.000Z","event":"run_started","run_id":"r1","mode":"once","trigger":"schedule"}"#,
            r#"{"ts":"2026-05-04T01:00:01.000Z","event":"run_skipped","run_id":"r1","reason":"outside_active_hours"}"#,
            r#"{"ts":"2026-05-04T02:00:00.000Z","event":"run_skipped","run_id":"r2","reason":"locked"}"#,
            r#"{"ts":"2026-05-04T02:30:00.000Z","event":"run_started","run_id":"r3","mode":"approve","trigger":"manual"}"#,
            r#"{"ts":"2026-05-04T02:40:00.000Z","event":"run_started","run_id":"r4","mode":"daemon","trigger":"manual"}"#,
            r#"{"ts":"2026-05-04T03:00:00.000Z","event":"task_missed","run_id":"r5","task_id":"0123456789ab","file":"/h/HEARTBEAT.md","line":7,"slot":"2026-05-04T02:00:00.000Z","reason":"no_run"}"#,
            r#"{"ts":"2026-05-04T03:00:00.000Z","event":"task_missed","run_id":"r5","task_id":"0123456789ab","file":"/h/HEARTBEAT.md","line":7,"slot":"2026-05-03T02:00:00.000Z","reason":"no_run"}"#,
            r#"{"ts":"2026-05-04T03:00:00.000Z","event":"task_missed","run_id":"r5","task_id":"ba9876543210","slot":"2026-05-04T01:00:00.000Z","reason":"paused","count":4}"#,
            r#"{"ts":"2026-05-04T03:00:01.000Z","event":"notification_failed","channel":"hook","error":"boom","queued":true}"#,
            r#"{"ts":"2026-05-04T03:00:02.000Z","event":"notification_sent","channel":"telegram"}"#,
            r#"{"ts":"2026-05-04T03:00:03.000Z","event":"notification_failed","channel":"telegram","error":"x","queued":true}"#,
            r#"{"ts":"2026-05-04T03:00:04.000Z","event":"notification_sent","channel":"telegram"}"#,
        ];
        let mut facts_read = AuditFacts::default();
        let mut started = HashSet::new();
        for line in lines {
            let obj = object(line.as_bytes()).unwrap();
            audit_line(&obj, since, &mut started, &mut facts_read);
        }
        // r1 once (its skip is part of it), r2's skip; not r0 (before the window), not the
        // runs a person asked for.
        assert_eq!(
            facts_read.runs,
            [ts("2026-05-04T01:00:00Z"), ts("2026-05-04T02:00:00Z")]
        );
        assert_eq!(facts_read.missed.len(), 2, "{:?}", facts_read.missed);
        assert_eq!(facts_read.last_delivery.get("hook"), Some(&true));
        assert_eq!(facts_read.last_delivery.get("telegram"), Some(&false));

        let mut f = facts();
        f.missed = facts_read.missed;
        let missed = find(&f, "missed");
        assert_eq!(missed.status, Status::Warn);
        assert_eq!(
            missed.message,
            "6 slot(s) of 2 task(s) missed since 2026-04-27 12:00 CEST; the latest \
             2026-05-04 04:00 CEST (/h/HEARTBEAT.md:7, no_run)"
        );
    }

    #[test]
    fn a_lock_held_past_stuck_after_fails() {
        let mut f = facts();
        f.lock = Some(Holder {
            pid: Some(42),
            since: Some(ts("2026-05-04T09:40:00Z")),
            next: None,
        });
        assert_eq!(find(&f, "lock").status, Status::Ok);
        f.lock.as_mut().unwrap().since = Some(ts("2026-05-04T09:20:00Z"));
        let stuck = find(&f, "lock");
        assert_eq!(stuck.status, Status::Fail);
        assert!(stuck.message.contains("pid 42 since 2026-05-04 11:20 CEST"));
    }

    #[test]
    fn approvals_warn_past_half_their_ttl_or_expired_in_the_window() {
        let mut f = facts();
        f.pending = vec![
            Pending {
                id: 1,
                created_at: ts("2026-05-03T21:00:00Z"),
            },
            Pending {
                id: 2,
                created_at: ts("2026-05-03T23:00:00Z"),
            },
        ];
        let late = find(&f, "approvals");
        assert_eq!(late.status, Status::Warn);
        assert!(late.message.contains(": #1"), "{}", late.message);
        f.pending.remove(0);
        assert_eq!(find(&f, "approvals").status, Status::Ok);
        f.expired = vec![9];
        assert!(
            find(&f, "approvals")
                .message
                .contains("1 approval(s) expired")
        );
    }

    #[test]
    fn delivery_warns_per_channel_with_late_messages_or_a_failed_last_send() {
        let mut f = facts();
        f.channels = vec![
            Channel {
                name: "telegram".into(),
                queued: vec![ts("2026-05-04T09:30:00Z")],
                failed: None,
            },
            Channel {
                name: "hook".into(),
                queued: Vec::new(),
                failed: None,
            },
        ];
        assert_eq!(find(&f, "delivery").status, Status::Ok);
        f.channels[0].queued.push(ts("2026-05-04T08:30:00Z"));
        f.channels[1].failed = Some("HTTP 500".into());
        let warned = find(&f, "delivery");
        assert_eq!(warned.status, Status::Warn);
        assert_eq!(
            warned.message,
            "telegram: 1 message(s) waiting for over 1 h, the oldest since 2026-05-04 10:30 \
             CEST; hook: its last delivery failed: HTTP 500"
        );
    }

    #[test]
    fn files_clock_state_dir_and_monitors() {
        let mut f = facts();
        f.files = Ok((Vec::new(), vec!["HEARTBEAT.md:3:1: a warning".into()]));
        assert_eq!(find(&f, "files").status, Status::Warn);
        f.files = Ok((vec!["HEARTBEAT.md:4:1: an error".into()], Vec::new()));
        assert_eq!(find(&f, "files").status, Status::Fail);
        f.files = Err("HEARTBEAT.md: not found".into());
        assert_eq!(find(&f, "files").status, Status::Fail);

        assert_eq!(find(&f, "clock").status, Status::Ok);
        f.future_times = 2;
        assert_eq!(find(&f, "clock").status, Status::Warn);

        f.free = Some(63 * 1024 * 1024);
        assert_eq!(find(&f, "state_dir").status, Status::Fail);
        f.free = Some(64 * 1024 * 1024);
        assert_eq!(find(&f, "state_dir").status, Status::Ok);
        f.writable = Err("Permission denied".into());
        assert!(find(&f, "state_dir").message.contains("not writable"));

        assert_eq!(find(&f, "monitors").status, Status::Info);
        f.monitors = vec!["hc".into()];
        assert_eq!(find(&f, "monitors").status, Status::Ok);
    }
}
