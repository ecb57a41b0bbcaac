//! Missed slots (docs/reference.md#missed-slots) through the binary with a fixed clock: each
//! slot of a calendar schedule that passed without a run is reported once, with why, on the
//! audit log, at the terminal (also with `-q`) and to the channels that take `missed`.

use serde_json::Value;

use crate::common::Env;

/// A daily 02:00 `@log` task in `tz`, with `extra` config.
fn daily(tz: &str, extra: &str) -> Env {
    Env::new("## Recurring\n### Daily at 02:00\n- [ ] @log {\"text\": \"nightly\"}\n")
        .config(&format!("timezone = \"{tz}\"\n{extra}"))
}

fn missed(env: &Env) -> Vec<Value> {
    env.events("task_missed")
}

fn slots_and_reasons(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            (
                l["slot"].as_str().unwrap().to_string(),
                l["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn three_days_without_runs_are_reported_once_each_and_the_task_catches_up_once() {
    let env = daily("UTC", "");
    env.run_once("2026-05-01T03:00:00Z").code(0);
    assert!(
        missed(&env).is_empty(),
        "the first run reports nothing earlier"
    );
    assert_eq!(env.events("task_succeeded").len(), 1);
    // cron stopped for three days; the next run comes at 03:00 on the fifth.
    let out = env
        .cmd(["run", "--once", "-q"])
        .now("2026-05-05T03:00:00Z")
        .output();
    out.code(0);
    let lines = missed(&env);
    assert_eq!(
        slots_and_reasons(&lines),
        [
            ("2026-05-02T02:00:00.000Z".into(), "no_run".into()),
            ("2026-05-03T02:00:00.000Z".into(), "no_run".into()),
            ("2026-05-04T02:00:00.000Z".into(), "no_run".into()),
        ]
    );
    for l in &lines {
        assert_eq!(l["file"], env.md_file());
        assert_eq!(l["line"], 3);
        assert!(l.get("count").is_none(), "{l}");
        assert_eq!(l["run_id"], env.events("run_started")[1]["run_id"]);
    }
    // Today's slot is caught up, once.
    assert_eq!(env.events("task_succeeded").len(), 2);
    // Said at the terminal under -q, one line each.
    assert_eq!(out.stdout.matches("MISSED").count(), 3, "{}", out.stdout);
    assert!(
        out.stdout
            .contains("MISSED    @log HEARTBEAT.md:3 — slot 2026-05-02 02:00 UTC (no_run)"),
        "{}",
        out.stdout
    );
    // Never again.
    env.run_once("2026-05-05T09:00:00Z").code(0);
    env.run_once("2026-05-06T01:00:00Z").code(0);
    assert_eq!(missed(&env).len(), 3);
    // `status` says how old the last run is, in the configured zone.
    let status = env.cmd(["status"]).now("2026-05-08T03:00:00Z").output();
    status.code(0);
    assert!(
        status
            .stdout
            .contains("at 2026-05-06 01:00 UTC (2d 2h ago; 0 succeeded, 0 failed)"),
        "{}",
        status.stdout
    );
    // Counted in the metrics' total.
    let metrics = env.cmd(["metrics"]).output();
    metrics.code(0);
    assert!(
        metrics
            .stdout
            .lines()
            .any(|l| l == "heartbeat_missed_slots_total 3"),
        "{}",
        metrics.stdout
    );
}

#[test]
fn a_slot_skipped_by_a_pause_or_outside_active_hours_says_so() {
    let env = daily("UTC", "active_hours = \"01:00-23:00\"\n");
    env.run_once("2026-05-01T03:00:00Z").code(0);
    env.cmd(["pause"])
        .now("2026-05-01T12:00:00Z")
        .output()
        .code(0);
    env.run_once("2026-05-02T03:00:00Z").code(0);
    env.cmd(["resume"])
        .now("2026-05-02T23:30:00Z")
        .output()
        .code(0);
    // Outside active hours all of the third's remaining runs.
    env.run_once("2026-05-03T23:30:00Z").code(0);
    env.run_once("2026-05-04T03:00:00Z").code(0);
    assert_eq!(
        slots_and_reasons(&missed(&env)),
        [
            ("2026-05-02T02:00:00.000Z".into(), "paused".into()),
            (
                "2026-05-03T02:00:00.000Z".into(),
                "outside_active_hours".into()
            ),
        ]
    );
}

#[test]
fn a_slot_held_back_by_the_budget_or_the_breaker_says_so() {
    let env = Env::new(
        "## Recurring\n### Daily at 02:00\n- [ ] @paid {}\n### Daily at 03:00\n- [ ] @flaky {}\n",
    )
    .config(
        "timezone = \"UTC\"\nmax_consecutive_failures = 1\n[budget]\ndaily_usd = 1.0\n\
         [tools.paid]\ncommand = [\"true\"]\napproval = \"auto\"\ncost_usd = 2.0\n\
         [tools.flaky]\ncommand = [\"false\"]\napproval = \"auto\"\n",
    );
    env.run_once("2026-05-01T04:00:00Z").code(1);
    env.run_once("2026-05-02T04:00:00Z").code(0);
    env.run_once("2026-05-03T04:00:00Z").code(0);
    let lines = missed(&env);
    let by_line = |line: u64| -> Vec<(String, String)> {
        slots_and_reasons(
            &lines
                .iter()
                .filter(|l| l["line"] == line)
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        by_line(3),
        [
            ("2026-05-01T02:00:00.000Z".into(), "budget".into()),
            ("2026-05-02T02:00:00.000Z".into(), "budget".into()),
        ],
        "{lines:#?}"
    );
    assert_eq!(
        by_line(5),
        [("2026-05-02T03:00:00.000Z".into(), "tripped".into())],
        "{lines:#?}"
    );
}

#[test]
fn at_most_a_hundred_slots_are_listed_and_one_more_line_counts_the_rest() {
    let env = daily("UTC", "");
    env.run_once("2026-01-01T03:00:00Z").code(0);
    // 150 days later: the slots of 2 January … 31 May passed (150 of them).
    env.run_once("2026-06-01T03:00:00Z").code(0);
    let lines = missed(&env);
    assert_eq!(lines.len(), 101);
    assert_eq!(lines[0]["count"], 50, "{}", lines[0]);
    assert_eq!(lines[0]["slot"], "2026-01-02T02:00:00.000Z");
    assert!(lines[1..].iter().all(|l| l.get("count").is_none()));
    assert_eq!(lines[1]["slot"], "2026-02-21T02:00:00.000Z");
    assert_eq!(lines[100]["slot"], "2026-05-31T02:00:00.000Z");
}

#[test]
fn a_new_task_and_a_task_waiting_for_a_person_report_nothing() {
    let env = Env::new("## Recurring\n### Daily at 02:00\n- [ ] @shell {\"cmd\": \"true\"}\n")
        .config("timezone = \"UTC\"\napproval_ttl = \"30d\"\n");
    // Queued for approval, and never decided: its slots wait for a person, not missed.
    env.run_once("2026-05-01T03:00:00Z").code(0);
    env.run_once("2026-05-02T03:00:00Z").code(0);
    env.run_once("2026-05-04T03:00:00Z").code(0);
    assert_eq!(env.events("approval_requested").len(), 1);
    // A task added later: its earlier slots are not its own.
    env.write(
        "HEARTBEAT.md",
        "## Recurring\n### Daily at 02:00\n- [ ] @shell {\"cmd\": \"true\"}\n- [ ] @log {\"text\": \"new\"}\n",
    );
    env.run_once("2026-05-04T04:00:00Z").code(0);
    let lines = missed(&env);
    assert!(
        lines.iter().all(|l| l["line"] != 3),
        "the pending task reports nothing: {lines:#?}"
    );
    assert!(lines.is_empty(), "{lines:#?}");
}

#[test]
fn slots_across_dst_nights_are_each_reported_once_at_their_local_time() {
    // Berlin springs forward on 29 March 2026: 02:30 that night is 03:00 CEST (01:00Z).
    let env = Env::new("## Recurring\n### Daily at 02:30\n- [ ] @log {\"text\": \"n\"}\n")
        .config("timezone = \"Europe/Berlin\"\n");
    env.run_once("2026-03-27T12:00:00Z").code(0);
    env.run_once("2026-03-31T12:00:00Z").code(0);
    assert_eq!(
        slots_and_reasons(&missed(&env)),
        [
            ("2026-03-28T01:30:00.000Z".into(), "no_run".into()),
            ("2026-03-29T01:00:00.000Z".into(), "no_run".into()),
            ("2026-03-30T00:30:00.000Z".into(), "no_run".into()),
        ]
    );
    // Lord Howe moves its clocks by half an hour (02:00 -> 02:30 on 4 October 2026).
    let env = Env::new("## Recurring\n### Daily at 02:15\n- [ ] @log {\"text\": \"n\"}\n")
        .config("timezone = \"Australia/Lord_Howe\"\n");
    env.run_once("2026-10-02T12:00:00Z").code(0);
    env.run_once("2026-10-05T12:00:00Z").code(0);
    let got = slots_and_reasons(&missed(&env));
    // 3 Oct 02:15 +10:30, 4 Oct 02:30 +11 (the first instant after the gap); 5 Oct's slot
    // is still open at 23:00 local, and is caught up instead.
    assert_eq!(
        got.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        ["2026-10-02T15:45:00.000Z", "2026-10-03T15:30:00.000Z"]
    );
    assert_eq!(env.events("task_succeeded").len(), 2);
}

#[test]
fn missed_slots_reach_the_channels_that_take_missed_in_one_message() {
    let hook = crate::hook_double::HookDouble::start();
    let env = daily(
        "UTC",
        "[channels.team]\nkind = \"slack\"\nurl_env = \"HB_SLACK\"\nevents = [\"missed\"]\n",
    );
    let url = format!("{}/hook", hook.url());
    let run = |now: &str| {
        env.cmd(["run", "--once"])
            .now(now)
            .env("HB_SLACK", &url)
            .output()
    };
    run("2026-05-01T03:00:00Z").code(0);
    run("2026-05-04T03:00:00Z").code(0);
    let posts = hook.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    let body: Value = serde_json::from_slice(&posts[0].body).unwrap();
    let text = body["text"].as_str().unwrap();
    assert!(text.starts_with("*heartbeat: 2 slot(s) missed*"), "{text}");
    assert!(text.contains("2026-05-02 02:00 UTC (no_run)"), "{text}");
    assert!(text.contains("2026-05-03 02:00 UTC (no_run)"), "{text}");
    assert_eq!(env.events("notification_sent")[0]["kind"], "missed");
}

#[test]
fn a_cron_line_has_slots_too_and_reports_those_it_missed() {
    let env = Env::new("## Recurring\n### Cron 0 */6 * * *\n- [ ] @log {\"text\": \"six\"}\n")
        .config("timezone = \"UTC\"\n");
    env.run_once("2026-05-01T00:30:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    // Not again in the same slot; the next slot's run runs it.
    env.run_once("2026-05-01T05:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    env.run_once("2026-05-01T06:10:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
    // Nothing from 06:10 until 19:00: the 12:00 slot passed (its deadline was 18:00).
    env.run_once("2026-05-01T19:00:00Z").code(0);
    assert_eq!(
        slots_and_reasons(&missed(&env)),
        [("2026-05-01T12:00:00.000Z".into(), "no_run".into())]
    );
    assert_eq!(env.events("task_succeeded").len(), 3);
}
