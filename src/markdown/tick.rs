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

use super::{FileError, SourceFile, read_source};
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
    tick_tasks(text, &parsed.tasks, ids)
}

/// [`tick_text`] with the tasks of `text` already parsed.
fn tick_tasks(text: &str, tasks: &[Task], ids: &[&str]) -> (Option<String>, Vec<TickResult>) {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut new_text: Option<String> = None;
    let mut marked: HashSet<&str> = HashSet::with_capacity(ids.len());
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
/// target, fsync the directory). One rewrite per call. `known`: the file as it was read
/// earlier, with its tasks; while it is byte for byte the same (same target too), those
/// tasks are used instead of parsing it again.
pub fn tick_file(
    path: &Path,
    ids: &[&str],
    known: Option<(&SourceFile, &[Task])>,
) -> Result<Vec<TickResult>, FileError> {
    let source = read_source(path)?;
    let (new_text, results) = match known {
        Some((was, tasks)) if was.text == source.text && was.canonical == source.canonical => {
            tick_tasks(&source.text, tasks, ids)
        }
        _ => tick_text(&source.path, &source.canonical, &source.text, ids),
    };
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

    remove_stale_temps(dir, &name);
    let (tmp, file) = create_temp(dir, &name).map_err(io_err(dir))?;
    let written = write_temp(file, &meta, contents).and_then(|()| {
        crate::fault::point("tick_before_rename");
        fs::rename(&tmp, target)
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(target)(e));
    }
    crate::fault::point("tick_after_rename");
    // The rename is what makes the new content visible; fsync the directory so it survives a
    // crash. Some filesystems refuse fsync on a directory: the file is replaced all the same,
    // so that is not an error worth failing the tick for.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Temp files of ours that a crashed run left beside the file (`.<name>.heartbeat-<pid>-<n>.tmp`
/// whose pid is no longer alive). Best effort: a failure here never stops a tick.
fn remove_stale_temps(dir: &Path, name: &str) {
    let prefix = format!(".{name}.heartbeat-");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if !crate::sys::process_exists(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
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
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, fchown};
        let ours = file.metadata()?;
        // Best effort: only root may give a file away, and only to a group we are in; the
        // content matters more than the owner.
        if ours.uid() != original.uid() || ours.gid() != original.gid() {
            let _ = fchown(&file, Some(original.uid()), Some(original.gid()))
                .or_else(|_| fchown(&file, None, Some(original.gid())));
        }
    }
    // Explicitly, on the open file, and after any chown (which clears set-id bits): the umask
    // must not decide the mode of HEARTBEAT.md.
    file.set_permissions(original.permissions())?;
    file.write_all(contents)?;
    file.sync_all()
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
        // No temp file left behind, next to the link or the target.
        assert_eq!(dir_names(&real_dir), vec!["tasks.md"]);
        assert_eq!(dir_names(dir.path()), vec!["HEARTBEAT.md", "real"]);
    }

    #[test]
    fn tick_file_mode_does_not_depend_on_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("HEARTBEAT.md");
        // Group and other write: any usual umask would clear them on a new file.
        write(&path, "## Once\n- [ ] a\n", 0o666);
        let id = &ids_of_file(&path)[0];
        tick_file(&path, &[id], None).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "## Once\n- [x] a\n");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o666);
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
    fn failed_write_leaves_file_and_no_temp() {
        // Root ignores directory permissions; nothing to test then.
        if crate::sys::is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("ro");
        fs::create_dir(&sub).unwrap();
        let path = sub.join("HEARTBEAT.md");
        write(&path, "## Once\n- [ ] a\n", 0o644);
        let id = &ids_of_file(&path)[0];
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o555)).unwrap();
        let err = tick_file(&path, &[id], None);
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(err, Err(FileError::Io { .. })), "{err:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "## Once\n- [ ] a\n");
        assert_eq!(dir_names(&sub), vec!["HEARTBEAT.md"]);
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
