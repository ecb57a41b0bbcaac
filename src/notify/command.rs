//! `kind = "command"` (docs/reference.md#command): a program run for each message, no shell,
//! with the event JSON as one line on its standard input; its exit status answers.
//!
//! Invariants:
//! - The program is started like a tool ([`crate::tools::process`]): in its own process
//!   group, its output read concurrently and kept up to a cap, always reaped; at the
//!   channel's `timeout` its whole group is stopped and the send fails (tried again later).
//! - Its environment is heartbeat's, which holds no secret any more (the config's secret
//!   variables were taken out of it), less the variables of every configured secret again.
//! - Exit 0 is sent; 64–78 but 75 (`EX_TEMPFAIL`) is a refusal for good (`rejected`); any
//!   other end (75, another code, a signal, a timeout, a program that cannot start) fails
//!   this try and the channel's other messages wait for the next run.

use std::path::PathBuf;
use std::time::Duration;

use super::{Channel, Message, SendError, Settings, webhook};
use crate::config::ChannelConfig;
use crate::tools::process::{self, Request};

/// SIGTERM → SIGKILL at the timeout: short, since a delivery must not hold the run much
/// past the channel's `timeout`.
const KILL_GRACE: Duration = Duration::from_secs(1);

/// How much of the program's output an error message quotes.
const QUOTED: usize = 300;

pub(crate) struct Command<'a> {
    pub cfg: &'a ChannelConfig,
    pub argv: &'a [String],
    /// Where it runs (the config file's directory); a relative program path with a `/` is
    /// relative to it.
    pub cwd: PathBuf,
    /// Variables removed from its environment: every secret variable of the config.
    pub remove_env: Vec<String>,
}

/// The exit codes of `sysexits.h` that say a message can never be delivered
/// (`EX_USAGE` 64 … `EX_CONFIG` 78), but for `EX_TEMPFAIL` (75), which says "try later".
fn rejects(code: i32) -> bool {
    (64..=78).contains(&code) && code != 75
}

/// What the program said when it failed: the last non-empty line of its standard error,
/// else of its standard output, cut to [`QUOTED`] characters.
fn said(stderr: &str, stdout: &str) -> Option<String> {
    [stderr, stdout].into_iter().find_map(|text| {
        let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
        Some(match line.char_indices().nth(QUOTED) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.to_string(),
        })
    })
}

/// How a run of the program is classed (module invariants).
fn classify(outcome: &crate::tools::Outcome, program: &str) -> Result<(), SendError> {
    let Some(error) = &outcome.error else {
        return Ok(());
    };
    let mut message = format!("{program}: {error}");
    if let Some(line) = said(&outcome.stderr, &outcome.stdout) {
        message.push_str(&format!(": {line}"));
    }
    match process::exit_code_of_own_end(outcome) {
        Some(code) if rejects(code) => Err(SendError::Rejected(message)),
        _ => Err(SendError::Unavailable(message)),
    }
}

