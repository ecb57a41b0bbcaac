//! Approvals (docs/reference.md#approvals, issue 3): the lifecycle pending → approved → running →
//! succeeded|failed, pending → denied|expired, approved → stale; `approve` by id, `--all`,
//! `--later`, `--always`, one by one on a terminal; `deny`, `approvals`, `grants`, `revoke`;
//! who decided; the audit lines; bad input; and the store's own guarantees (WAL, schema
//! version, one open approval per task). Concurrency and crashes are in `approve_concurrency`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

/// The user every decision in these tests is made by.
pub(crate) const USER: &str = "tester";
pub(crate) const BY: &str = "cli:tester";

/// Generous, but a hang still fails fast.
const T: Duration = Duration::from_secs(10);

/// `approve ARGS…` as [`USER`], at `now`.
fn approve(env: &Env, now: &str, args: &[&str]) -> Output {
    env.cmd(["approve"]).args(args).now(now).user(USER).output()
}

/// `deny ARGS…` as [`USER`], at `now`.
fn deny(env: &Env, now: &str, args: &[&str]) -> Output {
    env.cmd(["deny"]).args(args).now(now).user(USER).output()
}

/// The approval ids `approval_requested` named, in order.
fn requested_ids(env: &Env) -> Vec<i64> {
    env.events("approval_requested")
        .iter()
        .map(|e| {
            e["approval_id"]
                .as_i64()
                .expect("approval_id is an integer")
        })
        .collect()
}

/// The task id of approval `id`.
fn task_of(env: &Env, id: i64) -> String {
    env.approval(id)["task_id"]
        .as_str()
        .expect("task_id")
        .to_string()
}

fn shell_task(cmd: &str) -> String {
    format!("- [ ] @shell {{\"cmd\": {}}}\n", json_str(cmd))
}

/// Events whose `approval_id` is `id`.
fn events_for(env: &Env, event: &str, id: i64) -> Vec<Value> {
    env.events(event)
        .into_iter()
        .filter(|e| e["approval_id"] == id)
        .collect()
}

/// A check-list of one shell task that appends "x" to ran.txt, run once at `NOW`: its
/// approval #1 is pending.
#[track_caller]
fn one_pending_echo() -> Env {
    let env = Env::new(&format!(
        "## Recurring\n{}",
        shell_task("echo x >> ran.txt")
    ));
    env.run_once(NOW).code(0);
    env
}

#[track_caller]
fn assert_stderr_names(out: &Output, needles: &[&str]) {
    for n in needles {
        assert!(
            out.stderr.contains(n),
            "stderr should name {n:?}\ncommand: {}\n--- stdout\n{}--- stderr\n{}",
            out.command,
            out.stdout,
            out.stderr
        );
    }
    assert!(
        out.stderr.starts_with("heartbeat: "),
        "a clean one-line error, not a panic: {}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------
// approve ID: runs now, ticks, audits, records who.

#[test]
fn approve_by_id_runs_now_ticks_the_one_time_task_and_records_who() {
    let md = format!("## One-time\n{}", shell_task("echo hello; touch ran"));
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    assert_eq!(requested_ids(&env), vec![1]);
    assert!(!env.exists("ran"));
    let task_id = task_of(&env, 1);

    let at = "2026-05-01T10:05:00Z";
    let out = approve(&env, at, &["1"]);
    out.code(0);
    assert!(env.exists("ran"), "the approved task ran now");
    assert!(out.stdout.contains("#1"), "stdout: {}", out.stdout);

    // The one-time task is ticked, those bytes only.
    assert_eq!(env.read("HEARTBEAT.md"), md.replacen("[ ]", "[x]", 1));

    // The row: succeeded, decided by cli:<user> at --now.
    let row = env.approval(1);
    assert_eq!(row["state"], "succeeded", "{row:#}");
    assert_eq!(row["decided_by"], BY);
    assert_ts_of(&row["decided_at"], at);
    assert_eq!(row["task_id"], task_id.as_str());

    // The decision is audited with its keys, before the run's lines.
    let approved = env.events("approval_approved");
    assert_eq!(approved.len(), 1, "{:#?}", env.audit());
    let a = &approved[0];
    assert_has_keys(a, &["approval_id", "task_id", "by", "always", "reason"]);
    assert_eq!(a["approval_id"], 1);
    assert_eq!(a["task_id"], task_id.as_str());
    assert_eq!(a["by"], BY);
    assert_eq!(a["always"], false);
    assert_eq!(a["reason"], Value::Null);
    assert_ts_of(&a["ts"], at);

    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["approval_id"], 1);
    assert_eq!(ok[0]["task_id"], task_id.as_str());
    assert_eq!(ok[0]["output"].as_str().map(str::trim), Some("hello"));
    assert_eq!(ok[0]["section"], "one_time");
    let names = env.event_names();
    let pos = |e: &str| names.iter().position(|n| n == e).unwrap();
    assert!(
        pos("approval_approved") < pos("task_succeeded"),
        "{names:?}"
    );
    // The execution is a run of its own, mode approve, under one run_id.
    let starts = env.events("run_started");
    let approve_run = starts
        .iter()
        .find(|s| s["mode"] == "approve")
        .unwrap_or_else(|| panic!("no run_started with mode approve: {starts:#?}"));
    assert_eq!(ok[0]["run_id"], approve_run["run_id"]);
    let marked = env.events("task_marked_done");
    assert_eq!(marked.len(), 1, "{:#?}", env.audit());
    assert_eq!(marked[0]["task_id"], task_id.as_str());

    // Done: a later run neither runs nor queues it.
    std::fs::remove_file(env.path("ran")).unwrap();
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert!(!env.exists("ran"));
    assert_eq!(requested_ids(&env), vec![1]);
}

#[test]
fn an_approved_task_that_fails_exits_1_and_the_approval_is_failed() {
    let md = format!("## One-time\n{}", shell_task("echo boom >&2; exit 3"));
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    let out = approve(&env, NOW, &["1"]);
    out.code(1);
    assert_eq!(env.approval(1)["state"], "failed");
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["approval_id"], 1);
    assert_eq!(failed[0]["exit_code"], 3);
    // Not ticked: it did not succeed.
    assert_eq!(env.read("HEARTBEAT.md"), md);
}

#[test]
fn approve_several_ids_runs_each_once() {
    let md = format!(
        "## Recurring\n{}{}",
        shell_task("echo a >> ran.txt"),
        shell_task("echo b >> ran.txt")
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);
    // `#2` is accepted as well as `2`; a repeated id counts once.
    approve(&env, NOW, &["1", "#2", "1"]).code(0);
    assert_eq!(env.read("ran.txt"), "a\nb\n");
    assert_eq!(env.approval(1)["state"], "succeeded");
    assert_eq!(env.approval(2)["state"], "succeeded");
    assert_eq!(env.events("approval_approved").len(), 2);
    assert_eq!(env.events("task_succeeded").len(), 2);
    // Recurring: the next run asks again.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1, 2, 3, 4]);
}

// ---------------------------------------------------------------------------------------
// --later: the next run runs it, even outside active hours; it never needs the lock.

