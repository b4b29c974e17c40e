//! {{ cookiecutter.project_name }}: {{ cookiecutter.entity }} events from SQS, each applied once to its
//! {{ cookiecutter.entity }} in DynamoDB with one conditional UpdateItem.
//!
//! The contract with the producer: every event carries its `{{ cookiecutter.__id_field }}`, an
//! `eventId` and a `seq` that numbers the {{ cookiecutter.entity }}'s events 1, 2, 3, ... with
//! no gap. An event applies when it is the {{ cookiecutter.entity }}'s next one (`seq` follows
//! the stored one) and its transition is allowed from the stored status
//! ([`machine`]). A refused write comes back with the item it was checked
//! against (ALL_OLD), which says why ([`classify`]): seen before (Duplicate,
//! Stale), too early (Early, retried), never (Rejected: its seq is spent so
//! the next events can apply), or a producer bug (Conflict).

{% if cookiecutter.include_http_api == 'yes' %}pub mod api;
{% endif %}pub mod machine;

use std::time::SystemTime;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::dynamo::{Conditional, n, s, send_conditional};
use lambda_idempotency::sequence::{self, Processed, Refusal, Turn};
use lambda_idempotency::time::rfc3339;
use lambda_idempotency::tracing::{self, Span, field::Empty};
use lambda_idempotency::wire::{self, Id};
use lambda_idempotency::{BatchContext, Handler, ParseError, SqsMessage, StoreError, verdicts};

pub use machine::EventType;

/// The function's name: its metrics' and invocation errors' prefix.
pub const NAME: &str = "{{ cookiecutter.__fn_name }}";
/// The table's hash key (a string): the {{ cookiecutter.entity }}'s id.
pub const KEY: &str = "{{ cookiecutter.__id_attr }}";

/// One {{ cookiecutter.entity }} event, as a message body carries it:
/// `{"type": "...", "eventId": "e-1", "{{ cookiecutter.__id_field }}": "...", "seq": 1}`.
/// Fields it does not name are ignored; add yours here (and to the write).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(rename = "type")]
    kind: EventType,
    event_id: String,
    {{ cookiecutter.__id_attr }}: String,
    seq: u64,
}

/// A parsed, validated event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct {{ cookiecutter.__entity_type }}Event {
    pub kind: EventType,
    pub event_id: Id,
    pub {{ cookiecutter.__id_attr }}: Id,
    /// 1 for the {{ cookiecutter.entity }}'s first event, then one more for each.
    pub seq: u64,
}

/// Read one body. Errors name the field, never its value.
pub fn parse(body: Option<&str>) -> Result<{{ cookiecutter.__entity_type }}Event, ParseError> {
    let b: Body = wire::from_json(body)?;
    let id = |v: &str, field: &str| Id::try_from(v).map_err(|why| wire::invalid(field, why));
    if b.seq == 0 {
        return Err(wire::invalid("seq", "must be 1 or more"));
    }
    Ok({{ cookiecutter.__entity_type }}Event {
        kind: b.kind,
        event_id: id(&b.event_id, "eventId")?,
        {{ cookiecutter.__id_attr }}: id(&b.{{ cookiecutter.__id_attr }}, "{{ cookiecutter.__id_field }}")?,
        seq: b.seq,
    })
}

verdicts! {
    /// What became of one event (the shared outcomes Invalid, Failed and
    /// NotAttempted are the library's).
    pub enum {{ cookiecutter.__entity_type }}Outcome {
        /// Written now.
        Applied => ack,
        /// The {{ cookiecutter.entity }}'s last event, again: nothing to do.
        Duplicate => ack,
        /// An earlier event, again, after later ones: nothing to do.
        Stale => ack,
        /// Its predecessors have not all been applied: comes back later.
        Early => retry,
        /// In its turn, but not allowed from the status: recorded (its seq
        /// spent), never applied.
        Rejected => ack(warn),
        /// A seq already taken by another eventId: a producer bug. Comes
        /// back until the queue's dead-letter queue takes it.
        Conflict => retry(error),
    }
}

use {{ cookiecutter.__entity_type }}Outcome as Outcome;

/// What a refusal says about the stored {{ cookiecutter.entity }} (from ALL_OLD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub status: String,
    /// The last seq processed (applied or rejected).
    pub seq: u64,
    /// The eventId of each processed seq: `event_ids[i]` is seq `i + 1`'s.
    pub event_ids: Vec<String>,
}

impl Stored {
    fn from_item(item: &lambda_idempotency::dynamo::Item) -> Result<Self, StoreError> {
        let event_ids = match item.get("event_ids") {
            Some(AttributeValue::L(ids)) => ids.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
            _ => Vec::new(),
        };
        Ok(Stored {
            status: lambda_idempotency::dynamo::string(item, "status")?,
            seq: lambda_idempotency::dynamo::number(item, "seq")?,
            event_ids,
        })
    }
}

