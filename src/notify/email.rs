//! `kind = "email"` (docs/reference.md#email): one text/plain UTF-8 e-mail per message, to
//! every `to` at once, through an SMTP server (lettre) or the local `sendmail` program.
//!
//! Invariants:
//! - The `Message-ID` is `<delivery id@from's domain>`: the same at every try, so that a
//!   mail store or a reader that de-duplicates by it keeps one copy.
//! - An SMTP connection is encrypted: `smtps://` is TLS from the first byte, `smtp://` must
//!   upgrade with STARTTLS (a server that does not offer it is refused); plain SMTP is used
//!   only to a loopback host (`net::is_loopback`), where nothing crosses a network.
//! - The SMTP URL (its password above all) is read when a message is sent and is never part
//!   of an error; no error names its host either. Redaction stands behind this too.
//! - A send gives up by the channel's timeout: it runs on a thread of its own, abandoned at
//!   the deadline (the socket's own timeouts and `sendmail`'s process group end it soon
//!   after).
//! - An SMTP 5xx answer can never succeed (`Rejected`); a 4xx, no connection, a TLS failure,
//!   a timeout, a `sendmail` that failed or a URL that cannot be used are `Unavailable`: the
//!   message waits for the next run.

use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, Message as Mail};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::{self, SmtpTransport};
use lettre::{Address, Transport};
use reqwest::Url;

use super::{Channel, Message, SendError, Settings, http::source_chain};
use crate::codec::percent_decode;
use crate::config::{ChannelConfig, EmailConfig, MailTransport};
use crate::net::is_loopback;
use crate::tools::process;

/// How long `sendmail` is given between SIGTERM and SIGKILL after the timeout.
const SENDMAIL_KILL_GRACE: Duration = Duration::from_secs(1);

pub(crate) struct Email<'a> {
    pub cfg: &'a ChannelConfig,
    pub mail: &'a EmailConfig,
}

/// How the connection to an SMTP server is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Security {
    /// `smtps://`: TLS from the first byte (port 465).
    Tls,
    /// `smtp://` to any other host: STARTTLS, required (port 587).
    StartTls,
    /// `smtp://` to a loopback host: no encryption.
    Plain,
}

/// An SMTP server as its URL names it.
#[derive(Clone, PartialEq)]
pub(crate) struct Server {
    pub security: Security,
    /// A name or an address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// User and password, percent-decoded; None when the URL names no user.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for Server {
    // Without the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("security", &self.security)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .finish()
    }
}

/// The server of the URL held in `$var` (docs/reference.md#email). An error names the
/// variable, never the URL.
pub(crate) fn server(url: &str, var: &str) -> Result<Server, SendError> {
    let unusable = |why: &str| SendError::Unavailable(format!("${var} {why}"));
    let parsed = Url::parse(url.trim()).map_err(|e| unusable(&format!("is not a URL: {e}")))?;
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| unusable("names no host (smtps://user:pass@host)"))?;
    let security = match parsed.scheme() {
        "smtps" => Security::Tls,
        "smtp" if is_loopback(&parsed) => Security::Plain,
        "smtp" => Security::StartTls,
        _ => {
            return Err(unusable(
                "is not an smtps:// (TLS) or smtp:// (STARTTLS) URL",
            ));
        }
    };
    let port = parsed.port().unwrap_or(match security {
        Security::Tls => 465,
        Security::StartTls | Security::Plain => 587,
    });
    let user = percent_decode(parsed.username());
    let password = parsed.password().map(percent_decode);
    let credentials = match (user.is_empty(), password) {
        (true, None) => None,
        (_, password) => Some((user, password.unwrap_or_default())),
    };
    Ok(Server {
        security,
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
        credentials,
    })
}

/// The e-mail of one message: `From`, every `To`, `Subject: [heartbeat] <title>`, the
/// delivery id as `Message-ID`, the time it was queued as `Date`, and the text as a
/// text/plain UTF-8 body.
pub(crate) fn build(mail: &EmailConfig, message: &Message) -> Result<Mail, SendError> {
    let mailbox = |key: &str, address: &str| {
        address.parse::<Mailbox>().map_err(|_| {
            SendError::Unavailable(format!("{key} = {address:?} is not an e-mail address"))
        })
    };
    let from = mailbox("from", &mail.from)?;
    let domain = from.email.domain().to_string();
    let mut builder = Mail::builder()
        .from(from)
        .subject(format!("[heartbeat] {}", message.title))
        .message_id(Some(format!("<{}@{domain}>", message.id)))
        .header(ContentType::TEXT_PLAIN)
        // RFC 3834: no vacation or out-of-office answers to a machine's messages.
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("Auto-Submitted"),
            "auto-generated".to_string(),
        ));
    for to in &mail.to {
        builder = builder.to(mailbox("to", to)?);
    }
    if let Ok(queued) = chrono::DateTime::parse_from_rfc3339(message.created_at) {
        builder = builder.date(SystemTime::from(queued));
    }
    builder
        .body(message.payload.as_str().to_string())
        .map_err(|e| SendError::Unavailable(format!("cannot write the e-mail: {e}")))
}

