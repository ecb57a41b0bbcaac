//! Finding the config file, reading it, and turning it into a validated [`Config`].
//!
//! Invariants:
//! - The file is parsed once into a spanned document that `de` reads [`File`] from. Values
//!   with a rule of their own are checked as they are read (`types`); a reading error comes
//!   as its kind and place (`de::Error`), and `translate` writes the message from them: the
//!   dotted key, the value as written and its line and column in the same document.
//! - The rules that join two keys (a tool's name and the MCP servers, `plain_tasks` and
//!   `[tools.agent]`, a built-in tool and `command`) and the paths are here, with the key in
//!   each message; no value is used before it is checked.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use chrono_tz::Tz;
use toml::de::{DeTable, DeValue};

use super::channel::{ChannelConfig, ChannelKind, EmailConfig, MailTransport, NtfyConfig, Target};
use super::de::{self, Kind, Seg, Spanned, Want, dotted};
use super::file::{
    ChannelFile, EventName, File, FleetFile, KindName, MailKind, McpFile, MonitorFile,
    MonitorKindName, RetentionFile, TelegramFile, ToolFile,
};
use super::types::{Human, SecretVar};
use super::{
    Approval, Config, ConfigError, DaemonConfig, FleetConfig, FleetTick, LoadOptions,
    McpServerConfig, McpTransport, MonitorConfig, MonitorKind, PlainTasks, Retention, RetryConfig,
    TelegramConfig, ToolConfig,
};
use crate::model::is_builtin_tool as is_builtin;
use crate::model::{DaySet, MessageKind};
use crate::schedule::{ActiveHours, Window};

/// The retry keys of a `[tools.NAME]`, `[mcp.NAME]` or `[mcp.NAME.tools.TOOL]` table as
/// written: the three tables spell them the same (docs/reference.md#retries).
macro_rules! retry_keys {
    ($table:expr) => {
        RetryConfig {
            retries: $table.retries.map(|n| n.0),
            backoff: $table.retry_backoff.map(|h| h.0),
            on: $table.retry_on.clone(),
            idempotent: $table.idempotent,
        }
    };
}

/// Find, read and validate the config (docs/reference.md#config), detecting the host's directories
/// and zone.
pub(crate) fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
    let cfg = load_from(opts, &Host::detect())?;
    // In a fleet, task ids are relative to the config's directory from here on.
    if cfg.fleet.is_some()
        && let Some(dir) = cfg.source.as_deref().and_then(Path::parent)
    {
        crate::markdown::use_fleet_ids(dir);
    }
    Ok(cfg)
}

/// [`load`] with the host facts given.
pub(super) fn load_from(opts: &LoadOptions, host: &Host) -> Result<Config, ConfigError> {
    let source = find(opts, host)?;
    let (src, raw) = match &source {
        Some(path) => {
            let src = Source::read(path)?;
            let raw = src.parse()?;
            (src, raw)
        }
        None => (Source::none(), File::default()),
    };
    let base = match &source {
        Some(path) => path
            .parent()
            .map_or_else(|| opts.cwd.clone(), Path::to_path_buf),
        None => opts.cwd.clone(),
    };
    src.build(raw, &base, opts, host)
}

/// For the read-only commands when the config does not load (docs/reference.md#config): every
/// default, with the state dir from `--state-dir`, else the broken file's own `state_dir = "…"`
/// line when one can be read, else the default one. None when even that cannot be found.
pub(crate) fn fallback(opts: &LoadOptions, broken: &ConfigError) -> Option<Config> {
    fallback_from(opts, broken, &Host::detect())
}

pub(super) fn fallback_from(
    opts: &LoadOptions,
    broken: &ConfigError,
    host: &Host,
) -> Option<Config> {
    let mut opts = LoadOptions {
        config: None,
        files: opts.files.clone(),
        state_dir: opts.state_dir.clone(),
        cwd: opts.cwd.clone(),
        env: opts.env,
    };
    let mut base = opts.cwd.clone();
    if opts.state_dir.is_none()
        && let Some(file) = &broken.file
    {
        base = file.parent().map_or(base, Path::to_path_buf);
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let line = text.lines().find_map(|l| {
            let rest = l
                .trim()
                .strip_prefix("state_dir")?
                .trim_start()
                .strip_prefix('=')?;
            let value = rest.trim().strip_prefix('"')?;
            Some(value[..value.find('"')?].to_string())
        });
        if let Some(dir) = line {
            opts.state_dir = Some(expand_path(&dir, &base, opts.env).ok()?);
        }
    }
    let src = Source::none();
    src.build(File::default(), &base, &opts, host).ok()
}

/// The file's text, for errors: the value as written and its line and column.
struct Source {
    path: Option<PathBuf>,
    text: String,
}

impl Source {
    fn none() -> Source {
        Source {
            path: None,
            text: String::new(),
        }
    }

