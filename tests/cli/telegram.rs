//! Telegram (docs/reference.md#telegram, docs/reference.md#outbox, the notification events and
//! `status --json`'s outbox): the summary after a
//! run, the outbox and its noise rules, button presses and chat commands collected by
//! `run --once`, the token's secrecy, `notify-test`, `telegram-chats`, and pause/resume.
//!
//! Every test talks to the Bot API double in `tg_double` (never the real Telegram): the config
//! points `telegram.api_url` at it, and the token is set in the child's environment only.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::*;
use crate::tg_double::{Call, TgDouble, parse_html};

/// The chat in `chat_ids` (a private chat: its id is the user's id).
const CHAT: i64 = 111;
/// A second allowed chat.
const CHAT2: i64 = 222;
/// A chat that is not in `chat_ids`.
const STRANGER: i64 = 999;

/// A tool that always fails, without approval.
const FAIL_TOOL: &str = "[tools.fail]\ncommand = [\"false\"]\napproval = \"auto\"\n";

/// A sandbox whose config points at a fresh double (which insists on [`TG_TOKEN`]).
/// `top` goes before the `[telegram]` table, `tg_extra` inside it.
fn setup(md: &str, chats: &[i64], top: &str, tg_extra: &str) -> (TgDouble, Env) {
    let tg = TgDouble::start();
    tg.expect_token(TG_TOKEN);
    let env = Env::new(md).config(&format!(
        "timezone = \"UTC\"\n{top}\n{}",
        tg_toml(&tg.url(), chats, tg_extra)
    ));
    (tg, env)
}

/// `run --once` at `now` with the token set.
fn run(env: &Env, now: &str) -> Output {
    env.cmd(["run", "--once"]).token().now(now).output()
}

fn text(call: &Call) -> &str {
    call.body["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {}", call.body))
}

/// The text as Telegram shows it (tags stripped, entities decoded); panics when Telegram would
/// refuse the HTML.
fn shown(call: &Call) -> String {
    parse_html(text(call)).unwrap_or_else(|e| panic!("invalid HTML ({e}): {}", text(call)))
}

fn sends(tg: &TgDouble) -> Vec<Call> {
    tg.calls_to("sendMessage")
}

fn sends_to(tg: &TgDouble, chat: i64) -> Vec<Call> {
    sends(tg)
        .into_iter()
        .filter(|c| c.body["chat_id"] == chat)
        .collect()
}

fn count(env: &Env, sql: &str) -> i64 {
    env.db()
        .query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn outbox_rows(env: &Env) -> i64 {
    count(env, "SELECT COUNT(*) FROM outbox")
}

/// `status --json`.
fn status(env: &Env) -> Value {
    let out = env.cmd(["status", "--json"]).token().output();
    out.code(0);
    out.json()
}

/// The message id Telegram gave the message carrying approval buttons in `chat`.
fn button_message_id(env: &Env, chat: i64) -> i64 {
    env.db()
        .query_row(
            "SELECT message_id FROM tg_messages WHERE chat_id = ?1 ORDER BY sent_at DESC LIMIT 1",
            [chat],
            |r| r.get(0),
        )
        .expect("a message with buttons was remembered")
}

fn keyboard_data(call: &Call) -> Vec<Vec<String>> {
    call.body
        .pointer("/reply_markup/inline_keyboard")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    row.as_array()
                        .expect("a keyboard row is an array")
                        .iter()
                        .map(|b| b["callback_data"].as_str().unwrap_or("").to_string())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn buttons_for(id: i64) -> Vec<String> {
    vec![
        format!("hb:y:{id}"),
        format!("hb:a:{id}"),
        format!("hb:n:{id}"),
    ]
}

fn minutes_after_now(m: i64) -> String {
    let t = chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::minutes(m);
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

// ---------------------------------------------------------------------------------------
// (1) the summary

#[test]
fn telegram_summary_goes_to_every_chat_as_escaped_html_with_buttons() {
    let md = "## Recurring\n\
              - [ ] @log {\"text\": \"tag <b>& amp\"}\n\
              - [ ] @shell {\"cmd\": \"touch ran\"}\n\
              - [ ] @fail\n";
    let (tg, env) = setup(md, &[CHAT, CHAT2], FAIL_TOOL, "");
    run(&env, NOW).code(1);

    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "one summary per chat: {sent:#?}");
    let chats: BTreeSet<i64> = sent
        .iter()
        .map(|c| c.body["chat_id"].as_i64().unwrap())
        .collect();
    assert_eq!(chats, BTreeSet::from([CHAT, CHAT2]));
    for call in &sent {
        assert_eq!(call.token, TG_TOKEN);
        assert_eq!(call.body["parse_mode"], "HTML", "{}", call.body);
        let html = text(call);
        let lines: Vec<&str> = html.lines().collect();
        assert_eq!(
            lines.len(),
            7,
            "counts, one line per task, the queued task's input:\n{html}"
        );
        assert_eq!(
            lines[0],
            "<b>heartbeat</b>: 1 succeeded, 1 failed, 1 queued"
        );
        let ok = lines
            .iter()
            .find(|l| l.starts_with("✅"))
            .expect("a ✅ line");
        assert!(ok.contains("<b>@log</b>"), "{ok}");
        // The task's `<b>&` arrives escaped, never as markup.
        assert!(ok.contains("tag &lt;b&gt;&amp; amp"), "{ok}");
        assert!(!ok.contains("tag <b>"), "{ok}");
        let queued = lines
            .iter()
            .find(|l| l.starts_with("⏳"))
            .expect("a ⏳ line");
        assert!(queued.contains("<b>@shell</b>"), "{queued}");
        assert!(queued.contains("approval #1"), "{queued}");
        assert!(
            queued.contains("<code>heartbeat approve 1</code>"),
            "{queued}"
        );
        // Under it, the whole input that the buttons approve, pretty-printed.
        let at = lines.iter().position(|l| l.starts_with("⏳")).unwrap();
        assert_eq!(
            lines[at + 1..at + 4],
            [
                "<code>{</code>",
                "<code>  &quot;cmd&quot;: &quot;touch ran&quot;</code>",
                "<code>}</code>"
            ],
            "{html}"
        );
        let failed = lines
            .iter()
            .find(|l| l.starts_with("❌"))
            .expect("a ❌ line");
        assert!(failed.contains("<b>@fail</b>"), "{failed}");
        assert!(failed.contains("exit status 1"), "{failed}");
        // Telegram's HTML parser accepts it, and shows the text as written.
        let plain = shown(call);
        assert!(plain.contains("tag <b>& amp"), "{plain}");
        assert!(plain.contains("heartbeat approve 1"), "{plain}");
        // One row of Approve / Always / Deny for the queued approval.
        assert_eq!(keyboard_data(call), vec![buttons_for(1)]);
        let labels: Vec<&str> = call.body["reply_markup"]["inline_keyboard"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        assert_eq!(labels.len(), 3);
        assert!(labels[0].contains("Approve"), "{labels:?}");
        assert!(labels[1].contains("Always"), "{labels:?}");
        assert!(labels[2].contains("Deny"), "{labels:?}");
    }
    // Accepted by the double: it stored the message as Telegram would.
    let stored = tg
        .message(CHAT, button_message_id(&env, CHAT))
        .expect("known message");
    assert!(stored["text"].as_str().unwrap().contains("tag <b>& amp"));

    let ev = env.events("notification_sent");
    assert_eq!(ev.len(), 2, "{:#?}", env.audit());
    for e in &ev {
        assert_eq!(e["channel"], "telegram");
        assert_eq!(e["error"], Value::Null);
        assert_eq!(e["queued"], false);
        assert!(e["run_id"].is_string(), "{e}");
    }
    let audited: BTreeSet<i64> = ev.iter().map(|e| e["chat_id"].as_i64().unwrap()).collect();
    assert_eq!(audited, BTreeSet::from([CHAT, CHAT2]));
    assert!(env.events("notification_failed").is_empty());
    assert_eq!(outbox_rows(&env), 0, "delivered messages leave the outbox");
    // `run --once` first looked for waiting presses, without waiting.
    let polls = tg.calls_to("getUpdates");
    assert_eq!(polls.len(), 1);
    assert_eq!(polls[0].body["timeout"], 0);
}

// ---------------------------------------------------------------------------------------
// (2) when a summary is sent

/// A task that is due once a week: the first run does something, the next one nothing.
const WEEKLY_LOG: &str = "## Recurring\n### Every 1w\n- [ ] @log {\"text\": \"weekly\"}\n";

#[test]
fn telegram_on_change_sends_nothing_for_an_empty_run() {
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "");
    run(&env, NOW).code(0);
    assert_eq!(sends(&tg).len(), 1);
    assert!(shown(&sends(&tg)[0]).contains("1 succeeded"));
    let second = run(&env, &minutes_after_now(60));
    second.code(0);
    assert_eq!(env.events("run_finished").len(), 2);
    assert_eq!(env.events("run_finished")[1]["succeeded"], 0);
    assert_eq!(sends(&tg).len(), 1, "a run that did nothing sends nothing");
    assert_eq!(env.events("notification_sent").len(), 1);
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn telegram_summary_always_reports_empty_runs() {
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "summary = \"always\"");
    run(&env, NOW).code(0);
    run(&env, &minutes_after_now(60)).code(0);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(shown(&sent[0]).contains("1 succeeded"));
    assert_eq!(shown(&sent[1]), "heartbeat: nothing to do");
    assert_eq!(env.events("notification_sent").len(), 2);
}

#[test]
fn telegram_summary_never_sends_only_failures() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"fine\"}\n";
    let (tg, env) = setup(md, &[CHAT], FAIL_TOOL, "summary = \"never\"");
    run(&env, NOW).code(0);
    assert!(sends(&tg).is_empty(), "successes alone are not sent");
    assert!(env.events("notification_sent").is_empty());

    env.write(
        "HEARTBEAT.md",
        "## Recurring\n- [ ] @log {\"text\": \"fine\"}\n- [ ] @fail\n",
    );
    run(&env, &minutes_after_now(10)).code(1);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    let html = text(&sent[0]);
    let lines: Vec<&str> = html.lines().collect();
    assert_eq!(lines.len(), 2, "only the failure:\n{html}");
    assert!(lines[0].contains("1 failed"), "{html}");
    assert!(!lines[0].contains("succeeded"), "{html}");
    assert!(
        lines[1].starts_with("❌") && lines[1].contains("@fail"),
        "{html}"
    );
    assert!(!html.contains("fine"), "{html}");
    assert_eq!(env.events("notification_sent")[0]["kind"], "failure");
}

// ---------------------------------------------------------------------------------------
// (3)-(4) the outbox

#[test]
fn telegram_down_keeps_the_message_in_the_outbox_until_the_next_run() {
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "");
    tg.drop_next("sendMessage", 1);
    let first = run(&env, NOW);
    first.code(0);
    assert!(
        first.stdout.contains("weekly"),
        "the run itself went on: {}",
        first.stdout
    );
    assert_eq!(sends(&tg).len(), 1, "tried once");
    assert!(tg.message(CHAT, 1001).is_none());
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["channel"], "telegram");
    assert_eq!(failed[0]["chat_id"], CHAT);
    assert_eq!(failed[0]["queued"], true);
    assert!(
        failed[0]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{}",
        failed[0]
    );
    assert!(env.events("notification_sent").is_empty());
    assert_eq!(outbox_rows(&env), 1);
    assert_eq!(status(&env)["outbox"], 1, "status --json counts the outbox");

    // The next run (which itself has nothing to say) delivers it.
    run(&env, &minutes_after_now(30)).code(0);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(text(&sent[1]), text(&sent[0]), "the same message, retried");
    assert!(shown(&sent[1]).contains("weekly"));
    let ok = env.events("notification_sent");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0]["chat_id"], CHAT);
    assert_eq!(outbox_rows(&env), 0);
    assert_eq!(status(&env)["outbox"], 0);
}

