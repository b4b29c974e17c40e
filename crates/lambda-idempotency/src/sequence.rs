//! Events numbered per key, 1, 2, 3, ... with no gap, each applied in its
//! turn by one conditional write: why such a write was refused.
//!
//! The pattern: every event of a key (an order, a booking) carries its
//! `seq`; the item stores the last seq processed and a status. An event
//! applies when its seq follows the stored one and its transition is
//! allowed from the stored status; the write's condition says exactly that
//! (`attribute_not_exists` for a key's first event), and asks DynamoDB
//! for the item it was checked against (`ReturnValuesOnConditionCheckFailure
//! = ALL_OLD`, which [`dynamo::send_conditional`](crate::dynamo) sets). A
//! refusal is then decided from that item alone by [`classify_refusal`],
//! a pure function: no second read, and the same answer on every retry.
//!
//! ```
//! use lambda_idempotency::sequence::{Processed, Refusal, Turn, classify_refusal};
//!
//! // The stored item: seq 2 processed, and from its status the event's
//! // transition is not allowed.
//! let stored = Turn { last_seq: 2, allowed_now: false };
//! // Seq 3, its turn: never allowed, so rejected (its seq is spent).
//! let same = || Processed::<()>::Same;
//! assert_eq!(classify_refusal(3, false, Some(stored), same), Ok(Refusal::Rejected));
//! // Seq 5: seq 4 has not been processed yet; wait for it.
//! assert_eq!(classify_refusal(5, false, Some(stored), same), Ok(Refusal::Early));
//! // Seq 2 again, the same event: done before.
//! assert_eq!(classify_refusal(2, false, Some(stored), same), Ok(Refusal::Duplicate));
//! // Seq 1, another event under it: a producer bug.
//! let other = || Processed::Differs("another eventId");
//! assert_eq!(
//!     classify_refusal(1, false, Some(stored), other),
//!     Ok(Refusal::Conflict("another eventId"))
//! );
//! ```

use crate::error::StoreError;

/// What the refused write's item says about the key's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// The last seq processed (applied, or rejected and recorded).
    pub last_seq: u64,
    /// Whether the event's transition is allowed from the stored status
    /// (`false` for an event that creates the key: the key exists).
    pub allowed_now: bool,
}

/// What the item recorded under the event's seq, when that seq has been
/// processed: the event itself, or another one (`K` says how it differs:
/// another event id, another payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processed<K> {
    /// The same event (same id and content).
    Same,
    /// Another event, or other content, under that seq.
    Differs(K),
    /// Nothing to compare with (an item written before its ids or hashes
    /// were kept): taken as the same event.
    Unknown,
}

/// Why a write in a key's sequence was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal<K> {
    /// The last event processed, again: applied before. Acknowledge.
    Duplicate,
    /// An event processed before the last one, again: superseded.
    /// Acknowledge.
    Stale,
    /// Another event or other content under a processed seq: a producer
    /// bug. Acknowledge loudly; nothing applies it.
    Conflict(K),
    /// Its turn, and its transition is not allowed from the stored status:
    /// nothing before it can change that, so it never applies. Record it
    /// (its seq spent, so the next events can apply) and acknowledge.
    Rejected,
    /// A predecessor has not been processed yet: retry later. Never
    /// rejected out of turn: acknowledging it unrecorded would make the
    /// final item depend on the delivery order.
    Early,
}

