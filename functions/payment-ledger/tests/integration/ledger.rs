//! The payment ledger against a real DynamoDB-compatible server: every
//! classification of a (cancelled) TransactWriteItems, with the balance and
//! the entries checked after each step.

use lambda_idempotency::RecordOutcome;
use lambda_idempotency::StoreError;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use payment_ledger::LedgerOutcome;
use payment_ledger::domain::{LedgerConflict, SuspenseReason};

use serde_json::json;

use orders::testing::proxy::{Fault, FaultProxy};
use orders::testing::*;
use payment_ledger::testing::*;

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

    // SQS redelivers the same message, seconds later: another attempt with
    // another ClientRequestToken, so the entry's condition refuses it and it
    // is counted as a Duplicate, not as a second Applied; the balance does
    // not move again.
    let (labels, failed) = run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    assert!(failed.is_empty());
    assert_eq!(labels, ["Duplicate"]);
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

/// The suspense entry of `entry_id`, with the event's fields and the
/// reason, and the attributes it must hold whatever the event.
async fn suspense(db: &LedgerDb, entry_id: &str) -> HashMap<String, AttributeValue> {
    let item = db
        .entry(&format!("suspense:{entry_id}"))
        .await
        .unwrap_or_else(|| panic!("no suspense entry for {entry_id}"));
    for k in ["parked_at", "parked_attempt"] {
        assert!(item.contains_key(k), "{k} missing: {item:?}");
    }
    item
}

fn fields(item: &HashMap<String, AttributeValue>, keys: &[&str]) -> Vec<(String, String)> {
    keys.iter().map(|k| (k.to_string(), s(item, k))).collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_refund_beyond_its_capture_is_parked_in_suspense_then_acknowledged() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let over = refunded("e3", "p1", "r2", "a1", 300);
    let (report, response) = l
        .handle_batch(
            &batch_of(&[refunded("e2", "p1", "r1", "a1", 300), over.clone()]),
            far_deadline(),
        )
        .await;
    assert_eq!(report.records[0].outcome, LedgerOutcome::Applied);
    assert_eq!(
        report.records[1].outcome,
        LedgerOutcome::Suspended(SuspenseReason::OverRefund {
            refundable: 200,
            requested: 300
        })
    );
    // Acknowledged, and by now its suspense entry holds the whole event.
    assert!(failed_ids(&response.expect("partial response")).is_empty());
    let item = suspense(&db, "refund:r2").await;
    let keys = [
        "entry_id",
        "event_id",
        "event_type",
        "payment_id",
        "refund_id",
        "account_id",
        "amount",
        "currency",
        "occurred_at",
        "suspense_reason",
        "capture_refundable",
    ];
    assert_eq!(
        fields(&item, &keys),
        owned(&[
            ("entry_id", "suspense:refund:r2"),
            ("event_id", "e3"),
            ("event_type", "PaymentRefunded"),
            ("payment_id", "p1"),
            ("refund_id", "r2"),
            ("account_id", "a1"),
            ("amount", "300"),
            ("currency", "INR"),
            ("occurred_at", "2026-11-29T10:15:00Z"),
            ("suspense_reason", "over-refund"),
            ("capture_refundable", "200"),
        ])
    );
    assert_eq!(item.len(), keys.len() + 2, "{item:?}");
    // Nothing was posted: the balance, the capture and the entries are as
    // the one applied refund left them.
    assert_eq!(db.account("a1").await, Some((200, 2, "INR".into())));
    assert_eq!(
        s(&db.entry("pay:p1").await.expect("capture"), "refundable"),
        "200"
    );
    assert!(db.entry("refund:r2").await.is_none());
    assert_eq!(db.entries().await.len(), 3, "capture, refund, one suspense");
    let counts = report.counts();
    assert_eq!(counts.get("Suspended"), 1);

    // SQS redelivers it, and the producer re-publishes it under a new
    // eventId: both find the same suspense entry, so Duplicate, acknowledged,
    // with no second entry and no balance move.
    for copy in [over.clone(), {
        let mut v = over.clone();
        v["eventId"] = json!("e3-republished");
        v
    }] {
        let (labels, failed) = run_ledger(&l, &batch_of(&[copy])).await;
        assert_eq!(labels, ["Duplicate"]);
        assert!(failed.is_empty());
    }
    assert_eq!(db.entries().await.len(), 3);
    assert_eq!(s(&suspense(&db, "refund:r2").await, "event_id"), "e3");
    assert_eq!(db.account("a1").await, Some((200, 2, "INR".into())));
}

