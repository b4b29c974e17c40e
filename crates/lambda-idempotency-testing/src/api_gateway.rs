//! Requests exactly as an API Gateway HTTP API (payload format 2.0)
//! delivers them to a function: the documented event JSON, read by
//! `lambda_http`'s own deserializer, so a test sees the `Request` (its
//! URI, headers, body, and the authorizer's caller in its
//! `RequestContext`) that `lambda_http::run` would hand the service.
//!
//! ```
//! use lambda_http::http::Method;
//! use lambda_idempotency_testing::{HttpApiCaller, HttpApiRequest};
//!
//! # fn main() -> Result<(), lambda_idempotency_testing::HttpApiError> {
//! let request = HttpApiRequest::new(Method::POST, "/orders")
//!     .header("content-type", "application/json")
//!     .header("idempotency-key", "k-1")
//!     .body(r#"{"amount":500}"#)
//!     .caller(HttpApiCaller::iam("arn:aws:iam::123456789012:user/alice"))
//!     .build()?;
//! assert_eq!(request.uri().path(), "/orders");
//! assert_eq!(request.headers()["idempotency-key"], "k-1");
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use lambda_http::Request;
use lambda_http::http::uri::PathAndQuery;
use lambda_http::http::{HeaderName, HeaderValue, Method};
use lambda_idempotency::http::{Scope, body_fingerprint, record_key};
use lambda_idempotency::idempotency::{Claim, Claimed, Persistence};
use lambda_idempotency::time::epoch_ms;
use serde_json::{Map, Value, json};

/// The API's account, id and domain, as every event names them.
pub const ACCOUNT_ID: &str = "123456789012";
/// The API's id (`requestContext.apiId`).
pub const API_ID: &str = "abc123";
/// The API's default domain: `requestContext.domainName`, and the `host`
/// header API Gateway sends.
pub const DOMAIN_NAME: &str = "abc123.execute-api.us-east-1.amazonaws.com";

/// Who calls, as the route's authorizer reports it in
/// `requestContext.authorizer`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HttpApiCaller {
    /// A route without an authorizer: no `authorizer` in the context.
    #[default]
    Anonymous,
    /// IAM authorization (`AWS_IAM`): `authorizer.iam`, with this
    /// `userArn` (a user's, or an assumed role's with its session name).
    Iam {
        /// `requestContext.authorizer.iam.userArn`.
        user_arn: String,
    },
    /// A JWT authorizer: `authorizer.jwt.claims`, its `iss` and `sub`.
    Jwt {
        /// The `iss` claim.
        iss: String,
        /// The `sub` claim.
        sub: String,
    },
    /// A Lambda (REQUEST) authorizer whose context sets `principalId`.
    Lambda {
        /// `requestContext.authorizer.lambda.principalId`.
        principal_id: String,
    },
}

impl HttpApiCaller {
    /// An IAM-authorized caller with this user (or assumed-role) ARN.
    pub fn iam(user_arn: impl Into<String>) -> Self {
        HttpApiCaller::Iam {
            user_arn: user_arn.into(),
        }
    }

    /// A JWT authorizer's caller with these `iss` and `sub` claims.
    pub fn jwt(iss: impl Into<String>, sub: impl Into<String>) -> Self {
        HttpApiCaller::Jwt {
            iss: iss.into(),
            sub: sub.into(),
        }
    }

    /// A Lambda authorizer's caller whose context sets `principalId`.
    pub fn lambda(principal_id: impl Into<String>) -> Self {
        HttpApiCaller::Lambda {
            principal_id: principal_id.into(),
        }
    }

    /// `requestContext.authorizer` as API Gateway writes it (None: no
    /// authorizer on the route).
    fn authorizer(&self) -> Option<Value> {
        match self {
            HttpApiCaller::Anonymous => None,
            HttpApiCaller::Iam { user_arn } => Some(json!({"iam": {
                "accessKey": "AKIAEXAMPLE", "accountId": ACCOUNT_ID,
                "callerId": "AIDAEXAMPLE", "principalOrgId": null,
                "userArn": user_arn, "userId": "AIDAEXAMPLE",
            }})),
            HttpApiCaller::Jwt { iss, sub } => Some(json!({"jwt": {
                "claims": {"iss": iss, "sub": sub}, "scopes": null,
            }})),
            HttpApiCaller::Lambda { principal_id } => Some(json!({"lambda": {
                "principalId": principal_id,
            }})),
        }
    }
}

