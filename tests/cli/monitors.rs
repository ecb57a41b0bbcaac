//! Dead-man pings (docs/reference.md#monitors), end to end through the binary against a
//! watcher double on 127.0.0.1: healthchecks' start, success and fail with one `rid`, a
//! skipped run, a held lock, Uptime Kuma's push, plain URLs, a tool's `monitor_url_env`,
//! hung and failing watchers, the config's checks, and the URL in no sink.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Env, Output};
use crate::test_server::{Reply, Request, TestServer};

/// What the watcher answers: a status (echoing the request's target in the body, as some
/// servers do in their errors), or nothing until the double is dropped.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Status(u16),
    Hang,
}

/// A watcher: records every request, answers with the lined-up answers in turn, then
/// `always` (200 unless set).
struct Watcher {
    requests: Arc<Mutex<Vec<Request>>>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    always: Arc<Mutex<Answer>>,
    stop: Arc<AtomicBool>,
    server: Option<TestServer>,
}

impl Watcher {
    fn start() -> Watcher {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(VecDeque::new()));
        let always = Arc::new(Mutex::new(Answer::Status(200)));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, a, al, halt) = (
            requests.clone(),
            answers.clone(),
            always.clone(),
            stop.clone(),
        );
        let server = TestServer::start(move |req| {
            r.lock().unwrap().push(req.clone());
            let answer = a.lock().unwrap().pop_front().unwrap_or(*al.lock().unwrap());
            match answer {
                Answer::Status(status) => Reply::raw(
                    status,
                    "text/plain",
                    format!("status {status} for {}", req.url),
                ),
                Answer::Hang => {
                    while !halt.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Reply::raw(200, "text/plain", "late")
                }
            }
        });
        Watcher {
            requests,
            answers,
            always,
            stop,
            server: Some(server),
        }
    }

    fn url(&self) -> String {
        self.server.as_ref().expect("running").url()
    }

    fn always(&self, answer: Answer) {
        *self.always.lock().unwrap() = answer;
    }

    fn then(&self, answer: Answer) {
        self.answers.lock().unwrap().push_back(answer);
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// `METHOD target` of each request.
    fn seen(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.url))
            .collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.take();
    }
}

/// The secret part of every check URL here: it must show in no sink.
const CHECK: &str = "5ecret-check-7f3a9c";

const OK_TASK: &str = "## Recurring\n- [ ] @shell {\"cmd\": \"echo all good\"}\n";
const FAILING_TASK: &str = "## Recurring\n- [ ] @shell {\"cmd\": \"echo broken >&2; exit 3\"}\n";

fn config(extra: &str) -> String {
    format!("timezone = \"UTC\"\nautonomy = \"full\"\n[tools.shell]\napproval = \"auto\"\n{extra}")
}

const HC: &str = "[[monitors]]\nname = \"hc\"\nkind = \"healthchecks\"\nurl_env = \"HB_HC\"\n";

fn run(env: &Env, w: &Watcher) -> Output {
    env.cmd(["run", "--once"])
        .env("HB_HC", format!("{}/ping/{CHECK}", w.url()))
        .output()
}

/// The run id of the only run in the log.
fn run_id(env: &Env) -> String {
    let started = env.events("run_started");
    assert_eq!(started.len(), 1, "{started:?}");
    started[0]["run_id"].as_str().unwrap().to_string()
}

fn rid(run_id: &str) -> String {
    format!("00000000-0000-4000-8000-{run_id}")
}

#[test]
fn healthchecks_gets_start_then_success_with_the_summary_under_one_rid() {
    let w = Watcher::start();
    let env = Env::new(OK_TASK).config(&config(HC));
    run(&env, &w).code(0);
    let rid = rid(&run_id(&env));
    assert_eq!(
        w.seen(),
        [
            format!("GET /ping/{CHECK}/start?rid={rid}"),
            format!("POST /ping/{CHECK}?rid={rid}"),
        ]
    );
    let body = String::from_utf8(w.requests()[1].body.clone()).unwrap();
    assert!(body.contains("@shell"), "{body}");
    assert!(body.contains("1 succeeded"), "{body}");
    assert!(env.events("monitor_ping_failed").is_empty());
}

