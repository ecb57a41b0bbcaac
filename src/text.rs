//! Text for people and for every sink: [`Redacted`] text, untrusted text made safe for a
//! terminal, HTML escaping.
//!
//! Invariants:
//! - [`Redacted`] text is made only by the one redaction step ([`Secrets::redact`], or
//!   [`Secrets::redact_json`] for a JSON value): its field is private to this module, and
//!   the only other way in is heartbeat's own words (`&'static str`). Every sink takes it:
//!   the audit log's free text and task inputs, every SQLite row of free text (approvals,
//!   grants, the pause, starts, agents' notices, the outbox and sent messages, outcomes, the
//!   MCP tool cache, chats' titles), stdout and stderr (`cmd::Out`, `error::say`, which
//!   redact what they are given and write only the result), Telegram messages, edits and
//!   button answers, and `heartbeat mcp` answers.
//! - Cutting a text to a length exists only on [`Redacted`] ([`Redacted::first_line`],
//!   [`Redacted::truncate`], [`Redacted::split_lines`]): a text is redacted before it is cut,
//!   so that a secret that straddles the cut is never shown minus its tail.
//! - `clean` output holds no control characters; `first_line` output holds at most its limit
//!   of characters plus an ellipsis; `escape` output is safe inside Telegram HTML.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::redact::Secrets;

/// Text that went through redaction: the only text a sink takes.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Redacted(String);

/// A JSON value that went through redaction (secret keys at any depth, every string).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RedactedJson(Value);

impl Secrets {
    /// `text` through the one redaction step.
    pub(crate) fn redact(&self, text: &str) -> Redacted {
        Redacted(self.text(text).into_owned())
    }

    /// `value` through the one redaction step.
    pub(crate) fn redact_json(&self, mut value: Value) -> RedactedJson {
        self.value(&mut value);
        RedactedJson(value)
    }

    /// A task's input through the one redaction step.
    pub(crate) fn redact_map(&self, input: &serde_json::Map<String, Value>) -> RedactedJson {
        self.redact_json(Value::Object(input.clone()))
    }

    /// Every string of `value` through the one redaction step, its keys' values kept: for a
    /// JSON Schema, whose property named `token` describes a value and holds none.
    pub(crate) fn redact_strings(&self, mut value: Value) -> RedactedJson {
        fn walk(secrets: &Secrets, v: &mut Value) {
            match v {
                Value::String(s) => {
                    if let std::borrow::Cow::Owned(o) = secrets.text(s) {
                        *s = o;
                    }
                }
                Value::Array(items) => items.iter_mut().for_each(|v| walk(secrets, v)),
                Value::Object(m) => m.values_mut().for_each(|v| walk(secrets, v)),
                _ => {}
            }
        }
        walk(self, &mut value);
        RedactedJson(value)
    }
}

impl Redacted {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn into_string(self) -> String {
        self.0
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first non-blank line, cleaned ([`clean`]) and cut to `max_chars` characters.
    pub(crate) fn first_line(&self, max_chars: usize) -> Redacted {
        let line = self
            .0
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        let line = clean(line);
        if line.chars().count() > max_chars {
            let cut: String = line.chars().take(max_chars).collect();
            Redacted(format!("{cut}…"))
        } else {
            Redacted(line)
        }
    }

    /// The first `max_lines` non-blank lines, each cleaned ([`clean`]), its trailing
    /// whitespace dropped (its indentation kept) and cut to `max_chars` characters; then a
    /// last `…` when more non-blank lines follow. Empty when there is no non-blank line.
    pub(crate) fn first_lines(&self, max_lines: usize, max_chars: usize) -> Vec<Redacted> {
        let mut lines = self.0.lines().filter(|l| !l.trim().is_empty());
        let mut out: Vec<Redacted> = lines
            .by_ref()
            .take(max_lines)
            .map(|l| {
                Redacted(l.trim_end().to_string())
                    .cut_chars(max_chars)
                    .clean()
            })
            .collect();
        if lines.next().is_some() {
            out.push(Redacted("…".to_string()));
        }
        out
    }

