//! Text for people from data: terminal lines ([`terminal`]) and Telegram HTML
//! ([`telegram`]), plus the shared ways to show a path or a time. Pure: callers print.

pub(crate) mod log;
pub(crate) mod telegram;
pub(crate) mod terminal;

use std::path::Path;

use chrono::{DateTime, Local, Utc};
use chrono_tz::Tz;

/// A path for people: relative to the working directory when it is below it.
pub(crate) fn show_path(path: &Path, cwd: &Path) -> String {
    path.strip_prefix(cwd).unwrap_or(path).display().to_string()
}

/// Local time for people, in the configured zone.
pub(crate) fn show_time(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string()
}

/// The machine's local time (for holders of the lock, which may be another config's).
pub(crate) fn show_local(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local)
        .format("%Y-%m-%d %H:%M:%S %Z")
        .to_string()
}

/// How long ago `t` was, in its two largest units (`2d 3h`, `5m`, `40s`): the age of the
/// last run in `status`.
pub(crate) fn ago(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = now.signed_duration_since(t).num_seconds().max(0);
    let units = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)];
    let parts: Vec<String> = units
        .iter()
        .scan(secs, |left, (name, size)| {
            let n = *left / size;
            *left %= size;
            Some((n, name))
        })
        .skip_while(|(n, _)| *n == 0)
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, name)| format!("{n}{name}"))
        .collect();
    if parts.is_empty() {
        "0s".into()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod ago_tests {
    use super::*;

    #[test]
    fn ages_read_in_two_units_at_most() {
        let now: DateTime<Utc> = "2026-05-03T12:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(ago(at("2026-05-01T09:00:00Z"), now), "2d 3h");
        assert_eq!(ago(at("2026-05-03T11:55:00Z"), now), "5m");
        assert_eq!(ago(at("2026-05-03T11:59:20Z"), now), "40s");
        assert_eq!(ago(at("2026-05-02T12:00:30Z"), now), "23h 59m");
        assert_eq!(ago(now, now), "0s");
        // A time in the future (a clock that stepped back) is no age.
        assert_eq!(ago(at("2026-05-04T00:00:00Z"), now), "0s");
    }
}