#[test]
fn telegram_502_is_a_queued_failure_and_costs_at_most_the_request_cap() {
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "");
    tg.fail_next_raw(
        "sendMessage",
        1,
        502,
        "text/html",
        "<html><body><h1>502 Bad Gateway</h1></body></html>",
    );
    run(&env, NOW).code(0);
    // teloxide sleeps 10 s before reading a 5xx; heartbeat gives up after 5 s. The error
    // says which happened (a loaded machine can stretch the run's own time, not this).
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no answer from Telegram within 5s")),
        "gave up at the request cap: {}",
        failed[0]
    );
    assert_eq!(failed[0]["queued"], true);
    assert_eq!(outbox_rows(&env), 1);
    run(&env, &minutes_after_now(30)).code(0);
    assert_eq!(sends(&tg).len(), 2);
    assert_eq!(env.events("notification_sent").len(), 1);
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn telegram_429_is_a_queued_failure_and_its_retry_after_is_honoured_across_runs() {
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "");
    tg.fail_next_raw(
        "sendMessage",
        1,
        429,
        "application/json",
        r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3600","parameters":{"retry_after":3600}}"#,
    );
    run(&env, NOW).code(0);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    assert!(
        failed[0]["error"].as_str().unwrap().contains("3600"),
        "{}",
        failed[0]
    );
    assert_eq!(outbox_rows(&env), 1);
    // Within the hour Telegram asked for, nothing is sent (asking again would only
    // prolong the limit): the message waits, and no new failure is logged.
    run(&env, &minutes_after_now(30)).code(0);
    assert_eq!(sends(&tg).len(), 1);
    assert_eq!(env.events("notification_failed").len(), 1);
    assert_eq!(outbox_rows(&env), 1);
    assert_eq!(status(&env)["outbox"], 1);
    let shown = env
        .cmd(["status"])
        .now(&minutes_after_now(30))
        .output()
        .stdout;
    assert!(
        shown.contains(
            "1 message(s) waiting (Telegram asked heartbeat to wait until 2026-05-01T11:00:00"
        ),
        "{shown}"
    );
    // After it, the message goes out.
    run(&env, &minutes_after_now(61)).code(0);
    assert_eq!(sends(&tg).len(), 2);
    assert_eq!(env.events("notification_sent").len(), 1);
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn telegram_outbox_drops_a_message_after_24h() {
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "");
    tg.drop_next("sendMessage", 1);
    run(&env, NOW).code(0);
    assert_eq!(outbox_rows(&env), 1);
    run(&env, "2026-05-02T10:30:00Z").code(0);
    assert_eq!(sends(&tg).len(), 1, "an old message is not sent");
    // The first attempt failed; a day later the message is dropped, and that is said.
    assert_eq!(
        env.events("notification_failed").len(),
        1,
        "{:#?}",
        env.audit()
    );
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "expired");
    assert_eq!(dropped[0]["chat_id"], CHAT);
    assert_eq!(outbox_rows(&env), 0);
}