    fn read(path: &Path) -> Result<Source, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: Some(path.to_path_buf()),
            at: None,
            key: None,
            message: format!("cannot read config file: {e}"),
        })?;
        let text = match text.strip_prefix('\u{feff}') {
            Some(rest) => rest.to_string(),
            None => text,
        };
        Ok(Source {
            path: Some(path.to_path_buf()),
            text,
        })
    }

    /// The document as serde types; a syntax error keeps toml's own message, which already
    /// shows the line and column.
    fn parse(&self) -> Result<File, ConfigError> {
        let doc = DeTable::parse(&self.text).map_err(|e| ConfigError {
            file: self.path.clone(),
            at: None,
            key: None,
            message: e.to_string().trim_end().to_string(),
        })?;
        de::from_document(doc).map_err(|e| self.translate(e))
    }

    /// Where `[table.key]` names its key, for an error about a name that serde read well.
    fn key_span(&self, table: &str, key: &str) -> Option<Range<usize>> {
        let doc = DeTable::parse(&self.text).ok()?;
        let (_, value) = doc.get_ref().iter().find(|(k, _)| k.get_ref() == table)?;
        let DeValue::Table(keys) = value.get_ref() else {
            return None;
        };
        keys.iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(k, _)| k.span())
    }

    fn err(&self, key: &str, span: Option<Range<usize>>, message: &str) -> ConfigError {
        ConfigError {
            file: self.path.clone(),
            at: span.map(|s| self.line_column(s.start)),
            key: Some(key.to_string()),
            message: message.to_string(),
        }
    }

    /// `key: <value as written>: why`.
    fn bad(&self, key: &str, span: Range<usize>, why: &str) -> ConfigError {
        let message = format!("{}: {why}", self.shown(&span));
        self.err(key, Some(span), &message)
    }

    /// The value at `span` as TOML writes it (`'x'` shows as `"x"`), so that a message reads
    /// the same however the value was quoted.
    fn shown(&self, span: &Range<usize>) -> String {
        let text = self.text.get(span.clone()).unwrap_or("").trim();
        match text.parse::<toml::Value>() {
            Ok(toml::Value::Table(_)) => "{…}".to_string(),
            Ok(value) => value.to_string(),
            Err(_) => text.to_string(),
        }
    }

    fn line_column(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (
            before.matches('\n').count() + 1,
            before[line_start..].chars().count() + 1,
        )
    }

    /// Raw values to a `Config`, with every check serde cannot make.
    fn build(
        &self,
        raw: File,
        base: &Path,
        opts: &LoadOptions,
        host: &Host,
    ) -> Result<Config, ConfigError> {
        let window = raw.active_hours.map_or(Window::ALWAYS, |h| h.0);
        let days = raw.active_days.map_or(DaySet::ALL, |d| d.0);
        let state_dir = match &raw.state_dir {
            Some(s) => Some(
                expand_path(&s.get_ref().0, base, opts.env)
                    .map_err(|e| self.bad("state_dir", s.span(), &e))?,
            ),
            None => None,
        };
        let concurrency = raw.concurrency.map_or(1, |n| n.0);
        let max_tasks_per_run = raw.max_tasks_per_run.map_or(50, |n| n.0);
        let max_consecutive_failures = raw.max_consecutive_failures.map_or(3, |n| n.0);
        let mut tools = BTreeMap::new();
        for (name, tool) in &raw.tools {
            tools.insert(name.0.clone(), self.tool(&name.0, tool)?);
        }
        let mut mcp = BTreeMap::new();
        for (name, server) in &raw.mcp {
            mcp.insert(name.0.clone(), self.mcp(&name.0, server, base)?);
        }
        for name in raw.tools.keys() {
            if let Some((server, _)) = name.0.split_once('.')
                && mcp.contains_key(server)
            {
                return Err(self.err(
                    "tools",
                    self.key_span("tools", &name.0),
                    &format!(
                        "{:?}: @{server}.… names a tool of the MCP server [mcp.{server}]; \
                         give your tool a name that does not start with \"{server}.\"",
                        name.0
                    ),
                ));
            }
        }
        let telegram = match &raw.telegram {
            Some(t) => Some(self.telegram(t, base, opts)?),
            None => None,
        };
        let mut channels = Vec::new();
        for (name, channel) in &raw.channels {
            channels.push(self.channel(&name.0, channel)?);
        }
        let monitors = self.monitors(&raw.monitors)?;
        let fleet = match &raw.fleet {
            Some(f) => Some(self.fleet(f, opts, host)?),
            None => None,
        };
        let daemon = match raw.daemon.as_ref().and_then(|d| d.every) {
            Some(every) => DaemonConfig { every: every.0 },
            None => DaemonConfig::default(),
        };
        let retention = match &raw.retention {
            Some(r) => self.retention(r)?,
            None => Retention::default(),
        };
        let daily_usd = raw
            .budget
            .as_ref()
            .and_then(|b| b.daily_usd)
            .map_or(0.0, |usd| usd.0);
        let plain_tasks = raw
            .plain_tasks
            .as_ref()
            .map_or(PlainTasks::Remind, |p| *p.get_ref());
        if let Some(p) = &raw.plain_tasks
            && *p.get_ref() == PlainTasks::Agent
            && tools
                .get("agent")
                .is_none_or(|t: &ToolConfig| t.command.is_none())
        {
            return Err(self.err(
                "plain_tasks",
                Some(p.span()),
                "\"agent\" needs a [tools.agent] table with a command",
            ));
        }

        let tz = match raw.timezone {
            Some(zone) => zone.0,
            None => default_tz(opts.env, host)?,
        };

        let mut warnings = Vec::new();
        let files = if opts.files.is_empty() {
            let label = match &self.path {
                Some(f) => format!("{}: files", f.display()),
                None => "files".to_string(),
            };
            let (list, span) = match &raw.files {
                Some(f) => (f.get_ref().0.clone(), Some(f.span())),
                None => (vec!["HEARTBEAT.md".to_string()], None),
            };
            expand_files(&list, base, opts.env, &label, &mut warnings)
                .map_err(|e| self.err("files", span, &e))?
        } else {
            let flag_error = |message: String| ConfigError {
                file: None,
                at: None,
                key: Some("--file".into()),
                message,
            };
            // Read as UTF-8 or refused: a name changed to make it so would name another file
            // (or none), and the audit log and JSON name files in UTF-8.
            let raw = opts
                .files
                .iter()
                .map(|p| {
                    p.to_str().map(str::to_string).ok_or_else(|| {
                        flag_error(format!(
                            "{:?}: the path is not valid UTF-8; rename the file or link to it \
                             under a UTF-8 name",
                            p.display()
                        ))
                    })
                })
                .collect::<Result<Vec<String>, ConfigError>>()?;
            expand_files(&raw, &opts.cwd, opts.env, "--file", &mut warnings).map_err(flag_error)?
        };

        let state_dir = match (&opts.state_dir, state_dir) {
            (Some(dir), _) => normalize(&opts.cwd.join(dir)),
            (None, Some(dir)) => dir,
            (None, None) => default_state_dir(opts.env, host)?,
        };
        let (audit_log, audit_span) = match &raw.audit_log {
            Some(s) => (s.get_ref().0.as_str(), Some(s.span())),
            None => ("audit.jsonl", None),
        };
        let audit_log = expand_path(audit_log, &state_dir, opts.env).map_err(|e| {
            self.err(
                "audit_log",
                audit_span.clone(),
                &format!("{audit_log:?}: {e}"),
            )
        })?;
        // A FIFO would hang the run while it holds the lock, and /dev/null would lose every
        // line: only a regular file (or one not there yet) can hold the log.
        if std::fs::metadata(&audit_log).is_ok_and(|m| !m.is_file()) {
            let shown = audit_log.display().to_string();
            return Err(self.err(
                "audit_log",
                audit_span,
                &format!(
                    "{shown:?}: not a regular file (a directory, FIFO or device cannot hold the \
                     audit log)"
                ),
            ));
        }

        let metrics_textfile = match raw.metrics.as_ref().and_then(|m| m.textfile.as_ref()) {
            Some(t) => Some(
                expand_path(&t.get_ref().0, base, opts.env)
                    .map_err(|e| self.bad("metrics.textfile", t.span(), &e))?,
            ),
            None => None,
        };

        let duration =
            |h: Option<Human>, default: u64| h.map_or(Duration::from_secs(default), |h| h.0);
        Ok(Config {
            source: self.path.clone(),
            files,
            active: ActiveHours { tz, window, days },
            autonomy: raw.autonomy.unwrap_or(super::Autonomy::Cautious),
            plain_tasks,
            state_dir,
            audit_log,
            approval_ttl: duration(raw.approval_ttl, 24 * 3600),
            concurrency,
            max_tasks_per_run,
            stuck_after: duration(raw.stuck_after, 30 * 60),
            max_lateness: raw.max_lateness.map(|h| h.0),
            tools,
            mcp,
            agent_may_approve: raw
                .mcp_server
                .as_ref()
                .and_then(|m| m.allow_approve)
                .unwrap_or(false),
            telegram,
            channels,
            monitors,
            metrics_textfile,
            daemon,
            retention,
            daily_usd,
            max_consecutive_failures,
            fleet,
            warnings,
        })
    }

    fn tool(&self, name_str: &str, tool: &Spanned<ToolFile>) -> Result<ToolConfig, ConfigError> {
        let prefix = format!("tools.{name_str}");
        let builtin = is_builtin(name_str);
        let raw = tool.get_ref();
        let command = match &raw.command {
            Some(c) if builtin => {
                return Err(self.err(
                    &format!("{prefix}.command"),
                    Some(c.span()),
                    &format!("{name_str} is a built-in tool; give your tool another name"),
                ));
            }
            Some(c) => Some(c.get_ref().0.clone()),
            None if builtin => None,
            None => {
                return Err(self.err(
                    &prefix,
                    Some(tool.span()),
                    "missing key \"command\" (a tool of your own needs command = [\"program\", \
                     \"arg\", …])",
                ));
            }
        };
        Ok(ToolConfig {
            command,
            timeout: raw.timeout.map(|h| h.0),
            approval: raw.approval,
            description: raw.description.clone(),
            cooldown: raw.cooldown.map(|h| h.0),
            cost_usd: raw.cost_usd.map(|usd| usd.0),
            max_consecutive_failures: raw.max_consecutive_failures.map(|n| n.0),
            monitor_url_env: raw.monitor_url_env.as_ref().map(|v| v.0.clone()),
            max_lateness: raw.max_lateness.map(|h| h.0),
            retry: retry_keys!(raw),
            hosts: raw
                .hosts
                .as_ref()
                .map(|h| h.iter().map(|n| n.0.clone()).collect()),
        })
    }

    /// `[fleet]`: the URL's variable is required and must be set (an unset one would make
    /// every run fail closed, which is a mistake in the config, not an outage); the node
    /// defaults to the host name.
    fn fleet(
        &self,
        table: &Spanned<FleetFile>,
        opts: &LoadOptions,
        host: &Host,
    ) -> Result<FleetConfig, ConfigError> {
        let raw = table.get_ref();
        let Some(var) = &raw.postgres_url_env else {
            return Err(self.err(
                "fleet.postgres_url_env",
                Some(table.span()),
                "missing key \"postgres_url_env\": the variable that holds the PostgreSQL URL \
                 the fleet shares",
            ));
        };
        let url_env = var.get_ref().0.clone();
        // Set in the environment, or taken from it already by this process (a daemon or
        // `heartbeat mcp` loading its config again).
        let set = (opts.env)(&url_env)
            .filter(|v| !v.trim().is_empty())
            .or_else(|| crate::redact::taken_env(&url_env));
        if set.is_none() {
            return Err(self.err(
                "fleet.postgres_url_env",
                Some(var.span()),
                &format!(
                    "${url_env} is not set: export the fleet's PostgreSQL URL in it (a \
                     postgres:// URL, or host=… dbname=… pairs)"
                ),
            ));
        }
        let node = match &raw.node {
            Some(n) => n.0.clone(),
            None => {
                let name = host.hostname.clone();
                if !super::is_node_name(&name) {
                    return Err(self.err(
                        "fleet.node",
                        Some(table.span()),
                        &format!(
                            "the host name {name:?} is not a node name (1 to 64 letters, \
                             digits, ., _ or -): set node = \"…\""
                        ),
                    ));
                }
                name
            }
        };
        Ok(FleetConfig {
            url_env,
            node,
            lease: raw.lease.map_or(Duration::from_secs(30), |l| l.0),
            every: raw.every.map_or(Duration::from_secs(300), |e| e.0),
            tick: raw.tick.unwrap_or(FleetTick::Runner),
        })
    }

    /// `[[monitors]]`: each one's kind, the keys of that kind (and no other kind's), its name
    /// (written, else `<kind>-<n>`), names unique.
    fn monitors(&self, raw: &[Spanned<MonitorFile>]) -> Result<Vec<MonitorConfig>, ConfigError> {
        let mut monitors: Vec<MonitorConfig> = Vec::new();
        for (i, table) in raw.iter().enumerate() {
            let m = table.get_ref();
            let key = |k: &str| format!("monitors[{i}].{k}");
            let Some(kind) = m.kind else {
                return Err(self.err(
                    &key("kind"),
                    Some(table.span()),
                    "missing key \"kind\" (healthchecks, uptime_kuma or url)",
                ));
            };
            let (word, allowed): (&str, &[&str]) = match kind {
                MonitorKindName::Healthchecks => ("healthchecks", &["url_env"]),
                MonitorKindName::UptimeKuma => ("uptime_kuma", &["url_env"]),
                MonitorKindName::Url => {
                    ("url", &["start_url_env", "success_url_env", "fail_url_env"])
                }
            };
            let written = [
                ("url_env", &m.url_env),
                ("start_url_env", &m.start_url_env),
                ("success_url_env", &m.success_url_env),
                ("fail_url_env", &m.fail_url_env),
            ];
            for (k, v) in &written {
                if let Some(v) = v
                    && !allowed.contains(k)
                {
                    return Err(self.err(
                        &key(k),
                        Some(v.span()),
                        &format!(
                            "not a key of a {word} monitor (its own keys: {})",
                            allowed.join(", ")
                        ),
                    ));
                }
            }
            let var = |v: &Option<Spanned<SecretVar>>| v.as_ref().map(|v| v.get_ref().0.clone());
            let kind = match kind {
                MonitorKindName::Healthchecks | MonitorKindName::UptimeKuma => {
                    let Some(url_env) = var(&m.url_env) else {
                        return Err(self.err(
                            &key("url_env"),
                            Some(table.span()),
                            "missing key \"url_env\": the variable that holds the ping URL",
                        ));
                    };
                    if kind == MonitorKindName::Healthchecks {
                        MonitorKind::Healthchecks { url_env }
                    } else {
                        MonitorKind::UptimeKuma { url_env }
                    }
                }
                MonitorKindName::Url => {
                    let kind = MonitorKind::Url {
                        start_url_env: var(&m.start_url_env),
                        success_url_env: var(&m.success_url_env),
                        fail_url_env: var(&m.fail_url_env),
                    };
                    if kind.secret_vars().is_empty() {
                        return Err(self.err(
                            &format!("monitors[{i}]"),
                            Some(table.span()),
                            "a url monitor needs start_url_env, success_url_env or fail_url_env",
                        ));
                    }
                    kind
                }
            };
            let name = match &m.name {
                Some(n) => n.get_ref().0.clone(),
                None => format!("{word}-{}", i + 1),
            };
            if monitors.iter().any(|other| other.name == name) {
                return Err(self.err(
                    &key("name"),
                    Some(m.name.as_ref().map_or(table.span(), Spanned::span)),
                    &format!("{name:?}: another monitor has this name"),
                ));
            }
            monitors.push(MonitorConfig { name, kind });
        }
        Ok(monitors)
    }

    fn mcp(
        &self,
        name_str: &str,
        server: &Spanned<McpFile>,
        base: &Path,
    ) -> Result<McpServerConfig, ConfigError> {
        let prefix = format!("mcp.{name_str}");
        let raw = server.get_ref();
        let transport = match (&raw.command, &raw.url) {
            (Some(c), None) => {
                if raw.headers_env.is_some() {
                    return Err(self.err(
                        &format!("{prefix}.headers_env"),
                        Some(server.span()),
                        "only a server with a url takes headers",
                    ));
                }
                McpTransport::Stdio(c.get_ref().0.clone())
            }
            (None, Some(url)) => {
                let mut headers_env = Vec::new();
                for (header, var) in raw.headers_env.iter().flatten() {
                    headers_env.push((header.clone(), var.get_ref().0.clone()));
                }
                McpTransport::Http {
                    url: url.0.clone(),
                    headers_env,
                }
            }
            (Some(c), Some(_)) => {
                return Err(self.err(
                    &prefix,
                    Some(c.span()),
                    "has both command and url: a server is started (command) or reached (url)",
                ));
            }
            (None, None) => {
                return Err(self.err(
                    &prefix,
                    Some(server.span()),
                    "missing key \"command\" (a server started as a process: command = \
                     [\"program\", \"arg\", …]) or \"url\" (a remote server)",
                ));
            }
        };
        let env = raw
            .env
            .iter()
            .flatten()
            .map(|v| v.get_ref().0.clone())
            .collect();
        let cwd = raw.cwd.as_ref().map(|c| normalize(&base.join(&c.0)));
        let mut tools = BTreeMap::new();
        for (tool, t) in &raw.tools {
            let t = t.get_ref();
            tools.insert(
                tool.clone(),
                ToolConfig {
                    command: None,
                    description: None,
                    timeout: t.timeout.map(|h| h.0),
                    approval: t.approval,
                    cooldown: t.cooldown.map(|h| h.0),
                    cost_usd: t.cost_usd.map(|usd| usd.0),
                    max_consecutive_failures: t.max_consecutive_failures.map(|n| n.0),
                    monitor_url_env: None,
                    max_lateness: None,
                    retry: retry_keys!(t),
                    hosts: None,
                },
            );
        }
        Ok(McpServerConfig {
            transport,
            env,
            cwd,
            timeout: raw.timeout.map_or(Duration::from_secs(5 * 60), |h| h.0),
            startup_timeout: raw.startup_timeout.map_or(Duration::from_secs(30), |h| h.0),
            approval: raw.approval.unwrap_or(Approval::Ask),
            trust_annotations: raw.trust_annotations.unwrap_or(false),
            cost_usd: raw.cost_usd.map(|usd| usd.0),
            max_lateness: raw.max_lateness.map(|h| h.0),
            retry: retry_keys!(raw),
            tools,
        })
    }

    fn retention(&self, raw: &RetentionFile) -> Result<Retention, ConfigError> {
        let mut r = Retention::default();
        if let Some(h) = raw.history {
            r.history = h.0;
        }
        if let Some(size) = raw.audit_max_size {
            r.audit_max_size = size.0;
        }
        if let Some(keep) = raw.audit_keep {
            r.audit_keep = keep.0;
        }
        Ok(r)
    }

    fn telegram(
        &self,
        raw: &TelegramFile,
        base: &Path,
        opts: &LoadOptions,
    ) -> Result<TelegramConfig, ConfigError> {
        let mut t = TelegramConfig::default();
        if let Some(name) = &raw.bot_token_env {
            t.bot_token_env = name.0.clone();
        }
        // The token from a file instead of a variable (docs/reference.md#telegram): one of
        // the two, read now, once, and refused when others may read it.
        if let Some(file) = &raw.bot_token_file {
            const KEY: &str = "telegram.bot_token_file";
            if raw.bot_token_env.is_some() {
                return Err(self.bad(
                    KEY,
                    file.span(),
                    "bot_token_env is set too: give the token by one of them, the variable or \
                     the file",
                ));
            }
            let path = expand_path(&file.get_ref().0, base, opts.env)
                .map_err(|e| self.bad(KEY, file.span(), &e))?;
            crate::redact::take_file(&path).map_err(|e| self.bad(KEY, file.span(), &e))?;
            t.bot_token_file = Some(path);
        }
        if let Some(ids) = &raw.chat_ids {
            t.chat_ids = ids.iter().map(|id| id.0).collect();
        }
        if let Some(url) = &raw.api_url {
            t.api_url = url.0.clone();
        }
        if let Some(summary) = raw.summary {
            t.summary = summary;
        }
        t.quiet_hours = raw.quiet_hours.map(|h| h.0);
        if let Some(n) = raw.max_messages_per_day {
            t.max_messages_per_day = n.0;
        }
        if let Some(events) = &raw.events {
            t.events = events_of(events);
        }
        Ok(t)
    }

    /// `[channels.NAME]`: its kind, the keys of that kind (and no other kind's), and the
    /// rules that join keys (`approvals` needs `reply_topic_env`, an e-mail needs `to`).
    fn channel(
        &self,
        name: &str,
        table: &Spanned<ChannelFile>,
    ) -> Result<ChannelConfig, ConfigError> {
        let raw = table.get_ref();
        let prefix = format!("channels.{name}");
        let key = |k: &str| format!("{prefix}.{k}");
        let Some(kind) = raw.kind else {
            return Err(self.err(
                &key("kind"),
                Some(table.span()),
                "missing key \"kind\": how the channel is reached (ntfy, slack, discord, webhook, \
                 email or command)",
            ));
        };
        let allowed: &[&str] = match kind {
            KindName::Ntfy => &[
                "server",
                "topic_env",
                "token_env",
                "approvals",
                "reply_topic_env",
                "tags",
            ],
            KindName::Slack | KindName::Discord => &["url_env"],
            KindName::Webhook => &["url", "url_env", "secret_env"],
            KindName::Email => &["transport", "smtp_url_env", "sendmail", "from", "to"],
            KindName::Command => &["command"],
        };
        let kind_word = |k: KindName| match k {
            KindName::Ntfy => "ntfy",
            KindName::Slack => "slack",
            KindName::Discord => "discord",
            KindName::Webhook => "webhook",
            KindName::Email => "email",
            KindName::Command => "command",
        };
        for (k, span) in raw.kind_keys() {
            if !allowed.contains(&k) {
                return Err(self.err(
                    &key(k),
                    Some(span),
                    &format!(
                        "not a key of a {} channel (its own keys: {})",
                        kind_word(kind),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let missing = |k: &str, why: &str| {
            self.err(
                &key(k),
                Some(table.span()),
                &format!("missing key {k:?}: {why}"),
            )
        };
        let var = |v: &Option<Spanned<SecretVar>>| v.as_ref().map(|v| v.get_ref().0.clone());
        let url = |what: &str| -> Result<Target, ConfigError> {
            match (&raw.url, &raw.url_env) {
                (Some(u), None) => Ok(Target::Url(u.get_ref().0.clone())),
                (None, Some(v)) => Ok(Target::Env(v.get_ref().0.clone())),
                (Some(u), Some(_)) => Err(self.err(
                    &key("url"),
                    Some(u.span()),
                    "has both url and url_env: write one",
                )),
                (None, None) => Err(missing("url_env", what)),
            }
        };
        let channel_kind = match kind {
            KindName::Ntfy => {
                let Some(topic_env) = var(&raw.topic_env) else {
                    return Err(missing(
                        "topic_env",
                        "the variable that holds the topic (on a public server the topic \
                         name is the secret)",
                    ));
                };
                let approvals = raw.approvals.as_ref().is_some_and(|a| *a.get_ref());
                let reply_topic_env = var(&raw.reply_topic_env);
                if approvals && reply_topic_env.is_none() {
                    return Err(self.err(
                        &key("reply_topic_env"),
                        raw.approvals.as_ref().map(Spanned::span),
                        "approvals = true needs reply_topic_env: the variable that holds the \
                         topic the Approve and Deny buttons answer on",
                    ));
                }
                ChannelKind::Ntfy(NtfyConfig {
                    server: raw
                        .server
                        .as_ref()
                        .map_or_else(|| "https://ntfy.sh".to_string(), |s| s.get_ref().0.clone()),
                    topic_env,
                    token_env: var(&raw.token_env),
                    approvals,
                    reply_topic_env,
                    tags: raw
                        .tags
                        .as_ref()
                        .map(|t| t.get_ref().clone())
                        .unwrap_or_default(),
                })
            }
            KindName::Slack => ChannelKind::Slack {
                url: url("the variable that holds the incoming webhook's URL")?,
            },
            KindName::Discord => ChannelKind::Discord {
                url: url("the variable that holds the Discord webhook's URL")?,
            },
            KindName::Webhook => ChannelKind::Webhook {
                url: url("the URL to POST to (url), or the variable that holds it (url_env)")?,
                secret_env: var(&raw.secret_env),
            },
            KindName::Email => {
                let transport = match raw.transport.as_ref().map(|t| *t.get_ref()) {
                    None | Some(MailKind::Smtp) => {
                        if raw.sendmail.is_some() {
                            return Err(self.err(
                                &key("sendmail"),
                                raw.sendmail.as_ref().map(Spanned::span),
                                "only transport = \"sendmail\" runs sendmail",
                            ));
                        }
                        let Some(url_env) = var(&raw.smtp_url_env) else {
                            return Err(missing(
                                "smtp_url_env",
                                "the variable that holds the SMTP server's URL \
                                 (smtps://user:pass@host or smtp://user:pass@host:587), or \
                                 transport = \"sendmail\"",
                            ));
                        };
                        MailTransport::Smtp { url_env }
                    }
                    Some(MailKind::Sendmail) => {
                        if let Some(v) = &raw.smtp_url_env {
                            return Err(self.err(
                                &key("smtp_url_env"),
                                Some(v.span()),
                                "transport = \"sendmail\" takes no SMTP URL",
                            ));
                        }
                        MailTransport::Sendmail {
                            program: raw.sendmail.as_ref().map_or_else(
                                || "/usr/sbin/sendmail".to_string(),
                                |p| p.get_ref().clone(),
                            ),
                        }
                    }
                };
                let Some(from) = raw.from.as_ref() else {
                    return Err(missing("from", "the sender's address"));
                };
                let to = raw
                    .to
                    .as_ref()
                    .map(|t| t.get_ref().clone())
                    .unwrap_or_default();
                if to.is_empty() {
                    return Err(match &raw.to {
                        Some(t) => {
                            self.err(&key("to"), Some(t.span()), "names nobody: add an address")
                        }
                        None => missing("to", "the list of addresses to write to"),
                    });
                }
                for (k, address, span) in std::iter::once(("from", from.get_ref(), from.span()))
                    .chain(to.iter().map(|a| {
                        (
                            "to",
                            a,
                            raw.to.as_ref().map(Spanned::span).unwrap_or_default(),
                        )
                    }))
                {
                    if !mailbox(address) {
                        return Err(self.bad(
                            &key(k),
                            span,
                            &format!("{address:?} is not an e-mail address"),
                        ));
                    }
                }
                ChannelKind::Email(EmailConfig {
                    transport,
                    from: from.get_ref().clone(),
                    to,
                })
            }
            KindName::Command => match &raw.command {
                Some(c) => ChannelKind::Command {
                    argv: c.get_ref().0.clone(),
                },
                None => {
                    return Err(missing(
                        "command",
                        "the program to run, as an argv array: [\"/path/to/program\", \"arg\"]",
                    ));
                }
            },
        };
        Ok(ChannelConfig {
            name: name.to_string(),
            events: match &raw.events {
                Some(events) => events_of(events),
                None => MessageKind::DEFAULT.to_vec(),
            },
            quiet_hours: raw.quiet_hours.map(|h| h.0),
            max_messages_per_day: raw.max_messages_per_day.map_or(20, |n| n.0),
            timeout: raw.timeout.map_or(Duration::from_secs(10), |h| h.0),
            kind: channel_kind,
        })
    }

    /// A reading error in our words: the dotted key, the value as written, what was
    /// expected, and for an unknown key the nearest known one.
    fn translate(&self, e: de::Error) -> ConfigError {
        let Some(place) = e.place.as_deref() else {
            return ConfigError {
                file: self.path.clone(),
                at: None,
                key: None,
                message: e.to_string(),
            };
        };
        let error = |path: &[Seg], message: String| ConfigError {
            file: self.path.clone(),
            at: Some(self.line_column(place.span.start)),
            key: (!path.is_empty()).then(|| dotted(path)),
            message,
        };
        let path = place.path.as_slice();
        let found = || match place.found {
            Some(kind) => format!("{kind} {}", self.shown(&place.span)),
            None => "a table".to_string(),
        };
        match &e.kind {
            // Placed at the key, under the table it is in.
            Kind::UnknownField { field, expected } => {
                let mut text = format!("unknown key {field:?}");
                if let Some(near) = crate::text::did_you_mean(field, expected) {
                    text.push_str(&format!(" (did you mean {near:?}?)"));
                } else if let Some(home) = home_of(field) {
                    text.push_str(&match home {
                        "" => " (a top-level key: every key after a [table] line belongs to \
                               that table, so put it above the first one)"
                            .to_string(),
                        home => format!(" (it belongs in [{home}])"),
                    });
                }
                error(path, text)
            }
            // An enum written as a table names its variant by its one key.
            Kind::UnknownVariant { .. } if place.on_key => {
                error(path, "expected a string, found a table".into())
            }
            Kind::UnknownVariant { expected, .. } => error(
                path,
                format!("{}: expected {}", self.shown(&place.span), one_of(expected)),
            ),
            Kind::InvalidType { expected } => {
                let expected = describe(place.want, path, expected);
                error(path, format!("expected {expected}, found {}", found()))
            }
            // A value's own rule (a type of `types`) said no: an error about an item of a
            // list or table of names names that key.
            Kind::Custom(message) => {
                let key = match path.split_last() {
                    Some((_, list)) if !place.on_key && named_by_list(list) => list,
                    _ => path,
                };
                error(key, message.clone())
            }
            Kind::InvalidLength { .. } | Kind::MissingField(_) => error(path, e.to_string()),
        }
    }
}

/// The kinds an `events` list names, in its order, each once.
fn events_of(events: &[Spanned<EventName>]) -> Vec<MessageKind> {
    let mut kinds = Vec::new();
    for e in events {
        let kind = match e.get_ref() {
            EventName::Approval => MessageKind::Approval,
            EventName::Reminder => MessageKind::Reminder,
            EventName::Failure => MessageKind::Failure,
            EventName::Trip => MessageKind::Trip,
            EventName::Missed => MessageKind::Missed,
            EventName::Notify => MessageKind::Notify,
            EventName::Budget => MessageKind::Budget,
            EventName::Agent => MessageKind::Agent,
            EventName::Summary => MessageKind::Summary,
            EventName::Test => MessageKind::Test,
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// Whether `s` looks like an e-mail address (`local@domain`, no spaces or angle brackets):
/// the mail server has the last word.
fn mailbox(s: &str) -> bool {
    s.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && !domain.is_empty()
            && !s.chars().any(|c| c.is_whitespace() || "<>,;\"".contains(c))
    })
}

/// Whether `list` is a list or table whose items an error names by the list's key, not the
/// item's place: `active_days: "funday": …`, `mcp.gh.env: "1BAD": …` (where
/// `telegram.chat_ids[1]` names the place). Matched on the whole path: a tool or server may
/// itself be named `env`.
fn named_by_list(list: &[Seg]) -> bool {
    let keys: Option<Vec<&str>> = list
        .iter()
        .map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
        .collect();
    matches!(
        keys.as_deref(),
        Some(["active_days"] | ["mcp", _, "env" | "headers_env"])
    )
}

/// What a type asked for, in our words; `serde_words` is the type's own description, for a
/// type that read any value.
fn describe<'e>(want: Want, path: &[Seg], serde_words: &'e str) -> &'e str {
    match want {
        Want::Array => match path.iter().rev().find_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        }) {
            Some("active_days") => "an array of day names",
            Some("chat_ids") => "an array of chat ids",
            Some("command") if matches!(path.first(), Some(Seg::Key(k)) if k == "channels") => {
                "an argv array (the program, then its arguments; no shell)"
            }
            _ => "an array of strings",
        },
        Want::String => "a string",
        Want::Integer => "an integer",
        Want::Number => "a number",
        Want::Boolean => "a boolean",
        Want::Table => "a table",
        Want::Any => serde_words,
    }
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The tables whose keys have one place ("" is the top level), for an unknown key written
/// in the wrong one: a top-level key below `[telegram]` is read as a Telegram key.
pub(super) const HOMES: &[(&str, &[&str])] = &[
    (
        "",
        &[
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
            "max_consecutive_failures",
            "stuck_after",
            "max_lateness",
        ],
    ),
    ("budget", &["daily_usd"]),
    ("daemon", &["every"]),
    (
        "telegram",
        &[
            "bot_token_env",
            "bot_token_file",
            "chat_ids",
            "api_url",
            "summary",
            "quiet_hours",
            "max_messages_per_day",
            "events",
        ],
    ),
    ("retention", &["history", "audit_max_size", "audit_keep"]),
    ("mcp_server", &["allow_approve"]),
    ("metrics", &["textfile"]),
    (
        "fleet",
        &["postgres_url_env", "node", "lease", "every", "tick"],
    ),
];

/// Where a key that is unknown where it was written belongs.
fn home_of(key: &str) -> Option<&'static str> {
    HOMES
        .iter()
        .find(|(_, keys)| keys.contains(&key))
        .map(|(home, _)| *home)
}

/// Facts about the machine that `load` would otherwise read from the system: the platform
/// config and data directories and the system time zone. `load` detects them; tests inject
/// them (`load_from`) so that nothing depends on the real home directory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Host {
    /// The platform config dir (`directories::BaseDirs::config_dir`), e.g. `~/.config`.
    pub config_dir: Option<PathBuf>,
    /// heartbeat's data dir (`ProjectDirs::from("", "", "heartbeat").data_dir()`).
    pub data_dir: Option<PathBuf>,
    /// The system zone (`/etc/timezone`, or the `/etc/localtime` link target).
    pub system_tz: Option<Tz>,
    /// The host name: a fleet node's name unless `[fleet] node` says otherwise.
    pub hostname: String,
}

