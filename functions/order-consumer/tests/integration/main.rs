//! Integration tests: the real handler code against a real DynamoDB-compatible
//! server (in-process dynoxide, or `AWS_ENDPOINT_URL_DYNAMODB`). One test
//! binary, so the SDK and the server are linked once. The other functions'
//! own tests are in functions/*/tests.

// The functions' log format captured in memory (the workspace's harness).
use lambda_idempotency_harness::captured;
// The sample-event folder checks (the workspace's harness).
use lambda_idempotency_harness::sample_files;

mod batches;
mod cache;
mod faults;
mod labels;
mod logs;
#[cfg(feature = "otel")]
mod otel;
mod outcomes;
mod redelivery;
mod retry_timing;
mod sample_events;
