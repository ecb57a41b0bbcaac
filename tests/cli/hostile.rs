//! Hostile input (docs/reference.md#file-format, docs/reference.md#exit-codes): pathological JSON,
//! huge files and inputs, NUL bytes, CR-only line endings, deep nesting, a corrupt database, a
//! state dir that cannot be created, a full disk under it, files that cannot be rewritten,
//! FIFOs.
//!
//! Every case: a clean `heartbeat: …` message on stderr, the documented exit code, never a
//! panic (no "panicked at", never exit 101), nothing half-written (HEARTBEAT.md unchanged or
//! changed in marker bytes only, every audit line whole).

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::crash::{assert_db_ok, marker_diff, open_one_time, scan_audit, soak, tasks_in};

const FULL: &str = "autonomy = \"full\"\nmax_tasks_per_run = 0\n";

/// The documented exit code, no panic, and stderr made only of `heartbeat: …` lines.
#[track_caller]
fn clean(out: &Output, code: i32) {
    out.code(code);
    assert_ne!(out.code, Some(101));
    for line in out.stderr.lines() {
        assert!(
            line.starts_with("heartbeat: "),
            "a stderr line that is not `heartbeat: …`: {line:?}\ncommand: {}\n{}",
            out.command,
            out.stderr
        );
    }
}

/// Every audit line is one whole JSON object (or there is no log).
#[track_caller]
fn audit_whole(env: &Env) {
    let scan = scan_audit(env);
    assert!(scan.bad.is_empty(), "{:?}", scan.bad);
    assert!(scan.tail.is_none(), "torn: {:?}", scan.tail);
}

/// Run `run --once` and assert the result: exit `code`, clean stderr, whole audit, and
/// HEARTBEAT.md changed in marker bytes of one-time tasks only. Returns the output.
#[track_caller]
fn run_clean(env: &Env, extra: &[&str], code: i32) -> Output {
    let md = env.md_path();
    let before = env.read_bytes("HEARTBEAT.md");
    let allowed: BTreeSet<usize> = std::str::from_utf8(&before)
        .map(|_| {
            open_one_time(&md, &before)
                .iter()
                .map(|t| t.inside)
                .collect()
        })
        .unwrap_or_default();
    let out = env.cmd(["run", "--once"]).args(extra).output();
    clean(&out, code);
    if let Ok(after) = fs::read(&md) {
        marker_diff(&before, &after, &allowed);
    }
    audit_whole(env);
    out
}

// ---------------------------------------------------------------------------------------
// Pathological JSON.

#[test]
fn ten_thousand_open_braces_are_an_invalid_task_not_a_crash() {
    let md = format!(
        "## One-time\n- [ ] @log {}\n- [ ] @log {{\"text\": \"fine\"}}\n",
        "{".repeat(10_000)
    );
    let env = Env::new(&md).config(FULL);
    let out = env.cmd(["check", "--json"]).output();
    clean(&out, 1);
    let doc = out.json();
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0]["line"], 2);
    assert_eq!(problems[0]["severity"], "error");

    let out = run_clean(&env, &[], 1);
    assert!(
        out.stdout.contains("INVALID   HEARTBEAT.md:2:"),
        "{}",
        out.stdout
    );
    assert_eq!(env.events("task_invalid").len(), 1);
    assert_eq!(
        env.events("task_succeeded").len(),
        1,
        "the valid task still runs"
    );
    let invalid = &env.events("task_invalid")[0];
    assert_eq!(invalid["line"], 2);
}

