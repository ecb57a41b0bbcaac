//! [`Proposals`] in PostgreSQL: tasks agents proposed, shared by the nodes of a fleet. The
//! invariants of `store/proposals.rs` hold as they are: one row per task id (of nodes
//! recording the same proposal at once, exactly one gets true), and only a person's
//! approval releases it, in the approval's own transaction (`pg/approvals.rs`
//! `decide_many`).

use chrono::{DateTime, Utc};

use super::Pg;
use crate::audit::format_ts;
use crate::store::proposals::ProposalRow;
use crate::store::{Proposals, Result};

impl Proposals for Pg {
    fn record_proposal(
        &mut self,
        task_id: &str,
        by: &str,
        file: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let ts = format_ts(now);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO proposals (task_id, proposed_by, file, proposed_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (task_id) DO NOTHING",
                &[&task_id, &by, &file, &ts],
            )
            .map(|n| n == 1)
        })
    }

    fn proposals(&self) -> Result<Vec<ProposalRow>> {
        self.with(|c| {
            c.query(
                "SELECT task_id, proposed_by, file, proposed_at, approved_by FROM proposals
                 ORDER BY proposed_at, task_id",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(ProposalRow {
                    task_id: r.try_get(0)?,
                    proposed_by: r.try_get(1)?,
                    file: r.try_get(2)?,
                    proposed_at: r.try_get(3)?,
                    approved_by: r.try_get(4)?,
                })
            })
            .collect()
        })
    }

    fn proposals_since(&self, by: &str, since: DateTime<Utc>) -> Result<usize> {
        let since = format_ts(since);
        self.with(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM proposals WHERE proposed_by = $1 AND proposed_at >= $2",
                &[&by, &since],
            )?
            .try_get::<_, i64>(0)
        })
        .map(|n| n as usize)
    }

    fn proposed_by(&self, task_id: &str) -> Result<Option<String>> {
        self.with(|c| {
            c.query_opt(
                "SELECT proposed_by FROM proposals WHERE task_id = $1",
                &[&task_id],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util;
    use super::*;
    use crate::store::test_util::ts;
    use crate::store::{Approvals, Decision, NewApproval};

    fn approval<'a>(task_id: &'a str, input: &'a serde_json::Value) -> NewApproval<'a> {
        NewApproval {
            task_id,
            file: "/h.md",
            line: 2,
            section: "recurring",
            tool: "log",
            input: crate::audit::Secrets::default().redact_json(input.clone()),
            text: "@log {}".into(),
            config: None,
        }
    }

    fn decision(by: &str) -> Decision {
        Decision {
            approve: true,
            by: by.into(),
            reason: None,
            always: false,
        }
    }

    fn approved_by(s: &Pg, task_id: &str) -> Option<String> {
        s.proposals()
            .unwrap()
            .into_iter()
            .find(|p| p.task_id == task_id)
            .unwrap()
            .approved_by
    }

    #[test]
    fn only_a_persons_approval_releases_a_proposal() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let now = ts("2026-05-01T10:00:00Z");
        let task = "aaaaaaaaaaaa";
        assert!(s.record_proposal(task, "mcp:agent", "/h.md", now).unwrap());
        assert!(!s.record_proposal(task, "mcp:other", "/h.md", now).unwrap());
        assert_eq!(
            s.proposals().unwrap(),
            [ProposalRow {
                task_id: task.into(),
                proposed_by: "mcp:agent".into(),
                file: "/h.md".into(),
                proposed_at: "2026-05-01T10:00:00.000Z".into(),
                approved_by: None,
            }]
        );

        let input = serde_json::json!({});
        let first = s
            .queue_approval(&approval(task, &input), now)
            .unwrap()
            .unwrap();
        assert!(s.decide(first, &decision("mcp:agent"), now).unwrap());
        assert_eq!(approved_by(&s, task), None, "an agent's approval");

        assert!(s.claim(first, "run1").unwrap());
        s.with(|c| c.execute("UPDATE approvals SET state = 'succeeded'", &[]))
            .unwrap();
        let second = s
            .queue_approval(&approval(task, &input), now)
            .unwrap()
            .unwrap();
        // A denial is not an approval either.
        let mut deny = decision("cli:bob");
        deny.approve = false;
        assert!(s.decide(second, &deny, now).unwrap());
        assert_eq!(approved_by(&s, task), None, "a denial");
        let third = s
            .queue_approval(&approval(task, &input), now)
            .unwrap()
            .unwrap();
        assert!(s.decide(third, &decision("cli:alice"), now).unwrap());
        assert_eq!(approved_by(&s, task).as_deref(), Some("cli:alice"));
        assert_eq!(s.proposed_by(task).unwrap().as_deref(), Some("mcp:agent"));
        assert_eq!(s.proposed_by("bbbbbbbbbbbb").unwrap(), None);
    }

    #[test]
    fn proposals_are_counted_by_client_and_time() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let t = |h: u32| ts(&format!("2026-05-01T{h:02}:00:00Z"));
        for (id, by, h) in [("a", "mcp:x", 1), ("b", "mcp:x", 5), ("c", "mcp:y", 5)] {
            s.record_proposal(id, by, "/h.md", t(h)).unwrap();
        }
        // The same task again is not another proposal.
        s.record_proposal("b", "mcp:x", "/h.md", t(6)).unwrap();
        assert_eq!(s.proposals_since("mcp:x", t(0)).unwrap(), 2);
        assert_eq!(s.proposals_since("mcp:x", t(2)).unwrap(), 1);
        assert_eq!(s.proposals_since("mcp:z", t(0)).unwrap(), 0);
    }

    #[test]
    fn nodes_proposing_the_same_task_at_once_record_it_once() {
        let Some(url) = test_util::url() else { return };
        let now = ts("2026-05-01T10:00:00Z");
        let start = std::sync::Barrier::new(2);
        let url = url.as_str();
        let recorded: Vec<usize> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let start = &start;
                    scope.spawn(move || {
                        let mut s = Pg::connect(url, &format!("n{i}")).unwrap();
                        start.wait();
                        (0..30)
                            .filter(|t| {
                                let by = format!("mcp:n{i}");
                                s.record_proposal(&format!("t{t}"), &by, "/h.md", now)
                                    .unwrap()
                            })
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(recorded.iter().sum::<usize>(), 30);
        let s = Pg::connect(url, "n9").unwrap();
        assert_eq!(s.proposals().unwrap().len(), 30);
    }
}
