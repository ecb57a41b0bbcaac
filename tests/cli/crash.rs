//! Crash safety (docs/reference.md#ticking, docs/reference.md#at-most-once,
//! docs/reference.md#approvals, docs/reference.md#audit-log), against the real binary.
//!
//! A run is aborted at the named fault points of `src/fault.rs` (`HEARTBEAT_FAULT=name:n`,
//! debug builds only) and killed with SIGKILL at random moments. After every crash:
//! HEARTBEAT.md is byte for byte the original or differs only in `[ ]` → `[x]` marker bytes
//! of one-time tasks, every audit line parses (except a torn last one, only when the crash
//! tore it), `PRAGMA integrity_check` is `ok`, and the next normal run finishes the work:
//! every one-time task ends `[x]`, recorded once in SQLite, and no task ran twice except as
//! below.
//!
//! What a crash may lose: a task's outcome is committed to SQLite (its own transaction)
//! right after the tool exits, and audited right after that commit (`session::record_outcome`);
//! SQLite is what the next run plans from. So the log never shows an outcome SQLite does not
//! know (asserted after every crash), and a crash loses at most the one task in flight, in
//! one of two ways:
//! - between the tool's exit and the commit (fault points `task_done` and `sqlite_commit`, or
//!   a SIGKILL there): neither the history nor the log knows it ran. A one-time `@log` task
//!   (no effect outside heartbeat) runs once more at the next run. A one-time `@mark` task
//!   (an effect outside: a line in `marks.txt`) had its start recorded before it ran, so the
//!   next run holds it instead (`task_failed`, `interrupted`; `check` says `interrupted`)
//!   and runs it again only after `heartbeat reset` (then `marks.txt` has its line twice,
//!   which the person chose);
//! - between the commit and its outcome line (`audit_torn` while that line is written, or a
//!   SIGKILL there): SQLite knows it, so it never runs again, and its only outcome line is
//!   the torn one, or none.
//!
//!
//! The successes of `@log` (no effect outside heartbeat) are recorded in batches of up to 50
//! (`engine::ledger`): one transaction, then their lines in one write. A crash loses the
//! batch in flight (`task_done`, `sqlite_commit`: those tasks run again, once, at the next
//! run, like the task in flight above), or, once it is committed, the lines of the batch from
//! the torn one on (`audit_torn`) or all of them (`batch_committed`): SQLite knows those
//! outcomes, so nothing runs twice, and no line shows what SQLite does not know.
//!
//! Every other point (`task_recorded`, `tick_before_write`, `tick_after_write`,
//! `audit_torn` on any other line) loses nothing and runs nothing twice. Approved work
//! (`approval_claimed`, and the points above inside `approve`): see the approval tests below,
//! and `approve_batch_crash.rs` for approved `@log` work claimed in batches (`claiming`).
//!
//! Also here: several runs, two `approve`s and a daemon on one state dir at once.
//! `HEARTBEAT_SOAK=1` makes the random-kill and concurrency tests much longer.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use heartbeat::testing::Section;
use serde_json::Value;

use crate::common::*;

/// One-time `@log` tasks per crash run.
const TASKS: usize = 200;

/// Everything runs in one go: nothing waits for approval, no run cap.
const FULL: &str = "autonomy = \"full\"\nmax_tasks_per_run = 0\n";

/// Longer variants when `HEARTBEAT_SOAK=1`.
pub(crate) fn soak() -> bool {
    std::env::var_os("HEARTBEAT_SOAK").is_some_and(|v| v == "1")
}

/// A HEARTBEAT.md with these one-time task lines, and text a tick must never touch: prose
/// with brackets, a task in a code block, an open item under another section, no final
/// newline.
fn document(tasks: impl Iterator<Item = String>) -> String {
    let mut s = String::from(
        "# Heartbeat\n\nProse with [ ] brackets and - [ ] inline, never touched.\n\n\
         ```\n- [ ] @log {\"text\": \"in code\"}\n```\n\n## Notes\n\n- [ ] a note, never run\n\n\
         ## One-time\n\n",
    );
    for line in tasks {
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str("\nClosing words, and no final newline");
    s
}

/// [`document`] with `n` one-time `@log` tasks.
pub(crate) fn many_tasks(n: usize) -> String {
    document((0..n).map(|i| format!("- [ ] @log {{\"text\": \"task {i:03}\"}}")))
}

/// [`document`] with `n` one-time `@mark` tasks.
pub(crate) fn many_marks(n: usize) -> String {
    document((0..n).map(|i| format!("- [ ] @mark {{\"n\": \"{i}\"}}")))
}

/// A parsed task as the binary sees it: id, section, done, and the byte between its brackets.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub id: String,
    pub section: Section,
    pub done: bool,
    /// Offset of the byte between `[` and `]`.
    pub inside: usize,
    pub line: usize,
}

/// Parse `bytes` as the HEARTBEAT.md at `path` (ids as the binary computes them).
pub(crate) fn tasks_in(path: &Path, bytes: &[u8]) -> Vec<Seen> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let text = std::str::from_utf8(bytes).expect("HEARTBEAT.md is UTF-8");
    heartbeat::testing::parse(path, &canonical, text)
        .tasks
        .into_iter()
        .map(|t| Seen {
            id: t.id,
            section: t.section,
            done: t.done,
            inside: t.marker.start + 1,
            line: t.line,
        })
        .collect()
}

/// The open one-time tasks of `bytes`.
pub(crate) fn open_one_time(path: &Path, bytes: &[u8]) -> Vec<Seen> {
    tasks_in(path, bytes)
        .into_iter()
        .filter(|t| t.section == Section::OneTime && !t.done)
        .collect()
}

/// Compare two versions of a file: same length, and every differing byte is a `' '`/tab →
/// `'x'` between brackets at one of `allowed`. Returns the offsets that changed.
#[track_caller]
pub(crate) fn marker_diff(
    before: &[u8],
    after: &[u8],
    allowed: &BTreeSet<usize>,
) -> BTreeSet<usize> {
    assert_eq!(
        before.len(),
        after.len(),
        "the file changed length: {} → {} bytes",
        before.len(),
        after.len()
    );
    let mut changed = BTreeSet::new();
    for (i, (a, b)) in before.iter().zip(after).enumerate() {
        if a == b {
            continue;
        }
        assert!(
            matches!(*a, b' ' | b'\t') && *b == b'x',
            "byte {i} changed from {:?} to {:?}: only `[ ]` → `[x]` may change",
            *a as char,
            *b as char
        );
        assert!(
            i > 0 && before[i - 1] == b'[' && before.get(i + 1) == Some(&b']'),
            "byte {i} is not between brackets"
        );
        assert!(
            allowed.contains(&i),
            "byte {i} is the marker of no open one-time task (prose, code, another section)"
        );
        changed.insert(i);
    }
    changed
}

