//! `run --once` basics: what runs, what is queued, skipped or reminded (docs/reference.md#policy).

use serde_json::{Value, json};

use crate::common::*;

#[test]
fn log_task_succeeds_with_its_text_as_output() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hello from heartbeat\"}\n");
    let out = env.run_once(NOW);
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    let ev = &ok[0];
    assert_eq!(ev["tool"], "log");
    assert_eq!(ev["output"], "hello from heartbeat");
    assert_eq!(ev["input"], json!({"text": "hello from heartbeat"}));
    assert_eq!(ev["file"], env.md_file());
    assert_eq!(ev["line"], 2);
    assert_eq!(ev["section"], "recurring");
    assert!(is_task_id(&ev["task_id"]), "{ev}");
    // Something ran: a short human summary on stdout.
    assert!(
        out.stdout.contains("hello from heartbeat"),
        "stdout: {}",
        out.stdout
    );
}

#[test]
fn shell_is_queued_in_cautious_mode_once_and_listed_by_approvals() {
    let env = Env::new("# Tasks\n\n## Recurring\n\n- [ ] @shell {\"cmd\": \"touch ran\"}\n");
    let out = env.run_once(NOW);
    out.code(0);
    assert!(!env.exists("ran"), "a queued tool must not run");

    let req = env.events("approval_requested");
    assert_eq!(req.len(), 1, "{:#?}", env.audit());
    let req = &req[0];
    assert_eq!(req["tool"], "shell");
    assert_eq!(req["input"], json!({"cmd": "touch ran"}));
    assert_eq!(req["file"], env.md_file());
    assert_eq!(req["line"], 5);
    assert!(is_task_id(&req["task_id"]));
    let approval_id = req["approval_id"]
        .as_i64()
        .expect("approval_id is an integer");
    // The summary tells how to approve.
    assert!(
        out.stdout
            .contains(&format!("heartbeat approve {approval_id}")),
        "stdout: {}",
        out.stdout
    );

    let task_id = req["task_id"].as_str().unwrap().to_string();
    assert_eq!(
        env.approval_rows(),
        vec![("pending".to_string(), "shell".to_string(), task_id.clone())]
    );

    // `approvals --json`: docs/reference.md#approvals-json.
    let list = env.cmd(["approvals", "--json"]).output();
    list.code(0);
    let list = list.json();
    let list = list.as_array().expect("approvals --json is an array");
    assert_eq!(list.len(), 1);
    let a = &list[0];
    assert_has_keys(a, &APPROVAL_KEYS);
    assert_eq!(a["id"], approval_id);
    assert_eq!(a["task_id"], task_id.as_str());
    assert_eq!(a["state"], "pending");
    assert_eq!(a["tool"], "shell");
    assert_eq!(a["input"], json!({"cmd": "touch ran"}));
    assert_eq!(a["file"], env.md_file());
    assert_eq!(a["line"], 5);
    assert_eq!(a["section"], "recurring");
    assert_eq!(a["text"], "@shell {\"cmd\": \"touch ran\"}");
    assert_eq!(a["created_at"], ts(NOW));
    assert_eq!(a["decided_at"], json!(null));
    assert_eq!(a["decided_by"], json!(null));
    assert_eq!(a["reason"], json!(null));

    // A later run does not queue it again while it is pending.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.events("approval_requested").len(), 1);
    assert_eq!(env.approval_rows().len(), 1);
    assert!(!env.exists("ran"));
}

#[test]
fn full_autonomy_runs_ask_tools() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"echo out; touch ran\"}\n");
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    assert!(env.exists("ran"));
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["tool"], "shell");
    assert_eq!(ok[0]["exit_code"], 0);
    assert_eq!(ok[0]["output"], "out\n");
    assert!(env.events("approval_requested").is_empty());
    assert_eq!(env.events("run_started")[0]["autonomy"], "full");
}

