//! The order domain of the template (crates/orders), shared by the three
//! order functions under functions/: the order consumer runs its handler,
//! the order API writes an OrderPlaced exactly as the consumer does (its
//! `store`, `event` and view), and the order notifier reads the order states
//! the consumer writes (`domain`). A crate, not a function, so that no
//! function depends on another and each can be removed by deleting its
//! folder (docs/adapting.md).
//!
//! The order consumer (`order-consumer`): SQS order events applied to the
//! orders table, each with one conditional `UpdateItem` that can succeed at
//! most once, and every refusal classified from the item DynamoDB returns
//! with it.
//!
//! - [`event`]: the wire contract, parsed into a validated
//!   [`event::OrderEvent`].
//! - [`domain`]: the state machine and [`domain::classify_refusal`]. Pure.
//! - [`store`]: the DynamoDB adapter that builds the order's expressions.
//! - [`cache`]: the warm-container dedupe cache.
//! - [`OrderHandler`] (here): the [`Handler`] the shared batch machinery runs;
//!   [`OrderFunction`]: the Lambda function; [`OrderConfig`]: its environment.

// Logs go through `tracing`; the one stdout writer is the EMF line (metrics.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cache;
pub mod domain;
pub mod event;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

use aws_lambda_events::event::sqs::SqsMessage;
use tracing::{Level, Span, field};

use cache::{Committed, DedupeCache};
use domain::{OrderSnapshot, Outcome, classify_refusal};
use event::{OrderEvent, ParseError, parse_body};
use lambda_idempotency::RetryClass;
use lambda_idempotency::StoreError;
use lambda_idempotency::Verdict;
use lambda_idempotency::config::{ConfigError, Settings, parse_in, required};
use lambda_idempotency::{BatchContext, Handler};
use lambda_idempotency::{BuildError, Function};
use store::{OrderStore, Write};

/// The function's name in its invocation errors (`OrderConsumer.<case>`).
pub const NAME: &str = "OrderConsumer";
pub const DEFAULT_METRICS_NAMESPACE: &str = "OrderConsumer";
pub const DEFAULT_DEDUPE_CACHE_SIZE: usize = 10_000;

/// The order consumer's record handling: the store and the cache, both
/// built once per cold start.
#[derive(Debug)]
pub struct OrderHandler {
    store: OrderStore,
    /// Lives as long as the warm container: that is the point of it.
    cache: DedupeCache,
}

impl OrderHandler {
    pub fn new(store: OrderStore, cache: DedupeCache) -> Self {
        OrderHandler { store, cache }
    }

    /// The handler over `store`, with the cache `config` sizes.
    pub fn from_config(store: OrderStore, config: &OrderConfig) -> Self {
        let cache = DedupeCache::new(config.dedupe_cache_size, config.dedupe_cache_max_bytes);
        OrderHandler::new(store, cache)
    }

    pub fn cache(&self) -> &DedupeCache {
        &self.cache
    }

    /// The result of one conditional write. `Ok(None)`: it committed;
    /// `Ok(Some(item))`: its condition failed against `item`. The cache
    /// learns only what DynamoDB confirmed.
    fn learn(
        &self,
        ev: &OrderEvent,
        write: Result<Write, StoreError>,
    ) -> Result<Option<Option<OrderSnapshot>>, StoreError> {
        match write {
            Ok(Write::Applied) => {
                self.cache
                    .record(ev.order_id.as_str(), Committed::of_event(ev));
                Ok(None)
            }
            Ok(Write::Refused(current)) => {
                if let Some(item) = &current {
                    self.cache
                        .record(ev.order_id.as_str(), Committed::of_snapshot(item));
                }
                Ok(Some(current))
            }
            Err(e) => Err(e),
        }
    }
}

impl Handler<SqsMessage> for OrderHandler {
    type Event = OrderEvent;
    type Verdict = Outcome;
    type Failure = StoreError;

    fn parse(&self, record: &SqsMessage) -> Result<OrderEvent, ParseError> {
        parse_body(record.body.as_deref())
    }

    fn key(&self, ev: &OrderEvent) -> String {
        ev.order_id.to_string()
    }

    fn rank(&self, ev: &OrderEvent) -> u64 {
        ev.seq.get()
    }