// ---------------------------------------------------------------------------------------
// (5)-(9) quiet hours, dedupe, splitting, plain-text fallback, the daily cap

#[test]
fn telegram_quiet_hours_hold_successes_but_send_failures() {
    let (tg, env) = setup(
        "## Recurring\n- [ ] @log {\"text\": \"all fine\"}\n",
        &[CHAT],
        FAIL_TOOL,
        "quiet_hours = \"22:00-07:00\"",
    );
    run(&env, "2026-05-01T23:00:00Z").code(0);
    assert!(sends(&tg).is_empty(), "a success at night waits");
    assert_eq!(outbox_rows(&env), 1);
    assert!(
        env.events("notification_failed").is_empty(),
        "waiting is not failing"
    );

    env.write("HEARTBEAT.md", "## Recurring\n- [ ] @fail\n");
    run(&env, "2026-05-01T23:30:00Z").code(1);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 1, "a failure is urgent: {sent:#?}");
    assert!(shown(&sent[0]).contains("1 failed"));
    assert!(!shown(&sent[0]).contains("all fine"));
    assert_eq!(outbox_rows(&env), 1, "the success still waits");

    env.write("HEARTBEAT.md", "## Recurring\n");
    run(&env, "2026-05-02T07:30:00Z").code(0);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(shown(&sent[1]).contains("all fine"));
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn telegram_same_text_within_6h_is_not_sent_again() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"same every time\"}\n";
    let (tg, env) = setup(md, &[CHAT], "", "");
    run(&env, NOW).code(0);
    run(&env, &minutes_after_now(60)).code(0);
    run(&env, &minutes_after_now(5 * 60 + 59)).code(0);
    assert_eq!(sends(&tg).len(), 1, "identical summaries within 6 h");
    assert_eq!(outbox_rows(&env), 0, "a duplicate is dropped, not kept");
    run(&env, &minutes_after_now(6 * 60 + 1)).code(0);
    assert_eq!(sends(&tg).len(), 2, "after 6 h it goes again");
    assert_eq!(text(&sends(&tg)[0]), text(&sends(&tg)[1]));
}

#[test]
fn telegram_identical_messages_waiting_together_go_out_once() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"same every time\"}\n";
    let (tg, env) = setup(md, &[CHAT], "", "");
    tg.drop_next("sendMessage", 1);
    run(&env, NOW).code(0);
    assert_eq!(outbox_rows(&env), 1);
    // Telegram is back: the waiting summary and this run's identical one are one text.
    run(&env, &minutes_after_now(60)).code(0);
    let delivered: Vec<Call> = sends(&tg).into_iter().skip(1).collect();
    assert_eq!(
        delivered.len(),
        1,
        "the same text twice to one chat within 6 h: {delivered:#?}"
    );
    assert_eq!(outbox_rows(&env), 0);
}

/// 60 recurring `@log` tasks whose summary needs several messages.
fn sixty_logs() -> String {
    let mut md = String::from("## Recurring\n");
    for i in 0..60 {
        md.push_str(&format!(
            "- [ ] @log {{\"text\": \"task-{i:03} {}\"}}\n",
            "x".repeat(70)
        ));
    }
    md
}

#[test]
fn telegram_long_summary_is_split_at_line_boundaries() {
    let md = sixty_logs();
    let (tg, env) = setup(&md, &[CHAT], "max_tasks_per_run = 0", "");
    run(&env, NOW).code(0);
    let sent = sends(&tg);
    assert!(sent.len() >= 2, "{} message(s)", sent.len());
    let mut lines = Vec::new();
    for call in &sent {
        let html = text(call);
        assert!(
            html.chars().count() <= 4096,
            "{} chars",
            html.chars().count()
        );
        assert!(shown(call).chars().count() <= 4096);
        assert_eq!(call.body["parse_mode"], "HTML");
        for line in html.lines() {
            assert!(
                line.starts_with("<b>heartbeat</b>: 60 succeeded")
                    || line.starts_with("✅ <b>@log</b>"),
                "a part holds whole lines only: {line:?}"
            );
            lines.push(line.to_string());
        }
    }
    assert_eq!(lines.len(), 61, "every line once, none cut or lost");
    assert!(lines[0].starts_with("<b>heartbeat</b>"));
    for (i, line) in lines[1..].iter().enumerate() {
        assert!(line.contains(&format!("task-{i:03}")), "order kept: {line}");
    }
    assert_eq!(env.events("notification_sent").len(), 1);
    assert!(env.events("notification_failed").is_empty());
}

/// A message in several parts whose second part fails is not sent again from part 1: the
/// retry sends the parts Telegram did not accept.
#[test]
fn telegram_a_failed_part_is_resent_alone() {
    let md = sixty_logs();
    let (tg, env) = setup(&md, &[CHAT], "max_tasks_per_run = 0", "");
    tg.pass_next("sendMessage", 1);
    tg.drop_next("sendMessage", 1);
    run(&env, NOW).code(0);
    let first = sends(&tg);
    assert_eq!(env.events("notification_failed").len(), 1);
    let part1 = text(&first[0]).to_string();
    assert!(
        part1.starts_with("<b>heartbeat</b>: 60 succeeded"),
        "{part1}"
    );
    // The next run delivers what is missing, and part 1 only once.
    run(&env, &minutes_after_now(5)).code(0);
    let all: Vec<String> = sends(&tg).iter().map(|c| text(c).to_string()).collect();
    assert_eq!(
        all.iter().filter(|t| **t == part1).count(),
        1,
        "part 1 was sent again"
    );
    let lines: Vec<&str> = all
        .iter()
        .skip(2)
        .flat_map(|t| t.lines())
        .chain(part1.lines())
        .collect();
    for i in 0..60 {
        assert!(
            lines.iter().any(|l| l.contains(&format!("task-{i:03}"))),
            "task-{i:03} never delivered"
        );
    }
    assert_eq!(env.events("notification_sent").len(), 1);
}

