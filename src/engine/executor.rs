//! Running tool calls as planned, one at a time or up to `concurrency` at once.
//!
//! The executor only runs: it takes a [`ToolCall`] the plan resolved and validated and hands
//! back what the tool did. Deciding whether a call may start, and recording its outcome,
//! stay with the session on its own thread, so the guardrails see every start and every
//! outcome and audit lines stay whole. `notify` and MCP tools need the run's outbox and
//! server connections: the session carries those out itself.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::Scope;

use crate::config::Config;
use crate::model::Task;
use crate::plan::ToolCall;
use crate::tools::{self, Invocation, Outcome};

/// A stop request (the daemon's SIGTERM): `no_new` keeps tasks from starting, `kill` stops
/// the tools that are running.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    pub no_new: AtomicBool,
    pub kill: AtomicBool,
}

impl Stop {
    pub(crate) fn stopping(&self) -> bool {
        self.no_new.load(Ordering::SeqCst)
    }
}

/// Where and how the run's tools run.
#[derive(Clone)]
pub(crate) struct Executor<'a> {
    run_id: String,
    /// The Telegram token's variable, removed from every tool's environment.
    remove_env: Vec<String>,
    stop: Option<&'a Stop>,
}

impl<'a> Executor<'a> {
    pub(crate) fn new(cfg: &Config, run_id: &str, stop: Option<&'a Stop>) -> Executor<'a> {
        Executor {
            run_id: run_id.to_string(),
            remove_env: cfg
                .telegram
                .iter()
                .map(|t| t.bot_token_env.clone())
                .collect(),
            stop,
        }
    }

    /// Run one call on this thread, in its task's directory, until it ends or the stop
    /// request's `kill` is set.
    pub(crate) fn run(&self, task: &Task, call: &ToolCall) -> Outcome {
        let workdir = task.file.parent().unwrap_or(Path::new("/"));
        tools::execute_with_stop(
            &call.spec,
            &call.input,
            &Invocation {
                task_id: &task.id,
                run_id: &self.run_id,
                workdir,
                remove_env: &self.remove_env,
            },
            self.stop.map(|s| &s.kill),
        )
    }
}

/// Up to `limit` calls running at once, each on a thread of `scope`; each outcome comes
/// back with the number it was started with.
pub(crate) struct Pool<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    executor: &'env Executor<'env>,
    limit: usize,
    running: usize,
    tx: Sender<(usize, Outcome)>,
    rx: Receiver<(usize, Outcome)>,
}

impl<'scope, 'env> Pool<'scope, 'env> {
    pub(crate) fn new(
        scope: &'scope Scope<'scope, 'env>,
        executor: &'env Executor<'env>,
        limit: usize,
    ) -> Pool<'scope, 'env> {
        let (tx, rx) = channel();
        Pool {
            scope,
            executor,
            limit: limit.max(1),
            running: 0,
            tx,
            rx,
        }
    }

    /// Every slot is taken: [`Pool::wait`] for one before starting another.
    pub(crate) fn full(&self) -> bool {
        self.running >= self.limit
    }

    /// Start `call` of `task` on a thread of its own; its outcome comes back as `(i, …)`.
    pub(crate) fn start(&mut self, i: usize, task: &'env Task, call: &'env ToolCall) {
        let (tx, executor) = (self.tx.clone(), self.executor);
        self.scope.spawn(move || {
            let outcome = executor.run(task, call);
            // The pool waits for every outcome; a receiver gone only ends the wait.
            let _ = tx.send((i, outcome));
        });
        self.running += 1;
    }

    /// The next call to finish; None when none is running.
    pub(crate) fn wait(&mut self) -> Option<(usize, Outcome)> {
        if self.running == 0 {
            return None;
        }
        let finished = self.rx.recv().ok()?;
        self.running -= 1;
        Some(finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ToolCall;
    use crate::tools::Registry;

    fn task(dir: &Path, md: &str) -> Task {
        let path = dir.join("HEARTBEAT.md");
        crate::markdown::parse(&path, &path, md).tasks.remove(0)
    }

    fn call(task: &Task, cfg: &Config) -> ToolCall<'static> {
        let registry = Registry::from_config(cfg);
        ToolCall::resolve(task, cfg.plain_tasks, &registry)
            .unwrap()
            .unwrap()
            .into_owned()
    }

    #[test]
    fn runs_a_log_call_as_planned() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::config::test_util::config(Default::default());
        let task = task(
            dir.path(),
            "## Recurring\n- [ ] @log {\"text\": \"hello\"}\n",
        );
        let outcome = Executor::new(&cfg, "run1", None).run(&task, &call(&task, &cfg));
        assert!(outcome.success, "{outcome:?}");
        assert_eq!(outcome.stdout, "hello");
    }

    #[test]
    fn runs_shell_calls_in_the_tasks_directory_side_by_side() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::config::test_util::config(Default::default());
        std::fs::write(dir.path().join("here.txt"), "here\n").unwrap();
        let tasks: Vec<Task> = ["cat here.txt", "echo $HEARTBEAT_RUN_ID; exit 3"]
            .iter()
            .map(|cmd| {
                task(
                    dir.path(),
                    &format!("## Recurring\n- [ ] @shell {{\"cmd\": \"{cmd}\"}}\n"),
                )
            })
            .collect();
        let calls: Vec<ToolCall> = tasks.iter().map(|t| call(t, &cfg)).collect();
        let executor = Executor::new(&cfg, "run1", None);
        let mut outcomes: Vec<(usize, Outcome)> = std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, &executor, 2);
            for (i, (task, call)) in tasks.iter().zip(&calls).enumerate() {
                assert!(!pool.full());
                pool.start(i, task, call);
            }
            assert!(pool.full());
            let mut outcomes = Vec::new();
            while let Some(finished) = pool.wait() {
                outcomes.push(finished);
            }
            outcomes
        });
        outcomes.sort_by_key(|(i, _)| *i);
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[0].1.stdout, "here\n");
        assert!(outcomes[0].1.success);
        assert_eq!(outcomes[1].1.stdout, "run1\n");
        assert_eq!(outcomes[1].1.exit_code, Some(3));
        assert!(!outcomes[1].1.success);
    }
}
