//! `kind = "command"` channels (docs/reference.md#command), end to end through the binary
//! with small shell scripts as the command: the event as one JSON line on stdin, retries,
//! refusals by exit status, the timeout, and the environment it runs in.

use serde_json::Value;

use crate::common::Env;

const NOW: &str = "2026-03-02T10:00:00Z";
const LATER: &str = "2026-03-02T10:30:00Z";

/// A check-list with one reminder (a `reminder` message each run), and a command channel
/// running `sh notify.sh` (in the config's directory) with `extra` keys.
fn command_env(script: &str, extra: &str) -> Env {
    let env = Env::new("## Recurring\n- [ ] Stretch\n").config(&format!(
        "timezone = \"UTC\"\n[channels.pager]\nkind = \"command\"\n\
         command = [\"sh\", \"notify.sh\"]\nevents = [\"reminder\"]\n{extra}"
    ));
    env.write("notify.sh", script);
    env
}

/// The lines the script appended to `got.jsonl`, as JSON.
fn received(env: &Env) -> Vec<Value> {
    if !env.exists("got.jsonl") {
        return Vec::new();
    }
    env.read("got.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

fn outbox_rows(env: &Env) -> i64 {
    env.db()
        .query_row(
            "SELECT COUNT(*) FROM outbox WHERE channel = 'pager'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn the_message_is_one_json_line_on_the_commands_stdin() {
    // The whole of stdin is kept as it came, to see it is one line ending in `\n`.
    let env = command_env("cat > stdin.txt; cat stdin.txt >> got.jsonl\n", "");
    env.run_once(NOW).code(0);
    let stdin = env.read("stdin.txt");
    assert!(stdin.ends_with('\n'), "{stdin:?}");
    assert_eq!(stdin.lines().count(), 1, "{stdin:?}");
    let got = received(&env);
    assert_eq!(got.len(), 1, "{got:#?}");
    let event = &got[0];
    let keys: Vec<&str> = event
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys.iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        ["data", "id", "text", "timestamp", "title", "type"].into(),
        "{event:#}"
    );
    assert_eq!(event["type"], "reminder");
    assert!(
        event["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{event:#}"
    );
    assert!(
        event["timestamp"]
            .as_str()
            .is_some_and(|t| t.starts_with("2026-03-02T10:00:00")),
        "{event:#}"
    );
    assert!(
        event["title"].as_str().unwrap().contains("Stretch"),
        "{event:#}"
    );
    assert!(
        event["text"].as_str().unwrap().contains("Stretch"),
        "{event:#}"
    );
    assert!(event["data"].is_object(), "{event:#}");
    let sent = env.events("notification_sent");
    assert_eq!(sent.len(), 1, "{:#?}", env.audit());
    assert_eq!(sent[0]["channel"], "pager");
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn exit_75_keeps_the_message_and_the_retry_has_the_same_id() {
    // The first try says "try later"; every try records what it was given.
    let env = command_env(
        "cat >> got.jsonl\nif [ ! -e tried ]; then touch tried; echo 'queue full' >&2; exit 75; fi\n",
        "",
    );
    env.run_once(NOW).code(0);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains("exit status 75") && error.contains("queue full"),
        "{error}"
    );
    assert_eq!(outbox_rows(&env), 1);

    env.run_once(LATER).code(0);
    let got = received(&env);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[0]["id"], got[1]["id"]);
    assert_eq!(got[0], got[1]);
    assert_eq!(env.events("notification_sent").len(), 1);
    assert_eq!(outbox_rows(&env), 0);
}

#[test]
fn exit_65_drops_the_message_as_rejected() {
    let env = command_env("cat >> got.jsonl; echo 'bad recipient' >&2; exit 65\n", "");
    env.run_once(NOW).code(0);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], false);
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("bad recipient"),
        "{}",
        failed[0]
    );
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "rejected");
    assert_eq!(dropped[0]["channel"], "pager");
    assert_eq!(outbox_rows(&env), 0);
    // Not tried again.
    env.run_once(LATER).code(0);
    assert_eq!(received(&env).len(), 2, "the next run's own reminder only");
}

#[test]
fn a_hung_command_is_stopped_with_its_group_at_the_timeout() {
    // Two reminders; the command starts a child in its group and never ends.
    let env = Env::new("## Recurring\n- [ ] Stretch\n- [ ] Water the plants\n").config(
        "timezone = \"UTC\"\n[channels.pager]\nkind = \"command\"\n\
         command = [\"sh\", \"notify.sh\"]\nevents = [\"reminder\"]\ntimeout = \"1s\"\n",
    );
    env.write(
        "notify.sh",
        "echo started >> tries\nsleep 600 &\necho $! > child.pid\nwait\n",
    );
    env.run_once(NOW).code(0);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 1s"),
        "{}",
        failed[0]
    );
    // The other message was not tried in this run: both wait.
    assert_eq!(env.read("tries").lines().count(), 1);
    assert_eq!(outbox_rows(&env), 2);
    // The command's child, in its group, was stopped with it.
    let child = env.read("child.pid");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.trim()));
    assert!(
        stat.is_err() || stat.as_deref().is_ok_and(|s| s.contains(") Z ")),
        "the child lives on: {stat:?}"
    );
}

