//! [`McpCache`] on PostgreSQL: the tools each MCP server listed, one row per server, shared
//! by the nodes (whichever listed last replaces the row).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Pg;
use crate::audit::{format_ts, parse_ts};
use crate::store::mcp::CachedListing;
use crate::store::{McpCache, Result};
use crate::text::RedactedJson;

impl McpCache for Pg {
    /// A row that cannot be read back (its time or its tools) counts as absent, as on SQLite.
    fn mcp_listings(&self) -> Result<BTreeMap<String, CachedListing>> {
        let rows: Vec<(String, String, String, String)> = self.with(|c| {
            c.query(
                "SELECT server, fingerprint, listed_at, tools FROM mcp_listings",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
            .collect()
        })?;
        let mut listings = BTreeMap::new();
        for (server, fingerprint, listed_at, tools) in rows {
            if let (Some(listed_at), Ok(tools)) =
                (parse_ts(&listed_at), serde_json::from_str(&tools))
            {
                listings.insert(
                    server,
                    CachedListing {
                        fingerprint,
                        listed_at,
                        tools,
                    },
                );
            }
        }
        Ok(listings)
    }

    fn save_mcp_listing(
        &mut self,
        server: &str,
        fingerprint: &str,
        listed_at: DateTime<Utc>,
        tools: &RedactedJson,
    ) -> Result<()> {
        let tools = tools.to_text();
        let tools = tools.as_str();
        let listed_at = format_ts(listed_at);
        self.tx(|tx| {
            tx.execute(
                "INSERT INTO mcp_listings (server, fingerprint, listed_at, tools)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (server) DO UPDATE SET fingerprint = excluded.fingerprint,
                     listed_at = excluded.listed_at, tools = excluded.tools",
                &[&server, &fingerprint, &listed_at, &tools],
            )
            .map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_util;
    use super::*;
    use crate::audit::Secrets;
    use crate::mcp::ToolInfo;
    use crate::store::test_util::ts as at;

    fn save(s: &mut Pg, l: &CachedListing) {
        let tools = Secrets::default().redact_json(serde_json::to_value(&l.tools).unwrap());
        s.save_mcp_listing("srv", &l.fingerprint, l.listed_at, &tools)
            .unwrap();
    }

    #[test]
    fn a_listing_is_saved_replaced_and_read_back() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        assert!(s.mcp_listings().unwrap().is_empty());
        let tool = |name: &str| ToolInfo {
            name: name.into(),
            description: Some("d".into()),
            input_schema: json!({"type": "object"}),
            read_only: true,
            idempotent: false,
        };
        let first = CachedListing {
            fingerprint: "a".into(),
            listed_at: at("2026-11-23T10:00:00Z"),
            tools: vec![tool("echo")],
        };
        save(&mut s, &first);
        assert_eq!(s.mcp_listings().unwrap()["srv"], first);
        let second = CachedListing {
            fingerprint: "b".into(),
            listed_at: at("2026-11-23T11:00:00Z"),
            tools: vec![tool("echo"), tool("fail")],
        };
        save(&mut s, &second);
        let all = s.mcp_listings().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all["srv"], second);
    }

    #[test]
    fn a_listing_that_cannot_be_read_back_counts_as_absent() {
        let Some(mut s) = test_util::store("n1") else {
            return;
        };
        let listing = CachedListing {
            fingerprint: "a".into(),
            listed_at: at("2026-11-23T10:00:00Z"),
            tools: vec![],
        };
        save(&mut s, &listing);
        s.with(|c| {
            c.execute(
                "INSERT INTO mcp_listings (server, fingerprint, listed_at, tools)
                 VALUES ('torn', 'a', '2026-11-23T10:00:00.000Z', '[{\"name\":'),
                        ('undated', 'a', 'yesterday', '[]')",
                &[],
            )
        })
        .unwrap();
        let all = s.mcp_listings().unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["srv"]);
    }
}
