//! The config's secret variables (docs/reference.md#redaction): which they are, taken out of
//! the environment into the process's [`Secrets`]. Here, above `config` and `mcp` whose rules
//! it reads; the redaction itself is [`crate::redact`], below every sink.

use crate::config::{Config, McpTransport};
use crate::mcp::PASSED_ENV;
use crate::redact::{MIN_SECRET, Secrets, take_env};

impl Secrets {
    /// The secrets a command works with: the config's token variable, taken from the
    /// environment (see [`take_env`]), with every secret this process took before (a
    /// daemon whose reloaded config names another variable still hides the old token).
    pub(crate) fn from_config(cfg: &Config) -> Secrets {
        for name in secret_vars(cfg) {
            take_env(name);
        }
        Secrets::taken()
    }
}

/// The variables whose values are secrets: the Telegram token's, every channel's and
/// monitor's `*_env`, each tool's `monitor_url_env`, the fleet's `postgres_url_env`, and MCP servers' `env` and
/// `headers_env`. Not the variables every server gets anyway (`PATH`, `HOME`, `LANG`, `TZ`),
/// even when an `env` names them: taken, they would leave every tool without them, and
/// their values (`/home/me`) would be cut out of every path shown.
pub(crate) fn secret_vars(cfg: &Config) -> Vec<&str> {
    let mut names: Vec<&str> = cfg
        .telegram
        .iter()
        .map(|t| t.bot_token_env.as_str())
        .collect();
    for channel in &cfg.channels {
        names.extend(channel.kind.secret_vars());
    }
    for monitor in &cfg.monitors {
        names.extend(monitor.kind.secret_vars());
    }
    names.extend(
        cfg.tools
            .values()
            .filter_map(|t| t.monitor_url_env.as_deref()),
    );
    names.extend(cfg.fleet.iter().map(|f| f.url_env.as_str()));
    for server in cfg.mcp.values() {
        names.extend(
            server
                .env
                .iter()
                .map(String::as_str)
                .filter(|name| !PASSED_ENV.contains(name)),
        );
        if let McpTransport::Http { headers_env, .. } = &server.transport {
            names.extend(headers_env.iter().map(|(_, name)| name.as_str()));
        }
    }
    names
}

/// The config's secret variables whose value is too short to be replaced inside other text
/// ([`MIN_SECRET`]), for `check` to warn about. Takes them ([`take_env`]).
pub(crate) fn short_secrets(cfg: &Config) -> Vec<String> {
    let mut short: Vec<String> = secret_vars(cfg)
        .into_iter()
        .filter(|name| take_env(name).is_some_and(|v| v.chars().count() < MIN_SECRET))
        .map(str::to_string)
        .collect();
    short.sort();
    short.dedup();
    short
}
