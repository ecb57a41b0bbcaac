//! Ticking one-time tasks: `[ ]` → `[x]`, and nothing else.
//!
//! Invariants:
//! - The new text differs from the old in marker bytes only, each `' '` (or tab) → `'x'`; line
//!   endings, BOM, final newline and every other byte stay as they were.
//! - Tasks are found again by id in the text as it is now, never by a remembered line.
//! - A tick is written in place: the file (its symlinks followed) is opened read-write, read,
//!   and each marker byte is written at its offset (`pwrite`) after checking that the three
//!   bytes there are still an open marker, then `fsync`. There is no temp file and no rename,
//!   so whatever another program wrote to the file during the run (an append, an edit) is
//!   never overwritten, and the inode, mode, owner, links and symlinks stay as they are.
//! - A file replaced by a rename while it is ticked gets the tick on the inode that was
//!   opened (or the task is found gone): the success is in SQLite either way, and the next
//!   run finds the task open and ticks it without running it (`Decision::Done`).
//! - A read-only file (no owner write bit) in a directory that is not read-only is ticked as
//!   before, when the tick replaced the file: it is made owner-writable for the moment of the
//!   tick and given its mode back afterwards (a crash in between leaves it owner-writable,
//!   never with other content). A read-only file in a read-only directory is locked: the tick
//!   fails and says why.
//! - A tick takes the file's writer lock, the one proposals append under
//!   ([`super::append::lock_open`]), waiting [`LOCK_WAIT`] at most: a proposal never lands in
//!   the middle of a tick, and a lock held longer only moves the tick to the next run.
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use super::{FileError, MAX_FILE_BYTES, SourceFile, line_breaks};
use crate::model::Task;

/// How long a tick waits for the file's lock (a proposal holds it for a moment only).
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(2);

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
    let (offsets, results) = locate(&parsed.tasks, ids);
    if offsets.is_empty() {
        return (None, results);
    }
    let mut bytes = text.as_bytes().to_vec();
    for (at, _) in offsets {
        bytes[at] = b'x';
    }
    // An ASCII space or tab replaced by an ASCII `x`: still UTF-8.
    let new_text = String::from_utf8(bytes).expect("one ASCII byte for another");
    (Some(new_text), results)
}

