//! Approvals under concurrency and crashes (docs/reference.md#approvals,
//! docs/reference.md#run-lock): four `approve` processes at once run the tool once; an `approve`
//! killed mid-run leaves its approval `running`, and the next run fails it as `interrupted` without
//! running it again; `approve` waits for the run lock; first opens of the database migrate once.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::approve::{BY, USER};
use crate::common::*;

const T: Duration = Duration::from_secs(10);

fn shell_one_time(cmd: &str) -> String {
    format!("## One-time\n- [ ] @shell {{\"cmd\": {}}}\n", json_str(cmd))
}

#[test]
fn four_concurrent_approves_run_the_tool_exactly_once() {
    let env = Env::new(&shell_one_time("echo x >> ran.txt; sleep 0.3"));
    env.run_once(NOW).code(0);
    assert_eq!(env.approval_rows().len(), 1);

    let children: Vec<_> = (0..4)
        .map(|_| env.cmd(["approve", "1"]).user(USER).spawn())
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .enumerate()
        .map(|(i, c)| wait_output(c, &format!("approve 1 (#{i})"), T))
        .collect();
    for out in &outs {
        out.no_panic();
        assert!(
            matches!(out.code, Some(0 | 2)),
            "every approve exits 0 or 2: {out:#?}"
        );
    }
    assert!(
        outs.iter().any(|o| o.code == Some(0)),
        "one of them ran it: {outs:#?}"
    );

    assert_eq!(env.read("ran.txt"), "x\n", "the tool ran exactly once");
    assert_eq!(env.approval(1)["state"], "succeeded");
    assert_eq!(env.approval(1)["decided_by"], BY);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["approval_id"], 1);
    assert!(env.events("task_failed").is_empty(), "{:#?}", env.audit());
    assert_eq!(
        env.events("approval_approved").len(),
        1,
        "decided once: {:#?}",
        env.audit()
    );
    // Ticked once.
    assert!(env.read("HEARTBEAT.md").contains("- [x] @shell"));
    assert_eq!(env.events("task_marked_done").len(), 1);
}

/// Send SIGKILL to a process group (a tool's; never ours or init's).
fn kill_group(pgid: i32) {
    assert!(pgid > 1 && pgid != std::process::id() as i32, "pgid {pgid}");
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), Signal::SIGKILL);
}

#[test]
fn an_approve_killed_mid_run_is_failed_as_interrupted_at_the_next_run_and_never_rerun() {
    let env = Env::new(&shell_one_time(
        "echo $$ > marker.tmp; mv marker.tmp marker; sleep 30",
    ));
    env.run_once(NOW).code(0);
    let task_id = env.approval(1)["task_id"].as_str().unwrap().to_string();

    let mut approving = env.cmd(["approve", "1"]).user(USER).spawn();
    let marker = env.path("marker");
    wait_for(&marker, T);
    let pgid: i32 = env.read("marker").trim().parse().expect("the tool's pid");
    assert_eq!(env.approval_state(1).as_deref(), Some("running"));

    // kill -9 the approving process, then the tool's process group so nothing lingers.
    approving.kill().expect("kill -9 approve");
    kill_group(pgid);
    let status = approving.wait().expect("reap approve");
    assert_eq!(status.code(), None, "killed by a signal");
    std::fs::remove_file(&marker).unwrap();

    // Left running: the process that ran it died.
    assert_eq!(env.approval_state(1).as_deref(), Some("running"));
    let running = env
        .cmd(["approvals", "--state", "running", "--json"])
        .output()
        .json();
    assert_eq!(running[0]["id"], 1, "{running:#}");

    // The next run marks it failed (interrupted) and does not run it again.
    let out = env.run_once("2026-05-01T10:05:00Z");
    out.code(1);
    assert!(!marker.exists(), "an interrupted approval was run again");
    let row = env.approval(1);
    assert_eq!(row["state"], "failed", "{row:#}");
    assert_eq!(row["reason"], "interrupted");
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    let f = &failed[0];
    assert_eq!(f["approval_id"], 1);
    assert_eq!(f["task_id"], task_id.as_str());
    assert_eq!(f["error"], "interrupted");
    assert_eq!(f["tool"], "shell");
    assert!(env.events("task_succeeded").is_empty());
    assert!(
        out.stdout.contains("interrupted"),
        "the summary says so: {}",
        out.stdout
    );

    // Once only: later runs neither fail it again nor run it.
    env.run_once("2026-05-01T10:10:00Z");
    assert_eq!(env.events("task_failed").len(), 1, "{:#?}", env.audit());
    assert!(!marker.exists());
    assert_eq!(env.approval(1)["state"], "failed");
    // Not ticked: it never succeeded.
    assert!(env.read("HEARTBEAT.md").contains("- [ ] @shell"));
    // Whatever else happens to the task, it needs a person again: nothing is open as
    // approved or running.
    let open: Vec<Value> = env
        .cmd(["approvals", "--state", "all", "--json"])
        .output()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "approved" || a["state"] == "running")
        .cloned()
        .collect();
    assert!(open.is_empty(), "{open:#?}");
}

#[test]
fn approve_waits_for_a_run_lock_released_after_a_second_then_runs() {
    let env = Env::new(&shell_one_time("touch ran"));
    env.run_once(NOW).code(0);

    let lock = env.hold_lock();
    let start = Instant::now();
    let child = env.cmd(["approve", "1"]).user(USER).spawn();
    // The decision is stored at once; running waits for the lock.
    wait_until("approval #1 approved", T, || {
        env.approval_state(1).as_deref() == Some("approved")
    });
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(start.elapsed()));
    assert!(
        !env.exists("ran"),
        "ran while another process held the lock"
    );
    assert_eq!(env.approval_state(1).as_deref(), Some("approved"));
    drop(lock);

    let out = wait_output(child, "approve 1", T);
    out.code(0);
    assert!(env.exists("ran"));
    assert_eq!(env.approval(1)["state"], "succeeded");
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["approval_id"], 1);
}

#[test]
fn first_opens_of_a_fresh_state_dir_at_once_all_succeed() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n");
    let children: Vec<_> = (0..4)
        .map(|_| env.cmd(["deny", "--all"]).user(USER).spawn())
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        wait_output(c, &format!("deny --all (#{i})"), T).code(0);
    }
    let version: i64 = env
        .db()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert!(version >= 1);
    env.run_once(NOW).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
}

#[test]
fn a_tool_does_not_outlive_a_killed_heartbeat() {
    // `exec` makes the sleep the group leader, the process heartbeat started.
    let env = Env::new(&shell_one_time(
        "echo $$ > marker.tmp; mv marker.tmp marker; exec sleep 30",
    ));
    env.run_once(NOW).code(0);
    let mut approving = env.cmd(["approve", "1"]).user(USER).spawn();
    wait_for(&env.path("marker"), T);
    let leader: i32 = env.read("marker").trim().parse().expect("the tool's pid");
    approving.kill().expect("kill -9 approve");
    approving.wait().expect("reap approve");
    // The kernel tells the tool its parent died (SIGTERM); it is gone soon after.
    let start = Instant::now();
    // Alive: it exists and is not a zombie waiting for init to reap it.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{leader}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .next()?
                    .to_string();
                Some(state != "Z")
            })
            .unwrap_or(false)
    };
    while alive() && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = !alive();
    if !gone {
        kill_group(leader);
    }
    assert!(
        gone,
        "the tool {leader} kept running after heartbeat was killed"
    );
}
