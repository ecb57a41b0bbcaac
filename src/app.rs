//! From the command line to a command: build the context, dispatch, report errors.

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command};
use crate::clock::Clock;
use crate::cmd::{self, Ctx};
use crate::error::{Error, WorkStarted, exit};

/// Run the command line; returns the exit code.
pub fn main() -> u8 {
    harden();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            print_clap_error(&e);
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    // What decides the exit code besides the command's own answer: whether work had
    // started when an error ended it, and whether standard output could be written.
    let work = WorkStarted::default();
    let output = cmd::OutputError::default();
    let code = match dispatch(cli, &work, &output) {
        Ok(code) => code,
        Err(e) => {
            crate::error::say(&format!("heartbeat: {e}"));
            work.failure_code()
        }
    };
    match output.take() {
        Some(e) => {
            crate::error::say(&format!("heartbeat: standard output: {e}"));
            code.max(work.failure_code())
        }
        None => code,
    }
}

/// Before anything is read: a tool or MCP server running as the same user must not read
/// heartbeat's memory or `/proc/<pid>/environ`, whether or not a secret is configured (the
/// environment holds the user's other variables, and a config read later may name one).
fn harden() {
    crate::sys::set_non_dumpable();
}

/// Clap's message in heartbeat's form (`heartbeat: invalid value …`, then clap's hint), with
/// each over-long line cut: a 100 KB "id" is not echoed back whole. Help and `--version`
/// are printed as clap renders them.
fn print_clap_error(e: &clap::Error) {
    const MAX_LINE: usize = 300;
    if !e.use_stderr() {
        let _ = e.print();
        return;
    }
    let text = e.to_string();
    let text = match text.strip_prefix("error: ") {
        Some(rest) => format!("heartbeat: {rest}"),
        None => text,
    };
    // An argument echoed back may hold a secret (`--reason 'token=…'`): redacted, then cut.
    let secrets = crate::audit::Secrets::taken();
    for line in text.lines() {
        crate::error::say_redacted(&secrets.redact(line).cut_chars(MAX_LINE));
    }
}

fn dispatch(cli: Cli, work: &WorkStarted, output: &cmd::OutputError) -> Result<u8, Error> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Usage(format!("cannot read the working directory: {e}")))?;
    // The one place the real clock is read; from here on, time runs on from it. A local
    // `--now` is read in the configured zone.
    let now = match cli.global.now {
        Some(when) if when.is_local() => when.instant(crate::cmd::configured_zone(
            cli.global.config.as_deref(),
            cli.global.state_dir.as_deref(),
            &cwd,
        )),
        Some(when) => when.instant(chrono_tz::Tz::UTC),
        None => chrono::Utc::now(),
    };
    let clock = Clock::starting_at(now);
    let ctx = Ctx {
        now: clock.start(),
        clock,
        cwd,
        config: cli.global.config,
        state_dir: cli.global.state_dir,
        verbose: cli.global.verbose,
        work: work.clone(),
        output: output.clone(),
    };
    match cli.command {
        Command::Run(args) => cmd::run::run(&ctx, &args),
        Command::Check(args) => cmd::check::run(&ctx, &args),
        Command::Status(args) => cmd::status::run(&ctx, &args),
        Command::Doctor(args) => cmd::doctor::run(&ctx, &args),
        Command::Approve(args) => cmd::approve::run(&ctx, &args),
        Command::Deny(args) => cmd::deny::run(&ctx, &args),
        Command::Approvals(args) => cmd::approvals::run(&ctx, &args),
        Command::Grants(args) => cmd::grants::list(&ctx, &args),
        Command::Revoke { task_id } => cmd::grants::revoke(&ctx, &task_id),
        Command::Daemon(args) => cmd::daemon::run(&ctx, &args),
        Command::Reset { task_id } => cmd::reset::run(&ctx, &task_id),
        Command::Snooze(args) => cmd::snooze::snooze(&ctx, &args),
        Command::Fleet(crate::cli::FleetCommand::Forget { node }) => {
            cmd::fleet::forget(&ctx, &node)
        }
        Command::Unsnooze { task_id } => cmd::snooze::unsnooze(&ctx, &task_id),
        Command::Pause(args) => cmd::pause::pause(&ctx, &args),
        Command::Resume => cmd::pause::resume(&ctx),
        Command::NotifyTest(args) => cmd::notify_test::notify_test(&ctx, args.channel.as_deref()),
        Command::TelegramChats(args) => cmd::telegram::chats(&ctx, &args),
        Command::McpTools(args) => cmd::mcp_tools::run(&ctx, &args),
        Command::Mcp => cmd::mcp::run(&ctx),
        Command::Log(args) => cmd::log::run(&ctx, &args),
        Command::Metrics => cmd::metrics::run(&ctx),
        Command::Init { dir } => cmd::init::run(&ctx, dir.as_deref()),
        Command::Man(args) => cmd::man::run(&ctx, &args),
        Command::Completions { shell } => {
            let mut out = std::io::stdout();
            clap_complete::generate(shell, &mut Cli::command(), "heartbeat", &mut out);
            Ok(exit::OK)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn heartbeat_is_non_dumpable_from_its_start() {
        super::harden();
        assert_eq!(nix::sys::prctl::get_dumpable().ok(), Some(false));
    }
}
