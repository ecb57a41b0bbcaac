//! HEARTBEAT.md → tasks, with byte spans into the original text.
//!
//! Invariants:
//! - Only what pulldown-cmark reports as a GFM task-list item is a task, so items inside
//!   fenced or indented code and HTML blocks never are. No line regexes over the raw text.
//! - Every byte offset (`Task::marker`, and the offsets used to place errors) is into the
//!   whole text, a leading BOM included; `text[marker]` is always `[ ]`, `[x]` or `[X]`.
//! - Lines and columns are 1-based; a column counts characters, the BOM not counted;
//!   `\r\n`, `\r` and `\n` each end a line.
//! - Task text is cut from the source bytes, never re-rendered.
//! - Work is linear in the file size: positions come from a line-start table (a bisection),
//!   never from rescanning the text.
//! - A proposal mark (`<!-- proposed by mcp:NAME -->`) ending the raw bytes of an item's
//!   first line is provenance, not text: it is cut off before any other rule reads the text,
//!   wherever markup around it would put it, and it is part of the task's id.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::model::{Body, ParsedFile, Problem, Schedule, Section, Severity, Task};
use crate::schedule::{self, HeadingKind};

const BOM: &str = "\u{feff}";

/// Parse a whole file (`text` may start with a UTF-8 BOM). `path` is what tasks report as their
/// file; `canonical` goes into task ids (in a fleet, relative to the config's directory:
/// [`super::id_path`]).
pub fn parse(path: &Path, canonical: &Path, text: &str) -> ParsedFile {
    // pulldown-cmark does not end a line at a lone CR (old Mac files), so a fenced block
    // there would not be code and a task inside it would look real. Parse a copy with each
    // lone CR made a LF: one byte for one byte, so every offset and line stays the same.
    let unified: String;
    let text = if has_lone_cr(text) {
        unified = lone_cr_to_lf(text);
        &unified
    } else {
        text
    };
    let bom = if text.starts_with(BOM) { BOM.len() } else { 0 };
    let mut b = Builder {
        path,
        file: Arc::from(path),
        canonical: super::id_path(canonical),
        lines: LineIndex::new(text, bom),
        section: Section::Other,
        heading: None,
        schedule: None,
        zone: None,
        jitter: None,
        bad_heading: None,
        occurrences: HashMap::new(),
        tasks: Vec::new(),
        problems: Vec::new(),
    };

    let mut pending: Option<PendingTask> = None;
    let mut heading: Option<PendingHeading> = None;
    let mut quote_depth = 0usize;
    let mut item_depth = 0usize;
    let mut fresh = Fresh::No;
    let mut code_depth = 0usize;

    // Only task lists: tables, footnotes and the rest would change what counts as a list item.
    let parser = Parser::new_ext(&text[bom..], Options::ENABLE_TASKLISTS).into_offset_iter();
    for (event, range) in parser {
        let range = range.start + bom..range.end + bom;

        if let Some(task) = pending.as_mut() {
            // A next line written like a task without the space after its bullet (`-[ ] …`)
            // is no part of this task's text: the task ends here, and the line is warned
            // about below.
            let unspaced_next =
                matches!(event, Event::SoftBreak) && unspaced_marker(&text[range.end..]);
            if is_inline(&event) && !unspaced_next {
                task.inline.push(&range);
                continue;
            }
            // `- [ ]` alone on its line, text below: the first paragraph is still the text.
            if matches!(event, Event::Start(Tag::Paragraph))
                && !task.opened_paragraph
                && task.inline.end.is_none()
            {
                task.opened_paragraph = true;
                continue;
            }
            if let Some(task) = pending.take() {
                b.finish_task(task);
            }
            if unspaced_next {
                continue;
            }
        }

        if let Some(h) = heading.as_mut() {
            if let Event::End(TagEnd::Heading(level)) = event {
                if let Some(h) = heading.take() {
                    b.finish_heading(level, h);
                }
            } else if is_inline(&event) {
                h.inline.push(&range);
            }
            continue;
        }

        let was = std::mem::replace(&mut fresh, Fresh::No);
        match event {
            Event::Start(Tag::Item) => {
                item_depth += 1;
                fresh = Fresh::Item;
            }
            Event::End(TagEnd::Item) => item_depth = item_depth.saturating_sub(1),
            // Loose items open their paragraph before the marker.
            Event::Start(Tag::Paragraph) if was == Fresh::Item => fresh = Fresh::ItemParagraph,
            Event::TaskListMarker(done) if was != Fresh::No => {
                pending = Some(PendingTask {
                    // The marker event ends with `]`; its three bytes are the `[?]`.
                    marker: range.end.saturating_sub(3)..range.end,
                    done,
                    in_quote: quote_depth > 0,
                    opened_paragraph: was == Fresh::ItemParagraph,
                    inline: Inline::default(),
                });
            }
            Event::Start(Tag::Heading { .. }) => {
                heading = Some(PendingHeading {
                    start: range.start,
                    nested: quote_depth > 0 || item_depth > 0,
                    in_quote: quote_depth > 0,
                    inline: Inline::default(),
                });
            }
            // `- []` looks like a task but is a plain item: say so rather than skip it.
            Event::Text(_)
                if was != Fresh::No
                    && b.in_active_section()
                    && text[range.start..].starts_with("[]") =>
            {
                b.warn(
                    range.start,
                    "\"[]\" is not a task marker; write \"- [ ] <task>\" (with a space \
                     between the brackets)"
                        .to_string(),
                );
            }
            // `- [ ]@log {…}`: a task marker glued to its text is no task at all (CommonMark
            // wants a space after `[ ]`): it would never run, and no one would know.
            Event::Text(_)
                if was != Fresh::No
                    && b.in_active_section()
                    && MARKERS.iter().any(|m| {
                        text[range.start..]
                            .strip_prefix(m)
                            .is_some_and(|rest| rest.starts_with(|c: char| !c.is_whitespace()))
                    }) =>
            {
                let marker = &text[range.start..range.start + 3];
                let message = not_a_task(marker, "the marker", marker, &text[range.start + 3..]);
                b.warn(range.start, message);
            }
            // `-[ ] @log {…}`: a bullet glued to its marker is no list item, so no task: a
            // paragraph of its own, or (below a task) a line of that task's text.
            Event::Text(_)
                if code_depth == 0
                    && b.in_active_section()
                    && text[..range.start]
                        .rsplit('\n')
                        .next()
                        .is_some_and(|before| before.trim().is_empty())
                    && unspaced_marker(&text[range.start..]) =>
            {
                let rest = &text[range.start..];
                let marker = &rest[1..4];
                let message =
                    not_a_task(&rest[..4], &format!("{:?}", &rest[..1]), marker, &rest[4..]);
                b.warn(range.start, message);
            }
            Event::Start(Tag::CodeBlock(_)) => code_depth += 1,
            Event::End(TagEnd::CodeBlock) => code_depth = code_depth.saturating_sub(1),
            Event::Start(Tag::BlockQuote(_)) => quote_depth += 1,
            Event::End(TagEnd::BlockQuote(_)) => quote_depth = quote_depth.saturating_sub(1),
            _ => {}
        }
    }
    if let Some(task) = pending.take() {
        b.finish_task(task);
    }

    ParsedFile {
        path: path.to_path_buf(),
        tasks: b.tasks,
        problems: b.problems,
    }
}

/// A task's marker, open or done.
const MARKERS: [&str; 3] = ["[ ]", "[x]", "[X]"];

/// Whether a line (`rest`, from its start, indentation allowed) starts like a task whose
/// bullet has no space after it (`-[ ] …`, `*[x] …`).
fn unspaced_marker(rest: &str) -> bool {
    let line = rest.trim_start_matches([' ', '\t']);
    line.starts_with(['-', '*', '+']) && MARKERS.iter().any(|m| line[1..].starts_with(m))
}

/// The warning for a line that looks like a task and is none for want of a space:
/// `written` is what was written, `after` what the space goes after, `marker` the task
/// marker and `rest` the text after what was written.
fn not_a_task(written: &str, after: &str, marker: &str, rest: &str) -> String {
    let rest: String = rest
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start()
        .chars()
        .take(40)
        .collect();
    format!("{written:?} is not a task: write a space after {after} (\"- {marker} {rest}\")")
}

fn has_lone_cr(text: &str) -> bool {
    let b = text.as_bytes();
    memchr::memchr_iter(b'\r', b).any(|i| b.get(i + 1) != Some(&b'\n'))
}

fn lone_cr_to_lf(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for i in 0..bytes.len() {
        if bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n') {
            bytes[i] = b'\n';
        }
    }
    // Only ASCII bytes changed, into ASCII bytes: still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Where we are relative to the start of a list item, to recognise its task marker.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fresh {
    No,
    Item,
    ItemParagraph,
}

/// A task whose text is still being collected.
struct PendingTask {
    marker: Range<usize>,
    done: bool,
    in_quote: bool,
    opened_paragraph: bool,
    inline: Inline,
}

/// A heading whose text is still being collected.
struct PendingHeading {
    start: usize,
    /// Inside a blockquote or list item: quoted or nested text, not the file's structure.
    nested: bool,
    in_quote: bool,
    inline: Inline,
}

/// The inline events seen so far of a task's or heading's text.
#[derive(Default)]
struct Inline {
    /// Starts of the inline events (file offsets).
    starts: Vec<usize>,
    /// End of the last inline event.
    end: Option<usize>,
}

