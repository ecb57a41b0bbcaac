//! The line an agent's proposal becomes (`heartbeat mcp`'s `propose_task`), and what a
//! proposal may not hold. Pure: no I/O.
//!
//! Invariants:
//! - A proposal is one plain line: no control character, line or paragraph separator, BOM,
//!   zero-width, bidi control or other invisible (default-ignorable) character anywhere in
//!   it (a Unicode-aware rewrite of the file
//!   would otherwise turn one line into several, or show the person other text than runs).
//! - A reminder's text holds no `<`, `>`, backtick or backslash, and a tool's input is written
//!   with `<` and `>` escaped, so the agent cannot open markup that swallows the mark.
//! - The line ends with the mark of its proposer (see [`super::parse::mark`]).

use serde_json::{Map, Value};

use super::parse::{AGENT, mark};
use crate::text::unseen;

/// The longest proposal taken, in bytes of the reminder's text or of `@tool {input}`.
pub(crate) const MAX_BYTES: usize = 2048;

/// Why a proposal is refused: a fixed word for the audit log (`proposal_refused`'s
/// `reason`) and a message for the agent.
#[derive(Debug, PartialEq)]
pub(crate) struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            message: message.into(),
        }
    }
}

/// `Err` naming the first character of `s` a proposal may not hold; `what` names where it is.
pub(crate) fn plain(what: &str, s: &str) -> Result<(), Refusal> {
    match s.chars().find_map(|c| unseen(c).map(|kind| (c, kind))) {
        None => Ok(()),
        Some((c, kind)) => Err(Refusal::new(
            "character",
            format!(
                "{what} holds U+{:04X} ({kind}): a proposal must be one non-empty line of \
                 plain text",
                u32::from(c)
            ),
        )),
    }
}

/// Every string of a JSON value, keys included, checked with [`plain`].
fn plain_value(what: &str, v: &Value) -> Result<(), Refusal> {
    match v {
        Value::String(s) => plain(what, s),
        Value::Array(items) => items.iter().try_for_each(|v| plain_value(what, v)),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            plain(what, k)?;
            plain_value(what, v)
        }),
        _ => Ok(()),
    }
}

/// `Err` when `s` holds a character that opens markup (`<`, `>`, a backtick, a backslash).
pub(crate) fn no_markup(what: &str, s: &str) -> Result<(), Refusal> {
    match s.chars().find(|c| matches!(c, '<' | '>' | '`' | '\\')) {
        None => Ok(()),
        Some(c) => Err(Refusal::new(
            "markup",
            format!("{what} may not hold {c:?} (no <, >, backtick or backslash in a proposal)"),
        )),
    }
}

/// What the agent asks for: a reminder's text, or a tool and its input.
pub(crate) enum Proposed<'a> {
    Reminder(&'a str),
    Tool {
        name: &'a str,
        input: &'a Map<String, Value>,
    },
}

