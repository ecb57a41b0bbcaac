//! `check`, `status`, `completions`, `run` usage, `--dry-run` and `--json`
//! (docs/reference.md#commands).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::*;

const CHECK_MD: &str = include_str!("../../fixtures/cli/check.md");

const TASK_KEYS: [&str; 11] = [
    "task_id", "file", "line", "section", "text", "tool", "input", "schedule", "done", "decision",
    "next_due",
];

fn task_at(doc: &Value, line: u64) -> &Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["line"] == line)
        .unwrap_or_else(|| panic!("no task on line {line}: {doc:#}"))
}

#[test]
fn check_json_shape_and_decisions() {
    let env = Env::new(CHECK_MD).config("timezone = \"UTC\"\n");
    // A first run: queues the shell task and runs the Every 6h one.
    env.run_once("2026-05-01T08:00:00Z").code(1);
    let before = env.audit_text();

    let out = env.cmd(["check", "--json"]).output();
    out.code(1);
    let doc = out.json();
    assert_eq!(doc["files"], json!([env.md_file()]));
    let tasks = doc["tasks"].as_array().expect("tasks array");
    assert_eq!(tasks.len(), 10, "{doc:#}");
    for t in tasks {
        assert_has_keys(t, &TASK_KEYS);
        assert!(is_task_id(&t["task_id"]), "{t}");
        assert_eq!(t["file"], env.md_file());
        assert!(
            ["recurring", "one_time", "other"].contains(&t["section"].as_str().unwrap()),
            "{t}"
        );
        assert!(t["done"].is_boolean());
        assert!(t["next_due"].is_null() || t["next_due"].is_string(), "{t}");
        assert!(t["input"].is_null() || t["input"].is_object(), "{t}");
    }
    let ids: std::collections::BTreeSet<&str> = tasks
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), tasks.len(), "ids are distinct");

    // Line by line (see fixtures/cli/check.md).
    let log = task_at(&doc, 4);
    assert_eq!(log["decision"], "run");
    assert_eq!(log["tool"], "log");
    assert_eq!(log["input"], json!({"text": "hello"}));
    assert_eq!(log["schedule"], Value::Null);
    assert_eq!(log["section"], "recurring");
    assert_eq!(log["done"], false);
    assert_eq!(log["text"], "@log {\"text\": \"hello\"}");

    let shell = task_at(&doc, 5);
    assert_eq!(shell["decision"], "pending", "queued by the first run");
    assert_eq!(shell["tool"], "shell");

    let plain = task_at(&doc, 6);
    assert_eq!(plain["decision"], "remind");
    assert_eq!(plain["tool"], Value::Null);
    assert_eq!(plain["input"], Value::Null);
    assert_eq!(plain["text"], "Stretch and drink water");

    let every = task_at(&doc, 9);
    assert_eq!(every["decision"], "not_due");
    assert_eq!(every["schedule"], "Every 6h");
    // Six hours after the last attempt less the slack of a minute.
    assert_eq!(every["next_due"], "2026-05-01T13:59:00.000Z");

    // A level-3 heading that starts like a section name: a title only, and a warning.
    let typo = task_at(&doc, 12);
    assert_eq!(typo["schedule"], Value::Null);
    assert_eq!(typo["decision"], "run");
    let problems = doc["problems"].as_array().unwrap();
    let warning = problems
        .iter()
        .find(|p| p["severity"] == "warning")
        .unwrap_or_else(|| panic!("no warning: {doc:#}"));
    assert_has_keys(warning, &["file", "line", "column", "severity", "message"]);
    assert_eq!(warning["line"], 11);
    assert_eq!(warning["file"], env.md_file());
    assert!(
        warning["message"].as_str().unwrap().contains("Chores"),
        "{warning}"
    );

    let invalid = task_at(&doc, 13);
    assert_eq!(invalid["decision"], "invalid");
    let error = problems
        .iter()
        .find(|p| p["severity"] == "error")
        .expect("an error");
    assert_eq!(error["line"], 13);

    let done = task_at(&doc, 16);
    assert_eq!(done["decision"], "done");
    assert_eq!(done["done"], true);
    assert_eq!(done["section"], "one_time");

    let write = task_at(&doc, 17);
    assert_eq!(write["decision"], "pending", "queued by the first run");
    assert_eq!(write["tool"], "write_file");
    assert_eq!(write["section"], "one_time");

    let grandma = task_at(&doc, 20);
    assert_eq!(grandma["decision"], "not_due");
    assert_eq!(grandma["schedule"], "At 2026-12-24 18:00");
    assert_eq!(grandma["next_due"], "2026-12-24T18:00:00.000Z");

    let ignored = task_at(&doc, 24);
    assert_eq!(ignored["decision"], "ignored");
    assert_eq!(ignored["section"], "other");

    // check writes nothing.
    assert_eq!(env.audit_text(), before);

    // Before any run, ask tools would be queued: "approve".
    let env = Env::new(CHECK_MD).config("timezone = \"UTC\"\n");
    let doc = env.cmd(["check", "--json"]).output().json();
    assert_eq!(task_at(&doc, 5)["decision"], "approve");
    assert_eq!(task_at(&doc, 17)["decision"], "approve");
    assert_eq!(task_at(&doc, 9)["decision"], "run");
    assert!(!env.state().exists());

    // Outside active hours every open task is "inactive".
    let env = Env::new(CHECK_MD).config("timezone = \"UTC\"\nactive_hours = \"08:00-09:00\"\n");
    let doc = env
        .cmd(["check", "--json"])
        .now("2026-05-01T12:00:00Z")
        .output()
        .json();
    assert_eq!(task_at(&doc, 4)["decision"], "inactive");
    assert_eq!(task_at(&doc, 4)["next_due"], "2026-05-02T08:00:00.000Z");
    assert_eq!(task_at(&doc, 16)["decision"], "done");
    assert_eq!(task_at(&doc, 24)["decision"], "ignored");

    // In observe mode, tasks that would run are "observe".
    let env = Env::new(CHECK_MD).config("autonomy = \"observe\"\n");
    let doc = env.cmd(["check", "--json"]).output().json();
    assert_eq!(task_at(&doc, 4)["decision"], "observe");
    assert_eq!(task_at(&doc, 5)["decision"], "observe");
    assert!(!env.state().exists());
}

