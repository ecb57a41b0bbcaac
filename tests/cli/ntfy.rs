//! `kind = "ntfy"` and approvals by ntfy (docs/reference.md#ntfy,
//! docs/reference.md#approvals-by-ntfy), end to end through the binary against an ntfy double
//! on 127.0.0.1: what is published, the signed Approve and Deny buttons, replies read by the
//! next run (cron alone) and by `heartbeat approve`, every way a reply is refused, the
//! delivery queue's 429 and 4xx, and the secrets in no sink.

use serde_json::{Value, json};

use crate::common::*;
use crate::hook_double::{Answer, HookDouble};

const TOPIC: &str = "hbtopic-s3cr3t-q1";
const REPLY: &str = "hbreply-s3cr3t-w2";
const BEARER: &str = "tk_s3cr3tbearer_e3";
/// Five minutes after `NOW`.
const LATER: &str = "2026-05-01T10:05:00Z";
/// `NOW` plus the default `approval_ttl` (24 h), in Unix seconds.
const EXPIRY: i64 = 1_777_716_000;

/// A one-time shell task that appends a line to `ran.txt`, and an ntfy channel at `ntfy`
/// with approvals.
fn ntfy_env(ntfy: &HookDouble, extra: &str) -> Env {
    ntfy_env_with(
        ntfy,
        "## One-time\n- [ ] @shell {\"cmd\": \"echo x >> ran.txt\"}\n",
        extra,
    )
}

/// The check-list `md`, and the ntfy channel of [`ntfy_env`].
fn ntfy_env_with(ntfy: &HookDouble, md: &str, extra: &str) -> Env {
    Env::new(md).config(&format!(
        "timezone = \"UTC\"\n[channels.phone]\nkind = \"ntfy\"\nserver = \"{}\"\n\
         topic_env = \"HB_NTFY_TOPIC\"\ntoken_env = \"HB_NTFY_TOKEN\"\napprovals = true\n\
         reply_topic_env = \"HB_NTFY_REPLY\"\ntags = [\"robot\"]\n{extra}",
        ntfy.url()
    ))
}

trait NtfyVars {
    /// The channel's variables set.
    fn ntfy(self) -> Cmd;
}

impl NtfyVars for Cmd {
    fn ntfy(self) -> Cmd {
        self.env("HB_NTFY_TOPIC", TOPIC)
            .env("HB_NTFY_TOKEN", BEARER)
            .env("HB_NTFY_REPLY", REPLY)
    }
}

fn run(env: &Env, now: &str) -> Output {
    env.cmd(["run", "--once"]).now(now).ntfy().output()
}

/// The JSON of every message published.
fn published(ntfy: &HookDouble) -> Vec<Value> {
    ntfy.posts()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON body"))
        .collect()
}

/// The bodies of the first message's buttons: (approve, deny).
fn buttons(ntfy: &HookDouble) -> (String, String) {
    let first = &published(ntfy)[0];
    let body = |i: usize| {
        first["actions"][i]["body"]
            .as_str()
            .expect("a body")
            .to_string()
    };
    (body(0), body(1))
}

/// One message on the reply topic, as ntfy's JSON lines show it.
fn line(id: &str, text: &str) -> String {
    format!(
        "{}\n",
        json!({"id": id, "time": 1_777_629_700, "event": "message", "topic": REPLY, "message": text})
    )
}

/// The approval queued at `NOW`, published.
fn queued(ntfy: &HookDouble, extra: &str) -> Env {
    let env = ntfy_env(ntfy, extra);
    run(&env, NOW).code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    env
}

fn ran(env: &Env) -> usize {
    if env.exists("ran.txt") {
        env.read("ran.txt").lines().count()
    } else {
        0
    }
}

fn rejected(env: &Env) -> Vec<String> {
    env.events("channel_rejected")
        .iter()
        .map(|e| {
            assert_eq!(e["channel"], "phone", "{e}");
            e["reason"].as_str().expect("a reason").to_string()
        })
        .collect()
}

