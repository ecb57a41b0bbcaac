//! `heartbeat mcp` (docs/reference.md#heartbeat-mcp), driven over stdio with JSON-RPC lines written
//! by hand: agents read the check-list and propose work; a person still decides.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};

use serde_json::{Value, json};

use crate::common::*;

/// A `heartbeat mcp` process seen from a client: JSON-RPC lines written by hand (raw ones too,
/// for the faults a friendly client would not make), every answer read with a deadline.
pub(crate) struct Client {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
    /// Every line the server wrote on stdout and this client read.
    seen: Vec<String>,
}

impl Client {
    /// Connected as the client named "tester".
    pub(crate) fn connect(env: &Env) -> Client {
        Client::connect_with(env.cmd(["mcp"]))
    }

    /// Connected as the client named `name`.
    pub(crate) fn connect_as(env: &Env, name: &str) -> Client {
        let mut client = Client::start(env.cmd(["mcp"]));
        client.initialize(name);
        client
    }

    /// `heartbeat mcp` as `cmd` starts it (its environment, its flags), connected as "tester".
    pub(crate) fn connect_with(cmd: Cmd) -> Client {
        let mut client = Client::start(cmd);
        client.initialize("tester");
        client
    }

    /// `heartbeat mcp` as `cmd` starts it, not initialized.
    pub(crate) fn start(cmd: Cmd) -> Client {
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
        Client {
            child: Some(child),
            stdin,
            lines,
            next_id: 1,
            seen: Vec::new(),
        }
    }

    /// `initialize` as the client named `name`, then `notifications/initialized`.
    pub(crate) fn initialize(&mut self, name: &str) {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": name, "version": "1.0"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "heartbeat", "{init}");
        // What heartbeat is, and that a person decides: an agent's model reads this first.
        let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
        assert!(
            instructions.contains("HEARTBEAT.md")
                && instructions.contains("propose")
                && instructions.contains("approval"),
            "{init}"
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn send(&mut self, msg: &Value) {
        self.send_raw(format!("{msg}\n").as_bytes());
    }

    /// The next message the server wrote.
    #[track_caller]
    pub(crate) fn read(&mut self) -> Value {
        let line = match self.lines.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the server closed stdout; seen: {:?}", self.seen)
            }
            Err(e) => panic!("no answer from heartbeat mcp ({e}); seen: {:?}", self.seen),
        };
        self.seen.push(line.clone());
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"))
    }

    /// The answer to request `id` (other messages are kept in `seen` only).
    #[track_caller]
    pub(crate) fn answer_to(&mut self, id: &Value) -> Value {
        loop {
            let msg = self.read();
            if &msg["id"] == id {
                return msg;
            }
        }
    }

    /// One request; its response.
    #[track_caller]
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer_to(&json!(id))
    }

    fn tools(&mut self) -> Vec<Value> {
        self.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// A tool call: Ok(JSON result), or Err(the JSON-RPC error or the tool error's text).
    #[track_caller]
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

    /// Close stdin (the client leaves) and wait for the server to end.
    pub(crate) fn leave(mut self) -> Output {
        drop(self.stdin.take());
        wait_output(self.child.take().unwrap(), "heartbeat mcp", WAIT)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
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
    // A state heartbeat does not know is an error naming the ones it does, not an empty list.
    let unknown = client
        .call("approvals", json!({"state": "pendng"}))
        .unwrap_err();
    assert!(
        unknown.contains("\"pendng\"") && unknown.contains("pending") && unknown.contains("all"),
        "{unknown}"
    );
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
        env.read("HEARTBEAT.md").ends_with(
            "- [ ] @log {\"text\":\"from the agent\"} <!-- proposed by mcp:tester -->\n"
        ),
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
            json!({"section": "recurring", "text": "**@log** {\"text\": \"x\"}"}),
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
            text.contains(&format!(
                "- [ ] @log {{\"text\":\"agent {i}\"}} <!-- proposed by mcp:tester -->\n"
            )),
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

/// The audit lines of `event` in another state dir.
fn events_in(state: &std::path::Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == event)
        .collect()
}

fn task_in<'a>(check: &'a Value, id: &str) -> &'a Value {
    check["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {check}"))
}

