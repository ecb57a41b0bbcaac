//! What the HTTP clients (the `http` tool, Telegram and the other channels, MCP servers over
//! Streamable HTTP) share: whether a URL is loopback, and how a send that failed is classed.

use std::time::Duration;

use reqwest::Url;

/// Whether `url` names this machine (`localhost`, `127.0.0.0/8`, `[::1]`). Such a URL is
/// always reached directly: a proxy set for the whole machine (`HTTP_PROXY`, often there for
/// package registries) cannot reach the caller's loopback, and tests' doubles live there.
pub(crate) fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Why a send did not go through: the one classification every channel answers with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SendError {
    /// The channel answered with an error that may pass later: try the other messages, and
    /// this one again at the next run.
    Refused(String),
    /// The channel answered that this message can never be sent (an HTTP 4xx other than
    /// 408 and 429: a bad destination, a blocked bot, a text it cannot take): it is dropped
    /// at once (`rejected`).
    Rejected(String),
    /// The channel could not be reached or failed (network, 5xx, a timeout, no token): stop
    /// sending on it for now.
    Unavailable(String),
    /// The channel asked to wait this long before the next message (HTTP 429).
    RetryAfter(Duration, String),
}

impl SendError {
    pub(crate) fn message(&self) -> &str {
        match self {
            SendError::Refused(m)
            | SendError::Rejected(m)
            | SendError::Unavailable(m)
            | SendError::RetryAfter(_, m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for (url, want) in [
            ("http://127.0.0.1:8080/x", true),
            ("http://127.9.9.9/", true),
            ("http://LOCALHOST/", true),
            ("http://[::1]:9/mcp", true),
            ("https://api.telegram.org", false),
            ("http://10.0.0.1/", false),
            ("http://localhost.example.org/", false),
        ] {
            assert_eq!(is_loopback(&Url::parse(url).unwrap()), want, "{url}");
        }
    }
}
