//! `heartbeat daemon`: the arguments, and what the daemon tells on stderr (and, with `-v`,
//! each tick's report on stdout). The loop itself, its signals, reloads and Telegram polling
//! are in `engine/daemon.rs`.

use std::cell::RefCell;

use super::{Ctx, show_problem};
use crate::cli::DaemonArgs;
use crate::config::Config;
use crate::engine::daemon::{self, Host, Notice, Options};
use crate::error::{Result, exit, say};
use crate::model::Problem;

pub(crate) fn run(ctx: &Ctx, args: &DaemonArgs) -> Result<u8> {
    let host = Terminal {
        ctx,
        args,
        printed: RefCell::new(None),
    };
    let opts = Options {
        now: ctx.now,
        every: args.every,
    };
    daemon::run(&host, &opts, &ctx.work)?;
    Ok(exit::OK)
}

/// The daemon's front end: stderr, and stdout at `-v`.
struct Terminal<'a> {
    ctx: &'a Ctx,
    args: &'a DaemonArgs,
    /// The warnings printed last: the files are read again at every tick, and their warnings
    /// are printed only when they differ from these (so at the first tick, and after an
    /// edit).
    printed: RefCell<Option<Vec<Problem>>>,
}

impl Host for Terminal<'_> {
    fn load_config(&self) -> Result<Config> {
        self.ctx.load_config(&self.args.files.files)
    }

    fn notice(&self, notice: Notice) {
        match notice {
            Notice::Started { pid, every } => say(&format!(
                "heartbeat: daemon started (pid {pid}, every {})",
                humantime::format_duration(every)
            )),
            Notice::ConfigKept {
                error,
                signal: false,
            } => say(&format!("heartbeat: {error}; keeping the last good config")),
            Notice::ConfigKept {
                error,
                signal: true,
            } => say(&format!("heartbeat: {error}; keeping the old config")),
            Notice::ConfigReloaded => say("heartbeat: config reloaded"),
            Notice::Warnings(warnings) => {
                let mut printed = self.printed.borrow_mut();
                if printed.as_ref() != Some(&warnings) {
                    for w in &warnings {
                        say(&format!("heartbeat: {}", show_problem(w, &self.ctx.cwd)));
                    }
                    *printed = Some(warnings);
                }
            }
            Notice::Ticked(report) => {
                if self.ctx.verbose > 0 {
                    let mut out = self.ctx.out();
                    out.lines(crate::render::terminal::agent_actions(report));
                    out.lines(crate::render::terminal::report(
                        report,
                        false,
                        false,
                        &self.ctx.cwd,
                    ));
                }
            }
            Notice::TickFailed(e) => say(&format!("heartbeat: tick failed: {e}")),
            Notice::NotTold(e) => say(&format!("heartbeat: {e}")),
            Notice::Stopped => say("heartbeat: daemon stopped"),
        }
    }

    fn diag(&self, message: String) {
        self.ctx.diag(1, || message);
    }
}
