//! `heartbeat init [DIR]` (docs/reference.md#commands): a commented HEARTBEAT.md and heartbeat.toml
//! that pass `check` and run safely; never an overwrite.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::*;

/// `init` with a fixed zone, so that the one-time example's date is known.
fn init(env: &Env, args: &[&str]) -> Output {
    env.cmd(["init"]).args(args).env("TZ", "UTC").output()
}

/// Every `# key = …` and `# [table]` line made active; prose comments stay comments.
fn uncomment_all(toml: &str) -> String {
    toml.lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest) if is_setting(rest) => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_setting(s: &str) -> bool {
    if s.starts_with('[') {
        return s.ends_with(']');
    }
    match s.split_once(" = ") {
        Some((key, _)) => {
            !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        }
        None => false,
    }
}

/// Dotted keys of a TOML document: `files`, `daemon.every`, `tools.backup.command`, ….
fn dotted_keys(toml: &str) -> BTreeSet<String> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut BTreeSet<String>) {
        for (k, v) in table {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(t) => walk(&key, t, out),
                _ => {
                    out.insert(key);
                }
            }
        }
    }
    let table: toml::Table = toml.parse().unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let mut out = BTreeSet::new();
    walk("", &table, &mut out);
    out
}

#[test]
fn init_in_the_working_directory() {
    let env = Env::empty();
    let out = init(&env, &[]);
    out.code(0);
    let md = env.path("HEARTBEAT.md");
    let toml = env.path("heartbeat.toml");
    assert!(
        out.stdout.contains(&format!(
            "Wrote {}\nWrote {}\n",
            md.display(),
            toml.display()
        )),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("  heartbeat check\n"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("*/5 * * * *  cd {} && ", env.root().display()))
            && out.stdout.contains(" run --once -q\n"),
        "a cron line: {}",
        out.stdout
    );
    assert_eq!(out.stderr, "");

    let text = env.read("HEARTBEAT.md");
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headings,
        [
            "# Heartbeat",
            "## Recurring",
            "### Every 6h",
            "### Weekdays at 09:00",
            "## One-time",
            "### At 2026-05-08 09:00",
            "## Notes",
        ],
        "{text}"
    );
    assert!(text.ends_with(".\n"));
    assert!(
        env.read("heartbeat.toml")
            .contains("files = [\"HEARTBEAT.md\"]\n")
    );
    assert!(!env.state().exists(), "init touches no state");

    // Found beside HEARTBEAT.md: `cd DIR && heartbeat check` works as printed.
    let out = env.cmd(["check"]).env("TZ", "UTC").output();
    out.code(0);
    assert!(
        out.stdout.contains(&format!("config: {}", toml.display())),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("5 task(s), 0 error(s), 0 warning(s)"),
        "{}",
        out.stdout
    );
}

#[test]
fn init_creates_a_missing_nested_directory() {
    let env = Env::empty();
    let out = init(&env, &["notes/work/./today"]);
    out.code(0);
    let dir = env.path("notes/work/today");
    assert!(dir.join("HEARTBEAT.md").is_file());
    assert!(dir.join("heartbeat.toml").is_file());
    assert!(
        out.stdout
            .contains(&format!("  cd {} && heartbeat check\n", dir.display())),
        "{}",
        out.stdout
    );
    assert!(!env.exists("HEARTBEAT.md"));

    // An absolute DIR too; the new directory is an ordinary one.
    let abs = env.path("elsewhere");
    init(&env, &[abs.to_str().unwrap()]).code(0);
    assert!(abs.join("HEARTBEAT.md").is_file());
}

