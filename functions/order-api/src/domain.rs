//! The idempotency policy, as pure functions: the request's fingerprint,
//! the record key of (caller, key), what a stored record means for a new
//! request with the same key ([`classify`]), and the problem+json answers.
//!
//! No SDK types and no I/O: the store hands a refused claim's stored record
//! to [`classify`], which decides the answer.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::event::Scope;

/// SHA-256 of the body's canonical JSON (object keys sorted at every
/// level, no insignificant whitespace), in hex: two bodies that differ only
/// in key order or whitespace are the same request.
pub fn fingerprint(body: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(body, &mut canonical);
    hex(&Sha256::digest(canonical.as_bytes()))
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(k) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        // Scalars print in serde_json's one compact form.
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The idempotency table's key for `key` used by `scope`: a hash of both,
/// length-prefixed, so that every caller has its own key space, the item
/// key is bounded whatever the scope's length, and the client's key is not
/// stored in the clear.
pub fn record_key(scope: &Scope, key: &str) -> String {
    let mut h = Sha256::new();
    for part in scope.parts().into_iter().chain([key]) {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex(&h.finalize())
}

/// The owner mark an order placed by `scope` carries (the order item's
/// `owner` attribute): a hash of the scope, so that `GET` can tell whether
/// the caller placed the order while the orders table (its stream, its
/// backups, the notifier's input) never holds the principal itself.
/// Domain-separated from [`record_key`] by its first part.
pub fn owner_of(scope: &Scope) -> String {
    let mut h = Sha256::new();
    for part in ["owner"].into_iter().chain(scope.parts()) {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex(&h.finalize())
}

/// The response stored with a completed key, replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status (201).
    pub status: u16,
    /// The JSON body, exactly as first sent.
    pub body: String,
    /// The `Location` header.
    pub location: String,
    /// When the key expires (epoch seconds), published on every answer.
    pub expires_at: u64,
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

/// What the idempotency table holds for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A request with this key is executing (or crashed) until `lease_until`.
    InProgress {
        /// The fingerprint of its body.
        fingerprint: String,
        /// The id of the attempt that claimed it ([`crate::store::Claim::attempt`]).
        attempt: String,
        /// Epoch milliseconds: the claiming invocation's deadline.
        lease_until: u64,
        /// Epoch seconds.
        expires_at: u64,
    },
    /// The request completed; its response is stored.
    Completed {
        /// The fingerprint of its body.
        fingerprint: String,
        /// What to replay.
        response: StoredResponse,
    },
}

impl Record {
    fn fingerprint(&self) -> &str {
        match self {
            Record::InProgress { fingerprint, .. } | Record::Completed { fingerprint, .. } => {
                fingerprint
            }
        }
    }

    fn expires_at(&self) -> u64 {
        match self {
            Record::InProgress { expires_at, .. } => *expires_at,
            Record::Completed { response, .. } => response.expires_at,
        }
    }
}

/// The answer to a request whose claim of a key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The same request completed: replay its response.
    Replay(StoredResponse),
    /// The key was used with another body: 422.
    OtherBody,
    /// The same request is executing: 409, retry later.
    InFlight,
    /// The claim refused is this very attempt's own: its PutItem committed,
    /// the answer was lost, and the SDK's retry of it was refused against
    /// it. The key is held by this attempt: go on and commit.
    Ours,
    /// The stored record allows the claim (expired, or its lease is over),
    /// yet the claim was refused: a race with another request; retryable.
    Inconsistent,
}

/// A claim of a key, made by `attempt` with `fingerprint` at `now_ms`, was
/// refused against `stored`. Expiry is decided here, from the stored time,
/// not left to DynamoDB's TTL (which deletes up to days late): an expired
/// record never answers for a new request.
///
/// An in-progress record written by `attempt` itself is this attempt's own
/// claim, seen again: the SDK re-sends a PutItem whose answer was lost
/// (the connection dropped after DynamoDB applied it), and the re-sent one
/// is refused against the first. Answering 409 there would lock the key
/// against its own request until the lease ends, in exactly the failure
/// the key exists for; the attempt id is unique to one request, so the
/// record can be no one else's.
pub fn classify(fingerprint: &str, attempt: &str, stored: Option<&Record>, now_ms: u64) -> Refused {
    let Some(stored) = stored else {
        // The condition includes "no item": refused without one is a race
        // (the item appeared and went, or ALL_OLD was not honoured).
        return Refused::Inconsistent;
    };
    if is_expired(stored.expires_at(), now_ms) {
        return Refused::Inconsistent;
    }
    if stored.fingerprint() != fingerprint {
        return Refused::OtherBody;
    }
    match stored {
        Record::Completed { response, .. } => Refused::Replay(response.clone()),
        Record::InProgress {
            attempt: claimed_by,
            lease_until,
            ..
        } if claimed_by == attempt && *lease_until > now_ms => Refused::Ours,
        Record::InProgress { lease_until, .. } if *lease_until > now_ms => Refused::InFlight,
        Record::InProgress { .. } => Refused::Inconsistent,
    }
}

/// Is a key that expires at `expires_at` (epoch seconds) expired at
/// `now_ms`? The same test as the claim's condition (`expires_at <= now`).
pub fn is_expired(expires_at: u64, now_ms: u64) -> bool {
    expires_at <= now_ms / 1000
}

/// An RFC 9457 problem: every error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// A URN naming the problem type, stable for clients to match on.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short, fixed summary of the type.
    pub title: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// What is wrong with this request: names headers and fields, never
    /// their values.
    pub detail: String,
    /// Seconds to wait before retrying (409, 503), also sent as
    /// `Retry-After`.
    #[serde(skip)]
    pub retry_after: Option<u64>,
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
            ProblemKind::Forbidden => (403, "forbidden", "The caller could not be identified"),
            ProblemKind::NotFound => (404, "not-found", "No such resource"),
            ProblemKind::MethodNotAllowed => (405, "method-not-allowed", "Method not allowed"),
        }
    }

    /// This problem with `detail`.
    pub fn with(self, detail: impl Into<String>) -> Problem {
        let (status, slug, title) = self.describe();
        Problem {
            kind: format!("urn:order-api:problem:{slug}"),
            title,
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }
}

