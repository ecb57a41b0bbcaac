//! One file per subcommand; this module holds what they share: the context built from the
//! global flags, loading config and files, and terminal-safe output.

pub mod approvals;
pub mod approve;
pub mod check;
pub mod daemon;
pub mod deny;
pub mod grants;
pub mod init;
pub mod log;
pub mod pause;
pub mod reset;
pub mod run;
pub mod status;
pub mod telegram;

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::audit::Secrets;
use crate::clock::Clock;
use crate::config::{self, Config, LoadOptions};
use crate::error::{Error, Result};
pub use crate::render::{show_local, show_path};

/// Local time for people, in the configured zone.
pub fn show_time(t: DateTime<Utc>, cfg: &Config) -> String {
    crate::render::show_time(t, cfg.tz())
}

/// What every command gets from the global flags.
pub struct Ctx {
    /// When the command started (`--now`, else the real time, read once): what decisions
    /// compare. The same as `clock.start()`.
    pub now: DateTime<Utc>,
    /// The start plus the time elapsed since: when each recorded thing happened.
    pub clock: Clock,
    pub cwd: PathBuf,
    pub config: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub verbose: u8,
}

impl Ctx {
    /// A diagnostic on stderr at `-v` (level 1) or `-vv` (level 2).
    pub fn diag(&self, level: u8, msg: impl FnOnce() -> String) {
        if self.verbose >= level {
            eprintln!("heartbeat: {}", msg());
        }
    }

    pub fn load_config(&self, files: &[PathBuf]) -> Result<Config> {
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
            eprintln!("heartbeat: warning: {w}");
        }
        Ok(cfg)
    }
}

/// A full task id as typed (12 hex digits, any case), lowercased; `shown_by` says where
/// ids are listed, for the error.
pub fn parse_task_id(raw: &str, shown_by: &str) -> Result<String> {
    let id = raw.trim();
    if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Usage(format!(
            "\"{}\" is not a task id (12 hex digits, as {shown_by} show)",
            crate::text::clean(id)
        )));
    }
    Ok(id.to_ascii_lowercase())
}

/// Stdout, buffered (20,000 lines are a few writes, not 20,000), redacted (the secrets this
/// process took, secret URL parameters), that stops quietly when the reader went away
/// (`heartbeat check | head`). Flushed when dropped; call
/// [`Out::flush`] before asking a person anything.
pub struct Out {
    buf: String,
    broken: bool,
}

/// The first error writing to standard output other than a closed pipe (a full disk, an I/O
/// error): the command then ends with that error instead of exiting as if all was printed.
static OUTPUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// The error that writing to standard output met, if any (see [`Out`]).
pub fn output_error() -> Option<String> {
    OUTPUT_ERROR.lock().ok().and_then(|mut e| e.take())
}

impl Out {
    pub fn new() -> Out {
        Out {
            buf: String::new(),
            broken: false,
        }
    }

    pub fn line(&mut self, text: &str) {
        if self.broken {
            return;
        }
        self.buf.push_str(text);
        self.buf.push('\n');
        if self.buf.len() >= 64 * 1024 {
            self.flush();
        }
    }

    pub fn lines(&mut self, lines: impl IntoIterator<Item = String>) {
        for l in lines {
            self.line(&l);
        }
    }

    pub fn json(&mut self, value: &serde_json::Value) {
        let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
        self.line(&text);
    }

    pub fn flush(&mut self) {
        if self.buf.is_empty() || self.broken {
            self.buf.clear();
            return;
        }
        // Redacted here, whole lines at a time: every command's output passes this point.
        let text = Secrets::taken().string(&self.buf);
        let mut stdout = io::stdout().lock();
        let result = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush());
        self.buf.clear();
        if let Err(e) = result {
            // A closed pipe (`heartbeat check | head`) is the reader's choice: stop quietly.
            self.broken = true;
            if e.kind() != io::ErrorKind::BrokenPipe
                && let Ok(mut first) = OUTPUT_ERROR.lock()
            {
                first.get_or_insert(e.to_string());
            }
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Default for Out {
    fn default() -> Self {
        Out::new()
    }
}
