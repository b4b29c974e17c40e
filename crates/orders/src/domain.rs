//! The order state machine and the classification of a refused write.
//!
//! Pure code: no SDK types, no I/O. The DynamoDB adapter turns
//! [`EventKind::requires`] into a ConditionExpression; when DynamoDB refuses
//! the write it hands the item it evaluated the condition against back to
//! [`classify_refusal`], which decides what the refusal *means*.

use serde::Deserialize;

use crate::event::{EventKind, OrderEvent};
use lambda_idempotency::StoreError;
use lambda_idempotency::sequence::{self, Processed, Refusal, Turn};

/// An order's status as stored in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, strum::VariantArray)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Placed,
    Paid,
    Shipped,
    Delivered,
    Cancelled,
}

impl Status {
    /// Every status, derived from the enum itself: a new variant cannot be
    /// left out (the notifier reads a stream image's status by this list).
    pub const ALL: &'static [Status] = <Status as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Placed => "PLACED",
            Status::Paid => "PAID",
            Status::Shipped => "SHIPPED",
            Status::Delivered => "DELIVERED",
            Status::Cancelled => "CANCELLED",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What must be true of the stored order for an event to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requires {
    /// No item for this order yet.
    Absent,
    /// The item exists and its status is one of these.
    StatusIn(&'static [Status]),
}

impl EventKind {
    /// The transition table: the single source of truth for legality.
    pub fn requires(self) -> Requires {
        match self {
            EventKind::Placed => Requires::Absent,
            EventKind::Paid => Requires::StatusIn(&[Status::Placed]),
            EventKind::Shipped => Requires::StatusIn(&[Status::Paid]),
            EventKind::Delivered => Requires::StatusIn(&[Status::Shipped]),
            EventKind::Cancelled => Requires::StatusIn(&[Status::Placed, Status::Paid]),
        }
    }

    /// The status an order has after this event applied.
    pub fn target(self) -> Status {
        match self {
            EventKind::Placed => Status::Placed,
            EventKind::Paid => Status::Paid,
            EventKind::Shipped => Status::Shipped,
            EventKind::Delivered => Status::Delivered,
            EventKind::Cancelled => Status::Cancelled,
        }
    }
}

/// The part of a stored order that classification needs: what DynamoDB
/// returns with `ReturnValuesOnConditionCheckFailure = ALL_OLD`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OrderSnapshot {
    pub status: Status,
    pub last_event_seq: u64,
    pub last_event_id: String,
    pub event_hash: String,
    /// `"{seq}:{content hash}"` of every processed event (applied or
    /// rejected), so that a changed payload under an *older* seq is a
    /// Conflict too, not hidden behind Stale. Empty on items written before
    /// it was kept: their older seqs are Stale as before.
    #[serde(default)]
    pub processed_hashes: Vec<String>,
    /// The eventIds of the latest recorded rejections, at most
    /// [`MAX_REJECTED_EVENTS`] (older ones are only counted, in
    /// `rejected_count`).
    #[serde(default)]
    pub rejected_events: Vec<String>,
}

/// How many `processed_hashes` entries (about 55 bytes each) a rejection's
/// write keeps: the latest ones. Applied events only append (at most one per
/// transition: the state machine has no cycles), but rejections in turn are
/// unbounded, and an item may not grow past DynamoDB's 400 KB. A changed
/// payload under a seq older than the window reads as Stale instead of
/// Conflict: the seq is still known to be processed, so nothing is
/// acknowledged that was not.
pub const MAX_PROCESSED_HASHES: usize = 64;

/// How many rejected eventIds (at most 256 bytes each) an order keeps; every
/// rejection is counted in `rejected_count`.
pub const MAX_REJECTED_EVENTS: usize = 32;

/// The list a rejection's write stores: the latest `max - 1` entries of
/// `observed` and `new` after them. `observed` is the stored list the write
/// is conditional on (its `last_event_seq` unchanged means the list is
/// unchanged too: every write moves the seq), so the window replaces it
/// whole instead of appending, which is what keeps the item bounded.
pub fn window_after(observed: &[String], new: String, max: usize) -> Vec<String> {
    let keep = max.saturating_sub(1);
    let from = observed.len().saturating_sub(keep);
    let mut out = Vec::with_capacity(observed.len() - from + 1);
    out.extend_from_slice(&observed[from..]);
    out.push(new);
    out
}

impl OrderSnapshot {
    /// (seq, content hash) of each processed event recorded on the item.
    pub fn processed(&self) -> impl Iterator<Item = (u64, &str)> {
        self.processed_hashes.iter().filter_map(|entry| {
            let (seq, hash) = entry.split_once(':')?;
            Some((seq.parse().ok()?, hash))
        })
    }

