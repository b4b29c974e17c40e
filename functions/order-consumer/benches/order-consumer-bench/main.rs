//! `make bench`: throughput, DynamoDB requests per message, CPU per message
//! (the SDK's request path included), cold start, binary size and peak RSS,
//! and one process at Lambda Managed Instances concurrency against as many
//! processes, all in one run against a local DynamoDB-compatible server
//! (dynoxide, in-process); then every shipped function against two
//! do-nothing functions (the floor), the throughput under a fixed DynamoDB
//! latency, the order API against Powertools' `@idempotent`, and what a
//! million messages cost on Lambda and DynamoDB. Sections by
//! name: `cargo bench --bench bench -- cpu process` (throughput, requests,
//! cache, cpu, managed, process, floor, peer, latency, api-peer, cost).
//! Each function under functions/ has its own benchmark (its
//! benches/<name>-bench.rs), which `make bench` runs after this one.
//!
//! Prints markdown tables (also written to target/bench-report.md). Figures
//! that compare two variants are given as ratios measured in this same run.
//! This is a benchmark, not a test: it asserts only that the work it timed
//! was the work intended (every message applied), never a speed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_idempotency::RecordOutcome;
use lambda_idempotency::time::epoch_ms;
use order_consumer::orders::domain::{Outcome, classify_refusal};
use order_consumer::orders::event::parse_body;
use order_consumer::orders::store::{OrderStore, Write};
use order_consumer::testing::runtime_api::{self, Invocation, Reply, RuntimeApi};
use serde_json::Value;
use tokio::sync::oneshot;

use order_consumer::testing::*;

use common::*;
use lambda_idempotency_harness::bench as common;

// The sections that compare the shipped builds with a floor and a peer.
mod api_peer;
mod cost;
mod floor;
mod latency;

fn lifecycle_bodies(n: usize, prefix: &str) -> Vec<Value> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while out.len() < n {
        let o = format!("{prefix}-{i}");
        for (s, k, e) in lifecycle(&o) {
            if out.len() < n {
                out.push(body(&o, s, k, &e));
            }
        }
        i += 1;
    }
    out
}

/// Lambda's invocation payload limit, which bounds an SQS batch in bytes
/// (an event source mapping may be configured for 10,000 records, but it
/// delivers at most 6 MB of them). For bodies at SQS's 1 MiB maximum that is
/// five records; the reliability test
/// `hostile::the_largest_deliverable_batch_of_max_size_bodies_completes`
/// measures it through the binary.
const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;

/// The largest batch of [`lifecycle_bodies`] whose SQS event fits in
/// [`MAX_PAYLOAD_BYTES`]: the largest batch Lambda can deliver.
fn largest_deliverable_batch() -> usize {
    let fits = |n: usize| {
        serde_json::to_vec(&batch_of(&lifecycle_bodies(n, "big")))
            .map(|v| v.len() <= MAX_PAYLOAD_BYTES)
            .unwrap_or(false)
    };
    let (mut lo, mut hi) = (1usize, 10_000usize);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    lo
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut r = Report(String::new());
    let machine = machine_description();
    r.line("## PERFORMANCE figures (`make bench`)");
    r.line(format!("\nMachine: {machine}. Local DynamoDB: dynoxide (in-memory SQLite) in the same process as the handler, so its CPU cost is inside every figure below.\n"));

    // `cargo bench --bench bench -- api process`: only those sections
    // (cargo passes its own `--bench` flag, hence the filter on "-").
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |section: &str| only.is_empty() || only.iter().any(|s| s == section);
    if run("throughput") {
        rt.block_on(throughput(&mut r));
    }
    if run("requests") {
        rt.block_on(requests_per_message(&mut r));
    }
    if run("cache") {
        rt.block_on(cache_on_off(&mut r));
    }
    if run("cpu") {
        cpu_per_message(&mut r);
    }
    if run("managed") {
        rt.block_on(managed_figures(&mut r));
    }
    if run("process") {
        rt.block_on(process_figures(&mut r));
    }
    if run("floor") {
        rt.block_on(floor::figures(&mut r));
    }
    // Last: the sections that need more than cargo (the Powertools venv).
    let mut failed = None;
    if run("peer") {
        failed = rt.block_on(peer_figures(&mut r)).err();
    }
    if run("latency") && failed.is_none() {
        failed = rt.block_on(latency::figures(&mut r)).err();
    }
    if run("api-peer") && failed.is_none() {
        failed = rt.block_on(api_peer::figures(&mut r)).err();
    }
    if run("cost") && failed.is_none() {
        failed = rt.block_on(cost::figures(&mut r)).err();
    }

    r.write("bench-report.md");
    if let Some(why) = failed {
        eprintln!("\na Powertools section failed: {why}");
        std::process::exit(1);
    }
}

