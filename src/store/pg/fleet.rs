//! The fleet's own rows in PostgreSQL (docs/fleet.md): this node's registration, claims,
//! leases, and what `status` and `doctor` show of the others.
//!
//! Invariants:
//! - A claim is one statement that only one node can win: an insert of a unique
//!   `(task_id, slot)` key, or a compare-and-set of the task's last attempt.
//! - Lease times come from the database's clock only (`now()`), never a node's; a holder
//!   renews it at each use and considers it lost a tenth of its length before it ends by
//!   its own monotonic clock, so that two holders never overlap when clocks drift.
//! - A node name belongs to the key in that node's state dir (`node.key`): another key
//!   takes it only when the holder was not seen for 24 hours, or after `fleet forget`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::Pg;
use crate::audit::format_ts;
use crate::store::{Claim, DbError, Fleet, LeaseRow, NodeRow, RecentRun, Result, StoreError};

/// The file in the state dir whose key owns this node's name.
pub(crate) const NODE_KEY_FILE: &str = "node.key";

/// How far a node's clock may be from the database's before it warns.
pub(crate) const MAX_SKEW: Duration = Duration::from_secs(30);

/// Who this node is, as it registers.
pub(crate) struct Registration<'a> {
    pub node: &'a str,
    pub state_dir: &'a Path,
    pub lease: Duration,
    /// Each HEARTBEAT file (relative to the config's directory) and its content's SHA-256.
    pub files: BTreeMap<String, String>,
    pub daemon: bool,
}

