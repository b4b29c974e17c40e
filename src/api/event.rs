//! The HTTP contract of `POST /orders`: the `Idempotency-Key` header, the
//! content type, the body (validated exactly as the order consumer
//! validates an OrderPlaced's `data`), and who the caller is.
//!
//! Every error names the header or the field, never its value: requests
//! carry customer data, and these errors go back to the client and into the
//! logs.

use aws_lambda_events::apigw::ApiGatewayRequestAuthorizer;
use serde_json::{Map, Value};
use thiserror::Error;

pub use crate::core::wire::ParseError;
use crate::core::wire::{Amount, Currency, Id, req_amount_at, req_currency_at, req_id};

/// Longest accepted idempotency key, in characters (Stripe's limit).
pub const MAX_KEY_CHARS: usize = 255;

/// Largest accepted request body. An order is three short fields: anything
/// near this size is not an order, and refusing it before parsing bounds
/// the work a hostile client can cause.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Why the `Idempotency-Key` header cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum KeyError {
    /// No such header.
    #[error("the Idempotency-Key header is required")]
    Missing,
    /// The header is sent more than once.
    #[error("the Idempotency-Key header must be sent once")]
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
        if !closed || bytes.next().is_some() {
            return malformed("a quoted key must end with its closing quote");
        }
        key
    } else {
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

/// Is `content_type` JSON? `application/json`, any case, with or without
/// parameters (`; charset=utf-8`).
pub fn is_json(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|ct| {
        let media = ct.split(|b| *b == b';').next().unwrap_or_default();
        media.trim_ascii().eq_ignore_ascii_case(b"application/json")
    })
}

/// A validated `POST /orders` body: the data of the OrderPlaced it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceOrder {
    /// `customerId`, an [`Id`] as in OrderPlaced.
    pub customer_id: Id,
    /// `amount`, in minor units.
    pub amount: Amount,
    /// `currency`, ISO 4217.
    pub currency: Currency,
}

/// Parse and validate the body. Returns the order and the JSON value it was
/// read from (the fingerprint is taken of the whole value, so that any
/// change to what the client sent is a different request).
pub fn parse_place_order(body: &[u8]) -> Result<(PlaceOrder, Value), ParseError> {
    if body.is_empty() {
        return Err(ParseError::MissingBody);
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(ParseError::TooLarge {
            size: body.len(),
            max: MAX_BODY_BYTES,
        });
    }
    // serde_json's message gives the position, never the input; its
    // recursion limit turns a deeply nested body into an error, not a
    // stack overflow.
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let obj: &Map<String, Value> = value.as_object().ok_or(ParseError::NotAnObject {
        path: "(body)".into(),
    })?;
    // The same checks, and so the same messages, as OrderPlaced's `data`
    // in the order consumer.
    let order = PlaceOrder {
        customer_id: req_id(obj, "", "customerId")?,
        amount: req_amount_at(obj, "", "amount")?,
        currency: req_currency_at(obj, "", "currency")?,
    };
    Ok((order, value))
}

/// Whose keys these are: idempotency keys are scoped by caller, so that two
/// callers who pick the same key never see each other's responses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A JWT authorizer's principal: the token's issuer and subject.
    Jwt {
        /// `iss` (empty if the token has none).
        issuer: String,
        /// `sub`.
        subject: String,
    },
    /// An IAM-authorized caller, by user ARN (or caller id).
    Iam(String),
    /// A route without an authorizer: one scope shared by every caller.
    Anonymous,
}

impl Scope {
    /// The caller behind an HTTP API request, from its authorizer.
    pub fn of(authorizer: Option<&ApiGatewayRequestAuthorizer>) -> Scope {
        let Some(auth) = authorizer else {
            return Scope::Anonymous;
        };
        if let Some(jwt) = &auth.jwt
            && let Some(sub) = jwt.claims.get("sub").filter(|s| !s.is_empty())
        {
            return Scope::Jwt {
                issuer: jwt.claims.get("iss").cloned().unwrap_or_default(),
                subject: sub.clone(),
            };
        }
        if let Some(iam) = &auth.iam
            && let Some(who) = iam
                .user_arn
                .as_ref()
                .or(iam.caller_id.as_ref())
                .filter(|s| !s.is_empty())
        {
            return Scope::Iam(who.clone());
        }
        Scope::Anonymous
    }

    /// Length-prefixed parts, so that no two scopes (and keys) can be
    /// spelled alike.
    pub fn parts(&self) -> Vec<&str> {
        match self {
            Scope::Jwt { issuer, subject } => vec!["jwt", issuer, subject],
            Scope::Iam(who) => vec!["iam", who],
            Scope::Anonymous => vec!["anonymous"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn content_types() {
        for (ct, ok) in [
            (Some("application/json"), true),
            (Some("Application/JSON; charset=utf-8"), true),
            (Some(" application/json ;"), true),
            (Some("text/plain"), false),
            (Some("application/jsonx"), false),
            (Some("application/x-www-form-urlencoded"), false),
            (None, false),
        ] {
            assert_eq!(is_json(ct.map(str::as_bytes)), ok, "{ct:?}");
        }
    }

    #[test]
    fn bodies_are_validated_as_order_placed_data_without_echoing_values() {
        let ok = br#"{"customerId":"c-1","amount":150000,"currency":"INR"}"#;
        let (order, _) = parse_place_order(ok).expect("valid");
        assert_eq!(order.amount.get(), 150000);
        let cases: &[(&str, &str)] = &[
            ("", "no body"),
            ("secret-not-json", "not valid JSON"),
            ("[\"secret\"]", "must be a JSON object"),
            (r#"{"amount":1,"currency":"INR"}"#, "`customerId`"),
            (
                r#"{"customerId":"secret","amount":1.5,"currency":"INR"}"#,
                "`amount` must be",
            ),
            (
                r#"{"customerId":"secret","amount":0,"currency":"INR"}"#,
                "`amount` is invalid",
            ),
            (
                r#"{"customerId":"secret","amount":"12","currency":"INR"}"#,
                "`amount` must be",
            ),
            (
                r#"{"customerId":"secret","amount":1,"currency":"inr"}"#,
                "`currency` is invalid",
            ),
            (
                r#"{"customerId":"","amount":1,"currency":"INR"}"#,
                "`customerId` is invalid",
            ),
        ];
        for (body, want) in cases {
            let err = parse_place_order(body.as_bytes())
                .expect_err(body)
                .to_string();
            assert!(err.contains(want), "{body}: {err}");
            assert!(!err.contains("secret") && !err.contains("inr"), "{err}");
        }
        let nested = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
        assert!(matches!(
            parse_place_order(nested.as_bytes()),
            Err(ParseError::NotJson(_))
        ));
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert!(matches!(
            parse_place_order(&huge),
            Err(ParseError::TooLarge { .. })
        ));
    }
}
