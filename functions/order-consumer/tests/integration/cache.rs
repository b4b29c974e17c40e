//! The warm-container dedupe cache, proven by counting DynamoDB requests at
//! the HTTP layer: a first-time message costs exactly one request, a
//! duplicate the warm container has seen costs none, and the cache never
//! settles anything DynamoDB has not confirmed.

use lambda_idempotency::RecordOutcome;
use order_consumer::orders::domain::Outcome;
use serde_json::Value;

use order_consumer::testing::*;

fn lifecycles(n: usize) -> Vec<Value> {
    (0..n)
        .flat_map(|i| {
            let o = format!("ord-{i}");
            lifecycle(&o)
                .into_iter()
                .map(move |(s, k, e)| body(&o, s, k, &e))
        })
        .collect()
}

#[tokio::test]
async fn first_time_messages_cost_exactly_one_request_each() {
    let db = TestDb::new().await;
    let (c, requests) = db.counted_consumer(&[]);
    let event = batch_of(&lifecycles(5));
    let (report, failed) = run(&c, &event).await;
    assert_eq!(labels(&report), ["Applied"; 20]);
    assert!(failed.is_empty());
    assert_eq!(requests.get(), 20);
    assert_eq!((report.cache_hits, report.cache_misses), (0, 20));
}

#[tokio::test]
async fn warm_duplicates_cost_no_request_and_cold_ones_cost_one() {
    let db = TestDb::new().await;
    let event = batch_of(&lifecycles(5));
    let (warm, warm_requests) = db.counted_consumer(&[]);
    run(&warm, &event).await;
    assert_eq!(warm_requests.get(), 20);

    // The whole batch redelivered to the same (warm) container.
    let (report, failed) = run(&warm, &event).await;
    assert_eq!(
        warm_requests.get(),
        20,
        "no DynamoDB request for cached duplicates"
    );
    assert!(failed.is_empty());
    assert_eq!((report.cache_hits, report.cache_misses), (20, 0));
    let warm_labels = labels(&report);
    assert_eq!(warm_labels.iter().filter(|l| **l == "Duplicate").count(), 5);
    assert_eq!(warm_labels.iter().filter(|l| **l == "Stale").count(), 15);

    // The same redelivery to a cold container: DynamoDB refuses the first
    // event of each order and returns the item, which teaches the cache the
    // committed seq; that order's other events are then settled without a
    // request. One request per order, and the same classification.
    let (cold, cold_requests) = db.counted_consumer(&[]);
    let (report, failed) = run(&cold, &event).await;
    assert_eq!(cold_requests.get(), 5);
    assert_eq!((report.cache_hits, report.cache_misses), (15, 5));
    assert!(failed.is_empty());
    assert_eq!(labels(&report), warm_labels);
}

#[tokio::test]
async fn a_duplicate_within_one_batch_costs_no_second_request() {
    let db = TestDb::new().await;
    let (c, requests) = db.counted_consumer(&[]);
    let b = body("ord-1", 1, "OrderPlaced", "e1").to_string();
    let (report, _) = run(&c, &batch(vec![record("a", &b), record("b", &b)])).await;
    assert_eq!(labels(&report), ["Applied", "Duplicate"]);
    assert_eq!(requests.get(), 1);
}

#[tokio::test]
async fn with_the_cache_off_every_duplicate_costs_a_request() {
    let db = TestDb::new().await;
    let (c, requests) = db.counted_consumer(&[("DEDUPE_CACHE_SIZE", "0")]);
    let event = batch_of(&lifecycles(2));
    run(&c, &event).await;
    let (report, failed) = run(&c, &event).await;
    assert_eq!(requests.get(), 16);
    assert_eq!((report.cache_hits, report.cache_misses), (0, 0));
    // Every redelivered event is settled by DynamoDB's refusal and the item
    // it returns: the last event of each order is a Duplicate, the others
    // are Stale.
    assert!(failed.is_empty());
    assert_eq!(
        labels(&report),
        [
            "Stale",
            "Stale",
            "Stale",
            "Duplicate",
            "Stale",
            "Stale",
            "Stale",
            "Duplicate"
        ]
    );
}

#[tokio::test]
async fn what_dynamodb_refused_to_apply_is_never_cached_as_done() {
    let db = TestDb::new().await;
    let (c, requests) = db.counted_consumer(&[]);
    // Early: nothing committed, so each redelivery must ask DynamoDB again.
    let paid = batch_of(&[body("ord-1", 2, "OrderPaid", "e2")]);
    for n in 1..=3 {
        let (report, failed) = run(&c, &paid).await;
        assert!(matches!(
            report.records[0].outcome,
            RecordOutcome::Settled(Outcome::Early { .. })
        ));
        assert_eq!(failed, ["m-0"]);
        assert_eq!(requests.get(), n);
    }
    assert!(
        c.handler().cache().is_empty(),
        "an early event leaves no trace in the cache"
    );

    // A write that failed (DynamoDB unreachable) leaves no trace either.
    let offline = unreachable_consumer();
    let placed = batch_of(&[body("ord-1", 1, "OrderPlaced", "e1")]);
    let (report, _) = offline.handle_batch(&placed, far_deadline()).await;
    assert!(matches!(
        report.records[0].outcome,
        RecordOutcome::Failed(_)
    ));
    assert!(offline.handler().cache().is_empty());
}

#[tokio::test]
async fn a_refusal_teaches_the_cache_what_is_committed() {
    let db = TestDb::new().await;
    // Another container applied the lifecycle.
    run(&db.consumer(), &batch_of(&lifecycles(1))).await;
    let (c, requests) = db.counted_consumer(&[]);
    // This container sees a redelivered OrderPaid: DynamoDB refuses it and
    // returns the item (seq 4), which the cache learns from.
    let (report, _) = run(
        &c,
        &batch_of(&[body("ord-0", 2, "OrderPaid", "evt-ord-0-2")]),
    )
    .await;
    assert_eq!(report.records[0].outcome, Outcome::Stale { last_seq: 4 });
    assert_eq!(requests.get(), 1);
    // Now any event up to seq 4 is settled without a request.
    let (report, _) = run(
        &c,
        &batch_of(&[body("ord-0", 3, "OrderShipped", "evt-ord-0-3")]),
    )
    .await;
    assert_eq!(report.records[0].outcome, Outcome::Stale { last_seq: 4 });
    assert_eq!(requests.get(), 1);
    // But a conflicting event at the committed seq still goes to DynamoDB.
    let (report, failed) = run(
        &c,
        &batch_of(&[body("ord-0", 4, "OrderDelivered", "other")]),
    )
    .await;
    assert!(matches!(
        report.records[0].outcome,
        RecordOutcome::Settled(Outcome::Conflict(_))
    ));
    assert_eq!(failed, ["m-0"]);
    assert_eq!(requests.get(), 2);
}
