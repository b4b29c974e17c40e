//! Section `api-peer`: the order API's shipped build against Powertools'
//! `@idempotent` on an API Gateway HTTP API handler that creates an order
//! (bench/powertools/api_handler.py), each a process polling its own Runtime
//! API emulator, on the same local DynamoDB: requests per second for
//! first-time requests and for replays, DynamoDB requests per request, cold
//! start and peak RSS.

use super::*;
use order_consumer::testing::lambda_http::http::Method;
use order_consumer::testing::proxy::FaultProxy;
use order_consumer::testing::{HttpApiCaller, HttpApiRequest};

/// Requests per kind and run (one at a time, as Lambda feeds one
/// environment).
const REQUESTS: usize = 300;

/// The IAM caller of every request (the order API's default `API_AUTH`).
const CALLER_ARN: &str = "arn:aws:iam::123456789012:user/bench";

/// A `POST /orders` body.
pub fn order_body(i: usize) -> String {
    serde_json::json!({"customerId": format!("cust-{i}"), "amount": 100 + i, "currency": "INR"})
        .to_string()
}

/// `POST /orders` with this Idempotency-Key, as an API Gateway HTTP API
/// (payload format 2.0) event from an IAM-authorised caller, built by the
/// testing crate's `HttpApiRequest` as order_api::testing::event builds it
/// (this bench does not depend on the order API's crate). Empty if it could
/// not be built (a key that is no header value): the API then answers no
/// status, and the run fails saying so.
pub fn post_event(key: &str, body: &str) -> Vec<u8> {
    HttpApiRequest::new(Method::POST, "/orders")
        .route_key("POST /orders")
        .header("user-agent", "bench")
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(body)
        .caller(HttpApiCaller::iam(CALLER_ARN))
        .event()
        .ok()
        .and_then(|ev| serde_json::to_vec(&ev).ok())
        .unwrap_or_default()
}

/// The HTTP status of an API answer.
fn status_of(body: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Value>(body).ok()?["statusCode"].as_u64()
}

pub async fn expect_status(
    api: &RuntimeApi,
    payload: Arc<Vec<u8>>,
    want: u64,
) -> Result<(), String> {
    let body = invoke(api, payload).await?;
    match status_of(&body) {
        Some(s) if s == want => Ok(()),
        _ => Err(format!(
            "expected {want}, got {:.300}",
            String::from_utf8_lossy(&body)
        )),
    }
}

/// The idempotency table `peer` expects: the order API's key attribute, or
/// Powertools' default (`id`).
pub async fn idempotency_table(db: &TestDb, peer: Peer) -> String {
    match peer {
        Peer::ProjectApi => db.extra_table("idempotency", "idempotency_key").await,
        _ => db.extra_table("idempotency", "id").await,
    }
}

/// One run of `peer`: [`REQUESTS`] first-time requests, then the same
/// again (replays), through a counting proxy; per kind the rate and the
/// DynamoDB requests per request, and the process's peak RSS at the end.
async fn api_run(s: &PeerSetup, peer: Peer, run: usize) -> Result<([(f64, f64); 2], u64), String> {
    let db = TestDb::new().await;
    let idem = idempotency_table(&db, peer).await;
    let proxy = FaultProxy::start(db.endpoint(), 0).await;
    let api = RuntimeApi::start().await;
    let child = s.spawn_with(peer, &api, &proxy.url(), &db.table, &idem, &[]);
    let requests: Vec<Arc<Vec<u8>>> = (0..REQUESTS)
        .map(|i| Arc::new(post_event(&format!("bench-{run}-{i}"), &order_body(i))))
        .collect();
    let result = async {
        // The first request of the process, of a key of its own.
        expect_status(&api, Arc::new(post_event("warm", &order_body(0))), 201).await?;
        let mut figures = [(0.0, 0.0); 2];
        for f in &mut figures {
            let before = proxy.requests();
            let t = Instant::now();
            for p in &requests {
                expect_status(&api, p.clone(), 201).await?;
            }
            let secs = t.elapsed().as_secs_f64();
            *f = (
                REQUESTS as f64 / secs,
                (proxy.requests() - before) as f64 / REQUESTS as f64,
            );
        }
        Ok::<_, String>(figures)
    }
    .await;
    let hwm = vm_hwm_kib(&child);
    stop(child);
    Ok((result?, hwm))
}

/// Spawn → first response of one `POST /orders`, queued before the process
/// starts.
async fn api_cold_start(s: &PeerSetup, peer: Peer) -> Result<f64, String> {
    let db = TestDb::new().await;
    let idem = idempotency_table(&db, peer).await;
    let api = RuntimeApi::start().await;
    let (reply, answered) = oneshot::channel();
    api.submit(Invocation {
        request_id: runtime_api::new_request_id(),
        payload: Arc::new(post_event("cold", &order_body(0))),
        deadline_ms: epoch_ms() + 300_000,
        reply,
    })
    .await;
    let spawned = Instant::now();
    let child = s.spawn_with(peer, &api, db.endpoint(), &db.table, &idem, &[]);
    let reply = tokio::time::timeout(Duration::from_secs(300), answered).await;
    let ms = spawned.elapsed().as_secs_f64() * 1e3;
    stop(child);
    match reply {
        Ok(Ok(Reply::Response { body, .. })) if status_of(&body) == Some(201) => Ok(ms),
        other => Err(format!(
            "{}: no 201 on a cold start: {other:?}",
            peer.name()
        )),
    }
}

