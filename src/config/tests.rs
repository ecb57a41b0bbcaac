use std::fs;
use std::os::unix::ffi::OsStrExt;

use chrono::Weekday;
use tempfile::TempDir;

use super::load::{Host, load_from, zone_name};
use super::*;
use crate::model::DaySet;

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
            hostname: "test-host".into(),
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
        load_from(&opts, &self.host)
    }

    fn load(&self) -> Result<Config, ConfigError> {
        self.load_opts(None, &[], None)
    }

    /// Write `cwd/heartbeat.toml` and load it.
    fn load_toml(&self, text: &str) -> Result<Config, ConfigError> {
        self.write("cwd/heartbeat.toml", text);
        self.load()
    }

    /// The rendered error for a `cwd/heartbeat.toml` with this text, without its line and
    /// column (`positions_point_at_the_value` checks those).
    fn error(&self, text: &str) -> String {
        match self.load_toml(text) {
            Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
            Err(e) => ConfigError { at: None, ..e }.to_string(),
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
    // What systemd and many servers set: the system zone.
    w.set_env("TZ", ":/etc/localtime");
    assert_eq!(w.load().unwrap().tz(), chrono_tz::Asia::Tokyo);
    w.set_env("TZ", "");
    assert_eq!(w.load().unwrap().tz(), chrono_tz::Asia::Tokyo);
    w.host.system_tz = None;
    assert_eq!(w.load().unwrap().tz(), Tz::UTC);
    // Another link into zoneinfo: its target names the zone.
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("zone");
    std::os::unix::fs::symlink("/usr/share/zoneinfo/Asia/Kolkata", &link).unwrap();
    w.set_env("TZ", &format!(":{}", link.display()));
    assert_eq!(w.load().unwrap().tz(), chrono_tz::Asia::Kolkata);
    // A link whose zone cannot be known is an error, not UTC.
    w.set_env("TZ", ":/etc/localtime");
    assert!(
        w.load()
            .unwrap_err()
            .to_string()
            .contains(":/etc/localtime")
    );
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
            r#"timezone: "Europe/Berln": not a known IANA time zone name (did you mean "Europe/Berlin"?)"#,
        ),
        (
            r#"timezone = "europe/berlin""#,
            r#"timezone: "europe/berlin": not a known IANA time zone name (did you mean "Europe/Berlin"?)"#,
        ),
        (
            r#"timezone = "Berlin""#,
            r#"timezone: "Berlin": not a known IANA time zone name (did you mean "Europe/Berlin"?)"#,
        ),
        (
            r#"timezone = "New York""#,
            r#"timezone: "New York": not a known IANA time zone name (did you mean "America/New_York"?)"#,
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
            "[tools.shell]\ncooldown = \"101y\"",
            r#"tools.shell.cooldown: "101y": must be at most 100 years"#,
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
            "daily_usd = 5.0",
            r#"unknown key "daily_usd" (it belongs in [budget])"#,
        ),
        (
            "[telegram]\nchat_ids = [1]\nautonomy = \"full\"",
            "telegram: unknown key \"autonomy\" (a top-level key: every key after a [table] \
             line belongs to that table, so put it above the first one)",
        ),
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
        // A tool named like a list whose items are named by the list: its own key is named.
        (
            "[tools.env]\ncommand = [\"restic\"]\ntimeout = \"0m\"",
            r#"tools.env.timeout: "0m": must be longer than zero"#,
        ),
        (
            "[mcp.headers_env]\ncommand = [\"x\"]\ntimeout = \"0m\"",
            r#"mcp.headers_env.timeout: "0m": must be longer than zero"#,
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
        .load_toml("[tools.\"_my-tool.v2\"]\ncommand = [\"x\"]\n[tools.http]\napproval = \"auto\"")
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
    // A name that is not UTF-8 beside them: the glob crate panics on it when asked to skip
    // hidden names itself.
    let odd = std::ffi::OsStr::from_bytes(b"odd\xffname.md");
    fs::write(w.path("cwd/notes").join(odd), "").unwrap();
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
fn a_glob_reaches_hidden_names_only_when_it_names_a_dot() {
    let w = World::new();
    for f in ["cwd/n/.git/x.md", "cwd/n/.h.md", "cwd/n/a/v.md"] {
        w.write(f, "");
    }
    let c = w.load_toml(r#"files = ["n/*/*.md", "n/*.md"]"#).unwrap();
    assert_eq!(c.files, vec![w.path("cwd/n/a/v.md")]);
    let c = w.load_toml(r#"files = ["n/.*.md"]"#).unwrap();
    assert_eq!(c.files, vec![w.path("cwd/n/.h.md")]);
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

#[test]
fn positions_point_at_the_value() {
    let w = World::new();
    let f = w.toml_path();
    let cases: &[(&str, &str)] = &[
        (
            "autonomy = \"full\"\nactive_hours = \"8am-22:00\"",
            "2:16: active_hours: \"8am-22:00\"",
        ),
        (
            "concurrency = \"1\"",
            "1:15: concurrency: expected an integer",
        ),
        ("\nautonmy = \"full\"", "2:1: unknown key \"autonmy\""),
        (
            "[tools.backup]\ncommand = [\"x\"]\ncooldwn = \"1h\"",
            "3:1: tools.backup: unknown key \"cooldwn\" (did you mean \"cooldown\"?)",
        ),
        (
            "[tools.backup]\ncommand = [\"x\"]\ntimeout = \"soon\"",
            "3:11: tools.backup.timeout: \"soon\" is not a duration",
        ),
        (
            "active_days = [\"mon\", 2]",
            "1:23: active_days[1]: expected a string",
        ),
        (
            "autonomy = \"yolo\"",
            "1:12: autonomy: \"yolo\": expected observe",
        ),
        // Quoted as TOML writes it, however the file quotes it.
        (
            "autonomy = 'yolo'",
            "1:12: autonomy: \"yolo\": expected observe",
        ),
        (
            "active_hours = '8am-22:00'",
            "1:16: active_hours: \"8am-22:00\"",
        ),
        (
            "[telegram]\nchat_ids = [1, \"me\"]",
            "2:16: telegram.chat_ids[1]: \"me\": not a chat id",
        ),
    ];
    for (text, want) in cases {
        let err = w.load_toml(text).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{f}:{want}")), "{text}: {err}");
    }
}

#[test]
fn an_audit_log_fifo_is_refused_at_load() {
    let w = World::new();
    let fifo = w.path("cwd/audit.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let err = w
        .load_toml(&format!("audit_log = {:?}", fifo.display().to_string()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("audit_log: ") && err.contains("not a regular file"),
        "{err}"
    );
    // Not existing yet is fine: the first run creates it.
    w.load_toml("audit_log = \"new.jsonl\"").unwrap();
}

#[test]
fn shell_placeholders_are_refused_with_a_safe_form() {
    let w = World::new();
    let f = w.toml_path();
    let cases: &[(&str, &str)] = &[
        (
            r#"["sh", "-c", "echo {msg} >> log"]"#,
            r#"["sh", "-c", "echo \"$1\" >> log", "sh", "{msg}"]"#,
        ),
        (
            r#"["/usr/bin/fish", "-c", "say \"{a}\" {b} {a}"]"#,
            r#"["/usr/bin/fish", "-c", "say \"$1\" \"$2\" \"$1\"", "fish", "{a}", "{b}"]"#,
        ),
        (
            r#"["bash", "-e", "-o", "pipefail", "-c", "echo {x} $1", "bash", "y"]"#,
            r#"["bash", "-e", "-o", "pipefail", "-c", "echo \"$2\" $1", "bash", "y", "{x}"]"#,
        ),
        // A shell behind a wrapper runs the script all the same.
        (
            r#"["env", "LC_ALL=C", "sh", "-c", "echo {msg}"]"#,
            r#"["env", "LC_ALL=C", "sh", "-c", "echo \"$1\"", "sh", "{msg}"]"#,
        ),
        (
            r#"["sudo", "-u", "me", "/bin/bash", "-lc", "echo {msg}"]"#,
            r#"["sudo", "-u", "me", "/bin/bash", "-lc", "echo \"$1\"", "bash", "{msg}"]"#,
        ),
    ];
    for (command, safe) in cases {
        let err = w.error(&format!("[tools.say]\ncommand = {command}"));
        assert!(
            err.starts_with(&format!("{f}: tools.say.command: ")),
            "{err}"
        );
        assert!(err.ends_with(safe), "{command}: {err}");
    }
    // A placeholder as an argument of its own, or a shell that only reads a script file, is
    // safe.
    for command in [
        r#"["env", "sh", "-c", "echo \"$1\"", "sh", "{msg}"]"#,
        r#"["nice", "sh", "script.sh", "{msg}"]"#,
        r#"["git", "commit", "-m", "{msg}"]"#,
    ] {
        w.load_toml(&format!("[tools.say]\ncommand = {command}"))
            .unwrap_or_else(|e| panic!("{command}: {e}"));
    }
}

#[test]
fn counts_name_their_upper_limit() {
    let w = World::new();
    for (text, key) in [
        (
            "max_consecutive_failures = 99999999999999",
            "max_consecutive_failures",
        ),
        (
            "[telegram]\nmax_messages_per_day = 99999999999999",
            "telegram.max_messages_per_day",
        ),
    ] {
        let err = w.error(text);
        assert!(
            err.contains(&format!(
                "{key}: 99999999999999: must be at most 4294967295"
            )),
            "{err}"
        );
    }
}

#[test]
fn wrong_types_read_as_before() {
    let w = World::new();
    let f = w.toml_path();
    let cases: &[(&str, &str)] = &[
        (
            "autonomy = 1",
            "autonomy: expected a string, found integer 1",
        ),
        (
            "[telegram]\nsummary = true",
            "telegram.summary: expected a string, found boolean true",
        ),
        (
            "[telegram]\nchat_ids = 5",
            "telegram.chat_ids: expected an array of chat ids, found integer 5",
        ),
        (
            "[daemon]\nevery = 5",
            "daemon.every: expected a string, found integer 5",
        ),
        (
            "max_consecutive_failures = \"3\"",
            "max_consecutive_failures: expected an integer, found string \"3\"",
        ),
        ("budget = []", "budget: expected a table, found array []"),
        // Not read by position as its first key.
        ("budget = [1]", "budget: expected a table, found array [1]"),
        (
            "[tools]\nbackup = [\"x\"]",
            "tools.backup: expected a table, found array [\"x\"]",
        ),
        (
            "autonomy = { a = 1 }",
            "autonomy: expected a string, found a table",
        ),
        (
            "[tools.backup]\ncommand = [\"x\"]\napproval = 'maybe'",
            "tools.backup.approval: \"maybe\": expected auto, ask or deny",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(w.error(text), format!("{f}: {want}"), "{text}");
    }
}

/// Every key `HOMES` names is a key of that table (a hint never sends anyone to a place
/// that refuses the key too).
#[test]
fn every_key_has_the_home_the_hints_name() {
    let w = World::new();
    for (home, keys) in super::load::HOMES {
        for key in *keys {
            let text = match *home {
                "" => format!("{key} = 0"),
                home => format!("[{home}]\n{key} = 0"),
            };
            if let Err(e) = w.load_toml(&text) {
                assert!(!e.to_string().contains("unknown key"), "{text}: {e}");
            }
        }
    }
}

/// Every message the loader writes about a value in the file, whole and with its line and
/// column, so that no change to how the file is read changes a word of what the user sees.
#[test]
fn every_config_message_is_pinned() {
    let w = World::new();
    let f = w.toml_path();
    for (text, want) in PINNED {
        let err = w.load_toml(text).unwrap_err().to_string();
        assert_eq!(err, format!("{f}{want}"), "{text}");
    }
}

/// (the file, the message after the file's path).
const PINNED: &[(&str, &str)] = &[
    (
        "active_hours = \"8am-22:00\"",
        ":1:16: active_hours: \"8am-22:00\": \"8am\" is not a time (expected HH:MM)",
    ),
    (
        "active_hours = 8",
        ":1:16: active_hours: expected a string, found integer 8",
    ),
    (
        "timezone = \"Mars/Olympus\"",
        ":1:12: timezone: \"Mars/Olympus\": not a known IANA time zone name (such as \"Europe/Berlin\")",
    ),
    (
        "timezone = 1",
        ":1:12: timezone: expected a string, found integer 1",
    ),
    (
        "active_days = [\"mon\", \"funday\"]",
        ":1:23: active_days: \"funday\": not a day (expected mon … sun or monday … sunday)",
    ),
    (
        "active_days = []",
        ":1:15: active_days: []: lists no days; leave the key out for every day",
    ),
    (
        "active_days = [\"mon\", 2]",
        ":1:23: active_days[1]: expected a string, found integer 2",
    ),
    ("files = []", ":1:9: files: []: lists no files"),
    ("state_dir = \"\"", ":1:13: state_dir: \"\": is empty"),
    ("audit_log = \"\"", ":1:13: audit_log: \"\": is empty"),
    (
        "concurrency = 65",
        ":1:15: concurrency: 65: must be between 1 and 64",
    ),
    (
        "max_tasks_per_run = -1",
        ":1:21: max_tasks_per_run: -1: must be 0 (no cap) or more",
    ),
    (
        "max_consecutive_failures = -1",
        ":1:28: max_consecutive_failures: -1: must be 0 or more",
    ),
    (
        "max_consecutive_failures = 99999999999",
        ":1:28: max_consecutive_failures: 99999999999: must be at most 4294967295",
    ),
    (
        "approval_ttl = \"0s\"",
        ":1:16: approval_ttl: \"0s\": must be longer than zero",
    ),
    (
        "approval_ttl = \"101y\"",
        ":1:16: approval_ttl: \"101y\": must be at most 100 years",
    ),
    (
        "stuck_after = \"soon\"",
        ":1:15: stuck_after: \"soon\" is not a duration: expected number at 0",
    ),
    (
        "plain_tasks = \"agent\"",
        ":1:15: plain_tasks: \"agent\" needs a [tools.agent] table with a command",
    ),
    (
        "plain_tasks = 1",
        ":1:15: plain_tasks: expected a string, found integer 1",
    ),
    (
        "autonomy = \"yolo\"",
        ":1:12: autonomy: \"yolo\": expected observe, cautious or full",
    ),
    (
        "autonomy = { full = 1 }",
        ":1:21: autonomy.full: expected table, found integer",
    ),
    (
        "[budget]\ndaily_usd = -1",
        ":2:13: budget.daily_usd: -1: must be 0 or more",
    ),
    (
        "[budget]\ndaily_usd = nan",
        ":2:13: budget.daily_usd: nan: must be 0 or more",
    ),
    (
        "[daemon]\nevery = \"500ms\"",
        ":2:9: daemon.every: \"500ms\": must be at least 1s",
    ),
    (
        "[daemon]\nevery = \"367d\"",
        ":2:9: daemon.every: \"367d\": must be at most 366d",
    ),
    (
        "[tools.\"my tool\"]\ncommand = [\"x\"]",
        ":1:8: tools: \"my tool\" is not a valid tool name (a letter or _, then letters, digits, _, . or -)",
    ),
    (
        "[tools.shell]\ncommand = [\"bash\"]",
        ":2:11: tools.shell.command: shell is a built-in tool; give your tool another name",
    ),
    (
        "[tools.backup]\ncommand = []",
        ":2:11: tools.backup.command: []: must start with a program to run",
    ),
    (
        "[tools.backup]\ntimeout = \"5m\"",
        ":1:1: tools.backup: missing key \"command\" (a tool of your own needs command = [\"program\", \"arg\", …])",
    ),
    (
        "[tools.backup]\ncommand = [\"x\"]\ncost_usd = -1",
        ":3:12: tools.backup.cost_usd: -1: must be 0 or more",
    ),
    (
        "[tools.backup]\ncommand = [\"x\"]\nmax_consecutive_failures = -2",
        ":3:28: tools.backup.max_consecutive_failures: -2: must be 0 or more",
    ),
    (
        "[tools.\"gh.x\"]\ncommand = [\"x\"]\n[mcp.gh]\ncommand = [\"gh-mcp\"]",
        ":1:8: tools: \"gh.x\": @gh.… names a tool of the MCP server [mcp.gh]; give your tool a name that does not start with \"gh.\"",
    ),
    (
        "[mcp.\"my server\"]\ncommand = [\"x\"]",
        ":1:6: mcp: \"my server\" is not a valid server name (a letter or _, then letters, digits, _ or -)",
    ),
    (
        "[mcp.http]\ncommand = [\"x\"]",
        ":1:6: mcp: \"http\" is a built-in tool's name; give the server another name",
    ),
    (
        "[mcp.gh]\ncommand = [\"\"]",
        ":2:11: mcp.gh.command: [\"\"]: must start with a program to run",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nheaders_env = { A = \"B\" }",
        ":1:1: mcp.gh.headers_env: only a server with a url takes headers",
    ),
    (
        "[mcp.gh]\nurl = \"ftp://x\"",
        ":2:7: mcp.gh.url: \"ftp://x\": must be an http:// or https:// URL",
    ),
    (
        "[mcp.gh]\nurl = \"https://x\"\nheaders_env = { Authorization = \"my token\" }",
        ":3:33: mcp.gh.headers_env: \"my token\": not an environment variable name (secrets stay in the environment: name the variable that holds them)",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nurl = \"https://x\"",
        ":2:11: mcp.gh: has both command and url: a server is started (command) or reached (url)",
    ),
    (
        "[mcp.gh]\ntimeout = \"5m\"",
        ":1:1: mcp.gh: missing key \"command\" (a server started as a process: command = [\"program\", \"arg\", …]) or \"url\" (a remote server)",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nenv = [\"OK\", \"1BAD\"]",
        ":3:14: mcp.gh.env: \"1BAD\": not an environment variable name (secrets stay in the environment: name the variable that holds them)",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\ncwd = \"\"",
        ":3:7: mcp.gh.cwd: \"\": is empty",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\ncost_usd = -1",
        ":3:12: mcp.gh.cost_usd: -1: must be 0 or more",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\n[mcp.gh.tools.t]\ncost_usd = -1",
        ":4:12: mcp.gh.tools.t.cost_usd: -1: must be 0 or more",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\n[mcp.gh.tools.t]\nmax_consecutive_failures = -1",
        ":4:28: mcp.gh.tools.t.max_consecutive_failures: -1: must be 0 or more",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\n[mcp.gh.tools.t]\ncooldown = \"0s\"",
        ":4:12: mcp.gh.tools.t.cooldown: \"0s\": must be longer than zero",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\n[mcp.gh.tools.t]\napprove = \"auto\"",
        ":4:1: mcp.gh.tools.t: unknown key \"approve\" (did you mean \"approval\"?)",
    ),
    (
        "[retention]\nhistory = \"23h\"",
        ":2:11: retention.history: \"23h\": must be at least 1d (the budget and the daily message cap count a day)",
    ),
    (
        "[retention]\naudit_max_size = \"100\"",
        ":2:18: retention.audit_max_size: \"100\": not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a number of bytes)",
    ),
    (
        "[retention]\naudit_max_size = \"12 parsecs\"",
        ":2:18: retention.audit_max_size: \"12 parsecs\": not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a number of bytes)",
    ),
    (
        "[retention]\naudit_max_size = true",
        ":2:18: retention.audit_max_size: true: not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a number of bytes)",
    ),
    (
        "[retention]\naudit_keep = 0",
        ":2:14: retention.audit_keep: 0: must be between 1 and 1000",
    ),
    (
        "[retention]\naudit_keep = 1001",
        ":2:14: retention.audit_keep: 1001: must be between 1 and 1000",
    ),
    (
        "[telegram]\nbot_token_env = \"123:ABC\"",
        ":2:17: telegram.bot_token_env: \"123:ABC\": not an environment variable name (the token itself never goes in the config: put it in that variable)",
    ),
    (
        "[telegram]\nchat_ids = [1, \"me\"]",
        ":2:16: telegram.chat_ids[1]: \"me\": not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\nchat_ids = [0]",
        ":2:13: telegram.chat_ids[0]: 0: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\nchat_ids = [1, true]",
        ":2:16: telegram.chat_ids[1]: true: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\nchat_ids = [1.5]",
        ":2:13: telegram.chat_ids[0]: 1.5: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\nchat_ids = [{ id = 1 }]",
        ":2:13: telegram.chat_ids[0]: {…}: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\nchat_ids = [[1, 'x']]",
        ":2:13: telegram.chat_ids[0]: [1, \"x\"]: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\nchat_ids = [1979-05-27]",
        ":2:13: telegram.chat_ids[0]: 1979-05-27: not a chat id (a non-zero integer; `heartbeat telegram-chats` lists them)",
    ),
    (
        "[telegram]\napi_url = \"api.telegram.org\"",
        ":2:11: telegram.api_url: \"api.telegram.org\": not an http:// or https:// URL",
    ),
    (
        "[telegram]\napi_url = \"https://\"",
        ":2:11: telegram.api_url: \"https://\": not an http:// or https:// URL",
    ),
    (
        "[telegram]\nquiet_hours = \"10pm-7am\"",
        ":2:15: telegram.quiet_hours: \"10pm-7am\": \"10pm\" is not a time (expected HH:MM)",
    ),
    (
        "[telegram]\nmax_messages_per_day = -1",
        ":2:24: telegram.max_messages_per_day: -1: must be 0 (no limit) or more",
    ),
    (
        "[telegram]\nchat_id = [1]",
        ":2:1: telegram: unknown key \"chat_id\" (did you mean \"chat_ids\"?)",
    ),
    (
        "[mcp_server]\nallow_approve = \"yes\"",
        ":2:17: mcp_server.allow_approve: expected a boolean, found string \"yes\"",
    ),
    (
        "[mcp_servr]\nallow_approve = true",
        ":1:2: unknown key \"mcp_servr\" (did you mean \"mcp_server\"?)",
    ),
    ("colour = \"red\"", ":1:1: unknown key \"colour\""),
    (
        "every = \"1m\"",
        ":1:1: unknown key \"every\" (it belongs in [daemon])",
    ),
    (
        "autonomy = { a = 1 }",
        ":1:14: autonomy: expected a string, found a table",
    ),
    (
        "autonomy = { full = 1, observe = 2 }",
        ":1:12: autonomy: wanted exactly 1 element, more than 1 element",
    ),
    (
        "autonomy = {}",
        ":1:12: autonomy: wanted exactly 1 element, found 0 elements",
    ),
    (
        "autonomy = 1",
        ":1:12: autonomy: expected a string, found integer 1",
    ),
    (
        "budget = []",
        ":1:10: budget: expected a table, found array []",
    ),
    (
        "retention = 1",
        ":1:13: retention: expected a table, found integer 1",
    ),
    (
        "[tools]\nbackup = 1",
        ":2:10: tools.backup: expected a table, found integer 1",
    ),
    (
        "[tools.backup]\ncommand = \"x\"",
        ":2:11: tools.backup.command: expected an array of strings, found string \"x\"",
    ),
    (
        "[tools.backup]\ncommand = [1]",
        ":2:12: tools.backup.command[0]: expected a string, found integer 1",
    ),
    (
        "[tools.backup]\ncommand = [\"x\"]\ndescription = 1",
        ":3:15: tools.backup.description: expected a string, found integer 1",
    ),
    (
        "[tools.backup]\ncommand = [\"x\"]\ntimeout = 5",
        ":3:11: tools.backup.timeout: expected a string, found integer 5",
    ),
    (
        "[tools.backup]\ncommand = [\"x\"]\napproval = 'maybe'",
        ":3:12: tools.backup.approval: \"maybe\": expected auto, ask or deny",
    ),
    (
        "[tools.backup]\ncommand = [\"x\"]\napproval = true",
        ":3:12: tools.backup.approval: expected a string, found boolean true",
    ),
    (
        "[budget]\ndaily_usd = \"5\"",
        ":2:13: budget.daily_usd: expected a number, found string \"5\"",
    ),
    (
        "[telegram]\nchat_ids = 5",
        ":2:12: telegram.chat_ids: expected an array of chat ids, found integer 5",
    ),
    (
        "[telegram]\nsummary = \"loud\"",
        ":2:11: telegram.summary: \"loud\": expected on_change, always or never",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nheaders_env = 5",
        ":3:15: mcp.gh.headers_env: expected a table, found integer 5",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nenv = [1]",
        ":3:8: mcp.gh.env[0]: expected a string, found integer 1",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nenv = \"A\"",
        ":3:7: mcp.gh.env: expected an array of strings, found string \"A\"",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\n[mcp.gh.tools]\nt = 1",
        ":4:5: mcp.gh.tools.t: expected a table, found integer 1",
    ),
    (
        "[mcp.gh]\nurl = \"https://x\"\nheader_env = {}",
        ":3:1: mcp.gh: unknown key \"header_env\" (did you mean \"headers_env\"?)",
    ),
    (
        "[mcp.gh]\nurl = \"https://x\"\ntrust_annotations = \"yes\"",
        ":3:21: mcp.gh.trust_annotations: expected a boolean, found string \"yes\"",
    ),
    ("mcp = 1", ":1:7: mcp: expected a table, found integer 1"),
    (
        "tools = []",
        ":1:9: tools: expected a table, found array []",
    ),
    (
        "chat_ids = [1]",
        ":1:1: unknown key \"chat_ids\" (it belongs in [telegram])",
    ),
    (
        "[daemon]\nevery = \"1m\"\nfoo = 1",
        ":3:1: daemon: unknown key \"foo\"",
    ),
    (
        "timezone = 1979-05-27",
        ":1:12: timezone: expected a string, found datetime 1979-05-27",
    ),
    (
        "concurrency = 1979-05-27T07:32:00Z",
        ":1:15: concurrency: expected an integer, found datetime 1979-05-27T07:32:00Z",
    ),
    (
        "active_days = [\"mon\", { a = 1 }]",
        ":1:23: active_days[1]: expected a string, found a table",
    ),
    (
        "active_days = [[\"mon\"]]",
        ":1:16: active_days[0]: expected a string, found array [\"mon\"]",
    ),
    (
        "[telegram]\nchat_ids = [1]\nquiet_hours = [1]",
        ":3:15: telegram.quiet_hours: expected a string, found array [1]",
    ),
    (
        "files = [\"a\", 1.5]",
        ":1:15: files[1]: expected a string, found float 1.5",
    ),
    (
        "concurrency = 0x41",
        ":1:15: concurrency: 65: must be between 1 and 64",
    ),
    (
        "[budget]\ndaily_usd = inf",
        ":2:13: budget.daily_usd: inf: must be 0 or more",
    ),
    (
        "[budget]\ndaily_usd = -inf",
        ":2:13: budget.daily_usd: -inf: must be 0 or more",
    ),
    (
        "[retention]\naudit_max_size = 1979-05-27",
        ":2:18: retention.audit_max_size: 1979-05-27: not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a number of bytes)",
    ),
    (
        "[retention]\naudit_max_size = [1]",
        ":2:18: retention.audit_max_size: [1]: not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a number of bytes)",
    ),
    (
        "[retention]\naudit_max_size = 100",
        ":2:18: retention.audit_max_size: 100: not a size of at least 1KiB (such as \"64MiB\", \"500KB\" or a number of bytes)",
    ),
    (
        "[telegram]\nchat_ids = []\n[telegram.x]\ny = 1",
        ":3:11: telegram: unknown key \"x\"",
    ),
    (
        "[mcp.gh]\ncommand = [\"x\"]\nheaders_env = { A = 1 }",
        ":3:21: mcp.gh.headers_env.A: expected a string, found integer 1",
    ),
    (
        "[mcp_server]\nallow_approve = 1",
        ":2:17: mcp_server.allow_approve: expected a boolean, found integer 1",
    ),
    (
        "plain_tasks = { agent = 1 }",
        ":1:25: plain_tasks.agent: expected table, found integer",
    ),
];

#[test]
fn every_builtin_tool_name_is_reserved() {
    let w = World::new();
    for name in crate::model::BUILTIN_TOOLS {
        let err = w.error(&format!("[tools.{name}]\ncommand = [\"true\"]\n"));
        assert!(err.contains("is a built-in tool"), "[tools.{name}]: {err}");
        let err = w.error(&format!("[mcp.{name}]\ncommand = [\"true\"]\n"));
        assert!(err.contains("built-in tool's name"), "[mcp.{name}]: {err}");
        let c = w
            .load_toml(&format!("[tools.{name}]\napproval = \"deny\"\n"))
            .unwrap();
        assert_eq!(c.tools[name].approval, Some(Approval::Deny), "{name}");
    }
}

#[test]
fn retry_keys_layer_tool_over_server_over_defaults() {
    let cfg = World::new()
        .load_toml(
            "[tools.x]\ncommand = [\"true\"]\nretries = 2\nretry_backoff = \"30s\"\n\
         retry_on = [\"exit:75\", \"spawn\"]\nidempotent = true\n\
         [mcp.s]\ncommand = [\"srv\"]\nretries = 1\nretry_on = [\"http:429\"]\n\
         [mcp.s.tools.t]\nretry_backoff = \"5m\"\n",
        )
        .unwrap();
    let x = cfg.retry_policy("x");
    assert_eq!(x.retries, 2);
    assert_eq!(x.backoff, Duration::from_secs(30));
    assert_eq!(x.on, Some(vec![RetryOn::Exit(75), RetryOn::Spawn]));
    assert_eq!(x.idempotent, Some(true));
    let t = cfg.retry_policy("s.t");
    assert_eq!(t.retries, 1);
    assert_eq!(t.backoff, Duration::from_secs(300));
    assert_eq!(t.on, Some(vec![RetryOn::Http429]));
    assert_eq!(t.idempotent, None);
    let other = cfg.retry_policy("shell");
    assert_eq!(other.retries, 0);
    assert_eq!(other.backoff, Duration::from_secs(60));
    assert_eq!(other.on, None);
}

#[test]
fn the_retry_backoff_doubles_up_to_an_hour() {
    let cfg = World::new()
        .load_toml("[tools.x]\ncommand = [\"true\"]\nretries = 9\n")
        .unwrap();
    let p = cfg.retry_policy("x");
    let minutes: Vec<u64> = (1..=8).map(|n| p.delay(n).as_secs() / 60).collect();
    assert_eq!(minutes, [1, 2, 4, 8, 16, 32, 60, 60]);
    assert_eq!(p.delay(u32::MAX), Duration::from_secs(3600));
}

#[test]
fn a_fleet_needs_its_url_set_and_names_a_node() {
    let mut w = World::new();
    let fleet = "[fleet]\npostgres_url_env = \"HB_PG\"\n";
    let e = w.error(fleet);
    assert!(e.contains("fleet.postgres_url_env"), "{e}");
    assert!(e.contains("$HB_PG is not set"), "{e}");
    let e = w.error("[fleet]\nnode = \"n1\"\n");
    assert!(e.contains("missing key \"postgres_url_env\""), "{e}");

    w.set_env("HB_PG", "host=/run/postgresql dbname=hb");
    let c = w.load_toml(fleet).unwrap();
    let f = c.fleet.unwrap();
    // The host name by default, then the documented defaults.
    assert_eq!(f.node, "test-host");
    assert_eq!(f.lease, Duration::from_secs(30));
    assert_eq!(f.every, Duration::from_secs(300));
    assert_eq!(f.tick, crate::config::FleetTick::Runner);

    let e = w.error(&format!("{fleet}lease = \"1s\"\n"));
    assert!(
        e.contains("fleet.lease") && e.contains("from 2s to 10m"),
        "{e}"
    );
    let e = w.error(&format!("{fleet}node = \"my node\"\n"));
    assert!(e.contains("not a node name"), "{e}");
    let e = w.error(&format!("{fleet}tick = \"some\"\n"));
    assert!(e.contains("fleet.tick"), "{e}");
    let e = w.error(&format!("{fleet}ttl = \"5m\"\n"));
    assert!(e.contains("ttl"), "{e}");
}

#[test]
fn hosts_leave_a_node_out_only_in_a_fleet() {
    let mut w = World::new();
    let tools = "[tools.backup]\ncommand = [\"true\"]\nhosts = [\"nas-1\"]\n";
    let single = w.load_toml(tools).unwrap();
    assert!(single.runs_here("backup"), "one host runs everything");
    w.set_env("HB_PG", "host=/run/postgresql dbname=hb");
    let on = |node: &str| {
        w.load_toml(&format!(
            "[fleet]\npostgres_url_env = \"HB_PG\"\nnode = \"{node}\"\n{tools}"
        ))
        .unwrap()
    };
    assert!(on("nas-1").runs_here("backup"));
    assert!(!on("laptop").runs_here("backup"));
    assert!(
        on("laptop").runs_here("shell"),
        "a tool without hosts runs anywhere"
    );
}
