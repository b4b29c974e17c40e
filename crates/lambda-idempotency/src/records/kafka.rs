//! Amazon MSK and self-managed Apache Kafka (feature `kafka`): records
//! grouped per topic-partition in offset order, a partition stopped at its
//! first failure, each record's key, value and headers decoded on its own,
//! and the partial-batch response that names a record by its
//! topic-partition and offset.
//!
//! The event, as Lambda sends it for both kinds of cluster
//! (docs.aws.amazon.com/lambda/latest/dg/with-msk.html and
//! .../with-kafka.html, "Example event"): `records` is a JSON object whose
//! keys are topic-partitions (`"mytopic-0"`) and whose values are arrays
//! of records, each with `topic`, `partition`, `offset`, `timestamp`
//! (epoch milliseconds), `timestampType`, `key` (base64, absent or null
//! when the producer set none), `value` (base64) and `headers` (an array
//! of one-entry objects, header name to an array of byte values).
//!
//! The answer. Lambda accepts a partial batch response from a Kafka event
//! source mapping with `ReportBatchItemFailures` turned on
//! (docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html,
//! "Partial batch response"). That page's copies read for this module
//! describe the setting but show no response syntax, so the shape follows
//! the two implementations that name it: Powertools for AWS Lambda
//! (Python) (`aws_lambda_powertools/utilities/batch/types.py`,
//! `KafkaItemIdentifier`: `partition`, the topic-partition key, and
//! `offset`; pull request aws-powertools/powertools-lambda-python#7941) and
//! the open pull request aws/aws-lambda-rust-runtime#1164
//! (`KafkaEventResponse`, `KafkaItemIdentifier { partition: String, offset:
//! i64 }`, serialised as
//! `{"batchItemFailures": [{"itemIdentifier": {"partition": "mytopic-0",
//! "offset": 15}}]}`). Unlike SQS and the streams, `itemIdentifier` is an
//! object, not a string. One third-party middleware (middy's
//! `event-batch-response`) documents a string `"<topic>-<partition>-<offset>"`
//! instead: the sources disagree, and this module follows AWS's own
//! Powertools.
//!
//! `aws_lambda_events` 1.2 has a `KafkaEvent` (feature `kafka`) but it is
//! not used: it reads header bytes as `i8`, so a header byte above 127 (any
//! non-ASCII UTF-8) fails the whole event, and with it every partition of
//! the batch, with no record named; one record whose fields have the wrong
//! types does the same; and it has no response type. Read here instead,
//! the event's shape is strict (it fails the invocation, naming positions,
//! never values), while a record's own fields (key, value, headers,
//! timestamp) fail that record only.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::{BatchEvent, BatchRecord, MessageRecord, StrictInput};
use crate::wire::ParseError;

/// Between the topic-partition and the offset in a record's
/// [`id`](BatchRecord::id): a character no Kafka topic name holds (they
/// are ASCII letters, digits, `.`, `_` and `-`), and the offset after it is
/// digits only, so the id splits back unambiguously.
const ID_SEPARATOR: char = '@';

/// One Kafka record as the batch sees it: where it sits (topic-partition,
/// offset), when it was written, and its key, value and headers decoded
/// from Lambda's event.
///
/// A record whose value, key, headers or timestamp cannot be read is kept,
/// with its topic-partition and offset, and [`value`](Self::value) says
/// why: the handler's parse fails, the record is `Invalid`, and its
/// partition's later records wait behind it (a partition is strictly
/// ordered), as for any record that does not parse. Lambda resumes the
/// partition at the lowest offset answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaMessage {
    /// The key of the event's `records` object this record is listed
    /// under: `"<topic>-<partition>"`.
    topic_partition: String,
    /// `<topic_partition>@<offset>`: the id the batch reports by.
    id: String,
    topic: String,
    partition: u32,
    offset: u64,
    /// Epoch milliseconds (0 when unreadable: `unreadable` says so).
    timestamp_ms: u64,
    timestamp_type: Option<String>,
    key: Option<Vec<u8>>,
    value: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    /// Why the record's fields could not be read, if they could not.
    unreadable: Option<ParseError>,
}

