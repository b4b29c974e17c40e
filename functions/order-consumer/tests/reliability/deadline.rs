//! Property 5: Deadline. An invocation with a 1.5 s deadline against a slow DynamoDB
//! (latency injected by the proxy) must answer before the deadline, and
//! each record must be either done (committed) or in batchItemFailures.
//! Writes cut off at the deadline may still commit afterwards; their
//! redelivery must then be a Duplicate, never a second application.
//!
//! The only timing assertion in the suite is this contract: the answer's
//! arrival at the Runtime API is compared with `Lambda-Runtime-Deadline-Ms`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::function::{Function, InvokeResult};
use crate::harness::Harness;
use crate::model::{Lifecycle, Order, Workload};
use crate::sqs::{Batch, DrainOpts, Queue, QueueConfig, drain};
use order_consumer::testing::proxy::Fault;

const DEADLINE: Duration = Duration::from_millis(1500);

fn failures(body: &[u8]) -> HashSet<String> {
    let v: Value = serde_json::from_slice(body).expect("response JSON");
    v["batchItemFailures"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["itemIdentifier"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn orders(prefix: &str, n: usize) -> Workload {
    Workload {
        orders: (0..n)
            .map(|i| Order::new(format!("{prefix}-{i}"), Lifecycle::Placed, 1))
            .collect(),
    }
}

/// One invocation of `batch` with the 1.5 s deadline. Returns the failed
/// messageIds (all of them for an invocation error) after checking the
/// deadline contract and that every acknowledged record is committed.
async fn invoke_and_check(
    h: &Harness,
    queue: &Queue,
    batch: &Batch,
    w: &Workload,
) -> HashSet<String> {
    let env = &h.envs[0];
    let result = env.invoke(batch.payload.clone(), DEADLINE).await;
    let (at_ms, deadline_ms) = match &result {
        InvokeResult::Response {
            at_ms, deadline_ms, ..
        }
        | InvokeResult::Error {
            at_ms, deadline_ms, ..
        } => (*at_ms, *deadline_ms),
        other => panic!("the function did not answer before its deadline: {other:?}"),
    };
    assert!(
        at_ms < deadline_ms,
        "answered {} ms after the deadline",
        at_ms - deadline_ms
    );
    println!(
        "answered {} ms before the deadline ({})",
        deadline_ms - at_ms,
        result.label()
    );
    let failed = match &result {
        InvokeResult::Response { body, .. } => failures(body),
        _ => batch.message_ids.iter().cloned().collect(),
    };
    // Each record: done, or reported.
    for (id, body) in batch.message_ids.iter().zip(&batch.bodies) {
        if failed.contains(id) {
            continue;
        }
        let ev = w.events().find(|e| &e.body == body).unwrap();
        let item = h.db.item(&ev.order_id).await;
        assert!(
            item.is_some_and(|i| i.history.contains(&ev.event_id)),
            "{id} was acknowledged but {} is not committed",
            ev.event_id
        );
    }
    queue.complete(batch, &result);
    failed
}

async fn converge_after(h: &Harness, queue: &Arc<Queue>, w: &Workload) {
    drain(&queue.clone(), &h.envs, DrainOpts::default())
        .await
        .unwrap();
    w.assert_converged(&h.db).await;
    assert!(queue.dlq().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_dynamodb_never_makes_the_function_miss_its_deadline() {
    let h = Harness::start(crate::binary_path(), 1, 5, |c| {
        c.env("DEADLINE_MARGIN_MS", "500")
            .env("MAX_CONCURRENCY", "4")
    })
    .await;
    // 500 ms per write: 4 at a time, cut off 1 s in. The first wave
    // finishes, later ones are cut off in flight or never started.
    h.proxy.set(
        Fault::Latency {
            before_ms: (250, 250),
            after_ms: (250, 250),
        },
        1.0,
    );
    let w = orders("dl", 10);
    let queue = Queue::new(QueueConfig::default());
    for e in w.events() {
        queue.send(e.body.clone(), None);
    }
    let batch = queue.receive(10).unwrap();
    let failed = invoke_and_check(&h, &queue, &batch, &w).await;
    println!("{} of 10 records in batchItemFailures", failed.len());
    assert!(
        !failed.is_empty(),
        "10 writes of 500 ms, 4 at a time, cannot all fit in 1 s"
    );

    // Let the cut-off writes land (they may commit after the answer), then
    // redeliver: each commits once.
    tokio::time::sleep(Duration::from_millis(800)).await;
    h.proxy.heal();
    converge_after(&h, &queue, &w).await;
    h.finish("deadline").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_shorter_than_the_margin_attempts_nothing_and_answers_in_time() {
    // The default 2 s margin is longer than the whole 1.5 s invocation.
    let h = Harness::start(crate::binary_path(), 1, 6, |c| c).await;
    let w = orders("dm", 5);
    let queue = Queue::new(QueueConfig::default());
    for e in w.events() {
        queue.send(e.body.clone(), None);
    }
    let batch = queue.receive(10).unwrap();
    let failed = invoke_and_check(&h, &queue, &batch, &w).await;
    assert_eq!(failed.len(), 5, "nothing may be attempted");
    assert!(h.db.scan().await.is_empty(), "nothing may be written");
    converge_after(&h, &queue, &w).await;
    h.finish("deadline-margin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_dynamodb_fails_the_invocation_in_time_and_late_writes_do_not_double_apply() {
    let h = Harness::start(crate::binary_path(), 1, 7, |c| {
        c.env("DEADLINE_MARGIN_MS", "500")
    })
    .await;
    // Requests reach DynamoDB only 3 s after they were sent: long after the
    // invocation has answered.
    h.proxy.set(
        Fault::Latency {
            before_ms: (3000, 3000),
            after_ms: (0, 0),
        },
        1.0,
    );
    let w = orders("dh", 4);
    let queue = Queue::new(QueueConfig::default());
    for e in w.events() {
        queue.send(e.body.clone(), None);
    }
    let batch = queue.receive(10).unwrap();
    let failed = invoke_and_check(&h, &queue, &batch, &w).await;
    assert_eq!(failed.len(), 4);
    // Redeliver while the first attempts are still on their way.
    h.proxy.heal();
    drain(&queue, &h.envs, DrainOpts::default()).await.unwrap();
    // Now the late writes arrive (the proxy forwards each one when its
    // delay is over); their conditions must refuse them.
    for _ in 0..100 {
        if h.proxy.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        h.proxy.in_flight(),
        0,
        "late writes still held by the proxy"
    );
    // 4 late writes + 4 redelivered ones, at least.
    assert!(
        h.proxy.forwarded() >= 8,
        "the late writes never reached DynamoDB ({} forwarded)",
        h.proxy.forwarded()
    );
    w.assert_converged(&h.db).await;
    h.finish("deadline-hung").await;
}
