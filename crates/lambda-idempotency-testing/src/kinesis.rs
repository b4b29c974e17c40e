//! Kinesis Data Streams records and batches exactly as Lambda delivers
//! them (the shape AWS documents for a Lambda Kinesis event), as JSON for
//! the Runtime API emulator and as the library's strictly read
//! `KinesisBatch` for `Function::handle_batch`.

use aws_lambda_events::encodings::Base64Data;
use lambda_idempotency::engine::{KinesisBatch, KinesisEventResponse};
use serde_json::{Value, json};

/// The stream every record names (`eventSourceARN`).
pub const STREAM_ARN: &str = "arn:aws:kinesis:us-east-1:111122223333:stream/order-events";
/// The shard every record comes from: Lambda reads each shard on its own,
/// so a batch is one shard's.
pub const SHARD_ID: &str = "shardId-000000000006";

/// The `n`th sequence number of the shard: 56 decimal digits, as Kinesis
/// issues them, increasing with `n`.
pub fn sequence_number(n: u32) -> String {
    format!("49590338271490256608559692538361571095921575989136{n:06}")
}

/// One record as Lambda delivers it, its `data` the base64 of `data`.
pub fn record(sequence: &str, partition_key: &str, data: &[u8]) -> Value {
    // `#[non_exhaustive]`: filled through its Vec, encoded by its serde.
    let mut bytes = Base64Data::default();
    bytes.extend_from_slice(data);
    let data = serde_json::to_value(bytes).expect("base64 data");
    record_with_data(sequence, partition_key, data)
}

/// One record whose `data` is put in as given: not base64, a number, null.
pub fn record_with_data(sequence: &str, partition_key: &str, data: Value) -> Value {
    json!({
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": partition_key,
            "sequenceNumber": sequence,
            "data": data,
            "approximateArrivalTimestamp": 1796551200.015
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": format!("{SHARD_ID}:{sequence}"),
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::111122223333:role/order-events-consumer",
        "awsRegion": "us-east-1",
        "eventSourceARN": STREAM_ARN
    })
}

/// The event Lambda sends: `{"Records": [...]}`.
pub fn event(records: Vec<Value>) -> Value {
    json!({ "Records": records })
}

/// The event read as the function reads it (strictly).
pub fn batch(records: Vec<Value>) -> KinesisBatch {
    serde_json::from_value(event(records)).expect("a Kinesis event")
}

/// The sequence numbers an answer lists, in its order.
pub fn failed_ids(response: &KinesisEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.clone())
        .collect()
}
