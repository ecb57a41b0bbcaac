//! The harness: a temp dir with a HEARTBEAT.md, an optional heartbeat.toml and a state dir,
//! and a builder that runs the real binary in it.
//!
//! Every command gets `--state-dir <tmp>/state` and `--now <RFC 3339>` (default [`NOW`]),
//! `--config <tmp>/heartbeat.toml` when a config was given, the temp dir as working
//! directory, and an environment without `HEARTBEAT_CONFIG`, `HEARTBEAT_NOW` and `TZ`, with
//! `HOME`/`XDG_*` pointing into the temp dir so that the machine's own config never leaks in.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;
use tempfile::TempDir;

/// How long a test waits for something that takes well under a second on an idle machine: a
/// deadline for a hang, not a speed check (those are in `benches/figures.rs`), so that a
/// loaded 2-core machine never fails a test that would pass.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// For a test that needs what this machine lacks (a program, a kernel feature), before it
/// returns: says why on stderr; under `HEARTBEAT_TEST_STRICT=1`, which `.ci/run` sets, fails
/// instead, so that CI never passes a test it did not run.
#[track_caller]
pub(crate) fn cannot_run_here(why: &str) {
    if std::env::var_os("HEARTBEAT_TEST_STRICT").is_some_and(|v| v == "1") {
        panic!("cannot run here (HEARTBEAT_TEST_STRICT=1): {why}");
    }
    eprintln!("skipped: {why}");
}

/// The default `--now`: Friday 2026-05-01 10:00 UTC.
pub(crate) const NOW: &str = "2026-05-01T10:00:00Z";

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_heartbeat");

/// A sandbox for one test.
pub(crate) struct Env {
    dir: TempDir,
    config: Option<PathBuf>,
}

impl Env {
    /// A temp dir with `HEARTBEAT.md` holding `md`.
    pub(crate) fn new(md: &str) -> Env {
        let env = Env::empty();
        env.write("HEARTBEAT.md", md);
        env
    }

    /// A temp dir with nothing in it.
    pub(crate) fn empty() -> Env {
        let dir = tempfile::Builder::new()
            .prefix("heartbeat-cli-")
            .tempdir()
            .expect("create temp dir");
        Env { dir, config: None }
    }

    /// Write `heartbeat.toml` and pass it with `--config`.
    pub(crate) fn config(mut self, toml: &str) -> Env {
        let path = self.path("heartbeat.toml");
        fs::write(&path, toml).expect("write config");
        self.config = Some(path);
        self
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub(crate) fn state(&self) -> PathBuf {
        self.path("state")
    }

    pub(crate) fn md_path(&self) -> PathBuf {
        self.path("HEARTBEAT.md")
    }

    /// The `file` value the program writes for HEARTBEAT.md (absolute, as named).
    pub(crate) fn md_file(&self) -> String {
        self.md_path().display().to_string()
    }

    pub(crate) fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent dir");
        }
        fs::write(&path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        let path = self.path(rel);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    pub(crate) fn read_bytes(&self, rel: &str) -> Vec<u8> {
        let path = self.path(rel);
        fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    pub(crate) fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// A command with the harness's global flags; add arguments with [`Cmd::args`].
    pub(crate) fn cmd<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd_as(BIN, args)
    }

    /// `cmd`, starting heartbeat by another name or path (a link to it, a bare name looked up
    /// in `PATH`).
    pub(crate) fn cmd_as<I, S>(&self, program: impl AsRef<OsStr>, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.root())
            .env_remove("HEARTBEAT_CONFIG")
            .env_remove("HEARTBEAT_NOW")
            .env_remove("TZ")
            .env_remove("HEARTBEAT_TELEGRAM_TOKEN")
            .env_remove("RUST_BACKTRACE")
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env("XDG_DATA_HOME", self.path("home/.local/share"))
            .stdin(Stdio::null());
        Cmd {
            cmd,
            globals: vec![
                "--state-dir".into(),
                self.state().into_os_string(),
                "--now".into(),
                NOW.into(),
            ],
            config: self.config.clone(),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
        }
    }

    /// `run --once` at `now`.
    pub(crate) fn run_once(&self, now: &str) -> Output {
        self.cmd(["run", "--once"]).now(now).output()
    }

    /// `run --once` at `now` with extra arguments.
    pub(crate) fn run_with(&self, now: &str, extra: &[&str]) -> Output {
        self.cmd(["run", "--once"]).args(extra).now(now).output()
    }

    pub(crate) fn audit_path(&self) -> PathBuf {
        self.state().join("audit.jsonl")
    }

