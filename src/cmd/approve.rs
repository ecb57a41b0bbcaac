//! `heartbeat approve`: a person says yes. By id, `--all`, or one by one on a terminal.
//!
//! Invariants:
//! - Only `pending` approvals are approved; an id in any other state is an error that names
//!   the state, and nothing is decided (all ids are checked before any is approved).
//! - `--all` approves exactly the approvals it showed (or listed, with `--yes`), never one
//!   queued after it looked.
//! - The decision is stored (synchronously) and audited before anything runs; running takes
//!   the run lock, re-reads the task's file and claims the approval atomically (see
//!   `session`), so an approved task runs at most once whoever else is trying.

use std::collections::HashSet;
use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Ctx, Out, clean, first_line, show_path};
use crate::audit::{self, AuditLog};
use crate::cli::ApproveArgs;
use crate::config::Config;
use crate::error::{Error, Result, exit};
use crate::lock;
use crate::session::{self, Session, fields, new_run_id};
use crate::store::{ApprovalRow, Decision, GrantRow, Store};
use crate::tools::Registry;

/// How long `approve` waits for a run that holds the lock.
const LOCK_WAIT: Duration = Duration::from_secs(30);

pub fn run(ctx: &Ctx, args: &ApproveArgs) -> Result<u8> {
    let mut d = Decider::open(ctx)?;
    let mut out = Out::new();
    let interactive = std::io::stdin().is_terminal();

    let targets = if !args.ids.is_empty() {
        // An approval already approved (say with --later) is run now, not refused.
        d.decidable_by_id(&args.ids, true)?
    } else if args.all {
        let pending = d.store.approvals(Some("pending"))?;
        if pending.is_empty() {
            out.line("no pending approvals");
            return Ok(exit::OK);
        }
        for row in &pending {
            out.line(&describe(row, ctx));
        }
        if !args.yes {
            if !interactive {
                return Err(Error::Usage(
                    "approve --all needs --yes when not on a terminal (the list above is what it would approve)".into(),
                ));
            }
            out.flush();
            if !confirm(&format!("Approve these {}? [y/N] ", pending.len()))? {
                out.line("nothing approved");
                return Ok(exit::OK);
            }
        }
        pending
    } else if interactive {
        return d.walk(ctx, &mut out, args.later, args.always);
    } else {
        let pending = d.store.approvals(Some("pending"))?;
        for row in &pending {
            out.line(&describe(row, ctx));
        }
        return Err(Error::Usage(format!(
            "{} pending approval(s); not on a terminal, so give ids: `heartbeat approve ID…` (or `approve --all --yes`)",
            pending.len()
        )));
    };

    // Every decision in one durable transaction: `approve --all` of a thousand costs one
    // sync, not a thousand.
    let pending: Vec<&ApprovalRow> = targets.iter().filter(|r| r.state == "pending").collect();
    let decided = d.approve_many(&pending, args.always)?;
    // The rows in hand, not re-read: running re-reads each task from its file anyway.
    let mut approved: Vec<&ApprovalRow> = Vec::new();
    for row in &targets {
        if row.state == "approved" {
            out.line(&format!(
                "#{} was already approved by {}",
                row.id,
                row.decided_by.as_deref().unwrap_or("?")
            ));
            if args.always {
                d.grant(row)?;
            }
            approved.push(row);
        } else if decided.contains(&row.id) {
            approved.push(row);
            if args.later {
                out.line(&format!(
                    "approved #{} @{} {}:{}; it runs at the next run",
                    row.id,
                    row.tool,
                    show_path(row.file.as_ref(), &ctx.cwd),
                    row.line
                ));
            }
        } else {
            out.line(&format!(
                "#{} was decided by someone else meanwhile",
                row.id
            ));
        }
    }
    if args.later || approved.is_empty() {
        return Ok(exit::OK);
    }
    d.execute(ctx, &approved, &mut out)
}

/// The state an approving command works with.
pub struct Decider {
    pub cfg: Config,
    pub store: Store,
    pub audit: AuditLog,
    pub by: String,
    pub now: DateTime<Utc>,
}

