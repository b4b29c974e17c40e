//! The record sources: SQS, DynamoDB stream and Kinesis events, what the
//! batch needs to know of their records ([`BatchRecord`]) and of the events
//! and responses ([`BatchEvent`]), how an event is read from the Runtime
//! API ([`StrictInput`]), and the one thing an SQS message and a Kinesis
//! record share, a message's bytes ([`MessageRecord`]), so one handler
//! serves both.
//!
//! `aws_lambda_events::SqsEvent` derives `Deserialize`, and serde's derived
//! struct deserializer also accepts a JSON *array* of the fields in
//! declaration order. So `{"Records": [["abc"]]}` reads as one record whose
//! `messageId` is `"abc"` and whose body is missing. The handler would then
//! report a batch item failure for an id SQS never issued, which the event
//! source mapping cannot match to a message. Lambda never sends that shape;
//! [`SqsInput`] refuses it, so the invocation fails with a clear error and
//! the whole batch goes back to the queue (nothing is acknowledged).

#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use std::fmt;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use std::marker::PhantomData;

#[cfg(feature = "dynamodb-streams")]
use aws_lambda_events::event::dynamodb::{Event as StreamEvent, EventRecord};
#[cfg(feature = "kinesis")]
use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
#[cfg(feature = "sqs")]
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
#[cfg(feature = "kinesis")]
use aws_lambda_events::event::streams::KinesisEventResponse;
#[cfg(feature = "dynamodb-streams")]
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use serde::de::value::MapAccessDeserializer;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use serde::de::{MapAccess, Visitor};
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use serde::{Deserialize, Deserializer};

use crate::wire::ParseError;

/// A Lambda event as read from the Runtime API, and the event it carries.
pub trait StrictInput: DeserializeOwned + Send {
    /// The event it carries.
    type Event;
    /// Unwrap the event.
    fn into_inner(self) -> Self::Event;
}

/// What SQS needs to change one message's visibility, read from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redeliverable<'a> {
    /// The queue the message came from (`eventSourceARN`).
    pub queue_arn: &'a str,
    /// This receive's handle.
    pub receipt_handle: &'a str,
    /// `ApproximateReceiveCount` (1 on the first receive).
    pub receive_count: u32,
}

/// A record of a batch as Lambda delivers it.
pub trait BatchRecord: Sync {
    /// The event that carries records of this kind.
    type Event: BatchEvent<Record = Self>;
    /// The id Lambda expects in `batchItemFailures`.
    fn id(&self) -> Option<&str>;
    /// The group the source itself orders by (a FIFO MessageGroupId, a
    /// stream record's item key), if any. Known even when the record does
    /// not parse, so a bad record still holds its group's later records
    /// back where the order is strict.
    fn source_group(&self) -> Option<String>;
    /// Must this batch keep arrival order within each group, and hold a
    /// group's later records back once one is not acknowledged?
    fn strict_order(records: &[Self]) -> bool
    where
        Self: Sized;
    /// Where the record came from and how to make it visible again sooner
    /// or later (the `redelivery` module, feature `sqs`); `None` for
    /// sources that retry by themselves (streams).
    fn redelivery(&self) -> Option<Redeliverable<'_>> {
        None
    }
    /// How often the source has handed this record out, this time included
    /// (SQS's `ApproximateReceiveCount`); `None` where the source does not
    /// say, or says something unreadable.
    fn receive_count(&self) -> Option<u32> {
        None
    }
}

#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
impl BatchRecord for SqsMessage {
    type Event = SqsEvent;

    fn id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    fn source_group(&self) -> Option<String> {
        self.attributes.get("MessageGroupId").cloned()
    }

    /// FIFO queues (Lambda sends one queue per batch); a standard queue has
    /// no order, so the handler's rank imposes the producer's.
    fn strict_order(records: &[Self]) -> bool {
        records.iter().any(|r| {
            r.event_source_arn
                .as_deref()
                .is_some_and(|arn| arn.ends_with(".fifo"))
        })
    }

