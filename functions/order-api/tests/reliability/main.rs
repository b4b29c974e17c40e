//! Reliability tests of the order API, Jepsen-style, on the root's harness
//! (tests/reliability, included with `#[path]`): the real binary, started as
//! Lambda starts it, against a real local DynamoDB, with faults between
//! them. Runs the binary cargo builds with this test, or the one `ORDER_API_BIN`
//! names (the shipped release build, say). See docs/reliability.md.

// The root's harness; each test binary uses its own part of it.
#[allow(dead_code)]
#[path = "../../../order-consumer/tests/reliability/db.rs"]
mod db;
#[allow(dead_code)]
#[path = "../../../order-consumer/tests/reliability/function.rs"]
mod function;
#[allow(dead_code)]
#[path = "../../../order-consumer/tests/reliability/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../../../order-consumer/tests/reliability/sqs.rs"]
mod sqs;
#[allow(dead_code)]
#[path = "../../../order-consumer/tests/reliability/util.rs"]
mod util;

use std::path::PathBuf;

/// The order API's binary: `ORDER_API_BIN`, else the one cargo built with this test
/// (`CARGO_BIN_EXE_order-api`, same profile).
pub fn api_binary_path() -> PathBuf {
    function::function_binary("ORDER_API_BIN", env!("CARGO_BIN_EXE_order-api"))
}

/// The harness's default binary: this function's.
pub fn binary_path() -> PathBuf {
    api_binary_path()
}

mod api;
