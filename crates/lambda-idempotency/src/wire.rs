//! The wire format every consumer shares: the specific [`ParseError`], the
//! validated newtypes (ids, amounts, currencies, timestamps), and the body
//! reading in front of every consumer's own parser: SQS's size limit, JSON,
//! and the SNS and EventBridge envelopes. Errors never echo field values:
//! bodies carry customer data, and these errors are logged at ERROR.

use serde_json::{Map, Value};
use thiserror::Error;
/// Largest body we look at: SQS's message size limit, 1 MiB (1,048,576
/// bytes, raised from 256 KiB: refusing what SQS now delivers
/// would send valid events to the DLQ). Anything larger cannot be a real SQS
/// message and is refused before JSON parsing. What a body is turned into is
/// bounded separately (ids by [`MAX_ID_BYTES`], texts by [`MAX_TEXT_BYTES`],
/// unknown fields ignored), so a large body never makes a large item:
/// DynamoDB's 400 KB item limit is not at stake.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Identifiers (event, order, customer, payment, tracking) are short keys.
/// DynamoDB allows 2 KiB for a partition key; we are far stricter so that a
/// runaway producer cannot bloat items or logs.
pub const MAX_ID_BYTES: usize = 256;
/// Free text (cancel reason, carrier name).
pub const MAX_TEXT_BYTES: usize = 1024;

/// Why a message body is not a valid event. Every variant names the field
/// (as a JSON path like `data.amount`) so the log line is actionable, and
/// none holds a value from the body: it is logged and kept with the
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The record carries no body at all.
    #[error("the record has no body")]
    MissingBody,
    /// The body is larger than the consumer accepts (`size` and `max` in bytes).
    #[error("body is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The body is not JSON; the text is serde_json's position, not the body.
    #[error("body is not valid JSON: {0}")]
    NotJson(String),
    /// A value that must be an object is not.
    #[error("`{path}` must be a JSON object")]
    NotAnObject {
        /// The JSON path, such as `data`.
        path: String,
    },
    /// A required field is absent.
    #[error("missing required field `{path}`")]
    MissingField {
        /// The JSON path, such as `data.amount`.
        path: String,
    },
    /// A field has the wrong JSON type (`expected` names the right one).
    #[error("`{path}` must be {expected}")]
    WrongType {
        /// The JSON path.
        path: String,
        /// The type it must have.
        expected: &'static str,
    },
    /// A field has the right type and an unacceptable value.
    #[error("`{path}` is invalid: {reason}")]
    InvalidValue {
        /// The JSON path.
        path: String,
        /// What a valid value looks like.
        reason: &'static str,
    },
    /// The value is not kept: it is attacker-sized input, and this error is
    /// logged at ERROR.
    #[error("`type` is not one of this consumer's event types")]
    UnknownType,
    /// An SNS or EventBridge envelope has the right shape but broken content.
    #[error("{envelope} envelope is malformed: {reason}")]
    BadEnvelope {
        /// `SNS` or `EventBridge`.
        envelope: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A non-empty, bounded identifier without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(String);

impl Id {
    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<&str> for Id {
    type Error = &'static str;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        check_text(s, MAX_ID_BYTES)?;
        Ok(Id(s.to_owned()))
    }
}

/// A positive amount in minor units (paise, cents). Floats are refused
/// rather than rounded: money is never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(u64);

impl Amount {
    /// The amount in minor units.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl TryFrom<u64> for Amount {
    type Error = &'static str;
    fn try_from(n: u64) -> Result<Self, Self::Error> {
        if n == 0 {
            Err("must be a positive integer in minor units")
        } else {
            Ok(Amount(n))
        }
    }
}

/// An ISO 4217 alphabetic code: three upper-case ASCII letters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Currency(String);

impl Currency {
    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Currency {
    type Error = &'static str;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        if s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(Currency(s.to_owned()))
        } else {
            Err("must be a three-letter upper-case ISO 4217 code")
        }
    }
}

/// An RFC 3339 timestamp, checked for shape only (we store it, we do not
/// compute with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timestamp(String);

impl Timestamp {
    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Timestamp {
    type Error = &'static str;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        if is_rfc3339(s) {
            Ok(Timestamp(s.to_owned()))
        } else {
            Err("must be an RFC 3339 timestamp such as 2026-11-29T10:15:00Z")
        }
    }
}

/// when it is an SNS or EventBridge envelope, as the event inside.
///
/// A body that is a valid event at the top level is that event, whatever
/// else it carries: producers put `source`, `detail-type`, `Type` or
/// `TopicArn` fields on their own events too, and reading such an event as
/// an envelope would send a good message to the DLQ. Only when the body is
/// not an event itself, and has an envelope's complete shape, is the inside
/// read.
pub fn parse_wrapped<T>(
    body: Option<&str>,
    parse: impl Fn(&Value) -> Result<T, ParseError>,
) -> Result<T, ParseError> {
    let body = body.ok_or(ParseError::MissingBody)?;
    if body.len() > MAX_BODY_BYTES {
        return Err(ParseError::TooLarge {
            size: body.len(),
            max: MAX_BODY_BYTES,
        });
    }
    let value: Value = from_json(body)?;
    let Value::Object(obj) = &value else {
        return Err(ParseError::NotAnObject {
            path: "(body)".into(),
        });
    };
    let direct = parse(&value);
    if direct.is_ok() {
        return direct;
    }
    match envelope(obj)? {
        Some(inner) => parse(&inner),
        None => direct,
    }
}

