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
//! - **422** when the key was used with another payload, or (once its
//!   first request completed) with another method, path, query string or
//!   identity header ([`IdempotencyLayer::identity_headers`], default
//!   `Content-Type`). Paths compare as sent: `/payments` and `/payments/`
//!   are two routes.
//! - the stored response, **byte for byte** (status, the stored headers,
//!   body), with `Idempotent-Replayed: true`, for a repeat of a completed
//!   request: one DynamoDB request, no read.
//! - otherwise the inner service's answer. A 5xx, a 429 or a 408 (or an
//!   error) gives the key back (so a retry runs again); anything else is
//!   stored. An answer too large to store (its record over DynamoDB's item
//!   limit, or its body over [`IdempotencyLayer::max_response_bytes`]) is
//!   replaced by the 500 problem `response-too-large`, which is stored in
//!   its place: the service ran, so it does not run again for the key.
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
//! body, collected), `layer` (the layer and its service). This module uses
//! `idempotency`, `batch` (the deadline), `time` and `error`; no module
//! uses it.
//!
//! # Example
//!
//! A plain tower service behind the layer (`client`: the DynamoDB client,
//! `bootstrap::dynamodb_client().await` once per cold start):
//!
//! ```
//! use lambda_idempotency::http::{AuthMode, IdempotencyLayer};
//! use lambda_idempotency::idempotency::{IdempotencyOptions, IdempotencyStore, IdempotencyTable};
//! use lambda_http::tower::{Layer, service_fn};
//! use lambda_http::{Body, Error, Request, Response};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! # // A local DynamoDB with the table, and an API Gateway request (IAM).
//! # use lambda_idempotency_testing as testing;
//! # let client = testing::client_for(&testing::start_dynoxide().await);
//! # testing::create_table(&client, "idempotency", "id").await?;
//! # let request = |key: &str| {
//! #     testing::HttpApiRequest::new(lambda_http::http::Method::POST, "/payments")
//! #         .header("idempotency-key", key)
//! #         .header("content-type", "application/json")
//! #         .body("{\"amount\":500}")
//! #         .caller(testing::HttpApiCaller::iam("arn:aws:iam::1:user/doc"))
//! #         .build()
//! # };
//! # let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
//! # let counted = calls.clone();
//! let table = IdempotencyTable::new("idempotency")?;
//! let store = IdempotencyStore::new(client, table, IdempotencyOptions::default())?;
//! let layer = IdempotencyLayer::new(store, AuthMode::Iam)
//!     .problem_prefix("urn:payments:problem:");
//! let payments = service_fn(move |_req: Request| {
//! #   counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!     // Runs once per key; its answer is replayed to every repeat.
//!     async { Ok::<_, Error>(Response::builder().status(201).body(Body::from("{\"paid\":true}"))?) }
//! });
//! let service = layer.layer(payments);
//! # /*
//! lambda_http::run(service).await
//! # */
//! # use lambda_http::tower::ServiceExt;
//! # let first = service.clone().oneshot(request("k-1")?).await?;
//! # let again = service.clone().oneshot(request("k-1")?).await?;
//! # assert_eq!((first.status().as_u16(), again.status().as_u16()), (201, 201));
//! # assert_eq!(again.body(), first.body());
//! # assert_eq!(again.headers()["idempotent-replayed"], "true");
//! # assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
//! # Ok(())
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
//! ```
//! use axum::routing::post;
//! use lambda_idempotency::http::{AuthMode, IdempotencyLayer};
//! use lambda_idempotency::idempotency::{IdempotencyOptions, IdempotencyStore, IdempotencyTable};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lambda_http::Error> {
//! # use lambda_idempotency_testing as testing;
//! # let client = testing::client_for(&testing::start_dynoxide().await);
//! # testing::create_table(&client, "idempotency", "id").await?;
//! # let table = IdempotencyTable::new("idempotency")?;
//! # let store = IdempotencyStore::new(client, table, IdempotencyOptions::default())?;
//! # let request = |key: &str| {
//! #     testing::HttpApiRequest::new(lambda_http::http::Method::POST, "/payments")
//! #         .header("idempotency-key", key)
//! #         .header("content-type", "application/json")
//! #         .body("{\"amount\":500}")
//! #         .caller(testing::HttpApiCaller::iam("arn:aws:iam::1:user/doc"))
//! #         .build()
//! # };
//! async fn pay(body: String) -> (axum::http::StatusCode, String) {
//!     (axum::http::StatusCode::CREATED, format!("{{\"paid\":{}}}", body.len()))
//! }
//! let app = axum::Router::new().route("/payments", post(pay));
//! let layer = IdempotencyLayer::new(store, AuthMode::Iam).max_response_bytes(64 * 1024);
//! let service = layer.collecting(app);
//! # /*
//! lambda_http::run(service).await
//! # */
//! # use lambda_http::tower::ServiceExt;
//! # let first = service.clone().oneshot(request("k-1")?).await?;
//! # let again = service.clone().oneshot(request("k-1")?).await?;
//! # assert_eq!(first.status().as_u16(), 201);
//! # assert_eq!(first.body(), &lambda_http::Body::Text("{\"paid\":14}".into()));
//! # assert_eq!(again.body(), first.body());
//! # assert_eq!(again.headers()["idempotent-replayed"], "true");
//! # Ok(())
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
    AfterService, Committed, DEFAULT_BUDGET, DEFAULT_DEADLINE_MARGIN, DEFAULT_IDENTITY_HEADERS,
    DEFAULT_STORED_HEADERS, Deadline, EXPIRES_HEADER, FingerprintFn, HttpClaim, IdempotencyLayer,
    IdempotentService, MAX_LEASE, ProblemFn, REPLAYED_HEADER, ReplayRefused, after_service,
    body_fingerprint, cut, cutoff, replay,
};
pub use problem::{DEFAULT_PROBLEM_PREFIX, PROBLEM_JSON, Problem, ProblemKind};
pub use scope::{
    AuthMode, LAMBDA_PRINCIPAL_KEY, NoPrincipal, RoleSessions, Scope, iam_principal, record_key,
};
pub use stored::{Answered, StoredBody, StoredResponse};
