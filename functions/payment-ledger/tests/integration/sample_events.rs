//! The payment ledger's sample events (functions/payment-ledger/events/) are
//! real SQS events: each file parses, and running them in order (as
//! `make demo` does) produces the outcome each one is meant to show, per
//! record, as listed in their scenarios.json.

use std::path::PathBuf;

use orders::testing::s;
use payment_ledger::testing::*;

use crate::sample_files::{check_files, load_in, scenarios_in};

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("events")
}

#[test]
fn every_ledger_event_file_is_listed_and_is_a_well_formed_sqs_event() {
    check_files(&events_dir());
}

#[tokio::test]
async fn each_ledger_sample_event_shows_its_outcome() {
    let dir = events_dir();
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