/// The audit log read like a careful reader: complete lines, parsed or not, and what follows
/// the last newline (a torn line).
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub lines: Vec<Value>,
    /// Complete lines that are not one JSON object: (0-based line, text).
    pub bad: Vec<(usize, String)>,
    /// Bytes after the last newline.
    pub tail: Option<String>,
}

pub(crate) fn scan_text(text: &str) -> Scan {
    let mut scan = Scan::default();
    let mut parts: Vec<&str> = text.split('\n').collect();
    let last = parts.pop().unwrap_or_default();
    if !last.is_empty() {
        scan.tail = Some(last.to_string());
    }
    for (i, line) in parts.into_iter().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => scan.lines.push(v),
            _ => scan.bad.push((i, line.chars().take(300).collect())),
        }
    }
    scan
}

pub(crate) fn scan_audit(env: &Env) -> Scan {
    scan_text(&env.audit_text())
}

/// `PRAGMA integrity_check` of heartbeat.db is `ok`.
#[track_caller]
pub(crate) fn assert_db_ok(env: &Env) {
    if !env.db_path().exists() {
        return;
    }
    let db = env.db_rw();
    let rows: Vec<String> = db
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .expect("run integrity_check");
    assert_eq!(rows, vec!["ok".to_string()], "heartbeat.db is damaged");
}

/// Temp files of an unfinished tick next to HEARTBEAT.md.
pub(crate) fn tick_temps(env: &Env) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(env.root())
        .expect("list the sandbox")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(".HEARTBEAT.md.") || name.ends_with(".tmp")
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// task_succeeded lines per task id.
pub(crate) fn successes(lines: &[Value]) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for v in lines.iter().filter(|v| v["event"] == "task_succeeded") {
        *n.entry(v["task_id"].as_str().unwrap_or("?").to_string())
            .or_insert(0) += 1;
    }
    n
}

/// Successes in `task_runs` (one row per tool run) per task id.
pub(crate) fn recorded_successes(env: &Env) -> HashMap<String, usize> {
    if !env.db_path().exists() {
        return HashMap::new();
    }
    let db = env.db_rw();
    let Ok(mut stmt) = db.prepare(
        "SELECT task_id, COUNT(*) FROM task_runs WHERE outcome = 'succeeded' GROUP BY task_id",
    ) else {
        // Killed before the schema existed.
        return HashMap::new();
    };
    stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize))
    })
    .expect("query task_runs")
    .collect::<Result<_, _>>()
    .expect("read task_runs")
}

/// The task id in a (possibly torn) audit line, if the cut left it whole.
fn task_id_in(fragment: &str) -> Option<String> {
    let at = fragment.find("\"task_id\":\"")? + "\"task_id\":\"".len();
    let id = fragment.get(at..at + 12)?;
    id.bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| id.to_string())
}

/// What the crash leaves in HEARTBEAT.md.
#[derive(Clone, Copy, Debug, PartialEq)]
enum After {
    /// Not a byte changed (the tick had not been written).
    Untouched,
    /// Every one-time task ticked (the tick was written and synced).
    AllTicked,
}

/// What the crash loses of the task in flight.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lost {
    /// Nothing: every task runs exactly once over both runs, with one whole outcome line.
    Nothing,
    /// Its outcome: it ran, but neither SQLite nor the log knows, so the next run runs it
    /// once more (one whole `task_succeeded` line, from that run). For `@mark`, the task
    /// whose number `marks.txt` ends with.
    Outcome,
    /// Its outcome line, torn: SQLite knows the outcome, the task runs nothing twice, and its
    /// only `task_succeeded` line is the torn one.
    Line,
    /// The lines of a committed batch, from the torn one (if any) on: SQLite knows those
    /// outcomes, they run nothing twice, and they have no whole `task_succeeded` line.
    Lines,
}

/// The most `@log` outcomes committed in one batch (`engine::ledger::BATCH`).
const BATCH: usize = 50;

/// The tool of the generated tasks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tool {
    /// `@log`: in-process, no effect outside heartbeat.
    Log,
    /// `@mark`: a config tool that appends its number to `marks.txt`: an effect outside
    /// heartbeat, so at most the one task in flight at the crash may run again.
    Mark,
}

/// `@log` tasks per crash run.
const LOGS: usize = TASKS;
/// `@mark` tasks per crash run (each starts a process).
const MARKS: usize = 60;

const MARK_TOOL: &str = "[tools.mark]\ncommand = [\"sh\", \"-c\", \"echo \\\"$0\\\" >> marks.txt\", \"{n}\"]\napproval = \"auto\"\n";

fn tool_env(tool: Tool) -> (Env, usize) {
    match tool {
        Tool::Log => (Env::new(&many_tasks(LOGS)).config(FULL), LOGS),
        Tool::Mark => (
            Env::new(&many_marks(MARKS)).config(&format!("{FULL}{MARK_TOOL}")),
            MARKS,
        ),
    }
}

