//! RFC 9457 problems (`application/problem+json`): every answer the layer
//! gives instead of the inner service's, and a type an API's own problems
//! can use too, so that all its errors read alike.

use lambda_http::http::StatusCode;
use lambda_http::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use lambda_http::{Body, Response};
use serde::Serialize;

/// The media type of a problem answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `type` prefix of the layer's problems unless configured
/// ([`IdempotencyLayer::problem_prefix`](super::IdempotencyLayer::problem_prefix)):
/// a problem's `type` is this followed by its [`ProblemKind`]'s slug.
pub const DEFAULT_PROBLEM_PREFIX: &str = "urn:lambda-idempotency:problem:";

/// An RFC 9457 problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// A URI naming the problem type (a URN such as
    /// `urn:payments:problem:idempotency-key-reused`), stable for clients
    /// to match on.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short, fixed summary of the type.
    pub title: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// What is wrong with this request: names headers and fields, never
    /// their values (requests carry customer data, and this goes back to
    /// the client and into logs).
    pub detail: String,
    /// Seconds to wait before retrying (409, 503), sent as `Retry-After`
    /// rather than in the body.
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

impl Problem {
    /// A problem of type `kind` (a URI) with `status`, `title` and `detail`.
    pub fn new(
        kind: impl Into<String>,
        status: u16,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Problem {
        Problem {
            kind: kind.into(),
            title,
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// The same problem, asking the client to retry after `secs` (at least 1).
    pub fn retry_after(mut self, secs: u64) -> Problem {
        self.retry_after = Some(secs.max(1));
        self
    }

    /// The answer: this problem as `application/problem+json`, with its
    /// status and `Retry-After`.
    pub fn into_response(self) -> Response<Body> {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // Serialising strings and a number cannot fail; the fallback keeps
        // the answer a problem whatever happens.
        let body = serde_json::to_string(&self).unwrap_or_else(|_| {
            format!(
                r#"{{"type":"{DEFAULT_PROBLEM_PREFIX}internal-error","title":"The request could not be processed","status":500}}"#
            )
        });
        let mut r = Response::new(Body::Text(body));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        r
    }
}

/// The problems the layer answers with itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// 400: no usable `Idempotency-Key` (missing, repeated or malformed).
    InvalidIdempotencyKey,
    /// 422: the key was used with another request payload.
    KeyReused,
    /// 409: a request with this key is still being processed.
    RequestInProgress,
    /// 403: no principal from the configured authorizer.
    Forbidden,
    /// 503: the store did not confirm in time, or throttled; retry with
    /// the same key.
    Unavailable,
    /// 500: a deployment or data problem retrying will not fix.
    Internal,
    /// 500: the request was processed (its effect counts), but its
    /// response was too large to store for its key: the key is completed
    /// with this problem, which every repeat gets too (the service does
    /// not run again for the key until it expires).
    ResponseTooLarge,
}

impl ProblemKind {
    /// Every kind, for a table of them.
    pub const ALL: [ProblemKind; 7] = [
        ProblemKind::InvalidIdempotencyKey,
        ProblemKind::KeyReused,
        ProblemKind::RequestInProgress,
        ProblemKind::Forbidden,
        ProblemKind::Unavailable,
        ProblemKind::Internal,
        ProblemKind::ResponseTooLarge,
    ];

    /// (status, slug, title).
    pub fn describe(self) -> (u16, &'static str, &'static str) {
        match self {
            ProblemKind::InvalidIdempotencyKey => (
                400,
                "invalid-idempotency-key",
                "The Idempotency-Key header is missing or malformed",
            ),
            ProblemKind::KeyReused => (
                422,
                "idempotency-key-reused",
                "The Idempotency-Key was already used with a different request",
            ),
            ProblemKind::RequestInProgress => (
                409,
                "request-in-progress",
                "A request with this Idempotency-Key is still being processed",
            ),
            ProblemKind::Forbidden => (403, "forbidden", "The caller could not be identified"),
            ProblemKind::Unavailable => (
                503,
                "service-unavailable",
                "The request could not be completed now; retry with the same Idempotency-Key",
            ),
            ProblemKind::Internal => (500, "internal-error", "The request could not be processed"),
            ProblemKind::ResponseTooLarge => (
                500,
                "response-too-large",
                "The request was processed, but its response is too large to keep for its Idempotency-Key",
            ),
        }
    }

    /// This problem, its `type` being `prefix` followed by its slug.
    pub fn with(self, prefix: &str, detail: impl Into<String>) -> Problem {
        let (status, slug, title) = self.describe();
        Problem::new(format!("{prefix}{slug}"), status, title, detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_their_status_and_retry() {
        let p = ProblemKind::RequestInProgress
            .with("urn:x:", "wait")
            .retry_after(0);
        assert_eq!((p.status, p.retry_after), (409, Some(1)));
        let r = p.into_response();
        assert_eq!(r.status(), 409);
        assert_eq!(r.headers()[CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(r.headers()[RETRY_AFTER], "1");
        let Body::Text(body) = r.body() else {
            panic!("a text body");
        };
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "urn:x:request-in-progress",
                "title": "A request with this Idempotency-Key is still being processed",
                "status": 409, "detail": "wait"})
        );
        // Each kind its own status and type.
        let statuses: Vec<u16> = ProblemKind::ALL.iter().map(|k| k.describe().0).collect();
        assert_eq!(statuses, [400, 422, 409, 403, 503, 500, 500]);
        let slugs: std::collections::HashSet<_> =
            ProblemKind::ALL.iter().map(|k| k.describe().1).collect();
        assert_eq!(slugs.len(), ProblemKind::ALL.len());
        let r = ProblemKind::Internal
            .with(DEFAULT_PROBLEM_PREFIX, "x")
            .into_response();
        assert!(r.headers().get(RETRY_AFTER).is_none());
    }
}
