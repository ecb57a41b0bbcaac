//! Config errors (docs/reference.md#config): exit 2, `heartbeat: ` + file + key + value on stderr,
//! nothing written, never a silent fallback.

use crate::common::*;

const MD: &str = "## Recurring\n- [ ] @log {\"text\": \"x\"}\n";

/// Run `check` and `run --once` with this config; both must refuse it the same way.
#[track_caller]
fn refused(toml: &str, must_mention: &[&str]) {
    let env = Env::new(MD).config(toml);
    let config_path = env.path("heartbeat.toml").display().to_string();
    for args in [&["check"][..], &["run", "--once"][..]] {
        let out = env.cmd(args).output();
        out.code(2);
        assert!(
            out.stderr.starts_with("heartbeat: "),
            "config {toml:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&config_path),
            "config {toml:?}: the file is named: {}",
            out.stderr
        );
        for word in must_mention {
            assert!(
                out.stderr.contains(word),
                "config {toml:?}: stderr lacks {word:?}: {}",
                out.stderr
            );
        }
        assert_eq!(out.stdout, "", "config {toml:?}");
    }
    assert!(!env.state().exists(), "config {toml:?}: nothing written");
}

#[test]
fn unknown_keys_are_refused_naming_the_key() {
    refused("autonomy = \"full\"\nautonmy = \"observe\"\n", &["autonmy"]);
    refused("[tools.shell]\napprovel = \"auto\"\n", &["approvel"]);
}

#[test]
fn malformed_active_hours_are_refused() {
    refused("active_hours = \"8am-22:00\"\n", &["active_hours", "8am"]);
    refused(
        "active_hours = \"08:00-24:30\"\n",
        &["active_hours", "24:30"],
    );
    refused(
        "active_hours = \"25:00-23:00\"\n",
        &["active_hours", "25:00"],
    );
    refused(
        "active_hours = \"08:00-08:00\"\n",
        &["active_hours", "08:00-08:00"],
    );
    refused(
        "active_hours = \"24:00-06:00\"\n",
        &["active_hours", "24:00"],
    );
    refused("active_hours = \"08:00\"\n", &["active_hours", "08:00"]);
}

#[test]
fn bad_timezone_day_and_duration_are_refused() {
    refused(
        "timezone = \"Mars/Olympus_Mons\"\n",
        &["timezone", "Mars/Olympus_Mons"],
    );
    refused(
        "active_days = [\"mon\", \"funday\"]\n",
        &["active_days", "funday"],
    );
    refused("approval_ttl = \"soon\"\n", &["approval_ttl", "soon"]);
    refused(
        "stuck_after = \"5 parsecs\"\n",
        &["stuck_after", "5 parsecs"],
    );
    refused(
        "[tools.shell]\ntimeout = \"forever\"\n",
        &["timeout", "forever"],
    );
    refused("autonomy = \"yolo\"\n", &["autonomy", "yolo"]);
}

#[test]
fn guardrail_values_are_validated() {
    refused("[budget]\ndaily_usd = -1\n", &["budget.daily_usd", "-1"]);
    refused(
        "[tools.backup]\ncommand = [\"true\"]\ncooldown = \"later\"\n",
        &["tools.backup.cooldown", "later"],
    );
    refused(
        "max_consecutive_failures = \"3\"\n",
        &["max_consecutive_failures"],
    );
}

#[test]
fn telegram_and_daemon_values_are_validated() {
    refused(
        "[telegram]\nchat_ids = [\"me\"]\n",
        &["telegram.chat_ids[0]", "\"me\""],
    );
    refused(
        "[telegram]\nquiet_hours = \"22:00-22:00\"\n",
        &["telegram.quiet_hours", "22:00-22:00"],
    );
    refused("[daemon]\nevery = \"soon\"\n", &["daemon.every", "soon"]);
}

