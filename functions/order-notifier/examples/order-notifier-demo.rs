//! The order notifier's part of `make demo`: a DynamoDB-compatible server in
//! this process, the orders table with its stream, written by the order
//! consumer's real handler from the template's sample events (events/, the
//! root demo's), then that real stream (recorded by dynoxide) fed to the
//! notifier with a local provider that deduplicates by Idempotency-Key, and
//! replayed whole: each notification is sent once. Exits non-zero otherwise.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use lambda_idempotency::engine::{SqsInput, StrictInput};
use lambda_idempotency_harness::demo::{client, deadline, start_server};
use order_notifier::NotifierConfig;
use orders::OrderConfig;
use orders::store::OrderStore;
use orders::testing::{provider, stream_records};

const TABLE: &str = "orders";
const NOTIFICATIONS: &str = "notifications";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "\n==== the order notifier: the orders table's stream to customer notifications ====\n"
    );
    let (db, endpoint, server) = start_server().await?;
    let client = client(&endpoint);
    // With its stream, as in template.yaml.
    orders::testing::create_streamed_orders_table(&client, TABLE).await?;
    let config = OrderConfig::from_lookup(|k| (k == "TABLE_NAME").then(|| TABLE.to_owned()))?;
    let consumer = orders::function(OrderStore::new(client.clone(), TABLE), config)?;
    // The order consumer's sample events (their outcomes are the root
    // demo's to show): here they only write the orders and so the stream.
    let events = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../events");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&events)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().is_some_and(|n| n != "scenarios.json")
        })
        .collect();
    files.sort();
    for file in &files {
        let event = serde_json::from_str::<SqsInput>(&std::fs::read_to_string(file)?)?.into_inner();
        // Records the order consumer refuses are the root demo's to show;
        // an invocation error would leave the stream short.
        let (_report, response) = consumer.handle_batch(&event, deadline()).await;
        response?;
    }
    println!(
        "wrote the orders of the {} sample events of events/",
        files.len()
    );

    let mismatches = notify(&client, &db).await?;

    server.abort();
    if mismatches > 0 {
        eprintln!("\n{mismatches} notification(s) not delivered exactly once");
        std::process::exit(1);
    }
    println!("\nevery notification was delivered exactly once");
    Ok(())
}

/// The orders stream through the notifier, twice (the second time as a
/// replay): returns the number of notifications that were not delivered
/// exactly once.
async fn notify(
    client: &aws_sdk_dynamodb::Client,
    db: &orders::testing::dynoxide::Database,
) -> Result<usize, Box<dyn std::error::Error>> {
    orders::testing::create_table(client, NOTIFICATIONS, order_notifier::store::KEY).await?;
    let provider = provider::Provider::start().await;
    let config = NotifierConfig::from_lookup(|k| match k {
        "NOTIFICATIONS_TABLE" => Some(NOTIFICATIONS.to_owned()),
        "NOTIFY_WEBHOOK_URL" => Some(provider.url.clone()),
        _ => None,
    })?;
    // A literal URL (the local provider's): no SSM read.
    let webhook_url = config
        .webhook
        .literal()
        .cloned()
        .ok_or("the demo's webhook URL is a literal")?;
    let notifier = order_notifier::function(client.clone(), config, &webhook_url)?;
    let records = stream_records::read(db, TABLE);
    println!(
        "created table `{NOTIFICATIONS}`; the orders stream holds {} records\n",
        records.len()
    );
    let mut sent_on_replay = 0;
    for pass in ["first delivery, batches of 10", "the whole stream replayed"] {
        println!("== {pass}");
        let mut counts: HashMap<&'static str, usize> = HashMap::new();
        for chunk in records.chunks(10) {
            let event: aws_lambda_events::event::dynamodb::Event =
                serde_json::from_value(serde_json::json!({ "Records": chunk }))?;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            let (report, _) = notifier.handle_batch(&event, deadline).await;
            for (record, rep) in chunk.iter().zip(&report.records) {
                *counts.entry(rep.outcome.label()).or_default() += 1;
                if rep.outcome.label() != "NothingToSend" {
                    let status = |img: &str| {
                        record["dynamodb"][img]["status"]["S"]
                            .as_str()
                            .unwrap_or("-")
                            .to_owned()
                    };
                    println!(
                        "   {:<10} {:>9} -> {:<9} {}",
                        rep.key.as_deref().unwrap_or("?"),
                        status("OldImage"),
                        status("NewImage"),
                        rep.outcome
                    );
                }
            }
        }
        let mut summary: Vec<String> = counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
        summary.sort();
        println!("   outcomes: {}\n", summary.join(" "));
        if pass.contains("replayed") {
            sent_on_replay = counts.get("Sent").copied().unwrap_or(0);
        }
    }
    let accepted = provider.accepted();
    let mut keys: Vec<_> = accepted.iter().collect();
    keys.sort();
    println!("== what the provider accepted (deduplicated by Idempotency-Key)");
    for (key, n) in &keys {
        println!("   {key:<40} {n}x");
    }
    let wrong = keys.iter().filter(|(_, n)| **n != 1).count() + sent_on_replay;
    if sent_on_replay > 0 {
        eprintln!("the replay sent {sent_on_replay} notification(s) again");
    }
    Ok(wrong)
}