/// Set by the daemon: its node registers as running one, so that `doctor` expects the
/// singleton leases to be held.
static DAEMON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Mark this process as a daemon, for its node's registration.
pub(crate) fn running_as_daemon() {
    DAEMON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// This node's connection to the fleet `cfg` names, registered, with a warning when its
/// clock is far from the database's.
pub(crate) fn open_fleet(cfg: &crate::config::Config) -> Result<Pg> {
    let fleet = cfg.fleet.as_ref().expect("a fleet config");
    // Checked set when the config loaded; read here as a secret.
    let url = crate::redact::take_env(&fleet.url_env).unwrap_or_default();
    let me = Registration {
        node: &fleet.node,
        state_dir: &cfg.state_dir,
        lease: fleet.lease,
        files: file_hashes(&cfg.files),
        daemon: DAEMON.load(std::sync::atomic::Ordering::Relaxed),
    };
    std::fs::create_dir_all(&cfg.state_dir).map_err(|source| StoreError::Io {
        path: cfg.state_dir.clone(),
        source,
    })?;
    let pg = Pg::open(&url, &me)?;
    // Asked once per process (a daemon opens the store at every tick).
    static SKEW_ASKED: std::sync::Once = std::sync::Once::new();
    let mut skew = None;
    SKEW_ASKED.call_once(|| skew = pg.clock_skew().ok());
    if let Some(skew) = skew
        && skew > MAX_SKEW
    {
        let warning = format!(
            "heartbeat: warning: this machine's clock is {}s off {}'s; leases and times in \
             the fleet assume they agree within {}s (is NTP running?)",
            skew.as_secs(),
            pg.name(),
            MAX_SKEW.as_secs()
        );
        // Said here, below the engine (the store may not use `error`), redacted as always.
        eprintln!("{}", crate::redact::Secrets::taken().redact(&warning));
    }
    Ok(pg)
}

/// Each file as its task ids name it, and its content's SHA-256 (unreadable files left out).
fn file_hashes(files: &[std::path::PathBuf]) -> BTreeMap<String, String> {
    use sha2::Digest;
    files
        .iter()
        .filter_map(|f| {
            let bytes = std::fs::read(f).ok()?;
            let canonical = std::fs::canonicalize(f).ok()?;
            let hash: String = sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            Some((crate::markdown::id_path(&canonical), hash))
        })
        .collect()
}

impl Pg {
    /// Connect as a node of the fleet: migrate, then register the node's name under the key
    /// in its state dir. A name another node's key holds is refused ([`StoreError::NodeTaken`]).
    pub(crate) fn open(url: &str, me: &Registration) -> Result<Pg> {
        let key = crate::sys::key::private_key(me.state_dir, NODE_KEY_FILE, "the node key")
            .map_err(|why| StoreError::Io {
                path: me.state_dir.join(NODE_KEY_FILE),
                source: std::io::Error::other(why),
            })?;
        let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let mut pg = Pg::connect(url, me.node)?;
        pg.lease = me.lease;
        pg.register(&key, me)?;
        // Read once per process: it never changes once created.
        if crate::sys::key::fleet_channel_key().is_none() {
            crate::sys::key::use_fleet_channel_key(pg.channel_key()?);
        }
        Ok(pg)
    }

    /// The channel key the fleet's nodes share (ntfy's reply tokens), created once in the
    /// store by whichever node needs it first.
    fn channel_key(&self) -> Result<[u8; 32]> {
        let fresh: String = crate::sys::random_bytes::<32>()
            .map_err(|source| StoreError::Io {
                path: "/dev/urandom".into(),
                source,
            })?
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let stored: String = self.tx(|tx| {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('channel_key', $1) ON CONFLICT DO NOTHING",
                &[&fresh],
            )?;
            Ok(tx
                .query_one("SELECT value FROM meta WHERE key = 'channel_key'", &[])?
                .get(0))
        })?;
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = stored
                .get(2 * i..2 * i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    self.bad(std::io::Error::other(
                        "the stored channel key is not 64 hex digits",
                    ))
                })?;
        }
        Ok(key)
    }

    fn register(&self, key: &str, me: &Registration) -> Result<()> {
        let host = crate::sys::hostname();
        let version = env!("CARGO_PKG_VERSION");
        let files = serde_json::to_string(&me.files).unwrap_or_else(|_| "{}".into());
        let daemon = i64::from(me.daemon);
        let node = me.node;
        let taken = self.tx(|tx| {
            let won = tx.query_opt(
                "INSERT INTO nodes (name, key, host, version, files, daemon, first_seen, last_seen)
                 VALUES ($1, $2, $3, $4, $5, $6, now(), now())
                 ON CONFLICT (name) DO UPDATE SET key = EXCLUDED.key, host = EXCLUDED.host,
                    version = EXCLUDED.version, files = EXCLUDED.files, daemon = EXCLUDED.daemon,
                    last_seen = now(),
                    first_seen = CASE WHEN nodes.key = EXCLUDED.key THEN nodes.first_seen
                                 ELSE now() END
                 WHERE nodes.key = EXCLUDED.key OR nodes.last_seen < now() - interval '24 hours'
                 RETURNING name",
                &[&node, &key, &host, &version, &files, &daemon],
            )?;
            if won.is_some() {
                return Ok(None);
            }
            let other = tx.query_one(
                "SELECT host, to_char(last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
                 FROM nodes WHERE name = $1",
                &[&node],
            )?;
            Ok(Some((other.get::<_, String>(0), other.get::<_, String>(1))))
        })?;
        match taken {
            None => Ok(()),
            Some((host, last_seen)) => Err(StoreError::NodeTaken {
                node: node.to_string(),
                host,
                last_seen,
            }),
        }
    }

    /// How far this machine's clock is from the database's.
    pub(crate) fn clock_skew(&self) -> Result<Duration> {
        let before = Utc::now();
        let db: f64 = self
            .with(|c| c.query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[]))?
            .get(0);
        let after = Utc::now();
        let mid = (before.timestamp_micros() + after.timestamp_micros()) as f64 / 2e6;
        Ok(Duration::from_secs_f64((db - mid).abs()))
    }
}

