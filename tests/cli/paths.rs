//! The same HEARTBEAT.md reached through two paths is read once (issue 14 §1): a symlink
//! named beside the file, and a glob through a directory symlink that points up.

use crate::common::*;

const ONCE: &str = "## One-time\n- [ ] @shell {\"cmd\": \"echo ran >> runs.log\"}\n";

#[test]
fn a_file_and_a_symlink_to_it_are_read_once() {
    let env =
        Env::new(ONCE).config("autonomy = \"full\"\nfiles = [\"HEARTBEAT.md\", \"link.md\"]\n");
    std::os::unix::fs::symlink("HEARTBEAT.md", env.path("link.md")).unwrap();
    let check = env.cmd(["check"]).output();
    check.code(0);
    assert!(
        check.stderr.contains("are the same file; it is read once"),
        "{}",
        check.stderr
    );
    let run = env.run_once(NOW);
    run.code(0);
    assert!(run.stderr.contains("read once"), "{}", run.stderr);
    assert_eq!(env.read("runs.log"), "ran\n");
    assert_eq!(env.events("task_succeeded").len(), 1);
}

#[test]
fn a_glob_never_follows_a_directory_symlink() {
    let env = Env::empty();
    env.write("notes/HEARTBEAT.md", ONCE);
    std::os::unix::fs::symlink("..", env.path("notes/up")).unwrap();
    let env = env.config("autonomy = \"full\"\nfiles = [\"notes/**/*.md\"]\n");
    let run = env.run_once(NOW);
    run.code(0);
    assert_eq!(env.read("notes/runs.log"), "ran\n");
    let files = env.events("run_started")[0]["files"].clone();
    assert_eq!(files.as_array().unwrap().len(), 1, "{files}");
}
