//! The PostgreSQL store of a fleet (docs/fleet.md): [`Pg`], one connection, the
//! implementation of every concern trait of [`super::Store`] for several nodes sharing one
//! database. Each concern's methods are in a file of their own here, beside SQLite's in the
//! parent module; the schema is in `schema.rs`.
//!
//! Invariants:
//! - Every method is one transaction at `SERIALIZABLE` isolation, retried from the start when
//!   PostgreSQL reports a serialization failure or a deadlock ([`Pg::tx`]): what one method
//!   does is atomic whatever other nodes do at the same time, as SQLite's single writer
//!   makes it on one host. A method never spans two transactions.
//! - No call reaches the database from a thread that drives a tokio runtime (the client
//!   blocks on a runtime of its own, which would panic there): such a call runs on a scoped
//!   thread of its own ([`Pg::with`]).
//! - A failure to reach the database (refused, down, wrong password, the connection lost)
//!   is [`StoreError::Unavailable`]: the caller runs nothing further. A statement PostgreSQL
//!   refused is [`StoreError::Postgres`].
//! - A run holds a session advisory lock on its run id (`pg_advisory_lock(hashtextextended(
//!   run_id, 0))`, taken by `start_run`, released by `finish_run`, and by PostgreSQL when
//!   the node's connection ends, however it ends). A start or a `running` approval of
//!   another run is left by a dead node exactly when that lock is free ([`RUN_IS_GONE`]);
//!   on one host the run lock file says the same.
//! - Errors and messages name the database by host and name, never by its URL (the URL may
//!   hold a password).

mod approvals;
mod fleet;
mod grants;
mod history;
mod mcp;
mod metrics;
mod notices;
mod outbox;
mod proposals;
mod retention;
mod schema;
mod slots;
mod snapshot;
mod snoozes;
mod starts;

pub(crate) use fleet::{open_fleet, running_as_daemon};

use std::cell::RefCell;

use postgres::config::SslMode;
use postgres::error::SqlState;
use postgres::{Client, IsolationLevel, NoTls, Transaction};

use super::{DbError, Result, StoreError};

pub(crate) use schema::SCHEMA_VERSION;

/// SQL true when the run whose id is bound as `$1` holds no run lock any more (its node
/// ended or lost its connection). Takes the lock shared for the rest of the transaction
/// when it is free, so that the run cannot be taking it meanwhile. Of this session's own
/// runs it says true too: callers leave their own run out.
pub(super) const RUN_IS_GONE: &str = "pg_try_advisory_xact_lock_shared(hashtextextended($1, 0))";

/// How many times a transaction is tried when PostgreSQL aborts it for a conflict with
/// another node's (serialization failure, deadlock).
const TRIES: u32 = 50;

/// The PostgreSQL store: one connection, for one node of the fleet.
pub(crate) struct Pg {
    /// None only while it is dropped (see the `Drop` impl).
    client: RefCell<Option<Client>>,
    /// The database as messages name it: `database NAME on HOST`.
    name: String,
    /// This node's name (`[fleet] node`), written beside what it claims and runs.
    pub(super) node: String,
    /// `[fleet] lease`.
    lease: std::time::Duration,
    /// The leases this node holds, until when by its own clock (`fleet.rs`).
    leases_until: std::collections::BTreeMap<String, std::time::Instant>,
}

impl Pg {
    /// Connect to `url` (a `postgres://` URL or `key=value` pairs) as node `node`, and
    /// bring the schema up to date.
    pub(crate) fn connect(url: &str, node: &str) -> Result<Pg> {
        let config: postgres::Config = url.parse().map_err(|e| StoreError::Unavailable {
            store: "postgres".into(),
            source: DbError::new(e),
        })?;
        let name = describe(&config);
        let client = on_plain_thread(|| {
            let mut config = config.clone();
            config
                .application_name(&format!("heartbeat {node}"))
                .connect_timeout(std::time::Duration::from_secs(10));
            // TLS when the URL asks for it, the server's certificate verified against the
            // Mozilla roots; else none (`prefer` does not try it: an unverifiable certificate
            // would fail a connection the user did not ask to encrypt).
            match config.get_ssl_mode() {
                SslMode::Require => config.connect(tls()),
                _ => config.connect(NoTls),
            }
        })
        .map_err(|e| StoreError::Unavailable {
            store: name.clone(),
            source: DbError::new(Shown(said(&e), e)),
        })?;
        let store = Pg {
            client: RefCell::new(Some(client)),
            name,
            node: node.to_string(),
            lease: std::time::Duration::from_secs(30),
            leases_until: Default::default(),
        };
        store.migrate()?;
        Ok(store)
    }

