//! The TOML config: lookup order, validation of every key, defaults (SPEC §3).
//!
//! Invariants:
//! - A `Config` is fully validated: windows, zones, days and durations are parsed here once,
//!   and nothing downstream falls back to a default because a value was half-parsed.
//! - Every error names the file, the dotted key and the bad value. Unknown keys, and keys whose
//!   behaviour is not built yet, are refused rather than ignored: a typo must not silently
//!   disable a guardrail.
//! - The process environment and the host's directories are injected (`LoadOptions::env`,
//!   [`Host`]), so tests never depend on the machine they run on.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use chrono_tz::Tz;
use toml::{Table, Value};

use crate::model::DaySet;
use crate::schedule::{ActiveHours, Window, parse_day};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Autonomy {
    Observe,
    Cautious,
    Full,
}

impl Autonomy {
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::Observe => "observe",
            Autonomy::Cautious => "cautious",
            Autonomy::Full => "full",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainTasks {
    Remind,
    Agent,
}

/// A tool's approval policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Auto,
    Ask,
    Deny,
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Auto => "auto",
            Approval::Ask => "ask",
            Approval::Deny => "deny",
        }
    }
}

/// `[tools.NAME]` as written; absent keys are None (the tool's defaults apply).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolConfig {
    pub command: Option<Vec<String>>,
    pub timeout: Option<Duration>,
    pub approval: Option<Approval>,
    pub description: Option<String>,
    /// Not started while another task of this tool started within this time.
    pub cooldown: Option<Duration>,
    /// Estimated cost of one call, for the budget (when the tool does not report one).
    pub cost_usd: Option<f64>,
    /// Overrides the global `max_consecutive_failures` for this tool's tasks.
    pub max_consecutive_failures: Option<u32>,
}

/// When a run's summary goes to Telegram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryMode {
    /// After runs that did something (default).
    OnChange,
    /// After every run, empty ones too.
    Always,
    /// Only failures (and other urgent messages).
    Never,
}

/// `[telegram]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TelegramConfig {
    /// The name of the environment variable that holds the bot token (never the token).
    pub bot_token_env: String,
    /// The only chats that receive messages and may approve.
    pub chat_ids: Vec<i64>,
    /// The Bot API server, without a trailing slash.
    pub api_url: String,
    pub summary: SummaryMode,
    /// Non-urgent messages wait until these hours end.
    pub quiet_hours: Option<Window>,
    /// Past this many messages a local day, non-urgent ones are folded; 0 = no limit.
    pub max_messages_per_day: u32,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            bot_token_env: "HEARTBEAT_TELEGRAM_TOKEN".into(),
            chat_ids: Vec::new(),
            api_url: "https://api.telegram.org".into(),
            summary: SummaryMode::OnChange,
            quiet_hours: None,
            max_messages_per_day: 20,
        }
    }
}

/// `[daemon]`.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    /// Tick interval; ticks align to multiples of it in local time.
    pub every: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            every: Duration::from_secs(30 * 60),
        }
    }
}

/// A loaded, validated config. Every value is parsed once here.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it came from; None when no config file was found.
    pub source: Option<PathBuf>,
    /// HEARTBEAT.md files, absolute, globs expanded, in order, without duplicates.
    pub files: Vec<PathBuf>,
    /// Zone, window and days.
    pub active: ActiveHours,
    pub autonomy: Autonomy,
    pub plain_tasks: PlainTasks,
    /// Absolute.
    pub state_dir: PathBuf,
    /// Absolute (`audit_log` joined to `state_dir`).
    pub audit_log: PathBuf,
    pub approval_ttl: Duration,
    pub concurrency: usize,
    /// 0 = no cap.
    pub max_tasks_per_run: usize,
    pub stuck_after: Duration,
    pub tools: BTreeMap<String, ToolConfig>,
    /// `[telegram]`; None when the table is absent.
    pub telegram: Option<TelegramConfig>,
    pub daemon: DaemonConfig,
    /// `[budget] daily_usd`; 0 = no budget.
    pub daily_usd: f64,
    /// After this many failures in a row a task is tripped; 0 = never.
    pub max_consecutive_failures: u32,
    /// Non-fatal notes (a glob that matched nothing).
    pub warnings: Vec<String>,
}

impl Config {
    pub fn tz(&self) -> Tz {
        self.active.tz
    }

    /// The estimated cost of one call of a tool (`[tools.NAME] cost_usd`, else 0).
    pub fn cost_estimate(&self, tool: &str) -> f64 {
        self.tools.get(tool).and_then(|t| t.cost_usd).unwrap_or(0.0)
    }

    /// A tool's cooldown, if it has one.
    pub fn cooldown(&self, tool: &str) -> Option<Duration> {
        self.tools.get(tool).and_then(|t| t.cooldown)
    }

    /// Failures in a row after which a task of this tool is tripped; 0 = never.
    pub fn failure_limit(&self, tool: &str) -> u32 {
        self.tools
            .get(tool)
            .and_then(|t| t.max_consecutive_failures)
            .unwrap_or(self.max_consecutive_failures)
    }

    /// Whether a task with this estimate may start after `spent` today (SPEC §11): not once
    /// the cap is reached, nor when the estimate would pass it. Always with no budget.
    pub fn within_budget(&self, spent: f64, estimate: f64) -> bool {
        self.daily_usd <= 0.0 || (spent < self.daily_usd && spent + estimate <= self.daily_usd)
    }
}

/// A config error: names the file, the key and the bad value. Exit code 2.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    pub file: Option<PathBuf>,
    pub key: Option<String>,
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        let mut s = String::new();
        if let Some(f) = &self.file {
            s.push_str(&f.display().to_string());
            s.push_str(": ");
        }
        if let Some(k) = &self.key {
            s.push_str(k);
            s.push_str(": ");
        }
        s.push_str(&self.message);
        s
    }
}

/// What the command line and environment contribute to loading.
pub struct LoadOptions<'a> {
    /// `--config PATH`.
    pub config: Option<PathBuf>,
    /// `--file PATH`… (overrides `files`); relative to `cwd`.
    pub files: Vec<PathBuf>,
    /// `--state-dir PATH` (overrides `state_dir`); relative to `cwd`.
    pub state_dir: Option<PathBuf>,
    pub cwd: PathBuf,
    /// Environment lookup (`HEARTBEAT_CONFIG`, `TZ`, `HOME`); injected for tests.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// Facts about the machine that `load` would otherwise read from the system: the platform
/// config and data directories and the system time zone. `load` detects them; tests inject
/// them through [`load_with`] so that nothing depends on the real home directory.
#[derive(Clone, Debug, Default)]
pub struct Host {
    /// The platform config dir (`directories::BaseDirs::config_dir`), e.g. `~/.config`.
    pub config_dir: Option<PathBuf>,
    /// heartbeat's data dir (`ProjectDirs::from("", "", "heartbeat").data_dir()`).
    pub data_dir: Option<PathBuf>,
    /// The system zone (`/etc/timezone`, or the `/etc/localtime` link target).
    pub system_tz: Option<Tz>,
}

impl Host {
    pub fn detect() -> Host {
        Host {
            config_dir: directories::BaseDirs::new().map(|b| b.config_dir().to_path_buf()),
            data_dir: directories::ProjectDirs::from("", "", "heartbeat")
                .map(|p| p.data_dir().to_path_buf()),
            system_tz: system_tz(),
        }
    }
}

fn system_tz() -> Option<Tz> {
    if let Ok(s) = std::fs::read_to_string("/etc/timezone")
        && let Some(tz) = zone_name(s.trim()).and_then(|n| n.parse().ok())
    {
        return Some(tz);
    }
    let target = std::fs::read_link("/etc/localtime").ok()?;
    zone_name(&target.to_string_lossy())?.parse().ok()
}

