//! `make demo`: every sample batch in events/ (as listed in
//! events/scenarios.json) through the function against a local DynamoDB
//! (in-process), one line per record, then the table.

use lambda_idempotency::engine::SqsEvent;
use lambda_idempotency::{Function, RecordOutcome, Settings};
use lambda_idempotency_testing::{client_for, create_table, far_deadline, failed_ids, start_dynoxide};
use {{ cookiecutter.__crate }}::{KEY, NAME, {{ cookiecutter.__entity_type }}Handler, parse};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = client_for(&start_dynoxide().await);
    create_table(&client, "{{ cookiecutter.entity }}", KEY).await?;
    let settings = Settings::from_lookup(&|_| None, NAME, "{{ cookiecutter.project_name }}")?;
    let f = Function::builder({{ cookiecutter.__entity_type }}Handler { client: client.clone(), table: "{{ cookiecutter.entity }}".into() })
        .name(NAME)
        .settings(settings)
        .build()?;

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("events");
    let scenarios: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("scenarios.json"))?)?;
    for s in scenarios.as_array().into_iter().flatten() {
        let file = s["file"].as_str().unwrap_or_default();
        println!("\n{file}: {}", s["what"].as_str().unwrap_or_default());
        let event: SqsEvent = serde_json::from_str(&std::fs::read_to_string(dir.join(file))?)?;
        let (report, answer) = f.handle_batch(&event, far_deadline()).await;
        for (message, outcome) in event.records.iter().zip(report.outcomes()) {
            let what = match parse(message.body.as_deref()) {
                Ok(e) => format!("{:<28} {:<12} seq {}", e.kind.name(), e.{{ cookiecutter.__id_attr }}, e.seq),
                Err(_) => "(not an event)".to_owned(),
            };
            let detail = match outcome {
                RecordOutcome::Invalid(why) => format!(": {why}"),
                RecordOutcome::Failed(why) => format!(": {why}"),
                _ => String::new(),
            };
            println!("  {what:<50} -> {}{detail}", outcome.label());
        }
        match answer {
            Ok(answer) if answer.batch_item_failures.is_empty() => println!("  answer: every message deleted"),
            Ok(answer) => println!("  answer: {} returned to the queue", failed_ids(&answer).len()),
            Err(e) => println!("  answer: the invocation failed ({e})"),
        }
    }

    println!("\nthe table `{{ cookiecutter.entity }}` now:");
    let items = client.scan().table_name("{{ cookiecutter.entity }}").send().await?.items.unwrap_or_default();
    let text = |i: &lambda_idempotency::dynamo::Item, k: &str| {
        i.get(k).and_then(|v| v.as_s().or(v.as_n()).ok()).cloned().unwrap_or_else(|| "-".into())
    };
    let mut rows: Vec<_> = items.iter().map(|i| (text(i, KEY), text(i, "status"), text(i, "seq"), text(i, "rejected_count"))).collect();
    rows.sort();
    let w = rows.iter().map(|r| r.0.len()).chain([KEY.len()]).max().unwrap_or(0);
    println!("  {:<w$} {:<16} {:>4} {:>9}", KEY, "status", "seq", "rejected");
    for (id, status, seq, rejected) in rows {
        println!("  {id:<w$} {status:<16} {seq:>4} {rejected:>9}");
    }
    Ok(())
}
