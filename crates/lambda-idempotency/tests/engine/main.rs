//! The library's own behaviour, whatever the handler: the batch engine
//! (ordering per key, wrappers, FIFO groups, concurrency, invocation
//! errors), the retry timing docs/retry-timing.md states, the visibility of
//! returned messages (redelivery) and the OpenTelemetry export (feature
//! `otel`, `make test-otel`). Driven through a real handler, the order
//! consumer's (crates/orders, feature `testing`), against a local DynamoDB:
//! these tests were the order consumer's until the root became a virtual
//! workspace; they test the engine, not orders. One test binary, so the SDK
//! and the server are linked once.

mod batches;
#[cfg(feature = "otel")]
mod otel;
mod redelivery;
mod retry_timing;
