//! The one process-group supervisor, for tools and MCP servers alike: how a child is started
//! (its own process group, the environment asked for, the parent-death signal and a
//! [`GroupWatch`]), how its group is stopped (SIGTERM, then SIGKILL after a grace period),
//! and how its leader is reaped: by a [`Reaper`] thread when the caller waits for the exit
//! with a deadline (a tool), or by [`Group::stop_and_reap`] once the group is stopped (an MCP
//! server, whose unreaped leader tells why its connection closed).
//!
//! Invariants:
//!
//! - A child started by [`spawn`] leads its own process group, so every process it starts
//!   belongs to that group unless it leaves it on purpose (`setsid`, `setpgid`).
//! - Should heartbeat die (kill -9, OOM) while a [`Group`] exists, its leader gets SIGTERM from
//!   the kernel and the whole group gets SIGTERM, then SIGKILL after the grace period, from
//!   the group's watch. Dropping the [`Group`] stands the watch down: drop it only once the
//!   group is handled.
//! - A group is signalled only while its leader is not yet reaped, or right after (the waiter
//!   that reaped it has just told the caller): its id cannot have been reused. No signal ever
//!   goes to a group id `<= 1`.
//! - Nothing here is async: an async caller (the MCP client on its tokio runtime) spawns with
//!   [`spawn`], hands the pipes to its runtime, and stops the group from a blocking path
//!   ([`Group::stop_and_reap`]), so there is one copy of the group, environment and stop
//!   logic.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::{GroupWatch, Signal};

/// How often a dying group is looked at (there is no way to wait for processes that are not
/// our children).
const POLL: Duration = Duration::from_millis(20);

/// The environment a child starts with.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Environment<'a> {
    /// heartbeat's own, less the variables named.
    Inherited { remove: &'a [String] },
    /// Empty but for the variables named that are set in heartbeat's.
    Cleared { pass: &'a [&'a str] },
}

/// One child to start. Its standard output and error are pipes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch<'a> {
    /// Program and arguments (not empty). A program without `/` is looked up in `PATH`; a
    /// relative one with a `/` (`./check.sh`) is taken relative to `cwd`.
    pub argv: &'a [String],
    pub cwd: &'a Path,
    pub env: Environment<'a>,
    /// Set after `env` is applied (adding or replacing).
    pub set: &'a [(String, String)],
    /// Standard input a pipe (else `/dev/null`).
    pub stdin_piped: bool,
    /// SIGTERM → SIGKILL delay the watch gives the group when heartbeat dies.
    pub kill_grace: Duration,
}

