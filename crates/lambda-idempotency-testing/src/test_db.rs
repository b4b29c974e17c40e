//! A test's own tables on a DynamoDB-compatible server: the one fixture the
//! functions' tests build on (each adds its domain's readers beside it).
//!
//! By default each [`TestDb`] starts its own in-process dynoxide server on
//! 127.0.0.1 port 0 and creates a fresh, uniquely named table. Set
//! `AWS_ENDPOINT_URL_DYNAMODB` to run the very same tests against another
//! endpoint (any DynamoDB-compatible server, or DynamoDB itself); the
//! tables are then created there with unique names and deleted when the
//! fixture is dropped.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::dynamodb::{
    client_for, delete_external_tables, external_client, start_dynoxide, unique_name,
};
use crate::tables::create_table;

/// A test's main table (and any further tables it asks for) on its own
/// local DynamoDB, or on `AWS_ENDPOINT_URL_DYNAMODB`.
pub struct TestDb {
    /// A client of the endpoint, with the production retry and timeout
    /// settings.
    pub client: Client,
    /// The main table's name.
    pub table: String,
    endpoint: String,
    external: bool,
    /// Further tables of this test (deleted with it on an external endpoint).
    extra_tables: Mutex<Vec<String>>,
}

impl TestDb {
    /// A fresh main table named after `prefix` with hash key `key` (S).
    pub async fn with_table(prefix: &str, key: &str) -> Self {
        let (client, endpoint, external) = match std::env::var("AWS_ENDPOINT_URL_DYNAMODB") {
            Ok(url) if !url.is_empty() => (external_client().await, url, true),
            _ => {
                let url = start_dynoxide().await;
                (client_for(&url), url, false)
            }
        };
        let table = unique_name(prefix);
        create_table(&client, &table, key)
            .await
            .expect("create table");
        TestDb {
            client,
            table,
            endpoint,
            external,
            extra_tables: Default::default(),
        }
    }

    /// Another table beside the main one, named after it, with hash key
    /// `key` (S).
    pub async fn extra_table(&self, suffix: &str, key: &str) -> String {
        let name = format!("{}-{suffix}", self.table);
        create_table(&self.client, &name, key)
            .await
            .expect("create table");
        self.track_table(&name);
        name
    }

    /// Delete `table` with this test's own tables (on an external endpoint):
    /// for the tables a function's own test support creates beside them.
    pub fn track_table(&self, table: &str) {
        if let Ok(mut tables) = self.extra_tables.lock() {
            tables.push(table.to_owned());
        }
    }

    /// The DynamoDB endpoint URL (for processes that need to reach it; the
    /// benchmark uses it for the release binary).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The main table's item whose hash key `key` is `id` (S), read
    /// consistently.
    pub async fn get(&self, key: &str, id: &str) -> Option<HashMap<String, AttributeValue>> {
        self.client
            .get_item()
            .table_name(&self.table)
            .key(key, AttributeValue::S(id.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem")
            .item
    }

    /// The number of items in the main table (one Scan page: tests keep
    /// their tables small).
    pub async fn count_items(&self) -> usize {
        let out = self
            .client
            .scan()
            .table_name(&self.table)
            .send()
            .await
            .expect("Scan");
        out.items.unwrap_or_default().len()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.external {
            // Don't leave test tables behind on a shared endpoint.
            let mut tables = vec![self.table.clone()];
            if let Ok(extra) = self.extra_tables.lock() {
                tables.extend(extra.iter().cloned());
            }
            delete_external_tables(tables);
        }
    }
}