/// Why a request could not be built. It never repeats what the test
/// passed (a header's value may be a credential).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpApiError {
    /// The path is not an absolute path (`/` first; no query, no
    /// fragment; only characters a URI's path may hold).
    Path,
    /// A header's name is not a valid HTTP header name.
    HeaderName,
    /// A header's value is not a valid HTTP header value.
    HeaderValue,
    /// `host` or `x-forwarded-proto`: API Gateway sets them itself (and
    /// `lambda_http` builds the URI from them).
    ReservedHeader,
    /// `lambda_http` did not read the event (a bug of this builder).
    Event,
}

impl fmt::Display for HttpApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HttpApiError::Path => {
                "the path is not an absolute URI path without a query, or the query holds a space or `#`"
            }
            HttpApiError::HeaderName => "a header name is not a valid HTTP header name",
            HttpApiError::HeaderValue => "a header value is not a valid HTTP header value",
            HttpApiError::ReservedHeader => "host and x-forwarded-proto are set by API Gateway",
            HttpApiError::Event => "lambda_http did not read the HTTP API event",
        })
    }
}

impl std::error::Error for HttpApiError {}

/// The request's body as the event carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EventBody {
    Text(String),
    Binary(Vec<u8>),
}

/// A builder of one API Gateway HTTP API (payload 2.0) request: method,
/// path, headers, body and caller; the rest of the event (stage
/// `$default`, the API's domain and `host`, a fresh request id, now as
/// the request's time) is what API Gateway writes for an API at its
/// default endpoint.
#[derive(Debug, Clone)]
#[must_use]
pub struct HttpApiRequest {
    method: Method,
    path: String,
    query: String,
    route_key: Option<String>,
    path_parameters: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<EventBody>,
    caller: HttpApiCaller,
}

/// Each event's `requestId`, unique in the process.
static REQUEST_IDS: AtomicU64 = AtomicU64::new(1);

impl HttpApiRequest {
    /// `method` on `path` (`rawPath` and `requestContext.http.path`, as
    /// the client sent it: percent-encode what a client would), from no
    /// caller, without headers or body.
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        HttpApiRequest {
            method,
            path: path.into(),
            query: String::new(),
            route_key: None,
            path_parameters: Vec::new(),
            headers: Vec::new(),
            body: None,
            caller: HttpApiCaller::Anonymous,
        }
    }

    /// The route that matched (`routeKey`, e.g. `GET /orders/{orderId}`);
    /// `$default` unless set.
    pub fn route_key(mut self, route_key: impl Into<String>) -> Self {
        self.route_key = Some(route_key.into());
        self
    }

    /// The query string as the client sent it, without the `?`
    /// (`rawQueryString`; `queryStringParameters` is its parameters, a
    /// repeated one joined with commas, as API Gateway does).
    pub fn query(mut self, raw: impl Into<String>) -> Self {
        self.query = raw.into();
        self
    }

    /// A path parameter of the route (`pathParameters`).
    pub fn path_parameter(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.path_parameters.push((name.into(), value.into()));
        self
    }

    /// A header. Names are lower-cased and a repeated header is joined
    /// with commas, as API Gateway does (`a`, then `b`: `a,b`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// A text body (`isBase64Encoded: false`).
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(EventBody::Text(body.into()));
        self
    }

    /// A binary body, sent base64-encoded (`isBase64Encoded: true`), as
    /// API Gateway sends a body it does not take for text.
    pub fn binary_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(EventBody::Binary(body.into()));
        self
    }

    /// Who calls ([`HttpApiCaller::Anonymous`] unless set).
    pub fn caller(mut self, caller: HttpApiCaller) -> Self {
        self.caller = caller;
        self
    }

    /// The event as API Gateway sends it to the function (JSON), for a
    /// function's real binary under the Runtime API emulator. Checked as
    /// [`HttpApiRequest::build`] checks it, so `lambda_http` reads it
    /// without a panic.
    pub fn event(&self) -> Result<Value, HttpApiError> {
        // lambda_http builds the request's URI from `https://{host}{rawPath}`
        // and panics on one it cannot parse, so the path is checked here:
        // absolute, and nothing a URI's path may not hold.
        let path = self
            .path
            .parse::<PathAndQuery>()
            .map_err(|_| HttpApiError::Path)?;
        if !self.path.starts_with('/') || path.query().is_some() || self.path.contains('#') {
            return Err(HttpApiError::Path);
        }
        let mut headers = Map::new();
        headers.insert("host".into(), json!(DOMAIN_NAME));
        headers.insert("x-forwarded-proto".into(), json!("https"));
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| HttpApiError::HeaderName)?
                .as_str()
                .to_owned();
            HeaderValue::from_str(value).map_err(|_| HttpApiError::HeaderValue)?;
            if name == "host" || name == "x-forwarded-proto" {
                return Err(HttpApiError::ReservedHeader);
            }
            // API Gateway joins a repeated header's values with commas.
            let joined = match headers.get(&name).and_then(Value::as_str) {
                Some(before) => format!("{before},{value}"),
                None => value.clone(),
            };
            headers.insert(name, json!(joined));
        }
        let route_key = self.route_key.as_deref().unwrap_or("$default");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let request_id = REQUEST_IDS.fetch_add(1, Ordering::Relaxed);
        let user_agent = headers
            .get("user-agent")
            .cloned()
            .unwrap_or_else(|| json!(""));
        let mut context = json!({
            "accountId": ACCOUNT_ID,
            "apiId": API_ID,
            "domainName": DOMAIN_NAME,
            "domainPrefix": API_ID,
            "http": {"method": self.method.as_str(), "path": self.path, "protocol": "HTTP/1.1",
                     "sourceIp": "192.0.2.1", "userAgent": user_agent},
            "requestId": format!("req-{request_id}"),
            "routeKey": route_key,
            "stage": "$default",
            "time": clf_time(now.as_secs()),
            "timeEpoch": u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
        });
        if let Some(authorizer) = self.caller.authorizer() {
            context["authorizer"] = authorizer;
        }
        let mut event = json!({
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": self.path,
            "rawQueryString": self.query,
            "headers": headers,
            "requestContext": context,
            "isBase64Encoded": matches!(self.body, Some(EventBody::Binary(_))),
        });
        if !self.query.is_empty() {
            if self.query.contains('#') || self.query.contains(' ') {
                return Err(HttpApiError::Path);
            }
            let mut params = Map::new();
            for pair in self.query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                let joined = match params.get(k).and_then(Value::as_str) {
                    Some(before) => format!("{before},{v}"),
                    None => v.to_owned(),
                };
                params.insert(k.to_owned(), json!(joined));
            }
            event["queryStringParameters"] = Value::Object(params);
        }
        if !self.path_parameters.is_empty() {
            let params: Map<String, Value> = self
                .path_parameters
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            event["pathParameters"] = Value::Object(params);
        }
        match &self.body {
            None => {}
            Some(EventBody::Text(text)) => event["body"] = json!(text),
            Some(EventBody::Binary(bytes)) => {
                event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
        }
        Ok(event)
    }

    /// The `Request` `lambda_http` makes of [`HttpApiRequest::event`],
    /// read by its own deserializer.
    pub fn build(&self) -> Result<Request, HttpApiError> {
        let event = self.event()?;
        lambda_http::request::from_str(&event.to_string()).map_err(|_| HttpApiError::Event)
    }
}

