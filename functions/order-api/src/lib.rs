//! The order API (`order-api`): `POST /orders` with an `Idempotency-Key`
//! and `GET /orders/{orderId}`, behind an API Gateway HTTP API
//! (`lambda_http`). The policy a client can rely on is docs/api.md.
//!
//! The Idempotency-Key policy (the key, the caller's scope, 403/400/409/
//! 422, the replay, the expiry, the lease and its release) is the
//! library's layer, `lambda_idempotency::http::IdempotencyLayer`, in front
//! of `POST /orders`; what is the order API's own is here:
//!
//! - [`event`]: the HTTP contract: the content type, the body (validated
//!   as the order consumer validates OrderPlaced), the order id in a path.
//! - [`domain`]: the owner mark, the outcomes, the API's problems. Pure.
//! - [`store`]: the DynamoDB adapter: the idempotency table's layout, and
//!   the commit (one TransactWriteItems of the consumer's own OrderPlaced
//!   write and the key's completion: the layer's transactional form).
//! - [`OrderApi`] (here): the function; [`ApiConfig`]: its environment.
//!
//! An order created here is the order consumer's order after its
//! OrderPlaced (seq 1): the rest of its lifecycle (OrderPaid seq 2, ...)
//! arrives through SQS unchanged, and the notifier's PLACED notification
//! comes from the table's stream.

#![deny(missing_docs)]
// Logs go through `tracing`; the one stdout writer is the EMF line.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod domain;
pub mod event;
pub mod store;
/// Test support as library code (feature `testing`, for the tests).
#[cfg(feature = "testing")]
pub mod testing;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use lambda_http::http::header::{ALLOW, CONTENT_TYPE, HeaderValue, LOCATION};
use lambda_http::http::{Method, StatusCode};
use lambda_http::tower::{Layer, Service, ServiceExt};
use lambda_http::{Body, Request, RequestExt, Response, service_fn};
use serde::Serialize;
use tracing::Instrument;

use domain::{
    Outcome, PROBLEM_PREFIX, Problem, ProblemKind, StoredResponse, fingerprint, owner_of,
};
use event::{
    AuthMode, PlaceOrder, RoleSessions, Scope, decode_segment, is_json, parse_place_order,
};
use lambda_idempotency::StoreError;
use lambda_idempotency::config::{ConfigError, Telemetry, parse_in, required};
use lambda_idempotency::engine::{ColdStart, invocation_span};
use lambda_idempotency::http::{
    Committed, Deadline, HttpClaim, IdempotencyLayer, IdempotentService, cut, cutoff,
};
use lambda_idempotency::idempotency::json_fingerprint;
use lambda_idempotency::metrics::{self, OutcomeCounts};
use lambda_idempotency::time::{epoch_ms, rfc3339};
use lambda_idempotency::wire::{Id, Timestamp};
use orders::domain::OrderView;
use orders::event::{OrderEvent, Payload, Seq};
use store::ApiStore;

/// `METRICS_NAMESPACE` when unset.
pub const DEFAULT_METRICS_NAMESPACE: &str = "OrderApi";
/// `IDEMPOTENCY_TTL_SECONDS` when unset: 24 hours, as Stripe keeps keys.
pub const DEFAULT_IDEMPOTENCY_TTL_SECONDS: u64 = 86_400;
/// The header that publishes when a key expires (RFC 3339, UTC), and the
/// header on a replayed response; the layer's longest lease.
pub use lambda_idempotency::http::{EXPIRES_HEADER, MAX_LEASE, REPLAYED_HEADER};
/// Time kept before the invocation deadline to answer API Gateway: a
/// DynamoDB call still running then is cut off and answered 503.
pub const DEADLINE_MARGIN: Duration = Duration::from_millis(500);

