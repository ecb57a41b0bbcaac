//! Tests of the registry, validation and execution of every tool kind.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::*;
use crate::config::{Approval, ToolConfig};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn registry(tools: &[(&str, ToolConfig)]) -> Registry {
    let map: BTreeMap<String, ToolConfig> = tools
        .iter()
        .map(|(n, c)| (n.to_string(), c.clone()))
        .collect();
    Registry::new(&map)
}

fn command_tool(name: &str, argv: &[&str]) -> ToolSpec {
    let reg = registry(&[(
        name,
        ToolConfig {
            command: Some(argv.iter().map(|s| s.to_string()).collect()),
            ..ToolConfig::default()
        },
    )]);
    reg.get(name).unwrap().into_owned()
}

fn builtin(name: &str) -> ToolSpec {
    Registry::new(&BTreeMap::new())
        .get(name)
        .unwrap()
        .into_owned()
}

fn run_in(dir: &Path, spec: &ToolSpec, input: Value) -> Outcome {
    run_with_env(dir, spec, input, &[])
}

fn run_with_env(dir: &Path, spec: &ToolSpec, input: Value, remove_env: &[String]) -> Outcome {
    let inv = Invocation {
        task_id: "0123456789ab",
        run_id: "run-42",
        workdir: dir,
        remove_env,
    };
    execute(spec, &obj(input), &inv)
}

fn shell(dir: &Path, input: Value) -> Outcome {
    run_in(dir, &builtin("shell"), input)
}

/// True once `pid` is dead: gone, or a zombie waiting for init to reap it (some inits reap
/// only every second or so).
/// How long [`gone_within`] waits for a process that was just killed: a deadline for a hang,
/// not a speed check (a loaded machine may take seconds to schedule the kill).
const GONE: Duration = Duration::from_secs(30);

