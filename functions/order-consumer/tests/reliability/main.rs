//! Reliability tests, Jepsen-style: "processing a message twice has the same
//! effect as once, and nothing is lost", checked against the real release
//! binary, started as Lambda starts it, against a real local DynamoDB
//! (in-process dynoxide), with an SQS event source mapping simulator in
//! front and a fault-injecting TCP proxy between the function and DynamoDB.
//!
//! Runs the binary cargo builds with this test (`CARGO_BIN_EXE_*`), or the
//! one `ORDER_CONSUMER_BIN` names (the shipped release build, say). See
//! docs/reliability.md. The other functions under functions/ run their own
//! binaries under this same harness.
//!
//! Harness (crates/lambda-idempotency-harness): `function` (the binary as
//! an execution environment, under the Runtime API emulator of
//! lambda-idempotency-testing), `sqs` (queue + event source mapping), `db`
//! (dynoxide); here: `model` (workloads and the oracle), `naive` (a
//! check-then-act consumer the assertions must catch); the faults come from
//! lambda-idempotency-testing's proxy.
//! Tests: `backoff`, `convergence`, `concurrency`, `faults`, `crash`, `deadline`,
//! `hostile`, `load` and `logs`.

mod model;
mod naive;

// The workspace's harness (crates/lambda-idempotency-harness), under the
// names these tests use.
use lambda_idempotency_harness::reliability::{db, function, harness, sqs, util};

use std::path::PathBuf;

/// The order consumer's binary: `ORDER_CONSUMER_BIN`, else the one cargo
/// built with this test (`CARGO_BIN_EXE_order-consumer`, same profile).
pub fn binary_path() -> PathBuf {
    function::function_binary("ORDER_CONSUMER_BIN", env!("CARGO_BIN_EXE_order-consumer"))
}

mod backoff;
mod concurrency;
mod convergence;
mod crash;
mod deadline;
mod faults;
mod hostile;
mod load;
mod logs;
