//! `heartbeat mcp`: heartbeat as an MCP server over stdio, for agents
//! (docs/reference.md#heartbeat-mcp). Agents read the check-list, the approvals and the log,
//! propose tasks, pause, resume and deny; a person still decides what runs.
//!
//! Invariants:
//! - Nothing here runs a task or the scheduler, or takes the run lock: every tool is one of
//!   the read-only commands, or a decision made the way the CLI makes it (SQLite's own
//!   locking, one durable transaction per decision).
//! - Every result is the JSON the CLI's `--json` prints, built by the same functions
//!   (`engine::query`).
//! - `by` is `mcp:<client name>` for everything an agent does.
//! - A proposed task is checked here as the agent typed it, then appended by
//!   `engine::propose` (with the agent's mark, one `O_APPEND` write, never twice).
//! - Without `[mcp_server] allow_approve = true` there is no approve tool; with it, the tool
//!   approves without running (`approve --later`), never grants *always*, and refuses any
//!   task an agent proposed.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::{Ctx, OutputError};
use crate::audit::{Event, Secrets};
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::agent;
use crate::engine::decide::Decider;
use crate::engine::propose::{self, Proposal, Refusal, refuse};
use crate::engine::query::{self, LogQuery};
use crate::error::{Error, Result, WorkStarted, exit};
use crate::markdown;
use crate::mcp::server::{Handler, ToolDef, serve_stdio};
use crate::model::Section;
use crate::text::{Redacted, RedactedJson};

pub(crate) fn run(ctx: &Ctx) -> Result<u8> {
    // The config is read at every call (a person may edit it while an agent is connected);
    // a broken one now is a usage error, as for any command. Its secrets are taken now,
    // before the server's threads start: every answer hides them.
    Secrets::from_config(&ctx.load_config(&[])?);
    let server = Agents {
        config: ctx.config.clone(),
        state_dir: ctx.state_dir.clone(),
        cwd: ctx.cwd.clone(),
        clock: ctx.clock,
        work: ctx.work.clone(),
        output: ctx.output.clone(),
    };
    serve_stdio(server, "heartbeat", env!("CARGO_PKG_VERSION"))
        .map_err(|e| Error::io("<stdio>", e))?;
    Ok(exit::OK)
}

/// What each call needs to act like a command started at that moment.
struct Agents {
    config: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    cwd: PathBuf,
    clock: Clock,
    /// The command's (no tool of this server starts work: it stays unset).
    work: WorkStarted,
    output: OutputError,
}

impl Agents {
    /// A command context at the time of the call (`now` overrides it, for `check`).
    fn ctx(&self, now: Option<chrono::DateTime<chrono::Utc>>) -> Ctx {
        let clock = match now {
            Some(t) => Clock::starting_at(t),
            None => self.clock,
        };
        Ctx {
            now: clock.now(),
            clock,
            cwd: self.cwd.clone(),
            config: self.config.clone(),
            state_dir: self.state_dir.clone(),
            verbose: 0,
            work: self.work.clone(),
            output: self.output.clone(),
        }
    }
}

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// Sent to every client in `initialize` (docs/reference.md#heartbeat-mcp).
const INSTRUCTIONS: &str = "heartbeat runs a person's check-list, HEARTBEAT.md, on a schedule \
(from cron or its daemon): tool calls written as `@tool {json}` under `## Recurring` or \
`## One-time`, and plain reminders. You can read it (status, check, approvals, log) and \
propose tasks (propose_task), but a person decides what runs: a task you propose waits for \
that person's approval before it ever runs, and you cannot approve your own proposals. Use \
check to see what each task would do, propose_task to suggest work, and tell the person \
when something waits for their approval (heartbeat approvals).";