fn gone_within(pid: i32, within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        if !crate::sys::process_exists(pid) {
            return true;
        }
        if let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat"))
            && crate::sys::parse_stat(&stat).is_some_and(|(state, _)| state == b'Z')
        {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_pid(path: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(p) = s.trim().parse()
        {
            return p;
        }
        assert!(Instant::now() < until, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- registry

#[test]
fn registry_has_builtins_with_defaults() {
    let reg = Registry::new(&BTreeMap::new());
    assert_eq!(
        reg.names(),
        vec![
            "append_file",
            "http",
            "log",
            "notify",
            "shell",
            "write_file"
        ]
    );
    assert_eq!(reg.get("notify").unwrap().approval, Approval::Auto);
    assert_eq!(reg.get("http").unwrap().approval, Approval::Ask);
    assert_eq!(reg.get("shell").unwrap().approval, Approval::Ask);
    assert_eq!(reg.get("log").unwrap().approval, Approval::Auto);
    assert_eq!(reg.get("write_file").unwrap().approval, Approval::Ask);
    assert_eq!(reg.get("append_file").unwrap().approval, Approval::Ask);
    assert_eq!(reg.get("shell").unwrap().timeout, Duration::from_secs(300));
    assert_eq!(
        reg.get("shell").unwrap().kind,
        ToolKind::Builtin(builtin::builtin("shell").unwrap())
    );
    assert!(reg.get("agent").is_none());
    assert_eq!(reg.get("http").unwrap().approval, Approval::Ask);
    assert_eq!(reg.get("http").unwrap().timeout, Duration::from_secs(300));
    assert_eq!(
        reg.get("http").unwrap().kind,
        ToolKind::Builtin(builtin::builtin("http").unwrap())
    );
}

#[test]
fn registry_adds_command_tools_and_overrides_builtins() {
    let reg = registry(&[
        (
            "backup",
            ToolConfig {
                command: Some(vec!["restic".into(), "backup".into(), "{path}".into()]),
                timeout: Some(Duration::from_secs(1800)),
                description: Some("Back up".into()),
                ..ToolConfig::default()
            },
        ),
        (
            "agent",
            ToolConfig {
                command: Some(vec!["my-agent".into(), "{prompt}".into()]),
                approval: Some(Approval::Auto),
                ..ToolConfig::default()
            },
        ),
        (
            "shell",
            ToolConfig {
                approval: Some(Approval::Deny),
                timeout: Some(Duration::from_secs(10)),
                description: Some("mine".into()),
                ..ToolConfig::default()
            },
        ),
        // Neither a built-in nor a command: not a tool.
        (
            "nothing",
            ToolConfig {
                approval: Some(Approval::Auto),
                ..ToolConfig::default()
            },
        ),
    ]);
    assert_eq!(
        reg.names(),
        vec![
            "agent",
            "append_file",
            "backup",
            "http",
            "log",
            "notify",
            "shell",
            "write_file"
        ]
    );
    let backup = reg.get("backup").unwrap();
    assert_eq!(
        backup.kind,
        ToolKind::Command(vec!["restic".into(), "backup".into(), "{path}".into()])
    );
    assert_eq!(backup.approval, Approval::Ask);
    assert_eq!(backup.timeout, Duration::from_secs(1800));
    assert_eq!(backup.description.as_deref(), Some("Back up"));
    let agent = reg.get("agent").unwrap();
    assert_eq!(agent.approval, Approval::Auto);
    assert_eq!(agent.timeout, DEFAULT_TIMEOUT);
    let sh = reg.get("shell").unwrap();
    assert_eq!(
        sh.kind,
        ToolKind::Builtin(builtin::builtin("shell").unwrap())
    );
    assert_eq!(sh.approval, Approval::Deny);
    assert_eq!(sh.timeout, Duration::from_secs(10));
    assert_eq!(sh.description.as_deref(), Some("mine"));
}

// ---------------------------------------------------------------- validate

#[test]
fn shell_validate_errors() {
    let sh = builtin("shell");
    let v = |i: Value| sh.validate(&obj(i));
    assert_eq!(v(json!({})), Err("missing key \"cmd\" for shell".into()));
    assert_eq!(
        v(json!({"cmd": "true", "cwdd": "x"})),
        Err("unknown key \"cwdd\" for shell (expected cmd, cwd, env, stdin, timeout)".into())
    );
    for bad in [json!(""), json!("  "), json!([]), json!(42), json!(null)] {
        let e = v(json!({ "cmd": bad })).unwrap_err();
        assert!(
            e.contains(
                "key \"cmd\" for shell must be a non-empty string or a non-empty array of strings"
            ),
            "{e}"
        );
    }
    let e = v(json!({"cmd": ["ls", 3]})).unwrap_err();
    assert!(e.contains("element 1 is a number"), "{e}");
    let e = v(json!({"cmd": ["", "x"]})).unwrap_err();
    assert!(e.contains("program"), "{e}");
    assert!(v(json!({"cmd": "a\u{0}b"})).unwrap_err().contains("NUL"));
    assert_eq!(
        v(json!({"cmd": "true", "cwd": 1})),
        Err("key \"cwd\" for shell must be a string, not a number".into())
    );
    assert_eq!(
        v(json!({"cmd": "true", "env": ["A"]})),
        Err("key \"env\" for shell must be an object of strings, not an array".into())
    );
    assert_eq!(
        v(json!({"cmd": "true", "env": {"A": 1}})),
        Err("key \"env\" for shell must be an object of strings; \"A\" is a number".into())
    );
    assert!(
        v(json!({"cmd": "true", "env": {"A=B": "x"}}))
            .unwrap_err()
            .contains("not a valid variable name")
    );
    assert_eq!(
        v(json!({"cmd": "true", "stdin": {}})),
        Err("key \"stdin\" for shell must be a string, not an object".into())
    );
    for bad in [json!("soon"), json!(0), json!(-3), json!("0s"), json!(true)] {
        let e = v(json!({"cmd": "true", "timeout": bad})).unwrap_err();
        assert!(e.starts_with("key \"timeout\" for shell "), "{e}");
    }
    assert_eq!(v(json!({"cmd": "true"})), Ok(()));
    assert_eq!(v(json!({"cmd": ["true"]})), Ok(()));
    assert_eq!(
        v(
            json!({"cmd": ["ls", ""], "cwd": "sub", "env": {"A": "1"}, "stdin": "", "timeout": "30s"})
        ),
        Ok(())
    );
    assert_eq!(v(json!({"cmd": "true", "timeout": 1.5})), Ok(()));
}

#[test]
fn log_and_file_validate_errors() {
    let log = builtin("log");
    assert_eq!(log.validate(&obj(json!({"text": "hi"}))), Ok(()));
    assert_eq!(
        log.validate(&obj(json!({}))),
        Err("missing key \"text\" for log".into())
    );
    assert_eq!(
        log.validate(&obj(json!({"text": 3}))),
        Err("key \"text\" for log must be a string, not a number".into())
    );
    assert_eq!(
        log.validate(&obj(json!({"text": "a", "level": "x"}))),
        Err("unknown key \"level\" for log (expected text)".into())
    );
    for name in ["write_file", "append_file"] {
        let t = builtin(name);
        assert_eq!(t.validate(&obj(json!({"path": "a", "text": ""}))), Ok(()));
        assert_eq!(
            t.validate(&obj(json!({"text": "x"}))),
            Err(format!("missing key \"path\" for {name}"))
        );
        assert_eq!(
            t.validate(&obj(json!({"path": "a"}))),
            Err(format!("missing key \"text\" for {name}"))
        );
        assert_eq!(
            t.validate(&obj(json!({"path": "", "text": "x"}))),
            Err(format!("key \"path\" for {name} must not be empty"))
        );
        assert_eq!(
            t.validate(&obj(json!({"path": "a", "text": "x", "mode": 1}))),
            Err(format!(
                "unknown key \"mode\" for {name} (expected path, text)"
            ))
        );
    }
}

#[test]
fn command_validate_placeholders() {
    let t = command_tool("backup", &["restic", "backup", "--tag={tag}", "{path}"]);
    assert_eq!(
        t.validate(&obj(json!({"tag": "x"}))),
        Err("missing input key \"path\" for placeholder {path} in tools.backup.command".into())
    );
    assert_eq!(
        t.validate(&obj(json!({"path": "/home", "tag": null}))),
        Err(
            "input key \"tag\" is null, but placeholder {tag} in tools.backup.command needs a value"
                .into()
        )
    );
    // Any extra keys are fine.
    assert_eq!(
        t.validate(&obj(json!({"path": "/home", "tag": 1, "other": [1]}))),
        Ok(())
    );
    // Braces that are not `{identifier}` are literal text.
    let lit = command_tool("lit", &["echo", "{\"a\": 1}", "{}", "{ x }", "{1}"]);
    assert_eq!(lit.validate(&obj(json!({}))), Ok(()));
    let empty = command_tool("empty", &[]);
    assert!(
        empty
            .validate(&obj(json!({})))
            .unwrap_err()
            .contains("tools.empty.command is empty")
    );
}

// ---------------------------------------------------------------- shell

#[test]
fn shell_array_runs_argv_without_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(
        dir.path(),
        json!({"cmd": ["printf", "%s|", "a b", "$HOME", "; echo no"]}),
    );
    assert!(o.success, "{o:?}");
    assert_eq!(o.stdout, "a b|$HOME|; echo no|");
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(o.error, None);
}

#[test]
fn shell_string_runs_sh_c() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(dir.path(), json!({"cmd": "echo $((1 + 2)); echo err >&2"}));
    assert!(o.success, "{o:?}");
    assert_eq!(o.stdout, "3\n");
    assert_eq!(o.stderr, "err\n");
}

#[test]
fn shell_cwd_env_stdin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let real = dir.path().canonicalize().unwrap();

    let o = shell(dir.path(), json!({"cmd": "pwd -P"}));
    assert_eq!(o.stdout.trim(), real.to_str().unwrap());
    let o = shell(dir.path(), json!({"cmd": "pwd -P", "cwd": "sub"}));
    assert_eq!(o.stdout.trim(), real.join("sub").to_str().unwrap());
    let other = tempfile::tempdir().unwrap();
    let o = shell(
        dir.path(),
        json!({"cmd": ["pwd", "-P"], "cwd": other.path().to_str().unwrap()}),
    );
    assert_eq!(
        o.stdout.trim(),
        other.path().canonicalize().unwrap().to_str().unwrap()
    );
    let o = shell(dir.path(), json!({"cmd": "pwd", "cwd": "missing"}));
    assert!(!o.success);
    assert!(o.error.as_deref().unwrap().contains("missing"), "{o:?}");

    let o = shell(
        dir.path(),
        json!({"cmd": "printf '%s,%s' \"$GREETING\" \"$HEARTBEAT_TASK_ID\"", "env": {"GREETING": "hi there"}}),
    );
    assert_eq!(o.stdout, "hi there,0123456789ab");

    let o = shell(
        dir.path(),
        json!({"cmd": ["tr", "a-z", "A-Z"], "stdin": "hello\n"}),
    );
    assert_eq!(o.stdout, "HELLO\n");
    // Without `stdin`, standard input is /dev/null: `cat` ends at once.
    let o = shell(dir.path(), json!({"cmd": ["cat"], "timeout": "5s"}));
    assert!(o.success, "{o:?}");
    assert_eq!(o.stdout, "");
}

#[test]
fn relative_program_is_relative_to_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    // Written by a child process: a write fd open in this multi-threaded test process could
    // leak into a concurrent fork and make the exec fail with ETXTBSY.
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg("mkdir sub && printf '#!/bin/sh\\necho checked\\n' > sub/check.sh && chmod +x sub/check.sh")
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(made.success());
    let o = shell(dir.path(), json!({"cmd": ["./check.sh"], "cwd": "sub"}));
    assert_eq!(o.stdout, "checked\n", "{o:?}");
    let t = command_tool("check", &["sub/check.sh"]);
    let o = run_in(dir.path(), &t, json!({}));
    assert_eq!(o.stdout, "checked\n", "{o:?}");
}

