//! One batch (SQS, DynamoDB Streams, Kinesis), for any consumer of this
//! crate: parse every record, group the records, apply each group's records
//! in order with bounded concurrency across groups, and turn the outcomes
//! into the source's partial-batch response.
//!
//! The invariant: a message is left out of `batchItemFailures` (so SQS deletes
//! it) only if its outcome is acknowledged, i.e. its effect is committed or is
//! known never to need committing. Everything else goes back to the queue.
//!
//! What differs between consumers is behind [`Handler`]: how a record (its
//! type parameter, a [`BatchRecord`]: an SQS message, a DynamoDB stream
//! record, ...) is parsed, which records must be applied one after
//! another, and how one record is applied.
//! Their verdicts implement [`Verdict`]; the engine wraps each in a
//! [`RecordOutcome`] with the outcomes every consumer shares. Grouping,
//! strict ordering (FIFO queues, streams), the deadline, logging and the
//! failure list are here, once.

use std::collections::HashMap;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::StreamExt;
use thiserror::Error;
use tokio::time::Instant;
use tracing::{Instrument, Level, Span};

use crate::config::{BatchSettings, KeyOrder, WholeBatchFailure};
use crate::error::StoreError;
use crate::metrics::{OutcomeCounts, VisibilityTally};
use crate::outcome::{self, Failure, RecordOutcome, Skip, Verdict};
use crate::records::BatchRecord;
use crate::wire::ParseError;

/// How your consumer reads and applies one record `R`; the batch machinery
/// (grouping, order, the deadline, the answer to Lambda) is generic over it.
/// `R` is what the batch carries: an `SqsMessage`, a DynamoDB stream
/// `EventRecord`, a `KinesisMessage`, a `KafkaMessage`; a handler that
/// serves every message source alike is `impl<R: MessageRecord>
/// Handler<R> for MyHandler`. Required: [`parse`](Self::parse), [`key`](Self::key) and
/// [`apply`](Self::apply); the rest have defaults.
///
/// # Example
///
/// A consumer is a [`Handler`] (how a record is parsed, grouped and
/// applied) and a [`Verdict`] (what it decided about one record; the
/// outcomes every consumer shares, such as an invalid record or a failed
/// write, are [`RecordOutcome`]'s). This toy handler writes nowhere;
/// [`process`] runs one SQS batch through it and the partial-batch answer
/// lists the record to retry.
///
/// ```
/// # #[cfg(feature = "sqs")]
/// # {
/// use std::fmt;
/// use std::time::Duration;
///
/// use lambda_idempotency::tracing::Span;
/// use lambda_idempotency::engine::{BatchEvent, SqsEvent, process};
/// use lambda_idempotency::{
///     BatchContext, BatchSettings, Handler, ParseError, RecordOutcome, SqsMessage, StoreError,
///     Verdict,
/// };
///
/// /// The toy's verdicts: only its own (the engine adds the shared ones).
/// #[derive(Debug, Clone, PartialEq)]
/// enum Greeting {
///     Greeted,
/// }
///
/// impl fmt::Display for Greeting {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str(self.label())
///     }
/// }
///
/// impl Verdict for Greeting {
///     const LABELS: &'static [&'static str] = &["Greeted"];
///     fn label(&self) -> &'static str {
///         match self {
///             Greeting::Greeted => "Greeted",
///         }
///     }
///     fn acknowledge(&self) -> bool {
///         true
///     }
/// }
///
/// /// A body is a name; every name is its own group.
/// struct Greeter;
///
/// impl Handler<SqsMessage> for Greeter {
///     type Event = String;
///     type Verdict = Greeting;
///     type Failure = StoreError;
///
///     fn parse(&self, record: &SqsMessage) -> Result<String, ParseError> {
///         match record.body.as_deref() {
///             Some(name) if !name.is_empty() => Ok(name.to_owned()),
///             _ => Err(ParseError::MissingBody),
///         }
///     }
///     fn key(&self, name: &String) -> String {
///         name.clone()
///     }
///     fn rank(&self, _name: &String) -> u64 {
///         0
///     }
///     fn span(&self, _record_id: &str, _name: Option<&String>) -> Span {
///         Span::none()
///     }
///     async fn apply(&self, _name: &String, _cx: &BatchContext) -> Result<Greeting, StoreError> {
///         // A real handler writes here; `?` on a StoreError makes the
///         // record's outcome the shared `Failed`.
///         Ok(Greeting::Greeted)
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let mut event = SqsEvent::default();
/// for (id, body) in [("m1", "Ada"), ("m2", ""), ("m3", "Grace")] {
///     let mut message = SqsMessage::default();
///     message.message_id = Some(id.into());
///     message.body = Some(body.into());
///     event.records.push(message);
/// }
/// let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
/// let report = process(&Greeter, BatchSettings::default(), event.records(), deadline).await;
/// assert_eq!(report.counts().get("Greeted"), 2);
/// assert_eq!(report.counts().get("Invalid"), 1);
/// assert_eq!(report.records[0].outcome, Greeting::Greeted);
/// assert!(matches!(report.records[1].outcome, RecordOutcome::Invalid(_)));
///
/// // The partial-batch answer: only the invalid record goes back.
/// let answer = SqsEvent::response(report.failures().unwrap());
/// assert_eq!(answer.batch_item_failures.len(), 1);
/// assert_eq!(answer.batch_item_failures[0].item_identifier, "m2");
/// # });
/// # }
/// ```
pub trait Handler<R: BatchRecord>: Sync {
    /// A parsed, validated record.
    type Event: Send + Sync;
    /// The handler's verdict about one record (the shared outcomes are
    /// [`RecordOutcome`]'s).
    type Verdict: Verdict;
    /// What keeps a record from a verdict: [`StoreError`], or the
    /// consumer's own type that can hold one.
    type Failure: Failure;

