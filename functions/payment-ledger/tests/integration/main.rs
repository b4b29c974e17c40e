//! The payment ledger's integration tests: the real handler code against a
//! real DynamoDB-compatible server (in-process dynoxide, or
//! `AWS_ENDPOINT_URL_DYNAMODB`). One test binary, so the SDK and the server
//! are linked once.

// The functions' log format captured in memory (the workspace's harness).
use lambda_idempotency_harness::captured;
// The sample-event folder checks (the workspace's harness).
use lambda_idempotency_harness::sample_files;

mod ledger;
mod logs;
mod sample_events;