/// Why was `event`'s write refused, given what is stored (`None`: no
/// {{ cookiecutter.entity }} yet)? Pure: the library's decision for numbered
/// sequences (`lambda_idempotency::sequence`), asked with this item's
/// answers. `Err` for a refusal the item cannot explain (retried: the next
/// attempt sees the item again).
pub fn classify(event: &{{ cookiecutter.__entity_type }}Event, stored: Option<&Stored>) -> Result<Outcome, StoreError> {
    let turn = stored.map(|cur| Turn {
        last_seq: cur.seq,
        allowed_now: event.kind.from().contains(&cur.status.as_str()),
    });
    // The eventId recorded under the event's seq: another one is a conflict.
    let processed = || {
        let index = usize::try_from(event.seq.saturating_sub(1)).ok();
        match stored.zip(index).and_then(|(cur, i)| cur.event_ids.get(i)) {
            Some(id) if id != event.event_id.as_str() => Processed::Differs(()),
            Some(_) => Processed::Same,
            None => Processed::Unknown,
        }
    };
    Ok(match sequence::classify_refusal(event.seq, event.kind.creates(), turn, processed)? {
        Refusal::Duplicate => Outcome::Duplicate,
        Refusal::Stale => Outcome::Stale,
        Refusal::Conflict(()) => Outcome::Conflict,
        Refusal::Rejected => Outcome::Rejected,
        Refusal::Early => Outcome::Early,
    })
}

/// The handler: one conditional UpdateItem per event to `table`.
pub struct {{ cookiecutter.__entity_type }}Handler {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl {{ cookiecutter.__entity_type }}Handler {
    /// Apply `e`: its status, its seq and its eventId, if it is the next
    /// event and its transition is allowed.
    async fn write(&self, e: &{{ cookiecutter.__entity_type }}Event) -> Result<Conditional, StoreError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(e.{{ cookiecutter.__id_attr }}.as_str()))
            .update_expression(
                "SET #st = :to, seq = :seq, last_event_type = :type, updated_at = :now, \
                 event_ids = list_append(if_not_exists(event_ids, :nil), :eid)",
            )
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":to", s(e.kind.to()))
            .expression_attribute_values(":seq", n(e.seq))
            .expression_attribute_values(":type", s(e.kind.name()))
            .expression_attribute_values(":now", s(&rfc3339(SystemTime::now())))
            .expression_attribute_values(":nil", AttributeValue::L(vec![]))
            .expression_attribute_values(":eid", AttributeValue::L(vec![s(e.event_id.as_str())]));
        let guard = if e.kind.creates() {
            if e.seq == 1 {
                format!("attribute_not_exists({KEY})")
            } else {
                // Can never hold: a creating event is seq 1. Sent anyway, as
                // the refusal brings the item back in the same request.
                update = update.expression_attribute_values(":prev", n(e.seq - 1));
                format!("attribute_not_exists({KEY}) AND seq = :prev")
            }
        } else {
            let names: Vec<String> = (0..e.kind.from().len()).map(|i| format!(":from{i}")).collect();
            for (name, status) in names.iter().zip(e.kind.from()) {
                update = update.expression_attribute_values(name, s(status));
            }
            update = update.expression_attribute_values(":prev", n(e.seq - 1));
            format!("#st IN ({}) AND seq = :prev", names.join(", "))
        };
        send_conditional(update.condition_expression(guard)).await
    }

    /// Record a rejected event: spend its seq (so the events after it can
    /// apply) and keep its eventId, leaving the status as it is; only if the
    /// item is still what the rejection was decided from.
    async fn record_rejection(&self, e: &{{ cookiecutter.__entity_type }}Event, seen: &Stored) -> Result<Conditional, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(e.{{ cookiecutter.__id_attr }}.as_str()))
            .update_expression(
                "SET seq = :seq, updated_at = :now, event_ids = list_append(event_ids, :eid) \
                 ADD rejected_count :one",
            )
            .condition_expression("#st = :seen AND seq = :prev")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":seen", s(&seen.status))
            .expression_attribute_values(":prev", n(seen.seq))
            .expression_attribute_values(":seq", n(e.seq))
            .expression_attribute_values(":now", s(&rfc3339(SystemTime::now())))
            .expression_attribute_values(":eid", AttributeValue::L(vec![s(e.event_id.as_str())]))
            .expression_attribute_values(":one", n(1));
        send_conditional(update).await
    }
}