    /// The content hash recorded for `seq`, if any.
    pub fn hash_of(&self, seq: u64) -> Option<&str> {
        if seq == self.last_event_seq {
            return Some(&self.event_hash);
        }
        self.processed().find(|(s, _)| *s == seq).map(|(_, h)| h)
    }
}

/// An order as the read side (`GET /orders/{orderId}` of the order API)
/// shows it: its status, its last processed seq and its timestamps. Every
/// attribute but the status and the seq is optional, so that an order
/// written by any version of the consumer reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OrderView {
    pub order_id: String,
    pub status: Status,
    pub last_event_seq: u64,
    pub customer_id: Option<String>,
    pub amount: Option<u64>,
    pub currency: Option<String>,
    pub placed_at: Option<String>,
    pub paid_at: Option<String>,
    pub shipped_at: Option<String>,
    pub delivered_at: Option<String>,
    pub cancelled_at: Option<String>,
    pub updated_at: Option<String>,
    /// The order API's hash of the caller that placed it (`owner`); `None`
    /// for an order placed through SQS.
    pub owner: Option<String>,
}

/// The entry an event adds to [`OrderSnapshot::processed_hashes`].
pub fn processed_entry(event: &OrderEvent) -> String {
    processed_entry_with(event, &event.content_hash())
}

/// [`processed_entry`] for an event whose content hash is already at hand.
pub fn processed_entry_with(event: &OrderEvent, hash: &str) -> String {
    format!("{}:{hash}", event.seq.get())
}

/// Why an event conflicts with what is stored. Both are producer bugs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictKind {
    /// Another event (another eventId) already holds this seq, the order's
    /// last processed one.
    SeqTakenByOtherEvent,
    /// This seq was processed with other content: the same eventId with a
    /// changed payload or, for a seq before the last one (whose eventId is
    /// not kept on its own), possibly another event.
    ChangedPayload,
}

/// The order consumer's verdict about one record: what its rules decided.
/// A record that got none (invalid, a failed write, not attempted) gets one
/// of the shared outcomes instead ([`lambda_idempotency::RecordOutcome`]).
#[derive(Debug, Clone, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum Outcome {
    /// The conditional write committed.
    Applied,
    /// This exact event is the last one processed (applied, or rejected
    /// and recorded) for the order.
    Duplicate,
    /// This event was processed in its turn and later events have been
    /// processed since: a redelivery of an older event.
    Stale { last_seq: u64 },
    /// The transition is illegal and can never become legal.
    Rejected {
        current: Option<Status>,
        event: EventKind,
    },
    /// An event before this one (a lower seq, or the order's OrderPlaced)
    /// has not been processed yet: retry later.
    Early {
        current: Option<Status>,
        event: EventKind,
    },
    /// The producer sent contradictory events.
    Conflict(ConflictKind),
}

impl Outcome {
    /// May SQS delete the message? Only when its effect is committed, or when
    /// committing it is known to be unnecessary (duplicate, stale) or
    /// impossible forever (rejected).
    pub fn acknowledge(&self) -> bool {
        matches!(
            self,
            Outcome::Applied
                | Outcome::Duplicate
                | Outcome::Stale { .. }
                | Outcome::Rejected { .. }
        )
    }

