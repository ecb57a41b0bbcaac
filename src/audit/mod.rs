//! The audit log: one JSON object per line, appended to `<state_dir>/audit.jsonl`.
//!
//! Invariants:
//! - Every line is an [`Event`] serialised by serde_json, the one serialiser: `ts` and
//!   `event` are its first keys, `run_id` the third on lines of a run (see [`event`]).
//! - A line is redacted ([`Secrets::value`]) before anything in it is cut, then serialised
//!   completely and written with one `write` call on a file opened with O_APPEND (a batch of
//!   lines, [`AuditLog::append`], shares one), so lines of concurrent processes never
//!   interleave. No line is longer than [`LINE_LIMIT`].
//! - Each line is written under a shared `flock` on the file (waited for at most a second);
//!   the repair of a torn last line at open takes the exclusive one, only when it is free at
//!   once, so it never ends a line that another writer is still writing ([`end_torn_line`]).
//! - Lines are not synced one by one; [`AuditLog::sync`] is called once at the end of a run.
//! - Rotation ([`AuditLog::rotate`], docs/reference.md#retention) moves the whole file aside
//!   (`audit.jsonl.1`, older ones shifted up, the oldest beyond `audit_keep` deleted) and puts in
//!   its place a new file whose first line is `audit_rotated`, atomically (a hard link, then a
//!   rename): a writer that still holds the old file appends to `audit.jsonl.1`, whole lines, and
//!   every [`AuditLog`] notices the new file at its next line and writes there.

pub(crate) mod event;
pub(crate) mod filter;
pub(crate) mod reader;
mod secrets;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

pub(crate) use crate::redact::{Secrets, has_secret_keys};
pub(crate) use event::{Event, EventKind};
pub(crate) use secrets::{secret_vars, short_secrets};

use crate::text::RedactedJson;

/// The most bytes of a tool's output (or any other free text) kept in one audit line.
pub(crate) const TEXT_LIMIT: usize = 4096;

/// The most bytes of one line. A task input is kept whole up to this (it is what ran), but
/// a file can hold anything, and a reader should not have to hold a line of any size.
pub(crate) const LINE_LIMIT: usize = 1024 * 1024;

/// What is written: the time, then the event with its tag and fields.
#[derive(Serialize)]
struct Line<'a> {
    ts: String,
    #[serde(flatten)]
    event: &'a Event<'a>,
}

pub(crate) struct AuditLog {
    file: File,
    /// The open file's device and inode: the name points elsewhere once it was rotated.
    id: (u64, u64),
    path: PathBuf,
    secrets: Secrets,
    /// In a fleet, this node's name: the last key of every line (docs/fleet.md#visible).
    node: Option<String>,
}

/// `audit.jsonl.N`: the N-th most recent rotated file.
pub(crate) fn rotated_path(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the registered secrets.
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .finish()
    }
}

