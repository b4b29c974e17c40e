//! A local DynamoDB-compatible server for the interactive loop (`make local`).
//!
//! `local_dynamodb serve`: dynoxide (in memory) on 127.0.0.1:$DYNAMODB_PORT
//! (default 8000), with the orders table ($TABLE_NAME, default `orders`)
//! and the other functions' tables ($LOCAL_TABLES: `name:hash-key` pairs
//! separated by spaces, which each function's functions/*/local.mk adds to)
//! created, until Ctrl-C or SIGTERM.
//! `local_dynamodb scan`: print the orders table of a running server.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::AttributeValue;

fn client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("local", "local", None, None, "local"))
            .endpoint_url(endpoint)
            .build(),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::var("DYNAMODB_PORT").unwrap_or_else(|_| "8000".into());
    let table = std::env::var("TABLE_NAME").unwrap_or_else(|_| "orders".into());
    let endpoint = format!("http://127.0.0.1:{port}");
    match std::env::args().nth(1).as_deref().unwrap_or("serve") {
        "serve" => {
            let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
            let db = orders::testing::dynoxide::Database::memory()?;
            let server = tokio::spawn(orders::testing::dynoxide::server::serve_on(listener, db));
            orders::testing::create_orders_table(&client(&endpoint), &table).await?;
            // The other functions' tables, so that `make invoke FUNCTION=...`
            // reaches a working function too. Expiry (the order API's TTL)
            // is checked in code, so a plain table serves locally.
            let extra = std::env::var("LOCAL_TABLES").unwrap_or_default();
            let mut names = vec![format!("`{table}`")];
            for spec in extra.split_whitespace() {
                let Some((name, key)) = spec.split_once(':') else {
                    return Err(format!("LOCAL_TABLES: `{spec}` is not name:hash-key").into());
                };
                orders::testing::create_table(&client(&endpoint), name, key).await?;
                names.push(format!("`{name}`"));
            }
            eprintln!(
                "local DynamoDB on {endpoint} with tables {}; Ctrl-C stops it",
                names.join(", ")
            );
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                r = server => r?,
            }
            Ok(())
        }
        "scan" => {
            let items = client(&endpoint)
                .scan()
                .table_name(&table)
                .send()
                .await?
                .items
                .unwrap_or_default();
            let mut rows: Vec<_> = items
                .iter()
                .map(|i| {
                    let get = |k: &str| match i.get(k) {
                        Some(AttributeValue::S(s)) | Some(AttributeValue::N(s)) => s.clone(),
                        Some(AttributeValue::L(l)) => l
                            .iter()
                            .filter_map(|v| v.as_s().ok().cloned())
                            .collect::<Vec<_>>()
                            .join(","),
                        _ => "-".into(),
                    };
                    (
                        get("order_id"),
                        get("status"),
                        get("last_event_seq"),
                        get("history"),
                    )
                })
                .collect();
            rows.sort();
            // Order ids from the order API are 36 characters long.
            let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(10);
            println!("{:<w$} {:<10} {:>4}  history", "order_id", "status", "seq");
            for (o, s, q, h) in rows {
                println!("{o:<w$} {s:<10} {q:>4}  {h}");
            }
            Ok(())
        }
        other => Err(format!("unknown command `{other}` (serve | scan)").into()),
    }
}