impl Inline {
    fn push(&mut self, range: &Range<usize>) {
        self.starts.push(range.start);
        self.end = Some(self.end.map_or(range.end, |e| e.max(range.end)));
    }
}

/// Events that belong to a paragraph's inline content. Anything else is block structure and
/// ends a task's text.
fn is_inline(event: &Event<'_>) -> bool {
    match event {
        Event::Text(_)
        | Event::Code(_)
        | Event::InlineMath(_)
        | Event::DisplayMath(_)
        | Event::InlineHtml(_)
        | Event::FootnoteReference(_)
        | Event::SoftBreak
        | Event::HardBreak => true,
        Event::Start(tag) => matches!(
            tag,
            Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Superscript
                | Tag::Subscript
                | Tag::Link { .. }
                | Tag::Image { .. }
        ),
        Event::End(tag) => matches!(
            tag,
            TagEnd::Emphasis
                | TagEnd::Strong
                | TagEnd::Strikethrough
                | TagEnd::Superscript
                | TagEnd::Subscript
                | TagEnd::Link
                | TagEnd::Image
        ),
        _ => false,
    }
}

struct Builder<'a> {
    path: &'a Path,
    /// `path`, shared by the tasks.
    file: Arc<Path>,
    canonical: String,
    lines: LineIndex<'a>,
    section: Section,
    heading: Option<Arc<str>>,
    schedule: Option<Schedule>,
    /// The zone the schedule heading names, if any.
    zone: Option<chrono_tz::Tz>,
    /// The schedule heading's jitter, if any.
    jitter: Option<std::time::Duration>,
    /// Set by a heading of level 3 or more meant as a schedule that is not a valid level-3
    /// one for its section: (level, line, column, error). Every open task below it is
    /// invalid until the next heading of its level or above.
    bad_heading: Option<(HeadingLevel, usize, usize, String)>,
    /// First-occurrence id → occurrences so far. Repeats are counted by the id, not the
    /// whole digest: two contents whose ids collide count as one, so ids in a file stay
    /// distinct.
    occurrences: HashMap<String, usize>,
    tasks: Vec<Task>,
    problems: Vec<Problem>,
}

impl Builder<'_> {
    fn warn(&mut self, offset: usize, message: String) {
        let (line, column) = self.lines.line_col(offset);
        self.problems.push(Problem {
            file: self.path.to_path_buf(),
            line,
            column,
            severity: Severity::Warning,
            message,
        });
    }

    /// Recurring and One-time are the sections heartbeat acts on; elsewhere it stays quiet.
    fn in_active_section(&self) -> bool {
        self.section != Section::Other
    }

    fn finish_heading(&mut self, level: HeadingLevel, h: PendingHeading) {
        // Only the file's own headings make sections and schedules: a quoted example such as
        // `> ## Recurring` must never turn the tasks below it into work.
        if h.nested {
            return;
        }
        let text = match h.inline.end {
            Some(end) => {
                let start = h.inline.starts.iter().copied().min().unwrap_or(end);
                extract(&self.lines, start..end, h.inline.starts, h.in_quote, None).text
            }
            None => String::new(),
        };
        // A section name that is not a section heading leaves its tasks ignored: say so,
        // wherever it is (tasks below an `# Recurring` are in no section at all).
        let near_miss = near_miss_section(level, &text);
        if let Some(meant) = near_miss {
            self.warn(
                h.start,
                format!("heading {text:?} is not a section name; did you mean \"## {meant}\"?"),
            );
        }
        if self.bad_heading.as_ref().is_some_and(|bad| level <= bad.0) {
            self.bad_heading = None;
        }
        // A schedule at the wrong level: at level 1 or 2 it starts a part whose tasks never
        // run (only worth a word when it is a schedule, or every run would mail it).
        if level <= HeadingLevel::H2
            && near_miss.is_none()
            && section_kind(&text) == Section::Other
            && schedule::parse_schedule(&text).is_some()
        {
            self.warn(
                h.start,
                format!(
                    "heading {text:?} is a level-{} heading, so its tasks are in no section \
                     and never run; a schedule is a level-3 heading (\"### {text}\") under \
                     \"## Recurring\" or \"## One-time\"",
                    level as u8
                ),
            );
        }
        match level {
            // A new top-level part of the document: nothing below it is clearly in a section.
            HeadingLevel::H1 => {
                self.section = Section::Other;
                self.heading = None;
                self.schedule = None;
            }
            HeadingLevel::H2 => {
                self.section = section_kind(&text);
                self.heading = None;
                self.schedule = None;
            }
            HeadingLevel::H3 => {
                self.schedule = None;
                if text.is_empty() {
                    self.heading = None;
                    return;
                }
                match schedule::parse_heading(self.section, &text) {
                    HeadingKind::Schedule(s, zone, jitter) => {
                        self.schedule = Some(s);
                        self.zone = zone;
                        self.jitter = jitter;
                    }
                    // Fail closed: the tasks below carry the error
                    // (docs/reference.md#schedule-headings).
                    HeadingKind::Invalid(error) => {
                        let (line, column) = self.lines.line_col(h.start);
                        self.bad_heading = Some((level, line, column, error));
                    }
                    // A title (docs/reference.md#schedule-headings): no warning, or every cron run
                    // would mail it.
                    HeadingKind::Title => {}
                }
                self.heading = Some(Arc::from(text));
            }
            // Below level 3 a heading is a title, but one meant as a schedule fails closed
            // as at level 3: `#### At 2027-01-01` under One-time must not make its task due
            // now.
            _ if self.bad_heading.is_none() => {
                let error = match schedule::parse_heading(self.section, &text) {
                    HeadingKind::Title => return,
                    HeadingKind::Schedule(..) => format!(
                        "schedule heading {text:?} is a level-{} heading, and only a level-3 \
                         heading sets a schedule: write \"### {text}\"",
                        level as u8
                    ),
                    HeadingKind::Invalid(error) => {
                        format!("{error} (and a schedule heading is level 3: \"### …\")")
                    }
                };
                let (line, column) = self.lines.line_col(h.start);
                self.bad_heading = Some((level, line, column, error));
            }
            _ => {}
        }
    }

    fn finish_task(&mut self, task: PendingTask) {
        let start = task.marker.end;
        let end = task.inline.end.unwrap_or(start).max(start);
        // The mark is read from the raw line, not from the parsed inline events: an unclosed
        // code span or a quote in an agent's input must not hide it.
        let first_line = self.lines.line_of(task.marker.start);
        let first_line_end = self.lines.line_end(first_line).max(start);
        let mark = find_mark(&self.lines.text[start..first_line_end]);
        let proposed_by = mark.map(|(_, name)| format!("{AGENT}{name}"));
        let cut = mark.map(|(at, _)| start + at);
        let text = extract(
            &self.lines,
            start..end,
            task.inline.starts,
            task.in_quote,
            cut,
        );
        if text.text.is_empty() {
            if self.in_active_section() {
                self.warn(task.marker.start, "empty task".to_string());
            }
            return;
        }
        let (line, column) = self.lines.line_col(task.marker.start);
        let (text_line, text_column) = self.lines.line_col(text.file_offset(0));
        let mut body = parse_body(&text, &self.lines);
        if body == Body::Plain
            && self.in_active_section()
            && !task.done
            && let Some(meant) = tool_call_in_disguise(&text.text)
        {
            self.warn(
                task.marker.start,
                format!(
                    "task {meant:?} is a reminder, not a tool call: a tool call starts the task \
                     with \"@name\" and nothing around it (\"- [ ] @{} {{…}}\")",
                    meant.trim_start_matches('@')
                ),
            );
        }
        // The n-th repeat of a task (n ≥ 1, in file order) gets the id of its content with
        // the occurrence number.
        let content = normalised_content(&body, &text.text);
        let mark = proposed_by.as_deref();
        let first = task_id(&self.canonical, self.section, mark, &content, 0);
        let n = self.occurrences.entry(first.clone()).or_insert(0);
        let id = if *n == 0 {
            first
        } else {
            task_id(&self.canonical, self.section, mark, &content, *n)
        };
        *n += 1;
        // Below a schedule heading that is not valid, an open task is invalid: same id (the
        // heading is no part of it), so fixing the heading keeps the task's history. A task
        // invalid by itself too says both, so that one fix does not just reveal the other.
        if let Some((_, line, column, error)) = &self.bad_heading
            && !task.done
        {
            let (tool, error) = match body {
                Body::Tool { name, .. } => (Some(name), error.clone()),
                Body::Invalid {
                    tool,
                    error: own,
                    line: own_line,
                    column: own_column,
                } => (
                    tool,
                    format!(
                        "{error}; and the task at line {own_line}, column {own_column} is \
                         invalid too: {own}"
                    ),
                ),
                Body::Plain => (None, error.clone()),
            };
            body = Body::Invalid {
                tool,
                error,
                line: *line,
                column: *column,
            };
        }
        self.tasks.push(Task {
            id,
            file: self.file.clone(),
            line,
            column,
            section: self.section,
            heading: self.heading.clone(),
            schedule: self.schedule.clone(),
            zone: self.schedule.as_ref().and(self.zone),
            jitter: self.schedule.as_ref().and(self.jitter),
            done: task.done,
            text: text.text,
            text_line,
            text_column,
            body,
            marker: task.marker,
            proposed_by,
        });
    }
}

