//! The HTTP layer's model: holds in both worlds; each mutation caught.
use lambda_idempotency_models::http::{HttpModel, Mutation};
use lambda_idempotency_models::trace::{assert_caught, assert_holds, deep};

#[test]
fn holds_across_principals() {
    let m = if deep() {
        HttpModel::deep()
    } else {
        HttpModel::principals()
    };
    assert_holds(m);
}

#[test]
fn holds_for_a_reused_key() {
    assert_holds(HttpModel::reuse());
}

fn caught(m: HttpModel, property: &'static str) {
    let mutation = m.mutation;
    let (len, history) = assert_caught(m, property);
    println!("{mutation:?} caught by `{property}` in {len} steps:\n{history}");
}

#[test]
fn mutation_own_409_is_caught() {
    caught(
        HttpModel::principals().with(Mutation::Own409),
        "no request is answered 409 by its own claim",
    );
}

#[test]
fn mutation_scope_without_principal_is_caught() {
    caught(
        HttpModel::principals().with(Mutation::ScopeIgnoresPrincipal),
        "another principal never receives it",
    );
}

#[test]
fn mutation_no_route_check_is_caught() {
    caught(
        HttpModel::reuse().with(Mutation::NoRouteCheck),
        "a key reused with another body or route is never replayed",
    );
}

#[test]
fn mutation_store_every_status_is_caught() {
    caught(
        HttpModel::principals().with(Mutation::StoreEveryStatus),
        "no 5xx or 429 is replayed",
    );
}
