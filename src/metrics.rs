//! `heartbeat metrics` as data and as Prometheus text exposition format 0.0.4
//! (docs/reference.md#metrics), written by hand: `# HELP` and `# TYPE` for every family,
//! label values escaped (`\\`, `\"`, `\n`), one sample per line, a final line break. Pure:
//! the values come from the state ([`crate::store::Metrics`]), read by `engine/metrics.rs`.

use std::fmt::Write;

use chrono::{DateTime, Utc};

/// The run results that are always shown, 0 until counted.
const RESULTS: [&str; 3] = ["ok", "failed", "skipped"];

/// What the metrics show.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Values {
    /// When the latest run started (Unix seconds), skipped ones too.
    pub last_run: Option<i64>,
    /// `(result, total)`.
    pub runs: Vec<(String, u64)>,
    /// `(tool, outcome, total)`; the tool is `""` for a task without one (a reminder).
    pub tasks: Vec<(String, String, u64)>,
    pub missed_slots: u64,
    /// `(task_id, tool of that success, when)`.
    pub last_successes: Vec<(String, String, DateTime<Utc>)>,
    pub approvals_pending: i64,
    pub tasks_tripped: i64,
    /// Spent since local midnight, in USD.
    pub spent_today: f64,
    /// `(channel, messages waiting)`.
    pub queued: Vec<(String, i64)>,
}

/// The exposition text of `v`.
pub(crate) fn exposition(v: &Values) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    family(
        "heartbeat_last_run_timestamp_seconds",
        "gauge",
        "When the latest run started (skipped ones too), as Unix time.",
        v.last_run
            .map(|t| (String::new(), t.to_string()))
            .into_iter()
            .collect(),
    );
    let mut runs: Vec<(String, u64)> = RESULTS.iter().map(|r| (r.to_string(), 0)).collect();
    for (result, n) in &v.runs {
        match runs.iter_mut().find(|(r, _)| r == result) {
            Some(entry) => entry.1 = *n,
            None => runs.push((result.clone(), *n)),
        }
    }
    family(
        "heartbeat_runs_total",
        "counter",
        "Runs, by result: ok, failed (a task failed, was invalid or tripped) or skipped (paused, outside active hours).",
        runs.iter()
            .map(|(r, n)| (labels(&[("result", r)]), n.to_string()))
            .collect(),
    );
    family(
        "heartbeat_tasks_total",
        "counter",
        "Task outcomes, by tool and outcome (the outcomes of run --json).",
        v.tasks
            .iter()
            .map(|(tool, outcome, n)| {
                (
                    labels(&[("tool", tool), ("outcome", outcome)]),
                    n.to_string(),
                )
            })
            .collect(),
    );
    family(
        "heartbeat_task_last_success_timestamp_seconds",
        "gauge",
        "When each task last succeeded, as Unix time.",
        v.last_successes
            .iter()
            .map(|(task, tool, at)| {
                (
                    labels(&[("task_id", task), ("tool", tool)]),
                    at.timestamp().to_string(),
                )
            })
            .collect(),
    );
    family(
        "heartbeat_approvals_pending",
        "gauge",
        "Approvals waiting for a decision.",
        vec![(String::new(), v.approvals_pending.to_string())],
    );
    family(
        "heartbeat_tasks_tripped",
        "gauge",
        "Tasks stopped by the failure breaker until heartbeat reset.",
        vec![(String::new(), v.tasks_tripped.to_string())],
    );
    family(
        "heartbeat_missed_slots_total",
        "counter",
        "Schedule slots reported missed.",
        vec![(String::new(), v.missed_slots.to_string())],
    );
    family(
        "heartbeat_spent_usd_today",
        "gauge",
        "Spent since local midnight, in USD.",
        vec![(String::new(), number(v.spent_today))],
    );
    family(
        "heartbeat_deliveries_queued",
        "gauge",
        "Messages waiting in the outbox, by channel.",
        v.queued
            .iter()
            .map(|(channel, n)| (labels(&[("channel", channel)]), n.to_string()))
            .collect(),
    );
    out
}

/// `{a="x",b="y"}`, each value escaped.
fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A label value as the text format writes it: `\` as `\\`, `"` as `\"`, a line break as `\n`.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A float as the text format writes it (`+Inf`, `-Inf`, `NaN`, else Rust's shortest form).
fn number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        x.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_help_and_type_and_zero_runs_are_shown() {
        let text = exposition(&Values::default());
        for name in [
            "heartbeat_last_run_timestamp_seconds",
            "heartbeat_runs_total",
            "heartbeat_tasks_total",
            "heartbeat_task_last_success_timestamp_seconds",
            "heartbeat_approvals_pending",
            "heartbeat_tasks_tripped",
            "heartbeat_missed_slots_total",
            "heartbeat_spent_usd_today",
            "heartbeat_deliveries_queued",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}\n{text}");
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}\n{text}");
        }
        assert!(text.contains("heartbeat_runs_total{result=\"skipped\"} 0\n"));
        assert!(!text.contains("\nheartbeat_last_run_timestamp_seconds "));
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn label_values_are_escaped_and_floats_written_as_the_format_says() {
        let v = Values {
            tasks: vec![("a\"b\\c\nd".into(), "failed".into(), 2)],
            spent_today: 0.25,
            ..Values::default()
        };
        let text = exposition(&v);
        assert!(
            text.contains("heartbeat_tasks_total{tool=\"a\\\"b\\\\c\\nd\",outcome=\"failed\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("heartbeat_spent_usd_today 0.25\n"));
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(0.0), "0");
    }
}
