//! Reading the audit log: its rotated files and the current one, oldest first, line by
//! line, and following it as it grows and rotates (`tail -f`).
//!
//! Invariants:
//! - The log is read as a stream, one line at a time; a line longer than [`MAX_LINE`] is
//!   skipped without being kept, so memory stays bounded whatever the file holds.
//! - Only `\n`-terminated lines are given out: a torn last line (a crash in the middle of a
//!   write) is never one; when following, an unfinished line is held until its newline
//!   arrives. [`parse_line`] finds the whole line that follows a torn part when a later write
//!   was appended right after it.
//! - Rotated files last written before `since` are not opened: every line in them is older.
//! - Following, when the file was replaced, every file that came after the one read is read
//!   (the rotated ones first, oldest first, then the new one); a truncated file (smaller than
//!   what was read) is read again from its start.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// Lines longer than this are skipped (heartbeat's own lines are far shorter: texts are cut
/// to 4 KiB; only a tool's input is not cut).
const MAX_LINE: usize = 16 << 20;

/// How every line heartbeat writes begins.
const LINE_START: &str = r#"{"ts":""#;

/// A failed read, and of which file.
#[derive(Debug)]
pub(crate) struct ReadError {
    pub path: PathBuf,
    pub source: io::Error,
}

/// The log's files, read in order: the rotated ones (oldest first), then the log itself,
/// which can then be followed.
pub(crate) struct AuditReader {
    path: PathBuf,
    /// Rotated files not opened yet, oldest first.
    rotated: VecDeque<PathBuf>,
    /// The file being read; the log itself once `rotated` is empty and it was opened.
    tail: Option<Tail>,
    on_log: bool,
}

impl AuditReader {
    /// Every line of the log at `path` and its rotated files, without the rotated files
    /// last written before `since`.
    pub(crate) fn from_start(path: &Path, since: Option<DateTime<Utc>>) -> AuditReader {
        AuditReader {
            path: path.to_path_buf(),
            rotated: rotated_files(path, since).into(),
            tail: None,
            on_log: false,
        }
    }

    /// Only the lines written from now on (`tail -f`); a line being written at this moment
    /// is skipped whole.
    pub(crate) fn from_end(path: &Path) -> Result<AuditReader, ReadError> {
        let mut tail = Tail::open(path).map_err(|e| read_error(path, e))?;
        tail.skip_to_end().map_err(|e| read_error(path, e))?;
        Ok(AuditReader {
            path: path.to_path_buf(),
            rotated: VecDeque::new(),
            tail: Some(tail),
            on_log: true,
        })
    }

    /// The next complete line, newline included. None at the end of what is there now (an
    /// unfinished line is kept for a later call).
    pub(crate) fn next_line(&mut self) -> Result<Option<&[u8]>, ReadError> {
        loop {
            let tail = match &mut self.tail {
                Some(tail) => tail,
                None => {
                    let path = match self.rotated.pop_front() {
                        Some(old) => old,
                        None => {
                            self.on_log = true;
                            self.path.clone()
                        }
                    };
                    let tail = Tail::open(&path).map_err(|e| read_error(&path, e))?;
                    self.tail.insert(tail)
                }
            };
            if tail.next_line().map_err(|e| read_error(&tail.path, e))? {
                break;
            }
            if self.on_log {
                return Ok(None);
            }
            self.tail = None;
        }
        Ok(self.tail.as_ref().map(|t| t.buf.as_slice()))
    }

    /// Following, at the end of the log: see whether the log was replaced (rotated) or
    /// truncated since, and read on from what came after.
    pub(crate) fn check_replaced(&mut self) -> Result<(), ReadError> {
        match &mut self.tail {
            Some(tail) if self.on_log => {
                tail.check_replaced().map_err(|e| read_error(&self.path, e))
            }
            _ => Ok(()),
        }
    }
}

fn read_error(path: &Path, source: io::Error) -> ReadError {
    ReadError {
        path: path.to_path_buf(),
        source,
    }
}

/// The rotated audit files (`audit.jsonl.N` … `.1`), oldest first, without those last
/// written before `since` (every line in them is older).
fn rotated_files(path: &Path, since: Option<DateTime<Utc>>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for n in 1..=1000 {
        let old = super::rotated_path(path, n);
        let Ok(meta) = std::fs::metadata(&old) else {
            break;
        };
        let written: Option<DateTime<Utc>> = meta.modified().ok().map(DateTime::from);
        if since.is_some_and(|s| written.is_some_and(|w| w < s)) {
            // This one and every older one hold nothing that recent.
            break;
        }
        files.push(old);
    }
    files.reverse();
    files
}

