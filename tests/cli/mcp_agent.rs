//! `heartbeat mcp` (SPEC §13) from an agent's side: its powers are bounded and a person
//! hears of what it does (pause, resume, deny), and the protocol's faults (a repeated request
//! id, an oversized request, undeclared arguments, odd client names, a client that leaves)
//! are answered, never run or dropped.
//!
//! The client here writes raw JSON-RPC lines (a fault is often one a friendly client would
//! not make) and reads every answer with a deadline.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::*;

/// A `heartbeat mcp` process and the lines it wrote.
struct Agent {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
}

impl Agent {
    /// Started, not initialized.
    fn start(env: &Env) -> Agent {
        Agent::start_cmd(env.cmd(["mcp"]))
    }

    fn start_cmd(cmd: Cmd) -> Agent {
        let mut child = cmd.spawn_piped();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Agent {
            child: Some(child),
            stdin,
            lines,
            next_id: 1,
        }
    }

    /// Started and initialized as the client named `name`.
    fn connect(env: &Env, name: &str) -> Agent {
        let mut agent = Agent::start(env);
        agent.initialize(name);
        agent
    }

    fn initialize(&mut self, name: &str) {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": name, "version": "1.0"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "heartbeat", "{init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, msg: &Value) {
        self.send_raw(format!("{msg}\n").as_bytes());
    }

    /// The next message the server wrote.
    #[track_caller]
    fn read(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no answer from heartbeat mcp: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
    }

    /// The answer to request `id` (other messages are skipped).
    #[track_caller]
    fn answer_to(&mut self, id: &Value) -> Value {
        loop {
            let msg = self.read();
            if &msg["id"] == id {
                return msg;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer_to(&json!(id))
    }

    /// A tool call: Ok(JSON result), or Err(the JSON-RPC error or the tool error's text).
    fn call(&mut self, name: &str, args: Value) -> Result<Value, String> {
        let r = self.request("tools/call", json!({"name": name, "arguments": args}));
        if let Some(message) = r["error"]["message"].as_str() {
            return Err(message.to_string());
        }
        let result = &r["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        if result["isError"] == true {
            Err(text.to_string())
        } else {
            Ok(serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {r}")))
        }
    }

    /// Close stdin (the client leaves) and wait for the server to end.
    fn leave(mut self) -> Output {
        drop(self.stdin.take());
        wait_output(self.child.take().unwrap(), "heartbeat mcp", WAIT)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Protocol faults

#[test]
fn a_repeated_request_id_is_answered_with_an_error_and_never_carried_out() {
    let env = Env::new("## Recurring\n");
    let mut agent = Agent::connect(&env, "tester");
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
    assert_eq!(env.events("paused").len(), 2, "{:#?}", env.audit());
    // The session goes on.
    assert!(agent.call("status", json!({})).is_ok());
}

#[test]
fn an_oversized_request_is_answered_with_its_size_and_the_session_goes_on() {
    let env = Env::new("## Recurring\n");
    let mut agent = Agent::connect(&env, "tester");
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
    let out = Agent::start(&env).leave();
    out.code(0);
    // After a line that is not a message.
    let mut agent = Agent::start(&env);
    agent.send_raw(b"not json\n");
    agent.leave().code(0);
    // After a session.
    let mut agent = Agent::connect(&env, "tester");
    agent.call("status", json!({})).unwrap();
    agent.leave().code(0);
}

#[test]
fn an_undeclared_argument_is_refused_naming_the_key() {
    let env = Env::new("## Recurring\n");
    let mut agent = Agent::connect(&env, "tester");
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
        let mut agent = Agent::connect(&env, &long);
        let paused = agent.call("pause", json!({"for": "1h"})).unwrap();
        assert_eq!(paused["by"], expected.as_str());
        agent.call("resume", json!({})).unwrap();
    }
    assert_eq!(env.events("paused").len(), 2);
    for e in env.events("paused") {
        assert_eq!(e["by"], expected.as_str(), "the same name, the same way");
    }
    let mut nameless = Agent::connect(&env, "  ");
    let paused = nameless.call("pause", json!({"for": "1h"})).unwrap();
    assert_eq!(paused["by"], "mcp:unknown");
}