/// `Europe/Berlin`, `:Europe/Berlin` or `/usr/share/zoneinfo/Europe/Berlin` → `Europe/Berlin`.
fn zone_name(s: &str) -> Option<&str> {
    let s = s.strip_prefix(':').unwrap_or(s).trim();
    let s = match s.find("zoneinfo/") {
        Some(i) => &s[i + "zoneinfo/".len()..],
        None => s,
    };
    (!s.is_empty()).then_some(s)
}

/// Tools that exist without a `command`; `[tools.NAME]` may only tune their policy.
pub const BUILTIN_TOOLS: [&str; 6] = [
    "shell",
    "log",
    "write_file",
    "append_file",
    "http",
    "notify",
];

const TOP_KEYS: &[&str] = &[
    "files",
    "timezone",
    "active_hours",
    "active_days",
    "autonomy",
    "plain_tasks",
    "state_dir",
    "audit_log",
    "approval_ttl",
    "concurrency",
    "max_tasks_per_run",
    "stuck_after",
    "tools",
    "telegram",
    "daemon",
    "budget",
    "max_consecutive_failures",
];
const TELEGRAM_KEYS: &[&str] = &[
    "bot_token_env",
    "chat_ids",
    "api_url",
    "summary",
    "quiet_hours",
    "max_messages_per_day",
];
const DAEMON_KEYS: &[&str] = &["every"];
const TOOL_KEYS: &[&str] = &[
    "command",
    "timeout",
    "approval",
    "description",
    "cooldown",
    "cost_usd",
    "max_consecutive_failures",
];
const BUDGET_KEYS: &[&str] = &["daily_usd"];

/// Find, read and validate the config (SPEC §3), detecting the host's directories and zone.
pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
    load_with(opts, &Host::detect())
}

/// [`load`] with the host facts given.
pub fn load_with(opts: &LoadOptions, host: &Host) -> Result<Config, ConfigError> {
    let source = find(opts, host)?;
    let table = match &source {
        Some(path) => read_table(path)?,
        None => Table::new(),
    };
    let base = match &source {
        Some(path) => path
            .parent()
            .map_or_else(|| opts.cwd.clone(), Path::to_path_buf),
        None => opts.cwd.clone(),
    };
    let cx = Cx {
        file: source.clone(),
        base,
        env: opts.env,
    };

    let mut files = vec!["HEARTBEAT.md".to_string()];
    let mut tz = None;
    let mut window = Window::ALWAYS;
    let mut days = DaySet::ALL;
    let mut autonomy = Autonomy::Cautious;
    let mut plain_tasks = PlainTasks::Remind;
    let mut state_dir = None;
    let mut audit_log = "audit.jsonl".to_string();
    let mut approval_ttl = Duration::from_secs(24 * 3600);
    let mut stuck_after = Duration::from_secs(30 * 60);
    let mut concurrency = 1;
    let mut max_tasks_per_run = 50;
    let mut tools = BTreeMap::new();
    let mut telegram = None;
    let mut daemon = DaemonConfig::default();
    let mut daily_usd = 0.0;
    let mut max_consecutive_failures = 3;

    for (key, value) in &table {
        let k = key.as_str();
        match k {
            "files" => {
                files = cx.strings(k, value)?;
                if files.is_empty() {
                    return Err(cx.bad(k, value, "lists no files"));
                }
            }
            "timezone" => {
                let name = cx.string(k, value)?;
                tz = Some(name.parse::<Tz>().map_err(|_| {
                    cx.bad(
                        k,
                        value,
                        "not a known IANA time zone name (such as \"Europe/Berlin\")",
                    )
                })?);
            }
            "active_hours" => {
                window = Window::parse(cx.string(k, value)?).map_err(|e| cx.bad(k, value, &e))?;
            }
            "active_days" => {
                let list = value
                    .as_array()
                    .ok_or_else(|| cx.wrong_type(k, "an array of day names", value))?;
                if list.is_empty() {
                    return Err(cx.bad(k, value, "lists no days; leave the key out for every day"));
                }
                days = DaySet::EMPTY;
                for (i, item) in list.iter().enumerate() {
                    let name = cx.string(&format!("{k}[{i}]"), item)?;
                    let day = parse_day(name).ok_or_else(|| {
                        cx.bad(k, item, "not a day (expected mon … sun or monday … sunday)")
                    })?;
                    days = days.with(day);
                }
            }
            "autonomy" => {
                autonomy = match cx.string(k, value)? {
                    "observe" => Autonomy::Observe,
                    "cautious" => Autonomy::Cautious,
                    "full" => Autonomy::Full,
                    _ => return Err(cx.bad(k, value, "expected observe, cautious or full")),
                };
            }
            "plain_tasks" => {
                plain_tasks = match cx.string(k, value)? {
                    "remind" => PlainTasks::Remind,
                    "agent" => PlainTasks::Agent,
                    _ => return Err(cx.bad(k, value, "expected remind or agent")),
                };
            }
            "state_dir" => {
                let raw = cx.string(k, value)?;
                if raw.is_empty() {
                    return Err(cx.bad(k, value, "is empty"));
                }
                state_dir =
                    Some(expand_path(raw, &cx.base, cx.env).map_err(|e| cx.bad(k, value, &e))?);
            }
            "audit_log" => {
                audit_log = cx.string(k, value)?.to_string();
                if audit_log.is_empty() {
                    return Err(cx.bad(k, value, "is empty"));
                }
            }
            "approval_ttl" => approval_ttl = cx.duration(k, value)?,
            "stuck_after" => stuck_after = cx.duration(k, value)?,
            "concurrency" => {
                let n = cx.integer(k, value)?;
                if !(1..=64).contains(&n) {
                    return Err(cx.bad(k, value, "must be between 1 and 64"));
                }
                concurrency = n as usize;
            }
            "max_tasks_per_run" => {
                let n = cx.integer(k, value)?;
                max_tasks_per_run = usize::try_from(n)
                    .map_err(|_| cx.bad(k, value, "must be 0 (no cap) or more"))?;
            }
            "tools" => tools = cx.tools(value)?,
            "telegram" => telegram = Some(cx.telegram(value)?),
            "daemon" => daemon = cx.daemon(value)?,
            "budget" => daily_usd = cx.budget(value)?,
            "max_consecutive_failures" => max_consecutive_failures = cx.count(k, value)?,
            _ => return Err(cx.unknown(None, k, TOP_KEYS)),
        }
    }

    if plain_tasks == PlainTasks::Agent
        && tools
            .get("agent")
            .is_none_or(|t: &ToolConfig| t.command.is_none())
    {
        return Err(cx.err(
            "plain_tasks",
            "\"agent\" needs a [tools.agent] table with a command",
        ));
    }

    let tz = match tz {
        Some(tz) => tz,
        None => default_tz(opts.env, host)?,
    };

    let mut warnings = Vec::new();
    let files = if opts.files.is_empty() {
        let label = match &cx.file {
            Some(f) => format!("{}: files", f.display()),
            None => "files".to_string(),
        };
        expand_files(&files, &cx.base, opts.env, &label, &mut warnings)
            .map_err(|e| cx.err("files", &e))?
    } else {
        let raw: Vec<String> = opts
            .files
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        expand_files(&raw, &opts.cwd, opts.env, "--file", &mut warnings).map_err(|e| {
            ConfigError {
                file: None,
                key: Some("--file".into()),
                message: e,
            }
        })?
    };

    let state_dir = match (&opts.state_dir, state_dir) {
        (Some(dir), _) => normalize(&opts.cwd.join(dir)),
        (None, Some(dir)) => dir,
        (None, None) => default_state_dir(opts.env, host)?,
    };
    let audit_log = expand_path(&audit_log, &state_dir, opts.env)
        .map_err(|e| cx.err("audit_log", &format!("{audit_log:?}: {e}")))?;

    Ok(Config {
        source,
        files,
        active: ActiveHours { tz, window, days },
        autonomy,
        plain_tasks,
        state_dir,
        audit_log,
        approval_ttl,
        concurrency,
        max_tasks_per_run,
        stuck_after,
        tools,
        telegram,
        daemon,
        daily_usd,
        max_consecutive_failures,
        warnings,
    })
}

