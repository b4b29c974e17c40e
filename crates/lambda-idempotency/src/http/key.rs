//! The `Idempotency-Key` header (IETF httpapi draft): exactly one key, as
//! the draft's structured-field string or a bare token. Every error names
//! the header, never its value.

use lambda_http::http::HeaderMap;
use thiserror::Error;

/// The header's name (lower case, as HTTP/2 and API Gateway send it).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Longest accepted idempotency key, in characters (Stripe's limit).
pub const MAX_KEY_CHARS: usize = 255;

/// Why the `Idempotency-Key` header cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum KeyError {
    /// No such header. Clients (curl among them) and proxies drop a header
    /// whose value is empty, so an empty key usually arrives as none: say so.
    #[error(
        "the Idempotency-Key header is required, and none arrived (a header with an empty value is often dropped on the way)"
    )]
    Missing,
    /// The header is sent more than once, or its value is a list (a comma
    /// outside a quoted key: how API Gateway joins a repeated header).
    #[error("the Idempotency-Key header must be sent once, with one key")]
    Repeated,
    /// The key is empty, too long, or has characters outside printable
    /// ASCII (or a broken quoted string); `reason` says which.
    #[error("the Idempotency-Key header is malformed: {reason}")]
    Malformed {
        /// What a valid key looks like.
        reason: &'static str,
    },
}

/// Read the key from the header's raw bytes: either the IETF draft's
/// structured-field string (`"abc"`, with `\"` and `\\` escapes) or a bare
/// token (`abc`). Both spell the same key, so a client that switches from
/// one form to the other keeps its key. Surrounding spaces and tabs are
/// not part of the value (RFC 9110 OWS).
///
/// The value must be exactly one key. API Gateway's HTTP API joins a
/// header sent twice into one value with commas (`k1,k2`, `"k1", "k2"`),
/// so a comma outside a quoted key is [`KeyError::Repeated`]: read as one
/// key, two different retries' keys would place an order neither asked for
/// under a key neither sent. A bare key therefore never contains a comma.
pub fn parse_key(raw: &[u8]) -> Result<String, KeyError> {
    let malformed = |reason| Err(KeyError::Malformed { reason });
    let raw = raw.trim_ascii();
    let key = if let Some(inner) = raw.strip_prefix(b"\"") {
        let mut key = Vec::with_capacity(inner.len());
        let mut bytes = inner.iter();
        let mut closed = false;
        while let Some(&b) = bytes.next() {
            match b {
                b'\\' => match bytes.next() {
                    Some(&e @ (b'"' | b'\\')) => key.push(e),
                    _ => return malformed("a quoted key may only escape \" and \\"),
                },
                b'"' => {
                    closed = true;
                    break;
                }
                0x20..=0x7e => key.push(b),
                _ => return malformed("must be printable ASCII characters"),
            }
        }
        if !closed {
            return malformed("a quoted key must end with its closing quote");
        }
        match bytes.as_slice().trim_ascii_start().first() {
            None => {}
            Some(b',') => return Err(KeyError::Repeated),
            Some(_) => return malformed("a quoted key must end with its closing quote"),
        }
        key
    } else {
        if raw.contains(&b',') {
            return Err(KeyError::Repeated);
        }
        if raw.iter().any(|b| !(0x21..=0x7e).contains(b)) {
            return malformed(
                "must be printable ASCII characters without spaces (or a quoted string)",
            );
        }
        raw.to_vec()
    };
    if key.is_empty() {
        return malformed("must not be empty");
    }
    if key.len() > MAX_KEY_CHARS {
        return malformed("must be at most 255 characters");
    }
    // Only bytes 0x20..=0x7e were kept: ASCII, so valid UTF-8.
    String::from_utf8(key).or(malformed("must be printable ASCII characters"))
}

/// The one key of a request's headers: [`KeyError::Missing`] without the
/// header, [`KeyError::Repeated`] when it is sent more than once (or its
/// value is a list), else [`parse_key`] of its value.
pub fn key_of(headers: &HeaderMap) -> Result<String, KeyError> {
    let mut keys = headers.get_all(IDEMPOTENCY_KEY).iter();
    match (keys.next(), keys.next()) {
        (None, _) => Err(KeyError::Missing),
        (Some(_), Some(_)) => Err(KeyError::Repeated),
        (Some(v), None) => parse_key(v.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::http::HeaderValue;

    #[test]
    fn keys_quoted_or_bare() {
        let long = "k".repeat(255);
        let too_long = "k".repeat(256);
        let quoted_long = format!("\"{long}\"");
        let cases: &[(&[u8], Result<&str, ()>)] = &[
            (b"abc", Ok("abc")),
            (b"\"abc\"", Ok("abc")),
            (b"  abc\t", Ok("abc")),
            (b"\"a b\"", Ok("a b")),
            (br#""a\"b\\c""#, Ok(r#"a"b\c"#)),
            (
                b"8e03978e-40d5-43e8-bc93-6894a57f9324",
                Ok("8e03978e-40d5-43e8-bc93-6894a57f9324"),
            ),
            (long.as_bytes(), Ok(&long)),
            (quoted_long.as_bytes(), Ok(&long)),
            (too_long.as_bytes(), Err(())),
            (b"", Err(())),
            (b"\"\"", Err(())),
            (b"   ", Err(())),
            (b"a b", Err(())),
            (b"\"abc", Err(())),
            (b"\"abc\"x", Err(())),
            (b"\"a\\nb\"", Err(())),
            (b"a\x00b", Err(())),
            (b"a\x7fb", Err(())),
            ("ключ".as_bytes(), Err(())),
            ("\"ключ\"".as_bytes(), Err(())),
            (b"\"a,b\"", Ok("a,b")),
        ];
        for (raw, want) in cases {
            let got = parse_key(raw);
            match want {
                Ok(k) => assert_eq!(got.as_deref(), Ok(*k), "{:?}", String::from_utf8_lossy(raw)),
                Err(()) => assert!(
                    matches!(got, Err(KeyError::Malformed { .. })),
                    "{:?} -> {got:?}",
                    String::from_utf8_lossy(raw)
                ),
            }
        }
    }

    #[test]
    fn a_value_holding_more_than_one_key_is_repeated() {
        // How API Gateway's HTTP API joins a header sent twice, and the
        // same written by hand.
        for raw in [
            &b"k1,k2"[..],
            b"k1, k2",
            b"k1,k1",
            b"\"k1\",\"k2\"",
            b"\"k1\", \"k2\"",
            b"\"k1\" ,k2",
            b"k1,\"k2\"",
            b"k1,",
            b",k1",
            b",",
        ] {
            assert_eq!(
                parse_key(raw),
                Err(KeyError::Repeated),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        assert_eq!(
            parse_key(b"\"k1\";x"),
            Err(KeyError::Malformed {
                reason: "a quoted key must end with its closing quote"
            })
        );
    }

    #[test]
    fn the_header_is_read_once() {
        let mut h = HeaderMap::new();
        assert_eq!(key_of(&h), Err(KeyError::Missing));
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("\"k\""));
        assert_eq!(key_of(&h).as_deref(), Ok("k"));
        h.append(IDEMPOTENCY_KEY, HeaderValue::from_static("k"));
        assert_eq!(key_of(&h), Err(KeyError::Repeated));
        let mut h = HeaderMap::new();
        h.insert("Idempotency-Key", HeaderValue::from_static("k1, k2"));
        assert_eq!(key_of(&h), Err(KeyError::Repeated));
    }
}