/// Starts `launch`'s child in a new process group, with the parent-death signal and a watch
/// over its group. The signal fires when the *thread* that spawned the child ends, so call
/// this from a thread that outlives the child.
pub(crate) fn spawn(launch: &Launch) -> io::Result<(Child, Group)> {
    let Some(program) = launch.argv.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    };
    // A relative program path with a `/` is relative to the child's working directory, not to
    // heartbeat's (std leaves this platform-specific).
    let mut cmd = if program.contains('/') {
        Command::new(launch.cwd.join(program))
    } else {
        Command::new(program)
    };
    cmd.args(&launch.argv[1..])
        .current_dir(launch.cwd)
        .stdin(if launch.stdin_piped {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    match launch.env {
        Environment::Inherited { remove } => {
            for name in remove {
                cmd.env_remove(name);
            }
        }
        Environment::Cleared { pass } => {
            cmd.env_clear();
            for name in pass {
                if let Some(value) = std::env::var_os(name) {
                    cmd.env(name, value);
                }
            }
        }
    }
    for (name, value) in launch.set {
        cmd.env(name, value);
    }
    // No signal blocked, SIGTERM to the leader when heartbeat dies, never started after it
    // died.
    super::stop_with_parent(&mut cmd);
    let child = cmd.spawn()?;
    // The group id: the leader's pid (`process_group(0)`).
    let pgid = child.id() as i32;
    // The parent-death signal reaches the leader only: the watch stops the rest of the
    // group. Best effort: a fork that fails leaves the leader's signal.
    let watch = super::watch_group(pgid, launch.kill_grace).ok();
    Ok((
        child,
        Group {
            pgid,
            _watch: watch,
        },
    ))
}

/// A thread that reaps one leader and reports how it ended, so that a caller waits for the
/// exit with a deadline instead of polling. Start it before the child, so that no child is
/// ever left without one; dropped before it was handed a child, the thread ends.
#[derive(Debug)]
pub(crate) struct Reaper {
    child: mpsc::Sender<Child>,
    exit: mpsc::Receiver<io::Result<ExitStatus>>,
}

impl Reaper {
    /// Starts the thread, named `name`.
    pub(crate) fn start(name: &str) -> io::Result<Reaper> {
        let (child_tx, child_rx) = mpsc::channel::<Child>();
        let (exit_tx, exit_rx) = mpsc::channel();
        thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if let Ok(mut child) = child_rx.recv() {
                    let _ = exit_tx.send(child.wait());
                }
            })?;
        Ok(Reaper {
            child: child_tx,
            exit: exit_rx,
        })
    }

    /// Hands the leader over: from now on it is reaped whatever happens.
    pub(crate) fn reap(&self, child: Child) {
        // The thread only ends after it received a child, so the send cannot fail.
        let _ = self.child.send(child);
    }

    /// The leader's exit status, if it comes within `wait`.
    pub(crate) fn wait_for(&self, wait: Duration) -> Option<io::Result<ExitStatus>> {
        match self.exit.recv_timeout(wait) {
            Ok(status) => Some(status),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(Err(reaper_gone())),
        }
    }

    /// The leader's exit status, however long it takes.
    pub(crate) fn wait(&self) -> io::Result<ExitStatus> {
        self.exit.recv().unwrap_or_else(|_| Err(reaper_gone()))
    }
}

fn reaper_gone() -> io::Error {
    io::Error::other("the waiter thread ended without a status")
}

/// The process group of a child started by [`spawn`], watched until this is dropped.
#[derive(Debug)]
pub(crate) struct Group {
    pgid: i32,
    /// Held for its drop, which stands the watch down.
    _watch: Option<GroupWatch>,
}

impl Group {
    /// The group's id, which is its leader's pid.
    pub(crate) fn id(&self) -> i32 {
        self.pgid
    }

    /// Sends `sig` to every member; a vanished group is not an error.
    pub(crate) fn signal(&self, sig: Signal) {
        super::signal_group(self.pgid, sig);
    }

    /// Whether a live member (not a zombie) is in the group. Zombies are left out because
    /// they hold no pipes and cannot be stopped: an unreaped leader stays one, and an orphaned
    /// one lasts until init reaps it (slowly under some inits, never under a container's
    /// missing one). When `/proc` cannot be read, an unreaped leader that has exited counts
    /// as gone and anything else as alive.
    pub(crate) fn alive(&self) -> bool {
        super::group_exists(self.pgid)
            && super::live_member_in_group(self.pgid)
                .unwrap_or_else(|| super::exit_without_reaping(self.pgid).is_none())
    }

    /// Waits until the group has no live member or `until` passes (None: no limit); whether
    /// it is gone.
    pub(crate) fn wait_gone(&self, until: Option<Instant>) -> bool {
        while self.alive() {
            if until.is_some_and(|u| Instant::now() >= u) {
                return false;
            }
            thread::sleep(POLL);
        }
        true
    }

    /// Ends what is left of the group: SIGTERM (unless it was already sent, at `term_sent`),
    /// then SIGKILL `kill_grace` after it if a member still lives. Nothing is sent to a group
    /// without a live member.
    pub(crate) fn terminate(&self, term_sent: Option<Instant>, kill_grace: Duration) {
        if !self.alive() {
            return;
        }
        let sent = term_sent.unwrap_or_else(|| {
            self.signal(Signal::SIGTERM);
            Instant::now()
        });
        if !self.wait_gone(sent.checked_add(kill_grace)) {
            self.signal(Signal::SIGKILL);
        }
    }