    /// Parse and validate one record.
    fn parse(&self, record: &R) -> Result<Self::Event, ParseError>;
    /// Records with the same key are applied one after another (a record's
    /// [`BatchRecord::source_group`], if it has one, is used instead).
    fn key(&self, event: &Self::Event) -> String;
    /// The order within a key when the source does not impose one (ties
    /// keep arrival order). By default every record ranks alike: arrival
    /// order.
    fn rank(&self, _event: &Self::Event) -> u64 {
        0
    }
    /// The tracing span of one record, in which its log line is written.
    /// By default `record` with the record's id (`record_id`) and its
    /// `outcome` (filled in by the engine). A span of your own (to add the
    /// event's key, say) must declare an `outcome` field too
    /// ([`record_span`] makes one), or the line has no outcome.
    fn span(&self, record_id: &str, _event: Option<&Self::Event>) -> Span {
        record_span(record_id)
    }
    /// Settle a record with no I/O if possible (a warm-container cache). Asked
    /// before the deadline check: a settled record costs no time.
    fn settle_without_io(&self, _event: &Self::Event, _cx: &BatchContext) -> Option<Self::Verdict> {
        None
    }
    /// Apply one record: its verdict, or the dependency failure that kept
    /// it from one (so `?` works on [`StoreError`] and on the consumer's
    /// own failure type; the batch reports it as [`RecordOutcome::Failed`],
    /// or as `NotAttempted` when [`Failure::not_attempted`] says so). The
    /// batch cuts it off at [`BatchContext::cutoff`].
    fn apply(
        &self,
        event: &Self::Event,
        cx: &BatchContext,
    ) -> impl Future<Output = Result<Self::Verdict, Self::Failure>> + Send;
}

/// Per-batch context handed to the handler.
#[derive(Debug)]
pub struct BatchContext {
    cutoff: Instant,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
}

impl BatchContext {
    /// A context whose writes stop at `cutoff`, with zeroed cache counts.
    pub fn new(cutoff: Instant) -> Self {
        BatchContext {
            cutoff,
            cache_hits: AtomicU64::new(0),
            cache_misses: AtomicU64::new(0),
        }
    }

    /// No write starts, and none is awaited, past this instant: a
    /// handler that waits on anything else bounds the wait by it.
    pub fn cutoff(&self) -> Instant {
        self.cutoff
    }

    /// Count a record a cache settled with no request to the store (the
    /// batch report's and the metrics' `CacheHits`).
    pub fn cache_hit(&self) {
        self.cache_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a record that went to the store after a cache could not
    /// settle it (`CacheMisses`).
    pub fn cache_miss(&self) {
        self.cache_misses.fetch_add(1, Ordering::Relaxed);
    }
}

/// The outcome of one record, in the batch's arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordReport<V, F = StoreError> {
    /// The record's id for Lambda (SQS messageId, stream SequenceNumber).
    pub record_id: Option<String>,
    /// The record's grouping key (the orderId, the accountId), if it parsed.
    pub key: Option<String>,
    /// What happened to it.
    pub outcome: RecordOutcome<V, F>,
}

/// What one batch did, record by record.
#[derive(Debug, Clone)]
pub struct BatchReport<V, F = StoreError> {
    /// One report per record, in arrival order.
    pub records: Vec<RecordReport<V, F>>,
    /// Set when the invocation began with no more time than the deadline
    /// margin: no record could be started, and the invocation fails.
    pub starved: Option<Starved>,
    /// Records a cache settled with no DynamoDB request.
    pub cache_hits: u64,
    /// Records that went to DynamoDB after a cache could not settle them.
    pub cache_misses: u64,
    /// The returned messages whose visibility was set, or could not be
    /// (the `redelivery` module, feature `sqs`); zero where nothing set it.
    pub visibility: VisibilityTally,
}

/// The time an invocation had, against the margin it must leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Starved {
    /// Milliseconds the invocation had when it began.
    pub budget_ms: u64,
    /// `DEADLINE_MARGIN_MS`.
    pub margin_ms: u64,
}

impl<V, F> Default for BatchReport<V, F> {
    fn default() -> Self {
        BatchReport {
            records: Vec::new(),
            starved: None,
            cache_hits: 0,
            cache_misses: 0,
            visibility: VisibilityTally::default(),
        }
    }
}

/// Why the invocation itself fails (Lambda then retries the whole batch).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error(
        "all {0} records failed on a dependency (DynamoDB or the provider); failing the invocation so the outage shows in Lambda's error metrics"
    )]
    /// Every record failed on a dependency (or was not attempted); the
    /// count of records.
    Outage(usize),
    /// Failed records without an id Lambda could retry them by; their count.
    #[error(
        "{0} failed record(s) carry no id (SQS messageId, stream or Kinesis sequence number); failing the whole batch so none is lost"
    )]
    Unidentifiable(usize),
    /// A function timeout at or below `DEADLINE_MARGIN_MS` would otherwise
    /// turn every record into NotAttempted, drain the queue into the DLQ and
    /// raise no alarm; as an invocation error it shows in Errors.
    #[error(
        "the invocation had {budget_ms} ms, not more than DEADLINE_MARGIN_MS ({margin_ms} ms), so no record could be started: raise the function timeout or lower the margin"
    )]
    NoTimeBudget {
        /// Milliseconds the invocation had.
        budget_ms: u64,
        /// `DEADLINE_MARGIN_MS`.
        margin_ms: u64,
    },
}

impl BatchError {
    /// How Lambda reports the invocation error: `errorType` is what shows in
    /// the console and in logs, so it names the function and the case
    /// (`OrderConsumer.DependencyOutage`) rather than a Rust type.
    pub fn diagnostic(&self, function: &str) -> lambda_runtime::Diagnostic {
        let case = match self {
            BatchError::Outage(_) => "DependencyOutage",
            BatchError::Unidentifiable(_) => "RecordWithoutMessageId",
            BatchError::NoTimeBudget { .. } => "TimeoutBelowDeadlineMargin",
        };
        lambda_runtime::Diagnostic {
            error_type: format!("{function}.{case}"),
            error_message: self.to_string(),
        }
    }
}

impl<V: Verdict, F> BatchReport<V, F> {
    /// The records' outcomes, in arrival order.
    pub fn outcomes(&self) -> impl Iterator<Item = &RecordOutcome<V, F>> {
        self.records.iter().map(|r| &r.outcome)
    }

