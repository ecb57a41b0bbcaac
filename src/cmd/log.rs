//! `heartbeat log [--since D|T] [--event NAME]… [--task ID] [--run ID] [-n N] [--all] [--json]
//! [-f]`: the audit log, filtered.
//!
//! Invariants:
//! - The log is read by [`AuditReader`] (a stream, one whole line at a time, memory bounded);
//!   `-n N` keeps N lines; lines held behind an unfinished run are capped at [`HELD_MAX`].
//! - Only lines that parse as JSON objects are shown; a torn line followed by a whole one
//!   shows the whole one ([`parse_line`]).
//! - `--json` prints the matching lines byte for byte as they are stored, in their order.
//! - Human output is one line per event, every text from the log passed through [`clean`];
//!   without `--all` (or `--run`) it leaves out runs that did nothing ([`QuietRuns`]), and
//!   keeps the stored order of what it shows.
//! - `--event` names are checked against [`Event::names`], made from the event type itself.
//! - `-f` alone starts at the end of the log; with `--since` or `-n` it first shows what they
//!   select. It polls every [`POLL`] and reads on across rotations ([`AuditReader`]). It ends
//!   when stdout is gone, and on SIGINT or SIGTERM, which it catches itself (a shell may have
//!   started it with SIGINT ignored): what was shown is flushed, no half line is ever
//!   printed, and it then ends by that signal's default action, as if it had not caught it.
//! - A failed write to stdout ends the command with that error; a closed pipe ends it quietly.

use std::collections::VecDeque;
use std::io::{self, BufWriter, StdoutLock, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};
use signal_hook::consts::{SIGINT, SIGTERM};

use super::Ctx;
use crate::audit::Event;
use crate::audit::reader::{AuditReader, LINE_START, ReadError, parse_line};
use crate::cli::LogArgs;
use crate::clock::{SINCE_FORMS, Since, TIME_FORMS};
use crate::config::Config;
use crate::error::{Error, Result, exit};
use crate::render::log::LogView;
use crate::store::parse_ts;
use crate::text::clean;

/// How often `-f` looks for new lines.
const POLL: Duration = Duration::from_millis(200);

pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<u8> {
    let filter = Filter::new(ctx, args)?;
    let events: Vec<String> = Event::names().collect();
    for name in &args.events {
        if !events.contains(name) {
            eprintln!("heartbeat: warning: {}", unknown_event_hint(name, &events));
        }
    }
    let cfg = ctx.load_config_to_read()?;

    let interrupt = if args.follow {
        Interrupt::catch().map_err(|e| Error::io("<signals>", e))?
    } else {
        Interrupt::default()
    };
    let mut show = Show {
        json: args.json,
        view: LogView {
            tz: cfg.tz(),
            cwd: &ctx.cwd,
            secrets: crate::audit::Secrets::taken(),
        },
        filter: &filter,
        // Asking for one run, or for the stored lines, shows every run.
        quiet: (!args.all && !args.json && args.run.is_none()).then(QuietRuns::default),
        last: args.lines.map(|n| (n, VecDeque::new())),
        out: Sink::new(),
    };
    // `-f` alone starts at the end, as `tail -f` does.
    let from_end = args.follow && args.since.is_none() && args.lines.is_none();
    let mut reader = if from_end {
        AuditReader::from_end(&cfg.audit_log).map_err(read_error)?
    } else {
        AuditReader::from_start(&cfg.audit_log, filter.since)
    };
    loop {
        while let Some(line) = reader.next_line().map_err(read_error)? {
            show.line(line);
            if show.out.broken {
                return show.out.end();
            }
            interrupt.end_if_caught(&mut show.out);
        }
        // At the end of what is there; an unfinished line is kept by the reader.
        if !args.follow {
            show.finish();
            return show.out.end();
        }
        // What `-n` kept is shown (once); from here on lines are shown as they come.
        show.last_lines();
        show.waited();
        show.out.flush();
        if show.out.gone() {
            return show.out.end();
        }
        std::thread::sleep(POLL);
        interrupt.end_if_caught(&mut show.out);
        if show.out.gone() {
            return show.out.end();
        }
        reader.check_replaced().map_err(read_error)?;
    }
}

/// A failed read of one of the log's files, as the command's error.
fn read_error(e: ReadError) -> Error {
    Error::io(e.path, e.source)
}