/// The mark lives in the file: a second cron line with its own state dir (or another host)
/// knows nothing of the proposal, and still asks a person before the task first runs.
#[test]
fn a_proposed_tasks_file_read_by_a_fresh_state_dir_is_queued_not_run() {
    let env = Env::new("## Recurring\n").config("autonomy = \"full\"\n");
    let mut client = Client::connect(&env);
    let id = propose_log(&mut client, "from the agent")["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    drop(client);
    let fresh = env.path("fresh-state");
    let in_fresh_at = |now: &str, args: &[&str]| {
        env.cmd(args)
            .now(now)
            .without_state_dir()
            .args(["--state-dir", fresh.to_str().unwrap()])
    };
    let in_fresh = |args: &[&str]| in_fresh_at(NOW, args);

    let check = in_fresh(&["check", "--json"]).output().json();
    assert_eq!(task_in(&check, &id)["provenance"], "mcp:tester");
    assert_eq!(task_in(&check, &id)["decision"], "approve");
    let run = in_fresh(&["run", "--once", "--json"]).output();
    run.code(0);
    let doc = run.json();
    assert_eq!(doc["tasks"][0]["task_id"], id.as_str());
    assert_eq!(doc["tasks"][0]["outcome"], "queued");
    assert_eq!(
        doc["tasks"][0]["reason"],
        "proposed by an agent, mcp:tester"
    );
    assert!(events_in(&fresh, "task_succeeded").is_empty());
    let queued = events_in(&fresh, "approval_requested");
    assert_eq!(queued.len(), 1);

    // A person's yes there releases it there; ordinary policy from then on.
    let approval = queued[0]["approval_id"].as_i64().unwrap().to_string();
    in_fresh(&["approve", approval.as_str()]).output().code(0);
    assert_eq!(events_in(&fresh, "task_succeeded").len(), 1);
    in_fresh_at("2026-05-01T11:00:00Z", &["run", "--once"])
        .output()
        .code(0);
    assert_eq!(events_in(&fresh, "task_succeeded").len(), 2);
    assert_eq!(events_in(&fresh, "approval_requested").len(), 1);
    // Not in the state dir where no person said yes.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert!(env.events("task_succeeded").is_empty());
    assert_eq!(env.events("approval_requested").len(), 1);
}

/// An agent's copy of a person's always-granted task is another task: denied, it stays
/// denied when the person deletes their own line, and never runs on the person's grant.
#[test]
fn an_agents_copy_of_a_granted_task_inherits_nothing() {
    let person_line = "- [ ] @shell {\"cmd\": [\"true\"]}\n";
    let env = Env::new(&format!("## Recurring\n{person_line}"));
    env.run_once(NOW).code(0);
    let first = env.events("approval_requested")[0].clone();
    let person_id = first["task_id"].as_str().unwrap().to_string();
    let approval = first["approval_id"].as_i64().unwrap().to_string();
    env.cmd(["approve", "--always", approval.as_str()])
        .output()
        .code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);

    let mut client = Client::connect(&env);
    let copy = client
        .call(
            "propose_task",
            json!({"section": "recurring", "tool": "shell", "input": {"cmd": ["true"]}}),
        )
        .unwrap();
    let copy_id = copy["task_id"].as_str().unwrap().to_string();
    assert_ne!(copy_id, person_id);
    assert_eq!(copy["decision"], "approve");
    drop(client);

    // The person's task runs on its grant; the copy asks, and the person says no.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    let succeeded = env.events("task_succeeded");
    assert_eq!(succeeded.len(), 2);
    assert_eq!(succeeded[1]["task_id"], person_id.as_str());
    let asked = env.events("approval_requested");
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1]["task_id"], copy_id.as_str());
    let copy_approval = asked[1]["approval_id"].as_i64().unwrap().to_string();
    env.cmd(["deny", copy_approval.as_str()]).output().code(0);

    // The person deletes their own line: the copy keeps its id, its denial, no grant.
    let text = env.read("HEARTBEAT.md").replacen(person_line, "", 1);
    assert!(text.contains("<!-- proposed by mcp:tester -->"), "{text}");
    env.write("HEARTBEAT.md", &text);
    let check = env
        .cmd(["check", "--json"])
        .now("2026-05-01T12:00:00Z")
        .output()
        .json();
    assert_eq!(check["tasks"][0]["task_id"], copy_id.as_str());
    assert_eq!(check["tasks"][0]["decision"], "denied");
    env.run_once("2026-05-01T12:00:00Z").code(0);
    // Once the denial stops holding, it asks again: it never runs on the person's grant.
    env.run_once("2026-05-02T12:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 2);
    let asked = env.events("approval_requested");
    assert_eq!(asked.len(), 3);
    assert_eq!(asked[2]["task_id"], copy_id.as_str());
}

