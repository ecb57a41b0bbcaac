//! The decision table of docs/reference.md#policy: one decision per task, from the tasks, the
//! config, a snapshot of stored state and `now`. Pure: `check`, `run --dry-run` and `run` share it.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::config::{Approval, Autonomy, Config, PlainTasks};
use crate::model::{Body, Section, Task};
use crate::schedule;
use crate::schedule::{SlotRules, local_midnight};
use crate::store::Snapshot;
use crate::tools::{Registry, ToolSpec};

/// Why a task that could run was not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SkipReason {
    Observe,
    DeniedByPolicy,
    RunCap,
    Tripped,
    Budget,
    /// A person snoozed the task (docs/reference.md#snooze).
    Snoozed,
}

impl SkipReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SkipReason::Observe => "observe",
            SkipReason::DeniedByPolicy => "denied_by_policy",
            SkipReason::RunCap => "run_cap",
            SkipReason::Tripped => "tripped",
            SkipReason::Budget => "budget",
            SkipReason::Snoozed => "snoozed",
        }
    }
}

/// A tool call as planned: the tool resolved and the input validated once, at planning.
/// The session carries it out as it is; it does not resolve or validate it again. It
/// borrows the registry's spec and the task's parsed input where it can (an MCP tool's spec
/// and a plain task's `agent` input are made for the call).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ToolCall<'a> {
    pub spec: Cow<'a, ToolSpec>,
    pub input: Cow<'a, Map<String, Value>>,
}

impl<'a> ToolCall<'a> {
    /// The tool's name as the task wrote it (`shell`, `agent`, `server.tool`).
    pub(crate) fn name(&self) -> &str {
        &self.spec.name
    }

    /// The call a task makes, resolved against the registry and validated: None for a
    /// reminder; Err with why for an unknown tool or an input it refuses.
    pub(crate) fn resolve(
        task: &'a Task,
        plain_tasks: PlainTasks,
        registry: &'a Registry,
    ) -> Result<Option<ToolCall<'a>>, CallError> {
        let Some((name, input)) = tool_call(task, plain_tasks) else {
            return Ok(None);
        };
        let spec = match registry.resolve(name) {
            Ok(spec) => spec,
            Err(why) => {
                let name = name.to_string();
                return Err(CallError::Unknown { name, why });
            }
        };
        if let Err(why) = spec
            .validate(&input)
            .and_then(|()| registry.check_config(&spec, &input))
        {
            let name = name.to_string();
            return Err(CallError::Input { name, why });
        }
        Ok(Some(ToolCall { spec, input }))
    }

    /// The call with its own copy of the spec and input, free of the registry and task.
    pub(crate) fn into_owned(self) -> ToolCall<'static> {
        ToolCall {
            spec: Cow::Owned(self.spec.into_owned()),
            input: Cow::Owned(self.input.into_owned()),
        }
    }
}

/// What moves a task's slots (docs/reference.md#missed-slots): its `max_lateness` (its tool's,
/// its MCP server's or the global one) and its jitter's offset. The offset is a fixed point
/// in [0, D) drawn from the task's place relative to the config file's directory, its
/// section and its text, never from where the directory lies: the same on every run and
/// every host that shares the check-list, and different across tasks.
pub(crate) fn slot_rules(cfg: &Config, task: &Task) -> SlotRules {
    let shift = task.jitter.map_or(std::time::Duration::ZERO, |d| {
        use sha2::{Digest, Sha256};
        let base = cfg.source.as_deref().and_then(std::path::Path::parent);
        let place = base
            .and_then(|b| task.file.strip_prefix(b).ok())
            .unwrap_or(&task.file);
        let key = format!(
            "{}|{}|{}",
            place.display(),
            task.section.as_str(),
            task.text
        );
        let digest = Sha256::digest(key.as_bytes());
        let n = u64::from_be_bytes(digest[..8].try_into().unwrap_or_default());
        let span = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        std::time::Duration::from_millis(n % span)
    });
    SlotRules {
        lateness: cfg.max_lateness(task.tool_name()),
        shift,
    }
}

