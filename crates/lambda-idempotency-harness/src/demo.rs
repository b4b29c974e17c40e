//! What the functions' demos (`make demo`:
//! functions/<name>/examples/<name>-demo.rs) share: a DynamoDB-compatible server in
//! the process, a client for it, and a folder of sample SQS events run
//! through a function's real handler, each record's outcome printed next to
//! the one its scenarios.json expects.

// A demo's output is the point.
#![allow(clippy::print_stdout)]

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use lambda_idempotency::Verdict;
use lambda_idempotency::engine::BatchReport;
use lambda_idempotency::engine::{SqsInput, StrictInput};
use lambda_idempotency::{BatchError, RecordOutcome};
use serde::Deserialize;

/// One sample event file and the outcome expected of each record.
#[derive(Deserialize)]
struct Scenario {
    file: String,
    title: String,
    expect: Vec<String>,
}

/// A local DynamoDB-compatible server (dynoxide, in this process, on a
/// free port of 127.0.0.1): its database (for its stream records), its
/// endpoint, and what stops the server.
pub async fn start_server() -> Result<
    (
        lambda_idempotency_testing::dynoxide::Database,
        String,
        tokio::task::AbortHandle,
    ),
    Box<dyn std::error::Error>,
> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let db = lambda_idempotency_testing::dynoxide::Database::memory()?;
    let server = tokio::spawn(lambda_idempotency_testing::dynoxide::server::serve_on(
        listener,
        db.clone(),
    ))
    .abort_handle();
    println!("dynoxide (DynamoDB-compatible) listening on {endpoint}");
    Ok((db, endpoint, server))
}

/// A client for `endpoint` with the functions' own retry and timeouts.
pub fn client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("local", "local", None, None, "demo"))
            .endpoint_url(endpoint)
            .retry_config(lambda_idempotency::dynamo::retry_config())
            .timeout_config(lambda_idempotency::dynamo::timeout_config())
            .build(),
    )
}

/// A deadline far enough for any demo batch.
pub fn deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(30)
}

/// Run every scenario of `dir` through `run` and print what happened.
/// Returns the number of records whose outcome differs from the expected one.
pub async fn run_scenarios<V: Verdict, F: std::fmt::Display>(
    dir: &std::path::Path,
    run: impl AsyncFn(&SqsEvent) -> (BatchReport<V, F>, Result<SqsBatchResponse, BatchError>),
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
        // Relative to the working directory (`make demo` runs in the
        // repository's root), as the reader would open it.
        let shown = std::env::current_dir()
            .ok()
            .and_then(|cwd| dir.strip_prefix(cwd).ok().map(|d| d.join(&sc.file)))
            .unwrap_or_else(|| dir.join(&sc.file));
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
pub fn unreadable(body: Option<&str>) -> String {
    match body.map(serde_json::from_str::<serde_json::Value>) {
        None => "(no body)",
        Some(Ok(_)) => "(JSON, but not a valid event)",
        Some(Err(_)) => "(not JSON)",
    }
    .to_owned()
}

/// The outcome's explanation without its label ("Early: <why>").
fn detail<V: Verdict, F: std::fmt::Display>(o: &RecordOutcome<V, F>) -> String {
    let text = o.to_string();
    text.split_once(": ")
        .map(|(_, d)| d.to_owned())
        .unwrap_or_default()
}