async fn throughput(r: &mut Report) {
    r.line("### Throughput: messages per second (first-time messages, median of 5 runs)\n");
    let concurrency = [1usize, 8, 32, 64];
    r.line(format!(
        "| batch size | {} | best / concurrency 1 |",
        concurrency
            .map(|c| format!("MAX_CONCURRENCY={c}"))
            .join(" | ")
    ));
    r.line(format!("|---:|{}---:|", "---:|".repeat(concurrency.len())));
    for n in [10usize, 100, 1_000, largest_deliverable_batch()] {
        let mut row = Vec::new();
        for c in concurrency {
            let mut rates = Vec::new();
            for _ in 0..RUNS {
                let db = TestDb::new().await;
                let consumer = consumer_with(db.store(), &[("MAX_CONCURRENCY", &c.to_string())]);
                let event = batch_of(&lifecycle_bodies(n, "o"));
                let t = Instant::now();
                let (report, _) = consumer.handle_batch(&event, far_deadline()).await;
                let secs = t.elapsed().as_secs_f64();
                assert!(
                    report.outcomes().all(|o| *o == Outcome::Applied),
                    "benchmark batch must apply fully"
                );
                rates.push(n as f64 / secs);
            }
            row.push(median(rates));
        }
        let best = row.iter().cloned().fold(0.0, f64::max);
        r.line(format!(
            "| {n} | {} | {:.2}x |",
            row.iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" | "),
            best / row[0]
        ));
    }
}

async fn requests_per_message(r: &mut Report) {
    r.line("\n### DynamoDB requests per message (counted per HTTP request the SDK sends)\n");
    r.line("| message | requests / message |");
    r.line("|---|---:|");
    let n = 1_000;
    let db = TestDb::new().await;
    let event = batch_of(&lifecycle_bodies(n, "r"));
    let (warm, warm_req) = db.counted_consumer(&[]);
    run(&warm, &event).await;
    let first = warm_req.get() as f64 / n as f64;
    r.line(format!("| first-time | {first:.2} |"));

    // A cold container gets one redelivered message per order.
    let (cold, cold_req) = db.counted_consumer(&[]);
    let singles: Vec<Value> = lifecycle_bodies(n, "r")
        .into_iter()
        .skip(3)
        .step_by(4)
        .collect();
    let singles_n = singles.len();
    run(&cold, &batch_of(&singles)).await;
    r.line(format!(
        "| duplicate, cold container, one message per order | {:.2} |",
        cold_req.get() as f64 / singles_n as f64
    ));
    // A cold container gets whole lifecycles redelivered: the first refusal
    // per order teaches the cache.
    let (cold2, cold2_req) = db.counted_consumer(&[]);
    run(&cold2, &event).await;
    r.line(format!(
        "| duplicate, cold container, whole lifecycles redelivered | {:.2} |",
        cold2_req.get() as f64 / n as f64
    ));
    let before = warm_req.get();
    run(&warm, &event).await;
    r.line(format!(
        "| duplicate, warm container (cached) | {:.2} |",
        (warm_req.get() - before) as f64 / n as f64
    ));
    r.line("\nPowertools for AWS Lambda (Python) idempotency spends three requests on a first-time message (conditional PutItem of the idempotency record, UpdateItem to complete it, then the business write), one after another; this consumer spends one. The `peer` section measures both.");
}

async fn cache_on_off(r: &mut Report) {
    r.line("\n### Redelivered batch in a warm container: cache on vs off (1,000 messages, MAX_CONCURRENCY=8, median of 5)\n");
    let mut on = Vec::new();
    let mut off = Vec::new();
    for _ in 0..RUNS {
        for (size, out) in [("10000", &mut on), ("0", &mut off)] {
            let db = TestDb::new().await;
            let c = consumer_with(db.store(), &[("DEDUPE_CACHE_SIZE", size)]);
            let event = batch_of(&lifecycle_bodies(1_000, "c"));
            run(&c, &event).await;
            let t = Instant::now();
            let (report, _) = c.handle_batch(&event, far_deadline()).await;
            out.push(1_000.0 / t.elapsed().as_secs_f64());
            assert!(report.outcomes().all(|o| matches!(
                o,
                RecordOutcome::Settled(Outcome::Duplicate | Outcome::Stale { .. })
            )));
        }
    }
    let (on, off) = (median(on), median(off));
    r.line("| cache | messages / s |");
    r.line("|---|---:|");
    r.line(format!("| on (DEDUPE_CACHE_SIZE=10000) | {on:.0} |"));
    r.line(format!("| off (DEDUPE_CACHE_SIZE=0) | {off:.0} |"));
    r.line(format!("\nRatio on/off: {:.1}x", on / off));
}

/// An HTTP client for the SDK that answers every request at once with what
/// DynamoDB answers a successful UpdateItem (200, `{}`), without a socket:
/// with it, `send()` runs the SDK's whole request path (serialisation,
/// endpoint resolution, SigV4 signing, the retry and timeout machinery,
/// response parsing) and nothing else.
#[derive(Debug, Clone)]
struct AnswersAtOnce(aws_smithy_runtime_api::client::http::SharedHttpConnector);

#[derive(Debug)]
struct EmptyOk;

impl aws_smithy_runtime_api::client::http::HttpConnector for EmptyOk {
    fn call(
        &self,
        _request: aws_smithy_runtime_api::client::orchestrator::HttpRequest,
    ) -> aws_smithy_runtime_api::client::http::HttpConnectorFuture {
        let mut response = aws_smithy_runtime_api::client::orchestrator::HttpResponse::new(
            200u16.try_into().expect("200"),
            "{}".into(),
        );
        let headers = response.headers_mut();
        headers.insert("content-type", "application/x-amz-json-1.0");
        headers.insert("content-length", "2");
        headers.insert(
            "x-amzn-requestid",
            "BENCH0000000000000000000000000000000000000000000000",
        );
        aws_smithy_runtime_api::client::http::HttpConnectorFuture::ready(Ok(response))
    }
}