/// Why a task's call cannot be made.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CallError {
    /// No such tool (or MCP server, or server tool).
    Unknown { name: String, why: String },
    /// The tool refuses the input.
    Input { name: String, why: String },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision<'a> {
    /// Run this call now.
    Run(ToolCall<'a>),
    /// Queue this call for approval.
    Approve(ToolCall<'a>),
    /// Already queued: the id of its pending approval.
    Pending(i64),
    /// Approved to run at the next run (`approve --later`): the id of its approval.
    Approved(i64),
    NotDue,
    /// A person said no within `approval_ttl`.
    Denied,
    Skip(SkipReason),
    /// A plain reminder that is due.
    Remind,
    /// A one-time reminder already given, waiting for a person to tick it.
    Reminded,
    /// Not in Recurring or One-time.
    Ignored,
    /// A one-time task whose run died before its outcome was recorded: held until
    /// `heartbeat reset` (it may have had its effect).
    Interrupted,
    Invalid {
        line: usize,
        column: usize,
        error: String,
    },
    Done,
    /// Outside active hours (and not forced).
    Inactive,
    /// A failed run is tried again at this time (docs/reference.md#retries).
    Retry(DateTime<Utc>),
    /// In a fleet, the tool's `hosts` leave this node out: another node runs it
    /// (docs/fleet.md#affinity).
    Elsewhere,
}

impl Decision<'_> {
    /// The decision with its call (if any) owning its spec and input.
    pub(crate) fn into_owned(self) -> Decision<'static> {
        match self {
            Decision::Run(call) => Decision::Run(call.into_owned()),
            Decision::Approve(call) => Decision::Approve(call.into_owned()),
            Decision::Pending(id) => Decision::Pending(id),
            Decision::Approved(id) => Decision::Approved(id),
            Decision::NotDue => Decision::NotDue,
            Decision::Denied => Decision::Denied,
            Decision::Skip(reason) => Decision::Skip(reason),
            Decision::Remind => Decision::Remind,
            Decision::Reminded => Decision::Reminded,
            Decision::Ignored => Decision::Ignored,
            Decision::Interrupted => Decision::Interrupted,
            Decision::Invalid {
                line,
                column,
                error,
            } => Decision::Invalid {
                line,
                column,
                error,
            },
            Decision::Done => Decision::Done,
            Decision::Inactive => Decision::Inactive,
            Decision::Retry(at) => Decision::Retry(at),
            Decision::Elsewhere => Decision::Elsewhere,
        }
    }

    /// The `decision` word of `check --json`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Decision::Run(_) => "run",
            Decision::Approve(_) => "approve",
            Decision::Pending(_) => "pending",
            Decision::Approved(_) => "approved",
            Decision::NotDue => "not_due",
            Decision::Denied => "denied",
            // A skip's decision is its reason: `budget`, `run_cap`, `denied_by_policy`, …
            Decision::Skip(reason) => reason.as_str(),
            Decision::Remind => "remind",
            Decision::Reminded => "reminded",
            Decision::Ignored => "ignored",
            Decision::Invalid { .. } => "invalid",
            Decision::Done => "done",
            Decision::Inactive => "inactive",
            Decision::Interrupted => "interrupted",
            Decision::Retry(_) => "retry",
            Decision::Elsewhere => "elsewhere",
        }
    }
}

/// The decision for one task. A decision that runs or queues carries its call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Planned<'a> {
    pub task: &'a Task,
    pub decision: Decision<'a>,
    /// When the task is (or becomes) due, within active hours; None for tasks that never
    /// will be (done, ignored, invalid, a reminder already given).
    pub next_due: Option<DateTime<Utc>>,
}

impl Planned<'_> {
    /// The tool and input `check` and the reports show for this task: the call it
    /// resolved to (`agent` for plain tasks with `plain_tasks = "agent"`); for a done or
    /// ignored task what its text names; for an invalid one the tool it names, no input.
    pub(crate) fn shown_call(
        &self,
        plain_tasks: PlainTasks,
    ) -> (Option<String>, Option<Map<String, Value>>) {
        let task = self.task;
        match &self.decision {
            Decision::Run(call) | Decision::Approve(call) => (
                Some(call.name().to_string()),
                Some(call.input.clone().into_owned()),
            ),
            _ if task.done || task.section == Section::Other => {
                (task.tool_name().map(str::to_string), tool_input(task))
            }
            Decision::Invalid { .. } => {
                let name = tool_call(task, plain_tasks).map(|(name, _)| name.to_string());
                (name.or_else(|| task.tool_name().map(str::to_string)), None)
            }
            _ => match tool_call(task, plain_tasks) {
                Some((name, input)) => (Some(name.to_string()), Some(input.into_owned())),
                None => (None, None),
            },
        }
    }

    /// The tool [`Planned::shown_call`] shows.
    pub(crate) fn shown_tool(&self, plain_tasks: PlainTasks) -> Option<String> {
        self.shown_call(plain_tasks).0
    }
}

/// The plan borrows the tasks it decides and the registry their calls resolve against.
pub(crate) struct Plan<'a> {
    pub active: bool,
    pub next_active: Option<DateTime<Utc>>,
    /// One per task given to [`plan`], in the same order.
    pub items: Vec<Planned<'a>>,
}

/// `'r`: the registry, which the plan's calls borrow their specs from.
pub(crate) struct PlanInput<'a, 'r> {
    pub config: &'a Config,
    pub registry: &'r Registry,
    pub state: &'a Snapshot,
    pub now: DateTime<Utc>,
    /// Run even outside active hours.
    pub force: bool,
    pub autonomy: Autonomy,
    /// A run a person asked for by naming its tasks (`run --task`): the caller plans only
    /// those, and each is due now, whatever its schedule or its tool's cooldown say; every
    /// other rule holds (docs/reference.md#run-one-task-now).
    pub manual: bool,
}

/// Takes the tasks by reference: the plan's items borrow them (and the registry), so
/// planning copies no task.
pub(crate) fn plan<'a>(tasks: &[&'a Task], input: &PlanInput<'_, 'a>) -> Plan<'a> {
    let cfg = input.config;
    let now = input.now;
    // Paused counts as not active: nothing runs unless forced.
    let active = cfg.active.is_active(now) && !input.state.paused;
    let next_active = if active {
        Some(now)
    } else {
        cfg.active.next_active(now)
    };
    let mut items: Vec<Planned> = tasks.iter().map(|t| decide(t, input, active)).collect();
    if !input.manual {
        apply_cooldowns(&mut items, cfg, input.state, now);
    }
    apply_run_cap(&mut items, cfg.max_tasks_per_run, input.state);
    Plan {
        active,
        next_active,
        items,
    }
}