#[test]
fn an_approval_is_published_with_its_title_priority_tags_and_signed_buttons() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let posts = ntfy.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].path(), "/");
    assert_eq!(
        posts[0].header("authorization"),
        Some(format!("Bearer {BEARER}").as_str())
    );
    let m = &published(&ntfy)[0];
    assert_eq!(m["topic"], TOPIC);
    let title = m["title"].as_str().unwrap();
    assert!(
        title.starts_with("heartbeat: approval #1 @shell "),
        "{title}"
    );
    assert_eq!(m["priority"], 4);
    assert_eq!(m["tags"], json!(["robot"]));
    assert!(
        m["sequence_id"].as_str().unwrap().starts_with("hb_"),
        "{m:#}"
    );
    let text = m["message"].as_str().unwrap();
    assert!(text.contains("heartbeat approve 1"), "{text}");
    assert!(text.contains("echo x >> ran.txt"), "{text}");

    let actions = m["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "no Always button: {actions:#?}");
    let reply_url = format!("{}/{REPLY}", ntfy.url());
    for (action, (label, decision)) in actions
        .iter()
        .zip([("Approve", "approve"), ("Deny", "deny")])
    {
        assert_eq!(action["action"], "http");
        assert_eq!(action["label"], label);
        assert_eq!(action["url"], reply_url.as_str());
        assert_eq!(action["method"], "POST");
        assert_eq!(action["clear"], true);
        let body = action["body"].as_str().unwrap();
        let words: Vec<&str> = body.split(' ').collect();
        assert_eq!(
            words[..4],
            ["hb1", decision, "1", &EXPIRY.to_string()],
            "{body}"
        );
        assert_eq!(words[4].len(), 43, "{body}");
        assert!(
            words[4]
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            "{body}"
        );
    }
    let (approve, deny) = buttons(&ntfy);
    assert_ne!(approve.split(' ').nth(4), deny.split(' ').nth(4));

    // The install key: 32 bytes only the owner may read.
    use std::os::unix::fs::MetadataExt;
    let key = env.state().join("channel.key");
    let meta = std::fs::metadata(&key).unwrap();
    assert_eq!((meta.len(), meta.mode() & 0o777), (32, 0o600));
    let sent = env.events("notification_sent");
    assert_eq!(sent.len(), 1, "{:#?}", env.audit());
    assert_eq!(sent[0]["channel"], "phone");
    assert_eq!(sent[0]["kind"], "approval");
}

#[test]
fn an_urgent_message_is_priority_5_and_a_channel_without_approvals_has_no_buttons() {
    let ntfy = HookDouble::start();
    let env = Env::new(
        "## One-time\n- [ ] @shell {\"cmd\": \"exit 3\"}\n- [ ] @shell {\"cmd\": \"echo x\"}\n",
    )
    .config(&format!(
        "timezone = \"UTC\"\n[tools.shell]\napproval = \"auto\"\n[channels.phone]\n\
             kind = \"ntfy\"\nserver = \"{}\"\ntopic_env = \"HB_NTFY_TOPIC\"\n",
        ntfy.url()
    ));
    env.cmd(["run", "--once"])
        .env("HB_NTFY_TOPIC", TOPIC)
        .output()
        .code(1);
    let m = published(&ntfy);
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["priority"], 5);
    assert_eq!(m[0]["tags"], json!([]));
    assert_eq!(m[0]["actions"], json!([]));
    assert_eq!(ntfy.posts()[0].header("authorization"), None);
    // Without approvals the reply topic is never read.
    assert!(ntfy.requests().iter().all(|r| r.method == "POST"));
}

