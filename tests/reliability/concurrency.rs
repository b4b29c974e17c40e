//! Property 2: concurrency. Several function processes receive the very
//! same batch (or partially overlapping ones) at the very same time, round
//! after round (SQS's at-least-once delivery at its worst), with latency
//! on every DynamoDB request so that their writes are in flight together.
//! Each order must end correct with no transition applied twice.
//!
//! The same scenario and the same assertion run against a naive
//! check-then-act consumer (GetItem, check in code, unconditional
//! UpdateItem), which must be caught double-applying: that is how we know
//! the assertion can fail.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;

use crate::db::Db;
use crate::harness::{Harness, drain_overlapping};
use crate::model::{Lifecycle, Workload, ack_audit, assert_no_violations};
use crate::naive::NaiveFunction;
use crate::sqs::{Queue, QueueConfig};
use order_consumer::testing::proxy::Fault;
use order_consumer::testing::rng::Rng;

const COPIES: usize = 4;
const ORDERS: usize = 12;
const BATCH: usize = 6;

fn workload(prefix: &str) -> (Workload, Arc<Queue>) {
    let mut rng = Rng::new(42);
    let w = Workload::random(prefix, ORDERS, &Lifecycle::ALL, &mut rng);
    let q = Queue::new(QueueConfig {
        seed: 42,
        ..Default::default()
    });
    w.send_all(&q, 0.3, &mut rng);
    (w, q)
}

/// The real binary, `COPIES` processes, each round's batch delivered to
/// all of them (`overlap` 1.0: identical batches; below: random, partially
/// overlapping subsets).
async fn real_function_under_overlap(overlap: f64, seed: u64) {
    let h = Harness::start(COPIES, seed, |c| c).await;
    // Every request waits before reaching DynamoDB and before answering, so
    // the copies' conditional writes overlap.
    h.proxy.set(
        Fault::Latency {
            before_ms: (5, 40),
            after_ms: (5, 40),
        },
        1.0,
    );
    let (w, queue) = workload("conc");
    let (audit, acked_uncommitted) = ack_audit(&h.db);
    drain_overlapping(
        &queue,
        &h.envs,
        BATCH,
        overlap,
        Duration::from_secs(30),
        500,
        Some(audit),
    )
    .await
    .unwrap();
    let max_in_flight = h.proxy.max_in_flight();
    h.finish("concurrency").await;

    // The assertion the naive consumer fails (below).
    let violations = w.violations(&h.db.scan().await);
    assert!(
        violations.is_empty(),
        "real function:\n  {}",
        violations.join("\n  ")
    );
    assert_no_violations("acknowledged-but-not-committed", &acked_uncommitted);
    assert!(queue.dlq().is_empty());
    // The scenario really was concurrent.
    assert!(
        max_in_flight >= 2,
        "writes never overlapped (max in flight {max_in_flight})"
    );
    println!(
        "real function, overlap {overlap}: max DynamoDB requests in flight at once: {max_in_flight}; {}",
        queue.stats.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_copies_of_the_real_function_apply_each_transition_once() {
    real_function_under_overlap(1.0, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partially_overlapping_batches_apply_each_transition_once() {
    real_function_under_overlap(0.6, 13).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_assertion_catches_a_naive_check_then_act_consumer() {
    let db = Db::start().await;
    let barrier = Arc::new(Barrier::new(COPIES));
    let naive: Vec<Arc<NaiveFunction>> = (0..COPIES)
        .map(|_| {
            Arc::new(NaiveFunction {
                client: db.client.clone(),
                table: db.table.clone(),
                barrier: Some(barrier.clone()),
            })
        })
        .collect();
    let (w, queue) = workload("conc");
    drain_overlapping(
        &queue,
        &naive,
        BATCH,
        1.0,
        Duration::from_secs(30),
        500,
        None,
    )
    .await
    .unwrap();

    let violations = w.violations(&db.scan().await);
    let doubles: Vec<&String> = violations
        .iter()
        .filter(|v| v.contains("applied") && v.contains("times"))
        .collect();
    assert!(
        !doubles.is_empty(),
        "the naive consumer was expected to double-apply under the same concurrency, but the assertion found nothing: {violations:?}"
    );
    println!(
        "naive consumer: {} violation(s), e.g. {}",
        violations.len(),
        doubles[0]
    );
}
