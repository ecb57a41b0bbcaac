//! `heartbeat check`: validate the config and files; list every task with what would happen
//! now and when it is next due. Writes nothing.

use serde_json::{Value, json};

use super::{Ctx, Out, show_time};
use crate::cli::CheckArgs;
use crate::config::Config;
use crate::engine::files::{Loaded, all_tasks, read_files, read_snapshot};
use crate::engine::mcp::{Servers, named_servers};
use crate::error::{Result, exit};
use crate::mcp::{Catalog, Listing};
use crate::model::{Problem, Severity, Task};
use crate::plan::{self, Decision, Plan, PlanInput};
use crate::render::show_path;
use crate::store::Snapshot;
use crate::tools::Registry;

/// What `check` finds: every task with its decision, and the problems.
pub(super) struct Checked {
    pub cfg: Config,
    pub files: Vec<Loaded>,
    pub plan: Plan,
    pub snapshot: Snapshot,
    pub problems: Vec<Problem>,
    pub errors: usize,
}

/// Validate the config's files as `check` does, at `ctx.now`.
pub(super) fn evaluate(ctx: &Ctx, cfg: Config, allow_missing: bool) -> Result<Checked> {
    let files = read_files(&cfg, allow_missing)?;
    // In file order: each file's tasks are the next `f.parsed.tasks.len()` of them.
    let tasks = all_tasks(&files);
    let registry = Registry::from_config(&cfg).with_catalog(&list_mcp_servers(&cfg, &tasks));
    let snapshot = read_snapshot(&cfg, ctx.now)?;
    let plan = plan::plan(
        &tasks,
        &PlanInput {
            config: &cfg,
            registry: &registry,
            state: &snapshot,
            now: ctx.now,
            force: false,
            autonomy: cfg.autonomy,
        },
    );

    let mut problems: Vec<Problem> = super::file_warnings(&files);
    problems.extend(super::grants::orphan_problems(&cfg, &files)?);
    // The config's own warnings (a file named twice, a glob that matches nothing), by the
    // config file (or `--file`) they come from.
    for warning in &cfg.warnings {
        let config = cfg.source.as_ref().map(|p| format!("{}: ", p.display()));
        let (file, message) = match warning.strip_prefix("--file: ") {
            Some(rest) => ("--file".into(), rest),
            None => match config.as_deref().and_then(|c| warning.strip_prefix(c)) {
                Some(rest) => (cfg.source.clone().unwrap_or_default(), rest),
                None => (cfg.source.clone().unwrap_or_default(), warning.as_str()),
            },
        };
        problems.push(Problem {
            message: message.to_string(),
            file,
            line: 0,
            column: 0,
            severity: Severity::Warning,
        });
    }
    for (task, planned) in tasks.iter().zip(&plan.items) {
        if let Decision::Invalid {
            line,
            column,
            error,
        } = &planned.decision
        {
            problems.push(Problem {
                file: task.file.to_path_buf(),
                line: *line,
                column: *column,
                severity: Severity::Error,
                message: error.clone(),
            });
        }
    }
    // Secrets too short to be looked for inside other text: said, since they are not hidden.
    for name in crate::audit::short_secrets(&cfg) {
        problems.push(Problem {
            file: cfg.source.clone().unwrap_or_default(),
            line: 0,
            column: 0,
            severity: Severity::Warning,
            message: format!(
                "the value of ${name} is shorter than {} characters: it is kept out of tools' \
                 environments, but it is not hidden inside other text (audit lines, messages, \
                 output), where it would cut out every ordinary occurrence; a secret needs a \
                 longer value",
                crate::redact::MIN_SECRET
            ),
        });
    }
    if snapshot.future_times > 0 {
        // Not a file's problem: it is named by the database that holds the times.
        problems.push(Problem {
            file: cfg.state_dir.join(crate::store::DB_FILE),
            line: 0,
            column: 0,
            severity: Severity::Warning,
            message: format!(
                "{} stored attempt time(s) are later than now ({}); they count as now (a \
                 clock that stepped back, or a run with a future --now) and the next run \
                 stores them as now",
                snapshot.future_times,
                crate::audit::format_ts(ctx.now)
            ),
        });
    }
    super::sort_problems(&mut problems);
    let errors = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    drop(tasks);
    Ok(Checked {
        cfg,
        files,
        plan,
        snapshot,
        problems,
        errors,
    })
}

