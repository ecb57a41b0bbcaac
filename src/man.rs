//! The man pages, generated from the clap definition (`crate::cli::Cli`) with clap_mangen:
//! one page for `heartbeat` and one per subcommand. `heartbeat man` prints and installs them;
//! the committed copies under `man/` are kept current by `tests/cli/man.rs`
//! (regenerate: `HEARTBEAT_UPDATE_MAN=1 cargo test --test cli man`).

use std::collections::BTreeMap;

use clap::CommandFactory;
use clap_mangen::Man;

use crate::cli::Cli;

const REGENERATE: &str = "HEARTBEAT_UPDATE_MAN=1 cargo test --test cli man";

/// Every page, by file name (`heartbeat.1`, `heartbeat-run.1`, …).
pub fn pages() -> BTreeMap<String, Vec<u8>> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    // The footer names the program and version on every page, not `init 0.1.0`.
    let source = format!("heartbeat {}", cmd.get_version().unwrap_or_default());
    let mut pages = BTreeMap::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let man = Man::new(sub.clone()).source(&source);
        let mut page = header();
        man.render(&mut page).expect("render a subcommand page");
        pages.insert(man.get_filename(), page);
    }
    let man = Man::new(cmd);
    pages.insert(man.get_filename(), main_page(&man));
    pages
}

fn header() -> Vec<u8> {
    format!(".\\\" Generated from the clap definition in src/cli.rs by src/man.rs; do not edit. Regenerate: {REGENERATE}\n")
        .into_bytes()
}

/// `heartbeat.1`: what clap_mangen renders (name, synopsis, options, the subcommand list),
/// with sections clap does not know about before VERSION.
fn main_page(man: &Man) -> Vec<u8> {
    let mut page = header();
    let w: &mut Vec<u8> = &mut page;
    man.render_title(w).unwrap();
    man.render_name_section(w).unwrap();
    man.render_synopsis_section(w).unwrap();
    man.render_description_section(w).unwrap();
    man.render_options_section(w).unwrap();
    man.render_subcommands_section(w).unwrap();
    w.extend_from_slice(MAIN_EXTRA.as_bytes());
    man.render_version_section(w).unwrap();
    page
}

const MAIN_EXTRA: &str = r#".SH "HOW IT WORKS"
heartbeat works through the check\-list in HEARTBEAT.md.
Items under \fB## Recurring\fR and \fB## One\-time\fR are tasks; a task that starts with
\fB@tool {json}\fR calls a tool, any other is a reminder.
A level\-3 heading sets a schedule for the tasks below it
(\fBEvery 6h\fR, \fBWeekdays at 09:00\fR, \fBAt 2026\-12\-24 18:00\fR).
Each run checks the active hours, runs what policy allows, queues risky work for approval
(\fBheartbeat approve\fR, or Telegram buttons), appends one JSON line per event to the
audit log and ticks one\-time tasks \fB[x]\fR after they succeed.
Start with \fBheartbeat init\fR, which writes a commented HEARTBEAT.md and heartbeat.toml.
.SH "EXIT STATUS"
.TP
\fB0\fR
Done; nothing failed (also when the run was skipped outside active hours, while paused, or
because another run holds the lock).
.TP
\fB1\fR
At least one task failed or was invalid.
.TP
\fB2\fR
Usage error, invalid config, unreadable or invalid HEARTBEAT.md: nothing was run.
.SH ENVIRONMENT
.TP
\fBHEARTBEAT_CONFIG\fR
The config file, when \fB\-\-config\fR is not given.
.TP
\fBHEARTBEAT_NOW\fR
Act as if it were this time (RFC 3339), like \fB\-\-now\fR.
.TP
\fBTZ\fR
The time zone when the config sets no \fBtimezone\fR.
.TP
\fBHEARTBEAT_TELEGRAM_TOKEN\fR
The Telegram bot token (the variable named by \fBtelegram.bot_token_env\fR); it is removed
from every tool's environment.
.SH FILES
.TP
\fIHEARTBEAT.md\fR
The check\-list, in the working directory unless the config's \fBfiles\fR say otherwise.
.TP
\fIheartbeat.toml\fR
The config, found beside the first HEARTBEAT.md; else \fI~/.config/heartbeat/config.toml\fR.
.TP
\fI~/.local/share/heartbeat/\fR
The state directory (\fBstate_dir\fR): \fIheartbeat.db\fR (approvals, history, outbox),
\fIaudit.jsonl\fR (the audit log) and \fIheartbeat.lock\fR (who holds the run lock, a flock on the directory).
.SH EXAMPLES
.TP
\fBheartbeat init ~/notes && cd ~/notes && heartbeat check\fR
Start a check\-list and see what each task would do now.
.TP
\fB*/5 * * * * cd ~/notes && heartbeat run \-\-once \-q\fR
A crontab line: run every five minutes; print (and so mail) only failures.
.TP
\fBheartbeat approvals\fR, \fBheartbeat approve 3\fR, \fBheartbeat deny 4 \-\-reason "not now"\fR
See what waits for approval; run one; refuse another.
.TP
\fBheartbeat check \-\-now 2026\-10\-25T02:30:00+02:00\fR
What would happen at that time.
"#;