    /// The first `max_chars` characters, with an ellipsis when there were more.
    pub(crate) fn cut_chars(&self, max_chars: usize) -> Redacted {
        match self.0.char_indices().nth(max_chars) {
            Some((end, _)) => Redacted(format!("{}…", &self.0[..end])),
            None => self.clone(),
        }
    }

    /// Cut to at most `limit` bytes on a character boundary, with a note of how much was
    /// left out: what was cut here plus `dropped`, bytes the producer never kept.
    pub(crate) fn truncate(&self, limit: usize, dropped: u64) -> Redacted {
        let text = &self.0;
        if text.len() <= limit && dropped == 0 {
            return self.clone();
        }
        let mut end = limit.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let left_out = (text.len() - end) as u64 + dropped;
        Redacted(format!("{}… [{left_out} more bytes]", &text[..end]))
    }

    /// Cut into parts of at most `limit` units (`units` measures a character), at line
    /// boundaries; a line longer than the limit is cut at a character boundary. Always at
    /// least one part.
    pub(crate) fn split_lines(&self, limit: usize, units: fn(char) -> usize) -> Vec<Redacted> {
        let measure = |s: &str| s.chars().map(units).sum::<usize>();
        let mut parts = Vec::new();
        let mut current = String::new();
        for line in self.0.split('\n') {
            let mut line = line;
            while measure(line) > limit {
                let mut n = 0;
                let mut end = 0;
                for (i, c) in line.char_indices() {
                    if n + units(c) > limit {
                        break;
                    }
                    n += units(c);
                    end = i + c.len_utf8();
                }
                if end == 0 {
                    // A character wider than the limit goes alone, rather than never.
                    end = line.chars().next().map_or(line.len(), char::len_utf8);
                }
                if !current.is_empty() {
                    parts.push(Redacted(std::mem::take(&mut current)));
                }
                parts.push(Redacted(line[..end].to_string()));
                line = &line[end..];
            }
            let extra = if current.is_empty() { 0 } else { 1 };
            if measure(&current) + extra + measure(line) > limit {
                parts.push(Redacted(std::mem::take(&mut current)));
            }
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(line);
        }
        if !current.is_empty() || parts.is_empty() {
            parts.push(Redacted(current));
        }
        parts
    }

    /// Followed by heartbeat's own words.
    pub(crate) fn append(mut self, words: &'static str) -> Redacted {
        self.0.push_str(words);
        self
    }

    /// Without `prefix`, when it starts with it.
    pub(crate) fn strip_prefix(&self, prefix: &str) -> Redacted {
        match self.0.strip_prefix(prefix) {
            Some(rest) => Redacted(rest.to_string()),
            None => self.clone(),
        }
    }

    /// Safe for a terminal ([`clean`]).
    pub(crate) fn clean(&self) -> Redacted {
        Redacted(clean(&self.0))
    }

    /// Escaped for Telegram's HTML parse mode ([`escape`]).
    pub(crate) fn escape(&self) -> Redacted {
        Redacted(escape(&self.0))
    }
}

/// heartbeat's own words hold no secret.
impl From<&'static str> for Redacted {
    fn from(text: &'static str) -> Redacted {
        Redacted(text.to_string())
    }
}

impl fmt::Display for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for Redacted {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl RedactedJson {
    pub(crate) fn as_value(&self) -> &Value {
        &self.0
    }

    pub(crate) fn into_value(self) -> Value {
        self.0
    }

    /// Every string longer than `limit` bytes cut ([`Redacted::truncate`]).
    pub(crate) fn cut_strings(self, limit: usize) -> RedactedJson {
        fn cut(v: &mut Value, limit: usize) {
            match v {
                Value::String(s) if s.len() > limit => {
                    *s = Redacted(std::mem::take(s)).truncate(limit, 0).0;
                }
                Value::Array(items) => items.iter_mut().for_each(|v| cut(v, limit)),
                Value::Object(m) => m.values_mut().for_each(|v| cut(v, limit)),
                _ => {}
            }
        }
        let mut value = self.0;
        cut(&mut value, limit);
        RedactedJson(value)
    }

