//! Property 10: what the binary really writes. Two invocations of
//! one process, through the Runtime API emulator: every JSON line carries
//! the keys Powertools users search by, with the values of its invocation
//! (`cold_start` true on the first only, that invocation's request id, the
//! ARN and trace id the runtime passed); the EMF line carries the `service`
//! dimension and `ColdStart` 1, then 0.

use std::time::Duration;

use serde_json::{Value, json};

use crate::function::{Function, InvokeResult};
use crate::harness::Harness;
use crate::model::body;
use crate::sqs::{Queue, QueueConfig};
use order_consumer::testing::runtime_api::FUNCTION_ARN;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binarys_lines_carry_the_powertools_keys_and_cold_start() {
    let h = Harness::start(crate::binary_path(), 1, 101, |c| c).await;
    let queue = Queue::new(QueueConfig {
        seed: 101,
        ..Default::default()
    });
    for seq in 1..=2u64 {
        let kind = ["OrderPlaced", "OrderPaid"][seq as usize - 1];
        queue.send(body("logs-1", &format!("l-{seq}"), seq, kind, 100), None);
        let batch = queue.receive(10).expect("a batch");
        let r = h.envs[0]
            .invoke(batch.payload.clone(), Duration::from_secs(10))
            .await;
        assert!(matches!(r, InvokeResult::Response { .. }), "{r:?}");
        queue.complete(&batch, &r);
    }
    let lines = h.envs[0].logs.json_lines();
    let emf: Vec<&Value> = lines.iter().filter(|l| l.get("_aws").is_some()).collect();
    assert_eq!(emf.len(), 2, "one EMF line per invocation: {emf:?}");
    for (doc, cold) in emf.iter().zip([1, 0]) {
        assert_eq!(doc["ColdStart"], json!(cold), "{doc}");
        assert_eq!(doc["service"], json!("order-consumer"), "{doc}");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["FunctionName"], ["service"]])
        );
    }
    let records: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == json!("record processed"))
        .collect();
    assert_eq!(records.len(), 2, "{lines:?}");
    let ids: Vec<&Value> = records.iter().map(|l| &l["function_request_id"]).collect();
    assert_ne!(ids[0], ids[1], "each line names its own invocation");
    for (l, cold) in records.iter().zip([true, false]) {
        assert_eq!(l["cold_start"], json!(cold), "{l}");
        assert_eq!(l["level"], json!("INFO"), "{l}");
        assert_eq!(l["service"], json!("order-consumer"), "{l}");
        assert_eq!(
            l["function_name"],
            json!("order-consumer-reliability"),
            "{l}"
        );
        assert_eq!(l["function_memory_size"], json!(256), "{l}");
        assert_eq!(l["function_arn"], json!(FUNCTION_ARN), "{l}");
        assert!(
            l["xray_trace_id"]
                .as_str()
                .is_some_and(|t| t.starts_with("Root=1-")),
            "{l}"
        );
        assert!(
            l["message_id"].is_string() && l["order_id"] == json!("logs-1"),
            "{l}"
        );
        assert_eq!(l["outcome"], json!("Applied"), "{l}");
    }
    // Every line of an invocation (not only the record's) has its id.
    for l in lines
        .iter()
        .filter(|l| l.get("_aws").is_none() && l.get("message").is_some())
    {
        if l["message"] == json!("cold start") {
            continue; // before any invocation
        }
        assert!(l.get("function_request_id").is_some(), "{l}");
    }
    h.finish("logs").await;
}

/// A cold start that fails on its configuration reports why to the Runtime
/// API (`/runtime/init/error`) before it exits, so the invocation waiting
/// for it fails at once with the reason instead of waiting on a process
/// that is gone (what `cargo lambda watch` did); the reason names the
/// variable, never a value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_cold_start_reports_its_reason_to_the_runtime_api() {
    let h = Harness::start(crate::binary_path(), 1, 102, |c| {
        c.env("MAX_CONCURRENCY", "0")
    })
    .await;
    let queue = Queue::new(QueueConfig {
        seed: 102,
        ..Default::default()
    });
    queue.send(body("init-1", "i-1", 1, "OrderPlaced", 100), None);
    let batch = queue.receive(10).expect("a batch");
    let r = h.envs[0]
        .invoke(batch.payload.clone(), Duration::from_secs(10))
        .await;
    let InvokeResult::Crashed { detail } = &r else {
        panic!("a function without its configuration cannot answer: {r:?}");
    };
    assert!(
        detail.contains("init error: Some(") && detail.contains("MAX_CONCURRENCY"),
        "{detail}"
    );
    assert!(detail.contains("InvalidConfiguration"), "{detail}");
    h.stop().await;
}
