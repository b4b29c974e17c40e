//! SQS standard and FIFO queues (feature `sqs`): a message's id, group
//! and receive count, the partial-batch response, the strict reader.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use serde::{Deserialize, Deserializer};

use super::{BatchEvent, BatchRecord, MessageRecord, Redeliverable, StrictInput, records};
use crate::wire::ParseError;

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

/// An [`SqsEvent`] read strictly: the event and each record must be JSON
/// objects. Everything inside a record is read exactly as `SqsEvent` reads it.
#[derive(Debug, Clone, Default)]
pub struct SqsInput(pub SqsEvent);

impl StrictInput for SqsInput {
    type Event = SqsEvent;
    fn into_inner(self) -> SqsEvent {
        self.0
    }
}

impl<'de> Deserialize<'de> for SqsInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `SqsEvent` is `#[non_exhaustive]`: start from its default.
        let mut event = SqsEvent::default();
        event.records = records::<D, SqsMessage>(deserializer)?;
        Ok(SqsInput(event))
    }
}

#[cfg(test)]
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
    fn unknown_fields_and_empty_batches_are_fine() {
        let event = read(r#"{"Records":[],"extra":1}"#).expect("empty batch");
        assert!(event.records.is_empty());
        let event =
            read(r#"{"Records":[{"messageId":"m1","body":"x","future":{"a":[1]}}]}"#).expect("ok");
        assert_eq!(event.records[0].message_id.as_deref(), Some("m1"));
    }
}

#[cfg(test)]
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

    #[test]
    fn a_body_is_read_as_json_with_errors_that_never_quote_it() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        struct Points {
            customer: String,
            points: u64,
        }
        let mut m = SqsMessage::default();
        assert_eq!(m.json::<Points>(), Err(ParseError::MissingBody));
        m.body = Some(r#"{"customer": "c-1", "points": 5}"#.into());
        let points = Points {
            customer: "c-1".into(),
            points: 5,
        };
        assert_eq!(m.json::<Points>(), Ok(points));
        // The field at fault is named, its value never.
        m.body = Some(r#"{"customer": "c-1", "points": "secret-99"}"#.into());
        let err = m.json::<Points>().expect_err("a string is not a count");
        assert!(err.to_string().contains("points"), "{err}");
        assert!(!err.to_string().contains("secret-99"), "{err}");
        m.body = Some("{\"customer\": \"c-1\"}".into());
        let missing = m.json::<Points>().expect_err("points is required");
        assert!(missing.to_string().contains("points"), "{missing}");
    }
}
