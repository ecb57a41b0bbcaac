//! The daemon loop: tick every interval, aligned in local time; answer Telegram; reload on
//! SIGHUP; stop on SIGTERM. `cmd/daemon.rs` gives it the way to load the config and prints
//! what it tells ([`Notice`]).
//!
//! Invariants:
//! - No busy loop: the main thread blocks on one channel until the next tick is due (at most
//!   a minute at a time, to re-read the wall clock: after a suspend or a clock jump it ticks
//!   once, never a burst of missed ticks).
//! - Signals are caught by signal-hook's handler, which only wakes one thread; that thread
//!   turns them into events. No signal is blocked or ignored, so tools start with none.
//!   SIGTERM/SIGINT: no new task starts at once; running tools get 10 s, then are stopped;
//!   then `daemon_stopped` and exit 0. SIGHUP: reload the config now (`config_reloaded`, or
//!   the error and the old config kept). SIGUSR1: tick now.
//! - Every tick re-reads the config and the files; a config that became invalid is reported
//!   (`config_reloaded` with its error, once per distinct error) and the last good one is used.
//! - Ticks share the run lock with `run --once` and `approve`: a tick that finds it held is
//!   skipped (`run_skipped`, `locked`).
//! - With Telegram, a second thread long-polls the Bot API and hands updates to the main
//!   thread, which decides; a press that approves runs the approved task right away.
//! - With a channel that takes replies (ntfy's buttons), the main thread reads its reply
//!   topic at every tick and at least every 30 s between ticks; a reply that approves runs
//!   the approved task right away.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use crate::telegram::Received;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;

use super::bot;
use super::decide::Decider;
use super::files::read_files;
use super::run::{Tick, connect_telegram, tick};
use super::session::{self, Stop};
use crate::audit::Event as AuditEvent;
use crate::audit::Secrets;
use crate::audit::event::Daemon;
use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Error, Result, WorkStarted};
use crate::lock;
use crate::model::{Problem, Trigger};
use crate::report::Report;
use crate::schedule::local_midnight;
use crate::store::{Store, parse_ts};
use crate::telegram::Telegram;
use crate::text::Redacted;

/// Running tools get this long after SIGTERM before they are stopped.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// The longest the main thread sleeps without looking at the wall clock.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Long-poll timeout for Telegram updates.
const POLL: Duration = Duration::from_secs(25);
/// The shortest time between two polls that brought nothing (docs/reference.md#daemon).
const MIN_EMPTY_POLL: Duration = Duration::from_secs(1);
/// The longest time between two reads of the channels' reply topics, whatever the tick
/// interval (docs/reference.md#approvals-by-ntfy).
const REPLY_POLL: Duration = Duration::from_secs(30);

enum Event {
    Signal(i32),
    Updates(Vec<Received>),
}

