//! The order API under test: the orders table and the idempotency table on
//! one local DynamoDB, and requests shaped exactly as an API Gateway HTTP
//! API (payload 2.0) sends them, read by `lambda_http` itself.

use std::collections::HashMap;

use lambda_http::http::Method;
use lambda_http::{Body, Request, Response};
use serde_json::{Value, json};

use crate::store::ApiStore;
use crate::{ApiConfig, OrderApi};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use lambda_idempotency::StoreError;
use lambda_idempotency::time::epoch_ms;
use orders::testing::{
    HttpApiCaller, HttpApiRequest, OrdersDb, RequestCounter, TestDb, create_table, scan_all,
};

/// The one test fixture, [`TestDb`], on the orders table ([`OrdersDb`]),
/// with the idempotency table beside it.
pub struct ApiDb {
    /// The orders table and its client.
    pub db: TestDb,
    /// The idempotency table's name.
    pub idempotency_table: String,
}

impl ApiDb {
    /// Fresh tables on a fresh local DynamoDB (or the external endpoint).
    pub async fn new() -> Self {
        let db = TestDb::new().await;
        let idempotency_table = format!("{}-idempotency", db.table);
        create_idempotency_table(&db.client, &idempotency_table)
            .await
            .expect("create the idempotency table");
        db.track_table(&idempotency_table);
        ApiDb {
            db,
            idempotency_table,
        }
    }

    /// The configuration the function would read, with `env` on top.
    pub fn config(&self, env: &[(&str, &str)]) -> ApiConfig {
        let mut vars: HashMap<String, String> = HashMap::from([
            ("TABLE_NAME".to_owned(), self.db.table.clone()),
            (
                "IDEMPOTENCY_TABLE".to_owned(),
                self.idempotency_table.clone(),
            ),
        ]);
        vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        ApiConfig::from_lookup(|k| vars.get(k).cloned()).expect("valid test configuration")
    }

    /// The function over these tables.
    pub fn api(&self, env: &[(&str, &str)]) -> OrderApi {
        self.api_with_client(self.db.client.clone(), env)
    }

    /// The function with another DynamoDB client (a fault proxy, an
    /// unreachable endpoint).
    pub fn api_with_client(
        &self,
        client: aws_sdk_dynamodb::Client,
        env: &[(&str, &str)],
    ) -> OrderApi {
        let config = self.config(env);
        let orders = orders::store::OrderStore::new(client.clone(), config.table_name.clone());
        let store = ApiStore::new(client, config.idempotency_table.clone(), orders)
            .expect("a valid idempotency table name");
        OrderApi::new(store, &config)
    }

    /// The function with a client that counts every HTTP request it sends
    /// to DynamoDB (each attempt, retries included).
    pub fn counted_api(&self, env: &[(&str, &str)]) -> (OrderApi, RequestCounter) {
        let counter = RequestCounter::default();
        let conf = self
            .db
            .client
            .config()
            .to_builder()
            .interceptor(counter.clone())
            .build();
        let api = self.api_with_client(aws_sdk_dynamodb::Client::from_conf(conf), env);
        (api, counter)
    }

    /// Every order item.
    pub async fn orders(&self) -> Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
        scan_all(&self.db.client, &self.db.table).await
    }

    /// Every idempotency record.
    pub async fn records(&self) -> Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
        scan_all(&self.db.client, &self.idempotency_table).await
    }
}

/// Who calls, as the HTTP API's authorizer reports it.
#[derive(Debug, Clone)]
pub enum Caller<'a> {
    /// A route without an authorizer (no `authorizer` in the context).
    Anonymous,
    /// A JWT authorizer's claims `iss` and `sub`.
    Jwt(&'a str, &'a str),
    /// An IAM-authorized caller's user (or assumed-role) ARN.
    Iam(&'a str),
    /// A Lambda authorizer's context: `principalId` set to this.
    Lambda(&'a str),
}

/// The caller the tests send as by default: an IAM user, what the
/// template's routes (IAM authorization, `API_AUTH` unset) see.
pub const ALICE: Caller<'static> = Caller::Iam("arn:aws:iam::123456789012:user/alice");

impl From<&Caller<'_>> for HttpApiCaller {
    fn from(caller: &Caller<'_>) -> Self {
        match *caller {
            Caller::Anonymous => HttpApiCaller::Anonymous,
            Caller::Jwt(iss, sub) => HttpApiCaller::jwt(iss, sub),
            Caller::Iam(arn) => HttpApiCaller::iam(arn),
            Caller::Lambda(principal) => HttpApiCaller::lambda(principal),
        }
    }
}

