//! Ticking one-time tasks: `[ ]` → `[x]`, those bytes only (docs/reference.md#ticking).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

use crate::common::*;

/// `text` with the `[ ]` of the line containing `needle` replaced by `[x]`.
fn ticked(text: &[u8], needle: &str) -> Vec<u8> {
    let s = String::from_utf8(text.to_vec()).unwrap();
    let at = s
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in {s:?}"));
    let line_start = s[..at].rfind('\n').map_or(0, |i| i + 1);
    let marker = line_start + s[line_start..].find("[ ]").expect("marker on the line");
    let mut out = text.to_vec();
    out[marker + 1] = b'x';
    out
}

#[test]
fn one_time_success_ticks_exactly_one_byte() {
    let md = "# Heartbeat\n\
              \n\
              Prose with [ ] brackets stays.\n\
              \n\
              ## Recurring\n\
              - [ ] @log {\"text\": \"recurring\"}\n\
              \n\
              ## One-time\n\
              \n\
              * [ ] @log {\"text\": \"first\"}\n\
              - [x] Renew the TLS certificate\n\
              1. [ ] @log {\"text\": \"numbered\"}\n\
              - [ ] Plain reminder, never ticked\n\
              - [ ] @log {\"text\":   \"nested parent\"}\n\
              \x20   - [ ] @log {\"text\": \"nested child\"}\n\
              \n\
              Trailing prose.\n";
    let env = Env::new(md);
    env.run_once(NOW).code(0);

    let mut expected = md.as_bytes().to_vec();
    for needle in [
        "\"first\"",
        "\"numbered\"",
        "\"nested parent\"",
        "\"nested child\"",
    ] {
        expected = ticked(&expected, needle);
    }
    assert_eq!(
        String::from_utf8(env.read_bytes("HEARTBEAT.md")).unwrap(),
        String::from_utf8(expected).unwrap()
    );
    assert_eq!(
        env.events("task_marked_done").len(),
        4,
        "{:#?}",
        env.audit()
    );
    assert_eq!(env.events("task_succeeded").len(), 5);

    // Done tasks never run again; the recurring one does.
    env.run_once("2026-05-01T11:00:00Z").code(0);
    assert_eq!(env.events("task_succeeded").len(), 6);
    assert_eq!(env.events("task_marked_done").len(), 4);
}

#[test]
fn crlf_bom_and_no_final_newline_are_preserved() {
    let md: &[u8] = b"\xEF\xBB\xBF# Heartbeat\r\n\r\n## One-time\r\n- [ ] @log {\"text\": \"a\"}\r\n- [ ] @log {\"text\": \"b\"}";
    let env = Env::new("");
    env.write("HEARTBEAT.md", md);
    env.run_once(NOW).code(0);
    let expected = ticked(&ticked(md, "\"a\""), "\"b\"");
    assert_eq!(env.read_bytes("HEARTBEAT.md"), expected);
    assert_eq!(
        env.events("task_marked_done").len(),
        2,
        "{:#?}",
        env.audit()
    );
}

#[test]
fn code_blocks_and_other_sections_are_untouched() {
    let md = "## One-time\n\
              \n\
              ```\n\
              - [ ] @log {\"text\": \"in a fence\"}\n\
              ```\n\
              \n\
              \x20   - [ ] @log {\"text\": \"indented code\"}\n\
              \n\
              - [ ] @log {\"text\": \"real\"}\n\
              \n\
              ## Notes\n\
              \n\
              - [ ] @log {\"text\": \"in notes\"}\n";
    let env = Env::new(md);
    env.run_once(NOW).code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(ok[0]["output"], "real");
    assert_eq!(
        env.read_bytes("HEARTBEAT.md"),
        ticked(md.as_bytes(), "\"real\"")
    );
}

#[test]
fn symlinked_file_keeps_link_and_mode_and_target_is_updated() {
    let md = "## One-time\n- [ ] @log {\"text\": \"through a link\"}\n";
    let env = Env::empty();
    env.write("real/notes.md", md);
    let target = env.path("real/notes.md");
    fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
    symlink("real/notes.md", env.md_path()).unwrap();
    let ino = fs::metadata(&target).unwrap().ino();

    env.run_once(NOW).code(0);

    let link = fs::symlink_metadata(env.md_path()).unwrap();
    assert!(link.file_type().is_symlink(), "the link must stay a link");
    assert_eq!(
        fs::read_link(env.md_path()).unwrap().to_str(),
        Some("real/notes.md")
    );
    assert_eq!(
        env.read_bytes("real/notes.md"),
        ticked(md.as_bytes(), "through a link")
    );
    let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "mode kept: {mode:o}");
    assert_eq!(fs::metadata(&target).unwrap().ino(), ino, "ticked in place");
    // No temp file next to the target or the link.
    let mut names: Vec<String> = fs::read_dir(env.path("real"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["notes.md"]);
}