#[test]
fn check_human_output_lists_tasks() {
    let env = Env::new(CHECK_MD).config("timezone = \"UTC\"\n");
    let out = env.cmd(["check"]).output();
    out.code(1);
    for needle in [
        "HEARTBEAT.md",
        "Stretch and drink water",
        "HEARTBEAT.md:11:",
        "HEARTBEAT.md:13:",
    ] {
        assert!(
            out.stdout.contains(needle),
            "{needle:?} in:\n{}",
            out.stdout
        );
    }
    assert!(!env.state().exists());
}

#[test]
fn status_json_shape() {
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"a\"}\n- [ ] @shell {\"cmd\": \"true\"}\n- [ ] @shell {\"cmd\": \"false\"}\n",
    );
    // Before any run: nothing is created.
    let out = env.cmd(["status", "--json"]).output();
    out.code(0);
    let doc = out.json();
    assert_has_keys(
        &doc,
        &[
            "paused",
            "paused_until",
            "last_run",
            "pending_approvals",
            "budget",
            "tripped",
            "outbox",
            "lock",
        ],
    );
    assert_eq!(doc["paused"], false);
    assert_eq!(doc["last_run"], Value::Null);
    assert_eq!(doc["pending_approvals"], 0);
    assert_eq!(doc["lock"]["held"], false);
    assert!(!env.state().exists(), "status creates nothing");
    let list = env.cmd(["approvals", "--json"]).output();
    list.code(0);
    assert_eq!(list.json(), json!([]));
    assert!(!env.state().exists(), "approvals creates nothing");

    env.run_once(NOW).code(0);
    let run_id = env.events("run_started")[0]["run_id"].clone();
    let doc = env.cmd(["status", "--json"]).output().json();
    assert_eq!(doc["paused"], false);
    assert_eq!(doc["paused_until"], Value::Null);
    assert_has_keys(&doc["last_run"], &["run_id", "at", "succeeded", "failed"]);
    assert_eq!(doc["last_run"]["run_id"], run_id);
    assert_eq!(doc["last_run"]["at"], ts(NOW));
    assert_eq!(doc["last_run"]["succeeded"], 1);
    assert_eq!(doc["last_run"]["failed"], 0);
    assert_eq!(doc["pending_approvals"], 2);
    assert_has_keys(&doc["budget"], &["spent_usd", "daily_usd"]);
    assert!(doc["budget"]["spent_usd"].is_number());
    assert_eq!(doc["tripped"], json!([]));
    assert_eq!(doc["outbox"], 0);
    assert_has_keys(&doc["lock"], &["held", "pid", "since"]);
    assert_eq!(
        doc["lock"],
        json!({"held": false, "pid": null, "since": null})
    );

    let human = env.cmd(["status"]).output();
    human.code(0);
    assert!(
        human.stdout.contains(run_id.as_str().unwrap()),
        "{}",
        human.stdout
    );
}

fn completion_file(shell: &str) -> PathBuf {
    let name = match shell {
        "bash" => "heartbeat.bash",
        "zsh" => "_heartbeat",
        "fish" => "heartbeat.fish",
        "elvish" => "heartbeat.elv",
        "powershell" => "_heartbeat.ps1",
        other => panic!("no file for {other}"),
    };
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("completions")
        .join(name)
}

