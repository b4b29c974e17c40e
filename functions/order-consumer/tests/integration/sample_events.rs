//! The sample events in events/ are real SQS events: each file parses, and
//! running them in order (as `make demo` does) produces the outcome each one
//! is meant to show, per record, as listed in events/scenarios.json.

use std::path::PathBuf;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_idempotency::RecordOutcome;
use order_consumer::orders::domain::Status;
use order_consumer::orders::event::parse_body;

use order_consumer::testing::*;

use crate::sample_files::{Scenario, check_files, load_in, scenarios_in};

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../events")
}

fn scenarios() -> Vec<Scenario> {
    scenarios_in(&events_dir())
}

pub fn load(file: &str) -> SqsEvent {
    load_in(&events_dir(), file)
}

#[test]
fn every_event_file_is_listed_and_is_a_well_formed_sqs_event() {
    check_files(&events_dir());
}

#[tokio::test]
async fn each_sample_event_shows_its_outcome() {
    let db = TestDb::new().await;
    let c = db.consumer();
    for sc in scenarios() {
        let event = load(&sc.file);
        let (report, failed) = run(&c, &event).await;
        let got: Vec<&str> = report.outcomes().map(RecordOutcome::label).collect();
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
