//! Every label a consumer's record can get is in its metrics' label list
//! (`Verdict::LABELS` plus the shared ones), so the EMF line reports it (a
//! zero included) and its alarm has data. The consumers derive strum's
//! `IntoStaticStr` (the label is the variant's name): its `VariantNames`
//! must be exactly `LABELS`, the verdict enum holding only its own verdicts.

use lambda_idempotency::{RecordOutcome, labels};
use order_consumer::orders::domain::Outcome;
use order_consumer::testing::assert_labels_cover_variants;
use strum::VariantNames;

#[test]
fn the_order_consumers_labels_cover_its_verdicts() {
    assert_labels_cover_variants::<Outcome>("orders", Outcome::VARIANTS);
}

#[test]
fn the_shared_outcomes_label_themselves() {
    use lambda_idempotency::{Skip, StoreError};
    let failed = RecordOutcome::<Outcome>::Failed(StoreError::Timeout);
    assert_eq!(failed.label(), "Failed");
    assert_eq!(
        RecordOutcome::<Outcome>::NotAttempted(Skip::Deadline).label(),
        "NotAttempted"
    );
    assert!(labels::<Outcome>().any(|l| l == failed.label()));
}
