//! Dead-man pings (docs/reference.md#monitors): telling an outside watcher that runs happen.
//! `[[monitors]]` are pinged around each run (`healthchecks`: `/start`, then success or
//! `/fail` with the run's summary; `uptime_kuma`: one push at the end; `url`: plain GETs),
//! and a tool's `monitor_url_env` around each run of its tasks.
//!
//! Invariants:
//! - A ping is at most [`TRIES`] requests within [`BUDGET`] in all, through the bounded
//!   request of `notify::http`; it is never queued (a late ping lies) and never fails the
//!   run: what went wrong comes back as a [`Failure`] for the caller to audit
//!   (`monitor_ping_failed`).
//! - URLs are secrets, read from their variables when pinging ([`take_env`]: registered for
//!   redaction, gone from tools' environments); no error names one (`notify::http` strips
//!   it), and what is sent is redacted text.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::Url;

use crate::config::{MonitorConfig, MonitorKind};
use crate::net::SendError;
use crate::notify::http::{self, Request};
use crate::redact::{Secrets, take_env};
use crate::report::Report;
use crate::text::Redacted;

/// Requests per ping, at most.
const TRIES: usize = 3;
/// All the tries of one ping together.
const BUDGET: Duration = Duration::from_secs(5);
/// The pause before trying again.
const PAUSE: Duration = Duration::from_millis(200);
/// A healthchecks body, at most (bytes).
const BODY_MAX: usize = 10 * 1024;
/// An Uptime Kuma `msg`, at most (characters).
const MSG_MAX: usize = 200;

/// A ping that did not go through: the monitor's name and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Failure {
    pub monitor: String,
    pub error: String,
}

/// How a run ended, for the pings at its end.
pub(crate) struct End<'a> {
    /// A task failed, was invalid or tripped.
    pub failed: bool,
    /// The run's summary, or why it skipped its tasks.
    pub summary: &'a Redacted,
    pub duration: Duration,
}

/// What a run's pings carry: a first line with the run's id and what it did (the counts,
/// why it skipped its tasks, or that nothing was due), then the lines the terminal shows for
/// its tasks.
pub(crate) fn summary(report: &Report, cwd: &Path, secrets: &Secrets) -> Redacted {
    let mut parts: Vec<String> = report
        .skipped
        .map(|r| format!("skipped: {}", r.as_str().replace('_', " ")))
        .into_iter()
        .collect();
    parts.extend(report.tally_words());
    if parts.is_empty() {
        parts.push("nothing was due".into());
    }
    let mut text = format!("heartbeat run {}: {}", report.run_id, parts.join(", "));
    // The terminal's last line repeats the counts.
    for line in crate::render::terminal::report(report, false, true, cwd)
        .iter()
        .filter(|l| !l.starts_with("heartbeat: "))
    {
        text.push('\n');
        text.push_str(line);
    }
    // The lines are made of redacted parts; once more for what joined them.
    secrets.redact(&text)
}

/// The `rid` of a run's pings: the run id as the last group of a UUID
/// (`00000000-0000-4000-8000-<run id>`), which healthchecks pairs `/start` with its end by.
pub(crate) fn rid(run_id: &str) -> String {
    format!("00000000-0000-4000-8000-{run_id:0>12}")
}

/// The pings when a run took the lock: healthchecks' `/start`, a url monitor's start URL.
pub(crate) fn run_started(monitors: &[MonitorConfig], run_id: &str) -> Vec<Failure> {
    let mut failures = Vec::new();
    for m in monitors {
        let sent = match &m.kind {
            MonitorKind::Healthchecks { url_env } => healthchecks(url_env, "/start", run_id, None),
            MonitorKind::Url {
                start_url_env: Some(var),
                ..
            } => get(var),
            MonitorKind::Url { .. } | MonitorKind::UptimeKuma { .. } => Ok(()),
        };
        if let Err(error) = sent {
            failures.push(Failure {
                monitor: m.name.clone(),
                error,
            });
        }
    }
    failures
}

/// The pings when a run ended: healthchecks' success or `/fail` with the summary as body,
/// Uptime Kuma's push, a url monitor's success or fail URL.
pub(crate) fn run_ended(monitors: &[MonitorConfig], run_id: &str, end: &End) -> Vec<Failure> {
    let mut failures = Vec::new();
    for m in monitors {
        let sent = match &m.kind {
            MonitorKind::Healthchecks { url_env } => {
                let body = body(end.summary);
                let path = if end.failed { "/fail" } else { "" };
                healthchecks(url_env, path, run_id, Some(body.as_str()))
            }
            MonitorKind::UptimeKuma { url_env } => uptime_kuma(url_env, end),
            MonitorKind::Url {
                success_url_env,
                fail_url_env,
                ..
            } => match if end.failed {
                fail_url_env
            } else {
                success_url_env
            } {
                Some(var) => get(var),
                None => Ok(()),
            },
        };
        if let Err(error) = sent {
            failures.push(Failure {
                monitor: m.name.clone(),
                error,
            });
        }
    }
    failures
}