    fn span(&self, message_id: &str, ev: Option<&OrderEvent>) -> Span {
        tracing::info_span!(
            "record",
            message_id,
            order_id = ev.map(|e| e.order_id.as_str()),
            event_id = ev.map(|e| e.event_id.as_str()),
            seq = ev.map(|e| e.seq.get()),
            event_type = ev.map(|e| e.kind().as_str()),
            outcome = field::Empty,
        )
    }

    /// A proven duplicate or stale event costs nothing, not even time.
    fn settle_without_io(&self, ev: &OrderEvent, cx: &BatchContext) -> Option<Outcome> {
        let settled = self.cache.check(ev)?;
        cx.cache_hit();
        Some(settled)
    }

    /// One record's verdict, or the write's failure.
    async fn apply(&self, ev: &OrderEvent, cx: &BatchContext) -> Result<Outcome, StoreError> {
        if self.cache.capacity() > 0 {
            cx.cache_miss();
        }
        let Some(refused) = self.learn(ev, self.store.apply(ev).await)? else {
            return Ok(Outcome::Applied);
        };
        let outcome = classify_refusal(ev, refused.as_ref())?;
        // An event is Rejected only in its turn, and acknowledged only once
        // its seq is spent (the rejection recorded), or the events after it
        // would wait for it forever.
        let Some(observed) = refused.filter(|_| matches!(outcome, Outcome::Rejected { .. })) else {
            return Ok(outcome);
        };
        match self.learn(ev, self.store.record_rejection(ev, &observed).await)? {
            None => Ok(outcome),
            // The order moved on meanwhile (most likely another invocation
            // recorded this very rejection): classify what is there now.
            Some(current) => match classify_refusal(ev, current.as_ref())? {
                again @ Outcome::Rejected { .. } => {
                    tracing::warn!(detail = %again, "rejection could not be recorded; retrying later");
                    Err(StoreError::InconsistentRefusal)
                }
                other => Ok(other),
            },
        }
    }
}

impl Verdict for Outcome {
    const LABELS: &'static [&'static str] = &[
        "Applied",
        "Duplicate",
        "Stale",
        "Rejected",
        "Early",
        "Conflict",
    ];

    fn acknowledge(&self) -> bool {
        Outcome::acknowledge(self)
    }

    fn label(&self) -> &'static str {
        Outcome::label(self)
    }

    fn level(&self) -> Level {
        match self {
            Outcome::Applied
            | Outcome::Duplicate
            | Outcome::Stale { .. }
            | Outcome::Early { .. } => Level::INFO,
            Outcome::Rejected { .. } => Level::WARN,
            Outcome::Conflict(_) => Level::ERROR,
        }
    }

    /// Early waits for its predecessor; a Conflict is the same on every
    /// receive, so it goes to the DLQ without waiting.
    fn retry_class(&self) -> RetryClass {
        match self {
            Outcome::Conflict(_) => RetryClass::Hopeless,
            _ => RetryClass::Predecessor,
        }
    }
}

/// The order consumer's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderConfig {
    /// `TABLE_NAME` (required): the orders table.
    pub table_name: String,
    /// `DEDUPE_CACHE_SIZE` (default 10000, 0 disables): how many orders
    /// the warm container remembers (their latest processed seqs' content
    /// hashes), so that redelivered duplicates cost no DynamoDB request.
    pub dedupe_cache_size: usize,
    /// `DEDUPE_CACHE_MAX_BYTES`: the cache's memory bound, whatever the ids'
    /// lengths (an entry takes from about 0.22 KB with short ids and one
    /// event to about 0.74 KB with 256-byte ids and 8 events, measured by
    /// `tests/cache_memory.rs`; see [`cache`]). Default: an eighth of the function's memory
    /// (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, set by Lambda), or 32 MiB where
    /// that is unknown; at most half of it.
    pub dedupe_cache_max_bytes: usize,
    /// `MAX_CONCURRENCY`, `DEADLINE_MARGIN_MS`, `METRICS_NAMESPACE` (default
    /// `OrderConsumer`).
    pub runtime: Settings,
}

