//! Active hours, active days and task schedules. Pure: every function takes `now`.
//!
//! Invariants:
//! - Nothing here reads the clock or the environment.
//! - A local wall-clock time becomes an instant only through [`local_instant`]: a time that a
//!   spring-forward gap skips maps to the first instant after the gap (02:30 on 2026-03-29 in
//!   Europe/Berlin → 03:00 CEST), a time that a fall-back repeats maps to the earlier of its
//!   two instants. Every schedule and window uses this one rule, so `is_due`, `next_due`,
//!   `is_active` and `next_active` agree with each other.
//! - Searches step day by day over a bounded range (at most ten local days), never minute by
//!   minute.

use chrono::{
    DateTime, Datelike, Days, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeDelta,
    TimeZone, Timelike, Utc, Weekday,
};
use chrono_tz::Tz;
use std::time::Duration;

use crate::model::{DaySet, Schedule, Section};

/// A daily window in local minutes since midnight: start inclusive, end exclusive.
/// `end` may be 1440 (`24:00`). `start > end` crosses midnight. `start == end` is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub start: u32,
    pub end: u32,
}

impl Window {
    pub(crate) const ALWAYS: Window = Window {
        start: 0,
        end: 1440,
    };

    /// Parse `HH:MM-HH:MM`. Errors describe what is wrong (`8am`, `24:30`, start == end).
    pub(crate) fn parse(s: &str) -> Result<Window, String> {
        let s = s.trim();
        let Some((a, b)) = s.split_once('-') else {
            return Err(format!("{s:?} is not a window (expected HH:MM-HH:MM)"));
        };
        let start = parse_clock(a.trim())?;
        let end = parse_clock(b.trim())?;
        if start == 1440 {
            return Err("24:00 may only end a window, not start it".to_string());
        }
        if start == end {
            return Err(format!(
                "{s:?} is an empty window (start equals end); use \"00:00-24:00\" for always"
            ));
        }
        Ok(Window { start, end })
    }

    /// Whether the window runs past midnight into the next day.
    pub(crate) fn crosses_midnight(self) -> bool {
        self.start > self.end
    }

    /// Whether the wall-clock time `t` is inside the window (start inclusive, end exclusive,
    /// across midnight when the window crosses it).
    pub(crate) fn contains(self, t: NaiveDateTime) -> bool {
        self.owning_date(t).is_some()
    }

    /// The local date whose window contains the wall-clock time `t`, if any. For a window
    /// that crosses midnight, the part after midnight belongs to the previous date.
    fn owning_date(self, t: NaiveDateTime) -> Option<NaiveDate> {
        let m = t.hour() * 60 + t.minute();
        if !self.crosses_midnight() {
            (self.start <= m && m < self.end).then(|| t.date())
        } else if m >= self.start {
            Some(t.date())
        } else if m < self.end {
            t.date().pred_opt()
        } else {
            None
        }
    }

    fn start_time(self) -> NaiveTime {
        // `start` is always < 1440 (checked by `parse`; `ALWAYS` starts at 0).
        NaiveTime::from_hms_opt(self.start / 60 % 24, self.start % 60, 0).unwrap_or(NaiveTime::MIN)
    }
}

/// `HH:MM` with two digits each, as minutes since midnight; `24:00` is 1440.
fn parse_clock(s: &str) -> Result<u32, String> {
    let b = s.as_bytes();
    let shaped =
        b.len() == 5 && b[2] == b':' && [0, 1, 3, 4].iter().all(|&i| b[i].is_ascii_digit());
    if !shaped {
        return Err(format!("{s:?} is not a time (expected HH:MM)"));
    }
    let h = u32::from(b[0] - b'0') * 10 + u32::from(b[1] - b'0');
    let m = u32::from(b[3] - b'0') * 10 + u32::from(b[4] - b'0');
    if m > 59 || h > 24 || (h == 24 && m != 0) {
        return Err(format!("{s} is not a valid time"));
    }
    Ok(h * 60 + m)
}

/// `HH:MM` between 00:00 and 23:59, as used in schedule headings.
fn parse_time_of_day(s: &str) -> Option<NaiveTime> {
    let minutes = parse_clock(s).ok()?;
    if minutes >= 1440 {
        return None;
    }
    NaiveTime::from_hms_opt(minutes / 60, minutes % 60, 0)
}

/// `mon`, `Monday`, … (any case) → weekday.
pub(crate) fn parse_day(s: &str) -> Option<Weekday> {
    let day = match s.trim().to_ascii_lowercase().as_str() {
        "mon" | "monday" => Weekday::Mon,
        "tue" | "tuesday" => Weekday::Tue,
        "wed" | "wednesday" => Weekday::Wed,
        "thu" | "thursday" => Weekday::Thu,
        "fri" | "friday" => Weekday::Fri,
        "sat" | "saturday" => Weekday::Sat,
        "sun" | "sunday" => Weekday::Sun,
        _ => return None,
    };
    Some(day)
}

/// The instant of a local wall-clock time in `tz`.
///
/// A time skipped by a spring-forward gap maps to the first valid instant after the gap (the
/// transition itself); a time repeated by a fall-back maps to the earlier instant.
pub fn local_instant(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => t.to_utc(),
        LocalResult::Ambiguous(a, b) => a.min(b).to_utc(),
        LocalResult::None => first_after_gap(tz, local),
    }
}

/// The daemon's tick interval must lie in this range (`[daemon] every` and `daemon --every`
/// alike): under a second is a busy loop, and past a year the time arithmetic of "the next
/// tick" has no meaning (and would overflow for absurd values).
pub(crate) const TICK_RANGE: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(366 * 24 * 3600),
);

/// `every` if it is a usable tick interval; else why not, for the key or flag's message.
pub(crate) fn check_tick_interval(
    every: std::time::Duration,
) -> Result<std::time::Duration, String> {
    if every < TICK_RANGE.0 {
        Err("must be at least 1s".into())
    } else if every > TICK_RANGE.1 {
        Err("must be at most 366d".into())
    } else {
        Ok(every)
    }
}

/// Local midnight of `now`'s day in `tz`: the start of the budget day and the message day.
/// Where the day starts with a DST gap (clocks jump from 23:59:59 to 01:00, as in
/// America/Sao_Paulo until 2019), the day starts at the end of the gap, exactly as
/// [`local_instant`] places any time in a gap; never at `now`, which would restart the day at
/// every run.
pub(crate) fn local_midnight(tz: Tz, now: DateTime<Utc>) -> DateTime<Utc> {
    let day = now.with_timezone(&tz).date_naive();
    local_instant(tz, day.and_time(NaiveTime::MIN))
}

/// The transition instant that ends the gap containing `local`: bracket it with valid instants
/// on both sides, then bisect for the first second whose wall clock is at or past `local`.
fn first_after_gap(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let near = |sign: i64| {
        (1..=48).find_map(|h| {
            let t = local.checked_add_signed(TimeDelta::hours(sign * h))?;
            let r = tz.from_local_datetime(&t);
            if sign < 0 { r.latest() } else { r.earliest() }
        })
    };
    let (Some(lo), Some(hi)) = (near(-1), near(1)) else {
        return Utc.from_utc_datetime(&local);
    };
    // Invariant: wall(lo) < local <= wall(hi).
    let (mut lo, mut hi) = (lo.timestamp(), hi.timestamp());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match DateTime::from_timestamp(mid, 0) {
            Some(t) if t.with_timezone(&tz).naive_local() >= local => hi = mid,
            _ => lo = mid,
        }
    }
    DateTime::from_timestamp(hi, 0).unwrap_or_else(|| Utc.from_utc_datetime(&local))
}

/// Instants in [from, to) at which `tz` changes its UTC offset (the wall clock jumps).
fn transitions(tz: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    let mut out = Vec::new();
    let mut t = from;
    while t < to {
        let next = t + TimeDelta::days(1);
        if offset(t) != offset(next) {
            // Bisect for the first second with the new offset.
            let (mut lo, mut hi) = (t.timestamp(), next.timestamp());
            let before = offset(t);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                match DateTime::from_timestamp(mid, 0) {
                    Some(m) if offset(m) == before => lo = mid,
                    _ => hi = mid,
                }
            }
            out.extend(DateTime::from_timestamp(hi, 0));
        }
        t = next;
    }
    out
}

fn local_date(tz: Tz, now: DateTime<Utc>) -> NaiveDate {
    now.with_timezone(&tz).date_naive()
}

/// When the tool may run at all: zone, daily window, active days.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ActiveHours {
    pub tz: Tz,
    pub window: Window,
    pub days: DaySet,
}

impl ActiveHours {
    /// Whether `now` is inside the window, in local time in `tz`, on an active day.
    ///
    /// For a window that crosses midnight, the part after midnight belongs to the day the
    /// window started: with `22:00-06:00` and active days mon–fri, Saturday 02:00 is active
    /// (the window opened on Friday) and Monday 02:00 is not (it opened on Sunday).
    pub(crate) fn is_active(&self, now: DateTime<Utc>) -> bool {
        let wall = now.with_timezone(&self.tz).naive_local();
        self.window
            .owning_date(wall)
            .is_some_and(|d| self.days.contains(d.weekday()))
    }

    /// The first instant at or after `now` that is active; None if never (no active days).
    ///
    /// Activity can only begin where the wall clock reaches a window start or where it jumps
    /// (a DST transition), so those instants are the only candidates.
    pub(crate) fn next_active(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.days.is_empty() {
            return None;
        }
        if self.is_active(now) {
            return Some(now);
        }
        let today = local_date(self.tz, now);
        let mut candidates = Vec::new();
        for offset in -1i64..=8 {
            let Some(d) = shift(today, offset) else {
                continue;
            };
            if !self.days.contains(d.weekday()) {
                continue;
            }
            let start = d.and_time(self.window.start_time());
            match self.tz.from_local_datetime(&start) {
                LocalResult::Single(t) => candidates.push(t.to_utc()),
                // The later instant matters when `now` is between the two.
                LocalResult::Ambiguous(a, b) => candidates.extend([a.to_utc(), b.to_utc()]),
                LocalResult::None => candidates.push(first_after_gap(self.tz, start)),
            }
        }
        candidates.extend(transitions(
            self.tz,
            now - TimeDelta::days(1),
            now + TimeDelta::days(10),
        ));
        candidates
            .into_iter()
            .filter(|&t| t >= now && self.is_active(t))
            .min()
    }
}

fn shift(d: NaiveDate, days: i64) -> Option<NaiveDate> {
    if days >= 0 {
        d.checked_add_days(Days::new(days.unsigned_abs()))
    } else {
        d.checked_sub_days(Days::new(days.unsigned_abs()))
    }
}

/// What a level-3 heading means in a section.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HeadingKind {
    /// A schedule, the zone its times are in when the heading names one (` in
    /// America/New_York`; else the configured zone), and its jitter (`~15m`).
    Schedule(Schedule, Option<Tz>, Option<Duration>),
    /// Meant as a schedule (it starts with a schedule word or looks like a cron line) but is
    /// not a valid one for this section: the tasks below it must not run. The message names
    /// the heading and the forms the section accepts.
    Invalid(String),
    /// Not a schedule: only a title.
    Title,
}