/// A mark written by hand (or by another host's agent) is honoured the same way; a marked
/// reminder says it is proposed; deleting the mark adopts the task.
#[test]
fn a_marked_task_asks_a_marked_reminder_says_so_and_deleting_the_mark_adopts_it() {
    let marked = "## Recurring\n- [ ] @log {\"text\": \"x\"} <!-- proposed by mcp:someone -->\n\
                  - [ ] stretch <!-- proposed by mcp:someone -->\n";
    let env = Env::new(marked);
    let check = env.cmd(["check"]).output();
    check.code(0);
    assert_eq!(
        count_matches(&check.stdout, "(proposed by mcp:someone)"),
        2,
        "{}",
        check.stdout
    );
    assert!(!check.stdout.contains("<!--"), "{}", check.stdout);
    let doc = env.cmd(["check", "--json"]).output().json();
    assert_eq!(doc["tasks"][0]["text"], "@log {\"text\": \"x\"}");
    assert_eq!(doc["tasks"][0]["provenance"], "mcp:someone");
    assert_eq!(doc["tasks"][0]["decision"], "approve");
    assert_eq!(doc["tasks"][1]["text"], "stretch");
    assert_eq!(doc["tasks"][1]["decision"], "remind");
    assert_eq!(doc["tasks"][1]["provenance"], "mcp:someone");

    let run = env.run_once(NOW);
    run.code(0);
    assert!(env.events("task_succeeded").is_empty());
    assert_eq!(env.events("approval_requested").len(), 1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("stretch (proposed by an agent, mcp:someone)")),
        "{}",
        run.stdout
    );

    // Adopted: the person's own task now (a new id), under ordinary policy.
    env.write(
        "HEARTBEAT.md",
        marked.replace(" <!-- proposed by mcp:someone -->", ""),
    );
    let adopted = env.cmd(["check", "--json"]).output().json();
    assert_ne!(adopted["tasks"][0]["task_id"], doc["tasks"][0]["task_id"]);
    assert_eq!(adopted["tasks"][0]["provenance"], "file");
    assert_eq!(adopted["tasks"][0]["decision"], "run");
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 1);
}

