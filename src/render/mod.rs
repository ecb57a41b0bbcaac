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
