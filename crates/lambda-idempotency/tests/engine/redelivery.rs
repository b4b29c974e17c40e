//! The visibility of returned messages, set by the in-process function
//! through a local SQS endpoint (`orders::testing::sqs_endpoint`):
//! which messages get which delay, FIFO groups, and failing calls that
//! change nothing about the batch's answer.

use std::time::Duration;

use lambda_idempotency::Function;
use lambda_idempotency::backoff::BackoffPolicy;
use lambda_idempotency::redelivery::Redelivery;
use orders::testing::sqs_endpoint::{Mode, SqsEndpoint};
use orders::testing::*;
use orders::{OrderConfig, OrderFunction, OrderHandler};
use tokio::time::Instant;

/// An endpoint that accepts every change, and a consumer that uses it.
async fn consumer(db: &TestDb) -> (OrderFunction, SqsEndpoint) {
    let sqs = SqsEndpoint::start(std::sync::Arc::new(|_: &str, _: &str, _: u64| true)).await;
    let config = OrderConfig::from_lookup(|k| (k == "TABLE_NAME").then(|| db.table.clone()))
        .expect("valid test config");
    let c = Function::builder(OrderHandler::from_config(db.store(), &config))
        .name(orders::NAME)
        .settings(config.runtime)
        .redelivery(Some(Redelivery::new(
            sqs.client(),
            BackoffPolicy::default(),
        )))
        .build()
        .expect("the order consumer builds");
    (c, sqs)
}

/// The FIFO batch of `batches::a_fifo_group_stops_at_its_first_failure...`:
/// ord-a's Shipped is early, its Paid waits behind it, ord-b applies.
fn fifo_batch() -> aws_lambda_events::event::sqs::SqsEvent {
    let rec = |id: &str, order: &str, seq, kind, eid: &str| {
        fifo_record(id, &body(order, seq, kind, eid).to_string(), order)
    };
    batch(vec![
        rec("a1", "ord-a", 1, "OrderPlaced", "a1"),
        rec("b1", "ord-b", 1, "OrderPlaced", "b1"),
        rec("a3", "ord-a", 3, "OrderShipped", "a3"),
        rec("b2", "ord-b", 2, "OrderPaid", "b2"),
        rec("a2", "ord-a", 2, "OrderPaid", "a2"),
    ])
}

#[tokio::test]
async fn a_fifo_groups_early_head_is_delayed_and_its_blocked_successors_are_not() {
    let db = TestDb::new().await;
    let (c, sqs) = consumer(&db).await;
    let (report, failed) = run(&c, &fifo_batch()).await;
    assert_eq!(failed, ["a3", "a2"]);
    let changes: Vec<(String, u64)> = sqs
        .changes()
        .into_iter()
        .map(|ch| {
            assert_eq!(
                ch.queue_url,
                "https://sqs.us-east-1.amazonaws.com/111122223333/order-events.fifo"
            );
            (ch.receipt_handle, ch.visibility_secs)
        })
        .collect();
    assert_eq!(changes.len(), 2, "only the returned messages: {changes:?}");
    let (head, head_secs) = &changes[0];
    assert_eq!(head, "AQEBa3");
    assert!(
        *head_secs <= 1,
        "the Early curve's first ceiling is 1 s: {head_secs}"
    );
    assert_eq!(
        changes[1],
        ("AQEBa2".to_owned(), 0),
        "right behind its head"
    );
    assert_eq!(report.visibility.changed, 2);
    assert_eq!(report.visibility.failed, 0);
}

#[tokio::test]
async fn a_visibility_call_that_fails_changes_nothing_about_the_answer() {
    for mode in [
        Mode::Fail(500),
        Mode::Fail(400),
        Mode::RefuseEntries,
        Mode::Hang,
    ] {
        let db = TestDb::new().await;
        let (c, sqs) = consumer(&db).await;
        sqs.set_mode(mode);
        let deadline = Instant::now() + Duration::from_secs(10);
        let started = Instant::now();
        let (report, response) = c.handle_batch(&fifo_batch(), deadline).await;
        let response = response.expect("a partial-batch answer");
        assert_eq!(failed_ids(&response), ["a3", "a2"], "{mode:?}");
        assert_eq!(report.visibility.changed, 0, "{mode:?}");
        assert_eq!(report.visibility.failed, 2, "{mode:?}: counted");
        assert!(sqs.calls() > 0, "{mode:?}");
        // A hanging SQS costs at most its operation timeout, well inside
        // the deadline.
        assert!(
            Instant::now() < deadline,
            "{mode:?}: took {:?}",
            started.elapsed()
        );
        assert_eq!(db.history("ord-b").await, ["b1", "b2"], "{mode:?}");
    }
}

#[tokio::test]
async fn nothing_is_called_when_every_record_is_acknowledged() {
    let db = TestDb::new().await;
    let (c, sqs) = consumer(&db).await;
    let lc = lifecycle("ord-1");
    let bodies: Vec<_> = lc.iter().map(|(s, k, e)| body("ord-1", *s, k, e)).collect();
    let (report, failed) = run(&c, &batch_of(&bodies)).await;
    assert!(failed.is_empty());
    assert_eq!(sqs.calls(), 0);
    assert_eq!(report.visibility, Default::default());
}

#[tokio::test]
async fn a_hanging_sqs_is_cut_off_with_time_left_for_the_answer() {
    let db = TestDb::new().await;
    let (c, sqs) = consumer(&db).await;
    sqs.set_mode(Mode::Hang);
    // Margin 2 s: records stop at 0.6 s, the visibility phase at 1.6 s (half
    // the margin before the deadline), before the SDK's own 2 s timeout.
    let deadline = Instant::now() + Duration::from_millis(2_600);
    let (report, response) = c.handle_batch(&fifo_batch(), deadline).await;
    let answered = Instant::now();
    assert_eq!(failed_ids(&response.expect("an answer")), ["a3", "a2"]);
    assert!(
        answered + Duration::from_millis(900) <= deadline,
        "answered {:?} before the deadline",
        deadline.saturating_duration_since(answered)
    );
    assert_eq!(report.visibility.failed, 2);
    assert_eq!(report.visibility.changed, 0);
}