/// The lines of `marks.txt`: the numbers of the `@mark` tasks that ran, in the order they ran.
fn mark_lines(env: &Env) -> Vec<String> {
    std::fs::read_to_string(env.path("marks.txt"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// Lines per number in `marks.txt` (how often each `@mark` task really ran).
fn marks(env: &Env) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for line in mark_lines(env) {
        *n.entry(line).or_insert(0) += 1;
    }
    n
}

/// Abort a run at `fault`, check what it left, recover, check the result.
fn crash_case(tool: Tool, fault: &str, after: After, lost: Lost) {
    let (env, count) = tool_env(tool);
    let md = env.md_path();
    let original = env.read_bytes("HEARTBEAT.md");
    let tasks = open_one_time(&md, &original);
    assert_eq!(tasks.len(), count);
    let allowed: BTreeSet<usize> = tasks.iter().map(|t| t.inside).collect();
    let name = fault.split(':').next().unwrap_or(fault);
    let ctx = format!("{tool:?} {fault}");

    let out = env
        .cmd(["run", "--once", "-q"])
        .env("HEARTBEAT_FAULT", fault)
        .output();
    assert_eq!(
        out.code, None,
        "{ctx}: the run was not aborted\n{}\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("heartbeat: fault point {name} reached")),
        "{ctx}: {}",
        out.stderr
    );

    // HEARTBEAT.md: the original, or only marker bytes changed.
    let crashed = env.read_bytes("HEARTBEAT.md");
    let changed = marker_diff(&original, &crashed, &allowed);
    match after {
        After::Untouched => assert!(changed.is_empty(), "{ctx}: {} ticks", changed.len()),
        After::AllTicked => assert_eq!(changed, allowed, "{ctx}: not every task ticked"),
    }
    // A tick is written in place: no crash leaves a temp file.
    let temps = tick_temps(&env);
    assert!(temps.is_empty(), "{ctx}: left {temps:?}");
    // The audit: every complete line parses; only audit_torn leaves a torn last line.
    let scan = scan_audit(&env);
    assert!(scan.bad.is_empty(), "{ctx}: {:?}", scan.bad);
    assert_eq!(
        scan.tail.is_some(),
        name == "audit_torn",
        "{ctx}: tail {:?}",
        scan.tail
    );
    assert_db_ok(&env);
    let recorded_before = recorded_successes(&env);
    assert!(recorded_before.values().all(|&n| n == 1));
    let whole_before = successes(&scan.lines);
    let torn_id = scan
        .tail
        .as_deref()
        .filter(|t| t.contains("\"event\":\"task_succeeded\""))
        .and_then(task_id_in);
    // The log never shows an outcome SQLite does not know.
    let unknown_but_logged: BTreeSet<&String> = whole_before
        .keys()
        .chain(torn_id.iter())
        .filter(|id| !recorded_before.contains_key(*id))
        .collect();
    assert!(
        unknown_but_logged.is_empty(),
        "{ctx}: the log shows outcomes SQLite does not know: {unknown_but_logged:?}"
    );
    // Recorded, but without a whole outcome line: only the torn one.
    let unlogged: BTreeSet<String> = recorded_before
        .keys()
        .filter(|id| !whole_before.contains_key(*id))
        .cloned()
        .collect();
    if lost == Lost::Lines {
        assert!(
            (1..=BATCH).contains(&unlogged.len()),
            "{ctx}: {} outcomes recorded but not logged",
            unlogged.len()
        );
        assert!(
            torn_id.iter().all(|id| unlogged.contains(id)),
            "{ctx}: the torn line's task has a whole line"
        );
    } else {
        let want_unlogged: BTreeSet<String> = match lost {
            Lost::Line => torn_id.clone().into_iter().collect(),
            Lost::Nothing | Lost::Outcome | Lost::Lines => BTreeSet::new(),
        };
        assert_eq!(unlogged, want_unlogged, "{ctx}: recorded but not logged");
    }
    if lost == Lost::Line {
        assert_eq!(unlogged.len(), 1, "{ctx}: no outcome line was torn");
    }
    // `@mark`: ran (as `marks.txt` tells) but unknown to SQLite: the task in flight.
    let marked_before = mark_lines(&env);
    let ran_unknown: BTreeSet<String> = tasks
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            marked_before.contains(&i.to_string()) && !recorded_before.contains_key(&t.id)
        })
        .map(|(_, t)| t.id.clone())
        .collect();
    if tool == Tool::Mark {
        if lost == Lost::Outcome {
            let last: usize = marked_before.last().expect("a task ran").parse().unwrap();
            let in_flight: BTreeSet<String> = [tasks[last].id.clone()].into();
            assert_eq!(ran_unknown, in_flight, "{ctx}: not the task in flight");
        } else {
            assert!(ran_unknown.is_empty(), "{ctx}: {ran_unknown:?}");
        }
    }

    // The next normal run finishes the work, except a one-time task with effects outside
    // heartbeat whose outcome was lost: it may have done its work, so it is held
    // (`task_failed`, `interrupted`) and not run again by itself (docs/reference.md#at-most-once).
    let rec = env.cmd(["run", "--once", "--json"]).output();
    let run_id = rec.json()["run_id"].as_str().unwrap().to_string();
    let held: BTreeSet<String> = scan_audit(&env)
        .lines
        .iter()
        .filter(|v| {
            v["event"] == "task_failed" && v["error"] == "interrupted" && v["run_id"] == run_id
        })
        .map(|v| v["task_id"].as_str().unwrap().to_string())
        .collect();
    let want_held = if tool == Tool::Mark && lost == Lost::Outcome {
        ran_unknown.clone()
    } else {
        BTreeSet::new()
    };
    assert_eq!(held, want_held, "{ctx}: held after the crash");
    rec.code(if held.is_empty() { 0 } else { 1 });
    let rerun: BTreeSet<String> = scan_audit(&env)
        .lines
        .iter()
        .filter(|v| v["event"] == "task_succeeded" && v["run_id"] == run_id.as_str())
        .map(|v| v["task_id"].as_str().unwrap().to_string())
        .collect();
    let unknown: BTreeSet<String> = tasks
        .iter()
        .filter(|t| !recorded_before.contains_key(&t.id))
        .map(|t| t.id.clone())
        .collect();
    // It ran exactly what SQLite did not know about, but the held task.
    assert_eq!(rerun, &unknown - &held, "{ctx}");
    if !held.is_empty() {
        let check = env.cmd(["check", "--json"]).output().json();
        for t in check["tasks"].as_array().unwrap() {
            if held.contains(t["task_id"].as_str().unwrap()) {
                assert_eq!(t["decision"], "interrupted", "{ctx}: {t}");
            }
        }
        let status = env.cmd(["status", "--json"]).output().json();
        assert_eq!(
            status["interrupted"].as_array().unwrap().len(),
            held.len(),
            "{ctx}"
        );
        // A later run leaves it alone too; a person who checked releases it.
        env.cmd(["run", "--once"]).output().code(0);
        for id in &held {
            env.cmd(["reset", id.as_str()]).output().code(0);
        }
        env.cmd(["run", "--once"]).output().code(0);
    }
    let done = env.read_bytes("HEARTBEAT.md");
    assert_eq!(
        marker_diff(&original, &done, &allowed),
        allowed,
        "{ctx}: not every one-time task is ticked after the next run"
    );
    assert!(open_one_time(&md, &done).is_empty());

    let scan = scan_audit(&env);
    assert!(
        scan.tail.is_none(),
        "{ctx}: the log does not end with a newline"
    );
    let ran = successes(&scan.lines);
    for t in &tasks {
        let n = ran.get(&t.id).copied().unwrap_or(0);
        // A torn outcome line is the task's only one: it is not run again.
        let want = if unlogged.contains(&t.id) { 0 } else { 1 };
        assert_eq!(
            n, want,
            "{ctx}: task {} (line {}) has {n} whole task_succeeded lines",
            t.id, t.line
        );
    }
    assert!(ran_unknown.is_subset(&(&rerun | &held)));
    let recorded = recorded_successes(&env);
    assert_eq!(recorded.len(), count);
    assert!(recorded.values().all(|&n| n == 1), "{ctx}: {recorded:?}");
    if tool == Tool::Mark {
        // What really happened outside: each task's line once, the one in flight twice.
        let m = marks(&env);
        assert_eq!(m.len(), count, "{ctx}");
        let twice = m.values().filter(|&&n| n == 2).count();
        assert_eq!(twice, ran_unknown.len(), "{ctx}: {m:?}");
        assert!(m.values().all(|&n| n <= 2), "{ctx}: {m:?}");
    }
    assert_db_ok(&env);
}

// `@mark`: a tool with effects outside heartbeat; the strict bounds.

#[test]
fn crash_at_task_done_first_task_holds_it_until_reset() {
    crash_case(Tool::Mark, "task_done:1", After::Untouched, Lost::Outcome);
}

#[test]
fn crash_at_task_done_mid_run_holds_only_that_task_until_reset() {
    crash_case(Tool::Mark, "task_done:35", After::Untouched, Lost::Outcome);
}

