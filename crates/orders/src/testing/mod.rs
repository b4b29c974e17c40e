//! Test support as library code (cargo feature `testing`, which the tests,
//! benches and examples enable; the Lambda binaries never build it): a real
//! DynamoDB-compatible server per test, SQS records shaped as Lambda sends
//! them, item inspection, a local notification provider ([`provider`]) and
//! stream records ([`stream_records`]). For running and breaking things as
//! Lambda and the network would: a Lambda Runtime API emulator
//! ([`runtime_api`]), an SQS endpoint for visibility changes
//! ([`sqs_endpoint`]), a fault-injecting proxy that is also a faulty DynamoDB
//! ([`proxy`]), the one HTTP/1.1 reader all these local servers share
//! ([`http1`]) and a seeded RNG ([`rng`]). One of each, so that what the
//! tests, the reliability suite and the benchmark exercise is the same thing.
//!
//! By default each test starts its own in-process dynoxide server on
//! 127.0.0.1 port 0 and creates a fresh, uniquely named table. Set
//! `AWS_ENDPOINT_URL_DYNAMODB` to run the very same tests against another
//! endpoint (any DynamoDB-compatible server, or DynamoDB itself); tables are
//! then created there with unique names and deleted at the end of the test.

// Test support reports on stderr what it could not clean up.
#![allow(clippy::print_stderr)]

pub mod tables;

// What is not about orders lives in the library's test-support crate; the
// tests keep reaching it as `orders::testing::*`.
pub use lambda_idempotency_testing::dynamodb::{delete_external_tables, external_client};
pub use lambda_idempotency_testing::*;
pub use tables::{create_orders_table, create_streamed_orders_table};

use std::collections::HashMap;

use crate::OrderConfig;
use crate::OrderFunction;
use crate::domain::Outcome;
use crate::store::OrderStore;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::RecordOutcome;
use lambda_idempotency::engine::BatchReport;
use serde_json::{Value, json};

/// A consumer whose DynamoDB endpoint is a local port nobody listens on
/// (bound, read, closed): every request fails to connect.
pub fn unreachable_consumer() -> OrderFunction {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let client = client_for(&format!("http://127.0.0.1:{port}"));
    consumer_with(OrderStore::new(client, "orders"), &[])
}

/// The order functions' view of a [`TestDb`]: its main table is the orders
/// table ([`OrdersDb::new`]), and these are the consumer and the readers
/// their tests use on it. A trait on the one fixture of
/// `lambda-idempotency-testing`, not a second fixture: in scope with
/// `orders::testing::*`, `TestDb::new()` is this crate's.
pub trait OrdersDb: Sized {
    /// A fresh orders table (hash key `order_id`, as template.yaml creates
    /// it) on the test's own local DynamoDB, or on
    /// `AWS_ENDPOINT_URL_DYNAMODB`.
    fn new() -> impl Future<Output = Self> + Send;

    /// The order store over the orders table.
    fn store(&self) -> OrderStore;

    /// The order consumer over the orders table.
    fn consumer(&self) -> OrderFunction;

    /// A consumer whose DynamoDB client has no SDK timeouts (its retries
    /// are the usual ones): it waits for the server however long that
    /// takes. For tests of what concurrent invocations do to the table, not
    /// of latency: the in-process server runs every request under one lock
    /// on the test's own runtime, so on a loaded machine a burst of
    /// hundreds of requests can queue for longer than the 2 s attempt
    /// timeout, and the record then fails (rightly: it goes back to the
    /// queue) for a reason that has nothing to do with the test.
    fn consumer_without_timeouts(&self) -> OrderFunction;

    /// A consumer whose DynamoDB client counts every HTTP request it sends
    /// (each attempt, retries included), with extra environment.
    fn counted_consumer(&self, env: &[(&str, &str)]) -> (OrderFunction, RequestCounter);

    /// [`Self::counted_consumer`] with no retries and no timeouts, for
    /// [`RequestCounter::peak`]: a request that never got its response would
    /// leave the in-flight count up, so it must fail its record (which the
    /// test sees) instead.
    fn counted_consumer_without_retries(
        &self,
        env: &[(&str, &str)],
    ) -> (OrderFunction, RequestCounter);

    /// One order item as stored.
    fn item(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Option<HashMap<String, AttributeValue>>> + Send;

    /// An order's status.
    fn status(&self, order_id: &str) -> impl Future<Output = Option<String>> + Send;

    /// The eventIds applied to an order, in the order they were applied.
    fn history(&self, order_id: &str) -> impl Future<Output = Vec<String>> + Send;

    /// The eventIds rejected on an order that spent their seq.
    fn rejected(&self, order_id: &str) -> impl Future<Output = Vec<String>> + Send;
}

impl OrdersDb for TestDb {
    fn new() -> impl Future<Output = Self> + Send {
        TestDb::with_table("orders-test", crate::store::KEY)
    }

    fn store(&self) -> OrderStore {
        OrderStore::new(self.client.clone(), self.table.clone())
    }

