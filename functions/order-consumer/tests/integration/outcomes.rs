//! One test per outcome row, against a real DynamoDB-compatible server.

use lambda_idempotency::RecordOutcome;
use lambda_idempotency::StoreError;
use order_consumer::orders::domain::{ConflictKind, Outcome, Status};
use order_consumer::orders::event::{EventKind, ParseError};
use serde_json::json;

use order_consumer::testing::*;

#[tokio::test]
async fn applied_writes_the_state_and_the_event_data() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let (report, failed) = run(&c, &batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")])).await;
    assert_eq!(labels(&report), ["Applied"]);
    assert!(failed.is_empty());

    let item = db.item("ord-1").await.expect("item written");
    assert_eq!(s(&item, "status"), "PLACED");
    assert_eq!(s(&item, "last_event_seq"), "1");
    assert_eq!(s(&item, "last_event_id"), "e1");
    assert_eq!(s(&item, "customer_id"), "cust-1");
    assert_eq!(s(&item, "amount"), "150000");
    assert_eq!(s(&item, "currency"), "INR");
    assert_eq!(s(&item, "event_hash").len(), 32);
    assert!(s(&item, "updated_at").ends_with('Z'));
    assert_eq!(db.history("ord-1").await, ["e1"]);

    let (report, _) = run(&c, &batch_of(&[body("ord-1", 2, "OrderPaid", "e2")])).await;
    assert_eq!(labels(&report), ["Applied"]);
    let item = db.item("ord-1").await.unwrap();
    assert_eq!(s(&item, "status"), "PAID");
    assert_eq!(s(&item, "payment_id"), "pay-1");
    assert_eq!(s(&item, "paid_amount"), "150000");
    assert_eq!(s(&item, "paid_currency"), "INR");
    assert_eq!(s(&item, "paid_at"), "2026-11-29T10:15:00Z");
    assert_eq!(s(&item, "customer_id"), "cust-1", "earlier data is kept");
    assert_eq!(db.history("ord-1").await, ["e1", "e2"]);

    let (report, _) = run(
        &c,
        &batch_of(&[
            body("ord-1", 3, "OrderShipped", "e3"),
            body("ord-1", 4, "OrderDelivered", "e4"),
        ]),
    )
    .await;
    assert_eq!(labels(&report), ["Applied", "Applied"]);
    let item = db.item("ord-1").await.unwrap();
    assert_eq!(s(&item, "status"), "DELIVERED");
    assert_eq!(s(&item, "carrier"), "BlueDart");
    assert_eq!(s(&item, "tracking_id"), "BD1");
    assert_eq!(s(&item, "shipped_at"), "2026-11-29T10:15:00Z");
    assert_eq!(s(&item, "delivered_at"), "2026-11-29T10:15:00Z");
    assert_eq!(s(&item, "last_event_type"), "OrderDelivered");

    // A cancellation keeps its reason.
    let (report, _) = run(
        &c,
        &batch_of(&[
            body("ord-2", 1, "OrderPlaced", "c1"),
            body("ord-2", 2, "OrderCancelled", "c2"),
        ]),
    )
    .await;
    assert_eq!(labels(&report), ["Applied", "Applied"]);
    let item = db.item("ord-2").await.unwrap();
    assert_eq!(s(&item, "status"), "CANCELLED");
    assert_eq!(s(&item, "cancel_reason"), "customer request");
    assert_eq!(s(&item, "cancelled_at"), "2026-11-29T10:15:00Z");
}

#[tokio::test]
async fn duplicate_is_acknowledged_and_not_applied_again() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let placed = batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")]);
    run(&c, &placed).await;
    // The same message redelivered.
    let (report, failed) = run(&c, &placed).await;
    assert_eq!(report.records[0].outcome, Outcome::Duplicate);
    assert!(failed.is_empty(), "a duplicate is acknowledged");
    // The producer re-published it under a new messageId, in the same batch twice.
    let again = batch(vec![
        record("new-1", &body("ord-1", 1, "OrderPlaced", "e1").to_string()),
        record("new-2", &body("ord-1", 1, "OrderPlaced", "e1").to_string()),
    ]);
    let (report, failed) = run(&c, &again).await;
    assert_eq!(labels(&report), ["Duplicate", "Duplicate"]);
    assert!(failed.is_empty());

    // The answers above may come from the warm container's cache. A container
    // with no cache must get the same answer from DynamoDB itself: the write
    // is refused and the item it returns is this very event.
    let (cold, requests) = db.counted_consumer(&[("DEDUPE_CACHE_SIZE", "0")]);
    let (report, failed) = run(&cold, &placed).await;
    assert_eq!(report.records[0].outcome, Outcome::Duplicate);
    assert!(failed.is_empty());
    assert_eq!(requests.get(), 1, "classified from DynamoDB's answer");
    assert_eq!(db.history("ord-1").await, ["e1"], "applied exactly once");
}

