//! The order consumer's [`Handler`]: how an order event is parsed, grouped
//! (by orderId, in seq order) and applied (one conditional UpdateItem, plus
//! a second one only to record a rejection in its turn), with the
//! warm-container dedupe cache in front.

use aws_lambda_events::event::sqs::SqsMessage;
use tracing::{Level, Span, field};

use crate::batch::{Cx, Handler, Skip, Verdict};
use crate::cache::{Committed, DedupeCache};
use crate::domain::{OrderSnapshot, Outcome, classify_refusal, rejection_spends_seq};
use crate::error::StoreError;
use crate::event::{OrderEvent, ParseError, parse_body};
use crate::store::{OrderStore, Write};

/// The order consumer's record handling: the store and the cache, both
/// built once per cold start.
#[derive(Debug)]
pub struct Orders {
    store: OrderStore,
    /// Lives as long as the warm container: that is the point of it.
    cache: DedupeCache,
}

impl Orders {
    pub fn new(store: OrderStore, cache: DedupeCache) -> Self {
        Orders { store, cache }
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
    ) -> Result<Option<Option<OrderSnapshot>>, Outcome> {
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
            Err(e) => Err(Outcome::Failed(e)),
        }
    }
}

impl Handler for Orders {
    type Record = SqsMessage;
    type Event = OrderEvent;
    type Outcome = Outcome;

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
    fn settle_without_io(&self, ev: &OrderEvent, cx: &Cx) -> Option<Outcome> {
        let settled = self.cache.check(ev)?;
        cx.cache_hits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(settled)
    }

    async fn apply(&self, ev: &OrderEvent, cx: &Cx) -> Outcome {
        if self.cache.capacity() > 0 {
            cx.cache_misses
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let refused = match self.learn(ev, self.store.apply(ev).await) {
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
        match self.learn(ev, self.store.record_rejection(ev, &observed).await) {
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
}

impl Verdict for Outcome {
    const LABELS: &'static [&'static str] = &Outcome::LABELS;

    fn invalid(error: ParseError) -> Self {
        Outcome::Invalid(error)
    }

    fn not_attempted(skip: Skip) -> Self {
        Outcome::NotAttempted(skip)
    }

    fn failed(error: StoreError) -> Self {
        Outcome::Failed(error)
    }

    fn acknowledge(&self) -> bool {
        Outcome::acknowledge(self)
    }

    fn label(&self) -> &'static str {
        Outcome::label(self)
    }

    fn is_dependency_failure(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    fn is_not_attempted(&self) -> bool {
        matches!(self, Outcome::NotAttempted(_))
    }

    fn level(&self) -> Level {
        match self {
            Outcome::Applied
            | Outcome::Duplicate
            | Outcome::Stale { .. }
            | Outcome::Early { .. } => Level::INFO,
            Outcome::Rejected { .. } | Outcome::NotAttempted(_) => Level::WARN,
            Outcome::Failed(e) if e.is_retryable() => Level::WARN,
            Outcome::Failed(_) | Outcome::Conflict(_) | Outcome::Invalid(_) => Level::ERROR,
        }
    }
}