impl OrderConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Build from any lookup function (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let table_name = required(&get, "TABLE_NAME")?;
        let dedupe_cache_size = parse_in(
            &get,
            "DEDUPE_CACHE_SIZE",
            DEFAULT_DEDUPE_CACHE_SIZE as u64,
            0..=10_000_000,
        )? as usize;
        const MIB: u64 = 1024 * 1024;
        // Lambda's own variable, not the user's: a value an emulator sets
        // oddly (or not at all) falls back to the fixed default instead of
        // failing the cold start.
        let memory = get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|mb| (128..=10_240).contains(mb))
            .map(|mb| mb * MIB);
        let dedupe_cache_max_bytes = parse_in(
            &get,
            "DEDUPE_CACHE_MAX_BYTES",
            memory.map_or(32 * MIB, |m| m / 8),
            0..=memory.map_or(16 * 1024 * MIB, |m| m / 2),
        )? as usize;
        Ok(OrderConfig {
            table_name,
            dedupe_cache_size,
            dedupe_cache_max_bytes,
            runtime: Settings::from_lookup(&get, DEFAULT_METRICS_NAMESPACE, "order-consumer")?,
        })
    }
}

/// The `order-consumer` function: built once per cold start, shared by
/// every invocation. Invocation errors are `OrderConsumer.<case>`.
pub type OrderFunction = Function<OrderHandler>;