#[test]
fn a_failed_run_pings_fail_and_an_invalid_task_counts_as_failed() {
    let w = Watcher::start();
    let env = Env::new(FAILING_TASK).config(&config(HC));
    run(&env, &w).code(1);
    let rid = rid(&run_id(&env));
    assert_eq!(
        w.seen(),
        [
            format!("GET /ping/{CHECK}/start?rid={rid}"),
            format!("POST /ping/{CHECK}/fail?rid={rid}"),
        ]
    );
    let body = String::from_utf8(w.requests()[1].body.clone()).unwrap();
    assert!(body.contains("FAILED"), "{body}");

    let w = Watcher::start();
    let env = Env::new("## Recurring\n- [ ] @nosuchtool {}\n").config(&config(HC));
    run(&env, &w).code(1);
    assert!(w.seen()[1].starts_with(&format!("POST /ping/{CHECK}/fail?rid=")));
}

#[test]
fn a_skipped_run_pings_start_and_success_with_its_reason_and_a_held_lock_pings_nothing() {
    let w = Watcher::start();
    let env = Env::new(OK_TASK).config(&config(HC));
    env.cmd(["pause"]).output().code(0);
    run(&env, &w).code(0);
    let rid = rid(&run_id_of_skip(&env));
    assert_eq!(
        w.seen(),
        [
            format!("GET /ping/{CHECK}/start?rid={rid}"),
            format!("POST /ping/{CHECK}?rid={rid}"),
        ]
    );
    let body = String::from_utf8(w.requests()[1].body.clone()).unwrap();
    assert!(body.contains("skipped: paused"), "{body}");

    let w = Watcher::start();
    let env = Env::new(OK_TASK).config(&config(HC));
    let lock = env.hold_lock();
    run(&env, &w).code(0);
    drop(lock);
    assert_eq!(env.events("run_skipped")[0]["reason"], "locked");
    assert!(w.seen().is_empty(), "{:?}", w.seen());
}

fn run_id_of_skip(env: &Env) -> String {
    let skipped = env.events("run_skipped");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    skipped[0]["run_id"].as_str().unwrap().to_string()
}

#[test]
fn a_watcher_that_never_answers_holds_the_run_only_within_its_bound() {
    let w = Watcher::start();
    w.always(Answer::Hang);
    let env = Env::new(OK_TASK).config(&config(HC));
    run(&env, &w).code(0);
    let failed = env.events("monitor_ping_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    for f in &failed {
        assert_eq!(f["monitor"], "hc");
        let error = f["error"].as_str().unwrap();
        assert!(error.contains("no answer within"), "{error}");
        assert!(error.contains("within 5s"), "{error}");
    }
    assert_eq!(env.events("task_succeeded").len(), 1);
}

#[test]
fn a_500_is_tried_three_times_then_audited_and_the_run_goes_on() {
    let w = Watcher::start();
    w.always(Answer::Status(500));
    let env = Env::new(OK_TASK).config(&config(HC));
    let out = run(&env, &w);
    out.code(0);
    let seen = w.seen();
    assert_eq!(seen.len(), 6, "{seen:#?}");
    assert!(seen[..3].iter().all(|s| s.starts_with("GET ")), "{seen:#?}");
    assert!(
        seen[3..].iter().all(|s| s.starts_with("POST ")),
        "{seen:#?}"
    );
    let failed = env.events("monitor_ping_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    let line = &env.audit()[..];
    let keys: Vec<&str> = line
        .iter()
        .find(|e| e["event"] == "monitor_ping_failed")
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["ts", "event", "run_id", "monitor", "error"]);
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains("HTTP 500")
            && error.contains("gave up after 3 of at most 3 tries within 5s"),
        "{error}"
    );
    // A watcher that recovers within the tries is not a failure.
    let w = Watcher::start();
    w.then(Answer::Status(503));
    let env = Env::new(OK_TASK).config(&config(HC));
    run(&env, &w).code(0);
    assert_eq!(w.seen().len(), 3, "{:?}", w.seen());
    assert!(env.events("monitor_ping_failed").is_empty());
    // A 4xx can never succeed: one try each, and `heartbeat log` shows the line.
    let w = Watcher::start();
    w.always(Answer::Status(404));
    let env = Env::new(OK_TASK).config(&config(HC));
    run(&env, &w).code(0);
    assert_eq!(w.seen().len(), 2, "{:?}", w.seen());
    let log = env.cmd(["log", "--event", "monitor_ping_failed"]).output();
    log.code(0);
    assert!(log.stdout.contains("hc: HTTP 404"), "{}", log.stdout);
    assert!(
        log.stdout.contains("(refused: not tried again)"),
        "{}",
        log.stdout
    );
}

