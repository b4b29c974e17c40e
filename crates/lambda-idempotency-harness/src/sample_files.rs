//! A function's folder of sample SQS events with its scenarios.json,
//! checked and loaded with the strict reader the functions use (the
//! functions' sample-event tests).

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_idempotency::engine::{SqsInput, StrictInput};
use serde::Deserialize;

/// One sample event file and the outcome of each of its records, in order.
#[derive(Deserialize)]
pub struct Scenario {
    pub file: String,
    pub title: String,
    pub expect: Vec<String>,
}

pub fn scenarios_in(dir: &std::path::Path) -> Vec<Scenario> {
    let text = std::fs::read_to_string(dir.join("scenarios.json")).expect("scenarios.json");
    serde_json::from_str(&text).expect("scenarios.json parses")
}

pub fn load_in(dir: &std::path::Path, file: &str) -> SqsEvent {
    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    // The strict reader the functions use, not the lenient derived one.
    serde_json::from_str::<SqsInput>(&text)
        .unwrap_or_else(|e| panic!("{file} is not an SQS event: {e}"))
        .into_inner()
}

pub fn check_files(dir: &std::path::Path) {
    let listed: Vec<String> = scenarios_in(dir).into_iter().map(|s| s.file).collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n != "scenarios.json")
        .collect();
    on_disk.sort();
    assert_eq!(
        listed, on_disk,
        "every sample event has a scenario, in file order"
    );
    for file in &listed {
        let event = load_in(dir, file);
        assert!(!event.records.is_empty(), "{file}");
        for r in &event.records {
            let body = r.body.as_deref().expect("body");
            assert!(
                r.message_id.as_deref().is_some_and(|m| !m.is_empty()),
                "{file}: messageId"
            );
            assert!(r.receipt_handle.is_some(), "{file}: receiptHandle");
            assert_eq!(r.event_source.as_deref(), Some("aws:sqs"), "{file}");
            assert!(
                r.event_source_arn
                    .as_deref()
                    .is_some_and(|a| a.starts_with("arn:aws:sqs:")),
                "{file}"
            );
            assert!(r.aws_region.is_some(), "{file}");
            assert!(
                r.attributes.contains_key("ApproximateReceiveCount"),
                "{file}"
            );
            // SQS's md5OfBody is the hex MD5 of the body's UTF-8 bytes.
            assert_eq!(
                r.md5_of_body.as_deref(),
                Some(format!("{:x}", md5::compute(body.as_bytes())).as_str()),
                "{file}: md5OfBody"
            );
        }
    }
}