#[test]
fn ten_thousand_nested_objects_and_arrays_hit_the_recursion_limit_cleanly() {
    for (what, body) in [
        (
            "objects",
            format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000)),
        ),
        (
            "arrays in an object",
            format!("{{\"a\": {}1{}}}", "[".repeat(10_000), "]".repeat(10_000)),
        ),
        ("closing braces", format!("{{}}{}", "}".repeat(10_000))),
    ] {
        let env = Env::new(&format!("## One-time\n- [ ] @log {body}\n")).config(FULL);
        let out = run_clean(&env, &[], 1);
        assert!(out.stdout.contains("INVALID"), "{what}: {}", out.stdout);
        let invalid = env.events("task_invalid");
        assert_eq!(invalid.len(), 1, "{what}");
        assert!(
            invalid[0]["error"].as_str().unwrap().len() < 1000,
            "{what}: a short reason"
        );
        let out = env.cmd(["check"]).output();
        clean(&out, 1);
    }
}

#[test]
fn a_200_kb_input_runs_and_is_audited_whole() {
    let blob = "x".repeat(200 * 1024);
    let md = format!(
        "## One-time\n- [ ] @log {{\"text\": {}}}\n",
        json_str(&blob)
    );
    let env = Env::new(&md).config(FULL);
    run_clean(&env, &[], 0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    // The output is cut to 4 KiB in the log; the input is recorded as given.
    assert!(ok[0]["output"].as_str().unwrap().len() <= 4096 + 64);
    assert_eq!(
        ok[0]["input"]["text"].as_str().map(str::len),
        Some(blob.len())
    );
    assert!(open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md")).is_empty());
}

/// docs/reference.md#config-tools: a config tool gets the whole input on standard input (and in
/// `$HEARTBEAT_INPUT`). Linux refuses a single environment string over 128 KiB (MAX_ARG_STRLEN), so
/// a 200 KB input cannot go into the environment; it must still reach the tool on stdin rather than
/// keep the tool from starting at all.
#[test]
fn a_200_kb_input_reaches_a_config_tool_on_stdin() {
    let blob = "y".repeat(200 * 1024);
    let md = format!(
        "## One-time\n- [ ] @big {{\"blob\": {}}}\n",
        json_str(&blob)
    );
    let env = Env::new(&md).config(&format!(
        "{FULL}[tools.big]\ncommand = [\"sh\", \"-c\", \"wc -c\"]\napproval = \"auto\"\n"
    ));
    let out = env.cmd(["run", "--once", "--json"]).output();
    out.no_panic();
    audit_whole(&env);
    let doc = out.json();
    let task = &doc["tasks"][0];
    assert_eq!(
        task["outcome"], "succeeded",
        "a 200 KB input keeps the tool from starting: {}",
        task["reason"]
    );
    // One JSON line on stdin: the input (with its quotes and key) plus a newline.
    let bytes: usize = task["output"].as_str().unwrap().trim().parse().unwrap();
    assert!(bytes > blob.len(), "{bytes}");
}

// ---------------------------------------------------------------------------------------
// Many tasks.

#[test]
fn twenty_thousand_tasks_check_and_dry_run() {
    let mut md = String::from("## One-time\n");
    for i in 0..20_000 {
        md.push_str(&format!("- [ ] @log {{\"text\": \"t{i}\"}}\n"));
    }
    let env = Env::new(&md);

    // How long these take is a figure of `benches/figures.rs` (`check` of 20,000 tasks).
    let out = env.cmd(["check", "--json"]).output();
    clean(&out, 0);
    let doc = out.json();
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 20_000);
    let ids: BTreeSet<&str> = tasks
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 20_000, "ids are distinct");
    let out = env.cmd(["run", "--once", "--dry-run", "--json"]).output();
    clean(&out, 0);
    let doc = out.json();
    let outcomes: Vec<&str> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    // The default run cap: 50 would run, the rest wait (run_cap).
    assert_eq!(outcomes.iter().filter(|o| **o == "would_run").count(), 50);
    assert_eq!(outcomes.iter().filter(|o| **o == "skipped").count(), 19_950);
    assert!(!env.state().exists(), "a dry run writes nothing");
    assert_eq!(env.read("HEARTBEAT.md"), md);

    // A file this large is parsed like a small one: its first tasks read exactly as the same
    // lines in a small file at the same path.
    let small: String = md.lines().take(11).map(|l| format!("{l}\n")).collect();
    env.write("HEARTBEAT.md", &small);
    let out = env.cmd(["check", "--json"]).output();
    clean(&out, 0);
    let small_doc = out.json();
    let small_tasks = small_doc["tasks"].as_array().unwrap();
    assert_eq!(small_tasks.len(), 10);
    assert_eq!(small_tasks[..], tasks[..10]);

    if soak() {
        // The real thing: 20,000 tools, one rewrite of the file.
        let env = Env::new(&md).config(FULL);
        let start = Instant::now();
        run_clean(&env, &["-q"], 0);
        eprintln!("20,000 tasks: run --once {:?}", start.elapsed());
        assert!(open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md")).is_empty());
        assert_eq!(env.events("task_marked_done").len(), 20_000);
    }
}

// ---------------------------------------------------------------------------------------
// Odd bytes and shapes.

#[test]
fn nul_bytes_are_kept_byte_for_byte_and_never_reach_argv() {
    let md = b"## One-time\n\
        - [ ] @log {\"text\": \"escaped \\u0000 nul\"}\n\
        - [ ] a reminder with a raw \0 nul\n\
        - [ ] @log {\"text\": \"raw \0 in a string\"}\n\
        - [ ] @echo {\"text\": \"a\\u0000b\"}\n\
        - [ ] @log {\"text\": \"last\"}\n\
        \nprose \0 with nul\n";
    let env = Env::empty().config(&format!(
        "{FULL}[tools.echo]\ncommand = [\"echo\", \"{{text}}\"]\napproval = \"auto\"\n"
    ));
    env.write("HEARTBEAT.md", md);
    let out = run_clean(&env, &[], 1);
    assert!(!out.stdout.contains('\0'), "a raw NUL on the terminal");
    // The escaped NUL is fine for @log; the raw NUL in a JSON string is invalid JSON; a NUL
    // cannot be an argument: the config tool task is invalid, named.
    let ok: Vec<i64> = env
        .events("task_succeeded")
        .iter()
        .map(|v| v["line"].as_i64().unwrap())
        .collect();
    assert_eq!(ok, vec![2, 6]);
    let invalid: Vec<i64> = env
        .events("task_invalid")
        .iter()
        .map(|v| v["line"].as_i64().unwrap())
        .collect();
    assert_eq!(invalid, vec![4, 5]);
    assert_eq!(env.events("task_reminded").len(), 1);
    // Exactly lines 2 and 6 ticked; every NUL still there.
    let after = env.read_bytes("HEARTBEAT.md");
    assert_eq!(after.iter().filter(|b| **b == 0).count(), 3);
    let seen = tasks_in(&env.md_path(), &after);
    let done: Vec<usize> = seen.iter().filter(|t| t.done).map(|t| t.line).collect();
    assert_eq!(done, vec![2, 6]);
}

#[test]
fn cr_only_line_endings_tick_byte_exactly_with_right_line_numbers() {
    let md = "# Old Mac\r\r## One-time\r- [ ] @log {\"text\": \"a\"}\r- [x] done\r* [ ] @log {\"text\":\r  \"b\"}\r\rend";
    let env = Env::new(md).config(FULL);
    let out = env.cmd(["check", "--json"]).output();
    clean(&out, 0);
    let lines: Vec<u64> = out.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![4, 5, 6]);
    run_clean(&env, &[], 0);
    let want = md
        .replacen(
            "- [ ] @log {\"text\": \"a\"}",
            "- [x] @log {\"text\": \"a\"}",
            1,
        )
        .replacen("* [ ] @log", "* [x] @log", 1);
    assert_eq!(env.read("HEARTBEAT.md"), want);
    let marked: Vec<i64> = env
        .events("task_marked_done")
        .iter()
        .map(|v| v["line"].as_i64().unwrap())
        .collect();
    assert_eq!(marked, vec![4, 6]);
    // Ticking twice equals ticking once.
    env.cmd(["run", "--once"])
        .now("2026-05-01T11:00:00Z")
        .output()
        .code(0);
    assert_eq!(env.read("HEARTBEAT.md"), want);
}