/// Recurring, One-time or anything else, from a level-2 heading's text.
fn section_kind(text: &str) -> Section {
    match text.trim().to_lowercase().as_str() {
        "recurring" => Section::Recurring,
        "one-time" | "one time" | "onetime" | "once" => Section::OneTime,
        _ => Section::Other,
    }
}

/// Section names as the user would write them, lower-case, with their suggested spelling.
const SECTION_NAMES: [(&str, &str); 5] = [
    ("recurring", "Recurring"),
    ("one-time", "One-time"),
    ("one time", "One time"),
    ("onetime", "Onetime"),
    ("once", "Once"),
];

/// The section a heading probably meant, when its text starts with a section name (as a
/// whole word) but it is not exactly a section heading: `## Recurring tasks`,
/// `## Recurring:`, `# Recurring`, `### Once`; or, for a level-2 heading, when it or its
/// first words are a slip or two away from one (`## Recuring`, `## Reccuring tasks`).
fn near_miss_section(level: HeadingLevel, text: &str) -> Option<&'static str> {
    if level == HeadingLevel::H2 && section_kind(text) != Section::Other {
        return None;
    }
    let lower = text.trim().to_lowercase();
    let prefix = SECTION_NAMES.iter().find_map(|(name, shown)| {
        let rest = lower.strip_prefix(name)?;
        let whole_word = !rest
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
        whole_word.then_some(*shown)
    });
    if prefix.is_some() || level != HeadingLevel::H2 {
        return prefix;
    }
    // Two slips for the long names; one for `Once`, so that `## Done` stays a title.
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    SECTION_NAMES.iter().find_map(|(name, shown)| {
        let count = name.split(' ').count();
        let start = words.get(..count)?.join(" ");
        let slips = if name.len() > 4 { 2 } else { 1 };
        (strsim::osa_distance(&start, name) <= slips).then_some(*shown)
    })
}

// ---------------------------------------------------------------------------------------------
// Identity

/// What identifies a task inside its section: see docs/reference.md#task-identity.
fn normalised_content(body: &Body, text: &str) -> String {
    match body {
        // Most inputs are written with their keys in order: those are shown as they are,
        // without building a sorted copy first (the same text either way).
        Body::Tool { name, input } if keys_sorted(input) => {
            let input = serde_json::to_string(input).expect("a JSON map always serialises");
            format!("@{name} {input}")
        }
        Body::Tool { name, input } => {
            format!("@{name} {}", sorted_object(input))
        }
        Body::Plain => fold_whitespace(text),
        Body::Invalid { .. } => format!("@!{}", fold_whitespace(text)),
    }
}

/// SHA-256 (hex) of a tool's input as the task id sees it: compact JSON with every object's
/// keys sorted, the text after `@name ` in [`normalised_content`]. What a signed reply binds
/// an approval's input by (docs/reference.md#approvals-by-ntfy).
pub fn input_hash(input: &Value) -> String {
    let mut hex = String::with_capacity(64);
    for b in Sha256::digest(sorted_keys(input).to_string().as_bytes()) {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// Whether two tasks say the same (the content their ids are made from: tool and input, or
/// the text with runs of white space folded).
pub fn same_content(a: &Task, b: &Task) -> bool {
    normalised_content(&a.body, &a.text) == normalised_content(&b.body, &b.text)
}

/// `v` with every object's keys in sorted order, recursively: `serde_json` keeps insertion
/// order here (`preserve_order`), and ids must not depend on how the input was written.
/// Displayed, a `Value` is serde_json's compact text.
fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(map) => sorted_object(map),
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

fn sorted_object(map: &Map<String, Value>) -> Value {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.clone(), sorted_keys(v)))
            .collect(),
    )
}

/// Whether every object in `map` (itself included) has its keys in sorted order.
fn keys_sorted(map: &Map<String, Value>) -> bool {
    map.keys().is_sorted() && map.values().all(value_keys_sorted)
}

fn value_keys_sorted(v: &Value) -> bool {
    match v {
        Value::Object(map) => keys_sorted(map),
        Value::Array(items) => items.iter().all(value_keys_sorted),
        _ => true,
    }
}

/// The words of `text` joined by single spaces.
fn fold_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// First 12 hex digits of SHA-256 over path, section, the proposal mark (`mcp:NAME`, only
/// when there is one: a person's tasks keep the ids they always had), content and (from the
/// second one on) the occurrence number, so adding a duplicate below never changes the first
/// one's id. A marked copy of a person's task is another task, numbered among its own kind.
fn task_id(
    canonical: &str,
    section: Section,
    mark: Option<&str>,
    content: &str,
    occurrence: usize,
) -> String {
    let mut h = Sha256::new();
    h.update(canonical.as_bytes());
    h.update(b"\0");
    h.update(section.as_str().as_bytes());
    h.update(b"\0");
    if let Some(mark) = mark {
        h.update(mark.as_bytes());
        h.update(b"\0");
    }
    h.update(content.as_bytes());
    if occurrence > 0 {
        h.update(b"\0");
        h.update(occurrence.to_string().as_bytes());
    }
    let mut id = String::with_capacity(12);
    for b in &h.finalize()[..6] {
        let _ = write!(id, "{b:02x}");
    }
    id
}

// ---------------------------------------------------------------------------------------------
// Provenance

/// What a proposal's provenance starts with (`mcp:NAME`).
pub const AGENT: &str = "mcp:";
const MARK_OPEN: &str = "<!-- proposed by mcp:";
const MARK_CLOSE: &str = " -->";
/// The longest client name a mark holds.
pub const MAX_NAME: usize = 64;

/// Whether `name` may stand in a mark: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub fn is_mark_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The mark written after a proposed task: `<!-- proposed by mcp:NAME -->`. `name` must pass
/// [`is_mark_name`].
pub fn mark(name: &str) -> String {
    debug_assert!(is_mark_name(name), "{name:?}");
    format!("{MARK_OPEN}{name}{MARK_CLOSE}")
}

/// The mark that ends `line` (the raw bytes after an item's marker, up to its line break;
/// trailing blanks allowed): its offset in `line` and the client name.
fn find_mark(line: &str) -> Option<(usize, &str)> {
    let body = line
        .trim_end_matches([' ', '\t'])
        .strip_suffix(MARK_CLOSE)?;
    let at = body.rfind(MARK_OPEN)?;
    let name = &body[at + MARK_OPEN.len()..];
    is_mark_name(name).then_some((at, name))
}

// ---------------------------------------------------------------------------------------------
// Tool calls

/// The tool call a plain task's text looks meant as (`@log`), when it only misses being one
/// by markup around the name or a space after the `@`, and a JSON object follows:
/// `` `@log {…}` ``, `**@log** {…}`, `@ log {…}`. A reminder is never run, so the person
/// would wait for a tool that never runs. (`_@bob_ reviews` is a mention: no object.)
fn tool_call_in_disguise(text: &str) -> Option<String> {
    const MARKUP: [char; 5] = ['`', '*', '_', '~', ' '];
    let after_at = text
        .trim_start_matches(MARKUP)
        .strip_prefix('@')?
        .trim_start_matches(MARKUP);
    let name_len = after_at
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .unwrap_or(after_at.len());
    let name = &after_at[..name_len];
    let starts_well = name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_');
    let input_follows = after_at[name_len..]
        .trim_start_matches(MARKUP)
        .starts_with('{');
    (starts_well && input_follows).then(|| format!("@{name}"))
}

fn parse_body(text: &Extracted, lines: &LineIndex<'_>) -> Body {
    let t = text.text.as_str();
    let Some(after_at) = t.strip_prefix('@') else {
        return Body::Plain;
    };
    let bytes = after_at.as_bytes();
    if !bytes
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        return Body::Plain;
    }
    let name_len = bytes
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')))
        .unwrap_or(bytes.len());
    let name = after_at[..name_len].to_string();
    let after_name = &after_at[name_len..];
    let rest = after_name.trim();
    let rest_at = 1 + name_len + (after_name.len() - after_name.trim_start().len());
    if rest.is_empty() {
        return Body::Tool {
            name,
            input: Map::new(),
        };
    }
    let invalid = |error: String, offset_in_rest: usize| {
        let (line, column) = lines.line_col(text.file_offset(rest_at + offset_in_rest));
        Body::Invalid {
            tool: Some(name.clone()),
            error,
            line,
            column,
        }
    };
    match serde_json::from_str(rest) {
        Ok(Value::Object(input)) => Body::Tool { name, input },
        Ok(other) => {
            let found = match other {
                Value::Array(_) => "an array",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Bool(_) => "a boolean",
                Value::Null => "null",
                Value::Object(_) => "an object",
            };
            invalid(
                format!("expected a JSON object after @{name}, found {found}"),
                0,
            )
        }
        Err(e) => {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let mut message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
            let offset = serde_offset(rest, e.line(), e.column());
            // `{'url': …}`: the commonest slip from Python or JavaScript, said in its words.
            if rest[..offset.min(rest.len())].ends_with('\'')
                || rest.get(offset..).is_some_and(|r| r.starts_with('\''))
            {
                message.push_str(" (JSON needs double quotes: \"key\": \"value\", not 'key')");
            }
            invalid(message, offset)
        }
    }
}

