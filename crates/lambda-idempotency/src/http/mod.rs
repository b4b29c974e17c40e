//! An Idempotency-Key layer for `lambda_http` services (feature `http`):
//! the IETF httpapi Idempotency-Key draft, on the [`crate::idempotency`]
//! store. A `tower::Layer`, so the same layer serves a hand-written
//! service, a `service_fn` or a router under `lambda_http::run`.
//!
//! # What a client sees
//!
//! For a request whose method needs a key (default `POST` and `PATCH`;
//! any other passes through untouched), in this order:
//!
//! - **403** when the request carries no principal from the authorizer
//!   the layer is configured for ([`AuthMode`]): keys are scoped by the
//!   caller ([`Scope`]), so an unidentified caller has no key space, and
//!   learns nothing else about its request.
//! - **400** for a missing, repeated or malformed `Idempotency-Key`
//!   ([`parse_key`]: one sf-string or token; a comma-joined repeat, which
//!   is how API Gateway joins a header sent twice, is not a key).
//! - whatever the fingerprint function answers instead of a fingerprint
//!   ([`IdempotencyLayer::fingerprint_with`]: the API's own 400 or 415 for
//!   a request that must not store a key). Nothing is claimed for any of
//!   these: fix the request and retry with the same key.
//! - **409** with `Retry-After` while the key's first request runs (its
//!   claim is a lease that ends at its invocation's deadline at the latest).
//! - **422** when the key was used with another payload.
//! - the stored response, **byte for byte** (status, the stored headers,
//!   body), with `Idempotent-Replayed: true`, for a repeat of a completed
//!   request: one DynamoDB request, no read.
//! - otherwise the inner service's answer. A 5xx, a 429 or a 408 (or an
//!   error) gives the key back (so a retry runs again); anything else is
//!   stored.
//!
//! The first answer and every replay carry `Idempotency-Expires` (RFC 3339):
//! when the key may be reused. Errors are `application/problem+json`
//! ([`Problem`]; their `type` prefix is configurable).
//!
//! # The transactional form
//!
//! When the inner service's effect is itself a DynamoDB write, it commits
//! the key's completion in the same `TransactWriteItems`, so the effect and
//! the record cannot disagree: it finds the [`HttpClaim`] in the request's
//! extensions, adds [`HttpClaim::completion`] of its [`StoredResponse`] to
//! its transaction (the store's `transact` sends one with the attempt as
//! its ClientRequestToken), and answers with that response and [`Committed`]
//! in its extensions, so the layer does not write the completion again.
//!
//! # Layout
//!
//! `key` (the header), `scope` (the caller, the record key), `problem`
//! (problem+json), `stored` (the stored response), `body` (any response
//! body, collected), `layer` (the layer and its service). This module uses `idempotency`, `batch` (the deadline),
//! `time` and `error`; no module uses it.
//!
//! # Example
//!
//! A plain tower service behind the layer:
//!
//! ```no_run
//! use lambda_idempotency::http::{AuthMode, IdempotencyLayer};
//! use lambda_idempotency::idempotency::{IdempotencyOptions, IdempotencyStore, IdempotencyTable};
//! use lambda_http::tower::{Layer, service_fn};
//! use lambda_http::{Body, Error, Request, Response};
//!
//! # async fn run() -> Result<(), Error> {
//! let client = lambda_idempotency::bootstrap::dynamodb_client().await;
//! let table = IdempotencyTable::new("idempotency")?;
//! let store = IdempotencyStore::new(client, table, IdempotencyOptions::default());
//! let layer = IdempotencyLayer::new(store, AuthMode::Iam)
//!     .problem_prefix("urn:payments:problem:");
//! let payments = service_fn(|_req: Request| async {
//!     // Runs once per key; its answer is replayed to every repeat.
//!     Ok::<_, Error>(Response::builder().status(201).body(Body::from("{\"paid\":true}"))?)
//! });
//! lambda_http::run(layer.layer(payments)).await
//! # }
//! ```
//!
//! # axum, and any other response body
//!
//! An axum `Router` answers `Response<axum::body::Body>`, not
//! `lambda_http`'s `Body`. [`IdempotencyLayer::collecting`] wraps it in
//! [`CollectBody`], which reads any `http_body::Body` into memory, up to
//! [`IdempotencyLayer::max_response_bytes`] for a response the layer stores
//! (default [`DEFAULT_MAX_RESPONSE_BYTES`]) and [`MAX_PASS_THROUGH_BYTES`]
//! for any other, and sends it as text or binary by `lambda_http`'s own
//! rules. A longer body is not read further: the answer is a 500 problem,
//! and the key is kept until its lease ends (the router ran). This crate
//! does not depend on axum.
//!
//! ```no_run
//! use axum::routing::post;
//! use lambda_idempotency::http::{AuthMode, IdempotencyLayer};
//! use lambda_idempotency::idempotency::{IdempotencyOptions, IdempotencyStore, IdempotencyTable};
//!
//! # async fn run() -> Result<(), lambda_http::Error> {
//! # let client = lambda_idempotency::bootstrap::dynamodb_client().await;
//! # let table = IdempotencyTable::new("idempotency")?;
//! # let store = IdempotencyStore::new(client, table, IdempotencyOptions::default());
//! async fn pay(body: String) -> (axum::http::StatusCode, String) {
//!     (axum::http::StatusCode::CREATED, format!("{{\"paid\":{}}}", body.len()))
//! }
//! let app = axum::Router::new().route("/payments", post(pay));
//! let layer = IdempotencyLayer::new(store, AuthMode::Iam).max_response_bytes(64 * 1024);
//! lambda_http::run(layer.collecting(app)).await
//! # }
//! ```

mod body;
mod key;
mod layer;
mod problem;
mod scope;
mod stored;

pub use body::{CollectBody, DEFAULT_MAX_RESPONSE_BYTES, MAX_PASS_THROUGH_BYTES};
pub use key::{IDEMPOTENCY_KEY, KeyError, MAX_KEY_CHARS, key_of, parse_key};
pub use layer::{
    Committed, DEFAULT_BUDGET, DEFAULT_DEADLINE_MARGIN, DEFAULT_STORED_HEADERS, Deadline,
    EXPIRES_HEADER, FingerprintFn, HttpClaim, IdempotencyLayer, IdempotentService, MAX_LEASE,
    ProblemFn, REPLAYED_HEADER, body_fingerprint, cut, cutoff,
};
pub use problem::{DEFAULT_PROBLEM_PREFIX, PROBLEM_JSON, Problem, ProblemKind};
pub use scope::{AuthMode, LAMBDA_PRINCIPAL_KEY, NoPrincipal, Scope, iam_principal, record_key};
pub use stored::{StoredBody, StoredResponse};
