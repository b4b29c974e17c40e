//! Kinesis Data Streams (feature `kinesis`): records whose data is
//! decoded per record, grouped by partition key, strictly ordered, answered
//! by sequence number.

use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::event::streams::KinesisEventResponse;
use serde::{Deserialize, Deserializer};

use super::{BatchEvent, BatchRecord, MessageRecord, StrictInput, records};
use crate::wire::ParseError;

/// One Kinesis Data Streams record as the batch sees it: Lambda's
/// [`KinesisEventRecord`], with its `data` decoded per record.
///
/// `aws_lambda_events` decodes `data` while reading the event, so one
/// record whose `data` is not base64 would fail the whole event, and with
/// it the shard, with no record named. Read through [`KinesisBatch`],
/// such a record is kept with its sequence number and partition key, and
/// [`KinesisMessage::data`] says why it has no data: the handler's parse
/// fails, the record is `Invalid`, and its partition key's later records
/// wait behind it (strict order), as for any record that does not parse.
/// Lambda resumes the shard at the lowest sequence number answered, so the
/// records after it, of every key, come back with the retry as duplicates
/// until the record is acknowledged or Lambda's retry or age limit ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisMessage {
    /// Lambda's record; its `kinesis.data` is empty when `unreadable` says
    /// why.
    record: KinesisEventRecord,
    /// Why the record's data could not be read, if it could not.
    unreadable: Option<ParseError>,
}

impl KinesisMessage {
    /// Lambda's record as read (its `kinesis.data` empty when
    /// [`data`](Self::data) is an error).
    pub fn record(&self) -> &KinesisEventRecord {
        &self.record
    }

    /// The record's data, decoded from base64; an error when Lambda's
    /// event carried none, or none that decodes.
    pub fn data(&self) -> Result<&[u8], ParseError> {
        match &self.unreadable {
            Some(e) => Err(e.clone()),
            None => Ok(&self.record.kinesis.data),
        }
    }

    /// The sequence number (`kinesis.sequenceNumber`), unless absent or
    /// blank: the id the partial-batch answer names the record by.
    pub fn sequence_number(&self) -> Option<&str> {
        Some(self.record.kinesis.sequence_number.as_str()).filter(|s| !s.trim().is_empty())
    }

    /// The partition key (`kinesis.partitionKey`), unless absent or empty.
    pub fn partition_key(&self) -> Option<&str> {
        Some(self.record.kinesis.partition_key.as_str()).filter(|k| !k.is_empty())
    }

    /// Read one record from the JSON object Lambda sent: `data` decoded
    /// here, so that data that is not base64 fails this record only.
    /// Everything else is read as `aws_lambda_events` reads it; a record
    /// without the shape Lambda sends (no `kinesis` object, a field of the
    /// wrong type) is an error, which fails the invocation.
    fn from_object(
        mut fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, &'static str> {
        use aws_lambda_events::encodings::Base64Data;
        use serde_json::Value;

        let Some(Value::Object(kinesis)) = fields.get_mut("kinesis") else {
            return Err("a Kinesis record needs a `kinesis` object");
        };
        // Taken out, and an empty string left in its place, so the rest of
        // the record reads whatever the data holds.
        let data = kinesis.insert("data".into(), Value::String(String::new()));
        // Taken out too, and read here: aws_lambda_events' reader (1.2)
        // multiplies the fraction's digits as an integer, which overflows
        // on a long one (`0.123456789012345`): a panic in a debug build, a
        // wrong time in release, and wrong for any fraction that is not
        // three digits. A time that is not epoch seconds fails this record.
        let arrival = kinesis.insert(ARRIVAL.into(), Value::from(0));
        let mut record = KinesisEventRecord::deserialize(Value::Object(fields))
            .map_err(|_| "a Kinesis record's fields do not have the types Lambda sends")?;
        let arrived = match arrival.as_ref().and_then(arrival_time) {
            Some(at) => {
                record.kinesis.approximate_arrival_timestamp.0 = at;
                None
            }
            None => Some(ParseError::InvalidValue {
                path: format!("kinesis.{ARRIVAL}"),
                reason: "must be epoch seconds",
            }),
        };
        let unreadable = match data {
            None => Some(ParseError::MissingBody),
            Some(Value::String(text)) => match Base64Data::deserialize(Value::String(text)) {
                Ok(bytes) => {
                    record.kinesis.data = bytes;
                    None
                }
                Err(_) => Some(ParseError::InvalidValue {
                    path: "kinesis.data".into(),
                    reason: "must be base64",
                }),
            },
            Some(_) => Some(ParseError::WrongType {
                path: "kinesis.data".into(),
                expected: "a base64 string",
            }),
        };
        Ok(KinesisMessage {
            record,
            unreadable: unreadable.or(arrived),
        })
    }
}

