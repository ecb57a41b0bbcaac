//! Asking a system program a short question (`crontab -l`, `systemctl --user list-timers`)
//! and reading its answer, for `heartbeat doctor`.
//!
//! Invariants:
//! - The program starts in its own process group ([`supervisor::spawn`]) with a cleared
//!   environment holding only the variables named (the program is looked up in their
//!   `PATH`), with `/dev/null` as standard input, in `/`.
//! - It gets a deadline: past it, its group is stopped (SIGTERM, SIGKILL after a short
//!   grace) and the answer is an error. It is always reaped; its output readers are given
//!   up on soon after, so a process that left the group cannot hold heartbeat.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use super::capture::{Capture, read_capped, take};
use super::supervisor::{self, Environment, Launch, Reaper};

/// Bytes of an answer kept.
const KEEP: usize = 256 * 1024;

/// SIGTERM → SIGKILL at the deadline.
const GRACE: Duration = Duration::from_secs(1);

/// What a program answered.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its standard output (up to 256 KiB), as text.
    pub stdout: String,
}

/// Run `argv` with only the variables `pass` of heartbeat's environment and wait up to
/// `timeout` for it. `Ok(None)`: there is no such program.
pub(crate) fn ask(argv: &[String], pass: &[&str], timeout: Duration) -> io::Result<Option<Answer>> {
    let reaper = Reaper::start("ask-wait")?;
    let launch = Launch {
        argv,
        cwd: Path::new("/"),
        env: Environment::Cleared { pass },
        set: &[],
        stdin_piped: false,
        kill_grace: GRACE,
    };
    let (mut child, group) = match supervisor::spawn(&launch) {
        Ok(spawned) => spawned,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let out = Arc::new(Mutex::new(Capture::new(KEEP, 0)));
    let err = Arc::new(Mutex::new(Capture::new(0, 0)));
    let abandon = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut readers = Vec::new();
    let pipes = [
        child
            .stdout
            .take()
            .map(|p| (File::from(OwnedFd::from(p)), &out)),
        child
            .stderr
            .take()
            .map(|p| (File::from(OwnedFd::from(p)), &err)),
    ];
    for (pipe, cap) in pipes.into_iter().flatten() {
        let cap = Arc::clone(cap);
        let abandon = Arc::clone(&abandon);
        let done = done_tx.clone();
        readers.push(thread::spawn(move || {
            read_capped(pipe, &cap, Some(&abandon));
            let _ = done.send(());
        }));
    }
    drop(done_tx);
    reaper.reap(child);
    let status = match reaper.wait_for(timeout) {
        Some(status) => status,
        None => {
            let (_, term_sent) = group.stop_leader(&reaper, GRACE);
            group.terminate(Some(term_sent), GRACE);
            abandon.store(true, Ordering::SeqCst);
            for r in readers {
                let _ = r.join();
            }
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {}", humantime::format_duration(timeout)),
            ));
        }
    };
    // What the leader left behind in its group; then the readers get to the end of what
    // was written, unless a process that left the group holds a pipe open.
    group.terminate(None, GRACE);
    let until = Instant::now() + GRACE;
    for _ in 0..readers.len() {
        let left = until.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    abandon.store(true, Ordering::SeqCst);
    for r in readers {
        let _ = r.join();
    }
    let stdout = String::from_utf8_lossy(&take(&out).kept).into_owned();
    Ok(Some(Answer {
        success: status?.success(),
        stdout,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_string()).collect()
    }

    #[test]
    fn an_answer_is_its_output_and_whether_it_succeeded() {
        let got = ask(
            &argv(&["sh", "-c", "echo hello; exit 3"]),
            &["PATH"],
            Duration::from_secs(30),
        )
        .unwrap()
        .unwrap();
        assert_eq!(got.stdout, "hello\n");
        assert!(!got.success);
    }

    #[test]
    fn the_environment_holds_only_what_is_passed() {
        let got = ask(&argv(&["/usr/bin/env"]), &[], Duration::from_secs(30))
            .unwrap()
            .unwrap();
        assert_eq!(got.stdout, "");
    }

    #[test]
    fn a_missing_program_is_none_and_a_slow_one_an_error() {
        assert!(
            ask(
                &argv(&["no-such-program-here"]),
                &["PATH"],
                Duration::from_secs(30)
            )
            .unwrap()
            .is_none()
        );
        let err = ask(
            &argv(&["sleep", "30"]),
            &["PATH"],
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
