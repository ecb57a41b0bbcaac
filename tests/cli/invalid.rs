//! Invalid tasks and bad files (docs/reference.md#tool-calls, docs/reference.md#file-format,
//! docs/reference.md#exit-codes).

use serde_json::Value;

use crate::common::*;

/// Line 3 is valid; every other task line is invalid in its own way.
const INVALID_MD: &str = include_str!("../../fixtures/cli/invalid.md");

const CFG_TOOL: &str = "[tools.cfg]\ncommand = [\"echo\", \"{a}\", \"{b}\"]\n";

/// (line, column or None when the column is not pinned, what the message must mention)
fn expected_problems() -> Vec<(u64, Option<u64>, Vec<&'static str>)> {
    vec![
        // `- [ ] @log {"text": broken}`: serde_json stops at the `b`.
        (4, Some(21), vec!["expected value"]),
        // `- [ ] @log ["array"]`: an array where an object must be.
        (5, Some(12), vec!["array"]),
        // `- [ ] @log {"text": "a"} trailing`: text after the object.
        (6, Some(26), vec!["trailing"]),
        // An unknown tool: the message names it and the tools that exist.
        (
            7,
            None,
            vec!["nosuch", "cfg", "log", "shell", "write_file", "append_file"],
        ),
        // A placeholder whose key the input lacks.
        (8, None, vec!["\"b\"", "{b}"]),
        // JSON over continuation lines: the error is on the second line, at `nope`'s `o`
        // (serde_json reads `n` as the start of `null`).
        (10, Some(4), vec!["expected"]),
    ]
}

#[test]
fn check_reports_every_invalid_task_with_file_line_column() {
    let env = Env::new(INVALID_MD).config(CFG_TOOL);
    let out = env.cmd(["check", "--json"]).output();
    out.code(1);
    let doc = out.json();
    let problems: Vec<&Value> = doc["problems"]
        .as_array()
        .expect("problems array")
        .iter()
        .filter(|p| p["severity"] == "error")
        .collect();
    let expected = expected_problems();
    assert_eq!(problems.len(), expected.len(), "{doc:#}");
    for (p, (line, column, words)) in problems.iter().zip(&expected) {
        assert_eq!(p["file"], env.md_file(), "{p}");
        assert_eq!(p["line"], *line, "{p}");
        let col = p["column"].as_u64().expect("column");
        match column {
            Some(c) => assert_eq!(col, *c, "{p}"),
            None => assert!(col >= 1, "{p}"),
        }
        let msg = p["message"].as_str().unwrap();
        for w in words {
            assert!(msg.contains(w), "message of line {line} lacks {w:?}: {msg}");
        }
    }
    // Every invalid task has decision "invalid"; the valid one would run.
    let tasks = doc["tasks"].as_array().unwrap();
    let decisions: Vec<(u64, &str)> = tasks
        .iter()
        .map(|t| (t["line"].as_u64().unwrap(), t["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(
        decisions,
        vec![
            (3, "run"),
            (4, "invalid"),
            (5, "invalid"),
            (6, "invalid"),
            (7, "invalid"),
            (8, "invalid"),
            (9, "invalid"),
        ]
    );

    // The human form: `file:line:column: error: message`.
    let human = env.cmd(["check"]).output();
    human.code(1);
    for (line, column, _) in &expected {
        let place = match column {
            Some(c) => format!("HEARTBEAT.md:{line}:{c}: error"),
            None => format!("HEARTBEAT.md:{line}:"),
        };
        assert!(
            human.stdout.contains(&place),
            "{place} in:\n{}",
            human.stdout
        );
    }
    // check writes nothing.
    assert!(!env.state().exists());
}

#[test]
fn run_with_invalid_tasks_exits_1_and_runs_the_valid_ones() {
    let env = Env::new(INVALID_MD).config(CFG_TOOL);
    let out = env.run_once(NOW);
    out.code(1);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["output"], "valid");
    let invalid = env.events("task_invalid");
    let expected = expected_problems();
    assert_eq!(invalid.len(), expected.len(), "{invalid:#?}");
    for (ev, (line, column, _)) in invalid.iter().zip(&expected) {
        assert_eq!(ev["line"], *line, "{ev}");
        if let Some(c) = column {
            assert_eq!(ev["column"], *c, "{ev}");
        }
        assert_eq!(ev["file"], env.md_file());
    }
    // The summary says which.
    assert!(out.stdout.contains("HEARTBEAT.md:4:21"), "{}", out.stdout);
}

#[test]
fn missing_file_exits_2_naming_it_unless_allowed() {
    let env = Env::empty();
    let out = env.run_once(NOW);
    out.code(2);
    assert!(out.stderr.starts_with("heartbeat: "), "{}", out.stderr);
    assert!(out.stderr.contains(&env.md_file()), "{}", out.stderr);
    assert!(!env.state().exists(), "nothing written");

    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(out.stderr.contains(&env.md_file()), "{}", out.stderr);

    let out = env.run_with(NOW, &["--allow-missing"]);
    out.code(0);
    assert_eq!(out.stdout, "");
    let out = env.cmd(["check", "--allow-missing", "--json"]).output();
    out.code(0);
    assert_eq!(out.json()["tasks"], serde_json::json!([]));

    // A missing --file is named as given.
    let out = env.run_with(NOW, &["--file", "elsewhere/TODO.md"]);
    out.code(2);
    assert!(out.stderr.contains("elsewhere/TODO.md"), "{}", out.stderr);
}

#[test]
fn non_utf8_file_exits_2_naming_it_and_writes_nothing() {
    let env = Env::empty();
    env.write(
        "HEARTBEAT.md",
        b"## Recurring\n- [ ] @log {\"text\": \"caf\xE9\"}\n",
    );
    for args in [&["run", "--once"][..], &["check"][..]] {
        let out = env.cmd(args).output();
        out.code(2);
        assert!(out.stderr.starts_with("heartbeat: "), "{}", out.stderr);
        assert!(out.stderr.contains(&env.md_file()), "{}", out.stderr);
    }
    assert!(!env.state().exists(), "nothing written");
}

#[test]
fn file_over_8_mib_exits_2_naming_it() {
    let env = Env::empty();
    let mut big = b"## Recurring\n- [ ] @log {\"text\": \"big\"}\n".to_vec();
    big.resize(8 * 1024 * 1024 + 1, b'\n');
    env.write("HEARTBEAT.md", &big);
    let out = env.run_once(NOW);
    out.code(2);
    assert!(out.stderr.contains(&env.md_file()), "{}", out.stderr);
    assert!(!env.state().exists(), "nothing written");

    // Exactly 8 MiB is accepted.
    big.truncate(8 * 1024 * 1024);
    env.write("HEARTBEAT.md", &big);
    env.run_once(NOW).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
}

#[test]
fn config_error_creates_no_state() {
    let env =
        Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n").config("autonomy = \"yolo\"\n");
    let out = env.run_once(NOW);
    out.code(2);
    assert!(out.stderr.contains("autonomy"), "{}", out.stderr);
    assert!(out.stderr.contains("yolo"), "{}", out.stderr);
    assert!(!env.state().exists(), "no state dir for a config error");
}