impl aws_sdk_dynamodb::config::HttpClient for AnswersAtOnce {
    fn http_connector(
        &self,
        _settings: &aws_smithy_runtime_api::client::http::HttpConnectorSettings,
        _components: &aws_sdk_dynamodb::config::RuntimeComponents,
    ) -> aws_smithy_runtime_api::client::http::SharedHttpConnector {
        self.0.clone()
    }
}

/// The production client configuration (retries, timeouts, static
/// credentials) over [`AnswersAtOnce`].
fn client_answering_at_once() -> aws_sdk_dynamodb::Client {
    let base = client_for("http://127.0.0.1:9");
    let conf = base
        .config()
        .to_builder()
        .http_client(AnswersAtOnce(
            aws_smithy_runtime_api::client::http::SharedHttpConnector::new(EmptyOk),
        ))
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

fn ns_per(iterations: usize, t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64 / iterations as f64
}

fn cpu_per_message(r: &mut Report) {
    r.line("\n### CPU per message in the handler, without network or DynamoDB (one thread, median of 5 runs)\n");
    let bodies: Vec<String> = lifecycle_bodies(1_000, "cpu")
        .into_iter()
        .map(|b| b.to_string())
        .collect();
    // BENCH_CPU_DIVISOR divides the iteration counts, for a run under
    // `valgrind --tool=callgrind`, which is about fifty times slower and
    // counts instructions per function instead of timing
    // (docs/performance.md, "Where the SDK's time goes").
    let divisor = std::env::var("BENCH_CPU_DIVISOR").map_or(1, |v| {
        v.parse::<usize>()
            .ok()
            .filter(|d| *d >= 1)
            .expect("BENCH_CPU_DIVISOR is a whole number of at least 1")
    });
    let iterations = (200_000 / divisor).max(1);
    // The SDK's path costs tens of microseconds: fewer iterations suffice.
    let sdk_iterations = (20_000 / divisor).max(1);
    let store = OrderStore::new(client_for("http://127.0.0.1:9"), "orders");
    let answering = OrderStore::new(client_answering_at_once(), "orders");
    // One thread: every figure is one core's time per message.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let events: Vec<_> = bodies
        .iter()
        .map(|b| parse_body(Some(b)).expect("valid"))
        .collect();
    let snapshot = order_consumer::orders::domain::OrderSnapshot {
        status: order_consumer::orders::domain::Status::Delivered,
        last_event_seq: 4,
        last_event_id: "x".into(),
        event_hash: "y".into(),
        processed_hashes: (1..=4).map(|seq| format!("{seq}:y")).collect(),
        rejected_events: vec![],
    };
    let batch = batch_of(&lifecycle_bodies(1_000, "cpu"));

    let mut rows: Vec<Vec<f64>> = vec![Vec::new(); 7];
    for _ in 0..RUNS {
        let t = Instant::now();
        for i in 0..iterations {
            std::hint::black_box(parse_body(Some(&bodies[i % bodies.len()])).ok());
        }
        rows[0].push(ns_per(iterations, t));

        let t = Instant::now();
        for i in 0..iterations {
            std::hint::black_box(events[i % events.len()].content_hash());
        }
        rows[1].push(ns_per(iterations, t));

        let t = Instant::now();
        for i in 0..iterations {
            std::hint::black_box(store.update_request(&events[i % events.len()]));
        }
        rows[2].push(ns_per(iterations, t));

        // `send()` of requests built beforehand: the SDK's part alone.
        let built: Vec<_> = (0..sdk_iterations)
            .map(|i| answering.update_request(&events[i % events.len()]))
            .collect();
        let t = Instant::now();
        rt.block_on(async {
            for request in built {
                std::hint::black_box(request.send().await.expect("the instant answer"));
            }
        });
        rows[3].push(ns_per(sdk_iterations, t));

        // What the handler calls: build, send, classify the answer.
        let t = Instant::now();
        rt.block_on(async {
            for i in 0..sdk_iterations {
                let w = answering.apply(&events[i % events.len()]).await;
                assert!(
                    matches!(w, Ok(Write::Applied)),
                    "the instant answer applies"
                );
            }
        });
        rows[4].push(ns_per(sdk_iterations, t));

        // The whole handler on a batch of 1,000: parse, group, schedule,
        // cache, the store's round trip, the report; all of it but the
        // network and DynamoDB (and the log output: the bench installs no
        // tracing subscriber, so spans and events cost only their check).
        let consumer = consumer_with(answering.clone(), &[]);
        let t = Instant::now();
        let (report, _) = rt.block_on(consumer.handle_batch(&batch, far_deadline()));
        rows[5].push(ns_per(batch.records.len(), t));
        assert!(
            report.outcomes().all(|o| *o == Outcome::Applied),
            "the instant answer applies every message"
        );

        let t = Instant::now();
        for i in 0..iterations {
            let _ =
                std::hint::black_box(classify_refusal(&events[i % events.len()], Some(&snapshot)));
        }
        rows[6].push(ns_per(iterations, t));
    }
    let m: Vec<f64> = rows
        .into_iter()
        .map(|v| if v.is_empty() { 0.0 } else { median(v) })
        .collect();
    let (parse, hash, build, send, apply, batch_ns, classify) =
        (m[0], m[1], m[2], m[3], m[4], m[5], m[6]);

    r.line("| step | ns / message |");
    r.line("|---|---:|");
    r.line(format!("| parse + validate body | {parse:.0} |"));
    r.line(format!(
        "| content hash (one SHA-256 of the event's fields) | {hash:.0} |"
    ));
    r.line(format!(
        "| build the conditional UpdateItem (incl. its content hash) | {build:.0} |"
    ));
    r.line(format!(
        "| SDK `send()` of a built UpdateItem: serialise, resolve endpoint, sign (SigV4), retry/timeout machinery, parse the 200 | {send:.0} |"
    ));
    r.line(format!(
        "| `OrderStore::apply` (build + `send()` + classify the answer), measured as one | {apply:.0} |"
    ));
    r.line(format!(
        "| classify a refusal (stale case: sequence comparison only) | {classify:.0} |"
    ));
    r.line(format!(
        "| total, first-time message, sum of the steps (parse + apply) | {:.0} |",
        parse + apply
    ));
    r.line(format!(
        "| whole handler, first-time batch of 1,000 (`handle_batch`: parse, schedule, apply, cache, report; no log output), per message | {batch_ns:.0} |"
    ));
    r.line("\nThe SDK rows run against an in-process HTTP client that answers every request at once with DynamoDB's answer to a successful UpdateItem (200, `{}`): no socket, no DynamoDB, nothing subtracted; a real request adds the network (TLS, hyper) and DynamoDB's own time on top.");
}

// ---- Lambda Managed Instances: one process at concurrency 8 vs 8 processes --

/// Start `bin` against its own Runtime API emulator with `env` on top of
/// what Lambda sets, its output discarded.
fn spawn_function(bin: &Path, api: &RuntimeApi, db: &TestDb, env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", api.addr.to_string())
        .env("TABLE_NAME", &db.table)
        .env("AWS_ENDPOINT_URL_DYNAMODB", db.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        .env("AWS_LAMBDA_FUNCTION_NAME", "order-consumer")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("RETRY_BACKOFF", "off")
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the function binary")
}

/// Hand `payload` to `api` and wait for the answer; true when every record
/// was acknowledged.
async fn invoke_all_acked(api: &RuntimeApi, payload: Arc<Vec<u8>>) -> bool {
    let (reply, answered) = oneshot::channel();
    api.submit(Invocation {
        request_id: runtime_api::new_request_id(),
        payload,
        deadline_ms: epoch_ms() + 300_000,
        reply,
    })
    .await;
    match tokio::time::timeout(Duration::from_secs(300), answered).await {
        Ok(Ok(Reply::Response { body, .. })) => serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["batchItemFailures"].as_array().map(Vec::is_empty))
            .unwrap_or(false),
        _ => false,
    }
}

fn vm_hwm_kib(child: &Child) -> u64 {
    std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn managed_figures(r: &mut Report) {
    // The order consumer cargo built for this bench (the `bench` profile):
    // both layouts run the same build, so their ratio is the point.
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_order-consumer"));
    const SLOTS: usize = 8;
    const BATCHES: usize = 400;
    const BATCH: usize = 10;
    r.line(format!(
        "\n### Lambda Managed Instances: one process at AWS_LAMBDA_MAX_CONCURRENCY={SLOTS} vs {SLOTS} processes ({BATCHES} batches of {BATCH} first-time messages, {SLOTS} invocations in flight, median of 3)\n"
    ));
    r.line("| layout | messages / s | total peak RSS |");
    r.line("|---|---:|---:|");
    let payloads: Vec<Arc<Vec<u8>>> = (0..BATCHES)
        .map(|b| {
            Arc::new(
                serde_json::to_vec(&batch_of(&lifecycle_bodies(BATCH, &format!("lmi{b}"))))
                    .expect("event json"),
            )
        })
        .collect();
    let mut figures = Vec::new();
    for (name, processes, per_process) in [
        (format!("1 process, concurrency {SLOTS}"), 1usize, SLOTS),
        (format!("{SLOTS} processes, concurrency 1"), SLOTS, 1),
    ] {
        let mut rates = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..3 {
            let db = TestDb::new().await;
            let concurrency = per_process.to_string();
            let apis: Vec<RuntimeApi> =
                futures_util::future::join_all((0..processes).map(|_| RuntimeApi::start())).await;
            let mut children: Vec<Child> = apis
                .iter()
                .map(|api| {
                    spawn_function(
                        &bin,
                        api,
                        &db,
                        &[("AWS_LAMBDA_MAX_CONCURRENCY", &concurrency)],
                    )
                })
                .collect();
            // Cold starts are not what is compared: one empty batch each first.
            let empty = Arc::new(br#"{"Records":[]}"#.to_vec());
            futures_util::future::join_all(apis.iter().map(|a| invoke_all_acked(a, empty.clone())))
                .await;
            // SLOTS invocations in flight in both layouts: spread over the
            // processes, each process's share sent as its slots free up.
            let t = Instant::now();
            let acked = futures_util::future::join_all(
                payloads
                    .iter()
                    .enumerate()
                    .map(|(i, p)| invoke_all_acked(&apis[i % processes], p.clone())),
            )
            .await;
            let secs = t.elapsed().as_secs_f64();
            assert!(acked.iter().all(|ok| *ok), "every batch must apply fully");
            rates.push((BATCHES * BATCH) as f64 / secs);
            rss.push(children.iter().map(vm_hwm_kib).sum::<u64>() as f64 / 1024.0);
            for c in &mut children {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let (rate, mib) = (median(rates), median(rss));
        figures.push((rate, mib));
        r.line(format!("| {name} | {rate:.0} | {mib:.1} MiB |"));
    }
    r.line(format!(
        "\nSame run: one process at concurrency {SLOTS} delivers {:.2}x the messages per second of {SLOTS} processes in {:.2}x their memory.",
        figures[0].0 / figures[1].0,
        figures[0].1 / figures[1].1
    ));
}

// ---- the release binary under the Lambda Runtime API emulator ---------------

struct Run {
    to_first_poll: Duration,
    to_response: Duration,
    peak_rss_kib: u64,
    response: String,
}

/// Cold-start `bin` under the library's Runtime API emulator (the one the
/// reliability suite runs it under) and hand it one invocation, `event`.
async fn run_binary(bin: &Path, endpoint: &str, table: &str, event: &SqsEvent) -> Run {
    let payload = serde_json::to_vec(event).expect("event json");
    run_cold(bin, endpoint, &[("TABLE_NAME", table)], payload).await
}

/// Cold-start `bin` with `env` on top of what Lambda sets, its DynamoDB at
/// `endpoint`, and hand it one invocation, `payload`, queued before the
/// process starts: spawn → first poll is its init, spawn → first response
/// its init and its first invocation.
async fn run_cold(bin: &Path, endpoint: &str, env: &[(&str, &str)], payload: Vec<u8>) -> Run {
    let api = RuntimeApi::start().await;
    let (reply, answered) = oneshot::channel();
    api.submit(Invocation {
        request_id: runtime_api::new_request_id(),
        payload: Arc::new(payload),
        deadline_ms: epoch_ms() + 300_000,
        reply,
    })
    .await;
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", api.addr.to_string())
        .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        // lambda_runtime refuses to start without the variables Lambda sets.
        .env("AWS_LAMBDA_FUNCTION_NAME", "order-consumer")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let spawned = Instant::now();
    let mut child: Child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let reply = tokio::time::timeout(Duration::from_secs(300), answered)
        .await
        .expect("the function answered within 300 s")
        .expect("the function answered (the runtime API kept the invocation)");
    // Taken as the emulator hands the answer over: a channel hop after it
    // arrived, microseconds against the milliseconds measured.
    let to_response = spawned.elapsed();
    let response = match reply {
        Reply::Response { body, .. } => String::from_utf8_lossy(&body).into_owned(),
        Reply::Error {
            error_type,
            error_message,
            ..
        } => format!("invocation error {error_type}: {error_message}"),
    };
    let peak_rss_kib = vm_hwm_kib(&child);
    let _ = child.kill();
    let _ = child.wait();
    Run {
        to_first_poll: api
            .first_poll()
            .map(|t| t.saturating_duration_since(spawned))
            .unwrap_or_default(),
        to_response,
        peak_rss_kib,
        response,
    }
}

async fn process_figures(r: &mut Report) {
    // Copies made by `make bench` before `cargo bench` runs: cargo writes the
    // `bench` profile's binaries to target/release too, so by now
    // target/release/order-consumer is the (thin-LTO) bench build, not the
    // tuned release build this section is about.
    let root = workspace_root().join("target/bench-bins");
    let variants = [
        (
            "release (tuned: fat LTO, 1 codegen unit, stripped)",
            root.join("order-consumer.release"),
        ),
        (
            "release-untuned (defaults)",
            root.join("order-consumer.untuned"),
        ),
    ];
    for (_, bin) in &variants {
        if !bin.exists() {
            r.line(format!(
                "\n(missing {}: run `make bench`, which builds it)",
                bin.display()
            ));
            return;
        }
    }
    let small = batch_of(&lifecycle_bodies(10, "cs"));
    let big_n = largest_deliverable_batch();
    let big = batch_of(&lifecycle_bodies(big_n, "big"));

    r.line(
        "\n### The release binary under a Lambda Runtime API emulator (median of 5 cold starts)\n",
    );
    r.line(format!("| binary | size | spawn → first poll | spawn → first response (10 records) | peak RSS, {big_n}-record (6 MB) batch |"));
    r.line("|---|---:|---:|---:|---:|");
    let mut figures = Vec::new();
    for (name, bin) in &variants {
        let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);
        let mut polls = Vec::new();
        let mut responses = Vec::new();
        for _ in 0..RUNS {
            let db = TestDb::new().await;
            let run = run_binary(bin, db.endpoint(), &db.table, &small).await;
            assert!(
                run.response.contains("batchItemFailures"),
                "unexpected answer: {}",
                run.response
            );
            polls.push(run.to_first_poll.as_secs_f64() * 1e3);
            responses.push(run.to_response.as_secs_f64() * 1e3);
        }
        let db = TestDb::new().await;
        let big_run = run_binary(bin, db.endpoint(), &db.table, &big).await;
        assert_eq!(
            serde_json::from_str::<Value>(&big_run.response)
                .ok()
                .and_then(|v| v["batchItemFailures"].as_array().map(Vec::len)),
            Some(0),
            "the largest deliverable batch must apply fully"
        );
        let (p, s) = (median(polls), median(responses));
        figures.push((size, p, s));
        r.line(format!(
            "| {name} | {:.1} MiB | {p:.1} ms | {s:.1} ms | {:.1} MiB |",
            size as f64 / 1024.0 / 1024.0,
            big_run.peak_rss_kib as f64 / 1024.0
        ));
    }
    let (t, u) = (figures[0], figures[1]);
    r.line(format!(
        "\nTuned vs untuned, same run: size {:.2}x, spawn → first poll {:.2}x, spawn → first response {:.2}x.",
        t.0 as f64 / u.0 as f64,
        t.1 / u.1,
        t.2 / u.2
    ));
    r.line("arm64: not measured here (the aarch64 Rust target cannot be installed on this machine); `make build` produces it where it can.");
}

// ---- peer: the same consumer on Powertools for AWS Lambda (Python) ----------

/// The two functions the `peer` section compares, each run as Lambda runs
/// it: a process polling its own Runtime API emulator.
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    /// This crate's order consumer (the `bench` profile build).
    Project,
    /// bench/powertools/handler.py under awslambdaric, from target/bench-venv.
    Powertools,
    /// The order API's shipped (release) build, copied by `make bench`.
    ProjectApi,
    /// bench/powertools/api_handler.py under awslambdaric.
    PowertoolsApi,
}

struct PeerSetup {
    bin: PathBuf,
    api_bin: PathBuf,
    python: PathBuf,
    handler_dir: PathBuf,
}

/// Messages per throughput run (a batch of 1,000 is one invocation).
const PEER_MESSAGES: usize = 1_000;
const PEER_RUNS: usize = 3;

impl PeerSetup {
    /// Start `peer` against `api` and DynamoDB at `endpoint` (dynoxide, or
    /// the counting proxy in front of it), with the environment Lambda sets.
    fn spawn(
        &self,
        peer: Peer,
        api: &RuntimeApi,
        endpoint: &str,
        table: &str,
        idempotency_table: &str,
    ) -> Child {
        self.spawn_with(peer, api, endpoint, table, idempotency_table, &[])
    }

    /// [`PeerSetup::spawn`] with `env` on top.
    fn spawn_with(
        &self,
        peer: Peer,
        api: &RuntimeApi,
        endpoint: &str,
        table: &str,
        idempotency_table: &str,
        env: &[(&str, &str)],
    ) -> Child {
        let python = |handler: &str| {
            let mut c = Command::new(&self.python);
            c.args(["-m", "awslambdaric", handler])
                .current_dir(&self.handler_dir);
            c
        };
        let mut cmd = match peer {
            Peer::Project => Command::new(&self.bin),
            Peer::Powertools => python("handler.handler"),
            Peer::ProjectApi => Command::new(&self.api_bin),
            Peer::PowertoolsApi => python("api_handler.handler"),
        };
        cmd.env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.addr.to_string())
            .env("TABLE_NAME", table)
            .env("IDEMPOTENCY_TABLE", idempotency_table)
            .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_LAMBDA_FUNCTION_NAME", "order-consumer")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("RETRY_BACKOFF", "off")
            .env("RUST_LOG", "warn")
            .env("POWERTOOLS_SERVICE_NAME", "order-consumer")
            // Keep handler.py's bytecode out of the source tree.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", peer.name()))
    }
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Project => "order-consumer",
            Peer::Powertools => "Powertools (Python)",
            Peer::ProjectApi => "order-api",
            Peer::PowertoolsApi => "Powertools `@idempotent` (Python)",
        }
    }
}