/// serde_json's (line, column) → byte offset in its input. Its column counts bytes since the
/// last `\n` up to just past the offending byte (0 when the error sits at a line start).
fn serde_offset(input: &str, line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let mut line_start = 0;
    for _ in 1..line {
        match input[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => break,
        }
    }
    let mut off = (line_start + column.saturating_sub(1)).min(input.len());
    while !input.is_char_boundary(off) {
        off -= 1;
    }
    off
}

// ---------------------------------------------------------------------------------------------
// Source text and positions

/// Line starts of the whole text, for offset → (line, column) by bisection.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    bom: usize,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str, bom: usize) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for i in memchr::memchr2_iter(b'\n', b'\r', bytes) {
            // A `\r\n` ends its line at the `\n`.
            if bytes[i] == b'\n' || bytes.get(i + 1) != Some(&b'\n') {
                starts.push(i + 1);
            }
        }
        LineIndex { text, bom, starts }
    }

    /// 0-based index of the line holding `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset) - 1
    }

    /// Offset just past the line's content, before its line break.
    fn line_end(&self, line: usize) -> usize {
        match self.starts.get(line + 1) {
            Some(&next) => {
                let b = self.text.as_bytes();
                if next >= 2 && b[next - 1] == b'\n' && b[next - 2] == b'\r' {
                    next - 2
                } else {
                    next - 1
                }
            }
            None => self.text.len(),
        }
    }

    /// 1-based (line, column) of a byte offset; the column counts characters, not the BOM.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_of(offset);
        let from = if line == 0 {
            self.bom.min(offset)
        } else {
            self.starts[line]
        };
        let column = self.text.get(from..offset).map_or(0, |s| s.chars().count()) + 1;
        (line + 1, column)
    }
}

/// Text cut from the source, with the way back from text offsets to file offsets.
struct Extracted {
    text: String,
    /// One per source line, in the untrimmed text.
    segments: Vec<Segment>,
    /// Bytes trimmed off the front of the untrimmed text.
    lead: usize,
}

#[derive(Clone, Copy)]
struct Segment {
    text_start: usize,
    file_start: usize,
    len: usize,
}

impl Extracted {
    /// File offset of a byte offset in `text`. The `\n` joining two lines maps to the end of
    /// the first line's content.
    fn file_offset(&self, offset: usize) -> usize {
        let u = offset + self.lead;
        let i = self
            .segments
            .partition_point(|s| s.text_start <= u)
            .saturating_sub(1);
        match self.segments.get(i) {
            Some(s) => s.file_start + (u - s.text_start).min(s.len),
            None => 0,
        }
    }
}