#[test]
fn an_enormous_timeout_is_no_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(dir.path(), json!({"cmd": "echo ok", "timeout": 1e19}));
    assert!(o.success, "{o:?}");
    let o = shell(
        dir.path(),
        json!({"cmd": "echo ok", "timeout": "500000000years"}),
    );
    assert!(o.success, "{o:?}");
}

#[test]
fn exit_codes_signals_and_spawn_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(dir.path(), json!({"cmd": "echo out; exit 3"}));
    assert!(!o.success);
    assert_eq!(o.exit_code, Some(3));
    assert_eq!(o.error.as_deref(), Some("exit status 3"));
    assert_eq!(o.stdout, "out\n");
    assert_eq!(o.failure, Some(FailureKind::Exit(3)));

    let o = shell(dir.path(), json!({"cmd": "kill -9 $$"}));
    assert!(!o.success);
    assert_eq!(o.exit_code, None);
    assert_eq!(o.error.as_deref(), Some("killed by signal 9"));
    // Not a kind `retry_on` can name.
    assert_eq!(o.failure, None);

    let o = shell(
        dir.path(),
        json!({"cmd": ["heartbeat-no-such-program-xyz"]}),
    );
    assert!(!o.success);
    assert_eq!(o.exit_code, None);
    let e = o.error.unwrap();
    assert!(
        e.starts_with("cannot start \"heartbeat-no-such-program-xyz\": "),
        "{e}"
    );
    assert_eq!(o.failure, Some(FailureKind::Spawn));

    // A bad input is an outcome, not a panic.
    let o = shell(dir.path(), json!({"cmd": 1}));
    assert!(!o.success);
    assert!(o.error.unwrap().contains("cmd"));
}

// ---------------------------------------------------------------- command tools

