//! The HTTP contract of `POST /orders`: the content type, the body
//! (validated exactly as the order consumer validates an OrderPlaced's
//! `data`), and the path of `GET /orders/{orderId}`. The
//! `Idempotency-Key` header and who the caller is are the library's
//! (`lambda_idempotency::http`), re-exported here.
//!
//! Every error names the header or the field, never its value: requests
//! carry customer data, and these errors go back to the client and into the
//! logs.

use serde_json::{Map, Value};

pub use lambda_idempotency::http::{
    AuthMode, KeyError, LAMBDA_PRINCIPAL_KEY, MAX_KEY_CHARS, NoPrincipal, RoleSessions, Scope,
    iam_principal, parse_key,
};
pub use lambda_idempotency::wire::ParseError;
use lambda_idempotency::wire::{Amount, Currency, Id, req_amount_at, req_currency_at, req_id};

/// Largest accepted request body. An order is three short fields: anything
/// near this size is not an order, and refusing it before parsing bounds
/// the work a hostile client can cause.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

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

/// The order id in a `GET /orders/{orderId}` path segment, percent-decoded
/// exactly once (`ord%201` is `ord 1`; `ord%25201` is `ord%201`). `None`
/// when the segment is not a valid encoding (a `%` without two hex digits)
/// or does not decode to UTF-8: no order has such an id.
pub fn decode_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            // Two hex digits, nothing else (from_str_radix alone would
            // take a sign: `%+1`).
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_decoded_once() {
        for (seg, want) in [
            ("ord_1", Some("ord_1")),
            ("ord%201", Some("ord 1")),
            ("ord%25201", Some("ord%201")),
            ("%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7", Some("заказ")),
            ("%d0%b7", Some("з")),
            ("a%2Fb", Some("a/b")),
            ("", Some("")),
            ("ord%2", None),
            ("ord%", None),
            ("ord%zz", None),
            ("ord%+1", None),
            ("%FF", None),
            ("%D0", None),
        ] {
            assert_eq!(decode_segment(seg).as_deref(), want, "{seg}");
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
