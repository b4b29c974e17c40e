//! Whole-batch behaviour: ordering, wrappers, FIFO groups, concurrency.

use futures_util::future::join_all;
use lambda_idempotency::BatchError;
use lambda_idempotency::{RecordOutcome, Skip};
use orders::domain::Outcome;
use serde_json::json;

use orders::testing::*;

#[tokio::test]
async fn a_shuffled_lifecycle_in_one_batch_applies_in_seq_order() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let lc = lifecycle("ord-1");
    let shuffled: Vec<_> = [3, 1, 0, 2]
        .iter()
        .map(|&i| body("ord-1", lc[i].0, lc[i].1, &lc[i].2))
        .collect();
    let (report, failed) = run(&c, &batch_of(&shuffled)).await;
    assert_eq!(labels(&report), ["Applied"; 4]);
    assert!(failed.is_empty());
    assert_eq!(db.status("ord-1").await.as_deref(), Some("DELIVERED"));
    let expected: Vec<String> = lc.iter().map(|(_, _, e)| e.clone()).collect();
    assert_eq!(
        db.history("ord-1").await,
        expected,
        "applied in seq order, each once"
    );
}

#[tokio::test]
async fn sns_and_eventbridge_wrapped_bodies_are_unwrapped() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let placed = body("ord-1", 1, "OrderPlaced", "e1");
    let paid = body("ord-1", 2, "OrderPaid", "e2");
    let sns = json!({"Type": "Notification", "MessageId": "sns-1",
        "TopicArn": "arn:aws:sns:us-east-1:111122223333:orders", "Message": placed.to_string(),
        "Timestamp": "2026-11-29T10:15:00.000Z", "SignatureVersion": "1", "Signature": "x"});
    let eb = json!({"version": "0", "id": "eb-1", "detail-type": "OrderPaid", "source": "orders",
        "account": "111122223333", "time": "2026-11-29T10:15:00Z", "region": "us-east-1",
        "resources": [], "detail": paid});
    let (report, failed) = run(&c, &batch_of(&[sns, eb])).await;
    assert_eq!(labels(&report), ["Applied", "Applied"]);
    assert!(failed.is_empty());
    assert_eq!(db.history("ord-1").await, ["e1", "e2"]);
}

#[tokio::test]
async fn a_fifo_group_stops_at_its_first_failure_and_other_groups_go_on() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let rec = |id: &str, order: &str, seq, kind, eid: &str| {
        fifo_record(id, &body(order, seq, kind, eid).to_string(), order)
    };
    let event = batch(vec![
        rec("a1", "ord-a", 1, "OrderPlaced", "a1"),
        rec("b1", "ord-b", 1, "OrderPlaced", "b1"),
        // FIFO keeps arrival order: Shipped before Paid is early...
        rec("a3", "ord-a", 3, "OrderShipped", "a3"),
        rec("b2", "ord-b", 2, "OrderPaid", "b2"),
        // ...and Paid, though it would apply, must wait behind it.
        rec("a2", "ord-a", 2, "OrderPaid", "a2"),
    ]);
    let (report, failed) = run(&c, &event).await;
    assert_eq!(
        labels(&report),
        ["Applied", "Applied", "Early", "Applied", "NotAttempted"]
    );
    assert_eq!(
        report.records[4].outcome,
        RecordOutcome::NotAttempted(Skip::FifoGroupBlocked)
    );
    assert_eq!(failed, ["a3", "a2"]);
    assert_eq!(db.history("ord-a").await, ["a1"]);
    assert_eq!(db.history("ord-b").await, ["b1", "b2"]);
}

#[tokio::test]
async fn an_invalid_record_blocks_the_rest_of_its_fifo_group() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let event = batch(vec![
        fifo_record("bad", "{broken", "ord-a"),
        fifo_record(
            "a1",
            &body("ord-a", 1, "OrderPlaced", "a1").to_string(),
            "ord-a",
        ),
        fifo_record(
            "b1",
            &body("ord-b", 1, "OrderPlaced", "b1").to_string(),
            "ord-b",
        ),
    ]);
    let (report, failed) = run(&c, &event).await;
    assert_eq!(labels(&report), ["Invalid", "NotAttempted", "Applied"]);
    assert_eq!(failed, ["bad", "a1"]);
}

/// `record` as it is handed out for the `n`-th time.
fn on_receive(
    mut record: aws_lambda_events::event::sqs::SqsMessage,
    n: u32,
) -> aws_lambda_events::event::sqs::SqsMessage {
    record
        .attributes
        .insert("ApproximateReceiveCount".into(), n.to_string());
    record
}

