//! The performance figures of heartbeat, each a ratio of medians of interleaved runs
//! measured side by side on this machine (absolute times depend on the machine; ratios
//! much less).
//!
//! Run: `cargo bench --bench figures` (optimised build). `HEARTBEAT_BENCH_RUNS=N` sets the
//! runs per side (default 11); `HEARTBEAT_BENCH_BIN=path` measures another build of heartbeat
//! (an earlier commit's, to compare). Prints one line per figure: the ratio, its goal, and the
//! medians it came from; exits 1 if a goal is missed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// The tests' throwaway PostgreSQL (one server for the run, a database per timed run). Only
// part of it is used here; the rest serves the tests.
#[allow(dead_code)]
#[path = "../tests/support/pg_server.rs"]
mod pg_server;

/// The binary measured: this build's, unless `HEARTBEAT_BENCH_BIN` names another.
fn bin() -> PathBuf {
    std::env::var_os("HEARTBEAT_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_heartbeat")))
}

fn main() {
    let runs: usize = std::env::var("HEARTBEAT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(11)
        .max(3);
    let root = tempfile::tempdir().expect("a temp dir");
    let root = root.path();
    println!("heartbeat performance figures ({runs} interleaved runs per side, medians)");
    println!("binary: {}", bin().display());
    let mut missed = 0;
    missed += figure_run_1000_vs_empty(root, runs);
    missed += figure_run_10000_vs_1000(root, runs);
    missed += figure_empty_vs_version(root, runs);
    missed += figure_realistic(root, runs);
    missed += figure_concurrency(root, runs.min(7));
    missed += figure_approve_all(root, runs);
    missed += figure_check_20000(root, runs);
    missed += figure_idle_daemon(root);
    missed += figure_daemon_ticks(root);
    missed += figure_fleet(root, runs.min(7));
    if missed > 0 {
        println!("{missed} figure(s) missed their goal");
        std::process::exit(1);
    }
}

/// A prepared case: a directory with a config and HEARTBEAT.md, and a state dir.
struct Case {
    dir: PathBuf,
    /// Pristine copies restored before every timed run (one-time tasks get ticked).
    md: Option<String>,
    state_template: Option<PathBuf>,
}

impl Case {
    fn new(root: &Path, name: &str, config: &str, md: &str) -> Case {
        let dir = root.join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("heartbeat.toml"), config).unwrap();
        fs::write(dir.join("HEARTBEAT.md"), md).unwrap();
        Case {
            dir,
            md: None,
            state_template: None,
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(&self.dir)
            .arg("--config")
            .arg(self.dir.join("heartbeat.toml"))
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .args(args)
            .env_remove("HEARTBEAT_NOW")
            .env_remove("HEARTBEAT_CONFIG")
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// Run once untimed (to prepare state).
    fn prepare(&self, args: &[&str]) {
        let status = self.cmd(args).status().unwrap();
        assert!(status.code().is_some(), "preparation was killed");
    }

    /// Keep the current file and state as the starting point of every timed run.
    fn freeze(&mut self) {
        self.md = Some(fs::read_to_string(self.dir.join("HEARTBEAT.md")).unwrap());
        let template = self.dir.join("state.template");
        let _ = fs::remove_dir_all(&template);
        copy_dir(&self.dir.join("state"), &template);
        self.state_template = Some(template);
    }

    fn restore(&self) {
        if let Some(md) = &self.md {
            fs::write(self.dir.join("HEARTBEAT.md"), md).unwrap();
        }
        if let Some(t) = &self.state_template {
            let state = self.dir.join("state");
            let _ = fs::remove_dir_all(&state);
            copy_dir(t, &state);
        }
        // The restore's own writes go to disk now, not during the timed run's first fsync.
        sync_tree(&self.dir);
    }

    /// One timed run (after restoring the starting point, untimed).
    fn time(&self, args: &[&str]) -> Duration {
        self.restore();
        let start = Instant::now();
        let status = self.cmd(args).status().unwrap();
        let took = start.elapsed();
        assert!(
            matches!(status.code(), Some(0 | 1)),
            "{args:?} exited {status}"
        );
        took
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// fsync every file and directory under `dir` (not following symlinks).
fn sync_tree(dir: &Path) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let kind = e.file_type().unwrap();
        if kind.is_dir() {
            sync_tree(&e.path());
        } else if kind.is_file() {
            fs::File::open(e.path()).unwrap().sync_all().unwrap();
        }
    }
    fs::File::open(dir).unwrap().sync_all().unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Time `a` and `b` alternately, `runs` times each; print and check the ratio of medians.
fn compare(
    name: &str,
    goal: f64,
    runs: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> usize {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    // One untimed round first: caches, page faults.
    a();
    b();
    for _ in 0..runs {
        ta.push(a());
        tb.push(b());
    }
    let (ma, mb) = (median(ta), median(tb));
    let ratio = ma.as_secs_f64() / mb.as_secs_f64().max(1e-9);
    let ok = ratio <= goal;
    println!(
        "{:<58} {ratio:>6.2}  (goal <= {goal:.1}; {:.2} ms / {:.2} ms)  {}",
        name,
        ma.as_secs_f64() * 1e3,
        mb.as_secs_f64() * 1e3,
        if ok { "ok" } else { "MISSED" }
    );
    usize::from(!ok)
}

const FULL: &str = "autonomy = \"full\"\nmax_tasks_per_run = 0\n";

fn many_logs(n: usize) -> String {
    let mut md = String::from("# Bench\n\n## One-time\n");
    for i in 0..n {
        md.push_str(&format!("- [ ] @log {{\"text\": \"task {i}\"}}\n"));
    }
    md
}

/// Nothing due: a weekly task that ran in the preparation run.
fn empty_case(root: &Path) -> Case {
    let mut c = Case::new(
        root,
        "empty",
        FULL,
        "## Recurring\n### Every 1w\n- [ ] @log {\"text\": \"weekly\"}\n",
    );
    c.prepare(&["run", "--once"]);
    c.freeze();
    c
}

/// `n` due one-time `@log` tasks over the same starting state as the empty run: a database
/// that exists.
fn many_logs_case(root: &Path, name: &str, empty: &Case, n: usize) -> Case {
    let mut big = Case::new(root, name, FULL, &many_logs(n));
    fs::create_dir_all(big.dir.join("state")).unwrap();
    copy_dir(&empty.dir.join("state.template"), &big.dir.join("state"));
    big.freeze();
    big
}

fn figure_run_1000_vs_empty(root: &Path, runs: usize) -> usize {
    let empty = empty_case(root);
    let big = many_logs_case(root, "big", &empty, 1000);
    compare(
        "run --once, 1,000 due @log tasks / empty run",
        5.0,
        runs,
        || big.time(&["run", "--once", "-q"]),
        || empty.time(&["run", "--once", "-q"]),
    )
}

/// How a run grows with its tasks: ten times the tasks, at most ten times the time.
fn figure_run_10000_vs_1000(root: &Path, runs: usize) -> usize {
    let empty = empty_case(root);
    let big = many_logs_case(root, "big1k", &empty, 1000);
    let huge = many_logs_case(root, "big10k", &empty, 10_000);
    compare(
        "run --once, 10,000 due @log tasks / 1,000",
        10.0,
        runs,
        || huge.time(&["run", "--once", "-q"]),
        || big.time(&["run", "--once", "-q"]),
    )
}

fn figure_empty_vs_version(root: &Path, runs: usize) -> usize {
    let empty = empty_case(root);
    compare(
        "empty run (config + state opened, nothing due) / --version",
        3.0,
        runs,
        || empty.time(&["run", "--once", "-q"]),
        || empty.time(&["--version"]),
    )
}

/// A check-list as people write them: 50 due tasks of five kinds (in-process `@log`,
/// `@append_file` and `@write_file`, and processes: `@shell` and a config tool).
fn figure_realistic(root: &Path, runs: usize) -> usize {
    let empty = empty_case(root);
    let mut md = String::from("# Bench\n\n## Recurring\n");
    for i in 0..10 {
        md.push_str(&format!("- [ ] @log {{\"text\": \"check {i}\"}}\n"));
        md.push_str(&format!("- [ ] @shell {{\"cmd\": [\"true\", \"{i}\"]}}\n"));
        md.push_str(&format!(
            "- [ ] @append_file {{\"path\": \"out/log.txt\", \"text\": \"line {i}\\n\"}}\n"
        ));
        md.push_str(&format!(
            "- [ ] @write_file {{\"path\": \"out/file{i}.txt\", \"text\": \"{i}\"}}\n"
        ));
        md.push_str(&format!("- [ ] @stamp {{\"n\": \"{i}\"}}\n"));
    }
    let config =
        format!("{FULL}[tools.stamp]\ncommand = [\"true\", \"{{n}}\"]\napproval = \"auto\"\n");
    let mut fifty = Case::new(root, "fifty", &config, &md);
    fs::create_dir_all(fifty.dir.join("out")).unwrap();
    fifty.freeze_state_fresh();
    compare(
        "run --once, 50 due tasks of five kinds / empty run",
        12.0,
        runs,
        || fifty.time(&["run", "--once", "-q"]),
        || empty.time(&["run", "--once", "-q"]),
    )
}

fn figure_concurrency(root: &Path, runs: usize) -> usize {
    let task = "- [ ] @shell {\"cmd\": \"sleep 0.5\"}\n";
    let mut eight = Case::new(
        root,
        "eight",
        "autonomy = \"full\"\nconcurrency = 8\n",
        &format!("## Recurring\n{}", task.repeat(8)),
    );
    eight.freeze_state_fresh();
    let mut one = Case::new(
        root,
        "one",
        "autonomy = \"full\"\nconcurrency = 8\n",
        &format!("## Recurring\n{task}"),
    );
    one.freeze_state_fresh();
    compare(
        "8 x `sleep 0.5` at concurrency 8 / one such task",
        1.3,
        runs,
        || eight.time(&["run", "--once", "-q"]),
        || one.time(&["run", "--once", "-q"]),
    )
}

fn figure_approve_all(root: &Path, runs: usize) -> usize {
    let empty = empty_case(root);
    let big = many_logs_case(root, "big2", &empty, 1000);
    // 1,000 pending approvals of the same tasks.
    let mut pending = Case::new(
        root,
        "pending",
        "autonomy = \"cautious\"\nmax_tasks_per_run = 0\n[tools.log]\napproval = \"ask\"\n",
        &many_logs(1000),
    );
    pending.prepare(&["run", "--once"]);
    pending.freeze();
    compare(
        "approve --all --yes, 1,000 pending @log / the 1,000-task run",
        4.0,
        runs,
        || pending.time(&["approve", "--all", "--yes"]),
        || big.time(&["run", "--once", "-q"]),
    )
}

fn figure_check_20000(root: &Path, runs: usize) -> usize {
    let empty = empty_case(root);
    let huge = Case::new(root, "huge", FULL, &many_logs(20_000));
    compare(
        "check of a 20,000-task file / empty run",
        10.0,
        runs,
        || huge.time(&["check"]),
        || empty.time(&["run", "--once", "-q"]),
    )
}

impl Case {
    /// Start every timed run from no state at all (recurring tasks, nothing to restore but
    /// the database, which would otherwise remember the last attempt).
    fn freeze_state_fresh(&mut self) {
        fs::create_dir_all(self.dir.join("state")).unwrap();
        self.freeze();
    }
}

/// An idle daemon: CPU time used over 3 s, and resident memory.
fn figure_idle_daemon(root: &Path) -> usize {
    let case = Case::new(
        root,
        "daemon",
        FULL,
        "## Recurring\n### Every 1w\n- [ ] @log {\"text\": \"weekly\"}\n",
    );
    case.prepare(&["run", "--once"]);
    let mut child = case
        .cmd(&["daemon", "--every", "1h"])
        .spawn()
        .expect("start the daemon");
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id();
    let ticks = |pid: u32| -> u64 {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'.
        f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let before = ticks(pid);
    std::thread::sleep(Duration::from_secs(3));
    let used = ticks(pid) - before;
    let rss_kib: u64 = fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    let rss = rss_kib as f64 / 1024.0;
    let ok = used == 0 && rss <= 13.0;
    println!(
        "{:<58} {used:>3} ticks, {rss:.1} MiB  (goal 0 ticks / <= 13 MiB)  {}",
        "idle daemon: CPU over 3 s / resident memory",
        if ok { "ok" } else { "MISSED" }
    );
    usize::from(!ok)
}

/// `daemon --every 1s`: one tick at once, then one on every whole second. The integration
/// test checks that it ticks and stops; these bounds need an unloaded machine.
fn figure_daemon_ticks(root: &Path) -> usize {
    let case = Case::new(
        root,
        "ticks",
        FULL,
        "## Recurring\n- [ ] @log {\"text\": \"beat\"}\n",
    );
    let audit = case.dir.join("state").join("audit.jsonl");
    let started_lines = |event: &str| -> Vec<String> {
        let text = fs::read_to_string(&audit).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == event)
            .filter_map(|v| v["ts"].as_str().map(str::to_owned))
            .collect()
    };
    let mut child = case
        .cmd(&["daemon", "--every", "1s"])
        .spawn()
        .expect("start the daemon");
    let give_up = Instant::now() + Duration::from_secs(30);
    while started_lines("daemon_started").is_empty() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let mut ticks = Vec::new();
    while ticks.len() < 4 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
        ticks = started_lines("run_started");
    }
    let took = t0.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    let times: Vec<chrono::DateTime<chrono::FixedOffset>> = ticks
        .iter()
        .take(4)
        .filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .collect();
    let late_ms = times
        .iter()
        .skip(1)
        .map(|t| t.timestamp_subsec_millis())
        .max()
        .unwrap_or(u32::MAX);
    // The first tick runs at start, the next on the following whole second: that first gap
    // is anything up to 1 s. The gaps between aligned ticks are what must hold.
    let gaps: Vec<i64> = times
        .iter()
        .skip(1)
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| (*w[1] - *w[0]).num_milliseconds())
        .collect();
    let ok = times.len() == 4
        && took <= Duration::from_millis(4500)
        && late_ms < 400
        && gaps.iter().all(|g| (300..=1900).contains(g));
    println!(
        "{:<58} {:.2} s, +{late_ms} ms, gaps {gaps:?} ms  (goal <= 4.5 s / < 400 ms / 300-1900 ms)  {}",
        "daemon --every 1s: 4 ticks / latest tick / aligned gaps",
        took.as_secs_f64(),
        if ok { "ok" } else { "MISSED" }
    );
    usize::from(!ok)
}

/// A fleet on PostgreSQL (docs/fleet.md) against one host on SQLite, over the same 1,000 due
/// `@log` tasks: what the claims and PostgreSQL's round trips add per task, and 5 nodes
/// racing the same check-list (each task still runs once).
fn figure_fleet(root: &Path, runs: usize) -> usize {
    let server = match pg_server::server() {
        Ok(s) => s,
        Err(why) => {
            println!("fleet figures skipped: PostgreSQL: {why}");
            return 0;
        }
    };
    let empty = empty_case(root);
    let sqlite = many_logs_case(root, "fleet-sqlite", &empty, 1000);
    let nodes: Vec<Case> = (0..5)
        .map(|i| {
            let config =
                format!("{FULL}[fleet]\npostgres_url_env = \"HB_BENCH_PG\"\nnode = \"n{i}\"\n");
            let mut c = Case::new(root, &format!("fleet-{i}"), &config, &many_logs(1000));
            c.md = Some(many_logs(1000));
            c
        })
        .collect();
    // A fresh database, migrated and with every node registered, and pristine files: untimed.
    let fresh = |nodes: &[Case]| -> String {
        let url = server.database().expect("a database");
        for n in nodes {
            n.restore();
            let _ = fs::remove_dir_all(n.dir.join("state"));
            let status = n
                .cmd(&["status"])
                .env("HB_BENCH_PG", &url)
                .status()
                .unwrap();
            assert!(status.success(), "status on a fresh database");
        }
        url
    };
    let one_node = || {
        let url = fresh(&nodes[..1]);
        let start = Instant::now();
        let status = nodes[0]
            .cmd(&["run", "--once", "-q"])
            .env("HB_BENCH_PG", &url)
            .status()
            .unwrap();
        assert!(status.success());
        start.elapsed()
    };
    let mut missed = compare(
        "run --once, 1,000 due @log tasks: fleet on PostgreSQL / SQLite",
        40.0,
        runs,
        &one_node,
        || sqlite.time(&["run", "--once", "-q"]),
    );
    let race = || {
        let url = fresh(&nodes);
        let start = Instant::now();
        let children: Vec<_> = nodes
            .iter()
            .map(|n| {
                n.cmd(&["run", "--once", "-q"])
                    .env("HB_BENCH_PG", &url)
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        start.elapsed()
    };
    missed += compare(
        "5 nodes racing run --once over 1,000 tasks / one node alone",
        5.0,
        runs,
        race,
        &one_node,
    );
    missed
}
