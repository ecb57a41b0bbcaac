//! One tick under the run lock: decisions waiting at Telegram and on reply topics → pause
//! and active hours → approved work, then the plan → notifications. `run --once` and every
//! daemon tick are one call of [`tick`].
//!
//! Order of effects, and why:
//! - The run lock is taken before the database is opened for writing, so runs never
//!   overlap; a run that finds the lock held writes `run_skipped` and returns.
//! - Button presses and chat commands are handled first, even outside active hours and while
//!   paused (so `/resume` and approving from a phone work with cron alone).
//! - Approvals a person approved run first, even outside active hours (a person said yes),
//!   each after its file was re-read; then the plan for everything else.
//! - Notifications go last and never fail the run: the outbox keeps what Telegram refused.
//! - The effects themselves are in [`super::session`] and [`super::outbox`].

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use super::bot::{self, Effects, Pressed};
use super::decide::Decider;
use super::files::{Loaded, all_tasks};
use super::outbox;
use super::session::{self, RunStart, Session, new_run_id};
use crate::audit::{self, Event, event::Pause};
use crate::clock::Clock;
use crate::config::{Autonomy, Config};
use crate::error::{Error, Result, WorkStarted};
use crate::lock::{self, Attempt};
use crate::model::RunSkipReason;
use crate::plan::{self, PlanInput};
use crate::report::Report;
use crate::telegram::Telegram;
use crate::tools::Registry;

/// The Telegram client when `[telegram]` is configured and its token is set. A problem is
/// a warning, never an error: messages wait in the outbox until it is fixed.
pub(crate) fn connect_telegram(
    cfg: &Config,
    poll: Duration,
    diag: &dyn Fn(String),
) -> Option<Telegram> {
    let tc = cfg.telegram.as_ref()?;
    let env = |name: &str| crate::redact::take_env(name);
    match Telegram::connect(tc, &env, poll) {
        Ok(Some(tg)) => Some(tg),
        Ok(None) => {
            crate::error::say(&format!(
                "heartbeat: warning: telegram: ${} is not set; messages wait in the outbox",
                tc.bot_token_env
            ));
            None
        }
        Err(e) => {
            crate::error::say(&format!(
                "heartbeat: warning: telegram: {e}; messages wait in the outbox"
            ));
            None
        }
    }
    .inspect(|_| diag(format!("telegram: {}", tc.api_url)))
}

/// What one tick works with.
pub(crate) struct Tick<'a> {
    pub cfg: &'a Config,
    pub files: &'a [Loaded],
    /// Started at the run's start time, which schedules compare; audit lines read it as
    /// they are written.
    pub clock: Clock,
    /// Run even outside active hours or while paused.
    pub force: bool,
    pub autonomy: Autonomy,
    /// `once` or `daemon` (the audit's `run_started.mode`).
    pub mode: crate::model::RunMode,
    /// What started this tick: its schedule, or a person (SIGUSR1, `/run`, a button press).
    pub trigger: crate::model::Trigger,
    pub telegram: Option<&'a Telegram>,
    /// What no sink shows (the token).
    pub secrets: &'a audit::Secrets,
    /// Read the updates waiting at Telegram first (`run --once`; the daemon long-polls).
    pub read_updates: bool,
    /// Messages pressed since the last tick (the daemon), to edit after the run.
    pub pressed: &'a [Pressed],
    /// The daemon's stop request: no new task, and stop running tools.
    pub stop: Option<&'a session::Stop>,
    /// Apply the plan (false: only run what people approved, after a button press).
    pub plan: bool,
    /// `run --task`: only these tasks (by id) are planned, each due now whatever its
    /// schedule or cooldown say, and only their approved work runs
    /// (docs/reference.md#run-one-task-now).
    pub only: Option<&'a HashSet<String>>,
    pub diag: &'a dyn Fn(String),
    /// The command's: set when a tool starts.
    pub work: &'a WorkStarted,
}