/// The start of a one-time task with outside effects is recorded before its tool starts;
/// a crash before that record runs nothing, and the next run runs it once.
#[test]
fn crash_before_the_start_record_runs_nothing_and_then_once() {
    crash_case(
        Tool::Mark,
        "record_start:7",
        After::Untouched,
        Lost::Nothing,
    );
}

#[test]
fn crash_at_task_recorded_first_task_runs_nothing_twice() {
    crash_case(
        Tool::Mark,
        "task_recorded:1",
        After::Untouched,
        Lost::Nothing,
    );
}

#[test]
fn crash_at_task_recorded_mid_run_runs_nothing_twice() {
    crash_case(
        Tool::Mark,
        "task_recorded:30",
        After::Untouched,
        Lost::Nothing,
    );
}

#[test]
fn crash_at_task_recorded_last_task_only_ticks_next_time() {
    crash_case(
        Tool::Mark,
        "task_recorded:60",
        After::Untouched,
        Lost::Nothing,
    );
}

#[test]
fn crash_inside_the_sqlite_transaction_holds_only_that_task_until_reset() {
    crash_case(
        Tool::Mark,
        "sqlite_commit:20",
        After::Untouched,
        Lost::Outcome,
    );
}

#[test]
fn crash_inside_the_last_sqlite_transaction_holds_only_that_task_until_reset() {
    crash_case(
        Tool::Mark,
        "sqlite_commit:60",
        After::Untouched,
        Lost::Outcome,
    );
}

#[test]
fn crash_before_the_tick_write_leaves_the_original_and_ticks_next_time() {
    crash_case(
        Tool::Mark,
        "tick_before_write",
        After::Untouched,
        Lost::Nothing,
    );
}

#[test]
fn crash_after_the_tick_write_leaves_every_task_ticked() {
    crash_case(
        Tool::Mark,
        "tick_after_write",
        After::AllTicked,
        Lost::Nothing,
    );
}

#[test]
fn crash_tearing_run_started_runs_everything_once() {
    crash_case(Tool::Mark, "audit_torn:1", After::Untouched, Lost::Nothing);
}

#[test]
fn crash_tearing_a_task_outcome_line_runs_nothing_twice() {
    // Line 1 is run_started, lines 2..=61 the outcomes: line 20 is task 18's, written after
    // its outcome was committed.
    crash_case(Tool::Mark, "audit_torn:20", After::Untouched, Lost::Line);
}

#[test]
fn crash_tearing_a_tick_line_runs_nothing_twice() {
    // Lines 62..=121 are task_marked_done, written after the tick's fsync.
    crash_case(Tool::Mark, "audit_torn:80", After::AllTicked, Lost::Nothing);
}

// `@log` × 200: the same invariants for a tool that runs in-process.

#[test]
fn log_crash_at_task_done() {
    crash_case(Tool::Log, "task_done:1", After::Untouched, Lost::Outcome);
    crash_case(Tool::Log, "task_done:120", After::Untouched, Lost::Outcome);
}

#[test]
fn log_crash_at_task_recorded() {
    for fault in ["task_recorded:1", "task_recorded:57", "task_recorded:200"] {
        crash_case(Tool::Log, fault, After::Untouched, Lost::Nothing);
    }
}

/// Between a batch's commit and its lines: SQLite knows all of it, the log none of it.
#[test]
fn log_crash_after_a_batch_commit_runs_nothing_twice() {
    crash_case(
        Tool::Log,
        "batch_committed:1",
        After::Untouched,
        Lost::Lines,
    );
    crash_case(
        Tool::Log,
        "batch_committed:4",
        After::Untouched,
        Lost::Lines,
    );
}

/// `@log` successes waiting in a batch while a one-time `@mark` (an effect outside) starts
/// and ends: a crash loses the batch, whose tasks run once more at the next run, and never
/// runs a `@mark` twice; no line shows an outcome SQLite does not know.
#[test]
fn a_crash_with_a_batch_waiting_reruns_only_the_batch() {
    // Tasks 0..=8 and 10..=18 are `@log`, 9 and 19 `@mark`.
    let task = |i: usize| {
        if i % 10 == 9 {
            format!("- [ ] @mark {{\"n\": \"{i}\"}}")
        } else {
            format!("- [ ] @log {{\"text\": \"task {i:03}\"}}")
        }
    };
    // Before the first `@mark`'s start record, after it ran (its outcome is the 10th), and
    // inside the transaction of the `@log` batch that its outcome flushed (before its own).
    for (fault, held) in [
        ("record_start:1", false),
        ("task_done:10", true),
        ("sqlite_commit:5", true),
    ] {
        let env = Env::new(&document((0..20).map(task))).config(&format!("{FULL}{MARK_TOOL}"));
        let tasks = open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md"));
        let out = env
            .cmd(["run", "--once", "-q"])
            .env("HEARTBEAT_FAULT", fault)
            .output();
        assert_eq!(out.code, None, "{fault}: not aborted\n{}", out.stderr);
        let recorded = recorded_successes(&env);
        let logged = successes(&scan_audit(&env).lines);
        assert!(
            logged.keys().all(|id| recorded.contains_key(id)),
            "{fault}: a line without its record"
        );
        // The batch before the first `@mark` (tasks 0..=8) was not committed.
        assert!(
            tasks[..9].iter().all(|t| !recorded.contains_key(&t.id)),
            "{fault}: {recorded:?}"
        );

        let rec = env.cmd(["run", "--once", "--json"]).output();
        rec.code(if held { 1 } else { 0 });
        let scan = scan_audit(&env);
        let logged = successes(&scan.lines);
        let recorded = recorded_successes(&env);
        for (i, t) in tasks.iter().enumerate() {
            let want = usize::from(!(held && i == 9));
            assert_eq!(
                logged.get(&t.id).copied().unwrap_or(0),
                want,
                "{fault}: task {i}"
            );
            assert_eq!(
                recorded.get(&t.id).copied().unwrap_or(0),
                want,
                "{fault}: task {i}"
            );
        }
        // Each `@mark` ran once, the held one included (before the crash).
        let m = marks(&env);
        assert_eq!(m.get("9"), Some(&1), "{fault}: {m:?}");
        assert_eq!(m.get("19"), Some(&1), "{fault}: {m:?}");
        assert_db_ok(&env);
    }
}

#[test]
fn log_crash_inside_the_sqlite_transaction() {
    crash_case(
        Tool::Log,
        "sqlite_commit:30",
        After::Untouched,
        Lost::Outcome,
    );
}

#[test]
fn log_crash_around_the_tick_write() {
    crash_case(
        Tool::Log,
        "tick_before_write",
        After::Untouched,
        Lost::Nothing,
    );
    crash_case(
        Tool::Log,
        "tick_after_write",
        After::AllTicked,
        Lost::Nothing,
    );
}

