//! The config's values as types, each checked as it is read, so that a value that exists is
//! a valid one.
//!
//! Invariants:
//! - Each error reads `<value as TOML writes it>: <why>` (a name reads `"<name>" is …`);
//!   the loader puts the file, line, column and dotted key in front of it.
//! - Only rules about one value live here; rules that join two keys live in `load`.
//! - Each type has a `TryFrom` from what the file holds (`#[serde(try_from)]`); the reader
//!   (`de`) places its error at the value it was read from, an item of an array too. A size
//!   and a chat id are read from any value, to show a wrong one as written; an amount reads
//!   any number itself.

use std::time::Duration;

use chrono::Weekday;
use chrono_tz::Tz;
use serde::Deserialize;

use crate::model::DaySet;
use crate::model::is_builtin_tool as is_builtin;
use crate::schedule::{Window, parse_day};

/// A string as TOML writes it (`'x'` shows as `"x"`), so that a message reads the same
/// however the value was quoted.
fn shown(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Any value as TOML writes it; a table as `{…}`.
fn shown_value(value: &toml::Value) -> String {
    match value {
        toml::Value::Table(_) => "{…}".to_string(),
        other => other.to_string(),
    }
}

/// A humantime duration (`90s`, `10m`, `6h`, `1d`), longer than zero and at most
/// [`LONGEST`].
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Human(pub Duration);

/// 100 years (humantime's `100y`): longer would be no guardrail, and a time computed from it
/// (a cooldown's next due time) could pass what RFC 3339 can write.
const LONGEST: Duration = Duration::from_secs(100 * 31_557_600);

impl TryFrom<String> for Human {
    type Error = String;

    fn try_from(s: String) -> Result<Human, String> {
        let d = humantime::parse_duration(s.trim())
            .map_err(|e| format!("{} is not a duration: {e}", shown(&s)))?;
        if d.is_zero() {
            return Err(format!("{}: must be longer than zero", shown(&s)));
        }
        if d > LONGEST {
            return Err(format!("{}: must be at most 100 years", shown(&s)));
        }
        Ok(Human(d))
    }
}

/// `[daemon] every`: a duration the daemon can tick at.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Interval(pub Duration);

impl TryFrom<String> for Interval {
    type Error = String;

    fn try_from(s: String) -> Result<Interval, String> {
        let Human(d) = Human::try_from(s.clone())?;
        crate::schedule::check_tick_interval(d)
            .map(Interval)
            .map_err(|why| format!("{}: {why}", shown(&s)))
    }
}

/// `[retention] history`: at least a day, since less would prune what today's budget and
/// daily message cap count.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct History(pub Duration);

impl TryFrom<String> for History {
    type Error = String;

    fn try_from(s: String) -> Result<History, String> {
        let Human(d) = Human::try_from(s.clone())?;
        if d < Duration::from_secs(86400) {
            return Err(format!(
                "{}: must be at least 1d (the budget and the daily message cap count a day)",
                shown(&s)
            ));
        }
        Ok(History(d))
    }
}

/// Hours of the day, `HH:MM-HH:MM` (`active_hours`, `quiet_hours`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Hours(pub Window);

impl TryFrom<String> for Hours {
    type Error = String;

    fn try_from(s: String) -> Result<Hours, String> {
        Window::parse(&s)
            .map(Hours)
            .map_err(|e| format!("{}: {e}", shown(&s)))
    }
}

/// An IANA time zone name.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Zone(pub Tz);

impl TryFrom<String> for Zone {
    type Error = String;

    fn try_from(s: String) -> Result<Zone, String> {
        s.parse::<Tz>()
            .map(Zone)
            .map_err(|_| match crate::schedule::zone_hint(&s) {
                Some(near) => format!(
                    "{}: not a known IANA time zone name (did you mean {near:?}?)",
                    shown(&s)
                ),
                None => format!(
                    "{}: not a known IANA time zone name (such as \"Europe/Berlin\")",
                    shown(&s)
                ),
            })
    }
}

/// One day name: `mon` … `sun` or `monday` … `sunday`, any case.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Day(pub Weekday);

impl TryFrom<String> for Day {
    type Error = String;

    fn try_from(s: String) -> Result<Day, String> {
        parse_day(&s).map(Day).ok_or_else(|| {
            format!(
                "{}: not a day (expected mon … sun or monday … sunday)",
                shown(&s)
            )
        })
    }
}

/// `active_days`: at least one day.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Vec<Day>")]
pub(super) struct Days(pub DaySet);

impl TryFrom<Vec<Day>> for Days {
    type Error = &'static str;

    fn try_from(days: Vec<Day>) -> Result<Days, &'static str> {
        if days.is_empty() {
            return Err("[]: lists no days; leave the key out for every day");
        }
        Ok(Days(
            days.iter().fold(DaySet::EMPTY, |set, d| set.with(d.0)),
        ))
    }
}

