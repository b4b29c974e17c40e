//! Any response body under the layer: [`CollectBody`] wraps a service whose
//! response body is any `http_body::Body` (an axum `Router`'s, a `Full`, a
//! stream) and answers `lambda_http`'s `Body`, the body collected into
//! memory up to a limit, so the layer can store it and `lambda_http` can
//! send it.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use lambda_http::tower::Service;
use lambda_http::{Body, IntoResponse, Request, Response};

use super::problem::{DEFAULT_PROBLEM_PREFIX, ProblemKind};
use super::stored::is_stored;

/// The largest response body stored unless configured
/// ([`IdempotencyLayer::max_response_bytes`](super::IdempotencyLayer::max_response_bytes)):
/// DynamoDB's item limit, 400 KB; a larger body could never be stored.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 400 * 1024;

/// The largest body collected for a request the layer lets through
/// without a key (a `GET`): Lambda's limit for a buffered response, 6 MB;
/// a larger one could not be sent anyway.
pub const MAX_PASS_THROUGH_BYTES: usize = 6 * 1024 * 1024;

/// The error of a body stream, boxed (tower's `BoxError`).
type BoxError = Box<dyn StdError + Send + Sync>;

/// Put in a request's extensions by the layer when it holds the request's
/// key: the answer will be stored, so [`CollectBody`] reads it up to the
/// store's limit rather than [`MAX_PASS_THROUGH_BYTES`]. A marker of this
/// module's own, so that the body module needs nothing from the layer's.
#[derive(Debug, Clone, Copy)]
pub(super) struct WillBeStored;

/// On a response [`CollectBody`] made itself because the inner service's
/// body could not be collected: the layer must neither store it nor give
/// the key back (the service ran: its effect may be committed), and
/// answers with its own problem instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Uncollected {
    /// Longer than the limit.
    TooLarge,
    /// The body stream failed.
    Failed,
}

impl Uncollected {
    /// What the client is told: what went wrong, never the body.
    pub(super) fn detail(self) -> &'static str {
        match self {
            Uncollected::TooLarge => {
                "the response is larger than this API can store for its Idempotency-Key"
            }
            Uncollected::Failed => "the response body could not be read",
        }
    }
}

/// A service whose responses have any `http_body::Body` (an axum
/// `Router`, a `tower-http` stack), answering `Response<lambda_http::Body>`:
/// what [`IdempotencyLayer`](super::IdempotencyLayer) wraps and what
/// `lambda_http::run` runs. Built by
/// [`IdempotencyLayer::collecting`](super::IdempotencyLayer::collecting)
/// with the layer's limit, or [`CollectBody::new`].
///
/// A body is collected up to `limit` bytes for a request with a claimed
/// key whose status is one the layer stores, and up to
/// [`MAX_PASS_THROUGH_BYTES`] for any other (a 5xx, 429 or 408 is given
/// back, not stored, whatever its length); then it is text or binary by the same rules as
/// `lambda_http::run` applies (its content type and encoding), so a
/// wrapped router answers exactly as it would unwrapped. Past the limit the
/// stream is not read further: the answer is a 500 problem.
#[derive(Clone)]
pub struct CollectBody<S> {
    inner: S,
    limit: usize,
}

impl<S: fmt::Debug> fmt::Debug for CollectBody<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CollectBody")
            .field("inner", &self.inner)
            .field("limit", &self.limit)
            .finish()
    }
}

impl<S> CollectBody<S> {
    /// `inner`, its bodies collected up to `limit` bytes when stored.
    pub fn new(inner: S, limit: usize) -> Self {
        CollectBody { inner, limit }
    }
}