// SQS counts a receive for every message of a group it hands out, so the
// records held behind a failed head reach maxReceiveCount with it. On the
// head's last receive they are attempted: held back, they would follow it
// to the DLQ unattempted.
#[tokio::test]
async fn a_fifo_heads_last_receive_lets_the_rest_of_its_group_go_on() {
    let db = TestDb::new().await;
    let (c, _) = db.counted_consumer(&[("MAX_RECEIVE_COUNT", "5")]);
    let rec = |id: &str, order: &str, seq, kind, eid: &str, n| {
        on_receive(
            fifo_record(id, &body(order, seq, kind, eid).to_string(), "grp"),
            n,
        )
    };
    let group = |head_receive| {
        batch(vec![
            on_receive(fifo_record("bad", "{broken", "grp"), head_receive),
            rec("a1", "ord-a", 1, "OrderPlaced", "a1", head_receive),
            // Early: ord-c has no OrderPlaced.
            rec("c2", "ord-c", 2, "OrderPaid", "c2", head_receive),
            // Sent after the head's third receive, so handed out fewer times.
            rec("e2", "ord-e", 2, "OrderPaid", "e2", 2),
            rec("b1", "ord-b", 1, "OrderPlaced", "b1", 2),
        ])
    };
    // Before its last receive the poison head holds its group back.
    let (report, failed) = run(&c, &group(4)).await;
    assert_eq!(
        labels(&report),
        [
            "Invalid",
            "NotAttempted",
            "NotAttempted",
            "NotAttempted",
            "NotAttempted"
        ]
    );
    assert_eq!(failed, ["bad", "a1", "c2", "e2", "b1"]);
    assert_eq!(db.history("ord-a").await, Vec::<String>::new());

    // On its last one it goes to the DLQ next, and the group goes on: a1
    // applies; c2 is Early on its own last receive, so it goes to the DLQ
    // too, with its own verdict, and does not hold the rest back either;
    // e2 is Early with receives left, so it comes back and holds b1 back.
    let (report, failed) = run(&c, &group(5)).await;
    assert_eq!(
        labels(&report),
        ["Invalid", "Applied", "Early", "Early", "NotAttempted"]
    );
    assert_eq!(failed, ["bad", "c2", "e2", "b1"]);
    assert_eq!(db.history("ord-a").await, ["a1"]);
    assert_eq!(db.history("ord-b").await, Vec::<String>::new());

    // A function not told the queue's maxReceiveCount holds back on every
    // receive, as before.
    let (report, _) = run(&db.consumer(), &group(5)).await;
    assert_eq!(
        labels(&report),
        [
            "Invalid",
            "NotAttempted",
            "NotAttempted",
            "NotAttempted",
            "NotAttempted"
        ]
    );
}

#[tokio::test]
async fn the_same_records_on_a_standard_queue_are_reordered_by_seq() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let event = batch_of(&[
        body("ord-a", 1, "OrderPlaced", "a1"),
        body("ord-a", 3, "OrderShipped", "a3"),
        body("ord-a", 2, "OrderPaid", "a2"),
    ]);
    let (report, failed) = run(&c, &event).await;
    assert_eq!(labels(&report), ["Applied"; 3]);
    assert!(failed.is_empty());
}

#[tokio::test]
async fn a_failed_record_without_message_id_fails_the_whole_invocation() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let event: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_value(json!({"Records": [
        {"body": "{not json", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:q"},
        {"messageId": "ok", "body": body("ord-1", 1, "OrderPlaced", "e1").to_string(),
         "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:q"}
    ]}))
    .unwrap();
    let (report, response) = c.handle_batch(&event, far_deadline()).await;
    assert_eq!(labels(&report), ["Invalid", "Applied"]);
    assert_eq!(response.unwrap_err(), BatchError::Unidentifiable(1));
}

