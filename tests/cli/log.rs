//! `heartbeat log` (docs/reference.md#audit-log): filters, `--json` as stored, the human format,
//! damaged lines, following a growing (or rotated) log, and a big log read as a stream.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// A config that fixes the zone (for the human times) and lets `@fail` fail on its own.
const CONFIG: &str = r#"timezone = "Europe/Berlin"

[tools.fail]
command = ["sh", "-c", "echo boom; exit 1"]
approval = "auto"
"#;

/// One success, one failure, one approval request.
const MD: &str = "## Recurring\n\
                  - [ ] @log {\"text\": \"hi\"}\n\
                  - [ ] @fail {}\n\
                  - [ ] @shell {\"cmd\": \"true\"}\n";

fn env() -> Env {
    Env::new(MD).config(CONFIG)
}

/// `log` with these arguments; exit 0 expected.
#[track_caller]
fn log(env: &Env, args: &[&str]) -> Output {
    let out = env.cmd(["log"]).args(args).output();
    out.code(0);
    out
}

/// `log --json` with these arguments, parsed line by line.
#[track_caller]
fn log_json(env: &Env, args: &[&str]) -> Vec<Value> {
    let out = log(env, &[&["--json"], args].concat());
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn names(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|v| v["event"].as_str().unwrap()).collect()
}

/// A run at `now`; its run id.
#[track_caller]
fn run_at(env: &Env, now: &str) -> String {
    let out = env.run_with(now, &["--json"]);
    out.no_panic();
    out.json()["run_id"].as_str().expect("run_id").to_string()
}

/// Append bytes to the audit log with one `write`, as heartbeat does.
fn append(env: &Env, bytes: &[u8]) {
    fs::create_dir_all(env.state()).unwrap();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(env.audit_path())
        .unwrap();
    assert_eq!(f.write(bytes).unwrap(), bytes.len());
}

fn line(ts: &str, event: &str, rest: &str) -> String {
    format!("{{\"ts\":\"{ts}\",\"event\":\"{event}\"{rest}}}\n")
}

#[test]
fn a_missing_log_prints_nothing_and_creates_nothing() {
    let env = env();
    let out = log(&env, &[]);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr, "");
    assert!(!env.exists("state"), "log must not create the state dir");
    assert_eq!(log(&env, &["--json", "--event", "task_failed"]).stdout, "");
}

