//! Reliability tests, Jepsen-style: "processing a message twice has the same
//! effect as once, and nothing is lost", checked against the real release
//! binary, started as Lambda starts it, against a real local DynamoDB
//! (in-process dynoxide), with an SQS event source mapping simulator in
//! front and a fault-injecting TCP proxy between the function and DynamoDB.
//!
//! Runs the binaries cargo builds with this test (`CARGO_BIN_EXE_*`), or
//! the ones `ORDER_CONSUMER_BIN`, `LEDGER_BIN` and `ORDER_API_BIN` name
//! (the shipped release build, say). See docs/reliability.md.
//!
//! Harness: `function` (the binary as an execution environment, under the
//! library's Runtime API emulator, `order_consumer::testing::runtime_api`),
//! `sqs` (queue + event source mapping), `db` (dynoxide), `model`
//! (workloads and the oracle), `naive` (a check-then-act consumer the
//! assertions must catch); the faults come from the library's proxy,
//! `order_consumer::testing::proxy`.
//! Tests: `backoff`, `convergence`, `concurrency`, `faults`, `crash`, `deadline`,
//! `hostile`, `load`, `logs`, `ledger` (the payment-ledger binary) and
//! `api` (the order-api binary).

mod db;
mod function;
mod harness;
mod model;
mod naive;
mod sqs;
mod util;

mod api;
mod backoff;
mod concurrency;
mod convergence;
mod crash;
mod deadline;
mod faults;
mod hostile;
mod ledger;
mod load;
mod logs;
