//! The HTTP API against a local DynamoDB (dynoxide, in-process): requests
//! as API Gateway (HTTP API, IAM authorisation) hands them over, through
//! the Idempotency-Key layer, and the items they leave.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::http::Scope;
use lambda_idempotency::idempotency::IdempotencyStore;
use lambda_idempotency::{Function, Settings};
use lambda_idempotency_testing::lambda_http::http::Method;
use lambda_idempotency_testing::lambda_http::tower::ServiceExt;
use lambda_idempotency_testing::lambda_http::{Body, Response};
use lambda_idempotency_testing::{
    HttpApiCaller, HttpApiRequest, batch, client_for, create_table, far_deadline, hold_key,
    record, start_dynoxide, unique_name,
};
use {{ cookiecutter.__crate }}::api::{Api, ApiService, PATH, TTL_ATTRIBUTE, idempotency_store};
use {{ cookiecutter.__crate }}::{EventType, KEY, NAME, {{ cookiecutter.__entity_type }}Handler};

/// A local DynamoDB with the {{ cookiecutter.entity }} table and the idempotency table, and
/// the API on them.
struct Db {
    client: aws_sdk_dynamodb::Client,
    table: String,
    api: ApiService,
    /// The API's idempotency records, for a test that holds a key.
    store: IdempotencyStore,
}

impl Db {
    async fn new() -> Self {
        let client = client_for(&start_dynoxide().await);
        let table = unique_name("{{ cookiecutter.entity }}");
        create_table(&client, &table, KEY).await.expect("create table");
        let keys = unique_name("keys");
        // The layout template.yaml gives the idempotency table.
        create_table(&client, &keys, "id").await.expect("create idempotency table");
        let store = idempotency_store(client.clone(), &keys).expect("store");
        let api = Api::new(client.clone(), table.clone()).with_idempotency(store.clone());
        Db { client, table, api, store }
    }

    async fn send(&self, request: HttpApiRequest) -> Response<Body> {
        let request = request.build().expect("request");
        self.api.clone().oneshot(request).await.expect("infallible")
    }