#[test]
fn a_valid_config_is_used() {
    // The counterpart of the refusals: the same keys, well-formed, load and apply.
    let env = Env::new(MD).config(
        r#"timezone = "Europe/Berlin"
active_hours = "22:00-24:00"
active_days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
autonomy = "observe"
approval_ttl = "12h"
stuck_after = "10m"

[tools.shell]
timeout = "30s"
"#,
    );
    // 21:59:59 UTC = 23:59:59 CEST: inside 22:00-24:00.
    env.run_once("2026-05-01T21:59:59Z").code(0);
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "observe");
    // 22:00 UTC = 00:00 CEST: outside.
    env.run_once("2026-05-01T22:00:00Z").code(0);
    let runs = env.events("run_skipped");
    assert_eq!(runs.len(), 1, "{:#?}", env.audit());
    assert_eq!(runs[0]["reason"], "outside_active_hours");
    assert_eq!(runs[0]["next_active"], "2026-05-02T20:00:00.000Z");
}

fn files_and_config(out: &Output) -> (serde_json::Value, serde_json::Value) {
    let doc = out.json();
    (doc["files"].clone(), doc["config"].clone())
}

#[test]
fn lookup_order_and_files_relative_to_the_config() {
    use serde_json::json;
    let env = Env::empty();
    env.write(
        "cfg/notes/b.md",
        "## Recurring\n- [ ] @log {\"text\": \"B\"}\n",
    );
    env.write(
        "cfg/notes/a.md",
        "## Recurring\n- [ ] @log {\"text\": \"A\"}\n",
    );
    env.write(
        "cfg/notes/.hidden.md",
        "## Recurring\n- [ ] @log {\"text\": \"H\"}\n",
    );
    env.write(
        "cfg/heartbeat.toml",
        "files = [\"notes/*.md\", \"notes/a.md\"]\n",
    );
    env.write(
        "other/HEARTBEAT.md",
        "## Recurring\n- [ ] @log {\"text\": \"O\"}\n",
    );
    env.write("other/heartbeat.toml", "autonomy = \"observe\"\n");
    let cfg = env.path("cfg/heartbeat.toml").display().to_string();
    let a = env.path("cfg/notes/a.md").display().to_string();
    let b = env.path("cfg/notes/b.md").display().to_string();
    let other = env.path("other/HEARTBEAT.md").display().to_string();
    let other_cfg = env.path("other/heartbeat.toml").display().to_string();

    // --config: globs are relative to the config file, sorted, without duplicates.
    let out = env.cmd(["check", "--json", "--config", &cfg]).output();
    out.code(0);
    assert_eq!(files_and_config(&out), (json!([a, b]), json!(cfg)));

    // $HEARTBEAT_CONFIG.
    let out = env
        .cmd(["check", "--json"])
        .env("HEARTBEAT_CONFIG", "cfg/heartbeat.toml")
        .output();
    out.code(0);
    assert_eq!(files_and_config(&out), (json!([a, b]), json!(cfg)));

    // --config wins over $HEARTBEAT_CONFIG; --file overrides `files`.
    let out = env
        .cmd([
            "check",
            "--json",
            "--config",
            &cfg,
            "--file",
            "other/HEARTBEAT.md",
        ])
        .env("HEARTBEAT_CONFIG", "other/heartbeat.toml")
        .output();
    out.code(0);
    assert_eq!(files_and_config(&out), (json!([other]), json!(cfg)));

    // Without either: heartbeat.toml beside the first HEARTBEAT.md.
    let out = env
        .cmd(["check", "--json", "--file", "other/HEARTBEAT.md"])
        .output();
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["config"], json!(other_cfg));
    assert_eq!(doc["tasks"][0]["decision"], "observe");

    // The platform config dir ($XDG_CONFIG_HOME/heartbeat/config.toml) comes last. (Its
    // `files` would be relative to it, so the file is named with --file.)
    env.write(
        "home/.config/heartbeat/config.toml",
        "autonomy = \"full\"\n",
    );
    env.write(
        "HEARTBEAT.md",
        "## Recurring\n- [ ] @shell {\"cmd\": \"true\"}\n",
    );
    let out = env
        .cmd(["check", "--json", "--file", "HEARTBEAT.md"])
        .output();
    out.code(0);
    let doc = out.json();
    assert_eq!(
        doc["config"],
        json!(env.path("home/.config/heartbeat/config.toml"))
    );
    assert_eq!(doc["tasks"][0]["decision"], "run");

    // A named config that does not exist is an error naming it.
    let out = env.cmd(["check", "--config", "missing.toml"]).output();
    out.code(2);
    assert!(out.stderr.contains("missing.toml"), "{}", out.stderr);
    let out = env
        .cmd(["check"])
        .env("HEARTBEAT_CONFIG", "missing-too.toml")
        .output();
    out.code(2);
    assert!(out.stderr.contains("missing-too.toml"), "{}", out.stderr);
}