/// The config file, first match wins; None when there is none (all defaults).
fn find(opts: &LoadOptions, host: &Host) -> Result<Option<PathBuf>, ConfigError> {
    let must_exist = |path: PathBuf, how: &str| {
        let path = normalize(&opts.cwd.join(path));
        match std::fs::metadata(&path) {
            Ok(_) => Ok(Some(path)),
            Err(e) => Err(ConfigError {
                file: Some(path),
                key: None,
                message: format!("cannot read config file{how}: {e}"),
            }),
        }
    };
    if let Some(path) = &opts.config {
        return must_exist(path.clone(), "");
    }
    if let Some(path) = (opts.env)("HEARTBEAT_CONFIG").filter(|s| !s.is_empty()) {
        return must_exist(PathBuf::from(path), " named by $HEARTBEAT_CONFIG");
    }
    let first = opts
        .files
        .first()
        .map_or_else(|| opts.cwd.join("HEARTBEAT.md"), |f| opts.cwd.join(f));
    if let Some(dir) = first.parent() {
        let candidate = normalize(&dir.join("heartbeat.toml"));
        if candidate.exists() {
            return Ok(Some(candidate));
        }
    }
    if let Some(dir) = &host.config_dir {
        let candidate = dir.join("heartbeat").join("config.toml");
        if candidate.exists() {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

fn read_table(path: &Path) -> Result<Table, ConfigError> {
    let err = |message: String| ConfigError {
        file: Some(path.to_path_buf()),
        key: None,
        message,
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| err(format!("cannot read config file: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    text.parse::<Table>()
        .map_err(|e| err(e.to_string().trim_end().to_string()))
}

fn default_tz(env: &dyn Fn(&str) -> Option<String>, host: &Host) -> Result<Tz, ConfigError> {
    if let Some(raw) = env("TZ").filter(|s| !s.trim().is_empty()) {
        return zone_name(&raw)
            .and_then(|n| n.parse::<Tz>().ok())
            .ok_or_else(|| ConfigError {
                file: None,
                key: Some("$TZ".into()),
                message: format!(
                    "{raw:?}: not a known IANA time zone name; set timezone = \"Area/City\" \
                     in the config file (or fix TZ)"
                ),
            });
    }
    Ok(host.system_tz.unwrap_or(Tz::UTC))
}

fn default_state_dir(
    env: &dyn Fn(&str) -> Option<String>,
    host: &Host,
) -> Result<PathBuf, ConfigError> {
    if let Some(dir) = &host.data_dir {
        return Ok(dir.clone());
    }
    match env("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(Path::new(&home).join(".local/share/heartbeat")),
        None => Err(ConfigError {
            file: None,
            key: Some("state_dir".into()),
            message: "no default: neither the platform data directory nor $HOME is known; set \
                      state_dir in the config or pass --state-dir"
                .into(),
        }),
    }
}

/// `~` and `~/…` from `$HOME`; a relative path joins `base`; `.` components are dropped.
fn expand_path(
    raw: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let (prefix, rest) = split_home(raw, base, env)?;
    Ok(normalize(&prefix.join(rest)))
}

/// Split `raw` into a literal directory and the part written by the user, so that a glob
/// pattern never treats metacharacters in the home or config directory as special.
fn split_home<'r>(
    raw: &'r str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(PathBuf, &'r str), String> {
    let home_rest = if raw == "~" {
        Some("")
    } else {
        raw.strip_prefix("~/")
    };
    if let Some(rest) = home_rest {
        let home = env("HOME")
            .filter(|h| !h.is_empty())
            .ok_or("cannot expand ~: HOME is not set")?;
        return Ok((PathBuf::from(home), rest));
    }
    if Path::new(raw).is_absolute() {
        Ok((PathBuf::new(), raw))
    } else {
        Ok((base.to_path_buf(), raw))
    }
}

/// Drop `.` components (`/a/./b` → `/a/b`); `..` stays, since resolving it lexically is wrong
/// across symlinks.
fn normalize(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Expand the `files` entries: globs sorted, literal paths kept even when missing (the reader
/// reports them), duplicates dropped, order kept.
fn expand_files(
    raw: &[String],
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    label: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = Vec::new();
    let push = |p: PathBuf, out: &mut Vec<PathBuf>| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    for entry in raw {
        let (prefix, rest) = split_home(entry, base, env).map_err(|e| format!("{entry:?}: {e}"))?;
        let literal = normalize(&prefix.join(rest));
        if !has_glob_meta(rest) || literal.exists() {
            push(literal, &mut out);
            continue;
        }
        let mut pattern = glob::Pattern::escape(&prefix.to_string_lossy());
        if !pattern.is_empty() && !pattern.ends_with('/') {
            pattern.push('/');
        }
        pattern.push_str(rest);
        let options = glob::MatchOptions {
            require_literal_leading_dot: true,
            ..glob::MatchOptions::new()
        };
        let paths = glob::glob_with(&pattern, options)
            .map_err(|e| format!("{entry:?}: not a valid glob pattern: {e}"))?;
        let mut matches = Vec::new();
        for found in paths {
            match found {
                Ok(p) if !p.is_dir() => matches.push(normalize(&p)),
                Ok(_) => {}
                Err(e) => warnings.push(format!("{label}: {entry:?}: {e}")),
            }
        }
        if matches.is_empty() {
            warnings.push(format!("{label}: {entry:?} matches no file"));
        }
        matches.sort();
        for p in matches {
            push(p, &mut out);
        }
    }
    Ok(out)
}

fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Where errors point, and what relative paths are relative to.
struct Cx<'a> {
    file: Option<PathBuf>,
    base: PathBuf,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Cx<'_> {
    fn err(&self, key: &str, message: &str) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            key: Some(key.to_string()),
            message: message.to_string(),
        }
    }

    /// `key: <value>: why`.
    fn bad(&self, key: &str, value: &Value, why: &str) -> ConfigError {
        self.err(key, &format!("{}: {why}", show(value)))
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &Value) -> ConfigError {
        let found = match found {
            Value::Table(_) => "a table".to_string(),
            other => format!("{} {}", other.type_str(), show(other)),
        };
        self.err(key, &format!("expected {expected}, found {found}"))
    }

    fn unknown(&self, table: Option<&str>, key: &str, known: &[&str]) -> ConfigError {
        let mut message = format!("unknown key {key:?}");
        if let Some(near) = closest(key, known) {
            message.push_str(&format!(" (did you mean {near:?}?)"));
        }
        ConfigError {
            file: self.file.clone(),
            key: table.map(str::to_string),
            message,
        }
    }

    fn string<'v>(&self, key: &str, value: &'v Value) -> Result<&'v str, ConfigError> {
        value
            .as_str()
            .ok_or_else(|| self.wrong_type(key, "a string", value))
    }

    fn strings(&self, key: &str, value: &Value) -> Result<Vec<String>, ConfigError> {
        let list = value
            .as_array()
            .ok_or_else(|| self.wrong_type(key, "an array of strings", value))?;
        list.iter()
            .enumerate()
            .map(|(i, v)| self.string(&format!("{key}[{i}]"), v).map(str::to_string))
            .collect()
    }

    fn integer(&self, key: &str, value: &Value) -> Result<i64, ConfigError> {
        value
            .as_integer()
            .ok_or_else(|| self.wrong_type(key, "an integer", value))
    }

    fn duration(&self, key: &str, value: &Value) -> Result<Duration, ConfigError> {
        let s = self.string(key, value)?;
        let d = humantime::parse_duration(s.trim())
            .map_err(|e| self.err(key, &format!("{} is not a duration: {e}", show(value))))?;
        if d.is_zero() {
            return Err(self.bad(key, value, "must be longer than zero"));
        }
        Ok(d)
    }

    fn table<'v>(&self, key: &str, value: &'v Value) -> Result<&'v Table, ConfigError> {
        value
            .as_table()
            .ok_or_else(|| self.wrong_type(key, "a table", value))
    }

    fn telegram(&self, value: &Value) -> Result<TelegramConfig, ConfigError> {
        let mut t = TelegramConfig::default();
        for (key, v) in self.table("telegram", value)? {
            let k = format!("telegram.{key}");
            match key.as_str() {
                "bot_token_env" => {
                    let name = self.string(&k, v)?;
                    let valid = name
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !valid {
                        return Err(self.bad(
                            &k,
                            v,
                            "not an environment variable name (the token itself never goes \
                             in the config: put it in that variable)",
                        ));
                    }
                    t.bot_token_env = name.to_string();
                }
                "chat_ids" => {
                    let list = v
                        .as_array()
                        .ok_or_else(|| self.wrong_type(&k, "an array of chat ids", v))?;
                    t.chat_ids = Vec::with_capacity(list.len());
                    for (i, item) in list.iter().enumerate() {
                        match item.as_integer() {
                            Some(id) if id != 0 => t.chat_ids.push(id),
                            _ => {
                                return Err(self.bad(
                                    &format!("{k}[{i}]"),
                                    item,
                                    "not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
                                ));
                            }
                        }
                    }
                }
                "api_url" => {
                    let url = self.string(&k, v)?.trim_end_matches('/');
                    let rest = url
                        .strip_prefix("https://")
                        .or_else(|| url.strip_prefix("http://"));
                    if rest.is_none_or(|r| r.is_empty() || r.contains(char::is_whitespace)) {
                        return Err(self.bad(&k, v, "not an http:// or https:// URL"));
                    }
                    t.api_url = url.to_string();
                }
                "summary" => {
                    t.summary = match self.string(&k, v)? {
                        "on_change" => SummaryMode::OnChange,
                        "always" => SummaryMode::Always,
                        "never" => SummaryMode::Never,
                        _ => return Err(self.bad(&k, v, "expected on_change, always or never")),
                    };
                }
                "quiet_hours" => {
                    let w = Window::parse(self.string(&k, v)?).map_err(|e| self.bad(&k, v, &e))?;
                    t.quiet_hours = Some(w);
                }
                "max_messages_per_day" => {
                    let n = self.integer(&k, v)?;
                    t.max_messages_per_day = u32::try_from(n)
                        .map_err(|_| self.bad(&k, v, "must be 0 (no limit) or more"))?;
                }
                _ => return Err(self.unknown(Some("telegram"), key, TELEGRAM_KEYS)),
            }
        }
        Ok(t)
    }

    fn budget(&self, value: &Value) -> Result<f64, ConfigError> {
        let mut daily = 0.0;
        for (key, v) in self.table("budget", value)? {
            let k = format!("budget.{key}");
            match key.as_str() {
                "daily_usd" => daily = self.money(&k, v)?,
                _ => return Err(self.unknown(Some("budget"), key, BUDGET_KEYS)),
            }
        }
        Ok(daily)
    }

    /// A non-negative amount of money (integer or float).
    fn money(&self, key: &str, value: &Value) -> Result<f64, ConfigError> {
        let n = match value {
            Value::Float(f) => *f,
            Value::Integer(i) => *i as f64,
            other => return Err(self.wrong_type(key, "a number", other)),
        };
        if !n.is_finite() || n < 0.0 {
            return Err(self.bad(key, value, "must be 0 or more"));
        }
        Ok(n)
    }

    /// A non-negative count.
    fn count(&self, key: &str, value: &Value) -> Result<u32, ConfigError> {
        let n = self.integer(key, value)?;
        u32::try_from(n).map_err(|_| self.bad(key, value, "must be 0 or more"))
    }

    fn daemon(&self, value: &Value) -> Result<DaemonConfig, ConfigError> {
        let mut d = DaemonConfig::default();
        for (key, v) in self.table("daemon", value)? {
            let k = format!("daemon.{key}");
            match key.as_str() {
                "every" => {
                    d.every = self.duration(&k, v)?;
                    if let Err(why) = crate::schedule::check_tick_interval(d.every) {
                        return Err(self.bad(&k, v, &why));
                    }
                }
                _ => return Err(self.unknown(Some("daemon"), key, DAEMON_KEYS)),
            }
        }
        Ok(d)
    }

    fn tools(&self, value: &Value) -> Result<BTreeMap<String, ToolConfig>, ConfigError> {
        let table = value
            .as_table()
            .ok_or_else(|| self.wrong_type("tools", "a table", value))?;
        let mut tools = BTreeMap::new();
        for (name, value) in table {
            if !valid_tool_name(name) {
                return Err(self.err(
                    "tools",
                    &format!(
                        "{name:?} is not a valid tool name (a letter or _, then letters, \
                         digits, _, . or -)"
                    ),
                ));
            }
            let prefix = format!("tools.{name}");
            let fields = value
                .as_table()
                .ok_or_else(|| self.wrong_type(&prefix, "a table", value))?;
            let builtin = BUILTIN_TOOLS.contains(&name.as_str());
            let mut tool = ToolConfig::default();
            for (key, value) in fields {
                let k = format!("{prefix}.{key}");
                match key.as_str() {
                    "command" if builtin => {
                        return Err(self.err(
                            &k,
                            &format!("{name} is a built-in tool; give your tool another name"),
                        ));
                    }
                    "command" => {
                        let argv = self.strings(&k, value)?;
                        if argv.first().is_none_or(|p| p.is_empty()) {
                            return Err(self.bad(&k, value, "must start with a program to run"));
                        }
                        tool.command = Some(argv);
                    }
                    "timeout" => tool.timeout = Some(self.duration(&k, value)?),
                    "approval" => {
                        tool.approval = Some(match self.string(&k, value)? {
                            "auto" => Approval::Auto,
                            "ask" => Approval::Ask,
                            "deny" => Approval::Deny,
                            _ => return Err(self.bad(&k, value, "expected auto, ask or deny")),
                        });
                    }
                    "description" => tool.description = Some(self.string(&k, value)?.to_string()),
                    "cooldown" => tool.cooldown = Some(self.duration(&k, value)?),
                    "cost_usd" => tool.cost_usd = Some(self.money(&k, value)?),
                    "max_consecutive_failures" => {
                        tool.max_consecutive_failures = Some(self.count(&k, value)?)
                    }
                    _ => return Err(self.unknown(Some(&prefix), key, TOOL_KEYS)),
                }
            }
            if !builtin && tool.command.is_none() {
                return Err(self.err(
                    &prefix,
                    "missing key \"command\" (a tool of your own needs command = [\"program\", \
                     \"arg\", …])",
                ));
            }
            tools.insert(name.clone(), tool);
        }
        Ok(tools)
    }
}