/// Of the tasks of one tool with a cooldown, one runs per run: the one that waited longest
/// (never attempted first, then the oldest attempt; file order breaks ties), so that the
/// first task in the file cannot starve the others. The rest are not due until the
/// cooldown has passed.
fn apply_cooldowns(items: &mut [Planned], cfg: &Config, state: &Snapshot, now: DateTime<Utc>) {
    let mut chosen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let waited = |j: usize| (state.last_attempt.get(&items[j].task.id).copied(), j);
    for (i, item) in items.iter().enumerate() {
        let Decision::Run(call) = &item.decision else {
            continue;
        };
        let tool = call.name();
        if cfg.cooldown(tool).is_none() {
            continue;
        }
        match chosen.get(tool) {
            Some(&j) if waited(j) <= waited(i) => {}
            _ => {
                chosen.insert(tool.to_string(), i);
            }
        }
    }
    for (i, item) in items.iter_mut().enumerate() {
        let Decision::Run(call) = &item.decision else {
            continue;
        };
        if chosen.get(call.name()).is_some_and(|&j| j != i) {
            let until = cfg
                .cooldown(call.name())
                .and_then(|c| chrono::Duration::from_std(c).ok())
                .and_then(|c| now.checked_add_signed(c));
            item.decision = Decision::NotDue;
            item.next_due = until.and_then(|u| active_from(cfg, u));
        }
    }
}

/// `t` if it is within active hours, else the next active moment after it.
fn active_from(cfg: &Config, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if cfg.active.is_active(t) {
        Some(t)
    } else {
        cfg.active.next_active(t)
    }
}

/// Past `cap` tasks to run, the rest wait. The tasks that waited longest go first (never
/// attempted, then the oldest attempt; file order breaks ties), so that a recurring task
/// near the top of the file cannot starve the ones below it. Those that run still run in
/// file order.
fn apply_run_cap(items: &mut [Planned], cap: usize, state: &Snapshot) {
    let mut runs: Vec<usize> = (0..items.len())
        .filter(|&i| matches!(items[i].decision, Decision::Run(_)))
        .collect();
    if cap == 0 || runs.len() <= cap {
        return;
    }
    runs.sort_by_key(|&i| (state.last_attempt.get(&items[i].task.id).copied(), i));
    for &i in &runs[cap..] {
        items[i].decision = Decision::Skip(SkipReason::RunCap);
    }
}

