//! The `email` channel (docs/reference.md#email), end to end through the binary: against a
//! real SMTP server on 127.0.0.1 (`smtp_double.rs`) and a script standing in for sendmail.
//! The TLS rules (smtps:// TLS, smtp:// STARTTLS required, plain only to a loopback host)
//! are unit tests in src/notify/email.rs: no server here has a certificate a client trusts.

use crate::common::{Env, Output};
use crate::smtp_double::{Mail, SmtpDouble};

const NOW: &str = "2026-03-02T10:00:00Z";
const LATER: &str = "2026-03-02T10:30:00Z";
/// The password as the server gets it, and as the URL holds it.
const PASSWORD: &str = "pw@Zq8rT4xVm2";
const PASSWORD_IN_URL: &str = "pw%40Zq8rT4xVm2";
const FROM: &str = "heartbeat@host.example.org";

/// A check-list with one failing task.
fn checklist() -> Env {
    Env::new("## Recurring\n- [ ] @shell {\"cmd\": \"echo broken >&2; exit 3\"}\n")
}

/// `env` with an e-mail channel taking failures, with `transport` (its keys).
fn with_channel(env: Env, transport: &str) -> Env {
    env.config(&format!(
        "timezone = \"UTC\"\nautonomy = \"full\"\n[tools.shell]\napproval = \"auto\"\n\
         [channels.mail]\nkind = \"email\"\n{transport}\nfrom = \"{FROM}\"\n\
         to = [\"me@example.com\", \"ops@example.net\"]\nevents = [\"failure\"]\n"
    ))
}

fn smtp_env() -> Env {
    with_channel(checklist(), "smtp_url_env = \"HB_SMTP_URL\"")
}

/// `run --once` at `now` with `$HB_SMTP_URL` pointing at `smtp`.
fn run(env: &Env, smtp: &SmtpDouble, now: &str) -> Output {
    env.cmd(["run", "--once"])
        .now(now)
        .env("HB_SMTP_URL", smtp.url("me", PASSWORD_IN_URL))
        .output()
}

