//! The payment ledger's part of `make demo`: a DynamoDB-compatible server in
//! this process, the ledger's two tables, and the function's real handler
//! (`LedgerFunction::handle_batch`, the code the Lambda binary runs) on each
//! sample event of functions/payment-ledger/events/ in scenarios.json
//! order, each record's outcome next to the expected one; then the accounts
//! and the ledger entries. Exits non-zero if any outcome differs.

use std::collections::HashMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency_harness::demo::{client, deadline, run_scenarios, start_server, unreadable};
use payment_ledger::LedgerConfig;
use payment_ledger::event as ledger_event;
use payment_ledger::store::{ACCOUNT_KEY, ENTRY_KEY};

const LEDGER: &str = "ledger";
const ACCOUNTS: &str = "accounts";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("\n==== the payment ledger: one TransactWriteItems per event ====\n");
    let (_db, endpoint, server) = start_server().await?;
    let client = client(&endpoint);
    orders::testing::create_table(&client, LEDGER, ENTRY_KEY).await?;
    orders::testing::create_table(&client, ACCOUNTS, ACCOUNT_KEY).await?;
    println!("created tables `{LEDGER}` and `{ACCOUNTS}`\n");
    let ledger_config = LedgerConfig::from_lookup(|k| match k {
        "LEDGER_TABLE" => Some(LEDGER.to_owned()),
        "ACCOUNTS_TABLE" => Some(ACCOUNTS.to_owned()),
        _ => None,
    })?;
    let ledger = payment_ledger::function(client.clone(), ledger_config)?;
    let mismatches = run_scenarios(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("events"),
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

    server.abort();
    if mismatches > 0 {
        eprintln!("\n{mismatches} record(s) did not show the expected outcome");
        std::process::exit(1);
    }
    println!("\nevery record showed its expected outcome");
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
