//! Child processes: own process group, concurrent capped capture, timeout with SIGTERM then
//! SIGKILL to the group, always reaped; if heartbeat dies, the leader gets SIGTERM at once and
//! the whole group SIGTERM, then SIGKILL after the grace period. Starting the child and
//! stopping its group are the [`supervisor`]'s, shared with the MCP servers.
//!
//! Invariants of [`run`]:
//!
//! - The child leads its own process group ([`supervisor::spawn`]), so every process it starts
//!   belongs to that group unless it leaves it on purpose (`setsid`, `setpgid`).
//! - Standard output and error are read concurrently, each on its own thread; at most
//!   [`OUTPUT_CAP`] bytes of each are kept and the rest is read and counted, so the child never
//!   blocks on a full pipe. Standard input, when given, is written on a third thread (a child
//!   that does not read it cannot deadlock heartbeat); otherwise it is `/dev/null`.
//! - The child is always reaped, on every path, by a waiter thread ([`Reaper`], started before
//!   the child) blocked in `Child::wait`; the caller waits for it with a deadline, so nothing
//!   busy-polls while a tool runs.
//! - At the timeout (or an external stop request) the whole group gets SIGTERM, and SIGKILL
//!   [`Request::kill_grace`] later if the leader still lives.
//! - **No tool leaves processes behind.** When the leader has exited (normally or not) and
//!   other members of its group are still alive, the group gets SIGTERM, then SIGKILL after
//!   the grace period. A process that must outlive its task has to leave the group (e.g. with
//!   `setsid`). Such a process may still hold the output pipes; the reader threads are then
//!   given [`READER_GRACE`] to finish, then told to stop: each ends within a poll and closes
//!   its end of the pipe, so a daemon's threads and descriptors never pile up; the output read
//!   so far is returned.
//! - A group id is only signalled while its leader has not been waited for, or right after;
//!   it is never `<= 1` (so `kill(-1, …)` can never happen).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{FailureKind, Outcome};
use crate::sys::capture::{Capture, read_capped, take};
use crate::sys::supervisor::{self, Environment, Launch, Reaper};
use crate::sys::{self, Signal};

/// Bytes of standard output (and, separately, of standard error) kept per process.
pub(crate) const OUTPUT_CAP: usize = 1024 * 1024;

/// SIGTERM → SIGKILL grace period (docs/reference.md#tool-processes).
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);

/// How long reader threads may take to finish once the group is gone; after that they are
/// abandoned (something outside the group holds the pipes).
pub(crate) const READER_GRACE: Duration = Duration::from_secs(2);

/// How much of the end of standard output is kept to find the last line (cost/summary),
/// also when the output passed [`OUTPUT_CAP`].
const TAIL_KEEP: usize = 64 * 1024;

/// How often a stop flag is looked at while a process runs.
const POLL: Duration = Duration::from_millis(50);

/// One process to run.
#[derive(Clone, Debug)]
pub(crate) struct Request<'a> {
    /// Program and arguments. A program without `/` is looked up in `PATH`; a relative one
    /// with a `/` (`./check.sh`) is taken relative to `cwd`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Added to (or replacing in) the inherited environment; applied after `env_remove`.
    pub env: Vec<(String, String)>,
    /// Removed from the inherited environment.
    pub env_remove: Vec<String>,
    /// Written to standard input, then closed; None: standard input is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// SIGTERM → SIGKILL delay, at the timeout and for leftover group members.
    pub kill_grace: Duration,
    /// An external "stop now" (e.g. the daemon shutting down): once set, the group is stopped
    /// as at a timeout and the error is `stopped`. Checked every 50 ms while the process runs.
    pub stop: Option<&'a AtomicBool>,
}

impl<'a> Request<'a> {
    /// A request with no extra environment, `/dev/null` as stdin, [`KILL_GRACE`] and no stop
    /// flag.
    pub(crate) fn new(argv: Vec<String>, cwd: PathBuf, timeout: Duration) -> Request<'a> {
        Request {
            argv,
            cwd,
            env: Vec::new(),
            env_remove: Vec::new(),
            stdin: None,
            timeout,
            kill_grace: KILL_GRACE,
            stop: None,
        }
    }
}

/// How the wait for the leader ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Exited,
    TimedOut,
    Stopped,
}

