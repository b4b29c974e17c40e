//! `make bench`, the order API: requests per second, DynamoDB requests per
//! call and latency, in process against a local DynamoDB (dynoxide).
//! Prints a markdown table (also written to target/bench-report-order-api.md), run by
//! `make bench` after the root's benchmark. A benchmark, not a test: it
//! asserts only that the work it timed was the work intended.

use orders::testing::*;
use std::time::Instant;

use common::*;
use lambda_idempotency_harness::bench as common;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut r = Report(String::new());
    r.line(format!("\nMachine: {}.", machine_description()));
    rt.block_on(figures(&mut r));
    r.write("bench-report-order-api.md");
}

/// Requests of one kind sent to the order API `concurrency` at a time: the
/// rate, each request's latency, and DynamoDB requests per call.
struct ApiRun {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    dynamodb_per_call: f64,
}

async fn api_run(
    api: &order_api::OrderApi,
    counter: &RequestCounter,
    requests: Vec<lambda_http::Request>,
    concurrency: usize,
    want: u16,
) -> ApiRun {
    use futures_util::StreamExt;
    let n = requests.len();
    let before = counter.get();
    let started = Instant::now();
    let mut latencies: Vec<f64> = futures_util::stream::iter(requests)
        .map(|req| async move {
            let t = Instant::now();
            let response = api.handle(req, order_api::testing::deadline_in(30)).await;
            assert_eq!(
                response.status().as_u16(),
                want,
                "{}",
                order_api::testing::text(&response)
            );
            t.elapsed().as_secs_f64() * 1e3
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| latencies[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    ApiRun {
        per_second: n as f64 / secs,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        dynamodb_per_call: (counter.get() - before) as f64 / n as f64,
    }
}

async fn figures(r: &mut Report) {
    const N: usize = 2_000;
    const CONCURRENCY: usize = 16;
    r.line(format!(
        "\n### The order API: `POST /orders` in process ({N} requests, {CONCURRENCY} at a time)\n"
    ));
    r.line("| request | requests / s | p50 | p99 | DynamoDB requests / call |");
    r.line("|---|---:|---:|---:|---:|");
    let db = order_api::testing::ApiDb::new().await;
    let (order_api, counter) = db.counted_api(&[]);
    // An IAM caller, as the template's routes (API_AUTH unset: iam) see one.
    let caller = order_api::testing::ALICE;
    let body = |i: usize| order_api::testing::order_body(&format!("cust-{i}"), 100 + i as u64);
    // Each request's key is its index; the 422 row sends the next index's
    // body under it.
    let kinds = [
        ("first time (201)", 201, 0),
        ("replay (201, same key and body)", 201, 0),
        ("same key, other body (422)", 422, 1),
    ];
    let mut rates = Vec::new();
    for (name, want, other) in kinds {
        let requests = (0..N)
            .map(|i| {
                order_api::testing::post(Some(&format!("bench-{i}")), &body(i + other), &caller)
            })
            .collect();
        let run = api_run(&order_api, &counter, requests, CONCURRENCY, want).await;
        rates.push(run.per_second);
        r.line(format!(
            "| {name} | {:.0} | {:.2} ms | {:.2} ms | {:.2} |",
            run.per_second, run.p50_ms, run.p99_ms, run.dynamodb_per_call
        ));
    }
    assert_eq!(
        db.orders().await.len(),
        N,
        "one order per key, whatever was sent"
    );
    r.line(format!(
        "\nSame run: a replay is {:.1}x and a 422 {:.1}x the rate of a first-time request (one refused PutItem brings the stored record back; a first time adds the TransactWriteItems).",
        rates[1] / rates[0],
        rates[2] / rates[0]
    ));
}
