//! Tasks an agent proposed through `heartbeat mcp` (docs/reference.md#proposal-mark): their
//! provenance, and whether a person has approved one run of them yet.
//!
//! Invariants:
//! - One row per task id; proposing the same task again keeps the first row (and its
//!   approval, if a person gave one).
//! - Only a person's approval (a `by` that is not `mcp:…`) sets `approved_by`, in the same
//!   transaction as the approval itself (`decide_many`).

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::{Result, Sqlite};
use crate::audit::format_ts;

/// `by` of everything decided or proposed through `heartbeat mcp`.
pub(super) const AGENT_PREFIX: &str = "mcp:";

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProposalRow {
    pub task_id: String,
    /// `mcp:<client name>`.
    pub proposed_by: String,
    pub file: String,
    pub proposed_at: String,
    pub approved_by: Option<String>,
}

/// Tasks an agent proposed, and by whom.
pub(crate) trait Proposals {
    /// Remember that an agent proposed this task (durably: the proposal's line is already in
    /// the file). False when it was proposed before.
    fn record_proposal(
        &mut self,
        task_id: &str,
        by: &str,
        file: &str,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    fn proposals(&self) -> Result<Vec<ProposalRow>>;

    /// How many tasks `by` proposed at or after `since` (each task once, however often it
    /// was proposed).
    fn proposals_since(&self, by: &str, since: DateTime<Utc>) -> Result<usize>;

    /// Who proposed this task, when an agent did.
    fn proposed_by(&self, task_id: &str) -> Result<Option<String>>;
}

impl Proposals for Sqlite {
    fn record_proposal(
        &mut self,
        task_id: &str,
        by: &str,
        file: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let ts = format_ts(now);
        self.durable(|conn| {
            conn.execute(
                "INSERT INTO proposals (task_id, proposed_by, file, proposed_at)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT(task_id) DO NOTHING",
                params![task_id, by, file, ts],
            )
            .map(|n| n == 1)
        })
    }

    fn proposals(&self) -> Result<Vec<ProposalRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT task_id, proposed_by, file, proposed_at, approved_by FROM proposals
                 ORDER BY proposed_at, task_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(ProposalRow {
                    task_id: r.get(0)?,
                    proposed_by: r.get(1)?,
                    file: r.get(2)?,
                    proposed_at: r.get(3)?,
                    approved_by: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    fn proposals_since(&self, by: &str, since: DateTime<Utc>) -> Result<usize> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM proposals WHERE proposed_by = ?1 AND proposed_at >= ?2",
                params![by, format_ts(since)],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(|e| self.err(e))
    }

    fn proposed_by(&self, task_id: &str) -> Result<Option<String>> {
        Ok(self
            .proposals()?
            .into_iter()
            .find(|p| p.task_id == task_id)
            .map(|p| p.proposed_by))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_util::{conn, ts};
    use crate::store::{Approvals, Proposals, Snapshots};
    use crate::store::{Decision, NewApproval};

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

    #[test]
    fn only_a_persons_approval_releases_a_proposal() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let now = ts("2026-05-01T10:00:00Z");
        assert!(
            s.record_proposal("aaaaaaaaaaaa", "mcp:agent", "/h.md", now)
                .unwrap()
        );
        assert!(
            !s.record_proposal("aaaaaaaaaaaa", "mcp:other", "/h.md", now)
                .unwrap()
        );
        let snap = |s: &Sqlite| {
            s.snapshot(now, std::time::Duration::from_secs(86400), now)
                .unwrap()
        };
        assert!(snap(&s).unapproved.contains("aaaaaaaaaaaa"));
        assert_eq!(snap(&s).proposed_by["aaaaaaaaaaaa"], "mcp:agent");

        let input = serde_json::json!({});
        let first = s
            .queue_approval(&approval("aaaaaaaaaaaa", &input), now)
            .unwrap()
            .unwrap();
        assert!(s.decide(first, &decision("mcp:agent"), now).unwrap());
        assert!(
            snap(&s).unapproved.contains("aaaaaaaaaaaa"),
            "an agent's approval"
        );

        assert!(s.claim(first, "run1").unwrap());
        crate::store::approvals::finish_approval(conn(&s), first, true, false, None, now).unwrap();
        let second = s
            .queue_approval(&approval("aaaaaaaaaaaa", &input), now)
            .unwrap()
            .unwrap();
        assert!(s.decide(second, &decision("cli:alice"), now).unwrap());
        assert!(!snap(&s).unapproved.contains("aaaaaaaaaaaa"));
        assert_eq!(
            s.proposed_by("aaaaaaaaaaaa").unwrap().as_deref(),
            Some("mcp:agent")
        );
        assert!(snap(&s).released.contains("aaaaaaaaaaaa"));
    }

    #[test]
    fn proposals_are_counted_by_client_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
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
}
