//! HEARTBEAT.md as `check --json` sees it (docs/reference.md#tasks): sections, markers, what is not
//! a task, task text, JSON over continuation lines, and task identity.

use std::os::unix::fs::symlink;

use serde_json::{Value, json};

use crate::common::*;

fn check(env: &Env) -> Value {
    let out = env.cmd(["check", "--json"]).output();
    out.no_panic();
    assert!(out.code == Some(0) || out.code == Some(1), "{}", out.stderr);
    out.json()
}

fn tasks(doc: &Value) -> &Vec<Value> {
    doc["tasks"].as_array().expect("tasks")
}

/// (line, section, done, text) of every task.
fn summary(doc: &Value) -> Vec<(u64, String, bool, String)> {
    tasks(doc)
        .iter()
        .map(|t| {
            (
                t["line"].as_u64().unwrap(),
                t["section"].as_str().unwrap().to_string(),
                t["done"].as_bool().unwrap(),
                t["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn ids(doc: &Value) -> Vec<String> {
    tasks(doc)
        .iter()
        .map(|t| t["task_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_spec_example_parses_as_documented() {
    let env = Env::new(include_str!("../../fixtures/markdown/spec-example.md")).config(
        "timezone = \"UTC\"\n\n[tools.backup]\ncommand = [\"true\"]\n\n[tools.agent]\ncommand = [\"true\"]\n",
    );
    let doc = check(&env);
    let got: Vec<(u64, &str, &str, Value)> = tasks(&doc)
        .iter()
        .map(|t| {
            (
                t["line"].as_u64().unwrap(),
                t["section"].as_str().unwrap(),
                t["decision"].as_str().unwrap(),
                t["schedule"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got.iter()
            .map(|(l, s, _, sch)| (*l, *s, sch.clone()))
            .collect::<Vec<_>>(),
        vec![
            (4, "recurring", Value::Null),
            (5, "recurring", Value::Null),
            (8, "recurring", json!("Every 6h")),
            (11, "recurring", json!("Weekdays at 09:00")),
            (14, "one_time", Value::Null),
            (15, "one_time", Value::Null),
            (18, "one_time", json!("At 2026-12-24 18:00")),
        ],
        "{doc:#}"
    );
    assert_eq!(
        got[0].2, "approve",
        "@backup: a config tool, ask by default"
    );
    assert_eq!(got[1].2, "remind");
    assert_eq!(got[2].2, "approve");
    assert_eq!(got[3].2, "approve", "@agent: configured, ask by default");
    assert_eq!(got[5].2, "done");
    assert_eq!(tasks(&doc)[0]["input"], json!({"path": "/home"}), "{doc:#}");
    assert_eq!(
        tasks(&doc)[2]["input"],
        json!({"cmd": ["git", "-C", "/srv/notes", "pull", "--ff-only"]})
    );
}

#[test]
fn only_real_task_list_items_are_tasks() {
    let env = Env::new(include_str!("../../fixtures/markdown/not-tasks.md"));
    let doc = check(&env);
    let texts: Vec<String> = summary(&doc).into_iter().map(|t| t.3).collect();
    assert_eq!(texts, vec!["the only task"], "{doc:#}");
}

#[test]
fn section_names_markers_and_done_states() {
    let md = "# Title\n\
              \n\
              - [ ] before any section\n\
              \n\
              ##  recurring  \n\
              - [ ] dash\n\
              * [ ] star\n\
              + [ ] plus\n\
              1. [ ] ordered\n\
              1) [X] upper done\n\
              \n\
              ## One time\n\
              - [x] lower done\n\
              - [ ] one time\n\
              \n\
              ## ONETIME\n\
              - [ ] onetime\n\
              \n\
              ## Once\n\
              - [ ] once\n\
              \n\
              ## One-time\n\
              - [ ] one-time\n\
              \n\
              ## Someday\n\
              - [ ] someday\n\
              - [ ] @log {\"text\": broken\n\
              \n\
              ## Recurring\n\
              - [ ] back in recurring\n\
              - not a task\n\
              - [] not a task either\n";
    let env = Env::new(md);
    let doc = check(&env);
    let got = summary(&doc);
    let expect = |line: u64, section: &str, done: bool, text: &str| {
        (line, section.to_string(), done, text.to_string())
    };
    assert_eq!(
        got,
        vec![
            expect(3, "other", false, "before any section"),
            expect(6, "recurring", false, "dash"),
            expect(7, "recurring", false, "star"),
            expect(8, "recurring", false, "plus"),
            expect(9, "recurring", false, "ordered"),
            expect(10, "recurring", true, "upper done"),
            expect(13, "one_time", true, "lower done"),
            expect(14, "one_time", false, "one time"),
            expect(17, "one_time", false, "onetime"),
            expect(20, "one_time", false, "once"),
            expect(23, "one_time", false, "one-time"),
            expect(26, "other", false, "someday"),
            expect(27, "other", false, "@log {\"text\": broken"),
            expect(30, "recurring", false, "back in recurring"),
        ],
        "{doc:#}"
    );
    let decision = |line: u64| {
        tasks(&doc).iter().find(|t| t["line"] == line).unwrap()["decision"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(decision(3), "ignored");
    assert_eq!(decision(26), "ignored");
    // Tasks outside Recurring/One-time are never run, so never invalid either.
    assert_eq!(decision(27), "ignored");
    assert_eq!(decision(10), "done");
    assert_eq!(decision(13), "done");
    assert_eq!(decision(6), "remind");

    // The run: ignored tasks leave no trace.
    env.run_once(NOW).code(0);
    let reminded: Vec<Value> = env
        .events("task_reminded")
        .into_iter()
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(
        reminded,
        vec![
            json!("dash"),
            json!("star"),
            json!("plus"),
            json!("ordered"),
            json!("one time"),
            json!("onetime"),
            json!("once"),
            json!("one-time"),
            json!("back in recurring"),
        ]
    );
    assert!(env.events("task_invalid").is_empty());
}

#[test]
fn task_text_is_the_first_paragraph_and_json_may_span_lines() {
    let md = "## Recurring\n\
              - [ ] @log {\"text\":\n\
              \x20 \"spans lines\"}\n\
              \x20 - [ ] nested plain\n\
              \x20   with a continuation\n\
              \n\
              \x20   A second paragraph is not part of the text.\n\
              - [ ] parent\n\
              \x20 - [ ] child\n\
              - [ ] @log\n\
              - [ ] @log {}\n";
    let env = Env::new(md);
    let doc = check(&env);
    let got: Vec<(u64, String)> = summary(&doc).into_iter().map(|t| (t.0, t.3)).collect();
    assert_eq!(
        got,
        vec![
            (2, "@log {\"text\":\n\"spans lines\"}".to_string()),
            (4, "nested plain\nwith a continuation".to_string()),
            (8, "parent".to_string()),
            (9, "child".to_string()),
            (10, "@log".to_string()),
            (11, "@log {}".to_string()),
        ],
        "{doc:#}"
    );
    assert_eq!(tasks(&doc)[0]["input"], json!({"text": "spans lines"}));
    assert_eq!(tasks(&doc)[0]["decision"], "run");
    // `@log` with no input is `{}`, and log needs "text": invalid, at the task's line.
    assert_eq!(tasks(&doc)[4]["decision"], "invalid");
    assert_eq!(tasks(&doc)[5]["decision"], "invalid");

    env.run_once(NOW).code(1);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["output"], "spans lines");
}

#[test]
fn tool_without_input_gets_an_empty_object() {
    let env = Env::new("## Recurring\n- [ ] @noop\n- [ ] @my.tool-2 {}\n").config(
        "[tools.noop]\ncommand = [\"sh\", \"-c\", \"cat > noop-stdin\"]\napproval = \"auto\"\n\n\
         [tools.\"my.tool-2\"]\ncommand = [\"sh\", \"-c\", \"cat > dotted-stdin\"]\napproval = \"auto\"\n",
    );
    env.run_once(NOW).code(0);
    assert_eq!(env.read("noop-stdin"), "{}\n");
    assert_eq!(env.read("dotted-stdin"), "{}\n");
    let tools: Vec<Value> = env
        .events("task_succeeded")
        .into_iter()
        .map(|e| e["tool"].clone())
        .collect();
    assert_eq!(tools, vec![json!("noop"), json!("my.tool-2")]);
}

#[test]
fn identity_survives_spacing_and_key_order_but_not_new_values() {
    let cfg = "[tools.rec]\ncommand = [\"true\"]\n";
    let env = Env::new(
        "## Recurring\n- [ ] @rec {\"b\": 1, \"a\": \"x\"}\n- [ ] Stretch and drink water\n\n## One-time\n- [ ] @rec {\"b\": 1, \"a\": \"x\"}\n",
    )
    .config(cfg);
    let before = ids(&check(&env));
    assert_eq!(before.len(), 3);
    assert_ne!(before[0], before[2], "the section is part of the identity");

    // Re-spaced JSON, keys reordered, whitespace runs in plain text, other lines moved.
    env.write(
        "HEARTBEAT.md",
        "# Added title\n\nSome prose.\n\n## Recurring\n\n- [ ] Stretch   and\n  drink water\n* [ ] @rec   {\"a\":\"x\",\n    \"b\":1}\n\n## One-time\n1. [ ] @rec {  \"a\" : \"x\" , \"b\" : 1 }\n",
    );
    let after = ids(&check(&env));
    assert_eq!(
        after,
        vec![before[1].clone(), before[0].clone(), before[2].clone()]
    );

    // A changed value is a new task.
    env.write(
        "HEARTBEAT.md",
        "## Recurring\n- [ ] @rec {\"b\": 2, \"a\": \"x\"}\n- [ ] Stretch and drink more water\n\n## One-time\n- [ ] @rec {\"b\": 1, \"a\": \"x\"}\n",
    );
    let changed = ids(&check(&env));
    assert_ne!(changed[0], before[0]);
    assert_ne!(changed[1], before[1]);
    assert_eq!(changed[2], before[2]);
}

#[test]
fn identical_tasks_get_distinct_ids_and_both_run() {
    let md = "## One-time\n- [ ] @log {\"text\": \"same\"}\n- [ ] @log {\"text\": \"same\"}\n";
    let env = Env::new(md);
    let doc = check(&env);
    let ids = ids(&doc);
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    env.run_once(NOW).code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
    assert_eq!(
        env.read("HEARTBEAT.md"),
        "## One-time\n- [x] @log {\"text\": \"same\"}\n- [x] @log {\"text\": \"same\"}\n"
    );
}

#[test]
fn a_symlink_and_its_target_are_the_same_tasks() {
    let env = Env::empty();
    env.write(
        "real/HEARTBEAT.md",
        "## Recurring\n- [ ] @log {\"text\": \"x\"}\n",
    );
    symlink("real/HEARTBEAT.md", env.md_path()).unwrap();
    let via_link = ids(&check(&env));
    let direct = env
        .cmd(["check", "--json", "--file", "real/HEARTBEAT.md"])
        .output()
        .json();
    assert_eq!(via_link, ids(&direct));
    // The file is shown as the user named it.
    assert_eq!(check(&env)["files"], json!([env.md_file()]));
}

#[test]
fn schedule_headings_and_warnings() {
    let md = "## Recurring\n\
              ### every 30m\n- [ ] a\n\
              ### Mondays and Thursdays at 07:00\n- [ ] b\n\
              ### Weekends at 10:00\n- [ ] c\n\
              ### At 2026-12-24 18:00\n- [ ] d\n\
              ### Daily at 7:00\n- [ ] e\n\
              ### Daily at 24:00\n- [ ] f\n\
              ## One-time\n\
              ### Every 6h\n- [ ] g\n\
              ### At 2026-02-30\n- [ ] h\n\
              ### at 2026-12-24\n- [ ] i\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let doc = check(&env);
    let got: Vec<(String, Value, String)> = tasks(&doc)
        .iter()
        .map(|t| {
            (
                t["text"].as_str().unwrap().to_string(),
                t["schedule"].clone(),
                t["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let row = |text: &str, schedule: Value, decision: &str| {
        (text.to_string(), schedule, decision.to_string())
    };
    // Friday 2026-05-01 10:00 UTC.
    assert_eq!(
        got,
        vec![
            row("a", json!("every 30m"), "remind"),
            row("b", json!("Mondays and Thursdays at 07:00"), "not_due"),
            row("c", json!("Weekends at 10:00"), "not_due"),
            // Meant as schedules but not valid ones for their section: fail closed.
            row("d", Value::Null, "invalid"),
            row("e", Value::Null, "invalid"),
            row("f", Value::Null, "invalid"),
            row("g", Value::Null, "invalid"),
            row("h", Value::Null, "invalid"),
            row("i", json!("at 2026-12-24"), "not_due"),
        ],
        "{doc:#}"
    );
    assert_eq!(tasks(&doc)[1]["next_due"], "2026-05-04T07:00:00.000Z");
    assert_eq!(tasks(&doc)[2]["next_due"], "2026-05-02T10:00:00.000Z");
    assert_eq!(tasks(&doc)[8]["next_due"], "2026-12-24T00:00:00.000Z");
    // Every heading that is not a schedule for its section is an error on its line, shared
    // by the tasks below it.
    let errors: Vec<u64> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["severity"] == "error")
        .map(|p| p["line"].as_u64().unwrap())
        .collect();
    assert_eq!(errors, vec![8, 10, 12, 15, 17], "{doc:#}");
    env.cmd(["check"]).output().code(1);
}