#[test]
fn command_tool_gets_input_on_stdin_and_env() {
    let dir = tempfile::tempdir().unwrap();
    let t = command_tool(
        "probe",
        &[
            "sh",
            "-c",
            "printf '%s\\n' \"$HEARTBEAT_INPUT\" \"$HEARTBEAT_TASK_ID\" \"$HEARTBEAT_RUN_ID\" \"$(pwd -P)\"; cat",
        ],
    );
    let input = json!({"prompt": "say \"hi\"\nnow", "n": 2, "nested": {"b": [1, true]}});
    let o = run_in(dir.path(), &t, input.clone());
    assert!(o.success, "{o:?}");
    let lines: Vec<&str> = o.stdout.split('\n').collect();
    let compact = serde_json::to_string(&input).unwrap();
    assert_eq!(lines[0], compact);
    assert_eq!(lines[1], "0123456789ab");
    assert_eq!(lines[2], "run-42");
    assert_eq!(
        lines[3],
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
    // stdin: exactly one JSON line.
    assert_eq!(lines[4], compact);
    assert_eq!(lines[5], "");
    assert_eq!(lines.len(), 6);
    let parsed: Value = serde_json::from_str(lines[4]).unwrap();
    assert_eq!(parsed, input);
}

#[test]
fn an_input_too_large_for_the_environment_goes_on_stdin_only() {
    let dir = tempfile::tempdir().unwrap();
    let t = command_tool(
        "big",
        &[
            "sh",
            "-c",
            "if [ -n \"$HEARTBEAT_INPUT\" ]; then printf 'set|'; else printf 'unset|'; fi; wc -c",
        ],
    );
    let input = json!({"blob": "x".repeat(200 * 1024)});
    let o = run_in(dir.path(), &t, input.clone());
    assert!(o.success, "{o:?}");
    let (env, stdin_bytes) = o.stdout.trim().split_once('|').unwrap();
    assert_eq!(env, "unset");
    let line = serde_json::to_string(&input).unwrap();
    assert_eq!(stdin_bytes.trim(), (line.len() + 1).to_string());
}

#[test]
fn double_braces_are_a_literal_placeholder() {
    let dir = tempfile::tempdir().unwrap();
    let t = command_tool(
        "lit",
        &["sh", "-c", "printf '%s|%s' \"${{HOME}}\" {name}", "sh"],
    );
    let o = run_in(dir.path(), &t, json!({"name": "ann"}));
    assert!(o.success, "{o:?}");
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(o.stdout, format!("{home}|ann"));
    // Only `{{key}}`: JSON-like text keeps its braces.
    let t = command_tool("json", &["printf", "%s", "{\"a\":{\"b\":1}}"]);
    let o = run_in(dir.path(), &t, json!({}));
    assert_eq!(o.stdout, "{\"a\":{\"b\":1}}");
}

#[test]
fn hostile_placeholder_values_stay_one_argument() {
    let dir = tempfile::tempdir().unwrap();
    let t = command_tool(
        "args",
        &[
            "sh",
            "-c",
            "printf '%s\\0' \"$#\" \"$@\"",
            "sh",
            "{space}",
            "{quote}",
            "{subst}",
            "{braces}",
            "{newline}",
            "{empty}",
            "pre-{space}-mid-{empty}-post",
            "{num}",
            "{flag}",
            "{list}",
            "{map}",
            "{{space}}",
            "{space}{braces}",
        ],
    );
    let o = run_in(
        dir.path(),
        &t,
        json!({
            "space": "a b",
            "quote": "\"; rm -rf /tmp/x; \"",
            "subst": "$(touch pwned)",
            "braces": "{other}",
            "other": "SHOULD NOT APPEAR",
            "newline": "line1\nline2\n",
            "empty": "",
            "num": 4.5,
            "flag": false,
            "list": [1, "two"],
            "map": {"k": "v w"},
        }),
    );
    assert!(o.success, "{o:?}");
    let mut parts: Vec<&str> = o.stdout.split('\0').collect();
    assert_eq!(parts.pop(), Some(""));
    let expected = [
        "a b",
        "\"; rm -rf /tmp/x; \"",
        "$(touch pwned)",
        "{other}",
        "line1\nline2\n",
        "",
        "pre-a b-mid--post",
        "4.5",
        "false",
        "[1,\"two\"]",
        "{\"k\":\"v w\"}",
        "{space}",
        "a b{other}",
    ];
    assert_eq!(parts[0], expected.len().to_string());
    assert_eq!(&parts[1..], &expected);
    assert!(!dir.path().join("pwned").exists());
}

#[test]
fn command_tool_missing_key_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = command_tool("touch", &["touch", "{name}"]);
    let o = run_in(dir.path(), &t, json!({"nam": "x"}));
    assert!(!o.success);
    assert_eq!(
        o.error.as_deref(),
        Some("missing input key \"name\" for placeholder {name} in tools.touch.command")
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Run by `token_and_remove_env_are_not_inherited` in a child test process whose environment
/// holds the secrets (ignored otherwise: alone it would test nothing).
#[test]
#[ignore = "run by token_and_remove_env_are_not_inherited in a child process"]
fn env_probe_child() {
    if std::env::var_os("HB_TOOLS_ENV_PROBE").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = command_tool("env", &["env"]);
    let remove = vec!["MY_BOT_TOKEN".to_string()];
    let o = run_with_env(dir.path(), &t, json!({}), &remove);
    assert!(o.success, "{o:?}");
    assert!(o.stdout.contains("HB_TOOLS_ENV_PROBE=1\n"), "{}", o.stdout);
    assert!(o.stdout.contains("KEEP_ME=yes\n"), "{}", o.stdout);
    assert!(
        !o.stdout.contains("HEARTBEAT_TELEGRAM_TOKEN"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains("MY_BOT_TOKEN"), "{}", o.stdout);
    assert!(!o.stdout.contains("s3cr3t"), "{}", o.stdout);
    let sh = shell(dir.path(), json!({"cmd": ["env"]}));
    // The token variable goes even when `remove_env` does not name it.
    assert!(!sh.stdout.contains("s3cr3t-a"), "{}", sh.stdout);
    assert!(
        sh.stdout.contains("MY_BOT_TOKEN=s3cr3t-b\n"),
        "{}",
        sh.stdout
    );
    assert!(sh.stdout.contains("HEARTBEAT_RUN_ID=run-42\n"));
}

/// Runs the test `name` alone in a child copy of this test binary with `env` added, and
/// asserts that it ran and passed.
fn run_probe(name: &str, env: &[(&str, &str)]) {
    // /proc/self/exe survives a concurrent `cargo test` relinking the test binary.
    let exe = if Path::new("/proc/self/exe").exists() {
        std::path::PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().unwrap()
    };
    let out = std::process::Command::new(exe)
        .args(["--exact", name, "--ignored", "--test-threads=1"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "{text}");
}

#[test]
fn token_and_remove_env_are_not_inherited() {
    run_probe(
        "tools::tests::env_probe_child",
        &[
            ("HB_TOOLS_ENV_PROBE", "1"),
            ("HEARTBEAT_TELEGRAM_TOKEN", "s3cr3t-a"),
            ("MY_BOT_TOKEN", "s3cr3t-b"),
            ("KEEP_ME", "yes"),
        ],
    );
}

/// Run by `unread_stdin_never_raises_sigpipe`: with SIGPIPE at its default (as a CLI may set
/// it), a tool that exits without reading a large input must not kill this process.
#[test]
#[ignore = "run by unread_stdin_never_raises_sigpipe in a child process"]
fn sigpipe_probe_child() {
    if std::env::var_os("HB_TOOLS_SIGPIPE_PROBE").is_none() {
        return;
    }
    // SAFETY: this probe runs alone in its own process (see `run_probe`), and the default
    // action is no handler of ours.
    unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..5 {
        let o = shell(
            dir.path(),
            json!({"cmd": ["true"], "stdin": "z".repeat(4 * 1024 * 1024)}),
        );
        assert!(o.success, "{o:?}");
    }
}

#[test]
fn unread_stdin_never_raises_sigpipe() {
    run_probe(
        "tools::tests::sigpipe_probe_child",
        &[("HB_TOOLS_SIGPIPE_PROBE", "1")],
    );
}

/// One `Sig…:` mask of `/proc/<pid>/status` (hex).
fn status_mask(status: &str, key: &str) -> u64 {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {status}"));
    u64::from_str_radix(line.trim(), 16).unwrap()
}

#[test]
fn tools_start_with_no_signal_blocked_and_none_ignored_by_heartbeat() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let dir = tempfile::tempdir().unwrap();
    // A thread that spawns tools with signals blocked (as a daemon taking signals on one
    // thread might) must not pass its mask on.
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGUSR1);
    let mut old = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old)).unwrap();
    let o = shell(dir.path(), json!({"cmd": ["cat", "/proc/self/status"]}));
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None).unwrap();
    assert!(o.success, "{o:?}");
    assert_eq!(status_mask(&o.stdout, "SigBlk:"), 0, "{}", o.stdout);
    // Ignored: nothing beyond what this process was started with, and not SIGPIPE, which
    // the Rust runtime ignores in this process.
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let sigpipe = 1u64 << (Signal::SIGPIPE as i32 - 1);
    let inherited = status_mask(&ours, "SigIgn:") & !sigpipe;
    let ignored = status_mask(&o.stdout, "SigIgn:");
    assert_eq!(ignored & !inherited, 0, "{}", o.stdout);
}