#[test]
fn log_crash_tearing_audit_lines() {
    // Lines 1 and 2 are run_started and state_pruned, 3..=52 the first batch's outcomes:
    // line 40 is in that batch, line 52 its last (the lines before it are whole).
    crash_case(Tool::Log, "audit_torn:40", After::Untouched, Lost::Lines);
    crash_case(Tool::Log, "audit_torn:52", After::Untouched, Lost::Line);
    crash_case(Tool::Log, "audit_torn:250", After::AllTicked, Lost::Nothing);
}

/// The audit log (docs/reference.md#audit-log) and the harness's readers: a torn line is at most
/// the *last* line. The run after a torn write must not glue its first line onto the fragment: its
/// lines are whole.
#[test]
fn the_run_after_a_torn_audit_line_appends_whole_lines() {
    let env = Env::new(&many_tasks(5)).config(FULL);
    let out = env
        .cmd(["run", "--once", "-q"])
        .env("HEARTBEAT_FAULT", "audit_torn:3")
        .output();
    assert_eq!(out.code, None, "{}", out.stderr);
    let before = env.audit_text();
    let scan = scan_text(&before);
    let fragment = scan.tail.clone().expect("a torn last line");
    assert!(fragment.starts_with("{\"ts\":"), "{fragment}");
    assert_eq!(scan.lines.len(), 2);

    let rec = env.cmd(["run", "--once", "--json"]).output();
    rec.code(0);
    let run_id = rec.json()["run_id"].as_str().unwrap().to_string();
    let after = env.audit_text();
    // Append-only: what was there is still there, fragment included.
    assert!(after.starts_with(&before), "the log was rewritten");
    let scan = scan_text(&after);
    assert!(scan.tail.is_none(), "the log does not end with a newline");
    // The fragment may stay (on its own line); nothing else is broken.
    assert!(
        scan.bad.len() <= 1,
        "more than the torn fragment is unreadable: {:?}",
        scan.bad
    );
    for (i, bad) in &scan.bad {
        assert!(
            fragment.starts_with(bad.as_str())
                || bad.starts_with(&fragment) && bad.len() == fragment.len(),
            "line {i} is not just the old fragment: the next run's first line was glued onto it: {bad}"
        );
    }
    let started: Vec<&Value> = scan
        .lines
        .iter()
        .filter(|v| v["event"] == "run_started" && v["run_id"] == run_id.as_str())
        .collect();
    assert_eq!(
        started.len(),
        1,
        "the next run's run_started is not a whole line of its own:\n{after}"
    );
    let finished = scan
        .lines
        .iter()
        .filter(|v| v["event"] == "run_finished" && v["run_id"] == run_id.as_str())
        .count();
    assert_eq!(finished, 1);
}

/// A tick is written in place: a crash just before it leaves nothing beside HEARTBEAT.md,
/// and the next run ticks what the crashed one did not.
#[test]
fn a_crash_before_the_tick_leaves_no_file_behind_and_the_next_run_ticks() {
    let env = Env::new(&many_tasks(3)).config(FULL);
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(env.md_path()).unwrap());
    let out = env
        .cmd(["run", "--once", "-q"])
        .env("HEARTBEAT_FAULT", "tick_before_write")
        .output();
    assert_eq!(out.code, None, "{}", out.stderr);
    assert!(tick_temps(&env).is_empty());
    env.cmd(["run", "--once", "-q"]).output().code(0);
    assert!(open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md")).is_empty());
    assert!(tick_temps(&env).is_empty());
    let now = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(env.md_path()).unwrap());
    assert_eq!(now, ino, "HEARTBEAT.md is the same file");
}

// ---------------------------------------------------------------------------------------
// SIGKILL at random moments.

