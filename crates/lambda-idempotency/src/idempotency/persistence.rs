//! The persistence seam: what [`super::Idempotent`] and the HTTP layer
//! need of a store, honoured by the DynamoDB store and (feature `valkey`)
//! the Valkey/Redis store.
//!
//! A sealed trait, not an enum, and not an open trait:
//!
//! - Not an enum: what only DynamoDB can do (the completion committed in
//!   one `TransactWriteItems` with the business write) stays on the
//!   DynamoDB store's own API, and a wrapper over it
//!   (`Idempotent::call_transact`) exists only for that store, checked at
//!   compile time; an enum would have to answer "not supported" at run
//!   time. An enum would also carry both clients' types in every build.
//! - Sealed: the contract (a claim that is atomic and conditional, a
//!   completion and a release conditional on the claim's attempt, a
//!   refusal classified by [`super::classify`]) is what makes a function
//!   run once; it is proven for the two stores here by one test suite, not
//!   promised by any type that could implement a trait.
//! - A default type parameter (`Idempotent<I, O, S = IdempotencyStore>`):
//!   code written for the DynamoDB store names no store type, and the
//!   bound is one an adopter sees the point of (the store's type).
//!
//! Its methods take and return only this crate's types: no client or SDK
//! type crosses the seam.

use std::fmt;
use std::future::Future;

use super::Claimed;
use super::store::{Claim, IdempotencyOptions, IdempotencyStore};
use crate::error::ConfigError;
use crate::error::StoreError;

pub(super) mod sealed {
    use super::IdempotencyOptions;

    /// Only this crate's stores implement [`super::Persistence`].
    pub trait Sealed {
        /// The same store with other options, already checked (the
        /// wrapper's key prefix, its cache).
        fn reconfigured(&self, options: IdempotencyOptions) -> Self
        where
            Self: Sized;
    }
}

/// A store of idempotency records: the DynamoDB store
/// ([`IdempotencyStore`]) or, with feature `valkey`, the Valkey/Redis
/// store (`ValkeyStore`). Sealed: the claim, completion and release
/// contract is what makes a function run once, and each store here is
/// tested against it.
pub trait Persistence: sealed::Sealed + Clone + fmt::Debug + Send + Sync + 'static {
    /// Claim the key: [`Claimed::Held`] for this attempt (also when the
    /// refusal is against this attempt's own claim, seen again after a
    /// lost answer), or the refusal, classified by [`super::classify`].
    fn claim(&self, c: &Claim<'_>) -> impl Future<Output = Result<Claimed, StoreError>> + Send;

    /// Complete this attempt's claim with `output`, replayed until the
    /// expiry counted from `c.now_ms`. Only this attempt's in-progress
    /// claim; its own completion seen again is a success. Errors:
    /// [`StoreError::ItemTooLarge`] before anything is sent.
    fn complete(
        &self,
        c: &Claim<'_>,
        output: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Give this attempt's in-progress claim back (best effort).
    fn release(&self, c: &Claim<'_>) -> impl Future<Output = ()> + Send;

    /// The options.
    fn options(&self) -> &IdempotencyOptions;

    /// The same store with other options. Errors: options that leave the
    /// store unusable (an expiry under a second).
    fn with_options(&self, options: IdempotencyOptions) -> Result<Self, ConfigError>;

    /// Epoch seconds at which a key completed at `now_ms` expires.
    fn expires_at(&self, now_ms: u64) -> u64;
}

impl sealed::Sealed for IdempotencyStore {
    fn reconfigured(&self, options: IdempotencyOptions) -> Self {
        IdempotencyStore::reconfigured(self, options)
    }
}

impl Persistence for IdempotencyStore {
    fn claim(&self, c: &Claim<'_>) -> impl Future<Output = Result<Claimed, StoreError>> + Send {
        IdempotencyStore::claim(self, c)
    }

    fn complete(
        &self,
        c: &Claim<'_>,
        output: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        IdempotencyStore::complete(self, c, output)
    }

    fn release(&self, c: &Claim<'_>) -> impl Future<Output = ()> + Send {
        IdempotencyStore::release(self, c)
    }

    fn options(&self) -> &IdempotencyOptions {
        IdempotencyStore::options(self)
    }

    fn with_options(&self, options: IdempotencyOptions) -> Result<Self, ConfigError> {
        IdempotencyStore::with_options(self, options)
    }

    fn expires_at(&self, now_ms: u64) -> u64 {
        IdempotencyStore::expires_at(self, now_ms)
    }
}
