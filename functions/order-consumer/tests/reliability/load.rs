//! Property 7: sustained load. RELIABILITY_LOAD_MESSAGES messages (default
//! 15,000; the issue's figure is 100,000), 20% of them duplicates (half
//! redelivered with the same messageId, half re-published with a new one),
//! through the ESM with four concurrent function processes talking to
//! dynoxide directly (no proxy: it would only cost time). Orders are
//! produced in their own order, interleaved; the queue hands out its 40
//! oldest messages in random order, so events of one order often arrive
//! out of order or in concurrent batches (Early, redelivered). Zero lost,
//! zero double-applied, final states exact. The function's peak RSS
//! (VmHWM) is printed, not asserted.
//!
//! ```sh
//! RELIABILITY_LOAD_MESSAGES=100000 cargo nextest run --test reliability load --no-capture
//! ```

use std::time::{Duration, Instant};

use crate::harness::Harness;
use crate::model::{Lifecycle, Order, Workload};
use crate::sqs::{DrainOpts, Pick, Queue, QueueConfig, drain};
use crate::util::env_usize;
use order_consumer::testing::rng::Rng;

const FUNCTIONS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sustained_load_loses_nothing_and_applies_nothing_twice() {
    let n = env_usize("RELIABILITY_LOAD_MESSAGES", 15_000).max(10);
    let h = Harness::start_with(crate::binary_path(), FUNCTIONS, 11, false, |c| c).await;
    let mut rng = Rng::new(11);

    // 80% distinct events (whole lifecycles of 4), 20% duplicates.
    let orders = (n * 4 / 5).div_ceil(4);
    let w = Workload {
        orders: (0..orders)
            .map(|i| Order::new(format!("load-{i}"), Lifecycle::Delivered, 1))
            .collect(),
    };
    let events: Vec<_> = w.events().collect();
    let dups = n.saturating_sub(events.len());

    // A timeline: each order's events in order, orders interleaved; each
    // duplicate shortly after its original.
    let span = (n as u64) * 4;
    let mut timeline: Vec<(u64, bool, usize)> = Vec::with_capacity(n);
    let mut times = vec![0u64; events.len()];
    for o in 0..orders {
        let mut t = rng.range(0, span);
        for k in 0..4 {
            let idx = o * 4 + k;
            t += rng.range(1, 40);
            times[idx] = t;
            timeline.push((t, false, idx));
        }
    }
    for _ in 0..dups {
        let idx = rng.below(events.len());
        timeline.push((times[idx] + rng.range(0, 400), true, idx));
    }
    timeline.sort();

    let queue = Queue::new(QueueConfig {
        max_receive_count: 50,
        redelivery_delay: Duration::from_millis(20),
        pick: Pick::Window(40),
        seed: 11,
    });
    let mut message_ids: Vec<Option<String>> = vec![None; events.len()];
    let (mut same_id, mut new_id) = (0, 0);
    for (_, dup, idx) in timeline {
        let body = events[idx].body.clone();
        if dup && rng.chance(0.5) {
            same_id += 1;
            queue.send(body, message_ids[idx].clone());
        } else {
            if dup {
                new_id += 1;
            }
            let id = queue.send(body, None);
            message_ids[idx].get_or_insert(id);
        }
    }
    println!(
        "{n} messages: {} distinct events of {orders} orders, {same_id} redelivered (same messageId), {new_id} re-published (new messageId); {FUNCTIONS} function processes",
        events.len()
    );

    let started = Instant::now();
    drain(
        &queue,
        &h.envs,
        DrainOpts {
            batch_size: 10,
            max_invocations: (n as u64) * 20,
            max_wall: Duration::from_secs(300 + n as u64 / 20),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let took = started.elapsed();
    let rss = h.finish("load").await;

    println!(
        "drained in {took:.1?} ({:.0} messages/s); {}",
        n as f64 / took.as_secs_f64(),
        queue.stats.summary()
    );
    println!(
        "PEAK RSS of the function under load: max {:.1} MiB over {FUNCTIONS} processes",
        *rss.iter().max().unwrap() as f64 / 1024.0
    );
    assert!(
        queue.dlq().is_empty(),
        "{} messages in the DLQ",
        queue.dlq().len()
    );
    assert_eq!(
        queue.deleted().len(),
        n,
        "every message acknowledged exactly once"
    );
    w.assert_converged(&h.db).await;
}
