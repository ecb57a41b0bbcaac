//! Active hours and schedules, timezone-aware, driven by `--now`
//! (docs/reference.md#when-a-task-is-due, docs/reference.md#active-hours). Europe/Berlin: CET (+01)
//! / CEST (+02); DST starts 2026-03-29 01:00Z (02:00 local jumps to 03:00) and ends 2026-10-25
//! 01:00Z (03:00 local falls back to 02:00).

use serde_json::Value;

use crate::common::*;

const LOG: &str =
    "## Recurring\n- [ ] @log {\"text\": \"tick\"}\n- [ ] @shell {\"cmd\": \"touch ran\"}\n";

/// Whether the run at `now` ran a `@log` task, judged by the audit lines of that run.
fn ran_at(env: &Env, now: &str) -> bool {
    let out = env.run_once(now);
    out.code(0);
    let all = env.audit();
    let run_id = all
        .iter()
        .rev()
        .find(|v| v["event"] == "run_started" || v["event"] == "run_skipped")
        .map(|v| v["run_id"].clone())
        .expect("a run line");
    let n = all
        .iter()
        .filter(|v| v["run_id"] == run_id && v["event"] == "task_succeeded" && v["tool"] == "log")
        .count();
    assert!(n <= 1, "ran twice in one run");
    n == 1
}

fn skipped_outside(env: &Env) -> Vec<Value> {
    env.events("run_skipped")
        .into_iter()
        .filter(|v| v["reason"] == "outside_active_hours")
        .collect()
}

#[test]
fn outside_active_hours_skips_the_run() {
    let env = Env::new(LOG)
        .config("timezone = \"UTC\"\nactive_hours = \"08:00-22:00\"\nautonomy = \"full\"\n");
    let out = env.run_once("2026-05-01T22:00:00Z");
    out.code(0);
    assert!(!env.exists("ran"));
    assert!(env.events("task_succeeded").is_empty());
    assert!(env.events("run_started").is_empty());
    let skipped = skipped_outside(&env);
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["next_active"], "2026-05-02T08:00:00.000Z");
    assert_ts_of(&skipped[0]["ts"], "2026-05-01T22:00:00Z");
    assert!(
        skipped[0]["run_id"].is_string(),
        "run_skipped belongs to a run: {}",
        skipped[0]
    );

    // Start inclusive, end exclusive.
    assert!(ran_at(&env, "2026-05-02T08:00:00Z"));
    assert!(ran_at(&env, "2026-05-02T21:59:00Z"));
    assert!(!ran_at(&env, "2026-05-02T07:59:59Z"));
}

#[test]
fn force_runs_outside_active_hours() {
    let env = Env::new(LOG)
        .config("timezone = \"UTC\"\nactive_hours = \"08:00-22:00\"\nautonomy = \"full\"\n");
    env.run_with("2026-05-01T03:00:00Z", &["--force"]).code(0);
    assert!(env.exists("ran"));
    assert_eq!(env.events("task_succeeded").len(), 2);
    assert!(skipped_outside(&env).is_empty());
}

#[test]
fn run_json_reports_the_skip() {
    let env = Env::new(LOG).config("timezone = \"UTC\"\nactive_hours = \"08:00-22:00\"\n");
    let out = env.run_with("2026-05-01T23:00:00Z", &["--json"]);
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["skipped"], "outside_active_hours", "{doc:#}");
    assert_eq!(doc["tasks"], serde_json::json!([]));
}

#[test]
fn midnight_crossing_window() {
    let env = Env::new(LOG).config("timezone = \"UTC\"\nactive_hours = \"22:00-06:00\"\n");
    assert!(ran_at(&env, "2026-05-01T22:00:00Z"));
    assert!(ran_at(&env, "2026-05-01T23:59:00Z"));
    assert!(ran_at(&env, "2026-05-02T00:00:00Z"));
    assert!(ran_at(&env, "2026-05-02T05:59:00Z"));
    assert!(!ran_at(&env, "2026-05-02T06:00:00Z"));
    assert!(!ran_at(&env, "2026-05-02T12:00:00Z"));
    assert!(!ran_at(&env, "2026-05-02T21:59:59Z"));
    let skipped = skipped_outside(&env);
    assert_eq!(skipped.len(), 3);
    for s in &skipped {
        assert_eq!(s["next_active"], "2026-05-02T22:00:00.000Z", "{s}");
    }
}

