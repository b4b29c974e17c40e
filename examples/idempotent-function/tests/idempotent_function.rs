//! The real binary under the Lambda Runtime API emulator, against a local
//! DynamoDB (in-process dynoxide) and a local payment provider that counts
//! the charges it receives per payment id.

use std::time::Duration;

use lambda_idempotency::time::epoch_ms;
use lambda_idempotency_testing::provider::{Mode, Provider};
use lambda_idempotency_testing::runtime_api::{Invocation, Reply, RuntimeApi, new_request_id};
use lambda_idempotency_testing::{TestDb, scan_all};
use serde_json::{Value, json};

/// One execution environment: the binary, its emulator, a table (the one
/// test fixture, [`TestDb`]), a provider.
struct Env {
    api: RuntimeApi,
    child: tokio::process::Child,
    db: TestDb,
    provider: Provider,
}

impl Env {
    async fn start() -> Env {
        let db = TestDb::with_table("charges", "id").await;
        let provider = Provider::start().await;
        let api = RuntimeApi::start().await;
        let child = api
            .command(env!("CARGO_BIN_EXE_idempotent-function"), "charge")
            .env("AWS_ENDPOINT_URL_DYNAMODB", db.endpoint())
            .env("TABLE_NAME", &db.table)
            .env("PROVIDER_URL", &provider.url)
            .spawn()
            .expect("spawn the idempotent-function binary");
        Env {
            api,
            child,
            db,
            provider,
        }
    }

    /// Hand the binary `event` with `deadline_ms`; its answer.
    async fn invoke(&mut self, event: Value, deadline_ms: u64) -> Reply {
        let answer = self.submit(event, deadline_ms).await;
        tokio::select! {
            answer = tokio::time::timeout(Duration::from_secs(30), answer) => answer
                .expect("an answer within 30 s")
                .expect("the runtime answered"),
            exit = self.child.wait() => panic!("the binary exited ({exit:?}): {:?}", self.api.init_error()),
        }
    }

    async fn submit(
        &self,
        event: Value,
        deadline_ms: u64,
    ) -> tokio::sync::oneshot::Receiver<Reply> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let payload = serde_json::to_vec(&event).expect("event JSON").into();
        let request_id = new_request_id();
        self.api
            .submit(Invocation {
                request_id,
                payload,
                deadline_ms,
                reply,
            })
            .await;
        answer
    }
}

fn charge(id: &str, amount: u64) -> Value {
    json!({"payment_id": id, "amount": amount})
}

fn output(reply: Reply) -> Value {
    let Reply::Response { body, .. } = reply else {
        panic!("an invocation error: {reply:?}");
    };
    serde_json::from_slice(&body).expect("JSON answer")
}

fn error_type(reply: Reply) -> String {
    let Reply::Error { error_type, .. } = reply else {
        panic!("a response, not an error: {reply:?}");
    };
    error_type
}

fn later() -> u64 {
    epoch_ms() + 30_000
}

#[tokio::test]
async fn the_same_charge_twice_runs_once_and_another_amount_is_refused() {
    let mut env = Env::start().await;
    let first = output(env.invoke(charge("p-1", 500), later()).await);
    assert_eq!(
        (&first["payment_id"], &first["amount"]),
        (&json!("p-1"), &json!(500))
    );
    let again = output(env.invoke(charge("p-1", 500), later()).await);
    assert_eq!(again, first, "the stored receipt, charged_at_ms and all");
    assert_eq!(env.provider.requests("p-1"), 1, "charged once");
    let other = env.invoke(charge("p-1", 900), later()).await;
    assert_eq!(error_type(other), "IdempotencyError.OtherPayload");
    assert_eq!(env.provider.requests("p-1"), 1);
}

#[tokio::test]
async fn a_failed_charge_gives_the_key_back_and_the_retry_runs() {
    let mut env = Env::start().await;
    env.provider.set_mode(Mode::Fail(503));
    let failed = env.invoke(charge("p-2", 700), later()).await;
    assert_eq!(error_type(failed), "IdempotencyError.Function");
    env.provider.set_mode(Mode::Accept);
    let retried = output(env.invoke(charge("p-2", 700), later()).await);
    assert_eq!(retried["amount"], json!(700));
    assert_eq!(env.provider.requests("p-2"), 2, "the retry ran the charge");
}

/// The lease of a claim is the invocation's deadline, as the emulator sent
/// it in Lambda-Runtime-Deadline-Ms: a charge that hangs holds its key
/// until then, and no longer.
#[tokio::test]
async fn the_lease_is_the_invocations_deadline() {
    let env = Env::start().await;
    env.provider.set_mode(Mode::Hang);
    let deadline_ms = epoch_ms() + 3_000;
    let _unanswered = env.submit(charge("p-3", 100), deadline_ms).await;
    let waited = tokio::time::Instant::now();
    while env.provider.requests("p-3") == 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "the charge never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let records = scan_all(&env.db.client, &env.db.table).await;
    assert_eq!(records.len(), 1);
    let lease = records[0]["lease_until"].as_n().expect("a number");
    assert_eq!(lease, &deadline_ms.to_string());
}
