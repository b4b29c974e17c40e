//! The pure policy of a key: what a stored record is ([`Record`]), what a
//! claim came to ([`Claimed`], [`Refusal`]), how a refused claim is
//! classified ([`classify`], the one decision both stores and the model
//! checker call), and the lease and expiry arithmetic with its clock skew
//! allowance. No I/O.

use std::time::Duration;

use crate::error::StoreError;

/// What the store holds for a key, read strictly from the stored item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A call with this key is running (or crashed) until `lease_until_ms`.
    InProgress {
        /// The fingerprint of its payload.
        fingerprint: String,
        /// The attempt that claimed it ([`Claim::attempt`](super::Claim::attempt)).
        attempt: String,
        /// Epoch milliseconds: the claiming call's deadline.
        lease_until_ms: u64,
        /// Epoch seconds.
        expires_at: u64,
    },
    /// The call completed; its output is stored.
    Completed {
        /// The fingerprint of its payload.
        fingerprint: String,
        /// What to replay.
        stored: Stored,
    },
}

/// A completed key's output, exactly as stored, and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The output as the completing call stored it (JSON for
    /// [`Idempotent`](super::Idempotent); any text for a caller of the store).
    pub output: String,
    /// Epoch seconds: after this the key is free again.
    pub expires_at: u64,
}

/// What a claim came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// This attempt holds the key: run, then complete or release. Also the
    /// answer when the refusal was against this attempt's own claim (its
    /// first PutItem committed and the answer was lost).
    Held,
    /// Another record answers for the key.
    Refused(Refusal),
}

/// Why a claim was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The same payload completed: replay its output.
    Completed(Stored),
    /// The key was used with another payload.
    OtherPayload,
    /// The same payload is being processed (or its call crashed) until
    /// `lease_until_ms` (epoch milliseconds): retry after it.
    InProgress {
        /// When the running claim's lease ends.
        lease_until_ms: u64,
    },
}

/// A claim of a key, made by `attempt` with `fingerprint` at `now_ms`,
/// was refused against `stored` (`None`: no item came back). Expiry is
/// decided here, from the stored time, whatever DynamoDB's TTL has deleted
/// yet: an expired record never answers for a new call.
///
/// An in-progress record written by `attempt` itself is this attempt's own
/// claim, seen again: the SDK re-sends a PutItem whose answer was lost
/// (the connection dropped after DynamoDB applied it), and the re-sent one
/// is refused against the first. Answering "in progress" there would lock
/// the key against its own call until the lease ends, in exactly the
/// failure the key exists for; the attempt id is unique to one call, so
/// the record can be no one else's.
///
/// Errors: no item ([`StoreError::RefusedWithoutItem`]), or a record that
/// allows the claim (expired, or its lease over), which is a race with
/// another call ([`StoreError::InconsistentRefusal`]); both retryable.
pub fn classify(
    fingerprint: &str,
    attempt: &str,
    stored: Option<&Record>,
    now_ms: u64,
) -> Result<Claimed, StoreError> {
    let Some(stored) = stored else {
        return Err(StoreError::RefusedWithoutItem);
    };
    let (stored_fingerprint, expires_at) = match stored {
        Record::InProgress {
            fingerprint,
            expires_at,
            ..
        } => (fingerprint, *expires_at),
        Record::Completed {
            fingerprint,
            stored,
        } => (fingerprint, stored.expires_at),
    };
    if is_expired(expires_at, now_ms) {
        return Err(StoreError::InconsistentRefusal);
    }
    if stored_fingerprint != fingerprint {
        return Ok(Claimed::Refused(Refusal::OtherPayload));
    }
    match stored {
        Record::Completed { stored, .. } => {
            Ok(Claimed::Refused(Refusal::Completed(stored.clone())))
        }
        Record::InProgress {
            attempt: claimed_by,
            lease_until_ms,
            ..
        } if lease_is_live(*lease_until_ms, now_ms) => {
            if claimed_by == attempt {
                Ok(Claimed::Held)
            } else {
                Ok(Claimed::Refused(Refusal::InProgress {
                    lease_until_ms: *lease_until_ms,
                }))
            }
        }
        // The lease is over: the claim's condition admits it.
        Record::InProgress { .. } => Err(StoreError::InconsistentRefusal),
    }
}

