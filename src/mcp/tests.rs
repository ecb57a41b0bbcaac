//! Drives `examples/mcp_test_server.rs` through the blocking API.
//!
//! Invariants: every test stops (or drops) the servers it starts and checks through `/proc`
//! that nothing of their process group is left; no timing is asserted tighter than several
//! times what is expected, since the tests share a loaded machine.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::*;
use crate::sys::live_member_in_group as live_member;

/// `<target>/debug/examples/mcp_test_server`, built by `cargo test` (not by `cargo test
/// --lib`: then build it with `cargo build --example mcp_test_server`).
fn server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // <target>/debug/deps/heartbeat-… → <target>/debug/examples/mcp_test_server
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the target directory")
        .join("examples/mcp_test_server");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --example mcp_test_server` (plain `cargo test` builds it)",
        bin.display()
    );
    bin
}

fn spec(args: &[&str]) -> ServerSpec {
    let mut command = vec![server_bin().to_string_lossy().into_owned()];
    command.extend(args.iter().map(|a| a.to_string()));
    ServerSpec {
        name: "test".into(),
        transport: Transport::Stdio { command },
        env: Vec::new(),
        cwd: std::env::temp_dir(),
        startup_timeout: Duration::from_secs(30),
    }
}

fn input(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("inputs are objects"),
    }
}

const CALL: Duration = Duration::from_secs(30);

/// Nothing of the group led by `pid` is alive (zombies aside: the leader is reaped by then).
fn assert_group_gone(pid: u32) {
    assert_eq!(
        live_member(pid as i32),
        Some(false),
        "a process of group {pid} is still alive"
    );
}

#[test]
fn lists_every_page_and_calls_each_tool() {
    let mut server = Server::start(&spec(&["--many", "25"])).expect("starts");
    let pid = server.pid().expect("a spawned server");
    assert!(server.is_usable());

    let tools = server.list_tools().expect("lists");
    assert_eq!(tools.len(), 14 + 25, "all pages (of 10) are followed");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"extra_0") && names.contains(&"extra_24"));
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert!(echo.read_only);
    assert_eq!(echo.description.as_deref(), Some("Returns its text."));
    assert_eq!(echo.input_schema["required"], json!(["text"]));
    assert!(!tools.iter().find(|t| t.name == "sleep").unwrap().read_only);

    let out = server
        .call("echo", &input(json!({"text": "hi"})), CALL)
        .unwrap();
    assert_eq!(out.text, "hi");
    assert!(!out.is_error);
    assert_eq!((out.binary_items, out.structured.clone()), (0, None));

    let out = server.call("fail", &Map::new(), CALL).unwrap();
    assert!(out.is_error);
    assert_eq!(out.text, "failed on purpose");

    let out = server.call("structured", &Map::new(), CALL).unwrap();
    assert!(!out.is_error);
    assert_eq!(out.cost_usd, Some(0.25));
    assert_eq!(out.summary.as_deref(), Some("3 open issues"));
    assert_eq!(out.structured.as_ref().unwrap()["issues"], json!([1, 2, 3]));

    let out = server.call("image", &Map::new(), CALL).unwrap();
    assert_eq!(out.binary_items, 1);
    assert_eq!(out.text, "one image");

    let out = server.call("extra_7", &Map::new(), CALL).unwrap();
    assert_eq!(out.text, "extra_7");

    // A JSON-RPC error is a refusal, and the server stays usable.
    let err = server.call("nope", &Map::new(), CALL).unwrap_err();
    assert!(
        matches!(&err, McpError::Rejected(m) if m.contains("unknown tool nope")),
        "{err}"
    );
    assert!(server.is_usable());

    server.stop();
    assert_group_gone(pid);
}

#[test]
fn stderr_is_captured() {
    let mut server = Server::start(&spec(&[])).unwrap();
    let out = server
        .call("stderr", &input(json!({"text": "a diagnostic line"})), CALL)
        .unwrap();
    assert_eq!(out.text, "written");
    // The reader thread runs on its own: give it time.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.stderr().contains("a diagnostic line") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server.stderr().contains("a diagnostic line"));
    let all = server.stop();
    assert!(all.contains("a diagnostic line"), "{all}");
}

#[test]
fn timeout_cancels_and_stop_kills_the_whole_group() {
    let mut server = Server::start(&spec(&[])).unwrap();
    let pid = server.pid().expect("a spawned server");
    let err = server
        .call(
            "sleep",
            &input(json!({"secs": 300, "child": true})),
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert!(
        matches!(err, McpError::Timeout(d) if d == Duration::from_secs(1)),
        "{err}"
    );
    assert_eq!(err.to_string(), "timed out after 1s");
    assert!(!server.is_usable());
    // The `sleep` child is still in the group: the cancellation does not end it.
    assert_eq!(live_member(pid as i32), Some(true));

    // Closing stdin, then SIGTERM after 2 s (how long that takes is no test's business on a
    // loaded machine): the group is gone once `stop` returns.
    let stderr = server.stop();
    assert_group_gone(pid);
    assert!(
        stderr.contains("sleep cancelled by the client"),
        "notifications/cancelled reached the server: {stderr}"
    );
}

#[test]
fn a_server_that_exits_at_start_is_a_start_error() {
    let err = Server::start(&spec(&["--exit-at-start"])).unwrap_err();
    let McpError::Start(message) = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("exit status 1"), "{message}");
    assert!(message.contains("exiting at start on purpose"), "{message}");

    let mut missing = spec(&[]);
    missing.transport = Transport::Stdio {
        command: vec!["/nonexistent/mcp-server".into()],
    };
    let err = Server::start(&missing).unwrap_err();
    assert!(
        matches!(&err, McpError::Start(m) if m.contains("cannot run")),
        "{err}"
    );

    let mut empty = spec(&[]);
    empty.transport = Transport::Stdio { command: vec![] };
    assert!(matches!(Server::start(&empty), Err(McpError::Start(_))));
}

#[test]
fn a_silent_server_is_a_start_error_within_its_timeout() {
    let mut silent = spec(&[]);
    silent.transport = Transport::Stdio {
        command: vec!["sleep".into(), "300".into()],
    };
    silent.startup_timeout = Duration::from_secs(1);
    let err = Server::start(&silent).unwrap_err();
    assert!(
        matches!(&err, McpError::Start(m) if m.contains("within 1s")),
        "{err}"
    );
}

#[test]
fn sampling_roots_and_elicitation_are_refused() {
    let mut server = Server::start(&spec(&[])).unwrap();
    for (tool, method) in [
        ("sampling", "sampling/createMessage"),
        ("roots", "roots/list"),
        ("elicit", "elicitation/create"),
    ] {
        let out = server.call(tool, &Map::new(), CALL).unwrap();
        assert!(out.text.starts_with(&refused_prefix(tool)), "{}", out.text);
        assert!(out.text.contains("heartbeat refuses"), "{}", out.text);
        assert_eq!(server.refused().last().map(String::as_str), Some(method));
    }
    assert_eq!(server.refused().len(), 3);
    server.stop();
}

fn refused_prefix(tool: &str) -> String {
    match tool {
        "elicit" => "elicitation refused".into(),
        other => format!("{other} refused"),
    }
}

#[test]
fn the_environment_holds_only_what_is_passed() {
    let mut with_secret = spec(&[]);
    with_secret.env = vec![("HB_MCP_TEST_SECRET".into(), "s3cret".into())];
    let mut server = Server::start(&with_secret).unwrap();
    let out = server.call("env", &Map::new(), CALL).unwrap();
    server.stop();
    let vars: Vec<(&str, &str)> = out
        .text
        .lines()
        .map(|l| l.split_once('=').expect("NAME=value"))
        .collect();
    for (name, _) in &vars {
        assert!(
            PASSED_ENV.contains(name) || *name == "HB_MCP_TEST_SECRET",
            "{name} leaked into the server's environment"
        );
    }
    assert!(vars.contains(&("HB_MCP_TEST_SECRET", "s3cret")));
    if let Ok(path) = std::env::var("PATH") {
        assert!(vars.contains(&("PATH", path.as_str())));
    }
}

#[test]
fn a_server_that_dies_mid_call_is_died() {
    let mut server = Server::start(&spec(&[])).unwrap();
    let pid = server.pid().expect("a spawned server");
    let err = server.call("crash", &Map::new(), CALL).unwrap_err();
    assert!(
        matches!(&err, McpError::Died(m) if m.contains("exit status 3")),
        "{err}"
    );
    assert!(!server.is_usable());
    // Later calls fail the same way rather than hang.
    assert!(matches!(
        server.call("echo", &input(json!({"text": "x"})), CALL),
        Err(McpError::Died(_))
    ));
    let stderr = server.stop();
    assert!(stderr.contains("crashing on purpose"), "{stderr}");
    assert_group_gone(pid);
}

#[test]
fn drop_leaves_nothing_behind() {
    let server = Server::start(&spec(&[])).unwrap();
    let pid = server.pid().expect("a spawned server");
    assert_eq!(live_member(pid as i32), Some(true));
    drop(server);
    assert_group_gone(pid);
}

#[test]
fn inputs_are_checked_against_the_listed_schema() {
    let mut server = Server::start(&spec(&[])).unwrap();
    let tools = server.list_tools().unwrap();
    server.stop();
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(
        validate_input(&echo.input_schema, &json!({"text": "ok"})),
        Ok(())
    );
    assert_eq!(
        validate_input(&echo.input_schema, &json!({"text": 5})),
        Err(r#"/text: 5 is not of type "string""#.to_string())
    );
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(crate::text::did_you_mean("ecno", &names), Some("echo"));
}

#[test]
fn an_http_server_that_cannot_be_reached_does_not_start() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let mut http = spec(&[]);
    http.transport = Transport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers: vec![("Authorization".into(), "Bearer s3cret-value".into())],
    };
    match Server::start(&http) {
        Err(McpError::Start(message)) => {
            assert!(message.contains("handshake"), "{message}");
            assert!(!message.contains("s3cret"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