    /// The count per outcome label, every label present.
    pub fn counts(&self) -> OutcomeCounts {
        OutcomeCounts::tally(
            outcome::labels::<V>(),
            self.outcomes().map(RecordOutcome::label),
        )
    }

    /// The ids of the records that were not acknowledged, once each, in
    /// arrival order; or an invocation error when a failed record has no id,
    /// or when every record failed on DynamoDB
    /// ([`WholeBatchFailure::FailInvocation`], the default;
    /// [`Self::failures_with`] chooses).
    pub fn failures(&self) -> Result<Vec<String>, BatchError> {
        self.failures_with(WholeBatchFailure::FailInvocation)
    }

    /// Did every record fail on a dependency (or go unattempted after one
    /// did)? The whole-batch outage [`WholeBatchFailure`] decides about.
    pub fn is_outage(&self) -> bool {
        let infra = |o: &RecordOutcome<V, F>| o.is_dependency_failure() || o.is_not_attempted();
        !self.records.is_empty()
            && self.outcomes().all(infra)
            && self.outcomes().any(RecordOutcome::is_dependency_failure)
    }

    /// [`Self::failures`], with `whole` deciding what a batch whose every
    /// record failed on a dependency answers: an invocation error, or the
    /// list of every record.
    pub fn failures_with(&self, whole: WholeBatchFailure) -> Result<Vec<String>, BatchError> {
        if let Some(Starved {
            budget_ms,
            margin_ms,
        }) = self.starved
        {
            return Err(BatchError::NoTimeBudget {
                budget_ms,
                margin_ms,
            });
        }
        let failed: Vec<&RecordReport<V, F>> = self
            .records
            .iter()
            .filter(|r| !r.outcome.acknowledge())
            .collect();
        // An empty or unknown itemIdentifier makes Lambda fail the whole batch
        // anyway; say so explicitly instead of sending a malformed response.
        let unidentifiable = failed
            .iter()
            .filter(|r| r.record_id.as_deref().is_none_or(|id| id.trim().is_empty()))
            .count();
        if unidentifiable > 0 {
            return Err(BatchError::Unidentifiable(unidentifiable));
        }
        if whole == WholeBatchFailure::FailInvocation && self.is_outage() {
            return Err(BatchError::Outage(self.records.len()));
        }
        let mut seen = std::collections::HashSet::new();
        Ok(failed
            .into_iter()
            .filter_map(|r| r.record_id.clone())
            .filter(|id| seen.insert(id.clone()))
            .collect())
    }
}

/// Run a batch to completion (or to the deadline). Never panics on input and
/// returns exactly one report per record.
pub async fn process<R: BatchRecord, H: Handler<R>>(
    handler: &H,
    settings: BatchSettings,
    records: &[R],
    deadline: Instant,
) -> BatchReport<H::Verdict, H::Failure> {
    let starved = starved(records.len(), deadline, settings);
    let strict = R::strict_order(records);
    // Parse first, then apply: a bad body is settled here and never blocks a
    // good one (except behind it in its own FIFO group).
    let parsed: Vec<Result<H::Event, ParseError>> =
        records.iter().map(|r| handler.parse(r)).collect();
    let keys: Vec<Option<String>> = parsed
        .iter()
        .map(|ev| ev.as_ref().ok().map(|e| handler.key(e)))
        .collect();
    let mut outcomes: Vec<Option<Outcome<H, R>>> = vec![None; records.len()];
    let groups = group(handler, records, &parsed, &keys, strict, &mut outcomes);

    let ctx = GroupRun {
        handler,
        records,
        parsed: &parsed,
        strict,
        settings,
        cx: BatchContext::new(
            deadline
                .checked_sub(settings.deadline_margin)
                .unwrap_or(deadline),
        ),
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
    report(&ctx.cx, starved, records, keys, outcomes)
}

/// Whether the batch starts with no time for any record: the budget to the
/// deadline is within the margin kept for the answer.
fn starved(records: usize, deadline: Instant, settings: BatchSettings) -> Option<Starved> {
    let budget = deadline.saturating_duration_since(Instant::now());
    (records > 0 && budget <= settings.deadline_margin).then_some(Starved {
        budget_ms: budget.as_millis() as u64,
        margin_ms: settings.deadline_margin.as_millis() as u64,
    })
}

/// The groups the batch runs as (record indexes, each group in the order
/// it applies): a FIFO queue's message groups when the source is strictly
/// ordered, else the handler's keys, sorted by rank unless the source
/// orders them. A record with no key (its event could not be read) is
/// settled `Invalid` here, in `outcomes`, and logged.
fn group<R: BatchRecord, H: Handler<R>>(
    handler: &H,
    records: &[R],
    parsed: &[Result<H::Event, ParseError>],
    keys: &[Option<String>],
    strict: bool,
    outcomes: &mut [Option<Outcome<H, R>>],
) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    for (i, record) in records.iter().enumerate() {
        // A FIFO queue orders per MessageGroupId; otherwise records are
        // grouped by the handler's key (and, unless the source is strictly
        // ordered, sorted by rank below).
        let key = record
            .source_group()
            .filter(|_| strict)
            .map(|g| format!("g:{g}"))
            .or_else(|| keys[i].as_ref().map(|k| format!("k:{k}")));
        match key {
            Some(key) => {
                let g = *group_of.entry(key).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push(i);
            }
            None => {
                let err = parsed[i]
                    .as_ref()
                    .err()
                    .cloned()
                    .unwrap_or(ParseError::MissingBody);
                let outcome = Outcome::<H, R>::Invalid(err);
                span_of(handler, record, None).in_scope(|| log_outcome(&outcome));
                outcomes[i] = Some(outcome);
            }
        }
    }
    if !strict {
        for g in &mut groups {
            // Stable: equal ranks keep arrival order (the second of two
            // equal sequence numbers is then a duplicate or a conflict of
            // the first).
            g.sort_by_key(|&i| parsed[i].as_ref().map(|e| handler.rank(e)).ok());
        }
    }
    groups
}

