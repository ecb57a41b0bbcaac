//! Exit codes (docs/reference.md#exit-codes), and whether this process has started work,
//! which decides the code of an error. Below everything that needs them: `report` counts a
//! run into a code, `tools` marks work as started, `error` and the commands exit with them.

use std::sync::atomic::{AtomicBool, Ordering};

/// Done; nothing failed (also: skipped outside active hours or because of the lock).
pub const OK: u8 = 0;
/// At least one task failed, was invalid or tripped; or an error after work had started.
pub const TASK_FAILED: u8 = 1;
/// Usage error, invalid config, unreadable or invalid HEARTBEAT.md: nothing run.
pub const USAGE: u8 = 2;

/// Set once this process starts a tool: from then on an error is not "nothing run".
static WORK_STARTED: AtomicBool = AtomicBool::new(false);

/// Called by whatever starts a tool (docs/reference.md#exit-codes: an error after work had started
/// exits 1).
pub fn work_started() {
    WORK_STARTED.store(true, Ordering::SeqCst);
}

/// The exit code of an error now: [`USAGE`] while nothing has run, else [`TASK_FAILED`] (a
/// state or I/O failure after tools ran must not say "nothing run").
pub fn failure_code() -> u8 {
    if WORK_STARTED.load(Ordering::SeqCst) {
        TASK_FAILED
    } else {
        USAGE
    }
}
