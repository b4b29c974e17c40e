//! The record sources: what the batch needs to know of a record
//! ([`BatchRecord`]) and of an event and its response ([`BatchEvent`]), how
//! an event is read from the Runtime API ([`StrictInput`]), and the one
//! thing a message of any source carries, its bytes ([`MessageRecord`]), so
//! one handler serves them all. Each source is a module of its own, built
//! only with its feature: `sqs` (SQS standard and FIFO), `streams`
//! (DynamoDB streams, feature `dynamodb-streams`), `kinesis`, `kafka`
//! (Amazon MSK and self-managed Apache Kafka).
//!
//! Every source's event is read strictly. `aws_lambda_events::SqsEvent`
//! derives `Deserialize`, and serde's derived struct deserializer also
//! accepts a JSON *array* of the fields in declaration order. So
//! `{"Records": [["abc"]]}` reads as one record whose `messageId` is
//! `"abc"` and whose body is missing. The handler would then report a batch
//! item failure for an id SQS never issued, which the event source mapping
//! cannot match to a message. Lambda never sends that shape; the strict
//! readers (`records`, `Object`) refuse it, so the invocation fails with
//! a clear error and the whole batch goes back to its source (nothing is
//! acknowledged).

#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use std::fmt;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use serde::de::value::MapAccessDeserializer;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use serde::de::{MapAccess, Visitor};
#[cfg(any(feature = "sqs", feature = "dynamodb-streams", feature = "kinesis"))]
use serde::{Deserialize, Deserializer};

use crate::wire::ParseError;

#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
mod kafka;
#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
mod kinesis;
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
mod sqs;
#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
mod streams;

#[cfg(feature = "kafka")]
pub use kafka::{
    KafkaBatch, KafkaBatchItemFailure, KafkaBatchResponse, KafkaItemIdentifier, KafkaMessage,
};
#[cfg(feature = "kinesis")]
pub use kinesis::{KinesisBatch, KinesisMessage};
#[cfg(feature = "sqs")]
pub use sqs::SqsInput;
#[cfg(feature = "dynamodb-streams")]
pub use streams::StreamInput;

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

/// A record that carries one message as bytes: an SQS message's body, a
/// Kinesis record's data, a Kafka record's value. A handler generic over it
/// (`impl<R: MessageRecord> Handler<R> for MyHandler`) runs unchanged on
/// either source; the engine applies each source's own
/// rules (grouping, strict order, the answer's ids).
///
/// DynamoDB stream records do not implement it: they carry an item's
/// images, not a message.
///
/// ```
/// # #[cfg(all(feature = "sqs", feature = "kinesis"))]
/// # {
/// use std::time::Duration;
///
/// use lambda_idempotency::tracing::Span;
/// use lambda_idempotency::engine::{BatchEvent, KinesisBatch, SqsEvent, process};
/// use lambda_idempotency::{
///     BatchContext, BatchSettings, Handler, MessageRecord, ParseError, SqsMessage, StoreError,
///     Verdict,
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
/// struct Names;
///
/// impl<R: MessageRecord> Handler<R> for Names {
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
/// let report = process(&Names, BatchSettings::default(), queue.records(), deadline).await;
/// assert_eq!(report.counts().get("Seen"), 1);
///
/// // On Kinesis: the data, decoded ("QWRh" is "Ada"); a record whose data
/// // is not base64 is Invalid, answered by its sequence number.
/// let stream: KinesisBatch = serde_json::from_str(r#"{"Records": [
///   {"kinesis": {"partitionKey": "p", "sequenceNumber": "1", "data": "QWRh",
///                "approximateArrivalTimestamp": 1545084650.987}},
///   {"kinesis": {"partitionKey": "q", "sequenceNumber": "2", "data": "%%",
///                "approximateArrivalTimestamp": 1545084650.987}}]}"#).unwrap();
/// let report = process(&Names, BatchSettings::default(), stream.records(), deadline).await;
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

    /// The payload as JSON, read into any `T: Deserialize` as
    /// [`wire::from_json`](crate::wire::from_json) reads it: within
    /// [`MAX_BODY_BYTES`](crate::wire::MAX_BODY_BYTES), an unknown `type`
    /// its own error, and errors that name the field at fault but never
    /// quote a value. What a handler's [`parse`](crate::Handler::parse)
    /// is, for most events: `record.json()`.
    fn json<T: DeserializeOwned>(&self) -> Result<T, ParseError> {
        crate::wire::from_json(Some(self.payload_str()?))
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
