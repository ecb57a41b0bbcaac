//! The run lock: an exclusive `flock` on the state directory itself (docs/reference.md#run-lock);
//! and the daemon's lock, one daemon per state dir.
//!
//! Invariants:
//! - The lock is the directory's: a cleaner can delete `heartbeat.lock` while it is held (and
//!   a second run would then lock a new file beside the first), but it cannot remove the
//!   directory that holds the database while heartbeat runs in it.
//! - The kernel drops the lock when the holder dies, so there is never a stale lock to clean
//!   up.
//! - `<state_dir>/heartbeat.lock` only records the holder's pid and start time, written after
//!   the lock is taken, so that others can name it (`status`, the stuck warning). It is
//!   informative: a missing or garbled file means "holder unknown", never "free".

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::audit::format_ts;
use crate::store::parse_ts;

pub(crate) const LOCK_FILE: &str = "heartbeat.lock";

/// Held until dropped.
#[derive(Debug)]
pub(crate) struct RunLock {
    _dir: File,
}

/// Who holds the lock, as far as the lock file tells.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Holder {
    pub pid: Option<u32>,
    pub since: Option<DateTime<Utc>>,
    /// The daemon's next tick (the daemon file only).
    pub next: Option<DateTime<Utc>>,
}

pub(crate) enum Attempt {
    Acquired(RunLock),
    Held(Holder),
}

/// The state directory, opened read-only (as a directory) to be locked.
fn open_dir(state_dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY)
        .open(state_dir)
}

