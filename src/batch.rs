//! One SQS batch: parse every record, group by order, apply each group's
//! events in order with bounded concurrency across groups, and turn the
//! outcomes into an `SqsBatchResponse`.
//!
//! The invariant: a message is left out of `batchItemFailures` (so SQS deletes
//! it) only if its outcome is acknowledged, i.e. its effect is committed or is
//! known never to need committing. Everything else goes back to the queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsMessage};
use futures_util::StreamExt;
use thiserror::Error;
use tokio::time::Instant;
use tracing::{Instrument, Span, field};

use crate::cache::{Committed, DedupeCache};
use crate::domain::{OrderSnapshot, Outcome, Skip, classify_refusal, rejection_spends_seq};
use crate::error::StoreError;
use crate::event::{OrderEvent, ParseError, parse_body};
use crate::store::{OrderStore, Write};

/// How a batch is run (from [`crate::config::Config`]).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub max_concurrency: usize,
    pub deadline_margin: Duration,
}

/// The outcome of one record, in the batch's arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordReport {
    pub message_id: Option<String>,
    pub order_id: Option<String>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default)]
pub struct BatchReport {
    pub records: Vec<RecordReport>,
    /// Records the dedupe cache settled with no DynamoDB request.
    pub cache_hits: u64,
    /// Records that went to DynamoDB after the cache could not settle them.
    pub cache_misses: u64,
}

/// Why the invocation itself fails (Lambda then retries the whole batch).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error(
        "all {0} records failed on DynamoDB errors; failing the invocation so the outage shows in Lambda's error metrics"
    )]
    Outage(usize),
    #[error("{0} failed record(s) carry no messageId; failing the whole batch so none is lost")]
    Unidentifiable(usize),
}

/// How Lambda reports an invocation error: `errorType` is what shows in the
/// console and in logs, so it names the case rather than a Rust type.
impl From<BatchError> for lambda_runtime::Diagnostic {
    fn from(e: BatchError) -> Self {
        let error_type = match e {
            BatchError::Outage(_) => "OrderConsumer.DynamoDbOutage",
            BatchError::Unidentifiable(_) => "OrderConsumer.RecordWithoutMessageId",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.to_owned(),
            error_message: e.to_string(),
        }
    }
}

impl BatchReport {
    pub fn outcomes(&self) -> impl Iterator<Item = &Outcome> {
        self.records.iter().map(|r| &r.outcome)
    }

    /// The response Lambda expects with `ReportBatchItemFailures`, or an
    /// invocation error when partial failure cannot express the situation.
    pub fn to_response(&self) -> Result<SqsBatchResponse, BatchError> {
        let failed: Vec<&RecordReport> = self
            .records
            .iter()
            .filter(|r| !r.outcome.acknowledge())
            .collect();
        // An empty or unknown itemIdentifier makes Lambda fail the whole batch
        // anyway; say so explicitly instead of sending a malformed response.
        let unidentifiable = failed
            .iter()
            .filter(|r| {
                r.message_id
                    .as_deref()
                    .is_none_or(|id| id.trim().is_empty())
            })
            .count();
        if unidentifiable > 0 {
            return Err(BatchError::Unidentifiable(unidentifiable));
        }
        let infra = |o: &Outcome| matches!(o, Outcome::Failed(_) | Outcome::NotAttempted(_));
        if !self.records.is_empty()
            && self.outcomes().all(infra)
            && self.outcomes().any(|o| matches!(o, Outcome::Failed(_)))
        {
            return Err(BatchError::Outage(self.records.len()));
        }
        let mut response = SqsBatchResponse::default();
        let mut seen = std::collections::HashSet::new();
        for r in failed {
            if let Some(id) = &r.message_id
                && seen.insert(id.as_str())
            {
                response.add_failure(id.clone());
            }
        }
        Ok(response)
    }
}

/// Epoch milliseconds of 2001-09-09. A real invocation deadline is always
/// later; a smaller value is a duration, which is what some local emulators
/// (cargo lambda watch 1.9 sends 600000) put in `Lambda-Runtime-Deadline-Ms`.
const EPOCH_MS_FLOOR: u64 = 1_000_000_000_000;

