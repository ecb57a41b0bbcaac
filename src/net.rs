//! What the HTTP clients (the `http` tool, Telegram, MCP servers over Streamable HTTP) share.

use reqwest::Url;

/// Whether `url` names this machine (`localhost`, `127.0.0.0/8`, `[::1]`). Such a URL is
/// always reached directly: a proxy set for the whole machine (`HTTP_PROXY`, often there for
/// package registries) cannot reach the caller's loopback, and tests' doubles live there.
pub fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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
