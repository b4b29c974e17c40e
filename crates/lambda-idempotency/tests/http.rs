//! The Idempotency-Key layer against a real DynamoDB-compatible server
//! (in-process dynoxide), in front of a toy service that counts its calls:
//! every row of what a client sees (the `http` module's docs), and the
//! transactional form.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use lambda_http::http::{HeaderValue, Method};
use lambda_http::tower::{Layer, Service, ServiceExt, service_fn};
use lambda_http::{Body, Request, Response};
use lambda_idempotency::http::{
    AuthMode, Committed, Deadline, HttpClaim, IdempotencyLayer, Scope, StoredResponse,
};
use lambda_idempotency::idempotency::{IdempotencyOptions, IdempotencyStore, IdempotencyTable};
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency_testing::{
    HttpApiCaller, HttpApiRequest, RequestCounter, client_for, create_table, hold_key, scan_all,
    start_dynoxide, unique_name,
};
use serde_json::{Value, json};

/// A fresh idempotency table (and a table for the toy's own writes).
struct Db {
    endpoint: String,
    client: Client,
    table: String,
    effects: String,
}

impl Db {
    async fn new() -> Db {
        let endpoint = start_dynoxide().await;
        let client = client_for(&endpoint);
        let table = unique_name("http-idem");
        let effects = unique_name("http-effects");
        create_table(&client, &table, "id").await.expect("table");
        create_table(&client, &effects, "pk").await.expect("table");
        Db {
            endpoint,
            client,
            table,
            effects,
        }
    }

    fn store(&self) -> IdempotencyStore {
        self.store_with(self.client.clone())
    }

    fn store_with(&self, client: Client) -> IdempotencyStore {
        let table = IdempotencyTable::new(self.table.clone()).expect("a valid name");
        IdempotencyStore::new(client, table, IdempotencyOptions::default()).expect("valid options")
    }

    async fn records(&self) -> Vec<std::collections::HashMap<String, AttributeValue>> {
        scan_all(&self.client, &self.table).await
    }
}

/// The toy service: answers `status` (201 unless set) with a body that
/// counts its calls, a Location, and a header that is not stored.
#[derive(Clone, Default)]
struct Toy {
    calls: Arc<AtomicU64>,
    status: Arc<AtomicU16>,
}

impl Toy {
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    fn service(
        &self,
    ) -> impl Service<
        Request,
        Response = Response<Body>,
        Error = lambda_http::Error,
        Future = impl Send + 'static,
    > + Clone
    + Send
    + 'static {
        let toy = self.clone();
        service_fn(move |_req: Request| {
            let toy = toy.clone();
            async move {
                let n = toy.calls.fetch_add(1, Ordering::SeqCst) + 1;
                let status = match toy.status.load(Ordering::SeqCst) {
                    0 => 201,
                    s => s,
                };
                let r = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .header("location", format!("/things/{n}"))
                    .header("x-request-id", format!("req-{n}"))
                    .body(Body::Text(format!("{{\"call\":{n}}}")))?;
                Ok::<_, lambda_http::Error>(r)
            }
        })
    }
}

/// An API Gateway HTTP API (payload 2.0) request, as `lambda_http` reads
/// it, from the IAM user `caller` (none: no authorizer).
fn request(method: &str, key: Option<&str>, body: &str, caller: Option<&str>) -> Request {
    request_to(method, "/things", key, body, caller)
}

/// [`request`] to `path`.
fn request_to(
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
    caller: Option<&str>,
) -> Request {
    let method = Method::from_bytes(method.as_bytes()).expect("a method");
    let mut r = HttpApiRequest::new(method, path)
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    if let Some(arn) = caller {
        r = r.caller(HttpApiCaller::iam(arn));
    }
    r.build().expect("an HTTP API request")
}

const ALICE: Option<&str> = Some("arn:aws:iam::123456789012:user/alice");
const BOB: Option<&str> = Some("arn:aws:iam::123456789012:user/bob");
const BODY: &str = r#"{"item":"book","qty":1}"#;

async fn send<S>(svc: &S, req: Request) -> Response<Body>
where
    S: Service<Request, Response = Response<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    svc.clone().oneshot(req).await.expect("no service error")
}

fn text(r: &Response<Body>) -> String {
    String::from_utf8_lossy(r.body().as_ref()).into_owned()
}

fn header<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

