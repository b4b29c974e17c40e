//! The order API against a real DynamoDB-compatible server, with real API
//! Gateway HTTP API events read by `lambda_http`: every row of the contract
//! (issue 15, docs/api.md), the order's lifecycle continuing through the
//! order consumer, concurrency, and hostile input.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{Body, Request, Response};
use lambda_idempotency::idempotency::{Claim, Claimed};
use lambda_idempotency::time::epoch_ms;
use order_api::domain::{fingerprint, owner_of, record_key};
use order_api::event::Scope;
use order_api::store::ApiStore;
use order_api::testing::*;
use orders::testing::proxy::{Fault, FaultProxy};
use orders::testing::{OrdersDb, TestDb, batch_of, client_for, run};
use proptest::prelude::*;
use serde_json::{Value, json};

const BODY: &str = r#"{"customerId":"cust-1","amount":150000,"currency":"INR"}"#;

async fn send(api: &order_api::OrderApi, req: Request) -> Response<Body> {
    api.handle(req, deadline_in(30)).await
}

fn order_id(r: &Response<Body>) -> String {
    json_of(r)["orderId"].as_str().expect("orderId").to_owned()
}

/// [`ALICE`]'s scope, as the function reads it.
fn alice() -> Scope {
    Scope::Iam("arn:aws:iam::123456789012:user/alice".into())
}

fn without(
    mut item: std::collections::HashMap<String, AttributeValue>,
    names: &[&str],
) -> std::collections::HashMap<String, AttributeValue> {
    for n in names {
        item.remove(*n);
    }
    item
}

#[tokio::test]
async fn a_first_post_is_201_and_its_order_is_the_consumers_order_placed() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let before = epoch_ms() / 1000;
    let r = send(&api, post(Some("key-1"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    assert_eq!(header(&r, "content-type"), Some("application/json"));
    assert_eq!(header(&r, "idempotent-replayed"), None);
    let body = json_of(&r);
    let id = order_id(&r);
    assert_eq!(
        header(&r, "location"),
        Some(format!("/orders/{id}").as_str())
    );
    assert_eq!(
        body,
        json!({"orderId": id, "status": "PLACED", "customerId": "cust-1", "amount": 150000,
               "currency": "INR", "createdAt": body["createdAt"]})
    );
    // The expiry policy, published: 24 h from now by default.
    let expires = header(&r, "idempotency-expires").expect("expiry header");
    let stored = t.records().await;
    assert_eq!(stored.len(), 1);
    let exp: u64 = orders::testing::s(&stored[0], "expires_at")
        .parse()
        .unwrap();
    assert!((before + 86_400..=before + 86_402).contains(&exp), "{exp}");
    assert_eq!(
        expires,
        lambda_idempotency::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(exp))
    );
    // The key is not stored in the clear.
    assert!(!format!("{stored:?}").contains("key-1"));

    // The very item the order consumer writes for this OrderPlaced (seq 1).
    let placed = json!({"eventId": format!("{id}-placed"), "orderId": id, "seq": 1,
        "type": "OrderPlaced", "occurredAt": body["createdAt"],
        "data": {"customerId": "cust-1", "amount": 150000, "currency": "INR"}});
    let other = TestDb::new().await;
    let (report, failed) = run(&other.consumer(), &batch_of(&[placed])).await;
    let labels = orders::testing::labels(&report);
    assert_eq!((labels, failed.len()), (vec!["Applied"], 0));
    let by_consumer = other.item(&id).await.expect("consumer's item");
    let by_api = t.db.item(&id).await.expect("API's item");
    // The API's item is the consumer's plus `owner`: the hash of the
    // caller's principal, never the principal itself (issue 27).
    assert_eq!(orders::testing::s(&by_api, "owner"), owner_of(&alice()));
    assert!(!format!("{by_api:?}").contains("alice"));
    assert_eq!(
        without(by_api, &["updated_at", "owner"]),
        without(by_consumer, &["updated_at"])
    );
}

#[tokio::test]
async fn the_rest_of_the_lifecycle_arrives_through_sqs_unchanged() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201);
    let id = order_id(&r);
    let g = send(&api, get(&id, &ALICE)).await;
    assert_eq!(g.status(), 200);
    let shown = json_of(&g);
    assert_eq!(
        (shown["status"].clone(), shown["lastEventSeq"].clone()),
        (json!("PLACED"), json!(1))
    );
    assert_eq!(shown["createdAt"], json_of(&r)["createdAt"]);

    // OrderPaid, seq 2, through the order consumer.
    let paid = orders::testing::body(&id, 2, "OrderPaid", "e-paid");
    let (report, failed) = run(&t.db.consumer(), &batch_of(&[paid])).await;
    let labels = orders::testing::labels(&report);
    assert_eq!((labels, failed.len()), (vec!["Applied"], 0));
    let shown = json_of(&send(&api, get(&id, &ALICE)).await);
    assert_eq!(shown["status"], "PAID");
    assert_eq!(shown["lastEventSeq"], 2);
    assert!(shown["paidAt"].is_string() && shown["updatedAt"].is_string());
    assert_eq!(
        t.db.history(&id).await,
        [format!("{id}-placed"), "e-paid".into()]
    );
}

