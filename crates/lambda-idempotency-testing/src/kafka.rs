//! Amazon MSK and self-managed Apache Kafka records and batches exactly as
//! Lambda delivers them (the shape of AWS's "Example event" for a Lambda
//! Kafka event source mapping: `records` keyed by topic-partition, each
//! record's key and value base64, its headers arrays of byte values), as
//! JSON for the Runtime API emulator and as the library's strictly read
//! `KafkaBatch` for `Function::handle_batch`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lambda_idempotency::engine::{KafkaBatch, KafkaBatchResponse};
use serde_json::{Map, Value, json};

/// The cluster every event names (`eventSourceArn`).
pub const CLUSTER_ARN: &str = "arn:aws:kafka:us-east-1:111122223333:cluster/audit-cluster/751d2973-a626-431c-9d4e-d7975eb44dd7-2";
/// The topic the records come from unless a test names another.
pub const TOPIC: &str = "audit-events";
/// When every record was written (epoch milliseconds).
pub const TIMESTAMP_MS: u64 = 1_796_551_200_015;

/// The key of the event's `records` object for a topic's partition:
/// `"<topic>-<partition>"`.
pub fn topic_partition(topic: &str, partition: u32) -> String {
    format!("{topic}-{partition}")
}

/// One record of [`TOPIC`] as Lambda delivers it: its key (if any) and
/// value the base64 of the bytes given, one header.
pub fn record(partition: u32, offset: u64, key: Option<&[u8]>, value: &[u8]) -> Value {
    record_with_value(partition, offset, key, json!(STANDARD.encode(value)))
}

/// One record whose `value` is put in as given: not base64, a number, null.
pub fn record_with_value(partition: u32, offset: u64, key: Option<&[u8]>, value: Value) -> Value {
    json!({
        "topic": TOPIC,
        "partition": partition,
        "offset": offset,
        "timestamp": TIMESTAMP_MS,
        "timestampType": "CREATE_TIME",
        "key": key.map(|k| STANDARD.encode(k)),
        "value": value,
        // "source": "audit-trail", as bytes, as Lambda sends a header.
        "headers": [{ "source": b"audit-trail".to_vec() }]
    })
}

/// The event Lambda sends for an MSK cluster: the records grouped under
/// their topic-partition, in the order given (each record's own `topic`
/// and `partition` say where it goes).
pub fn event(records: Vec<Value>) -> Value {
    let mut groups: Map<String, Value> = Map::new();
    for record in records {
        let topic = record["topic"].as_str().unwrap_or(TOPIC).to_owned();
        let partition = record["partition"].as_u64().unwrap_or(0);
        let key = format!("{topic}-{partition}");
        if let Value::Array(list) = groups.entry(key).or_insert_with(|| json!([])) {
            list.push(record);
        }
    }
    json!({
        "eventSource": "aws:kafka",
        "eventSourceArn": CLUSTER_ARN,
        "bootstrapServers": "b-1.audit-cluster.a1bcde.c1.kafka.us-east-1.amazonaws.com:9092",
        "records": groups
    })
}

/// The event read as the function reads it (strictly).
pub fn batch(records: Vec<Value>) -> KafkaBatch {
    serde_json::from_value(event(records)).expect("a Kafka event")
}

/// The `(topic-partition, offset)` pairs an answer lists, in its order.
pub fn failed(response: &KafkaBatchResponse) -> Vec<(String, i64)> {
    response
        .batch_item_failures
        .iter()
        .map(|f| {
            (
                f.item_identifier.partition.clone(),
                f.item_identifier.offset,
            )
        })
        .collect()
}