impl Handler for Agents {
    fn instructions(&self) -> &'static str {
        INSTRUCTIONS
    }

    fn tools(&self) -> Vec<ToolDef> {
        let read = |name, description, input_schema| ToolDef {
            name,
            description,
            input_schema,
            read_only: true,
            destructive: false,
        };
        let write = |name, description, input_schema| ToolDef {
            name,
            description,
            input_schema,
            read_only: false,
            destructive: false,
        };
        let mut tools = vec![
            read(
                "status",
                "heartbeat status --json: last run, pause, pending approvals, spend, tripped tasks, outbox, run lock",
                schema(json!({}), &[]),
            ),
            read(
                "check",
                "heartbeat check --json: every task of the check-list with what would happen now (decision), when it is next due, its provenance, and the problems in the files",
                schema(
                    json!({"now": {"type": "string", "description": "RFC 3339 time to check at (default: now)"}}),
                    &[],
                ),
            ),
            read(
                "approvals",
                "heartbeat approvals --json: approvals (pending by default)",
                schema(
                    json!({"state": {"type": "string", "enum": APPROVAL_STATES}}),
                    &[],
                ),
            ),
            read(
                "log",
                "Audit log lines, filtered like heartbeat log --json, the latest `limit` (default 100)",
                schema(
                    json!({
                        "since": {"type": "string", "description": "a duration back from now (2h) or an RFC 3339 time"},
                        "event": {"type": "string", "description": "only this event (task_failed, approval_requested, …)"},
                        "task": {"type": "string", "description": "a task id or its first 4+ hex digits"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 10000}
                    }),
                    &[],
                ),
            ),
            write(
                "propose_task",
                "Append a task (a plain reminder `text`, or a `tool` call with its `input`) under ## Recurring or ## One-time, optionally below a schedule heading (\"Every 6h\", \"Weekdays at 09:00\", \"At 2026-12-24 18:00\"), of a configured HEARTBEAT.md. It is checked as `check` would; it asks a person for approval the first time it would run. Returns its task id and decision.",
                schema(
                    json!({
                        "section": {"type": "string", "enum": ["recurring", "one_time"]},
                        "schedule": {"type": "string"},
                        "text": {"type": "string"},
                        "tool": {"type": "string", "description": "a tool name (log, http, SERVER.TOOL, …)"},
                        "input": {"type": "object"},
                        "file": {"type": "string", "description": "one of the configured files (default: the first)"}
                    }),
                    &["section"],
                ),
            ),
            write(
                "pause",
                "heartbeat pause: runs are skipped for a while: `for` (default and at most 24h). The person is told. A person's pause cannot be changed.",
                schema(
                    json!({"for": {"type": "string", "description": "a duration (30m, 2h), at most 24h"}, "reason": {"type": "string"}}),
                    &[],
                ),
            ),
            write(
                "resume",
                "heartbeat resume: end a pause an agent made (a person's pause only a person ends). The person is told.",
                schema(json!({}), &[]),
            ),
            write(
                "deny",
                "heartbeat deny: say no to a pending approval. The person is told.",
                schema(
                    json!({"id": {"type": "integer"}, "reason": {"type": "string"}}),
                    &["id"],
                ),
            ),
        ];
        if self
            .ctx(None)
            .load_config(&[])
            .is_ok_and(|c| c.agent_may_approve)
        {
            tools.push(write(
                "approve",
                "Approve a pending approval; it runs at the next run. Never for a task an agent proposed, never always.",
                schema(json!({"id": {"type": "integer"}}), &["id"]),
            ));
        }
        tools
    }

    fn call(
        &self,
        client: &str,
        tool: &str,
        input: Map<String, Value>,
    ) -> std::result::Result<RedactedJson, Redacted> {
        // `client` is already a plain name (the server makes it one).
        let by = format!("mcp:{client}");
        let answer = self.dispatch(&by, tool, &input);
        // The config's secrets were taken by the call (`dispatch`), and every secret this
        // process took before (a config edited since still hides the old ones).
        let secrets = Secrets::taken();
        answer.map(|v| secrets.redact_json(v)).map_err(|e| {
            secrets.redact(&match e {
                Error::Usage(m) => m,
                other => other.to_string(),
            })
        })
    }

    fn redact(&self, text: &str) -> Redacted {
        Secrets::taken().redact(text)
    }
}

/// What the `approvals` tool's `state` may be: an approval's states, and `all`.
const APPROVAL_STATES: [&str; 10] = [
    "pending",
    "approved",
    "running",
    "retrying",
    "succeeded",
    "failed",
    "denied",
    "expired",
    "stale",
    "all",
];

fn text<'a>(input: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::Usage(format!("\"{key}\" must be a string"))),
    }
}

/// An agent's `reason` (for a pause or a denial): stored, shown in `status` and told to the
/// person, so bounded like a proposal.
fn reason(input: &Map<String, Value>) -> Result<Option<&str>> {
    let reason = text(input, "reason")?;
    let max = markdown::proposal::MAX_BYTES;
    match reason {
        Some(r) if r.len() > max => Err(Error::Usage(format!(
            "\"reason\" is {} bytes, longer than the {max}-byte limit; nothing was done",
            r.len()
        ))),
        _ => Ok(reason),
    }
}

