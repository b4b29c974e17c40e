//! The audit trail's one handler on every source, against a local DynamoDB
//! (in-process dynoxide): in process through `Function::handle_batch`, and
//! the real binary under the Lambda Runtime API emulator with a Kinesis
//! event, a Kafka event and an SQS event as Lambda sends them.

use std::time::Duration;

use audit_trail::{AuditHandler, AuditOutcome, NAME};
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency::{Function, Settings, Verdict};
use lambda_idempotency_testing::kafka;
use lambda_idempotency_testing::kinesis::{self, sequence_number as seq};
use lambda_idempotency_testing::runtime_api::{Invocation, Reply, RuntimeApi, new_request_id};
use lambda_idempotency_testing::{
    TestDb, assert_labels_cover_variants, batch, far_deadline, record,
};
use serde_json::{Value, json};

/// The one test fixture of lambda-idempotency-testing, [`TestDb`]: a local
/// DynamoDB (or `AWS_ENDPOINT_URL_DYNAMODB`) with an empty audit table
/// (hash key `event_id`); [`Audit`] is what these tests do with it.
async fn audit_db() -> TestDb {
    TestDb::with_table("audit", "event_id").await
}

/// The audit trail's function over the fixture's table, and its readers.
trait Audit {
    fn function(&self) -> Function<AuditHandler>;
    async fn recorded(&self, event_id: &str) -> bool;
    async fn invoke_binary(&self, source: &str, event: &Value) -> Value;
}

impl Audit for TestDb {
    /// The same function for records of any source.
    fn function(&self) -> Function<AuditHandler> {
        let settings =
            Settings::from_lookup(&|_| None, NAME, "audit-trail").expect("default settings");
        Function::builder(AuditHandler {
            client: self.client.clone(),
            table: self.table.clone(),
        })
        .name(NAME)
        .settings(settings)
        .build()
        .expect("function")
    }

    /// Is the event recorded?
    async fn recorded(&self, event_id: &str) -> bool {
        self.get("event_id", event_id).await.is_some()
    }

