//! The notifier's contract: a DynamoDB stream record of the orders table,
//! read into a [`Change`] (which order, its status before and after, and
//! the fields a notification carries). Strict like the SQS consumers'
//! parsers: a specific [`ParseError`], never a value.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::Deserialize;

use crate::core::wire::ParseError;
use crate::notifier::domain::Change;
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
