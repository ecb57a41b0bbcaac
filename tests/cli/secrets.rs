//! Secrets (docs/reference.md#redaction, issue 14 §3): the Telegram token and secret-looking values
//! reach no sink — audit log, stdout, stderr, SQLite, Telegram — whichever command read the token,
//! and a tool cannot read the token from heartbeat's environment.

use std::time::Duration;

use crate::common::*;
use crate::tg_double::{Call, TgDouble};

/// Chats the double is told about.
const CHAT: i64 = 4242;

/// A sandbox whose config points at a fresh double, with `tools` before `[telegram]`.
fn setup(md: &str, tools: &str) -> (TgDouble, Env) {
    let tg = TgDouble::start();
    tg.expect_token(TG_TOKEN);
    let env = Env::new(md).config(&format!(
        "timezone = \"UTC\"\n{tools}\n{}",
        tg_toml(&tg.url(), &[CHAT], "summary = \"always\"")
    ));
    (tg, env)
}

/// `run --once` with the token and `vars` in its environment.
fn run_once(env: &Env, vars: &[(&str, &str)]) -> Output {
    let mut cmd = env.cmd(["run", "--once"]).token();
    for (key, value) in vars {
        cmd = cmd.env(key, value);
    }
    cmd.output()
}

/// The run's message to Telegram, waited for.
#[track_caller]
fn wait_for_message(tg: &TgDouble) -> Vec<Call> {
    tg.wait_for_calls("sendMessage", 1, Duration::from_secs(10))
}

/// The error of the one `task_failed` there is.
#[track_caller]
fn the_failure(env: &Env) -> String {
    let failed = env.events_n("task_failed", 1);
    error_of(&failed[0]).to_string()
}