/// The order API's configuration, read once per cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// `TABLE_NAME` (required): the orders table.
    pub table_name: String,
    /// `IDEMPOTENCY_TABLE` (required): hash key `idempotency_key` (S),
    /// TTL attribute `expires_at`.
    pub idempotency_table: String,
    /// `IDEMPOTENCY_TTL_SECONDS` (default 86400, 1..=31536000): how long a
    /// key answers for its first request; after that it may be reused.
    pub idempotency_ttl_seconds: u64,
    /// `API_AUTH` (default `iam`): which authorizer the routes are behind,
    /// and so where the caller's principal is read ([`AuthMode`]). `none`
    /// must be set explicitly (the local loop); the template never sets it.
    pub auth: AuthMode,
    /// `API_SHARED_ROLES` (default none): under `iam`, the assumed roles
    /// (names, comma-separated) whose sessions are one caller: roles only
    /// machines assume, whose session name is a label. Every other
    /// assumed role's sessions are callers apart ([`RoleSessions`]), so a
    /// role people assume (IAM Identity Center, SAML) never shares keys or
    /// orders between them.
    pub role_sessions: RoleSessions,
    /// `METRICS_NAMESPACE` (default `OrderApi`), `AWS_LAMBDA_FUNCTION_NAME`
    /// and `POWERTOOLS_SERVICE_NAME`, as every function reads them.
    pub telemetry: Telemetry,
}

impl ApiConfig {
    /// From the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Build from any lookup function (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(ApiConfig {
            table_name: required(&get, "TABLE_NAME")?,
            idempotency_table: required(&get, "IDEMPOTENCY_TABLE")?,
            idempotency_ttl_seconds: parse_in(
                &get,
                "IDEMPOTENCY_TTL_SECONDS",
                DEFAULT_IDEMPOTENCY_TTL_SECONDS,
                1..=31_536_000,
            )?,
            auth: match get("API_AUTH").filter(|s| !s.trim().is_empty()) {
                None => AuthMode::Iam,
                Some(raw) => AuthMode::parse(&raw).ok_or(ConfigError::Invalid {
                    var: "API_AUTH",
                    reason: "expected iam, jwt, lambda or none".into(),
                })?,
            },
            role_sessions: shared_roles(get("API_SHARED_ROLES"))?,
            telemetry: Telemetry::from_lookup(&get, DEFAULT_METRICS_NAMESPACE, "order-api"),
        })
    }
}

/// `API_SHARED_ROLES`: role names, comma-separated (blank: none). A name
/// IAM would not take (1 to 64 of `A-Za-z0-9+=,.@_-`) is refused, without
/// echoing it.
fn shared_roles(raw: Option<String>) -> Result<RoleSessions, ConfigError> {
    let raw = raw.unwrap_or_default();
    let names: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    let valid = |n: &String| {
        n.len() <= 64
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
    };
    if !names.iter().all(valid) {
        return Err(ConfigError::Invalid {
            var: "API_SHARED_ROLES",
            reason: "IAM role names (1 to 64 of A-Z a-z 0-9 + = , . @ _ -), comma-separated".into(),
        });
    }
    Ok(if names.is_empty() {
        RoleSessions::Apart
    } else {
        RoleSessions::Shared(names)
    })
}

/// The `order-api` function: built once per cold start, shared by every
/// invocation.
#[derive(Debug, Clone)]
pub struct OrderApi {
    store: ApiStore,
    /// `POST /orders`: the Idempotency-Key layer in front of the order's
    /// placement.
    place: IdempotentService<PlaceOrders>,
    auth: AuthMode,
    role_sessions: RoleSessions,
    telemetry: Telemetry,
    /// Shared by the clones `serve` hands each request.
    cold: std::sync::Arc<ColdStart>,
}

/// The 201 body (and the stored one a replay sends byte for byte).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Created<'a> {
    order_id: &'a str,
    status: &'static str,
    customer_id: &'a str,
    amount: u64,
    currency: &'a str,
    created_at: &'a str,
}

/// The `GET /orders/{orderId}` body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    order_id: &'a str,
    status: &'static str,
    last_event_seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    customer_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    amount: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    currency: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    paid_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shipped_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivered_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancelled_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<&'a str>,
}

