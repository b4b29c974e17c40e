//! Test support as library code (feature `testing`): what the notifier's
//! tests and its benchmark both build.

use serde_json::{Value, json};

/// One record of the orders table's stream, shaped as Lambda delivers it,
/// around the given old and new images (an INSERT has no old image, a
/// REMOVE no new one).
pub fn stream_record(seq: u64, order: &str, old: Option<Value>, new: Option<Value>) -> Value {
    let name = match (&old, &new) {
        (None, Some(_)) => "INSERT",
        (Some(_), Some(_)) => "MODIFY",
        _ => "REMOVE",
    };
    let mut change = json!({
        "ApproximateCreationDateTime": 1796551200.0,
        "Keys": {"order_id": {"S": order}},
        "SequenceNumber": format!("{:021}", 1000 + seq),
        "SizeBytes": 120,
        "StreamViewType": "NEW_AND_OLD_IMAGES"
    });
    if let Some(o) = old {
        change["OldImage"] = o;
    }
    if let Some(n) = new {
        change["NewImage"] = n;
    }
    json!({
        "eventID": format!("ev-{seq}"),
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": change,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:111122223333:table/orders/stream/2026-12-01T00:00:00.000"
    })
}