    /// Run the real binary on `source`, hand it `event`, return its answer.
    async fn invoke_binary(&self, source: &str, event: &Value) -> Value {
        let api = RuntimeApi::start().await;
        let mut child = binary(&api, source)
            .env("AWS_ENDPOINT_URL_DYNAMODB", self.endpoint())
            .env("TABLE_NAME", &self.table)
            .spawn()
            .expect("spawn the audit-trail binary");
        let (reply, answer) = tokio::sync::oneshot::channel();
        api.submit(Invocation {
            request_id: new_request_id(),
            payload: serde_json::to_vec(event).expect("event JSON").into(),
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
        let _ = child.kill().await;
        let Reply::Response { body, .. } = answer else {
            panic!("an invocation error: {answer:?}");
        };
        serde_json::from_slice(&body).expect("JSON answer")
    }
}

/// The binary's command as Lambda would start it, on `source`.
fn binary(api: &RuntimeApi, source: &str) -> tokio::process::Command {
    let mut cmd = api.command(env!("CARGO_BIN_EXE_audit-trail"), "audit-trail");
    cmd.env("EVENT_SOURCE", source)
        // No SQS here: returned messages keep the queue's timeout.
        .env("RETRY_BACKOFF", "off");
    cmd
}

fn audit(event_id: &str, account: &str) -> String {
    json!({"eventId": event_id, "account": account, "action": "login"}).to_string()
}

#[test]
fn labels_cover_every_verdict() {
    use AuditOutcome::*;
    let own = [Recorded, Duplicate];
    let names: Vec<String> = own.iter().map(|v| format!("{v:?}")).collect();
    for (v, name) in own.iter().zip(&names) {
        assert_eq!(v.label(), name, "label of {name}");
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_labels_cover_variants::<AuditOutcome>("audit-trail", &names);
}

/// One handler type, two sources, one table: an event delivered on Kinesis
/// and again on SQS is recorded once.
#[tokio::test]
async fn the_same_handler_records_each_event_once_on_either_source() {
    let db = audit_db().await;
    let on_kinesis = db.function();
    let stream = kinesis::batch(vec![
        kinesis::record(&seq(1), "acc-1", audit("e-1", "acc-1").as_bytes()),
        kinesis::record(&seq(2), "acc-1", audit("e-1", "acc-1").as_bytes()),
    ]);
    let (report, answer) = on_kinesis.handle_batch(&stream, far_deadline()).await;
    let labels: Vec<_> = report.outcomes().map(|o| o.label()).collect();
    assert_eq!(labels, ["Recorded", "Duplicate"]);
    assert_eq!(answer.map(|a| kinesis::failed_ids(&a)), Ok(vec![]));

    let on_sqs = db.function();
    let queue = batch(vec![
        record("m-0", &audit("e-1", "acc-1")),
        record("m-1", &audit("e-2", "acc-2")),
    ]);
    let (report, answer) = on_sqs.handle_batch(&queue, far_deadline()).await;
    let labels: Vec<_> = report.outcomes().map(|o| o.label()).collect();
    assert_eq!(labels, ["Duplicate", "Recorded"]);
    assert!(answer.is_ok_and(|a| a.batch_item_failures.is_empty()));
    assert!(db.recorded("e-1").await && db.recorded("e-2").await);
}

/// The binary on Kinesis, a real event's shape: a record that is not an
/// event and one whose data is not base64 fail alone; the key of the first
/// holds its later record back; the answer lists every unacknowledged
/// sequence number, so the lowest, where Lambda resumes the shard.
#[tokio::test]
async fn the_binary_on_kinesis_answers_by_sequence_number() {
    let db = audit_db().await;
    let event = kinesis::event(vec![
        kinesis::record(&seq(1), "acc-1", audit("e-1", "acc-1").as_bytes()),
        kinesis::record(&seq(2), "acc-2", audit("e-2", "acc-2").as_bytes()),
        kinesis::record(&seq(3), "acc-1", b"{not json"),
        kinesis::record(&seq(4), "acc-1", audit("e-4", "acc-1").as_bytes()),
        kinesis::record_with_data(&seq(5), "acc-3", json!("%% not base64 %%")),
        kinesis::record(&seq(6), "acc-2", audit("e-6", "acc-2").as_bytes()),
    ]);
    let answer = db.invoke_binary("kinesis", &event).await;
    assert_eq!(
        answer,
        json!({"batchItemFailures": [
            {"itemIdentifier": seq(3)},
            {"itemIdentifier": seq(4)},
            {"itemIdentifier": seq(5)},
        ]})
    );
    for (id, written) in [("e-1", true), ("e-2", true), ("e-4", false), ("e-6", true)] {
        assert_eq!(db.recorded(id).await, written, "{id}");
    }
}

/// The binary on Kafka, events shaped like AWS's sample MSK event: two
/// partitions; a record that is not an event stops its partition (the
/// later record of that partition is answered, not run), a record whose
/// value is not base64 fails alone at the end of its partition, the other
/// partition goes on; the answer names topic-partition and offset.
#[tokio::test]
async fn the_binary_on_kafka_answers_by_topic_partition_and_offset() {
    let db = audit_db().await;
    let event = kafka::event(vec![
        kafka::record(0, 15, Some(b"acc-1"), audit("e-1", "acc-1").as_bytes()),
        kafka::record(0, 16, Some(b"acc-1"), b"{not json"),
        kafka::record(0, 17, None, audit("e-3", "acc-2").as_bytes()),
        kafka::record(1, 40, Some(b"acc-3"), audit("e-4", "acc-3").as_bytes()),
        kafka::record_with_value(1, 41, None, json!("%% not base64 %%")),
    ]);
    let answer = db.invoke_binary("kafka", &event).await;
    let p0 = kafka::topic_partition(kafka::TOPIC, 0);
    let p1 = kafka::topic_partition(kafka::TOPIC, 1);
    assert_eq!(
        answer,
        json!({"batchItemFailures": [
            {"itemIdentifier": {"partition": p0, "offset": 16}},
            {"itemIdentifier": {"partition": p0, "offset": 17}},
            {"itemIdentifier": {"partition": p1, "offset": 41}},
        ]})
    );
    for (id, written) in [("e-1", true), ("e-3", false), ("e-4", true)] {
        assert_eq!(db.recorded(id).await, written, "{id}");
    }
}

/// In process, the same handler on Kafka records: a redelivered event is a
/// Duplicate, as on the other sources.
#[tokio::test]
async fn the_same_handler_records_once_on_kafka_too() {
    let db = audit_db().await;
    let on_kafka = db.function();
    let topic = kafka::batch(vec![
        kafka::record(0, 1, None, audit("e-1", "acc-1").as_bytes()),
        kafka::record(0, 2, None, audit("e-1", "acc-1").as_bytes()),
    ]);
    let (report, answer) = on_kafka.handle_batch(&topic, far_deadline()).await;
    let labels: Vec<_> = report.outcomes().map(|o| o.label()).collect();
    assert_eq!(labels, ["Recorded", "Duplicate"]);
    assert_eq!(answer.map(|a| kafka::failed(&a)), Ok(vec![]));
}

/// The same binary on SQS: answered by messageId, a standard queue's
/// records not held back behind a bad one.
#[tokio::test]
async fn the_binary_on_sqs_answers_by_message_id() {
    let db = audit_db().await;
    let event = batch(vec![
        record("m-0", &audit("e-1", "acc-1")),
        record("m-1", "{not json"),
        record("m-2", &audit("e-3", "acc-1")),
    ]);
    let event = serde_json::to_value(&event).expect("SQS event JSON");
    let answer = db.invoke_binary("sqs", &event).await;
    assert_eq!(
        answer,
        json!({"batchItemFailures": [{"itemIdentifier": "m-1"}]})
    );
    assert!(db.recorded("e-1").await && db.recorded("e-3").await);
}

/// A source the binary cannot read fails its cold start, saying which
/// variable, before it takes any event.
#[tokio::test]
async fn an_unknown_event_source_fails_the_cold_start() {
    let api = RuntimeApi::start().await;
    let mut child = binary(&api, "sns")
        .env("TABLE_NAME", "audit")
        .spawn()
        .expect("spawn the audit-trail binary");
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits within 30 s")
        .expect("exit status");
    assert!(!exit.success());
    let error = api.init_error().expect("an init error");
    assert!(error.contains("EVENT_SOURCE"), "{error}");
}
