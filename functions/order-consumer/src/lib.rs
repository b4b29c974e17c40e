//! The order consumer (`order-consumer`): SQS order events applied to the
//! orders table, each with one conditional `UpdateItem` that can succeed at
//! most once, and every refusal classified from the item DynamoDB returns
//! with it.
//!
//! Its parts are the order domain's crate, `orders` (crates/orders):
//! `event` (the contract), `domain` (pure classification), `store` (the
//! DynamoDB adapter), `cache` and the [`orders::OrderHandler`] the shared
//! batch machinery runs. They live in a crate, not here, because the order
//! API writes orders exactly as this function does and the order notifier
//! reads what it writes: both depend on that crate, and no function depends
//! on another (removing this one is deleting its folder, docs/adapting.md).
//! This package is the Lambda function: its binary (`src/main.rs`), its
//! tests, demo and benchmark.

// Logs go through `tracing`; the one stdout writer is the EMF line (metrics.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

/// The order domain, as `order_consumer::orders` (the paths this
/// function's tests and demo name).
pub use ::orders;
/// Test support (feature `testing`): `orders::testing`.
#[cfg(feature = "testing")]
pub use ::orders::testing;