/// An API Gateway HTTP API (payload format 2.0) request to the template's
/// routes (`routeKey`, and `pathParameters` for `/orders/{orderId}`), the
/// event shaped by the testing crate's builder (which joins a repeated
/// header with commas, as HTTP API does).
pub fn http_api(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    caller: &Caller<'_>,
) -> HttpApiRequest {
    let method = Method::from_bytes(method.as_bytes()).expect("a test's method");
    let mut r = HttpApiRequest::new(method.clone(), path)
        .header("user-agent", "curl/8.5.0")
        .caller(caller.into());
    match path.strip_prefix("/orders/") {
        Some(id) => {
            r = r
                .route_key(format!("{method} /orders/{{orderId}}"))
                .path_parameter("orderId", id);
        }
        None => r = r.route_key(format!("{method} {path}")),
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    if let Some(b) = body {
        r = r.body(b);
    }
    r
}

/// [`http_api`]'s event as JSON, as API Gateway sends it to the binary.
pub fn event(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    caller: &Caller<'_>,
) -> Value {
    http_api(method, path, headers, body, caller)
        .event()
        .expect("an HTTP API event")
}

/// [`http_api`]'s request, as `lambda_http` reads it.
pub fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    caller: &Caller<'_>,
) -> Request {
    http_api(method, path, headers, body, caller)
        .build()
        .expect("an HTTP API request")
}

/// `POST /orders` with a JSON body and, if given, an Idempotency-Key.
pub fn post(key: Option<&str>, body: &str, caller: &Caller<'_>) -> Request {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(k) = key {
        headers.push(("idempotency-key", k));
    }
    request("POST", "/orders", &headers, Some(body), caller)
}

/// `GET /orders/{orderId}` by `caller`; `order_id` goes into the path as
/// it is (percent-encode it first for an id with spaces or non-ASCII, as
/// a client must).
pub fn get(order_id: &str, caller: &Caller<'_>) -> Request {
    request("GET", &format!("/orders/{order_id}"), &[], None, caller)
}

/// The body of a valid order.
pub fn order_body(customer: &str, amount: u64) -> String {
    json!({"customerId": customer, "amount": amount, "currency": "INR"}).to_string()
}

/// A deadline `secs` from now, as Lambda gives it (epoch milliseconds).
pub fn deadline_in(secs: u64) -> u64 {
    epoch_ms() + secs * 1000
}

/// A response's body as text.
pub fn text(r: &Response<Body>) -> String {
    match r.body() {
        Body::Text(t) => t.clone(),
        Body::Binary(b) => String::from_utf8_lossy(b).into_owned(),
        Body::Empty => String::new(),
        _ => String::new(),
    }
}

/// A response's body as JSON (panics if it is not JSON).
pub fn json_of(r: &Response<Body>) -> Value {
    serde_json::from_str(&text(r)).expect("a JSON body")
}

/// One header's value as text.
pub fn header<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Is this a problem+json answer with `status`, whose body has the RFC 9457
/// members and says that status?
pub fn is_problem(r: &Response<Body>, status: u16) -> bool {
    let Ok(body) = serde_json::from_str::<Value>(&text(r)) else {
        return false;
    };
    r.status().as_u16() == status
        && header(r, "content-type") == Some("application/problem+json")
        && body["status"] == json!(status)
        && body["type"].is_string()
        && body["title"].is_string()
        && body["detail"].is_string()
}

/// The order API's idempotency table (hash key `idempotency_key`, TTL on
/// `expires_at`), as template.yaml creates it. The API checks expiry in
/// code, so a server without TTL support serves the tests just as well.
pub async fn create_idempotency_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_table(client, table, crate::store::KEY).await?;
    let ttl = aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(crate::store::TTL_ATTRIBUTE)
        .build()
        .map_err(|e| StoreError::Client {
            code: e.to_string(),
        })?;
    if let Err(e) = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await
    {
        tracing::warn!(error = %DisplayErrorContext(&e), "UpdateTimeToLive failed; expiry is checked in code anyway");
    }
    Ok(())
}