/// One report per record, in arrival order, with the batch's counters.
fn report<R: BatchRecord, V, F>(
    cx: &BatchContext,
    starved: Option<Starved>,
    records: &[R],
    keys: Vec<Option<String>>,
    outcomes: Vec<Option<RecordOutcome<V, F>>>,
) -> BatchReport<V, F>
where
    F: From<StoreError>,
{
    BatchReport {
        starved,
        cache_hits: cx.cache_hits.load(Ordering::Relaxed),
        cache_misses: cx.cache_misses.load(Ordering::Relaxed),
        visibility: VisibilityTally::default(),
        records: records
            .iter()
            .zip(keys)
            .zip(outcomes)
            .map(|((r, key), o)| RecordReport {
                record_id: r.id().map(str::to_owned),
                key,
                // Every index is filled above: either settled at parse time or
                // by its group. Defensive default: a failure, never an ack.
                outcome: o.unwrap_or_else(|| {
                    RecordOutcome::Failed(StoreError::InconsistentRefusal.into())
                }),
            })
            .collect(),
    }
}

/// What the engine reports for one record of `H`.
type Outcome<H, R> = RecordOutcome<<H as Handler<R>>::Verdict, <H as Handler<R>>::Failure>;

struct GroupRun<'a, R: BatchRecord, H: Handler<R>> {
    handler: &'a H,
    records: &'a [R],
    parsed: &'a [Result<H::Event, ParseError>],
    strict: bool,
    settings: BatchSettings,
    cx: BatchContext,
}

impl<R: BatchRecord, H: Handler<R>> GroupRun<'_, R, H> {
    /// Apply one group's records one after another.
    async fn run_group(&self, indices: Vec<usize>) -> Vec<(usize, Outcome<H, R>)> {
        let mut out = Vec::with_capacity(indices.len());
        let mut blocked = false;
        for i in indices {
            let ev = self.parsed[i].as_ref().ok();
            let span = span_of(self.handler, &self.records[i], ev);
            let outcome = match &self.parsed[i] {
                _ if blocked => RecordOutcome::NotAttempted(Skip::FifoGroupBlocked),
                Err(e) => RecordOutcome::Invalid(e.clone()),
                Ok(ev) => self.apply(ev).instrument(span.clone()).await,
            };
            span.in_scope(|| log_outcome(&outcome));
            // Strict order (FIFO, streams, or KeyOrder::Strict): once a
            // record of the group is not acknowledged, applying a later one
            // would reorder the group, so the rest wait for the redelivery;
            // unless this record will not be redelivered (see
            // `holds_group_back`).
            if (self.strict || self.settings.key_order == KeyOrder::Strict)
                && !outcome.acknowledge()
                && holds_group_back(
                    self.records[i].receive_count(),
                    self.settings.max_receive_count,
                )
            {
                blocked = true;
            }
            out.push((i, outcome));
        }
        out
    }

    async fn apply(&self, ev: &H::Event) -> Outcome<H, R> {
        if let Some(settled) = self.handler.settle_without_io(ev, &self.cx) {
            return RecordOutcome::Settled(settled);
        }
        if Instant::now() >= self.cx.cutoff {
            return RecordOutcome::NotAttempted(Skip::Deadline);
        }
        // Past the cutoff we stop waiting; a write may still commit, which is
        // fine: the record is reported failed, and its redelivery finds the
        // effect committed (a duplicate).
        match tokio::time::timeout_at(self.cx.cutoff, self.handler.apply(ev, &self.cx)).await {
            Ok(Ok(verdict)) => RecordOutcome::Settled(verdict),
            // The handler found it could not attempt the record after all.
            Ok(Err(failure)) => match failure.not_attempted() {
                Some(skip) => RecordOutcome::NotAttempted(skip),
                None => RecordOutcome::Failed(failure),
            },
            Err(_elapsed) => RecordOutcome::Failed(StoreError::DeadlineExceeded.into()),
        }
    }
}

/// Does a strictly ordered record that is not acknowledged hold the later
/// records of its group back? Yes while it may come back and succeed: they
/// must not overtake it. No on its last receive (`receive_count` at or
/// above the queue's `max_receive_count`): SQS moves it to the DLQ instead
/// of handing it out again, so the group goes on without it whatever the
/// later records do. Holding them back then would not keep them behind it,
/// only spend their receives: SQS counts a receive for every message of
/// the group it hands out, so they would reach `maxReceiveCount` together
/// with it and follow it to the DLQ unattempted. Attempting them now is
/// what would happen once it has left. Unknown on either side (a stream,
/// a function not told the queue's `maxReceiveCount`): it holds them back.
pub(crate) fn holds_group_back(receive_count: Option<u32>, max_receive_count: Option<u32>) -> bool {
    match (receive_count, max_receive_count) {
        (Some(n), Some(max)) => n < max,
        _ => true,
    }
}

/// The default span of a record ([`Handler::span`]): `record`, with the
/// record's id and an `outcome` field for the engine to fill in.
pub fn record_span(record_id: &str) -> Span {
    tracing::info_span!("record", record_id, outcome = tracing::field::Empty)
}

fn span_of<R: BatchRecord, H: Handler<R>>(handler: &H, record: &R, ev: Option<&H::Event>) -> Span {
    handler.span(record.id().unwrap_or("-"), ev)
}

