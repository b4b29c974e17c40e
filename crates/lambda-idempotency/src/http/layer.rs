//! The layer: [`IdempotencyLayer`] wraps a `lambda_http` service in
//! [`IdempotentService`], which answers a repeat from the store and lets
//! only a first request through.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, UNIX_EPOCH};

use aws_sdk_dynamodb::types::TransactWriteItem;
use lambda_http::http::header::{HeaderName, HeaderValue};
use lambda_http::http::{Method, StatusCode};
use lambda_http::tower::{Layer, Service};
use lambda_http::{Body, Request, RequestExt, Response};
use sha2::{Digest, Sha256};

use super::body::{CollectBody, DEFAULT_MAX_RESPONSE_BYTES, Uncollected, WillBeStored};
use super::key::key_of;
use super::problem::{DEFAULT_PROBLEM_PREFIX, Problem, ProblemKind};
use super::scope::{AuthMode, RoleSessions, Scope, record_key};
use super::stored::{Answered, StoredResponse, is_stored};
use crate::error::StoreError;
use crate::idempotency::{
    Claim, Claimed, IdempotencyStore, Persistence, Refusal, hashed_key, hex, json_fingerprint,
};
use crate::time::{deadline_epoch_ms, epoch_ms, rfc3339, unique_id};

/// The header that publishes when a key expires (RFC 3339, UTC), on a
/// first answer and on every replay.
pub const EXPIRES_HEADER: &str = "idempotency-expires";
/// The header on a replayed response (`true`).
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// The headers stored with a response unless configured
/// ([`IdempotencyLayer::stored_headers`]): what describes the body and the
/// resource it made. Not `date`, request ids or anything per-answer.
pub const DEFAULT_STORED_HEADERS: [&str; 6] = [
    "content-type",
    "content-language",
    "content-location",
    "location",
    "etag",
    "last-modified",
];
/// The request headers that are part of what makes two requests with one
/// key the same unless configured ([`IdempotencyLayer::identity_headers`]):
/// a request sent again with another content type is another request
/// (the first one's 415 is not the corrected one's answer).
pub const DEFAULT_IDENTITY_HEADERS: [&str; 1] = ["content-type"];
/// Time kept before the invocation deadline to answer: a store call still
/// running then is cut off and answered 503.
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_millis(500);
/// The longest lease a claim takes, whatever the deadline (Lambda's own
/// limit is 15 minutes).
pub const MAX_LEASE: Duration = Duration::from_secs(900);
/// The deadline of a request without a Lambda context or a [`Deadline`]:
/// API Gateway's integration limit.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(30);

/// What the layer does with the claim once the inner service answered
/// ([`after_service`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AfterService {
    /// The transactional form wrote the completion with the service's own
    /// write ([`Committed`]): nothing to write.
    AlreadyCommitted,
    /// Nothing to replay: give the key back, so a retry runs again.
    Release,
    /// Store the response as the key's answer.
    Complete,
}

/// The layer's rule for a service's answer: a 5xx, or a 429/408 that asks
/// the client to come back later, is released (stored, it would answer
/// every retry of the key the same way until the key expires); any other
/// status is stored, unless the service committed the completion itself.
/// Public, hidden, for the model checks, which decide with the layer's own
/// rule.
#[doc(hidden)]
pub fn after_service(status: StatusCode, committed: bool) -> AfterService {
    if committed {
        AfterService::AlreadyCommitted
    } else if is_stored(status) {
        AfterService::Complete
    } else {
        AfterService::Release
    }
}

/// Why a completed record does not replay to a request ([`replay`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayRefused {
    /// It answered another request (another method, path, query or
    /// identity header): 422.
    OtherRequest,
    /// The stored output does not read as a response.
    Corrupt(StoreError),
}

