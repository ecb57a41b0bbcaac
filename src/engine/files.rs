//! The files and state a command starts from: every configured HEARTBEAT.md read and parsed
//! once, the stored state as a snapshot for planning, the state dir created private; and
//! the files of approved tasks, read again when they change.
//!
//! Invariants: a file is read once per command; reading never creates anything (only
//! [`ensure_state_dir`] does, with mode 0700).

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::markdown::{self, FileError, SourceFile};
use crate::model::{ParsedFile, Task};
use crate::store::Snapshot;

/// A HEARTBEAT.md as read and parsed at the start of a command.
pub(crate) struct Loaded {
    pub source: SourceFile,
    pub parsed: ParsedFile,
}

/// Read and parse every configured file; a missing one is an error unless `allow_missing`.
pub(crate) fn read_files(cfg: &Config, allow_missing: bool) -> Result<Vec<Loaded>> {
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
pub(crate) fn all_tasks(files: &[Loaded]) -> Vec<&Task> {
    files.iter().flat_map(|f| &f.parsed.tasks).collect()
}

/// Stored state for planning, without creating anything (read-only commands, dry runs).
pub(crate) fn read_snapshot(cfg: &Config, now: DateTime<Utc>) -> Result<Snapshot> {
    Ok(match crate::store::open_existing(cfg)? {
        Some(store) => store.snapshot(
            now,
            cfg.approval_ttl,
            crate::schedule::local_midnight(cfg.tz(), now),
        )?,
        None => Snapshot::default(),
    })
}

/// Create the state dir (0700) if needed.
pub(crate) fn ensure_state_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))
}

/// Files read for approved tasks, kept parsed while they do not change on disk: a
/// thousand approvals in one file read it once, and a tool that edits the file makes the
/// next lookup read it again.
#[derive(Default)]
pub(crate) struct FileCache {
    files: HashMap<PathBuf, (Stamp, HashMap<String, Task>)>,
}

/// What tells that a file changed: size, modification and change times, inode.
type Stamp = (u64, i64, i64, i64, i64, u64);

impl FileCache {
    /// The task with this id as the file is now. Err: the file could not be read.
    pub(crate) fn find(
        &mut self,
        path: &Path,
        task_id: &str,
    ) -> std::result::Result<Option<Task>, String> {
        use std::os::unix::fs::MetadataExt;
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read the file: {e}")),
        };
        let stamp = (
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino(),
        );
        if let Some((seen, tasks)) = self.files.get(path)
            && *seen == stamp
        {
            return Ok(tasks.get(task_id).cloned());
        }
        let tasks: HashMap<String, Task> = match markdown::read_source(path) {
            Ok(src) => markdown::parse(&src.path, &src.canonical, &src.text)
                .tasks
                .into_iter()
                .map(|t| (t.id.clone(), t))
                .collect(),
            Err(FileError::Missing(_)) => return Ok(None),
            Err(e) => return Err(format!("cannot read the file: {e}")),
        };
        let found = tasks.get(task_id).cloned();
        self.files.insert(path.to_path_buf(), (stamp, tasks));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_finds_a_task_as_its_file_is_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let md = "## Recurring\n- [ ] @log {\"text\": \"a\"}\n";
        std::fs::write(&path, md).unwrap();
        let id = markdown::parse(&path, &path.canonicalize().unwrap(), md).tasks[0]
            .id
            .clone();
        let mut cache = FileCache::default();
        let found = cache.find(&path, &id).unwrap().expect("found");
        assert_eq!(found.text, "@log {\"text\": \"a\"}");
        assert_eq!(cache.find(&path, "000000000000").unwrap(), None);
        // Changed on disk: read again, and the old task is gone.
        std::fs::write(&path, md.replace("\"a\"", "\"changed\"")).unwrap();
        assert_eq!(cache.find(&path, &id).unwrap(), None);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(cache.find(&path, &id).unwrap(), None);
    }
}