impl KafkaMessage {
    /// The topic-partition the event lists the record under
    /// (`"<topic>-<partition>"`): what the partial-batch answer names.
    pub fn topic_partition(&self) -> &str {
        &self.topic_partition
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition's number.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// When the record was written (`CREATE_TIME`) or appended
    /// (`LOG_APPEND_TIME`, see [`timestamp_type`](Self::timestamp_type)),
    /// in epoch milliseconds; 0 when the record is unreadable.
    pub fn timestamp_ms(&self) -> u64 {
        self.timestamp_ms
    }

    /// `timestampType` as Lambda sent it (`CREATE_TIME`,
    /// `LOG_APPEND_TIME`), if it did.
    pub fn timestamp_type(&self) -> Option<&str> {
        self.timestamp_type.as_deref()
    }

    /// The record's key, decoded from base64; `None` when the producer set
    /// none (or the record is unreadable: [`value`](Self::value) says why).
    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// The record's value, decoded from base64; an error when Lambda's
    /// event carried none (a tombstone), or when any of the record's
    /// fields could not be read.
    pub fn value(&self) -> Result<&[u8], ParseError> {
        match &self.unreadable {
            Some(e) => Err(e.clone()),
            None => Ok(&self.value),
        }
    }

    /// The headers, in the record's order (a name may repeat), each value
    /// as its bytes.
    pub fn headers(&self) -> &[(String, Vec<u8>)] {
        &self.headers
    }

    /// The first header of that name, if any.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// Read one record, listed under `topic_partition`. Its place (topic,
    /// partition, offset) must be there, of the types Lambda sends, and
    /// agree with the key it is listed under, or the event is refused:
    /// without them the answer could not name the record. Everything else
    /// that is wrong fails this record only.
    fn from_object(
        topic_partition: &str,
        fields: &Map<String, Value>,
    ) -> Result<Self, &'static str> {
        let topic = match fields.get("topic") {
            Some(Value::String(t)) if !t.is_empty() => t.clone(),
            _ => return Err("a Kafka record needs a `topic` string"),
        };
        let partition = fields
            .get("partition")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .ok_or("a Kafka record needs a `partition` number")?;
        let offset = fields
            .get("offset")
            .and_then(Value::as_u64)
            // Kafka's offsets are signed 64-bit: the answer carries one.
            .filter(|&o| i64::try_from(o).is_ok())
            .ok_or("a Kafka record needs an `offset` number")?;
        if topic_partition != format!("{topic}-{partition}") {
            return Err(
                "a Kafka record's topic and partition differ from the topic-partition it is listed under",
            );
        }

        let mut unreadable = None;
        let mut fail = |e: ParseError| {
            // The first problem is the one reported.
            unreadable.get_or_insert(e);
        };
        let value = match fields.get("value") {
            None | Some(Value::Null) => {
                fail(ParseError::MissingBody);
                Vec::new()
            }
            Some(Value::String(text)) => decode(text).unwrap_or_else(|| {
                fail(invalid("value", "must be base64"));
                Vec::new()
            }),
            Some(_) => {
                fail(ParseError::WrongType {
                    path: "value".into(),
                    expected: "a base64 string",
                });
                Vec::new()
            }
        };
        let key = match fields.get("key") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => decode(text).or_else(|| {
                fail(invalid("key", "must be base64"));
                None
            }),
            Some(_) => {
                fail(invalid("key", "must be base64"));
                None
            }
        };
        let headers = match fields.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => headers(v).unwrap_or_else(|| {
                fail(invalid(
                    "headers",
                    "must be a list of header names to byte arrays",
                ));
                Vec::new()
            }),
        };
        let timestamp_ms = fields
            .get("timestamp")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| {
                fail(invalid("timestamp", "must be epoch milliseconds"));
                0
            });
        let timestamp_type = match fields.get("timestampType") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => Some(t.clone()),
            Some(_) => {
                fail(ParseError::WrongType {
                    path: "timestampType".into(),
                    expected: "a string",
                });
                None
            }
        };
        Ok(KafkaMessage {
            id: format!("{topic_partition}{ID_SEPARATOR}{offset}"),
            topic_partition: topic_partition.to_owned(),
            topic,
            partition,
            offset,
            timestamp_ms,
            timestamp_type,
            key,
            value,
            headers,
            unreadable,
        })
    }
}