/// What a completed record's `output` answers to the request `now`: the
/// stored response, unless it answered another request (by the target
/// where one was stored, by the route where only that was, a record with
/// neither replays). Public, hidden, for the model checks.
#[doc(hidden)]
pub fn replay(output: &str, now: Answered<'_>) -> Result<StoredResponse, ReplayRefused> {
    match StoredResponse::decode_routed(output) {
        Ok((_, stamp)) if !stamp.matches(now) => Err(ReplayRefused::OtherRequest),
        Ok((response, _)) => Ok(response),
        Err(e) => Err(ReplayRefused::Corrupt(e)),
    }
}

/// The invocation's deadline (epoch milliseconds), for a caller that knows
/// it better than the request's Lambda context does (a test, a router that
/// read it already): put it in the request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline(pub u64);

/// On the inner service's response: the completion is already committed
/// (the transactional form, [`HttpClaim::completion`]), so the layer must
/// not write it again. The layer removes it before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed;

/// Decides whether two requests with one key are the same: the payload's
/// fingerprint, or the answer to give instead (a request that is not
/// valid, checked before anything is claimed, so that it stores nothing).
/// (The answer is boxed: a response is large, a fingerprint small.)
pub type FingerprintFn = dyn Fn(&Request) -> Result<String, Box<Response<Body>>> + Send + Sync;
/// Rewrites the layer's own problems (an API's own titles or details).
pub type ProblemFn = dyn Fn(ProblemKind, Problem) -> Problem + Send + Sync;

/// The fingerprint of a request body unless configured: the canonical JSON
/// of a body that is JSON ([`json_fingerprint`], exact in its numbers), so
/// that key order and whitespace do not make another request; any other
/// body by its bytes.
pub fn body_fingerprint(req: &Request) -> Result<String, Box<Response<Body>>> {
    let bytes = req.body().as_ref();
    match json_fingerprint(bytes) {
        Ok(fp) => Ok(fp),
        Err(_) => Ok(format!("bytes:{}", hex(&Sha256::digest(bytes)))),
    }
}

/// The Idempotency-Key layer (IETF httpapi draft) for `lambda_http`
/// services: built once per cold start, applied with
/// `ServiceBuilder::layer` or [`Layer::layer`]. Over the DynamoDB store
/// by default; `P` is the store ([`Persistence`]).
#[derive(Clone)]
pub struct IdempotencyLayer<P = IdempotencyStore> {
    config: Arc<Config<P>>,
}

#[derive(Clone)]
struct Config<P> {
    store: P,
    auth: AuthMode,
    methods: Vec<Method>,
    stored_headers: Vec<String>,
    problem_prefix: String,
    map_problem: Option<Arc<ProblemFn>>,
    fingerprint: Arc<FingerprintFn>,
    deadline_margin: Duration,
    retry_after: u64,
    max_response_bytes: usize,
    identity_headers: Vec<String>,
    role_sessions: RoleSessions,
}

impl<P: fmt::Debug> fmt::Debug for IdempotencyLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("IdempotencyLayer")
            .field("store", &c.store)
            .field("auth", &c.auth)
            .field("methods", &c.methods)
            .field("stored_headers", &c.stored_headers)
            .field("problem_prefix", &c.problem_prefix)
            .field("deadline_margin", &c.deadline_margin)
            .finish_non_exhaustive()
    }
}

