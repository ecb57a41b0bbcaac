//! The layering rules of docs/ARCHITECTURE.md#layers, checked on the source: no import cycle
//! between the top-level modules of `src/`, nothing but `app.rs` uses `cmd/`, and no command
//! file uses another: each may use `cmd/mod.rs` (what they share), not its siblings.
//!
//! A module's imports are the `crate::<module>` paths in its code (also inside `use
//! crate::{a, b}` groups), comments and string literals left out; a top-level module is a
//! file `src/<name>.rs` or a directory `src/<name>/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Where one module refers to another: the file and line of the first reference.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn the_top_level_modules_of_src_import_each_other_without_a_cycle() {
    let files = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(files.len() > 20, "read {} files of src/", files.len());
    let edges = module_edges(&files);
    assert!(edges.contains_key("engine") && edges["engine"].contains_key("store"));
    if let Some(cycle) = find_cycle(&edges) {
        panic!(
            "import cycle between modules of src/:\n{}",
            show(&cycle, &edges)
        );
    }
}

#[test]
fn nothing_but_app_uses_cmd() {
    let files = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found = cmd_users(&files);
    assert!(
        found.iter().any(|(user, _)| user == "app.rs"),
        "app.rs dispatches to cmd: {found:?}"
    );
    let wrong: Vec<_> = found.iter().filter(|(user, _)| user != "app.rs").collect();
    assert!(
        wrong.is_empty(),
        "only app.rs may use cmd/, and a command file only cmd/mod.rs: {wrong:?}"
    );
}

#[test]
fn a_cycle_is_found_with_its_path_and_where_each_step_is() {
    let files = [
        ("a.rs", "use crate::b::B;\n"),
        ("b/mod.rs", "mod inner;\n"),
        (
            "b/inner.rs",
            "// crate::a in a comment\nfn f() { crate::c::go(); }\n",
        ),
        ("c.rs", "use crate::{x, a::{self, A}};\n"),
        ("x.rs", "const S: &str = \"crate::c\";\n"),
    ];
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
    let edges = module_edges(&files);
    let cycle = find_cycle(&edges).expect("a -> b -> c -> a");
    assert_eq!(cycle, ["a", "b", "c", "a"]);
    assert_eq!(
        show(&cycle, &edges),
        "  a -> b (a.rs:1)\n  b -> c (b/inner.rs:2)\n  c -> a (c.rs:1)"
    );
    // The comment and the string are no imports: x imports nothing.
    assert!(!edges.contains_key("x"), "{edges:?}");
    assert_eq!(edges["c"].keys().collect::<Vec<_>>(), ["a", "x"]);

    let without: Vec<_> = files.into_iter().filter(|(p, _)| p != "c.rs").collect();
    assert_eq!(find_cycle(&module_edges(&without)), None);
}

#[test]
fn uses_of_cmd_are_found_by_path_and_from_a_sibling_command() {
    let files: Vec<(String, String)> = [
        ("app.rs", "use crate::cmd;\n"),
        ("engine/run.rs", "fn f() { crate::cmd::run::go() }\n"),
        (
            "cmd/mod.rs",
            "pub mod mcp;\npub mod status;\npub struct Ctx;\n",
        ),
        ("cmd/status.rs", "use super::Ctx;\n"),
        (
            "cmd/mcp.rs",
            "use super::Ctx;\nfn f() { super::status::json() }\n",
        ),
    ]
    .iter()
    .map(|(p, s)| (p.to_string(), s.to_string()))
    .collect();
    assert_eq!(
        cmd_users(&files),
        [
            ("app.rs".to_string(), "app.rs:1".to_string()),
            ("cmd/mcp.rs".to_string(), "cmd/mcp.rs:2".to_string()),
            ("engine/run.rs".to_string(), "engine/run.rs:1".to_string()),
        ]
    );
}

/// Every `.rs` file under `dir`, as its path relative to `dir` and its text, sorted.
fn sources(dir: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The top-level module a file of `src/` belongs to: `store/mod.rs` → `store`.
fn module_of(path: &str) -> &str {
    let first = path.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first)
}

/// module → module it imports → where (the first reference in path order).
fn module_edges(files: &[(String, String)]) -> Edges {
    let mut edges = Edges::new();
    for (path, text) in files {
        let from = module_of(path);
        for (line, to) in crate_paths(&code_only(text)) {
            if to != from && !["self", "super", "crate"].contains(&to.as_str()) {
                edges
                    .entry(from.to_string())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{path}:{line}"));
            }
        }
    }
    edges
}