/// A field's error, without its value.
fn invalid(path: &str, reason: &'static str) -> ParseError {
    ParseError::InvalidValue {
        path: path.into(),
        reason,
    }
}

/// Standard base64 with padding, as Lambda encodes keys and values.
fn decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

/// `[{"name": [104, 105]}, ...]`: every element an object, every value an
/// array of bytes (0 to 255). `None` for anything else.
fn headers(value: &Value) -> Option<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for entry in value.as_array()? {
        for (name, bytes) in entry.as_object()? {
            let bytes = bytes
                .as_array()?
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<Vec<u8>>>()?;
            out.push((name.clone(), bytes));
        }
    }
    Some(out)
}

impl BatchRecord for KafkaMessage {
    type Event = KafkaBatch;

    /// `<topic-partition>@<offset>`, which [`KafkaBatch::response`] turns
    /// back into the `{partition, offset}` Lambda reads.
    fn id(&self) -> Option<&str> {
        Some(&self.id)
    }

    /// The topic-partition: Kafka orders a partition, nothing wider.
    fn source_group(&self) -> Option<String> {
        Some(self.topic_partition.clone())
    }

    /// A partition is ordered by offset: keep it, and hold a partition's
    /// later records back once one fails (Lambda resumes the partition at
    /// the lowest offset answered, so they come back anyway).
    fn strict_order(_records: &[Self]) -> bool {
        true
    }
}

impl MessageRecord for KafkaMessage {
    /// The decoded value.
    fn payload(&self) -> Result<&[u8], ParseError> {
        self.value()
    }
}

/// A Kafka event (Amazon MSK or self-managed Apache Kafka), read strictly:
/// the event, its `records` and each record must have the shape Lambda
/// sends, or the invocation fails with an error naming positions, never
/// values. Its records are in topic-partition order, each partition's in
/// offset order. Its answer is a [`KafkaBatchResponse`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaBatch {
    /// The records, grouped per topic-partition, each group in offset
    /// order.
    pub records: Vec<KafkaMessage>,
}

impl KafkaBatch {
    fn from_value(value: Value) -> Result<Self, String> {
        let Value::Object(mut event) = value else {
            return Err("a Kafka event must be a JSON object".into());
        };
        let Some(Value::Object(partitions)) = event.remove("records") else {
            return Err("a Kafka event needs a `records` object of topic-partitions".into());
        };
        // Sorted by topic-partition, whatever order the JSON had: the
        // partitions are independent, and a fixed order makes reports
        // reproducible.
        let partitions: BTreeMap<String, Value> = partitions.into_iter().collect();
        let mut records = Vec::new();
        for (n, (topic_partition, list)) in partitions.iter().enumerate() {
            // Positions, never values: records carry customer data.
            let Value::Array(list) = list else {
                return Err(format!("topic-partition {n}: must be an array of records"));
            };
            let mut group = Vec::with_capacity(list.len());
            for (i, record) in list.iter().enumerate() {
                let Value::Object(fields) = record else {
                    return Err(format!(
                        "topic-partition {n}, record {i}: must be a JSON object"
                    ));
                };
                let message = KafkaMessage::from_object(topic_partition, fields)
                    .map_err(|why| format!("topic-partition {n}, record {i}: {why}"))?;
                group.push(message);
            }
            // Lambda sends a partition in offset order; sorted (stably)
            // all the same, since the partition-stop rule depends on it.
            group.sort_by_key(|m| m.offset);
            records.extend(group);
        }
        Ok(KafkaBatch { records })
    }
}

