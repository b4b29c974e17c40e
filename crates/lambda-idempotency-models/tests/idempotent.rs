//! The `Idempotent` model: holds at its bounds; each mutation caught.
use lambda_idempotency_models::idempotent::{CallSpec, IdempotentModel, Mutation};
use lambda_idempotency_models::trace::{assert_caught, assert_holds, deep};

fn model() -> IdempotentModel {
    if deep() {
        IdempotentModel::deep()
    } else {
        IdempotentModel::small()
    }
}

#[test]
fn holds() {
    let report = assert_holds(model());
    assert!(report.unique_states > 1000, "{report}");
}

/// Two calls (on two instances), each clock up to a tick (1 s, the
/// library's skew allowance) off: the three-call world with skew is the
/// deep check's.
fn skewed() -> IdempotentModel {
    let mut m = IdempotentModel {
        skew_ms: 1000,
        ..IdempotentModel::small()
    };
    if !deep() {
        m.calls.truncate(1);
        m.calls.push(CallSpec {
            instance: 1,
            payload: 0,
        });
    }
    m
}

#[test]
fn holds_with_clock_skew() {
    assert_holds(skewed());
}

#[test]
fn mutation_no_skew_allowance_is_caught() {
    let property =
        "body runs at most once per key while a completed record or a live lease holds it";
    let (len, history) = assert_caught(skewed().with(Mutation::NoSkewAllowance), property);
    println!("NoSkewAllowance caught by `{property}` in {len} steps:\n{history}");
}

fn caught(m: Mutation, property: &'static str) {
    let (len, history) = assert_caught(model().with(m), property);
    println!("{m:?} caught by `{property}` in {len} steps:\n{history}");
}

#[test]
fn mutation_own_claim_in_progress_is_caught() {
    caught(
        Mutation::OwnClaimInProgress,
        "no caller is told InProgress by its own claim",
    );
}

#[test]
fn mutation_cache_ignores_expiry_is_caught() {
    caught(
        Mutation::CacheIgnoresExpiry,
        "no expired record is served as completed",
    );
}

#[test]
fn mutation_no_release_on_failure_is_caught() {
    caught(
        Mutation::NoReleaseOnFailure,
        "a failed run gives its key back",
    );
}

#[test]
fn mutation_answer_before_completion_is_caught() {
    caught(
        Mutation::AnswerBeforeCompletion,
        "every output answered is the committed one",
    );
}

#[test]
fn mutation_take_over_live_lease_is_caught() {
    caught(
        Mutation::TakeOverLiveLease,
        "body runs at most once per key while a completed record or a live lease holds it",
    );
}