/// The forms a Recurring section accepts, for messages.
pub(crate) const RECURRING_FORMS: &str = r#"expected "Every <duration>", "Daily at HH:MM", "Weekdays at HH:MM", "Weekends at HH:MM", "<Day>s at HH:MM", "Cron M H DOM MON DOW""#;
/// The forms a One-time section accepts, for messages.
pub(crate) const ONE_TIME_FORMS: &str = r#"expected "At YYYY-MM-DD HH:MM" or "At YYYY-MM-DD""#;

/// Read a level-3 heading under `section`. Keywords are compared without case and runs of
/// whitespace count as one space.
///
/// Fails closed (docs/reference.md#schedule-headings): a heading that looks meant as a schedule but
/// does not parse as one of this section is [`HeadingKind::Invalid`], never a title, so that a typo
/// never makes a task due at every run or a future one-time task due now.
pub(crate) fn parse_heading(section: Section, text: &str) -> HeadingKind {
    if section == Section::Other {
        return HeadingKind::Title;
    }
    let (name, forms) = match section {
        Section::OneTime => ("one-time", ONE_TIME_FORMS),
        _ => ("recurring", RECURRING_FORMS),
    };
    let shown = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let invalid = |why: String| HeadingKind::Invalid(format!("schedule heading {shown:?}: {why}"));
    // `<schedule> [~D] [in ZONE]`, the two in either order.
    let (text, mut jitter) = match split_jitter(text) {
        Ok(split) => split,
        Err(why) => return invalid(why),
    };
    let (text, zone) = match split_zone(text) {
        Ok(split) => split,
        Err(why) => return invalid(why),
    };
    let text = match (jitter, split_jitter(text)) {
        (_, Err(why)) => return invalid(why),
        (None, Ok((rest, j))) => {
            jitter = j;
            rest
        }
        (Some(_), Ok(_)) => text,
    };
    // A cron line that does not parse says why, in cron's terms.
    if let Some(Err(why)) = cron_fields(text).map(crate::cron::CronLine::parse) {
        return HeadingKind::Invalid(format!("schedule heading {shown:?}: {why}"));
    }
    let Some(schedule) = parse_schedule(text) else {
        if !looks_like_schedule(text) {
            return HeadingKind::Title;
        }
        let zero = shown
            .to_ascii_lowercase()
            .strip_prefix("every ")
            .and_then(|d| humantime::parse_duration(d).ok())
            .is_some_and(|d| d.is_zero());
        // Only a schedule this section takes is worth suggesting.
        let fits = |meant: &String| parse_schedule(meant).is_some_and(|s| s.section() == section);
        let hint = match corrected(text).filter(fits) {
            Some(meant) => format!(" (did you mean {meant:?}?)"),
            None if zero => " (the interval must be longer than zero)".to_string(),
            None => String::new(),
        };
        return HeadingKind::Invalid(format!(
            "schedule heading {shown:?} is not a valid {name} schedule{hint}; {forms}"
        ));
    };
    if let Some(j) = jitter
        && let Err(why) = check_jitter(&schedule, j)
    {
        return invalid(why);
    }
    let belongs = schedule.section();
    if belongs == section {
        HeadingKind::Schedule(schedule, zone, jitter)
    } else {
        let (kind, home) = match belongs {
            Section::OneTime => ("one-time", "## One-time"),
            _ => ("recurring", "## Recurring"),
        };
        HeadingKind::Invalid(format!(
            "schedule heading {shown:?} is a {kind} schedule, not a {name} one (move it under \
             \"{home}\"); {forms}"
        ))
    }
}

/// A heading's trailing jitter `~D` (docs/reference.md#schedule-headings): the heading
/// without it, and D; the heading as it is when it has none, or when what precedes it is no
/// schedule. A D that is not a duration longer than zero is an error.
fn split_jitter(text: &str) -> Result<(&str, Option<Duration>), String> {
    let t = text.trim_end();
    let (rest, last) = t.rsplit_once(char::is_whitespace).unwrap_or(("", t));
    let Some(spec) = last.strip_prefix('~') else {
        return Ok((text, None));
    };
    if parse_schedule(rest).is_none() && !looks_like_schedule(rest) {
        return Ok((text, None));
    }
    match humantime::parse_duration(spec) {
        Ok(d) if !d.is_zero() => Ok((rest.trim_end(), Some(d))),
        _ => Err(format!(
            "{last:?} is not a jitter: write ~ and a duration longer than zero (\"~15m\")"
        )),
    }
}

/// Jitter moves a calendar schedule's slots within a gap shorter than the shortest one
/// between two slots; `Every D` and one-time dates take none.
fn check_jitter(schedule: &Schedule, jitter: Duration) -> Result<(), String> {
    if !has_slots(Some(schedule)) {
        return Err("jitter (~D) is for calendar schedules (`… at HH:MM`, cron lines) only".into());
    }
    // The shortest gap between two slots over a year (in UTC: a zone moves no gap by more
    // than its DST shift, which the comparison below does not need to be exact about).
    let from = DateTime::<Utc>::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let times: Vec<DateTime<Utc>> = slots(
        Some(schedule),
        chrono_tz::UTC,
        from,
        from + TimeDelta::days(400),
        SlotRules::default(),
    )
    .take(2000)
    .map(|s| s.at)
    .collect();
    let shortest = times.windows(2).map(|w| w[1] - w[0]).min();
    match shortest {
        Some(gap) if delta(jitter) >= gap => Err(format!(
            "jitter ~{} is not shorter than the shortest gap between two slots ({})",
            humantime::format_duration(jitter),
            humantime::format_duration(gap.to_std().unwrap_or_default())
        )),
        _ => Ok(()),
    }
}

/// A schedule heading's own zone: `<schedule> in <IANA zone>` (docs/reference.md#schedule-headings).
/// The heading without it, and the zone; the heading as it is when it names none, or when
/// what precedes ` in …` is no schedule (`Meeting in Berlin` is a title). A zone that is not
/// an IANA name is an error (with a did-you-mean): its tasks must not run at the wrong time.
fn split_zone(text: &str) -> Result<(&str, Option<Tz>), String> {
    let t = text.trim_end();
    let Some((rest, name)) = t.rsplit_once(char::is_whitespace) else {
        return Ok((text, None));
    };
    let Some(rest) = rest
        .trim_end()
        .strip_suffix(" in")
        .or_else(|| rest.trim_end().strip_suffix(" IN"))
        .or_else(|| rest.trim_end().strip_suffix(" In"))
    else {
        return Ok((text, None));
    };
    if parse_schedule(rest).is_none() && !looks_like_schedule(rest) {
        return Ok((text, None));
    }
    match name.parse::<Tz>() {
        Ok(tz) => Ok((rest, Some(tz))),
        Err(_) => {
            let hint = zone_hint(name)
                .map(|near| format!(" (did you mean {near:?}?)"))
                .unwrap_or_default();
            Err(format!(
                "{name:?} is not an IANA time zone name (such as \"America/New_York\"){hint}"
            ))
        }
    }
}

/// The IANA zone a name that is not one probably meant: the same name in another case
/// (`europe/berlin`), a zone whose city it names (`Berlin` → `Europe/Berlin`), or one a slip
/// away (`Europe/Berln`).
pub(crate) fn zone_hint(name: &str) -> Option<String> {
    let names: Vec<&'static str> = chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()).collect();
    let wanted = name.trim().replace(' ', "_");
    let city = |n: &&&str| {
        n.rsplit('/')
            .next()
            .is_some_and(|c| c.eq_ignore_ascii_case(&wanted))
    };
    names
        .iter()
        .find(|n| n.eq_ignore_ascii_case(&wanted))
        .or_else(|| names.iter().filter(|n| n.contains('/')).find(city))
        .map(|n| n.to_string())
        .or_else(|| crate::text::did_you_mean(&wanted, &names).map(str::to_string))
}

/// Schedule words that are never an ordinary title's first word.
const SCHEDULE_WORDS: [&str; 18] = [
    "every", "evry", "everyday", "daily", "hourly", "weekly", "monthly", "yearly", "nightly",
    "weekday", "weekdays", "weekend", "weekends", "at", "tues", "thur", "thurs", "cron",
];

/// The days' full names, for a slip in one.
const DAY_NAMES: [&str; 14] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "mondays",
    "tuesdays",
    "wednesdays",
    "thursdays",
    "fridays",
    "saturdays",
    "sundays",
];

/// Whether a heading is meant as a schedule (docs/reference.md#schedule-headings, fail closed):
/// - its first word is a schedule word or a day's name (plural too);
/// - it has a schedule word other than `at` (`Backups daily`), a day's full name, a time of
///   day or a date anywhere (`Backups on Mondays`, `On 2026-12-24`, `Lunch 12:30`, `Report
///   9am`): such a title is too likely a schedule written another way for its tasks to run
///   at every run;
/// - it is a schedule but for one slip in its first word (`Evrey 6h`: see [`corrected`]);
/// - or it looks like a cron line ([`cron_like`]).
pub(crate) fn looks_like_schedule(text: &str) -> bool {
    let text = text.trim();
    if cron_like(text) || has_date_or_time(text) || corrected(text).is_some() {
        return true;
    }
    // `**Every**`, `Every:` and `At,` are meant as much as `Every`.
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let Some(first) = words.first() else {
        return false;
    };
    SCHEDULE_WORDS.contains(&first.as_str())
        || day_or_days(first).is_some()
        || words.iter().any(|w| {
            DAY_NAMES.contains(&w.as_str()) || (w != "at" && SCHEDULE_WORDS.contains(&w.as_str()))
        })
}

/// The fields of a heading meant as a cron line: after `Cron ` (any case), or the whole
/// heading when it looks like one ([`cron_like`]) of five to seven fields.
fn cron_fields(text: &str) -> Option<&str> {
    let t = text.trim();
    match t.split_once(char::is_whitespace) {
        Some((first, rest)) if first.eq_ignore_ascii_case("cron") => Some(rest.trim()),
        _ => (cron_like(t) && (5..=7).contains(&t.split_whitespace().count())).then_some(t),
    }
}

/// Whether a heading looks like a cron line: only digits, `*`, `/`, `,`, `-` and spaces
/// (`0 9 * * 1-5`), or five to seven fields of which at least three are made of those alone
/// (`0 9 * * MON-FRI`, `Cron 0 9 * * 1-5`).
fn cron_like(text: &str) -> bool {
    let numeric = |f: &str| {
        f.bytes().any(|b| b.is_ascii_digit() || b == b'*')
            && f.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'*' | b'/' | b',' | b'-' | b'?'))
    };
    let fields: Vec<&str> = text.split_whitespace().collect();
    (!fields.is_empty() && fields.iter().all(|f| numeric(f)))
        || ((5..=7).contains(&fields.len()) && fields.iter().filter(|f| numeric(f)).count() >= 3)
}

/// A day, named once or in the plural (`mon`, `Monday`, `mondays`).
fn day_or_days(word: &str) -> Option<Weekday> {
    parse_day(word).or_else(|| word.strip_suffix('s').and_then(parse_day))
}

