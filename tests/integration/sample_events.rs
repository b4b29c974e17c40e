//! The sample events in events/ are real SQS events: each file parses, and
//! running them in order (as `make demo` does) produces the outcome each one
//! is meant to show, per record, as listed in events/scenarios.json.

use std::path::PathBuf;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_idempotency::{SqsInput, StrictInput};
use order_consumer::orders::domain::{Outcome, Status};
use order_consumer::orders::event::parse_body;
use serde::Deserialize;

use order_consumer::testing::*;

#[derive(Deserialize)]
struct Scenario {
    file: String,
    title: String,
    expect: Vec<String>,
}

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("events")
}

fn scenarios() -> Vec<Scenario> {
    scenarios_in(&events_dir())
}

fn scenarios_in(dir: &std::path::Path) -> Vec<Scenario> {
    let text = std::fs::read_to_string(dir.join("scenarios.json")).expect("scenarios.json");
    serde_json::from_str(&text).expect("scenarios.json parses")
}

pub fn load(file: &str) -> SqsEvent {
    load_in(&events_dir(), file)
}

fn load_in(dir: &std::path::Path, file: &str) -> SqsEvent {
    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    // The strict reader the functions use, not the lenient derived one.
    serde_json::from_str::<SqsInput>(&text)
        .unwrap_or_else(|e| panic!("{file} is not an SQS event: {e}"))
        .into_inner()
}

#[test]
fn every_event_file_is_listed_and_is_a_well_formed_sqs_event() {
    check_files(&events_dir());
    check_files(&events_dir().join("ledger"));
}

fn check_files(dir: &std::path::Path) {
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

#[tokio::test]
async fn each_sample_event_shows_its_outcome() {
    let db = TestDb::new().await;
    let c = db.consumer();
    for sc in scenarios() {
        let event = load(&sc.file);
        let (report, failed) = run(&c, &event).await;
        let got: Vec<&str> = report.outcomes().map(Outcome::label).collect();
        assert_eq!(got, sc.expect, "{}: {}", sc.file, sc.title);
        // The batch item failures are exactly the records not acknowledged.
        let expected_failed: Vec<String> = event
            .records
            .iter()
            .zip(&sc.expect)
            .filter(|(_, e)| !matches!(e.as_str(), "Applied" | "Duplicate" | "Stale" | "Rejected"))
            .map(|(r, _)| r.message_id.clone().unwrap())
            .collect();
        assert_eq!(failed, expected_failed, "{}", sc.file);
    }
    // Each order ends in the status its highest applied event leads to
    // (derived from the events and the transition table, so a new event
    // type or sample needs no list here).
    let mut want: std::collections::BTreeMap<String, (u64, Status)> = Default::default();
    for sc in scenarios() {
        for (record, expect) in load(&sc.file).records.iter().zip(&sc.expect) {
            if expect != "Applied" {
                continue;
            }
            let ev = parse_body(record.body.as_deref()).expect("an applied event parses");
            let entry = want
                .entry(ev.order_id.to_string())
                .or_insert((0, ev.kind().target()));
            if ev.seq.get() >= entry.0 {
                *entry = (ev.seq.get(), ev.kind().target());
            }
        }
    }
    assert!(want.len() >= 10, "the samples cover {} orders", want.len());
    for (order, (_, status)) in &want {
        assert_eq!(
            db.status(order).await.as_deref(),
            Some(status.as_str()),
            "{order}"
        );
    }
    assert_eq!(db.count_items().await, want.len());
}

#[tokio::test]
async fn each_ledger_sample_event_shows_its_outcome() {
    let dir = events_dir().join("ledger");
    let db = LedgerDb::new().await;
    let l = db.consumer();
    for sc in scenarios_in(&dir) {
        let event = load_in(&dir, &sc.file);
        let (got, failed) = run_ledger(&l, &event).await;
        assert_eq!(got, sc.expect, "{}: {}", sc.file, sc.title);
        let expected_failed: Vec<String> = event
            .records
            .iter()
            .zip(&sc.expect)
            .filter(|(_, e)| !matches!(e.as_str(), "Applied" | "Duplicate" | "Suspended"))
            .map(|(r, _)| r.message_id.clone().unwrap())
            .collect();
        assert_eq!(failed, expected_failed, "{}", sc.file);
    }
    // acct-1: +500000 -200000; acct-2: +120000 +5000; acct-3: +80000 -30000.
    assert_eq!(db.account("acct-1").await, Some((300_000, 2, "INR".into())));
    assert_eq!(db.account("acct-2").await, Some((125_000, 2, "INR".into())));
    assert_eq!(db.account("acct-3").await, Some((50_000, 2, "INR".into())));
    // Six entries, and the over-refund, the USD capture and its refund
    // parked once each (their redeliveries in 08 and 09 added nothing).
    for parked in [
        "suspense:refund:ref-5",
        "suspense:pay:pay-6",
        "suspense:refund:ref-9",
    ] {
        assert!(db.entry(parked).await.is_some(), "{parked} missing");
    }
    let refund = db.entry("suspense:refund:ref-9").await.expect("ref-9");
    assert_eq!(s(&refund, "suspense_reason"), "capture-parked");
    assert_eq!(s(&refund, "capture_suspense_entry"), "suspense:pay:pay-6");
    assert_eq!(db.entries().await.len(), 9);
}
