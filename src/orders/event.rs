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

pub use lambda_idempotency::wire::{
    Amount, Currency, Id, MAX_BODY_BYTES, MAX_ID_BYTES, MAX_TEXT_BYTES, ParseError, Timestamp,
};
use lambda_idempotency::wire::{
    as_object, invalid, parse_wrapped, req_amount_at, req_currency_at, req_id, req_str, req_text,
    req_u64,
};

/// The kinds of order event, in lifecycle order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::VariantArray)]
pub enum EventKind {
    Placed,
    Paid,
    Shipped,
    Delivered,
    Cancelled,
}

impl EventKind {
    /// Every kind, derived from the enum itself: a new variant cannot be
    /// left out (the parser finds a type by this list).
    pub const ALL: &'static [EventKind] = <EventKind as strum::VariantArray>::VARIANTS;

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
        EventKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
        let mut put = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        // Numbers are fed as their decimal text (what `to_string` writes),
        // formatted on the stack by itoa.
        let mut digits = itoa::Buffer::new();
        put(self.event_id.as_str().as_bytes());
        put(self.order_id.as_str().as_bytes());
        put(digits.format(self.seq.get()).as_bytes());
        put(self.kind().as_str().as_bytes());
        put(self.occurred_at.as_str().as_bytes());
        match &self.payload {
            Payload::Placed {
                customer_id,
                amount,
                currency,
            } => {
                put(customer_id.as_str().as_bytes());
                put(digits.format(amount.get()).as_bytes());
                put(currency.as_str().as_bytes());
            }
            Payload::Paid {
                payment_id,
                amount,
                currency,
            } => {
                put(payment_id.as_str().as_bytes());
                put(digits.format(amount.get()).as_bytes());
                put(currency.as_str().as_bytes());
            }
            Payload::Shipped {
                carrier,
                tracking_id,
            } => {
                put(carrier.as_bytes());
                put(tracking_id.as_str().as_bytes());
            }
            Payload::Delivered => {}
            Payload::Cancelled { reason } => put(reason.as_bytes()),
        }
        let digest = h.finalize();
        // 128 bits is plenty to tell two payloads of the same event apart:
        // the first 16 bytes in lower-case hex.
        hex::encode(&digest[..16])
    }
}

/// Parse one SQS message body: a plain event, or one wrapped by SNS (raw
/// delivery off) or EventBridge; the result is validated.
pub fn parse_body(body: Option<&str>) -> Result<OrderEvent, ParseError> {
    parse_wrapped(body, parse_event)
}

/// The steps every consumer's parser shares: a body within SQS's size
/// limit, valid JSON, a JSON object, read by `parse` either as it is or,
fn parse_event(value: &Value) -> Result<OrderEvent, ParseError> {
    let obj = as_object(value, "(event)")?;
    let kind_name = req_str(obj, "", "type")?;
    let kind = EventKind::from_wire(kind_name).ok_or_else(|| ParseError::UnknownType {
        path: "type".into(),
    })?;
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

fn req_amount(data: &Map<String, Value>, key: &str) -> Result<Amount, ParseError> {
    req_amount_at(data, "data.", key)
}

fn req_currency(data: &Map<String, Value>, key: &str) -> Result<Currency, ParseError> {
    req_currency_at(data, "data.", key)
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
    fn every_kind_is_parsed_by_its_wire_name() {
        for &kind in EventKind::ALL {
            assert_eq!(EventKind::from_wire(kind.as_str()), Some(kind));
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
                ParseError::UnknownType {
                    path: "type".into(),
                },
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

    /// `v` with an ignored `padding` field that brings its JSON text to
    /// exactly `size` bytes.
    fn padded_to(v: &Value, size: usize) -> String {
        let mut v = v.clone();
        v["padding"] = json!("");
        let bare = v.to_string().len();
        v["padding"] = json!("x".repeat(size - bare));
        let text = v.to_string();
        assert_eq!(text.len(), size);
        text
    }

    /// SQS delivers messages of up to 1 MiB (it was 256 KiB): a valid event
    /// of any size up to that is read; one byte more is refused as TooLarge
    /// (it cannot be a real SQS message), naming the limit.
    #[test]
    fn bodies_up_to_sqs_limit_of_one_mebibyte_are_read() {
        for size in [256 * 1024 + 1, 700_000, 1_048_576] {
            let body = padded_to(&placed(), size);
            let ev = parse_body(Some(&body)).unwrap_or_else(|e| panic!("{size} bytes: {e}"));
            assert_eq!(ev, parse(&placed()).unwrap(), "{size} bytes");
        }
        let over = padded_to(&placed(), MAX_BODY_BYTES + 1);
        assert_eq!(
            parse_body(Some(&over)),
            Err(ParseError::TooLarge {
                size: MAX_BODY_BYTES + 1,
                max: MAX_BODY_BYTES
            })
        );
        assert_eq!(MAX_BODY_BYTES, 1_048_576);
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

    /// The stored format: these values are in every table already written
    /// (computed independently: SHA-256 over each field as u64-LE length +
    /// UTF-8 bytes, first 16 bytes in hex), so they must never change.
    #[test]
    fn content_hash_values_are_pinned() {
        assert_eq!(
            parse(&placed()).unwrap().content_hash(),
            "a21334269f69f56d9675e61b7afe4308"
        );
        let mut v = placed();
        v["seq"] = json!(12345678901234567890u64);
        v["data"]["amount"] = json!(10u64);
        assert_eq!(
            parse(&v).unwrap().content_hash(),
            "791f07ed866b61f89120081a11ac79fa"
        );
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
}