    /// The raw audit log ("" when it does not exist).
    pub(crate) fn audit_text(&self) -> String {
        fs::read_to_string(self.audit_path()).unwrap_or_default()
    }

    /// Every audit line, parsed; panics on a line that is not one JSON object.
    pub(crate) fn audit(&self) -> Vec<Value> {
        let text = self.audit_text();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "audit log does not end with a newline:\n{text}"
        );
        text.lines()
            .map(|line| {
                let v: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {line}"));
                assert!(v.is_object(), "audit line is not an object: {line}");
                v
            })
            .collect()
    }

    /// Audit lines with this event.
    pub(crate) fn events(&self, event: &str) -> Vec<Value> {
        self.audit()
            .into_iter()
            .filter(|v| v["event"] == event)
            .collect()
    }

    /// Audit lines with this event, which must be `n`.
    #[track_caller]
    pub(crate) fn events_n(&self, event: &str, n: usize) -> Vec<Value> {
        let found = self.events(event);
        assert_eq!(found.len(), n, "{}", self.audit_text());
        found
    }

    /// The events of the audit log, in order.
    pub(crate) fn event_names(&self) -> Vec<String> {
        self.audit()
            .iter()
            .map(|v| v["event"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    pub(crate) fn db_path(&self) -> PathBuf {
        self.state().join("heartbeat.db")
    }

    pub(crate) fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.db_path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("open heartbeat.db")
    }

    /// Rows of `SELECT state, tool, task_id FROM approvals ORDER BY id`.
    pub(crate) fn approval_rows(&self) -> Vec<(String, String, String)> {
        let db = self.db();
        let mut stmt = db
            .prepare("SELECT state, tool, task_id FROM approvals ORDER BY id")
            .expect("query approvals");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query approvals")
            .collect::<Result<Vec<_>, _>>()
            .expect("read approvals")
    }
}

/// A command being built.
pub(crate) struct Cmd {
    cmd: Command,
    globals: Vec<OsString>,
    config: Option<PathBuf>,
    args: Vec<OsString>,
}

impl Cmd {
    pub(crate) fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub(crate) fn now(mut self, now: &str) -> Cmd {
        self.globals[3] = now.into();
        self
    }

    pub(crate) fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Cmd {
        self.cmd.env(key, value);
        self
    }

    /// Run in `dir` instead of the sandbox's root (a person in another directory).
    pub(crate) fn in_dir(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cmd.current_dir(dir);
        self
    }

    /// Do not pass `--config` even though the sandbox has one.
    pub(crate) fn without_config_flag(mut self) -> Cmd {
        self.config = None;
        self
    }

    /// Leave `--state-dir` out: the config (or the default) names the state dir.
    pub(crate) fn without_state_dir(mut self) -> Cmd {
        if let Some(i) = self.globals.iter().position(|a| a == "--state-dir") {
            self.globals.drain(i..i + 2);
        }
        self
    }

    fn finish(mut self) -> Command {
        self.cmd.args(&self.globals);
        if let Some(config) = &self.config {
            self.cmd.arg("--config").arg(config);
        }
        self.cmd.args(&self.args);
        self.cmd
    }

    pub(crate) fn output(self) -> Output {
        let mut cmd = self.finish();
        let described = format!("{cmd:?}");
        let out = cmd.output().expect("start heartbeat");
        Output {
            command: described,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Start as a server to talk to: stdin and stdout piped, stderr dropped.
    pub(crate) fn spawn_piped(self) -> Child {
        let mut cmd = self.finish();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start heartbeat")
    }

    /// Start without waiting (stdout and stderr piped).
    pub(crate) fn spawn(self) -> Child {
        let mut cmd = self.finish();
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start heartbeat")
    }
}

/// What a finished command did.
#[derive(Debug)]
pub(crate) struct Output {
    pub command: String,
    /// None when killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Assert the exit code, showing everything on failure.
    #[track_caller]
    pub(crate) fn code(&self, expected: i32) -> &Output {
        assert_eq!(
            self.code,
            Some(expected),
            "unexpected exit code\ncommand: {}\n--- stdout\n{}--- stderr\n{}",
            self.command,
            self.stdout,
            self.stderr
        );
        self.no_panic();
        self
    }

    /// Never a Rust panic or backtrace (docs/reference.md#run-output).
    #[track_caller]
    pub(crate) fn no_panic(&self) -> &Output {
        assert!(
            !self.stderr.contains("panicked at") && !self.stderr.contains("RUST_BACKTRACE"),
            "heartbeat panicked\ncommand: {}\n--- stderr\n{}",
            self.command,
            self.stderr
        );
        self
    }

    /// stdout as one JSON document.
    #[track_caller]
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e})\ncommand: {}\n--- stdout\n{}--- stderr\n{}",
                self.command, self.stdout, self.stderr
            )
        })
    }
}

