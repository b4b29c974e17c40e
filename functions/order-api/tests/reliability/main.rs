//! Reliability tests of the order API, Jepsen-style, on the workspace's harness
//! (crates/lambda-idempotency-harness): the real binary, started as
//! Lambda starts it, against a real local DynamoDB, with faults between
//! them. Runs the binary cargo builds with this test, or the one `ORDER_API_BIN`
//! names (the shipped release build, say). See docs/reliability.md.

// The workspace's harness (crates/lambda-idempotency-harness), under the
// names these tests use.
use lambda_idempotency_harness::reliability::{function, harness};

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