#[test]
fn observe_runs_nothing_and_skips_with_reason_observe() {
    let env = Env::new(
        "## Recurring\n- [ ] @shell {\"cmd\": \"touch ran\"}\n- [ ] @log {\"text\": \"auto tool\"}\n",
    );
    let out = env.run_with(NOW, &["--autonomy", "observe"]);
    out.code(0);
    assert!(!env.exists("ran"));
    assert!(env.events("task_succeeded").is_empty());
    assert!(env.events("approval_requested").is_empty());
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 2, "{:#?}", env.audit());
    for s in &skipped {
        assert_eq!(s["reason"], "observe");
        assert!(is_task_id(&s["task_id"]));
    }
    assert_eq!(skipped[0]["tool"], "shell");
    assert_eq!(skipped[1]["tool"], "log");
    assert!(!env.db_path().exists() || env.approval_rows().is_empty());
}

#[test]
fn tool_policy_deny_skips_with_denied_by_policy_even_in_full_autonomy() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"touch ran\"}\n")
        .config("[tools.shell]\napproval = \"deny\"\n");
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    assert!(!env.exists("ran"));
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "denied_by_policy");
    assert_eq!(skipped[0]["tool"], "shell");
    assert!(env.events("approval_requested").is_empty());
}

#[test]
fn check_says_denied_by_policy_for_a_tool_policy_deny_and_file_for_a_persons_task() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"touch ran\"}\n")
        .config("[tools.shell]\napproval = \"deny\"\n");
    let out = env.cmd(["check", "--json"]).now(NOW).output();
    out.code(0);
    let task = &out.json()["tasks"][0];
    assert_eq!(task["decision"], "denied_by_policy", "{task:#}");
    assert_eq!(task["provenance"], "file", "{task:#}");
    let text = env.cmd(["check"]).now(NOW).output();
    text.code(0);
    assert!(
        text.stdout.contains(" denied_by_policy "),
        "{}",
        text.stdout
    );
}

#[test]
fn recurring_reminder_every_run_one_time_reminder_once_and_never_ticked() {
    let md =
        "## Recurring\n- [ ] Stretch and drink water\n\n## One-time\n- [ ] Renew the passport\n";
    let env = Env::new(md);
    for (i, now) in [
        "2026-05-01T10:00:00Z",
        "2026-05-01T10:30:00Z",
        "2026-05-02T10:00:00Z",
    ]
    .iter()
    .enumerate()
    {
        let out = env.run_once(now);
        out.code(0);
        let reminded = env.events("task_reminded");
        let stretch: Vec<_> = reminded
            .iter()
            .filter(|e| e["text"] == "Stretch and drink water")
            .collect();
        let passport: Vec<_> = reminded
            .iter()
            .filter(|e| e["text"] == "Renew the passport")
            .collect();
        assert_eq!(stretch.len(), i + 1, "recurring: every run");
        assert_eq!(passport.len(), 1, "one-time: once only");
        assert_eq!(stretch[0]["line"], 2);
        assert_eq!(stretch[0]["file"], env.md_file());
        assert_eq!(passport[0]["line"], 5);
        assert!(is_task_id(&passport[0]["task_id"]));
        // A reminder is listed in the run's summary.
        assert!(
            out.stdout.contains("Stretch and drink water"),
            "stdout: {}",
            out.stdout
        );
    }
    // Ticking is for whoever does it: the file is untouched.
    assert_eq!(env.read("HEARTBEAT.md"), md);
    assert!(env.events("task_marked_done").is_empty());
}

