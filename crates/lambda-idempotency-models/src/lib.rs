//! Model checks of the idempotency protocols with
//! [stateright](https://docs.rs/stateright): every interleaving of a
//! bounded world (deliveries, requests, Lambda instances, a store with
//! DynamoDB's semantics, and the faults: redelivery, crashes, lost answers,
//! throttling, lease expiry, clock skew), with every decision made by the
//! crates' own pure functions, never by a copy of their logic.
//!
//! One module per protocol; each states its actors, faults, bounds,
//! properties and the mutations (re-introduced defects) that its tests
//! require the checker to catch. docs/reliability.md ("What is
//! model-checked") sums them up. `make test` runs the small bounds;
//! `make model-check-deep` (MODEL_CHECK_DEEP=1) the larger ones.

pub mod http;
pub mod idempotent;
pub mod orders;
pub mod trace;