    /// How many {{ cookiecutter.entity }}s the table holds.
    async fn count(&self) -> i32 {
        let out = self.client.scan().table_name(&self.table).send().await.expect("Scan");
        out.count
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

const CALLER: &str = "arn:aws:iam::111122223333:user/tester";

/// `POST /{{ cookiecutter.__plural }}` with `key` (none: no header) and `body`, by an
/// IAM-authorised caller.
fn post(key: Option<&str>, body: &str) -> HttpApiRequest {
    let mut request = HttpApiRequest::new(Method::POST, PATH)
        .route_key(format!("POST {PATH}"))
        .header("content-type", "application/json")
        .body(body)
        .caller(HttpApiCaller::iam(CALLER));
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request
}

fn get(id: &str) -> HttpApiRequest {
    HttpApiRequest::new(Method::GET, format!("{PATH}/{id}"))
        .route_key(format!("GET {PATH}/{}", "{{ '{' }}{{ cookiecutter.__id_field }}{{ '}' }}"))
        .path_parameter("{{ cookiecutter.__id_field }}", id)
        .caller(HttpApiCaller::iam(CALLER))
}

fn json(response: &Response<Body>) -> serde_json::Value {
    serde_json::from_slice(response.body().as_ref()).expect("a JSON body")
}

fn first_creating() -> EventType {
    *EventType::ALL.iter().find(|k| k.creates()).expect("a creating event")
}

#[tokio::test]
async fn created_once_then_replayed() {
    let db = Db::new().await;
    let first = db.send(post(Some("k-1"), "{}")).await;
    assert_eq!(first.status(), 201);
    let created = json(&first);
    let id = created["{{ cookiecutter.__id_field }}"].as_str().expect("the new id").to_owned();
    assert_eq!(created["status"], first_creating().to());
    assert_eq!(first.headers()["location"], format!("{PATH}/{id}").as_str());
    // Written as the consumer writes the creating event: seq 1, its eventId.
    assert_eq!(db.attribute(&id, "status").await.as_deref(), Some(first_creating().to()));
    assert_eq!(db.attribute(&id, "seq").await.as_deref(), Some("1"));
    assert_eq!(db.attribute(&id, "event_ids").await.as_deref(), Some("1"));

    // The client lost the answer and retries with the same key: the same
    // answer, byte for byte, and no second {{ cookiecutter.entity }}.
    let again = db.send(post(Some("k-1"), "{}")).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.body(), first.body());
    assert_eq!(db.count().await, 1);

    // Another key is another {{ cookiecutter.entity }}.
    let other = db.send(post(Some("k-2"), "{}")).await;
    assert_eq!(other.status(), 201);
    assert_ne!(json(&other)["{{ cookiecutter.__id_field }}"], created["{{ cookiecutter.__id_field }}"]);
    assert_eq!(db.count().await, 2);
}

#[tokio::test]
async fn a_key_reused_with_another_body_is_422() {
    let db = Db::new().await;
    assert_eq!(db.send(post(Some("k-1"), "{}")).await.status(), 201);
    let reused = db.send(post(Some("k-1"), r#"{"reference": "r-1"}"#)).await;
    assert_eq!(reused.status(), 422);
    assert!(reused.headers().get("idempotent-replayed").is_none());
    assert_eq!(db.count().await, 1, "the service did not run for the other body");
}

#[tokio::test]
async fn a_request_while_its_key_is_in_flight_is_409_and_nothing_is_written() {
    let db = Db::new().await;
    // The same request's first attempt holds the key: its invocation is
    // still running (or crashed, until its lease ends).
    let first = post(Some("k-busy"), "{}").build().expect("request");
    let scope = Scope::Iam(CALLER.to_owned());
    hold_key(&db.store, &scope, "k-busy", &first, Duration::from_secs(5)).await;

    let busy = db.send(post(Some("k-busy"), "{}")).await;
    assert_eq!(busy.status(), 409);
    assert!(busy.headers().get("retry-after").is_some(), "when to retry");
    assert_eq!(db.count().await, 0, "the service did not run");
}

#[tokio::test]
async fn no_key_or_a_malformed_one_is_400_and_nothing_is_written() {
    let db = Db::new().await;
    assert_eq!(db.send(post(None, "{}")).await.status(), 400);
    // A header sent twice, as API Gateway joins it: not one key.
    assert_eq!(db.send(post(Some("k-1, k-2"), "{}")).await.status(), 400);
    assert_eq!(db.count().await, 0);
}

#[tokio::test]
async fn a_bad_body_is_400_naming_the_field_never_its_value() {
    let db = Db::new().await;
    let later = EventType::ALL.iter().find(|k| !k.creates()).expect("a transition");
    let body = serde_json::json!({"type": later.name()}).to_string();
    let refused = db.send(post(Some("k-1"), &body)).await;
    assert_eq!(refused.status(), 400);
    let detail = json(&refused)["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("type") && !detail.contains(later.name()), "{detail}");
    let unknown = db.send(post(Some("k-2"), r#"{"colour": "SecretValue"}"#)).await;
    assert_eq!(unknown.status(), 400);
    assert!(!format!("{:?}", unknown.body()).contains("SecretValue"));
    assert_eq!(db.count().await, 0);
}

#[tokio::test]
async fn get_shows_the_stored_{{ cookiecutter.entity }}() {
    let db = Db::new().await;
    let created = db.send(post(Some("k-1"), r#"{"reference": "r-1"}"#)).await;
    let id = json(&created)["{{ cookiecutter.__id_field }}"].as_str().expect("id").to_owned();
    let shown = db.send(get(&id)).await;
    assert_eq!(shown.status(), 200);
    let shown = json(&shown);
    assert_eq!(shown["{{ cookiecutter.__id_field }}"], id.as_str());
    assert_eq!(shown["status"], first_creating().to());
    assert_eq!(shown["seq"], 1);
    assert_eq!(shown["reference"], "r-1");
    assert_eq!(shown["lastEventType"], first_creating().name());
    assert_eq!(db.send(get("no-such-id")).await.status(), 404);
}

#[tokio::test]
async fn the_next_event_arrives_through_the_queue_as_seq_2() {
    let db = Db::new().await;
    let created = db.send(post(Some("k-1"), "{}")).await;
    let id = json(&created)["{{ cookiecutter.__id_field }}"].as_str().expect("id").to_owned();
    let next = *EventType::ALL
        .iter()
        .find(|k| k.from().contains(&first_creating().to()))
        .expect("an event after the first");
    let settings = Settings::from_lookup(&|_| None, NAME, "{{ cookiecutter.project_name }}").expect("settings");
    let consumer = Function::builder({{ cookiecutter.__entity_type }}Handler { client: db.client.clone(), table: db.table.clone() })
        .name(NAME)
        .settings(settings)
        .build()
        .expect("function");
    let body = serde_json::json!({
        "type": next.name(), "eventId": "e-2", "{{ cookiecutter.__id_field }}": id, "seq": 2
    });
    let (report, _) = consumer.handle_batch(&batch(vec![record("m-0", &body.to_string())]), far_deadline()).await;
    let labels: Vec<&str> = report.outcomes().map(|o| o.label()).collect();
    assert_eq!(labels, ["Applied"]);
    assert_eq!(db.attribute(&id, "status").await.as_deref(), Some(next.to()));
    assert_eq!(db.attribute(&id, "seq").await.as_deref(), Some("2"));
}

#[test]
fn the_idempotency_table_expires_keys_on_the_attribute_the_stack_names() {
    let stack = include_str!("../template.yaml");
    assert!(stack.contains(&format!("AttributeName: {TTL_ATTRIBUTE}")), "template.yaml's TTL");
}