/// A healthchecks body: the summary, cut to at most [`BODY_MAX`] bytes with its note of
/// what was left out.
fn body(summary: &Redacted) -> Redacted {
    summary.truncate(BODY_MAX - 32, 0)
}

/// A tool's `monitor_url_env` when one of its tasks starts (`/start`), or ends (`ok`:
/// success, else `/fail`).
pub(crate) fn tool_ping(
    tool: &str,
    url_env: &str,
    run_id: &str,
    ended: Option<bool>,
) -> Option<Failure> {
    let path = match ended {
        None => "/start",
        Some(true) => "",
        Some(false) => "/fail",
    };
    let body = ended.map(|_| "");
    healthchecks(url_env, path, run_id, body)
        .err()
        .map(|error| Failure {
            monitor: format!("tools.{tool}"),
            error,
        })
}

/// The URL in `var`, or why there is none.
fn url_of(var: &str) -> Result<Url, String> {
    let value = take_env(var).ok_or_else(|| format!("${var} is not set"))?;
    Url::parse(&value).map_err(|e| format!("${var} does not hold a URL: {e}"))
}

/// A healthchecks ping: `<url><path>?rid=…`, a POST with `body` when there is one.
fn healthchecks(var: &str, path: &str, run_id: &str, body: Option<&str>) -> Result<(), String> {
    let mut url = url_of(var)?;
    let joined = format!("{}{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.query_pairs_mut().append_pair("rid", &rid(run_id));
    let req = match body {
        Some(text) => Request {
            post: true,
            url: url.into(),
            headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
            body: text.as_bytes().to_vec(),
        },
        None => get_request(url),
    };
    send(req)
}

/// Uptime Kuma's push: `status`, `msg` and `ping` set, replacing those the URL carries.
fn uptime_kuma(var: &str, end: &End) -> Result<(), String> {
    let mut url = url_of(var)?;
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| !matches!(k.as_ref(), "status" | "msg" | "ping"))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let msg = end.summary.first_line(MSG_MAX - 1);
    url.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("status", if end.failed { "down" } else { "up" })
        .append_pair("msg", msg.as_str())
        .append_pair("ping", &end.duration.as_millis().to_string());
    send(get_request(url))
}

/// A plain GET of the URL in `var`.
fn get(var: &str) -> Result<(), String> {
    send(get_request(url_of(var)?))
}

fn get_request(url: Url) -> Request {
    Request {
        post: false,
        url: url.into(),
        headers: Vec::new(),
        body: Vec::new(),
    }
}

/// Up to [`TRIES`] tries within [`BUDGET`]; an answer that can never succeed (a 4xx) is
/// not tried again.
fn send(req: Request) -> Result<(), String> {
    let deadline = Instant::now() + BUDGET;
    let (mut last, mut tries) = (String::new(), 0);
    while tries < TRIES {
        // `notify::http::send` may wait a quarter second past its timeout.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(Duration::from_millis(300));
        if left.is_zero() {
            break;
        }
        tries += 1;
        match http::send(req.clone(), left) {
            Ok(_) => return Ok(()),
            Err(SendError::Rejected(why)) => {
                return Err(format!("{why} (refused: not tried again)"));
            }
            Err(e) => last = e.message().to_string(),
        }
        if tries < TRIES {
            std::thread::sleep(PAUSE.min(deadline.saturating_duration_since(Instant::now())));
        }
    }
    Err(format!(
        "{last} (gave up after {tries} of at most {TRIES} tries within {}s)",
        BUDGET.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_the_last_group_of_a_uuid() {
        assert_eq!(rid("0123456789ab"), "00000000-0000-4000-8000-0123456789ab");
    }

    #[test]
    fn a_body_is_at_most_10_kb() {
        let long = Secrets::default().redact(&"é task line\n".repeat(5000));
        let cut = body(&long);
        assert!(cut.as_str().len() <= BODY_MAX, "{}", cut.as_str().len());
        assert!(cut.as_str().ends_with(" more bytes]"));
        let short = Secrets::default().redact("heartbeat run 0123456789ab: 1 succeeded");
        assert_eq!(body(&short), short);
    }

    #[test]
    fn a_missing_variable_is_a_failure_naming_it_and_no_request() {
        let monitors = [MonitorConfig {
            name: "hc".into(),
            kind: MonitorKind::Healthchecks {
                url_env: "HEARTBEAT_TEST_MONITOR_UNSET".into(),
            },
        }];
        assert_eq!(
            run_started(&monitors, "0123456789ab"),
            [Failure {
                monitor: "hc".into(),
                error: "$HEARTBEAT_TEST_MONITOR_UNSET is not set".into()
            }]
        );
    }
}
