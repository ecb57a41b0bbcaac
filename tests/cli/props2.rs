//! Properties of the parser, the tick and the schedules, through the library (cheap, so
//! many cases), plus random bytes through the binary:
//!
//! - `markdown::parse` never panics, on any string or any bytes made text, and what it
//!   reports is consistent (markers are `[ ]`/`[x]` inside the text, ids are 12 hex digits
//!   and distinct);
//! - `tick_text` changes only marker bytes, is idempotent, never touches code blocks or
//!   HTML blocks, and check → tick → check keeps every id, line and section;
//! - `schedule::is_due` fires an `… at HH:MM` schedule at most once per local day, at the
//!   first run at or after that time (catching up later that day), across DST changes in
//!   Europe/Berlin, America/New_York, Australia/Lord_Howe (30-minute DST), Asia/Kolkata and
//!   America/Sao_Paulo (DST at midnight, 2018/19); `next_due` agrees with it; `Every D`
//!   keeps its interval in real time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use heartbeat::testing::parse;
use heartbeat::testing::{DaySet, Schedule};
use heartbeat::testing::{TickOutcome, tick_text};
use heartbeat::testing::{is_due, local_instant, next_due};
use proptest::prelude::*;

use crate::common::*;

const PATH: &str = "/home/ann/notes/HEARTBEAT.md";

fn p() -> &'static Path {
    Path::new(PATH)
}

/// Everything `parse` promises about its result, for any input.
fn assert_consistent(text: &str) -> Result<(), TestCaseError> {
    let parsed = parse(p(), p(), text);
    let mut ids = BTreeSet::new();
    for t in &parsed.tasks {
        let marker = text.get(t.marker.clone());
        prop_assert!(
            matches!(marker, Some("[ ]" | "[\t]" | "[x]" | "[X]")),
            "marker {:?} at {:?}",
            marker,
            t.marker
        );
        prop_assert_eq!(t.done, matches!(marker, Some("[x]" | "[X]")));
        prop_assert!(t.line >= 1 && t.column >= 1);
        prop_assert!(
            t.id.len() == 12 && t.id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}",
            &t.id
        );
        prop_assert!(ids.insert(t.id.clone()), "duplicate id {}", &t.id);
    }
    Ok(())
}

/// Tick every open task: only marker bytes change, each `' '`/tab → `'x'` at exactly the
/// open markers; a second tick changes nothing; ids, lines and sections survive.
fn assert_tick_all(text: &str) -> Result<(), TestCaseError> {
    let before = parse(p(), p(), text);
    let open: Vec<&str> = before
        .tasks
        .iter()
        .filter(|t| !t.done)
        .map(|t| t.id.as_str())
        .collect();
    let (new, results) = tick_text(p(), p(), text, &open);
    prop_assert_eq!(results.len(), open.len());
    prop_assert!(results.iter().all(|r| r.outcome == TickOutcome::Marked));
    let Some(new) = new else {
        prop_assert!(open.is_empty());
        return Ok(());
    };
    let expected: BTreeSet<usize> = before
        .tasks
        .iter()
        .filter(|t| !t.done)
        .map(|t| t.marker.start + 1)
        .collect();
    prop_assert_eq!(new.len(), text.len());
    let changed: BTreeSet<usize> = text
        .bytes()
        .zip(new.bytes())
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| {
            assert!(
                matches!(a, b' ' | b'\t') && b == b'x',
                "byte {i}: {a} → {b}"
            );
            i
        })
        .collect();
    prop_assert_eq!(changed, expected);
    let after = parse(p(), p(), &new);
    prop_assert_eq!(after.tasks.len(), before.tasks.len());
    for (a, b) in before.tasks.iter().zip(&after.tasks) {
        prop_assert_eq!(&a.id, &b.id);
        prop_assert_eq!((a.line, a.column, a.section), (b.line, b.column, b.section));
        prop_assert!(b.done);
    }
    let (again, results) = tick_text(p(), p(), &new, &open);
    prop_assert_eq!(again, None);
    prop_assert!(
        results
            .iter()
            .all(|r| r.outcome == TickOutcome::AlreadyDone)
    );
    Ok(())
}

