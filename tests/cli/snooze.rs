//! `heartbeat snooze` and `heartbeat unsnooze` (docs/reference.md#snooze): a task held back
//! until a time, said once per snooze, its slots meanwhile not missed, the file untouched.
//! Through the built binary with `--now`.

use serde_json::Value;

use crate::common::{Env, keys};

const MD: &str = "## Recurring\n\
### Daily at 02:00\n\
- [ ] @log {\"text\": \"nightly\"}\n\
- [ ] @log {\"text\": \"other\"}\n";

fn task_id(env: &Env, needle: &str) -> String {
    let doc = env.cmd(["check", "--json"]).output().json();
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["text"].as_str().unwrap().contains(needle))
        .unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn check_task(env: &Env, id: &str, now: &str) -> Value {
    let doc = env.cmd(["check", "--json"]).now(now).output().json();
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id)
        .unwrap()
        .clone()
}

fn runs_of(env: &Env, id: &str) -> usize {
    env.events("task_succeeded")
        .iter()
        .filter(|l| l["task_id"] == id)
        .count()
}

fn snoozed_skips(env: &Env, id: &str) -> usize {
    env.events("task_skipped")
        .iter()
        .filter(|l| l["task_id"] == id && l["reason"] == "snoozed")
        .count()
}

#[test]
fn a_snoozed_task_waits_until_its_end_said_once_and_misses_nothing() {
    let env = Env::new(MD).config("timezone = \"UTC\"\n");
    let nightly = task_id(&env, "nightly");
    let other = task_id(&env, "other");
    env.run_once("2026-05-01T03:00:00Z").code(0);
    let before = env.read_bytes("HEARTBEAT.md");
    let out = env
        .cmd([
            "snooze",
            &nightly[..5],
            "--for",
            "2d",
            "--reason",
            "on holiday",
        ])
        .now("2026-05-01T10:00:00Z")
        .output();
    out.code(0);
    assert!(out.stdout.contains(&nightly), "{}", out.stdout);
    let line = &env.events_n("task_snoozed", 1)[0];
    assert_eq!(
        line.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "ts", "event", "task_id", "file", "line", "by", "until", "reason"
        ]
    );
    assert_eq!(line["task_id"], nightly.as_str());
    assert_eq!(line["file"], env.md_file());
    assert_eq!(line["line"], 3);
    assert!(line["by"].as_str().unwrap().starts_with("cli:"), "{line}");
    assert_eq!(line["until"], "2026-05-03T10:00:00.000Z");
    assert_eq!(line["reason"], "on holiday");
    // check: snoozed, due again when it ends (its slot of that day is still open then).
    let t = check_task(&env, &nightly, "2026-05-01T11:00:00Z");
    assert_eq!(t["decision"], "snoozed", "{t:#}");
    assert_eq!(t["reason"], "snoozed");
    assert_eq!(t["next_due"], "2026-05-03T10:00:00.000Z");
    // status lists it.
    let st = env
        .cmd(["status", "--json"])
        .now("2026-05-01T11:00:00Z")
        .output()
        .json();
    let snoozed = st["snoozed"].as_array().unwrap();
    assert_eq!(snoozed.len(), 1, "{st:#}");
    assert_eq!(
        keys(&snoozed[0]),
        ["by", "reason", "task_id", "until"]
            .map(String::from)
            .into()
    );
    assert_eq!(snoozed[0]["task_id"], nightly.as_str());
    assert_eq!(snoozed[0]["until"], "2026-05-03T10:00:00.000Z");
    assert_eq!(snoozed[0]["reason"], "on holiday");
    let human = env.cmd(["status"]).now("2026-05-01T11:00:00Z").output();
    assert!(
        human.stdout.contains("snoozed:") && human.stdout.contains(&nightly),
        "{}",
        human.stdout
    );
    // Runs during the snooze: the other task runs, this one is skipped, said once.
    for now in [
        "2026-05-02T03:00:00Z",
        "2026-05-02T05:00:00Z",
        "2026-05-03T03:00:00Z",
    ] {
        env.run_once(now).code(0);
    }
    assert_eq!(runs_of(&env, &nightly), 1);
    assert_eq!(runs_of(&env, &other), 3);
    assert_eq!(snoozed_skips(&env, &nightly), 1, "{}", env.audit_text());
    // Over: it runs (today's slot is still open), and its snoozed slots are not missed.
    env.run_once("2026-05-03T11:00:00Z").code(0);
    assert_eq!(runs_of(&env, &nightly), 2);
    env.run_once("2026-05-04T03:00:00Z").code(0);
    assert!(env.events("task_missed").is_empty(), "{}", env.audit_text());
    assert_eq!(
        check_task(&env, &nightly, "2026-05-04T04:00:00Z")["decision"],
        "not_due"
    );
    let st = env
        .cmd(["status", "--json"])
        .now("2026-05-04T04:00:00Z")
        .output()
        .json();
    assert_eq!(st["snoozed"], serde_json::json!([]));
    // The file was never touched.
    assert_eq!(env.read_bytes("HEARTBEAT.md"), before);
}

