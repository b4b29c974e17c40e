//! Lambda bootstrap of the order API: configuration, telemetry and the
//! DynamoDB client are set up once per cold start; each request only runs
//! the handler.

use lambda_idempotency::bootstrap;
use order_api::store::ApiStore;
use order_api::{ApiConfig, OrderApi};
use orders::store::OrderStore;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::or_init_error(ApiConfig::from_env()).await?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(
        table = %config.table_name,
        idempotency_table = %config.idempotency_table,
        ttl_seconds = config.idempotency_ttl_seconds,
        auth = config.auth.as_str(),
        "cold start"
    );
    if config.auth == order_api::event::AuthMode::None {
        // The local loop's setting: loud, so that it is never missed in a
        // deployed function's logs.
        tracing::warn!(
            "API_AUTH=none: no authorizer, every caller is one anonymous principal (local loop only)"
        );
    }
    let orders = OrderStore::new(client.clone(), config.table_name.clone());
    // The idempotency table's name, checked as DynamoDB would (a cold
    // start that fails says so, as for any other configuration).
    let store = bootstrap::or_init_error(ApiStore::new(
        client,
        config.idempotency_table.clone(),
        orders,
    ))
    .await?;
    OrderApi::new(store, &config).serve().await
}