impl Host {
    pub(crate) fn detect() -> Host {
        Host {
            config_dir: directories::BaseDirs::new().map(|b| b.config_dir().to_path_buf()),
            data_dir: directories::ProjectDirs::from("", "", "heartbeat")
                .map(|p| p.data_dir().to_path_buf()),
            system_tz: system_tz(),
            hostname: crate::sys::hostname(),
        }
    }
}

fn system_tz() -> Option<Tz> {
    if let Ok(s) = std::fs::read_to_string("/etc/timezone")
        && let Some(tz) = zone_name(s.trim()).and_then(|n| n.parse().ok())
    {
        return Some(tz);
    }
    linked_zone(Path::new("/etc/localtime"))
}

/// The zone a symbolic link into `zoneinfo` points to.
fn linked_zone(link: &Path) -> Option<Tz> {
    let target = std::fs::read_link(link).ok()?;
    zone_name(&target.to_string_lossy())?.parse().ok()
}

/// The zone of a `$TZ` that names a file linking to one: `:/etc/localtime` (which systemd
/// and many servers set, and which means the system zone) or another link into `zoneinfo`.
fn zone_of_link(raw: &str, host: &Host) -> Option<Tz> {
    let path = Path::new(raw.strip_prefix(':').unwrap_or(raw).trim());
    if !path.is_absolute() {
        return None;
    }
    if path == Path::new("/etc/localtime") {
        return host.system_tz;
    }
    linked_zone(path)
}

