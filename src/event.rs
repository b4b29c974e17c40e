//! The event contract: turn one SQS message body into a validated [`OrderEvent`].
//!
//! Parsing is deliberately done by hand from a `serde_json::Value` instead of
//! `#[derive(Deserialize)]` on the whole event: the point of this module is to
//! give each bad record a *specific* reason ("`data.amount` must be an integer
//! in minor units") that an operator can act on from the log line alone.
//! Error messages never echo field values: bodies carry customer data, and
//! these errors are logged at ERROR.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Largest body we look at. SQS caps a message at 256 KiB; anything larger
/// cannot be a real SQS message and is refused before JSON parsing.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Identifiers (event, order, customer, payment, tracking) are short keys.
/// DynamoDB allows 2 KiB for a partition key; we are far stricter so that a
/// runaway producer cannot bloat items or logs.
pub const MAX_ID_BYTES: usize = 256;
/// Free text (cancel reason, carrier name).
pub const MAX_TEXT_BYTES: usize = 1024;

/// Why a message body is not a valid order event. Every variant names the
/// field (as a JSON path like `data.amount`) so the log line is actionable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("the record has no body")]
    MissingBody,
    #[error("body is {size} bytes, over the {max}-byte limit")]
    TooLarge { size: usize, max: usize },
    #[error("body is not valid JSON: {0}")]
    NotJson(String),
    #[error("`{path}` must be a JSON object")]
    NotAnObject { path: String },
    #[error("missing required field `{path}`")]
    MissingField { path: String },
    #[error("`{path}` must be {expected}")]
    WrongType {
        path: String,
        expected: &'static str,
    },
    #[error("`{path}` is invalid: {reason}")]
    InvalidValue { path: String, reason: &'static str },
    /// The value is not kept: it is attacker-sized input, and this error is
    /// logged at ERROR.
    #[error("`type` is not one of this consumer's event types")]
    UnknownType,
    #[error("{envelope} envelope is malformed: {reason}")]
    BadEnvelope {
        envelope: &'static str,
        reason: &'static str,
    },
}

/// The five kinds of order event, in lifecycle order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Placed,
    Paid,
    Shipped,
    Delivered,
    Cancelled,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [
        EventKind::Placed,
        EventKind::Paid,
        EventKind::Shipped,
        EventKind::Delivered,
        EventKind::Cancelled,
    ];

    /// The wire name used in the `type` field.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Placed => "OrderPlaced",
            EventKind::Paid => "OrderPaid",
            EventKind::Shipped => "OrderShipped",
            EventKind::Delivered => "OrderDelivered",
            EventKind::Cancelled => "OrderCancelled",
        }
    }

    fn from_wire(s: &str) -> Option<Self> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A non-empty, bounded identifier without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(String);

impl Id {
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

/// A per-order sequence number assigned by the producer: an integer >= 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(u64);

impl Seq {
    pub fn get(self) -> u64 {
        self.0
    }
}

impl TryFrom<u64> for Seq {
    type Error = &'static str;
    fn try_from(n: u64) -> Result<Self, Self::Error> {
        if n == 0 {
            Err("must be >= 1")
        } else {
            Ok(Seq(n))
        }
    }
}

/// An amount in minor units (paise, cents): a positive integer. Floats are
/// refused rather than rounded; money is never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(u64);

impl Amount {
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

/// The type-specific part of an event (`data`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    Placed {
        customer_id: Id,
        amount: Amount,
        currency: Currency,
    },
    Paid {
        payment_id: Id,
        amount: Amount,
        currency: Currency,
    },
    Shipped {
        carrier: String,
        tracking_id: Id,
    },
    Delivered,
    Cancelled {
        reason: String,
    },
}

impl Payload {
    pub fn kind(&self) -> EventKind {
        match self {
            Payload::Placed { .. } => EventKind::Placed,
            Payload::Paid { .. } => EventKind::Paid,
            Payload::Shipped { .. } => EventKind::Shipped,
            Payload::Delivered => EventKind::Delivered,
            Payload::Cancelled { .. } => EventKind::Cancelled,
        }
    }
}

/// A validated order event. Constructing one is the only way past the parser,
/// so everything downstream can rely on its invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderEvent {
    pub event_id: Id,
    pub order_id: Id,
    pub seq: Seq,
    pub occurred_at: Timestamp,
    pub payload: Payload,
}

impl OrderEvent {
    pub fn kind(&self) -> EventKind {
        self.payload.kind()
    }

