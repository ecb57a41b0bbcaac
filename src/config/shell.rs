//! Refusing `{key}` placeholders inside a shell script (docs/reference.md#config-tools).
//!
//! Invariants:
//! - A config tool that runs a shell (by basename: the program, or a later argument, as in
//!   `env sh -c`, `sudo -u me bash -c`, `busybox sh -c`) whose script argument (after `-c`,
//!   or a combined flag like `-ec`) holds a placeholder is refused: task input would become
//!   shell code. `{{key}}` is literal text and stays allowed.
//! - The refusal shows the same command rewritten to pass each value as a positional
//!   parameter, so that the fix is a copy and paste.

use std::ops::Range;

const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "ksh", "fish"];

/// Why `argv` is unsafe, with its safe form; None when it is safe.
pub(super) fn check(argv: &[String]) -> Option<String> {
    // The first shell in the command line: the program itself, or the one a wrapper runs.
    let (start, shell) = argv.iter().enumerate().find_map(|(i, arg)| {
        let name = arg.rsplit('/').next().unwrap_or(arg);
        SHELLS.contains(&name).then_some((i, name))
    })?;
    let at = start + script_index(&argv[start..])?;
    let script = &argv[at];
    let found = placeholders(script);
    let (_, first) = found.first()?;

    // Existing arguments after the script are already $0, $1, …; new ones follow them.
    let mut extra: Vec<String> = argv[at + 1..].to_vec();
    if extra.is_empty() {
        extra.push(shell.to_string());
    }
    let mut keys: Vec<&str> = Vec::new();
    let mut safe_script = String::new();
    let mut last = 0;
    for (range, key) in &found {
        let n = match keys.iter().position(|k| k == key) {
            Some(i) => extra.len() + i,
            None => {
                keys.push(key);
                extra.len() + keys.len() - 1
            }
        };
        let quoted = script[..range.start].ends_with('"') && script[range.end..].starts_with('"');
        safe_script.push_str(&script[last..range.start]);
        if quoted {
            safe_script.push_str(&format!("${n}"));
        } else {
            safe_script.push_str(&format!("\"${n}\""));
        }
        last = range.end;
    }
    safe_script.push_str(&script[last..]);

    let safe: Vec<String> = argv[..at]
        .iter()
        .cloned()
        .chain([safe_script])
        .chain(extra)
        .chain(keys.iter().map(|k| format!("{{{k}}}")))
        .collect();
    let shown: Vec<String> = safe.iter().map(|a| quote(a)).collect();
    Some(format!(
        "placeholder {{{first}}} inside the {shell} script {} would run task input as shell \
         code; pass it as a positional parameter instead: [{}]",
        quote(script),
        shown.join(", ")
    ))
}

/// The index of the script argument: the one after `-c` or a combined flag holding `c`.
fn script_index(argv: &[String]) -> Option<usize> {
    let mut i = 1;
    while let Some(arg) = argv.get(i) {
        if arg == "-o" || arg == "+o" {
            i += 2;
            continue;
        }
        if arg == "--" || !(arg.starts_with('-') || arg.starts_with('+')) {
            return None;
        }
        let short = !arg.starts_with("--") && arg[1..].chars().all(|c| c.is_ascii_alphabetic());
        if short && arg.starts_with('-') && arg.contains('c') {
            return (i + 1 < argv.len()).then_some(i + 1);
        }
        i += 1;
    }
    None
}

/// The `{key}` placeholders of an argument, as the tool expands them (`{{key}}` is literal).
fn placeholders(arg: &str) -> Vec<(Range<usize>, &str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = arg[i..].find('{').map(|o| i + o) {
        let after = &arg[open + 1..];
        if let Some(inner) = after.strip_prefix('{')
            && let Some(key) = key(inner)
            && inner[key.len() + 1..].starts_with('}')
        {
            i = open + 2 + key.len() + 2;
            continue;
        }
        match key(after) {
            Some(key) => {
                let end = open + 1 + key.len() + 1;
                out.push((open..end, key));
                i = end;
            }
            None => i = open + 1,
        }
    }
    out
}

/// `[A-Za-z_][A-Za-z0-9_-]*` followed by `}`.
fn key(after_brace: &str) -> Option<&str> {
    let key = &after_brace[..after_brace.find('}')?];
    let mut chars = key.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then_some(key)
}

/// A TOML basic string (JSON's escaping is valid TOML).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
