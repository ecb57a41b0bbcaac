//! One file per subcommand; this module holds what they share: the context built from the
//! global flags, loading config and files, and terminal-safe output.

pub(crate) mod approvals;
pub(crate) mod approve;
pub(crate) mod check;
pub(crate) mod daemon;
pub(crate) mod deny;
pub(crate) mod doctor;
pub(crate) mod fleet;
pub(crate) mod grants;
pub(crate) mod init;
pub(crate) mod log;
pub(crate) mod man;
pub(crate) mod mcp;
pub(crate) mod mcp_tools;
pub(crate) mod metrics;
pub(crate) mod notify_test;
pub(crate) mod pause;
pub(crate) mod reset;
pub(crate) mod run;
pub(crate) mod snooze;
pub(crate) mod status;
pub(crate) mod telegram;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::audit::Secrets;
use crate::clock::Clock;
use crate::config::{self, Config, LoadOptions};
use crate::engine::decide::Decider;
use crate::engine::files::Loaded;
use crate::engine::query;
use crate::error::{Error, Result, WorkStarted, say};
use crate::model::{Problem, Severity, Task};
use crate::render::show_path;
use crate::store::ApprovalRow;
use crate::text::Redacted;

/// Local time for people, in the configured zone.
pub(crate) fn show_time(t: DateTime<Utc>, cfg: &Config) -> String {
    crate::render::show_time(t, cfg.tz())
}

/// A time as the store keeps it (RFC 3339, UTC), shown in the configured zone; as stored
/// when it does not read.
pub(crate) fn show_stored(ts: &str, cfg: &Config) -> String {
    crate::store::parse_ts(ts).map_or_else(|| ts.to_string(), |t| show_time(t, cfg))
}

/// `file:line:column: warning: message`, as `check` shows a problem.
pub(crate) fn show_problem(p: &Problem, cwd: &Path) -> String {
    let severity = match p.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    format!(
        "{}:{}:{}: {severity}: {}",
        crate::render::show_path(&p.file, cwd),
        p.line,
        p.column,
        crate::text::clean(&p.message)
    )
}

/// The files' warnings on stderr (docs/reference.md#file-warnings: once per run, also with `-q`;
/// they never change the exit code).
pub(crate) fn print_file_warnings(files: &[Loaded], cwd: &Path) {
    for w in query::file_warnings(files) {
        say(&format!("heartbeat: {}", show_problem(&w, cwd)));
    }
}

/// The configured zone (the system's when the config sets none, or does not load), for a
/// local time typed on the command line. Quiet: the command itself reports the config's
/// problems.
pub(crate) fn configured_zone(config: Option<&Path>, state_dir: Option<&Path>, cwd: &Path) -> Tz {
    let env = |name: &str| std::env::var(name).ok();
    let opts = LoadOptions {
        config: config.map(Path::to_path_buf),
        files: Vec::new(),
        state_dir: state_dir.map(Path::to_path_buf),
        cwd: cwd.to_path_buf(),
        env: &env,
    };
    match config::load(&opts) {
        Ok(cfg) => cfg.tz(),
        Err(broken) => config::fallback(&opts, &broken).map_or(Tz::UTC, |cfg| cfg.tz()),
    }
}

/// What every command gets from the global flags.
pub(crate) struct Ctx {
    /// When the command started (`--now`, else the real time, read once): what decisions
    /// compare. The same as `clock.start()`.
    pub now: DateTime<Utc>,
    /// The start plus the time elapsed since: when each recorded thing happened.
    pub clock: Clock,
    pub cwd: PathBuf,
    pub config: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub verbose: u8,
    /// Whether this command has started a tool: what an error's exit code depends on.
    pub work: WorkStarted,
    /// What writing to standard output met.
    pub output: OutputError,
}

impl Ctx {
    /// Standard output for this command (see [`Out`]).
    pub(crate) fn out(&self) -> Out {
        Out::new(self.output.clone())
    }

    /// The configured zone: see [`configured_zone`].
    pub(crate) fn zone(&self) -> Tz {
        configured_zone(self.config.as_deref(), self.state_dir.as_deref(), &self.cwd)
    }

    /// A diagnostic on stderr at `-v` (level 1) or `-vv` (level 2).
    pub(crate) fn diag(&self, level: u8, msg: impl FnOnce() -> String) {
        if self.verbose >= level {
            crate::error::say(&format!("heartbeat: {}", msg()));
        }
    }

