//! `heartbeat log [--since D|T] [--event NAME]… [--task ID] [--run ID] [-n N] [--all] [--json]
//! [-f]`: the audit log, filtered.
//!
//! Arguments → [`query::log_filter`] and [`Selection`] → [`AuditReader`] → [`LogView`] (or
//! the stored line, with `--json`) → stdout.
//!
//! Invariants:
//! - The log is read by [`AuditReader`] (a stream, one whole line at a time, memory bounded);
//!   what is shown is chosen by [`Selection`] (`-n N` keeps N lines; without `--all` or
//!   `--run`, human output leaves out runs that did nothing, keeping the stored order).
//! - `--json` prints the matching lines byte for byte as they are stored, in their order.
//! - Human output is one line per event ([`LogView`]; a success's output of several lines
//!   adds its first ones below it), every text from the log cleaned.
//! - `--event` names are checked against [`EventKind`], made from the event type itself.
//! - `-f` alone starts at the end of the log; with `--since` or `-n` it first shows what they
//!   select. It polls every [`POLL`] and reads on across rotations ([`AuditReader`]). It ends
//!   when stdout is gone, and on SIGINT or SIGTERM, which it catches itself (a shell may have
//!   started it with SIGINT ignored): what was shown is flushed, no half line is ever
//!   printed, and it then ends by that signal's default action, as if it had not caught it.
//! - Written through the shared [`Out`]: a failed write to stdout ends the command with that
//!   error, as for every command; a closed pipe ends it quietly.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value};
use signal_hook::consts::{SIGINT, SIGTERM};

use super::{Ctx, Out};
use crate::audit::EventKind;
use crate::audit::filter::Selection;
use crate::audit::reader::AuditReader;
use crate::cli::LogArgs;
use crate::engine::query::{self, LogQuery, read_error};
use crate::error::{Error, Result, exit};
use crate::render::log::LogView;
use crate::text::clean;

/// How often `-f` looks for new lines.
const POLL: Duration = Duration::from_millis(200);

pub(crate) fn run(ctx: &Ctx, args: &LogArgs) -> Result<u8> {
    let query = LogQuery {
        since: args.since.as_deref(),
        events: args.events.clone(),
        task: args.task.as_deref(),
        run: args.run.as_deref(),
    };
    let filter = query::log_filter(&query, ctx.now, || ctx.zone())?;
    let events: Vec<&str> = EventKind::names().collect();
    for name in &args.events {
        if name.parse::<EventKind>().is_err() {
            eprintln!("heartbeat: warning: {}", unknown_event_hint(name, &events));
        }
    }
    let cfg = ctx.load_config_to_read()?;

    let interrupt = if args.follow {
        Interrupt::catch().map_err(|e| Error::io("<signals>", e))?
    } else {
        Interrupt::default()
    };
    let view = LogView {
        tz: cfg.tz(),
        cwd: &ctx.cwd,
        secrets: crate::audit::Secrets::taken(),
    };
    // `--json` shows each line as it is stored.
    let show = |stored: &[u8], obj: &Map<String, Value>| {
        if args.json {
            String::from_utf8_lossy(stored).into_owned()
        } else {
            view.line(obj)
        }
    };
    // `-f` alone starts at the end, as `tail -f` does.
    let from_end = args.follow && args.since.is_none() && args.lines.is_none();
    let mut reader = if from_end {
        AuditReader::from_end(&cfg.audit_log).map_err(read_error)?
    } else {
        AuditReader::from_start(&cfg.audit_log, filter.since())
    };
    // Asking for one run, or for the stored lines, shows every run.
    let hide_quiet_runs = !args.all && !args.json && args.run.is_none();
    let mut selection = Selection::new(filter, hide_quiet_runs, args.lines);
    // Stored lines were redacted when written; redacted again here, they come out as stored
    // (redaction is idempotent) unless they hold a secret registered since.
    let mut out = ctx.out();
    loop {
        while let Some(line) = reader.next_line().map_err(read_error)? {
            selection.line(line, show, &mut |text| out.line(&text));
            if out.broken() {
                return Ok(exit::OK);
            }
            interrupt.end_if_caught(&mut out);
        }
        // At the end of what is there; an unfinished line is kept by the reader.
        if !args.follow {
            selection.end(&mut |text| out.line(&text));
            return Ok(exit::OK);
        }
        // From here on lines are shown as they come.
        selection.caught_up(&mut |text| out.line(&text));
        out.flush();
        if out.gone() {
            return Ok(exit::OK);
        }
        std::thread::sleep(POLL);
        interrupt.end_if_caught(&mut out);
        if out.gone() {
            return Ok(exit::OK);
        }
        reader.check_replaced().map_err(read_error)?;
    }
}

/// SIGINT and SIGTERM, caught while following: each sets its own flag, looked at between
/// lines and after every poll interval.
#[derive(Default)]
struct Interrupt {
    caught: Vec<(i32, Arc<AtomicBool>)>,
}

impl Interrupt {
    fn catch() -> io::Result<Interrupt> {
        let mut caught = Vec::new();
        for sig in [SIGINT, SIGTERM] {
            let flag = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(sig, flag.clone())?;
            caught.push((sig, flag));
        }
        Ok(Interrupt { caught })
    }

    /// When a signal came: flush what was shown and end by the signal's default action, so
    /// that whoever sent it sees the process killed by it (a shell then stops a loop).
    fn end_if_caught(&self, out: &mut Out) {
        if let Some((sig, _)) = self.caught.iter().find(|(_, f)| f.load(Ordering::Relaxed)) {
            out.flush();
            let _ = signal_hook::low_level::emulate_default_handler(*sig);
            // Only reached if the default action did not end the process.
            std::process::exit(128 + sig);
        }
    }
}

/// The warning for an `--event` heartbeat never writes (it is not an error: it matches
/// nothing), with the closest real name when there is one.
fn unknown_event_hint(name: &str, events: &[&str]) -> String {
    let closest = crate::text::did_you_mean(name, events);
    let name = clean(name);
    match closest {
        Some(e) => {
            format!("--event {name:?} is not an event heartbeat writes; did you mean {e}?")
        }
        None => format!(
            "--event {name:?} is not an event heartbeat writes; they are: {}",
            events.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_closest_event() {
        let events: Vec<&str> = EventKind::names().collect();
        let hint = |name| unknown_event_hint(name, &events);
        assert!(hint("task_succeded").contains("did you mean task_succeeded?"));
        assert!(hint("state_prund").contains("did you mean state_pruned?"));
        assert!(hint("zzzzzzzzzzzzzzzzz").contains("run_started"));
    }
}