#[test]
fn no_config_at_all_uses_defaults() {
    let env =
        Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n- [ ] @shell {\"cmd\": \"true\"}\n");
    let out = env.cmd(["check", "--json"]).output();
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["config"], serde_json::Value::Null);
    assert_eq!(doc["files"], serde_json::json!([env.md_file()]));
    assert_eq!(doc["tasks"][0]["decision"], "run");
    assert_eq!(
        doc["tasks"][1]["decision"], "approve",
        "cautious by default"
    );
}

#[test]
fn a_bad_tz_variable_is_an_error_not_utc() {
    let env = Env::new(MD);
    let out = env.cmd(["check"]).env("TZ", "Nowhere/Land").output();
    out.code(2);
    assert!(out.stderr.contains("Nowhere/Land"), "{}", out.stderr);
}

#[test]
fn an_audit_log_in_a_subdirectory_of_the_state_dir_is_created() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n")
        .config("audit_log = \"logs/audit.jsonl\"\n");
    env.run_once("2026-05-01T10:00:00Z").code(0);
    let log = std::fs::read_to_string(env.state().join("logs/audit.jsonl")).unwrap();
    assert!(log.contains("\"event\":\"task_succeeded\""), "{log}");
}

#[test]
fn a_placeholder_in_a_shell_script_is_refused_with_the_safe_form() {
    refused(
        "[tools.say]\ncommand = [\"sh\", \"-c\", \"echo {msg} >> log\"]\n",
        &[
            "tools.say.command",
            "{msg}",
            r#"["sh", "-c", "echo \"$1\" >> log", "sh", "{msg}"]"#,
        ],
    );
    refused(
        "[tools.say]\ncommand = [\"/bin/bash\", \"-ec\", \"echo {msg}\"]\n",
        &["tools.say.command", "{msg}"],
    );
    refused(
        "[tools.say]\ncommand = [\"zsh\", \"--norc\", \"-c\", \"touch {a}-{b}\"]\n",
        &["tools.say.command", "{a}"],
    );
}

#[test]
fn placeholders_outside_a_shell_script_are_accepted() {
    for command in [
        r#"["sh", "-c", "echo \"$1\" >> log", "sh", "{msg}"]"#,
        r#"["sh", "-c", "echo ${{HOME}} {{msg}}"]"#,
        r#"["echo", "-c", "{msg}"]"#,
        r#"["sh", "script.sh", "{msg}"]"#,
    ] {
        let env = Env::new(MD).config(&format!("[tools.say]\ncommand = {command}\n"));
        env.cmd(["check"]).output().code(0);
    }
}

#[test]
fn an_audit_log_that_is_not_a_regular_file_is_refused() {
    refused(
        "audit_log = \"/dev/null\"\n",
        &["audit_log", "/dev/null", "not a regular file"],
    );
    refused("audit_log = \"/\"\n", &["audit_log", "not a regular file"]);
}

