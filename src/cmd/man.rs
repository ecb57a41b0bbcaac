//! `heartbeat man [--install [--dir DIR]]`: the man pages of `crate::man`, printed or
//! installed.
//!
//! Invariants:
//! - Without `--install` it prints `heartbeat.1` (roff) and writes nothing.
//! - `--install` writes every page (the same bytes as the committed `man/`) into DIR,
//!   default `~/.local/share/man/man1`, creating it, replacing only pages of heartbeat's own
//!   names; it prints where it wrote and how to check (`man heartbeat`).

use std::path::{Path, PathBuf};

use super::Ctx;
use crate::cli::ManArgs;
use crate::error::{Error, Result, exit};

pub(crate) fn run(ctx: &Ctx, args: &ManArgs) -> Result<u8> {
    let pages = crate::man::pages();
    let mut out = ctx.out();
    if !args.install {
        let main = pages.get("heartbeat.1").map(|p| String::from_utf8_lossy(p));
        out.line(main.unwrap_or_default().trim_end_matches('\n'));
        return Ok(exit::OK);
    }
    let dir = match &args.dir {
        Some(dir) => ctx.cwd.join(dir),
        None => default_dir()?,
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    for (name, page) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, page).map_err(|e| Error::io(&path, e))?;
    }
    out.line(&format!(
        "Wrote {} man pages (heartbeat.1 and one per subcommand) to {}",
        pages.len(),
        dir.display()
    ));
    out.line("Check with:");
    out.line("  man heartbeat");
    let searched = dir.parent().unwrap_or(&dir);
    if args.dir.is_none() {
        out.line(&format!(
            "man searches {} when ~/.local/bin is on your PATH; if `man heartbeat` finds no page, \
             add it to MANPATH in your shell's profile: export MANPATH=\"{}:\"",
            searched.display(),
            searched.display()
        ));
    } else {
        out.line(&format!(
            "man finds them when {} is in its search path (see `manpath`; MANPATH adds to it)",
            searched.display()
        ));
    }
    out.line(&format!(
        "To remove them: rm {}",
        dir.join("heartbeat*.1").display()
    ));
    Ok(exit::OK)
}

/// `~/.local/share/man/man1`: where man-db looks for the pages of programs a person
/// installed for themselves (it maps `~/.local/bin` on PATH to `~/.local/share/man`).
fn default_dir() -> Result<PathBuf> {
    let home = directories::BaseDirs::new()
        .map(|b| b.home_dir().to_path_buf())
        .ok_or_else(|| {
            Error::Usage("no home directory is known: give the pages' directory with --dir".into())
        })?;
    Ok(Path::new(&home).join(".local/share/man/man1"))
}