#[test]
fn telegram_refused_html_is_sent_again_as_plain_text() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"a <b>& b\"}\n";
    let (tg, env) = setup(md, &[CHAT], "", "");
    tg.fail_next(
        "sendMessage",
        1,
        400,
        "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0",
    );
    run(&env, NOW).code(0);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[0].body["parse_mode"], "HTML");
    assert!(
        sent[1].body.get("parse_mode").is_none_or(Value::is_null),
        "the retry is plain text: {}",
        sent[1].body
    );
    assert_eq!(text(&sent[1]), shown(&sent[0]), "the same content, as text");
    assert!(text(&sent[1]).contains("a <b>& b"), "{}", text(&sent[1]));
    assert!(!text(&sent[1]).contains("&amp;"));
    let ok = env.events("notification_sent");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert!(env.events("notification_failed").is_empty());
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn telegram_a_message_telegram_rejects_is_dropped_at_once() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"hi\"}\n";
    // A 400 that is not about the HTML: dropped at once, never retried.
    let (tg, env) = setup(md, &[CHAT], "", "");
    tg.fail_chat(CHAT, 400, "Bad Request: chat not found");
    run(&env, NOW).code(0);
    assert_eq!(sends(&tg).len(), 1);
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "rejected");
    assert_eq!(outbox_rows(&env), 0);
    env.write("HEARTBEAT.md", "## Recurring\n");
    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(sends(&tg).len(), 1, "a rejected message is not retried");

    // Rejected as HTML, and again as plain text: rejected too.
    let (tg, env) = setup(md, &[CHAT], "", "");
    let entities =
        "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0";
    tg.fail_next("sendMessage", 1, 400, entities);
    tg.fail_next("sendMessage", 1, 400, "Bad Request: message text is empty");
    run(&env, NOW).code(0);
    assert_eq!(sends(&tg).len(), 2, "once as HTML, once as plain text");
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "rejected");
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn telegram_past_the_daily_cap_messages_fold_into_one() {
    let log = |t: &str| format!("## Recurring\n- [ ] @log {{\"text\": \"{t}\"}}\n");
    let (tg, env) = setup(
        &log("first"),
        &[CHAT],
        FAIL_TOOL,
        "quiet_hours = \"00:00-07:00\"\nmax_messages_per_day = 2",
    );
    // Three summaries wait through the night.
    run(&env, "2026-05-02T01:00:00Z").code(0);
    env.write("HEARTBEAT.md", log("second"));
    run(&env, "2026-05-02T02:00:00Z").code(0);
    env.write("HEARTBEAT.md", log("third"));
    run(&env, "2026-05-02T03:00:00Z").code(0);
    assert!(sends(&tg).is_empty());
    assert_eq!(outbox_rows(&env), 3);

    // Morning, two messages allowed today: one, then the rest folded into one.
    env.write("HEARTBEAT.md", "## Recurring\n");
    run(&env, "2026-05-02T07:30:00Z").code(0);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(shown(&sent[0]).contains("first"));
    let folded = shown(&sent[1]);
    assert!(folded.contains("2 message(s) folded"), "{folded}");
    assert!(
        folded.contains("second") && folded.contains("third"),
        "{folded}"
    );
    assert_eq!(outbox_rows(&env), 0);

    // The day's messages are used up: a success waits …
    env.write("HEARTBEAT.md", log("fourth"));
    run(&env, "2026-05-02T08:00:00Z").code(0);
    assert_eq!(sends(&tg).len(), 2);
    assert_eq!(outbox_rows(&env), 1);
    // … and rides along with the next failure.
    env.write("HEARTBEAT.md", "## Recurring\n- [ ] @fail\n");
    run(&env, "2026-05-02T09:00:00Z").code(1);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 3, "{sent:#?}");
    let last = shown(&sent[2]);
    assert!(last.starts_with("heartbeat: 1 failed"), "{last}");
    assert!(last.contains("fourth"), "{last}");
    assert_eq!(outbox_rows(&env), 0);
}

// ---------------------------------------------------------------------------------------
// (10)-(11) buttons

/// A one-time shell task that is queued for approval in cautious mode.
const ASK_MD: &str = "## One-time\n- [ ] @shell {\"cmd\": \"echo done >> ran\"}\n";

/// First run: approval #1 queued, its message (with buttons) in `CHAT`. Returns the message id.
fn queued(tg: &TgDouble, env: &Env) -> i64 {
    run(env, NOW).code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    let sent = sends_to(tg, CHAT);
    assert_eq!(sent.len(), 1);
    assert_eq!(keyboard_data(&sent[0]), vec![buttons_for(1)]);
    let mid = button_message_id(env, CHAT);
    assert!(
        tg.message(CHAT, mid).is_some(),
        "the double knows message {mid}"
    );
    mid
}

/// Push a press on `data` under `mid` in `chat`; returns the callback query id.
fn press(tg: &TgDouble, chat: i64, mid: i64, data: &str) -> String {
    let update = tg.callback_update(chat, chat, mid, data);
    let id = update["callback_query"]["id"].as_str().unwrap().to_string();
    tg.push_update(update);
    id
}

fn answered(tg: &TgDouble) -> Vec<String> {
    tg.calls_to("answerCallbackQuery")
        .iter()
        .map(|c| {
            c.body["callback_query_id"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

fn edits_of(tg: &TgDouble, mid: i64) -> Vec<Call> {
    tg.calls_to("editMessageText")
        .into_iter()
        .filter(|c| c.body["message_id"] == mid && c.body["chat_id"] == CHAT)
        .collect()
}

#[test]
fn telegram_approve_button_runs_the_task_at_the_next_run_and_edits_the_message() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    let mid = queued(&tg, &env);
    let query = press(&tg, CHAT, mid, "hb:y:1");

    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(answered(&tg), vec![query], "the press is answered");
    let approved = env.events("approval_approved");
    assert_eq!(approved.len(), 1, "{:#?}", env.audit());
    assert_eq!(approved[0]["approval_id"], 1);
    assert_eq!(approved[0]["by"], format!("telegram:{CHAT}"));
    assert_eq!(approved[0]["always"], false);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "the task ran in that run: {:#?}", env.audit());
    assert_eq!(ok[0]["approval_id"], 1);
    assert_eq!(ok[0]["tool"], "shell");
    assert_eq!(env.read("ran"), "done\n");
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(env.approval(1)["decided_by"], format!("telegram:{CHAT}"));
    assert!(env.read("HEARTBEAT.md").contains("- [x] @shell"), "ticked");

    let edits = edits_of(&tg, mid);
    assert_eq!(edits.len(), 1, "{:#?}", tg.calls());
    let shown_now = tg.message(CHAT, mid).unwrap();
    let t = shown_now["text"].as_str().unwrap();
    assert!(
        t.contains(&format!("#1 approved by telegram:{CHAT}: done")),
        "{t}"
    );
    assert!(
        t.contains("heartbeat approve 1"),
        "the original text stays: {t}"
    );
    let keys = shown_now
        .pointer("/reply_markup/inline_keyboard")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    assert_eq!(
        keys, 0,
        "the decided approval's buttons are gone: {shown_now}"
    );

    // The press is acted on once: a later run does not see it again.
    run(&env, &minutes_after_now(10)).code(0);
    assert_eq!(answered(&tg).len(), 1);
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_eq!(env.read("ran"), "done\n");
    assert!(tg.pending_updates().is_empty(), "the update was confirmed");
}

#[test]
fn telegram_deny_button_denies_and_a_second_press_changes_nothing() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    let mid = queued(&tg, &env);
    let q1 = press(&tg, CHAT, mid, "hb:n:1");
    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(answered(&tg), vec![q1.clone()]);
    let denied = env.events("approval_denied");
    assert_eq!(denied.len(), 1, "{:#?}", env.audit());
    assert_eq!(denied[0]["by"], format!("telegram:{CHAT}"));
    assert_eq!(env.approval_state(1).as_deref(), Some("denied"));
    assert!(!env.exists("ran"));
    let t = tg.message(CHAT, mid).unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(t.contains(&format!("#1 denied by telegram:{CHAT}")), "{t}");

    // Pressing Approve on the decided approval: answered, nothing else.
    let q2 = press(&tg, CHAT, mid, "hb:y:1");
    run(&env, &minutes_after_now(10)).code(0);
    assert_eq!(answered(&tg), vec![q1, q2]);
    assert_eq!(env.approval_state(1).as_deref(), Some("denied"));
    assert!(env.events("approval_approved").is_empty());
    assert!(env.events("task_succeeded").is_empty());
    assert!(!env.exists("ran"));
    assert_eq!(env.events("approval_denied").len(), 1);

    // A press for an approval that does not exist: answered, nothing else.
    let q3 = press(&tg, CHAT, mid, "hb:y:42");
    run(&env, &minutes_after_now(15)).code(0);
    assert_eq!(answered(&tg).len(), 3);
    assert_eq!(answered(&tg)[2], q3);
    assert!(env.events("approval_approved").is_empty());
    assert!(!env.exists("ran"));
}

#[test]
fn telegram_always_button_approves_runs_and_grants() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    let mid = queued(&tg, &env);
    press(&tg, CHAT, mid, "hb:a:1");
    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(answered(&tg).len(), 1);
    let approved = env.events("approval_approved");
    assert_eq!(approved.len(), 1, "{:#?}", env.audit());
    assert_eq!(approved[0]["always"], true);
    assert_eq!(approved[0]["by"], format!("telegram:{CHAT}"));
    assert_eq!(env.read("ran"), "done\n");
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    let grants = env.cmd(["grants", "--json"]).output();
    grants.code(0);
    let grants = grants.json();
    let task_id = &approved[0]["task_id"];
    assert!(
        grants
            .as_array()
            .unwrap()
            .iter()
            .any(|g| &g["task_id"] == task_id),
        "a grant for {task_id}: {grants}"
    );
    assert_eq!(edits_of(&tg, mid).len(), 1);
}