#[test]
fn approve_later_runs_at_the_next_run_even_outside_active_hours() {
    let env = Env::new(&format!("## One-time\n{}", shell_task("touch ran")))
        .config("timezone = \"UTC\"\nactive_hours = \"08:00-09:00\"\n");
    env.run_once("2026-05-01T08:30:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1]);

    // --later never needs the run lock: it returns while another run holds it (had it waited
    // for the lock, it would still be waiting when the time runs out).
    let lock = env.hold_lock();
    let child = env
        .cmd(["approve", "1", "--later"])
        .now("2026-05-01T08:40:00Z")
        .user(USER)
        .spawn();
    let out = wait_output(child, "approve 1 --later while the lock is held", WAIT);
    out.code(0);
    drop(lock);
    assert!(!env.exists("ran"), "--later does not run now");
    assert!(out.stdout.contains("next run"), "stdout: {}", out.stdout);
    let row = env.approval(1);
    assert_eq!(row["state"], "approved");
    assert_eq!(row["decided_by"], BY);
    assert_eq!(events_for(&env, "approval_approved", 1).len(), 1);

    // 10:00 is outside 08:00-09:00: the run skips its plan but runs what a person approved.
    let out = env.run_once("2026-05-01T10:00:00Z");
    out.code(0);
    assert!(
        env.exists("ran"),
        "the approved task ran outside active hours"
    );
    assert_eq!(env.approval(1)["state"], "succeeded");
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["approval_id"], 1);
    assert!(
        env.read("HEARTBEAT.md").starts_with("## One-time\n- [x] "),
        "ticked: {}",
        env.read("HEARTBEAT.md")
    );
    let skipped = env.events("run_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "outside_active_hours");
}

#[test]
fn check_says_approved_for_a_task_approved_with_later_until_it_runs() {
    let env = one_pending_echo();
    let decision = |now: &str| {
        let out = env.cmd(["check", "--json"]).now(now).output();
        out.code(0);
        let task = out.json()["tasks"][0].clone();
        (task["decision"].clone(), task["approval_id"].clone())
    };
    assert_eq!(decision(NOW), (json!("pending"), json!(1)));
    approve(&env, NOW, &["1", "--later"]).code(0);
    assert_eq!(decision(NOW), (json!("approved"), json!(1)));
    let text = env.cmd(["check"]).now(NOW).output();
    text.code(0);
    assert!(text.stdout.contains(" approved #1 "), "{}", text.stdout);
    env.run_once("2026-05-01T10:30:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\n");
    assert_ne!(decision("2026-05-01T10:30:00Z").0, "approved");
}

#[test]
fn approving_an_id_already_approved_with_later_runs_it_now() {
    let env = one_pending_echo();
    approve(&env, NOW, &["1", "--later"]).code(0);
    assert!(!env.exists("ran.txt"));
    let out = approve(&env, "2026-05-01T10:01:00Z", &["1"]);
    out.code(0);
    assert!(
        out.stdout.contains("already approved") && out.stdout.contains(BY),
        "stdout: {}",
        out.stdout
    );
    assert_eq!(env.read("ran.txt"), "x\n");
    assert_eq!(env.approval(1)["state"], "succeeded");
    // Decided once: one approval_approved, the first decision's time stays.
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_ts_of(&env.approval(1)["decided_at"], NOW);
}

#[test]
fn an_approved_recurring_task_runs_once_and_is_not_queued_again_in_the_same_run() {
    let env = one_pending_echo();
    approve(&env, NOW, &["1", "--later"]).code(0);
    env.run_once("2026-05-01T10:30:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\n");
    assert_eq!(env.approval(1)["state"], "succeeded");
    assert_eq!(
        requested_ids(&env),
        vec![1],
        "the run that ran the approval queued it again"
    );
    // The next run asks again (a recurring task needs a yes each time without a grant).
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);
    assert_eq!(env.read("ran.txt"), "x\n");
}

#[test]
fn a_tool_denied_by_policy_after_the_approval_does_not_run() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")));
    env.run_once(NOW).code(0);
    approve(&env, NOW, &["1", "--later"]).code(0);
    // A guardrail added afterwards wins over the earlier yes.
    let env = env.config("[tools.shell]\napproval = \"deny\"\n");
    let out = env.run_once("2026-05-01T10:30:00Z");
    out.no_panic();
    assert!(!env.exists("ran"));
    assert!(env.events("task_succeeded").is_empty());
    // Blocked, not used up: it stays approved and the run says why.
    assert_eq!(env.approval(1)["state"], "approved");
    assert!(
        env.events("approval_stale").is_empty(),
        "{:#?}",
        env.audit()
    );
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "denied_by_policy");
    assert_eq!(skipped[0]["task_id"], task_of(&env, 1));
}

#[test]
fn approve_while_paused_keeps_the_approval_for_after_the_pause() {
    let env = one_pending_echo();
    env.cmd(["pause"]).now(NOW).user(USER).output().code(0);
    let out = approve(&env, NOW, &["1"]);
    out.code(0);
    assert!(out.stdout.contains("paused"), "{}", out.stdout);
    assert!(!env.exists("ran.txt"), "it ran while paused");
    assert_eq!(env.approval(1)["state"], "approved");
    let skipped = env.events("run_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "paused");
    env.cmd(["resume"]).now(NOW).user(USER).output().code(0);
    env.run_once("2026-05-01T10:05:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\n");
    assert_eq!(env.approval(1)["state"], "succeeded");
}

#[test]
fn a_trip_holds_approved_work_back() {
    let env = one_pending_echo();
    let task = task_of(&env, 1);
    approve(&env, NOW, &["1", "--later"]).code(0);
    env.db_rw()
        .execute(
            "UPDATE task_state SET tripped_at = ?2 WHERE task_id = ?1",
            [task.as_str(), "2026-05-01T10:00:00.000Z"],
        )
        .unwrap();
    env.run_once("2026-05-01T10:05:00Z").no_panic();
    assert!(!env.exists("ran.txt"), "a tripped task ran");
    assert_eq!(env.approval(1)["state"], "approved");
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "tripped");
    // Reset: the approval runs at the next run.
    env.cmd(["reset", &task])
        .now(NOW)
        .user(USER)
        .output()
        .code(0);
    env.run_once("2026-05-01T10:10:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\n");
}

#[test]
fn secrets_are_redacted_in_approvals_but_the_approved_tool_gets_the_real_input() {
    let md = "## Recurring\n- [ ] @shell {\"cmd\": \"printf %s \\\"$API_TOKEN\\\" > got.txt\", \"env\": {\"API_TOKEN\": \"s3cret-value\"}}\n";
    let env = Env::new(md);
    env.run_once(NOW).code(0);
    let row = env.approval(1);
    assert_eq!(row["input"]["env"]["API_TOKEN"], "***", "{row:#}");
    assert!(!row.to_string().contains("s3cret-value"), "{row:#}");
    let human = env.cmd(["approvals"]).output();
    assert!(!human.stdout.contains("s3cret-value"), "{}", human.stdout);
    // The walk shows the redacted input too.
    let mut walk = env.cmd(["approve"]).user(USER).spawn_on_pty();
    let shown = walk.expect("[q] quit: ", T);
    assert!(!shown.contains("s3cret-value"), "{shown}");
    assert!(shown.contains("***"), "{shown}");
    walk.send("q");
    walk.finish(T).code(0);

    approve(&env, NOW, &["1"]).code(0);
    assert_eq!(
        env.read("got.txt"),
        "s3cret-value",
        "the tool got the real input"
    );
    assert!(
        !env.audit_text().contains("s3cret-value"),
        "{}",
        env.audit_text()
    );
}

// ---------------------------------------------------------------------------------------
// --always, grants, revoke.