/// The field of a Kinesis record's arrival time.
const ARRIVAL: &str = "approximateArrivalTimestamp";

/// A Kinesis arrival time: epoch seconds with a fraction, as a number (or
/// a numeric string, as aws_lambda_events also reads), to the nanosecond
/// an `f64` holds; `None` for anything else, or a time out of range.
fn arrival_time(value: &serde_json::Value) -> Option<chrono::DateTime<chrono::Utc>> {
    let text = match value {
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.trim().to_owned(),
        _ => return None,
    };
    // Read from the decimal text, so that `1545084650.987` is 987 ms
    // exactly (an f64 holds it as .98699998...); digits past the
    // nanosecond are dropped.
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        // A sign, an exponent (1.5e9), anything else: not Lambda's form.
        return None;
    }
    let seconds: i64 = whole.parse().ok()?;
    let mut nanos: u32 = 0;
    for i in 0..9 {
        let digit = fraction.as_bytes().get(i).map_or(0, |b| b - b'0');
        nanos = nanos * 10 + u32::from(digit);
    }
    chrono::DateTime::from_timestamp(seconds, nanos)
}

/// A record whose data `aws_lambda_events` has already decoded.
impl From<KinesisEventRecord> for KinesisMessage {
    fn from(record: KinesisEventRecord) -> Self {
        KinesisMessage {
            record,
            unreadable: None,
        }
    }
}

impl BatchRecord for KinesisMessage {
    type Event = KinesisBatch;

    /// Lambda checkpoints the shard below the lowest sequence number an
    /// answer lists and retries from it. A blank one is no id: a failed
    /// record without one fails the invocation
    /// ([`BatchError::Unidentifiable`](crate::BatchError::Unidentifiable)),
    /// never an empty `itemIdentifier`.
    fn id(&self) -> Option<&str> {
        self.sequence_number()
    }

    /// The partition key, without the shard: a batch comes from one shard
    /// (Lambda reads each shard on its own), so within a batch the key
    /// alone is what Kinesis orders by, and what Lambda keeps in order
    /// when a `ParallelizationFactor` spreads one shard's keys over
    /// several invocations.
    fn source_group(&self) -> Option<String> {
        self.partition_key().map(str::to_owned)
    }

    /// A stream is ordered per partition key: keep it.
    fn strict_order(_records: &[Self]) -> bool {
        true
    }
}

impl MessageRecord for KinesisMessage {
    /// The decoded data.
    fn payload(&self) -> Result<&[u8], ParseError> {
        self.data()
    }
}

/// A Kinesis event, read strictly: the event and each record must be JSON
/// objects, and each record's `data` is decoded on its own
/// ([`KinesisMessage`]). Its answer is a [`KinesisEventResponse`] listing
/// records by sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KinesisBatch {
    /// The records, in the shard's order.
    pub records: Vec<KinesisMessage>,
}

impl From<KinesisEvent> for KinesisBatch {
    fn from(event: KinesisEvent) -> Self {
        KinesisBatch {
            records: event
                .records
                .into_iter()
                .map(KinesisMessage::from)
                .collect(),
        }
    }
}

