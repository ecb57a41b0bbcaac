//! `heartbeat init [DIR]`: a commented HEARTBEAT.md and heartbeat.toml to start from.
//!
//! Invariants:
//! - Never overwrites. A file already there is kept and only the missing one is written
//!   (and both are named); when both are there, or something that is not a file is in the
//!   way (a dangling symlink, a directory), nothing is written and the command exits 2
//!   naming it. Each file is created with `O_EXCL`
//!   (`create_new`), so a file that appears meanwhile is never clobbered; when the second file
//!   loses such a race, or a write fails, the files this command created are removed again.
//! - What it writes loads without any environment and passes `heartbeat check` with no error
//!   and no warning; `heartbeat run --once` on it runs only harmless tools (`log`) and queues
//!   the one that asks (`shell`, `uptime`) in the default cautious mode.
//! - DIR is created when missing (like `git init`); the default is the working directory.
//! - The crontab line it prints names heartbeat by the path it was run by (symbolic links
//!   kept), so that the line outlives a reinstall that replaces what a link points to.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Local, TimeDelta, Utc};

use super::Ctx;
use crate::error::{Error, Result, exit};

pub(crate) const MARKDOWN_NAME: &str = "HEARTBEAT.md";
pub(crate) const CONFIG_NAME: &str = "heartbeat.toml";

pub(crate) fn run(ctx: &Ctx, dir: Option<&Path>) -> Result<u8> {
    let dir = match dir {
        Some(d) => normalize(&ctx.cwd.join(d)),
        None => ctx.cwd.clone(),
    };
    let md_path = dir.join(MARKDOWN_NAME);
    let toml_path = dir.join(CONFIG_NAME);

    // A file already there is kept and the other one written; anything else in the way (a
    // dangling symlink, a directory) is refused, as are both files being there.
    let mut kept: Vec<&PathBuf> = Vec::new();
    for path in [&md_path, &toml_path] {
        if path.symlink_metadata().is_ok() {
            if !path.is_file() {
                return Err(already_exists(&[path]));
            }
            kept.push(path);
        }
    }
    if kept.len() == 2 {
        return Err(already_exists(&kept));
    }

    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;

    let files = [
        (&md_path, markdown(ctx.now)),
        (&toml_path, config().to_string()),
    ];
    let mut created: Vec<&PathBuf> = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| !kept.contains(p)) {
        if let Err(e) = write_new(path, text.as_bytes()) {
            for done in &created {
                let _ = std::fs::remove_file(done);
            }
            return Err(if e.kind() == io::ErrorKind::AlreadyExists {
                already_exists(&[*path])
            } else {
                Error::io(*path, e)
            });
        }
        created.push(path);
    }
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }

    let mut out = ctx.out();
    for path in &created {
        out.line(&format!("Wrote {}", path.display()));
    }
    for path in &kept {
        out.line(&format!("Kept {} as it is (already there)", path.display()));
    }
    out.line("");
    let cd = if dir == ctx.cwd {
        String::new()
    } else {
        format!("cd {} && ", sh_quote(&dir.to_string_lossy()))
    };
    out.line("Next, see what each task would do now (this runs nothing):");
    out.line(&format!("  {cd}heartbeat check"));
    out.line("Then let cron run it every 5 minutes (crontab -e):");
    out.line(&format!(
        "  {}",
        cron_line(&dir, invoked_path(&ctx.cwd).as_deref())
    ));
    Ok(exit::OK)
}

fn already_exists(paths: &[&PathBuf]) -> Error {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let verb = if names.len() == 1 { "exists" } else { "exist" };
    Error::Usage(format!(
        "{} already {verb}; init never overwrites",
        names.join(" and ")
    ))
}