fn from_json(text: &str) -> Result<Value, ParseError> {
    // serde_json's own message (line/column and what it expected) is safe to
    // keep: it never quotes the input.
    serde_json::from_str(text).map_err(|e| ParseError::NotJson(e.to_string()))
}

/// The fields of an SNS notification as SQS receives it without raw message
/// delivery; the event is the *string* in `Message`.
const SNS_SHAPE: [&str; 3] = ["TopicArn", "MessageId", "Message"];
/// The string fields of every EventBridge event; the event is the `detail`
/// object.
const EVENTBRIDGE_SHAPE: [&str; 7] = [
    "version",
    "id",
    "detail-type",
    "source",
    "account",
    "time",
    "region",
];

/// The event inside an SNS or EventBridge envelope. `None`: the body does
/// not look like an envelope at all. An error: it has an envelope's marks
/// (`Type: Notification` with `TopicArn`; `detail-type` with `source`) but
/// not its complete shape, which says more than "missing field `type`".
fn envelope(obj: &Map<String, Value>) -> Result<Option<Value>, ParseError> {
    let strings = |fields: &[&str]| {
        fields
            .iter()
            .all(|f| obj.get(*f).is_some_and(Value::is_string))
    };
    if obj.get("Type").and_then(Value::as_str) == Some("Notification")
        && obj.contains_key("TopicArn")
    {
        return match obj.get("Message").and_then(Value::as_str) {
            Some(msg) if strings(&SNS_SHAPE) => from_json(msg).map(Some),
            _ => Err(ParseError::BadEnvelope {
                envelope: "SNS",
                reason: "`TopicArn`, `MessageId` and `Message` must be strings, `Message` holding the event JSON",
            }),
        };
    }
    if obj.contains_key("detail-type") && obj.contains_key("source") {
        return match obj.get("detail") {
            Some(detail @ Value::Object(_)) if strings(&EVENTBRIDGE_SHAPE) => {
                Ok(Some(detail.clone()))
            }
            _ => Err(ParseError::BadEnvelope {
                envelope: "EventBridge",
                reason: "needs `version`, `id`, `detail-type`, `source`, `account`, `time` and `region` strings and a `detail` object holding the event",
            }),
        };
    }
    Ok(None)
}

/// `v` as an object, or [`ParseError::NotAnObject`] at `path`.
pub fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ParseError> {
    v.as_object()
        .ok_or_else(|| ParseError::NotAnObject { path: path.into() })
}

/// [`ParseError::InvalidValue`] at `path`.
pub fn invalid(path: impl Into<String>, reason: &'static str) -> ParseError {
    ParseError::InvalidValue {
        path: path.into(),
        reason,
    }
}

/// A required field of `obj` (its path is `prefix` + `key`).
pub fn req<'a>(
    obj: &'a Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<&'a Value, ParseError> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(ParseError::MissingField {
            path: format!("{prefix}{key}"),
        }),
        Some(v) => Ok(v),
    }
}

/// A required string field.
pub fn req_str<'a>(
    obj: &'a Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<&'a str, ParseError> {
    req(obj, prefix, key)?
        .as_str()
        .ok_or_else(|| ParseError::WrongType {
            path: format!("{prefix}{key}"),
            expected: "a string",
        })
}

/// A required identifier field, validated as an [`Id`].
pub fn req_id(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<Id, ParseError> {
    Id::try_from(req_str(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

/// A required free-text field, bounded and without control characters.
pub fn req_text(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<String, ParseError> {
    let s = req_str(obj, prefix, key)?;
    check_text(s, MAX_TEXT_BYTES).map_err(|reason| invalid(format!("{prefix}{key}"), reason))?;
    Ok(s.to_owned())
}

/// A required non-negative integer field (no fractions, no strings).
pub fn req_u64(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<u64, ParseError> {
    // `as_u64` is None for negatives, floats (even 2.0) and numbers beyond
    // u64, which is exactly the set we refuse.
    req(obj, prefix, key)?
        .as_u64()
        .ok_or_else(|| ParseError::WrongType {
            path: format!("{prefix}{key}"),
            expected: "a non-negative integer",
        })
}

/// A required positive amount in minor units.
pub fn req_amount_at(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Amount, ParseError> {
    Amount::try_from(req_u64(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

/// A required ISO 4217 currency code.
pub fn req_currency_at(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Currency, ParseError> {
    Currency::try_from(req_str(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

/// Is `s` non-empty, at most `max` bytes and free of control characters?
pub fn check_text(s: &str, max: usize) -> Result<(), &'static str> {
    if s.trim().is_empty() {
        Err("must not be empty")
    } else if s.len() > max {
        Err("is too long")
    } else if s.chars().any(char::is_control) {
        Err("must not contain control characters")
    } else {
        Ok(())
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, with plausible field ranges.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() > 40 {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let num = |r: std::ops::Range<usize>| {
        b[r].iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'))
    };
    if !(digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19))
    {
        return false;
    }
    let (month, day, hour, min, sec) =
        (num(5..7), num(8..10), num(11..13), num(14..16), num(17..19));
    if !((1..=12).contains(&month) && (1..=31).contains(&day) && hour < 24 && min < 60 && sec <= 60)
    {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_shapes() {
        for ok in [
            "2026-11-29T10:15:00Z",
            "2026-11-29T10:15:00.123Z",
            "2026-11-29T10:15:00+05:30",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2026-13-29T10:15:00Z",
            "2026-11-29 10:15:00Z",
            "2026-11-29T10:15:00",
            "2026-11-29T10:15:00.Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