/// What `heartbeat mcp` shows instead of the text of a task whose input does not parse.
const INVALID_TEXT: &str = "(not shown: its input does not parse; see problems)";

impl Checked {
    /// Every task of every file, in file order: the plan's items belong to them in order.
    pub(super) fn tasks(&self) -> Vec<&Task> {
        all_tasks(&self.files)
    }

    /// The `check` tool of `heartbeat mcp`: `check --json`, with a task whose input does not
    /// parse shown by its place and error only: its source may hold a secret that redaction
    /// cannot find (a password in single quotes), and the answer leaves the person's machine.
    pub(super) fn agent_json(&self) -> Value {
        let mut json = self.json();
        if let Some(shown) = json["tasks"].as_array_mut() {
            for (task, shown) in self.tasks().into_iter().zip(shown) {
                if matches!(task.body, crate::model::Body::Invalid { .. }) {
                    shown["text"] = Value::from(INVALID_TEXT);
                }
            }
        }
        json
    }

    /// `check --json`.
    pub(super) fn json(&self) -> Value {
        let tasks_json: Vec<Value> = self
            .tasks()
            .into_iter()
            .zip(&self.plan.items)
            .map(|(task, planned)| {
                json!({
                    "task_id": task.id,
                    "file": &*task.file,
                    "line": task.line,
                    "section": task.section.as_str(),
                    "text": task.text,
                    "tool": planned.tool.as_deref().or_else(|| task.tool_name()),
                    "input": planned.input,
                    "schedule": task.schedule.as_ref().and(task.heading.as_deref()),
                    "heading": task.heading.as_deref(),
                    "done": task.done,
                    "decision": planned.decision.as_str(),
                    "reason": match &planned.decision {
                        Decision::Skip(r) => Some(r.as_str()),
                        _ => None,
                    },
                    "approval_id": match planned.decision {
                        Decision::Pending(id) | Decision::Approved(id) => Some(id),
                        _ => None,
                    },
                    "next_due": planned.next_due.map(crate::audit::format_ts),
                    "provenance": provenance(task, &self.snapshot).unwrap_or("file"),
                })
            })
            .collect();
        json!({
            "files": self.files.iter().map(|f| &f.source.path).collect::<Vec<_>>(),
            "config": self.cfg.source,
            "active": self.plan.active,
            "next_active": self.plan.next_active.map(crate::audit::format_ts),
            "tasks": tasks_json,
            "problems": self.problems.iter().map(|p| json!({
                "file": p.file,
                "line": p.line,
                "column": p.column,
                "severity": p.severity,
                "message": p.message,
            })).collect::<Vec<_>>(),
        })
    }
}

