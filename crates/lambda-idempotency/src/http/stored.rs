//! The response stored with a completed key and replayed byte for byte:
//! its status, the headers that matter (the layer's
//! [`stored_headers`](super::IdempotencyLayer::stored_headers)) and its body,
//! kept as the store's one text (`output`) in a versioned JSON form.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use lambda_http::http::header::{HeaderName, HeaderValue};
use lambda_http::http::{HeaderMap, StatusCode};
use lambda_http::{Body, Response};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// Is a response with `status` stored for its key (and replayed), or
/// given back? A 5xx, or a 429 or 408 that asks the client to come back
/// later, is given back: stored, it would answer every retry the same
/// way until the key expires. Anything else is the request's answer.
pub(super) fn is_stored(status: StatusCode) -> bool {
    !(status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT)
}

/// What a stored response answered: its route (hashed method and path)
/// and its target (hashed method, path, query and identity headers).
/// Public, hidden, for the model checks.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered<'a> {
    /// The hashed method and path.
    pub route: &'a str,
    /// The hashed method, path, query and identity headers.
    pub target: &'a str,
}

/// A response body as stored: text stays text (API Gateway sends it as
/// is), bytes stay bytes (base64 in the store, as API Gateway encodes
/// them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StoredBody {
    /// No body.
    #[default]
    Empty,
    /// A text body.
    Text(String),
    /// A binary body.
    Binary(Vec<u8>),
}

/// A response to store and replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// The headers replayed, lower-case names, in order.
    pub headers: Vec<(String, String)>,
    /// The body, exactly as first sent.
    pub body: StoredBody,
}

/// The stored form. `v` lets a later version read what this one wrote.
#[derive(Serialize, Deserialize)]
struct Wire {
    v: u8,
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
    /// The hashed method and path the response answered (the layer's
    /// route check); absent in what earlier builds stored, and ignored by
    /// them (an unknown field), so a rollback still reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    route: Option<String>,
    /// The hashed method, path, query and identity headers (the layer's
    /// request check); absent in what earlier builds stored, which is
    /// then checked by its route alone, as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

/// What a stored response was the answer to, as far as its record says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Stamp {
    pub(super) route: Option<String>,
    pub(super) target: Option<String>,
}

impl Stamp {
    /// Was it the answer to a request with `now`'s route and target? By
    /// the target where one was stored; by the route where only that was
    /// (a record an earlier build wrote); a record with neither replays.
    pub(super) fn matches(&self, now: Answered<'_>) -> bool {
        match (&self.target, &self.route) {
            (Some(target), _) => target == now.target,
            (None, Some(route)) => route == now.route,
            (None, None) => true,
        }
    }
}

impl StoredResponse {
    /// A response with `status`, no headers and no body.
    pub fn new(status: u16) -> Self {
        StoredResponse {
            status,
            headers: Vec::new(),
            body: StoredBody::Empty,
        }
    }

    /// With a header (its name lower-cased).
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// With a text body.
    pub fn text(mut self, body: impl Into<String>) -> Self {
        self.body = StoredBody::Text(body.into());
        self
    }

    /// What the store keeps (the `output` of the key's record).
    pub fn encode(&self) -> String {
        self.encode_route(None)
    }

    /// [`Self::encode`], with what request it answered. Public for the
    /// model checks, which store what the layer stores.
    #[doc(hidden)]
    pub fn encode_for(&self, answered: Answered<'_>) -> String {
        self.encode_route(Some(answered))
    }

    fn encode_route(&self, answered: Option<Answered<'_>>) -> String {
        let (text, base64) = match &self.body {
            StoredBody::Empty => (None, None),
            StoredBody::Text(t) => (Some(t.clone()), None),
            StoredBody::Binary(b) => (None, Some(STANDARD.encode(b))),
        };
        let wire = Wire {
            v: 1,
            status: self.status,
            headers: self.headers.clone(),
            text,
            base64,
            route: answered.map(|a| a.route.to_owned()),
            target: answered.map(|a| a.target.to_owned()),
        };
        // Strings and numbers only: serialising cannot fail.
        serde_json::to_string(&wire).unwrap_or_default()
    }

    /// Read what [`StoredResponse::encode`] wrote. The error names what is
    /// wrong, never a value.
    pub fn decode(output: &str) -> Result<Self, StoreError> {
        Self::decode_routed(output).map(|(response, _)| response)
    }

    /// [`Self::decode`], with what it answered, as far as stored.
    pub(super) fn decode_routed(output: &str) -> Result<(Self, Stamp), StoreError> {
        let corrupt = |what: &str| StoreError::CorruptItem(format!("the stored response {what}"));
        let wire: Wire =
            serde_json::from_str(output).map_err(|_| corrupt("is not the layer's JSON"))?;
        if wire.v != 1 {
            return Err(corrupt("has an unknown version"));
        }
        let body = match (wire.text, wire.base64) {
            (None, None) => StoredBody::Empty,
            (Some(t), None) => StoredBody::Text(t),
            (None, Some(b)) => StoredBody::Binary(
                STANDARD
                    .decode(b)
                    .map_err(|_| corrupt("has a body that is not base64"))?,
            ),
            (Some(_), Some(_)) => return Err(corrupt("has two bodies")),
        };
        Ok((
            StoredResponse {
                status: wire.status,
                headers: wire.headers,
                body,
            },
            Stamp {
                route: wire.route,
                target: wire.target,
            },
        ))
    }

