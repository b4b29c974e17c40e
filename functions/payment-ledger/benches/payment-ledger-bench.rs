//! `make bench`, the payment ledger: messages per second and DynamoDB requests
//! per message, in process against a local DynamoDB (dynoxide).
//! Prints a markdown table (also written to target/bench-report-payment-ledger.md), run by
//! `make bench` after the root's benchmark. A benchmark, not a test: it
//! asserts only that the work it timed was the work intended.

use orders::testing::*;
use payment_ledger::testing::*;
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
    r.write("bench-report-payment-ledger.md");
}

async fn figures(r: &mut Report) {
    const N: usize = 1_000;
    const ACCOUNTS: usize = 100;
    r.line(format!(
        "\n### The payment ledger: {N} messages in one batch over {ACCOUNTS} accounts (median of {RUNS} runs)\n"
    ));
    r.line("| message | messages / s | DynamoDB requests / message |");
    r.line("|---|---:|---:|");
    let captures: Vec<Value> = (0..N)
        .map(|i| {
            captured(
                &format!("cap-{i}"),
                &format!("p{i}"),
                &format!("a{}", i % ACCOUNTS),
                1_000,
            )
        })
        .collect();
    let refunds: Vec<Value> = (0..N)
        .map(|i| {
            refunded(
                &format!("ref-{i}"),
                &format!("p{i}"),
                &format!("r{i}"),
                &format!("a{}", i % ACCOUNTS),
                300,
            )
        })
        .collect();
    let steps = [
        ("capture, first time", &captures, "Applied"),
        ("capture, redelivered (duplicate)", &captures, "Duplicate"),
        ("refund, first time", &refunds, "Applied"),
        ("refund, redelivered (duplicate)", &refunds, "Duplicate"),
    ];
    let mut rows: Vec<PerMessage> = steps.iter().map(|_| PerMessage::default()).collect();
    for _ in 0..RUNS {
        let db = LedgerDb::new().await;
        let (client, counter) = counted(&db.db.client);
        let ledger = payment_ledger::function(client, db.config()).expect("the ledger builds");
        for ((_, bodies, want), row) in steps.iter().zip(&mut rows) {
            let event = batch_of(bodies);
            let before = counter.get();
            let t = Instant::now();
            let (report, _) = ledger.handle_batch(&event, far_deadline()).await;
            let secs = t.elapsed().as_secs_f64();
            assert!(
                report.outcomes().all(|o| o.label() == *want),
                "every ledger message must be {want}"
            );
            row.add(N, secs, counter.get() - before, 0);
        }
    }
    for ((name, _, _), row) in steps.iter().zip(rows) {
        r.line(format!(
            "| {name} | {:.0} | {:.2} |",
            median(row.rates),
            median(row.requests)
        ));
    }
    r.line("\nOne TransactWriteItems per first-time message (the entry, the account's balance; a refund also its capture's refundable amount, and a check that the capture is not parked); a redelivery is refused by the entry's condition inside that same request, and the cancellation reasons classify it. An account's messages apply one after another (they all write its item), so a batch runs at most as many at once as it has accounts.");
}