const SOUP: &[&str] = &[
    "- [ ] ",
    "- [x] ",
    "* [X] ",
    "+ [\t] ",
    "1. [ ] ",
    "2) [ ]",
    "- [ ]",
    "[ ]",
    "- [",
    "]",
    "@log ",
    "@x.y-z ",
    "@",
    "{\"a\": 1}",
    "{",
    "}",
    "[",
    "\"",
    "\\",
    "\"text\": ",
    "null",
    "```",
    "~~~",
    "    ",
    "\t",
    "> ",
    ">",
    "<div>",
    "</div>",
    "<!--",
    "-->",
    "<pre>",
    "## Recurring",
    "## One-time",
    "## Once",
    "## Notes",
    "### Every 6h",
    "### At 2026-02-30",
    "### Daily at 25:00",
    "### Mondays and Fridays at 09:00",
    "# T",
    "---",
    "===",
    "\n",
    "\n",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "é",
    "😀",
    "\u{2028}",
    "\0",
    "\u{feff}",
    " ",
    "  ",
    "text",
    "1.",
    "- ",
    "* ",
    "|a|b|",
    "[link](x)",
    "`code`",
    "*em*",
    "[^1]",
    "<https://x>",
    "\\[ ]",
    "&amp;",
    "&#0;",
    "```json",
    "[ ]]",
    "[[ ]]",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(SOUP), 0..80).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_arbitrary_strings(text in any::<String>()) {
        assert_consistent(&text)?;
        assert_tick_all(&text)?;
    }

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600), bom in any::<bool>()) {
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if bom {
            text.insert(0, '\u{feff}');
        }
        assert_consistent(&text)?;
        assert_tick_all(&text)?;
    }

    #[test]
    fn markdown_soup_parses_consistently_and_ticks_only_markers(text in soup()) {
        assert_consistent(&text)?;
        assert_tick_all(&text)?;
    }
}

// ---------------------------------------------------------------------------------------
// Code blocks: generated documents with known code regions.