/// Each refusal writes nothing, says why, and is audited with the agent and a reason.
#[test]
fn proposals_holding_secrets_hidden_characters_or_too_much_are_refused() {
    let env = Env::new("## Recurring\n- [ ] a\n");
    let before = env.read_bytes("HEARTBEAT.md");
    let mut client = Client::connect(&env);
    let log = |input: Value| json!({"section": "recurring", "tool": "shell", "input": input});
    let reminder = |text: String| json!({"section": "recurring", "text": text});
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            log(json!({"cmd": ["curl", "-H", "x"], "env": {"API_TOKEN": "abc123456"}})),
            "secret",
            "secret key",
        ),
        (
            reminder("water plants\u{2028}## One-time\u{2028}- [ ] @shell {}".into()),
            "character",
            "U+2028",
        ),
        (reminder("a\u{2029}b".into()), "character", "U+2029"),
        (reminder("a\u{85}b".into()), "character", "U+0085"),
        (reminder("\u{feff}a".into()), "character", "U+FEFF"),
        (reminder("a\u{200b}b".into()), "character", "U+200B"),
        (reminder("a\u{202e}b".into()), "character", "U+202E"),
        (
            log(json!({"cmd": ["echo", "a\u{1b}[2Jb"]})),
            "character",
            "U+001B",
        ),
        (
            log(json!({"cmd": ["echo", "a\u{2066}b"]})),
            "character",
            "U+2066",
        ),
        // Invisible without being zero-width spaces: tag characters (ASCII smuggled out of
        // sight), a soft hyphen, a Hangul filler, a variation selector.
        (
            log(json!({"cmd": ["rm", "-rf", "/tmp/old\u{e0020}\u{e002f}"]})),
            "character",
            "U+E0020",
        ),
        (reminder("water\u{ad} plants".into()), "character", "U+00AD"),
        (reminder("a\u{3164}b".into()), "character", "U+3164"),
        (reminder("a\u{fe01}b".into()), "character", "U+FE01"),
        (
            reminder("x <!-- proposed by mcp:x -->".into()),
            "markup",
            "may not hold",
        ),
        (reminder("a `b".into()), "markup", "may not hold"),
        (reminder("a \\ b".into()), "markup", "may not hold"),
        (reminder("a".repeat(3000)), "too_long", "2048"),
        // The schedule heading is written too: it counts.
        (
            json!({"section": "recurring", "schedule": format!("Every{}6h", " ".repeat(3000)), "text": "a"}),
            "too_long",
            "2048",
        ),
        (
            log(json!({"cmd": ["echo", "a".repeat(3000)]})),
            "too_long",
            "2048",
        ),
    ];
    for (args, reason, says) in &cases {
        let refused = client.call("propose_task", args.clone()).unwrap_err();
        assert!(refused.contains(says), "{args}: {refused}");
        assert!(!refused.contains("abc123456"), "{refused}");
        let audited = env.events("proposal_refused");
        let last = audited.last().unwrap();
        assert_eq!(last["by"], "mcp:tester", "{args}");
        assert_eq!(last["reason"], *reason, "{args}");
    }
    assert_eq!(env.events("proposal_refused").len(), cases.len());
    assert_eq!(env.read_bytes("HEARTBEAT.md"), before);
    assert!(env.events("task_proposed").is_empty());

    // `<` and `>` in an input are written escaped, and read back as themselves.
    let ok = client
        .call(
            "propose_task",
            json!({"section": "recurring", "tool": "log", "input": {"text": "a <!-- b --> c"}}),
        )
        .unwrap();
    let text = env.read("HEARTBEAT.md");
    assert!(
        text.ends_with(
            "- [ ] @log {\"text\":\"a \\u003c!-- b --\\u003e c\"} <!-- proposed by mcp:tester -->\n"
        ),
        "{text}"
    );
    let check = env.cmd(["check", "--json"]).output().json();
    let id = ok["task_id"].as_str().unwrap();
    assert_eq!(task_in(&check, id)["input"]["text"], "a <!-- b --> c");
    assert_eq!(task_in(&check, id)["provenance"], "mcp:tester");
}