/// The SMTP client for `server`: its security, its credentials, `timeout` on every
/// connection, read and write.
fn transport(server: &Server, timeout: Duration) -> Result<SmtpTransport, SendError> {
    let tls = || {
        TlsParameters::new(server.host.clone())
            .map_err(|e| SendError::Unavailable(format!("TLS: {}", source_chain(&e))))
    };
    let security = match server.security {
        Security::Tls => Tls::Wrapper(tls()?),
        Security::StartTls => Tls::Required(tls()?),
        Security::Plain => Tls::None,
    };
    let mut builder = SmtpTransport::builder_dangerous(server.host.as_str())
        .port(server.port)
        .tls(security)
        .timeout(Some(timeout));
    let host = crate::sys::hostname();
    if !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
    {
        builder = builder.hello_name(ClientId::Domain(host));
    }
    if let Some((user, password)) = &server.credentials {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    Ok(builder.build())
}

/// Send `mail` through `server`, within `timeout`.
fn send_smtp(server: &Server, mail: &Mail, timeout: Duration) -> Result<(), SendError> {
    let transport = transport(server, timeout)?;
    transport
        .send(mail)
        .map(|_| ())
        .map_err(|e| classify(&e, server.security, timeout))
}

/// What an SMTP failure means for the message (see the module).
fn classify(e: &smtp::Error, security: Security, timeout: Duration) -> SendError {
    if let Some(code) = e.status() {
        // The server's own words (lettre's source of a coded error).
        let words = std::error::Error::source(e)
            .map(|s| s.to_string())
            .unwrap_or_default();
        let what = format!(
            "SMTP {code}: {}",
            words.chars().take(200).collect::<String>()
        );
        return if e.is_permanent() {
            SendError::Rejected(what)
        } else {
            SendError::Unavailable(what)
        };
    }
    let detail = source_chain(e);
    if e.is_timeout() || timed_out(e) {
        return no_answer(timeout);
    }
    if security == Security::StartTls && detail.contains("STARTTLS is not supported") {
        return SendError::Unavailable(
            "SMTP: the server does not offer STARTTLS, which smtp:// requires (plain SMTP \
             only to a loopback host; smtps:// for TLS from the start)"
                .to_string(),
        );
    }
    SendError::Unavailable(format!("SMTP: {detail}"))
}

/// Whether a read or write met its socket timeout (`EAGAIN` on Linux, which lettre's own
/// `is_timeout` does not count).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            )
        {
            return true;
        }
        source = s.source();
    }
    false
}

fn no_answer(timeout: Duration) -> SendError {
    SendError::Unavailable(format!(
        "no answer within {}",
        humantime::format_duration(timeout)
    ))
}

/// `program -i -f <from> -- <to…>`, the e-mail on its standard input (as lettre's own
/// sendmail transport runs it), in its own process group, stopped at `timeout`.
fn send_sendmail(program: &str, mail: &Mail, timeout: Duration) -> Result<(), SendError> {
    let envelope = mail.envelope();
    let mut argv = vec![program.to_string(), "-i".to_string()];
    if let Some(from) = envelope.from() {
        argv.extend(["-f".to_string(), from.to_string()]);
    }
    argv.push("--".to_string());
    argv.extend(envelope.to().iter().map(Address::to_string));
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let mut req = process::Request::new(argv, cwd, timeout);
    req.stdin = Some(mail.formatted());
    req.kill_grace = SENDMAIL_KILL_GRACE;
    // As for a tool: the configured secrets already left the environment, and so does
    // Telegram's default token variable.
    req.env_remove.push(crate::tools::TOKEN_ENV.to_string());
    let outcome = process::run(&req);
    if outcome.success {
        return Ok(());
    }
    let mut what = format!(
        "{program}: {}",
        outcome.error.as_deref().unwrap_or("failed")
    );
    if let Some(line) = outcome
        .stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
    {
        what.push_str(": ");
        what.extend(line.chars().take(200));
    }
    Err(SendError::Unavailable(what))
}