impl Fleet for Pg {
    fn claim_task(
        &mut self,
        task_id: &str,
        claim: &Claim,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let now = format_ts(now);
        let node = self.node.clone();
        match claim {
            Claim::Key(slot) => self.tx(|tx| {
                let n = tx.execute(
                    "INSERT INTO claims (task_id, slot, node, run_id, claimed_at)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    &[&task_id, slot, &node, &run_id, &now],
                )?;
                Ok(n == 1)
            }),
            Claim::Every { before } => {
                let before = format_ts(*before);
                self.tx(|tx| {
                    let n = tx.execute(
                        "INSERT INTO task_state (task_id, last_attempt) VALUES ($1, $2)
                         ON CONFLICT (task_id) DO UPDATE SET last_attempt = EXCLUDED.last_attempt
                         WHERE task_state.last_attempt IS NULL OR task_state.last_attempt < $3",
                        &[&task_id, &now, &before],
                    )?;
                    Ok(n == 1)
                })
            }
        }
    }

    fn lease(&mut self, name: &str) -> Result<bool> {
        let asked = Instant::now();
        let millis = self.lease.as_millis() as i64;
        let node = self.node.clone();
        let held = self.tx(|tx| {
            let row = tx.query_opt(
                "INSERT INTO leases (name, holder, term, expires_at)
                 VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond')
                 ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
                    term = CASE WHEN leases.holder = EXCLUDED.holder
                                 AND leases.expires_at > now()
                           THEN leases.term ELSE leases.term + 1 END,
                    expires_at = EXCLUDED.expires_at
                 WHERE leases.holder IS NULL OR leases.holder = EXCLUDED.holder
                    OR leases.expires_at <= now()
                 RETURNING term",
                &[&name, &node, &millis],
            )?;
            Ok(row.is_some())
        })?;
        if held {
            // Lost by this node's own clock a tenth of the lease before the database's.
            self.leases_until
                .insert(name.to_string(), asked + self.lease.mul_f64(0.9));
        } else {
            self.leases_until.remove(name);
        }
        Ok(held)
    }

    fn holds(&self, name: &str) -> bool {
        self.leases_until
            .get(name)
            .is_some_and(|until| Instant::now() < *until)
    }

    fn release_leases(&mut self) -> Result<()> {
        let node = self.node.clone();
        self.leases_until.clear();
        self.tx(|tx| {
            tx.execute(
                "UPDATE leases SET holder = NULL, expires_at = NULL WHERE holder = $1",
                &[&node],
            )?;
            Ok(())
        })
    }

    fn nodes(&self) -> Result<Vec<NodeRow>> {
        let rows = self.with(|c| {
            c.query(
                "SELECT name, host, version, files, daemon,
                        extract(epoch FROM last_seen)::float8
                 FROM nodes ORDER BY name",
                &[],
            )
        })?;
        rows.iter()
            .map(|r| {
                let files: String = r.get(3);
                Ok(NodeRow {
                    name: r.get(0),
                    host: r.get(1),
                    version: r.get(2),
                    files: serde_json::from_str(&files).map_err(|e| self.bad(e))?,
                    last_seen: from_epoch(r.get(5)),
                    daemon: r.get::<_, i64>(4) != 0,
                })
            })
            .collect()
    }