#[test]
fn proposals_stop_at_a_mib_below_the_files_limit() {
    // 7 MiB less a little: a proposal would pass 8 MiB less the 1 MiB kept free.
    let mut md = String::from("## Recurring\n- [ ] a\n\n## Notes\n\n");
    let line = format!("{}\n", "x".repeat(1023));
    while md.len() + line.len() < 7 * 1024 * 1024 - 100 {
        md.push_str(&line);
    }
    let roomy = md.clone();
    md.push_str(&format!(
        "{}\n",
        "y".repeat(7 * 1024 * 1024 - 20 - md.len() - 1)
    ));
    let env = Env::new(&md);
    let mut client = Client::connect(&env);
    let refused = client
        .call(
            "propose_task",
            json!({"section": "recurring", "text": "one more thing to do"}),
        )
        .unwrap_err();
    assert!(refused.contains("1 MiB"), "{refused}");
    assert_eq!(env.events("proposal_refused")[0]["reason"], "file_full");
    assert_eq!(env.read("HEARTBEAT.md").len(), md.len());
    // With a few hundred bytes more room, it fits.
    env.write("HEARTBEAT.md", &roomy);
    client
        .call(
            "propose_task",
            json!({"section": "recurring", "text": "one more thing to do"}),
        )
        .unwrap();
}

#[test]
fn a_client_makes_at_most_100_proposals_a_day() {
    let env = Env::new("## Recurring\n");
    let mut client = Client::connect(&env);
    propose_log(&mut client, "first");
    let db = env.db_rw();
    for i in 0..99 {
        db.execute(
            "INSERT INTO proposals (task_id, proposed_by, file, proposed_at)
             VALUES (?1, 'mcp:tester', '/h.md', ?2)",
            rusqlite::params![format!("{i:012}"), ts("2026-04-30T09:00:00Z")],
        )
        .unwrap();
    }
    // Those 99 were more than a day ago.
    propose_log(&mut client, "second");
    db.execute(
        "UPDATE proposals SET proposed_at = ?1",
        [ts("2026-04-30T11:00:00Z")],
    )
    .unwrap();
    let before = env.read_bytes("HEARTBEAT.md");
    let refused = client
        .call(
            "propose_task",
            json!({"section": "recurring", "tool": "log", "input": {"text": "third"}}),
        )
        .unwrap_err();
    assert!(
        refused.contains("100 tasks in the last 24 hours"),
        "{refused}"
    );
    assert_eq!(env.events("proposal_refused")[0]["reason"], "rate_limit");
    assert_eq!(env.read_bytes("HEARTBEAT.md"), before);
    assert_eq!(env.events("task_proposed").len(), 2);
}

#[test]
fn proposing_an_open_task_again_returns_it_and_writes_nothing() {
    let env = Env::new("## Recurring\n");
    let mut client = Client::connect(&env);
    let first = propose_log(&mut client, "same");
    let after_first = env.read_bytes("HEARTBEAT.md");
    let again = propose_log(&mut client, "same");
    assert_eq!(again["task_id"], first["task_id"]);
    assert_eq!(again["existing"], true);
    assert_eq!(first["existing"], false);
    assert_eq!(env.read_bytes("HEARTBEAT.md"), after_first);
    assert_eq!(env.events("task_proposed").len(), 1);
    assert_eq!(env.events("proposal_refused")[0]["reason"], "duplicate");
}

/// Two identical tasks of one agent are numbered by occurrence: once a person deletes the
/// first (approved once, so under ordinary policy), the second, which the person denied,
/// would take over its id and run. So an agent has at most one of each task in the file:
/// asked again, under another schedule or after it was ticked, the one there is returned.
#[test]
fn an_agent_cannot_add_a_second_copy_of_its_own_task() {
    let env = Env::new("## Recurring\n")
        .config("autonomy = \"full\"\ntimezone = \"UTC\"\n[tools.shell]\napproval = \"auto\"\n");
    let mut client = Client::connect(&env);
    let task = json!({"section": "recurring", "tool": "shell", "input": {"cmd": ["sh", "-c", "echo ran >> RAN"]}});
    let first = client.call("propose_task", task.clone()).unwrap();
    env.run_once(NOW).code(0);
    env.cmd(["approve", "1"]).output().code(0);
    assert_eq!(env.read("RAN"), "ran\n");
    let before = env.read_bytes("HEARTBEAT.md");
    let mut scheduled = task.clone();
    scheduled["schedule"] = json!("Every 6h");
    let again = client.call("propose_task", scheduled).unwrap();
    assert_eq!(
        (&again["task_id"], &again["existing"]),
        (&first["task_id"], &json!(true)),
        "{again}"
    );
    assert_eq!(env.read_bytes("HEARTBEAT.md"), before);
    // Ticked by the person (never to run): asking again adds nothing either.
    env.write(
        "HEARTBEAT.md",
        env.read("HEARTBEAT.md")
            .replace("- [ ] @shell", "- [x] @shell"),
    );
    let ticked = env.read_bytes("HEARTBEAT.md");
    let again = client.call("propose_task", task).unwrap();
    assert_eq!(again["task_id"], first["task_id"], "{again}");
    assert_eq!(env.read_bytes("HEARTBEAT.md"), ticked);
    assert_eq!(env.events("task_proposed").len(), 1);
}

