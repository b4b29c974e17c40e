//! An idempotent SQS -> Lambda -> DynamoDB consumer of order events.
//!
//! Delivery is at-least-once, so every event is applied with one conditional
//! `UpdateItem` that can succeed at most once, and every refusal is
//! classified from the item DynamoDB returns with it.
//!
//! # Layout
//!
//! - [`event`]: the wire contract. Parses one SQS body (plain, SNS-wrapped or
//!   EventBridge-wrapped) into a validated [`event::OrderEvent`], or a
//!   specific [`event::ParseError`].
//! - [`domain`]: the order state machine and [`domain::classify_refusal`],
//!   which says what a failed condition means (duplicate, stale, early,
//!   rejected, conflict). Pure: no SDK types, no I/O.
//! - [`store`]: the DynamoDB adapter, the only place that builds expressions
//!   and maps SDK errors to [`error::StoreError`].
//! - [`batch`]: runs one SQS batch: groups by order, applies in order with
//!   bounded concurrency, honours FIFO groups and the deadline, and builds the
//!   partial-batch response.
//! - [`cache`]: the warm-container dedupe cache, which settles proven
//!   duplicates and stale events with no DynamoDB request.
//! - [`sqs`]: the SQS event as read from the Runtime API, strictly (the
//!   event and each record must be JSON objects).
//! - [`metrics`]: the per-invocation CloudWatch EMF line.
//! - [`config`]: environment configuration, read once per cold start.
//! - [`Consumer`] (here): the Lambda handler tying them together.

pub mod batch;
pub mod cache;
pub mod config;
pub mod domain;
pub mod error;
pub mod event;
pub mod metrics;
pub mod sqs;
pub mod store;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;
use tokio::time::Instant;

use crate::batch::{BatchError, BatchReport, Settings};
use crate::cache::DedupeCache;
use crate::config::Config;
use crate::metrics::OutcomeCounts;
use crate::store::OrderStore;

/// The function: built once per cold start, shared by every invocation.
#[derive(Debug)]
pub struct Consumer {
    store: OrderStore,
    /// Lives as long as the warm container: that is the point of it.
    cache: DedupeCache,
    config: Config,
}

impl Consumer {
    pub fn new(store: OrderStore, config: Config) -> Self {
        Self {
            cache: DedupeCache::new(config.dedupe_cache_size),
            store,
            config,
        }
    }

    pub fn cache(&self) -> &DedupeCache {
        &self.cache
    }

    pub fn settings(&self) -> Settings {
        Settings {
            max_concurrency: self.config.max_concurrency,
            deadline_margin: self.config.deadline_margin,
        }
    }

    /// The Lambda entry point: run the batch, emit its metrics line, answer.
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        let deadline = batch::deadline_from_epoch_ms(event.context.deadline);
        tracing::info!(
            request_id = %event.context.request_id,
            records = event.payload.records.len(),
            deadline_ms = event.context.deadline,
            remaining_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64,
            "batch received"
        );
        let (report, response) = self.handle_batch(&event.payload, deadline).await;
        metrics::emit(&metrics::emf_document(
            &self.config.metrics_namespace,
            &self.config.function_name,
            &OutcomeCounts::tally(report.outcomes()),
            &[
                ("BatchSize", report.records.len() as u64),
                ("CacheHits", report.cache_hits),
                ("CacheMisses", report.cache_misses),
            ],
        ));
        response
    }

    /// Process a batch and build the response, keeping the per-record report
    /// for callers that show it (tests, the local demo).
    pub async fn handle_batch(
        &self,
        event: &SqsEvent,
        deadline: Instant,
    ) -> (BatchReport, Result<SqsBatchResponse, BatchError>) {
        let report = batch::process(
            &self.store,
            &self.cache,
            self.settings(),
            &event.records,
            deadline,
        )
        .await;
        let response = report.to_response();
        if let Err(e) = &response {
            tracing::error!(error = %e, "failing the invocation");
        }
        (report, response)
    }
}
