//! Tables for tests, the local demo and tooling. In AWS the tables come
//! from template.yaml; the production adapters never create one.

use aws_sdk_dynamodb::Client;
use lambda_idempotency::StoreError;
use lambda_idempotency_testing::tables::{create_streamed_table, create_table};

/// The orders table (hash key `order_id`), as template.yaml creates it.
pub async fn create_orders_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_table(client, table, crate::store::KEY).await
}

/// The orders table with its stream (old and new images), as template.yaml
/// creates it: the order notifier's outbox.
pub async fn create_streamed_orders_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_streamed_table(client, table, crate::store::KEY).await
}
