//! Fleet mode (docs/fleet.md) against a real PostgreSQL started by the tests
//! (tests/support/pg_server.rs): several nodes, each its own state dir and its own clone of the same
//! files at another absolute path, racing `run --once`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{Env, cannot_run_here};
use crate::pg_server;

/// The variable the configs name for the URL.
const URL_VAR: &str = "HB_TEST_PG_URL";

/// A fresh database's URL, or None (said, or a failure under `HEARTBEAT_TEST_STRICT=1`).
fn database() -> Option<String> {
    match pg_server::database() {
        Ok(url) => Some(url),
        Err(why) => {
            cannot_run_here(&format!("PostgreSQL: {why}"));
            None
        }
    }
}

const MD: &str = "# Ops

## Recurring

### Daily at 02:00
- [ ] @shell {\"cmd\": \"echo backup\"}

### Every 1h
- [ ] @shell {\"cmd\": \"echo hourly\"}

## One-time

- [ ] @shell {\"cmd\": \"echo once\"}
";

fn config(node: &str, extra: &str) -> String {
    fleet_config(node, "", extra)
}

/// A node's config with more keys in its `[fleet]` table.
fn fleet_config(node: &str, fleet: &str, extra: &str) -> String {
    format!(
        "timezone = \"UTC\"\n\
         [fleet]\npostgres_url_env = \"{URL_VAR}\"\nnode = \"{node}\"\n{fleet}\n\
         [tools.shell]\napproval = \"auto\"\n{extra}"
    )
}

/// A node: its own temp dir (another absolute path), the same files.
struct Node {
    env: Env,
    url: String,
}

impl Node {
    fn new(name: &str, url: &str, md: &str, extra: &str) -> Node {
        let env = Env::new(md).config(&config(name, extra));
        Node {
            env,
            url: url.to_string(),
        }
    }

    fn run(&self, now: &str) -> crate::common::Output {
        self.env
            .cmd(["run", "--once"])
            .env(URL_VAR, &self.url)
            .now(now)
            .output()
    }

    fn cmd<const N: usize>(&self, args: [&str; N]) -> crate::common::Cmd {
        self.env.cmd(args).env(URL_VAR, &self.url)
    }
}

/// `task_succeeded` lines of every node: (task id, minute of `ts`) → nodes that ran it.
fn successes(nodes: &[Node]) -> BTreeMap<(String, String), Vec<String>> {
    let mut ran: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in nodes {
        for line in n.env.events("task_succeeded") {
            let ts = line["ts"].as_str().unwrap();
            ran.entry((
                line["task_id"].as_str().unwrap().to_string(),
                ts[..16].to_string(),
            ))
            .or_default()
            .push(line["node"].as_str().unwrap_or("?").to_string());
        }
    }
    ran
}

fn task_ids(node: &Node, now: &str) -> Vec<(String, String)> {
    let out = node.cmd(["check", "--json"]).now(now).output();
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("check --json: {e}\n{}{}", out.stdout, out.stderr));
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task_id"].as_str().unwrap().to_string(),
                t["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn three_nodes_run_each_slot_once_over_twenty_days() {
    let Some(url) = database() else { return };
    let nodes: Vec<Node> = ["n1", "n2", "n3"]
        .iter()
        .map(|name| Node::new(name, &url, MD, ""))
        .collect();
    // The same lines in clones at different paths are the same tasks.
    let ids: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            task_ids(n, "2026-05-01T01:00:00Z")
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        })
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    let (daily, hourly, once) = (&ids[0][0], &ids[0][1], &ids[0][2]);

    let times = ["02:00", "02:30", "03:10"];
    for day in 1..=20 {
        for time in times {
            let now = format!("2026-05-{day:02}T{time}:00Z");
            std::thread::scope(|s| {
                for n in &nodes {
                    let now = now.as_str();
                    s.spawn(move || {
                        let out = n.run(now);
                        assert!(out.code == Some(0), "{now}: {}{}", out.stdout, out.stderr);
                    });
                }
            });
        }
    }

    let ran = successes(&nodes);
    for ((task, minute), by) in &ran {
        assert_eq!(by.len(), 1, "{task} at {minute} ran on {by:?}");
    }
    for day in 1..=20 {
        let at = |t: &str| format!("2026-05-{day:02}T{t}");
        let runs = |task: &str, t: &str| ran.contains_key(&(task.to_string(), at(t)));
        assert!(runs(daily, "02:00"), "the backup did not run on day {day}");
        assert!(!runs(daily, "02:30") && !runs(daily, "03:10"), "day {day}");
        assert!(runs(hourly, "02:00") && runs(hourly, "03:10"), "day {day}");
        assert!(!runs(hourly, "02:30"), "day {day}");
    }
    let once_runs: Vec<_> = ran.keys().filter(|(t, _)| t == once).collect();
    assert_eq!(once_runs.len(), 1, "{once_runs:?}");
    // Ticked on the copy of the node that ran it only (`tick = "runner"`).
    let ticked = nodes
        .iter()
        .filter(|n| {
            n.env
                .read("HEARTBEAT.md")
                .contains("- [x] @shell {\"cmd\": \"echo once\"}")
        })
        .count();
    assert_eq!(ticked, 1);
    // A slot one node ran is missed by none.
    for n in &nodes {
        assert!(
            n.env.events("task_missed").is_empty(),
            "{}",
            n.env.audit_text()
        );
    }
    // Every line says which node wrote it.
    for n in &nodes {
        assert!(n.env.audit().iter().all(|l| l["node"].is_string()));
    }
    // The work is spread: not one node did everything (each may lose every race, so only
    // the total is exact; this checks the node names are what they say).
    let by_node: std::collections::BTreeSet<&String> = ran.values().flatten().collect();
    assert!(
        by_node
            .iter()
            .all(|n| ["n1", "n2", "n3"].contains(&n.as_str()))
    );
}

const ASK_MD: &str = "# Ops

## Recurring

### Daily at 02:00
- [ ] @shell {\"cmd\": \"echo deploy\"}
";

#[test]
fn one_inbox_queued_on_one_node_approved_on_another_runs_once() {
    let Some(url) = database() else { return };
    let ask = "[tools.deploy]\ncommand = [\"echo\", \"deployed\"]\n";
    let md = ASK_MD.replace("@shell {\"cmd\": \"echo deploy\"}", "@deploy {}");
    let a = Node::new("a", &url, &md, ask);
    let b = Node::new("b", &url, &md, ask);
    let now = "2026-05-01T02:00:00Z";
    assert_eq!(a.run(now).code, Some(0));
    assert_eq!(b.run(now).code, Some(0));
    // One approval, queued once, shown on both.
    let listed = |n: &Node| -> Vec<Value> {
        let out = n.cmd(["approvals", "--json"]).now(now).output();
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        v.as_array()
            .cloned()
            .unwrap_or_else(|| v["approvals"].as_array().cloned().unwrap())
    };
    let on_a = listed(&a);
    assert_eq!(on_a.len(), 1, "{on_a:?}");
    assert_eq!(listed(&b), on_a);
    let id = on_a[0]["id"].as_i64().unwrap().to_string();
    // Approved on both at once: run once.
    std::thread::scope(|s| {
        for n in [&a, &b] {
            let id = id.as_str();
            s.spawn(move || {
                n.cmd(["approve", id]).now("2026-05-01T02:01:00Z").output();
            });
        }
    });
    a.run("2026-05-01T02:10:00Z");
    b.run("2026-05-01T02:10:00Z");
    let runs = a.env.events("task_succeeded").len() + b.env.events("task_succeeded").len();
    assert_eq!(runs, 1, "{}\n{}", a.env.audit_text(), b.env.audit_text());
}

#[test]
fn a_tool_with_hosts_runs_only_there_and_check_says_elsewhere() {
    let Some(url) = database() else { return };
    let hosts = "[tools.backup]\ncommand = [\"echo\", \"backed up\"]\napproval = \"auto\"\nhosts = [\"nas\"]\n";
    let md = ASK_MD.replace("@shell {\"cmd\": \"echo deploy\"}", "@backup {}");
    let laptop = Node::new("laptop", &url, &md, hosts);
    let nas = Node::new("nas", &url, &md, hosts);
    let now = "2026-05-01T02:00:00Z";
    assert_eq!(task_ids(&laptop, now)[0].1, "elsewhere");
    assert_eq!(task_ids(&nas, now)[0].1, "run");
    // The laptop runs first and leaves the slot alone; the nas runs it.
    assert_eq!(laptop.run(now).code, Some(0));
    assert_eq!(nas.run("2026-05-01T02:01:00Z").code, Some(0));
    assert!(laptop.env.events("task_succeeded").is_empty());
    assert_eq!(nas.env.events("task_succeeded").len(), 1);
}

#[test]
fn an_unreachable_database_runs_nothing_and_says_so() {
    // No server needed: a socket directory with no server in it.
    let env = Env::new(MD).config(&config("n1", ""));
    let nowhere = "host=/nonexistent-heartbeat-socket user=hb password=Pw-never-shown dbname=x";
    let before = env.read("HEARTBEAT.md");
    let out = env
        .cmd(["run", "--once"])
        .env(URL_VAR, nowhere)
        .now("2026-05-01T02:00:00Z")
        .output();
    assert_eq!(out.code, Some(1));
    let stderr = out.stderr;
    assert!(stderr.contains("cannot be reached"), "{stderr}");
    assert!(!stderr.contains("Pw-never-shown"), "{stderr}");
    let skipped = env.events_n("run_skipped", 1);
    assert_eq!(skipped[0]["reason"], "store_unavailable");
    assert!(env.events("task_succeeded").is_empty());
    assert_eq!(env.read("HEARTBEAT.md"), before);
    assert!(!env.audit_text().contains("Pw-never-shown"));
    // doctor fails `store`.
    let doctor = env.cmd(["doctor", "--json"]).env(URL_VAR, nowhere).output();
    assert_eq!(doctor.code, Some(1));
    let v: Value = serde_json::from_str(&doctor.stdout).unwrap();
    assert_eq!(v["checks"][0]["id"], "store");
    assert_eq!(v["checks"][0]["status"], "fail");
}

#[test]
fn an_unset_url_variable_is_a_config_error() {
    let env = Env::new(MD).config(&config("n1", ""));
    let out = env
        .cmd(["run", "--once"])
        .now("2026-05-01T02:00:00Z")
        .output();
    assert_eq!(out.code, Some(2));
    let stderr = out.stderr;
    assert!(stderr.contains("fleet.postgres_url_env"), "{stderr}");
    assert!(stderr.contains(URL_VAR), "{stderr}");
}

#[test]
fn a_wrong_password_fails_closed() {
    let Some(url) = database() else { return };
    let wrong = url.replace(pg_server::PASSWORD, "Not-the-password-9");
    let node = Node::new("n1", &wrong, MD, "");
    let out = node.run("2026-05-01T02:00:00Z");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(!out.stderr.contains("Not-the-password-9"));
    assert_eq!(
        node.env.events_n("run_skipped", 1)[0]["reason"],
        "store_unavailable"
    );
}

#[test]
fn a_database_that_is_not_ours_is_refused_and_nothing_runs() {
    let Some(url) = database() else { return };
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE TABLE approvals (id INT, who TEXT)")
        .unwrap();
    let node = Node::new("n1", &url, MD, "");
    let out = node.run("2026-05-01T02:00:00Z");
    assert_eq!(out.code, Some(2));
    let stderr = out.stderr;
    assert!(
        stderr.contains("did not create") && stderr.contains("approvals"),
        "{stderr}"
    );
    assert!(node.env.events("task_succeeded").is_empty());
}

#[test]
fn one_name_one_node_until_forgotten() {
    let Some(url) = database() else { return };
    let first = Node::new("nas-1", &url, MD, "");
    let second = Node::new("nas-1", &url, MD, "");
    assert_eq!(first.run("2026-05-01T01:00:00Z").code, Some(0));
    let out = second.run("2026-05-01T01:00:00Z");
    assert_eq!(out.code, Some(2));
    let stderr = out.stderr;
    assert!(
        stderr.contains("\"nas-1\" belongs to another node"),
        "{stderr}"
    );
    let forgot = first.cmd(["fleet", "forget", "nas-1"]).output();
    assert_eq!(forgot.code, Some(0), "{}", forgot.stderr);
    let line = first.env.events_n("node_forgotten", 1);
    assert_eq!(line[0]["node"], "nas-1");
    assert_eq!(second.run("2026-05-01T01:00:00Z").code, Some(0));
}

/// Nodes `a` and `b`, whose HEARTBEAT.md differ by one line, each after a run.
fn two_nodes_whose_files_differ(url: &str) -> (Node, Node) {
    let a = Node::new("a", url, MD, "");
    let b = Node::new("b", url, &format!("{MD}\n- [ ] a line only b has\n"), "");
    a.run("2026-05-01T01:00:00Z");
    b.run("2026-05-01T01:00:00Z");
    (a, b)
}

#[test]
fn status_lists_the_nodes_and_warns_when_their_files_differ() {
    let Some(url) = database() else { return };
    let (a, _b) = two_nodes_whose_files_differ(&url);
    let v = a
        .cmd(["status", "--json"])
        .now("2026-05-01T01:05:00Z")
        .output()
        .json();
    let nodes: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["a", "b"]);
    assert!(v["nodes"][0]["files"]["HEARTBEAT.md"].is_string(), "{v}");
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("HEARTBEAT.md differs"), "{warnings}");
    let human = a.cmd(["status"]).now("2026-05-01T01:05:00Z").output();
    let text = human.stdout;
    assert!(
        text.contains("node:        a") && text.contains("differs"),
        "{text}"
    );
}