    /// How messages name this database.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Run `f` on the connection, outside any tokio runtime (see the invariants).
    pub(super) fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut Client) -> std::result::Result<T, postgres::Error> + Send,
    ) -> Result<T> {
        let mut client = self.client.borrow_mut();
        let client = client.as_mut().expect("used while dropped");
        on_plain_thread(move || f(client)).map_err(|e| self.err(e))
    }

    /// Run `f` as one serializable transaction, committed before this returns; tried again
    /// from the start while PostgreSQL aborts it for a conflict with another transaction.
    pub(super) fn tx<T: Send>(
        &self,
        mut f: impl FnMut(&mut Transaction) -> std::result::Result<T, postgres::Error> + Send,
    ) -> Result<T> {
        self.with(move |client| {
            let mut tries = 0;
            loop {
                tries += 1;
                let attempt = (|| {
                    let mut tx = client
                        .build_transaction()
                        .isolation_level(IsolationLevel::Serializable)
                        .start()?;
                    let value = f(&mut tx)?;
                    tx.commit()?;
                    Ok(value)
                })();
                match attempt {
                    Err(e) if tries < TRIES && is_conflict(&e) => {
                        std::thread::sleep(std::time::Duration::from_millis(
                            (tries as u64 * 3).min(50),
                        ));
                    }
                    result => return result,
                }
            }
        })
    }

    pub(super) fn err(&self, e: postgres::Error) -> StoreError {
        pg_err(&self.name, e)
    }

    /// Under the advisory lock, in a READ COMMITTED transaction: a node that waited for the
    /// lock must see what the node before it committed.
    fn migrate(&self) -> Result<()> {
        let found = self.with(|client| {
            let mut tx = client.transaction()?;
            let found = migrate_in(&mut tx)?;
            tx.commit()?;
            Ok(found)
        })?;
        match found {
            Err(tables) => Err(StoreError::NotOurs {
                store: self.name.clone(),
                tables: tables.join(", "),
            }),
            Ok(version) if version > SCHEMA_VERSION => Err(StoreError::TooNewPg {
                store: self.name.clone(),
                found: version,
            }),
            Ok(_) => Ok(()),
        }
    }
}

impl Drop for Pg {
    /// The client closes its connection through its own runtime: outside any other.
    fn drop(&mut self) {
        if let Some(client) = self.client.get_mut().take() {
            on_plain_thread(move || drop(client));
        }
    }
}

/// The schema version found (newer ones are left alone), or the tables of ours that a
/// database not migrated by heartbeat already has.
fn migrate_in(
    tx: &mut Transaction,
) -> std::result::Result<std::result::Result<i64, Vec<String>>, postgres::Error> {
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&schema::MIGRATION_LOCK],
    )?;
    let ours: bool = tx
        .query_one("SELECT to_regclass('heartbeat_schema') IS NOT NULL", &[])?
        .get(0);
    if !ours {
        let theirs: Vec<String> = tx
            .query(
                "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = current_schema() AND table_name = ANY($1)
                 ORDER BY table_name",
                &[&schema::TABLES],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if !theirs.is_empty() {
            return Ok(Err(theirs));
        }
        tx.batch_execute("CREATE TABLE heartbeat_schema (version BIGINT NOT NULL)")?;
        tx.execute("INSERT INTO heartbeat_schema (version) VALUES (0)", &[])?;
    }
    let version: i64 = tx
        .query_one("SELECT version FROM heartbeat_schema", &[])?
        .get(0);
    if version >= SCHEMA_VERSION {
        return Ok(Ok(version));
    }
    for sql in &schema::MIGRATIONS[version as usize..] {
        tx.batch_execute(sql)?;
    }
    tx.execute(
        "UPDATE heartbeat_schema SET version = $1",
        &[&SCHEMA_VERSION],
    )?;
    Ok(Ok(version))
}

