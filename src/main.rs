//! Lambda bootstrap: configuration, telemetry and the DynamoDB client are set
//! up once per cold start; each invocation only runs the batch.

use lambda_runtime::{LambdaEvent, service_fn};
use order_consumer::Consumer;
use order_consumer::config::Config;
use order_consumer::sqs::SqsInput;
use order_consumer::store::{self, OrderStore};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    init_tracing();

    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            // Fail the cold start loudly: a misconfigured function must not
            // start consuming (and acknowledging) messages.
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.into());
        }
    };

    // Region, credentials and AWS_ENDPOINT_URL_DYNAMODB (for local servers)
    // come from the standard AWS environment.
    let sdk_config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(store::retry_config())
        .timeout_config(store::timeout_config())
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config);
    tracing::info!(table = %config.table_name, max_concurrency = config.max_concurrency, "cold start");
    let consumer = Consumer::new(OrderStore::new(client, config.table_name.clone()), config);

    // `SqsInput`: an event or record that is not a JSON object fails the
    // invocation (the whole batch returns to the queue) instead of being
    // read as a record with an invented messageId.
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsInput>| {
        let consumer = &consumer;
        let event = LambdaEvent::new(event.payload.into_inner(), event.context);
        async move { consumer.handle(event).await }
    }))
    .await
}

/// JSON logs to stdout (CloudWatch), level from RUST_LOG (default info).
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .without_time() // Lambda timestamps every line already.
        .init();
}
