//! Integration tests: the real handler code against a real DynamoDB-compatible
//! server (in-process dynoxide, or `AWS_ENDPOINT_URL_DYNAMODB`). One test
//! binary, so the SDK and the server are linked once. The other functions'
//! own tests are in functions/*/tests.

#[path = "../support/captured.rs"]
mod captured;

#[path = "../support/sample_files.rs"]
mod sample_files;

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