/// A line as a JSON object, read by `parse` (None: not one), and where it starts: 0, or,
/// when a torn line was continued by a later write, where the whole line that follows the
/// torn part begins.
pub(crate) fn parse_line<T>(line: &[u8], parse: impl Fn(&[u8]) -> Option<T>) -> Option<(usize, T)> {
    if let Some(obj) = parse(line) {
        return Some((0, obj));
    }
    let start = LINE_START.as_bytes();
    (1..line.len().saturating_sub(start.len()))
        .filter(|&i| line[i..].starts_with(start))
        .take(8)
        .find_map(|i| parse(&line[i..]).map(|obj| (i, obj)))
}

/// A line as a JSON object.
pub(crate) fn object(line: &[u8]) -> Option<Map<String, Value>> {
    serde_json::from_slice(line).ok()
}

/// The log file, read line by line, reopened when replaced or truncated.
struct Tail {
    path: PathBuf,
    reader: Option<BufReader<File>>,
    /// (dev, inode) of the open file.
    id: (u64, u64),
    /// Bytes consumed from the open file.
    pos: u64,
    /// The current line: complete (newline included) when `next_line` said so, else the
    /// part read so far.
    buf: Vec<u8>,
    complete: bool,
    /// Inside a line longer than [`MAX_LINE`] (or one begun before `-f` started): dropping
    /// bytes until its newline.
    overlong: bool,
    /// Files that took the open one's place (rotations, a replacement), oldest first: each
    /// is read from its start once the one before it is read to its end.
    next: VecDeque<File>,
}

impl Tail {
    fn open(path: &Path) -> io::Result<Tail> {
        let mut tail = Tail {
            path: path.to_path_buf(),
            reader: None,
            id: (0, 0),
            pos: 0,
            buf: Vec::new(),
            complete: false,
            overlong: false,
            next: VecDeque::new(),
        };
        match File::open(path) {
            Ok(file) => tail.switch_to(file)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(tail)
    }

    fn switch_to(&mut self, file: File) -> io::Result<()> {
        let meta = file.metadata()?;
        self.id = (meta.dev(), meta.ino());
        self.reader = Some(BufReader::with_capacity(64 * 1024, file));
        self.restart();
        Ok(())
    }

    /// Start at the end of the file (`-f`): only lines written from now on are read; a line
    /// being written at this moment is skipped whole.
    fn skip_to_end(&mut self) -> io::Result<()> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(());
        };
        let len = reader.seek(SeekFrom::End(0))?;
        self.pos = len;
        if len > 0 {
            use std::os::unix::fs::FileExt;
            let mut last = [0u8; 1];
            reader.get_ref().read_exact_at(&mut last, len - 1)?;
            self.overlong = last[0] != b'\n';
        }
        Ok(())
    }

    /// Forget the unfinished line: the file starts over.
    fn restart(&mut self) {
        self.pos = 0;
        self.buf.clear();
        self.complete = false;
        self.overlong = false;
    }

    /// Read the next complete line into `buf`. False at the end of the file, with an
    /// unfinished line (if any) kept in `buf` for the next call.
    fn next_line(&mut self) -> io::Result<bool> {
        if self.complete {
            self.buf.clear();
            self.complete = false;
        }
        loop {
            let Some(reader) = self.reader.as_mut() else {
                return Ok(false);
            };
            let n = if self.overlong {
                let mut drop = Vec::new();
                let n = reader
                    .by_ref()
                    .take(64 * 1024)
                    .read_until(b'\n', &mut drop)?;
                if drop.last() == Some(&b'\n') {
                    self.overlong = false;
                }
                n
            } else {
                let room = (MAX_LINE + 1 - self.buf.len()) as u64;
                let n = reader
                    .by_ref()
                    .take(room)
                    .read_until(b'\n', &mut self.buf)?;
                if self.buf.last() == Some(&b'\n') {
                    self.pos += n as u64;
                    self.complete = true;
                    return Ok(true);
                }
                if self.buf.len() > MAX_LINE {
                    self.buf = Vec::new();
                    self.overlong = true;
                }
                n
            };
            self.pos += n as u64;
            if n == 0 {
                // The end of this file; go on with the next one, if there is one.
                match self.next.pop_front() {
                    Some(file) => self.switch_to(file)?,
                    None => return Ok(false),
                }
            }
        }
    }

    /// `-f`, at the end of the file: has the file at `path` been replaced (rotated) or
    /// truncated? A truncated file is read from its start at once. Files that replaced it are
    /// read in order once it is read out: every file rotated out since (`audit.jsonl.1` …,
    /// when the log rotated more than once between two looks), then the one now at `path`.
    /// A removed file is read on until a new one appears.
    fn check_replaced(&mut self) -> io::Result<()> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let id = (meta.dev(), meta.ino());
        let newest = match self.next.back() {
            Some(file) => file_id(file)?,
            None if self.reader.is_some() => self.id,
            None => {
                match File::open(&self.path) {
                    Ok(file) => self.switch_to(file)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                return Ok(());
            }
        };
        if id == newest {
            if self.next.is_empty()
                && meta.len() < self.pos
                && let Some(reader) = self.reader.as_mut()
            {
                reader.seek(SeekFrom::Start(0))?;
                self.restart();
            }
            return Ok(());
        }
        let current = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let current_id = file_id(&current)?;
        // The rotated files, newest first, down to the newest one already taken: those
        // above it came after it. (It was replaced some other way when it is not among them:
        // then only the file at `path` follows.)
        let mut between = Vec::new();
        let mut found = false;
        for n in 1..=1000 {
            let file = match File::open(super::rotated_path(&self.path, n)) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(e),
            };
            let fid = file_id(&file)?;
            if fid == newest {
                found = true;
                break;
            }
            // Rotated again since `path` was opened just now: it is read as that file.
            if fid != current_id {
                between.push(file);
            }
        }
        if !found {
            // Rotated so often that it was deleted (past `audit_keep`): every rotated file
            // last written after it came after it. Removed some other way, or replaced: none.
            let newest = match (self.next.back(), self.reader.as_ref()) {
                (Some(file), _) => file.metadata()?,
                (None, Some(reader)) => reader.get_ref().metadata()?,
                (None, None) => return Ok(()),
            };
            let written = |m: &std::fs::Metadata| m.modified().ok();
            let after = |f: &File| f.metadata().is_ok_and(|m| written(&m) >= written(&newest));
            between.retain(|f| newest.nlink() == 0 && after(f));
        }
        self.next.extend(between.into_iter().rev());
        self.next.push_back(current);
        Ok(())
    }
}

