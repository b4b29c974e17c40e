//! The `order-notifier` Lambda: the orders table's DynamoDB stream in,
//! customer notifications out through an idempotent webhook. Same bootstrap
//! as the other functions: configuration, telemetry and clients once per
//! cold start.

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use lambda_runtime::{LambdaEvent, service_fn};
use order_consumer::bootstrap;
use order_consumer::notifier::{NotifierConfig, NotifierFunction};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = match NotifierConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.into());
        }
    };
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(
        notifications_table = %config.notifications_table,
        max_concurrency = config.max_concurrency,
        "cold start"
    );
    let notifier = NotifierFunction::new(client, config)?;

    lambda_runtime::run(service_fn(|event: LambdaEvent<StreamEvent>| {
        let notifier = &notifier;
        async move { notifier.handle(event).await }
    }))
    .await
}