    /// The config, for a command that only reads the state dir (`status`, `log`,
    /// `approvals`, `grants`): when it does not load, the error is a warning and the state
    /// dir is found without it (docs/reference.md#config), so the person can still see what
    /// happened.
    pub(crate) fn load_config_to_read(&self) -> Result<Config> {
        match self.load_config(&[]) {
            Ok(cfg) => Ok(cfg),
            Err(Error::Config(broken)) => {
                let env = |name: &str| std::env::var(name).ok();
                let opts = LoadOptions {
                    config: self.config.clone(),
                    files: Vec::new(),
                    state_dir: self.state_dir.clone(),
                    cwd: self.cwd.clone(),
                    env: &env,
                };
                let Some(cfg) = config::fallback(&opts, &broken) else {
                    return Err(Error::Config(broken));
                };
                say(&format!(
                    "heartbeat: warning: {broken}; reading the state dir {} anyway",
                    cfg.state_dir.display()
                ));
                Ok(cfg)
            }
            Err(other) => Err(other),
        }
    }

    /// A [`Decider`] for a person at this terminal (`cli:USER`), over the config as loaded.
    pub(crate) fn decider(&self) -> Result<Decider> {
        let cfg = self.load_config(&[])?;
        Decider::open(cfg, format!("cli:{}", user_name()), self.clock)
    }

    pub(crate) fn load_config(&self, files: &[PathBuf]) -> Result<Config> {
        let env = |name: &str| std::env::var(name).ok();
        let opts = LoadOptions {
            config: self.config.clone(),
            files: files.to_vec(),
            state_dir: self.state_dir.clone(),
            cwd: self.cwd.clone(),
            env: &env,
        };
        let cfg = config::load(&opts)?;
        self.diag(1, || match &cfg.source {
            Some(p) => format!("config: {}", p.display()),
            None => "config: none found, using defaults".into(),
        });
        self.diag(1, || format!("state dir: {}", cfg.state_dir.display()));
        self.diag(1, || format!("sqlite: {}", crate::store::sqlite_version()));
        for w in &cfg.warnings {
            say(&format!("heartbeat: warning: {w}"));
        }
        Ok(cfg)
    }
}

/// Who is deciding: `$USER`, `$LOGNAME`, else the passwd entry of the real uid.
fn user_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(name) = std::env::var(var)
            && !name.is_empty()
        {
            return name;
        }
    }
    crate::sys::real_user_name()
}

/// `  (proposed by an agent, mcp:…)` for a task an agent proposed, else nothing: said
/// wherever a person decides (docs/reference.md#proposal-mark).
pub(crate) fn proposal_note(row: &ApprovalRow) -> String {
    row.text
        .find(crate::engine::session::PROPOSED_BY)
        .map(|at| format!("  ({}", crate::text::clean(&row.text[at..])))
        .unwrap_or_default()
}

/// One line about an approval: id, tool, place, input.
pub(crate) fn describe(row: &ApprovalRow, cwd: &Path) -> String {
    format!(
        "#{} @{} {}:{}  {}{}",
        row.id,
        row.tool,
        crate::render::show_path(row.file.as_ref(), cwd),
        row.line,
        Secrets::taken()
            .redact(&row.input.to_string())
            .first_line(100),
        proposal_note(row)
    )
}

