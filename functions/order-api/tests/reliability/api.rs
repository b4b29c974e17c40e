//! Property 11: the order API's binary, several execution
//! environments at once (one process each, as Lambda runs them), real
//! HTTP API (payload 2.0) events through the Runtime API emulator, and
//! latency on every DynamoDB request so that requests overlap for real.
//!
//! - One key, 50 identical requests at once: exactly one order; every
//!   answer is the first 201 byte for byte (replayed) or a 409.
//! - 50 keys at once: 50 orders.
//! - SIGKILL between receiving a request and answering it, then a retry
//!   with the same key: one order per key, and the retry gets its 201 (after
//!   409s while the dead attempt's lease lives, when it died holding one).
//! - What the binary writes: the Powertools keys on its request line, and
//!   one EMF line per request with its outcome and `ColdStart` 1, then 0.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::api_binary_path;
use crate::function::{Function, InvokeResult, LambdaEnv};
use crate::harness::Harness;
use order_api::testing::create_idempotency_table;
use order_api::testing::{ALICE, Caller, event, order_body};
use orders::testing::proxy::Fault;
use orders::testing::rng::Rng;
use orders::testing::scan_all;

/// Long enough for a request behind the proxy's latency, short enough that
/// a dead attempt's lease (the invocation deadline) ends within the test.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The idempotency table beside the harness's orders table.
fn idempotency_table(orders_table: &str) -> String {
    format!("{orders_table}-idempotency")
}

/// `n` environments running the order API against a fresh pair of tables.
async fn start(n: usize, seed: u64) -> Harness {
    start_with(n, seed, 1).await
}

/// `n` environments whose processes each serve `concurrency` requests at
/// once (Lambda Managed Instances when above 1).
async fn start_with(n: usize, seed: u64, concurrency: usize) -> Harness {
    let h = Harness::start(crate::binary_path(), n, seed, |mut c| {
        c.binary = api_binary_path();
        let table = idempotency_table(&c.table);
        if concurrency > 1 {
            c = c.managed(concurrency);
        }
        c.env("IDEMPOTENCY_TABLE", &table)
    })
    .await;
    create_idempotency_table(&h.db.client, &idempotency_table(&h.db.table))
        .await
        .expect("create the idempotency table");
    h
}

fn post(key: &str, body: &str) -> Arc<Vec<u8>> {
    let ev = event(
        "POST",
        "/orders",
        &[
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ],
        Some(body),
        &ALICE,
    );
    Arc::new(ev.to_string().into_bytes())
}

/// An HTTP answer as API Gateway would send it.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    status: u64,
    headers: BTreeMap<String, String>,
    body: String,
}

