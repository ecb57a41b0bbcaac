//! A real SMTP server on 127.0.0.1 for the e-mail tests: Python's standard `smtpd`, with
//! AUTH PLAIN added (`smtp_double.py`, written to a temp dir and run with `python3`). It
//! saves every message it receives, with the envelope and the login, and answers the end of
//! DATA as a test lines up (`451 …`, `550 …`), else 250. Where no Python with `smtpd` can
//! be started (it left the standard library in 3.12), a test calls `cannot_run_here`.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use crate::common::cannot_run_here;

const SERVER: &str = include_str!("smtp_double.py");

/// The running server; stopped when dropped.
pub(crate) struct SmtpDouble {
    child: Child,
    /// Held open: the server exits when it closes (also if the test process dies).
    _stdin: ChildStdin,
    dir: TempDir,
    port: u16,
}

/// One DATA the server received, accepted or not.
#[derive(Clone, Debug)]
pub(crate) struct Mail {
    /// The answer it was given (`250 OK`, or the one lined up).
    pub answer: String,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    /// The AUTH PLAIN user and password, if the client logged in.
    pub login: Option<(String, String)>,
    /// Decoded (encoded words read), in order.
    pub headers: Vec<(String, String)>,
    /// The text/plain body, decoded.
    pub body: String,
    /// The message as received.
    pub raw: String,
}

impl Mail {
    /// The value of every header named `name`.
    pub(crate) fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The one header named `name`.
    #[track_caller]
    pub(crate) fn header(&self, name: &str) -> &str {
        match self.header_all(name)[..] {
            [one] => one,
            ref other => panic!("{name}: {other:?} in {self:#?}"),
        }
    }

    pub(crate) fn accepted(&self) -> bool {
        self.answer.starts_with('2')
    }
}

impl SmtpDouble {
    /// Starts the server, or says why it cannot (see the module) and returns None.
    pub(crate) fn start() -> Option<SmtpDouble> {
        let dir = tempfile::tempdir().expect("temp dir");
        let script = dir.path().join("smtp_double.py");
        std::fs::write(&script, SERVER).expect("write the server");
        let mail_dir = dir.path().join("mail");
        std::fs::create_dir(&mail_dir).expect("mail dir");
        let spawned = Command::new("python3")
            .arg(&script)
            .arg(&mail_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                cannot_run_here(&format!("the SMTP double needs python3: {e}"));
                return None;
            }
        };
        let mut first = String::new();
        let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first);
        let Ok(port) = first.trim().parse::<u16>() else {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait for python3");
            cannot_run_here(&format!(
                "the SMTP double (python3 with the standard library's smtpd, Python <= 3.11) \
                 did not start: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return None;
        };
        let stdin = child.stdin.take().expect("stdin");
        Some(SmtpDouble {
            child,
            _stdin: stdin,
            dir,
            port,
        })
    }

    /// `smtp://user:password@127.0.0.1:PORT` (plain: a loopback host).
    pub(crate) fn url(&self, user: &str, password: &str) -> String {
        format!("smtp://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// Answer the end of the next DATA (after those already lined up) with `reply`.
    pub(crate) fn answer(&self, reply: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("mail/answers"))
            .expect("answers");
        writeln!(f, "{reply}").expect("write answers");
    }

    /// Every DATA received so far, in order.
    pub(crate) fn received(&self) -> Vec<Mail> {
        let mut names: Vec<_> = std::fs::read_dir(self.dir.path().join("mail"))
            .expect("mail dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| {
                let v: Value =
                    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("JSON");
                let strings = |v: &Value| -> Vec<String> {
                    v.as_array()
                        .map(|a| {
                            a.iter()
                                .map(|s| s.as_str().unwrap_or_default().to_string())
                                .collect()
                        })
                        .unwrap_or_default()
                };
                Mail {
                    answer: v["answer"].as_str().unwrap_or_default().to_string(),
                    mail_from: v["mail_from"].as_str().unwrap_or_default().to_string(),
                    rcpt_to: strings(&v["rcpt_to"]),
                    login: match strings(&v["login"])[..] {
                        [ref user, ref password] => Some((user.clone(), password.clone())),
                        _ => None,
                    },
                    headers: v["headers"]
                        .as_array()
                        .map(|hs| {
                            hs.iter()
                                .map(|h| {
                                    let kv = strings(h);
                                    (kv[0].clone(), kv[1].clone())
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    body: v["body"].as_str().unwrap_or_default().to_string(),
                    raw: v["raw"].as_str().unwrap_or_default().to_string(),
                }
            })
            .collect()
    }
}

impl Drop for SmtpDouble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