impl Agents {
    fn dispatch(&self, by: &str, tool: &str, input: &Map<String, Value>) -> Result<Value> {
        let now = match text(input, "now")? {
            Some(t) if tool == "check" => Some(
                chrono::DateTime::parse_from_rfc3339(t)
                    .map_err(|e| {
                        Error::Usage(format!("\"now\": {t:?} is not an RFC 3339 time: {e}"))
                    })?
                    .with_timezone(&chrono::Utc),
            ),
            _ => None,
        };
        let ctx = self.ctx(now);
        let cfg = ctx.load_config(&[])?;
        // What the answer must not show (the config may have changed since the last call).
        Secrets::from_config(&cfg);
        match tool {
            "status" => Ok(query::status(&cfg, ctx.now)?.json()),
            "check" => Ok(query::check(cfg, ctx.now, false)?.report().agent_json()),
            "approvals" => {
                let rows = match text(input, "state")?.unwrap_or("pending") {
                    "all" => query::approvals(&cfg, None)?,
                    s => match s.parse() {
                        Ok(state) => query::approvals(&cfg, Some(state))?,
                        // As the CLI's --state does: a typo is said, not an empty list.
                        Err(_) => {
                            return Err(Error::Usage(format!(
                                "\"state\" is {s:?}: expected one of {}",
                                APPROVAL_STATES.join(", ")
                            )));
                        }
                    },
                };
                Ok(query::approvals_json(&rows))
            }
            "log" => {
                let log = LogQuery {
                    since: text(input, "since")?,
                    events: text(input, "event")?
                        .map(str::to_string)
                        .into_iter()
                        .collect(),
                    task: text(input, "task")?,
                    run: None,
                };
                let limit = input.get("limit").and_then(Value::as_u64).unwrap_or(100);
                let filter = query::log_filter(&log, ctx.now, || ctx.zone())?;
                let lines = query::log_lines(&cfg, filter, limit.clamp(1, 10_000) as usize)?;
                Ok(Value::Array(lines.into_iter().map(Value::Object).collect()))
            }
            "propose_task" => propose(&ctx, cfg, by, input),
            "pause" => {
                let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
                let asked = match text(input, "for")? {
                    None => None,
                    Some(raw) => Some(
                        humantime::parse_duration(raw.trim())
                            .map_err(|e| Error::Usage(format!("\"for\": {raw:?}: {e}")))?,
                    ),
                };
                let paused = agent::pause(&mut d, asked, reason(input)?)?;
                let mut answer = json!({
                    "paused": true,
                    "until": crate::audit::format_ts(paused.until),
                    "by": by,
                    "capped": paused.capped,
                });
                if paused.capped {
                    answer["note"] = json!(format!(
                        "an agent's pause lasts at most {}: runs are paused until {}; \
                         a person can pause for longer",
                        humantime::format_duration(agent::MAX_PAUSE),
                        crate::audit::format_ts(paused.until)
                    ));
                }
                Ok(answer)
            }
            "resume" => {
                let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
                let resumed = agent::resume(&mut d)?;
                Ok(json!({"resumed": resumed, "by": by}))
            }
            "deny" | "approve" => decide(&ctx, cfg, by, tool, input),
            other => Err(Error::Usage(format!("no tool named {other:?}"))),
        }
    }
}

/// `deny`, and `approve` when the config allows it.
fn decide(
    ctx: &Ctx,
    cfg: Config,
    by: &str,
    tool: &str,
    input: &Map<String, Value>,
) -> Result<Value> {
    let approve = tool == "approve";
    if approve && !cfg.agent_may_approve {
        return Err(Error::Usage(
            "agents may not approve: a person approves (heartbeat approve, or Telegram); \
             [mcp_server] allow_approve = true changes that"
                .into(),
        ));
    }
    let Some(id) = input.get("id").and_then(Value::as_i64) else {
        return Err(Error::Usage(
            "\"id\" must be an approval id (an integer)".into(),
        ));
    };
    let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
    let rows = d.decidable_by_id(&[id], false)?;
    let Some(row) = rows.first() else {
        return Err(Error::Usage(format!("#{id} is not pending")));
    };
    if approve && let Some(proposer) = d.store.proposed_by(&row.task_id)? {
        return Err(Error::Usage(format!(
            "#{id} is a task an agent proposed ({proposer}): only a person approves it"
        )));
    }
    let reason = if approve { None } else { reason(input)? };
    let decided = if approve {
        d.approve(row, false)?
    } else {
        d.deny(row, reason)?
    };
    if !decided {
        return Err(Error::Usage(format!(
            "#{id} was decided by someone else meanwhile"
        )));
    }
    let state = if approve {
        crate::model::ApprovalState::Approved
    } else {
        crate::model::ApprovalState::Denied
    };
    agent::decided(&mut d, row, state, reason, &ctx.cwd)?;
    Ok(json!({"id": id, "task_id": row.task_id, "state": state, "by": by}))
}

