//! Ticking one-time tasks: `[ ]` → `[x]`, and nothing else.
//!
//! Invariants:
//! - The new text differs from the old in marker bytes only, each `' '` (or tab) → `'x'`; line
//!   endings, BOM, final newline and every other byte stay as they were.
//! - Tasks are found again by id in the text as it is now, never by a remembered line.
//! - A file is replaced atomically (temp file in the same directory, original mode, fsync,
//!   rename over the symlink-resolved target, fsync of the directory), at most once per call;
//!   a failed write leaves the original untouched and no temp file behind.
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{FileError, read_source};
use crate::model::Task;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickOutcome {
    /// `[ ]` became `[x]`.
    Marked,
    /// The task is there but already `[x]`.
    AlreadyDone,
    /// No task with that id in the file any more.
    Gone,
}

/// Result for one requested id; `line` is where the task is now (0 when gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickResult {
    pub task_id: String,
    pub outcome: TickOutcome,
    pub line: usize,
}

/// Pure: tick the open tasks with these ids in `text`. Returns the new text when anything
/// changed (only marker bytes differ), and one result per id, in the order given.
pub fn tick_text(
    path: &Path,
    canonical: &Path,
    text: &str,
    ids: &[&str],
) -> (Option<String>, Vec<TickResult>) {
    let parsed = super::parse(path, canonical, text);
    let by_id: HashMap<&str, &Task> = parsed.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut new_text: Option<String> = None;
    let mut marked: HashSet<&str> = HashSet::new();
    let mut results = Vec::with_capacity(ids.len());
    for &id in ids {
        let (outcome, line) = match by_id.get(id) {
            None => (TickOutcome::Gone, 0),
            // The same id asked twice: the second finds it ticked.
            Some(task) if task.done || marked.contains(id) => (TickOutcome::AlreadyDone, task.line),
            Some(task) => {
                let s = new_text.get_or_insert_with(|| text.to_string());
                // The byte between the brackets is ASCII whitespace for an open marker, so
                // this is one byte for one byte.
                let inside = task.marker.start + 1..task.marker.start + 2;
                s.replace_range(inside, "x");
                marked.insert(id);
                (TickOutcome::Marked, task.line)
            }
        };
        results.push(TickResult {
            task_id: id.to_string(),
            outcome,
            line,
        });
    }
    (new_text, results)
}

/// Re-read `path`, tick, and when something changed replace the file atomically (temp file
/// in the same directory with the original mode, fsync, rename over the symlink-resolved
/// target, fsync the directory). One rewrite per call.
pub fn tick_file(path: &Path, ids: &[&str]) -> Result<Vec<TickResult>, FileError> {
    let source = read_source(path)?;
    let (new_text, results) = tick_text(&source.path, &source.canonical, &source.text, ids);
    if let Some(new_text) = new_text {
        replace_atomically(&source.canonical, new_text.as_bytes())?;
    }
    Ok(results)
}

static TEMP_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Replace `target` (already symlink-resolved) with `contents`, keeping its permissions.
fn replace_atomically(target: &Path, contents: &[u8]) -> Result<(), FileError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source: io::Error| FileError::Io { path, source }
    };
    let dir = target.parent().unwrap_or(Path::new("/"));
    let name = target
        .file_name()
        .map_or_else(|| "heartbeat".into(), |n| n.to_string_lossy());
    let meta = fs::metadata(target).map_err(io_err(target))?;

    let (tmp, file) = create_temp(dir, &name).map_err(io_err(dir))?;
    let written = write_temp(file, &meta, contents).and_then(|()| fs::rename(&tmp, target));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(target)(e));
    }
    // The rename is what makes the new content visible; fsync the directory so it survives a
    // crash. Some filesystems refuse fsync on a directory: the file is replaced all the same,
    // so that is not an error worth failing the tick for.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.heartbeat-{pid}-{n}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            // Left over by a crashed run with the same pid: try the next number.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1_000_000 => continue,
            Err(e) => return Err(e),
        }
    }
}

fn write_temp(mut file: File, original: &fs::Metadata, contents: &[u8]) -> io::Result<()> {
    // Explicitly, on the open file: the umask must not decide the mode of HEARTBEAT.md.
    file.set_permissions(original.permissions())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let ours = file.metadata()?;
        if ours.uid() != original.uid() || ours.gid() != original.gid() {
            // Best effort: only root may give a file away, and a group we are not in is
            // refused; the content matters more than the owner.
            let _ = std::os::unix::fs::fchown(&file, Some(original.uid()), Some(original.gid()));
            file.set_permissions(original.permissions())?;
        }
    }
    file.write_all(contents)?;
    file.sync_all()
}
