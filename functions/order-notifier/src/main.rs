//! The `order-notifier` Lambda: the orders table's DynamoDB stream in,
//! customer notifications out through an idempotent webhook. Same bootstrap
//! as the other functions: configuration, telemetry and clients once per
//! cold start, plus one read of the webhook URL from SSM.

use lambda_idempotency::{Function, bootstrap};
use order_notifier::url::{self, WebhookSource};
use order_notifier::{NotifierConfig, NotifierHandler};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::or_init_error(NotifierConfig::from_env()).await?;
    // One AWS configuration for both clients (SSM for the URL, DynamoDB),
    // loaded once per cold start.
    let sdk = bootstrap::sdk_config().await;
    // Read before the runtime loop starts: without a URL the function must
    // not take (and fail) stream batches. The error never carries the URL.
    let webhook_url = match url::webhook_url(&config.webhook, &sdk).await {
        Ok(url) => url,
        Err(e) => {
            tracing::error!(error = %e, "could not read the webhook URL; failing the cold start");
            bootstrap::report_init_error("WebhookUrlUnavailable", &e.to_string()).await;
            return Err(e.into());
        }
    };
    let client = bootstrap::dynamodb_client_from(&sdk);
    tracing::info!(
        notifications_table = %config.notifications_table,
        webhook_url_from = match config.webhook {
            WebhookSource::Url(_) => "NOTIFY_WEBHOOK_URL",
            WebhookSource::Parameter(_) => "SSM (NOTIFY_WEBHOOK_URL_PARAMETER)",
        },
        max_concurrency = config.runtime.max_concurrency(),
        "cold start"
    );
    let handler = match NotifierHandler::from_config(client, &config, &webhook_url) {
        Ok(handler) => handler,
        Err(e) => {
            // reqwest errors may name the URL: never log it.
            let e = e.without_url();
            tracing::error!(error = %e, "could not build the webhook client");
            bootstrap::report_init_error("WebhookClientUnavailable", &e.to_string()).await;
            return Err(e.into());
        }
    };

    Function::builder(handler)
        .name(order_notifier::NAME)
        .settings(config.runtime)
        .build()?
        .serve()
        .await
}