#[test]
fn a_one_time_reminder_already_given_is_shown_reminded_not_not_due() {
    let env = Env::new("## One-time\n- [ ] Renew the passport\n");
    let check = |now: &str| {
        let out = env.cmd(["check", "--json"]).now(now).output();
        out.code(0);
        out.json()["tasks"][0].clone()
    };
    assert_eq!(check("2026-05-01T09:00:00Z")["decision"], "remind");
    env.run_once("2026-05-01T10:00:00Z").code(0);
    let t = check("2026-05-01T11:00:00Z");
    assert_eq!(t["decision"], "reminded", "{t:#}");
    assert_eq!(t["next_due"], Value::Null, "{t:#}");
    let out = env.cmd(["check"]).now("2026-05-01T11:00:00Z").output();
    out.code(0);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("Renew the passport"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(line.contains("reminded"), "{line}");
    assert!(!line.contains("not_due"), "{line}");
    // status says it waits for the person, until it is ticked.
    let out = env.cmd(["status"]).now("2026-05-01T11:00:00Z").output();
    out.code(0);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("reminded:") && l.contains("HEARTBEAT.md:2 Renew the passport")),
        "{}",
        out.stdout
    );
    let st = env
        .cmd(["status", "--json"])
        .now("2026-05-01T11:00:00Z")
        .output();
    st.code(0);
    let st = st.json();
    assert_eq!(st["reminded"][0]["text"], "Renew the passport", "{st}");
    assert_eq!(st["reminded"][0]["line"], 2, "{st}");
    env.write("HEARTBEAT.md", "## One-time\n- [x] Renew the passport\n");
    let st = env
        .cmd(["status", "--json"])
        .now("2026-05-01T12:00:00Z")
        .output();
    assert_eq!(st.json()["reminded"], json!([]));
}

#[test]
fn plain_tasks_agent_sends_the_prompt_to_the_agent_tool_on_stdin() {
    let env = Env::new("## Recurring\n- [ ] Summarise   the unread mail\n").config(
        r#"plain_tasks = "agent"

[tools.agent]
command = ["sh", "-c", "cat > agent-stdin.txt"]
approval = "auto"
"#,
    );
    env.run_once(NOW).code(0);
    let stdin = env.read("agent-stdin.txt");
    assert!(stdin.ends_with('\n'), "one JSON line: {stdin:?}");
    assert_eq!(stdin.lines().count(), 1, "one JSON line: {stdin:?}");
    let v: serde_json::Value = serde_json::from_str(stdin.trim_end()).expect("stdin is JSON");
    // The task text, as written in the file (docs/reference.md#plain-tasks).
    assert_eq!(v, json!({"prompt": "Summarise   the unread mail"}));
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["tool"], "agent");
    assert!(env.events("task_reminded").is_empty());
}

#[test]
fn plain_tasks_agent_queues_when_the_agent_asks() {
    // `agent` defaults to approval "ask": in cautious mode the prompt waits for a person.
    let env = Env::new("## Recurring\n- [ ] Water the plants\n").config(
        r#"plain_tasks = "agent"

[tools.agent]
command = ["sh", "-c", "cat > agent-stdin.txt"]
"#,
    );
    env.run_once(NOW).code(0);
    assert!(!env.exists("agent-stdin.txt"));
    let req = env.events("approval_requested");
    assert_eq!(req.len(), 1, "{:#?}", env.audit());
    assert_eq!(req[0]["tool"], "agent");
    assert_eq!(req[0]["input"], json!({"prompt": "Water the plants"}));
}

#[test]
fn nothing_due_prints_nothing() {
    let env = Env::new("## Recurring\n\n### Every 1d\n- [ ] @log {\"text\": \"daily\"}\n");
    let first = env.run_once(NOW);
    first.code(0);
    assert!(!first.stdout.is_empty());
    let second = env.run_once("2026-05-01T12:00:00Z");
    second.code(0);
    assert_eq!(second.stdout, "", "nothing happened, nothing printed");
    assert_eq!(env.events("task_succeeded").len(), 1);
}

#[test]
fn quiet_still_says_what_waits_for_a_person() {
    // An approval queued and a reminder due: cron mails what -q prints, so both are said.
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"fine\"}\n- [ ] @shell {\"cmd\": \"true\"}\n- [ ] water the plants\n",
    );
    let out = env.run_with(NOW, &["-q"]);
    out.code(0);
    let id = env.events("approval_requested")[0]["approval_id"]
        .as_i64()
        .unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!("APPROVE   #{id} @shell HEARTBEAT.md:3 — heartbeat approve {id}").as_str(),
            "REMIND    HEARTBEAT.md:4 water the plants",
        ],
        "stdout: {}",
        out.stdout
    );
    assert!(!out.stdout.contains("fine"), "a success stays quiet");
}

