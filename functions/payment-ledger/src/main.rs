//! The `payment-ledger` Lambda: SQS payment events applied to a ledger and
//! account balances, one TransactWriteItems per event. Same bootstrap as
//! `order-consumer`: configuration, telemetry and the client once per cold
//! start.

use lambda_idempotency::{Function, bootstrap};
use payment_ledger::{LedgerConfig, LedgerHandler};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::or_init_error(LedgerConfig::from_env()).await?;
    // One AWS configuration for both clients (DynamoDB, and SQS for the
    // visibility back-off): loaded once per cold start.
    let sdk = bootstrap::sdk_config().await;
    let client = bootstrap::dynamodb_client_from(&sdk);
    tracing::info!(
        ledger_table = %config.ledger_table,
        accounts_table = %config.accounts_table,
        max_concurrency = config.runtime.max_concurrency(),
        "cold start"
    );
    Function::builder(LedgerHandler::from_config(client, &config))
        .name(payment_ledger::NAME)
        .redelivery(bootstrap::redelivery(&sdk, &config.runtime))
        .settings(config.runtime)
        .build()?
        .serve()
        .await
}
