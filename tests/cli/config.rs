//! Config errors (SPEC §3): exit 2, `heartbeat: ` + file + key + value on stderr, nothing
//! written, never a silent fallback.

use crate::common::*;

const MD: &str = "## Recurring\n- [ ] @log {\"text\": \"x\"}\n";

/// Run `check` and `run --once` with this config; both must refuse it the same way.
#[track_caller]
fn refused(toml: &str, must_mention: &[&str]) {
    let env = Env::new(MD).config(toml);
    let config_path = env.path("heartbeat.toml").display().to_string();
    for args in [&["check"][..], &["run", "--once"][..]] {
        let out = env.cmd(args).output();
        out.code(2);
        assert!(
            out.stderr.starts_with("heartbeat: "),
            "config {toml:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&config_path),
            "config {toml:?}: the file is named: {}",
            out.stderr
        );
        for word in must_mention {
            assert!(
                out.stderr.contains(word),
                "config {toml:?}: stderr lacks {word:?}: {}",
                out.stderr
            );
        }
        assert_eq!(out.stdout, "", "config {toml:?}");
    }
    assert!(!env.state().exists(), "config {toml:?}: nothing written");
}

#[test]
fn unknown_keys_are_refused_naming_the_key() {
    refused("autonomy = \"full\"\nautonmy = \"observe\"\n", &["autonmy"]);
    refused("[tools.shell]\napprovel = \"auto\"\n", &["approvel"]);
}

#[test]
fn malformed_active_hours_are_refused() {
    refused("active_hours = \"8am-22:00\"\n", &["active_hours", "8am"]);
    refused(
        "active_hours = \"08:00-24:30\"\n",
        &["active_hours", "24:30"],
    );
    refused(
        "active_hours = \"25:00-23:00\"\n",
        &["active_hours", "25:00"],
    );
    refused(
        "active_hours = \"08:00-08:00\"\n",
        &["active_hours", "08:00-08:00"],
    );
    refused(
        "active_hours = \"24:00-06:00\"\n",
        &["active_hours", "24:00"],
    );
    refused("active_hours = \"08:00\"\n", &["active_hours", "08:00"]);
}

#[test]
fn bad_timezone_day_and_duration_are_refused() {
    refused(
        "timezone = \"Mars/Olympus_Mons\"\n",
        &["timezone", "Mars/Olympus_Mons"],
    );
    refused(
        "active_days = [\"mon\", \"funday\"]\n",
        &["active_days", "funday"],
    );
    refused("approval_ttl = \"soon\"\n", &["approval_ttl", "soon"]);
    refused(
        "stuck_after = \"5 parsecs\"\n",
        &["stuck_after", "5 parsecs"],
    );
    refused(
        "[tools.shell]\ntimeout = \"forever\"\n",
        &["timeout", "forever"],
    );
    refused("autonomy = \"yolo\"\n", &["autonomy", "yolo"]);
}

#[test]
fn features_not_built_yet_are_refused_not_ignored() {
    for (toml, key) in [
        (
            "[telegram]\nbot_token_env = \"T\"\nchat_ids = [1]\n",
            "telegram",
        ),
        ("[budget]\ndaily_usd = 5.0\n", "budget"),
        ("[daemon]\nevery = \"30m\"\n", "daemon"),
        (
            "[tools.backup]\ncommand = [\"true\"]\ncooldown = \"1h\"\n",
            "cooldown",
        ),
    ] {
        refused(toml, &[key, "not supported yet"]);
    }
}

#[test]
fn a_valid_config_is_used() {
    // The counterpart of the refusals: the same keys, well-formed, load and apply.
    let env = Env::new(MD).config(
        r#"timezone = "Europe/Berlin"
active_hours = "22:00-24:00"
active_days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
autonomy = "observe"
approval_ttl = "12h"
stuck_after = "10m"

[tools.shell]
timeout = "30s"
"#,
    );
    // 21:59:59 UTC = 23:59:59 CEST: inside 22:00-24:00.
    env.run_once("2026-05-01T21:59:59Z").code(0);
    let skipped = env.events("task_skipped");
    assert_eq!(skipped.len(), 1, "{:#?}", env.audit());
    assert_eq!(skipped[0]["reason"], "observe");
    // 22:00 UTC = 00:00 CEST: outside.
    env.run_once("2026-05-01T22:00:00Z").code(0);
    let runs = env.events("run_skipped");
    assert_eq!(runs.len(), 1, "{:#?}", env.audit());
    assert_eq!(runs[0]["reason"], "outside_active_hours");
    assert_eq!(runs[0]["next_active"], "2026-05-02T20:00:00.000Z");
}