/// One tick under the run lock. The report's `skipped` says when it did not run.
pub(crate) fn tick(t: &Tick) -> Result<Report> {
    let cfg = t.cfg;
    let now = t.clock.start();
    let run_id = new_run_id(now);
    let mut audit = session::open_audit(cfg, t.secrets)?;
    let audit_path = cfg.audit_log.clone();
    let audit_err = move |e| Error::io(&audit_path, e);
    let skipped = |reason| Report {
        run_id: run_id.clone(),
        skipped: Some(reason),
        ..Report::default()
    };

    let lock_path = cfg.state_dir.join(lock::LOCK_FILE);
    let lock = match lock::try_acquire(&cfg.state_dir, now).map_err(|e| Error::io(&lock_path, e))? {
        Attempt::Acquired(l) => l,
        Attempt::Held(holder) => {
            if let Some(since) = holder.since {
                let held = now.signed_duration_since(since);
                if held.to_std().is_ok_and(|d| d >= cfg.stuck_after) {
                    crate::error::say(&format!(
                        "heartbeat: warning: the run lock {} has been held since {} by pid {} (longer than stuck_after = {}); is that run stuck?",
                        lock_path.display(),
                        crate::render::show_local(since),
                        holder.pid.map_or("?".into(), |p| p.to_string()),
                        humantime::format_duration(cfg.stuck_after),
                    ));
                }
            }
            let event = Event::RunSkipped {
                run_id: &run_id,
                reason: RunSkipReason::Locked,
                next_active: None,
                until: None,
                by: None,
                holder_pid: Some(holder.pid),
                holder_since: Some(holder.since.map(audit::format_ts)),
            };
            audit.record(t.clock.now(), &event).map_err(&audit_err)?;
            audit.sync().map_err(&audit_err)?;
            (t.diag)("another run holds the lock; skipped".into());
            return Ok(skipped(RunSkipReason::Locked));
        }
    };

    // Dead-man pings: this run took the lock (docs/reference.md#monitors).
    let took_lock = std::time::Instant::now();
    let start_pings = crate::monitor::run_started(&cfg.monitors, &run_id);

    // Decisions first: presses and commands waiting at Telegram, expired approvals.
    let store = match crate::store::open(cfg) {
        Ok(store) => store,
        // A fleet whose PostgreSQL cannot be reached runs nothing (docs/fleet.md#fail-closed).
        Err(e @ crate::store::StoreError::Unavailable { .. }) => {
            crate::error::say(&format!("heartbeat: {e}; nothing runs until it is back"));
            let event = Event::RunSkipped {
                run_id: &run_id,
                reason: RunSkipReason::StoreUnavailable,
                next_active: None,
                until: None,
                by: None,
                holder_pid: None,
                holder_since: None,
            };
            audit.record(t.clock.now(), &event).map_err(&audit_err)?;
            audit.sync().map_err(&audit_err)?;
            drop(lock);
            return Ok(skipped(RunSkipReason::StoreUnavailable));
        }
        Err(e) => return Err(e.into()),
    };
    // A future attempt (a clock that stepped back) is planned as now; store it as now too.
    store.clamp_future_times(now)?;
    let mut d = Decider::from_parts(cfg.clone(), store, audit, String::new(), t.clock);
    let expired = d.expire()?;
    let mut fx = Effects {
        pressed: t.pressed.to_vec(),
        ..Effects::default()
    };
    // In a fleet, only the holder of the `telegram` lease reads updates.
    if t.read_updates
        && let (Some(tg), Some(tc)) = (t.telegram, &cfg.telegram)
        && d.store.lease("telegram")?
    {
        let got = bot::handle_updates(tg, &mut d, tc, Duration::ZERO)?;
        if let Some(e) = &got.error {
            (t.diag)(format!("telegram: cannot read updates: {e}"));
        }
        fx.pressed.extend(got.pressed);
    }
    // Replies on the channels' reply topics (ntfy's buttons): approved here, run below.
    super::replies::read(&mut d, t.diag)?;
    // A timed pause ends by itself.
    let paused = match d.store.current_pause(now)? {
        Err(ended) => {
            d.record(&Event::Resumed(Pause {
                until: ended.until.as_deref(),
                reason: Some(&"the pause ended".into()),
                by: &ended.by,
            }))?;
            None
        }
        Ok(p) => p,
    };
    let (mut store, mut audit) = d.into_parts();
    let pruned = housekeeping(cfg, &mut *store, &mut audit, t.clock, now)?;
    // Said once the run has said it started (or was skipped): a line of this run.
    let pruned = pruned.map(|rows| Event::StatePruned {
        run_id: &run_id,
        rows,
    });

    let active = t.force || cfg.active.is_active(now);
    let skip = if let Some(p) = paused.as_ref().filter(|_| !t.force) {
        Some((RunSkipReason::Paused, None, Some(p.until.as_deref())))
    } else if !active && !store.has_approved_work()? {
        let next = cfg.active.next_active(now);
        Some((
            RunSkipReason::OutsideActiveHours,
            Some(next.map(audit::format_ts)),
            None,
        ))
    } else {
        None
    };
    let ran = skip.is_none();
    let (report, mut store, mut audit) = match skip {
        Some((reason, next_active, until)) => {
            let event = Event::RunSkipped {
                run_id: &run_id,
                reason,
                next_active,
                until,
                // Who paused: a person, or an agent (`mcp:<client>`).
                by: until.and(paused.as_ref().map(|p| p.by.as_str())),
                holder_pid: None,
                holder_since: None,
            };
            audit.record(t.clock.now(), &event).map_err(&audit_err)?;
            if let Some(pruned) = &pruned {
                audit.record(t.clock.now(), pruned).map_err(&audit_err)?;
            }
            // Why slots due now were not run, for the run that reports them missed.
            store.record_run_skip(reason.as_str(), now)?;
            ping_failed(&run_id, &start_pings, t.secrets, &mut |e| {
                audit.record(t.clock.now(), e).map_err(&audit_err)
            })?;
            let report = skipped(reason);
            store.count_run(&session::run_tally(&report), now)?;
            (t.diag)(format!("run skipped: {reason}"));
            (report, store, audit)
        }
        None => {
            let tasks = selected(all_tasks(t.files), t.only);
            // Approved work of the named tasks only, in a run that names them.
            let approved = match t.only {
                None => None,
                Some(ids) => Some(
                    store
                        .approvals(Some(crate::model::ApprovalState::Approved))?
                        .into_iter()
                        .filter(|row| ids.contains(&row.task_id))
                        .map(|row| row.id)
                        .collect::<Vec<i64>>(),
                ),
            };
            let mut servers = super::mcp::Servers::new(cfg).with_stop(t.stop.map(|s| &s.kill));
            let catalog = mcp_catalog(t, &tasks, &mut *store, &mut servers, now)?;
            let registry = Registry::from_config(cfg).with_catalog(&catalog);
            let paths: Vec<&Path> = t.files.iter().map(|f| f.source.path.as_path()).collect();
            let mut session = Session::begin(
                &lock,
                cfg,
                &registry,
                store,
                audit,
                RunStart {
                    run_id: run_id.clone(),
                    clock: t.clock,
                    now,
                    mode: t.mode,
                    trigger: t.trigger,
                    files: &paths,
                    autonomy: t.autonomy,
                    work: t.work.clone(),
                },
            )?;
            if let Some(pruned) = &pruned {
                session.record(pruned)?;
            }
            ping_failed(&run_id, &start_pings, t.secrets, &mut |e| session.record(e))?;
            session.stop = t.stop;
            if t.only.is_some() {
                session.ignore_cooldowns();
                session.named = true;
            }
            session.mcp = servers;
            session.known = t
                .files
                .iter()
                .map(|f| (&f.source, f.parsed.tasks.as_slice()))
                .collect();
            session.recover_interrupted()?;
            session.run_approved(approved.as_deref())?;
            if active && t.plan {
                let (plan, snapshot) = plan_now(t, &tasks, &registry, session.store(), now)?;
                // A run that names its tasks ignores their schedules: it says nothing of
                // slots, its own or other tasks'; the next scheduled run reports what passed
                // (docs/reference.md#run-one-task-now).
                if t.only.is_none() {
                    session.account_slots(&plan.items, &snapshot.last_attempt)?;
                }
                session.apply_all(&plan.items)?;
            } else if !active {
                // Only approved work ran; the rest waits for active hours.
                let next = cfg.active.next_active(now);
                session.record(&Event::RunSkipped {
                    run_id: &run_id,
                    reason: RunSkipReason::OutsideActiveHours,
                    next_active: Some(next.map(audit::format_ts)),
                    until: None,
                    by: None,
                    holder_pid: None,
                    holder_since: None,
                })?;
                session.report.skipped = Some(RunSkipReason::OutsideActiveHours);
                session.note_run_skip(RunSkipReason::OutsideActiveHours)?;
            }
            session.finish()?
        }
    };

    // Messages: stored first, then delivered; delivery never fails the run.
    if ran {
        outbox::enqueue_run(&mut *store, cfg, &report, now, t.secrets)?;
    }
    if let Some(tg) = t.telegram {
        bot::show_outcomes(tg, &mut *store, &fx.pressed, now)?;
        bot::show_denials(tg, &mut *store, now)?;
    }
    let transport = t.telegram.map(|tg| tg as &dyn crate::telegram::Transport);
    let (stats, notices) = outbox::deliver(&mut *store, transport, cfg, now)?;
    for notice in &notices {
        audit
            .record(t.clock.now(), &notice.event(Some(&run_id)))
            .map_err(&audit_err)?;
    }
    if !notices.is_empty() || stats != outbox::Delivery::default() {
        (t.diag)(format!(
            "channels: {} sent, {} failed, {} waiting, {} dropped",
            stats.sent, stats.failed, stats.waiting, stats.dropped
        ));
    }
    // What agents did since the last run, for this run to print (once: taken here).
    let mut report = report;
    report.agent_actions = store
        .take_notices()?
        .iter()
        .map(|line| t.secrets.redact(line))
        .collect();
    report.expired = expired
        .into_iter()
        .map(|row| crate::report::ExpiredApproval {
            id: row.id,
            tool: row.tool,
            file: row.file.into(),
            line: usize::try_from(row.line).unwrap_or(0),
            queued_at: crate::store::parse_ts(&row.created_at),
        })
        .collect();
    // The end of the run, for the monitors and the metrics textfile; neither fails the run.
    let cwd = cfg
        .source
        .as_deref()
        .and_then(Path::parent)
        .unwrap_or(Path::new(""));
    let summary = crate::monitor::summary(&report, cwd, t.secrets);
    let end = crate::monitor::End {
        failed: session::run_tally(&report).result == crate::store::RunResult::Failed,
        summary: &summary,
        duration: took_lock.elapsed(),
    };
    let end_pings = crate::monitor::run_ended(&cfg.monitors, &run_id, &end);
    ping_failed(&run_id, &end_pings, t.secrets, &mut |e| {
        audit.record(t.clock.now(), e).map_err(&audit_err)
    })?;
    if let Err(e) = super::metrics::write_textfile(cfg, &*store, now, t.secrets) {
        crate::error::say(&format!("heartbeat: warning: {e}"));
    }
    // A fleet's `run --once` gives up its leases as it ends: a daemon elsewhere need not
    // wait for them to run out (docs/fleet.md#singletons).
    if t.mode == crate::model::RunMode::Once {
        store.release_leases()?;
    }
    audit.sync().map_err(&audit_err)?;
    drop(lock);
    Ok(report)
}

