//! The consumer against a local DynamoDB (dynoxide, in-process): batches
//! through `Function::handle_batch` as Lambda would hand them over, the
//! item they leave, an outage, and the binary under a Lambda Runtime API
//! emulator.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency::engine::SqsEvent;
use lambda_idempotency::{Function, Settings, Verdict, WholeBatchFailure};
use lambda_idempotency_testing::runtime_api::{Invocation, Reply, RuntimeApi, new_request_id};
use lambda_idempotency_testing::{
    assert_labels_cover_variants, batch, client_for, create_table, failed_ids, far_deadline,
    record, start_dynoxide, unique_name,
};
use {{ cookiecutter.__crate }}::{
    EventType, KEY, NAME, {{ cookiecutter.__entity_type }}Handler, {{ cookiecutter.__entity_type }}Outcome,
};

/// A local DynamoDB with an empty table.
struct Db {
    endpoint: String,
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl Db {
    async fn new() -> Self {
        let endpoint = start_dynoxide().await;
        let client = client_for(&endpoint);
        let table = unique_name("{{ cookiecutter.entity }}");
        create_table(&client, &table, KEY).await.expect("create table");
        Db { endpoint, client, table }
    }

    fn function(&self) -> Function<{{ cookiecutter.__entity_type }}Handler> {
        function_on(self.client.clone(), &self.table, WholeBatchFailure::default())
    }

    /// The stored {{ cookiecutter.entity }}'s attribute `name`, as text.
    async fn attribute(&self, id: &str, name: &str) -> Option<String> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(id.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem")
            .item?;
        match item.get(name)? {
            AttributeValue::S(v) | AttributeValue::N(v) => Some(v.clone()),
            AttributeValue::L(l) => Some(l.len().to_string()),
            _ => None,
        }
    }
}

fn function_on(
    client: aws_sdk_dynamodb::Client,
    table: &str,
    whole: WholeBatchFailure,
) -> Function<{{ cookiecutter.__entity_type }}Handler> {
    let settings = Settings::from_lookup(&|_| None, NAME, "{{ cookiecutter.project_name }}").expect("default settings");
    Function::builder({{ cookiecutter.__entity_type }}Handler { client, table: table.to_owned() })
        .name(NAME)
        .settings(settings)
        .whole_batch_failure(whole)
        .build()
        .expect("function")
}

/// A message body: event `kind` number `seq` of {{ cookiecutter.entity }} `id`.
fn body(id: &str, seq: u64, kind: EventType) -> String {
    body_with_id(id, seq, kind, &format!("evt-{id}-{seq}"))
}

fn body_with_id(id: &str, seq: u64, kind: EventType, event_id: &str) -> String {
    serde_json::json!({
        "type": kind.name(), "eventId": event_id, "{{ cookiecutter.__id_field }}": id, "seq": seq
    })
    .to_string()
}

/// SQS records as Lambda delivers them, message ids m-0, m-1, ...
fn batch_of(bodies: &[String]) -> SqsEvent {
    batch(bodies.iter().enumerate().map(|(i, b)| record(&format!("m-{i}"), b)).collect())
}

/// The outcome label of each record, as they arrived.
async fn run(f: &Function<{{ cookiecutter.__entity_type }}Handler>, bodies: &[String]) -> Vec<&'static str> {
    let (report, _) = f.handle_batch(&batch_of(bodies), far_deadline()).await;
    report.outcomes().map(|o| o.label()).collect()
}

/// The machine's first steps: a creating event, one that may follow it, and
/// an event that may not (a creating event can never follow).
fn steps() -> (EventType, EventType, EventType) {
    let first = *EventType::ALL.iter().find(|k| k.creates()).expect("a creating event");
    let next = *EventType::ALL
        .iter()
        .find(|k| k.from().contains(&first.to()))
        .expect("an event after the first");
    let illegal = *EventType::ALL
        .iter()
        .find(|k| !k.from().contains(&next.to()))
        .expect("an event not allowed after the second");
    (first, next, illegal)
}

