//! The clock: `--now` (or the real clock), read once when a command starts, plus the real
//! time elapsed since, read where each event happens (docs/reference.md#clock).
//!
//! Invariants:
//! - [`Clock::start`] never changes: schedules compare run start times with it.
//! - [`Clock::now`] never goes back and never reads the wall clock again: a clock set with
//!   `--now` runs on from there in real time, and an NTP step during a run moves nothing.

use std::time::Instant;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use chrono_tz::Tz;

use crate::schedule::{local_instant, local_midnight};

#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: DateTime<Utc>,
    at: Instant,
}

impl Clock {
    /// A clock that reads `start` now.
    pub(crate) fn starting_at(start: DateTime<Utc>) -> Clock {
        Clock {
            start,
            at: Instant::now(),
        }
    }

    /// The time this clock started at.
    pub(crate) fn start(&self) -> DateTime<Utc> {
        self.start
    }

    /// The start plus the time elapsed since.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        TimeDelta::from_std(self.at.elapsed())
            .ok()
            .and_then(|d| self.start.checked_add_signed(d))
            .unwrap_or(self.start)
    }
}

/// The forms a time takes on the command line (`--now`, `--since`), for messages.
pub(crate) const TIME_FORMS: &str = "an RFC 3339 time (2026-12-07T02:00:00+01:00), a local time \
     in the configured zone (2026-12-07T02:00, or \"2026-12-07 02:00\") or a local date \
     (2026-12-07, its midnight)";

/// A time as typed on the command line: an instant, or a local wall-clock time that the
/// configured zone turns into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    At(DateTime<Utc>),
    Local(NaiveDateTime),
}

impl When {
    /// RFC 3339; a local `YYYY-MM-DDTHH:MM[:SS]` (or with a space for the `T`); a local
    /// `YYYY-MM-DD`, meaning its midnight.
    pub fn parse(s: &str) -> Option<When> {
        let s = s.trim();
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            return Some(When::At(t.with_timezone(&Utc)));
        }
        let local = [
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M",
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%d %H:%M:%S%.f",
        ]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(s, format).ok())
        .or_else(|| {
            let date = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
            Some(date.and_time(NaiveTime::MIN))
        })?;
        Some(When::Local(local))
    }

    /// Whether [`When::instant`] needs the zone.
    pub fn is_local(&self) -> bool {
        matches!(self, When::Local(_))
    }

    /// The instant, a local time read in `tz` as schedules read it: a time that a
    /// spring-forward gap skips is the first instant after the gap, a repeated one the
    /// earlier of the two.
    pub fn instant(self, tz: Tz) -> DateTime<Utc> {
        match self {
            When::At(t) => t,
            When::Local(local) => local_instant(tz, local),
        }
    }
}

/// The forms `--since` takes, for messages.
pub(crate) const SINCE_FORMS: &str =
    "a duration back from now (30m, 2h, 2d, 1w), today or yesterday (from local midnight)";

/// `--since`: where a look back starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Since {
    /// This long before now.
    Ago(std::time::Duration),
    /// From local midnight this many days back (`today` 0, `yesterday` 1).
    Midnight(u32),
    At(When),
}

impl Since {
    pub(crate) fn parse(s: &str) -> Option<Since> {
        let s = s.trim();
        match s.to_ascii_lowercase().as_str() {
            "today" => return Some(Since::Midnight(0)),
            "yesterday" => return Some(Since::Midnight(1)),
            _ => {}
        }
        if let Ok(d) = humantime::parse_duration(s) {
            return Some(Since::Ago(d));
        }
        When::parse(s).map(Since::At)
    }

    /// Whether [`Since::start`] needs the zone.
    pub(crate) fn is_local(&self) -> bool {
        match self {
            Since::Ago(_) => false,
            Since::Midnight(_) => true,
            Since::At(when) => when.is_local(),
        }
    }

    /// The first instant it takes in, seen at `now` in zone `tz`. None: no lower bound (a
    /// duration reaching before the start of time).
    pub(crate) fn start(self, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Since::Ago(d) => TimeDelta::from_std(d)
                .ok()
                .and_then(|d| now.checked_sub_signed(d)),
            Since::Midnight(days) => {
                let mut midnight = local_midnight(tz, now);
                for _ in 0..days {
                    midnight = local_midnight(tz, midnight - TimeDelta::seconds(1));
                }
                Some(midnight)
            }
            Since::At(when) => Some(when.instant(tz)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_time_is_rfc_3339_or_a_local_time_or_date_in_the_zone() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let at = |s: &str| When::parse(s).map(|w| w.instant(berlin));
        assert_eq!(
            at("2026-12-07T02:00:00Z"),
            Some(utc("2026-12-07T02:00:00Z"))
        );
        assert_eq!(at("2026-12-07T02:00"), Some(utc("2026-12-07T01:00:00Z")));
        assert_eq!(at("2026-12-07 02:00"), Some(utc("2026-12-07T01:00:00Z")));
        assert_eq!(
            at(" 2026-12-07T02:00:30 "),
            Some(utc("2026-12-07T01:00:30Z"))
        );
        assert_eq!(at("2026-12-07"), Some(utc("2026-12-06T23:00:00Z")));
        // The DST nights, as schedules read them.
        assert_eq!(at("2026-03-29T02:30"), Some(utc("2026-03-29T01:00:00Z")));
        assert_eq!(at("2026-10-25T02:30"), Some(utc("2026-10-25T00:30:00Z")));
        assert!(When::parse("2026-12-07T02:00:00Z").is_some_and(|w| !w.is_local()));
        for bad in [
            "yesterday",
            "2026-12-32",
            "2026-12-07T25:00",
            "02:00",
            "7 Dec 2026",
            "",
        ] {
            assert_eq!(When::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn since_is_a_duration_a_day_or_a_time() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let now = utc("2026-12-07T10:00:00Z");
        let start = |s: &str| Since::parse(s).and_then(|since| since.start(now, berlin));
        assert_eq!(start("2h"), Some(utc("2026-12-07T08:00:00Z")));
        assert_eq!(start("2d"), Some(utc("2026-12-05T10:00:00Z")));
        assert_eq!(start("today"), Some(utc("2026-12-06T23:00:00Z")));
        assert_eq!(start("Yesterday"), Some(utc("2026-12-05T23:00:00Z")));
        assert_eq!(start("2026-12-07T02:00"), Some(utc("2026-12-07T01:00:00Z")));
        assert_eq!(start("2026-12-01"), Some(utc("2026-11-30T23:00:00Z")));
        assert_eq!(
            Since::parse("100000000y").and_then(|s| s.start(now, berlin)),
            None
        );
        assert!(!Since::parse("2h").unwrap().is_local());
        assert!(Since::parse("yesterday").unwrap().is_local());
        assert_eq!(Since::parse("yesterday-ish"), None);
    }

    #[test]
    fn runs_on_from_its_start() {
        let start: DateTime<Utc> = "2031-01-01T00:00:00Z".parse().unwrap();
        let clock = Clock::starting_at(start);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = clock.now();
        assert!(now >= start + TimeDelta::milliseconds(20), "{now}");
        assert!(now < start + TimeDelta::seconds(10), "{now}");
        assert_eq!(clock.start(), start);
    }
}