/// Hand `payload` to `api`; Ok when every record was acknowledged, else
/// what the function answered.
async fn invoke_acked(api: &RuntimeApi, payload: Arc<Vec<u8>>) -> Result<(), String> {
    let body = invoke(api, payload).await?;
    match serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["batchItemFailures"].as_array().map(Vec::len))
    {
        Some(0) => Ok(()),
        _ => Err(format!(
            "not every record acked: {:.300}",
            String::from_utf8_lossy(&body)
        )),
    }
}

/// Hand `payload` to `api`; the function's answer, or why there is none.
async fn invoke(api: &RuntimeApi, payload: Arc<Vec<u8>>) -> Result<Vec<u8>, String> {
    let (reply, answered) = oneshot::channel();
    api.submit(Invocation {
        request_id: runtime_api::new_request_id(),
        payload,
        deadline_ms: epoch_ms() + 300_000,
        reply,
    })
    .await;
    match tokio::time::timeout(Duration::from_secs(300), answered).await {
        Ok(Ok(Reply::Response { body, .. })) => Ok(body.to_vec()),
        Ok(Ok(Reply::Error {
            error_type,
            error_message,
            ..
        })) => Err(format!("invocation error {error_type}: {error_message}")),
        Ok(Err(_)) => Err(format!(
            "no answer (process gone?{})",
            api.init_error()
                .map(|e| format!(" init error {e}"))
                .unwrap_or_default()
        )),
        Err(_) => Err("no answer within 300 s".into()),
    }
}

