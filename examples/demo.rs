//! `make demo`: the whole story on a laptop, no AWS account, no Docker.
//!
//! Starts a DynamoDB-compatible server (dynoxide, in this process, on a free
//! port of 127.0.0.1), creates the orders table, and runs the function's real
//! handler ([`OrderFunction::handle_batch`], the same code the Lambda binary runs,
//! with the same SDK client talking HTTP) on each sample event in
//! events/scenarios.json order. For every record it prints the outcome next to
//! the outcome the scenario expects, then the batch item failures, and at the
//! end the orders table. Then the same for the payment ledger
//! (`LedgerFunction::handle_batch` on events/ledger/), ending with the
//! accounts and the ledger entries. Finally it feeds the orders table's real
//! stream (recorded by dynoxide during the order scenarios) to the order
//! notifier, with a local provider that deduplicates by Idempotency-Key, and
//! then replays the whole stream: each notification is sent once. Exits
//! non-zero if any outcome differs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::Verdict;
use lambda_idempotency::{BatchError, BatchReport};
use lambda_idempotency::{SqsInput, StrictInput};
use order_consumer::ledger::LedgerConfig;
use order_consumer::ledger::event as ledger_event;
use order_consumer::ledger::store::{ACCOUNT_KEY, ENTRY_KEY};
use order_consumer::notifier::NotifierConfig;
use order_consumer::orders::OrderConfig;
use order_consumer::orders::event as order_event;
use order_consumer::orders::store::OrderStore;
use serde::Deserialize;

use order_consumer::testing::{provider, stream_records};

#[derive(Deserialize)]
struct Scenario {
    file: String,
    title: String,
    expect: Vec<String>,
}

const TABLE: &str = "orders";
const NOTIFICATIONS: &str = "notifications";
const LEDGER: &str = "ledger";
const ACCOUNTS: &str = "accounts";

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

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let db = order_consumer::testing::dynoxide::Database::memory()?;
    let server = tokio::spawn(order_consumer::testing::dynoxide::server::serve_on(
        listener,
        db.clone(),
    ));
    println!("dynoxide (DynamoDB-compatible) listening on {endpoint}");

    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("local", "local", None, None, "demo"))
            .endpoint_url(&endpoint)
            .retry_config(lambda_idempotency::dynamo::retry_config())
            .timeout_config(lambda_idempotency::dynamo::timeout_config())
            .build(),
    );
    // With its stream, as in template.yaml: the order notifier reads it below.
    order_consumer::testing::create_streamed_orders_table(&client, TABLE).await?;
    println!("created table `{TABLE}`\n");

    let config = OrderConfig::from_lookup(|k| (k == "TABLE_NAME").then(|| TABLE.to_owned()))?;
    let consumer =
        order_consumer::orders::function(OrderStore::new(client.clone(), TABLE), config)?;

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("events");
    let deadline = || tokio::time::Instant::now() + Duration::from_secs(30);
    let mut mismatches = run_scenarios(
        &dir,
        async |event| consumer.handle_batch(event, deadline()).await,
        |body| match order_event::parse_body(body) {
            Ok(ev) => format!("{} {} seq {}", ev.order_id, ev.kind(), ev.seq.get()),
            Err(_) => unreadable(body),
        },
    )
    .await?;
    print_table(&client).await?;

    println!("\n==== the payment ledger: one TransactWriteItems per event ====\n");
    order_consumer::testing::create_table(&client, LEDGER, ENTRY_KEY).await?;
    order_consumer::testing::create_table(&client, ACCOUNTS, ACCOUNT_KEY).await?;
    println!("created tables `{LEDGER}` and `{ACCOUNTS}`\n");
    let ledger_config = LedgerConfig::from_lookup(|k| match k {
        "LEDGER_TABLE" => Some(LEDGER.to_owned()),
        "ACCOUNTS_TABLE" => Some(ACCOUNTS.to_owned()),
        _ => None,
    })?;
    let ledger = order_consumer::ledger::function(client.clone(), ledger_config)?;
    mismatches += run_scenarios(
        &dir.join("ledger"),
        async |event| ledger.handle_batch(event, deadline()).await,
        |body| match ledger_event::parse_body(body) {
            Ok(ev) => format!(
                "{} {} {} {}",
                ev.account_id,
                ev.entry_id(),
                ev.signed_amount(),
                ev.currency.as_str()
            ),
            Err(_) => unreadable(body),
        },
    )
    .await?;
    print_ledger(&client).await?;

    println!(
        "\n==== the order notifier: the orders table's stream to customer notifications ====\n"
    );
    mismatches += notify(&client, &db).await?;

    server.abort();
    if mismatches > 0 {
        eprintln!("\n{mismatches} record(s) did not show the expected outcome");
        std::process::exit(1);
    }
    println!("\nevery record showed its expected outcome");
    Ok(())
}