#[test]
fn init_keeps_an_existing_heartbeat_md_and_writes_the_config() {
    let env = Env::new("# mine\n");
    let out = init(&env, &[]);
    out.code(0);
    assert_eq!(env.read("HEARTBEAT.md"), "# mine\n", "kept byte for byte");
    assert!(
        env.exists("heartbeat.toml"),
        "the missing config is written"
    );
    assert!(
        out.stdout
            .contains(&format!("Kept {}", env.md_path().display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Wrote "), "{}", out.stdout);
    assert!(!out.stdout.contains("HEARTBEAT.md\n"), "{}", out.stdout);
}

#[test]
fn init_keeps_an_existing_config_and_writes_heartbeat_md_but_never_both() {
    let env = Env::empty();
    env.write("sub/heartbeat.toml", "autonomy = \"full\"\n");
    let out = init(&env, &["sub"]);
    out.code(0);
    assert_eq!(env.read("sub/heartbeat.toml"), "autonomy = \"full\"\n");
    assert!(env.exists("sub/HEARTBEAT.md"));
    assert!(out.stdout.contains("Kept "), "{}", out.stdout);

    // Both there: nothing to do, both named, nothing touched.
    let md = env.read("sub/HEARTBEAT.md");
    let out = init(&env, &["sub"]);
    out.code(2);
    assert!(out.stderr.contains("HEARTBEAT.md and "), "{}", out.stderr);
    assert!(
        out.stderr
            .ends_with("heartbeat.toml already exist; init never overwrites\n")
    );
    assert_eq!(env.read("sub/HEARTBEAT.md"), md);
}

#[test]
fn init_refuses_a_dangling_symlink_and_a_file_as_dir() {
    let env = Env::empty();
    std::os::unix::fs::symlink(env.path("target.md"), env.path("HEARTBEAT.md")).unwrap();
    init(&env, &[]).code(2);
    assert!(
        !env.exists("target.md"),
        "the link's target was not created"
    );
    assert!(!env.exists("heartbeat.toml"));

    env.write("plain-file", "x");
    let out = init(&env, &["plain-file"]);
    out.code(2);
    assert!(out.stderr.starts_with("heartbeat: "), "{}", out.stderr);
    assert!(out.stderr.contains("plain-file"), "{}", out.stderr);
    assert_eq!(env.read("plain-file"), "x");
}

#[test]
fn written_files_pass_check_and_run_safely() {
    let env = Env::empty();
    init(&env, &["proj"]).code(0);
    let config = env.path("proj/heartbeat.toml");
    let md = env.path("proj/HEARTBEAT.md").display().to_string();
    let before = env.read("proj/HEARTBEAT.md");

    let out = env
        .cmd(["check", "--json"])
        .args(["--config".as_ref(), config.as_os_str()])
        .env("TZ", "UTC")
        .output();
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["problems"], serde_json::json!([]), "{doc:#}");
    assert_eq!(doc["files"], serde_json::json!([md]));
    let tasks = doc["tasks"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str, Option<&str>)> = tasks
        .iter()
        .map(|t| {
            (
                t["section"].as_str().unwrap(),
                t["tool"].as_str().unwrap_or("-"),
                t["decision"].as_str().unwrap(),
                t["schedule"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("recurring", "log", "run", None),
            ("recurring", "shell", "approve", Some("Every 6h")),
            ("recurring", "-", "remind", Some("Weekdays at 09:00")),
            ("one_time", "-", "remind", None),
            ("one_time", "log", "not_due", Some("At 2026-05-08 09:00")),
        ],
        "{doc:#}"
    );

    // A run: the log line runs, uptime is queued, reminders are given; exit 0.
    let run = |now: &str| {
        env.cmd(["run", "--once", "--json"])
            .args(["--config".as_ref(), config.as_os_str()])
            .env("TZ", "UTC")
            .now(now)
            .output()
    };
    let out = run(NOW);
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["succeeded"], 1, "{doc:#}");
    assert_eq!(doc["queued"], 1, "{doc:#}");
    assert_eq!(doc["failed"], 0, "{doc:#}");
    assert_eq!(doc["invalid"], 0, "{doc:#}");
    let ran: Vec<Value> = env
        .events("task_succeeded")
        .iter()
        .map(|e| e["tool"].clone())
        .collect();
    assert_eq!(ran, [Value::from("log")], "only the log line ran");
    assert!(env.events("task_failed").is_empty());
    let queued = env.events("approval_requested");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0]["tool"], "shell");
    assert_eq!(queued[0]["input"], serde_json::json!({"cmd": ["uptime"]}));
    assert_eq!(env.read("proj/HEARTBEAT.md"), before, "nothing to tick yet");

    // A week later the one-time log line runs and is ticked; nothing else changes.
    run("2026-05-08T09:30:00Z").code(0);
    let after = env.read("proj/HEARTBEAT.md");
    assert_eq!(
        after,
        before.replace(
            "- [ ] @log {\"text\": \"one week since heartbeat init\"}",
            "- [x] @log {\"text\": \"one week since heartbeat init\"}"
        )
    );
    assert_ne!(after, before);
}

/// The config keys (docs/reference.md#config-keys): all of them in heartbeat.toml as comments, only
/// `files` and `autonomy` active, and the commented lines are valid as written.
#[test]
fn config_documents_every_key_and_each_line_is_valid() {
    let env = Env::empty();
    init(&env, &[]).code(0);
    let toml = env.read("heartbeat.toml");

    let active = dotted_keys(&toml);
    assert_eq!(
        active,
        BTreeSet::from(["files".to_string(), "autonomy".to_string()])
    );

    let all = uncomment_all(&toml);
    let expected: BTreeSet<String> = [
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
        "daemon.every",
        "tools.backup.command",
        "tools.backup.timeout",
        "tools.backup.approval",
        "tools.backup.cooldown",
        "tools.backup.cost_usd",
        "tools.backup.description",
        "tools.backup.max_consecutive_failures",
        "tools.shell.approval",
        "budget.daily_usd",
        "telegram.bot_token_env",
        "telegram.chat_ids",
        "telegram.api_url",
        "telegram.summary",
        "telegram.quiet_hours",
        "telegram.max_messages_per_day",
        "channels.phone.kind",
        "channels.phone.server",
        "channels.phone.topic_env",
        "channels.phone.events",
        "mcp.github.command",
        "mcp.github.env",
        "mcp.github.approval",
        "mcp.github.timeout",
        "mcp_server.allow_approve",
        "retention.history",
        "retention.audit_max_size",
        "retention.audit_keep",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(dotted_keys(&all), expected, "{all}");
    // Every setting has its explanation: a comment above it or beside it.
    let lines: Vec<&str> = toml.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let setting = line.strip_prefix("# ").unwrap_or(line);
        if is_setting(setting) && !setting.starts_with('[') {
            let above = i > 0 && lines[i - 1].starts_with('#');
            let beside = setting.contains("  # ");
            assert!(above || beside, "no explanation for {line:?}");
        }
    }

    // All of it at once still loads and checks clean (no token needed to check).
    env.write("heartbeat.toml", &all);
    let out = env.cmd(["check", "--json"]).output();
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["problems"], serde_json::json!([]), "{doc:#}");
}