/// The `- [ ] …` line for a proposal by `by` (`mcp:NAME`, from [`provenance`]), mark
/// included, without a line break. Refused when it holds what a proposal may not, or is
/// longer than [`MAX_BYTES`] with its `schedule` heading (written with it when the file
/// does not end below that heading yet).
pub(crate) fn line(
    proposed: &Proposed,
    schedule: Option<&str>,
    by: &str,
) -> Result<String, Refusal> {
    let body = match proposed {
        Proposed::Reminder(text) => {
            plain("\"text\"", text)?;
            no_markup("\"text\"", text)?;
            let text = text.trim();
            if text.is_empty() || text.starts_with('@') {
                return Err(Refusal::new(
                    "invalid",
                    "\"text\" must be one non-empty line that does not start with @ (give a \
                     tool call as \"tool\" and \"input\")",
                ));
            }
            text.to_string()
        }
        Proposed::Tool { name, input } => {
            plain_value("\"input\"", &Value::Object((*input).clone()))?;
            let json = Value::Object((*input).clone())
                .to_string()
                .replace('<', "\\u003c")
                .replace('>', "\\u003e");
            format!("@{name} {json}")
        }
    };
    let size = body.len() + schedule.map_or(0, str::len);
    if size > MAX_BYTES {
        return Err(Refusal::new(
            "too_long",
            format!("the proposal is {size} bytes, longer than the {MAX_BYTES}-byte limit"),
        ));
    }
    let name = by.strip_prefix(AGENT).unwrap_or(by);
    Ok(format!("- [ ] {body} {}", mark(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Body;
    use std::path::Path;

    fn reminder(text: &str) -> Result<String, Refusal> {
        line(&Proposed::Reminder(text), None, "mcp:a")
    }

    fn tool(input: Value) -> Result<String, Refusal> {
        let Value::Object(input) = input else {
            panic!()
        };
        line(
            &Proposed::Tool {
                name: "shell",
                input: &input,
            },
            None,
            "mcp:a",
        )
    }

    #[test]
    fn a_line_ends_with_its_mark_and_reads_back_as_written() {
        assert_eq!(
            reminder(" water plants ").unwrap(),
            "- [ ] water plants <!-- proposed by mcp:a -->"
        );
        let input = serde_json::json!({"cmd": ["sh", "-c", "a <!-- b --> `c` \\ d"]});
        let written = tool(input.clone()).unwrap();
        let before_mark = written.strip_suffix(&format!(" {}", mark("a"))).unwrap();
        assert!(!before_mark.contains(['<', '>']), "{written}");
        assert!(before_mark.contains("\\u003c!-- b --\\u003e"), "{written}");
        let p = Path::new("/h.md");
        let parsed = crate::markdown::parse(p, p, &format!("## Recurring\n{written}\n"));
        let task = &parsed.tasks[0];
        assert_eq!(task.proposed_by.as_deref(), Some("mcp:a"));
        match &task.body {
            Body::Tool { name, input: got } => {
                assert_eq!(
                    (name.as_str(), &Value::Object(got.clone())),
                    ("shell", &input)
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_a_proposal_may_not_hold() {
        for c in [
            '\n', '\r', '\t', '\u{0}', '\u{1b}', '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}',
            '\u{feff}', '\u{200b}', '\u{200d}', '\u{2060}', '\u{202e}', '\u{2066}', '\u{200f}',
        ] {
            let refused = reminder(&format!("a{c}b")).unwrap_err();
            assert_eq!(refused.reason, "character", "{c:?}");
            assert!(
                refused.message.contains(&format!("U+{:04X}", u32::from(c))),
                "{refused:?}"
            );
            for input in [
                serde_json::json!({"cmd": format!("a{c}b")}),
                serde_json::json!({"cmd": [{format!("k{c}"): 1}]}),
            ] {
                assert_eq!(tool(input).unwrap_err().reason, "character", "{c:?}");
            }
        }
        for c in ['<', '>', '`', '\\'] {
            assert_eq!(reminder(&format!("a{c}b")).unwrap_err().reason, "markup");
        }
        assert_eq!(reminder("@log {}").unwrap_err().reason, "invalid");
        assert_eq!(reminder("  ").unwrap_err().reason, "invalid");
        // Unicode beyond those is text.
        assert!(reminder("Grüße, 日本 — ok ✓").is_ok());
    }

    #[test]
    fn two_kib_at_most() {
        assert!(reminder(&"a".repeat(MAX_BYTES)).is_ok());
        assert_eq!(
            reminder(&"a".repeat(MAX_BYTES + 1)).unwrap_err().reason,
            "too_long"
        );
        let big = serde_json::json!({"cmd": "x".repeat(MAX_BYTES)});
        assert_eq!(tool(big).unwrap_err().reason, "too_long");
        let schedule = format!("Every{}6h", " ".repeat(MAX_BYTES));
        let long = line(&Proposed::Reminder("a"), Some(&schedule), "mcp:a");
        assert_eq!(long.unwrap_err().reason, "too_long");
    }
}
