//! Which audit lines `heartbeat log` shows, and the `log` tool of `heartbeat mcp` answers:
//! the [`Filter`] (event, task, run, since), runs that did nothing left out, the last N.
//! Pure: lines go in as bytes, what to show comes out in the stored order.
//!
//! Invariants:
//! - Only lines that parse as JSON objects are shown ([`parse_line`]: a torn line followed by
//!   a whole one shows the whole one).
//! - Runs that did nothing (a `run_started`, then its `run_finished` with nothing counted and
//!   no other line of that run between) are left out when asked ([`QuietRuns`]); a held
//!   `run_started` holds every line after it, so the order stays as stored, and at most
//!   [`HELD_MAX`] lines are held.
//! - `-n N` keeps the last N lines to show, memory bounded by N.

use std::collections::{HashSet, VecDeque};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::reader::{object, parse_line};
use super::{EventKind, parse_ts};
use crate::text::clean;

/// What a line must be to be shown.
pub(crate) struct Filter {
    since: Option<DateTime<Utc>>,
    events: Vec<String>,
    /// Lowercase; a prefix when shorter than 12.
    task: Option<String>,
    run: Option<String>,
}

impl Filter {
    /// Lines at or after `since`, of one of `events` (any when empty), of the task whose id
    /// is or starts with `task` (4 to 12 hex digits, any case), of the run whose id is or
    /// starts with `run` (4 or more characters). Err: why `task` is not a task id.
    pub(crate) fn new(
        since: Option<DateTime<Utc>>,
        events: Vec<String>,
        task: Option<&str>,
        run: Option<&str>,
    ) -> Result<Filter, String> {
        let task = match task {
            None => None,
            Some(raw) => {
                let id = raw.trim().to_ascii_lowercase();
                if !(4..=12).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!(
                        "--task: {:?} is not a task id (12 hex digits, or the first 4 or more of them)",
                        clean(raw)
                    ));
                }
                Some(id)
            }
        };
        Ok(Filter {
            since,
            events,
            task,
            run: run.map(|r| r.trim().to_string()),
        })
    }

    /// The earliest time a line may have.
    pub(crate) fn since(&self) -> Option<DateTime<Utc>> {
        self.since
    }

    fn run_matches(&self, id: &str) -> bool {
        self.run
            .as_deref()
            .is_none_or(|run| id == run || (run.len() >= 4 && id.starts_with(run)))
    }

    fn matches(&self, head: &Head) -> bool {
        if !self.events.is_empty() {
            match text(&head.event) {
                Some(event) if self.events.iter().any(|e| e == event) => {}
                _ => return false,
            }
        }
        if self.since.is_some() && !text(&head.ts).is_some_and(|ts| self.at_or_after(ts)) {
            return false;
        }
        if let Some(task) = &self.task {
            let Some(id) = text(&head.task_id) else {
                return false;
            };
            let id = id.to_ascii_lowercase();
            if !(id == *task || (task.len() < 12 && id.starts_with(task.as_str()))) {
                return false;
            }
        }
        if self.run.is_some() {
            let Some(id) = text(&head.run_id) else {
                return false;
            };
            if !self.run_matches(id) {
                return false;
            }
        }
        true
    }

    fn at_or_after(&self, ts: &str) -> bool {
        self.since
            .is_none_or(|since| parse_ts(ts).is_some_and(|t| t >= since))
    }
}

/// The lines to show, chosen as the log is read: one [`Selection::line`] per line of the
/// log, in order; `T` is what is shown of a matching line (a rendered line, the stored one,
/// the parsed object).
pub(crate) struct Selection<T> {
    filter: Filter,
    /// Runs that did nothing are left out.
    quiet: Option<QuietRuns<T>>,
    /// `-n N`: the last N lines to show, kept until the log has been read to its end.
    last: Option<(usize, VecDeque<T>)>,
}

impl<T> Selection<T> {
    /// `hide_quiet_runs`: leave out runs that did nothing. `last`: only the last N.
    pub(crate) fn new(filter: Filter, hide_quiet_runs: bool, last: Option<usize>) -> Selection<T> {
        Selection {
            filter,
            quiet: hide_quiet_runs.then(QuietRuns::new),
            last: last.map(|n| (n, VecDeque::new())),
        }
    }

