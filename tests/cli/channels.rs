//! Channels other than Telegram (docs/reference.md#channels), end to end through the binary
//! against doubles on 127.0.0.1: routing by `events`, the delivery queue's retries and drops,
//! and `notify-test`.

use serde_json::Value;

use crate::common::Env;
use crate::hook_double::{Answer, HookDouble};

const NOW: &str = "2026-03-02T10:00:00Z";

/// A check-list with a failing task and a reminder, and a Slack channel at `hook`.
fn slack_env(hook: &HookDouble, extra: &str) -> Env {
    Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"echo broken >&2; exit 3\"}\n- [ ] Stretch\n")
        .config(&format!(
            "timezone = \"UTC\"\nautonomy = \"full\"\n[tools.shell]\napproval = \"auto\"\n\
         [channels.team]\nkind = \"slack\"\nurl_env = \"HB_SLACK\"\n{extra}"
        ))
        .with_hook(hook)
}

trait WithHook {
    fn with_hook(self, hook: &HookDouble) -> Env;
}

impl WithHook for Env {
    fn with_hook(self, hook: &HookDouble) -> Env {
        self.write(
            "hook-url",
            format!("{}/services/T1/B2/secretpart", hook.url()),
        );
        self
    }
}

fn run(env: &Env, now: &str) -> crate::common::Output {
    let url = env.read("hook-url");
    env.cmd(["run", "--once"])
        .now(now)
        .env("HB_SLACK", url)
        .output()
}

fn texts(hook: &HookDouble) -> Vec<String> {
    hook.posts()
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.body).expect("JSON body");
            v["text"].as_str().expect("a text").to_string()
        })
        .collect()
}

#[test]
fn a_failure_and_a_reminder_reach_slack_as_messages_of_their_own() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "");
    run(&env, NOW).code(1);
    let texts = texts(&hook);
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert!(
        texts[0].starts_with("*heartbeat: @shell failed"),
        "{}",
        texts[0]
    );
    assert!(texts[0].contains("exit status 3"), "{}", texts[0]);
    assert!(texts[1].contains("Stretch"), "{}", texts[1]);
    let sent = env.events("notification_sent");
    let kinds: Vec<&str> = sent.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["failure", "reminder"]);
    assert!(
        sent.iter()
            .all(|e| e["channel"] == "team" && e.get("chat_id").is_none())
    );
    // The webhook's URL is a secret: its path is in no audit line.
    assert!(!env.audit_text().contains("secretpart"));
}

#[test]
fn a_channel_gets_only_the_kinds_its_events_name() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "events = [\"reminder\"]\n");
    run(&env, NOW).code(1);
    let texts = texts(&hook);
    assert_eq!(texts.len(), 1, "{texts:#?}");
    assert!(texts[0].contains("Stretch"), "{}", texts[0]);
}

#[test]
fn a_failed_send_stays_queued_and_goes_out_with_the_next_run() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "events = [\"reminder\"]\n");
    hook.answer(500);
    run(&env, NOW).code(1);
    assert_eq!(hook.posts().len(), 1);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    assert!(failed[0]["error"].as_str().unwrap().contains("500"));
    // The next run sends it again (and its own reminder, a repeat, is not sent twice).
    run(&env, "2026-03-02T10:30:00Z").code(1);
    let posts = hook.posts();
    assert_eq!(posts.len(), 2, "{posts:#?}");
    assert_eq!(posts[0].body, posts[1].body);
}

#[test]
fn an_answer_that_can_never_succeed_drops_the_message_at_once() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "events = [\"reminder\"]\n");
    hook.answer(404);
    run(&env, NOW).code(1);
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "rejected");
    assert_eq!(dropped[0]["channel"], "team");
    let outbox: i64 = env
        .db()
        .query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(outbox, 0);
}