#[test]
fn a_node_killed_mid_task_leaves_it_interrupted_never_run_again_elsewhere() {
    let Some(url) = database() else { return };
    let md = "# Ops\n\n## One-time\n\n- [ ] @shell {\"cmd\": \"sleep 60\"}\n";
    let a = Node::new("a", &url, md, "");
    let b = Node::new("b", &url, md, "");
    let child = a
        .cmd(["run", "--once"])
        .now("2026-05-01T02:00:00Z")
        .spawn_guarded();
    // Wait until the task started (its start is durable before the tool runs).
    wait_until("the task to start", || {
        a.env.audit_text().contains("run_started") && started(&url)
    });
    child.signal(crate::common::Signal::SIGKILL);
    let _ = child.finish(crate::common::WAIT);
    let out = b.run("2026-05-01T02:05:00Z");
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let failed = b.env.events_n("task_failed", 1);
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("interrupted")
            || failed[0]["reason"] == "interrupted",
        "{failed:?}"
    );
    // Not run again, on either node.
    b.run("2026-05-01T03:00:00Z");
    a.run("2026-05-01T03:00:00Z");
    assert!(a.env.events("task_succeeded").is_empty());
    assert!(b.env.events("task_succeeded").is_empty());
}

/// Wait (up to the harness's deadline for a hang) until `ok`.
#[track_caller]
fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + crate::common::WAIT;
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited in vain for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether a start is recorded in the fleet's database.
fn started(url: &str) -> bool {
    postgres::Client::connect(url, postgres::NoTls)
        .ok()
        .and_then(|mut c| c.query_one("SELECT COUNT(*) FROM starts", &[]).ok())
        .is_some_and(|r| r.get::<_, i64>(0) > 0)
}