#[test]
fn a_snooze_can_be_replaced_and_ended_and_refuses_what_it_cannot_do() {
    let env = Env::new(MD).config("timezone = \"Europe/Berlin\"\n");
    let nightly = task_id(&env, "nightly");
    // A local time in the configured zone: 09:00 CEST is 07:00 UTC.
    env.cmd(["snooze", &nightly, "--until", "2026-05-05 09:00"])
        .output()
        .code(0);
    assert_eq!(
        env.events_n("task_snoozed", 1)[0]["until"],
        "2026-05-05T07:00:00.000Z"
    );
    env.run_once("2026-05-01T10:00:00Z").code(0);
    assert_eq!(snoozed_skips(&env, &nightly), 1);
    // Snoozed again: its end is replaced, and the same snooze is not said again.
    env.cmd(["snooze", &nightly, "--until", "2026-05-02T00:00:00Z"])
        .now("2026-05-01T10:30:00Z")
        .output()
        .code(0);
    let st = env
        .cmd(["status", "--json"])
        .now("2026-05-01T11:00:00Z")
        .output()
        .json();
    assert_eq!(st["snoozed"].as_array().unwrap().len(), 1, "{st:#}");
    assert_eq!(st["snoozed"][0]["until"], "2026-05-02T00:00:00.000Z");
    assert_eq!(st["snoozed"][0]["reason"], Value::Null);
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(snoozed_skips(&env, &nightly), 1, "{}", env.audit_text());
    assert_eq!(runs_of(&env, &nightly), 0);
    // Unsnoozed by a prefix: audited, and the next run runs it.
    let out = env
        .cmd(["unsnooze", &nightly[..6]])
        .now("2026-05-01T11:30:00Z")
        .output();
    out.code(0);
    let line = &env.events_n("task_unsnoozed", 1)[0];
    assert_eq!(line["task_id"], nightly.as_str());
    assert_eq!(line["until"], "2026-05-02T00:00:00.000Z");
    assert_eq!(line["line"], 3);
    env.run_once("2026-05-01T12:00:00Z").code(0);
    assert_eq!(runs_of(&env, &nightly), 1);
    // Not snoozed any more; an unknown task; an end in the past; neither --for nor --until.
    let out = env
        .cmd(["unsnooze", &nightly])
        .now("2026-05-01T12:00:00Z")
        .output();
    out.code(2);
    assert!(out.stderr.contains("not snoozed"), "{}", out.stderr);
    let unknown = if nightly.starts_with("0000") {
        "ffff"
    } else {
        "0000"
    };
    let other = task_id(&env, "other");
    if !other.starts_with(unknown) {
        let out = env.cmd(["snooze", unknown, "--for", "1h"]).output();
        out.code(2);
        assert!(out.stderr.contains(unknown), "{}", out.stderr);
    }
    let out = env
        .cmd(["snooze", &nightly, "--until", "2026-04-01T00:00:00Z"])
        .output();
    out.code(2);
    assert!(out.stderr.contains("not later than now"), "{}", out.stderr);
    env.cmd(["snooze", &nightly]).output().code(2);
    assert_eq!(env.events("task_snoozed").len(), 2);
    // `log` knows the events.
    let log = env
        .cmd([
            "log",
            "--event",
            "task_snoozed",
            "--event",
            "task_unsnoozed",
        ])
        .output();
    log.code(0);
    assert_eq!(log.stdout.lines().count(), 3, "{}", log.stdout);
}

#[test]
fn slots_within_a_snooze_are_not_missed_even_when_no_run_saw_it() {
    let env = Env::new(MD).config("timezone = \"UTC\"\n");
    let nightly = task_id(&env, "nightly");
    env.run_once("2026-05-01T03:00:00Z").code(0);
    env.cmd(["snooze", &nightly, "--for", "2d"])
        .now("2026-05-01T10:00:00Z")
        .output()
        .code(0);
    // No run until the sixth: the slots of the 2nd and 3rd fell within the snooze, those of
    // the 4th and 5th did not.
    env.run_once("2026-05-06T03:00:00Z").code(0);
    let slots: Vec<String> = env
        .events("task_missed")
        .iter()
        .filter(|m| m["task_id"] == nightly.as_str())
        .map(|m| m["slot"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        slots,
        ["2026-05-04T02:00:00.000Z", "2026-05-05T02:00:00.000Z"],
        "{}",
        env.audit_text()
    );
    // Unsnoozed early, the rest of the window is not held any more.
    env.cmd(["snooze", &nightly, "--for", "3d"])
        .now("2026-05-06T10:00:00Z")
        .output()
        .code(0);
    env.cmd(["unsnooze", &nightly])
        .now("2026-05-07T10:00:00Z")
        .output()
        .code(0);
    env.run_once("2026-05-10T03:00:00Z").code(0);
    let later: Vec<String> = env
        .events("task_missed")
        .iter()
        .filter(|m| m["task_id"] == nightly.as_str())
        .skip(2)
        .map(|m| m["slot"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        later,
        ["2026-05-08T02:00:00.000Z", "2026-05-09T02:00:00.000Z"],
        "{}",
        env.audit_text()
    );
}
