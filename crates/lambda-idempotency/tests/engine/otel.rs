//! The feature `otel` (built only with it: `make test-otel`): a real
//! invocation of the order consumer against the local DynamoDB, with the
//! functions' own subscriber (`bootstrap::subscriber`) exporting to a fake
//! OTLP/HTTP collector on 127.0.0.1. What the collector receives once the
//! handler has answered is what Lambda would have exported: the flush is
//! per invocation, so nothing here waits for the batch processor's timer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_idempotency::bootstrap;
use orders::testing::http1::{self, Reader};
use orders::testing::*;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// Lambda's X-Ray header for the invocation (`Tracing: Active`, sampled).
const XRAY: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
/// Its Root as an OpenTelemetry trace id: the `1-` version dropped, the
/// two parts joined.
const TRACE_ID: &str = "5759e988bd862e3fe1be46a994272793";
const PARENT: &str = "53995c3f42cd8ad8";

/// How the fake collector answers.
#[derive(Clone, Copy, PartialEq)]
enum Collector {
    /// 200 with an empty ExportTraceServiceResponse.
    Answers,
    /// Reads the request and never answers (a hung collector).
    Hangs,
}

/// A fake OTLP/HTTP collector: the JSON bodies POSTed to it, and its base
/// URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
async fn collector(mode: Collector) -> (Arc<Mutex<Vec<Value>>>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let received = bodies.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                let mut conn = Reader::new(socket);
                while let Ok(Some(request)) = conn.read_message().await {
                    assert_eq!(
                        request.request_line(),
                        ("POST", "/v1/traces"),
                        "OTLP/HTTP traces path"
                    );
                    assert_eq!(request.header("content-type"), Some("application/json"));
                    let body: Value =
                        serde_json::from_slice(&request.body).expect("an OTLP JSON body");
                    received.lock().expect("bodies").push(body);
                    if mode == Collector::Hangs {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return;
                    }
                    let answer = http1::response(
                        200,
                        "OK",
                        &[("Content-Type", "application/json".to_owned())],
                        b"{}",
                    );
                    if http1::write_all(conn.get_mut(), &answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (bodies, url)
}

/// The functions' subscriber (JSON logs at INFO, as in production) with
/// traces to `endpoint` when given, installed on this thread.
fn install(
    logs: &lambda_idempotency_harness::captured::Captured,
    endpoint: Option<&str>,
) -> tracing::subscriber::DefaultGuard {
    let mut env = vec![
        ("POWERTOOLS_SERVICE_NAME", "orders-otel".to_owned()),
        ("AWS_LAMBDA_FUNCTION_NAME", "order-consumer-fn".to_owned()),
    ];
    if let Some(url) = endpoint {
        env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", url.to_owned()));
    }
    let get = move |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
    let writer = logs.clone();
    let (subscriber, traces) = bootstrap::subscriber(
        move || writer.clone(),
        EnvFilter::new("info,dynoxide=off"),
        &get,
    );
    traces.expect("the exporter builds");
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}

/// One invocation of the order consumer with Lambda's X-Ray header, one
/// OrderPlaced record for `order`.
async fn invoke(db: &TestDb, order: &str) {
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = lambda_idempotency::time::epoch_ms() + 30_000;
    ctx.request_id = "req-otel-1".into();
    ctx.invoked_function_arn =
        "arn:aws:lambda:us-east-1:111122223333:function:order-consumer".into();
    ctx.xray_trace_id = Some(XRAY.to_owned());
    let event = batch_of(&[body(order, 1, "OrderPlaced", "ev-otel-1")]);
    db.consumer()
        .handle(lambda_runtime::LambdaEvent::new(event, ctx))
        .await
        .expect("an answer");
}

/// Every span of every body, flattened, with its resource's attributes.
fn spans(bodies: &[Value]) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for body in bodies {
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for span in ss["spans"].as_array().into_iter().flatten() {
                    out.push((span.clone(), rs["resource"].clone()));
                }
            }
        }
    }
    out
}

fn attribute<'a>(attributes: &'a Value, key: &str) -> Option<&'a Value> {
    attributes
        .as_array()?
        .iter()
        .find(|a| a["key"] == json!(key))
        .map(|a| &a["value"])
}

