//! Tables for tests, the local demo and tooling, created as a template
//! would create them (on demand, string hash key, optionally a stream of old
//! and new images). A CreateTable whose answer was lost finds its table.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType,
};

use lambda_idempotency::StoreError;
#[cfg(feature = "idempotency")]
use lambda_idempotency::idempotency::IdempotencyTable;

/// Create a table with a string hash key, on demand.
pub async fn create_table(client: &Client, table: &str, key: &str) -> Result<(), StoreError> {
    create(client, table, key, false).await
}

/// Create the idempotency store's `table` as its layout says: a string
/// hash key, and for a shared table a string sort key; on demand.
#[cfg(feature = "idempotency")]
#[cfg_attr(docsrs, doc(cfg(feature = "idempotency")))]
pub async fn create_idempotency_table(
    client: &Client,
    table: &IdempotencyTable,
) -> Result<(), StoreError> {
    let built = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Client {
        code: e.to_string(),
    };
    let mut request = client
        .create_table()
        .table_name(table.table_name())
        .billing_mode(BillingMode::PayPerRequest);
    let keys = [
        Some((table.partition_key(), KeyType::Hash)),
        table.sort_key().map(|k| (k, KeyType::Range)),
    ];
    for (name, kind) in keys.into_iter().flatten() {
        request = request
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(name)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(built)?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(name)
                    .key_type(kind)
                    .build()
                    .map_err(built)?,
            );
    }
    if let Err(e) = request.send().await {
        tracing::warn!(error = %DisplayErrorContext(&e), "CreateTable failed");
        return Err(StoreError::Client {
            code: e.code().unwrap_or("CreateTableFailed").to_owned(),
        });
    }
    client
        .wait_until_table_exists()
        .table_name(table.table_name())
        .wait(Duration::from_secs(120))
        .await
        .map_err(|_| StoreError::Timeout)?;
    Ok(())
}

/// Create a table with a string hash key and a stream of old and new
/// images, as template.yaml creates the orders table (the notifier's
/// outbox).
pub async fn create_streamed_table(
    client: &Client,
    table: &str,
    key: &str,
) -> Result<(), StoreError> {
    create(client, table, key, true).await
}

async fn create(client: &Client, table: &str, key: &str, stream: bool) -> Result<(), StoreError> {
    let streamed = stream;
    let stream = stream
        .then(|| {
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
        })
        .transpose()
        .map_err(|e| StoreError::Client {
            code: e.to_string(),
        })?;
    let created = client
        .create_table()
        .set_stream_specification(stream)
        .table_name(table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(key)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(|e| StoreError::Client {
                    code: e.to_string(),
                })?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(key)
                .key_type(KeyType::Hash)
                .build()
                .map_err(|e| StoreError::Client {
                    code: e.to_string(),
                })?,
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    if let Err(e) = created {
        // On a loaded machine the first attempt can outlast the SDK's 2 s
        // attempt timeout after the server created the table; the SDK then
        // sends it again, which the server refuses as ResourceInUse. The
        // table this call asked for exists: that is success. Any other
        // table of that name (another key, no stream) is still an error.
        let exists_as_asked = e.code() == Some("ResourceInUseException")
            && is_table_as_asked(client, table, key, streamed).await;
        if !exists_as_asked {
            tracing::warn!(error = %DisplayErrorContext(&e), "CreateTable failed");
            return Err(StoreError::Client {
                code: e.code().unwrap_or("CreateTableFailed").to_owned(),
            });
        }
    }
    // Real DynamoDB needs a moment; local servers answer ACTIVE at once.
    client
        .wait_until_table_exists()
        .table_name(table)
        .wait(Duration::from_secs(120))
        .await
        .map_err(|_| StoreError::Timeout)?;
    Ok(())
}

/// Whether `table` exists with exactly the string hash key `key` (and a
/// stream of old and new images if `stream`), as [`create`] would make it.
async fn is_table_as_asked(client: &Client, table: &str, key: &str, stream: bool) -> bool {
    let Ok(described) = client.describe_table().table_name(table).send().await else {
        return false;
    };
    let Some(t) = described.table() else {
        return false;
    };
    let keys_match = matches!(
        t.key_schema(),
        [k] if k.attribute_name() == key && k.key_type() == &KeyType::Hash
    );
    let key_is_string = t
        .attribute_definitions()
        .iter()
        .any(|a| a.attribute_name() == key && a.attribute_type() == &ScalarAttributeType::S);
    let stream_matches = match t.stream_specification() {
        Some(s) => {
            s.stream_enabled() == stream
                && (!stream || s.stream_view_type() == Some(&StreamViewType::NewAndOldImages))
        }
        None => !stream,
    };
    keys_match && key_is_string && stream_matches
}