impl<'de> Deserialize<'de> for KafkaBatch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        // Read as a JSON value first (which fails only on bad JSON), then
        // checked here: serde's own type errors quote the value they met.
        let value = Value::deserialize(deserializer)?;
        KafkaBatch::from_value(value).map_err(D::Error::custom)
    }
}

impl StrictInput for KafkaBatch {
    type Event = KafkaBatch;
    fn into_inner(self) -> KafkaBatch {
        self
    }
}

impl BatchEvent for KafkaBatch {
    type Record = KafkaMessage;
    type Input = KafkaBatch;
    type Response = KafkaBatchResponse;

    fn records(&self) -> &[KafkaMessage] {
        &self.records
    }

    /// Every record the batch did not acknowledge, by topic-partition and
    /// offset; Lambda resumes each partition listed at its lowest offset
    /// listed.
    fn response(failed: Vec<String>) -> KafkaBatchResponse {
        let batch_item_failures = failed
            .into_iter()
            .map(|id| {
                let item_identifier = match id.rsplit_once(ID_SEPARATOR) {
                    Some((partition, offset)) => match offset.parse::<i64>() {
                        Ok(offset) if offset >= 0 => KafkaItemIdentifier {
                            partition: partition.to_owned(),
                            offset,
                        },
                        _ => unnamed(id),
                    },
                    None => unnamed(id),
                };
                KafkaBatchItemFailure { item_identifier }
            })
            .collect();
        KafkaBatchResponse {
            batch_item_failures,
        }
    }
}

/// An id that is not one of [`KafkaMessage`]'s (the engine only reports
/// those): answered with an offset no record has, which Lambda takes as an
/// error and retries the whole batch, rather than dropped, which would
/// acknowledge a record that failed.
fn unnamed(id: String) -> KafkaItemIdentifier {
    KafkaItemIdentifier {
        partition: id,
        offset: -1,
    }
}

/// The partial-batch response of a Kafka event source mapping:
/// `{"batchItemFailures": [{"itemIdentifier": {"partition": "mytopic-0",
/// "offset": 15}}]}` (the module's documentation gives the sources).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaBatchResponse {
    /// The records to retry.
    pub batch_item_failures: Vec<KafkaBatchItemFailure>,
}

/// One record to retry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaBatchItemFailure {
    /// Which record.
    pub item_identifier: KafkaItemIdentifier,
}

/// A Kafka record as the answer names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaItemIdentifier {
    /// The topic-partition key of the event's `records` object
    /// (`"mytopic-0"`).
    pub partition: String,
    /// The record's offset.
    pub offset: i64,
}

/// Kafka events in the shape AWS documents for Lambda (the MSK and
/// self-managed Apache Kafka "Example event"), read strictly.
#[cfg(test)]
mod kafka_tests {
    use serde_json::json;

    use super::*;

    /// One record as Lambda sends it: "mytopic", partition `p`, offset
    /// `offset`, value the base64 of `value`.
    fn record(p: u32, offset: u64, value: &str) -> Value {
        json!({
            "topic": "mytopic",
            "partition": p,
            "offset": offset,
            "timestamp": 1545084650987_u64,
            "timestampType": "CREATE_TIME",
            "key": STANDARD.encode("recordKey"),
            "value": STANDARD.encode(value),
            "headers": [{"headerKey": [104, 101, 97, 100, 101, 114, 86, 97, 108, 117, 101]}]
        })
    }