/// `Europe/Berlin`, `:Europe/Berlin` or `/usr/share/zoneinfo/Europe/Berlin` → `Europe/Berlin`.
pub(super) fn zone_name(s: &str) -> Option<&str> {
    let s = s.strip_prefix(':').unwrap_or(s).trim();
    let s = match s.find("zoneinfo/") {
        Some(i) => &s[i + "zoneinfo/".len()..],
        None => s,
    };
    (!s.is_empty()).then_some(s)
}

/// The config file, first match wins; None when there is none (all defaults).
fn find(opts: &LoadOptions, host: &Host) -> Result<Option<PathBuf>, ConfigError> {
    let must_exist = |path: PathBuf, how: &str| {
        let path = normalize(&opts.cwd.join(path));
        match std::fs::metadata(&path) {
            Ok(_) => Ok(Some(path)),
            Err(e) => Err(ConfigError {
                file: Some(path),
                at: None,
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

fn default_tz(env: &dyn Fn(&str) -> Option<String>, host: &Host) -> Result<Tz, ConfigError> {
    if let Some(raw) = env("TZ").filter(|s| !s.trim().is_empty()) {
        return zone_name(&raw)
            .and_then(|n| n.parse::<Tz>().ok())
            .or_else(|| zone_of_link(&raw, host))
            .ok_or_else(|| ConfigError {
                file: None,
                at: None,
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
            at: None,
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
    let mut named: Vec<PathBuf> = Vec::new();
    for entry in raw {
        let (prefix, rest) = split_home(entry, base, env).map_err(|e| format!("{entry:?}: {e}"))?;
        let literal = normalize(&prefix.join(rest));
        if !has_glob_meta(rest) || literal.exists() {
            if named.contains(&literal) {
                warnings.push(format!(
                    "{label}: {} is named twice; it is read once",
                    literal.display()
                ));
            }
            named.push(literal.clone());
            push(literal, &mut out);
            continue;
        }
        let mut pattern = glob::Pattern::escape(&prefix.to_string_lossy());
        if !pattern.is_empty() && !pattern.ends_with('/') {
            pattern.push('/');
        }
        pattern.push_str(rest);
        // Hidden files are left out below, not by `require_literal_leading_dot`: the glob
        // crate panics on that option when a directory holds a name that is not UTF-8.
        let options = glob::MatchOptions::new();
        let hidden_asked = rest.split('/').any(|c| c.starts_with('.'));
        let paths = glob::glob_with(&pattern, options)
            .map_err(|e| format!("{entry:?}: not a valid glob pattern: {e}"))?;
        let mut matches = Vec::new();
        for found in paths {
            match found {
                // A glob never goes through a symlinked directory: one pointing up would
                // reach the same files again and again.
                Ok(p)
                    if !p.is_dir()
                        && !through_dir_symlink(&prefix, &p)
                        && (hidden_asked || !hidden_below(&prefix, &p)) =>
                {
                    matches.push(normalize(&p))
                }
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
    // The same file through two paths (a symlink, a second pattern) is read once: its tasks
    // would otherwise run twice.
    let mut seen: Vec<(PathBuf, PathBuf)> = Vec::new();
    out.retain(|p| {
        let Ok(real) = std::fs::canonicalize(p) else {
            return true;
        };
        if let Some((first, _)) = seen.iter().find(|(_, r)| *r == real) {
            warnings.push(format!(
                "{label}: {} and {} are the same file; it is read once",
                first.display(),
                p.display()
            ));
            return false;
        }
        seen.push((p.clone(), real));
        true
    });
    Ok(out)
}

/// Whether `path` is, or is inside, a hidden file or directory below `prefix` (`.git/…`,
/// `.#notes.md`): a glob reaches those only when its pattern names a dot.
fn hidden_below(prefix: &Path, path: &Path) -> bool {
    path.strip_prefix(prefix)
        .unwrap_or(path)
        .components()
        .any(|c| c.as_os_str().as_encoded_bytes().starts_with(b"."))
}

/// Whether `path` (a glob match under `prefix`) passes through a symbolic link to a
/// directory below `prefix`.
fn through_dir_symlink(prefix: &Path, path: &Path) -> bool {
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == prefix || !d.starts_with(prefix) || d.as_os_str().is_empty() {
            return false;
        }
        if std::fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_symlink()) {
            return true;
        }
        dir = d.parent();
    }
    false
}