    /// A fingerprint of the event's meaning, stored with the order so that a
    /// redelivery can be told apart from a producer re-using an eventId with
    /// different content. Fields are fed length-prefixed in a fixed order, so
    /// JSON key order, whitespace and unknown extra fields do not change it.
    pub fn content_hash(&self) -> String {
        let mut h = Sha256::new();
        let mut put = |s: &str| {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        };
        put(self.event_id.as_str());
        put(self.order_id.as_str());
        put(&self.seq.get().to_string());
        put(self.kind().as_str());
        put(self.occurred_at.as_str());
        match &self.payload {
            Payload::Placed {
                customer_id,
                amount,
                currency,
            } => {
                put(customer_id.as_str());
                put(&amount.get().to_string());
                put(currency.as_str());
            }
            Payload::Paid {
                payment_id,
                amount,
                currency,
            } => {
                put(payment_id.as_str());
                put(&amount.get().to_string());
                put(currency.as_str());
            }
            Payload::Shipped {
                carrier,
                tracking_id,
            } => {
                put(carrier);
                put(tracking_id.as_str());
            }
            Payload::Delivered => {}
            Payload::Cancelled { reason } => put(reason),
        }
        let digest = h.finalize();
        // 128 bits is plenty to tell two payloads of the same event apart.
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Parse one SQS message body: a plain event, or one wrapped by SNS (raw
/// delivery off) or EventBridge; the result is validated.
pub fn parse_body(body: Option<&str>) -> Result<OrderEvent, ParseError> {
    parse_wrapped(body, parse_event)
}

/// The steps every consumer's parser shares: a body within SQS's size
/// limit, valid JSON, a JSON object, read by `parse` either as it is or,
/// when it is an SNS or EventBridge envelope, as the event inside.
///
/// A body that is a valid event at the top level is that event, whatever
/// else it carries: producers put `source`, `detail-type`, `Type` or
/// `TopicArn` fields on their own events too, and reading such an event as
/// an envelope would send a good message to the DLQ. Only when the body is
/// not an event itself, and has an envelope's complete shape, is the inside
/// read.
pub(crate) fn parse_wrapped<T>(
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

fn parse_event(value: &Value) -> Result<OrderEvent, ParseError> {
    let obj = as_object(value, "(event)")?;
    let kind_name = req_str(obj, "", "type")?;
    let kind = EventKind::from_wire(kind_name).ok_or(ParseError::UnknownType)?;
    let event_id = req_id(obj, "", "eventId")?;
    let order_id = req_id(obj, "", "orderId")?;
    let seq = Seq::try_from(req_u64(obj, "", "seq")?).map_err(|reason| invalid("seq", reason))?;
    let occurred_at = Timestamp::try_from(req_str(obj, "", "occurredAt")?)
        .map_err(|reason| invalid("occurredAt", reason))?;

    let data = match obj.get("data") {
        None | Some(Value::Null) if kind == EventKind::Delivered => &*EMPTY,
        Some(v) => as_object(v, "data")?,
        None => {
            return Err(ParseError::MissingField {
                path: "data".into(),
            });
        }
    };
    let payload = match kind {
        EventKind::Placed => Payload::Placed {
            customer_id: req_id(data, "data.", "customerId")?,
            amount: req_amount(data, "amount")?,
            currency: req_currency(data, "currency")?,
        },
        EventKind::Paid => Payload::Paid {
            payment_id: req_id(data, "data.", "paymentId")?,
            amount: req_amount(data, "amount")?,
            currency: req_currency(data, "currency")?,
        },
        EventKind::Shipped => Payload::Shipped {
            carrier: req_text(data, "data.", "carrier")?,
            tracking_id: req_id(data, "data.", "trackingId")?,
        },
        EventKind::Delivered => Payload::Delivered,
        EventKind::Cancelled => Payload::Cancelled {
            reason: req_text(data, "data.", "reason")?,
        },
    };
    Ok(OrderEvent {
        event_id,
        order_id,
        seq,
        occurred_at,
        payload,
    })
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

pub(crate) fn as_object<'a>(
    v: &'a Value,
    path: &str,
) -> Result<&'a Map<String, Value>, ParseError> {
    v.as_object()
        .ok_or_else(|| ParseError::NotAnObject { path: path.into() })
}

pub(crate) fn invalid(path: impl Into<String>, reason: &'static str) -> ParseError {
    ParseError::InvalidValue {
        path: path.into(),
        reason,
    }
}

fn req<'a>(obj: &'a Map<String, Value>, prefix: &str, key: &str) -> Result<&'a Value, ParseError> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(ParseError::MissingField {
            path: format!("{prefix}{key}"),
        }),
        Some(v) => Ok(v),
    }
}

pub(crate) fn req_str<'a>(
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