/// SplitMix64: a small seeded generator, so a failing iteration can be replayed.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// SIGKILL `run --once` at `iterations` random moments (seeded: `HEARTBEAT_CRASH_SEED`),
/// each in a fresh sandbox; check the invariants after each kill and after the next run.
fn kill_at_random_moments(tool: Tool, n: usize, iterations: usize) {
    let seed = std::env::var("HEARTBEAT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0001_u64);
    let mut rng = Rng(seed ^ n as u64);
    let sandbox = || match tool {
        Tool::Log => Env::new(&many_tasks(n)).config(FULL),
        Tool::Mark => Env::new(&many_marks(n)).config(&format!("{FULL}{MARK_TOOL}")),
    };

    // How long a whole run takes here (the kills spread over that, and a bit past it): the
    // faster of two runs, the first one warms caches.
    let whole = (0..2)
        .map(|_| {
            let calibrate = sandbox();
            let start = Instant::now();
            calibrate.cmd(["run", "--once", "-q"]).output().code(0);
            start.elapsed().as_micros() as u64
        })
        .min()
        .unwrap_or(1);

    let mut stats: BTreeMap<&str, usize> = BTreeMap::new();
    let mut lost_total = 0;
    for i in 0..iterations {
        let delay = rng.below(whole * 6 / 5 + 1);
        let ctx =
            format!("{tool:?}: seed {seed:#x}, iteration {i}, kill after {delay} µs of {whole}");
        let env = sandbox();
        let md = env.md_path();
        let original = env.read_bytes("HEARTBEAT.md");
        let tasks = open_one_time(&md, &original);
        let allowed: BTreeSet<usize> = tasks.iter().map(|t| t.inside).collect();

        let mut child = env.cmd(["run", "--once", "-q"]).spawn();
        std::thread::sleep(Duration::from_micros(delay));
        let _ = child.kill();
        let status = child.wait().expect("reap heartbeat");
        let out = wait_output(child, "run --once", Duration::from_secs(5));
        if status.code().is_some() {
            out.code(0);
        }

        let crashed = env.read_bytes("HEARTBEAT.md");
        let changed = marker_diff(&original, &crashed, &allowed);
        // Every line is whole but perhaps the last (a write cut short by the kill).
        let scan = scan_audit(&env);
        assert!(scan.bad.is_empty(), "{ctx}: {:?}", scan.bad);
        assert_db_ok(&env);
        let recorded_before = recorded_successes(&env);
        // Ticks are written in place, one marker byte each: a kill inside the tick leaves
        // some of them written, and each is a task that SQLite knows succeeded.
        let ticked_unknown: Vec<&String> = tasks
            .iter()
            .filter(|t| changed.contains(&t.inside) && !recorded_before.contains_key(&t.id))
            .map(|t| &t.id)
            .collect();
        assert!(ticked_unknown.is_empty(), "{ctx}: {ticked_unknown:?}");
        let audited_before = successes(&scan.lines);
        let torn_id = scan
            .tail
            .as_deref()
            .filter(|t| t.contains("\"event\":\"task_succeeded\""))
            .and_then(task_id_in);
        if scan.tail.is_some() {
            *stats.entry("a torn last line").or_insert(0) += 1;
        }
        // The log never shows an outcome SQLite does not know.
        let unknown_but_logged: BTreeSet<&String> = audited_before
            .keys()
            .chain(torn_id.iter())
            .filter(|id| !recorded_before.contains_key(*id))
            .collect();
        assert!(
            unknown_but_logged.is_empty(),
            "{ctx}: {unknown_but_logged:?}"
        );
        // Recorded but with no whole outcome line (killed between the commit and the line):
        // at most the task in flight, or the batch in flight for `@log`; a torn outcome line
        // is one of theirs.
        let unlogged: BTreeSet<String> = recorded_before
            .keys()
            .filter(|id| !audited_before.contains_key(*id))
            .cloned()
            .collect();
        let most = if tool == Tool::Log { BATCH } else { 1 };
        assert!(unlogged.len() <= most, "{ctx}: {unlogged:?}");
        if let Some(id) = &torn_id {
            assert!(unlogged.contains(id), "{ctx}: {unlogged:?}");
        }
        lost_total += unlogged.len();
        let phase = if status.code().is_some() {
            "finished before the kill"
        } else if !changed.is_empty() && changed != allowed {
            "killed inside the tick (some markers written)"
        } else if changed == allowed {
            "killed after the tick"
        } else if recorded_before.is_empty() {
            "killed before any task was recorded"
        } else if recorded_before.len() == n {
            "killed after the last outcome"
        } else {
            "killed mid-run"
        };
        *stats.entry(phase).or_insert(0) += 1;

        let lines_before = scan.lines.len();
        let rec = env.cmd(["run", "--once", "-q"]).output();
        // A task with outside effects killed in flight is held, not run again by itself
        // (docs/reference.md#at-most-once): the run says so (exit 1); a person releases it after
        // checking.
        let held: Vec<String> = scan_audit(&env).lines[lines_before..]
            .iter()
            .filter(|v| v["event"] == "task_failed" && v["error"] == "interrupted")
            .map(|v| v["task_id"].as_str().unwrap().to_string())
            .collect();
        assert!(held.len() <= 1, "{ctx}: {held:?}");
        assert!(tool == Tool::Mark || held.is_empty(), "{ctx}: {held:?}");
        rec.code(if held.is_empty() { 0 } else { 1 });
        if !held.is_empty() {
            *stats.entry("held as interrupted").or_insert(0) += 1;
            env.cmd(["reset", held[0].as_str()]).output().code(0);
            env.cmd(["run", "--once", "-q"]).output().code(0);
        }
        let done = env.read_bytes("HEARTBEAT.md");
        assert_eq!(marker_diff(&original, &done, &allowed), allowed, "{ctx}");
        let torn_before: Option<String> = scan.tail.as_ref().map(|t| t.chars().take(300).collect());
        let scan = scan_audit(&env);
        // A SIGKILL can cut a write between two pages: that torn line stays, on a line of its
        // own (the next run starts a new line), and is the only line that does not parse.
        let bad: Vec<&String> = scan.bad.iter().map(|(_, line)| line).collect();
        assert!(
            bad.is_empty() || (bad.len() == 1 && torn_before.as_ref() == Some(bad[0])),
            "{ctx}: {bad:?}"
        );
        assert!(scan.tail.is_none(), "{ctx}");
        let ran = successes(&scan.lines);
        for t in &tasks {
            let n = ran.get(&t.id).copied().unwrap_or(0);
            // Recorded before its line was written: that line is missing (or torn) for good.
            let want = if unlogged.contains(&t.id) { 0 } else { 1 };
            assert_eq!(n, want, "{ctx}: task {} has {n} outcome lines", t.id);
        }
        let recorded = recorded_successes(&env);
        assert_eq!(recorded.len(), n, "{ctx}");
        assert!(recorded.values().all(|&n| n == 1), "{ctx}");
        if tool == Tool::Mark {
            // What really happened outside: at most one task ran twice — the one in flight
            // at the kill, killed between the tool's exit and its commit, held, then
            // released by a person — and it was unknown to SQLite and to the log.
            let m = marks(&env);
            assert_eq!(m.len(), n, "{ctx}");
            assert!(m.values().all(|&k| k <= 2), "{ctx}: {m:?}");
            let twice: BTreeSet<String> = tasks
                .iter()
                .enumerate()
                .filter(|(i, _)| m.get(&i.to_string()) == Some(&2))
                .map(|(_, t)| t.id.clone())
                .collect();
            assert!(twice.len() <= 1, "{ctx}: {twice:?}");
            assert!(
                twice.is_disjoint(&unlogged),
                "{ctx}: {unlogged:?} {twice:?}"
            );
            assert!(
                twice.iter().all(|id| !recorded_before.contains_key(id)),
                "{ctx}"
            );
        }
        assert_db_ok(&env);
    }
    eprintln!(
        "kill -9, {tool:?} × {n} ({whole} µs a run), {iterations} kills: {stats:?}; {lost_total} outcome lines lost"
    );
}

#[test]
fn kill_9_at_random_moments_during_300_log_tasks() {
    kill_at_random_moments(Tool::Log, 300, if soak() { 100 } else { 10 });
}

#[test]
fn kill_9_at_random_moments_during_80_tasks_with_outside_effects() {
    kill_at_random_moments(Tool::Mark, 80, if soak() { 60 } else { 6 });
}

// ---------------------------------------------------------------------------------------
// Approved work interrupted (docs/reference.md#approvals: a process that dies mid-run leaves it
// running; the next run marks it failed, interrupted).

/// A one-time task of an `ask` tool whose every run appends a line to `marker.txt`.
fn approval_env() -> (Env, PathBuf) {
    let env = Env::empty();
    let marker = env.path("marker.txt");
    env.write(
        "HEARTBEAT.md",
        format!(
            "## One-time\n\n- [ ] @append_file {{\"path\": {}, \"text\": \"ran\\n\"}}\n",
            json_str(&marker.display().to_string())
        ),
    );
    let env = env.config("autonomy = \"cautious\"\n");
    (env, marker)
}

fn marker_lines(marker: &Path) -> usize {
    std::fs::read_to_string(marker)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn approvals_json(env: &Env) -> Vec<Value> {
    let out = env.cmd(["approvals", "--state", "all", "--json"]).output();
    out.code(0);
    out.json().as_array().cloned().unwrap_or_default()
}

/// Abort `approve 1` at `fault`; returns the env after the recovery run and its output.
fn interrupted_approval(fault: &str, ran_before_crash: usize) -> (Env, PathBuf, Output) {
    let (env, marker) = approval_env();
    env.run_once(NOW).code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));

    let out = env
        .cmd(["approve", "1"])
        .user("alice")
        .env("HEARTBEAT_FAULT", fault)
        .output();
    assert_eq!(out.code, None, "{fault}: not aborted: {}", out.stderr);
    assert!(out.stderr.contains(&format!("fault point {fault} reached")));
    assert_eq!(env.approval_state(1).as_deref(), Some("running"));
    assert_eq!(marker_lines(&marker), ran_before_crash);
    let scan = scan_audit(&env);
    assert!(scan.bad.is_empty() && scan.tail.is_none(), "{scan:?}");
    assert_db_ok(&env);

    let rec = env.run_once("2026-05-01T10:05:00Z");
    rec.code(1);
    assert!(rec.stdout.contains("interrupted"), "{}", rec.stdout);
    let row = env.approval(1);
    assert_eq!(row["state"], "failed", "{row:#}");
    assert_eq!(row["reason"], "interrupted", "{row:#}");
    let failed: Vec<Value> = env
        .events("task_failed")
        .into_iter()
        .filter(|v| v["approval_id"] == 1)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["error"], "interrupted");
    assert_eq!(
        marker_lines(&marker),
        ran_before_crash,
        "{fault}: ran again"
    );
    (env, marker, rec)
}