/// What the daemon tells its person as it goes, for its front end to show.
pub(crate) enum Notice<'a> {
    Started {
        pid: u32,
        every: Duration,
    },
    /// A config that does not load; the last good one is kept. `signal`: found on SIGHUP,
    /// else by a tick.
    ConfigKept {
        error: &'a str,
        signal: bool,
    },
    /// SIGHUP loaded the config.
    ConfigReloaded,
    /// The warnings a tick found in the files and the stored state (a grant left behind),
    /// before it runs: at every tick, for the front end to show when they change.
    Warnings(Vec<Problem>),
    /// What a tick did.
    Ticked(&'a Report),
    /// A tick that failed as a whole (a file it could not read); the daemon goes on.
    TickFailed(&'a Error),
    /// Telling about a failed tick failed (its audit line, its alert); the daemon goes on.
    NotTold(&'a Error),
    Stopped,
}

/// What the daemon asks of the command that runs it.
pub(crate) trait Host {
    /// The config as it is now (read again at every tick and on SIGHUP).
    fn load_config(&self) -> Result<Config>;
    fn notice(&self, notice: Notice);
    /// A diagnostic line (`-v`).
    fn diag(&self, message: String);
}

/// How the daemon was started.
pub(crate) struct Options {
    /// The start time (`--now`); the daemon runs on from it in real time.
    pub now: DateTime<Utc>,
    /// `--every`: the tick interval instead of the config's.
    pub every: Option<Duration>,
}

/// Run the daemon until SIGTERM or SIGINT. `work` is set when a tool starts.
pub(crate) fn run(host: &dyn Host, opts: &Options, work: &WorkStarted) -> Result<()> {
    crate::store::running_as_daemon();
    let stop = Arc::new(Stop::default());
    let (tx, rx) = mpsc::channel();
    spawn_signal_thread(tx.clone(), stop.clone())?;

    let mut cfg = host.load_config()?;
    crate::engine::files::ensure_state_dir(&cfg.state_dir)?;
    let daemon_file = cfg.state_dir.join(lock::DAEMON_FILE);
    let mut daemon = match lock::hold_daemon(&cfg.state_dir, opts.now) {
        Ok(Ok(held)) => held,
        Ok(Err(other)) => {
            return Err(Error::Usage(format!(
                "another heartbeat daemon{} is running on {}: stop it first, or give this one \
                 its own --state-dir",
                other.pid.map_or(String::new(), |p| format!(" (pid {p})")),
                cfg.state_dir.display()
            )));
        }
        Err(e) => return Err(Error::io(daemon_file, e)),
    };
    // `--now` shifts the daemon's clock; it then runs in real time from there.
    let offset = opts.now - Utc::now();
    let clock = move || Utc::now() + offset;
    let every = |cfg: &Config| opts.every.unwrap_or(cfg.daemon.every);
    let diag = |m| host.diag(m);

    let mut telegram = connect_telegram(&cfg, Duration::ZERO, &diag);
    // The long-poll thread of the current `[telegram]`; a new one replaces it on a change.
    let generation = Arc::new(AtomicU64::new(0));
    start_polling(&cfg, &tx, &generation)?;

    record(&cfg, clock(), &AuditEvent::DaemonStarted(Daemon::started()))?;
    host.notice(Notice::Started {
        pid: std::process::id(),
        every: every(&cfg),
    });

    let mut last_error: Option<String> = None;
    // Some(trigger) when a tick is due: its schedule, or a person (SIGUSR1, `/run`).
    let mut due = last_run_older_than(&cfg, clock(), every(&cfg))?.then_some(Trigger::Schedule);
    let mut stop_signal = None;
    let mut shown_next = None;
    let mut last_tick_error: Option<String> = None;
    // Every tick reads the reply topics; between ticks they are read at least this often.
    let mut replies_read = std::time::Instant::now();
    loop {
        if due.is_none() && super::replies::configured(&cfg) && replies_read.elapsed() >= REPLY_POLL
        {
            replies_read = std::time::Instant::now();
            if read_replies(host, &cfg, clock()) {
                // Approved from a phone: run it now, like `heartbeat approve`.
                let _ = run_tick(
                    host,
                    work,
                    &cfg,
                    clock(),
                    &stop,
                    telegram.as_ref(),
                    &[],
                    None,
                );
            }
        }
        if let Some(trigger) = due.take() {
            replies_read = std::time::Instant::now();
            // The config and files are read afresh at every tick. A config that cannot be
            // loaded is `config_reloaded` with its error, once per distinct error, and the
            // tick runs with the last good one; files it cannot read are `tick_failed`
            // (docs/reference.md#daemon).
            match reload(host, &mut cfg, &mut telegram, &tx, &generation)? {
                None => last_error = None,
                Some(msg) => {
                    host.notice(Notice::ConfigKept {
                        error: &msg,
                        signal: false,
                    });
                    if last_error.as_ref() != Some(&msg) {
                        let error = Secrets::taken().redact(&msg);
                        record(
                            &cfg,
                            clock(),
                            &AuditEvent::ConfigReloaded(Daemon::new(None, Some(&error))),
                        )?;
                        last_error = Some(msg);
                    }
                }
            }
            let failed = run_tick(
                host,
                work,
                &cfg,
                clock(),
                &stop,
                telegram.as_ref(),
                &[],
                Some(trigger),
            );
            // A file the ticks cannot read is audited and sent to the phone once, and again
            // when the error changes.
            if failed != last_tick_error {
                if let Some(msg) = &failed {
                    let why = Secrets::taken().redact(&format!("{msg}; the tick ran nothing"));
                    let line = AuditEvent::TickFailed { error: &why };
                    let told = record(&cfg, clock(), &line)
                        .and_then(|()| alert(&cfg, telegram.as_ref(), &why, clock()));
                    if let Err(e) = told {
                        host.notice(Notice::NotTold(&e));
                    }
                }
                last_tick_error = failed;
            }
        }
        if stop.stopping() {
            // SIGTERM came during the tick: its event is queued; take it for the record.
            stop_signal = rx.try_iter().find_map(|e| match e {
                Event::Signal(sig @ (SIGTERM | SIGINT)) => Some(sig),
                _ => None,
            });
            break;
        }
        let now = clock();
        let next = next_tick(cfg.tz(), now, every(&cfg));
        if shown_next != Some(next) {
            // Only for `status`: a failure to write it changes nothing else.
            let _ = daemon.set_next(next);
            shown_next = Some(next);
        }
        // A stored retry time before the next tick ends the sleep then: the tick runs it
        // (docs/reference.md#retries).
        let next = match next_retry(&cfg, now) {
            Some(at) if at < next => at,
            _ => next,
        };
        let wait = wait_time(
            (next - now).to_std().unwrap_or_default(),
            super::replies::configured(&cfg).then(|| replies_read.elapsed()),
        );
        match rx.recv_timeout(wait) {
            Ok(Event::Signal(sig @ (SIGTERM | SIGINT))) => {
                stop_signal = Some(sig);
                break;
            }
            Ok(Event::Signal(sig @ SIGHUP)) => {
                let error = reload(host, &mut cfg, &mut telegram, &tx, &generation)?;
                host.notice(match &error {
                    None => Notice::ConfigReloaded,
                    Some(msg) => Notice::ConfigKept {
                        error: msg,
                        signal: true,
                    },
                });
                record(
                    &cfg,
                    clock(),
                    &AuditEvent::ConfigReloaded(Daemon::new(
                        Some(signal_name(sig)),
                        error
                            .as_deref()
                            .map(|e| Secrets::taken().redact(e))
                            .as_ref(),
                    )),
                )?;
                // An error is reported once: the next ticks find the same one.
                last_error = error;
            }
            Ok(Event::Signal(_)) => due = Some(Trigger::Manual),
            Ok(Event::Updates(updates)) => {
                let fx = handle_updates(&cfg, telegram.as_ref(), &updates, clock())?;
                if fx.run_now {
                    due = Some(Trigger::Manual);
                } else if !fx.pressed.is_empty() {
                    // Approved from a phone: run it now, like `heartbeat approve`.
                    let _ = run_tick(
                        host,
                        work,
                        &cfg,
                        clock(),
                        &stop,
                        telegram.as_ref(),
                        &fx.pressed,
                        None,
                    );
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if clock() >= next {
                    due = Some(Trigger::Schedule);
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // A fleet's daemon gives up its leases as it stops (its poll thread retired first), so
    // another node's daemon takes over at once, not when they run out.
    generation.fetch_add(1, Ordering::SeqCst);
    if cfg.fleet.is_some() {
        match crate::store::open(&cfg).and_then(|mut s| s.release_leases()) {
            Ok(()) => {}
            Err(e) => host.diag(format!("cannot release the fleet's leases: {e}")),
        }
    }
    let sig = stop_signal.map(signal_name);
    record(
        &cfg,
        clock(),
        &AuditEvent::DaemonStopped(Daemon::new(sig, None)),
    )?;
    host.notice(Notice::Stopped);
    Ok(())
}

/// Re-read the config. On success it replaces `cfg`, and a changed `[telegram]` gets new
/// clients (sending and long-polling); on error the old config stays and the error's text
/// is returned.
fn reload(
    host: &dyn Host,
    cfg: &mut Config,
    telegram: &mut Option<Telegram>,
    tx: &Sender<Event>,
    generation: &Arc<AtomicU64>,
) -> Result<Option<String>> {
    match host.load_config() {
        // The daemon holds its state dir's daemon lock: another state dir needs a restart
        // (a second daemon may already be running there).
        Ok(fresh) if fresh.state_dir != cfg.state_dir => Ok(Some(format!(
            "state_dir changed from {} to {}: restart the daemon to use it",
            cfg.state_dir.display(),
            fresh.state_dir.display()
        ))),
        Ok(fresh) => {
            if fresh.telegram != cfg.telegram {
                *telegram = connect_telegram(&fresh, Duration::ZERO, &|m| host.diag(m));
                start_polling(&fresh, tx, generation)?;
            }
            *cfg = fresh;
            Ok(None)
        }
        Err(e) => Ok(Some(e.to_string())),
    }
}

/// One tick; its problems are told to the host and the daemon goes on. The error of a
/// tick that failed as a whole (a file it could not read), for the audit log. `plan`: the
/// whole plan, started by this trigger; None runs only what a person just approved.
#[allow(clippy::too_many_arguments)]
fn run_tick(
    host: &dyn Host,
    work: &WorkStarted,
    cfg: &Config,
    now: DateTime<Utc>,
    stop: &Stop,
    telegram: Option<&Telegram>,
    pressed: &[bot::Pressed],
    plan: Option<Trigger>,
) -> Option<String> {
    let result = read_files(cfg, false).and_then(|files| {
        // A grant left behind by an edit: said like the files' warnings.
        let mut warnings = super::query::file_warnings(&files);
        warnings.extend(super::query::orphan_problems(cfg, &files).unwrap_or_default());
        host.notice(Notice::Warnings(warnings));
        tick(&Tick {
            cfg,
            files: &files,
            clock: Clock::starting_at(now),
            force: false,
            autonomy: cfg.autonomy,
            mode: crate::model::RunMode::Daemon,
            trigger: plan.unwrap_or(Trigger::Manual),
            telegram,
            secrets: &Secrets::from_config(cfg),
            read_updates: false,
            pressed,
            stop: Some(stop),
            plan: plan.is_some(),
            only: None,
            diag: &|m| host.diag(m),
            work,
        })
    });
    match result {
        Ok(report) => {
            host.notice(Notice::Ticked(&report));
            None
        }
        Err(e) => {
            host.notice(Notice::TickFailed(&e));
            Some(e.to_string())
        }
    }
}

/// Decide on updates the poll thread fetched.
fn handle_updates(
    cfg: &Config,
    telegram: Option<&Telegram>,
    updates: &[Received],
    now: DateTime<Utc>,
) -> Result<bot::Effects> {
    let (Some(tg), Some(tc)) = (telegram, &cfg.telegram) else {
        return Ok(bot::Effects::default());
    };
    let audit = session::open_audit(cfg, &Secrets::from_config(cfg))?;
    let store = crate::store::open(cfg)?;
    let mut d = Decider::from_parts(
        cfg.clone(),
        store,
        audit,
        String::new(),
        Clock::starting_at(now),
    );
    d.expire()?;
    let fx = bot::process(tg, &mut d, tc, updates)?;
    // Replies to commands go out now, not at the next tick.
    let (mut store, mut audit) = d.into_parts();
    deliver_now(cfg, Some(tg), &mut *store, &mut audit, now)?;
    Ok(fx)
}

/// Read the channels' reply topics between ticks; true when a reply approved something, to
/// run now. A failure is a diagnostic: the daemon goes on, and the next read tries again.
fn read_replies(host: &dyn Host, cfg: &Config, now: DateTime<Utc>) -> bool {
    let read = || -> Result<Vec<i64>> {
        let audit = session::open_audit(cfg, &Secrets::from_config(cfg))?;
        let store = crate::store::open(cfg)?;
        let clock = Clock::starting_at(now);
        let mut d = Decider::from_parts(cfg.clone(), store, audit, String::new(), clock);
        d.expire()?;
        super::replies::read(&mut d, &|m| host.diag(m))
    };
    match read() {
        Ok(approved) => !approved.is_empty(),
        Err(e) => {
            host.diag(format!("cannot read replies: {e}"));
            false
        }
    }
}

/// Send what the outbox holds now, between ticks, and audit what became of it.
fn deliver_now(
    cfg: &Config,
    tg: Option<&Telegram>,
    store: &mut dyn Store,
    audit: &mut crate::audit::AuditLog,
    now: DateTime<Utc>,
) -> Result<()> {
    let transport = tg.map(|tg| tg as &dyn crate::telegram::Transport);
    let (_, lines) = super::outbox::deliver(store, transport, cfg, now)?;
    for notice in &lines {
        audit
            .record(now, &notice.event(None))
            .map_err(|e| Error::io(audit.path(), e))?;
    }
    audit.sync().map_err(|e| Error::io(audit.path(), e))
}

/// An urgent message to every channel, sent now (and kept in the outbox if a channel is
/// down): a daemon whose ticks run nothing says so where its person looks.
fn alert(
    cfg: &Config,
    telegram: Option<&Telegram>,
    what: &Redacted,
    now: DateTime<Utc>,
) -> Result<()> {
    if cfg.telegram.is_none() && cfg.channels.is_empty() {
        return Ok(());
    }
    let secrets = Secrets::from_config(cfg);
    let mut audit = session::open_audit(cfg, &secrets)?;
    let mut store = crate::store::open(cfg)?;
    let mut msg = crate::render::telegram::Rendered::new(
        crate::model::MessageKind::Failure,
        "the daemon's ticks cannot run",
        format!("⚠️ <b>heartbeat</b>: {}", what.first_line(500).escape()),
    );
    msg.data = serde_json::json!({ "error": what.as_str() });
    super::outbox::enqueue_all(&mut *store, cfg, &msg, false, now, &secrets)?;
    deliver_now(cfg, telegram, &mut *store, &mut audit, now)
}

fn record(cfg: &Config, now: DateTime<Utc>, event: &AuditEvent) -> Result<()> {
    let mut audit = session::open_audit(cfg, &Secrets::from_config(cfg))?;
    audit
        .record(now, event)
        .map_err(|e| Error::io(audit.path(), e))?;
    audit.sync().map_err(|e| Error::io(audit.path(), e))
}

/// The earliest stored retry time after `now`, if the state can be read.
fn next_retry(cfg: &Config, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let store = crate::store::open_existing(cfg).ok()??;
    store.next_retry().ok()?.filter(|at| *at > now)
}

/// How long the main thread waits: until the next tick, at most [`MAX_SLEEP`], and, with a
/// channel that takes replies (`since_read`: how long ago they were read), no longer than
/// until the next read of them is due.
fn wait_time(until_tick: Duration, since_read: Option<Duration>) -> Duration {
    let wait = until_tick.min(MAX_SLEEP);
    match since_read {
        Some(since) => wait.min(REPLY_POLL.saturating_sub(since)),
        None => wait,
    }
}

/// The next multiple of `every` after `now`, counted from local midnight (every 30m →
/// :00 and :30); a new local day starts the count again.
pub(crate) fn next_tick(tz: Tz, now: DateTime<Utc>, every: Duration) -> DateTime<Utc> {
    let midnight = local_midnight(tz, now);
    let every_ms = every.as_millis().max(1) as i64;
    let since = (now - midnight).num_milliseconds().max(0);
    let next = midnight + chrono::Duration::milliseconds((since / every_ms + 1) * every_ms);
    let tomorrow = local_midnight(tz, midnight + chrono::Duration::hours(26));
    next.min(tomorrow)
}

/// A tick at start when the last run is older than the interval (or there was none).
fn last_run_older_than(cfg: &Config, now: DateTime<Utc>, every: Duration) -> Result<bool> {
    let Some(store) = crate::store::open_existing(cfg)? else {
        return Ok(true);
    };
    Ok(
        match store.last_run()?.and_then(|r| parse_ts(&r.started_at)) {
            Some(at) => (now - at).to_std().is_ok_and(|d| d >= every),
            None => true,
        },
    )
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGHUP => "SIGHUP",
        SIGUSR1 => "SIGUSR1",
        _ => "signal",
    }
}

/// One thread takes the signals. TERM/INT also stop new tasks at once and, after the
/// grace period, the running tools: the main thread may be busy in a tick.
fn spawn_signal_thread(tx: Sender<Event>, stop: Arc<Stop>) -> Result<()> {
    let mut signals =
        Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1]).map_err(|e| Error::io("<signals>", e))?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if matches!(sig, SIGTERM | SIGINT) {
                stop.no_new.store(true, Ordering::SeqCst);
                let stop = stop.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(STOP_GRACE);
                    stop.kill.store(true, Ordering::SeqCst);
                });
            }
            if tx.send(Event::Signal(sig)).is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Start long-polling for this config's `[telegram]` (if any), retiring the thread of the
/// previous one: a thread whose generation is no longer current stops before it hands on
/// anything (what it fetched is not confirmed to Telegram, so the new thread gets it).
fn start_polling(cfg: &Config, tx: &Sender<Event>, generation: &Arc<AtomicU64>) -> Result<()> {
    let current = generation.fetch_add(1, Ordering::SeqCst) + 1;
    let env = |name: &str| crate::redact::take_env(name);
    if let Some(tc) = &cfg.telegram
        && let Ok(Some(poller)) = Telegram::connect(tc, &env, POLL)
    {
        let start = crate::store::open_existing(cfg)?
            .map(|s| bot::stored_offset(&*s))
            .transpose()?
            .flatten();
        let fleet = cfg.fleet.is_some().then(|| cfg.clone());
        spawn_poll_thread(
            poller,
            start,
            tx.clone(),
            generation.clone(),
            current,
            fleet,
        );
    }
    Ok(())
}

/// In a fleet, the `telegram` lease the poll thread holds while it polls
/// (docs/fleet.md#singletons): on a connection of its own, renewed before each poll, each
/// poll shorter than a third of the lease.
struct PollLease {
    cfg: Config,
    store: Option<Box<dyn Store>>,
    held: bool,
}

impl PollLease {
    /// Whether this node may poll now; when it has just taken the lease over, where the
    /// last holder stopped reading (`Some(offset)`).
    fn take(&mut self) -> Result<(bool, Option<Option<i32>>)> {
        let store = match &mut self.store {
            Some(store) => store,
            None => self.store.insert(crate::store::open(&self.cfg)?),
        };
        let ours = store.lease("telegram").inspect_err(|_| self.held = false)?;
        let taken = ours && !self.held;
        self.held = ours;
        let offset = if taken {
            Some(bot::stored_offset(&**store)?)
        } else {
            None
        };
        Ok((ours, offset))
    }

    fn poll_time(&self) -> Duration {
        let lease = self.cfg.fleet.as_ref().map_or(POLL, |f| f.lease);
        (lease / 3).min(POLL)
    }
}

/// Long-poll Telegram and hand updates to the main thread. Errors back off, never spin.
fn spawn_poll_thread(
    tg: Telegram,
    start: Option<i32>,
    tx: Sender<Event>,
    generation: Arc<AtomicU64>,
    mine: u64,
    fleet: Option<Config>,
) {
    std::thread::spawn(move || {
        let mut offset = start;
        let mut backoff = Duration::from_secs(1);
        let mut lease = fleet.map(|cfg| PollLease {
            cfg,
            store: None,
            held: false,
        });
        loop {
            let mut poll = POLL;
            if let Some(lease) = &mut lease {
                poll = lease.poll_time();
                match lease.take() {
                    Ok((true, taken)) => {
                        if let Some(stored) = taken {
                            offset = stored;
                        }
                    }
                    Ok((false, _)) => {
                        // Another node polls: ask again before its lease could end.
                        std::thread::sleep(poll);
                        continue;
                    }
                    Err(_) => {
                        lease.store = None;
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(60));
                        continue;
                    }
                }
                if generation.load(Ordering::SeqCst) != mine {
                    return;
                }
            }
            let asked = std::time::Instant::now();
            let got = tg.updates(offset, poll);
            if generation.load(Ordering::SeqCst) != mine {
                return;
            }
            match got {
                Ok(updates) if updates.is_empty() => {
                    backoff = Duration::from_secs(1);
                    // A server that answers a long poll at once (not as the Bot API does)
                    // must not turn this loop into a busy one: one empty poll a second.
                    if let Some(rest) = MIN_EMPTY_POLL.checked_sub(asked.elapsed()) {
                        std::thread::sleep(rest);
                    }
                }
                Ok(updates) => {
                    backoff = Duration::from_secs(1);
                    if let Some(last) = updates.last() {
                        offset = Some(last.next_offset);
                    }
                    if tx.send(Event::Updates(updates)).is_err() {
                        return;
                    }
                }
                Err(_) => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn replies_are_read_at_least_every_30_s_whatever_the_interval() {
        let s = Duration::from_secs;
        // Without replies: until the tick, a minute at most.
        assert_eq!(wait_time(s(3600), None), s(60));
        assert_eq!(wait_time(s(5), None), s(5));
        // With them: until their next read, when it comes before.
        assert_eq!(wait_time(s(3600), Some(s(0))), s(30));
        assert_eq!(wait_time(s(3600), Some(s(25))), s(5));
        assert_eq!(wait_time(s(3600), Some(s(45))), s(0));
        assert_eq!(wait_time(s(10), Some(s(0))), s(10));
    }

    #[test]
    fn ticks_fall_on_multiples_of_the_interval_from_local_midnight() {
        let berlin = chrono_tz::Europe::Berlin;
        let half_hour = Duration::from_secs(30 * 60);
        // 12:07 in Berlin (summer time, UTC+2) → 12:30.
        assert_eq!(
            next_tick(berlin, ts("2026-05-04T10:07:00Z"), half_hour),
            ts("2026-05-04T10:30:00Z")
        );
        // On a multiple: the next one, never now again.
        assert_eq!(
            next_tick(berlin, ts("2026-05-04T10:30:00Z"), half_hour),
            ts("2026-05-04T11:00:00Z")
        );
        // Every 7h from midnight: 00, 07, 14, 21, then the new day starts again at 00:00.
        let seven = Duration::from_secs(7 * 3600);
        assert_eq!(
            next_tick(berlin, ts("2026-05-04T19:30:00Z"), seven),
            ts("2026-05-04T22:00:00Z"),
            "21:30 local → midnight, not 04:00"
        );
    }
}
