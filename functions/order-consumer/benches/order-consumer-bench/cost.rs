//! Section `cost`: dollars per million messages on Lambda (arm64) and
//! DynamoDB on-demand, for order-consumer and Powertools' batch +
//! idempotency, from what this section measures in one run: each process's
//! wall time per invocation at batches of 10 and 100 with 5 ms on every
//! DynamoDB request (the fault proxy, as in the `latency` section), its init
//! (spawn → first poll), its DynamoDB requests per message (the proxy's
//! count), its peak RSS and its largest item. The prices and the arithmetic
//! are lambda_idempotency_harness::cost's.
//!
//! The same for the order API against Powertools' `@idempotent`, per
//! million requests: first-time requests and replays, each a warm process
//! fed one request at a time.
//!
//! Write request units come from the item writes each request asks for
//! (the proxy's [`ItemWrites`]: a transactional write is billed twice) at
//! the size of the largest item the run left in its tables.

use super::*;
use api_peer::{expect_status, idempotency_table, order_body, post_event};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency_harness::cost::{Measured, US_EAST_1_ON_DEMAND, Workload, item_writes};
use order_consumer::testing::proxy::{Fault, FaultProxy, ItemWrites};
use std::collections::HashMap;

const LATENCY_MS: u64 = 5;
const BATCHES: [usize; 2] = [10, 100];
/// Messages per run: batches of 10 are 20 invocations.
const MESSAGES: usize = 200;
/// Cold starts per invocation: AWS's own figure for production workloads
/// ("under 1% of invocations", its post on billing the init phase).
const COLD_STARTS_PER_INVOCATION: f64 = 0.01;
/// Lambda's smallest memory size, and order-consumer's.
const OUR_MEMORY_MB: u32 = 128;

/// What one warm run measured.
struct RunFigures {
    wall_ms_per_invocation: f64,
    requests_per_message: f64,
    /// Item writes per message: standard, transactional.
    writes_per_message: (f64, f64),
    peak_rss_kib: u64,
    largest_item_bytes: u64,
}

/// DynamoDB's item size: each attribute's name and value in bytes (numbers
/// counted as their decimal text, an upper bound of DynamoDB's encoding;
/// lists and maps 3 bytes plus 1 per element).
fn item_bytes(item: &HashMap<String, AttributeValue>) -> u64 {
    item.iter()
        .map(|(k, v)| k.len() as u64 + value_bytes(v))
        .sum()
}

fn value_bytes(v: &AttributeValue) -> u64 {
    match v {
        AttributeValue::S(s) | AttributeValue::N(s) => s.len() as u64,
        AttributeValue::B(b) => b.as_ref().len() as u64,
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) | AttributeValue::Ns(v) => v.iter().map(|s| s.len() as u64).sum(),
        AttributeValue::L(l) => 3 + l.iter().map(|e| 1 + value_bytes(e)).sum::<u64>(),
        AttributeValue::M(m) => 3 + m.len() as u64 + item_bytes(m),
        _ => 0,
    }
}

/// The largest item of `tables`, in bytes.
async fn largest_item(db: &TestDb, tables: &[&str]) -> u64 {
    let mut largest = 0;
    for table in tables {
        if let Ok(out) = db.client.scan().table_name(*table).send().await {
            for item in out.items() {
                largest = largest.max(item_bytes(item));
            }
        }
    }
    largest
}