/// After the tool ran, more runs and another `approve 1` never run it again.
fn never_again(env: &Env, marker: &Path, lines: usize) {
    for (i, now) in ["2026-05-01T10:10:00Z", "2026-05-01T11:00:00Z"]
        .into_iter()
        .enumerate()
    {
        let out = env.run_once(now);
        out.no_panic();
        assert_eq!(marker_lines(marker), lines, "run {i} ran it again");
    }
    let again = env.cmd(["approve", "1"]).user("bob").output();
    again.code(2);
    assert!(again.stderr.starts_with("heartbeat: "), "{}", again.stderr);
    assert_eq!(marker_lines(marker), lines, "approve 1 ran it again");
    assert_eq!(env.approval_state(1).as_deref(), Some("failed"));
    assert_eq!(
        env.events("task_failed")
            .iter()
            .filter(|v| v["approval_id"] == 1)
            .count(),
        1,
        "the interruption is reported once"
    );
}

#[test]
fn approval_aborted_after_its_claim_fails_as_interrupted_and_never_runs() {
    let (env, marker, _) = interrupted_approval("approval_claimed", 0);
    never_again(&env, &marker, 0);
    // The tool never ran: the task is still open and needs a person again. Whatever newer
    // approval exists for it is waiting (pending), never approved or running by itself.
    assert!(
        !open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md")).is_empty(),
        "an approval that never ran ticked its task"
    );
    for a in approvals_json(&env).iter().filter(|a| a["id"] != 1) {
        assert_eq!(a["state"], "pending", "{a:#}");
    }
    assert!(env.events("task_succeeded").is_empty());
}

#[test]
fn approval_aborted_after_the_tool_ran_fails_as_interrupted_and_never_runs_again() {
    // Between the tool's exit and the commit of its outcome: nobody knows how it went.
    let (env, marker, _) = interrupted_approval("task_done", 1);
    never_again(&env, &marker, 1);
    // The task is still open: what runs it again is a person's new approval.
    assert!(
        !open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md")).is_empty(),
        "an approval whose outcome is unknown ticked its task"
    );
    for a in approvals_json(&env).iter().filter(|a| a["id"] != 1) {
        assert_eq!(a["state"], "pending", "{a:#}");
    }
    assert!(env.events("task_succeeded").is_empty());
}

#[test]
fn approval_aborted_after_its_outcome_was_recorded_keeps_it_and_never_runs_again() {
    let (env, marker) = approval_env();
    env.run_once(NOW).code(0);
    let out = env
        .cmd(["approve", "1"])
        .user("alice")
        .env("HEARTBEAT_FAULT", "task_recorded")
        .output();
    assert_eq!(out.code, None, "not aborted: {}", out.stderr);
    // The history row and the approval's outcome are one commit: never one without the other.
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(marker_lines(&marker), 1);
    assert_db_ok(&env);

    let rec = env.run_once("2026-05-01T10:05:00Z");
    rec.code(0);
    assert!(!rec.stdout.contains("interrupted"), "{}", rec.stdout);
    let again = env.cmd(["approve", "1"]).user("bob").output();
    again.code(2);
    assert_eq!(marker_lines(&marker), 1, "ran again");
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    // The one-time task is ticked by the next run, without running it again.
    let md = env.read_bytes("HEARTBEAT.md");
    assert!(open_one_time(&env.md_path(), &md).is_empty(), "not ticked");
    assert_eq!(approvals_json(&env).len(), 1, "{:#?}", approvals_json(&env));
    assert_eq!(env.events("task_succeeded").len(), 1);
    assert!(env.events("task_failed").is_empty());
    assert_eq!(env.events("task_marked_done").len(), 1);
}

// ---------------------------------------------------------------------------------------
// Concurrency: five `run --once`, two `approve` and a daemon on one state dir at once.

const BIG: &str = r#"
autonomy = "cautious"
max_tasks_per_run = 0
concurrency = 3

[tools.big]
# One line to its own marker file per run, then 100 KB of output.
command = ["sh", "-c", "echo ran >> \"$0\"; head -c 100000 /dev/zero | tr '\\0' x", "{mark}"]
approval = "auto"
"#;

fn concurrency_md(
    env: &Env,
    one_time_logs: usize,
    one_time_bigs: usize,
    with_rest: bool,
) -> String {
    let mark = |name: &str| json_str(&env.path(&format!("marks/{name}.txt")).display().to_string());
    let mut s =
        String::from("# Heartbeat\n\n## Recurring\n\n- [ ] @log {\"text\": \"every run\"}\n");
    s.push_str(&format!("- [ ] @big {{\"mark\": {}}}\n", mark("recurring")));
    s.push_str("\n## One-time\n\n");
    for name in ["approved-a", "approved-b"] {
        s.push_str(&format!(
            "- [ ] @append_file {{\"path\": {}, \"text\": \"ran\\n\"}}\n",
            mark(name)
        ));
    }
    if with_rest {
        for i in 0..one_time_logs {
            s.push_str(&format!("- [ ] @log {{\"text\": \"once {i}\"}}\n"));
        }
        for i in 0..one_time_bigs {
            s.push_str(&format!(
                "- [ ] @big {{\"mark\": {}}}\n",
                mark(&format!("big-{i}"))
            ));
        }
    }
    s
}