impl<P: Persistence> IdempotencyLayer<P> {
    /// Keys kept in `store` (its expiry is the keys'), scoped by the
    /// principal of the `auth` authorizer; `POST` and `PATCH` requests
    /// need a key, other methods pass through untouched.
    pub fn new(store: P, auth: AuthMode) -> Self {
        IdempotencyLayer {
            config: Arc::new(Config {
                store,
                auth,
                methods: vec![Method::POST, Method::PATCH],
                stored_headers: DEFAULT_STORED_HEADERS.map(str::to_owned).to_vec(),
                problem_prefix: DEFAULT_PROBLEM_PREFIX.to_owned(),
                map_problem: None,
                fingerprint: Arc::new(body_fingerprint),
                deadline_margin: DEFAULT_DEADLINE_MARGIN,
                retry_after: 1,
                max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
                identity_headers: DEFAULT_IDENTITY_HEADERS.map(str::to_owned).to_vec(),
                role_sessions: RoleSessions::default(),
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config<P>)) -> Self {
        // Built once, before the first clone: no copy is made then.
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// The methods that need a key (default `POST`, `PATCH`); any other
    /// passes through untouched.
    pub fn methods(self, methods: impl IntoIterator<Item = Method>) -> Self {
        let methods = methods.into_iter().collect();
        self.edit(|c| c.methods = methods)
    }

    /// The response headers stored and replayed (default
    /// [`DEFAULT_STORED_HEADERS`]); names in any case.
    pub fn stored_headers<'a>(self, names: impl IntoIterator<Item = &'a str>) -> Self {
        let names = names.into_iter().map(str::to_ascii_lowercase).collect();
        self.edit(|c| c.stored_headers = names)
    }

    /// The `type` of the layer's problems: `prefix` followed by the
    /// [`ProblemKind`]'s slug (default [`DEFAULT_PROBLEM_PREFIX`]).
    pub fn problem_prefix(self, prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        self.edit(|c| c.problem_prefix = prefix)
    }

    /// Rewrite each of the layer's problems before it is sent (an API's
    /// own titles, details that name its resource).
    pub fn map_problem(
        self,
        f: impl Fn(ProblemKind, Problem) -> Problem + Send + Sync + 'static,
    ) -> Self {
        let f: Arc<ProblemFn> = Arc::new(f);
        self.edit(|c| c.map_problem = Some(f))
    }

    /// How a request's payload is fingerprinted (default
    /// [`body_fingerprint`]); an `Err` is answered as it is and nothing is
    /// claimed: validate there what must not store a key (the content
    /// type, the body), and fingerprint what makes two requests the same.
    pub fn fingerprint_with(
        self,
        f: impl Fn(&Request) -> Result<String, Box<Response<Body>>> + Send + Sync + 'static,
    ) -> Self {
        let f: Arc<FingerprintFn> = Arc::new(f);
        self.edit(|c| c.fingerprint = f)
    }

    /// Time kept before the deadline to answer (default
    /// [`DEFAULT_DEADLINE_MARGIN`]).
    pub fn deadline_margin(self, margin: Duration) -> Self {
        self.edit(|c| c.deadline_margin = margin)
    }

    /// `Retry-After` on a 409 (default 1 s: a live first request answers
    /// within milliseconds; the lease, up to the function's timeout, only
    /// bounds a crashed one).
    pub fn retry_after(self, secs: u64) -> Self {
        self.edit(|c| c.retry_after = secs.max(1))
    }

    /// The largest response body [`IdempotencyLayer::collecting`] reads
    /// to store (default [`DEFAULT_MAX_RESPONSE_BYTES`]). A longer one,
    /// like any response whose stored record would not fit in a DynamoDB
    /// item (a binary body grows by a third in base64, a text body by its
    /// JSON escapes), is answered with the problem
    /// [`ProblemKind::ResponseTooLarge`], and the key is completed with that
    /// problem: the service ran and its effect counts, so it does not run
    /// again for the key; every repeat gets the same problem.
    pub fn max_response_bytes(self, bytes: usize) -> Self {
        self.edit(|c| c.max_response_bytes = bytes)
    }

    /// The request headers that are part of a request's identity beside
    /// its method, path, query string and payload (default
    /// [`DEFAULT_IDENTITY_HEADERS`]; names in any case): a key reused with
    /// another value of one of them is refused (422) once its first
    /// request has completed. An absent header is a value of its own.
    pub fn identity_headers<'a>(self, names: impl IntoIterator<Item = &'a str>) -> Self {
        let names = names.into_iter().map(str::to_ascii_lowercase).collect();
        self.edit(|c| c.identity_headers = names)
    }

    /// Under [`AuthMode::Iam`], whose key space an assumed role's sessions
    /// share (default [`RoleSessions::Apart`]: each session its own).
    pub fn role_sessions(self, sessions: RoleSessions) -> Self {
        self.edit(|c| c.role_sessions = sessions)
    }

    /// The layer over a service whose response body is any
    /// `http_body::Body` (an axum `Router`): its bodies collected up to
    /// [`IdempotencyLayer::max_response_bytes`] ([`CollectBody`]).
    pub fn collecting<S>(&self, inner: S) -> IdempotentService<CollectBody<S>, P> {
        self.layer(CollectBody::new(inner, self.config.max_response_bytes))
    }
}

impl<S, P> Layer<S> for IdempotencyLayer<P> {
    type Service = IdempotentService<S, P>;

