//! The clock: `--now` (or the real clock), read once when a command starts, plus the real
//! time elapsed since, read where each event happens (SPEC §7, `ts`).
//!
//! Invariants:
//! - [`Clock::start`] never changes: schedules compare run start times with it.
//! - [`Clock::now`] never goes back and never reads the wall clock again: a clock set with
//!   `--now` runs on from there in real time, and an NTP step during a run moves nothing.

use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: DateTime<Utc>,
    at: Instant,
}

impl Clock {
    /// A clock that reads `start` now.
    pub fn starting_at(start: DateTime<Utc>) -> Clock {
        Clock {
            start,
            at: Instant::now(),
        }
    }

    /// The time this clock started at.
    pub fn start(&self) -> DateTime<Utc> {
        self.start
    }

    /// The start plus the time elapsed since.
    pub fn now(&self) -> DateTime<Utc> {
        TimeDelta::from_std(self.at.elapsed())
            .ok()
            .and_then(|d| self.start.checked_add_signed(d))
            .unwrap_or(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
