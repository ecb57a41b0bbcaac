//! `kind = "webhook"` (docs/reference.md#channels): the event as JSON, POSTed, and signed
//! the Standard Webhooks way when `secret_env` is set, so that a receiver can check it with
//! any of that scheme's libraries.
//!
//! Invariants:
//! - The body is the same bytes that are signed; `webhook-id` is the delivery id, the same at
//!   every try, so that a receiver that de-duplicates by it never acts twice.
//! - The secret is read when the message is sent and is never part of an error.

use chrono::{DateTime, Utc};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::{Channel, Message, SendError, Settings, http};
use crate::codec::{BASE64, base64, base64_decode};
use crate::config::{ChannelConfig, Target};

pub(crate) struct Webhook<'a> {
    pub cfg: &'a ChannelConfig,
    pub url: &'a Target,
    pub secret_env: Option<&'a str>,
}

/// The event as `webhook` POSTs it and `command` writes it: `{"type", "id", "timestamp",
/// "title", "text", "data"}`.
pub(crate) fn event(message: &Message) -> Value {
    json!({
        "type": message.kind,
        "id": message.id,
        "timestamp": message.created_at,
        "title": message.title.as_str(),
        "text": message.payload.as_str(),
        "data": message.data,
    })
}

/// The signing key of a `whsec_…` secret (the prefix is optional, as the scheme's libraries
/// accept); None when the rest is not base64.
pub(crate) fn signing_key(secret: &str) -> Option<Vec<u8>> {
    let b64 = secret
        .trim()
        .strip_prefix("whsec_")
        .unwrap_or(secret.trim());
    base64_decode(b64).filter(|k| !k.is_empty())
}

/// `v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
pub(crate) fn signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", base64(&mac.finalize().into_bytes(), BASE64))
}

impl Webhook<'_> {
    /// The request for one message, signed at `now` when a secret is set.
    fn request(&self, message: &Message, now: DateTime<Utc>) -> Result<http::Request, SendError> {
        let url = super::url_of(self.url)?;
        let body = event(message).to_string();
        let mut req = http::Request {
            post: true,
            url,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: Vec::new(),
        };
        if let Some(var) = self.secret_env {
            let secret = super::secret(var)?;
            let Some(key) = signing_key(&secret) else {
                return Err(SendError::Unavailable(format!(
                    "${var} is not a signing secret (\"whsec_\" then base64)"
                )));
            };
            let ts = now.timestamp();
            req.headers.extend([
                ("webhook-id".into(), message.id.to_string()),
                ("webhook-timestamp".into(), ts.to_string()),
                (
                    "webhook-signature".into(),
                    signature(&key, message.id, ts, &body),
                ),
            ]);
        }
        req.body = body.into_bytes();
        Ok(req)
    }
}

impl Channel for Webhook<'_> {
    fn settings(&self) -> Settings<'_> {
        Settings::of(self.cfg)
    }

    fn kind(&self) -> &'static str {
        "webhook"
    }

    fn max_len(&self) -> usize {
        // One event is one request: never cut.
        1 << 20
    }

    fn send(&self, _: &str, message: &Message) -> Result<i64, SendError> {
        // The signature's time is the real time of the send: a receiver checks it against
        // its own clock to refuse replays.
        let req = self.request(message, Utc::now())?;
        http::send(req, self.cfg.timeout).map(|_| 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_standard_webhooks_published_example() {
        // The example of the Standard Webhooks specification (its libraries' tests use it).
        let key = signing_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                r#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        // Without its prefix, the same key; not base64, none.
        assert_eq!(signing_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), Some(key));
        assert_eq!(signing_key("whsec_!!"), None);
    }
}