    fn consumer(&self) -> OrderFunction {
        consumer_with(self.store(), &[])
    }

    fn consumer_without_timeouts(&self) -> OrderFunction {
        consumer_with_client(self, &[], |b| {
            b.timeout_config(aws_sdk_dynamodb::config::timeout::TimeoutConfig::disabled())
        })
    }

    fn counted_consumer(&self, env: &[(&str, &str)]) -> (OrderFunction, RequestCounter) {
        let counter = RequestCounter::default();
        let c = consumer_with_client(self, env, |b| b.interceptor(counter.clone()));
        (c, counter)
    }

    fn counted_consumer_without_retries(
        &self,
        env: &[(&str, &str)],
    ) -> (OrderFunction, RequestCounter) {
        let counter = RequestCounter::default();
        let c = consumer_with_client(self, env, |b| {
            b.interceptor(counter.clone())
                .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
                .timeout_config(aws_sdk_dynamodb::config::timeout::TimeoutConfig::disabled())
        });
        (c, counter)
    }

    fn item(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Option<HashMap<String, AttributeValue>>> + Send {
        self.get(crate::store::KEY, order_id)
    }

    async fn status(&self, order_id: &str) -> Option<String> {
        self.item(order_id).await.map(|i| s(&i, "status"))
    }

    async fn history(&self, order_id: &str) -> Vec<String> {
        id_list(self, order_id, "history").await
    }

    async fn rejected(&self, order_id: &str) -> Vec<String> {
        id_list(self, order_id, "rejected_events").await
    }
}

/// The order consumer over `db`'s orders table with a client `configure`d
/// from the fixture's.
fn consumer_with_client(
    db: &TestDb,
    env: &[(&str, &str)],
    configure: impl FnOnce(aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::config::Builder,
) -> OrderFunction {
    let conf = configure(db.client.config().to_builder()).build();
    let store = OrderStore::new(Client::from_conf(conf), db.table.clone());
    consumer_with(store, env)
}

/// An id list attribute of an order (`history`, `rejected_events`).
async fn id_list(db: &TestDb, order_id: &str, attribute: &str) -> Vec<String> {
    match db
        .item(order_id)
        .await
        .and_then(|i| i.get(attribute).cloned())
    {
        Some(AttributeValue::L(l)) => l
            .into_iter()
            .map(|v| v.as_s().cloned().expect("eventIds are strings"))
            .collect(),
        _ => vec![],
    }
}

pub fn consumer_with(store: OrderStore, env: &[(&str, &str)]) -> OrderFunction {
    let mut vars: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.entry("TABLE_NAME".into())
        .or_insert_with(|| store.table().to_owned());
    let config = OrderConfig::from_lookup(|k| vars.get(k).cloned()).expect("valid test config");
    crate::function(store, config).expect("the order consumer builds")
}

pub fn s(item: &HashMap<String, AttributeValue>, key: &str) -> String {
    match item.get(key) {
        Some(AttributeValue::S(v)) => v.clone(),
        Some(AttributeValue::N(v)) => v.clone(),
        other => panic!("attribute {key}: {other:?}"),
    }
}

/// An event body as a producer would send it.
pub fn body(order: &str, seq: u64, kind: &str, event_id: &str) -> Value {
    let data = match kind {
        "OrderPlaced" => json!({"customerId": "cust-1", "amount": 150000, "currency": "INR"}),
        "OrderPaid" => json!({"paymentId": "pay-1", "amount": 150000, "currency": "INR"}),
        "OrderShipped" => json!({"carrier": "BlueDart", "trackingId": "BD1"}),
        "OrderCancelled" => json!({"reason": "customer request"}),
        "OrderDelivered" => json!({}),
        // Any other type is a test's deliberate garbage: no data. A new
        // event type needs its data here (docs/adapting.md).
        _ => json!({}),
    };
    json!({"eventId": event_id, "orderId": order, "seq": seq, "type": kind,
           "occurredAt": "2026-11-29T10:15:00Z", "data": data})
}

/// The standard lifecycle of one order: (seq, type, eventId).
pub fn lifecycle(order: &str) -> Vec<(u64, &'static str, String)> {
    ["OrderPlaced", "OrderPaid", "OrderShipped", "OrderDelivered"]
        .into_iter()
        .enumerate()
        .map(|(i, k)| (i as u64 + 1, k, format!("evt-{order}-{}", i + 1)))
        .collect()
}

pub fn labels(report: &BatchReport<Outcome>) -> Vec<&'static str> {
    report.outcomes().map(RecordOutcome::label).collect()
}

/// Run one batch through the consumer; returns outcome labels and failed ids.
pub async fn run(
    consumer: &OrderFunction,
    event: &SqsEvent,
) -> (BatchReport<Outcome>, Vec<String>) {
    let (report, response) = consumer.handle_batch(event, far_deadline()).await;
    let response = response.expect("partial-batch response, not an invocation error");
    (report, failed_ids(&response))
}