/// Why the write of the event numbered `seq` (from 1: a parser refuses 0)
/// was refused, from the item it was checked against: `stored` is `None`
/// when no item came back (the key has none yet); `creates` is whether the event is the kind that
/// creates its key; `processed` says what was recorded under `seq`, asked
/// only when `seq` has been processed.
///
/// `Err` is a refusal the item cannot explain, retried (the next attempt
/// sees the item again): a key's first event refused without an item
/// ([`StoreError::RefusedWithoutItem`]: the store did not return ALL_OLD,
/// or the item vanished), or an event in its turn whose transition is
/// allowed ([`StoreError::InconsistentRefusal`]: the condition should have
/// held).
pub fn classify_refusal<K>(
    seq: u64,
    creates: bool,
    stored: Option<Turn>,
    processed: impl FnOnce() -> Processed<K>,
) -> Result<Refusal<K>, StoreError> {
    let Some(turn) = stored else {
        // A key's first event is its seq 1, refused only by an item that
        // exists. A creating event with a later seq must not found the
        // key (it would make seqs 1.. Stale): its predecessors are to come.
        return if creates && seq <= 1 {
            Err(StoreError::RefusedWithoutItem)
        } else {
            Ok(Refusal::Early)
        };
    };
    // The sequence first: a processed seq is settled by what was
    // processed under it, whatever the status.
    if seq <= turn.last_seq {
        return Ok(match processed() {
            Processed::Differs(how) => Refusal::Conflict(how),
            _ if seq == turn.last_seq => Refusal::Duplicate,
            _ => Refusal::Stale,
        });
    }
    if seq == turn.last_seq + 1 {
        return if turn.allowed_now {
            Err(StoreError::InconsistentRefusal)
        } else {
            Ok(Refusal::Rejected)
        };
    }
    Ok(Refusal::Early)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(last_seq: u64, allowed_now: bool) -> Option<Turn> {
        Some(Turn {
            last_seq,
            allowed_now,
        })
    }

    #[test]
    fn every_refusal_is_classified_by_the_sequence_first() {
        use Processed::{Differs, Same, Unknown};
        type Row = (
            u64,
            bool,
            Option<Turn>,
            Processed<&'static str>,
            Result<Refusal<&'static str>, StoreError>,
        );
        let rows: [Row; 14] = [
            // No item: a first event refused without one cannot be explained.
            (1, true, None, Same, Err(StoreError::RefusedWithoutItem)),
            // A creating event numbered later, or any other event: early.
            (2, true, None, Same, Ok(Refusal::Early)),
            (1, false, None, Same, Ok(Refusal::Early)),
            (4, false, None, Same, Ok(Refusal::Early)),
            // Processed seqs: the last one, an earlier one, another event.
            (3, false, turn(3, true), Same, Ok(Refusal::Duplicate)),
            (3, false, turn(3, false), Unknown, Ok(Refusal::Duplicate)),
            (1, false, turn(3, true), Same, Ok(Refusal::Stale)),
            (2, false, turn(3, false), Unknown, Ok(Refusal::Stale)),
            (
                3,
                false,
                turn(3, true),
                Differs("id"),
                Ok(Refusal::Conflict("id")),
            ),
            (
                1,
                true,
                turn(3, false),
                Differs("body"),
                Ok(Refusal::Conflict("body")),
            ),
            // Its turn: rejected when not allowed; allowed is inconsistent.
            (4, false, turn(3, false), Same, Ok(Refusal::Rejected)),
            (4, true, turn(3, false), Same, Ok(Refusal::Rejected)),
            (
                4,
                false,
                turn(3, true),
                Same,
                Err(StoreError::InconsistentRefusal),
            ),
            // A gap, whatever the status: early, never rejected.
            (6, false, turn(3, false), Same, Ok(Refusal::Early)),
        ];
        for (seq, creates, stored, processed, want) in rows {
            assert_eq!(
                classify_refusal(seq, creates, stored, || processed),
                want,
                "seq {seq}, creates {creates}, stored {stored:?}"
            );
        }
    }

    #[test]
    fn what_was_processed_is_asked_only_for_a_processed_seq() {
        for seq in [4, 5] {
            let asked = classify_refusal::<()>(seq, false, turn(3, false), || {
                panic!("seq {seq} has not been processed: nothing to compare")
            });
            assert!(asked.is_ok());
        }
    }
}
