//! Property 3: Faults between the function and DynamoDB, injected by the TCP proxy
//! while the ESM keeps invoking: resets (before forwarding, and after the
//! write committed, mid-response), HTTP 500 (before and after the commit),
//! ThrottlingException, ProvisionedThroughputExceededException, refused
//! connections and latency spikes beyond the SDK's attempt timeout.
//!
//! Throughout, every message the ESM deletes must have its effect committed
//! at that moment (ack-time audit). In the phases where no request can
//! reach DynamoDB the table must not change, so the only messages that may
//! be deleted are duplicates of events committed before (the dedupe cache
//! proves those without DynamoDB). After healing, redelivery must converge
//! to each event applied once.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::harness::Harness;
use crate::model::{Lifecycle, Workload, ack_audit, assert_no_violations};
use crate::sqs::{DrainOpts, Queue, QueueConfig, drain};
use order_consumer::testing::proxy::Fault;
use order_consumer::testing::rng::Rng;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_acknowledged_without_its_effect_and_redelivery_converges_after_faults() {
    let h = Harness::start(crate::binary_path(), 2, 3, |c| c).await;
    let mut rng = Rng::new(3);
    let queue = Queue::new(QueueConfig {
        max_receive_count: 200,
        seed: 3,
        ..Default::default()
    });
    let mut w = Workload::default();
    let mut sent = 0;
    let (audit, acked_uncommitted) = ack_audit(&h.db);
    let opts = |n: u64| DrainOpts {
        batch_size: 5,
        max_invocations: n,
        stop_at_bound: true,
        max_wall: Duration::from_secs(60),
        audit: Some(audit.clone()),
        ..Default::default()
    };

    // (fault, probability per request, invocations, can any write reach DynamoDB?)
    let phases = [
        (Fault::ResetMidResponse, 0.5, 12, true),
        (Fault::Throttle("ThrottlingException"), 1.0, 4, false),
        (
            Fault::Throttle("ProvisionedThroughputExceededException"),
            0.5,
            12,
            true,
        ),
        (
            Fault::Http500 {
                after_forward: true,
            },
            0.5,
            12,
            true,
        ),
        (
            Fault::Http500 {
                after_forward: false,
            },
            1.0,
            4,
            false,
        ),
        (Fault::Refuse, 1.0, 4, false),
        (Fault::ResetBeforeForward, 0.5, 12, true),
        (
            Fault::Latency {
                before_ms: (0, 200),
                after_ms: (1500, 2300),
            },
            0.25,
            8,
            true,
        ),
    ];
    let mut report = Vec::new();
    let mut deleted_while_unreachable = 0;
    for (phase, (fault, p, invocations, reachable)) in phases.into_iter().enumerate() {
        // Fresh work for every phase (what earlier phases left over stays
        // queued too).
        let fresh = Workload::random(&format!("flt{phase}"), 12, Lifecycle::ALL, &mut rng);
        sent += fresh.send_all(&queue, 0.2, &mut rng);
        w.orders.extend(fresh.orders);
        let table_before = h.db.scan().await;
        let before = (
            queue.stats.invocations.load(Ordering::SeqCst),
            queue.stats.errors.load(Ordering::SeqCst),
            queue.stats.deletions.load(Ordering::SeqCst),
        );
        h.proxy.set(fault, p);
        drain(&queue, &h.envs, opts(invocations)).await.unwrap();
        let after = (
            queue.stats.invocations.load(Ordering::SeqCst),
            queue.stats.errors.load(Ordering::SeqCst),
            queue.stats.deletions.load(Ordering::SeqCst),
        );
        let (inv, errs, dels) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
        report.push(format!(
            "{} p={p}: {inv} invocations, {errs} invocation errors, {dels} deletions",
            fault.label()
        ));
        if !reachable {
            // No request reached DynamoDB, so nothing was written...
            assert!(
                h.db.scan().await == table_before,
                "{}: the table changed although DynamoDB was unreachable",
                fault.label()
            );
            // ...and whatever was deleted anyway must be a duplicate of an
            // event committed before the phase (the warm container's dedupe
            // cache proves those without DynamoDB): the ack-time audit
            // checks exactly that. Every other record was reported, or its
            // invocation failed.
            deleted_while_unreachable += dels;
        }
    }
    h.proxy.heal();
    let injected = h.proxy.injected();
    drain(
        &queue,
        &h.envs,
        DrainOpts {
            batch_size: 5,
            max_wall: Duration::from_secs(90),
            audit: Some(audit.clone()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.finish("faults").await;

    println!(
        "{sent} messages; {} DynamoDB requests, {} reached DynamoDB; faults injected: {injected:?}\n  {}\n{}",
        h.proxy.requests(),
        h.proxy.forwarded(),
        report.join("\n  "),
        queue.stats.summary()
    );
    println!(
        "deleted while DynamoDB was unreachable (cache-proven duplicates): {deleted_while_unreachable}"
    );
    assert_no_violations("acknowledged-but-not-committed", &acked_uncommitted);
    w.assert_converged(&h.db).await;
    assert!(queue.dlq().is_empty(), "DLQ: {:?}", queue.dlq());
    // Every kind of fault was actually injected.
    for label in [
        "reset-mid-response",
        "throttle",
        "http500",
        "http500-after-commit",
        "refuse",
        "reset-before-forward",
        "latency",
    ] {
        assert!(
            injected.get(label).copied().unwrap_or(0) > 0,
            "{label} never injected: {injected:?}"
        );
    }
}