#[test]
fn telegram_foreign_chat_is_answered_ignored_and_audited() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    queued(&tg, &env);
    let q = press(&tg, STRANGER, 5000, "hb:y:1");
    tg.push_update(tg.text_update(STRANGER, STRANGER, "hello bot"));
    tg.push_update(tg.text_update(STRANGER, STRANGER, "/pause 1h"));
    run(&env, &minutes_after_now(5)).code(0);

    assert_eq!(answered(&tg), vec![q], "a refused press is answered too");
    let rejected = env.events("telegram_rejected");
    assert_eq!(rejected.len(), 3, "{:#?}", env.audit());
    let kinds: BTreeSet<&str> = rejected
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, BTreeSet::from(["button", "message", "command"]));
    assert!(rejected.iter().all(|e| e["chat_id"] == STRANGER));
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert!(env.events("approval_approved").is_empty());
    assert!(env.events("paused").is_empty());
    assert!(
        env.events("run_skipped").is_empty(),
        "the pause was ignored"
    );
    assert!(!env.exists("ran"));
    assert!(sends_to(&tg, STRANGER).is_empty(), "no reply to a stranger");
    assert!(tg.calls_to("editMessageText").is_empty());
}

// ---------------------------------------------------------------------------------------
// (12) chat commands

fn command(tg: &TgDouble, text: &str) {
    tg.push_update(tg.text_update(CHAT, CHAT, text));
}

/// The replies sent to `CHAT` since `before` messages.
fn new_replies(tg: &TgDouble, before: usize) -> Vec<Call> {
    sends_to(tg, CHAT).into_iter().skip(before).collect()
}

#[test]
fn telegram_chat_commands_reply_and_act() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    queued(&tg, &env);

    command(&tg, "/status");
    run(&env, &minutes_after_now(1)).code(0);
    let r = new_replies(&tg, 1);
    assert_eq!(r.len(), 1, "{r:#?}");
    let t = shown(&r[0]);
    assert!(t.contains("pending approvals: 1"), "{t}");
    assert!(t.contains("not paused"), "{t}");

    command(&tg, "/pending");
    run(&env, &minutes_after_now(2)).code(0);
    let r = new_replies(&tg, 2);
    assert_eq!(r.len(), 1, "{r:#?}");
    let t = shown(&r[0]);
    assert!(t.contains("1 pending approval"), "{t}");
    assert!(t.contains("heartbeat approve 1"), "{t}");
    assert_eq!(keyboard_data(&r[0]), vec![buttons_for(1)]);

    command(&tg, "/pause 1h");
    run(&env, &minutes_after_now(3)).code(0);
    let r = new_replies(&tg, 3);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert!(shown(&r[0]).contains("Paused until"), "{}", shown(&r[0]));
    let paused = env.events("paused");
    assert_eq!(paused.len(), 1, "{:#?}", env.audit());
    assert_eq!(paused[0]["by"], format!("telegram:{CHAT}"));
    assert_eq!(paused[0]["until"], ts(&minutes_after_now(63)));
    let skipped = env.events("run_skipped");
    assert_eq!(
        skipped.len(),
        1,
        "the run after /pause is skipped: {:#?}",
        env.audit()
    );
    assert_eq!(skipped[0]["reason"], "paused");
    let st = status(&env);
    assert_eq!(st["paused"], true, "{st}");
    assert_eq!(st["paused_until"], ts(&minutes_after_now(63)), "{st}");

    command(&tg, "/resume");
    run(&env, &minutes_after_now(4)).code(0);
    let r = new_replies(&tg, 4);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert!(shown(&r[0]).contains("Resumed"), "{}", shown(&r[0]));
    let resumed = env.events("resumed");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0]["by"], format!("telegram:{CHAT}"));
    assert_eq!(
        env.events("run_skipped").len(),
        1,
        "runs again after /resume"
    );
    assert_eq!(
        env.events("run_started").len(),
        4,
        "queued, /status, /pending, /resume"
    );
    assert_eq!(status(&env)["paused"], false);

    command(&tg, "/run");
    run(&env, &minutes_after_now(5)).code(0);
    let r = new_replies(&tg, 5);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert!(shown(&r[0]).contains("Running now"), "{}", shown(&r[0]));

    // Replies are not summaries: no notification_failed, all delivered.
    assert!(env.events("notification_failed").is_empty());
    assert_eq!(outbox_rows(&env), 0);
    assert!(env.events("telegram_rejected").is_empty());
}

// ---------------------------------------------------------------------------------------
// (12) a button approves only what its message showed

/// The message that announced approval #1 in `CHAT`.
fn approval_message(tg: &TgDouble) -> Call {
    sends_to(tg, CHAT)
        .into_iter()
        .find(|c| shown(c).contains("approval #1"))
        .expect("a message announces approval #1")
}

#[test]
fn telegram_approval_message_shows_the_whole_command_its_button_runs() {
    // Past the 80 characters a task line shows, the command goes on.
    let tail = format!("{}; rm -rf ~/important", "x".repeat(120));
    let md = format!("## One-time\n- [ ] @shell {{\"cmd\": \"echo hi {tail}\"}}\n");
    let (tg, env) = setup(&md, &[CHAT], "", "");
    run(&env, NOW).code(0);
    let msg = approval_message(&tg);
    let seen = shown(&msg);
    assert!(
        seen.contains(&format!("\"cmd\": \"echo hi {tail}\"")),
        "the whole input, pretty-printed: {seen}"
    );
    assert_eq!(keyboard_data(&msg), vec![buttons_for(1)]);
}