/// How far apart two callers' clocks may be: a lease is taken over only
/// this long after it ended by the taker's clock.
///
/// A lease ends at the claiming invocation's deadline, read by the
/// claiming host's clock; another host takes the key over by its own
/// clock. Lambda's hosts keep time with the Amazon Time Sync Service
/// (NTP, within about a millisecond of UTC), so a second is three orders
/// of magnitude of margin; a host whose clock is further off than this
/// may take over a lease that is still running, and run the function
/// twice. A crashed call's key is held this much longer, nothing else.
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(1);

/// Does a lease that ends at `lease_until_ms` (the claimer's clock) still
/// hold at `now_ms` (this caller's clock)? Until it ended plus
/// [`CLOCK_SKEW_ALLOWANCE`]: the same test as the claim's condition.
pub fn lease_is_live(lease_until_ms: u64, now_ms: u64) -> bool {
    lease_until_ms.saturating_add(skew_ms()) > now_ms
}

/// When an in-progress record for a lease that ends at `lease_until_ms`
/// expires (epoch seconds), given the key's own expiry `expires_at`: not
/// before the lease has ended plus [`CLOCK_SKEW_ALLOWANCE`]. An expired
/// record is claimed again whatever its lease, so a record that expired
/// with its lease would let a host whose clock runs ahead take over a
/// lease that still holds (a key whose expiry is shorter than its lease).
pub fn claim_expires_at(expires_at: u64, lease_until_ms: u64) -> u64 {
    expires_at.max(lease_until_ms.saturating_add(skew_ms()).div_ceil(1000))
}

/// May a claim replace the record `found` at `now_ms` (the claimer's
/// clock)? When it has expired ([`is_expired`]), or when it is a claim in
/// progress whose lease is over ([`lease_is_live`], with its clock-skew
/// allowance); never a live lease, never an unexpired completion. Both
/// stores take a key over by this rule: the Valkey store evaluates this
/// function on the record it read, between `WATCH` and `EXEC`; the
/// DynamoDB store's claim states the same rule as its condition
/// expression (`attribute_not_exists OR expired OR (in progress AND lease
/// over)`), which DynamoDB evaluates. The contract suite holds both stores
/// to it at its edges (an expired key, an ended lease, a live one).
pub fn may_take_over(found: &Record, now_ms: u64) -> bool {
    match found {
        Record::InProgress {
            lease_until_ms,
            expires_at,
            ..
        } => is_expired(*expires_at, now_ms) || !lease_is_live(*lease_until_ms, now_ms),
        Record::Completed { stored, .. } => is_expired(stored.expires_at, now_ms),
    }
}

/// [`CLOCK_SKEW_ALLOWANCE`] in milliseconds.
pub(crate) fn skew_ms() -> u64 {
    u64::try_from(CLOCK_SKEW_ALLOWANCE.as_millis()).unwrap_or(u64::MAX)
}

