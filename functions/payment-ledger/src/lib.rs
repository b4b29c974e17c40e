//! The payment ledger: a transactional inbox on DynamoDB.
//!
//! "Add 500 to the balance" is not idempotent, and no condition on the
//! account alone can tell a redelivery from a second payment of the same
//! amount. So the processed key (the ledger entry, `pay:{paymentId}` or
//! `refund:{refundId}`) and the effect (the balance) are written in **one
//! TransactWriteItems**: the entry can be created only once, and the balance
//! moves only if it is.
//!
//! An event that can never be posted (a refund beyond what is left of its
//! capture, a capture in another currency than its account's) still
//! describes money that moved at the provider. It is parked in a suspense
//! entry (`suspense:{entry id}`, same table) with one conditional Put, and
//! acknowledged only once that entry is written: nothing leaves the queue
//! without a durable record.
//!
//! - [`event`]: the wire contract, parsed into a validated [`LedgerEvent`].
//! - [`domain`]: [`LedgerOutcome`] and the classification of a cancelled
//!   transaction from its reasons, and of a refused suspense Put. Pure.
//! - [`store`]: the adapter that builds the transaction and the suspense Put.
//! - [`LedgerHandler`] (here): the [`Handler`] the shared batch machinery runs;
//!   [`LedgerFunction`]: the Lambda function.

// Logs go through `tracing`; the one stdout writer is the EMF line.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod domain;
pub mod event;
pub mod store;
/// Test support as library code (feature `testing`, for the tests).
#[cfg(feature = "testing")]
pub mod testing;

use aws_lambda_events::event::sqs::SqsMessage;
use tracing::{Span, field};

use domain::Decision;
pub use domain::LedgerOutcome;
pub use event::LedgerEvent;
use event::{Movement, parse_body};
use lambda_idempotency::config::{ConfigError, Settings, required};
use lambda_idempotency::wire::ParseError;
use lambda_idempotency::{BatchContext, Handler, StoreError};
use lambda_idempotency::{BuildError, Function};
use store::{LedgerStore, Parked, Txn};

/// The ledger's record handling.
#[derive(Debug)]
pub struct LedgerHandler {
    store: LedgerStore,
}

impl LedgerHandler {
    pub fn new(store: LedgerStore) -> Self {
        LedgerHandler { store }
    }

    /// The handler on `client`, over the tables `config` names.
    pub fn from_config(client: aws_sdk_dynamodb::Client, config: &LedgerConfig) -> Self {
        LedgerHandler::new(LedgerStore::new(
            client,
            &config.ledger_table,
            &config.accounts_table,
        ))
    }
}

impl Handler<SqsMessage> for LedgerHandler {
    type Event = LedgerEvent;
    type Verdict = LedgerOutcome;
    type Failure = StoreError;

    fn parse(&self, record: &SqsMessage) -> Result<LedgerEvent, ParseError> {
        parse_body(record.body.as_deref())
    }

    /// One account's records are applied one after another: they all update
    /// the account item, and concurrent transactions on one item cancel each
    /// other (TransactionConflict).
    fn key(&self, ev: &LedgerEvent) -> String {
        ev.account_id.to_string()
    }

    /// Captures before refunds, so that a refund in the same batch as its
    /// capture is not needlessly early.
    fn rank(&self, ev: &LedgerEvent) -> u64 {
        match ev.movement {
            Movement::Captured => 0,
            Movement::Refunded { .. } => 1,
        }
    }

    fn span(&self, message_id: &str, ev: Option<&LedgerEvent>) -> Span {
        tracing::info_span!(
            "record",
            message_id,
            account_id = ev.map(|e| e.account_id.as_str()),
            event_id = ev.map(|e| e.event_id.as_str()),
            entry_id = ev.map(|e| e.entry_id()),
            event_type = ev.map(|e| e.type_name()),
            outcome = field::Empty,
        )
    }

    /// One record's verdict, or the write's failure.
    async fn apply(
        &self,
        ev: &LedgerEvent,
        _cx: &BatchContext,
    ) -> Result<LedgerOutcome, StoreError> {
        let reason = match self.store.apply(ev).await? {
            Txn::Committed => return Ok(LedgerOutcome::Applied),
            Txn::Cancelled(c) => match domain::classify_cancellation(ev, &c) {
                Decision::Settled(outcome) => return Ok(outcome),
                Decision::Failed(e) => return Err(e),
                Decision::Park(reason) => reason,
            },
        };
        // Only once the suspense entry exists may the record be
        // acknowledged; a failed Put is a failed record, retried by SQS.
        match self.store.park(ev, &reason).await? {
            Parked::Written => Ok(LedgerOutcome::Suspended(reason)),
            Parked::Refused { attempt, stored } => {
                domain::classify_park_refusal(ev, reason, &attempt, stored.as_ref())
            }
        }
    }
}

/// The ledger function's configuration, read once per cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerConfig {
    /// `LEDGER_TABLE` (required): entries, hash key `entry_id`.
    pub ledger_table: String,
    /// `ACCOUNTS_TABLE` (required): balances, hash key `account_id`.
    pub accounts_table: String,
    /// `MAX_CONCURRENCY` (accounts written concurrently),
    /// `DEADLINE_MARGIN_MS`, `METRICS_NAMESPACE` (default `PaymentLedger`).
    pub runtime: Settings,
}

impl LedgerConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(LedgerConfig {
            ledger_table: required(&get, "LEDGER_TABLE")?,
            accounts_table: required(&get, "ACCOUNTS_TABLE")?,
            runtime: Settings::from_lookup(&get, "PaymentLedger", "payment-ledger")?,
        })
    }
}

/// The function's name in its invocation errors (`PaymentLedger.<case>`).
pub const NAME: &str = "PaymentLedger";

/// The `payment-ledger` function: built once per cold start. Invocation
/// errors are `PaymentLedger.<case>`.
pub type LedgerFunction = Function<LedgerHandler>;

/// The `payment-ledger` function on `client`, configured by `config`.
pub fn function(
    client: aws_sdk_dynamodb::Client,
    config: LedgerConfig,
) -> Result<LedgerFunction, BuildError> {
    Function::builder(LedgerHandler::from_config(client, &config))
        .name(NAME)
        .settings(config.runtime)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn both_tables_are_required() {
        let env = |pairs: &[(&str, &str)]| {
            let m: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            LedgerConfig::from_lookup(move |k| m.get(k).cloned())
        };
        assert_eq!(
            env(&[("ACCOUNTS_TABLE", "a")]),
            Err(ConfigError::Missing("LEDGER_TABLE"))
        );
        assert_eq!(
            env(&[("LEDGER_TABLE", "l")]),
            Err(ConfigError::Missing("ACCOUNTS_TABLE"))
        );
        let c = env(&[("LEDGER_TABLE", "l"), ("ACCOUNTS_TABLE", "a")]).unwrap();
        assert_eq!(c.runtime.telemetry().metrics_namespace, "PaymentLedger");
        assert_eq!(
            c.runtime.max_concurrency(),
            lambda_idempotency::config::DEFAULT_MAX_CONCURRENCY
        );
        assert!(
            env(&[
                ("LEDGER_TABLE", "l"),
                ("ACCOUNTS_TABLE", "a"),
                ("MAX_CONCURRENCY", "0")
            ])
            .is_err()
        );
    }
}