// Several worker threads, so that the invocations (and the server) really
// run in parallel, not only interleaved on one thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_invocations_apply_each_event_exactly_once() {
    let db = TestDb::new().await;
    let orders: Vec<String> = (0..5).map(|i| format!("ord-{i}")).collect();
    let mut bodies = Vec::new();
    for o in &orders {
        for (seq, kind, eid) in lifecycle(o) {
            bodies.push(body(o, seq, kind, &eid));
        }
    }
    // 20 invocations (20 warm containers) each receive every event, each in a
    // different arrival order, all at once. 400 conditional writes in one
    // burst: the in-process server serialises them, and on a loaded machine
    // the last ones wait longer than the SDK's 2 s attempt timeout (and its
    // 5 s operation timeout) for their turn, which fails them as Timeout
    // (rightly: they go back to the queue). This test is about what
    // concurrent invocations do to the table, not about latency, so its
    // clients wait for the server, and its invocations have Lambda's
    // longest time (the cutoff would otherwise leave records NotAttempted).
    let consumers: Vec<_> = (0..20).map(|_| db.consumer_without_timeouts()).collect();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(900);
    let events: Vec<_> = (0..20)
        .map(|k| {
            let mut b = bodies.clone();
            b.rotate_left(k % bodies.len());
            if k % 2 == 1 {
                b.reverse();
            }
            batch_of(&b)
        })
        .collect();
    let runs = join_all(consumers.iter().zip(&events).map(|(c, e)| async move {
        let (report, response) = c.handle_batch(e, deadline).await;
        let response = response.expect("partial-batch response, not an invocation error");
        (report, failed_ids(&response))
    }))
    .await;

    let mut applied = std::collections::HashMap::<String, usize>::new();
    for (report, failed) in &runs {
        // Each returned record with its outcome, for a failure message
        // that says why (a Timeout, an Early, ...), not only which.
        let unsettled: Vec<String> = report
            .records
            .iter()
            .filter_map(|r| Some((r.record_id.as_ref()?, &r.outcome)))
            .filter(|(id, _)| failed.contains(id))
            .map(|(id, outcome)| format!("{id}: {outcome}"))
            .collect();
        assert!(
            failed.is_empty(),
            "all settle: applied, duplicate or stale ({unsettled:?})"
        );
        for r in &report.records {
            assert!(
                matches!(
                    r.outcome,
                    RecordOutcome::Settled(
                        Outcome::Applied | Outcome::Duplicate | Outcome::Stale { .. }
                    )
                ),
                "{:?}: {}",
                r.record_id,
                r.outcome
            );
        }
    }
    // Count Applied per eventId across all invocations.
    for (k, (report, _)) in runs.iter().enumerate() {
        for rec in &report.records {
            if rec.outcome == Outcome::Applied {
                let idx: usize = rec.record_id.as_deref().unwrap()[2..].parse().unwrap();
                let eid = events[k].records[idx].body.clone().unwrap();
                let eid = serde_json::from_str::<serde_json::Value>(&eid).unwrap()["eventId"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                *applied.entry(eid).or_default() += 1;
            }
        }
    }
    // No two invocations may both claim to have applied an event. (The
    // invocation whose write committed can itself report Duplicate when the
    // SDK re-sent a write whose answer was lost: the re-send finds its own
    // write. So "Applied" is at most once; the table is the truth.)
    assert!(
        applied.values().all(|&n| n == 1),
        "no event applied twice: {applied:?}"
    );
    // Exactly once: each order's history lists every event once, in order.
    for o in &orders {
        let expected: Vec<String> = lifecycle(o).into_iter().map(|(_, _, e)| e).collect();
        assert_eq!(db.history(o).await, expected);
        assert_eq!(db.status(o).await.as_deref(), Some("DELIVERED"));
    }
}

#[tokio::test]
async fn the_lambda_entry_point_uses_the_invocation_deadline() {
    let db = TestDb::new().await;
    let c = db.consumer();
    let event = batch_of(&[
        body("ord-1", 1, "OrderPlaced", "e1"),
        body("ord-1", 3, "OrderShipped", "e3"),
    ]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;

    // A deadline already in the past: nothing starts, and the invocation
    // fails (everything goes back, and it shows in the Errors metric).
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = now_ms;
    let response = c
        .handle(lambda_runtime::LambdaEvent::new(event.clone(), ctx))
        .await;
    let err = response.expect_err("no time for any record");
    assert_eq!(err.error_type, "OrderConsumer.TimeoutBelowDeadlineMargin");
    assert_eq!(db.count_items().await, 0);

    // A normal deadline: Placed applies, Shipped is early and goes back.
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = now_ms + 30_000;
    let response = c
        .handle(lambda_runtime::LambdaEvent::new(event, ctx))
        .await
        .unwrap();
    assert_eq!(failed_ids(&response), ["m-1"]);
    assert_eq!(db.history("ord-1").await, ["e1"]);
}

#[tokio::test]
async fn orders_are_written_concurrently_but_never_more_than_max_concurrency_at_once() {
    let db = TestDb::new().await;
    let (c, requests) = db.counted_consumer_without_retries(&[("MAX_CONCURRENCY", "3")]);
    // 12 orders, one event each: 12 independent groups.
    let bodies: Vec<_> = (0..12)
        .map(|i| body(&format!("ord-{i}"), 1, "OrderPlaced", &format!("e{i}")))
        .collect();
    let (report, failed) = run(&c, &batch_of(&bodies)).await;
    assert_eq!(labels(&report), ["Applied"; 12]);
    assert!(failed.is_empty());
    // Unbounded, all 12 requests would be in flight together; sequential,
    // only one.
    let peak = requests.peak();
    assert!(
        (2..=3).contains(&peak),
        "peak in-flight requests {peak}, limit 3"
    );
}
