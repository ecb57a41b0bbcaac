//! The SQLite store (`<state_dir>/heartbeat.db`): [`Sqlite`], one connection, the
//! implementation of every concern trait of [`super::Store`] (each in the concern's own file
//! beside its rows), its schema in `migrations.rs`.
//!
//! Invariants:
//! - The schema is migrated inside one IMMEDIATE transaction that reads `user_version`
//!   itself, so two processes opening a fresh database at once cannot both migrate.
//! - Every write is its own short transaction, committed before the method returns (IMMEDIATE
//!   where it reads, then writes): nothing is held back for later, so what a caller audits
//!   after a call returned is on disk.
//! - A task has at most one open approval: a partial unique index enforces it, not only the
//!   code.
//! - All times are stored as RFC 3339 UTC strings with milliseconds (they sort as text).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::migrations::{self, SCHEMA_VERSION};
use super::{DbError, Result, StoreError};

pub(crate) const DB_FILE: &str = "heartbeat.db";

/// How long a statement waits for another connection's lock before failing as busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite store: one connection to `<state_dir>/heartbeat.db`.
pub(crate) struct Sqlite {
    pub(super) conn: Connection,
    path: PathBuf,
    /// A reader's lock held on the database file while a read-only connection reads it
    /// without the WAL's shared memory (see [`Sqlite::open_existing`]).
    _readers_lock: Option<std::fs::File>,
}

impl Sqlite {
    /// Open (creating if needed) the database in `state_dir`, migrated to the current schema.
    pub(crate) fn open(state_dir: &Path) -> Result<Sqlite> {
        let path = state_dir.join(DB_FILE);
        // Created private; SQLite gives its -wal and -shm files the same mode.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        let conn = Connection::open(&path).map_err(|e| sql_err(&path, e))?;
        let mut store = Sqlite {
            conn,
            path,
            _readers_lock: None,
        };
        store.configure()?;
        migrations::migrate(&mut store.conn, &store.path)?;
        Ok(store)
    }

    /// Open an existing database without creating anything; None when there is no database
    /// yet. For read-only commands (`status`, `approvals`, `check`, dry runs, `doctor`). A
    /// database of an earlier schema is migrated (read-only, it would show nothing).
    ///
    /// Reading writes nothing in the state dir: a read-only connection to a WAL database
    /// would create its `-wal` and `-shm` files and leave them behind. When no other
    /// connection has them (neither exists), the file is read as immutable (no shared memory,
    /// no locks of SQLite's own) under a reader's lock on it, which keeps a writer that
    /// closes meanwhile from copying its WAL into the file while it is read (it leaves the
    /// WAL for the next one instead). When they exist, they are used as they are.
    pub(crate) fn open_existing(state_dir: &Path) -> Result<Option<Sqlite>> {
        let Some(store) = Sqlite::read_as_is(state_dir)? else {
            return Ok(None);
        };
        let version = store.user_version()?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: store.path.clone(),
                found: version,
            });
        }
        if version == 0 {
            // A database that was never migrated holds nothing to show.
            return Ok(None);
        }
        if version < SCHEMA_VERSION {
            // Written by an earlier heartbeat: brought up to date first, as the next run
            // would, so that what it holds shows right after an upgrade.
            drop(store);
            return Sqlite::open(state_dir).map(Some);
        }
        Ok(Some(store))
    }

    /// The schema of the database in `state_dir` when it is older than this version's
    /// (what [`Sqlite::open_existing`] would migrate); None when it is current, newer, or
    /// there is no database. Reads only.
    pub(crate) fn older_schema(state_dir: &Path) -> Result<Option<i64>> {
        let Some(store) = Sqlite::read_as_is(state_dir)? else {
            return Ok(None);
        };
        let version = store.user_version()?;
        Ok((0 < version && version < SCHEMA_VERSION).then_some(version))
    }

    /// The existing database, opened read-only as it is (see [`Sqlite::open_existing`]).
    fn read_as_is(state_dir: &Path) -> Result<Option<Sqlite>> {
        let path = state_dir.join(DB_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // Asked before any file of the database is opened here: closing a descriptor drops
        // every POSIX lock this process holds on the file, a live connection's too.
        let in_use = ["-wal", "-shm"]
            .iter()
            .any(|end| sibling(&path, end).exists());
        let (conn, readers_lock) = if in_use {
            (Connection::open_with_flags(&path, flags), None)
        } else {
            let lock = readers_lock(&path).map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
            let uri = format!("file:{}?immutable=1", uri_path(&path));
            let conn = Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI);
            (conn, Some(lock))
        };
        let conn = conn.map_err(|e| sql_err(&path, e))?;
        let store = Sqlite {
            conn,
            path,
            _readers_lock: readers_lock,
        };
        store
            .conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| store.err(e))?;
        Ok(Some(store))
    }

    fn configure(&mut self) -> Result<()> {
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.err(e))?;
        // journal_mode returns a row; it also fails here first when the file is not a database.
        // Switching a new database to WAL reads its header under a SHARED lock, then upgrades
        // to write it. Of several connections doing that at once, all but one fail that
        // upgrade with SQLITE_BUSY without calling the busy handler (waiting could deadlock
        // them); once the winner has switched, the same statement only reads and succeeds.
        retry_busy(|| {
            self.conn
                .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        })
        .map_err(|e| self.err(e))?;
        self.conn
            .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(|e| self.err(e))
    }

    pub(super) fn user_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    pub(super) fn err(&self, e: rusqlite::Error) -> StoreError {
        sql_err(&self.path, e)
    }

    /// Run `f` with `synchronous = FULL`: its commit is on disk, not only in the WAL, when
    /// it returns (approval changes, grants, trips, the pause).
    pub(super) fn durable<T>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        self.conn
            .execute_batch("PRAGMA synchronous = FULL")
            .map_err(|e| self.err(e))?;
        let result = f(&mut self.conn).map_err(|e| sql_err(&self.path, e));
        self.conn
            .execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(|e| self.err(e))?;
        result
    }
}

