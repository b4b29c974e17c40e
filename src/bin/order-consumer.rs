//! Lambda bootstrap: configuration, telemetry and the DynamoDB client are set
//! up once per cold start; each invocation only runs the batch.

use lambda_idempotency::bootstrap;
use order_consumer::orders::OrderConfig;
use order_consumer::orders::store::OrderStore;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(OrderConfig::from_env()).await?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(table = %config.table_name, max_concurrency = config.runtime.max_concurrency, "cold start");
    let redelivery = bootstrap::redelivery(&config.runtime).await;
    let consumer = order_consumer::orders::function(
        OrderStore::new(client, config.table_name.clone()),
        config,
    )
    .with_redelivery(redelivery);

    consumer.serve().await
}