fn decide<'a>(task: &'a Task, input: &PlanInput<'_, 'a>, active: bool) -> Planned<'a> {
    let cfg = input.config;
    let state = input.state;
    let now = input.now;
    let planned = |decision, next_due| Planned {
        task,
        decision,
        next_due,
    };

    if task.done {
        return planned(Decision::Done, None);
    }
    if task.section == Section::Other {
        return planned(Decision::Ignored, None);
    }

    // Resolve the call: which tool, with what input, and is it valid.
    let call = match &task.body {
        Body::Invalid {
            error,
            line,
            column,
            ..
        } => Err((*line, *column, error.clone())),
        _ => ToolCall::resolve(task, cfg.plain_tasks, input.registry).map_err(|e| match e {
            CallError::Unknown { why, .. } | CallError::Input { why, .. } => {
                (task.text_line, task.text_column, why)
            }
        }),
    };
    let call = match call {
        Err((line, column, error)) => {
            let invalid = Decision::Invalid {
                line,
                column,
                error,
            };
            return planned(invalid, None);
        }
        Ok(call) => call,
    };

    // A one-time task runs once: a success whose tick did not land still counts as done.
    if task.section == Section::OneTime && state.succeeded.contains(&task.id) {
        return planned(Decision::Done, None);
    }
    // Started, and its outcome never recorded: it may have done its work
    // (docs/reference.md#at-most-once).
    if task.section == Section::OneTime && state.interrupted.contains(&task.id) {
        return planned(Decision::Interrupted, None);
    }
    let reminder = call.is_none();
    if reminder && task.section == Section::OneTime && state.reminded.contains(&task.id) {
        return planned(Decision::Reminded, None);
    }

    let tz = task.zone_or(cfg.tz());
    let last = state.last_attempt.get(&task.id).copied();
    let fleet_every = fleet_schedule(cfg, task);
    let schedule = task.schedule.as_ref().or(fleet_every.as_ref());
    // A calendar slot with `max_lateness` is due until that deadline, not to the end of its
    // day; with jitter, it falls later (docs/reference.md#missed-slots).
    let rules = slot_rules(cfg, task);
    let by_slots = schedule::has_slots(schedule) && rules != SlotRules::default();
    let (due, next_due) = if by_slots {
        (
            schedule::slot_due(schedule, tz, last, now, rules),
            schedule::slot_next_due(schedule, tz, last, now, rules),
        )
    } else {
        (
            schedule::is_due(schedule, tz, last, now),
            schedule::next_due(schedule, tz, last, now),
        )
    };
    let due_at = next_due.and_then(|t| active_from(cfg, t));
    // A retry waits for its time (docs/reference.md#retries), under its approval too.
    let retry_at = state.retry_at.get(&task.id).copied();
    if let Some(at) = retry_at.filter(|at| *at > now) {
        return planned(Decision::Retry(at), active_from(cfg, at));
    }
    // Waiting for a person, or refused by one: that is the state, whatever the clock says.
    if let Some(id) = state.pending.get(&task.id) {
        let decision = if state.approved.contains(&task.id) {
            Decision::Approved(*id)
        } else {
            Decision::Pending(*id)
        };
        return planned(decision, due_at);
    }
    if state
        .denied_until
        .get(&task.id)
        .is_some_and(|until| *until > now)
    {
        return planned(Decision::Denied, due_at);
    }
    // Snoozed by a person: held until the snooze ends, then due as its schedule says.
    if let Some(until) = state.snoozed.get(&task.id) {
        let after = schedule::next_due(task.schedule.as_ref(), tz, last, (*until).max(now))
            .and_then(|t| active_from(cfg, t));
        return planned(Decision::Skip(SkipReason::Snoozed), after);
    }
    if !active && !input.force {
        return planned(Decision::Inactive, due_at);
    }
    // A retry that is due runs outside the schedule, as a run of named tasks does.
    if !input.manual && retry_at.is_none() && !due {
        return planned(Decision::NotDue, due_at);
    }
    let Some(call) = call else {
        return planned(Decision::Remind, due_at);
    };
    let spec = &call.spec;
    // A cooldown: not due while another task of this tool started within it.
    if !input.manual
        && let Some(cooldown) = cfg.cooldown(&spec.name)
        && let Some(last) = state.tool_last_start.get(&spec.name)
        && let Some(until) = chrono::Duration::from_std(cooldown)
            .ok()
            .and_then(|c| last.checked_add_signed(c))
        && until > now
    {
        return planned(Decision::NotDue, active_from(cfg, until));
    }
    if state.tripped.contains(&task.id) {
        return planned(Decision::Skip(SkipReason::Tripped), None);
    }
    if !cfg.within_budget(state.spent_today, cfg.cost_estimate(&spec.name)) {
        // The budget day starts again at local midnight.
        let tz = cfg.tz();
        let midnight = local_midnight(tz, local_midnight(tz, now) + chrono::Duration::hours(26));
        let due = active_from(cfg, midnight);
        return planned(Decision::Skip(SkipReason::Budget), due);
    }
    if spec.approval == Approval::Deny {
        return planned(Decision::Skip(SkipReason::DeniedByPolicy), due_at);
    }
    // An *always* grant makes `ask` into `auto` for this exact task (never overrides deny).
    let approval = if spec.approval == Approval::Ask && state.granted.contains(&task.id) {
        Approval::Auto
    } else {
        spec.approval
    };
    // A task an agent proposed asks a person first, whatever the autonomy, grants or policy
    // say, until a person approves one run of it in this state dir. The mark in the file says
    // so to every state dir; the store remembers tasks proposed before marks were written.
    let asks_first = state.unapproved.contains(&task.id)
        || (task.proposed_by.is_some() && !state.released.contains(&task.id));
    let decision = match (input.autonomy, approval) {
        (Autonomy::Observe, _) => Decision::Skip(SkipReason::Observe),
        _ if asks_first => Decision::Approve(call),
        // Any node may queue an approval; only the tool's hosts run it.
        (Autonomy::Full, _) | (Autonomy::Cautious, Approval::Auto)
            if !cfg.runs_here(&spec.name) =>
        {
            Decision::Elsewhere
        }
        (Autonomy::Full, _) | (Autonomy::Cautious, Approval::Auto) => Decision::Run(call),
        (Autonomy::Cautious, _) => Decision::Approve(call),
    };
    planned(decision, due_at)
}

/// In a fleet, a recurring task without a schedule heading runs at most once per
/// `[fleet] every`, fleet-wide (docs/fleet.md#exactly-once); on one host, at every run.
fn fleet_schedule(cfg: &Config, task: &Task) -> Option<crate::model::Schedule> {
    let fleet = cfg.fleet.as_ref()?;
    (task.section == Section::Recurring && task.schedule.is_none())
        .then_some(crate::model::Schedule::Every(fleet.every))
}

