//! [`Grants`] in PostgreSQL: *always* grants, shared by the nodes of a fleet. The
//! invariants of `store/grants.rs` hold as they are: one grant per task id (a newer one
//! replaces it, `ON CONFLICT … DO UPDATE`), committed before the method returns.

use super::Pg;
use crate::store::{GrantRow, Grants, NewGrant, Result};

impl Grants for Pg {
    fn add_grant(&mut self, g: &NewGrant) -> Result<()> {
        self.add_grants(std::slice::from_ref(g))
    }

    fn add_grants(&mut self, grants: &[NewGrant]) -> Result<()> {
        if grants.is_empty() {
            return Ok(());
        }
        let inputs: Vec<String> = grants
            .iter()
            .map(|g| g.input.to_text().as_str().to_string())
            .collect();
        self.tx(|tx| {
            let insert = tx.prepare(
                "INSERT INTO grants (task_id, tool, input, file, text, created_at, created_by,
                    approval_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (task_id) DO UPDATE SET tool = EXCLUDED.tool,
                    input = EXCLUDED.input, file = EXCLUDED.file, text = EXCLUDED.text,
                    created_at = EXCLUDED.created_at, created_by = EXCLUDED.created_by,
                    approval_id = EXCLUDED.approval_id",
            )?;
            for (g, input) in grants.iter().zip(&inputs) {
                tx.execute(
                    &insert,
                    &[
                        &g.task_id,
                        &g.tool,
                        input,
                        &g.file,
                        &g.text.as_str(),
                        &g.created_at,
                        &g.created_by,
                        &g.approval_id,
                    ],
                )?;
            }
            Ok(())
        })
    }

    fn grants(&self) -> Result<Vec<GrantRow>> {
        self.with(|c| {
            c.query(
                "SELECT g.task_id, g.tool, g.input, g.file, g.text, g.created_at, g.created_by,
                    g.approval_id, a.line
                 FROM grants g LEFT JOIN approvals a ON a.id = g.approval_id
                 ORDER BY g.created_at, g.task_id",
                &[],
            )?
            .iter()
            .map(|r| {
                let input: String = r.try_get(2)?;
                Ok(GrantRow {
                    task_id: r.try_get(0)?,
                    tool: r.try_get(1)?,
                    input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
                    file: r.try_get(3)?,
                    text: r.try_get(4)?,
                    created_at: r.try_get(5)?,
                    created_by: r.try_get(6)?,
                    approval_id: r.try_get(7)?,
                    line: r.try_get(8)?,
                })
            })
            .collect()
        })
    }

    fn revoke(&mut self, task_id: &str) -> Result<bool> {
        self.tx(|tx| tx.execute("DELETE FROM grants WHERE task_id = $1", &[&task_id]))
            .map(|n| n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util;
    use super::*;
    use crate::audit::Secrets;
    use serde_json::json;

    fn grant(task: &str, by: &str, approval_id: Option<i64>) -> NewGrant {
        NewGrant {
            task_id: task.into(),
            tool: "log".into(),
            input: Secrets::default().redact_json(json!({"text": task})),
            file: "/x".into(),
            text: "@log {}".into(),
            created_at: "2026-01-01T10:00:00.000Z".into(),
            created_by: by.into(),
            approval_id,
        }
    }

    /// The row a grant becomes, its line that of its approval.
    fn row(g: &NewGrant, line: Option<i64>) -> GrantRow {
        GrantRow {
            task_id: g.task_id.clone(),
            tool: g.tool.clone(),
            input: g.input.as_value().clone(),
            file: g.file.clone(),
            text: g.text.as_str().to_string(),
            created_at: g.created_at.clone(),
            created_by: g.created_by.clone(),
            approval_id: g.approval_id,
            line,
        }
    }

    #[test]
    fn many_grants_at_once_each_replacing_an_older_one() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        s.add_grant(&grant("b", "cli:ann", Some(1))).unwrap();
        s.add_grants(&[]).unwrap();
        let all = [
            grant("a", "cli:bob", Some(1)),
            grant("b", "cli:bob", Some(1)),
            grant("c", "cli:bob", None),
        ];
        s.add_grants(&all).unwrap();
        assert_eq!(
            s.grants().unwrap(),
            all.iter().map(|g| row(g, None)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn grants_are_kept_per_task_id_with_their_approvals_line() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let approval: i64 = s
            .with(|c| {
                c.query_one(
                    "INSERT INTO approvals (task_id, state, file, line, section, tool, input,
                        text, created_at)
                     VALUES ('t', 'approved', '/x', 7, 'recurring', 'log', '{}', 't', 'x')
                     RETURNING id",
                    &[],
                )
            })
            .unwrap()
            .get(0);
        let g = grant("t", "cli:ann", Some(approval));
        s.add_grant(&g).unwrap();
        s.add_grant(&g).unwrap();
        assert_eq!(s.grants().unwrap(), vec![row(&g, Some(7))]);
        assert!(s.revoke("t").unwrap());
        assert!(!s.revoke("t").unwrap());
        assert!(s.grants().unwrap().is_empty());
    }
}
