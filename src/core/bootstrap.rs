//! What every function does once per cold start.

use crate::core::config::{ConfigError, Runtime};
use crate::core::dynamo;
use crate::core::redelivery::{self, Redelivery};
use tracing_subscriber::EnvFilter;

/// The function's configuration, or a failed cold start with a clear log
/// line: a misconfigured function must not start consuming (and
/// acknowledging) messages.
pub fn config<C>(read: Result<C, ConfigError>) -> Result<C, lambda_runtime::Error> {
    read.map_err(|e| {
        tracing::error!(error = %e, "invalid configuration");
        e.into()
    })
}

/// JSON logs to stdout (CloudWatch), level from RUST_LOG (default info).
pub fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Only fails if a subscriber is already installed (then keep that one).
    let _ = tracing::subscriber::set_global_default(json_logs(std::io::stdout, filter));
}

/// The functions' log format: one JSON object per line, with the current
/// span's fields (messageId, orderId, eventId, seq, outcome) on every line of
/// a record. Public so that tests check the lines the functions really write.
pub fn json_logs<W>(writer: W, filter: EnvFilter) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .without_time() // Lambda timestamps every line already.
        .with_writer(writer)
        .finish()
}

/// The DynamoDB client, with the retry and timeout policy of
/// [`dynamo::retry_config`] and [`dynamo::timeout_config`]. Region,
/// credentials and `AWS_ENDPOINT_URL_DYNAMODB` (for local servers) come from
/// the standard AWS environment.
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    let sdk_config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(dynamo::retry_config())
        .timeout_config(dynamo::timeout_config())
        .load()
        .await;
    aws_sdk_dynamodb::Client::new(&sdk_config)
}

/// The SQS client that sets returned messages' visibility, when
/// `RETRY_BACKOFF` is on; `AWS_ENDPOINT_URL_SQS` points it at a local
/// server. Its own retries are few and its timeouts short
/// ([`redelivery::timeout_config`]): it runs in the deadline margin, and a
/// failure only means the message comes back later.
pub async fn redelivery(runtime: &Runtime) -> Option<Redelivery> {
    let policy = runtime.retry_backoff?;
    let sdk_config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
        .timeout_config(redelivery::timeout_config())
        .load()
        .await;
    Some(Redelivery::new(
        aws_sdk_sqs::Client::new(&sdk_config),
        policy,
    ))
}