#[test]
fn json_prints_the_stored_lines_byte_for_byte() {
    let env = env();
    run_at(&env, NOW);
    // A line heartbeat would not write, but valid: other spacing, escapes, key order.
    append(
        &env,
        b"{ \"event\" : \"hand_written\", \"ts\": \"2026-05-01T10:30:00Z\", \"s\": \"\\u00e9\\t\" }\n",
    );
    let stored = env.audit_text();
    assert_eq!(log(&env, &["--json"]).stdout, stored);
    let failed: String = stored
        .lines()
        .filter(|l| l.contains("\"event\":\"task_failed\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!failed.is_empty());
    assert_eq!(
        log(&env, &["--json", "--event", "task_failed"]).stdout,
        failed
    );
    let hand = log(&env, &["--json", "--event", "hand_written"]);
    assert_eq!(
        hand.stdout,
        "{ \"event\" : \"hand_written\", \"ts\": \"2026-05-01T10:30:00Z\", \"s\": \"\\u00e9\\t\" }\n"
    );
    assert!(
        hand.stderr.contains("hand_written"),
        "a hint: {}",
        hand.stderr
    );
}

#[test]
fn each_filter_alone_and_combined() {
    let env = env();
    let r1 = run_at(&env, NOW);
    let r2 = run_at(&env, "2026-05-01T11:00:00Z");
    assert_ne!(r1, r2);
    let all = env.audit();
    let log_task = env.events("task_succeeded")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let shell_task = env.events("approval_requested")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();

    // No filter: everything.
    assert_eq!(log_json(&env, &[]).len(), all.len());

    // --event, once and repeated.
    let ok = log_json(&env, &["--event", "task_succeeded"]);
    assert_eq!(names(&ok), ["task_succeeded", "task_succeeded"]);
    let two = log_json(&env, &["--event", "run_started", "--event", "run_finished"]);
    assert_eq!(
        names(&two),
        ["run_started", "run_finished", "run_started", "run_finished"]
    );

    // --task: the full id, a prefix (any case), and too short a prefix is refused.
    let by_task = log_json(&env, &["--task", &log_task]);
    assert_eq!(by_task.len(), 2);
    assert!(by_task.iter().all(|v| v["task_id"] == log_task.as_str()));
    let upper = log_task[..6].to_ascii_uppercase();
    assert_eq!(log_json(&env, &["--task", &upper]), by_task);
    let shell = log_json(&env, &["--task", &shell_task]);
    assert!(names(&shell).contains(&"approval_requested"), "{shell:?}");
    assert!(shell.iter().all(|v| v["task_id"] == shell_task.as_str()));
    let short = env.cmd(["log", "--task", "abc"]).output();
    short.code(2);
    assert!(short.stderr.contains("--task"), "{}", short.stderr);

    // --run: every line of that run, and nothing else; a prefix works too.
    let run2 = log_json(&env, &["--run", &r2]);
    let expected: Vec<&Value> = all.iter().filter(|v| v["run_id"] == r2.as_str()).collect();
    assert_eq!(run2.iter().collect::<Vec<_>>(), expected);
    assert_eq!(names(&run2)[0], "run_started");
    assert_eq!(log_json(&env, &["--run", &r2[..6]]), run2);
    assert!(log_json(&env, &["--run", "nosuchrun"]).is_empty());

    // Combined: all must match.
    let one = log_json(&env, &["--run", &r2, "--event", "task_succeeded"]);
    assert_eq!(names(&one), ["task_succeeded"]);
    assert_eq!(one[0]["run_id"], r2.as_str());
    let one = log_json(
        &env,
        &["--task", &log_task, "--since", "2026-05-01T10:30:00Z"],
    );
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["run_id"], r2.as_str());
    assert!(
        log_json(
            &env,
            &[
                "--run",
                &r1,
                "--task",
                &shell_task,
                "--event",
                "run_started"
            ]
        )
        .is_empty()
    );

    // An event heartbeat never writes: nothing, exit 0, and a hint.
    let none = log(&env, &["--event", "task_succeded"]);
    assert_eq!(none.stdout, "");
    assert!(
        none.stderr.contains("did you mean task_succeeded?"),
        "{}",
        none.stderr
    );
    // A real event name gives no hint.
    assert_eq!(log(&env, &["--event", "task_tripped"]).stderr, "");
}

#[test]
fn since_takes_a_duration_back_from_now_or_a_time() {
    let env = env();
    let r8 = run_at(&env, "2026-05-01T08:00:00Z");
    let r9 = run_at(&env, "2026-05-01T09:00:00Z");
    let r10 = run_at(&env, "2026-05-01T10:00:00Z");
    let runs = |lines: &[Value]| {
        let mut ids: Vec<String> = lines
            .iter()
            .map(|v| v["run_id"].as_str().unwrap_or("-").to_string())
            .collect();
        ids.dedup();
        ids
    };
    let want = |ids: &[&String]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let at = |now: &str, since: &str| {
        let out = env
            .cmd(["log", "--json", "--event", "run_started", "--since", since])
            .now(now)
            .output();
        out.code(0);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    // A duration counts back from --now; the bound is inclusive.
    assert_eq!(runs(&at("2026-05-01T10:00:00Z", "90m")), want(&[&r9, &r10]));
    assert_eq!(runs(&at("2026-05-01T10:00:00Z", "1h")), want(&[&r9, &r10]));
    assert_eq!(runs(&at("2026-05-01T10:00:00Z", "59m")), want(&[&r10]));
    assert_eq!(
        runs(&at("2026-05-01T12:00:00Z", "1day")),
        want(&[&r8, &r9, &r10])
    );
    assert!(at("2026-05-01T12:00:00Z", "1h").is_empty());
    // An RFC 3339 time, in any offset.
    assert_eq!(runs(&at(NOW, "2026-05-01T09:00:00Z")), want(&[&r9, &r10]));
    assert_eq!(
        runs(&at(NOW, "2026-05-01T11:00:00+02:00")),
        want(&[&r9, &r10])
    );
    assert_eq!(runs(&at(NOW, "2026-05-01T09:00:00.001Z")), want(&[&r10]));
    // A line with some other ts format is compared by time too.
    append(
        &env,
        line("2026-05-01T12:30:00+02:00", "run_started", "").as_bytes(),
    );
    assert_eq!(at(NOW, "2026-05-01T10:29:59Z").len(), 1);
    assert!(at(NOW, "2026-05-01T10:30:00.001Z").is_empty());
}

#[test]
fn a_bad_since_exits_2() {
    let env = env();
    run_at(&env, NOW);
    let out = env.cmd(["log", "--since", "yesterday-ish"]).output();
    out.code(2);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with(
            "heartbeat: --since: \"yesterday-ish\" is not a time: expected a duration"
        ),
        "{out:?}"
    );
}

#[test]
fn human_lines_show_what_happened_in_the_configured_zone() {
    let env = env();
    let run = run_at(&env, NOW);
    env.cmd(["approve", "1"])
        .now("2026-05-01T10:05:00Z")
        .user("ann")
        .output()
        .code(0);
    append(
        &env,
        format!(
            "{}{}{}",
            line(
                "2026-05-01T10:10:00.000Z",
                "run_skipped",
                ",\"run_id\":\"0123456789ab\",\"reason\":\"outside_active_hours\",\"next_active\":\"2026-05-02T06:00:00.000Z\""
            ),
            line(
                "2026-05-01T10:11:00.000Z",
                "notification_failed",
                ",\"channel\":\"telegram\",\"chat_id\":123,\"kind\":\"summary\",\"error\":\"Forbidden: bot was blocked\",\"queued\":true"
            ),
            line(
                "2026-05-01T10:12:00.000Z",
                "something_new",
                ",\"n\":1,\"s\":\"two words\",\"t\":\"x\",\"gone\":null"
            ),
        )
        .as_bytes(),
    );
    let out = log(&env, &[]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        env.audit().len(),
        "one line per event:\n{}",
        out.stdout
    );
    let find = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{}", out.stdout))
            .to_string()
    };
    let started = find("run_started");
    assert!(
        started.starts_with(&format!(
            "2026-05-01 12:00:00 CEST  run_started  run {run}  once, autonomy cautious, 1 file, pid {}",
            env.events("run_started")[0]["pid"]
        )),
        "{started}"
    );
    let ok = find("task_succeeded  @log");
    assert!(
        ok.starts_with("2026-05-01 12:00:00 CEST  task_succeeded  @log HEARTBEAT.md:2  hi ("),
        "{ok}"
    );
    assert!(ok.ends_with(" ms)"), "{ok}");
    let failed = find("task_failed");
    assert!(
        failed.starts_with(
            "2026-05-01 12:00:00 CEST  task_failed  @fail HEARTBEAT.md:3  exit status 1: boom ("
        ),
        "{failed}"
    );
    assert_eq!(
        find("approval_requested"),
        "2026-05-01 12:00:00 CEST  approval_requested  #1 @shell HEARTBEAT.md:4  {\"cmd\":\"true\"}"
    );
    assert!(
        find("run_finished").starts_with(
            "2026-05-01 12:00:00 CEST  run_finished  1 succeeded, 1 failed, 1 queued ("
        ),
        "{}",
        out.stdout
    );
    assert_eq!(
        find("approval_approved"),
        "2026-05-01 12:05:00 CEST  approval_approved  #1 by cli:ann"
    );
    assert!(
        find("task_succeeded  @shell")
            .starts_with("2026-05-01 12:05:00 CEST  task_succeeded  @shell HEARTBEAT.md:4 #1  ("),
        "{}",
        out.stdout
    );
    assert_eq!(
        find("run_skipped"),
        "2026-05-01 12:10:00 CEST  run_skipped  outside_active_hours, next active 2026-05-02 08:00 CEST"
    );
    assert_eq!(
        find("notification_failed"),
        "2026-05-01 12:11:00 CEST  notification_failed  telegram 123: Forbidden: bot was blocked (summary, kept to retry)"
    );
    assert_eq!(
        find("something_new"),
        "2026-05-01 12:12:00 CEST  something_new  n=1 s=\"two words\" t=x"
    );
    // Filters apply to the human output the same way.
    let failed_only = log(&env, &["--event", "task_failed"]);
    assert_eq!(failed_only.stdout, format!("{failed}\n"));
}