impl OrderApi {
    /// The function over `store`, with `config`'s key expiry.
    pub fn new(store: ApiStore, config: &ApiConfig) -> Self {
        let store = store.with_expiry(config.idempotency_ttl_seconds);
        // Only POST /orders is routed through it; the order's own checks
        // (content type 415, body 400) run before the claim, so that an
        // invalid request stores nothing.
        let layer = IdempotencyLayer::new(store.idempotency().clone(), config.auth)
            .role_sessions(config.role_sessions.clone())
            .methods([Method::POST])
            .stored_headers([CONTENT_TYPE.as_str(), LOCATION.as_str()])
            .problem_prefix(PROBLEM_PREFIX)
            .map_problem(order_problem)
            .fingerprint_with(order_fingerprint)
            .deadline_margin(DEADLINE_MARGIN);
        OrderApi {
            place: layer.layer(PlaceOrders {
                store: store.clone(),
            }),
            store,
            auth: config.auth,
            role_sessions: config.role_sessions.clone(),
            telemetry: config.telemetry.clone(),
            cold: Default::default(),
        }
    }

    /// Serve requests until the runtime stops; on Lambda Managed Instances
    /// (`AWS_LAMBDA_MAX_CONCURRENCY` > 1) that many at once, sharing the
    /// client and the cold-start flag. Each request's deadline, claim and metrics line are its own.
    pub async fn serve(self) -> Result<(), lambda_http::Error> {
        let api = std::sync::Arc::new(self);
        lambda_http::run_concurrent(service_fn(move |req: Request| {
            let api = api.clone();
            async move { Ok::<_, lambda_http::Error>(api.invoke(req).await) }
        }))
        .await
    }

    /// The Lambda entry point: answer the request inside the invocation's
    /// span (the Powertools keys on every line), then write its EMF line,
    /// one count for its [`Outcome`] and `ColdStart`.
    pub async fn invoke(&self, req: Request) -> Response<Body> {
        let cold_start = self.cold.take();
        // Lambda's deadline; a request without a Lambda context (none comes
        // through `run`) gets the API Gateway limit of 30 s.
        let (deadline, span) = match req.lambda_context_ref() {
            Some(cx) => (
                lambda_idempotency::time::deadline_epoch_ms(cx.deadline),
                invocation_span(&self.telemetry, cold_start, cx),
            ),
            None => (epoch_ms() + 30_000, tracing::Span::none()),
        };
        let response = self.handle(req, deadline).instrument(span).await;
        let outcome = outcome_of(&response);
        metrics::emit(&metrics::emf_document(
            &self.telemetry,
            &OutcomeCounts::tally(
                <Outcome as strum::VariantNames>::VARIANTS.iter().copied(),
                [outcome.label()],
            ),
            &[("ColdStart", u64::from(cold_start))],
        ));
        // The invocation span closed with the instrumented future above.
        lambda_idempotency::bootstrap::flush_traces(deadline).await;
        response
    }

    /// Answer one request. `deadline_ms` is the invocation's deadline
    /// (epoch milliseconds): it bounds the key's in-progress lease and the
    /// DynamoDB calls. Never fails: every error is a problem+json answer.
    pub async fn handle(&self, mut req: Request, deadline_ms: u64) -> Response<Body> {
        let method = req.method().clone();
        let route = {
            let segments: Vec<&str> = req
                .uri()
                .path()
                .split('/')
                .filter(|s| !s.is_empty())
                .collect();
            match (segments.as_slice(), &method) {
                (["orders"], &Method::POST) => Route::Place,
                (["orders"], _) => Route::NotAllowed("POST"),
                (["orders", id], &Method::GET) => Route::Show((*id).to_owned()),
                (["orders", _], _) => Route::NotAllowed("GET"),
                _ => Route::NotFound,
            }
        };
        let response = match route {
            Route::Place => {
                req.extensions_mut().insert(Deadline(deadline_ms));
                match self.place.clone().oneshot(req).await {
                    Ok(r) => r,
                    Err(never) => match never {},
                }
            }
            Route::Show(id) => self.show(&req, &id, deadline_ms).await,
            Route::NotAllowed(allow) => method_not_allowed(allow),
            Route::NotFound => problem(ProblemKind::NotFound.with("no such route")),
        };
        tracing::info!(
            method = %method,
            status = response.status().as_u16(),
            outcome = outcome_of(&response).label(),
            "request"
        );
        response
    }