#[test]
fn approve_from_another_directory_runs_under_the_config_the_approval_was_queued_under() {
    let env = Env::new("## Recurring\n- [ ] @stamp {}\n").config(
        "[tools.stamp]\ncommand = [\"sh\", \"-c\", \"echo ok >> stamped\"]\napproval = \"ask\"\n",
    );
    env.run_once(NOW).code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    let queued_under = std::fs::canonicalize(env.path("heartbeat.toml")).unwrap();
    let listed = env.cmd(["approvals", "--json"]).output().json();
    assert_eq!(
        listed[0]["config"],
        queued_under.to_str().unwrap(),
        "{listed}"
    );
    env.write("elsewhere/other.toml", "");
    // `approve 1` from elsewhere/, with no `--config`; with HEARTBEAT_CONFIG if given.
    let approve_from_elsewhere = |config: Option<&str>| {
        let mut cmd = env
            .cmd(["approve", "1"])
            .without_config_flag()
            .in_dir(env.path("elsewhere"));
        if let Some(config) = config {
            cmd = cmd.env("HEARTBEAT_CONFIG", env.path(config));
        }
        cmd.output()
    };
    #[track_caller]
    fn assert_stderr_says(out: &Output, said: &str) {
        assert!(out.stderr.contains(said), "{}", out.stderr);
    }

    // Another config, named: refused, naming the one to pass; the approval is not used up.
    let out = approve_from_elsewhere(Some("elsewhere/other.toml"));
    out.code(2);
    let config_flag = format!("`heartbeat --config {} approve 1`", queued_under.display());
    assert_stderr_says(&out, &config_flag);
    assert_stderr_says(&out, "nothing was approved");
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert!(!env.exists("stamped"));

    // From another directory with no config named: the recorded one is used.
    let out = approve_from_elsewhere(None);
    out.code(0);
    assert_stderr_says(
        &out,
        &format!("queued under the config {}", queued_under.display()),
    );
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(env.read("stamped"), "ok\n");

    // Approvals of two configs at once: refused, neither used up.
    env.write(
        "elsewhere/heartbeat.toml",
        "[tools.stamp]\ncommand = [\"true\"]\n",
    );
    env.write(
        "elsewhere/HEARTBEAT.md",
        "## Recurring\n- [ ] @stamp {\"x\": 1}\n",
    );
    env.cmd(["run", "--once"])
        .without_config_flag()
        .in_dir(env.path("elsewhere"))
        .now("2026-05-01T11:00:00Z")
        .output()
        .code(0);
    env.run_once("2026-05-01T11:00:00Z").code(0);
    let pending: Vec<i64> = env
        .cmd(["approvals", "--json"])
        .output()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "pending")
        .map(|a| a["id"].as_i64().unwrap())
        .collect();
    assert_eq!(pending.len(), 2, "one per config: {pending:?}");
    let out = approve(&env, "2026-05-01T11:05:00Z", &["--all", "--yes"]);
    out.code(2);
    assert_stderr_says(&out, "different configs");
    for id in pending {
        assert_eq!(env.approval_state(id).as_deref(), Some("pending"));
    }
}

#[test]
fn a_run_under_another_config_leaves_an_approval_queued_under_its_own_config_alone() {
    let env = Env::new("## Recurring\n- [ ] @stamp {}\n").config(
        "[tools.stamp]\ncommand = [\"sh\", \"-c\", \"echo ok >> stamped\"]\napproval = \"ask\"\n",
    );
    env.run_once(NOW).code(0);
    approve(&env, NOW, &["1", "--later"]).code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("approved"));
    // Another project's cron line on the same state dir: not its approval to use up.
    env.write("elsewhere/heartbeat.toml", "files = [\"HEARTBEAT.md\"]\n");
    env.write("elsewhere/HEARTBEAT.md", "## Recurring\n");
    env.cmd(["run", "--once"])
        .without_config_flag()
        .in_dir(env.path("elsewhere"))
        .now("2026-05-01T10:30:00Z")
        .output()
        .code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("approved"));
    assert!(
        env.events("approval_stale").is_empty(),
        "{:#?}",
        env.audit()
    );
    assert!(!env.exists("stamped"));
    // Its own config's next run runs it.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(env.read("stamped"), "ok\n");
}

#[test]
fn editing_an_always_granted_task_is_said_in_check_status_run_and_grants() {
    let env = one_pending_echo();
    let task_id = task_of(&env, 1);
    approve(&env, NOW, &["1", "--always"]).code(0);
    let grants = env.cmd(["grants", "--json"]).output().json();
    assert_eq!(grants[0]["orphaned"], false, "{grants}");
    assert_eq!(grants[0]["line"], 2, "{grants}");
    assert_eq!(grants[0]["granted_by"], BY, "{grants}");
    assert!(grants[0]["granted_at"].is_string(), "{grants}");
    let check = env.cmd(["check", "--json"]).now(NOW).output();
    check.code(0);
    let problems = check.json()["problems"].to_string();
    assert!(!problems.contains("grant"), "{problems}");

    // The person edits the task: its grant no longer applies, and everyone says so.
    env.write(
        "HEARTBEAT.md",
        format!("## Recurring\n{}", shell_task("echo y >> ran.txt")),
    );
    let said = format!("the grant for @shell (task {task_id}) no longer matches a task");
    let later = "2026-05-01T11:00:00Z";
    let check = env.cmd(["check", "--json"]).now(later).output();
    check.code(0);
    let problems = check.json()["problems"].clone();
    let p = problems
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["message"].as_str().unwrap_or("").contains(&said))
        .unwrap_or_else(|| panic!("{problems:#}"))
        .clone();
    assert_eq!(p["severity"], "warning");
    assert_eq!(p["line"], 2);
    let text = env.cmd(["check"]).now(later).output();
    text.code(0);
    assert!(
        text.stdout.contains(&said) || text.stderr.contains(&said),
        "{text:?}"
    );

    let status = env.cmd(["status"]).now(later).output();
    status.code(0);
    assert!(status.stdout.contains(&said), "{}", status.stdout);
    let st = env.cmd(["status", "--json"]).now(later).output().json();
    assert_eq!(st["orphaned_grants"], json!([task_id]), "{st}");

    let run = env.cmd(["run", "--once", "-q"]).now(later).output();
    run.code(0);
    assert!(run.stderr.contains(&said), "{}", run.stderr);

    let grants = env.cmd(["grants", "--json"]).output().json();
    assert_eq!(grants[0]["task_id"], task_id.as_str());
    assert_eq!(grants[0]["orphaned"], true, "{grants}");
    let human = env.cmd(["grants"]).output();
    human.code(0);
    assert!(human.stdout.contains("ORPHANED"), "{}", human.stdout);
}

#[test]
fn the_daemon_says_a_grant_was_left_behind_once() {
    let env = one_pending_echo();
    let task_id = task_of(&env, 1);
    approve(&env, NOW, &["1", "--always"]).code(0);
    env.write(
        "HEARTBEAT.md",
        format!("## Recurring\n{}", shell_task("echo y >> ran.txt")),
    );
    let ticks = |n: usize| {
        wait_until("the daemon's ticks", WAIT, || {
            count_matches(&env.audit_text(), "\"event\":\"run_finished\"") >= n
        })
    };
    let before = count_matches(&env.audit_text(), "\"event\":\"run_finished\"");
    // Its last run is two hours old: it ticks at once, then again when asked.
    let d = env
        .cmd(["daemon", "--every", "1h"])
        .now("2026-05-01T12:00:00Z")
        .spawn_guarded();
    ticks(before + 1);
    d.signal(Signal::SIGUSR1);
    ticks(before + 2);
    d.signal(Signal::SIGTERM);
    let out = d.finish(WAIT);
    out.code(0);
    let said = format!("the grant for @shell (task {task_id}) no longer matches a task");
    assert_eq!(count_matches(&out.stderr, &said), 1, "{out:?}");
}