#[test]
fn an_approval_that_expired_unseen_is_said_once_under_quiet_and_sent_to_the_channels() {
    // A command channel that takes approvals records every message it is given.
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"true\"}\n").config(
        "timezone = \"UTC\"\napproval_ttl = \"1h\"\n[channels.pager]\nkind = \"command\"\n\
         command = [\"sh\", \"-c\", \"cat >> got.jsonl\"]\nevents = [\"approval\"]\n",
    );
    env.run_with(NOW, &["-q"]).code(0);
    let out = env.run_with("2026-05-01T11:00:00Z", &["-q"]);
    out.code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "EXPIRED   #1 @shell HEARTBEAT.md:2 — queued 2026-05-01 10:00 UTC, never decided",
            "APPROVE   #2 @shell HEARTBEAT.md:2 — heartbeat approve 2",
        ],
        "stdout: {}",
        out.stdout
    );
    // Said once: the next run has nothing more to say about it.
    let out = env.run_with("2026-05-01T11:05:00Z", &["-q"]);
    out.code(0);
    assert_eq!(out.stdout, "");
    // Without -q, the line is there too.
    let out = env.run_once("2026-05-01T12:05:00Z");
    out.code(0);
    assert!(
        out.stdout
            .contains("EXPIRED   #2 @shell HEARTBEAT.md:2 — queued 2026-05-01 11:00 UTC"),
        "stdout: {}",
        out.stdout
    );

    let got: Vec<serde_json::Value> = env
        .read("got.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let titles: Vec<&str> = got.iter().map(|m| m["title"].as_str().unwrap()).collect();
    assert_eq!(titles.len(), 5, "{got:#?}");
    assert!(titles[0].starts_with("approval #1 @shell"), "{titles:?}");
    assert_eq!(titles[1], "approval #1 expired", "{titles:?}");
    assert!(titles[2].starts_with("approval #2 @shell"), "{titles:?}");
    assert_eq!(titles[3], "approval #2 expired", "{titles:?}");
    let expired = &got[1];
    assert_eq!(expired["type"], "approval");
    assert!(
        expired["text"]
            .as_str()
            .unwrap()
            .contains("queued 2026-05-01 10:00 UTC, never decided"),
        "{expired:#}"
    );
    assert_eq!(expired["data"]["approval_id"], 1);
    assert_eq!(expired["data"]["reason"], "ttl");
    assert_eq!(expired["data"]["tool"], "shell");
    assert_eq!(
        expired["data"]["task_id"],
        env.events("approval_expired")[0]["task_id"]
    );
}

#[test]
fn quiet_prints_only_failures() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"fine\"}\n");
    let out = env.run_with(NOW, &["-q"]);
    out.code(0);
    assert_eq!(out.stdout, "");

    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"fine\"}\n- [ ] @shell {\"cmd\": \"exit 4\"}\n",
    );
    let out = env.run_with(NOW, &["-q", "--autonomy", "full"]);
    out.code(1);
    assert!(!out.stdout.contains("fine"), "stdout: {}", out.stdout);
    assert!(
        out.stdout.contains(":3"),
        "the failure, with its line: {}",
        out.stdout
    );
}

#[test]
fn run_cap_skips_the_rest_and_they_run_at_a_later_run() {
    // One-time tasks: the capped one runs next time (the first is done by then).
    let env = Env::new(
        "## One-time\n- [ ] @log {\"text\": \"first\"}\n- [ ] @log {\"text\": \"second\"}\n",
    )
    .config("max_tasks_per_run = 1\n");
    env.run_once(NOW).code(0);
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "run_cap");
    assert_eq!(skipped[0]["tool"], "log");
    assert_eq!(env.events("run_finished")[0]["skipped"], 1);
    env.run_once("2026-05-01T10:10:00Z").code(0);
    let outputs: Vec<Value> = env
        .events("task_succeeded")
        .into_iter()
        .map(|e| e["output"].clone())
        .collect();
    assert_eq!(outputs, vec![json!("first"), json!("second")]);
}