impl Channel for Command<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings::of(self.cfg)
    }

    fn kind(&self) -> &'static str {
        "command"
    }

    fn max_len(&self) -> usize {
        // One event is one line: never cut.
        1 << 20
    }

    fn send(&self, _: &str, message: &Message) -> Result<i64, SendError> {
        let mut line = webhook::event(message).to_string();
        line.push('\n');
        let mut req = Request::new(self.argv.to_vec(), self.cwd.clone(), self.cfg.timeout);
        req.stdin = Some(line.into_bytes());
        req.env_remove = self.remove_env.clone();
        req.kill_grace = KILL_GRACE;
        let program = self.argv.first().map_or("", String::as_str);
        classify(&process::run(&req), program).map(|()| 0)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::text::Redacted;

    fn channel_config(timeout: Duration) -> ChannelConfig {
        ChannelConfig {
            name: "pager".into(),
            events: crate::model::MessageKind::DEFAULT.to_vec(),
            quiet_hours: None,
            max_messages_per_day: 20,
            timeout,
            kind: crate::config::ChannelKind::Command { argv: Vec::new() },
        }
    }

    /// Send one message through `sh -c script` in `dir`.
    fn send(dir: &std::path::Path, script: &str, timeout: Duration) -> Result<i64, SendError> {
        let cfg = channel_config(timeout);
        let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
        let channel = Command {
            cfg: &cfg,
            argv: &argv,
            cwd: dir.to_path_buf(),
            remove_env: Vec::new(),
        };
        let (title, payload) = (Redacted::from("approval #7"), Redacted::from("a\nb"));
        let data = json!({"approval_id": 7});
        channel.send(
            "",
            &Message {
                id: "d-1",
                kind: "approval",
                title: &title,
                payload: &payload,
                data: &data,
                created_at: "2026-03-02T10:00:00.000Z",
                approvals: &[],
                resets: &[],
            },
        )
    }

    #[test]
    fn the_event_is_one_line_on_stdin_and_exit_0_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("got");
        let script = format!("cat > {}", out.display());
        assert_eq!(send(dir.path(), &script, Duration::from_secs(30)), Ok(0));
        let got = std::fs::read_to_string(&out).unwrap();
        assert!(got.ends_with('\n') && got.lines().count() == 1, "{got:?}");
        let event: Value = serde_json::from_str(&got).unwrap();
        assert_eq!(
            event,
            json!({"type": "approval", "id": "d-1", "timestamp": "2026-03-02T10:00:00.000Z",
                   "title": "approval #7", "text": "a\nb", "data": {"approval_id": 7}})
        );
    }

    #[test]
    fn exit_codes_are_classed_by_sysexits() {
        let dir = tempfile::tempdir().unwrap();
        let long = Duration::from_secs(30);
        for code in [64, 65, 69, 77, 78] {
            let got = send(
                dir.path(),
                &format!("echo no such user >&2; exit {code}"),
                long,
            );
            assert_eq!(
                got,
                Err(SendError::Rejected(format!(
                    "sh: exit status {code}: no such user"
                ))),
            );
        }
        for code in [75, 1, 63, 79, 127] {
            let got = send(dir.path(), &format!("echo try later; exit {code}"), long);
            assert_eq!(
                got,
                Err(SendError::Unavailable(format!(
                    "sh: exit status {code}: try later"
                ))),
            );
        }
        // A signal is a failure for now, whatever code the shell would say.
        let got = send(dir.path(), "kill -TERM $$", long).unwrap_err();
        assert!(
            matches!(&got, SendError::Unavailable(m) if m.contains("signal 15")),
            "{got:?}"
        );
    }

    #[test]
    fn a_program_that_cannot_start_fails_for_now() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = channel_config(Duration::from_secs(5));
        let argv = ["./no-such-notifier".to_string()];
        let channel = Command {
            cfg: &cfg,
            argv: &argv,
            cwd: dir.path().to_path_buf(),
            remove_env: Vec::new(),
        };
        let (title, payload) = (Redacted::from("t"), Redacted::from("p"));
        let got = channel
            .send(
                "",
                &Message {
                    id: "d-2",
                    kind: "test",
                    title: &title,
                    payload: &payload,
                    data: &Value::Null,
                    created_at: "2026-03-02T10:00:00.000Z",
                    approvals: &[],
                    resets: &[],
                },
            )
            .unwrap_err();
        assert!(
            matches!(&got, SendError::Unavailable(m) if m.contains("cannot start")),
            "{got:?}"
        );
    }

    #[test]
    fn at_the_timeout_the_group_is_stopped_and_the_send_fails_for_now() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child");
        // A child in the group that would outlive the program, then exit 65 were it ever
        // reached: the timeout wins, and is no refusal.
        let script = format!(
            "sleep 60 & echo $! > {}; trap 'exit 65' TERM; wait",
            pid_file.display()
        );
        let got = send(dir.path(), &script, Duration::from_secs(2)).unwrap_err();
        assert!(
            matches!(&got, SendError::Unavailable(m) if m.contains("timed out")),
            "{got:?}"
        );
        let child = std::fs::read_to_string(&pid_file).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.trim()));
        // Gone, or a zombie waiting for init.
        assert!(
            stat.is_err() || stat.as_deref().is_ok_and(|s| s.contains(") Z ")),
            "{stat:?}"
        );
    }

    #[test]
    fn what_it_said_is_its_last_line_cut() {
        assert_eq!(said("a\nb\n\n", "c"), Some("b".into()));
        assert_eq!(said("  \n", "out\n"), Some("out".into()));
        assert_eq!(said("", ""), None);
        let long = "x".repeat(QUOTED + 5);
        assert_eq!(said(&long, ""), Some(format!("{}…", "x".repeat(QUOTED))));
    }
}