/// Take the lock without waiting. `now` is recorded as the holder's start time.
pub(crate) fn try_acquire(state_dir: &Path, now: DateTime<Utc>) -> io::Result<Attempt> {
    let dir = open_dir(state_dir)?;
    match dir.try_lock() {
        Ok(()) => {
            write_holder(state_dir, now)?;
            Ok(Attempt::Acquired(RunLock { _dir: dir }))
        }
        Err(TryLockError::WouldBlock) => Ok(Attempt::Held(read_holder(state_dir)?)),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

fn write_holder(state_dir: &Path, now: DateTime<Utc>) -> io::Result<()> {
    // Opened without waiting and without following a link, then checked, before anything is
    // cut: a FIFO would block the open for ever, and a link could point at any file.
    // (Read and write: a FIFO then opens at once even with no one at its other end.)
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(state_dir.join(LOCK_FILE))
        .map_err(not_a_link)?;
    regular(&file)?;
    file.set_len(0)?;
    file.write_all(holder_text(now).as_bytes())
}

/// Refuses anything but a regular file as the lock's record of its holder.
fn regular(file: &File) -> io::Result<()> {
    if file.metadata()?.is_file() {
        Ok(())
    } else {
        Err(io::Error::other(
            "not a regular file (a FIFO, device or directory cannot record who holds a lock); \
             remove it",
        ))
    }
}

/// ELOOP from `O_NOFOLLOW`, said in words.
fn not_a_link(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(nix::libc::ELOOP) {
        io::Error::other("a symbolic link, not a regular file; remove it")
    } else {
        e
    }
}

/// What a lock's file says of its holder: this process, since `now`.
fn holder_text(now: DateTime<Utc>) -> String {
    format!("pid {}\nsince {}\n", std::process::id(), format_ts(now))
}

/// Take the lock, waiting up to `timeout` for the holder to finish (`approve` waits; a
/// run does not). Err: who still held it when the time ran out.
pub(crate) fn acquire_wait(
    state_dir: &Path,
    now: DateTime<Utc>,
    timeout: Duration,
) -> io::Result<Result<RunLock, Holder>> {
    let deadline = Instant::now() + timeout;
    loop {
        match try_acquire(state_dir, now)? {
            Attempt::Acquired(lock) => return Ok(Ok(lock)),
            Attempt::Held(holder) if Instant::now() >= deadline => return Ok(Err(holder)),
            // flock has no timed wait; a short sleep between attempts costs nothing here.
            Attempt::Held(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Whether the lock is held right now, and by whom. Never creates the state dir.
pub(crate) fn probe(state_dir: &Path) -> io::Result<Option<Holder>> {
    let dir = match open_dir(state_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // A shared lock is enough to learn whether an exclusive one is held.
    match dir.try_lock_shared() {
        Ok(()) => Ok(None),
        Err(TryLockError::WouldBlock) => Ok(Some(read_holder(state_dir)?)),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Who the lock's file names. A missing or unreadable file: nobody known. A file that is not
/// a regular one (a FIFO would block a plain open for ever) is an error.
fn read_holder(state_dir: &Path) -> io::Result<Holder> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(state_dir.join(LOCK_FILE))
    {
        Ok(file) => file,
        Err(_) => return Ok(Holder::default()),
    };
    regular(&file)?;
    Ok(holder_in(&file))
}

/// The holder a lock's file names (see [`holder_text`]); unknown parts stay `None`.
fn holder_in(file: &File) -> Holder {
    let mut text = String::new();
    let _ = file.take(4096).read_to_string(&mut text);
    let mut holder = Holder::default();
    for line in text.lines() {
        if let Some(pid) = line.strip_prefix("pid ") {
            holder.pid = pid.trim().parse().ok();
        } else if let Some(since) = line.strip_prefix("since ") {
            holder.since = parse_ts(since.trim());
        } else if let Some(next) = line.strip_prefix("next ") {
            holder.next = parse_ts(next.trim());
        }
    }
    holder
}

/// The file a daemon holds locked for its whole life (docs/reference.md#daemon; one daemon per
/// state dir: a second would race the first for every tick's run lock, and Telegram answers two
/// pollers of one bot with 409 Conflict).
pub(crate) const DAEMON_FILE: &str = "heartbeat.daemon";

/// Held by the daemon until it exits; the kernel drops it when the daemon dies.
#[derive(Debug)]
pub(crate) struct DaemonLock {
    file: File,
    since: DateTime<Utc>,
}

impl DaemonLock {
    /// Record when the next tick is due, for `status` (rewritten in place: the lock is on
    /// the open file, not its contents).
    pub(crate) fn set_next(&mut self, next: DateTime<Utc>) -> io::Result<()> {
        let text = format!("{}next {}\n", holder_text(self.since), format_ts(next));
        // Written over the old text, then cut to length: a reader never finds it empty.
        self.file.write_all_at(text.as_bytes(), 0)?;
        self.file.set_len(text.len() as u64)
    }
}

/// Become the state dir's daemon, started at `now`. `Err`: another daemon is.
pub(crate) fn hold_daemon(
    state_dir: &Path,
    now: DateTime<Utc>,
) -> io::Result<Result<DaemonLock, Holder>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(state_dir.join(DAEMON_FILE))
        .map_err(not_a_link)?;
    regular(&file)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.write_all(holder_text(now).as_bytes())?;
            Ok(Ok(DaemonLock { file, since: now }))
        }
        Err(TryLockError::WouldBlock) => Ok(Err(holder_in(&file))),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// The daemon running on this state dir, if any (for `status`). Never creates anything.
pub(crate) fn probe_daemon(state_dir: &Path) -> io::Result<Option<Holder>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(state_dir.join(DAEMON_FILE))
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    regular(&file)?;
    match file.try_lock_shared() {
        Ok(()) => Ok(None),
        Err(TryLockError::WouldBlock) => Ok(Some(holder_in(&file))),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_attempt_sees_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let now: DateTime<Utc> = "2026-05-01T12:00:00Z".parse().unwrap();
        let Attempt::Acquired(lock) = try_acquire(dir.path(), now).unwrap() else {
            panic!("first attempt must acquire");
        };
        match try_acquire(dir.path(), now).unwrap() {
            Attempt::Held(h) => {
                assert_eq!(h.pid, Some(std::process::id()));
                assert_eq!(h.since, Some(now));
            }
            Attempt::Acquired(_) => panic!("lock taken twice"),
        }
        assert!(probe(dir.path()).unwrap().is_some());
        drop(lock);
        assert_eq!(probe(dir.path()).unwrap(), None);
        assert!(matches!(
            try_acquire(dir.path(), now).unwrap(),
            Attempt::Acquired(_)
        ));
    }

    #[test]
    fn deleting_the_lock_file_does_not_free_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let now: DateTime<Utc> = "2026-05-01T12:00:00Z".parse().unwrap();
        let Attempt::Acquired(_lock) = try_acquire(dir.path(), now).unwrap() else {
            panic!("first attempt must acquire");
        };
        std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
        match try_acquire(dir.path(), now).unwrap() {
            // The holder is unknown now, but the lock is still held.
            Attempt::Held(h) => assert_eq!(h, Holder::default()),
            Attempt::Acquired(_) => panic!("a deleted lock file let a second run in"),
        }
        assert!(probe(dir.path()).unwrap().is_some());
    }

    #[test]
    fn waiting_gives_up_after_the_timeout_and_succeeds_once_free() {
        let dir = tempfile::tempdir().unwrap();
        let now: DateTime<Utc> = "2026-05-01T12:00:00Z".parse().unwrap();
        let Attempt::Acquired(lock) = try_acquire(dir.path(), now).unwrap() else {
            panic!("first attempt must acquire");
        };
        let held = acquire_wait(dir.path(), now, Duration::from_millis(120)).unwrap();
        assert_eq!(held.err().and_then(|h| h.pid), Some(std::process::id()));
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(lock);
        });
        assert!(
            acquire_wait(dir.path(), now, Duration::from_secs(10))
                .unwrap()
                .is_ok()
        );
        releaser.join().unwrap();
    }
}