#[test]
fn human_output_escapes_control_characters() {
    let env = env();
    let esc = "\u{1b}";
    let text = format!(
        "{}{}{}",
        line(
            "2026-05-01T10:00:00.000Z",
            "task_succeeded",
            ",\"run_id\":\"r\",\"task_id\":\"0123456789ab\",\"file\":\"/x/H\\u001b[2J.md\",\"line\":2,\"tool\":\"log\",\"output\":\"red \\u001b[31mtext\\nsecond line\\r\\u0007\",\"duration_ms\":3"
        ),
        line(
            "2026-05-01T10:00:01.000Z",
            "weird\\u001b]0;title\\u0007",
            ",\"k\\u001b\":\"v\\u001b[1m\",\"multi\":\"a\\nb\""
        ),
        line(
            "2026-05-01T10:00:02.000Z",
            "task_failed",
            ",\"tool\":\"shell\",\"error\":\"exit status 2\",\"output\":\"\\u001b[31mbad\\u009b\",\"duration_ms\":1"
        ),
    );
    append(&env, text.as_bytes());
    let out = log(&env, &[]);
    assert!(!out.stdout.contains(esc), "raw ESC in {:?}", out.stdout);
    assert!(
        !out.stdout.contains('\u{7}')
            && !out.stdout.contains('\r')
            && !out.stdout.contains('\u{9b}')
    );
    // The output's two lines follow the success's line.
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(
        lines[0].ends_with("@log /x/H\\u{1b}[2J.md:2  (3 ms)"),
        "{}",
        lines[0]
    );
    assert!(lines[1].ends_with(" red \\u{1b}[31mtext"), "{}", lines[1]);
    let lines = [lines[0], lines[3], lines[4]];
    assert!(
        lines[1].contains("weird\\u{1b}]0;title\\u{7}"),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("\\u{1b}"), "{}", lines[1]);
    assert!(
        lines[2].contains("exit status 2: \\u{1b}[31mbad\\u{9b}"),
        "{}",
        lines[2]
    );
    // --json keeps the line as stored (JSON escapes never hold raw control characters).
    assert_eq!(log(&env, &["--json"]).stdout, text);
}