fn problem_type(r: &Response<Body>) -> String {
    assert_eq!(header(r, "content-type"), Some("application/problem+json"));
    let v: Value = serde_json::from_str(&text(r)).expect("a problem body");
    assert_eq!(v["status"], json!(r.status().as_u16()));
    v["type"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_first_request_runs_once_and_its_repeats_replay_it_byte_for_byte() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let first = send(&svc, request("POST", Some("k1"), BODY, ALICE)).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let expires = header(&first, "idempotency-expires").expect("the expiry, published");
    let stored = db.records().await;
    assert_eq!(stored.len(), 1);
    let exp: u64 = stored[0]["expiration"]
        .as_n()
        .expect("a number")
        .parse()
        .unwrap();
    assert_eq!(
        expires,
        lambda_idempotency::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(exp))
    );
    // The same payload in another key order, and the key quoted.
    let same = r#"{ "qty": 1, "item": "book" }"#;
    for key in ["k1", "\"k1\""] {
        let again = send(&svc, request("POST", Some(key), same, ALICE)).await;
        assert_eq!(again.status(), 201);
        assert_eq!(again.body(), first.body(), "byte for byte");
        assert_eq!(header(&again, "location"), header(&first, "location"));
        assert_eq!(header(&again, "content-type"), Some("application/json"));
        assert_eq!(header(&again, "idempotency-expires"), Some(expires));
        assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
        // A header that is not among the stored ones is not replayed.
        assert_eq!(header(&again, "x-request-id"), None);
    }
    assert_eq!(toy.calls(), 1, "the service ran once");
}

#[tokio::test]
async fn a_key_whose_first_request_runs_is_409_with_retry_after() {
    let db = Db::new().await;
    let toy = Toy::default();
    let store = db.store();
    let svc = IdempotencyLayer::new(store.clone(), AuthMode::Iam).layer(toy.service());
    // Another attempt holds the key (it runs, or died), its lease 5 s long.
    let scope = Scope::Iam(ALICE.unwrap_or_default().to_owned());
    let first = request("POST", Some("k"), BODY, ALICE);
    hold_key(&store, &scope, "k", &first, Duration::from_secs(5)).await;
    let r = send(&svc, request("POST", Some("k"), BODY, ALICE)).await;
    assert_eq!(r.status(), 409, "{}", text(&r));
    assert_eq!(header(&r, "retry-after"), Some("1"));
    assert!(problem_type(&r).ends_with(":request-in-progress"));
    assert_eq!(toy.calls(), 0);
}

#[tokio::test]
async fn a_key_reused_with_another_payload_is_422() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .problem_prefix("urn:shop:problem:")
        .layer(toy.service());
    assert_eq!(
        send(&svc, request("POST", Some("k"), BODY, ALICE))
            .await
            .status(),
        201
    );
    let other = r#"{"item":"book","qty":2}"#;
    let r = send(&svc, request("POST", Some("k"), other, ALICE)).await;
    assert_eq!(r.status(), 422, "{}", text(&r));
    assert_eq!(problem_type(&r), "urn:shop:problem:idempotency-key-reused");
    assert!(!text(&r).contains("qty"));
    assert_eq!(toy.calls(), 1);
}

#[tokio::test]
async fn a_missing_malformed_or_repeated_key_is_400_and_nothing_is_stored() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let long = "k".repeat(256);
    for key in [
        None,
        Some(""),
        Some("a b"),
        Some("\"open"),
        Some(long.as_str()),
        // How API Gateway joins a header sent twice: not a key.
        Some("k1,k2"),
        Some("\"k1\", \"k2\""),
    ] {
        let r = send(&svc, request("POST", key, BODY, ALICE)).await;
        assert_eq!(r.status(), 400, "{key:?}: {}", text(&r));
        assert!(problem_type(&r).ends_with(":invalid-idempotency-key"));
    }
    // The header twice, as a client or proxy may send it to lambda_http.
    let mut req = request("POST", Some("k1"), BODY, ALICE);
    req.headers_mut()
        .append("idempotency-key", HeaderValue::from_static("k2"));
    let r = send(&svc, req).await;
    assert_eq!(r.status(), 400, "{}", text(&r));
    assert!(db.records().await.is_empty());
    assert_eq!(toy.calls(), 0);
}