    /// The receipt handle, the queue, and the receive count (an absent or
    /// unreadable count is taken as the first receive).
    fn redelivery(&self) -> Option<Redeliverable<'_>> {
        let receive_count = self.receive_count().unwrap_or(1);
        Some(Redeliverable {
            queue_arn: self.event_source_arn.as_deref()?,
            receipt_handle: self.receipt_handle.as_deref().filter(|h| !h.is_empty())?,
            receive_count,
        })
    }

    fn receive_count(&self) -> Option<u32> {
        self.attributes
            .get("ApproximateReceiveCount")
            .and_then(|n| n.parse::<u32>().ok())
    }
}

#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
impl BatchRecord for EventRecord {
    type Event = StreamEvent;

    /// Lambda retries a stream from the lowest SequenceNumber reported.
    fn id(&self) -> Option<&str> {
        self.change.sequence_number.as_deref()
    }

    /// A stream is ordered per item: the item's key attributes.
    fn source_group(&self) -> Option<String> {
        use serde_dynamo::AttributeValue as Av;
        let mut parts: Vec<String> = self
            .change
            .keys
            .iter()
            .map(|(name, v)| match v {
                Av::S(s) | Av::N(s) => format!("{name}={s}"),
                other => format!("{name}={other:?}"),
            })
            .collect();
        parts.sort();
        (!parts.is_empty()).then(|| parts.join("|"))
    }

    /// A stream is ordered per item: keep it.
    fn strict_order(_records: &[Self]) -> bool {
        true
    }
}

/// A Lambda event carrying a batch of records, and the partial-batch
/// response its source reads back.
pub trait BatchEvent: Send + Sync {
    /// One record of the batch.
    type Record: BatchRecord;
    /// How it is read from the Runtime API.
    type Input: StrictInput<Event = Self>;
    /// The partial-batch response (SQS or streams).
    type Response: Serialize + Send;
    /// The batch's records, in arrival order.
    fn records(&self) -> &[Self::Record];
    /// The response listing the records to retry (by their ids).
    fn response(failed: Vec<String>) -> Self::Response;
}

#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
impl BatchEvent for SqsEvent {
    type Record = SqsMessage;
    type Input = SqsInput;
    type Response = SqsBatchResponse;

    fn records(&self) -> &[SqsMessage] {
        &self.records
    }

    fn response(failed: Vec<String>) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for id in failed {
            response.add_failure(id);
        }
        response
    }
}

#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
impl BatchEvent for StreamEvent {
    type Record = EventRecord;
    type Input = StreamInput;
    type Response = DynamoDbEventResponse;

    fn records(&self) -> &[EventRecord] {
        &self.records
    }

    /// Lambda retries the shard from the lowest SequenceNumber listed.
    fn response(failed: Vec<String>) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        for id in failed {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(id);
            response.batch_item_failures.push(failure);
        }
        response
    }
}

