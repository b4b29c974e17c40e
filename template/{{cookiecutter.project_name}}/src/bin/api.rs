//! The HTTP API's Lambda: configuration, logging, the DynamoDB client and
//! the idempotency store once per cold start, then one request per
//! invocation.

use lambda_idempotency::{bootstrap, config};
use {{ cookiecutter.__crate }}::api::{Api, idempotency_store};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    bootstrap::init_tracing();
    // A misconfigured function fails its cold start (and tells the Runtime
    // API why) instead of answering requests.
    let env = |k: &str| std::env::var(k).ok();
    let table = bootstrap::or_init_error(config::required(&env, "TABLE_NAME")).await?;
    let keys = bootstrap::or_init_error(config::required(&env, "IDEMPOTENCY_TABLE")).await?;
    let client = bootstrap::dynamodb_client().await;
    let store = bootstrap::or_init_error(idempotency_store(client.clone(), &keys)).await?;
    lambda_http::run(Api::new(client, table).with_idempotency(store)).await
}