#[tokio::test]
async fn keys_are_scoped_by_the_principal() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let a = send(&svc, request("POST", Some("shared"), BODY, ALICE)).await;
    let b = send(&svc, request("POST", Some("shared"), BODY, BOB)).await;
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (201, 201));
    assert_eq!(
        header(&b, "idempotent-replayed"),
        None,
        "bob's key is his own"
    );
    assert_ne!(a.body(), b.body());
    let again = send(&svc, request("POST", Some("shared"), BODY, BOB)).await;
    assert_eq!(again.body(), b.body());
    assert_eq!(toy.calls(), 2);
    // No principal from the configured authorizer: 403, before the key is
    // even read, and nothing stored.
    let r = send(&svc, request("POST", None, "not json", None)).await;
    assert_eq!(r.status(), 403, "{}", text(&r));
    assert!(problem_type(&r).ends_with(":forbidden"));
    assert_eq!(db.records().await.len(), 2);
    assert_eq!(toy.calls(), 2);
}

#[tokio::test]
async fn an_unlisted_method_passes_through_untouched() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    // GET, without key or principal: the service answers as it would alone.
    let r = send(&svc, request("GET", None, "", None)).await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "x-request-id"), Some("req-1"));
    assert_eq!(header(&r, "idempotency-expires"), None);
    // Methods configured: POST is no longer one of them, PUT is.
    let put_only = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .methods([Method::PUT])
        .layer(toy.service());
    let r = send(&put_only, request("POST", None, BODY, None)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    let r = send(&put_only, request("PUT", None, BODY, ALICE)).await;
    assert_eq!(r.status(), 400, "{}", text(&r));
    assert!(db.records().await.is_empty());
    assert_eq!(toy.calls(), 2);
}

#[tokio::test]
async fn an_inner_5xx_or_error_gives_the_key_back() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    toy.answer(503);
    let r = send(&svc, request("POST", Some("k"), BODY, ALICE)).await;
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "idempotency-expires"), None);
    assert!(db.records().await.is_empty(), "the key was given back");
    // The retry runs again, and is stored this time.
    toy.answer(201);
    let r = send(&svc, request("POST", Some("k"), BODY, ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    assert_eq!(toy.calls(), 2);
    // A 429 or 408 asks the client to come back: not stored, the key is
    // given back and the retry runs again.
    for status in [429, 408] {
        toy.answer(status);
        let key = format!("busy-{status}");
        let r = send(&svc, request("POST", Some(&key), BODY, ALICE)).await;
        assert_eq!(r.status().as_u16(), status);
        toy.answer(201);
        let r = send(&svc, request("POST", Some(&key), BODY, ALICE)).await;
        assert_eq!(r.status(), 201, "{status}: the retry ran: {}", text(&r));
        assert_eq!(header(&r, "idempotent-replayed"), None);
    }
    let records_before_k2 = db.records().await.len();
    // Another 4xx of the service is its answer: stored and replayed.
    toy.answer(402);
    let first = send(&svc, request("POST", Some("k2"), BODY, ALICE)).await;
    toy.answer(201);
    let again = send(&svc, request("POST", Some("k2"), BODY, ALICE)).await;
    assert_eq!(
        (first.status().as_u16(), again.status().as_u16()),
        (402, 402)
    );
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    // A service error (no answer at all): the key is given back too.
    let failing =
        IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(service_fn(|_req: Request| async {
            Err::<Response<Body>, lambda_http::Error>("down".into())
        }));
    let r = failing
        .oneshot(request("POST", Some("k3"), BODY, ALICE))
        .await;
    assert!(r.is_err());
    assert_eq!(
        db.records().await.len(),
        records_before_k2 + 1,
        "k, the two retried keys and k2; not k3"
    );
}

/// The service ran and answered, but its answer cannot be stored (a body
/// over DynamoDB's 400 KB item limit, which dynoxide enforces): the key is
/// kept, so the client's retry is held off (409) instead of running the
/// effect a second time.
/// The completion is refused (a validation error DynamoDB would answer
/// for, say, a removed TTL attribute's type): the service ran, so its key
/// is kept, in progress until its lease ends, and the retry is 409, not a
/// second run.
#[tokio::test]
async fn a_completion_that_fails_after_the_service_ran_keeps_the_key() {
    use lambda_idempotency_testing::proxy::{Fault, FaultProxy};
    let db = Db::new().await;
    let proxy = FaultProxy::start(&db.endpoint, 31).await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store_with(client_for(&proxy.url())), AuthMode::Iam)
        .layer(toy.service());
    proxy.set_first(
        Fault::ByOperation(&[("UpdateItem", Fault::Error(400, "ValidationException"))]),
        1,
    );
    let r = send(&svc, request("POST", Some("big"), BODY, ALICE)).await;
    assert!(r.status().is_server_error(), "{}", r.status());
    assert_eq!(toy.calls(), 1);
    let again = send(&svc, request("POST", Some("big"), BODY, ALICE)).await;
    assert_eq!(
        again.status(),
        409,
        "the key is still held: {}",
        text(&again)
    );
    assert_eq!(toy.calls(), 1, "the effect ran once");
    assert_eq!(db.records().await.len(), 1, "the claim is kept");
}

