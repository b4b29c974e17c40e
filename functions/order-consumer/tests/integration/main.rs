//! Integration tests: the real handler code against a real DynamoDB-compatible
//! server (in-process dynoxide, or `AWS_ENDPOINT_URL_DYNAMODB`). One test
//! binary, so the SDK and the server are linked once. The other functions'
//! own tests are in functions/*/tests; what the library does for any
//! handler (batches, retry timing, redelivery, OpenTelemetry) is tested in
//! crates/lambda-idempotency/tests/engine.

// The functions' log format captured in memory (the workspace's harness).
use lambda_idempotency_harness::captured;
// The sample-event folder checks (the workspace's harness).
use lambda_idempotency_harness::sample_files;

mod binary;
mod cache;
mod faults;
mod labels;
mod logs;
mod outcomes;
mod sample_events;