#[test]
fn approved_from_the_phone_the_next_run_runs_it_with_cron_alone() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    // The first read asked for everything the server keeps, with the bearer token.
    let gets: Vec<_> = ntfy
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert_eq!(gets.len(), 1, "{gets:#?}");
    assert_eq!(gets[0].url, format!("/{REPLY}/json?poll=1&since=all"));
    assert_eq!(
        gets[0].header("authorization"),
        Some(format!("Bearer {BEARER}").as_str())
    );
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &approve));
    run(&env, LATER).code(0);
    assert_eq!(ran(&env), 1, "the next run ran it");
    let row = env.approval(1);
    assert_eq!(row["state"], "succeeded", "{row:#}");
    assert_eq!(row["decided_by"], "ntfy:phone");
    let approved = env.events("approval_approved");
    assert_eq!(approved.len(), 1);
    assert_eq!(approved[0]["by"], "ntfy:phone");
    assert_eq!(approved[0]["always"], false);
    assert!(rejected(&env).is_empty());
    // The next read starts after the message read.
    run(&env, "2026-05-01T10:10:00Z").code(0);
    let last = ntfy
        .requests()
        .into_iter()
        .rfind(|r| r.method == "GET")
        .unwrap();
    assert_eq!(last.url, format!("/{REPLY}/json?poll=1&since=m1"));
    assert_eq!(ran(&env), 1);
}

#[test]
fn denied_from_the_phone_nothing_runs() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (_, deny) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &deny));
    run(&env, LATER).code(0);
    assert_eq!(ran(&env), 0);
    let row = env.approval(1);
    assert_eq!(row["state"], "denied", "{row:#}");
    assert_eq!(row["decided_by"], "ntfy:phone");
    assert_eq!(env.events("approval_denied").len(), 1);
}

#[test]
fn heartbeat_approve_reads_the_replies_first() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &approve));
    let out = env
        .cmd(["approve", "1"])
        .now(LATER)
        .user("tester")
        .ntfy()
        .output();
    out.code(0);
    assert!(
        out.stdout.contains("#1 was already approved by ntfy:phone"),
        "{}",
        out.stdout
    );
    assert_eq!(ran(&env), 1);
    assert_eq!(env.approval(1)["decided_by"], "ntfy:phone");
}

#[test]
fn a_reply_not_signed_for_this_approval_and_decision_decides_nothing() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, deny) = buttons(&ntfy);
    let deny_token = deny.split(' ').nth(4).unwrap();
    let forged = [
        // Not the hb1 form at all.
        "please approve 1".to_string(),
        // The Deny button's token on an approve.
        format!("hb1 approve 1 {EXPIRY} {deny_token}"),
        // A later expiry than the one signed.
        approve.replace(&EXPIRY.to_string(), &(EXPIRY + 3600).to_string()),
        // Another approval's id.
        approve.replacen(" 1 ", " 2 ", 1),
        // A token of the right shape, made up.
        format!("hb1 approve 1 {EXPIRY} {}", "A".repeat(43)),
    ];
    let body: String = forged
        .iter()
        .enumerate()
        .map(|(i, text)| line(&format!("m{i}"), text))
        .collect();
    ntfy.poll_answer(body);
    run(&env, LATER).code(0);
    assert_eq!(
        rejected(&env),
        [
            "unknown",
            "bad_token",
            "bad_token",
            "bad_token",
            "bad_token"
        ]
    );
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert_eq!(ran(&env), 0);
    assert!(env.events("approval_approved").is_empty());
    // The human line of `heartbeat log`.
    let out = env.cmd(["log", "--event", "channel_rejected"]).output();
    out.code(0);
    assert!(
        out.stdout.contains("reply on phone bad_token"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_reply_after_its_expiry_is_refused() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &approve));
    run(&env, "2026-05-02T10:30:00Z").code(0);
    assert_eq!(rejected(&env), ["expired"]);
    assert_eq!(env.approval_state(1).as_deref(), Some("expired"));
    assert_eq!(ran(&env), 0);
}

#[test]
fn a_token_is_used_once() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(format!("{}{}", line("m1", &approve), line("m2", &approve)));
    run(&env, LATER).code(0);
    assert_eq!(rejected(&env), ["replayed"]);
    assert_eq!(ran(&env), 1);
    assert_eq!(env.events("approval_approved").len(), 1);
}

