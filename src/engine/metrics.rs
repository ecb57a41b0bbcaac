//! `heartbeat metrics` computed from the state dir, and the `[metrics] textfile` rewritten at
//! the end of every run and tick (docs/reference.md#metrics).
//!
//! Invariants:
//! - Reading never creates the state dir (a state dir not made yet shows zeros).
//! - The textfile is replaced whole: written to a temporary file beside it, then renamed over
//!   it, so a reader (node_exporter) sees the old text or the new, never a part.

use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::error::Result;
use crate::metrics::{Values, exposition};
use crate::redact::Secrets;
use crate::store::Store;

/// The metrics of the state `store` holds (None: no state yet), as of `now`.
pub(crate) fn values(
    cfg: &Config,
    store: Option<&dyn Store>,
    now: DateTime<Utc>,
) -> Result<Values> {
    let mut v = match store {
        Some(s) => {
            let mut v = s.metrics()?;
            v.spent_today = s.spent_since(crate::schedule::local_midnight(cfg.tz(), now))?;
            v
        }
        None => Values::default(),
    };
    // Every configured channel is shown, 0 when nothing waits.
    let configured = cfg
        .telegram
        .iter()
        .map(|_| "telegram")
        .chain(cfg.channels.iter().map(|c| c.name.as_str()));
    for name in configured {
        if !v.queued.iter().any(|(c, _)| c == name) {
            v.queued.push((name.to_string(), 0));
        }
    }
    v.queued.sort();
    Ok(v)
}

/// The exposition text of the state dir `cfg` names, read without creating anything.
pub(crate) fn read(cfg: &Config, now: DateTime<Utc>) -> Result<String> {
    let store = crate::store::open_existing(cfg)?;
    Ok(exposition(&values(cfg, store.as_deref(), now)?))
}

/// Rewrite `[metrics] textfile`, when configured, from `store`. An error is for the caller to
/// report: it never fails the run.
pub(crate) fn write_textfile(
    cfg: &Config,
    store: &dyn Store,
    now: DateTime<Utc>,
    secrets: &Secrets,
) -> std::result::Result<(), String> {
    let Some(path) = &cfg.metrics_textfile else {
        return Ok(());
    };
    let text = values(cfg, Some(store), now)
        .map(|v| exposition(&v))
        .map_err(|e| format!("metrics: {e}"))?;
    let text = secrets.redact(&text);
    replace(path, text.as_str().as_bytes())
        .map_err(|e| format!("metrics: cannot write {}: {e}", path.display()))
}

/// Write `bytes` to a temporary file beside `path` (a name node_exporter skips: it reads
/// `*.prom`), then rename it over `path`.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_textfile_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("heartbeat.prom");
        replace(&path, b"old\n").unwrap();
        replace(&path, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["heartbeat.prom"]);
        // A directory that is not there is an error, and leaves nothing behind.
        assert!(replace(&dir.path().join("no/such.prom"), b"x").is_err());
    }
}
