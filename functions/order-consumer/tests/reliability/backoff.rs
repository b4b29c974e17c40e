//! Property 9: Backoff through the visibility timeout. The function sets
//! the visibility of every message it returns (ChangeMessageVisibilityBatch
//! against the queue's own SQS endpoint, `AWS_ENDPOINT_URL_SQS`), and the
//! queue simulator brings the message back when that visibility ends.
//!
//! The queues here have a visibility timeout of 600 s, far beyond the
//! tests' bound on wall time: a message that comes back at all before the
//! drain's deadline came back through the function's own delay. The tests
//! assert what was asked (each delay within its class's curve) and what
//! happened (convergence, the DLQ); the latencies are printed, not
//! asserted.
//!
//! And the other direction: a visibility call that fails, is refused
//! entry by entry, or hangs, changes nothing about *whether* a message
//! comes back; the workload converges with nothing lost.

use std::time::Duration;

use crate::harness::Harness;
use crate::model::{Lifecycle, Workload, ack_audit, assert_no_violations, body};
use crate::sqs::{DrainOpts, Queue, QueueConfig, drain};
use lambda_idempotency::RetryClass;
use lambda_idempotency::backoff::BackoffPolicy;
use order_consumer::testing::rng::Rng;
use order_consumer::testing::sqs_endpoint::{Mode, SqsEndpoint};

/// Longer than any test here may run: only the function's delay can bring
/// a message back in time.
const QUEUE_VISIBILITY: Duration = Duration::from_secs(600);

async fn harness(seed: u64, sqs: &SqsEndpoint) -> Harness {
    Harness::start(crate::binary_path(), 1, seed, |c| {
        c.env("RETRY_BACKOFF", "on")
            .env("AWS_ENDPOINT_URL_SQS", &sqs.url)
    })
    .await
}

fn opts() -> DrainOpts {
    DrainOpts {
        max_wall: Duration::from_secs(120),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_event_is_applied_seconds_after_its_predecessor_arrives() {
    let queue = Queue::new(QueueConfig {
        redelivery_delay: QUEUE_VISIBILITY,
        max_receive_count: 10,
        seed: 91,
        ..Default::default()
    });
    let sqs = queue.serve_sqs().await;
    let h = harness(91, &sqs).await;

    // OrderPaid first; its predecessor OrderPlaced 1.5 s later.
    let paid = queue.send(body("early-1", "e-2", 2, "OrderPaid", 100), None);
    let late = {
        let q = queue.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            q.send(body("early-1", "e-1", 1, "OrderPlaced", 100), None)
        })
    };
    let drained = drain(&queue, &h.envs, opts()).await;
    let placed = late.await.unwrap();
    if let Err(e) = drained {
        h.stop().await;
        panic!("the early event never came back before the queue's 600 s timeout: {e}");
    }
    assert_eq!(
        h.db.item("early-1").await.map(|i| i.status).as_deref(),
        Some("PAID")
    );

    let deleted = queue.deleted();
    let find = |id: &str| {
        deleted
            .iter()
            .find(|m| m.message_id == id)
            .cloned()
            .unwrap()
    };
    let (paid, placed) = (find(&paid), find(&placed));
    // Every delay the function asked for is within the Early curve of its
    // receive: between half the ceiling and the ceiling, 1, 2, 4, ... s.
    let policy = BackoffPolicy::default();
    assert!(
        !paid.visibility_requests.is_empty(),
        "the Early event was never delayed"
    );
    for (n, secs) in paid.visibility_requests.iter().enumerate() {
        let ceiling = policy.ceiling_secs(RetryClass::Predecessor, n as u32 + 1);
        assert!(
            (ceiling / 2..=ceiling).contains(secs),
            "receive {}: {secs} s outside {}..={ceiling} s",
            ceiling / 2,
            n + 1
        );
    }
    assert!(placed.visibility_requests.is_empty());
    let latency = paid.deleted_ms.unwrap() - placed.deleted_ms.unwrap();
    println!(
        "[backoff] early event applied {latency} ms after its predecessor, after {} receives \
         (delays asked: {:?} s; the queue's visibility timeout: {} s)",
        paid.receive_count,
        paid.visibility_requests,
        QUEUE_VISIBILITY.as_secs()
    );
    h.finish("backoff-early").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_reaches_the_dlq_without_waiting() {
    let queue = Queue::new(QueueConfig {
        redelivery_delay: QUEUE_VISIBILITY,
        max_receive_count: 5,
        seed: 92,
        ..Default::default()
    });
    let sqs = queue.serve_sqs().await;
    let h = harness(92, &sqs).await;

    let poison = queue.send("{not json", None);
    let fine = queue.send(body("poison-1", "p-1", 1, "OrderPlaced", 100), None);
    let started = std::time::Instant::now();
    if let Err(e) = drain(&queue, &h.envs, opts()).await {
        h.stop().await;
        panic!("the poison message did not reach the DLQ before the queue's 600 s timeout: {e}");
    }
    let took = started.elapsed();
    let dlq = queue.dlq();
    assert_eq!(dlq.len(), 1, "{dlq:?}");
    assert_eq!(dlq[0].message_id, poison);
    assert_eq!(dlq[0].receive_count, 5);
    assert_eq!(
        dlq[0].visibility_requests, [0; 5],
        "an Invalid message has no reason to wait"
    );
    assert!(queue.deleted().iter().any(|m| m.message_id == fine));
    println!(
        "[backoff] poison message in the DLQ after {} receives in {} ms (maxReceiveCount 5; \
         with the queue's timeout alone: {} s)",
        dlq[0].receive_count,
        took.as_millis(),
        4 * QUEUE_VISIBILITY.as_secs()
    );
    h.finish("backoff-poison").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_visibility_call_loses_nothing() {
    for (i, mode) in [Mode::Fail(500), Mode::RefuseEntries, Mode::Hang]
        .into_iter()
        .enumerate()
    {
        let seed = 93 + i as u64;
        // The queue's own (scaled-down) timeout brings messages back.
        let queue = Queue::new(QueueConfig {
            seed,
            ..Default::default()
        });
        let sqs = queue.serve_sqs().await;
        sqs.set_mode(mode);
        let h = harness(seed, &sqs).await;
        let mut rng = Rng::new(seed);
        let w = Workload::random(&format!("vis-{i}"), 6, Lifecycle::ALL, &mut rng);
        w.send_all(&queue, 0.2, &mut rng);
        let (audit, acked_uncommitted) = ack_audit(&h.db);
        let drained = drain(
            &queue,
            &h.envs,
            DrainOpts {
                audit: Some(audit),
                ..opts()
            },
        )
        .await;
        if let Err(e) = drained {
            h.stop().await;
            panic!("{mode:?}: not drained: {e}");
        }
        assert_no_violations(
            &format!("{mode:?}: acknowledged before committed"),
            &acked_uncommitted,
        );
        w.assert_converged(&h.db).await;
        assert!(queue.dlq().is_empty(), "{mode:?}: {:?}", queue.dlq());
        let failed = queue
            .stats
            .record_failures
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            failed > 0,
            "{mode:?}: no record was ever returned, nothing was tested"
        );
        assert!(sqs.calls() > 0, "{mode:?}: the function never called SQS");
        assert!(
            sqs.changes().iter().all(|c| !c.applied),
            "{mode:?}: {:?}",
            sqs.changes()
        );
        println!(
            "[backoff] {mode:?}: {} SQS calls failed, {failed} returned records all came back",
            sqs.calls()
        );
        h.finish(&format!("backoff-{mode:?}")).await;
    }
}