/// A record that carries one message as bytes: an SQS message's body, a
/// Kinesis record's data. A handler generic over it
/// (`impl<R: MessageRecord> Handler for MyHandler<R>`, `type Record = R`)
/// runs unchanged on either source; the engine applies each source's own
/// rules (grouping, strict order, the answer's ids).
///
/// DynamoDB stream records do not implement it: they carry an item's
/// images, not a message.
///
/// ```
/// # #[cfg(all(feature = "sqs", feature = "kinesis"))]
/// # {
/// use std::marker::PhantomData;
/// use std::time::Duration;
///
/// use lambda_idempotency::tracing::Span;
/// use lambda_idempotency::{
///     BatchContext, BatchEvent, BatchSettings, Handler, KinesisBatch, KinesisMessage,
///     MessageRecord, ParseError, SqsEvent, SqsMessage, StoreError, Verdict, process,
/// };
///
/// #[derive(Debug, Clone)]
/// struct Seen;
/// # impl std::fmt::Display for Seen {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("Seen") }
/// # }
/// impl Verdict for Seen {
///     const LABELS: &'static [&'static str] = &["Seen"];
///     fn label(&self) -> &'static str { "Seen" }
///     fn acknowledge(&self) -> bool { true }
/// }
///
/// /// Written once, for any source: the payload is a name.
/// struct Names<R>(PhantomData<fn() -> R>);
///
/// impl<R: MessageRecord> Handler for Names<R> {
///     type Record = R;
///     type Event = String;
///     type Verdict = Seen;
///     type Failure = StoreError;
///
///     fn parse(&self, record: &R) -> Result<String, ParseError> {
///         Ok(record.payload_str()?.to_owned())
///     }
///     fn key(&self, name: &String) -> String { name.clone() }
///     fn rank(&self, _: &String) -> u64 { 0 }
///     fn span(&self, _: &str, _: Option<&String>) -> Span { Span::none() }
///     async fn apply(&self, _: &String, _: &BatchContext) -> Result<Seen, StoreError> {
///         Ok(Seen)
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
///
/// // On SQS: the body.
/// let mut queue = SqsEvent::default();
/// let mut message = SqsMessage::default();
/// message.message_id = Some("m1".into());
/// message.body = Some("Ada".into());
/// queue.records.push(message);
/// let names = Names::<SqsMessage>(PhantomData);
/// let report = process(&names, BatchSettings::default(), queue.records(), deadline).await;
/// assert_eq!(report.counts().get("Seen"), 1);
///
/// // On Kinesis: the data, decoded ("QWRh" is "Ada"); a record whose data
/// // is not base64 is Invalid, answered by its sequence number.
/// let stream: KinesisBatch = serde_json::from_str(r#"{"Records": [
///   {"kinesis": {"partitionKey": "p", "sequenceNumber": "1", "data": "QWRh",
///                "approximateArrivalTimestamp": 1545084650.987}},
///   {"kinesis": {"partitionKey": "q", "sequenceNumber": "2", "data": "%%",
///                "approximateArrivalTimestamp": 1545084650.987}}]}"#).unwrap();
/// let names = Names::<KinesisMessage>(PhantomData);
/// let report = process(&names, BatchSettings::default(), stream.records(), deadline).await;
/// assert_eq!(report.counts().get("Seen"), 1);
/// assert_eq!(report.counts().get("Invalid"), 1);
/// let answer = KinesisBatch::response(report.failures().unwrap());
/// assert_eq!(answer.batch_item_failures[0].item_identifier.as_deref(), Some("2"));
/// # });
/// # }
/// ```
pub trait MessageRecord: BatchRecord {
    /// The message's bytes, or why the record carries none it can read
    /// (no body; Kinesis data that is not base64).
    fn payload(&self) -> Result<&[u8], ParseError>;

    /// The payload as text, what a JSON reader such as
    /// [`parse_wrapped`](crate::wire::parse_wrapped) takes.
    fn payload_str(&self) -> Result<&str, ParseError> {
        std::str::from_utf8(self.payload()?).map_err(|_| ParseError::InvalidValue {
            path: "(body)".into(),
            reason: "must be UTF-8 text",
        })
    }
}

#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
impl MessageRecord for SqsMessage {
    /// The body (SQS bodies are text).
    fn payload(&self) -> Result<&[u8], ParseError> {
        self.body
            .as_deref()
            .map(str::as_bytes)
            .ok_or(ParseError::MissingBody)
    }

    fn payload_str(&self) -> Result<&str, ParseError> {
        self.body.as_deref().ok_or(ParseError::MissingBody)
    }
}

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
#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisMessage {
    /// Lambda's record; its `kinesis.data` is empty when `unreadable` says
    /// why.
    record: KinesisEventRecord,
    /// Why the record's data could not be read, if it could not.
    unreadable: Option<ParseError>,
}