    fn event(records: Value) -> Value {
        json!({
            "eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/vpc-2priv-2pub/751d2973-a626-431c-9d4e-d7975eb44dd7-2",
            "bootstrapServers": "b-2.demo-cluster-1.a1bcde.c1.kafka.us-east-1.amazonaws.com:9092",
            "records": records
        })
    }

    fn read(event: Value) -> Result<KafkaBatch, serde_json::Error> {
        serde_json::from_value(event)
    }

    #[test]
    fn a_real_kafka_event_reads_every_field() {
        // AWS's sample record, a second partition beside it, each listed
        // out of offset order to show the batch's order is the offsets'.
        let batch = read(event(json!({
            "mytopic-0": [record(0, 16, "{\"b\":2}"), record(0, 15, "{\"a\":1}")],
            "mytopic-1": [record(1, 3, "x")],
        })))
        .expect("reads");
        let ids: Vec<_> = batch.records.iter().map(|r| r.id().unwrap()).collect();
        assert_eq!(ids, ["mytopic-0@15", "mytopic-0@16", "mytopic-1@3"]);
        let first = &batch.records[0];
        assert_eq!(first.topic(), "mytopic");
        assert_eq!(first.partition(), 0);
        assert_eq!(first.offset(), 15);
        assert_eq!(first.topic_partition(), "mytopic-0");
        assert_eq!(first.timestamp_ms(), 1545084650987);
        assert_eq!(first.timestamp_type(), Some("CREATE_TIME"));
        assert_eq!(first.key(), Some(&b"recordKey"[..]));
        assert_eq!(first.value(), Ok(&b"{\"a\":1}"[..]));
        assert_eq!(first.payload_str(), Ok("{\"a\":1}"));
        assert_eq!(first.header("headerKey"), Some(&b"headerValue"[..]));
        assert_eq!(first.headers().len(), 1);
        assert_eq!(first.source_group().as_deref(), Some("mytopic-0"));
        assert_eq!(
            batch.records[2].source_group().as_deref(),
            Some("mytopic-1")
        );
        assert!(KafkaMessage::strict_order(&batch.records));
        assert_eq!(first.redelivery(), None);
    }

    #[test]
    fn a_missing_or_null_key_is_none_and_headers_may_be_empty() {
        let mut no_key = record(0, 1, "v");
        no_key.as_object_mut().map(|r| r.remove("key"));
        let mut null_key = record(0, 2, "v");
        null_key["key"] = Value::Null;
        null_key["headers"] = json!([]);
        let batch = read(event(json!({ "mytopic-0": [no_key, null_key] }))).expect("reads");
        for r in &batch.records {
            assert_eq!(r.key(), None);
            assert_eq!(r.value(), Ok(&b"v"[..]));
        }
        assert!(batch.records[1].headers().is_empty());
    }