/// The heading as the schedule it was probably meant to be, when one of these fixes makes it
/// parse: a one-digit hour padded (`Daily at 9:00`), an ISO `T` between date and time
/// (`At 2026-12-24T18:00`), `At` before a date (`On 2026-12-24`, `2026-12-24`), `Daily` for
/// `Every day` or `Each day`, a day's plural name (`Mon at 09:00`), or a first word one
/// letter away from a schedule word or a day (`Evrey 6h`, `Dialy at 09:00`, `Mondys at
/// 09:00`). Only when it then parses: `Early` is one letter from `yearly`, but `Early tasks`
/// is a title.
pub(crate) fn corrected(text: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text.split_whitespace() {
        let b = w.as_bytes();
        if b.len() == 4 && b[1] == b':' && [b[0], b[2], b[3]].iter().all(u8::is_ascii_digit) {
            words.push(format!("0{w}"));
        } else if let Some((date, time)) = w.split_once(['T', 't'])
            && parse_date(date).is_some()
        {
            words.extend([date.to_string(), time.to_string()]);
        } else {
            words.push(w.to_string());
        }
    }
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let (first, rest) = lower.split_first()?;
    let capital = |w: &str| format!("{}{}", w[..1].to_ascii_uppercase(), &w[1..]);
    let mut firsts: Vec<(String, usize)> = vec![(words[0].clone(), 1)];
    if matches!(first.as_str(), "every" | "each") && rest.first().is_some_and(|w| w == "day") {
        firsts.push(("Daily".to_string(), 2));
    }
    // `At 09:00` under Recurring: every day at that time.
    if first == "at" && rest.len() == 1 && parse_time_of_day(&rest[0]).is_some() {
        firsts.push(("Daily at".to_string(), 1));
    }
    // `On 2026-12-24`, `By 2026-12-24`, or the date alone.
    if parse_date(first).is_some() {
        firsts.push(("At".to_string(), 0));
    } else if rest.first().is_some_and(|w| parse_date(w).is_some()) {
        firsts.push(("At".to_string(), 1));
    }
    if let Some(day) = day_or_days(first) {
        firsts.push((
            capital(DAY_NAMES[7 + day.num_days_from_monday() as usize]),
            1,
        ));
    }
    if first.chars().count() >= 3 {
        for w in SCHEDULE_WORDS.iter().chain(DAY_NAMES.iter()) {
            if strsim::osa_distance(first, w) == 1 {
                firsts.push((capital(w), 1));
            }
        }
    }
    let original = text.split_whitespace().collect::<Vec<_>>().join(" ");
    firsts
        .into_iter()
        .map(|(first, skip)| {
            std::iter::once(first)
                .chain(words[skip..].iter().cloned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .chain(spoken(&lower))
        .find(|meant| *meant != original && parse_schedule(meant).is_some())
}

/// A schedule as people say it, in the heading grammar: `Every Sunday at 4am` → `Sundays at
/// 04:00`, `Daily 9am` → `Daily at 09:00`, `every weekday at 9` → `Weekdays at 09:00`,
/// `Hourly` → `Every 1h`. `words` are the heading's words, lower-cased. A bare hour (`9`) is
/// a time only after `at`; without `at` the time needs a colon or `am`/`pm`.
fn spoken(words: &[String]) -> Option<String> {
    if let [only] = words {
        let every = match only.as_str() {
            "hourly" => "Every 1h",
            "daily" | "nightly" | "everyday" => "Every 1d",
            "weekly" => "Every 1w",
            _ => return None,
        };
        return Some(every.to_string());
    }
    // Commas are words of their own in a list of days (`Mondays, Fridays`).
    let spaced = words.join(" ").replace(',', " , ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut rest = words.as_slice();
    if let [first, tail @ ..] = rest
        && matches!(*first, "every" | "each" | "on")
    {
        rest = tail;
    }
    let mut days: Vec<&str> = Vec::new();
    while let [word, tail @ ..] = rest {
        let Some(group) = spoken_days(word) else {
            break;
        };
        if !days.contains(&group) {
            days.push(group);
        }
        rest = tail;
        if let [joint, tail @ ..] = rest
            && matches!(*joint, "and" | "," | "&")
        {
            rest = tail;
            if let ["and", tail @ ..] = rest {
                rest = tail;
            }
        }
    }
    let at = rest.first() == Some(&"at");
    if at {
        rest = &rest[1..];
    }
    if days.is_empty() && !at {
        return None;
    }
    let time = spoken_time(rest, at)?;
    let days = if days.is_empty() || days.contains(&"Daily") {
        "Daily".to_string()
    } else {
        match days.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, init)) => format!("{} and {last}", init.join(", ")),
            None => return None,
        }
    };
    Some(format!("{days} at {time}"))
}

/// The group of days a spoken word names, as the grammar writes it: `day` → `Daily`,
/// `weekday` → `Weekdays`, `sunday` or `sun` → `Sundays`.
fn spoken_days(word: &str) -> Option<&'static str> {
    Some(match word {
        "day" | "days" | "daily" | "everyday" => "Daily",
        "weekday" | "weekdays" => "Weekdays",
        "weekend" | "weekends" => "Weekends",
        _ => match day_or_days(word)? {
            Weekday::Mon => "Mondays",
            Weekday::Tue => "Tuesdays",
            Weekday::Wed => "Wednesdays",
            Weekday::Thu => "Thursdays",
            Weekday::Fri => "Fridays",
            Weekday::Sat => "Saturdays",
            Weekday::Sun => "Sundays",
        },
    })
}

/// `9`, `9:30`, `9am`, `9 pm`, `12:15a.m.` as `HH:MM`; the words must be all of it. A bare
/// hour counts only when `at` came before it.
fn spoken_time(words: &[&str], at: bool) -> Option<String> {
    let joined = words.concat();
    let (clock, meridiem) = ["am", "a.m.", "a.m", "pm", "p.m.", "p.m"]
        .iter()
        .find_map(|m| Some((joined.strip_suffix(m)?, Some(m.starts_with('p')))))
        .unwrap_or((joined.as_str(), None));
    let (hour, minute) = match clock.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h, m),
        Some(_) => return None,
        None if at || meridiem.is_some() => (clock, "00"),
        None => return None,
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(hour) || !digits(minute) {
        return None;
    }
    let (mut hour, minute): (u32, u32) = (hour.parse().ok()?, minute.parse().ok()?);
    match meridiem {
        Some(_) if !(1..=12).contains(&hour) => return None,
        Some(pm) => hour = hour % 12 + if pm { 12 } else { 0 },
        None => {}
    }
    (hour < 24 && minute < 60).then(|| format!("{hour:02}:{minute:02}"))
}

/// Whether `text` holds a date (`2026-12-24`, also `2026-1-2`), a time of day (`9:30`,
/// `18:00`) or an hour with `am`/`pm` (`9am`, `6 pm`).
fn has_date_or_time(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        // A run of digits, `:` and `-` starting at a word's start.
        let end = i + b[i..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || matches!(c, b':' | b'-'))
            .count();
        let run = &text[i..end];
        let parts: Vec<&str> = run.split(['-', ':']).collect();
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
        let date = run.contains('-')
            && parts.len() == 3
            && parts[0].len() == 4
            && parts.iter().all(|p| digits(p));
        let clock = run.contains(':')
            && parts.len() == 2
            && parts[0].len() <= 2
            && parts[1].len() == 2
            && parts.iter().all(|p| digits(p));
        let after = text[end..].trim_start_matches(' ').to_ascii_lowercase();
        let meridiem = parts.len() == 1
            && run.len() <= 2
            && ["am", "pm", "a.m", "p.m"].iter().any(|m| {
                after.starts_with(m)
                    && !after[m.len()..].starts_with(|c: char| c.is_ascii_alphabetic())
            });
        if date || clock || meridiem {
            return true;
        }
        i = end.max(i + 1);
    }
    false
}

/// Any schedule grammar, regardless of section.
pub(crate) fn parse_schedule(text: &str) -> Option<Schedule> {
    if let Some(fields) = cron_fields(text) {
        return crate::cron::CronLine::parse(fields)
            .ok()
            .map(Schedule::Cron);
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let (first, rest) = words.split_first()?;
    let first = first.to_ascii_lowercase();
    if first == "every" {
        let spec = rest.join(" ");
        // humantime is case-sensitive (`M` is months); try as written, then lower-cased.
        let d = humantime::parse_duration(&spec)
            .or_else(|_| humantime::parse_duration(&spec.to_ascii_lowercase()))
            .ok()?;
        return (!d.is_zero()).then_some(Schedule::Every(d));
    }
    if first == "at" {
        let date = parse_date(rest.first()?)?;
        let time = match rest {
            [_] => NaiveTime::MIN,
            [_, t] => parse_time_of_day(t)?,
            _ => return None,
        };
        return Some(Schedule::Once(date.and_time(time)));
    }
    // `<days> at HH:MM`
    let [days @ .., at, time] = words.as_slice() else {
        return None;
    };
    if !at.eq_ignore_ascii_case("at") || days.is_empty() {
        return None;
    }
    let time = parse_time_of_day(time)?;
    let days = parse_day_list(&days.join(" "))?;
    Some(Schedule::At { days, time })
}

/// `YYYY-MM-DD`, digits exactly.
fn parse_date(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) {
        return None;
    }
    if !digits(8..10) {
        return None;
    }
    let y = s[0..4].parse().ok()?;
    let m = s[5..7].parse().ok()?;
    let d = s[8..10].parse().ok()?;
    NaiveDate::from_ymd_opt(y, m, d)
}

/// `Daily`, `Weekdays`, `Weekends`, `Mondays`, or a list of those joined by `,`, `and` or
/// `, and` (`Mondays, Wednesdays and Fridays`).
fn parse_day_list(s: &str) -> Option<DaySet> {
    let spaced = s.replace(',', " , ").to_ascii_lowercase();
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut set = DaySet::EMPTY;
    let mut i = 0;
    loop {
        set = DaySet(set.0 | day_group(tokens.get(i)?)?.0);
        i += 1;
        if i == tokens.len() {
            return Some(set);
        }
        match tokens[i] {
            "," if tokens.get(i + 1) == Some(&"and") => i += 2,
            "," | "and" => i += 1,
            _ => return None,
        }
    }
}

fn day_group(word: &str) -> Option<DaySet> {
    match word {
        "daily" => Some(DaySet::ALL),
        "weekdays" => Some(DaySet::WEEKDAYS),
        "weekends" => Some(DaySet::WEEKENDS),
        _ => {
            let day = parse_day(word.strip_suffix('s')?)?;
            Some(DaySet::EMPTY.with(day))
        }
    }
}