/// The committed scripts match what the binary generates. Regenerate them with
/// `HEARTBEAT_UPDATE_COMPLETIONS=1 cargo test --test cli completions`.
#[test]
fn completions_match_the_committed_files() {
    let env = Env::empty();
    let update = std::env::var_os("HEARTBEAT_UPDATE_COMPLETIONS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = env.cmd(["completions", shell]).output();
        out.code(0);
        assert!(out.stdout.contains("heartbeat"), "{shell}: {}", out.stdout);
        for sub in ["run", "check", "status", "approvals", "completions"] {
            assert!(out.stdout.contains(sub), "{shell} completion lacks {sub}");
        }
        let path = completion_file(shell);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &out.stdout).unwrap();
        } else {
            match std::fs::read_to_string(&path) {
                Ok(committed) if committed == out.stdout => {}
                _ => stale.push(path.display().to_string()),
            }
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}; regenerate with HEARTBEAT_UPDATE_COMPLETIONS=1 cargo test --test cli completions"
    );
    assert!(!env.state().exists());
}

#[test]
fn run_without_once_is_a_usage_error_with_a_hint() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"a\"}\n");
    let out = env.cmd(["run"]).output();
    out.code(2);
    assert!(out.stderr.starts_with("heartbeat: "), "{}", out.stderr);
    assert!(out.stderr.contains("--once"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(!env.state().exists());
    assert!(env.audit_text().is_empty());
}

#[test]
fn unknown_flags_and_bad_now_are_usage_errors() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"a\"}\n");
    let flag = env.cmd(["run", "--once", "--frobnicate"]).output();
    flag.code(2);
    let out = env.cmd(["run", "--once"]).now("yesterday").output();
    out.code(2);
    assert!(out.stderr.contains("yesterday"), "{}", out.stderr);
    let level = env
        .cmd(["run", "--once", "--autonomy", "reckless"])
        .output();
    level.code(2);
    // In heartbeat's form (docs/reference.md#run-output), with clap's hint below.
    for bad in [&flag, &out, &level] {
        assert!(bad.stderr.starts_with("heartbeat: "), "{}", bad.stderr);
        assert!(bad.stderr.contains("try '--help'"), "{}", bad.stderr);
    }
    assert!(!env.state().exists());
}

const DRY_MD: &str = "## Recurring\n\
                      - [ ] @log {\"text\": \"would log\"}\n\
                      - [ ] @shell {\"cmd\": \"touch ran\"}\n\
                      - [ ] Plain reminder\n\
                      \n\
                      ## One-time\n\
                      - [ ] @log {\"text\": \"once\"}\n";

#[test]
fn dry_run_writes_nothing_and_prints_the_plan() {
    let env = Env::new(DRY_MD);
    let out = env.run_with(NOW, &["--dry-run", "--autonomy", "full"]);
    out.code(0);
    assert!(!env.state().exists(), "no state dir");
    assert!(!env.exists("ran"), "nothing ran");
    assert_eq!(env.read("HEARTBEAT.md"), DRY_MD, "nothing ticked");
    for needle in [
        "HEARTBEAT.md:2",
        "HEARTBEAT.md:3",
        "HEARTBEAT.md:7",
        "Plain reminder",
    ] {
        assert!(
            out.stdout.contains(needle),
            "{needle:?} in:\n{}",
            out.stdout
        );
    }

    // With state: the audit log and the database stay as they were.
    env.run_once(NOW).code(0);
    let audit = env.audit_text();
    let db = env.read_bytes("state/heartbeat.db");
    let out = env.run_with("2026-05-01T11:00:00Z", &["--dry-run", "--json"]);
    out.code(0);
    let doc = out.json();
    assert!(doc["tasks"].is_array(), "{doc:#}");
    let log_id = env.events("task_succeeded")[0]["task_id"].clone();
    let planned = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == log_id)
        .unwrap_or_else(|| panic!("the due @log task is in the plan: {doc:#}"));
    let outcome = planned["outcome"].as_str().unwrap_or_default();
    assert!(
        !outcome.is_empty() && outcome != "succeeded" && outcome != "failed",
        "a dry run runs nothing: {planned}"
    );
    assert_eq!(env.audit_text(), audit, "dry run appends nothing");
    assert_eq!(
        env.read_bytes("state/heartbeat.db"),
        db,
        "dry run writes no row"
    );
    assert_eq!(
        env.approval_rows().len(),
        1,
        "the shell task queued by the real run only"
    );
}

