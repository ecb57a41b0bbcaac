//! The guardrails a run keeps as it goes (docs/reference.md#guardrails): the day's budget,
//! with the estimates of the tools running now reserved so that parallel starts cannot
//! overspend; cooldowns between tasks of one tool within the run; the failure breaker; and
//! what is said once a local day (the budget stop, a tripped task's skip).
//!
//! The plan applies the same rules to the state at the run's start; the guard applies them
//! to what the run did since.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::store::{self, Store};

/// The local day on which `budget_exhausted` was last audited.
const BUDGET_DAY_KEY: &str = "budget_exhausted_day";

#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// Spent since local midnight, including what this run ran.
    spent: f64,
    /// Estimated costs of the tools running now.
    reserved: f64,
    /// Tools started in this run (for cooldowns).
    started_tools: HashSet<String>,
    /// A run that names its tasks (`run --task`) ignores cooldowns.
    no_cooldowns: bool,
}

/// Whether a task may start now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// It may: its tool counts as started and its estimate is reserved.
    Go,
    /// Another task of its tool, which has a cooldown, started in this run: not due.
    Cooldown,
    /// What is spent and reserved leaves no room for its estimate.
    Budget,
}

impl Guard {
    /// A guard for a run that finds `spent` spent since local midnight.
    pub(crate) fn new(spent: f64) -> Guard {
        Guard {
            spent,
            ..Guard::default()
        }
    }

    /// A guard for a run whose tasks a person named (`run --task`): their tools' cooldowns
    /// do not hold them back, within the run either (docs/reference.md#run-one-task-now).
    pub(crate) fn ignore_cooldowns(&mut self) {
        self.no_cooldowns = true;
    }

    /// Whether a planned task of tool `name` may start, given what this run already started
    /// and spent. On [`Start::Go`] its tool counts as started and its estimate is reserved
    /// until [`Guard::settle`].
    pub(crate) fn may_start(&mut self, cfg: &Config, name: &str) -> Start {
        if !self.no_cooldowns && cfg.cooldown(name).is_some() && self.started_tools.contains(name) {
            return Start::Cooldown;
        }
        if !self.reserve(cfg, name) {
            return Start::Budget;
        }
        self.started_tools.insert(name.to_string());
        Start::Go
    }

    /// Whether a run of tool `name` fits in what is spent and reserved; when it does, its
    /// estimate is reserved until [`Guard::settle`] (or [`Guard::release`]). Approved work
    /// claimed in a batch reserves this way, before any of the batch runs.
    pub(crate) fn reserve(&mut self, cfg: &Config, name: &str) -> bool {
        let estimate = cfg.cost_estimate(name);
        if !cfg.within_budget(self.spent + self.reserved, estimate) {
            return false;
        }
        self.reserved += estimate;
        true
    }

    /// Give back the reservation of a run of tool `name` that did not start.
    pub(crate) fn release(&mut self, cfg: &Config, name: &str) {
        self.reserved = (self.reserved - cfg.cost_estimate(name)).max(0.0);
    }

    /// Whether approved work of tool `name` fits in what is spent (approved work starts
    /// alone, nothing reserved).
    pub(crate) fn within_budget(&self, cfg: &Config, name: &str) -> bool {
        cfg.within_budget(self.spent, cfg.cost_estimate(name))
    }

    /// A run of tool `name` finished: what it cost is spent; `reserved` when it started
    /// through [`Guard::may_start`], whose reservation it gives back.
    pub(crate) fn settle(&mut self, cfg: &Config, name: &str, cost: Option<f64>, reserved: bool) {
        self.spent += cost.unwrap_or(0.0);
        if reserved {
            self.release(cfg, name);
        }
        self.started_tools.insert(name.to_string());
    }

    /// What is spent or committed to the tools running now.
    pub(crate) fn committed(&self) -> f64 {
        self.spent + self.reserved
    }

    /// The breaker: after a failure that makes `failures` in a row, at the tool's limit or
    /// past it, the task is tripped (stored) until `heartbeat reset`. True when it tripped.
    pub(crate) fn breaker(
        store: &mut dyn Store,
        cfg: &Config,
        task_id: &str,
        name: &str,
        failures: u32,
        now: DateTime<Utc>,
    ) -> store::Result<bool> {
        let limit = cfg.failure_limit(name);
        if limit == 0 || failures < limit {
            return Ok(false);
        }
        store.trip(task_id, now)?;
        Ok(true)
    }

    /// Whether a tripped task's skip is the first said today (local day), remembering it.
    pub(crate) fn first_mention_today(
        store: &mut dyn Store,
        cfg: &Config,
        task_id: &str,
        now: DateTime<Utc>,
    ) -> store::Result<bool> {
        first_today(store, cfg, &format!("tripped_said:{task_id}"), now)
    }