#[tokio::test]
async fn the_transactional_form_commits_the_completion_with_the_effect() {
    let db = Db::new().await;
    let counter = RequestCounter::default();
    let conf = db
        .client
        .config()
        .to_builder()
        .interceptor(counter.clone())
        .build();
    let store = db.store_with(Client::from_conf(conf));
    let effects = db.effects.clone();
    let calls = Arc::new(AtomicU64::new(0));
    let calls_in = calls.clone();
    // The effect and the key's completion in one TransactWriteItems.
    let inner = service_fn(move |req: Request| {
        let effects = effects.clone();
        let calls = calls_in.clone();
        async move {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            let held = req
                .extensions()
                .get::<HttpClaim>()
                .cloned()
                .ok_or("no claim")?;
            let response = StoredResponse::new(201)
                .header("content-type", "application/json")
                .text(format!("{{\"effect\":{n}}}"));
            let put = Put::builder()
                .table_name(effects)
                .item("pk", AttributeValue::S(format!("effect-{n}")))
                .build()?;
            let items = vec![
                held.completion(&response)?,
                TransactWriteItem::builder().put(put).build(),
            ];
            held.store().transact(&held.claim(), items).await?;
            let mut r = response.to_response();
            r.extensions_mut().insert(Committed);
            Ok::<_, lambda_http::Error>(r)
        }
    });
    let svc = IdempotencyLayer::new(store, AuthMode::Iam).layer(inner);
    let first = send(&svc, request("POST", Some("k"), BODY, ALICE)).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    assert_eq!(
        header(&first, "idempotency-expires"),
        Some(stored_expiry(&db).await.as_str()),
        "the expiry the transaction wrote, published"
    );
    assert_eq!(
        counter.get(),
        2,
        "the claim and the transaction, no completion after it"
    );
    let again = send(&svc, request("POST", Some("k"), BODY, ALICE)).await;
    assert_eq!(again.body(), first.body());
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(scan_all(&db.client, &db.effects).await.len(), 1);
}

/// An axum `Router` (its body `axum::body::Body`) behind the layer through
/// `collecting`: it counts its calls; `/things` answers JSON, `/big` a body
/// one byte over the limit set below.
fn router(calls: Arc<AtomicU64>) -> axum::Router {
    use axum::extract::State;
    use axum::routing::post;
    async fn things(State(calls): State<Arc<AtomicU64>>, body: String) -> axum::response::Response {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let mut r = axum::response::Response::new(axum::body::Body::from(format!(
            "{{\"call\":{n},\"len\":{}}}",
            body.len()
        )));
        *r.status_mut() = lambda_http::http::StatusCode::CREATED;
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
        r
    }
    async fn big(State(calls): State<Arc<AtomicU64>>) -> String {
        calls.fetch_add(1, Ordering::SeqCst);
        "x".repeat(AXUM_LIMIT + 1)
    }
    async fn busy(State(calls): State<Arc<AtomicU64>>) -> (axum::http::StatusCode, String) {
        calls.fetch_add(1, Ordering::SeqCst);
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "x".repeat(AXUM_LIMIT * 2),
        )
    }
    axum::Router::new()
        .route("/things", post(things))
        .route("/big", post(big))
        .route("/busy", post(busy))
        .with_state(calls)
}

const AXUM_LIMIT: usize = 1024;

/// What `lambda_http::run` needs of a service, checked at compile time:
/// the wrapped router is a function `lambda_http` can run.
#[allow(dead_code)]
async fn a_wrapped_router_runs_under_lambda_http(
    svc: lambda_idempotency::http::IdempotentService<
        lambda_idempotency::http::CollectBody<axum::Router>,
    >,
) -> Result<(), lambda_http::Error> {
    lambda_http::run(svc).await
}