    /// One complete line of the log (its newline included or not). When it matches, `show`
    /// makes what is shown of it from the stored line (without its newline, from where the
    /// whole line starts) and its object; `out` gets what is to be shown now, in order.
    pub(crate) fn line(
        &mut self,
        line: &[u8],
        show: impl FnOnce(&[u8], &Map<String, Value>) -> T,
        out: &mut impl FnMut(T),
    ) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let Some((start, head)) = parse_line(body, Head::parse) else {
            return;
        };
        if self.quiet.as_mut().is_some_and(|q| q.observe(&head)) {
            return;
        }
        // What this line said of its run may free lines held before it.
        self.show_ready(out);
        if !self.filter.matches(&head) {
            return;
        }
        // The whole object, only for a line that is shown.
        let Some(obj) = object(&body[start..]) else {
            return;
        };
        let item = show(&body[start..], &obj);
        let Some(q) = self.quiet.as_mut() else {
            self.shown(item, out);
            return;
        };
        let kind = text(&head.event).and_then(|e| e.parse().ok());
        let held = match (kind, text(&head.run_id)) {
            (Some(EventKind::RunStarted), Some(run)) if q.quiet.contains(run) => {
                Some(run.to_string())
            }
            _ => None,
        };
        if held.is_none() && q.queue.is_empty() {
            self.shown(item, out);
            return;
        }
        q.queue.push_back((held, item));
        if q.queue.len() > HELD_MAX {
            for item in q.release() {
                self.shown(item, out);
            }
        }
    }

    /// Lines no longer held back, shown.
    fn show_ready(&mut self, out: &mut impl FnMut(T)) {
        let ready = self
            .quiet
            .as_mut()
            .map(QuietRuns::ready)
            .unwrap_or_default();
        for item in ready {
            self.shown(item, out);
        }
    }

    /// A line to show: kept among the last N (`-n`) until the log was read, else shown.
    fn shown(&mut self, item: T, out: &mut impl FnMut(T)) {
        match &mut self.last {
            Some((n, kept)) => {
                if *n > 0 {
                    if kept.len() == *n {
                        kept.pop_front();
                    }
                    kept.push_back(item);
                }
            }
            None => out(item),
        }
    }

    /// The log was read to its end (following, the first time): the last N lines are shown.
    fn last_lines(&mut self, out: &mut impl FnMut(T)) {
        if let Some((_, kept)) = self.last.take() {
            kept.into_iter().for_each(out);
        }
    }

    /// Following, at the end of the log: what `-n` kept is shown (once), and what was held
    /// back since the last look too (a run still busy after a poll did something, or is
    /// taking long).
    pub(crate) fn caught_up(&mut self, out: &mut impl FnMut(T)) {
        self.last_lines(out);
        let Some(q) = self.quiet.as_mut() else {
            return;
        };
        if q.queue.is_empty() || !q.waited {
            q.waited = !q.queue.is_empty();
            return;
        }
        for item in q.release() {
            self.shown(item, out);
        }
    }

    /// Not following, at the end of the log: runs not finished yet are shown as they are,
    /// then what `-n` kept.
    pub(crate) fn end(&mut self, out: &mut impl FnMut(T)) {
        let held = self
            .quiet
            .as_mut()
            .map(QuietRuns::release)
            .unwrap_or_default();
        for item in held {
            self.shown(item, out);
        }
        self.last_lines(out);
    }
}

/// Runs that did nothing (a `run_started`, then its `run_finished` with nothing counted and
/// no other line of that run between), found as the log is read. A run's `run_started` is
/// held back, with every line shown after it (so the order stays as stored), until the
/// run's next line says whether it did something.
struct QuietRuns<T> {
    /// Runs whose `run_started` was read and nothing else of theirs yet.
    quiet: HashSet<String>,
    /// Lines waiting behind a held `run_started`, in order; `Some(run)` marks one.
    queue: VecDeque<(Option<String>, T)>,
    /// While following: the queue already waited one poll; it is shown at the next.
    waited: bool,
}

/// The most lines held back behind an unfinished run (then they are all shown).
const HELD_MAX: usize = 10_000;

