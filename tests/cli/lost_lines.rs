//! Never lose a line of the user's file (docs/reference.md#ticking): a tick writes
//! its one byte in place, so whatever another program writes to HEARTBEAT.md during a run
//! (an append, an editor's save by rename) is still there afterwards, and a tick undone by
//! such a save is done again at the next run without running the task again.
//!
//! The racing tests are bounded by a number of runs, not by time: the writer keeps going
//! for as long as the runs last, whatever the machine's speed.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use crate::common::*;

/// Runs beside the writer.
const RUNS: usize = 20;

/// The pause between two writes.
const PAUSE: Duration = Duration::from_millis(3);

const HEAD: &str = "# Heartbeat\n\n## One-time\n\n\
                    - [ ] @log {\"text\": \"initial a\"}\n\
                    - [ ] @log {\"text\": \"initial b\"}\n";

/// Line `n` as a writer adds it: a third are one-time `@log` tasks (ticked by a later run),
/// a third plain reminders, a third prose (after a blank line, so that it never continues a
/// task's line).
fn line(n: usize) -> String {
    match n % 3 {
        0 => format!("- [ ] @log {{\"text\": \"written {n}\"}}\n"),
        1 => format!("- [ ] reminder {n}\n"),
        _ => format!("\nplain text line {n}\n"),
    }
}

/// `line(n)` as it may be found afterwards: the same, or ticked.
fn found(text: &str, n: usize) -> bool {
    let want = line(n);
    text.contains(&want) || text.contains(&want.replacen("[ ]", "[x]", 1))
}

/// `--now` of run `i`: a minute apart.
fn now(i: usize) -> String {
    format!("2026-05-01T10:{:02}:00Z", i % 60)
}

type Write = fn(&Path, usize) -> io::Result<()>;

/// Start `write(n)` for n = 0, 1, … every [`PAUSE`] until the returned flag is set; the
/// handle gives back how many lines were written (the writer stops at its first error).
fn writer(path: PathBuf, write: Write) -> (Arc<AtomicBool>, thread::JoinHandle<io::Result<usize>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = thread::spawn(move || {
        let mut n = 0;
        while !flag.load(Ordering::Relaxed) {
            write(&path, n)?;
            n += 1;
            thread::sleep(PAUSE);
        }
        Ok(n)
    });
    (stop, handle)
}

/// `echo … >> HEARTBEAT.md`: one O_APPEND write per line.
fn append(path: &Path, n: usize) -> io::Result<()> {
    OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(line(n).as_bytes())
}