#[tokio::test]
async fn an_axum_router_behind_the_layer_runs_once_replays_and_refuses_another_payload() {
    let db = Db::new().await;
    let calls = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .max_response_bytes(AXUM_LIMIT)
        .collecting(router(calls.clone()));
    let first = send(&svc, request("POST", Some("ax1"), BODY, ALICE)).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    // Text, as lambda_http::run would send the router's JSON.
    assert_eq!(
        first.body(),
        &Body::Text(format!("{{\"call\":1,\"len\":{}}}", BODY.len()))
    );
    let again = send(&svc, request("POST", Some("ax1"), BODY, ALICE)).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.body(), first.body(), "byte for byte");
    assert_eq!(header(&again, "content-type"), Some("application/json"));
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    let other = send(
        &svc,
        request("POST", Some("ax1"), r#"{"item":"pen"}"#, ALICE),
    )
    .await;
    assert_eq!(other.status(), 422, "{}", text(&other));
    assert!(problem_type(&other).ends_with("idempotency-key-reused"));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the router ran once");
}

/// An answer over the limit: the router ran, so its key is completed with
/// the problem `response-too-large`, which the first request and every
/// retry get; the router does not run again (it did, after every lease,
/// when the key was only kept).
#[tokio::test]
async fn an_axum_answer_over_the_limit_is_500_and_completes_the_key_with_it() {
    let db = Db::new().await;
    let calls = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .max_response_bytes(AXUM_LIMIT)
        .collecting(router(calls.clone()));
    let big = || request_to("POST", "/big", Some("big1"), BODY, ALICE);
    let first = send(&svc, big()).await;
    assert_eq!(first.status(), 500, "{}", text(&first));
    assert!(problem_type(&first).ends_with(":response-too-large"));
    assert!(text(&first).len() < AXUM_LIMIT, "the problem, not the body");
    let retry = send(&svc, big()).await;
    assert_eq!(retry.status(), 500, "{}", text(&retry));
    assert_eq!(retry.body(), first.body(), "the same answer");
    assert_eq!(header(&retry, "idempotent-replayed"), Some("true"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let records = db.records().await;
    assert_eq!(text_of(&records[0], "status"), "COMPLETED");
    // A GET passes through with the larger pass-through limit.
    let mut get = request("GET", None, "", ALICE);
    *get.uri_mut() = "/things".parse().expect("a path");
    let r = send(&svc, get).await;
    assert_eq!(r.status(), 405, "the router's own answer");
}

fn text_of(item: &std::collections::HashMap<String, AttributeValue>, k: &str) -> String {
    match item.get(k) {
        Some(AttributeValue::S(v)) | Some(AttributeValue::N(v)) => v.clone(),
        other => panic!("{k}: {other:?}"),
    }
}

/// A service whose answer is `status` with `body` of `content_type`,
/// counting its calls.
fn answering(
    calls: Arc<AtomicU64>,
    status: u16,
    content_type: &'static str,
    body: Body,
) -> impl Service<
    Request,
    Response = Response<Body>,
    Error = lambda_http::Error,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    service_fn(move |_req: Request| {
        calls.fetch_add(1, Ordering::SeqCst);
        let body = body.clone();
        async move {
            Ok::<_, lambda_http::Error>(
                Response::builder()
                    .status(status)
                    .header("content-type", content_type)
                    .body(body)?,
            )
        }
    })
}

/// An answer under `max_response_bytes` whose record is still too large
/// for a DynamoDB item (base64 grows a binary body by a third, JSON
/// escapes a text one): the key is completed with the problem
/// `response-too-large`, on the plain path as on the collecting one; the
/// service runs once, whatever the retries and leases (it ran again after
/// every lease, and the record stayed IN_PROGRESS).
#[tokio::test]
async fn an_answer_whose_record_would_not_fit_completes_the_key_with_a_problem() {
    let db = Db::new().await;
    let cases = [
        (
            "bin",
            "application/octet-stream",
            Body::Binary(vec![7u8; 320 * 1024]),
        ),
        ("quotes", "text/plain", Body::Text("\"".repeat(210 * 1024))),
    ];
    for (key, content_type, body) in cases {
        let calls = Arc::new(AtomicU64::new(0));
        let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(answering(
            calls.clone(),
            200,
            content_type,
            body,
        ));
        // A lease of 2 s (the invocation's deadline), so that a retry
        // after it would find the key free if it were only kept.
        let req = || {
            let mut r = request("POST", Some(key), BODY, ALICE);
            r.extensions_mut().insert(Deadline(epoch_ms() + 2_000));
            r
        };
        let first = send(&svc, req()).await;
        assert_eq!(first.status(), 500, "{key}: {}", text(&first));
        assert!(
            problem_type(&first).ends_with(":response-too-large"),
            "{key}"
        );
        let retry = send(&svc, req()).await;
        assert_eq!(retry.status(), 500, "{key}: {}", text(&retry));
        assert_eq!(retry.body(), first.body(), "{key}");
        tokio::time::sleep(Duration::from_millis(3_200)).await;
        let after_lease = send(&svc, req()).await;
        assert_eq!(after_lease.status(), 500, "{key}");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "{key}: the service ran once"
        );
    }
    let records = db.records().await;
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| text_of(r, "status") == "COMPLETED"));
}

