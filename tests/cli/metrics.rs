//! `heartbeat metrics` and `[metrics] textfile` (docs/reference.md#metrics): the output read
//! by a strict parser of Prometheus text format 0.0.4 written here, values against what the
//! runs did, totals that survive retention, and a textfile no reader ever sees half-written.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{Env, NOW};

/// A series: its name and its labels in order.
type Series = (String, Vec<(String, String)>);

/// Parse `text` as the text format, strictly: every family has `# HELP` then `# TYPE`
/// (`counter` or `gauge`) before its samples, samples of a family follow it, names and label
/// names are valid, label values use only the three escapes, no series twice, a counter's
/// name ends in `_total`, and the text ends with a line break. Panics on anything else.
fn parse(text: &str) -> BTreeMap<Series, f64> {
    assert!(text.ends_with('\n'), "no final line break: {text:?}");
    let name_ok = |n: &str| {
        let mut c = n.chars();
        c.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut samples = BTreeMap::new();
    let mut families: Vec<String> = Vec::new();
    // The family whose samples may follow, once typed.
    let mut current: Option<(String, bool)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(name_ok(name) && !help.is_empty(), "{line}");
            assert!(
                !families.contains(&name.to_string()),
                "family twice: {line}"
            );
            families.push(name.to_string());
            current = Some((name.to_string(), false));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            let (cur, typed) = current.as_mut().expect("TYPE after HELP");
            assert!(cur == name && !*typed, "TYPE of another family: {line}");
            assert!(kind == "counter" || kind == "gauge", "{line}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "{line}");
            }
            *typed = true;
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (cur, typed) = current.as_ref().expect("a sample before any family");
        assert!(typed, "a sample before TYPE: {line}");
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').expect("}"))),
        };
        assert_eq!(name, cur, "a sample outside its family: {line}");
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line}")),
        };
        let key = (name.to_string(), labels);
        assert!(samples.insert(key, value).is_none(), "series twice: {line}");
    }
    samples
}

/// `a="x",b="y"`.
fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name {name:?} in {text}"
        );
        assert_eq!(chars.next(), Some('"'), "{text}");
        let mut value = String::new();
        loop {
            match chars.next().expect("an unterminated label value") {
                '"' => break,
                '\\' => match chars.next() {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => panic!("bad escape {other:?} in {text}"),
                },
                '\n' => panic!("a raw line break in {text}"),
                c => value.push(c),
            }
        }
        out.push((name, value));
        match chars.next() {
            None => break,
            Some(',') => {}
            other => panic!("{other:?} after a label in {text}"),
        }
    }
    out
}

fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    (
        name.to_string(),
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn metrics(env: &Env, now: &str) -> BTreeMap<Series, f64> {
    let out = env.cmd(["metrics"]).now(now).output();
    out.code(0);
    parse(&out.stdout)
}

fn unix(rfc3339: &str) -> f64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .timestamp() as f64
}

#[test]
fn the_parser_refuses_what_the_format_does_not_allow() {
    let ok = "# HELP a_total x\n# TYPE a_total counter\na_total{l=\"q\\\"\\\\\\n\"} 1\n";
    assert_eq!(parse(ok)[&series("a_total", &[("l", "q\"\\\n")])], 1.0);
    for bad in [
        "# TYPE a gauge\na 1\n",
        "# HELP a x\na 1\n",
        "# HELP a x\n# TYPE a gauge\nb 1\n",
        "# HELP a x\n# TYPE a counter\na 1\n",
        "# HELP a x\n# TYPE a gauge\na{l=\"\\t\"} 1\n",
        "# HELP a x\n# TYPE a gauge\na 1",
        "# HELP a x\n# TYPE a gauge\na 1\na 2\n",
        "# HELP a x\n# TYPE a gauge\na one\n",
    ] {
        assert!(
            std::panic::catch_unwind(|| parse(bad)).is_err(),
            "accepted {bad:?}"
        );
    }
}

#[test]
fn without_a_state_dir_every_total_is_zero_and_nothing_is_created() {
    let env = Env::new("");
    let m = metrics(&env, NOW);
    for result in ["ok", "failed", "skipped"] {
        assert_eq!(
            m[&series("heartbeat_runs_total", &[("result", result)])],
            0.0
        );
    }
    assert_eq!(m[&series("heartbeat_missed_slots_total", &[])], 0.0);
    assert_eq!(m[&series("heartbeat_approvals_pending", &[])], 0.0);
    assert!(!m.contains_key(&series("heartbeat_last_run_timestamp_seconds", &[])));
    assert!(!env.state().exists());
}

