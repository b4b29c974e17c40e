//! The payment ledger's integration tests: the real handler code against a
//! real DynamoDB-compatible server (in-process dynoxide, or
//! `AWS_ENDPOINT_URL_DYNAMODB`). One test binary, so the SDK and the server
//! are linked once.

// The root's log capture (the functions' own log format).
#[path = "../../../order-consumer/tests/support/captured.rs"]
mod captured;
// The root's sample-event file checks.
#[path = "../../../order-consumer/tests/support/sample_files.rs"]
mod sample_files;

mod ledger;
mod logs;
mod sample_events;
