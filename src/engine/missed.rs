//! Missed slots (docs/reference.md#missed-slots): at each run, every slot of a calendar
//! schedule whose deadline passed without the task running or being queued is reported
//! once, with why; and what this run decides for a task's open slot is remembered, so that
//! a later run can say why it was missed.
//!
//! Invariants:
//! - A slot is reported at most once: the task's handled slot moves past it in the same
//!   transaction that remembers this run's decisions, before the lines are audited.
//! - Slots before a task was first seen, slots held for a person (observe, deny, a pending
//!   approval, a snooze in force), and slots that fell within a task's latest snooze, are
//!   never reported.
//! - At most [`LISTED`] slots are listed per task and run (the latest); one more line counts
//!   the rest.
//! - The slots are those of `schedule::slots`, the same that make a task due.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::config::Config;
use crate::model::Section;
use crate::plan::{Decision, Planned, SkipReason};
use crate::report::MissedSlot;
use crate::schedule::{Slot, has_slots, last_slot, slots};
use crate::store::{self, SlotChange, Store};

/// Slots listed per task and run; earlier ones are counted in one more line.
pub(crate) const LISTED: usize = 100;

/// The remembered reason of a slot held for a person: never reported.
const HELD: &str = "held";

/// The missed slots of the planned calendar tasks at `now`, oldest first per task; and
/// remember what this run decided for each task's open slot. `last_attempt` is each task's
/// latest attempt, as the plan read it; `unreachable` whether a run of this node was
/// skipped within a slot because a fleet's database could not be reached.
pub(crate) fn account(
    store: &mut dyn Store,
    items: &[Planned],
    last_attempt: &HashMap<String, DateTime<Utc>>,
    cfg: &Config,
    now: DateTime<Utc>,
    unreachable: &dyn Fn(&Slot) -> bool,
) -> store::Result<Vec<MissedSlot>> {
    let states = store.slot_states()?;
    // Slots that fell while a person had the task snoozed are not missed, whether or not a
    // run saw the snooze.
    let snoozed = store.snooze_windows()?;
    let mut changes = Vec::new();
    let mut missed = Vec::new();
    for item in items {
        let task = item.task;
        let schedule = task.schedule.as_ref();
        if task.section != Section::Recurring
            || !has_slots(schedule)
            || matches!(
                item.decision,
                Decision::Invalid { .. } | Decision::Ignored | Decision::Done
            )
        {
            continue;
        }
        let tz = task.zone_or(cfg.tz());
        let rules = crate::plan::slot_rules(cfg, task);
        let attempt = last_attempt.get(&task.id).copied();
        let attempted = |s: &Slot| attempt.is_some_and(|a| a >= s.at && a < s.deadline);
        let window = snoozed.get(&task.id);
        let in_snooze = |s: &Slot| window.is_some_and(|(from, to)| s.at >= *from && s.at < *to);
        let last = last_slot(schedule, tz, now, rules);
        let open = last.filter(|s| s.deadline > now);
        // Every slot whose deadline has passed is handled after this run.
        let closed = match (last, open) {
            (Some(_), Some(o)) => Some(o.at - TimeDelta::milliseconds(1)),
            (Some(l), None) => Some(l.at),
            (None, _) => None,
        };
        let mut change = SlotChange {
            task_id: task.id.clone(),
            handled: closed.or(Some(now)),
            skip: None,
        };
        // A task that waits for a person now waited through its passed slots too: they
        // were not meant to run, and are not reported.
        let held = held(&item.decision);
        if let Some(state) = states.get(&task.id).filter(|_| !held) {
            let passed: Vec<Slot> = slots(schedule, tz, state.handled, now, rules)
                .take_while(|s| s.deadline <= now)
                .filter(|s| !attempted(s) && !in_snooze(s))
                .collect();
            let reason_of = |store: &dyn Store, s: &Slot| -> store::Result<String> {
                Ok(match &state.skip {
                    Some((r, at)) if *at >= s.at && *at < s.deadline => r.clone(),
                    _ => match store.run_skip_between(s.at, s.deadline)? {
                        Some(reason) => reason,
                        // A fleet's run skipped while its database was down could not say
                        // so in it; this node's own log did.
                        None if unreachable(s) => "store_unavailable".to_string(),
                        // Not run in time, and not run late either.
                        None if s.by_lateness => "too_late".to_string(),
                        None => "no_run".to_string(),
                    },
                })
            };
            // The latest first, up to the listed number; the earlier rest on one line.
            let mut lines = Vec::new();
            let mut rest = passed.len();
            for s in passed.iter().rev() {
                if lines.len() == LISTED {
                    break;
                }
                rest -= 1;
                let reason = reason_of(&*store, s)?;
                if reason != HELD {
                    lines.push((s.at, reason, None));
                }
            }
            if rest > 0 {
                let earliest = &passed[0];
                lines.push((earliest.at, reason_of(&*store, earliest)?, Some(rest)));
            }
            for (slot, reason, count) in lines.into_iter().rev() {
                missed.push(MissedSlot {
                    task_id: task.id.clone(),
                    file: task.file.clone(),
                    line: task.line,
                    tool: task.tool_name().map(str::to_string),
                    slot,
                    reason,
                    count,
                });
            }
        }
        // What this run does with the open slot.
        if let Some(o) = open.filter(|o| !attempted(o)) {
            match &item.decision {
                Decision::Run(_) | Decision::Approve(_) | Decision::Remind => {
                    change.handled = Some(o.at);
                }
                Decision::Skip(
                    r @ (SkipReason::Budget | SkipReason::Tripped | SkipReason::RunCap),
                ) => {
                    change.skip = Some(r.as_str().to_string());
                }
                // Due by its schedule, held back by its tool's cooldown.
                Decision::NotDue => change.skip = Some("cooldown".into()),
                Decision::Inactive => change.skip = Some("outside_active_hours".into()),
                _ if held => change.skip = Some(HELD.into()),
                _ => {}
            }
        }
        // Only what moves: most runs change nothing, and write nothing.
        let state = states.get(&task.id);
        let moved = match (state, change.handled) {
            (Some(st), Some(h)) => h > st.handled,
            (None, _) => true,
            (Some(_), None) => false,
        };
        if moved || change.skip.is_some() {
            changes.push(change);
        }
    }
    let reported: usize = missed.iter().map(|m| m.count.unwrap_or(1)).sum();
    store.save_slots(&changes, reported as u64, now)?;
    Ok(missed)
}

/// Whether the decision holds the task for a person (or by policy, or a person's snooze):
/// its slots are not meant to run, and are not reported missed.
fn held(decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::Pending(_)
            | Decision::Approved(_)
            | Decision::Denied
            | Decision::Skip(
                SkipReason::Observe | SkipReason::DeniedByPolicy | SkipReason::Snoozed
            )
    )
}
