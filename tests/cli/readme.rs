//! The README's first-hour sections, held to what the binary does: the user's path comes
//! first and its commands work, the developer's two commands run, Uninstall names what
//! `man --install` wrote and the state dir heartbeat uses, every agent snippet names
//! heartbeat by an absolute path, and the Telegram set-up's configs load.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md")
}

/// The section under `heading` (a whole heading line, `## Install`), up to the next heading
/// of its level or above; a `#` line inside a fenced block is no heading.
fn section(text: &str, heading: &str) -> String {
    let level = heading.find(' ').expect("a heading");
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading:?} in the README"))
        + heading.len()
        + 2;
    let mut fenced = false;
    let mut out = String::new();
    for line in text[start..].lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !fenced && hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The fenced blocks in `text` whose info string is `lang` (`sh`, `toml`, or "" for a
/// plain block), without their fences.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Option<(bool, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info == lang, String::new())),
            (Some((wanted, body)), Some(_)) => {
                if *wanted {
                    out.push(std::mem::take(body));
                }
                open = None;
            }
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// `Install`, then `From cron`, then the developer's `Two commands`: the user's path first.
#[test]
fn the_readme_starts_with_the_users_path_then_the_developers() {
    let text = readme();
    let at = |heading: &str| {
        text.find(&format!("\n{heading}\n"))
            .unwrap_or_else(|| panic!("no {heading}"))
    };
    assert!(at("## Install") < at("## From cron"));
    assert!(at("## From cron") < at("## Two commands"));
    assert!(
        at("## Install") < text.find("cargo run").unwrap(),
        "a user reads how to install before any cargo run"
    );
    let install = section(&text, "## Install");
    for needle in [
        "cargo install --path .",
        "cargo install --git",
        "heartbeat init ~/notes",
        "heartbeat man --install",
        "crontab -e",
        "heartbeat approve 1",
    ] {
        assert!(install.contains(needle), "Install lacks {needle:?}");
    }
    let cron = blocks(&install, "cron");
    assert_eq!(cron.len(), 1, "{install}");
    assert!(
        cron[0].contains("&& /home/me/.cargo/bin/heartbeat run --once -q"),
        "an absolute path in the crontab line: {}",
        cron[0]
    );

    // The approval line shown is the one the first run of what `init` wrote prints.
    let env = Env::empty();
    env.cmd(["init"]).env("TZ", "UTC").output().code(0);
    let out = env
        .cmd(["run", "--once", "-q"])
        .env("TZ", "UTC")
        .without_config_flag()
        .output();
    out.code(0);
    let approve = out
        .stdout
        .lines()
        .find(|l| l.starts_with("APPROVE"))
        .unwrap_or_else(|| panic!("no APPROVE line: {}", out.stdout));
    let shown = blocks(&install, "");
    assert!(
        shown.iter().any(|b| b.trim() == approve),
        "Install shows {shown:?}, the run prints {approve:?}"
    );
}

/// The developer's two commands: the example run works as written (its state in a
/// directory of its own, the example file unchanged), and the second runs the tests.
#[test]
fn the_developers_two_commands_run() {
    let text = readme();
    let two = section(&text, "## Two commands");
    let sh = blocks(&two, "sh");
    let commands: Vec<&str> = sh[0].lines().collect();
    assert_eq!(commands.len(), 2, "{}", sh[0]);
    assert_eq!(commands[1], "cargo test");
    let args = commands[0]
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("not a cargo run: {}", commands[0]));
    assert!(
        args.contains("--file HEARTBEAT.example.md"),
        "{}",
        commands[0]
    );

    let env = Env::empty();
    let state = env.path("example-state");
    let args: Vec<String> = args
        .split(' ')
        .map(|a| {
            if a == "target/example-state" {
                state.display().to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    assert!(args.contains(&state.display().to_string()), "{args:?}");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/HEARTBEAT.example.md");
    let before = std::fs::read(example).unwrap();
    let out = Command::new(BIN)
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", env.path("home"))
        .env("XDG_CONFIG_HOME", env.path("home/.config"))
        .env("XDG_DATA_HOME", env.path("home/.local/share"))
        .env("TZ", "UTC")
        .env_remove("HEARTBEAT_CONFIG")
        .env_remove("HEARTBEAT_NOW")
        .env_remove("HEARTBEAT_TELEGRAM_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        state.join("heartbeat.db").is_file(),
        "its state went elsewhere"
    );
    assert_eq!(
        std::fs::read(example).unwrap(),
        before,
        "the example file changed"
    );
}

/// Uninstall removes what `man --install` wrote where it wrote it, and the state dir
/// heartbeat uses by default.
#[test]
fn uninstall_names_the_man_pages_and_the_state_dir_heartbeat_uses() {
    let text = readme();
    let uninstall = section(&text, "## Uninstall");
    for needle in [
        "crontab -e",
        "systemctl --user disable --now heartbeat.timer",
        "cargo uninstall heartbeat",
        "rm ~/.local/share/man/man1/heartbeat*.1",
        "rm -r ~/.local/share/heartbeat",
    ] {
        assert!(uninstall.contains(needle), "Uninstall lacks {needle:?}");
    }

    let env = Env::empty();
    let home = env.path("home").display().to_string();
    let out = env.cmd(["man", "--install"]).output();
    out.code(0);
    assert!(
        out.stdout
            .contains(&format!("rm {home}/.local/share/man/man1/heartbeat*.1\n")),
        "{}",
        out.stdout
    );

    let out = env
        .cmd(["status", "--json"])
        .without_state_dir()
        .env("TZ", "UTC")
        .output();
    out.code(0);
    assert_eq!(
        out.json()["state_dir"],
        format!("{home}/.local/share/heartbeat"),
        "{}",
        out.stdout
    );
}

/// Every agent registration names heartbeat and its config by absolute paths (a GUI client
/// has no `~/.cargo/bin` on its PATH and expands no `~`), says which file it goes in, and
/// Claude Code's registers for every project.
#[test]
fn agent_snippets_use_absolute_paths_and_name_their_files() {
    let text = readme();
    let agents = section(&text, "### Agents: `heartbeat mcp`");
    for file in [
        "claude_desktop_config.json",
        "~/.cursor/mcp.json",
        "~/.codex/config.toml",
    ] {
        assert!(agents.contains(file), "Agents does not name {file}");
    }
    let absolute = |what: &str, path: &str| {
        assert!(path.starts_with('/'), "{what}: {path:?} is not absolute");
    };
    let checked_args = |what: &str, args: &[String]| {
        let at = args.iter().position(|a| a == "--config").expect("--config");
        absolute(what, &args[at + 1]);
        assert_eq!(args.last().map(String::as_str), Some("mcp"), "{what}");
    };

    let sh = blocks(&agents, "sh");
    assert_eq!(sh.len(), 1, "{agents}");
    let words: Vec<String> = sh[0].split_whitespace().map(String::from).collect();
    assert_eq!(words[..5], ["claude", "mcp", "add", "--scope", "user"]);
    let program = words.iter().position(|w| w == "--").expect("--") + 1;
    absolute("claude mcp add", &words[program]);
    checked_args("claude mcp add", &words[program + 1..]);

    let json = blocks(&agents, "json");
    assert_eq!(json.len(), 1, "{agents}");
    let doc: Value = serde_json::from_str(&json[0]).expect("JSON");
    let server = &doc["mcpServers"]["heartbeat"];
    absolute("mcpServers", server["command"].as_str().unwrap());
    let args: Vec<String> = serde_json::from_value(server["args"].clone()).unwrap();
    checked_args("mcpServers", &args);

    let toml_blocks = blocks(&agents, "toml");
    let codex: toml::Table = toml_blocks
        .iter()
        .find(|b| b.contains("[mcp_servers.heartbeat]"))
        .expect("the Codex block")
        .parse()
        .unwrap();
    let server = &codex["mcp_servers"]["heartbeat"];
    absolute("codex", server["command"].as_str().unwrap());
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    checked_args("codex", &args);

    for block in sh.iter().chain(&json) {
        assert!(!block.contains('~'), "a `~` no client expands: {block}");
    }
}

/// The Telegram set-up: the steps a first bot needs, groups, the one-reader rule, and the
/// token from a file; each of its `[telegram]` tables loads (the file one with a 0600 file
/// where it says). The systemd unit keeps the token out of `Environment=`.
#[test]
fn the_telegram_setup_covers_the_first_bot_and_its_configs_load() {
    let text = readme();
    let telegram = section(&text, "### Telegram");
    for needle in [
        "@BotFather",
        "/newbot",
        "heartbeat telegram-chats",
        "heartbeat notify-test",
        "negative",
        "privacy",
        "/setprivacy",
        "getUpdates",
        "webhook",
        "bot_token_file",
        "chmod 600",
    ] {
        assert!(telegram.contains(needle), "Telegram lacks {needle:?}");
    }

    let tables: Vec<String> = blocks(&telegram, "toml")
        .into_iter()
        .filter(|b| b.contains("[telegram]"))
        .collect();
    assert_eq!(tables.len(), 2, "{telegram}");
    for table in &tables {
        let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n").config(table);
        // Where the file example says, as the README's `install -m 600` makes it.
        env.write(
            "home/.config/heartbeat/telegram-token",
            format!("{TG_TOKEN}\n"),
        );
        let token = env.path("home/.config/heartbeat/telegram-token");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let out = env.cmd(["check"]).env("TZ", "UTC").output();
        assert_eq!(out.code, Some(0), "{table}\n{}", out.stderr);
    }

    let systemd = section(&text, "## Running it from systemd");
    assert!(systemd.contains("EnvironmentFile="), "{systemd}");
    assert!(systemd.contains("systemctl show"), "{systemd}");
    assert!(
        !systemd.contains("Environment=HEARTBEAT_TELEGRAM_TOKEN"),
        "{systemd}"
    );
}
