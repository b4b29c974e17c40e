//! Property 2: concurrency. Several function processes receive the very
//! same batch (or partially overlapping ones) at the very same time, round
//! after round (SQS's at-least-once delivery at its worst), with latency
//! on every DynamoDB request so that their writes are in flight together.
//! Each order must end correct with no transition applied twice.
//!
//! The same holds for one process serving eight invocations at once (Lambda
//! Managed Instances, `AWS_LAMBDA_MAX_CONCURRENCY=8`), whose invocations
//! share one warm dedupe cache: it never acknowledges an event that is not
//! committed, and the process reports its cold start once.
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
    let w = Workload::random(prefix, ORDERS, Lifecycle::ALL, &mut rng);
    let q = Queue::new(QueueConfig {
        seed: 42,
        ..Default::default()
    });
    w.send_all(&q, 0.3, &mut rng);
    (w, q)
}

/// How the copies run: `COPIES` processes (classic Lambda), or one process
/// serving that many invocations at once (Lambda Managed Instances).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    Processes,
    OneProcess(usize),
}

/// The real binary, its copies laid out as `layout`, each round's batch
/// delivered to all of them (`overlap` 1.0: identical batches; below:
/// random, partially overlapping subsets).
async fn real_function_under_overlap(overlap: f64, seed: u64, layout: Layout) {
    let h = match layout {
        Layout::Processes => Harness::start(crate::binary_path(), COPIES, seed, |c| c).await,
        Layout::OneProcess(n) => {
            Harness::start(crate::binary_path(), 1, seed, |c| c.managed(n)).await
        }
    };
    let copies = match layout {
        Layout::Processes => h.envs.clone(),
        Layout::OneProcess(n) => vec![h.envs[0].clone(); n],
    };
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
        &copies,
        BATCH,
        overlap,
        Duration::from_secs(30),
        500,
        Some(audit),
    )
    .await
    .unwrap();
    let max_in_flight = h.proxy.max_in_flight();
    let invocations_at_once = h.envs[0].peak_in_flight().await;
    let cold_starts: Vec<u32> = h.envs.iter().map(|e| e.logs.cold_starts()).collect();
    h.finish("concurrency").await;
    // One cold start per process, however many invocations it served at once.
    assert_eq!(
        cold_starts,
        vec![1; h.envs.len()],
        "ColdStart 1 per process"
    );
    if let Layout::OneProcess(n) = layout {
        assert!(
            invocations_at_once >= 2 && invocations_at_once <= n,
            "the process never served invocations at once (at most {invocations_at_once})"
        );
    }

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
        "real function, {layout:?}, overlap {overlap}: max DynamoDB requests in flight at once: {max_in_flight}; invocations of the first process at once: {invocations_at_once}; {}",
        queue.stats.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_copies_of_the_real_function_apply_each_transition_once() {
    real_function_under_overlap(1.0, 2, Layout::Processes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partially_overlapping_batches_apply_each_transition_once() {
    real_function_under_overlap(0.6, 13, Layout::Processes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serving_eight_invocations_at_once_applies_each_transition_once() {
    real_function_under_overlap(1.0, 21, Layout::OneProcess(8)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_with_partially_overlapping_invocations_applies_each_transition_once() {
    real_function_under_overlap(0.6, 22, Layout::OneProcess(8)).await;
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