/// Every byte heartbeat stored: the database and its write-ahead log.
fn stored_bytes(env: &Env) -> Vec<u8> {
    let mut bytes = Vec::new();
    for name in ["heartbeat.db", "heartbeat.db-wal"] {
        if let Ok(b) = std::fs::read(env.state().join(name)) {
            bytes.extend(b);
        }
    }
    assert!(
        !bytes.is_empty(),
        "no database in {}",
        env.state().display()
    );
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// What the double received, bodies only (the URL holds the token by design).
fn bodies(tg: &TgDouble) -> String {
    tg.calls()
        .iter()
        .map(|c| c.body.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[track_caller]
fn assert_nowhere(what: &str, env: &Env, tg: &TgDouble, outputs: &[&Output]) {
    assert!(
        !env.audit_text().contains(what),
        "audit.jsonl: {}",
        env.audit_text()
    );
    for out in outputs {
        assert!(!out.stdout.contains(what), "stdout: {}", out.stdout);
        assert!(!out.stderr.contains(what), "stderr: {}", out.stderr);
    }
    assert!(
        !contains(&stored_bytes(env), what),
        "the SQLite files hold it"
    );
    let sent = bodies(tg);
    assert!(!sent.contains(what), "sent to Telegram: {sent}");
}

/// A tool that prints its argument on stdout and stderr and fails.
const ECHO_TOOL: &str = r#"[tools.echo]
command = ["sh", "-c", "echo \"out $1\"; echo \"err $1\" >&2; exit 1", "sh", "{v}"]
approval = "ask"
"#;

#[test]
fn approve_of_a_tool_printing_the_token_leaks_it_nowhere() {
    let md = format!("## Recurring\n- [ ] @echo {{\"v\": \"{TG_TOKEN}\"}}\n");
    let (tg, env) = setup(&md, ECHO_TOOL);
    let queued = run_once(&env, &[]);
    queued.code(0);
    assert_eq!(
        env.events("approval_requested").len(),
        1,
        "{:#?}",
        env.audit()
    );
    let listed = env.cmd(["approvals", "--json"]).token().output();
    assert!(listed.stdout.contains("***"), "{}", listed.stdout);
    let approved = env.cmd(["approve", "1"]).token().user("tester").output();
    approved.code(1);
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["output"], "out ***\n", "{}", failed[0]);
    // The approved tool got the real input (re-read from the file).
    let next = env
        .cmd(["run", "--once"])
        .token()
        .now("2026-05-01T11:00:00Z")
        .output();
    assert_nowhere(TG_TOKEN, &env, &tg, &[&queued, &listed, &approved, &next]);
    // Not even a large piece of it.
    assert_nowhere(
        &TG_TOKEN[..20],
        &env,
        &tg,
        &[&queued, &listed, &approved, &next],
    );
}

#[test]
fn the_token_in_a_tool_output_reaches_no_summary_outbox_or_stdout() {
    let md = "## Recurring\n- [ ] @leak {}\n- [ ] @cut {}\n";
    let tools = format!(
        r#"[tools.leak]
command = ["sh", "-c", "echo 'got {TG_TOKEN}'; echo 'see https://x.example/a?sig=abc123&page=2' >&2; exit 1"]
approval = "auto"

[tools.cut]
command = ["sh", "-c", "printf '%4090s' '' | tr ' ' x; echo '{TG_TOKEN}'"]
approval = "auto"
"#
    );
    let (tg, env) = setup(md, &tools);
    let out = run_once(&env, &[]);
    out.code(1);
    let sent = wait_for_message(&tg);
    assert!(!sent.is_empty());
    assert_nowhere(TG_TOKEN, &env, &tg, &[&out]);
    // Redacted before the 4 KiB cut: no head of the token survives it.
    let cut = env.events("task_succeeded");
    assert_eq!(cut.len(), 1, "{:#?}", env.audit());
    let output = cut[0]["output"].as_str().unwrap();
    assert!(output.ends_with("x***\n"), "{output}");
    assert!(!env.audit_text().contains(&TG_TOKEN[..6]));
    // A secret URL parameter in an error is hidden too.
    let failed = &env.events("task_failed")[0];
    assert!(
        failed["error"].as_str().unwrap().contains("sig=***&page=2"),
        "{failed}"
    );
    assert_nowhere("abc123", &env, &tg, &[&out]);
}

#[test]
fn an_mcp_servers_variables_reach_no_sink() {
    let secret = "mcp-secret-value-8c1f2e";
    let md = "## Recurring\n- [ ] @srv.env {}\n- [ ] @srv.fail {}\n";
    let (tg, env) = setup(md, &srv_toml(&["SRV_TOKEN"]));
    let out = run_once(&env, &[("SRV_TOKEN", secret)]);
    out.code(1);
    wait_for_message(&tg);
    // The server had it (it lists its environment); every sink shows stars.
    let listed = env.events("task_succeeded")[0]["output"].to_string();
    assert!(listed.contains("SRV_TOKEN=***"), "{listed}");
    assert_nowhere(secret, &env, &tg, &[&out]);
}

#[test]
fn an_mcp_servers_header_values_reach_no_sink() {
    use crate::mcp_http::{AUTH, McpHttpDouble, web_toml};
    let double = McpHttpDouble::start(AUTH);
    // `echo` answers with the Authorization header it received.
    let md = "## Recurring\n- [ ] @web.echo {\"text\": \"hi\"}\n- [ ] @web.fail {}\n";
    let (tg, env) = setup(md, &web_toml(&double.url()));
    let out = run_once(&env, &[("WEB_MCP_AUTH", AUTH)]);
    out.code(1);
    wait_for_message(&tg);
    let echoed = env.events("task_succeeded")[0]["output"].to_string();
    assert!(echoed.contains("sent with ***"), "{echoed}");
    assert_nowhere(AUTH, &env, &tg, &[&out]);
    assert_nowhere("web-mcp-token", &env, &tg, &[&out]);
}

#[test]
fn a_password_in_a_urls_user_info_reaches_no_sink() {
    // In the input (one-time: its start record holds the input too) and in the output.
    let md = "## One-time\n\
              - [ ] @shell {\"cmd\": [\"echo\", \"clone https://me:pw-77c1e@git.example/x\"]}\n";
    let (tg, env) = setup(md, "[tools.shell]\napproval = \"auto\"\n");
    let out = run_once(&env, &[]);
    out.code(0);
    wait_for_message(&tg);
    let shown = env.events("task_succeeded")[0]["output"].to_string();
    assert!(shown.contains("https://me:***@git.example/x"), "{shown}");
    assert_nowhere("pw-77c1e", &env, &tg, &[&out]);
}

/// A secret in free text: an API's JSON answer with an access token, a command line with a
/// password, a bearer header. The approved tool still gets the real values from the file.
#[test]
fn secret_keys_in_outputs_and_command_lines_reach_no_sink() {
    use crate::test_server::{Reply, TestServer};

    let api = TestServer::start(|_| {
        Reply::json(
            200,
            &serde_json::json!({"access_token": "at-5e1f0c", "user": {"password": "pw-77d2"}}),
        )
    });
    let md = format!(
        "## Recurring\n\
         - [ ] @http {{\"url\": \"{}/login\"}}\n\
         - [ ] @shell {{\"cmd\": \"echo \\\"Authorization: Bearer sk-live-9c1d44aa\\\" >&2; \
         echo DB_PASSWORD=hunter-2e9 > got.txt\"}}\n",
        api.url()
    );
    let (tg, env) = setup(&md, "[tools.http]\napproval = \"auto\"\n");
    let run = run_once(&env, &[]);
    run.code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    let shown = ok[0]["output"].as_str().unwrap();
    assert!(shown.contains(r#""access_token":"***""#), "{shown}");
    let queued = env.events("approval_requested");
    assert_eq!(queued.len(), 1, "{:#?}", env.audit());
    assert!(
        queued[0]["input"]["cmd"]
            .as_str()
            .unwrap()
            .contains("DB_PASSWORD=*** > got.txt"),
        "{}",
        queued[0]
    );

    let listed = env.cmd(["approvals"]).token().output();
    let approved = env.cmd(["approve", "1"]).token().user("tester").output();
    approved.code(0);
    // The tool ran with the command as written in the file, not as shown.
    assert_eq!(env.read("got.txt"), "DB_PASSWORD=hunter-2e9\n");
    let stderr = env.events("task_succeeded")[1]["stderr"].to_string();
    assert!(stderr.contains("Bearer ***"), "{stderr}");
    wait_for_message(&tg);
    for secret in ["at-5e1f0c", "pw-77d2", "sk-live-9c1d44aa", "hunter-2e9"] {
        assert_nowhere(secret, &env, &tg, &[&run, &listed, &approved]);
    }
}

#[test]
fn a_secret_given_in_a_tasks_input_and_printed_back_by_its_tool_reaches_no_sink() {
    // The value sits under a secret key (hidden in the input everywhere); the tool then
    // prints it bare, in its output, its error and its summary line.
    let md = "## Recurring\n\
              - [ ] @shell {\"cmd\": \"echo using $API_TOKEN; echo bad $API_TOKEN >&2; exit 3\", \
              \"env\": {\"API_TOKEN\": \"tk-4f8a2c91\"}}\n\
              - [ ] @report {\"credentials\": {\"user\": \"me\", \"pin\": 73519}}\n";
    let tools = r#"[tools.shell]
approval = "auto"
[tools.report]
command = ["sh", "-c", '''printenv HEARTBEAT_INPUT | tr -d '"'; printf '\173"summary": "pin 73519 ok"\175\n' ''']
approval = "auto"
"#;
    let (tg, env) = setup(md, tools);
    let run = run_once(&env, &[]);
    run.code(1);
    let failed = env.events("task_failed");
    assert_eq!(failed.len(), 1, "{:#?}", env.audit());
    assert_eq!(failed[0]["output"], "using ***\n", "{}", failed[0]);
    assert_eq!(failed[0]["stderr"], "bad ***\n", "{}", failed[0]);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert!(
        ok[0]["output"].as_str().unwrap().contains("pin:***"),
        "{}",
        ok[0]
    );
    assert_eq!(ok[0]["summary"], "pin *** ok", "{}", ok[0]);
    wait_for_message(&tg);
    for secret in ["tk-4f8a2c91", "73519"] {
        assert_nowhere(secret, &env, &tg, &[&run]);
    }
}

#[test]
fn an_invalid_task_is_shown_in_messages_by_place_and_error_only() {
    let md = "## Recurring\n\
              - [ ] @http {\"url\": \"https://x.example\", \"headers\": {\"Authorization\": \"Bearer sekrit-42\"},}\n";
    let (tg, env) = setup(md, "");
    let out = run_once(&env, &[]);
    out.code(1);
    assert_eq!(env.events("task_invalid").len(), 1, "{:#?}", env.audit());
    let sent = wait_for_message(&tg);
    let text = sent[0].body["text"].as_str().unwrap();
    assert!(text.contains("HEARTBEAT.md:2"), "{text}");
    assert!(!text.contains("sekrit-42"), "{text}");
    assert!(!text.contains("Authorization"), "{text}");
}

#[test]
fn a_tool_cannot_read_the_token_from_heartbeats_environment() {
    // Whoever the tool runs as (root reads any process), the original environment block
    // no longer holds the value.
    let md = "## Recurring\n- [ ] @peek {}\n";
    let tools = r#"[tools.peek]
command = ["sh", "-c", "cat /proc/$PPID/environ > environ.txt 2>&1; env > env.txt"]
approval = "auto"
"#;
    let (_tg, env) = setup(md, tools);
    run_once(&env, &[]).code(0);
    let environ = env.read_bytes("environ.txt");
    assert!(!environ.is_empty());
    assert!(
        !contains(&environ, TG_TOKEN),
        "{}",
        String::from_utf8_lossy(&environ)
    );
    assert!(!env.read("env.txt").contains(TG_TOKEN));
}

/// Warnings on stderr pass through redaction too: a Bot API that cannot be reached gives an
/// error that may quote the request URL, which holds the token.
#[test]
fn a_telegram_error_on_stderr_never_shows_the_token() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"x\"}\n").config(&format!(
        "timezone = \"UTC\"\n{}",
        tg_toml(&url, &[CHAT], "summary = \"always\"")
    ));
    for args in [vec!["run", "--once", "-v"], vec!["notify-test"]] {
        let out = env.cmd(args.clone()).token().output();
        out.no_panic();
        assert!(!out.stderr.contains(TG_TOKEN), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.contains(TG_TOKEN), "{args:?}: {}", out.stdout);
    }
    assert!(!env.audit_text().contains(TG_TOKEN));
}

#[test]
fn a_hidden_value_cut_off_by_a_table_column_keeps_the_rest_of_the_output() {
    // `check` cuts a long task text to its column, after the hidden header value: the
    // redaction of standard output must not read the unclosed quote to the end of the text.
    let md = "## Recurring\n\
              - [ ] @http {\"url\": \"https://x.example/a/long/path\", \"headers\": {\"Authorization\": \"Bearer sk-live-0c4a7d1e\"}}\n\
              - [ ] @log {\"text\": \"second\"}\n";
    let env = Env::new(md);
    let out = env.cmd(["check"]).output();
    out.code(0);
    let stdout = &out.stdout;
    assert!(stdout.contains("\"Authorization\": \"***"), "{stdout}");
    assert!(stdout.contains("@log {\"text\": \"second\"}"), "{stdout}");
    assert!(stdout.contains("2 task(s), 0 error(s)"), "{stdout}");
    assert!(!stdout.contains("sk-live-0c4a7d1e"), "{stdout}");
}

/// `[mcp.srv]`: the test MCP server, with `env` passed through.
fn srv_toml(env: &[&str]) -> String {
    format!(
        "[mcp.srv]\ncommand = [\"{}\"]\nenv = {env:?}\napproval = \"auto\"\n",
        crate::mcp_tools::server_bin().display()
    )
}

#[test]
fn an_mcp_tools_error_text_is_redacted_before_it_is_cut() {
    // The server's isError text holds its secret from character 185 on: cut at 200 first,
    // the secret would lose only its tail and show the rest.
    let secret = "mcp-secret-value-8c1f2e";
    let md = format!(
        "## Recurring\n- [ ] @srv.fail {{\"text\": \"{}\", \"var\": \"SRV_TOKEN\"}}\n",
        "-".repeat(185)
    );
    let (tg, env) = setup(&md, &srv_toml(&["SRV_TOKEN"]));
    let out = run_once(&env, &[("SRV_TOKEN", secret)]);
    out.code(1);
    wait_for_message(&tg);
    let error = the_failure(&env);
    assert!(error.ends_with("-***"), "{error}");
    assert_nowhere("mcp-secret", &env, &tg, &[&out]);
}

#[test]
fn an_http_error_page_is_redacted_before_it_is_cut() {
    use crate::mcp_http::{AUTH, McpHttpDouble, web_toml};
    // The page quotes the bare credential from character 181 on; the message keeps 200.
    let double = McpHttpDouble::start(AUTH);
    let (tg, env) = setup(
        "## Recurring\n- [ ] @web.refuse {}\n",
        &web_toml(&double.url()),
    );
    let out = run_once(&env, &[("WEB_MCP_AUTH", AUTH)]);
    out.code(1);
    wait_for_message(&tg);
    let error = the_failure(&env);
    assert!(
        error.contains("403") && error.contains("you sent ***"),
        "{error}"
    );
    assert_nowhere("web-mcp-token", &env, &tg, &[&out]);
}

#[test]
fn the_telegram_task_line_is_redacted_before_it_is_cut() {
    // The task's text holds the token from character 68 of the line Telegram shows (80).
    let md = format!(
        "## Recurring\n- [ ] @shell {{\"cmd\": [\"echo\", \"{}{TG_TOKEN}\"]}}\n",
        "-".repeat(50)
    );
    let (tg, env) = setup(&md, "[tools.shell]\napproval = \"auto\"\n");
    let out = run_once(&env, &[]);
    out.code(0);
    wait_for_message(&tg);
    let sent = bodies(&tg);
    assert!(sent.contains("<b>@shell</b>"), "{sent}");
    assert_nowhere(&TG_TOKEN[..10], &env, &tg, &[&out]);
}

#[test]
fn a_credential_and_its_encodings_reach_no_sink() {
    // The server's variable is a whole header value; a tool prints the credential alone,
    // base64-encoded and hex-encoded.
    let credential = "srv-cred-7a1b2c3d4e";
    let header = format!("Bearer {credential}");
    let md = r#"## Recurring
- [ ] @shell {"cmd": ["sh", "-c", "printf '%s\n' \"$1\"; printf %s \"$1\" | base64; printf %s \"$1\" | od -An -tx1 | tr -d ' \n'", "sh", "srv-cred-7a1b2c3d4e"]}
"#;
    let tools = format!(
        "{}[tools.shell]\napproval = \"auto\"\n",
        srv_toml(&["SRV_AUTH"])
    );
    let (tg, env) = setup(md, &tools);
    let out = run_once(&env, &[("SRV_AUTH", &header)]);
    out.code(0);
    wait_for_message(&tg);
    let output = env.events("task_succeeded")[0]["output"].to_string();
    assert_eq!(output.matches("***").count(), 3, "{output}");
    assert_nowhere(credential, &env, &tg, &[&out]);
    assert_nowhere("c3J2LWNyZWQt", &env, &tg, &[&out]);
    assert_nowhere("7372762d63726564", &env, &tg, &[&out]);
}

/// `base64` and `fold` print a long value over several lines: the secret is found in the
/// block the lines make.
#[test]
fn a_secret_printed_over_several_lines_reaches_no_sink() {
    let secret = "srv-secret-value-99xyz-abcdef";
    let md = format!(
        "## Recurring\n- [ ] @shell {{\"cmd\": [\"sh\", \"-c\", \"printf %s user:$0 | base64 -w 16; echo; printf %s $0 | fold -w 10\", \"{secret}\"]}}\n"
    );
    let tools = format!(
        "{}[tools.shell]\napproval = \"auto\"\n",
        srv_toml(&["SRV_TOKEN"])
    );
    let (tg, env) = setup(&md, &tools);
    let out = run_once(&env, &[("SRV_TOKEN", secret)]);
    out.code(0);
    wait_for_message(&tg);
    assert_eq!(env.events("task_succeeded")[0]["output"], "***\n\n***");
    for piece in [
        "dXNlcjpzcnYtc2Vj",
        "cmV0LXZhbHVlLTk5",
        "srv-secret",
        "-value-99x",
    ] {
        assert_nowhere(piece, &env, &tg, &[&out]);
    }
}

#[test]
fn a_short_variable_is_not_replaced_inside_other_text_and_check_warns() {
    // DEBUG=1 would otherwise turn every 1 of every line into ***: ts, line numbers, counts.
    let md = "## Recurring\n- [ ] @log {\"text\": \"hello 1\"}\n";
    let env = Env::new(md).config(&format!("timezone = \"UTC\"\n{}", srv_toml(&["DEBUG"])));
    env.cmd(["run", "--once"])
        .env("DEBUG", "1")
        .output()
        .code(0);
    let lines = env.audit();
    assert!(lines.len() >= 3, "{}", env.audit_text());
    for line in &lines {
        assert!(line["ts"].as_str().unwrap().starts_with("20"), "{line}");
        assert!(!line["event"].as_str().unwrap().contains('*'), "{line}");
    }
    assert_eq!(env.events("task_succeeded")[0]["output"], "hello 1");
    let json = env.cmd(["check", "--json"]).env("DEBUG", "1").output();
    json.code(0);
    let problems = json.json()["problems"].to_string();
    assert!(
        problems.contains("$DEBUG is shorter than 6 characters"),
        "{problems}"
    );
    let text = env.cmd(["check"]).env("DEBUG", "1").output();
    text.code(0);
    assert!(
        text.stdout
            .contains("warning: the value of $DEBUG is shorter"),
        "{}",
        text.stdout
    );
    // It is still kept out of the tools' environment.
    let md = "## Recurring\n- [ ] @shell {\"cmd\": \"echo debug=${DEBUG-unset}\"}\n";
    let env = Env::new(md).config(&format!(
        "timezone = \"UTC\"\n{}[tools.shell]\napproval = \"auto\"\n",
        srv_toml(&["DEBUG"])
    ));
    env.cmd(["run", "--once"])
        .env("DEBUG", "1")
        .output()
        .code(0);
    assert_eq!(
        env.events("task_succeeded")[0]["output"],
        "debug=unset\n",
        "{}",
        env.audit_text()
    );
}

#[test]
fn heartbeat_mcp_answers_are_redacted() {
    use crate::mcp_server::Client;
    use serde_json::json;
    // The token written into a task; the server's variable in its tool listing.
    let described = "described-secret-4d5e6f";
    let md = format!(
        "## Recurring\n- [ ] @http {{\"url\": \"https://api.example/bot{TG_TOKEN}/getMe\"}}\n\
         - [ ] @srv.echo {{\"text\": \"x\"}}\n"
    );
    let tools = srv_toml(&["MCP_TEST_DESCRIPTION"]);
    let (tg, env) = setup(&md, &tools);
    // A run lists the server and caches its tools.
    let run = run_once(&env, &[("MCP_TEST_DESCRIPTION", described)]);
    assert_nowhere(described, &env, &tg, &[&run]);
    let mut client = Client::connect_with(
        env.cmd(["mcp"])
            .token()
            .env("MCP_TEST_DESCRIPTION", described),
    );
    let mut answers = Vec::new();
    for (tool, args) in [
        ("check", json!({})),
        ("status", json!({})),
        ("approvals", json!({"state": "all"})),
        ("log", json!({})),
    ] {
        let answer = client.call(tool, args).unwrap().to_string();
        assert!(answer.len() > 2, "{tool}: {answer}");
        answers.push(answer);
    }
    // An error that quotes what the agent sent.
    let error = client.call("log", json!({"since": TG_TOKEN})).unwrap_err();
    assert!(error.contains("***"), "{error}");
    answers.push(error);
    let check = &answers[0];
    assert!(check.contains("/bot***/getMe"), "{check}");
    for answer in &answers {
        assert!(!answer.contains(&TG_TOKEN[..10]), "{answer}");
        assert!(!answer.contains(described), "{answer}");
    }
}

/// A task whose input does not parse may hold a secret that redaction cannot find (a
/// single-quoted password): `heartbeat mcp` shows it by place and error only.
#[test]
fn an_invalid_tasks_source_is_not_shown_to_an_agent() {
    use crate::mcp_server::Client;
    use serde_json::json;
    let secret = "hunter2-unparsed-9f8e";
    let md = format!(
        "## Recurring\n- [ ] @shell {{'password': '{secret}'}}\n- [x] @shell {{'password': '{secret}'}}\n\n## Notes\n- [ ] @shell {{'password': '{secret}'}}\n"
    );
    let env = Env::new(&md);
    let mut client = Client::connect_with(env.cmd(["mcp"]));
    let check = client.call("check", json!({})).unwrap();
    let tasks = check["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{check}");
    assert_eq!(tasks[0]["decision"], "invalid");
    assert_eq!(tasks[0]["line"], 2);
    assert!(
        check["problems"]
            .to_string()
            .contains("key must be a string"),
        "{check}"
    );
    assert!(!check.to_string().contains(secret), "{check:#}");
}

/// `heartbeat mcp` started without the token's variable (the agent's client does not pass
/// it) cannot know the token's value: a Telegram bot token written into the file is still
/// hidden by its shape.
#[test]
fn a_bot_token_in_the_file_is_hidden_even_when_its_variable_is_not_set() {
    use crate::mcp_server::Client;
    use serde_json::json;
    let md = format!(
        "## Recurring\n- [ ] @http {{\"url\": \"https://api.telegram.org/bot{TG_TOKEN}/getMe\"}}\n\
         - [ ] check bot {TG_TOKEN}\n"
    );
    let env = Env::new(&md);
    let mut client = Client::connect_with(env.cmd(["mcp"]));
    let check = client.call("check", json!({})).unwrap().to_string();
    assert!(check.contains("/bot***/getMe"), "{check}");
    assert!(check.contains("check bot ***"), "{check}");
    assert!(!check.contains(&TG_TOKEN[11..]), "{check}");
    // Other `digits:text` stays as it is.
    let plain = env.cmd(["check", "--json"]).output().json().to_string();
    assert!(plain.contains("2026-05-01T10:00:00"), "{plain}");
}

/// Errors the protocol layer makes itself (an unknown method is quoted back as the error's
/// message) leave redacted like a tool's.
#[test]
fn a_protocol_error_quoting_the_request_is_redacted() {
    use crate::mcp_server::Client;
    use serde_json::json;
    let (tg, env) = setup("## Recurring\n", "");
    let mut client = Client::connect_with(env.cmd(["mcp"]).token());
    let answer = client.request(TG_TOKEN, json!({}));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert!(!message.contains(&TG_TOKEN[..10]), "{answer}");
    assert!(message.contains("***"), "{answer}");
    drop(tg);
}

#[test]
fn a_variable_every_server_gets_stays_with_the_tools_even_when_env_names_it() {
    // HOME is passed to every MCP server anyway; naming it in `env` does not make it a
    // secret: the tools keep it and its value is shown. A real secret beside it is still
    // kept from the tools and hidden.
    let secret = "mcp-secret-value-8c1f2e";
    let md = "## Recurring\n\
              - [ ] @shell {\"cmd\": \"echo home=$HOME srv=${SRV_TOKEN-unset}\"}\n\
              - [ ] @srv.env {}\n";
    let tools = format!(
        "{}[tools.shell]\napproval = \"auto\"\n",
        srv_toml(&["HOME", "SRV_TOKEN"])
    );
    let (tg, env) = setup(md, &tools);
    let home = env.path("home").display().to_string();
    let out = run_once(&env, &[("SRV_TOKEN", secret)]);
    out.code(0);
    wait_for_message(&tg);
    let ok = env.events_n("task_succeeded", 2);
    assert_eq!(ok[0]["output"], format!("home={home} srv=unset\n"));
    let listed = ok[1]["output"].as_str().unwrap();
    assert!(listed.contains(&format!("HOME={home}\n")), "{listed}");
    assert!(listed.contains("SRV_TOKEN=***"), "{listed}");
    assert_nowhere(secret, &env, &tg, &[&out]);
}

#[test]
fn a_denial_reason_is_stored_redacted() {
    let md = "## Recurring\n- [ ] @echo {\"v\": \"x\"}\n";
    let (tg, env) = setup(md, ECHO_TOOL);
    let queued = run_once(&env, &[]);
    queued.code(0);
    let reason = format!("the bot is {TG_TOKEN}");
    let denied = env
        .cmd(["deny", "1", "--reason", &reason])
        .token()
        .user("tester")
        .output();
    denied.code(0);
    assert_eq!(env.approval_state(1).as_deref(), Some("denied"));
    let listed = env
        .cmd(["approvals", "--state", "all", "--json"])
        .token()
        .output();
    assert!(
        listed.stdout.contains("the bot is ***"),
        "{}",
        listed.stdout
    );
    assert_nowhere(TG_TOKEN, &env, &tg, &[&queued, &denied, &listed]);
}

#[test]
fn an_argument_echoed_back_in_a_usage_error_is_redacted() {
    let env = Env::new("");
    let out = env.cmd(["deny", "password=hunter2-secret"]).output();
    out.code(2);
    assert!(out.stderr.contains("password=***"), "{}", out.stderr);
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

#[test]
fn a_pause_reason_is_stored_redacted() {
    let (tg, env) = setup("## Recurring\n- [ ] @log {\"text\": \"x\"}\n", "");
    let reason = format!("bot {TG_TOKEN} rotated");
    let paused = env
        .cmd(["pause", "--reason", &reason])
        .token()
        .user("tester")
        .output();
    paused.code(0);
    let status = env.cmd(["status", "--json"]).token().output();
    status.code(0);
    assert!(
        status.stdout.contains("bot *** rotated"),
        "{}",
        status.stdout
    );
    assert_nowhere(TG_TOKEN, &env, &tg, &[&paused, &status]);
}

#[test]
fn a_files_warning_on_stderr_is_redacted() {
    // A warning quotes the heading it is about, secret and all.
    let env = Env::new(
        "## Recuring password=hunter2secret\n- [ ] @log {\"text\": \"x\"}\n\n## Recurring\n",
    );
    for args in [&["run", "--once"][..], &["check"][..]] {
        let out = env.cmd(args.iter().copied()).output();
        // `run` says it on stderr, `check` in its report.
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains("Recuring password=***"), "{args:?}: {said}");
        assert!(!said.contains("hunter2"), "{args:?}: {said}");
    }
}

/// A token from `bot_token_file` rather than the shape of a bot token, so that only its
/// registration as a secret (not the bot-token pattern) can hide it.
const FILE_TOKEN: &str = "file-held-SECRET-token-0123456789abcdef";

/// `[telegram] bot_token_file = "bot.token"`: the file written with `mode`.
fn setup_file_token(md: &str, tools: &str, mode: u32) -> (TgDouble, Env) {
    use std::os::unix::fs::PermissionsExt;
    let tg = TgDouble::start();
    tg.expect_token(FILE_TOKEN);
    let env = Env::new(md).config(&format!(
        "timezone = \"UTC\"\n{tools}\n{}",
        tg_toml(
            &tg.url(),
            &[CHAT],
            "summary = \"always\"\nbot_token_file = \"bot.token\""
        )
    ));
    env.write("bot.token", format!("{FILE_TOKEN}\n"));
    std::fs::set_permissions(env.path("bot.token"), std::fs::Permissions::from_mode(mode)).unwrap();
    (tg, env)
}

/// The token read from `bot_token_file` (its line break trimmed) is what Telegram gets, and
/// it is a secret like the variable's: a tool that prints it leaks it to no sink.
#[test]
fn a_token_from_bot_token_file_is_used_and_reaches_no_sink() {
    let md = format!("## Recurring\n- [ ] @echo {{\"v\": \"{FILE_TOKEN}\"}}\n");
    let tool = ECHO_TOOL.replace("approval = \"ask\"", "approval = \"auto\"");
    let (tg, env) = setup_file_token(&md, &tool, 0o600);
    let out = env.cmd(["run", "--once"]).output();
    out.code(1);
    let sent = wait_for_message(&tg);
    assert_eq!(sent[0].token, FILE_TOKEN, "the file's token, trimmed");
    let failed = env.events("task_failed");
    assert_eq!(failed[0]["output"], "out ***\n", "{}", failed[0]);
    let listed = env.cmd(["log", "--json"]).output();
    assert_nowhere(FILE_TOKEN, &env, &tg, &[&out, &listed]);
    assert_nowhere(&FILE_TOKEN[..20], &env, &tg, &[&out, &listed]);
}

/// The file must be its owner's alone, hold a token, and be the only source named: else the
/// config is refused (exit 2) at `bot_token_file`'s place, saying what to do.
#[test]
fn bot_token_file_is_refused_when_others_may_read_it_empty_or_beside_bot_token_env() {
    use std::os::unix::fs::PermissionsExt;
    let (_tg, env) = setup_file_token("## Recurring\n", "", 0o640);
    let token = env.path("bot.token").display().to_string();
    let out = env.cmd(["check"]).output();
    out.code(2);
    for needle in [
        "heartbeat.toml:",
        "telegram.bot_token_file: \"bot.token\": ",
        &format!("{token} has mode 0640"),
        &format!("chmod 600 {token}"),
    ] {
        assert!(out.stderr.contains(needle), "{needle}: {}", out.stderr);
    }
    assert!(!out.stderr.contains(FILE_TOKEN), "{}", out.stderr);

    std::fs::set_permissions(
        env.path("bot.token"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    env.cmd(["check"]).output().code(0);

    env.write("bot.token", "\n");
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr.contains(&format!("{token} is empty")),
        "{}",
        out.stderr
    );

    std::fs::remove_file(env.path("bot.token")).unwrap();
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr.contains(&format!("cannot read {token}")),
        "{}",
        out.stderr
    );

    let toml = env.read("heartbeat.toml");
    let both = toml.replace("[telegram]\n", "[telegram]\nbot_token_env = \"HB_TOKEN\"\n");
    let env = env.config(&both);
    let out = env.cmd(["check"]).output();
    out.code(2);
    assert!(
        out.stderr
            .contains("telegram.bot_token_file: \"bot.token\": bot_token_env is set too"),
        "{}",
        out.stderr
    );
}
