//! The `loyalty-points` Lambda: `EVENT_SOURCE` (`sqs`, the default, or
//! `kinesis`) says which event source the function is subscribed to.

use lambda_idempotency::lambda_runtime::Error;
use lambda_idempotency::{Function, KeyOrder, KinesisMessage, Settings, SqsMessage, bootstrap};
use loyalty_points::Loyalty;

#[tokio::main]
async fn main() -> Result<(), Error> {
    bootstrap::init_tracing();
    let settings = Settings::from_env("LoyaltyPoints", "loyalty-points")?;
    let (table, client) = (
        std::env::var("TABLE_NAME")?,
        bootstrap::dynamodb_client().await,
    );
    if std::env::var("EVENT_SOURCE").as_deref() == Ok("kinesis") {
        let kinesis = Function::builder(Loyalty::<KinesisMessage>::new(client, table));
        return kinesis
            .name("LoyaltyPoints")
            .settings(settings)
            .build()?
            .serve()
            .await;
    }
    // A standard queue: a customer's failed event holds back the rest.
    let sqs = Function::builder(Loyalty::<SqsMessage>::new(client, table));
    let sqs = sqs.name("LoyaltyPoints").key_order(KeyOrder::Strict);
    sqs.settings(settings).build()?.serve().await
}
