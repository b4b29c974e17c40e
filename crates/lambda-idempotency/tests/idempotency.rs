//! The idempotency store and wrapper against a local DynamoDB (in-process
//! dynoxide), some through the fault proxy: what one request costs, what a
//! refusal answers, and the failures the keys exist for.
#![cfg(feature = "idempotency")]

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use lambda_idempotency::ConfigError;
use lambda_idempotency::StoreError;
use lambda_idempotency::idempotency::{
    Claim, Claimed, IdempotencyOptions, IdempotencyStore, IdempotencyTable, Refusal, Stored,
    TransactError,
};
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency_testing::proxy::{Fault, FaultProxy};
use lambda_idempotency_testing::{
    client_for, create_idempotency_table, create_table, scan_all, start_dynoxide, unique_name,
};

const HOUR: Duration = Duration::from_secs(3600);

/// A local DynamoDB with an empty idempotency table.
struct Db {
    endpoint: String,
    client: Client,
    table: IdempotencyTable,
}

impl Db {
    async fn new() -> Self {
        Db::with_table(|t| t).await
    }

    async fn with_table(layout: impl FnOnce(IdempotencyTable) -> IdempotencyTable) -> Self {
        let endpoint = start_dynoxide().await;
        let client = client_for(&endpoint);
        let table = layout(IdempotencyTable::new(unique_name("idem")).unwrap());
        create_idempotency_table(&client, &table).await.unwrap();
        Db {
            endpoint,
            client,
            table,
        }
    }

    fn store(&self, options: IdempotencyOptions) -> IdempotencyStore {
        IdempotencyStore::new(self.client.clone(), self.table.clone(), options).unwrap()
    }

    /// The store through a proxy to this database.
    async fn proxied(&self, options: IdempotencyOptions) -> (IdempotencyStore, FaultProxy) {
        let proxy = FaultProxy::start(&self.endpoint, 29).await;
        let store =
            IdempotencyStore::new(client_for(&proxy.url()), self.table.clone(), options).unwrap();
        (store, proxy)
    }

    async fn items(&self) -> Vec<std::collections::HashMap<String, AttributeValue>> {
        scan_all(&self.client, self.table.table_name()).await
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

fn text(item: &std::collections::HashMap<String, AttributeValue>, k: &str) -> String {
    match item.get(k) {
        Some(AttributeValue::S(v)) | Some(AttributeValue::N(v)) => v.clone(),
        other => panic!("{k}: {other:?}"),
    }
}

fn options() -> IdempotencyOptions {
    IdempotencyOptions {
        expiry: HOUR,
        ..IdempotencyOptions::default()
    }
}

/// The first claim holds; the completion stores the output with its
/// expiry; a repeat (another attempt, the same payload) is refused with
/// the output exactly as stored, another payload as such, and a call while
/// the first runs as in progress, with the lease's end.
#[tokio::test]
async fn a_key_is_claimed_once_completed_and_replayed() {
    let db = Db::new().await;
    let store = db.store(options());
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));

    // While it runs: the same payload is in progress until the lease
    // ends; another payload is another payload.
    let running = store.claim(&claim("k", "f", "a2", now + 1)).await;
    assert_eq!(
        running,
        Ok(Claimed::Refused(Refusal::InProgress {
            lease_until_ms: now + 30_000
        }))
    );
    let other = store.claim(&claim("k", "g", "a2", now + 1)).await;
    assert_eq!(other, Ok(Claimed::Refused(Refusal::OtherPayload)));