#[test]
fn approve_always_grants_the_exact_task_until_revoked() {
    let env = one_pending_echo();
    let task_id = task_of(&env, 1);

    let out = approve(&env, NOW, &["1", "--always"]);
    out.code(0);
    assert_eq!(env.read("ran.txt"), "x\n");
    let a = &events_for(&env, "approval_approved", 1)[0];
    assert_eq!(a["always"], true);
    assert_eq!(a["by"], BY);

    // grants --json: the exact task id, who granted it and from which approval.
    let grants = env.cmd(["grants", "--json"]).output();
    grants.code(0);
    let grants = grants.json();
    let grants = grants.as_array().expect("grants --json is an array");
    assert_eq!(grants.len(), 1, "{grants:#?}");
    let g = &grants[0];
    assert_eq!(g["task_id"], task_id.as_str());
    assert_eq!(g["tool"], "shell");
    assert_eq!(g["input"], json!({"cmd": "echo x >> ran.txt"}));
    assert_eq!(g["created_by"], BY);
    assert_eq!(g["approval_id"], 1);
    assert_eq!(g["file"], env.md_file());
    let human = env.cmd(["grants"]).output();
    human.code(0);
    assert!(human.stdout.contains(&task_id), "{}", human.stdout);

    // A later run runs it without asking.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\nx\n");
    assert_eq!(requested_ids(&env), vec![1]);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 2);
    assert_eq!(
        ok[1]["approval_id"],
        Value::Null,
        "ran by the grant, not an approval"
    );
    // `check` agrees: it would run.
    let check = env
        .cmd(["check", "--json"])
        .now("2026-05-01T12:00:00Z")
        .output();
    check.code(0);
    assert_eq!(check.json()["tasks"][0]["decision"], "run");

    // A changed input is a new task: it asks again.
    env.write(
        "HEARTBEAT.md",
        format!("## Recurring\n{}", shell_task("echo y >> ran.txt")),
    );
    env.run_once("2026-05-01T12:00:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\nx\n");
    assert_eq!(requested_ids(&env), vec![1, 2]);
    assert_ne!(task_of(&env, 2), task_id);

    // Back to the granted input: runs without asking again.
    env.write(
        "HEARTBEAT.md",
        format!("## Recurring\n{}", shell_task("echo x >> ran.txt")),
    );
    env.run_once("2026-05-01T13:00:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\nx\nx\n");

    // revoke: it asks again.
    let out = env
        .cmd(["revoke", &task_id])
        .now("2026-05-01T13:30:00Z")
        .user(USER)
        .output();
    out.code(0);
    assert_eq!(
        env.cmd(["grants", "--json"]).output().json(),
        json!([]),
        "the grant is gone"
    );
    env.run_once("2026-05-01T14:00:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\nx\nx\n", "revoked: not run");
    assert_eq!(requested_ids(&env), vec![1, 2, 3]);
    assert_eq!(task_of(&env, 3), task_id);

    // Revoking again, an unknown id, or something that is not an id: exit 2.
    let again = env.cmd(["revoke", &task_id]).output();
    again.code(2);
    assert_stderr_names(&again, &[&task_id]);
    let unknown = env.cmd(["revoke", "0123456789ab"]).output();
    unknown.code(2);
    assert_stderr_names(&unknown, &["0123456789ab"]);
    for bad in ["xyz", "0123456789abc", "0123456789ag", ""] {
        let out = env.cmd(["revoke", bad]).output();
        out.code(2);
        assert!(!out.stderr.is_empty(), "revoke {bad:?}: no message");
    }
}

#[test]
fn always_on_an_id_already_approved_with_later_still_grants_it() {
    // `approve ID` accepts an approval already approved with --later (it runs it now); an
    // --always given then must not be dropped without a word.
    let env = one_pending_echo();
    let task_id = task_of(&env, 1);
    approve(&env, NOW, &["1", "--later"]).code(0);
    let out = approve(&env, "2026-05-01T10:01:00Z", &["1", "--always"]);
    out.code(0);
    assert_eq!(env.read("ran.txt"), "x\n");
    let grants = env.cmd(["grants", "--json"]).output().json();
    assert_eq!(
        grants.as_array().map(Vec::len),
        Some(1),
        "approve 1 --always on an approved id made no grant\n--- stdout\n{}--- grants\n{grants:#}",
        out.stdout
    );
    assert_eq!(grants[0]["task_id"], task_id.as_str());
    // And the grant works: the next run runs it without asking.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.read("ran.txt"), "x\nx\n");
    assert_eq!(requested_ids(&env), vec![1]);
}

// ---------------------------------------------------------------------------------------
// deny: reason, who, holds for approval_ttl, then the task is queued again.

#[test]
fn a_deny_holds_for_the_ttl_then_the_task_is_queued_again() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")))
        .config("approval_ttl = \"1h\"\n");
    env.run_once(NOW).code(0);
    let task_id = task_of(&env, 1);

    let at = "2026-05-01T10:10:00Z";
    let out = deny(&env, at, &["1", "--reason", "not today"]);
    out.code(0);
    assert!(out.stdout.contains("#1"), "stdout: {}", out.stdout);
    let row = env.approval(1);
    assert_eq!(row["state"], "denied");
    assert_eq!(row["reason"], "not today");
    assert_eq!(row["decided_by"], BY);
    assert_ts_of(&row["decided_at"], at);
    let d = env.events("approval_denied");
    assert_eq!(d.len(), 1, "{:#?}", env.audit());
    assert_has_keys(&d[0], &["approval_id", "task_id", "by", "always", "reason"]);
    assert_eq!(d[0]["approval_id"], 1);
    assert_eq!(d[0]["task_id"], task_id.as_str());
    assert_eq!(d[0]["by"], BY);
    assert_eq!(d[0]["always"], false);
    assert_eq!(d[0]["reason"], "not today");

    // Within approval_ttl of the denial: not queued again, and check says `denied`.
    for now in ["2026-05-01T10:30:00Z", "2026-05-01T11:09:00Z"] {
        env.run_once(now).code(0);
        assert_eq!(requested_ids(&env), vec![1], "queued again at {now}");
        let check = env.cmd(["check", "--json"]).now(now).output();
        check.code(0);
        assert_eq!(check.json()["tasks"][0]["decision"], "denied", "at {now}");
    }
    // approval_ttl after the denial (not after the queuing): queued again.
    env.run_once("2026-05-01T11:11:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);
    assert_eq!(task_of(&env, 2), task_id);
    assert!(!env.exists("ran"), "a denied task never ran");
    assert!(env.events("task_succeeded").is_empty());
}

#[test]
fn a_changed_task_asks_again_while_the_old_one_is_denied() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")));
    env.run_once(NOW).code(0);
    deny(&env, NOW, &["1"]).code(0);
    assert_eq!(env.approval(1)["reason"], Value::Null);
    assert_eq!(env.events("approval_denied")[0]["reason"], Value::Null);
    env.write(
        "HEARTBEAT.md",
        format!("## Recurring\n{}", shell_task("touch ran2")),
    );
    env.run_once("2026-05-01T10:30:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);
    assert_ne!(task_of(&env, 1), task_of(&env, 2));
}

