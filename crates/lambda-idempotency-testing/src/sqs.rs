//! SQS records and batches exactly as Lambda delivers them.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use serde_json::{Value, json};
use tokio::time::Instant;

/// One SQS record exactly as Lambda delivers it (built through serde, since
/// the library's types are `#[non_exhaustive]`).
pub fn record(message_id: &str, body: &str) -> SqsMessage {
    record_from(
        message_id,
        body,
        "arn:aws:sqs:us-east-1:111122223333:order-events",
        None,
    )
}

/// One FIFO-queue record in message group `group`.
pub fn fifo_record(message_id: &str, body: &str, group: &str) -> SqsMessage {
    record_from(
        message_id,
        body,
        "arn:aws:sqs:us-east-1:111122223333:order-events.fifo",
        Some(group),
    )
}

fn record_from(message_id: &str, body: &str, arn: &str, group: Option<&str>) -> SqsMessage {
    let mut attributes = json!({
        "ApproximateReceiveCount": "1",
        "SentTimestamp": "1796551200000",
        "SenderId": "AROAEXAMPLE:producer",
        "ApproximateFirstReceiveTimestamp": "1796551200015"
    });
    if let Some(g) = group {
        attributes["MessageGroupId"] = json!(g);
        attributes["SequenceNumber"] = json!("18849496460467696128");
        attributes["MessageDeduplicationId"] = json!(message_id);
    }
    serde_json::from_value(json!({
        "messageId": message_id,
        "receiptHandle": format!("AQEB{message_id}"),
        "body": body,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1"
    }))
    .expect("valid SQS record")
}

/// The event Lambda delivers with these records.
pub fn batch(records: Vec<SqsMessage>) -> SqsEvent {
    serde_json::from_value(json!({ "Records": records })).expect("valid SQS event")
}

/// A batch of plain-body records with message ids m-0, m-1, ...
pub fn batch_of(bodies: &[Value]) -> SqsEvent {
    batch(
        bodies
            .iter()
            .enumerate()
            .map(|(i, b)| record(&format!("m-{i}"), &b.to_string()))
            .collect(),
    )
}

/// An invocation deadline a minute away: no test reaches it.
pub fn far_deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// The message ids a partial-batch response asks to retry, in order.
pub fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}
