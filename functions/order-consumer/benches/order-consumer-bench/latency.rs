//! Section `latency`: the throughput table with a fixed latency added to
//! every DynamoDB request (the fault proxy's `Fault::Latency`, before
//! forwarding), for order-consumer at its MAX_CONCURRENCY settings and for
//! Powertools, both as processes under the Runtime API emulator, next to the
//! limit: a batch's critical path (its longest per-order chain of writes)
//! times the latency.

use super::*;
use lambda_idempotency_harness::limits::critical_path_round_trips;

const LATENCIES_MS: [u64; 3] = [1, 5, 20];
const BATCHES: [usize; 3] = [10, 100, 1_000];
const CONCURRENCY: [usize; 4] = [1, 8, 32, 64];

/// Repetitions at a latency: at 20 ms one run of Powertools' batch of
/// 1,000 alone takes a minute (three requests per message, one after
/// another), so one run there, three below.
fn runs_at(latency_ms: u64) -> usize {
    if latency_ms >= 20 { 1 } else { 3 }
}

/// Messages per run: at least 200, so that batches of 10 are 20
/// invocations, not one.
fn messages(batch: usize) -> usize {
    batch.max(200)
}

/// Sequential round trips the batches need with `writes_per_message` and
/// `concurrency` (see [`critical_path_round_trips`]), summed over them (one
/// invocation at a time).
fn round_trips(batches: &[Vec<String>], writes_per_message: usize, concurrency: usize) -> usize {
    batches
        .iter()
        .map(|orders| {
            critical_path_round_trips(
                orders.iter().map(String::as_str),
                writes_per_message,
                concurrency,
            )
        })
        .sum()
}

/// What the proxy adds to a request at `latency_ms`, as the SDK sees it:
/// the mean of 50 sequential GetItems through it, less the mean of 50
/// straight to dynoxide (tokio's timer rounds a sleep up to its next tick).
async fn measured_latency_ms(latency_ms: u64) -> f64 {
    use order_consumer::testing::proxy::{Fault, FaultProxy};
    let db = TestDb::new().await;
    let proxy = FaultProxy::start(db.endpoint(), 0).await;
    proxy.set(
        Fault::Latency {
            before_ms: (latency_ms, latency_ms),
            after_ms: (0, 0),
        },
        1.0,
    );
    let mean_ms = |client: aws_sdk_dynamodb::Client, table: String| async move {
        const N: usize = 50;
        // One request first: the connection is opened outside the timing.
        let get = || {
            client
                .get_item()
                .table_name(&table)
                .key(
                    "order_id",
                    aws_sdk_dynamodb::types::AttributeValue::S("none".into()),
                )
                .send()
        };
        let _ = get().await;
        let t = Instant::now();
        for _ in 0..N {
            let _ = get().await;
        }
        t.elapsed().as_secs_f64() * 1e3 / N as f64
    };
    let through = mean_ms(client_for(&proxy.url()), db.table.clone()).await;
    let direct = mean_ms(db.client.clone(), db.table.clone()).await;
    through - direct
}

fn pct(rate: f64, bound: f64) -> String {
    format!("{rate:.0} ({:.0} %)", 100.0 * rate / bound)
}

