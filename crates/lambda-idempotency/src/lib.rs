//! # Layout
//!
//! Idempotent message consumers on AWS Lambda: at-least-once delivery in,
//! effects that happen once out. Everything an adopter needs is at the
//! crate root ([`Handler`], [`Verdict`], [`process`], [`Function`],
//! [`Settings`], [`StoreError`], [`BackoffPolicy`], the record and event
//! types); the modules that stay public are those whose many items read
//! better with their path ([`config`], [`wire`], [`time`], [`metrics`],
//! [`bootstrap`], and with their features `dynamo` and `redelivery`).
//!
//! The modules form layers; a module uses only modules of lower layers
//! (`scripts/check_module_cycles.py` fails on a cycle):
//!
//! 1. `time` (epoch milliseconds, RFC 3339, attempt ids), `error` (the
//!    SDK-free [`StoreError`], [`ConfigError`], [`TraceSetupError`]),
//!    [`wire`] (the body reading every parser shares, [`ParseError`], the
//!    validated newtypes).
//! 2. `backoff` (how long a failed message stays invisible, per
//!    [`RetryClass`]), `records` (the Lambda events read strictly, what the
//!    batch needs of each record: [`BatchRecord`], [`BatchEvent`]).
//! 3. [`config`] (the [`Settings`] every function reads the same way, and
//!    the variables' parsers), `outcome` (the shared outcomes and the
//!    [`Verdict`] trait), `dynamo` (feature `dynamodb`: the client's retry
//!    and timeout policy, conditional writes, SDK errors mapped once).
//! 4. [`metrics`] (the per-invocation CloudWatch EMF line).
//! 5. `batch` (the engine: [`process`] parses every record, groups them,
//!    applies each group in order with bounded concurrency, honours strict
//!    ordering and the deadline, logs one line per record, and builds the
//!    partial-batch answer).
//! 6. `redelivery` (feature `sqs`: sets the back-off delay on the SQS
//!    messages a batch returns), `otel` (feature `otel`: OpenTelemetry
//!    traces over OTLP).
//! 7. [`bootstrap`] (logging, clients and traces, once per cold start).
//! 8. `function` (the Lambda function every consumer is: [`Function`],
//!    built with [`Function::builder`]).
//!
//! # Features
//!
//! `sqs` (SQS standard and FIFO records, their partial-batch response, the
//! visibility back-off), `dynamodb-streams` (stream records and their
//! response), `dynamodb` (the `dynamo` helpers and
//! `bootstrap::dynamodb_client`): all three by default. `otel`: traces.

// What adopters build on: every public item says what it is for.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Logs go through `tracing`; the one stdout writer is the EMF line (metrics).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod backoff;
mod batch;
pub mod bootstrap;
pub mod config;
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub mod dynamo;
mod error;
mod function;
pub mod metrics;
#[cfg(feature = "otel")]
mod otel;
mod outcome;
mod records;
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub mod redelivery;
pub mod time;
pub mod wire;

pub use backoff::{AfterThrottling, BackoffPolicy, Curve, MAX_VISIBILITY_SECS, RetryClass, jitter};
pub use batch::{
    BatchContext, BatchError, BatchReport, Handler, RecordReport, Starved, deadline_epoch_ms,
    deadline_from_epoch_ms, holds_group_back, process,
};
pub use config::{BatchSettings, Settings, Telemetry};
pub use error::{ConfigError, StoreError, TraceSetupError};
pub use function::{
    BuildError, ColdStart, Function, FunctionBuilder, emit_metrics, invocation_span,
};
pub use metrics::{OutcomeCounts, VisibilityTally};
pub use outcome::{Failure, Skip, Unsettled, Verdict, labels};
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub use records::SqsInput;
#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
pub use records::StreamInput;
pub use records::{BatchEvent, BatchRecord, Redeliverable, StrictInput};
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub use redelivery::Redelivery;
pub use wire::ParseError;

/// The SQS event types a handler's records come in, and its answer.
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
/// The DynamoDB stream event types, and their answer.
#[cfg(feature = "dynamodb-streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb-streams")))]
pub use aws_lambda_events::event::{
    dynamodb::{Event as StreamEvent, EventRecord as StreamRecord},
    streams::DynamoDbEventResponse,
};
/// The Lambda runtime the functions run on (its `Error`, `Context`,
/// `LambdaEvent`), re-exported so adopters use the same version.
pub use lambda_runtime;
