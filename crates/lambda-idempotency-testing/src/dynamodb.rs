//! A DynamoDB for tests: an in-process dynoxide server per test, or any
//! endpoint named by `AWS_ENDPOINT_URL_DYNAMODB`; clients with test
//! credentials; unique table names; a request counter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::types::AttributeValue;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A table name no other test (or process) uses: `{prefix}-{pid}-{nanos}-{n}`.
pub fn unique_name(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A client with the production retry and timeout settings.
pub fn client_for(endpoint: &str) -> Client {
    client_with(
        endpoint,
        lambda_idempotency::dynamo::retry_config(),
        lambda_idempotency::dynamo::timeout_config(),
    )
}

/// A client for a local endpoint with static test credentials and the
/// given policies (a test's own inspection client may want more patience
/// than production's).
pub fn client_with(
    endpoint: &str,
    retry: aws_sdk_dynamodb::config::retry::RetryConfig,
    timeout: aws_sdk_dynamodb::config::timeout::TimeoutConfig,
) -> Client {
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        .retry_config(retry)
        .timeout_config(timeout)
        .build();
    Client::from_conf(conf)
}

/// Start an in-process dynoxide server on an ephemeral port; returns its URL.
pub async fn start_dynoxide() -> String {
    serve_dynoxide(dynoxide::Database::memory().expect("in-memory dynoxide")).await
}

/// Serve `db` over HTTP on an ephemeral port; returns its URL. For a test
/// that keeps the database handle, e.g. to read its streams.
pub async fn serve_dynoxide(db: dynoxide::Database) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(dynoxide::server::serve_on(listener, db));
    format!("http://{addr}")
}

/// A client for `AWS_ENDPOINT_URL_DYNAMODB`, from the standard AWS
/// environment (dummy region and credentials if none are set, for local
/// servers).
pub async fn external_client() -> Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(lambda_idempotency::dynamo::retry_config())
        .timeout_config(lambda_idempotency::dynamo::timeout_config());
    if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
        loader = loader.region(Region::new("us-east-1"));
    }
    if std::env::var("AWS_ACCESS_KEY_ID").is_err() && std::env::var("AWS_PROFILE").is_err() {
        loader =
            loader.credentials_provider(Credentials::new("test", "test", None, None, "static"));
    }
    Client::new(&loader.load().await)
}

/// Delete test tables on the external endpoint, from `Drop`. The test's
/// runtime is about to stop (and may be a single thread that is blocked
/// here), so this runs on a thread of its own with its own runtime and its
/// own client, and waits for it: the tables are gone when the test ends.
pub fn delete_external_tables(tables: Vec<String>) {
    let deleting = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            let client = external_client().await;
            for t in tables {
                if let Err(e) = client.delete_table().table_name(&t).send().await {
                    eprintln!("could not delete test table {t}: {e}");
                }
            }
        });
    });
    let _ = deleting.join();
}

/// Counts HTTP requests at the point the SDK hands them to the connection
/// (`read_before_transmit` runs once per attempt), and how many are in
/// flight at once: until `read_after_transmit`, when the response arrived.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter(std::sync::Arc<Counts>);

/// The counts a [`RequestCounter`] shares with its clones.
#[derive(Debug, Default)]
pub struct Counts {
    sent: AtomicU64,
    in_flight: AtomicU64,
    peak: AtomicU64,
}

impl RequestCounter {
    /// Requests sent so far, SDK retries included.
    pub fn get(&self) -> u64 {
        self.0.sent.load(Ordering::SeqCst)
    }

    /// The most requests that were ever in flight together.
    #[allow(dead_code)]
    /// The most requests that were in flight at once.
    pub fn peak(&self) -> u64 {
        self.0.peak.load(Ordering::SeqCst)
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.sent.fetch_add(1, Ordering::SeqCst);
        let now = self.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.0.peak.fetch_max(now, Ordering::SeqCst);
        Ok(())
    }

    fn read_after_transmit(
        &self,
        _ctx: &BeforeDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Every item of `table` (a consistent Scan, all pages).
pub async fn scan_all(client: &Client, table: &str) -> Vec<HashMap<String, AttributeValue>> {
    // The SDK's paginator follows LastEvaluatedKey.
    client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .expect("Scan")
}