#[test]
fn a_postgres_restart_mid_run_never_runs_anything_twice() {
    let server = match pg_server::private_server("restart") {
        Ok(s) => s,
        Err(why) => return cannot_run_here(&format!("PostgreSQL: {why}")),
    };
    let url = server.database().unwrap();
    let md = "# Ops\n\n## Recurring\n\n### Every 1h\n- [ ] @shell {\"cmd\": \"sleep 2; echo hourly\"}\n\n\
              ## One-time\n\n- [ ] @shell {\"cmd\": \"sleep 2; echo once\"}\n";
    let a = Node::new("a", &url, md, "");
    let b = Node::new("b", &url, md, "");
    let child = a
        .cmd(["run", "--once"])
        .now("2026-05-01T02:00:00Z")
        .spawn_guarded();
    wait_until("a start", || started(&url));
    server.restart().unwrap();
    let out = child.finish(crate::common::WAIT);
    assert_ne!(
        out.code,
        Some(0),
        "the run lost its database: {}",
        out.stderr
    );
    // The other node, after the restart, at the same time and later: nothing twice.
    b.run("2026-05-01T02:00:30Z");
    b.run("2026-05-01T02:30:00Z");
    a.run("2026-05-01T02:30:00Z");
    let ran = successes(&[a, b]);
    for ((task, minute), by) in &ran {
        assert_eq!(by.len(), 1, "{task} at {minute} ran on {by:?}");
    }
    let started_twice: Vec<_> = ran.keys().filter(|(_, m)| m.ends_with("02:30")).collect();
    assert!(started_twice.is_empty(), "{started_twice:?}");

    // Stopped: nothing runs, and the run says so.
    server.stop().unwrap();
    let c = Node::new("c", &url, md, "");
    let out = c.run("2026-05-01T04:00:00Z");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        c.env.events_n("run_skipped", 1)[0]["reason"],
        "store_unavailable"
    );
    assert!(c.env.events("task_succeeded").is_empty());
}

