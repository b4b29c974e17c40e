//! The orders table's real DynamoDB stream, from an in-process dynoxide: the
//! order consumer writes through HTTP as usual, and the test reads back the
//! stream records dynoxide produced, shaped as Lambda delivers them (the
//! Streams API record plus `eventSourceARN`).

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_sdk_dynamodb::Client;
use orders::store::OrderStore;
use serde_json::{Value, json};

use orders::testing::{client_for, serve_dynoxide};

pub struct StreamDb {
    db: orders::testing::dynoxide::Database,
    pub client: Client,
    pub table: String,
}

impl StreamDb {
    /// Always the in-process dynoxide: reading a stream needs the Streams
    /// API, which this project does not link an SDK for.
    pub async fn new() -> StreamDb {
        let db = orders::testing::dynoxide::Database::memory().expect("in-memory dynoxide");
        let url = serve_dynoxide(db.clone()).await;
        let client = client_for(&url);
        let table = "orders".to_owned();
        orders::testing::create_streamed_orders_table(&client, &table)
            .await
            .expect("orders table with a stream");
        StreamDb { db, client, table }
    }

    pub fn store(&self) -> OrderStore {
        OrderStore::new(self.client.clone(), self.table.clone())
    }

    /// Every record of the orders stream so far, oldest first.
    pub fn records(&self) -> Vec<Value> {
        orders::testing::stream_records::read(&self.db, &self.table)
    }
}

pub fn stream_event(records: &[Value]) -> StreamEvent {
    serde_json::from_value(json!({ "Records": records })).expect("a Lambda DynamoDB stream event")
}
