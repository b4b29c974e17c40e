//! The two idempotency stores side by side, in one run: the idempotent
//! function ([`Idempotent::call`]) and the HTTP Idempotency-Key layer
//! ([`IdempotencyLayer`]) on the Valkey store (a real `redis-server` on
//! loopback, in memory as ElastiCache runs it) and on the DynamoDB store
//! (dynoxide, DynamoDB-compatible, in this process), each for first-time
//! calls and for replays, one call at a time as one Lambda environment
//! makes them.
//!
//! `cargo bench -p lambda-idempotency --bench stores --features valkey,http`
//! (`make bench` runs it). Prints a markdown table and writes it with the
//! figures to `target/bench-stores.json`. Both servers are on loopback, so
//! the table compares what each store costs in requests and CPU on this
//! machine, not the network: on AWS an in-VPC cache answers in well under a
//! millisecond and DynamoDB in a few.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lambda_http::http::Method;
use lambda_http::tower::{Layer, ServiceExt, service_fn};
use lambda_http::{Body, Request, Response};
use lambda_idempotency::http::{AuthMode, IdempotencyLayer};
use lambda_idempotency::idempotency::{
    IdempotencyOptions, IdempotencyStore, IdempotencyTable, Idempotent, Persistence,
};
use lambda_idempotency_testing::valkey::{Durability, ValkeyServer};
use lambda_idempotency_testing::{
    HttpApiCaller, HttpApiRequest, client_for, create_idempotency_table, start_dynoxide,
    unique_name,
};
use serde::{Deserialize, Serialize};

/// Calls per kind and run.
const CALLS: usize = 1_000;
/// Runs, the two stores interleaved; the table shows medians.
const RUNS: usize = 5;

#[derive(Serialize, Deserialize)]
struct Charge {
    id: String,
    amount: u64,
}

#[derive(Serialize, Deserialize)]
struct Receipt {
    reference: String,
}