/// A size in bytes: an integer, or a string like `64MiB`, `500 KB`, `1GiB`; at least 1 KiB.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub(super) struct Size(pub u64);

impl TryFrom<toml::Value> for Size {
    type Error = String;

    fn try_from(value: toml::Value) -> Result<Size, String> {
        parse_size(&value).map(Size).ok_or_else(|| {
            format!(
                "{}: not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a \
                 number of bytes)",
                shown_value(&value)
            )
        })
    }
}

fn parse_size(value: &toml::Value) -> Option<u64> {
    let bytes = match value {
        toml::Value::Integer(n) => u64::try_from(*n).ok()?,
        toml::Value::String(s) => {
            let s = s.trim();
            let split = s
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(s.len());
            let (number, unit) = s.split_at(split);
            let number: f64 = number.parse().ok()?;
            let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
                "" | "b" => 1,
                "kb" => 1000,
                "kib" | "k" => 1024,
                "mb" => 1000 * 1000,
                "mib" | "m" => 1024 * 1024,
                "gb" => 1000 * 1000 * 1000,
                "gib" | "g" => 1024 * 1024 * 1024,
                _ => return None,
            };
            let bytes = number * factor as f64;
            (bytes.is_finite() && bytes < u64::MAX as f64).then_some(bytes as u64)?
        }
        _ => return None,
    };
    (bytes >= 1024).then_some(bytes)
}

/// A path as written (`state_dir`, `audit_log`, `[mcp.NAME] cwd`): not empty. The loader
/// expands it (`~`, relative to the config's directory).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct PathText(pub String);

impl TryFrom<String> for PathText {
    type Error = String;

    fn try_from(s: String) -> Result<PathText, String> {
        if s.is_empty() {
            return Err(format!("{}: is empty", shown(&s)));
        }
        Ok(PathText(s))
    }
}

/// A command line (`[mcp.NAME] command`): a program to run, then its arguments.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub(super) struct Command(pub Vec<String>);

impl TryFrom<Vec<String>> for Command {
    type Error = String;

    fn try_from(argv: Vec<String>) -> Result<Command, String> {
        if argv.first().is_none_or(|program| program.is_empty()) {
            let shown = toml::Value::Array(argv.into_iter().map(toml::Value::String).collect());
            return Err(format!("{shown}: must start with a program to run"));
        }
        Ok(Command(argv))
    }
}

/// `[tools.NAME] command`: a [`Command`] whose shell script, if it runs one, holds no
/// `{key}` placeholder (`shell`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub(super) struct ToolCommand(pub Vec<String>);

impl TryFrom<Vec<String>> for ToolCommand {
    type Error = String;

    fn try_from(argv: Vec<String>) -> Result<ToolCommand, String> {
        let Command(argv) = Command::try_from(argv)?;
        match super::shell::check(&argv) {
            Some(why) => Err(why),
            None => Ok(ToolCommand(argv)),
        }
    }
}

/// `files`: at least one entry (path or glob), as written.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub(super) struct Files(pub Vec<String>);

impl TryFrom<Vec<String>> for Files {
    type Error = &'static str;

    fn try_from(list: Vec<String>) -> Result<Files, &'static str> {
        if list.is_empty() {
            return Err("[]: lists no files");
        }
        Ok(Files(list))
    }
}

/// `[telegram] api_url`: an http:// or https:// URL with a host, kept without a trailing
/// slash.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct ApiUrl(pub String);