/// Runs one process to completion and describes what it did. Never panics: every failure
/// (cannot start, non-zero exit, signal, timeout) is an `Outcome` with `success == false`.
pub(crate) fn run(req: &Request) -> Outcome {
    let started = Instant::now();
    let mut outcome = run_inner(req);
    outcome.duration = started.elapsed();
    outcome
}

fn run_inner(req: &Request) -> Outcome {
    let Some(program) = req.argv.first() else {
        return not_started("cannot start a process: empty command".to_string());
    };
    if !req.cwd.is_dir() {
        return not_started(format!(
            "cannot start {program:?}: working directory {:?} is not a directory",
            req.cwd
        ));
    }

    // The waiter exists before the child does, so that no child is ever left without one.
    let reaper = match Reaper::start("tool-wait") {
        Ok(reaper) => reaper,
        Err(e) => return not_started(format!("cannot start the waiter thread: {e}")),
    };

    // Should heartbeat die while the tool runs, its leader gets SIGTERM and its group is
    // stopped by the group's watch, stood down once the group is handled here (or at any
    // return). The parent-death signal fires when the *thread* that spawned the child exits,
    // so tools are spawned from threads that outlive them (the caller's, which waits here).
    let launch = Launch {
        argv: &req.argv,
        cwd: &req.cwd,
        env: Environment::Inherited {
            remove: &req.env_remove,
        },
        set: &req.env,
        stdin_piped: req.stdin.is_some(),
        kill_grace: req.kill_grace,
    };
    let (mut child, group) = match supervisor::spawn(&launch) {
        Ok(spawned) => spawned,
        Err(e) => return not_started(format!("cannot start {program:?}: {e}")),
    };

    // From here on the child exists: every path must reap it.
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();

    let out = Arc::new(Mutex::new(Capture::new(OUTPUT_CAP, TAIL_KEEP)));
    let err = Arc::new(Mutex::new(Capture::new(OUTPUT_CAP, 0)));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    // Set when the readers are given up on: each then ends within a poll and closes its pipe.
    let abandon = Arc::new(AtomicBool::new(false));
    let mut readers = 0;
    let mut setup_error = None;
    let pipes = [
        // As files: one type for both pipes.
        stdout.map(|p| (File::from(OwnedFd::from(p)), &out, "stdout")),
        stderr.map(|p| (File::from(OwnedFd::from(p)), &err, "stderr")),
    ];
    for (pipe, cap, name) in pipes.into_iter().flatten() {
        let cap = Arc::clone(cap);
        let tx = done_tx.clone();
        let abandon = Arc::clone(&abandon);
        let spawned = thread::Builder::new()
            .name(format!("tool-{name}"))
            .spawn(move || {
                read_capped(pipe, &cap, Some(&abandon));
                let _ = tx.send(());
            });
        match spawned {
            Ok(_) => readers += 1,
            Err(e) => setup_error = Some(format!("cannot start a reader thread: {e}")),
        }
    }
    drop(done_tx);

    if let (Some(mut pipe), Some(data)) = (stdin, req.stdin.clone()) {
        // Detached: a child that never reads its input (or a grandchild that keeps the pipe
        // open) must not hold heartbeat. A broken pipe is the child's business.
        let spawned = thread::Builder::new()
            .name("tool-stdin".to_string())
            .spawn(move || {
                // A tool that exits without reading its input must not kill heartbeat, whatever
                // the process's SIGPIPE disposition is (a CLI may restore the default to exit
                // quietly on a closed stdout).
                sys::block_sigpipe_in_this_thread();
                let _ = pipe.write_all(&data);
            });
        if let Err(e) = spawned {
            setup_error = Some(format!("cannot start the stdin thread: {e}"));
        }
    }

    if let Some(msg) = setup_error {
        group.signal(Signal::SIGKILL);
        let _ = child.wait();
        return failed(msg);
    }
    reaper.reap(child);

    // Wait for the leader: deadline, stop flag, or exit.
    // None: a timeout too large to represent, i.e. none.
    let deadline = Instant::now().checked_add(req.timeout);
    let mut term_sent: Option<Instant> = None;
    let mut end = End::Exited;
    let status: io::Result<ExitStatus> = loop {
        let now = Instant::now();
        if req.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            end = End::Stopped;
        } else if deadline.is_some_and(|d| now >= d) {
            end = End::TimedOut;
        }
        if end != End::Exited {
            let (status, sent) = group.stop_leader(&reaper, req.kill_grace);
            term_sent = Some(sent);
            break status;
        }
        let mut wait = deadline.map_or(Duration::MAX, |d| d - now);
        if req.stop.is_some() {
            wait = wait.min(POLL);
        }
        if let Some(status) = reaper.wait_for(wait) {
            break status;
        }
    };

    // The leader is reaped. Leftover members of its group are stopped too (the grace period
    // counted from the SIGTERM of a timeout, if one was sent); then the watch stands down.
    group.terminate(term_sent, req.kill_grace);
    drop(group);

    // Readers finish when the last holder of the pipes is gone; one that outlived its group
    // (setsid) is abandoned after READER_GRACE.
    let readers_deadline = Instant::now() + READER_GRACE;
    let mut finished = 0;
    while finished < readers {
        let left = readers_deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(()) => finished += 1,
            Err(_) => break,
        }
    }
    abandon.store(true, Ordering::SeqCst);

    let out = take(&out);
    let err = take(&err);
    let (cost_usd, summary) = last_line_report(&out.tail, out.total == out.tail.len() as u64);
    let mut outcome = Outcome {
        success: false,
        exit_code: None,
        stdout: String::from_utf8_lossy(&out.kept).into_owned(),
        stdout_dropped: out.dropped(),
        stderr: String::from_utf8_lossy(&err.kept).into_owned(),
        stderr_dropped: err.dropped(),
        error: None,
        duration: Duration::ZERO,
        cost_usd,
        summary,
        failure: None,
    };
    match status {
        Ok(st) => {
            outcome.exit_code = st.code();
            outcome.failure = match (end, st.code()) {
                (End::TimedOut, _) => Some(FailureKind::Timeout),
                (End::Exited, Some(code)) if code != 0 => Some(FailureKind::Exit(code)),
                _ => None,
            };
            outcome.error = match (end, st.code(), st.signal()) {
                (End::TimedOut, _, _) => Some(format!(
                    "timed out after {}",
                    humantime::format_duration(req.timeout)
                )),
                (End::Stopped, _, _) => Some("stopped".to_string()),
                (End::Exited, Some(0), _) => None,
                (End::Exited, Some(code), _) => Some(exit_status(code)),
                (End::Exited, None, Some(sig)) => Some(format!("killed by signal {sig}")),
                (End::Exited, None, None) => Some(format!("ended with wait status {st}")),
            };
        }
        Err(e) => outcome.error = Some(format!("cannot wait for {program:?}: {e}")),
    }
    outcome.success = outcome.error.is_none();
    outcome
}