/// A second bot token of the same form, so that the double tells the daemons' calls apart.
const TG_TOKEN_B: &str = "7000000001:AAHbTestSecretTokenXYZ-bbbbbbbbbbbb";

#[test]
fn one_telegram_poller_at_a_time_and_a_killed_holder_is_taken_over() {
    use crate::common::{Signal, TG_TOKEN, WAIT, tg_toml};
    use crate::tg_double::TgDouble;
    use std::time::Duration;

    let Some(url) = database() else { return };
    let tg = TgDouble::start();
    const CHAT: i64 = 4242;
    let md = "## Recurring\n### Every 1w\n- [ ] Weekly review\n";
    let node = |name: &str| {
        let toml = format!(
            "timezone = \"UTC\"\n{}\n[fleet]\npostgres_url_env = \"{URL_VAR}\"\nnode = \"{name}\"\nlease = \"2s\"\n",
            tg_toml(&tg.url(), &[CHAT], "")
        );
        Node {
            env: Env::new(md).config(&toml),
            url: url.clone(),
        }
    };
    let (a, b) = (node("a"), node("b"));
    let polls = |token: &str| {
        tg.calls_to("getUpdates")
            .into_iter()
            .filter(|c| c.token == token)
            .count()
    };
    let da = a
        .cmd(["daemon", "--every", "1h"])
        .env("HEARTBEAT_TELEGRAM_TOKEN", TG_TOKEN)
        .spawn_guarded();
    wait_until("a to poll", || polls(TG_TOKEN) > 0);
    let db = b
        .cmd(["daemon", "--every", "1h"])
        .env("HEARTBEAT_TELEGRAM_TOKEN", TG_TOKEN_B)
        .spawn_guarded();
    // b is up (its start tick ran) and a keeps the lease: b never polls.
    crate::daemon::wait_events(&b.env, "daemon_started", 1, WAIT);
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(polls(TG_TOKEN_B), 0, "two pollers at once");
    let a_polls = polls(TG_TOKEN);

    // a dies without a word: b takes over once the lease ran out (2 s), well within WAIT.
    da.signal(Signal::SIGKILL);
    let _ = da.finish(WAIT);
    wait_until("b to take over", || polls(TG_TOKEN_B) > 0);
    assert!(polls(TG_TOKEN) >= a_polls);
    // An update sent now is handled once, by b.
    tg.push_update(tg.text_update(CHAT, CHAT, "/status"));
    let sent = tg.wait_for_calls("sendMessage", 2, WAIT);
    let replies: Vec<_> = sent
        .iter()
        .filter(|c| c.body["text"].as_str().unwrap_or("").contains("status"))
        .collect();
    assert_eq!(replies.len(), 1, "{sent:#?}");
    assert_eq!(replies[0].token, TG_TOKEN_B);
    db.signal(Signal::SIGTERM);
    db.finish(WAIT).code(0);
    // Stopped, it gave up its leases: nobody holds one.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let held: i64 = c
        .query_one("SELECT COUNT(*) FROM leases WHERE holder IS NOT NULL", &[])
        .unwrap()
        .get(0);
    assert_eq!(held, 0);
}

