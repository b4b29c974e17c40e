//! Every label a consumer's verdict can return is in its metrics' label
//! list (`Verdict::LABELS` plus the shared ones), so the EMF line reports
//! it (a zero included) and its alarm has data. The consumers derive
//! strum's `IntoStaticStr` (the label is the variant's name, the shared
//! outcomes' label through `#[strum(transparent)]`): its `VariantNames`,
//! less the variant holding the shared outcomes, must be exactly `LABELS`.

use lambda_idempotency::{Unsettled, Verdict, labels};
use order_consumer::ledger::domain::LedgerOutcome;
use order_consumer::notifier::domain::NotifyOutcome;
use order_consumer::orders::domain::Outcome;

fn own_variants<O: strum::VariantNames>() -> Vec<&'static str> {
    O::VARIANTS
        .iter()
        .copied()
        .filter(|v| *v != "Unsettled")
        .collect()
}

fn check<O: Verdict + strum::VariantNames>(what: &str) {
    assert_eq!(O::LABELS, own_variants::<O>().as_slice(), "{what}: LABELS");
    let all: Vec<&str> = labels::<O>().collect();
    for shared in Unsettled::<()>::LABELS {
        assert!(all.contains(&shared), "{what}: {shared} missing");
    }
    assert_eq!(all.len(), O::LABELS.len() + 3, "{what}: no label twice");
}

#[test]
fn every_consumers_labels_cover_its_verdicts() {
    check::<Outcome>("orders");
    check::<LedgerOutcome>("ledger");
    check::<NotifyOutcome>("notifier");
}

#[test]
fn the_shared_outcomes_label_themselves() {
    use lambda_idempotency::{Skip, StoreError};
    let failed = Outcome::from(Unsettled::Failed(StoreError::Timeout));
    assert_eq!(failed.label(), "Failed");
    assert_eq!(
        Outcome::from(Unsettled::NotAttempted(Skip::Deadline)).label(),
        "NotAttempted"
    );
    assert!(labels::<Outcome>().any(|l| l == failed.label()));
}