/// Pure: the byte offsets to set to `x` (the inside of each open marker asked for, once),
/// each with the index of its result, and one result per id, in the order given.
fn locate(tasks: &[Task], ids: &[&str]) -> (Vec<(usize, usize)>, Vec<TickResult>) {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut offsets = Vec::new();
    let mut marked: HashSet<&str> = HashSet::with_capacity(ids.len());
    let mut results = Vec::with_capacity(ids.len());
    for &id in ids {
        let (outcome, line) = match by_id.get(id) {
            None => (TickOutcome::Gone, 0),
            // The same id asked twice: the second finds it ticked.
            Some(task) if task.done || marked.contains(id) => (TickOutcome::AlreadyDone, task.line),
            Some(task) => {
                // The byte between the brackets: ASCII whitespace for an open marker.
                offsets.push((task.marker.start + 1, results.len()));
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
    (offsets, results)
}

/// How many times the file is read again when a marker moved between reading and writing.
const ATTEMPTS: usize = 3;

/// Tick in place: open `path` read-write (symlinks followed), read it, find the tasks by id,
/// and write each open marker's inside byte at its offset, then `fsync`. `known`: the file as
/// it was read earlier, with its tasks; while it is byte for byte the same (same target too),
/// those tasks are used instead of parsing it again.
pub(crate) fn tick_file(
    path: &Path,
    ids: &[&str],
    known: Option<(&SourceFile, &[Task])>,
) -> Result<Vec<TickResult>, FileError> {
    tick_file_within(path, ids, known, LOCK_WAIT)
}

/// [`tick_file`], waiting at most `wait` for the file's writer lock.
fn tick_file_within(
    path: &Path,
    ids: &[&str],
    known: Option<(&SourceFile, &[Task])>,
    wait: Duration,
) -> Result<Vec<TickResult>, FileError> {
    let io_err = |source| FileError::from_io(path, source);
    // Never open a FIFO or a device read-write: only a regular file is a check-list.
    let meta = fs::metadata(path).map_err(io_err)?;
    if !meta.is_file() {
        return Err(io_err(io::Error::other("not a regular file")));
    }
    let canonical = fs::canonicalize(path).map_err(io_err)?;
    let (file, restore) = open_for_tick(path).map_err(io_err)?;
    // The lock proposals append under, held for the moment of the tick (closing the file
    // releases it). Held by another writer past a short wait: an error, so the tick is
    // tried again at the next run and the run is never held up.
    let ticked = super::append::lock_open(&file, wait)
        .map_err(io_err)
        .and_then(|()| tick_open(path, &canonical, &file, ids, known));
    let synced = match &ticked {
        Ok((_, true)) => file.sync_data().map_err(io_err),
        _ => Ok(()),
    };
    if let Some((owner, mode)) = restore {
        // The mode the user gave the file, back on the inode it was taken from.
        let _ = owner.set_permissions(mode);
    }
    let (results, wrote) = ticked?;
    synced?;
    if wrote {
        crate::fault::point("tick_after_write");
    }
    Ok(results)
}

/// `path` opened read and write. A file its owner may not write (`chmod a-w`), when it is
/// ours and its directory is not read-only too, is made owner-writable for the tick: the
/// second value is the handle and mode to restore afterwards.
fn open_for_tick(path: &Path) -> io::Result<(File, Option<(File, Permissions)>)> {
    let rw = || OpenOptions::new().read(true).write(true).open(path);
    match rw() {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let ro = File::open(path)?;
            let mode = ro.metadata()?.permissions();
            let dir = fs::canonicalize(path)?
                .parent()
                .map(fs::metadata)
                .transpose()?;
            let locked = dir.is_none_or(|d| d.permissions().readonly());
            if mode.mode() & 0o200 != 0 || locked {
                return Err(e);
            }
            // Fails with EPERM unless the file is ours (or we are root): then the tick fails
            // with the original error.
            ro.set_permissions(Permissions::from_mode(mode.mode() | 0o200))
                .map_err(|_| e)?;
            let opened = rw();
            let same = match &opened {
                Ok(f) => same_inode(f, &ro),
                Err(_) => true,
            };
            match opened {
                Ok(f) if same => Ok((f, Some((ro, mode)))),
                // Replaced by a rename between the two opens: give the mode back and report
                // the file as busy; the next run ticks the new one.
                Ok(_) => {
                    let _ = ro.set_permissions(mode);
                    Err(io::Error::other(
                        "the file was replaced while it was opened",
                    ))
                }
                Err(err) => {
                    let _ = ro.set_permissions(mode);
                    Err(err)
                }
            }
        }
        other => other.map(|f| (f, None)),
    }
}

fn same_inode(a: &File, b: &File) -> bool {
    match (a.metadata(), b.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Read the open file, locate the tasks, write the marker bytes; true when a byte was
/// written. When the bytes at an offset are no longer an open marker (the file changed after
/// it was read), read it again.
fn tick_open(
    path: &Path,
    canonical: &Path,
    file: &File,
    ids: &[&str],
    known: Option<(&SourceFile, &[Task])>,
) -> Result<(Vec<TickResult>, bool), FileError> {
    let io_err = |source: io::Error| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Ids an earlier attempt ticked: a later one finds them done, but the tick was ours.
    let mut ours: HashSet<String> = HashSet::new();
    for _ in 0..ATTEMPTS {
        let text = read_open(path, file)?;
        let parsed;
        let tasks = match known {
            Some((was, tasks)) if was.text == text && was.canonical == canonical => tasks,
            _ => {
                parsed = super::parse(path, canonical, &text).tasks;
                &parsed
            }
        };
        let (offsets, mut results) = locate(tasks, ids);
        for r in &mut results {
            if r.outcome == TickOutcome::AlreadyDone && ours.contains(&r.task_id) {
                r.outcome = TickOutcome::Marked;
            }
        }
        if offsets.is_empty() {
            return Ok((results, !ours.is_empty()));
        }
        crate::fault::point("tick_before_write");
        let mut moved = false;
        for &(at, i) in &offsets {
            // Checked just before the write: a byte written where the file changed since it
            // was read would land in the user's text.
            let mut now = [0u8; 3];
            let n = file.read_at(&mut now, at as u64 - 1).map_err(io_err)?;
            if n != 3 || now[0] != b'[' || !matches!(now[1], b' ' | b'\t') || now[2] != b']' {
                moved = true;
                break;
            }
            file.write_all_at(b"x", at as u64).map_err(io_err)?;
            ours.insert(results[i].task_id.clone());
        }
        if !moved {
            return Ok((results, true));
        }
    }
    Err(io_err(io::Error::other(
        "the file kept changing while it was ticked",
    )))
}

/// The whole file through the open handle, with the size and UTF-8 checks of `read_source`.
fn read_open(path: &Path, file: &File) -> Result<String, FileError> {
    let io_err = |source: io::Error| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    // `Read` for `&File` reads from the current position: read from the start each time.
    let mut at = 0u64;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = file.read_at(&mut chunk, at).map_err(io_err)?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
        at += n as u64;
        // The file may grow while it is read: never read past the limit.
        if at > MAX_FILE_BYTES {
            return Err(FileError::TooLarge {
                path: path.to_path_buf(),
                size: at,
            });
        }
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        FileError::NotUtf8 {
            path: path.to_path_buf(),
            line: 1 + line_breaks(valid),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::parse;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    const PATH: &str = "/tmp/hb/HEARTBEAT.md";

    fn ids_of(text: &str) -> Vec<String> {
        parse(Path::new(PATH), Path::new(PATH), text)
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect()
    }

    fn tick(text: &str, ids: &[&str]) -> (Option<String>, Vec<TickResult>) {
        tick_text(Path::new(PATH), Path::new(PATH), text, ids)
    }

    #[test]
    fn only_marker_bytes_change_crlf_bom_no_final_newline() {
        let text = "\u{feff}## Once\r\n- [ ] a\r\n- [ ] b\r\n- [x] c\r\n  - [\t] d";
        let ids = ids_of(text);
        let (new, results) = tick(text, &[&ids[0], &ids[3]]);
        assert_eq!(
            new.as_deref(),
            Some("\u{feff}## Once\r\n- [x] a\r\n- [ ] b\r\n- [x] c\r\n  - [x] d")
        );
        assert_eq!(
            results,
            vec![
                TickResult {
                    task_id: ids[0].clone(),
                    outcome: TickOutcome::Marked,
                    line: 2
                },
                TickResult {
                    task_id: ids[3].clone(),
                    outcome: TickOutcome::Marked,
                    line: 5
                },
            ]
        );
    }

    #[test]
    fn outcomes_in_request_order() {
        let text = "## Once\n- [x] done\n- [ ] open\n";
        let ids = ids_of(text);
        let (new, results) = tick(text, &["000000000000", &ids[0], &ids[1], &ids[1]]);
        assert_eq!(new.as_deref(), Some("## Once\n- [x] done\n- [x] open\n"));
        let got: Vec<(TickOutcome, usize)> = results.iter().map(|r| (r.outcome, r.line)).collect();
        assert_eq!(
            got,
            vec![
                (TickOutcome::Gone, 0),
                (TickOutcome::AlreadyDone, 2),
                (TickOutcome::Marked, 3),
                (TickOutcome::AlreadyDone, 3),
            ]
        );
        assert_eq!(results[0].task_id, "000000000000");
        // Nothing to do: no new text.
        let (new, results) = tick(text, &[&ids[0], "nope"]);
        assert_eq!(new, None);
        assert_eq!(results.len(), 2);
    }

    #[test]
    fn ticking_twice_equals_once() {
        let text = "## Once\n- [ ] a\n- [ ] a\n\n> - [ ] @x {\"k\":\n>   1}\n";
        let ids = ids_of(text);
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let once = tick(text, &refs).0.unwrap();
        assert_eq!(
            once,
            "## Once\n- [x] a\n- [x] a\n\n> - [x] @x {\"k\":\n>   1}\n"
        );
        let (twice, results) = tick(&once, &refs);
        assert_eq!(twice, None);
        assert!(
            results
                .iter()
                .all(|r| r.outcome == TickOutcome::AlreadyDone)
        );
    }

    fn write(path: &Path, text: &str, mode: u32) {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn dir_names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn tick_file_through_a_symlink_keeps_link_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let real_dir = dir.path().join("real");
        fs::create_dir(&real_dir).unwrap();
        let target = real_dir.join("tasks.md");
        write(&target, "## Once\r\n- [ ] a\r\n- [ ] b", 0o640);
        let link = dir.path().join("HEARTBEAT.md");
        symlink("real/tasks.md", &link).unwrap();

        let ino = fs::metadata(&target).unwrap().ino();
        let source = crate::markdown::read_source(&link).unwrap();
        assert_eq!(source.canonical, fs::canonicalize(&target).unwrap());
        let parsed = parse(&source.path, &source.canonical, &source.text);
        let results = tick_file(&link, &[&parsed.tasks[1].id], None).unwrap();
        assert_eq!(results[0].outcome, TickOutcome::Marked);

        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("real/tasks.md"));
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            "## Once\r\n- [ ] a\r\n- [x] b"
        );
        assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o640);
        assert_eq!(
            fs::metadata(&target).unwrap().ino(),
            ino,
            "written in place"
        );
        // No temp file, next to the link or the target.
        assert_eq!(dir_names(&real_dir), vec!["tasks.md"]);
        assert_eq!(dir_names(dir.path()), vec!["HEARTBEAT.md", "real"]);
    }

    #[test]
    fn tick_file_writes_in_place_keeping_inode_mode_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        // Group and other write: any usual umask would clear them on a new file.
        write(&path, "## Once\n- [ ] a\n", 0o666);
        let other = dir.path().join("hard-link.md");
        fs::hard_link(&path, &other).unwrap();
        let ino = fs::metadata(&path).unwrap().ino();
        let id = &ids_of_file(&path)[0];
        tick_file(&path, &[id], None).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "## Once\n- [x] a\n");
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o666);
        assert_eq!((meta.ino(), meta.nlink()), (ino, 2));
        assert_eq!(fs::read_to_string(&other).unwrap(), "## Once\n- [x] a\n");
        assert_eq!(dir_names(dir.path()), vec!["HEARTBEAT.md", "hard-link.md"]);
    }

    #[test]
    fn a_read_only_file_is_ticked_and_gets_its_mode_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        write(&path, "## Once\n- [ ] a\n", 0o444);
        let id = &ids_of_file(&path)[0];
        let results = tick_file(&path, &[id], None).unwrap();
        assert_eq!(results[0].outcome, TickOutcome::Marked);
        assert_eq!(fs::read_to_string(&path).unwrap(), "## Once\n- [x] a\n");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o444);
    }

    #[test]
    fn a_file_replaced_by_a_rename_is_ticked_where_it_was_opened_then_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        write(&path, "## Once\n- [ ] a\n", 0o644);
        let canonical = fs::canonicalize(&path).unwrap();
        let id = &ids_of_file(&path)[0];
        let (opened, restore) = open_for_tick(&path).unwrap();
        assert!(restore.is_none());
        // An editor saves by rename between the open and the write.
        let saved = dir.path().join(".swp");
        write(&saved, "## Once\n- [ ] a\n- [ ] new\n", 0o644);
        fs::rename(&saved, &path).unwrap();
        let (results, wrote) = tick_open(&path, &canonical, &opened, &[id], None).unwrap();
        assert_eq!((results[0].outcome, wrote), (TickOutcome::Marked, true));
        // The save stays as it was; the old inode has the tick.
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "## Once\n- [ ] a\n- [ ] new\n"
        );
        assert_eq!(read_open(&path, &opened).unwrap(), "## Once\n- [x] a\n");
        // The next tick finds the task open at the path and ticks it there.
        tick_file(&path, &[id], None).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "## Once\n- [x] a\n- [ ] new\n"
        );
    }

    #[test]
    fn a_byte_that_is_not_an_open_marker_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let text = "## Once\n- [ ] a\n";
        write(&path, text, 0o644);
        let source = crate::markdown::read_source(&path).unwrap();
        let mut tasks = parse(&source.path, &source.canonical, &source.text).tasks;
        // Offsets that do not point at a marker (as if the file had changed under them).
        tasks[0].marker = 1..4;
        let err = tick_file(&path, &[&tasks[0].id], Some((&source, &tasks)));
        assert!(matches!(err, Err(FileError::Io { .. })), "{err:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    fn ids_of_file(path: &Path) -> Vec<String> {
        let s = crate::markdown::read_source(path).unwrap();
        parse(&s.path, &s.canonical, &s.text)
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect()
    }

    #[test]
    fn tick_file_reuses_the_earlier_parse_only_while_the_file_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let original = "## Once\n- [ ] a\n- [ ] b\n";
        write(&path, original, 0o644);
        let source = crate::markdown::read_source(&path).unwrap();
        let tasks = parse(&source.path, &source.canonical, &source.text).tasks;
        let id_a = tasks[0].id.clone();

        // Changed since it was read: parsed again, the task is found where it is now.
        write(&path, "## Once\n- [ ] new\n- [ ] a\n- [ ] b\n", 0o644);
        let results = tick_file(&path, &[&id_a], Some((&source, &tasks))).unwrap();
        assert_eq!(
            (results[0].outcome, results[0].line),
            (TickOutcome::Marked, 3)
        );
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "## Once\n- [ ] new\n- [x] a\n- [ ] b\n"
        );

        // Unchanged: the tasks given are used as they are (here with a's and b's markers
        // swapped, to see which were used).
        write(&path, original, 0o644);
        let mut swapped = tasks.clone();
        let (ma, mb) = (swapped[0].marker.clone(), swapped[1].marker.clone());
        swapped[0].marker = mb;
        swapped[1].marker = ma;
        tick_file(&path, &[&id_a], Some((&source, &swapped))).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "## Once\n- [ ] a\n- [x] b\n"
        );
    }

    #[test]
    fn tick_file_without_change_does_not_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        write(&path, "## Once\n- [x] a\n", 0o644);
        let ino = fs::metadata(&path).unwrap().ino();
        let id = &ids_of_file(&path)[0];
        let results = tick_file(&path, &[id, "gone"], None).unwrap();
        assert_eq!(results[0].outcome, TickOutcome::AlreadyDone);
        assert_eq!(results[1].outcome, TickOutcome::Gone);
        assert_eq!(fs::metadata(&path).unwrap().ino(), ino);
    }

    #[test]
    fn a_tick_takes_the_proposals_lock_and_never_waits_long_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let text = "## One-time\n- [ ] a\n";
        fs::write(&path, text).unwrap();
        let id = ids_of_file(&path)[0].clone();
        // A proposal holds the lock: the tick writes nothing and says why.
        let proposal = crate::markdown::append::lock(&path).unwrap();
        let err = tick_file_within(&path, &[&id], None, Duration::ZERO).unwrap_err();
        assert!(err.to_string().contains("lock"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        // While the tick holds it, a proposal cannot take it.
        drop(proposal);
        let (file, _) = open_for_tick(&path).unwrap();
        crate::markdown::append::lock_open(&file, Duration::ZERO).unwrap();
        let other = OpenOptions::new().append(true).open(&path).unwrap();
        assert!(crate::markdown::append::lock_open(&other, Duration::ZERO).is_err());
        drop(file);
        // Released: the tick lands.
        let results = tick_file_within(&path, &[&id], None, Duration::ZERO).unwrap();
        assert_eq!(results[0].outcome, TickOutcome::Marked);
        assert_eq!(fs::read_to_string(&path).unwrap(), "## One-time\n- [x] a\n");
    }

    #[test]
    fn tick_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("HEARTBEAT.md");
        assert!(matches!(
            tick_file(&missing, &["x"], None),
            Err(FileError::Missing(p)) if p == missing
        ));
        fs::write(&missing, b"- [ ] \xff\n").unwrap();
        assert!(matches!(
            tick_file(&missing, &["x"], None),
            Err(FileError::NotUtf8 { line: 1, .. })
        ));
    }

    #[test]
    fn a_directory_that_is_not_writable_does_not_matter() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("ro");
        fs::create_dir(&sub).unwrap();
        let path = sub.join("HEARTBEAT.md");
        write(&path, "## Once\n- [ ] a\n", 0o644);
        let id = &ids_of_file(&path)[0];
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o555)).unwrap();
        let result = tick_file(&path, &[id], None);
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(result.unwrap()[0].outcome, TickOutcome::Marked);
        assert_eq!(fs::read_to_string(&path).unwrap(), "## Once\n- [x] a\n");
        assert_eq!(dir_names(&sub), vec!["HEARTBEAT.md"]);
    }

    #[test]
    fn a_read_only_file_in_a_read_only_directory_is_locked() {
        // Root may write anything; nothing to test then.
        if crate::sys::is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("ro");
        fs::create_dir(&sub).unwrap();
        let path = sub.join("HEARTBEAT.md");
        write(&path, "## Once\n- [ ] a\n", 0o444);
        let id = &ids_of_file(&path)[0];
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o555)).unwrap();
        let err = tick_file(&path, &[id], None);
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(err, Err(FileError::Io { .. })), "{err:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "## Once\n- [ ] a\n");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o444);
    }

    #[test]
    fn a_fifo_is_refused_before_it_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let err = tick_file(&path, &["x"], None);
        assert!(matches!(err, Err(FileError::Io { .. })), "{err:?}");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const FRAGMENTS: &[&str] = &[
            "- [ ] a",
            "- [ ] a",
            "  - [x] b",
            "* [X] done",
            "+ [\t] tab",
            "1. [ ] n",
            "2) [ ] @x {\"a\":",
            "   1}",
            "> - [ ] q",
            ">   more",
            "- [ ]",
            "  @y {}",
            "## Recurring",
            "## Once",
            "# Title",
            "### Every 6h",
            "    - [ ] indented code",
            "<div>",
            "text [ ] here",
            "",
            "  ",
            "é [x]",
        ];

        fn lines(max: usize) -> impl Strategy<Value = String> {
            prop::collection::vec(
                (
                    prop::sample::select(FRAGMENTS),
                    prop::sample::select(&["\n", "\r\n", "\r"][..]),
                ),
                0..max,
            )
            .prop_map(|v| v.into_iter().map(|(l, e)| format!("{l}{e}")).collect())
        }

        fn document() -> impl Strategy<Value = String> {
            (any::<bool>(), lines(30), "[a ]{0,3}").prop_map(|(bom, body, tail)| {
                format!("{}{body}{tail}", if bom { "\u{feff}" } else { "" })
            })
        }

        proptest! {
            #[test]
            fn tick_changes_only_markers_and_is_idempotent(
                text in document(),
                pick in prop::collection::vec(any::<bool>(), 40),
            ) {
                let tasks = parse(Path::new(PATH), Path::new(PATH), &text).tasks;
                let ids: Vec<&str> = tasks
                    .iter()
                    .zip(pick.iter().cycle())
                    .filter(|(_, p)| **p)
                    .map(|(t, _)| t.id.as_str())
                    .collect();
                let (new, results) = tick(&text, &ids);
                prop_assert_eq!(results.len(), ids.len());
                let new = new.unwrap_or_else(|| text.clone());
                prop_assert_eq!(new.len(), text.len());
                let allowed: std::collections::HashSet<usize> =
                    tasks.iter().map(|t| t.marker.start + 1).collect();
                for (i, (a, b)) in text.bytes().zip(new.bytes()).enumerate() {
                    if a != b {
                        prop_assert!(allowed.contains(&i), "byte {} changed", i);
                        prop_assert!(a == b' ' || a == b'\t');
                        prop_assert_eq!(b, b'x');
                    }
                }
                let (again, results) = tick(&new, &ids);
                prop_assert_eq!(again, None);
                prop_assert!(results.iter().all(|r| r.outcome == TickOutcome::AlreadyDone));
            }

            #[test]
            fn fenced_code_is_never_a_task(
                before in lines(12),
                inside in lines(12),
                after in lines(12),
                fence in prop::sample::select(&["```", "~~~~", "```markdown"][..]),
            ) {
                // The blank lines close whatever `before` left open (paragraphs, HTML blocks);
                // the fragments never open a fence or a comment.
                let close = &fence[..fence.chars().take_while(|c| *c == fence.as_bytes()[0] as char).count()];
                let head = format!("{before}\n\n{fence}\n");
                let text = format!("{head}{inside}{close}\n{after}");
                let fenced = head.len()..head.len() + inside.len();
                let tasks = parse(Path::new(PATH), Path::new(PATH), &text).tasks;
                prop_assert!(tasks.iter().all(|t| !fenced.contains(&t.marker.start)));
                let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
                if let (Some(new), _) = tick(&text, &ids) {
                    prop_assert_eq!(&new[fenced.clone()], &text[fenced]);
                }
            }
        }
    }
}
