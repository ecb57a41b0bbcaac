//! Active hours, active days and task schedules. Pure: every function takes `now`.
//! OWNER: schedule/config helper. Signatures are the contract; bodies to be written.

use chrono::{DateTime, Utc, Weekday};
use chrono_tz::Tz;

use crate::model::{DaySet, Schedule, Section};

/// A daily window in local minutes since midnight: start inclusive, end exclusive.
/// `end` may be 1440 (`24:00`). `start > end` crosses midnight. `start == end` is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: u32,
    pub end: u32,
}

impl Window {
    pub const ALWAYS: Window = Window { start: 0, end: 1440 };

    /// Parse `HH:MM-HH:MM`. Errors describe what is wrong (`8am`, `24:30`, start == end).
    pub fn parse(_s: &str) -> Result<Window, String> {
        unimplemented!()
    }
}

/// `mon`, `Monday`, … (any case) → weekday.
pub fn parse_day(_s: &str) -> Option<Weekday> {
    unimplemented!()
}

/// When the tool may run at all: zone, daily window, active days.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveHours {
    pub tz: Tz,
    pub window: Window,
    pub days: DaySet,
}

impl ActiveHours {
    pub fn is_active(&self, _now: DateTime<Utc>) -> bool {
        unimplemented!()
    }

    /// The first instant at or after `now` that is active; None if never (no active days).
    pub fn next_active(&self, _now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        unimplemented!()
    }
}

/// What a level-3 heading means in a section.
#[derive(Clone, Debug, PartialEq)]
pub enum HeadingKind {
    Schedule(Schedule),
    /// A valid schedule, but not for this section (e.g. `Every 6h` under One-time).
    WrongSection(String),
    /// Not a schedule: only a title.
    Title,
}

pub fn parse_heading(_section: Section, _text: &str) -> HeadingKind {
    unimplemented!()
}

/// Whether a task with this schedule (None = no heading: due at every run) is due at `now`.
pub fn is_due(
    _schedule: Option<&Schedule>,
    _tz: Tz,
    _last_attempt: Option<DateTime<Utc>>,
    _now: DateTime<Utc>,
) -> bool {
    unimplemented!()
}

/// The earliest instant >= `now` at which the task is (or becomes) due; `now` itself when it
/// is due now; None when it never will be.
pub fn next_due(
    _schedule: Option<&Schedule>,
    _tz: Tz,
    _last_attempt: Option<DateTime<Utc>>,
    _now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    unimplemented!()
}