fn payloads(bodies: &[Value], batch: usize) -> Vec<Arc<Vec<u8>>> {
    bodies
        .chunks(batch)
        .map(|c| Arc::new(serde_json::to_vec(&batch_of(c)).expect("event json")))
        .collect()
}

/// One record of an order of its own: the first invocation of a process,
/// so that what is timed or counted after it is the warm function.
fn warm_payload(tag: &str) -> Arc<Vec<u8>> {
    let o = format!("warm-{tag}");
    Arc::new(
        serde_json::to_vec(&batch_of(&[body(
            &o,
            1,
            "OrderPlaced",
            &format!("evt-{o}-1"),
        )]))
        .expect("event json"),
    )
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Messages per second of a warm process fed `batch`-record invocations of
/// first-time messages, one at a time (as Lambda feeds one environment),
/// and its peak RSS at the end.
async fn peer_rate(s: &PeerSetup, peer: Peer, batch: usize) -> Result<(f64, u64), String> {
    let n = PEER_MESSAGES.max(batch);
    let work = payloads(&lifecycle_bodies(n, &format!("t{batch}")), batch);
    peer_rate_of(s, peer, &work, n, None, &[]).await
}

/// [`peer_rate`] of `work` (`n` messages), with every DynamoDB request
/// `latency_ms` late (through the fault proxy) when given, and `env` on top
/// of the peer's environment.
async fn peer_rate_of(
    s: &PeerSetup,
    peer: Peer,
    work: &[Arc<Vec<u8>>],
    n: usize,
    latency_ms: Option<u64>,
    env: &[(&str, &str)],
) -> Result<(f64, u64), String> {
    use order_consumer::testing::proxy::{Fault, FaultProxy};
    let db = TestDb::new().await;
    let idem = db.extra_table("idempotency", "id").await;
    let proxy = match latency_ms {
        Some(ms) => {
            let proxy = FaultProxy::start(db.endpoint(), 0).await;
            proxy.set(
                Fault::Latency {
                    before_ms: (ms, ms),
                    after_ms: (0, 0),
                },
                1.0,
            );
            Some(proxy)
        }
        None => None,
    };
    let endpoint = proxy.as_ref().map_or(db.endpoint().to_owned(), |p| p.url());
    let api = RuntimeApi::start().await;
    let child = s.spawn_with(peer, &api, &endpoint, &db.table, &idem, env);
    let result = async {
        invoke_acked(&api, warm_payload("rate")).await?;
        let t = Instant::now();
        for p in work {
            invoke_acked(&api, p.clone()).await?;
        }
        Ok::<_, String>(n as f64 / t.elapsed().as_secs_f64())
    }
    .await;
    let hwm = vm_hwm_kib(&child);
    stop(child);
    Ok((result?, hwm))
}

/// Spawn → first response, the 10-record invocation queued before the
/// process starts (as [`run_binary`] does).
async fn peer_cold_start(s: &PeerSetup, peer: Peer) -> Result<f64, String> {
    let db = TestDb::new().await;
    let idem = db.extra_table("idempotency", "id").await;
    let api = RuntimeApi::start().await;
    let payload = payloads(&lifecycle_bodies(10, "cold"), 10).remove(0);
    let (reply, answered) = oneshot::channel();
    api.submit(Invocation {
        request_id: runtime_api::new_request_id(),
        payload,
        deadline_ms: epoch_ms() + 300_000,
        reply,
    })
    .await;
    let spawned = Instant::now();
    let child = s.spawn(peer, &api, db.endpoint(), &db.table, &idem);
    let reply = tokio::time::timeout(Duration::from_secs(300), answered).await;
    let ms = spawned.elapsed().as_secs_f64() * 1e3;
    stop(child);
    match reply {
        Ok(Ok(Reply::Response { body, .. }))
            if String::from_utf8_lossy(&body).contains("batchItemFailures") =>
        {
            Ok(ms)
        }
        other => Err(format!(
            "{}: no batch response on a cold start: {other:?}",
            peer.name()
        )),
    }
}

/// DynamoDB requests per message, counted by a proxy between the process
/// and dynoxide (every HTTP request, whatever the client): first-time
/// messages, the same messages redelivered to the same (warm) process, and
/// redelivered to a new (cold) process. 1,000 messages in batches of 100.
async fn peer_requests(s: &PeerSetup, peer: Peer) -> Result<[f64; 3], String> {
    let n = 1_000;
    let db = TestDb::new().await;
    let idem = db.extra_table("idempotency", "id").await;
    let proxy = order_consumer::testing::proxy::FaultProxy::start(db.endpoint(), 0).await;
    let url = proxy.url();
    let work = payloads(&lifecycle_bodies(n, "q"), 100);
    let mut figures = [0.0; 3];
    let api = RuntimeApi::start().await;
    let child = s.spawn(peer, &api, &url, &db.table, &idem);
    let warm = async {
        invoke_acked(&api, warm_payload("requests")).await?;
        for f in &mut figures[..2] {
            let before = proxy.requests();
            for p in &work {
                invoke_acked(&api, p.clone()).await?;
            }
            *f = (proxy.requests() - before) as f64 / n as f64;
        }
        Ok::<_, String>(())
    }
    .await;
    stop(child);
    warm?;
    let api = RuntimeApi::start().await;
    let child = s.spawn(peer, &api, &url, &db.table, &idem);
    let cold = async {
        invoke_acked(&api, warm_payload("requests")).await?;
        let before = proxy.requests();
        for p in &work {
            invoke_acked(&api, p.clone()).await?;
        }
        figures[2] = (proxy.requests() - before) as f64 / n as f64;
        Ok::<_, String>(())
    }
    .await;
    stop(child);
    cold?;
    Ok(figures)
}

fn peer_setup() -> PeerSetup {
    let root = workspace_root();
    PeerSetup {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_order-consumer")),
        api_bin: root.join("target/bench-bins/order-api"),
        python: root.join("target/bench-venv/bin/python"),
        handler_dir: root.join("bench/powertools"),
    }
}

/// The baseline's Python and package versions; Err (and a line in the
/// report) when its venv is missing.
fn powertools_versions(s: &PeerSetup, r: &mut Report) -> Result<String, String> {
    let versions = Command::new(&s.python)
        .args([
            "-c",
            "import sys, importlib.metadata as m; print('Python %s, ' % sys.version.split()[0] + ', '.join('%s %s' % (p, m.version(p)) for p in ('aws-lambda-powertools', 'awslambdaric', 'boto3')))",
        ])
        .output();
    let versions = match versions {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        other => {
            let why = format!(
                "the Powertools baseline needs its venv, {} with bench/powertools/requirements.txt installed ({}). \
                 `make bench` creates it (`make bench-venv` alone), or by hand: \
                 python3 -m venv target/bench-venv && target/bench-venv/bin/pip install -r bench/powertools/requirements.txt",
                s.python.display(),
                match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
                    Err(e) => e.to_string(),
                }
            );
            r.line(format!("(not measured: {why})"));
            return Err(why);
        }
    };
    Ok(versions)
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "n/a".into()
    } else {
        format!("{:.2}x", a / b)
    }
}