impl TryFrom<String> for ApiUrl {
    type Error = String;

    fn try_from(s: String) -> Result<ApiUrl, String> {
        let trimmed = s.trim_end_matches('/');
        let rest = trimmed
            .strip_prefix("https://")
            .or_else(|| trimmed.strip_prefix("http://"));
        if rest.is_none_or(|r| r.is_empty() || r.contains(char::is_whitespace)) {
            return Err(format!("{}: not an http:// or https:// URL", shown(&s)));
        }
        Ok(ApiUrl(trimmed.to_string()))
    }
}

/// `[mcp.NAME] url`: an http:// or https:// URL.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct McpUrl(pub String);

impl TryFrom<String> for McpUrl {
    type Error = String;

    fn try_from(s: String) -> Result<McpUrl, String> {
        if !(s.starts_with("https://") || s.starts_with("http://")) {
            return Err(format!("{}: must be an http:// or https:// URL", shown(&s)));
        }
        Ok(McpUrl(s))
    }
}

/// `[telegram] chat_ids`: a non-zero integer. Any other value is read too, so that `["me"]`
/// is reported as "not a chat id" with the value as written.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub(super) struct ChatId(pub i64);

impl TryFrom<toml::Value> for ChatId {
    type Error = String;

    fn try_from(value: toml::Value) -> Result<ChatId, String> {
        match value {
            toml::Value::Integer(n) if n != 0 => Ok(ChatId(n)),
            other => Err(format!(
                "{}: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
                shown_value(&other)
            )),
        }
    }
}

/// `concurrency`: tasks run at once, 1 to 64.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Concurrency(pub usize);

impl TryFrom<i64> for Concurrency {
    type Error = String;

    fn try_from(n: i64) -> Result<Concurrency, String> {
        match usize::try_from(n) {
            Ok(k) if (1..=64).contains(&k) => Ok(Concurrency(k)),
            _ => Err(format!("{n}: must be between 1 and 64")),
        }
    }
}

/// `max_tasks_per_run`: 0 (no cap) or more.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct TaskCap(pub usize);

impl TryFrom<i64> for TaskCap {
    type Error = String;

    fn try_from(n: i64) -> Result<TaskCap, String> {
        usize::try_from(n)
            .map(TaskCap)
            .map_err(|_| format!("{n}: must be 0 (no cap) or more"))
    }
}

/// `[retention] audit_keep`: rotated audit files kept, 1 to 1000.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Keep(pub usize);

impl TryFrom<i64> for Keep {
    type Error = String;

    fn try_from(n: i64) -> Result<Keep, String> {
        match usize::try_from(n) {
            Ok(k) if (1..=1000).contains(&k) => Ok(Keep(k)),
            _ => Err(format!("{n}: must be between 1 and 1000")),
        }
    }
}

/// A count from 0 to `u32::MAX`; `ZERO` says what 0 means, if anything.
fn count(n: i64, zero: &str) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| {
        if n < 0 {
            format!("{n}: must be 0{zero} or more")
        } else {
            format!("{n}: must be at most {}", u32::MAX)
        }
    })
}

/// `max_consecutive_failures`: failures in a row before a task is tripped; 0 = never.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Failures(pub u32);

impl TryFrom<i64> for Failures {
    type Error = String;

    fn try_from(n: i64) -> Result<Failures, String> {
        count(n, "").map(Failures)
    }
}

/// `retries`: extra attempts after a failure, 0 or more.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Retries(pub u32);

impl TryFrom<i64> for Retries {
    type Error = String;

    fn try_from(n: i64) -> Result<Retries, String> {
        count(n, "").map(Retries)
    }
}

/// One word of `retry_on` (docs/reference.md#retries): which failures are tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(crate) enum RetryOn {
    /// `timeout`: the tool ran past its timeout.
    Timeout,
    /// `exit:N`: a process ended with this exit code.
    Exit(i32),
    /// `http:5xx`: a server error.
    Http5xx,
    /// `http:429`: too many requests.
    Http429,
    /// `spawn`: the tool never started.
    Spawn,
}

impl TryFrom<String> for RetryOn {
    type Error = String;

