//! `heartbeat mcp` from an agent's side: its powers are bounded and a person
//! hears of what it does (pause, resume, deny), and the protocol's faults (a repeated request
//! id, an oversized request, undeclared arguments, odd client names, a client that leaves)
//! are answered, never run or dropped.
//!
//! The client (`mcp_server::Client`) writes raw JSON-RPC lines where needed (a fault is often
//! one a friendly client would not make) and reads every answer with a deadline.

use std::io::Write;

use serde_json::{Value, json};

use crate::common::*;
use crate::mcp_server::Client;
use crate::tg_double::TgDouble;

// ---------------------------------------------------------------------------------------
// Protocol faults

#[test]
fn a_repeated_request_id_is_answered_with_an_error_and_never_carried_out() {
    let env = Env::new("## Recurring\n");
    let mut agent = Client::connect(&env);
    let pause = |id: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "pause", "arguments": {"for": "1h"}}})
    };
    agent.send(&pause(json!(7)));
    let first = agent.answer_to(&json!(7));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let paused = env.events("paused").len();
    assert_eq!(paused, 1);

    // The same id again, even for another request: an error, and nothing done.
    agent.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "resume", "arguments": {}}}));
    let second = agent.answer_to(&json!(7));
    assert_eq!(second["error"]["code"], -32600, "{second}");
    let message = second["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("request id 7 was already used"),
        "{message}"
    );
    assert!(env.events("resumed").is_empty(), "{:#?}", env.audit());
    // The id of `initialize` is taken too, and a string id is tracked as well.
    agent.send(&pause(json!(1)));
    assert_eq!(agent.answer_to(&json!(1))["error"]["code"], -32600);
    agent.send(&pause(json!("a")));
    assert!(agent.answer_to(&json!("a"))["result"].is_object());
    agent.send(&pause(json!("a")));
    assert_eq!(agent.answer_to(&json!("a"))["error"]["code"], -32600);
    // "7" is not 7.
    agent.send(&pause(json!("7")));
    assert!(agent.answer_to(&json!("7"))["result"].is_object());
    assert_eq!(env.events("paused").len(), 3, "{:#?}", env.audit());
    // The session goes on.
    assert!(agent.call("status", json!({})).is_ok());
}

#[test]
fn an_oversized_request_is_answered_with_its_size_and_the_session_goes_on() {
    let env = Env::new("## Recurring\n");
    let mut agent = Client::connect(&env);
    let pad = "x".repeat(16 * 1024 * 1024);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"name\":\"pause\",\
         \"arguments\":{{\"reason\":\"{pad}\"}}}},\"id\":42}}"
    );
    agent.send_raw(format!("{line}\n").as_bytes());
    let answer = agent.answer_to(&json!(42));
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{} bytes", line.len())) && message.contains("16 MiB"),
        "{message}"
    );
    assert!(env.events("paused").is_empty());
    assert!(agent.call("status", json!({})).is_ok());
}

#[test]
fn a_client_that_leaves_is_a_normal_end() {
    let env = Env::new("## Recurring\n");
    // Before `initialize`: nothing said at all.
    let out = Client::start(env.cmd(["mcp"])).leave();
    out.code(0);
    // After a line that is not a message.
    let mut agent = Client::start(env.cmd(["mcp"]));
    agent.send_raw(b"not json\n");
    agent.leave().code(0);
    // Gone at once after `initialize`, before reading its answer.
    let mut child = env.cmd(["mcp"]).spawn_piped();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tester", "version": "1.0"}}});
    // The server may already have gone (it found nobody reading): that is the point.
    let _ = writeln!(stdin, "{init}");
    drop(stdin);
    wait_output(child, "heartbeat mcp", WAIT).code(0);
    // After a session.
    let mut agent = Client::connect(&env);
    agent.call("status", json!({})).unwrap();
    agent.leave().code(0);
}