#[test]
fn the_check_url_is_in_no_sink() {
    let w = Watcher::start();
    w.always(Answer::Status(500));
    // The task prints its environment: the URL's variable is not there.
    let md = "## Recurring\n- [ ] @shell {\"cmd\": \"env; echo $HB_HC; exit 1\"}\n";
    let env = Env::new(md).config(&config(
        "[tools.backup]\ncommand = [\"sh\", \"-c\", \"env > tool-env.txt\"]\napproval = \"auto\"\n\
         monitor_url_env = \"HB_TOOL\"\n[[monitors]]\nkind = \"uptime_kuma\"\nurl_env = \"HB_KUMA\"\n",
    ));
    env.write("HEARTBEAT.md", format!("{md}- [ ] @backup {{}}\n"));
    let out = env
        .cmd(["run", "--once", "-v"])
        .env("HB_TOOL", format!("{}/ping/{CHECK}", w.url()))
        .env("HB_KUMA", format!("{}/api/push/{CHECK}?status=up", w.url()))
        .output();
    out.code(1);
    assert!(!w.seen().is_empty());
    let failed = env.events("monitor_ping_failed");
    let monitors: Vec<&str> = failed
        .iter()
        .map(|f| f["monitor"].as_str().unwrap())
        .collect();
    assert_eq!(monitors, ["tools.backup", "tools.backup", "uptime_kuma-1"]);
    for (what, text) in [
        ("stdout", out.stdout.clone()),
        ("stderr", out.stderr.clone()),
        ("audit", env.audit_text()),
        ("tool env", env.read("tool-env.txt")),
        ("database", dump(&env)),
    ] {
        assert!(!text.contains(CHECK), "{what}: {text}");
    }
    let env_dump = env.read("tool-env.txt");
    assert!(!env_dump.contains("HB_TOOL=") && !env_dump.contains("HB_KUMA="));
}

/// Every text value of every table.
fn dump(env: &Env) -> String {
    let db = env.db();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut text = String::new();
    for table in tables {
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for i in 0..n {
                if let Ok(Some(s)) = row.get::<_, Option<String>>(i) {
                    text.push_str(&s);
                    text.push('\n');
                }
            }
        }
    }
    assert!(text.contains("shell"), "read the tables: {text}");
    text
}

#[test]
fn uptime_kuma_gets_its_push_with_status_msg_and_ping_replaced() {
    let w = Watcher::start();
    let env = Env::new(FAILING_TASK).config(&config(
        "[[monitors]]\nkind = \"uptime_kuma\"\nurl_env = \"HB_KUMA\"\n",
    ));
    env.cmd(["run", "--once"])
        .env(
            "HB_KUMA",
            format!("{}/api/push/abc?status=up&msg=OK&ping=&keep=1", w.url()),
        )
        .output()
        .code(1);
    let seen = w.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].path(), "/api/push/abc");
    let url = reqwest::Url::parse(&format!("http://watcher{}", seen[0].url)).unwrap();
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let keys: Vec<&str> = query.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["keep", "status", "msg", "ping"]);
    assert_eq!(query[1].1, "down");
    let run_id = run_id(&env);
    assert_eq!(query[2].1, format!("heartbeat run {run_id}: 1 failed"));
    assert!(query[2].1.chars().count() <= 200);
    assert!(query[3].1.parse::<u64>().is_ok(), "{query:?}");
}