/// The delivery ids of the channel's queued messages.
fn queued(env: &Env) -> Vec<String> {
    let db = env.db();
    let mut stmt = db
        .prepare("SELECT delivery_id FROM outbox WHERE channel = 'mail' ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `<id@host.example.org>` → `id`.
#[track_caller]
fn delivery_id_of(mail: &Mail) -> String {
    let id = mail.header("Message-ID");
    let inner = id
        .strip_prefix('<')
        .and_then(|s| s.strip_suffix("@host.example.org>"))
        .unwrap_or_else(|| panic!("Message-ID {id:?}"));
    assert!(
        inner.len() == 35
            && inner.starts_with("hb_")
            && inner[3..].bytes().all(|b| b.is_ascii_hexdigit()),
        "Message-ID {id:?}"
    );
    inner.to_string()
}

#[test]
fn a_failure_reaches_the_inbox_with_its_title_sender_recipients_text_and_delivery_id() {
    let Some(smtp) = SmtpDouble::start() else {
        return;
    };
    let env = smtp_env();
    run(&env, &smtp, NOW).code(1);
    let mails = smtp.received();
    assert_eq!(mails.len(), 1, "{mails:#?}");
    let mail = &mails[0];
    assert!(mail.accepted());
    assert_eq!(
        mail.login,
        Some(("me".to_string(), PASSWORD.to_string())),
        "logged in with the URL's user and password"
    );
    assert_eq!(mail.mail_from, FROM);
    assert_eq!(mail.rcpt_to, ["me@example.com", "ops@example.net"]);
    assert_eq!(mail.header("From"), FROM);
    assert_eq!(mail.header("To"), "me@example.com, ops@example.net");
    let subject = mail.header("Subject");
    assert!(
        subject.starts_with("[heartbeat] @shell failed (") && subject.ends_with("HEARTBEAT.md:2)"),
        "{mail:#?}"
    );
    assert!(
        mail.raw
            .contains("\nContent-Type: text/plain; charset=utf-8\n"),
        "{mail:#?}"
    );
    assert!(mail.body.contains("exit status 3"), "{mail:#?}");
    delivery_id_of(mail);
    let sent = env.events("notification_sent");
    assert_eq!(sent.len(), 1, "{:#?}", env.audit());
    assert_eq!(sent[0]["channel"], "mail");
    assert_eq!(sent[0]["kind"], "failure");
    assert!(queued(&env).is_empty());
}

#[test]
fn a_451_keeps_the_message_queued_and_the_retry_carries_the_same_message_id() {
    let Some(smtp) = SmtpDouble::start() else {
        return;
    };
    let env = smtp_env();
    smtp.answer("451 4.3.0 try again later");
    run(&env, &smtp, NOW).code(1);
    let first = smtp.received();
    assert_eq!(first.len(), 1, "{first:#?}");
    assert!(!first[0].accepted());
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    assert_eq!(failed[0]["channel"], "mail");
    assert_eq!(failed[0]["error"], "SMTP 451: 4.3.0 try again later");
    // The Message-ID is the delivery id of the row still queued.
    let id = delivery_id_of(&first[0]);
    assert_eq!(queued(&env), std::slice::from_ref(&id));

    run(&env, &smtp, LATER).code(1);
    let retried: Vec<Mail> = smtp
        .received()
        .into_iter()
        .skip(1)
        .filter(|m| delivery_id_of(m) == id)
        .collect();
    assert_eq!(retried.len(), 1, "{:#?}", smtp.received());
    assert!(retried[0].accepted());
    assert_eq!(retried[0].header("Subject"), first[0].header("Subject"));
    assert_eq!(retried[0].body, first[0].body);
    assert!(!queued(&env).contains(&id));
}

#[test]
fn a_550_drops_the_message_as_rejected() {
    let Some(smtp) = SmtpDouble::start() else {
        return;
    };
    let env = smtp_env();
    smtp.answer("550 5.7.1 relaying denied");
    run(&env, &smtp, NOW).code(1);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], false);
    assert_eq!(failed[0]["error"], "SMTP 550: 5.7.1 relaying denied");
    let dropped = env.events("notification_dropped");
    assert_eq!(dropped.len(), 1, "{:#?}", env.audit());
    assert_eq!(dropped[0]["reason"], "rejected");
    assert_eq!(dropped[0]["channel"], "mail");
    assert!(queued(&env).is_empty());
    // Not tried again.
    run(&env, &smtp, LATER).code(1);
    let mails = smtp.received();
    let first = delivery_id_of(&mails[0]);
    assert_eq!(
        mails.iter().filter(|m| delivery_id_of(m) == first).count(),
        1,
        "{mails:#?}"
    );
}

#[test]
fn an_unset_url_variable_fails_the_delivery_naming_it_and_the_message_waits() {
    let Some(smtp) = SmtpDouble::start() else {
        return;
    };
    let env = smtp_env();
    env.run_once(NOW).code(1);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["error"], "$HB_SMTP_URL is not set");
    assert_eq!(failed[0]["queued"], true);
    assert_eq!(queued(&env).len(), 1);
    assert!(smtp.received().is_empty());
    // Set again: the message goes out with the next run.
    run(&env, &smtp, LATER).code(1);
    assert!(smtp.received().iter().any(Mail::accepted));
}

#[test]
fn notify_test_sends_an_email() {
    let Some(smtp) = SmtpDouble::start() else {
        return;
    };
    let env = smtp_env();
    let out = env
        .cmd(["notify-test"])
        .env("HB_SMTP_URL", smtp.url("me", PASSWORD_IN_URL))
        .output();
    out.code(0);
    assert!(
        out.stdout.contains("sent to mail (email)"),
        "{}",
        out.stdout
    );
    let mails = smtp.received();
    assert_eq!(mails.len(), 1, "{mails:#?}");
    assert!(mails[0].header("Subject").starts_with("[heartbeat] "));
}