/// The exit code of a process [`run`] saw end on its own with a non-zero code; None when it
/// succeeded, was stopped (a timeout, a stop request), died of a signal or never started.
pub(crate) fn exit_code_of_own_end(outcome: &Outcome) -> Option<i32> {
    let code = outcome.exit_code?;
    (outcome.error.as_deref() == Some(exit_status(code).as_str())).then_some(code)
}

/// The error of a process that exited on its own with a non-zero `code`.
fn exit_status(code: i32) -> String {
    format!("exit status {code}")
}

fn failed(error: String) -> Outcome {
    Outcome {
        error: Some(error),
        ..Outcome::default()
    }
}

/// The process was never started (its failure is [`FailureKind::Spawn`]).
fn not_started(error: String) -> Outcome {
    Outcome {
        failure: Some(FailureKind::Spawn),
        ..failed(error)
    }
}

/// `cost_usd` and `summary` from the last non-empty line of `tail` when it is a JSON object.
/// `whole` says whether `tail` starts at the start of the stream; when it does not, a line
/// with no newline before it inside `tail` may be cut and is not trusted.
pub(crate) fn last_line_report(tail: &[u8], whole: bool) -> (Option<f64>, Option<String>) {
    let mut end = tail.len();
    loop {
        let start = tail[..end]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line = tail[start..end].trim_ascii();
        if !line.is_empty() {
            if start == 0 && !whole {
                return (None, None);
            }
            return parse_report(line);
        }
        if start == 0 {
            return (None, None);
        }
        end = start - 1;
    }
}

fn parse_report(line: &[u8]) -> (Option<f64>, Option<String>) {
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(line) else {
        return (None, None);
    };
    let cost = crate::model::reported_cost(obj.get("cost_usd"));
    let summary = obj
        .get("summary")
        .and_then(Value::as_str)
        .map(str::to_string);
    (cost, summary)
}