/// Keys of a JSON object, as a set.
pub(crate) fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// The keys of an approval in `approvals --json` (docs/reference.md#approvals-json).
pub(crate) const APPROVAL_KEYS: [&str; 13] = [
    "id",
    "task_id",
    "state",
    "tool",
    "input",
    "file",
    "line",
    "section",
    "text",
    "created_at",
    "decided_at",
    "decided_by",
    "reason",
];

/// Assert that `v` is an object with at least these keys.
#[track_caller]
pub(crate) fn assert_has_keys(v: &Value, expected: &[&str]) {
    let have = keys(v);
    let missing: Vec<&&str> = expected.iter().filter(|k| !have.contains(**k)).collect();
    assert!(missing.is_empty(), "missing keys {missing:?} in {v:#}");
}

/// A 12-hex-digit task id.
pub(crate) fn is_task_id(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 12
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// `--now` as the audit log writes it: RFC 3339, UTC, milliseconds, `Z`.
pub(crate) fn ts(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .expect("valid RFC 3339")
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Poll until `path` exists; panics after `timeout`.
#[track_caller]
pub(crate) fn wait_for(path: &Path, timeout: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < timeout,
            "{} did not appear within {timeout:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Lines of `text` that contain `needle`.
pub(crate) fn count_matches(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// The `error` of an audit event (a `task_failed`).
#[track_caller]
pub(crate) fn error_of(event: &Value) -> &str {
    event["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {event}"))
}

/// A JSON string literal for embedding in a HEARTBEAT.md line.
pub(crate) fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("serialise")
}

// ---------------------------------------------------------------------------------------
// Helpers for the approvals tests: a writable database handle, the deciding user, a
// pseudo-terminal for interactive commands, and waiting on children with a deadline.

impl Env {
    /// A writable connection to `heartbeat.db` (to tamper with it as a user or a bug might).
    pub(crate) fn db_rw(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(self.db_path()).expect("open heartbeat.db");
        conn.busy_timeout(Duration::from_secs(5))
            .expect("busy timeout");
        conn
    }

    /// One approval row as `approvals --state all --json` shows it; panics when missing.
    #[track_caller]
    pub(crate) fn approval(&self, id: i64) -> Value {
        let list = self.cmd(["approvals", "--state", "all", "--json"]).output();
        list.code(0);
        list.json()
            .as_array()
            .expect("approvals --json is an array")
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no approval #{id} in {}", list.stdout))
    }

    /// The state of approval `id`, read straight from the database.
    pub(crate) fn approval_state(&self, id: i64) -> Option<String> {
        use rusqlite::OptionalExtension;
        self.db()
            .query_row("SELECT state FROM approvals WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .expect("query approval state")
    }

    /// Hold the run lock (a `flock` on the state dir) as another run would, until dropped.
    pub(crate) fn hold_lock(&self) -> fs::File {
        fs::create_dir_all(self.state()).expect("create state dir");
        let dir = fs::File::open(self.state()).expect("open the state dir");
        dir.try_lock().expect("take the run lock");
        dir
    }
}

impl Cmd {
    /// Decide as this user: `by` is recorded as `cli:<name>`.
    pub(crate) fn user(self, name: &str) -> Cmd {
        self.env("USER", name).env("LOGNAME", name)
    }

    /// Start with a pseudo-terminal as standard input (so the command sees a terminal);
    /// stdout and stderr are pipes, read in the background.
    pub(crate) fn spawn_on_pty(self) -> Interactive {
        use nix::fcntl::{F_SETFD, FdFlag, fcntl};
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let nix::pty::OpenptyResult { master, slave } =
            nix::pty::openpty(None, None).expect("openpty");
        for fd in [&master, &slave] {
            // Keeps them out of other tests' children.
            fcntl(fd, F_SETFD(FdFlag::FD_CLOEXEC)).expect("FD_CLOEXEC");
        }
        // No echo: what we type is not mixed into anything, and the pty buffer never fills.
        if let Ok(mut t) = tcgetattr(&slave) {
            t.local_flags &= !(LocalFlags::ECHO | LocalFlags::ECHONL);
            let _ = tcsetattr(&slave, SetArg::TCSANOW, &t);
        }
        let mut cmd = self.finish();
        let described = format!("{cmd:?}");
        cmd.stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start heartbeat");
        drop(cmd);
        let (tx, stdout_rx) = std::sync::mpsc::channel();
        let mut stdout = child.stdout.take().expect("stdout piped");
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut stderr = child.stderr.take().expect("stderr piped");
        let stderr_thread = std::thread::spawn(move || {
            use std::io::Read;
            let mut s = Vec::new();
            let _ = stderr.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        });
        Interactive {
            command: described,
            child,
            master: Some(fs::File::from(master)),
            stdout_rx,
            stdout: Vec::new(),
            seen: 0,
            stderr_thread: Some(stderr_thread),
        }
    }
}

/// A command on a pseudo-terminal: wait for its prompts, answer them line by line.
pub(crate) struct Interactive {
    command: String,
    child: Child,
    master: Option<fs::File>,
    stdout_rx: std::sync::mpsc::Receiver<Vec<u8>>,
    stdout: Vec<u8>,
    /// How much of `stdout` earlier `expect`s consumed.
    seen: usize,
    stderr_thread: Option<std::thread::JoinHandle<String>>,
}

impl Interactive {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait until stdout (after what earlier calls consumed) contains `needle`; returns the
    /// text up to and including it. Panics after `timeout`, showing what was printed.
    #[track_caller]
    pub(crate) fn expect(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = String::from_utf8_lossy(&self.stdout[self.seen..]).into_owned();
            if let Some(at) = text.find(needle) {
                let end = at + needle.len();
                self.seen += end;
                return text[..end].to_string();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .stdout_rx
                .recv_timeout(left.max(Duration::from_millis(1)))
            {
                Ok(chunk) => self.stdout.extend_from_slice(&chunk),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "{needle:?} never came; the command closed stdout\ncommand: {}\n--- stdout\n{}",
                        self.command,
                        String::from_utf8_lossy(&self.stdout)
                    );
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!(
                    "{needle:?} did not appear within {timeout:?}\ncommand: {}\n--- stdout\n{}",
                    self.command,
                    String::from_utf8_lossy(&self.stdout)
                ),
            }
        }
    }

    /// Like [`Interactive::expect`], but None when stdout closes or the time runs out first.
    pub(crate) fn try_expect(&mut self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = String::from_utf8_lossy(&self.stdout[self.seen..]).into_owned();
            if let Some(at) = text.find(needle) {
                let end = at + needle.len();
                self.seen += end;
                return Some(text[..end].to_string());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .stdout_rx
                .recv_timeout(left.max(Duration::from_millis(1)))
            {
                Ok(chunk) => self.stdout.extend_from_slice(&chunk),
                Err(_) => return None,
            }
        }
    }

    /// Type one line (a newline is added).
    pub(crate) fn send(&mut self, line: &str) {
        use std::io::Write;
        let master = self.master.as_mut().expect("terminal still open");
        master
            .write_all(format!("{line}\n").as_bytes())
            .expect("write to the terminal");
        master.flush().expect("flush the terminal");
    }

    /// Wait for the command to exit (killing it after `timeout`) and collect everything.
    #[track_caller]
    pub(crate) fn finish(mut self, timeout: Duration) -> Output {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for heartbeat") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                while let Ok(chunk) = self.stdout_rx.recv_timeout(Duration::from_millis(100)) {
                    self.stdout.extend_from_slice(&chunk);
                }
                panic!(
                    "did not exit within {timeout:?}\ncommand: {}\n--- stdout\n{}",
                    self.command,
                    String::from_utf8_lossy(&self.stdout)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The reader ends when the pipe closes (the child and any tool it left are gone).
        while let Ok(chunk) = self.stdout_rx.recv_timeout(Duration::from_secs(2)) {
            self.stdout.extend_from_slice(&chunk);
        }
        let stderr = self
            .stderr_thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        self.master = None;
        Output {
            command: self.command.clone(),
            code: status.code(),
            stdout: String::from_utf8_lossy(&self.stdout).into_owned(),
            stderr,
        }
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Wait for a child with a deadline (killing it and panicking when it does not end).
#[track_caller]
pub(crate) fn wait_output(mut child: Child, command: &str, timeout: Duration) -> Output {
    use std::io::Read;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for heartbeat") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command} did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut stdout);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut stderr);
    }
    Output {
        command: command.to_string(),
        code: status.code(),
        stdout,
        stderr,
    }
}

/// Poll `cond` every 10 ms; panics with `what` after `timeout`.
#[track_caller]
pub(crate) fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------
// Helpers for the Telegram and daemon tests: the bot token, a `[telegram]` table pointing at
// a test double, signals, and a child that is killed when the test ends (also on failure).

/// The bot token the Telegram tests give heartbeat (and expect at the double). Shaped like a
/// real one so that a leak is easy to grep for.
pub(crate) const TG_TOKEN: &str = "7000000001:AAHbTestSecretTokenXYZ-0123456789abcd";

/// A `[telegram]` table for the double at `api_url`, sending to `chat_ids`, plus `extra`
/// lines (e.g. `summary = "always"`).
pub(crate) fn tg_toml(api_url: &str, chat_ids: &[i64], extra: &str) -> String {
    let ids: Vec<String> = chat_ids.iter().map(i64::to_string).collect();
    format!(
        "[telegram]\napi_url = \"{api_url}\"\nchat_ids = [{}]\n{extra}\n",
        ids.join(", ")
    )
}

impl Cmd {
    /// Set the bot token variable (the default name, `HEARTBEAT_TELEGRAM_TOKEN`).
    pub(crate) fn token(self) -> Cmd {
        self.env("HEARTBEAT_TELEGRAM_TOKEN", TG_TOKEN)
    }
}

/// Send `sig` to `pid`; panics when the process is gone.
#[track_caller]
pub(crate) fn send_signal(pid: u32, sig: Signal) {
    nix::sys::signal::kill(Pid::from_raw(pid as i32), sig)
        .unwrap_or_else(|e| panic!("kill({pid}, {sig}): {e}"));
}

/// Whether a process `pid` exists (a zombie too): kill(2) with no signal.
pub(crate) fn process_exists(pid: i32) -> bool {
    nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok()
}

/// A spawned heartbeat (a daemon) that is SIGKILLed and reaped when dropped, so a failing
/// test never leaves it behind. Its stderr is drained in the background so it never blocks.
pub(crate) struct Guarded {
    child: Option<Child>,
    command: String,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Guarded {
    pub(crate) fn new(mut child: Child, command: &str) -> Guarded {
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            pipe.map(|mut p| {
                std::thread::spawn(move || {
                    let mut s = Vec::new();
                    let _ = p.read_to_end(&mut s);
                    String::from_utf8_lossy(&s).into_owned()
                })
            })
        };
        let stdout = drain(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        );
        let stderr = drain(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        );
        Guarded {
            child: Some(child),
            command: command.to_string(),
            stdout,
            stderr,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("child still owned").id()
    }

    #[track_caller]
    pub(crate) fn signal(&self, sig: Signal) {
        send_signal(self.pid(), sig);
    }

    /// Wait for it to exit (SIGKILL and panic after `timeout`) and collect its output.
    #[track_caller]
    pub(crate) fn finish(mut self, timeout: Duration) -> Output {
        let mut child = self.child.take().expect("child still owned");
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for heartbeat") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stdout = self
            .stdout
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let stderr = self
            .stderr
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let Some(status) = status else {
            panic!(
                "{} did not exit within {timeout:?}\n--- stdout\n{stdout}--- stderr\n{stderr}",
                self.command
            );
        };
        Output {
            command: self.command.clone(),
            code: status.code(),
            stdout,
            stderr,
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Cmd {
    /// Start in the background, killed (SIGKILL) when the guard is dropped.
    pub(crate) fn spawn_guarded(self) -> Guarded {
        let described = format!("{:?}", self.args);
        let child = self.spawn();
        Guarded::new(child, &format!("heartbeat {described}"))
    }
}

impl Cmd {
    /// Run with standard output going to `/dev/full` (every write fails with ENOSPC).
    pub(crate) fn output_to_full_disk(self) -> Output {
        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("open /dev/full");
        let mut cmd = self.finish();
        let described = format!("{cmd:?} > /dev/full");
        let out = cmd
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .expect("start heartbeat");
        Output {
            command: described,
            code: out.status.code(),
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Whether `ts` (a line's `ts`, a row's `decided_at`) is a time of the command started at
/// `now`: the log (docs/reference.md#clock) stamps what happened with the start plus the time
/// elapsed since, so a little after `now` (these tests' commands take well under 10 s).
pub(crate) fn is_ts_of(ts: &Value, now: &str) -> bool {
    let now = chrono::DateTime::parse_from_rfc3339(now).expect("valid RFC 3339");
    ts.as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t >= now && t < now + chrono::TimeDelta::seconds(10))
        && ts
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 24)
}

#[track_caller]
pub(crate) fn assert_ts_of(ts: &Value, now: &str) {
    assert!(
        is_ts_of(ts, now),
        "{ts} is not a time of the command at {now}"
    );
}