#[test]
fn a_server_that_never_answers_costs_the_channels_timeout_and_its_other_messages_wait() {
    // Connections are taken (the backlog) but nothing is ever said: no SMTP greeting.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let env = with_channel(
        Env::new(
            "## Recurring\n- [ ] @shell {\"cmd\": \"echo broken >&2; exit 3\"}\n- [ ] Stretch\n",
        ),
        "smtp_url_env = \"HB_SMTP_URL\"\ntimeout = \"1s\"",
    );
    // Both kinds: two messages for the channel.
    let config = env.read("heartbeat.toml").replace(
        "events = [\"failure\"]",
        "events = [\"failure\", \"reminder\"]",
    );
    env.write("heartbeat.toml", config);
    env.cmd(["run", "--once"])
        .now(NOW)
        .env(
            "HB_SMTP_URL",
            format!("smtp://me:{PASSWORD_IN_URL}@127.0.0.1:{port}"),
        )
        .output()
        .code(1);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["error"], "no answer within 1s");
    assert_eq!(failed[0]["queued"], true);
    assert_eq!(queued(&env).len(), 2);
    drop(silent);
}

/// Every byte heartbeat stored: the database and its write-ahead log.
fn stored(env: &Env) -> String {
    let mut bytes = Vec::new();
    for name in ["heartbeat.db", "heartbeat.db-wal"] {
        if let Ok(b) = std::fs::read(env.state().join(name)) {
            bytes.extend(b);
        }
    }
    assert!(!bytes.is_empty(), "no database");
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn the_smtp_password_reaches_no_sink() {
    let Some(smtp) = SmtpDouble::start() else {
        return;
    };
    let env = smtp_env();
    // A failed send (its error in the audit log and the outbox), a sent one, a test, and a
    // URL that cannot be used (its error naming the variable).
    smtp.answer("451 4.7.0 not now, me");
    let mut outputs = vec![run(&env, &smtp, NOW), run(&env, &smtp, LATER)];
    outputs.push(
        env.cmd(["notify-test"])
            .env("HB_SMTP_URL", smtp.url("me", PASSWORD_IN_URL))
            .output(),
    );
    outputs.push(
        env.cmd(["notify-test"])
            .env(
                "HB_SMTP_URL",
                format!("http://me:{PASSWORD_IN_URL}@127.0.0.1:1"),
            )
            .output(),
    );
    outputs.push(
        env.cmd(["status", "--json"])
            .env("HB_SMTP_URL", smtp.url("me", PASSWORD_IN_URL))
            .output(),
    );
    // The password did reach the server: the test is not vacuous.
    assert!(
        smtp.received()
            .iter()
            .any(|m| m.login.as_ref().is_some_and(|(_, p)| p == PASSWORD))
    );
    assert!(
        env.audit_text()
            .contains("not an smtps:// (TLS) or smtp://"),
        "{}",
        env.audit_text()
    );
    let sinks = [("audit log", env.audit_text()), ("database", stored(&env))]
        .into_iter()
        .chain(outputs.iter().flat_map(|o| {
            [
                (&*o.command, o.stdout.clone()),
                (&*o.command, o.stderr.clone()),
            ]
        }));
    let url = smtp.url("me", PASSWORD_IN_URL);
    for (sink, text) in sinks {
        for password in [PASSWORD, PASSWORD_IN_URL] {
            assert!(!text.contains(password), "a password in {sink}:\n{text}");
        }
        assert!(!text.contains(&url), "the URL in {sink}:\n{text}");
    }
}

/// A script standing in for sendmail at `env`'s `fake-sendmail`: it records its arguments
/// (one a line), its standard input and whether it sees Telegram's token variable, then
/// runs `then`.
fn fake_sendmail(env: &Env, then: &str) -> String {
    let path = env.path("fake-sendmail");
    let tmp = env.path("fake-sendmail.tmp");
    std::fs::write(
        &tmp,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{0}/sendmail.args'\n\
             cat >> '{0}/sendmail.stdin'\n\
             printf '%s\\n' \"${{HEARTBEAT_TELEGRAM_TOKEN-unset}}\" > '{0}/sendmail.env'\n{then}\n",
            env.root().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Renamed into place: never executed while open for writing.
    std::fs::rename(&tmp, &path).unwrap();
    path.display().to_string()
}

/// The e-mail channel through the script of [`fake_sendmail`], which then runs `then`.
fn sendmail_env(then: &str) -> Env {
    let env = checklist();
    let program = fake_sendmail(&env, then);
    with_channel(
        env,
        &format!("transport = \"sendmail\"\nsendmail = \"{program}\""),
    )
}

#[test]
fn sendmail_is_run_with_the_envelope_and_given_the_email() {
    let env = sendmail_env("exit 0");
    env.cmd(["run", "--once"])
        .now(NOW)
        .env("HEARTBEAT_TELEGRAM_TOKEN", "123456:not-for-sendmail")
        .output()
        .code(1);
    assert_eq!(env.read("sendmail.env"), "unset\n");
    let args = env.read("sendmail.args");
    assert_eq!(
        args,
        format!("-i\n-f\n{FROM}\n--\nme@example.com\nops@example.net\n")
    );
    let stdin = env.read("sendmail.stdin");
    for line in [
        format!("From: {FROM}\r\n"),
        "To: me@example.com, ops@example.net\r\n".to_string(),
        "Subject: [heartbeat] @shell failed".to_string(),
        "Message-ID: <hb_".to_string(),
        "Content-Type: text/plain; charset=utf-8\r\n".to_string(),
        "exit status 3".to_string(),
    ] {
        assert!(stdin.contains(&line), "{line:?} in\n{stdin}");
    }
    let sent = env.events("notification_sent");
    assert_eq!(sent.len(), 1, "{:#?}", env.audit());
    assert_eq!(sent[0]["channel"], "mail");
}

#[test]
fn a_sendmail_that_fails_leaves_the_message_queued_with_its_words() {
    let env = sendmail_env("echo 'sendmail: cannot reach the relay' >&2\nexit 75");
    env.run_once(NOW).code(1);
    let failed = env.events("notification_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["queued"], true);
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.ends_with("fake-sendmail: exit status 75: sendmail: cannot reach the relay"),
        "{error}"
    );
    assert_eq!(queued(&env).len(), 1);
    // The next run gives sendmail the same message again (its own waits behind it).
    env.run_once(LATER).code(1);
    let stdin = env.read("sendmail.stdin");
    let ids: Vec<&str> = stdin
        .lines()
        .filter(|l| l.starts_with("Message-ID: "))
        .collect();
    assert_eq!(ids.len(), 2, "{stdin}");
    assert_eq!(ids[0], ids[1]);
}

#[test]
fn an_email_channel_without_recipients_or_with_the_other_transports_key_is_refused_at_load() {
    for (keys, expected) in [
        (
            "smtp_url_env = \"HB_SMTP_URL\"\nfrom = \"a@example.org\"",
            ":2:1: channels.mail.to: missing key \"to\": the list of addresses to write to",
        ),
        (
            "smtp_url_env = \"HB_SMTP_URL\"\nfrom = \"a@example.org\"\nto = []",
            "channels.mail.to: names nobody: add an address",
        ),
        (
            "transport = \"sendmail\"\nsmtp_url_env = \"HB_SMTP_URL\"\nfrom = \"a@example.org\"\n\
             to = [\"me@example.com\"]",
            "channels.mail.smtp_url_env: transport = \"sendmail\" takes no SMTP URL",
        ),
        (
            "smtp_url_env = \"HB_SMTP_URL\"\nfrom = \"a@example.org\"\nto = [\"me at example.com\"]",
            "channels.mail.to: [\"me at example.com\"]: \"me at example.com\" is not an e-mail address",
        ),
    ] {
        let env = Env::new("## Recurring\n- [ ] Stretch\n").config(&format!(
            "timezone = \"UTC\"\n[channels.mail]\nkind = \"email\"\n{keys}\n"
        ));
        let out = env.cmd(["check"]).output();
        out.code(2);
        assert!(
            out.stderr.contains("heartbeat.toml:") && out.stderr.contains(expected),
            "{expected:?} in\n{}",
            out.stderr
        );
    }
}