pub fn run(ctx: &Ctx, args: &CheckArgs) -> Result<u8> {
    let cfg = ctx.load_config(&args.files.files)?;
    let c = evaluate(ctx, cfg, args.files.allow_missing)?;
    let tasks = c.tasks();
    let Checked {
        cfg,
        files,
        plan,
        snapshot,
        problems,
        errors,
    } = &c;
    let (errors, cfg) = (*errors, cfg);
    let mut out = Out::new();
    if args.json {
        out.json(&c.json());
    } else {
        out.line(&format!(
            "config: {}",
            cfg.source
                .as_ref()
                .map_or("none (defaults)".into(), |p| p.display().to_string())
        ));
        // Paused and outside active hours are two reasons, each said when it holds.
        if snapshot.paused {
            out.line("paused now: runs are skipped until `heartbeat resume` (or the pause's end)");
        }
        if !cfg.active.is_active(ctx.now) {
            out.line(&format!(
                "outside active hours now; next active {}",
                plan.next_active
                    .map_or("never".into(), |t| show_time(t, cfg))
            ));
        }
        let mut listed = tasks.iter().zip(&plan.items);
        for f in files {
            out.line(&format!("{}:", show_path(&f.source.path, &ctx.cwd)));
            let count = f.parsed.tasks.len();
            for (task, planned) in listed.by_ref().take(count) {
                let due = match planned.next_due {
                    Some(t) if t > ctx.now => format!("  (next due {})", show_time(t, cfg)),
                    _ => String::new(),
                };
                let decision = match &planned.decision {
                    Decision::Pending(id) => format!("pending #{id}"),
                    Decision::Approved(id) => format!("approved #{id}"),
                    d => d.as_str().to_string(),
                };
                let by = match provenance(task, snapshot) {
                    Some(by) => format!("  (proposed by {by})"),
                    None => String::new(),
                };
                out.line(&format!(
                    "  {:>4}  {}  {decision:<11} {}{due}{by}",
                    task.line,
                    task.id,
                    crate::audit::Secrets::taken()
                        .redact(&task.text)
                        .first_line(80)
                ));
            }
            if count == 0 {
                out.line("  (no tasks)");
            }
        }
        for p in problems {
            out.line(&super::show_problem(p, &ctx.cwd));
        }
        let warnings = problems.len() - errors;
        out.line(&format!(
            "{} task(s), {errors} error(s), {warnings} warning(s)",
            tasks.len()
        ));
    }
    drop(out);
    Ok(if errors > 0 {
        exit::TASK_FAILED
    } else {
        exit::OK
    })
}

/// Every MCP server that an open task names, started and asked for its tools now (check
/// writes nothing: the run's cache is left alone). A server that cannot be listed makes its
/// tasks invalid, with the reason.
pub(super) fn list_mcp_servers(
    cfg: &crate::config::Config,
    tasks: &[&crate::model::Task],
) -> Catalog {
    let mut catalog = Catalog::new();
    if cfg.mcp.is_empty() {
        return catalog;
    }
    crate::audit::Secrets::from_config(cfg);
    let named = named_servers(
        cfg,
        tasks
            .iter()
            .filter(|t| !t.done && t.section != crate::model::Section::Other)
            .filter_map(|t| Some((t.tool_name()?, &*t.file))),
    );
    let mut servers = Servers::new(cfg);
    for (server, workdir) in named {
        let listing = match servers.list(&server, workdir) {
            Ok(tools) => Listing::Tools(tools),
            Err(why) => Listing::Unavailable(why),
        };
        catalog.insert(server, listing);
    }
    catalog
}

/// Who proposed a task: its mark in the file, or the store for a task proposed before
/// marks were written. None for a person's own task.
fn provenance<'a>(task: &'a Task, snapshot: &'a Snapshot) -> Option<&'a str> {
    task.proposed_by
        .as_deref()
        .or_else(|| snapshot.proposed_by.get(&task.id).map(String::as_str))
}

/// What `check` decides for one task (a task about to be proposed), with the file's other
/// tasks left out.
pub(super) fn decide_one(ctx: &Ctx, cfg: &Config, task: &Task) -> Result<Decision> {
    let tasks = &[task];
    let registry = Registry::from_config(cfg).with_catalog(&list_mcp_servers(cfg, tasks));
    let snapshot = read_snapshot(cfg, ctx.now)?;
    let plan = plan::plan(
        tasks,
        &PlanInput {
            config: cfg,
            registry: &registry,
            state: &snapshot,
            now: ctx.now,
            force: false,
            autonomy: cfg.autonomy,
        },
    );
    Ok(plan
        .items
        .into_iter()
        .next()
        .map_or(Decision::Ignored, |p| p.decision))
}
