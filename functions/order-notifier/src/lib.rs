//! The order notifier: customer notifications from the orders table's
//! DynamoDB stream, exactly once in effect.
//!
//! The stream is the outbox: a status change and its stream record commit
//! together, so the order consumer's hot path gets no extra write. For each
//! transition into PLACED, SHIPPED or CANCELLED the notifier
//! 1. claims `{orderId}#{template}` in the notifications table (a
//!    conditional write with a lease long enough for the claim and the
//!    whole webhook request after it, within the invocation; a claim
//!    refused against itself, after a lost answer, is still its own);
//! 2. POSTs the webhook with `Idempotency-Key: order-{orderId}-{template}`,
//!    only if the lease and the invocation's time left cover the whole
//!    request from the moment the claim is confirmed;
//! 3. records SENT (or REJECTED) if the claim is still its own.
//!
//! A crash between 2 and 3 leaves a SENDING record whose lease expires; the
//! retry sends again under the same key and the provider deduplicates. The
//! table makes retries cheap and visible; the key makes them harmless.
//!
//! A stream record that can never be read (a malformed image, an unknown
//! status, no order id) is recorded in the same table under its own eventID
//! (`UNREADABLE`, with the reason), counted as `Unreadable` and acknowledged:
//! retrying it could never succeed and would hold every later record of its
//! shard until it aged out. Only if that write fails is it retried.
//!
//! - [`event`]: the contract, a stream record read into a [`domain::Change`].
//! - [`domain`]: which changes notify, outcomes, reading a refused claim.
//! - [`store`]: the notifications table.
//! - [`webhook`]: the provider client (reqwest, rustls, timeouts, no
//!   redirects) and what each HTTP status means.
//! - [`url`]: which webhook URLs are accepted, and reading the URL from its
//!   SSM SecureString parameter at cold start.
//! - [`NotifierHandler`] (here): the [`Handler`] the shared batch machinery runs
//!   (stream records are strictly ordered per order); [`NotifierFunction`]:
//!   the Lambda function, reporting failed records by SequenceNumber.

// Logs go through `tracing`; the one stdout writer is the EMF line.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod domain;
pub mod event;
pub mod store;
pub mod url;
pub mod webhook;

/// Test support as library code (feature `testing`, for the tests and the
/// benchmark).
#[cfg(feature = "testing")]
pub mod testing;

use std::time::Duration;

use aws_lambda_events::event::dynamodb::EventRecord;
use tokio::time::Instant;
use tracing::{Span, field};

use self::url::{WebhookSource, WebhookUrl};
use domain::{
    ClaimRefusal, LeasePolicy, NotifyError, NotifyOutcome, TooLate, Unreadable,
    classify_claim_refusal, notification_for,
};
use event::Read;
use lambda_idempotency::config::{ConfigError, Settings, parse_in, required};
use lambda_idempotency::time::{epoch_ms, unique_id};
use lambda_idempotency::wire::ParseError;
use lambda_idempotency::{BatchContext, Handler};
use lambda_idempotency::{BuildError, Function};
use orders::domain::Status;
use store::{Claim, Finish, NotificationStore};
use webhook::{Delivery, REFUSAL_REASON, Webhook};

/// On top of the claim's and the POST's own bounds: other invocations
/// read the lease with their own clocks, and the POST starts a moment after
/// the check ([`LeasePolicy::margin`]).
pub const LEASE_MARGIN: Duration = Duration::from_secs(1);

/// The notifier's record handling.
#[derive(Debug)]
pub struct NotifierHandler {
    store: NotificationStore,
    webhook: Webhook,
    lease: LeasePolicy,
}

impl NotifierHandler {
    /// The handler on `client`, over the table `config` names, posting to
    /// `webhook_url` (the configured literal, or what the bootstrap read
    /// from SSM).
    pub fn from_config(
        client: aws_sdk_dynamodb::Client,
        config: &NotifierConfig,
        webhook_url: &WebhookUrl,
    ) -> Result<Self, reqwest::Error> {
        let webhook = Webhook::new(webhook_url, config.webhook_timeout)?;
        let store = NotificationStore::new(client, &config.notifications_table);
        Ok(NotifierHandler::new(store, webhook))
    }

    pub fn new(store: NotificationStore, webhook: Webhook) -> Self {
        let lease = LeasePolicy {
            // The longest the claim's UpdateItem may take: the SDK's
            // operation timeout, the clients' one policy.
            claim: lambda_idempotency::dynamo::timeout_config()
                .operation_timeout()
                .unwrap_or(Duration::from_secs(5)),
            post: webhook.timeout(),
            margin: LEASE_MARGIN,
        };
        NotifierHandler {
            store,
            webhook,
            lease,
        }
    }

    /// Time left before the batch cuts this record off.
    fn left(cx: &BatchContext) -> Duration {
        cx.cutoff().saturating_duration_since(Instant::now())
    }
}

impl Handler<EventRecord> for NotifierHandler {
    type Event = Read;
    type Verdict = NotifyOutcome;
    type Failure = NotifyError;

