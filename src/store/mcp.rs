//! The tools each MCP server listed, cached for `run` (docs/reference.md#mcp-tools): refreshed when
//! the server's config changes (its fingerprint) or the listing is older than an hour.
//!
//! Invariants:
//! - One row per server; a newer listing replaces the older one.
//! - A listing that cannot be read back (a newer or damaged row) counts as absent: the
//!   server is listed again, never trusted half-read.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::{Result, Sqlite, parse_ts};
use crate::audit::format_ts;
use crate::mcp::ToolInfo;
use crate::text::RedactedJson;

/// One server's tools as last listed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CachedListing {
    /// [`crate::config::McpServerConfig::fingerprint`] of the config that listed them.
    pub fingerprint: String,
    pub listed_at: DateTime<Utc>,
    pub tools: Vec<ToolInfo>,
}

/// The tools each MCP server listed, one listing per server (a newer one replaces it).
pub(crate) trait McpCache {
    /// Every cached listing, by server name.
    fn mcp_listings(&self) -> Result<BTreeMap<String, CachedListing>>;

    /// Remember what a server listed: `tools` is its list of [`ToolInfo`], redacted (a server
    /// may put its environment in a description).
    fn save_mcp_listing(
        &mut self,
        server: &str,
        fingerprint: &str,
        listed_at: DateTime<Utc>,
        tools: &RedactedJson,
    ) -> Result<()>;
}

impl McpCache for Sqlite {
    fn mcp_listings(&self) -> Result<BTreeMap<String, CachedListing>> {
        let mut stmt = self
            .conn
            .prepare("SELECT server, fingerprint, listed_at, tools FROM mcp_listings")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut listings = BTreeMap::new();
        for row in rows {
            let (server, fingerprint, listed_at, tools) = row.map_err(|e| self.err(e))?;
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
        self.conn
            .execute(
                "INSERT INTO mcp_listings (server, fingerprint, listed_at, tools)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(server) DO UPDATE SET fingerprint = excluded.fingerprint,
                     listed_at = excluded.listed_at, tools = excluded.tools",
                params![server, fingerprint, format_ts(listed_at), tools.as_str()],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Secrets;
    use crate::store::McpCache;
    use crate::store::test_util::ts as at;
    use serde_json::json;

    #[test]
    fn a_listing_is_saved_replaced_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Sqlite::open(dir.path()).unwrap();
        assert!(store.mcp_listings().unwrap().is_empty());
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
        let save = |store: &mut Sqlite, l: &CachedListing| {
            let tools = Secrets::default().redact_json(serde_json::to_value(&l.tools).unwrap());
            store
                .save_mcp_listing("srv", &l.fingerprint, l.listed_at, &tools)
                .unwrap();
        };
        save(&mut store, &first);
        assert_eq!(store.mcp_listings().unwrap()["srv"], first);
        let second = CachedListing {
            fingerprint: "b".into(),
            listed_at: at("2026-11-23T11:00:00Z"),
            tools: vec![tool("echo"), tool("fail")],
        };
        save(&mut store, &second);
        let all = store.mcp_listings().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all["srv"], second);
    }
}
