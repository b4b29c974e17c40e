//! The `order-notifier` Lambda: the orders table's DynamoDB stream in,
//! customer notifications out through an idempotent webhook. Same bootstrap
//! as the other functions: configuration, telemetry and clients once per
//! cold start.

use lambda_runtime::{LambdaEvent, service_fn};
use order_consumer::bootstrap;
use order_consumer::notifier::{NotifierConfig, NotifierFunction};
use order_consumer::sqs::StreamInput;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(NotifierConfig::from_env())?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(
        notifications_table = %config.notifications_table,
        max_concurrency = config.runtime.max_concurrency,
        "cold start"
    );
    let notifier = NotifierFunction::new(client, config)?;

    // Read strictly, as the SQS functions do: records must be JSON objects.
    lambda_runtime::run(service_fn(|event: LambdaEvent<StreamInput>| {
        let notifier = &notifier;
        let event = LambdaEvent::new(event.payload.into_inner(), event.context);
        async move { notifier.handle(event).await }
    }))
    .await
}