#[test]
fn telegram_approval_with_a_hidden_value_has_no_buttons_and_names_the_way_to_approve() {
    let md = "## One-time\n- [ ] @shell {\"cmd\": \"echo checked >> ran\", \
              \"env\": {\"API_TOKEN\": \"tok-abcdef-123\"}}\n";
    let (tg, env) = setup(md, &[CHAT], "", "");
    run(&env, NOW).code(0);
    let msg = approval_message(&tg);
    let seen = shown(&msg);
    assert!(keyboard_data(&msg).is_empty(), "no buttons: {}", msg.body);
    let file = env.path("HEARTBEAT.md");
    assert!(
        seen.contains(&format!(
            "1 value(s) hidden — read {}:2 and run heartbeat approve 1",
            file.display()
        )),
        "{seen}"
    );
    assert!(!seen.contains("tok-abcdef-123"), "{seen}");
    assert!(
        seen.contains("echo checked"),
        "what can be shown is: {seen}"
    );
    // The way it names works.
    env.cmd(["approve", "1"]).output().code(0);
    assert_eq!(env.read("ran"), "checked\n");
}

#[test]
fn telegram_a_press_never_approves_an_approval_with_a_hidden_value() {
    let md = "## One-time\n- [ ] @shell {\"cmd\": \"echo checked >> ran\", \
              \"env\": {\"API_TOKEN\": \"tok-abcdef-123\"}}\n";
    let (tg, env) = setup(md, &[CHAT], "", "");
    run(&env, NOW).code(0);
    let msg = approval_message(&tg);
    assert!(keyboard_data(&msg).is_empty());
    // The double numbers the messages it sends from 1001.
    let mid = 1001;
    let sent = tg.message(CHAT, mid).expect("the approval's message");
    assert!(
        sent["text"].as_str().unwrap().contains("approval #1"),
        "{sent}"
    );
    // A press carrying its id anyway (an old message, a forged callback): refused, answered.
    let q = press(&tg, CHAT, mid, "hb:y:1");
    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(answered(&tg), vec![q]);
    let answer = tg.calls_to("answerCallbackQuery")[0].body["text"].to_string();
    assert!(answer.contains("hidden"), "{answer}");
    assert!(answer.contains("heartbeat approve 1"), "{answer}");
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert!(env.events("approval_approved").is_empty());
    assert!(!env.exists("ran"));
}

#[test]
fn telegram_approval_too_long_for_one_message_has_no_buttons() {
    let md = format!(
        "## One-time\n- [ ] @shell {{\"cmd\": \"echo {}\"}}\n",
        "long ".repeat(1000)
    );
    let (tg, env) = setup(&md, &[CHAT], "", "");
    run(&env, NOW).code(0);
    let sent = sends_to(&tg, CHAT);
    assert!(
        sent.iter().all(|c| keyboard_data(c).is_empty()),
        "no message carries buttons: {sent:#?}"
    );
    let all: String = sent.iter().map(shown).collect();
    let file = env.path("HEARTBEAT.md");
    assert!(
        all.contains(&format!(
            "does not fit this message — read {}:2 and run heartbeat approve 1",
            file.display()
        )),
        "{all}"
    );
    assert_eq!(sent.len(), 1, "one message, not a cut input: {sent:#?}");
}

#[test]
fn telegram_an_approval_with_no_room_in_a_long_summary_follows_in_its_own_message() {
    let mut md = sixty_logs();
    md.push_str("\n## One-time\n- [ ] @shell {\"cmd\": \"echo done >> ran\"}\n");
    let (tg, env) = setup(&md, &[CHAT], "max_tasks_per_run = 0", "");
    run(&env, NOW).code(0);
    let sent = sends_to(&tg, CHAT);
    let (with_buttons, without): (Vec<&Call>, Vec<&Call>) =
        sent.iter().partition(|c| !keyboard_data(c).is_empty());
    // The summary, in parts: no part carries a button.
    assert!(without.len() >= 2, "{sent:#?}");
    let summary: String = without.iter().map(|c| shown(c)).collect();
    assert!(
        summary.contains("follow in a message of its own"),
        "{summary}"
    );
    // The approval's own message: its place, its whole input, its buttons.
    assert_eq!(with_buttons.len(), 1, "{sent:#?}");
    let own = shown(with_buttons[0]);
    assert!(own.contains("approval #1 @shell"), "{own}");
    assert!(own.contains("\"cmd\": \"echo done >> ran\""), "{own}");
    assert_eq!(keyboard_data(with_buttons[0]), vec![buttons_for(1)]);
    // Its button works like any other.
    let mid = button_message_id(&env, CHAT);
    press(&tg, CHAT, mid, "hb:y:1");
    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(env.read("ran"), "done\n");
}

#[test]
fn telegram_pending_shows_each_input_whole_and_buttons_only_for_what_it_shows() {
    let md = "## One-time\n\
              - [ ] @shell {\"cmd\": \"echo one >> ran\"}\n\
              - [ ] @shell {\"cmd\": \"echo two\", \"env\": {\"PASSWORD\": \"hunter2hunter2\"}}\n";
    let (tg, env) = setup(md, &[CHAT], "", "");
    run(&env, NOW).code(0);
    let before = sends_to(&tg, CHAT).len();
    command(&tg, "/pending");
    run(&env, &minutes_after_now(1)).code(0);
    let r = new_replies(&tg, before);
    assert_eq!(r.len(), 1, "{r:#?}");
    let seen = shown(&r[0]);
    assert!(seen.contains("\"cmd\": \"echo one >> ran\""), "{seen}");
    assert!(seen.contains("\"cmd\": \"echo two\""), "{seen}");
    assert!(!seen.contains("hunter2"), "{seen}");
    assert!(seen.contains("1 value(s) hidden"), "{seen}");
    assert!(seen.contains("run heartbeat approve 2"), "{seen}");
    assert_eq!(keyboard_data(&r[0]), vec![buttons_for(1)]);
}

// ---------------------------------------------------------------------------------------
// (13) the token stays secret

/// Every byte under the state dir (database, WAL, audit log, lock).
fn state_bytes(env: &Env) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(env.state()).expect("state dir") {
        let path = entry.unwrap().path();
        if path.is_file() {
            all.extend(std::fs::read(&path).unwrap());
        }
    }
    all
}

fn contains_bytes(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn telegram_token_appears_nowhere_even_when_telegram_errors() {
    // Nothing listens on this port: every request fails with an error naming the URL, which
    // holds the token.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let md = "## Recurring\n- [ ] @env\n";
    let env = Env::new(md).config(&format!(
        "timezone = \"UTC\"\n[tools.env]\ncommand = [\"env\"]\napproval = \"auto\"\n{}",
        tg_toml(&format!("http://127.0.0.1:{port}"), &[CHAT], "")
    ));
    let out = env.cmd(["run", "--once", "-vv"]).token().output();
    out.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    let output = ok[0]["output"].as_str().unwrap();
    assert!(
        output.contains("HEARTBEAT_TASK_ID="),
        "the tool printed its env: {output}"
    );
    assert!(
        !output.contains(TG_TOKEN),
        "the token reached a tool: {output}"
    );
    assert!(
        !output.contains("HEARTBEAT_TELEGRAM_TOKEN"),
        "the token variable is removed from tools: {output}"
    );
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "Telegram did fail: {:#?}", env.audit());
    assert!(failed[0]["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert!(
        out.stderr.contains("telegram"),
        "-vv says something: {}",
        out.stderr
    );
    for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(!text.contains(TG_TOKEN), "token in {what}:\n{text}");
    }
    assert!(
        !env.audit_text().contains(TG_TOKEN),
        "token in the audit log"
    );
    let bytes = state_bytes(&env);
    assert!(!contains_bytes(&bytes, TG_TOKEN), "token in the state dir");

    // Other commands that talk to Telegram, failing the same way.
    let test = env.cmd(["notify-test", "-v"]).token().output();
    test.code(1);
    let chats = env.cmd(["telegram-chats", "-v"]).token().output();
    chats.code(0);
    for o in [&test, &chats] {
        assert!(!o.stdout.contains(TG_TOKEN), "{}: {}", o.command, o.stdout);
        assert!(!o.stderr.contains(TG_TOKEN), "{}: {}", o.command, o.stderr);
    }
    assert!(!env.audit_text().contains(TG_TOKEN));
    assert!(!contains_bytes(&state_bytes(&env), TG_TOKEN));
}