    fn try_from(s: String) -> Result<RetryOn, String> {
        let code = s
            .strip_prefix("exit:")
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|&n| n != 0);
        match (s.as_str(), code) {
            ("timeout", _) => Ok(RetryOn::Timeout),
            ("http:5xx", _) => Ok(RetryOn::Http5xx),
            ("http:429", _) => Ok(RetryOn::Http429),
            ("spawn", _) => Ok(RetryOn::Spawn),
            (_, Some(n)) => Ok(RetryOn::Exit(n)),
            _ => Err(format!(
                "{}: expected \"timeout\", \"exit:N\" (N a non-zero exit code), \"http:5xx\", \
                 \"http:429\" or \"spawn\"",
                shown(&s)
            )),
        }
    }
}

/// `[telegram] max_messages_per_day`: 0 (no limit) or more.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct MessageCap(pub u32);

impl TryFrom<i64> for MessageCap {
    type Error = String;

    fn try_from(n: i64) -> Result<MessageCap, String> {
        count(n, " (no limit)").map(MessageCap)
    }
}

/// An amount of US dollars, 0 or more: an integer or a float in the file, shown as written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Usd(pub f64);

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usd, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Usd;

            // serde's own word for a float, which the loader turns into "a number".
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("f64")
            }

            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Usd, E> {
                usd(n as f64, &n.to_string()).map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Usd, E> {
                usd(n as f64, &n.to_string()).map_err(E::custom)
            }

            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Usd, E> {
                usd(n, &toml::Value::Float(n).to_string()).map_err(E::custom)
            }
        }
        d.deserialize_f64(V)
    }
}

fn usd(n: f64, shown: &str) -> Result<Usd, String> {
    if !n.is_finite() || n < 0.0 {
        return Err(format!("{shown}: must be 0 or more"));
    }
    Ok(Usd(n))
}

/// `[tools.NAME]`: a letter or `_`, then letters, digits, `_`, `.` or `-`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct ToolName(pub String);

impl TryFrom<String> for ToolName {
    type Error = String;

    fn try_from(name: String) -> Result<ToolName, String> {
        if !identifier(&name, &['.', '-']) {
            return Err(format!(
                "{name:?} is not a valid tool name (a letter or _, then letters, digits, _, . \
                 or -)"
            ));
        }
        Ok(ToolName(name))
    }
}

/// `[mcp.NAME]`: a letter or `_`, then letters, digits, `_` or `-` (no `.`, which separates
/// the server from its tool in `@NAME.TOOL`), and not a built-in tool's name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct ServerName(pub String);

impl TryFrom<String> for ServerName {
    type Error = String;

    fn try_from(name: String) -> Result<ServerName, String> {
        if !identifier(&name, &['-']) {
            return Err(format!(
                "{name:?} is not a valid server name (a letter or _, then letters, digits, _ \
                 or -)"
            ));
        }
        if is_builtin(&name) {
            return Err(format!(
                "{name:?} is a built-in tool's name; give the server another name"
            ));
        }
        Ok(ServerName(name))
    }
}

/// `[channels.NAME]`: a lowercase letter, then lowercase letters, digits, `_` or `-`; not
/// `telegram`, which is `[telegram]`'s.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct ChannelName(pub String);

impl TryFrom<String> for ChannelName {
    type Error = String;

    fn try_from(name: String) -> Result<ChannelName, String> {
        let mut chars = name.chars();
        let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !ok {
            return Err(format!(
                "{name:?} is not a valid channel name (a lowercase letter, then lowercase \
                 letters, digits, _ or -)"
            ));
        }
        if name == "telegram" {
            return Err(
                "\"telegram\" is the [telegram] table's name; give this channel another name"
                    .into(),
            );
        }
        Ok(ChannelName(name))
    }
}

/// `[[monitors]] name`: a letter or `_`, then letters, digits, `_`, `-` or `.`; shown in
/// audit lines.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct MonitorName(pub String);

impl TryFrom<String> for MonitorName {
    type Error = String;