#[test]
fn run_cap_does_not_starve_recurring_tasks() {
    // docs/reference.md#policy: past max_tasks_per_run tasks are skipped and run at a later run.
    // Two recurring tasks due at every run with a cap of 1 must take turns, or the second one
    // never runs at all.
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"first\"}\n- [ ] @log {\"text\": \"second\"}\n",
    )
    .config("max_tasks_per_run = 1\n");
    for now in [
        "2026-05-01T10:00:00Z",
        "2026-05-01T10:30:00Z",
        "2026-05-01T11:00:00Z",
    ] {
        env.run_once(now).code(0);
    }
    let outputs: Vec<Value> = env
        .events("task_succeeded")
        .into_iter()
        .map(|e| e["output"].clone())
        .collect();
    assert_eq!(outputs.len(), 3);
    assert!(
        outputs.contains(&json!("second")),
        "the capped task never ran in three runs: {outputs:?}"
    );
}

#[test]
fn pending_approvals_expire_after_the_ttl_and_are_queued_again() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"true\"}\n")
        .config("approval_ttl = \"1h\"\n");
    env.run_once(NOW).code(0);
    env.run_once("2026-05-01T10:59:59Z").code(0);
    assert!(env.events("approval_expired").is_empty());
    env.run_once("2026-05-01T11:00:00Z").code(0);
    let expired = env.events("approval_expired");
    assert_eq!(expired.len(), 1, "{:#?}", env.audit());
    let requested = env.events("approval_requested");
    assert_eq!(requested.len(), 2, "queued again: {:#?}", env.audit());
    assert_eq!(expired[0]["approval_id"], requested[0]["approval_id"]);
    assert_eq!(expired[0]["task_id"], requested[0]["task_id"]);
    assert!(expired[0]["reason"].is_string(), "{}", expired[0]);
    let states: Vec<String> = env.approval_rows().into_iter().map(|r| r.0).collect();
    assert_eq!(states, vec!["expired", "pending"]);
    // The list by state.
    let all = env
        .cmd(["approvals", "--state", "all", "--json"])
        .output()
        .json();
    assert_eq!(all.as_array().unwrap().len(), 2);
    let pending = env.cmd(["approvals", "--json"]).output().json();
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["id"], requested[1]["approval_id"]);
}

#[test]
fn a_failed_one_time_task_is_not_ticked_and_runs_again() {
    let md = "## One-time\n- [ ] @shell {\"cmd\": \"test -e go\"}\n";
    let env = Env::new(md);
    env.run_with(NOW, &["--autonomy", "full"]).code(1);
    assert_eq!(env.read("HEARTBEAT.md"), md);
    env.write("go", "");
    env.run_with("2026-05-01T11:00:00Z", &["--autonomy", "full"])
        .code(0);
    assert_eq!(
        env.read("HEARTBEAT.md"),
        "## One-time\n- [x] @shell {\"cmd\": \"test -e go\"}\n"
    );
    assert_eq!(env.events("task_failed").len(), 1);
    assert_eq!(env.events("task_succeeded").len(), 1);
}

#[test]
fn write_and_append_file_tools() {
    let env = Env::new(
        "## Recurring\n- [ ] @append_file {\"path\": \"log.txt\", \"text\": \"line\\n\"}\n\n## One-time\n- [ ] @write_file {\"path\": \"out.txt\", \"text\": \"hello\"}\n",
    );
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    env.run_with("2026-05-01T11:00:00Z", &["--autonomy", "full"])
        .code(0);
    assert_eq!(env.read("out.txt"), "hello");
    assert_eq!(env.read("log.txt"), "line\nline\n");
    // Both ask by default: queued in cautious mode.
    let env =
        Env::new("## Recurring\n- [ ] @write_file {\"path\": \"out.txt\", \"text\": \"x\"}\n");
    env.run_once(NOW).code(0);
    assert!(!env.exists("out.txt"));
    assert_eq!(env.events("approval_requested").len(), 1);
}