#[test]
fn torn_and_garbage_lines_are_skipped() {
    let env = env();
    let a = line(
        "2026-05-01T10:00:00.000Z",
        "run_started",
        ",\"run_id\":\"aaaa11112222\"",
    );
    let b = line(
        "2026-05-01T10:00:01.000Z",
        "run_finished",
        ",\"run_id\":\"aaaa11112222\",\"succeeded\":1",
    );
    let c = line(
        "2026-05-01T10:00:02.000Z",
        "run_started",
        ",\"run_id\":\"bbbb11112222\"",
    );
    let d = line(
        "2026-05-01T10:00:03.000Z",
        "run_finished",
        ",\"run_id\":\"bbbb11112222\"",
    );
    // Cut inside the event name: what the torn part says must not hide the line after it.
    let torn = &d[..d.find("finished").unwrap()];
    // Garbage, an array, an empty line, invalid UTF-8, then a torn line continued by a whole
    // one (a crash mid-write, then the next run's first line), and a torn last line.
    let mut bytes = Vec::new();
    bytes.extend_from_slice(a.as_bytes());
    bytes.extend_from_slice(b"not json at all\n[1,2,3]\n\n\xff\xfe{\"ts\":1}\n");
    bytes.extend_from_slice(b.as_bytes());
    bytes.extend_from_slice(torn.as_bytes());
    bytes.extend_from_slice(c.as_bytes());
    bytes.extend_from_slice(torn.as_bytes());
    env.write("state/audit.jsonl", &bytes);

    let out = log(&env, &["--json"]);
    assert_eq!(out.stdout, format!("{a}{b}{c}"));
    assert_eq!(out.stderr, "");
    let human = log(&env, &[]);
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", human.stdout);
    assert!(
        lines[2].contains("run_started  run bbbb11112222"),
        "{}",
        human.stdout
    );
    assert_eq!(log(&env, &["--run", "bbbb11112222", "--json"]).stdout, c);
    assert_eq!(
        log(&env, &["--event", "run_started", "--json"]).stdout,
        format!("{a}{c}")
    );
}

