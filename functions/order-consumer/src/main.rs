//! Lambda bootstrap: configuration, telemetry and the DynamoDB client are set
//! up once per cold start; each invocation only runs the batch.

use lambda_idempotency::{Function, bootstrap};
use orders::{OrderConfig, OrderHandler, store::OrderStore};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::or_init_error(OrderConfig::from_env()).await?;
    // One AWS configuration for both clients (DynamoDB, and SQS for the
    // visibility back-off): loaded once per cold start.
    let sdk = bootstrap::sdk_config().await;
    let client = bootstrap::dynamodb_client_from(&sdk);
    tracing::info!(table = %config.table_name, max_concurrency = config.runtime.max_concurrency(), "cold start");
    let store = OrderStore::new(client, config.table_name.clone());
    Function::builder(OrderHandler::from_config(store, &config))
        .name(orders::NAME)
        .redelivery(bootstrap::redelivery(&sdk, &config.runtime))
        .settings(config.runtime)
        .build()?
        .serve()
        .await
}
