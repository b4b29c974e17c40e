//! Lambda bootstrap: configuration, telemetry and the DynamoDB client are set
//! up once per cold start; each invocation only runs the batch.

use lambda_runtime::{LambdaEvent, service_fn};
use order_consumer::config::Config;
use order_consumer::sqs::SqsInput;
use order_consumer::store::OrderStore;
use order_consumer::{Consumer, bootstrap};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(Config::from_env())?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(table = %config.table_name, max_concurrency = config.runtime.max_concurrency, "cold start");
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
