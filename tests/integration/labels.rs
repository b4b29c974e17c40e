//! Every label a consumer's verdict can return is in its metrics' label
//! list (`Verdict::LABELS` plus the shared ones), so the EMF line reports
//! it (a zero included) and its alarm has data. The consumers derive
//! strum's `IntoStaticStr` (the label is the variant's name, the shared
//! outcomes' label through `#[strum(transparent)]`): its `VariantNames`,
//! less the variant holding the shared outcomes, must be exactly `LABELS`.

use lambda_idempotency::{Unsettled, labels};
use order_consumer::orders::domain::Outcome;
use order_consumer::testing::assert_labels_cover_variants;
use strum::VariantNames;

#[test]
fn the_order_consumers_labels_cover_its_verdicts() {
    assert_labels_cover_variants::<Outcome>("orders", Outcome::VARIANTS, "Unsettled");
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