/// Whether a task with this schedule (None = no heading: due at every run) is due at `now`.
///
/// `At { days, time }` is due on a matching local day from that day's `time` on, until it has
/// been attempted at or after that time: a missed day is not replayed, and on a fall-back
/// night the repeated hour does not run it twice.
pub fn is_due(
    schedule: Option<&Schedule>,
    tz: Tz,
    last_attempt: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    match schedule {
        None => true,
        Some(Schedule::Every(d)) => match last_attempt {
            None => true,
            Some(last) => now.signed_duration_since(last) >= delta(*d - slack(*d)),
        },
        Some(Schedule::At { days, time }) => {
            let today = local_date(tz, now);
            if !days.contains(today.weekday()) {
                return false;
            }
            let t = local_instant(tz, today.and_time(*time));
            t <= now && last_attempt.is_none_or(|last| last < t)
        }
        Some(Schedule::Once(dt)) => local_instant(tz, *dt) <= now,
        // Its open slot, not attempted since it began (docs/reference.md#missed-slots).
        Some(Schedule::Cron(_)) => slot_due(schedule, tz, last_attempt, now, SlotRules::default()),
    }
}

/// One slot of a calendar schedule (docs/reference.md#missed-slots): the instant it is due
/// at, and its deadline, the next slot or the end of the local day the slot falls in,
/// whichever comes first. A slot not run by its deadline is missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    /// The deadline is `max_lateness` after the slot (not its next slot, nor the end of its
    /// day): a slot that passes it is `too_late`, not `no_run`.
    pub by_lateness: bool,
}

/// What moves a task's slots and their deadlines: its `max_lateness` and its jitter's
/// offset (docs/reference.md#missed-slots).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SlotRules {
    /// The deadline is the slot plus this (or the next slot), not the end of its day.
    pub lateness: Option<Duration>,
    /// Every slot falls this much later than the schedule says (`~D`).
    pub shift: Duration,
}

/// Whether the schedule has slots: a calendar schedule (`… at HH:MM`). `Every D` and
/// one-time dates have none.
pub(crate) fn has_slots(schedule: Option<&Schedule>) -> bool {
    match schedule {
        Some(Schedule::At { days, .. }) => !days.is_empty(),
        Some(Schedule::Cron(_)) => true,
        _ => false,
    }
}

/// The first slot strictly after `after`; None for a schedule without slots.
fn next_slot_time(schedule: &Schedule, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let (days, time) = match schedule {
        Schedule::At { days, time } => (days, time),
        Schedule::Cron(line) => return line.next_after(tz, after),
        Schedule::Every(_) | Schedule::Once(_) => return None,
    };
    if days.is_empty() {
        return None;
    }
    let start = local_date(tz, after);
    (0..=8).find_map(|offset| {
        let d = shift(start, offset)?;
        let t = local_instant(tz, d.and_time(*time));
        (days.contains(d.weekday()) && t > after).then_some(t)
    })
}

/// The first slot strictly after `after`, each slot `shift` later than the schedule says.
fn next_shifted(
    schedule: &Schedule,
    tz: Tz,
    after: DateTime<Utc>,
    shift: Duration,
) -> Option<DateTime<Utc>> {
    let shift = delta(shift);
    next_slot_time(schedule, tz, after - shift).map(|t| t + shift)
}

/// The slot at `at`, with its deadline: the next slot or, with a lateness, `at` + lateness,
/// else the end of its local day, whichever comes first.
fn slot_at(schedule: &Schedule, tz: Tz, at: DateTime<Utc>, rules: SlotRules) -> Slot {
    let next = next_shifted(schedule, tz, at, rules.shift).unwrap_or(DateTime::<Utc>::MAX_UTC);
    let limit = match rules.lateness {
        Some(l) => at
            .checked_add_signed(delta(l))
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
        None => shift(local_date(tz, at), 1).map_or(DateTime::<Utc>::MAX_UTC, |d| {
            local_instant(tz, d.and_time(NaiveTime::MIN))
        }),
    };
    Slot {
        at,
        deadline: next.min(limit),
        by_lateness: rules.lateness.is_some() && limit < next,
    }
}

/// The slots of `schedule` with `after < at <= until`, oldest first, each with its
/// deadline: the one slot iterator that due, missed and late slots are all read from.
pub(crate) fn slots(
    schedule: Option<&Schedule>,
    tz: Tz,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
    rules: SlotRules,
) -> impl Iterator<Item = Slot> {
    let schedule = schedule.filter(|s| has_slots(Some(*s))).cloned();
    let mut cursor = after;
    std::iter::from_fn(move || {
        let s = schedule.as_ref()?;
        let at = next_shifted(s, tz, cursor, rules.shift).filter(|t| *t <= until)?;
        cursor = at;
        Some(slot_at(s, tz, at, rules))
    })
}

/// The latest slot at or before `now`, with its deadline; None for a schedule without
/// slots.
pub(crate) fn last_slot(
    schedule: Option<&Schedule>,
    tz: Tz,
    now: DateTime<Utc>,
    rules: SlotRules,
) -> Option<Slot> {
    let s = schedule.filter(|s| has_slots(Some(*s)))?;
    // Every calendar schedule has a slot within a week (and a day of DST shift).
    let from = now - TimeDelta::days(9);
    slots(Some(s), tz, from, now, rules).last()
}

/// Whether a calendar task is due: its latest slot is open (before its deadline, which
/// `lateness` may set) and not attempted since it began.
pub(crate) fn slot_due(
    schedule: Option<&Schedule>,
    tz: Tz,
    last_attempt: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    rules: SlotRules,
) -> bool {
    last_slot(schedule, tz, now, rules)
        .is_some_and(|s| s.deadline > now && last_attempt.is_none_or(|a| a < s.at))
}

/// When a calendar task is next due: now when due, else its next slot.
pub(crate) fn slot_next_due(
    schedule: Option<&Schedule>,
    tz: Tz,
    last_attempt: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    rules: SlotRules,
) -> Option<DateTime<Utc>> {
    if slot_due(schedule, tz, last_attempt, now, rules) {
        return Some(now);
    }
    next_shifted(schedule?, tz, now, rules.shift)
}

/// How much sooner than its interval an `Every D` task is due again: min(D / 50, 60 s)
/// (docs/reference.md#when-a-task-is-due). Cron starts its runs a little late, and by
/// different amounts: without it, an `Every 15m` task under a `*/5` crontab would find its
/// last attempt 14 min 59.9 s old at every third run and wait a fourth.
pub(crate) fn slack(d: std::time::Duration) -> std::time::Duration {
    (d / 50).min(std::time::Duration::from_secs(60))
}