/// A value as TOML would write it (strings quoted).
fn show(value: &Value) -> String {
    match value {
        Value::Table(_) => "{…}".to_string(),
        other => other.to_string(),
    }
}

/// The known key nearest to a misspelt one, if it is near enough to be a typo.
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Window;
    use chrono::Weekday;
    use std::fs;
    use tempfile::TempDir;

    /// A temp directory laid out as `cwd/`, `home/`, `cfg/` (platform config dir) and `data/`
    /// (platform data dir), with an injected environment.
    struct World {
        dir: TempDir,
        env: Vec<(String, String)>,
        host: Host,
    }

    impl World {
        fn new() -> World {
            let dir = tempfile::tempdir().unwrap();
            for sub in ["cwd", "home", "cfg", "data"] {
                fs::create_dir(dir.path().join(sub)).unwrap();
            }
            let host = Host {
                config_dir: Some(dir.path().join("cfg")),
                data_dir: Some(dir.path().join("data/heartbeat")),
                system_tz: None,
            };
            let home = dir.path().join("home").to_string_lossy().into_owned();
            World {
                dir,
                env: vec![("HOME".into(), home)],
                host,
            }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.dir.path().join(rel)
        }

        fn cwd(&self) -> PathBuf {
            self.path("cwd")
        }

        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.path(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, text).unwrap();
            p
        }

        fn set_env(&mut self, key: &str, value: &str) {
            self.env.retain(|(k, _)| k != key);
            self.env.push((key.into(), value.into()));
        }

        fn load_opts(
            &self,
            config: Option<PathBuf>,
            files: &[&str],
            state_dir: Option<&str>,
        ) -> Result<Config, ConfigError> {
            let env = |k: &str| {
                self.env
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let opts = LoadOptions {
                config,
                files: files.iter().map(PathBuf::from).collect(),
                state_dir: state_dir.map(PathBuf::from),
                cwd: self.cwd(),
                env: &env,
            };
            load_with(&opts, &self.host)
        }

        fn load(&self) -> Result<Config, ConfigError> {
            self.load_opts(None, &[], None)
        }

        /// Write `cwd/heartbeat.toml` and load it.
        fn load_toml(&self, text: &str) -> Result<Config, ConfigError> {
            self.write("cwd/heartbeat.toml", text);
            self.load()
        }

        /// The rendered error for a `cwd/heartbeat.toml` with this text.
        fn error(&self, text: &str) -> String {
            match self.load_toml(text) {
                Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
                Err(e) => e.to_string(),
            }
        }

        fn toml_path(&self) -> String {
            self.path("cwd/heartbeat.toml").display().to_string()
        }
    }

    #[test]
    fn defaults_without_a_config_file() {
        let w = World::new();
        let c = w.load().unwrap();
        assert_eq!(c.source, None);
        assert_eq!(c.files, vec![w.path("cwd/HEARTBEAT.md")]);
        assert_eq!(c.tz(), Tz::UTC);
        assert_eq!(c.active.window, Window::ALWAYS);
        assert_eq!(c.active.days, DaySet::ALL);
        assert_eq!(c.autonomy, Autonomy::Cautious);
        assert_eq!(c.plain_tasks, PlainTasks::Remind);
        assert_eq!(c.state_dir, w.path("data/heartbeat"));
        assert_eq!(c.audit_log, w.path("data/heartbeat/audit.jsonl"));
        assert_eq!(c.approval_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(c.stuck_after, Duration::from_secs(30 * 60));
        assert_eq!(c.concurrency, 1);
        assert_eq!(c.max_tasks_per_run, 50);
        assert!(c.tools.is_empty());
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn every_key_is_read() {
        let w = World::new();
        let c = w
            .load_toml(
                r#"
files = ["a.md", "b.md"]
timezone = "Europe/Berlin"
active_hours = "22:00-06:00"
active_days = ["mon", "Tuesday", "FRI"]
autonomy = "full"
plain_tasks = "agent"
state_dir = "state"
audit_log = "logs/audit.jsonl"
approval_ttl = "2h"
stuck_after = "90s"
concurrency = 1
max_tasks_per_run = 0

[tools.agent]
command = ["claude", "-p", "{prompt}"]
timeout = "10m"
approval = "auto"
description = "the agent"

[tools.shell]
approval = "deny"
timeout = "1m"
"#,
            )
            .unwrap();
        assert_eq!(c.source, Some(w.path("cwd/heartbeat.toml")));
        assert_eq!(c.files, vec![w.path("cwd/a.md"), w.path("cwd/b.md")]);
        assert_eq!(c.tz(), chrono_tz::Europe::Berlin);
        assert_eq!(
            c.active.window,
            Window {
                start: 1320,
                end: 360
            }
        );
        let days = DaySet::EMPTY
            .with(Weekday::Mon)
            .with(Weekday::Tue)
            .with(Weekday::Fri);
        assert_eq!(c.active.days, days);
        assert_eq!(c.autonomy, Autonomy::Full);
        assert_eq!(c.plain_tasks, PlainTasks::Agent);
        assert_eq!(c.state_dir, w.path("cwd/state"));
        assert_eq!(c.audit_log, w.path("cwd/state/logs/audit.jsonl"));
        assert_eq!(c.approval_ttl, Duration::from_secs(7200));
        assert_eq!(c.stuck_after, Duration::from_secs(90));
        assert_eq!(c.max_tasks_per_run, 0);
        assert_eq!(
            c.tools["agent"],
            ToolConfig {
                command: Some(vec!["claude".into(), "-p".into(), "{prompt}".into()]),
                timeout: Some(Duration::from_secs(600)),
                approval: Some(Approval::Auto),
                description: Some("the agent".into()),
                ..ToolConfig::default()
            }
        );
        assert_eq!(
            c.tools["shell"],
            ToolConfig {
                command: None,
                timeout: Some(Duration::from_secs(60)),
                approval: Some(Approval::Deny),
                description: None,
                ..ToolConfig::default()
            }
        );
    }

    // ---- lookup ----

    #[test]
    fn lookup_prefers_the_config_flag() {
        let mut w = World::new();
        let flag = w.write("elsewhere/flag.toml", "autonomy = \"full\"");
        let env = w.write("elsewhere/env.toml", "autonomy = \"observe\"");
        w.set_env("HEARTBEAT_CONFIG", &env.to_string_lossy());
        w.write("cwd/heartbeat.toml", "autonomy = \"observe\"");
        let c = w.load_opts(Some(flag.clone()), &[], None).unwrap();
        assert_eq!(c.source, Some(flag));
        assert_eq!(c.autonomy, Autonomy::Full);
    }

    #[test]
    fn lookup_config_flag_is_relative_to_cwd_and_must_exist() {
        let w = World::new();
        w.write("cwd/conf/h.toml", "autonomy = \"full\"");
        let c = w
            .load_opts(Some(PathBuf::from("conf/h.toml")), &[], None)
            .unwrap();
        assert_eq!(c.source, Some(w.path("cwd/conf/h.toml")));
        // Relative paths inside it are relative to its directory.
        assert_eq!(c.files, vec![w.path("cwd/conf/HEARTBEAT.md")]);

        w.write("cwd/heartbeat.toml", "");
        let e = w
            .load_opts(Some(PathBuf::from("missing.toml")), &[], None)
            .unwrap_err();
        assert_eq!(e.file, Some(w.path("cwd/missing.toml")));
        assert!(
            e.to_string().starts_with(&format!(
                "{}: cannot read config file: ",
                w.path("cwd/missing.toml").display()
            )),
            "{e}"
        );
    }

    #[test]
    fn lookup_env_variable_second() {
        let mut w = World::new();
        let env = w.write("elsewhere/env.toml", "autonomy = \"observe\"");
        w.write("cwd/heartbeat.toml", "autonomy = \"full\"");
        w.set_env("HEARTBEAT_CONFIG", &env.to_string_lossy());
        let c = w.load().unwrap();
        assert_eq!(c.source, Some(env));
        assert_eq!(c.autonomy, Autonomy::Observe);

        w.set_env("HEARTBEAT_CONFIG", "/nonexistent/heartbeat/x.toml");
        let e = w.load().unwrap_err().to_string();
        assert!(
            e.starts_with(
                "/nonexistent/heartbeat/x.toml: cannot read config file named by \
                 $HEARTBEAT_CONFIG: "
            ),
            "{e}"
        );
    }

    #[test]
    fn lookup_next_to_the_first_heartbeat_file() {
        let w = World::new();
        w.write("cwd/proj/heartbeat.toml", "autonomy = \"full\"");
        w.write("cwd/heartbeat.toml", "autonomy = \"observe\"");
        let c = w
            .load_opts(None, &["proj/HEARTBEAT.md", "HEARTBEAT.md"], None)
            .unwrap();
        assert_eq!(c.source, Some(w.path("cwd/proj/heartbeat.toml")));
        // --file overrides `files` and is relative to cwd, not to the config.
        assert_eq!(
            c.files,
            vec![w.path("cwd/proj/HEARTBEAT.md"), w.path("cwd/HEARTBEAT.md")]
        );
        // Without --file: cwd/HEARTBEAT.md's directory.
        let c = w.load().unwrap();
        assert_eq!(c.source, Some(w.path("cwd/heartbeat.toml")));
        assert_eq!(c.autonomy, Autonomy::Observe);
    }

    #[test]
    fn lookup_platform_config_dir_last() {
        let w = World::new();
        w.write("cfg/heartbeat/config.toml", "autonomy = \"observe\"");
        let c = w.load().unwrap();
        assert_eq!(c.source, Some(w.path("cfg/heartbeat/config.toml")));
        assert_eq!(c.autonomy, Autonomy::Observe);
        w.write("cwd/heartbeat.toml", "autonomy = \"full\"");
        assert_eq!(w.load().unwrap().autonomy, Autonomy::Full);
    }

    #[test]
    fn lookup_finds_nothing() {
        let mut w = World::new();
        w.host.config_dir = None;
        w.set_env("HEARTBEAT_CONFIG", "");
        assert_eq!(w.load().unwrap().source, None);
    }

    // ---- timezone ----

    #[test]
    fn timezone_defaults_to_tz_then_system_then_utc() {
        let mut w = World::new();
        w.host.system_tz = Some(chrono_tz::Asia::Tokyo);
        assert_eq!(w.load().unwrap().tz(), chrono_tz::Asia::Tokyo);
        for (tz, want) in [
            ("Europe/Berlin", chrono_tz::Europe::Berlin),
            (":America/New_York", chrono_tz::America::New_York),
            ("/usr/share/zoneinfo/Asia/Kolkata", chrono_tz::Asia::Kolkata),
            (":/usr/share/zoneinfo/UTC", Tz::UTC),
        ] {
            w.set_env("TZ", tz);
            assert_eq!(w.load().unwrap().tz(), want, "{tz}");
        }
        w.set_env("TZ", "");
        assert_eq!(w.load().unwrap().tz(), chrono_tz::Asia::Tokyo);
        w.host.system_tz = None;
        assert_eq!(w.load().unwrap().tz(), Tz::UTC);
    }

    #[test]
    fn invalid_tz_is_an_error_unless_timezone_is_set() {
        let mut w = World::new();
        w.set_env("TZ", "Mars/Olympus");
        let e = w.load().unwrap_err().to_string();
        assert_eq!(
            e,
            "$TZ: \"Mars/Olympus\": not a known IANA time zone name; set timezone = \
             \"Area/City\" in the config file (or fix TZ)"
        );
        let c = w.load_toml("timezone = \"Asia/Kolkata\"").unwrap();
        assert_eq!(c.tz(), chrono_tz::Asia::Kolkata);
    }

    #[test]
    fn zone_names_from_paths() {
        assert_eq!(zone_name("Europe/Berlin"), Some("Europe/Berlin"));
        assert_eq!(zone_name(":Europe/Berlin"), Some("Europe/Berlin"));
        assert_eq!(
            zone_name("/usr/share/zoneinfo/Europe/Berlin"),
            Some("Europe/Berlin")
        );
        assert_eq!(
            zone_name("../usr/share/zoneinfo/America/New_York"),
            Some("America/New_York")
        );
        assert_eq!(zone_name(":"), None);
    }

    // ---- errors ----

    #[test]
    fn value_errors_name_file_key_and_value() {
        let w = World::new();
        let f = w.toml_path();
        let cases: &[(&str, &str)] = &[
            (
                r#"active_hours = "8am-22:00""#,
                r#"active_hours: "8am-22:00": "8am" is not a time (expected HH:MM)"#,
            ),
            (
                r#"active_hours = "08:00-24:30""#,
                r#"active_hours: "08:00-24:30": 24:30 is not a valid time"#,
            ),
            (
                r#"active_hours = "25:00-06:00""#,
                r#"active_hours: "25:00-06:00": 25:00 is not a valid time"#,
            ),
            (
                r#"active_hours = "09:00-09:00""#,
                r#"active_hours: "09:00-09:00": "09:00-09:00" is an empty window (start equals end); use "00:00-24:00" for always"#,
            ),
            (
                r#"timezone = "Europe/Berln""#,
                r#"timezone: "Europe/Berln": not a known IANA time zone name (such as "Europe/Berlin")"#,
            ),
            (
                r#"active_days = ["mon", "funday"]"#,
                r#"active_days: "funday": not a day (expected mon … sun or monday … sunday)"#,
            ),
            (
                r#"active_days = []"#,
                r#"active_days: []: lists no days; leave the key out for every day"#,
            ),
            (
                r#"active_days = "mon""#,
                r#"active_days: expected an array of day names, found string "mon""#,
            ),
            (
                r#"active_days = ["mon", 2]"#,
                r#"active_days[1]: expected a string, found integer 2"#,
            ),
            (
                r#"autonomy = "yolo""#,
                r#"autonomy: "yolo": expected observe, cautious or full"#,
            ),
            (
                r#"plain_tasks = "ignore""#,
                r#"plain_tasks: "ignore": expected remind or agent"#,
            ),
            (
                r#"plain_tasks = "agent""#,
                r#"plain_tasks: "agent" needs a [tools.agent] table with a command"#,
            ),
            (
                r#"approval_ttl = 5"#,
                r#"approval_ttl: expected a string, found integer 5"#,
            ),
            (
                r#"approval_ttl = "0s""#,
                r#"approval_ttl: "0s": must be longer than zero"#,
            ),
            (
                r#"stuck_after = "soon""#,
                r#"stuck_after: "soon" is not a duration: expected number at 0"#,
            ),
            (
                r#"concurrency = 65"#,
                r#"concurrency: 65: must be between 1 and 64"#,
            ),
            (
                r#"concurrency = 0"#,
                r#"concurrency: 0: must be between 1 and 64"#,
            ),
            (
                r#"concurrency = "1""#,
                r#"concurrency: expected an integer, found string "1""#,
            ),
            (
                r#"max_tasks_per_run = -1"#,
                r#"max_tasks_per_run: -1: must be 0 (no cap) or more"#,
            ),
            (
                r#"max_tasks_per_run = 1.5"#,
                r#"max_tasks_per_run: expected an integer, found float 1.5"#,
            ),
            (r#"files = []"#, r#"files: []: lists no files"#),
            (
                r#"files = "HEARTBEAT.md""#,
                r#"files: expected an array of strings, found string "HEARTBEAT.md""#,
            ),
            (
                r#"files = ["a.md", true]"#,
                r#"files[1]: expected a string, found boolean true"#,
            ),
            (r#"state_dir = """#, r#"state_dir: "": is empty"#),
            (
                r#"state_dir = ["x"]"#,
                r#"state_dir: expected a string, found array ["x"]"#,
            ),
            (
                r#"audit_log = {path = "x"}"#,
                r#"audit_log: expected a string, found a table"#,
            ),
            (
                "actve_hours = \"08:00-22:00\"",
                r#"unknown key "actve_hours" (did you mean "active_hours"?)"#,
            ),
            ("colour = \"red\"", r#"unknown key "colour""#),
            (
                "[tool.backup]\ncommand = [\"x\"]",
                r#"unknown key "tool" (did you mean "tools"?)"#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(w.error(text), format!("{f}: {want}"), "{text}");
        }
    }

    #[test]
    fn tool_errors_name_the_dotted_key() {
        let w = World::new();
        let f = w.toml_path();
        let cases: &[(&str, &str)] = &[
            (
                "[tools.backup]\ncommand = [\"restic\"]\ntimeout = \"5 minutes please\"",
                r#"tools.backup.timeout: "5 minutes please" is not a duration: expected number at 10"#,
            ),
            (
                "[tools.backup]\ncommand = [\"restic\"]\ntimeout = \"5 parsecs\"",
                r#"tools.backup.timeout: "5 parsecs" is not a duration: unknown time unit "parsecs", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations)"#,
            ),
            (
                "[tools.backup]\ncommand = [\"restic\"]\ntimeout = \"0m\"",
                r#"tools.backup.timeout: "0m": must be longer than zero"#,
            ),
            (
                "[tools.backup]\ncomand = [\"restic\"]",
                r#"tools.backup: unknown key "comand" (did you mean "command"?)"#,
            ),
            (
                "[tools.backup]\ntimeout = \"5m\"",
                r#"tools.backup: missing key "command" (a tool of your own needs command = ["program", "arg", …])"#,
            ),
            (
                "[tools.agent]\napproval = \"auto\"",
                r#"tools.agent: missing key "command" (a tool of your own needs command = ["program", "arg", …])"#,
            ),
            (
                "[tools.backup]\ncommand = []",
                r#"tools.backup.command: []: must start with a program to run"#,
            ),
            (
                "[tools.backup]\ncommand = [\"\"]",
                r#"tools.backup.command: [""]: must start with a program to run"#,
            ),
            (
                "[tools.backup]\ncommand = \"restic backup\"",
                r#"tools.backup.command: expected an array of strings, found string "restic backup""#,
            ),
            (
                "[tools.backup]\ncommand = [\"restic\", 3]",
                r#"tools.backup.command[1]: expected a string, found integer 3"#,
            ),
            (
                "[tools.backup]\ncommand = [\"restic\"]\napproval = \"maybe\"",
                r#"tools.backup.approval: "maybe": expected auto, ask or deny"#,
            ),
            (
                "[tools.backup]\ncommand = [\"restic\"]\ndescription = 1",
                r#"tools.backup.description: expected a string, found integer 1"#,
            ),
            (
                "[tools.shell]\ncommand = [\"bash\"]",
                r#"tools.shell.command: shell is a built-in tool; give your tool another name"#,
            ),
            (
                "[tools.notify]\ncommand = [\"notify-send\"]",
                r#"tools.notify.command: notify is a built-in tool; give your tool another name"#,
            ),
            (
                "[tools.\"my tool\"]\ncommand = [\"x\"]",
                r#"tools: "my tool" is not a valid tool name (a letter or _, then letters, digits, _, . or -)"#,
            ),
            (
                "[tools.1st]\ncommand = [\"x\"]",
                r#"tools: "1st" is not a valid tool name (a letter or _, then letters, digits, _, . or -)"#,
            ),
            ("tools = 3", r#"tools: expected a table, found integer 3"#),
            (
                "[tools]\nbackup = \"restic\"",
                r#"tools.backup: expected a table, found string "restic""#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(w.error(text), format!("{f}: {want}"), "{text}");
        }
    }

    #[test]
    fn tool_names_and_builtins_accepted() {
        let w = World::new();
        let c = w
            .load_toml(
                "[tools._my-tool.v2]\ncommand = [\"x\"]\n[tools.http]\napproval = \"auto\"\n\
                 [tools.log]\ndescription = \"d\"",
            )
            .unwrap_err();
        // `[tools._my-tool.v2]` is a nested table in TOML; quote it to use dots.
        assert!(c.to_string().contains("tools._my-tool"), "{c}");
        let c = w
            .load_toml(
                "[tools.\"_my-tool.v2\"]\ncommand = [\"x\"]\n[tools.http]\napproval = \"auto\"",
            )
            .unwrap();
        assert!(c.tools.contains_key("_my-tool.v2"));
        assert_eq!(c.tools["http"].approval, Some(Approval::Auto));
    }

    #[test]
    fn telegram_and_daemon_tables() {
        let w = World::new();
        let cfg = w.load_toml("").unwrap();
        assert_eq!(cfg.telegram, None);
        assert_eq!(cfg.daemon.every, Duration::from_secs(1800));
        let cfg = w
            .load_toml(
                "[telegram]\nbot_token_env = \"MY_BOT\"\nchat_ids = [123, -100200]\n\
                 api_url = \"http://127.0.0.1:8081/\"\nsummary = \"always\"\n\
                 quiet_hours = \"22:00-07:00\"\nmax_messages_per_day = 5\n\
                 [daemon]\nevery = \"10m\"\n",
            )
            .unwrap();
        let t = cfg.telegram.unwrap();
        assert_eq!(t.bot_token_env, "MY_BOT");
        assert_eq!(t.chat_ids, vec![123, -100200]);
        assert_eq!(t.api_url, "http://127.0.0.1:8081");
        assert_eq!(t.summary, SummaryMode::Always);
        assert_eq!(t.quiet_hours, Some(Window::parse("22:00-07:00").unwrap()));
        assert_eq!(t.max_messages_per_day, 5);
        assert_eq!(cfg.daemon.every, Duration::from_secs(600));
        // An empty [telegram] takes every default.
        assert_eq!(
            w.load_toml("[telegram]\n").unwrap().telegram,
            Some(TelegramConfig::default())
        );

        let f = w.toml_path();
        let cases: &[(&str, &str)] = &[
            (
                "[telegram]\nbot_token_env = \"123:ABC\"",
                "telegram.bot_token_env: \"123:ABC\": not an environment variable name",
            ),
            (
                "[telegram]\nchat_ids = [\"me\"]",
                "telegram.chat_ids[0]: \"me\": not a chat id",
            ),
            (
                "[telegram]\napi_url = \"api.telegram.org\"",
                "telegram.api_url: \"api.telegram.org\": not an http:// or https:// URL",
            ),
            (
                "[telegram]\nsummary = \"sometimes\"",
                "telegram.summary: \"sometimes\": expected on_change, always or never",
            ),
            (
                "[telegram]\nquiet_hours = \"10pm-7am\"",
                "telegram.quiet_hours: \"10pm-7am\"",
            ),
            (
                "[telegram]\nmax_messages_per_day = -1",
                "telegram.max_messages_per_day: -1: must be 0",
            ),
            (
                "[telegram]\nchat_id = [1]",
                "telegram: unknown key \"chat_id\" (did you mean \"chat_ids\"?)",
            ),
            ("[daemon]\nevery = \"0s\"", "daemon.every"),
            ("[daemon]\nevry = \"1m\"", "daemon: unknown key \"evry\""),
            ("telegram = 5", "telegram: expected a table"),
        ];
        for (text, want) in cases {
            let err = w.error(text);
            assert!(err.starts_with(&format!("{f}: {want}")), "{text}: {err}");
        }
    }

    #[test]
    fn guardrail_keys() {
        let w = World::new();
        let cfg = w.load_toml("").unwrap();
        assert_eq!((cfg.daily_usd, cfg.max_consecutive_failures), (0.0, 3));
        let cfg = w
            .load_toml(
                "max_consecutive_failures = 5\n[budget]\ndaily_usd = 2\n\
                 [tools.backup]\ncommand = [\"x\"]\ncooldown = \"1h\"\ncost_usd = 0.25\n\
                 max_consecutive_failures = 0\n",
            )
            .unwrap();
        assert_eq!((cfg.daily_usd, cfg.max_consecutive_failures), (2.0, 5));
        let b = &cfg.tools["backup"];
        assert_eq!(b.cooldown, Some(Duration::from_secs(3600)));
        assert_eq!(b.cost_usd, Some(0.25));
        assert_eq!(b.max_consecutive_failures, Some(0));

        let f = w.toml_path();
        let cases: &[(&str, &str)] = &[
            (
                "max_consecutive_failures = -1",
                "max_consecutive_failures: -1: must be 0 or more",
            ),
            (
                "[budget]\ndaily_usd = -5.0",
                "budget.daily_usd: -5.0: must be 0 or more",
            ),
            (
                "[budget]\ndaily_usd = \"5\"",
                "budget.daily_usd: expected a number",
            ),
            (
                "[budget]\ndayly_usd = 5",
                "budget: unknown key \"dayly_usd\"",
            ),
            (
                "[tools.backup]\ncommand = [\"x\"]\ncooldown = \"soon\"",
                "tools.backup.cooldown: \"soon\"",
            ),
            (
                "[tools.backup]\ncommand = [\"x\"]\ncost_usd = -1",
                "tools.backup.cost_usd: -1: must be 0 or more",
            ),
        ];
        for (text, want) in cases {
            let err = w.error(text);
            assert!(err.starts_with(&format!("{f}: {want}")), "{text}: {err}");
        }
    }

    #[test]
    fn toml_syntax_errors_carry_file_and_position() {
        let w = World::new();
        let e = w.error("autonomy = \"full\"\nactive_hours = 08:00-22:00\n");
        assert!(
            e.starts_with(&format!("{}: TOML parse error at line 2", w.toml_path())),
            "{e}"
        );
    }

    #[test]
    fn unreadable_config_names_the_file_and_the_io_error() {
        let w = World::new();
        fs::create_dir(w.path("cwd/heartbeat.toml")).unwrap();
        let e = w.load().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: cannot read config file: ", w.toml_path())),
            "{e}"
        );
        let bad = w.path("cwd/latin1.toml");
        fs::write(&bad, b"autonomy = \"caf\xe9\"").unwrap();
        let e = w.load_opts(Some(bad.clone()), &[], None).unwrap_err();
        assert_eq!(e.file, Some(bad));
    }

    #[test]
    fn a_bom_is_accepted() {
        let w = World::new();
        let c = w.load_toml("\u{feff}autonomy = \"observe\"").unwrap();
        assert_eq!(c.autonomy, Autonomy::Observe);
    }

    // ---- files ----

    #[test]
    fn globs_expand_sorted_in_order_without_duplicates() {
        let w = World::new();
        for f in [
            "cwd/notes/b.md",
            "cwd/notes/a.md",
            "cwd/notes/c.txt",
            "cwd/notes/.hidden.md",
        ] {
            w.write(f, "");
        }
        fs::create_dir(w.path("cwd/notes/dir.md")).unwrap();
        let c = w
            .load_toml(
                r#"files = ["notes/b.md", "notes/*.md", "./missing.md", "notes/a.md", "none/*.md"]"#,
            )
            .unwrap();
        assert_eq!(
            c.files,
            vec![
                w.path("cwd/notes/b.md"),
                w.path("cwd/notes/a.md"),
                w.path("cwd/missing.md"),
            ]
        );
        assert_eq!(
            c.warnings,
            vec![format!(
                "{}: files: \"none/*.md\" matches no file",
                w.toml_path()
            )]
        );
    }

    #[test]
    fn files_relative_to_the_config_home_and_absolute() {
        let w = World::new();
        w.write("home/notes/x.md", "");
        w.write("elsewhere/h.toml", "");
        let abs = w.path("abs/HEARTBEAT.md");
        let text = format!(
            "files = [\"HEARTBEAT.md\", \"~/notes/*.md\", \"~/todo.md\", {:?}]",
            abs.to_string_lossy()
        );
        let conf = w.write("elsewhere/h.toml", &text);
        let c = w.load_opts(Some(conf), &[], None).unwrap();
        assert_eq!(
            c.files,
            vec![
                w.path("elsewhere/HEARTBEAT.md"),
                w.path("home/notes/x.md"),
                w.path("home/todo.md"),
                abs,
            ]
        );
    }

    #[test]
    fn glob_metacharacters_in_the_base_directory_are_literal() {
        let w = World::new();
        w.write("cwd/[proj]/a.md", "");
        w.write("cwd/p/a.md", "");
        let conf = w.write("cwd/[proj]/heartbeat.toml", "files = [\"*.md\"]");
        let c = w.load_opts(Some(conf), &[], None).unwrap();
        assert_eq!(c.files, vec![w.path("cwd/[proj]/a.md")]);
    }

    #[test]
    fn file_flag_overrides_and_globs_too() {
        let w = World::new();
        w.write("cwd/t/one.md", "");
        w.write("cwd/t/two.md", "");
        w.write("cwd/heartbeat.toml", "files = [\"ignored.md\"]");
        let c = w
            .load_opts(None, &["t/*.md", "t/one.md", "x/*.md"], None)
            .unwrap();
        assert_eq!(
            c.files,
            vec![w.path("cwd/t/one.md"), w.path("cwd/t/two.md")]
        );
        assert_eq!(
            c.warnings,
            vec!["--file: \"x/*.md\" matches no file".to_string()]
        );
    }

    #[test]
    fn bad_glob_and_unset_home_are_errors() {
        let mut w = World::new();
        let e = w.error(r#"files = ["notes/[a.md"]"#);
        assert!(
            e.starts_with(&format!(
                "{}: files: \"notes/[a.md\": not a valid glob pattern: ",
                w.toml_path()
            )),
            "{e}"
        );
        w.env.clear();
        let e = w.error(r#"files = ["~/HEARTBEAT.md"]"#);
        assert_eq!(
            e,
            format!(
                "{}: files: \"~/HEARTBEAT.md\": cannot expand ~: HOME is not set",
                w.toml_path()
            )
        );
    }

    // ---- state_dir and audit_log ----

    #[test]
    fn state_dir_paths() {
        let w = World::new();
        let c = w.load_toml("state_dir = \"~/state\"").unwrap();
        assert_eq!(c.state_dir, w.path("home/state"));
        assert_eq!(c.audit_log, w.path("home/state/audit.jsonl"));

        let conf = w.write(
            "elsewhere/h.toml",
            "state_dir = \"./s\"\naudit_log = \"/var/log/hb.jsonl\"",
        );
        let c = w.load_opts(Some(conf.clone()), &[], None).unwrap();
        assert_eq!(c.state_dir, w.path("elsewhere/s"));
        assert_eq!(c.audit_log, PathBuf::from("/var/log/hb.jsonl"));

        // --state-dir is relative to cwd and wins.
        let c = w.load_opts(Some(conf), &[], Some("flag-state")).unwrap();
        assert_eq!(c.state_dir, w.path("cwd/flag-state"));
        assert_eq!(c.audit_log, PathBuf::from("/var/log/hb.jsonl"));
    }

    #[test]
    fn state_dir_default_falls_back_to_home_then_errors() {
        let mut w = World::new();
        w.host.data_dir = None;
        let c = w.load().unwrap();
        assert_eq!(c.state_dir, w.path("home/.local/share/heartbeat"));
        w.env.clear();
        let e = w.load().unwrap_err();
        assert_eq!(e.key.as_deref(), Some("state_dir"));
        assert!(e.to_string().contains("--state-dir"), "{e}");
        // --state-dir needs no default.
        let c = w.load_opts(None, &[], Some("/tmp/hb")).unwrap();
        assert_eq!(c.state_dir, PathBuf::from("/tmp/hb"));
    }
}