    /// The caller's scope, from the authorizer `API_AUTH` names, or the
    /// 403 answer when the request carries no principal from it (as the
    /// layer answers it for `POST`). Logged (without any value) because
    /// under a configured authorizer it means a route is not behind it: a
    /// deployment problem, not a client's.
    fn scope(&self, req: &Request) -> Result<Scope, Problem> {
        Scope::of_request(self.auth, &self.role_sessions, req).map_err(|e| {
            tracing::warn!(error = %e, "request refused: no principal");
            ProblemKind::Forbidden.with(
                "the request carries no principal from the authorizer this API is configured for",
            )
        })
    }
    async fn show(&self, req: &Request, segment: &str, deadline_ms: u64) -> Response<Body> {
        let scope = match self.scope(req) {
            Ok(scope) => scope,
            Err(refused) => return problem(refused),
        };
        // The path as the client encoded it (`ord%201`), decoded once: the
        // id is `ord 1`. An id that could not be an order's is not one.
        let Some(id) = decode_segment(segment).filter(|id| Id::try_from(id.as_str()).is_ok())
        else {
            return problem(ProblemKind::NotFound.with("no such order"));
        };
        let cutoff = cutoff(deadline_ms, DEADLINE_MARGIN);
        let view: OrderView = match cut(cutoff, self.store.orders().get(&id)).await {
            Ok(Some(v)) => v,
            Ok(None) => return problem(ProblemKind::NotFound.with("no such order")),
            Err(e) => return store_problem(&e),
        };
        // Only the caller who placed it sees it; to anyone else (and for an
        // order placed through SQS, which no caller of this API placed) it
        // is as absent as an unknown id, so ids cannot be probed.
        if view.owner.as_deref() != Some(owner_of(&scope).as_str()) {
            return problem(ProblemKind::NotFound.with("no such order"));
        }
        let body = serde_json::to_string(&Shown {
            order_id: &view.order_id,
            status: view.status.as_str(),
            last_event_seq: view.last_event_seq,
            customer_id: view.customer_id.as_deref(),
            amount: view.amount,
            currency: view.currency.as_deref(),
            created_at: view.placed_at.as_deref(),
            paid_at: view.paid_at.as_deref(),
            shipped_at: view.shipped_at.as_deref(),
            delivered_at: view.delivered_at.as_deref(),
            cancelled_at: view.cancelled_at.as_deref(),
            updated_at: view.updated_at.as_deref(),
        });
        match body {
            Ok(body) => respond(StatusCode::OK, "application/json", body, &[]),
            Err(_) => problem(ProblemKind::Internal.with("the order could not be shown")),
        }
    }
}

/// Where a request goes.
enum Route {
    Place,
    Show(String),
    NotAllowed(&'static str),
    NotFound,
}

/// The layer's problems in the order API's words: its titles, and details
/// that name the order store.
fn order_problem(kind: lambda_idempotency::http::ProblemKind, p: Problem) -> Problem {
    use lambda_idempotency::http::ProblemKind as Layer;
    let detail = match kind {
        Layer::Unavailable => {
            "the order store did not confirm in time or was throttled; retry with the same Idempotency-Key".to_owned()
        }
        Layer::Internal => "the order store refused the request".to_owned(),
        _ => p.detail,
    };
    let mut mapped = ProblemKind::from(kind).with(detail);
    mapped.retry_after = p.retry_after;
    mapped
}

/// What makes two `POST /orders` the same (the canonical JSON of the
/// body), after the checks that must store nothing: the content type
/// (415) and the order itself (400).
fn order_fingerprint(req: &Request) -> Result<String, Box<Response<Body>>> {
    let content_type = req.headers().get(CONTENT_TYPE).map(HeaderValue::as_bytes);
    if !is_json(content_type) {
        return Err(Box::new(problem(
            ProblemKind::UnsupportedMediaType
                .with("send the order as Content-Type: application/json"),
        )));
    }
    match parse_place_order(req.body().as_ref()) {
        // Exact in the body's numbers (an extra field's
        // 0.1000000000000000001 is not 0.1), and the same fingerprint as
        // before for a body whose numbers an f64 holds: the records stored
        // before an upgrade still match their retries. The body parsed
        // above, so the text is JSON; the value's fingerprint is the
        // answer left were it not.
        Ok((_, value)) => {
            Ok(json_fingerprint(req.body().as_ref()).unwrap_or_else(|_| fingerprint(&value)))
        }
        Err(e) => Err(Box::new(problem(
            ProblemKind::InvalidBody.with(e.to_string()),
        ))),
    }
}

/// The service behind the layer on `POST /orders`: the key is claimed and
/// the request valid; place the order and complete the key in one
/// transaction (the layer's transactional form).
#[derive(Debug, Clone)]
pub struct PlaceOrders {
    store: ApiStore,
}

impl Service<Request> for PlaceOrders {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let store = self.store.clone();
        Box::pin(async move { Ok(place(&store, &req).await) })
    }
}

