//! Lambda bootstrap: configuration, telemetry and the DynamoDB client are set
//! up once per cold start; each invocation only runs the batch.

use lambda_idempotency::{Function, bootstrap};
use order_consumer::orders::{self, OrderConfig, OrderHandler, store::OrderStore};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(OrderConfig::from_env()).await?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(table = %config.table_name, max_concurrency = config.runtime.max_concurrency, "cold start");
    let store = OrderStore::new(client, config.table_name.clone());
    Function::builder(OrderHandler::from_config(store, &config))
        .name(orders::NAME)?
        .redelivery(bootstrap::redelivery(&config.runtime).await)
        .settings(config.runtime)
        .build()?
        .serve()
        .await
}
