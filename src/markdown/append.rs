//! Appending one task to a HEARTBEAT.md, for `heartbeat mcp`'s `propose_task`
//! (docs/reference.md#heartbeat-mcp).
//!
//! Invariants:
//! - Nothing already in the file is changed, moved or removed: the new text goes at the end,
//!   in one `write` on a descriptor opened with `O_APPEND`, then `fsync`; proposers and
//!   ticks take turns ([`lock_open`]). A user's edit made
//!   meanwhile (an editor save, an `echo >>`) is never overwritten.
//! - The task's line and its proposal mark are one line of that one write, and the file's
//!   last byte is checked to be a line break just before it (one is written first when it is
//!   not): an edit racing the proposal can join the line to the person's last line, which
//!   then carries the mark, but can never leave the task without it.
//! - The appended text uses the file's own line ending (CRLF files stay CRLF).
//! - The task lands under the section and schedule heading asked for: when the end of the
//!   file is not already there, a section heading (and the schedule heading) is appended
//!   before the task. [`block`] checks this by parsing the result; it never guesses.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::model::{Section, Task};

/// The line ending of `text`: that of its first line break (`\r\n`, a lone `\r`, or `\n`),
/// `\n` when it has none.
pub(crate) fn line_ending(text: &str) -> &'static str {
    let b = text.as_bytes();
    match memchr::memchr2(b'\n', b'\r', b) {
        Some(i) if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') => "\r\n",
        Some(i) if b[i] == b'\r' => "\r",
        _ => "\n",
    }
}

/// Whether a text ending with this byte ends with a line break.
fn ends_line(last: Option<u8>) -> bool {
    matches!(last, None | Some(b'\n' | b'\r'))
}

/// The task as it would be in the file: the text to append to `text` so that `line` (one
/// `- [ ] …` line, without line break) is the last task, in `section` below `heading`, and
/// that task as the parser reads it. `Err` says why it cannot land there. The block starts
/// at a line start: [`append`] writes the line break the file may lack before it.
pub(crate) fn block(
    path: &Path,
    canonical: &Path,
    text: &str,
    section: Section,
    heading: Option<&str>,
    line: &str,
) -> Result<(String, Task), String> {
    let eol = line_ending(text);
    let sep = if ends_line(text.as_bytes().last().copied()) {
        ""
    } else {
        eol
    };
    let plain = format!("{line}{eol}");
    let mut headed = format!("{eol}## {}{eol}", section_heading(section));
    if let Some(h) = heading {
        headed.push_str(&format!("{eol}### {h}{eol}"));
    }
    headed.push_str(&format!("{eol}{line}{eol}"));
    for candidate in [plain, headed] {
        let whole = format!("{text}{sep}{candidate}");
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

/// How long a proposal waits for the file's lock (a tick or another proposal holds it for
/// a moment only).
pub(crate) const PROPOSAL_LOCK_WAIT: Duration = Duration::from_secs(10);

/// The file opened for appending, with an exclusive `flock` that other proposers (other
/// `heartbeat mcp` processes, other calls of this one) and ticks wait for: between reading
/// the end of the file and appending to it, no other proposal or tick lands. People's
/// editors take no such lock, and need not: an append never overwrites what they wrote.
pub(crate) fn lock(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().read(true).append(true).open(path)?;
    lock_open(&file, PROPOSAL_LOCK_WAIT)?;
    Ok(file)
}

/// The one lock of a HEARTBEAT.md's writers (proposals and ticks): an exclusive `flock` on
/// the open file, released when it is closed. Waits at most `wait` for another writer, then
/// fails (`WouldBlock`) rather than hold up a run.
pub(crate) fn lock_open(file: &File, wait: Duration) -> io::Result<()> {
    let start = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another writer (a proposal or a tick) held the file's lock for over {} ms",
                        wait.as_millis()
                    ),
                ));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Append `block` at the end of the file in one write, and make it durable. The file's last
/// byte is read just before: when it is not a line break (a person's edit since the file was
/// read), `eol` goes first, in the same write.
pub(crate) fn append(mut file: &File, block: &str, eol: &str) -> io::Result<()> {
    let len = file.metadata()?.len();
    let mut last = [0u8];
    let last = if len == 0 {
        None
    } else {
        file.read_exact_at(&mut last, len - 1)?;
        Some(last[0])
    };
    let whole = if ends_line(last) {
        block.to_string()
    } else {
        format!("{eol}{block}")
    };
    file.write_all(whole.as_bytes())?;
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
        let sep = if ends_line(text.as_bytes().last().copied()) {
            ""
        } else {
            "\n"
        };
        format!("{text}{sep}{block}")
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
    fn the_block_uses_the_files_own_line_ending() {
        let p = Path::new("/h.md");
        let text = "## Recurring\r\n- [ ] a\r\n";
        let (b, _) = block(p, p, text, Section::Recurring, None, "- [ ] x").unwrap();
        assert_eq!(b, "- [ ] x\r\n");
        let (b, _) = block(
            p,
            p,
            text,
            Section::OneTime,
            Some("At 2026-12-24"),
            "- [ ] x",
        )
        .unwrap();
        assert_eq!(
            b,
            "\r\n## One-time\r\n\r\n### At 2026-12-24\r\n\r\n- [ ] x\r\n"
        );
        assert_eq!(line_ending("a\rb\r\n"), "\r");
        assert_eq!(line_ending("a"), "\n");
    }

    /// A person's edit between reading the file and appending to it leaves no line break at
    /// its end: the append writes one first, so the proposal keeps a line (and its mark) of
    /// its own.
    #[test]
    fn the_last_byte_is_checked_at_the_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        for (eol, before) in [("\n", "## Recurring\n"), ("\r\n", "## Recurring\r\n")] {
            std::fs::write(&path, before).unwrap();
            let mark = super::super::parse::mark("agent");
            let line = format!("- [ ] @log {{}} {mark}");
            let (b, task) = block(&path, &path, before, Section::Recurring, None, &line).unwrap();
            let file = lock(&path).unwrap();
            // The person's edit: a last line without its line break.
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(b"- [ ] mine")
                .unwrap();
            append(&file, &b, eol).unwrap();
            let after = std::fs::read_to_string(&path).unwrap();
            assert_eq!(after, format!("{before}- [ ] mine{eol}{line}{eol}"));
            let parsed = super::super::parse(&path, &path, &after);
            assert_eq!(parsed.tasks[0].proposed_by, None);
            assert_eq!(parsed.tasks[1].id, task.id);
            assert_eq!(parsed.tasks[1].proposed_by.as_deref(), Some("mcp:agent"));
        }
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
