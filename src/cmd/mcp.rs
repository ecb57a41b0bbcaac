//! `heartbeat mcp`: heartbeat as an MCP server over stdio, for agents (SPEC §13). Agents
//! read the check-list, the approvals and the log, propose tasks, pause, resume and deny; a
//! person still decides what runs.
//!
//! Invariants:
//! - Nothing here runs a task or the scheduler, or takes the run lock: every tool is one of
//!   the read-only commands, or a decision made the way the CLI makes it (SQLite's own
//!   locking, one durable transaction per decision).
//! - Every result is the JSON the CLI's `--json` prints, built by the same functions.
//! - `by` is `mcp:<client name>` for everything an agent does.
//! - A proposed task is appended, never inserted: the file is written with one `O_APPEND`
//!   write, after the proposal's provenance is stored, so that a proposed task can never be
//!   in the file without the mark that makes it ask a person first.
//! - Without `[mcp_server] allow_approve = true` there is no approve tool; with it, the tool
//!   approves without running (`approve --later`), never grants *always*, and refuses any
//!   task an agent proposed.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::Ctx;
use crate::audit::Event;
use crate::cli::LogArgs;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::decide::Decider;
use crate::error::{Error, Result, exit};
use crate::markdown;
use crate::mcp::server::{Handler, ToolDef, serve_stdio};
use crate::model::{Section, Task};
use crate::plan::Decision;

