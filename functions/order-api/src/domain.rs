//! The order API's own policy, as pure functions: the owner mark of an
//! order, the outcome an answer counts under, and the problems only the
//! order API answers with. The idempotency policy itself (the key, the
//! caller's scope, the fingerprint, what a stored record means for a
//! repeat, the stored response) is the library's `http` layer and
//! `idempotency` store; their names are re-exported here.

pub use lambda_idempotency::http::{Problem, StoredResponse, record_key};
pub use lambda_idempotency::idempotency::fingerprint;
use lambda_idempotency::idempotency::hashed_key;

use crate::event::Scope;

/// The `type` prefix of every problem the API answers with.
pub const PROBLEM_PREFIX: &str = "urn:order-api:problem:";

/// The owner mark an order placed by `scope` carries (the order item's
/// `owner` attribute): a hash of the scope, so that `GET` can tell whether
/// the caller placed the order while the orders table (its stream, its
/// backups, the notifier's input) never holds the principal itself.
/// Domain-separated from [`record_key`] by its first part.
pub fn owner_of(scope: &Scope) -> String {
    let mut parts = vec!["owner"];
    parts.extend(scope.parts());
    hashed_key(&parts)
}

/// What one request came to: the EMF metric it is counted under and the
/// `outcome` key of its log line. Read off the answer itself, so the count
/// can never disagree with what the client was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum Outcome {
    /// 201, first time: an order was placed.
    Created,
    /// 201 replayed for a repeat of a completed request.
    Replayed,
    /// 200: `GET /orders/{orderId}`.
    Shown,
    /// 422: the key was used with another body.
    KeyReused,
    /// 409: the key's first request is still executing (or its lease runs).
    InProgress,
    /// 400 or 415: a malformed key, content type or body.
    Invalid,
    /// 403: an authorizer is configured (`API_AUTH`) but the request
    /// carries no principal: a route is not behind it.
    Forbidden,
    /// 404 or 405: no such order, route or method.
    NotFound,
    /// 503: DynamoDB did not confirm in time, or throttled.
    Unavailable,
    /// 500 (or any other status): a deployment problem or a corrupt record.
    Internal,
}

impl Outcome {
    /// The outcome of an answer with `status`; `replayed` when it carries
    /// `Idempotent-Replayed: true`.
    pub fn of(status: u16, replayed: bool) -> Self {
        match status {
            201 if replayed => Outcome::Replayed,
            201 => Outcome::Created,
            200 => Outcome::Shown,
            422 => Outcome::KeyReused,
            409 => Outcome::InProgress,
            400 | 415 => Outcome::Invalid,
            403 => Outcome::Forbidden,
            404 | 405 => Outcome::NotFound,
            503 => Outcome::Unavailable,
            _ => Outcome::Internal,
        }
    }

    /// Its metric name (the variant's name).
    pub fn label(self) -> &'static str {
        self.into()
    }
}

/// Every kind of problem the API answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// 400: no usable Idempotency-Key.
    InvalidIdempotencyKey,
    /// 415: the body is not declared as JSON.
    UnsupportedMediaType,
    /// 400: the body is not a valid order.
    InvalidBody,
    /// 422: the key was used with another body.
    KeyReused,
    /// 409: a request with this key is executing.
    RequestInProgress,
    /// 503: DynamoDB did not confirm; retry with the same key.
    Unavailable,
    /// 500: a deployment or data problem retrying will not fix.
    Internal,
    /// 500: the order was placed, but its answer is too large to keep for
    /// its key (the layer's own; an order's answer is a few hundred bytes).
    ResponseTooLarge,
    /// 403: no principal under a configured authorizer.
    Forbidden,
    /// 404: no such order (or not the caller's), or no such route.
    NotFound,
    /// 405: the route exists, the method does not.
    MethodNotAllowed,
}

impl ProblemKind {
    /// (status, slug, title).
    pub fn describe(self) -> (u16, &'static str, &'static str) {
        match self {
            ProblemKind::InvalidIdempotencyKey => (
                400,
                "invalid-idempotency-key",
                "The Idempotency-Key header is missing or malformed",
            ),
            ProblemKind::UnsupportedMediaType => (
                415,
                "unsupported-media-type",
                "The request body must be application/json",
            ),
            ProblemKind::InvalidBody => {
                (400, "invalid-body", "The request body is not a valid order")
            }
            ProblemKind::KeyReused => (
                422,
                "idempotency-key-reused",
                "The Idempotency-Key was already used with a different request body",
            ),
            ProblemKind::RequestInProgress => (
                409,
                "request-in-progress",
                "A request with this Idempotency-Key is still being processed",
            ),
            ProblemKind::Unavailable => (
                503,
                "service-unavailable",
                "The order could not be stored now; retry with the same Idempotency-Key",
            ),
            ProblemKind::Internal => (500, "internal-error", "The request could not be processed"),
            ProblemKind::ResponseTooLarge => (
                500,
                "response-too-large",
                "The request was processed, but its response is too large to keep for its Idempotency-Key",
            ),
            ProblemKind::Forbidden => (403, "forbidden", "The caller could not be identified"),
            ProblemKind::NotFound => (404, "not-found", "No such resource"),
            ProblemKind::MethodNotAllowed => (405, "method-not-allowed", "Method not allowed"),
        }
    }

