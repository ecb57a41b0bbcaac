//! [`Notices`] on PostgreSQL: what agents did, waiting for the next run of any node to print
//! it.
//!
//! Invariants (beyond the trait's):
//! - A notice is taken by one `DELETE … RETURNING`: of two nodes taking notices at once, each
//!   notice goes to exactly one of them.

use chrono::{DateTime, Utc};

use super::Pg;
use crate::audit::format_ts;
use crate::store::{Notices, Result};
use crate::text::Redacted;

impl Notices for Pg {
    fn add_notice(&mut self, line: &Redacted, now: DateTime<Utc>) -> Result<()> {
        let now = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO agent_notices (line, created_at) VALUES ($1, $2)",
                &[&line.as_str(), &now],
            )
            .map(drop)
        })
    }

    fn take_notices(&mut self) -> Result<Vec<String>> {
        let mut rows: Vec<(i64, String)> = self.tx(|tx| {
            tx.query("DELETE FROM agent_notices RETURNING id, line", &[])?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })?;
        rows.sort();
        Ok(rows.into_iter().map(|(_, line)| line).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::super::test_util;
    use super::*;
    use crate::store::test_util::ts;

    #[test]
    fn notices_are_taken_once_in_order() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        assert!(s.take_notices().unwrap().is_empty());
        s.add_notice(&"first".into(), ts("2026-05-01T10:00:00Z"))
            .unwrap();
        s.add_notice(&"second".into(), ts("2026-05-01T10:00:00Z"))
            .unwrap();
        assert_eq!(s.take_notices().unwrap(), ["first", "second"]);
        assert!(s.take_notices().unwrap().is_empty());
    }

    #[test]
    fn of_two_nodes_taking_notices_at_once_each_notice_goes_to_exactly_one() {
        let Some(url) = test_util::url() else { return };
        let mut a = Pg::connect(&url, "n1").unwrap();
        let mut b = Pg::connect(&url, "n2").unwrap();
        let lines: Vec<String> = (0..200).map(|i| format!("notice {i:03}")).collect();
        let start = std::sync::Barrier::new(2);
        let (ours, theirs) = std::thread::scope(|s| {
            let start = &start;
            let lines = &lines;
            // One node adds notices while both take them.
            let one = s.spawn(move || {
                start.wait();
                let mut taken = Vec::new();
                for line in lines {
                    let line = crate::audit::Secrets::default().redact(line);
                    a.add_notice(&line, ts("2026-05-01T10:00:00Z")).unwrap();
                    taken.extend(a.take_notices().unwrap());
                }
                taken.extend(a.take_notices().unwrap());
                taken
            });
            let two = s.spawn(move || {
                start.wait();
                let mut taken = Vec::new();
                for _ in 0..lines.len() {
                    taken.extend(b.take_notices().unwrap());
                }
                taken
            });
            (one.join().unwrap(), two.join().unwrap())
        });
        let mut all = ours.clone();
        all.extend(theirs.iter().cloned());
        assert_eq!(all.len(), lines.len(), "a notice taken twice or lost");
        assert_eq!(
            all.iter().collect::<HashSet<_>>(),
            lines.iter().collect::<HashSet<_>>()
        );
        // Each node took its notices oldest first.
        for taken in [&ours, &theirs] {
            assert!(taken.is_sorted(), "{taken:?}");
        }
    }
}