    /// What to store of `response`: its status, those of its headers that
    /// `keep` names (lower case) and whose values are visible ASCII, and
    /// its body.
    pub fn of(response: &Response<Body>, keep: &[String]) -> Self {
        let headers = keep_headers(response.headers(), keep);
        let body = match response.body() {
            Body::Empty => StoredBody::Empty,
            Body::Text(t) => StoredBody::Text(t.clone()),
            Body::Binary(b) => StoredBody::Binary(b.clone()),
            // Body is non-exhaustive; a later variant is stored as bytes.
            other => StoredBody::Binary(other.as_ref().to_vec()),
        };
        StoredResponse {
            status: response.status().as_u16(),
            headers,
            body,
        }
    }

    /// The response: status, headers and body as stored. A header that is
    /// no longer valid (only a corrupt record has one) is left out.
    pub fn to_response(&self) -> Response<Body> {
        let body = match &self.body {
            StoredBody::Empty => Body::Empty,
            StoredBody::Text(t) => Body::Text(t.clone()),
            StoredBody::Binary(b) => Body::Binary(b.clone()),
        };
        let mut r = Response::new(body);
        *r.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                r.headers_mut().append(name, value);
            }
        }
        r
    }
}

fn keep_headers(headers: &HeaderMap, keep: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, value) in headers {
        if !keep.iter().any(|k| k == name.as_str()) {
            continue;
        }
        match value.to_str() {
            Ok(v) => out.push((name.as_str().to_owned(), v.to_owned())),
            // Not replayable as text; say which header, not its value.
            Err(_) => tracing::warn!(header = %name, "a header with non-ASCII bytes is not stored"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_survives_the_store_byte_for_byte() {
        let keep = vec!["content-type".to_owned(), "location".to_owned()];
        for body in [
            Body::Empty,
            Body::Text("{\"id\":\"ä\"}\n".into()),
            Body::Binary(vec![0, 159, 146, 150, 255]),
        ] {
            let mut r = Response::new(body);
            *r.status_mut() = StatusCode::CREATED;
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r.headers_mut()
                .insert("location", HeaderValue::from_static("/orders/1"));
            r.headers_mut()
                .insert("x-request-id", HeaderValue::from_static("not kept"));
            let stored = StoredResponse::of(&r, &keep);
            let back = StoredResponse::decode(&stored.encode()).expect("decodes");
            assert_eq!(back, stored);
            let replayed = back.to_response();
            assert_eq!(replayed.status(), 201);
            assert_eq!(replayed.body(), r.body());
            assert_eq!(replayed.headers()["content-type"], "application/json");
            assert_eq!(replayed.headers()["location"], "/orders/1");
            assert!(replayed.headers().get("x-request-id").is_none());
        }
    }

    #[test]
    fn a_stamp_checks_the_target_else_the_route_else_nothing() {
        let now = Answered {
            route: "r",
            target: "t",
        };
        let stamp = |route: Option<&str>, target: Option<&str>| Stamp {
            route: route.map(str::to_owned),
            target: target.map(str::to_owned),
        };
        assert!(stamp(Some("r"), Some("t")).matches(now));
        assert!(!stamp(Some("r"), Some("t2")).matches(now));
        // Written before targets: the route alone, as then.
        assert!(stamp(Some("r"), None).matches(now));
        assert!(!stamp(Some("r2"), None).matches(now));
        // Written before routes: replays.
        assert!(stamp(None, None).matches(now));
        // What is encoded is decoded.
        let encoded = StoredResponse::new(201).encode_for(now);
        let (_, back) = StoredResponse::decode_routed(&encoded).unwrap();
        assert_eq!(back, stamp(Some("r"), Some("t")));
        let (_, none) = StoredResponse::decode_routed(&StoredResponse::new(201).encode()).unwrap();
        assert_eq!(none, Stamp::default());
    }

    #[test]
    fn stored_statuses() {
        for (status, stored) in [
            (200, true),
            (201, true),
            (400, true),
            (404, true),
            (409, true),
            (415, true),
            (422, true),
            (408, false),
            (429, false),
            (500, false),
            (503, false),
        ] {
            assert_eq!(
                is_stored(StatusCode::from_u16(status).unwrap()),
                stored,
                "{status}"
            );
        }
    }

    #[test]
    fn a_corrupt_output_is_an_error_without_its_value() {
        for bad in [
            "secret",
            "{}",
            r#"{"v":2,"status":201}"#,
            r#"{"v":1,"status":201,"base64":"%%secret"}"#,
            r#"{"v":1,"status":201,"text":"a","base64":"YQ=="}"#,
        ] {
            let e = StoredResponse::decode(bad).expect_err(bad);
            assert!(matches!(e, StoreError::CorruptItem(_)), "{bad}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }
}
