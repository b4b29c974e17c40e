//! `make bench`, the order notifier: records per second, DynamoDB requests and
//! webhook calls per record, in process against a local DynamoDB (dynoxide)
//! and a local webhook provider.
//! Prints a markdown table (also written to target/bench-report-order-notifier.md), run by
//! `make bench` after the root's benchmark. A benchmark, not a test: it
//! asserts only that the work it timed was the work intended.

use orders::testing::*;
use serde_json::Value;
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
    r.write("bench-report-order-notifier.md");
}

/// An order image as the order consumer writes it (what the notifier reads).
fn order_image(order: &str, status: &str) -> Value {
    serde_json::json!({"order_id": {"S": order}, "status": {"S": status},
           "customer_id": {"S": "cust-1"}, "last_event_seq": {"N": "1"},
           "carrier": {"S": "DHL"}, "tracking_id": {"S": "TRK-1"},
           "history": {"L": [{"S": "evt-1"}]}})
}

/// One stream record, shaped as Lambda delivers it (as in the notifier's
/// integration tests).
fn stream_record(seq: u64, order: &str, old: Option<&str>, new: Option<&str>) -> Value {
    order_notifier::testing::stream_record(
        seq,
        order,
        old.map(|o| order_image(order, o)),
        new.map(|n| order_image(order, n)),
    )
}

async fn figures(r: &mut Report) {
    use aws_lambda_events::event::dynamodb::Event as StreamEvent;
    use order_notifier::NotifierConfig;
    use order_notifier::store::KEY;
    use orders::testing::provider::Provider;
    const N: usize = 1_000;
    r.line(format!(
        "\n### The order notifier: {N} stream records in one batch, one order each, against a local webhook provider (median of {RUNS} runs)\n"
    ));
    r.line("| record | records / s | DynamoDB requests / record | webhook calls / record |");
    r.line("|---|---:|---:|---:|");
    let stream = |records: Vec<Value>| -> StreamEvent {
        serde_json::from_value(serde_json::json!({ "Records": records })).expect("a stream event")
    };
    let placed = stream(
        (0..N)
            .map(|i| stream_record(i as u64, &format!("n{i}"), None, Some("PLACED")))
            .collect(),
    );
    let paid = stream(
        (0..N)
            .map(|i| {
                stream_record(
                    (N + i) as u64,
                    &format!("n{i}"),
                    Some("PLACED"),
                    Some("PAID"),
                )
            })
            .collect(),
    );
    let shipped = stream(
        (0..N)
            .map(|i| {
                stream_record(
                    (2 * N + i) as u64,
                    &format!("n{i}"),
                    Some("PAID"),
                    Some("SHIPPED"),
                )
            })
            .collect(),
    );
    let steps = [
        (
            "INSERT → PLACED, first time (order confirmation)",
            &placed,
            "Sent",
        ),
        ("the same records redelivered", &placed, "AlreadySent"),
        ("PLACED → PAID (notifies nobody)", &paid, "NothingToSend"),
        (
            "PAID → SHIPPED, first time (shipping notice)",
            &shipped,
            "Sent",
        ),
    ];
    let mut rows: Vec<PerMessage> = steps.iter().map(|_| PerMessage::default()).collect();
    for _ in 0..RUNS {
        let db = TestDb::new().await;
        let table = db.extra_table("notifications", KEY).await;
        let provider = Provider::start().await;
        let vars = std::collections::HashMap::from([
            ("NOTIFICATIONS_TABLE".to_owned(), table.clone()),
            ("NOTIFY_WEBHOOK_URL".to_owned(), provider.url.clone()),
        ]);
        let config = NotifierConfig::from_lookup(|k| vars.get(k).cloned()).expect("config");
        let url = config.webhook.literal().cloned().expect("a literal URL");
        let (client, counter) = counted(&db.client);
        let notifier = order_notifier::function(client, config, &url).expect("notifier");
        for ((_, event, want), row) in steps.iter().zip(&mut rows) {
            let (before, calls_before) = (counter.get(), provider.method_count("POST"));
            let t = Instant::now();
            let (report, _) = notifier.handle_batch(*event, far_deadline()).await;
            let secs = t.elapsed().as_secs_f64();
            assert!(
                report.outcomes().all(|o| o.label() == *want),
                "every record must be {want}"
            );
            row.add(
                N,
                secs,
                counter.get() - before,
                u64::from(provider.method_count("POST") - calls_before),
            );
        }
    }
    for ((name, _, _), row) in steps.iter().zip(rows) {
        r.line(format!(
            "| {name} | {:.0} | {:.2} | {:.2} |",
            median(row.rates),
            median(row.requests),
            median(row.calls)
        ));
    }
    r.line("\nA notification costs a conditional claim (UpdateItem), the POST with its Idempotency-Key, and the conditional write that records it sent; a redelivered one is refused at the claim, which brings the record back (sent: nothing more). A change that notifies nobody is settled without I/O. The provider is in the same process (plain HTTP on loopback), so a real provider's latency is not in these figures; records of different orders run concurrently.");
}