#[test]
fn deny_all_and_deny_errors() {
    let md = format!(
        "## Recurring\n{}{}",
        shell_task("touch a"),
        shell_task("touch b")
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);

    // Unknown id: exit 2 naming it, nothing decided (not even the good one).
    let out = deny(&env, NOW, &["1", "99"]);
    out.code(2);
    assert_stderr_names(&out, &["#99"]);
    assert_eq!(env.approval(1)["state"], "pending");
    assert!(env.events("approval_denied").is_empty());

    // No ids and no --all, or a bad id: usage errors.
    deny(&env, NOW, &[]).code(2);
    deny(&env, NOW, &["abc"]).code(2);

    let out = deny(&env, NOW, &["--all", "--reason", "spring cleaning"]);
    out.code(0);
    assert!(
        out.stdout.contains("#1") && out.stdout.contains("#2"),
        "stdout: {}",
        out.stdout
    );
    for id in [1, 2] {
        let row = env.approval(id);
        assert_eq!(row["state"], "denied");
        assert_eq!(row["reason"], "spring cleaning");
        assert_eq!(row["decided_by"], BY);
    }
    assert_eq!(env.events("approval_denied").len(), 2);

    // Denying again: exit 2 naming the id and its state.
    let out = deny(&env, NOW, &["2"]);
    out.code(2);
    assert_stderr_names(&out, &["#2", "denied"]);
    // Nothing left: --all is fine and says so.
    let out = deny(&env, NOW, &["--all"]);
    out.code(0);
    assert_eq!(env.events("approval_denied").len(), 2);
    assert!(!env.exists("a") && !env.exists("b"));
}

// ---------------------------------------------------------------------------------------
// Bad input to approve: nothing is decided.

#[test]
fn unknown_and_already_decided_ids_are_refused_and_nothing_is_decided() {
    let md = format!(
        "## Recurring\n{}{}",
        shell_task("echo a >> ran.txt"),
        shell_task("echo b >> ran.txt")
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);

    let out = approve(&env, NOW, &["1", "99"]);
    out.code(2);
    assert_stderr_names(&out, &["#99"]);
    assert_eq!(env.approval(1)["state"], "pending", "nothing decided");
    assert!(env.events("approval_approved").is_empty());
    assert!(!env.exists("ran.txt"));

    // Not an id: a usage error naming what was given.
    for bad in ["abc", "0", "1.5"] {
        let out = approve(&env, NOW, &[bad]);
        out.code(2);
        assert!(out.stderr.contains(bad), "approve {bad}: {}", out.stderr);
    }
    assert!(env.events("approval_approved").is_empty());

    // A denied id among pending ones: exit 2 naming the id and its state; the pending one
    // stays pending.
    deny(&env, NOW, &["1"]).code(0);
    let out = approve(&env, NOW, &["2", "1"]);
    out.code(2);
    assert_stderr_names(&out, &["#1", "denied"]);
    assert_eq!(env.approval(2)["state"], "pending");
    assert!(env.events("approval_approved").is_empty());

    // A finished one: the same.
    approve(&env, NOW, &["2"]).code(0);
    let out = approve(&env, NOW, &["2"]);
    out.code(2);
    assert_stderr_names(&out, &["#2", "succeeded"]);
    let out = deny(&env, NOW, &["2"]);
    out.code(2);
    assert_stderr_names(&out, &["#2", "succeeded"]);
    assert_eq!(env.read("ran.txt"), "b\n");
    assert_eq!(env.events("approval_approved").len(), 1);
}

#[test]
fn flags_that_do_not_go_together_are_usage_errors() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")));
    env.run_once(NOW).code(0);
    approve(&env, NOW, &["--yes"]).code(2);
    approve(&env, NOW, &["1", "--all"]).code(2);
    deny(&env, NOW, &["1", "--all"]).code(2);
    assert_eq!(env.approval(1)["state"], "pending");
}

// ---------------------------------------------------------------------------------------
// Expiry.

#[test]
fn a_pending_approval_expires_at_approve_after_the_ttl_and_cannot_be_approved() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")))
        .config("approval_ttl = \"1h\"\n");
    env.run_once(NOW).code(0);
    let task_id = task_of(&env, 1);

    let out = approve(&env, "2026-05-01T11:00:00Z", &["1"]);
    out.code(2);
    assert_stderr_names(&out, &["#1", "expired"]);
    assert!(!env.exists("ran"));
    let expired = env.events("approval_expired");
    assert_eq!(expired.len(), 1, "{:#?}", env.audit());
    assert_has_keys(&expired[0], &["approval_id", "task_id", "reason"]);
    assert_eq!(expired[0]["approval_id"], 1);
    assert_eq!(expired[0]["task_id"], task_id.as_str());
    assert_ts_of(&expired[0]["ts"], "2026-05-01T11:00:00Z");
    assert_eq!(env.approval(1)["state"], "expired");
    assert!(env.events("approval_approved").is_empty());

    // The task may be queued again; the expiry is audited once.
    env.run_once("2026-05-01T11:05:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);
    assert_eq!(env.events("approval_expired").len(), 1);
    let list = env
        .cmd(["approvals", "--state", "expired", "--json"])
        .output()
        .json();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list:#}");
    assert_eq!(list[0]["id"], 1);
}

#[test]
fn a_pending_approval_just_inside_the_ttl_can_be_approved() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")))
        .config("approval_ttl = \"1h\"\n");
    env.run_once(NOW).code(0);
    approve(&env, "2026-05-01T10:59:59Z", &["1"]).code(0);
    assert!(env.exists("ran"));
    assert!(env.events("approval_expired").is_empty());
}

// ---------------------------------------------------------------------------------------
// Without a terminal.

#[test]
fn without_a_terminal_and_without_ids_approve_lists_and_exits_2_with_a_hint() {
    let md = format!(
        "## Recurring\n{}{}",
        shell_task("echo a >> ran.txt"),
        shell_task("echo b >> ran.txt")
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);

    let out = approve(&env, NOW, &[]);
    out.code(2);
    assert!(
        out.stdout.contains("#1") && out.stdout.contains("#2") && out.stdout.contains("@shell"),
        "lists the pending approvals: {}",
        out.stdout
    );
    assert!(
        out.stderr.contains("approve ID") || out.stderr.contains("--all --yes"),
        "a hint: {}",
        out.stderr
    );
    assert!(out.stderr.starts_with("heartbeat: "), "{}", out.stderr);

    // --all without a terminal needs --yes.
    let out = approve(&env, NOW, &["--all"]);
    out.code(2);
    assert!(out.stderr.contains("--yes"), "{}", out.stderr);
    assert!(env.events("approval_approved").is_empty());
    assert!(!env.exists("ran.txt"));
    assert_eq!(env.approval(1)["state"], "pending");

    // --all --yes approves and runs every pending approval.
    approve(&env, NOW, &["--all", "--yes"]).code(0);
    assert_eq!(env.read("ran.txt"), "a\nb\n");
    assert_eq!(env.approval(1)["state"], "succeeded");
    assert_eq!(env.approval(2)["state"], "succeeded");
    assert_eq!(env.events("approval_approved").len(), 2);
    // One run for both, naming their file once.
    let starts: Vec<_> = env
        .events("run_started")
        .into_iter()
        .filter(|s| s["mode"] == "approve")
        .collect();
    assert_eq!(starts.len(), 1, "{starts:#?}");
    assert_eq!(
        starts[0]["files"].as_array().map(Vec::len),
        Some(1),
        "{starts:#?}"
    );

    // Nothing left.
    let out = approve(&env, NOW, &["--all", "--yes"]);
    out.code(0);
    assert!(out.stdout.contains("no pending"), "{}", out.stdout);
}