    store.complete(&first, r#"{"n": 1}"#).await.unwrap();
    let items = db.items().await;
    assert_eq!(items.len(), 1);
    assert_eq!(text(&items[0], "status"), "COMPLETED");
    assert_eq!(
        text(&items[0], "expiration"),
        (now / 1000 + 3600).to_string()
    );
    assert!(!items[0].contains_key("lease_until"));

    let again = store.claim(&claim("k", "f", "a3", now + 2)).await;
    assert_eq!(
        again,
        Ok(Claimed::Refused(Refusal::Completed(Stored {
            output: r#"{"n": 1}"#.into(),
            expires_at: now / 1000 + 3600,
        })))
    );
    let other = store.claim(&claim("k", "g", "a3", now + 2)).await;
    assert_eq!(other, Ok(Claimed::Refused(Refusal::OtherPayload)));
    // Another key is another record.
    assert_eq!(
        store.claim(&claim("k2", "f", "a3", now)).await,
        Ok(Claimed::Held)
    );
}

/// A released claim frees the key for a retry at once; a release by any
/// other attempt, or of a completed record, deletes nothing.
#[tokio::test]
async fn only_the_claims_own_attempt_releases_it_and_only_in_progress() {
    let db = Db::new().await;
    let store = db.store(options());
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    store.release(&claim("k", "f", "intruder", now)).await;
    assert_eq!(db.items().await.len(), 1, "another attempt released it");
    store.release(&first).await;
    assert!(db.items().await.is_empty(), "its own attempt did not");

    let retry = claim("k", "f", "a2", now + 1);
    assert_eq!(store.claim(&retry).await, Ok(Claimed::Held));
    store.complete(&retry, "out").await.unwrap();
    store.release(&retry).await;
    assert_eq!(db.items().await.len(), 1, "a completed record was released");
}

/// Expiry is decided from the stored time: a completed key whose expiry
/// has passed (DynamoDB's TTL has not deleted it) is claimed again, and a
/// crashed call's claim is taken over once its lease is over.
#[tokio::test]
async fn an_expired_key_or_an_ended_lease_is_claimed_again() {
    let db = Db::new().await;
    let store = db.store(IdempotencyOptions {
        expiry: Duration::from_secs(60),
        ..options()
    });
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    store.complete(&first, "out").await.unwrap();
    let just_before = claim("k", "f", "a2", (now / 1000 + 59) * 1000);
    assert!(matches!(
        store.claim(&just_before).await,
        Ok(Claimed::Refused(Refusal::Completed(_)))
    ));
    let after = claim("k", "g", "a3", (now / 1000 + 60) * 1000);
    assert_eq!(store.claim(&after).await, Ok(Claimed::Held));

    // a3 crashes: its lease (30 s) ends, and the next call takes the key
    // once the clock skew allowed between hosts has passed too: a host
    // whose clock is up to a second ahead of a3's does not take over a
    // lease a3 still holds.
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
    // The crashed attempt cannot complete what is no longer its claim.
    assert_eq!(
        store.complete(&after, "late").await,
        Err(StoreError::InconsistentRefusal)
    );
}

/// The ambiguous failure: the claim's PutItem commits and its answer is
/// lost; the SDK sends it again, which is refused against this attempt's
/// own claim: held, not "in progress". The same for a completion whose
/// answer was lost: its re-send finds its own completed record.
#[tokio::test]
async fn a_claim_or_completion_that_committed_unseen_is_the_attempts_own() {
    let db = Db::new().await;
    let (store, proxy) = db.proxied(options()).await;
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    proxy.set_first(Fault::ByOperation(&[("PutItem", Fault::DropAnswer)]), 1);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    assert_eq!(
        proxy.forwarded(),
        2,
        "the claim and the SDK's re-send of it"
    );
    // The same without the proxy: claiming twice with one attempt.
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));

    proxy.set_first(Fault::ByOperation(&[("UpdateItem", Fault::DropAnswer)]), 1);
    assert_eq!(store.complete(&first, "out").await, Ok(()));
    assert_eq!(proxy.injected().get("drop-answer"), Some(&2));
    let again = store.claim(&claim("k", "f", "a2", now + 1)).await;
    assert!(matches!(again, Ok(Claimed::Refused(Refusal::Completed(s))) if s.output == "out"));
}

/// With the cache on, a key completed in this process answers a repeat
/// from memory: no request; another payload is still refused as such.
/// Without it, each repeat costs exactly one request (the refused claim:
/// no read).
#[tokio::test]
async fn a_repeat_costs_one_request_or_none_from_the_cache() {
    let db = Db::new().await;
    for cache_bytes in [0, 64 * 1024] {
        let (store, proxy) = db
            .proxied(IdempotencyOptions {
                cache_bytes,
                key_prefix: Some(format!("c{cache_bytes}")),
                ..options()
            })
            .await;
        let now = epoch_ms();
        let first = claim("k", "f", "a1", now);
        assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
        store.complete(&first, "out").await.unwrap();
        assert_eq!(proxy.requests(), 2);
        for (i, attempt) in ["a2", "a3"].into_iter().enumerate() {
            let again = store.claim(&claim("k", "f", attempt, now + 1)).await;
            assert!(
                matches!(again, Ok(Claimed::Refused(Refusal::Completed(s))) if s.output == "out")
            );
            let want = if cache_bytes == 0 { 3 + i as u64 } else { 2 };
            assert_eq!(proxy.requests(), want, "cache {cache_bytes}");
        }
        let other = store.claim(&claim("k", "g", "a4", now + 1)).await;
        assert_eq!(other, Ok(Claimed::Refused(Refusal::OtherPayload)));
        // An expired entry is not answered from memory.
        let later = (now / 1000 + 3600) * 1000;
        assert_eq!(
            store.claim(&claim("k", "f", "a5", later)).await,
            Ok(Claimed::Held)
        );
    }
}