// ---------------------------------------------------------------- timeouts and groups

#[test]
fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(
        dir.path(),
        json!({"cmd": "sleep 60 & echo $! > pidfile; echo started; sleep 60", "timeout": "1s"}),
    );
    assert!(!o.success);
    assert_eq!(o.error.as_deref(), Some("timed out after 1s"));
    assert_eq!(o.exit_code, None);
    assert_eq!(o.stdout, "started\n");
    let grandchild = read_pid(&dir.path().join("pidfile"));
    assert!(gone_within(grandchild, GONE));
}

#[test]
fn timeout_as_a_number_of_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(dir.path(), json!({"cmd": ["sleep", "30"], "timeout": 0.5}));
    assert_eq!(o.error.as_deref(), Some("timed out after 500ms"));
}

#[test]
fn config_timeout_applies_to_command_tools() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&[(
        "slow",
        ToolConfig {
            command: Some(vec!["sleep".into(), "30".into()]),
            timeout: Some(Duration::from_secs(1)),
            ..ToolConfig::default()
        },
    )]);
    let o = run_in(dir.path(), &reg.get("slow").unwrap(), json!({}));
    assert_eq!(o.error.as_deref(), Some("timed out after 1s"));
    // `execute` uses the documented grace (docs/reference.md#tool-processes); the SIGKILL path
    // itself is tested on the runner with a shorter one.
    assert_eq!(process::KILL_GRACE, Duration::from_secs(5));
    let req = process::Request::new(vec!["x".into()], dir.path().into(), Duration::ZERO);
    assert_eq!(req.kill_grace, process::KILL_GRACE);
}

#[test]
fn background_child_holding_stdout_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    // Success: it did not wait for the background `sleep` until the timeout.
    let o = shell(
        dir.path(),
        json!({"cmd": "sleep 60 & echo $! > pidfile; echo done", "timeout": "30s"}),
    );
    assert!(o.success, "{o:?}");
    assert_eq!(o.stdout, "done\n");
    let bg = read_pid(&dir.path().join("pidfile"));
    assert!(gone_within(bg, GONE));
}

#[test]
fn process_that_left_the_group_is_abandoned_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    // Success: had it waited for the escaped `sleep 300`, the 30 s timeout would have failed
    // the task.
    let o = shell(
        dir.path(),
        json!({
            "cmd": "setsid sh -c 'echo $$ > pidfile; exec sleep 300' & \
                    while [ ! -s pidfile ]; do sleep 0.05; done; echo done",
            "timeout": "30s",
        }),
    );
    let escaped = read_pid(&dir.path().join("pidfile"));
    // It left the group on purpose: still alive, and heartbeat did not wait for it.
    let alive = crate::sys::process_exists(escaped);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(escaped),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(o.success, "{o:?}");
    assert_eq!(o.stdout, "done\n");
    assert!(alive);
}

