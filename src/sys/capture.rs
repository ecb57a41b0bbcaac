//! Capturing a child's output pipe, for tools (standard output and error) and MCP servers
//! (standard error) alike: read to the end on a thread of the caller's, keeping the first
//! bytes up to a cap and counting the rest, so the child never blocks on a full pipe.
//!
//! Invariants:
//! - At most `cap` bytes are kept; every byte read is counted in `total`.
//! - A reader given an `abandon` flag polls the pipe and returns soon after the flag is set,
//!   closing its end (a process that left the group may hold the pipe open for ever).

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How often a reader waiting on a quiet pipe looks whether it was given up on.
const ABANDON_POLL: Duration = Duration::from_millis(100);

/// What was read of one pipe so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Capture {
    /// The first `cap` bytes.
    pub kept: Vec<u8>,
    /// Every byte read.
    pub total: u64,
    /// At least the last `min(total, tail_keep)` bytes of the stream.
    pub tail: Vec<u8>,
    cap: usize,
    tail_keep: usize,
}

impl Capture {
    /// Keep the first `cap` bytes, and the last `tail_keep` (0: no tail).
    pub(crate) fn new(cap: usize, tail_keep: usize) -> Capture {
        Capture {
            cap,
            tail_keep,
            ..Capture::default()
        }
    }

    /// Bytes read beyond the cap (counted, not kept).
    pub(crate) fn dropped(&self) -> u64 {
        self.total - self.kept.len() as u64
    }

    fn add(&mut self, chunk: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..room.min(chunk.len())]);
        self.total += chunk.len() as u64;
        if self.tail_keep > 0 {
            self.tail.extend_from_slice(chunk);
            if self.tail.len() > 2 * self.tail_keep {
                let cut = self.tail.len() - self.tail_keep;
                self.tail.drain(..cut);
            }
        }
    }
}

/// What `cap` holds now, leaving it empty (with its limits).
pub(crate) fn take(cap: &Mutex<Capture>) -> Capture {
    let mut c = cap.lock().unwrap_or_else(PoisonError::into_inner);
    let empty = Capture::new(c.cap, c.tail_keep);
    std::mem::replace(&mut *c, empty)
}

/// Read `pipe` to its end into `cap`, or, given `abandon`, until it is set. Progress is
/// shared through `cap`, so an abandoned reader's output so far is still there.
pub(crate) fn read_capped(
    mut pipe: impl Read + AsFd,
    cap: &Mutex<Capture>,
    abandon: Option<&AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if let Some(abandon) = abandon {
            if abandon.load(Ordering::SeqCst) {
                return;
            }
            if !super::readable_within(pipe.as_fd(), ABANDON_POLL) {
                continue;
            }
        }
        let n = match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        cap.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_cap_counts_the_rest_and_keeps_the_tail() {
        let cap = Mutex::new(Capture::new(4, 3));
        let (r, mut w) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut w, b"abcdefghij").unwrap();
        drop(w);
        read_capped(r, &cap, None);
        let c = take(&cap);
        assert_eq!(c.kept, b"abcd");
        assert_eq!((c.total, c.dropped()), (10, 6));
        assert!(c.tail.ends_with(b"hij"), "{:?}", c.tail);
        // Taken: empty again, with the same limits.
        let left = take(&cap);
        assert_eq!((left.total, left.cap), (0, 4));
    }

    #[test]
    fn an_abandoned_reader_returns_with_what_it_read() {
        let cap = Mutex::new(Capture::new(100, 0));
        let (r, mut w) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut w, b"partial").unwrap();
        let abandon = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| read_capped(r, &cap, Some(&abandon)));
            while cap.lock().unwrap().total < 7 {
                std::thread::yield_now();
            }
            abandon.store(true, Ordering::SeqCst);
            reader.join().unwrap();
        });
        // The writer is still open: only the flag ended the reader.
        drop(w);
        let c = take(&cap);
        assert_eq!(c.kept, b"partial");
        assert!(c.tail.is_empty());
    }
}