    /// Stops a leader handed to `reaper` and its group: SIGTERM to the group, SIGKILL
    /// `kill_grace` later if the leader has not exited by then. Returns its exit status and
    /// when the SIGTERM was sent (for [`terminate`](Group::terminate)).
    pub(crate) fn stop_leader(
        &self,
        reaper: &Reaper,
        kill_grace: Duration,
    ) -> (io::Result<ExitStatus>, Instant) {
        self.signal(Signal::SIGTERM);
        let sent = Instant::now();
        let status = reaper.wait_for(kill_grace).unwrap_or_else(|| {
            self.signal(Signal::SIGKILL);
            reaper.wait()
        });
        (status, sent)
    }

    /// The graceful stop of a child whose input was just closed: the group is given until
    /// `term_at` to end on its own, then [`terminate`](Group::terminate)d with `kill_grace`;
    /// only then is the leader reaped (so the group id stays reserved while it is signalled)
    /// and the watch stood down.
    pub(crate) fn stop_and_reap(
        self,
        mut leader: Child,
        term_at: Instant,
        kill_grace: Duration,
    ) -> io::Result<ExitStatus> {
        if !self.wait_gone(Some(term_at)) {
            self.terminate(None, kill_grace);
        }
        let status = leader.wait();
        drop(self);
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_string()).collect()
    }

    fn launch<'a>(argv: &'a [String], cwd: &'a Path) -> Launch<'a> {
        Launch {
            argv,
            cwd,
            env: Environment::Inherited { remove: &[] },
            set: &[],
            stdin_piped: false,
            kill_grace: Duration::from_secs(5),
        }
    }

    fn output(mut child: Child) -> String {
        use std::io::Read;
        let mut text = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        child.wait().unwrap();
        text
    }

    #[test]
    fn a_child_leads_its_own_group_in_its_cwd() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("here.sh"),
            "echo $$ $(cut -d' ' -f5 /proc/$$/stat) $PWD\n",
        )
        .unwrap();
        let words = argv(&["sh", "./here.sh"]);
        // A program path with a `/` is taken relative to the child's working directory.
        let words_rel = argv(&["./here.sh"]);
        let (child, group) = spawn(&launch(&words, dir.path())).unwrap();
        let pid = child.id();
        let text = output(child);
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fields[0], pid.to_string(), "{text}");
        assert_eq!(fields[1], pid.to_string(), "{text}");
        assert_eq!(group.id(), pid as i32);
        assert_eq!(
            Path::new(fields[2]).canonicalize().unwrap(),
            dir.path().canonicalize().unwrap()
        );
        drop(group);
        let err = spawn(&launch(&words_rel, dir.path())).unwrap_err();
        // Not executable: found where the working directory says, refused by exec.
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert_eq!(
            spawn(&launch(&[], dir.path())).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn the_environment_is_inherited_less_some_or_cleared_but_for_some() {
        let dir = tempfile::tempdir().unwrap();
        let words = argv(&["/usr/bin/env"]);
        let set = [("HB_SUPERVISOR_SET".to_string(), "yes".to_string())];
        let remove = ["HOME".to_string()];
        let mut inherited = launch(&words, dir.path());
        inherited.env = Environment::Inherited { remove: &remove };
        inherited.set = &set;
        let text = output(spawn(&inherited).unwrap().0);
        assert!(text.contains("HB_SUPERVISOR_SET=yes\n"), "{text}");
        assert!(text.contains("PATH="), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("HOME=")), "{text}");

        let mut cleared = launch(&words, dir.path());
        cleared.env = Environment::Cleared {
            pass: &["PATH", "HB_SUPERVISOR_UNSET_VARIABLE"],
        };
        cleared.set = &set;
        let text = output(spawn(&cleared).unwrap().0);
        let mut names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
        names.sort_unstable();
        assert_eq!(names, ["HB_SUPERVISOR_SET", "PATH"], "{text}");
    }

    /// `sh` that starts a `sleep 60` in its group, writes its pid and waits for it; or, when
    /// `ignore_term` is set, ignores SIGTERM itself and runs on after the sleep.
    fn shell_with_sleep(dir: &Path, ignore_term: bool) -> (Child, Group, i32) {
        let script = if ignore_term {
            "sleep 60 & trap '' TERM; echo $!; while :; do sleep 1; done"
        } else {
            "sleep 60 & echo $!; wait"
        };
        let words = argv(&["sh", "-c", script]);
        let (mut child, group) = spawn(&launch(&words, dir)).unwrap();
        let mut line = String::new();
        io::BufRead::read_line(
            &mut io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        (child, group, line.trim().parse().unwrap())
    }

    fn gone(pid: i32) -> bool {
        !super::super::process_exists(pid)
            || std::fs::read(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| super::super::parse_stat(&s))
                .is_none_or(|(state, _)| state == b'Z')
    }

    #[test]
    fn a_stop_terminates_the_whole_group_then_reaps_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let (child, group, sleep) = shell_with_sleep(dir.path(), false);
        assert!(group.alive());
        // The group does not end on its own: it gets SIGTERM at once (term_at is now).
        let status = group
            .stop_and_reap(child, Instant::now(), Duration::from_secs(30))
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32), "{status:?}");
        assert!(gone(sleep));
    }

    #[test]
    fn a_child_that_ends_when_its_input_closes_gets_no_signal() {
        let dir = tempfile::tempdir().unwrap();
        let words = argv(&["cat"]);
        let mut piped = launch(&words, dir.path());
        piped.stdin_piped = true;
        let (mut child, group) = spawn(&piped).unwrap();
        drop(child.stdin.take());
        // The deadline is for a hang only: `cat` ends at the end of its input.
        let far = Instant::now() + Duration::from_secs(30);
        let status = group
            .stop_and_reap(child, far, far - Instant::now())
            .unwrap();
        assert!(status.success(), "{status:?}");
    }

    #[test]
    fn a_member_that_ignores_sigterm_gets_sigkill_after_the_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, group, sleep) = shell_with_sleep(dir.path(), true);
        // The sleep was started before the trap: only the shell ignores SIGTERM.
        group.terminate(None, Duration::from_millis(100));
        // SIGKILL was sent; the members end soon after (the deadline is for a hang only).
        assert!(group.wait_gone(Some(Instant::now() + Duration::from_secs(30))));
        assert!(gone(sleep));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(Signal::SIGKILL as i32));
    }

    #[test]
    fn a_reaper_reports_the_exit_and_a_stopped_leader_gets_sigkill_if_it_must() {
        use std::os::unix::process::ExitStatusExt;
        let dir = tempfile::tempdir().unwrap();
        let words = argv(&["sh", "-c", "exit 7"]);
        let reaper = Reaper::start("test-reap").unwrap();
        let (child, _group) = spawn(&launch(&words, dir.path())).unwrap();
        reaper.reap(child);
        assert_eq!(reaper.wait().unwrap().code(), Some(7));

        // A leader that ignores SIGTERM: SIGKILL after the grace period.
        let reaper = Reaper::start("test-reap").unwrap();
        let (child, group, _sleep) = shell_with_sleep(dir.path(), true);
        reaper.reap(child);
        assert!(reaper.wait_for(Duration::from_millis(50)).is_none());
        let (status, _sent) = group.stop_leader(&reaper, Duration::from_millis(100));
        assert_eq!(status.unwrap().signal(), Some(Signal::SIGKILL as i32));
        // Dropped without a child, a reaper's thread ends.
        drop(Reaper::start("test-reap").unwrap());
    }

    #[test]
    fn an_ended_group_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let words = argv(&["true"]);
        let (mut child, group) = spawn(&launch(&words, dir.path())).unwrap();
        // Ended but unreaped, the leader is a zombie: no live member.
        assert!(group.wait_gone(None));
        group.terminate(None, Duration::from_secs(30));
        assert!(child.wait().unwrap().success());
    }
}