#[derive(Clone, Debug)]
enum Block {
    /// A task at column 0 (a task for sure).
    Task(&'static str),
    /// A task in a blockquote.
    Quoted(&'static str),
    /// A level-2 heading.
    Heading(&'static str),
    Prose,
    Fenced {
        fence: &'static str,
        info: bool,
        lines: Vec<&'static str>,
    },
    Indented(Vec<&'static str>),
    Html(Vec<&'static str>),
}

/// Lines that look like tasks (or could close/open things) inside code.
const CODE_LINES: &[&str] = &[
    "- [ ] @log {\"text\": \"in code\"}",
    "* [ ] plain in code",
    "  - [ ] nested in code",
    "> - [ ] quoted in code",
    "1. [ ] numbered in code",
    "## One-time",
    "<div>",
    "- [x] done in code",
];

fn block() -> impl Strategy<Value = Block> {
    let code_lines = || prop::collection::vec(prop::sample::select(CODE_LINES), 1..5);
    prop_oneof![
        4 => prop::sample::select(&["- [ ] ", "* [ ] ", "+ [ ] ", "1. [ ] ", "- [x] "][..])
            .prop_map(Block::Task),
        1 => prop::sample::select(&["> - [ ] ", "> > * [ ] "][..]).prop_map(Block::Quoted),
        1 => prop::sample::select(&["## One-time", "## Recurring", "## Notes"][..])
            .prop_map(Block::Heading),
        1 => Just(Block::Prose),
        2 => (prop::sample::select(&["```", "~~~", "````"][..]), any::<bool>(), code_lines())
            .prop_map(|(fence, info, lines)| Block::Fenced { fence, info, lines }),
        2 => code_lines().prop_map(Block::Indented),
        2 => code_lines().prop_map(Block::Html),
    ]
}

/// The document, its code regions (byte ranges) and how many tasks it has.
fn render(
    blocks: &[Block],
    unclosed: bool,
    eol: &str,
) -> (String, Vec<std::ops::Range<usize>>, usize) {
    let mut s = String::new();
    let mut code = Vec::new();
    let mut tasks = 0;
    let mut n = 0;
    for b in blocks {
        match b {
            Block::Task(m) => {
                n += 1;
                tasks += 1;
                s.push_str(&format!("{m}@log {{\"text\": \"t{n}\"}}{eol}"));
            }
            Block::Quoted(m) => {
                n += 1;
                tasks += 1;
                s.push_str(&format!("{m}@log {{\"text\": \"q{n}\"}}{eol}"));
            }
            Block::Heading(h) => s.push_str(&format!("{h}{eol}")),
            Block::Prose => s.push_str(&format!("Some prose with [ ] in it.{eol}")),
            Block::Fenced { fence, info, lines } => {
                s.push_str(fence);
                if *info {
                    s.push_str("markdown");
                }
                s.push_str(eol);
                let start = s.len();
                for l in lines {
                    s.push_str(l);
                    s.push_str(eol);
                }
                code.push(start..s.len());
                s.push_str(fence);
                s.push_str(eol);
            }
            Block::Indented(lines) => {
                // A paragraph at column 0 first: it ends any list, so the indented lines
                // are code and not a continuation of a list item.
                s.push_str(&format!("Code follows.{eol}{eol}"));
                let start = s.len();
                for l in lines {
                    s.push_str("    ");
                    s.push_str(l);
                    s.push_str(eol);
                }
                code.push(start..s.len());
            }
            Block::Html(lines) => {
                let start = s.len();
                s.push_str("<div>");
                s.push_str(eol);
                for l in lines {
                    s.push_str(l);
                    s.push_str(eol);
                }
                s.push_str("</div>");
                s.push_str(eol);
                code.push(start..s.len());
            }
        }
        // Every block ends with a blank line (ends quotes and HTML blocks).
        s.push_str(eol);
    }
    if unclosed {
        s.push_str(&format!("```{eol}"));
        let start = s.len();
        s.push_str(&format!(
            "- [ ] @log {{\"text\": \"never closed\"}}{eol}- [ ] more"
        ));
        code.push(start..s.len());
    }
    (s, code, tasks)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn tasks_in_code_and_html_blocks_are_never_tasks_nor_ticked(
        blocks in prop::collection::vec(block(), 0..30),
        unclosed in any::<bool>(),
        eol in prop::sample::select(&["\n", "\r\n", "\r"][..]),
    ) {
        let (text, code, tasks) = render(&blocks, unclosed, eol);
        let parsed = parse(p(), p(), &text);
        prop_assert_eq!(parsed.tasks.len(), tasks, "{:?}", text);
        for t in &parsed.tasks {
            prop_assert!(
                !code.iter().any(|r| r.contains(&t.marker.start)),
                "a task inside code at line {}: {:?}", t.line, text
            );
        }
        let ids: Vec<&str> = parsed.tasks.iter().map(|t| t.id.as_str()).collect();
        if let (Some(new), _) = tick_text(p(), p(), &text, &ids) {
            for r in &code {
                prop_assert_eq!(&new.as_bytes()[r.clone()], &text.as_bytes()[r.clone()]);
            }
        }
        assert_tick_all(&text)?;
    }

    /// check → tick some → check: every id, line, column and section stays; exactly the
    /// ticked ones become done; ticking the rest later gives the same file as ticking all
    /// at once.
    #[test]
    fn check_tick_check_keeps_ids_stable(
        blocks in prop::collection::vec(block(), 0..30),
        eol in prop::sample::select(&["\n", "\r\n"][..]),
        pick in prop::collection::vec(any::<bool>(), 30),
    ) {
        let (text, _, _) = render(&blocks, false, eol);
        let before = parse(p(), p(), &text);
        let chosen: Vec<&str> = before
            .tasks
            .iter()
            .zip(pick.iter().cycle())
            .filter(|(t, pick)| **pick && !t.done)
            .map(|(t, _)| t.id.as_str())
            .collect();
        let (new, _) = tick_text(p(), p(), &text, &chosen);
        let new = new.unwrap_or_else(|| text.clone());
        let after = parse(p(), p(), &new);
        prop_assert_eq!(after.tasks.len(), before.tasks.len());
        for (a, b) in before.tasks.iter().zip(&after.tasks) {
            prop_assert_eq!(&a.id, &b.id);
            prop_assert_eq!((a.line, a.column, a.section, &a.text), (b.line, b.column, b.section, &b.text));
            prop_assert_eq!(b.done, a.done || chosen.contains(&a.id.as_str()));
        }
        let rest: Vec<&str> = after.tasks.iter().filter(|t| !t.done).map(|t| t.id.as_str()).collect();
        let all: Vec<&str> = before.tasks.iter().filter(|t| !t.done).map(|t| t.id.as_str()).collect();
        let two_steps = tick_text(p(), p(), &new, &rest).0.unwrap_or_else(|| new.clone());
        let one_step = tick_text(p(), p(), &text, &all).0.unwrap_or_else(|| text.clone());
        prop_assert_eq!(two_steps, one_step);
    }
}

// ---------------------------------------------------------------------------------------
// Schedules across DST.

const ZONES: [Tz; 5] = [
    chrono_tz::Europe::Berlin,
    chrono_tz::America::New_York,
    chrono_tz::Australia::Lord_Howe,
    chrono_tz::Asia::Kolkata,
    chrono_tz::America::Sao_Paulo,
];

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

/// Instants (to the hour) in [from, to) after which `tz`'s UTC offset differs.
fn transitions(tz: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    let mut out = Vec::new();
    let mut t = from;
    while t < to {
        let next = t + TimeDelta::hours(1);
        if offset(t) != offset(next) {
            out.push(next);
        }
        t = next;
    }
    out
}

/// Simulation windows: a few days around every DST change of the zone in the years that
/// have them (Sao Paulo: 2018/19, its last DST), or a plain week (Kolkata).
fn windows(tz: Tz) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let (from, to) = if tz == chrono_tz::America::Sao_Paulo {
        (utc("2018-06-01T00:00:00Z"), utc("2019-06-01T00:00:00Z"))
    } else {
        (utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"))
    };
    let found = transitions(tz, from, to);
    if found.is_empty() {
        return vec![(utc("2026-03-26T00:00:00Z"), utc("2026-03-31T00:00:00Z"))];
    }
    found
        .into_iter()
        .map(|t| (t - TimeDelta::days(2), t + TimeDelta::days(2)))
        .collect()
}

/// Run every `step` from `from` to `to`: the instants a task with `schedule` was attempted
/// (due → attempted, remembered as its last attempt), checking `next_due` on the way.
fn simulate(
    tz: Tz,
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: TimeDelta,
) -> (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) {
    let mut last = None;
    let mut attempts = Vec::new();
    let mut runs = Vec::new();
    let mut promised: Option<DateTime<Utc>> = None;
    let mut t = from;
    let mut i = 0u32;
    while t < to {
        runs.push(t);
        if is_due(Some(schedule), tz, last, t) {
            if let Some(p) = promised.take() {
                assert!(
                    p <= t,
                    "{tz}: {schedule:?}: next_due said {p}, first due run {t}"
                );
            }
            attempts.push(t);
            last = Some(t);
        } else if i.is_multiple_of(7) {
            // next_due: later than now, due then, and no earlier than the run that finds it due.
            let n = next_due(Some(schedule), tz, last, t);
            if let Some(n) = n {
                assert!(
                    n > t,
                    "{tz}: {schedule:?}: next_due({t}) = {n}, not due now"
                );
                assert!(
                    is_due(Some(schedule), tz, last, n),
                    "{tz}: {schedule:?}: not due at next_due {n}"
                );
                promised = Some(promised.map_or(n, |p: DateTime<Utc>| p.min(n)));
            }
        }
        t += step;
        i += 1;
    }
    (attempts, runs)
}

fn local_date(tz: Tz, t: DateTime<Utc>) -> NaiveDate {
    t.with_timezone(&tz).date_naive()
}

/// `… at HH:MM` on `days`: at most one attempt per local day, and on every local day that
/// has a run at or after HH:MM, exactly one, at the first such run.
fn check_at(
    tz: Tz,
    days: DaySet,
    time: NaiveTime,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: TimeDelta,
) {
    let schedule = Schedule::At { days, time };
    let (attempts, runs) = simulate(tz, &schedule, from, to, step);
    let mut per_day: BTreeMap<NaiveDate, Vec<DateTime<Utc>>> = BTreeMap::new();
    for a in &attempts {
        per_day.entry(local_date(tz, *a)).or_default().push(*a);
    }
    let ctx = format!("{tz} at {time} every {step} from {from}");
    for (day, list) in &per_day {
        assert_eq!(
            list.len(),
            1,
            "{ctx}: {day} fired {} times: {list:?}",
            list.len()
        );
    }
    let mut expected: BTreeMap<NaiveDate, DateTime<Utc>> = BTreeMap::new();
    for r in &runs {
        let day = local_date(tz, *r);
        if !days.contains(day.weekday()) {
            continue;
        }
        let at = local_instant(tz, day.and_time(time));
        if *r >= at {
            expected.entry(day).or_insert(*r);
        }
    }
    let got: BTreeMap<NaiveDate, DateTime<Utc>> =
        per_day.into_iter().map(|(d, l)| (d, l[0])).collect();
    assert_eq!(got, expected, "{ctx}");
}

/// `Every D`: the first run is an attempt, then each attempt is the first run at least D
/// after the previous one (real time: a DST change neither shortens nor stretches it).
fn check_every(
    tz: Tz,
    d: std::time::Duration,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: TimeDelta,
) {
    let schedule = Schedule::Every(d);
    let (attempts, runs) = simulate(tz, &schedule, from, to, step);
    let d = TimeDelta::from_std(d).unwrap();
    let mut expected = Vec::new();
    for r in runs {
        if expected.last().is_none_or(|l: &DateTime<Utc>| r - *l >= d) {
            expected.push(r);
        }
    }
    assert_eq!(attempts, expected, "{tz} every {d} step {step}");
}

fn hm(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).unwrap()
}

/// Times around the changes: in the spring gap, in the repeated hour, at the edges, at
/// midnight (Sao Paulo changed at midnight), and ordinary ones.
const TIMES: [(u32, u32); 14] = [
    (0, 0),
    (0, 30),
    (1, 0),
    (1, 30),
    (1, 45),
    (2, 0),
    (2, 15),
    (2, 30),
    (2, 59),
    (3, 0),
    (3, 30),
    (12, 0),
    (23, 30),
    (23, 59),
];

#[test]
fn at_schedules_fire_once_per_local_day_across_dst_in_five_zones() {
    // The windows really are around DST changes: two a year (Kolkata: none).
    for tz in ZONES {
        let want = if tz == chrono_tz::Asia::Kolkata { 1 } else { 2 };
        assert_eq!(windows(tz).len(), want, "{tz}");
    }
    // Lord Howe moves by 30 minutes.
    let lh = chrono_tz::Australia::Lord_Howe;
    let (from, _) = windows(lh)[0];
    let t = from + TimeDelta::days(2);
    let offset = |t: DateTime<Utc>| {
        lh.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc()
    };
    assert_eq!(
        (offset(t - TimeDelta::hours(2)) - offset(t + TimeDelta::hours(2))).abs(),
        1800
    );
    let steps = [1, 15, 30, 60, 90].map(TimeDelta::minutes);
    for tz in ZONES {
        for (from, to) in windows(tz) {
            for (h, m) in TIMES {
                for step in steps {
                    // Start off the hour too, so runs do not all land on :00.
                    check_at(
                        tz,
                        DaySet::ALL,
                        hm(h, m),
                        from + TimeDelta::minutes(7),
                        to,
                        step,
                    );
                }
                check_at(
                    tz,
                    DaySet::WEEKDAYS,
                    hm(h, m),
                    from,
                    to,
                    TimeDelta::minutes(10),
                );
            }
        }
    }
}

#[test]
fn every_schedules_keep_real_time_intervals_across_dst_in_five_zones() {
    let durations =
        [30 * 60, 3600, 6 * 3600, 86_400, 2 * 86_400].map(std::time::Duration::from_secs);
    for tz in ZONES {
        for (from, to) in windows(tz) {
            for d in durations {
                for step in [5, 17, 60].map(TimeDelta::minutes) {
                    check_every(tz, d, from, to, step);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn at_schedules_random_zone_time_days_and_run_spacing(
        zone in 0..ZONES.len(),
        which in any::<prop::sample::Index>(),
        h in 0u32..24,
        m in 0u32..60,
        days in 1u8..128,
        step in 3i64..240,
        offset in 0i64..240,
    ) {
        let tz = ZONES[zone];
        let windows = windows(tz);
        let (from, to) = windows[which.index(windows.len())];
        check_at(tz, DaySet(days), hm(h, m), from + TimeDelta::minutes(offset), to, TimeDelta::minutes(step));
    }
}

// ---------------------------------------------------------------------------------------
// Random bytes through the binary.

fn markdownish_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(SOUP).prop_map(|s| s.as_bytes().to_vec()),
            1 => prop::collection::vec(any::<u8>(), 0..8),
        ],
        0..60,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]

    /// Whatever the file holds: exit 0, 1 or 2 with `heartbeat: …` errors, never a panic;
    /// the file changes in marker bytes only, the audit stays whole.
    #[test]
    fn the_binary_survives_random_files(bytes in markdownish_bytes()) {
        let env = Env::empty().config("autonomy = \"full\"\n");
        env.write("HEARTBEAT.md", &bytes);
        for args in [&["check"][..], &["run", "--once", "--dry-run"], &["run", "--once"]] {
            let out = env.cmd(args).output();
            out.no_panic();
            prop_assert!(matches!(out.code, Some(0..=2)), "{:?}: {:?}\n{}", args, out.code, out.stderr);
            for line in out.stderr.lines() {
                prop_assert!(line.starts_with("heartbeat: "), "{:?}: {}", args, out.stderr);
            }
        }
        let after = env.read_bytes("HEARTBEAT.md");
        prop_assert_eq!(after.len(), bytes.len());
        for (i, (a, b)) in bytes.iter().zip(&after).enumerate() {
            if a != b {
                prop_assert!(matches!(*a, b' ' | b'\t') && *b == b'x', "byte {}", i);
            }
        }
        let scan = crate::crash::scan_audit(&env);
        prop_assert!(scan.bad.is_empty() && scan.tail.is_none());
    }
}