/// One warm process fed [`MESSAGES`] first-time messages in `batch`-record
/// invocations, one at a time, every DynamoDB request [`LATENCY_MS`] late.
async fn run(s: &PeerSetup, peer: Peer, batch: usize, tag: &str) -> Result<RunFigures, String> {
    let db = TestDb::new().await;
    let idem = db.extra_table("idempotency", "id").await;
    let proxy = FaultProxy::start(db.endpoint(), 0).await;
    proxy.set(
        Fault::Latency {
            before_ms: (LATENCY_MS, LATENCY_MS),
            after_ms: (0, 0),
        },
        1.0,
    );
    let work = payloads(&lifecycle_bodies(MESSAGES, tag), batch);
    let api = RuntimeApi::start().await;
    let child = s.spawn_with(peer, &api, &proxy.url(), &db.table, &idem, &[]);
    let result = async {
        invoke_acked(&api, warm_payload("cost")).await?;
        let before = (proxy.requests(), proxy.item_writes());
        let t = Instant::now();
        for p in &work {
            invoke_acked(&api, p.clone()).await?;
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        Ok::<_, String>((
            ms / work.len() as f64,
            (proxy.requests() - before.0) as f64 / MESSAGES as f64,
            writes_since(&proxy, before.1, MESSAGES),
        ))
    }
    .await;
    let peak_rss_kib = vm_hwm_kib(&child);
    stop(child);
    let (wall_ms_per_invocation, requests_per_message, writes_per_message) = result?;
    Ok(RunFigures {
        wall_ms_per_invocation,
        requests_per_message,
        writes_per_message,
        peak_rss_kib,
        largest_item_bytes: largest_item(&db, &[&db.table, &idem]).await,
    })
}

/// The proxy's item writes since `before`, per one of `n` messages or
/// requests: (standard, transactional).
fn writes_since(proxy: &FaultProxy, before: ItemWrites, n: usize) -> (f64, f64) {
    let now = proxy.item_writes();
    (
        (now.standard - before.standard) as f64 / n as f64,
        (now.transactional - before.transactional) as f64 / n as f64,
    )
}

/// Spawn → first poll of `peer` (its init: the runtime's start, imports or
/// the binary's loading, configuration and clients), then stopped.
async fn init_ms(s: &PeerSetup, peer: Peer) -> Result<f64, String> {
    let db = TestDb::new().await;
    let idem = idempotency_table(&db, peer).await;
    let api = RuntimeApi::start().await;
    let spawned = Instant::now();
    let child = s.spawn_with(peer, &api, db.endpoint(), &db.table, &idem, &[]);
    let deadline = spawned + Duration::from_secs(60);
    let polled = loop {
        if let Some(t) = api.first_poll() {
            break Some(t);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    stop(child);
    polled
        .map(|t| t.saturating_duration_since(spawned).as_secs_f64() * 1e3)
        .ok_or_else(|| format!("{}: no first poll within 60 s", peer.name()))
}

/// The smallest memory size Lambda offers that holds `peak_rss_kib`
/// (sizes go from 128 MB in steps of 1 MB).
fn smallest_memory_mb(peak_rss_kib: u64) -> u32 {
    let mb = peak_rss_kib.div_ceil(1024) as u32;
    mb.max(128)
}

pub async fn figures(r: &mut Report) -> Result<(), String> {
    let s = peer_setup();
    let prices = US_EAST_1_ON_DEMAND;
    r.line(format!(
        "\n### What a million messages cost: Lambda (arm64) and DynamoDB on-demand, {LATENCY_MS} ms on every DynamoDB request\n"
    ));
    let versions = powertools_versions(&s, r)?;
    let peers = [Peer::Project, Peer::Powertools];

    // Init, interleaved: the two processes' cold starts alternate.
    let mut inits = [Vec::new(), Vec::new()];
    for _ in 0..RUNS {
        for (i, peer) in peers.into_iter().enumerate() {
            inits[i].push(init_ms(&s, peer).await?);
        }
    }
    let init = [median(inits[0].clone()), median(inits[1].clone())];

    // Warm runs, interleaved by peer within each batch size.
    let mut rows = Vec::new();
    let mut rss = [0u64; 2];
    for batch in BATCHES {
        let mut runs: [Vec<RunFigures>; 2] = [Vec::new(), Vec::new()];
        for k in 0..PEER_RUNS {
            for (i, peer) in peers.into_iter().enumerate() {
                let f = run(&s, peer, batch, &format!("cost{batch}-{k}"))
                    .await
                    .map_err(|e| format!("{} cost run, batch {batch}: {e}", peer.name()))?;
                rss[i] = rss[i].max(f.peak_rss_kib);
                runs[i].push(f);
            }
        }
        rows.push((batch, runs));
    }
    let memory = [OUR_MEMORY_MB, smallest_memory_mb(rss[1])];

    r.line(format!(
        "order-consumer: the `bench` profile build, its defaults (MAX_CONCURRENCY=8), at {OUR_MEMORY_MB} MB. Powertools: bench/powertools/handler.py ({versions}), at the smallest memory size that holds its peak RSS ({:.1} MiB measured here: {} MB). Each a warm process under the Runtime API emulator, {MESSAGES} first-time lifecycle messages per run in invocations one at a time, every DynamoDB request held {LATENCY_MS} ms by the fault proxy; median of {PEER_RUNS} runs, the two interleaved. Init: spawn → first poll, median of {RUNS} interleaved cold starts ({:.1} ms and {:.1} ms), billed once per {:.0} invocations. Prices: {} on-demand as of {} (Lambda arm64 ${}/GB-s and ${:.2}/million requests; DynamoDB ${}/million WRU, ${}/million RRU; {}).\n",
        rss[1] as f64 / 1024.0,
        memory[1],
        init[0],
        init[1],
        1.0 / COLD_STARTS_PER_INVOCATION,
        prices.region,
        prices.as_of,
        prices.lambda_gb_second,
        prices.lambda_million_requests,
        prices.million_write_units,
        prices.million_read_units,
        prices.sources.join(", ")
    ));
    r.line("| function | batch | memory | wall / invocation | DynamoDB requests / message | largest item | Lambda GB-s (of it init) | Lambda requests | WRU | RRU | Lambda $ | DynamoDB $ | total $ | / Powertools |");
    r.line("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut json_rows = Vec::new();
    for (batch, runs) in &rows {
        let mut totals = [0.0; 2];
        let mut lines = Vec::new();
        for (i, peer) in peers.into_iter().enumerate() {
            let wall = median(runs[i].iter().map(|f| f.wall_ms_per_invocation).collect());
            let requests = median(runs[i].iter().map(|f| f.requests_per_message).collect());
            let standard = median(runs[i].iter().map(|f| f.writes_per_message.0).collect());
            let transactional = median(runs[i].iter().map(|f| f.writes_per_message.1).collect());
            let item = runs[i]
                .iter()
                .map(|f| f.largest_item_bytes)
                .max()
                .unwrap_or(0);
            // First-time messages are all writes on both (conditional
            // PutItem / UpdateItem); neither reads on this path.
            let (writes, units_per_write) = item_writes(standard, transactional, item);
            let workload = Workload::new(Measured {
                batch_size: *batch as u32,
                wall_ms_per_invocation: wall,
                init_ms: init[i],
                memory_mb: memory[i],
                cold_starts_per_invocation: COLD_STARTS_PER_INVOCATION,
                writes_per_message: writes,
                reads_per_message: 0.0,
                write_units_per_write: units_per_write,
                read_units_per_read: 0.0,
            })
            .map_err(|e| format!("{}: {e}", peer.name()))?;
            let c = workload.per_million_messages(&prices);
            totals[i] = c.total_usd();
            lines.push(format!(
                "| {} | {batch} | {} MB | {wall:.1} ms | {requests:.2} | {item} B | {:.0} ({:.1}) | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
                peer.name(),
                memory[i],
                c.gb_seconds,
                c.init_gb_seconds,
                c.invocations,
                c.write_units,
                c.read_units,
                c.lambda_usd,
                c.dynamodb_usd,
                c.total_usd(),
            ));
            json_rows.push(serde_json::json!({
                "function": peer.name(), "batch": batch, "memory_mb": memory[i],
                "wall_ms_per_invocation": wall, "init_ms": init[i],
                "requests_per_message": requests, "largest_item_bytes": item,
                "gb_seconds": c.gb_seconds, "init_gb_seconds": c.init_gb_seconds,
                "invocations": c.invocations, "write_units": c.write_units,
                "read_units": c.read_units, "lambda_usd": c.lambda_usd,
                "dynamodb_usd": c.dynamodb_usd, "total_usd": c.total_usd(),
            }));
        }
        for (i, line) in lines.into_iter().enumerate() {
            let vs = if i == 0 {
                ratio(totals[0], totals[1])
            } else {
                "1.00x".into()
            };
            r.line(format!("{line} {vs} |"));
        }
    }
    r.line(format!(
        "\nPeak RSS over these runs: order-consumer {:.1} MiB, Powertools {:.1} MiB. Locally a process's memory size does not throttle its CPU as Lambda's does (a function gets CPU in proportion to its memory, a whole vCPU at 1,769 MB): both wall times here are a whole core's, so at 128 MB on Lambda both would run longer, the one that spends more CPU per message more so; that could not be measured here.",
        rss[0] as f64 / 1024.0,
        rss[1] as f64 / 1024.0
    ));
    let path = workspace_target().join("bench-cost.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&serde_json::json!({
            "prices_as_of": prices.as_of, "latency_ms": LATENCY_MS, "rows": json_rows,
        }))
        .unwrap_or_default(),
    )
    .map_err(|e| format!("write {}: {e}", path.display()))?;
    api_figures(r, &s, &versions).await
}

/// Requests of each kind per API run (one at a time, as Lambda feeds one
/// environment).
const API_REQUESTS: usize = 200;

/// What one warm API run measured for one kind of request.
struct ApiPhase {
    wall_ms_per_request: f64,
    requests_per_request: f64,
    /// Item writes per request: standard, transactional.
    writes_per_request: (f64, f64),
}

/// One warm API process: [`API_REQUESTS`] first-time `POST /orders`, then
/// the same again (replays), every DynamoDB request [`LATENCY_MS`] late;
/// per kind what it took, then the process's peak RSS and the largest
/// item it left.
async fn api_run(
    s: &PeerSetup,
    peer: Peer,
    tag: &str,
) -> Result<([ApiPhase; 2], u64, u64), String> {
    let db = TestDb::new().await;
    let idem = idempotency_table(&db, peer).await;
    let proxy = FaultProxy::start(db.endpoint(), 0).await;
    proxy.set(
        Fault::Latency {
            before_ms: (LATENCY_MS, LATENCY_MS),
            after_ms: (0, 0),
        },
        1.0,
    );
    let api = RuntimeApi::start().await;
    let child = s.spawn_with(peer, &api, &proxy.url(), &db.table, &idem, &[]);
    let requests: Vec<Arc<Vec<u8>>> = (0..API_REQUESTS)
        .map(|i| Arc::new(post_event(&format!("{tag}-{i}"), &order_body(i))))
        .collect();
    let result = async {
        expect_status(
            &api,
            Arc::new(post_event(&format!("{tag}-warm"), &order_body(0))),
            201,
        )
        .await?;
        let mut phases = Vec::new();
        for _ in 0..2 {
            let before = (proxy.requests(), proxy.item_writes());
            let t = Instant::now();
            for p in &requests {
                expect_status(&api, p.clone(), 201).await?;
            }
            phases.push(ApiPhase {
                wall_ms_per_request: t.elapsed().as_secs_f64() * 1e3 / API_REQUESTS as f64,
                requests_per_request: (proxy.requests() - before.0) as f64 / API_REQUESTS as f64,
                writes_per_request: writes_since(&proxy, before.1, API_REQUESTS),
            });
        }
        let replay = phases.pop().ok_or("no replay phase")?;
        let first = phases.pop().ok_or("no first-time phase")?;
        Ok::<_, String>([first, replay])
    }
    .await;
    let peak_rss_kib = vm_hwm_kib(&child);
    stop(child);
    let phases = result?;
    Ok((
        phases,
        peak_rss_kib,
        largest_item(&db, &[&db.table, &idem]).await,
    ))
}

/// What a million `POST /orders` cost, first-time and replayed, for the
/// order API and Powertools' `@idempotent`.
async fn api_figures(r: &mut Report, s: &PeerSetup, versions: &str) -> Result<(), String> {
    let prices = US_EAST_1_ON_DEMAND;
    r.line(format!(
        "\n### What a million API requests cost: the order API against Powertools' `@idempotent`, {LATENCY_MS} ms on every DynamoDB request\n"
    ));
    if !s.api_bin.exists() {
        let why = format!(
            "missing {}: `make bench` copies the release build there",
            s.api_bin.display()
        );
        r.line(format!("(not measured: {why})"));
        return Err(why);
    }
    let peers = [Peer::ProjectApi, Peer::PowertoolsApi];
    let mut inits = [Vec::new(), Vec::new()];
    for _ in 0..RUNS {
        for (i, peer) in peers.into_iter().enumerate() {
            inits[i].push(init_ms(s, peer).await?);
        }
    }
    let init = [median(inits[0].clone()), median(inits[1].clone())];
    let mut runs: [Vec<[ApiPhase; 2]>; 2] = [Vec::new(), Vec::new()];
    let mut rss = [0u64; 2];
    let mut item = [0u64; 2];
    for k in 0..PEER_RUNS {
        for (i, peer) in peers.into_iter().enumerate() {
            let (phases, kib, largest) = api_run(s, peer, &format!("cost-api-{k}"))
                .await
                .map_err(|e| format!("{} API cost run: {e}", peer.name()))?;
            rss[i] = rss[i].max(kib);
            item[i] = item[i].max(largest);
            runs[i].push(phases);
        }
    }
    let memory = [OUR_MEMORY_MB, smallest_memory_mb(rss[1])];
    r.line(format!(
        "order-api: the shipped (release) build, `API_AUTH` unset (IAM), at {OUR_MEMORY_MB} MB. Powertools: bench/powertools/api_handler.py ({versions}), at the smallest memory size that holds its peak RSS ({:.1} MiB measured here: {} MB). Each a warm process under the Runtime API emulator, {API_REQUESTS} first-time `POST /orders` one at a time, then the same {API_REQUESTS} again (replays), every DynamoDB request held {LATENCY_MS} ms by the fault proxy; median of {PEER_RUNS} runs, the two interleaved. Init: spawn → first poll, median of {RUNS} interleaved cold starts ({:.1} ms and {:.1} ms), billed once per {:.0} invocations. Write units: each request's item writes (a transactional one billed twice, a refused conditional write as one) at the size of the largest item of the run ({} B and {} B). Prices as in the table above.\n",
        rss[1] as f64 / 1024.0,
        memory[1],
        init[0],
        init[1],
        1.0 / COLD_STARTS_PER_INVOCATION,
        item[0],
        item[1],
    ));
    r.line("| function | request | memory | wall / request | DynamoDB requests / request | item writes / request (of them transactional) | Lambda GB-s (of it init) | WRU | Lambda $ | DynamoDB $ | total $ | / Powertools |");
    r.line("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut json_rows = Vec::new();
    for (k, kind) in ["first-time (201)", "replay (201)"].into_iter().enumerate() {
        let mut totals = [0.0; 2];
        let mut lines = Vec::new();
        for (i, peer) in peers.into_iter().enumerate() {
            let med =
                |f: &dyn Fn(&ApiPhase) -> f64| median(runs[i].iter().map(|p| f(&p[k])).collect());
            let wall = med(&|p| p.wall_ms_per_request);
            let requests = med(&|p| p.requests_per_request);
            let standard = med(&|p| p.writes_per_request.0);
            let transactional = med(&|p| p.writes_per_request.1);
            let (writes, units_per_write) = item_writes(standard, transactional, item[i]);
            // Neither reads: a replay is the refused conditional PutItem
            // that brings the stored record back.
            let c = Workload::new(Measured {
                batch_size: 1,
                wall_ms_per_invocation: wall,
                init_ms: init[i],
                memory_mb: memory[i],
                cold_starts_per_invocation: COLD_STARTS_PER_INVOCATION,
                writes_per_message: writes,
                reads_per_message: 0.0,
                write_units_per_write: units_per_write,
                read_units_per_read: 0.0,
            })
            .map_err(|e| format!("{}: {e}", peer.name()))?
            .per_million_messages(&prices);
            totals[i] = c.total_usd();
            lines.push(format!(
                "| {} | {kind} | {} MB | {wall:.1} ms | {requests:.2} | {writes:.2} ({transactional:.2}) | {:.0} ({:.1}) | {:.0} | {:.2} | {:.2} | {:.2} |",
                peer.name(),
                memory[i],
                c.gb_seconds,
                c.init_gb_seconds,
                c.write_units,
                c.lambda_usd,
                c.dynamodb_usd,
                c.total_usd(),
            ));
            json_rows.push(serde_json::json!({
                "function": peer.name(), "request": kind, "memory_mb": memory[i],
                "wall_ms_per_request": wall, "init_ms": init[i],
                "requests_per_request": requests, "item_writes_per_request": writes,
                "transactional_item_writes_per_request": transactional,
                "largest_item_bytes": item[i], "gb_seconds": c.gb_seconds,
                "init_gb_seconds": c.init_gb_seconds, "write_units": c.write_units,
                "lambda_usd": c.lambda_usd, "dynamodb_usd": c.dynamodb_usd,
                "total_usd": c.total_usd(),
            }));
        }
        for (i, line) in lines.into_iter().enumerate() {
            let vs = if i == 0 {
                ratio(totals[0], totals[1])
            } else {
                "1.00x".into()
            };
            r.line(format!("{line} {vs} |"));
        }
    }
    r.line(format!(
        "\nPeak RSS over these runs: order-api {:.1} MiB, Powertools {:.1} MiB. Per million requests Lambda bills 1,000,000 requests ($0.20) for either, in the Lambda column.",
        rss[0] as f64 / 1024.0,
        rss[1] as f64 / 1024.0
    ));
    let path = workspace_target().join("bench-cost-api.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&serde_json::json!({
            "prices_as_of": prices.as_of, "latency_ms": LATENCY_MS, "rows": json_rows,
        }))
        .unwrap_or_default(),
    )
    .map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(())
}
