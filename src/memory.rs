//! Working memory for large check-lists.
//!
//! Parsing and planning a task takes about a kilobyte that lives until the command ends: a
//! 20,000-task file touches some 20 MB of fresh memory, and faulting that in 4 KiB pages
//! costs about as much as the parsing itself. When a command is about to read that much,
//! [`expect_input`] sets aside one heap region and asks the kernel for transparent huge pages
//! there (`madvise(MADV_HUGEPAGE)`; a no-op where the system has them off). Small files, and
//! so every ordinary cron run, are left alone: a huge page costs its 2 MiB zeroing however
//! little of it is used.
//!
//! From then on the allocator keeps what is freed for the rest of the process instead of
//! giving it back (what parsing frees, planning reuses). Linux with glibc only; elsewhere
//! this does nothing. Nothing here changes what the program computes, only where its
//! allocations land.

/// Below this many bytes of markdown nothing is done.
const LARGE_INPUT: usize = 256 * 1024;

/// Working memory to set aside per byte of markdown (what `check` used on a file of
/// one-line `@log` tasks, rounded up).
const BYTES_PER_INPUT_BYTE: usize = 40;

/// glibc keeps allocations up to this size in its heap (the most `M_MMAP_THRESHOLD` takes on
/// 64-bit), so the large vectors of a run land in the region too.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_LIMIT: usize = 32 << 20;

/// Prepare for a command that will parse `input_bytes` of markdown. Done once per process:
/// a daemon whose file is this large keeps the region for the next tick's parse.
pub fn expect_input(input_bytes: usize) {
    if input_bytes < LARGE_INPUT {
        return;
    }
    let bytes = input_bytes.saturating_mul(BYTES_PER_INPUT_BYTE);
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| glibc::reserve(bytes));
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bytes;
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use super::HEAP_LIMIT;

    const HUGE_PAGE: usize = 2 << 20;

    /// Grow the heap by `bytes` (at most [`HEAP_LIMIT`]) at once and advise huge pages over
    /// the new part, then give it back to the allocator to hand out.
    pub fn reserve(bytes: usize) {
        let bytes = bytes.min(HEAP_LIMIT - HUGE_PAGE);
        // SAFETY: mallopt, malloc, madvise and free are called with valid arguments; the
        // block is only advised (never read or written here) and freed exactly once.
        unsafe {
            // Large blocks from the heap, not from mmap, and freed memory kept (not trimmed)
            // so what parsing frees, planning reuses.
            if libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_LIMIT as libc::c_int) == 0
                || libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX) == 0
            {
                return;
            }
            let block = libc::malloc(bytes);
            if block.is_null() {
                return;
            }
            let start = (block as usize).next_multiple_of(HUGE_PAGE);
            let end = (block as usize + bytes) & !(HUGE_PAGE - 1);
            if end > start {
                // Advice only: on failure the pages are just ordinary ones.
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
            libc::free(block);
        }
    }
}
