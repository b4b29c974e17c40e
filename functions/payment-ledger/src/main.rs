//! The `payment-ledger` Lambda: SQS payment events applied to a ledger and
//! account balances, one TransactWriteItems per event. Same bootstrap as
//! `order-consumer`: configuration, telemetry and the client once per cold
//! start.

use lambda_idempotency::{Function, bootstrap};
use payment_ledger::{LedgerConfig, LedgerHandler};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(LedgerConfig::from_env()).await?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(
        ledger_table = %config.ledger_table,
        accounts_table = %config.accounts_table,
        max_concurrency = config.runtime.max_concurrency,
        "cold start"
    );
    Function::builder(LedgerHandler::from_config(client, &config))
        .name(payment_ledger::NAME)?
        .redelivery(bootstrap::redelivery(&config.runtime).await)
        .settings(config.runtime)
        .build()?
        .serve()
        .await
}
