//! The HTTP API (the `{{ cookiecutter.project_name }}-api` binary), behind an API Gateway HTTP API
//! with IAM authorisation:
//!
//! - `POST /{{ cookiecutter.__plural }}` with an `Idempotency-Key` header creates a {{ cookiecutter.entity }}
//!   in the state of its creating event and answers `201` with its id;
//! - `GET /{{ cookiecutter.__plural }}/{id}` shows one.
//!
//! The key's policy is the library's layer
//! ([`IdempotencyLayer`], on its idempotency table), in front of [`Api`]:
//! `400` without a valid key, `409` while the key's first request still
//! runs, `422` for the key reused with another body, and a repeat answered
//! with the first response, byte for byte, with `Idempotent-Replayed: true`.
//! So a client that lost the answer retries with the same key and gets the
//! same {{ cookiecutter.entity }}, not a second one.
//!
//! A {{ cookiecutter.entity }} created here is written exactly as the consumer writes its
//! creating event (seq 1, one conditional UpdateItem with
//! `attribute_not_exists`): its next events arrive through the queue with
//! seq 2, 3, ...

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::header::{CONTENT_TYPE, LOCATION};
use lambda_http::http::{Method, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::tower::{Layer, Service};
use lambda_http::{Body, Request, RequestExt, Response};
use lambda_idempotency::config::ConfigError;
use lambda_idempotency::dynamo::{self, Conditional, n, s, send_conditional, store_error};
use lambda_idempotency::http::{AuthMode, IdempotencyLayer, IdempotentService, Problem};
use lambda_idempotency::idempotency::{IdempotencyOptions, IdempotencyStore, IdempotencyTable};
use lambda_idempotency::time::rfc3339;
use lambda_idempotency::wire::{self, Id};
use lambda_idempotency::{ParseError, StoreError};
use serde::Deserialize;

use crate::{EventType, KEY};

/// The collection's path.
pub const PATH: &str = "/{{ cookiecutter.__plural }}";
/// The prefix of every problem's `type` (RFC 9457).
pub const PROBLEM_PREFIX: &str = "urn:{{ cookiecutter.project_name }}:problem:";
/// How long a key answers for its first request: 24 hours. After that, the
/// same key creates another {{ cookiecutter.entity }}.
pub const KEY_TTL: Duration = Duration::from_secs(86_400);
/// The idempotency table's TTL attribute (epoch seconds): template.yaml
/// turns DynamoDB's TTL on for it, so expired keys are deleted.
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// The idempotency store on `table` (hash key `id`, TTL on
/// [`TTL_ATTRIBUTE`]). Refuses a name DynamoDB would refuse, so a
/// misconfigured function fails its cold start.
pub fn idempotency_store(
    client: aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<IdempotencyStore, ConfigError> {
    let table = IdempotencyTable::new(table)?.ttl_attribute(TTL_ATTRIBUTE)?;
    let options = IdempotencyOptions {
        expiry: KEY_TTL,
        ..IdempotencyOptions::default()
    };
    IdempotencyStore::new(client, table, options)
}

/// The body of `POST /{{ cookiecutter.__plural }}`: `{}`, or
/// `{"type": "<a creating event>", "reference": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    /// Which creating event (default: the first one the template was given).
    #[serde(rename = "type")]
    kind: Option<EventType>,
    /// The caller's own reference, kept with the {{ cookiecutter.entity }}.
    reference: Option<String>,
}

/// A validated `POST` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    /// The creating event whose state the {{ cookiecutter.entity }} starts in.
    pub kind: EventType,
    /// The caller's reference, if any.
    pub reference: Option<Id>,
}

/// Read a `POST` body (empty: `{}`). Errors name the field, never its value.
pub fn parse_create(body: &[u8]) -> Result<Create, ParseError> {
    let text = std::str::from_utf8(body).map_err(|_| wire::invalid("body", "not UTF-8"))?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let b: CreateBody = wire::from_json(Some(text))?;
    let kind = match b.kind {
        Some(kind) if kind.creates() => kind,
        Some(_) => return Err(wire::invalid("type", "not an event that creates the {{ cookiecutter.entity }}")),
        None => first_creating(),
    };
    let reference = b
        .reference
        .as_deref()
        .map(|r| Id::try_from(r).map_err(|why| wire::invalid("reference", why)))
        .transpose()?;
    Ok(Create { kind, reference })
}

/// The first creating event: the machine has one (the template checks it).
fn first_creating() -> EventType {
    EventType::ALL.iter().copied().find(|k| k.creates()).unwrap_or(EventType::ALL[0])
}

/// The API's routes on the {{ cookiecutter.entity }} table; [`Api::with_idempotency`] puts
/// the Idempotency-Key layer in front.
#[derive(Debug, Clone)]
pub struct Api {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

/// The service the binary runs: the layer in front of [`Api`].
pub type ApiService = IdempotentService<Api>;

impl Api {
    /// The routes on `table` (the consumer's table).
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        Api {
            client,
            table: table.into(),
        }
    }

    /// The Idempotency-Key layer on `store` in front of the routes. Keys
    /// are scoped by the caller's IAM principal: two callers' keys never
    /// meet.
    pub fn with_idempotency(self, store: IdempotencyStore) -> ApiService {
        IdempotencyLayer::new(store, AuthMode::Iam)
            .problem_prefix(PROBLEM_PREFIX)
            .layer(self)
    }