    /// A stable name, used in logs and as the metric name.
    pub fn label(&self) -> &'static str {
        // The variant's name (strum), so labels cannot drift from variants.
        self.into()
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = |s: &Option<Status>| s.map_or("no order", Status::as_str);
        match self {
            Outcome::Applied | Outcome::Duplicate => f.write_str(self.label()),
            Outcome::Stale { last_seq } => write!(f, "Stale: order is already at seq {last_seq}"),
            Outcome::Rejected { current, event } => {
                write!(
                    f,
                    "Rejected: {event} can never apply to {}",
                    status(current)
                )
            }
            Outcome::Early { current, event } => {
                write!(
                    f,
                    "Early: {event} needs a predecessor ({} now)",
                    status(current)
                )
            }
            Outcome::Conflict(ConflictKind::SeqTakenByOtherEvent) => {
                f.write_str("Conflict: another event already holds this seq")
            }
            Outcome::Conflict(ConflictKind::ChangedPayload) => {
                f.write_str("Conflict: this seq was processed with different content")
            }
        }
    }
}

/// DynamoDB refused the conditional write for `event`; `current` is the item
/// the condition was evaluated against (None: no item). Decide what that
/// means: a verdict, or a refusal that makes no sense against what was
/// shown (`Err`: retry and look again).
///
/// Sequence numbers are contiguous per order: an event applies only when it
/// is the order's next one (`last_event_seq = seq - 1`), so every seq at or
/// below `last_event_seq` was processed (applied, or rejected and recorded:
/// an event is Rejected only in its turn, and acknowledged only once its seq
/// is spent). That is what makes acknowledging Stale safe: a
/// superseded event is one whose turn has passed, never one whose effect was
/// skipped because a later event overtook it.
pub fn classify_refusal(
    event: &OrderEvent,
    current: Option<&OrderSnapshot>,
) -> Result<Outcome, StoreError> {
    let kind = event.kind();
    let seq = event.seq.get();
    // The decision is the library's (lambda_idempotency::sequence), shared
    // with every consumer of a numbered sequence (the template's too); what
    // is the order's own is how its item answers each question.
    let turn = current.map(|cur| Turn {
        last_seq: cur.last_event_seq,
        allowed_now: match kind.requires() {
            // An OrderPlaced for an order that exists is never allowed.
            Requires::Absent => false,
            Requires::StatusIn(from) => from.contains(&cur.status),
        },
    });
    let creates = matches!(kind.requires(), Requires::Absent);
    let processed = || current.map_or(Processed::Unknown, |cur| processed_as(event, cur));
    Ok(
        match sequence::classify_refusal(seq, creates, turn, processed)? {
            Refusal::Duplicate => Outcome::Duplicate,
            Refusal::Stale => Outcome::Stale {
                last_seq: current.map_or(0, |cur| cur.last_event_seq),
            },
            Refusal::Conflict(how) => Outcome::Conflict(how),
            Refusal::Rejected => Outcome::Rejected {
                current: current.map(|cur| cur.status),
                event: kind,
            },
            Refusal::Early => Outcome::Early {
                current: current.map(|cur| cur.status),
                event: kind,
            },
        },
    )
}