/// One log line per record, at a level that matches what an operator must do.
fn log_outcome<V: Verdict, F: Failure>(outcome: &RecordOutcome<V, F>) {
    Span::current().record("outcome", outcome.label());
    match outcome.level() {
        Level::ERROR => tracing::error!(detail = %outcome, "record processed"),
        Level::WARN => tracing::warn!(detail = %outcome, "record processed"),
        _ => tracing::info!(detail = %outcome, "record processed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_record_holds_its_group_back_unless_it_is_on_its_last_receive() {
        for (receive_count, max, holds) in [
            (Some(1), Some(5), true),
            (Some(4), Some(5), true),
            // Its last receive: SQS moves it to the DLQ next.
            (Some(5), Some(5), false),
            // The queue's maxReceiveCount was lowered since: also the last.
            (Some(7), Some(5), false),
            (Some(1), Some(1), false),
            // Unknown: hold back, as strict order asks.
            (None, Some(5), true),
            (Some(5), None, true),
            (None, None, true),
        ] {
            assert_eq!(
                holds_group_back(receive_count, max),
                holds,
                "{receive_count:?} of {max:?}"
            );
        }
    }
}

/// The engine with a toy handler: no I/O, its "writes" are recorded in
/// order. Paused tokio time (the dev-dependency's `test-util`), so the
/// deadline tests are exact whatever the machine's load.
#[cfg(all(test, feature = "sqs"))]
mod engine_tests {
    use std::fmt;
    use std::sync::Mutex;

    use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};

    use super::*;
    use crate::records::BatchEvent;
    use std::time::Duration;

    #[derive(Debug, Clone, PartialEq)]
    enum Toy {
        Done,
        Early,
    }

    impl fmt::Display for Toy {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.label())
        }
    }

    impl Verdict for Toy {
        const LABELS: &'static [&'static str] = &["Done", "Early"];
        fn acknowledge(&self) -> bool {
            matches!(self, Toy::Done)
        }
        fn label(&self) -> &'static str {
            match self {
                Toy::Done => "Done",
                Toy::Early => "Early",
            }
        }
    }

    /// The toy's failures: DynamoDB's, and one found part way that means
    /// the record was not attempted (a deadline check inside `apply`).
    #[derive(Debug, Clone, PartialEq)]
    enum ToyFailure {
        Store(StoreError),
        TooLate,
    }

    impl From<StoreError> for ToyFailure {
        fn from(e: StoreError) -> Self {
            ToyFailure::Store(e)
        }
    }

    impl fmt::Display for ToyFailure {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                ToyFailure::Store(e) => e.fmt(f),
                ToyFailure::TooLate => f.write_str("too late"),
            }
        }
    }

    impl Failure for ToyFailure {
        fn is_retryable(&self) -> bool {
            true
        }
        fn not_attempted(&self) -> Option<Skip> {
            matches!(self, ToyFailure::TooLate).then_some(Skip::Deadline)
        }
    }

    type Outcome = RecordOutcome<Toy, ToyFailure>;

    /// A body is `key:seq:action`; action `ok`, `early`, `fail` (a
    /// dependency failure), `late` (the handler finds it has no time for
    /// it), `slow` (a write that takes 10 s).
    struct ToyHandler {
        applied: Mutex<Vec<String>>,
    }

    struct Ev {
        key: String,
        seq: u64,
        action: String,
    }

    impl Handler<SqsMessage> for ToyHandler {
        type Event = Ev;
        type Verdict = Toy;
        type Failure = ToyFailure;

        fn parse(&self, record: &SqsMessage) -> Result<Ev, ParseError> {
            let body = record.body.as_deref().ok_or(ParseError::MissingBody)?;
            let mut parts = body.split(':');
            let (Some(key), Some(seq), Some(action)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(ParseError::MissingBody);
            };
            let seq = seq.parse().map_err(|_| ParseError::MissingBody)?;
            Ok(Ev {
                key: key.into(),
                seq,
                action: action.into(),
            })
        }
        fn key(&self, ev: &Ev) -> String {
            ev.key.clone()
        }
        fn rank(&self, ev: &Ev) -> u64 {
            ev.seq
        }
        fn span(&self, _record_id: &str, _ev: Option<&Ev>) -> Span {
            Span::none()
        }
        async fn apply(&self, ev: &Ev, _cx: &BatchContext) -> Result<Toy, ToyFailure> {
            match ev.action.as_str() {
                "fail" => return Err(StoreError::Timeout.into()),
                "late" => return Err(ToyFailure::TooLate),
                "slow" => tokio::time::sleep(Duration::from_secs(10)).await,
                _ => {}
            }
            if let Ok(mut applied) = self.applied.lock() {
                applied.push(format!("{}:{}", ev.key, ev.seq));
            }
            Ok(if ev.action == "early" {
                Toy::Early
            } else {
                Toy::Done
            })
        }
    }

    fn handler() -> ToyHandler {
        ToyHandler {
            applied: Mutex::new(Vec::new()),
        }
    }

    fn applied(h: &ToyHandler) -> Vec<String> {
        h.applied.lock().map(|a| a.clone()).unwrap_or_default()
    }

    const FIFO: &str = "arn:aws:sqs:us-east-1:111122223333:q.fifo";

    /// `(id, body, MessageGroupId)`; a group makes the batch a FIFO one.
    fn event(records: &[(&str, &str, Option<&str>)]) -> SqsEvent {
        let mut event = SqsEvent::default();
        event.records = records
            .iter()
            .map(|(id, body, group)| {
                let mut m = SqsMessage::default();
                m.message_id = Some((*id).into());
                m.body = Some((*body).into());
                if let Some(g) = group {
                    m.event_source_arn = Some(FIFO.into());
                    m.attributes.insert("MessageGroupId".into(), (*g).into());
                }
                m
            })
            .collect();
        event
    }

    fn settings(max_concurrency: usize) -> BatchSettings {
        BatchSettings {
            max_concurrency,
            deadline_margin: Duration::from_secs(2),
            ..BatchSettings::default()
        }
    }

    async fn run(h: &ToyHandler, e: &SqsEvent, s: BatchSettings) -> BatchReport<Toy, ToyFailure> {
        process(h, s, e.records(), Instant::now() + Duration::from_secs(60)).await
    }

    fn labels(report: &BatchReport<Toy, ToyFailure>) -> Vec<&'static str> {
        report.outcomes().map(Outcome::label).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn records_of_a_key_are_applied_in_rank_order_and_reported_in_arrival_order() {
        let h = handler();
        let e = event(&[
            ("m1", "a:3:ok", None),
            ("m2", "b:1:ok", None),
            ("m3", "a:1:ok", None),
            ("m4", "a:2:ok", None),
        ]);
        // One group at a time: the order of the writes is the groups' order
        // of first arrival, and within a key the rank's.
        let report = run(&h, &e, settings(1)).await;
        assert_eq!(applied(&h), ["a:1", "a:2", "a:3", "b:1"]);
        let ids: Vec<_> = report.records.iter().map(|r| r.record_id.clone()).collect();
        assert_eq!(
            ids,
            [Some("m1"), Some("m2"), Some("m3"), Some("m4")].map(|i| i.map(String::from))
        );
        let keys: Vec<_> = report.records.iter().map(|r| r.key.as_deref()).collect();
        assert_eq!(keys, [Some("a"), Some("b"), Some("a"), Some("a")]);
        assert_eq!(report.failures(), Ok(vec![]));
    }

    /// A standard queue: `[earn (fails), redeem]` of one key. Ranked (the
    /// default), the redemption still runs after the failure; Strict, it
    /// is held back and goes back to the queue with it, and other keys go
    /// on either way.
    #[tokio::test(start_paused = true)]
    async fn strict_key_order_holds_a_key_back_after_a_failure_on_a_standard_queue() {
        let e = event(&[
            ("m1", "a:1:fail", None),
            ("m2", "a:2:ok", None),
            ("m3", "b:1:ok", None),
        ]);
        let h = handler();
        let ranked = run(&h, &e, settings(8)).await;
        assert_eq!(labels(&ranked), ["Failed", "Done", "Done"]);
        assert_eq!(applied(&h), ["a:2", "b:1"]);
        let h = handler();
        let strict = BatchSettings {
            key_order: KeyOrder::Strict,
            ..settings(8)
        };
        let held = run(&h, &e, strict).await;
        assert_eq!(labels(&held), ["Failed", "NotAttempted", "Done"]);
        assert_eq!(applied(&h), ["b:1"]);
        assert_eq!(held.failures(), Ok(vec!["m1".to_owned(), "m2".to_owned()]));
    }

    /// Every record failed on a dependency: an invocation error by default
    /// (the outage shows in Lambda's Errors), or every record listed in the
    /// partial-batch response when the function says so.
    #[tokio::test(start_paused = true)]
    async fn a_whole_batch_outage_fails_the_invocation_or_lists_every_record() {
        let h = handler();
        let e = event(&[("m1", "a:1:fail", None), ("m2", "b:1:fail", None)]);
        let report = run(&h, &e, settings(8)).await;
        assert!(report.is_outage());
        assert_eq!(report.failures(), Err(BatchError::Outage(2)));
        assert_eq!(
            report.failures_with(WholeBatchFailure::FailInvocation),
            Err(BatchError::Outage(2))
        );
        assert_eq!(
            report.failures_with(WholeBatchFailure::ReportEach),
            Ok(vec!["m1".to_owned(), "m2".to_owned()])
        );
        // One record acknowledged: no outage, whatever the choice.
        let e = event(&[("m1", "a:1:fail", None), ("m2", "b:1:ok", None)]);
        let report = run(&h, &e, settings(8)).await;
        assert!(!report.is_outage());
        assert_eq!(report.failures(), Ok(vec!["m1".to_owned()]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fifo_group_is_held_back_after_a_failure_and_keeps_arrival_order() {
        let h = handler();
        let e = event(&[
            ("m1", "a:2:ok", Some("g1")),
            ("m2", "a:1:fail", Some("g1")),
            ("m3", "a:3:ok", Some("g1")),
            ("m4", "b:1:ok", Some("g2")),
        ]);
        let report = run(&h, &e, settings(8)).await;
        // Arrival order, not rank, within the FIFO group; the record after
        // the failure is not attempted; the other group goes on.
        assert_eq!(labels(&report), ["Done", "Failed", "NotAttempted", "Done"]);
        assert_eq!(
            report.records[2].outcome,
            Outcome::NotAttempted(Skip::FifoGroupBlocked)
        );
        let mut writes = applied(&h);
        writes.sort();
        assert_eq!(writes, ["a:2", "b:1"]);
        assert_eq!(report.failures(), Ok(vec!["m2".into(), "m3".into()]));
    }

    #[tokio::test(start_paused = true)]
    async fn records_after_the_cutoff_are_not_attempted() {
        let h = handler();
        // 3 s to the deadline, 2 s margin: the cutoff is 1 s away. The slow
        // write is cut off there; the next record of its key is not started.
        let e = event(&[("m1", "a:1:slow", None), ("m2", "a:2:ok", None)]);
        let deadline = Instant::now() + Duration::from_secs(3);
        let report = process(&h, settings(1), e.records(), deadline).await;
        assert_eq!(
            report.outcomes().cloned().collect::<Vec<_>>(),
            [
                Outcome::Failed(ToyFailure::Store(StoreError::DeadlineExceeded)),
                Outcome::NotAttempted(Skip::Deadline)
            ]
        );
        assert!(applied(&h).is_empty());
        assert_eq!(report.starved, None);
        // Every record failed on a dependency or was not attempted: an
        // outage, so the invocation fails.
        assert_eq!(report.failures(), Err(BatchError::Outage(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_that_says_not_attempted_is_reported_as_not_attempted() {
        let h = handler();
        let e = event(&[("m1", "a:1:late", None), ("m2", "b:1:fail", None)]);
        let report = run(&h, &e, settings(1)).await;
        assert_eq!(
            report.outcomes().cloned().collect::<Vec<_>>(),
            [
                Outcome::NotAttempted(Skip::Deadline),
                Outcome::Failed(ToyFailure::Store(StoreError::Timeout))
            ]
        );
        assert_eq!(report.counts().get("NotAttempted"), 1);
        assert_eq!(report.counts().get("Failed"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_invocation_without_time_for_any_record_fails() {
        let h = handler();
        let e = event(&[("m1", "a:1:ok", None)]);
        let deadline = Instant::now() + Duration::from_secs(1);
        let report = process(&h, settings(1), e.records(), deadline).await;
        assert!(matches!(
            report.failures(),
            Err(BatchError::NoTimeBudget { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dependency_outage_fails_the_invocation_but_a_partial_one_does_not() {
        let h = handler();
        let all = event(&[("m1", "a:1:fail", None), ("m2", "b:1:fail", None)]);
        let report = run(&h, &all, settings(8)).await;
        assert_eq!(report.failures(), Err(BatchError::Outage(2)));
        assert!(report.outcomes().all(Outcome::is_dependency_failure));

        let some = event(&[("m1", "a:1:fail", None), ("m2", "b:1:ok", None)]);
        let report = run(&h, &some, settings(8)).await;
        assert_eq!(report.failures(), Ok(vec!["m1".into()]));
    }

    #[tokio::test(start_paused = true)]
    async fn the_answer_lists_every_unacknowledged_record_once_by_its_id() {
        let h = handler();
        let e = event(&[
            ("m1", "a:1:ok", None),
            ("m2", "not a body", None),
            ("m3", "b:1:early", None),
            ("m3", "b:1:early", None),
            ("m4", "c:1:ok", None),
        ]);
        let report = run(&h, &e, settings(8)).await;
        assert_eq!(
            labels(&report),
            ["Done", "Invalid", "Early", "Early", "Done"]
        );
        assert_eq!(report.counts().get("Early"), 2);
        assert_eq!(report.counts().get("NotAttempted"), 0);
        let failed = report.failures().expect("a partial failure");
        assert_eq!(failed, ["m2", "m3"]);
        let answer = SqsEvent::response(failed);
        let ids: Vec<_> = answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["m2", "m3"]);

        // A failed record without an id fails the whole batch instead.
        let mut e = event(&[("m1", "a:1:fail", None), ("m2", "b:1:ok", None)]);
        e.records[0].message_id = None;
        let report = run(&h, &e, settings(8)).await;
        assert_eq!(report.failures(), Err(BatchError::Unidentifiable(1)));
    }
}

/// The engine on Kinesis records, with one toy handler generic over
/// [`MessageRecord`](crate::records::MessageRecord) that also runs on SQS:
/// order per partition key, stop at the first failure, the lowest
/// unacknowledged sequence number always answered.
#[cfg(all(test, feature = "kinesis"))]
mod kinesis_engine_tests {
    use std::fmt;
    use std::sync::Mutex;

    use aws_lambda_events::encodings::Base64Data;
    use aws_lambda_events::event::streams::KinesisEventResponse;

    use super::*;
    use crate::records::{BatchEvent, KinesisBatch, MessageRecord};
    use std::time::Duration;

    #[derive(Debug, Clone, PartialEq)]
    struct Done;

    impl fmt::Display for Done {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Done")
        }
    }

    impl Verdict for Done {
        const LABELS: &'static [&'static str] = &["Done"];
        fn label(&self) -> &'static str {
            "Done"
        }
        fn acknowledge(&self) -> bool {
            true
        }
    }

    /// A payload is `name:action`, action `ok` or `fail` (a dependency
    /// failure); the key is the name. Written once for any message source.
    struct Toy {
        applied: Mutex<Vec<String>>,
    }

    impl<R: MessageRecord> Handler<R> for Toy {
        type Event = (String, bool);
        type Verdict = Done;
        type Failure = StoreError;

        fn parse(&self, record: &R) -> Result<(String, bool), ParseError> {
            let text = record.payload_str()?;
            match text.split_once(':') {
                Some((name, "ok")) => Ok((name.into(), true)),
                Some((name, "fail")) => Ok((name.into(), false)),
                _ => Err(ParseError::UnknownType {
                    path: "(body)".into(),
                }),
            }
        }
        fn key(&self, ev: &(String, bool)) -> String {
            ev.0.clone()
        }
        fn rank(&self, _: &(String, bool)) -> u64 {
            0
        }
        fn span(&self, _: &str, _: Option<&(String, bool)>) -> Span {
            Span::none()
        }
        async fn apply(&self, ev: &(String, bool), _: &BatchContext) -> Result<Done, StoreError> {
            if !ev.1 {
                return Err(StoreError::Timeout);
            }
            if let Ok(mut applied) = self.applied.lock() {
                applied.push(ev.0.clone());
            }
            Ok(Done)
        }
    }

    fn toy() -> Toy {
        Toy {
            applied: Mutex::new(Vec::new()),
        }
    }

    fn applied(h: &Toy) -> Vec<String> {
        h.applied.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// A 56-digit sequence number as Kinesis issues them, ending in `n`.
    fn seq(n: u32) -> String {
        format!("4959033827149025660855969253836157109592157598913658{n:04}")
    }

    /// `(sequence, partition key, data)`: a record as Lambda sends it, its
    /// data base64-encoded unless `raw` is set (then put in as is).
    fn kinesis(records: &[(Option<String>, &str, &str, bool)]) -> KinesisBatch {
        let records: Vec<_> = records
            .iter()
            .map(|(sequence, key, data, raw)| {
                let data = if *raw {
                    serde_json::Value::String((*data).into())
                } else {
                    {
                        // `#[non_exhaustive]`: filled through its Vec.
                        let mut bytes = Base64Data::default();
                        bytes.extend_from_slice(data.as_bytes());
                        serde_json::to_value(bytes).unwrap_or_default()
                    }
                };
                let sequence = sequence.clone().unwrap_or_default();
                serde_json::json!({
                    "kinesis": {
                        "kinesisSchemaVersion": "1.0", "partitionKey": key,
                        "sequenceNumber": sequence, "data": data,
                        "approximateArrivalTimestamp": 1545084650.987
                    },
                    "eventSource": "aws:kinesis", "eventVersion": "1.0",
                    "eventID": format!("shardId-000000000006:{sequence}"),
                    "eventName": "aws:kinesis:record", "awsRegion": "us-east-2",
                    "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda-role",
                    "eventSourceARN": "arn:aws:kinesis:us-east-2:123456789012:stream/orders"
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({ "Records": records }))
            .unwrap_or_else(|e| panic!("a Kinesis event: {e}"))
    }

    fn rec(
        n: u32,
        key: &'static str,
        data: &'static str,
    ) -> (Option<String>, &'static str, &'static str, bool) {
        (Some(seq(n)), key, data, false)
    }

    fn settings() -> BatchSettings {
        BatchSettings {
            max_concurrency: 8,
            deadline_margin: Duration::from_secs(2),
            ..BatchSettings::default()
        }
    }

    async fn run<R: MessageRecord>(h: &Toy, records: &[R]) -> BatchReport<Done> {
        process(
            h,
            settings(),
            records,
            Instant::now() + Duration::from_secs(60),
        )
        .await
    }

    fn labels(report: &BatchReport<Done>) -> Vec<&'static str> {
        report.outcomes().map(RecordOutcome::label).collect()
    }

    /// Sequence numbers are decimal strings: the lower is the shorter, or
    /// the lexically lower of equal length.
    fn lowest(ids: &[String]) -> Option<&String> {
        ids.iter().min_by(|a, b| (a.len(), a).cmp(&(b.len(), b)))
    }

    /// Lambda checkpoints below the lowest number answered: every record the
    /// batch did not acknowledge must be at or after it.
    fn assert_checkpoint_holds(report: &BatchReport<Done>, answer: &[String]) {
        let unacknowledged: Vec<String> = report
            .records
            .iter()
            .filter(|r| !r.outcome.acknowledge())
            .filter_map(|r| r.record_id.clone())
            .collect();
        assert_eq!(lowest(answer), lowest(&unacknowledged), "{answer:?}");
        for id in &unacknowledged {
            assert!(answer.contains(id), "{id} unanswered in {answer:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_key_runs_in_order_and_stops_at_its_first_failure() {
        let h = toy();
        let batch = kinesis(&[
            rec(1, "a", "a1:ok"),
            rec(2, "b", "b1:ok"),
            rec(3, "a", "a2:fail"),
            rec(4, "a", "a3:ok"),
            rec(5, "b", "b2:ok"),
            rec(6, "a", "a4:ok"),
        ]);
        let report = run(&h, batch.records()).await;
        assert_eq!(
            labels(&report),
            [
                "Done",
                "Done",
                "Failed",
                "NotAttempted",
                "Done",
                "NotAttempted"
            ]
        );
        assert_eq!(
            report.records[3].outcome,
            RecordOutcome::NotAttempted(Skip::FifoGroupBlocked)
        );
        // Key a stopped at a2; key b went on (its records come back with
        // the shard's retry, as duplicates).
        let mut writes = applied(&h);
        writes.sort();
        assert_eq!(writes, ["a1", "b1", "b2"]);
        let answer = report.failures().expect("a partial failure");
        assert_eq!(answer, [seq(3), seq(4), seq(6)]);
        assert_checkpoint_holds(&report, &answer);
    }

    #[tokio::test(start_paused = true)]
    async fn the_lowest_unacknowledged_sequence_number_is_always_answered() {
        let h = toy();
        // The failures are in different keys, the later key's first: the
        // answer must still hold the lowest of all, whatever key finishes
        // first.
        let batch = kinesis(&[
            rec(1, "a", "a1:ok"),
            rec(2, "b", "b1:ok"),
            rec(3, "b", "b2:fail"),
            rec(4, "a", "a2:fail"),
            rec(5, "c", "c1:ok"),
            rec(6, "b", "b3:ok"),
        ]);
        let report = run(&h, batch.records()).await;
        let answer = report.failures().expect("a partial failure");
        assert_eq!(lowest(&answer), Some(&seq(3)));
        assert_checkpoint_holds(&report, &answer);
        let response = KinesisBatch::response(answer);
        let ids: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_deref())
            .collect();
        assert_eq!(ids, [Some(&*seq(3)), Some(&*seq(4)), Some(&*seq(6))]);
    }

    #[tokio::test(start_paused = true)]
    async fn bad_base64_is_invalid_for_its_record_and_holds_its_key_back() {
        let h = toy();
        let batch = kinesis(&[
            rec(1, "a", "a1:ok"),
            (Some(seq(2)), "a", "%%% not base64", true),
            rec(3, "b", "b1:ok"),
            rec(4, "a", "a3:ok"),
        ]);
        let report = run(&h, batch.records()).await;
        assert_eq!(labels(&report), ["Done", "Invalid", "Done", "NotAttempted"]);
        assert_eq!(
            report.records[1].outcome,
            RecordOutcome::Invalid(ParseError::InvalidValue {
                path: "kinesis.data".into(),
                reason: "must be base64",
            })
        );
        let mut writes = applied(&h);
        writes.sort();
        assert_eq!(writes, ["a1", "b1"]);
        let answer = report.failures().expect("a partial failure, not the batch");
        assert_eq!(answer, [seq(2), seq(4)]);
        assert_checkpoint_holds(&report, &answer);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_record_without_a_sequence_number_fails_the_invocation() {
        let h = toy();
        // Acknowledged without one: nothing to answer, nothing lost.
        let fine = kinesis(&[(None, "a", "a1:ok", false), rec(2, "b", "b1:fail")]);
        let report = run(&h, fine.records()).await;
        assert_eq!(report.failures(), Ok(vec![seq(2)]));
        // Not acknowledged without one: no itemIdentifier, empty or not,
        // could name it, so the whole batch goes back, loudly.
        for blank in [None, Some("".to_owned()), Some(" ".to_owned())] {
            let lost = kinesis(&[(blank, "a", "a1:fail", false), rec(2, "b", "b1:ok")]);
            let report = run(&h, lost.records()).await;
            assert_eq!(report.failures(), Err(BatchError::Unidentifiable(1)));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_batch_answers_no_failure() {
        let h = toy();
        let batch = kinesis(&[]);
        let report = run(&h, batch.records()).await;
        assert!(report.records.is_empty());
        assert_eq!(report.starved, None);
        let answer = report.failures().expect("nothing failed");
        assert_eq!(
            KinesisBatch::response(answer),
            KinesisEventResponse::default()
        );
    }

    #[cfg(feature = "sqs")]
    #[tokio::test(start_paused = true)]
    async fn the_same_handler_runs_on_sqs() {
        use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
        let h = toy();
        let mut event = SqsEvent::default();
        for (id, body) in [("m1", "a:ok"), ("m2", "b:fail"), ("m3", "nonsense")] {
            let mut m = SqsMessage::default();
            m.message_id = Some(id.into());
            m.body = Some(body.into());
            event.records.push(m);
        }
        let report = run(&h, event.records()).await;
        assert_eq!(labels(&report), ["Done", "Failed", "Invalid"]);
        assert_eq!(report.failures(), Ok(vec!["m2".into(), "m3".into()]));
    }
}
