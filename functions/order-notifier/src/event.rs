//! The notifier's contract: a DynamoDB stream record of the orders table,
//! read into a [`Change`] (which order, its status before and after, and
//! the fields a notification carries). Strict like the SQS consumers'
//! parsers: a specific [`ParseError`], never a value.
//!
//! A record that can never be read ([`read_record`]: a malformed image, an
//! unknown status, no order id) is not an error that holds the shard: it is
//! [`Read::Unreadable`], recorded in the notifications table and skipped.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::Deserialize;

use crate::domain::{Change, Unreadable};
use lambda_idempotency::wire::ParseError;
use orders::domain::Status;

/// The image fields the notifier reads.
#[derive(Deserialize, Default)]
struct Image {
    order_id: Option<String>,
    status: Option<String>,
    customer_id: Option<String>,
    tracking_id: Option<String>,
    carrier: Option<String>,
}

fn image(item: &serde_dynamo::Item, which: &'static str) -> Result<Image, ParseError> {
    if item.is_empty() {
        return Ok(Image::default());
    }
    serde_dynamo::from_item(item.clone()).map_err(|_| ParseError::WrongType {
        path: which.to_owned(),
        expected: "an order item",
    })
}

fn status(raw: Option<String>, which: &'static str) -> Result<Option<Status>, ParseError> {
    raw.map(|s| {
        Status::ALL
            .iter()
            .copied()
            .find(|st| st.as_str() == s)
            .ok_or(ParseError::InvalidValue {
                path: format!("{which}.status"),
                reason: "is not an order status",
            })
    })
    .transpose()
}

/// Read one stream record into a [`Change`].
pub fn parse_change(record: &EventRecord) -> Result<Change, ParseError> {
    let new = image(&record.change.new_image, "NewImage")?;
    let old = image(&record.change.old_image, "OldImage")?;
    let keys = image(&record.change.keys, "Keys")?;
    let order_id = keys
        .order_id
        .or_else(|| new.order_id.clone())
        .or_else(|| old.order_id.clone())
        .filter(|id| !id.is_empty())
        .ok_or(ParseError::MissingField {
            path: "Keys.order_id".into(),
        })?;
    Ok(Change {
        order_id,
        old_status: status(old.status, "OldImage")?,
        new_status: status(new.status, "NewImage")?,
        customer_id: new.customer_id,
        tracking_id: new.tracking_id,
        carrier: new.carrier,
    })
}

/// What the notifier makes of one stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// An order change: notify if it is a notifying transition.
    Change(Change),
    /// A record no retry will ever read: recorded (with the reason) and
    /// acknowledged, so it does not hold the records behind it on its shard.
    Unreadable(Unreadable),
}

impl Read {
    /// The order it concerns, if known.
    pub fn order_id(&self) -> Option<&str> {
        match self {
            Read::Change(c) => Some(&c.order_id),
            Read::Unreadable(u) => u.order_id.as_deref(),
        }
    }
}

/// Read one stream record. A record that does not parse is
/// [`Read::Unreadable`]: a stream record is immutable, so what fails to
/// parse now fails on every retry, and retrying it would only hold its shard
/// until the record ages out (24 h) and is dropped. The one error left is a
/// record with neither an eventID nor a SequenceNumber: without either it
/// cannot be recorded under a key its redelivery would find again.
pub fn read_record(record: &EventRecord) -> Result<Read, ParseError> {
    match parse_change(record) {
        Ok(change) => Ok(Read::Change(change)),
        Err(error) => unreadable(record, error).map(Read::Unreadable),
    }
}

