//! `make local`'s DynamoDB: `local_dynamodb serve` runs dynoxide (in memory)
//! on 127.0.0.1:$DYNAMODB_PORT (default 8000) with the table $TABLE_NAME
//! (default `{{ cookiecutter.entity }}`) until Ctrl-C; `local_dynamodb scan` prints that table.
{%- if cookiecutter.include_http_api == 'yes' %}
//! `serve` also makes the HTTP API's idempotency table $IDEMPOTENCY_TABLE
//! (default `{{ cookiecutter.entity }}_keys`).
{%- endif %}

use lambda_idempotency_testing::{client_for, create_table, dynoxide};
use {{ cookiecutter.__crate }}::KEY;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::var("DYNAMODB_PORT").unwrap_or_else(|_| "8000".into());
    let table = std::env::var("TABLE_NAME").unwrap_or_else(|_| "{{ cookiecutter.entity }}".into());
    let endpoint = format!("http://127.0.0.1:{port}");
    match std::env::args().nth(1).as_deref().unwrap_or("serve") {
        "serve" => {
            let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
            let server = tokio::spawn(dynoxide::server::serve_on(listener, dynoxide::Database::memory()?));
            create_table(&client_for(&endpoint), &table, KEY).await?;
{%- if cookiecutter.include_http_api == 'yes' %}
            let keys = std::env::var("IDEMPOTENCY_TABLE").unwrap_or_else(|_| "{{ cookiecutter.entity }}_keys".into());
            create_table(&client_for(&endpoint), &keys, "id").await?;
{%- endif %}
            eprintln!("local DynamoDB on {endpoint} with table `{table}`; Ctrl-C stops it");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                r = server => r?,
            }
        }
        "scan" => {
            let items = client_for(&endpoint).scan().table_name(&table).send().await?.items.unwrap_or_default();
            for item in items {
                let mut fields: Vec<String> = item
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_s().or(v.as_n()).cloned().unwrap_or_else(|_| format!("{v:?}"))))
                    .collect();
                fields.sort();
                println!("{}", fields.join("  "));
            }
        }
        other => return Err(format!("unknown command `{other}` (serve | scan)").into()),
    }
    Ok(())
}
