//! The `order-notifier` Lambda: the orders table's DynamoDB stream in,
//! customer notifications out through an idempotent webhook. Same bootstrap
//! as the other functions: configuration, telemetry and clients once per
//! cold start, plus one read of the webhook URL from SSM.

use order_consumer::core::bootstrap;
use order_consumer::notifier::url::{self, WebhookSource};
use order_consumer::notifier::{NotifierConfig, NotifierFunction};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    bootstrap::init_tracing();

    let config = bootstrap::config(NotifierConfig::from_env())?;
    // Read before the runtime loop starts: without a URL the function must
    // not take (and fail) stream batches. The error never carries the URL.
    let webhook_url = url::webhook_url(&config.webhook).await.map_err(|e| {
        tracing::error!(error = %e, "could not read the webhook URL; failing the cold start");
        e
    })?;
    let client = bootstrap::dynamodb_client().await;
    tracing::info!(
        notifications_table = %config.notifications_table,
        webhook_url_from = match config.webhook {
            WebhookSource::Url(_) => "NOTIFY_WEBHOOK_URL",
            WebhookSource::Parameter(_) => "SSM (NOTIFY_WEBHOOK_URL_PARAMETER)",
        },
        max_concurrency = config.runtime.max_concurrency,
        "cold start"
    );
    let notifier = NotifierFunction::new(client, config, &webhook_url).map_err(|e| {
        // reqwest errors may name the URL: never log it.
        let e = e.without_url();
        tracing::error!(error = %e, "could not build the webhook client");
        e
    })?;

    notifier.serve().await
}
