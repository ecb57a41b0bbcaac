//! The man pages under `man/`: generated from the clap definition by `heartbeat::man` (one
//! page for `heartbeat` and one per subcommand, what `heartbeat man --install` writes), and
//! kept current by this test. To regenerate them after changing the CLI:
//! `HEARTBEAT_UPDATE_MAN=1 cargo test --test cli man`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use heartbeat::man::pages;

const REGENERATE: &str = "HEARTBEAT_UPDATE_MAN=1 cargo test --test cli man";

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

/// The committed pages are what the CLI generates now; HEARTBEAT_UPDATE_MAN=1 rewrites them
/// (and removes pages of subcommands that are gone).
#[test]
fn man_pages_match_the_committed_files() {
    let pages = pages();
    assert!(pages.contains_key("heartbeat.1"), "{:?}", pages.keys());
    for sub in ["run", "check", "approve", "deny", "init", "completions"] {
        assert!(
            pages.contains_key(&format!("heartbeat-{sub}.1")),
            "no page for {sub}: {:?}",
            pages.keys()
        );
    }
    assert!(!pages.contains_key("heartbeat-help.1"));
    let main = String::from_utf8(pages["heartbeat.1"].clone()).unwrap();
    for needle in [
        "heartbeat\\-run(1)",
        "heartbeat\\-init(1)",
        "EXIT STATUS",
        "\\-\\-config",
    ] {
        assert!(main.contains(needle), "heartbeat.1 lacks {needle}:\n{main}");
    }

    let dir = man_dir();
    let committed: BTreeMap<String, Vec<u8>> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("heartbeat") && name.ends_with(".1"))
                .map(|name| {
                    let bytes = std::fs::read(dir.join(&name)).unwrap();
                    (name, bytes)
                })
                .collect()
        })
        .unwrap_or_default();

    if std::env::var_os("HEARTBEAT_UPDATE_MAN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, page) in &pages {
            if committed.get(name) != Some(page) {
                std::fs::write(dir.join(name), page).unwrap();
            }
        }
        for name in committed.keys().filter(|n| !pages.contains_key(*n)) {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        return;
    }
    let stale: Vec<&String> = pages
        .iter()
        .filter(|(name, page)| committed.get(*name) != Some(page))
        .map(|(name, _)| name)
        .chain(committed.keys().filter(|n| !pages.contains_key(*n)))
        .collect();
    assert!(
        stale.is_empty(),
        "out of date in man/: {stale:?}; regenerate with {REGENERATE}"
    );
}

/// `man -l` renders every committed page without a groff warning (needs `man`).
#[test]
fn man_pages_render() {
    let probe = Command::new("man").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        crate::common::cannot_run_here("man is not installed");
        return;
    }
    let mut names: Vec<String> = pages().into_keys().collect();
    names.retain(|n| man_dir().join(n).exists());
    assert!(
        !names.is_empty(),
        "no committed pages; regenerate with {REGENERATE}"
    );
    for name in names {
        let path = man_dir().join(&name);
        let out = Command::new("man")
            .arg("--warnings")
            .arg("-l")
            .arg(&path)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "80")
            .env("LC_ALL", "C.UTF-8")
            .env_remove("MANOPT")
            .output()
            .expect("start man");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "man -l {name}: {stderr}");
        assert!(stderr.trim().is_empty(), "man -l {name} warns:\n{stderr}");
        assert!(stdout.contains("NAME"), "{name}:\n{stdout}");
        assert!(stdout.contains("SYNOPSIS"), "{name}:\n{stdout}");
        if name == "heartbeat.1" {
            for section in ["SUBCOMMANDS", "EXIT STATUS", "FILES", "heartbeat-init(1)"] {
                assert!(
                    stdout.contains(section),
                    "{name} lacks {section}:\n{stdout}"
                );
            }
        }
    }
}

/// `heartbeat man --install` writes the same pages as `man/` into `~/.local/share/man/man1`
/// (or `--dir`), says where and how to check; `man` then finds `heartbeat` there, as it does
/// for a person whose PATH holds `~/.local/bin`.
#[test]
fn man_install_writes_every_page_where_man_finds_it() {
    let env = crate::common::Env::empty();
    let out = env.cmd(["man", "--install"]).output();
    out.code(0);
    let dir = env.path("home/.local/share/man/man1");
    for (name, page) in pages() {
        let written = std::fs::read(dir.join(&name)).unwrap_or_default();
        assert!(written == page, "{name} not written as generated");
    }
    assert!(
        out.stdout.contains(&dir.display().to_string()) && out.stdout.contains("  man heartbeat\n"),
        "{}",
        out.stdout
    );

    // --dir, relative to the working directory; the main page alone without --install.
    let out = env
        .cmd(["man", "--install", "--dir", "pages/man1"])
        .output();
    out.code(0);
    assert!(env.path("pages/man1/heartbeat-run.1").is_file());
    let out = env.cmd(["man"]).output();
    out.code(0);
    assert_eq!(out.stdout.as_bytes(), &pages()["heartbeat.1"][..]);
    env.cmd(["man", "--dir", "x"]).output().code(2);

    let probe = Command::new("man").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        crate::common::cannot_run_here("man is not installed");
        return;
    }
    std::fs::create_dir_all(env.path("home/.local/bin")).unwrap();
    let found = Command::new("man")
        .args(["-w", "heartbeat"])
        .env("HOME", env.path("home"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", env.path("home/.local/bin").display()),
        )
        .env_remove("MANPATH")
        .output()
        .expect("start man");
    assert_eq!(
        String::from_utf8_lossy(&found.stdout).trim(),
        dir.join("heartbeat.1").display().to_string(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
}