/// `propose_task`: check the task as `check` would, append it with its mark. A refusal
/// writes nothing to the file and one `proposal_refused` line to the audit log.
fn propose(ctx: &Ctx, cfg: Config, by: &str, input: &Map<String, Value>) -> Result<Value> {
    // `by` is `mcp:` and a name the protocol edge already made one a mark can hold.
    debug_assert!(markdown::parse::is_mark_name(by.trim_start_matches("mcp:")));
    let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
    let load_config = || ctx.load_config(&[]);
    let done = proposal(ctx, &d, by, input)
        .and_then(|p| propose::propose(&mut d, &p, by, ctx.now, &load_config));
    match done {
        Ok(done) => Ok(done),
        Err(Refusal { reason, error }) => {
            d.record(&Event::ProposalRefused { by, reason })?;
            Err(error)
        }
    }
}

/// What the agent asked for, checked on its own (the file is not read yet).
fn proposal<'a>(
    ctx: &Ctx,
    d: &Decider,
    by: &str,
    input: &'a Map<String, Value>,
) -> std::result::Result<Proposal<'a>, Refusal> {
    use markdown::proposal::{Proposed, line, no_markup, plain};

    let section = match text(input, "section")? {
        Some("recurring") => Section::Recurring,
        Some("one_time") => Section::OneTime,
        other => {
            return Err(refuse(
                "invalid",
                format!("\"section\" must be \"recurring\" or \"one_time\", not {other:?}"),
            ));
        }
    };
    let heading = text(input, "schedule")?
        .map(str::trim)
        .filter(|h| !h.is_empty());
    if let Some(h) = heading {
        plain("\"schedule\"", h)?;
        no_markup("\"schedule\"", h)?;
    }
    let args;
    let proposed = match (text(input, "text")?, text(input, "tool")?) {
        (Some(t), None) => Proposed::Reminder(t),
        (None, Some(tool)) => {
            let valid = tool
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && tool
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !valid {
                return Err(refuse(
                    "invalid",
                    format!("\"tool\": {tool:?} is not a tool name"),
                ));
            }
            args = match input.get("input") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(_) => return Err(refuse("invalid", "\"input\" must be an object".into())),
            };
            // A secret in a task line would be in the file, in every approval and on the
            // phone: the person puts secrets in the config, not an agent in the file.
            if crate::audit::has_secret_keys(&args) {
                return Err(refuse(
                    "secret",
                    "\"input\" holds a value under a secret key (token, password, …): a \
                     proposal may not carry a secret; name it in the config instead"
                        .into(),
                ));
            }
            Proposed::Tool {
                name: tool,
                input: &args,
            }
        }
        _ => {
            return Err(refuse(
                "invalid",
                "give either \"text\" (a reminder) or \"tool\" (with its \"input\")".into(),
            ));
        }
    };
    let line = line(&proposed, heading, by)?;
    let path = match text(input, "file")? {
        None => d
            .cfg
            .files
            .first()
            .cloned()
            .ok_or_else(|| Error::Usage("no HEARTBEAT.md is configured".into()))?,
        Some(f) => {
            let wanted = ctx.cwd.join(f);
            d.cfg
                .files
                .iter()
                .find(|c| **c == wanted || c.ends_with(f))
                .cloned()
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "{f:?} is not one of the configured files ({})",
                        d.cfg
                            .files
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?
        }
    };
    Ok(Proposal {
        section,
        heading,
        line,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::APPROVAL_STATES;
    use crate::model::ApprovalState;

    #[test]
    fn the_approvals_tool_offers_every_approval_state_and_all() {
        let words: Vec<&str> = ApprovalState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(APPROVAL_STATES[..APPROVAL_STATES.len() - 1], words[..]);
        assert_eq!(APPROVAL_STATES.last(), Some(&"all"));
    }
}
