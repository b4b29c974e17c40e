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
    let function = Function::builder(Loyalty { client, table }).name("LoyaltyPoints");
    if std::env::var("EVENT_SOURCE").as_deref() == Ok("kinesis") {
        return function.build()?.serve::<KinesisMessage>().await;
    }
    // A standard queue: a customer's failed event holds back the rest.
    let function = function.key_order(KeyOrder::Strict).build()?;
    function.serve::<SqsMessage>().await
}
