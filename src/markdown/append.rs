//! Appending one task to a HEARTBEAT.md, for `heartbeat mcp`'s `propose_task` (SPEC §13).
//!
//! Invariants:
//! - Nothing already in the file is changed, moved or removed: the new text goes at the end,
//!   in one `write` on a descriptor opened with `O_APPEND`, then `fsync`; proposers take
//!   turns ([`lock`]). A user's edit made
//!   meanwhile (an editor save, an `echo >>`) is never overwritten.
//! - The task lands under the section and schedule heading asked for: when the end of the
//!   file is not already there, a section heading (and the schedule heading) is appended
//!   before the task. [`block`] checks this by parsing the result; it never guesses.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::model::{Section, Task};

/// The task as it would be in the file: the text to append to `text` so that `line` (one
/// `- [ ] …` line, without newline) is the last task, in `section` below `heading`, and that
/// task as the parser reads it. `Err` says why it cannot land there.
pub fn block(
    path: &Path,
    canonical: &Path,
    text: &str,
    section: Section,
    heading: Option<&str>,
    line: &str,
) -> Result<(String, Task), String> {
    let sep = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    let plain = format!("{sep}{line}\n");
    let mut headed = format!("{sep}\n## {}\n", section_heading(section));
    if let Some(h) = heading {
        headed.push_str(&format!("\n### {h}\n"));
    }
    headed.push_str(&format!("\n{line}\n"));
    for candidate in [plain, headed] {
        let whole = format!("{text}{candidate}");
        let parsed = super::parse(path, canonical, &whole);
        let Some(task) = parsed.tasks.last() else {
            continue;
        };
        let at_end = whole[task.marker.start..].lines().count() == 1;
        if at_end && task.section == section && task.heading.as_deref() == heading {
            // A task that `check` would warn about (a tool call hidden by markup) is not
            // added: every run would repeat the warning.
            if let Some(p) = parsed
                .problems
                .iter()
                .find(|p| p.line > text.lines().count())
            {
                return Err(p.message.clone());
            }
            return Ok((candidate, task.clone()));
        }
    }
    Err(
        "the end of the file does not take a task (an unclosed code block or quote?): \
         close it first"
            .into(),
    )
}

fn section_heading(section: Section) -> &'static str {
    match section {
        Section::OneTime => "One-time",
        _ => "Recurring",
    }
}

/// The file opened for appending, with an exclusive `flock` that other proposers (other
/// `heartbeat mcp` processes, other calls of this one) wait for: between reading the end of
/// the file and appending to it, no other proposal lands. People's editors take no such
/// lock, and need not: an append never overwrites what they wrote.
pub fn lock(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().append(true).open(path)?;
    file.lock()?;
    Ok(file)
}

/// Append `block` at the end of the file in one write, and make it durable.
pub fn append(mut file: &File, block: &str) -> io::Result<()> {
    file.write_all(block.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn land(text: &str, section: Section, heading: Option<&str>) -> String {
        let p = Path::new("/h.md");
        let (block, task) =
            block(p, p, text, section, heading, "- [ ] @log {\"text\": \"x\"}").expect("lands");
        assert_eq!(task.section, section);
        assert_eq!(task.heading.as_deref(), heading);
        format!("{text}{block}")
    }

    #[test]
    fn a_task_joins_the_section_it_ends_in_or_starts_its_own() {
        let text = "# Notes\n\n## Recurring\n\n- [ ] water plants\n";
        assert_eq!(
            land(text, Section::Recurring, None),
            format!("{text}- [ ] @log {{\"text\": \"x\"}}\n")
        );
        // Below a schedule heading it would inherit that schedule: a new section instead.
        let text = "## Recurring\n### Every 6h\n- [ ] a";
        let out = land(text, Section::Recurring, None);
        assert!(out.starts_with(text), "nothing changes: {out}");
        assert!(out.ends_with("\n\n## Recurring\n\n- [ ] @log {\"text\": \"x\"}\n"));
        let out = land(text, Section::Recurring, Some("Every 6h"));
        assert_eq!(out, format!("{text}\n- [ ] @log {{\"text\": \"x\"}}\n"));
        let out = land("", Section::OneTime, Some("At 2026-12-24 18:00"));
        assert!(
            out.contains("## One-time\n\n### At 2026-12-24 18:00\n"),
            "{out}"
        );
    }

    #[test]
    fn an_unclosed_fence_refuses() {
        let p = Path::new("/h.md");
        let text = "## Recurring\n```\n";
        assert!(block(p, p, text, Section::Recurring, None, "- [ ] a").is_err());
    }

    #[test]
    fn a_task_check_would_warn_about_is_refused_with_the_warning() {
        let p = Path::new("/h.md");
        // The file's own warnings are not the new task's.
        let text = "## Recurring\n- []\n";
        let line = "- [ ] `@log {\"text\": \"x\"}`";
        let refused = block(p, p, text, Section::Recurring, None, line).unwrap_err();
        assert!(
            refused.starts_with("task \"@log\" is a reminder, not a tool call"),
            "{refused}"
        );
        assert!(block(p, p, text, Section::Recurring, None, "- [ ] water plants").is_ok());
    }
}
