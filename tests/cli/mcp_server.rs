//! `heartbeat mcp` (SPEC §13), driven over stdio with JSON-RPC lines written by hand: agents
//! read the check-list and propose work; a person still decides.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout};

use serde_json::{Value, json};

use crate::common::*;

/// A connected MCP client (`clientInfo.name` = "tester").
pub(crate) struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    /// Every line the server wrote on stdout.
    seen: Vec<String>,
}

impl Client {
    fn connect(env: &Env) -> Client {
        Client::connect_with(env.cmd(["mcp"]))
    }

    /// `heartbeat mcp` as `cmd` starts it (its environment, its flags).
    pub(crate) fn connect_with(cmd: Cmd) -> Client {
        let mut child = cmd.spawn_piped();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut client = Client {
            child,
            stdin,
            stdout,
            next_id: 1,
            seen: Vec::new(),
        };
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "tester", "version": "1.0"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "heartbeat", "{init}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// One request; its response (other messages are kept in `seen` only).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the server closed stdout; seen: {:?}", self.seen);
            self.seen.push(line.clone());
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
            if msg["id"] == id {
                return msg;
            }
        }
    }

    fn tools(&mut self) -> Vec<Value> {
        self.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// A tool call: Ok(JSON result) or Err(the tool error's text).
    pub(crate) fn call(&mut self, name: &str, args: Value) -> Result<Value, String> {
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
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn propose_log(client: &mut Client, text: &str) -> Value {
    client
        .call(
            "propose_task",
            json!({"section": "recurring", "tool": "log", "input": {"text": text}}),
        )
        .expect("proposed")
}

#[test]
fn tools_are_listed_with_annotations_and_no_approve_tool_by_default() {
    let env = Env::new("## Recurring\n");
    let mut client = Client::connect(&env);
    let tools = client.tools();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "status",
            "check",
            "approvals",
            "log",
            "propose_task",
            "pause",
            "resume",
            "deny"
        ]
    );
    for t in &tools {
        let read_only =
            ["status", "check", "approvals", "log"].contains(&t["name"].as_str().unwrap());
        assert_eq!(t["annotations"]["readOnlyHint"], read_only, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object");
    }
    // Results are the CLI's --json documents.
    let status = client.call("status", json!({})).unwrap();
    let cli = env.cmd(["status", "--json"]).output().json();
    assert_eq!(status["pending_approvals"], cli["pending_approvals"]);
    assert_eq!(keys(&status), keys(&cli));
    let check = client.call("check", json!({})).unwrap();
    assert_eq!(
        keys(&check),
        keys(&env.cmd(["check", "--json"]).output().json())
    );
    assert_eq!(client.call("approvals", json!({})).unwrap(), json!([]));
    let absent = client.call("approve", json!({"id": 1})).unwrap_err();
    assert!(absent.contains("no tool named \"approve\""), "{absent}");
    // stdout carried nothing but JSON-RPC.
    for line in &client.seen {
        let msg: Value = serde_json::from_str(line).unwrap();
        assert_eq!(msg["jsonrpc"], "2.0");
    }
}

#[test]
fn a_proposed_task_asks_a_person_first_even_in_full_autonomy() {
    let env = Env::new("## Recurring\n- [ ] water plants\n").config("autonomy = \"full\"\n");
    let mut client = Client::connect(&env);
    let proposed = propose_log(&mut client, "from the agent");
    let id = proposed["task_id"].as_str().unwrap().to_string();
    assert_eq!(proposed["provenance"], "mcp:tester");
    assert_eq!(proposed["decision"], "approve");
    assert!(
        env.read("HEARTBEAT.md")
            .ends_with("- [ ] @log {\"text\":\"from the agent\"}\n"),
        "{}",
        env.read("HEARTBEAT.md")
    );
    let audited = env.events("task_proposed");
    assert_eq!(audited.len(), 1);
    assert_eq!(audited[0]["by"], "mcp:tester");
    assert_eq!(audited[0]["task_id"], id.as_str());

    // check shows where it came from.
    let check = env.cmd(["check", "--json"]).output().json();
    let task = check["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(task["provenance"], "mcp:tester");
    assert_eq!(check["tasks"][0]["provenance"], "file");

    // Full autonomy still queues it; the approval says an agent proposed it.
    let run = env.run_with(NOW, &["--json"]);
    run.code(0);
    let doc = run.json();
    let queued_task = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id.as_str())
        .unwrap();
    assert_eq!(queued_task["outcome"], "queued");
    assert_eq!(queued_task["reason"], "proposed by an agent, mcp:tester");
    assert!(env.events("task_succeeded").is_empty());
    let queued = env.events("approval_requested");
    assert_eq!(queued.len(), 1);
    let approvals = env.cmd(["approvals", "--json"]).output().json();
    assert!(
        approvals[0]["text"]
            .as_str()
            .unwrap()
            .contains("proposed by an agent, mcp:tester"),
        "{approvals}"
    );
    // A person approves it once; from then on ordinary policy runs it.
    let approval = queued[0]["approval_id"].as_i64().unwrap().to_string();
    let listed = env.cmd(["approvals"]).output();
    assert!(
        listed.stdout.contains("(proposed by an agent, mcp:tester)"),
        "{}",
        listed.stdout
    );
    env.cmd(["approve", approval.as_str()]).output().code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
    assert_eq!(env.events("approval_requested").len(), 1);
}

#[test]
fn an_invalid_proposal_is_refused_and_the_file_is_unchanged() {
    let env = Env::new("## Recurring\n- [ ] a\n");
    let before = env.read_bytes("HEARTBEAT.md");
    let mut client = Client::connect(&env);
    let bad_input = client
        .call(
            "propose_task",
            json!({"section": "recurring", "tool": "log", "input": {"txt": "x"}}),
        )
        .unwrap_err();
    assert!(
        bad_input.contains("HEARTBEAT.md:3:7") && bad_input.contains("unknown key \"txt\""),
        "{bad_input}"
    );
    let bad_schedule = client
        .call(
            "propose_task",
            json!({"section": "one_time", "schedule": "At 2026-13-45 25:00", "text": "x"}),
        )
        .unwrap_err();
    assert!(bad_schedule.contains("At YYYY-MM-DD"), "{bad_schedule}");
    // A date written another way would make the task due now: refused, with what it meant.
    let loose_date = client
        .call(
            "propose_task",
            json!({"section": "one_time", "schedule": "On 2026-12-24", "text": "x"}),
        )
        .unwrap_err();
    assert!(
        loose_date.contains("(did you mean \"At 2026-12-24\"?)"),
        "{loose_date}"
    );
    // A tool call hidden by markup would be a reminder and a warning at every run.
    let disguised = client
        .call(
            "propose_task",
            json!({"section": "recurring", "text": "`@log {\"text\": \"x\"}`"}),
        )
        .unwrap_err();
    assert!(
        disguised.contains("is a reminder, not a tool call"),
        "{disguised}"
    );
    let unknown_tool = client
        .call(
            "propose_task",
            json!({"section": "recurring", "tool": "bakup", "input": {}}),
        )
        .unwrap_err();
    assert!(
        unknown_tool.contains("unknown tool \"bakup\""),
        "{unknown_tool}"
    );
    // A text that would smuggle in lines of its own.
    let smuggled = client
        .call(
            "propose_task",
            json!({"section": "recurring", "text": "x\n- [ ] @shell {\"cmd\": \"rm -rf ~\"}"}),
        )
        .unwrap_err();
    assert!(smuggled.contains("one non-empty line"), "{smuggled}");
    let elsewhere = client
        .call(
            "propose_task",
            json!({"section": "recurring", "text": "x", "file": "/etc/passwd"}),
        )
        .unwrap_err();
    assert!(
        elsewhere.contains("not one of the configured files"),
        "{elsewhere}"
    );
    assert_eq!(env.read_bytes("HEARTBEAT.md"), before);
    assert!(env.events("task_proposed").is_empty());
}

#[test]
fn a_proposal_racing_a_users_appends_loses_no_line() {
    let env = Env::new("## Recurring\n- [ ] first\n");
    let path = env.md_path();
    let writer = std::thread::spawn(move || {
        for i in 0..200 {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            writeln!(f, "- [ ] user line {i}").unwrap();
        }
    });
    let mut client = Client::connect(&env);
    for i in 0..10 {
        propose_log(&mut client, &format!("agent {i}"));
    }
    writer.join().unwrap();
    let text = env.read("HEARTBEAT.md");
    for i in 0..200 {
        assert!(
            text.contains(&format!("- [ ] user line {i}\n")),
            "user line {i}:\n{text}"
        );
    }
    for i in 0..10 {
        assert!(
            text.contains(&format!("@log {{\"text\":\"agent {i}\"}}\n")),
            "agent {i}"
        );
    }
    assert!(text.starts_with("## Recurring\n- [ ] first\n"));
}

#[test]
fn deny_pause_and_resume_are_recorded_as_the_agent() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": [\"true\"]}\n");
    env.run_once(NOW).code(0);
    let id = env.events("approval_requested")[0]["approval_id"]
        .as_i64()
        .unwrap();
    let mut client = Client::connect(&env);
    let denied = client
        .call("deny", json!({"id": id, "reason": "not now"}))
        .unwrap();
    assert_eq!(denied["state"], "denied");
    let audited = env.events("approval_denied");
    assert_eq!(audited[0]["by"], "mcp:tester");
    assert_eq!(env.approval(id)["decided_by"], "mcp:tester");
    client
        .call("pause", json!({"for": "1h", "reason": "deploy"}))
        .unwrap();
    assert_eq!(env.events("paused")[0]["by"], "mcp:tester");
    client.call("resume", json!({})).unwrap();
    assert_eq!(env.events("resumed")[0]["by"], "mcp:tester");
    // The log tool reads the audit like `log --json`.
    let log = client
        .call("log", json!({"event": "approval_denied"}))
        .unwrap();
    assert_eq!(log.as_array().unwrap().len(), 1);
    assert_eq!(log[0]["approval_id"], id);
    // Without allow_approve there is no approving.
    let refused = client.call("approve", json!({"id": id})).unwrap_err();
    assert!(refused.contains("no tool named"), "{refused}");
}

