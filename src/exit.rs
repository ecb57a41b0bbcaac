//! Exit codes (docs/reference.md#exit-codes), and whether a command has started work, which
//! decides the code of an error. Below everything that needs them: `report` counts a run into
//! a code, the engine marks work as started, `error` and the commands exit with them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Done; nothing failed (also: skipped outside active hours or because of the lock).
pub(crate) const OK: u8 = 0;
/// At least one task failed, was invalid or tripped; or an error after work had started.
pub(crate) const TASK_FAILED: u8 = 1;
/// Usage error, invalid config, unreadable or invalid HEARTBEAT.md: nothing run.
pub(crate) const USAGE: u8 = 2;

/// What decides the exit code of an error that ends a command: whether work had started.
/// One per command, made by `app.rs` and handed to whatever starts tools (a run's session,
/// through `Tick` and `Decider::run_now`); a clone shares the flag.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkStarted(Arc<AtomicBool>);

impl WorkStarted {
    /// Called by whatever starts a tool: from then on an error is not "nothing run".
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// The exit code of an error now: [`USAGE`] while nothing has run, else [`TASK_FAILED`]
    /// (a state or I/O failure after tools ran must not say "nothing run").
    pub(crate) fn failure_code(&self) -> u8 {
        if self.0.load(Ordering::SeqCst) {
            TASK_FAILED
        } else {
            USAGE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_nothing_ran_until_work_started_in_any_clone() {
        let work = WorkStarted::default();
        assert_eq!(work.failure_code(), USAGE);
        let session = work.clone();
        session.set();
        assert_eq!(work.failure_code(), TASK_FAILED);
        assert_eq!(WorkStarted::default().failure_code(), USAGE);
    }
}