// ---------------------------------------------------------------- output

#[test]
fn output_is_capped_and_the_rest_counted() {
    let dir = tempfile::tempdir().unwrap();
    let three = 3 * 1024 * 1024;
    let o = shell(
        dir.path(),
        json!({"cmd": format!("head -c {three} /dev/zero | tr '\\0' a; head -c {three} /dev/zero | tr '\\0' b >&2")}),
    );
    assert!(o.success, "{:?}", o.error);
    assert_eq!(o.stdout.len(), process::OUTPUT_CAP);
    assert!(o.stdout.bytes().all(|b| b == b'a'));
    assert_eq!(o.stdout_dropped, (three - process::OUTPUT_CAP) as u64);
    assert_eq!(o.stderr.len(), process::OUTPUT_CAP);
    assert_eq!(o.stderr_dropped, (three - process::OUTPUT_CAP) as u64);
}

#[test]
fn large_stdin_does_not_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(3 * 1024 * 1024);
    let o = shell(dir.path(), json!({"cmd": ["cat"], "stdin": big}));
    assert!(o.success, "{:?}", o.error);
    assert_eq!(o.stdout.len(), process::OUTPUT_CAP);
    assert_eq!(o.stdout_dropped, 2 * 1024 * 1024);
    // A child that never reads a large input still finishes.
    let o = shell(
        dir.path(),
        json!({"cmd": ["true"], "stdin": "y".repeat(1024 * 1024)}),
    );
    assert!(o.success, "{:?}", o.error);
}

#[test]
fn invalid_utf8_output_is_lossy() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(dir.path(), json!({"cmd": "printf 'a\\377b'"}));
    assert_eq!(o.stdout, "a\u{FFFD}b");
}

#[test]
fn cost_and_summary_from_the_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(
        dir.path(),
        json!({"cmd": "echo working; echo '{\"cost_usd\": 0.25, \"summary\": \"3 files\"}'; echo; echo '  '"}),
    );
    assert!(o.success);
    assert_eq!(o.cost_usd, Some(0.25));
    assert_eq!(o.summary.as_deref(), Some("3 files"));

    let o = shell(dir.path(), json!({"cmd": "echo '{\"cost_usd\": 2}'"}));
    assert_eq!((o.cost_usd, o.summary), (Some(2.0), None));

    let o = shell(dir.path(), json!({"cmd": "echo '{\"summary\": \"only\"}'"}));
    assert_eq!((o.cost_usd, o.summary.as_deref()), (None, Some("only")));

    // Not the last line, not an object, wrong types: nothing recorded.
    for cmd in [
        "echo '{\"cost_usd\": 1}'; echo done",
        "echo '[1]'",
        "echo '{\"cost_usd\": \"1\", \"summary\": 5}'",
        "echo '{\"cost_usd\": 1'",
        "true",
    ] {
        let o = shell(dir.path(), json!({ "cmd": cmd }));
        assert_eq!((o.cost_usd, o.summary), (None, None), "{cmd}");
    }

    // Also after more output than the cap keeps.
    let o = shell(
        dir.path(),
        json!({"cmd": "head -c 2000000 /dev/zero | tr '\\0' a; echo; echo '{\"summary\": \"big\"}'"}),
    );
    assert!(o.stdout_dropped > 0);
    assert_eq!(o.summary.as_deref(), Some("big"));
}

#[test]
fn last_line_report_edges() {
    use process::last_line_report;
    assert_eq!(
        last_line_report(b"x\r\n{\"cost_usd\":1.5}\r\n", true),
        (Some(1.5), None)
    );
    assert_eq!(
        last_line_report(b"{\"summary\":\"s\"}", true),
        (None, Some("s".into()))
    );
    // A tail that starts mid-stream: its first line may be cut, so it is not trusted.
    assert_eq!(
        last_line_report(b"{\"summary\":\"s\"}\n", false),
        (None, None)
    );
    assert_eq!(
        last_line_report(b"cut\n{\"summary\":\"s\"}\n", false),
        (None, Some("s".into()))
    );
    assert_eq!(last_line_report(b"", true), (None, None));
    assert_eq!(last_line_report(b"\n\n", true), (None, None));
    assert_eq!(last_line_report(b"{\"cost_usd\": -1}", true), (None, None));
}

// ---------------------------------------------------------------- log and files

#[test]
fn log_succeeds_with_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(dir.path(), &builtin("log"), json!({"text": "hello"}));
    assert!(o.success);
    assert_eq!(o.stdout, "hello");
    assert_eq!(o.exit_code, None);
    assert_eq!(o.error, None);
}

