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

use crate::core::wire::ParseError;
use crate::notifier::domain::{Change, Unreadable};
use crate::orders::domain::Status;

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
            .into_iter()
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
