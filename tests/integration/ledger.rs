//! The payment ledger against a real DynamoDB-compatible server: every
//! classification of a (cancelled) TransactWriteItems, with the balance and
//! the entries checked after each step.

use order_consumer::batch::Verdict;
use order_consumer::error::StoreError;
use order_consumer::ledger::domain::{LedgerConflict, Rejection};
use order_consumer::ledger::{LedgerConsumer, LedgerOutcome};

use crate::faults::{Fault, faulty_dynamodb};
use crate::support::*;

#[tokio::test]
async fn a_capture_writes_its_entry_and_moves_the_balance_once() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    let (labels, failed) = run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    assert_eq!(labels, ["Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
    let entry = db.entry("pay:p1").await.expect("entry");
    assert_eq!(s(&entry, "amount"), "500");
    assert_eq!(s(&entry, "refundable"), "500");
    assert_eq!(s(&entry, "event_id"), "e1");

    // SQS redelivers the same message: whatever DynamoDB answers (the
    // ClientRequestToken makes a repeat within 10 minutes a no-op success;
    // after that the entry's condition refuses it), it is acknowledged and
    // the balance does not move again.
    let (labels, failed) = run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    assert!(failed.is_empty());
    assert!(
        matches!(labels[..], ["Applied" | "Duplicate"]),
        "{labels:?}"
    );
    // The producer re-publishes the capture under a new eventId: a different
    // token, so the entry's condition decides, and it is the same entry.
    let (labels, failed) =
        run_ledger(&l, &batch_of(&[captured("e1-again", "p1", "a1", 500)])).await;
    assert_eq!(labels, ["Duplicate"]);
    assert!(failed.is_empty());
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
    assert_eq!(db.entries().await.len(), 1);
}

#[tokio::test]
async fn the_same_payment_with_other_content_is_a_conflict() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let (report, response) = l
        .handle_batch(
            &batch_of(&[
                captured("e2", "p1", "a1", 700),
                captured("e3", "p1", "a2", 500),
            ]),
            far_deadline(),
        )
        .await;
    for r in &report.records {
        assert_eq!(
            r.outcome,
            LedgerOutcome::Conflict(LedgerConflict::EntryDiffers)
        );
    }
    assert_eq!(
        failed_ids(&response.expect("partial response")),
        ["m-0", "m-1"]
    );
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
    assert_eq!(db.account("a2").await, None, "nothing written for a2");
}

#[tokio::test]
async fn a_refund_before_its_capture_is_early_then_applies() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    let refund = batch_of(&[refunded("e2", "p1", "r1", "a1", 200)]);
    let (labels, failed) = run_ledger(&l, &refund).await;
    assert_eq!(labels, ["Early"]);
    assert_eq!(failed, ["m-0"], "an early refund goes back to the queue");
    assert!(db.entries().await.is_empty());
    assert_eq!(db.account("a1").await, None);

    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let (labels, failed) = run_ledger(&l, &refund).await;
    assert_eq!(labels, ["Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.account("a1").await, Some((300, 2, "INR".into())));
    let capture = db.entry("pay:p1").await.expect("capture");
    assert_eq!(s(&capture, "refunded"), "200");
    assert_eq!(s(&capture, "refundable"), "300");
    assert_eq!(
        s(&db.entry("refund:r1").await.expect("refund"), "amount"),
        "-200"
    );
}

#[tokio::test]
async fn a_refund_and_its_capture_in_one_batch_apply_capture_first() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    let (labels, failed) = run_ledger(
        &l,
        &batch_of(&[
            refunded("e2", "p1", "r1", "a1", 200),
            captured("e1", "p1", "a1", 500),
        ]),
    )
    .await;
    assert_eq!(labels, ["Applied", "Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.account("a1").await, Some((300, 2, "INR".into())));
}

#[tokio::test]
async fn refunds_beyond_the_capture_are_rejected_and_change_nothing() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let (report, response) = l
        .handle_batch(
            &batch_of(&[
                refunded("e2", "p1", "r1", "a1", 300),
                refunded("e3", "p1", "r2", "a1", 300),
            ]),
            far_deadline(),
        )
        .await;
    assert_eq!(report.records[0].outcome, LedgerOutcome::Applied);
    assert_eq!(
        report.records[1].outcome,
        LedgerOutcome::Rejected(Rejection::OverRefund {
            refundable: 200,
            requested: 300
        })
    );
    assert!(
        failed_ids(&response.expect("partial response")).is_empty(),
        "a rejected refund is acknowledged"
    );
    assert_eq!(db.account("a1").await, Some((200, 2, "INR".into())));
    assert!(db.entry("refund:r2").await.is_none());
    let counts = order_consumer::metrics::OutcomeCounts::tally(report.outcomes());
    assert_eq!(counts.get("Rejected"), 1);
}

#[tokio::test]
async fn a_capture_in_another_currency_than_the_account_is_rejected() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let usd = payment("PaymentCaptured", "e2", "p2", None, "a1", 100, "USD");
    let (report, response) = l.handle_batch(&batch_of(&[usd]), far_deadline()).await;
    assert_eq!(
        report.records[0].outcome,
        LedgerOutcome::Rejected(Rejection::CurrencyMismatch {
            account_currency: "INR".into()
        })
    );
    assert!(failed_ids(&response.expect("partial response")).is_empty());
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
    assert!(
        db.entry("pay:p2").await.is_none(),
        "the transaction wrote nothing"
    );
}