#[test]
fn telegram_token_is_scrubbed_from_errors_that_echo_the_url() {
    // A server that is not the Bot API (a misconfigured api_url) answers with pages that
    // name the request path, and so the token: the error texts must not carry it on.
    let (tg, env) = setup(WEEKLY_LOG, &[CHAT], "", "");
    let path = format!("/bot{TG_TOKEN}/SendMessage");
    tg.fail_next_raw(
        "sendMessage",
        1,
        404,
        "text/html",
        &format!("<html><pre>Cannot POST {path}</pre></html>"),
    );
    tg.fail_next(
        "getUpdates",
        1,
        400,
        &format!("Bad Request: no route for /bot{TG_TOKEN}/GetUpdates"),
    );
    let out = env.cmd(["run", "--once", "-vv"]).token().output();
    out.code(0);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains("Cannot POST /bot***/SendMessage"),
        "scrubbed, not dropped: {error}"
    );
    assert!(
        out.stderr.contains("/bot***/GetUpdates"),
        "-vv shows the updates error, scrubbed: {}",
        out.stderr
    );
    for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(!text.contains(TG_TOKEN), "token in {what}:\n{text}");
    }
    assert!(!env.audit_text().contains(TG_TOKEN));
    assert!(
        !contains_bytes(&state_bytes(&env), TG_TOKEN),
        "token in the state dir"
    );
}

#[test]
fn telegram_token_is_not_stored_when_telegram_works() {
    let md = "## Recurring\n- [ ] @env\n- [ ] @shell {\"cmd\": \"true\"}\n";
    let (tg, env) = setup(
        md,
        &[CHAT],
        "[tools.env]\ncommand = [\"env\"]\napproval = \"auto\"\n",
        "",
    );
    let mid = {
        run(&env, NOW).code(0);
        button_message_id(&env, CHAT)
    };
    press(&tg, CHAT, mid, "hb:y:1");
    tg.push_update(tg.text_update(CHAT, CHAT, "/status"));
    run(&env, &minutes_after_now(5)).code(0);
    assert!(
        tg.calls().iter().all(|c| c.token == TG_TOKEN),
        "it used the token"
    );
    assert!(!tg.calls_to("editMessageText").is_empty());
    assert!(!env.audit_text().contains(TG_TOKEN));
    assert!(!contains_bytes(&state_bytes(&env), TG_TOKEN));
    for call in tg.calls() {
        assert!(
            !call.body.to_string().contains(TG_TOKEN),
            "sent the token: {}",
            call.body
        );
    }
}

// ---------------------------------------------------------------------------------------
// (14) notify-test and telegram-chats

#[test]
fn telegram_notify_test_sends_to_every_chat() {
    let (tg, env) = setup("## Recurring\n", &[CHAT, CHAT2], "", "");
    let out = env.cmd(["notify-test"]).token().output();
    out.code(0);
    let sent = sends(&tg);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    let chats: BTreeSet<i64> = sent
        .iter()
        .map(|c| c.body["chat_id"].as_i64().unwrap())
        .collect();
    assert_eq!(chats, BTreeSet::from([CHAT, CHAT2]));
    for c in &sent {
        assert!(shown(c).contains("test message"), "{}", text(c));
    }
    let ev = env.events("notification_sent");
    assert_eq!(ev.len(), 2);
    assert!(ev.iter().all(|e| e["kind"] == "test"));
    assert!(out.stdout.contains(&CHAT.to_string()) && out.stdout.contains(&CHAT2.to_string()));
}

#[test]
fn telegram_notify_test_fails_for_a_refusing_chat() {
    let (tg, env) = setup("## Recurring\n", &[CHAT, CHAT2], "", "");
    tg.fail_chat(CHAT2, 403, "Forbidden: bot was blocked by the user");
    let out = env.cmd(["notify-test"]).token().output();
    out.code(1);
    assert_eq!(sends_to(&tg, CHAT).len(), 1);
    assert!(out.stdout.contains("222"), "{}", out.stdout);
    assert!(
        out.stdout.to_lowercase().contains("blocked"),
        "{}",
        out.stdout
    );
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["chat_id"], CHAT2);
    assert_eq!(env.events("notification_sent").len(), 1);
}

#[test]
fn telegram_notify_test_needs_the_table_and_the_token() {
    let env = Env::new("## Recurring\n").config("timezone = \"UTC\"\n");
    let out = env.cmd(["notify-test"]).token().output();
    out.code(2);
    assert!(out.stderr.contains("telegram"), "{}", out.stderr);

    let (tg, env) = setup("## Recurring\n", &[CHAT], "", "");
    let out = env.cmd(["notify-test"]).output();
    out.code(2);
    assert!(
        out.stderr.contains("HEARTBEAT_TELEGRAM_TOKEN"),
        "{}",
        out.stderr
    );
    assert!(tg.calls().is_empty());
}

#[test]
fn telegram_chats_lists_who_wrote_and_leaves_updates_for_the_next_run() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    let mid = queued(&tg, &env);
    tg.push_update(tg.group_text_update(-1_001_234_567_890, "Family Room", 424242, "hello all"));
    tg.push_update(tg.text_update(777, 777, "hi bot"));
    press(&tg, CHAT, mid, "hb:y:1");

    let out = env.cmd(["telegram-chats"]).token().output();
    out.code(0);
    for needle in ["-1001234567890", "Family Room", "777", "111"] {
        assert!(
            out.stdout.contains(needle),
            "{needle} missing:\n{}",
            out.stdout
        );
    }
    let json = env.cmd(["telegram-chats", "--json"]).token().output();
    json.code(0);
    let list = json.json();
    let by_id = |id: i64| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|c| c["chat_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no chat {id} in {list}"))
    };
    assert_eq!(by_id(-1_001_234_567_890)["title"], "Family Room");
    assert_eq!(by_id(-1_001_234_567_890)["allowed"], false);
    assert_eq!(by_id(777)["kind"], "private");
    assert_eq!(by_id(CHAT)["allowed"], true);
    // Looking acted on nothing.
    assert!(answered(&tg).is_empty());
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert_eq!(tg.pending_updates().len(), 3);

    run(&env, &minutes_after_now(5)).code(0);
    assert_eq!(answered(&tg).len(), 1);
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert_eq!(env.read("ran"), "done\n");
    // The two strangers who wrote were rejected by the run.
    assert_eq!(env.events("telegram_rejected").len(), 2);
}

