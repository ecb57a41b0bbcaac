//! Guardrails (docs/reference.md#guardrails, and the config, policy, run lock and retention): the
//! daily budget (reported costs and estimates, the local day, `budget_exhausted` once a day,
//! approved work, parallel starts), tool cooldowns, the failure breaker (`task_tripped`, `reset`),
//! the run cap, pause/resume and `concurrency`. Everything through the built binary with `--now`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// Who makes the decisions in these tests (`by: cli:tester`).
const USER: &str = "tester";
const BY: &str = "cli:tester";

/// Reports 0.4 USD on its last output line; no estimate configured.
const PAID: &str = "[tools.paid]\ncommand = [\"sh\", \"-c\", \"echo '{\\\"cost_usd\\\": 0.4}'\"]\napproval = \"auto\"\n";
/// Reports nothing; estimated at 0.3 USD.
const EST: &str = "[tools.est]\ncommand = [\"true\"]\napproval = \"auto\"\ncost_usd = 0.3\n";
/// Fails while a file named `failing` exists in the HEARTBEAT.md's directory.
const FLAKY: &str =
    "[tools.flaky]\ncommand = [\"sh\", \"-c\", \"test ! -e failing\"]\napproval = \"auto\"\n";

/// Reports 1.0 USD: one run spends a 1.0 budget.
const BIG: &str = "[tools.big]\ncommand = [\"sh\", \"-c\", \"echo '{\\\"cost_usd\\\": 1.0}'\"]\napproval = \"auto\"\n";

const PAID_TASK: &str = "- [ ] @paid {}\n";
const EST_TASK: &str = "- [ ] @est {}\n";
const LOG_TASK: &str = "- [ ] @log {\"text\": \"free\"}\n";

/// A config in Berlin time (UTC+2 in May: local midnight is 22:00Z) with `rest` appended.
fn berlin(rest: &str) -> String {
    format!("timezone = \"Europe/Berlin\"\n{rest}")
}

fn recurring(tasks: &[&str]) -> String {
    format!("## Recurring\n{}", tasks.concat())
}

#[track_caller]
fn status(env: &Env, now: &str) -> Value {
    let out = env.cmd(["status", "--json"]).now(now).output();
    out.code(0);
    out.json()
}

#[track_caller]
fn check(env: &Env, now: &str) -> Value {
    let out = env.cmd(["check", "--json"]).now(now).output();
    out.code(0);
    out.json()
}

/// Task ids in file order, as `check --json` shows them.
#[track_caller]
fn task_ids(env: &Env) -> Vec<String> {
    check(env, NOW)["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["task_id"].as_str().expect("task_id").to_string())
        .collect()
}

/// The `check --json` entry of one task.
#[track_caller]
fn checked(env: &Env, now: &str, task_id: &str) -> Value {
    let doc = check(env, now);
    doc["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task_id"] == task_id)
        .unwrap_or_else(|| panic!("task {task_id} not in check --json: {doc:#}"))
        .clone()
}

/// Audit lines of `event` written at `now`.
fn events_at(env: &Env, event: &str, now: &str) -> Vec<Value> {
    env.events(event)
        .into_iter()
        .filter(|e| is_ts_of(&e["ts"], now))
        .collect()
}