pub fn run(ctx: &Ctx) -> Result<u8> {
    // The config is read at every call (a person may edit it while an agent is connected);
    // a broken one now is a usage error, as for any command.
    ctx.load_config(&[])?;
    let server = Agents {
        config: ctx.config.clone(),
        state_dir: ctx.state_dir.clone(),
        cwd: ctx.cwd.clone(),
        clock: ctx.clock,
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

impl Handler for Agents {
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
                    json!({"state": {"type": "string", "enum": ["pending", "approved", "running", "succeeded", "failed", "denied", "expired", "stale", "all"]}}),
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
                "heartbeat pause: runs are skipped until resumed (or for a while)",
                schema(
                    json!({"for": {"type": "string", "description": "a duration (30m, 2h)"}, "reason": {"type": "string"}}),
                    &[],
                ),
            ),
            write(
                "resume",
                "heartbeat resume: end a pause",
                schema(json!({}), &[]),
            ),
            write(
                "deny",
                "heartbeat deny: say no to a pending approval",
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
    ) -> std::result::Result<Value, String> {
        let by = format!("mcp:{}", crate::text::clean(client));
        self.dispatch(&by, tool, &input).map_err(|e| {
            crate::audit::Secrets::taken().string(&match e {
                Error::Usage(m) => m,
                other => other.to_string(),
            })
        })
    }
}

fn text<'a>(input: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::Usage(format!("\"{key}\" must be a string"))),
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
        match tool {
            "status" => super::status::json(&ctx, &cfg),
            "check" => Ok(super::check::evaluate(&ctx, cfg, false)?.json()),
            "approvals" => {
                let state = match text(input, "state")?.unwrap_or("pending") {
                    "all" => None,
                    s => Some(s),
                };
                Ok(super::approvals::json(&super::approvals::rows(
                    &cfg, state,
                )?))
            }
            "log" => {
                let args = LogArgs {
                    since: text(input, "since")?.map(str::to_string),
                    events: text(input, "event")?
                        .map(str::to_string)
                        .into_iter()
                        .collect(),
                    task: text(input, "task")?.map(str::to_string),
                    run: None,
                    json: true,
                    follow: false,
                    lines: None,
                    all: true,
                };
                let limit = input.get("limit").and_then(Value::as_u64).unwrap_or(100);
                let lines =
                    super::log::matching(&ctx, &cfg, &args, limit.clamp(1, 10_000) as usize)?;
                Ok(Value::Array(lines.into_iter().map(Value::Object).collect()))
            }
            "propose_task" => propose(&ctx, cfg, by, input),
            "pause" => {
                let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
                let until =
                    match text(input, "for")? {
                        None => None,
                        Some(raw) => {
                            let dur = humantime::parse_duration(raw.trim())
                                .map_err(|e| Error::Usage(format!("\"for\": {raw:?}: {e}")))?;
                            Some(crate::engine::bot::pause_end(d.now, dur).ok_or_else(|| {
                                Error::Usage(format!("\"for\": {raw:?} is too long"))
                            })?)
                        }
                    };
                crate::engine::bot::pause(&mut d, until, text(input, "reason")?)?;
                Ok(json!({"paused": true, "until": until.map(crate::audit::format_ts), "by": by}))
            }
            "resume" => {
                let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
                let resumed = crate::engine::bot::resume(&mut d, "resumed")?;
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
    let decided = if approve {
        d.approve(row, false)?
    } else {
        d.deny(row, text(input, "reason")?)?
    };
    if !decided {
        return Err(Error::Usage(format!(
            "#{id} was decided by someone else meanwhile"
        )));
    }
    let state = if approve { "approved" } else { "denied" };
    Ok(json!({"id": id, "task_id": row.task_id, "state": state, "by": by}))
}

/// `propose_task`: check the task as `check` would, store who proposed it, append it.
fn propose(ctx: &Ctx, cfg: Config, by: &str, input: &Map<String, Value>) -> Result<Value> {
    let section = match text(input, "section")? {
        Some("recurring") => Section::Recurring,
        Some("one_time") => Section::OneTime,
        other => {
            return Err(Error::Usage(format!(
                "\"section\" must be \"recurring\" or \"one_time\", not {other:?}"
            )));
        }
    };
    let line = task_line(input)?;
    let heading = text(input, "schedule")?
        .map(str::trim)
        .filter(|h| !h.is_empty());
    if heading.is_some_and(|h| h.chars().any(char::is_control)) {
        return Err(Error::Usage("\"schedule\" must be one line of text".into()));
    }
    let path = match text(input, "file")? {
        None => cfg
            .files
            .first()
            .cloned()
            .ok_or_else(|| Error::Usage("no HEARTBEAT.md is configured".into()))?,
        Some(f) => {
            let wanted = ctx.cwd.join(f);
            cfg.files
                .iter()
                .find(|c| **c == wanted || c.ends_with(f))
                .cloned()
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "{f:?} is not one of the configured files ({})",
                        cfg.files
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?
        }
    };
    // A missing file says what to do about it, as every command does.
    markdown::read_source(&path)?;
    // Read, checked and appended while holding the file's proposal lock.
    let locked = markdown::append::lock(&path).map_err(|e| Error::io(&path, e))?;
    let source = markdown::read_source(&path)?;
    let (block, task) = markdown::append::block(
        &source.path,
        &source.canonical,
        &source.text,
        section,
        heading,
        &line,
    )
    .map_err(|why| Error::Usage(format!("{}: {why}", path.display())))?;
    // Checked as `check` checks it, in the file as it would be.
    if let Decision::Invalid {
        line,
        column,
        error,
    } = super::check::decide_one(ctx, &cfg, &task)?
    {
        return Err(Error::Usage(format!(
            "{}:{line}:{column}: {error}",
            path.display()
        )));
    }
    if heading.is_some() && task.schedule.is_none() {
        return Err(Error::Usage(format!(
            "\"schedule\": {:?} is not a schedule (such as \"Every 6h\", \"Weekdays at 09:00\", \
             \"At 2026-12-24 18:00\")",
            heading.unwrap_or_default()
        )));
    }
    let mut d = Decider::open(cfg, by.to_string(), ctx.clock)?;
    let file = path.display().to_string();
    // The mark first: a proposed task is never in the file without it.
    d.store.record_proposal(&task.id, by, &file, d.now)?;
    markdown::append::append(&locked, &block).map_err(|e| Error::io(&path, e))?;
    drop(locked);
    d.record(&Event::TaskProposed {
        task_id: &task.id,
        file: &path,
        line: task.line,
        section: section.as_str(),
        text: &task.text,
        by,
    })?;
    drop(d);
    let checked = super::check::evaluate(ctx, ctx.load_config(&[])?, false)?;
    let decision = find(&checked.tasks(), &checked.plan.items, &task.id)
        .map_or("unknown", |p| p.decision.as_str());
    Ok(json!({
        "task_id": task.id,
        "file": path,
        "line": task.line,
        "section": section.as_str(),
        "schedule": heading,
        "text": task.text,
        "decision": decision,
        "provenance": by,
    }))
}

fn find<'p>(
    tasks: &[&Task],
    items: &'p [crate::plan::Planned],
    id: &str,
) -> Option<&'p crate::plan::Planned> {
    tasks
        .iter()
        .zip(items)
        .find(|(t, _)| t.id == id)
        .map(|(_, p)| p)
}

/// The `- [ ] …` line: a reminder's text, or `@tool {input}`.
fn task_line(input: &Map<String, Value>) -> Result<String> {
    let body = match (text(input, "text")?, text(input, "tool")?) {
        (Some(t), None) => {
            let t = t.trim();
            if t.is_empty() || t.chars().any(char::is_control) || t.starts_with('@') {
                return Err(Error::Usage(
                    "\"text\" must be one non-empty line that does not start with @ (give a \
                     tool call as \"tool\" and \"input\")"
                        .into(),
                ));
            }
            t.to_string()
        }
        (None, Some(tool)) => {
            let valid = tool
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && tool
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !valid {
                return Err(Error::Usage(format!(
                    "\"tool\": {tool:?} is not a tool name"
                )));
            }
            let args = match input.get("input") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(_) => return Err(Error::Usage("\"input\" must be an object".into())),
            };
            format!("@{tool} {args}")
        }
        _ => {
            return Err(Error::Usage(
                "give either \"text\" (a reminder) or \"tool\" (with its \"input\")".into(),
            ));
        }
    };
    Ok(format!("- [ ] {body}"))
}
