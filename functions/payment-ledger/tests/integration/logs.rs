//! What the payment ledger writes to its logs, through the functions' own log format
//! (`bootstrap::json_logs`, captured by the root's harness): no payload
//! data at INFO or above.

use serde_json::{Value, json};

use crate::captured::Captured;
use orders::testing::batch_of;
use payment_ledger::testing::*;

#[tokio::test]
async fn a_suspended_refund_is_logged_without_its_amounts() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    let logs = Captured::default();
    let _guard = logs.install();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 987_654)])).await;
    let (labels, _) = run_ledger(&l, &batch_of(&[refunded("e2", "p1", "r1", "a1", 987_655)])).await;
    assert_eq!(labels, ["Suspended"]);
    let rejected: Vec<Value> = logs
        .lines()
        .into_iter()
        .filter(|l| l.pointer("/outcome") == Some(&json!("Suspended")))
        .collect();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["level"], json!("WARN"));
    let text = logs.text();
    assert!(
        !text.contains("987654") && !text.contains("987655"),
        "amounts in the logs:\n{text}"
    );
}
