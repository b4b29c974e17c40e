//! The notification provider: an HTTPS webhook that deduplicates by the
//! `Idempotency-Key` header, the way Stripe-style APIs do.

use std::time::Duration;

use crate::notifier::domain::Notification;

/// What the provider said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// 2xx: accepted (now, or earlier under the same key).
    Accepted(u16),
    /// A 4xx that says this request is wrong (400, 422, ...): it will never
    /// be accepted.
    Refused(u16),
    /// 5xx, 429 (slow down), 409 (the same key is being processed), 408 and
    /// 425 (timing), and 401/403/404: those say our credentials or URL are
    /// wrong, not the notification, so it must survive until they are fixed
    /// (it reaches the failure destination after the retries) rather than
    /// be recorded as refused.
    Retry(u16),
    /// No answer within the timeout, or no connection.
    Unreachable,
}

impl Delivery {
    pub fn of_status(status: u16) -> Delivery {
        match status {
            200..=299 => Delivery::Accepted(status),
            401 | 403 | 404 | 408 | 409 | 425 | 429 => Delivery::Retry(status),
            400..=499 => Delivery::Refused(status),
            _ => Delivery::Retry(status),
        }
    }
}

/// A webhook client, built once per cold start (it holds a connection pool).
#[derive(Debug, Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: String,
    timeout: Duration,
}

impl Webhook {
    /// `timeout` bounds each request end to end; connecting gets at most 1 s
    /// of it. Both stay well inside an invocation.
    pub fn new(url: impl Into<String>, timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(1)))
            .timeout(timeout)
            .build()?;
        Ok(Webhook {
            client,
            url: url.into(),
            timeout,
        })
    }

    /// The bound on one request, end to end.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub async fn post(&self, n: &Notification) -> Delivery {
        let result = self
            .client
            .post(&self.url)
            .header("Idempotency-Key", n.idempotency_key())
            .header("Content-Type", "application/json")
            .body(n.body().to_string())
            .send()
            .await;
        match result {
            Ok(response) => Delivery::of_status(response.status().as_u16()),
            Err(e) => {
                tracing::debug!(error = %e, "webhook request failed");
                Delivery::Unreachable
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_like_a_stripe_style_api() {
        assert_eq!(Delivery::of_status(200), Delivery::Accepted(200));
        assert_eq!(Delivery::of_status(202), Delivery::Accepted(202));
        assert_eq!(Delivery::of_status(400), Delivery::Refused(400));
        assert_eq!(Delivery::of_status(422), Delivery::Refused(422));
        assert_eq!(Delivery::of_status(409), Delivery::Retry(409));
        for auth_or_url in [401, 403, 404, 408, 425] {
            assert_eq!(
                Delivery::of_status(auth_or_url),
                Delivery::Retry(auth_or_url)
            );
        }
        assert_eq!(Delivery::of_status(429), Delivery::Retry(429));
        assert_eq!(Delivery::of_status(500), Delivery::Retry(500));
        assert_eq!(Delivery::of_status(503), Delivery::Retry(503));
    }
}