#[test]
fn heartbeat_mcp_reads_and_writes_the_fleets_store_from_inside_its_runtime() {
    use crate::mcp_server::Client;
    let Some(url) = database() else { return };
    let a = Node::new("a", &url, MD, "");
    let b = Node::new("b", &url, MD, "");
    let mut client = Client::connect_with(a.cmd(["mcp"]));
    let status = client.call("status", serde_json::json!({})).unwrap();
    assert_eq!(status["nodes"][0]["node"], "a", "{status}");
    client
        .call(
            "pause",
            serde_json::json!({"for": "1h", "reason": "maintenance"}),
        )
        .unwrap();
    let out = client.leave();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    // The pause is the fleet's: the other node sees it.
    let v = b.cmd(["status", "--json"]).output().json();
    assert_eq!(v["paused"], true, "{v}");
}

#[test]
fn doctor_checks_the_store_the_nodes_and_the_leases() {
    let Some(url) = database() else { return };
    let (a, _b) = two_nodes_whose_files_differ(&url);
    let v = a
        .cmd(["doctor", "--json"])
        .now("2026-05-01T01:05:00Z")
        .output()
        .json();
    let check = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} check: {v}"))
    };
    assert_eq!(check("store")["status"], "ok");
    assert_eq!(check("nodes")["status"], "warn");
    assert!(
        check("nodes")["message"]
            .as_str()
            .unwrap()
            .contains("differs")
    );
    assert_eq!(check("leases")["status"], "ok");
}

