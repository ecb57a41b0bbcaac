//! Cron lines (docs/reference.md#schedule-headings): the five fields of a crontab line —
//! minute, hour, day of month, month, day of week — with lists, ranges, steps and names, read
//! and evaluated as Vixie cron does. The one place that knows the cron crate, so that it can
//! be swapped.
//!
//! Invariants:
//! - Exactly five fields: a sixth or seventh (seconds, a year) is refused with a hint, since
//!   heartbeat runs at minute granularity at most.
//! - Day of month and day of week are or-ed when both are restricted (`0 9 1 * MON`: the 1st
//!   and every Monday), as in Vixie cron; Sunday is 0 or 7.
//! - On DST nights: a slot in a skipped hour falls at the first instant after the gap; a
//!   fixed hour that repeats falls once, at its first occurrence; a wildcard or stepped hour
//!   falls in both passes.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// A parsed cron line.
#[derive(Clone)]
pub struct CronLine {
    /// The fields as written, single-spaced.
    text: String,
    /// Boxed: the crate's pattern is large, and schedules are copied with every task.
    cron: Box<croner::Cron>,
}

impl PartialEq for CronLine {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl std::fmt::Debug for CronLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CronLine({:?})", self.text)
    }
}

impl CronLine {
    /// Five fields, or why not.
    pub(crate) fn parse(fields: &str) -> Result<CronLine, String> {
        let words: Vec<&str> = fields.split_whitespace().collect();
        let text = words.join(" ");
        match words.len() {
            5 => {}
            6 | 7 => {
                return Err(format!(
                    "cron line {text:?} has {} fields; heartbeat takes the five of a crontab \
                     (minute hour day-of-month month day-of-week) and has no seconds or years",
                    words.len()
                ));
            }
            n => {
                return Err(format!(
                    "cron line {text:?} has {n} field(s); write five: minute hour \
                     day-of-month month day-of-week (\"30 2 * * 1-5\")"
                ));
            }
        }
        // The crate's extensions (`L`, `W`, `#`, `?`, `+`, `@yearly`) are not cron's:
        // refused, so that a line means what a crontab would. Names are three letters.
        for field in &words {
            let odd = field
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '*' | ',' | '-' | '/')));
            let short_name = field
                .split(|c: char| !c.is_ascii_alphabetic())
                .any(|run| !run.is_empty() && run.len() != 3);
            if odd.is_some() || short_name {
                return Err(format!(
                    "cron line {text:?}: {field:?} is not a crontab field (numbers, names such as \
                     MON or JAN, `*`, `,`, `-` and `/`)"
                ));
            }
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build();
        let cron = parser
            .parse(&text)
            .map_err(|e| format!("cron line {text:?}: {e}"))?;
        Ok(CronLine {
            text,
            cron: Box::new(cron),
        })
    }

    /// The first slot strictly after `after`, in `tz`; None when it never comes again (a
    /// 30 February).
    pub(crate) fn next_after(&self, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&after.with_timezone(&tz), false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(line: &str, tz: Tz, after: &str) -> String {
        let after: DateTime<Utc> = after.parse().unwrap();
        CronLine::parse(line)
            .unwrap()
            .next_after(tz, after)
            .map(|t| t.with_timezone(&tz).format("%Y-%m-%d %H:%M %a").to_string())
            .unwrap_or_else(|| "never".into())
    }

    #[test]
    fn lines_mean_what_cron_means() {
        let utc = chrono_tz::UTC;
        // (line, after (UTC), the next slot, local)
        let table = [
            ("* * * * *", "2026-05-01T10:00:00Z", "2026-05-01 10:01 Fri"),
            (
                "*/15 * * * *",
                "2026-05-01T10:07:00Z",
                "2026-05-01 10:15 Fri",
            ),
            ("0 * * * *", "2026-05-01T10:00:00Z", "2026-05-01 11:00 Fri"),
            ("30 2 * * *", "2026-05-01T10:00:00Z", "2026-05-02 02:30 Sat"),
            (
                "30 2 * * 1-5",
                "2026-05-01T10:00:00Z",
                "2026-05-04 02:30 Mon",
            ),
            (
                "30 2 * * MON-FRI",
                "2026-05-01T10:00:00Z",
                "2026-05-04 02:30 Mon",
            ),
            ("0 9 * * 0", "2026-05-01T10:00:00Z", "2026-05-03 09:00 Sun"),
            ("0 9 * * 7", "2026-05-01T10:00:00Z", "2026-05-03 09:00 Sun"),
            (
                "0 9 * * SUN",
                "2026-05-01T10:00:00Z",
                "2026-05-03 09:00 Sun",
            ),
            (
                "0 9 * * sat,sun",
                "2026-05-01T10:00:00Z",
                "2026-05-02 09:00 Sat",
            ),
            ("0 0 1 * *", "2026-05-01T10:00:00Z", "2026-06-01 00:00 Mon"),
            ("0 0 31 * *", "2026-05-01T10:00:00Z", "2026-05-31 00:00 Sun"),
            ("0 0 31 * *", "2026-05-31T10:00:00Z", "2026-07-31 00:00 Fri"),
            (
                "0 12 29 2 *",
                "2026-05-01T10:00:00Z",
                "2028-02-29 12:00 Tue",
            ),
            ("0 0 1 1 *", "2026-05-01T10:00:00Z", "2027-01-01 00:00 Fri"),
            (
                "0 0 * JAN *",
                "2026-05-01T10:00:00Z",
                "2027-01-01 00:00 Fri",
            ),
            (
                "0 0 1 jan,jul *",
                "2026-05-01T10:00:00Z",
                "2026-07-01 00:00 Wed",
            ),
            ("5 4 * * *", "2026-05-01T04:05:00Z", "2026-05-02 04:05 Sat"),
            ("5 4 * * *", "2026-05-01T04:04:59Z", "2026-05-01 04:05 Fri"),
            (
                "0 22 * * 1-5",
                "2026-05-01T22:00:00Z",
                "2026-05-04 22:00 Mon",
            ),
            (
                "0 0,12 * * *",
                "2026-05-01T10:00:00Z",
                "2026-05-01 12:00 Fri",
            ),
            (
                "0 8-10 * * *",
                "2026-05-01T10:00:00Z",
                "2026-05-02 08:00 Sat",
            ),
            (
                "0 8-18/4 * * *",
                "2026-05-01T10:00:00Z",
                "2026-05-01 12:00 Fri",
            ),
            (
                "23 0-20/2 * * *",
                "2026-05-01T10:00:00Z",
                "2026-05-01 10:23 Fri",
            ),
            (
                "0 0 1-7 * 1",
                "2026-05-01T10:00:00Z",
                "2026-05-02 00:00 Sat",
            ),
            // Day of month or day of week, as Vixie cron: the 13th and every Friday.
            ("0 0 13 * 5", "2026-05-01T10:00:00Z", "2026-05-08 00:00 Fri"),
            ("0 0 13 * 5", "2026-05-09T10:00:00Z", "2026-05-13 00:00 Wed"),
            ("0 0 * * 5", "2026-05-09T10:00:00Z", "2026-05-15 00:00 Fri"),
            (
                "0 0 */10 * *",
                "2026-05-01T10:00:00Z",
                "2026-05-11 00:00 Mon",
            ),
            (
                "0 0 1 */3 *",
                "2026-05-01T10:00:00Z",
                "2026-07-01 00:00 Wed",
            ),
            (
                "15 10 * 2-4 *",
                "2026-05-01T10:00:00Z",
                "2027-02-01 10:15 Mon",
            ),
            (
                "0 6 * * wed",
                "2026-05-01T10:00:00Z",
                "2026-05-06 06:00 Wed",
            ),
            (
                "59 23 31 12 *",
                "2026-05-01T10:00:00Z",
                "2026-12-31 23:59 Thu",
            ),
            ("0 0 30 2 *", "2026-05-01T10:00:00Z", "never"),
            (
                "1,2,3 * * * *",
                "2026-05-01T10:02:00Z",
                "2026-05-01 10:03 Fri",
            ),
            (
                "0 */6 * * *",
                "2026-05-01T10:00:00Z",
                "2026-05-01 12:00 Fri",
            ),
            (
                "0 9 * * 1,3,5",
                "2026-05-01T10:00:00Z",
                "2026-05-04 09:00 Mon",
            ),
            (
                "0 9 1,15 * *",
                "2026-05-01T10:00:00Z",
                "2026-05-15 09:00 Fri",
            ),
            (
                "30 9 * * 6-7",
                "2026-05-01T10:00:00Z",
                "2026-05-02 09:30 Sat",
            ),
            (
                "0 0 28-31 * *",
                "2026-05-01T10:00:00Z",
                "2026-05-28 00:00 Thu",
            ),
        ];
        for (line, after, want) in table {
            assert_eq!(next(line, utc, after), want, "{line} after {after}");
        }
    }

    #[test]
    fn dst_nights_follow_vixie_cron() {
        let berlin = chrono_tz::Europe::Berlin;
        // Spring forward 2026-03-29 02:00 → 03:00: 02:30 falls at 03:00 CEST, once.
        assert_eq!(
            next("30 2 * * *", berlin, "2026-03-28T12:00:00Z"),
            "2026-03-29 03:00 Sun"
        );
        // Fall back 2026-10-25 03:00 → 02:00: a fixed 02:30 falls once, at the first pass.
        let first = next("30 2 * * *", berlin, "2026-10-24T12:00:00Z");
        assert_eq!(first, "2026-10-25 02:30 Sun");
        let after_first: DateTime<Utc> = "2026-10-25T00:30:00Z".parse().unwrap();
        let again = CronLine::parse("30 2 * * *")
            .unwrap()
            .next_after(berlin, after_first)
            .unwrap();
        assert_eq!(
            again,
            "2026-10-26T01:30:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        // A stepped hour falls in both passes of the repeated hour.
        let line = CronLine::parse("30 */1 * * *").unwrap();
        let a = line
            .next_after(berlin, "2026-10-25T00:00:00Z".parse().unwrap())
            .unwrap();
        let b = line.next_after(berlin, a).unwrap();
        assert_eq!(a, "2026-10-25T00:30:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(b, "2026-10-25T01:30:00Z".parse::<DateTime<Utc>>().unwrap());
    }

    #[test]
    fn six_or_seven_fields_and_the_crates_extensions_are_refused_with_a_hint() {
        let e = CronLine::parse("0 30 2 * * *").unwrap_err();
        assert!(
            e.contains("has 6 fields") && e.contains("no seconds"),
            "{e}"
        );
        assert!(
            CronLine::parse("0 30 2 * * * 2026")
                .unwrap_err()
                .contains("7 fields")
        );
        assert!(
            CronLine::parse("30 2 * *")
                .unwrap_err()
                .contains("write five")
        );
        for bad in [
            "0 0 L * *",
            "0 0 * * 5#2",
            "0 0 15W * *",
            "0 0 ? * *",
            "0 0 1 * +MON",
        ] {
            assert!(CronLine::parse(bad).is_err(), "{bad}");
        }
        assert!(CronLine::parse("0 9 * * MON-FRI").is_ok());
        assert!(CronLine::parse("0 9 * * wed").is_ok());
        assert!(CronLine::parse("0 0 1 JUL,jan *").is_ok());
        assert!(CronLine::parse("61 * * * *").is_err());
        assert!(CronLine::parse("0 25 * * *").is_err());
        assert!(CronLine::parse("0 0 * 13 *").is_err());
    }
}