impl Decider {
    /// Load config and state, and let expired approvals expire first: an approval past its
    /// `approval_ttl` can no longer be approved.
    pub fn open(ctx: &Ctx) -> Result<Decider> {
        let cfg = ctx.load_config(&[])?;
        let audit = session::open_audit(&cfg)?;
        let store = Store::open(&cfg.state_dir)?;
        let by = format!("cli:{}", user_name());
        let mut d = Decider::from_parts(cfg, store, audit, by, ctx.now);
        d.expire()?;
        Ok(d)
    }

    /// From state a caller already holds (a run that handles Telegram button presses).
    pub fn from_parts(
        cfg: Config,
        store: Store,
        audit: AuditLog,
        by: String,
        now: DateTime<Utc>,
    ) -> Decider {
        Decider {
            cfg,
            store,
            audit,
            by,
            now,
        }
    }

    pub fn into_parts(self) -> (Store, AuditLog) {
        (self.store, self.audit)
    }

    /// Pending approvals past `approval_ttl` become `expired` (audited).
    pub fn expire(&mut self) -> Result<()> {
        for row in self.store.expire_pending(self.now, self.cfg.approval_ttl)? {
            self.record(
                "approval_expired",
                fields([
                    ("approval_id", json!(row.id)),
                    ("task_id", json!(row.task_id)),
                    ("reason", json!("ttl")),
                ]),
            )?;
        }
        Ok(())
    }

    pub fn record(
        &mut self,
        event: &str,
        f: serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        self.append(event, f)?;
        self.sync_audit()
    }