    async fn route(self, req: Request) -> Response<Body> {
        let path = req.raw_http_path().to_owned();
        let item = path.strip_prefix(PATH).and_then(|rest| rest.strip_prefix('/'));
        match (req.method(), path.as_str(), item) {
            (&Method::POST, p, _) if p == PATH => self.create(&req).await,
            (&Method::GET, _, Some(id)) if !id.is_empty() && !id.contains('/') => self.show(id).await,
            _ => problem(StatusCode::NOT_FOUND, "not-found", "Not Found", "no such route"),
        }
    }

    /// `POST /{{ cookiecutter.__plural }}`: one conditional UpdateItem that creates the
    /// {{ cookiecutter.entity }} with its creating event's state.
    async fn create(&self, req: &Request) -> Response<Body> {
        let create = match parse_create(req.body().as_ref()) {
            Ok(c) => c,
            Err(e) => return problem(StatusCode::BAD_REQUEST, "invalid-body", "Invalid body", e.to_string()),
        };
        // API Gateway's request id is unique per request: the new id. A
        // retry with the same key never gets here (the layer replays the
        // first answer), so it never makes a second {{ cookiecutter.entity }}.
        let Some(request_id) = gateway_request_id(req) else {
            return problem(
                StatusCode::BAD_REQUEST,
                "no-request-id",
                "Not an API Gateway request",
                "the request has no API Gateway request id",
            );
        };
        let id = format!("{{ cookiecutter.entity.replace('_', '-') }}-{request_id}");
        let now = rfc3339(SystemTime::now());
        let mut expression = "SET #st = :to, seq = :one, last_event_type = :type, created_at = :now, \
                              updated_at = :now, event_ids = :eid"
            .to_owned();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(&id))
            .condition_expression(format!("attribute_not_exists({KEY})"))
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":to", s(create.kind.to()))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":type", s(create.kind.name()))
            .expression_attribute_values(":now", s(&now))
            .expression_attribute_values(":eid", AttributeValue::L(vec![s(&format!("api-{request_id}"))]));
        if let Some(reference) = &create.reference {
            // A name, not the word: REFERENCE is one of DynamoDB's reserved words.
            expression.push_str(", #ref = :ref");
            update = update
                .expression_attribute_names("#ref", "reference")
                .expression_attribute_values(":ref", s(reference.as_str()));
        }
        let update = update.update_expression(expression);
        match send_conditional(update).await {
            Ok(Conditional::Committed) => {
                let body = serde_json::json!({
                    "{{ cookiecutter.__id_field }}": id,
                    "status": create.kind.to(),
                });
                let mut response = json(StatusCode::CREATED, &body);
                if let Ok(location) = format!("{PATH}/{id}").parse() {
                    response.headers_mut().insert(LOCATION, location);
                }
                response
            }
            // The id is taken: only a request id seen twice would do that.
            // A 5xx gives the key back, so the client's retry runs again.
            Ok(Conditional::Refused(_)) => problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "id-taken",
                "Id taken",
                "the new id is taken; retry with the same key",
            ),
            Err(e) => unavailable(&e),
        }
    }

    /// `GET /{{ cookiecutter.__plural }}/{id}`: the stored {{ cookiecutter.entity }} (a consistent read).
    async fn show(&self, id: &str) -> Response<Body> {
        let read = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(id))
            .consistent_read(true)
            .send()
            .await;
        let item = match read {
            Ok(out) => out.item,
            Err(e) => return unavailable(&store_error(&e, "GetItem")),
        };
        let Some(item) = item else {
            return problem(StatusCode::NOT_FOUND, "not-found", "Not Found", "no such {{ cookiecutter.entity }}");
        };
        let text = |name: &str| dynamo::string(&item, name).ok();
        let (Some(status), Ok(seq)) = (text("status"), dynamo::number::<u64>(&item, "seq")) else {
            return problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unreadable",
                "Unreadable item",
                "the stored {{ cookiecutter.entity }} lacks its status or seq",
            );
        };
        let mut body = serde_json::json!({
            "{{ cookiecutter.__id_field }}": id,
            "status": status,
            "seq": seq,
        });
        for (attribute, field) in [
            ("last_event_type", "lastEventType"),
            ("updated_at", "updatedAt"),
            ("reference", "reference"),
        ] {
            if let Some(value) = text(attribute) {
                body[field] = value.into();
            }
        }
        json(StatusCode::OK, &body)
    }
}

impl Service<Request> for Api {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let api = self.clone();
        Box::pin(async move { Ok(api.route(req).await) })
    }
}

/// API Gateway's request id, kept to the characters an id takes.
fn gateway_request_id(req: &Request) -> Option<String> {
    #[allow(unreachable_patterns)] // other variants exist with other lambda_http features
    let raw = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.request_id.clone(),
        _ => None,
    }?;
    let id: String = raw.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    (!id.is_empty()).then_some(id)
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::Text(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, lambda_http::http::HeaderValue::from_static("application/json"));
    response
}

fn problem(status: StatusCode, slug: &str, title: &'static str, detail: impl Into<String>) -> Response<Body> {
    Problem::new(format!("{PROBLEM_PREFIX}{slug}"), status.as_u16(), title, detail).into_response()
}

/// DynamoDB throttled, timed out or failed: 503, and the layer gives the
/// key back, so the client's retry with the same key runs again.
fn unavailable(e: &StoreError) -> Response<Body> {
    lambda_idempotency::tracing::error!(error = %e, "DynamoDB failed");
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "Unavailable",
        "the table did not answer; retry with the same Idempotency-Key",
    )
}