    /// As JSON text, pretty-printed.
    pub(crate) fn to_pretty(&self) -> Redacted {
        Redacted(serde_json::to_string_pretty(&self.0).unwrap_or_else(|_| "null".into()))
    }

    /// As compact JSON text.
    pub(crate) fn to_text(&self) -> Redacted {
        Redacted(serde_json::to_string(&self.0).unwrap_or_else(|_| "null".into()))
    }
}

impl Serialize for RedactedJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Untrusted text made safe for a terminal (and a message): control and bidi control
/// characters are escaped, lines joined (also at U+2028 and U+2029).
pub(crate) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}' => out.push(' '),
            c if c.is_control() || is_bidi_control(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// The name in `known` nearest to a misspelt `name` (the fewest edits of the whole name,
/// ignoring case), when it is near enough to be a typo: at most two edits, or a quarter of
/// the known name's length for a long one; or a word left out or added (`get_time` for
/// `get_current_time`: the words, split at `_`, `-`, `.` and spaces, of one are the other's
/// in order, two words or more). Of two equally near, the first in sort order. The one
/// helper for every "did you mean".
pub(crate) fn did_you_mean<'k>(name: &str, known: &'k [impl AsRef<str>]) -> Option<&'k str> {
    let name = name.to_lowercase();
    known
        .iter()
        .map(|k| k.as_ref())
        .map(|k| (k, k.to_lowercase()))
        .map(|(k, lower)| (strsim::levenshtein(&name, &lower), k, lower))
        .filter(|(d, k, lower)| *d <= 2.max(k.len() / 4) || words_left_out(&name, lower))
        .min_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)))
        .map(|(_, k, _)| k)
}

/// Whether the words of the shorter of `a` and `b` are the longer one's in order, with some
/// left out, and the shorter has two words or more.
fn words_left_out(a: &str, b: &str) -> bool {
    let words = |s: &str| -> Vec<String> {
        s.split(['_', '-', '.', ' '])
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (words(a), words(b));
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() < 2 || short.len() == long.len() {
        return false;
    }
    let mut rest = long.iter();
    short.iter().all(|w| rest.any(|l| l == w))
}

/// What a character that is not shown as itself is (a line break other than `\n`, a
/// control, zero-width, bidi control or other invisible character), to name it; None for
/// any other. A proposal may hold none of these.
pub(crate) fn unseen(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{2028}' => "a line separator",
        '\u{2029}' => "a paragraph separator",
        '\u{85}' => "a next-line character",
        '\u{feff}' => "a byte order mark",
        '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}' | '\u{180e}' => "a zero-width character",
        c if is_bidi_control(c) => "a bidi control character",
        // Default-ignorable characters: shown as nothing, yet bytes of what runs (tag
        // characters can spell out a whole hidden text). The two emoji presentation
        // selectors (U+FE0E, U+FE0F) change how the character before them looks, not what
        // is there, and stay allowed.
        '\u{ad}'
        | '\u{34f}'
        | '\u{115f}'
        | '\u{1160}'
        | '\u{17b4}'
        | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{2065}'
        | '\u{206a}'..='\u{206f}'
        | '\u{3164}'
        | '\u{fe00}'..='\u{fe0d}'
        | '\u{ffa0}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}' => "an invisible character",
        c if c.is_control() => "a control character",
        _ => return None,
    })
}

