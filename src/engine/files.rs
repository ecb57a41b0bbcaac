//! The files and state a command starts from: every configured HEARTBEAT.md read and parsed
//! once, the stored state as a snapshot for planning, the state dir created private.
//!
//! Invariants: a file is read once per command; reading never creates anything (only
//! [`ensure_state_dir`] does, with mode 0700).

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::markdown::{self, FileError, SourceFile};
use crate::model::{ParsedFile, Task};
use crate::store::{Snapshot, Store};

/// A HEARTBEAT.md as read and parsed at the start of a command.
pub struct Loaded {
    pub source: SourceFile,
    pub parsed: ParsedFile,
}

/// Read and parse every configured file; a missing one is an error unless `allow_missing`.
pub fn read_files(cfg: &Config, allow_missing: bool) -> Result<Vec<Loaded>> {
    let mut sources = Vec::with_capacity(cfg.files.len());
    for path in &cfg.files {
        match markdown::read_source(path) {
            Ok(source) => sources.push(source),
            Err(FileError::Missing(_)) if allow_missing => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(sources
        .into_iter()
        .map(|source| {
            let parsed = markdown::parse(&source.path, &source.canonical, &source.text);
            Loaded { source, parsed }
        })
        .collect())
}

/// All tasks of all files, in file order.
pub fn all_tasks(files: &[Loaded]) -> Vec<&Task> {
    files.iter().flat_map(|f| &f.parsed.tasks).collect()
}

/// Stored state for planning, without creating anything (read-only commands, dry runs).
pub fn read_snapshot(cfg: &Config, now: DateTime<Utc>) -> Result<Snapshot> {
    Ok(match Store::open_existing(&cfg.state_dir)? {
        Some(store) => store.snapshot(
            now,
            cfg.approval_ttl,
            crate::schedule::local_midnight(cfg.tz(), now),
        )?,
        None => Snapshot::default(),
    })
}

/// Create the state dir (0700) if needed.
pub fn ensure_state_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))
}
