//! A property test through the binary: for generated HEARTBEAT.md files (markers, nesting,
//! fenced code, other sections, CRLF, BOM, final newline or not), a run changes only
//! `[ ]` → `[x]` marker bytes of one-time tasks that succeeded, never bytes in code blocks
//! or other sections, and a second run changes nothing (ticking twice equals ticking once).

use proptest::prelude::*;

use crate::common::*;

#[derive(Clone, Debug)]
enum Piece {
    Heading(&'static str),
    Task { marker: &'static str, indent: bool },
    Done,
    Prose,
    Fence,
    Blank,
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        2 => prop_oneof![
            Just("## One-time"),
            Just("## Recurring"),
            Just("## Notes"),
            Just("### At 2026-01-01"),
        ]
        .prop_map(Piece::Heading),
        6 => (prop_oneof![Just("- "), Just("* "), Just("+ "), Just("1. ")], any::<bool>())
            .prop_map(|(marker, indent)| Piece::Task { marker, indent }),
        1 => Just(Piece::Done),
        1 => Just(Piece::Prose),
        1 => Just(Piece::Fence),
        2 => Just(Piece::Blank),
    ]
}

/// The document, and for every line whether a tick may touch it (a task line outside code
/// and outside other sections).
fn render(pieces: &[Piece], crlf: bool, bom: bool, final_newline: bool) -> (Vec<u8>, Vec<bool>) {
    let mut lines: Vec<(String, bool)> = Vec::new();
    let mut section_one_time = false;
    let mut recurring = false;
    let mut n = 0;
    for p in pieces {
        match p {
            Piece::Heading(h) => {
                if h.starts_with("## ") {
                    section_one_time = *h == "## One-time";
                    recurring = *h == "## Recurring";
                }
                // A one-time schedule under Recurring makes its tasks invalid (fail closed,
                // docs/reference.md#schedule-headings), which this property is not about: there, a
                // plain title instead.
                let h = if recurring && h.starts_with("### ") {
                    "### Chores"
                } else {
                    h
                };
                lines.push(("".into(), false));
                lines.push((h.to_string(), false));
            }
            Piece::Task { marker, indent } => {
                n += 1;
                let pad = if *indent { "  " } else { "" };
                // A nested item needs a parent line above it to be nested; either way it
                // is a task.
                lines.push((
                    format!("{pad}{marker}[ ] @log {{\"text\": \"t{n}\"}}"),
                    section_one_time,
                ));
            }
            Piece::Done => lines.push(("- [x] done already".into(), false)),
            Piece::Prose => {
                lines.push(("".into(), false));
                lines.push(("Prose with [ ] brackets and - [ ] inline.".into(), false));
                lines.push(("".into(), false));
            }
            Piece::Fence => {
                lines.push(("".into(), false));
                lines.push(("```".into(), false));
                lines.push(("- [ ] @log {\"text\": \"in code\"}".into(), false));
                lines.push(("```".into(), false));
                lines.push(("".into(), false));
            }
            Piece::Blank => lines.push(("".into(), false)),
        }
    }
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut text = String::new();
    if bom {
        text.push('\u{feff}');
    }
    let mut tickable = Vec::new();
    for (i, (line, ok)) in lines.iter().enumerate() {
        text.push_str(line);
        if i + 1 < lines.len() || final_newline {
            text.push_str(eol);
        }
        tickable.push(*ok);
    }
    (text.into_bytes(), tickable)
}

/// 0-based line of byte `pos` (line breaks are `\n`; `\r\n` ends with one).
fn line_of(bytes: &[u8], pos: usize) -> usize {
    bytes[..pos].iter().filter(|&&b| b == b'\n').count()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_run_changes_only_marker_bytes_of_one_time_tasks(
        pieces in prop::collection::vec(piece(), 1..24),
        crlf in any::<bool>(),
        bom in any::<bool>(),
        final_newline in any::<bool>(),
    ) {
        let (before, tickable) = render(&pieces, crlf, bom, final_newline);
        let env = Env::empty();
        env.write("HEARTBEAT.md", &before);
        let out = env.run_once(NOW);
        out.code(0);
        let after = env.read_bytes("HEARTBEAT.md");
        prop_assert_eq!(after.len(), before.len());
        let mut changed = 0;
        for (i, (a, b)) in before.iter().zip(&after).enumerate() {
            if a == b {
                continue;
            }
            changed += 1;
            prop_assert_eq!((*a, *b), (b' ', b'x'), "byte {} changed", i);
            prop_assert_eq!(before[i - 1], b'[');
            prop_assert_eq!(before[i + 1], b']');
            let line = line_of(&before, i);
            prop_assert!(tickable[line], "line {} may not be ticked", line + 1);
        }
        let marked = env.events("task_marked_done").len();
        prop_assert_eq!(changed, marked);
        let one_time_ok = env
            .events("task_succeeded")
            .iter()
            .filter(|e| e["section"] == "one_time")
            .count();
        prop_assert_eq!(marked, one_time_ok);
        // Every one-time task outside code got ticked (they all succeed).
        prop_assert_eq!(marked, tickable.iter().filter(|t| **t).count());

        // Ticking twice equals ticking once.
        env.run_once("2026-05-01T11:00:00Z").code(0);
        prop_assert_eq!(env.read_bytes("HEARTBEAT.md"), after);
        prop_assert_eq!(env.events("task_marked_done").len(), marked);
    }
}
