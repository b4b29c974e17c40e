//! A verdict's metric labels checked against its variants: every label a
//! verdict can return must be in the function's EMF line (a zero included),
//! or its alarm has no data.

use lambda_idempotency::{RecordOutcome, Verdict, labels};

/// Asserts that `V::LABELS` is exactly `variants` (the verdict enum's
/// variant names, for example strum's `VariantNames::VARIANTS`: a verdict
/// holds only its own verdicts, the shared outcomes are
/// [`RecordOutcome`]'s), and that [`labels`] adds each shared outcome once.
/// `what` names the verdict in the failure message.
pub fn assert_labels_cover_variants<V: Verdict>(what: &str, variants: &[&str]) {
    assert_eq!(V::LABELS, variants, "{what}: LABELS");
    let all: Vec<&str> = labels::<V>().collect();
    for shared in RecordOutcome::<V>::SHARED_LABELS {
        assert!(all.contains(&shared), "{what}: {shared} missing");
        assert!(!V::LABELS.contains(&shared), "{what}: {shared} twice");
    }
    assert_eq!(
        all.len(),
        V::LABELS.len() + RecordOutcome::<V>::SHARED_LABELS.len(),
        "{what}: no label twice"
    );
}