// ---------------------------------------------------------------------------------------
// Stale: the file is re-read before an approved task runs.

/// Queue a one-time task, approve it with --later, let `edit` change the file, then run.
fn stale_after(edit: impl FnOnce(&Env, &str)) -> Env {
    let md = format!(
        "## One-time\n{}- [ ] @log {{\"text\": \"other\"}}\n",
        shell_task("touch ran")
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    assert_eq!(requested_ids(&env), vec![1]);
    approve(&env, NOW, &["1", "--later"]).code(0);
    edit(&env, &md);
    let out = env.run_once("2026-05-01T10:30:00Z");
    assert!(matches!(out.code, Some(0 | 1)), "{out:?}");
    out.no_panic();
    assert!(!env.exists("ran"), "a stale approval must not run");
    let row = env.approval(1);
    assert_eq!(row["state"], "stale", "{row:#}");
    let stale = env.events("approval_stale");
    assert_eq!(stale.len(), 1, "{:#?}", env.audit());
    assert_has_keys(&stale[0], &["approval_id", "task_id", "reason"]);
    assert_eq!(stale[0]["approval_id"], 1);
    assert_eq!(stale[0]["task_id"], row["task_id"]);
    assert!(
        stale[0]["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{}",
        stale[0]
    );
    assert!(events_for(&env, "task_succeeded", 1).is_empty());
    assert!(events_for(&env, "task_failed", 1).is_empty());
    env
}

#[test]
fn an_approved_task_that_vanished_is_stale() {
    let env = stale_after(|env, md| {
        let without: String = md
            .lines()
            .filter(|l| !l.contains("@shell"))
            .map(|l| format!("{l}\n"))
            .collect();
        env.write("HEARTBEAT.md", without);
    });
    assert_eq!(requested_ids(&env), vec![1]);
}

#[test]
fn an_approved_task_whose_input_changed_is_stale_and_the_new_task_asks() {
    let env = stale_after(|env, md| {
        env.write(
            "HEARTBEAT.md",
            md.replace("touch ran", "touch ran; touch more"),
        );
    });
    // The changed task is a new task: queued, not run.
    assert_eq!(requested_ids(&env), vec![1, 2]);
    assert_ne!(task_of(&env, 1), task_of(&env, 2));
    assert!(!env.exists("more"));
}

#[test]
fn an_approved_one_time_task_ticked_meanwhile_is_stale() {
    let env = stale_after(|env, md| {
        env.write("HEARTBEAT.md", md.replacen("[ ]", "[x]", 1));
    });
    assert_eq!(requested_ids(&env), vec![1]);
}

#[test]
fn an_approved_task_whose_file_is_gone_is_stale() {
    let env = Env::new(&format!("## One-time\n{}", shell_task("touch ran")));
    env.run_once(NOW).code(0);
    approve(&env, NOW, &["1", "--later"]).code(0);
    std::fs::remove_file(env.md_path()).unwrap();
    // The run itself fails on the missing file (exit 2) ...
    env.run_once("2026-05-01T10:30:00Z").code(2);
    // ... and `approve 1` (already approved: run now) finds it gone: stale, nothing runs.
    let out = approve(&env, "2026-05-01T10:31:00Z", &["1"]);
    assert!(matches!(out.code, Some(0 | 1)), "{out:?}");
    out.no_panic();
    assert!(!env.exists("ran"));
    assert_eq!(env.approval(1)["state"], "stale");
    assert_eq!(env.events("approval_stale").len(), 1);
}

#[test]
fn approve_now_rereads_the_file_and_a_changed_task_is_stale() {
    let md = format!("## Recurring\n{}", shell_task("touch ran"));
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    // Edited after it was queued, before anyone approved.
    env.write("HEARTBEAT.md", md.replace("touch ran", "touch evil"));
    let out = approve(&env, NOW, &["1"]);
    assert!(matches!(out.code, Some(0 | 1)), "{out:?}");
    out.no_panic();
    assert!(!env.exists("ran") && !env.exists("evil"), "nothing runs");
    assert_eq!(env.approval(1)["state"], "stale");
    assert!(
        out.stdout.to_lowercase().contains("stale"),
        "says so: {}",
        out.stdout
    );
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_eq!(env.events("approval_stale").len(), 1);
}

// ---------------------------------------------------------------------------------------
// approvals: the list and its filters.

#[test]
fn approvals_lists_by_state_with_the_documented_shape() {
    let md = format!(
        "## Recurring\n{}{}{}",
        shell_task("echo a >> ran.txt"),
        shell_task("echo b >> ran.txt"),
        shell_task("echo c >> ran.txt")
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    approve(&env, NOW, &["1"]).code(0);
    deny(&env, NOW, &["2", "--reason", "no"]).code(0);

    let all = env
        .cmd(["approvals", "--state", "all", "--json"])
        .output()
        .json();
    let all = all.as_array().expect("an array").clone();
    assert_eq!(all.len(), 3);
    for (i, a) in all.iter().enumerate() {
        assert_has_keys(a, &APPROVAL_KEYS);
        assert_eq!(a["id"], i as i64 + 1, "ordered by id");
        assert!(is_task_id(&a["task_id"]));
        assert_eq!(a["line"], i as i64 + 2);
        assert_eq!(a["section"], "recurring");
    }
    let states: Vec<&str> = all.iter().map(|a| a["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["succeeded", "denied", "pending"]);
    assert_eq!(all[1]["reason"], "no");
    assert_eq!(all[2]["decided_by"], Value::Null);

    // Default: pending only.
    let pending = env.cmd(["approvals", "--json"]).output().json();
    assert_eq!(pending.as_array().map(Vec::len), Some(1));
    assert_eq!(pending[0]["id"], 3);
    for (state, id) in [("succeeded", 1), ("denied", 2), ("pending", 3)] {
        let list = env
            .cmd(["approvals", "--state", state, "--json"])
            .output()
            .json();
        assert_eq!(list.as_array().map(Vec::len), Some(1), "{state}: {list:#}");
        assert_eq!(list[0]["id"], id, "{state}");
    }
    let none = env
        .cmd(["approvals", "--state", "stale", "--json"])
        .output()
        .json();
    assert_eq!(none, json!([]));
    env.cmd(["approvals", "--state", "bogus"]).output().code(2);

    let human = env.cmd(["approvals", "--state", "all"]).output();
    human.code(0);
    for needle in ["#1", "#2", "#3", "succeeded", "denied", "pending", "@shell"] {
        assert!(human.stdout.contains(needle), "{needle}: {}", human.stdout);
    }
}

// ---------------------------------------------------------------------------------------
// On a terminal.

#[test]
fn approve_on_a_terminal_walks_pending_approvals_one_by_one() {
    let md = format!(
        "## Recurring\n{}{}{}{}",
        shell_task("echo one >> ran.txt"),
        shell_task("echo two >> ran.txt"),
        shell_task("echo three >> ran.txt"),
        shell_task("echo four >> ran.txt"),
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    assert_eq!(requested_ids(&env), vec![1, 2, 3, 4]);

    let prompt = "[q] quit: ";
    let mut walk = env
        .cmd(["approve"])
        .now("2026-05-01T12:00:00Z")
        .user(USER)
        .spawn_on_pty();
    let first = walk.expect(prompt, T);
    // file:line, tool, pretty-printed input, task text, age.
    for needle in [
        "[1/4]",
        "#1",
        "@shell",
        "HEARTBEAT.md:2",
        "\"cmd\": \"echo one >> ran.txt\"",
        "@shell {\"cmd\": \"echo one >> ran.txt\"}",
        "2h",
    ] {
        assert!(first.contains(needle), "{needle:?} not shown in:\n{first}");
    }
    // The pretty input is on lines of its own.
    assert!(
        first
            .lines()
            .any(|l| l.trim() == "\"cmd\": \"echo one >> ran.txt\""),
        "pretty-printed input:\n{first}"
    );
    // Anything else is asked again.
    walk.send("x");
    walk.expect("please answer", T);
    walk.expect(prompt, T);
    assert!(!env.exists("ran.txt"));
    // y: approve and run now.
    walk.send("y");
    let second = walk.expect(prompt, T);
    assert!(
        second.contains("[2/4]") && second.contains("HEARTBEAT.md:3"),
        "{second}"
    );
    assert_eq!(
        env.read("ran.txt"),
        "one\n",
        "y ran it before asking about the next"
    );
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    // n: deny, with an optional reason.
    walk.send("n");
    walk.expect("reason", T);
    walk.send("too risky");
    let third = walk.expect(prompt, T);
    assert!(third.contains("[3/4]"), "{third}");
    // q: stop here; #3 and #4 are left pending.
    walk.send("q");
    let out = walk.finish(T);
    out.code(0);
    assert!(!out.stdout.contains("[4/4]"), "q quits: {}", out.stdout);

    assert_eq!(env.read("ran.txt"), "one\n");
    let denied = env.approval(2);
    assert_eq!(denied["state"], "denied");
    assert_eq!(denied["reason"], "too risky");
    assert_eq!(denied["decided_by"], BY);
    let d = env.events("approval_denied");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["reason"], "too risky");
    assert_eq!(d[0]["by"], BY);
    assert_eq!(env.approval(1)["decided_by"], BY);
    assert_eq!(env.approval(3)["state"], "pending");
    assert_eq!(env.approval(4)["state"], "pending");
    assert_eq!(events_for(&env, "task_succeeded", 1).len(), 1);

    // Again: only what is pending is walked. s skips, a approves always.
    let mut walk = env
        .cmd(["approve"])
        .now("2026-05-01T12:05:00Z")
        .user(USER)
        .spawn_on_pty();
    let first = walk.expect(prompt, T);
    assert!(first.contains("[1/2]") && first.contains("#3"), "{first}");
    walk.send("s");
    let second = walk.expect(prompt, T);
    assert!(
        second.contains("[2/2]") && second.contains("#4"),
        "{second}"
    );
    walk.send("a");
    let out = walk.finish(T);
    out.code(0);
    assert_eq!(env.read("ran.txt"), "one\nfour\n");
    assert_eq!(env.approval(3)["state"], "pending", "skipped stays pending");
    assert_eq!(env.approval(4)["state"], "succeeded");
    let a = events_for(&env, "approval_approved", 4);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0]["always"], true);
    let grants = env.cmd(["grants", "--json"]).output().json();
    assert_eq!(grants.as_array().map(Vec::len), Some(1), "{grants:#}");
    assert_eq!(grants[0]["task_id"], task_of(&env, 4).as_str());
    assert_eq!(grants[0]["approval_id"], 4);

    // Nothing pending: says so, exit 0.
    deny(&env, NOW, &["3"]).code(0);
    let walk = env.cmd(["approve"]).user(USER).spawn_on_pty();
    let out = walk.finish(T);
    out.code(0);
    assert!(out.stdout.contains("no pending"), "{}", out.stdout);
}

#[test]
fn later_is_not_ignored_on_a_terminal() {
    // `approve --later` on a terminal: a yes must not run the task now (or the flag is
    // refused as a usage error before anything is decided).
    let env = one_pending_echo();
    let mut walk = env.cmd(["approve", "--later"]).user(USER).spawn_on_pty();
    if walk.try_expect("[q] quit: ", T).is_some() {
        walk.send("y");
    }
    let out = walk.finish(T);
    out.no_panic();
    if out.code == Some(2) {
        assert_eq!(
            env.approval(1)["state"],
            "pending",
            "refused: nothing decided"
        );
    } else {
        assert!(
            !env.exists("ran.txt"),
            "`approve --later` ran the task now\n--- stdout\n{}",
            out.stdout
        );
        assert_eq!(env.approval(1)["state"], "approved");
    }
}

#[test]
fn a_failed_task_approved_on_a_terminal_exits_1() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("exit 4")));
    env.run_once(NOW).code(0);
    let mut walk = env.cmd(["approve"]).user(USER).spawn_on_pty();
    walk.expect("[q] quit: ", T);
    walk.send("y");
    walk.finish(T).code(1);
    assert_eq!(env.approval(1)["state"], "failed");
}

