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
//! - [`ledger`] (`payment-ledger`): a transactional inbox; the entry and the
//!   balance move in one `TransactWriteItems`.
//! - [`notifier`] (`order-notifier`): the orders table's stream to a
//!   webhook, with deterministic Idempotency-Keys.
//! - [`api`] (`order-api`): `POST /orders` with an Idempotency-Key and
//!   `GET /orders/{orderId}` behind an API Gateway HTTP API; the order and
//!   its key commit in one `TransactWriteItems`, written exactly as the
//!   order consumer writes an OrderPlaced.
//! - `testing` (feature `testing`): test support as library code, for the
//!   tests, benches and examples.
//!
//! Each consumer is a folder with the same parts: `event` or parsing (the
//! contract), `domain` (pure classification), `store` (its DynamoDB
//! adapter), and in `mod.rs` its [`lambda_idempotency::Handler`], its
//! configuration and its Lambda function. The binaries are in `src/bin/`.

// Logs go through `tracing`; the one stdout writer is the EMF line (metrics.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod api;

pub mod ledger;
pub mod notifier;
pub mod orders;
#[cfg(feature = "testing")]
pub mod testing;