#[tokio::test]
async fn a_capture_in_another_currency_than_the_account_is_parked_in_suspense() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let usd = payment("PaymentCaptured", "e2", "p2", None, "a1", 100, "USD");
    let (report, response) = l
        .handle_batch(&batch_of(std::slice::from_ref(&usd)), far_deadline())
        .await;
    assert_eq!(
        report.records[0].outcome,
        LedgerOutcome::Suspended(SuspenseReason::CurrencyMismatch {
            account_currency: "INR".into()
        })
    );
    assert!(failed_ids(&response.expect("partial response")).is_empty());
    let item = suspense(&db, "pay:p2").await;
    let keys = [
        "entry_id",
        "event_id",
        "event_type",
        "payment_id",
        "account_id",
        "amount",
        "currency",
        "occurred_at",
        "suspense_reason",
        "account_currency",
    ];
    assert_eq!(
        fields(&item, &keys),
        owned(&[
            ("entry_id", "suspense:pay:p2"),
            ("event_id", "e2"),
            ("event_type", "PaymentCaptured"),
            ("payment_id", "p2"),
            ("account_id", "a1"),
            ("amount", "100"),
            ("currency", "USD"),
            ("occurred_at", "2026-11-29T10:15:00Z"),
            ("suspense_reason", "currency-mismatch"),
            ("account_currency", "INR"),
        ])
    );
    assert_eq!(
        item.len(),
        keys.len() + 2,
        "no refund_id on a capture: {item:?}"
    );
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
    assert!(db.entry("pay:p2").await.is_none(), "nothing posted");

    let (labels, failed) = run_ledger(&l, &batch_of(&[usd])).await;
    assert_eq!(labels, ["Duplicate"], "the redelivery of a parked capture");
    assert!(failed.is_empty());
    assert_eq!(db.entries().await.len(), 2, "the capture and one suspense");
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
}

/// The refund of a capture parked for its currency: parked too, in its own
/// suspense entry naming the capture's, and acknowledged; never Early (the
/// capture entry it waits for will never be written, and SQS would drop
/// the refund from the DLQ after its retention period). Its copies find its
/// suspense entry; nothing is posted.
#[tokio::test]
async fn the_refund_of_a_parked_capture_is_parked_naming_the_capture_s_entry() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let usd = payment("PaymentCaptured", "e2", "p2", None, "a1", 100, "USD");
    let refund = payment("PaymentRefunded", "e3", "p2", Some("r2"), "a1", 40, "USD");
    let (labels, _) = run_ledger(&l, &batch_of(&[usd])).await;
    assert_eq!(labels, ["Suspended"], "the capture is parked first");

    let (report, response) = l
        .handle_batch(&batch_of(std::slice::from_ref(&refund)), far_deadline())
        .await;
    assert_eq!(
        report.records[0].outcome,
        LedgerOutcome::Suspended(SuspenseReason::CaptureParked {
            capture_entry: "suspense:pay:p2".into()
        })
    );
    assert!(failed_ids(&response.expect("partial response")).is_empty());
    let item = suspense(&db, "refund:r2").await;
    let keys = [
        "entry_id",
        "event_id",
        "event_type",
        "payment_id",
        "refund_id",
        "account_id",
        "amount",
        "currency",
        "occurred_at",
        "suspense_reason",
        "capture_suspense_entry",
    ];
    assert_eq!(
        fields(&item, &keys),
        owned(&[
            ("entry_id", "suspense:refund:r2"),
            ("event_id", "e3"),
            ("event_type", "PaymentRefunded"),
            ("payment_id", "p2"),
            ("refund_id", "r2"),
            ("account_id", "a1"),
            ("amount", "40"),
            ("currency", "USD"),
            ("occurred_at", "2026-11-29T10:15:00Z"),
            ("suspense_reason", "capture-parked"),
            ("capture_suspense_entry", "suspense:pay:p2"),
        ])
    );
    assert_eq!(item.len(), keys.len() + 2, "{item:?}");

    // A redelivery, a re-publish under a new eventId, and both in one batch:
    // each finds the refund's suspense entry, Duplicate, acknowledged.
    let mut republished = refund.clone();
    republished["eventId"] = json!("e3-republished");
    for batch in [
        vec![refund.clone()],
        vec![republished.clone()],
        vec![refund.clone(), republished],
    ] {
        let (labels, failed) = run_ledger(&l, &batch_of(&batch)).await;
        assert!(labels.iter().all(|l| *l == "Duplicate"), "{labels:?}");
        assert!(failed.is_empty());
    }
    // Nothing posted: the capture, two suspense entries, the INR balance.
    assert_eq!(db.entries().await.len(), 3);
    assert!(db.entry("pay:p2").await.is_none());
    assert!(db.entry("refund:r2").await.is_none());
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));

    // A refund naming the parked capture under another currency is the
    // same producer bug as for a posted capture: Conflict, not parked.
    let (labels, failed) = run_ledger(
        &l,
        &batch_of(&[payment(
            "PaymentRefunded",
            "e4",
            "p2",
            Some("r3"),
            "a1",
            40,
            "INR",
        )]),
    )
    .await;
    assert_eq!(labels, ["Conflict"]);
    assert_eq!(failed, ["m-0"]);
    assert!(db.entry("suspense:refund:r3").await.is_none());
}