/// `secs` since the epoch as API Gateway's `requestContext.time`, the
/// common log format (`04/Dec/2026:00:00:00 +0000`), in UTC: the library's
/// RFC 3339 date (`2026-12-04T00:00:00.000Z`) with its fields reordered, so
/// that the calendar arithmetic lives in one place.
fn clf_time(secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let iso = lambda_idempotency::time::rfc3339(t);
    // `YYYY-MM-DDTHH:MM:SS.mmmZ`: fixed widths for the years this is used for.
    let (year, month, day, clock) = (
        iso.get(0..4).unwrap_or("1970"),
        iso.get(5..7).unwrap_or("01"),
        iso.get(8..10).unwrap_or("01"),
        iso.get(11..19).unwrap_or("00:00:00"),
    );
    let name = month
        .parse::<usize>()
        .ok()
        .and_then(|m| MONTHS.get(m.wrapping_sub(1)))
        .unwrap_or(&"Jan");
    format!("{day}/{name}/{year}:{clock} +0000")
}

/// Another attempt holds `key` for `request`, as `scope` sent it: its
/// claim, taken on `store` with a lease of `lease` from now, as a first
/// attempt that is still running (or crashed before its answer) leaves
/// it. The Idempotency-Key layer on that store then answers the same
/// request `409` with `Retry-After` until the lease ends, and runs nothing.
///
/// Panics (it is test support) when the request has no fingerprint or the
/// store does not grant the claim: the key must be free before.
pub async fn hold_key<P: Persistence>(
    store: &P,
    scope: &Scope,
    key: &str,
    request: &Request,
    lease: Duration,
) {
    let record = record_key(scope, key);
    let fingerprint = body_fingerprint(request).expect("the request has a fingerprint");
    let now = epoch_ms();
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let claim = Claim {
        key: &record,
        fingerprint: &fingerprint,
        attempt: "the-first-attempt",
        lease_until_ms: now.saturating_add(lease_ms),
        now_ms: now,
    };
    assert_eq!(
        store.claim(&claim).await,
        Ok(Claimed::Held),
        "hold_key: the key was not free"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::request::RequestContext;
    use lambda_http::{Body, RequestExt, RequestPayloadExt};

    #[test]
    fn the_request_carries_method_path_headers_body_and_caller() {
        let r = HttpApiRequest::new(Method::PATCH, "/orders/o%201")
            .route_key("PATCH /orders/{orderId}")
            .path_parameter("orderId", "o 1")
            .header("Content-Type", "application/json")
            .header("x-dup", "a")
            .header("X-Dup", "b")
            .body(r#"{"a":1}"#)
            .caller(HttpApiCaller::iam("arn:aws:iam::1:user/alice"))
            .build()
            .expect("a request");
        assert_eq!(r.method(), Method::PATCH);
        assert_eq!(r.uri().path(), "/orders/o%201");
        assert_eq!(r.uri().host(), Some(DOMAIN_NAME));
        assert_eq!(r.headers()["content-type"], "application/json");
        assert_eq!(r.headers()["x-dup"], "a,b");
        assert_eq!(r.headers().get_all("x-dup").iter().count(), 1);
        assert_eq!(r.body(), &Body::Text(r#"{"a":1}"#.into()));
        assert_eq!(r.path_parameters().first("orderId"), Some("o 1"));
        let payload: Option<Value> = r.payload().expect("JSON");
        assert_eq!(payload, Some(json!({"a": 1})));
        match r.request_context() {
            RequestContext::ApiGatewayV2(c) => {
                assert_eq!(c.route_key.as_deref(), Some("PATCH /orders/{orderId}"));
                let iam = c.authorizer.and_then(|a| a.iam).expect("an IAM caller");
                assert_eq!(iam.user_arn.as_deref(), Some("arn:aws:iam::1:user/alice"));
            }
            _ => panic!("not an HTTP API request"),
        }
    }

    fn authorizer(caller: HttpApiCaller) -> Option<Value> {
        let r = HttpApiRequest::new(Method::GET, "/")
            .caller(caller)
            .build()
            .expect("a request");
        match r.request_context() {
            RequestContext::ApiGatewayV2(c) => {
                c.authorizer.map(|a| serde_json::to_value(a).expect("JSON"))
            }
            _ => panic!("not an HTTP API request"),
        }
    }

    #[test]
    fn each_caller_is_where_its_authorizer_puts_it() {
        assert_eq!(authorizer(HttpApiCaller::Anonymous), None);
        let jwt = authorizer(HttpApiCaller::jwt("https://issuer", "alice")).expect("jwt");
        assert_eq!(jwt["jwt"]["claims"]["sub"], "alice");
        assert_eq!(jwt["jwt"]["claims"]["iss"], "https://issuer");
        let lambda = authorizer(HttpApiCaller::lambda("bob")).expect("lambda");
        assert_eq!(lambda["lambda"]["principalId"], "bob");
        let iam = authorizer(HttpApiCaller::iam("arn:x")).expect("iam");
        assert_eq!(iam["iam"]["userArn"], "arn:x");
    }

    #[test]
    fn a_binary_body_arrives_decoded() {
        let bytes = vec![0u8, 159, 146, 150, 255];
        let event = HttpApiRequest::new(Method::POST, "/b")
            .binary_body(bytes.clone())
            .event()
            .expect("an event");
        assert_eq!(event["isBase64Encoded"], true);
        assert_eq!(event["body"], "AJ+Slv8=");
        let r = HttpApiRequest::new(Method::POST, "/b")
            .binary_body(bytes.clone())
            .build()
            .expect("a request");
        assert_eq!(r.body(), &Body::Binary(bytes));
    }

    #[test]
    fn what_lambda_http_would_panic_on_is_an_error() {
        for path in ["", "*", "orders", "/a?b=1", "/a#b", "/a b", "/\u{7f}"] {
            let e = HttpApiRequest::new(Method::GET, path).build().err();
            assert_eq!(e, Some(HttpApiError::Path), "{path:?}");
        }
        let bad = |name: &str, value: &str| {
            HttpApiRequest::new(Method::GET, "/")
                .header(name, value)
                .build()
                .err()
        };
        assert_eq!(bad("a b", "v"), Some(HttpApiError::HeaderName));
        assert_eq!(bad("a", "line\nbreak"), Some(HttpApiError::HeaderValue));
        assert_eq!(bad("Host", "evil"), Some(HttpApiError::ReservedHeader));
        assert_eq!(
            bad("x-forwarded-proto", "ht tp"),
            Some(HttpApiError::ReservedHeader)
        );
        // The message does not repeat the value.
        let e = bad("a", "secret\n").expect("an error");
        assert!(!e.to_string().contains("secret"));
    }

    #[test]
    fn the_time_is_the_common_log_format_in_utc() {
        assert_eq!(clf_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(clf_time(1_796_342_400), "04/Dec/2026:00:00:00 +0000");
        assert_eq!(clf_time(951_782_400 + 3_723), "29/Feb/2000:01:02:03 +0000");
    }
}