    fn leases(&self) -> Result<Vec<LeaseRow>> {
        let rows = self.with(|c| {
            c.query(
                "SELECT name, CASE WHEN expires_at > now() THEN holder END,
                        extract(epoch FROM expires_at)::float8
                 FROM leases ORDER BY name",
                &[],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| LeaseRow {
                name: r.get(0),
                holder: r.get(1),
                expires_at: r.get::<_, Option<f64>>(2).map(from_epoch),
            })
            .collect())
    }

    fn recent_runs(&self, limit: i64) -> Result<Vec<RecentRun>> {
        let rows = self.with(|c| {
            c.query(
                "SELECT task_id, node, finished_at, outcome FROM task_runs
                 ORDER BY id DESC LIMIT $1",
                &[&limit],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| RecentRun {
                task_id: r.get(0),
                node: r.get(1),
                at: r.get(2),
                outcome: r.get(3),
            })
            .collect())
    }

    fn forget_node(&mut self, name: &str) -> Result<bool> {
        self.tx(|tx| {
            tx.execute(
                "UPDATE leases SET holder = NULL, expires_at = NULL WHERE holder = $1",
                &[&name],
            )?;
            Ok(tx.execute("DELETE FROM nodes WHERE name = $1", &[&name])? == 1)
        })
    }
}

impl Pg {
    fn bad(&self, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Postgres {
            store: self.name().to_string(),
            source: DbError::new(e),
        }
    }
}

fn from_epoch(secs: f64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros((secs * 1e6) as i64).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me<'a>(node: &'a str, dir: &'a Path) -> Registration<'a> {
        Registration {
            node,
            state_dir: dir,
            lease: Duration::from_secs(2),
            files: BTreeMap::from([("HEARTBEAT.md".into(), "ab".into())]),
            daemon: false,
        }
    }

    #[test]
    fn one_name_one_node_until_forgotten() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = Pg::open(&url, &me("nas-1", a.path())).unwrap();
        // The same node again (same key): fine.
        drop(Pg::open(&url, &me("nas-1", a.path())).unwrap());
        let err = Pg::open(&url, &me("nas-1", b.path())).err().unwrap();
        assert!(matches!(err, StoreError::NodeTaken { .. }), "{err}");
        assert!(err.to_string().contains("nas-1"), "{err}");
        let mut other = Pg::open(&url, &me("nas-2", b.path())).unwrap();
        assert_eq!(other.nodes().unwrap().len(), 2);
        assert!(other.forget_node("nas-1").unwrap());
        drop(first);
        drop(Pg::open(&url, &me("nas-1", b.path())).unwrap());
    }

    #[test]
    fn each_key_and_each_interval_is_claimed_by_one_node() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let now: DateTime<Utc> = "2026-05-01T02:00:00Z".parse().unwrap();
        let url = url.as_str();
        let wins: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|i| {
                    s.spawn(move || {
                        let dir = tempfile::tempdir().unwrap();
                        let name = format!("n{i}");
                        let mut pg = Pg::open(url, &me(&name, dir.path())).unwrap();
                        let mut won = 0;
                        for t in 0..40 {
                            let task = format!("t{t}");
                            let key = Claim::Key(format_ts(now));
                            won += usize::from(pg.claim_task(&task, &key, "r", now).unwrap());
                            let every = Claim::Every {
                                before: now - chrono::Duration::minutes(59),
                            };
                            won += usize::from(pg.claim_task(&task, &every, "r", now).unwrap());
                        }
                        won
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(wins.iter().sum::<usize>(), 80, "{wins:?}");
    }

    #[test]
    fn a_lease_has_one_holder_until_it_is_released_or_ends() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut one = Pg::open(&url, &me("one", a.path())).unwrap();
        let mut two = Pg::open(&url, &me("two", b.path())).unwrap();
        assert!(one.lease("telegram").unwrap());
        assert!(one.holds("telegram"));
        assert!(!two.lease("telegram").unwrap());
        assert!(one.lease("telegram").unwrap(), "the holder renews");
        one.release_leases().unwrap();
        assert!(!one.holds("telegram"));
        assert!(two.lease("telegram").unwrap());
        // Not renewed: after the lease's 2 s, another node takes it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !one.lease("telegram").unwrap() {
            assert!(Instant::now() < deadline, "the lease never ended");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(!two.holds("telegram") || !two.lease("telegram").unwrap());
        let rows = two.leases().unwrap();
        assert_eq!(rows[0].holder.as_deref(), Some("one"));
    }

    #[test]
    fn the_clock_of_a_local_server_is_close() {
        let Some(url) = super::super::test_util::url() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let pg = Pg::open(&url, &me("n", dir.path())).unwrap();
        assert!(pg.clock_skew().unwrap() < MAX_SKEW);
    }
}