/// The refund arrives before its capture, which is then parked: Early while
/// the capture is unknown (it may yet be posted), parked once the capture
/// is, whichever batch brings them; the same final state as the other order.
#[tokio::test]
async fn a_refund_before_its_capture_waits_then_is_parked_with_it() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let usd = payment("PaymentCaptured", "e2", "p2", None, "a1", 100, "USD");
    let refund = payment("PaymentRefunded", "e3", "p2", Some("r2"), "a1", 40, "USD");
    let (labels, failed) = run_ledger(&l, &batch_of(std::slice::from_ref(&refund))).await;
    assert_eq!(labels, ["Early"], "the capture may still be posted");
    assert_eq!(failed, ["m-0"]);
    assert_eq!(db.entries().await.len(), 1);

    // The capture and the redelivered refund in one batch: capture first.
    let (labels, failed) = run_ledger(&l, &batch_of(&[refund, usd])).await;
    assert_eq!(labels, ["Suspended", "Suspended"]);
    assert!(failed.is_empty());
    assert_eq!(
        s(&suspense(&db, "refund:r2").await, "capture_suspense_entry"),
        "suspense:pay:p2"
    );
    assert_eq!(
        s(&suspense(&db, "pay:p2").await, "suspense_reason"),
        "currency-mismatch"
    );
    assert_eq!(db.entries().await.len(), 3);
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
}

#[tokio::test]
async fn a_parked_event_with_other_content_is_a_conflict_and_not_acknowledged() {
    let db = LedgerDb::new().await;
    let l = db.consumer();
    run_ledger(&l, &batch_of(&[captured("e1", "p1", "a1", 500)])).await;
    let (labels, _) = run_ledger(
        &l,
        &batch_of(&[
            refunded("e3", "p1", "r2", "a1", 600),
            payment("PaymentCaptured", "e2", "p2", None, "a1", 100, "USD"),
        ]),
    )
    .await;
    assert_eq!(labels, ["Suspended", "Suspended"]);
    let before = db.entries().await;

    // The same eventIds (and payment / refund) with another amount.
    let (report, response) = l
        .handle_batch(
            &batch_of(&[
                refunded("e3", "p1", "r2", "a1", 700),
                payment("PaymentCaptured", "e2", "p2", None, "a1", 101, "USD"),
            ]),
            far_deadline(),
        )
        .await;
    for r in &report.records {
        assert_eq!(
            r.outcome,
            LedgerOutcome::Conflict(LedgerConflict::SuspenseDiffers)
        );
    }
    assert_eq!(
        failed_ids(&response.expect("partial response")),
        ["m-0", "m-1"]
    );
    let mut after = db.entries().await;
    let mut before = before;
    let key = |i: &HashMap<String, AttributeValue>| s(i, "entry_id");
    before.sort_by_key(key);
    after.sort_by_key(key);
    assert_eq!(after, before, "the parked entries are untouched");
    assert_eq!(db.account("a1").await, Some((500, 1, "INR".into())));
}

