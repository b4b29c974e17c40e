//! The `reservations` Lambda: configuration, logging and the DynamoDB
//! client once per cold start, then one batch per invocation.

use lambda_idempotency::{Function, Settings, bootstrap, config};
use reservations::{NAME, ReservationHandler};

#[tokio::main]
async fn main() -> Result<(), lambda_idempotency::lambda_runtime::Error> {
    bootstrap::init_tracing();
    // A misconfigured function fails its cold start (and says why to the
    // Runtime API) instead of consuming messages.
    let env = |k: &str| std::env::var(k).ok();
    let table = bootstrap::or_init_error(config::required(&env, "TABLE_NAME")).await?;
    let settings = bootstrap::or_init_error(Settings::from_env(NAME, "reservations")).await?;
    // One AWS configuration for both clients (DynamoDB; SQS for the back-off).
    let sdk = bootstrap::sdk_config().await;
    let client = bootstrap::dynamodb_client_from(&sdk);
    Function::builder(ReservationHandler { client, table })
        .name(NAME)
        // Returned messages come back after a back-off (RETRY_BACKOFF=off:
        // after the queue's visibility timeout).
        .redelivery(bootstrap::redelivery(&sdk, &settings))
        .settings(settings)
        .build()?
        .serve()
        .await
}
