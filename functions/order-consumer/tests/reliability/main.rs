//! Reliability tests, Jepsen-style: "processing a message twice has the same
//! effect as once, and nothing is lost", checked against the real release
//! binary, started as Lambda starts it, against a real local DynamoDB
//! (in-process dynoxide), with an SQS event source mapping simulator in
//! front and a fault-injecting TCP proxy between the function and DynamoDB.
//!
//! Runs the binary cargo builds with this test (`CARGO_BIN_EXE_*`), or the
//! one `ORDER_CONSUMER_BIN` names (the shipped release build, say). See
//! docs/reliability.md. The functions under functions/ run their own
//! binaries under this same harness (their tests/reliability/main.rs
//! includes it with `#[path]`).
//!
//! Harness: `function` (the binary as an execution environment, under the
//! library's Runtime API emulator, `order_consumer::testing::runtime_api`),
//! `sqs` (queue + event source mapping), `db` (dynoxide), `model`
//! (workloads and the oracle), `naive` (a check-then-act consumer the
//! assertions must catch); the faults come from the library's proxy,
//! `order_consumer::testing::proxy`.
//! Tests: `backoff`, `convergence`, `concurrency`, `faults`, `crash`, `deadline`,
//! `hostile`, `load` and `logs`.

mod db;
mod function;
mod harness;
mod model;
mod naive;
mod sqs;
mod util;

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
