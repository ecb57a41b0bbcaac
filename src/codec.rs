//! Base64, the one encoding several parts share: redaction (a secret's base64 spellings),
//! webhook signatures (Standard Webhooks) and approval tokens; and percent-decoding, for
//! the user and password of a URL (the e-mail channel's SMTP login, and redaction of the
//! password as it is sent). Written out here rather than pulled in: short functions.

/// The standard alphabet.
pub(crate) const BASE64: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// The URL-safe alphabet.
pub(crate) const BASE64_URL: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 with padding.
pub(crate) fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard or URL-safe base64, padded or not; None when it is not base64.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `%XX` escapes (as in a URL's user and password) turned back into bytes, read as UTF-8
/// (lossy); a `%` not followed by two hex digits stays as it is.
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], escaped) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_both_alphabets() {
        for bytes in [&b""[..], b"f", b"fo", b"foo", b"\xff\xfe\xfd\x00"] {
            for alphabet in [BASE64, BASE64_URL] {
                assert_eq!(base64_decode(&base64(bytes, alphabet)).unwrap(), bytes);
            }
        }
        assert_eq!(base64(b"foo", BASE64), "Zm9v");
        assert_eq!(base64(b"\xfb\xff", BASE64_URL), "-_8=");
        assert_eq!(base64_decode("not base64!"), None);
    }

    #[test]
    fn percent_escapes_are_decoded_and_a_lone_percent_kept() {
        assert_eq!(percent_decode("me%40example.org"), "me@example.org");
        assert_eq!(percent_decode("pa%24%24%2f"), "pa$$/");
        assert_eq!(percent_decode("caf%C3%A9"), "café");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
