//! Telegram messages as text: the run summary (docs/reference.md#telegram) in Telegram's HTML, cut
//! into parts that fit, and the plain-text fallback. Pure: no I/O.
//!
//! Invariants: every dynamic text is HTML-escaped; no tag spans a line, so a message can be
//! cut at any line; a part never exceeds [`MAX_MESSAGE`] UTF-16 units.
//!
//! A button approves only what its message showed: a message gets an approval's buttons only
//! when it shows that approval's whole input, redacted and pretty-printed, nothing in it was
//! hidden by redaction, and the whole message fits in one part. Any other approval in it
//! gets a line naming its file:line and `heartbeat approve ID` instead of buttons.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use crate::audit::Secrets;
use crate::config::SummaryMode;
use crate::model::{MessageKind, Outcome};
use crate::redact::STARS;
use crate::report::{Report, TaskReport};
use crate::text::{Redacted, escape};

/// Telegram's limit is 4096 characters of text; HTML markup only makes ours longer, so
/// counting the markup too (in UTF-16 units, as Telegram does) stays on the safe side.
pub(crate) const MAX_MESSAGE: usize = 4096;
/// Approval buttons on one message at most (one row each).
pub(crate) const MAX_BUTTON_ROWS: usize = 8;

/// A message ready for the outbox: what it is about, a one-line title, its lines in
/// Telegram's HTML (other channels show them as plain text, [`html_to_plain`]), and the
/// audit keys of its event (docs/reference.md#channels).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rendered {
    pub kind: MessageKind,
    /// Plain text, one line.
    pub title: String,
    pub html: String,
    pub urgent: bool,
    /// Approvals that get a row of buttons.
    pub approvals: Vec<i64>,
    /// Tripped tasks that get a Reset button.
    pub resets: Vec<String>,
    /// The keys of the audit line of what it is about (an object).
    pub data: Value,
}

impl Rendered {
    /// A message of `kind`, urgent when its kind is, with no buttons and no data.
    pub(crate) fn new(kind: MessageKind, title: impl Into<String>, html: String) -> Rendered {
        Rendered {
            kind,
            title: title.into(),
            html,
            urgent: kind.urgent(),
            approvals: Vec::new(),
            resets: Vec::new(),
            data: Value::Object(serde_json::Map::new()),
        }
    }
}

/// The same message as plain text (for when Telegram rejects the HTML).
pub(crate) fn html_to_plain(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Cut a message into parts of at most `limit` UTF-16 units, at line boundaries (a line
/// longer than the limit is cut at a character boundary). Redacted first: a part never
/// shows a secret minus its tail.
pub(crate) fn split(html: &Redacted, limit: usize) -> Vec<Redacted> {
    html.split_lines(limit, char::len_utf16)
}

/// One approval as a message shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ApprovalView<'a> {
    pub id: i64,
    pub tool: &'a str,
    /// `FILE:LINE` of its task, where a person reads what the message cannot show.
    pub place: String,
    /// Its input as stored (redacted when it was queued).
    pub input: &'a Value,
}

/// A line of a message, followed by the input of the approval it announces, if any.
pub(crate) struct Entry<'a> {
    pub html: String,
    pub approval: Option<ApprovalView<'a>>,
}

/// How an approval's input is shown: its lines, and how many values redaction hid in it.
struct Block {
    lines: Vec<String>,
    hidden: usize,
}

/// The input pretty-printed and redacted, one `<code>` line per line of JSON (no tag spans
/// a line). Every `***` counts as a hidden value: a literal `***` in an input cannot be told
/// from a redacted one, so it costs the buttons too.
fn block(input: &Value, secrets: &Secrets) -> Block {
    let pretty = secrets.redact_json(input.clone()).to_pretty();
    let pretty = secrets.redact(pretty.as_str());
    let lines: Vec<String> = pretty
        .as_str()
        .lines()
        .map(|l| format!("<code>{}</code>", escape(l)))
        .collect();
    // What the outbox's own redaction pass would still change is hidden too.
    let mut hidden = pretty.as_str().matches(STARS).count();
    if hidden == 0 && lines.iter().any(|l| secrets.redact(l).as_str() != l) {
        hidden = 1;
    }
    Block { lines, hidden }
}

