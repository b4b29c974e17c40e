//! The record sources: SQS and DynamoDB stream events, what the batch needs
//! to know of their records ([`BatchRecord`]) and of the events and
//! responses ([`BatchEvent`]), and how an event is read from the Runtime
//! API ([`StrictInput`]).
//!
//! `aws_lambda_events::SqsEvent` derives `Deserialize`, and serde's derived
//! struct deserializer also accepts a JSON *array* of the fields in
//! declaration order. So `{"Records": [["abc"]]}` reads as one record whose
//! `messageId` is `"abc"` and whose body is missing. The handler would then
//! report a batch item failure for an id SQS never issued, which the event
//! source mapping cannot match to a message. Lambda never sends that shape;
//! [`SqsInput`] refuses it, so the invocation fails with a clear error and
//! the whole batch goes back to the queue (nothing is acknowledged).

#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
use std::fmt;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
use std::marker::PhantomData;

#[cfg(feature = "dynamodb-streams")]
use aws_lambda_events::event::dynamodb::{Event as StreamEvent, EventRecord};
#[cfg(feature = "sqs")]
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
#[cfg(feature = "dynamodb-streams")]
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
use serde::de::value::MapAccessDeserializer;
#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
use serde::de::{MapAccess, Visitor};
#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
use serde::{Deserialize, Deserializer};

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
#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
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
#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
struct Object<T>(T);

#[cfg(any(feature = "sqs", feature = "dynamodb-streams"))]
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