/// The tools of the `task_succeeded` lines written at `now`, in audit order.
fn ran_at(env: &Env, now: &str) -> Vec<String> {
    events_at(env, "task_succeeded", now)
        .iter()
        .map(|e| e["tool"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// (tool, reason) of the `task_skipped` lines written at `now`, in audit order.
fn skipped_at(env: &Env, now: &str) -> Vec<(String, String)> {
    events_at(env, "task_skipped", now)
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or("?").to_string(),
                e["reason"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

#[track_caller]
fn assert_usd(v: &Value, expected: f64) {
    let got = v
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {v} (expected {expected})"));
    assert!(
        (got - expected).abs() < 1e-9,
        "expected {expected} USD, got {got}"
    );
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Budget

#[test]
fn budget_accumulates_within_a_local_day_and_is_exhausted_once() {
    let env = Env::new(&recurring(&[PAID_TASK, LOG_TASK]))
        .config(&berlin(&format!("[budget]\ndaily_usd = 1.0\n{PAID}{EST}")));

    // 12:00 and 13:00 Berlin: the paid tool reports 0.4 each time; the spend adds up.
    let (r1, r2) = ("2026-05-01T10:00:00Z", "2026-05-01T11:00:00Z");
    env.run_once(r1).code(0);
    assert_eq!(ran_at(&env, r1), ["paid", "log"]);
    let ev = &events_at(&env, "task_succeeded", r1)[0];
    assert_usd(&ev["cost_usd"], 0.4);
    assert_usd(&status(&env, r1)["budget"]["spent_usd"], 0.4);
    env.run_once(r2).code(0);
    assert_eq!(ran_at(&env, r2), ["paid", "log"]);
    let st = status(&env, r2);
    assert_usd(&st["budget"]["spent_usd"], 0.8);
    assert_usd(&st["budget"]["daily_usd"], 1.0);
    assert!(env.events("budget_exhausted").is_empty());
    assert!(env.events("task_skipped").is_empty());

    // 0.8 spent. The 0.3 estimate would pass the cap: skipped (budget), and that is the
    // first budget stop of the day. The paid tool has no estimate and the cap is not reached
    // yet: it runs (1.2). Then the cap is reached: even the free @log is skipped.
    env.write("HEARTBEAT.md", recurring(&[EST_TASK, PAID_TASK, LOG_TASK]));
    let r3 = "2026-05-01T12:00:00Z";
    let out = env.run_once(r3);
    out.code(0);
    assert_eq!(ran_at(&env, r3), ["paid"], "{:#?}", env.audit());
    assert_eq!(
        skipped_at(&env, r3),
        pairs(&[("est", "budget"), ("log", "budget")])
    );
    let ex = env.events("budget_exhausted");
    assert_eq!(ex.len(), 1, "{:#?}", env.audit());
    assert_ts_of(&ex[0]["ts"], r3);
    assert_usd(&ex[0]["daily_usd"], 1.0);
    assert_usd(&ex[0]["spent_usd"], 0.8);
    let fin = &events_at(&env, "run_finished", r3)[0];
    assert_eq!(
        (fin["succeeded"].clone(), fin["skipped"].clone()),
        (json!(1), json!(2))
    );

    // Later the same local day, across several runs: everything skipped, never audited again.
    for now in [
        "2026-05-01T13:00:00Z",
        "2026-05-01T21:59:00Z", // 23:59 in Berlin
    ] {
        env.run_once(now).code(0);
        assert!(
            ran_at(&env, now).is_empty(),
            "ran at {now}: {:#?}",
            env.audit()
        );
        assert_eq!(
            skipped_at(&env, now),
            pairs(&[("est", "budget"), ("paid", "budget"), ("log", "budget")]),
            "at {now}"
        );
    }
    assert_eq!(
        env.events("budget_exhausted").len(),
        1,
        "{:#?}",
        env.audit()
    );
    let st = status(&env, "2026-05-01T21:59:00Z");
    assert_usd(&st["budget"]["spent_usd"], 1.2);
    assert_usd(&st["budget"]["daily_usd"], 1.0);

    // The store: one row per tool run, with what it cost (reported).
    let db = env.db();
    let mut stmt = db
        .prepare("SELECT tool, cost_usd FROM task_history")
        .unwrap();
    let rows: Vec<(String, Option<f64>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let paid: Vec<Option<f64>> = rows.iter().filter(|r| r.0 == "paid").map(|r| r.1).collect();
    assert_eq!(paid, [Some(0.4), Some(0.4), Some(0.4)], "{rows:?}");
    assert!(!rows.iter().any(|r| r.0 == "est"), "{rows:?}");
}

/// In a zone whose DST change is at midnight (America/Sao_Paulo, 2018-11-04: 00:00 did not
/// exist), the budget day starts at the end of the gap: it does not restart at every run.
#[test]
fn budget_day_holds_on_a_day_that_starts_in_a_dst_gap() {
    const SIXTY: &str = "[tools.sixty]\ncommand = [\"sh\", \"-c\", \"echo '{\\\"cost_usd\\\": 0.6}'\"]\napproval = \"auto\"\n";
    let env = Env::new(&recurring(&["- [ ] @sixty {}\n"])).config(&format!(
        "timezone = \"America/Sao_Paulo\"\n[budget]\ndaily_usd = 1.0\n{SIXTY}"
    ));
    let runs = [
        "2018-11-04T12:00:00Z",
        "2018-11-04T13:00:00Z",
        "2018-11-04T14:00:00Z",
    ];
    for now in runs {
        env.run_once(now).code(0);
    }
    // 0.6 then 0.6 more (the tool has no estimate: the cap is checked before it starts, and
    // 0.6 < 1.0); the third run finds 1.2 spent and skips it.
    assert_eq!(ran_at(&env, runs[0]), ["sixty"]);
    assert_eq!(ran_at(&env, runs[1]), ["sixty"]);
    assert!(ran_at(&env, runs[2]).is_empty(), "{:#?}", env.audit());
    assert_eq!(skipped_at(&env, runs[2]), pairs(&[("sixty", "budget")]));
    assert_usd(&status(&env, runs[2])["budget"]["spent_usd"], 1.2);
}

#[test]
fn budget_day_starts_at_local_midnight_not_utc_midnight() {
    let env = Env::new(&recurring(&[PAID_TASK, LOG_TASK]))
        .config(&berlin(&format!("[budget]\ndaily_usd = 1.0\n{PAID}{EST}")));
    // May 1 in Berlin: 0.4 + 0.4, then 0.4 more reaches the cap; @log is stopped.
    for now in [
        "2026-05-01T18:00:00Z",
        "2026-05-01T19:00:00Z",
        "2026-05-01T20:00:00Z",
    ] {
        env.run_once(now).code(0);
    }
    assert_eq!(
        skipped_at(&env, "2026-05-01T20:00:00Z"),
        pairs(&[("log", "budget")])
    );
    assert_eq!(env.events("budget_exhausted").len(), 1);
    // 23:59 Berlin: still the same day.
    let late = "2026-05-01T21:59:30Z";
    env.run_once(late).code(0);
    assert!(ran_at(&env, late).is_empty(), "{:#?}", env.audit());
    assert_usd(&status(&env, late)["budget"]["spent_usd"], 1.2);

    // 00:01 Berlin on May 2 (still May 1 in UTC): a fresh budget. The estimate counts as
    // the spend of a tool that reports nothing: 0.4 + 0.3.
    env.write("HEARTBEAT.md", recurring(&[PAID_TASK, EST_TASK, LOG_TASK]));
    let d2 = "2026-05-01T22:01:00Z";
    env.run_once(d2).code(0);
    assert_eq!(
        ran_at(&env, d2),
        ["paid", "est", "log"],
        "{:#?}",
        env.audit()
    );
    let st = status(&env, d2);
    assert_usd(&st["budget"]["spent_usd"], 0.7);
    assert_usd(&st["budget"]["daily_usd"], 1.0);
    assert_eq!(env.events("budget_exhausted").len(), 1);

    // Same Berlin day: 0.7 + 0.4 passes the cap; budget_exhausted again, on this new day.
    env.write("HEARTBEAT.md", recurring(&[PAID_TASK, LOG_TASK]));
    let d2b = "2026-05-01T23:30:00Z";
    env.run_once(d2b).code(0);
    assert_eq!(ran_at(&env, d2b), ["paid"]);
    assert_eq!(skipped_at(&env, d2b), pairs(&[("log", "budget")]));
    let ex = env.events("budget_exhausted");
    assert_eq!(ex.len(), 2, "{:#?}", env.audit());
    assert_ts_of(&ex[1]["ts"], d2b);
    assert_usd(&ex[1]["spent_usd"], 1.1);

    // Past UTC midnight but the same Berlin day: the spend carries over, nothing runs, and
    // budget_exhausted is not audited a third time.
    let d2c = "2026-05-02T00:30:00Z";
    env.run_once(d2c).code(0);
    assert!(ran_at(&env, d2c).is_empty(), "{:#?}", env.audit());
    assert_eq!(
        skipped_at(&env, d2c),
        pairs(&[("paid", "budget"), ("log", "budget")])
    );
    assert_eq!(env.events("budget_exhausted").len(), 2);
    assert_usd(&status(&env, d2c)["budget"]["spent_usd"], 1.1);
}

/// Cautious: a shell task (queued as approval 1) and `@big`, which reports 1.0 USD, with
/// `daily_usd = 1.0`; run once at [`NOW`], so the day's budget is spent.
fn approval_and_spent_budget() -> Env {
    let env = Env::new(&recurring(&[
        "- [ ] @shell {\"cmd\": \"touch ran\"}\n",
        "- [ ] @big {}\n",
    ]))
    .config(&berlin(&format!(
        "autonomy = \"cautious\"\n[budget]\ndaily_usd = 1.0\n{BIG}"
    )));
    env.run_once(NOW).code(0);
    assert_eq!(env.events("approval_requested").len(), 1);
    assert_eq!(ran_at(&env, NOW), ["big"]);
    assert_usd(&status(&env, NOW)["budget"]["spent_usd"], 1.0);
    env
}

#[test]
fn approved_work_obeys_the_budget_and_stays_approved() {
    let env = approval_and_spent_budget();

    // Approved and asked to run now: the budget is spent, so it does not run; it stays
    // approved (not failed, not stale).
    let at = "2026-05-01T10:05:00Z";
    let out = env.cmd(["approve", "1"]).now(at).user(USER).output();
    out.code(0);
    assert!(!env.exists("ran"), "an approved task ran past the budget");
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_eq!(env.events("approval_approved")[0]["by"], BY);
    assert_eq!(skipped_at(&env, at), pairs(&[("shell", "budget")]));
    assert_eq!(env.events("budget_exhausted").len(), 1);
    assert_eq!(env.approval_rows()[0].0, "approved");

    // The next run (same day) leaves it approved too, and queues nothing new.
    let r2 = "2026-05-01T11:00:00Z";
    env.run_once(r2).code(0);
    assert!(!env.exists("ran"));
    assert_eq!(
        skipped_at(&env, r2),
        pairs(&[("shell", "budget"), ("big", "budget")])
    );
    assert_eq!(env.approval_rows().len(), 1);
    assert_eq!(env.approval_rows()[0].0, "approved");
    assert_eq!(env.events("budget_exhausted").len(), 1);

    // After midnight in Berlin the approval runs (and then the paid tool).
    let next_day = "2026-05-01T22:30:00Z";
    env.run_once(next_day).code(0);
    assert!(env.exists("ran"), "{:#?}", env.audit());
    assert_eq!(ran_at(&env, next_day), ["shell", "big"]);
    let ok = &events_at(&env, "task_succeeded", next_day)[0];
    assert_eq!(ok["approval_id"], 1);
    assert_eq!(env.approval_rows()[0].0, "succeeded");
}

#[test]
fn approve_says_why_an_approved_task_did_not_run() {
    // A person typed `heartbeat approve 1` to run it now; it is held by the budget. Silence
    // (no output, exit 0) leaves them believing it ran.
    let env = approval_and_spent_budget();
    let out = env
        .cmd(["approve", "1"])
        .now("2026-05-01T10:05:00Z")
        .user(USER)
        .output();
    out.code(0);
    assert!(!env.exists("ran"));
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("budget"),
        "approve printed nothing about the budget holding #1:\n--- stdout\n{}--- stderr\n{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn zero_daily_usd_means_no_budget() {
    let env = Env::new(&recurring(&["- [ ] @big {}\n", LOG_TASK]))
        .config(&berlin(&format!("[budget]\ndaily_usd = 0\n{BIG}")));
    for n in 0..3 {
        env.run_once(&slot(n)).code(0);
        assert_eq!(ran_at(&env, &slot(n)), ["big", "log"], "{:#?}", env.audit());
    }
    assert!(env.events("task_skipped").is_empty());
    assert!(env.events("budget_exhausted").is_empty());
    let st = status(&env, &slot(2));
    assert_usd(&st["budget"]["spent_usd"], 3.0);
    assert_usd(&st["budget"]["daily_usd"], 0.0);
}

/// Four tasks of a tool estimated at 0.3 (each sleeping 0.3 s) at `concurrency = 4`, with
/// `daily_usd = 1.0`, run once at [`NOW`]; and their ids.
fn four_parallel_estimates() -> (Env, Vec<String>) {
    let slow_est =
        "[tools.est]\ncommand = [\"sleep\", \"0.3\"]\napproval = \"auto\"\ncost_usd = 0.3\n";
    let tasks: Vec<String> = (1..=4)
        .map(|n| format!("- [ ] @est {{\"n\": {n}}}\n"))
        .collect();
    let tasks: Vec<&str> = tasks.iter().map(String::as_str).collect();
    let env = Env::new(&recurring(&tasks)).config(&berlin(&format!(
        "concurrency = 4\n[budget]\ndaily_usd = 1.0\n{slow_est}"
    )));
    let ids = task_ids(&env);
    env.run_once(NOW).code(0);
    (env, ids)
}

#[test]
fn parallel_starts_do_not_overspend_the_budget() {
    let (env, ids) = four_parallel_estimates();
    let ok: BTreeSet<String> = env
        .events("task_succeeded")
        .iter()
        .map(|e| e["task_id"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = ids[..3].iter().cloned().collect();
    assert_eq!(
        ok,
        expected,
        "the first three in file order run: {:#?}",
        env.audit()
    );
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["task_id"], ids[3].as_str());
    assert_eq!(skipped[0]["reason"], "budget");
    assert_eq!(env.events("budget_exhausted").len(), 1);
    assert_usd(&status(&env, NOW)["budget"]["spent_usd"], 0.9);
    let db = env.db();
    let costs: Vec<Option<f64>> = db
        .prepare("SELECT cost_usd FROM task_runs ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(costs, [Some(0.3), Some(0.3), Some(0.3)]);
    // The next run: 0.9 spent, no room for 0.3; not audited again.
    let r2 = "2026-05-01T10:30:00Z";
    env.run_once(r2).code(0);
    assert!(ran_at(&env, r2).is_empty());
    assert_eq!(skipped_at(&env, r2).len(), 4);
    assert_eq!(env.events("budget_exhausted").len(), 1);
}

#[test]
fn budget_exhausted_in_a_parallel_run_reports_the_committed_spend() {
    // The 4th task was stopped because 0.9 was already committed to the three running
    // ones; `budget_exhausted` (and the Telegram alert built from it) should say so, not
    // "0.00 of 1.00 spent".
    let (env, _) = four_parallel_estimates();
    let ex = env.events("budget_exhausted");
    assert_eq!(ex.len(), 1, "{:#?}", env.audit());
    assert_usd(&ex[0]["daily_usd"], 1.0);
    assert_usd(&ex[0]["spent_usd"], 0.9);
}

#[test]
fn check_says_a_task_held_by_the_budget_is_due_at_local_midnight() {
    let env = Env::new(&recurring(&[PAID_TASK, PAID_TASK, PAID_TASK, EST_TASK]))
        .config(&berlin(&format!("[budget]\ndaily_usd = 1.0\n{PAID}{EST}")));
    env.run_once(NOW).code(0);
    assert_eq!(ran_at(&env, NOW), ["paid", "paid", "paid"]);
    // 1.2 spent at 12:00 Berlin: nothing can run before 00:00 Berlin (22:00Z).
    let later = "2026-05-01T10:30:00Z";
    let doc = check(&env, later);
    for t in doc["tasks"].as_array().unwrap() {
        assert_eq!(t["decision"], "budget", "{t:#}");
        assert_eq!(t["next_due"], ts("2026-05-01T22:00:00Z"), "{t:#}");
    }
    let text = env.cmd(["check"]).now(later).output();
    text.code(0);
    assert_eq!(
        text.stdout.matches(" budget ").count(),
        4,
        "{}",
        text.stdout
    );
}

// ---------------------------------------------------------------------------------------
// Cooldown

const TWO_LOGS: &str =
    "## Recurring\n- [ ] @log {\"text\": \"one\"}\n- [ ] @log {\"text\": \"two\"}\n";

#[test]
fn cooldown_lets_one_task_of_the_tool_start_per_cooldown() {
    let env = Env::new(TWO_LOGS).config("[tools.log]\ncooldown = \"1h\"\n");
    let ids = task_ids(&env);

    // Two due @log tasks in one run: only the first starts; the second is silently not due.
    let out = env.run_with(NOW, &["--json"]);
    out.code(0);
    let doc = out.json();
    let reported: Vec<&Value> = doc["tasks"].as_array().unwrap().iter().collect();
    assert_eq!(reported.len(), 1, "{doc:#}");
    assert_eq!(reported[0]["task_id"], ids[0].as_str());
    assert_eq!(reported[0]["outcome"], "succeeded");
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["output"], "one");
    assert!(env.events("task_skipped").is_empty(), "{:#?}", env.audit());
    assert_eq!(env.events("run_finished")[0]["skipped"], 0);

    // 30 minutes later: none runs; check shows both not due until the cooldown ends.
    let half = "2026-05-01T10:30:00Z";
    env.run_once(half).code(0);
    assert!(ran_at(&env, half).is_empty(), "{:#?}", env.audit());
    assert!(env.events("task_skipped").is_empty());
    for id in &ids {
        let t = checked(&env, half, id);
        assert_eq!(t["decision"], "not_due", "{t:#}");
        assert_eq!(t["next_due"], ts("2026-05-01T11:00:00Z"), "{t:#}");
    }

    // 61 minutes after the first start: one runs again.
    let later = "2026-05-01T11:01:00Z";
    env.run_once(later).code(0);
    assert_eq!(ran_at(&env, later), ["log"], "{:#?}", env.audit());
    assert!(env.events("task_skipped").is_empty());
    assert_eq!(env.events("task_succeeded").len(), 2);
}

#[test]
fn cooldown_does_not_starve_the_later_tasks_of_a_tool() {
    // docs/reference.md#guardrails: a task of that tool is not due while another started within the
    // cooldown. Both tasks are due whenever the cooldown has passed; the one that waited longer
    // (never ran) must get the slot, as with the run cap, or the second never runs at all.
    let env = Env::new(TWO_LOGS).config("[tools.log]\ncooldown = \"1h\"\n");
    for now in [
        "2026-05-01T10:00:00Z",
        "2026-05-01T11:01:00Z",
        "2026-05-01T12:02:00Z",
    ] {
        env.run_once(now).code(0);
        assert_eq!(ran_at(&env, now).len(), 1, "at {now}: {:#?}", env.audit());
    }
    let outputs: Vec<Value> = env
        .events("task_succeeded")
        .iter()
        .map(|e| e["output"].clone())
        .collect();
    assert!(
        outputs.contains(&json!("two")),
        "the second @log task never ran in three cooldown periods: {outputs:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Failure breaker

fn flaky_env(config: &str) -> Env {
    let env = Env::new("## Recurring\n- [ ] @flaky {\"n\": 1}\n").config(config);
    env.write("failing", "");
    env
}

/// Half-hourly run times from 10:00Z.
fn slot(n: usize) -> String {
    let t = chrono::DateTime::parse_from_rfc3339(NOW).unwrap()
        + chrono::Duration::minutes(30 * n as i64);
    t.with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[track_caller]
fn failures_in_db(env: &Env, task_id: &str) -> (u32, bool) {
    env.db()
        .query_row(
            "SELECT consecutive_failures, tripped_at IS NOT NULL FROM task_state WHERE task_id = ?1",
            [task_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("task_state row")
}

#[test]
fn three_failures_in_a_row_trip_a_task_until_reset() {
    let env = flaky_env(&format!("max_consecutive_failures = 3\n{FLAKY}"));
    let id = task_ids(&env)[0].clone();
    for n in 0..3 {
        env.run_once(&slot(n)).code(1);
        assert_eq!(env.events("task_failed").len(), n + 1);
        let tripped = env.events("task_tripped");
        assert_eq!(tripped.len(), usize::from(n == 2), "after run {}", n + 1);
    }
    let tripped = &env.events("task_tripped")[0];
    assert_eq!(tripped["task_id"], id.as_str());
    assert_eq!(tripped["failures"], 3);
    assert_ts_of(&tripped["ts"], &slot(2));
    assert_eq!(failures_in_db(&env, &id), (3, true));

    // The 4th run skips it (reason tripped): nothing failed, so exit 0.
    env.run_once(&slot(3)).code(0);
    assert_eq!(env.events("task_failed").len(), 3, "a tripped task ran");
    assert_eq!(skipped_at(&env, &slot(3)), pairs(&[("flaky", "tripped")]));
    assert_eq!(
        events_at(&env, "task_skipped", &slot(3))[0]["task_id"],
        id.as_str()
    );
    assert_eq!(env.events("task_tripped").len(), 1, "tripped only once");
    let t = checked(&env, &slot(3), &id);
    assert_eq!(t["decision"], "tripped", "{t:#}");
    assert_eq!(status(&env, &slot(3))["tripped"], json!([id]));

    // `reset` clears it (audited), and the task runs again when due.
    let out = env.cmd(["reset", &id]).now(&slot(4)).user(USER).output();
    out.code(0);
    let reset = env.events("task_reset");
    assert_eq!(reset.len(), 1, "{:#?}", env.audit());
    assert_eq!(reset[0]["task_id"], id.as_str());
    assert_ts_of(&reset[0]["ts"], &slot(4));
    assert_eq!(failures_in_db(&env, &id), (0, false));
    assert_eq!(status(&env, &slot(4))["tripped"], json!([]));
    assert_eq!(checked(&env, &slot(4), &id)["decision"], "run");
    std::fs::remove_file(env.path("failing")).unwrap();
    env.run_once(&slot(5)).code(0);
    assert_eq!(ran_at(&env, &slot(5)), ["flaky"], "{:#?}", env.audit());
    assert_eq!(failures_in_db(&env, &id), (0, false));
}

#[test]
fn status_names_a_tripped_task_by_tool_and_place_with_the_command_that_resets_it() {
    let env = flaky_env(&format!("max_consecutive_failures = 2\n{FLAKY}"));
    let id = task_ids(&env)[0].clone();
    env.run_once(&slot(0)).code(1);
    env.run_once(&slot(1)).code(1);
    let out = env.cmd(["status"]).now(&slot(2)).output();
    out.code(0);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("tripped:"))
        .unwrap_or_else(|| panic!("no tripped line:\n{}", out.stdout));
    assert!(line.contains("@flaky HEARTBEAT.md:2"), "{line}");
    assert!(line.contains(&format!("`heartbeat reset {id}`")), "{line}");
    assert!(!line.contains("TASK_ID"), "{line}");
    let st = status(&env, &slot(2));
    assert_eq!(st["tripped"], json!([id]));
    let t = &st["tripped_tasks"][0];
    assert_eq!(t["task_id"], id.as_str(), "{st}");
    assert_eq!(t["tool"], "flaky", "{st}");
    assert_eq!(t["line"], 2, "{st}");
    assert!(
        t["file"].as_str().unwrap().ends_with("HEARTBEAT.md"),
        "{st}"
    );
}

#[test]
fn a_success_in_between_resets_the_failure_count() {
    let env = flaky_env(&format!("max_consecutive_failures = 3\n{FLAKY}"));
    let id = task_ids(&env)[0].clone();
    // fail, fail, succeed, fail, fail
    for (n, fail) in [true, true, false, true, true].into_iter().enumerate() {
        if fail {
            env.write("failing", "");
        } else {
            std::fs::remove_file(env.path("failing")).unwrap();
        }
        env.run_once(&slot(n)).code(if fail { 1 } else { 0 });
    }
    assert!(env.events("task_tripped").is_empty(), "{:#?}", env.audit());
    assert_eq!(env.events("task_failed").len(), 4);
    assert_eq!(failures_in_db(&env, &id), (2, false));
    // Still runs (a third failure in a row now trips it).
    env.run_once(&slot(5)).code(1);
    assert_eq!(env.events("task_failed").len(), 5);
    assert_eq!(env.events("task_tripped").len(), 1);
}

#[test]
fn a_per_tool_limit_overrides_the_global_one() {
    let sturdy = "[tools.sturdy]\ncommand = [\"false\"]\napproval = \"auto\"\n";
    let env = Env::new("## Recurring\n- [ ] @flaky {}\n- [ ] @sturdy {}\n").config(&format!(
        "max_consecutive_failures = 5\n{FLAKY}max_consecutive_failures = 2\n{sturdy}"
    ));
    env.write("failing", "");
    let ids = task_ids(&env);
    env.run_once(&slot(0)).code(1);
    assert!(env.events("task_tripped").is_empty());
    env.run_once(&slot(1)).code(1);
    let tripped = env.events("task_tripped");
    assert_eq!(tripped.len(), 1, "{:#?}", env.audit());
    assert_eq!(tripped[0]["task_id"], ids[0].as_str());
    assert_eq!(tripped[0]["failures"], 2);
    // The other tool keeps the global limit of 5.
    env.run_once(&slot(2)).code(1);
    assert_eq!(skipped_at(&env, &slot(2)), pairs(&[("flaky", "tripped")]));
    assert_eq!(failures_in_db(&env, &ids[1]), (3, false));
    assert_eq!(status(&env, &slot(2))["tripped"], json!([ids[0]]));
}

#[test]
fn editing_a_tripped_task_starts_fresh() {
    let env = flaky_env(&format!("max_consecutive_failures = 1\n{FLAKY}"));
    let old = task_ids(&env)[0].clone();
    env.run_once(&slot(0)).code(1);
    assert_eq!(env.events("task_tripped").len(), 1);

    // Only the JSON's spacing changed: the same task, still tripped.
    env.write(
        "HEARTBEAT.md",
        "## Recurring\n- [ ] @flaky {  \"n\" :  1 }\n",
    );
    assert_eq!(task_ids(&env), std::slice::from_ref(&old));
    env.run_once(&slot(1)).code(0);
    assert_eq!(skipped_at(&env, &slot(1)), pairs(&[("flaky", "tripped")]));

    // A changed input is a new task with a new id: it runs.
    env.write("HEARTBEAT.md", "## Recurring\n- [ ] @flaky {\"n\": 2}\n");
    let new = task_ids(&env)[0].clone();
    assert_ne!(new, old);
    assert_eq!(checked(&env, &slot(2), &new)["decision"], "run");
    std::fs::remove_file(env.path("failing")).unwrap();
    env.run_once(&slot(2)).code(0);
    let ok = events_at(&env, "task_succeeded", &slot(2));
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["task_id"], new.as_str());
    assert!(events_at(&env, "task_skipped", &slot(2)).is_empty());
}

#[test]
fn reset_of_an_unknown_or_malformed_id_is_a_usage_error() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n");
    env.run_once(NOW).code(0);
    let known = task_ids(&env)[0].clone();
    let unknown = if known == "0123456789ab" {
        "ba9876543210"
    } else {
        "0123456789ab"
    };
    for bad in [
        unknown,
        "xyz",
        "0123456789abc",
        "0123456789a",
        "",
        "g123456789ab",
    ] {
        let out = env.cmd(["reset", bad]).user(USER).output();
        out.code(2);
        assert!(
            out.stderr.starts_with("heartbeat: "),
            "reset {bad:?}: {}",
            out.stderr
        );
    }
    assert!(env.events("task_reset").is_empty(), "{:#?}", env.audit());
    // A known task that never failed: fine, nothing to clear.
    env.cmd(["reset", &known]).user(USER).output().code(0);
    assert_eq!(env.events("task_reset").len(), 1);
}

// ---------------------------------------------------------------------------------------
// Run cap

#[test]
fn run_cap_runs_the_next_tasks_in_file_order_at_later_runs() {
    let md: String = "## One-time\n".to_string()
        + &(1..=5)
            .map(|n| format!("- [ ] @log {{\"text\": \"t{n}\"}}\n"))
            .collect::<String>();
    let env = Env::new(&md).config("max_tasks_per_run = 2\n");
    let ids = task_ids(&env);
    let outputs_at = |now: &str| -> Vec<String> {
        events_at(&env, "task_succeeded", now)
            .iter()
            .map(|e| e["output"].as_str().unwrap().to_string())
            .collect()
    };
    let capped_at = |now: &str| -> Vec<String> {
        events_at(&env, "task_skipped", now)
            .iter()
            .map(|e| {
                assert_eq!(e["reason"], "run_cap", "{e}");
                assert_eq!(e["tool"], "log", "{e}");
                e["task_id"].as_str().unwrap().to_string()
            })
            .collect()
    };

    let r1 = "2026-05-01T10:00:00Z";
    env.run_once(r1).code(0);
    assert_eq!(outputs_at(r1), ["t1", "t2"]);
    assert_eq!(capped_at(r1), ids[2..]);
    let fin = &env.events("run_finished")[0];
    assert_eq!(
        (fin["succeeded"].clone(), fin["skipped"].clone()),
        (json!(2), json!(3))
    );
    assert_eq!(env.read("HEARTBEAT.md"), md.replacen("[ ]", "[x]", 2));

    let r2 = "2026-05-01T10:30:00Z";
    env.run_once(r2).code(0);
    assert_eq!(outputs_at(r2), ["t3", "t4"]);
    assert_eq!(capped_at(r2), ids[4..]);
    let r3 = "2026-05-01T11:00:00Z";
    env.run_once(r3).code(0);
    assert_eq!(outputs_at(r3), ["t5"]);
    assert!(capped_at(r3).is_empty());
    assert_eq!(env.read("HEARTBEAT.md"), md.replace("[ ]", "[x]"));
}

#[test]
fn check_says_run_cap_for_the_tasks_past_the_cap() {
    let md: String = "## Recurring\n".to_string()
        + &(1..=3)
            .map(|n| format!("- [ ] @log {{\"text\": \"t{n}\"}}\n"))
            .collect::<String>();
    let env = Env::new(&md).config("max_tasks_per_run = 2\n");
    let decisions: Vec<Value> = check(&env, NOW)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!([t["decision"], t["reason"]]))
        .collect();
    assert_eq!(
        decisions,
        [
            json!(["run", null]),
            json!(["run", null]),
            json!(["run_cap", "run_cap"])
        ]
    );
    let text = env.cmd(["check"]).now(NOW).output();
    text.code(0);
    assert_eq!(
        text.stdout.matches(" run_cap ").count(),
        1,
        "{}",
        text.stdout
    );
}

#[test]
fn run_cap_lets_the_recurring_tasks_that_waited_go_first() {
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"a\"}\n- [ ] @log {\"text\": \"b\"}\n- [ ] @log {\"text\": \"c\"}\n",
    )
    .config("max_tasks_per_run = 2\n");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut waited: Vec<String> = Vec::new();
    for n in 0..4 {
        let now = slot(n);
        env.run_once(&now).code(0);
        let ran: Vec<String> = events_at(&env, "task_succeeded", &now)
            .iter()
            .map(|e| e["output"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ran.len(), 2, "at {now}: {ran:?}");
        for w in &waited {
            assert!(
                ran.contains(w),
                "{w} waited at the run before {now} and was skipped again: ran {ran:?}"
            );
        }
        for r in &ran {
            *counts.entry(r.clone()).or_default() += 1;
        }
        let skipped = events_at(&env, "task_skipped", &now);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0]["reason"], "run_cap");
        waited = ["a", "b", "c"]
            .iter()
            .filter(|t| !ran.iter().any(|r| r == *t))
            .map(|t| t.to_string())
            .collect();
    }
    for t in ["a", "b", "c"] {
        assert!(counts.get(t).copied().unwrap_or(0) >= 2, "{counts:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Pause

#[test]
fn pause_holds_every_run_until_resume() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n");
    let id = task_ids(&env)[0].clone();
    let out = env.cmd(["pause"]).user(USER).output();
    out.code(0);
    let paused = env.events("paused");
    assert_eq!(paused.len(), 1, "{:#?}", env.audit());
    assert_eq!(paused[0]["by"], BY);
    assert_eq!(paused[0]["until"], Value::Null);
    assert_ts_of(&paused[0]["ts"], NOW);
    let st = status(&env, "2026-05-01T10:10:00Z");
    assert_eq!(st["paused"], true);
    assert_eq!(st["paused_until"], Value::Null);

    // Runs are skipped (exit 0), hours later too.
    for now in ["2026-05-01T10:30:00Z", "2026-05-02T10:30:00Z"] {
        let out = env.run_once(now);
        out.code(0);
        assert_eq!(
            out.stdout, "skipped: paused until resumed\n",
            "a paused run says so, once"
        );
        let skip = events_at(&env, "run_skipped", now);
        assert_eq!(skip.len(), 1, "{:#?}", env.audit());
        assert_eq!(skip[0]["reason"], "paused");
    }
    assert!(env.events("task_succeeded").is_empty());
    // check shows the open task as inactive.
    let t = checked(&env, "2026-05-02T10:40:00Z", &id);
    assert_eq!(t["decision"], "inactive", "{t:#}");

    // --force runs while paused (and the pause stays).
    let forced = "2026-05-02T10:45:00Z";
    env.run_with(forced, &["--force"]).code(0);
    assert_eq!(ran_at(&env, forced), ["log"]);
    assert_eq!(status(&env, forced)["paused"], true);

    // resume ends it; the next run runs.
    let at = "2026-05-02T11:00:00Z";
    env.cmd(["resume"]).now(at).user(USER).output().code(0);
    let resumed = env.events("resumed");
    assert_eq!(resumed.len(), 1, "{:#?}", env.audit());
    assert_eq!(resumed[0]["by"], BY);
    assert_ts_of(&resumed[0]["ts"], at);
    let st = status(&env, at);
    assert_eq!(st["paused"], false);
    assert_eq!(st["paused_until"], Value::Null);
    let after = "2026-05-02T11:30:00Z";
    env.run_once(after).code(0);
    assert_eq!(ran_at(&env, after), ["log"]);
    assert!(events_at(&env, "run_skipped", after).is_empty());
    assert_eq!(checked(&env, after, &id)["decision"], "run");
}

#[test]
fn a_pause_past_the_year_9999_is_refused_as_too_long() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n");
    let out = env.cmd(["pause", "--for", "99999y"]).output();
    out.code(2);
    assert!(out.stderr.contains("too long"), "{out:?}");
    assert!(env.events("paused").is_empty(), "{:#?}", env.audit());
    let st = env.cmd(["status", "--json"]).output().json();
    assert_eq!(st["paused"], false);
}

#[test]
fn a_timed_pause_ends_by_itself() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n");
    let out = env
        .cmd(["pause", "--for", "1h", "--reason", "deploy"])
        .user(USER)
        .output();
    out.code(0);
    let until = ts("2026-05-01T11:00:00Z");
    let paused = env.events("paused");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["until"], until.as_str());
    assert_eq!(paused[0]["reason"], "deploy");
    assert_eq!(paused[0]["by"], BY);

    let half = "2026-05-01T10:30:00Z";
    let st = status(&env, half);
    assert_eq!(st["paused"], true);
    assert_eq!(st["paused_until"], until.as_str());
    env.run_once(half).code(0);
    let skip = events_at(&env, "run_skipped", half);
    assert_eq!(skip.len(), 1, "{:#?}", env.audit());
    assert_eq!(skip[0]["reason"], "paused");
    assert!(env.events("task_succeeded").is_empty());

    // Past the end: the run records that the pause ended, then runs.
    let later = "2026-05-01T11:01:00Z";
    let st = status(&env, later);
    assert_eq!(st["paused"], false);
    assert_eq!(st["paused_until"], Value::Null);
    env.run_once(later).code(0);
    let resumed = env.events("resumed");
    assert_eq!(resumed.len(), 1, "{:#?}", env.audit());
    assert_ts_of(&resumed[0]["ts"], later);
    assert_eq!(resumed[0]["until"], until.as_str());
    assert_eq!(ran_at(&env, later), ["log"]);
    assert!(events_at(&env, "run_skipped", later).is_empty());
    // Only once.
    env.run_once("2026-05-01T11:30:00Z").code(0);
    assert_eq!(env.events("resumed").len(), 1);
    let names = env.event_names();
    let r = names.iter().position(|e| e == "resumed").unwrap();
    let ok = names.iter().position(|e| e == "task_succeeded").unwrap();
    assert!(
        r < ok,
        "resumed is audited before the run's work: {names:?}"
    );
}

#[test]
fn a_pause_too_long_for_the_calendar_is_refused_not_a_panic() {
    // docs/reference.md#run-output: never a Rust panic for bad input. 300000 years is past chrono's
    // last year.
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n");
    let out = env.cmd(["pause", "--for", "300000y"]).user(USER).output();
    out.no_panic();
    assert!(
        matches!(out.code, Some(0 | 2)),
        "pause --for 300000y: {:?}\n{}",
        out.code,
        out.stderr
    );
    if out.code == Some(2) {
        assert!(out.stderr.starts_with("heartbeat: "), "{}", out.stderr);
        assert!(env.events("paused").is_empty());
    }
}

// ---------------------------------------------------------------------------------------
// Concurrency

/// Counts renames onto and in-place writes of `name` in `dir` (inotify), so a test can tell
/// how many times a file was rewritten.
struct Rewrites {
    inotify: nix::sys::inotify::Inotify,
    name: String,
}

impl Rewrites {
    fn watch(dir: &std::path::Path, name: &str) -> Rewrites {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let inotify =
            Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).expect("inotify_init1");
        inotify
            .add_watch(
                dir,
                AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CLOSE_WRITE,
            )
            .expect("inotify_add_watch");
        Rewrites {
            inotify,
            name: name.to_string(),
        }
    }

    /// How many times the file was replaced or written since `watch`.
    fn count(&self) -> usize {
        let mut n = 0;
        // Until reading would block: every event so far has been read.
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            n += events
                .iter()
                .filter(|e| e.name.as_deref() == Some(std::ffi::OsStr::new(&self.name)))
                .count();
        }
        n
    }
}

#[test]
fn eight_parallel_tasks_finish_together_and_are_ticked_in_one_rewrite() {
    let mut md = String::from("# Work\n\n## One-time\n");
    for n in 1..=8 {
        md.push_str(&format!("- [ ] @nap {{\"n\": {n}}}\n"));
    }
    md.push_str("\n## Notes\n- [ ] stays open\n");
    // Each task waits until all eight have started: they succeed only if all eight run at
    // once (one that waits longer than its timeout fails).
    let barrier = "touch \"here_$HEARTBEAT_TASK_ID\"; \
                   until [ \"$(ls | grep -c '^here_')\" -ge 8 ]; do sleep 0.05; done";
    let env = Env::new(&md).config(&format!(
        "concurrency = 8\n[tools.nap]\ncommand = [\"sh\", \"-c\", {}]\ntimeout = \"30s\"\n\
         approval = \"auto\"\n",
        serde_json::to_string(barrier).unwrap()
    ));
    let rewrites = Rewrites::watch(env.root(), "HEARTBEAT.md");
    let out = env.run_once(NOW);
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 8, "{:#?}", env.audit());
    let inputs: BTreeSet<i64> = ok
        .iter()
        .map(|e| e["input"]["n"].as_i64().unwrap())
        .collect();
    assert_eq!(inputs, (1..=8).collect());
    assert_eq!(env.events("task_marked_done").len(), 8);
    // Exactly the eight boxes changed, in one rewrite.
    let expected = md.replacen("[ ]", "[x]", 8);
    assert_eq!(env.read("HEARTBEAT.md"), expected);
    assert_eq!(
        rewrites.count(),
        1,
        "HEARTBEAT.md was rewritten more than once"
    );
    // Every audit line is whole: `audit()` parses each one; the run is bracketed. (The
    // day's first run also says retention ran: `state_pruned`.)
    let names = env.event_names();
    assert_eq!(names.first().map(String::as_str), Some("run_started"));
    assert_eq!(names.last().map(String::as_str), Some("run_finished"));
    assert_eq!(names.len(), 1 + 1 + 8 + 8 + 1, "{names:?}");
    assert!(env.audit_text().lines().all(|l| l.starts_with("{\"ts\":")));
}

#[test]
fn concurrency_two_never_runs_more_than_two_at_once() {
    let script = "date +%s.%N > \"start_$HEARTBEAT_TASK_ID\"; sleep 0.3; date +%s.%N > \"end_$HEARTBEAT_TASK_ID\"";
    let mut md = String::from("## Recurring\n");
    for n in 1..=4 {
        md.push_str(&format!("- [ ] @span {{\"n\": {n}}}\n"));
    }
    let env = Env::new(&md).config(&format!(
        "concurrency = 2\n[tools.span]\ncommand = [\"sh\", \"-c\", {}]\napproval = \"auto\"\n",
        serde_json::to_string(script).unwrap()
    ));
    let ids = task_ids(&env);
    let started = Instant::now();
    env.run_once(NOW).code(0);
    let took = started.elapsed();
    assert_eq!(env.events("task_succeeded").len(), 4, "{:#?}", env.audit());
    assert!(
        took >= Duration::from_millis(600),
        "four 0.3 s tasks, two at a time, took only {took:?}"
    );
    let read = |name: String| -> f64 {
        env.read(&name)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let spans: Vec<(f64, f64)> = ids
        .iter()
        .map(|id| (read(format!("start_{id}")), read(format!("end_{id}"))))
        .collect();
    // At each start, how many tasks were running (itself included)?
    let most = spans
        .iter()
        .map(|&(s, _)| spans.iter().filter(|&&(s2, e2)| s2 <= s && s < e2).count())
        .max()
        .unwrap();
    assert!(most <= 2, "more than two at once: {spans:?}");
    assert_eq!(most, 2, "concurrency = 2 never ran two at once: {spans:?}");
}

// ---------------------------------------------------------------------------------------
// Alerts

#[test]
fn trips_and_the_spent_budget_alert_telegram_even_in_quiet_hours() {
    use crate::tg_double::{TgDouble, parse_html};
    let tg = TgDouble::start();
    tg.expect_token(TG_TOKEN);
    // Quiet all day (Berlin), summaries never: only urgent messages go out.
    let env = Env::new(&recurring(&[
        "- [ ] @flaky {}\n",
        "- [ ] @big {}\n",
        LOG_TASK,
    ]))
    .config(&format!(
        "{}max_consecutive_failures = 1\n[budget]\ndaily_usd = 1.0\n{FLAKY}{BIG}{}",
        berlin(""),
        tg_toml(
            &tg.url(),
            &[111],
            "summary = \"never\"\nquiet_hours = \"00:00-24:00\""
        )
    ));
    env.write("failing", "");
    let id = task_ids(&env)[0].clone();
    env.cmd(["run", "--once"]).token().now(NOW).output().code(1);
    assert_eq!(env.events("task_tripped").len(), 1, "{:#?}", env.audit());
    assert_eq!(
        env.events("budget_exhausted").len(),
        1,
        "{:#?}",
        env.audit()
    );
    let shown = |tg: &TgDouble| -> Vec<String> {
        tg.calls_to("sendMessage")
            .iter()
            .map(|c| {
                let html = c.body["text"].as_str().unwrap_or_default();
                parse_html(html).unwrap_or_else(|e| panic!("invalid HTML ({e}): {html}"))
            })
            .collect()
    };
    let texts = shown(&tg);
    assert!(
        texts
            .iter()
            .any(|t| t.contains(&format!("heartbeat reset {id}"))),
        "no trip alert naming `heartbeat reset {id}`: {texts:#?}"
    );
    let budget = |texts: &[String]| texts.iter().filter(|t| t.contains("budget")).count();
    assert_eq!(budget(&texts), 1, "{texts:#?}");
    let st = env.cmd(["status", "--json"]).token().now(NOW).output();
    st.code(0);
    assert_eq!(
        st.json()["outbox"],
        0,
        "an alert waits for the end of quiet hours"
    );

    // The next run the same day: tripped and budget skips, no second alert.
    let r2 = "2026-05-01T11:00:00Z";
    env.cmd(["run", "--once"]).token().now(r2).output().code(0);
    assert_eq!(
        skipped_at(&env, r2),
        pairs(&[("flaky", "tripped"), ("big", "budget"), ("log", "budget")])
    );
    assert_eq!(budget(&shown(&tg)), 1);
    assert_eq!(env.events("task_tripped").len(), 1);
}

/// `reset` and `revoke` take the id prefixes `log --task` takes (4 or more hex digits); an
/// absurd argument is not echoed back whole.
#[test]
fn reset_and_revoke_take_id_prefixes() {
    let env = Env::new(&recurring(&[LOG_TASK]));
    env.run_once(NOW).code(0);
    let id = task_ids(&env)[0].clone();
    let out = env.cmd(["reset", &id[..6]]).user(USER).output();
    out.code(0);
    assert!(out.stdout.contains(&id), "{}", out.stdout);
    assert_eq!(env.events("task_reset")[0]["task_id"], id.as_str());

    let out = env
        .cmd(["revoke", &id[..5].to_uppercase()])
        .user(USER)
        .output();
    out.code(2);
    assert!(out.stderr.contains(&id[..5]), "{}", out.stderr);

    let huge = "a".repeat(100_000);
    let out = env.cmd(["reset", &huge]).user(USER).output();
    out.code(2);
    assert!(
        out.stderr.len() < 400,
        "{} bytes of stderr",
        out.stderr.len()
    );
    let out = env.cmd(["reset", "abc"]).user(USER).output();
    out.code(2);
}

/// One run with a clock far ahead (a future `--now`, an RTC that NTP corrected) stores its
/// attempt in the future: later runs read it as now and store it as now, so the schedule is
/// held back for one interval at most, and `check` warns (docs/reference.md#when-a-task-is-due).
#[test]
fn an_attempt_stored_in_the_future_counts_as_now() {
    let env = Env::new("## Recurring\n### Every 1h\n- [ ] @log {\"text\": \"hourly\"}\n");
    env.run_once("2031-01-01T10:00:00Z").code(0);
    let t0 = "2026-05-01T10:00:00Z";
    let doc = check(&env, t0);
    let warned = doc["problems"].as_array().unwrap().iter().any(|p| {
        p["severity"] == "warning" && p["message"].as_str().unwrap().contains("later than now")
    });
    assert!(warned, "{doc:#}");
    env.run_once(t0).code(0);
    assert!(ran_at(&env, t0).is_empty(), "read as now: not due yet");
    let t1 = "2026-05-01T11:00:00Z";
    env.run_once(t1).code(0);
    assert_eq!(
        ran_at(&env, t1),
        ["log"],
        "one interval later it runs again"
    );
    let doc = check(&env, t1);
    assert!(
        !doc["problems"].to_string().contains("later than now"),
        "stored as now: {doc:#}"
    );
}

/// A run that did nothing says why on stdout, one line, unless `-q` (docs/reference.md#run-output).
#[test]
fn a_run_that_did_nothing_says_why() {
    let env = Env::new(&recurring(&[LOG_TASK])).config(&berlin("active_hours = \"08:00-20:00\"\n"));
    // 23:00 Berlin.
    let night = "2026-05-01T21:00:00Z";
    let out = env.run_once(night);
    out.code(0);
    assert!(
        out.stdout
            .starts_with("skipped: outside active hours; next active 2026-05-02 08:00"),
        "{}",
        out.stdout
    );
    assert_eq!(env.run_with(night, &["-q"]).stdout, "");

    let day = "2026-05-01T10:00:00Z";
    env.cmd(["pause", "--for", "1h", "--reason", "deploy"])
        .now(day)
        .user(USER)
        .output()
        .code(0);
    let out = env.run_once(day);
    out.code(0);
    assert!(
        out.stdout
            .starts_with("skipped: paused until 2026-05-01 13:00")
            && out.stdout.contains("(deploy)"),
        "{}",
        out.stdout
    );
    assert_eq!(env.run_with(day, &["-q"]).stdout, "");

    let env = Env::new(&recurring(&[PAID_TASK, LOG_TASK]))
        .config(&berlin(&format!("[budget]\ndaily_usd = 0.4\n{PAID}")));
    env.run_once("2026-05-01T10:00:00Z").code(0);
    let out = env.run_once("2026-05-01T11:00:00Z");
    out.code(0);
    assert_eq!(
        out.stdout,
        "2 task(s) waiting for budget ($0.40 of $0.40 spent today)\n"
    );
}

/// `check` while paused says paused, not "outside active hours"; both when both hold.
#[test]
fn check_while_paused_says_paused() {
    let env = Env::new(&recurring(&[LOG_TASK])).config(&berlin("active_hours = \"08:00-20:00\"\n"));
    let day = "2026-05-01T10:00:00Z";
    env.cmd(["pause"]).now(day).user(USER).output().code(0);
    let out = env.cmd(["check"]).now(day).output();
    out.code(0);
    assert!(out.stdout.contains("paused now"), "{}", out.stdout);
    assert!(
        !out.stdout.contains("outside active hours"),
        "{}",
        out.stdout
    );
    let night = "2026-05-01T21:00:00Z";
    let out = env.cmd(["check"]).now(night).output();
    assert!(out.stdout.contains("paused now"), "{}", out.stdout);
    assert!(
        out.stdout.contains("outside active hours"),
        "{}",
        out.stdout
    );
}

/// The run in which a task trips says so, also with `-q`, naming the reset command, and
/// exits 1 (docs/reference.md#exit-codes).
#[test]
fn the_run_that_trips_a_task_says_tripped_even_when_quiet() {
    let env = flaky_env(&format!("max_consecutive_failures = 2\n{FLAKY}"));
    let id = task_ids(&env)[0].clone();
    let first = env.run_with(&slot(0), &["-q"]);
    first.code(1);
    assert!(!first.stdout.contains("TRIPPED"), "{}", first.stdout);
    let second = env.run_with(&slot(1), &["-q"]);
    second.code(1);
    let line = second
        .stdout
        .lines()
        .find(|l| l.starts_with("TRIPPED"))
        .unwrap_or_else(|| panic!("no TRIPPED line: {}", second.stdout));
    assert!(line.contains("@flaky"), "{line}");
    assert!(line.contains("HEARTBEAT.md:"), "{line}");
    assert!(line.contains("failed 2 times in a row"), "{line}");
    assert!(
        line.ends_with(&format!("run heartbeat reset {id}")),
        "{line}"
    );
}

/// After the run that trips it, a tripped task's skip is said once a local day (cron mails
/// every line), and not at all with -q.
#[test]
fn a_tripped_task_is_said_skipped_once_a_day() {
    let env = Env::new("## Recurring\n- [ ] @fail {}\n- [ ] @log {\"text\": \"x\"}\n").config(
        "timezone = \"UTC\"\nmax_consecutive_failures = 1\n[tools.fail]\ncommand = [\"false\"]\napproval = \"auto\"\n",
    );
    let tripped = env.run_once("2026-05-01T10:00:00Z");
    tripped.code(1);
    assert!(tripped.stdout.contains("TRIPPED"), "{}", tripped.stdout);
    let same_day = env.run_once("2026-05-01T11:00:00Z");
    same_day.code(0);
    assert!(!same_day.stdout.contains("tripped"), "{}", same_day.stdout);
    let next_day = env.run_once("2026-05-02T09:00:00Z");
    next_day.code(0);
    assert!(
        next_day.stdout.contains("skipped   @fail"),
        "{}",
        next_day.stdout
    );
    let again = env.run_once("2026-05-02T10:00:00Z");
    assert!(!again.stdout.contains("@fail"), "{}", again.stdout);
    // Every run still audits the skip.
    assert_eq!(env.events("task_skipped").len(), 3);
}