    /// An unreadable record is not a parse error here but an event of its
    /// own ([`Read::Unreadable`]), applied by recording it: the batch would
    /// otherwise report it failed, and Lambda would retry the shard from it
    /// for a day.
    fn parse(&self, record: &EventRecord) -> Result<Read, ParseError> {
        event::read_record(record)
    }

    /// The order (the batch groups stream records by their item key
    /// anyway); a record without one is a group of its own.
    fn key(&self, read: &Read) -> String {
        match read {
            Read::Change(c) => c.order_id.clone(),
            Read::Unreadable(u) => u.order_id.clone().unwrap_or_else(|| u.id().to_owned()),
        }
    }

    /// Stream records keep their order; no rank is needed.
    fn rank(&self, _read: &Read) -> u64 {
        0
    }

    fn span(&self, record_id: &str, read: Option<&Read>) -> Span {
        let change = match read {
            Some(Read::Change(c)) => Some(c),
            _ => None,
        };
        tracing::info_span!(
            "record",
            sequence_number = record_id,
            order_id = read.and_then(Read::order_id),
            old_status = change.and_then(|c| c.old_status).map(Status::as_str),
            new_status = change.and_then(|c| c.new_status).map(Status::as_str),
            outcome = field::Empty,
        )
    }

    /// A change that notifies nobody costs nothing, not even time.
    fn settle_without_io(&self, read: &Read, _cx: &BatchContext) -> Option<NotifyOutcome> {
        match read {
            Read::Change(change) => notification_for(change)
                .is_none()
                .then_some(NotifyOutcome::NothingToSend),
            Read::Unreadable(_) => None,
        }
    }

    /// One record's verdict, or what kept it from one (the table, the
    /// provider, or too little time left: [`NotifyError`]).
    async fn apply(&self, read: &Read, cx: &BatchContext) -> Result<NotifyOutcome, NotifyError> {
        let change = match read {
            Read::Change(change) => change,
            Read::Unreadable(u) => return self.record_unreadable(u).await,
        };
        let Some(n) = notification_for(change) else {
            return Ok(NotifyOutcome::NothingToSend);
        };
        let now = epoch_ms();
        // The lease must cover the POST from the moment the claim is
        // confirmed, and the claim alone may take seconds: it allows for
        // both, within this invocation's time (the batch cuts the record
        // off at `cutoff`). Short otherwise, so that a retry after a crash
        // waits seconds, not the rest of the invocation's time; if this
        // attempt is merely slow, a takeover sends under the same key and
        // the provider keeps one.
        let lease_until = self.lease.lease_until(now, Self::left(cx));
        let claim = unique_id();
        match self.store.claim(&n, &claim, lease_until, now).await {
            Ok(Claim::Granted) => {}
            Ok(Claim::Refused(stored)) => {
                match classify_claim_refusal(stored.as_ref(), &claim, now)? {
                    // The SDK re-sent a claim that had committed: it is ours.
                    ClaimRefusal::Ours => {}
                    ClaimRefusal::Settled(outcome) => return Ok(outcome),
                }
            }
            Err(e) => {
                // The claim may have committed unseen (its answer lost on
                // every try): give it back (only if it is ours), so that
                // the retry is not Busy against it until the lease ends.
                if let Err(release) = self.store.release(&n, &claim).await {
                    tracing::warn!(error = %release, "could not release the claim; its lease will expire");
                }
                return Err(NotifyError::Store(e));
            }
        }
        // Confirmed now: a POST that its lease or the invocation could not
        // cover to its end is not started (another attempt could take the
        // claim over and send while it runs, or the cutoff cancel it
        // half-sent). The claim goes back, so the retry need not wait.
        if let Err(late) = self.lease.may_post(epoch_ms(), Self::left(cx), lease_until) {
            if let Err(e) = self.store.release(&n, &claim).await {
                tracing::warn!(error = %e, "could not release the claim; its lease will expire");
            }
            // Too close to the deadline is reported NotAttempted (see
            // `NotifyError::not_attempted`), as a record the batch did not
            // start.
            return Err(match late {
                TooLate::Deadline => NotifyError::DeadlineTooClose,
                TooLate::Lease => NotifyError::LeaseTooShort,
            });
        }
        let (finish, outcome) = match self.webhook.post(&n).await {
            Delivery::Accepted(code) => (Finish::Sent { http_status: code }, NotifyOutcome::Sent),
            Delivery::Refused(code) => (
                Finish::Rejected {
                    http_status: code,
                    reason: REFUSAL_REASON,
                },
                NotifyOutcome::Rejected { status: code },
            ),
            failed => {
                if let Err(e) = self.store.release(&n, &claim).await {
                    tracing::warn!(error = %e, "could not release the claim; its lease will expire");
                }
                return Err(match failed {
                    Delivery::Retry(status) if webhook::is_configuration_problem(status) => {
                        NotifyError::Misconfigured { status }
                    }
                    Delivery::Retry(status) => NotifyError::Provider { status },
                    _ => NotifyError::ProviderUnreachable,
                });
            }
        };
        match self.store.finish(&n, &claim, finish, epoch_ms()).await {
            Ok(true) => Ok(outcome),
            Ok(false) => {
                // Our lease expired and another attempt took over; it sends
                // under the same key, which the provider deduplicates.
                tracing::warn!(
                    "claim taken over before it was recorded; the provider deduplicates"
                );
                Ok(outcome)
            }
            // Delivered but not recorded: give the claim back (best effort),
            // so the retry sends again under the same key without waiting
            // for the lease.
            Err(e) => {
                if let Err(release) = self.store.release(&n, &claim).await {
                    tracing::warn!(error = %release, "could not release the claim; its lease will expire");
                }
                Err(NotifyError::Store(e))
            }
        }
    }
}