/// A 5xx, 429 or 408 is given back, not stored, whatever its length: one
/// over the store's limit passes through and its key is free at once (it
/// was kept until its lease ended).
#[tokio::test]
async fn an_answer_given_back_is_not_held_to_the_stores_limit() {
    let db = Db::new().await;
    let calls = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .max_response_bytes(AXUM_LIMIT)
        .collecting(router(calls.clone()));
    for _ in 0..2 {
        let r = send(&svc, request_to("POST", "/busy", Some("busy"), BODY, ALICE)).await;
        assert_eq!(r.status(), 503, "{}", text(&r));
        assert_eq!(text(&r).len(), AXUM_LIMIT * 2);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2, "given back: the retry ran");
    assert!(db.records().await.is_empty());
}

/// The query string is part of the request: the key reused with another
/// one is 422, never the first request's answer (it was replayed, 201).
#[tokio::test]
async fn a_key_reused_with_another_query_string_is_422() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let with_query = |q: &str| {
        HttpApiRequest::new(Method::POST, "/payments")
            .query(q)
            .header("content-type", "application/json")
            .header("idempotency-key", "q1")
            .body("{}")
            .caller(HttpApiCaller::iam(ALICE.unwrap()))
            .build()
            .expect("a request")
    };
    let first = send(&svc, with_query("amount=1&to=acct-1")).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    let other = send(&svc, with_query("amount=1000000&to=acct-2")).await;
    assert_eq!(other.status(), 422, "{}", text(&other));
    assert!(problem_type(&other).ends_with(":idempotency-key-reused"));
    assert!(!text(&other).contains("acct"), "no value echoed");
    let again = send(&svc, with_query("amount=1&to=acct-1")).await;
    assert_eq!(again.body(), first.body());
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(toy.calls(), 1);
}

/// A header named as part of the request's identity (Content-Type by
/// default): the 415 stored for `text/plain` is not the answer to the
/// corrected `application/json` retry, which is refused (422) rather than
/// replayed; with no identity headers, it replays as before.
#[tokio::test]
async fn a_key_reused_with_another_content_type_is_422() {
    let db = Db::new().await;
    let toy = Toy::default();
    toy.answer(415);
    let typed = |content_type: &str, key: &str| {
        HttpApiRequest::new(Method::POST, "/things")
            .header("content-type", content_type)
            .header("idempotency-key", key)
            .body(BODY)
            .caller(HttpApiCaller::iam(ALICE.unwrap()))
            .build()
            .expect("a request")
    };
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let first = send(&svc, typed("text/plain", "ct")).await;
    assert_eq!(first.status(), 415);
    let corrected = send(&svc, typed("application/json", "ct")).await;
    assert_eq!(corrected.status(), 422, "{}", text(&corrected));
    assert_eq!(toy.calls(), 1);
    let plain = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .identity_headers([])
        .layer(toy.service());
    let first = send(&plain, typed("text/plain", "ct2")).await;
    let replayed = send(&plain, typed("application/json", "ct2")).await;
    assert_eq!(
        (first.status().as_u16(), replayed.status().as_u16()),
        (415, 415)
    );
    assert_eq!(header(&replayed, "idempotent-replayed"), Some("true"));
}