/// What a node of a fleet claims before it acts on a planned task (docs/fleet.md#exactly-once):
/// a one-time task once for ever; a retry its own time; a calendar slot its time; an
/// interval (or no heading: `[fleet] every`) the compare-and-set of the last attempt.
pub(crate) fn claim_of(
    cfg: &Config,
    task: &Task,
    retry_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> crate::store::Claim {
    use crate::store::Claim;
    if task.section == Section::OneTime {
        return Claim::Key("once".into());
    }
    if let Some(at) = retry_at.filter(|at| *at <= now) {
        return Claim::Key(format!("retry {}", crate::audit::format_ts(at)));
    }
    let fleet_every = fleet_schedule(cfg, task);
    let schedule = task.schedule.as_ref().or(fleet_every.as_ref());
    let tz = task.zone_or(cfg.tz());
    if let Some(slot) = schedule::last_slot(schedule, tz, now, slot_rules(cfg, task)) {
        return Claim::Key(crate::audit::format_ts(slot.at));
    }
    let every = match schedule {
        Some(crate::model::Schedule::Every(d)) => *d - schedule::slack(*d),
        _ => std::time::Duration::ZERO,
    };
    let before = chrono::Duration::from_std(every)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(now);
    Claim::Every { before }
}

/// The tool a task calls and its input: `@name {…}`, or for a plain task with
/// `plain_tasks = "agent"` the `agent` tool with `{"prompt": text}`. None for a reminder or
/// an invalid task.
pub(crate) fn tool_call(
    task: &Task,
    plain_tasks: PlainTasks,
) -> Option<(&str, Cow<'_, Map<String, Value>>)> {
    match &task.body {
        Body::Tool { name, input } => Some((name, Cow::Borrowed(input))),
        Body::Plain if plain_tasks == PlainTasks::Agent => {
            let mut map = Map::new();
            map.insert("prompt".into(), Value::String(task.text.clone()));
            Some(("agent", Cow::Owned(map)))
        }
        Body::Plain | Body::Invalid { .. } => None,
    }
}

fn tool_input(task: &Task) -> Option<Map<String, Value>> {
    match &task.body {
        Body::Tool { input, .. } => Some(input.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;

    use crate::config::ToolConfig;
    use crate::config::test_util::config;

    fn tasks(md: &str) -> Vec<Task> {
        let p = Path::new("/x/HEARTBEAT.md");
        crate::markdown::parse(p, p, md).tasks
    }

    fn decide_all(
        md: &str,
        cfg: &Config,
        state: &Snapshot,
        now: &str,
        autonomy: Autonomy,
    ) -> Vec<Decision<'static>> {
        let registry = Registry::new(&cfg.tools);
        let tasks = tasks(md);
        let p = plan(
            &tasks.iter().collect::<Vec<_>>(),
            &PlanInput {
                config: cfg,
                registry: &registry,
                state,
                now: now.parse().unwrap(),
                force: false,
                autonomy,
                manual: false,
            },
        );
        p.items
            .into_iter()
            .map(|i| i.decision.into_owned())
            .collect()
    }

    /// The decisions' words, as `check` shows them (a run's call left out).
    fn words(decisions: &[Decision]) -> Vec<&'static str> {
        decisions.iter().map(Decision::as_str).collect()
    }

    // 10:00 in Berlin (winter).
    const NOON: &str = "2026-01-15T09:00:00Z";

    const MD: &str = "## Recurring\n- [ ] @log {\"text\": \"hi\"}\n- [ ] @shell {\"cmd\": \"true\"}\n- [ ] Stretch\n- [x] @log {\"text\": \"done\"}\n## Notes\n- [ ] @shell {\"cmd\": \"x\"}\n";

    #[test]
    fn autonomy_levels_follow_the_table() {
        let cfg = config(BTreeMap::new());
        let s = Snapshot::default();
        assert_eq!(
            words(&decide_all(MD, &cfg, &s, NOON, Autonomy::Cautious)),
            vec!["run", "approve", "remind", "done", "ignored"]
        );
        assert_eq!(
            words(&decide_all(MD, &cfg, &s, NOON, Autonomy::Full)),
            vec!["run", "run", "remind", "done", "ignored"]
        );
        assert_eq!(
            words(&decide_all(MD, &cfg, &s, NOON, Autonomy::Observe)),
            vec!["observe", "observe", "remind", "done", "ignored"]
        );
    }

    #[test]
    fn policy_deny_pending_and_denials_hold() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "log".to_string(),
            ToolConfig {
                approval: Some(Approval::Deny),
                ..ToolConfig::default()
            },
        );
        let cfg = config(tools);
        let ids: Vec<String> = tasks(MD).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        s.pending.insert(ids[1].clone(), 7);
        let d = decide_all(MD, &cfg, &s, NOON, Autonomy::Cautious);
        assert_eq!(d[0], Decision::Skip(SkipReason::DeniedByPolicy));
        assert_eq!(d[0].as_str(), "denied_by_policy");
        assert_eq!(d[1], Decision::Pending(7));
        // Approved with `--later`: it waits for the next run, and says so.
        s.approved.insert(ids[1].clone());
        let d = decide_all(MD, &cfg, &s, NOON, Autonomy::Cautious);
        assert_eq!(d[1], Decision::Approved(7));
        assert_eq!(d[1].as_str(), "approved");
        // Queuing counts as an attempt; a scheduled task still shows as pending, not not_due.
        let md6 = MD.replace("## Recurring\n", "## Recurring\n### Every 6h\n");
        let id6 = tasks(&md6)[1].id.clone();
        let mut s6 = Snapshot::default();
        s6.pending.insert(id6.clone(), 8);
        s6.last_attempt.insert(id6, NOON.parse().unwrap());
        assert_eq!(
            decide_all(&md6, &cfg, &s6, NOON, Autonomy::Cautious)[1],
            Decision::Pending(8)
        );

        let cfg = config(BTreeMap::new());
        let mut s = Snapshot::default();
        s.denied_until
            .insert(ids[1].clone(), "2026-01-15T10:00:00Z".parse().unwrap());
        assert_eq!(
            decide_all(MD, &cfg, &s, NOON, Autonomy::Cautious)[1],
            Decision::Denied
        );
        assert_eq!(Decision::Denied.as_str(), "denied");
        // Once the denial stops holding, the task asks again.
        assert_eq!(
            words(&decide_all(
                MD,
                &cfg,
                &s,
                "2026-01-15T10:00:00Z",
                Autonomy::Cautious
            ))[1],
            "approve"
        );
    }

    #[test]
    fn always_grants_turn_ask_into_auto_for_that_task_only() {
        let cfg = config(BTreeMap::new());
        let md = "## Recurring\n- [ ] @shell {\"cmd\": \"a\"}\n- [ ] @shell {\"cmd\": \"b\"}\n";
        let ids: Vec<String> = tasks(md).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        s.granted.insert(ids[0].clone());
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious)),
            vec!["run", "approve"]
        );
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Observe))[0],
            "observe"
        );
        // A changed input is a new task: it asks again.
        let md2 = md.replace("\"a\"", "\"a2\"");
        assert_eq!(
            words(&decide_all(&md2, &cfg, &s, NOON, Autonomy::Cautious))[0],
            "approve"
        );
    }

    #[test]
    fn a_task_marked_as_proposed_never_runs_unasked_in_any_state_dir() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "never".to_string(),
            ToolConfig {
                command: Some(vec!["true".into()]),
                approval: Some(Approval::Deny),
                ..ToolConfig::default()
            },
        );
        let cfg = config(tools);
        let mark = crate::markdown::parse::mark("agent");
        let md = format!(
            "## Recurring\n- [ ] @log {{\"text\": \"x\"}} {mark}\n- [ ] @shell {{\"cmd\": \"a\"}} {mark}\n\
             - [ ] @never {{}} {mark}\n- [ ] Stretch {mark}\n"
        );
        let ids: Vec<String> = tasks(&md).iter().map(|t| t.id.clone()).collect();
        // A fresh state dir knows nothing of it: the mark alone makes it ask, even for an
        // `auto` tool, in full autonomy, or with an always grant on its id.
        let mut fresh = Snapshot::default();
        fresh.granted.insert(ids[1].clone());
        for autonomy in [Autonomy::Cautious, Autonomy::Full] {
            assert_eq!(
                words(&decide_all(&md, &cfg, &fresh, NOON, autonomy)),
                vec!["approve", "approve", "denied_by_policy", "remind"],
                "{autonomy:?}"
            );
        }
        assert_eq!(
            words(&decide_all(&md, &cfg, &fresh, NOON, Autonomy::Observe))[..2],
            ["observe", "observe"]
        );
        // Once a person approved it here, ordinary policy.
        let mut released = Snapshot::default();
        released.released.insert(ids[0].clone());
        released.released.insert(ids[1].clone());
        assert_eq!(
            words(&decide_all(&md, &cfg, &released, NOON, Autonomy::Cautious))[..2],
            ["run", "approve"]
        );
        assert_eq!(
            words(&decide_all(&md, &cfg, &released, NOON, Autonomy::Full))[..2],
            ["run", "run"]
        );
    }

    #[test]
    fn outside_active_hours_everything_open_is_inactive() {
        let cfg = config(BTreeMap::new());
        let d = words(&decide_all(
            MD,
            &cfg,
            &Snapshot::default(),
            "2026-01-15T22:00:00Z",
            Autonomy::Full,
        ));
        assert_eq!(
            d,
            vec!["inactive", "inactive", "inactive", "done", "ignored"]
        );
    }

    #[test]
    fn cooldown_trips_and_budget() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "log".to_string(),
            ToolConfig {
                cooldown: Some(Duration::from_secs(3600)),
                ..ToolConfig::default()
            },
        );
        tools.insert(
            "paid".to_string(),
            ToolConfig {
                command: Some(vec!["true".into()]),
                approval: Some(Approval::Auto),
                cost_usd: Some(0.4),
                ..ToolConfig::default()
            },
        );
        let mut cfg = config(tools);
        cfg.daily_usd = 1.0;
        let md = "## Recurring\n- [ ] @log {\"text\": \"x\"}\n- [ ] @paid {}\n- [ ] @shell {\"cmd\": \"y\"}\n";
        let ids: Vec<String> = tasks(md).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious)),
            vec!["run", "run", "approve"]
        );
        // A log task started 30 minutes ago: the other waits out the hour.
        s.tool_last_start
            .insert("log".into(), "2026-01-15T08:30:00Z".parse().unwrap());
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious))[0],
            "not_due"
        );
        // 0.7 spent: the 0.4 task would pass the cap, the free ones may still run.
        s.spent_today = 0.7;
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious))[1..],
            ["budget", "approve"]
        );
        // The cap reached: nothing runs, free or not.
        s.spent_today = 1.0;
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious))[1..],
            ["budget", "budget"]
        );
        s.spent_today = 0.0;
        s.tripped.insert(ids[2].clone());
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious))[2],
            "tripped"
        );
        assert_eq!(Decision::Skip(SkipReason::Tripped).as_str(), "tripped");
        assert_eq!(Decision::Skip(SkipReason::Budget).as_str(), "budget");
        assert_eq!(Decision::Skip(SkipReason::RunCap).as_str(), "run_cap");
    }

    #[test]
    fn paused_is_inactive_unless_forced() {
        let cfg = config(BTreeMap::new());
        let s = Snapshot {
            paused: true,
            ..Snapshot::default()
        };
        assert_eq!(
            words(&decide_all(MD, &cfg, &s, NOON, Autonomy::Full)),
            vec!["inactive", "inactive", "inactive", "done", "ignored"]
        );
    }

    #[test]
    fn unknown_tools_and_bad_input_are_invalid() {
        let cfg = config(BTreeMap::new());
        let md = "## Recurring\n- [ ] @bakup {}\n- [ ] @shell {\"cwd\": \"/\"}\n";
        let d = decide_all(md, &cfg, &Snapshot::default(), NOON, Autonomy::Full);
        match &d[0] {
            Decision::Invalid {
                line,
                column,
                error,
            } => {
                assert_eq!((*line, *column), (2, 7));
                assert!(error.contains("unknown tool \"bakup\""), "{error}");
                for tool in ["append_file", "log", "shell", "write_file"] {
                    assert!(error.contains(tool), "{error}");
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(&d[1], Decision::Invalid { error, .. } if error.contains("cmd")),
            "{:?}",
            d[1]
        );
    }

    #[test]
    fn run_cap_skips_the_rest_in_file_order() {
        let mut cfg = config(BTreeMap::new());
        cfg.max_tasks_per_run = 2;
        let md = "## Recurring\n- [ ] @log {\"text\": \"1\"}\n- [ ] @shell {\"cmd\": \"q\"}\n- [ ] @log {\"text\": \"2\"}\n- [ ] @log {\"text\": \"3\"}\n";
        let d = words(&decide_all(
            md,
            &cfg,
            &Snapshot::default(),
            NOON,
            Autonomy::Cautious,
        ));
        assert_eq!(d, vec!["run", "approve", "run", "run_cap"]);
        // The one that waited runs next time, ahead of those that ran.
        let ids: Vec<String> = tasks(md).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        s.last_attempt
            .insert(ids[0].clone(), "2026-01-15T08:00:00Z".parse().unwrap());
        s.last_attempt
            .insert(ids[2].clone(), "2026-01-15T08:00:00Z".parse().unwrap());
        let d = words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious));
        assert_eq!(d, vec!["run", "approve", "run_cap", "run"]);
        cfg.max_tasks_per_run = 0;
        let d = words(&decide_all(
            md,
            &cfg,
            &Snapshot::default(),
            NOON,
            Autonomy::Cautious,
        ));
        assert_eq!(d, vec!["run", "approve", "run", "run"]);
    }

    #[test]
    fn one_time_reminders_and_successes_happen_once() {
        let cfg = config(BTreeMap::new());
        let md = "## One-time\n- [ ] Call the bank\n- [ ] @log {\"text\": \"x\"}\n";
        let ids: Vec<String> = tasks(md).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious)),
            vec!["remind", "run"]
        );
        s.reminded.insert(ids[0].clone());
        s.succeeded.insert(ids[1].clone());
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious)),
            vec!["reminded", "done"]
        );
    }

    #[test]
    fn plain_tasks_can_call_the_agent() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "agent".to_string(),
            ToolConfig {
                command: Some(vec!["my-agent".into()]),
                approval: Some(Approval::Auto),
                ..ToolConfig::default()
            },
        );
        let mut cfg = config(tools);
        cfg.plain_tasks = PlainTasks::Agent;
        let registry = Registry::new(&cfg.tools);
        let tasks = tasks("## Recurring\n- [ ] Summarise   my mail\n");
        let p = plan(
            &tasks.iter().collect::<Vec<_>>(),
            &PlanInput {
                config: &cfg,
                registry: &registry,
                state: &Snapshot::default(),
                now: NOON.parse().unwrap(),
                force: false,
                autonomy: Autonomy::Cautious,
                manual: false,
            },
        );
        let Decision::Run(call) = &p.items[0].decision else {
            panic!("{:?}", p.items[0].decision);
        };
        assert_eq!(call.name(), "agent");
        assert_eq!(
            call.input["prompt"],
            Value::String("Summarise   my mail".into())
        );
        assert_eq!(
            p.items[0].shown_tool(PlainTasks::Agent).as_deref(),
            Some("agent")
        );
    }

    #[test]
    fn a_manual_plan_ignores_schedule_and_cooldown_only() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "log".to_string(),
            ToolConfig {
                cooldown: Some(Duration::from_secs(3600)),
                ..ToolConfig::default()
            },
        );
        let cfg = config(tools);
        let md = "## Recurring\n### Every 6h\n- [ ] @log {\"text\": \"x\"}\n- [ ] @log {\"text\": \"y\"}\n- [ ] @shell {\"cmd\": \"z\"}\n";
        let ids: Vec<String> = tasks(md).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        for id in &ids {
            s.last_attempt
                .insert(id.clone(), "2026-01-15T08:30:00Z".parse().unwrap());
        }
        s.tool_last_start
            .insert("log".into(), "2026-01-15T08:30:00Z".parse().unwrap());
        let registry = Registry::new(&cfg.tools);
        let tasks = tasks(md);
        let decide = |manual: bool| {
            let p = plan(
                &tasks.iter().collect::<Vec<_>>(),
                &PlanInput {
                    config: &cfg,
                    registry: &registry,
                    state: &s,
                    now: NOON.parse().unwrap(),
                    force: false,
                    autonomy: Autonomy::Cautious,
                    manual,
                },
            );
            p.items
                .iter()
                .map(|i| i.decision.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(decide(false), vec!["not_due", "not_due", "not_due"]);
        // Both tasks of the cooled-down tool run; an `ask` tool still asks.
        assert_eq!(decide(true), vec!["run", "run", "approve"]);
    }

    #[test]
    fn a_snoozed_task_is_skipped_until_its_snooze_ends() {
        let cfg = config(BTreeMap::new());
        let md = "## Recurring\n### Every 6h\n- [ ] @log {\"text\": \"x\"}\n- [ ] Stretch\n";
        let ids: Vec<String> = tasks(md).iter().map(|t| t.id.clone()).collect();
        let mut s = Snapshot::default();
        let until: DateTime<Utc> = "2026-01-16T09:00:00Z".parse().unwrap();
        for id in &ids {
            s.snoozed.insert(id.clone(), until);
        }
        let registry = Registry::new(&cfg.tools);
        let tasks = tasks(md);
        let p = plan(
            &tasks.iter().collect::<Vec<_>>(),
            &PlanInput {
                config: &cfg,
                registry: &registry,
                state: &s,
                now: NOON.parse().unwrap(),
                force: false,
                autonomy: Autonomy::Full,
                manual: false,
            },
        );
        for item in &p.items {
            assert_eq!(item.decision, Decision::Skip(SkipReason::Snoozed));
            assert_eq!(item.decision.as_str(), "snoozed");
            // Due again the moment it ends (never attempted).
            assert_eq!(item.next_due, Some(until));
        }
    }

    #[test]
    fn schedules_decide_due_and_next_due() {
        let cfg = config(BTreeMap::new());
        let md = "## Recurring\n### Every 6h\n- [ ] @log {\"text\": \"x\"}\n";
        let id = tasks(md)[0].id.clone();
        let mut s = Snapshot::default();
        s.last_attempt
            .insert(id, "2026-01-15T07:00:00Z".parse().unwrap());
        let registry = Registry::new(&cfg.tools);
        let tasks = tasks(md);
        let p = plan(
            &tasks.iter().collect::<Vec<_>>(),
            &PlanInput {
                config: &cfg,
                registry: &registry,
                state: &s,
                now: NOON.parse().unwrap(),
                force: false,
                autonomy: Autonomy::Cautious,
                manual: false,
            },
        );
        assert_eq!(p.items[0].decision, Decision::NotDue);
        // An hour after the last attempt, less its slack of a minute.
        assert_eq!(
            p.items[0].next_due,
            Some("2026-01-15T12:59:00Z".parse().unwrap())
        );
    }

    #[test]
    fn a_waiting_retry_holds_the_task_and_a_due_one_runs_it_outside_its_schedule() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "flaky".to_string(),
            ToolConfig {
                command: Some(vec!["true".into()]),
                approval: Some(Approval::Auto),
                ..ToolConfig::default()
            },
        );
        let cfg = config(tools);
        let md = "## Recurring\n### Every 1d\n- [ ] @flaky {}\n";
        let id = tasks(md)[0].id.clone();
        let mut s = Snapshot::default();
        // Attempted at 09:00 today: not due again until tomorrow.
        s.last_attempt
            .insert(id.clone(), "2026-01-15T08:00:00Z".parse().unwrap());
        assert_eq!(
            words(&decide_all(md, &cfg, &s, NOON, Autonomy::Cautious)),
            ["not_due"]
        );
        let retry: DateTime<Utc> = "2026-01-15T09:01:00Z".parse().unwrap();
        s.retry_at.insert(id, retry);
        let registry = Registry::new(&cfg.tools);
        let tasks = tasks(md);
        let p = plan(
            &tasks.iter().collect::<Vec<_>>(),
            &PlanInput {
                config: &cfg,
                registry: &registry,
                state: &s,
                now: NOON.parse().unwrap(),
                force: false,
                autonomy: Autonomy::Cautious,
                manual: false,
            },
        );
        assert_eq!(p.items[0].decision, Decision::Retry(retry));
        assert_eq!(p.items[0].decision.as_str(), "retry");
        assert_eq!(p.items[0].next_due, Some(retry));
        assert_eq!(
            words(&decide_all(
                md,
                &cfg,
                &s,
                "2026-01-15T09:01:00Z",
                Autonomy::Cautious
            )),
            ["run"]
        );
        // A guardrail still holds it.
        s.paused = true;
        assert_eq!(
            words(&decide_all(
                md,
                &cfg,
                &s,
                "2026-01-15T09:01:00Z",
                Autonomy::Cautious
            )),
            ["inactive"]
        );
    }
}