/// The transaction is cancelled for a currency mismatch (as DynamoDB puts
/// it on the wire), and the suspense Put fails: the record must not be
/// acknowledged, and the SDK's retries of the Put are in force.
#[tokio::test]
async fn a_suspense_entry_that_cannot_be_written_is_not_acknowledged() {
    const CANCELLED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]","CancellationReasons":[{"Code":"None"},{"Code":"ConditionalCheckFailed","Message":"The conditional request failed","Item":{"account_id":{"S":"a1"},"currency":{"S":"INR"},"balance":{"N":"500"},"entry_count":{"N":"1"}}}]}"#;
    const PUT_FAILS: &str =
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}"#;
    let server = FaultProxy::answering(Fault::ByOperation(&[
        ("TransactWriteItems", Fault::Body(400, CANCELLED)),
        ("PutItem", Fault::Body(500, PUT_FAILS)),
    ]))
    .await;
    let l = payment_ledger::function(client_for(&server.url()), test_ledger_config())
        .expect("the ledger builds");
    let usd = payment("PaymentCaptured", "e2", "p2", None, "a1", 100, "USD");
    let (report, response) = l.handle_batch(&batch_of(&[usd]), far_deadline()).await;
    assert_eq!(
        report.records[0].outcome,
        RecordOutcome::Failed(StoreError::Server {
            code: "InternalServerError".into()
        })
    );
    // Its only record failed on DynamoDB: the whole batch goes back.
    assert!(response.is_err(), "acknowledged without a suspense entry");
    // One cancelled transaction (not retried by the SDK), then the Put's
    // three attempts.
    assert_eq!(server.requests(), 4);
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
    let server = FaultProxy::answering(Fault::Body(400, BODY)).await;
    let l = payment_ledger::function(client_for(&server.url()), test_ledger_config())
        .expect("the ledger builds");
    let (report, response) = l
        .handle_batch(
            &batch_of(&[captured("e1", "p1", "a1", 500), invalid_body()]),
            far_deadline(),
        )
        .await;
    assert_eq!(
        report.records[0].outcome,
        RecordOutcome::Failed(StoreError::Server {
            code: "TransactionConflict".into()
        })
    );
    assert!(report.records[0].outcome.level() == tracing::Level::WARN);
    assert_eq!(
        failed_ids(&response.expect("partial response")),
        ["m-0", "m-1"]
    );
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn throttling_is_retried_then_reported_and_a_full_outage_fails_the_invocation() {
    let server = FaultProxy::answering(Fault::Throttle("ThrottlingException")).await;
    let l = payment_ledger::function(client_for(&server.url()), test_ledger_config())
        .expect("the ledger builds");
    let (report, response) = l
        .handle_batch(
            &batch_of(&[captured("e1", "p1", "a1", 500)]),
            far_deadline(),
        )
        .await;
    assert!(matches!(
        report.records[0].outcome,
        RecordOutcome::Failed(StoreError::Throttled { .. })
    ));
    assert!(response.is_err(), "every record failed on DynamoDB");
    assert_eq!(server.requests(), 3, "the SDK's 3 attempts");
    let d = response.unwrap_err().diagnostic("PaymentLedger");
    assert_eq!(d.error_type, "PaymentLedger.DependencyOutage");
}

fn test_ledger_config() -> payment_ledger::LedgerConfig {
    payment_ledger::LedgerConfig::from_lookup(|k| match k {
        "LEDGER_TABLE" => Some("ledger".into()),
        "ACCOUNTS_TABLE" => Some("accounts".into()),
        _ => None,
    })
    .expect("config")
}

fn invalid_body() -> serde_json::Value {
    serde_json::json!({"type": "PaymentCaptured"})
}

#[test]
fn the_ledgers_labels_cover_its_verdicts() {
    use payment_ledger::domain::LedgerOutcome;
    use strum::VariantNames;
    orders::testing::assert_labels_cover_variants::<LedgerOutcome>(
        "ledger",
        LedgerOutcome::VARIANTS,
    );
}
