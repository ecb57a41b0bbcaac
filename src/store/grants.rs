//! *Always* grants: a task id whose exact task (tool + input) runs without asking.
//!
//! Invariants:
//! - At most one grant per task id (the primary key); a newer grant replaces an older one.
//! - Grants are written with `synchronous = FULL`: a grant a person gave is never lost.

use rusqlite::{TransactionBehavior, params};

use super::{Result, Sqlite};
use crate::text::{Redacted, RedactedJson};

/// An *always* grant: this exact task (tool + input) runs without asking.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GrantRow {
    pub task_id: String,
    pub tool: String,
    pub input: serde_json::Value,
    pub file: String,
    pub text: String,
    pub created_at: String,
    pub created_by: String,
    pub approval_id: Option<i64>,
    /// The task's line when it was granted, from its approval (None once that is pruned);
    /// not a column of its own.
    pub line: Option<i64>,
}

/// An *always* grant to record: its input and text redacted, as every row is.
#[derive(Clone, Debug)]
pub(crate) struct NewGrant {
    pub task_id: String,
    pub tool: String,
    pub input: RedactedJson,
    pub file: String,
    pub text: Redacted,
    pub created_at: String,
    pub created_by: String,
    pub approval_id: Option<i64>,
}

/// Standing approvals (`heartbeat approve --always`), kept per task id.
pub(crate) trait Grants {
    /// Record an *always* grant for a task id (replacing an older one).
    fn add_grant(&mut self, g: &NewGrant) -> Result<()>;

    /// Record several grants in one durable transaction (`approve --all --always`).
    fn add_grants(&mut self, grants: &[NewGrant]) -> Result<()>;

    fn grants(&self) -> Result<Vec<GrantRow>>;

    /// Remove a grant; false when there was none.
    fn revoke(&mut self, task_id: &str) -> Result<bool>;
}

impl Grants for Sqlite {
    fn add_grant(&mut self, g: &NewGrant) -> Result<()> {
        self.add_grants(std::slice::from_ref(g))
    }

    fn add_grants(&mut self, grants: &[NewGrant]) -> Result<()> {
        if grants.is_empty() {
            return Ok(());
        }
        self.durable(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut st = tx.prepare(
                    "INSERT INTO grants (task_id, tool, input, file, text, created_at, created_by,
                        approval_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT(task_id) DO UPDATE SET tool = excluded.tool,
                        input = excluded.input, file = excluded.file, text = excluded.text,
                        created_at = excluded.created_at, created_by = excluded.created_by,
                        approval_id = excluded.approval_id",
                )?;
                for g in grants {
                    st.execute(params![
                        g.task_id,
                        g.tool,
                        g.input.to_text().as_str(),
                        g.file,
                        g.text.as_str(),
                        g.created_at,
                        g.created_by,
                        g.approval_id
                    ])?;
                }
            }
            tx.commit()
        })
    }

    fn grants(&self) -> Result<Vec<GrantRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT g.task_id, g.tool, g.input, g.file, g.text, g.created_at, g.created_by,
                    g.approval_id, a.line
                 FROM grants g LEFT JOIN approvals a ON a.id = g.approval_id
                 ORDER BY g.created_at, g.task_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let input: String = r.get(2)?;
                Ok(GrantRow {
                    task_id: r.get(0)?,
                    tool: r.get(1)?,
                    input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
                    file: r.get(3)?,
                    text: r.get(4)?,
                    created_at: r.get(5)?,
                    created_by: r.get(6)?,
                    approval_id: r.get(7)?,
                    line: r.get(8)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn revoke(&mut self, task_id: &str) -> Result<bool> {
        self.durable(|conn| conn.execute("DELETE FROM grants WHERE task_id = ?1", [task_id]))
            .map(|n| n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;
    use crate::audit::Secrets;
    use crate::store::{Grants, Snapshots};
    use serde_json::json;
    use std::time::Duration;

    /// The row a grant becomes (no approval row to give it a line).
    fn row(g: &NewGrant) -> GrantRow {
        GrantRow {
            task_id: g.task_id.clone(),
            tool: g.tool.clone(),
            input: g.input.as_value().clone(),
            file: g.file.clone(),
            text: g.text.as_str().to_string(),
            created_at: g.created_at.clone(),
            created_by: g.created_by.clone(),
            approval_id: g.approval_id,
            line: None,
        }
    }

    #[test]
    fn many_grants_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let grant = |task: &str, by: &str| NewGrant {
            task_id: task.into(),
            tool: "log".into(),
            input: Secrets::default().redact_json(json!({"text": task})),
            file: "/x".into(),
            text: "@log {}".into(),
            created_at: "2026-01-01T10:00:00.000Z".into(),
            created_by: by.into(),
            approval_id: Some(1),
        };
        s.add_grant(&grant("b", "cli:ann")).unwrap();
        s.add_grants(&[]).unwrap();
        let all = [
            grant("a", "cli:bob"),
            grant("b", "cli:bob"),
            grant("c", "cli:bob"),
        ];
        s.add_grants(&all).unwrap();
        assert_eq!(s.grants().unwrap(), all.iter().map(row).collect::<Vec<_>>());
    }

    #[test]
    fn grants_are_kept_per_task_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        let g = NewGrant {
            task_id: "t".into(),
            tool: "shell".into(),
            input: Secrets::default().redact_json(json!({"cmd": "true"})),
            file: "/x".into(),
            text: "@shell {}".into(),
            created_at: "2026-01-01T10:00:00.000Z".into(),
            created_by: "cli:ann".into(),
            approval_id: Some(1),
        };
        s.add_grant(&g).unwrap();
        s.add_grant(&g).unwrap();
        assert_eq!(s.grants().unwrap(), vec![row(&g)]);
        let snap = s
            .snapshot(
                ts("2026-01-01T10:00:00Z"),
                Duration::from_secs(60),
                ts("2000-01-01T00:00:00Z"),
            )
            .unwrap();
        assert!(snap.granted.contains("t"));
        assert!(s.revoke("t").unwrap());
        assert!(!s.revoke("t").unwrap());
        assert!(s.grants().unwrap().is_empty());
    }
}