/// `log -f` on a pseudo-terminal's stdin, stdout read as it comes.
fn follow(env: &Env, args: &[&str]) -> Interactive {
    env.cmd(["log", "-f"]).args(args).spawn_on_pty()
}

const WAIT: Duration = Duration::from_secs(3);

#[test]
fn follow_prints_appended_lines_and_completes_half_written_ones() {
    let env = env();
    append(
        &env,
        line(
            "2026-05-01T10:00:00.000Z",
            "run_started",
            ",\"run_id\":\"first0000000\"",
        )
        .as_bytes(),
    );
    // What is there already is shown with -n; a run is shown (--all) before it did anything.
    let mut f = follow(&env, &["-n", "10", "--all"]);
    f.expect("run_started  run first0000000\n", WAIT);

    // A whole line appended later.
    append(
        &env,
        line(
            "2026-05-01T10:00:01.000Z",
            "paused",
            ",\"until\":null,\"by\":\"cli:ann\"",
        )
        .as_bytes(),
    );
    f.expect("paused  until resumed by cli:ann\n", WAIT);

    // A line written in two halves: nothing of it before its newline, all of it after.
    let whole = line(
        "2026-05-01T10:00:02.000Z",
        "resumed",
        ",\"by\":\"cli:bob\",\"reason\":\"back\"",
    );
    let (first, second) = whole.split_at(whole.len() / 2);
    append(&env, first.as_bytes());
    assert_eq!(f.try_expect("resumed", Duration::from_millis(700)), None);
    append(&env, second.as_bytes());
    f.expect("resumed  by cli:bob: back\n", WAIT);

    send_signal(f.pid(), Signal::SIGTERM);
    let out = f.finish(WAIT);
    assert_eq!(out.code, None, "ended by SIGTERM's default action");
    assert!(
        !out.stdout.contains("{"),
        "half lines never printed raw: {}",
        out.stdout
    );
}

#[test]
fn follow_filters_and_prints_json_as_stored() {
    let env = env();
    let mut f = follow(&env, &["--json", "--event", "task_failed"]);
    // The log does not exist yet: it is waited for.
    std::thread::sleep(Duration::from_millis(300));
    let skip = line("2026-05-01T10:00:00.000Z", "run_started", "");
    let keep = line(
        "2026-05-01T10:00:01.000Z",
        "task_failed",
        ",\"error\":\"x\"",
    );
    append(&env, format!("{skip}{keep}").as_bytes());
    let got = f.expect("\n", WAIT);
    assert_eq!(got, keep);
    send_signal(f.pid(), Signal::SIGINT);
    let out = f.finish(WAIT);
    assert_eq!(out.stdout, keep);
}

#[test]
fn follow_reopens_a_truncated_or_replaced_log() {
    let env = env();
    let padding = "x".repeat(500);
    append(
        &env,
        line(
            "2026-05-01T10:00:00.000Z",
            "one",
            &format!(",\"pad\":\"{padding}\""),
        )
        .as_bytes(),
    );
    let mut f = follow(&env, &["-n", "1"]);
    f.expect("  one  pad=", WAIT);
    // Truncated in place (same inode, now shorter than what was read).
    fs::write(
        env.audit_path(),
        line("2026-05-01T10:00:01.000Z", "two", ""),
    )
    .unwrap();
    f.expect("  two\n", WAIT);
    // Replaced by a new file (rotation): the old one is read out first.
    let rotated = env.path("state/new.jsonl");
    fs::write(&rotated, line("2026-05-01T10:00:03.000Z", "four", "")).unwrap();
    append(
        &env,
        line("2026-05-01T10:00:02.000Z", "three", "").as_bytes(),
    );
    fs::rename(&rotated, env.audit_path()).unwrap();
    f.expect("  three\n", WAIT);
    f.expect("  four\n", WAIT);
    append(
        &env,
        line("2026-05-01T10:00:04.000Z", "five", "").as_bytes(),
    );
    f.expect("  five\n", WAIT);
}