pub async fn figures(r: &mut Report) -> Result<(), String> {
    let s = peer_setup();
    r.line("\n### The order API against Powertools' `@idempotent` (Python): same harness, same local DynamoDB, same run\n");
    if !s.api_bin.exists() {
        let why = format!(
            "missing {}: `make bench` copies the release build there",
            s.api_bin.display()
        );
        r.line(format!("(not measured: {why})"));
        return Err(why);
    }
    let versions = powertools_versions(&s, r)?;
    r.line(format!(
        "order-api: the shipped (release) build, `API_AUTH` unset (IAM). Powertools: bench/powertools/api_handler.py ({versions}), `@idempotent` on the handler keyed on the caller's ARN and the `Idempotency-Key` header, the body validated, one conditional PutItem of the order, under `python -m awslambdaric`. Each polls a Runtime API emulator of its own and talks HTTP to dynoxide through a counting proxy; {REQUESTS} `POST /orders` one at a time (as Lambda feeds one environment) to a warm process, then the same {REQUESTS} again (replays); median of {PEER_RUNS} runs.\n"
    ));
    let peers = [Peer::ProjectApi, Peer::PowertoolsApi];
    let mut rates = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    let mut requests = [[0.0; 2]; 2];
    let mut hwm = [0u64; 2];
    let mut cold = [0.0; 2];
    for (i, peer) in peers.into_iter().enumerate() {
        for run in 0..PEER_RUNS {
            let (figures, kib) = api_run(&s, peer, run)
                .await
                .map_err(|e| format!("{}: {e}", peer.name()))?;
            for (k, (rate, per_request)) in figures.into_iter().enumerate() {
                rates[i][k].push(rate);
                requests[i][k] = per_request;
            }
            hwm[i] = hwm[i].max(kib);
        }
        let mut v = Vec::new();
        for _ in 0..RUNS {
            v.push(api_cold_start(&s, peer).await?);
        }
        cold[i] = median(v);
    }
    let rate = |i: usize, k: usize| median(rates[i][k].clone());
    r.line("| figure | order-api | Powertools `@idempotent` (Python) | order-api / Powertools |");
    r.line("|---|---:|---:|---:|");
    for (k, name) in [
        "first-time request (201)",
        "replay (201, same key and body)",
    ]
    .into_iter()
    .enumerate()
    {
        r.line(format!(
            "| requests / s, {name} | {:.0} | {:.0} | {} |",
            rate(0, k),
            rate(1, k),
            ratio(rate(0, k), rate(1, k))
        ));
    }
    for (k, name) in ["first-time request", "replay"].into_iter().enumerate() {
        r.line(format!(
            "| DynamoDB requests / {name} | {:.2} | {:.2} | {} |",
            requests[0][k],
            requests[1][k],
            ratio(requests[0][k], requests[1][k])
        ));
    }
    r.line(format!(
        "| cold start: spawn → first response, one `POST /orders` (median of {RUNS}) | {:.1} ms | {:.1} ms | {} |",
        cold[0],
        cold[1],
        ratio(cold[0], cold[1])
    ));
    let mib = |k: u64| k as f64 / 1024.0;
    r.line(format!(
        "| peak RSS (VmHWM) after {} requests | {:.1} MiB | {:.1} MiB | {} |",
        2 * REQUESTS + 1,
        mib(hwm[0]),
        mib(hwm[1]),
        ratio(hwm[0] as f64, hwm[1] as f64)
    ));
    r.line("\nA first-time request costs the order API a conditional PutItem of its idempotency record and one TransactWriteItems (the order and the completed record together); Powertools a conditional PutItem (in progress), the handler's PutItem of the order, and an UpdateItem (completed), one after another. A replay costs each one refused PutItem that brings the stored response back (Powertools with its defaults: no local cache).");
    let path = workspace_target().join("bench-api-peer.json");
    let figures = serde_json::json!({
        "requests_per_s": {
            "order_api": {"first_time": rate(0, 0), "replay": rate(0, 1)},
            "powertools": {"first_time": rate(1, 0), "replay": rate(1, 1)},
        },
        "dynamodb_requests_per_request": {
            "order_api": {"first_time": requests[0][0], "replay": requests[0][1]},
            "powertools": {"first_time": requests[1][0], "replay": requests[1][1]},
        },
        "cold_start_ms": {"order_api": cold[0], "powertools": cold[1]},
        "peak_rss_mib": {"order_api": mib(hwm[0]), "powertools": mib(hwm[1])},
    });
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&figures).unwrap_or_default(),
    )
    .map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(())
}