/// An editor's save: read the file, add a line, write a new file beside it, rename it over.
fn save_by_rename(path: &Path, n: usize) -> io::Result<()> {
    let mut text = fs::read_to_string(path)?;
    text.push_str(&line(n));
    let tmp = path.with_file_name(".HEARTBEAT.md.swp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, path)
}

/// `RUNS` runs beside `write`, then one without it; returns the file's text and how many
/// lines were written.
fn race(env: &Env, write: Write) -> (String, usize) {
    let (stop, handle) = writer(env.md_path(), write);
    let outs: Vec<Output> = (0..RUNS).map(|i| env.run_once(&now(i))).collect();
    stop.store(true, Ordering::Relaxed);
    let written = handle
        .join()
        .expect("the writer")
        .expect("the writer's writes");
    for out in &outs {
        out.code(0);
    }
    assert!(written > 0, "the writer never wrote");
    // Tasks written after the last run's tick, or whose tick a save undid, are ticked now.
    env.run_once(&now(RUNS)).code(0);
    (env.read("HEARTBEAT.md"), written)
}

/// Every written line is there; every `@log` task ran exactly once and ends ticked.
#[track_caller]
fn assert_nothing_lost(env: &Env, text: &str, written: usize) {
    let lost: Vec<usize> = (0..written).filter(|&n| !found(text, n)).collect();
    assert!(
        lost.is_empty(),
        "{} of {written} written lines are gone: {lost:?}\n{text}",
        lost.len()
    );
    assert!(text.starts_with("# Heartbeat\n\n## One-time\n\n"), "{text}");
    let open: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("- [ ] @log"))
        .collect();
    assert!(open.is_empty(), "not ticked: {open:?}");
    let logs = 2 + (0..written).filter(|n| n % 3 == 0).count();
    let mut runs: HashMap<String, usize> = HashMap::new();
    for v in env.events("task_succeeded") {
        if v["tool"] == "log" {
            *runs
                .entry(v["task_id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert_eq!(runs.len(), logs, "every @log task ran");
    assert!(runs.values().all(|&n| n == 1), "a task ran twice: {runs:?}");
}

#[test]
fn lines_appended_during_runs_are_never_lost() {
    let env = Env::new(HEAD);
    let (text, written) = race(&env, append);
    assert_nothing_lost(&env, &text, written);
    // Appends only: nothing but the writer's lines after the head, in order.
    let mut expected = HEAD.to_string();
    for n in 0..written {
        expected.push_str(&line(n));
    }
    assert_eq!(text.replace("[x]", "[ ]"), expected);
}

#[test]
fn saves_by_rename_during_runs_are_never_undone() {
    let env = Env::new(HEAD);
    let (text, written) = race(&env, save_by_rename);
    assert_nothing_lost(&env, &text, written);
}

/// An editor that read the file before a run ticked it and saves afterwards undoes the tick:
/// its new content stays, and the next run ticks the task again without running it.
#[test]
fn a_tick_undone_by_a_save_is_redone_at_the_next_run_without_running_again() {
    let env = Env::new(HEAD);
    env.run_once(&now(0)).code(0);
    let ticked = env.read("HEARTBEAT.md");
    assert_eq!(ticked, HEAD.replace("[ ]", "[x]"));
    assert_eq!(env.events("task_succeeded").len(), 2);

    // The editor's buffer is the file as it was before the run, plus the user's new line.
    let saved = format!("{HEAD}- [ ] call the bank\n");
    env.write(".HEARTBEAT.md.swp", &saved);
    fs::rename(env.path(".HEARTBEAT.md.swp"), env.md_path()).unwrap();

    env.run_once(&now(1)).code(0);
    assert_eq!(
        env.read("HEARTBEAT.md"),
        saved.replacen("[ ]", "[x]", 2),
        "the save stays and both ticks are back"
    );
    assert_eq!(
        env.events("task_succeeded").len(),
        2,
        "nothing ran again: {:#?}",
        env.audit()
    );
    assert_eq!(env.events("task_marked_done").len(), 4);
}

/// A save by rename made by a task during the run (`@write_file` on HEARTBEAT.md itself):
/// the saved content stays, and the tick lands on the task as it is in the new file.
#[test]
fn a_save_by_rename_during_the_run_stays_and_is_ticked() {
    use std::os::unix::fs::PermissionsExt;
    let saved = "## One-time\n- [ ] @log {\"text\": \"first\"}\n- [ ] saved during the run\n";
    let md = format!(
        "## One-time\n- [ ] @log {{\"text\": \"first\"}}\n\
         - [ ] @write_file {{\"path\": \"HEARTBEAT.md\", \"text\": {}}}\n",
        json_str(saved)
    );
    let env = Env::new(&md);
    fs::set_permissions(env.md_path(), fs::Permissions::from_mode(0o640)).unwrap();
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    assert_eq!(env.events("task_succeeded").len(), 2, "{:#?}", env.audit());
    assert_eq!(
        env.read("HEARTBEAT.md"),
        saved.replacen("[ ]", "[x]", 1),
        "the saved content, with the tick"
    );
    let mode = fs::metadata(env.md_path()).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "@write_file keeps the mode: {mode:o}");
    let skipped = env.events("task_mark_skipped");
    assert_eq!(
        skipped.len(),
        1,
        "the @write_file task is gone from the new content"
    );
    assert_eq!(skipped[0]["reason"], "gone");
    let names: Vec<String> = fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}
