//! One contract, two stores: every case here is written once, as a
//! generic async function over [`Backend`], and run against the DynamoDB
//! store (an in-process dynoxide) and the Valkey/Redis store (a real
//! `redis-server` each test starts on a free port). A case that holds for
//! one store and not the other is a store that breaks the contract.
//!
//! `redis-server` must be on PATH (Debian's `redis-server` package): when
//! it is not, the Valkey cases fail with a message saying so, never skip.
#![cfg(all(feature = "valkey", feature = "http"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use lambda_http::http::Method;
use lambda_http::tower::{Layer, ServiceExt, service_fn};
use lambda_http::{Body, Request, Response};
use lambda_idempotency::http::{AuthMode, IdempotencyLayer, Scope};
use lambda_idempotency::idempotency::{
    Claim, Claimed, IamAuth, IdempotencyError, IdempotencyOptions, IdempotencyStore,
    IdempotencyTable, Idempotent, NotStored, Persistence, Refusal, Stored, ValkeyConfig,
    ValkeyStore,
};
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency::{ConfigError, StoreError};
use lambda_idempotency_testing::valkey::{Durability, ValkeyCluster, ValkeyServer};
use lambda_idempotency_testing::{
    HttpApiCaller, HttpApiRequest, client_for, create_idempotency_table, hold_key, scan_all,
    start_dynoxide, unique_name,
};
use serde::{Deserialize, Serialize};

const HOUR: Duration = Duration::from_secs(3600);

/// A store under test, with a way to count its records.
trait Backend: Sized {
    type Store: Persistence;
    async fn start() -> Self;
    fn store(&self, options: IdempotencyOptions) -> Self::Store;
    /// How many records the store holds now.
    async fn records(&self) -> usize;
}

/// The DynamoDB store on a fresh table of an in-process dynoxide.
struct Dynamo {
    client: Client,
    table: IdempotencyTable,
}

impl Backend for Dynamo {
    type Store = IdempotencyStore;

    async fn start() -> Self {
        let client = client_for(&start_dynoxide().await);
        let table = IdempotencyTable::new(unique_name("contract")).expect("a valid name");
        create_idempotency_table(&client, &table)
            .await
            .expect("the table");
        Dynamo { client, table }
    }

    fn store(&self, options: IdempotencyOptions) -> IdempotencyStore {
        IdempotencyStore::new(self.client.clone(), self.table.clone(), options)
            .expect("valid options")
    }

    async fn records(&self) -> usize {
        scan_all(&self.client, self.table.table_name()).await.len()
    }
}

/// A real `redis-server` of this test's own, on a free loopback port,
/// persisting every write before it answers (append-only file, fsync
/// always), as the testing crate's [`ValkeyServer`] runs it; killed when
/// dropped.
struct Valkey {
    server: ValkeyServer,
}

impl Backend for Valkey {
    type Store = ValkeyStore;

    async fn start() -> Self {
        // Never a skip: without a server the Valkey cases fail, saying why.
        let server = ValkeyServer::start(Durability::FsyncAlways)
            .await
            .unwrap_or_else(|e| panic!("the Valkey contract tests need a real server: {e}"));
        Valkey { server }
    }

    fn store(&self, options: IdempotencyOptions) -> ValkeyStore {
        self.server.store(options).expect("valid options")
    }

    async fn records(&self) -> usize {
        stored_keys(&self.server.url()).await
    }
}