#[test]
fn the_values_are_what_the_runs_did() {
    let md = "## Recurring\n\
              - [ ] @shell {\"cmd\": \"echo fine\"}\n\
              - [ ] @shell {\"cmd\": \"exit 3\"}\n\
              - [ ] Water the plants\n\
              - [ ] @ask_me {}\n";
    let env = Env::new(md).config(
        "timezone = \"UTC\"\nmax_consecutive_failures = 1\n\
         [tools.shell]\napproval = \"auto\"\ncost_usd = 0.5\n\
         [tools.ask_me]\ncommand = [\"true\"]\napproval = \"ask\"\n\
         [channels.team]\nkind = \"slack\"\nurl_env = \"HB_METRICS_UNSET\"\n",
    );
    env.run_once(NOW).code(1);
    let later = "2026-05-01T11:00:00Z";
    env.cmd(["pause"]).now(later).output().code(0);
    env.run_once(later).code(0);
    let ok_task = env.events("task_succeeded")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();

    let m = metrics(&env, "2026-05-01T12:00:00Z");
    let runs = |r| m[&series("heartbeat_runs_total", &[("result", r)])];
    assert_eq!(
        (runs("ok"), runs("failed"), runs("skipped")),
        (0.0, 1.0, 1.0)
    );
    let tasks: BTreeMap<(String, String), f64> = m
        .iter()
        .filter(|((name, _), _)| name == "heartbeat_tasks_total")
        .map(|((_, labels), v)| ((labels[0].1.clone(), labels[1].1.clone()), *v))
        .collect();
    let want: BTreeMap<(String, String), f64> = [
        (("", "reminded"), 1.0),
        (("ask_me", "queued"), 1.0),
        (("shell", "failed"), 1.0),
        (("shell", "succeeded"), 1.0),
    ]
    .into_iter()
    .map(|((t, o), v)| ((t.to_string(), o.to_string()), v))
    .collect();
    assert_eq!(tasks, want);
    assert_eq!(
        m[&series("heartbeat_last_run_timestamp_seconds", &[])],
        unix(later)
    );
    let success = m[&series(
        "heartbeat_task_last_success_timestamp_seconds",
        &[("task_id", &ok_task), ("tool", "shell")],
    )];
    assert!(success >= unix(NOW) && success < unix(later), "{success}");
    assert_eq!(m[&series("heartbeat_approvals_pending", &[])], 1.0);
    assert_eq!(m[&series("heartbeat_tasks_tripped", &[])], 1.0);
    assert_eq!(m[&series("heartbeat_spent_usd_today", &[])], 1.0);
    let queued: f64 = env
        .db()
        .query_row(
            "SELECT COUNT(*) FROM outbox WHERE channel = 'team'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as f64;
    assert!(queued > 0.0);
    assert_eq!(
        m[&series("heartbeat_deliveries_queued", &[("channel", "team")])],
        queued
    );
    assert_eq!(m[&series("heartbeat_missed_slots_total", &[])], 0.0);
    // The next day the day's spend starts again.
    let next_day = metrics(&env, "2026-05-02T09:00:00Z");
    assert_eq!(next_day[&series("heartbeat_spent_usd_today", &[])], 0.0);
}

#[test]
fn totals_never_fall_when_retention_prunes_the_history_they_counted() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n")
        .config("timezone = \"UTC\"\n[retention]\nhistory = \"1d\"\n");
    let first = "2026-05-01T10:00:00Z";
    env.run_once(first).code(0);
    let before = metrics(&env, first);
    let total = |m: &BTreeMap<Series, f64>| {
        (
            m[&series("heartbeat_runs_total", &[("result", "ok")])],
            m[&series(
                "heartbeat_tasks_total",
                &[("tool", "log"), ("outcome", "succeeded")],
            )],
        )
    };
    assert_eq!(total(&before), (1.0, 1.0));
    let later = "2026-06-01T10:00:00Z";
    env.run_once(later).code(0);
    let pruned = env.events("state_pruned");
    assert!(
        pruned.iter().any(|e| e["rows"].as_u64().unwrap() > 0),
        "{pruned:?}"
    );
    let runs_left: i64 = env
        .db()
        .query_row("SELECT COUNT(*) FROM task_runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs_left, 1, "the first run's history is gone");
    assert_eq!(total(&metrics(&env, later)), (2.0, 2.0));
}

#[test]
fn the_textfile_is_rewritten_whole_after_every_run_skipped_ones_too() {
    let env = Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n")
        .config("timezone = \"UTC\"\n[metrics]\ntextfile = \"prom/heartbeat.prom\"\n");
    std::fs::create_dir_all(env.path("prom")).unwrap();
    std::fs::create_dir_all(env.path("elsewhere")).unwrap();
    let path = env.path("prom/heartbeat.prom");

    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            let mut whole = 0;
            while !stop.load(Ordering::SeqCst) {
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        parse(&text);
                        // The last family is there: the text was read whole.
                        assert!(
                            text.contains("# TYPE heartbeat_deliveries_queued gauge\n"),
                            "cut short: {text}"
                        );
                        whole += 1;
                    }
                    Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
                }
            }
            whole
        })
    };
    for i in 0..20 {
        let now = format!("2026-05-01T{:02}:00:00Z", 2 + i);
        // From another directory: the path is the config file's directory's.
        env.cmd(["run", "--once"])
            .now(&now)
            .in_dir(env.path("elsewhere"))
            .output()
            .code(0);
    }
    stop.store(true, Ordering::SeqCst);
    let whole = reader.join().expect("every read parsed whole");
    assert!(whole > 0, "the reader never saw the file");
    let last = "2026-05-01T21:00:00Z";
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, env.cmd(["metrics"]).now(last).output().stdout);
    assert_eq!(
        parse(&text)[&series("heartbeat_runs_total", &[("result", "ok")])],
        20.0
    );
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(env.path("prom"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["heartbeat.prom"]);

    // A skipped run writes it too.
    std::fs::remove_file(&path).unwrap();
    env.cmd(["pause"]).output().code(0);
    env.run_once("2026-05-01T22:00:00Z").code(0);
    let m = parse(&std::fs::read_to_string(&path).unwrap());
    assert_eq!(
        m[&series("heartbeat_runs_total", &[("result", "skipped")])],
        1.0
    );
}

