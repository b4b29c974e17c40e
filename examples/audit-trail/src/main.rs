//! The `audit-trail` Lambda: one binary for either source. `EVENT_SOURCE`
//! (`sqs`, the default, `kinesis` or `kafka`) says which event the function
//! is subscribed to; the handler is the same code on all three.

use audit_trail::{AuditHandler, NAME};
use lambda_idempotency::{
    ConfigError, Function, KafkaMessage, KinesisMessage, Settings, SqsMessage, bootstrap, config,
};

#[tokio::main]
async fn main() -> Result<(), lambda_idempotency::lambda_runtime::Error> {
    bootstrap::init_tracing();
    let env = |k: &str| std::env::var(k).ok();
    let table = bootstrap::or_init_error(config::required(&env, "TABLE_NAME")).await?;
    let settings = bootstrap::or_init_error(Settings::from_env(NAME, "audit-trail")).await?;
    let sdk = bootstrap::sdk_config().await;
    let client = bootstrap::dynamodb_client_from(&sdk);
    let function = Function::builder(AuditHandler { client, table }).name(NAME);
    match env("EVENT_SOURCE").as_deref().unwrap_or("sqs") {
        // Returned messages come back after a back-off (RETRY_BACKOFF=off:
        // after the queue's visibility timeout).
        "sqs" => {
            let redelivery = bootstrap::redelivery(&sdk, &settings);
            let function = function.redelivery(redelivery).settings(settings);
            function.build()?.serve::<SqsMessage>().await
        }
        // A stream retries from the answer's lowest sequence number itself.
        "kinesis" => {
            let function = function.settings(settings);
            function.build()?.serve::<KinesisMessage>().await
        }
        // Amazon MSK or self-managed Kafka: Lambda resumes each partition
        // from the lowest offset the answer lists.
        "kafka" => {
            let function = function.settings(settings);
            function.build()?.serve::<KafkaMessage>().await
        }
        // A source it cannot read fails the cold start, before any event.
        _ => {
            let invalid = ConfigError::Invalid {
                var: "EVENT_SOURCE",
                reason: "must be sqs, kinesis or kafka".into(),
            };
            bootstrap::or_init_error(Err::<(), _>(invalid)).await
        }
    }
}