/// Place the order of a request whose key the layer holds. Every failure
/// is a 5xx, which makes the layer give the key back (within the cutoff:
/// past it, a commit may yet land unseen and the lease ends anyway).
async fn place(store: &ApiStore, req: &Request) -> Response<Body> {
    let internal = |detail: &str| problem(ProblemKind::Internal.with(detail));
    let Some(held) = req.extensions().get::<HttpClaim>() else {
        tracing::error!("POST /orders reached without the idempotency layer");
        return internal("the request could not be processed");
    };
    // Validated by the layer's fingerprint (order_fingerprint) already.
    let Ok((order, _)) = parse_place_order(req.body().as_ref()) else {
        return internal("the order could not be built");
    };
    let owner = owner_of(held.scope());
    let (event, response) = match order_of(&order) {
        Ok(built) => built,
        Err(p) => return problem(p),
    };
    match cut(
        held.cutoff(),
        store.commit(&held.claim(), &event, &owner, &response),
    )
    .await
    {
        Ok(()) => {
            let mut r = response.to_response();
            r.extensions_mut().insert(Committed);
            r
        }
        Err(e) => store_problem(&e),
    }
}

/// The OrderPlaced (seq 1) a request becomes, and its 201 response.
fn order_of(order: &PlaceOrder) -> Result<(OrderEvent, StoredResponse), Problem> {
    let internal = |_| ProblemKind::Internal.with("the order could not be built");
    // Random, not derived from the key: a key reused after it expired
    // places a new order.
    let order_id = format!("ord_{:032x}", fastrand::u128(..));
    let created_at = rfc3339(SystemTime::now());
    let event = OrderEvent {
        event_id: Id::try_from(format!("{order_id}-placed").as_str()).map_err(internal)?,
        order_id: Id::try_from(order_id.as_str()).map_err(internal)?,
        seq: Seq::try_from(1).map_err(internal)?,
        occurred_at: Timestamp::try_from(created_at.as_str()).map_err(internal)?,
        payload: Payload::Placed {
            customer_id: order.customer_id.clone(),
            amount: order.amount,
            currency: order.currency.clone(),
        },
    };
    let body = serde_json::to_string(&Created {
        order_id: &order_id,
        status: "PLACED",
        customer_id: order.customer_id.as_str(),
        amount: order.amount.get(),
        currency: order.currency.as_str(),
        created_at: &created_at,
    })
    .map_err(|_| ProblemKind::Internal.with("the response could not be built"))?;
    Ok((
        event,
        StoredResponse::new(201)
            .header(CONTENT_TYPE.as_str(), "application/json")
            .header(LOCATION.as_str(), format!("/orders/{order_id}"))
            .text(body),
    ))
}

/// What an answer came to (its status, and whether it was replayed).
pub fn outcome_of(r: &Response<Body>) -> Outcome {
    Outcome::of(
        r.status().as_u16(),
        r.headers().contains_key(REPLAYED_HEADER),
    )
}

