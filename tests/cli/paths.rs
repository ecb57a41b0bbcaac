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

#[test]
fn a_file_name_that_is_not_utf8_is_refused_by_name_and_skipped_by_a_glob() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::empty();
    env.write("notes/a.md", ONCE);
    let odd = std::ffi::OsStr::from_bytes(b"notes/odd\xffname.md");
    std::fs::write(env.root().join(odd), ONCE).unwrap();
    // Named on the command line: refused, saying why (not "no such file").
    let named = env
        .cmd(["run", "--once"])
        .args([std::ffi::OsStr::new("--file"), odd])
        .now(NOW)
        .output();
    named.code(2);
    assert!(
        named.stderr.starts_with("heartbeat: --file: ")
            && named.stderr.contains("is not valid UTF-8"),
        "{named:?}"
    );
    assert!(!env.state().join("audit.jsonl").exists());
    // Beside a file a glob matches: no panic, the other file runs.
    let env = env.config("autonomy = \"full\"\nfiles = [\"notes/*.md\"]\n");
    let run = env.run_once(NOW);
    run.code(0);
    assert_eq!(env.read("notes/runs.log"), "ran\n");
}