#[test]
fn notify_test_reaches_every_channel_or_the_one_named() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "");
    let url = env.read("hook-url");
    let out = env.cmd(["notify-test"]).env("HB_SLACK", &url).output();
    out.code(0);
    assert!(
        out.stdout.contains("sent to team (slack)"),
        "{}",
        out.stdout
    );
    assert_eq!(texts(&hook).len(), 1);
    assert!(texts(&hook)[0].contains("test message"));
    let out = env
        .cmd(["notify-test", "--channel", "tema"])
        .env("HB_SLACK", &url)
        .output();
    out.code(2);
    assert!(
        out.stderr.contains("did you mean \"team\""),
        "{}",
        out.stderr
    );
    // A variable unset: the send fails, naming it, and the command says so.
    let out = env.cmd(["notify-test"]).output();
    out.code(1);
    assert!(
        out.stdout.contains("$HB_SLACK is not set"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_hung_endpoint_costs_the_channels_timeout_and_its_other_messages_wait() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "timeout = \"1s\"\n");
    hook.answer_with(Answer::Hang);
    run(&env, NOW).code(1);
    // The first message met the timeout; the second was not tried in this run.
    assert_eq!(hook.posts().len(), 1);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("no answer within 1s"),
        "{}",
        failed[0]
    );
    let queued: i64 = env
        .db()
        .query_row(
            "SELECT COUNT(*) FROM outbox WHERE channel = 'team'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(queued, 2);
}

/// A webhook channel at `hook`, signed with `secret`.
fn webhook_env(hook: &HookDouble) -> Env {
    Env::new("## Recurring\n- [ ] Stretch\n").config(&format!(
        "timezone = \"UTC\"\n[channels.ops]\nkind = \"webhook\"\nurl = \"{}/hooks/hb\"\n\
         secret_env = \"HB_WEBHOOK_SECRET\"\n",
        hook.url()
    ))
}