/// How many of the store's records the server at `url` holds.
async fn stored_keys(url: &str) -> usize {
    let mut conn = connect(url).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("idempotency:*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    keys.len()
}

/// A cluster of three real servers in cluster mode, every slot assigned;
/// the store's URL is the first node's, and every key another node serves
/// is reached by following its `MOVED` answer.
struct ValkeyClustered {
    cluster: ValkeyCluster,
}

impl Backend for ValkeyClustered {
    type Store = ValkeyStore;

    async fn start() -> Self {
        let cluster = ValkeyCluster::start(3)
            .await
            .unwrap_or_else(|e| panic!("the Valkey cluster contract tests need real servers: {e}"));
        ValkeyClustered { cluster }
    }

    fn store(&self, options: IdempotencyOptions) -> ValkeyStore {
        self.cluster.store(options).expect("valid options")
    }

    async fn records(&self) -> usize {
        let mut records = 0;
        for url in self.cluster.urls() {
            records += stored_keys(&url).await;
        }
        records
    }
}

fn options() -> IdempotencyOptions {
    IdempotencyOptions {
        expiry: HOUR,
        ..IdempotencyOptions::default()
    }
}

fn claim<'a>(key: &'a str, fingerprint: &'a str, attempt: &'a str, now_ms: u64) -> Claim<'a> {
    Claim {
        key,
        fingerprint,
        attempt,
        lease_until_ms: now_ms + 30_000,
        now_ms,
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Charge {
    id: String,
    amount: u64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Receipt {
    reference: String,
}

#[derive(Debug, PartialEq)]
struct Declined;

impl std::fmt::Display for Declined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("declined")
    }
}

fn charge(id: &str, amount: u64) -> Charge {
    Charge {
        id: id.into(),
        amount,
    }
}

fn wrapper<S: Persistence>(store: S) -> Idempotent<Charge, Receipt, S> {
    Idempotent::new(store, "charge")
        .expect("a valid name")
        .key(|c: &Charge| Some(c.id.clone()))
        .payload(|c: &Charge| serde_json::json!({ "amount": c.amount }))
}

fn soon() -> u64 {
    epoch_ms() + 30_000
}

/// Counts its runs; answers the input's id and the run's number.
#[derive(Clone, Default)]
struct Card {
    runs: Arc<AtomicU64>,
}

impl Card {
    fn runs(&self) -> u64 {
        self.runs.load(Ordering::SeqCst)
    }

    fn charge(&self) -> impl FnOnce(Charge) -> std::future::Ready<Result<Receipt, Declined>> {
        let runs = self.runs.clone();
        move |c: Charge| {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            std::future::ready(Ok(Receipt {
                reference: format!("{}-{n}", c.id),
            }))
        }
    }

    fn decline(&self) -> impl FnOnce(Charge) -> std::future::Ready<Result<Receipt, Declined>> {
        let runs = self.runs.clone();
        move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err(Declined))
        }
    }
}

// ---------------------------------------------------------------- cases

