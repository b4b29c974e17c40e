//! A verdict's metric labels checked against its variants: every label a
//! verdict can return must be in the function's EMF line (a zero included),
//! or its alarm has no data.

use lambda_idempotency::{Unsettled, Verdict, labels};

/// Asserts that `O::LABELS` is exactly `variants` (the verdict enum's
/// variant names, for example strum's `VariantNames::VARIANTS`) without the
/// variant named `holder` that holds the shared [`Unsettled`] outcomes, and
/// that [`labels`] adds each shared outcome once. `what` names the verdict
/// in the failure message.
pub fn assert_labels_cover_variants<O: Verdict>(what: &str, variants: &[&str], holder: &str) {
    let own: Vec<&str> = variants.iter().copied().filter(|v| *v != holder).collect();
    assert_eq!(O::LABELS, own.as_slice(), "{what}: LABELS");
    let all: Vec<&str> = labels::<O>().collect();
    for shared in Unsettled::<()>::LABELS {
        assert!(all.contains(&shared), "{what}: {shared} missing");
    }
    assert_eq!(all.len(), O::LABELS.len() + 3, "{what}: no label twice");
}
