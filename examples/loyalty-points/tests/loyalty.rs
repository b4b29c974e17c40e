//! The loyalty service against a local DynamoDB (in-process dynoxide):
//! the one handler on SQS and on Kinesis through `Function::handle_batch`,
//! an outage, and the voucher redeemed once.

use lambda_idempotency::{
    BatchError, Function, IdempotencyError, IdempotencyOptions, IdempotencyStore, IdempotencyTable,
    Idempotent, Settings,
};
use lambda_idempotency_testing::kinesis::{self, sequence_number as seq};
use lambda_idempotency_testing::{TestDb, batch, client_for, failed_ids, far_deadline, record};
use loyalty_points::{Loyalty, Voucher, redeem};
use serde_json::json;

fn function(client: &aws_sdk_dynamodb::Client, table: &str) -> Function<Loyalty> {
    let settings = Settings::from_lookup(&|_| None, "LoyaltyPoints", "loyalty").expect("settings");
    Function::builder(Loyalty {
        client: client.clone(),
        table: table.into(),
    })
    .name("LoyaltyPoints")
    .settings(settings)
    .build()
    .expect("a function")
}

fn event(kind: &str, id: &str, customer: &str, points: u64) -> String {
    json!({"type": kind, "eventId": id, "customerId": customer, "points": points}).to_string()
}

/// The customers' table (hash key `customerId`) on its own local DynamoDB.
async fn loyalty_db() -> TestDb {
    TestDb::with_table("loyalty", "customerId").await
}

/// A customer's balance, read consistently (0 before any event).
async fn balance(db: &TestDb, customer: &str) -> i64 {
    let item = db.get("customerId", customer).await.unwrap_or_default();
    item.get("balance")
        .and_then(|b| b.as_n().ok())
        .map_or(0, |n| n.parse().expect("a number"))
}

#[tokio::test]
async fn points_apply_once_in_order_and_an_uncovered_redemption_is_rejected() {
    let db = loyalty_db().await;
    let sqs = function(&db.client, &db.table);
    let e = batch(vec![
        record("m1", &event("PointsEarned", "e1", "c1", 100)),
        record("m2", &event("PointsRedeemed", "e2", "c1", 60)),
        record("m3", &event("PointsRedeemed", "e2", "c1", 60)),
        record("m4", &event("PointsRedeemed", "e3", "c1", 50)),
        record("m5", r#"{"type":"PointsDoubled","eventId":"secret-id"}"#),
    ]);
    let (report, answer) = sqs.handle_batch(&e, far_deadline()).await;
    let labels: Vec<_> = report.outcomes().map(|o| o.label()).collect();
    assert_eq!(
        labels,
        ["Applied", "Applied", "Duplicate", "Rejected", "Invalid"]
    );
    // Only the invalid record goes back; its error names no value.
    assert_eq!(failed_ids(&answer.expect("a partial batch")), ["m5"]);
    assert!(!format!("{:?}", report.records[4].outcome).contains("secret"));
    assert_eq!(balance(&db, "c1").await, 40);

    // The same handler on Kinesis: a redelivered record is a duplicate.
    let kinesis_fn = function(&db.client, &db.table);
    let stream = kinesis::batch(vec![
        kinesis::record(
            &seq(1),
            "c2",
            event("PointsEarned", "k1", "c2", 5).as_bytes(),
        ),
        kinesis::record(
            &seq(2),
            "c1",
            event("PointsEarned", "e1", "c1", 100).as_bytes(),
        ),
    ]);
    let (report, answer) = kinesis_fn.handle_batch(&stream, far_deadline()).await;
    let labels: Vec<_> = report.outcomes().map(|o| o.label()).collect();
    assert_eq!(labels, ["Applied", "Duplicate"]);
    assert!(kinesis::failed_ids(&answer.expect("answers")).is_empty());
    assert_eq!(balance(&db, "c2").await, 5);
}

/// DynamoDB unreachable: every record fails, and the invocation fails
/// with it (the default), so the outage shows in Lambda's Errors.
#[tokio::test]
async fn an_outage_fails_the_invocation() {
    let client = client_for("http://127.0.0.1:9");
    let sqs = function(&client, "loyalty");
    let e = batch(vec![record("m1", &event("PointsEarned", "e1", "c1", 1))]);
    let (_, answer) = sqs.handle_batch(&e, far_deadline()).await;
    assert_eq!(answer.err(), Some(BatchError::Outage(1)));
}

/// Vouchers over an empty idempotency table of their own, `keys` (a table
/// whose records expired reads the same).
async fn vouchers_over_new_table(db: &TestDb, keys: &str) -> Idempotent<Voucher, u64> {
    let keys = db.extra_table(keys, "id").await;
    let store = IdempotencyStore::new(
        db.client.clone(),
        IdempotencyTable::new(keys).expect("a name"),
        IdempotencyOptions::default(),
    )
    .expect("a store");
    Idempotent::new(store, "vouchers")
        .expect("a name")
        .key(|v: &Voucher| Some(v.voucher_id.clone()))
}

#[tokio::test]
async fn a_voucher_is_credited_to_its_customer_once() {
    let db = loyalty_db().await;
    let vouchers = vouchers_over_new_table(&db, "keys").await;
    let deadline = lambda_idempotency::time::epoch_ms() + 30_000;
    let voucher = || Voucher {
        voucher_id: "v1".into(),
        customer_id: "c1".into(),
        points: 25,
    };
    for _ in 0..2 {
        let credited = redeem(&vouchers, &db.table, voucher(), deadline).await;
        assert_eq!(credited.expect("redeemed"), 25);
    }
    assert_eq!(balance(&db, "c1").await, 25, "credited once");

    // Days later, its idempotency record gone: the customer's item still
    // refuses a second credit.
    let forgotten = vouchers_over_new_table(&db, "forgotten-keys").await;
    let late = redeem(&forgotten, &db.table, voucher(), deadline).await;
    assert!(
        matches!(late, Err(IdempotencyError::Cancelled { .. })),
        "{late:?}"
    );
    assert_eq!(balance(&db, "c1").await, 25, "still once");
}
