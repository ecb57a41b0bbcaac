//! The audit log (docs/reference.md#audit-log): line format, run events, redaction, invalid tasks.

use serde_json::{Value, json};

use crate::common::*;

/// A file that produces one of each outcome: succeeded, failed, queued, skipped, invalid.
const MIXED: &str = "## Recurring\n\
                     - [ ] @log {\"text\": \"ok\"}\n\
                     - [ ] @fail {}\n\
                     - [ ] @shell {\"cmd\": \"true\"}\n\
                     - [ ] @write_file {\"path\": \"x.txt\", \"text\": \"x\"}\n\
                     - [ ] @log [\"not an object\"]\n";

const MIXED_CONFIG: &str = r#"[tools.fail]
command = ["sh", "-c", "exit 3"]
approval = "auto"

[tools.write_file]
approval = "deny"
"#;

#[test]
fn every_line_is_json_with_ts_event_and_run_id_first() {
    let env = Env::new(MIXED).config(MIXED_CONFIG);
    env.run_once(NOW).code(1);
    env.run_once("2026-05-01T10:05:00.250+02:00").code(1);
    let text = env.audit_text();
    assert!(text.ends_with('\n'));
    let ts_re = regex::Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$").unwrap();
    let word = regex::Regex::new(r"^[a-z]+(_[a-z]+)*$").unwrap();
    let mut lines = 0;
    for line in text.lines() {
        lines += 1;
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let obj = v.as_object().expect("an object");
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        // serde_json keeps key order here (preserve_order); check the raw text too.
        assert!(line.starts_with("{\"ts\":\""), "ts first: {line}");
        assert_eq!(&keys[..2], &["ts", "event"], "{line}");
        assert_eq!(
            keys[2], "run_id",
            "every line of a run has run_id third: {line}"
        );
        assert!(ts_re.is_match(obj["ts"].as_str().unwrap()), "{line}");
        assert!(word.is_match(obj["event"].as_str().unwrap()), "{line}");
        if let Some(id) = obj.get("task_id") {
            assert!(is_task_id(id), "{line}");
        }
    }
    assert!(lines >= 12, "{text}");
    // `ts` is the --now of the run, in UTC with milliseconds.
    let all = env.audit();
    let starts = env.events("run_started");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["ts"], "2026-05-01T10:00:00.000Z");
    assert_eq!(starts[1]["ts"], "2026-05-01T08:05:00.250Z");
    // Lines of one run share its run_id; the two runs have different ids.
    assert_ne!(starts[0]["run_id"], starts[1]["run_id"]);
    for v in &all {
        assert!(
            v["run_id"] == starts[0]["run_id"] || v["run_id"] == starts[1]["run_id"],
            "{v}"
        );
    }
}

#[test]
fn run_started_and_run_finished_fields() {
    let env = Env::new(MIXED).config(MIXED_CONFIG);
    let out = env.run_once(NOW);
    out.code(1);
    let names = env.event_names();
    assert_eq!(names.first().map(String::as_str), Some("run_started"));
    assert_eq!(names.last().map(String::as_str), Some("run_finished"));

    let started = &env.events("run_started")[0];
    assert_eq!(started["mode"], "once");
    assert_eq!(started["files"], json!([env.md_file()]));
    assert_eq!(started["autonomy"], "cautious");
    assert!(
        started["host"].as_str().is_some_and(|h| !h.is_empty()),
        "{started}"
    );
    assert!(started["pid"].as_u64().is_some_and(|p| p > 1), "{started}");
    assert_eq!(started["version"], env!("CARGO_PKG_VERSION"));

    let finished = &env.events("run_finished")[0];
    assert_eq!(finished["run_id"], started["run_id"]);
    assert_eq!(finished["succeeded"], 1, "{finished}");
    assert_eq!(finished["failed"], 1, "{finished}");
    assert_eq!(finished["queued"], 1, "{finished}");
    assert_eq!(finished["skipped"], 1, "{finished}");
    assert_eq!(finished["invalid"], 1, "{finished}");
    assert!(finished["duration_ms"].as_u64().is_some(), "{finished}");

    // One line per outcome, with the right event.
    assert_eq!(env.events("task_succeeded").len(), 1);
    assert_eq!(env.events("task_failed").len(), 1);
    assert_eq!(env.events("approval_requested").len(), 1);
    assert_eq!(env.events("task_skipped").len(), 1);
    assert_eq!(env.events("task_invalid").len(), 1);
}

#[test]
fn secret_input_values_are_written_as_stars() {
    let env = Env::new(
        "## Recurring\n\
         - [ ] @api {\"api_key\": \"sk-live-123\", \"Password\": \"hunter2\", \"user\": \"ann\", \
         \"nested\": {\"db_password\": \"pw-nested\", \"x\": 1}}\n\
         - [ ] @shell {\"cmd\": \"true\", \"env\": {\"MY_TOKEN\": \"tok-42\", \"HOME2\": \"/h\"}}\n",
    )
    .config("[tools.api]\ncommand = [\"true\"]\napproval = \"auto\"\n");
    env.run_once(NOW).code(0);

    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(
        ok[0]["input"],
        json!({"api_key": "***", "Password": "***", "user": "ann",
               "nested": {"db_password": "***", "x": 1}})
    );
    let req = env.events("approval_requested");
    assert_eq!(req.len(), 1, "{:#?}", env.audit());
    assert_eq!(
        req[0]["input"],
        json!({"cmd": "true", "env": {"MY_TOKEN": "***", "HOME2": "/h"}})
    );
    let text = env.audit_text();
    for secret in ["sk-live-123", "hunter2", "pw-nested", "tok-42"] {
        assert!(!text.contains(secret), "{secret} leaked into the audit log");
    }
}

