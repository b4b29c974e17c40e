//! Idempotent message consumers on AWS Lambda: at-least-once delivery in,
//! effects that happen once out.
//!
//! # Layout
//!
//! - [`batch`]: runs one batch for any [`batch::Handler`]: parses every
//!   record first, groups them, applies each group in order with bounded
//!   concurrency, honours strict ordering (FIFO, streams) and the deadline,
//!   logs one line per record, and builds the partial-batch answer.
//! - [`outcome`]: the outcomes every consumer shares (Invalid, Failed,
//!   NotAttempted), their labels and log levels, and the [`outcome::Verdict`]
//!   a consumer's outcome implements.
//! - [`backoff`]: how long a failed message stays invisible before it comes
//!   back, per outcome class.
//! - [`redelivery`]: sets that delay on the SQS messages a batch returns
//!   (ChangeMessageVisibilityBatch), without ever deciding whether they
//!   return.
//! - [`function`]: the Lambda function wrapper every consumer shares, for
//!   SQS and stream events alike.
//! - [`records`]: the Lambda events (SQS, DynamoDB streams) read strictly,
//!   and what the batch needs to know of each record.
//! - [`wire`]: the body reading every parser shares (size, JSON, SNS and
//!   EventBridge envelopes), the specific [`wire::ParseError`] and the
//!   validated newtypes.
//! - [`dynamo`]: the client's retry and timeout policy, conditional writes,
//!   SDK errors mapped to [`error::StoreError`].
//! - [`error`]: storage failures free of SDK types.
//! - [`metrics`]: the per-invocation CloudWatch EMF line.
//! - [`config`]: the settings every function reads the same way.
//! - [`bootstrap`]: logging and clients, once per cold start; the traces'
//!   setup, parent and per-invocation flush (no-ops without the feature
//!   `otel`).
//! - `otel` (feature `otel` only): OpenTelemetry traces over OTLP.
//! - [`time`]: epoch milliseconds, RFC 3339, attempt ids.

// What adopters build on: every public item says what it is for.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Logs go through `tracing`; the one stdout writer is the EMF line (metrics).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod backoff;
pub mod batch;
pub mod bootstrap;
pub mod config;
pub mod dynamo;
pub mod error;
pub mod function;
pub mod metrics;
#[cfg(feature = "otel")]
pub mod otel;
pub mod outcome;
pub mod records;
pub mod redelivery;
pub mod time;
pub mod wire;
