//! `heartbeat run --task` (docs/reference.md#run-one-task-now): the named tasks, and only
//! those, run at once whatever their schedule or cooldown say, under every other rule,
//! as a run a person asked for (`trigger: manual`). Through the built binary with `--now`.

use serde_json::Value;

use crate::common::Env;

const MD: &str = "## Recurring\n\
### Daily at 02:00\n\
- [ ] @log {\"text\": \"nightly\"}\n\
### Every 6h\n\
- [ ] @log {\"text\": \"often\"}\n\
- [ ] @shell {\"cmd\": \"touch asked\"}\n\
- [ ] @log {\"text\":\n  \"multi\"}\n\
## One-time\n\
- [ ] @log {\"text\": \"once\"}\n";

/// The task ids of `check --json`, by the text of each task.
fn ids(env: &Env) -> Vec<(String, String)> {
    let out = env.cmd(["check", "--json"]).output();
    out.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["text"].as_str().unwrap().to_string(),
                t["task_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn id_of(env: &Env, needle: &str) -> String {
    ids(env)
        .into_iter()
        .find(|(text, _)| text.contains(needle))
        .unwrap_or_else(|| panic!("no task with {needle:?}"))
        .1
}

/// How many times each task succeeded, by id.
fn successes(env: &Env, id: &str) -> usize {
    env.events("task_succeeded")
        .iter()
        .filter(|l| l["task_id"] == id)
        .count()
}

#[test]
fn a_task_named_by_id_prefix_or_place_runs_alone_whatever_its_schedule() {
    let env = Env::new(MD);
    let nightly = id_of(&env, "nightly");
    let often = id_of(&env, "often");
    let multi = id_of(&env, "multi");
    let once = id_of(&env, "once");
    // 10:00: the daily 02:00 task is due (its slot is open) but only `often` is named.
    let out = env
        .cmd(["run", "--task", &often, "--json"])
        .now("2026-05-01T10:00:00Z")
        .output();
    out.code(0);
    let doc = out.json();
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{doc:#}");
    assert_eq!(tasks[0]["task_id"], often.as_str());
    assert_eq!(tasks[0]["trigger"], "manual");
    assert_eq!(successes(&env, &often), 1);
    for other in [&nightly, &multi, &once] {
        assert_eq!(successes(&env, other), 0, "{}", env.audit_text());
    }
    let started = env.events_n("run_started", 1);
    assert_eq!(started[0]["trigger"], "manual");
    assert_eq!(started[0]["mode"], "once");
    assert_eq!(env.events_n("task_succeeded", 1)[0]["trigger"], "manual");
    // Not due (it ran a minute ago): named again by a prefix, it runs again.
    env.cmd(["run", "--task", &often[..6]])
        .now("2026-05-01T10:01:00Z")
        .output()
        .code(0);
    assert_eq!(successes(&env, &often), 2);
    // It was a run like any other: the previous run for `since_last_run_s`, and an attempt
    // for `Every 6h`, so the scheduled run an hour later leaves `often` alone.
    assert_eq!(env.events("run_started")[1]["since_last_run_s"], 60);
    env.run_once("2026-05-01T11:01:00Z").code(0);
    assert_eq!(successes(&env, &often), 2);
    assert_eq!(env.events("run_started")[2]["trigger"], "schedule");
    assert_eq!(successes(&env, &multi), 1, "{}", env.audit_text());
    // By place: any line of the item, the input's second line too; FILE relative to the
    // current directory. Two --task at once.
    env.cmd([
        "run",
        "--task",
        "HEARTBEAT.md:8",
        "--task",
        &format!("./HEARTBEAT.md:{}", 3),
    ])
    .now("2026-05-01T11:02:00Z")
    .output()
    .code(0);
    assert_eq!(successes(&env, &multi), 2, "{}", env.audit_text());
    assert_eq!(successes(&env, &nightly), 2, "{}", env.audit_text());
    assert_eq!(successes(&env, &often), 2);
}

#[test]
fn without_once_or_task_run_is_still_an_error() {
    let env = Env::new(MD);
    let out = env.cmd(["run"]).output();
    out.code(2);
    assert!(
        out.stderr.contains("--once") && out.stderr.contains("daemon"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unknown_or_ambiguous_task_exits_2_naming_it() {
    // Enough tasks that two ids share their first 4 hex digits.
    let mut md = String::from("## Recurring\n");
    for i in 0..2000 {
        md.push_str(&format!("- [ ] @log {{\"text\": \"{i}\"}}\n"));
    }
    let env = Env::new(&md);
    let all: Vec<String> = ids(&env).into_iter().map(|(_, id)| id).collect();
    let mut prefixes: Vec<&str> = all.iter().map(|id| &id[..4]).collect();
    prefixes.sort();
    let shared = prefixes
        .windows(2)
        .find(|w| w[0] == w[1])
        .expect("two ids with the same first 4 digits")[0]
        .to_string();
    let out = env.cmd(["run", "--task", &shared]).output();
    out.code(2);
    assert!(out.stderr.contains("ambiguous"), "{}", out.stderr);
    for id in all.iter().filter(|id| id.starts_with(&shared)) {
        assert!(out.stderr.contains(id.as_str()), "{id} in {}", out.stderr);
    }
    assert!(out.stderr.contains("HEARTBEAT.md:"), "{}", out.stderr);
    // An id no task has.
    let unknown = (0..u64::MAX)
        .map(|n| format!("{n:012x}"))
        .find(|c| !all.iter().any(|id| id.starts_with(&c[..6])))
        .unwrap();
    let out = env.cmd(["run", "--task", &unknown[..6]]).output();
    out.code(2);
    assert!(out.stderr.contains(&unknown[..6]), "{}", out.stderr);
    // A place with no task, and a file the run does not read.
    let out = env.cmd(["run", "--task", "HEARTBEAT.md:1"]).output();
    out.code(2);
    assert!(out.stderr.contains("HEARTBEAT.md:1"), "{}", out.stderr);
    let out = env.cmd(["run", "--task", "OTHER.md:2"]).output();
    out.code(2);
    assert!(out.stderr.contains("OTHER.md"), "{}", out.stderr);
    // Nothing ran, nothing was written.
    assert!(!env.audit_path().exists());
}

#[test]
fn a_named_task_still_obeys_policy() {
    let env = Env::new(
        "## Recurring\n\
         - [ ] @shell {\"cmd\": \"touch asked\"}\n\
         - [ ] @never {}\n\
         - [ ] @paid {}\n\
         - [ ] @fail {}\n\
         - [ ] @log {\"text\": \"free\"}\n\
         ## One-time\n\
         - [ ] @log {\"text\": \"once\"}\n",
    )
    .config(
        "[budget]\ndaily_usd = 1.0\n\
         [tools.never]\ncommand = [\"true\"]\napproval = \"deny\"\n\
         [tools.paid]\ncommand = [\"true\"]\napproval = \"auto\"\ncost_usd = 2.0\n\
         [tools.fail]\ncommand = [\"false\"]\napproval = \"auto\"\nmax_consecutive_failures = 1\n",
    );
    let id = |needle: &str| id_of(&env, needle);
    let task = |needle: &str, now: &str, extra: &[&str]| -> Value {
        let out = env
            .cmd(["run", "--json", "--task", &id(needle)])
            .args(extra)
            .now(now)
            .output();
        let doc = out.json();
        assert!(doc["tasks"].as_array().unwrap().len() <= 1, "{doc:#}");
        doc
    };
    // ask → queued, never run.
    let doc = task("asked", "2026-05-01T10:00:00Z", &[]);
    assert_eq!(doc["tasks"][0]["outcome"], "queued", "{doc:#}");
    assert_eq!(doc["tasks"][0]["trigger"], "manual");
    assert!(!env.exists("asked"));
    // Named again, it is already pending: nothing new.
    let doc = task("asked", "2026-05-01T10:01:00Z", &[]);
    assert_eq!(doc["tasks"], serde_json::json!([]), "{doc:#}");
    assert_eq!(env.approval_rows().len(), 1);
    // Tool policy deny, the budget, observe.
    let doc = task("never", "2026-05-01T10:02:00Z", &[]);
    assert_eq!(doc["tasks"][0]["reason"], "denied_by_policy", "{doc:#}");
    let doc = task("paid", "2026-05-01T10:03:00Z", &[]);
    assert_eq!(doc["tasks"][0]["reason"], "budget", "{doc:#}");
    let doc = task("free", "2026-05-01T10:04:00Z", &["--autonomy", "observe"]);
    assert_eq!(doc["tasks"][0]["reason"], "observe", "{doc:#}");
    // The breaker: it trips, and is then skipped when named.
    let doc = task("fail", "2026-05-01T10:05:00Z", &[]);
    assert_eq!(doc["tasks"][0]["outcome"], "failed", "{doc:#}");
    assert_eq!(env.events("task_tripped").len(), 1);
    task("fail", "2026-05-01T10:06:00Z", &[]);
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.last().unwrap()["reason"], "tripped");
    assert_eq!(env.events("task_failed").len(), 1);
    // Paused: the run is skipped, unless forced.
    env.cmd(["pause"]).output().code(0);
    let doc = task("free", "2026-05-01T10:07:00Z", &[]);
    assert_eq!(doc["skipped"], "paused", "{doc:#}");
    assert_eq!(successes(&env, &id("free")), 0);
    let doc = task("free", "2026-05-01T10:08:00Z", &["--force"]);
    assert_eq!(doc["tasks"][0]["outcome"], "succeeded", "{doc:#}");
    env.cmd(["resume"]).output().code(0);
    // A one-time task runs at most once, named or not.
    let doc = task("once", "2026-05-01T10:09:00Z", &[]);
    assert_eq!(doc["tasks"][0]["outcome"], "succeeded", "{doc:#}");
    let doc = task("once", "2026-05-01T10:10:00Z", &[]);
    assert_eq!(doc["tasks"], serde_json::json!([]), "{doc:#}");
    assert_eq!(successes(&env, &id("once")), 1);
}

#[test]
fn outside_active_hours_a_named_task_waits_unless_forced() {
    let env = Env::new(MD).config("active_hours = \"08:00-18:00\"\ntimezone = \"UTC\"\n");
    let often = id_of(&env, "often");
    let doc = env
        .cmd(["run", "--json", "--task", &often])
        .now("2026-05-01T20:00:00Z")
        .output()
        .json();
    assert_eq!(doc["skipped"], "outside_active_hours", "{doc:#}");
    env.cmd(["run", "--task", &often, "--force"])
        .now("2026-05-01T20:01:00Z")
        .output()
        .code(0);
    assert_eq!(successes(&env, &often), 1);
}

#[test]
fn a_dry_run_of_a_named_task_shows_it_alone_and_writes_nothing() {
    let env = Env::new(MD);
    let often = id_of(&env, "often");
    let out = env
        .cmd(["run", "--task", &often, "--dry-run", "--json"])
        .output();
    out.code(0);
    let doc = out.json();
    assert_eq!(doc["dry_run"], true);
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{doc:#}");
    assert_eq!(tasks[0]["outcome"], "would_run");
    assert_eq!(tasks[0]["trigger"], "manual");
    assert!(!env.state().exists());
    let out = env.cmd(["run", "--task", &often, "--dry-run"]).output();
    out.code(0);
    assert!(out.stdout.contains("often"), "{}", out.stdout);
    assert!(!out.stdout.contains("nightly"), "{}", out.stdout);
}

#[test]
fn a_named_run_reports_no_missed_slots_and_leaves_them_to_the_next_run() {
    let env = Env::new(
        "## Recurring\n### Daily at 02:00\n- [ ] @log {\"text\": \"a\"}\n- [ ] @log {\"text\": \"b\"}\n",
    )
    .config("timezone = \"UTC\"\n");
    let a = id_of(&env, "\"a\"");
    env.run_once("2026-05-01T03:00:00Z").code(0);
    // Two days without runs, then a person runs `a`.
    env.cmd(["run", "--task", &a])
        .now("2026-05-04T03:00:00Z")
        .output()
        .code(0);
    assert!(env.events("task_missed").is_empty(), "{}", env.audit_text());
    // The next scheduled run reports both tasks' passed slots.
    env.run_once("2026-05-04T04:00:00Z").code(0);
    let missed = env.events("task_missed");
    assert_eq!(missed.len(), 4, "{}", env.audit_text());
    assert_eq!(
        missed.iter().filter(|m| m["task_id"] == a.as_str()).count(),
        2
    );
}

#[test]
fn named_tasks_of_a_tool_with_a_cooldown_all_run() {
    let env =
        Env::new("## Recurring\n- [ ] @log {\"text\": \"one\"}\n- [ ] @log {\"text\": \"two\"}\n")
            .config("[tools.log]\ncooldown = \"1h\"\n");
    // A scheduled run starts one of them; the cooldown holds the other.
    env.run_once("2026-05-01T10:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    env.cmd([
        "run",
        "--task",
        "HEARTBEAT.md:2",
        "--task",
        "HEARTBEAT.md:3",
    ])
    .now("2026-05-01T10:01:00Z")
    .output()
    .code(0);
    assert_eq!(
        env.events("task_succeeded").len(),
        3,
        "{}",
        env.audit_text()
    );
}

#[test]
fn a_named_run_says_why_its_task_did_not_run() {
    let env = Env::new(MD).config("[tools.shell]\napproval = \"deny\"\n");
    let out = env.cmd(["run", "--task", "HEARTBEAT.md:6"]).output();
    out.code(0);
    assert!(
        out.stdout.contains("skipped") && out.stdout.contains("denied_by_policy"),
        "{}",
        out.stdout
    );
    // The one-time task ran; named again, it has nothing to do, and says so.
    env.cmd(["run", "--task", "HEARTBEAT.md:10"])
        .output()
        .code(0);
    let out = env.cmd(["run", "--task", "HEARTBEAT.md:10"]).output();
    out.code(0);
    assert!(out.stdout.contains("nothing ran"), "{}", out.stdout);
}
