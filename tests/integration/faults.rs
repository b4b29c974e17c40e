//! DynamoDB failures the function must report as failures, never acknowledge.
//!
//! A tiny HTTP server stands in for DynamoDB and answers every request with
//! the same error, as DynamoDB would put it on the wire. The SDK parses those
//! responses itself, so this exercises the real error mapping, retries and
//! timeouts (it is a faulty server, not a mock of the SDK).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use order_consumer::core::batch::BatchError;
use order_consumer::core::error::StoreError;
use order_consumer::core::outcome::{Skip, Unsettled};
use order_consumer::orders::domain::Outcome;
use order_consumer::orders::store::OrderStore;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::time::Instant;

use order_consumer::testing::provider::read_request;
use order_consumer::testing::*;

#[derive(Clone, Copy)]
pub enum Fault {
    /// Answer with this HTTP status and DynamoDB error type.
    Error(u16, &'static str),
    /// Answer with this HTTP status and this exact JSON error body.
    Body(u16, &'static str),
    /// Accept the request and never answer.
    Hang,
    /// Answer by operation (the `X-Amz-Target` suffix): (operation, HTTP
    /// status, exact JSON body); other operations get a 400 ValidationException.
    ByOperation(&'static [(&'static str, u16, &'static str)]),
}

/// What the faulty server answers to a request with this head; None: hang.
fn answer(fault: Fault, head: &str) -> Option<(u16, String)> {
    let error = |kind: &str| {
        format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"injected {kind}"}}"#
        )
    };
    match fault {
        Fault::Hang => None,
        Fault::Body(status, body) => Some((status, body.to_owned())),
        Fault::Error(status, kind) => Some((status, error(kind))),
        Fault::ByOperation(routes) => {
            let op = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.trim()
                        .eq_ignore_ascii_case("x-amz-target")
                        .then(|| v.trim())
                })
                .and_then(|t| t.rsplit('.').next())
                .unwrap_or("");
            Some(
                routes
                    .iter()
                    .find(|(o, _, _)| *o == op)
                    .map(|(_, status, body)| (*status, (*body).to_owned()))
                    .unwrap_or_else(|| (400, error("ValidationException"))),
            )
        }
    }
}

/// Serve `fault` on 127.0.0.1:0; returns the URL and a request counter.
pub async fn faulty_dynamodb(fault: Fault) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let Some(head) = read_request(&mut sock, &mut buf).await else {
                        return;
                    };
                    counter.fetch_add(1, Ordering::SeqCst);
                    let Some((status, body)) = answer(fault, &head) else {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return;
                    };
                    let resp = format!(
                        "HTTP/1.1 {status} Injected\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: test\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, count)
}

async fn run_against(
    fault: Fault,
    deadline: Instant,
) -> (Vec<Outcome>, Result<Vec<String>, BatchError>, usize) {
    let (url, count) = faulty_dynamodb(fault).await;
    let c = consumer_with(
        OrderStore::new(client_for(&url), "orders"),
        &[("DEADLINE_MARGIN_MS", "200")],
    );
    let event = batch_of(&[
        body("ord-1", 1, "OrderPlaced", "e1"),
        body("ord-2", 1, "OrderPlaced", "e2"),
    ]);
    let (report, response) = c.handle_batch(&event, deadline).await;
    let outcomes = report.outcomes().cloned().collect();
    (
        outcomes,
        response.map(|r| failed_ids(&r)),
        count.load(Ordering::SeqCst),
    )
}

#[tokio::test]
async fn throttling_is_retried_then_reported() {
    for kind in [
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    ] {
        let (outcomes, response, requests) =
            run_against(Fault::Error(400, kind), far_deadline()).await;
        for o in &outcomes {
            assert_eq!(
                *o,
                Outcome::Unsettled(Unsettled::Failed(StoreError::Throttled {
                    code: kind.into()
                })),
                "{kind}"
            );
        }
        assert_eq!(response, Err(BatchError::Outage(2)), "{kind}");
        // Three attempts per record: the SDK's retry policy is in force.
        assert_eq!(requests, 6, "{kind}");
    }
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let (outcomes, response, requests) =
        run_against(Fault::Error(500, "InternalServerError"), far_deadline()).await;
    assert!(
        outcomes.iter().all(|o| matches!(
            o,
            Outcome::Unsettled(Unsettled::Failed(StoreError::Server { .. }))
        )),
        "{outcomes:?}"
    );
    assert!(response.is_err());
    assert_eq!(requests, 6);
}

#[tokio::test]
async fn access_denied_is_not_retried_and_is_reported() {
    let (outcomes, response, requests) =
        run_against(Fault::Error(400, "AccessDeniedException"), far_deadline()).await;
    for o in &outcomes {
        assert_eq!(
            *o,
            Outcome::Unsettled(Unsettled::Failed(StoreError::AccessDenied {
                code: "AccessDeniedException".into()
            }))
        );
    }
    assert!(response.is_err());
    assert_eq!(requests, 2, "a permission error is not retried");
}

#[tokio::test]
async fn a_hung_dynamodb_cannot_outlive_the_deadline() {
    let started = Instant::now();
    // 1.2 s to the deadline, 200 ms margin: writes are cut off at ~1 s,
    // before the SDK's own 2 s attempt timeout.
    let (outcomes, response, _) =
        run_against(Fault::Hang, started + Duration::from_millis(1200)).await;
    let elapsed = started.elapsed();
    assert!(
        outcomes.iter().all(|o| matches!(
            o,
            Outcome::Unsettled(Unsettled::Failed(StoreError::DeadlineExceeded))
        )),
        "{outcomes:?}"
    );
    assert!(response.is_err(), "all failed: invocation error");
    // Not a timing threshold on performance: the contract is "answer before
    // the deadline", so the deadline itself is the bound being tested.
    assert!(
        elapsed < Duration::from_millis(1200),
        "returned after the deadline: {elapsed:?}"
    );
}

#[tokio::test]
async fn records_not_started_before_the_deadline_are_reported() {
    let db = TestDb::new().await;
    let c = consumer_with(db.store(), &[("DEADLINE_MARGIN_MS", "1000")]);
    let event = batch_of(&[
        body("ord-1", 1, "OrderPlaced", "e1"),
        body("ord-2", 1, "OrderPlaced", "e2"),
    ]);
    // Less time left than the margin: nothing may start. An invocation in
    // that state from its start fails as a whole (review finding: with
    // FunctionTimeout <= DEADLINE_MARGIN_MS every record was NotAttempted,
    // the queue drained into the DLQ and no alarm fired).
    let (report, response) = c
        .handle_batch(&event, Instant::now() + Duration::from_millis(500))
        .await;
    assert!(
        report
            .outcomes()
            .all(|o| *o == Outcome::Unsettled(Unsettled::NotAttempted(Skip::Deadline)))
    );
    assert!(
        matches!(
            response,
            Err(BatchError::NoTimeBudget {
                margin_ms: 1000,
                ..
            })
        ),
        "{response:?}"
    );
    assert_eq!(db.count_items().await, 0);
    // More time than the margin: the records run.
    let (_, response) = c
        .handle_batch(&event, Instant::now() + Duration::from_millis(5_000))
        .await;
    assert!(failed_ids(&response.unwrap()).is_empty());
    assert_eq!(db.count_items().await, 2);
}
