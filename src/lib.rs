//! Idempotent message consumers on AWS Lambda: at-least-once delivery in,
//! effects that happen once out.
//!
//! # Layout
//!
//! - `lambda_idempotency` (crates/lambda-idempotency): the shared batch machinery,
//!   DynamoDB plumbing, metrics, configuration and bootstrap. It imports
//!   nothing from the consumers below.
//! - [`orders`] (`order-consumer`): order events, one conditional
//!   `UpdateItem` each, refusals classified from the returned item.
//! - The other functions are workspace members of their own under
//!   `functions/` (README, "Layout"); those that write or read orders
//!   depend on this library for it.
//! - `testing` (feature `testing`): test support as library code, for the
//!   tests, benches and examples.
//!
//! A consumer has the same parts wherever it lives: `event` or parsing (the
//! contract), `domain` (pure classification), `store` (its DynamoDB
//! adapter), and in `mod.rs` (a member's `lib.rs`) its
//! [`lambda_idempotency::Handler`], its configuration and its Lambda
//! function. This package's binary is in `src/bin/`.

// Logs go through `tracing`; the one stdout writer is the EMF line (metrics.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod orders;
#[cfg(feature = "testing")]
pub mod testing;