    /// Whether this budget stop is the first of the local day, remembering it.
    pub(crate) fn first_budget_stop_today(
        store: &mut dyn Store,
        cfg: &Config,
        now: DateTime<Utc>,
    ) -> store::Result<bool> {
        first_today(store, cfg, BUDGET_DAY_KEY, now)
    }
}

/// Whether `key` was not yet marked on `now`'s local day, marking it.
fn first_today(
    store: &mut dyn Store,
    cfg: &Config,
    key: &str,
    now: DateTime<Utc>,
) -> store::Result<bool> {
    let day = now.with_timezone(&cfg.tz()).date_naive().to_string();
    if store.meta(key)?.as_deref() == Some(day.as_str()) {
        return Ok(false);
    }
    store.set_meta(key, &day)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ToolConfig;
    use crate::store::{History, Sqlite, TaskRunRecord};

    const NOW: &str = "2026-05-01T10:00:00Z";

    fn config() -> Config {
        let mut cfg = crate::config::test_util::config(Default::default());
        cfg.daily_usd = 1.0;
        cfg.max_consecutive_failures = 3;
        cfg.tools.insert(
            "paid".into(),
            ToolConfig {
                command: Some(vec!["true".into()]),
                cost_usd: Some(0.4),
                cooldown: Some(std::time::Duration::from_secs(3600)),
                ..ToolConfig::default()
            },
        );
        cfg
    }

    #[test]
    fn stops_at_the_budget_counting_what_runs() {
        let cfg = config();
        let mut guard = Guard::new(0.1);
        assert_eq!(guard.may_start(&cfg, "log"), Start::Go);
        assert_eq!(guard.may_start(&cfg, "paid"), Start::Go);
        // The paid tool has a cooldown: a second task of it waits.
        assert_eq!(guard.may_start(&cfg, "paid"), Start::Cooldown);
        assert!((guard.committed() - 0.5).abs() < 1e-9);
        // It cost more than estimated: 0.1 + 0.95 is past the day's 1.0.
        guard.settle(&cfg, "paid", Some(0.95), true);
        assert!((guard.committed() - 1.05).abs() < 1e-9);
        assert!(!guard.within_budget(&cfg, "paid"));
        let mut fresh = Guard::new(0.7);
        assert_eq!(fresh.may_start(&cfg, "paid"), Start::Budget);
        // A run that names its tasks: a second start of a cooled-down tool goes ahead.
        let mut named = Guard::new(0.0);
        named.ignore_cooldowns();
        assert_eq!(named.may_start(&cfg, "paid"), Start::Go);
        assert_eq!(named.may_start(&cfg, "paid"), Start::Go);
    }

    #[test]
    fn opens_the_breaker_after_the_failures_in_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Sqlite::open(dir.path()).unwrap();
        let cfg = config();
        let now = NOW.parse().unwrap();
        let mut tripped = Vec::new();
        for _ in 0..4 {
            let failures = store
                .record_task_run(&TaskRunRecord {
                    run_id: "run1",
                    task_id: "aaaaaaaaaaaa",
                    tool: "shell",
                    started_at: now,
                    finished_at: now,
                    succeeded: false,
                    interrupted: false,
                    cost_usd: None,
                    approval_id: None,
                    error: None,
                    retried: false,
                    retry_at: None,
                    not_started: false,
                })
                .unwrap();
            tripped.push(
                Guard::breaker(&mut store, &cfg, "aaaaaaaaaaaa", "shell", failures, now).unwrap(),
            );
        }
        assert_eq!(tripped, [false, false, true, true]);
        assert!(store.is_tripped("aaaaaaaaaaaa").unwrap());
        assert!(!store.is_tripped("bbbbbbbbbbbb").unwrap());
    }

    #[test]
    fn says_a_budget_stop_and_a_trip_once_a_local_day() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Sqlite::open(dir.path()).unwrap();
        let cfg = config();
        let now: DateTime<Utc> = NOW.parse().unwrap();
        let tomorrow = now + chrono::Duration::days(1);
        assert!(Guard::first_budget_stop_today(&mut store, &cfg, now).unwrap());
        assert!(!Guard::first_budget_stop_today(&mut store, &cfg, now).unwrap());
        assert!(Guard::first_budget_stop_today(&mut store, &cfg, tomorrow).unwrap());
        assert!(Guard::first_mention_today(&mut store, &cfg, "aaaaaaaaaaaa", now).unwrap());
        assert!(!Guard::first_mention_today(&mut store, &cfg, "aaaaaaaaaaaa", now).unwrap());
        assert!(Guard::first_mention_today(&mut store, &cfg, "bbbbbbbbbbbb", now).unwrap());
    }
}