    /// One audit line, not yet synced (see [`Decider::sync_audit`]).
    fn append(&mut self, event: &str, f: serde_json::Map<String, serde_json::Value>) -> Result<()> {
        self.audit
            .record(self.now, event, None, f)
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    fn sync_audit(&self) -> Result<()> {
        self.audit
            .sync()
            .map_err(|e| Error::io(self.audit.path(), e))
    }

    /// The rows for these ids, all pending (or, with `approved_too`, already approved and
    /// waiting to run); otherwise an error naming what is wrong.
    pub fn decidable_by_id(&self, ids: &[i64], approved_too: bool) -> Result<Vec<ApprovalRow>> {
        let mut rows = Vec::with_capacity(ids.len());
        let mut problems = Vec::new();
        for &id in ids {
            match self.store.approval(id)? {
                None => problems.push(format!("no approval #{id}")),
                Some(row)
                    if row.state != "pending" && !(approved_too && row.state == "approved") =>
                {
                    let by = match (&row.decided_by, &row.decided_at) {
                        (Some(by), Some(at)) => format!(" (by {by} at {at})"),
                        (None, Some(at)) => format!(" (at {at})"),
                        _ => String::new(),
                    };
                    problems.push(format!(
                        "approval #{id} is {}{by}; only pending approvals can be decided",
                        row.state
                    ));
                }
                Some(row) => {
                    if !rows.iter().any(|r: &ApprovalRow| r.id == id) {
                        rows.push(row);
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(rows)
        } else {
            Err(Error::Usage(format!(
                "{}; nothing was decided",
                problems.join("; ")
            )))
        }
    }

    /// `pending → approved`, audited; with `always`, grant the task id. False when someone
    /// else decided it first.
    pub fn approve(&mut self, row: &ApprovalRow, always: bool) -> Result<bool> {
        let decision = Decision {
            approve: true,
            by: self.by.clone(),
            reason: None,
            always,
        };
        if !self.store.decide(row.id, &decision, self.now)? {
            return Ok(false);
        }
        self.record("approval_approved", decision_fields(row, &decision))?;
        if always {
            self.grant(row)?;
        }
        Ok(true)
    }

    /// Grant the approval's exact task from now on.
    pub fn grant(&mut self, row: &ApprovalRow) -> Result<()> {
        self.store.add_grant(&self.grant_row(row))?;
        Ok(())
    }

    fn grant_row(&self, row: &ApprovalRow) -> GrantRow {
        GrantRow {
            task_id: row.task_id.clone(),
            tool: row.tool.clone(),
            input: row.input.clone(),
            file: row.file.clone(),
            text: row.text.clone(),
            created_at: audit::format_ts(self.now),
            created_by: self.by.clone(),
            approval_id: Some(row.id),
        }
    }

    /// Approve several pending approvals at once (one durable transaction, one audit
    /// sync); with `always`, grant each task. The ids that were decided here.
    pub fn approve_many(&mut self, rows: &[&ApprovalRow], always: bool) -> Result<HashSet<i64>> {
        let decision = Decision {
            approve: true,
            by: self.by.clone(),
            reason: None,
            always,
        };
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let decided: HashSet<i64> = self
            .store
            .decide_many(&ids, &decision, self.now)?
            .into_iter()
            .collect();
        let mut grants = Vec::new();
        for row in rows.iter().filter(|r| decided.contains(&r.id)) {
            self.append("approval_approved", decision_fields(row, &decision))?;
            if always {
                grants.push(self.grant_row(row));
            }
        }
        // All grants in one durable transaction too.
        self.store.add_grants(&grants)?;
        self.sync_audit()?;
        Ok(decided)
    }

    /// `pending → denied`, audited. False when someone else decided it first.
    pub fn deny(&mut self, row: &ApprovalRow, reason: Option<&str>) -> Result<bool> {
        let decision = Decision {
            approve: false,
            by: self.by.clone(),
            reason: reason.map(str::to_string),
            always: false,
        };
        if !self.store.decide(row.id, &decision, self.now)? {
            return Ok(false);
        }
        self.record("approval_denied", decision_fields(row, &decision))?;
        Ok(true)
    }

    /// Run approved approvals now, under the run lock (waiting for it up to 30 s). `rows`:
    /// as this process last read them (only their ids and files are used: what runs is
    /// claimed and re-read from the file by the session).
    fn execute(&mut self, ctx: &Ctx, rows: &[&ApprovalRow], out: &mut Out) -> Result<u8> {
        let lock_path = self.cfg.state_dir.join(lock::LOCK_FILE);
        let lock = match lock::acquire_wait(&self.cfg.state_dir, self.now, LOCK_WAIT)
            .map_err(|e| Error::io(&lock_path, e))?
        {
            Ok(lock) => lock,
            Err(holder) => {
                eprintln!(
                    "heartbeat: approved, but another run still holds the run lock after {}s (pid {}, since {}); the approval stands and runs at the next run",
                    LOCK_WAIT.as_secs(),
                    holder.pid.map_or("?".into(), |p| p.to_string()),
                    holder.since.map_or("?".into(), super::show_local),
                );
                return Ok(exit::TASK_FAILED);
            }
        };
        let registry = Registry::from_config(&self.cfg);
        // The session takes its own handles; ours stay usable for the next decision.
        let store = Store::open(&self.cfg.state_dir)?;
        let audit = session::open_audit(&self.cfg)?;
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        // Each file once, in the order first seen.
        let mut files: Vec<&std::path::Path> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in rows {
            if seen.insert(r.file.as_str()) {
                files.push(std::path::Path::new(&r.file));
            }
        }
        let mut session = Session::begin(
            &lock,
            &self.cfg,
            &registry,
            store,
            audit,
            new_run_id(self.now),
            self.now,
            "approve",
            &files,
            self.cfg.autonomy.as_str(),
        )?;
        session.recover_interrupted()?;
        session.run_approved(Some(&ids))?;
        let (report, _, _) = session.finish()?;
        if report.tasks.is_empty() {
            out.line("nothing ran: another process ran it already");
        }
        report.print(false, true, &ctx.cwd, out);
        Ok(report.exit_code())
    }

    /// On a terminal: one pending approval at a time. `later` and `always` apply to every
    /// yes given here, as on the command line.
    fn walk(&mut self, ctx: &Ctx, out: &mut Out, later: bool, always: bool) -> Result<u8> {
        let pending = self.store.approvals(Some("pending"))?;
        if pending.is_empty() {
            out.line("no pending approvals");
            return Ok(exit::OK);
        }
        let mut code = exit::OK;
        let total = pending.len();
        'rows: for (n, row) in pending.iter().enumerate() {
            // It may have been decided elsewhere while we were asking about another one.
            let Some(row) = self.store.approval(row.id)? else {
                continue;
            };
            if row.state != "pending" {
                continue;
            }
            out.line("");
            out.line(&format!("[{}/{total}] {}", n + 1, describe(&row, ctx)));
            out.line(&format!("  queued {} ago", age(&row.created_at, self.now)));
            out.line("  input:");
            let pretty = serde_json::to_string_pretty(&row.input).unwrap_or_default();
            for line in pretty.lines() {
                out.line(&format!("    {}", clean(line)));
            }
            out.line(&format!("  task: {}", clean(&first_line(&row.text, 200))));
            loop {
                out.flush();
                let Some(answer) =
                    ask("[y] approve and run  [a] always  [n] deny  [s] skip  [q] quit: ")?
                else {
                    break 'rows;
                };
                match answer.trim().to_ascii_lowercase().chars().next() {
                    Some(c @ ('y' | 'a')) => {
                        if !self.approve(&row, always || c == 'a')? {
                            out.line("  decided by someone else meanwhile");
                        } else if later {
                            out.line(&format!("  approved #{}; it runs at the next run", row.id));
                        } else {
                            let c = self.execute(ctx, &[&row], out)?;
                            code = code.max(c);
                        }
                        break;
                    }
                    Some('n') => {
                        out.flush();
                        let reason = ask("  reason (optional): ")?.unwrap_or_default();
                        let reason = reason.trim();
                        let reason = (!reason.is_empty()).then_some(reason);
                        if self.deny(&row, reason)? {
                            out.line(&format!("  denied #{}", row.id));
                        } else {
                            out.line("  decided by someone else meanwhile");
                        }
                        break;
                    }
                    Some('s') => break,
                    Some('q') => break 'rows,
                    _ => out.line("  please answer y, a, n, s or q"),
                }
            }
        }
        Ok(code)
    }
}

/// The audit fields of `approval_approved` / `approval_denied`.
fn decision_fields(row: &ApprovalRow, d: &Decision) -> serde_json::Map<String, serde_json::Value> {
    fields([
        ("approval_id", json!(row.id)),
        ("task_id", json!(row.task_id)),
        ("by", json!(d.by)),
        ("always", json!(d.always)),
        ("reason", json!(d.reason)),
    ])
}

/// One line about an approval: id, tool, place, input.
pub(crate) fn describe(row: &ApprovalRow, ctx: &Ctx) -> String {
    format!(
        "#{} @{} {}:{}  {}",
        row.id,
        row.tool,
        show_path(row.file.as_ref(), &ctx.cwd),
        row.line,
        clean(&first_line(&row.input.to_string(), 100))
    )
}

/// How long ago an RFC 3339 time was, to the minute.
fn age(created_at: &str, now: DateTime<Utc>) -> String {
    let Some(t) = crate::store::parse_ts(created_at) else {
        return "?".into();
    };
    let secs = now.signed_duration_since(t).num_seconds().max(0) as u64;
    if secs < 60 {
        return format!("{secs}s");
    }
    humantime::format_duration(Duration::from_secs(secs / 60 * 60)).to_string()
}

/// Print a prompt and read one line; None at end of input.
fn ask(prompt: &str) -> Result<Option<String>> {
    let mut stdout = std::io::stdout();
    let _ = write!(stdout, "{prompt}");
    let _ = stdout.flush();
    let mut line = String::new();
    let n = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::io("<stdin>", e))?;
    Ok((n > 0).then_some(line))
}

fn confirm(prompt: &str) -> Result<bool> {
    Ok(ask(prompt)?
        .map(|a| matches!(a.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
        .unwrap_or(false))
}

/// Who is deciding: `$USER`, `$LOGNAME`, else the passwd entry of the real uid.
pub(crate) fn user_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(name) = std::env::var(var)
            && !name.is_empty()
        {
            return name;
        }
    }
    crate::sys::real_user_name()
}