/// A character that changes the direction in which the text around it is shown.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// Escape text for Telegram's HTML parse mode.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> Redacted {
        Secrets::default().redact(text)
    }

    #[test]
    fn clean_escapes_control_characters_and_joins_lines() {
        assert_eq!(clean("a\nb\tc\u{1b}[31m"), "a b c\\u{1b}[31m");
    }

    #[test]
    fn first_line_skips_blank_lines_and_cuts_at_characters() {
        assert_eq!(
            plain("\n  \n héllo wörld \nnext").first_line(5).as_str(),
            "héllo…"
        );
        assert_eq!(plain("short").first_line(80).as_str(), "short");
        assert_eq!(plain("").first_line(80).as_str(), "");
    }

    #[test]
    fn a_secret_is_redacted_before_it_is_cut() {
        // Cut first, the token would lose only its tail and show the rest.
        let s = Secrets::new(["tok-0123456789abcdef".to_string()]);
        let text = "the tool said: tok-0123456789abcdef and more";
        assert_eq!(
            s.redact(text).first_line(24).as_str(),
            "the tool said: *** and m…"
        );
        assert_eq!(
            s.redact(text).truncate(20, 0).as_str(),
            "the tool said: *** a… [7 more bytes]"
        );
    }

    #[test]
    fn a_secret_is_redacted_before_a_text_is_split() {
        let s = Secrets::new(["tok-0123456789abcdef".to_string()]);
        let text = format!("{}tok-0123456789abcdef\nnext", "x".repeat(10));
        let parts = s.redact(&text).split_lines(12, |_| 1);
        let shown: Vec<&str> = parts.iter().map(Redacted::as_str).collect();
        assert_eq!(shown, ["xxxxxxxxxx**", "*\nnext"]);
        // A character wider than the limit goes alone instead of looping forever.
        let wide = plain("ab").split_lines(1, |_| 2);
        assert_eq!(
            wide.iter().map(Redacted::as_str).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn truncate_keeps_char_boundaries() {
        let t = |s: &str, limit, dropped| plain(s).truncate(limit, dropped).into_string();
        assert_eq!(t("abc", 3, 0), "abc");
        assert_eq!(t("aé", 2, 0), "a… [2 more bytes]");
        assert_eq!(t("abcdef", 4, 0), "abcd… [2 more bytes]");
        // Bytes the producer dropped count too.
        assert_eq!(t("abcdef", 4, 10), "abcd… [12 more bytes]");
        assert_eq!(t("abc", 4, 10), "abc… [10 more bytes]");
    }

    #[test]
    fn escape_covers_html_specials() {
        assert_eq!(
            escape(r#"<a href="x">&</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn first_lines_are_the_non_blank_ones_indented_and_cut() {
        let text = Secrets::default().redact("\n{\n  \"a\": 1,\n\n  \"b\": \"xyz\"\n}\n");
        let lines: Vec<String> = text
            .first_lines(5, 9)
            .into_iter()
            .map(Redacted::into_string)
            .collect();
        assert_eq!(lines, ["{", "  \"a\": 1,", "  \"b\": \"x…", "}"]);
        let lines: Vec<String> = text
            .first_lines(2, 80)
            .into_iter()
            .map(Redacted::into_string)
            .collect();
        assert_eq!(lines, ["{", "  \"a\": 1,", "…"]);
        assert!(
            Secrets::default()
                .redact(" \n\t\n")
                .first_lines(5, 80)
                .is_empty()
        );
    }

    #[test]
    fn did_you_mean_suggests_close_names_only() {
        let names = ["list_issues", "create_issue", "get_me"];
        assert_eq!(did_you_mean("list_isues", &names), Some("list_issues"));
        assert_eq!(did_you_mean("Create_Issue", &names), Some("create_issue"));
        assert_eq!(did_you_mean("weather", &names), None);
        assert_eq!(did_you_mean("x", &[] as &[String]), None);
        // A long name takes more slips than a short one.
        let events = ["task_succeeded", "state_pruned", "run_started"];
        assert_eq!(
            did_you_mean("tsk_succeded", &events),
            Some("task_succeeded")
        );
        assert_eq!(did_you_mean("stat_prund", &events), Some("state_pruned"));
        assert_eq!(did_you_mean("rn_strtd", &events), None);
        // A word left out or added: the whole name is compared, over every name.
        let tools = ["convert_time", "get_current_time", "get_timezone"];
        assert_eq!(did_you_mean("get_time", &tools), Some("get_current_time"));
        assert_eq!(
            did_you_mean("get_current_local_time", &tools),
            Some("get_current_time")
        );
        assert_eq!(did_you_mean("time", &tools), None);
        assert_eq!(did_you_mean("get_date", &tools), None);
    }
}