#[test]
fn a_count_too_large_names_the_limit() {
    refused(
        "max_consecutive_failures = 99999999999999\n",
        &["max_consecutive_failures", "99999999999999", "4294967295"],
    );
    refused(
        "[tools.shell]\nmax_consecutive_failures = 99999999999999\n",
        &["tools.shell.max_consecutive_failures", "4294967295"],
    );
}

/// The README's reference config (the first `toml` block under "## Config") is a config
/// this version accepts: the documentation cannot drift into keys that are refused.
#[test]
fn the_readmes_reference_config_is_accepted() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let section = &readme[readme.find("\n## Config\n").expect("a Config section")..];
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let block = &section[start..start + section[start..].find("```").expect("its end")];
    assert!(
        block.contains("[mcp.github]") && block.contains("[retention]"),
        "{block}"
    );
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n").config(block);
    let out = env
        .cmd(["check", "--file", &env.md_file()])
        .env("TZ", "UTC")
        .output();
    out.code(0);
    assert!(!out.stderr.contains("error"), "{}", out.stderr);
}

/// A file named twice in `files` (or twice through a link) is read once, and `check` says
/// so: in its text and among the `--json` problems as a warning, not only on stderr.
#[test]
fn check_shows_a_file_named_twice_in_files() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n")
        .config("files = [\"HEARTBEAT.md\", \"./HEARTBEAT.md\"]\n");
    let out = env.cmd(["check"]).output();
    out.code(0);
    assert!(
        out.stdout.contains("warning: files: ") && out.stdout.contains("named twice"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("1 warning(s)"), "{}", out.stdout);
    let json = env.cmd(["check", "--json"]).output().json();
    let problems = json["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{json}");
    assert_eq!(problems[0]["severity"], "warning");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("named twice"),
        "{json}"
    );
    assert!(
        problems[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("heartbeat.toml"),
        "{json}"
    );
    // Through a symbolic link: the same.
    std::os::unix::fs::symlink("HEARTBEAT.md", env.path("other.md")).unwrap();
    env.write(
        "heartbeat.toml",
        "files = [\"HEARTBEAT.md\", \"other.md\"]\n",
    );
    let json = env.cmd(["check", "--json"]).output().json();
    let problems = json["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{json}");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("are the same file"),
        "{json}"
    );
}

/// The whole line a person sees for a bad value, for each kind of value the loader checks:
/// the file, line and column, the dotted key, the value as written and why; exit 2.
#[test]
fn a_bad_value_is_reported_in_one_exact_line() {
    for (toml, want) in [
        (
            "active_hours = \"8am-22:00\"\n",
            ":1:16: active_hours: \"8am-22:00\": \"8am\" is not a time (expected HH:MM)",
        ),
        (
            "active_days = [\"mon\", \"funday\"]\n",
            ":1:23: active_days: \"funday\": not a day (expected mon … sun or monday … sunday)",
        ),
        (
            "timezone = \"Mars/Olympus\"\n",
            ":1:12: timezone: \"Mars/Olympus\": not a known IANA time zone name (such as \
             \"Europe/Berlin\")",
        ),
        (
            "[retention]\naudit_max_size = \"12 parsecs\"\n",
            ":2:18: retention.audit_max_size: \"12 parsecs\": not a size of at least 1KiB (such \
             as \"64MiB\", \"500KB\" or a number of bytes)",
        ),
        (
            "[daemon]\nevery = \"500ms\"\n",
            ":2:9: daemon.every: \"500ms\": must be at least 1s",
        ),
        (
            "[tools.\"my tool\"]\ncommand = [\"x\"]\n",
            ":1:8: tools: \"my tool\" is not a valid tool name (a letter or _, then letters, \
             digits, _, . or -)",
        ),
        (
            "[telegram]\nbot_token_env = \"123:ABC\"\n",
            ":2:17: telegram.bot_token_env: \"123:ABC\": not an environment variable name (the \
             token itself never goes in the config: put it in that variable)",
        ),
        (
            "[tols.backup]\ncommand = [\"x\"]\n",
            ":1:2: unknown key \"tols\" (did you mean \"tools\"?)",
        ),
    ] {
        let env = Env::new(MD).config(toml);
        let file = env.path("heartbeat.toml").display().to_string();
        let out = env.cmd(["check"]).output();
        out.code(2);
        assert_eq!(out.stderr, format!("heartbeat: {file}{want}\n"), "{toml}");
    }
}