#[test]
fn tick_all_ticks_every_nodes_copy_and_none_ticks_nothing() {
    let Some(url) = database() else { return };
    let md = "# Ops\n\n## One-time\n\n- [ ] @shell {\"cmd\": \"echo once\"}\n";
    let all: Vec<Node> = ["a", "b"]
        .iter()
        .map(|n| Node {
            env: Env::new(md).config(&fleet_config(n, "tick = \"all\"", "")),
            url: url.clone(),
        })
        .collect();
    for n in &all {
        assert_eq!(n.run("2026-05-01T02:00:00Z").code, Some(0));
    }
    for n in &all {
        assert!(
            n.env.read("HEARTBEAT.md").contains("- [x] @shell"),
            "{}",
            n.env.audit_text()
        );
    }
    assert_eq!(successes(&all).len(), 1);

    let Some(url) = database() else { return };
    let none = Node {
        env: Env::new(md).config(&fleet_config("c", "tick = \"none\"", "")),
        url,
    };
    none.run("2026-05-01T02:00:00Z");
    assert_eq!(none.env.events("task_succeeded").len(), 1);
    assert!(none.env.read("HEARTBEAT.md").contains("- [ ] @shell"));
}

#[test]
fn a_one_time_task_denied_on_one_node_is_asked_again_after_its_hold() {
    let Some(url) = database() else { return };
    let md = "# Ops\n\n## One-time\n\n- [ ] @deploy {}\n";
    let deploy = "[tools.deploy]\ncommand = [\"echo\", \"deployed\"]\n";
    let node = |name: &str| Node {
        env: Env::new(md).config(&format!(
            "approval_ttl = \"1h\"\n{}",
            fleet_config(name, "", deploy)
        )),
        url: url.clone(),
    };
    let (a, b) = (node("a"), node("b"));
    a.run("2026-05-01T02:00:00Z").code(0);
    b.run("2026-05-01T02:00:30Z").code(0);
    let requested = |n: &Node| n.env.events("approval_requested").len();
    assert_eq!(
        requested(&a) + requested(&b),
        1,
        "one approval for the fleet"
    );
    b.cmd(["deny", "1"])
        .now("2026-05-01T02:01:00Z")
        .output()
        .code(0);
    // Held while the denial stands, asked again after it.
    a.run("2026-05-01T02:30:00Z");
    assert_eq!(requested(&a) + requested(&b), 1);
    b.run("2026-05-01T03:30:00Z");
    a.run("2026-05-01T03:30:30Z");
    assert_eq!(requested(&a) + requested(&b), 2, "{}", b.env.audit_text());
}

#[test]
fn a_slot_missed_while_the_database_was_down_says_store_unavailable() {
    let Some(url) = database() else { return };
    let node = Node::new("a", &url, MD, "");
    node.run("2026-04-30T02:00:00Z").code(0);
    // The next night the database cannot be reached: nothing runs, and the store cannot
    // remember why.
    let down = node
        .env
        .cmd(["run", "--once"])
        .env(
            URL_VAR,
            "host=/nonexistent-heartbeat-socket user=x dbname=x",
        )
        .now("2026-05-01T02:00:00Z")
        .output();
    assert_eq!(down.code, Some(1));
    node.run("2026-05-02T02:00:00Z").code(0);
    let missed = node.env.events("task_missed");
    let backup: Vec<&Value> = missed
        .iter()
        .filter(|m| m["slot"] == "2026-05-01T02:00:00.000Z")
        .collect();
    assert!(!backup.is_empty(), "{missed:?}");
    assert!(
        backup.iter().all(|m| m["reason"] == "store_unavailable"),
        "{backup:?}"
    );
}
