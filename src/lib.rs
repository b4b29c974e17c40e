//! An idempotent SQS -> Lambda -> DynamoDB consumer of order events.
//!
//! Delivery is at-least-once, so every event is applied with one conditional
//! `UpdateItem` that can succeed at most once, and every refusal is
//! classified from the item DynamoDB returns with it.
//!
//! # Layout
//!
//! Shared by both functions:
//! - [`batch`]: runs one SQS batch for any [`batch::Handler`]: parses every
//!   record first, groups them, applies each group in order with bounded
//!   concurrency, honours FIFO groups and the deadline, logs one line per
//!   record, emits the EMF metrics line, and builds the partial-batch
//!   response.
//! - [`sqs`]: the SQS event as read from the Runtime API, strictly (the
//!   event and each record must be JSON objects).
//! - [`error`]: [`error::StoreError`], DynamoDB failures free of SDK types,
//!   each saying whether it is retryable.
//! - [`metrics`]: the per-invocation CloudWatch EMF line.
//! - [`bootstrap`]: logging and the DynamoDB client, once per cold start.
//!
//! The order consumer (`order-consumer`):
//! - [`event`]: the wire contract. Parses one SQS body (plain, SNS-wrapped or
//!   EventBridge-wrapped) into a validated [`event::OrderEvent`], or a
//!   specific [`event::ParseError`]; its body reading and newtypes are
//!   shared with the ledger.
//! - [`domain`]: the order state machine and [`domain::classify_refusal`],
//!   which says what a failed condition means (duplicate, stale, early,
//!   rejected, conflict). Pure: no SDK types, no I/O.
//! - [`store`]: the DynamoDB adapter, the only place that builds the order
//!   expressions and maps SDK errors to [`error::StoreError`].
//! - [`cache`]: the warm-container dedupe cache, which settles proven
//!   duplicates and stale events with no DynamoDB request.
//! - [`orders`]: the order [`batch::Handler`]: cache, then one conditional
//!   write, then classification.
//! - [`config`]: environment configuration, read once per cold start.
//! - [`Consumer`] (here): the Lambda function tying them together.
//!
//! The payment ledger (`payment-ledger`), a transactional inbox:
//! - [`ledger`]: its contract, the classification of a cancelled
//!   transaction, the TransactWriteItems adapter, and its function.

// Logs go through `tracing`; the one stdout writer is the EMF line (metrics.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod batch;
pub mod bootstrap;
pub mod cache;
pub mod config;
pub mod domain;
pub mod error;
pub mod event;
pub mod ledger;
pub mod metrics;
pub mod notifier;
pub mod orders;
pub mod sqs;
pub mod store;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;
use tokio::time::Instant;

use crate::batch::{BatchError, BatchReport, Settings};
use crate::cache::DedupeCache;
use crate::config::Config;
use crate::orders::Orders;
use crate::store::OrderStore;

/// The function: built once per cold start, shared by every invocation.
#[derive(Debug)]
pub struct Consumer {
    orders: Orders,
    config: Config,
}

impl Consumer {
    pub fn new(store: OrderStore, config: Config) -> Self {
        Self {
            orders: Orders::new(
                store,
                DedupeCache::new(config.dedupe_cache_size, config.dedupe_cache_max_bytes),
            ),
            config,
        }
    }

    pub fn cache(&self) -> &DedupeCache {
        self.orders.cache()
    }

    pub fn settings(&self) -> Settings {
        self.config.runtime.settings()
    }

    /// The Lambda entry point: run the batch, emit its metrics line, answer.
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        batch::handle(
            &self.orders,
            self.settings(),
            self.config.runtime.metrics(),
            event,
        )
        .await
    }

    /// Process a batch and build the response, keeping the per-record report
    /// for callers that show it (tests, the local demo).
    pub async fn handle_batch(
        &self,
        event: &SqsEvent,
        deadline: Instant,
    ) -> (BatchReport, Result<SqsBatchResponse, BatchError>) {
        batch::handle_batch(&self.orders, self.settings(), event, deadline).await
    }
}