#[test]
fn write_and_append_files() {
    let dir = tempfile::tempdir().unwrap();
    let w = builtin("write_file");
    let a = builtin("append_file");
    let file = dir.path().join("notes.txt");

    let o = run_in(
        dir.path(),
        &a,
        json!({"path": "notes.txt", "text": "one\n"}),
    );
    assert!(o.success, "{o:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n");
    let o = run_in(
        dir.path(),
        &a,
        json!({"path": "notes.txt", "text": "two\n"}),
    );
    assert!(o.success, "{o:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");
    assert_eq!(o.stdout, format!("appended 4 bytes to {}", file.display()));
    let o = run_in(dir.path(), &w, json!({"path": "notes.txt", "text": "new"}));
    assert!(o.success, "{o:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    let o = run_in(dir.path(), &w, json!({"path": "notes.txt", "text": "1"}));
    assert_eq!(o.stdout, format!("wrote 1 byte to {}", file.display()));

    let abs = dir.path().join("abs.txt");
    let o = run_in(
        dir.path(),
        &w,
        json!({"path": abs.to_str().unwrap(), "text": "x"}),
    );
    assert!(o.success, "{o:?}");
    assert_eq!(std::fs::read_to_string(&abs).unwrap(), "x");

    for t in [&w, &a] {
        let o = run_in(
            dir.path(),
            t,
            json!({"path": "no/such/dir.txt", "text": "x"}),
        );
        assert!(!o.success);
        let e = o.error.unwrap();
        assert!(e.contains("no/such/dir.txt"), "{e}");
        assert!(e.contains("No such file or directory"), "{e}");
    }
}

/// Names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn write_file_replaces_atomically_keeping_mode_and_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let w = builtin("write_file");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "old content, longer than the new").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ino = std::fs::metadata(&file).unwrap().ino();
    let o = run_in(dir.path(), &w, json!({"path": "notes.txt", "text": "new"}));
    assert!(o.success, "{o:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640, "mode kept");
    assert_ne!(meta.ino(), ino, "a new file renamed over the old one");
    assert_eq!(names_in(dir.path()), vec!["notes.txt"], "no temp file left");

    // Through a symlink: the target is replaced, the link stays a link.
    symlink("notes.txt", dir.path().join("link.txt")).unwrap();
    let o = run_in(
        dir.path(),
        &w,
        json!({"path": "link.txt", "text": "linked"}),
    );
    assert!(o.success, "{o:?}");
    let link = std::fs::symlink_metadata(dir.path().join("link.txt")).unwrap();
    assert!(link.file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "linked");
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o640);

    // A new file gets what `File::create` gives it (0666 less the umask), not 0600.
    let o = run_in(dir.path(), &w, json!({"path": "fresh.txt", "text": "x"}));
    assert!(o.success, "{o:?}");
    let probe = dir.path().join("probe");
    std::fs::File::create(&probe).unwrap();
    assert_eq!(
        std::fs::metadata(dir.path().join("fresh.txt"))
            .unwrap()
            .mode()
            & 0o7777,
        std::fs::metadata(&probe).unwrap().mode() & 0o7777
    );
}

#[test]
fn a_failed_write_file_keeps_the_old_content_and_leaves_no_temp_file() {
    use std::os::unix::fs::PermissionsExt;
    let w = builtin("write_file");

    // The rename fails (the target is a directory): the temp file was written, and removed.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("target")).unwrap();
    std::fs::write(dir.path().join("target/kept"), "kept").unwrap();
    let o = run_in(dir.path(), &w, json!({"path": "target", "text": "new"}));
    assert!(!o.success);
    assert!(o.error.unwrap().contains("target"));
    assert_eq!(names_in(dir.path()), vec!["target"]);
    assert_eq!(names_in(&dir.path().join("target")), vec!["kept"]);

    // A parent that is a file: nothing is created.
    std::fs::write(dir.path().join("plain"), "plain").unwrap();
    let o = run_in(
        dir.path(),
        &w,
        json!({"path": "plain/x.txt", "text": "new"}),
    );
    assert!(!o.success);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("plain")).unwrap(),
        "plain"
    );
    assert_eq!(names_in(dir.path()), vec!["plain", "target"]);

    // A directory we may not write: the old file stays as it was. Root writes anyway.
    if crate::sys::is_root() {
        return;
    }
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(ro.join("notes.txt"), "old").unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let o = run_in(
        dir.path(),
        &w,
        json!({"path": "ro/notes.txt", "text": "new"}),
    );
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!o.success, "{o:?}");
    assert_eq!(
        std::fs::read_to_string(ro.join("notes.txt")).unwrap(),
        "old"
    );
    assert_eq!(names_in(&ro), vec!["notes.txt"]);
}

// ---------------------------------------------------------------- the runner

#[test]
fn runner_sigkills_a_term_ignoring_group_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = process::Request::new(
        vec![
            "sh".into(),
            "-c".into(),
            "trap '' TERM; sleep 60 & echo $! > pidfile; sleep 60".into(),
        ],
        dir.path().to_path_buf(),
        Duration::from_millis(500),
    );
    req.kill_grace = Duration::from_millis(700);
    let started = Instant::now();
    let o = process::run(&req);
    let took = started.elapsed();
    assert_eq!(o.error.as_deref(), Some("timed out after 500ms"));
    assert_eq!(o.exit_code, None);
    // Not before the timeout and the grace; well before the minute of `sleep 60`, which
    // only SIGKILL ends early.
    assert!(
        took >= Duration::from_millis(1200) && took < Duration::from_secs(30),
        "{took:?}"
    );
    let bg = read_pid(&dir.path().join("pidfile"));
    assert!(gone_within(bg, GONE));
}

#[test]
fn runner_stops_on_request() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let mut req = process::Request::new(
        vec!["sleep".into(), "60".into()],
        dir.path().to_path_buf(),
        Duration::from_secs(30),
    );
    req.stop = Some(&stop);
    let o = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::SeqCst);
        });
        process::run(&req)
    });
    assert_eq!(o.error.as_deref(), Some("stopped"));
    assert!(!o.success);
}

