//! `heartbeat grants` / `heartbeat revoke TASK_ID`: the always-grants, tasks that run without
//! asking because a person approved them with *always*.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Ctx, Out};
use crate::audit::Event;
use crate::audit::Secrets;
use crate::cli::JsonArg;
use crate::config::Config;
use crate::engine::files::{Loaded, read_files};
use crate::error::{Error, Result, exit};
use crate::model::{Problem, Severity};
use crate::store::GrantRow;

/// Whether a grant no longer matches a task: an edited task has a new id, so its grant is
/// left behind silently unless someone says so. Judged for the grants of the files read
/// (and of files that are gone); a grant of a file this command did not read (`check
/// --file` of another one) is not judged.
fn is_orphaned(g: &GrantRow, files: &[Loaded], ids: &HashSet<&str>) -> bool {
    let file = Path::new(&g.file);
    let read = files.iter().any(|f| f.source.path == file);
    (read || !file.exists()) && !ids.contains(g.task_id.as_str())
}

/// The task ids of the files read.
fn task_ids(files: &[Loaded]) -> HashSet<&str> {
    files
        .iter()
        .flat_map(|f| &f.parsed.tasks)
        .map(|t| t.id.as_str())
        .collect()
}

/// The grants of the state dir that no longer match a task of `files`.
pub(super) fn orphaned(cfg: &Config, files: &[Loaded]) -> Result<Vec<GrantRow>> {
    let Some(store) = crate::store::open_existing(cfg)? else {
        return Ok(Vec::new());
    };
    let ids = task_ids(files);
    Ok(store
        .grants()?
        .into_iter()
        .filter(|g| is_orphaned(g, files, &ids))
        .collect())
}

/// What `check`, `status` and `run` say about a grant left behind.
pub(super) fn orphan_message(g: &GrantRow) -> String {
    format!(
        "the grant for @{} (task {}) no longer matches a task: the task was edited or \
         removed, so it asks again; approve it with --always to grant it again, or `heartbeat \
         revoke {}`",
        g.tool, g.task_id, g.task_id
    )
}

/// The orphaned grants as warnings, at the line the task had.
pub(super) fn orphan_problems(cfg: &Config, files: &[Loaded]) -> Result<Vec<Problem>> {
    Ok(orphaned(cfg, files)?
        .iter()
        .map(|g| Problem {
            file: PathBuf::from(&g.file),
            line: g.line.map_or(0, |l| l as usize),
            column: 0,
            severity: Severity::Warning,
            message: orphan_message(g),
        })
        .collect())
}

pub fn list(ctx: &Ctx, args: &JsonArg) -> Result<u8> {
    let cfg = ctx.load_config_to_read()?;
    let grants = match crate::store::open_existing(&cfg)? {
        Some(store) => store.grants()?,
        None => Vec::new(),
    };
    // A file that cannot be read leaves its grants unjudged, as `check` would fail on it.
    let files = if grants.is_empty() {
        Vec::new()
    } else {
        read_files(&cfg, true).unwrap_or_default()
    };
    let ids = task_ids(&files);
    let mut out = Out::new();
    if args.json {
        let list: Vec<Value> = grants
            .iter()
            .map(|g| {
                json!({
                    "task_id": g.task_id,
                    "file": g.file,
                    "line": g.line,
                    "tool": g.tool,
                    "granted_at": g.created_at,
                    "granted_by": g.created_by,
                    "orphaned": is_orphaned(g, &files, &ids),
                    "input": g.input,
                    "text": g.text,
                    "created_at": g.created_at,
                    "created_by": g.created_by,
                    "approval_id": g.approval_id,
                })
            })
            .collect();
        out.json(&Value::Array(list));
        return Ok(exit::OK);
    }
    if grants.is_empty() {
        out.line("no grants");
    }
    for g in &grants {
        let place = match g.line {
            Some(line) => format!(
                "{}:{line}",
                crate::render::show_path(Path::new(&g.file), &ctx.cwd)
            ),
            None => crate::render::show_path(Path::new(&g.file), &ctx.cwd),
        };
        let orphaned = if is_orphaned(g, &files, &ids) {
            " ORPHANED: no task matches it any more (edited or removed)"
        } else {
            ""
        };
        out.line(&format!(
            "{}  @{:<12} {place}  {}  (by {} at {}){orphaned}",
            g.task_id,
            g.tool,
            Secrets::taken().redact(&g.input.to_string()).first_line(80),
            g.created_by,
            g.created_at
        ));
    }
    Ok(exit::OK)
}

pub fn revoke(ctx: &Ctx, task_id: &str) -> Result<u8> {
    let mut d = super::approve::decider(ctx)?;
    let granted: Vec<String> = d.store.grants()?.into_iter().map(|g| g.task_id).collect();
    let task_id = super::resolve_task_id(task_id, &granted, "`heartbeat grants` and `check`")?;
    if !d.store.revoke(&task_id)? {
        return Err(Error::Usage(format!(
            "no grant for task {task_id} (see `heartbeat grants`)"
        )));
    }
    let by = d.by.clone();
    d.record(&Event::GrantRevoked {
        task_id: &task_id,
        by: &by,
    })?;
    Out::new().line(&format!(
        "revoked the grant of task {task_id}; it asks again"
    ));
    Ok(exit::OK)
}