/// What one kind of call measured in one run.
#[derive(Clone, Copy)]
struct Figures {
    per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn figures(mut latencies: Vec<Duration>, total: Duration) -> Figures {
    latencies.sort();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1e3
    };
    Figures {
        per_s: latencies.len() as f64 / total.as_secs_f64(),
        p50_ms: at(0.50),
        p99_ms: at(0.99),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// [`CALLS`] first-time calls of the idempotent function, then the same
/// again (replays); panics if a replay ran the function.
async fn function_run<S: Persistence>(store: S, tag: &str) -> [Figures; 2] {
    let runs = Arc::new(AtomicU64::new(0));
    let charge = Idempotent::new(store, "charge")
        .expect("a valid name")
        .key(|c: &Charge| Some(c.id.clone()))
        .payload(|c: &Charge| serde_json::json!({ "amount": c.amount }));
    let mut out = Vec::new();
    for _ in 0..2 {
        let mut latencies = Vec::with_capacity(CALLS);
        let start = Instant::now();
        for i in 0..CALLS {
            let input = Charge {
                id: format!("{tag}-{i}"),
                amount: 100 + i as u64,
            };
            let counted = runs.clone();
            let t = Instant::now();
            charge
                .call(
                    input,
                    tokio::time::Instant::now() + Duration::from_secs(30),
                    |c: Charge| {
                        counted.fetch_add(1, Ordering::Relaxed);
                        std::future::ready(Ok::<_, std::convert::Infallible>(Receipt {
                            reference: format!("r-{}", c.id),
                        }))
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("an idempotent call failed: {e}"));
            latencies.push(t.elapsed());
        }
        out.push(figures(latencies, start.elapsed()));
    }
    assert_eq!(
        runs.load(Ordering::Relaxed),
        CALLS as u64,
        "a replay ran the function"
    );
    [out[0], out[1]]
}

fn request(key: &str, i: usize) -> Request {
    HttpApiRequest::new(Method::POST, "/orders")
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(serde_json::json!({ "item": "book", "qty": i }).to_string())
        .caller(HttpApiCaller::iam("arn:aws:iam::123456789012:user/bench"))
        .build()
        .expect("an HTTP API request")
}

/// [`CALLS`] first-time `POST`s through the Idempotency-Key layer, then
/// the same again (replays: 201, replayed); panics on any other answer.
async fn layer_run<S: Persistence + Clone + Send + Sync + 'static>(
    store: S,
    tag: &str,
) -> [Figures; 2] {
    let svc =
        IdempotencyLayer::new(store, AuthMode::Iam).layer(service_fn(|_req: Request| async {
            Response::builder()
                .status(201)
                .header("content-type", "application/json")
                .body(Body::Text(r#"{"orderId":"o-1"}"#.into()))
                .map_err(lambda_http::Error::from)
        }));
    let mut out = Vec::new();
    for replay in [false, true] {
        let mut latencies = Vec::with_capacity(CALLS);
        let start = Instant::now();
        for i in 0..CALLS {
            let req = request(&format!("{tag}-{i}"), i);
            let t = Instant::now();
            let resp = svc.clone().oneshot(req).await.expect("answered");
            latencies.push(t.elapsed());
            let replayed = resp.headers().get("idempotent-replayed").is_some();
            assert!(
                resp.status() == 201 && replayed == replay,
                "call {i}: {} (replayed: {replayed})",
                resp.status()
            );
        }
        out.push(figures(latencies, start.elapsed()));
    }
    [out[0], out[1]]
}

async fn dynamodb_store() -> IdempotencyStore {
    let client = client_for(&start_dynoxide().await);
    let table = IdempotencyTable::new(unique_name("bench")).expect("a valid name");
    create_idempotency_table(&client, &table)
        .await
        .expect("the table");
    IdempotencyStore::new(client, table, IdempotencyOptions::default()).expect("valid options")
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(run());
}

async fn run() {
    let valkey = ValkeyServer::start(Durability::InMemory)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dynamodb = dynamodb_store().await;
    let valkey_store = valkey
        .store(IdempotencyOptions::default())
        .expect("valid options");
    // [store][use: function, layer][kind: first, replay] -> runs
    let mut all: Vec<Vec<Vec<Vec<Figures>>>> = vec![vec![vec![Vec::new(); 2]; 2]; 2];
    for run in 0..RUNS {
        for (s, name) in ["valkey", "dynamodb"].into_iter().enumerate() {
            let tag = format!("{name}-{run}");
            let (f, l) = if s == 0 {
                (
                    function_run(valkey_store.clone(), &tag).await,
                    layer_run(valkey_store.clone(), &tag).await,
                )
            } else {
                (
                    function_run(dynamodb.clone(), &tag).await,
                    layer_run(dynamodb.clone(), &tag).await,
                )
            };
            for k in 0..2 {
                all[s][0][k].push(f[k]);
                all[s][1][k].push(l[k]);
            }
        }
    }
    let version = redis_version(&valkey).await;
    println!(
        "\n### The idempotency stores: Valkey against DynamoDB (section `stores`, {CALLS} calls one at a time per kind, median of {RUNS} runs, the two interleaved)\n"
    );
    println!(
        "Valkey: {version}, in memory, on loopback. DynamoDB: dynoxide in the bench's process.\n"
    );
    println!(
        "| use | call | Valkey calls / s | DynamoDB calls / s | Valkey / DynamoDB | Valkey p50 | DynamoDB p50 | Valkey p99 | DynamoDB p99 |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for (u, use_) in ["`Idempotent::call`", "`IdempotencyLayer`"]
        .into_iter()
        .enumerate()
    {
        for (k, kind) in ["first time", "replay"].into_iter().enumerate() {
            let m = |s: usize, f: fn(&Figures) -> f64| median(all[s][u][k].iter().map(f).collect());
            let (vr, dr) = (m(0, |f| f.per_s), m(1, |f| f.per_s));
            let (v50, d50) = (m(0, |f| f.p50_ms), m(1, |f| f.p50_ms));
            let (v99, d99) = (m(0, |f| f.p99_ms), m(1, |f| f.p99_ms));
            println!(
                "| {use_} | {kind} | {vr:.0} | {dr:.0} | {:.2}x | {v50:.3} ms | {d50:.3} ms | {v99:.3} ms | {d99:.3} ms |",
                vr / dr
            );
            rows.push(serde_json::json!({
                "use": use_.trim_matches('`'), "call": kind,
                "valkey": {"per_s": vr, "p50_ms": v50, "p99_ms": v99},
                "dynamodb": {"per_s": dr, "p50_ms": d50, "p99_ms": d99},
            }));
        }
    }
    // CARGO_TARGET_DIR when cargo was told one, else the workspace's.
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    };
    let path = target.join("bench-stores.json");
    if let Err(e) = std::fs::write(
        &path,
        serde_json::to_vec_pretty(
            &serde_json::json!({ "server": version, "calls": CALLS, "runs": RUNS, "rows": rows }),
        )
        .unwrap_or_default(),
    ) {
        eprintln!("could not write {}: {e}", path.display());
    }
}

/// The server's name and version, from INFO.
async fn redis_version(v: &ValkeyServer) -> String {
    let info = async {
        let client = redis::Client::open(v.url()).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await
            .ok()?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        };
        Some(match field("valkey_version:") {
            Some(v) => format!("Valkey {v}"),
            None => format!("Redis {}", field("redis_version:")?),
        })
    };
    info.await.unwrap_or_else(|| "version unknown".into())
}
