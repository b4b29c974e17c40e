//! Tables for tests, the local demo and tooling. In AWS the tables come
//! from template.yaml; the production adapters never create one.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use lambda_idempotency::StoreError;
use lambda_idempotency_testing::tables::{create_streamed_table, create_table};

/// The orders table (hash key `order_id`), as template.yaml creates it.
pub async fn create_orders_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_table(client, table, crate::orders::store::KEY).await
}

/// The orders table with its stream (old and new images), as template.yaml
/// creates it: the order notifier's outbox.
pub async fn create_streamed_orders_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_streamed_table(client, table, crate::orders::store::KEY).await
}

/// The order API's idempotency table (hash key `idempotency_key`, TTL on
/// `expires_at`), as template.yaml creates it. The API checks expiry in
/// code, so a server without TTL support serves the tests just as well.
pub async fn create_idempotency_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_table(client, table, crate::api::store::KEY).await?;
    let ttl = aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(crate::api::store::TTL_ATTRIBUTE)
        .build()
        .map_err(|e| StoreError::Client {
            code: e.to_string(),
        })?;
    if let Err(e) = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await
    {
        tracing::warn!(error = %DisplayErrorContext(&e), "UpdateTimeToLive failed; expiry is checked in code anyway");
    }
    Ok(())
}
