//! Schedules people already write (docs/reference.md#schedule-headings): cron lines and a
//! zone per heading, through the binary with a fixed clock.

use crate::common::Env;

fn succeeded_texts(env: &Env) -> Vec<String> {
    env.events("task_succeeded")
        .iter()
        .map(|e| e["input"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_heading_in_another_zone_runs_at_that_zones_time() {
    let env = Env::new(
        "## Recurring\n### Daily at 09:00 in America/New_York\n- [ ] @log {\"text\": \"ny\"}\n\
         ### Daily at 09:00 in Asia/Tokyo\n- [ ] @log {\"text\": \"tokyo\"}\n\
         ### Daily at 09:00\n- [ ] @log {\"text\": \"berlin\"}\n",
    )
    .config("timezone = \"Europe/Berlin\"\n");
    // 00:30 UTC on 4 May: 09:30 in Tokyo, 02:30 in Berlin, and 20:30 on 3 May in New York,
    // whose 09:00 slot of the 3rd is still open (caught up).
    env.run_once("2026-05-04T00:30:00Z").code(0);
    assert_eq!(succeeded_texts(&env), ["ny", "tokyo"]);
    // 07:30 UTC: 09:30 in Berlin.
    env.run_once("2026-05-04T07:30:00Z").code(0);
    assert_eq!(succeeded_texts(&env), ["ny", "tokyo", "berlin"]);
    // 13:30 UTC: 09:30 in New York, the 4th.
    env.run_once("2026-05-04T13:30:00Z").code(0);
    assert_eq!(succeeded_texts(&env), ["ny", "tokyo", "berlin", "ny"]);
    // check shows when each is next due.
    let out = env
        .cmd(["check", "--json"])
        .now("2026-05-04T14:00:00Z")
        .output();
    let doc = out.json();
    let next: Vec<&str> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["next_due"].as_str().unwrap())
        .collect();
    assert_eq!(
        next,
        [
            "2026-05-05T13:00:00.000Z",
            "2026-05-05T00:00:00.000Z",
            "2026-05-05T07:00:00.000Z"
        ]
    );
}

#[test]
fn an_unknown_zone_makes_the_tasks_below_invalid() {
    let env = Env::new(
        "## Recurring\n### Daily at 09:00 in Europe/Berln\n- [ ] @log {\"text\": \"x\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    let out = env.run_once("2026-05-04T10:00:00Z");
    out.code(1);
    let invalid = env.events("task_invalid");
    assert_eq!(invalid.len(), 1, "{:?}", env.audit());
    let error = invalid[0]["error"].as_str().unwrap();
    assert!(
        error.contains("\"Europe/Berln\" is not an IANA time zone name"),
        "{error}"
    );
    assert!(error.contains("did you mean \"Europe/Berlin\""), "{error}");
}

#[test]
fn a_pasted_crontab_line_runs_on_weekdays_at_its_time_across_a_dst_night() {
    // 02:30 on weekdays in Berlin; the night of 29 March 2026 skips 02:00-03:00 (a Sunday),
    // and on Monday 30 March the slot is an ordinary 02:30 CEST.
    let env = Env::new("## Recurring\n### 30 2 * * 1-5\n- [ ] @log {\"text\": \"c\"}\n")
        .config("timezone = \"Europe/Berlin\"\n");
    // Friday 27 March, 02:40 CET.
    env.run_once("2026-03-27T01:40:00Z").code(0);
    // Saturday and Sunday: no slot.
    env.run_once("2026-03-28T01:40:00Z").code(0);
    env.run_once("2026-03-29T01:40:00Z").code(0);
    // Monday 30 March, 02:40 CEST.
    env.run_once("2026-03-30T00:40:00Z").code(0);
    assert_eq!(succeeded_texts(&env), ["c", "c"]);
    assert!(env.events("task_missed").is_empty(), "{:?}", env.audit());
}

#[test]
fn check_warns_of_a_schedule_whose_slots_never_meet_active_hours() {
    let env = Env::new(
        "## Recurring\n### Daily at 21:00\n- [ ] @log {\"text\": \"late\"}\n\
         ### Sundays at 10:00\n- [ ] @log {\"text\": \"sunday\"}\n\
         ### Daily at 02:00\n- [ ] @log {\"text\": \"caught up at 08:00\"}\n",
    )
    .config(
        "timezone = \"Europe/Berlin\"\nactive_hours = \"08:00-20:00\"\n\
         active_days = [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]\n",
    );
    let out = env
        .cmd(["check", "--json"])
        .now("2026-05-04T10:00:00Z")
        .output();
    out.code(0);
    let doc = out.json();
    let warned: Vec<u64> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["message"]
                .as_str()
                .unwrap()
                .starts_with("its schedule's slots never fall inside active hours")
        })
        .map(|p| p["line"].as_u64().unwrap())
        .collect();
    assert_eq!(warned, [3, 5], "{doc:#}");
}

#[test]
fn max_lateness_keeps_a_slot_from_running_late_and_reports_it_too_late() {
    let env = Env::new(
        "## Recurring\n### Daily at 02:00\n- [ ] @log {\"text\": \"backup\"}\n\
         ### Cron 0 6 * * *\n- [ ] @late {}\n",
    )
    .config(
        "timezone = \"UTC\"\nmax_lateness = \"2h\"\n\
         [tools.late]\ncommand = [\"true\"]\napproval = \"auto\"\nmax_lateness = \"30m\"\n",
    );
    // 03:00: within two hours of 02:00, it runs.
    env.run_once("2026-05-01T03:00:00Z").code(0);
    assert_eq!(succeeded_texts(&env), ["backup"]);
    // The next day cron runs at 05:00: too late for 02:00; not run, and said so.
    env.run_once("2026-05-02T05:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    // (The 06:00 slot of the 1st, which no run saw in time, is reported too.)
    let missed: Vec<_> = env
        .events("task_missed")
        .into_iter()
        .map(|m| {
            (
                m["line"].as_u64().unwrap(),
                m["slot"].clone(),
                m["reason"].clone(),
            )
        })
        .collect();
    assert_eq!(
        missed,
        [
            (3, "2026-05-02T02:00:00.000Z".into(), "too_late".into()),
            (5, "2026-05-01T06:00:00.000Z".into(), "too_late".into())
        ]
    );
    // The tool's own max_lateness: 06:20 is in time, 06:45 the next day is not.
    env.run_once("2026-05-02T06:20:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
    env.run_once("2026-05-03T06:45:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
    let late: Vec<_> = env
        .events("task_missed")
        .into_iter()
        .filter(|m| m["slot"] == "2026-05-03T06:00:00.000Z")
        .collect();
    assert_eq!(late.len(), 1, "{:?}", env.audit());
    assert_eq!(late[0]["reason"], "too_late");
    // check says when it is next due.
    let doc = env
        .cmd(["check", "--json"])
        .now("2026-05-03T06:50:00Z")
        .output()
        .json();
    assert_eq!(doc["tasks"][1]["decision"], "not_due");
    assert_eq!(doc["tasks"][1]["next_due"], "2026-05-04T06:00:00.000Z");
}

#[test]
fn jitter_is_the_same_in_every_clone_and_differs_across_tasks() {
    let md = "## Recurring\n### Daily at 09:00 ~30m\n- [ ] @log {\"text\": \"a\"}\n\
              - [ ] @log {\"text\": \"b\"}\n";
    let next_dues = |env: &Env| -> Vec<String> {
        let doc = env
            .cmd(["check", "--json"])
            .now("2026-05-04T06:00:00Z")
            .output()
            .json();
        doc["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["next_due"].as_str().unwrap().to_string())
            .collect()
    };
    let one = Env::new(md).config("timezone = \"UTC\"\n");
    let two = Env::new(md).config("timezone = \"UTC\"\n");
    let (a, b) = (next_dues(&one), next_dues(&two));
    // Two directories, two state dirs, two processes: the same times.
    assert_eq!(a, b);
    assert_eq!(a, next_dues(&one));
    // Each within [09:00, 09:30), and not the same for both tasks.
    for t in &a {
        assert!(
            t.as_str() >= "2026-05-04T09:00:00.000Z" && t.as_str() < "2026-05-04T09:30:00.000Z",
            "{t}"
        );
    }
    assert_ne!(a[0], a[1]);
    // A run before a task's time does not run it; one after does.
    let first: &str = a.iter().min().unwrap();
    let before =
        chrono::DateTime::parse_from_rfc3339(first).unwrap() - chrono::Duration::seconds(1);
    one.run_once(&before.to_rfc3339()).code(0);
    assert!(one.events("task_succeeded").is_empty());
    one.run_once("2026-05-04T09:30:00Z").code(0);
    assert_eq!(one.events("task_succeeded").len(), 2);
}

#[test]
fn check_warns_of_a_one_time_date_already_past_until_it_ran() {
    let env = Env::new(
        "## One-time\n### At 2025-05-01 09:00\n- [ ] @log {\"text\": \"typo year\"}\n\
         ### At 2026-06-01 09:00\n- [ ] @log {\"text\": \"later\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    let warnings = |env: &Env| -> Vec<(u64, String)> {
        let doc = env
            .cmd(["check", "--json"])
            .now("2026-05-03T10:00:00Z")
            .output()
            .json();
        doc["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["severity"] == "warning")
            .map(|p| {
                (
                    p["line"].as_u64().unwrap(),
                    p["message"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let w = warnings(&env);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, 3);
    assert!(
        w[0].1
            .starts_with("its date 2025-05-01 09:00 UTC is already past"),
        "{w:?}"
    );
    assert!(w[0].1.contains("is the year right?"), "{w:?}");
    // Once it ran (and was ticked), nothing more to say.
    env.run_once("2026-05-03T10:00:00Z").code(0);
    assert!(warnings(&env).is_empty());
}