impl<T> QuietRuns<T> {
    fn new() -> Self {
        QuietRuns {
            quiet: HashSet::new(),
            queue: VecDeque::new(),
            waited: false,
        }
    }

    /// Looks at a line before any filter (a run's other lines say it did something even when
    /// they are not shown). True: the line is the end of a run that did nothing, not shown.
    fn observe(&mut self, head: &Head) -> bool {
        let (Some(event), Some(run)) = (text(&head.event), text(&head.run_id)) else {
            return false;
        };
        match event.parse() {
            Ok(EventKind::RunStarted) => {
                self.quiet.insert(run.to_string());
                false
            }
            Ok(EventKind::RunFinished) if self.quiet.contains(run) && head.counts_nothing() => {
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
    fn ready(&mut self) -> Vec<T> {
        let mut ready = Vec::new();
        while self.queue.front().is_some_and(|(held, _)| held.is_none()) {
            ready.extend(self.queue.pop_front().map(|(_, text)| text));
        }
        ready
    }

    /// Everything held, in order (the log was read to its end, or too much waited).
    fn release(&mut self) -> Vec<T> {
        self.waited = false;
        self.queue.drain(..).map(|(_, text)| text).collect()
    }
}

/// The fields of a line that the filter and the runs-that-did-nothing rule read: serde
/// skips every other one without building it, and the whole object is built only for a line
/// that is shown. (Each may hold any JSON value, as in the object.)
#[derive(Deserialize)]
struct Head {
    ts: Option<Value>,
    event: Option<Value>,
    run_id: Option<Value>,
    task_id: Option<Value>,
    succeeded: Option<Value>,
    failed: Option<Value>,
    queued: Option<Value>,
    skipped: Option<Value>,
    invalid: Option<Value>,
}

impl Head {
    /// The head of a JSON object; None when `line` is not one.
    fn parse(line: &[u8]) -> Option<Head> {
        if !line.trim_ascii_start().starts_with(b"{") {
            return None;
        }
        match serde_json::from_slice(line) {
            Ok(head) => Some(head),
            // A key written twice, which only the object takes (its last value counts).
            Err(_) => object(line).map(Head::of),
        }
    }

    fn of(mut obj: Map<String, Value>) -> Head {
        let mut take = |key: &str| obj.remove(key);
        Head {
            ts: take("ts"),
            event: take("event"),
            run_id: take("run_id"),
            task_id: take("task_id"),
            succeeded: take("succeeded"),
            failed: take("failed"),
            queued: take("queued"),
            skipped: take("skipped"),
            invalid: take("invalid"),
        }
    }

    /// A `run_finished` line that counts nothing.
    fn counts_nothing(&self) -> bool {
        [
            &self.succeeded,
            &self.failed,
            &self.queued,
            &self.skipped,
            &self.invalid,
        ]
        .iter()
        .all(|n| n.as_ref().and_then(Value::as_u64).unwrap_or(0) == 0)
    }
}

/// A field's text, when it is a string.
fn text(field: &Option<Value>) -> Option<&str> {
    field.as_ref().and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_line_is_never_turned_down_by_what_its_torn_part_says() {
        let whole =
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"run_started","run_id":"bbbb00000000"}"#;
        for torn in [
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_failed""#,
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_"#,
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_failed","#,
            r#"{"ts":"2026-05-01T10:00:00.000Z","event":"run_started","run_id":"aaaa00000000","#,
        ] {
            let line = format!("{torn}{whole}");
            let sel = Selection::new(filter(&["run_started"], None, Some("bbbb")), false, None);
            assert_eq!(
                chosen(sel, &[&line]),
                [format!("run_started {}", whole.len())]
            );
        }
    }

    #[test]
    fn a_run_is_quiet_only_while_nothing_of_it_counted() {
        let obj = |text: &str| Head::parse(text.as_bytes()).unwrap();
        let started = obj(r#"{"ts":"t","event":"run_started","run_id":"r1"}"#);
        let mut q = QuietRuns::new();
        assert!(!q.observe(&started));
        q.queue.push_back((Some("r1".into()), "started"));
        // Ended with something counted: shown, its start freed at once.
        let counted = obj(r#"{"ts":"t","event":"run_finished","run_id":"r1","succeeded":1}"#);
        assert!(!q.observe(&counted));
        assert_eq!(q.ready(), ["started"]);
        // Ended with nothing counted and nothing between: both left out.
        assert!(!q.observe(&started));
        q.queue.push_back((Some("r1".into()), "started"));
        let nothing = obj(r#"{"ts":"t","event":"run_finished","run_id":"r1","succeeded":0}"#);
        assert!(q.observe(&nothing));
        assert!(q.queue.is_empty());
    }

    /// What the selection shows of `lines`, in order, with `end` (not following).
    fn chosen(mut sel: Selection<String>, lines: &[&str]) -> Vec<String> {
        let mut shown = Vec::new();
        for line in lines {
            sel.line(
                format!("{line}\n").as_bytes(),
                |stored, obj| format!("{} {}", obj["event"].as_str().unwrap(), stored.len()),
                &mut |s| shown.push(s),
            );
        }
        sel.end(&mut |s| shown.push(s));
        shown
    }

    fn line(ts: &str, event: &str, rest: &str) -> String {
        format!(r#"{{"ts":"{ts}","event":"{event}"{rest}}}"#)
    }

    fn filter(events: &[&str], task: Option<&str>, run: Option<&str>) -> Filter {
        let events = events.iter().map(|e| e.to_string()).collect();
        Filter::new(None, events, task, run).unwrap()
    }

    #[test]
    fn each_filter_keeps_only_its_lines() {
        let lines = [
            line(
                "2026-05-01T10:00:00.000Z",
                "a",
                r#","run_id":"r1aaaa","task_id":"0123456789ab""#,
            ),
            line(
                "2026-05-01T11:00:00.000Z",
                "b",
                r#","run_id":"r2bbbb","task_id":"ffff56789abc""#,
            ),
            line("2026-05-01T12:00:00+02:00", "c", ""),
            "garbage".to_string(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = |sel: Selection<String>| -> Vec<String> {
            chosen(sel, &lines)
                .iter()
                .map(|s| s[..1].to_string())
                .collect()
        };
        assert_eq!(
            events(Selection::new(filter(&[], None, None), false, None)),
            ["a", "b", "c"]
        );
        assert_eq!(
            events(Selection::new(filter(&["b", "c"], None, None), false, None)),
            ["b", "c"]
        );
        assert_eq!(
            events(Selection::new(filter(&[], Some("0123"), None), false, None)),
            ["a"]
        );
        assert_eq!(
            events(Selection::new(
                filter(&[], Some("0123456789AB"), None),
                false,
                None
            )),
            ["a"]
        );
        assert_eq!(
            events(Selection::new(filter(&[], None, Some("r2bb")), false, None)),
            ["b"]
        );
        // A run id shorter than 4 matches only itself.
        assert!(events(Selection::new(filter(&[], None, Some("r2")), false, None)).is_empty());
        let since = "2026-05-01T10:30:00Z".parse().unwrap();
        let f = Filter::new(Some(since), vec![], None, None).unwrap();
        // 12:00+02:00 is 10:00Z: before.
        assert_eq!(events(Selection::new(f, false, None)), ["b"]);
        // -n: the last N of what matches.
        assert_eq!(
            events(Selection::new(filter(&[], None, None), false, Some(2))),
            ["b", "c"]
        );
        assert!(events(Selection::new(filter(&[], None, None), false, Some(0))).is_empty());
    }

    #[test]
    fn the_head_is_what_the_object_says() {
        let head =
            Head::parse(br#"{"ts":"t","event":"e","run_id":"r","x":[1,{"y":2}],"failed":1}"#)
                .unwrap();
        assert_eq!((text(&head.ts), text(&head.event)), (Some("t"), Some("e")));
        assert_eq!(text(&head.run_id), Some("r"));
        assert!(!head.counts_nothing());
        // A key twice: its last value, as the object has it.
        let head = Head::parse(br#"{"event":"a","event":"b"}"#).unwrap();
        assert_eq!(text(&head.event), Some("b"));
        assert!(head.counts_nothing());
        // Not strings: no text.
        let head = Head::parse(br#"{"event":3,"run_id":null}"#).unwrap();
        assert_eq!((text(&head.event), text(&head.run_id)), (None, None));
        for not_an_object in [
            &b"[1,2,3,4,5,6,7,8,9]"[..],
            b"1",
            b"garbage",
            b"{\"a\":1} x",
        ] {
            assert!(Head::parse(not_an_object).is_none());
        }
    }

    #[test]
    fn a_task_filter_must_be_a_task_id() {
        for bad in ["012", "0123456789abc", "xyzw", ""] {
            let err = Filter::new(None, vec![], Some(bad), None).err().unwrap();
            assert!(err.starts_with("--task: "), "{err}");
        }
    }

    #[test]
    fn runs_that_did_nothing_are_left_out_and_the_order_kept() {
        let started = |r: &str| line("t", "run_started", &format!(r#","run_id":"{r}""#));
        let finished = |r: &str, n: u32| {
            line(
                "t",
                "run_finished",
                &format!(r#","run_id":"{r}","succeeded":{n}"#),
            )
        };
        let other = |r: &str| line("t", "task_failed", &format!(r#","run_id":"{r}""#));
        let lines = [
            started("r1"),
            line("t", "daemon_started", ""),
            finished("r1", 0),
            started("r2"),
            other("r2"),
            finished("r2", 0),
            started("r3"),
            finished("r3", 1),
            started("r4"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let shown: Vec<String> =
            chosen(Selection::new(filter(&[], None, None), true, None), &lines)
                .iter()
                .map(|s| s.split(' ').next().unwrap().to_string())
                .collect();
        // r1 did nothing (the daemon's line is not of it); r2 and r3 did; r4 has not ended.
        assert_eq!(
            shown,
            [
                "daemon_started",
                "run_started",
                "task_failed",
                "run_finished",
                "run_started",
                "run_finished",
                "run_started"
            ]
        );
        // Not hidden: every line.
        let all = chosen(Selection::new(filter(&[], None, None), false, None), &lines);
        assert_eq!(all.len(), lines.len());
    }

    #[test]
    fn what_is_shown_is_the_stored_line_from_where_the_whole_line_starts() {
        let whole = line("2026-05-01T10:00:00.000Z", "a", "");
        let torn = format!(r#"{{"ts":"2026-05-01T09:00:00.000Z","event":"b{whole}"#);
        let mut shown = Vec::new();
        let mut sel = Selection::new(filter(&[], None, None), false, None);
        sel.line(
            format!("{torn}\n").as_bytes(),
            |stored, _| String::from_utf8(stored.to_vec()).unwrap(),
            &mut |s| shown.push(s),
        );
        assert_eq!(shown, [whole]);
    }

    #[test]
    fn following_shows_what_n_kept_once_then_lines_as_they_come() {
        let mut sel = Selection::new(filter(&[], None, None), false, Some(1));
        let mut shown = Vec::new();
        let show = |_: &[u8], obj: &Map<String, Value>| obj["event"].as_str().unwrap().to_string();
        for e in ["a", "b"] {
            sel.line(line("t", e, "").as_bytes(), show, &mut |s| shown.push(s));
        }
        assert!(shown.is_empty());
        sel.caught_up(&mut |s| shown.push(s));
        assert_eq!(shown, ["b"]);
        sel.line(line("t", "c", "").as_bytes(), show, &mut |s| shown.push(s));
        sel.caught_up(&mut |s| shown.push(s));
        assert_eq!(shown, ["b", "c"]);
    }

    #[test]
    fn following_a_run_still_busy_after_a_poll_is_shown_at_the_next() {
        let mut sel = Selection::new(filter(&[], None, None), true, None);
        let mut shown = Vec::new();
        let show = |_: &[u8], obj: &Map<String, Value>| obj["event"].as_str().unwrap().to_string();
        let started = line("t", "run_started", r#","run_id":"r1""#);
        sel.line(started.as_bytes(), show, &mut |s| shown.push(s));
        sel.caught_up(&mut |s| shown.push(s));
        assert!(shown.is_empty());
        sel.caught_up(&mut |s| shown.push(s));
        assert_eq!(shown, ["run_started"]);
    }
}