/// Convert Lambda's deadline (milliseconds since the epoch) to an `Instant`.
pub fn deadline_from_epoch_ms(deadline_ms: u64) -> Instant {
    if deadline_ms < EPOCH_MS_FLOOR {
        tracing::warn!(
            deadline_ms,
            "invocation deadline is not an epoch timestamp (local emulator?); reading it as milliseconds from now"
        );
        return Instant::now() + Duration::from_millis(deadline_ms);
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

/// Is this batch from a FIFO queue? (Lambda sends one queue per batch.)
fn is_fifo(records: &[SqsMessage]) -> bool {
    records.iter().any(|r| {
        r.event_source_arn
            .as_deref()
            .is_some_and(|arn| arn.ends_with(".fifo"))
    })
}

/// Run a batch to completion (or to the deadline). Never panics on input and
/// returns exactly one report per record.
pub async fn process(
    store: &OrderStore,
    cache: &DedupeCache,
    settings: Settings,
    records: &[SqsMessage],
    deadline: Instant,
) -> BatchReport {
    let fifo = is_fifo(records);
    // Parse first, then apply: a bad body is settled here and never blocks a
    // good one (except behind it in its own FIFO group).
    let parsed: Vec<Result<OrderEvent, ParseError>> = records
        .iter()
        .map(|r| parse_body(r.body.as_deref()))
        .collect();

    let mut outcomes: Vec<Option<Outcome>> = vec![None; records.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    for (i, (record, ev)) in records.iter().zip(&parsed).enumerate() {
        // FIFO order is per MessageGroupId; a standard queue has no order, so
        // we impose the producer's: per orderId, by seq.
        let key = if fifo {
            record
                .attributes
                .get("MessageGroupId")
                .map(|g| format!("g:{g}"))
                .or_else(|| ev.as_ref().ok().map(|e| format!("o:{}", e.order_id)))
        } else {
            ev.as_ref().ok().map(|e| format!("o:{}", e.order_id))
        };
        match key {
            Some(key) => {
                let g = *group_of.entry(key).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push(i);
            }
            None => {
                let err = ev
                    .as_ref()
                    .err()
                    .cloned()
                    .unwrap_or(ParseError::MissingBody);
                let outcome = Outcome::Invalid(err);
                record_span(record, None).in_scope(|| log_outcome(&outcome));
                outcomes[i] = Some(outcome);
            }
        }
    }
    if !fifo {
        for g in &mut groups {
            // Stable: equal seqs keep arrival order (the second is then a
            // duplicate or a conflict of the first).
            g.sort_by_key(|&i| parsed[i].as_ref().map(|e| e.seq).ok());
        }
    }

    let ctx = GroupCtx {
        store,
        cache,
        hits: AtomicU64::new(0),
        misses: AtomicU64::new(0),
        records,
        parsed: &parsed,
        fifo,
        cutoff: deadline
            .checked_sub(settings.deadline_margin)
            .unwrap_or(deadline),
    };
    let mut done = futures_util::stream::iter(groups)
        .map(|g| ctx.run_group(g))
        .buffer_unordered(settings.max_concurrency.max(1));
    while let Some(group_outcomes) = done.next().await {
        for (i, o) in group_outcomes {
            outcomes[i] = Some(o);
        }
    }
    drop(done);

    BatchReport {
        cache_hits: ctx.hits.load(Ordering::Relaxed),
        cache_misses: ctx.misses.load(Ordering::Relaxed),
        records: records
            .iter()
            .zip(&parsed)
            .zip(outcomes)
            .map(|((r, ev), o)| RecordReport {
                message_id: r.message_id.clone(),
                order_id: ev.as_ref().ok().map(|e| e.order_id.to_string()),
                // Every index is filled above: either settled at parse time or
                // by its group. Defensive default: a failure, never an ack.
                outcome: o.unwrap_or(Outcome::Failed(StoreError::InconsistentRefusal)),
            })
            .collect(),
    }
}

struct GroupCtx<'a> {
    store: &'a OrderStore,
    cache: &'a DedupeCache,
    hits: AtomicU64,
    misses: AtomicU64,
    records: &'a [SqsMessage],
    parsed: &'a [Result<OrderEvent, ParseError>],
    fifo: bool,
    /// No write starts, and none is awaited, past this instant.
    cutoff: Instant,
}

impl GroupCtx<'_> {
    /// Apply one group's records one after another.
    async fn run_group(&self, indices: Vec<usize>) -> Vec<(usize, Outcome)> {
        let mut out = Vec::with_capacity(indices.len());
        let mut blocked = false;
        for i in indices {
            let ev = self.parsed[i].as_ref().ok();
            let span = record_span(&self.records[i], ev);
            let outcome = match &self.parsed[i] {
                _ if blocked => Outcome::NotAttempted(Skip::FifoGroupBlocked),
                Err(e) => Outcome::Invalid(e.clone()),
                Ok(ev) => self.apply(ev).instrument(span.clone()).await,
            };
            span.in_scope(|| log_outcome(&outcome));
            // FIFO: once a record of the group is not acknowledged, applying a
            // later one would reorder the group, so the rest wait for the
            // redelivery.
            if self.fifo && !outcome.acknowledge() {
                blocked = true;
            }
            out.push((i, outcome));
        }
        out
    }

    async fn apply(&self, ev: &OrderEvent) -> Outcome {
        // A proven duplicate or stale event costs nothing, not even time, so
        // the cache is asked before the deadline check.
        if let Some(settled) = self.cache.check(ev) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return settled;
        }
        if Instant::now() >= self.cutoff {
            return Outcome::NotAttempted(Skip::Deadline);
        }
        if self.cache.capacity() > 0 {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        let refused = match self.write(ev, self.store.apply(ev)).await {
            Ok(None) => return Outcome::Applied,
            Ok(Some(current)) => current,
            Err(failed) => return failed,
        };
        let outcome = classify_refusal(ev, refused.as_ref());
        let Some(observed) = refused.filter(|cur| {
            matches!(outcome, Outcome::Rejected { .. }) && rejection_spends_seq(ev, cur)
        }) else {
            return outcome;
        };
        // A rejected next event is acknowledged only once its seq is spent,
        // or the events after it would wait for it forever.
        match self
            .write(ev, self.store.record_rejection(ev, &observed))
            .await
        {
            Ok(None) => outcome,
            // The order moved on meanwhile (most likely another invocation
            // recorded this very rejection): classify what is there now.
            Ok(Some(current)) => match classify_refusal(ev, current.as_ref()) {
                again @ Outcome::Rejected { .. } => {
                    tracing::warn!(detail = %again, "rejection could not be recorded; retrying later");
                    Outcome::Failed(StoreError::InconsistentRefusal)
                }
                other => other,
            },
            Err(failed) => failed,
        }
    }

    /// Send one conditional write, bounded by the cutoff. `Ok(None)`: it
    /// committed; `Ok(Some(item))`: its condition failed against `item`. The
    /// cache learns only what DynamoDB confirmed.
    async fn write(
        &self,
        ev: &OrderEvent,
        request: impl Future<Output = Result<Write, StoreError>>,
    ) -> Result<Option<Option<OrderSnapshot>>, Outcome> {
        // Past the cutoff we stop waiting; the write may still commit, which
        // is fine: the record is reported failed, and its redelivery will be
        // classified as Duplicate.
        match tokio::time::timeout_at(self.cutoff, request).await {
            Err(_elapsed) => Err(Outcome::Failed(StoreError::DeadlineExceeded)),
            Ok(Ok(Write::Applied)) => {
                self.cache
                    .record(ev.order_id.as_str(), Committed::of_event(ev));
                Ok(None)
            }
            Ok(Ok(Write::Refused(current))) => {
                if let Some(item) = &current {
                    self.cache
                        .record(ev.order_id.as_str(), Committed::of_snapshot(item));
                }
                Ok(Some(current))
            }
            Ok(Err(e)) => Err(Outcome::Failed(e)),
        }
    }
}

fn record_span(record: &SqsMessage, ev: Option<&OrderEvent>) -> Span {
    tracing::info_span!(
        "record",
        message_id = record.message_id.as_deref().unwrap_or("-"),
        order_id = ev.map(|e| e.order_id.as_str()),
        event_id = ev.map(|e| e.event_id.as_str()),
        seq = ev.map(|e| e.seq.get()),
        event_type = ev.map(|e| e.kind().as_str()),
        outcome = field::Empty,
    )
}

/// One log line per record, at a level that matches what an operator must do.
fn log_outcome(outcome: &Outcome) {
    Span::current().record("outcome", outcome.label());
    match outcome {
        Outcome::Applied | Outcome::Duplicate | Outcome::Stale { .. } | Outcome::Early { .. } => {
            tracing::info!(detail = %outcome, "record processed")
        }
        Outcome::Rejected { .. } | Outcome::NotAttempted(_) => {
            tracing::warn!(detail = %outcome, "record processed")
        }
        Outcome::Failed(e) if e.is_retryable() => {
            tracing::warn!(detail = %outcome, "record processed")
        }
        Outcome::Failed(_) | Outcome::Conflict(_) | Outcome::Invalid(_) => {
            tracing::error!(detail = %outcome, "record processed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ConflictKind, Status};
    use crate::event::EventKind;

    fn rep(id: Option<&str>, outcome: Outcome) -> RecordReport {
        RecordReport {
            message_id: id.map(str::to_owned),
            order_id: None,
            outcome,
        }
    }

    fn ids(r: &SqsBatchResponse) -> Vec<&str> {
        r.batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }

    #[test]
    fn only_unacknowledged_records_are_reported() {
        let report = BatchReport {
            records: vec![
                rep(Some("a"), Outcome::Applied),
                rep(
                    Some("b"),
                    Outcome::Early {
                        current: Some(Status::Placed),
                        event: EventKind::Shipped,
                    },
                ),
                rep(
                    Some("c"),
                    Outcome::Rejected {
                        current: Some(Status::Cancelled),
                        event: EventKind::Paid,
                    },
                ),
                rep(Some("d"), Outcome::Conflict(ConflictKind::ChangedPayload)),
                rep(Some("e"), Outcome::Failed(StoreError::Timeout)),
            ],
            ..Default::default()
        };
        assert_eq!(ids(&report.to_response().unwrap()), ["b", "d", "e"]);
    }

    #[test]
    fn a_failure_without_message_id_fails_the_invocation() {
        let report = BatchReport {
            records: vec![
                rep(Some("a"), Outcome::Applied),
                rep(None, Outcome::Invalid(ParseError::MissingBody)),
            ],
            ..Default::default()
        };
        assert_eq!(
            report.to_response().unwrap_err(),
            BatchError::Unidentifiable(1)
        );
        // ...but an acknowledged record without an id needs no identifier.
        let report = BatchReport {
            records: vec![rep(None, Outcome::Applied)],
            ..Default::default()
        };
        assert!(report.to_response().unwrap().batch_item_failures.is_empty());
    }

    #[test]
    fn all_infrastructure_failures_fail_the_invocation() {
        let report = BatchReport {
            records: vec![
                rep(Some("a"), Outcome::Failed(StoreError::Network)),
                rep(Some("b"), Outcome::NotAttempted(Skip::FifoGroupBlocked)),
            ],
            ..Default::default()
        };
        assert_eq!(report.to_response().unwrap_err(), BatchError::Outage(2));
        // One record that was not an infrastructure failure: partial response.
        let report = BatchReport {
            records: vec![
                rep(Some("a"), Outcome::Failed(StoreError::Network)),
                rep(Some("b"), Outcome::Invalid(ParseError::MissingBody)),
            ],
            ..Default::default()
        };
        assert_eq!(ids(&report.to_response().unwrap()), ["a", "b"]);
    }

    #[test]
    fn deadlines_from_lambda_and_from_emulators() {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let left = |d: Instant| d.saturating_duration_since(Instant::now());
        // Real Lambda: an epoch timestamp.
        let d = deadline_from_epoch_ms(now_ms + 30_000);
        assert!(left(d) > Duration::from_secs(25) && left(d) <= Duration::from_secs(30));
        assert_eq!(left(deadline_from_epoch_ms(now_ms - 1_000)), Duration::ZERO);
        // An emulator's relative value.
        let d = deadline_from_epoch_ms(600_000);
        assert!(left(d) > Duration::from_secs(590));
    }

    #[test]
    fn invocation_errors_name_their_case() {
        let d: lambda_runtime::Diagnostic = BatchError::Outage(3).into();
        assert_eq!(d.error_type, "OrderConsumer.DynamoDbOutage");
        assert!(d.error_message.contains("all 3 records failed"));
    }

    #[test]
    fn empty_batch_is_an_empty_response() {
        assert!(
            BatchReport::default()
                .to_response()
                .unwrap()
                .batch_item_failures
                .is_empty()
        );
    }
}