#[test]
fn an_undeclared_argument_is_refused_naming_the_key() {
    let env = Env::new("## Recurring\n");
    let mut agent = Client::connect(&env);
    let r = agent.request(
        "tools/call",
        json!({"name": "pause", "arguments": {"for": "1h", "forever": true}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unknown argument \"forever\"") && message.contains("\"for\""),
        "{message}"
    );
    assert!(env.events("paused").is_empty());
    let r = agent.request(
        "tools/call",
        json!({"name": "status", "arguments": {"verbose": true}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"verbose\""),
        "{r}"
    );
    // Declared arguments still work.
    assert!(agent.call("approvals", json!({"state": "all"})).is_ok());
}

#[test]
fn a_client_name_becomes_a_plain_bounded_name() {
    let env = Env::new("## Recurring\n");
    let long = format!("Claude Code ✨ <b>{}", "x".repeat(100));
    let expected = format!("mcp:Claude_Code____b_{}", "x".repeat(64 - 17));
    for _ in 0..2 {
        let mut agent = Client::connect_as(&env, &long);
        let paused = agent.call("pause", json!({"for": "1h"})).unwrap();
        assert_eq!(paused["by"], expected.as_str());
        agent.call("resume", json!({})).unwrap();
    }
    assert_eq!(env.events("paused").len(), 2);
    for e in env.events("paused") {
        assert_eq!(e["by"], expected.as_str(), "the same name, the same way");
    }
    let mut nameless = Client::connect_as(&env, "  ");
    let paused = nameless.call("pause", json!({"for": "1h"})).unwrap();
    assert_eq!(paused["by"], "mcp:unknown");
}

// ---------------------------------------------------------------------------------------
// An agent's powers are bounded and heard

/// The chat in `chat_ids`.
const CHAT: i64 = 111;

/// A shell task that asks for approval (cautious autonomy, the default).
const ASK_MD: &str = "## Recurring\n- [ ] @shell {\"cmd\": [\"true\"]}\n";

/// A sandbox with Telegram pointed at a fresh double; `tg_extra` goes in `[telegram]`.
fn with_telegram(md: &str, tg_extra: &str) -> (TgDouble, Env) {
    let tg = TgDouble::start();
    tg.expect_token(TG_TOKEN);
    let env = Env::new(md).config(&format!(
        "timezone = \"UTC\"\n{}",
        tg_toml(&tg.url(), &[CHAT], tg_extra)
    ));
    (tg, env)
}

fn at(minutes: i64) -> String {
    let t = chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::minutes(minutes);
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `run --once -q` with the token five minutes on, which must exit 0: what it says of the
/// agent's doings.
#[track_caller]
fn quiet_run_five_minutes_on(env: &Env) -> Output {
    let run = env
        .cmd(["run", "--once", "-q"])
        .token()
        .now(&at(5))
        .output();
    run.code(0);
    run
}

fn ts_of(v: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("a time: {v}")))
        .unwrap()
        .into()
}

/// The texts of the messages sent to `CHAT` (as sent, HTML).
fn texts(tg: &TgDouble) -> Vec<String> {
    tg.calls_to("sendMessage")
        .iter()
        .filter(|c| c.body["chat_id"] == CHAT)
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn an_agents_pause_lasts_at_most_a_day() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n");
    let day = chrono::Duration::hours(24);
    let now = ts_of(&json!(NOW));
    let mut agent = Client::connect(&env);
    for asked in [json!({"for": "50years"}), json!({})] {
        let paused = agent.call("pause", asked.clone()).unwrap();
        assert_eq!(paused["capped"], true, "{asked}: {paused}");
        let until = ts_of(&paused["until"]);
        assert!(
            until >= now + day && until < now + day + chrono::Duration::minutes(1),
            "{asked}: {paused}"
        );
        assert!(
            paused["note"].as_str().unwrap().contains("at most 1day"),
            "{paused}"
        );
        let status = env.cmd(["status", "--json"]).output().json();
        assert_eq!(status["paused_until"], paused["until"]);
        assert_eq!(status["paused_by"], "mcp:tester");
    }
    let short = agent.call("pause", json!({"for": "2h"})).unwrap();
    assert_eq!(short["capped"], false);
    assert!(short.get("note").is_none(), "{short}");
    assert_eq!(
        ts_of(&short["until"]).timestamp() / 60,
        (now + chrono::Duration::hours(2)).timestamp() / 60
    );
    // Every pause the agent made is audited as its own.
    let paused = env.events("paused");
    assert_eq!(paused.len(), 3);
    assert!(paused.iter().all(|e| e["by"] == "mcp:tester"));
    // A day later nothing of it holds.
    agent.call("pause", json!({"for": "100h"})).unwrap();
    env.run_once(&at(23 * 60)).code(0);
    assert!(env.events("task_succeeded").is_empty());
    env.run_once(&at(24 * 60 + 1)).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1, "{:#?}", env.audit());
}

#[test]
fn an_agents_pause_reason_is_stored_redacted() {
    let env = Env::new("## Recurring\n");
    let mut agent = Client::connect(&env);
    let reason = "rotating keys, password=hunter2secret";
    agent
        .call("pause", json!({"for": "1h", "reason": reason}))
        .unwrap();
    // The pause row, the agent's notice for the next run, and the audit line.
    let db = env.db();
    let stored: String = db
        .query_row("SELECT reason FROM pause", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, "rotating keys, password=***");
    let notice: String = db
        .query_row("SELECT line FROM agent_notices", [], |r| r.get(0))
        .unwrap();
    assert!(notice.contains("password=***"), "{notice}");
    assert!(!notice.contains("hunter2"), "{notice}");
    assert_eq!(
        env.events("paused")[0]["reason"],
        "rotating keys, password=***"
    );
    let shown = env.cmd(["status", "--json"]).output().json();
    assert!(!shown.to_string().contains("hunter2"), "{shown}");
}