#[test]
fn follow_ends_when_stdout_is_closed() {
    let env = env();
    append(&env, line("2026-05-01T10:00:00.000Z", "one", "").as_bytes());
    let mut child = env.cmd(["log", "-f", "-n", "1"]).spawn();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("  one"), "{first}");
    drop(stdout);
    let out = wait_output(child, "heartbeat log -f", WAIT);
    out.code(0);
}

#[test]
fn a_50_mb_log_is_read_as_a_stream() {
    let env = env();
    run_at(&env, NOW);
    let block = env.audit_text();
    let per_block = count_matches(&block, "\"event\":\"task_failed\"");
    assert_eq!(per_block, 1);
    let repeats = 50_000_000 / block.len() + 1;
    {
        fs::create_dir_all(env.state()).unwrap();
        let file = fs::File::create(env.audit_path()).unwrap();
        let mut w = std::io::BufWriter::new(file);
        for _ in 0..repeats {
            w.write_all(block.as_bytes()).unwrap();
        }
        w.write_all(line("2026-05-01T11:00:00.000Z", "the_end", "").as_bytes())
            .unwrap();
        w.flush().unwrap();
    }
    let size = fs::metadata(env.audit_path()).unwrap().len();
    assert!(size >= 50_000_000);

    let out = log(&env, &["--event", "task_failed"]);
    assert_eq!(out.stdout.lines().count(), repeats);

    // Memory: follow it, and once everything is read, the peak resident size of the
    // process must be far below the size of the file.
    let mut f = follow(
        &env,
        &[
            "--since",
            "2026-01-01T00:00:00Z",
            "--event",
            "the_end",
            "--event",
            "nothing_at_all",
        ],
    );
    f.expect("the_end", WAIT);
    if let Ok(status) = fs::read_to_string(format!("/proc/{}/status", f.pid())) {
        let peak_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/PID/status");
        assert!(
            peak_kb < 32 * 1024,
            "peak RSS {peak_kb} kB while reading a {size}-byte log"
        );
    }
}

/// `--event` knows every event heartbeat writes, those of retention and of held-back
/// messages too: no warning for them, and a hint for a typo.
#[test]
fn every_event_heartbeat_writes_is_known_to_event() {
    let env = env();
    for event in [
        "state_pruned",
        "audit_rotated",
        "notification_held",
        "notification_folded",
        "notification_dropped",
        "task_reset",
        "grant_revoked",
    ] {
        let out = log(&env, &["--event", event]);
        assert_eq!(out.stderr, "", "--event {event}");
    }
    let out = log(&env, &["--event", "state_prunned"]);
    assert!(
        out.stderr.contains("did you mean state_pruned?"),
        "{}",
        out.stderr
    );
}

/// A failed write to standard output is an error (exit 2: nothing ran), named as such; a
/// reader that goes away early (`log | head`) is not: exit 0, nothing on stderr.
#[test]
fn a_full_stdout_is_an_error_and_a_closed_pipe_is_not() {
    let env = env();
    run_at(&env, NOW);
    for args in [vec!["log"], vec!["log", "--json"]] {
        let out = env.cmd(args.clone()).output_to_full_disk();
        out.code(2);
        assert!(
            out.stderr.contains("heartbeat: standard output: "),
            "{args:?}: {}",
            out.stderr
        );
    }
    // A log far bigger than a pipe holds, read one line of.
    let block = env.audit_text();
    let mut big = String::new();
    while big.len() < 2_000_000 {
        big.push_str(&block);
    }
    fs::write(env.audit_path(), &big).unwrap();
    let mut child = env.cmd(["log", "--json"]).spawn();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("{\"ts\":"), "{first}");
    drop(stdout);
    let out = wait_output(child, "heartbeat log | head -1", WAIT);
    out.code(0);
    assert_eq!(out.stderr, "");
}

