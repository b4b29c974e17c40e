//! Property 1: Convergence. Random valid event streams for many orders (some
//! followed by events that can never apply: a replacement OrderPlaced, an
//! OrderPaid after the cancellation, up to three), random
//! duplicates (same and new messageId), shuffled, random batch sizes, 1 to 3
//! concurrent function processes, random lost responses (whole-batch
//! redeliveries), driven through the SQS simulator until the queue drains.
//! Then the table must hold each order's events applied once, in seq order,
//! the DLQ must be empty, and no message may have been deleted before its
//! effect was committed.
//!
//! `PROPTEST_CASES` (default 12) and `RELIABILITY_MAX_ORDERS` (default 8)
//! scale it; failing cases are kept in `convergence.proptest-regressions`
//! and replayed first on every run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use crate::function::LambdaEnv;
use crate::harness::{Harness, proptest_config, runtime};
use crate::model::{Lifecycle, Order, Workload, ack_audit};
use crate::sqs::{DrainOpts, Pick, Queue, QueueConfig, drain};
use crate::util::env_usize;
use order_consumer::testing::rng::Rng;

#[derive(Debug, Clone)]
pub struct Case {
    /// (lifecycle, the illegal events after its last one) per order.
    pub orders: Vec<(Lifecycle, Vec<&'static str>)>,
    pub dup_rate: f64,
    pub batch_size: usize,
    pub functions: usize,
    pub lose_response: f64,
    pub window: Option<usize>,
    pub seed: u64,
}

pub fn case_strategy(lifecycles: Vec<Lifecycle>, max_orders: usize) -> impl Strategy<Value = Case> {
    let order = proptest::sample::select(lifecycles).prop_flat_map(|lc| {
        let extras = prop_oneof![
            2 => Just(Vec::new()),
            1 => proptest::collection::vec(proptest::sample::select(lc.illegal_after()), 1..=3),
        ];
        (Just(lc), extras)
    });
    (
        proptest::collection::vec(order, 1..=max_orders),
        0.0f64..0.6,
        1usize..=10,
        1usize..=3,
        prop_oneof![Just(0.0f64), 0.0f64..0.25],
        proptest::option::of(1usize..20),
        any::<u64>(),
    )
        .prop_map(
            |(orders, dup_rate, batch_size, functions, lose_response, window, seed)| Case {
                orders,
                dup_rate,
                batch_size,
                functions,
                lose_response,
                window,
                seed,
            },
        )
}

static CASE_NO: AtomicU64 = AtomicU64::new(0);

/// Run one case against already running environments (`pollers`: the
/// event source mapping's concurrent pollers, each invoking its
/// environment; several may share one process on Lambda Managed
/// Instances); order ids are unique per case, so cases share the table
/// without interfering.
pub async fn run_case(
    h: &Harness,
    pollers: &[Arc<LambdaEnv>],
    case: &Case,
) -> Result<String, TestCaseError> {
    let prefix = format!("c{}", CASE_NO.fetch_add(1, Ordering::SeqCst));
    let workload = Workload {
        orders: case
            .orders
            .iter()
            .enumerate()
            .map(|(i, (lc, extras))| {
                Order::new(format!("{prefix}-{i}"), *lc, 1).with_extras(extras)
            })
            .collect(),
    };
    let queue = Queue::new(QueueConfig {
        // High enough that no valid event can legitimately run out of
        // receives: anything in the DLQ is a consumer failure.
        max_receive_count: 50,
        redelivery_delay: Duration::from_millis(5),
        pick: case.window.map_or(Pick::Random, Pick::Window),
        seed: case.seed,
    });
    let mut rng = Rng::new(case.seed);
    let sent = workload.send_all(&queue, case.dup_rate, &mut rng);
    let (audit, acked_uncommitted) = ack_audit(&h.db);
    // The case's 1..=3 pollers, scaled to the pollers there are (3
    // processes: the same; one process at concurrency 8: 2, 5 or 8 at once).
    let n = (case.functions * pollers.len())
        .div_ceil(3)
        .clamp(1, pollers.len());
    let functions = &pollers[..n];
    drain(
        &queue,
        functions,
        DrainOpts {
            batch_size: case.batch_size,
            timeout: Duration::from_secs(30),
            max_invocations: 5_000,
            max_wall: Duration::from_secs(90),
            lose_response: case.lose_response,
            audit: Some(audit),
            stop_at_bound: false,
        },
    )
    .await
    .map_err(TestCaseError::fail)?;

    let table = h.db.scan().await;
    let mut problems = workload.violations(&table);
    problems.extend(acked_uncommitted.lock().unwrap().iter().cloned());
    let dlq = queue.dlq();
    if !dlq.is_empty() {
        problems.push(format!(
            "{} message(s) in the DLQ: {:?}",
            dlq.len(),
            dlq.iter().map(|m| &m.body).collect::<Vec<_>>()
        ));
    }
    crate::util::no_problems(&problems, &queue.stats.summary())?;
    Ok(format!("{sent} messages; {}", queue.stats.summary()))
}

/// Drive proptest over `lifecycles` with `cases` cases by default, against
/// three processes, or with `managed: Some(n)` one process serving `n`
/// invocations at once (up to `n` pollers invoking it together).
pub fn check_convergence(
    source_file: &'static str,
    lifecycles: &[Lifecycle],
    cases: u32,
    managed: Option<usize>,
) {
    let rt = runtime();
    let (processes, seed) = if managed.is_some() { (1, 8) } else { (3, 7) };
    let h = rt.block_on(Harness::start(
        crate::binary_path(),
        processes,
        seed,
        |c| match managed {
            Some(n) => c.managed(n),
            None => c,
        },
    ));
    let pollers = match managed {
        None => h.envs.clone(),
        Some(n) => vec![h.envs[0].clone(); n],
    };
    let max_orders = env_usize("RELIABILITY_MAX_ORDERS", 8);
    let mut runner = TestRunner::new(proptest_config(source_file, cases));
    let result = runner.run(&case_strategy(lifecycles.to_vec(), max_orders), |case| {
        let summary = rt.block_on(run_case(&h, &pollers, &case))?;
        println!(
            "case ok: {} orders, batch {}, {} fn(s): {summary}",
            case.orders.len(),
            case.batch_size,
            case.functions
        );
        Ok(())
    });
    if let Err(e) = result {
        rt.block_on(h.stop());
        panic!("{e}");
    }
    let at_once = rt.block_on(h.envs[0].peak_in_flight());
    rt.block_on(h.finish("convergence"));
    if managed.is_some() {
        assert!(at_once >= 2, "the process never served invocations at once");
    }
}

#[test]
fn every_order_converges_to_its_events_applied_once_in_seq_order() {
    check_convergence(file!(), Lifecycle::ALL, 12, None);
}

/// The same property when one process serves several invocations at once
/// (Lambda Managed Instances, `AWS_LAMBDA_MAX_CONCURRENCY=8`).
#[test]
fn every_order_converges_with_one_process_serving_invocations_at_once() {
    check_convergence(file!(), Lifecycle::ALL, 12, Some(8));
}

/// Sequence numbers are u64: beyond 2^53 a float anywhere on the path
/// (JSON parsing, the DynamoDB number, the snapshot read back) would make
/// neighbours equal and break the seq check. An order's first event is its
/// seq 1, so each order's item is seeded as if its OrderPlaced at the large
/// seq had been applied; the rest of its events are sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_numbers_beyond_2_pow_53_keep_their_order() {
    let h = Harness::start(crate::binary_path(), 2, 12, |c| c).await;
    let w = Workload {
        orders: [(1u64 << 53) - 1, 1 << 60, u64::MAX - 3]
            .into_iter()
            .enumerate()
            .map(|(i, start)| Order::new(format!("bigseq-{i}"), Lifecycle::Delivered, start))
            .collect(),
    };
    let queue = Queue::new(QueueConfig::default());
    let mut rng = Rng::new(12);
    let rest = Workload {
        orders: w
            .orders
            .iter()
            .map(|o| Order {
                events: o.events[1..].to_vec(),
                ..o.clone()
            })
            .collect(),
    };
    for o in &w.orders {
        let placed = &o.events[0];
        h.db.seed_placed(&o.order_id, &placed.event_id, placed.seq)
            .await;
    }
    rest.send_all(&queue, 0.5, &mut rng);
    let (audit, acked_uncommitted) = ack_audit(&h.db);
    drain(
        &queue,
        &h.envs,
        DrainOpts {
            batch_size: 2,
            audit: Some(audit),
            max_wall: Duration::from_secs(60),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.finish("bigseq").await;
    crate::model::assert_no_violations("acknowledged-but-not-committed", &acked_uncommitted);
    w.assert_converged(&h.db).await;
    assert!(
        queue.dlq().is_empty(),
        "DLQ: {:?}",
        queue.dlq().iter().map(|m| &m.body).collect::<Vec<_>>()
    );
}

/// BUG-1, found by the convergence property when this lifecycle was allowed:
/// Placed(1) → Paid(2) → Cancelled(3), with Cancelled(3) delivered while
/// Paid(2) is still being retried. The order is PLACED, which may be
/// cancelled, so a `last_event_seq < :seq` guard applied the cancellation;
/// Paid(2) then counted as Stale and was acknowledged: a paid order whose
/// payment was never recorded. With contiguous seqs the cancellation is
/// Early until the payment has applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_delivered_before_the_payment_waits_for_it() {
    let h = Harness::start(crate::binary_path(), 1, 1, |c| c).await;
    let order = Order::new("bug1-0".into(), Lifecycle::CancelledAfterPayment, 1);
    let workload = Workload {
        orders: vec![order.clone()],
    };
    let queue = Queue::new(QueueConfig::default());
    let (audit, acked_uncommitted) = ack_audit(&h.db);
    let opts = DrainOpts {
        audit: Some(audit),
        max_wall: Duration::from_secs(30),
        ..Default::default()
    };
    // Placed(1) is applied. Then Cancelled(3) gets one invocation of its
    // own while Paid(2) is still with the producer (a retry, a slow
    // publisher); then Paid(2) is sent and the queue drains.
    queue.send(order.events[0].body.clone(), None);
    drain(&queue, &h.envs, opts.clone()).await.unwrap();
    queue.send(order.events[2].body.clone(), None);
    let one = DrainOpts {
        batch_size: 1,
        max_invocations: 1,
        stop_at_bound: true,
        ..opts.clone()
    };
    drain(&queue, &h.envs, one).await.unwrap();
    queue.send(order.events[1].body.clone(), None);
    drain(&queue, &h.envs, opts).await.unwrap();
    h.finish("bug1").await;
    crate::model::assert_no_violations("acknowledged-but-not-committed", &acked_uncommitted);
    workload.assert_converged(&h.db).await;
    assert!(queue.dlq().is_empty());
}

/// Issue 27, items 1 and 5 together: a finished order followed by more
/// illegal events than it keeps (`MAX_REJECTED_EVENTS`), shuffled, with
/// copies, through three processes. Each must wait for its turn and be
/// recorded there; the item keeps the latest rejections and counts them all,
/// and ends the same whatever the delivery order. No ack audit here: a late
/// copy of a rejection that has left the window is rightly Stale (its seq is
/// spent) but no longer listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_order_flooded_with_illegal_events_converges_and_stays_bounded() {
    use order_consumer::orders::domain::MAX_REJECTED_EVENTS;
    let h = Harness::start(crate::binary_path(), 3, 13, |c| c).await;
    let kinds = Lifecycle::CancelledUnpaid.illegal_after();
    let extras: Vec<&str> = (0..MAX_REJECTED_EVENTS + 8)
        .map(|i| kinds[i % kinds.len()])
        .collect();
    let w = Workload {
        orders: vec![
            Order::new("flood-0".into(), Lifecycle::CancelledUnpaid, 1).with_extras(&extras),
        ],
    };
    let queue = Queue::new(QueueConfig {
        max_receive_count: 500,
        redelivery_delay: Duration::from_millis(5),
        pick: Pick::Random,
        seed: 13,
    });
    let mut rng = Rng::new(13);
    w.send_all(&queue, 0.3, &mut rng);
    drain(
        &queue,
        &h.envs,
        DrainOpts {
            batch_size: 10,
            max_wall: Duration::from_secs(120),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.finish("flood").await;
    w.assert_converged(&h.db).await;
    assert!(queue.dlq().is_empty(), "DLQ: {}", queue.dlq().len());
    let item = h.db.raw("flood-0").await.expect("item");
    assert_eq!(
        item.get("rejected_count")
            .and_then(|v| v.as_n().ok())
            .map(String::as_str),
        Some(extras.len().to_string().as_str())
    );
}