/// A table shared by several functions: one static partition value, the
/// keys (prefixed per function) in the sort key; a function's key does
/// not answer for another's.
#[tokio::test]
async fn a_shared_table_keeps_each_functions_keys_apart() {
    let db = Db::with_table(|t| {
        t.key_attribute("pk")
            .unwrap()
            .ttl_attribute("ttl")
            .unwrap()
            .shared("idempotency", "sk")
            .unwrap()
    })
    .await;
    let now = epoch_ms();
    let charge = db.store(IdempotencyOptions {
        key_prefix: Some("charge".into()),
        ..options()
    });
    let refund = charge
        .with_options(IdempotencyOptions {
            key_prefix: Some("refund".into()),
            ..options()
        })
        .unwrap();
    let c = claim("k", "f", "a1", now);
    assert_eq!(charge.claim(&c).await, Ok(Claimed::Held));
    charge.complete(&c, "charged").await.unwrap();
    assert_eq!(
        refund.claim(&claim("k", "f", "a2", now)).await,
        Ok(Claimed::Held)
    );
    let again = charge.claim(&claim("k", "f", "a3", now)).await;
    assert!(matches!(again, Ok(Claimed::Refused(Refusal::Completed(s))) if s.output == "charged"));
    let mut items = db.items().await;
    items.sort_by_key(|i| text(i, "sk"));
    let keys: Vec<(String, String)> = items
        .iter()
        .map(|i| (text(i, "pk"), text(i, "sk")))
        .collect();
    assert_eq!(
        keys,
        [
            ("idempotency".to_owned(), "charge#k".to_owned()),
            ("idempotency".to_owned(), "refund#k".to_owned())
        ]
    );
    assert_eq!(text(&items[0], "ttl"), (now / 1000 + 3600).to_string());
}

/// The transactional form: the business write and the completion commit
/// together, with the attempt as the transaction's token (a re-send after
/// a lost answer is its success); a business condition that fails cancels
/// both, names the item, and leaves the claim this attempt's to release.
#[tokio::test]
async fn the_completion_commits_with_the_business_write_or_not_at_all() {
    let db = Db::new().await;
    let (store, proxy) = db.proxied(options()).await;
    let orders = unique_name("orders");
    create_table(&db.client, &orders, "id").await.unwrap();
    let place = |id: &str| {
        let put = Put::builder()
            .table_name(&orders)
            .item("id", AttributeValue::S(id.into()))
            .condition_expression("attribute_not_exists(id)")
            .build()
            .unwrap();
        TransactWriteItem::builder().put(put).build()
    };
    let now = epoch_ms();
    let first = claim("k", "f", "a1", now);
    assert_eq!(store.claim(&first).await, Ok(Claimed::Held));
    proxy.set_first(
        Fault::ByOperation(&[("TransactWriteItems", Fault::DropAnswer)]),
        1,
    );
    let items = vec![place("o1"), store.completion(&first, "placed").unwrap()];
    assert_eq!(store.transact(&first, items).await, Ok(()));
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    assert_eq!(scan_all(&db.client, &orders).await.len(), 1);
    // The caller's own retry of the same transaction (it timed out, say):
    // the token is the attempt, not one the SDK makes up per call, so it
    // too is answered as the success it was.
    let items = vec![place("o1"), store.completion(&first, "placed").unwrap()];
    assert_eq!(store.transact(&first, items).await, Ok(()));
    let again = store.claim(&claim("k", "f", "a2", now + 1)).await;
    assert!(matches!(again, Ok(Claimed::Refused(Refusal::Completed(s))) if s.output == "placed"));

    // Another key whose business write is refused: nothing is written.
    let second = claim("k2", "f", "b1", now);
    assert_eq!(store.claim(&second).await, Ok(Claimed::Held));
    let items = vec![place("o1"), store.completion(&second, "placed").unwrap()];
    assert_eq!(
        store.transact(&second, items).await,
        Err(TransactError::Cancelled {
            reasons: vec!["ConditionalCheckFailed".into(), "None".into()]
        })
    );
    assert_eq!(scan_all(&db.client, &orders).await.len(), 1);
    store.release(&second).await;
    let retry = claim("k2", "f", "b2", now + 1);
    assert_eq!(store.claim(&retry).await, Ok(Claimed::Held));
    // A completion for a claim that is no longer the attempt's cancels.
    let stale = vec![place("o2"), store.completion(&second, "late").unwrap()];
    assert!(matches!(
        store.transact(&second, stale).await,
        Err(TransactError::Cancelled { reasons }) if reasons[1] == "ConditionalCheckFailed"
    ));
    assert_eq!(scan_all(&db.client, &orders).await.len(), 1);
}

// ---- The wrapper: any async function once per key ----

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lambda_idempotency::idempotency::{IdempotencyError, Idempotent};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Charge {
    id: String,
    amount: u64,
    note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Receipt {
    reference: String,
    replayed: bool,
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
        note: "n".into(),
    }
}

/// A function that counts its runs, and answers its input's id and run.
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
                replayed: false,
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

fn wrapper(store: IdempotencyStore) -> Idempotent<Charge, Receipt> {
    Idempotent::new(store, "charge")
        .unwrap()
        .key(|c: &Charge| Some(c.id.clone()))
        .payload(|c: &Charge| serde_json::json!({ "amount": c.amount }))
}

fn soon() -> u64 {
    epoch_ms() + 30_000
}