/// Paths compare as sent: `/payments/` is another route than `/payments`
/// (a router may serve them apart), so the key is 422 there.
#[tokio::test]
async fn a_trailing_slash_is_another_route() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let first = send(
        &svc,
        request_to("POST", "/payments", Some("s"), BODY, ALICE),
    )
    .await;
    assert_eq!(first.status(), 201);
    let slash = send(
        &svc,
        request_to("POST", "/payments/", Some("s"), BODY, ALICE),
    )
    .await;
    assert_eq!(slash.status(), 422, "{}", text(&slash));
    assert_eq!(toy.calls(), 1);
}

/// A body that repeats a key is not the body of its last value: the
/// answer stored for `{"a":1,"a":2}` (say the service's 400) is not the
/// answer to the cleaned-up `{"a":2}`, which is 422.
#[tokio::test]
async fn a_body_with_a_repeated_key_is_another_payload_than_its_last_value() {
    let db = Db::new().await;
    let toy = Toy::default();
    toy.answer(400);
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let r = send(
        &svc,
        request("POST", Some("dup"), r#"{"a":1,"a":2}"#, ALICE),
    )
    .await;
    assert_eq!(r.status(), 400);
    let r = send(&svc, request("POST", Some("dup"), r#"{"a":2}"#, ALICE)).await;
    assert_eq!(r.status(), 422, "{}", text(&r));
    assert_eq!(toy.calls(), 1);
}

/// The sessions of one assumed role are two callers by default (IAM
/// Identity Center: a person behind each): bob neither gets alice's answer
/// nor learns that she used the key. A role named as a machine's shares
/// one key space across its sessions; an Identity Center role never does.
#[tokio::test]
async fn each_session_of_an_assumed_role_is_its_own_caller_unless_shared() {
    use lambda_idempotency::http::RoleSessions;
    let db = Db::new().await;
    let toy = Toy::default();
    let session = |role: &str, who: &str, body: &str| {
        let arn = format!("arn:aws:sts::123456789012:assumed-role/{role}/{who}");
        request("POST", Some("same-key"), body, Some(&arn))
    };
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let sso = "AWSReservedSSO_Orders_0a1b2c";
    let alice = send(&svc, session(sso, "alice@example.com", BODY)).await;
    let bob = send(&svc, session(sso, "bob@example.com", BODY)).await;
    assert_eq!((alice.status().as_u16(), bob.status().as_u16()), (201, 201));
    assert_ne!(alice.body(), bob.body(), "bob's answer is his own");
    assert_eq!(header(&bob, "idempotent-replayed"), None);
    let bob_other = send(&svc, session(sso, "bob@example.com", r#"{"other":1}"#)).await;
    assert_eq!(bob_other.status(), 422, "bob's own key, not alice's");
    assert_eq!(toy.calls(), 2);

    let shared = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .role_sessions(RoleSessions::Shared(vec!["Ordering".into(), sso.into()]))
        .layer(toy.service());
    let a = send(&shared, session("Ordering", "task-1", BODY)).await;
    let b = send(&shared, session("Ordering", "task-2", BODY)).await;
    assert_eq!(b.body(), a.body(), "a machine role's sessions share keys");
    assert_eq!(header(&b, "idempotent-replayed"), Some("true"));
    let carol = send(&shared, session(sso, "carol@example.com", BODY)).await;
    let dave = send(&shared, session(sso, "dave@example.com", BODY)).await;
    assert_ne!(carol.body(), dave.body(), "Identity Center stays apart");
    assert_eq!(toy.calls(), 5);
}

/// The one record's expiry, as `Idempotency-Expires` publishes it.
async fn stored_expiry(db: &Db) -> String {
    let stored = db.records().await;
    assert_eq!(stored.len(), 1);
    let exp: u64 = stored[0]["expiration"]
        .as_n()
        .expect("a number")
        .parse()
        .expect("epoch seconds");
    lambda_idempotency::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(exp))
}

/// A key is one request: reused on another path or method (same caller,
/// same body) it is 422, never the other route's stored answer; the
/// route it was first used on still replays.
#[tokio::test]
async fn a_key_reused_on_another_method_or_path_is_422() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let first = send(&svc, request_to("POST", "/orders", Some("k"), BODY, ALICE)).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    for (method, path) in [("POST", "/refunds"), ("PATCH", "/orders")] {
        let r = send(&svc, request_to(method, path, Some("k"), BODY, ALICE)).await;
        assert_eq!(r.status(), 422, "{method} {path}: {}", text(&r));
        assert!(problem_type(&r).ends_with(":idempotency-key-reused"));
        assert!(!text(&r).contains("/orders"));
    }
    let again = send(&svc, request_to("POST", "/orders", Some("k"), BODY, ALICE)).await;
    assert_eq!(again.body(), first.body());
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(toy.calls(), 1);
}

/// Two bodies that differ only beyond an f64's precision are two payloads:
/// the second is 422, not the first one's answer.
#[tokio::test]
async fn a_body_that_differs_only_beyond_f64_precision_is_another_payload() {
    let db = Db::new().await;
    let toy = Toy::default();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(toy.service());
    let first = r#"{"item":"book","price":0.1000000000000000001}"#;
    let r = send(&svc, request("POST", Some("k"), first, ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    let other = r#"{"item":"book","price":0.1}"#;
    let r = send(&svc, request("POST", Some("k"), other, ALICE)).await;
    assert_eq!(r.status(), 422, "{}", text(&r));
    assert_eq!(toy.calls(), 1);
}

/// A service that answers slowly: its response's expiry counts from the
/// completion, not from the claim, and the header publishes exactly the
/// stored expiry.
#[tokio::test]
async fn the_expiry_counts_from_the_completion_and_is_published_as_stored() {
    let db = Db::new().await;
    let ended = Arc::new(AtomicU64::new(0));
    let end = ended.clone();
    let svc =
        IdempotencyLayer::new(db.store(), AuthMode::Iam).layer(service_fn(move |_req: Request| {
            let end = end.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1_100)).await;
                end.store(epoch_ms(), Ordering::SeqCst);
                Ok::<_, lambda_http::Error>(
                    Response::builder()
                        .status(201)
                        .body(Body::Text("{}".into()))?,
                )
            }
        }));
    let r = send(&svc, request("POST", Some("slow"), BODY, ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    let stored = db.records().await;
    let exp: u64 = stored[0]["expiration"]
        .as_n()
        .expect("a number")
        .parse()
        .expect("epoch seconds");
    assert!(
        exp >= ended.load(Ordering::SeqCst) / 1000 + 3600,
        "the expiry counts from the completion"
    );
    assert_eq!(
        header(&r, "idempotency-expires"),
        Some(stored_expiry(&db).await.as_str())
    );
}

/// The service ends after the cutoff (the deadline less the margin) but
/// before the deadline: its effect ran, so the completion is still
/// attempted, and the retry replays instead of running it again once the
/// lease ends.
#[tokio::test]
async fn a_service_that_ends_after_the_cutoff_is_still_completed() {
    let db = Db::new().await;
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let svc = IdempotencyLayer::new(db.store(), AuthMode::Iam)
        .deadline_margin(Duration::from_millis(1_500))
        .layer(service_fn(move |_req: Request| {
            let calls = counted.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(800)).await;
                Ok::<_, lambda_http::Error>(
                    Response::builder()
                        .status(201)
                        .body(Body::Text("{\"late\":true}".into()))?,
                )
            }
        }));
    let with_deadline = |ms: u64| {
        let mut req = request("POST", Some("late"), BODY, ALICE);
        req.extensions_mut().insert(Deadline(epoch_ms() + ms));
        req
    };
    let r = send(&svc, with_deadline(2_000)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    // After the first's lease (its deadline): replayed, not run again.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let again = send(&svc, with_deadline(5_000)).await;
    assert_eq!(again.status(), 201, "{}", text(&again));
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Absurd but well-typed values (a `Deadline` at the end of time, an
/// expiry of `Duration::MAX`) are served, not a panic in the deadline or
/// expiry arithmetic.
#[tokio::test]
async fn absurd_deadlines_and_expiries_do_not_panic() {
    let db = Db::new().await;
    let toy = Toy::default();
    let store = db
        .store()
        .with_options(IdempotencyOptions {
            expiry: Duration::MAX,
            ..IdempotencyOptions::default()
        })
        .expect("a long expiry is valid");
    let svc = IdempotencyLayer::new(store, AuthMode::Iam).layer(toy.service());
    for _ in 0..2 {
        let mut req = request("POST", Some("k"), BODY, ALICE);
        req.extensions_mut().insert(Deadline(u64::MAX));
        let r = send(&svc, req).await;
        assert_eq!(r.status(), 201, "{}", text(&r));
    }
    assert_eq!(toy.calls(), 1);
}