#[tokio::test]
async fn duplicate_of_an_event_in_the_same_batch() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let b = body("ord-1", 1, "OrderPlaced", "e1").to_string();
    let (report, failed) = run(&c, &batch(vec![record("a", &b), record("b", &b)])).await;
    assert_eq!(labels(&report), ["Applied", "Duplicate"]);
    assert!(failed.is_empty());
    assert_eq!(db.history("ord-1").await, ["e1"]);
}

#[tokio::test]
async fn stale_is_acknowledged_and_changes_nothing() {
    let db = TestDb::new().await;
    let c = db.consumer();
    run(
        &c,
        &batch_of(&[
            body("ord-1", 1, "OrderPlaced", "e1"),
            body("ord-1", 2, "OrderPaid", "e2"),
            body("ord-1", 3, "OrderCancelled", "e3"),
        ]),
    )
    .await;
    let before = db.item("ord-1").await;
    // A late copy of OrderPaid, whose turn has passed.
    let (report, failed) = run(&c, &batch_of(&[body("ord-1", 2, "OrderPaid", "e2")])).await;
    assert_eq!(report.records[0].outcome, Outcome::Stale { last_seq: 3 });
    assert!(failed.is_empty());
    assert_eq!(db.item("ord-1").await, before, "the item is untouched");
}

/// Review finding: the same eventId and seq with other content was a
/// Conflict only while it was the order's last event; one event later it
/// was Stale and acknowledged. The item keeps every processed seq's hash.
#[tokio::test]
async fn a_changed_payload_under_an_older_seq_is_a_conflict() {
    let db = TestDb::new().await;
    let c = consumer_with(db.store(), &[("DEDUPE_CACHE_SIZE", "0")]);
    let paid = body("ord-1", 2, "OrderPaid", "e2");
    run(
        &c,
        &batch_of(&[
            body("ord-1", 1, "OrderPlaced", "e1"),
            paid.clone(),
            body("ord-1", 3, "OrderCancelled", "e3"),
        ]),
    )
    .await;
    let before = db.item("ord-1").await;
    let mut changed = paid.clone();
    changed["data"]["amount"] = json!(1);
    let other_event = body("ord-1", 2, "OrderPaid", "e2-other");
    let (report, failed) = run(&c, &batch_of(&[changed, other_event, paid])).await;
    assert_eq!(
        labels(&report),
        ["Conflict", "Conflict", "Stale"],
        "{:?}",
        report.records
    );
    assert_eq!(failed, ["m-0", "m-1"], "conflicts are not acknowledged");
    assert_eq!(db.item("ord-1").await, before, "the item is untouched");
    // The same through a warm cache: it must not settle them as Stale.
    let warm = db.consumer();
    run(&warm, &batch_of(&[body("ord-1", 2, "OrderPaid", "e2")])).await;
    let mut changed = body("ord-1", 2, "OrderPaid", "e2");
    changed["data"]["amount"] = json!(1);
    let (report, _) = run(&warm, &batch_of(&[changed])).await;
    assert_eq!(labels(&report), ["Conflict"]);
}

/// Review finding: an OrderPlaced out of turn (events/07's
/// `evt-1001-replaced`, seq 5) that reached an empty table founded the
/// order at seq 5, and then events/01's whole lifecycle was Stale and
/// deleted. It is Early until its predecessors have been processed.
#[tokio::test]
async fn an_order_placed_out_of_turn_does_not_swallow_the_lifecycle() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let replaced = crate::sample_events::load("07-illegal-transition.json")
        .records
        .into_iter()
        .filter(|r| r.body.as_deref().is_some_and(|b| b.contains("ord-1001")))
        .collect::<Vec<_>>();
    assert_eq!(replaced.len(), 1);
    let (report, failed) = run(&c, &batch(replaced.clone())).await;
    assert!(
        matches!(
            report.records[0].outcome,
            RecordOutcome::Settled(Outcome::Early {
                current: None,
                event: EventKind::Placed
            })
        ),
        "{:?}",
        report.records
    );
    assert_eq!(failed.len(), 1, "it goes back to the queue");
    assert_eq!(db.item("ord-1001").await, None, "no order founded");

    let (report, _) = run(&c, &crate::sample_events::load("01-happy-path.json")).await;
    assert_eq!(labels(&report), ["Applied"; 4]);
    // Its redelivery, in its turn: rejected, its seq spent.
    let (report, failed) = run(&c, &batch(replaced)).await;
    assert_eq!(labels(&report), ["Rejected"]);
    assert!(failed.is_empty());
    assert_eq!(
        db.history("ord-1001").await,
        ["evt-1001-1", "evt-1001-2", "evt-1001-3", "evt-1001-4"]
    );
    assert_eq!(db.status("ord-1001").await.as_deref(), Some("DELIVERED"));
    assert_eq!(db.rejected("ord-1001").await, ["evt-1001-replaced"]);
}