#[test]
fn approve_all_on_a_terminal_asks_once_and_never_approves_what_it_did_not_show() {
    let env = Env::new(&format!(
        "## Recurring\n{}",
        shell_task("echo a >> ran.txt")
    ));
    env.run_once(NOW).code(0);

    let mut all = env.cmd(["approve", "--all"]).user(USER).spawn_on_pty();
    let shown = all.expect("[y/N] ", T);
    assert!(shown.contains("#1") && shown.contains("@shell"), "{shown}");
    assert!(!shown.contains("#2"), "{shown}");

    // While it asks, a run queues another approval.
    env.write(
        "HEARTBEAT.md",
        format!(
            "## Recurring\n{}{}",
            shell_task("echo a >> ran.txt"),
            shell_task("echo b >> ran.txt")
        ),
    );
    env.run_once("2026-05-01T10:01:00Z").code(0);
    assert_eq!(requested_ids(&env), vec![1, 2]);

    all.send("y");
    let out = all.finish(T);
    out.code(0);
    assert_eq!(env.read("ran.txt"), "a\n", "only the shown approval ran");
    assert_eq!(env.approval(1)["state"], "succeeded");
    assert_eq!(
        env.approval(2)["state"],
        "pending",
        "not shown, not approved"
    );
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_eq!(env.events("approval_approved")[0]["approval_id"], 1);

    // Saying no (or anything but yes) approves nothing.
    for answer in ["n", ""] {
        let mut all = env.cmd(["approve", "--all"]).user(USER).spawn_on_pty();
        let shown = all.expect("[y/N] ", T);
        assert!(shown.contains("#2"), "{shown}");
        all.send(answer);
        all.finish(T).code(0);
        assert_eq!(env.approval(2)["state"], "pending", "answer {answer:?}");
    }
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_eq!(env.read("ran.txt"), "a\n");

    // --yes on a terminal does not ask.
    let all = env
        .cmd(["approve", "--all", "--yes"])
        .user(USER)
        .spawn_on_pty();
    all.finish(T).code(0);
    assert_eq!(env.read("ran.txt"), "a\nb\n");
    assert_eq!(env.approval(2)["state"], "succeeded");
}

// ---------------------------------------------------------------------------------------
// The store: WAL, schema version, one open approval per task, bad files.