#[test]
fn window_is_local_time_in_the_configured_zone() {
    let env =
        Env::new(LOG).config("timezone = \"Europe/Berlin\"\nactive_hours = \"08:00-22:00\"\n");
    // 05:30Z = 07:30 CEST: not yet; next active 08:00 CEST = 06:00Z.
    assert!(!ran_at(&env, "2026-05-01T05:30:00Z"));
    assert_eq!(
        skipped_outside(&env)[0]["next_active"],
        "2026-05-01T06:00:00.000Z"
    );
    assert!(ran_at(&env, "2026-05-01T06:00:00Z"));
    // 20:30Z = 22:30 CEST: over.
    assert!(!ran_at(&env, "2026-05-01T20:30:00Z"));
    // In winter 08:00 CET is 07:00Z.
    assert!(!ran_at(&env, "2026-01-15T06:59:00Z"));
    assert!(ran_at(&env, "2026-01-15T07:00:00Z"));
}

#[test]
fn tz_variable_is_the_default_zone() {
    let env = Env::new(LOG).config("active_hours = \"08:00-22:00\"\n");
    // 07:00Z: 09:00 in Berlin (active), 07:00 in UTC (not).
    let out = env
        .cmd(["run", "--once"])
        .now("2026-05-01T07:00:00Z")
        .env("TZ", "Europe/Berlin")
        .output();
    out.code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    let out = env
        .cmd(["run", "--once"])
        .now("2026-05-01T07:00:00Z")
        .env("TZ", "UTC")
        .output();
    out.code(0);
    assert_eq!(skipped_outside(&env).len(), 1);
}

#[test]
fn active_days() {
    let env = Env::new(LOG).config(
        "timezone = \"UTC\"\nactive_days = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]\n",
    );
    // 2026-05-02 is a Saturday.
    assert!(!ran_at(&env, "2026-05-02T10:00:00Z"));
    assert_eq!(
        skipped_outside(&env)[0]["next_active"],
        "2026-05-04T00:00:00.000Z"
    );
    assert!(ran_at(&env, "2026-05-04T00:00:00Z"));
}

const DAILY: &str = "## Recurring\n\n### Daily at 02:30\n- [ ] @log {\"text\": \"daily\"}\n";
const BERLIN: &str = "timezone = \"Europe/Berlin\"\n";

#[test]
fn daily_at_on_the_spring_forward_day() {
    let env = Env::new(DAILY).config(BERLIN);
    // 2026-03-28 02:30 CET = 01:30Z: a normal day.
    assert!(!ran_at(&env, "2026-03-28T01:29:00Z"));
    assert!(ran_at(&env, "2026-03-28T01:30:00Z"));
    assert!(!ran_at(&env, "2026-03-28T05:00:00Z"), "once per day");
    // 2026-03-29: 02:30 does not exist. 00:00 and 01:59 local are before it.
    assert!(!ran_at(&env, "2026-03-28T23:00:00Z"));
    assert!(!ran_at(&env, "2026-03-29T00:59:00Z"));
    // 03:10 CEST (01:10Z) is the first run after 02:30 that day: it runs.
    assert!(ran_at(&env, "2026-03-29T01:10:00Z"));
    assert!(!ran_at(&env, "2026-03-29T01:40:00Z"), "once per day");
    assert!(!ran_at(&env, "2026-03-29T21:00:00Z"), "once per day");
    // 2026-03-30 02:30 CEST = 00:30Z.
    assert!(!ran_at(&env, "2026-03-30T00:20:00Z"));
    assert!(ran_at(&env, "2026-03-30T00:30:00Z"));
}

#[test]
fn daily_at_on_the_fall_back_day() {
    let env = Env::new(DAILY).config(BERLIN);
    assert!(
        ran_at(&env, "2026-10-24T00:30:00Z"),
        "02:30 CEST the day before"
    );
    // 2026-10-25: 02:30 happens at 00:30Z (CEST) and again at 01:30Z (CET).
    assert!(!ran_at(&env, "2026-10-25T00:29:00Z"));
    assert!(
        ran_at(&env, "2026-10-25T00:30:00Z"),
        "the first 02:30 runs it"
    );
    assert!(
        !ran_at(&env, "2026-10-25T01:30:00Z"),
        "the second 02:30 does not"
    );
    assert!(!ran_at(&env, "2026-10-25T02:00:00Z"));
    // 2026-10-26 02:30 CET = 01:30Z.
    assert!(!ran_at(&env, "2026-10-26T01:29:00Z"));
    assert!(ran_at(&env, "2026-10-26T01:30:00Z"));
}