#[tokio::test]
async fn rejected_is_acknowledged_and_counted() {
    let db = TestDb::new().await;
    let c = db.consumer();
    run(
        &c,
        &batch_of(&[
            body("ord-1", 1, "OrderPlaced", "e1"),
            body("ord-1", 2, "OrderCancelled", "e2"),
        ]),
    )
    .await;
    let (report, failed) = run(
        &c,
        &batch_of(&[
            // Shipping a cancelled order can never become legal.
            body("ord-1", 3, "OrderShipped", "e3"),
            // Nor can a second OrderPlaced for an existing order.
            body("ord-1", 4, "OrderPlaced", "e4"),
        ]),
    )
    .await;
    assert_eq!(
        report.records[0].outcome,
        Outcome::Rejected {
            current: Some(Status::Cancelled),
            event: EventKind::Shipped
        }
    );
    assert_eq!(
        report.records[1].outcome,
        Outcome::Rejected {
            current: Some(Status::Cancelled),
            event: EventKind::Placed
        }
    );
    assert!(failed.is_empty(), "rejected events are acknowledged");
    assert_eq!(db.status("ord-1").await.as_deref(), Some("CANCELLED"));
    assert_eq!(db.history("ord-1").await, ["e1", "e2"]);
    // Each was the order's next event, so each spent its seq before being
    // acknowledged.
    assert_eq!(db.rejected("ord-1").await, ["e3", "e4"]);
    let item = db.item("ord-1").await.expect("item");
    assert_eq!(s(&item, "last_event_seq"), "4");
    let counts = report.counts();
    assert_eq!(counts.get("Rejected"), 2);
}

#[tokio::test]
async fn cancelling_a_shipped_order_is_rejected() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let lc = lifecycle("ord-1");
    let bodies: Vec<_> = lc[..3]
        .iter()
        .map(|(s, k, e)| body("ord-1", *s, k, e))
        .collect();
    run(&c, &batch_of(&bodies)).await;
    let (report, failed) = run(&c, &batch_of(&[body("ord-1", 4, "OrderCancelled", "c")])).await;
    assert!(matches!(
        report.records[0].outcome,
        RecordOutcome::Settled(Outcome::Rejected {
            current: Some(Status::Shipped),
            ..
        })
    ));
    assert!(failed.is_empty());
}