/// The commented example tables (`[retention]`, `[mcp.github]`, `[mcp_server]`,
/// `[channels.phone]`, …): each one made active alone, with the rest of the file as written,
/// is a config the loader accepts and `check` passes without a problem.
#[test]
fn each_commented_table_is_valid_on_its_own() {
    let env = Env::empty();
    init(&env, &[]).code(0);
    let toml = env.read("heartbeat.toml");
    let lines: Vec<&str> = toml.lines().collect();
    let tables: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("# [") && is_setting(&lines[i][2..]))
        .collect();
    let names: Vec<&str> = tables.iter().map(|&i| lines[i]).collect();
    for table in [
        "# [retention]",
        "# [mcp.github]",
        "# [mcp_server]",
        "# [channels.phone]",
        "# [telegram]",
    ] {
        assert!(names.contains(&table), "no {table} in {names:?}");
    }
    for &start in &tables {
        // The table and its settings, up to the first line that is not one.
        let mut block = vec![start];
        block.extend((start + 1..lines.len()).take_while(|&i| {
            lines[i]
                .strip_prefix("# ")
                .is_some_and(|l| is_setting(l) && !l.starts_with('['))
        }));
        let text: String = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                if block.contains(&i) {
                    &line[2..]
                } else {
                    *line
                }
            })
            .fold(String::new(), |text, line| text + line + "\n");
        env.write("heartbeat.toml", &text);
        let out = env.cmd(["check", "--json"]).env("TZ", "UTC").output();
        assert_eq!(
            out.code,
            Some(0),
            "{}:\n{}{}",
            lines[start],
            out.stdout,
            out.stderr
        );
        let doc = out.json();
        assert_eq!(
            doc["problems"],
            serde_json::json!([]),
            "{}: {doc:#}",
            lines[start]
        );
        let active = dotted_keys(&text);
        let table = &lines[start][3..lines[start].len() - 1];
        assert!(
            active.iter().any(|k| k.starts_with(&format!("{table}."))),
            "{table} not active: {active:?}"
        );
    }
}

/// The crontab line `init` prints names heartbeat by the path it was run by, never the file
/// a symbolic link resolves to (`~/.cargo/bin/heartbeat` must survive a reinstall): argv[0]
/// when it holds a `/`, made absolute; else the `PATH` entry that found it.
#[test]
fn the_cron_line_names_heartbeat_as_it_was_invoked() {
    let env = Env::empty();
    let bin = env.path("home/.cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("heartbeat")).unwrap();
    let link = bin.join("heartbeat");
    let cron = |out: &Output| -> String {
        out.code(0);
        out.stdout
            .lines()
            .find(|l| l.contains("*/5 * * * *"))
            .unwrap_or_else(|| panic!("no cron line: {}", out.stdout))
            .to_string()
    };
    let expected = format!(" && {} run --once -q", link.display());

    // By its full path, through the link.
    let out = env.cmd_as(&link, ["init", "a"]).output();
    let line = cron(&out);
    assert!(line.ends_with(&expected), "{line}");

    // By a relative path: made absolute against the working directory, link kept.
    let out = env
        .cmd_as("./home/.cargo/bin/heartbeat", ["init", "b"])
        .output();
    let line = cron(&out);
    assert!(line.ends_with(&expected), "{line}");

    // By its bare name: the PATH entry that holds it, not canonicalized.
    let path = format!("{}:{}", env.path("nowhere").display(), bin.display());
    let out = env
        .cmd_as("heartbeat", ["init", "c"])
        .env("PATH", &path)
        .output();
    let line = cron(&out);
    assert!(line.ends_with(&expected), "{line}");
    assert!(!line.contains(BIN), "{line}");
}
