//! One handler, three sources: an audit trail that records each event
//! once, whether the events arrive on an SQS queue, a Kinesis data stream
//! or a Kafka topic (Amazon MSK or self-managed).
//!
//! [`AuditHandler`] handles any [`MessageRecord`] (an SQS body, a Kinesis
//! record's decoded data, a Kafka record's decoded value): one
//! `impl<R: MessageRecord> Handler<R>`, served as `serve::<SqsMessage>()`,
//! `serve::<KinesisMessage>()` or `serve::<KafkaMessage>()`. What differs is the
//! library's, per source: SQS answers by messageId and orders nothing on
//! a standard queue; Kinesis answers by sequence number, keeps each
//! partition key in order and stops a key at its first failure; Kafka
//! answers by topic-partition and offset, keeps each partition in offset
//! order and stops a partition at its first failure.
//! `src/main.rs` picks the source from `EVENT_SOURCE`.

use std::fmt;

use lambda_idempotency::dynamo::{Conditional, s, send_conditional};
use lambda_idempotency::tracing::{self, Span, field::Empty};
use lambda_idempotency::wire::{Id, as_object, parse_wrapped, req_id};
use lambda_idempotency::{BatchContext, Handler, MessageRecord, ParseError, StoreError, Verdict};

/// The function's name: the `errorType` prefix of its invocation errors.
pub const NAME: &str = "AuditTrail";

/// One audit event: `{"eventId": "...", "account": "...", "action": "..."}`.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub event_id: Id,
    pub account: Id,
    pub action: Id,
}

/// What the handler decided; the shared outcomes (Invalid, Failed,
/// NotAttempted) are the library's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    /// Written now.
    Recorded,
    /// Written before: a redelivery, or a record after a Kinesis retry
    /// point that Lambda hands out again.
    Duplicate,
}

impl fmt::Display for AuditOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl Verdict for AuditOutcome {
    const LABELS: &'static [&'static str] = &["Recorded", "Duplicate"];
    fn label(&self) -> &'static str {
        Self::LABELS[*self as usize]
    }
    /// Both are committed.
    fn acknowledge(&self) -> bool {
        true
    }
}

/// The handler, for records of any source `R`: one conditional write per
/// event to `table` (hash key `event_id`, a string).
pub struct AuditHandler {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl<R: MessageRecord> Handler<R> for AuditHandler {
    type Event = AuditEvent;
    type Verdict = AuditOutcome;
    type Failure = StoreError;

    /// The message's bytes, whatever carried them, read with the library's
    /// strict readers (plain, SNS- or EventBridge-wrapped JSON).
    fn parse(&self, record: &R) -> Result<AuditEvent, ParseError> {
        parse_wrapped(Some(record.payload_str()?), |v| {
            let obj = as_object(v, "(event)")?;
            Ok(AuditEvent {
                event_id: req_id(obj, "", "eventId")?,
                account: req_id(obj, "", "account")?,
                action: req_id(obj, "", "action")?,
            })
        })
    }
    /// One account's events one after another (on Kinesis the partition
    /// key groups them instead, on Kafka the topic-partition: the source's
    /// own order).
    fn key(&self, e: &AuditEvent) -> String {
        e.account.to_string()
    }
    fn rank(&self, _: &AuditEvent) -> u64 {
        0
    }
    fn span(&self, record_id: &str, e: Option<&AuditEvent>) -> Span {
        let id = e.map(|e| e.event_id.as_str());
        tracing::info_span!("record", record_id, event_id = id, outcome = Empty)
    }

    async fn apply(&self, e: &AuditEvent, _: &BatchContext) -> Result<AuditOutcome, StoreError> {
        let put = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("event_id", s(e.event_id.as_str()))
            // Names for the attributes: ACTION is one of DynamoDB's
            // reserved words.
            .update_expression("SET #account = :account, #action = :action")
            .condition_expression("attribute_not_exists(event_id)")
            .expression_attribute_names("#account", "account")
            .expression_attribute_names("#action", "action")
            .expression_attribute_values(":account", s(e.account.as_str()))
            .expression_attribute_values(":action", s(e.action.as_str()));
        match send_conditional(put).await? {
            Conditional::Committed => Ok(AuditOutcome::Recorded),
            // The event's item exists: written by an earlier delivery.
            Conditional::Refused(Some(_)) => Ok(AuditOutcome::Duplicate),
            Conditional::Refused(None) => Err(StoreError::RefusedWithoutItem),
        }
    }
}