impl<'de> Deserialize<'de> for KinesisBatch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let objects = records::<D, serde_json::Map<String, serde_json::Value>>(deserializer)?;
        let records = objects
            .into_iter()
            .enumerate()
            .map(|(i, fields)| {
                // The index, never a value: records carry customer data.
                KinesisMessage::from_object(fields)
                    .map_err(|why| D::Error::custom(format_args!("record {i}: {why}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(KinesisBatch { records })
    }
}

impl StrictInput for KinesisBatch {
    type Event = KinesisBatch;
    fn into_inner(self) -> KinesisBatch {
        self
    }
}

impl BatchEvent for KinesisBatch {
    type Record = KinesisMessage;
    type Input = KinesisBatch;
    type Response = KinesisEventResponse;

    fn records(&self) -> &[KinesisMessage] {
        &self.records
    }

    /// Lambda retries the shard from the lowest sequence number listed:
    /// every record the batch did not acknowledge is listed, so the lowest
    /// of them is, and no record at or after it is checkpointed.
    fn response(failed: Vec<String>) -> KinesisEventResponse {
        let mut response = KinesisEventResponse::default();
        for id in failed {
            response.add_failure(id);
        }
        response
    }
}

/// Kinesis events in the shape AWS documents for Lambda
/// (docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html, "Example
/// event"), read strictly.
#[cfg(test)]
mod kinesis_tests {
    use super::*;

    const SEQ_1: &str = "49590338271490256608559692538361571095921575989136588898";
    const SEQ_2: &str = "49590338271490256608559692540925702759324208523137515618";

    /// One record as Lambda sends it; `data` is put in as given (base64 or
    /// not), `sequence` left out when `None`.
    fn record_json(sequence: Option<&str>, key: &str, data: &str) -> serde_json::Value {
        let mut kinesis = serde_json::json!({
            "kinesisSchemaVersion": "1.0",
            "partitionKey": key,
            "data": data,
            "approximateArrivalTimestamp": 1545084650.987
        });
        if let Some(seq) = sequence {
            kinesis["sequenceNumber"] = seq.into();
        }
        serde_json::json!({
            "kinesis": kinesis,
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": format!("shardId-000000000006:{}", sequence.unwrap_or("")),
            "eventName": "aws:kinesis:record",
            "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda-role",
            "awsRegion": "us-east-2",
            "eventSourceARN": "arn:aws:kinesis:us-east-2:123456789012:stream/lambda-stream"
        })
    }

    fn read(records: Vec<serde_json::Value>) -> Result<KinesisBatch, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "Records": records }))
    }

    #[test]
    fn a_real_kinesis_event_reads_as_kinesis_event_does() {
        // AWS's sample: "Hello, this is a test." and "Hello, this is a test 123."
        let json = serde_json::json!({ "Records": [
            record_json(Some(SEQ_1), "1", "SGVsbG8sIHRoaXMgaXMgYSB0ZXN0Lg=="),
            record_json(Some(SEQ_2), "1", "SGVsbG8sIHRoaXMgaXMgYSB0ZXN0IDEyMy4="),
        ]});
        let strict: KinesisBatch = serde_json::from_value(json.clone()).expect("strict read");
        let plain: KinesisEvent = serde_json::from_value(json).expect("plain read");
        assert_eq!(strict, KinesisBatch::from(plain));
        let first = &strict.records[0];
        assert_eq!(first.data(), Ok(&b"Hello, this is a test."[..]));
        assert_eq!(first.payload_str(), Ok("Hello, this is a test."));
        assert_eq!(first.id(), Some(SEQ_1));
        assert_eq!(first.source_group().as_deref(), Some("1"));
        assert_eq!(strict.records[1].id(), Some(SEQ_2));
        assert!(KinesisMessage::strict_order(&strict.records));
        assert_eq!(first.redelivery(), None);
    }

    #[test]
    fn data_that_is_not_base64_fails_its_record_only() {
        let batch = read(vec![
            record_json(Some(SEQ_1), "a", "not base64!"),
            record_json(Some(SEQ_2), "a", "b2s="),
        ])
        .expect("the event still reads");
        let bad = &batch.records[0];
        assert_eq!(
            bad.data(),
            Err(ParseError::InvalidValue {
                path: "kinesis.data".into(),
                reason: "must be base64",
            })
        );
        assert!(bad.payload_str().is_err());
        // Still named and grouped: its answer and its key's order need both.
        assert_eq!(bad.id(), Some(SEQ_1));
        assert_eq!(bad.source_group().as_deref(), Some("a"));
        assert_eq!(batch.records[1].data(), Ok(&b"ok"[..]));

        // No data, or data of another type: the same, for that record.
        let mut missing = record_json(Some(SEQ_1), "a", "");
        missing["kinesis"].as_object_mut().map(|k| k.remove("data"));
        let mut number = record_json(Some(SEQ_2), "a", "");
        number["kinesis"]["data"] = 7.into();
        let batch = read(vec![missing, number]).expect("the event still reads");
        assert_eq!(batch.records[0].data(), Err(ParseError::MissingBody));
        assert!(matches!(
            batch.records[1].data(),
            Err(ParseError::WrongType { .. })
        ));
    }

    /// aws_lambda_events' own reader of the arrival time multiplies the
    /// fraction's digits as an integer: `0.123456789012345` overflowed it
    /// (a panic in this debug build). Read here instead, exactly; one that
    /// is not epoch seconds fails its record only, without its value.
    #[test]
    fn an_arrival_time_is_read_exactly_and_a_bad_one_fails_its_record_only() {
        let at = |v: serde_json::Value| {
            let mut r = record_json(Some(SEQ_1), "a", "b2s=");
            r["kinesis"]["approximateArrivalTimestamp"] = v;
            r
        };
        let batch = read(vec![
            at(serde_json::json!(0.123456789012345)),
            at(serde_json::json!(1545084650.987)),
            at(serde_json::json!(1545084650.5)),
            at(serde_json::json!(1545084650)),
            at(serde_json::json!("1545084650.25")),
        ])
        .expect("the event reads, without a panic");
        let nanos: Vec<(i64, u32)> = batch
            .records
            .iter()
            .map(|r| {
                assert_eq!(r.data(), Ok(&b"ok"[..]));
                let t = r.record().kinesis.approximate_arrival_timestamp.0;
                (t.timestamp(), t.timestamp_subsec_nanos())
            })
            .collect();
        assert_eq!(
            nanos,
            [
                (0, 123_456_789),
                (1545084650, 987_000_000),
                (1545084650, 500_000_000),
                (1545084650, 0),
                (1545084650, 250_000_000),
            ]
        );
        let mut missing = record_json(Some(SEQ_2), "a", "b2s=");
        missing["kinesis"]
            .as_object_mut()
            .map(|k| k.remove("approximateArrivalTimestamp"));
        let bad = [
            at(serde_json::json!("secret-value")),
            at(serde_json::json!(-1.5)),
            at(serde_json::json!(1.5e300)),
            at(serde_json::json!(true)),
            missing,
        ];
        let batch = read(bad.to_vec()).expect("the event still reads");
        for r in &batch.records {
            let e = r.data().expect_err("that record's error");
            assert_eq!(
                e,
                ParseError::InvalidValue {
                    path: "kinesis.approximateArrivalTimestamp".into(),
                    reason: "must be epoch seconds",
                }
            );
            assert!(!e.to_string().contains("secret"), "{e}");
            assert!(r.id().is_some(), "still named, so it is reported");
        }
    }

    #[test]
    fn a_missing_or_blank_sequence_number_is_no_id() {
        let batch = read(vec![
            record_json(None, "a", "b2s="),
            record_json(Some("  "), "a", "b2s="),
        ])
        .expect("reads");
        for r in &batch.records {
            assert_eq!(r.id(), None);
            assert_eq!(r.data(), Ok(&b"ok"[..]));
        }
    }

    #[test]
    fn shapes_lambda_never_sends_fail_the_event_without_echoing_values() {
        let err = read(vec![serde_json::json!([SEQ_1, "a"])]).expect_err("an array record");
        assert!(err.to_string().contains("a JSON object"), "{err}");
        let mut inner_array = record_json(Some(SEQ_1), "a", "b2s=");
        inner_array["kinesis"] = serde_json::json!([SEQ_1]);
        let err = read(vec![inner_array]).expect_err("an array `kinesis`");
        assert!(err.to_string().contains("record 0"), "{err}");
        let mut bad_type = record_json(Some(SEQ_1), "a", "b2s=");
        bad_type["kinesis"]["partitionKey"] = serde_json::json!(["secret-value"]);
        let err = read(vec![record_json(Some(SEQ_2), "a", "b2s="), bad_type])
            .expect_err("a partition key that is an array");
        assert!(err.to_string().contains("record 1"), "{err}");
        assert!(!err.to_string().contains("secret-value"), "{err}");
        assert!(serde_json::from_str::<KinesisBatch>("[]").is_err());
        assert!(serde_json::from_str::<KinesisBatch>("{}").is_err());
    }

    #[test]
    fn an_empty_batch_reads_and_answers_nothing() {
        let batch = read(vec![]).expect("empty batch");
        assert!(batch.records().is_empty());
        let answer = serde_json::to_value(KinesisBatch::response(vec![])).expect("JSON");
        assert_eq!(answer, serde_json::json!({"batchItemFailures": []}));
        let answer =
            serde_json::to_value(KinesisBatch::response(vec![SEQ_2.into()])).expect("JSON");
        assert_eq!(
            answer,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": SEQ_2}]})
        );
    }

    #[test]
    fn a_payload_that_is_not_utf8_is_invalid_as_text_only() {
        let batch = read(vec![record_json(Some(SEQ_1), "a", "/w==")]).expect("reads");
        assert_eq!(batch.records[0].payload(), Ok(&[0xff_u8][..]));
        assert!(matches!(
            batch.records[0].payload_str(),
            Err(ParseError::InvalidValue { .. })
        ));
    }
}