impl Handler<SqsMessage> for {{ cookiecutter.__entity_type }}Handler {
    type Event = {{ cookiecutter.__entity_type }}Event;
    type Verdict = Outcome;
    type Failure = StoreError;

    fn parse(&self, message: &SqsMessage) -> Result<{{ cookiecutter.__entity_type }}Event, ParseError> {
        parse(message.body.as_deref())
    }

    /// One {{ cookiecutter.entity }}'s events run one after another, different ones at once.
    fn key(&self, e: &{{ cookiecutter.__entity_type }}Event) -> String {
        e.{{ cookiecutter.__id_attr }}.to_string()
    }

    /// Within a batch, a {{ cookiecutter.entity }}'s events run by seq, lowest first.
    fn rank(&self, e: &{{ cookiecutter.__entity_type }}Event) -> u64 {
        e.seq
    }

    fn span(&self, record_id: &str, e: Option<&{{ cookiecutter.__entity_type }}Event>) -> Span {
        tracing::info_span!(
            "record",
            message_id = record_id,
            {{ cookiecutter.__id_attr }} = e.map(|e| e.{{ cookiecutter.__id_attr }}.as_str()),
            event_type = e.map(|e| e.kind.name()),
            seq = e.map(|e| e.seq),
            outcome = Empty
        )
    }

    async fn apply(&self, e: &{{ cookiecutter.__entity_type }}Event, _: &BatchContext) -> Result<Outcome, StoreError> {
        let Conditional::Refused(item) = self.write(e).await? else {
            return Ok(Outcome::Applied);
        };
        let stored = item.as_ref().map(Stored::from_item).transpose()?;
        let outcome = classify(e, stored.as_ref())?;
        if let (Outcome::Rejected, Some(seen)) = (outcome, &stored) {
            // A refusal here means the item changed since: decide again on
            // the next receive.
            if let Conditional::Refused(_) = self.record_rejection(e, seen).await? {
                return Err(StoreError::InconsistentRefusal);
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventType, seq: u64, event_id: &str) -> {{ cookiecutter.__entity_type }}Event {
        {{ cookiecutter.__entity_type }}Event {
            kind,
            event_id: Id::try_from(event_id).unwrap(),
            {{ cookiecutter.__id_attr }}: Id::try_from("x-1").unwrap(),
            seq,
        }
    }

    /// A creating event and one that may follow it.
    fn first_two() -> (EventType, EventType) {
        let first = *EventType::ALL.iter().find(|k| k.creates()).expect("a creating event");
        let next = *EventType::ALL
            .iter()
            .find(|k| k.from().contains(&first.to()))
            .expect("an event after the first");
        (first, next)
    }

    #[test]
    fn a_refusal_is_read_from_the_stored_item() {
        let (first, next) = first_two();
        let stored = Stored {
            status: next.to().to_owned(),
            seq: 2,
            event_ids: vec!["e-1".into(), "e-2".into()],
        };
        let at = |kind, seq, id| classify(&event(kind, seq, id), Some(&stored));
        assert_eq!(at(next, 2, "e-2"), Ok(Outcome::Duplicate));
        assert_eq!(at(first, 1, "e-1"), Ok(Outcome::Stale));
        assert_eq!(at(next, 2, "e-9"), Ok(Outcome::Conflict));
        assert_eq!(at(first, 1, "e-9"), Ok(Outcome::Conflict));
        assert_eq!(at(first, 3, "e-3"), Ok(Outcome::Rejected), "a creating event in turn");
        assert_eq!(at(next, 4, "e-4"), Ok(Outcome::Early), "a gap");
        assert_eq!(classify(&event(next, 2, "e-2"), None), Ok(Outcome::Early));
        assert_eq!(classify(&event(first, 3, "e-3"), None), Ok(Outcome::Early));
        assert_eq!(
            classify(&event(first, 1, "e-1"), None),
            Err(StoreError::RefusedWithoutItem)
        );
    }

    #[test]
    fn parse_names_the_field_and_never_the_value() {
        let (first, _) = first_two();
        let body = |kind: &str, seq: u64| {
            serde_json::json!({
                "type": kind, "eventId": "e-1", "{{ cookiecutter.__id_field }}": "x-1", "seq": seq
            })
            .to_string()
        };
        let ok = body(first.name(), 1);
        assert_eq!(parse(Some(&ok)), Ok(event(first, 1, "e-1")));
        let zero = parse(Some(&body(first.name(), 0))).unwrap_err();
        assert!(zero.to_string().contains("seq"), "{zero}");
        let unknown = parse(Some(&body("SecretType", 1))).unwrap_err();
        assert!(!format!("{unknown:?} {unknown}").contains("SecretType"), "{unknown}");
        assert!(parse(None).is_err());
    }
}