/// Is a key that expires at `expires_at` (epoch seconds) expired at
/// `now_ms`? The same test as the claim's condition (`expires_at <= now`).
pub fn is_expired(expires_at: u64, now_ms: u64) -> bool {
    expires_at <= now_ms / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_progress_record_outlives_its_lease_on_every_clock_within_the_allowance() {
        for lease_until in [1_000, 1_500, 2_999, 3_000, 1_765_000_000_001] {
            // A key whose own expiry is shorter than its lease.
            let expires_at = claim_expires_at(0, lease_until);
            // While the lease holds in true time, a clock up to the
            // allowance ahead sees neither an expired record nor an ended
            // lease: no second claim.
            for ahead in [0, 1, 500, 999] {
                let now = lease_until + ahead;
                assert!(!is_expired(expires_at, now), "{lease_until} +{ahead}");
                assert!(lease_is_live(lease_until, now), "{lease_until} +{ahead}");
            }
        }
        // A longer expiry is kept as it is.
        assert_eq!(claim_expires_at(5_000, 3_000), 5_000);
    }

    #[test]
    fn a_record_is_taken_over_only_once_expired_or_its_lease_is_over() {
        let now = 1_000_000; // ms: 1000 s
        let claim = |lease_until_ms: u64, expires_at: u64| Record::InProgress {
            fingerprint: "fp".into(),
            attempt: "a".into(),
            lease_until_ms,
            expires_at,
        };
        let done = |expires_at: u64| Record::Completed {
            fingerprint: "fp".into(),
            stored: Stored {
                output: "{}".into(),
                expires_at,
            },
        };
        // A live lease, and one within the clock-skew allowance: kept.
        assert!(!may_take_over(&claim(now + 1, 2_000), now));
        assert!(!may_take_over(&claim(now - 999, 2_000), now));
        // A lease over by the allowance, or an expired key: taken over.
        assert!(may_take_over(&claim(now - 1_000, 2_000), now));
        assert!(may_take_over(&claim(now + 60_000, 1_000), now));
        // A completion: only once expired, whatever else.
        assert!(!may_take_over(&done(1_001), now));
        assert!(may_take_over(&done(1_000), now));
    }

    #[test]
    fn classification_of_a_refused_claim() {
        let now = 1_000_000; // ms: 1000 s
        let live = 2_000; // s: far after now
        let stored = |exp: u64| Stored {
            output: "{\"ok\":1}".into(),
            expires_at: exp,
        };
        let done = |fp: &str, exp: u64| Record::Completed {
            fingerprint: fp.into(),
            stored: stored(exp),
        };
        let running = |fp: &str, lease: u64| Record::InProgress {
            fingerprint: fp.into(),
            attempt: "other-attempt".into(),
            lease_until_ms: lease,
            expires_at: live,
        };
        // Claimed by this very attempt (the SDK re-sent a PutItem that
        // committed unseen).
        let mine = |fp: &str, lease: u64, exp: u64| Record::InProgress {
            fingerprint: fp.into(),
            attempt: "my-attempt".into(),
            lease_until_ms: lease,
            expires_at: exp,
        };
        use Claimed::{Held, Refused};
        let cases: Vec<(Option<Record>, Result<Claimed, StoreError>)> = vec![
            (
                Some(done("f", live)),
                Ok(Refused(Refusal::Completed(stored(live)))),
            ),
            (Some(done("g", live)), Ok(Refused(Refusal::OtherPayload))),
            (
                Some(running("f", now + 1)),
                Ok(Refused(Refusal::InProgress {
                    lease_until_ms: now + 1,
                })),
            ),
            (
                Some(running("g", now + 1)),
                Ok(Refused(Refusal::OtherPayload)),
            ),
            (Some(mine("f", now + 1, live)), Ok(Held)),
            // The attempt id alone does not make it ours: the payload must
            // be this call's, the lease live, the key not expired (none of
            // which an SDK retry can change; anything else is a race).
            (
                Some(mine("g", now + 1, live)),
                Ok(Refused(Refusal::OtherPayload)),
            ),
            (
                Some(mine("f", now - skew_ms(), live)),
                Err(StoreError::InconsistentRefusal),
            ),
            (
                Some(mine("f", now + 1, now / 1000)),
                Err(StoreError::InconsistentRefusal),
            ),
            // A lease that ended, by the clock skew allowance or more,
            // is over: the claim should have held.
            (
                Some(running("f", now - skew_ms())),
                Err(StoreError::InconsistentRefusal),
            ),
            // Within the allowance it still holds.
            (
                Some(running("f", now - skew_ms() + 1)),
                Ok(Refused(Refusal::InProgress {
                    lease_until_ms: now - skew_ms() + 1,
                })),
            ),
            // Expired (checked here, whatever TTL did): never answers.
            (
                Some(done("f", now / 1000)),
                Err(StoreError::InconsistentRefusal),
            ),
            (
                Some(done("g", now / 1000 - 1)),
                Err(StoreError::InconsistentRefusal),
            ),
            (None, Err(StoreError::RefusedWithoutItem)),
        ];
        for (stored, want) in cases {
            assert_eq!(
                classify("f", "my-attempt", stored.as_ref(), now),
                want,
                "{stored:?}"
            );
        }
    }
}