/// `-n N`: the last N lines that match, from every file, oldest first.
#[test]
fn n_shows_the_last_matching_lines() {
    let env = env();
    let mut all = String::new();
    for i in 0..5 {
        all.push_str(&line(
            &format!("2026-05-01T10:00:0{i}.000Z"),
            "paused",
            &format!(",\"reason\":\"r{i}\",\"by\":\"cli:ann\""),
        ));
        all.push_str(&line(
            &format!("2026-05-01T10:00:0{i}.500Z"),
            "resumed",
            ",\"by\":\"cli:ann\"",
        ));
    }
    fs::create_dir_all(env.state()).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    // The first four lines in a rotated file.
    fs::write(
        env.path("state/audit.jsonl.1"),
        format!("{}\n", lines[..4].join("\n")),
    )
    .unwrap();
    append(&env, format!("{}\n", lines[4..].join("\n")).as_bytes());
    let last3 = log(&env, &["--json", "-n", "3"]).stdout;
    assert_eq!(last3, format!("{}\n", lines[7..].join("\n")));
    let paused = log(&env, &["--json", "-n", "3", "--event", "paused"]).stdout;
    let want: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("paused"))
        .collect();
    assert_eq!(paused, format!("{}\n", want[2..].join("\n")));
    let human = log(&env, &["-n", "1", "--event", "paused"]).stdout;
    assert_eq!(human.lines().count(), 1, "{human}");
    assert!(human.contains("cli:ann: r4"), "{human}");
    assert_eq!(log(&env, &["-n", "0"]).stdout, "");
    // More than there are: all of them.
    assert_eq!(log(&env, &["--json", "-n", "100"]).stdout, all);
}

/// Runs that did nothing (started, finished, nothing counted, no line of theirs between)
/// are left out of the readable log unless `--all`; `--json` and `--run` show them.
#[test]
fn runs_that_did_nothing_are_hidden_unless_all() {
    let env = env();
    let started = |ts: &str, run: &str| line(ts, "run_started", &format!(",\"run_id\":\"{run}\""));
    let finished = |ts: &str, run: &str, ok: u32| {
        line(
            ts,
            "run_finished",
            &format!(
                ",\"run_id\":\"{run}\",\"succeeded\":{ok},\"failed\":0,\"queued\":0,\"skipped\":0,\"invalid\":0,\"duration_ms\":3"
            ),
        )
    };
    let text = [
        started("2026-05-01T10:00:00.000Z", "empty0000001"),
        finished("2026-05-01T10:00:00.010Z", "empty0000001", 0),
        started("2026-05-01T10:30:00.000Z", "busy00000001"),
        // Another process's line in the middle keeps its place.
        line(
            "2026-05-01T10:30:00.001Z",
            "paused",
            ",\"until\":null,\"by\":\"cli:ann\"",
        ),
        line(
            "2026-05-01T10:30:00.005Z",
            "task_succeeded",
            ",\"run_id\":\"busy00000001\",\"tool\":\"log\",\"output\":\"hi\"",
        ),
        finished("2026-05-01T10:30:00.010Z", "busy00000001", 1),
        started("2026-05-01T11:00:00.000Z", "empty0000002"),
        finished("2026-05-01T11:00:00.010Z", "empty0000002", 0),
        // Not finished (still running, or it died): shown.
        started("2026-05-01T11:30:00.000Z", "open00000001"),
    ]
    .concat();
    append(&env, text.as_bytes());
    let human = log(&env, &[]).stdout;
    let events: Vec<&str> = human
        .lines()
        .map(|l| l.split("  ").nth(1).unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "run_started",
            "paused",
            "task_succeeded",
            "run_finished",
            "run_started"
        ],
        "{human}"
    );
    assert!(!human.contains("empty000000"), "{human}");
    assert!(human.contains("busy00000001") && human.contains("open00000001"));
    // Filtered to run_finished: the empty runs' ends stay hidden.
    let ends = log(&env, &["--event", "run_finished"]).stdout;
    assert_eq!(ends.lines().count(), 1, "{ends}");
    // --all, --json and --run show everything asked for.
    assert_eq!(log(&env, &["--all"]).stdout.lines().count(), 9);
    assert_eq!(log(&env, &["--json"]).stdout, text);
    assert_eq!(
        log(&env, &["--run", "empty0000001"]).stdout.lines().count(),
        2
    );
    // -n counts the lines shown.
    let last = log(&env, &["-n", "2"]).stdout;
    assert_eq!(last.lines().count(), 2, "{last}");
    assert!(
        last.contains("open00000001") && last.contains("run_finished"),
        "{last}"
    );
}

