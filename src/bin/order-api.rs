//! Lambda bootstrap of the order API: configuration, telemetry and the
//! DynamoDB client are set up once per cold start; each request only runs
//! the handler.

use order_consumer::api::store::ApiStore;
use order_consumer::api::{ApiConfig, OrderApi};
use order_consumer::core::bootstrap;
use order_consumer::orders::store::OrderStore;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(ApiConfig::from_env())?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(
        table = %config.table_name,
        idempotency_table = %config.idempotency_table,
        ttl_seconds = config.idempotency_ttl_seconds,
        "cold start"
    );
    let orders = OrderStore::new(client.clone(), config.table_name.clone());
    let store = ApiStore::new(client, config.idempotency_table.clone(), orders);
    OrderApi::new(store, &config).serve().await
}