#[test]
fn daily_at_catches_up_later_that_day_but_does_not_replay_missed_days() {
    let env = Env::new(DAILY).config(BERLIN);
    assert!(ran_at(&env, "2026-05-01T00:30:00Z"));
    // 2026-05-02 and 05-03 are missed; a run on 05-04 at 18:00 CEST runs it once.
    assert!(ran_at(&env, "2026-05-04T16:00:00Z"));
    assert!(!ran_at(&env, "2026-05-04T17:00:00Z"));
    assert_eq!(env.events("task_succeeded").len(), 2);
}

#[test]
fn weekdays_and_named_days() {
    let env = Env::new(
        "## Recurring\n\n### Weekdays at 09:00\n- [ ] @log {\"text\": \"weekday\"}\n\n\
         ### Saturdays and Sundays at 09:00\n- [ ] @log {\"text\": \"weekend\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    let texts_at = |now: &str| -> Vec<String> {
        let before = env.events("task_succeeded").len();
        env.run_once(now).code(0);
        env.events("task_succeeded")[before..]
            .iter()
            .map(|v| v["output"].as_str().unwrap().to_string())
            .collect()
    };
    // Friday 2026-05-01.
    assert_eq!(texts_at("2026-05-01T08:59:00Z"), Vec::<String>::new());
    assert_eq!(texts_at("2026-05-01T09:00:00Z"), vec!["weekday"]);
    // Saturday.
    assert_eq!(texts_at("2026-05-02T09:30:00Z"), vec!["weekend"]);
    // Monday.
    assert_eq!(texts_at("2026-05-04T12:00:00Z"), vec!["weekday"]);
}