#[tokio::test]
async fn the_same_key_and_body_replays_the_stored_response_byte_for_byte() {
    let t = ApiDb::new().await;
    let (api, requests) = {
        let counter = orders::testing::RequestCounter::default();
        let conf =
            t.db.client
                .config()
                .to_builder()
                .interceptor(counter.clone())
                .build();
        (
            t.api_with_client(aws_sdk_dynamodb::Client::from_conf(conf), &[]),
            counter,
        )
    };
    let first = send(&api, post(Some("\"k-1\""), BODY, &ALICE)).await;
    assert_eq!(first.status(), 201);
    let first_requests = requests.get();
    // Other key order and whitespace, and the bare form of the same key.
    let same = "{ \"currency\": \"INR\",\n  \"amount\": 150000, \"customerId\": \"cust-1\" }";
    for key in ["k-1", "\"k-1\""] {
        let again = send(&api, post(Some(key), same, &ALICE)).await;
        assert_eq!(again.status(), 201);
        assert_eq!(text(&again), text(&first));
        assert_eq!(header(&again, "location"), header(&first, "location"));
        assert_eq!(
            header(&again, "idempotency-expires"),
            header(&first, "idempotency-expires")
        );
        assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    }
    assert_eq!(first_requests, 2, "claim + transaction");
    assert_eq!(
        requests.get() - first_requests,
        2,
        "one request per replay, no read"
    );
    assert_eq!(t.orders().await.len(), 1);
}

#[tokio::test]
async fn the_same_key_with_another_body_is_422() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    assert_eq!(
        send(&api, post(Some("k"), BODY, &ALICE)).await.status(),
        201
    );
    let other = r#"{"customerId":"cust-1","amount":150001,"currency":"INR"}"#;
    let r = send(&api, post(Some("k"), other, &ALICE)).await;
    assert!(is_problem(&r, 422), "{}", text(&r));
    assert!(!text(&r).contains("150001"));
    assert_eq!(t.orders().await.len(), 1);
}