/// `heartbeat.db` + `end` (`-wal`, `-shm`).
fn sibling(path: &Path, end: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(end);
    PathBuf::from(name)
}

/// A path as the path of an SQLite `file:` URI: `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

/// The bytes of a database file that SQLite's readers lock for reading and a connection
/// that closes last locks for writing before it copies its WAL into the file and deletes it
/// (SQLite's `SHARED_FIRST` and `SHARED_SIZE`).
const SHARED_LOCK_BYTES: (i64, i64) = (0x4000_0002, 510);

/// Hold a reader's lock on the database file (a POSIX record lock on SQLite's shared
/// bytes), as a reading connection of SQLite's own would: until the file is closed.
/// Waits while a connection holds them for writing (it is closing), for up to
/// [`BUSY_TIMEOUT`].
fn readers_lock(path: &Path) -> std::io::Result<std::fs::File> {
    use nix::fcntl::{FcntlArg, fcntl};
    let file = std::fs::File::open(path)?;
    let lock = nix::libc::flock {
        l_type: nix::libc::F_RDLCK as i16,
        l_whence: nix::libc::SEEK_SET as i16,
        l_start: SHARED_LOCK_BYTES.0,
        l_len: SHARED_LOCK_BYTES.1,
        l_pid: 0,
    };
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match fcntl(&file, FcntlArg::F_SETLK(&lock)) {
            Ok(_) => return Ok(file),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES)
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Run `op` again while it fails with SQLITE_BUSY, for up to [`BUSY_TIMEOUT`] in all: for a
/// statement SQLite can answer with SQLITE_BUSY without waiting in the busy handler (a lock
/// upgrade). Any other result, or the last busy error past the deadline, is returned.
fn retry_busy<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && Instant::now() + pause < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

pub(super) fn sql_err(path: &Path, source: rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    let write_failed = matches!(
        source.sqlite_error_code(),
        Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure)
    );
    if write_failed && crate::sys::disk_full(&path) {
        StoreError::DiskFull {
            path,
            source: DbError::new(source),
        }
    } else {
        StoreError::Database {
            path,
            source: DbError::new(source),
        }
    }
}

/// A stored time (see the invariants above).
pub(super) fn format_ts(t: DateTime<Utc>) -> String {
    crate::audit::format_ts(t)
}

/// The version of the SQLite library heartbeat is built with (bundled, so the same on every
/// machine; shown by `-v`). 3.51.3 or later: older ones have a WAL-reset race that a cron
/// run beside a daemon can hit.
pub(crate) fn sqlite_version() -> &'static str {
    rusqlite::version()
}

#[cfg(test)]
mod tests {
    use super::super::test_util::ts;
    use super::*;
    use crate::store::History;

    #[test]
    fn fresh_database_opened_by_several_connections_at_once() {
        // Converting a new database to WAL takes a read lock, then upgrades it; SQLite
        // answers a connection that loses that race with SQLITE_BUSY at once, without its
        // busy handler. Every open must still succeed.
        const THREADS: usize = 4;
        const ROUNDS: usize = 40;
        for round in 0..ROUNDS {
            let dir = tempfile::tempdir().unwrap();
            let start = std::sync::Barrier::new(THREADS);
            std::thread::scope(|scope| {
                let opens: Vec<_> = (0..THREADS)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            Sqlite::open(dir.path()).map(|s| s.user_version())
                        })
                    })
                    .collect();
                for open in opens {
                    match open.join().unwrap() {
                        Ok(Ok(version)) => assert_eq!(version, SCHEMA_VERSION),
                        Ok(Err(e)) | Err(e) => panic!("round {round}: {e}"),
                    }
                }
            });
        }
    }

    #[test]
    fn migration_is_idempotent_and_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Sqlite::open(dir.path()).unwrap());
        drop(Sqlite::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = Sqlite::open(dir.path()).err().unwrap();
        assert!(err.to_string().contains("newer heartbeat"), "{err}");
        assert!(Sqlite::open_existing(dir.path()).is_err());
    }

    #[test]
    fn a_database_one_schema_ahead_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Sqlite::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = Sqlite::open(dir.path()).err().unwrap();
        assert!(
            matches!(err, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1),
            "{err}"
        );
        assert!(matches!(
            Sqlite::open_existing(dir.path()),
            Err(StoreError::TooNew { .. })
        ));
        // Left as it was.
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION + 1);
    }

    #[test]
    fn the_database_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sqlite::open(dir.path()).unwrap();
        s.record_attempt("t", ts("2026-01-01T00:00:00Z")).unwrap();
        for name in [DB_FILE, "heartbeat.db-wal"] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clean_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(DB_FILE),
            "this is not sqlite, just text ".repeat(100),
        )
        .unwrap();
        let err = Sqlite::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("heartbeat.db"), "{err}");
        assert!(err.contains("not a database"), "{err}");
    }
}
