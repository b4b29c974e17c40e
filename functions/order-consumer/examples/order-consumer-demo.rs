//! `make demo`: the whole story on a laptop, no AWS account, no Docker.
//!
//! Starts a DynamoDB-compatible server (dynoxide, in this process, on a free
//! port of 127.0.0.1), creates the orders table, and runs the function's real
//! handler ([`OrderFunction::handle_batch`], the same code the Lambda binary runs,
//! with the same SDK client talking HTTP) on each sample event in
//! events/scenarios.json order. For every record it prints the outcome next to
//! the outcome the scenario expects, then the batch item failures, and at the
//! end the orders table. Exits non-zero if any outcome differs. `make demo`
//! then runs each function's own demo under functions/ (its
//! `examples/<name>-demo.rs`), on the same shared parts
//! (`lambda_idempotency_harness::demo`).

use std::collections::HashMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency_harness::demo::{client, deadline, run_scenarios, start_server, unreadable};
use order_consumer::orders::OrderConfig;
use order_consumer::orders::event as order_event;
use order_consumer::orders::store::OrderStore;

const TABLE: &str = "orders";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Logs are off unless asked for (RUST_LOG=info): the table below is the
    // point.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }

    let (_db, endpoint, server) = start_server().await?;
    let client = client(&endpoint);
    // With its stream, as in template.yaml.
    order_consumer::testing::create_streamed_orders_table(&client, TABLE).await?;
    println!("created table `{TABLE}`\n");

    let config = OrderConfig::from_lookup(|k| (k == "TABLE_NAME").then(|| TABLE.to_owned()))?;
    let consumer =
        order_consumer::orders::function(OrderStore::new(client.clone(), TABLE), config)?;

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../events");
    let mismatches = run_scenarios(
        &dir,
        async |event| consumer.handle_batch(event, deadline()).await,
        |body| match order_event::parse_body(body) {
            Ok(ev) => format!("{} {} seq {}", ev.order_id, ev.kind(), ev.seq.get()),
            Err(_) => unreadable(body),
        },
    )
    .await?;
    print_table(&client).await?;

    server.abort();
    if mismatches > 0 {
        eprintln!("\n{mismatches} record(s) did not show the expected outcome");
        std::process::exit(1);
    }
    println!("\nevery record showed its expected outcome");
    Ok(())
}

async fn print_table(client: &aws_sdk_dynamodb::Client) -> Result<(), Box<dyn std::error::Error>> {
    let items = client
        .scan()
        .table_name(TABLE)
        .send()
        .await?
        .items
        .unwrap_or_default();
    let mut rows: Vec<&HashMap<String, AttributeValue>> = items.iter().collect();
    let get = |i: &HashMap<String, AttributeValue>, k: &str| match i.get(k) {
        Some(AttributeValue::S(s)) | Some(AttributeValue::N(s)) => s.clone(),
        Some(AttributeValue::L(l)) => l
            .iter()
            .filter_map(|v| v.as_s().ok().cloned())
            .collect::<Vec<_>>()
            .join(", "),
        _ => "-".to_owned(),
    };
    rows.sort_by_key(|i| get(i, "order_id"));
    println!("== final `{TABLE}` table");
    println!(
        "   {:<10} {:<10} {:>4}  applied events (history)",
        "order_id", "status", "seq"
    );
    for i in rows {
        println!(
            "   {:<10} {:<10} {:>4}  {}",
            get(i, "order_id"),
            get(i, "status"),
            get(i, "last_event_seq"),
            get(i, "history")
        );
    }
    Ok(())
}
