//! Text for people: untrusted text made safe for a terminal, one-line summaries, HTML
//! escaping. Pure functions over strings.
//!
//! Invariants: `clean` output holds no control characters; `first_line` output holds at most
//! its limit of characters plus an ellipsis; `escape` output is safe inside Telegram HTML.

/// Untrusted text made safe for a terminal: control characters are escaped, lines joined.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// The first non-blank line of a text, cleaned and cut to `max_chars` for one-line summaries.
pub fn first_line(text: &str, max_chars: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let line = clean(line);
    if line.chars().count() > max_chars {
        let cut: String = line.chars().take(max_chars).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// Escape text for Telegram's HTML parse mode.
pub fn escape(text: &str) -> String {
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

    #[test]
    fn clean_escapes_control_characters_and_joins_lines() {
        assert_eq!(clean("a\nb\tc\u{1b}[31m"), "a b c\\u{1b}[31m");
    }

    #[test]
    fn first_line_skips_blank_lines_and_cuts_at_characters() {
        assert_eq!(first_line("\n  \n héllo wörld \nnext", 5), "héllo…");
        assert_eq!(first_line("short", 80), "short");
        assert_eq!(first_line("", 80), "");
    }

    #[test]
    fn escape_covers_html_specials() {
        assert_eq!(
            escape(r#"<a href="x">&</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}