impl Problem {
    /// The same problem, asking the client to retry after `secs`.
    pub fn retry_after(mut self, secs: u64) -> Problem {
        self.retry_after = Some(secs.max(1));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn record_keys_are_scoped_by_caller() {
        let jwt = |iss: &str, sub: &str| Scope::Jwt {
            issuer: iss.into(),
            subject: sub.into(),
        };
        let keys = [
            record_key(&Scope::Anonymous, "k"),
            record_key(&jwt("i", "alice"), "k"),
            record_key(&jwt("i", "bob"), "k"),
            record_key(&jwt("ia", "lice"), "k"),
            record_key(&Scope::Iam("alice".into()), "k"),
            record_key(&Scope::Lambda("alice".into()), "k"),
            record_key(&Scope::Anonymous, "k2"),
            // An owner mark is never a record key.
            owner_of(&Scope::Anonymous),
            owner_of(&Scope::Iam("alice".into())),
            owner_of(&Scope::Lambda("alice".into())),
        ];
        let distinct: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len());
        assert_eq!(record_key(&Scope::Anonymous, "k"), keys[0]);
        assert!(!keys[0].contains('k') || keys[0].len() == 64);
    }

    #[test]
    fn classification_of_a_refused_claim() {
        let now = 1_000_000; // ms: 1000 s
        let live = 2_000; // s: far after now
        let response = StoredResponse {
            status: 201,
            body: "{}".into(),
            location: "/orders/o".into(),
            expires_at: live,
        };
        let done = |fp: &str, exp: u64| Record::Completed {
            fingerprint: fp.into(),
            response: StoredResponse {
                expires_at: exp,
                ..response.clone()
            },
        };
        let running = |fp: &str, lease: u64| Record::InProgress {
            fingerprint: fp.into(),
            attempt: "other-attempt".into(),
            lease_until: lease,
            expires_at: live,
        };
        // Claimed by this very attempt (the SDK re-sent a PutItem that
        // committed unseen).
        let mine = |fp: &str, lease: u64, exp: u64| Record::InProgress {
            fingerprint: fp.into(),
            attempt: "my-attempt".into(),
            lease_until: lease,
            expires_at: exp,
        };
        let cases = [
            (Some(done("f", live)), Refused::Replay(response.clone())),
            (Some(done("g", live)), Refused::OtherBody),
            (Some(running("f", now + 1)), Refused::InFlight),
            (Some(running("g", now + 1)), Refused::OtherBody),
            (Some(mine("f", now + 1, live)), Refused::Ours),
            // The attempt id alone does not make it ours: the body must be
            // this request's, the lease live, the key not expired (none of
            // which an SDK retry can change; anything else is corrupt or a
            // race, retried).
            (Some(mine("g", now + 1, live)), Refused::OtherBody),
            (Some(mine("f", now, live)), Refused::Inconsistent),
            (Some(mine("f", now + 1, now / 1000)), Refused::Inconsistent),
            // A lease at or before now is over: the claim should have held.
            (Some(running("f", now)), Refused::Inconsistent),
            // Expired (checked here, whatever TTL did): never answers.
            (Some(done("f", now / 1000)), Refused::Inconsistent),
            (Some(done("g", now / 1000 - 1)), Refused::Inconsistent),
            (None, Refused::Inconsistent),
        ];
        for (stored, want) in cases {
            assert_eq!(
                classify("f", "my-attempt", stored.as_ref(), now),
                want,
                "{stored:?}"
            );
        }
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