/// The first call runs; a repeat returns the stored output without
/// running (through the replay hook); another payload under the key is an
/// error, and a field outside the payload does not count.
#[tokio::test]
async fn the_wrapped_function_runs_once_per_key_and_replays() {
    let db = Db::new().await;
    let card = Card::default();
    let f = wrapper(db.store(options())).on_replay(|r: Receipt| Receipt {
        replayed: true,
        ..r
    });
    let first = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(first.reference, "p1-1");
    assert!(!first.replayed);
    let mut other_note = charge("p1", 5);
    other_note.note = "other".into();
    let again = f.call(other_note, soon(), card.charge()).await.unwrap();
    assert_eq!(
        again,
        Receipt {
            reference: "p1-1".into(),
            replayed: true
        }
    );
    assert_eq!(card.runs(), 1);
    let other = f.call(charge("p1", 6), soon(), card.charge()).await;
    assert!(
        matches!(other, Err(IdempotencyError::OtherPayload)),
        "{other:?}"
    );
    assert_eq!(card.runs(), 1);
    // Another key runs; the stored key is the hash under the function's
    // name, never the input's key in the clear.
    f.call(charge("p2", 6), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(card.runs(), 2);
    let keys: Vec<String> = db.items().await.iter().map(|i| text(i, "id")).collect();
    assert!(
        keys.iter()
            .all(|k| k.starts_with("charge#") && k.len() == 7 + 64 && !k.contains("p1")),
        "{keys:?}"
    );
}

/// A call while the first runs is told it is in progress, with when to
/// retry (the first's lease, capped by max_lease), and does not run.
#[tokio::test]
async fn a_concurrent_call_is_in_progress_with_when_to_retry() {
    let db = Db::new().await;
    let f = wrapper(db.store(options()))
        .max_lease(Duration::from_secs(20))
        .unwrap();
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
                    Ok::<_, Declined>(Receipt {
                        reference: c.id,
                        replayed: false,
                    })
                },
            )
            .await
        })
    };
    started_rx.await.unwrap();
    let card = Card::default();
    let before = epoch_ms();
    let second = f.call(charge("p1", 5), soon(), card.charge()).await;
    let Err(IdempotencyError::InProgress {
        retry_after,
        lease_until_ms,
    }) = second
    else {
        panic!("{second:?}")
    };
    // The lease is the cap (20 s), not the 10-minute deadline.
    assert!(lease_until_ms <= before + 20_000 && lease_until_ms + 1_000 >= before + 20_000);
    // Until the lease ends and the clock skew allowance has passed.
    assert!(retry_after > Duration::from_secs(19) && retry_after <= Duration::from_secs(21));
    assert_eq!(card.runs(), 0);
    finish_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap().reference, "p1");
    let third = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!((third.reference.as_str(), card.runs()), ("p1", 0));
}

/// A failed function gives its claim back: the error is the function's,
/// and a retry runs at once (not "in progress" until the lease ends).
#[tokio::test]
async fn a_failed_function_releases_its_claim_and_a_retry_runs() {
    let db = Db::new().await;
    let card = Card::default();
    let f = wrapper(db.store(options()));
    let failed = f.call(charge("p1", 5), soon(), card.decline()).await;
    assert!(
        matches!(failed, Err(IdempotencyError::Function(Declined))),
        "{failed:?}"
    );
    assert!(db.items().await.is_empty(), "the claim was not given back");
    let retried = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!((retried.reference.as_str(), card.runs()), ("p1-2", 2));
}

/// After the expiry (by the clock passed in, the record still in the
/// table) the function runs again.
#[tokio::test]
async fn an_expired_output_is_not_replayed() {
    let db = Db::new().await;
    let card = Card::default();
    let now = Arc::new(AtomicU64::new(epoch_ms()));
    let clock = now.clone();
    let f = wrapper(db.store(options()))
        .expiry(Duration::from_secs(60))
        .unwrap()
        .clock(move || clock.load(Ordering::SeqCst));
    let lease = |now: &AtomicU64| now.load(Ordering::SeqCst) + 30_000;
    f.call(charge("p1", 5), lease(&now), card.charge())
        .await
        .unwrap();
    now.fetch_add(59_000, Ordering::SeqCst);
    let r = f
        .call(charge("p1", 5), lease(&now), card.charge())
        .await
        .unwrap();
    assert_eq!((r.reference.as_str(), card.runs()), ("p1-1", 1));
    now.fetch_add(2_000, Ordering::SeqCst);
    let r = f
        .call(charge("p1", 5), lease(&now), card.charge())
        .await
        .unwrap();
    assert_eq!((r.reference.as_str(), card.runs()), ("p1-2", 2));
}

/// The claim's answer lost (DynamoDB applied it): the SDK's re-send is
/// refused against this call's own claim, which it recognises: the
/// function runs once, and the call succeeds.
#[tokio::test]
async fn a_wrapped_call_whose_claim_answer_was_lost_runs_once() {
    let db = Db::new().await;
    let (store, proxy) = db.proxied(options()).await;
    let card = Card::default();
    let f = wrapper(store);
    proxy.set_first(Fault::ByOperation(&[("PutItem", Fault::DropAnswer)]), 1);
    let r = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    assert_eq!((r.reference.as_str(), card.runs()), ("p1-1", 1));
    let r = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!((r.reference.as_str(), card.runs()), ("p1-1", 1));
}