impl<S, B> Service<Request> for CollectBody<S>
where
    S: Service<Request, Response = Response<B>>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // Only a claimed key's answer is stored (the layer marks the request
        // before calling its inner service), and only with a status that is
        // stored: a 5xx over the limit is given back like any other 5xx.
        let claimed = req.extensions().get::<WillBeStored>().is_some();
        let store_limit = self.limit;
        let call = self.inner.call(req);
        Box::pin(async move {
            let (parts, body) = call.await?.into_parts();
            let limit = if claimed && is_stored(parts.status) {
                store_limit
            } else {
                MAX_PASS_THROUGH_BYTES
            };
            // `Limited` stops reading at the limit: the buffer never holds
            // more than `limit` bytes.
            let bytes = match Limited::new(body, limit).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(e) => {
                    let why = if e.downcast_ref::<LengthLimitError>().is_some() {
                        Uncollected::TooLarge
                    } else {
                        Uncollected::Failed
                    };
                    // Which limit, not the body.
                    tracing::error!(limit, error = %e, "the response body was not collected");
                    let mut r = ProblemKind::Internal
                        .with(DEFAULT_PROBLEM_PREFIX, why.detail())
                        .into_response();
                    r.extensions_mut().insert(why);
                    return Ok(r);
                }
            };
            // lambda_http's own conversion (text or binary by the headers),
            // on a body that is already in memory: it cannot fail.
            Ok(Response::from_parts(parts, Full::new(bytes))
                .into_response()
                .await)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::tower::{ServiceExt, service_fn};

    fn service(
        body: &'static [u8],
        content_type: &'static str,
    ) -> impl Service<
        Request,
        Response = Response<Full<&'static [u8]>>,
        Error = lambda_http::Error,
        Future = impl Send + 'static,
    > + Clone {
        service_fn(move |_req: Request| async move {
            Ok::<_, lambda_http::Error>(
                Response::builder()
                    .header("content-type", content_type)
                    .body(Full::new(body))?,
            )
        })
    }

    #[tokio::test]
    async fn a_body_is_text_or_binary_as_lambda_http_decides() {
        let r = CollectBody::new(service(b"{\"a\":1}", "application/json"), 64)
            .oneshot(Request::default())
            .await
            .expect("answers");
        assert_eq!(r.body(), &Body::Text("{\"a\":1}".into()));
        let r = CollectBody::new(service(&[0, 159, 255], "image/png"), 64)
            .oneshot(Request::default())
            .await
            .expect("answers");
        assert_eq!(r.body(), &Body::Binary(vec![0, 159, 255]));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_a_problem_marked_uncollected() {
        // Without a claim the pass-through limit applies: 9 bytes pass.
        let svc = CollectBody::new(service(b"123456789", "text/plain"), 8);
        let r = svc
            .clone()
            .oneshot(Request::default())
            .await
            .expect("answers");
        assert_eq!(r.body(), &Body::Text("123456789".into()));
        assert!(r.extensions().get::<Uncollected>().is_none());
        // Marked by the layer (its answer will be stored): the store's limit.
        let marked = || {
            let mut marked = Request::default();
            marked.extensions_mut().insert(WillBeStored);
            marked
        };
        let r = svc.clone().oneshot(marked()).await.expect("answers");
        assert_eq!(r.status(), 500);
        assert_eq!(
            r.extensions().get::<Uncollected>(),
            Some(&Uncollected::TooLarge)
        );
        // A status that is given back, not stored: the pass-through limit.
        let unavailable = service_fn(|_req: Request| async {
            Ok::<_, lambda_http::Error>(
                Response::builder()
                    .status(503)
                    .header("content-type", "text/plain")
                    .body(Full::new(&b"123456789"[..]))?,
            )
        });
        let r = CollectBody::new(unavailable, 8)
            .oneshot(marked())
            .await
            .expect("answers");
        assert_eq!(
            (r.status().as_u16(), r.body()),
            (503, &Body::Text("123456789".into()))
        );
        assert!(r.extensions().get::<Uncollected>().is_none());
        // Over MAX_PASS_THROUGH_BYTES.
        let big: &'static [u8] = Vec::leak(vec![b'a'; MAX_PASS_THROUGH_BYTES + 1]);
        let r = CollectBody::new(service(big, "text/plain"), 8)
            .oneshot(Request::default())
            .await
            .expect("answers");
        assert_eq!(r.status(), 500);
        assert_eq!(
            r.extensions().get::<Uncollected>(),
            Some(&Uncollected::TooLarge)
        );
        assert_eq!(
            r.headers()["content-type"],
            super::super::problem::PROBLEM_JSON
        );
    }

    /// A body whose stream fails at once.
    struct Broken;

    impl http_body::Body for Broken {
        type Data = &'static [u8];
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            Poll::Ready(Some(Err(std::io::Error::other("the stream broke"))))
        }
    }

    #[tokio::test]
    async fn a_body_that_fails_is_a_problem_that_does_not_echo_it() {
        let svc = service_fn(|_req: Request| async {
            Ok::<_, lambda_http::Error>(Response::new(Broken))
        });
        let r = CollectBody::new(svc, 64)
            .oneshot(Request::default())
            .await
            .expect("answers");
        assert_eq!(r.status(), 500);
        assert_eq!(
            r.extensions().get::<Uncollected>(),
            Some(&Uncollected::Failed)
        );
        let Body::Text(text) = r.body() else {
            panic!("a problem body");
        };
        assert!(
            text.contains("could not be read") && !text.contains("broke"),
            "{text}"
        );
    }
}