/// A stored word read through its `FromStr`: a word heartbeat does not know is a decoding
/// error that names it, never a default.
pub(super) struct Word<T>(pub(super) T);

impl<'a, T> postgres::types::FromSql<'a> for Word<T>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    fn from_sql(
        ty: &postgres::types::Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let text = <&str as postgres::types::FromSql>::from_sql(ty, raw)?;
        Ok(Word(text.parse()?))
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        <&str as postgres::types::FromSql>::accepts(ty)
    }
}

/// rustls with ring and the Mozilla roots, as heartbeat's other TLS clients.
fn tls() -> tokio_postgres_rustls::MakeRustlsConnect {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

/// Run `f` where the client may block: on this thread, or on a scoped thread of its own
/// when this one drives a tokio runtime.
fn on_plain_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// PostgreSQL aborted the transaction for a conflict with another: try it again.
fn is_conflict(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Whether `e` says the database cannot be reached (rather than refusing a statement).
fn unreachable(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        // No SQL state: the connection itself failed when the cause is an I/O error.
        None => {
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                if c.is::<std::io::Error>() {
                    return true;
                }
                cause = c.source();
            }
            false
        }
        Some(c) => {
            let class = &c.code()[..2];
            // 08: connection exception; 28: authorization; 57P: operator intervention
            // (shutdown, cannot connect now); 53: insufficient resources.
            matches!(class, "08" | "28" | "53") || c.code().starts_with("57P")
        }
    }
}

pub(super) fn pg_err(store: &str, e: postgres::Error) -> StoreError {
    let gone = unreachable(&e);
    let source = DbError::new(Shown(said(&e), e));
    if gone {
        StoreError::Unavailable {
            store: store.to_string(),
            source,
        }
    } else {
        StoreError::Postgres {
            store: store.to_string(),
            source,
        }
    }
}

/// A client error shown in the server's words: the client's own `Display` says only
/// `db error` for what the server refused, and hides why a connection failed in its cause.
#[derive(Debug)]
struct Shown(String, postgres::Error);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Shown {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.1)
    }
}