/// With the cache on, a repeat in this process costs no request; each
/// function's cache is its own and its keys have its own prefix.
#[tokio::test]
async fn a_cached_repeat_costs_no_request() {
    let db = Db::new().await;
    let (store, proxy) = db.proxied(options()).await;
    let card = Card::default();
    let f = wrapper(store.clone()).cache_bytes(64 * 1024);
    f.call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(proxy.requests(), 2, "claim and completion");
    for _ in 0..3 {
        let r = f
            .call(charge("p1", 5), soon(), card.charge())
            .await
            .unwrap();
        assert_eq!(r.reference, "p1-1");
    }
    assert!(matches!(
        f.call(charge("p1", 6), soon(), card.charge()).await,
        Err(IdempotencyError::OtherPayload)
    ));
    assert_eq!((proxy.requests(), card.runs()), (2, 1));
    // Another function (another name), the same input: its own key.
    let refund = Idempotent::<Charge, Receipt>::new(store, "refund")
        .unwrap()
        .key(|c: &Charge| Some(c.id.clone()));
    let r = refund
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!((r.reference.as_str(), card.runs()), ("p1-2", 2));
}

/// Keys: an input without one is refused (or, when allowed, runs without
/// idempotency every time); by default the whole input is the key; a
/// call past its deadline writes nothing; errors never carry the input.
#[tokio::test]
async fn keys_deadlines_and_errors_that_say_no_input() {
    let db = Db::new().await;
    let card = Card::default();
    let f = wrapper(db.store(options()));
    let none = f.call(charge("", 5), soon(), card.charge()).await;
    assert!(matches!(none, Err(IdempotencyError::NoKey)), "{none:?}");
    let lax = f.clone().run_without_key();
    lax.call(charge("", 5), soon(), card.charge())
        .await
        .unwrap();
    lax.call(charge("", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(card.runs(), 2);
    assert!(db.items().await.is_empty());

    // The whole input as the key: any field differs, another key.
    let whole = Idempotent::<Charge, Receipt>::new(db.store(options()), "whole").unwrap();
    whole
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    whole
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(card.runs(), 3);
    whole
        .call(charge("p1", 6), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!(card.runs(), 4);

    // A lease end as a tokio Instant; one already past refuses the call.
    let later = tokio::time::Instant::now() + Duration::from_secs(30);
    f.call(charge("p9", 5), later, card.charge()).await.unwrap();
    let past = f.call(charge("p8", 5), epoch_ms() - 1, card.charge()).await;
    assert!(
        matches!(
            past,
            Err(IdempotencyError::Store(StoreError::DeadlineExceeded))
        ),
        "{past:?}"
    );
    assert_eq!(card.runs(), 5);

    let secret = "card-4111-1111";
    f.call(charge(secret, 5), soon(), card.charge())
        .await
        .unwrap();
    let errors = [
        f.call(charge(secret, 6), soon(), card.charge())
            .await
            .unwrap_err(),
        f.call(charge("", 6), soon(), card.charge())
            .await
            .unwrap_err(),
    ];
    for e in errors {
        let shown = format!("{e} {e:?}");
        assert!(
            !shown.contains(secret) && !shown.contains("card-"),
            "{shown}"
        );
    }
    assert!(Idempotent::<Charge, Receipt>::new(db.store(options()), "a#b").is_err());
    assert!(Idempotent::<Charge, Receipt>::new(db.store(options()), "").is_err());
}

/// The claim commits and its answer is lost on every one of the SDK's
/// tries: the call cannot know, and fails without running. Its claim is
/// given back, so a retry runs instead of being refused as in progress by
/// the call's own claim until the lease ends.
#[tokio::test]
async fn a_claim_whose_answer_never_arrives_is_given_back() {
    let db = Db::new().await;
    let (store, proxy) = db.proxied(options()).await;
    let card = Card::default();
    let f = wrapper(store);
    proxy.set(Fault::ByOperation(&[("PutItem", Fault::DropAnswer)]), 1.0);
    let r = f.call(charge("p1", 5), soon(), card.charge()).await;
    assert!(
        matches!(r, Err(IdempotencyError::Store(StoreError::Network))),
        "{r:?}"
    );
    assert_eq!(card.runs(), 0);
    assert!(db.items().await.is_empty(), "the claim was not given back");
    proxy.heal();
    let r = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!((r.reference.as_str(), card.runs()), ("p1-1", 1));
}

/// An earlier layout's output (`legacy`, `code`), read by a
/// [`lambda_idempotency::idempotency::LegacyOutput`]: the error names the
/// attribute, never its value.
fn legacy_reader(
    item: &std::collections::HashMap<String, AttributeValue>,
) -> Result<String, StoreError> {
    let legacy = lambda_idempotency::dynamo::string(item, "legacy")?;
    let code: u16 = lambda_idempotency::dynamo::number(item, "code")?;
    Ok(format!("{code}:{legacy}"))
}

/// A completed record written by an earlier build, its output in
/// attributes of its own and no `data`: without a legacy reader it is
/// corrupt (naming `data`); with one, it replays what the reader makes of
/// it, through `with_options` too; a reader's error is the claim's, and a
/// `data` that is there but not a string stays corrupt.
#[tokio::test]
async fn a_completed_record_of_an_earlier_layout_replays_through_the_legacy_reader() {
    let db = Db::new().await;
    let now = epoch_ms();
    let exp = now / 1000 + 3600;
    let put = |key: &str, extra: Vec<(&str, AttributeValue)>| {
        let mut item = std::collections::HashMap::from([
            ("id".to_owned(), AttributeValue::S(key.into())),
            ("status".to_owned(), AttributeValue::S("COMPLETED".into())),
            ("fingerprint".to_owned(), AttributeValue::S("f".into())),
            ("expiration".to_owned(), AttributeValue::N(exp.to_string())),
        ]);
        item.extend(extra.into_iter().map(|(k, v)| (k.to_owned(), v)));
        db.client
            .put_item()
            .table_name(db.table.table_name())
            .set_item(Some(item))
            .send()
    };
    put(
        "old",
        vec![
            ("legacy", AttributeValue::S("secret-body".into())),
            ("code", AttributeValue::N("201".into())),
        ],
    )
    .await
    .unwrap();
    put(
        "bad",
        vec![("legacy", AttributeValue::S("secret-body".into()))],
    )
    .await
    .unwrap();
    put("wrong", vec![("data", AttributeValue::N("1".into()))])
        .await
        .unwrap();

    let plain = db.store(options());
    let Err(StoreError::CorruptItem(why)) = plain.claim(&claim("old", "f", "a1", now)).await else {
        panic!("an earlier layout's record read without a legacy reader")
    };
    assert!(why.contains("`data`"), "{why}");

    let store = db.store(options()).legacy_output(legacy_reader);
    // Through another options' store too (the expiry the caller sets later).
    let later = store
        .with_options(IdempotencyOptions {
            cache_bytes: 1 << 16,
            ..options()
        })
        .unwrap();
    for s in [&store, &later] {
        assert_eq!(
            s.claim(&claim("old", "f", "a2", now)).await,
            Ok(Claimed::Refused(Refusal::Completed(Stored {
                output: "201:secret-body".into(),
                expires_at: exp,
            })))
        );
        assert_eq!(
            s.claim(&claim("old", "g", "a2", now)).await,
            Ok(Claimed::Refused(Refusal::OtherPayload))
        );
    }
    let Err(StoreError::CorruptItem(why)) = store.claim(&claim("bad", "f", "a3", now)).await else {
        panic!("a malformed earlier record read")
    };
    assert!(why.contains("`code`") && !why.contains("secret"), "{why}");
    let Err(StoreError::CorruptItem(why)) = store.claim(&claim("wrong", "f", "a3", now)).await
    else {
        panic!("a `data` that is not a string read")
    };
    assert!(why.contains("`data`"), "{why}");
}

/// The expiry counts from the completion, not the claim: a call that ran
/// ten minutes (by the clock passed in) still replays for the whole
/// expiry after it completed.
#[tokio::test]
async fn the_expiry_counts_from_the_completion() {
    let db = Db::new().await;
    let start = epoch_ms();
    let now = Arc::new(AtomicU64::new(start));
    let clock = now.clone();
    let f = wrapper(db.store(options())).clock(move || clock.load(Ordering::SeqCst));
    let ran = now.clone();
    f.call(charge("p1", 5), start + 30 * 60_000, move |c: Charge| {
        ran.fetch_add(600_000, Ordering::SeqCst);
        std::future::ready(Ok::<_, Declined>(Receipt {
            reference: c.id,
            replayed: false,
        }))
    })
    .await
    .unwrap();
    let items = db.items().await;
    assert_eq!(
        text(&items[0], "expiration"),
        ((start + 600_000) / 1000 + 3600).to_string()
    );
}

/// A function that ends after its lease (the invocation's deadline) is
/// still completed: nothing took the key meanwhile, the completion's
/// condition (this attempt's in-progress claim) holds, so its output is
/// recorded and the retry replays it instead of running it again. (The
/// wrapper has no cutoff of its own: it always attempts the completion.)
#[tokio::test]
async fn a_function_that_ends_after_its_lease_is_still_completed() {
    let db = Db::new().await;
    let card = Card::default();
    let f = wrapper(db.store(options()));
    let runs = card.runs.clone();
    let r = f
        .call(
            charge("p1", 5),
            epoch_ms() + 200,
            move |c: Charge| async move {
                tokio::time::sleep(Duration::from_millis(400)).await;
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, Declined>(Receipt {
                    reference: format!("{}-{n}", c.id),
                    replayed: false,
                })
            },
        )
        .await
        .unwrap();
    assert_eq!(r.reference, "p1-1");
    let again = f
        .call(charge("p1", 5), soon(), card.charge())
        .await
        .unwrap();
    assert_eq!((again.reference.as_str(), card.runs()), ("p1-1", 1));
}

/// Options that would leave the store unusable are refused when it is
/// built, with the option's name and what it needs (never a panic later);
/// and no `Debug` shows a cached output (user data).
#[tokio::test]
async fn unusable_options_are_refused_and_debug_shows_no_output() {
    let db = Db::new().await;
    let zero = |expiry| IdempotencyOptions {
        expiry,
        ..options()
    };
    for bad in [Duration::ZERO, Duration::from_millis(999)] {
        let Err(ConfigError::Invalid { var, .. }) =
            IdempotencyStore::new(db.client.clone(), db.table.clone(), zero(bad))
        else {
            panic!("an expiry of {bad:?} accepted")
        };
        assert_eq!(var, "expiry");
        assert!(db.store(options()).with_options(zero(bad)).is_err());
        assert!(wrapper(db.store(options())).expiry(bad).is_err());
    }
    let Err(ConfigError::Invalid { var, .. }) =
        wrapper(db.store(options())).max_lease(Duration::ZERO)
    else {
        panic!("a zero lease accepted")
    };
    assert_eq!(var, "max_lease");
    // Absurd but usable: accepted, and no arithmetic overflows.
    let card = Card::default();
    let f = wrapper(db.store(options()))
        .expiry(Duration::MAX)
        .unwrap()
        .max_lease(Duration::MAX)
        .unwrap()
        .cache_bytes(1 << 16);
    let r = f
        .call(charge("secret-id-77", 5), u64::MAX, card.charge())
        .await
        .unwrap();
    assert_eq!(r.reference, "secret-id-77-1");
    let again = f
        .call(charge("secret-id-77", 5), u64::MAX, card.charge())
        .await
        .unwrap();
    assert_eq!(
        (again.reference.as_str(), card.runs()),
        ("secret-id-77-1", 1)
    );
    let shown = format!("{f:?} {:?}", f.store());
    assert!(shown.contains("Cache"), "{shown}");
    assert!(!shown.contains("secret-id"), "{shown}");
}

/// An output that cannot be serialised (a map whose keys are not
/// strings): the function ran, so its key is completed without it and
/// every repeat gets the same error; the function runs once (it ran at
/// every call, and no record was left).
#[tokio::test]
async fn an_output_that_cannot_be_serialised_runs_once() {
    use lambda_idempotency::idempotency::NotStored;
    use std::collections::HashMap;
    let db = Db::new().await;
    let f: Idempotent<Charge, HashMap<(u8, u8), u8>> =
        Idempotent::new(db.store(options()), "pairs")
            .unwrap()
            .key(|c: &Charge| Some(c.id.clone()));
    let runs = Arc::new(AtomicU64::new(0));
    for call in 0..3 {
        let runs = runs.clone();
        let r = f
            .call(charge("p1", 5), soon(), move |_c: Charge| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Declined>(HashMap::from([((1, 2), 3)]))
            })
            .await;
        assert!(
            matches!(
                r,
                Err(IdempotencyError::OutputNotStored(NotStored::NotJson))
            ),
            "call {call}: {r:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let items = db.items().await;
    assert_eq!(items.len(), 1);
    assert_eq!(text(&items[0], "status"), "COMPLETED");
}

/// An output whose record would be over DynamoDB's item limit (here by
/// its JSON escapes: 210 Ki quotes are 420 KiB of JSON): not sent, the
/// key completed without it, and the function does not run again, even
/// after its lease (it did, after every lease: the completion failed and
/// the record stayed IN_PROGRESS).
#[tokio::test]
async fn an_output_too_large_to_store_runs_once_even_after_its_lease() {
    use lambda_idempotency::idempotency::NotStored;
    use std::sync::atomic::AtomicU64 as Clock;
    let db = Db::new().await;
    let now = Arc::new(Clock::new(epoch_ms()));
    let clock = now.clone();
    let f: Idempotent<Charge, String> = Idempotent::new(db.store(options()), "big")
        .unwrap()
        .key(|c: &Charge| Some(c.id.clone()))
        .max_lease(Duration::from_secs(5))
        .unwrap()
        .clock(move || clock.load(Ordering::SeqCst));
    let runs = Arc::new(AtomicU64::new(0));
    let call = || {
        let runs = runs.clone();
        f.call(
            charge("p1", 5),
            epoch_ms() + 600_000,
            move |_c: Charge| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Declined>("\"".repeat(210 * 1024))
            },
        )
    };
    let first = call().await;
    assert!(
        matches!(
            first,
            Err(IdempotencyError::OutputNotStored(NotStored::TooLarge))
        ),
        "{first:?}"
    );
    // Well after the 5 s lease (and the skew allowance).
    now.fetch_add(60_000, Ordering::SeqCst);
    let later = call().await;
    assert!(
        matches!(
            later,
            Err(IdempotencyError::OutputNotStored(NotStored::TooLarge))
        ),
        "{later:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // An output that fits, just under the limit, is stored and replayed.
    let fits: Idempotent<Charge, String> = Idempotent::new(db.store(options()), "fits")
        .unwrap()
        .key(|c: &Charge| Some(c.id.clone()));
    let big = "a".repeat(400 * 1024 - 2_000);
    for _ in 0..2 {
        let out = fits
            .call(charge("p2", 5), soon(), |_c: Charge| {
                let big = big.clone();
                async move { Ok::<_, Declined>(big) }
            })
            .await
            .unwrap();
        assert_eq!(out.len(), big.len());
    }
}

/// The deadline as the invocation's `Context` gives it: a real one (epoch
/// milliseconds), a local emulator's duration (`cargo lambda watch` sends
/// 600000: it was taken as long past, and every call failed
/// DeadlineExceeded), and none at all (a `Context::default()`), which is a
/// clear error of its own; and the error as Lambda reports it.
#[tokio::test]
async fn the_deadline_is_taken_as_the_context_gives_it() {
    use lambda_idempotency::lambda_runtime::{Context, Diagnostic};
    let db = Db::new().await;
    let f = wrapper(db.store(options()));
    let card = Card::default();
    let mut real = Context::default();
    real.deadline = epoch_ms() + 30_000;
    f.call(charge("real", 5), &real, card.charge())
        .await
        .unwrap();
    let mut emulator = Context::default();
    emulator.deadline = 600_000;
    f.call(charge("local", 5), &emulator, card.charge())
        .await
        .unwrap();
    assert_eq!(card.runs(), 2);
    let none = f
        .call(charge("none", 5), &Context::default(), card.charge())
        .await;
    let Err(e) = none else { panic!("{none:?}") };
    assert!(matches!(e, IdempotencyError::NoDeadline), "{e:?}");
    assert_eq!(card.runs(), 2, "refused before anything ran");
    let d: Diagnostic = e.into();
    assert_eq!(d.error_type, "IdempotencyError.NoDeadline");
    assert!(d.error_message.contains("Context"), "{}", d.error_message);
    // Another payload under a key, as Lambda shows it.
    let other = f.call(charge("real", 6), &real, card.charge()).await;
    let d = other.expect_err("another payload").diagnostic();
    assert_eq!(d.error_type, "IdempotencyError.OtherPayload");
}

/// The transactional form: the function's writes and the key's
/// completion commit in one transaction. A repeat replays without running
/// it; a write whose condition refuses cancels everything and gives the
/// key back; a transaction whose answer was lost is retried by the SDK
/// with the same token and counted once (the plain form's window, where
/// the effect committed and the completion failed, does not exist here).
#[tokio::test]
async fn the_transactional_form_commits_the_effect_with_the_completion() {
    use aws_sdk_dynamodb::types::Put;
    let db = Db::new().await;
    let effects = unique_name("effects");
    create_table(&db.client, &effects, "pk").await.unwrap();
    let (store, proxy) = db.proxied(options()).await;
    let f = wrapper(store);
    let runs = Arc::new(AtomicU64::new(0));
    let pay = |id: &'static str| {
        let runs = runs.clone();
        let effects = effects.clone();
        move |c: Charge| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let put = Put::builder()
                .table_name(effects)
                .item("pk", AttributeValue::S(format!("payment#{id}")))
                .item("amount", AttributeValue::N(c.amount.to_string()))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .expect("a put");
            let receipt = Receipt {
                reference: c.id,
                replayed: false,
            };
            Ok::<_, Declined>((receipt, vec![TransactWriteItem::builder().put(put).build()]))
        }
    };
    // The transaction's answer is lost once: the SDK re-sends it with the
    // same ClientRequestToken, and DynamoDB answers it as the success it
    // was.
    proxy.set_first(
        Fault::ByOperation(&[("TransactWriteItems", Fault::DropAnswer)]),
        1,
    );
    let first = f.call_transact(charge("t1", 5), soon(), pay("A")).await;
    assert_eq!(first.unwrap().reference, "t1");
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    let again = f.call_transact(charge("t1", 5), soon(), pay("A")).await;
    assert_eq!(again.unwrap().reference, "t1");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "replayed, not run");
    assert_eq!(scan_all(&db.client, &effects).await.len(), 1);
    let record = db.items().await;
    assert_eq!(text(&record[0], "status"), "COMPLETED");

    // Another key whose write is refused (payment A exists): nothing is
    // written, the key is given back, and a retry runs again.
    let refused = f.call_transact(charge("t2", 7), soon(), pay("A")).await;
    let Err(IdempotencyError::Cancelled { reasons }) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(reasons, ["ConditionalCheckFailed", "None"]);
    assert_eq!(db.items().await.len(), 1, "the key was given back");
    let retried = f.call_transact(charge("t2", 7), soon(), pay("B")).await;
    assert_eq!(retried.unwrap().reference, "t2");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(scan_all(&db.client, &effects).await.len(), 2);
}