#[test]
fn edit_made_while_a_tool_runs_survives_and_the_tick_lands() {
    let md = "## One-time\n\
              - [ ] @shell {\"cmd\": \"printf '\\\\n- [ ] added\\\\n' >> HEARTBEAT.md\"}\n";
    let env = Env::new(md);
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1, "{:#?}", env.audit());
    let mut expected = ticked(md.as_bytes(), "@shell");
    expected.extend_from_slice(b"\n- [ ] added\n");
    assert_eq!(
        String::from_utf8(env.read_bytes("HEARTBEAT.md")).unwrap(),
        String::from_utf8(expected).unwrap()
    );
    assert_eq!(env.events("task_marked_done").len(), 1);
}

#[test]
fn task_removed_during_the_run_is_not_ticked_and_audited() {
    let md = "## One-time\n\
              - [ ] @shell {\"cmd\": \"printf '## One-time\\\\n- [ ] something else\\\\n' > HEARTBEAT.md\"}\n";
    let env = Env::new(md);
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    let ok = env.events("task_succeeded");
    assert_eq!(ok.len(), 1, "{:#?}", env.audit());
    assert_eq!(
        env.read("HEARTBEAT.md"),
        "## One-time\n- [ ] something else\n"
    );
    let skipped = env.events("task_mark_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["task_id"], ok[0]["task_id"]);
    assert_eq!(skipped[0]["file"], env.md_file());
    assert!(
        skipped[0]["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "says why: {}",
        skipped[0]
    );
    assert!(env.events("task_marked_done").is_empty());
}

#[test]
fn a_task_moved_during_the_run_is_found_again_by_id() {
    // The tool inserts two lines above its own task: the tick must land on the task's new
    // line, not on whatever is now at the old one.
    let md = "## One-time\n\
              - [ ] @shell {\"cmd\": \"printf '# Title\\\\n\\\\n' | cat - HEARTBEAT.md > tmp && cat tmp > HEARTBEAT.md\"}\n\
              - [ ] @log {\"text\": \"next\"}\n";
    let env = Env::new(md);
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    let mut expected = b"# Title\n\n".to_vec();
    expected.extend(ticked(&ticked(md.as_bytes(), "@shell"), "\"next\""));
    assert_eq!(
        String::from_utf8(env.read_bytes("HEARTBEAT.md")).unwrap(),
        String::from_utf8(expected).unwrap()
    );
    let marked = env.events("task_marked_done");
    assert_eq!(marked.len(), 2, "{:#?}", env.audit());
    assert_eq!(marked[0]["line"], 4, "the task's line now: {}", marked[0]);
}

#[test]
fn a_task_ticked_by_hand_during_the_run_is_not_ticked_again() {
    let md = "## One-time\n- [ ] @shell {\"cmd\": \"sed 's/^- \\\\[ \\\\]/- [X]/' HEARTBEAT.md > tmp && cat tmp > HEARTBEAT.md\"}\n";
    let env = Env::new(md);
    env.run_with(NOW, &["--autonomy", "full"]).code(0);
    assert_eq!(env.events("task_succeeded").len(), 1, "{:#?}", env.audit());
    let by_hand = md.replacen("- [ ]", "- [X]", 1);
    assert_eq!(env.read("HEARTBEAT.md"), by_hand, "the user's [X] stays");
    let skipped = env.events("task_mark_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert!(skipped[0]["reason"].is_string());
    assert!(env.events("task_marked_done").is_empty());
}

#[test]
fn a_read_only_file_is_ticked_and_stays_read_only() {
    let md = "## One-time\n- [ ] @log {\"text\": \"ro\"}\n";
    let env = Env::new(md);
    fs::set_permissions(env.md_path(), fs::Permissions::from_mode(0o444)).unwrap();
    let ino = fs::metadata(env.md_path()).unwrap().ino();
    env.run_once(NOW).code(0);
    assert_eq!(
        fs::metadata(env.md_path()).unwrap().ino(),
        ino,
        "ticked in place"
    );
    assert_eq!(
        env.read_bytes("HEARTBEAT.md"),
        ticked(md.as_bytes(), "\"ro\"")
    );
    let mode = fs::metadata(env.md_path()).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o444, "{mode:o}");
}

#[test]
fn a_file_deleted_during_the_run_is_not_recreated() {
    let env = Env::new("## One-time\n- [ ] @shell {\"cmd\": \"rm HEARTBEAT.md\"}\n");
    let out = env.run_with(NOW, &["--autonomy", "full"]);
    // The task succeeded; its file being gone is not a failure.
    out.code(0);
    assert!(
        !env.md_path().exists(),
        "the tick must not recreate the file"
    );
    assert_eq!(env.events("task_succeeded").len(), 1);
    let skipped = env.events("task_mark_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "gone");
    // No temp file left behind.
    let leftovers: Vec<String> = fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("HEARTBEAT") || n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