const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Whether the request carries a valid Standard Webhooks signature for `secret`.
fn signed(req: &crate::test_server::Request, secret: &str) -> bool {
    use hmac::{KeyInit, Mac};
    let key = {
        // The secret's base64, decoded the simple way (no padding in this one).
        let b64 = secret.strip_prefix("whsec_").unwrap();
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut n = 0;
        let mut out = Vec::new();
        for c in b64.bytes() {
            bits = bits << 6 | alphabet.iter().position(|a| *a == c).unwrap() as u32;
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
            }
        }
        out
    };
    let (Some(id), Some(ts), Some(sig)) = (
        req.header("webhook-id"),
        req.header("webhook-timestamp"),
        req.header("webhook-signature"),
    ) else {
        return false;
    };
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&req.body);
    let want = mac.finalize().into_bytes();
    let got = sig.strip_prefix("v1,").unwrap_or_default();
    let encoded: String = {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for chunk in want.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..4 {
                s.push(if i <= chunk.len() {
                    alphabet[(n >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        s
    };
    got == encoded
}

#[test]
fn a_webhook_is_the_signed_event_and_a_retry_keeps_its_id() {
    let hook = HookDouble::start();
    let env = webhook_env(&hook);
    hook.answer(503);
    let run = |now: &str| {
        env.cmd(["run", "--once"])
            .now(now)
            .env("HB_WEBHOOK_SECRET", WHSEC)
            .output()
    };
    run(NOW).code(0);
    run("2026-03-02T10:30:00Z").code(0);
    let posts = hook.posts();
    assert_eq!(posts.len(), 2, "{posts:#?}");
    for p in &posts {
        assert_eq!(p.path(), "/hooks/hb");
        assert!(signed(p, WHSEC), "{p:#?}");
        assert_eq!(p.header("content-type"), Some("application/json"));
    }
    // The same delivery, tried twice: the same id, in the header and the body.
    assert_eq!(posts[0].header("webhook-id"), posts[1].header("webhook-id"));
    let body: Value = serde_json::from_slice(&posts[1].body).unwrap();
    assert_eq!(body["type"], "reminder");
    assert_eq!(body["id"].as_str(), posts[1].header("webhook-id"));
    assert_eq!(body["title"], "Stretch");
    assert_eq!(body["data"]["text"], "Stretch");
    assert!(
        body["timestamp"]
            .as_str()
            .unwrap()
            .starts_with("2026-03-02T10:00")
    );
    // A body changed on the way fails the check.
    let mut forged = posts[1].clone();
    forged.body = b"{\"type\":\"approval\"}".to_vec();
    assert!(!signed(&forged, WHSEC));
    // The secret is in no sink.
    assert!(
        !env.audit_text()
            .contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    );
}

#[test]
fn quiet_hours_hold_a_reminder_but_not_a_failure() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "quiet_hours = \"08:00-12:00\"\n");
    run(&env, NOW).code(1);
    let texts = texts(&hook);
    assert_eq!(texts.len(), 1, "{texts:#?}");
    assert!(texts[0].contains("@shell failed"), "{}", texts[0]);
    let held = env.events("notification_held");
    assert_eq!(held.len(), 1, "{:#?}", env.audit());
    assert_eq!(
        (held[0]["kind"].as_str(), held[0]["reason"].as_str()),
        (Some("reminder"), Some("quiet_hours"))
    );
    // After the quiet hours, the reminder goes out.
    run(&env, "2026-03-02T12:30:00Z").code(1);
    assert!(hook.posts().len() >= 2);
    assert!(crate::channels::texts(&hook)[1].contains("Stretch"));
}

#[test]
fn a_429_is_honoured_across_runs_and_a_day_old_message_is_dropped() {
    let hook = HookDouble::start();
    let env = slack_env(&hook, "events = [\"reminder\"]\n");
    hook.answer_with(Answer::Status(
        429,
        vec![("Retry-After".into(), "3600".into())],
        "slow down".into(),
    ));
    run(&env, NOW).code(1);
    assert_eq!(hook.posts().len(), 1);
    // Within the hour nothing is tried.
    run(&env, "2026-03-02T10:30:00Z").code(1);
    assert_eq!(hook.posts().len(), 1);
    // After it, the message goes.
    run(&env, "2026-03-02T11:01:00Z").code(1);
    assert_eq!(hook.posts().len(), 2);

    // A message that could not be sent for 24 h is dropped, and said so.
    let hook = HookDouble::start();
    let env = slack_env(&hook, "events = [\"reminder\"]\n");
    let url = env.read("hook-url");
    env.cmd(["run", "--once"])
        .now(NOW)
        .env("HB_SLACK", "http://127.0.0.1:9/nothing-listens")
        .output()
        .code(1);
    env.write("HEARTBEAT.md", "## Recurring\n");
    env.cmd(["run", "--once"])
        .now("2026-03-03T10:00:01Z")
        .env("HB_SLACK", url)
        .output()
        .code(0);
    assert!(hook.posts().is_empty());
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "expired");
}

#[test]
fn discord_gets_its_own_json_in_parts_of_at_most_2000_characters() {
    let hook = HookDouble::start();
    let long = "word ".repeat(100);
    let md = format!(
        "## Recurring\n- [ ] @notify {{\"text\": \"{}\"}}\n",
        [long.trim(); 6].join("\\n")
    );
    let env = Env::new(&md).config(
        "timezone = \"UTC\"\n[channels.gaming]\nkind = \"discord\"\nurl_env = \"HB_DISCORD\"\n",
    );
    let url = format!("{}/api/webhooks/1/tok", hook.url());
    env.cmd(["run", "--once"])
        .now(NOW)
        .env("HB_DISCORD", url)
        .output()
        .code(0);
    let posts = hook.posts();
    assert!(posts.len() >= 2, "{posts:#?}");
    let mut all = String::new();
    for p in &posts {
        let v: Value = serde_json::from_slice(&p.body).unwrap();
        let content = v["content"].as_str().unwrap();
        assert!(content.chars().count() <= 2000, "{}", content.len());
        assert_eq!(v["allowed_mentions"]["parse"], serde_json::json!([]));
        all.push_str(content);
    }
    assert!(all.starts_with("**heartbeat: "), "{all}");
    // Below the title line, every word of the text, none lost at a cut.
    let (_, body) = all.split_once('\n').unwrap();
    assert_eq!(body.matches("word").count(), 600);
}

#[test]
fn notify_names_its_channel_or_its_task_is_invalid() {
    let hook = HookDouble::start();
    let env = Env::new(
        "## Recurring\n- [ ] @notify {\"text\": \"to the team\", \"channel\": \"team\"}\n\
         - [ ] @notify {\"text\": \"nowhere\", \"channel\": \"teem\"}\n",
    )
    .config(
        "timezone = \"UTC\"\n[channels.team]\nkind = \"slack\"\nurl_env = \"HB_SLACK\"\n\
         events = [\"failure\"]\n",
    );
    let url = format!("{}/hook", hook.url());
    let out = env
        .cmd(["run", "--once"])
        .now(NOW)
        .env("HB_SLACK", &url)
        .output();
    out.code(1);
    let invalid = env.events("task_invalid");
    assert_eq!(invalid.len(), 1, "{:#?}", env.audit());
    let error = invalid[0]["error"].as_str().unwrap();
    assert!(
        error.contains("no channel named \"teem\" (did you mean \"team\"?)"),
        "{error}"
    );
    // The named channel gets the text although its events do not list notify.
    let texts = texts(&hook);
    assert!(
        texts.iter().any(|t| t.contains("to the team")),
        "{texts:#?}"
    );
}

#[test]
fn the_secrets_of_every_channel_are_in_no_sink() {
    let hook = HookDouble::start();
    let slack = format!("{}/services/T9/B9/slack-s3cret-path", hook.url());
    let discord = format!("{}/api/webhooks/42/discord-s3cret-tok", hook.url());
    let whsec = "whsec_c2VjcmV0LW9mLWEtd2ViaG9vay1vZi1vdXJz";
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"env; echo $HB_SLACK; exit 1\"}\n")
        .config(&format!(
            "timezone = \"UTC\"\nautonomy = \"full\"\n[tools.shell]\napproval = \"auto\"\n\
         [channels.team]\nkind = \"slack\"\nurl_env = \"HB_SLACK\"\n\
         [channels.gaming]\nkind = \"discord\"\nurl_env = \"HB_DISCORD\"\n\
         [channels.ops]\nkind = \"webhook\"\nurl = \"{}/ops\"\nsecret_env = \"HB_WHSEC\"\n",
            hook.url()
        ));
    let out = env
        .cmd(["run", "--once", "-v"])
        .now(NOW)
        .env("HB_SLACK", &slack)
        .env("HB_DISCORD", &discord)
        .env("HB_WHSEC", whsec)
        .output();
    out.code(1);
    // Three channels, one failure each.
    assert_eq!(hook.posts().len(), 3, "{:#?}", hook.posts());
    let secrets = [
        "slack-s3cret-path",
        "discord-s3cret-tok",
        "c2VjcmV0LW9mLWEtd2ViaG9vay1vZi1vdXJz",
    ];
    let mut sinks = vec![
        ("stdout", out.stdout.clone()),
        ("stderr", out.stderr.clone()),
        ("audit", env.audit_text()),
    ];
    // What each channel was sent: no channel carries another's secret (nor its own).
    for p in hook.posts() {
        sinks.push((
            "a channel's message",
            String::from_utf8_lossy(&p.body).into_owned(),
        ));
    }
    // Every table of the state database.
    let db = env.db();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for t in tables {
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let rows: Vec<String> = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        sinks.push(("a table", format!("{t}: {}", rows.join("\n"))));
    }
    for (sink, text) in &sinks {
        for s in secrets {
            assert!(!text.contains(s), "{s} in {sink}: {text}");
        }
    }
    // The tool ran without the variables: its `env` listed none of them.
    let failed = env.events("task_failed");
    let output = failed[0]["output"].as_str().unwrap_or_default();
    assert!(
        !output.contains("HB_SLACK") && !output.contains("HB_WHSEC"),
        "{output}"
    );
}