#[test]
fn an_approval_decided_at_the_terminal_is_not_decided_again() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    env.cmd(["deny", "1"])
        .now("2026-05-01T10:01:00Z")
        .user("tester")
        .output()
        .code(0);
    ntfy.poll_answer(line("m1", &approve));
    run(&env, LATER).code(0);
    assert_eq!(rejected(&env), ["decided"]);
    let row = env.approval(1);
    assert_eq!(row["state"], "denied");
    assert_eq!(row["decided_by"], "cli:tester");
    assert_eq!(ran(&env), 0);
}

#[test]
fn two_runs_racing_over_two_replies_run_the_task_once() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    // Whichever run reads the topic first sees the approval; the other, if it reads at
    // all, sees the same message again.
    ntfy.poll_answer(format!("{}{}", line("m1", &approve), line("m2", &approve)));
    ntfy.poll_answer(format!("{}{}", line("m1", &approve), line("m2", &approve)));
    let spawn = || env.cmd(["run", "--once"]).now(LATER).ntfy().spawn_piped();
    let (a, b) = (spawn(), spawn());
    let t = std::time::Duration::from_secs(60);
    wait_output(a, "run --once", t).code(0);
    wait_output(b, "run --once", t).code(0);
    assert_eq!(ran(&env), 1, "{:#?}", env.audit());
    assert_eq!(env.events("approval_approved").len(), 1);
    assert_eq!(env.approval_state(1).as_deref(), Some("succeeded"));
    assert!(
        rejected(&env).iter().all(|r| r == "replayed"),
        "{:?}",
        rejected(&env)
    );
}

#[test]
fn an_unset_reply_topic_or_a_server_down_decides_nothing_and_fails_no_run() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &approve));
    // The reply topic's variable unset: a diagnostic, nothing read.
    let gets = |d: &HookDouble| d.requests().iter().filter(|r| r.method == "GET").count();
    let before = gets(&ntfy);
    let out = env
        .cmd(["-v", "run", "--once"])
        .now(LATER)
        .env("HB_NTFY_TOPIC", TOPIC)
        .output();
    out.code(0);
    assert!(
        out.stderr
            .contains("phone: cannot read replies: $HB_NTFY_REPLY is not set"),
        "{}",
        out.stderr
    );
    assert_eq!(gets(&ntfy), before);
    // The server gone: the same.
    let url = ntfy.url();
    drop(ntfy);
    let out = env.cmd(["-v", "run", "--once"]).now(LATER).ntfy().output();
    out.code(0);
    assert!(
        out.stderr.contains("phone: cannot read replies"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(REPLY), "{}", out.stderr);
    assert!(!out.stderr.contains(&url), "{}", out.stderr);
    assert_eq!(env.approval_state(1).as_deref(), Some("pending"));
    assert!(rejected(&env).is_empty());
}

#[test]
fn a_429_is_honoured_and_a_4xx_drops_the_message() {
    let ntfy = HookDouble::start();
    ntfy.answer_with(Answer::Status(
        429,
        vec![("Retry-After".into(), "600".into())],
        "slow down".into(),
    ));
    let env = queued(&ntfy, "");
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    // Before the wait is over nothing is sent; after it, the message is.
    run(&env, LATER).code(0);
    assert_eq!(ntfy.posts().len(), 1);
    run(&env, "2026-05-01T10:11:00Z").code(0);
    let posts = ntfy.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(
        posts[0].body, posts[1].body,
        "the same message, the same sequence id"
    );
    assert_eq!(env.events("notification_sent").len(), 1);

    let ntfy = HookDouble::start();
    ntfy.answer(400);
    let env = queued(&ntfy, "");
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "rejected");
    assert_eq!(dropped[0]["channel"], "phone");
    let outbox: i64 = env
        .db()
        .query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(outbox, 0);
}

