#![deny(missing_docs)]
//! Test support for functions built on `lambda-idempotency`, as library
//! code: what the tests of a consumer, a reliability suite and a benchmark
//! need that is not about any one consumer's events.
//!
//! # Layout
//!
//! - [`dynamodb`]: a real DynamoDB-compatible server per test (in-process
//!   dynoxide), or any endpoint named by `AWS_ENDPOINT_URL_DYNAMODB`;
//!   clients, unique table names, a request counter.
//! - [`tables`]: tables created as a template would create them.
//! - [`test_db`]: [`TestDb`], a test's own tables on its own local
//!   DynamoDB (or `AWS_ENDPOINT_URL_DYNAMODB`): the one fixture consumers'
//!   tests build on.
//! - [`sqs`]: SQS records and batches exactly as Lambda delivers them.
//! - [`stream_records`]: DynamoDB stream records.
//! - [`kinesis`] (feature `kinesis`): Kinesis Data Streams records and
//!   batches as Lambda delivers them.
//! - [`kafka`] (feature `kafka`): Amazon MSK and self-managed Apache Kafka
//!   records and batches as Lambda delivers them.
//! - [`runtime_api`]: a Lambda Runtime API emulator, to run a real binary.
//! - [`sqs_endpoint`]: an SQS endpoint that records visibility changes.
//! - [`proxy`]: a fault-injecting proxy that is also a faulty DynamoDB.
//! - [`provider`]: a local webhook receiver.
//! - [`labels`]: a verdict's metric labels checked against its variants.
//! - [`http1`]: the one HTTP/1.1 reader these local servers share.
//! - [`rng`]: a seeded RNG, so a failing seed replays.
//! - [`api_gateway`] (feature `http`): API Gateway HTTP API (payload 2.0)
//!   requests, read by `lambda_http`'s own deserializer.
//! - [`valkey`] (feature `valkey`): a real Valkey/Redis server per test,
//!   on a free loopback port, plain or TLS only.
//!
//! # Features
//!
//! None by default: each of `kinesis`, `kafka`, `idempotency`, `http` and `valkey` turns on
//! the library's feature of the same name with the support for it, so
//! your test build has the library's features your function has. Turn on
//! the ones your function turns on.

// Test support reports on stderr what it could not clean up.
#![allow(clippy::print_stderr)]

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod api_gateway;
pub mod dynamodb;
pub mod http1;
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub mod kafka;
#[cfg(feature = "kinesis")]
#[cfg_attr(docsrs, doc(cfg(feature = "kinesis")))]
pub mod kinesis;
pub mod labels;
pub mod provider;
pub mod proxy;
pub mod rng;
pub mod runtime_api;
pub mod sqs;
pub mod sqs_endpoint;
pub mod stream_records;
pub mod tables;
pub mod test_db;
#[cfg(feature = "valkey")]
#[cfg_attr(docsrs, doc(cfg(feature = "valkey")))]
pub mod valkey;

#[cfg(feature = "http")]
pub use api_gateway::{HttpApiCaller, HttpApiError, HttpApiRequest, hold_key};
pub use dynamodb::{
    RequestCounter, client_for, client_with, scan_all, serve_dynoxide, start_dynoxide, unique_name,
};
pub use labels::assert_labels_cover_variants;
pub use sqs::{batch, batch_of, failed_ids, far_deadline, fifo_record, record};
#[cfg(feature = "idempotency")]
pub use tables::create_idempotency_table;
pub use tables::{create_streamed_table, create_table};
pub use test_db::TestDb;

/// The lambda_http crate whose `Request` [`HttpApiRequest`] builds (its
/// `http::Method`), for a test that does not depend on it itself.
#[cfg(feature = "http")]
pub use lambda_http;

/// The dynoxide crate this support runs, for a test that serves its own
/// database (its streams, a file-backed one).
pub use dynoxide;