pub(crate) fn req_id(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<Id, ParseError> {
    Id::try_from(req_str(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

fn req_text(obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<String, ParseError> {
    let s = req_str(obj, prefix, key)?;
    check_text(s, MAX_TEXT_BYTES).map_err(|reason| invalid(format!("{prefix}{key}"), reason))?;
    Ok(s.to_owned())
}

pub(crate) fn req_u64(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<u64, ParseError> {
    // `as_u64` is None for negatives, floats (even 2.0) and numbers beyond
    // u64, which is exactly the set we refuse.
    req(obj, prefix, key)?
        .as_u64()
        .ok_or_else(|| ParseError::WrongType {
            path: format!("{prefix}{key}"),
            expected: "a non-negative integer",
        })
}

fn req_amount(data: &Map<String, Value>, key: &str) -> Result<Amount, ParseError> {
    req_amount_at(data, "data.", key)
}

fn req_currency(data: &Map<String, Value>, key: &str) -> Result<Currency, ParseError> {
    req_currency_at(data, "data.", key)
}

pub(crate) fn req_amount_at(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Amount, ParseError> {
    Amount::try_from(req_u64(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

pub(crate) fn req_currency_at(
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Currency, ParseError> {
    Currency::try_from(req_str(obj, prefix, key)?)
        .map_err(|reason| invalid(format!("{prefix}{key}"), reason))
}

pub(crate) fn check_text(s: &str, max: usize) -> Result<(), &'static str> {
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
fn is_rfc3339(s: &str) -> bool {
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
    use serde_json::json;

    fn placed() -> Value {
        json!({"eventId": "evt-1", "orderId": "ord-1", "seq": 1, "type": "OrderPlaced",
               "occurredAt": "2026-11-29T10:15:00Z",
               "data": {"customerId": "cust-1", "amount": 150000, "currency": "INR"}})
    }

    fn parse(v: &Value) -> Result<OrderEvent, ParseError> {
        parse_body(Some(&v.to_string()))
    }

    #[test]
    fn parses_every_type() {
        let cases = [
            (
                "OrderPlaced",
                json!({"customerId": "c", "amount": 1, "currency": "USD"}),
            ),
            (
                "OrderPaid",
                json!({"paymentId": "p", "amount": 1, "currency": "USD"}),
            ),
            (
                "OrderShipped",
                json!({"carrier": "DHL", "trackingId": "t-1"}),
            ),
            ("OrderDelivered", json!({})),
            ("OrderCancelled", json!({"reason": "customer request"})),
        ];
        for (ty, data) in cases {
            let mut v = placed();
            v["type"] = json!(ty);
            v["data"] = data;
            let ev = parse(&v).unwrap_or_else(|e| panic!("{ty}: {e}"));
            assert_eq!(ev.kind().as_str(), ty);
        }
    }

    #[test]
    fn delivered_needs_no_data() {
        let mut v = placed();
        v["type"] = json!("OrderDelivered");
        v.as_object_mut().unwrap().remove("data");
        assert_eq!(parse(&v).unwrap().payload, Payload::Delivered);
    }

    #[test]
    fn specific_errors() {
        let cases: Vec<(Value, ParseError)> = vec![
            (
                {
                    let mut v = placed();
                    v.as_object_mut().unwrap().remove("seq");
                    v
                },
                ParseError::MissingField { path: "seq".into() },
            ),
            (
                {
                    let mut v = placed();
                    v["seq"] = json!(0);
                    v
                },
                invalid("seq", "must be >= 1"),
            ),
            (
                {
                    let mut v = placed();
                    v["seq"] = json!(-1);
                    v
                },
                ParseError::WrongType {
                    path: "seq".into(),
                    expected: "a non-negative integer",
                },
            ),
            (
                {
                    let mut v = placed();
                    v["seq"] = json!("2");
                    v
                },
                ParseError::WrongType {
                    path: "seq".into(),
                    expected: "a non-negative integer",
                },
            ),
            (
                {
                    let mut v = placed();
                    v["data"]["amount"] = json!(12.5);
                    v
                },
                ParseError::WrongType {
                    path: "data.amount".into(),
                    expected: "a non-negative integer",
                },
            ),
            (
                {
                    let mut v = placed();
                    v["data"]["currency"] = json!("inr");
                    v
                },
                invalid(
                    "data.currency",
                    "must be a three-letter upper-case ISO 4217 code",
                ),
            ),
            (
                {
                    let mut v = placed();
                    v["eventId"] = json!("  ");
                    v
                },
                invalid("eventId", "must not be empty"),
            ),
            (
                {
                    let mut v = placed();
                    v["orderId"] = json!("x".repeat(MAX_ID_BYTES + 1));
                    v
                },
                invalid("orderId", "is too long"),
            ),
            (
                {
                    let mut v = placed();
                    v["type"] = json!("OrderTeleported");
                    v
                },
                ParseError::UnknownType,
            ),
            (
                {
                    let mut v = placed();
                    v["occurredAt"] = json!("yesterday");
                    v
                },
                invalid(
                    "occurredAt",
                    "must be an RFC 3339 timestamp such as 2026-11-29T10:15:00Z",
                ),
            ),
            (
                {
                    let mut v = placed();
                    v["data"] = json!([1, 2]);
                    v
                },
                ParseError::NotAnObject {
                    path: "data".into(),
                },
            ),
            (
                json!([1, 2, 3]),
                ParseError::NotAnObject {
                    path: "(body)".into(),
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse(&input), Err(expected), "input: {input}");
        }
    }

    #[test]
    fn not_json_and_missing_and_oversized_bodies() {
        assert!(matches!(
            parse_body(Some("{not json")),
            Err(ParseError::NotJson(_))
        ));
        assert_eq!(parse_body(None), Err(ParseError::MissingBody));
        let huge = "x".repeat(MAX_BODY_BYTES + 1);
        assert!(matches!(
            parse_body(Some(&huge)),
            Err(ParseError::TooLarge { .. })
        ));
    }

    #[test]
    fn unwraps_sns_and_eventbridge() {
        let inner = placed();
        let sns = json!({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:t",
                         "Message": inner.to_string(), "Timestamp": "2026-11-29T10:15:00.000Z"});
        let eb = json!({"version": "0", "id": "x", "detail-type": "OrderPlaced", "source": "orders",
                        "account": "1", "time": "2026-11-29T10:15:00Z", "region": "us-east-1",
                        "resources": [], "detail": inner});
        let direct = parse(&placed()).unwrap();
        assert_eq!(parse(&sns).unwrap(), direct);
        assert_eq!(parse(&eb).unwrap(), direct);

        let bad_sns = json!({"Type": "Notification", "TopicArn": "t", "Message": {"a": 1}});
        assert!(matches!(
            parse(&bad_sns),
            Err(ParseError::BadEnvelope {
                envelope: "SNS",
                ..
            })
        ));
        let bad_eb = json!({"detail-type": "x", "source": "y", "detail": "str"});
        assert!(matches!(
            parse(&bad_eb),
            Err(ParseError::BadEnvelope {
                envelope: "EventBridge",
                ..
            })
        ));
    }

    #[test]
    fn a_plain_event_with_envelope_like_metadata_is_not_an_envelope() {
        let direct = parse(&placed()).unwrap();
        // Producers' own metadata: EventBridge-like and SNS-like fields.
        let mut eb_like = placed();
        eb_like["source"] = json!("checkout");
        eb_like["detail-type"] = json!("OrderPlaced");
        let mut sns_like = placed();
        sns_like["Type"] = json!("Notification");
        sns_like["TopicArn"] = json!("arn:aws:sns:us-east-1:1:t");
        for v in [eb_like, sns_like] {
            assert_eq!(parse(&v), Ok(direct.clone()), "{v}");
        }
        // An envelope's marks without its shape, and no event at the top
        // level: the envelope's own error.
        let partial = json!({"detail-type": "x", "source": "y", "detail": placed()});
        assert!(matches!(
            parse(&partial),
            Err(ParseError::BadEnvelope {
                envelope: "EventBridge",
                ..
            })
        ));
    }

    #[test]
    fn an_unknown_type_is_not_echoed() {
        let mut v = placed();
        v["type"] = json!("<script>SECRET</script>");
        let msg = parse(&v).unwrap_err().to_string();
        assert!(!msg.contains("SECRET"), "{msg}");
    }

    #[test]
    fn errors_do_not_echo_values() {
        let mut v = placed();
        v["data"]["currency"] = json!("SECRET-VALUE");
        let msg = parse(&v).unwrap_err().to_string();
        assert!(!msg.contains("SECRET"), "{msg}");
    }

    #[test]
    fn content_hash_ignores_key_order_but_not_content() {
        let a = parse(&placed()).unwrap();
        let reordered = r#"{"data":{"currency":"INR","amount":150000,"customerId":"cust-1"},"type":"OrderPlaced",
            "seq":1,"orderId":"ord-1","occurredAt":"2026-11-29T10:15:00Z","eventId":"evt-1","extra":true}"#;
        let b = parse_body(Some(reordered)).unwrap();
        assert_eq!(a.content_hash(), b.content_hash());
        let mut v = placed();
        v["data"]["amount"] = json!(150001);
        assert_ne!(a.content_hash(), parse(&v).unwrap().content_hash());
    }

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