#[test]
fn labels_cover_every_verdict() {
    use {{ cookiecutter.__entity_type }}Outcome::*;
    let own = [Applied, Duplicate, Stale, Early, Rejected, Conflict];
    let names: Vec<String> = own.iter().map(|v| format!("{v:?}")).collect();
    for (v, name) in own.iter().zip(&names) {
        assert_eq!(v.label(), name);
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_labels_cover_variants::<{{ cookiecutter.__entity_type }}Outcome>("{{ cookiecutter.project_name }}", &names);
}

#[tokio::test]
async fn applied_then_duplicate_then_stale() {
    let db = Db::new().await;
    let f = db.function();
    let (first, next, _) = steps();
    assert_eq!(
        run(&f, &[body("x-1", 2, next), body("x-1", 1, first)]).await,
        ["Applied", "Applied"],
        "a batch applies one {{ cookiecutter.entity }}'s events by seq, whatever their arrival"
    );
    assert_eq!(run(&f, &[body("x-1", 2, next)]).await, ["Duplicate"]);
    assert_eq!(run(&f, &[body("x-1", 1, first)]).await, ["Stale"]);
    assert_eq!(db.attribute("x-1", "status").await.as_deref(), Some(next.to()));
    assert_eq!(db.attribute("x-1", "seq").await.as_deref(), Some("2"));
    assert_eq!(db.attribute("x-1", "event_ids").await.as_deref(), Some("2"));
}

#[tokio::test]
async fn early_comes_back_until_its_predecessor_applied() {
    let db = Db::new().await;
    let f = db.function();
    let (first, next, _) = steps();
    let (report, answer) = f.handle_batch(&batch_of(&[body("x-2", 2, next)]), far_deadline()).await;
    assert_eq!(report.outcomes().map(|o| o.label()).collect::<Vec<_>>(), ["Early"]);
    assert_eq!(failed_ids(&answer.expect("a partial-batch answer")), ["m-0"]);
    assert_eq!(db.attribute("x-2", "status").await, None, "nothing written");
    // A creating event with a later seq does not found the {{ cookiecutter.entity }} either.
    assert_eq!(run(&f, &[body("x-3", 3, first)]).await, ["Early"]);
    assert_eq!(run(&f, &[body("x-2", 1, first)]).await, ["Applied"]);
    assert_eq!(run(&f, &[body("x-2", 2, next)]).await, ["Applied"]);
}

#[tokio::test]
async fn rejected_in_its_turn_spends_its_seq() {
    let db = Db::new().await;
    let f = db.function();
    let (first, next, illegal) = steps();
    run(&f, &[body("x-4", 1, first), body("x-4", 2, next)]).await;
    let (report, answer) = f.handle_batch(&batch_of(&[body("x-4", 3, illegal)]), far_deadline()).await;
    assert_eq!(report.outcomes().map(|o| o.label()).collect::<Vec<_>>(), ["Rejected"]);
    assert!(failed_ids(&answer.expect("answer")).is_empty(), "acknowledged");
    assert_eq!(db.attribute("x-4", "status").await.as_deref(), Some(next.to()), "status kept");
    assert_eq!(db.attribute("x-4", "seq").await.as_deref(), Some("3"), "seq spent");
    assert_eq!(db.attribute("x-4", "rejected_count").await.as_deref(), Some("1"));
    assert_eq!(run(&f, &[body("x-4", 3, illegal)]).await, ["Duplicate"]);
}

#[tokio::test]
async fn conflict_when_a_seq_comes_again_under_another_event_id() {
    let db = Db::new().await;
    let f = db.function();
    let (first, next, _) = steps();
    run(&f, &[body("x-5", 1, first), body("x-5", 2, next)]).await;
    let (report, answer) = f
        .handle_batch(&batch_of(&[body_with_id("x-5", 2, next, "evt-other")]), far_deadline())
        .await;
    assert_eq!(report.outcomes().map(|o| o.label()).collect::<Vec<_>>(), ["Conflict"]);
    assert_eq!(failed_ids(&answer.expect("answer")), ["m-0"], "returned, then to the DLQ");
    assert_eq!(db.attribute("x-5", "seq").await.as_deref(), Some("2"));
}

#[tokio::test]
async fn invalid_bodies_are_returned() {
    let db = Db::new().await;
    let f = db.function();
    let (first, _, _) = steps();
    let unknown = body("x-6", 1, first).replace(first.name(), "Teleported");
    let zero = body("x-6", 0, first);
    let (report, answer) = f
        .handle_batch(&batch_of(&["{not json".into(), unknown, zero]), far_deadline())
        .await;
    assert_eq!(report.outcomes().map(|o| o.label()).collect::<Vec<_>>(), ["Invalid"; 3]);
    assert_eq!(failed_ids(&answer.expect("answer")), ["m-0", "m-1", "m-2"]);
}

/// DynamoDB unreachable: every record Failed and returned. By default the
/// invocation fails (Lambda's Errors alarm shows the outage); with
/// `ReportEach`, the partial-batch answer lists every record.
#[tokio::test]
async fn an_outage_returns_every_record() {
    let (first, next, _) = steps();
    let bodies = [body("x-7", 1, first), body("x-8", 2, next)];
    // A port nothing listens on.
    let dead = client_for("http://127.0.0.1:9");
    let f = function_on(dead.clone(), "{{ cookiecutter.entity }}", WholeBatchFailure::default());
    let (report, answer) = f.handle_batch(&batch_of(&bodies), far_deadline()).await;
    assert_eq!(report.outcomes().map(|o| o.label()).collect::<Vec<_>>(), ["Failed", "Failed"]);
    assert!(answer.is_err(), "the invocation fails: {answer:?}");

    let f = function_on(dead, "{{ cookiecutter.entity }}", WholeBatchFailure::ReportEach);
    let (_, answer) = f.handle_batch(&batch_of(&bodies), far_deadline()).await;
    assert_eq!(failed_ids(&answer.expect("a partial-batch answer")), ["m-0", "m-1"]);
}

/// The shipped binary, as Lambda runs it: configuration from the
/// environment, a batch in through the Runtime API, the partial-batch
/// answer out.
#[tokio::test]
async fn the_binary_answers_a_batch_under_the_runtime_api() {
    let db = Db::new().await;
    let api = RuntimeApi::start().await;
    let mut child = api
        .command(env!("CARGO_BIN_EXE_{{ cookiecutter.project_name }}"), "{{ cookiecutter.project_name }}")
        .env("AWS_ENDPOINT_URL_DYNAMODB", &db.endpoint)
        .env("TABLE_NAME", &db.table)
        .env("RETRY_BACKOFF", "off")
        .spawn()
        .expect("spawn the binary");
    let (first, next, _) = steps();
    let event = batch_of(&[body("x-9", 1, first), body("x-10", 2, next)]);
    let (reply, answer) = tokio::sync::oneshot::channel();
    api.submit(Invocation {
        request_id: new_request_id(),
        payload: serde_json::to_vec(&event).expect("event JSON").into(),
        deadline_ms: epoch_ms() + 30_000,
        reply,
    })
    .await;
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
    assert_eq!(body, serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m-1"}]}));
    assert_eq!(db.attribute("x-9", "status").await.as_deref(), Some(first.to()));
    let _ = child.kill().await;
}