pub async fn figures(r: &mut Report) -> Result<(), String> {
    let s = peer_setup();
    r.line("\n### Under a network round trip: messages per second with a fixed latency on every DynamoDB request\n");
    let versions = powertools_versions(&s, r)?;
    let started = Instant::now();
    r.line(format!(
        "Both as processes polling a Runtime API emulator of their own (order-consumer: the `bench` profile build; Powertools: bench/powertools/handler.py, {versions}), invocations one at a time, first-time lifecycle messages (4 per order), max(batch, 200) messages per run; the fault proxy holds every DynamoDB request for the latency before forwarding it to dynoxide. Median of 3 runs (1 at 20 ms). **limit**: the batches' critical path, the longest per-order chain of writes (one write per message) times the latency as measured (in brackets after the nominal one), summed over the run's batches: no consumer that writes each message once can beat it. In brackets, each figure as a share of its own bound: order-consumer's at that MAX_CONCURRENCY (the chain, or the batch's writes spread over that many slots, whichever is longer), Powertools' three requests per message one after another (BatchProcessor runs the records in order).\n"
    ));
    r.line(format!(
        "| latency (measured, ms) | batch | limit | {} | Powertools (Python) | best order-consumer / limit | Powertools / limit |",
        CONCURRENCY.map(|c| format!("MAX_CONCURRENCY={c}")).join(" | ")
    ));
    r.line(format!(
        "|---:|---:|---:|{}---:|---:|---:|",
        "---:|".repeat(CONCURRENCY.len())
    ));
    let mut rows = Vec::new();
    for latency in LATENCIES_MS {
        // The limits use the latency the proxy adds as measured, not its
        // nominal value: what a request really waits.
        let measured = measured_latency_ms(latency).await;
        // (Never below the nominal: the proxy sleeps at least that long.)
        let secs = measured.max(latency as f64) / 1e3;
        for batch in BATCHES {
            let n = messages(batch);
            let bodies = lifecycle_bodies(n, &format!("l{latency}-{batch}"));
            let orders: Vec<Vec<String>> = bodies
                .chunks(batch)
                .map(|c| {
                    c.iter()
                        .map(|b| b["orderId"].as_str().unwrap_or("").to_owned())
                        .collect()
                })
                .collect();
            let work = payloads(&bodies, batch);
            let limit = n as f64 / (round_trips(&orders, 1, usize::MAX) as f64 * secs);
            let mut ours = Vec::new();
            for c in CONCURRENCY {
                let mut v = Vec::new();
                for _ in 0..runs_at(latency) {
                    let concurrency = c.to_string();
                    let (rate, _) = peer_rate_of(
                        &s,
                        Peer::Project,
                        &work,
                        n,
                        Some(latency),
                        &[("MAX_CONCURRENCY", &concurrency)],
                    )
                    .await
                    .map_err(|e| format!("order-consumer at {latency} ms, batch {batch}: {e}"))?;
                    v.push(rate);
                }
                let bound = n as f64 / (round_trips(&orders, 1, c) as f64 * secs);
                ours.push((c, median(v), bound));
            }
            let mut v = Vec::new();
            for _ in 0..runs_at(latency) {
                let (rate, _) = peer_rate_of(&s, Peer::Powertools, &work, n, Some(latency), &[])
                    .await
                    .map_err(|e| format!("Powertools at {latency} ms, batch {batch}: {e}"))?;
                v.push(rate);
            }
            let powertools = median(v);
            let powertools_bound = n as f64 / (round_trips(&orders, 3, 1) as f64 * secs);
            let best = ours.iter().map(|(_, v, _)| *v).fold(0.0, f64::max);
            r.line(format!(
                "| {latency} ms ({measured:.2}) | {batch} | {limit:.0} | {} | {} | {:.0} % | {:.1} % |",
                ours.iter()
                    .map(|(_, v, b)| pct(*v, *b))
                    .collect::<Vec<_>>()
                    .join(" | "),
                pct(powertools, powertools_bound),
                100.0 * best / limit,
                100.0 * powertools / limit
            ));
            rows.push(serde_json::json!({
                "latency_ms": latency, "measured_latency_ms": measured, "batch": batch, "messages": n, "limit_msgs_per_s": limit,
                "order_consumer": ours.iter().map(|(c, v, b)| serde_json::json!({
                    "max_concurrency": c, "msgs_per_s": v, "bound_msgs_per_s": b,
                })).collect::<Vec<_>>(),
                "powertools_msgs_per_s": powertools,
                "powertools_bound_msgs_per_s": powertools_bound,
            }));
        }
    }
    r.line(format!(
        "\nThis section took {:.0} s. In brackets after the latency, what the proxy added to a request as measured just before (the mean of 50 GetItems through it less that of 50 straight to dynoxide): its sleep is tokio's timer, which rounds up to the next millisecond tick, and the hop through it costs a little more; the limits and bounds use that figure.",
        started.elapsed().as_secs_f64()
    ));
    let path = workspace_target().join("bench-latency.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&serde_json::json!({ "rows": rows })).unwrap_or_default(),
    )
    .map_err(|e| format!("write {}: {e}", path.display()))?;
    r.line(format!("\n(figures for the chart: {})", path.display()));
    Ok(())
}
