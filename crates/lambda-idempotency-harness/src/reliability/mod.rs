//! Reliability tests, Jepsen-style, for any function of the workspace: its
//! real binary under the Lambda Runtime API emulator, a real local DynamoDB
//! (in-process dynoxide) behind the fault proxy, and an SQS event source
//! mapping simulator in front (docs/reliability.md). Each function's
//! tests/reliability/main.rs imports these modules and says which binary
//! they run (its `binary_path`).

pub mod db;
pub mod function;
pub mod harness;
pub mod sqs;
pub mod util;