/// The dead letter of a record that did not parse: where it came from and
/// `error`, nothing of its images.
fn unreadable(record: &EventRecord, error: ParseError) -> Result<Unreadable, ParseError> {
    let present = |v: &str| (!v.trim().is_empty()).then(|| v.to_owned());
    // The order id from the Keys alone, and only when it is a string: the
    // item key, which every log line of the record already carries.
    let order_id = match record.change.keys.get("order_id") {
        Some(serde_dynamo::AttributeValue::S(id)) if !id.is_empty() => Some(id.clone()),
        _ => None,
    };
    Unreadable::new(
        present(&record.event_id),
        record.change.sequence_number.as_deref().and_then(present),
        present(&record.event_name),
        order_id,
        error.clone(),
    )
    .ok_or(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A stream record as Lambda delivers it; `change` patched by the case.
    fn record(patch: impl FnOnce(&mut serde_json::Value)) -> EventRecord {
        let mut v = json!({
            "eventID": "ev-7", "eventName": "MODIFY", "awsRegion": "us-east-1",
            "dynamodb": {
                "Keys": {"order_id": {"S": "ord-7"}},
                "OldImage": {"order_id": {"S": "ord-7"}, "status": {"S": "PAID"}},
                "NewImage": {"order_id": {"S": "ord-7"}, "status": {"S": "SHIPPED"},
                             "carrier": {"S": "secret-carrier"}},
                "SequenceNumber": "700", "SizeBytes": 1
            }
        });
        patch(&mut v);
        serde_json::from_value(v).expect("a stream record")
    }

    #[test]
    fn a_readable_record_is_a_change() {
        let Ok(Read::Change(c)) = read_record(&record(|_| {})) else {
            panic!("readable")
        };
        assert_eq!(c.order_id, "ord-7");
        assert_eq!(c.new_status, Some(Status::Shipped));
    }

    /// Every way a record can never be read is a dead letter keyed by the
    /// record (its eventID, else its SequenceNumber) with the parser's
    /// reason and no value; only a record with neither id stays an error.
    #[test]
    fn a_record_that_can_never_be_read_is_unreadable_with_its_reason() {
        type Patch = fn(&mut serde_json::Value);
        let cases: [(Patch, &str, Option<&str>, &str); 5] = [
            (
                |v| v["dynamodb"]["NewImage"]["status"] = json!({"S": "LOST-secret"}),
                "`NewImage.status` is invalid: is not an order status",
                Some("ord-7"),
                "stream:event:ev-7#unreadable",
            ),
            (
                |v| v["dynamodb"]["OldImage"]["status"] = json!({"N": "1"}),
                "`OldImage` must be an order item",
                Some("ord-7"),
                "stream:event:ev-7#unreadable",
            ),
            (
                |v| {
                    v["dynamodb"]["Keys"] = json!({});
                    v["dynamodb"]["NewImage"]["order_id"] = json!({"S": ""});
                    v["dynamodb"]["OldImage"]["order_id"] = json!({"S": ""});
                },
                "missing required field `Keys.order_id`",
                None,
                "stream:event:ev-7#unreadable",
            ),
            (
                |v| {
                    v["eventID"] = json!("");
                    v["dynamodb"]["NewImage"]["status"] = json!({"S": "LOST"});
                },
                "`NewImage.status` is invalid: is not an order status",
                Some("ord-7"),
                "stream:sequence:700#unreadable",
            ),
            (
                |v| v["dynamodb"]["Keys"]["order_id"] = json!({"N": "7"}),
                "`Keys` must be an order item",
                None,
                "stream:event:ev-7#unreadable",
            ),
        ];
        for (patch, reason, order, id) in cases {
            let Ok(Read::Unreadable(u)) = read_record(&record(patch)) else {
                panic!("{reason}: not unreadable")
            };
            assert_eq!(u.error.to_string(), reason);
            assert_eq!(u.order_id.as_deref(), order, "{reason}");
            assert_eq!(u.id(), id, "{reason}");
            assert_eq!(u.sequence_number.as_deref(), Some("700"));
            assert_eq!(u.event_name.as_deref(), Some("MODIFY"));
            assert!(!format!("{u:?}").contains("secret"), "{u:?}");
        }
        let neither = record(|v| {
            v["eventID"] = json!("");
            v["dynamodb"]
                .as_object_mut()
                .unwrap()
                .remove("SequenceNumber");
            v["dynamodb"]["NewImage"]["status"] = json!({"S": "LOST"});
        });
        assert!(read_record(&neither).is_err());
    }
}