async fn peer_figures(r: &mut Report) -> Result<(), String> {
    let root = workspace_root();
    let s = peer_setup();
    r.line("\n### Against Powertools for AWS Lambda (Python): same harness, same local DynamoDB, same run\n");
    let versions = powertools_versions(&s, r)?;
    r.line(format!(
        "order-consumer: the `bench` profile build. Powertools: bench/powertools/handler.py ({versions}), `BatchProcessor` + `@idempotent_function` on the eventId + one conditional UpdateItem, under `python -m awslambdaric`. Both poll a Runtime API emulator of their own and talk HTTP to dynoxide; each with its defaults (order-consumer applies a batch's orders concurrently, Powertools' BatchProcessor one record after another). Invocations one at a time, as Lambda feeds one environment; warm processes except for cold start.\n"
    ));
    let peers = [Peer::Project, Peer::Powertools];

    let mut rates = Vec::new();
    let mut hwm = [0u64; 2];
    for batch in [10usize, 100, 1_000] {
        let mut row = [0.0; 2];
        for (i, peer) in peers.into_iter().enumerate() {
            let mut v = Vec::new();
            for _ in 0..PEER_RUNS {
                let (rate, kib) = peer_rate(&s, peer, batch)
                    .await
                    .map_err(|e| format!("{} throughput, batch {batch}: {e}", peer.name()))?;
                v.push(rate);
                if batch == 1_000 {
                    hwm[i] = hwm[i].max(kib);
                }
            }
            row[i] = median(v);
        }
        rates.push((batch, row));
    }

    let mut cold = [0.0; 2];
    for (i, peer) in peers.into_iter().enumerate() {
        let mut v = Vec::new();
        for _ in 0..RUNS {
            v.push(peer_cold_start(&s, peer).await?);
        }
        cold[i] = median(v);
    }

    let mut requests = [[0.0; 3]; 2];
    for (i, peer) in peers.into_iter().enumerate() {
        requests[i] = peer_requests(&s, peer)
            .await
            .map_err(|e| format!("{} requests: {e}", peer.name()))?;
    }

    r.line("| figure | order-consumer | Powertools (Python) | order-consumer / Powertools |");
    r.line("|---|---:|---:|---:|");
    for (batch, [p, q]) in &rates {
        r.line(format!(
            "| messages / s, batches of {batch} (first-time, {} messages, median of {PEER_RUNS}) | {p:.0} | {q:.0} | {} |",
            PEER_MESSAGES.max(*batch),
            ratio(*p, *q)
        ));
    }
    for (k, name) in [
        "first-time message",
        "duplicate, same (warm) process",
        "duplicate, new (cold) process",
    ]
    .into_iter()
    .enumerate()
    {
        let (p, q) = (requests[0][k], requests[1][k]);
        r.line(format!(
            "| DynamoDB requests / {name} | {p:.2} | {q:.2} | {} |",
            ratio(p, q)
        ));
    }
    r.line(format!(
        "| cold start: spawn → first response, 10 records (median of {RUNS}) | {:.1} ms | {:.1} ms | {} |",
        cold[0],
        cold[1],
        ratio(cold[0], cold[1])
    ));
    let mib = |k: u64| k as f64 / 1024.0;
    r.line(format!(
        "| peak RSS (VmHWM) after the batches of 1,000 | {:.1} MiB | {:.1} MiB | {} |",
        mib(hwm[0]),
        mib(hwm[1]),
        ratio(hwm[0] as f64, hwm[1] as f64)
    ));
    r.line("\nDynamoDB requests are counted by a proxy between each process and dynoxide; 1,000 messages (whole lifecycles) in batches of 100, then the same batches again to the same process, then to a new one. The Powertools handler's business write is modelled on src/orders/store.rs (status guard, contiguous seq), not identical to it: see bench/powertools/handler.py.");

    let figures = serde_json::json!({
        "machine": machine_description(),
        "powertools": versions,
        "batches": rates.iter().map(|(b, [p, q])| serde_json::json!({
            "batch": b, "order_consumer_msgs_per_s": p, "powertools_msgs_per_s": q,
        })).collect::<Vec<_>>(),
        "cold_start_ms": {"order_consumer": cold[0], "powertools": cold[1]},
        "peak_rss_mib": {"order_consumer": mib(hwm[0]), "powertools": mib(hwm[1])},
        "requests_per_message": {
            "order_consumer": {"first_time": requests[0][0], "duplicate_warm": requests[0][1], "duplicate_cold": requests[0][2]},
            "powertools": {"first_time": requests[1][0], "duplicate_warm": requests[1][1], "duplicate_cold": requests[1][2]},
        },
    });
    let path = root.join("target/bench-peer.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&figures).expect("figures json"),
    )
    .map_err(|e| format!("write {}: {e}", path.display()))?;
    r.line(format!("\n(figures for the chart: {})", path.display()));
    Ok(())
}