    fn layer(&self, inner: S) -> IdempotentService<S, P> {
        IdempotentService {
            inner,
            config: self.config.clone(),
        }
    }
}

/// A claimed key, in the request's extensions for the inner service: its
/// caller's [`Scope`], the claim (for the transactional form), the
/// deadline.
#[derive(Clone)]
pub struct HttpClaim<P = IdempotencyStore> {
    store: P,
    scope: Scope,
    key: String,
    fingerprint: String,
    attempt: String,
    lease_until_ms: u64,
    now_ms: u64,
    deadline_ms: u64,
    cutoff: tokio::time::Instant,
    /// The request's method and path, hashed ([`route_of`]), and its
    /// method, path, query and identity headers ([`target_of`]): stored
    /// with the response, so that the key reused on another request is
    /// refused.
    route: String,
    target: String,
    /// Epoch milliseconds of the completion, once one is made (0 before):
    /// shared by the clones, so that the layer publishes the expiry the
    /// inner service's transactional completion wrote.
    completed_at: Arc<AtomicU64>,
}

impl<P> fmt::Debug for HttpClaim<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the scope: it names the principal.
        f.debug_struct("HttpClaim")
            .field("attempt", &self.attempt)
            .field("lease_until_ms", &self.lease_until_ms)
            .field("deadline_ms", &self.deadline_ms)
            .finish_non_exhaustive()
    }
}

impl<P: Persistence> HttpClaim<P> {
    /// The claim, as the inner service completes it (the store's
    /// `completion`, `transact`): its `now_ms` is the time of the first
    /// call to this or to [`Self::completion`], when the output is stored,
    /// from which the key's expiry counts; the layer publishes that expiry
    /// ([`Self::expires_at`]). So call it when completing, not before.
    pub fn claim(&self) -> Claim<'_> {
        let now_ms = match self.completed_at.compare_exchange(
            0,
            epoch_ms(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            // Set by this call (the new value), or by an earlier one.
            Ok(_) => self.completed_at.load(Ordering::SeqCst),
            Err(at) => at,
        };
        self.at(now_ms)
    }

    /// The claim with `now_ms`.
    fn at(&self, now_ms: u64) -> Claim<'_> {
        Claim {
            key: &self.key,
            fingerprint: &self.fingerprint,
            attempt: &self.attempt,
            lease_until_ms: self.lease_until_ms,
            now_ms,
        }
    }

    /// The caller.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The store the key is claimed in.
    pub fn store(&self) -> &P {
        &self.store
    }

    /// The invocation's deadline, epoch milliseconds.
    pub fn deadline_ms(&self) -> u64 {
        self.deadline_ms
    }

    /// When store calls stop ([`cut`]): the deadline less the margin.
    pub fn cutoff(&self) -> tokio::time::Instant {
        self.cutoff
    }

    /// When the key expires once completed (epoch seconds), by the
    /// store's one formula ([`IdempotencyStore::expires_at`]) from the
    /// completion's time: once a completion was made (with [`Self::claim`],
    /// [`Self::completion`] or by the layer), exactly the expiry it wrote,
    /// which the layer publishes in [`EXPIRES_HEADER`]; before, that of a
    /// completion now.
    pub fn expires_at(&self) -> u64 {
        let at = match self.completed_at.load(Ordering::SeqCst) {
            0 => epoch_ms(),
            at => at,
        };
        self.store.expires_at(at)
    }

    /// What the stored response answers.
    fn answered(&self) -> Answered<'_> {
        Answered {
            route: &self.route,
            target: &self.target,
        }
    }
}