#[test]
fn run_json_shape() {
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"hi\"}\n- [ ] @shell {\"cmd\": \"true\"}\n- [ ] @log [1]\n",
    );
    let out = env.run_with(NOW, &["--json"]);
    out.code(1);
    let doc = out.json();
    assert_has_keys(
        &doc,
        &[
            "run_id",
            "skipped",
            "tasks",
            "succeeded",
            "failed",
            "queued",
            "invalid",
        ],
    );
    assert_eq!(doc["run_id"], env.events("run_started")[0]["run_id"]);
    assert_eq!(doc["skipped"], Value::Null);
    assert_eq!(doc["succeeded"], 1);
    assert_eq!(doc["failed"], 0);
    assert_eq!(doc["queued"], 1);
    assert_eq!(doc["invalid"], 1);
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{doc:#}");
    for t in tasks {
        assert_has_keys(
            t,
            &[
                "task_id",
                "tool",
                "outcome",
                "reason",
                "approval_id",
                "exit_code",
                "output",
                "duration_ms",
            ],
        );
        assert!(is_task_id(&t["task_id"]), "{t}");
    }
    let log = tasks.iter().find(|t| t["outcome"] == "succeeded").unwrap();
    assert_eq!(log["tool"], "log");
    assert_eq!(log["output"], "hi");
    assert!(log["duration_ms"].is_u64());
    let queued = tasks.iter().find(|t| t["outcome"] == "queued").unwrap();
    assert_eq!(queued["tool"], "shell");
    assert_eq!(
        queued["approval_id"],
        env.events("approval_requested")[0]["approval_id"]
    );
    let invalid = tasks.iter().find(|t| t["outcome"] == "invalid").unwrap();
    assert!(
        invalid["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{invalid}"
    );
    // Sections are written `recurring`, `one_time`, `other` wherever they appear in JSON.
    assert_eq!(env.events("task_succeeded")[0]["section"], "recurring");
}

/// A write error on standard output is an error, not a silent success: `check` (nothing run)
/// exits 2, and `run --once` whose tools already ran exits 1, never 2
/// (docs/reference.md#exit-codes).
#[test]
fn a_failed_write_to_stdout_is_an_error_and_after_work_it_exits_1() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hello\"}\n");
    let out = env.cmd(["check"]).output_to_full_disk();
    out.code(2);
    assert!(
        out.stderr.contains("heartbeat: standard output: "),
        "{}",
        out.stderr
    );

    let out = env.cmd(["run", "--once"]).output_to_full_disk();
    out.code(1);
    assert!(
        out.stderr.contains("heartbeat: standard output: "),
        "{}",
        out.stderr
    );
    // The task did run and is recorded.
    assert_eq!(env.events("task_succeeded").len(), 1);
}

/// `-v` names the SQLite library, which is bundled and recent (3.51.3 or later: older ones
/// have a WAL-reset race that a cron run beside a daemon can hit).
#[test]
fn verbose_names_a_recent_bundled_sqlite() {
    let env = Env::new("## Recurring\n- [ ] Stretch\n");
    let out = env.cmd(["-v", "status"]).output();
    out.code(0);
    let line = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("heartbeat: sqlite: "))
        .unwrap_or_else(|| panic!("no sqlite line in {}", out.stderr));
    let v: Vec<u32> = line.split('.').map(|p| p.parse().unwrap()).collect();
    assert!(v >= vec![3, 51, 3], "SQLite {line} is older than 3.51.3");
}

/// A missing HEARTBEAT.md says how to get one (docs/reference.md#file-format: exit 2, naming the
/// path).
#[test]
fn a_missing_file_suggests_init_or_file() {
    let env = Env::empty();
    let out = env.cmd(["run", "--once"]).output();
    out.code(2);
    assert!(
        out.stderr.contains("HEARTBEAT.md: no such file"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("heartbeat init"), "{}", out.stderr);
    assert!(out.stderr.contains("--file"), "{}", out.stderr);
}

/// A dry run queues nothing, and says so: `would queue`, not `queued` (docs/reference.md#run-json).
#[test]
fn dry_run_says_would_queue() {
    let env = Env::new(DRY_MD);
    let out = env.run_with(NOW, &["--dry-run"]);
    out.code(0);
    assert!(out.stdout.contains("would queue"), "{}", out.stdout);
    assert!(!out.stdout.contains("queued"), "{}", out.stdout);
    let doc = env.run_with(NOW, &["--dry-run", "--json"]).json();
    let shell = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "shell")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(shell["outcome"], "would_queue");
    assert_eq!(doc["queued"], 0);
}

/// An absurd argument (100 KB where an id goes) is not echoed back whole.
#[test]
fn a_huge_argument_is_cut_in_the_error() {
    let env = Env::new("## Recurring\n- [ ] Stretch\n");
    let huge = "9".repeat(100_000);
    for args in [vec!["approve", huge.as_str()], vec!["deny", huge.as_str()]] {
        let out = env.cmd(args).output();
        out.code(2);
        assert!(out.stderr.len() < 2_000, "{} bytes", out.stderr.len());
    }
}