#[test]
fn an_interrupted_task_is_counted_once_as_interrupted() {
    let env = Env::new(
        "## One-time\n- [ ] @shell {\"cmd\": \"true\"}\n\n## Recurring\n- [ ] @ask_me {}\n",
    )
    .config(
        "timezone = \"UTC\"\n[tools.shell]\napproval = \"auto\"\n\
             [tools.ask_me]\ncommand = [\"true\"]\napproval = \"ask\"\n",
    );
    // The one-time task's start is recorded, then the run dies before its outcome.
    let out = env
        .cmd(["run", "--once"])
        .env("HEARTBEAT_FAULT", "task_done")
        .output();
    assert_eq!(out.code, None, "not aborted: {}", out.stderr);
    // The next run reports it and queues the approval, which is claimed, then `approve`
    // dies.
    env.run_once(NOW).code(1);
    let out = env
        .cmd(["approve", "1"])
        .env("HEARTBEAT_FAULT", "approval_claimed")
        .output();
    assert_eq!(out.code, None, "not aborted: {}", out.stderr);
    env.run_once(NOW).code(1);
    let interrupted: Vec<_> = env
        .events("task_failed")
        .into_iter()
        .filter(|e| e["reason"] == "interrupted")
        .collect();
    assert_eq!(interrupted.len(), 2, "{interrupted:?}");

    let m = metrics(&env, NOW);
    let tasks: Vec<(String, String, f64)> = m
        .iter()
        .filter(|((name, _), _)| name == "heartbeat_tasks_total")
        .map(|((_, l), v)| (l[0].1.clone(), l[1].1.clone(), *v))
        .collect();
    assert_eq!(
        tasks,
        [
            ("ask_me".to_string(), "interrupted".to_string(), 1.0),
            // Queued by the second run, and again by the third once interrupted.
            ("ask_me".to_string(), "queued".to_string(), 2.0),
            ("shell".to_string(), "interrupted".to_string(), 1.0),
        ]
    );
}

#[test]
fn metrics_read_the_state_dir_under_a_broken_config_too() {
    let env =
        Env::new("## Recurring\n- [ ] @log {\"text\": \"hi\"}\n").config("timezone = \"UTC\"\n");
    env.run_once(NOW).code(0);
    env.write(
        "heartbeat.toml",
        "timezone = \"UTC\"\nactive_hours = \"8am-5pm\"\n",
    );
    let out = env.cmd(["metrics"]).output();
    out.code(0);
    assert!(out.stderr.contains("warning"), "{}", out.stderr);
    let m = parse(&out.stdout);
    assert_eq!(m[&series("heartbeat_runs_total", &[("result", "ok")])], 1.0);
}
