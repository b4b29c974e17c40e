//! The `loyalty-points` Lambda: `EVENT_SOURCE` (`sqs`, the default, or
//! `kinesis`) says which event source the function is subscribed to.

use lambda_idempotency::lambda_runtime::Error;
use lambda_idempotency::{Function, KeyOrder, KinesisMessage, SqsMessage, bootstrap};
use loyalty_points::Loyalty;

#[tokio::main]
async fn main() -> Result<(), Error> {
    bootstrap::init_tracing();
    let table = std::env::var("TABLE_NAME")?;
    let client = bootstrap::dynamodb_client().await;
    // Its settings (MAX_CONCURRENCY, METRICS_NAMESPACE, ...) are read from
    // the environment by `build`, once per cold start.
    if std::env::var("EVENT_SOURCE").as_deref() == Ok("kinesis") {
        let kinesis = Function::builder(Loyalty::<KinesisMessage>::new(client, table));
        return kinesis.name("LoyaltyPoints").build()?.serve().await;
    }
    // A standard queue: a customer's failed event holds back the rest.
    let sqs = Function::builder(Loyalty::<SqsMessage>::new(client, table));
    let sqs = sqs.name("LoyaltyPoints").key_order(KeyOrder::Strict);
    sqs.build()?.serve().await
}
