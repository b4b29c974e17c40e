//! DynamoDB failures the function must report as failures, never acknowledge.
//!
//! The fault proxy with nothing behind it ([`FaultProxy::answering`]) stands
//! in for DynamoDB and answers every request with the same error, as
//! DynamoDB would put it on the wire. The SDK parses those responses itself,
//! so this exercises the real error mapping, retries and timeouts (it is a
//! faulty server, not a mock of the SDK).

use std::time::Duration;

use lambda_idempotency::BatchError;
use lambda_idempotency::StoreError;
use lambda_idempotency::{RecordOutcome, Skip};
use order_consumer::orders::domain::Outcome;
use order_consumer::orders::store::OrderStore;
use order_consumer::testing::proxy::{Fault, FaultProxy};
use tokio::time::Instant;

use order_consumer::testing::*;

async fn run_against(
    fault: Fault,
    deadline: Instant,
) -> (
    Vec<RecordOutcome<Outcome>>,
    Result<Vec<String>, BatchError>,
    u64,
) {
    let server = FaultProxy::answering(fault).await;
    let c = consumer_with(
        OrderStore::new(client_for(&server.url()), "orders"),
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
        server.requests(),
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
            run_against(Fault::Throttle(kind), far_deadline()).await;
        for o in &outcomes {
            assert_eq!(
                *o,
                RecordOutcome::Failed(StoreError::Throttled { code: kind.into() }),
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
    let (outcomes, response, requests) = run_against(
        Fault::Http500 {
            after_forward: false,
        },
        far_deadline(),
    )
    .await;
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, RecordOutcome::Failed(StoreError::Server { .. }))),
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
            RecordOutcome::Failed(StoreError::AccessDenied {
                code: "AccessDeniedException".into()
            })
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
        outcomes
            .iter()
            .all(|o| matches!(o, RecordOutcome::Failed(StoreError::DeadlineExceeded))),
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
            .all(|o| *o == RecordOutcome::NotAttempted(Skip::Deadline))
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

/// The tests' own table setup under load: CreateTable commits and its
/// answer is lost (on a loaded machine, the SDK's 2 s attempt timeout); the
/// SDK sends it again and the server refuses it as ResourceInUse. The table
/// exists as asked, so the setup goes on; a table of that name with another
/// key is still an error.
#[tokio::test]
async fn a_table_created_unseen_is_created() {
    let endpoint = start_dynoxide().await;
    let proxy = FaultProxy::start(&endpoint, 31).await;
    proxy.set_first(Fault::ByOperation(&[("CreateTable", Fault::DropAnswer)]), 1);
    let client = client_for(&proxy.url());
    create_table(&client, "t-unseen", "pk")
        .await
        .expect("the re-sent CreateTable finds the table as asked");
    assert_eq!(proxy.injected().get("drop-answer"), Some(&1));
    let other_key = create_table(&client, "t-unseen", "other").await;
    assert_eq!(
        other_key,
        Err(StoreError::Client {
            code: "ResourceInUseException".into()
        })
    );
    let streamed = create_streamed_table(&client, "t-unseen", "pk").await;
    assert!(streamed.is_err(), "{streamed:?}");
}