impl AuditLog {
    /// Open (creating, mode 0600) the log for appending; `secrets` never reach it.
    pub(crate) fn open(path: &Path, secrets: Secrets) -> io::Result<AuditLog> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        end_torn_line(&mut file)?;
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        Ok(AuditLog {
            id: (meta.dev(), meta.ino()),
            file,
            path: path.to_path_buf(),
            secrets,
            node: None,
        })
    }

    /// Name the node on every line from now on (a fleet's).
    pub(crate) fn with_node(mut self, node: Option<&str>) -> AuditLog {
        self.node = node.map(str::to_string);
        self
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The secrets this log hides, for the other sinks of the same command.
    pub(crate) fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// Append one event that happened at `ts`.
    pub(crate) fn record(&mut self, ts: DateTime<Utc>, event: &Event) -> io::Result<()> {
        let line = self.render(ts, event);
        self.append(&[line])
    }

    /// Append lines made by [`render`](AuditLog::render), in order, with one `write`.
    pub(crate) fn append(&mut self, lines: &[Vec<u8>]) -> io::Result<()> {
        self.follow_rotation()?;
        let bytes = lines.concat();
        // Shared: appends go on side by side; only the torn-line repair waits for them.
        let locked = lock_shared_briefly(&self.file)?;
        torn_points(&mut self.file, lines, &bytes);
        let written = self.file.write_all(&bytes);
        if locked {
            self.file.unlock()?;
        }
        written
    }

    /// When another process rotated the log since it was opened, continue in the new file.
    fn follow_rotation(&mut self) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let current = match std::fs::metadata(&self.path) {
            Ok(m) => Some((m.dev(), m.ino())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if current != Some(self.id) {
            let fresh = AuditLog::open(&self.path, self.secrets.clone())?;
            self.file.sync_data()?;
            self.file = fresh.file;
            self.id = fresh.id;
        }
        Ok(())
    }

    /// Rotate when the log is larger than `max_size` bytes (docs/reference.md#retention), keeping
    /// `keep` rotated files; the new file starts with `audit_rotated` at `ts`. Call with the run
    /// lock held. Returns whether it rotated.
    pub(crate) fn rotate(
        &mut self,
        max_size: u64,
        keep: usize,
        ts: DateTime<Utc>,
    ) -> io::Result<bool> {
        let size = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        if size <= max_size || keep == 0 {
            return Ok(false);
        }
        // Make room: .keep is deleted, .k becomes .k+1.
        match std::fs::remove_file(rotated_path(&self.path, keep)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        for k in (1..keep).rev() {
            match std::fs::rename(rotated_path(&self.path, k), rotated_path(&self.path, k + 1)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        // The current file keeps its inode (open writers go on appending to it) under .1;
        // the new one, its first line written, takes the name in one rename.
        std::fs::hard_link(&self.path, rotated_path(&self.path, 1))?;
        let mut fresh = self.path.as_os_str().to_owned();
        fresh.push(".new");
        let fresh = PathBuf::from(fresh);
        let shown = rotated_path(&self.path, 1);
        let line = self.render(
            ts,
            &Event::AuditRotated {
                file: &shown,
                bytes: size,
            },
        );
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&fresh)?;
            f.write_all(&line)?;
            f.sync_all()?;
        }
        std::fs::rename(&fresh, &self.path)?;
        self.follow_rotation()?;
        Ok(true)
    }

    /// The full line, redacted, capped and newline-terminated, as `record` writes it.
    pub(crate) fn render(&self, ts: DateTime<Utc>, event: &Event) -> Vec<u8> {
        let line = Line {
            ts: format_ts(ts),
            event,
        };
        // Serialising our own types into a Value cannot fail: no map has non-string keys.
        let mut value = serde_json::to_value(&line).unwrap_or(Value::Null);
        // An event's own `node` (the node `fleet forget` freed) is kept.
        if let (Some(node), Value::Object(keys)) = (&self.node, &mut value) {
            keys.entry("node")
                .or_insert_with(|| Value::String(node.clone()));
        }
        let value = self.secrets.redact_json(value);
        let mut bytes = serde_json::to_vec(&value).unwrap_or_default();
        if bytes.len() > LINE_LIMIT {
            bytes = cap(value);
        }
        bytes.push(b'\n');
        bytes
    }

    /// Flush everything written so far to disk (once per run).
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// A crash can leave half a line at the end: end it, so that our first line starts on a line
/// of its own and only the torn line is lost, never the next one.
///
/// The last byte of a file others append to is only known to be a torn line's when nobody is
/// writing: a line being written shows part by part, and a newline put after it would make
/// an empty line. Every writer holds a shared `flock` on the file while it writes a line, so
/// the repair is made under the exclusive one, and skipped when that is not free at once (a
/// line is being written: the file's end is that writer's, and its line ends it). A line
/// that still follows a torn one is found by readers (`heartbeat log`).
fn end_torn_line(file: &mut File) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(()),
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    let result = (|| {
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, len - 1)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(())
    })();
    file.unlock()?;
    result
}

/// The writers' shared lock, waited for at most a second: heartbeat's repair holds the
/// exclusive one for a moment only, and a process that holds it longer (not heartbeat) must
/// not stop the log. False: written without it.
fn lock_shared_briefly(file: &File) -> io::Result<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match file.try_lock_shared() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// A line over [`LINE_LIMIT`], made to fit: long strings are cut (after redaction), and if
/// that is not enough, only the scalar fields of the line are kept.
fn cap(mut value: RedactedJson) -> Vec<u8> {
    for limit in [TEXT_LIMIT, 256] {
        value = value.cut_strings(limit);
        let bytes = serde_json::to_vec(&value).unwrap_or_default();
        if bytes.len() <= LINE_LIMIT {
            return bytes;
        }
    }
    let mut value = value.into_value();
    if let Value::Object(m) = &mut value {
        for v in m.values_mut() {
            if v.is_array() || v.is_object() {
                *v = Value::String("*** too large for the audit log".into());
            }
        }
    }
    serde_json::to_vec(&value).unwrap_or_default()
}

/// The `audit_torn` fault point (debug builds), reached once per line: a crash while
/// `bytes` (the `lines`, joined) is written, leaving the lines before that one and half of it.
fn torn_points(file: &mut File, lines: &[Vec<u8>], bytes: &[u8]) {
    let mut start = 0;
    for line in lines {
        crate::fault::point_then("audit_torn", || {
            let _ = file.write_all(&bytes[..start + line.len() / 2]);
        });
        start += line.len();
    }
}

/// RFC 3339, UTC, milliseconds, `Z`.
pub(crate) fn format_ts(ts: DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time as the log (or any RFC 3339 text) has it; None when it is not one.
pub(crate) fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::event::{Mark, TaskRun};
    use super::*;
    use crate::text::Redacted;
    use serde_json::{Map, json};

    fn ts() -> DateTime<Utc> {
        "2026-03-29T01:00:00Z".parse().unwrap()
    }

    #[test]
    fn rotation_keeps_whole_lines_and_every_writer_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let event = Event::StatePruned {
            run_id: "r1",
            rows: 7,
        };
        let mut a = AuditLog::open(&path, Secrets::default()).unwrap();
        let mut b = AuditLog::open(&path, Secrets::default()).unwrap();
        for _ in 0..20 {
            a.record(ts(), &event).unwrap();
        }
        assert!(!b.rotate(1 << 20, 3, ts()).unwrap(), "not big enough yet");
        assert!(b.rotate(100, 3, ts()).unwrap());
        // `a` still held the old file: its next line goes to the new one.
        a.record(ts(), &event).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = new.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains("\"event\":\"audit_rotated\""),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("\"rows\":7"));
        let old = std::fs::read_to_string(rotated_path(&path, 1)).unwrap();
        assert_eq!(old.lines().count(), 20);
        assert!(old.ends_with('\n'));
        // Keep 3: a fourth rotation drops the oldest.
        for _ in 0..3 {
            a.record(ts(), &event).unwrap();
            assert!(b.rotate(100, 3, ts()).unwrap());
        }
        assert!(rotated_path(&path, 3).exists());
        assert!(!rotated_path(&path, 4).exists());
    }

    #[test]
    fn appended_lines_follow_the_last_line_in_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut a = AuditLog::open(&path, Secrets::default()).unwrap();
        let line = |rows| a.render(ts(), &Event::StatePruned { run_id: "r1", rows });
        let (one, two, three) = (line(1), line(2), line(3));
        a.record(
            ts(),
            &Event::StatePruned {
                run_id: "r1",
                rows: 0,
            },
        )
        .unwrap();
        a.append(&[one.clone(), two.clone(), three.clone()])
            .unwrap();
        let first = a.render(
            ts(),
            &Event::StatePruned {
                run_id: "r1",
                rows: 0,
            },
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [first, one, two, three].concat()
        );
    }

    fn keys(line: &[u8]) -> Vec<String> {
        let v: Value = serde_json::from_slice(line).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn ts_event_and_run_id_come_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(&dir.path().join("a.jsonl"), Secrets::default()).unwrap();
        let files = [Path::new("/x/HEARTBEAT.md")];
        let line = log.render(
            ts(),
            &Event::RunStarted {
                run_id: "r1",
                mode: "once",
                files: &files,
                autonomy: "cautious",
                host: "h".into(),
                pid: 7,
                version: "0.1.0",
                since_last_run_s: Some(90),
                trigger: crate::model::Trigger::Schedule,
            },
        );
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"ts\":\"2026-03-29T01:00:00.000Z\",\"event\":\"run_started\",\"run_id\":\"r1\",\"mode\":\"once\",\"files\":[\"/x/HEARTBEAT.md\"],\"autonomy\":\"cautious\",\"host\":\"h\",\"pid\":7,\"version\":\"0.1.0\",\"since_last_run_s\":90,\"trigger\":\"schedule\"}\n"
        );
        let input = Secrets::default().redact_json(Value::Object(Map::new()));
        let (o, empty) = (Redacted::from("o"), Redacted::from(""));
        let run = |run_id| TaskRun {
            run_id,
            task_id: "abc",
            file: Path::new("/x"),
            line: 3,
            section: "recurring",
            tool: "log",
            input: &input,
            exit_code: None,
            duration_ms: Some(5),
            output: Some(&o),
            error: None,
            cost_usd: None,
            approval_id: None,
            reason: Some("interrupted"),
            trigger: crate::model::Trigger::Manual,
            summary: None,
            stderr: Some(&empty),
        };
        let mark = Mark {
            run_id: "r1",
            task_id: "abc",
            file: Path::new("/x"),
            line: Some(3),
            reason: None,
        };
        let (gone, ttl) = (Redacted::from("gone"), Redacted::from("ttl"));
        let cases: Vec<(Event, &[&str])> = vec![
            (
                Event::TaskFailed(run("r1")),
                &[
                    "ts",
                    "event",
                    "run_id",
                    "task_id",
                    "file",
                    "line",
                    "section",
                    "tool",
                    "input",
                    "exit_code",
                    "duration_ms",
                    "output",
                    "error",
                    "cost_usd",
                    "approval_id",
                    "reason",
                    "trigger",
                    "stderr",
                ],
            ),
            (
                Event::TaskMarkedDone(mark),
                &["ts", "event", "run_id", "task_id", "file", "line", "reason"],
            ),
            (
                Event::RunSkipped {
                    run_id: "r1",
                    reason: crate::model::RunSkipReason::Locked,
                    next_active: None,
                    until: None,
                    by: None,
                    holder_pid: Some(Some(4)),
                    holder_since: Some(None),
                },
                &[
                    "ts",
                    "event",
                    "run_id",
                    "reason",
                    "holder_pid",
                    "holder_since",
                ],
            ),
            (
                Event::ApprovalStale(event::Ended {
                    run_id: Some("r1"),
                    approval_id: 1,
                    task_id: "abc",
                    reason: &gone,
                }),
                &["ts", "event", "run_id", "approval_id", "task_id", "reason"],
            ),
            (
                Event::ApprovalExpired(event::Ended {
                    run_id: None,
                    approval_id: 1,
                    task_id: "abc",
                    reason: &ttl,
                }),
                &["ts", "event", "approval_id", "task_id", "reason"],
            ),
            (
                Event::BudgetExhausted {
                    run_id: "r1",
                    spent_usd: 1.5,
                    daily_usd: 1.0,
                },
                &["ts", "event", "run_id", "spent_usd", "daily_usd"],
            ),
        ];
        for (event, want) in cases {
            let line = log.render(ts(), &event);
            assert_eq!(keys(&line), want, "{}", String::from_utf8_lossy(&line));
            assert!(line.starts_with(b"{\"ts\":\"2026-03-29T01:00:00.000Z\",\"event\":\""));
        }
        let line = log.render(ts(), &Event::TaskSucceeded(run("r1")));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["event"], "task_succeeded");
        assert_eq!(v["summary"], Value::Null);
        assert!(v.get("summary").is_none());
    }

    #[test]
    fn secret_keys_and_secret_values_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(
            &dir.path().join("a.jsonl"),
            Secrets::new(["123:ABC".to_string()]),
        )
        .unwrap();
        // Its keys redacted as an event's input is; its registered secret by the log's pass.
        let input = Secrets::default().redact_json(json!({
            "api_key": "k", "nested": {"ok": "123:ABC"}, "list": [{"passwd": 1}], "url": "https://x"
        }));
        let line = log.render(
            ts(),
            &Event::ApprovalRequested {
                run_id: "r1",
                approval_id: 1,
                task_id: "abc",
                tool: "t",
                input: &input,
                file: Path::new("/x 123:ABC"),
                line: 1,
            },
        );
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            v["input"],
            json!({"api_key": "***", "nested": {"ok": "***"}, "list": [{"passwd": "***"}], "url": "https://x"})
        );
        assert_eq!(v["file"], "/x ***");
    }

    #[test]
    fn lines_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(&dir.path().join("a.jsonl"), Secrets::default()).unwrap();
        let mut input = Map::new();
        for i in 0..200 {
            input.insert(format!("k{i}"), json!("x".repeat(10_000)));
        }
        let input = Secrets::default().redact_json(Value::Object(input));
        let event = Event::ApprovalRequested {
            run_id: "r1",
            approval_id: 1,
            task_id: "abc",
            tool: "t",
            input: &input,
            file: Path::new("/x"),
            line: 1,
        };
        let line = log.render(ts(), &event);
        assert!(line.len() <= LINE_LIMIT + 1, "{}", line.len());
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["approval_id"], 1);
        assert_eq!(v["run_id"], "r1");
    }

    #[test]
    fn lines_are_appended_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut a = AuditLog::open(&path, Secrets::default()).unwrap();
        let mut b = AuditLog::open(&path, Secrets::default()).unwrap();
        let big = Secrets::default().redact(&"x".repeat(30_000));
        for i in 0..20 {
            let log = if i % 2 == 0 { &mut a } else { &mut b };
            let event = Event::TaskReminded {
                run_id: "r1",
                task_id: &i.to_string(),
                file: Path::new("/x"),
                line: i,
                text: &big,
            };
            log.record(Utc::now(), &event).unwrap();
        }
        a.sync().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 20);
        for (i, line) in lines.iter().enumerate() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["line"], json!(i));
        }
    }

    #[test]
    fn a_torn_last_line_is_ended_before_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{\"ts\":\"x\",\"event\":\"a\"}\n{\"ts\":\"x\",\"ev").unwrap();
        let mut log = AuditLog::open(&path, Secrets::default()).unwrap();
        let event = Event::StatePruned {
            run_id: "r1",
            rows: 1,
        };
        log.record(Utc::now(), &event).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(serde_json::from_str::<Value>(lines[2]).is_ok(), "{text}");
        // A file that ends properly gets nothing extra.
        drop(AuditLog::open(&path, Secrets::default()).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    /// A half line at the end of the file while its writer still writes it (holding the
    /// writers' shared lock) is not a torn line: opening the log then adds no newline, so
    /// the writer's line ends whole and no empty line appears.
    #[test]
    fn a_line_being_written_is_not_ended_by_another_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let whole = "{\"ts\":\"x\",\"event\":\"a\"}\n";
        std::fs::write(&path, &whole[..10]).unwrap();
        let writer = OpenOptions::new().append(true).open(&path).unwrap();
        writer.lock_shared().unwrap();
        let mut log = AuditLog::open(&path, Secrets::default()).unwrap();
        (&writer).write_all(&whole.as_bytes()[10..]).unwrap();
        writer.unlock().unwrap();
        log.record(
            Utc::now(),
            &Event::StatePruned {
                run_id: "r1",
                rows: 1,
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert_eq!(format!("{}\n", lines[0]), whole);
        assert!(serde_json::from_str::<Value>(lines[1]).is_ok(), "{text}");
    }

    /// Another process holding an exclusive lock on the log for long does not stop it.
    #[test]
    fn a_foreign_exclusive_lock_does_not_stop_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut log = AuditLog::open(&path, Secrets::default()).unwrap();
        let other = File::open(&path).unwrap();
        other.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let event = Event::StatePruned {
                run_id: "r1",
                rows: 1,
            };
            let _ = tx.send(log.record(Utc::now(), &event).is_ok());
        });
        let written = rx.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(written, Ok(true), "the log waited for the lock");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    }
}
