//! The payment ledger under test (cargo feature `testing`): its two tables
//! beside the template's local DynamoDB ([`TestDb`]), ledger event bodies,
//! and one batch through the function.

use std::collections::HashMap;

use crate::store::{ACCOUNT_KEY, ENTRY_KEY};
use crate::{LedgerConfig, LedgerFunction};
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::RecordOutcome;
use orders::testing::{TestDb, failed_ids, far_deadline, s, scan_all};
use serde_json::{Value, json};

/// The payment ledger's two tables on the one test fixture, [`TestDb`]
/// (its main table is the ledger, the accounts table beside it: same
/// endpoint, unique names, deleted at the end on an external endpoint).
pub struct LedgerDb {
    pub db: TestDb,
    pub ledger_table: String,
    pub accounts_table: String,
}

impl LedgerDb {
    pub async fn new() -> Self {
        let db = TestDb::with_table("ledger-test", ENTRY_KEY).await;
        let ledger_table = db.table.clone();
        let accounts_table = db.extra_table("accounts", ACCOUNT_KEY).await;
        LedgerDb {
            db,
            ledger_table,
            accounts_table,
        }
    }

    pub fn config(&self) -> LedgerConfig {
        let vars: HashMap<&str, &str> = HashMap::from([
            ("LEDGER_TABLE", self.ledger_table.as_str()),
            ("ACCOUNTS_TABLE", self.accounts_table.as_str()),
        ]);
        LedgerConfig::from_lookup(|k| vars.get(k).map(|v| v.to_string())).expect("ledger config")
    }

    pub fn consumer(&self) -> LedgerFunction {
        crate::function(self.db.client.clone(), self.config()).expect("the ledger builds")
    }

    async fn get(
        &self,
        table: &str,
        key: &str,
        id: &str,
    ) -> Option<HashMap<String, AttributeValue>> {
        self.db
            .client
            .get_item()
            .table_name(table)
            .key(key, AttributeValue::S(id.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem")
            .item
    }

    pub async fn entry(&self, entry_id: &str) -> Option<HashMap<String, AttributeValue>> {
        self.get(&self.ledger_table, ENTRY_KEY, entry_id).await
    }

    /// (balance, entry_count, currency) of an account.
    pub async fn account(&self, account_id: &str) -> Option<(i128, u64, String)> {
        let item = self
            .get(&self.accounts_table, ACCOUNT_KEY, account_id)
            .await?;
        Some((
            s(&item, "balance").parse().expect("balance"),
            s(&item, "entry_count").parse().expect("entry_count"),
            s(&item, "currency"),
        ))
    }

    /// Every ledger entry.
    pub async fn entries(&self) -> Vec<HashMap<String, AttributeValue>> {
        scan_all(&self.db.client, &self.ledger_table).await
    }
}

/// A ledger event body.
pub fn payment(
    kind: &str,
    event_id: &str,
    payment_id: &str,
    refund_id: Option<&str>,
    account: &str,
    amount: u64,
    currency: &str,
) -> Value {
    let mut v = json!({"eventId": event_id, "type": kind, "paymentId": payment_id,
                       "accountId": account, "amount": amount, "currency": currency,
                       "occurredAt": "2026-11-29T10:15:00Z"});
    if let Some(r) = refund_id {
        v["refundId"] = json!(r);
    }
    v
}

pub fn captured(event_id: &str, payment_id: &str, account: &str, amount: u64) -> Value {
    payment(
        "PaymentCaptured",
        event_id,
        payment_id,
        None,
        account,
        amount,
        "INR",
    )
}

pub fn refunded(
    event_id: &str,
    payment_id: &str,
    refund_id: &str,
    account: &str,
    amount: u64,
) -> Value {
    payment(
        "PaymentRefunded",
        event_id,
        payment_id,
        Some(refund_id),
        account,
        amount,
        "INR",
    )
}

/// Run one batch through the ledger; returns the labels and failed ids.
pub async fn run_ledger(
    ledger: &LedgerFunction,
    event: &SqsEvent,
) -> (Vec<&'static str>, Vec<String>) {
    let (report, response) = ledger.handle_batch(event, far_deadline()).await;
    let response = response.expect("partial-batch response, not an invocation error");
    (
        report.outcomes().map(RecordOutcome::label).collect(),
        failed_ids(&response),
    )
}
