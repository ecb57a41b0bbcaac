//! Telegram messages as text: the run summary (SPEC §10) in Telegram's HTML, cut into parts
//! that fit, and the plain-text fallback. Pure: no I/O.
//!
//! Invariants: every dynamic text is HTML-escaped; no tag spans a line, so a message can be
//! cut at any line; a part never exceeds [`MAX_MESSAGE`] UTF-16 units.

use crate::config::SummaryMode;
use crate::report::{Report, TaskReport};
use crate::text::{Redacted, escape};

/// Telegram's limit is 4096 characters of text; HTML markup only makes ours longer, so
/// counting the markup too (in UTF-16 units, as Telegram does) stays on the safe side.
pub const MAX_MESSAGE: usize = 4096;
/// Approval buttons on one message at most (one row each).
pub const MAX_BUTTON_ROWS: usize = 8;

/// A message ready for the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub kind: &'static str,
    pub html: String,
    pub urgent: bool,
    /// Approvals that get a row of buttons.
    pub approvals: Vec<i64>,
    /// Tripped tasks that get a Reset button.
    pub resets: Vec<String>,
}

/// The same message as plain text (for when Telegram rejects the HTML).
pub fn html_to_plain(html: &str) -> String {
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
/// longer than the limit is cut at a character boundary).
pub fn split(html: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for line in html.split('\n') {
        let mut line = line.to_string();
        while units(&line) > limit {
            let mut cut = String::new();
            let mut n = 0;
            for c in line.chars() {
                if n + c.len_utf16() > limit {
                    break;
                }
                n += c.len_utf16();
                cut.push(c);
            }
            if !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            line = line[cut.len()..].to_string();
            parts.push(cut);
        }
        let extra = if current.is_empty() { 0 } else { 1 };
        if units(&current) + extra + units(&line) > limit {
            parts.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(&line);
    }
    if !current.is_empty() || parts.is_empty() {
        parts.push(current);
    }
    parts
}

/// The summary of a run, or None when nothing is to be said (SPEC §10).
pub fn summary(report: &Report, mode: SummaryMode) -> Option<Rendered> {
    let c = report.counts();
    let reminded = report.count("reminded");
    let did_something =
        c.succeeded + c.failed + c.queued + c.invalid + reminded + report.count("stale") > 0
            || !report.errors.is_empty();
    let urgent = c.failed > 0 || !report.errors.is_empty();
    let tasks: Vec<&TaskReport> = match mode {
        SummaryMode::Never if !urgent => return None,
        SummaryMode::Never => report
            .tasks
            .iter()
            .filter(|t| t.outcome == "failed")
            .collect(),
        SummaryMode::OnChange if !did_something => return None,
        _ => report
            .tasks
            .iter()
            .filter(|t| {
                t.outcome != "skipped" || t.reason.as_ref().map(Redacted::as_str) == Some("observe")
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
        (report.count("stale"), "stale"),
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
    let mut html = format!("<b>heartbeat</b>: {}", escape(&headline));
    let mut approvals = Vec::new();
    for t in tasks {
        html.push('\n');
        html.push_str(&task_line(t));
        if t.outcome == "queued"
            && let Some(id) = t.approval_id
        {
            approvals.push(id);
        }
    }
    if mode != SummaryMode::Never {
        for e in &report.errors {
            html.push_str(&format!("\n⚠️ {}", e.first_line(300).escape()));
        }
    }
    approvals.truncate(MAX_BUTTON_ROWS);
    Some(Rendered {
        kind: if urgent { "failure" } else { "summary" },
        html,
        urgent,
        approvals,
        resets: Vec::new(),
    })
}

/// One line per task: ✅ / ❌ / ⏳ / 🔔 …, the tool and text, the summary or first output line.
fn task_line(t: &TaskReport) -> String {
    let icon = match t.outcome {
        "succeeded" => "✅",
        "failed" => "❌",
        "queued" => "⏳",
        "reminded" => "🔔",
        "invalid" => "⚠️",
        "stale" => "🚫",
        _ => "👀",
    };
    let what = match &t.tool {
        // By its place only: the source text of a task that did not parse may hold a secret
        // that redaction cannot recognise (SPEC §7).
        _ if t.outcome == "invalid" => {
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
        "succeeded" => t
            .summary
            .as_ref()
            .or(t.output.as_ref())
            .map(|o| o.first_line(160).into_string()),
        "queued" => t.approval_id.map(|id| match &t.reason {
            // Proposed by an agent: the person deciding is told.
            Some(why) => format!("approval #{id}, {}", why.as_str()),
            None => format!("approval #{id}"),
        }),
        // A reminder an agent proposed says so.
        "reminded" => t.reason.as_ref().map(|r| r.as_str().to_string()),
        "skipped" => Some("would run".into()),
        _ => t.reason.as_ref().map(|r| r.first_line(160).into_string()),
    };
    let mut line = format!("{icon} {what}");
    if let Some(d) = detail.filter(|d| !d.is_empty()) {
        line.push_str(&format!(" — {}", escape(&d)));
    }
    if t.outcome == "queued"
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
                outcome,
                reason: (*outcome == "failed").then(|| "exit status 1: <oops>".into()),
                approval_id: (*outcome == "queued").then_some(i as i64 + 1),
                exit_code: None,
                output: Some("line one\nline two".into()),
                summary: None,
                duration_ms: None,
                tripped: None,
            });
        }
        r
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
        let m = summary(&r, SummaryMode::OnChange).unwrap();
        assert!(m.urgent);
        assert_eq!(m.kind, "failure");
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
        assert_eq!(lines[4], "🔔 Stretch &lt;now&gt;");
        // Skipped by policy is not news.
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn an_approval_of_a_task_an_agent_proposed_says_so() {
        let mut r = report(&[("queued", Some("log"))]);
        r.tasks[0].reason = Some("proposed by an agent, mcp:<bot>".into());
        let m = summary(&r, SummaryMode::OnChange).unwrap();
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
        assert_eq!(summary(&quiet, SummaryMode::OnChange), None);
        let always = summary(&quiet, SummaryMode::Always).unwrap();
        assert_eq!(always.html, "<b>heartbeat</b>: nothing to do");
        assert!(!always.urgent);
        let ok = report(&[("succeeded", Some("log"))]);
        assert_eq!(summary(&ok, SummaryMode::Never), None);
        let bad = report(&[("succeeded", Some("log")), ("failed", Some("shell"))]);
        let never = summary(&bad, SummaryMode::Never).unwrap();
        assert!(never.urgent);
        assert_eq!(never.html.lines().count(), 2);
        assert!(never.html.starts_with("<b>heartbeat</b>: 1 failed\n❌"));
    }

    #[test]
    fn split_respects_the_limit_at_line_boundaries() {
        let line = "x".repeat(100);
        let text = vec![line.as_str(); 100].join("\n");
        let parts = split(&text, 4096);
        assert!(parts.len() >= 3);
        for p in &parts {
            assert!(units(p) <= 4096);
            assert!(p.lines().all(|l| l == line));
        }
        assert_eq!(parts.join("\n"), text);
        // A line longer than the limit is cut, never dropped; emoji count as two units.
        let long = "😀".repeat(3000);
        let parts = split(&long, 4096);
        assert!(parts.iter().all(|p| units(p) <= 4096));
        assert_eq!(parts.concat(), long);
        assert_eq!(split("", 10), vec![String::new()]);
    }

    #[test]
    fn plain_fallback_strips_tags_and_entities() {
        assert_eq!(
            html_to_plain("<b>heartbeat</b>: a &lt;b&gt; &amp; &quot;c&quot; <code>x</code>"),
            "heartbeat: a <b> & \"c\" x"
        );
    }
}
