//! What an agent did (pause, resume, deny through `heartbeat mcp`), waiting for the next run
//! to print it.
//!
//! Invariants:
//! - A notice is taken (read and deleted) in one statement: two runs never both print it.
//! - The line is stored as it is printed, already redacted.

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::{Result, Sqlite, format_ts};
use crate::text::Redacted;

/// What agents did, waiting for the next run to print it: taken (read and deleted) at once,
/// so two runs never both print a notice.
pub(crate) trait Notices {
    fn add_notice(&mut self, line: &Redacted, now: DateTime<Utc>) -> Result<()>;

    /// Every waiting notice, oldest first; they are gone from the store afterwards.
    fn take_notices(&mut self) -> Result<Vec<String>>;
}

impl Notices for Sqlite {
    fn add_notice(&mut self, line: &Redacted, now: DateTime<Utc>) -> Result<()> {
        self.durable(|conn| {
            conn.execute(
                "INSERT INTO agent_notices (line, created_at) VALUES (?1, ?2)",
                params![line.as_str(), format_ts(now)],
            )
        })
        .map(drop)
    }

    fn take_notices(&mut self) -> Result<Vec<String>> {
        let mut rows: Vec<(i64, String)> = {
            let mut stmt = self
                .conn
                .prepare("DELETE FROM agent_notices RETURNING id, line")
                .map_err(|e| self.err(e))?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| self.err(e))?
                .collect::<rusqlite::Result<_>>()
                .map_err(|e| self.err(e))?
        };
        rows.sort();
        Ok(rows.into_iter().map(|(_, line)| line).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;
    use crate::store::Notices;

    #[test]
    fn notices_are_taken_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Sqlite::open(dir.path()).unwrap();
        assert!(store.take_notices().unwrap().is_empty());
        store
            .add_notice(&"first".into(), ts("2026-05-01T10:00:00Z"))
            .unwrap();
        store
            .add_notice(&"second".into(), ts("2026-05-01T10:00:00Z"))
            .unwrap();
        assert_eq!(store.take_notices().unwrap(), ["first", "second"]);
        assert!(store.take_notices().unwrap().is_empty());
    }
}