fn concurrency_round(round: usize) {
    let env = Env::empty().config(BIG);
    std::fs::create_dir_all(env.path("marks")).unwrap();
    let (logs, bigs) = (40, 6);
    // First the two approvals, queued by a run of their own.
    env.write("HEARTBEAT.md", concurrency_md(&env, logs, bigs, false));
    env.run_once(NOW).code(0);
    let pending: Vec<i64> = approvals_json(&env)
        .iter()
        .filter(|a| a["state"] == "pending")
        .map(|a| a["id"].as_i64().unwrap())
        .collect();
    assert_eq!(pending, vec![1, 2]);
    // Then the whole file: the approved tasks keep their ids.
    env.write("HEARTBEAT.md", concurrency_md(&env, logs, bigs, true));
    let md = env.md_path();
    let original = env.read_bytes("HEARTBEAT.md");
    let tasks = tasks_in(&md, &original);
    let one_time: Vec<&Seen> = tasks
        .iter()
        .filter(|t| t.section == Section::OneTime)
        .collect();
    let allowed: BTreeSet<usize> = one_time.iter().map(|t| t.inside).collect();

    let daemon = env.cmd(["daemon", "--every", "1s"]).spawn_guarded();
    // Both approves at once, the runs spread over a second and a half (some find the lock
    // held, some run between the daemon's ticks).
    let mut children = Vec::new();
    for user in ["alice", "bob"] {
        children.push((
            format!("approve 1 2 as {user}"),
            env.cmd(["approve", "1", "2"]).user(user).spawn(),
        ));
    }
    for i in 0..5 {
        children.push((
            format!("run --once #{i}"),
            env.cmd(["run", "--once"]).spawn(),
        ));
        // In pairs: two at the same moment, then a pause.
        if i % 2 == 1 {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let mut codes = Vec::new();
    for (what, child) in children {
        let out = wait_output(child, &what, Duration::from_secs(60));
        out.no_panic();
        let ok = if what.starts_with("approve") {
            // Decided and ran (0), or found them already decided by the other (2).
            matches!(out.code, Some(0 | 2))
        } else {
            out.code == Some(0)
        };
        assert!(ok, "{what}: {:?}\n{}\n{}", out.code, out.stdout, out.stderr);
        if !out.stderr.is_empty() {
            assert!(
                out.stderr.lines().all(|l| l.starts_with("heartbeat: ")),
                "{what}: {}",
                out.stderr
            );
        }
        codes.push((what, out.code));
    }
    // The daemon finishes whatever is left; then it stops cleanly.
    wait_until(
        "every one-time task ticked",
        Duration::from_secs(30),
        || open_one_time(&md, &env.read_bytes("HEARTBEAT.md")).is_empty(),
    );
    std::thread::sleep(Duration::from_millis(1200));
    daemon.signal(Signal::SIGTERM);
    let out = daemon.finish(Duration::from_secs(20));
    out.code(0);

    // No interleaved or torn lines.
    let lines = env.audit();
    // The file: only markers changed, every one-time task ticked.
    let done = env.read_bytes("HEARTBEAT.md");
    assert_eq!(marker_diff(&original, &done, &allowed), allowed);
    // Exactly once: every one-time task succeeded once, its marker has one line.
    let ran = successes(&lines);
    for t in &one_time {
        assert_eq!(
            ran.get(&t.id),
            Some(&1),
            "round {round}: task at line {} ran {:?} times",
            t.line,
            ran.get(&t.id)
        );
    }
    for name in ["approved-a", "approved-b"]
        .into_iter()
        .map(String::from)
        .chain((0..bigs).map(|i| format!("big-{i}")))
    {
        assert_eq!(
            marker_lines(&env.path(&format!("marks/{name}.txt"))),
            1,
            "round {round}: {name}"
        );
    }
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(env.approval_state(2).as_deref(), Some("succeeded"));
    // The recurring big task: one marker line per recorded success, the output cut in the log.
    let recurring_big = tasks
        .iter()
        .find(|t| t.section == Section::Recurring && t.line == 6)
        .expect("the recurring @big task");
    let big_lines: Vec<&Value> = lines
        .iter()
        .filter(|v| v["event"] == "task_succeeded" && v["task_id"] == recurring_big.id.as_str())
        .collect();
    assert!(!big_lines.is_empty());
    assert_eq!(
        marker_lines(&env.path("marks/recurring.txt")),
        big_lines.len()
    );
    for v in &big_lines {
        let output = v["output"].as_str().unwrap();
        assert!(
            output.len() <= 4096 + 64 && output.contains("more bytes"),
            "{}",
            output.len()
        );
    }
    // No lost rows: per run, the outcome lines and the task_runs rows agree, and every run
    // that started was recorded and finished.
    let db = env.db_rw();
    let mut rows: HashMap<String, usize> = HashMap::new();
    let mut stmt = db
        .prepare("SELECT run_id, COUNT(*) FROM task_runs GROUP BY run_id")
        .unwrap();
    for r in stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap()
    {
        let (id, n) = r.unwrap();
        rows.insert(id, n as usize);
    }
    let mut audited: HashMap<String, usize> = HashMap::new();
    for v in lines
        .iter()
        .filter(|v| v["event"] == "task_succeeded" || v["event"] == "task_failed")
    {
        *audited
            .entry(v["run_id"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(
        rows, audited,
        "round {round}: task_runs and the audit disagree"
    );
    assert!(
        env.events("task_failed").is_empty(),
        "{:#?}",
        env.events("task_failed")
    );
    let started: BTreeSet<String> = lines
        .iter()
        .filter(|v| v["event"] == "run_started")
        .map(|v| v["run_id"].as_str().unwrap().to_string())
        .collect();
    let finished: BTreeSet<String> = lines
        .iter()
        .filter(|v| v["event"] == "run_finished")
        .map(|v| v["run_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(started, finished, "a run started and never finished");
    let mut stmt = db
        .prepare("SELECT run_id FROM runs WHERE finished_at IS NOT NULL")
        .unwrap();
    let in_db: BTreeSet<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        in_db, started,
        "round {round}: runs table and audit disagree"
    );
    assert_db_ok(&env);
    let skipped = env
        .events("run_skipped")
        .iter()
        .filter(|v| v["reason"] == "locked")
        .count();
    eprintln!(
        "concurrency round {round}: {} runs, {skipped} skipped as locked, exits {codes:?}",
        started.len()
    );
}

#[test]
fn runs_approves_and_a_daemon_at_once_keep_lines_rows_and_exactly_once() {
    let rounds = if soak() { 10 } else { 1 };
    for round in 0..rounds {
        concurrency_round(round);
    }
}

/// A task whose run died mid-way is said at the next run as `task_failed` with reason
/// `interrupted` (error `interrupted` as before), and `run --once --json` reports it
/// `interrupted`, counted among the failures.
#[test]
fn an_interrupted_task_is_audited_with_its_reason_and_reported_interrupted() {
    let (env, _marker) = approval_env();
    env.run_once(NOW).code(0);
    let out = env
        .cmd(["approve", "1"])
        .user("alice")
        .env("HEARTBEAT_FAULT", "task_done")
        .output();
    assert_eq!(out.code, None, "not aborted: {}", out.stderr);

    let rec = env
        .cmd(["run", "--once", "--json"])
        .now("2026-05-01T10:05:00Z")
        .output();
    rec.code(1);
    let doc = rec.json();
    let lost: Vec<&Value> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["approval_id"] == 1)
        .collect();
    assert_eq!(lost.len(), 1, "{doc:#}");
    assert_eq!(lost[0]["outcome"], "interrupted", "{doc:#}");
    assert_eq!(lost[0]["trigger"], "schedule", "{doc:#}");
    assert_eq!(doc["failed"], 1, "{doc:#}");
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["reason"], "interrupted", "{}", failed[0]);
    assert_eq!(failed[0]["error"], "interrupted", "{}", failed[0]);
    assert_eq!(failed[0]["trigger"], "schedule", "{}", failed[0]);
    let finished = env.events("run_finished");
    assert_eq!(finished.last().unwrap()["failed"], 1);
}