#[test]
fn every_is_due_from_the_last_attempt() {
    let env = Env::new(
        "## Recurring\n\n### Every 6h\n- [ ] @log {\"text\": \"six\"}\n- [ ] @shell {\"cmd\": \"true\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    assert!(ran_at(&env, "2026-05-01T10:00:00Z"));
    assert_eq!(env.events("approval_requested").len(), 1);
    // Due six hours after the last attempt, less a slack of a minute (D/50, at most 60 s).
    assert!(!ran_at(&env, "2026-05-01T15:58:59Z"));
    let check = env
        .cmd(["check", "--json"])
        .now("2026-05-01T12:00:00Z")
        .output();
    check.code(0);
    let doc = check.json();
    assert_eq!(doc["tasks"][0]["decision"], "not_due", "{doc:#}");
    assert_eq!(doc["tasks"][0]["next_due"], "2026-05-01T15:59:00.000Z");
    assert_eq!(doc["tasks"][0]["schedule"], "Every 6h");
    assert!(ran_at(&env, "2026-05-01T15:59:00Z"));
    assert!(!ran_at(&env, "2026-05-01T21:00:00Z"));
    assert!(ran_at(&env, "2026-05-02T03:00:00Z"));
    // The queued shell task was attempted when it was queued; it stays pending, once.
    assert_eq!(env.events("approval_requested").len(), 1);
}

#[test]
fn one_time_at_is_not_due_before_its_local_time() {
    let md = "## One-time\n\n### At 2026-12-24 18:00\n- [ ] @log {\"text\": \"call grandma\"}\n\n\
              ### At 2026-12-31\n- [ ] @log {\"text\": \"new year's eve\"}\n";
    let env = Env::new(md).config(BERLIN);
    let check = env
        .cmd(["check", "--json"])
        .now("2026-12-24T10:00:00Z")
        .output();
    check.code(0);
    let doc = check.json();
    assert_eq!(doc["tasks"][0]["decision"], "not_due", "{doc:#}");
    // 18:00 CET = 17:00Z.
    assert_eq!(doc["tasks"][0]["next_due"], "2026-12-24T17:00:00.000Z");
    assert_eq!(doc["tasks"][0]["schedule"], "At 2026-12-24 18:00");
    assert_eq!(doc["tasks"][1]["next_due"], "2026-12-30T23:00:00.000Z");

    assert!(!ran_at(&env, "2026-12-24T16:59:59Z"));
    assert_eq!(env.read("HEARTBEAT.md"), md);
    assert!(ran_at(&env, "2026-12-24T17:00:00Z"));
    assert!(
        env.read("HEARTBEAT.md")
            .contains("- [x] @log {\"text\": \"call grandma\"}")
    );
    assert!(!ran_at(&env, "2026-12-30T22:59:00Z"));
    assert!(
        ran_at(&env, "2027-01-05T12:00:00Z"),
        "late is fine for a one-time task"
    );
    assert!(!ran_at(&env, "2027-01-06T12:00:00Z"));
}

#[test]
fn active_hours_on_dst_days_follow_the_wall_clock() {
    let active = |env: &Env, now: &str| -> (bool, Value) {
        let doc = env.cmd(["check", "--json"]).now(now).output().json();
        (
            doc["active"].as_bool().expect("active"),
            doc["next_active"].clone(),
        )
    };
    // Spring: 02:30 does not exist on 2026-03-29; the window opens when the clock jumps to
    // 03:00 CEST (01:00Z) and closes at 04:00 CEST (02:00Z).
    let env =
        Env::new(LOG).config("timezone = \"Europe/Berlin\"\nactive_hours = \"02:30-04:00\"\n");
    assert_eq!(
        active(&env, "2026-03-29T00:59:00Z"),
        (false, serde_json::json!("2026-03-29T01:00:00.000Z"))
    );
    assert!(active(&env, "2026-03-29T01:00:00Z").0);
    assert!(active(&env, "2026-03-29T01:59:00Z").0);
    assert_eq!(
        active(&env, "2026-03-29T02:00:00Z"),
        (false, serde_json::json!("2026-03-30T00:30:00.000Z"))
    );
    // Fall: 02:00-03:00 local happens twice on 2026-10-25 (00:00-01:00Z CEST, 01:00-02:00Z
    // CET); both are inside the window.
    let env =
        Env::new(LOG).config("timezone = \"Europe/Berlin\"\nactive_hours = \"02:00-03:00\"\n");
    assert!(!active(&env, "2026-10-24T23:59:00Z").0);
    assert!(active(&env, "2026-10-25T00:00:00Z").0);
    assert!(active(&env, "2026-10-25T01:30:00Z").0);
    assert_eq!(
        active(&env, "2026-10-25T02:00:00Z"),
        (false, serde_json::json!("2026-10-26T01:00:00.000Z"))
    );
    assert!(!env.state().exists());
}

#[test]
fn a_one_time_reminder_with_a_date_is_given_once_when_due() {
    let md = "## One-time\n\n### At 2026-06-01 09:00\n- [ ] Call the dentist\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    env.run_once("2026-06-01T08:59:00Z").code(0);
    assert!(env.events("task_reminded").is_empty());
    let out = env.run_once("2026-06-01T09:00:00Z");
    out.code(0);
    assert!(out.stdout.contains("Call the dentist"), "{}", out.stdout);
    env.run_once("2026-06-02T09:00:00Z").code(0);
    assert_eq!(env.events("task_reminded").len(), 1);
    assert_eq!(env.read("HEARTBEAT.md"), md);
}

#[test]
fn every_keeps_its_rhythm_under_a_crontab_that_starts_a_little_late() {
    // Cron starts each run some milliseconds after its minute, never by the same amount.
    for (heading, step_min, runs, want) in [
        ("Every 15m", 5, 13, vec![0, 15, 30, 45, 60]),
        ("Every 1h", 15, 9, vec![0, 60, 120]),
    ] {
        let env = Env::new(&format!(
            "## Recurring\n### {heading}\n- [ ] @log {{\"text\": \"tick\"}}\n"
        ))
        .config("timezone = \"UTC\"\n");
        let late_ms = [40, 3, 250, 12, 900, 7, 30, 1, 600, 55, 8, 300, 2];
        let mut ran = Vec::new();
        for (i, late) in late_ms.iter().take(runs).enumerate() {
            let minute = i * step_min;
            let now = format!(
                "2026-05-01T{:02}:{:02}:00.{late:03}Z",
                10 + minute / 60,
                minute % 60,
            );
            if ran_at(&env, &now) {
                ran.push(minute);
            }
        }
        assert_eq!(ran, want, "{heading}");
    }
}