#[test]
fn an_agent_cannot_lift_or_replace_a_persons_pause() {
    let env = Env::new("## Recurring\n");
    env.cmd(["pause", "--reason", "maintenance"])
        .output()
        .code(0);
    let mut agent = Client::connect(&env);
    let refused = agent.call("resume", json!({})).unwrap_err();
    assert!(
        refused.contains("an agent cannot lift a person's pause") && refused.contains("by cli:"),
        "{refused}"
    );
    let refused = agent.call("pause", json!({"for": "1h"})).unwrap_err();
    assert!(
        refused.contains("runs are paused by cli:")
            && refused.contains("a person's pause is theirs to change or end"),
        "{refused}"
    );
    let status = env.cmd(["status", "--json"]).output().json();
    assert_eq!(status["paused"], true);
    assert_eq!(
        status["paused_until"],
        Value::Null,
        "the person's pause stands"
    );
    assert!(status["paused_by"].as_str().unwrap().starts_with("cli:"));
    assert_eq!(env.events("paused").len(), 1);
    assert!(env.events("resumed").is_empty());
    let run = env.run_once(&at(5));
    run.code(0);
    assert_eq!(run.stdout, "skipped: paused until resumed (maintenance)\n");

    // Once the person resumed, the agent may pause, and lift its own pause.
    env.cmd(["resume"]).output().code(0);
    agent.call("pause", json!({"for": "1h"})).unwrap();
    let resumed = agent.call("resume", json!({})).unwrap();
    assert_eq!(resumed["resumed"], true);
    assert_eq!(env.events("resumed").last().unwrap()["by"], "mcp:tester");
    assert_eq!(
        agent.call("resume", json!({})).unwrap()["resumed"],
        false,
        "nothing to resume"
    );
}

#[test]
fn what_an_agent_does_the_person_hears_on_the_phone_and_at_the_terminal() {
    let (tg, env) = with_telegram(ASK_MD, "");
    env.cmd(["run", "--once"]).token().output().code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    let before = texts(&tg).len();

    let mut agent = Client::connect(&env);
    agent
        .call("deny", json!({"id": 1, "reason": "not now"}))
        .unwrap();
    agent
        .call("pause", json!({"for": "2h", "reason": "deploy"}))
        .unwrap();
    agent.call("resume", json!({})).unwrap();
    agent.call("pause", json!({"for": "3h"})).unwrap();

    let run = quiet_run_five_minutes_on(&env);
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        [
            "AGENT     mcp:tester denied #1 @shell HEARTBEAT.md:2: not now",
            "AGENT     mcp:tester paused runs until 2026-05-01 12:00 UTC (deploy); heartbeat resume ends it",
            "AGENT     mcp:tester resumed runs (paused by mcp:tester)",
            "AGENT     mcp:tester paused runs until 2026-05-01 13:00 UTC; heartbeat resume ends it",
        ],
        "{}",
        run.stdout
    );
    // The same four reached the phone, as messages of kind `agent`.
    let sent: Vec<String> = texts(&tg).split_off(before);
    assert_eq!(sent.len(), 4, "{sent:#?}");
    assert!(sent[0].contains("mcp:tester denied #1 @shell"), "{sent:#?}");
    assert!(sent[1].contains("mcp:tester paused runs until 2026-05-01 12:00 UTC (deploy)"));
    assert!(sent[2].contains("mcp:tester resumed runs"));
    assert!(sent[3].contains("mcp:tester paused runs until 2026-05-01 13:00 UTC"));
    let kinds: Vec<Value> = env
        .events("notification_sent")
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "agent").count(),
        4,
        "{kinds:?}"
    );

    // Printed once; the skipped run says who paused.
    let run = env.cmd(["run", "--once"]).token().now(&at(10)).output();
    run.code(0);
    assert_eq!(
        run.stdout,
        "skipped: paused by mcp:tester until 2026-05-01 13:00 UTC\n"
    );
    let skipped = env.events("run_skipped");
    assert_eq!(skipped.last().unwrap()["reason"], "paused");
    assert_eq!(skipped.last().unwrap()["by"], "mcp:tester");
    let st = env.cmd(["status"]).output();
    assert!(st.stdout.contains("by mcp:tester"), "{}", st.stdout);
    assert_eq!(texts(&tg).len(), before + 4, "nothing told twice");
}