    fn try_from(name: String) -> Result<MonitorName, String> {
        if !identifier(&name, &['-', '.']) || name.len() > 64 {
            return Err(format!(
                "{}: not a monitor name (a letter or _, then letters, digits, _, - or .; at \
                 most 64)",
                shown(&name)
            ));
        }
        Ok(MonitorName(name))
    }
}

/// `[fleet] node` and `[tools.NAME] hosts`: a node's name, 1 to 64 of letters, digits,
/// `.`, `_` and `-` (a host name fits).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct NodeName(pub String);

impl TryFrom<String> for NodeName {
    type Error = String;

    fn try_from(name: String) -> Result<NodeName, String> {
        if !crate::config::is_node_name(&name) {
            return Err(format!(
                "{}: not a node name (1 to 64 letters, digits, ., _ or -)",
                shown(&name)
            ));
        }
        Ok(NodeName(name))
    }
}

/// `[fleet] lease`: how long a singleton lease lasts unless renewed, 2s to 10m.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Lease(pub Duration);

impl TryFrom<String> for Lease {
    type Error = String;

    fn try_from(s: String) -> Result<Lease, String> {
        let Human(d) = Human::try_from(s.clone())?;
        if d < Duration::from_secs(2) || d > Duration::from_secs(600) {
            return Err(format!("{}: must be from 2s to 10m", shown(&s)));
        }
        Ok(Lease(d))
    }
}

/// A name of a letter or `_`, then letters, digits, `_` or one of `also`: the one rule
/// behind tool, server and variable names.
fn identifier(name: &str, also: &[char]) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || also.contains(&c))
}

/// An environment variable's name: a letter or `_`, then letters, digits or `_`.
fn env_name(name: &str) -> bool {
    identifier(name, &[])
}

/// `[telegram] bot_token_env`: the name of the variable that holds the bot token.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct TokenVar(pub String);

impl TryFrom<String> for TokenVar {
    type Error = String;

    fn try_from(name: String) -> Result<TokenVar, String> {
        if !env_name(&name) {
            return Err(format!(
                "{}: not an environment variable name (the token itself never goes in the \
                 config: put it in that variable)",
                shown(&name)
            ));
        }
        Ok(TokenVar(name))
    }
}

/// `[mcp.NAME] env` and `headers_env`: the name of a variable passed to a server.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct SecretVar(pub String);

impl TryFrom<String> for SecretVar {
    type Error = String;

    fn try_from(name: String) -> Result<SecretVar, String> {
        if !env_name(&name) {
            return Err(format!(
                "{}: not an environment variable name (secrets stay in the environment: name \
                 the variable that holds them)",
                shown(&name)
            ));
        }
        Ok(SecretVar(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        let s = |v: &str| parse_size(&toml::Value::String(v.into()));
        assert_eq!(s("64MiB"), Some(64 * 1024 * 1024));
        assert_eq!(s("500 KB"), Some(500_000));
        assert_eq!(s("1.5GiB"), Some(1_610_612_736));
        assert_eq!(s("2048"), Some(2048));
        assert_eq!(parse_size(&toml::Value::Integer(4096)), Some(4096));
        for bad in ["", "MiB", "12 parsecs", "-5MiB", "100"] {
            assert_eq!(s(bad), None, "{bad}");
        }
        assert_eq!(parse_size(&toml::Value::Integer(-1)), None);
    }

    #[test]
    fn a_command_starts_with_a_program_and_a_tools_script_takes_no_placeholder() {
        let argv = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Command::try_from(argv(&["gh-mcp", "--stdio"])),
            Ok(Command(argv(&["gh-mcp", "--stdio"])))
        );
        for bad in [&[][..], &["", "x"]] {
            let why = Command::try_from(argv(bad)).unwrap_err();
            assert!(why.ends_with(": must start with a program to run"), "{why}");
        }
        assert_eq!(
            ToolCommand::try_from(argv(&[])).unwrap_err(),
            "[]: must start with a program to run"
        );
        // A server's command is no shell script of ours; a tool's is.
        let script = argv(&["sh", "-c", "echo {msg}"]);
        assert!(Command::try_from(script.clone()).is_ok());
        let why = ToolCommand::try_from(script).unwrap_err();
        assert!(why.contains("as a positional parameter"), "{why}");
    }
}