/// (dev, inode) of an open file.
fn file_id(file: &File) -> io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;

    fn lines(reader: &mut AuditReader) -> Vec<String> {
        let mut all = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            all.push(String::from_utf8(line.to_vec()).unwrap());
        }
        all
    }

    fn append(path: &Path, text: &str) {
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_torn_line_continued_by_a_whole_one_yields_the_whole_one() {
        let line = br#"{"ts":"2026-05-01T10:00:00.000Z","event":"task_suc{"ts":"2026-05-01T10:00:01.000Z","event":"run_started"}"#;
        let (start, obj) = parse_line(line, object).unwrap();
        assert_eq!(obj["event"], "run_started");
        assert_eq!(&line[start..start + 7], br#"{"ts":""#);
        assert!(parse_line(b"garbage", object).is_none());
        assert!(parse_line(b"[1,2]", object).is_none());
    }

    #[test]
    fn rotated_files_come_first_oldest_first_then_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        fs::write(super::super::rotated_path(&log, 2), "two\n").unwrap();
        fs::write(super::super::rotated_path(&log, 1), "one\n").unwrap();
        fs::write(&log, "now\nhalf").unwrap();
        let mut reader = AuditReader::from_start(&log, None);
        assert_eq!(lines(&mut reader), ["two\n", "one\n", "now\n"]);
        // The unfinished line is given once its newline came.
        append(&log, " done\n");
        assert_eq!(lines(&mut reader), ["half done\n"]);
        // Rotated files last written before `since` are left out.
        let later = Utc::now() + chrono::Duration::hours(1);
        let mut reader = AuditReader::from_start(&log, Some(later));
        assert_eq!(lines(&mut reader), ["now\n", "half done\n"]);
    }

    #[test]
    fn a_missing_log_has_no_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        assert!(lines(&mut AuditReader::from_start(&log, None)).is_empty());
        let mut reader = AuditReader::from_end(&log).unwrap();
        assert!(lines(&mut reader).is_empty());
        // Following, the log that appears is read from its start.
        fs::write(&log, "first\n").unwrap();
        reader.check_replaced().unwrap();
        assert_eq!(lines(&mut reader), ["first\n"]);
    }

    #[test]
    fn from_the_end_skips_what_is_there_and_the_line_being_written() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        fs::write(&log, "old\nbeing writ").unwrap();
        let mut reader = AuditReader::from_end(&log).unwrap();
        assert!(lines(&mut reader).is_empty());
        append(&log, "ten\nnew\n");
        assert_eq!(lines(&mut reader), ["new\n"]);
    }

    #[test]
    fn following_reads_the_rotated_file_out_then_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        fs::write(&log, "a\n").unwrap();
        let mut reader = AuditReader::from_start(&log, None);
        assert_eq!(lines(&mut reader), ["a\n"]);
        append(&log, "b\n");
        fs::rename(&log, super::super::rotated_path(&log, 1)).unwrap();
        fs::write(&log, "c\n").unwrap();
        reader.check_replaced().unwrap();
        assert_eq!(lines(&mut reader), ["b\n", "c\n"]);
        // Truncated: read again from its start.
        fs::write(&log, "").unwrap();
        reader.check_replaced().unwrap();
        append(&log, "d\n");
        assert_eq!(lines(&mut reader), ["d\n"]);
    }
}
