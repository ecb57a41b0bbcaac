//! A webhook receiver on 127.0.0.1 for the channel tests (Slack, Discord, webhooks, ntfy):
//! it records every request and answers with the statuses a test lines up, then 200. A
//! test can make it hold its answer (a hung endpoint) until the double is dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::test_server::{Reply, Request, TestServer};

/// One scripted answer.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    /// This status, with these headers and body.
    Status(u16, Vec<(String, String)>, String),
    /// No answer until the double is dropped (or 60 s pass).
    Hang,
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    answers: VecDeque<Answer>,
    /// Answers for GET requests (a poll), in order; an empty 200 once they run out.
    polls: VecDeque<String>,
}

/// The running receiver.
pub(crate) struct HookDouble {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    server: Option<TestServer>,
}

impl HookDouble {
    pub(crate) fn start() -> HookDouble {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (state.clone(), stop.clone());
        let server = TestServer::start(move |req| {
            let answer = {
                let mut st = s.lock().unwrap();
                st.requests.push(req.clone());
                if req.method == "GET" {
                    let body = st.polls.pop_front().unwrap_or_default();
                    return Reply::raw(200, "application/x-ndjson", body);
                }
                st.answers.pop_front()
            };
            match answer {
                None => Reply::raw(200, "application/json", "{}"),
                Some(Answer::Status(status, headers, body)) => {
                    let mut r = Reply::raw(status, "text/plain", body);
                    for (k, v) in &headers {
                        r = r.with_header(k, v);
                    }
                    r
                }
                Some(Answer::Hang) => {
                    for _ in 0..600 {
                        if halt.load(Ordering::SeqCst) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Reply::raw(200, "application/json", "{}")
                }
            }
        });
        HookDouble {
            state,
            stop,
            server: Some(server),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        self.server.as_ref().expect("running").url()
    }

    /// The next POST gets this status (then 200s again).
    pub(crate) fn answer(&self, status: u16) {
        self.answer_with(Answer::Status(
            status,
            Vec::new(),
            format!("status {status}"),
        ));
    }

    pub(crate) fn answer_with(&self, answer: Answer) {
        self.state.lock().unwrap().answers.push_back(answer);
    }

    /// The next GET (a poll of ntfy's reply topic) is answered with `body`, JSON lines
    /// (then the next one lined up, then an empty 200).
    pub(crate) fn poll_answer(&self, body: impl Into<String>) {
        self.state.lock().unwrap().polls.push_back(body.into());
    }

    /// Every request so far.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The POSTs so far.
    pub(crate) fn posts(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect()
    }
}

impl Drop for HookDouble {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.take();
    }
}
