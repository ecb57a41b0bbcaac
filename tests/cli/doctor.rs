//! `heartbeat doctor` (docs/reference.md#doctor): read-only checks, each `ok`, `info`,
//! `warn` or `fail`; exit 0, 1 when one fails, 2 when it cannot check.
//!
//! Every test puts fake `crontab` and `systemctl` programs first in `PATH`, so that the
//! machine's own scheduler never decides a result.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::SystemTime;

use serde_json::Value;

use crate::common::*;

const MD: &str = "## Recurring\n\n- [ ] @log {\"text\": \"hi\"}\n";

/// The ids of the checks, in their order.
const IDS: [&str; 11] = [
    "scheduler",
    "last_run",
    "missed",
    "lock",
    "tripped",
    "approvals",
    "delivery",
    "files",
    "clock",
    "state_dir",
    "monitors",
];

/// Write a program named `name` into the sandbox's `bin`, printing `stdout` and exiting
/// with `code`.
fn fake(env: &Env, name: &str, stdout: &str, code: i32) {
    let path = env.path(&format!("bin/{name}"));
    env.write(
        &format!("bin/{name}"),
        format!("#!/bin/sh\ncat <<'EOF'\n{stdout}EOF\nexit {code}\n"),
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// `crontab` says there is no crontab and `systemctl` cannot reach a user manager, unless
/// a test writes others.
fn no_scheduler(env: &Env) {
    fake(env, "crontab", "", 1);
    fake(env, "systemctl", "", 1);
}

/// `heartbeat doctor ARGS --json` at `now`, with the sandbox's `bin` first in `PATH`.
fn doctor(env: &Env, now: &str, args: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        env.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.cmd(["doctor"])
        .args(args)
        .now(now)
        .env("PATH", path)
        .output()
}

/// Each check's status, by id, from `--json`.
fn statuses(out: &Output) -> BTreeMap<String, String> {
    out.json()["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The one check with this id.
fn check(out: &Output, id: &str) -> Value {
    out.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no check {id} in {}", out.stdout))
}

/// Assert that exactly `id` fails (exit 1).
#[track_caller]
fn only_fails(out: &Output, id: &str) {
    out.code(1);
    let failing: Vec<String> = statuses(out)
        .into_iter()
        .filter(|(_, s)| s == "fail")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(failing, [id], "{}", out.stdout);
}

/// `2026-05-01T10:00:00Z` moved by `minutes`.
fn at(minutes: i64) -> String {
    let now: chrono::DateTime<chrono::Utc> = NOW.parse().unwrap();
    (now + chrono::Duration::minutes(minutes)).to_rfc3339()
}

/// Every file below the state dir: its bytes and modification time.
fn files_in(dir: &std::path::Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut found = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = fs::metadata(&path).unwrap();
        let bytes = if meta.is_file() {
            fs::read(&path).unwrap()
        } else {
            Vec::new()
        };
        found.insert(path, (bytes, meta.modified().unwrap()));
    }
    found
}

#[test]
fn a_clean_install_after_one_run_is_well_and_doctor_writes_nothing() {
    let env = Env::new(MD);
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    let before = files_in(&env.state());
    let dir_mtime = fs::metadata(env.state()).unwrap().modified().unwrap();

    let out = doctor(&env, &at(1), &["--json"]);
    out.code(0);
    let json = out.json();
    let ids: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, IDS);
    for c in json["checks"].as_array().unwrap() {
        assert_has_keys(c, &["id", "status", "message", "advice"]);
        let status = c["status"].as_str().unwrap();
        assert!(["ok", "info"].contains(&status), "{c}");
        // Advice for what is not ok; none when all is well.
        assert_eq!(c["advice"].is_null(), status == "ok", "{c}");
    }
    // Nothing tells what starts heartbeat: it says so, never fails for it.
    assert_eq!(check(&out, "scheduler")["status"], "info");
    assert_eq!(check(&out, "monitors")["message"], "no monitors configured");

    // The text form, and --deep without servers, write nothing either.
    let text = doctor(&env, &at(1), &["--deep"]);
    text.code(0);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("ok    last_run    the last run started 1m ago")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("ok    mcp         no MCP server"),
        "{}",
        text.stdout
    );
    assert_eq!(
        files_in(&env.state()),
        before,
        "doctor changed the state dir"
    );
    assert_eq!(
        fs::metadata(env.state()).unwrap().modified().unwrap(),
        dir_mtime
    );
}

#[test]
fn without_a_state_dir_or_with_a_broken_config_it_cannot_check() {
    let env = Env::new(MD);
    no_scheduler(&env);
    let out = doctor(&env, NOW, &[]);
    out.code(2);
    assert!(out.stderr.contains("no state dir"), "{}", out.stderr);
    assert!(!env.exists("state"), "doctor created the state dir");

    env.run_once(NOW).code(0);
    let env = env.config("autonomy = \"sometimes\"\n");
    let out = doctor(&env, NOW, &["--json"]);
    out.code(2);
    assert!(out.stderr.contains("autonomy"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

#[test]
fn runs_that_stopped_fail_last_run_and_ask_about_the_crontab() {
    let env = Env::new(MD);
    no_scheduler(&env);
    // Every 5 minutes from 4 h to 3 h ago, then nothing.
    for m in (0..=12).map(|i| -240 + 5 * i) {
        env.run_once(&at(m)).code(0);
    }
    let out = doctor(&env, NOW, &["--json"]);
    only_fails(&out, "last_run");
    let last = check(&out, "last_run");
    let message = last["message"].as_str().unwrap();
    assert!(message.contains("3h ago"), "{message}");
    assert!(message.contains("3× the usual interval of 5m"), "{message}");
    let advice = last["advice"].as_str().unwrap();
    assert!(
        advice.starts_with(
            "nothing has run heartbeat since 2026-05-01 07:00 UTC; is its crontab line still there"
        ),
        "{advice}"
    );
    // They came at a regular interval: something started them.
    assert_eq!(check(&out, "scheduler")["status"], "ok");

    // The same runs, seen within 3 intervals of the last: well.
    let out = doctor(&env, &at(-180 + 14), &["--json"]);
    out.code(0);
    assert_eq!(check(&out, "last_run")["status"], "ok");
}

#[test]
fn a_crontab_line_that_names_heartbeat_is_a_scheduler() {
    let env = Env::new(MD);
    no_scheduler(&env);
    fake(
        &env,
        "crontab",
        "# m h dom mon dow command\n*/5 * * * * /usr/local/bin/heartbeat run --once -q\n",
        0,
    );
    env.run_once(NOW).code(0);
    let out = doctor(&env, NOW, &["--json"]);
    out.code(0);
    let scheduler = check(&out, "scheduler");
    assert_eq!(scheduler["status"], "ok");
    assert!(
        scheduler["message"].as_str().unwrap().contains("crontab"),
        "{scheduler}"
    );

    // A comment alone names nothing; a systemd user timer does.
    fake(&env, "crontab", "# heartbeat run --once, some day\n", 0);
    fake(
        &env,
        "systemctl",
        "Fri 2026-05-01 10:05:00 UTC 4min left Fri 2026-05-01 10:00:00 UTC 1s ago heartbeat.timer heartbeat.service\n",
        0,
    );
    let out = doctor(&env, NOW, &["--json"]);
    let scheduler = check(&out, "scheduler");
    assert_eq!(scheduler["status"], "ok");
    assert!(
        scheduler["message"]
            .as_str()
            .unwrap()
            .contains("heartbeat.timer"),
        "{scheduler}"
    );
}

#[test]
fn a_stuck_run_lock_fails_lock() {
    let env = Env::new(MD);
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    let _held = env.hold_lock();
    env.write(
        "state/heartbeat.lock",
        format!("pid 4242\nsince {}\n", ts(&at(-45))),
    );
    let out = doctor(&env, NOW, &["--json"]);
    only_fails(&out, "lock");
    let lock = check(&out, "lock");
    assert!(
        lock["message"].as_str().unwrap().contains("pid 4242"),
        "{lock}"
    );
    assert!(
        lock["advice"].as_str().unwrap().contains("ps -p 4242"),
        "{lock}"
    );

    // Held for less than stuck_after (30m): a run under way.
    env.write(
        "state/heartbeat.lock",
        format!("pid 4242\nsince {}\n", ts(&at(-10))),
    );
    doctor(&env, NOW, &[]).code(0);
}

#[test]
fn a_tripped_task_fails_tripped() {
    let env = Env::new("## Recurring\n\n- [ ] @shell {\"cmd\": \"false\"}\n")
        .config("[tools.shell]\napproval = \"auto\"\nmax_consecutive_failures = 1\n");
    no_scheduler(&env);
    env.run_once(NOW).code(1);
    let out = doctor(&env, NOW, &["--json"]);
    only_fails(&out, "tripped");
    let tripped = check(&out, "tripped");
    assert!(
        tripped["message"]
            .as_str()
            .unwrap()
            .contains("@shell HEARTBEAT.md:3"),
        "{tripped}"
    );
    assert!(
        tripped["advice"]
            .as_str()
            .unwrap()
            .contains("heartbeat reset "),
        "{tripped}"
    );
}

#[test]
fn files_with_errors_fail_files() {
    let env = Env::new(MD);
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    env.write("HEARTBEAT.md", format!("{MD}- [ ] @nosuchtool {{}}\n"));
    let out = doctor(&env, NOW, &["--json"]);
    only_fails(&out, "files");
    let files = check(&out, "files");
    assert!(
        files["message"]
            .as_str()
            .unwrap()
            .contains("HEARTBEAT.md:4"),
        "{files}"
    );

    // A warning warns.
    env.write("HEARTBEAT.md", format!("{MD}\n## Recuring\n"));
    let out = doctor(&env, NOW, &["--json"]);
    out.code(0);
    assert_eq!(check(&out, "files")["status"], "warn");
}

#[test]
fn a_state_dir_it_cannot_write_fails_state_dir() {
    let env = Env::new(MD);
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    // Root writes through permissions: an immutable directory is unwritable even for root.
    let root = nix::unistd::Uid::effective().is_root();
    let made = if root {
        std::process::Command::new("chattr")
            .arg("+i")
            .arg(env.state())
            .status()
            .is_ok_and(|s| s.success())
    } else {
        fs::set_permissions(env.state(), fs::Permissions::from_mode(0o500)).is_ok()
    };
    if !made {
        cannot_run_here("running as root, and `chattr +i` cannot make the state dir immutable");
        return;
    }
    let out = doctor(&env, NOW, &["--json"]);
    if root {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(env.state())
            .status();
    } else {
        fs::set_permissions(env.state(), fs::Permissions::from_mode(0o700)).unwrap();
    }
    only_fails(&out, "state_dir");
    let state = check(&out, "state_dir");
    assert!(
        state["message"].as_str().unwrap().contains("not writable"),
        "{state}"
    );
}

#[test]
fn a_since_that_is_not_a_time_is_a_usage_error() {
    let env = Env::new(MD);
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    let out = doctor(&env, NOW, &["--since", "a while"]);
    out.code(2);
    assert!(out.stderr.contains("--since"), "{}", out.stderr);
}

#[test]
fn slots_the_audit_log_reports_missed_warn_missed() {
    let env = Env::new(MD);
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    // As a run writes them (docs/reference.md#audit-events); one inside the window, one
    // before it.
    let mut log = env.audit_text();
    for slot in ["2026-04-30T07:00:00.000Z", "2026-04-01T07:00:00.000Z"] {
        log.push_str(&format!(
            "{{\"ts\":\"{}\",\"event\":\"task_missed\",\"run_id\":\"r\",\"task_id\":\"0123456789ab\",\"file\":\"{}\",\"line\":3,\"slot\":\"{slot}\",\"reason\":\"no_run\"}}\n",
            ts(NOW),
            env.md_file()
        ));
    }
    env.write("state/audit.jsonl", log);
    let out = doctor(&env, NOW, &["--json"]);
    out.code(0);
    let missed = check(&out, "missed");
    assert_eq!(missed["status"], "warn", "{missed}");
    let message = missed["message"].as_str().unwrap();
    assert!(
        message.starts_with("1 slot(s) of 1 task(s) missed"),
        "{message}"
    );
    assert!(message.contains("HEARTBEAT.md:3, no_run"), "{message}");
    // A window that starts later leaves it out.
    let out = doctor(&env, NOW, &["--json", "--since", "1d"]);
    assert_eq!(check(&out, "missed")["status"], "ok");
}

#[test]
fn deep_starts_each_mcp_server_and_fails_mcp_when_one_cannot_start() {
    let env = Env::new(MD).config("[mcp.gone]\ncommand = [\"no-such-mcp-server-here\"]\n");
    no_scheduler(&env);
    env.run_once(NOW).code(0);
    // Without --deep no task names it, so nothing starts it and there is no mcp check.
    let out = doctor(&env, NOW, &["--json"]);
    out.code(0);
    assert!(!statuses(&out).contains_key("mcp"), "{}", out.stdout);
    let out = doctor(&env, NOW, &["--json", "--deep"]);
    only_fails(&out, "mcp");
    let mcp = check(&out, "mcp");
    assert!(mcp["message"].as_str().unwrap().contains("gone: "), "{mcp}");
}

#[test]
fn a_database_of_an_earlier_schema_is_not_brought_up_to_date_by_doctor() {
    let env = Env::new(MD);
    no_scheduler(&env);
    fs::create_dir_all(env.state()).unwrap();
    let old = rusqlite::Connection::open(env.db_path()).unwrap();
    heartbeat::testing::schema_at_version(&old, 7).expect("make an older database");
    drop(old);
    let before = files_in(&env.state());
    let out = doctor(&env, NOW, &[]);
    out.code(2);
    assert!(
        out.stderr.contains("earlier heartbeat (schema 7)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        files_in(&env.state()),
        before,
        "doctor changed the state dir"
    );
}

#[test]
fn configured_monitors_are_named_and_missed_slots_written_by_runs_warn() {
    let env = Env::new("## Recurring\n### Daily at 02:00\n- [ ] @log {\"text\": \"n\"}\n").config(
        "timezone = \"UTC\"\n[[monitors]]\nname = \"hc\"\nkind = \"healthchecks\"\nurl_env = \"HB_HC\"\n",
    );
    no_scheduler(&env);
    env.run_once("2026-04-28T03:00:00Z").code(0);
    // cron stopped for two days; the next run reports the two slots.
    env.run_once("2026-05-01T03:00:00Z").code(0);
    assert_eq!(env.events("task_missed").len(), 2);
    let out = doctor(&env, "2026-05-01T03:10:00Z", &["--json"]);
    assert_eq!(check(&out, "monitors")["status"], "ok");
    assert_eq!(check(&out, "monitors")["message"], "configured: hc");
    let missed = check(&out, "missed");
    assert_eq!(missed["status"], "warn", "{missed}");
    assert!(
        missed["message"]
            .as_str()
            .unwrap()
            .starts_with("2 slot(s) of 1 task(s) missed"),
        "{missed}"
    );
}