#[tokio::test]
async fn a_bad_key_or_body_is_400_or_415_and_nothing_is_stored() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let long = "k".repeat(256);
    for key in [
        None,
        Some(""),
        Some("\"\""),
        Some(long.as_str()),
        Some("\"open"),
        Some("a b"),
        Some("ключ"),
    ] {
        let r = send(&api, post(key, BODY, &ALICE)).await;
        assert!(is_problem(&r, 400), "{key:?}: {}", text(&r));
        let detail = json_of(&r)["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains("Idempotency-Key"), "{detail}");
        // Each says what is wrong: an empty key is not a missing one.
        match key {
            None => assert!(detail.contains("none arrived"), "{detail}"),
            Some("") | Some("\"\"") => assert!(detail.contains("must not be empty"), "{detail}"),
            Some(_) => assert!(!detail.contains("required"), "{key:?}: {detail}"),
        }
    }
    // A control character cannot come through API Gateway's JSON as a
    // header value lambda_http accepts; built directly, it is refused too.
    for raw in [&b"a\tb"[..], b"\"a\tb\"", b"k\xff"] {
        let mut req = post(Some("x"), BODY, &ALICE);
        req.headers_mut().insert(
            "idempotency-key",
            lambda_http::http::HeaderValue::from_bytes(raw).unwrap(),
        );
        assert!(is_problem(&send(&api, req).await, 400), "{raw:?}");
    }
    let mut req = post(Some("x"), BODY, &ALICE);
    req.headers_mut()
        .append("idempotency-key", "y".parse().unwrap());
    assert!(is_problem(&send(&api, req).await, 400), "a repeated header");

    let secret = r#"{"customerId":"secret-customer","amount":-5,"currency":"INR"}"#;
    for (body, field) in [
        ("", "no body"),
        ("{", "JSON"),
        ("[]", "object"),
        (r#"{"amount":5,"currency":"INR"}"#, "customerId"),
        (secret, "amount"),
        (
            r#"{"customerId":"c","amount":5,"currency":"SECRET"}"#,
            "currency",
        ),
    ] {
        let r = send(&api, post(Some("fix-me"), body, &ALICE)).await;
        assert!(is_problem(&r, 400), "{body}: {}", text(&r));
        let detail = json_of(&r)["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(field), "{detail}");
        assert!(
            !text(&r).contains("secret") && !text(&r).contains("SECRET"),
            "{}",
            text(&r)
        );
    }
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let mut headers = vec![("idempotency-key", "fix-me")];
        if let Some(ct) = ct {
            headers.push(("content-type", ct));
        }
        let r = send(
            &api,
            request("POST", "/orders", &headers, Some(BODY), &ALICE),
        )
        .await;
        assert!(is_problem(&r, 415), "{ct:?}: {}", text(&r));
    }
    assert!(t.records().await.is_empty() && t.orders().await.is_empty());
    // Nothing was stored: the same key, fixed, places the order.
    let r = send(&api, post(Some("fix-me"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201);
}

#[tokio::test]
async fn a_request_in_flight_is_409_until_its_lease_ends_at_its_deadline() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    // A first attempt that claimed the key and died (or still runs): its
    // invocation's deadline is 2 s away.
    let store = ApiStore::new(
        t.db.client.clone(),
        t.idempotency_table.clone(),
        t.db.store(),
    )
    .expect("a valid table name");
    let value: Value = serde_json::from_str(BODY).unwrap();
    let (key, fp) = (record_key(&alice(), "k"), fingerprint(&value));
    let now = epoch_ms();
    let claim = Claim {
        key: &key,
        fingerprint: &fp,
        attempt: "crashed-attempt",
        lease_until_ms: now + 2_000,
        now_ms: now,
    };
    assert_eq!(store.idempotency().claim(&claim).await, Ok(Claimed::Held));
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert!(is_problem(&r, 409), "{}", text(&r));
    assert_eq!(header(&r, "retry-after"), Some("1"));
    let other = r#"{"customerId":"cust-2","amount":1,"currency":"INR"}"#;
    assert!(is_problem(
        &send(&api, post(Some("k"), other, &ALICE)).await,
        422
    ));
    assert!(t.orders().await.is_empty());
    // The lease ends with that deadline (and the clock skew allowed
    // between hosts, a second): the retry places the order.
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    assert_eq!(t.orders().await.len(), 1);
    // The dead attempt cannot complete the key any more.
    let late = order_api::domain::StoredResponse::new(201)
        .header("location", "/orders/x")
        .text("{}");
    let ev = orders::event::parse_body(Some(
        &orders::testing::body("late", 1, "OrderPlaced", "late").to_string(),
    ))
    .unwrap();
    assert!(
        store
            .commit(&claim, &ev, &owner_of(&alice()), &late)
            .await
            .is_err()
    );
    assert_eq!(t.orders().await.len(), 1);
}

#[tokio::test]
async fn dynamodb_unavailable_or_throttled_is_503_and_the_retry_succeeds() {
    let t = ApiDb::new().await;
    let down = FaultProxy::answering(Fault::Refuse).await;
    let api = t.api_with_client(client_for(&down.url()), &[]);
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert!(is_problem(&r, 503), "{}", text(&r));
    assert_eq!(header(&r, "retry-after"), Some("1"));
    let g = send(&api, get("ord_x", &ALICE)).await;
    assert!(is_problem(&g, 503), "{}", text(&g));

    // The claim commits, the transaction is throttled: the claim is given
    // back, so the retry is not held off by 409.
    let proxy = FaultProxy::start(t.db.endpoint(), 15).await;
    proxy.set(
        Fault::ByOperation(&[("TransactWriteItems", Fault::Throttle("ThrottlingException"))]),
        1.0,
    );
    let api = t.api_with_client(client_for(&proxy.url()), &[]);
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert!(is_problem(&r, 503), "{}", text(&r));
    assert!(
        t.records().await.is_empty() && t.orders().await.is_empty(),
        "nothing half-stored"
    );
    proxy.heal();
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    assert_eq!(t.orders().await.len(), 1);
}

#[tokio::test]
async fn an_expired_key_may_be_reused_whatever_ttl_has_deleted() {
    let t = ApiDb::new().await;
    let api = t.api(&[("IDEMPOTENCY_TTL_SECONDS", "1")]);
    let first = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(first.status(), 201);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    // The record is still there (TTL deletes late, dynoxide not at all)...
    assert_eq!(t.records().await.len(), 1);
    // ...and no longer answers: a new order, even with another body.
    let other = r#"{"customerId":"cust-2","amount":7,"currency":"USD"}"#;
    let second = send(&api, post(Some("k"), other, &ALICE)).await;
    assert_eq!(second.status(), 201, "{}", text(&second));
    assert_eq!(header(&second, "idempotent-replayed"), None);
    assert_ne!(order_id(&first), order_id(&second));
    assert_eq!(t.orders().await.len(), 2);
}

#[tokio::test]
async fn keys_are_scoped_by_caller() {
    let t = ApiDb::new().await;
    // Each authorizer's principals, each API reading its own kind (all on
    // the same tables, so that every record key meets every other).
    let by_mode: [(&str, Vec<Caller>); 4] = [
        ("none", vec![Caller::Anonymous]),
        (
            "jwt",
            vec![
                Caller::Jwt("https://issuer", "alice"),
                Caller::Jwt("https://issuer", "bob"),
                Caller::Jwt("https://other-issuer", "alice"),
            ],
        ),
        (
            "iam",
            vec![
                Caller::Iam("arn:aws:iam::123456789012:user/alice"),
                Caller::Iam("arn:aws:sts::123456789012:assumed-role/Ordering/s-1"),
            ],
        ),
        (
            "lambda",
            vec![Caller::Lambda("alice"), Caller::Lambda("bob")],
        ),
    ];
    let mut ids = std::collections::HashSet::new();
    let mut callers = 0;
    for (mode, cs) in &by_mode {
        let api = t.api(&[("API_AUTH", mode)]);
        for c in cs {
            let r = send(&api, post(Some("shared"), BODY, c)).await;
            assert_eq!(r.status(), 201, "{c:?}: {}", text(&r));
            assert_eq!(header(&r, "idempotent-replayed"), None, "{c:?}");
            ids.insert(order_id(&r));
            callers += 1;
        }
    }
    assert_eq!(ids.len(), callers);
    let jwt = t.api(&[("API_AUTH", "jwt")]);
    let again = send(&jwt, post(Some("shared"), BODY, &by_mode[1].1[1])).await;
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    // Another session of the same assumed role is another caller by
    // default (people assume roles too: IAM Identity Center, SAML), so it
    // neither replays the first session's answer nor sees its order ...
    let iam = t.api(&[]);
    let other_session = Caller::Iam("arn:aws:sts::123456789012:assumed-role/Ordering/s-2");
    let first = send(&iam, post(Some("shared"), BODY, &by_mode[2].1[1])).await;
    assert_eq!(header(&first, "idempotent-replayed"), Some("true"));
    let apart = send(&iam, post(Some("shared"), BODY, &other_session)).await;
    assert_eq!(apart.status(), 201, "{}", text(&apart));
    assert_eq!(header(&apart, "idempotent-replayed"), None);
    let shown = send(&iam, get(&order_id(&first), &other_session)).await;
    assert_eq!(
        shown.status(),
        404,
        "another session's order: {}",
        text(&shown)
    );
    callers += 1;
    // ... unless API_SHARED_ROLES names the role as a machine's: then its
    // retry after a credentials refresh (a new session) finds the key.
    let shared = t.api(&[("API_SHARED_ROLES", "Ordering")]);
    let s1 = send(&shared, post(Some("machine"), BODY, &by_mode[2].1[1])).await;
    let s2 = send(&shared, post(Some("machine"), BODY, &other_session)).await;
    assert_eq!(s2.body(), s1.body());
    assert_eq!(header(&s2, "idempotent-replayed"), Some("true"));
    callers += 1;
    assert_eq!(t.orders().await.len(), callers);
}

#[tokio::test]
async fn without_a_principal_from_the_configured_authorizer_it_is_403_and_nothing_is_stored() {
    let t = ApiDb::new().await;
    let jwt = Caller::Jwt("https://issuer", "alice");
    let iam = ALICE;
    let lambda = Caller::Lambda("alice");
    let no_sub = Caller::Jwt("https://issuer", "");
    let blank_lambda = Caller::Lambda(" ");
    // Each mode refuses no authorizer at all, and a principal of any other
    // kind (the route is behind another authorizer than API_AUTH says).
    for (mode, refused) in [
        ("iam", vec![&Caller::Anonymous, &jwt, &lambda]),
        ("", vec![&Caller::Anonymous, &jwt, &lambda]),
        ("jwt", vec![&Caller::Anonymous, &iam, &lambda, &no_sub]),
        (
            "lambda",
            vec![&Caller::Anonymous, &iam, &jwt, &blank_lambda],
        ),
    ] {
        let api = t.api(&[("API_AUTH", mode)]);
        for c in refused {
            let r = send(&api, post(Some("k"), BODY, c)).await;
            assert!(is_problem(&r, 403), "{mode} {c:?}: {}", text(&r));
            assert_eq!(
                json_of(&r)["type"],
                "urn:order-api:problem:forbidden",
                "{mode} {c:?}"
            );
            // Before the key and the body are even looked at.
            let r = send(&api, post(None, "not json", c)).await;
            assert!(is_problem(&r, 403), "{mode} {c:?}: {}", text(&r));
            let r = send(&api, get("ord_x", c)).await;
            assert!(is_problem(&r, 403), "{mode} GET {c:?}: {}", text(&r));
        }
    }
    assert!(t.records().await.is_empty() && t.orders().await.is_empty());
    // The Lambda entry point counts it under its own outcome.
    assert_eq!(
        order_api::outcome_of(&send(&t.api(&[]), post(Some("k"), BODY, &Caller::Anonymous)).await)
            .label(),
        "Forbidden"
    );
}

#[tokio::test]
async fn an_order_is_shown_only_to_the_caller_who_placed_it() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    let id = order_id(&r);
    assert_eq!(send(&api, get(&id, &ALICE)).await.status(), 200);
    // Another session of alice's... no: another caller altogether, with
    // the same key space and the order's id: as absent as an unknown id.
    let bob = Caller::Iam("arn:aws:iam::123456789012:user/bob");
    let r = send(&api, get(&id, &bob)).await;
    assert!(is_problem(&r, 404), "{}", text(&r));
    assert_eq!(text(&r), text(&send(&api, get("ord_unknown", &bob)).await));
    assert!(!text(&r).contains("cust-1"));
    // The same name under another authorizer is another principal.
    let jwt_api = t.api(&[("API_AUTH", "jwt")]);
    let r = send(
        &jwt_api,
        get(
            &id,
            &Caller::Jwt("", "arn:aws:iam::123456789012:user/alice"),
        ),
    )
    .await;
    assert!(is_problem(&r, 404), "{}", text(&r));
    // An order placed through SQS was placed by no caller of the API.
    let placed = orders::testing::body("ord-by-sqs", 1, "OrderPlaced", "e-sqs");
    let (_, failed) = run(&t.db.consumer(), &batch_of(&[placed])).await;
    assert!(failed.is_empty());
    let r = send(&api, get("ord-by-sqs", &ALICE)).await;
    assert!(is_problem(&r, 404), "{}", text(&r));
    // The owner mark survives the order's later events.
    let paid = orders::testing::body(&id, 2, "OrderPaid", "e-paid");
    let (_, failed) = run(&t.db.consumer(), &batch_of(&[paid])).await;
    assert!(failed.is_empty());
    let shown = json_of(&send(&api, get(&id, &ALICE)).await);
    assert_eq!(shown["status"], "PAID");
}

#[tokio::test]
async fn two_idempotency_keys_in_one_request_are_400_and_nothing_is_stored() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    // The header sent twice: API Gateway's HTTP API hands the function one
    // value, the two joined with a comma (as `event` builds it).
    for (k1, k2) in [
        ("k1", "k2"),
        ("\"k1\"", "\"k2\""),
        ("k1", "k1"),
        ("\"k1\"", "k2"),
    ] {
        let req = request(
            "POST",
            "/orders",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", k1),
                ("idempotency-key", k2),
            ],
            Some(BODY),
            &ALICE,
        );
        let r = send(&api, req).await;
        assert!(is_problem(&r, 400), "{k1} + {k2}: {}", text(&r));
        let detail = json_of(&r)["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains("once"), "{detail}");
    }
    // A client that joins them itself, with spaces.
    for joined in ["k1, k2", "\"k1\", \"k2\"", "\"k1\" ,k2", "k1,"] {
        let r = send(&api, post(Some(joined), BODY, &ALICE)).await;
        assert!(is_problem(&r, 400), "{joined}: {}", text(&r));
    }
    assert!(t.records().await.is_empty() && t.orders().await.is_empty());
    // A comma inside a quoted key is part of that one key.
    let r = send(&api, post(Some("\"k1,k2\""), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
}

#[tokio::test]
async fn ids_with_spaces_and_non_ascii_are_read_through_their_percent_encoded_path() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let store = ApiStore::new(
        t.db.client.clone(),
        t.idempotency_table.clone(),
        t.db.store(),
    )
    .expect("a valid table name");
    // Orders with ids the consumer accepts, placed by alice through the
    // API's own write (the API itself only makes `ord_<hex>` ids).
    let ids = ["ord 1", "заказ-1", "ord%201", "ord/1?x#y"];
    for (i, id) in ids.iter().enumerate() {
        let ev = orders::event::parse_body(Some(
            &orders::testing::body(id, 1, "OrderPlaced", &format!("e-{i}")).to_string(),
        ))
        .unwrap();
        let key = format!("k-{i}");
        let now = epoch_ms();
        let claim = Claim {
            key: &key,
            fingerprint: "f",
            attempt: &key,
            lease_until_ms: now + 10_000,
            now_ms: now,
        };
        assert_eq!(store.idempotency().claim(&claim).await, Ok(Claimed::Held));
        let response = order_api::domain::StoredResponse::new(201)
            .header("location", "/orders/x")
            .text("{}");
        store
            .commit(&claim, &ev, &owner_of(&alice()), &response)
            .await
            .expect("commit");
    }
    // As a client encodes the id into the path; decoded once.
    for (path_id, id) in [
        ("ord%201", "ord 1"),
        ("%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7-1", "заказ-1"),
        ("%d0%b7%d0%b0%d0%ba%d0%b0%d0%b7-1", "заказ-1"),
        ("ord%25201", "ord%201"),
        ("ord%2F1%3Fx%23y", "ord/1?x#y"),
    ] {
        let r = send(&api, get(path_id, &ALICE)).await;
        assert_eq!(r.status(), 200, "{path_id}: {}", text(&r));
        assert_eq!(json_of(&r)["orderId"], id, "{path_id}");
    }
    // A space or non-ASCII sent unencoded reaches lambda_http's URI
    // encoded, and reads the same.
    let r = send(&api, get("заказ-1", &ALICE)).await;
    assert_eq!(json_of(&r)["orderId"], "заказ-1", "{}", text(&r));
    // Not an encoding, or not UTF-8: no order has such an id.
    for bad in ["ord%2", "ord%zz1", "ord%+11", "%FF%FE"] {
        let r = send(&api, get(bad, &ALICE)).await;
        assert!(is_problem(&r, 404), "{bad}: {}", text(&r));
    }
}

#[tokio::test]
async fn unknown_orders_and_routes_are_problems() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    assert!(is_problem(
        &send(&api, get("ord_missing", &ALICE)).await,
        404
    ));
    let long = "x".repeat(300);
    assert!(is_problem(&send(&api, get(&long, &ALICE)).await, 404));
    let r = send(&api, request("GET", "/orders", &[], None, &ALICE)).await;
    assert!(is_problem(&r, 405));
    assert_eq!(header(&r, "allow"), Some("POST"));
    let r = send(&api, request("DELETE", "/orders/o", &[], None, &ALICE)).await;
    assert!(is_problem(&r, 405));
    assert!(is_problem(
        &send(&api, request("GET", "/", &[], None, &ALICE)).await,
        404
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_identical_requests_at_once_place_one_order() {
    let t = ApiDb::new().await;
    let api = std::sync::Arc::new(t.api(&[]));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move { send(&api, post(Some("same"), BODY, &ALICE)).await })
        })
        .collect();
    let mut created = Vec::new();
    let mut in_flight = 0;
    for task in tasks {
        let r = task.await.expect("no panic");
        match r.status().as_u16() {
            201 => created.push((text(&r), header(&r, "location").map(str::to_owned))),
            409 if is_problem(&r, 409) && header(&r, "retry-after").is_some() => in_flight += 1,
            other => panic!("{other}: {}", text(&r)),
        }
    }
    assert!(!created.is_empty());
    assert!(
        created.windows(2).all(|w| w[0] == w[1]),
        "every 201 is byte-identical"
    );
    assert_eq!(created.len() + in_flight, 50);
    assert_eq!(t.orders().await.len(), 1, "exactly one order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_keys_at_once_place_fifty_orders() {
    let t = ApiDb::new().await;
    let api = std::sync::Arc::new(t.api(&[]));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(
                async move { send(&api, post(Some(&format!("key-{i}")), BODY, &ALICE)).await },
            )
        })
        .collect();
    for task in tasks {
        let r = task.await.expect("no panic");
        assert_eq!(r.status(), 201, "{}", text(&r));
    }
    assert_eq!(t.orders().await.len(), 50);
}