#[test]
fn observe_shows_what_would_run() {
    // docs/reference.md#policy: in observe mode tasks are not run (task_skipped, reason observe)
    // and shown as 'would run'.
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n");
    let out = env.run_with(NOW, &["--autonomy", "observe"]);
    out.code(0);
    assert!(out.stdout.contains("would run"), "stdout: {}", out.stdout);
    assert!(
        out.stdout.contains("HEARTBEAT.md:2"),
        "stdout: {}",
        out.stdout
    );
}

#[test]
fn a_run_that_only_skips_by_policy_prints_nothing() {
    // docs/reference.md#run-output: the summary is printed when anything ran, was queued, failed,
    // was invalid or was reminded, and nothing otherwise (cron mails any output, at every run).
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"true\"}\n")
        .config("[tools.shell]\napproval = \"deny\"\n");
    let out = env.run_once(NOW);
    out.code(0);
    assert_eq!(env.events("task_skipped").len(), 1, "{:#?}", env.audit());
    assert_eq!(out.stdout, "", "nothing ran, nothing printed");
}

#[test]
fn several_files_run_and_tick_each() {
    let env = Env::empty();
    env.write(
        "a/HEARTBEAT.md",
        "## One-time\n- [ ] @log {\"text\": \"a\"}\n",
    );
    env.write("b/TODO.md", "## One-time\n- [ ] @log {\"text\": \"b\"}\n");
    let out = env
        .cmd([
            "run",
            "--once",
            "--file",
            "a/HEARTBEAT.md",
            "--file",
            "b/TODO.md",
        ])
        .output();
    out.code(0);
    assert_eq!(
        env.events("run_started")[0]["files"],
        json!([env.path("a/HEARTBEAT.md"), env.path("b/TODO.md")])
    );
    let ok: Vec<(Value, Value)> = env
        .events("task_succeeded")
        .into_iter()
        .map(|e| (e["output"].clone(), e["file"].clone()))
        .collect();
    assert_eq!(
        ok,
        vec![
            (json!("a"), json!(env.path("a/HEARTBEAT.md"))),
            (json!("b"), json!(env.path("b/TODO.md")))
        ]
    );
    assert_eq!(
        env.read("a/HEARTBEAT.md"),
        "## One-time\n- [x] @log {\"text\": \"a\"}\n"
    );
    assert_eq!(
        env.read("b/TODO.md"),
        "## One-time\n- [x] @log {\"text\": \"b\"}\n"
    );
    // The same task text in two files: two tasks.
    assert_ne!(
        env.events("task_succeeded")[0]["task_id"],
        env.events("task_succeeded")[1]["task_id"]
    );
}

#[test]
fn relative_state_dir_is_relative_to_the_working_directory() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n");
    let out = env
        .cmd(["run", "--once"])
        .args(["--state-dir", "rel-state"])
        .output();
    out.code(0);
    assert!(env.path("rel-state/audit.jsonl").is_file());
    assert!(env.path("rel-state/heartbeat.db").is_file());
}

#[test]
fn control_characters_in_task_text_never_reach_the_terminal_raw() {
    let env = Env::new(
        "## Recurring\n- [ ] @log {\"text\": \"\\u001b[31mred\\u0007\"}\n- [ ] plain \u{1b}[2J clear\n",
    );
    let out = env.run_once(NOW);
    out.code(0);
    assert!(out.stdout.contains("red"), "{}", out.stdout);
    assert!(out.stdout.contains("clear"), "{}", out.stdout);
    assert!(
        !out.stdout.contains('\u{1b}') && !out.stdout.contains('\u{7}'),
        "raw control characters on stdout: {:?}",
        out.stdout
    );
    // The audit log keeps the real text (JSON-escaped).
    assert_eq!(
        env.events("task_succeeded")[0]["output"],
        "\u{1b}[31mred\u{7}"
    );
}

#[test]
fn verbose_diagnostics_go_to_stderr_only() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n");
    let quiet = env.cmd(["check", "--json"]).output();
    quiet.code(0);
    assert_eq!(quiet.stderr, "");
    let verbose = env.cmd(["-v", "check", "--json"]).output();
    verbose.code(0);
    assert!(!verbose.stderr.is_empty());
    assert_eq!(
        verbose.json(),
        quiet.json(),
        "stdout stays one JSON document"
    );
}
