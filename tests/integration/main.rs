//! Integration tests: the real handler code against a real DynamoDB-compatible
//! server (in-process dynoxide, or `AWS_ENDPOINT_URL_DYNAMODB`). One test
//! binary, so the SDK and the server are linked once.

mod api;
mod batches;
mod cache;
mod faults;
mod labels;
mod ledger;
mod logs;
mod notifier;
#[cfg(feature = "otel")]
mod otel;
mod outcomes;
mod redelivery;
mod retry_timing;
mod sample_events;
mod ssm;
mod streams;