/// The `order-consumer` function over `store`, configured by `config`.
pub fn function(store: OrderStore, config: OrderConfig) -> Result<OrderFunction, BuildError> {
    Function::builder(OrderHandler::from_config(store, &config))
        .name(NAME)
        .settings(config.runtime)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_idempotency::config::{DEFAULT_DEADLINE_MARGIN_MS, DEFAULT_MAX_CONCURRENCY};
    use std::collections::HashMap;
    use std::time::Duration;

    fn cfg(pairs: &[(&str, &str)]) -> Result<OrderConfig, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OrderConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn table_name_is_required() {
        assert_eq!(cfg(&[]), Err(ConfigError::Missing("TABLE_NAME")));
        assert_eq!(
            cfg(&[("TABLE_NAME", " ")]),
            Err(ConfigError::Missing("TABLE_NAME"))
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let c = cfg(&[("TABLE_NAME", "orders")]).unwrap();
        assert_eq!(c.runtime.max_concurrency(), DEFAULT_MAX_CONCURRENCY);
        assert_eq!(
            c.runtime.deadline_margin(),
            Duration::from_millis(DEFAULT_DEADLINE_MARGIN_MS)
        );
        let c = cfg(&[
            ("TABLE_NAME", "orders"),
            ("MAX_CONCURRENCY", "32"),
            ("DEADLINE_MARGIN_MS", "500"),
        ])
        .unwrap();
        assert_eq!(
            (c.runtime.max_concurrency(), c.runtime.deadline_margin()),
            (32, Duration::from_millis(500))
        );
    }

    #[test]
    fn the_cache_is_bounded_by_the_functions_memory() {
        let c = cfg(&[("TABLE_NAME", "t")]).unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 32 << 20);
        let c = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
        ])
        .unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 32 << 20);
        let c = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ])
        .unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 16 << 20);
        let c = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "odd"),
        ])
        .unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 32 << 20);
        // More than half the function's memory is refused at cold start.
        let err = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
            ("DEDUPE_CACHE_MAX_BYTES", &(200u64 << 20).to_string()),
        ])
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    var: "DEDUPE_CACHE_MAX_BYTES",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn out_of_range_is_a_clear_error() {
        for bad in ["0", "257", "many", "-1"] {
            let err = cfg(&[("TABLE_NAME", "t"), ("MAX_CONCURRENCY", bad)]).unwrap_err();
            assert!(
                matches!(
                    err,
                    ConfigError::Invalid {
                        var: "MAX_CONCURRENCY",
                        ..
                    }
                ),
                "{bad}"
            );
        }
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;
    use crate::domain::{ConflictKind, Status};
    use crate::event::EventKind;
    use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
    use lambda_idempotency::Skip;
    use lambda_idempotency::engine::BatchEvent;
    use lambda_idempotency::engine::{BatchReport, RecordReport, Starved};
    use lambda_idempotency::time::deadline_from_epoch_ms;
    use lambda_idempotency::{BatchError, RecordOutcome};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    use tokio::time::Instant;

    fn to_response(report: &BatchReport<Outcome>) -> Result<SqsBatchResponse, BatchError> {
        report.failures().map(SqsEvent::response)
    }

    fn rep(id: Option<&str>, outcome: impl Into<RecordOutcome<Outcome>>) -> RecordReport<Outcome> {
        RecordReport {
            record_id: id.map(str::to_owned),
            key: None,
            outcome: outcome.into(),
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
                rep(Some("e"), RecordOutcome::Failed(StoreError::Timeout)),
            ],
            ..Default::default()
        };
        assert_eq!(ids(&to_response(&report).unwrap()), ["b", "d", "e"]);
    }

    #[test]
    fn a_failure_without_message_id_fails_the_invocation() {
        let report = BatchReport {
            records: vec![
                rep(Some("a"), Outcome::Applied),
                rep(None, RecordOutcome::Invalid(ParseError::MissingBody)),
            ],
            ..Default::default()
        };
        assert_eq!(
            to_response(&report).unwrap_err(),
            BatchError::Unidentifiable(1)
        );
        // ...but an acknowledged record without an id needs no identifier.
        let report = BatchReport {
            records: vec![rep(None, Outcome::Applied)],
            ..Default::default()
        };
        assert!(to_response(&report).unwrap().batch_item_failures.is_empty());
    }

    #[test]
    fn all_infrastructure_failures_fail_the_invocation() {
        let report = BatchReport {
            records: vec![
                rep(Some("a"), RecordOutcome::Failed(StoreError::Network)),
                rep(
                    Some("b"),
                    RecordOutcome::NotAttempted(Skip::FifoGroupBlocked),
                ),
            ],
            ..Default::default()
        };
        assert_eq!(to_response(&report).unwrap_err(), BatchError::Outage(2));
        // One record that was not an infrastructure failure: partial response.
        let report = BatchReport {
            records: vec![
                rep(Some("a"), RecordOutcome::Failed(StoreError::Network)),
                rep(Some("b"), RecordOutcome::Invalid(ParseError::MissingBody)),
            ],
            ..Default::default()
        };
        assert_eq!(ids(&to_response(&report).unwrap()), ["a", "b"]);
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
        let d = BatchError::Outage(3).diagnostic("OrderConsumer");
        assert_eq!(d.error_type, "OrderConsumer.DependencyOutage");
        assert!(d.error_message.contains("all 3 records failed"));
    }

    #[test]
    fn an_invocation_without_time_for_any_record_fails() {
        let report = BatchReport {
            records: vec![rep(Some("a"), RecordOutcome::NotAttempted(Skip::Deadline))],
            starved: Some(Starved {
                budget_ms: 900,
                margin_ms: 2000,
            }),
            ..Default::default()
        };
        let err = to_response(&report).unwrap_err();
        assert_eq!(
            err,
            BatchError::NoTimeBudget {
                budget_ms: 900,
                margin_ms: 2000
            }
        );
        assert_eq!(
            err.diagnostic("OrderConsumer").error_type,
            "OrderConsumer.TimeoutBelowDeadlineMargin"
        );
    }

    #[test]
    fn empty_batch_is_an_empty_response() {
        assert!(
            to_response(&BatchReport::<Outcome>::default())
                .unwrap()
                .batch_item_failures
                .is_empty()
        );
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;
    use crate::domain::ConflictKind;
    use crate::event::EventKind;
    use lambda_idempotency::{RecordOutcome, Skip};

    #[test]
    fn every_unacknowledged_outcome_has_its_retry_class() {
        let early = Outcome::Early {
            current: None,
            event: EventKind::Paid,
        };
        let cases: [(RecordOutcome<Outcome>, RetryClass); 6] = [
            (early.into(), RetryClass::Predecessor),
            (
                Outcome::Conflict(ConflictKind::ChangedPayload).into(),
                RetryClass::Hopeless,
            ),
            (
                Outcome::Conflict(ConflictKind::SeqTakenByOtherEvent).into(),
                RetryClass::Hopeless,
            ),
            (
                RecordOutcome::Invalid(ParseError::MissingBody),
                RetryClass::Hopeless,
            ),
            (
                RecordOutcome::Failed(StoreError::Timeout),
                RetryClass::Dependency,
            ),
            (
                RecordOutcome::NotAttempted(Skip::FifoGroupBlocked),
                RetryClass::Immediate,
            ),
        ];
        for (outcome, class) in cases {
            assert!(!outcome.acknowledge());
            assert_eq!(outcome.retry_class(), class, "{outcome}");
        }
    }
}
