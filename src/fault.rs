//! Named fault points, for the crash tests: with `HEARTBEAT_FAULT=name` (or `name:n`, the
//! n-th time the point is reached) the process aborts right there, like a `kill -9` or a
//! power cut at that moment. Only in debug builds (what `cargo test` runs); a release build
//! has no fault points at all.

/// Abort here when the environment asks for it.
pub(crate) fn point(name: &str) {
    point_then(name, || {});
}

/// Like [`point`], doing `before` just before aborting (e.g. write half an audit line).
#[cfg(debug_assertions)]
pub(crate) fn point_then(name: &str, before: impl FnOnce()) {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static HITS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
    static ARMED: AtomicUsize = AtomicUsize::new(0);
    // 0: not read yet; 1: no fault requested; 2: armed.
    if ARMED.load(Ordering::Relaxed) == 1 {
        return;
    }
    let Ok(spec) = std::env::var("HEARTBEAT_FAULT") else {
        ARMED.store(1, Ordering::Relaxed);
        return;
    };
    ARMED.store(2, Ordering::Relaxed);
    let (want, nth) = match spec.split_once(':') {
        Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
        None => (spec.clone(), 1),
    };
    if want != name {
        return;
    }
    let mut hits = HITS.lock().unwrap_or_else(|e| e.into_inner());
    let count = match hits.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => {
            *c += 1;
            *c
        }
        None => {
            hits.push((name.to_string(), 1));
            1
        }
    };
    if count == nth {
        eprintln!("heartbeat: fault point {name} reached ({count}); aborting");
        before();
        std::process::abort();
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub(crate) fn point_then(_name: &str, _before: impl FnOnce()) {}
