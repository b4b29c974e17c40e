//! The order notifier's integration tests: the real handler code against a
//! real DynamoDB-compatible server (in-process dynoxide, or
//! `AWS_ENDPOINT_URL_DYNAMODB`), a local webhook provider and a local SSM.
//! One test binary, so the SDK and the server are linked once.

// The functions' log format captured in memory (the workspace's harness).
use lambda_idempotency_harness::captured;

mod logs;
mod notifier;
mod ssm;
mod streams;