#[test]
fn url_monitors_get_each_url_they_name_and_names_default_to_kind_and_place() {
    let w = Watcher::start();
    let env = Env::new(FAILING_TASK).config(&config(
        "[[monitors]]\nkind = \"url\"\nstart_url_env = \"HB_START\"\nfail_url_env = \"HB_FAIL\"\n\
         [[monitors]]\nkind = \"url\"\nsuccess_url_env = \"HB_OK\"\n\
         [[monitors]]\nkind = \"url\"\nstart_url_env = \"HB_UNSET\"\n",
    ));
    env.cmd(["run", "--once"])
        .env("HB_START", format!("{}/start-here", w.url()))
        .env("HB_FAIL", format!("{}/failed-here", w.url()))
        .env("HB_OK", format!("{}/ok-here", w.url()))
        .output()
        .code(1);
    assert_eq!(w.seen(), ["GET /start-here", "GET /failed-here"]);
    let failed = env.events("monitor_ping_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["monitor"], "url-3");
    assert_eq!(failed[0]["error"], "$HB_UNSET is not set");
}

#[test]
fn a_tools_monitor_is_pinged_around_each_run_of_its_tasks_and_not_for_a_queued_one() {
    let w = Watcher::start();
    let env = Env::new("## Recurring\n- [ ] @backup {}\n- [ ] @broken {}\n- [ ] @asking {}\n")
        .config(
            "autonomy = \"cautious\"\n\
         [tools.backup]\ncommand = [\"true\"]\napproval = \"auto\"\nmonitor_url_env = \"HB_B\"\n\
         [tools.broken]\ncommand = [\"false\"]\napproval = \"auto\"\nmonitor_url_env = \"HB_X\"\n\
         [tools.asking]\ncommand = [\"true\"]\napproval = \"ask\"\nmonitor_url_env = \"HB_A\"\n",
        );
    env.cmd(["run", "--once"])
        .env("HB_B", format!("{}/b", w.url()))
        .env("HB_X", format!("{}/x", w.url()))
        .env("HB_A", format!("{}/a", w.url()))
        .output()
        .code(1);
    let rid = rid(&run_id(&env));
    assert_eq!(
        w.seen(),
        [
            format!("GET /b/start?rid={rid}"),
            format!("POST /b?rid={rid}"),
            format!("GET /x/start?rid={rid}"),
            format!("POST /x/fail?rid={rid}"),
        ]
    );
    assert_eq!(env.events("approval_requested").len(), 1);
}

#[test]
fn monitors_config_is_checked_with_file_key_and_place() {
    let cases: [(&str, &str); 5] = [
        (
            "[[monitors]]\nkind = \"healthchecks\"\nurl_env = \"A\"\nurl = \"x\"\n",
            "heartbeat.toml:4:1: monitors[0]: unknown key \"url\"",
        ),
        (
            "[[monitors]]\nkind = \"healthchecks\"\nstart_url_env = \"A\"\n",
            "heartbeat.toml:3:17: monitors[0].start_url_env: not a key of a healthchecks monitor",
        ),
        (
            "[[monitors]]\nurl_env = \"A\"\n",
            "monitors[0].kind: missing key \"kind\"",
        ),
        (
            "[[monitors]]\nkind = \"url\"\n",
            "monitors[0]: a url monitor needs",
        ),
        (
            "[[monitors]]\nname = \"w\"\nkind = \"url\"\nstart_url_env = \"A\"\n\
             [[monitors]]\nname = \"w\"\nkind = \"uptime_kuma\"\nurl_env = \"B\"\n",
            "heartbeat.toml:6:8: monitors[1].name: \"w\": another monitor has this name",
        ),
    ];
    for (toml, want) in cases {
        let env = Env::new(OK_TASK).config(toml);
        let out = env.cmd(["check"]).output();
        out.code(2);
        assert!(
            out.stderr.contains(want),
            "{toml}\nwant {want}\ngot {}",
            out.stderr
        );
    }
    let env = Env::new(OK_TASK).config("[tools.shell]\nmonitor_url = \"x\"\n");
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr
            .contains("heartbeat.toml:2:1: tools.shell: unknown key \"monitor_url\""),
        "{}",
        out.stderr
    );
    let env = Env::new(OK_TASK).config("[metrics]\ntextfile = \"m.prom\"\nevery = \"1m\"\n");
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr.contains("metrics: unknown key \"every\""),
        "{}",
        out.stderr
    );
}

#[test]
fn each_daemon_tick_pings_like_a_run() {
    let w = Watcher::start();
    let env = Env::new(OK_TASK).config(&config(HC));
    let d = env
        .cmd(["daemon", "--every", "1h"])
        .env("HB_HC", format!("{}/ping/{CHECK}", w.url()))
        .spawn_guarded();
    // The first tick comes at once (no run yet); its end ping is the run's last effect.
    crate::common::wait_until("the first tick's end ping", crate::common::WAIT, || {
        w.requests().len() >= 2
    });
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.finish(crate::common::WAIT).code(0);
    let rid = rid(&run_id(&env));
    assert_eq!(
        w.seen(),
        [
            format!("GET /ping/{CHECK}/start?rid={rid}"),
            format!("POST /ping/{CHECK}?rid={rid}"),
        ]
    );
}