/// CommonMark §2.1: a lone CR is a line ending, so a fence line ends at the CR. And
/// (docs/reference.md#file-format) items inside fenced code blocks are not tasks, whatever the line
/// endings.
#[test]
fn cr_only_line_endings_keep_tasks_in_fenced_code_out() {
    let md = "## One-time\r\r```\r- [ ] @log {\"text\": \"example in code\"}\r```\r\r~~~\r- [ ] @log {\"text\": \"tilde code\"}\r~~~\r\rPara.\r\r    - [ ] @log {\"text\": \"indented code\"}\r";
    let env = Env::new(md).config(FULL);
    let out = env.cmd(["check", "--json"]).output();
    out.no_panic();
    let tasks = out.json()["tasks"].as_array().cloned().unwrap_or_default();
    assert!(
        tasks.is_empty(),
        "with CR-only line endings, lines inside fenced code blocks are taken for tasks: {:?}",
        tasks
            .iter()
            .map(|t| (&t["line"], &t["text"]))
            .collect::<Vec<_>>()
    );
    let out = env.cmd(["run", "--once"]).output();
    out.code(0);
    assert!(
        env.events("task_succeeded").is_empty(),
        "an example in a code block ran"
    );
    assert_eq!(env.read("HEARTBEAT.md"), md);
}

