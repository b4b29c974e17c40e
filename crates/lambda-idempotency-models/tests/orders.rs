//! The order consumer's model: holds in both worlds; each mutation caught.
use lambda_idempotency_models::orders::{Mutation, OrdersModel};
use lambda_idempotency_models::trace::{assert_caught, assert_holds, deep};

#[test]
fn holds_for_legal_transitions() {
    assert_holds(if deep() {
        OrdersModel::deep()
    } else {
        OrdersModel::legal()
    });
}

#[test]
fn holds_with_a_rejection_in_turn() {
    assert_holds(OrdersModel::rejection());
}

fn caught(m: OrdersModel, property: &'static str) {
    let mutation = m.mutation;
    let (len, history) = assert_caught(m, property);
    println!("{mutation:?} caught by `{property}` in {len} steps:\n{history}");
}

#[test]
fn mutation_reject_at_gap_is_caught() {
    caught(
        OrdersModel::legal().with(Mutation::RejectAtGap),
        // The rejection is recorded (its write spends seq 3 over seq 2),
        // so the item is what depends on the order of delivery.
        "the final item is the same for every delivery order and duplication",
    );
}

#[test]
fn mutation_ack_failures_is_caught() {
    caught(
        OrdersModel::legal().with(Mutation::AckFailures),
        "an acknowledged event is applied or durably recorded",
    );
}

#[test]
fn mutation_no_rejection_record_is_caught() {
    caught(
        OrdersModel::rejection().with(Mutation::NoRejectionRecord),
        "an acknowledged event is applied or durably recorded",
    );
}