/// A task id as typed: its 12 hex digits, or the first 4 or more of them (as `log --task`
/// takes), any case, resolved against the ids that `known` holds. An unknown id is returned
/// as typed (lowercased) for the caller's own "no record" message; a prefix that fits several
/// ids is an error naming them. `shown_by` says where ids are listed.
pub(crate) fn resolve_task_id(raw: &str, known: &[String], shown_by: &str) -> Result<String> {
    let id = raw.trim().to_ascii_lowercase();
    if !(4..=12).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Usage(format!(
            "\"{}\" is not a task id (12 hex digits, or the first 4 or more of them, as {shown_by} show)",
            Secrets::taken().redact(raw).first_line(40)
        )));
    }
    let mut fits: Vec<&String> = known.iter().filter(|k| k.starts_with(&id)).collect();
    fits.sort();
    fits.dedup();
    match fits.as_slice() {
        [] => Ok(id),
        [one] => Ok((*one).clone()),
        many => Err(Error::Usage(format!(
            "task id {id} is ambiguous: it starts {}; type more of it",
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The task of the files whose id is `raw` or starts with it (4 or more hex digits). None
/// such, or more than one, is a usage error (exit 2) naming it, with the candidates and
/// their places for an ambiguous prefix.
pub(crate) fn find_task<'a>(raw: &str, tasks: &[&'a Task], cwd: &Path) -> Result<&'a Task> {
    // Only its form is checked here: 4 to 12 hex digits.
    let id = resolve_task_id(raw, &[], "`heartbeat check` and `status`")?;
    let fits: Vec<&'a Task> = tasks
        .iter()
        .copied()
        .filter(|t| t.id.starts_with(&id))
        .collect();
    match fits.as_slice() {
        [] => Err(Error::Usage(format!(
            "no task {id} in the files read (see `heartbeat check` for the tasks and their ids)"
        ))),
        [one] => Ok(one),
        many => Err(Error::Usage(format!(
            "task id {id} is ambiguous: it starts {}; type more of it",
            many.iter()
                .map(|t| format!("{} ({}:{})", t.id, show_path(&t.file, cwd), t.line))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Stdout, buffered (20,000 lines are a few writes, not 20,000): a redaction step. What is
/// buffered goes through the one redaction step ([`Secrets::redact`], with every secret this
/// process took) when it is flushed, whole lines at a time, and only the [`Redacted`] text
/// it makes is written. Stops quietly when the reader went away (`heartbeat check | head`).
/// Flushed when dropped; call [`Out::flush`] before asking a person anything.
pub(crate) struct Out {
    buf: String,
    broken: bool,
    error: OutputError,
}

/// The first error writing to standard output other than a closed pipe (a full disk, an I/O
/// error), shared by every [`Out`] of one command: the command then ends with that error
/// instead of exiting as if all was printed.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputError(Arc<Mutex<Option<String>>>);

impl OutputError {
    /// The error that writing to standard output met, if any.
    pub(crate) fn take(&self) -> Option<String> {
        self.0.lock().ok().and_then(|mut e| e.take())
    }

    fn keep_first(&self, error: String) {
        if let Ok(mut first) = self.0.lock() {
            first.get_or_insert(error);
        }
    }
}

impl Out {
    /// Standard output for a command whose write errors go to `error`.
    pub(crate) fn new(error: OutputError) -> Out {
        Out {
            buf: String::new(),
            broken: false,
            error,
        }
    }

    /// A write failed (or the reader went away): nothing more will be shown.
    pub(crate) fn broken(&self) -> bool {
        self.broken
    }

    /// Nobody reads stdout any more (a closed pipe, a hung-up terminal): asked by a command
    /// that may have nothing to write for a long time (`log -f`).
    pub(crate) fn gone(&mut self) -> bool {
        if !self.broken && crate::sys::stdout_hung_up() {
            self.broken = true;
        }
        self.broken
    }

    pub(crate) fn line(&mut self, text: &str) {
        if self.broken {
            return;
        }
        self.buf.push_str(text);
        self.buf.push('\n');
        if self.buf.len() >= 64 * 1024 {
            self.flush();
        }
    }

    pub(crate) fn lines(&mut self, lines: impl IntoIterator<Item = String>) {
        for l in lines {
            self.line(&l);
        }
    }

    pub(crate) fn json(&mut self, value: &serde_json::Value) {
        let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
        self.line(&text);
    }

    pub(crate) fn flush(&mut self) {
        if self.buf.is_empty() || self.broken {
            self.buf.clear();
            return;
        }
        // Redacted here, whole lines at a time: every command's output passes this point,
        // and only the Redacted text is written.
        let text: Redacted = Secrets::taken().redact(&self.buf);
        let mut stdout = io::stdout().lock();
        let result = stdout
            .write_all(text.as_str().as_bytes())
            .and_then(|()| stdout.flush());
        self.buf.clear();
        if let Err(e) = result {
            // A closed pipe (`heartbeat check | head`) is the reader's choice: stop quietly.
            self.broken = true;
            if e.kind() != io::ErrorKind::BrokenPipe {
                self.error.keep_first(e.to_string());
            }
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_resolve_from_prefixes_of_four_or_more() {
        let known = vec!["0123456789ab".to_string(), "0123fedcba98".to_string()];
        assert_eq!(
            resolve_task_id("01234", &known, "x").unwrap(),
            "0123456789ab"
        );
        assert_eq!(
            resolve_task_id(" 0123FE ", &known, "x").unwrap(),
            "0123fedcba98"
        );
        // Unknown: as typed, for the caller's "no record" message.
        assert_eq!(resolve_task_id("ffff", &known, "x").unwrap(), "ffff");
        let err = resolve_task_id("0123", &known, "x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ambiguous") && err.contains("0123fedcba98"),
            "{err}"
        );
        for bad in ["012", "0123456789abc", "xyzw", ""] {
            assert!(resolve_task_id(bad, &known, "x").is_err(), "{bad}");
        }
    }
}