#[test]
fn runner_rejects_an_empty_argv() {
    let o = process::run(&process::Request::new(
        Vec::new(),
        std::env::temp_dir(),
        Duration::from_secs(1),
    ));
    assert!(!o.success);
    assert!(o.error.unwrap().contains("empty command"));
}

// ---------------------------------------------------------------- retries

#[test]
fn retry_on_words_name_failure_kinds() {
    use crate::config::RetryOn;
    let on = [RetryOn::Exit(75), RetryOn::Http5xx];
    assert!(FailureKind::Exit(75).retried_by(Some(&on)));
    assert!(!FailureKind::Exit(3).retried_by(Some(&on)));
    assert!(FailureKind::Http(503).retried_by(Some(&on)));
    assert!(!FailureKind::Http(429).retried_by(Some(&on)));
    assert!(!FailureKind::Timeout.retried_by(Some(&on)));
    assert!(FailureKind::Http(429).retried_by(Some(&[RetryOn::Http429])));
    assert!(FailureKind::Spawn.retried_by(Some(&[RetryOn::Spawn])));
    assert!(FailureKind::Timeout.retried_by(Some(&[RetryOn::Timeout])));
    // Not written: every kind.
    for kind in [
        FailureKind::Timeout,
        FailureKind::Exit(1),
        FailureKind::Http(500),
        FailureKind::Spawn,
    ] {
        assert!(kind.retried_by(None), "{kind:?}");
    }
    assert!(!FailureKind::Spawn.retried_by(Some(&[])));
}

#[test]
fn only_log_and_reading_http_are_idempotent_by_default() {
    assert!(idempotent_by_default(
        &builtin("log"),
        &obj(json!({"text": "x"}))
    ));
    let http = builtin("http");
    assert!(idempotent_by_default(
        &http,
        &obj(json!({"url": "http://x/"}))
    ));
    for method in ["get", "HEAD"] {
        let input = obj(json!({"url": "http://x/", "method": method}));
        assert!(idempotent_by_default(&http, &input), "{method}");
    }
    let post = obj(json!({"url": "http://x/", "method": "POST"}));
    assert!(!idempotent_by_default(&http, &post));
    assert!(!idempotent_by_default(
        &builtin("shell"),
        &obj(json!({"cmd": "true"}))
    ));
    assert!(!idempotent_by_default(
        &command_tool("x", &["true"]),
        &Map::new()
    ));
}

#[test]
fn a_timeout_is_a_timeout_failure() {
    let dir = tempfile::tempdir().unwrap();
    let o = shell(dir.path(), json!({"cmd": "sleep 5", "timeout": "100ms"}));
    assert!(!o.success);
    assert_eq!(o.failure, Some(FailureKind::Timeout));
}

#[test]
fn an_mcp_idempotent_hint_counts_only_when_the_config_trusts_the_server() {
    use crate::config::{McpServerConfig, McpTransport, RetryConfig};
    use crate::mcp::{Catalog, Listing, ToolInfo};
    for trust in [false, true] {
        let mut cfg = crate::config::test_util::config(BTreeMap::new());
        cfg.mcp.insert(
            "s".into(),
            McpServerConfig {
                transport: McpTransport::Stdio(vec!["srv".into()]),
                env: vec![],
                cwd: None,
                timeout: Duration::from_secs(5),
                startup_timeout: Duration::from_secs(5),
                approval: Approval::Ask,
                trust_annotations: trust,
                cost_usd: None,
                max_lateness: None,
                retry: RetryConfig::default(),
                tools: BTreeMap::new(),
            },
        );
        let tool = |name: &str, idempotent| ToolInfo {
            name: name.into(),
            description: None,
            input_schema: json!({"type": "object"}),
            read_only: false,
            idempotent,
        };
        let mut catalog = Catalog::new();
        catalog.insert(
            "s".into(),
            Listing::Tools(vec![tool("again", true), tool("once", false)]),
        );
        let registry = Registry::from_config(&cfg).with_catalog(&catalog);
        let again = registry.resolve("s.again").unwrap();
        let once = registry.resolve("s.once").unwrap();
        assert_eq!(idempotent_by_default(&again, &Map::new()), trust);
        assert!(!idempotent_by_default(&once, &Map::new()));
    }
}

#[test]
fn an_unknown_mcp_tool_suggests_the_most_similar_whole_name_of_the_server() {
    use crate::config::{McpServerConfig, McpTransport, RetryConfig};
    use crate::mcp::{Catalog, Listing, ToolInfo};
    let mut cfg = crate::config::test_util::config(BTreeMap::new());
    cfg.mcp.insert(
        "time".into(),
        McpServerConfig {
            transport: McpTransport::Stdio(vec!["srv".into()]),
            env: vec![],
            cwd: None,
            timeout: Duration::from_secs(5),
            startup_timeout: Duration::from_secs(5),
            approval: Approval::Ask,
            trust_annotations: false,
            cost_usd: None,
            max_lateness: None,
            retry: RetryConfig::default(),
            tools: BTreeMap::new(),
        },
    );
    let tool = |name: &str| ToolInfo {
        name: name.into(),
        description: None,
        input_schema: json!({"type": "object"}),
        read_only: false,
        idempotent: false,
    };
    let mut catalog = Catalog::new();
    catalog.insert(
        "time".into(),
        Listing::Tools(vec![tool("convert_time"), tool("get_current_time")]),
    );
    let registry = Registry::from_config(&cfg).with_catalog(&catalog);
    let error = registry.resolve("time.get_time").unwrap_err();
    assert!(
        error.contains("has no tool \"get_time\" (did you mean @time.get_current_time?)"),
        "{error}"
    );
}