/// A bad `[channels.NAME]` table (docs/reference.md#channels) is refused at load, by `check`
/// and `run` alike, in one line naming the file, the line and column, the table's key and
/// what is wrong.
#[test]
fn a_bad_channel_is_reported_in_one_exact_line() {
    for (toml, want) in [
        (
            "[channels.pager]\nkind = \"pigeon\"\n",
            ":2:8: channels.pager.kind: \"pigeon\": expected ntfy, slack, discord, webhook, \
             email or command",
        ),
        (
            "[channels.pager]\nurl_env = \"HB_URL\"\n",
            ":1:1: channels.pager.kind: missing key \"kind\": how the channel is reached \
             (ntfy, slack, discord, webhook, email or command)",
        ),
        (
            "[channels.team]\nkind = \"slack\"\nurl_env = \"HB_SLACK\"\ntopic_env = \"HB_TOPIC\"\n",
            ":4:13: channels.team.topic_env: not a key of a slack channel (its own keys: \
             url_env)",
        ),
        (
            "[channels.phone]\nkind = \"ntfy\"\ntopic_env = \"HB_TOPIC\"\napprovals = true\n",
            ":4:13: channels.phone.reply_topic_env: approvals = true needs reply_topic_env: \
             the variable that holds the topic the Approve and Deny buttons answer on",
        ),
        (
            "[channels.mail]\nkind = \"email\"\nsmtp_url_env = \"HB_SMTP\"\nfrom = \"hb@host.example\"\n",
            ":1:1: channels.mail.to: missing key \"to\": the list of addresses to write to",
        ),
        (
            "[channels.mail]\nkind = \"email\"\nsmtp_url_env = \"HB_SMTP\"\n\
             from = \"hb@host.example\"\nto = []\n",
            ":5:6: channels.mail.to: names nobody: add an address",
        ),
        (
            "[channels.pager]\nkind = \"command\"\ncommand = \"/usr/local/bin/notify-me --now\"\n",
            ":3:11: channels.pager.command: expected an argv array (the program, then its \
             arguments; no shell), found string \"/usr/local/bin/notify-me --now\"",
        ),
        (
            "[channels.pager]\nkind = \"command\"\ncommand = []\n",
            ":3:11: channels.pager.command: []: must start with a program to run",
        ),
        (
            "[channels.pager]\nkind = \"command\"\n",
            ":1:1: channels.pager.command: missing key \"command\": the program to run, as an \
             argv array: [\"/path/to/program\", \"arg\"]",
        ),
        (
            "[channels.pager]\nkind = \"command\"\ncommand = [\"notify-me\"]\n\
             events = [\"approval\", \"aproval\"]\n",
            ":4:23: channels.pager.events[1]: \"aproval\": expected approval, reminder, \
             failure, trip, missed, notify, budget, agent, summary or test",
        ),
        (
            "[channels.telegram]\nkind = \"command\"\ncommand = [\"notify-me\"]\n",
            ":1:11: channels: \"telegram\" is the [telegram] table's name; give this channel \
             another name",
        ),
    ] {
        let env = Env::new(MD).config(toml);
        let file = env.path("heartbeat.toml").display().to_string();
        for args in [&["check"][..], &["run", "--once"][..]] {
            let out = env.cmd(args).output();
            out.code(2);
            assert_eq!(
                out.stderr,
                format!("heartbeat: {file}{want}\n"),
                "{args:?} {toml}"
            );
            assert_eq!(out.stdout, "", "{toml}");
        }
        assert!(!env.state().exists(), "{toml}: nothing written");
    }
}