/// `monitor_ping_failed` for each ping that did not go through, as lines of the run.
fn ping_failed(
    run_id: &str,
    failures: &[crate::monitor::Failure],
    secrets: &audit::Secrets,
    record: &mut dyn FnMut(&Event) -> Result<()>,
) -> Result<()> {
    for f in failures {
        let error = secrets.redact(&f.error);
        record(&Event::MonitorPingFailed {
            run_id: Some(run_id),
            monitor: &f.monitor,
            error: &error,
        })?;
    }
    Ok(())
}

/// What the MCP servers offer, for checking inputs before anything runs
/// (docs/reference.md#mcp-tools): the cached listings, and a fresh one for each server whose
/// listing is missing or older than an hour when a task of it would run or be queued now. Servers
/// started for that are kept in `servers` for the run's calls.
fn mcp_catalog(
    t: &Tick,
    tasks: &[&crate::model::Task],
    store: &mut dyn crate::store::Store,
    servers: &mut super::mcp::Servers,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<crate::mcp::Catalog> {
    let cfg = t.cfg;
    let (mut catalog, stale) = super::mcp::cached(cfg, Some(store), now)?;
    if cfg.mcp.is_empty() {
        return Ok(catalog);
    }
    let registry = Registry::from_config(cfg).with_catalog(&catalog);
    let (plan, _) = plan_now(t, tasks, &registry, store, now)?;
    let wanted: Vec<(String, &Path)> = plan
        .items
        .iter()
        .filter(|p| {
            matches!(
                p.decision,
                plan::Decision::Run(_)
                    | plan::Decision::Approve(_)
                    | plan::Decision::Invalid { .. }
            )
        })
        .filter_map(|p| Some((p.shown_tool(cfg.plain_tasks)?, &*p.task.file)))
        .collect();
    let wanted = wanted.iter().map(|(tool, file)| (tool.as_str(), *file));
    for (server, workdir) in super::mcp::named_servers(cfg, wanted) {
        if !catalog.contains_key(&server) || stale.contains(&server) {
            super::mcp::refresh(servers, store, &mut catalog, &server, workdir, now)?;
        }
    }
    Ok(catalog)
}

/// Retention (docs/reference.md#retention), under the run lock: rotate the audit log when it passed
/// `retention.audit_max_size`, and prune old state once a local day. Returns the rows
/// pruned when it pruned (also 0), for the run's `state_pruned` line.
fn housekeeping(
    cfg: &Config,
    store: &mut dyn crate::store::Store,
    audit: &mut crate::audit::AuditLog,
    clock: crate::clock::Clock,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<u64>> {
    let r = &cfg.retention;
    audit
        .rotate(r.audit_max_size, r.audit_keep, clock.now())
        .map_err(|e| Error::io(audit.path(), e))?;
    let back = |d: std::time::Duration| {
        chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC)
    };
    // A denial holds its task for approval_ttl: only those still holding one are kept.
    let (cutoff, holding_since) = (back(r.history), back(cfg.approval_ttl));
    let day = now.with_timezone(&cfg.tz()).date_naive().to_string();
    // Said also when nothing was old enough, so that a reader sees retention ran.
    Ok(store.prune_once_a_day(&day, cutoff, holding_since)?)
}

/// The plan of this tick from the stored state as it is now.
fn plan_now<'a>(
    t: &Tick,
    tasks: &[&'a crate::model::Task],
    registry: &'a Registry,
    store: &dyn crate::store::Store,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(plan::Plan<'a>, crate::store::Snapshot)> {
    let cfg = t.cfg;
    let snapshot = store.snapshot(
        now,
        cfg.approval_ttl,
        crate::schedule::local_midnight(cfg.tz(), now),
    )?;
    let plan = plan::plan(
        tasks,
        &PlanInput {
            config: cfg,
            registry,
            state: &snapshot,
            now,
            force: t.force,
            autonomy: t.autonomy,
            manual: t.only.is_some(),
        },
    );
    Ok((plan, snapshot))
}

/// The tasks a run plans: all of them, or only those named (`run --task`), in file order.
pub(crate) fn selected<'a>(
    tasks: Vec<&'a crate::model::Task>,
    only: Option<&HashSet<String>>,
) -> Vec<&'a crate::model::Task> {
    match only {
        None => tasks,
        Some(ids) => tasks.into_iter().filter(|t| ids.contains(&t.id)).collect(),
    }
}