#[cfg(feature = "kinesis")]
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
#[cfg(feature = "kinesis")]
const ARRIVAL: &str = "approximateArrivalTimestamp";

/// A Kinesis arrival time: epoch seconds with a fraction, as a number (or
/// a numeric string, as aws_lambda_events also reads), to the nanosecond
/// an `f64` holds; `None` for anything else, or a time out of range.
#[cfg(feature = "kinesis")]
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
#[cfg(feature = "kinesis")]
impl From<KinesisEventRecord> for KinesisMessage {
    fn from(record: KinesisEventRecord) -> Self {
        KinesisMessage {
            record,
            unreadable: None,
        }
    }
}

#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
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

#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
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
#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KinesisBatch {
    /// The records, in the shard's order.
    pub records: Vec<KinesisMessage>,
}

#[cfg(feature = "kinesis")]
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

#[cfg(feature = "kinesis")]
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

#[cfg(feature = "kinesis")]
impl StrictInput for KinesisBatch {
    type Event = KinesisBatch;
    fn into_inner(self) -> KinesisBatch {
        self
    }
}

#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
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

/// An [`SqsEvent`] read strictly: the event and each record must be JSON
/// objects. Everything inside a record is read exactly as `SqsEvent` reads it.
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
#[derive(Debug, Clone, Default)]
pub struct SqsInput(pub SqsEvent);

#[cfg(feature = "sqs")]
impl StrictInput for SqsInput {
    type Event = SqsEvent;
    fn into_inner(self) -> SqsEvent {
        self.0
    }
}

#[cfg(feature = "sqs")]
impl<'de> Deserialize<'de> for SqsInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `SqsEvent` is `#[non_exhaustive]`: start from its default.
        let mut event = SqsEvent::default();
        event.records = records::<D, SqsMessage>(deserializer)?;
        Ok(SqsInput(event))
    }
}

/// `{"Records": [...]}`, the event and every record read only from objects.
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
fn records<'de, D: Deserializer<'de>, R: Deserialize<'de>>(
    deserializer: D,
) -> Result<Vec<R>, D::Error> {
    #[derive(Deserialize)]
    struct Raw<R> {
        #[serde(rename = "Records")]
        records: Vec<Object<R>>,
    }
    let raw = Object::<Raw<R>>::deserialize(deserializer)?.0;
    Ok(raw.records.into_iter().map(|r| r.0).collect())
}

/// A DynamoDB stream event read as strictly: the event and each record
/// must be JSON objects (a record read from an array would carry a
/// SequenceNumber nobody issued).
#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
#[derive(Debug, Clone, Default)]
pub struct StreamInput(pub StreamEvent);

#[cfg(feature = "dynamodb-streams")]
impl StrictInput for StreamInput {
    type Event = StreamEvent;
    fn into_inner(self) -> StreamEvent {
        self.0
    }
}

#[cfg(feature = "dynamodb-streams")]
impl<'de> Deserialize<'de> for StreamInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut event = StreamEvent::default();
        event.records = records::<D, EventRecord>(deserializer)?;
        Ok(StreamInput(event))
    }
}

/// `T`, deserialized only from a map (a JSON object), never from a sequence.
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
struct Object<T>(T);

#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OnlyMaps<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for OnlyMaps<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        deserializer
            .deserialize_map(OnlyMaps(PhantomData))
            .map(Object)
    }
}

