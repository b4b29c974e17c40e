//! A charge, once per payment: `charge` asks a payment provider to take
//! an amount, and [`Idempotent`] makes it run once per `payment_id`, on a
//! DynamoDB table. A repeat returns the first receipt; the same id with
//! another amount is refused; a failed charge gives the id back.

use std::time::Duration;

use lambda_idempotency::lambda_runtime::{Diagnostic, LambdaEvent};
use lambda_idempotency::time::epoch_ms;
use lambda_idempotency::{ConfigError, IdempotencyStore, Idempotent};
use serde::{Deserialize, Serialize};

/// The function's name: the prefix of its keys in a shared table.
pub const NAME: &str = "charge";

/// The invocation's input.
#[derive(Debug, Serialize, Deserialize)]
pub struct Charge {
    /// The caller's id for this payment: the idempotency key.
    pub payment_id: String,
    /// Minor units.
    pub amount: u64,
}

/// The output, stored and replayed.
#[derive(Debug, Serialize, Deserialize)]
pub struct Receipt {
    /// The payment charged.
    pub payment_id: String,
    /// What was taken.
    pub amount: u64,
    /// When the provider took it (epoch ms): a replay shows the first.
    pub charged_at_ms: u64,
}

/// Why the provider did not charge. Never names the payment.
#[derive(Debug)]
pub enum ChargeError {
    /// No answer (connection, timeout).
    Unreachable,
    /// The provider answered with this status.
    Refused(u16),
}

impl std::fmt::Display for ChargeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChargeError::Unreachable => f.write_str("the payment provider did not answer"),
            ChargeError::Refused(s) => write!(f, "the payment provider refused with {s}"),
        }
    }
}

/// The payment provider's client.
#[derive(Clone)]
pub struct Provider {
    http: reqwest::Client,
    url: String,
}

impl Provider {
    /// The provider at `url`.
    pub fn new(url: String) -> Result<Self, ConfigError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|_| ConfigError::Invalid {
                var: "PROVIDER_URL",
                reason: "no HTTP client could be built".into(),
            })?;
        Ok(Provider { http, url })
    }

    /// The effect: one charge. The provider's own Idempotency-Key too, so
    /// that a resend within this call is not a second charge.
    pub async fn charge(&self, c: Charge) -> Result<Receipt, ChargeError> {
        let body = format!(r#"{{"amount":{}}}"#, c.amount);
        let sent = self
            .http
            .post(&self.url)
            .header("idempotency-key", &c.payment_id);
        let r = sent
            .body(body)
            .send()
            .await
            .map_err(|_| ChargeError::Unreachable)?;
        if !r.status().is_success() {
            return Err(ChargeError::Refused(r.status().as_u16()));
        }
        Ok(Receipt {
            payment_id: c.payment_id,
            amount: c.amount,
            charged_at_ms: epoch_ms(),
        })
    }
}

/// `charge` once per `payment_id`; a repeat must have the same amount.
pub fn idempotent_charge(
    store: IdempotencyStore,
) -> Result<Idempotent<Charge, Receipt>, ConfigError> {
    Ok(Idempotent::new(store, NAME)?
        .key(|c: &Charge| Some(c.payment_id.clone()))
        .payload(|c: &Charge| serde_json::json!({ "amount": c.amount })))
}

/// One invocation: the lease of its key ends at the invocation's deadline
/// (`Lambda-Runtime-Deadline-Ms`), so a crashed call holds it no longer.
/// An error is Lambda's `errorType` `IdempotencyError.{variant}`, which a
/// caller can match on.
pub async fn handle(
    charge: &Idempotent<Charge, Receipt>,
    provider: &Provider,
    event: LambdaEvent<Charge>,
) -> Result<Receipt, Diagnostic> {
    Ok(charge
        .call(event.payload, &event.context, |c| provider.charge(c))
        .await?)
}
