//! DynamoDB streams (feature `dynamodb-streams`): a stream record's
//! sequence number and item key, the partial-batch response, the strict
//! reader.

use aws_lambda_events::event::dynamodb::{Event as StreamEvent, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use serde::{Deserialize, Deserializer};

use super::{BatchEvent, BatchRecord, StrictInput, records};

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

/// A DynamoDB stream event read as strictly: the event and each record
/// must be JSON objects (a record read from an array would carry a
/// SequenceNumber nobody issued).
#[derive(Debug, Clone, Default)]
pub struct StreamInput(pub StreamEvent);

impl StrictInput for StreamInput {
    type Event = StreamEvent;
    fn into_inner(self) -> StreamEvent {
        self.0
    }
}

impl<'de> Deserialize<'de> for StreamInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut event = StreamEvent::default();
        event.records = records::<D, EventRecord>(deserializer)?;
        Ok(StreamInput(event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
