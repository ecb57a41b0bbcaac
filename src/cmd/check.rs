//! `heartbeat check`: validate the config and files; list every task with what would happen
//! now and when it is next due. Writes nothing.

use super::{Ctx, show_time};
use crate::cli::CheckArgs;
use crate::engine::query::{self, CheckReport};
use crate::error::{Result, exit};
use crate::plan::Decision;
use crate::render::show_path;

pub(crate) fn run(ctx: &Ctx, args: &CheckArgs) -> Result<u8> {
    let cfg = ctx.load_config(&args.files.files)?;
    let c = query::check(cfg, ctx.now, args.files.allow_missing)?;
    let report = c.report();
    let CheckReport {
        tasks,
        plan,
        problems,
        errors,
        ..
    } = &report;
    let (errors, cfg, files, snapshot) = (*errors, &c.cfg, &c.files, &c.snapshot);
    let mut out = ctx.out();
    if args.json {
        out.json(&report.json());
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
                let by = match c.provenance(task) {
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
