//! [`Starts`] in PostgreSQL: start records of one-time tasks, shared by the nodes of a fleet.
//!
//! Invariants (beside those of `store/starts.rs`):
//! - A start is held only when the run that recorded it holds no run lock any more
//!   ([`RUN_IS_GONE`]): on one host every unsettled start of another run is a dead run's; in
//!   a fleet another node's run may still be going, and its starts stay its own to settle.
//! - Each start is held, and returned, once: of nodes holding at once, exactly one changes
//!   its row (`WHERE held = 0`, serializable).

use chrono::{DateTime, Utc};

use super::{Pg, RUN_IS_GONE};
use crate::audit::format_ts;
use crate::store::starts::StartRow;
use crate::store::{NewStart, Result, Starts};

impl Starts for Pg {
    fn record_start(&mut self, row: &NewStart, now: DateTime<Utc>) -> Result<()> {
        let ts = format_ts(now);
        let input = row.input.to_text();
        let input = input.as_str();
        crate::fault::point("record_start");
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO starts (task_id, run_id, started_at, tool, input, file, line,
                    section, held) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0)
                 ON CONFLICT (task_id) DO UPDATE SET run_id = EXCLUDED.run_id,
                    started_at = EXCLUDED.started_at, tool = EXCLUDED.tool,
                    input = EXCLUDED.input, file = EXCLUDED.file, line = EXCLUDED.line,
                    section = EXCLUDED.section, held = 0",
                &[
                    &row.task_id,
                    &row.run_id,
                    &ts,
                    &row.tool,
                    &input,
                    &row.file,
                    &row.line,
                    &row.section,
                ],
            )
            .map(drop)
        })
    }

    /// Of the other runs' unsettled starts, only those whose run is gone (its node ended or
    /// lost its connection). A run lock this same connection holds does not stop its own
    /// test, so `run_id` must be the one run of this connection that may be going.
    fn hold_unsettled_starts(&mut self, run_id: &str) -> Result<Vec<StartRow>> {
        self.tx(|tx| {
            let candidates = tx.query(
                "SELECT task_id, run_id, started_at, tool, input, file, line, section
                 FROM starts WHERE held = 0 AND run_id != $1 ORDER BY started_at, task_id",
                &[&run_id],
            )?;
            let is_gone = tx.prepare(&format!("SELECT {RUN_IS_GONE}"))?;
            let hold = tx.prepare("UPDATE starts SET held = 1 WHERE task_id = $1 AND held = 0")?;
            let mut held = Vec::new();
            for r in &candidates {
                let start = StartRow {
                    task_id: r.try_get(0)?,
                    run_id: r.try_get(1)?,
                    started_at: r.try_get(2)?,
                    tool: r.try_get(3)?,
                    input: serde_json::from_str(r.try_get(4)?).unwrap_or_default(),
                    file: r.try_get(5)?,
                    line: r.try_get(6)?,
                    section: r.try_get(7)?,
                };
                let gone: bool = tx.query_one(&is_gone, &[&start.run_id])?.try_get(0)?;
                if gone && tx.execute(&hold, &[&start.task_id])? == 1 {
                    held.push(start);
                }
            }
            Ok(held)
        })
    }

    fn unsettled(&self) -> Result<Vec<String>> {
        self.with(|c| {
            c.query("SELECT task_id FROM starts ORDER BY task_id", &[])?
                .iter()
                .map(|r| r.try_get(0))
                .collect()
        })
    }

    fn release_start(&mut self, task_id: &str) -> Result<bool> {
        self.tx(|tx| {
            tx.execute("DELETE FROM starts WHERE task_id = $1", &[&task_id])
                .map(|n| n > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util;
    use super::*;
    use crate::store::test_util::ts;

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

    fn run_lock(s: &Pg, run_id: &str, take: bool) {
        let sql = if take {
            "SELECT pg_advisory_lock(hashtextextended($1, 0))::text"
        } else {
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))::text"
        };
        s.with(|c| c.execute(sql, &[&run_id])).unwrap();
    }

    fn held_in(s: &Pg) -> Vec<String> {
        s.with(|c| {
            c.query(
                "SELECT task_id FROM starts WHERE held = 1 ORDER BY task_id",
                &[],
            )
        })
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    }

    #[test]
    fn an_unsettled_start_is_held_once_until_released() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let now = ts("2026-05-01T10:00:00Z");
        s.record_start(&start("aaaaaaaaaaaa", "run1"), now).unwrap();
        s.record_start(&start("bbbbbbbbbbbb", "run1"), now).unwrap();
        // Settled (its outcome's history row deletes it, as here).
        s.with(|c| c.execute("DELETE FROM starts WHERE task_id = 'aaaaaaaaaaaa'", &[]))
            .unwrap();
        assert_eq!(s.unsettled().unwrap(), ["bbbbbbbbbbbb"]);
        // The run that started it does not hold its own start.
        assert!(s.hold_unsettled_starts("run1").unwrap().is_empty());
        let reported = s.hold_unsettled_starts("run2").unwrap();
        assert_eq!(
            reported,
            [StartRow {
                task_id: "bbbbbbbbbbbb".into(),
                run_id: "run1".into(),
                started_at: "2026-05-01T10:00:00.000Z".into(),
                tool: "shell".into(),
                input: serde_json::json!({"cmd": "x"}),
                file: "/h.md".into(),
                line: 3,
                section: "one_time".into(),
            }]
        );
        // Reported once.
        assert!(s.hold_unsettled_starts("run3").unwrap().is_empty());
        assert_eq!(s.unsettled().unwrap(), ["bbbbbbbbbbbb"]);
        assert!(s.release_start("bbbbbbbbbbbb").unwrap());
        assert!(!s.release_start("bbbbbbbbbbbb").unwrap());
        assert!(s.unsettled().unwrap().is_empty());
        // Started again after a release: a fresh start, not held.
        s.record_start(&start("bbbbbbbbbbbb", "run4"), now).unwrap();
        s.with(|c| c.execute("UPDATE starts SET held = 1", &[]))
            .unwrap();
        s.record_start(&start("bbbbbbbbbbbb", "run5"), now).unwrap();
        assert!(held_in(&s).is_empty());
    }

    #[test]
    fn a_start_of_a_run_still_going_on_another_node_is_not_held() {
        let Some(url) = test_util::url() else { return };
        let mut s = Pg::connect(&url, "n1").unwrap();
        let other = Pg::connect(&url, "n2").unwrap();
        let now = ts("2026-05-01T10:00:00Z");
        run_lock(&other, "r-live", true);
        s.record_start(&start("aaaaaaaaaaaa", "r-live"), now)
            .unwrap();
        s.record_start(&start("bbbbbbbbbbbb", "r-dead"), now)
            .unwrap();
        let held_now: Vec<String> = s
            .hold_unsettled_starts("r-mine")
            .unwrap()
            .into_iter()
            .map(|r| r.task_id)
            .collect();
        assert_eq!(held_now, ["bbbbbbbbbbbb"]);
        assert_eq!(held_in(&s), ["bbbbbbbbbbbb"]);
        // Both unsettled: the live run's task does not start again meanwhile either.
        assert_eq!(s.unsettled().unwrap(), ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]);
        assert!(s.hold_unsettled_starts("r-mine").unwrap().is_empty());
        // The live run ends without settling it: now it is held, once.
        run_lock(&other, "r-live", false);
        let held_now = s.hold_unsettled_starts("r-mine").unwrap();
        assert_eq!(held_now.len(), 1);
        assert_eq!(held_now[0].task_id, "aaaaaaaaaaaa");
        assert!(s.hold_unsettled_starts("r-mine").unwrap().is_empty());
    }

    #[test]
    fn nodes_holding_at_once_hold_and_report_each_start_once() {
        let Some(url) = test_util::url() else { return };
        let mut s = Pg::connect(&url, "n0").unwrap();
        let now = ts("2026-05-01T10:00:00Z");
        let tasks: Vec<String> = (0..30).map(|i| format!("t{i:02}")).collect();
        for task in &tasks {
            s.record_start(&start(task, "r-dead"), now).unwrap();
        }
        let start = std::sync::Barrier::new(2);
        let url = url.as_str();
        let reported: Vec<Vec<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let start = &start;
                    scope.spawn(move || {
                        let mut s = Pg::connect(url, &format!("n{i}")).unwrap();
                        start.wait();
                        let run = format!("r{i}");
                        s.hold_unsettled_starts(&run)
                            .unwrap()
                            .into_iter()
                            .map(|r| r.task_id)
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = reported.concat();
        all.sort();
        assert_eq!(all, tasks, "each held start reported exactly once");
        assert_eq!(held_in(&s), tasks);
    }
}
