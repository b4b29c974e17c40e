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
//! # Stores
//!
//! [`Idempotent`] and the HTTP layer work over a [`Persistence`]: the
//! DynamoDB store ([`IdempotencyStore`], the default type parameter, so
//! code that names no store type is code for it) or, with the feature
//! `valkey`, `ValkeyStore` on Valkey or Redis. A sealed trait rather than
//! an enum: what only DynamoDB can do (the transactional completion above)
//! is then a method that exists only on the DynamoDB form, checked when
//! compiling rather than refused at run time, and a build carries only the
//! clients it uses. Sealed, because the contract (an atomic claim, a
//! completion and release conditional on the attempt, refusals classified
//! by [`classify`]) is what makes a function run once, and each store here
//! is tested against one suite for it. Its methods name only this crate's
//! types.
//!
//! # Layers
//!
//! This module uses `dynamo`, `config`, `time` and `error`; no module
//! below it uses it. Inside, each a module of its own: the pure policy
//! (`decision`: [`classify`], the lease and expiry arithmetic;
//! `canonical`: [`fingerprint`], [`hashed_key`]), the store trait
//! (`persistence`), the DynamoDB adapter (`store`), the Valkey adapter
//! (`valkey`), the byte-bounded cache of completed records (`cache`), and
//! the wrapper (`function`). This file only declares and re-exports.

mod cache;
mod canonical;
mod decision;
mod function;
#[cfg(feature = "valkey")]
mod iam;
mod persistence;
mod store;
#[cfg(feature = "valkey")]
mod valkey;

#[cfg(feature = "http")]
pub(crate) use canonical::hex;
pub use canonical::{fingerprint, hashed_key, json_fingerprint};
pub(crate) use decision::skew_ms;
pub use decision::{
    CLOCK_SKEW_ALLOWANCE, Claimed, Record, Refusal, Stored, claim_expires_at, classify, is_expired,
    lease_is_live, may_take_over,
};
pub use function::{IdempotencyError, Idempotent, LeaseEnd, NotStored};
pub use persistence::Persistence;
#[cfg(feature = "valkey")]
#[cfg_attr(docsrs, doc(cfg(feature = "valkey")))]
pub use {
    iam::IamAuth,
    valkey::{ValkeyConfig, ValkeyStore},
};

pub use store::{
    Claim, IdempotencyOptions, IdempotencyStore, IdempotencyTable, LegacyOutput, MAX_ITEM_BYTES,
    TransactError,
};