fn id(span: &Value, field: &str) -> String {
    span[field]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

#[tokio::test]
async fn an_invocation_exports_its_spans_under_lambdas_xray_segment_before_it_answers() {
    let db = TestDb::new().await;
    let (bodies, url) = collector(Collector::Answers).await;
    let logs = lambda_idempotency_harness::captured::Captured::default();
    let _guard = install(&logs, Some(&url));

    invoke(&db, "ord-otel-1").await;

    // No waiting: the handler flushed before it answered.
    let bodies = bodies.lock().expect("bodies").clone();
    let spans = spans(&bodies);
    let names: Vec<&str> = spans
        .iter()
        .filter_map(|(s, _)| s["name"].as_str())
        .collect();
    let named = |name: &str| {
        spans
            .iter()
            .find(|(s, _)| s["name"] == json!(name))
            .unwrap_or_else(|| panic!("a {name} span among {names:?}"))
    };

    let (invocation, resource) = named("invocation");
    assert_eq!(id(invocation, "traceId"), TRACE_ID, "the X-Ray Root");
    assert_eq!(
        id(invocation, "parentSpanId"),
        PARENT,
        "the X-Ray Parent: the span joins Lambda's segment"
    );
    assert_eq!(
        attribute(&resource["attributes"], "service.name"),
        Some(&json!({"stringValue": "orders-otel"}))
    );
    assert_eq!(
        attribute(&invocation["attributes"], "function_request_id"),
        Some(&json!({"stringValue": "req-otel-1"}))
    );

    let (record, _) = named("record");
    assert_eq!(id(record, "traceId"), TRACE_ID);
    assert_eq!(
        id(record, "parentSpanId"),
        id(invocation, "spanId"),
        "the record's span is the invocation's child"
    );
    assert_eq!(
        attribute(&record["attributes"], "order_id"),
        Some(&json!({"stringValue": "ord-otel-1"}))
    );

    // The SDK's operation span, under the record's (through any span of
    // ours in between).
    let (update, _) = named("DynamoDB.UpdateItem");
    assert_eq!(id(update, "traceId"), TRACE_ID);
    let mut parent = id(update, "parentSpanId");
    let mut depth = 0;
    while parent != id(record, "spanId") {
        let (up, _) = spans
            .iter()
            .find(|(s, _)| id(s, "spanId") == parent)
            .unwrap_or_else(|| panic!("DynamoDB.UpdateItem is not under the record: {names:?}"));
        parent = id(up, "parentSpanId");
        depth += 1;
        assert!(depth < 10, "no cycle");
    }
    assert_eq!(
        attribute(&update["attributes"], "rpc.method"),
        Some(&json!({"stringValue": "UpdateItem"}))
    );
}

/// The log lines with traces on are those without: the traces' filter lets
/// the SDK's DEBUG spans through to OpenTelemetry only, never into a line.
#[tokio::test]
async fn the_log_lines_are_the_same_with_traces_on() {
    let mut texts = Vec::new();
    let (_bodies, url) = collector(Collector::Answers).await;
    for endpoint in [None, Some(url.as_str())] {
        let db = TestDb::new().await;
        let logs = lambda_idempotency_harness::captured::Captured::default();
        let guard = install(&logs, endpoint);
        invoke(&db, "ord-otel-logs").await;
        drop(guard);
        // The only values that differ from run to run: the time left.
        let masked: Vec<Value> = logs
            .text()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).expect("a JSON line");
                if let Some(o) = v.as_object_mut() {
                    for k in ["remaining_ms", "deadline_ms"] {
                        if o.contains_key(k) {
                            o.insert(k.into(), json!("masked"));
                        }
                    }
                }
                v
            })
            .collect();
        texts.push(masked);
    }
    assert!(!texts[0].is_empty());
    assert_eq!(texts[0], texts[1]);
}

/// A collector that never answers holds an invocation at most the flush's
/// bound (one second), and the batch's answer is the same.
#[tokio::test]
async fn a_hung_collector_delays_the_answer_by_at_most_the_flush_bound() {
    let db = TestDb::new().await;
    let (bodies, url) = collector(Collector::Hangs).await;
    let logs = lambda_idempotency_harness::captured::Captured::default();
    let _guard = install(&logs, Some(&url));

    let started = std::time::Instant::now();
    invoke(&db, "ord-otel-hung").await;
    let took = started.elapsed();

    assert!(
        took < Duration::from_millis(2_500),
        "the invocation took {took:?}"
    );
    assert!(
        !bodies.lock().expect("bodies").is_empty(),
        "the export was tried"
    );
    // The flush's own wait and the export request's timeout are both one
    // second: whichever ends first, the function says so and answers.
    let text = logs.text();
    assert!(
        text.contains("the span export did not finish in time")
            || text.contains("could not export this invocation's spans"),
        "{text}"
    );
    assert_eq!(db.status("ord-otel-hung").await.as_deref(), Some("PLACED"));
}
