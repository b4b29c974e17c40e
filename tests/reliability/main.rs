//! Reliability tests, Jepsen-style: "processing a message twice has the same
//! effect as once, and nothing is lost", checked against the real release
//! binary, started as Lambda starts it, against a real local DynamoDB
//! (in-process dynoxide), with an SQS event source mapping simulator in
//! front and a fault-injecting TCP proxy between the function and DynamoDB.
//!
//! Needs `target/release/order-consumer` (or `ORDER_CONSUMER_BIN`):
//! `cargo build --release --bin order-consumer`. See docs/reliability.md.
//!
//! Harness: `runtime_api` (Lambda Runtime API emulator), `function` (the
//! binary as an execution environment), `sqs` (queue + event source
//! mapping), `proxy` (faults), `db` (dynoxide), `model` (workloads and the
//! oracle), `naive` (a check-then-act consumer the assertions must catch).
//! Tests: `convergence`, `concurrency`, `faults`, `crash`, `deadline`,
//! `hostile`, `load`, and `ledger` (the payment-ledger binary).

mod db;
mod function;
mod harness;
mod http1;
mod model;
mod naive;
mod proxy;
mod runtime_api;
mod sqs;
mod util;

mod concurrency;
mod convergence;
mod crash;
mod deadline;
mod faults;
mod hostile;
mod ledger;
mod load;
