//! Typos in HEARTBEAT.md fail closed (docs/reference.md#schedule-headings,
//! docs/reference.md#sections) and `run` shows the files' warnings
//! (docs/reference.md#file-warnings).

use serde_json::Value;

use crate::common::*;

/// Sunday 2026-11-23 10:00 UTC: a month before the Christmas task.
const NOV: &str = "2026-11-23T10:00:00Z";

const RECURRING_EXPECTED: &str = r#"expected "Every <duration>", "Daily at HH:MM", "Weekdays at HH:MM", "Weekends at HH:MM", "<Day>s at HH:MM""#;
const ONE_TIME_EXPECTED: &str = r#"expected "At YYYY-MM-DD HH:MM" or "At YYYY-MM-DD""#;

fn check(env: &Env) -> Value {
    env.cmd(["check", "--json"]).now(NOV).output().json()
}

fn decisions(doc: &Value) -> Vec<(u64, String)> {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["line"].as_u64().unwrap(),
                t["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn problems(doc: &Value, severity: &str) -> Vec<(u64, u64, String)> {
    doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["severity"] == severity)
        .map(|p| {
            (
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
                p["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_mistyped_date_never_runs_the_one_time_task_early() {
    let md = "## One-time\n\n### At 2026-12-24 6pm\n- [ ] @log {\"text\": \"Call grandma\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let out = env.run_once(NOV);
    out.code(1);
    assert!(
        out.stdout.contains("HEARTBEAT.md:3:1") && out.stdout.contains(ONE_TIME_EXPECTED),
        "{out:?}"
    );
    assert!(env.events("task_succeeded").is_empty(), "{:?}", env.audit());
    let invalid = env.events("task_invalid");
    assert_eq!(invalid.len(), 1, "{:?}", env.audit());
    assert_eq!(
        (invalid[0]["line"].as_u64(), invalid[0]["column"].as_u64()),
        (Some(3), Some(1))
    );
    assert!(
        invalid[0]["error"]
            .as_str()
            .unwrap()
            .contains("At 2026-12-24 6pm")
    );
    // Not ticked, and still not run on Christmas Eve: the heading must be fixed first.
    assert_eq!(env.read("HEARTBEAT.md"), md);
    env.run_once("2026-12-24T19:00:00Z").code(1);
    assert!(env.events("task_succeeded").is_empty());

    let doc = check(&env);
    assert_eq!(decisions(&doc), vec![(4, "invalid".to_string())]);
    let errors = problems(&doc, "error");
    assert_eq!(errors.len(), 1, "{doc:#}");
    assert_eq!((errors[0].0, errors[0].1), (3, 1));
    assert!(errors[0].2.contains(ONE_TIME_EXPECTED), "{doc:#}");
}

#[test]
fn schedule_words_that_do_not_parse_make_every_task_below_invalid() {
    let md = "## Recurring\n\
              ### Evry 6h\n- [ ] @log {\"text\": \"a\"}\n- [ ] plain b\n\
              ### Daily at 9:00\n- [ ] @log {\"text\": \"c\"}\n\
              ### Hourly\n- [ ] @log {\"text\": \"d\"}\n\
              ### Every day at 09:00\n- [ ] @log {\"text\": \"e\"}\n\
              ### 0 9 * 1-5\n- [ ] @log {\"text\": \"f\"}\n\
              ### At 2026-12-24\n- [ ] @log {\"text\": \"g\"}\n\
              ### Mon at 9\n- [ ] @log {\"text\": \"h\"}\n\
              ### Chores\n- [ ] @log {\"text\": \"i\"}\n\
              ## One-time\n\
              ### Every 6h\n- [ ] @log {\"text\": \"j\"}\n\
              ### Notes for later\n- [ ] @log {\"text\": \"k\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let doc = check(&env);
    let inv = |line: u64| (line, "invalid".to_string());
    assert_eq!(
        decisions(&doc),
        vec![
            inv(3),
            inv(4),
            inv(6),
            inv(8),
            inv(10),
            inv(12),
            inv(14),
            inv(16),
            (18, "run".to_string()),
            inv(21),
            (23, "run".to_string()),
        ],
        "{doc:#}"
    );
    // One error per heading, at the heading, with the forms its section accepts.
    let errors = problems(&doc, "error");
    let at: Vec<(u64, u64)> = errors.iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(
        at,
        vec![
            (2, 1),
            (5, 1),
            (7, 1),
            (9, 1),
            (11, 1),
            (13, 1),
            (15, 1),
            (20, 1)
        ],
        "{doc:#}"
    );
    for (line, _, msg) in &errors[..7] {
        assert!(msg.contains(RECURRING_EXPECTED), "line {line}: {msg}");
    }
    assert!(errors[0].2.contains("\"Evry 6h\""), "{}", errors[0].2);
    assert!(errors[7].2.contains(ONE_TIME_EXPECTED), "{}", errors[7].2);

    // The run runs only the two tasks under plain titles and audits the rest as invalid.
    let out = env.run_once(NOV);
    out.code(1);
    // One summary line per bad heading, saying how many tasks it holds back.
    assert_eq!(
        count_matches(&out.stdout, "HEARTBEAT.md:2:1:"),
        1,
        "{out:?}"
    );
    assert!(
        out.stdout.lines().any(|l| l
            .starts_with("INVALID   HEARTBEAT.md:2:1: schedule heading \"Evry 6h\"")
            && l.ends_with(" (2 tasks)")),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("heartbeat: 2 succeeded, 9 invalid"),
        "{out:?}"
    );
    let ran: Vec<u64> = env
        .events("task_succeeded")
        .iter()
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert_eq!(ran, vec![18, 23], "{:?}", env.audit());
    assert!(env.events("task_reminded").is_empty(), "{:?}", env.audit());
    let invalid: Vec<(u64, u64)> = env
        .events("task_invalid")
        .iter()
        .map(|e| (e["line"].as_u64().unwrap(), e["column"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        invalid,
        vec![
            (2, 1),
            (2, 1),
            (5, 1),
            (7, 1),
            (9, 1),
            (11, 1),
            (13, 1),
            (15, 1),
            (20, 1)
        ]
    );
}

#[test]
fn a_schedule_written_another_way_or_at_another_level_never_runs_its_task_now() {
    // Each heading means "later", in a form or at a level that sets no schedule: the task
    // below must not run on 2026-11-23, and the error says what was probably meant.
    let md = "## One-time\n\
              #### At 2027-01-01 10:00\n- [ ] @log {\"text\": \"a\"}\n\
              ### On 2026-12-24\n- [ ] @log {\"text\": \"b\"}\n\
              ### Renew before 2026-12-24 18:00\n- [ ] @log {\"text\": \"c\"}\n\
              ## Recurring\n\
              ### Dialy at 07:30\n- [ ] @log {\"text\": \"d\"}\n\
              ### Backups on Sundays\n- [ ] @log {\"text\": \"e\"}\n\
              ### Early tasks\n- [ ] @log {\"text\": \"f\"}\n\
              ## Every 6h\n- [ ] @log {\"text\": \"g\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let doc = check(&env);
    let inv = |line: u64| (line, "invalid".to_string());
    assert_eq!(
        decisions(&doc),
        vec![
            inv(3),
            inv(5),
            inv(7),
            inv(10),
            inv(12),
            (14, "run".to_string()),
            (16, "ignored".to_string()),
        ],
        "{doc:#}"
    );
    let errors = problems(&doc, "error");
    let said = |line: u64, text: &str| {
        errors
            .iter()
            .any(|(l, _, msg)| *l == line && msg.contains(text))
    };
    assert!(
        said(
            2,
            "is a level-4 heading, and only a level-3 heading sets a schedule"
        ),
        "{errors:#?}"
    );
    assert!(said(4, "(did you mean \"At 2026-12-24\"?)"), "{errors:#?}");
    assert!(said(6, ONE_TIME_EXPECTED), "{errors:#?}");
    assert!(said(9, "(did you mean \"Daily at 07:30\"?)"), "{errors:#?}");
    assert!(said(11, RECURRING_EXPECTED), "{errors:#?}");
    let warnings = problems(&doc, "warning");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!((warnings[0].0, warnings[0].1), (15, 1));
    assert!(warnings[0].2.contains("never run"), "{warnings:#?}");

    let out = env.run_once(NOV);
    out.code(1);
    let ran: Vec<u64> = env
        .events("task_succeeded")
        .iter()
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert_eq!(ran, vec![14], "{:?}", env.audit());
    assert_eq!(env.events("task_invalid").len(), 5, "{:?}", env.audit());
    assert!(out.stderr.contains("HEARTBEAT.md:15:1: warning"), "{out:?}");
    assert_eq!(env.read("HEARTBEAT.md"), md);
}

#[test]
fn near_miss_headings_and_empty_items_are_warnings() {
    let md = "# Heartbeat\n\
              ## Recurring tasks\n- [ ] @log {\"text\": \"a\"}\n\
              ## Recurring:\n- [ ] @log {\"text\": \"b\"}\n\
              # Recurring\n- [ ] @log {\"text\": \"c\"}\n\
              ## One-time tasks\n- [ ] @log {\"text\": \"d\"}\n\
              ## Recurring\n\
              ### Once\n- [ ] @log {\"text\": \"e\"}\n\
              - []\n\
              - [ ]\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let doc = check(&env);
    let warnings = problems(&doc, "warning");
    let want = [
        (
            2,
            "heading \"Recurring tasks\" is not a section name; did you mean \"## Recurring\"?",
        ),
        (
            4,
            "heading \"Recurring:\" is not a section name; did you mean \"## Recurring\"?",
        ),
        (
            6,
            "heading \"Recurring\" is not a section name; did you mean \"## Recurring\"?",
        ),
        (
            8,
            "heading \"One-time tasks\" is not a section name; did you mean \"## One-time\"?",
        ),
        (
            11,
            "heading \"Once\" is not a section name; did you mean \"## Once\"?",
        ),
    ];
    let got: Vec<(u64, &str)> = warnings.iter().map(|w| (w.0, w.2.as_str())).collect();
    assert_eq!(&got[..5], &want[..], "{doc:#}");
    assert_eq!(got.len(), 7, "{doc:#}");
    assert_eq!((got[5].0, got[6].0), (13, 14), "{doc:#}");
    assert!(warnings.iter().all(|w| w.1 >= 1));
    // Warnings alone do not fail check.
    env.cmd(["check"]).now(NOV).output().code(0);

    // `run` shows the same warnings on stderr once, also with -q, and exits 0.
    let text_warnings: Vec<String> = env
        .cmd(["check"])
        .now(NOV)
        .output()
        .stdout
        .lines()
        .filter(|l| l.contains(": warning: "))
        .map(str::to_string)
        .collect();
    assert_eq!(text_warnings.len(), 7);
    for args in [&[][..], &["-q"][..], &["--json"][..], &["--dry-run"][..]] {
        let out = env.run_with(NOV, args);
        out.code(0);
        for w in &text_warnings {
            assert_eq!(count_matches(&out.stderr, w), 1, "{w}\n{args:?} {out:?}");
        }
        assert!(!out.stdout.contains("warning"), "{args:?} {out:?}");
    }
}

#[test]
fn run_prints_no_warnings_for_a_clean_file() {
    let md = "## Recurring\n### Every 6h\n- [ ] @log {\"text\": \"a\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let out = env.run_with(NOV, &["-q"]);
    out.code(0);
    assert_eq!(out.stderr, "", "{out:?}");
}

#[test]
fn the_daemon_prints_the_warnings_when_they_change() {
    let md = "## Recurring tasks\n- [ ] x\n## Recurring\n- [ ] @log {\"text\": \"a\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let ticks = |n: usize| {
        wait_until("the daemon's ticks", WAIT, || {
            count_matches(&env.audit_text(), "\"event\":\"run_finished\"") >= n
        })
    };
    let d = env.cmd(["daemon", "--every", "1h"]).spawn_guarded();
    ticks(1);
    d.signal(Signal::SIGUSR1);
    ticks(2);
    env.write("HEARTBEAT.md", format!("{md}- []\n"));
    d.signal(Signal::SIGUSR1);
    ticks(3);
    d.signal(Signal::SIGUSR1);
    ticks(4);
    d.signal(Signal::SIGTERM);
    let out = d.finish(WAIT);
    out.code(0);
    let near_miss = "heartbeat: HEARTBEAT.md:1:1: warning: heading \"Recurring tasks\" is not a \
                     section name; did you mean \"## Recurring\"?";
    // At the first tick, and again with the new warning after the edit; not at every tick.
    assert_eq!(count_matches(&out.stderr, near_miss), 2, "{out:?}");
    assert_eq!(
        count_matches(
            &out.stderr,
            "HEARTBEAT.md:5:3: warning: \"[]\" is not a task marker"
        ),
        1,
        "{out:?}"
    );
}

#[test]
fn a_tool_call_in_code_or_bold_is_a_reminder_with_a_warning_and_an_empty_notify_is_invalid() {
    let md = "## Recurring\n\
              - [ ] `@log {\"text\": \"a\"}`\n\
              - [ ] **@log** {\"text\": \"b\"}\n\
              - [ ] @notify {\"text\": \" \"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let out = env.run_once(NOV);
    out.code(1);
    for line in [2, 3] {
        assert!(
            out.stderr.contains(&format!(
                "HEARTBEAT.md:{line}:3: warning: task \"@log\" is a reminder, not a tool call"
            )),
            "{out:?}"
        );
    }
    assert!(env.events("task_succeeded").is_empty(), "{:?}", env.audit());
    assert_eq!(env.events("task_reminded").len(), 2, "{:?}", env.audit());
    let invalid = env.events("task_invalid");
    assert_eq!(invalid.len(), 1, "{:?}", env.audit());
    assert_eq!(
        invalid[0]["error"],
        "key \"text\" for notify must not be empty"
    );
}

#[test]
fn a_section_heading_a_slip_or_two_away_is_a_warning_with_what_it_meant() {
    let md = "## Recuring\n- [ ] @log {\"text\": \"a\"}\n\
              ## Reccuring tasks\n- [ ] @log {\"text\": \"b\"}\n\
              ## One tme\n- [ ] @log {\"text\": \"c\"}\n\
              ## Onc\n- [ ] @log {\"text\": \"d\"}\n\
              ## Done\n- [x] e\n\
              ## Notes\n- [ ] f\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let doc = check(&env);
    let got: Vec<(u64, String)> = problems(&doc, "warning")
        .into_iter()
        .map(|w| (w.0, w.2))
        .collect();
    let want = |line: u64, text: &str, meant: &str| {
        (
            line,
            format!("heading {text:?} is not a section name; did you mean \"## {meant}\"?"),
        )
    };
    assert_eq!(
        got,
        vec![
            want(1, "Recuring", "Recurring"),
            want(3, "Reccuring tasks", "Recurring"),
            want(5, "One tme", "One time"),
            want(7, "Onc", "Once"),
        ],
        "{doc:#}"
    );
    // The tasks stay outside any section (nothing runs), and `run` says so on stderr.
    assert!(
        decisions(&doc)
            .iter()
            .all(|(_, d)| d == "ignored" || d == "done"),
        "{doc:#}"
    );
    let out = env.run_with(NOV, &["-q"]);
    out.code(0);
    assert!(
        out.stderr
            .contains("HEARTBEAT.md:1:1: warning: heading \"Recuring\" is not a section name"),
        "{out:?}"
    );
    assert!(env.events("task_succeeded").is_empty(), "{:?}", env.audit());
}

#[test]
fn schedules_as_people_say_them_get_a_did_you_mean() {
    let md = "## Recurring\n\
              ### Every Sunday at 4am\n- [ ] @log {\"text\": \"a\"}\n\
              ### Daily 9am\n- [ ] @log {\"text\": \"b\"}\n\
              ### every weekday at 9\n- [ ] @log {\"text\": \"c\"}\n\
              ### Every Monday and Thursday at 7:30pm\n- [ ] @log {\"text\": \"d\"}\n\
              ### Hourly\n- [ ] @log {\"text\": \"e\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let doc = check(&env);
    let errors = problems(&doc, "error");
    let meant: Vec<(u64, &str)> = vec![
        (2, "Sundays at 04:00"),
        (4, "Daily at 09:00"),
        (6, "Weekdays at 09:00"),
        (8, "Mondays and Thursdays at 19:30"),
        (10, "Every 1h"),
    ];
    assert_eq!(errors.len(), meant.len(), "{errors:#?}");
    for ((line, _, msg), (want_line, want)) in errors.iter().zip(&meant) {
        assert_eq!(line, want_line, "{msg}");
        assert!(
            msg.contains(&format!("(did you mean {want:?}?)")) && msg.contains(RECURRING_EXPECTED),
            "{msg}"
        );
    }
    // Still invalid: a suggestion never makes a task run.
    assert!(
        decisions(&doc).iter().all(|(_, d)| d == "invalid"),
        "{doc:#}"
    );
}

/// A cron line as a heading, with a `Cron` word in front or bare, day names in its fields
/// too, is a schedule: due at its slots, never at every run; six fields are invalid.
#[test]
fn a_cron_line_heading_runs_its_task_at_its_slots_only() {
    let md = "## Recurring\n\n### Cron 0 9 * * 1-5\n- [ ] @log {\"text\": \"a\"}\n\n\
              ### 0 9 * * MON-FRI\n- [ ] @log {\"text\": \"b\"}\n\n\
              ### 0 0 9 * * 1-5\n- [ ] @log {\"text\": \"c\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    // Saturday 2026-11-07: no weekday slot is open.
    let out = env.run_once("2026-11-07T10:00:00Z");
    out.code(1);
    assert!(env.events("task_succeeded").is_empty(), "{:?}", env.audit());
    let invalid = env.events("task_invalid");
    assert_eq!(invalid.len(), 1, "{:?}", env.audit());
    assert!(
        invalid[0]["error"]
            .as_str()
            .unwrap()
            .contains("has 6 fields"),
        "{}",
        invalid[0]
    );
    // Monday 09:30: both run, once.
    env.run_once("2026-11-09T09:30:00Z").code(1);
    env.run_once("2026-11-09T10:30:00Z").code(1);
    assert_eq!(env.events("task_succeeded").len(), 2, "{:?}", env.audit());
    // `check` on Monday 23 November at 10:00: the 09:00 slot is open, not yet run.
    let doc = check(&env);
    assert_eq!(
        decisions(&doc),
        vec![
            (4, "run".to_string()),
            (7, "run".to_string()),
            (10, "invalid".to_string())
        ]
    );
}

#[test]
fn a_tilde_or_a_variable_in_an_argv_command_is_a_warning_with_the_fix() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": [\"tar\", \"czf\", \"~/backups/x.tgz\", \"$HOME/docs\"]}\n\
         - [ ] @shell {\"cmd\": \"tar czf ~/backups/y.tgz $HOME/docs\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    let out = env
        .cmd(["check", "--json"])
        .env("HOME", "/home/me")
        .output();
    let doc = out.json();
    let warnings: Vec<(u64, String)> = doc["problems"]
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
        .collect();
    // The string form runs through sh -c, which expands both: only line 2 is warned of.
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().all(|(line, _)| *line == 2), "{warnings:?}");
    assert!(
        warnings.iter().any(|(_, m)| m
            .starts_with("\"~/backups/x.tgz\" in an argv-form cmd is not expanded")
            && m.ends_with("write \"/home/me/backups/x.tgz\"")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|(_, m)| m.starts_with("\"$HOME/docs\"") && m.contains("`sh -c`")),
        "{warnings:?}"
    );
}
