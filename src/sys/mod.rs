//! The operating-system calls std does not offer: signals to process groups, pid checks, the
//! parent-death signal, the host and user names, a hung-up stdout, a thread's SIGPIPE, and
//! forgetting a secret environment variable (the original block, non-dumpable); and, in
//! [`supervisor`], the one way a child process is started in its own group and stopped
//! (which [`command`] uses to ask a system program a short question).
//!
//! Invariants:
//! - heartbeat runs on Linux only: it reads `/proc` to find a tool's leftover processes and
//!   asks the kernel (`prctl(PR_SET_PDEATHSIG)`) to stop a tool when heartbeat dies. Other
//!   systems fail to build, with a message saying so.
//! - No signal is ever sent to a process-group id `<= 1`: `kill(-1, …)` reaches every
//!   process the user may signal, and `kill(0, …)` heartbeat's own group.
//! - This is the only module with `unsafe` outside tests: one `pre_exec` closure, which runs
//!   between fork and exec and so may only make async-signal-safe calls, one `fork` whose
//!   child makes only such calls and ends with `_exit` ([`watch_group`]), and one
//!   `remove_var` (see [`forget_env`]).
//! - Nothing here blocks or ignores a signal for the whole process, and a tool starts with an
//!   empty signal mask whatever its spawning thread blocked: a tool never inherits a blocked
//!   or ignored signal from heartbeat (handlers installed by signal-hook fall back to the
//!   default action at exec; std restores SIGPIPE, which the Rust runtime ignores).

#[cfg(not(target_os = "linux"))]
compile_error!(
    "heartbeat runs on Linux only: it needs /proc (to find a tool's leftover processes) and \
     prctl(PR_SET_PDEATHSIG) (so that tools stop when heartbeat dies)"
);

pub(crate) mod capture;
pub(crate) mod command;
pub(crate) mod key;
pub(crate) mod supervisor;

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{self, SigSet, SigmaskHow};
use nix::unistd::{Pid, Uid, User};

pub(crate) use nix::sys::signal::Signal;

/// Whether a process with this pid exists (a zombie counts), also one of another user.
#[cfg(test)]
pub(crate) fn process_exists(pid: i32) -> bool {
    pid > 0
        && matches!(
            signal::kill(Pid::from_raw(pid), None),
            Ok(()) | Err(nix::errno::Errno::EPERM)
        )
}

/// Sends `sig` to the process group led by `pgid`; a vanished group is not an error.
pub(crate) fn signal_group(pgid: i32, sig: Signal) {
    if pgid > 1 {
        let _ = signal::killpg(Pid::from_raw(pgid), sig);
    }
}

/// Whether any process (a zombie counts) is in the group led by `pgid` and ours to signal.
pub(crate) fn group_exists(pgid: i32) -> bool {
    pgid > 1 && signal::killpg(Pid::from_raw(pgid), None).is_ok()
}

/// Makes the child started by `cmd` start with no signal blocked (std passes the spawning
/// thread's mask on), get SIGTERM when the thread that spawned it ends (so when heartbeat
/// dies: kill -9, OOM), and fail to start when heartbeat is already gone.
pub(crate) fn stop_with_parent(cmd: &mut Command) {
    let parent = Pid::this();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: pthread_sigmask, prctl and getppid are, and the
    // closure allocates nothing on the success path (the error path's `io::Error::other` is
    // taken only when the exec is abandoned anyway).
    unsafe {
        cmd.pre_exec(move || {
            signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
            // The parent may have died between fork and prctl.
            if nix::unistd::getppid() != parent {
                return Err(io::Error::other("heartbeat exited before the tool started"));
            }
            Ok(())
        });
    }
}

/// Makes a write to a closed pipe fail with EPIPE in this thread instead of raising SIGPIPE,
/// whatever the process's SIGPIPE disposition is. A SIGPIPE left pending on the thread is
/// discarded when the thread ends.
pub(crate) fn block_sigpipe_in_this_thread() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGPIPE);
    let _ = signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

/// Whether `fd` has something to read (or has hung up) within `wait`.
pub(crate) fn readable_within(fd: BorrowedFd<'_>, wait: Duration) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0)
}

/// Nobody reads stdout any more (a closed pipe, a hung-up terminal).
pub(crate) fn stdout_hung_up() -> bool {
    let stdout = io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// This machine's host name; empty when it cannot be read.
/// `N` bytes from the kernel's random source (`/dev/urandom`): delivery ids, the install
/// key that signs approval buttons. An error when it cannot be read: nothing weaker stands
/// in for it.
pub(crate) fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    use std::io::Read;
    let mut out = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut out)?;
    Ok(out)
}

pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The name in the passwd entry of the real uid (looked up with the thread-safe
/// `getpwuid_r`), else `uid<N>`.
pub(crate) fn real_user_name() -> String {
    let uid = Uid::current();
    match User::from_uid(uid) {
        Ok(Some(user)) => user.name,
        _ => format!("uid{uid}"),
    }
}

/// Whether the file system holding `path` has (almost) no room left for an ordinary user:
/// less than 1 MiB or no free inode. False when that cannot be asked.
pub(crate) fn disk_full(path: &std::path::Path) -> bool {
    const ROOM: u64 = 1 << 20;
    nix::sys::statvfs::statvfs(path).is_ok_and(|s| {
        s.blocks_available().saturating_mul(s.fragment_size()) < ROOM
            || (s.files() > 0 && s.files_available() == 0)
    })
}

/// Whether heartbeat runs with root's effective uid (which ignores file permissions).
#[cfg(test)]
pub(crate) fn is_root() -> bool {
    Uid::effective().is_root()
}

/// Take the variable `name` out of this process's environment: remove it (so tools and
/// `std::env` no longer see it) and overwrite its value with zero bytes in the original
/// environment block, which `/proc/<pid>/environ` shows and `remove_var` leaves as it was.
/// Best effort: a failure leaves the block as it was (non-dumpable still hides it).
pub(crate) fn forget_env(name: &str) {
    let _ = overwrite_original_env(name);
    // SAFETY: heartbeat takes its secret variables while it starts a command, before it
    // spawns a thread (a daemon whose reloaded config names a new variable is the
    // exception: its other threads only read the environment through std, whose lock
    // serialises this call, or through glibc's getenv, which never sees freed memory
    // because unsetenv frees nothing).
    unsafe { std::env::remove_var(name) };
}

/// Zero the value of `name=` in the environment block the kernel gave this process (the
/// range `env_start..env_end` of `/proc/self/stat`), written through `/proc/self/mem`.
fn overwrite_original_env(name: &str) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name, which is in parentheses and may hold anything:
    // env_start and env_end are fields 50 and 51 (proc(5)), the 48th and 49th after it.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| -> io::Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other("no environment range in /proc/self/stat"))
    };
    let (start, end) = (field(47)?, field(48)?);
    if end <= start {
        return Ok(());
    }
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")?;
    let mut block = vec![0u8; (end - start) as usize];
    mem.read_exact_at(&mut block, start)?;
    let prefix = format!("{name}=");
    let mut at = 0;
    for entry in block.split(|&b| b == 0) {
        if entry.starts_with(prefix.as_bytes()) && entry.len() > prefix.len() {
            let value_at = start + (at + prefix.len()) as u64;
            mem.write_all_at(&vec![0u8; entry.len() - prefix.len()], value_at)?;
        }
        at += entry.len() + 1;
    }
    Ok(())
}

/// Make this process non-dumpable: no core dump, and `/proc/<pid>/{mem,environ,…}` and
/// ptrace are closed to other processes of the same (non-root) user, tools included.
pub(crate) fn set_non_dumpable() {
    let _ = nix::sys::prctl::set_dumpable(false);
}

/// Scans `/proc` for a member of group `pgid` that is not a zombie; None when `/proc` cannot
/// be read (then the caller trusts `kill`).
pub(crate) fn live_member_in_group(pgid: i32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut seen_any = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // A process may vanish between the listing and the read.
        let Ok(stat) = std::fs::read(entry.path().join("stat")) else {
            continue;
        };
        seen_any = true;
        if let Some((state, pgrp)) = parse_stat(&stat)
            && pgrp == pgid
            && state != b'Z'
            && state != b'X'
        {
            return Some(true);
        }
    }
    // An empty or unreadable /proc says nothing.
    seen_any.then_some(false)
}

/// State and process group from `/proc/PID/stat`: `pid (comm) state ppid pgrp …`, where comm
/// may itself contain spaces and parentheses.
pub(crate) fn parse_stat(stat: &[u8]) -> Option<(u8, i32)> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// How the process `pid` (a child of ours) ended, if it has, without reaping it: its pid
/// (which is its group's id) stays reserved until the caller waits for it.
pub(crate) fn exit_without_reaping(pid: i32) -> Option<String> {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(pid)), flags) {
        Ok(WaitStatus::Exited(_, code)) => Some(format!("exit status {code}")),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(format!("killed by signal {}", sig as i32)),
        Ok(WaitStatus::StillAlive) | Err(_) => None,
        Ok(_) => Some("ended".into()),
    }
}

