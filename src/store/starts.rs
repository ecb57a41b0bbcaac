//! Start records of one-time tasks with outside effects (docs/reference.md#at-most-once).
//!
//! Invariants:
//! - A start is committed durably (`synchronous = FULL`) before the tool starts; if it
//!   cannot be, the tool does not start.
//! - The outcome's history row settles (deletes) the start in the same transaction.
//! - A start left unsettled by a run that is over (killed, or unable to record its outcome)
//!   is held: its task does not run again by itself until `heartbeat reset` releases it.

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::{Result, Sqlite};
use crate::audit::format_ts;
use crate::text::RedactedJson;

/// A started one-time task, as recorded before its tool ran.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StartRow {
    pub task_id: String,
    pub run_id: String,
    pub started_at: String,
    pub tool: String,
    /// Redacted, as stored.
    pub input: serde_json::Value,
    pub file: String,
    pub line: i64,
    pub section: String,
}

/// A start to record: its input redacted, as every row is.
#[derive(Clone, Debug)]
pub(crate) struct NewStart<'a> {
    pub task_id: &'a str,
    pub run_id: &'a str,
    pub tool: &'a str,
    pub input: RedactedJson,
    pub file: &'a str,
    pub line: i64,
    pub section: &'a str,
}

/// Start records of one-time tasks: durable before the tool starts, settled by its
/// outcome's history row in the same transaction, held when a run left one unsettled.
pub(crate) trait Starts {
    /// Record that this run starts the task now (replacing a released older start).
    fn record_start(&mut self, row: &NewStart, now: DateTime<Utc>) -> Result<()>;

    /// Starts of other runs that nobody settled, not reported yet: from now on held, and
    /// returned once, for the run that holds the lock to report them.
    fn hold_unsettled_starts(&mut self, run_id: &str) -> Result<Vec<StartRow>>;

    /// Task ids with an unsettled start (held, or left by a run that may still be going).
    fn unsettled(&self) -> Result<Vec<String>>;

    /// `heartbeat reset`: the task may run again. True when it was held.
    fn release_start(&mut self, task_id: &str) -> Result<bool>;
}

impl Starts for Sqlite {
    fn record_start(&mut self, row: &NewStart, now: DateTime<Utc>) -> Result<()> {
        let ts = format_ts(now);
        crate::fault::point("record_start");
        self.durable(|conn| {
            conn.execute(
                "INSERT OR REPLACE INTO starts (task_id, run_id, started_at, tool, input, file,
                    line, section, held) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0)",
                params![
                    row.task_id,
                    row.run_id,
                    ts,
                    row.tool,
                    row.input.to_text().as_str(),
                    row.file,
                    row.line,
                    row.section
                ],
            )
            .map(drop)
        })
    }

    fn hold_unsettled_starts(&mut self, run_id: &str) -> Result<Vec<StartRow>> {
        self.durable(|conn| {
            // Immediate: it writes, and a deferred read upgraded to a write fails at once
            // (SQLITE_BUSY) when another process wrote meanwhile.
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let rows = {
                let mut stmt = tx.prepare(
                    "SELECT task_id, run_id, started_at, tool, input, file, line, section
                     FROM starts WHERE held = 0 AND run_id != ?1 ORDER BY started_at, task_id",
                )?;
                stmt.query_map([run_id], |r| {
                    let input: String = r.get(4)?;
                    Ok(StartRow {
                        task_id: r.get(0)?,
                        run_id: r.get(1)?,
                        started_at: r.get(2)?,
                        tool: r.get(3)?,
                        input: serde_json::from_str(&input).unwrap_or_default(),
                        file: r.get(5)?,
                        line: r.get(6)?,
                        section: r.get(7)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?
            };
            tx.execute(
                "UPDATE starts SET held = 1 WHERE held = 0 AND run_id != ?1",
                [run_id],
            )?;
            tx.commit()?;
            Ok(rows)
        })
    }

    fn unsettled(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT task_id FROM starts ORDER BY task_id")
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
            .map_err(|e| self.err(e))
    }

    fn release_start(&mut self, task_id: &str) -> Result<bool> {
        self.durable(|conn| {
            conn.execute("DELETE FROM starts WHERE task_id = ?1", [task_id])
                .map(|n| n > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TaskRunRecord;
    use crate::store::test_util::ts;
    use crate::store::{History, Starts};

    fn start<'a>(task_id: &'a str, run_id: &'a str) -> NewStart<'a> {
        NewStart {
            task_id,
            run_id,
            tool: "shell",
            input: crate::audit::Secrets::default().redact_json(serde_json::json!({"cmd": "x"})),
            file: "/h.md",
            line: 3,
            section: "one_time",
        }
    }

    #[test]
    fn an_outcome_settles_a_start_and_an_unsettled_one_is_held_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let now = ts("2026-05-01T10:00:00Z");
        s.record_start(&start("aaaaaaaaaaaa", "run1"), now).unwrap();
        s.record_start(&start("bbbbbbbbbbbb", "run1"), now).unwrap();
        s.record_task_run(&TaskRunRecord {
            run_id: "run1",
            task_id: "aaaaaaaaaaaa",
            tool: "shell",
            started_at: now,
            finished_at: now,
            succeeded: true,
            interrupted: false,
            cost_usd: None,
            approval_id: None,
            error: None,
            retried: false,
            retry_at: None,
            not_started: false,
        })
        .unwrap();
        assert_eq!(s.unsettled().unwrap(), ["bbbbbbbbbbbb"]);
        // The run that started it does not hold its own start.
        assert!(s.hold_unsettled_starts("run1").unwrap().is_empty());
        let held = s.hold_unsettled_starts("run2").unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].task_id, "bbbbbbbbbbbb");
        assert_eq!(held[0].input["cmd"], "x");
        // Reported once.
        assert!(s.hold_unsettled_starts("run3").unwrap().is_empty());
        assert_eq!(s.unsettled().unwrap(), ["bbbbbbbbbbbb"]);
        assert!(s.release_start("bbbbbbbbbbbb").unwrap());
        assert!(!s.release_start("bbbbbbbbbbbb").unwrap());
        assert!(s.unsettled().unwrap().is_empty());
    }
}