#[cfg(all(test, feature = "sqs", feature = "dynamodb-streams"))]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<SqsEvent, serde_json::Error> {
        serde_json::from_str::<SqsInput>(json).map(SqsInput::into_inner)
    }

    #[test]
    fn a_real_event_reads_as_sqs_event_does() {
        // The shape of AWS's documented sample event, two records.
        let json = r#"{"Records": [
          {"messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
           "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a",
           "body": "{\"orderId\":\"o-1\"}",
           "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183",
             "SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1545082649185"},
           "messageAttributes": {}, "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
           "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-2:123456789012:my-queue",
           "awsRegion": "us-east-2"},
          {"messageId": "2e1424d4-f796-459a-8184-9c92662be6da",
           "receiptHandle": "AQEBzWwaftRI0KuVm4tP+/7q1rGgNqicHq",
           "body": "test",
           "attributes": {"ApproximateReceiveCount": "2", "SentTimestamp": "1545082650636",
             "SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1545082650649"},
           "messageAttributes": {"Kind": {"stringValue": "test", "stringListValues": [],
             "binaryListValues": [], "dataType": "String"}},
           "md5OfBody": "098f6bcd4621d373cade4e832627b4f6",
           "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-2:123456789012:my-queue",
           "awsRegion": "us-east-2"}
        ]}"#;
        let json = json.to_owned();
        let strict = read(&json).expect("strict read");
        let plain: SqsEvent = serde_json::from_str(&json).expect("plain read");
        assert_eq!(strict, plain);
        assert!(!strict.records.is_empty());
    }

    #[test]
    fn a_record_that_is_an_array_is_refused() {
        // The derived deserializer would take "abc" as the messageId.
        let plain: SqsEvent = serde_json::from_str(r#"{"Records":[["abc"]]}"#).expect("lenient");
        assert_eq!(plain.records[0].message_id.as_deref(), Some("abc"));

        let err = read(r#"{"Records":[["abc"]]}"#).expect_err("must refuse");
        assert!(err.to_string().contains("a JSON object"), "{err}");
    }

    #[test]
    fn an_event_that_is_an_array_is_refused() {
        let err = read(r#"[[{"messageId":"m1","body":"{}"}]]"#).expect_err("must refuse");
        assert!(err.to_string().contains("a JSON object"), "{err}");
        assert!(read(r#"{"Records":[null]}"#).is_err());
        assert!(read(r#"{}"#).is_err());
    }

    #[test]
    fn stream_records_must_be_objects_too() {
        let err =
            serde_json::from_str::<StreamInput>(r#"{"Records":[["1"]]}"#).expect_err("must refuse");
        assert!(err.to_string().contains("a JSON object"), "{err}");
        let ok = serde_json::from_str::<StreamInput>(
            r#"{"Records":[{"eventID":"e","eventName":"INSERT","awsRegion":"us-east-1",
                "dynamodb":{"Keys":{"order_id":{"S":"o"}},"SequenceNumber":"1","SizeBytes":1}}]}"#,
        )
        .expect("a real-shaped record");
        assert_eq!(ok.0.records[0].change.sequence_number.as_deref(), Some("1"));
    }

    #[test]
    fn unknown_fields_and_empty_batches_are_fine() {
        let event = read(r#"{"Records":[],"extra":1}"#).expect("empty batch");
        assert!(event.records.is_empty());
        let event =
            read(r#"{"Records":[{"messageId":"m1","body":"x","future":{"a":[1]}}]}"#).expect("ok");
        assert_eq!(event.records[0].message_id.as_deref(), Some("m1"));
    }
}

/// Kinesis events in the shape AWS documents for Lambda
/// (docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html, "Example
/// event"), read strictly.
#[cfg(all(test, feature = "kinesis"))]
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

#[cfg(all(test, feature = "sqs"))]
mod message_tests {
    use super::*;

    #[test]
    fn an_sqs_body_is_the_payload() {
        let mut m = SqsMessage::default();
        assert_eq!(m.payload(), Err(ParseError::MissingBody));
        assert_eq!(m.payload_str(), Err(ParseError::MissingBody));
        m.body = Some("{\"a\":1}".into());
        assert_eq!(m.payload(), Ok(&b"{\"a\":1}"[..]));
        assert_eq!(m.payload_str(), Ok("{\"a\":1}"));
    }
}