#[tokio::test]
async fn a_refund_naming_another_account_than_its_capture_is_a_conflict() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(
        &l,
        &batch_of(&[
            captured("e1", "p1", "a1", 500),
            captured("e0", "p0", "a2", 50),
        ]),
    )
    .await;
    let (labels, failed) = run_ledger(&l, &batch_of(&[refunded("e2", "p1", "r1", "a2", 10)])).await;
    assert_eq!(labels, ["Conflict"]);
    assert_eq!(failed, ["m-0"]);
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
    assert_eq!(db.account("a2").await, Some((50, 1, "INR".into())));
}

#[tokio::test]
async fn invalid_bodies_fail_alone() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    let mut no_refund_id = refunded("e2", "p1", "r1", "a1", 10);
    no_refund_id.as_object_mut().map(|o| o.remove("refundId"));
    let (labels, failed) = run_ledger(
        &l,
        &batch(vec![
            record("ok", &captured("e1", "p1", "a1", 500).to_string()),
            record("bad", &no_refund_id.to_string()),
            record("junk", "not json"),
        ]),
    )
    .await;
    assert_eq!(labels, ["Applied", "Invalid", "Invalid"]);
    assert_eq!(failed, ["bad", "junk"]);
}

/// DynamoDB cancels the transaction because another one holds an item: the
/// record is a retryable failure, whatever the other reasons say.
#[tokio::test]
async fn a_transaction_conflict_is_a_retryable_failure() {
    const BODY: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]","CancellationReasons":[{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}"#;
    let (url, requests) = faulty_dynamodb(Fault::Body(400, BODY)).await;
    let l = LedgerConsumer::new(client_for(&url), test_ledger_config());
    let (report, response) = l
        .handle_batch(
            &batch_of(&[captured("e1", "p1", "a1", 500), invalid_body()]),
            far_deadline(),
        )
        .await;
    assert_eq!(
        report.records[0].outcome,
        LedgerOutcome::Failed(StoreError::Server {
            code: "TransactionConflict".into()
        })
    );
    assert!(report.records[0].outcome.level() == tracing::Level::WARN);
    assert_eq!(
        failed_ids(&response.expect("partial response")),
        ["m-0", "m-1"]
    );
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn throttling_is_retried_then_reported_and_a_full_outage_fails_the_invocation() {
    let (url, requests) = faulty_dynamodb(Fault::Error(400, "ThrottlingException")).await;
    let l = LedgerConsumer::new(client_for(&url), test_ledger_config());
    let (report, response) = l
        .handle_batch(
            &batch_of(&[captured("e1", "p1", "a1", 500)]),
            far_deadline(),
        )
        .await;
    assert!(matches!(
        report.records[0].outcome,
        LedgerOutcome::Failed(StoreError::Throttled { .. })
    ));
    assert!(response.is_err(), "every record failed on DynamoDB");
    assert_eq!(
        requests.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "the SDK's 3 attempts"
    );
    let d = response.unwrap_err().diagnostic("PaymentLedger");
    assert_eq!(d.error_type, "PaymentLedger.DependencyOutage");
}

fn test_ledger_config() -> order_consumer::ledger::LedgerConfig {
    order_consumer::ledger::LedgerConfig::from_lookup(|k| match k {
        "LEDGER_TABLE" => Some("ledger".into()),
        "ACCOUNTS_TABLE" => Some("accounts".into()),
        _ => None,
    })
    .expect("config")
}

fn invalid_body() -> serde_json::Value {
    serde_json::json!({"type": "PaymentCaptured"})
}