/// How many values of an approval's input its message cannot show (redaction hides them):
/// such an approval is never decided by a button.
pub(crate) fn hidden_values(input: &Value, secrets: &Secrets) -> usize {
    block(input, secrets).hidden
}

fn hidden_note(n: usize, a: &ApprovalView) -> String {
    format!(
        "🔒 {n} value(s) hidden — read {} and run <code>heartbeat approve {}</code>",
        escape(&a.place),
        a.id
    )
}

fn unfit_note(a: &ApprovalView) -> String {
    format!(
        "📄 input not shown: it does not fit this message — read {} and run <code>heartbeat \
         approve {}</code>",
        escape(&a.place),
        a.id
    )
}

fn spill_note() -> String {
    "⬇️ its whole input and buttons follow in a message of its own".to_string()
}

/// Length of lines joined by newlines, in UTF-16 units.
fn joined_units<'s>(lines: impl IntoIterator<Item = &'s String>) -> usize {
    let mut n = 0;
    let mut count = 0usize;
    for l in lines {
        n += units(l);
        count += 1;
    }
    n + count.saturating_sub(1)
}

/// A message composed by [`with_approvals`].
#[derive(Debug)]
pub(crate) struct Composed<'a> {
    pub html: String,
    /// The approvals whose buttons it carries.
    pub buttons: Vec<i64>,
    /// Approvals it had no room for, that a message of their own ([`approval_alone`]) shows
    /// whole with their buttons: the message says they follow.
    pub spilled: Vec<ApprovalView<'a>>,
}

/// A message of one approval: where it is, its tool, its whole input and, when nothing in it
/// is hidden and it fits, its buttons.
pub(crate) fn approval_alone(view: ApprovalView, secrets: &Secrets) -> (String, Vec<i64>) {
    let head = format!(
        "⏳ <b>heartbeat</b>: approval #{} <b>@{}</b> {}: <code>heartbeat approve {}</code>",
        view.id,
        escape(view.tool),
        escape(&view.place),
        view.id
    );
    let composed = compose(
        vec![Entry {
            html: head,
            approval: Some(view),
        }],
        Vec::new(),
        secrets,
        false,
    );
    (composed.html, composed.buttons)
}

/// The message of one approval queued: [`approval_alone`] with its title and audit keys.
pub(crate) fn approval_message(view: ApprovalView, secrets: &Secrets) -> Rendered {
    let title = format!("approval #{} @{} {}", view.id, view.tool, view.place);
    let data = serde_json::json!({
        "approval_id": view.id,
        "tool": view.tool,
        "input": secrets.redact_json(view.input.clone()).into_value(),
        "place": view.place,
    });
    let (html, approvals) = approval_alone(view, secrets);
    let mut m = Rendered::new(MessageKind::Approval, title, html);
    m.approvals = approvals;
    m.data = data;
    m
}

/// The message that an approval expired unseen: `approval #7 expired`, with its tool and
/// place, when it was queued (in `tz`) and that nobody decided it.
pub(crate) fn expired_message(
    view: &ApprovalView,
    task_id: &str,
    queued_at: Option<DateTime<Utc>>,
    tz: Tz,
) -> Rendered {
    let queued = queued_at.map_or_else(|| "?".to_string(), |t| crate::render::show_time(t, tz));
    let html = format!(
        "⌛ approval #{} @{} {} expired: queued {}, never decided",
        view.id,
        escape(view.tool),
        escape(&view.place),
        escape(&queued)
    );
    let mut m = Rendered::new(
        MessageKind::Approval,
        format!("approval #{} expired", view.id),
        html,
    );
    m.data = serde_json::json!({
        "approval_id": view.id,
        "task_id": task_id,
        "reason": "ttl",
        "tool": view.tool,
        "place": view.place,
    });
    m
}

/// A message of `entries` then `tail` lines, every line redacted, with each approval's input
/// shown in full where it fits. Its buttons are those of the approvals whose whole input it
/// shows, with nothing hidden, in a message that fits one part, at most [`MAX_BUTTON_ROWS`]
/// of them. An approval it has no room for is spilled to a message of its own when that
/// would show it whole; every other one says where to read it and what to run.
pub(crate) fn with_approvals<'a>(
    entries: Vec<Entry<'a>>,
    tail: Vec<String>,
    secrets: &Secrets,
) -> Composed<'a> {
    compose(entries, tail, secrets, true)
}

