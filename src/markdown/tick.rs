//! OWNER: markdown helper.
use std::path::Path;

use super::FileError;

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
    _path: &Path,
    _canonical: &Path,
    _text: &str,
    _ids: &[&str],
) -> (Option<String>, Vec<TickResult>) {
    unimplemented!()
}

/// Re-read `path`, tick, and when something changed replace the file atomically (temp file
/// in the same directory with the original mode, fsync, rename over the symlink-resolved
/// target, fsync the directory). One rewrite per call.
pub fn tick_file(_path: &Path, _ids: &[&str]) -> Result<Vec<TickResult>, FileError> {
    unimplemented!()
}