/// What only the DynamoDB store can do: the completion committed with the
/// service's own DynamoDB writes.
impl HttpClaim<IdempotencyStore> {
    /// The transactional form: the completion of this claim with
    /// `response`, as a write to commit in the inner service's own
    /// `TransactWriteItems` beside its business write. Answer with
    /// [`Committed`] in the response's extensions once it committed, and
    /// with exactly `response` ([`StoredResponse::to_response`]), so the
    /// first answer and its replays agree. The request's method, path,
    /// query and identity headers are stored with it, so that the key
    /// reused on another request is refused (422); a completion built
    /// from [`Self::claim`] with the store directly stores none, and
    /// replays to any request with the key and payload.
    ///
    /// Errors: [`StoreError::ItemTooLarge`] when the response would not
    /// fit in the key's record: then do not commit the business write
    /// either (answer a 5xx, which gives the key back), or answer a
    /// smaller response.
    pub fn completion(&self, response: &StoredResponse) -> Result<TransactWriteItem, StoreError> {
        self.store
            .completion(&self.claim(), &response.encode_for(self.answered()))
    }
}

/// When store calls stop for a request with `deadline_ms` (epoch
/// milliseconds): `margin` before it.
pub fn cutoff(deadline_ms: u64, margin: Duration) -> tokio::time::Instant {
    let left = Duration::from_millis(deadline_ms.saturating_sub(epoch_ms())).saturating_sub(margin);
    let now = tokio::time::Instant::now();
    // `Instant + Duration` panics on overflow: an absurd deadline (a
    // `Deadline(u64::MAX)`, some 584 million years) may be beyond what an
    // Instant holds on some platform; then no cutoff before the lease's
    // longest end.
    now.checked_add(left)
        .or_else(|| now.checked_add(MAX_LEASE))
        .unwrap_or(now)
}

/// A request's route for its key: its method and path, hashed. A key is
/// one request (IETF httpapi draft): reused on another route it is
/// refused (422) like one reused with another body, never answered with
/// the other route's response.
///
/// The path is compared as sent: `/payments` and `/payments/` are two
/// routes (a router may serve them differently), so a key reused across
/// them is 422.
fn route_of(req: &Request) -> String {
    hashed_key(&["route", req.method().as_str(), req.uri().path()])
}

/// A request's identity beside its payload: its method, path, query
/// string (as sent, byte for byte: another order or encoding of the same
/// parameters is another request) and the values of the `headers` it
/// names (each name with every value, in order; an absent header is
/// none), hashed. Stored with the response and checked before a replay.
fn target_of(req: &Request, headers: &[String]) -> String {
    let mut parts = vec![
        "target",
        req.method().as_str(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
    ];
    let values: Vec<Vec<&[u8]>> = headers
        .iter()
        .map(|name| {
            req.headers()
                .get_all(name.as_str())
                .iter()
                .map(HeaderValue::as_bytes)
                .collect()
        })
        .collect();
    let mut texts = Vec::new();
    for (name, values) in headers.iter().zip(&values) {
        // The count first, so that no two lists of values hash alike;
        // a value that is not UTF-8 is hashed by its bytes, escaped.
        texts.push(format!("{name}:{}", values.len()));
        for v in values {
            texts.push(String::from_utf8_lossy(v).into_owned());
        }
    }
    parts.extend(texts.iter().map(String::as_str));
    hashed_key(&parts)
}

/// Run a store call unless the cutoff has come, and stop waiting for it
/// there ([`StoreError::DeadlineExceeded`]).
pub async fn cut<T>(
    cutoff: tokio::time::Instant,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    // Past the cutoff, the call is not even started (a future does nothing
    // until polled, and `timeout_at` polls it once before looking at the
    // clock): a write whose answer nobody waits for is a write the client
    // cannot know about.
    if tokio::time::Instant::now() >= cutoff {
        return Err(StoreError::DeadlineExceeded);
    }
    tokio::time::timeout_at(cutoff, call)
        .await
        .unwrap_or(Err(StoreError::DeadlineExceeded))
}

/// A `lambda_http` service behind the Idempotency-Key layer.
#[derive(Clone)]
pub struct IdempotentService<S, P = IdempotencyStore> {
    inner: S,
    config: Arc<Config<P>>,
}

impl<S: fmt::Debug, P> fmt::Debug for IdempotentService<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotentService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, P> Service<Request> for IdempotentService<S, P>
where
    P: Persistence,
    S: Service<Request, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The ready inner service answers this request; a fresh clone
        // waits for the next one (tower's usual swap).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move {
            if !config.methods.contains(req.method()) {
                let mut inner = inner;
                return inner.call(req).await;
            }
            config.serve(inner, req).await
        })
    }
}