/// What a person reads of `e`: the server's message (and its detail and hint), or the
/// client's error and its causes.
fn said(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_string();
        for extra in [db.detail(), db.hint()].into_iter().flatten() {
            text.push_str(&format!(" ({extra})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// `database NAME on HOST` (no user, no password).
fn describe(config: &postgres::Config) -> String {
    let db = config.get_dbname().unwrap_or("(default)");
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    format!("postgres database {db} on {host}")
}

#[cfg(test)]
#[path = "../../../tests/support/pg_server.rs"]
pub(crate) mod pg_server;

/// The throwaway server of the tests (tests/support/pg_server.rs) and a store on a fresh database.
#[cfg(test)]
pub(crate) mod test_util {
    pub(crate) use super::pg_server as server;

    /// A store on a new, empty database; None (said on stderr, or a failure under
    /// `HEARTBEAT_TEST_STRICT=1`) when this machine cannot run PostgreSQL.
    pub(crate) fn store(node: &str) -> Option<super::Pg> {
        let url = url()?;
        Some(super::Pg::connect(&url, node).unwrap())
    }

    /// The URL of a new, empty database, or None as [`store`] says.
    pub(crate) fn url() -> Option<String> {
        match server::database() {
            Ok(url) => Some(url),
            Err(why) => {
                if std::env::var_os("HEARTBEAT_TEST_STRICT").is_some_and(|v| v == "1") {
                    panic!("cannot run here (HEARTBEAT_TEST_STRICT=1): PostgreSQL: {why}");
                }
                eprintln!("skipped: PostgreSQL: {why}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_database_is_migrated_once_and_a_second_connection_finds_it_current() {
        let Some(url) = test_util::url() else { return };
        let url = url.as_str();
        let opened: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| s.spawn(move || Pg::connect(url, &format!("n{i}")).map(|_| ())))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in opened {
            r.unwrap();
        }
        let pg = Pg::connect(url, "n9").unwrap();
        let version: i64 = pg
            .with(|c| c.query_one("SELECT version FROM heartbeat_schema", &[]))
            .unwrap()
            .get(0);
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn a_database_with_tables_of_its_own_is_refused_and_left_alone() {
        let Some(url) = test_util::url() else { return };
        let mut c = Client::connect(&url, NoTls).unwrap();
        c.batch_execute("CREATE TABLE approvals (id INT, who TEXT)")
            .unwrap();
        let err = Pg::connect(&url, "n1").err().unwrap();
        assert!(matches!(err, StoreError::NotOurs { .. }), "{err}");
        let shown = err.to_string();
        assert!(shown.contains("approvals"), "{shown}");
        assert!(!shown.contains(test_util::server::PASSWORD), "{shown}");
        let ours: bool = c
            .query_one("SELECT to_regclass('heartbeat_schema') IS NOT NULL", &[])
            .unwrap()
            .get(0);
        assert!(!ours);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let Some(url) = test_util::url() else { return };
        drop(Pg::connect(&url, "n1").unwrap());
        let mut c = Client::connect(&url, NoTls).unwrap();
        c.execute("UPDATE heartbeat_schema SET version = version + 1", &[])
            .unwrap();
        let err = Pg::connect(&url, "n1").err().unwrap();
        assert!(matches!(err, StoreError::TooNewPg { .. }), "{err}");
    }

    #[test]
    fn a_wrong_password_or_a_missing_server_is_unavailable_without_the_password() {
        let Some(url) = test_util::url() else { return };
        let wrong = url.replace(test_util::server::PASSWORD, "not-the-password");
        let err = Pg::connect(&wrong, "n1").err().unwrap();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        assert!(!err.to_string().contains("not-the-password"), "{err}");
        let nowhere = "host=/nonexistent/heartbeat-socket user=x password=pw1 dbname=y";
        let err = Pg::connect(nowhere, "n1").err().unwrap();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        assert!(
            err.to_string().contains("/nonexistent/heartbeat-socket"),
            "{err}"
        );
    }

    #[test]
    fn a_connection_lost_to_a_stopped_server_is_unavailable_and_a_restart_is_found_again() {
        let server = match test_util::server::private_server("lost") {
            Ok(s) => s,
            Err(why) => {
                if std::env::var_os("HEARTBEAT_TEST_STRICT").is_some_and(|v| v == "1") {
                    panic!("cannot run here (HEARTBEAT_TEST_STRICT=1): PostgreSQL: {why}");
                }
                return eprintln!("skipped: PostgreSQL: {why}");
            }
        };
        let url = server.database().unwrap();
        let pg = Pg::connect(&url, "n1").unwrap();
        server.stop().unwrap();
        let err = pg.with(|c| c.query_one("SELECT 1", &[])).err().unwrap();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        server.restart().unwrap();
        let again = Pg::connect(&url, "n1").unwrap();
        let one: i32 = again.with(|c| c.query_one("SELECT 1", &[])).unwrap().get(0);
        assert_eq!(one, 1);
    }

    #[test]
    fn a_url_that_asks_for_tls_gets_it_or_no_connection() {
        // The test server has no TLS: asked for, the connection fails rather than going
        // on in the clear.
        let Some(url) = test_util::url() else { return };
        let err = Pg::connect(&format!("{url} sslmode=require"), "n1")
            .err()
            .unwrap();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        assert!(err.to_string().to_lowercase().contains("tls"), "{err}");
        Pg::connect(&format!("{url} sslmode=prefer"), "n1").unwrap();
    }

    #[test]
    fn calls_from_inside_a_tokio_runtime_do_not_panic() {
        let Some(url) = test_util::url() else { return };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let one: i32 = rt.block_on(async {
            let pg = Pg::connect(&url, "n1").unwrap();
            pg.with(|c| c.query_one("SELECT 1", &[])).unwrap().get(0)
        });
        assert_eq!(one, 1);
    }
}