impl NotifierHandler {
    /// Record an unreadable record once; acknowledged only when it is
    /// recorded (now or by an earlier delivery).
    async fn record_unreadable(&self, u: &Unreadable) -> Result<NotifyOutcome, NotifyError> {
        Ok(if self.store.record_unreadable(u, epoch_ms()).await? {
            NotifyOutcome::Unreadable(u.error.clone())
        } else {
            NotifyOutcome::AlreadyUnreadable(u.error.clone())
        })
    }
}

/// The notifier's configuration, read once per cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifierConfig {
    /// `NOTIFICATIONS_TABLE` (required): hash key `notification_id`.
    pub notifications_table: String,
    /// `NOTIFY_WEBHOOK_URL_PARAMETER` (in AWS: the name of the SSM
    /// SecureString parameter holding the provider's endpoint, read at cold
    /// start by [`url::webhook_url`]) or `NOTIFY_WEBHOOK_URL` (a literal, for
    /// local runs and tests): exactly one. `https://`, or `http://` to a
    /// loopback host.
    pub webhook: WebhookSource,
    /// `NOTIFY_TIMEOUT_MS` (default 3000, 100..=30000): one webhook request.
    pub webhook_timeout: Duration,
    /// `MAX_CONCURRENCY` (orders notified concurrently),
    /// `DEADLINE_MARGIN_MS`, `METRICS_NAMESPACE` (default `OrderNotifier`).
    pub runtime: Settings,
}

impl NotifierConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(NotifierConfig {
            notifications_table: required(&get, "NOTIFICATIONS_TABLE")?,
            webhook: WebhookSource::from_lookup(&get)?,
            webhook_timeout: Duration::from_millis(parse_in(
                &get,
                "NOTIFY_TIMEOUT_MS",
                3_000,
                100..=30_000,
            )?),
            runtime: Settings::from_lookup(&get, "OrderNotifier", "order-notifier")?,
        })
    }
}

/// The function's name in its invocation errors (`OrderNotifier.<case>`).
pub const NAME: &str = "OrderNotifier";

/// Why the notifier could not be built: its webhook client, or the
/// function itself.
#[derive(Debug, thiserror::Error)]
pub enum NotifierBuildError {
    /// The webhook client (reqwest's error may name the URL: strip it with
    /// `without_url` before logging).
    #[error(transparent)]
    Webhook(#[from] reqwest::Error),
    /// The function's settings.
    #[error(transparent)]
    Function(#[from] BuildError),
}

/// The `order-notifier` function: built once per cold start. Failed
/// records are reported by their SequenceNumber (Lambda retries the shard
/// from the lowest one); invocation errors are `OrderNotifier.<case>`.
pub type NotifierFunction = Function<NotifierHandler>;

/// The `order-notifier` function. `webhook_url`: the configured literal,
/// or what the bootstrap read from SSM ([`url::webhook_url`]).
pub fn function(
    client: aws_sdk_dynamodb::Client,
    config: NotifierConfig,
    webhook_url: &WebhookUrl,
) -> Result<NotifierFunction, NotifierBuildError> {
    let handler = NotifierHandler::from_config(client, &config, webhook_url)?;
    Ok(Function::builder(handler)
        .name(NAME)
        .settings(config.runtime)
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> Result<NotifierConfig, ConfigError> {
        NotifierConfig::from_lookup(|k| match k {
            "NOTIFICATIONS_TABLE" => Some("notifications".into()),
            "NOTIFY_WEBHOOK_URL" => Some(url.into()),
            _ => None,
        })
    }

    /// The old prefix check let `https://exa mple` through to fail on every
    /// POST; and `http://` anywhere sent the token in clear.
    #[test]
    fn the_webhook_url_is_checked_at_cold_start() {
        assert!(config("https://hooks.example.com/n?token=t").is_ok());
        assert!(config("http://127.0.0.1:8080/n").is_ok());
        for bad in [
            "https://exa mple/n?token=SECRET",
            "http://hooks.example.com/n?token=SECRET",
        ] {
            let e = config(bad).expect_err(bad);
            assert!(
                matches!(
                    e,
                    ConfigError::Invalid {
                        var: "NOTIFY_WEBHOOK_URL",
                        ..
                    }
                ),
                "{e:?}"
            );
            assert!(!e.to_string().contains("SECRET"), "{e}");
        }
    }
}