fn compose<'a>(
    entries: Vec<Entry<'a>>,
    tail: Vec<String>,
    secrets: &Secrets,
    spill: bool,
) -> Composed<'a> {
    enum Shows {
        Note(String),
        Block(Vec<String>),
        Both(Vec<String>, String),
    }
    let base: Vec<String> = entries
        .iter()
        .map(|e| secrets.redact(&e.html).into_string())
        .chain(tail.iter().map(|t| secrets.redact(t).into_string()))
        .collect();
    let blocks: Vec<Option<(Block, &ApprovalView)>> = entries
        .iter()
        .map(|e| e.approval.as_ref().map(|a| (block(a.input, secrets), a)))
        .collect();
    // Start with a note for every approval, then show inputs while the message still fits.
    let mut shows: Vec<Option<Shows>> = blocks
        .iter()
        .map(|b| {
            b.as_ref().map(|(b, a)| {
                Shows::Note(if b.hidden > 0 {
                    hidden_note(b.hidden, a)
                } else {
                    unfit_note(a)
                })
            })
        })
        .collect();
    let mut total = joined_units(&base)
        + shows
            .iter()
            .flatten()
            .map(|s| match s {
                Shows::Note(n) => 1 + units(n),
                _ => 0,
            })
            .sum::<usize>();
    let mut buttons = Vec::new();
    // First the approvals that can have buttons, then the rest of what fits (inputs with
    // hidden values are still worth reading, beside their note).
    for with_buttons in [true, false] {
        for (show, b) in shows.iter_mut().zip(&blocks) {
            let (Some(Shows::Note(note)), Some((b, a))) = (&*show, b) else {
                continue;
            };
            let cost = 1 + joined_units(&b.lines);
            if with_buttons && b.hidden == 0 && buttons.len() < MAX_BUTTON_ROWS {
                let freed = 1 + units(note);
                if total + cost - freed <= MAX_MESSAGE {
                    total = total + cost - freed;
                    buttons.push(a.id);
                    *show = Some(Shows::Block(b.lines.clone()));
                }
            } else if !with_buttons && b.hidden > 0 && total + cost <= MAX_MESSAGE {
                total += cost;
                *show = Some(Shows::Both(b.lines.clone(), note.clone()));
            }
        }
    }
    let mut spilled = Vec::new();
    if spill {
        for (show, b) in shows.iter_mut().zip(&blocks) {
            if let (Some(Shows::Note(_)), Some((b, a))) = (&*show, b)
                && b.hidden == 0
                && !approval_alone((*a).clone(), secrets).1.is_empty()
            {
                spilled.push((*a).clone());
                *show = Some(Shows::Note(spill_note()));
            }
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for (i, line) in base.into_iter().enumerate() {
        lines.push(line);
        match shows.get_mut(i).and_then(Option::take) {
            Some(Shows::Note(n)) => lines.push(n),
            Some(Shows::Block(b)) => lines.extend(b),
            Some(Shows::Both(b, n)) => {
                lines.extend(b);
                lines.push(n);
            }
            None => {}
        }
    }
    let html = lines.join("\n");
    if units(&html) > MAX_MESSAGE {
        // More than one part: no part would show everything its buttons approve.
        buttons.clear();
    }
    Composed {
        html,
        buttons,
        spilled,
    }
}

/// The messages after a run (docs/reference.md#telegram): its summary (none when nothing is to be
/// said), then a message of its own for each approval the summary had no room to show whole.
/// `inputs` holds the stored input of each approval the run queued; an approval missing from it
/// gets no buttons. Every text is redacted with `secrets`.
pub(crate) fn summary(
    report: &Report,
    mode: SummaryMode,
    inputs: &HashMap<i64, Value>,
    secrets: &Secrets,
) -> Vec<Rendered> {
    let c = report.counts();
    let reminded = report.count(Outcome::Reminded);
    let did_something =
        c.succeeded + c.failed + c.queued + c.invalid + reminded + report.count(Outcome::Stale) > 0
            || !report.errors.is_empty();
    let urgent = c.failed > 0 || !report.errors.is_empty();
    let tasks: Vec<&TaskReport> = match mode {
        SummaryMode::Never if !urgent => return Vec::new(),
        SummaryMode::Never => report.tasks.iter().filter(|t| t.failed()).collect(),
        SummaryMode::OnChange if !did_something => return Vec::new(),
        _ => report
            .tasks
            .iter()
            .filter(|t| {
                t.outcome != Outcome::Skipped
                    || t.reason.as_ref().map(Redacted::as_str) == Some("observe")
            })
            .collect(),
    };

    let mut counts = vec![];
    for (n, word) in [
        (c.succeeded, "succeeded"),
        (c.failed, "failed"),
        (c.queued, "queued"),
        (c.invalid, "invalid"),
        (reminded, "reminder(s)"),
        (report.count(Outcome::Stale), "stale"),
    ] {
        if n > 0 && (mode != SummaryMode::Never || word == "failed") {
            counts.push(format!("{n} {word}"));
        }
    }
    let headline = if counts.is_empty() {
        "nothing to do".to_string()
    } else {
        counts.join(", ")
    };
    let mut entries = vec![Entry {
        html: format!("<b>heartbeat</b>: {}", escape(&headline)),
        approval: None,
    }];
    for t in tasks {
        let approval = match (t.outcome, t.approval_id) {
            (Outcome::Queued, Some(id)) => inputs.get(&id).map(|input| ApprovalView {
                id,
                tool: t.tool.as_deref().unwrap_or("?"),
                place: format!("{}:{}", t.file.display(), t.line),
                input,
            }),
            _ => None,
        };
        entries.push(Entry {
            html: task_line(t),
            approval,
        });
    }
    let mut tail = Vec::new();
    if mode != SummaryMode::Never {
        for e in &report.errors {
            tail.push(format!("⚠️ {}", e.first_line(300).escape()));
        }
    }
    let composed = with_approvals(entries, tail, secrets);
    let kind = if urgent {
        MessageKind::Failure
    } else {
        MessageKind::Summary
    };
    let mut first = Rendered::new(kind, headline, composed.html);
    first.urgent = urgent;
    first.approvals = composed.buttons;
    first.data = serde_json::json!({
        "run_id": report.run_id,
        "succeeded": c.succeeded,
        "failed": c.failed,
        "queued": c.queued,
        "invalid": c.invalid,
    });
    let mut messages = vec![first];
    for view in composed.spilled {
        messages.push(approval_message(view, secrets));
    }
    messages
}

/// The run's news as messages of one kind each, for a channel that does not take the
/// summary (docs/reference.md#channels): each approval queued (its whole input, and buttons
/// where nothing is hidden), each reminder due, each task that failed, each invalid task in
/// `fresh` (an error not reported before), and the run's own errors.
pub(crate) fn run_events(
    report: &Report,
    inputs: &HashMap<i64, Value>,
    fresh: &std::collections::HashSet<(String, usize)>,
    secrets: &Secrets,
) -> Vec<Rendered> {
    let mut out = Vec::new();
    for t in &report.tasks {
        let place = format!("{}:{}", t.file.display(), t.line);
        let tool = t.tool.as_deref().unwrap_or("?");
        let base = serde_json::json!({
            "task_id": t.task_id,
            "file": t.file.display().to_string(),
            "line": t.line,
        });
        let with = |extra: Value| merged(&base, extra);
        match t.outcome {
            Outcome::Queued => {
                let Some(id) = t.approval_id else { continue };
                let mut m = match inputs.get(&id) {
                    Some(input) => approval_message(
                        ApprovalView {
                            id,
                            tool,
                            place,
                            input,
                        },
                        secrets,
                    ),
                    None => Rendered::new(
                        MessageKind::Approval,
                        format!("approval #{id} @{tool} {place}"),
                        task_line(t),
                    ),
                };
                m.data = with(m.data);
                out.push(m);
            }
            Outcome::Reminded => {
                let mut m = Rendered::new(
                    MessageKind::Reminder,
                    t.text.first_line(80).into_string(),
                    task_line(t),
                );
                m.data = with(serde_json::json!({"text": t.text.as_str()}));
                out.push(m);
            }
            Outcome::Failed | Outcome::Interrupted => {
                let mut m = Rendered::new(
                    MessageKind::Failure,
                    format!("@{tool} failed ({place})"),
                    task_line(t),
                );
                m.data = with(serde_json::json!({
                    "tool": tool,
                    "error": t.reason.as_ref().map(Redacted::as_str),
                    "exit_code": t.exit_code,
                }));
                out.push(m);
            }
            Outcome::Invalid if fresh.contains(&(t.file.display().to_string(), t.line)) => {
                let mut m = Rendered::new(
                    MessageKind::Failure,
                    format!("invalid task at {place}"),
                    task_line(t),
                );
                m.data = with(serde_json::json!({
                    "column": t.column,
                    "error": t.reason.as_ref().map(Redacted::as_str),
                }));
                out.push(m);
            }
            _ => {}
        }
    }
    for e in &report.errors {
        let mut m = Rendered::new(
            MessageKind::Failure,
            "a run could not finish its work",
            format!("⚠️ {}", e.first_line(300).escape()),
        );
        m.data = serde_json::json!({"run_id": report.run_id, "error": e.as_str()});
        out.push(m);
    }
    out
}

/// The run's missed slots as one message (docs/reference.md#missed-slots), times in `tz`;
/// None when it missed none.
pub(crate) fn missed_message(report: &Report, tz: chrono_tz::Tz) -> Option<Rendered> {
    if report.missed.is_empty() {
        return None;
    }
    let total: usize = report.missed.iter().map(|m| m.count.unwrap_or(1)).sum();
    let mut lines = vec![format!(
        "⏰ <b>heartbeat</b>: {total} slot(s) passed without a run"
    )];
    let mut data = Vec::new();
    for m in &report.missed {
        let what = m
            .tool
            .as_deref()
            .map_or("reminder".into(), |t| format!("@{t}"));
        let place = format!(
            "{}:{}",
            m.file
                .file_name()
                .unwrap_or(m.file.as_os_str())
                .to_string_lossy(),
            m.line
        );
        let when = crate::render::show_time(m.slot, tz);
        lines.push(match m.count {
            None => format!(
                "• <b>{}</b> {} — {} ({})",
                escape(&what),
                escape(&place),
                escape(&when),
                escape(&m.reason)
            ),
            Some(n) => format!(
                "• <b>{}</b> {} — {n} earlier slot(s) from {} ({})",
                escape(&what),
                escape(&place),
                escape(&when),
                escape(&m.reason)
            ),
        });
        data.push(serde_json::json!({
            "task_id": m.task_id,
            "file": m.file.display().to_string(),
            "line": m.line,
            "slot": crate::audit::format_ts(m.slot),
            "reason": m.reason,
            "count": m.count,
        }));
    }
    let mut m = Rendered::new(
        MessageKind::Missed,
        format!("{total} slot(s) missed"),
        lines.join("\n"),
    );
    m.data = serde_json::json!({ "run_id": report.run_id, "missed": data });
    Some(m)
}

/// `base`'s keys, then `extra`'s (both objects).
fn merged(base: &Value, extra: Value) -> Value {
    let mut out = base.clone();
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
    }
    out
}

