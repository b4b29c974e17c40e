//! The third floor of `make bench`: the DynamoDB floor plus the least a
//! DynamoDB consumer does with a batch, one plain conditional `PutItem` per
//! record (`attribute_not_exists` on the key, the record's message id),
//! one record after another. Its first response pays what any consumer's
//! first write pays (the connection, endpoint resolution, the credential
//! provider's first answer, SigV4 signing), and nothing of idempotency,
//! telemetry or configuration: the fair floor for a consumer's first
//! invocation.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    // The table's name is configuration, read once at init as a real
    // function reads it; its key attribute is the orders table's.
    let table = std::env::var("TABLE_NAME").map_err(|_| "TABLE_NAME is not set")?;
    let sdk_config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let client = client.clone();
        let table = table.clone();
        async move {
            let mut response = SqsBatchResponse::default();
            for record in event.payload.records {
                let id = record.message_id.unwrap_or_default();
                let put = client
                    .put_item()
                    .table_name(&table)
                    .item("order_id", AttributeValue::S(id.clone()))
                    .condition_expression("attribute_not_exists(order_id)")
                    .send()
                    .await;
                match put {
                    // Written, or written before (a redelivery): acked.
                    Ok(_) => {}
                    Err(SdkError::ServiceError(e))
                        if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) => {}
                    // Anything else: redelivered.
                    // The struct is non_exhaustive: built from its default.
                    #[allow(clippy::field_reassign_with_default)]
                    Err(_) => {
                        let mut failure = BatchItemFailure::default();
                        failure.item_identifier = id;
                        response.batch_item_failures.push(failure);
                    }
                }
            }
            Ok::<_, Error>(response)
        }
    }))
    .await
}