#[test]
fn two_hundred_levels_of_lists_and_blockquotes() {
    let mut md = String::from("## One-time\n\n");
    for i in 0..200 {
        md.push_str(&"  ".repeat(i));
        md.push_str(&format!("- [ ] @log {{\"text\": \"list {i}\"}}\n"));
    }
    md.push_str("\nA paragraph to end the list.\n\n");
    for i in 1..=200 {
        md.push_str(&"> ".repeat(i));
        md.push_str(&format!("- [ ] @log {{\"text\": \"quote {i}\"}}\n"));
    }
    md.push_str("\nA paragraph to end the quotes.\n\n");
    // Both at once: lists inside quotes inside lists, 100 deep.
    for i in 0..100 {
        md.push_str(&"  ".repeat(i));
        md.push_str("- > ");
        md.push_str(&format!("- [ ] @log {{\"text\": \"mixed {i}\"}}\n"));
    }
    let env = Env::new(&md).config(FULL);
    let out = env.cmd(["check", "--json"]).output();
    clean(&out, 0);
    let n = out.json()["tasks"].as_array().unwrap().len();
    // Every list and quote level is a task; the mixed ones at least as far as CommonMark's
    // indentation lets them nest (never a crash, never an invented task).
    assert!(n >= 400, "{n} tasks");
    let before = env.read_bytes("HEARTBEAT.md");
    let open = open_one_time(&env.md_path(), &before).len();
    assert_eq!(open, n);
    run_clean(&env, &["-q"], 0);
    assert!(open_one_time(&env.md_path(), &env.read_bytes("HEARTBEAT.md")).is_empty());
    assert_eq!(env.events("task_marked_done").len(), n);
}