/// The first claim holds; while it runs, the same payload is in progress
/// until its lease, another payload is refused as such; completed, a
/// repeat is answered with the output exactly as stored and its expiry.
async fn a_key_is_claimed_once_completed_and_replayed<B: Backend>(b: B) {
    let store = b.store(options());
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    assert_eq!(
        store.claim(&claim("k", "f", "a2", now + 1)).await,
        Ok(Claimed::Refused(Refusal::InProgress {
            lease_until_ms: now + 30_000
        }))
    );
    assert_eq!(
        store.claim(&claim("k", "g", "a2", now + 1)).await,
        Ok(Claimed::Refused(Refusal::OtherPayload))
    );
    store
        .complete(&first, r#"{"n": 1}"#)
        .await
        .expect("completed");
    assert_eq!(b.records().await, 1);
    assert_eq!(
        store.claim(&claim("k", "f", "a3", now + 2)).await,
        Ok(Claimed::Refused(Refusal::Completed(Stored {
            output: r#"{"n": 1}"#.into(),
            expires_at: now / 1000 + 3600,
        })))
    );
    assert_eq!(
        store.claim(&claim("k", "g", "a3", now + 2)).await,
        Ok(Claimed::Refused(Refusal::OtherPayload))
    );
    assert_eq!(
        store.claim(&claim("k2", "f", "a3", now)).await,
        Ok(Claimed::Held)
    );
}

/// Only the claim's own attempt releases it, and only while in progress;
/// only its own attempt completes it.
async fn only_the_claims_own_attempt_releases_or_completes_it<B: Backend>(b: B) {
    let store = b.store(options());
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    store.release(&claim("k", "f", "intruder", now)).await;
    assert_eq!(b.records().await, 1, "another attempt released it");
    assert_eq!(
        store.complete(&claim("k", "f", "intruder", now), "x").await,
        Err(StoreError::InconsistentRefusal),
        "another attempt completed it"
    );
    store.release(&first).await;
    assert_eq!(b.records().await, 0, "its own attempt did not release it");
    let retry = claim("k", "f", "a2", now + 1);
    assert_eq!(store.claim(&retry).await, Ok(Claimed::Held));
    store.complete(&retry, "out").await.expect("completed");
    store.release(&retry).await;
    assert_eq!(b.records().await, 1, "a completed record was released");
}

/// Expiry from the stored time: a completed key past its expiry (still
/// held by the server) is claimed again; a crashed call's claim is taken
/// over once its lease and the skew allowance are over, and the crashed
/// attempt can no longer complete it.
async fn an_expired_key_or_an_ended_lease_is_claimed_again<B: Backend>(b: B) {
    let store = b.store(IdempotencyOptions {
        expiry: Duration::from_secs(60),
        ..options()
    });
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    store.complete(&first, "out").await.expect("completed");
    let just_before = claim("k", "f", "a2", (now / 1000 + 59) * 1000);
    assert!(matches!(
        store.claim(&just_before).await,
        Ok(Claimed::Refused(Refusal::Completed(_)))
    ));
    let after = claim("k", "g", "a3", (now / 1000 + 60) * 1000);
    assert_eq!(store.claim(&after).await, Ok(Claimed::Held));
    for late in [0, 30_000, 30_999] {
        let during = claim("k", "g", "a4", after.now_ms + late);
        assert!(
            matches!(
                store.claim(&during).await,
                Ok(Claimed::Refused(Refusal::InProgress { .. }))
            ),
            "{late} ms after the claim"
        );
    }
    let over = claim("k", "g", "a5", after.now_ms + 31_000);
    assert_eq!(store.claim(&over).await, Ok(Claimed::Held));
    assert_eq!(
        store.complete(&after, "late").await,
        Err(StoreError::InconsistentRefusal)
    );
}

/// A record never outlives its expiry on the server: a completed key
/// with a 1 s expiry is gone (not merely classified as expired) soon
/// after. Bounded wait, no timing threshold: the key must be gone within
/// 10 s of a 1 s expiry.
async fn no_record_outlives_its_expiry<B: Expiring>(b: B) {
    let store = b.store(IdempotencyOptions {
        expiry: Duration::from_secs(1),
        ..options()
    });
    let now = epoch_ms();
    let c = Claim {
        lease_until_ms: now + 500,
        ..claim("k", "f", "a1", now)
    };
    assert_eq!(store.claim(&c).await, Ok(Claimed::Held));
    store.complete(&c, "out").await.expect("completed");
    assert!(
        b.gone_within(Duration::from_secs(10)).await,
        "the record outlived its expiry"
    );
}

/// Stores that delete a record by themselves at its expiry.
trait Expiring: Backend {
    async fn gone_within(&self, limit: Duration) -> bool;
}

impl<B: Backend<Store = ValkeyStore>> Expiring for B {
    async fn gone_within(&self, limit: Duration) -> bool {
        let end = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < end {
            if self.records().await == 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

/// A lost answer: the claim applied and its answer lost, the step is sent
/// again with the same attempt: held, not "in progress". The same for a
/// completion: its second send finds its own completed record.
async fn a_claim_or_completion_sent_twice_is_the_attempts_own<B: Backend>(b: B) {
    let store = b.store(options());
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    assert_eq!(store.complete(&first, "out").await, Ok(()));
    assert_eq!(store.complete(&first, "out").await, Ok(()));
    let again = store.claim(&claim("k", "f", "a2", now + 1)).await;
    assert!(matches!(again, Ok(Claimed::Refused(Refusal::Completed(s))) if s.output == "out"));
}

/// The wrapper: runs once, replays, refuses another payload.
async fn the_wrapped_function_runs_once_per_key_and_replays<B: Backend>(b: B) {
    let card = Card::default();
    let f = wrapper(b.store(options()));
    let first = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert_eq!(first.expect("ran").reference, "p1-1");
    let again = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert_eq!(again.expect("replayed").reference, "p1-1");
    let other = f.call(charge("p1", 6), soon(), card.charge()).await;
    assert!(
        matches!(other, Err(IdempotencyError::OtherPayload)),
        "{other:?}"
    );
    assert_eq!(card.runs(), 1);
}

/// A call while the first runs is InProgress with when to retry, and
/// does not run; after the first completes, it replays.
async fn a_concurrent_call_is_in_progress_with_when_to_retry<B: Backend>(b: B) {
    let f = wrapper(b.store(options()))
        .max_lease(Duration::from_secs(20))
        .expect("a valid lease");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let first = {
        let f = f.clone();
        tokio::spawn(async move {
            f.call(
                charge("p1", 5),
                epoch_ms() + 600_000,
                |c: Charge| async move {
                    let _ = started_tx.send(());
                    let _ = finish_rx.await;
                    Ok::<_, Declined>(Receipt { reference: c.id })
                },
            )
            .await
        })
    };
    started_rx.await.expect("the first call started");
    let card = Card::default();
    let second = f.call(charge("p1", 5), soon(), card.charge()).await;
    let Err(IdempotencyError::InProgress { retry_after, .. }) = second else {
        panic!("{second:?}")
    };
    assert!(retry_after > Duration::from_secs(19) && retry_after <= Duration::from_secs(21));
    assert_eq!(card.runs(), 0);
    finish_tx.send(()).expect("the first call waits");
    let first = first.await.expect("joined").expect("ran");
    assert_eq!(first.reference, "p1");
    let third = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert_eq!(third.expect("replayed").reference, "p1");
    assert_eq!(card.runs(), 0);
}

/// Many callers at once, one key: the function runs once; every other
/// caller is answered in progress or with the replay.
async fn many_concurrent_callers_run_the_function_once<B: Backend>(b: B) {
    let f = wrapper(b.store(options()));
    let card = Card::default();
    let mut tasks = Vec::new();
    for _ in 0..24 {
        let f = f.clone();
        let card = card.clone();
        tasks.push(tokio::spawn(async move {
            f.call(charge("p1", 5), soon(), |c: Charge| async move {
                // Held across a yield, so the others meet the claim.
                tokio::task::yield_now().await;
                card.charge()(c).await
            })
            .await
        }));
    }
    for t in tasks {
        match t.await.expect("joined") {
            Ok(r) => assert_eq!(r.reference, "p1-1"),
            Err(IdempotencyError::InProgress { .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(card.runs(), 1, "the function ran more than once");
}

/// A failed function gives its claim back: a retry runs at once.
async fn a_failed_function_releases_its_claim_and_a_retry_runs<B: Backend>(b: B) {
    let card = Card::default();
    let f = wrapper(b.store(options()));
    let failed = f.call(charge("p1", 5), soon(), card.decline()).await;
    assert!(
        matches!(failed, Err(IdempotencyError::Function(Declined))),
        "{failed:?}"
    );
    assert_eq!(b.records().await, 0, "the claim was not given back");
    let retried = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert_eq!(retried.expect("ran").reference, "p1-2");
}

/// After the expiry (by the wrapper's clock) the function runs again.
async fn an_expired_output_is_not_replayed<B: Backend>(b: B) {
    let card = Card::default();
    let now = Arc::new(AtomicU64::new(epoch_ms()));
    let clock = now.clone();
    let f = wrapper(b.store(options()))
        .expiry(Duration::from_secs(60))
        .expect("a valid expiry")
        .clock(move || clock.load(Ordering::SeqCst));
    let lease = |now: &AtomicU64| now.load(Ordering::SeqCst) + 30_000;
    f.call(charge("p1", 5), lease(&now), card.charge())
        .await
        .expect("ran");
    now.fetch_add(59_000, Ordering::SeqCst);
    let r = f.call(charge("p1", 5), lease(&now), card.charge()).await;
    assert_eq!(r.expect("replayed").reference, "p1-1");
    now.fetch_add(2_000, Ordering::SeqCst);
    let r = f.call(charge("p1", 5), lease(&now), card.charge()).await;
    assert_eq!(r.expect("ran again").reference, "p1-2");
}

/// An output over the size limit: refused by the store before anything
/// is sent; through the wrapper, the function runs once and every repeat
/// gets the same error. Just under the limit: stored and replayed.
async fn an_output_over_the_size_limit_runs_once<B: Backend>(b: B) {
    let store = b.store(options());
    let now = epoch_ms();
    let c = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&c).await, Ok(Claimed::Held));
    assert_eq!(
        store.complete(&c, &"x".repeat(400 * 1024)).await,
        Err(StoreError::ItemTooLarge)
    );
    let runs = Arc::new(AtomicU64::new(0));
    let f: Idempotent<Charge, String, B::Store> = Idempotent::new(b.store(options()), "big")
        .expect("a valid name")
        .key(|c: &Charge| Some(c.id.clone()));
    for _ in 0..2 {
        let runs = runs.clone();
        let r = f
            .call(charge("p1", 5), soon(), move |_c: Charge| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Declined>("a".repeat(401 * 1024))
            })
            .await;
        assert!(
            matches!(
                r,
                Err(IdempotencyError::OutputNotStored(NotStored::TooLarge))
            ),
            "{r:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let big = "a".repeat(400 * 1024 - 2_000);
    for _ in 0..2 {
        let runs = runs.clone();
        let big = big.clone();
        let out = f
            .call(charge("p2", 5), soon(), move |_c: Charge| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Declined>(big)
            })
            .await
            .expect("stored");
        assert_eq!(out.len(), 400 * 1024 - 2_000);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

const ALICE: &str = "arn:aws:iam::123456789012:user/alice";
const BODY: &str = r#"{"item":"book","qty":1}"#;

fn request(path: &str, key: &str, body: &str) -> Request {
    HttpApiRequest::new(Method::POST, path)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(body)
        .caller(HttpApiCaller::iam(ALICE))
        .build()
        .expect("an HTTP API request")
}

fn header<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The HTTP layer: a first request runs once and its repeat replays byte
/// for byte; the key with another body or another path is 422; a key
/// another attempt holds is 409 with Retry-After.
async fn the_http_layer_replays_and_answers_409_and_422<B: Backend>(b: B) {
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let store = b.store(IdempotencyOptions::default());
    let svc = IdempotencyLayer::new(store.clone(), AuthMode::Iam).layer(service_fn(
        move |_req: Request| {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(Body::Text(format!("{{\"call\":{n}}}")))
                    .map_err(lambda_http::Error::from)
            }
        },
    ));
    let send = |req: Request| svc.clone().oneshot(req);
    let first = send(request("/things", "k1", BODY))
        .await
        .expect("answered");
    assert_eq!(first.status(), 201);
    let again = send(request("/things", "k1", BODY))
        .await
        .expect("answered");
    assert_eq!(again.status(), 201);
    assert_eq!(again.body(), first.body(), "byte for byte");
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    let other_body = send(request("/things", "k1", r#"{"item":"pen"}"#))
        .await
        .expect("answered");
    assert_eq!(other_body.status(), 422);
    let other_path = send(request("/other", "k1", BODY)).await.expect("answered");
    assert_eq!(other_path.status(), 422);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Another attempt holds "k2".
    let scope = Scope::Iam(ALICE.to_owned());
    let first = request("/things", "k2", BODY);
    hold_key(&store, &scope, "k2", &first, Duration::from_secs(5)).await;
    let busy = send(request("/things", "k2", BODY))
        .await
        .expect("answered");
    assert_eq!(busy.status(), 409);
    assert_eq!(header(&busy, "retry-after"), Some("1"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

macro_rules! contract {
    ($store:ident: $backend:ty => $($case:ident),+ $(,)?) => {
        mod $store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(<$backend as super::Backend>::start().await).await;
                }
            )+
        }
    };
}

/// The cases every store runs, then the ones of its own.
macro_rules! contract_for {
    ($store:ident: $backend:ty $(, $extra:ident)* $(,)?) => {
        contract!($store: $backend =>
            a_key_is_claimed_once_completed_and_replayed,
            only_the_claims_own_attempt_releases_or_completes_it,
            an_expired_key_or_an_ended_lease_is_claimed_again,
            a_claim_or_completion_sent_twice_is_the_attempts_own,
            the_wrapped_function_runs_once_per_key_and_replays,
            a_concurrent_call_is_in_progress_with_when_to_retry,
            many_concurrent_callers_run_the_function_once,
            a_failed_function_releases_its_claim_and_a_retry_runs,
            an_expired_output_is_not_replayed,
            an_output_over_the_size_limit_runs_once,
            the_http_layer_replays_and_answers_409_and_422,
            $($extra,)*
        );
    };
}

contract_for!(dynamodb: super::Dynamo);
// DynamoDB's TTL deletes up to days late: only the stores that delete at
// expiry run `no_record_outlives_its_expiry`.
contract_for!(valkey: super::Valkey, no_record_outlives_its_expiry);
contract_for!(valkey_cluster: super::ValkeyClustered, no_record_outlives_its_expiry);

/// In a cluster the keys spread over the nodes, and every one is claimed,
/// completed, replayed and released on the node that serves it, whichever
/// node the store's URL names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_cluster_keys_live_on_every_node_and_each_is_served_there() {
    let b = ValkeyClustered::start().await;
    let store = b.store(options());
    let now = epoch_ms();
    let keys: Vec<String> = (0..30).map(|i| format!("order-{i}")).collect();
    for key in &keys {
        let c = claim(key, "f", "a1", now);
        assert_eq!(store.claim(&c).await, Ok(Claimed::Held), "{key}");
        store.complete(&c, key).await.expect("completed");
        let replay = store.claim(&claim(key, "f", "a2", now + 1)).await;
        let Ok(Claimed::Refused(Refusal::Completed(stored))) = replay else {
            panic!("{key}: {replay:?}");
        };
        assert_eq!(&stored.output, key);
        let released_key = format!("{key}-released");
        let released = claim(&released_key, "f", "a1", now);
        assert_eq!(store.claim(&released).await, Ok(Claimed::Held));
        store.release(&released).await;
    }
    let mut per_node = Vec::new();
    for url in b.cluster.urls() {
        per_node.push(stored_keys(&url).await);
    }
    assert_eq!(per_node.iter().sum::<usize>(), keys.len(), "{per_node:?}");
    assert!(
        per_node.iter().all(|&n| n > 0),
        "every node holds some keys: {per_node:?}"
    );

    // The store learned which node serves which slot: a replay of every
    // key now goes straight to its node, one SET each, none refused with
    // MOVED (which counts as a rejected call).
    for url in b.cluster.urls() {
        reset_stats(&mut connect(&url).await).await;
    }
    for key in &keys {
        let replay = store.claim(&claim(key, "f", "a3", now + 2)).await;
        assert!(
            matches!(replay, Ok(Claimed::Refused(Refusal::Completed(_)))),
            "{key}: {replay:?}"
        );
    }
    let (mut calls, mut rejected) = (0, 0);
    for url in b.cluster.urls() {
        for (name, c, r) in store_commands(&mut connect(&url).await).await {
            assert_eq!(name, "set", "a replay sends nothing else");
            calls += c;
            rejected += r;
        }
    }
    assert_eq!(
        (calls, rejected),
        (keys.len() as u64, 0),
        "SET calls, MOVED"
    );
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a client")
        .get_multiplexed_async_connection()
        .await
        .expect("a connection")
}

async fn reset_stats(conn: &mut redis::aio::MultiplexedConnection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec_async(conn)
        .await
        .expect("CONFIG RESETSTAT");
}

/// The store's commands the server ran since the last `CONFIG RESETSTAT`
/// (from `INFO commandstats`): name, calls, and rejected calls (a `MOVED`
/// answer is one), sorted by name. Only what a store sends: not a probe's
/// own commands (`config|resetstat`), nor what a client sends on
/// connecting (`hello`, `auth`, `client|setinfo` on Redis 7.2 and Valkey).
async fn store_commands(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, u64, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let mut run: Vec<(String, u64, u64)> = info
        .lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |field: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            Some((name.to_owned(), field("calls"), field("rejected_calls")))
        })
        .filter(|(name, _, _)| {
            ["set", "get", "watch", "unwatch", "multi", "exec", "del"].contains(&name.as_str())
        })
        .collect();
    run.sort();
    run
}

/// The fault test: the server is killed mid-run and restarted. A call
/// while it is down fails with a clear store error (no panic) and does
/// not run the function; after the restart the same store (not rebuilt)
/// replays what was completed before and runs a new key once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_stopped_and_restarted_mid_run() {
    let mut server = Valkey::start().await;
    let card = Card::default();
    let f = wrapper(server.store(options()));
    let first = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert_eq!(first.expect("ran").reference, "p1-1");

    server.server.kill();
    for id in ["p1", "p2"] {
        let down = f.call(charge(id, 5), soon(), card.charge()).await;
        assert!(
            matches!(
                down,
                Err(IdempotencyError::Store(
                    StoreError::Network | StoreError::Timeout
                ))
            ),
            "{down:?}"
        );
        assert!(
            down.as_ref()
                .err()
                .is_some_and(|e| e.to_string().contains("store")),
            "a clear message: {down:?}"
        );
    }
    assert_eq!(card.runs(), 1, "a call ran while the server was down");

    server
        .server
        .restart()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let replay = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert_eq!(replay.expect("replayed").reference, "p1-1");
    let fresh = f.call(charge("p2", 5), soon(), card.charge()).await;
    assert_eq!(fresh.expect("ran").reference, "p2-2");
    assert_eq!(card.runs(), 2);
}

/// The fast path is one round trip: a first claim, a replay of a completed
/// key and a refusal of a live claim are each a single `SET ... NX GET`,
/// never a read under `WATCH` (which costs four: WATCH, GET, then MULTI
/// EXEC or UNWATCH).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_a_claim_or_a_replay_is_one_command() {
    let server = Valkey::start().await;
    let store = server.store(options());
    let mut conn = connect(&server.server.url()).await;
    // Connected before the counting starts.
    store.ping().await.expect("the server answers");
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);

    for (what, call, expected) in [
        ("a new key", claim("k", "f", "a1", now), Claimed::Held),
        (
            "a live claim",
            claim("k", "f", "a2", now + 1),
            Claimed::Refused(Refusal::InProgress {
                lease_until_ms: now + 30_000,
            }),
        ),
    ] {
        reset_stats(&mut conn).await;
        assert_eq!(store.claim(&call).await, Ok(expected), "{what}");
        assert_eq!(
            store_commands(&mut conn).await,
            [("set".to_owned(), 1, 0)],
            "{what}"
        );
    }

    store
        .complete(&first, r#"{"n": 1}"#)
        .await
        .expect("completed");
    reset_stats(&mut conn).await;
    let replay = store.claim(&claim("k", "f", "a3", now + 2)).await;
    assert!(
        matches!(replay, Ok(Claimed::Refused(Refusal::Completed(_)))),
        "{replay:?}"
    );
    assert_eq!(
        store_commands(&mut conn).await,
        [("set".to_owned(), 1, 0)],
        "a replay"
    );
}

/// TLS (`rediss://`): a server whose certificate a private CA signed is
/// reached when that CA is trusted and the server is named as its
/// certificate names it, and refused otherwise: by another name, by the
/// system's roots, by another CA's, and over plain RESP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_over_tls_trusts_only_the_roots_it_is_given() {
    let start = || async {
        ValkeyServer::start_tls(Durability::InMemory)
            .await
            .unwrap_or_else(|e| panic!("the Valkey TLS test needs redis-server and openssl: {e}"))
    };
    let server = start().await;
    let store = server.store(options()).expect("valid options");
    store.ping().await.expect("TLS, trusting the server's CA");
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    store
        .complete(&first, r#"{"n": 1}"#)
        .await
        .expect("completed");
    let replay = store.claim(&claim("k", "f", "a2", now + 1)).await;
    assert!(
        matches!(replay, Ok(Claimed::Refused(Refusal::Completed(_)))),
        "{replay:?}"
    );

    let refused = |config: ValkeyConfig| async move {
        let store = ValkeyStore::new(config, options()).expect("valid options");
        store.ping().await
    };
    let system_roots = ValkeyConfig::new(&server.url()).expect("a URL");
    let answer = refused(system_roots).await;
    assert!(answer.is_err(), "the system's roots: {answer:?}");

    // The right CA, but a name the server's certificate does not carry.
    let other_name = ValkeyConfig::new(&server.url().replacen("127.0.0.1", "127.0.0.2", 1))
        .and_then(|c| c.root_certificates(&server.root_certificate().expect("a CA")))
        .expect("a config");
    let answer = refused(other_name).await;
    assert!(answer.is_err(), "a name the certificate lacks: {answer:?}");

    let other = start().await;
    let other_ca = other.root_certificate().expect("a TLS server's CA");
    let wrong_ca = ValkeyConfig::new(&server.url())
        .and_then(|c| c.root_certificates(&other_ca))
        .expect("a config");
    let answer = refused(wrong_ca).await;
    assert!(answer.is_err(), "another CA: {answer:?}");

    let plain_url = server.url().replacen("rediss://", "redis://", 1);
    let plain = ValkeyConfig::new(&plain_url).expect("a URL");
    let answer = refused(plain.clone()).await;
    assert!(answer.is_err(), "plain RESP to the TLS port: {answer:?}");
    // A CA is for TLS: with a plain URL it is a configuration error.
    let ca = server.root_certificate().expect("a TLS server's CA");
    let no_tls = plain.root_certificates(&ca);
    assert!(
        matches!(no_tls, Err(ConfigError::Invalid { var: "url", .. })),
        "{no_tls:?}"
    );
}

/// Root certificates are for a TLS URL and must be PEM certificates that
/// parse, checked when configured; the errors never quote what was given.
#[test]
fn valkey_root_certificates_are_checked_when_configured() {
    let garbled = b"-----BEGIN CERTIFICATE-----\nsecret-value!\n-----END CERTIFICATE-----\n";
    for (url, given, what) in [
        (
            "rediss://127.0.0.1:6379",
            &b"secret-value"[..],
            "no PEM block",
        ),
        (
            "rediss://127.0.0.1:6379",
            &garbled[..],
            "a PEM block that does not parse",
        ),
    ] {
        let refused = ValkeyConfig::new(url)
            .expect("a URL")
            .root_certificates(given)
            .expect_err(what);
        assert!(
            matches!(refused, ConfigError::Invalid { .. }),
            "{what}: {refused:?}"
        );
        assert!(!refused.to_string().contains("secret"), "{what}: {refused}");
    }
}

/// ElastiCache's IAM authentication, as a server sees it: with the
/// `default` user closed, the store authenticates each new connection as
/// the IAM user, with a token for a password, and works; without it the
/// store is refused. (The token's signature is checked against botocore's
/// in the `iam` module's tests: a test server cannot verify it, so its
/// user here takes any password.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_iam_auth_connects_as_its_user() {
    let server = Valkey::start().await;
    let url = server.server.url();
    let mut admin = connect(&url).await;
    for args in [
        &["SETUSER", "iam-user-01", "on", "nopass", "~*", "+@all"][..],
        &["SETUSER", "default", "resetpass", ">admin-only"][..],
    ] {
        redis::cmd("ACL")
            .arg(args)
            .exec_async(&mut admin)
            .await
            .expect("ACL SETUSER");
    }
    let sdk = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"),
            ),
        )
        .build();
    let auth = IamAuth::new(&sdk, "iam-user-01", "My-Cache").expect("valid");
    let config = ValkeyConfig::new(&url).expect("a URL").iam_auth(auth);
    let store = ValkeyStore::new(config, options()).expect("valid options");
    store.ping().await.expect("authenticated as the IAM user");
    let now = epoch_ms();
    assert_eq!(
        store.claim(&claim("k", "f", "a1", now)).await,
        Ok(Claimed::Held)
    );

    let with_password = url.replacen("redis://", "redis://default:admin-only@", 1);
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut connect(&with_password).await)
        .await
        .expect("CLIENT LIST");
    assert!(
        clients.lines().any(|c| c.contains(" user=iam-user-01 ")),
        "{clients}"
    );

    let refused = server.store(options()).ping().await;
    assert!(
        matches!(refused, Err(StoreError::AccessDenied { .. })),
        "{refused:?}"
    );
}
