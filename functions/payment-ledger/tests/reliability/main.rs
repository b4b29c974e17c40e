//! Reliability tests of the payment ledger, Jepsen-style, on the workspace's harness
//! (crates/lambda-idempotency-harness): the real binary, started as
//! Lambda starts it, against a real local DynamoDB, with faults between
//! them. Runs the binary cargo builds with this test, or the one `LEDGER_BIN`
//! names (the shipped release build, say). See docs/reliability.md.

// The workspace's harness (crates/lambda-idempotency-harness), under the
// names these tests use.
use lambda_idempotency_harness::reliability::{function, harness, sqs, util};

use std::path::PathBuf;

/// The payment ledger's binary: `LEDGER_BIN`, else the one cargo built with this test
/// (`CARGO_BIN_EXE_payment-ledger`, same profile).
pub fn ledger_binary_path() -> PathBuf {
    function::function_binary("LEDGER_BIN", env!("CARGO_BIN_EXE_payment-ledger"))
}

/// The harness's default binary: this function's.
pub fn binary_path() -> PathBuf {
    ledger_binary_path()
}

mod ledger;