#[test]
fn secrets_reach_neither_sqlite_nor_json_output() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"true\", \"env\": {\"API_KEY\": \"sk-live-123\"}}\n",
    );
    let out = env.cmd(["run", "--once", "--json"]).now(NOW).output();
    out.code(0);
    assert!(!out.stdout.contains("sk-live-123"), "{}", out.stdout);
    let approvals = env.cmd(["approvals", "--json"]).now(NOW).output();
    approvals.code(0);
    let list = approvals.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list[0]["input"]["env"]["API_KEY"], "***");
    assert!(list[0]["text"].as_str().unwrap().starts_with("@shell "));
    assert!(
        !approvals.stdout.contains("sk-live-123"),
        "{}",
        approvals.stdout
    );
    // Nothing in the database file either (WAL included).
    for file in ["heartbeat.db", "heartbeat.db-wal"] {
        let path = env.state().join(file);
        if let Ok(bytes) = std::fs::read(&path) {
            let hay = String::from_utf8_lossy(&bytes);
            assert!(!hay.contains("sk-live-123"), "secret in {}", path.display());
        }
    }
}

#[test]
fn task_invalid_is_written_once_per_run_with_position() {
    let env =
        Env::new("## Recurring\n- [ ] @log {\"text\": broken}\n- [ ] @log {\"text\": \"fine\"}\n");
    env.run_once(NOW).code(1);
    env.run_once("2026-05-01T10:10:00Z").code(1);
    let invalid = env.events("task_invalid");
    assert_eq!(invalid.len(), 2, "once per run: {invalid:#?}");
    assert_ne!(invalid[0]["run_id"], invalid[1]["run_id"]);
    for ev in &invalid {
        assert_eq!(ev["file"], env.md_file());
        assert_eq!(ev["line"], 2);
        // `- [ ] @log {"text": broken}`: the JSON error is at the `b` of `broken`, column 21.
        assert_eq!(ev["column"], 21, "{ev}");
        assert!(ev["error"].as_str().is_some_and(|e| !e.is_empty()), "{ev}");
    }
    assert_eq!(env.events("task_succeeded").len(), 2);
}

/// `ts` (docs/reference.md#clock): a line is stamped when its event happens (the run's start plus
/// the time elapsed since), while the schedule keeps the run's start.
#[test]
fn a_task_that_ends_later_is_stamped_later() {
    let env = Env::new("## Recurring\n- [ ] @nap {}\n- [ ] Stretch\n")
        .config("[tools.nap]\ncommand = [\"sleep\", \"2\"]\napproval = \"auto\"\n");
    env.run_once(NOW).code(0);
    let at = |event: &str| -> chrono::DateTime<chrono::Utc> {
        env.events(event)[0]["ts"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(env.events("run_started")[0]["ts"], ts(NOW));
    let started = at("run_started");
    let done = at("task_succeeded");
    assert!(
        done - started >= chrono::TimeDelta::seconds(2),
        "{started} → {done}"
    );
    assert!(at("run_finished") >= done);
    assert!(done - started < chrono::TimeDelta::seconds(60));
}

/// `run_started` says what started the run and how long after the previous run's start
/// (from the store: null on the first run); task lines and `run --json` tasks say the
/// trigger too: `schedule` for `run --once`, `manual` for work a person started (`approve`).
#[test]
fn runs_and_tasks_carry_their_trigger_and_the_time_since_the_last_run() {
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"beat\"}\n\
         ## One-time\n- [ ] @shell {\"cmd\": \"true\"}\n",
    );
    env.run_once(NOW).code(0);
    let out = env
        .cmd(["run", "--once", "--json"])
        .now("2026-05-01T10:01:30Z")
        .output();
    out.code(0);
    let doc = out.json();
    let tasks = doc["tasks"].as_array().unwrap();
    assert!(!tasks.is_empty(), "{doc:#}");
    assert!(tasks.iter().all(|t| t["trigger"] == "schedule"), "{doc:#}");
    env.cmd(["approve", "1"])
        .user("alice")
        .now("2026-05-01T10:02:00Z")
        .output()
        .code(0);

    let starts = env.events("run_started");
    assert_eq!(starts.len(), 3, "{:#?}", env.audit());
    assert!(starts[0]["since_last_run_s"].is_null(), "{}", starts[0]);
    assert_eq!(starts[1]["since_last_run_s"], 90, "{}", starts[1]);
    assert_eq!(starts[2]["since_last_run_s"], 30, "{}", starts[2]);
    let triggers: Vec<&Value> = starts.iter().map(|s| &s["trigger"]).collect();
    assert_eq!(
        triggers,
        [&json!("schedule"), &json!("schedule"), &json!("manual")]
    );
    assert_eq!(starts[2]["mode"], "approve");
    // The new keys follow the old ones.
    let keys: Vec<&str> = starts[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(&keys[keys.len() - 2..], ["since_last_run_s", "trigger"]);

    let ran = env.events("task_succeeded");
    let scheduled: Vec<&Value> = ran.iter().filter(|t| t["tool"] == "log").collect();
    assert_eq!(scheduled.len(), 2, "{ran:#?}");
    assert!(
        scheduled.iter().all(|t| t["trigger"] == "schedule"),
        "{ran:#?}"
    );
    let approved: Vec<&Value> = ran.iter().filter(|t| t["tool"] == "shell").collect();
    assert_eq!(approved.len(), 1, "{ran:#?}");
    assert_eq!(approved[0]["trigger"], "manual");
    assert!(approved[0]["reason"].is_null(), "{}", approved[0]);
}