fn store_problem(e: &StoreError) -> Response<Body> {
    if e.is_retryable() {
        tracing::warn!(error = %e, "DynamoDB did not confirm");
        problem(
            ProblemKind::Unavailable
                .with("the order store did not confirm in time or was throttled; retry with the same Idempotency-Key")
                .retry_after(1),
        )
    } else {
        tracing::error!(error = %e, "DynamoDB refused the request");
        problem(ProblemKind::Internal.with("the order store refused the request"))
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let p = ProblemKind::MethodNotAllowed.with(format!("this resource supports {allow} only"));
    let mut r = problem(p);
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

/// A problem+json answer.
fn problem(p: Problem) -> Response<Body> {
    p.into_response()
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: String,
    headers: &[(&str, String)],
) -> Response<Body> {
    let mut r = Response::new(Body::Text(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    for (name, value) in headers {
        // Every value here is ours (ids, numbers, timestamps): ASCII.
        if let (Ok(name), Ok(value)) = (
            lambda_http::http::HeaderName::try_from(*name),
            HeaderValue::try_from(value.as_str()),
        ) {
            r.headers_mut().insert(name, value);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<ApiConfig, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ApiConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn configuration() {
        assert_eq!(cfg(&[]), Err(ConfigError::Missing("TABLE_NAME")));
        assert_eq!(
            cfg(&[("TABLE_NAME", "o")]),
            Err(ConfigError::Missing("IDEMPOTENCY_TABLE"))
        );
        let c = cfg(&[("TABLE_NAME", "o"), ("IDEMPOTENCY_TABLE", "i")]).unwrap();
        assert_eq!(c.idempotency_ttl_seconds, 86_400);
        let c = cfg(&[
            ("TABLE_NAME", "o"),
            ("IDEMPOTENCY_TABLE", "i"),
            ("IDEMPOTENCY_TTL_SECONDS", "60"),
        ])
        .unwrap();
        assert_eq!(c.idempotency_ttl_seconds, 60);
        // Closed by default: IAM unless API_AUTH says otherwise; `none`
        // only when set.
        assert_eq!(c.auth, AuthMode::Iam);
        for (raw, want) in [
            ("iam", AuthMode::Iam),
            ("jwt", AuthMode::Jwt),
            ("lambda", AuthMode::Lambda),
            ("none", AuthMode::None),
            (" ", AuthMode::Iam),
        ] {
            let c = cfg(&[
                ("TABLE_NAME", "o"),
                ("IDEMPOTENCY_TABLE", "i"),
                ("API_AUTH", raw),
            ]);
            assert_eq!(c.map(|c| c.auth), Ok(want), "{raw:?}");
        }
        for bad in ["anonymous", "off", "AWS_IAM"] {
            assert!(matches!(
                cfg(&[
                    ("TABLE_NAME", "o"),
                    ("IDEMPOTENCY_TABLE", "i"),
                    ("API_AUTH", bad)
                ]),
                Err(ConfigError::Invalid {
                    var: "API_AUTH",
                    ..
                })
            ));
        }
        // Assumed roles' sessions: apart unless named.
        assert_eq!(c.role_sessions, RoleSessions::Apart);
        for (raw, want) in [
            ("", RoleSessions::Apart),
            (" , ", RoleSessions::Apart),
            (
                "Ordering, Billing-Task",
                RoleSessions::Shared(vec!["Ordering".into(), "Billing-Task".into()]),
            ),
        ] {
            let c = cfg(&[
                ("TABLE_NAME", "o"),
                ("IDEMPOTENCY_TABLE", "i"),
                ("API_SHARED_ROLES", raw),
            ]);
            assert_eq!(c.map(|c| c.role_sessions), Ok(want), "{raw:?}");
        }
        for bad in ["a b", "role/path", &"r".repeat(65)] {
            let e = cfg(&[
                ("TABLE_NAME", "o"),
                ("IDEMPOTENCY_TABLE", "i"),
                ("API_SHARED_ROLES", bad),
            ]);
            assert!(
                matches!(&e, Err(ConfigError::Invalid { var: "API_SHARED_ROLES", reason }) if !reason.contains(bad)),
                "{e:?}"
            );
        }
        for bad in ["0", "-1", "soon", "31536001"] {
            assert!(matches!(
                cfg(&[
                    ("TABLE_NAME", "o"),
                    ("IDEMPOTENCY_TABLE", "i"),
                    ("IDEMPOTENCY_TTL_SECONDS", bad),
                ]),
                Err(ConfigError::Invalid {
                    var: "IDEMPOTENCY_TTL_SECONDS",
                    ..
                })
            ));
        }
    }
}
