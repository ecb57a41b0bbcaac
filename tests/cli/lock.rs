//! The run lock (docs/reference.md#run-lock): a run that finds it held writes `run_skipped` (reason
//! `locked`), exits 0 at once, and warns naming the holder when it has held the lock past
//! `stuck_after`.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;

/// Holds the lock until the file `go` appears.
const SLOW: &str = "## Recurring\n- [ ] @shell {\"cmd\": \"touch started; until test -e go; do sleep 0.05; done\"}\n";
const FIRST: &str = "2026-05-01T10:00:00Z";

/// Creates `go` after [`WAIT`] if the test has not: a run that waited for the lock then
/// ends, and the test fails instead of hanging.
fn open_the_gate_later(go: PathBuf) {
    std::thread::spawn(move || {
        std::thread::sleep(WAIT);
        let _ = std::fs::write(go, "");
    });
}

/// The first run still holds the lock: the run that just returned did not wait for it.
#[track_caller]
fn still_held(first: &mut std::process::Child) {
    assert!(
        first.try_wait().unwrap().is_none(),
        "waited for the lock: the first run had already ended"
    );
}

#[test]
fn a_second_run_skips_while_the_lock_is_held_and_reports_a_stuck_holder() {
    let env = Env::new(SLOW).config("stuck_after = \"1m\"\n");
    let mut first = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now(FIRST)
        .spawn();
    let first_pid = first.id();
    wait_for(&env.path("started"), Duration::from_secs(10));
    open_the_gate_later(env.path("go"));

    // Within stuck_after: skipped, quietly.
    let second = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now("2026-05-01T10:00:30Z")
        .env("TZ", "UTC")
        .output();
    second.code(0);
    still_held(&mut first);
    assert!(
        !second.stderr.contains(&first_pid.to_string()),
        "no warning before stuck_after: {}",
        second.stderr
    );

    // status sees the holder.
    let status = env.cmd(["status", "--json"]).output();
    status.code(0);
    let lock = &status.json()["lock"];
    assert_eq!(lock["held"], true, "{lock}");
    assert_eq!(lock["pid"], first_pid, "{lock}");
    assert_eq!(lock["since"], ts(FIRST), "{lock}");

    // Past stuck_after: skipped, with a warning naming the holder's pid and start time.
    let third = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now("2026-05-01T10:02:00Z")
        .env("TZ", "UTC")
        .output();
    third.code(0);
    still_held(&mut first);
    assert!(
        third.stderr.contains(&first_pid.to_string()),
        "the holder's pid {first_pid} in: {}",
        third.stderr
    );
    assert!(
        third.stderr.contains("2026-05-01") && third.stderr.contains("10:00"),
        "the holder's start time in: {}",
        third.stderr
    );
    assert!(third.stderr.starts_with("heartbeat: "), "{}", third.stderr);

    std::fs::write(env.path("go"), "").unwrap();
    let status = first.wait().expect("wait for the first run");
    assert_eq!(status.code(), Some(0));

    let skipped = env.events("run_skipped");
    assert_eq!(skipped.len(), 2, "{:#?}", env.audit());
    for s in &skipped {
        assert_eq!(s["reason"], "locked");
    }
    assert_ts_of(&skipped[0]["ts"], "2026-05-01T10:00:30Z");
    assert_ts_of(&skipped[1]["ts"], "2026-05-01T10:02:00Z");
    // Only the first run ran the task.
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    let first_run = &env.events("run_started")[0]["run_id"];
    assert_eq!(&ok[0]["run_id"], first_run);
    assert_eq!(env.events("run_started").len(), 1);
    assert_eq!(env.events("run_finished").len(), 1);

    // The lock is free again.
    let lock = env.cmd(["status", "--json"]).output().json()["lock"].clone();
    assert_eq!(lock["held"], false, "{lock}");
    env.run_with("2026-05-01T10:05:00Z", &["--autonomy", "full"])
        .code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
}

#[test]
fn locked_run_json_says_so() {
    let env = Env::new(SLOW);
    let mut first = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now(FIRST)
        .spawn();
    wait_for(&env.path("started"), Duration::from_secs(10));
    open_the_gate_later(env.path("go"));
    let out = env.run_with(FIRST, &["--json"]);
    out.code(0);
    still_held(&mut first);
    assert_eq!(out.json()["skipped"], "locked");
    std::fs::write(env.path("go"), "").unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(0));
}

/// A cleaner that deletes `heartbeat.lock` while a run holds the lock does not let a second
/// run in: the lock is the state directory's (docs/reference.md#run-lock), so a one-time task runs
/// once.
#[test]
fn deleting_the_lock_file_lets_no_second_run_in() {
    let env = Env::new(
        "## One-time\n- [ ] @shell {\"cmd\": \"echo ran >> runs.log; touch started; until test -e go; do sleep 0.05; done\"}\n",
    );
    let mut first = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now(FIRST)
        .spawn();
    wait_for(&env.path("started"), Duration::from_secs(10));
    open_the_gate_later(env.path("go"));
    std::fs::remove_file(env.state().join("heartbeat.lock")).expect("the lock file exists");
    let second = env
        .cmd(["run", "--once", "--autonomy", "full"])
        .now("2026-05-01T10:00:30Z")
        .output();
    second.code(0);
    still_held(&mut first);
    std::fs::write(env.path("go"), "").unwrap();
    wait_output(first, "first run", WAIT).code(0);
    assert_eq!(env.read("runs.log"), "ran\n");
    let skipped = env.events("run_skipped");
    assert_eq!(skipped.len(), 1, "{}", env.audit_text());
    assert_eq!(skipped[0]["reason"], "locked");
    assert!(env.read("HEARTBEAT.md").contains("- [x] @shell"));
}

/// A `heartbeat.lock` that is a FIFO would block whoever opens it: a run refuses it, naming
/// it, whether or not another process holds the lock (and `status` too), and never hangs.
#[test]
fn a_fifo_as_the_lock_file_is_refused_not_waited_on() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n");
    std::fs::create_dir_all(env.state()).unwrap();
    let fifo = env.state().join("heartbeat.lock");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let refused = |out: &Output, what: &str| {
        out.code(2);
        assert!(
            out.stderr.contains("heartbeat.lock") && out.stderr.contains("not a regular file"),
            "{what}: {}",
            out.stderr
        );
    };
    for held in [true, false] {
        let holder = held.then(|| env.hold_lock());
        let child = env.cmd(["run", "--once"]).now(NOW).spawn();
        let out = wait_output(child, "run --once with a FIFO lock file", WAIT);
        refused(&out, &format!("run, lock held: {held}"));
        let child = env.cmd(["status"]).spawn();
        let out = wait_output(child, "status with a FIFO lock file", WAIT);
        if held {
            refused(&out, "status, lock held");
        } else {
            out.code(0);
        }
        drop(holder);
    }
    assert!(
        env.events("task_succeeded").is_empty(),
        "{}",
        env.audit_text()
    );

    // The daemon's file likewise: `status` and `daemon` refuse it, neither waits on it.
    std::fs::remove_file(&fifo).unwrap();
    let fifo = env.state().join("heartbeat.daemon");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    for args in [vec!["status"], vec!["daemon", "--every", "1h"]] {
        let child = env.cmd(args.clone()).now(NOW).spawn();
        let out = wait_output(child, "a command with a FIFO daemon file", WAIT);
        out.code(2);
        assert!(
            out.stderr.contains("heartbeat.daemon") && out.stderr.contains("not a regular file"),
            "{args:?}: {}",
            out.stderr
        );
    }
}