/// `send` on a thread of its own, abandoned after `timeout` (and a little more, for the
/// thread's own timeouts to answer first).
fn within(
    timeout: Duration,
    send: impl FnOnce() -> Result<(), SendError> + Send + 'static,
) -> Result<(), SendError> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("channel-email".into())
        .spawn(move || {
            let _ = tx.send(send());
        })
        .map_err(|e| SendError::Unavailable(format!("cannot start a send: {e}")))?;
    rx.recv_timeout(timeout + Duration::from_millis(250))
        .unwrap_or_else(|_| Err(no_answer(timeout)))
}

impl Channel for Email<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings::of(self.cfg)
    }

    fn kind(&self) -> &'static str {
        "email"
    }

    fn max_len(&self) -> usize {
        // One message is one e-mail: never cut in practice.
        1 << 20
    }

    fn send(&self, _: &str, message: &Message) -> Result<i64, SendError> {
        let mail = build(self.mail, message)?;
        let timeout = self.cfg.timeout;
        match &self.mail.transport {
            MailTransport::Smtp { url_env } => {
                let server = server(&super::secret(url_env)?, url_env)?;
                within(timeout, move || send_smtp(&server, &mail, timeout))
            }
            MailTransport::Sendmail { program } => {
                let program = program.clone();
                within(timeout, move || send_sendmail(&program, &mail, timeout))
            }
        }
        .map(|()| 0)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::thread::JoinHandle;

    use serde_json::json;

    use super::*;
    use crate::redact::Secrets;

    const PASSWORD: &str = "s3cret-pw";

    #[test]
    fn smtps_is_tls_and_smtp_is_starttls_but_to_a_loopback_host() {
        let s = server("smtps://me%40example.org:pa%24%24@mail.example.org", "V").unwrap();
        assert_eq!(s.security, Security::Tls);
        assert_eq!((s.host.as_str(), s.port), ("mail.example.org", 465));
        assert_eq!(
            s.credentials,
            Some(("me@example.org".to_string(), "pa$$".to_string()))
        );
        let s = server("smtp://u:p@mail.example.org", "V").unwrap();
        assert_eq!((s.security, s.port), (Security::StartTls, 587));
        let s = server("smtp://mail.example.org:2525", "V").unwrap();
        assert_eq!(
            (s.security, s.port, s.credentials),
            (Security::StartTls, 2525, None)
        );
        // Plain only where nothing crosses a network.
        for url in [
            "smtp://127.0.0.1:25",
            "smtp://localhost:25",
            "smtp://LOCALHOST:25",
            "smtp://[::1]:25",
        ] {
            let s = server(url, "V").unwrap();
            assert_eq!(s.security, Security::Plain, "{url}");
        }
        assert_eq!(server("smtp://[::1]:25", "V").unwrap().host, "::1");
        // A look-alike of localhost is a remote host: STARTTLS.
        for url in [
            "smtp://localhost.example.org",
            "smtp://10.0.0.1",
            "smtp://127.0.0.1.nip.io",
        ] {
            assert_eq!(
                server(url, "V").unwrap().security,
                Security::StartTls,
                "{url}"
            );
        }
        // smtps:// to a loopback host is still TLS.
        assert_eq!(
            server("smtps://localhost", "V").unwrap().security,
            Security::Tls
        );
    }

    #[test]
    fn an_unusable_url_names_the_variable_and_never_shows_the_url() {
        for url in [
            format!("http://me:{PASSWORD}@mail.example.org"),
            format!("me:{PASSWORD}@mail.example.org"),
            format!("smtp://me:{PASSWORD}@"),
            String::new(),
        ] {
            let e = server(&url, "HB_SMTP_URL").unwrap_err();
            assert!(matches!(e, SendError::Unavailable(_)), "{e:?}");
            assert!(e.message().starts_with("$HB_SMTP_URL "), "{e:?}");
            assert!(!e.message().contains("s3cret"), "{e:?}");
            assert!(!e.message().contains("mail.example"), "{e:?}");
        }
        let s = server(&format!("smtps://me:{PASSWORD}@mail.example.org"), "V").unwrap();
        assert!(!format!("{s:?}").contains("s3cret"));
    }

    fn config() -> EmailConfig {
        EmailConfig {
            transport: MailTransport::Sendmail {
                program: "/usr/sbin/sendmail".into(),
            },
            from: "heartbeat@host.example.org".into(),
            to: vec!["me@example.com".into(), "ops@example.net".into()],
        }
    }

    /// `f` given a message with this id, title and text.
    fn with_message<T>(id: &str, title: &str, text: &str, f: impl FnOnce(&Message) -> T) -> T {
        let secrets = Secrets::default();
        let (title, payload) = (secrets.redact(title), secrets.redact(text));
        let data = json!({});
        f(&Message {
            id,
            kind: "failure",
            title: &title,
            payload: &payload,
            data: &data,
            created_at: "2026-03-02T10:00:00Z",
            approvals: &[],
            resets: &[],
        })
    }

    #[test]
    fn the_email_has_the_title_as_subject_the_delivery_id_as_message_id_and_the_text() {
        let mail = with_message(
            "hb_0123abcd",
            "@backup failed (HEARTBEAT.md:3)",
            "exit status 3\nsee the log",
            |m| build(&config(), m).unwrap(),
        );
        let text = String::from_utf8(mail.formatted()).unwrap();
        for header in [
            "From: heartbeat@host.example.org\r\n",
            "To: me@example.com, ops@example.net\r\n",
            "Subject: [heartbeat] @backup failed (HEARTBEAT.md:3)\r\n",
            "Message-ID: <hb_0123abcd@host.example.org>\r\n",
            "Content-Type: text/plain; charset=utf-8\r\n",
            "Date: Mon, 02 Mar 2026 10:00:00 +0000\r\n",
            "Auto-Submitted: auto-generated\r\n",
        ] {
            assert!(text.contains(header), "{header:?} in\n{text}");
        }
        assert!(
            text.ends_with("\r\n\r\nexit status 3\r\nsee the log"),
            "{text}"
        );
        let envelope = mail.envelope();
        assert_eq!(
            envelope.from().unwrap().to_string(),
            "heartbeat@host.example.org"
        );
        assert_eq!(envelope.to().len(), 2);
    }

    #[test]
    fn a_non_ascii_title_and_text_are_encoded_for_any_server() {
        let mail = with_message("hb_1", "café ☕", "déjà vu", |m| {
            build(&config(), m).unwrap()
        });
        let bytes = mail.formatted();
        // 7-bit on the wire: a server without 8BITMIME takes it.
        assert!(bytes.is_ascii(), "{}", String::from_utf8_lossy(&bytes));
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("Subject: [heartbeat] =?utf-8?"), "{text}");
        assert!(
            ["quoted-printable", "base64"]
                .iter()
                .any(|e| text.contains(&format!("Content-Transfer-Encoding: {e}\r\n"))),
            "{text}"
        );
    }

    #[test]
    fn an_address_lettre_cannot_take_fails_naming_the_key() {
        let mut cfg = config();
        cfg.to = vec!["me@exa mple.com".into()];
        let e = with_message("hb_1", "t", "x", |m| build(&cfg, m).unwrap_err());
        assert!(
            matches!(&e, SendError::Unavailable(m) if m.starts_with("to = ")),
            "{e:?}"
        );
    }

    /// A one-connection SMTP server on 127.0.0.1 that offers `extensions` after EHLO and
    /// answers the end of DATA with `data_reply`; the lines it read.
    fn smtp_server(
        extensions: &'static str,
        data_reply: &'static str,
    ) -> (u16, JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut out = stream.try_clone().unwrap();
            let mut lines = Vec::new();
            let mut reader = BufReader::new(stream);
            let _ = out.write_all(b"220 test ESMTP\r\n");
            let mut in_data = false;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end().to_string();
                let reply = if in_data {
                    in_data = line != ".";
                    (!in_data).then(|| format!("{data_reply}\r\n"))
                } else {
                    let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
                    Some(match verb.as_str() {
                        "EHLO" => format!("250-test\r\n{extensions}250 SIZE 1000000\r\n"),
                        "AUTH" => "235 2.7.0 ok\r\n".to_string(),
                        "MAIL" | "RCPT" | "RSET" | "NOOP" => "250 ok\r\n".to_string(),
                        "DATA" => {
                            in_data = true;
                            "354 go on\r\n".to_string()
                        }
                        "QUIT" => "221 bye\r\n".to_string(),
                        _ => "502 no\r\n".to_string(),
                    })
                };
                lines.push(line);
                if let Some(reply) = reply
                    && out.write_all(reply.as_bytes()).is_err()
                {
                    break;
                }
            }
            lines
        });
        (port, handle)
    }

    fn plain(port: u16) -> Server {
        Server {
            security: Security::Plain,
            host: "127.0.0.1".into(),
            port,
            credentials: Some(("me".into(), PASSWORD.into())),
        }
    }

    fn send_to(server: &Server) -> Result<(), SendError> {
        let mail = with_message("hb_1", "t", "x", |m| build(&config(), m).unwrap());
        send_smtp(server, &mail, Duration::from_secs(5))
    }

    #[test]
    fn a_message_goes_through_authenticated_and_a_5xx_is_rejected_a_4xx_unavailable() {
        let (port, server) = smtp_server("250-AUTH PLAIN\r\n", "250 2.0.0 queued");
        assert_eq!(send_to(&plain(port)), Ok(()));
        let lines = server.join().unwrap();
        let auth = lines.iter().find(|l| l.starts_with("AUTH PLAIN ")).unwrap();
        let decoded = crate::codec::base64_decode(&auth["AUTH PLAIN ".len()..]).unwrap();
        assert_eq!(decoded, format!("\0me\0{PASSWORD}").into_bytes());
        assert!(
            lines
                .iter()
                .any(|l| l == "Message-ID: <hb_1@host.example.org>")
        );

        let (port, _server) = smtp_server("250-AUTH PLAIN\r\n", "550 5.7.1 not from you");
        let e = send_to(&plain(port)).unwrap_err();
        assert_eq!(
            e,
            SendError::Rejected("SMTP 550: 5.7.1 not from you".into())
        );

        let (port, _server) = smtp_server("250-AUTH PLAIN\r\n", "451 4.3.0 try later");
        let e = send_to(&plain(port)).unwrap_err();
        assert_eq!(
            e,
            SendError::Unavailable("SMTP 451: 4.3.0 try later".into())
        );
    }

    #[test]
    fn a_password_for_a_server_that_offers_no_login_is_not_sent_in_vain() {
        let (port, _server) = smtp_server("", "250 ok");
        let e = send_to(&plain(port)).unwrap_err();
        assert!(
            matches!(&e, SendError::Unavailable(m) if m.contains("authentication")),
            "{e:?}"
        );
    }

    #[test]
    fn starttls_is_required_and_tls_is_not_spoken_to_a_plain_server() {
        // No STARTTLS offered: smtp:// to a remote host refuses to go on in plain text.
        let (port, server_thread) = smtp_server("250-AUTH PLAIN\r\n", "250 ok");
        let e = send_to(&Server {
            security: Security::StartTls,
            ..plain(port)
        })
        .unwrap_err();
        assert!(
            matches!(&e, SendError::Unavailable(m) if m.contains("does not offer STARTTLS")),
            "{e:?}"
        );
        let lines = server_thread.join().unwrap();
        assert!(
            !lines
                .iter()
                .any(|l| l.starts_with("AUTH") || l.starts_with("MAIL")),
            "{lines:?}"
        );

        // smtps:// to a server that answers in plain text: a TLS failure, nothing sent.
        let (port, _server) = smtp_server("250-AUTH PLAIN\r\n", "250 ok");
        let e = send_to(&Server {
            security: Security::Tls,
            ..plain(port)
        })
        .unwrap_err();
        assert!(matches!(e, SendError::Unavailable(_)), "{e:?}");
        assert!(!e.message().contains("s3cret"), "{e:?}");
    }

    #[test]
    fn a_server_that_never_answers_costs_the_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = plain(listener.local_addr().unwrap().port());
        let mail = with_message("hb_1", "t", "x", |m| build(&config(), m).unwrap());
        let e = within(Duration::from_millis(300), move || {
            send_smtp(&server, &mail, Duration::from_millis(300))
        })
        .unwrap_err();
        assert_eq!(e, SendError::Unavailable("no answer within 300ms".into()));
        drop(listener);
    }

    /// An executable script at `path`, renamed into place (never run while open for writing).
    fn write_script(path: &std::path::Path, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, body).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    #[test]
    fn sendmail_gets_the_envelope_as_arguments_and_the_email_on_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("sendmail");
        let log = dir.path().join("log");
        write_script(
            &script,
            &format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{0}.args'\ncat > '{0}.mail'\n",
                log.display()
            ),
        );
        let mail = with_message("hb_7", "t", "x", |m| build(&config(), m).unwrap());
        send_sendmail(script.to_str().unwrap(), &mail, Duration::from_secs(10)).unwrap();
        let args = std::fs::read_to_string(format!("{}.args", log.display())).unwrap();
        assert_eq!(
            args,
            "-i\n-f\nheartbeat@host.example.org\n--\nme@example.com\nops@example.net\n"
        );
        let stdin = std::fs::read(format!("{}.mail", log.display())).unwrap();
        assert_eq!(stdin, mail.formatted());

        // A failure says which program and what it said; the message waits.
        write_script(&script, "#!/bin/sh\necho 'no route' >&2\nexit 75\n");
        let e =
            send_sendmail(script.to_str().unwrap(), &mail, Duration::from_secs(10)).unwrap_err();
        assert_eq!(
            e,
            SendError::Unavailable(format!("{}: exit status 75: no route", script.display()))
        );
    }
}
