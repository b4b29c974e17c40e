//! Reliability tests of the payment ledger, Jepsen-style, on the root's harness
//! (tests/reliability, included with `#[path]`): the real binary, started as
//! Lambda starts it, against a real local DynamoDB, with faults between
//! them. Runs the binary cargo builds with this test, or the one `LEDGER_BIN`
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