#[test]
fn the_store_is_in_wal_mode_and_allows_one_open_approval_per_task() {
    let env = Env::new(&format!("## Recurring\n{}", shell_task("touch ran")));
    env.run_once(NOW).code(0);
    let mode: String = env
        .db()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode.to_lowercase(), "wal");
    let version: i64 = env
        .db()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert!(version >= 1, "migrations set user_version: {version}");

    let task_id = task_of(&env, 1);
    let insert = |state: &str| {
        env.db_rw().execute(
            "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text, created_at)
             VALUES (?1, ?2, 'f', 1, 'recurring', 'shell', '{}', 't', '2026-05-01T10:00:00.000Z')",
            [task_id.as_str(), state],
        )
    };
    // The schema, not only the code, refuses a second open approval for the task ...
    for state in ["pending", "approved", "running"] {
        assert!(
            insert(state).is_err(),
            "a second open ({state}) row was accepted"
        );
    }
    // ... also while the first is approved and waiting to run.
    approve(&env, NOW, &["1", "--later"]).code(0);
    for state in ["pending", "approved", "running"] {
        assert!(
            insert(state).is_err(),
            "a second open ({state}) row was accepted"
        );
    }
    // Closed rows are history: any number.
    insert("denied").expect("a closed row");
    insert("expired").expect("a closed row");
    insert("stale").expect("a closed row");
    assert_eq!(env.approval_rows().len(), 4);
}

/// The HEARTBEAT.md for the bad-store tests: a task that would run without asking.
const WOULD_RUN: &str = "## Recurring\n- [ ] @shell {\"cmd\": \"touch ran\"}\n";

#[track_caller]
fn assert_refused(env: &Env, args: &[&str], needles: &[&str]) {
    let out = env.cmd(args).user(USER).output();
    out.code(2);
    let db = env.db_path().display().to_string();
    assert_stderr_names(&out, &[&db]);
    for n in needles {
        assert!(out.stderr.contains(n), "{n:?} in: {}", out.stderr);
    }
    assert!(!env.exists("ran"), "{args:?}: nothing may run");
}

#[test]
fn a_state_file_that_is_not_a_database_is_a_clean_error_naming_it_and_nothing_runs() {
    let env = Env::new(WOULD_RUN);
    let junk = "this is not sqlite, just text\n".repeat(200);
    env.write("state/heartbeat.db", &junk);
    for args in [
        &["run", "--once", "--autonomy", "full"][..],
        &["approve", "1"],
        &["approve", "--all", "--yes"],
        &["deny", "--all"],
        &["approvals"],
        &["grants"],
        &["revoke", "0123456789ab"],
    ] {
        assert_refused(&env, args, &[]);
    }
    assert!(env.events("task_succeeded").is_empty());
    assert!(env.events("run_started").is_empty(), "{:#?}", env.audit());
    assert_eq!(
        env.read("state/heartbeat.db"),
        junk,
        "the file is left alone"
    );
}

#[test]
fn a_database_from_a_newer_version_is_refused_naming_it_and_nothing_runs() {
    let env = Env::new(WOULD_RUN);
    env.run_once(NOW).code(0);
    assert_eq!(requested_ids(&env), vec![1]);
    env.db_rw()
        .pragma_update(None, "user_version", 99)
        .expect("set user_version");
    let before = env.audit().len();
    for args in [
        &["run", "--once", "--autonomy", "full"][..],
        &["approve", "1"],
        &["approve", "--all", "--yes"],
        &["deny", "1"],
        &["approvals"],
        &["grants"],
        &["revoke", "0123456789ab"],
        &["status"],
    ] {
        assert_refused(&env, args, &["99"]);
    }
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert_eq!(env.audit().len(), before, "{:#?}", env.audit());
    let version: i64 = env
        .db()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 99, "never migrated down");
}

#[test]
fn a_database_from_an_earlier_version_is_brought_up_to_date_by_a_read_only_command() {
    let env = Env::new(WOULD_RUN);
    // What heartbeat with schema 7 left: its batch table, and one pending approval.
    std::fs::create_dir_all(env.state()).unwrap();
    let old = rusqlite::Connection::open(env.db_path()).unwrap();
    heartbeat::testing::schema_at_version(&old, 7).expect("make an older database");
    old.execute(
        "INSERT INTO approvals (task_id, state, file, line, section, tool, input, text, \
         created_at) VALUES ('aaaaaaaaaaaa', 'pending', ?1, 2, 'recurring', 'shell', \
         '{\"cmd\":\"touch ran\"}', '@shell {\"cmd\": \"touch ran\"}', \
         '2026-05-01T09:00:00.000Z')",
        [env.md_path().display().to_string()],
    )
    .unwrap();
    drop(old);
    let tables = |env: &Env, name: &str| -> i64 {
        env.db()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(tables(&env, "task_batches"), 1);
    // Right after an upgrade, before any run: the pending approval shows.
    let out = env.cmd(["status", "--json"]).output();
    out.code(0);
    assert_eq!(out.json()["pending_approvals"], 1, "{}", out.stdout);
    let out = env.cmd(["approvals", "--json"]).output();
    out.code(0);
    assert_eq!(
        out.json().as_array().map(Vec::len),
        Some(1),
        "{}",
        out.stdout
    );
    let version: i64 = env
        .db()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert!(version > 7, "not migrated: {version}");
    assert_eq!(tables(&env, "task_batches"), 0);
    // And a run on it works as on a new one.
    env.run_once(NOW).code(0);
}

/// Decisions made one by one at a terminal carry the times they were made (the clock is
/// `--now` plus the time elapsed since), not the command's start (issue 14 §5).
#[test]
fn decisions_on_a_terminal_carry_their_own_times() {
    let md = format!(
        "## Recurring\n{}{}",
        shell_task("echo one >> ran.txt"),
        shell_task("echo two >> ran.txt"),
    );
    let env = Env::new(&md);
    env.run_once(NOW).code(0);
    let prompt = "[q] quit: ";
    let mut walk = env
        .cmd(["approve"])
        .now("2026-05-01T12:00:00Z")
        .user(USER)
        .spawn_on_pty();
    walk.expect(prompt, T);
    walk.send("n");
    walk.expect("reason", T);
    walk.send("");
    walk.expect(prompt, T);
    // A person takes their time over the second one.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    walk.send("n");
    walk.expect("reason", T);
    walk.send("");
    walk.finish(T).code(0);
    let at = |id: i64| {
        let s = env.approval(id)["decided_at"].as_str().unwrap().to_string();
        chrono::DateTime::parse_from_rfc3339(&s).unwrap()
    };
    let apart = at(2) - at(1);
    assert!(
        apart >= chrono::Duration::milliseconds(1400),
        "decided {apart} apart"
    );
    let denied = env.events("approval_denied");
    assert_eq!(denied.len(), 2);
    assert_ne!(denied[0]["ts"], denied[1]["ts"]);
    assert!(denied[0]["ts"].as_str().unwrap() >= "2026-05-01T12:00:00.000Z");
}

#[test]
fn an_id_given_twice_is_decided_once_and_named_once() {
    let env = Env::new(&format!(
        "## Recurring\n{}",
        shell_task("echo ran >> runs.log")
    ));
    env.run_once(NOW).code(0);
    approve(&env, "2026-05-01T10:05:00Z", &["1", "1"]).code(0);
    assert_eq!(env.read("runs.log"), "ran\n");
    assert_eq!(
        env.events("approval_approved").len(),
        1,
        "{:#?}",
        env.audit()
    );
    let again = env.cmd(["deny", "1", "1"]).output();
    again.code(2);
    assert_eq!(
        count_matches(&again.stderr, "approval #1 is already succeeded"),
        1,
        "{again:?}"
    );
}