#[test]
fn telegram_chats_with_a_wrong_token_says_so_and_exits_2() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    tg.push_update(tg.text_update(777, 777, "hi bot"));
    let wrong = "7000000001:AAHbWrongTokenWrongToken-999999";
    for json in [false, true] {
        let mut args = vec!["telegram-chats"];
        if json {
            args.push("--json");
        }
        let out = env
            .cmd(args)
            .env("HEARTBEAT_TELEGRAM_TOKEN", wrong)
            .output();
        out.code(2);
        assert!(
            out.stderr
                .contains("rejected the bot token in $HEARTBEAT_TELEGRAM_TOKEN"),
            "{}",
            out.stderr
        );
        assert!(!out.stdout.contains("no chats yet"), "{}", out.stdout);
        assert!(!out.stderr.contains(wrong) && !out.stdout.contains(wrong));
    }
    // The right token still lists the chat.
    let out = env.cmd(["telegram-chats"]).token().output();
    out.code(0);
    assert!(out.stdout.contains("777"), "{}", out.stdout);
}

// ---------------------------------------------------------------------------------------
// (15) pause / resume at the terminal

#[test]
fn pause_for_a_while_skips_runs_until_it_ends_by_itself() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"tick\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    let out = env
        .cmd(["pause", "--for", "1h", "--reason", "x"])
        .user("alice")
        .output();
    out.code(0);
    let paused = env.events("paused");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["until"], ts(&minutes_after_now(60)));
    assert_eq!(paused[0]["reason"], "x");
    assert_eq!(paused[0]["by"], "cli:alice");
    let st = env
        .cmd(["status", "--json"])
        .now(&minutes_after_now(1))
        .output();
    st.code(0);
    assert_eq!(st.json()["paused"], true, "{}", st.stdout);
    assert_eq!(st.json()["paused_until"], ts(&minutes_after_now(60)));

    env.run_once(&minutes_after_now(10)).code(0);
    let skipped = env.events("run_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "paused");
    assert!(env.events("task_succeeded").is_empty());

    // --force runs anyway, and does not end the pause.
    env.run_with(&minutes_after_now(20), &["--force"]).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    env.run_once(&minutes_after_now(30)).code(0);
    assert_eq!(env.events("run_skipped").len(), 2);
    assert!(env.events("resumed").is_empty());

    // Past the end: `status` no longer counts it; the pause ends by itself at the next
    // run, audited, and the run runs.
    let st = env
        .cmd(["status", "--json"])
        .now(&minutes_after_now(61))
        .output();
    assert_eq!(st.json()["paused"], false, "{}", st.stdout);
    env.run_once(&minutes_after_now(61)).code(0);
    let resumed = env.events("resumed");
    assert_eq!(resumed.len(), 1, "{:#?}", env.audit());
    assert_eq!(resumed[0]["until"], ts(&minutes_after_now(60)));
    assert_eq!(env.events("task_succeeded").len(), 2);
    assert_eq!(env.events("run_skipped").len(), 2);
    let st = env
        .cmd(["status", "--json"])
        .now(&minutes_after_now(62))
        .output();
    assert_eq!(st.json()["paused"], false);
}

#[test]
fn pause_until_resume() {
    let md = "## Recurring\n- [ ] @log {\"text\": \"tick\"}\n";
    let env = Env::new(md).config("timezone = \"UTC\"\n");
    env.cmd(["pause"]).user("bob").output().code(0);
    assert_eq!(env.events("paused")[0]["until"], Value::Null);
    env.run_once(&minutes_after_now(600)).code(0);
    assert_eq!(env.events("run_skipped")[0]["reason"], "paused");
    let out = env
        .cmd(["resume"])
        .user("bob")
        .now(&minutes_after_now(601))
        .output();
    out.code(0);
    let resumed = env.events("resumed");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0]["by"], "cli:bob");
    env.run_once(&minutes_after_now(602)).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    // Resuming when not paused says so and writes nothing.
    let again = env.cmd(["resume"]).output();
    again.code(0);
    assert!(again.stdout.contains("not paused"), "{}", again.stdout);
    assert_eq!(env.events("resumed").len(), 1);
}

/// `/pause` and `/status` answer in the configured time zone, not UTC.
#[test]
fn telegram_pause_answers_in_the_configured_zone() {
    let tg = TgDouble::start();
    tg.expect_token(TG_TOKEN);
    let env = Env::new(WEEKLY_LOG).config(&format!(
        "timezone = \"Europe/Berlin\"\n{}",
        tg_toml(&tg.url(), &[CHAT], "")
    ));
    command(&tg, "/pause 1h");
    run(&env, NOW).code(0);
    let r = new_replies(&tg, 0);
    let reply = r
        .iter()
        .map(shown)
        .find(|t| t.contains("Paused"))
        .expect("a reply");
    // 10:00 UTC + 1 h = 13:00 in Berlin (CEST).
    assert!(
        reply.contains("Paused until 2026-05-01 13:00 CEST"),
        "{reply}"
    );
    command(&tg, "/status");
    run(&env, &minutes_after_now(1)).code(0);
    let status = new_replies(&tg, 0)
        .iter()
        .map(shown)
        .find(|t| t.contains("status"))
        .expect("a status reply");
    assert!(
        status.contains("paused until 2026-05-01 13:00 CEST"),
        "{status}"
    );
}

/// The tripped-task message is urgent, names the tool once and says how to reset it.
#[test]
fn telegram_a_trip_is_said_at_once_naming_the_tool_once() {
    let (tg, env) = setup(
        "## Recurring\n- [ ] @fail {}\n",
        &[CHAT],
        &format!("max_consecutive_failures = 1\n{FAIL_TOOL}"),
        "",
    );
    run(&env, NOW).code(1);
    let tripped = env.events("task_tripped");
    assert_eq!(tripped.len(), 1, "{:#?}", env.audit());
    let id = tripped[0]["task_id"].as_str().unwrap().to_string();
    let call = sends(&tg)
        .into_iter()
        .find(|c| shown(c).contains("in a row"))
        .expect("a trip message");
    let alert = shown(&call);
    assert_eq!(alert.matches("@fail").count(), 1, "{alert}");
    assert!(alert.contains(&format!("heartbeat reset {id}")), "{alert}");
    // Its Reset button does what `heartbeat reset` does, as the chat that pressed it.
    let data = format!("hb:r:{id}");
    assert_eq!(keyboard_data(&call), vec![vec![data.clone()]]);
    let callback = press(&tg, CHAT, 1, &data);
    run(&env, &minutes_after_now(5)).code(1);
    assert!(answered(&tg).contains(&callback));
    let reset = env.events("task_reset");
    assert_eq!(reset.len(), 1, "{:#?}", env.audit());
    assert_eq!(reset[0]["by"], format!("telegram:{CHAT}"));
    assert_eq!(reset[0]["tripped"], true);
    // Released: it ran again in that run (and tripped again, failing once more).
    assert_eq!(env.events("task_tripped").len(), 2);
}

#[test]
fn a_chats_title_is_stored_redacted() {
    let (tg, env) = setup(ASK_MD, &[CHAT], "", "");
    tg.push_update(tg.group_text_update(-100_555, "Ops password=hunter2secret", 424242, "hi"));
    env.cmd(["telegram-chats"]).token().output().code(0);
    let title: String = env
        .db()
        .query_row(
            "SELECT title FROM tg_chats WHERE chat_id = -100555",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(title, "Ops password=***");
}
