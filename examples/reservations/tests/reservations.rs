//! The reservations consumer against a local DynamoDB (in-process
//! dynoxide): its batches through `Function::handle_batch`, its pure
//! classification, its labels, and the real binary under the Lambda
//! Runtime API emulator.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::engine::SqsEvent;
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency::{Function, Settings, StoreError, Verdict};
use lambda_idempotency_testing::runtime_api::{Invocation, Reply, RuntimeApi, new_request_id};
use lambda_idempotency_testing::{
    TestDb, assert_labels_cover_variants, batch, far_deadline, record,
};
use reservations::{Kind, NAME, ReservationHandler, ReservationOutcome, classify};

/// The one test fixture of lambda-idempotency-testing, [`TestDb`]: a local
/// DynamoDB (or `AWS_ENDPOINT_URL_DYNAMODB`) with an empty reservations
/// table (hash key `reservation_id`); [`Reservations`] is what these tests
/// do with it.
async fn reservations_db() -> TestDb {
    TestDb::with_table("reservations", "reservation_id").await
}

/// The reservations consumer over the fixture's table, and its readers.
trait Reservations {
    fn function(&self) -> Function<ReservationHandler>;
    async fn attribute(&self, id: &str, key: &str) -> Option<String>;
}

impl Reservations for TestDb {
    fn function(&self) -> Function<ReservationHandler> {
        let settings =
            Settings::from_lookup(&|_| None, NAME, "reservations").expect("default settings");
        let (client, table) = (self.client.clone(), self.table.clone());
        Function::builder(ReservationHandler { client, table })
            .name(NAME)
            .settings(settings)
            .build()
            .expect("function")
    }

    /// The stored reservation's attribute `key`, as text.
    async fn attribute(&self, id: &str, key: &str) -> Option<String> {
        let item = self.get("reservation_id", id).await?;
        match item.get(key)? {
            AttributeValue::S(v) | AttributeValue::N(v) => Some(v.clone()),
            _ => None,
        }
    }
}

fn requested(id: &str) -> String {
    format!(
        r#"{{"type":"ReservationRequested","reservationId":"{id}","sku":"sku-1","quantity":2}}"#
    )
}

fn other(id: &str, kind: &str) -> String {
    format!(r#"{{"type":"{kind}","reservationId":"{id}"}}"#)
}

/// SQS records as Lambda delivers them, message ids m-0, m-1, ...
fn batch_of(bodies: &[String]) -> SqsEvent {
    batch(
        bodies
            .iter()
            .enumerate()
            .map(|(i, b)| record(&format!("m-{i}"), b))
            .collect(),
    )
}

async fn run(f: &Function<ReservationHandler>, bodies: &[String]) -> Vec<&'static str> {
    let (report, _) = f.handle_batch(&batch_of(bodies), far_deadline()).await;
    report.outcomes().map(|o| o.label()).collect()
}

/// Every label a verdict can return is listed for the metrics: `LABELS`
/// is exactly the own verdicts' names (their `Debug`), each verdict's
/// `label` is its name, and the shared outcomes are added once.
#[test]
fn labels_cover_every_verdict() {
    use ReservationOutcome::*;
    // A new verdict goes here and in `LABELS`, in the enum's order: `label`
    // reads its name from `LABELS` by position.
    let own = [Applied, Duplicate, Early, Rejected];
    let names: Vec<String> = own.iter().map(|v| format!("{v:?}")).collect();
    for (v, name) in own.iter().zip(&names) {
        assert_eq!(v.label(), name, "label of {name}");
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_labels_cover_variants::<ReservationOutcome>("reservations", &names);
}

#[tokio::test]
async fn each_event_applies_once_in_its_turn() {
    let db = reservations_db().await;
    let f = db.function();
    let confirm = other("r-1", "ReservationConfirmed");
    assert_eq!(
        run(&f, std::slice::from_ref(&confirm)).await,
        ["Early"],
        "confirmed before requested"
    );
    assert_eq!(
        run(&f, &[requested("r-1"), requested("r-1")]).await,
        ["Applied", "Duplicate"]
    );
    assert_eq!(
        run(&f, &[confirm.clone(), confirm.clone()]).await,
        ["Applied", "Duplicate"]
    );
    let release = other("r-1", "ReservationReleased");
    assert_eq!(run(&f, std::slice::from_ref(&release)).await, ["Applied"]);
    assert_eq!(
        run(&f, &[confirm]).await,
        ["Rejected"],
        "confirmed after release"
    );
    assert_eq!(
        run(&f, &["{not json".to_owned(), other("r-1", "Teleported")]).await,
        ["Invalid", "Invalid"]
    );
    assert_eq!(
        db.attribute("r-1", "status").await.as_deref(),
        Some("RELEASED")
    );
    assert_eq!(db.attribute("r-1", "quantity").await.as_deref(), Some("2"));
}

#[test]
fn a_refusal_is_read_from_the_stored_status() {
    use ReservationOutcome::*;
    assert_eq!(classify(Kind::Confirmed, Some("CONFIRMED")), Ok(Duplicate));
    assert_eq!(classify(Kind::Confirmed, None), Ok(Early));
    assert_eq!(classify(Kind::Confirmed, Some("RELEASED")), Ok(Rejected));
    assert_eq!(classify(Kind::Requested, Some("CONFIRMED")), Ok(Rejected));
    assert_eq!(
        classify(Kind::Requested, None),
        Err(StoreError::RefusedWithoutItem)
    );
}

/// The shipped binary, as Lambda runs it: configuration from the
/// environment, the Runtime API, a batch in and the partial-batch answer
/// out. The early confirmation goes back; the request is written.
#[tokio::test]
async fn the_binary_answers_a_batch_under_the_runtime_api() {
    let db = reservations_db().await;
    let api = RuntimeApi::start().await;
    let mut child = api
        .command(env!("CARGO_BIN_EXE_reservations"), "reservations")
        .env("AWS_ENDPOINT_URL_DYNAMODB", db.endpoint())
        .env("TABLE_NAME", &db.table)
        // No SQS here: returned messages keep the queue's timeout.
        .env("RETRY_BACKOFF", "off")
        .spawn()
        .expect("spawn the reservations binary");

    let event = batch_of(&[requested("r-1"), other("r-2", "ReservationConfirmed")]);
    let (reply, answer) = tokio::sync::oneshot::channel();
    api.submit(Invocation {
        request_id: new_request_id(),
        payload: serde_json::to_vec(&event).expect("event JSON").into(),
        deadline_ms: epoch_ms() + 30_000,
        reply,
    })
    .await;
    // A process that exits (a failed cold start) fails the test at once,
    // with what it told the Runtime API.
    let answer = tokio::select! {
        answer = tokio::time::timeout(Duration::from_secs(30), answer) => answer
            .expect("an answer within 30 s")
            .expect("the runtime answered"),
        exit = child.wait() => panic!("the binary exited ({exit:?}): {:?}", api.init_error()),
    };
    let Reply::Response { body, .. } = answer else {
        panic!("an invocation error: {answer:?}");
    };
    let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON answer");
    assert_eq!(
        body,
        serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m-1"}]})
    );
    assert_eq!(
        db.attribute("r-1", "status").await.as_deref(),
        Some("REQUESTED")
    );
    let _ = child.kill().await;
}