fn delta(d: std::time::Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// The earliest instant >= `now` at which the task is (or becomes) due; `now` itself when it
/// is due now; None when it never will be.
pub fn next_due(
    schedule: Option<&Schedule>,
    tz: Tz,
    last_attempt: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if is_due(schedule, tz, last_attempt, now) {
        return Some(now);
    }
    match schedule {
        None => Some(now),
        Some(Schedule::Every(d)) => {
            let last = last_attempt.unwrap_or(now);
            Some(
                last.checked_add_signed(delta(*d - slack(*d)))
                    .unwrap_or(DateTime::<Utc>::MAX_UTC)
                    .max(now),
            )
        }
        Some(Schedule::At { days, time }) => {
            if days.is_empty() {
                return None;
            }
            let today = local_date(tz, now);
            (0..=8).find_map(|offset| {
                let d = shift(today, offset)?;
                if !days.contains(d.weekday()) {
                    return None;
                }
                let t = local_instant(tz, d.and_time(*time));
                (t > now && is_due(schedule, tz, last_attempt, t)).then_some(t)
            })
        }
        Some(Schedule::Once(dt)) => Some(local_instant(tz, *dt).max(now)),
        Some(s @ Schedule::Cron(_)) => next_slot_time(s, tz, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::America::New_York;
    use chrono_tz::Asia::Kolkata;
    use chrono_tz::Europe::Berlin;
    use std::time::Duration;

    #[test]
    fn local_midnight_in_a_day_that_starts_in_a_dst_gap_is_the_end_of_the_gap() {
        // America/Sao_Paulo, 2018-11-04: 00:00 local did not exist (00:00 -> 01:00, -03 -> -02).
        let tz = chrono_tz::America::Sao_Paulo;
        let start = utc("2018-11-04T03:00:00Z"); // 01:00 -02
        for now in [
            "2018-11-04T03:00:00Z",
            "2018-11-04T12:00:00Z",
            "2018-11-05T01:59:00Z",
        ] {
            assert_eq!(local_midnight(tz, utc(now)), start, "{now}");
        }
        // An ordinary day: midnight itself.
        assert_eq!(
            local_midnight(Berlin, utc("2026-03-29T12:00:00Z")),
            utc("2026-03-28T23:00:00Z")
        );
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn hm(h: u32, m: u32) -> NaiveTime {
        NaiveTime::from_hms_opt(h, m, 0).unwrap()
    }

    fn ndt(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap()
    }

    fn days(list: &[Weekday]) -> DaySet {
        list.iter().fold(DaySet::EMPTY, |s, d| s.with(*d))
    }

    fn hours(tz: Tz, window: &str, d: DaySet) -> ActiveHours {
        ActiveHours {
            tz,
            window: Window::parse(window).unwrap(),
            days: d,
        }
    }

    // ---- Window::parse ----

    #[test]
    fn window_parses_plain_crossing_and_always() {
        assert_eq!(
            Window::parse("08:00-22:00"),
            Ok(Window {
                start: 480,
                end: 1320
            })
        );
        assert_eq!(
            Window::parse("  22:00-06:00 "),
            Ok(Window {
                start: 1320,
                end: 360
            })
        );
        assert_eq!(Window::parse("00:00-24:00"), Ok(Window::ALWAYS));
        assert_eq!(
            Window::parse("18:30-24:00"),
            Ok(Window {
                start: 1110,
                end: 1440
            })
        );
        assert!(Window::parse("22:00-06:00").unwrap().crosses_midnight());
        assert!(!Window::ALWAYS.crosses_midnight());
    }

    #[test]
    fn window_errors_say_what_is_wrong() {
        assert_eq!(
            Window::parse("8am-22:00").unwrap_err(),
            r#""8am" is not a time (expected HH:MM)"#
        );
        assert_eq!(
            Window::parse("8:00-22:00").unwrap_err(),
            r#""8:00" is not a time (expected HH:MM)"#
        );
        assert_eq!(
            Window::parse("08:00-24:30").unwrap_err(),
            "24:30 is not a valid time"
        );
        assert_eq!(
            Window::parse("25:00-06:00").unwrap_err(),
            "25:00 is not a valid time"
        );
        assert_eq!(
            Window::parse("08:60-09:00").unwrap_err(),
            "08:60 is not a valid time"
        );
        assert_eq!(
            Window::parse("24:00-06:00").unwrap_err(),
            "24:00 may only end a window, not start it"
        );
        assert_eq!(
            Window::parse("08:00-08:00").unwrap_err(),
            r#""08:00-08:00" is an empty window (start equals end); use "00:00-24:00" for always"#
        );
        assert_eq!(
            Window::parse("0800").unwrap_err(),
            r#""0800" is not a window (expected HH:MM-HH:MM)"#
        );
        assert_eq!(
            Window::parse("").unwrap_err(),
            r#""" is not a window (expected HH:MM-HH:MM)"#
        );
        assert_eq!(
            Window::parse("08:00-22:00-23:00").unwrap_err(),
            r#""22:00-23:00" is not a time (expected HH:MM)"#
        );
    }

    #[test]
    fn days_parse_in_any_case() {
        assert_eq!(parse_day("mon"), Some(Weekday::Mon));
        assert_eq!(parse_day("Tuesday"), Some(Weekday::Tue));
        assert_eq!(parse_day("WED"), Some(Weekday::Wed));
        assert_eq!(parse_day(" thursday "), Some(Weekday::Thu));
        assert_eq!(parse_day("fri"), Some(Weekday::Fri));
        assert_eq!(parse_day("SATURDAY"), Some(Weekday::Sat));
        assert_eq!(parse_day("sun"), Some(Weekday::Sun));
        assert_eq!(parse_day("funday"), None);
        assert_eq!(parse_day("mo"), None);
        assert_eq!(parse_day(""), None);
    }

    // ---- local_instant ----

    #[test]
    fn local_instant_maps_gap_forward_and_overlap_to_earlier() {
        // Spring forward: 02:00 CET → 03:00 CEST at 01:00Z.
        assert_eq!(
            local_instant(Berlin, ndt("2026-03-29 02:30")),
            utc("2026-03-29T01:00:00Z")
        );
        assert_eq!(
            local_instant(Berlin, ndt("2026-03-29 02:00")),
            utc("2026-03-29T01:00:00Z")
        );
        assert_eq!(
            local_instant(Berlin, ndt("2026-03-29 03:00")),
            utc("2026-03-29T01:00:00Z")
        );
        // Fall back: 02:30 happens at 00:30Z (CEST) and at 01:30Z (CET).
        assert_eq!(
            local_instant(Berlin, ndt("2026-10-25 02:30")),
            utc("2026-10-25T00:30:00Z")
        );
        assert_eq!(
            local_instant(New_York, ndt("2026-03-08 02:15")),
            utc("2026-03-08T07:00:00Z")
        );
        assert_eq!(
            local_instant(Kolkata, ndt("2026-06-01 09:00")),
            utc("2026-06-01T03:30:00Z")
        );
    }

    // ---- ActiveHours ----

    #[test]
    fn always_is_always_active() {
        let a = hours(Berlin, "00:00-24:00", DaySet::ALL);
        for t in [
            "2026-03-29T01:00:00Z",
            "2026-10-25T00:59:59Z",
            "2026-01-01T23:59:59Z",
        ] {
            assert!(a.is_active(utc(t)));
            assert_eq!(a.next_active(utc(t)), Some(utc(t)));
        }
    }

    #[test]
    fn plain_window_start_inclusive_end_exclusive() {
        let a = hours(Berlin, "08:00-22:00", DaySet::ALL);
        // 2026-06-01 is CEST (+02:00).
        assert!(!a.is_active(utc("2026-06-01T05:59:59Z")));
        assert!(a.is_active(utc("2026-06-01T06:00:00Z")));
        assert!(a.is_active(utc("2026-06-01T19:59:59Z")));
        assert!(!a.is_active(utc("2026-06-01T20:00:00Z")));
        assert_eq!(
            a.next_active(utc("2026-06-01T20:00:00Z")),
            Some(utc("2026-06-02T06:00:00Z"))
        );
        assert_eq!(
            a.next_active(utc("2026-06-01T03:00:00Z")),
            Some(utc("2026-06-01T06:00:00Z"))
        );
    }

    #[test]
    fn window_ending_at_24_00_includes_last_minute() {
        let a = hours(Berlin, "22:00-24:00", DaySet::ALL);
        assert!(a.is_active(utc("2026-06-01T21:59:59Z"))); // 23:59:59 local
        assert!(!a.is_active(utc("2026-06-01T22:00:00Z"))); // 00:00 local
        assert!(a.is_active(utc("2026-06-01T20:00:00Z")));
        assert!(!a.is_active(utc("2026-06-01T19:59:00Z")));
    }

    #[test]
    fn midnight_crossing_window_belongs_to_the_day_it_started() {
        use Weekday::*;
        let a = hours(Berlin, "22:00-06:00", days(&[Mon, Tue, Wed, Thu, Fri]));
        // 2026-06-05 is a Friday; Berlin is +02:00.
        // Friday 23:00 local: active.
        assert!(a.is_active(utc("2026-06-05T21:00:00Z")));
        // Saturday 02:00 local: the window opened on Friday → active.
        assert!(a.is_active(utc("2026-06-06T00:00:00Z")));
        // Saturday 05:59 active, 06:00 not.
        assert!(a.is_active(utc("2026-06-06T03:59:00Z")));
        assert!(!a.is_active(utc("2026-06-06T04:00:00Z")));
        // Saturday 23:00: not an active day.
        assert!(!a.is_active(utc("2026-06-06T21:00:00Z")));
        // Monday 02:00 local: the window opened on Sunday → inactive.
        assert!(!a.is_active(utc("2026-06-08T00:00:00Z")));
        // Monday 12:00: outside the window.
        assert!(!a.is_active(utc("2026-06-08T10:00:00Z")));
        // From Saturday 06:00 the next window opens Monday 22:00.
        assert_eq!(
            a.next_active(utc("2026-06-06T04:00:00Z")),
            Some(utc("2026-06-08T20:00:00Z"))
        );
        // Already inside (Saturday 02:00) → now.
        assert_eq!(
            a.next_active(utc("2026-06-06T00:00:00Z")),
            Some(utc("2026-06-06T00:00:00Z"))
        );
    }

    #[test]
    fn always_window_with_days_restricts_whole_days() {
        use Weekday::*;
        let a = hours(New_York, "00:00-24:00", days(&[Sat, Sun]));
        // 2026-06-05 Friday 20:00 EDT (-04:00) = 2026-06-06T00:00Z.
        assert!(!a.is_active(utc("2026-06-06T00:00:00Z")));
        assert!(a.is_active(utc("2026-06-06T04:00:00Z"))); // Saturday 00:00 EDT
        assert_eq!(
            a.next_active(utc("2026-06-06T00:00:00Z")),
            Some(utc("2026-06-06T04:00:00Z"))
        );
    }

    #[test]
    fn no_active_days_is_never_active() {
        let a = hours(Berlin, "08:00-22:00", DaySet::EMPTY);
        assert!(!a.is_active(utc("2026-06-01T10:00:00Z")));
        assert_eq!(a.next_active(utc("2026-06-01T10:00:00Z")), None);
    }

    #[test]
    fn active_hours_in_half_hour_zone() {
        let a = hours(Kolkata, "09:00-17:30", DaySet::WEEKDAYS);
        // 2026-06-01 Monday 09:00 IST = 03:30Z.
        assert!(!a.is_active(utc("2026-06-01T03:29:59Z")));
        assert!(a.is_active(utc("2026-06-01T03:30:00Z")));
        assert!(a.is_active(utc("2026-06-01T11:59:00Z")));
        assert!(!a.is_active(utc("2026-06-01T12:00:00Z")));
        assert_eq!(
            a.next_active(utc("2026-06-01T00:00:00Z")),
            Some(utc("2026-06-01T03:30:00Z"))
        );
        // Friday evening → Monday morning.
        assert_eq!(
            a.next_active(utc("2026-06-05T13:00:00Z")),
            Some(utc("2026-06-08T03:30:00Z"))
        );
    }

    #[test]
    fn active_hours_across_spring_forward() {
        // Window starts inside the skipped hour: opens at the first instant after it.
        let a = hours(Berlin, "02:30-05:00", DaySet::ALL);
        assert_eq!(
            a.next_active(utc("2026-03-28T23:00:00Z")),
            Some(utc("2026-03-29T01:00:00Z"))
        );
        assert!(a.is_active(utc("2026-03-29T01:00:00Z"))); // 03:00 CEST
        assert!(!a.is_active(utc("2026-03-29T00:59:59Z"))); // 01:59:59 CET
        // A window wholly inside the gap does not open that day.
        let g = hours(Berlin, "02:00-02:30", DaySet::ALL);
        assert_eq!(
            g.next_active(utc("2026-03-28T23:00:00Z")),
            Some(utc("2026-03-30T00:00:00Z")) // 03-30 02:00 CEST
        );
        // Night window 22:00-06:00 is shorter by an hour but continuous.
        let n = hours(Berlin, "22:00-06:00", DaySet::ALL);
        assert!(n.is_active(utc("2026-03-29T00:59:59Z")));
        assert!(n.is_active(utc("2026-03-29T01:00:00Z")));
        assert!(n.is_active(utc("2026-03-29T03:59:00Z"))); // 05:59 CEST
        assert!(!n.is_active(utc("2026-03-29T04:00:00Z"))); // 06:00 CEST
    }

    #[test]
    fn active_hours_across_fall_back() {
        // 2026-10-25: 03:00 CEST → 02:00 CET at 01:00Z.
        let a = hours(Berlin, "02:30-02:45", DaySet::ALL);
        // First 02:30 (CEST) = 00:30Z.
        assert_eq!(
            a.next_active(utc("2026-10-24T22:00:00Z")),
            Some(utc("2026-10-25T00:30:00Z"))
        );
        // After the first window closes, the repeated hour opens it again at 01:30Z.
        assert!(!a.is_active(utc("2026-10-25T00:50:00Z")));
        assert_eq!(
            a.next_active(utc("2026-10-25T00:50:00Z")),
            Some(utc("2026-10-25T01:30:00Z"))
        );
        // The wall clock jumping back into a window makes it active at the jump.
        let b = hours(Berlin, "02:00-02:30", DaySet::ALL);
        assert!(!b.is_active(utc("2026-10-25T00:45:00Z"))); // 02:45 CEST
        assert_eq!(
            b.next_active(utc("2026-10-25T00:45:00Z")),
            Some(utc("2026-10-25T01:00:00Z")) // 02:00 CET
        );
    }

    #[test]
    fn active_hours_new_york_dst() {
        let a = hours(New_York, "08:00-20:00", DaySet::ALL);
        // Before 2026-03-08 it is EST (-05:00), after EDT (-04:00).
        assert!(a.is_active(utc("2026-03-07T13:00:00Z")));
        assert!(!a.is_active(utc("2026-03-08T11:59:00Z"))); // 07:59 EDT
        assert!(a.is_active(utc("2026-03-08T12:00:00Z")));
        assert_eq!(
            a.next_active(utc("2026-03-08T01:00:00Z")),
            Some(utc("2026-03-08T12:00:00Z"))
        );
    }

    /// `next_active` agrees with a brute-force scan, minute by minute, around both Berlin DST
    /// days and in other zones.
    #[test]
    fn next_active_matches_a_minute_scan() {
        use Weekday::*;
        let windows = [
            "08:00-22:00",
            "22:00-06:00",
            "02:00-02:30",
            "02:30-03:30",
            "01:00-02:30",
            "00:00-24:00",
            "23:30-24:00",
        ];
        let day_sets = [DaySet::ALL, days(&[Sat]), days(&[Mon, Tue, Wed, Thu, Fri])];
        let starts = [
            (Berlin, "2026-03-28T20:00:00Z"),
            (Berlin, "2026-10-24T20:00:00Z"),
            (New_York, "2026-03-07T20:00:00Z"),
            (Kolkata, "2026-06-01T00:00:00Z"),
        ];
        for (tz, start) in starts {
            for w in windows {
                for d in day_sets {
                    let a = hours(tz, w, d);
                    let mut t = utc(start);
                    // Every 20 minutes over two days, compare with a scan.
                    for _ in 0..(2 * 24 * 3) {
                        let want = (0..=10 * 24 * 60)
                            .map(|m| t + TimeDelta::minutes(m))
                            .find(|&c| a.is_active(c));
                        assert_eq!(a.next_active(t), want, "{tz} {w} {d:?} from {t}");
                        t += TimeDelta::minutes(20);
                    }
                }
            }
        }
    }

    /// `next_due` agrees with a minute-by-minute scan of `is_due` for `At` schedules on DST
    /// days, with and without a previous attempt.
    #[test]
    fn next_due_matches_a_minute_scan() {
        use Weekday::*;
        let times = [hm(0, 0), hm(2, 0), hm(2, 30), hm(3, 0), hm(23, 30)];
        let day_sets = [DaySet::ALL, days(&[Sun]), days(&[Mon, Sat])];
        let starts = [
            (Berlin, "2026-03-28T20:00:00Z"),
            (Berlin, "2026-10-24T20:00:00Z"),
            (New_York, "2026-11-01T00:00:00Z"),
        ];
        for (tz, start) in starts {
            for time in times {
                for d in day_sets {
                    let s = Schedule::At { days: d, time };
                    let mut t = utc(start);
                    for _ in 0..(2 * 24 * 2) {
                        for last in [None, Some(t - TimeDelta::minutes(30))] {
                            let want = (0..=9 * 24 * 60)
                                .map(|m| t + TimeDelta::minutes(m))
                                .find(|&c| is_due(Some(&s), tz, last, c));
                            let got = next_due(Some(&s), tz, last, t);
                            assert_eq!(got, want, "{tz} {time} {d:?} from {t} last {last:?}");
                        }
                        t += TimeDelta::minutes(30);
                    }
                }
            }
        }
    }

    // ---- parse_heading ----

    fn sched(section: Section, text: &str) -> Schedule {
        match parse_heading(section, text) {
            HeadingKind::Schedule(s, _, _) => s,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn every_headings() {
        let r = Section::Recurring;
        assert_eq!(
            sched(r, "Every 30m"),
            Schedule::Every(Duration::from_secs(1800))
        );
        assert_eq!(
            sched(r, "every 6h"),
            Schedule::Every(Duration::from_secs(6 * 3600))
        );
        assert_eq!(
            sched(r, "  EVERY   2d "),
            Schedule::Every(Duration::from_secs(2 * 86400))
        );
        assert_eq!(
            sched(r, "Every 1w"),
            Schedule::Every(Duration::from_secs(7 * 86400))
        );
        assert_eq!(
            sched(r, "Every 1h 30m"),
            Schedule::Every(Duration::from_secs(5400))
        );
        assert_eq!(
            sched(r, "Every 6H"),
            Schedule::Every(Duration::from_secs(6 * 3600))
        );
        // Meant as schedules, but not valid ones: they fail closed.
        for bad in ["Every 0s", "Every 0", "Every", "Every day", "Evry 6h"] {
            assert!(
                matches!(parse_heading(r, bad), HeadingKind::Invalid(_)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn at_time_headings() {
        use Weekday::*;
        let r = Section::Recurring;
        let at = |d, t| Schedule::At { days: d, time: t };
        assert_eq!(sched(r, "Daily at 02:30"), at(DaySet::ALL, hm(2, 30)));
        assert_eq!(
            sched(r, "weekdays at 09:00"),
            at(DaySet::WEEKDAYS, hm(9, 0))
        );
        assert_eq!(
            sched(r, "Weekends AT 10:15"),
            at(DaySet::WEEKENDS, hm(10, 15))
        );
        assert_eq!(sched(r, "Mondays at 09:00"), at(days(&[Mon]), hm(9, 0)));
        assert_eq!(
            sched(r, "Tuesdays and Thursdays at 18:45"),
            at(days(&[Tue, Thu]), hm(18, 45))
        );
        assert_eq!(
            sched(r, "Mondays, Wednesdays and Fridays at 09:00"),
            at(days(&[Mon, Wed, Fri]), hm(9, 0))
        );
        assert_eq!(
            sched(r, "mondays,wednesdays, and fridays at 09:00"),
            at(days(&[Mon, Wed, Fri]), hm(9, 0))
        );
        assert_eq!(
            sched(r, "Sundays at 00:00"),
            at(days(&[Sun]), NaiveTime::MIN)
        );
        assert_eq!(sched(r, "Daily at 23:59"), at(DaySet::ALL, hm(23, 59)));
        for bad in [
            "Daily at 24:00",
            "Daily at 9:00",
            "Daily at 09:60",
            "Daily 09:00",
            "Monday at 09:00",
            "Mondays Fridays at 09:00",
            "Mondays and at 09:00",
            "Mondays, at 09:00",
            "at 09:00",
            "Daily at",
            // A time or a day's name anywhere: meant as a schedule all the same.
            "and Mondays at 09:00",
            "Fundays at 09:00",
        ] {
            assert_not_a_schedule(r, bad);
        }
        // Not meant as schedules: titles.
        for title in ["Backups", "Early tasks", "Dairy", "Tours", ""] {
            assert_eq!(parse_heading(r, title), HeadingKind::Title, "{title:?}");
        }
    }

    /// `bad` is meant as a schedule of `section` but is not one: invalid, with the message
    /// every such heading has (a hint may come between its head and the forms).
    #[track_caller]
    fn assert_not_a_schedule(section: Section, bad: &str) {
        let (name, forms) = match section {
            Section::OneTime => ("one-time", ONE_TIME_FORMS),
            _ => ("recurring", RECURRING_FORMS),
        };
        let HeadingKind::Invalid(msg) = parse_heading(section, bad) else {
            panic!("{bad:?} is not invalid");
        };
        let head = format!("schedule heading {bad:?} is not a valid {name} schedule");
        assert!(msg.starts_with(&head), "{msg}");
        assert!(msg.ends_with(&format!("; {forms}")), "{msg}");
    }

    #[test]
    fn one_time_headings() {
        let o = Section::OneTime;
        assert_eq!(
            sched(o, "At 2026-12-24 18:00"),
            Schedule::Once(ndt("2026-12-24 18:00"))
        );
        assert_eq!(
            sched(o, "at 2026-12-24"),
            Schedule::Once(ndt("2026-12-24 00:00"))
        );
        for bad in [
            "At 2026-12-24 24:00",
            "At 2026-12-24 18:00 sharp",
            "At 2026-13-01",
            "At 2026-02-30",
            "At 26-12-24",
            "At 2026-1-2",
            "At",
            "At 2026-12-24 6pm",
            "2026-12-24",
            // A date that is not written as a schedule is not a title: its task must not
            // run now.
            "On 2026-12-24",
            "Renew by 2026-12-24",
        ] {
            assert_not_a_schedule(o, bad);
        }
        assert_eq!(parse_heading(o, "Someday"), HeadingKind::Title);
    }

    #[test]
    fn a_schedule_heading_that_is_one_fix_away_says_what_it_meant() {
        for (section, written, meant) in [
            (Section::Recurring, "Daily at 9:00", "Daily at 09:00"),
            (Section::Recurring, "Evry 6h", "Every 6h"),
            (Section::Recurring, "Evrey  6h", "Every 6h"),
            (Section::Recurring, "Dialy at 07:30", "Daily at 07:30"),
            (Section::Recurring, "Mondys at 09:00", "Mondays at 09:00"),
            (Section::Recurring, "Mon at 09:00", "Mondays at 09:00"),
            (Section::Recurring, "Every day at 09:00", "Daily at 09:00"),
            (Section::Recurring, "Each day at 9:00", "Daily at 09:00"),
            (Section::Recurring, "At 9:00", "Daily at 09:00"),
            (
                Section::OneTime,
                "At 2026-12-24T18:00",
                "At 2026-12-24 18:00",
            ),
            (Section::OneTime, "On 2026-12-24", "At 2026-12-24"),
            (Section::OneTime, "2026-12-24 18:00", "At 2026-12-24 18:00"),
            // Schedules as people say them.
            (
                Section::Recurring,
                "Every Sunday at 4am",
                "Sundays at 04:00",
            ),
            (Section::Recurring, "Daily 9am", "Daily at 09:00"),
            (
                Section::Recurring,
                "every weekday at 9",
                "Weekdays at 09:00",
            ),
            (
                Section::Recurring,
                "Every Monday at 09:00",
                "Mondays at 09:00",
            ),
            (Section::Recurring, "Daily at 9", "Daily at 09:00"),
            (Section::Recurring, "Every day at 9am", "Daily at 09:00"),
            (Section::Recurring, "Weekdays 9:00", "Weekdays at 09:00"),
            (Section::Recurring, "Sundays at 4 PM", "Sundays at 16:00"),
            (
                Section::Recurring,
                "Every weekend at 10:00",
                "Weekends at 10:00",
            ),
            (Section::Recurring, "Daily at 12am", "Daily at 00:00"),
            (
                Section::Recurring,
                "Every weekday at 9:30am",
                "Weekdays at 09:30",
            ),
            (
                Section::Recurring,
                "Every Monday and Thursday at 7pm",
                "Mondays and Thursdays at 19:00",
            ),
            (
                Section::Recurring,
                "Mon, Wed and Fri at 8",
                "Mondays, Wednesdays and Fridays at 08:00",
            ),
            (Section::Recurring, "Hourly", "Every 1h"),
            (Section::Recurring, "Weekly", "Every 1w"),
        ] {
            assert_eq!(corrected(written).as_deref(), Some(meant), "{written:?}");
            let HeadingKind::Invalid(msg) = parse_heading(section, written) else {
                panic!("{written:?} is not invalid");
            };
            assert!(msg.contains(&format!("(did you mean {meant:?}?)")), "{msg}");
        }
        assert!(matches!(parse_heading(Section::Recurring, "Every 0s"),
                HeadingKind::Invalid(m) if m.contains("(the interval must be longer than zero)")));
        // Nor for a schedule of the other section.
        assert!(matches!(parse_heading(Section::OneTime, "At 9:00"),
                HeadingKind::Invalid(m) if !m.contains("did you mean")));
        // Nothing to suggest: no fix makes these parse.
        for written in [
            "Every 0s",
            "Every 6h, Mondays",
            "Daily at 09:00 Europe/Paris",
            "Early",
            // A bare number is an hour only after "at"; no time is guessed.
            "Daily 9",
            "Every weekday",
            "Sundays at 13pm",
            "Daily at 9:5",
        ] {
            assert_eq!(corrected(written), None, "{written:?}");
        }
    }

    #[test]
    fn schedules_in_the_wrong_section_are_invalid() {
        assert_eq!(
            parse_heading(Section::OneTime, "Every 6h"),
            HeadingKind::Invalid(format!(
                "schedule heading \"Every 6h\" is a recurring schedule, not a one-time one \
                 (move it under \"## Recurring\"); {ONE_TIME_FORMS}"
            ))
        );
        assert_eq!(
            parse_heading(Section::OneTime, "Daily  at 09:00"),
            HeadingKind::Invalid(format!(
                "schedule heading \"Daily at 09:00\" is a recurring schedule, not a one-time \
                 one (move it under \"## Recurring\"); {ONE_TIME_FORMS}"
            ))
        );
        assert_eq!(
            parse_heading(Section::Recurring, "At 2026-12-24 18:00"),
            HeadingKind::Invalid(format!(
                "schedule heading \"At 2026-12-24 18:00\" is a one-time schedule, not a \
                 recurring one (move it under \"## One-time\"); {RECURRING_FORMS}"
            ))
        );
        assert_eq!(
            parse_heading(Section::Other, "Every 6h"),
            HeadingKind::Title
        );
        assert_eq!(
            parse_heading(Section::Other, "At 2026-12-24"),
            HeadingKind::Title
        );
        assert_eq!(parse_heading(Section::Other, "Evry 6h"), HeadingKind::Title);
    }

    #[test]
    fn schedule_words_and_cron_lines_look_like_schedules() {
        for meant in [
            "Evry 6h",
            "every day at 09:00",
            "Hourly",
            "weekly",
            "Monthly on the 1st",
            "Weekdays at 9",
            "weekends",
            "At noon",
            "Monday 09:00",
            "mondays at 9",
            "Mon at 09:00",
            "TUE",
            "Thurs 18:00",
            "**Every 6h**",
            "Daily:",
            "0 9 * * 1-5",
            "*/15 * * * *",
            "Cron 0 9 * * 1-5",
            "cron: */5 * * * *",
            "0 9 * * MON-FRI",
            "30 2 1 JAN,JUL *",
            "2026-12-24",
            "On 2026-12-24",
            "Backups on Mondays",
            "Backups, daily",
            "Things to check every week",
            "Lunch 12:30",
            "Report 9am",
            "Call at 6 pm",
            "Evrey 6h",
        ] {
            assert!(looks_like_schedule(meant), "{meant:?}");
        }
        for title in [
            "Backups",
            "Early tasks",
            "Nearly done",
            "Version 1.2",
            "Top 10",
            "Atlas",
            "Everything else",
            "Monitoring",
            "Sunny days",
            "Top 5 things to do",
            "Q3 2026 plans",
            "- -",
            "",
        ] {
            assert!(!looks_like_schedule(title), "{title:?}");
        }
    }

    // ---- is_due / next_due ----

    #[test]
    fn a_daily_slot_lasts_until_the_end_of_its_local_day() {
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(2, 0),
        };
        let got: Vec<Slot> = slots(
            Some(&s),
            Berlin,
            utc("2026-05-31T12:00:00Z"),
            utc("2026-06-03T12:00:00Z"),
            SlotRules::default(),
        )
        .collect();
        let want: Vec<Slot> = ["2026-06-01", "2026-06-02", "2026-06-03"]
            .iter()
            .map(|d| {
                let day: NaiveDate = d.parse().unwrap();
                Slot {
                    by_lateness: false,
                    at: local_instant(Berlin, day.and_time(hm(2, 0))),
                    deadline: local_instant(
                        Berlin,
                        shift(day, 1).unwrap().and_time(NaiveTime::MIN),
                    ),
                }
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            last_slot(
                Some(&s),
                Berlin,
                utc("2026-06-03T12:00:00Z"),
                SlotRules::default()
            ),
            Some(want[2])
        );
        // The bounds: after is excluded, until included.
        assert_eq!(
            slots(
                Some(&s),
                Berlin,
                want[0].at,
                want[1].at,
                SlotRules::default()
            )
            .collect::<Vec<_>>(),
            vec![want[1]]
        );
        // No slots for Every, one-time dates, or no schedule.
        let every = Schedule::Every(Duration::from_secs(60));
        assert_eq!(
            slots(
                Some(&every),
                Berlin,
                want[0].at,
                want[2].at,
                SlotRules::default()
            )
            .count(),
            0
        );
        assert_eq!(
            slots(None, Berlin, want[0].at, want[2].at, SlotRules::default()).count(),
            0
        );
        assert_eq!(
            last_slot(Some(&every), Berlin, want[2].at, SlotRules::default()),
            None
        );
    }

    #[test]
    fn slots_across_dst_nights_fall_once_at_the_rule_of_local_instants() {
        // Europe/Berlin springs forward at 02:00 on 2026-03-29: 02:30 is 03:00 CEST.
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(2, 30),
        };
        let got: Vec<DateTime<Utc>> = slots(
            Some(&s),
            Berlin,
            utc("2026-03-28T00:00:00Z"),
            utc("2026-03-30T12:00:00Z"),
            SlotRules::default(),
        )
        .map(|s| s.at)
        .collect();
        assert_eq!(
            got,
            [
                utc("2026-03-28T01:30:00Z"),
                utc("2026-03-29T01:00:00Z"),
                utc("2026-03-30T00:30:00Z")
            ]
        );
        // Falls back at 03:00 on 2026-10-25: 02:30 happens twice, the slot is the first.
        let got: Vec<DateTime<Utc>> = slots(
            Some(&s),
            Berlin,
            utc("2026-10-24T12:00:00Z"),
            utc("2026-10-25T12:00:00Z"),
            SlotRules::default(),
        )
        .map(|s| s.at)
        .collect();
        assert_eq!(got, [utc("2026-10-25T00:30:00Z")]);
        // Australia/Lord_Howe shifts by half an hour (02:00 -> 02:30 on 2026-10-04).
        let lh = chrono_tz::Australia::Lord_Howe;
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(2, 15),
        };
        let day: NaiveDate = "2026-10-04".parse().unwrap();
        let slot = slots(
            Some(&s),
            lh,
            local_instant(lh, day.and_time(hm(0, 0))),
            local_instant(lh, day.and_time(hm(12, 0))),
            SlotRules::default(),
        )
        .next()
        .unwrap();
        assert_eq!(slot.at, local_instant(lh, day.and_time(hm(2, 30))));
    }

    #[test]
    fn a_heading_may_name_the_zone_of_its_times() {
        let r = Section::Recurring;
        let ny = chrono_tz::America::New_York;
        assert_eq!(
            parse_heading(r, "Daily at 09:00 in America/New_York"),
            HeadingKind::Schedule(
                Schedule::At {
                    days: DaySet::ALL,
                    time: hm(9, 0)
                },
                Some(ny),
                None
            )
        );
        assert!(matches!(
            parse_heading(r, "Cron 0 9 * * 1-5 in Asia/Tokyo"),
            HeadingKind::Schedule(Schedule::Cron(_), Some(chrono_tz::Asia::Tokyo), None)
        ));
        assert!(matches!(
            parse_heading(Section::OneTime, "At 2026-12-24 18:00 in Europe/London"),
            HeadingKind::Schedule(Schedule::Once(_), Some(chrono_tz::Europe::London), None)
        ));
        // An unknown zone makes its tasks invalid, with the name it probably meant.
        let HeadingKind::Invalid(why) = parse_heading(r, "Daily at 09:00 in america/new_york")
        else {
            panic!("an unknown zone is no schedule");
        };
        assert!(why.contains("did you mean \"America/New_York\""), "{why}");
        assert!(matches!(
            parse_heading(r, "Daily at 09:00 in Mars/Olympus"),
            HeadingKind::Invalid(_)
        ));
        // A title that ends in a place is a title.
        assert_eq!(parse_heading(r, "Meeting in Berlin"), HeadingKind::Title);
    }

    #[test]
    fn jitter_is_for_calendar_schedules_and_shorter_than_their_gaps() {
        let r = Section::Recurring;
        assert!(matches!(
            parse_heading(r, "Daily at 09:00 ~15m"),
            HeadingKind::Schedule(Schedule::At { .. }, None, Some(d)) if d == Duration::from_secs(900)
        ));
        // With a zone, in either order.
        for h in [
            "Daily at 09:00 ~15m in Asia/Tokyo",
            "Daily at 09:00 in Asia/Tokyo ~15m",
        ] {
            assert!(
                matches!(
                    parse_heading(r, h),
                    HeadingKind::Schedule(_, Some(chrono_tz::Asia::Tokyo), Some(_))
                ),
                "{h}"
            );
        }
        assert!(matches!(
            parse_heading(r, "Cron */10 * * * * ~5m"),
            HeadingKind::Schedule(Schedule::Cron(_), None, Some(_))
        ));
        for (bad, why) in [
            ("Every 6h ~10m", "calendar schedules"),
            ("Cron */10 * * * * ~10m", "shortest gap"),
            ("Daily at 09:00 ~1d", "shortest gap"),
            ("Daily at 09:00 ~soon", "not a jitter"),
            ("Daily at 09:00 ~0s", "not a jitter"),
        ] {
            match parse_heading(r, bad) {
                HeadingKind::Invalid(e) => assert!(e.contains(why), "{bad}: {e}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // A title that ends in a tilde word stays a title.
        assert_eq!(parse_heading(r, "Notes ~draft"), HeadingKind::Title);
    }

    #[test]
    fn a_shift_moves_every_slot_and_its_deadline_with_it() {
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(9, 0),
        };
        let rules = SlotRules {
            lateness: None,
            shift: Duration::from_secs(7 * 60),
        };
        let got: Vec<Slot> = slots(
            Some(&s),
            chrono_tz::UTC,
            utc("2026-06-01T09:05:00Z"),
            utc("2026-06-02T12:00:00Z"),
            rules,
        )
        .collect();
        assert_eq!(
            got.iter().map(|s| s.at).collect::<Vec<_>>(),
            [utc("2026-06-01T09:07:00Z"), utc("2026-06-02T09:07:00Z")]
        );
        assert_eq!(got[0].deadline, utc("2026-06-02T00:00:00Z"));
        // Due from the shifted time, not before.
        assert!(!slot_due(
            Some(&s),
            chrono_tz::UTC,
            None,
            utc("2026-06-01T09:06:00Z"),
            rules
        ));
        assert!(slot_due(
            Some(&s),
            chrono_tz::UTC,
            None,
            utc("2026-06-01T09:07:00Z"),
            rules
        ));
        assert_eq!(
            slot_next_due(
                Some(&s),
                chrono_tz::UTC,
                None,
                utc("2026-06-01T09:06:00Z"),
                rules
            ),
            Some(utc("2026-06-01T09:07:00Z"))
        );
    }

    #[test]
    fn every_has_a_slack_of_a_fiftieth_up_to_a_minute() {
        let secs = Duration::from_secs;
        assert_eq!(slack(secs(15 * 60)), secs(18));
        assert_eq!(slack(secs(50 * 60)), secs(60));
        assert_eq!(slack(secs(3600)), secs(60));
        assert_eq!(slack(secs(10)), Duration::from_millis(200));
        // At the boundary: due at D − s, not a millisecond sooner.
        for d in [secs(10), secs(15 * 60), secs(3600), secs(86400)] {
            let s = Schedule::Every(d);
            let last = utc("2026-06-01T10:00:00Z");
            let at = last + delta(d - slack(d));
            assert!(is_due(Some(&s), Berlin, Some(last), at), "{d:?}");
            assert!(
                !is_due(
                    Some(&s),
                    Berlin,
                    Some(last),
                    at - TimeDelta::milliseconds(1)
                ),
                "{d:?}"
            );
            assert_eq!(
                next_due(Some(&s), Berlin, Some(last), last + TimeDelta::seconds(1)),
                Some(at)
            );
        }
    }

    #[test]
    fn every_15m_under_a_five_minute_crontab_runs_every_15_minutes() {
        // Cron starts each run a little late, by a different amount every time.
        let s = Schedule::Every(Duration::from_secs(15 * 60));
        let start = utc("2026-06-01T10:00:00Z");
        let late_ms = [40, 3, 250, 12, 900, 7, 30, 1, 600, 55, 8, 300, 2];
        let mut last = None;
        let mut ran = Vec::new();
        for (i, late) in late_ms.iter().enumerate() {
            let now = start + TimeDelta::minutes(5 * i as i64) + TimeDelta::milliseconds(*late);
            if is_due(Some(&s), Berlin, last, now) {
                last = Some(now);
                ran.push(i * 5);
            }
        }
        assert_eq!(ran, [0, 15, 30, 45, 60]);
    }

    #[test]
    fn no_schedule_is_always_due() {
        let now = utc("2026-06-01T10:00:00Z");
        assert!(is_due(None, Berlin, Some(now), now));
        assert_eq!(next_due(None, Berlin, Some(now), now), Some(now));
    }

    #[test]
    fn every_is_due_after_the_duration_since_the_last_attempt() {
        let s = Schedule::Every(Duration::from_secs(6 * 3600));
        let now = utc("2026-06-01T12:00:00Z");
        assert!(is_due(Some(&s), Berlin, None, now));
        assert_eq!(next_due(Some(&s), Berlin, None, now), Some(now));
        let last = utc("2026-06-01T07:00:00Z");
        assert!(!is_due(Some(&s), Berlin, Some(last), now));
        // Six hours after the last attempt, less the slack of a minute.
        assert_eq!(
            next_due(Some(&s), Berlin, Some(last), now),
            Some(utc("2026-06-01T12:59:00Z"))
        );
        let last = utc("2026-06-01T06:00:00Z");
        assert!(is_due(Some(&s), Berlin, Some(last), now));
        assert_eq!(next_due(Some(&s), Berlin, Some(last), now), Some(now));
        // Elapsed time, not wall-clock: the DST night does not shorten it.
        let last = utc("2026-03-28T23:00:00Z");
        assert!(!is_due(
            Some(&s),
            Berlin,
            Some(last),
            utc("2026-03-29T04:58:59Z")
        ));
        assert!(is_due(
            Some(&s),
            Berlin,
            Some(last),
            utc("2026-03-29T05:00:00Z")
        ));
    }

    #[test]
    fn daily_at_on_an_ordinary_day() {
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(9, 0),
        };
        let tz = Berlin; // +02:00 in June
        assert!(!is_due(Some(&s), tz, None, utc("2026-06-01T06:59:00Z")));
        assert_eq!(
            next_due(Some(&s), tz, None, utc("2026-06-01T06:59:00Z")),
            Some(utc("2026-06-01T07:00:00Z"))
        );
        assert!(is_due(Some(&s), tz, None, utc("2026-06-01T07:00:00Z")));
        // Catch-up: a run later that day still runs it.
        let yesterday = utc("2026-05-31T07:00:00Z");
        assert!(is_due(
            Some(&s),
            tz,
            Some(yesterday),
            utc("2026-06-01T15:00:00Z")
        ));
        // Attempted today after 09:00 → not again today; next is tomorrow 09:00.
        let ran = utc("2026-06-01T07:05:00Z");
        assert!(!is_due(
            Some(&s),
            tz,
            Some(ran),
            utc("2026-06-01T15:00:00Z")
        ));
        assert_eq!(
            next_due(Some(&s), tz, Some(ran), utc("2026-06-01T15:00:00Z")),
            Some(utc("2026-06-02T07:00:00Z"))
        );
        // Attempted today before 09:00 (by an earlier schedule, say) → still due at 09:00.
        let early = utc("2026-06-01T05:00:00Z");
        assert!(is_due(
            Some(&s),
            tz,
            Some(early),
            utc("2026-06-01T07:00:00Z")
        ));
    }

    #[test]
    fn daily_at_in_the_spring_forward_gap() {
        // Daily at 02:30 on 2026-03-29 in Berlin: 02:30 does not exist; due from 03:00 CEST.
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(2, 30),
        };
        let last = Some(utc("2026-03-28T01:30:00Z")); // ran yesterday at 02:30 CET
        assert!(!is_due(Some(&s), Berlin, last, utc("2026-03-29T00:59:59Z")));
        assert!(is_due(Some(&s), Berlin, last, utc("2026-03-29T01:00:00Z")));
        assert_eq!(
            next_due(Some(&s), Berlin, last, utc("2026-03-28T23:00:00Z")),
            Some(utc("2026-03-29T01:00:00Z"))
        );
        // After running at 03:00 CEST it is not due again that day.
        let ran = Some(utc("2026-03-29T01:00:00Z"));
        assert!(!is_due(Some(&s), Berlin, ran, utc("2026-03-29T10:00:00Z")));
        assert_eq!(
            next_due(Some(&s), Berlin, ran, utc("2026-03-29T10:00:00Z")),
            Some(utc("2026-03-30T00:30:00Z")) // 02:30 CEST
        );
    }

    #[test]
    fn daily_at_in_the_fall_back_overlap_runs_once() {
        // 2026-10-25: 02:30 happens at 00:30Z (CEST) and again at 01:30Z (CET).
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(2, 30),
        };
        let last = Some(utc("2026-10-24T00:30:00Z"));
        assert!(!is_due(Some(&s), Berlin, last, utc("2026-10-25T00:29:59Z")));
        assert_eq!(
            next_due(Some(&s), Berlin, last, utc("2026-10-25T00:00:00Z")),
            Some(utc("2026-10-25T00:30:00Z"))
        );
        assert!(is_due(Some(&s), Berlin, last, utc("2026-10-25T00:30:00Z")));
        // It ran at the first 02:30; at the second 02:30 it is not due.
        let ran = Some(utc("2026-10-25T00:30:00Z"));
        assert!(!is_due(Some(&s), Berlin, ran, utc("2026-10-25T01:30:00Z")));
        assert_eq!(
            next_due(Some(&s), Berlin, ran, utc("2026-10-25T01:30:00Z")),
            Some(utc("2026-10-26T01:30:00Z")) // 02:30 CET
        );
        // If nothing ran at the first 02:30, the second one catches up (once).
        assert!(is_due(Some(&s), Berlin, last, utc("2026-10-25T01:30:00Z")));
    }

    #[test]
    fn weekday_schedule_skips_other_days_and_missed_days_are_not_replayed() {
        use Weekday::*;
        let s = Schedule::At {
            days: days(&[Mon, Thu]),
            time: hm(9, 0),
        };
        // 2026-06-02 is a Tuesday: not due even though Monday was missed.
        let last = Some(utc("2026-05-28T07:00:00Z")); // Thursday
        assert!(!is_due(Some(&s), Berlin, last, utc("2026-06-02T12:00:00Z")));
        assert_eq!(
            next_due(Some(&s), Berlin, last, utc("2026-06-02T12:00:00Z")),
            Some(utc("2026-06-04T07:00:00Z"))
        );
        // Empty day set: never.
        let never = Schedule::At {
            days: DaySet::EMPTY,
            time: hm(9, 0),
        };
        assert!(!is_due(
            Some(&never),
            Berlin,
            None,
            utc("2026-06-02T12:00:00Z")
        ));
        assert_eq!(
            next_due(Some(&never), Berlin, None, utc("2026-06-02T12:00:00Z")),
            None
        );
    }

    #[test]
    fn at_uses_the_local_day_in_other_zones() {
        let s = Schedule::At {
            days: DaySet::WEEKDAYS,
            time: hm(7, 0),
        };
        // Kolkata: Monday 2026-06-01 07:00 IST = 01:30Z; Sunday 23:00Z is already Monday there.
        assert!(!is_due(
            Some(&s),
            Kolkata,
            None,
            utc("2026-06-01T01:29:00Z")
        ));
        assert!(is_due(Some(&s), Kolkata, None, utc("2026-06-01T01:30:00Z")));
        assert_eq!(
            next_due(Some(&s), Kolkata, None, utc("2026-05-31T20:00:00Z")),
            Some(utc("2026-06-01T01:30:00Z"))
        );
        // New York: Friday 2026-06-05 23:00 EDT = Saturday 03:00Z; it is still Friday there.
        let fri = Schedule::At {
            days: days(&[Weekday::Fri]),
            time: hm(22, 0),
        };
        assert!(is_due(
            Some(&fri),
            New_York,
            None,
            utc("2026-06-06T03:00:00Z")
        ));
        assert!(!is_due(
            Some(&fri),
            Berlin,
            None,
            utc("2026-06-06T03:00:00Z")
        ));
        // New York spring forward 2026-03-08: 02:30 → 03:00 EDT = 07:00Z.
        let s = Schedule::At {
            days: DaySet::ALL,
            time: hm(2, 30),
        };
        assert_eq!(
            next_due(Some(&s), New_York, None, utc("2026-03-08T05:00:00Z")),
            Some(utc("2026-03-08T07:00:00Z"))
        );
    }

    #[test]
    fn once_is_due_from_its_local_time() {
        let s = Schedule::Once(ndt("2026-12-24 18:00"));
        // Berlin is +01:00 in December.
        assert!(!is_due(Some(&s), Berlin, None, utc("2026-12-24T16:59:59Z")));
        assert!(is_due(Some(&s), Berlin, None, utc("2026-12-24T17:00:00Z")));
        assert!(is_due(Some(&s), Berlin, None, utc("2027-01-01T00:00:00Z")));
        assert_eq!(
            next_due(Some(&s), Berlin, None, utc("2026-12-01T00:00:00Z")),
            Some(utc("2026-12-24T17:00:00Z"))
        );
        let late = utc("2027-01-01T00:00:00Z");
        assert_eq!(next_due(Some(&s), Berlin, None, late), Some(late));
        // In the gap: the first instant after it.
        let gap = Schedule::Once(ndt("2026-03-29 02:30"));
        assert!(!is_due(
            Some(&gap),
            Berlin,
            None,
            utc("2026-03-29T00:59:59Z")
        ));
        assert!(is_due(
            Some(&gap),
            Berlin,
            None,
            utc("2026-03-29T01:00:00Z")
        ));
        // In the overlap: the earlier instant.
        let twice = Schedule::Once(ndt("2026-10-25 02:30"));
        assert_eq!(
            next_due(Some(&twice), Berlin, None, utc("2026-10-24T00:00:00Z")),
            Some(utc("2026-10-25T00:30:00Z"))
        );
        // Kolkata's half-hour offset.
        let k = Schedule::Once(ndt("2026-06-01 00:00"));
        assert_eq!(
            next_due(Some(&k), Kolkata, None, utc("2026-05-01T00:00:00Z")),
            Some(utc("2026-05-31T18:30:00Z"))
        );
    }
}