impl<P: Persistence> Config<P> {
    fn problem(&self, kind: ProblemKind, detail: impl Into<String>) -> Problem {
        let p = kind.with(&self.problem_prefix, detail);
        match &self.map_problem {
            Some(f) => f(kind, p),
            None => p,
        }
    }

    fn store_problem(&self, e: &StoreError) -> Response<Body> {
        if e.is_retryable() {
            tracing::warn!(error = %e, "the idempotency store did not confirm");
            self.problem(
                ProblemKind::Unavailable,
                "the store did not confirm in time or was throttled; retry with the same Idempotency-Key",
            )
            .retry_after(1)
            .into_response()
        } else {
            tracing::error!(error = %e, "the idempotency store refused the request");
            self.problem(ProblemKind::Internal, "the store refused the request")
                .into_response()
        }
    }

    fn expires(&self, expires_at: u64) -> HeaderValue {
        // An expiry beyond what SystemTime holds is not a time to publish.
        let Some(at) = UNIX_EPOCH.checked_add(Duration::from_secs(expires_at)) else {
            return HeaderValue::from_static("");
        };
        let at = rfc3339(at);
        // RFC 3339 is ASCII.
        HeaderValue::try_from(at).unwrap_or(HeaderValue::from_static(""))
    }

    async fn serve<S>(&self, mut inner: S, mut req: Request) -> Result<Response<Body>, S::Error>
    where
        S: Service<Request, Response = Response<Body>>,
    {
        // Who calls, before anything else: an unidentified caller learns
        // nothing, not even whether its request was well-formed.
        let scope = match Scope::of_request(self.auth, &self.role_sessions, &req) {
            Ok(scope) => scope,
            Err(e) => {
                // Logged (without any value): under a configured authorizer
                // it means a route is not behind it, a deployment problem.
                tracing::warn!(error = %e, "request refused: no principal");
                return Ok(self
                    .problem(
                        ProblemKind::Forbidden,
                        "the request carries no principal from the authorizer this API is configured for",
                    )
                    .into_response());
            }
        };
        let key = match key_of(req.headers()) {
            Ok(k) => k,
            Err(e) => {
                return Ok(self
                    .problem(ProblemKind::InvalidIdempotencyKey, e.to_string())
                    .into_response());
            }
        };
        let fp = match (self.fingerprint)(&req) {
            Ok(fp) => fp,
            Err(answer) => return Ok(*answer),
        };
        let deadline_ms = match req.extensions().get::<Deadline>() {
            Some(Deadline(ms)) => *ms,
            None => match req.lambda_context_ref() {
                Some(cx) => deadline_epoch_ms(cx.deadline),
                None => epoch_ms().saturating_add(DEFAULT_BUDGET.as_millis() as u64),
            },
        };
        let now_ms = epoch_ms();
        let max_lease = MAX_LEASE.as_millis() as u64;
        let held = HttpClaim {
            store: self.store.clone(),
            key: record_key(&scope, &key),
            scope,
            fingerprint: fp,
            attempt: unique_id(),
            lease_until_ms: deadline_ms.clamp(
                now_ms.saturating_add(1),
                now_ms.saturating_add(max_lease.max(1)),
            ),
            now_ms,
            deadline_ms,
            cutoff: cutoff(deadline_ms, self.deadline_margin),
            route: route_of(&req),
            target: target_of(&req, &self.identity_headers),
            completed_at: Arc::new(AtomicU64::new(0)),
        };
        let cutoff = held.cutoff;
        match cut(cutoff, self.store.claim(&held.at(held.now_ms))).await {
            Ok(Claimed::Held) => {}
            Ok(Claimed::Refused(Refusal::Completed(stored))) => {
                return Ok(match replay(&stored.output, held.answered()) {
                    Err(ReplayRefused::OtherRequest) => self
                        .problem(
                            ProblemKind::KeyReused,
                            "this Idempotency-Key was used with another method, path, query or header; use a new key for a new request",
                        )
                        .into_response(),
                    Ok(response) => {
                        let mut r = response.to_response();
                        r.headers_mut()
                            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
                        r.headers_mut()
                            .insert(EXPIRES_HEADER, self.expires(stored.expires_at));
                        r
                    }
                    Err(ReplayRefused::Corrupt(e)) => self.store_problem(&e),
                });
            }
            Ok(Claimed::Refused(Refusal::OtherPayload)) => {
                return Ok(self
                    .problem(
                        ProblemKind::KeyReused,
                        "this Idempotency-Key was used with another request body; use a new key for a new request",
                    )
                    .into_response());
            }
            Ok(Claimed::Refused(Refusal::InProgress { .. })) => {
                return Ok(self
                    .problem(
                        ProblemKind::RequestInProgress,
                        "retry after the first request with this Idempotency-Key has been answered",
                    )
                    .retry_after(self.retry_after)
                    .into_response());
            }
            // Cut off: no time to give anything back (the lease ends at the
            // deadline, within the margin).
            Err(StoreError::DeadlineExceeded) => {
                return Ok(self.store_problem(&StoreError::DeadlineExceeded));
            }
            Err(e) => {
                // The claim may have committed unseen (its answer lost on
                // every try): give it back, so that the client's retry is
                // not held off by 409 until the lease ends. Only this
                // attempt's claim, only while in progress.
                self.release(&held).await;
                return Ok(self.store_problem(&e));
            }
        }
        req.extensions_mut().insert(held.clone());
        req.extensions_mut().insert(WillBeStored);
        let mut response = match inner.call(req).await {
            Ok(r) => r,
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        match response.extensions().get::<Uncollected>() {
            Some(Uncollected::TooLarge) => return Ok(self.too_large(&held).await),
            // Not stored, not given back: the service ran (as for a failed
            // completion below).
            Some(why) => {
                return Ok(self
                    .problem(ProblemKind::Internal, why.detail())
                    .into_response());
            }
            None => {}
        }
        let committed = response.extensions_mut().remove::<Committed>().is_some();
        let after = after_service(response.status(), committed);
        if after == AfterService::AlreadyCommitted {
            // The transactional form: the inner service wrote the
            // completion with its own write.
        } else if after == AfterService::Release {
            // Nothing to replay: a 5xx, or a 429/408 that asks the client
            // to come back later (`after_service`).
            self.release(&held).await;
            return Ok(response);
        } else {
            let stored = StoredResponse::of(&response, &self.stored_headers);
            // Bounded by the deadline itself, not the cutoff: the effect
            // ran, and an output left unrecorded lets the retry after the
            // lease run it again. A completion that commits unseen at the
            // deadline is still the retry's replay; the margin only served
            // to answer in time.
            let end = self::cutoff(held.deadline_ms, Duration::ZERO);
            let completing = held.claim();
            let output = stored.encode_for(held.answered());
            match cut(end, self.store.complete(&completing, &output)).await {
                Ok(()) => {}
                Err(StoreError::ItemTooLarge) => return Ok(self.too_large(&held).await),
                // The service has run: its effect may be committed. Giving
                // the key back would let the client's retry run it again at
                // once; kept, the key answers 409 until its lease ends (as
                // `Idempotent` keeps a claim whose completion failed). Only
                // the transactional form closes this window.
                Err(e) => return Ok(self.store_problem(&e)),
            }
        }
        response.headers_mut().insert(
            HeaderName::from_static(EXPIRES_HEADER),
            self.expires(held.expires_at()),
        );
        Ok(response)
    }

    /// The answer to a request whose service ran but whose response is too
    /// large to store: the key is completed with this answer instead (the
    /// effect counts: given back, or left to its lease, the key would run
    /// the service again at every retry, and again after every lease, for
    /// an answer that never fits), so the first caller and every repeat
    /// get the same problem.
    async fn too_large(&self, held: &HttpClaim<P>) -> Response<Body> {
        tracing::error!(
            "the service ran, but its response is too large to store for its Idempotency-Key: the key is completed with a problem instead"
        );
        let problem = self
            .problem(
                ProblemKind::ResponseTooLarge,
                "this request was processed, but its response cannot be kept for its Idempotency-Key, nor replayed; do not send it again with a new key unless you mean a new request",
            )
            .into_response();
        let stored = StoredResponse::of(&problem, &self.stored_headers);
        let end = self::cutoff(held.deadline_ms, Duration::ZERO);
        let completing = held.claim();
        let output = stored.encode_for(held.answered());
        if let Err(e) = cut(end, self.store.complete(&completing, &output)).await {
            // Kept until its lease ends, as any unconfirmed completion.
            return self.store_problem(&e);
        }
        let mut problem = problem;
        problem.headers_mut().insert(
            HeaderName::from_static(EXPIRES_HEADER),
            self.expires(held.expires_at()),
        );
        problem
    }

    /// Give the claim back, within the cutoff like every other call: the
    /// answer must not wait for it (the lease ends at the deadline anyway).
    async fn release(&self, held: &HttpClaim<P>) {
        let release = async {
            self.store.release(&held.at(held.now_ms)).await;
            Ok(())
        };
        let _ = cut(held.cutoff, release).await;
    }
}

#[cfg(test)]
mod decision_tests {
    use super::*;