/// The files that use `cmd/`, each with its first use, sorted: outside `cmd/` by a
/// `crate::cmd` path; the [`SERVER`] by a `super::<command>` or `crate::cmd::<command>` path
/// to another command's file.
fn cmd_users(files: &[(String, String)]) -> Vec<(String, String)> {
    let commands: BTreeSet<&str> = files
        .iter()
        .filter_map(|(p, _)| p.strip_prefix("cmd/")?.strip_suffix(".rs"))
        .filter(|name| *name != "mod")
        .collect();
    let mut users = Vec::new();
    for (path, text) in files {
        let code = code_only(text);
        let command = path
            .strip_prefix("cmd/")
            .and_then(|p| p.strip_suffix(".rs"));
        let uses: Vec<usize> = if let Some(own) = command.filter(|c| commands.contains(c)) {
            paths_after(&code, "super::")
                .into_iter()
                .chain(paths_after(&code, "crate::cmd::"))
                .filter(|(_, name)| commands.contains(name.as_str()) && name != own)
                .map(|(line, _)| line)
                .collect()
        } else if path.starts_with("cmd/") {
            Vec::new()
        } else {
            crate_paths(&code)
                .into_iter()
                .filter(|(_, to)| to == "cmd")
                .map(|(line, _)| line)
                .collect()
        };
        if let Some(first) = uses.into_iter().min() {
            users.push((path.clone(), format!("{path}:{first}")));
        }
    }
    users.sort();
    users
}

/// The first segment of every `crate::` path in `code`, with its line; `crate::{a, b::c}`
/// gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    paths_after(code, "crate::")
}

/// The first segment of every path that starts with `prefix` (`crate::`, `super::`).
fn paths_after(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|i| from + i) {
        from = at + prefix.len();
        if code[..at].ends_with(|c: char| is_ident(c) || c == '$' || c == ':') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = code[from..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // Split the group at its top-level commas; each item's first segment.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && is_ident(c) => {
                        let name: String =
                            group[i..].chars().take_while(|&c| is_ident(c)).collect();
                        let line = line + group[..i].matches('\n').count();
                        found.push((line, name));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.push((line, name));
            }
        }
    }
    found
}

/// `text` with comments, string literals and character literals blanked (lines kept).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let hashes_after = |i: usize| b[i + 1..].iter().take_while(|&&c| c == '#').count();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let prev = if i > 0 { Some(b[i - 1]) } else { None };
        // The length of the literal or comment starting here, if one does.
        let skip = if c == '/' && next == Some('/') {
            b[i..]
                .iter()
                .position(|&c| c == '\n')
                .unwrap_or(b.len() - i)
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            let mut j = i;
            loop {
                if j + 1 >= b.len() {
                    break b.len() - i;
                }
                if b[j] == '/' && b[j + 1] == '*' {
                    depth += 1;
                    j += 2;
                } else if b[j] == '*' && b[j + 1] == '/' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j - i;
                    }
                } else {
                    j += 1;
                }
            }
        } else if c == 'r'
            && !prev.is_some_and(|p| is_ident(p) && p != 'b')
            && b.get(i + 1 + hashes_after(i)) == Some(&'"')
        {
            // A raw string: r"…", r#"…"#, br"…".
            let hashes = hashes_after(i);
            let close: Vec<char> = std::iter::once('"')
                .chain((0..hashes).map(|_| '#'))
                .collect();
            let body = i + 2 + hashes;
            (body..b.len())
                .find(|&j| b[j..].starts_with(&close))
                .map_or(b.len() - i, |j| j + close.len() - i)
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len()) - i
        } else if c == '\'' && next == Some('\\') {
            // An escaped character: '\n', '\'', '\u{7f}'.
            b[i + 2..]
                .iter()
                .position(|&c| c == '\'')
                .map_or(1, |p| p + 3)
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            3
        } else {
            0
        };
        if skip == 0 {
            out.push(c);
            i += 1;
        } else {
            out.extend(b[i..i + skip].iter().map(|&c| blank(c)));
            i += skip;
        }
    }
    out
}

/// A cycle among the modules, as the path `a, b, …, a`; None when there is none.
fn find_cycle(edges: &Edges) -> Option<Vec<String>> {
    // Depth-first search; a module reached again while still on the path closes a cycle.
    fn visit(
        node: &str,
        edges: &Edges,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flat_map(|e| e.keys()) {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}

/// A cycle's steps, one a line, each with where the import is.
fn show(cycle: &[String], edges: &Edges) -> String {
    cycle
        .windows(2)
        .map(|w| format!("  {} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]]))
        .collect::<Vec<_>>()
        .join("\n")
}