/// One line per task: ✅ / ❌ / ⏳ / 🔔 …, the tool and text, the summary or first output line.
fn task_line(t: &TaskReport) -> String {
    let icon = match t.outcome {
        Outcome::Succeeded => "✅",
        Outcome::Failed | Outcome::Interrupted => "❌",
        Outcome::Queued => "⏳",
        Outcome::Reminded => "🔔",
        Outcome::Invalid => "⚠️",
        Outcome::Stale => "🚫",
        Outcome::RetryScheduled => "🔁",
        _ => "👀",
    };
    let what = match &t.tool {
        // By its place only: the source text of a task that did not parse may hold a secret
        // that redaction cannot recognise (docs/reference.md#redaction).
        _ if t.outcome == Outcome::Invalid => {
            let name = t.file.file_name().unwrap_or(t.file.as_os_str());
            let column = t.column.map(|c| format!(":{c}")).unwrap_or_default();
            escape(&format!("{}:{}{column}", name.to_string_lossy(), t.line))
        }
        Some(tool) => {
            // Cut after redaction (the report's text is redacted): a secret that straddled
            // the cut would otherwise show all but its tail.
            let text = t.text.strip_prefix(&format!("@{tool}")).first_line(80);
            if text.is_empty() {
                format!("<b>@{}</b>", escape(tool))
            } else {
                format!("<b>@{}</b> {}", escape(tool), text.escape())
            }
        }
        None => t.text.first_line(120).escape().into_string(),
    };
    let detail = match t.outcome {
        Outcome::Succeeded => t
            .summary
            .as_ref()
            .or(t.output.as_ref())
            .map(|o| o.first_line(160).into_string()),
        Outcome::Queued => t.approval_id.map(|id| match &t.reason {
            // Proposed by an agent: the person deciding is told.
            Some(why) => format!("approval #{id}, {}", why.as_str()),
            None => format!("approval #{id}"),
        }),
        // A reminder an agent proposed says so.
        Outcome::Reminded => t.reason.as_ref().map(|r| r.as_str().to_string()),
        Outcome::Skipped => Some("would run".into()),
        _ => t.reason.as_ref().map(|r| r.first_line(160).into_string()),
    };
    let mut line = format!("{icon} {what}");
    if let Some(d) = detail.filter(|d| !d.is_empty()) {
        line.push_str(&format!(" — {}", escape(&d)));
    }
    if t.outcome == Outcome::Queued
        && let Some(id) = t.approval_id
    {
        line.push_str(&format!(": <code>heartbeat approve {id}</code>"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Secrets;
    use std::path::Path;
    use std::sync::Arc;

    fn report(outcomes: &[(&'static str, Option<&str>)]) -> Report {
        let mut r = Report {
            run_id: "r".into(),
            ..Report::default()
        };
        for (i, (outcome, tool)) in outcomes.iter().enumerate() {
            r.tasks.push(TaskReport {
                task_id: format!("{i:012}"),
                file: Arc::from(Path::new("/x/HEARTBEAT.md")),
                line: i + 1,
                column: None,
                text: Secrets::default().redact(&match tool {
                    Some(t) => format!("@{t} {{\"text\": \"<b>&\"}}"),
                    None => "Stretch <now>".into(),
                }),
                tool: tool.map(str::to_string),
                outcome: Outcome::ALL
                    .into_iter()
                    .find(|o| o.as_str() == *outcome)
                    .unwrap(),
                reason: (*outcome == "failed").then(|| "exit status 1: <oops>".into()),
                approval_id: (*outcome == "queued").then_some(i as i64 + 1),
                exit_code: None,
                output: Some("line one\nline two".into()),
                summary: None,
                duration_ms: None,
                tripped: None,
                trigger: None,
            });
        }
        r
    }

    fn none() -> Secrets {
        Secrets::default()
    }

    fn inputs(list: &[(i64, &Value)]) -> HashMap<i64, Value> {
        list.iter().map(|(id, v)| (*id, (*v).clone())).collect()
    }

    /// Every tag closed on its own line: what Telegram's parser and our splitter need.
    fn parse_ok(html: &str) -> bool {
        html.lines()
            .all(|l| l.matches("<code>").count() == l.matches("</code>").count())
    }

    /// A message with one approval of `input` after `before` other lines.
    fn one(input: &Value, secrets: &Secrets, before: usize) -> (String, Vec<i64>) {
        let c = one_composed(input, secrets, before);
        assert!(c.spilled.is_empty() || before > 0);
        (c.html, c.buttons)
    }

    fn one_composed<'a>(input: &'a Value, secrets: &Secrets, before: usize) -> Composed<'a> {
        let mut entries: Vec<Entry> = (0..before)
            .map(|i| Entry {
                html: format!("line {i}"),
                approval: None,
            })
            .collect();
        entries.push(Entry {
            html: "⏳ <b>@shell</b> — approval #7".into(),
            approval: Some(ApprovalView {
                id: 7,
                tool: "shell",
                place: "/x/HEARTBEAT.md:12".into(),
                input,
            }),
        });
        with_approvals(entries, vec![], secrets)
    }

    #[test]
    fn an_approval_shows_its_whole_input_however_long_its_command_is() {
        let tail = "y".repeat(500);
        let cmd = format!("echo hello; {tail}; rm -rf $HOME/x");
        let input = serde_json::json!({"cmd": cmd, "timeout": "5m"});
        let (html, buttons) = one(&input, &none(), 0);
        assert_eq!(buttons, vec![7]);
        assert!(html.contains(&escape(&cmd)), "{html}");
        assert!(
            html.contains("<code>  &quot;timeout&quot;: &quot;5m&quot;</code>"),
            "{html}"
        );
        assert!(
            !html.contains("heartbeat approve 7"),
            "no note when it is all shown"
        );
        assert!(parse_ok(&html));
    }

    #[test]
    fn an_approval_with_a_hidden_value_gets_no_buttons_and_says_where_to_read_it() {
        // Hidden by its key, by a registered secret, and as stored (already `***`).
        let secrets = Secrets::new(["s3cr3t-value".to_string()]);
        for input in [
            serde_json::json!({"cmd": "curl x", "env": {"API_TOKEN": "abcdef"}}),
            serde_json::json!({"cmd": "curl -u me:s3cr3t-value x"}),
            serde_json::json!({"cmd": "curl x", "env": {"API_TOKEN": "***"}}),
        ] {
            let (html, buttons) = one(&input, &secrets, 0);
            assert!(buttons.is_empty(), "{html}");
            assert!(
                html.ends_with(
                    "🔒 1 value(s) hidden — read /x/HEARTBEAT.md:12 and run <code>heartbeat \
                     approve 7</code>"
                ),
                "{html}"
            );
            assert!(
                !html.contains("s3cr3t-value") && !html.contains("abcdef"),
                "{html}"
            );
            // What can be shown still is.
            assert!(html.contains("curl"), "{html}");
        }
    }

    #[test]
    fn an_approval_that_does_not_fit_one_message_gets_no_buttons() {
        let input = serde_json::json!({"cmd": "z".repeat(5000)});
        let (html, buttons) = one(&input, &none(), 0);
        assert!(buttons.is_empty());
        assert!(units(&html) <= MAX_MESSAGE, "{} units", units(&html));
        assert!(!html.contains("zzzz"), "not a cut input");
        assert!(
            html.ends_with("read /x/HEARTBEAT.md:12 and run <code>heartbeat approve 7</code>"),
            "{html}"
        );
        // Fits alone, but not with the rest of the message (3,900 characters before it).
        let input = serde_json::json!({"cmd": "z".repeat(300)});
        assert_eq!(one(&input, &none(), 0).1, vec![7]);
        let c = one_composed(&input, &none(), 450);
        assert!(c.buttons.is_empty(), "{}", c.html);
        assert!(!c.html.contains("zzzz"), "{}", c.html);
        // … so it follows in a message of its own, whole, with its buttons.
        assert!(
            c.html.ends_with("follow in a message of its own"),
            "{}",
            c.html
        );
        assert_eq!(c.spilled.len(), 1);
        let (html, buttons) = approval_alone(c.spilled[0].clone(), &none());
        assert_eq!(buttons, vec![7]);
        assert!(html.contains(&"z".repeat(300)), "{html}");
    }

    #[test]
    fn at_most_eight_approvals_get_buttons_on_one_message_and_the_rest_follow_alone() {
        let input = serde_json::json!({"cmd": "true"});
        let entries: Vec<Entry> = (1..=10)
            .map(|id| Entry {
                html: format!("⏳ #{id}"),
                approval: Some(ApprovalView {
                    id,
                    tool: "shell",
                    place: format!("/x/HEARTBEAT.md:{id}"),
                    input: &input,
                }),
            })
            .collect();
        let c = with_approvals(entries, vec![], &none());
        assert_eq!(c.buttons, (1..=8).collect::<Vec<i64>>());
        // The rest follow in messages of their own, each with its input and buttons.
        assert_eq!(
            c.html.matches("follow in a message of its own").count(),
            2,
            "{}",
            c.html
        );
        let ids: Vec<i64> = c.spilled.iter().map(|v| v.id).collect();
        assert_eq!(ids, vec![9, 10]);
        let (html, buttons) = approval_alone(c.spilled[0].clone(), &none());
        assert_eq!(buttons, vec![9]);
        assert!(
            html.starts_with("⏳ <b>heartbeat</b>: approval #9 <b>@shell</b> /x/HEARTBEAT.md:9"),
            "{html}"
        );
        assert!(html.contains("&quot;cmd&quot;: &quot;true&quot;"), "{html}");
    }

    #[test]
    fn summary_lists_tasks_escaped_with_approval_hints() {
        let r = report(&[
            ("succeeded", Some("log")),
            ("failed", Some("shell")),
            ("queued", Some("shell")),
            ("reminded", None),
            ("skipped", Some("x")),
        ]);
        let input = serde_json::json!({"text": "<b>&"});
        let m = summary(&r, SummaryMode::OnChange, &inputs(&[(3, &input)]), &none()).remove(0);
        assert!(m.urgent);
        assert_eq!(m.kind, MessageKind::Failure);
        assert_eq!(m.approvals, vec![3]);
        let lines: Vec<&str> = m.html.lines().collect();
        assert_eq!(
            lines[0],
            "<b>heartbeat</b>: 1 succeeded, 1 failed, 1 queued, 1 reminder(s)"
        );
        assert_eq!(
            lines[1],
            "✅ <b>@log</b> {&quot;text&quot;: &quot;&lt;b&gt;&amp;&quot;} — line one"
        );
        assert!(lines[2].starts_with("❌ <b>@shell</b>"), "{}", lines[2]);
        assert!(
            lines[2].ends_with("— exit status 1: &lt;oops&gt;"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].ends_with("— approval #3: <code>heartbeat approve 3</code>"),
            "{}",
            lines[3]
        );
        // The whole input it approves, pretty-printed, below the approval's line.
        assert_eq!(
            lines[4..7],
            [
                "<code>{</code>",
                "<code>  &quot;text&quot;: &quot;&lt;b&gt;&amp;&quot;</code>",
                "<code>}</code>"
            ]
        );
        assert_eq!(lines[7], "🔔 Stretch &lt;now&gt;");
        // Skipped by policy is not news.
        assert_eq!(lines.len(), 8);
        assert!(parse_ok(&m.html));
    }

    #[test]
    fn an_approval_of_a_task_an_agent_proposed_says_so() {
        let mut r = report(&[("queued", Some("log"))]);
        r.tasks[0].reason = Some("proposed by an agent, mcp:<bot>".into());
        let m = summary(&r, SummaryMode::OnChange, &HashMap::new(), &none()).remove(0);
        assert!(
            m.html
                .contains("— approval #1, proposed by an agent, mcp:&lt;bot&gt;: <code>"),
            "{}",
            m.html
        );
    }

    #[test]
    fn summary_modes() {
        let quiet = report(&[("skipped", Some("x"))]);
        assert_eq!(
            summary(&quiet, SummaryMode::OnChange, &HashMap::new(), &none()),
            vec![]
        );
        let always = summary(&quiet, SummaryMode::Always, &HashMap::new(), &none()).remove(0);
        assert_eq!(always.html, "<b>heartbeat</b>: nothing to do");
        assert!(!always.urgent);
        let ok = report(&[("succeeded", Some("log"))]);
        assert_eq!(
            summary(&ok, SummaryMode::Never, &HashMap::new(), &none()),
            vec![]
        );
        let bad = report(&[("succeeded", Some("log")), ("failed", Some("shell"))]);
        let never = summary(&bad, SummaryMode::Never, &HashMap::new(), &none()).remove(0);
        assert!(never.urgent);
        assert_eq!(never.html.lines().count(), 2);
        assert!(never.html.starts_with("<b>heartbeat</b>: 1 failed\n❌"));
    }

    #[test]
    fn split_respects_the_limit_at_line_boundaries() {
        let plain = |s: &str| Secrets::default().redact(s);
        let strings = |parts: Vec<Redacted>| -> Vec<String> {
            parts.into_iter().map(Redacted::into_string).collect()
        };
        let line = "x".repeat(100);
        let text = vec![line.as_str(); 100].join("\n");
        let parts = strings(split(&plain(&text), 4096));
        assert!(parts.len() >= 3);
        for p in &parts {
            assert!(units(p) <= 4096);
            assert!(p.lines().all(|l| l == line));
        }
        assert_eq!(parts.join("\n"), text);
        // A line longer than the limit is cut, never dropped; emoji count as two units.
        let long = "😀".repeat(3000);
        let parts = strings(split(&plain(&long), 4096));
        assert!(parts.iter().all(|p| units(p) <= 4096));
        assert_eq!(parts.concat(), long);
        assert_eq!(strings(split(&plain(""), 10)), vec![String::new()]);
    }

    #[test]
    fn plain_fallback_strips_tags_and_entities() {
        assert_eq!(
            html_to_plain("<b>heartbeat</b>: a &lt;b&gt; &amp; &quot;c&quot; <code>x</code>"),
            "heartbeat: a <b> & \"c\" x"
        );
    }
}