    /// This problem with `detail`.
    pub fn with(self, detail: impl Into<String>) -> Problem {
        let (status, slug, title) = self.describe();
        Problem::new(format!("{PROBLEM_PREFIX}{slug}"), status, title, detail)
    }
}

impl From<lambda_idempotency::http::ProblemKind> for ProblemKind {
    /// The order API's kind for each of the layer's problems: the same
    /// type, the API's title.
    fn from(kind: lambda_idempotency::http::ProblemKind) -> Self {
        use lambda_idempotency::http::ProblemKind as Layer;
        match kind {
            Layer::InvalidIdempotencyKey => ProblemKind::InvalidIdempotencyKey,
            Layer::KeyReused => ProblemKind::KeyReused,
            Layer::RequestInProgress => ProblemKind::RequestInProgress,
            Layer::Forbidden => ProblemKind::Forbidden,
            Layer::Unavailable => ProblemKind::Unavailable,
            Layer::Internal => ProblemKind::Internal,
            Layer::ResponseTooLarge => ProblemKind::ResponseTooLarge,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn the_fingerprint_ignores_key_order_and_whitespace_only() {
        let a: Value = serde_json::from_str(
            r#"{"customerId":"c","amount":5,"currency":"INR","x":{"b":1,"a":[1,2]}}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(" {\n \"x\": {\"a\": [1, 2], \"b\": 1},\"currency\":\"INR\", \"amount\": 5, \"customerId\": \"c\"}").unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        for other in [
            json!({"customerId":"c","amount":6,"currency":"INR","x":{"b":1,"a":[1,2]}}),
            json!({"customerId":"c","amount":5,"currency":"INR","x":{"b":1,"a":[2,1]}}),
            json!({"customerId":"c","amount":5,"currency":"INR"}),
            json!({"customerId":"c","amount":"5","currency":"INR","x":{"b":1,"a":[1,2]}}),
        ] {
            assert_ne!(fingerprint(&a), fingerprint(&other), "{other}");
        }
    }

    /// The record keys' own scoping is the library's test
    /// (`http::scope`'s `record_keys_are_scoped_by_caller`); what the order
    /// API adds is the owner mark written on an order, which must never be
    /// a record key, nor another caller's mark.
    #[test]
    fn owner_marks_are_never_record_keys() {
        let scopes = [
            Scope::Anonymous,
            Scope::Iam("alice".into()),
            Scope::Lambda("alice".into()),
            Scope::Jwt {
                issuer: "i".into(),
                subject: "alice".into(),
            },
        ];
        let mut all: Vec<String> = scopes.iter().map(owner_of).collect();
        all.extend(scopes.iter().map(|s| record_key(s, "k")));
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn problems_name_their_status_and_retry() {
        let p = ProblemKind::RequestInProgress.with("x").retry_after(0);
        assert_eq!((p.status, p.retry_after), (409, Some(1)));
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["type"], "urn:order-api:problem:request-in-progress");
        assert!(v.get("retry_after").is_none());
    }

    #[test]
    fn every_answer_counts_under_one_outcome() {
        let cases = [
            ((201, false), "Created"),
            ((201, true), "Replayed"),
            ((200, false), "Shown"),
            ((422, false), "KeyReused"),
            ((409, false), "InProgress"),
            ((400, false), "Invalid"),
            ((415, false), "Invalid"),
            ((403, false), "Forbidden"),
            ((404, false), "NotFound"),
            ((405, false), "NotFound"),
            ((503, false), "Unavailable"),
            ((500, false), "Internal"),
            ((502, false), "Internal"),
        ];
        for ((status, replayed), want) in cases {
            assert_eq!(Outcome::of(status, replayed).label(), want, "{status}");
        }
        // Every metric the template's dashboard and alarms may name.
        assert_eq!(
            <Outcome as strum::VariantNames>::VARIANTS,
            [
                "Created",
                "Replayed",
                "Shown",
                "KeyReused",
                "InProgress",
                "Invalid",
                "Forbidden",
                "NotFound",
                "Unavailable",
                "Internal"
            ]
        );
    }
}
