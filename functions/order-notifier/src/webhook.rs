//! The notification provider: an HTTPS webhook that deduplicates by the
//! `Idempotency-Key` header, the way Stripe-style APIs do.

use std::time::Duration;

use tracing::Instrument;

use crate::domain::Notification;
use crate::url::WebhookUrl;

/// What the provider said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// 2xx: accepted (now, or earlier under the same key).
    Accepted(u16),
    /// 422: the provider understood this notification and refuses it for
    /// good (e.g. "this customer cannot be notified"). Recorded REJECTED
    /// with the status and [`REFUSAL_REASON`], counted and alarmed on.
    Refused(u16),
    /// Every other answer: the notification must survive until it is
    /// delivered (see [`Delivery::of_status`] for which of these page
    /// someone).
    Retry(u16),
    /// No answer within the timeout, or no connection.
    Unreachable,
}

/// What the notifications table records for a [`Delivery::Refused`]: fixed
/// text, never the provider's body or any payload value.
pub const REFUSAL_REASON: &str =
    "the provider refused this notification as unprocessable (HTTP 422); it will not be resent";

impl Delivery {
    /// The mapping from the provider's status to what happens to the
    /// notification. The question per status is "is this about *this
    /// notification*, or about us?":
    /// - 2xx: delivered.
    /// - 422 only: the provider parsed the request and refuses this
    ///   particular notification (an unreachable customer, an opted-out
    ///   address). Retrying cannot help, so it is permanent - but recorded
    ///   REJECTED durably, counted (`Rejected`) and alarmed on, never
    ///   dropped silently.
    /// - 5xx, 408, 425 (timing), 409 (a request with the same key is in
    ///   flight), 429 (slow down): transient; retried.
    /// - 3xx (redirects are not followed: a 301/302/303 would turn the POST
    ///   into a body-less GET, and could point anywhere, loopback included),
    ///   and every other 4xx - 400, 405, 410, 413, 415 (the request's shape,
    ///   method, endpoint or size no longer matches the provider's
    ///   contract), 401, 403, 404 (credentials, URL): a configuration or
    ///   contract problem that would refuse *every* notification. Treating
    ///   it as permanent would drop all of them on a provider's schema
    ///   change, so it is retried (the records stay on the stream, the
    ///   invocation fails when all fail, IteratorAge grows) and logged at
    ///   ERROR ([`is_configuration_problem`]) so it pages someone.
    pub fn of_status(status: u16) -> Delivery {
        match status {
            200..=299 => Delivery::Accepted(status),
            422 => Delivery::Refused(status),
            _ => Delivery::Retry(status),
        }
    }
}

/// A retried status that an operator must fix (not the provider's
/// transient trouble): redirects and the 4xx other than 408, 409, 422, 425
/// and 429.
pub fn is_configuration_problem(status: u16) -> bool {
    matches!(status, 300..=499) && !matches!(status, 408 | 409 | 422 | 425 | 429)
}

/// A webhook client, built once per cold start (it holds a connection pool).
/// Its `Debug` shows no URL ([`WebhookUrl`]).
#[derive(Debug, Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: WebhookUrl,
    timeout: Duration,
}

impl Webhook {
    /// `timeout` bounds each request end to end; connecting gets at most 1 s
    /// of it. Both stay well inside an invocation.
    pub fn new(url: &WebhookUrl, timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(1)))
            .timeout(timeout)
            // reqwest follows up to 10 redirects by default, turning a
            // POST into a GET without a body on 301/302/303 and classifying
            // whatever the last hop answers. A 3xx is the answer here
            // (retried, ERROR: the URL needs fixing).
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Webhook {
            client,
            url: url.clone(),
            timeout,
        })
    }

    /// The bound on one request, end to end.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// POST the notification, inside a `webhook.post` span: reqwest opens
    /// none, and a trace (feature `otel`) should show the call and its
    /// status like the SDK's calls. The span carries no URL (it holds the
    /// provider's token). Nothing is logged inside it, so the log lines
    /// are the same with or without it.
    pub async fn post(&self, n: &Notification) -> Delivery {
        let span = tracing::info_span!(
            "webhook.post",
            otel.kind = "client",
            http.request.method = "POST",
            http.response.status_code = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
        );
        let result = self
            .client
            .post(self.url.as_url().clone())
            .header("Idempotency-Key", n.idempotency_key())
            .header("Content-Type", "application/json")
            .body(n.body().to_string())
            .send()
            .instrument(span.clone())
            .await;
        match result {
            Ok(response) => {
                let status = response.status().as_u16();
                span.record("http.response.status_code", status);
                Delivery::of_status(status)
            }
            Err(e) => {
                let kind = if e.is_timeout() {
                    "timeout"
                } else if e.is_connect() {
                    "connect"
                } else {
                    "request"
                };
                span.record("error.type", kind);
                // reqwest's errors name the URL, which carries the
                // provider's token: never log it.
                tracing::warn!(error = %e.without_url(), "webhook request failed");
                Delivery::Unreachable
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_422_is_permanent_and_every_other_refusal_is_retried() {
        assert_eq!(Delivery::of_status(200), Delivery::Accepted(200));
        assert_eq!(Delivery::of_status(202), Delivery::Accepted(202));
        assert_eq!(Delivery::of_status(422), Delivery::Refused(422));
        // Contract and configuration problems: retried, and they page.
        for contract in [
            301, 302, 303, 307, 308, 400, 401, 403, 404, 405, 410, 413, 415, 418,
        ] {
            assert_eq!(Delivery::of_status(contract), Delivery::Retry(contract));
            assert!(is_configuration_problem(contract), "{contract}");
        }
        // The provider's own trouble: retried quietly.
        for transient in [408, 409, 425, 429, 500, 502, 503] {
            assert_eq!(Delivery::of_status(transient), Delivery::Retry(transient));
            assert!(!is_configuration_problem(transient), "{transient}");
        }
        assert!(!is_configuration_problem(422));
        assert!(!is_configuration_problem(200));
    }
}