    #[test]
    fn after_the_service_errors_asking_for_a_retry_are_released() {
        for (status, want) in [
            (200, AfterService::Complete),
            (201, AfterService::Complete),
            (404, AfterService::Complete),
            (422, AfterService::Complete),
            (408, AfterService::Release),
            (429, AfterService::Release),
            (500, AfterService::Release),
            (503, AfterService::Release),
        ] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(after_service(status, false), want, "{status}");
            assert_eq!(after_service(status, true), AfterService::AlreadyCommitted);
        }
    }

    #[test]
    fn a_replay_is_refused_to_another_request_only() {
        let at = |route, target| Answered { route, target };
        let stored = StoredResponse::new(201).text("{\"id\":1}");
        let encoded = stored.encode_for(at("r1", "t1"));
        assert_eq!(replay(&encoded, at("r1", "t1")), Ok(stored.clone()));
        // Another route, or the same route with another query or header.
        for other in [at("r2", "t2"), at("r1", "t2")] {
            assert_eq!(replay(&encoded, other), Err(ReplayRefused::OtherRequest));
        }
        // Stored before routes were: replays anywhere.
        assert_eq!(replay(&stored.encode(), at("r2", "t2")), Ok(stored));
        assert!(matches!(
            replay("not json", at("r1", "t1")),
            Err(ReplayRefused::Corrupt(_))
        ));
    }
}