    /// Each field that only its record depends on fails that record, with
    /// its topic-partition and offset kept (it is still answered), and
    /// never with its value in the error.
    #[test]
    fn each_malformed_field_fails_its_record_only() {
        let bad = |field: &str, v: Value| {
            let mut r = record(0, 0, "ok");
            r[field] = v;
            r
        };
        let cases: Vec<(Value, ParseError)> = vec![
            (
                bad("value", json!("secret-value!")),
                invalid("value", "must be base64"),
            ),
            (
                bad("value", json!(7)),
                ParseError::WrongType {
                    path: "value".into(),
                    expected: "a base64 string",
                },
            ),
            (bad("value", Value::Null), ParseError::MissingBody),
            (
                bad("key", json!("secret-value!")),
                invalid("key", "must be base64"),
            ),
            (
                bad("key", json!(["secret-value"])),
                invalid("key", "must be base64"),
            ),
            (
                bad("headers", json!([{"h": [104, 300]}])),
                invalid("headers", "must be a list of header names to byte arrays"),
            ),
            (
                bad("headers", json!([{"h": "secret-value"}])),
                invalid("headers", "must be a list of header names to byte arrays"),
            ),
            (
                bad("headers", json!({"h": [1]})),
                invalid("headers", "must be a list of header names to byte arrays"),
            ),
            (
                bad("timestamp", json!("secret-value")),
                invalid("timestamp", "must be epoch milliseconds"),
            ),
            (
                bad("timestamp", json!(-5)),
                invalid("timestamp", "must be epoch milliseconds"),
            ),
            (
                bad("timestampType", json!(["secret-value"])),
                ParseError::WrongType {
                    path: "timestampType".into(),
                    expected: "a string",
                },
            ),
        ];
        for (n, (mut bad_record, expected)) in cases.into_iter().enumerate() {
            bad_record["offset"] = json!(10);
            let batch = read(event(json!({
                "mytopic-0": [record(0, 9, "before"), bad_record, record(0, 11, "after")],
            })))
            .unwrap_or_else(|e| panic!("case {n}: the event still reads: {e}"));
            assert_eq!(batch.records.len(), 3, "case {n}");
            let r = &batch.records[1];
            let e = r.value().expect_err("that record's error");
            assert_eq!(e, expected, "case {n}");
            assert!(!e.to_string().contains("secret"), "case {n}: {e}");
            assert_eq!(r.id(), Some("mytopic-0@10"), "case {n}: still named");
            assert_eq!(batch.records[0].value(), Ok(&b"before"[..]), "case {n}");
            assert_eq!(batch.records[2].value(), Ok(&b"after"[..]), "case {n}");
        }
        // A header byte above 127 is a byte like any other (the reason
        // aws_lambda_events' `KafkaEvent`, which reads `i8`, is not used).
        let batch = read(event(json!({
            "mytopic-0": [bad("headers", json!([{"h": [195, 169]}]))]
        })))
        .expect("reads");
        assert_eq!(batch.records[0].header("h"), Some("é".as_bytes()));
    }

    #[test]
    fn an_event_of_the_wrong_shape_fails_the_invocation_without_echoing_values() {
        let refused = |e: Value| read(e).expect_err("must refuse").to_string();
        assert!(refused(json!("secret-value")).contains("must be a JSON object"));
        assert!(refused(json!([])).contains("must be a JSON object"));
        assert!(refused(json!({})).contains("`records` object"));
        assert!(refused(json!({"Records": []})).contains("`records` object"));
        assert!(refused(event(json!(["secret-value"]))).contains("`records` object"));
        let e = refused(event(json!({"mytopic-0": {"secret": "secret-value"}})));
        assert!(e.contains("topic-partition 0: must be an array"), "{e}");
        let e = refused(event(
            json!({"mytopic-0": [record(0, 1, "v"), "secret-value"]}),
        ));
        assert!(e.contains("topic-partition 0, record 1"), "{e}");
        // The place of a record is the event's shape: without it, or with
        // one that disagrees with its key, the answer could not name it.
        for (field, v) in [
            ("topic", json!(["secret-value"])),
            ("topic", json!("")),
            ("partition", json!("secret-value")),
            ("partition", json!(-1)),
            ("partition", json!(1)),
            ("offset", json!("secret-value")),
            ("offset", json!(-1)),
            ("offset", json!(1.5)),
        ] {
            let mut r = record(0, 1, "v");
            r[field] = v;
            let e = refused(event(json!({"mytopic-0": [r]})));
            assert!(e.contains("topic-partition 0, record 0"), "{field}: {e}");
            assert!(!e.contains("secret"), "{field}: {e}");
        }
        let mut missing = record(0, 1, "v");
        missing.as_object_mut().map(|r| r.remove("offset"));
        assert!(refused(event(json!({"mytopic-0": [missing]}))).contains("`offset`"));
    }

    #[test]
    fn an_empty_batch_reads_and_answers_nothing() {
        let batch = read(event(json!({}))).expect("empty batch");
        assert!(batch.records().is_empty());
        let answer = serde_json::to_value(KafkaBatch::response(vec![])).expect("JSON");
        assert_eq!(answer, json!({"batchItemFailures": []}));
    }