/// A watch over a tool's process group for the case heartbeat dies while the tool runs
/// (kill -9, OOM): the kernel's parent-death signal reaches only the group's leader, so a
/// shell's children would run on. The watch is a small process forked from heartbeat that
/// waits on a pipe only heartbeat writes to: when heartbeat ends without standing it down,
/// the pipe reads as closed and the watch sends SIGTERM to the group, then SIGKILL `grace`
/// later. Standing down (dropping this) ends it without a signal, and reaps it.
#[derive(Debug)]
pub(crate) struct GroupWatch {
    stand_down: Option<std::os::fd::OwnedFd>,
    pid: Pid,
}

impl Drop for GroupWatch {
    fn drop(&mut self) {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        if let Some(fd) = self.stand_down.take() {
            // One byte says "stand down"; closing the pipe alone would say "heartbeat died".
            let _ = nix::unistd::write(&fd, &[1]);
        }
        // The watch ends at once; reap it here, or else on a thread of its own.
        for _ in 0..100 {
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(1)),
                _ => return,
            }
        }
        let pid = self.pid;
        let _ = std::thread::Builder::new()
            .name("watch-reap".into())
            .spawn(move || waitpid(pid, None));
    }
}

/// Start a [`GroupWatch`] over the process group `pgid` (which must be more than 1).
pub(crate) fn watch_group(pgid: i32, grace: Duration) -> io::Result<GroupWatch> {
    use nix::libc;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    if pgid <= 1 {
        return Err(io::Error::other("no process group to watch"));
    }
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and belong to nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The grace period in steps of 50 ms (the watch looks whether the group is gone at each).
    let steps = u64::try_from(grace.as_millis() / 50)
        .unwrap_or(u64::MAX)
        .max(1);
    let read_fd = read.as_raw_fd();
    // SAFETY: the child runs only async-signal-safe calls (watch_then_exit) and never returns
    // into Rust code: it ends with _exit, so nothing of the parent's state (locks held by
    // other threads, buffers, destructors) is touched in it.
    match unsafe { nix::unistd::fork() }.map_err(io::Error::from)? {
        nix::unistd::ForkResult::Child => unsafe { watch_then_exit(read_fd, pgid, steps) },
        nix::unistd::ForkResult::Parent { child } => {
            drop(read);
            Ok(GroupWatch {
                stand_down: Some(write),
                pid: child,
            })
        }
    }
}

/// The watch's whole life, in the forked child: only async-signal-safe calls, no allocation.
///
/// # Safety
/// Call only in a child just forked from heartbeat; it never returns.
unsafe fn watch_then_exit(read_fd: i32, pgid: i32, steps: u64) -> ! {
    use nix::libc;
    // SAFETY (the whole body): plain system calls on values owned by this process.
    unsafe {
        // Its own group: a Ctrl-C or a signal meant for heartbeat's group is not for it.
        libc::setpgid(0, 0);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        for sig in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
        // Nothing of heartbeat's stays open here but the pipe (as standard input): not its
        // lock, its database, its log or its standard output (a reader waits for that).
        libc::dup2(read_fd, 0);
        if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
            let mut limit: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20) as i32
            } else {
                1024
            };
            for fd in 1..max {
                libc::close(fd);
            }
        }
        let mut byte = 0u8;
        let n = loop {
            let n = libc::read(0, (&raw mut byte).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n == 0 && libc::kill(-pgid, libc::SIGTERM) == 0 {
            // The pipe closed without a word: heartbeat is gone. The group had members; it
            // gets the grace period, looked at every 50 ms, then SIGKILL.
            let step = libc::timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            };
            for _ in 0..steps {
                let mut left = step;
                while libc::nanosleep(&left, &mut left) != 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                if libc::kill(-pgid, 0) != 0 {
                    libc::_exit(0);
                }
            }
            libc::kill(-pgid, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;
    use std::time::Instant;

    /// `sleep 30` in a process group of its own.
    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .expect("start sleep")
    }

    /// Whether `child` ends (and is reaped) within `wait`.
    fn ends_within(child: &mut std::process::Child, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if child.try_wait().expect("try_wait").is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_watch_stood_down_signals_nothing_and_one_left_alone_stops_the_group() {
        // Stood down (heartbeat handled the group itself): the group is left alone.
        let mut child = sleeper();
        let watch = watch_group(child.id() as i32, Duration::from_millis(200)).unwrap();
        drop(watch);
        assert!(!ends_within(&mut child, Duration::from_millis(500)));
        let _ = child.kill();
        let _ = child.wait();

        // The pipe closes without a word, as when heartbeat dies: the group is stopped.
        let mut child = sleeper();
        let mut watch = watch_group(child.id() as i32, Duration::from_millis(200)).unwrap();
        drop(watch.stand_down.take());
        assert!(ends_within(&mut child, Duration::from_secs(30)));
        drop(watch);
    }
}