/// The log's lines that `args` selects (as `log --json` would print them, parsed), the last
/// `limit` of them (also the `log` tool of `heartbeat mcp`).
pub(super) fn matching(
    ctx: &Ctx,
    cfg: &Config,
    args: &LogArgs,
    limit: usize,
) -> Result<Vec<Map<String, Value>>> {
    let filter = Filter::new(ctx, args)?;
    let mut found = VecDeque::new();
    let mut reader = AuditReader::from_start(&cfg.audit_log, filter.since);
    while let Some(line) = reader.next_line().map_err(read_error)? {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if filter.rejects_early(body) {
            continue;
        }
        if let Some((_, obj)) = parse_line(body)
            && filter.matches(&obj)
        {
            if found.len() == limit {
                found.pop_front();
            }
            found.push_back(obj);
        }
    }
    Ok(found.into())
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
    fn end_if_caught(&self, out: &mut Sink) {
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
fn unknown_event_hint(name: &str, events: &[String]) -> String {
    let closest = events
        .iter()
        .map(|e| (strsim::levenshtein(name, e), e))
        .min()
        .filter(|(d, _)| *d <= 3);
    let name = clean(name);
    match closest {
        Some((_, e)) => {
            format!("--event {name:?} is not an event heartbeat writes; did you mean {e}?")
        }
        None => format!(
            "--event {name:?} is not an event heartbeat writes; they are: {}",
            events.join(", ")
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Filters

struct Filter {
    since: Option<DateTime<Utc>>,
    /// `since` in the log's own `ts` format (rounded up to the millisecond), so that
    /// timestamps in that format compare as strings without being parsed.
    since_ts: Option<String>,
    events: Vec<String>,
    /// Lowercase; a prefix when shorter than 12.
    task: Option<String>,
    run: Option<String>,
}

impl Filter {
    fn new(ctx: &Ctx, args: &LogArgs) -> Result<Filter> {
        let since = args
            .since
            .as_deref()
            .map(|s| parse_since(s, ctx))
            .transpose()?
            .flatten();
        let since_ts = since.map(|t| {
            let sub_ms = t.timestamp_subsec_nanos() % 1_000_000;
            let up = if sub_ms == 0 {
                t
            } else {
                t + chrono::Duration::nanoseconds(i64::from(1_000_000 - sub_ms))
            };
            up.to_rfc3339_opts(SecondsFormat::Millis, true)
        });
        let task = match args.task.as_deref() {
            None => None,
            Some(raw) => {
                let id = raw.trim().to_ascii_lowercase();
                if !(4..=12).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Error::Usage(format!(
                        "--task: {:?} is not a task id (12 hex digits, or the first 4 or more of them)",
                        clean(raw)
                    )));
                }
                Some(id)
            }
        };
        Ok(Filter {
            since,
            since_ts: since_ts.filter(|s| is_canonical_ts(s)),
            events: args.events.clone(),
            task,
            run: args.run.as_deref().map(|r| r.trim().to_string()),
        })
    }

    /// A line whose `ts` and `event` come first, as heartbeat writes them, can often be
    /// turned down without parsing it. False means "maybe": parse and ask [`Filter::matches`].
    fn rejects_early(&self, line: &[u8]) -> bool {
        let Some(p) = peek(line) else {
            return false;
        };
        let reject = (!self.events.is_empty() && !self.events.iter().any(|e| e == p.event))
            || p.run_id.is_some_and(|id| !self.run_matches(id))
            || (self.since.is_some() && !self.at_or_after(p.ts));
        // What was peeked may be a torn line's, with a whole line after it.
        reject && std::str::from_utf8(&line[1..]).is_ok_and(|rest| !rest.contains(LINE_START))
    }

    fn run_matches(&self, id: &str) -> bool {
        self.run
            .as_deref()
            .is_none_or(|run| id == run || (run.len() >= 4 && id.starts_with(run)))
    }

    fn matches(&self, obj: &Map<String, Value>) -> bool {
        let text = |key: &str| obj.get(key).and_then(Value::as_str);
        if !self.events.is_empty() {
            match text("event") {
                Some(event) if self.events.iter().any(|e| e == event) => {}
                _ => return false,
            }
        }
        if self.since.is_some() && !text("ts").is_some_and(|ts| self.at_or_after(ts)) {
            return false;
        }
        if let Some(task) = &self.task {
            let Some(id) = text("task_id") else {
                return false;
            };
            let id = id.to_ascii_lowercase();
            if !(id == *task || (task.len() < 12 && id.starts_with(task.as_str()))) {
                return false;
            }
        }
        if self.run.is_some() {
            let Some(id) = text("run_id") else {
                return false;
            };
            if !self.run_matches(id) {
                return false;
            }
        }
        true
    }

    fn at_or_after(&self, ts: &str) -> bool {
        let Some(since) = self.since else {
            return true;
        };
        match &self.since_ts {
            Some(s) if is_canonical_ts(ts) => ts >= s.as_str(),
            _ => parse_ts(ts).is_some_and(|t| t >= since),
        }
    }
}

/// `--since` (see [`Since`]); a local time is read in the configured zone. None: no lower
/// bound (a duration reaching before the start of time).
fn parse_since(raw: &str, ctx: &Ctx) -> Result<Option<DateTime<Utc>>> {
    let Some(since) = Since::parse(raw) else {
        return Err(Error::Usage(format!(
            "--since: {:?} is not a time: expected {SINCE_FORMS}, or {TIME_FORMS}",
            clean(raw)
        )));
    };
    let tz = if since.is_local() {
        ctx.zone()
    } else {
        chrono_tz::Tz::UTC
    };
    Ok(since.start(ctx.now, tz))
}

/// `2026-05-01T10:00:00.000Z`: the form heartbeat writes, which sorts as a string.
fn is_canonical_ts(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            23 => c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// What a line that starts `{"ts":"…","event":"…"` says (no escapes in either), and its
/// `run_id` when that is the third key.
struct Peek<'a> {
    ts: &'a str,
    event: &'a str,
    run_id: Option<&'a str>,
}

fn peek(line: &[u8]) -> Option<Peek<'_>> {
    let rest = line.strip_prefix(br#"{"ts":""#)?;
    let (ts, rest) = until_quote(rest)?;
    let rest = rest.strip_prefix(br#","event":""#)?;
    let (event, rest) = until_quote(rest)?;
    let run_id = rest
        .strip_prefix(br#","run_id":""#)
        .and_then(until_quote)
        .map(|(id, _)| id);
    Some(Peek { ts, event, run_id })
}

/// The text up to the next `"`, and what follows the quote; None when there is an escape.
fn until_quote(b: &[u8]) -> Option<(&str, &[u8])> {
    let end = b.iter().position(|&c| c == b'"' || c == b'\\')?;
    if b[end] != b'"' {
        return None;
    }
    Some((std::str::from_utf8(&b[..end]).ok()?, &b[end + 1..]))
}

/// Stdout, buffered. It stops at the first failed write: quietly when the reader went away
/// (a closed pipe: `heartbeat log | head`), and with that error otherwise (a full disk).
struct Sink {
    out: BufWriter<StdoutLock<'static>>,
    broken: bool,
    /// The failed write, unless it was a closed pipe.
    error: Option<io::Error>,
}

impl Sink {
    fn new() -> Sink {
        Sink {
            out: BufWriter::with_capacity(64 * 1024, io::stdout().lock()),
            broken: false,
            error: None,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if !self.broken
            && let Err(e) = self.out.write_all(bytes)
        {
            self.failed(e);
        }
    }

    fn flush(&mut self) {
        if !self.broken
            && let Err(e) = self.out.flush()
        {
            self.failed(e);
        }
    }

    fn failed(&mut self, e: io::Error) {
        self.broken = true;
        if e.kind() != io::ErrorKind::BrokenPipe {
            self.error = Some(e);
        }
    }

    /// How the command ends: what was shown is flushed; a failed write other than a closed
    /// pipe is an error.
    fn end(&mut self) -> Result<u8> {
        self.flush();
        match self.error.take() {
            Some(e) => Err(Error::io("standard output", e)),
            None => Ok(exit::OK),
        }
    }

    /// Nobody reads stdout any more (a closed pipe, a hung-up terminal): checked while
    /// following, when there may be nothing to write for a long time.
    fn gone(&mut self) -> bool {
        if !self.broken && crate::sys::stdout_hung_up() {
            self.broken = true;
        }
        self.broken
    }
}

// ---------------------------------------------------------------------------------------
// Output

struct Show<'a> {
    json: bool,
    view: LogView<'a>,
    filter: &'a Filter,
    /// Human output without `--all`: runs that did nothing are left out.
    quiet: Option<QuietRuns>,
    /// `-n N`: the last N lines to show, kept until the log has been read to its end.
    last: Option<(usize, VecDeque<Vec<u8>>)>,
    out: Sink,
}

/// Runs that did nothing (a `run_started`, then its `run_finished` with nothing counted and
/// no other line of that run between), found as the log is read. A run's `run_started` is
/// held back, with every line shown after it (so the order stays as stored), until the
/// run's next line says whether it did something.
#[derive(Default)]
struct QuietRuns {
    /// Runs whose `run_started` was read and nothing else of theirs yet.
    quiet: std::collections::HashSet<String>,
    /// Lines waiting behind a held `run_started`, in order; `Some(run)` marks one.
    queue: VecDeque<(Option<String>, Vec<u8>)>,
    /// While following: the queue already waited one poll; it is shown at the next.
    waited: bool,
}

/// The most lines held back behind an unfinished run (then they are all shown).
const HELD_MAX: usize = 10_000;

impl QuietRuns {
    /// Looks at a line before any filter (a run's other lines say it did something even when
    /// they are not shown). True: the line is the end of a run that did nothing, not shown.
    fn observe(&mut self, body: &[u8]) -> bool {
        let Some(p) = peek(body) else {
            return false;
        };
        let Some(run) = p.run_id else {
            return false;
        };
        match p.event {
            "run_started" => {
                self.quiet.insert(run.to_string());
                false
            }
            "run_finished" if self.quiet.contains(run) && nothing_counted(body) => {
                self.quiet.remove(run);
                self.queue.retain(|(held, _)| held.as_deref() != Some(run));
                true
            }
            _ => {
                if self.quiet.remove(run)
                    && let Some(entry) = self
                        .queue
                        .iter_mut()
                        .find(|(held, _)| held.as_deref() == Some(run))
                {
                    entry.0 = None;
                }
                false
            }
        }
    }

    /// The lines at the front that no longer wait for anything.
    fn ready(&mut self) -> Vec<Vec<u8>> {
        let mut ready = Vec::new();
        while self.queue.front().is_some_and(|(held, _)| held.is_none()) {
            ready.extend(self.queue.pop_front().map(|(_, text)| text));
        }
        ready
    }

    /// Everything held, in order (the log was read to its end, or too much waited).
    fn release(&mut self) -> Vec<Vec<u8>> {
        self.waited = false;
        self.queue.drain(..).map(|(_, text)| text).collect()
    }
}

/// A `run_finished` line that counts nothing.
fn nothing_counted(body: &[u8]) -> bool {
    serde_json::from_slice::<Map<String, Value>>(body).is_ok_and(|obj| {
        ["succeeded", "failed", "queued", "skipped", "invalid"]
            .iter()
            .all(|k| obj.get(*k).and_then(Value::as_u64).unwrap_or(0) == 0)
    })
}

impl Show<'_> {
    /// One complete line (newline included) from the log: shown when it matches.
    fn line(&mut self, line: &[u8]) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if self.quiet.as_mut().is_some_and(|q| q.observe(body)) {
            return;
        }
        // What this line said of its run may free lines held before it.
        self.show_ready();
        if self.filter.rejects_early(body) {
            return;
        }
        let Some((start, obj)) = parse_line(body) else {
            return;
        };
        if !self.filter.matches(&obj) {
            return;
        }
        let text = if self.json {
            line[start..].to_vec()
        } else {
            let mut text = self.view.line(&obj);
            text.push('\n');
            text.into_bytes()
        };
        let Some(q) = self.quiet.as_mut() else {
            self.shown(text);
            return;
        };
        let held = match (obj.get("event"), obj.get("run_id")) {
            (Some(Value::String(e)), Some(Value::String(run)))
                if e == "run_started" && q.quiet.contains(run) =>
            {
                Some(run.clone())
            }
            _ => None,
        };
        if held.is_none() && q.queue.is_empty() {
            self.shown(text);
            return;
        }
        q.queue.push_back((held, text));
        if q.queue.len() > HELD_MAX {
            for text in q.release() {
                self.shown(text);
            }
        }
    }

    /// Lines no longer held back, shown.
    fn show_ready(&mut self) {
        let ready = self
            .quiet
            .as_mut()
            .map(QuietRuns::ready)
            .unwrap_or_default();
        for text in ready {
            self.shown(text);
        }
    }

    /// A line to show: kept among the last N (`-n`) until the log was read, else written.
    fn shown(&mut self, text: Vec<u8>) {
        match &mut self.last {
            Some((n, kept)) => {
                if *n > 0 {
                    if kept.len() == *n {
                        kept.pop_front();
                    }
                    kept.push_back(text);
                }
            }
            None => self.out.write(&text),
        }
    }

    /// The log was read to its end (following, the first time): the last N lines are shown.
    fn last_lines(&mut self) {
        if let Some((_, kept)) = self.last.take() {
            for text in kept {
                self.out.write(&text);
            }
        }
    }

    /// Following, at the end of the log: what was held back since the last poll is shown
    /// (a run still busy after a poll did something, or is taking long).
    fn waited(&mut self) {
        let Some(q) = self.quiet.as_mut() else {
            return;
        };
        if q.queue.is_empty() || !q.waited {
            q.waited = !q.queue.is_empty();
            return;
        }
        for text in q.release() {
            self.shown(text);
        }
    }

    /// Not following, at the end of the log: runs not finished yet are shown as they are.
    fn finish(&mut self) {
        let held = self
            .quiet
            .as_mut()
            .map(QuietRuns::release)
            .unwrap_or_default();
        for text in held {
            self.shown(text);
        }
        self.last_lines();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_ts_compares_as_text() {
        assert!(is_canonical_ts("2026-05-01T10:00:00.000Z"));
        assert!(!is_canonical_ts("2026-05-01T10:00:00Z"));
        assert!(!is_canonical_ts("2026-05-01T10:00:00.000+00:00"));
    }

    #[test]
    fn a_torn_line_is_never_turned_down_by_what_its_torn_part_says() {
        let args = LogArgs {
            since: None,
            events: vec!["run_started".into()],
            task: None,
            run: Some("bbbb".into()),
            json: false,
            follow: false,
            lines: None,
            all: false,
        };
        let clock = crate::clock::Clock::starting_at(Utc::now());
        let ctx = Ctx {
            now: clock.start(),
            clock,
            cwd: std::path::PathBuf::from("/"),
            config: None,
            state_dir: None,
            verbose: 0,
        };
        let filter = Filter::new(&ctx, &args).unwrap();
        let whole =
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"run_started","run_id":"bbbb00000000"}"#;
        assert!(!filter.rejects_early(whole.as_bytes()));
        assert!(filter.rejects_early(
            br#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_failed","run_id":"bbbb00000000"}"#
        ));
        assert!(filter.rejects_early(
            br#"{"ts":"2026-05-01T10:00:00.000Z","event":"run_started","run_id":"aaaa00000000"}"#
        ));
        for torn in [
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_failed""#,
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_"#,
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_failed","#,
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"run_started","run_id":"aaaa00000000","#,
        ] {
            let line = format!("{torn}{whole}");
            assert!(!filter.rejects_early(line.as_bytes()), "{line}");
            let (start, _) = parse_line(line.as_bytes()).unwrap();
            assert_eq!(&line[start..], whole);
        }
    }

    #[test]
    fn peek_reads_ts_and_event_of_heartbeats_lines_only() {
        let line = br#"{"ts":"2026-05-01T10:00:00.000Z","event":"run_started","run_id":"x"}"#;
        let p = peek(line).unwrap();
        assert_eq!(
            (p.ts, p.event, p.run_id),
            ("2026-05-01T10:00:00.000Z", "run_started", Some("x"))
        );
        let p = peek(br#"{"ts":"t","event":"e","task_id":"x"}"#).unwrap();
        assert_eq!(p.run_id, None);
        assert!(peek(br#"{"event":"a","ts":"b"}"#).is_none());
        assert!(peek(br#"{"ts":"a\"b","event":"c"}"#).is_none());
    }

    #[test]
    fn a_run_is_quiet_only_while_nothing_of_it_counted() {
        let started = br#"{"ts":"t","event":"run_started","run_id":"r1"}"#;
        let mut q = QuietRuns::default();
        assert!(!q.observe(started));
        q.queue.push_back((Some("r1".into()), b"started".to_vec()));
        // Ended with something counted: shown, its start freed at once.
        let counted = br#"{"ts":"t","event":"run_finished","run_id":"r1","succeeded":1}"#;
        assert!(!q.observe(counted));
        assert_eq!(q.ready(), vec![b"started".to_vec()]);
        // Ended with nothing counted and nothing between: both left out.
        assert!(!q.observe(started));
        q.queue.push_back((Some("r1".into()), b"started".to_vec()));
        let nothing = br#"{"ts":"t","event":"run_finished","run_id":"r1","succeeded":0}"#;
        assert!(q.observe(nothing));
        assert!(q.queue.is_empty());
    }

    #[test]
    fn hints_name_the_closest_event() {
        let events: Vec<String> = Event::names().collect();
        let hint = |name| unknown_event_hint(name, &events);
        assert!(hint("task_succeded").contains("did you mean task_succeeded?"));
        assert!(hint("state_prund").contains("did you mean state_pruned?"));
        assert!(hint("zzzzzzzzzzzzzzzzz").contains("run_started"));
    }
}