/// Run every scenario of `dir` through `run` and print what happened.
/// Returns the number of records whose outcome differs from the expected one.
async fn run_scenarios<O: Verdict>(
    dir: &std::path::Path,
    run: impl AsyncFn(&SqsEvent) -> (BatchReport<O>, Result<SqsBatchResponse, BatchError>),
    describe: impl Fn(Option<&str>) -> String,
) -> Result<usize, Box<dyn std::error::Error>> {
    let scenarios: Vec<Scenario> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scenarios.json"))?)?;
    let mut mismatches = 0;
    for sc in &scenarios {
        // The strict reader the functions use.
        let event: SqsEvent =
            serde_json::from_str::<SqsInput>(&std::fs::read_to_string(dir.join(&sc.file))?)?
                .into_inner();
        let shown = dir
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(dir)
            .join(&sc.file);
        println!("== {}  ({})", shown.display(), sc.title);
        let (report, response) = run(&event).await;
        if sc.expect.len() != event.records.len() {
            mismatches += 1;
            println!(
                "   BAD {}: {} records but {} expected outcomes in scenarios.json",
                sc.file,
                event.records.len(),
                sc.expect.len()
            );
        }
        for (n, ((record, rep), expected)) in event
            .records
            .iter()
            .zip(&report.records)
            .zip(&sc.expect)
            .enumerate()
        {
            let what = describe(record.body.as_deref());
            let got = rep.outcome.label();
            let ok = got == expected;
            if !ok {
                mismatches += 1;
            }
            let line = format!(
                "   {} #{:<2} {:<34} {:<12} expected {:<12} {}",
                if ok { "ok " } else { "BAD" },
                n + 1,
                what,
                got,
                expected,
                detail(&rep.outcome),
            );
            println!("{}", line.trim_end());
        }
        let counts = report.counts();
        let nonzero: Vec<String> = counts
            .0
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        println!("   metrics (EMF line in Lambda): {}", nonzero.join(" "));
        match response {
            Ok(r) if r.batch_item_failures.is_empty() => {
                println!("   batchItemFailures: none, SQS deletes every message\n")
            }
            Ok(r) => {
                // By the record numbers above: a messageId means nothing
                // to the reader of this table.
                let ids: Vec<String> = r
                    .batch_item_failures
                    .iter()
                    .map(|f| {
                        event
                            .records
                            .iter()
                            .position(|rec| rec.message_id.as_deref() == Some(&*f.item_identifier))
                            .map_or_else(|| f.item_identifier.clone(), |i| format!("#{}", i + 1))
                    })
                    .collect();
                println!(
                    "   batchItemFailures: [{}], SQS redelivers these\n",
                    ids.join(", ")
                );
            }
            Err(e) => println!("   invocation error: {e}\n"),
        }
    }
    Ok(mismatches)
}

/// How a body the parser refused looks: "not JSON" and "a field is
/// missing" are different problems (the reason itself is in the detail).
fn unreadable(body: Option<&str>) -> String {
    match body.map(serde_json::from_str::<serde_json::Value>) {
        None => "(no body)",
        Some(Ok(_)) => "(JSON, but not a valid event)",
        Some(Err(_)) => "(not JSON)",
    }
    .to_owned()
}

/// The outcome's explanation without its label ("Early: <why>").
fn detail<O: Verdict>(o: &O) -> String {
    let text = o.to_string();
    text.split_once(": ")
        .map(|(_, d)| d.to_owned())
        .unwrap_or_default()
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

async fn print_ledger(client: &aws_sdk_dynamodb::Client) -> Result<(), Box<dyn std::error::Error>> {
    let get = |i: &HashMap<String, AttributeValue>, k: &str| match i.get(k) {
        Some(AttributeValue::S(s)) | Some(AttributeValue::N(s)) => s.clone(),
        _ => "-".to_owned(),
    };
    let scan = async |table: &str, key: &str| -> Result<_, Box<dyn std::error::Error>> {
        let mut items = client
            .scan()
            .table_name(table)
            .send()
            .await?
            .items
            .unwrap_or_default();
        items.sort_by_key(|i| get(i, key));
        Ok(items)
    };
    println!("== final `{ACCOUNTS}` table");
    println!(
        "   {:<8} {:>10} {:<8} {:>7}",
        "account", "balance", "currency", "entries"
    );
    for i in scan(ACCOUNTS, ACCOUNT_KEY).await? {
        println!(
            "   {:<8} {:>10} {:<8} {:>7}",
            get(&i, "account_id"),
            get(&i, "balance"),
            get(&i, "currency"),
            get(&i, "entry_count")
        );
    }
    // Suspense entries (`suspense:...`) hold events that could not be
    // posted: their amount moved no balance, their reason says why.
    println!("== final `{LEDGER}` table");
    println!(
        "   {:<22} {:<8} {:>10} {:>10} {:<17}",
        "entry", "account", "amount", "refundable", "suspense reason"
    );
    for i in scan(LEDGER, ENTRY_KEY).await? {
        println!(
            "   {:<22} {:<8} {:>10} {:>10} {:<17}",
            get(&i, "entry_id"),
            get(&i, "account_id"),
            get(&i, "amount"),
            get(&i, "refundable"),
            get(&i, "suspense_reason")
        );
    }
    Ok(())
}

/// The orders stream through the notifier, twice (the second time as a
/// replay): returns the number of notifications that were not delivered
/// exactly once.
async fn notify(
    client: &aws_sdk_dynamodb::Client,
    db: &order_consumer::testing::dynoxide::Database,
) -> Result<usize, Box<dyn std::error::Error>> {
    order_consumer::testing::create_table(
        client,
        NOTIFICATIONS,
        order_consumer::notifier::store::KEY,
    )
    .await?;
    let provider = provider::Provider::start().await;
    let config = NotifierConfig::from_lookup(|k| match k {
        "NOTIFICATIONS_TABLE" => Some(NOTIFICATIONS.to_owned()),
        "NOTIFY_WEBHOOK_URL" => Some(provider.url.clone()),
        _ => None,
    })?;
    let webhook_url = order_consumer::notifier::url::webhook_url(&config.webhook).await?;
    let notifier = order_consumer::notifier::function(client.clone(), config, &webhook_url)?;
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