fn hostile_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![]),
        proptest::collection::vec(any::<u8>(), 0..300),
        "[ -~]{0,300}".prop_map(String::into_bytes),
        "\"[ -~]{0,300}\"?".prop_map(String::into_bytes),
        "\\PC{0,40}".prop_map(String::into_bytes),
    ]
}

fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        (1usize..3000).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()),
        (1usize..200)
            .prop_map(|n| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)).into_bytes()),
        Just(vec![b'{'; 20_000]),
        (
            any::<Option<i64>>(),
            "\\PC{0,10}",
            prop_oneof![
                Just(json!(1.5)),
                Just(json!("x")),
                Just(json!(null)),
                Just(json!([])),
                Just(json!(u64::MAX))
            ]
        )
            .prop_map(|(amount, customer, currency)| {
                json!({"customerId": customer, "amount": amount, "currency": currency})
                    .to_string()
                    .into_bytes()
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Whatever the key, body and content type: no panic, and every refusal
    /// is problem+json (a valid request, rarely generated, is a 201).
    #[test]
    fn hostile_input_never_panics_and_is_answered_with_a_problem(
        key in proptest::option::of(hostile_key()),
        body in hostile_body(),
        content_type in proptest::option::of(prop_oneof![Just(b"application/json".to_vec()), proptest::collection::vec(any::<u8>(), 0..40)]),
        extra in proptest::collection::vec(("[a-z-]{1,20}", proptest::collection::vec(32u8..127, 0..50)), 0..5),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let t = ApiDb::new().await;
            // No authorizer in a request built by hand: the local loop's
            // setting, so that the property is about keys and bodies.
            let api = t.api(&[("API_AUTH", "none")]);
            let mut builder = lambda_http::http::Request::builder().method("POST").uri("/orders");
            if let Some(k) = &key
                && let Ok(v) = lambda_http::http::HeaderValue::from_bytes(k)
            {
                builder = builder.header("idempotency-key", v);
            }
            if let Some(ct) = &content_type
                && let Ok(v) = lambda_http::http::HeaderValue::from_bytes(ct)
            {
                builder = builder.header("content-type", v);
            }
            for (name, value) in &extra {
                if let Ok(v) = lambda_http::http::HeaderValue::from_bytes(value) {
                    builder = builder.header(name.as_str(), v);
                }
            }
            let req = builder.body(Body::Binary(body.clone())).unwrap();
            let r = api.handle(req, deadline_in(30)).await;
            let status = r.status().as_u16();
            prop_assert!(status == 201 || is_problem(&r, status), "{status}: {}", text(&r));
            prop_assert!([201, 400, 415].contains(&status), "{status}");
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn the_lambda_entry_point_takes_its_deadline_from_the_invocation() {
    let t = ApiDb::new().await;
    let (api, requests) = t.counted_api(&[]);
    let with_deadline = |key: &str, deadline: u64| {
        let mut cx = lambda_http::Context::default();
        cx.deadline = deadline;
        lambda_http::RequestExt::with_lambda_context(post(Some(key), BODY, &ALICE), cx)
    };
    // A deadline already past: no time to store anything, 503 and nothing
    // stored, so a retry with the key can still succeed.
    let r = api.invoke(with_deadline("past", epoch_ms() - 1_000)).await;
    assert!(is_problem(&r, 503), "{}", text(&r));
    assert_eq!(requests.get(), 0, "a call started past the cutoff");
    assert!(t.orders().await.is_empty() && t.records().await.is_empty());
    // A real one, and the duration `cargo lambda watch` sends in its place
    // (600000): both leave time to place the order.
    for (key, deadline) in [("epoch", epoch_ms() + 30_000), ("relative", 600_000)] {
        let r = api.invoke(with_deadline(key, deadline)).await;
        assert_eq!(r.status(), 201, "{key}: {}", text(&r));
    }
    assert_eq!(t.orders().await.len(), 2);
}

/// Place an order through a proxy that drops the answer of the first `op`
/// after DynamoDB applied it (the proxy forwards the request, reads the
/// whole answer and resets the connection): the SDK cannot tell it from a
/// request that never arrived, and sends it again. Then the same request
/// again, as the client's own retry would.
async fn place_with_the_first_answer_dropped(
    op: &'static [(&'static str, Fault)],
) -> (ApiDb, Response<Body>, Response<Body>) {
    let t = ApiDb::new().await;
    let proxy = FaultProxy::start(t.db.endpoint(), 27).await;
    proxy.set_first(Fault::ByOperation(op), 1);
    let api = t.api_with_client(client_for(&proxy.url()), &[]);
    let first = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    // The claim, the commit, and the SDK's re-send of the dropped one.
    assert_eq!(proxy.forwarded(), 3);
    let again = send(&api, post(Some("k"), BODY, &ALICE)).await;
    (t, first, again)
}

/// The ambiguous failure the key exists for, on the claim: the re-sent
/// PutItem is refused against this request's own claim (the attempt id it
/// carries), which is not "another request in progress" but this one's:
/// it goes on to 201, and the key is not locked until the lease ends.
#[tokio::test]
async fn a_claim_that_committed_unseen_is_the_requests_own_not_a_409() {
    let (t, first, again) =
        place_with_the_first_answer_dropped(&[("PutItem", Fault::DropAnswer)]).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    assert_eq!(header(&first, "idempotent-replayed"), None);
    assert_eq!(again.status(), 201, "{}", text(&again));
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(text(&again), text(&first));
    assert_eq!(t.orders().await.len(), 1);
}

/// The same on the commit: the re-sent TransactWriteItems carries the same
/// ClientRequestToken (the SDK re-sends the request it built once), so
/// DynamoDB (and dynoxide) answers it as the success it was, not as a
/// cancellation against its own committed write.
#[tokio::test]
async fn a_commit_that_committed_unseen_is_answered_by_its_token() {
    let (t, first, again) =
        place_with_the_first_answer_dropped(&[("TransactWriteItems", Fault::DropAnswer)]).await;
    assert_eq!(first.status(), 201, "{}", text(&first));
    assert_eq!(header(&first, "idempotent-replayed"), None);
    assert_eq!(again.status(), 201, "{}", text(&again));
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(text(&again), text(&first));
    assert_eq!(t.orders().await.len(), 1);
}

/// An attempt id too long to be a ClientRequestToken (over 36 characters)
/// is not sent as one; the SDK then fills in a token of its own, once per
/// call, so a re-sent commit is still answered as its success.
#[tokio::test]
async fn a_commit_without_our_token_is_answered_by_the_sdks_own() {
    let t = ApiDb::new().await;
    let proxy = FaultProxy::start(t.db.endpoint(), 27).await;
    let store = ApiStore::new(
        client_for(&proxy.url()),
        t.idempotency_table.clone(),
        t.db.store(),
    )
    .expect("a valid table name");
    let value: Value = serde_json::from_str(BODY).unwrap();
    let (key, fp) = (record_key(&Scope::Anonymous, "k"), fingerprint(&value));
    let attempt = "a".repeat(37);
    let now = epoch_ms();
    let claim = Claim {
        key: &key,
        fingerprint: &fp,
        attempt: &attempt,
        lease_until_ms: now + 30_000,
        now_ms: now,
    };
    assert_eq!(store.idempotency().claim(&claim).await, Ok(Claimed::Held));
    let ev = orders::event::parse_body(Some(
        &orders::testing::body("ord-own", 1, "OrderPlaced", "ord-own-placed").to_string(),
    ))
    .unwrap();
    let response = order_api::domain::StoredResponse::new(201)
        .header("location", "/orders/ord-own")
        .text("{}");
    proxy.set_first(
        Fault::ByOperation(&[("TransactWriteItems", Fault::DropAnswer)]),
        1,
    );
    let owner = owner_of(&Scope::Anonymous);
    assert_eq!(store.commit(&claim, &ev, &owner, &response).await, Ok(()));
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    assert_eq!(t.orders().await.len(), 1);
}

/// The claim commits and its answer is lost on every one of the SDK's
/// tries: the request cannot know, and answers 503. Its claim is given
/// back, so the client's retry with the key places the order instead of
/// being answered 409 by the request's own claim until the lease ends.
#[tokio::test]
async fn a_claim_whose_answer_never_arrives_is_given_back() {
    let t = ApiDb::new().await;
    let proxy = FaultProxy::start(t.db.endpoint(), 27).await;
    proxy.set(Fault::ByOperation(&[("PutItem", Fault::DropAnswer)]), 1.0);
    let api = t.api_with_client(client_for(&proxy.url()), &[]);
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert!(is_problem(&r, 503), "{}", text(&r));
    assert!(proxy.injected().get("drop-answer").is_some_and(|n| *n >= 1));
    assert!(t.records().await.is_empty(), "the claim was given back");
    proxy.heal();
    let r = send(&api, post(Some("k"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    assert_eq!(t.orders().await.len(), 1);
}

/// [`ALICE`]'s record key for `legacy-key` and [`BODY`]'s fingerprint as
/// the previous build (cbe2055, before the library's layer) computed them:
/// SHA-256 of the length-prefixed parts `iam`, her ARN and the key, and of
/// the body's canonical JSON, computed outside this code base from that
/// build's `record_key` and `fingerprint`.
const OLD_RECORD_KEY: &str = "44356d462869db7cef23f94161994611085e3cff72da60fd30bcb12c4dbe9e4e";
const OLD_FINGERPRINT: &str = "276eaf018487bda10293420eaa72e16a293341ac7e68b229bb2157ca79ff33ad";

/// An idempotency record exactly as the previous build left it: its claim
/// (`status`, `fingerprint`, `attempt`, `lease_until`, `expires_at` under
/// `idempotency_key`) and, when `completed` holds (status, body,
/// location, order id), its commit's `SET status = COMPLETED,
/// response_status, response_body, location, order_id REMOVE lease_until`.
async fn put_old_record(
    t: &ApiDb,
    expires_at: u64,
    lease_until: u64,
    completed: Option<(u16, &str, &str, &str)>,
) {
    let mut item = std::collections::HashMap::from([
        (
            "idempotency_key".to_owned(),
            AttributeValue::S(OLD_RECORD_KEY.into()),
        ),
        (
            "fingerprint".to_owned(),
            AttributeValue::S(OLD_FINGERPRINT.into()),
        ),
        (
            "attempt".to_owned(),
            AttributeValue::S("old-attempt".into()),
        ),
        (
            "expires_at".to_owned(),
            AttributeValue::N(expires_at.to_string()),
        ),
    ]);
    match completed {
        None => {
            item.insert("status".into(), AttributeValue::S("IN_PROGRESS".into()));
            item.insert(
                "lease_until".into(),
                AttributeValue::N(lease_until.to_string()),
            );
        }
        Some((status, body, location, order_id)) => {
            item.insert("status".into(), AttributeValue::S("COMPLETED".into()));
            item.insert(
                "response_status".into(),
                AttributeValue::N(status.to_string()),
            );
            item.insert("response_body".into(), AttributeValue::S(body.into()));
            item.insert("location".into(), AttributeValue::S(location.into()));
            item.insert("order_id".into(), AttributeValue::S(order_id.into()));
        }
    }
    t.db.client
        .put_item()
        .table_name(&t.idempotency_table)
        .set_item(Some(item))
        .send()
        .await
        .expect("write the old record");
}

/// The layer's record key and fingerprint are the previous build's, byte
/// for byte, and so are the attribute names it writes: an in-place
/// upgrade finds the old records under the same items.
#[tokio::test]
async fn the_layer_keys_and_writes_records_as_the_previous_build_did() {
    assert_eq!(record_key(&alice(), "legacy-key"), OLD_RECORD_KEY);
    assert_eq!(
        fingerprint(&serde_json::from_str(BODY).unwrap()),
        OLD_FINGERPRINT
    );
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let r = send(&api, post(Some("legacy-key"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    let records = t.records().await;
    assert_eq!(records.len(), 1);
    let s = |k: &str| orders::testing::s(&records[0], k);
    assert_eq!(
        (s("idempotency_key"), s("fingerprint"), s("status")),
        (
            OLD_RECORD_KEY.into(),
            OLD_FINGERPRINT.into(),
            "COMPLETED".into()
        )
    );
    let mut names: Vec<&str> = records[0].keys().map(String::as_str).collect();
    names.sort_unstable();
    // The old build's claim attributes (lease_until removed on completion,
    // as it did), its TTL; the response in `data` instead of its three.
    assert_eq!(
        names,
        [
            "attempt",
            "data",
            "expires_at",
            "fingerprint",
            "idempotency_key",
            "status"
        ]
    );
}

/// Keys the previous build stored stay good across an in-place upgrade:
/// a repeat of a key it completed replays, byte for byte, what it
/// answered (its `stored_response`: the status, the body, `Location`,
/// `Content-Type: application/json`, `Idempotency-Expires` and
/// `Idempotent-Replayed: true`, nothing else); with another body it is
/// 422; a key it still held in progress is 409 (with another body, 422).
#[tokio::test]
async fn keys_the_previous_build_stored_replay_after_an_upgrade() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let exp = epoch_ms() / 1000 + 3_600;
    let body = r#"{"orderId":"ord_0123456789abcdef0123456789abcdef","status":"PLACED","customerId":"cust-1","amount":150000,"currency":"INR","createdAt":"2026-12-04T20:00:00.000Z"}"#;
    let location = "/orders/ord_0123456789abcdef0123456789abcdef";
    put_old_record(
        &t,
        exp,
        0,
        Some((201, body, location, "ord_0123456789abcdef0123456789abcdef")),
    )
    .await;

    let r = send(&api, post(Some("legacy-key"), BODY, &ALICE)).await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    assert_eq!(text(&r), body);
    let mut headers: Vec<(String, String)> = r
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    headers.sort();
    let expires =
        lambda_idempotency::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(exp));
    assert_eq!(
        headers,
        [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("idempotency-expires".to_owned(), expires),
            ("idempotent-replayed".to_owned(), "true".to_owned()),
            ("location".to_owned(), location.to_owned()),
        ]
    );
    // Replayed, not placed again: no order was written, the record is as
    // the old build left it.
    assert!(t.orders().await.is_empty());
    let records = t.records().await;
    assert_eq!(records.len(), 1);
    assert!(!records[0].contains_key("data"));

    let other = order_body("cust-2", 7);
    let r = send(&api, post(Some("legacy-key"), &other, &ALICE)).await;
    assert!(is_problem(&r, 422), "{}", text(&r));

    // A key the old build was still running when the new one took over.
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    put_old_record(&t, exp, epoch_ms() + 60_000, None).await;
    let r = send(&api, post(Some("legacy-key"), BODY, &ALICE)).await;
    assert!(is_problem(&r, 409), "{}", text(&r));
    assert!(header(&r, "retry-after").is_some());
    let r = send(&api, post(Some("legacy-key"), &other, &ALICE)).await;
    assert!(is_problem(&r, 422), "{}", text(&r));
}

/// Two orders that differ only in an extra field's number beyond an f64's
/// precision are two requests: the second is 422, not the first's answer.
#[tokio::test]
async fn an_order_that_differs_only_beyond_f64_precision_is_another_request() {
    let t = ApiDb::new().await;
    let api = t.api(&[]);
    let body = |note: &str| {
        format!(r#"{{"customerId":"cust-1","amount":150000,"currency":"INR","note":{note}}}"#)
    };
    let r = send(
        &api,
        post(Some("k"), &body("0.1000000000000000001"), &ALICE),
    )
    .await;
    assert_eq!(r.status(), 201, "{}", text(&r));
    let r = send(&api, post(Some("k"), &body("0.1"), &ALICE)).await;
    assert!(is_problem(&r, 422), "{}", text(&r));
    assert_eq!(t.orders().await.len(), 1);
}