/// `-f` alone starts at the end (like `tail -f`): only lines written from then on.
#[test]
fn follow_alone_starts_at_the_end() {
    let env = env();
    append(
        &env,
        line("2026-05-01T10:00:00.000Z", "old_line", "").as_bytes(),
    );
    // A line being written when it starts is skipped whole.
    append(
        &env,
        b"{\"ts\":\"2026-05-01T10:00:00.500Z\",\"event\":\"half_",
    );
    let mut f = follow(&env, &[]);
    std::thread::sleep(Duration::from_millis(500));
    append(&env, b"line\"}\n");
    append(
        &env,
        line("2026-05-01T10:00:01.000Z", "new_line", "").as_bytes(),
    );
    f.expect("  new_line\n", WAIT);
    send_signal(f.pid(), Signal::SIGTERM);
    let out = f.finish(WAIT);
    assert!(!out.stdout.contains("old_line"), "{}", out.stdout);
    assert!(!out.stdout.contains("half_line"), "{}", out.stdout);
}

/// `-f --since T` first shows the lines since T, then follows: a sidecar restarted with
/// the time it last saw re-sends nothing older.
#[test]
fn follow_with_since_first_shows_the_lines_since_then() {
    let env = env();
    append(
        &env,
        format!(
            "{}{}",
            line("2026-05-01T09:00:00.000Z", "older_line", ""),
            line("2026-05-01T10:00:00.000Z", "recent_line", "")
        )
        .as_bytes(),
    );
    let mut f = follow(&env, &["--since", "2026-05-01T09:30:00Z"]);
    f.expect("  recent_line\n", WAIT);
    append(
        &env,
        line("2026-05-01T10:00:01.000Z", "new_line", "").as_bytes(),
    );
    f.expect("  new_line\n", WAIT);
    send_signal(f.pid(), Signal::SIGTERM);
    let out = f.finish(WAIT);
    assert!(!out.stdout.contains("older_line"), "{}", out.stdout);
}

/// The log rotates twice between two looks of `log -f` (as heartbeat rotates: the file is
/// linked to `.1` after older ones shift up, and a new file takes the name): every line of
/// every file is shown, in order, none twice.
#[test]
fn follow_reads_every_file_when_the_log_rotates_twice_between_two_looks() {
    // Keeping 3 rotated files, and keeping 1 (the file it read is deleted by then).
    for keep in [3, 1] {
        follow_two_rotations(keep);
    }
}

fn follow_two_rotations(keep: usize) {
    let env = env();
    let path = env.audit_path();
    let rotated = |n: usize| env.path(&format!("state/audit.jsonl.{n}"));
    let rotate = |first: &str| {
        let _ = fs::remove_file(rotated(keep));
        for n in (1..keep).rev() {
            if rotated(n).exists() {
                fs::rename(rotated(n), rotated(n + 1)).unwrap();
            }
        }
        fs::hard_link(&path, rotated(1)).unwrap();
        let fresh = env.path("state/audit.jsonl.new");
        fs::write(&fresh, first).unwrap();
        fs::rename(&fresh, &path).unwrap();
    };
    let at = |i: usize| format!("2026-05-01T10:00:{i:02}.000Z");
    append(&env, line(&at(0), "line_00", "").as_bytes());
    let mut f = follow(&env, &["--json", "-n", "1"]);
    f.expect("line_00", WAIT);
    // Between two looks of the follower (it looks every 200 ms): lines, a rotation, lines,
    // another rotation, lines.
    let mut want = vec![line(&at(0), "line_00", "")];
    let mut i = 1;
    let mut next = |env: &Env| {
        let l = line(&at(i), &format!("line_{i:02}"), "");
        i += 1;
        append(env, l.as_bytes());
        l
    };
    want.push(next(&env));
    let first = line(&at(50), "audit_rotated", "");
    rotate(&first);
    want.push(first);
    want.push(next(&env));
    let second = line(&at(51), "audit_rotated", "");
    rotate(&second);
    want.push(second);
    want.push(next(&env));
    let last = want.last().unwrap().clone();
    f.expect(&last, WAIT);
    send_signal(f.pid(), Signal::SIGTERM);
    let out = f.finish(WAIT);
    let shown: Vec<&str> = out.stdout.lines().collect();
    let want: Vec<&str> = want.iter().map(|l| l.trim_end()).collect();
    assert_eq!(shown, want, "audit_keep = {keep}");
}
