//! Property 4: Crash. While the ESM drains the queue through two environments, with
//! latency on every DynamoDB request (so batches are slow and writes are in
//! flight), the function process is SIGKILLed in the middle of batches,
//! again and again. Lambda then fails the whole batch and starts a new
//! process; redelivery must converge with nothing applied twice and
//! nothing acknowledged before it was committed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::function::{Function, InvokeResult};
use crate::harness::Harness;
use crate::model::{Lifecycle, Workload, ack_audit, assert_no_violations};
use crate::sqs::{DrainOpts, Queue, QueueConfig, drain};
use order_consumer::testing::proxy::Fault;
use order_consumer::testing::rng::Rng;

const KILLS: u64 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_batch_then_redelivery_converges_without_double_apply() {
    let h = Harness::start(crate::binary_path(), 2, 4, |c| c).await;
    h.proxy.set(
        Fault::Latency {
            before_ms: (20, 120),
            after_ms: (20, 120),
        },
        1.0,
    );
    let mut rng = Rng::new(4);
    let w = Workload::random("crash", 40, Lifecycle::ALL, &mut rng);
    let queue = Queue::new(QueueConfig {
        seed: 4,
        ..Default::default()
    });
    let sent = w.send_all(&queue, 0.2, &mut rng);
    let (audit, acked_uncommitted) = ack_audit(&h.db);

    let drainer = {
        let (queue, envs) = (queue.clone(), h.envs.clone());
        let opts = DrainOpts {
            batch_size: 10,
            max_wall: Duration::from_secs(120),
            audit: Some(audit),
            ..Default::default()
        };
        tokio::spawn(async move { drain(&queue, &envs, opts).await })
    };

    // Kill a busy process at random moments, until KILLS invocations have
    // died that way (bounded in time).
    let started = Instant::now();
    let mut kill_requests = 0;
    while queue.stats.crashes.load(Ordering::SeqCst) < KILLS
        && !drainer.is_finished()
        && started.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(rng.range(50, 300))).await;
        let env: &Arc<_> = &h.envs[rng.below(h.envs.len())];
        if env.kill_if_busy() {
            kill_requests += 1;
        }
    }
    h.proxy.heal();
    drainer.await.unwrap().unwrap();
    let crashes = queue.stats.crashes.load(Ordering::SeqCst);
    // Every environment answers once more: a killed one cold-starts a new
    // process, as Lambda does, so starts = first starts + one per kill.
    for env in &h.envs {
        let r = env
            .invoke(
                Arc::new(br#"{"Records":[]}"#.to_vec()),
                Duration::from_secs(10),
            )
            .await;
        assert!(
            matches!(r, InvokeResult::Response { .. }),
            "{}: {r:?}",
            env.name
        );
    }
    let starts: Vec<u32> = h.envs.iter().map(|e| e.starts()).collect();
    let kills: u64 = h.envs.iter().map(|e| e.kills() as u64).sum();
    h.finish("crash").await;

    println!(
        "{sent} messages; {kill_requests} kill requests, {crashes} invocations killed mid-batch; process starts {starts:?}; {}",
        queue.stats.summary()
    );
    assert!(
        kills >= 1,
        "no invocation was killed mid-batch: the test proved nothing"
    );
    assert_eq!(kills, crashes, "every failed invocation was one of ours");
    assert_eq!(
        starts.iter().sum::<u32>() as u64,
        2 + kills,
        "every killed process is replaced by exactly one new one: {starts:?}"
    );
    assert_no_violations("acknowledged-but-not-committed", &acked_uncommitted);
    w.assert_converged(&h.db).await;
    assert!(queue.dlq().is_empty(), "DLQ: {:?}", queue.dlq());
}
