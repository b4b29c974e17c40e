//! The real local DynamoDB: an in-process dynoxide server on 127.0.0.1:0
//! (the function reaches it over HTTP, usually through the fault proxy), and
//! the test's own direct client for reading the table back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

/// What the tests read back from one order item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub status: String,
    /// As stored (DynamoDB numbers are decimal strings).
    pub last_event_seq: String,
    pub last_event_id: String,
    pub history: Vec<String>,
    /// `rejected_events`: eventIds rejected in their turn (seq spent).
    pub rejected: Vec<String>,
}

pub struct Db {
    /// http://127.0.0.1:port of dynoxide itself.
    pub url: String,
    pub client: Client,
    pub table: String,
}

static TABLES: AtomicU64 = AtomicU64::new(0);

impl Db {
    /// Start dynoxide in this process and create a fresh orders table.
    pub async fn start() -> Db {
        let url = lambda_idempotency_testing::start_dynoxide().await;
        let client = client_for(&url);
        let table = format!(
            "orders-reliability-{}-{}",
            std::process::id(),
            TABLES.fetch_add(1, Ordering::Relaxed)
        );
        // The order consumer's orders table (hash key `order_id`, as
        // template.yaml creates it): the other functions' tests create
        // their own tables beside it on the same server.
        lambda_idempotency_testing::create_table(&client, &table, "order_id")
            .await
            .expect("create table");
        Db { url, client, table }
    }

    pub async fn item(&self, order_id: &str) -> Option<Item> {
        self.raw(order_id).await.map(|i| to_item(&i))
    }

    /// One order item as stored.
    pub async fn raw(&self, order_id: &str) -> Option<HashMap<String, AttributeValue>> {
        self.client
            .get_item()
            .table_name(&self.table)
            .key("order_id", AttributeValue::S(order_id.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem (direct to dynoxide)")
            .item
    }

    /// Write an order item as if `event_id`, an OrderPlaced at `seq`, had
    /// been applied (and, by the contract, seqs 1..seq before it
    /// processed): for tests that start an order at a large seq. Written as
    /// an item from before per-seq hashes were kept, so its older seqs are
    /// settled by the sequence alone.
    pub async fn seed_placed(&self, order_id: &str, event_id: &str, seq: u64) {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        self.client
            .put_item()
            .table_name(&self.table)
            .item("order_id", s(order_id))
            .item("status", s("PLACED"))
            .item("last_event_seq", AttributeValue::N(seq.to_string()))
            .item("last_event_id", s(event_id))
            .item("last_event_type", s("OrderPlaced"))
            .item("event_hash", s("seeded"))
            .item("history", AttributeValue::L(vec![s(event_id)]))
            .send()
            .await
            .expect("PutItem (direct to dynoxide)");
    }

    /// Every item, keyed by order_id (paginated scan).
    pub async fn scan(&self) -> HashMap<String, Item> {
        self.scan_table(&self.table)
            .await
            .iter()
            .map(|i| match i.get("order_id") {
                Some(AttributeValue::S(s)) => (s.clone(), to_item(i)),
                other => panic!("item without order_id: {other:?}"),
            })
            .collect()
    }

    /// Every item of any table on this server, as stored (paginated scan).
    pub async fn scan_table(&self, table: &str) -> Vec<HashMap<String, AttributeValue>> {
        lambda_idempotency_testing::scan_all(&self.client, table).await
    }
}

/// The test's own client: direct to dynoxide, generous retries (it must
/// never be the thing that fails).
pub fn client_for(endpoint: &str) -> Client {
    lambda_idempotency_testing::client_with(
        endpoint,
        aws_sdk_dynamodb::config::retry::RetryConfig::standard().with_max_attempts(5),
        aws_sdk_dynamodb::config::timeout::TimeoutConfig::disabled(),
    )
}

fn to_item(i: &HashMap<String, AttributeValue>) -> Item {
    let s = |k: &str| match i.get(k) {
        Some(AttributeValue::S(v)) => v.clone(),
        other => panic!("attribute {k}: {other:?}"),
    };
    let n = |k: &str| match i.get(k) {
        Some(AttributeValue::N(v)) => v.clone(),
        other => panic!("attribute {k}: {other:?}"),
    };
    let ids = |k: &str| match i.get(k) {
        Some(AttributeValue::L(l)) => l
            .iter()
            .map(|v| v.as_s().cloned().expect("id lists hold strings"))
            .collect(),
        None if k == "rejected_events" => Vec::new(),
        other => panic!("{k}: {other:?}"),
    };
    Item {
        status: s("status"),
        last_event_seq: n("last_event_seq"),
        last_event_id: s("last_event_id"),
        history: ids("history"),
        rejected: ids("rejected_events"),
    }
}