#[test]
fn the_approve_tool_when_allowed_refuses_proposed_tasks_and_never_runs() {
    let env = Env::new("## Recurring\n- [ ] @shell {\"cmd\": [\"true\"]}\n")
        .config("[mcp_server]\nallow_approve = true\n");
    env.run_once(NOW).code(0);
    let ordinary = env.events("approval_requested")[0]["approval_id"]
        .as_i64()
        .unwrap();
    let mut client = Client::connect(&env);
    assert!(client.tools().iter().any(|t| t["name"] == "approve"));
    propose_log(&mut client, "proposed");
    env.run_once("2026-05-01T10:05:00Z").code(0);
    let proposed = env.events("approval_requested")[1]["approval_id"]
        .as_i64()
        .unwrap();

    let refused = client.call("approve", json!({"id": proposed})).unwrap_err();
    assert!(refused.contains("only a person approves it"), "{refused}");
    assert_eq!(env.approval_state(proposed).as_deref(), Some("pending"));

    let approved = client.call("approve", json!({"id": ordinary})).unwrap();
    assert_eq!(approved["state"], "approved");
    assert_eq!(env.approval(ordinary)["decided_by"], "mcp:tester");
    // Approved, not run, and no always-grant.
    assert!(env.events("task_succeeded").is_empty());
    assert_eq!(env.cmd(["grants", "--json"]).output().json(), json!([]));
}