#[test]
fn the_command_does_not_see_the_configs_secrets() {
    let env = Env::new("## Recurring\n- [ ] Stretch\n").config(
        "timezone = \"UTC\"\n\
         [channels.pager]\nkind = \"command\"\ncommand = [\"sh\", \"notify.sh\"]\n\
         events = [\"reminder\"]\n\
         [channels.team]\nkind = \"slack\"\nurl_env = \"HB_SLACK_URL\"\nevents = [\"budget\"]\n\
         [channels.ops]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:9/hook\"\n\
         secret_env = \"HB_HOOK_SECRET\"\nevents = [\"budget\"]\n",
    );
    env.write("notify.sh", "env > seen.env\ncat > /dev/null\n");
    env.cmd(["run", "--once"])
        .now(NOW)
        .env(
            "HB_SLACK_URL",
            "https://hooks.example/services/T1/B2/slacksecret",
        )
        .env("HB_HOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .env("HB_NOT_A_SECRET", "plain")
        .output()
        .code(0);
    let seen = env.read("seen.env");
    assert!(seen.contains("HB_NOT_A_SECRET=plain"), "{seen}");
    for secret in [
        "HB_SLACK_URL",
        "slacksecret",
        "HB_HOOK_SECRET",
        "MfKQ9r8GKYqr",
    ] {
        assert!(!seen.contains(secret), "{secret} in {seen}");
    }
}

#[test]
fn status_and_check_name_a_channel_whose_last_delivery_failed_until_one_succeeds() {
    // Fails ("try later") while `down` exists.
    let env = Env::new("## Recurring\n- [ ] Stretch\n").config(&format!(
        "timezone = \"UTC\"\n{}[channels.pager]\nkind = \"command\"\n\
         command = [\"sh\", \"notify.sh\"]\nevents = [\"reminder\"]\n",
        crate::common::tg_toml("http://127.0.0.1:9", &[42], "events = [\"budget\"]")
    ));
    env.write(
        "notify.sh",
        "cat > /dev/null\nif [ -e down ]; then echo 'queue full' >&2; exit 75; fi\n",
    );
    let status = || env.cmd(["status", "--json"]).now(LATER).output().json();
    // Nothing sent yet: every channel is there, Telegram too.
    let before = status();
    assert_eq!(
        before["channels"],
        serde_json::json!({
            "telegram": {"kind": "telegram", "queued": 0, "last_error": null, "last_sent": null},
            "pager": {"kind": "command", "queued": 0, "last_error": null, "last_sent": null},
        }),
        "{before:#}"
    );

    env.write("down", "");
    env.run_once(NOW).code(0);
    let failed = status();
    let pager = &failed["channels"]["pager"];
    assert_eq!(pager["queued"], 1, "{failed:#}");
    assert_eq!(pager["last_sent"], Value::Null);
    let error = pager["last_error"].as_str().unwrap();
    assert!(error.contains("exit status 75: queue full"), "{error}");
    assert_eq!(failed["channels"]["telegram"]["last_error"], Value::Null);

    let human = env.cmd(["status"]).now(LATER).output();
    human.code(0);
    let line = human
        .stdout
        .lines()
        .find(|l| l.contains("pager"))
        .unwrap_or_else(|| panic!("no line names the channel: {}", human.stdout));
    assert!(
        line.contains("(command)") && line.contains("queue full") && line.contains("1 message"),
        "{line}"
    );
    assert_eq!(
        human
            .stdout
            .lines()
            .filter(|l| l.contains("telegram"))
            .count(),
        0,
        "{}",
        human.stdout
    );

    let check = env.cmd(["check"]).now(LATER).output();
    check.code(0);
    assert!(
        check
            .stdout
            .contains("warning: channel pager (command): its last delivery failed"),
        "{}",
        check.stdout
    );
    let check = env.cmd(["check", "--json"]).now(LATER).output();
    check.code(0);
    let problems = check.json()["problems"].clone();
    let warning = problems
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["message"].as_str().unwrap().contains("channel pager"))
        .unwrap_or_else(|| panic!("{problems:#}"))
        .clone();
    assert_eq!(
        crate::common::keys(&warning),
        ["column", "file", "line", "message", "severity"]
            .iter()
            .map(|k| k.to_string())
            .collect(),
    );
    assert_eq!(warning["severity"], "warning");
    assert_eq!(
        warning["file"],
        env.path("heartbeat.toml").display().to_string()
    );

    // The next delivery goes through: the failure is no longer shown.
    std::fs::remove_file(env.path("down")).unwrap();
    env.run_once(LATER).code(0);
    let after = status();
    let pager = &after["channels"]["pager"];
    assert_eq!(pager["queued"], 0, "{after:#}");
    assert_eq!(pager["last_error"], Value::Null, "{after:#}");
    assert!(
        pager["last_sent"]
            .as_str()
            .is_some_and(|t| t.starts_with("2026-03-02T10:30:00")),
        "{after:#}"
    );
    let check = env.cmd(["check"]).now(LATER).output();
    assert!(!check.stdout.contains("channel pager"), "{}", check.stdout);
}
