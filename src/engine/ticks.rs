//! Ticking one-time tasks that succeeded (docs/reference.md#ticking): collected while the
//! run goes, written at its end once per file (re-read under its lock, the marker checked
//! before the byte is written), and each mark audited: `task_marked_done`, or
//! `task_mark_skipped` with why.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::ledger::Ledger;
use crate::audit::Event;
use crate::audit::event::Mark;
use crate::error::Result;
use crate::markdown::tick::{self, TickOutcome, TickResult};
use crate::markdown::{FileError, SourceFile};
use crate::model::Task;
use crate::text::Redacted;

/// File → one-time task ids to tick, in the order they succeeded.
#[derive(Debug, Default)]
pub(crate) struct Ticks {
    files: BTreeMap<Arc<Path>, Vec<String>>,
    /// Every (file, id) in `files`: whether a task is already wanted is one look-up, not a
    /// scan of its file's list (a run of 10,000 one-time tasks asks 10,000 times).
    wanted: HashSet<(Arc<Path>, String)>,
}

impl Ticks {
    /// Tick this task at the end of the run (once, however often it is asked for).
    pub(crate) fn want(&mut self, task: &Task) {
        if self.wanted.insert((task.file.clone(), task.id.clone())) {
            let ids = self.files.entry(task.file.clone()).or_default();
            ids.push(task.id.clone());
        }
    }

    /// Write the ticks, each file once, and audit each mark. `known`: the files as read at
    /// the start of the run, which need not be parsed again if unchanged. Returns, for the
    /// report, why a file could not be ticked.
    pub(crate) fn write(
        self,
        ledger: &mut Ledger,
        run_id: &str,
        known: &[(&SourceFile, &[Task])],
    ) -> Result<Vec<Redacted>> {
        let mut errors = Vec::new();
        for (file, ids) in self.files {
            let seen = known.iter().find(|(src, _)| src.path == *file).copied();
            if let Some(error) = tick_one(ledger, run_id, &file, &ids, seen)? {
                errors.push(error);
            }
        }
        Ok(errors)
    }
}

fn tick_one(
    ledger: &mut Ledger,
    run_id: &str,
    file: &Path,
    ids: &[String],
    known: Option<(&SourceFile, &[Task])>,
) -> Result<Option<Redacted>> {
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let results = match tick::tick_file(file, &refs, known) {
        // The file was removed during the run: every task in it is gone.
        Err(FileError::Missing(_)) => Ok(ids
            .iter()
            .map(|id| TickResult {
                task_id: id.clone(),
                outcome: TickOutcome::Gone,
                line: 0,
            })
            .collect()),
        other => other,
    };
    match results {
        Ok(results) => {
            for r in results {
                let (marked, reason): (bool, Option<Redacted>) = match r.outcome {
                    TickOutcome::Marked => (true, None),
                    TickOutcome::AlreadyDone => (false, Some("already_done".into())),
                    TickOutcome::Gone => (false, Some("gone".into())),
                };
                let mark = Mark {
                    run_id,
                    task_id: &r.task_id,
                    file,
                    line: Some(r.line),
                    reason: reason.as_ref(),
                };
                ledger.record(&if marked {
                    Event::TaskMarkedDone(mark)
                } else {
                    Event::TaskMarkSkipped(mark)
                })?;
            }
            Ok(None)
        }
        Err(e) => {
            let secrets = ledger.secrets().clone();
            let reason = secrets.redact(&format!("error: {e}"));
            for id in ids {
                ledger.record(&Event::TaskMarkSkipped(Mark {
                    run_id,
                    task_id: id,
                    file,
                    line: None,
                    reason: Some(&reason),
                }))?;
            }
            Ok(Some(
                secrets.redact(&format!("cannot tick done tasks: {e}")),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ledger::tests::{ledger, lines};

    #[test]
    fn ticks_each_task_once_and_audits_each_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = ledger(dir.path());
        let path = dir.path().join("HEARTBEAT.md");
        let md = "## One-time\n- [ ] @log {\"text\": \"a\"}\n- [ ] @log {\"text\": \"b\"}\n";
        std::fs::write(&path, md).unwrap();
        let tasks = crate::markdown::parse(&path, &path, md).tasks;
        let gone = crate::markdown::parse(&dir.path().join("gone.md"), &path, md).tasks;
        let mut ticks = Ticks::default();
        ticks.want(&tasks[1]);
        ticks.want(&tasks[1]);
        ticks.want(&gone[0]);
        let errors = ticks.write(&mut ledger, "run1", &[]).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            md.replace(
                "- [ ] @log {\"text\": \"b\"}",
                "- [x] @log {\"text\": \"b\"}"
            )
        );
        let said = lines(dir.path());
        let events: Vec<(&str, &str)> = said
            .iter()
            .map(|l| (l["event"].as_str().unwrap(), l["task_id"].as_str().unwrap()))
            .collect();
        // Files in path order: HEARTBEAT.md before gone.md.
        assert_eq!(
            events,
            [
                ("task_marked_done", tasks[1].id.as_str()),
                ("task_mark_skipped", gone[0].id.as_str())
            ]
        );
        assert_eq!(said[0]["line"], 3);
        assert_eq!(said[1]["reason"], "gone");
    }
}