/// Create `path` (never replacing anything), write `bytes`, sync. A partly written file is
/// removed again.
fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if written.is_err() {
        drop(file);
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Drop `.` components (`/a/./b` → `/a/b`).
fn normalize(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A word for `sh`: as it is when that is safe, else in single quotes.
fn sh_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@=".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A crontab line that runs heartbeat in `dir` every 5 minutes. The binary is named by its
/// full path when known, since cron's PATH is short; `%` is special to cron and escaped.
fn cron_line(dir: &Path, exe: Option<&Path>) -> String {
    let exe = exe.map_or_else(
        || "heartbeat".to_string(),
        |p| sh_quote(&p.to_string_lossy()),
    );
    let line = format!(
        "*/5 * * * *  cd {} && {exe} run --once -q",
        sh_quote(&dir.to_string_lossy())
    );
    line.replace('%', r"\%")
}

/// The path the person ran heartbeat by, for the crontab line: argv[0] when it holds a `/`,
/// made absolute against `cwd`; else the first `PATH` entry holding an executable of that
/// name. Symbolic links are kept as they are: `~/.cargo/bin/heartbeat` stays that path (a
/// reinstall or an upgrade replaces what it points to), never the file it resolves to.
/// Else the running binary's own path; None when even that is unknown.
fn invoked_path(cwd: &Path) -> Option<PathBuf> {
    let from_argv = std::env::args_os().next().and_then(|arg0| {
        let arg0 = PathBuf::from(arg0);
        if arg0.as_os_str().as_bytes().contains(&b'/') {
            return Some(normalize(&cwd.join(arg0)));
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| normalize(&cwd.join(dir).join(&arg0)))
            .find(|candidate| is_executable(candidate))
    });
    from_argv.or_else(|| std::env::current_exe().ok())
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The HEARTBEAT.md: safe examples of every kind of task, and notes on how they work. Its
/// one-time example is due a week after `now`.
pub(crate) fn markdown(now: DateTime<Utc>) -> String {
    let in_a_week = (now + TimeDelta::days(7))
        .with_timezone(&Local)
        .format("%Y-%m-%d");
    MARKDOWN.replace("{IN_A_WEEK}", &in_a_week.to_string())
}

/// The heartbeat.toml: every key, commented, with its default and what it does.
pub(crate) fn config() -> &'static str {
    CONFIG
}

const MARKDOWN: &str = r##"# Heartbeat

This is your check-list. `heartbeat run --once` (from cron) or `heartbeat daemon` works
through it: the items under `## Recurring` and `## One-time` are tasks; everything else is
prose that heartbeat never runs. The tasks below are safe examples: edit them, delete them,
add your own. `heartbeat check` shows what each one would do now, and the notes at the end
explain the rest.

## Recurring

Tasks right below this heading, before any `###` heading, are due at every run.

- [ ] @log {"text": "heartbeat is alive"}

### Every 6h

- [ ] @shell {"cmd": ["uptime"]}

### Weekdays at 09:00

- [ ] Look at `heartbeat approvals`: is anything waiting for you?

## One-time

A one-time task runs once and is ticked `[x]` when it succeeds. A one-time reminder is
given once and left for you to tick.

- [ ] Read the notes at the end of this file, then make this list your own

### At {IN_A_WEEK} 09:00

- [ ] @log {"text": "one week since heartbeat init"}

## Notes

Nothing in this section runs: heartbeat acts only on the tasks under `## Recurring` and
`## One-time` (`heartbeat check` lists any others as ignored).

- **Tasks.** A task is a check-list item. One that starts with `@` and a tool name, then a
  JSON object, calls that tool, like `@log {"text": "hi"}`. Any other is a reminder: when
  it is due it is listed in the run's summary. A ticked item, `[x]`, is done and never runs.
- **Tools.** `log` (a line in the audit log) and `notify` (a Telegram message) run by
  themselves. `shell`, `http`, `write_file`, `append_file` and tools of your own (set up in
  heartbeat.toml under `[tools.NAME]`) ask first.
- **Schedules.** A `###` heading sets when the tasks below it are due: `Every 30m`,
  `Every 6h`, `Daily at 07:30`, `Weekdays at 09:00`, `Weekends at 10:00`, `Mondays at 08:00`,
  `Mondays and Thursdays at 18:30`; under One-time, `At 2026-12-24 18:00`. Without one, a
  task is due at every run. A heading that looks like a schedule (a schedule word, a date,
  a time or a day's name) but is not a valid `###` one (`Evry 6h`, `Daily at 9:00`,
  `On 2026-12-24`, `#### At 2026-12-24`) makes the tasks below it invalid: they never run
  until it is fixed, and `heartbeat check` says what it probably meant. Any other heading
  is only a title.
- **Approvals.** With `autonomy = "cautious"` (the default) a task whose tool asks is not
  run but queued, once, like the `uptime` above. `heartbeat approvals` lists what waits;
  `heartbeat approve ID` runs it, `heartbeat approve ID --always` also stops asking for that
  exact task, `heartbeat deny ID` says no; with Telegram set up, buttons do the same.
  `observe` runs nothing and shows what would run; `full` runs everything without asking.
- **Trying a change.** `heartbeat check` validates this file and the config and shows what
  each task would do now; `heartbeat run --once --dry-run` prints the plan and runs
  nothing. Every run appends what it did to an audit log: `heartbeat log` shows it.
"##;

const CONFIG: &str = r##"# heartbeat.toml: the settings for the HEARTBEAT.md beside it (written by heartbeat init).
#
# heartbeat finds this file because it sits beside HEARTBEAT.md; from elsewhere, pass
# --config PATH or set HEARTBEAT_CONFIG. Every key has a default, so only two lines are
# active: the commented ones show each default (or an example) and what it does. To change
# one, remove its leading "# ". An unknown key is an error, so that a typo never silently
# turns a guardrail off. Durations are written like "90s", "10m", "6h", "1d".
# Run `heartbeat check` after every change.

# The check-lists to work through: paths or globs, relative to this file (--file overrides).
files = ["HEARTBEAT.md"]

# observe: run nothing, show what would run | cautious: run the tools that need no
# approval (log, notify) and queue the rest for you | full: run everything without asking.
autonomy = "cautious"

# The time zone of active hours and schedules, an IANA name.
# Default: $TZ, else the system's zone, else UTC.
# timezone = "Europe/Berlin"

# When runs may happen, local time: start inclusive, end exclusive; "22:00-06:00" crosses
# midnight. Outside it a run is skipped (run --once --force runs anyway). Default: always.
# active_hours = "00:00-24:00"

# The days runs may happen (mon tue wed thu fri sat sun). Default: all.
# active_days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

# A task without a tool: "remind" lists it in the run's summary when due; "agent" hands it
# to the agent tool as {"prompt": "<task text>"} (needs [tools.agent] with a command).
# plain_tasks = "remind"

# Where heartbeat.db (approvals, history), the audit log and the run lock live.
# Default: the platform data directory, ~/.local/share/heartbeat on Linux.
# state_dir = "~/.local/share/heartbeat"

# The audit log, one JSON object per line; relative to state_dir.
# audit_log = "audit.jsonl"

# A pending approval older than this expires; after a deny, the task is not asked again
# within it.
# approval_ttl = "24h"

# How many tools may run at once (1-64); 1 runs them strictly in file order.
# concurrency = 1

# At most this many tasks start per run; the rest run at later runs. 0 = no cap.
# max_tasks_per_run = 50

# After this many failures in a row a task is tripped: skipped until
# `heartbeat reset TASK_ID` or until you edit it. 0 = never.
# max_consecutive_failures = 3

# A run lock held longer than this is reported as stuck.
# stuck_after = "30m"

# heartbeat daemon: the tick interval; ticks align to multiples of it in local time.
# [daemon]
# every = "30m"

# A tool of your own: the task @backup {"path": "/home"} runs command as argv, without a
# shell, with "{path}" replaced by the input's "path". Built-in tools (shell, http, log,
# notify, write_file, append_file) take the same keys except command, to change their policy.
# [tools.backup]
# command = ["restic", "backup", "{path}"]
# description = "Back up a directory"
# approval = "ask"                # auto: run | ask: queue for approval | deny: never run
# timeout = "5m"                  # then SIGTERM, and SIGKILL 5 s later
# cooldown = "1h"                 # not started within this after the last start; default: none
# cost_usd = 0.0                  # estimated cost of one call, for the budget
# max_consecutive_failures = 3    # this tool's own limit; default: the global one

# For example, never run shell commands, not even approved ones:
# [tools.shell]
# approval = "deny"

# A daily limit on what the tools cost (what they report, else their cost_usd estimate);
# the day starts at local midnight. 0 = no budget.
# [budget]
# daily_usd = 0.0

# Telegram: run summaries, approval buttons, and /status /pending /pause /resume /run.
# Create a bot with @BotFather and put its token in the environment variable named below,
# never in this file (or in a file only you can read, chmod 600, named by bot_token_file
# in place of bot_token_env); write to the bot, then `heartbeat telegram-chats` shows your
# chat id.
# [telegram]
# bot_token_env = "HEARTBEAT_TELEGRAM_TOKEN"   # the variable that holds the token
# chat_ids = [123456789]          # the only chats that get messages and may approve
# api_url = "https://api.telegram.org"   # another Bot API server
# summary = "on_change"           # on_change | always | never (failures only)
# quiet_hours = "22:00-07:00"     # only failures go out then; default: none
# max_messages_per_day = 20       # past this, the day's messages fold into one; 0 = no limit

# Another channel besides Telegram (kinds: ntfy, slack, discord, webhook, email, command),
# here the ntfy app on your phone. Secrets stay out of this file: each *_env key names the
# variable that holds one (on a public ntfy server the topic name is the secret).
# [channels.phone]
# kind = "ntfy"
# server = "https://ntfy.sh"      # the default; or your own server
# topic_env = "HB_NTFY_TOPIC"     # the variable that holds the topic
# events = ["approval", "failure", "trip"]   # default: every kind but summary and test

# An MCP server: its tools become tasks such as @github.list_issues {"owner": "me"}, under
# the same approvals as every tool. Name the command by its absolute path: cron's PATH is
# short. `heartbeat mcp-tools` lists what the server offers.
# [mcp.github]
# command = ["/usr/local/bin/github-mcp-server", "stdio"]
# env = ["GITHUB_TOKEN"]          # variables passed to the server; their values are secrets
# approval = "ask"                # the default of all its tools: auto | ask | deny
# timeout = "5m"                  # per call

# `heartbeat mcp`, the server agents connect to: they may propose tasks, a person decides.
# With allow_approve set to true an agent may also approve (without running, and never its
# own proposals).
# [mcp_server]
# allow_approve = false

# How long history is kept, and when the audit log is rotated.
# [retention]
# history = "90d"                 # older history, decided approvals and sent messages are pruned daily; at least 1d
# audit_max_size = "64MiB"        # past this size audit.jsonl moves to audit.jsonl.1 and a new one starts
# audit_keep = 5                  # rotated audit files kept (1-1000)
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_for_sh_and_cron() {
        assert_eq!(sh_quote("/srv/notes-1"), "/srv/notes-1");
        assert_eq!(sh_quote("/my notes"), "'/my notes'");
        assert_eq!(sh_quote("/it's"), r"'/it'\''s'");
        assert!(cron_line(Path::new("/a%b"), None).contains(r"/a\%b"));
        assert!(
            cron_line(Path::new("/n"), Some(Path::new("/my bin/heartbeat")))
                .ends_with("&& '/my bin/heartbeat' run --once -q")
        );
    }

    #[test]
    fn the_one_time_example_is_a_week_ahead() {
        let now = "2026-05-01T10:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let md = markdown(now);
        assert!(!md.contains("{IN_A_WEEK}"));
        let day = (now + TimeDelta::days(7))
            .with_timezone(&Local)
            .format("%Y-%m-%d");
        assert!(md.contains(&format!("### At {day} 09:00\n")), "{md}");
    }
}