/// What the order recorded under `event`'s seq (asked once that seq has
/// been processed): another event under the last seq (by its eventId),
/// other content under any processed seq (by the content hash kept per
/// seq), or the same event. An item written before hashes were kept per
/// seq has nothing to compare with.
fn processed_as(event: &OrderEvent, cur: &OrderSnapshot) -> Processed<ConflictKind> {
    let seq = event.seq.get();
    if seq == cur.last_event_seq && event.event_id.as_str() != cur.last_event_id {
        return Processed::Differs(ConflictKind::SeqTakenByOtherEvent);
    }
    match cur.hash_of(seq) {
        Some(stored) if stored != event.content_hash() => {
            Processed::Differs(ConflictKind::ChangedPayload)
        }
        Some(_) => Processed::Same,
        None => Processed::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_body;
    use lambda_idempotency::wire::ParseError;
    use lambda_idempotency::{RecordOutcome, Skip};

    fn event(kind: &str, seq: u64, id: &str) -> OrderEvent {
        let data = match kind {
            "OrderPlaced" => r#"{"customerId":"c","amount":5,"currency":"USD"}"#,
            "OrderPaid" => r#"{"paymentId":"p","amount":5,"currency":"USD"}"#,
            "OrderShipped" => r#"{"carrier":"UPS","trackingId":"t"}"#,
            "OrderCancelled" => r#"{"reason":"r"}"#,
            _ => "{}",
        };
        let body = format!(
            r#"{{"eventId":"{id}","orderId":"o","seq":{seq},"type":"{kind}","occurredAt":"2026-01-01T00:00:00Z","data":{data}}}"#
        );
        parse_body(Some(&body)).unwrap()
    }

    fn snap(status: Status, seq: u64, last: &OrderEvent) -> OrderSnapshot {
        OrderSnapshot {
            status,
            last_event_seq: seq,
            last_event_id: last.event_id.to_string(),
            event_hash: last.content_hash(),
            processed_hashes: vec![processed_entry(last)],
            rejected_events: vec![],
        }
    }

    /// The item after `events` were processed in order.
    fn after(status: Status, events: &[&OrderEvent]) -> OrderSnapshot {
        let last = events.last().expect("at least one event");
        OrderSnapshot {
            processed_hashes: events.iter().map(|e| processed_entry(e)).collect(),
            ..snap(status, last.seq.get(), last)
        }
    }

    #[test]
    fn a_changed_payload_is_a_conflict_under_any_processed_seq() {
        let (placed, paid, shipped) = (
            event("OrderPlaced", 1, "e1"),
            event("OrderPaid", 2, "e2"),
            event("OrderShipped", 3, "e3"),
        );
        let cur = after(Status::Shipped, &[&placed, &paid, &shipped]);
        // The very same older events: Stale, acknowledged.
        for e in [&placed, &paid] {
            assert_eq!(
                classify_refusal(e, Some(&cur)),
                Ok(Outcome::Stale { last_seq: 3 })
            );
        }
        // Same eventId and seq, other content, one or two events later.
        let mut changed = paid.clone();
        changed.occurred_at = "2026-01-02T00:00:00Z".try_into().unwrap();
        assert_eq!(
            classify_refusal(&changed, Some(&cur)),
            Ok(Outcome::Conflict(ConflictKind::ChangedPayload))
        );
        let other_placed = event("OrderPlaced", 1, "another-e1");
        assert_eq!(
            classify_refusal(&other_placed, Some(&cur)),
            Ok(Outcome::Conflict(ConflictKind::ChangedPayload))
        );
        // An item from before per-seq hashes: nothing to compare, Stale.
        let legacy = OrderSnapshot {
            processed_hashes: vec![],
            ..cur.clone()
        };
        assert_eq!(
            classify_refusal(&changed, Some(&legacy)),
            Ok(Outcome::Stale { last_seq: 3 })
        );
    }

    #[test]
    fn a_placed_with_a_later_seq_never_founds_the_order() {
        // No item: its predecessors (seq 1..) have not been processed.
        let replaced = event("OrderPlaced", 5, "e-replaced");
        assert_eq!(
            classify_refusal(&replaced, None),
            Ok(Outcome::Early {
                current: None,
                event: EventKind::Placed
            })
        );
        // The order's real first event, refused without an item: a store
        // that did not honour ALL_OLD.
        assert_eq!(
            classify_refusal(&event("OrderPlaced", 1, "e1"), None),
            Err(StoreError::RefusedWithoutItem)
        );
        // Once the order exists: its turn rejects it, a gap waits.
        let delivered = event("OrderDelivered", 4, "e4");
        let cur = snap(Status::Delivered, 4, &delivered);
        assert!(matches!(
            classify_refusal(&replaced, Some(&cur)),
            Ok(Outcome::Rejected { .. })
        ));
    }

    #[test]
    fn duplicate_needs_same_id_seq_and_content() {
        let paid = event("OrderPaid", 2, "e2");
        let cur = snap(Status::Paid, 2, &paid);
        assert_eq!(classify_refusal(&paid, Some(&cur)), Ok(Outcome::Duplicate));

        let other = event("OrderPaid", 2, "e2-other");
        assert_eq!(
            classify_refusal(&other, Some(&cur)),
            Ok(Outcome::Conflict(ConflictKind::SeqTakenByOtherEvent))
        );
        let mut changed = paid.clone();
        changed.occurred_at = "2026-01-02T00:00:00Z".try_into().unwrap();
        assert_eq!(
            classify_refusal(&changed, Some(&cur)),
            Ok(Outcome::Conflict(ConflictKind::ChangedPayload))
        );
    }

    #[test]
    fn lower_seq_is_stale_whatever_the_status() {
        let shipped = event("OrderShipped", 3, "e3");
        let cur = snap(Status::Shipped, 3, &shipped);
        for (k, s) in [("OrderPlaced", 1), ("OrderPaid", 2), ("OrderCancelled", 2)] {
            assert_eq!(
                classify_refusal(&event(k, s, "x"), Some(&cur)),
                Ok(Outcome::Stale { last_seq: 3 })
            );
        }
    }

    #[test]
    fn early_when_a_predecessor_can_still_arrive() {
        let placed = event("OrderPlaced", 1, "e1");
        let cur = snap(Status::Placed, 1, &placed);
        for k in ["OrderShipped", "OrderDelivered"] {
            let ev = event(k, 5, "later");
            assert!(matches!(
                classify_refusal(&ev, Some(&cur)),
                Ok(Outcome::Early {
                    current: Some(Status::Placed),
                    ..
                })
            ));
        }
        // No item at all: every non-Placed event is early.
        assert!(matches!(
            classify_refusal(&event("OrderPaid", 2, "e2"), None),
            Ok(Outcome::Early { current: None, .. })
        ));
    }

    #[test]
    fn rejected_in_its_turn_when_the_transition_can_never_become_legal() {
        let cancelled = event("OrderCancelled", 2, "e2");
        let cur = snap(Status::Cancelled, 2, &cancelled);
        for k in [
            "OrderPaid",
            "OrderShipped",
            "OrderDelivered",
            "OrderCancelled",
            "OrderPlaced",
        ] {
            assert!(
                matches!(
                    classify_refusal(&event(k, 3, "x"), Some(&cur)),
                    Ok(Outcome::Rejected { .. })
                ),
                "{k} on CANCELLED, in its turn"
            );
        }
        let shipped = event("OrderShipped", 3, "e3");
        let cur = snap(Status::Shipped, 3, &shipped);
        assert!(matches!(
            classify_refusal(&event("OrderCancelled", 4, "c"), Some(&cur)),
            Ok(Outcome::Rejected {
                current: Some(Status::Shipped),
                event: EventKind::Cancelled
            })
        ));
    }

    #[test]
    fn before_its_turn_an_event_waits_even_on_a_finished_order() {
        // Issue 27, item 1: on a CANCELLED order at seq 2, OrderPaid seq 4
        // arriving before seq 3 was rejected at the gap and acknowledged
        // without being recorded, so the final item depended on the
        // delivery order. Nothing can apply to CANCELLED, but the event must
        // still wait for its turn, where its rejection is recorded.
        let cancelled = event("OrderCancelled", 2, "e2");
        let cur = snap(Status::Cancelled, 2, &cancelled);
        for k in ["OrderPaid", "OrderShipped", "OrderPlaced", "OrderCancelled"] {
            assert_eq!(
                classify_refusal(&event(k, 4, "x"), Some(&cur)),
                Ok(Outcome::Early {
                    current: Some(Status::Cancelled),
                    event: event(k, 4, "x").kind()
                }),
                "{k} at a gap on CANCELLED"
            );
        }
    }

    #[test]
    fn a_gap_is_early_even_when_the_transition_is_legal_now() {
        // BUG-1 of the reliability suite: Placed(1), then Cancelled(3) while
        // Paid(2) is still on its way. PLACED may be cancelled, but the
        // cancellation must wait for the payment, or the payment is lost.
        let placed = event("OrderPlaced", 1, "e1");
        let cur = snap(Status::Placed, 1, &placed);
        assert_eq!(
            classify_refusal(&event("OrderCancelled", 3, "e3"), Some(&cur)),
            Ok(Outcome::Early {
                current: Some(Status::Placed),
                event: EventKind::Cancelled
            })
        );
        // Also when it will be rejected in its turn: it must wait to spend
        // its seq in order.
        assert_eq!(
            classify_refusal(&event("OrderPlaced", 3, "again"), Some(&cur)),
            Ok(Outcome::Early {
                current: Some(Status::Placed),
                event: EventKind::Placed
            })
        );
    }

    #[test]
    fn the_next_event_is_rejected_when_illegal_and_spends_its_seq() {
        let placed = event("OrderPlaced", 1, "e1");
        let cur = snap(Status::Placed, 1, &placed);
        for (k, kind) in [
            ("OrderShipped", EventKind::Shipped),
            ("OrderDelivered", EventKind::Delivered),
            ("OrderPlaced", EventKind::Placed),
        ] {
            let ev = event(k, 2, "next");
            assert_eq!(
                classify_refusal(&ev, Some(&cur)),
                Ok(Outcome::Rejected {
                    current: Some(Status::Placed),
                    event: kind
                }),
                "{k}"
            );
        }
        // A legal next event that was refused anyway: the item changed under
        // us; retry rather than guess.
        assert_eq!(
            classify_refusal(&event("OrderPaid", 2, "e2"), Some(&cur)),
            Err(StoreError::InconsistentRefusal)
        );
    }

    #[test]
    fn every_status_reads_back_as_it_is_written() {
        // `as_str` writes the status, serde reads it (ALL_OLD, the stream's
        // images): a new variant must agree in both.
        for &st in Status::ALL {
            let read: Status =
                serde_json::from_value(serde_json::Value::String(st.as_str().into())).unwrap();
            assert_eq!(read, st);
        }
    }

    #[test]
    fn a_rejections_window_keeps_the_latest_entries_and_the_new_one() {
        let list = |r: std::ops::Range<u32>| r.map(|i| i.to_string()).collect::<Vec<_>>();
        assert_eq!(window_after(&[], "n".into(), 3), ["n"]);
        assert_eq!(window_after(&list(0..2), "n".into(), 3), ["0", "1", "n"]);
        assert_eq!(window_after(&list(0..3), "n".into(), 3), ["1", "2", "n"]);
        // A legacy item far over the bound shrinks to it at once.
        assert_eq!(
            window_after(&list(0..100), "n".into(), 3),
            ["98", "99", "n"]
        );
        assert_eq!(window_after(&list(0..5), "n".into(), 1), ["n"]);
    }

    #[test]
    fn only_settled_outcomes_are_acknowledged() {
        assert!(Outcome::Applied.acknowledge());
        assert!(Outcome::Duplicate.acknowledge());
        assert!(Outcome::Stale { last_seq: 1 }.acknowledge());
        assert!(
            Outcome::Rejected {
                current: None,
                event: EventKind::Placed
            }
            .acknowledge()
        );
        assert!(
            !Outcome::Early {
                current: None,
                event: EventKind::Paid
            }
            .acknowledge()
        );
        assert!(!Outcome::Conflict(ConflictKind::ChangedPayload).acknowledge());
        type Record = RecordOutcome<Outcome>;
        assert!(!Record::Invalid(ParseError::MissingBody).acknowledge());
        assert!(!Record::Failed(StoreError::Timeout).acknowledge());
        assert!(!Record::NotAttempted(Skip::Deadline).acknowledge());
        assert!(Record::Settled(Outcome::Applied).acknowledge());
    }
}