/// Cut `range` out of the source: the first line from `range.start`, every later line without
/// its container prefix (indentation, and `>` markers inside block quotes), lines joined with
/// `\n`, the whole trimmed. `starts` are where inline events begin: a prefix never
/// extends past one (a line may start with an escaped `\>` or `\ `-like content).
/// `cut`: where the first line ends instead of at its line break (a proposal mark).
fn extract(
    lines: &LineIndex<'_>,
    range: Range<usize>,
    mut starts: Vec<usize>,
    in_quote: bool,
    cut: Option<usize>,
) -> Extracted {
    let src = lines.text;
    let bytes = src.as_bytes();
    let first = lines.line_of(range.start);
    let last = lines.line_of(range.end.max(range.start));
    starts.sort_unstable();

    let mut raw = String::new();
    let mut segments = Vec::new();
    for line in first..=last {
        let line_end = match cut {
            Some(cut) if line == first => cut,
            _ => lines.line_end(line),
        }
        .min(range.end);
        let begin = if line == first {
            range.start
        } else {
            let line_start = lines.starts[line];
            let next_inline = starts
                .get(starts.partition_point(|&s| s < line_start))
                .copied()
                .unwrap_or(usize::MAX);
            let cap = next_inline.min(line_end);
            let mut p = line_start;
            while p < cap && (matches!(bytes[p], b' ' | b'\t') || (in_quote && bytes[p] == b'>')) {
                p += 1;
            }
            p
        };
        let piece = src.get(begin..line_end.max(begin)).unwrap_or("").trim_end();
        if line != first {
            raw.push('\n');
        }
        segments.push(Segment {
            text_start: raw.len(),
            file_start: begin,
            len: piece.len(),
        });
        raw.push_str(piece);
    }
    let trimmed_front = raw.trim_start();
    let lead = raw.len() - trimmed_front.len();
    let text = trimmed_front.trim_end().to_string();
    Extracted {
        text,
        segments,
        lead,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const PATH: &str = "/tmp/hb/HEARTBEAT.md";

    fn p(text: &str) -> ParsedFile {
        parse(Path::new(PATH), Path::new(PATH), text)
    }

    fn texts(text: &str) -> Vec<String> {
        p(text).tasks.into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn an_input_hash_is_over_the_input_as_the_task_id_normalises_it() {
        let written = serde_json::json!({"b": "x", "a": {"d": [{"f": 1, "e": 2}], "c": 3}});
        let Value::Object(map) = &written else {
            unreachable!()
        };
        let body = Body::Tool {
            name: "t".into(),
            input: map.clone(),
        };
        let normal = r#"{"a":{"c":3,"d":[{"e":2,"f":1}]},"b":"x"}"#;
        assert_eq!(normalised_content(&body, ""), format!("@t {normal}"));
        // printf '%s' '{"a":{"c":3,"d":[{"e":2,"f":1}]},"b":"x"}' | sha256sum
        assert_eq!(
            input_hash(&written),
            "f40dced4402bcd4a24598c3186175f92612477a5f8c81cf2dd48507d7ca7e0cb"
        );
    }

    fn only(text: &str) -> Task {
        let mut parsed = p(text);
        assert_eq!(parsed.tasks.len(), 1, "{:#?}", parsed.tasks);
        parsed.tasks.remove(0)
    }

    #[test]
    fn single_quotes_are_told_to_be_double_quotes() {
        let (error, _, _) = invalid("## Recurring\n- [ ] @http {'url': 'https://x'}\n");
        assert!(
            error.ends_with("(JSON needs double quotes: \"key\": \"value\", not 'key')"),
            "{error}"
        );
        let (error, _, _) = invalid("## Recurring\n- [ ] @log {\"text\": 'hi'}\n");
        assert!(error.contains("JSON needs double quotes"), "{error}");
        // Another slip gets no such hint.
        let (error, _, _) = invalid("## Recurring\n- [ ] @log {\"text\": \"hi\",}\n");
        assert!(!error.contains("double quotes"), "{error}");
    }

    fn invalid(text: &str) -> (String, usize, usize) {
        match only(text).body {
            Body::Invalid {
                error,
                line,
                column,
                ..
            } => (error, line, column),
            other => panic!("not invalid: {other:?}"),
        }
    }

    fn tool(text: &str) -> (String, Value) {
        match only(text).body {
            Body::Tool { name, input } => (name, Value::Object(input)),
            other => panic!("not a tool: {other:?}"),
        }
    }

    #[test]
    fn spec_example() {
        let text = include_str!("../../fixtures/markdown/spec-example.md");
        let parsed = p(text);
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        assert_eq!(parsed.path, PathBuf::from(PATH));
        type Row<'a> = (Section, Option<&'a str>, bool, Option<&'a str>, usize);
        let got: Vec<Row> = parsed
            .tasks
            .iter()
            .map(|t| {
                (
                    t.section,
                    t.heading.as_deref(),
                    t.done,
                    t.tool_name(),
                    t.line,
                )
            })
            .collect();
        use Section::*;
        assert_eq!(
            got,
            vec![
                (Recurring, None, false, Some("backup"), 4),
                (Recurring, None, false, None, 5),
                (Recurring, Some("Every 6h"), false, Some("shell"), 8),
                (
                    Recurring,
                    Some("Weekdays at 09:00"),
                    false,
                    Some("agent"),
                    11
                ),
                (OneTime, None, false, Some("http"), 14),
                (OneTime, None, true, None, 15),
                (
                    OneTime,
                    Some("At 2026-12-24 18:00"),
                    false,
                    Some("notify"),
                    18
                ),
            ]
        );
        let t = &parsed.tasks;
        assert_eq!(t[1].text, "Stretch and drink water");
        assert_eq!(t[1].body, Body::Plain);
        assert_eq!((t[1].column, t[1].text_line, t[1].text_column), (3, 5, 7));
        assert_eq!(&text[t[1].marker.clone()], "[ ]");
        assert_eq!(&text[t[5].marker.clone()], "[x]");
        assert_eq!(t[0].schedule, None);
        assert_eq!(
            t[2].schedule,
            Some(Schedule::Every(std::time::Duration::from_secs(6 * 3600)))
        );
        assert!(matches!(t[3].schedule, Some(Schedule::At { .. })));
        assert!(matches!(t[6].schedule, Some(Schedule::Once(_))));
        match &t[2].body {
            Body::Tool { name, input } => {
                assert_eq!(name, "shell");
                assert_eq!(
                    Value::Object(input.clone()),
                    serde_json::json!({"cmd": ["git", "-C", "/srv/notes", "pull", "--ff-only"]})
                );
            }
            other => panic!("{other:?}"),
        }
        for task in t {
            assert_eq!(*task.file, *Path::new(PATH));
            assert_eq!(task.id.len(), 12);
            assert!(
                task.id
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
    }

    #[test]
    fn section_names() {
        let cases = [
            ("Recurring", Section::Recurring),
            ("  RECURRING  ", Section::Recurring),
            ("recurring", Section::Recurring),
            ("One-time", Section::OneTime),
            ("one-TIME", Section::OneTime),
            ("One time", Section::OneTime),
            ("Onetime", Section::OneTime),
            ("ONCE", Section::OneTime),
            ("Recurring tasks", Section::Other),
            ("Ideas", Section::Other),
            ("One  time", Section::Other),
        ];
        for (name, want) in cases {
            let t = only(&format!("## {name}\n- [ ] a\n"));
            assert_eq!(t.section, want, "{name:?}");
        }
        // ATX closing sequence is not part of the name.
        assert_eq!(only("## Once ##\n- [ ] a\n").section, Section::OneTime);
    }

    #[test]
    fn sections_before_any_heading_and_after_level_1_are_other() {
        let parsed = p(
            "- [ ] before\n## Recurring\n- [ ] in\n# Notes\n- [ ] after h1\n\
                        ## Once\n- [ ] once\n#### Deep\n- [ ] still once\n",
        );
        let got: Vec<(&str, Section)> = parsed
            .tasks
            .iter()
            .map(|t| (t.text.as_str(), t.section))
            .collect();
        assert_eq!(
            got,
            vec![
                ("before", Section::Other),
                ("in", Section::Recurring),
                ("after h1", Section::Other),
                ("once", Section::OneTime),
                ("still once", Section::OneTime),
            ]
        );
    }

    #[test]
    fn setext_headings_count() {
        let parsed =
            p("Recurring\n---------\n- [ ] a\n\nTitle\n=====\n- [ ] b\n\nOnce\n--\n- [ ] c\n");
        let got: Vec<Section> = parsed.tasks.iter().map(|t| t.section).collect();
        assert_eq!(
            got,
            vec![Section::Recurring, Section::Other, Section::OneTime]
        );
    }

    #[test]
    fn level_3_headings_set_schedule_until_next_heading() {
        let parsed = p("## Recurring\n### Every 30m\n- [ ] a\n#### Note\n- [ ] b\n\
                        ### Daily at 08:00\n- [ ] c\n## Once\n- [ ] d\n");
        let t = &parsed.tasks;
        assert_eq!(t[0].heading.as_deref(), Some("Every 30m"));
        assert_eq!(
            t[0].schedule,
            Some(Schedule::Every(std::time::Duration::from_secs(1800)))
        );
        // Level 4 changes nothing.
        assert_eq!(t[1].heading.as_deref(), Some("Every 30m"));
        assert_eq!(t[1].schedule, t[0].schedule);
        assert_eq!(t[2].heading.as_deref(), Some("Daily at 08:00"));
        assert!(matches!(t[2].schedule, Some(Schedule::At { .. })));
        // A level-2 heading ends the schedule.
        assert_eq!((t[3].heading.as_deref(), &t[3].schedule), (None, &None));
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    }

    #[test]
    fn title_heading_is_only_a_title() {
        let parsed = p("## Recurring\n\n### Chores\n- [ ] a\n\n## Ideas\n### Someday\n- [ ] b\n");
        assert_eq!(parsed.tasks[0].heading.as_deref(), Some("Chores"));
        assert_eq!(parsed.tasks[0].schedule, None);
        assert_eq!(parsed.tasks[0].body, Body::Plain);
        assert_eq!(parsed.tasks[1].heading.as_deref(), Some("Someday"));
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    }

    /// (line, column, error) of an invalid task.
    fn invalid_at(t: &Task) -> (usize, usize, &str) {
        match &t.body {
            Body::Invalid {
                line,
                column,
                error,
                ..
            } => (*line, *column, error.as_str()),
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn a_bad_schedule_heading_makes_every_open_task_below_it_invalid() {
        let text = "## Recurring\n\n  ### Evry 6h\n- [ ] @log {\"text\": \"a\"}\n- [ ] plain\n\
                    - [x] done\n- [ ] @x [1]\n#### Detail\n- [ ] under level 4\n\
                    ### Chores\n- [ ] fine\n";
        let parsed = p(text);
        let t = &parsed.tasks;
        let msg = format!(
            "schedule heading \"Evry 6h\" is not a valid recurring schedule (did you mean \
             \"Every 6h\"?); {}",
            schedule::RECURRING_FORMS
        );
        for i in [0, 1, 3, 4] {
            assert!(invalid_at(&t[i]).2.starts_with(&msg), "{:?}", t[i]);
            assert_eq!(t[i].schedule, None);
            assert_eq!(t[i].heading.as_deref(), Some("Evry 6h"));
        }
        for i in [0, 1, 4] {
            assert_eq!(invalid_at(&t[i]), (3, 3, msg.as_str()), "{:?}", t[i]);
        }
        // A task invalid by itself too says both errors at once.
        assert_eq!(
            invalid_at(&t[3]),
            (
                3,
                3,
                format!(
                    "{msg}; and the task at line 7, column 10 is invalid too: expected a JSON \
                     object after @x, found an array"
                )
                .as_str()
            )
        );
        // The tool name stays; the id is the task's own, so fixing the heading keeps it.
        assert_eq!(t[0].tool_name(), Some("log"));
        assert_eq!(t[1].tool_name(), None);
        let fixed = p(&text.replace("Evry", "Every"));
        assert_eq!(t[0].id, fixed.tasks[0].id);
        assert_eq!(
            fixed.tasks[0].body,
            Body::Tool {
                name: "log".into(),
                input: serde_json::from_str(r#"{"text": "a"}"#).unwrap()
            }
        );
        // A done task is never run anyway: it keeps its body.
        assert!(t[2].done);
        assert!(matches!(t[2].body, Body::Plain));
        // The next level-3 heading ends it.
        assert_eq!(t[5].body, Body::Plain);
        // Not a warning: the tasks carry the error (and a title is no problem either).
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    }

    #[test]
    fn a_level_2_heading_ends_a_bad_schedule_heading() {
        let parsed = p("## Once\n### At 2026-12-24 6pm\n- [ ] a\n## Recurring\n- [ ] b\n");
        assert_eq!(
            invalid_at(&parsed.tasks[0]).2,
            format!(
                "schedule heading \"At 2026-12-24 6pm\" is not a valid one-time schedule; {}",
                schedule::ONE_TIME_FORMS
            )
        );
        assert_eq!(parsed.tasks[1].body, Body::Plain);
        let parsed = p("## Once\n### At 2026-12-24 6pm\n# Part two\n- [ ] a\n");
        assert_eq!(parsed.tasks[0].body, Body::Plain);
        // Outside Recurring and One-time nothing runs: a heading there is only a title.
        let parsed = p("## Notes\n### Evry 6h\n- [ ] a\n");
        assert_eq!(parsed.tasks[0].body, Body::Plain);
        assert!(parsed.problems.is_empty());
    }

    #[test]
    fn a_schedule_below_level_3_fails_closed_and_above_it_is_a_warning() {
        let text = "## One-time\n#### At 2027-01-01 10:00\n- [ ] a\n#### Notes\n- [ ] b\n\
                    ### At 2027-01-01\n#### Details\n- [ ] c\n\
                    ## Every 6h\n- [ ] d\n\
                    ## Recurring\n### Evry 6h\n##### Every 6h\n- [ ] e\n### Chores\n- [ ] f\n";
        let parsed = p(text);
        let t = &parsed.tasks;
        // A level-4 schedule would leave its task due now: invalid, up to the next heading
        // of its level.
        assert_eq!(
            invalid_at(&t[0]),
            (
                2,
                1,
                "schedule heading \"At 2027-01-01 10:00\" is a level-4 heading, and only a \
                 level-3 heading sets a schedule: write \"### At 2027-01-01 10:00\""
            )
        );
        assert_eq!(t[1].body, Body::Plain);
        // A title below a level-3 schedule keeps it.
        assert_eq!(t[2].body, Body::Plain);
        assert!(t[2].schedule.is_some());
        // At level 2 it is a section of its own, whose tasks never run: a warning.
        assert_eq!(t[3].section, Section::Other);
        assert_eq!(
            parsed
                .problems
                .iter()
                .map(|w| (w.line, w.severity))
                .collect::<Vec<_>>(),
            [(9, Severity::Warning)]
        );
        assert!(parsed.problems[0].message.contains("(\"### Every 6h\")"));
        // Below a bad level-3 heading, a level-5 one keeps the first error.
        assert_eq!(invalid_at(&t[4]).0, 12);
        assert_eq!(t[5].body, Body::Plain);
    }

    #[test]
    fn a_tool_call_hidden_by_markup_is_a_reminder_with_a_warning() {
        let text = "## Recurring\n- [ ] `@log {\"text\": \"a\"}`\n- [ ] **@log** {}\n\
                    - [ ] @ log {}\n- [ ] _@bob_ reviews the PR\n- [ ] `@log` is a tool\n\
                    - [x] `@log {}`\n## Notes\n- [ ] `@log {}`\n";
        let parsed = p(text);
        assert!(parsed.tasks.iter().all(|t| t.body == Body::Plain));
        let w = warnings(text);
        assert_eq!(
            w.iter().map(|(l, c, _)| (*l, *c)).collect::<Vec<_>>(),
            [(2, 3), (3, 3), (4, 3)]
        );
        assert!(
            w[0].2
                .starts_with("task \"@log\" is a reminder, not a tool call"),
            "{w:?}"
        );
    }

    #[test]
    fn wrong_section_schedule_is_invalid() {
        let parsed =
            p("## Once\n### Every 6h\n- [ ] a\n## Recurring\n### At 2026-12-24\n- [ ] b\n");
        assert!(parsed.tasks.iter().all(|t| t.schedule.is_none()));
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        let (line, column, msg) = invalid_at(&parsed.tasks[0]);
        assert_eq!((line, column), (2, 1));
        assert!(msg.contains("move it under \"## Recurring\""), "{msg}");
        let (line, column, msg) = invalid_at(&parsed.tasks[1]);
        assert_eq!((line, column), (5, 1));
        assert!(msg.contains("move it under \"## One-time\""), "{msg}");
    }

    fn warnings(text: &str) -> Vec<(usize, usize, String)> {
        p(text)
            .problems
            .into_iter()
            .map(|w| {
                assert_eq!(w.severity, Severity::Warning);
                (w.line, w.column, w.message)
            })
            .collect()
    }

    #[test]
    fn near_miss_section_headings_are_warnings() {
        let w = |line, text: &str, meant: &str| {
            (
                line,
                1,
                format!("heading {text:?} is not a section name; did you mean \"## {meant}\"?"),
            )
        };
        assert_eq!(
            warnings(
                "# Recurring\n## Recurring tasks\n## recurring:\n## One-time tasks\n\
                 ## Recurring\n### Recurring\n#### once more\n## One time:\n"
            ),
            vec![
                w(1, "Recurring", "Recurring"),
                w(2, "Recurring tasks", "Recurring"),
                w(3, "recurring:", "Recurring"),
                w(4, "One-time tasks", "One-time"),
                w(6, "Recurring", "Recurring"),
                w(7, "once more", "Once"),
                w(8, "One time:", "One time"),
            ]
        );
        // Exactly a section, another word, or quoted: no warning.
        assert!(
            warnings(
                "## Recurring\n##  ONE-TIME \n## Onetime\n## Once\n## Recurrence\n\
                 # Oncer\n> ## Recurring tasks\n"
            )
            .is_empty()
        );
        // The near-miss leaves its tasks ignored, as before.
        assert_eq!(
            p("## Recurring tasks\n- [ ] a\n").tasks[0].section,
            Section::Other
        );
    }

    #[test]
    fn a_marker_glued_to_its_text_is_a_warning() {
        let w = warnings("## Recurring\n- [ ]@log {\"text\": \"x\"}\n- [x]done\n- [ ] fine\n");
        assert_eq!(
            w,
            vec![
                (
                    2,
                    3,
                    "\"[ ]\" is not a task: write a space after the marker (\"- [ ] @log \
                     {\"text\": \"x\"}\")"
                        .to_string()
                ),
                (
                    3,
                    3,
                    "\"[x]\" is not a task: write a space after the marker (\"- [x] done\")"
                        .to_string()
                ),
            ]
        );
        assert_eq!(p("## Recurring\n- [ ]@log {}\n").tasks.len(), 0);
        // Outside the sections, or inside a sentence, nothing is said.
        assert!(warnings("## Notes\n- [ ]x\n## Recurring\n- see [ ]here\n").is_empty());
    }

    #[test]
    fn a_bullet_glued_to_its_marker_is_a_warning_and_no_part_of_the_task_above() {
        let md = "## Recurring\n* [ ] water the plants\n-[ ] @log {\"text\": \"b\"\n\n\
                  *[x] done\n\n```\n-[ ] in code\n```\n- [ ] @log {\"text\": \"c\"}\n";
        let parsed = p(md);
        let texts: Vec<&str> = parsed.tasks.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["water the plants", "@log {\"text\": \"c\"}"]);
        assert_eq!(
            warnings(md),
            vec![
                (
                    3,
                    1,
                    "\"-[ ]\" is not a task: write a space after \"-\" (\"- [ ] @log \
                     {\"text\": \"b\"\")"
                        .to_string()
                ),
                (
                    5,
                    1,
                    "\"*[x]\" is not a task: write a space after \"*\" (\"- [x] done\")"
                        .to_string()
                ),
            ]
        );
        // Below a task whose JSON is fine, the task stays valid; outside the sections,
        // nothing is said.
        let parsed = p("## Recurring\n- [ ] @log {\"text\": \"a\"}\n-[ ] x\n");
        assert!(matches!(parsed.tasks[0].body, Body::Tool { .. }));
        assert!(warnings("## Notes\n- [ ] a\n-[ ] x\n").is_empty());
    }

    #[test]
    fn bracket_pair_without_space_is_a_warning() {
        let msg = "\"[]\" is not a task marker; write \"- [ ] <task>\" (with a space between the \
                   brackets)"
            .to_string();
        assert_eq!(
            warnings("## Recurring\n- []\n- [] @log {}\n\n* []\n\n## Notes\n- []\n"),
            vec![(2, 3, msg.clone()), (3, 3, msg.clone()), (5, 3, msg)]
        );
        assert!(p("## Recurring\n- [] x\n").tasks.is_empty());
        assert!(warnings("## Recurring\n- a []\n- [ ] b []\n").is_empty());
    }

    #[test]
    fn every_list_marker_kind() {
        let text = "## Recurring\n- [ ] dash\n\n* [ ] star\n\n+ [ ] plus\n\n1. [ ] dot\n\n\
                    7) [x] paren\n\n10. [X] upper\n";
        let parsed = p(text);
        let got: Vec<(&str, bool, usize, usize)> = parsed
            .tasks
            .iter()
            .map(|t| (t.text.as_str(), t.done, t.line, t.column))
            .collect();
        assert_eq!(
            got,
            vec![
                ("dash", false, 2, 3),
                ("star", false, 4, 3),
                ("plus", false, 6, 3),
                ("dot", false, 8, 4),
                ("paren", true, 10, 4),
                ("upper", true, 12, 5),
            ]
        );
        for t in &parsed.tasks {
            assert_eq!(t.marker.len(), 3);
            assert_eq!(text.as_bytes()[t.marker.start], b'[');
        }
    }

    #[test]
    fn not_a_task_list_item() {
        assert!(texts("- [] a\n- [y] b\n-[ ] c\n- [ ]not spaced\nplain [ ] text\n").is_empty());
        // A marker not at the start of the item.
        assert!(texts("- a [ ] b\n").is_empty());
    }

    #[test]
    fn nested_tasks_have_their_own_text() {
        let parsed = p(
            "## Once\n- [ ] parent\n  more parent\n  - [ ] child\n    - [x] grandchild\n  \
                        - plain item\n    - [ ] under a plain item\n",
        );
        let got: Vec<(&str, usize, usize)> = parsed
            .tasks
            .iter()
            .map(|t| (t.text.as_str(), t.line, t.column))
            .collect();
        assert_eq!(
            got,
            vec![
                ("parent\nmore parent", 2, 3),
                ("child", 4, 5),
                ("grandchild", 5, 7),
                ("under a plain item", 7, 7),
            ]
        );
    }

    #[test]
    fn text_stops_at_the_first_block() {
        assert_eq!(
            texts("- [ ] first\n\n  second paragraph\n"),
            vec!["first".to_string()]
        );
        assert_eq!(
            texts("- [ ] first\n  ```\n  code\n  ```\n"),
            vec!["first".to_string()]
        );
        assert_eq!(texts("- [ ] a\n  > quoted\n"), vec!["a".to_string()]);
    }

    #[test]
    fn cr_only_files_keep_fenced_code_out() {
        let text = "## One-time\r\r```\r- [ ] @log {\"text\": \"in code\"}\r```\r- [ ] real\r";
        let parsed = p(text);
        assert_eq!(parsed.tasks.len(), 1, "{:?}", parsed.tasks);
        let t = &parsed.tasks[0];
        assert_eq!(t.text, "real");
        assert_eq!(t.line, 6);
        assert_eq!(&text[t.marker.clone()], "[ ]");
    }

    #[test]
    fn tasks_in_blockquotes() {
        let text = "## Recurring\n> - [ ] @x {\"a\":\n>   1}\n>\n> > 1. [ ] deep\n> >    er\n";
        let parsed = p(text);
        assert_eq!(parsed.tasks.len(), 2);
        let t = &parsed.tasks[0];
        assert_eq!(t.section, Section::Recurring);
        assert_eq!(t.text, "@x {\"a\":\n1}");
        assert_eq!((t.line, t.column), (2, 5));
        assert_eq!(
            t.body,
            Body::Tool {
                name: "x".into(),
                input: serde_json::from_str(r#"{"a":1}"#).unwrap()
            }
        );
        assert_eq!(parsed.tasks[1].text, "deep\ner");
        assert_eq!((parsed.tasks[1].line, parsed.tasks[1].column), (5, 8));
    }

    #[test]
    fn headings_in_quotes_and_items_do_not_make_sections() {
        // A quoted example of a HEARTBEAT.md is not work to do.
        let text = "> ## Recurring\n> - [ ] @shell {\"cmd\": \"rm -rf /\"}\n\n- [ ] x\n  ## Recurring\n  - [ ] @log {}\n";
        let parsed = p(text);
        assert_eq!(parsed.tasks.len(), 3);
        assert!(parsed.tasks.iter().all(|t| t.section == Section::Other));
        // Nor do they end the file's own section or schedule.
        let text = "## Recurring\n### Every 6h\n> ## Notes\n> ### Daily at 09:00\n- [ ] @log {}\n";
        let t = &p(text).tasks[0];
        assert_eq!(t.section, Section::Recurring);
        assert_eq!(t.heading.as_deref(), Some("Every 6h"));
    }

    #[test]
    fn code_and_html_blocks_are_not_tasks() {
        let text = include_str!("../../fixtures/markdown/not-tasks.md");
        assert_eq!(texts(text), vec!["the only task".to_string()]);
    }

    #[test]
    fn loose_and_tight_items_read_the_same() {
        let tight = p("- [ ] a *b*\n  c\n- [x] d\n");
        let loose = p("- [ ] a *b*\n  c\n\n- [x] d\n");
        let t: Vec<_> = tight
            .tasks
            .iter()
            .map(|t| (&t.text, &t.id, t.done))
            .collect();
        let l: Vec<_> = loose
            .tasks
            .iter()
            .map(|t| (&t.text, &t.id, t.done))
            .collect();
        assert_eq!(t, l);
        assert_eq!(tight.tasks[0].text, "a *b*\nc");
    }

    #[test]
    fn marker_alone_on_its_line_takes_the_next_paragraph() {
        let t = only("- [ ]\n  @x {\"a\": 1}\n");
        assert_eq!(t.text, "@x {\"a\": 1}");
        assert_eq!((t.text_line, t.text_column), (2, 3));
        assert_eq!(only("- [ ]\n  text\n\n- b\n").text, "text");
    }

    #[test]
    fn text_is_verbatim_source() {
        let t = only("- [ ]   *emph* \\* &amp; `co  de` <b>x</b> [l](u)   \n");
        assert_eq!(t.text, "*emph* \\* &amp; `co  de` <b>x</b> [l](u)");
        assert_eq!((t.text_line, t.text_column), (1, 9));
        // An escape at the start of a continuation line keeps its backslash.
        assert_eq!(only("- [ ] a\n  \\# b\n").text, "a\n\\# b");
        // Hard breaks: trailing spaces go, a backslash stays.
        assert_eq!(only("- [ ] a  \n  b\\\n  c\n").text, "a\nb\\\nc");
    }

    #[test]
    fn empty_task_is_a_warning() {
        let parsed = p("## Recurring\n- [ ]\n- [ ]   \n- [x]\n\n## Ideas\n- [ ]\n");
        assert!(parsed.tasks.is_empty());
        let lines: Vec<(usize, usize, &str)> = parsed
            .problems
            .iter()
            .map(|w| (w.line, w.column, w.message.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (2, 3, "empty task"),
                (3, 3, "empty task"),
                (4, 3, "empty task")
            ]
        );
    }

    #[test]
    fn tool_calls() {
        assert_eq!(
            tool("- [ ] @backup"),
            ("backup".into(), serde_json::json!({}))
        );
        assert_eq!(
            tool("- [ ] @a.b-c_9   \n"),
            ("a.b-c_9".into(), serde_json::json!({}))
        );
        assert_eq!(
            tool("- [ ] @_x{\"k\": [1, {\"z\": null}]}"),
            ("_x".into(), serde_json::json!({"k": [1, {"z": null}]}))
        );
        assert_eq!(
            tool("- [ ] @shell {\"cmd\":\n  [\"ls\",\n   \"-l\"]}\n"),
            ("shell".into(), serde_json::json!({"cmd": ["ls", "-l"]}))
        );
        // Not a tool name: plain tasks.
        for text in [
            "- [ ] @ backup",
            "- [ ] @1x {}",
            "- [ ] @",
            "- [ ] a @x {}",
            "- [ ] @-x",
        ] {
            assert_eq!(only(text).body, Body::Plain, "{text}");
        }
    }

    #[test]
    fn invalid_json_kinds_with_positions() {
        let e = |s| invalid(s);
        assert_eq!(
            e("- [ ] @x [1, 2]"),
            (
                "expected a JSON object after @x, found an array".into(),
                1,
                10
            )
        );
        assert_eq!(
            e("- [ ] @x   42\n"),
            (
                "expected a JSON object after @x, found a number".into(),
                1,
                12
            )
        );
        assert_eq!(
            e("- [ ] @x \"s\""),
            (
                "expected a JSON object after @x, found a string".into(),
                1,
                10
            )
        );
        assert_eq!(
            e("- [ ] @x true"),
            (
                "expected a JSON object after @x, found a boolean".into(),
                1,
                10
            )
        );
        assert_eq!(
            e("- [ ] @x null"),
            ("expected a JSON object after @x, found null".into(), 1, 10)
        );
        // Trailing text after the object: serde's own message, at the first extra character.
        assert_eq!(
            e("- [ ] @x {\"a\": 1} please"),
            ("trailing characters".into(), 1, 19)
        );
        // Words after the name.
        assert_eq!(e("- [ ] @x call me"), ("expected value".into(), 1, 10));
        // Unterminated object: at its last character.
        assert_eq!(
            e("- [ ] @x {\"a\": 1"),
            ("EOF while parsing an object".into(), 1, 16)
        );
        // Across continuation lines: the error is placed in the file, prefixes counted.
        let (msg, line, column) =
            e("## Recurring\n- [ ] @shell {\"cmd\":\n  [\"ls\",\n  \"-l\" oops]}\n");
        assert_eq!((msg.as_str(), line, column), ("expected `,` or `]`", 4, 8));
        let (msg, line, column) = e("> - [ ] @x {\"a\":\n>   1,,}\n");
        assert_eq!((msg.as_str(), line, column), ("key must be a string", 2, 7));
        // Columns count characters, not bytes.
        let (_, line, column) = e("- [ ] @x {\"é€\": 1 2}");
        assert_eq!((line, column), (1, 19));
        // The invalid task keeps its tool name.
        assert_eq!(only("- [ ] @x [").tool_name(), Some("x"));
    }

    #[test]
    fn id_formula() {
        // sha256("/tmp/hb/HEARTBEAT.md\0recurring\0Stretch and drink water")[..12]
        let t = only("## Recurring\n- [ ] Stretch   and\n  drink water\n");
        assert_eq!(t.id, "6ede4bb67a20");
        // Keys sorted, compact: `@backup {"a":1,"path":"/home"}`.
        let t = only("## Recurring\n- [ ] @backup {\"path\": \"/home\",\n  \"a\": 1}\n");
        assert_eq!(t.id, "f5ef02add3f4");
        // The second occurrence gets "\01" appended.
        let parsed =
            p("## Recurring\n- [ ] Stretch and drink water\n- [x] Stretch and drink water\n");
        assert_eq!(parsed.tasks[0].id, "6ede4bb67a20");
        assert_eq!(parsed.tasks[1].id, "445638565d4a");
    }

    fn id(text: &str) -> String {
        only(text).id
    }

    #[test]
    fn ids_are_stable_across_formatting() {
        let a = id("## Recurring\n- [ ] @x {\"a\": 1, \"b\": {\"d\": [1, 2], \"c\": \"s\"}}\n");
        let b = id(
            "## Recurring\n\n### Every 6h\n\n* [x] @x   {\"b\":{\"c\":\"s\",\n  \"d\":[1,2]},\"a\":1}\n",
        );
        assert_eq!(a, b);
        // Written in sorted order already (shown as it is), the same id.
        let sorted =
            id("## Recurring\n- [ ] @x {\"a\": 1, \"b\": {\"c\": \"s\", \"d\": [1, 2]}}\n");
        assert_eq!(a, sorted);
        assert_eq!(
            id("## Recurring\n- [ ] @x {\"l\": [{\"b\": 1, \"a\": 2}]}\n"),
            id("## Recurring\n- [ ] @x {\"l\": [{\"a\": 2, \"b\": 1}]}\n")
        );
        assert_eq!(
            id("## Once\n- [ ] drink   water"),
            id("## Once\n1. [x] drink\n   water\n")
        );
        // Same section kind in another place of the file.
        assert_eq!(
            id("## Once\n- [ ] x\n"),
            id("# Title\n\n## once\n\n> - [ ] x\n")
        );
    }

    #[test]
    fn ids_change_with_content_section_and_file() {
        let base = id("## Recurring\n- [ ] @x {\"a\": 1}\n");
        for other in [
            "## Recurring\n- [ ] @x {\"a\": 2}\n",
            "## Recurring\n- [ ] @x {\"a\": \"1\"}\n",
            "## Recurring\n- [ ] @x {\"a\": 1.0}\n",
            "## Recurring\n- [ ] @y {\"a\": 1}\n",
            "## Once\n- [ ] @x {\"a\": 1}\n",
            "## Recurring\n- [ ] x {\"a\": 1}\n",
        ] {
            assert_ne!(base, id(other), "{other}");
        }
        let in_other_file = parse(
            Path::new(PATH),
            Path::new("/tmp/hb/real.md"),
            "## Recurring\n- [ ] @x {\"a\": 1}\n",
        );
        assert_ne!(base, in_other_file.tasks[0].id);
        assert_eq!(*in_other_file.tasks[0].file, *Path::new(PATH));
        // A plain task written like an invalid call's normal form still gets its own id.
        let both = p("- [ ] @x [1]\n- [ ] @!@x [1]\n");
        assert_eq!(both.tasks[1].body, Body::Plain);
        assert_ne!(both.tasks[0].id, both.tasks[1].id);
    }

    #[test]
    fn duplicate_tasks_get_occurrence_ids() {
        let one = p("## Recurring\n- [ ] a\n");
        let two = p("## Recurring\n- [ ] a\n- [x] a\n- [ ] b\n- [ ]   a\n## Once\n- [ ] a\n");
        assert_eq!(one.tasks[0].id, two.tasks[0].id);
        let ids: Vec<&str> = two.tasks.iter().map(|t| t.id.as_str()).collect();
        let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        // Removing the done duplicate renumbers those below it, not those above.
        let three = p("## Recurring\n- [ ] a\n- [ ] b\n- [ ]   a\n");
        assert_eq!(three.tasks[0].id, two.tasks[0].id);
        assert_eq!(three.tasks[1].id, two.tasks[2].id);
        assert_eq!(three.tasks[2].id, two.tasks[1].id);
    }

    #[test]
    fn a_proposal_mark_is_provenance_not_text() {
        let t = only(
            "## Recurring\n- [ ] @log {\"text\": \"x\"} <!-- proposed by mcp:agent-1.x_y -->\n",
        );
        assert_eq!(t.proposed_by.as_deref(), Some("mcp:agent-1.x_y"));
        assert_eq!(t.text, "@log {\"text\": \"x\"}");
        assert_eq!(
            tool(&format!("## Recurring\n- [ ] @log {{}} {}\n", mark("a"))).0,
            "log"
        );
        let r = only("## Recurring\n- [ ] water plants <!-- proposed by mcp:a -->  \r\n");
        assert_eq!(
            (r.text.as_str(), r.body.clone()),
            ("water plants", Body::Plain)
        );
        assert_eq!(r.proposed_by.as_deref(), Some("mcp:a"));
        // In a quote, and with the text on the next line.
        let q = only("## Recurring\n> - [ ] x <!-- proposed by mcp:a -->\n");
        assert_eq!(
            (q.text.as_str(), q.proposed_by.as_deref()),
            ("x", Some("mcp:a"))
        );
        let below = only("## Recurring\n- [ ] <!-- proposed by mcp:a -->\n  x\n");
        assert_eq!(
            (below.text.as_str(), below.proposed_by.as_deref()),
            ("x", Some("mcp:a"))
        );
        // Only the exact mark at the very end of the item's first line counts.
        for text in [
            "- [ ] x <!-- proposed by mcp:a --> y",
            "- [ ] x <!-- proposed by mcp:a b -->",
            "- [ ] x <!-- proposed by mcp: -->",
            "- [ ] x <!--proposed by mcp:a -->",
            "- [ ] x <!-- proposed by cli:a -->",
            "- [ ] x\n  y <!-- proposed by mcp:a -->",
            &format!(
                "- [ ] x {}",
                mark(&"a".repeat(MAX_NAME)).replace("mcp:", "mcp:b")
            ),
        ] {
            let t = only(&format!("## Recurring\n{text}\n"));
            assert_eq!(t.proposed_by, None, "{text}");
            assert!(
                t.text.contains("proposed by"),
                "{text}: the comment stays text"
            );
        }
        assert!(is_mark_name(&"a".repeat(MAX_NAME)) && !is_mark_name("a/b"));
    }

    #[test]
    fn the_mark_is_read_from_the_raw_line_whatever_markup_an_input_opens() {
        // An unclosed code span, HTML or a link in an agent's input cannot hide the mark.
        for input in [
            "{\"cmd\": \"`\"}",
            "{\"cmd\": \"<b\"}",
            "{\"cmd\": \"[x](\"}",
            "{\"cmd\": \"\\\\\"}",
        ] {
            let t = only(&format!(
                "## Recurring\n- [ ] @shell {input} {}\n",
                mark("a")
            ));
            assert_eq!(t.proposed_by.as_deref(), Some("mcp:a"), "{input}");
        }
        // Even a code span that the mark would close.
        let t = only("## Recurring\n- [ ] `x <!-- proposed by mcp:a -->\n  `\n");
        assert_eq!(t.proposed_by.as_deref(), Some("mcp:a"));
    }

    #[test]
    fn the_mark_is_part_of_the_id() {
        let person = id("## Recurring\n- [ ] @shell {\"cmd\": \"x\"}\n");
        let marked = format!("- [ ] @shell {{\"cmd\": \"x\"}} {}", mark("agent"));
        let agent = id(&format!("## Recurring\n{marked}\n"));
        assert_ne!(person, agent);
        assert_ne!(
            agent,
            id(&format!(
                "## Recurring\n{}\n",
                marked.replace("agent", "other")
            ))
        );
        // A marked copy next to the person's task: each keeps its own id, so the copy never
        // takes over the person's (its grant, denial or history), whichever line goes.
        let both = p(&format!(
            "## Recurring\n- [ ] @shell {{\"cmd\": \"x\"}}\n{marked}\n"
        ));
        assert_eq!(both.tasks[0].id, person);
        assert_eq!(both.tasks[1].id, agent);
        let copy_first = p(&format!(
            "## Recurring\n{marked}\n- [ ] @shell {{\"cmd\": \"x\"}}\n"
        ));
        assert_eq!(copy_first.tasks[0].id, agent);
        assert_eq!(copy_first.tasks[1].id, person);
        // Deleting the mark adopts the task: the person's id, numbered among the person's.
        let adopted =
            p("## Recurring\n- [ ] @shell {\"cmd\": \"x\"}\n- [ ] @shell {\"cmd\": \"x\"}\n");
        assert_eq!(adopted.tasks[0].id, person);
        assert_ne!(adopted.tasks[1].id, agent);
        assert_eq!(adopted.tasks[1].proposed_by, None);
    }

    #[test]
    fn bom_and_crlf() {
        let text = "\u{feff}## Once\r\n- [ ] é @x {\"a\":\r\n  1}\r\n- [ ] @y [\r\n";
        let parsed = p(text);
        assert_eq!(parsed.tasks.len(), 2);
        let t = &parsed.tasks[0];
        assert_eq!(t.section, Section::OneTime);
        assert_eq!(&text[t.marker.clone()], "[ ]");
        assert_eq!(t.marker, 14..17);
        assert_eq!((t.line, t.column, t.text_line, t.text_column), (2, 3, 2, 7));
        assert_eq!(t.text, "é @x {\"a\":\n1}");
        let (_, line, column) = match &parsed.tasks[1].body {
            Body::Invalid {
                error,
                line,
                column,
                ..
            } => (error, *line, *column),
            other => panic!("{other:?}"),
        };
        assert_eq!((line, column), (4, 10));
        // On line 1 the BOM is not a column.
        let w = p("\u{feff}## Recurring\n### Recurring tasks\n- [ ] a\n");
        assert_eq!((w.problems[0].line, w.problems[0].column), (2, 1));
        let first_line = p("\u{feff}- [ ] a\n");
        assert_eq!(first_line.tasks[0].column, 3);
        assert_eq!(first_line.tasks[0].marker, 5..8);
    }

    #[test]
    fn cr_only_line_endings() {
        let text = "## Recurring\r- [ ] a\r  b\r- [ ] @x {\r  \"k\" 1}\r";
        let parsed = p(text);
        assert_eq!(parsed.tasks.len(), 2);
        assert_eq!(parsed.tasks[0].section, Section::Recurring);
        assert_eq!(parsed.tasks[0].text, "a\nb");
        assert_eq!((parsed.tasks[1].line, parsed.tasks[1].column), (4, 3));
        match &parsed.tasks[1].body {
            Body::Invalid { line, column, .. } => assert_eq!((*line, *column), (5, 7)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn line_index() {
        let text = "ab\r\ncd\ref\n\ngh";
        let idx = LineIndex::new(text, 0);
        assert_eq!(idx.line_col(0), (1, 1));
        assert_eq!(idx.line_col(2), (1, 3));
        assert_eq!(idx.line_col(3), (1, 4));
        assert_eq!(idx.line_col(4), (2, 1));
        assert_eq!(idx.line_col(7), (3, 1));
        assert_eq!(idx.line_col(10), (4, 1));
        assert_eq!(idx.line_col(11), (5, 1));
        assert_eq!(idx.line_col(13), (5, 3));
        assert_eq!(idx.line_end(0), 2);
        assert_eq!(idx.line_end(1), 6);
        assert_eq!(idx.line_end(4), 13);
    }

    /// How long this takes (that parsing is linear) is a figure of `benches/figures.rs`
    /// (`check` of 20,000 tasks), not a bound a loaded machine could miss here.
    #[test]
    fn large_file_has_every_task() {
        let mut text = String::from("## Recurring\n");
        for i in 0..20_000 {
            text.push_str(&format!("- [ ] @x {{\"n\": {i}, \"s\": \"some text\"}}\n"));
        }
        let parsed = p(&text);
        assert_eq!(parsed.tasks.len(), 20_000);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn parse_never_panics(text in "\\PC*") {
                let _ = p(&text);
            }

            #[test]
            fn parse_never_panics_on_markdownish(text in "([-*+>#\\[\\] xX@{}\"`~\\\\\r\n\t1.)aé<]|\u{feff}){0,80}") {
                let parsed = p(&text);
                for t in &parsed.tasks {
                    let m = &text[t.marker.clone()];
                    prop_assert!(m == "[ ]" || m == "[x]" || m == "[X]" || m == "[\t]", "{:?}", m);
                    prop_assert!(!t.text.is_empty());
                    prop_assert!(t.line >= 1 && t.column >= 1);
                }
            }
        }
    }
}
