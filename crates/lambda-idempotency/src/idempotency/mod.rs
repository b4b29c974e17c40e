//! Idempotency for any async function (feature `idempotency`): a
//! DynamoDB store of keys, each claimed once, completed with the output it
//! produced, and replayed to every repeat, and [`Idempotent`], the wrapper
//! that runs an `async fn(Input) -> Result<Output, E>` once per key: what
//! Powertools' `idempotent_function` / `makeIdempotent` / `@Idempotent`
//! do.
//!
//! # How a key is used
//!
//! A first call costs two writes: a conditional PutItem that claims the
//! key (`IN_PROGRESS`, leased until the caller's deadline, carrying an id
//! unique to this attempt), then an UpdateItem that completes it with the
//! output and an expiry (a TTL attribute in epoch seconds). A repeat costs
//! one refused PutItem: the refusal brings the stored record back
//! (`ALL_OLD`), so a replay needs no read; with the in-memory cache on, a
//! repeat in the same process costs no request at all. A function that
//! fails gives its claim back (a conditional DeleteItem of this attempt's
//! own in-progress record), so a retry runs it again; a process that dies
//! leaves a claim whose lease ends at its deadline.
//!
//! What a refused claim means is decided by [`classify`], a pure function
//! of the stored record: the same payload completed (replay), another
//! payload under the key (an error), the same request in progress (an
//! error with when to retry), or this very attempt's own claim, seen again
//! after its answer was lost (the SDK re-sent the PutItem): that one is
//! held, not refused. Expiry is decided from the stored time, not left to
//! DynamoDB's TTL, which deletes up to days late.
//!
//! The transactional form, for a function whose effect is itself a
//! DynamoDB write: [`IdempotencyStore::completion`] is the completing write
//! as a `TransactWriteItem`, to commit in one `TransactWriteItems` with the
//! business write ([`IdempotencyStore::transact`] sends one with the
//! attempt as its ClientRequestToken), so no crash leaves one without the
//! other.
//!
//! # Layers
//!
//! This module uses `dynamo`, `config`, `time` and `error`; no module
//! below it uses it. Inside: the pure policy here ([`classify`],
//! [`fingerprint`]), the DynamoDB adapter (`store`), the byte-bounded cache
//! of completed records (`cache`), and the wrapper (`function`).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::StoreError;

mod cache;
mod function;
mod store;

pub use function::{IdempotencyError, Idempotent, LeaseEnd};

pub use store::{
    Claim, IdempotencyOptions, IdempotencyStore, IdempotencyTable, LegacyOutput, TransactError,
};

/// What the store holds for a key, read strictly from the stored item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A call with this key is running (or crashed) until `lease_until_ms`.
    InProgress {
        /// The fingerprint of its payload.
        fingerprint: String,
        /// The attempt that claimed it ([`Claim::attempt`]).
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
    /// [`Idempotent`]; any text for a caller of the store).
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
        } if *lease_until_ms > now_ms => {
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

/// Is a key that expires at `expires_at` (epoch seconds) expired at
/// `now_ms`? The same test as the claim's condition (`expires_at <= now`).
pub fn is_expired(expires_at: u64, now_ms: u64) -> bool {
    expires_at <= now_ms / 1000
}

/// SHA-256 of the value's canonical JSON (object keys sorted at every
/// level, no insignificant whitespace), in hex: two payloads that differ
/// only in key order or whitespace have the same fingerprint.
pub fn fingerprint(value: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    hex(&Sha256::digest(canonical.as_bytes()))
}

/// A key made of `parts`, hashed (SHA-256, hex), each part
/// length-prefixed so that no two lists of parts hash alike: bounded
/// whatever the input's length, and never the input in the clear.
pub fn hashed_key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex(&h.finalize())
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        // Scalars print in serde_json's one compact form.
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fingerprint_ignores_key_order_and_whitespace_only() {
        let a: Value =
            serde_json::from_str(r#"{"id":"c","amount":5,"x":{"b":1,"a":[1,2]}}"#).unwrap();
        let b: Value = serde_json::from_str(
            " {\n \"x\": {\"a\": [1, 2], \"b\": 1}, \"amount\": 5, \"id\": \"c\"}",
        )
        .unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        for other in [
            json!({"id":"c","amount":6,"x":{"b":1,"a":[1,2]}}),
            json!({"id":"c","amount":5,"x":{"b":1,"a":[2,1]}}),
            json!({"id":"c","amount":5}),
            json!({"id":"c","amount":"5","x":{"b":1,"a":[1,2]}}),
        ] {
            assert_ne!(fingerprint(&a), fingerprint(&other), "{other}");
        }
    }

    #[test]
    fn hashed_keys_separate_their_parts() {
        let keys = [
            hashed_key(&["ab", "c"]),
            hashed_key(&["a", "bc"]),
            hashed_key(&["abc"]),
            hashed_key(&["abc", ""]),
        ];
        let distinct: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len());
        assert!(keys.iter().all(|k| k.len() == 64 && !k.contains("abc")));
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
                Some(mine("f", now, live)),
                Err(StoreError::InconsistentRefusal),
            ),
            (
                Some(mine("f", now + 1, now / 1000)),
                Err(StoreError::InconsistentRefusal),
            ),
            // A lease at or before now is over: the claim should have held.
            (
                Some(running("f", now)),
                Err(StoreError::InconsistentRefusal),
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
