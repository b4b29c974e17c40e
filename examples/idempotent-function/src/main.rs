//! The `idempotent-function` Lambda: `TABLE_NAME` (the idempotency table,
//! key attribute `id`), `PROVIDER_URL` (where charges go).

use idempotent_function::{Provider, handle, idempotent_charge};
use lambda_idempotency::lambda_runtime::{self, LambdaEvent, service_fn};
use lambda_idempotency::{
    IdempotencyOptions, IdempotencyStore, IdempotencyTable, bootstrap, config,
};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();
    let env = |k: &str| std::env::var(k).ok();
    let table = bootstrap::or_init_error(config::required(&env, "TABLE_NAME")).await?;
    let url = bootstrap::or_init_error(config::required(&env, "PROVIDER_URL")).await?;
    let provider = bootstrap::or_init_error(Provider::new(url)).await?;
    let table = bootstrap::or_init_error(IdempotencyTable::new(table)).await?;
    let client = bootstrap::dynamodb_client().await;
    let options = IdempotencyOptions::default();
    let store = bootstrap::or_init_error(IdempotencyStore::new(client, table, options)).await?;
    let charge = bootstrap::or_init_error(idempotent_charge(store)).await?;
    let (charge, provider) = (&charge, &provider);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handle(charge, provider, event)
    }))
    .await
}