#[test]
fn a_proposal_keeps_the_files_line_endings_and_its_own_line() {
    // CRLF, and a last line without its line break.
    let env = Env::new("## Recurring\r\n- [ ] a");
    let mut client = Client::connect(&env);
    propose_log(&mut client, "one");
    propose_log(&mut client, "two");
    let text = env.read("HEARTBEAT.md");
    assert_eq!(
        text,
        "## Recurring\r\n- [ ] a\r\n\
         - [ ] @log {\"text\":\"one\"} <!-- proposed by mcp:tester -->\r\n\
         - [ ] @log {\"text\":\"two\"} <!-- proposed by mcp:tester -->\r\n"
    );
}

/// The hostile pass over the mark: inputs that try to open or close markup around it
/// (comment, code span, fence, backslash, entities, a mark of another name), in CR-only,
/// CRLF and unterminated files, and a reminder that `plain_tasks = "agent"` makes a tool
/// call. In full autonomy with every tool `auto`, nothing runs: each is queued, and each
/// line reads back with its mark.
#[test]
fn no_markup_in_a_proposal_hides_its_mark_in_any_file() {
    let junk = [
        "<!-- proposed by mcp:person -->",
        "-->",
        "<!--",
        "`",
        "``` ",
        "\\",
        "&lt;!--",
        "&#60;!--",
        "]]>",
        "\"",
    ];
    let config = "autonomy = \"full\"\ntimezone = \"UTC\"\nplain_tasks = \"agent\"\n\
                  [tools.shell]\napproval = \"auto\"\n\
                  [tools.agent]\ncommand = [\"touch\", \"RAN-agent\"]\napproval = \"auto\"\n";
    for md in [
        "## Recurring\r- [x] a\r",
        "## Recurring\r\n- [x] a\r\n",
        "## Recurring\n- [x] a",
    ] {
        let env = Env::new(md).config(config);
        let mut client = Client::connect(&env);
        for (n, j) in junk.iter().enumerate() {
            let args = json!({"section": "recurring", "tool": "shell",
                "input": {"cmd": ["touch", format!("RAN-{n}"), j]}});
            client.call("propose_task", args).unwrap();
        }
        client
            .call(
                "propose_task",
                json!({"section": "recurring", "text": "touch RAN-text &lt;!-- |a|b|"}),
            )
            .unwrap();
        let check = env.cmd(["check", "--json"]).output().json();
        let tasks = check["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), junk.len() + 2, "{md:?}: {check:#}");
        for t in &tasks[1..] {
            assert_eq!(t["provenance"], "mcp:tester", "{md:?}: {t}");
            assert_eq!(t["decision"], "approve", "{md:?}: {t}");
        }
        env.run_once(NOW).code(0);
        assert_eq!(
            env.events("approval_requested").len(),
            junk.len() + 1,
            "{md:?}"
        );
        assert!(env.events("task_succeeded").is_empty(), "{md:?}");
        let ran: Vec<_> = std::fs::read_dir(env.root())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("RAN"))
            .collect();
        assert!(ran.is_empty(), "{md:?}: {ran:?}");
    }
}