#[tokio::test]
async fn early_is_retried_and_applies_once_its_predecessor_has() {
    let db = TestDb::new().await;
    let c = db.consumer();
    // OrderPaid before the order exists.
    let paid = batch(vec![record(
        "paid",
        &body("ord-1", 2, "OrderPaid", "e2").to_string(),
    )]);
    let (report, failed) = run(&c, &paid).await;
    assert_eq!(
        report.records[0].outcome,
        Outcome::Early {
            current: None,
            event: EventKind::Paid
        }
    );
    assert_eq!(failed, ["paid"], "an early event goes back to the queue");
    assert_eq!(db.count_items().await, 0, "nothing was written");

    run(&c, &batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")])).await;
    // OrderShipped while the order is only PLACED: PAID is still reachable.
    let shipped = batch(vec![record(
        "ship",
        &body("ord-1", 3, "OrderShipped", "e3").to_string(),
    )]);
    let (report, failed) = run(&c, &shipped).await;
    assert!(matches!(
        report.records[0].outcome,
        RecordOutcome::Settled(Outcome::Early {
            current: Some(Status::Placed),
            ..
        })
    ));
    assert_eq!(failed, ["ship"]);

    // SQS redelivers both; now they apply, in order.
    let (report, failed) = run(&c, &paid).await;
    assert_eq!(labels(&report), ["Applied"]);
    assert!(failed.is_empty());
    let (report, _) = run(&c, &shipped).await;
    assert_eq!(labels(&report), ["Applied"]);
    assert_eq!(db.history("ord-1").await, ["e1", "e2", "e3"]);
}

#[tokio::test]
async fn conflict_is_a_failure_and_changes_nothing() {
    let db = TestDb::new().await;
    let c = db.consumer();
    run(&c, &batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")])).await;
    let before = db.item("ord-1").await;

    let mut changed = body("ord-1", 1, "OrderPlaced", "e1");
    changed["data"]["amount"] = json!(999);
    let event = batch(vec![
        record(
            "other",
            &body("ord-1", 1, "OrderPlaced", "e1-other").to_string(),
        ),
        record("changed", &changed.to_string()),
    ]);
    let (report, failed) = run(&c, &event).await;
    assert_eq!(
        report.records[0].outcome,
        Outcome::Conflict(ConflictKind::SeqTakenByOtherEvent)
    );
    assert_eq!(
        report.records[1].outcome,
        Outcome::Conflict(ConflictKind::ChangedPayload)
    );
    assert_eq!(failed, ["other", "changed"]);
    assert_eq!(db.item("ord-1").await, before);
}

#[tokio::test]
async fn invalid_bodies_fail_alone_with_a_specific_reason() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let mut no_seq = body("ord-2", 1, "OrderPlaced", "x");
    no_seq.as_object_mut().unwrap().remove("seq");
    let mut float_amount = body("ord-3", 1, "OrderPlaced", "y");
    float_amount["data"]["amount"] = json!(10.5);
    let event = batch(vec![
        record("good", &body("ord-1", 1, "OrderPlaced", "e1").to_string()),
        record("not-json", "this is not json"),
        record("no-seq", &no_seq.to_string()),
        record("float", &float_amount.to_string()),
        record("good-2", &body("ord-1", 2, "OrderPaid", "e2").to_string()),
    ]);
    let (report, failed) = run(&c, &event).await;
    assert_eq!(
        labels(&report),
        ["Applied", "Invalid", "Invalid", "Invalid", "Applied"]
    );
    assert_eq!(failed, ["not-json", "no-seq", "float"]);
    assert!(matches!(
        &report.records[1].outcome,
        RecordOutcome::Invalid(ParseError::NotJson(_))
    ));
    assert_eq!(
        report.records[2].outcome,
        RecordOutcome::Invalid(ParseError::MissingField { path: "seq".into() })
    );
    assert_eq!(
        report.records[3].outcome,
        RecordOutcome::Invalid(ParseError::WrongType {
            path: "data.amount".into(),
            expected: "a non-negative integer"
        })
    );
    assert_eq!(db.count_items().await, 1);
}

#[tokio::test]
async fn missing_table_fails_the_invocation() {
    let db = TestDb::new().await;
    let store = order_consumer::orders::store::OrderStore::new(db.client.clone(), "no-such-table");
    let c = consumer_with(store, &[]);
    let event = batch_of(&[
        body("ord-1", 1, "OrderPlaced", "e1"),
        body("ord-2", 1, "OrderPlaced", "e2"),
    ]);
    let (report, response) = c.handle_batch(&event, far_deadline()).await;
    assert_eq!(labels(&report), ["Failed", "Failed"]);
    assert_eq!(
        report.records[0].outcome,
        RecordOutcome::Failed(StoreError::TableNotFound)
    );
    assert_eq!(
        response.unwrap_err(),
        lambda_idempotency::BatchError::Outage(2)
    );
}

#[tokio::test]
async fn unreachable_dynamodb_is_a_network_failure() {
    let c = unreachable_consumer();
    let event = batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")]);
    let (report, response) = c.handle_batch(&event, far_deadline()).await;
    assert_eq!(
        report.records[0].outcome,
        RecordOutcome::Failed(StoreError::Network)
    );
    assert!(
        response.is_err(),
        "every record failed on infrastructure: invocation error"
    );
}

#[tokio::test]
async fn a_cancellation_cannot_overtake_the_payment() {
    // Placed(1), Paid(2), Cancelled(3), with Cancelled(3) delivered while
    // Paid(2) is still being retried. PLACED may be cancelled, so a guard of
    // `last_event_seq < :seq` would apply the cancellation, and the payment
    // would then be "stale" and lost. Contiguous seqs make it wait.
    let db = TestDb::new().await;
    let c = db.consumer();
    run(&c, &batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")])).await;
    let cancel = batch(vec![record(
        "cancel",
        &body("ord-1", 3, "OrderCancelled", "e3").to_string(),
    )]);
    let (report, failed) = run(&c, &cancel).await;
    assert_eq!(
        report.records[0].outcome,
        Outcome::Early {
            current: Some(Status::Placed),
            event: EventKind::Cancelled
        }
    );
    assert_eq!(failed, ["cancel"]);
    assert_eq!(db.status("ord-1").await.as_deref(), Some("PLACED"));

    let (report, _) = run(&c, &batch_of(&[body("ord-1", 2, "OrderPaid", "e2")])).await;
    assert_eq!(labels(&report), ["Applied"]);
    let (report, failed) = run(&c, &cancel).await;
    assert_eq!(labels(&report), ["Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.history("ord-1").await, ["e1", "e2", "e3"]);
    let item = db.item("ord-1").await.expect("item");
    assert_eq!(s(&item, "status"), "CANCELLED");
    assert_eq!(
        s(&item, "payment_id"),
        "pay-1",
        "the payment is on the order"
    );
}

#[tokio::test]
async fn a_rejected_event_spends_its_seq_so_the_next_one_applies() {
    // A producer bug: the order is placed twice (seq 2 is a second
    // OrderPlaced). It is rejected, and Paid(3) must not wait for a seq 2
    // that will never apply.
    let db = TestDb::new().await;
    let c = db.consumer();
    let (report, failed) = run(
        &c,
        &batch_of(&[
            body("ord-1", 1, "OrderPlaced", "e1"),
            body("ord-1", 2, "OrderPlaced", "e2"),
            body("ord-1", 3, "OrderPaid", "e3"),
        ]),
    )
    .await;
    assert_eq!(labels(&report), ["Applied", "Rejected", "Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.history("ord-1").await, ["e1", "e3"]);
    assert_eq!(db.rejected("ord-1").await, ["e2"]);

    // Its redelivery finds seq 2 spent: Stale, acknowledged, nothing written.
    let before = db.item("ord-1").await;
    let (report, failed) = run(&c, &batch_of(&[body("ord-1", 2, "OrderPlaced", "e2")])).await;
    assert_eq!(labels(&report), ["Stale"]);
    assert!(failed.is_empty());
    assert_eq!(db.item("ord-1").await, before);
}

#[tokio::test]
async fn a_gap_waits_even_for_an_event_that_will_be_rejected() {
    // Placed(1), then a second OrderPlaced at seq 3 while seq 2 is missing:
    // it is Early (retried), not Rejected at once, because it must spend
    // seq 3 in its turn for Paid(4) to apply later.
    let db = TestDb::new().await;
    let c = db.consumer();
    run(&c, &batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")])).await;
    let (report, _) = run(&c, &batch_of(&[body("ord-1", 3, "OrderPlaced", "e3")])).await;
    assert_eq!(labels(&report), ["Early"]);
    let (report, failed) = run(
        &c,
        &batch_of(&[
            body("ord-1", 4, "OrderPaid", "e4"),
            body("ord-1", 3, "OrderPlaced", "e3"),
            body("ord-1", 2, "OrderCancelled", "e2"),
        ]),
    )
    .await;
    // Labels are in arrival order; the batch applies in seq order:
    // Cancelled(2) applies, then Placed(3) and Paid(4) are rejected (a
    // cancelled order can be neither placed nor paid) and spend their seqs.
    assert_eq!(labels(&report), ["Rejected", "Rejected", "Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.history("ord-1").await, ["e1", "e2"]);
    assert_eq!(db.rejected("ord-1").await, ["e3", "e4"]);
}

#[tokio::test]
async fn a_rejection_before_its_turn_waits_for_it_on_a_finished_order() {
    // Issue 27, item 1: CANCELLED at seq 2; OrderPaid(4) arrives before
    // OrderShipped(3). Both can never apply, but Paid(4) must not be
    // acknowledged before its turn: it would be forgotten, and the final
    // item would depend on the delivery order.
    let db = TestDb::new().await;
    let c = db.consumer();
    run(
        &c,
        &batch_of(&[
            body("ord-1", 1, "OrderPlaced", "e1"),
            body("ord-1", 2, "OrderCancelled", "e2"),
        ]),
    )
    .await;
    let (report, failed) = run(&c, &batch_of(&[body("ord-1", 4, "OrderPaid", "e4")])).await;
    assert_eq!(labels(&report), ["Early"]);
    assert_eq!(failed, ["m-0"], "not acknowledged before its turn");
    assert!(db.rejected("ord-1").await.is_empty());

    let (report, failed) = run(
        &c,
        &batch_of(&[
            body("ord-1", 3, "OrderShipped", "e3"),
            body("ord-1", 4, "OrderPaid", "e4"),
        ]),
    )
    .await;
    assert_eq!(labels(&report), ["Rejected", "Rejected"]);
    assert!(failed.is_empty());
    // The same item as when both arrive in turn.
    assert_eq!(db.rejected("ord-1").await, ["e3", "e4"]);
    assert_eq!(s(&db.item("ord-1").await.unwrap(), "last_event_seq"), "4");
    assert_eq!(db.status("ord-1").await.as_deref(), Some("CANCELLED"));
}

#[tokio::test]
async fn an_order_stays_bounded_under_thousands_of_rejected_events() {
    // Issue 27, item 5: every in-turn rejection appended to
    // `processed_hashes` and `rejected_events`; with 256-byte eventIds a
    // finished order passed DynamoDB's 400 KB item limit (which the local
    // server enforces) after about 1,300 of them, and every later write for
    // it failed. The lists are now windows; `rejected_count` counts all.
    // The item starts as an order that already went through 1,250 such
    // rejections under the old code (about 370 KB): the new code shrinks
    // it, and keeps it bounded through 150 more.
    use aws_sdk_dynamodb::types::AttributeValue as A;
    use order_consumer::orders::domain::{MAX_PROCESSED_HASHES, MAX_REJECTED_EVENTS};
    const BEFORE: u64 = 1_250;
    const EVENTS: u64 = 150;
    let db = TestDb::new().await;
    let c = db.consumer();
    let id = |seq: u64| format!("{seq:0>256}");
    let list = |f: &dyn Fn(u64) -> String| A::L((3..3 + BEFORE).map(|q| A::S(f(q))).collect());
    let seeded = 2 + BEFORE;
    db.client
        .put_item()
        .table_name(&db.table)
        .item("order_id", A::S("ord-1".into()))
        .item("status", A::S("CANCELLED".into()))
        .item("last_event_seq", A::N(seeded.to_string()))
        .item("last_event_id", A::S(id(seeded)))
        .item("last_event_type", A::S("OrderShipped".into()))
        .item("event_hash", A::S(format!("{:032}", seeded)))
        .item("history", A::L(vec![A::S(id(1)), A::S(id(2))]))
        .item("rejected_events", list(&|q| id(q)))
        .item("processed_hashes", list(&|q| format!("{q}:{q:032}")))
        .send()
        .await
        .expect("seed the grown item");

    let mut seq = seeded + 1;
    let last = seeded + EVENTS;
    while seq <= last {
        let bodies: Vec<_> = (seq..(seq + 10).min(last + 1))
            .map(|s| body("ord-1", s, "OrderShipped", &id(s)))
            .collect();
        let (report, failed) = run(&c, &batch_of(&bodies)).await;
        assert!(
            failed.is_empty(),
            "seq {seq}: {:?}",
            report.outcomes().map(|o| o.to_string()).collect::<Vec<_>>()
        );
        seq += bodies.len() as u64;
    }
    let item = db.item("ord-1").await.expect("item");
    assert_eq!(s(&item, "last_event_seq"), last.to_string());
    assert_eq!(s(&item, "rejected_count"), (BEFORE + EVENTS).to_string());
    let rejected = db.rejected("ord-1").await;
    let expected: Vec<String> = (last + 1 - MAX_REJECTED_EVENTS as u64..=last)
        .map(id)
        .collect();
    assert_eq!(rejected, expected, "the latest rejections, in seq order");
    let hashes = item["processed_hashes"].as_l().expect("a list");
    assert_eq!(hashes.len(), MAX_PROCESSED_HASHES);

    // The window decides nothing about acknowledgement: the latest event
    // again is a Duplicate, one whose hash left the window Stale, one still
    // in the window with another payload a Conflict.
    let mut changed = body("ord-1", last - 1, "OrderShipped", &id(last - 1));
    changed["data"]["carrier"] = json!("Other");
    let (report, failed) = run(
        &c,
        &batch_of(&[
            body("ord-1", last, "OrderShipped", &id(last)),
            body("ord-1", seeded + 1, "OrderShipped", &id(seeded + 1)),
            changed,
        ]),
    )
    .await;
    assert_eq!(labels(&report), ["Duplicate", "Stale", "Conflict"]);
    assert_eq!(failed, ["m-2"]);
}