/// What the person is told cannot be turned around or split by the agent's reason: bidi
/// controls are shown escaped, line separators as spaces, at the terminal and on the phone.
#[test]
fn an_agents_reason_cannot_reorder_or_split_what_the_person_reads() {
    let (tg, env) = with_telegram(ASK_MD, "");
    let mut agent = Client::connect(&env);
    agent
        .call(
            "pause",
            json!({"for": "1h", "reason": "deploy\u{2028}mcp:tester resumed runs \u{202e}ti sdne emuser"}),
        )
        .unwrap();
    let run = quiet_run_five_minutes_on(&env);
    let sent = texts(&tg);
    for shown in [&run.stdout, &sent[0]] {
        assert!(!shown.contains(['\u{2028}', '\u{202e}']), "{shown:?}");
        assert!(
            shown.contains("deploy mcp:tester resumed runs \\u{202e}ti"),
            "{shown:?}"
        );
    }
}

/// A reason is stored and shown in `status`: an agent's is bounded like a proposal.
#[test]
fn an_agents_reason_is_bounded() {
    let env = Env::new(ASK_MD);
    env.run_once(NOW).code(0);
    let mut agent = Client::connect(&env);
    let long = "r".repeat(5000);
    for (tool, args) in [
        ("pause", json!({"for": "1h", "reason": long})),
        ("deny", json!({"id": 1, "reason": long})),
    ] {
        let refused = agent.call(tool, args).unwrap_err();
        assert!(refused.contains("2048-byte limit"), "{tool}: {refused}");
    }
    let status = env.cmd(["status", "--json"]).output().json();
    assert_eq!(status["paused"], false, "{status}");
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert!(env.events("paused").is_empty());
}

/// Where an agent may approve, its approval is heard like its denial.
#[test]
fn an_agents_approval_is_heard_too() {
    let (tg, env) = with_telegram(ASK_MD, "");
    env.write(
        "heartbeat.toml",
        format!(
            "{}\n[mcp_server]\nallow_approve = true\n",
            env.read("heartbeat.toml")
        ),
    );
    env.cmd(["run", "--once"]).token().output().code(0);
    let mut agent = Client::connect(&env);
    agent.call("approve", json!({"id": 1})).unwrap();
    let run = quiet_run_five_minutes_on(&env);
    assert!(
        run.stdout
            .contains("AGENT     mcp:tester approved #1 @shell HEARTBEAT.md:2"),
        "{}",
        run.stdout
    );
    assert!(
        texts(&tg)
            .iter()
            .any(|t| t.contains("mcp:tester approved #1 @shell")),
        "{:#?}",
        texts(&tg)
    );
}

#[test]
fn an_agents_action_is_urgent_in_quiet_hours() {
    let (tg, env) = with_telegram("## Recurring\n", "quiet_hours = \"00:00-23:59\"");
    let mut agent = Client::connect(&env);
    agent.call("pause", json!({"for": "1h"})).unwrap();
    env.cmd(["run", "--once"])
        .token()
        .now(&at(1))
        .output()
        .code(0);
    let sent = texts(&tg);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert!(sent[0].contains("mcp:tester paused runs"), "{sent:#?}");
    assert!(env.events("notification_held").is_empty());
}

#[test]
fn a_denied_approvals_message_is_edited_whoever_denied_it() {
    let md =
        "## Recurring\n- [ ] @shell {\"cmd\": [\"true\"]}\n- [ ] @shell {\"cmd\": [\"false\"]}\n";
    let (tg, env) = with_telegram(md, "");
    env.cmd(["run", "--once"]).token().output().code(0);
    let message_id: i64 = env
        .db()
        .query_row("SELECT message_id FROM tg_messages", [], |r| r.get(0))
        .unwrap();
    let keyboard = |tg: &TgDouble| {
        tg.message(CHAT, message_id).unwrap()["reply_markup"]["inline_keyboard"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|row| row[0]["callback_data"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(keyboard(&tg), ["hb:y:1", "hb:y:2"]);

    // Denied at the terminal: the next run edits the message.
    env.cmd(["deny", "1"]).output().code(0);
    env.cmd(["run", "--once"])
        .token()
        .now(&at(5))
        .output()
        .code(0);
    let shown = tg.message(CHAT, message_id).unwrap();
    let text = shown["text"].as_str().unwrap();
    assert!(text.contains("🚫 #1 denied by cli:"), "{text}");
    assert_eq!(keyboard(&tg), ["hb:y:2"], "{shown}");

    // Denied by an agent: the same.
    let mut agent = Client::connect(&env);
    agent.call("deny", json!({"id": 2})).unwrap();
    env.cmd(["run", "--once"])
        .token()
        .now(&at(10))
        .output()
        .code(0);
    let text = tg.message(CHAT, message_id).unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("🚫 #2 denied by mcp:tester"), "{text}");
    assert!(keyboard(&tg).is_empty());
    // Edited once each: a later run leaves it alone.
    let edits = tg.calls_to("editMessageText").len();
    assert_eq!(edits, 2);
    env.cmd(["run", "--once"])
        .token()
        .now(&at(15))
        .output()
        .code(0);
    assert_eq!(tg.calls_to("editMessageText").len(), edits);
}