#[test]
fn blockquoted_tasks_with_json_over_quoted_continuation_lines() {
    let md = "## One-time\n\n\
        > - [ ] @log {\"text\": \"quoted\"}\n\
        > > 1. [ ] @log {\"text\":\n\
        > >    \"two levels, continued\"}\n\
        >\n\
        > * [ ] plain quoted reminder\n\n\
        > ```\n> - [ ] @log {\"text\": \"quoted code\"}\n> ```\n";
    let env = Env::new(md).config(FULL);
    run_clean(&env, &[], 0);
    let texts: Vec<String> = env
        .events("task_succeeded")
        .iter()
        .map(|v| v["input"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, vec!["quoted", "two levels, continued"]);
    let after = env.read("HEARTBEAT.md");
    assert_eq!(
        after,
        md.replacen("> - [ ] @log", "> - [x] @log", 1)
            .replacen("> > 1. [ ]", "> > 1. [x]", 1)
    );
}

#[test]
fn a_file_over_8_mib_is_refused_by_every_reader_naming_it() {
    let env = Env::empty().config(FULL);
    let mut big = b"## One-time\n- [ ] @log {\"text\": \"big\"}\n".to_vec();
    big.resize(8 * 1024 * 1024 + 100, b'a');
    env.write("HEARTBEAT.md", &big);
    for args in [
        vec!["run", "--once"],
        vec!["run", "--once", "--dry-run"],
        vec!["check"],
        vec!["check", "--json"],
    ] {
        let out = env.cmd(&args).output();
        clean(&out, 2);
        assert!(
            out.stderr.contains(&env.md_file()) && out.stderr.contains("8 MiB"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert!(!env.state().exists(), "nothing written for a refused file");
    assert_eq!(env.read_bytes("HEARTBEAT.md"), big);
}

#[test]
fn a_fifo_or_a_directory_as_heartbeat_md_is_an_error_not_a_hang() {
    let env = Env::empty();
    nix::unistd::mkfifo(
        env.md_file().as_str(),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .expect("mkfifo");
    let child = env.cmd(["run", "--once"]).spawn();
    let out = wait_output(child, "run --once on a FIFO", Duration::from_secs(10));
    clean(&out, 2);
    assert!(out.stderr.contains(&env.md_file()), "{}", out.stderr);
    fs::remove_file(env.md_path()).unwrap();
    fs::create_dir(env.md_path()).unwrap();
    let out = env.cmd(["check"]).output();
    clean(&out, 2);
    assert!(out.stderr.contains(&env.md_file()), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------------
// State that cannot be used.

const ONE: &str = "## One-time\n- [ ] @log {\"text\": \"must not run\"}\n";

#[test]
fn a_corrupt_database_exits_2_naming_it_and_runs_nothing() {
    // 1. Not a database at all.
    let env = Env::new(ONE).config(FULL);
    fs::create_dir_all(env.state()).unwrap();
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(env.db_path(), &garbage).unwrap();
    for args in [
        vec!["run", "--once"],
        vec!["status"],
        vec!["approvals"],
        vec!["approve", "1"],
        vec!["pause"],
    ] {
        let out = env.cmd(&args).output();
        clean(&out, 2);
        assert!(
            out.stderr.contains("heartbeat.db"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert_eq!(env.read("HEARTBEAT.md"), ONE);
    assert!(env.events("task_succeeded").is_empty());
    audit_whole(&env);
    assert_eq!(
        fs::read(env.db_path()).unwrap(),
        garbage,
        "the evidence is kept"
    );

    // 2. A real database with damaged pages: the header reads, the tables do not.
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n").config(FULL);
    env.cmd(["run", "--once"]).output().code(0);
    {
        let db = env.db_rw();
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }
    env.write("HEARTBEAT.md", ONE);
    let mut bytes = fs::read(env.db_path()).unwrap();
    let page = 4096;
    assert!(bytes.len() > 3 * page);
    for b in &mut bytes[page..] {
        *b = 0xA5;
    }
    fs::write(env.db_path(), &bytes).unwrap();
    let out = env.cmd(["run", "--once"]).output();
    clean(&out, 2);
    assert!(out.stderr.contains("heartbeat.db"), "{}", out.stderr);
    assert_eq!(env.read("HEARTBEAT.md"), ONE, "nothing ran, nothing ticked");
    assert!(
        env.events("task_succeeded")
            .iter()
            .all(|v| v["input"]["text"] != "must not run"),
        "a task ran on a corrupt database"
    );
    audit_whole(&env);
}

/// The state dir's disk fills up (a tmpfs in a mount namespace of our own, so no root is
/// needed). Full before the run: it stops before any task runs, says the disk is full
/// (SQLite's own "disk I/O error" reads like failing hardware), exits 2, and leaves
/// HEARTBEAT.md alone; with room again, the next run does the work, once. Filled by a
/// tool: the run exits 1 naming the task that ran unrecorded, which never runs again.
#[test]
fn a_full_disk_under_the_state_dir_is_named_and_no_task_runs_twice() {
    let probe = tempfile::tempdir().unwrap();
    if !Command::new("unshare")
        .args(["-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(probe.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        cannot_run_here("no tmpfs in an unprivileged mount namespace here (`unshare -rm`)");
        return;
    }
    let md = "## One-time\n- [ ] @append_file {\"path\": \"out.txt\", \"text\": \"once\\n\"}\n";
    let env = Env::new(md).config(FULL);
    env.write("empty.md", "## Recurring\n");
    fs::create_dir_all(env.state()).unwrap();
    fs::create_dir_all(env.path("logs")).unwrap();
    let log = env.path("logs/audit.jsonl");
    env.write(
        "split.toml",
        format!("{FULL}audit_log = {:?}\n", log.display().to_string()),
    );
    env.write(
        "split.md",
        // A line longer than a page (the output is kept up to 4 KiB) needs a new block.
        r#"## Recurring
- [ ] @shell {"cmd": "cat /dev/zero > logs/filler 2>/dev/null; head -c 5000 /dev/zero | tr '\\0' x"}
"#,
    );
    let script = r#"
        set -u
        hb() { "$BIN" --config heartbeat.toml --state-dir state --now "$NOW" "$@"; }
        mount -t tmpfs -o size=1m tmpfs state || exit 99
        hb run --once -q --file empty.md || exit 98
        cat /dev/zero > state/filler 2>/dev/null
        hb run --once > full.out 2> full.err; echo $? > full.rc
        cp HEARTBEAT.md full.md
        rm state/filler
        hb run --once > again.out 2> again.err; echo $? > again.rc
        # A one-time tool that fills the disk itself: it runs, its outcome cannot be stored.
        printf -- '- [ ] @shell {"cmd": "cat /dev/zero > state/filler 2>/dev/null; echo ran >> ran.txt"}\n' >> HEARTBEAT.md
        hb run --once > filled.out 2> filled.err; echo $? > filled.rc
        rm state/filler
        hb run --once > after.out 2> after.err; echo $? > after.rc
        cp state/audit.jsonl audit.copy
        # The audit log on a disk of its own, filled by the tool: recorded, but not logged.
        mount -t tmpfs -o size=256k tmpfs logs || exit 97
        "$BIN" --config split.toml --state-dir state/split --now "$NOW" run --once --file split.md \
            > split.out 2> split.err; echo $? > split.rc
    "#;
    let status = Command::new("unshare")
        .args(["-rm", "sh", "-c", script])
        .current_dir(env.root())
        .env("BIN", BIN)
        .env("NOW", NOW)
        .env("HOME", env.path("home"))
        .env_remove("HEARTBEAT_CONFIG")
        .env_remove("HEARTBEAT_NOW")
        .status()
        .unwrap();
    assert!(status.success(), "the script failed: {status}");

    let (rc, stderr) = (env.read("full.rc"), env.read("full.err"));
    assert_eq!(rc.trim(), "2", "{stderr}");
    assert!(
        stderr.contains("heartbeat.db: its disk is full"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(env.read("full.md"), md, "nothing ran, nothing ticked");

    assert_eq!(
        env.read("again.rc").trim(),
        "0",
        "{}",
        env.read("again.err")
    );
    assert_eq!(env.read("out.txt"), "once\n", "the task ran once");
    assert!(
        env.read("HEARTBEAT.md")
            .starts_with("## One-time\n- [x] @append_file")
    );

    // The run that filled the disk stops with exit 1 (work was done) and names the task.
    let stderr = env.read("filled.err");
    assert_eq!(env.read("filled.rc").trim(), "1", "{stderr}");
    assert!(
        stderr.contains("@shell ") && stderr.contains("ran, but its outcome could not be recorded"),
        "{stderr}"
    );
    assert!(stderr.contains("its disk is full"), "{stderr}");
    // The next run reports it interrupted and holds it: the tool ran once.
    assert_eq!(
        env.read("after.rc").trim(),
        "1",
        "{}",
        env.read("after.err")
    );
    assert!(
        env.read("after.out").contains("interrupted"),
        "{}",
        env.read("after.out")
    );
    assert_eq!(env.read("ran.txt"), "ran\n");

    // A task whose audit line cannot be written is named too.
    let stderr = env.read("split.err");
    assert_eq!(env.read("split.rc").trim(), "1", "{stderr}");
    assert!(
        stderr.contains("@shell ")
            && stderr.contains("ran, but its audit line could not be written")
            && stderr.contains("No space left on device"),
        "{stderr}"
    );
    for line in env.read("audit.copy").lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}

#[test]
fn a_state_dir_that_cannot_be_created_exits_2_with_a_clear_message() {
    // A regular file where a directory must be: mkdir fails even for root.
    let env = Env::new(ONE).config(FULL);
    env.write("blocker", "a file, not a directory\n");
    let bad = env.path("blocker/state");
    let bad_s = bad.display().to_string();
    for args in [
        vec!["run", "--once"],
        vec!["status"],
        vec!["approve", "1"],
        vec!["pause"],
        vec!["resume"],
        vec!["daemon", "--every", "1s"],
    ] {
        let child = env.cmd(&args).args(["--state-dir", bad_s.as_str()]).spawn();
        let out = wait_output(child, &format!("{args:?}"), Duration::from_secs(20));
        clean(&out, 2);
        assert!(
            out.stderr
                .contains(&env.path("blocker").display().to_string()),
            "{args:?}: the message names the path: {}",
            out.stderr
        );
    }
    // The state dir itself is a file.
    let file_s = env.path("blocker").display().to_string();
    let out = env
        .cmd(["run", "--once", "--state-dir", file_s.as_str()])
        .output();
    clean(&out, 2);
    assert!(out.stderr.contains(&file_s), "{}", out.stderr);
    assert_eq!(env.read("HEARTBEAT.md"), ONE);
    // Commands that need no state still work.
    let out = env.cmd(["check", "--state-dir", bad_s.as_str()]).output();
    clean(&out, 0);
}

/// Unwritable: read-only, or for root, who ignores permissions, immutable (`chattr +i`).
#[test]
fn an_unwritable_state_dir_exits_2_with_a_clear_message() {
    let env = Env::new(ONE).config(FULL);
    fs::create_dir_all(env.state()).unwrap();
    let guard = if nix::unistd::geteuid().is_root() {
        let set = std::process::Command::new("chattr")
            .arg("+i")
            .arg(env.state())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !set {
            cannot_run_here("running as root and chattr +i is not available here");
            return;
        }
        Some(Immutable(env.state()))
    } else {
        fs::set_permissions(env.state(), fs::Permissions::from_mode(0o500)).unwrap();
        None
    };
    let out = env.cmd(["run", "--once"]).output();
    drop(guard);
    fs::set_permissions(env.state(), fs::Permissions::from_mode(0o700)).unwrap();
    clean(&out, 2);
    assert!(
        out.stderr.contains(&env.state().display().to_string()),
        "{}",
        out.stderr
    );
    assert_eq!(env.read("HEARTBEAT.md"), ONE);
}

/// Clears the immutable attribute again (so the sandbox can be removed), also on failure.
struct Immutable(std::path::PathBuf);

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A one-time task succeeds but its file cannot be rewritten (as root: an immutable file,
/// `chattr +i`; otherwise: a read-only file in a read-only directory): no crash, exit 1, the
/// audit says why, no temp file is left, and the next runs do not run the task again (they
/// try the tick again, and it lands once it can).
#[test]
fn a_tick_that_cannot_be_written_is_audited_and_the_task_not_rerun() {
    let env = Env::empty().config(FULL);
    env.write("ro/HEARTBEAT.md", ONE);
    let md = env.path("ro/HEARTBEAT.md");
    let md_s = md.display().to_string();
    let root = nix::unistd::geteuid().is_root();
    let mut guard = None;
    if root {
        let set = std::process::Command::new("chattr")
            .arg("+i")
            .arg(&md)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !set {
            cannot_run_here("running as root and chattr +i is not available here");
            return;
        }
        guard = Some(Immutable(md.clone()));
    } else {
        fs::set_permissions(&md, fs::Permissions::from_mode(0o444)).unwrap();
        fs::set_permissions(env.path("ro"), fs::Permissions::from_mode(0o555)).unwrap();
    }
    let out = env.cmd(["run", "--once", "--file", md_s.as_str()]).output();
    clean(&out, 1);
    assert_eq!(fs::read_to_string(&md).unwrap(), ONE);
    assert_eq!(env.events("task_succeeded").len(), 1);
    let skipped = env.events("task_mark_skipped");
    assert_eq!(skipped.len(), 1);
    let reason = skipped[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("error") && reason.contains(&md_s),
        "{skipped:?}"
    );
    assert!(out.stdout.contains("cannot tick"), "{}", out.stdout);
    // No temp file left in the directory.
    assert_eq!(fs::read_dir(env.path("ro")).unwrap().count(), 1);

    let out = env.cmd(["run", "--once", "--file", md_s.as_str()]).output();
    clean(&out, 1);
    assert_eq!(env.events("task_succeeded").len(), 1, "ran again");
    assert_eq!(
        env.events("task_mark_skipped").len(),
        2,
        "the tick is tried again"
    );
    if root {
        drop(guard.take());
    } else {
        fs::set_permissions(env.path("ro"), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = env.cmd(["run", "--once", "--file", md_s.as_str()]).output();
    clean(&out, 0);
    assert_eq!(env.events("task_succeeded").len(), 1, "ran again");
    assert_eq!(
        fs::read_to_string(&md).unwrap(),
        ONE.replacen("- [ ]", "- [x]", 1)
    );
    assert_eq!(fs::read_dir(env.path("ro")).unwrap().count(), 1);
}

/// The daemon reads the files at every tick: a file that turns hostile is reported and the
/// daemon goes on; when it is fixed, work resumes.
#[test]
fn the_daemon_survives_a_file_that_turns_hostile() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"tick\"}\n").config(FULL);
    let daemon = env.cmd(["daemon", "--every", "1s"]).spawn_guarded();
    let count = |env: &Env| {
        crate::crash::scan_audit(env)
            .lines
            .iter()
            .filter(|v| v["event"] == "task_succeeded")
            .count()
    };
    wait_until("a first tick", WAIT, || count(&env) >= 1);

    let mut big = b"## Recurring\n".to_vec();
    big.resize(9 * 1024 * 1024, b'z');
    env.write("HEARTBEAT.md", &big);
    std::thread::sleep(Duration::from_millis(2500));
    env.write(
        "HEARTBEAT.md",
        b"## Recurring\n- [ ] @log {\"text\": \"\xff\"}\n",
    );
    std::thread::sleep(Duration::from_millis(1500));
    let n = count(&env);
    env.write(
        "HEARTBEAT.md",
        "## Recurring\n- [ ] @log {\"text\": \"back\"}\n",
    );
    wait_until("work resumes", WAIT, || {
        crate::crash::scan_audit(&env)
            .lines
            .iter()
            .any(|v| v["event"] == "task_succeeded" && v["input"]["text"] == "back")
    });
    assert!(count(&env) > n);
    daemon.signal(Signal::SIGTERM);
    let out = daemon.finish(WAIT);
    clean(&out, 0);
    assert!(out.stderr.contains("8 MiB"), "{}", out.stderr);
    assert!(out.stderr.contains("UTF-8"), "{}", out.stderr);
    audit_whole(&env);
    assert_db_ok(&env);
    let lines: Vec<Value> = env.audit();
    assert_eq!(lines.last().unwrap()["event"], "daemon_stopped");
}