impl Answer {
    fn of(r: &InvokeResult) -> Result<Answer, String> {
        let InvokeResult::Response { body, .. } = r else {
            return Err(format!("no HTTP answer: {r:?}"));
        };
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let headers = v["headers"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Answer {
            status: v["statusCode"].as_u64().ok_or("no statusCode")?,
            headers,
            body: v["body"].as_str().unwrap_or("").to_owned(),
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    fn order_id(&self) -> Option<String> {
        let v: Value = serde_json::from_str(&self.body).ok()?;
        v["orderId"].as_str().map(str::to_owned)
    }
}

async fn order_ids(h: &Harness) -> Vec<String> {
    scan_all(&h.db.client, &h.db.table)
        .await
        .iter()
        .filter_map(|item| item.get("order_id")?.as_s().ok().cloned())
        .collect()
}

/// Send `payloads` at once, spread over the environments; each
/// environment answers one at a time, as a Lambda execution environment does
/// (or `AWS_LAMBDA_MAX_CONCURRENCY` at a time). The deadline runs from the
/// moment a request is queued, not from when a process takes it, so it is
/// generous: these tests are about what is stored, not about deadlines.
async fn send_all(h: &Harness, payloads: Vec<Arc<Vec<u8>>>) -> Vec<InvokeResult> {
    join_all(
        payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| h.envs[i % h.envs.len()].invoke(p, Duration::from_secs(20))),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_identical_requests_place_one_order_and_fifty_keys_place_fifty() {
    fifty_requests(start(5, 111).await, "api concurrency").await;
}

/// The same on Lambda Managed Instances: one process, eight requests at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serving_eight_requests_at_once_places_one_order_per_key() {
    let h = start_with(1, 114, 8).await;
    let env = h.envs[0].clone();
    let at_once = fifty_requests(h, "api managed").await;
    assert!(at_once >= 2, "the process never served requests at once");
    assert_eq!(env.logs.cold_starts(), 1, "one cold start per process");
}

/// Returns the most requests the first process held at once.
async fn fifty_requests(h: Harness, name: &str) -> usize {
    h.proxy.set(
        Fault::Latency {
            before_ms: (5, 40),
            after_ms: (5, 40),
        },
        1.0,
    );

    // One key, 50 identical requests at once.
    let body = order_body("cust-api-1", 150_000);
    let results = send_all(&h, (0..50).map(|_| post("one-key", &body)).collect()).await;
    let answers: Vec<Answer> = results
        .iter()
        .map(|r| Answer::of(r).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let firsts: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.status == 201 && !a.replayed())
        .collect();
    assert_eq!(firsts.len(), 1, "exactly one first-time 201: {answers:#?}");
    let first = firsts[0];
    let (mut replays, mut in_flight) = (0, 0);
    for a in &answers {
        match a.status {
            201 if a.replayed() => {
                replays += 1;
                assert_eq!(
                    (&a.body, a.header("location")),
                    (&first.body, first.header("location")),
                    "a replay is the first answer byte for byte"
                );
            }
            201 => {}
            409 => {
                in_flight += 1;
                assert!(a.header("retry-after").is_some(), "{a:?}");
                assert_eq!(a.header("content-type"), Some("application/problem+json"));
            }
            _ => panic!("neither the 201, its replay nor a 409: {a:?}"),
        }
    }
    assert_eq!(
        order_ids(&h).await,
        vec![first.order_id().expect("an orderId")],
        "exactly the one order the 201 names"
    );
    println!("[api] one key x 50: 1 created, {replays} replayed, {in_flight} in progress (409)");

    // 50 keys at once: 50 orders, each answer its own.
    let results = send_all(
        &h,
        (0..50)
            .map(|i| {
                post(
                    &format!("key-{i}"),
                    &order_body(&format!("cust-{i}"), 100 + i),
                )
            })
            .collect(),
    )
    .await;
    let mut created = HashSet::new();
    for r in &results {
        let a = Answer::of(r).unwrap_or_else(|e| panic!("{e}"));
        assert!(a.status == 201 && !a.replayed(), "{a:?}");
        created.insert(a.order_id().expect("an orderId"));
    }
    assert_eq!(created.len(), 50);
    let stored: HashSet<String> = order_ids(&h).await.into_iter().collect();
    assert_eq!(stored.len(), 51, "the first order and 50 more");
    assert!(created.is_subset(&stored));
    let at_once = h.envs[0].peak_in_flight().await;
    h.proxy.heal();
    h.finish(name).await;
    println!("[{name}] requests one process held at once: {at_once}");
    at_once
}

/// How one killed request's retries went.
#[derive(Debug, Default)]
struct Retried {
    in_flight: u32,
    replayed: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_killed_before_its_answer_is_retried_into_one_order() {
    let h = start(2, 112).await;
    h.proxy.set(
        Fault::Latency {
            before_ms: (30, 120),
            after_ms: (30, 120),
        },
        1.0,
    );
    let mut rng = Rng::new(112);
    let mut answered: BTreeMap<String, String> = BTreeMap::new();
    let mut retries: Vec<Retried> = Vec::new();
    // Kill requests at random moments until six have died that way
    // (bounded): some before the claim, some holding the claim, some after
    // the commit.
    for attempt in 0..40 {
        if retries.len() >= 6 {
            break;
        }
        let key = format!("crash-{attempt}");
        let body = order_body(&format!("cust-crash-{attempt}"), 1_000 + attempt);
        let env: Arc<LambdaEnv> = h.envs[attempt as usize % 2].clone();
        let call = {
            let (env, payload) = (env.clone(), post(&key, &body));
            tokio::spawn(async move { env.invoke(payload, TIMEOUT).await })
        };
        tokio::time::sleep(Duration::from_millis(rng.range(0, 450))).await;
        env.kill_if_busy();
        let first = call.await.expect("the invocation task");
        let answer = match first {
            InvokeResult::Crashed { .. } => {
                // The client saw no answer: it retries with the same key,
                // on any environment, until it gets one that is not a 409.
                let mut retried = Retried::default();
                let answer = loop {
                    let r = h.envs[(attempt as usize + 1) % 2]
                        .invoke(post(&key, &body), TIMEOUT)
                        .await;
                    let a = Answer::of(&r).unwrap_or_else(|e| panic!("{e}"));
                    if a.status != 409 {
                        break a;
                    }
                    retried.in_flight += 1;
                    assert!(
                        retried.in_flight < 200,
                        "the dead attempt's lease never ended"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                };
                retried.replayed = answer.replayed();
                retries.push(retried);
                answer
            }
            r => Answer::of(&r).unwrap_or_else(|e| panic!("{e}")),
        };
        assert_eq!(answer.status, 201, "{key}: {answer:?}");
        answered.insert(key, answer.order_id().expect("an orderId"));
    }
    assert!(
        retries.len() >= 3,
        "too few requests died mid-flight to say anything: {retries:?}"
    );
    // One order per key: as many orders as keys, each the one its key's
    // 201 names.
    let stored: HashSet<String> = order_ids(&h).await.into_iter().collect();
    let named: HashSet<String> = answered.values().cloned().collect();
    assert_eq!(named.len(), answered.len(), "two keys answered one order");
    assert_eq!(stored, named, "an order no answer names, or the reverse");
    println!(
        "[api crash] {} keys, {} killed mid-request; retries: {:?}",
        answered.len(),
        retries.len(),
        retries
    );
    h.proxy.heal();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_binary_writes_the_powertools_keys_and_an_emf_line_per_request() {
    let h = start(1, 113).await;
    let body = order_body("cust-logs", 42);
    for _ in 0..2 {
        let r = h.envs[0].invoke(post("logs-key", &body), TIMEOUT).await;
        assert_eq!(Answer::of(&r).map(|a| a.status), Ok(201), "{r:?}");
    }
    let lines = h.envs[0].logs.json_lines();
    let emf: Vec<&Value> = lines.iter().filter(|l| l.get("_aws").is_some()).collect();
    assert_eq!(emf.len(), 2, "one EMF line per request: {emf:?}");
    for (doc, (cold, outcome)) in emf.iter().zip([(1, "Created"), (0, "Replayed")]) {
        assert_eq!(doc["ColdStart"], json!(cold), "{doc}");
        assert_eq!(doc[outcome], json!(1), "{doc}");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            json!("OrderApi")
        );
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("declared metrics");
        // Every outcome is declared and counted, zeros included.
        // Forbidden (403) since issue 27.
        assert_eq!(declared.len(), 11, "{doc}");
        let total: u64 = declared
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .filter(|n| *n != "ColdStart")
            .map(|n| doc[n].as_u64().expect("a count"))
            .sum();
        assert_eq!(total, 1, "one request, one outcome: {doc}");
        assert_eq!(doc["service"], json!("order-api"), "{doc}");
    }
    let requests: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == json!("request"))
        .collect();
    assert_eq!(requests.len(), 2, "{lines:?}");
    assert_ne!(
        requests[0]["function_request_id"], requests[1]["function_request_id"],
        "each line names its own invocation"
    );
    for (l, (cold, outcome)) in requests
        .iter()
        .zip([(true, "Created"), (false, "Replayed")])
    {
        assert_eq!(l["cold_start"], json!(cold), "{l}");
        assert_eq!(l["outcome"], json!(outcome), "{l}");
        assert_eq!(l["status"], json!(201), "{l}");
        assert_eq!(l["function_name"], json!("order-consumer-reliability"));
        assert!(l["function_request_id"].is_string(), "{l}");
    }
    h.finish("api logs").await;
}

/// Issue 27: the binary as deployed (no API_AUTH: iam) answers a request
/// that reaches it without an IAM principal 403, stores nothing, and
/// counts it under Forbidden; the same request signed by IAM places the
/// order.
#[tokio::test]
async fn the_api_binary_refuses_a_request_without_a_principal() {
    let h = start(1, 127).await;
    let body = order_body("cust-closed", 7);
    for caller in [Caller::Anonymous, Caller::Jwt("https://issuer", "alice")] {
        let ev = event(
            "POST",
            "/orders",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", "closed-key"),
            ],
            Some(&body),
            &caller,
        );
        let r = h.envs[0]
            .invoke(Arc::new(ev.to_string().into_bytes()), TIMEOUT)
            .await;
        let a = Answer::of(&r).expect("an HTTP answer");
        assert_eq!(a.status, 403, "{caller:?}: {a:?}");
        assert_eq!(a.header("content-type"), Some("application/problem+json"));
    }
    assert!(order_ids(&h).await.is_empty());
    let idem = scan_all(&h.db.client, &idempotency_table(&h.db.table)).await;
    assert!(idem.is_empty(), "nothing stored: {idem:?}");
    let r = h.envs[0].invoke(post("closed-key", &body), TIMEOUT).await;
    assert_eq!(Answer::of(&r).map(|a| a.status), Ok(201), "{r:?}");
    let emf: Vec<Value> = h.envs[0]
        .logs
        .json_lines()
        .into_iter()
        .filter(|l| l.get("_aws").is_some())
        .collect();
    let forbidden: Vec<_> = emf.iter().map(|d| d["Forbidden"].clone()).collect();
    assert_eq!(forbidden, [json!(1), json!(1), json!(0)], "{emf:?}");
    h.finish("api closed").await;
}