#[test]
fn the_topics_and_the_bearer_token_are_in_no_sink() {
    let ntfy = HookDouble::start();
    // The server answers an error that quotes the topic.
    ntfy.answer_with(Answer::Status(
        500,
        Vec::new(),
        format!("no such topic {TOPIC} (reply {REPLY}, {BEARER})"),
    ));
    let env = ntfy_env(&ntfy, "");
    let mut outputs = vec![env.cmd(["-v", "run", "--once"]).ntfy().output()];
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(format!(
        "{}{}",
        line("m1", "nonsense"),
        line("m2", &approve)
    ));
    outputs.push(env.cmd(["-v", "run", "--once"]).now(LATER).ntfy().output());
    outputs.push(env.cmd(["status", "--json"]).ntfy().output());
    outputs.push(env.cmd(["log", "--all"]).ntfy().output());
    assert_eq!(ran(&env), 1);
    for secret in [TOPIC, REPLY, BEARER] {
        for out in &outputs {
            assert!(!out.stdout.contains(secret), "{secret} in {}", out.stdout);
            assert!(!out.stderr.contains(secret), "{secret} in {}", out.stderr);
        }
        // Every file of the state dir: the audit log, the database and its journal.
        for entry in std::fs::read_dir(env.state()).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} in {}",
                path.display()
            );
        }
    }
}

#[test]
fn a_daemon_tick_reads_the_replies_and_runs_what_they_approve() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &approve));
    let d = env
        .cmd(["daemon", "--every", "1s"])
        .now(LATER)
        .ntfy()
        .spawn_guarded();
    wait_until("the approved task ran", WAIT, || ran(&env) == 1);
    d.signal(Signal::SIGTERM);
    d.finish(WAIT).code(0);
    assert_eq!(ran(&env), 1);
    let row = env.approval(1);
    assert_eq!(row["decided_by"], "ntfy:phone", "{row:#}");
    assert_eq!(row["state"], "succeeded", "{row:#}");
}

#[test]
fn an_approval_whose_input_holds_a_hidden_value_gets_no_buttons() {
    let ntfy = HookDouble::start();
    let md = format!("## One-time\n- [ ] @shell {{\"cmd\": \"echo {BEARER}\"}}\n");
    let env = ntfy_env_with(&ntfy, &md, "");
    run(&env, NOW).code(0);
    let m = &published(&ntfy)[0];
    assert_eq!(m["actions"], json!([]), "{m:#}");
    let text = m["message"].as_str().unwrap();
    assert!(text.contains("hidden"), "{text}");
    assert!(text.contains("heartbeat approve 1"), "{text}");
    assert!(!text.contains(BEARER), "{text}");
}

#[test]
fn a_daemon_reads_the_replies_between_ticks_too() {
    let ntfy = HookDouble::start();
    let env = queued(&ntfy, "");
    let (approve, _) = buttons(&ntfy);
    ntfy.poll_answer(line("m1", &approve));
    // The last run was five minutes ago and the next tick is at 11:00: only a read of the
    // reply topic between ticks (at least every 30 s) can run the task.
    let d = env
        .cmd(["daemon", "--every", "1h"])
        .now(LATER)
        .ntfy()
        .spawn_guarded();
    wait_until(
        "the approved task ran",
        std::time::Duration::from_secs(120),
        || ran(&env) == 1,
    );
    d.signal(Signal::SIGTERM);
    d.finish(WAIT).code(0);
    assert_eq!(env.approval(1)["decided_by"], "ntfy:phone");
    // It ran as approved work, not as a scheduled tick's plan.
    let started = env.events("run_started");
    assert_eq!(started.last().unwrap()["trigger"], "manual", "{started:#?}");
}

#[test]
fn an_ntfy_table_without_what_it_needs_is_refused_at_load_naming_the_key() {
    for (table, key) in [
        (
            "approvals = true\ntopic_env = \"T\"\n",
            "channels.phone.reply_topic_env",
        ),
        ("reply_topic_env = \"R\"\n", "channels.phone.topic_env"),
    ] {
        let env = Env::new("## One-time\n- [ ] Stretch\n")
            .config(&format!("[channels.phone]\nkind = \"ntfy\"\n{table}"));
        let out = env.cmd(["check"]).output();
        out.code(2);
        assert!(out.stderr.contains("heartbeat.toml:"), "{}", out.stderr);
        assert!(out.stderr.contains(key), "{}", out.stderr);
    }
}