    /// The answer names a record by its topic-partition key and offset, as
    /// an object (not a string, as SQS and the streams have it).
    #[test]
    fn the_answer_names_topic_partition_and_offset() {
        let batch = read(event(json!({
            "my.topic-name-12": [{
                "topic": "my.topic-name", "partition": 12, "offset": 9007199254740993_u64,
                "timestamp": 1, "value": "", "headers": []
            }]
        })))
        .expect("reads");
        let ids: Vec<String> = batch
            .records
            .iter()
            .map(|r| r.id().unwrap().to_owned())
            .collect();
        let answer = serde_json::to_value(KafkaBatch::response(ids)).expect("JSON");
        assert_eq!(
            answer,
            json!({"batchItemFailures": [
                {"itemIdentifier": {"partition": "my.topic-name-12", "offset": 9007199254740993_u64}}
            ]})
        );
        // An id that is not a Kafka record's still fails, never dropped.
        let answer = KafkaBatch::response(vec!["odd".into()]);
        assert_eq!(answer.batch_item_failures[0].item_identifier.offset, -1);
    }

    /// A handler of text values that fails on "fail" with a store error
    /// that is not retried (TableNotFound).
    struct Texts;

    #[derive(Debug, Clone)]
    struct Seen;
    impl std::fmt::Display for Seen {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Seen")
        }
    }
    impl crate::Verdict for Seen {
        const LABELS: &'static [&'static str] = &["Seen"];
        fn label(&self) -> &'static str {
            "Seen"
        }
        fn acknowledge(&self) -> bool {
            true
        }
    }

    impl crate::Handler<KafkaMessage> for Texts {
        type Event = String;
        type Verdict = Seen;
        type Failure = crate::StoreError;

        fn parse(&self, record: &KafkaMessage) -> Result<String, ParseError> {
            Ok(record.payload_str()?.to_owned())
        }
        fn key(&self, text: &String) -> String {
            text.clone()
        }
        fn rank(&self, _: &String) -> u64 {
            0
        }
        fn span(&self, _: &str, _: Option<&String>) -> tracing::Span {
            tracing::Span::none()
        }
        async fn apply(
            &self,
            text: &String,
            _: &crate::BatchContext,
        ) -> Result<Seen, crate::StoreError> {
            if text == "fail" {
                Err(crate::StoreError::TableNotFound)
            } else {
                Ok(Seen)
            }
        }
    }

    /// A partition stops at its first failure: its later records are
    /// answered too (held back, never run), as Kinesis does per shard;
    /// another partition goes on; a record that does not decode is that
    /// partition's first failure.
    #[tokio::test]
    async fn a_partition_stops_at_its_first_failure_and_the_answer_lists_the_rest() {
        let mut bad = record(1, 2, "x");
        bad["value"] = json!("%%");
        let batch = read(event(json!({
            "mytopic-0": [record(0, 1, "a"), record(0, 2, "fail"), record(0, 3, "b")],
            "mytopic-1": [record(1, 1, "c"), bad, record(1, 3, "d")],
            "mytopic-2": [record(2, 7, "e")],
        })))
        .expect("reads");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        let report = crate::engine::process(
            &Texts,
            crate::BatchSettings::default(),
            batch.records(),
            deadline,
        )
        .await;
        assert_eq!(report.counts().get("Seen"), 3, "a, c and e only");
        let failed = report.failures().expect("every record is named");
        let answer = serde_json::to_value(KafkaBatch::response(failed)).expect("JSON");
        let item = |p: &str, o: u64| json!({"itemIdentifier": {"partition": p, "offset": o}});
        assert_eq!(
            answer,
            json!({"batchItemFailures": [
                item("mytopic-0", 2), item("mytopic-0", 3),
                item("mytopic-1", 2), item("mytopic-1", 3),
            ]})
        );
    }
}
