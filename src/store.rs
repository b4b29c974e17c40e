//! The DynamoDB adapter: the only module that knows attribute names, builds
//! expressions or touches SDK types.
//!
//! One event = one `UpdateItem`. Its ConditionExpression is the state-machine
//! guard from [`EventKind::requires`] plus `last_event_seq = :prev` (the event
//! is the order's next one: seqs are contiguous per order), and it asks
//! for `ReturnValuesOnConditionCheckFailure = ALL_OLD`: when the condition
//! fails DynamoDB returns the item it checked, so the refusal is classified
//! from the very state that caused it, with no second read (which could see a
//! different state) and no second request.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, StreamSpecification, StreamViewType,
};

use crate::domain::{OrderSnapshot, Requires, processed_entry};
use crate::error::StoreError;
use crate::event::{OrderEvent, Payload};

/// The table's hash key.
pub const KEY: &str = "order_id";

/// Retry policy for every DynamoDB call, chosen so that the worst case fits
/// well inside a Lambda invocation: 3 attempts (the first plus 2 retries)
/// with jittered exponential backoff from 50 ms capped at 1 s. Throttling is
/// retried by the SDK's standard mode too; past these attempts the record is
/// reported as a batch item failure and SQS redelivers it later, which is a
/// far better backoff than burning the invocation's time.
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(50))
        .with_max_backoff(Duration::from_secs(1))
}

/// Timeouts: connect 1 s, one attempt 2 s, the whole operation (all attempts
/// and backoff) 5 s. A single UpdateItem normally takes single-digit
/// milliseconds; these bound a stuck connection. The batch code additionally
/// cuts every write off at the invocation deadline minus a safety margin.
pub fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(Duration::from_secs(2))
        .operation_timeout(Duration::from_secs(5))
        .build()
}

/// What DynamoDB said to one conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Applied,
    /// The condition failed; the item it was checked against, if any.
    Refused(Option<OrderSnapshot>),
}

/// Writes order events to one table. Cheap to share: the SDK client is a
/// handle around a connection pool.
#[derive(Debug, Clone)]
pub struct OrderStore {
    client: Client,
    table: String,
}

impl OrderStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Apply `event` with a single conditional UpdateItem.
    pub async fn apply(&self, event: &OrderEvent) -> Result<Write, StoreError> {
        Self::send(self.update_request(event)).await
    }

    /// Record that `event`, the order's next event, was rejected: spend its
    /// seq (so the events after it can apply) without touching the status or
    /// the order's data. `observed` is the item the rejection was decided
    /// from; the write is conditional on it being unchanged, so a concurrent
    /// change is classified again instead of overwritten.
    pub async fn record_rejection(
        &self,
        event: &OrderEvent,
        observed: &OrderSnapshot,
    ) -> Result<Write, StoreError> {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: u64| AttributeValue::N(v.to_string());
        let values = HashMap::from([
            (":observed".to_owned(), s(observed.status.as_str())),
            (":prev".to_owned(), n(observed.last_event_seq)),
            (":seq".to_owned(), n(event.seq.get())),
            (":eid".to_owned(), s(event.event_id.as_str())),
            (":type".to_owned(), s(event.kind().as_str())),
            (":hash".to_owned(), s(&event.content_hash())),
            (":now".to_owned(), s(&rfc3339(SystemTime::now()))),
            (":nil".to_owned(), AttributeValue::L(vec![])),
            (
                ":eidl".to_owned(),
                AttributeValue::L(vec![s(event.event_id.as_str())]),
            ),
            (
                ":ph".to_owned(),
                AttributeValue::L(vec![s(&processed_entry(event))]),
            ),
        ]);
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(event.order_id.as_str()))
            // `last_event_*` describe the last event *processed*; `history`
            // stays the list of applied events and `rejected_events` gets
            // this one, so an audit can tell them apart.
            .update_expression(
                "SET last_event_seq = :seq, last_event_id = :eid, last_event_type = :type, \
                 event_hash = :hash, updated_at = :now, \
                 rejected_events = list_append(if_not_exists(rejected_events, :nil), :eidl), \
                 processed_hashes = list_append(if_not_exists(processed_hashes, :nil), :ph)",
            )
            .condition_expression("#st = :observed AND last_event_seq = :prev")
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        Self::send(request).await
    }

    async fn send(request: UpdateItemFluentBuilder) -> Result<Write, StoreError> {
        match request.send().await {
            Ok(_) => Ok(Write::Applied),
            Err(err) => match classify_sdk_error(err) {
                Refusal::Condition(item) => item
                    .map(|item| {
                        serde_dynamo::from_item::<_, OrderSnapshot>(item)
                            .map_err(|e| StoreError::CorruptItem(e.to_string()))
                    })
                    .transpose()
                    .map(Write::Refused),
                Refusal::Error(e) => Err(e),
            },
        }
    }

    /// Build (without sending) the conditional UpdateItem for `event`. Public
    /// so the benchmark can measure the per-message CPU cost without I/O.
    pub fn update_request(&self, event: &OrderEvent) -> UpdateItemFluentBuilder {
        let kind = event.kind();
        let mut values: HashMap<String, AttributeValue> = HashMap::new();
        let mut put = |k: &str, v: AttributeValue| {
            values.insert(k.to_owned(), v);
        };
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: u64| AttributeValue::N(v.to_string());

        // The guard. `#st IN (...)` is false on a missing item, so a
        // non-Placed event for an unknown order is refused with no item
        // returned, which classification reads as "early".
        let condition = match kind.requires() {
            // An order's first event is its seq 1, and only that event may
            // create the item.
            Requires::Absent if event.seq.get() == 1 => format!("attribute_not_exists({KEY})"),
            // An OrderPlaced with a later seq can never apply: it needs the
            // item absent *and* its predecessor processed. The write is
            // still sent, with that contradiction as its condition, because
            // the refusal brings the item back (ALL_OLD) in the same
            // request: none (Early: the order's real first events are still
            // to come), or the order (Stale, Duplicate, or Rejected in turn).
            Requires::Absent => {
                put(":prev", n(event.seq.get() - 1));
                format!("attribute_not_exists({KEY}) AND last_event_seq = :prev")
            }
            Requires::StatusIn(from) => {
                let names: Vec<String> = from
                    .iter()
                    .enumerate()
                    .map(|(i, st)| {
                        let name = format!(":from{i}");
                        put(&name, s(st.as_str()));
                        name
                    })
                    .collect();
                // Contiguous seqs: only the order's next event may apply. A
                // lower seq is a redelivery (or superseded); a higher one
                // must wait for its predecessors (see `classify_refusal`).
                put(":prev", n(event.seq.get().saturating_sub(1)));
                format!("#st IN ({}) AND last_event_seq = :prev", names.join(", "))
            }
        };

        let mut set = vec![
            "#st = :to",
            "last_event_seq = :seq",
            "last_event_id = :eid",
            "last_event_type = :type",
            "event_hash = :hash",
            "updated_at = :now",
            // The audit trail of applied eventIds: at most one entry per
            // transition (the state machine has no cycles), and the cheapest
            // proof that nothing was applied twice.
            "history = list_append(if_not_exists(history, :nil), :eidl)",
            // Every processed seq's content hash: a changed payload under an
            // older seq is then a Conflict, not a silent Stale.
            "processed_hashes = list_append(if_not_exists(processed_hashes, :nil), :ph)",
        ];
        put(":to", s(kind.target().as_str()));
        put(":seq", n(event.seq.get()));
        put(":eid", s(event.event_id.as_str()));
        put(":type", s(kind.as_str()));
        put(":hash", s(&event.content_hash()));
        put(":now", s(&rfc3339(SystemTime::now())));
        put(":nil", AttributeValue::L(vec![]));
        put(":eidl", AttributeValue::L(vec![s(event.event_id.as_str())]));
        put(":ph", AttributeValue::L(vec![s(&processed_entry(event))]));
        put(":occ", s(event.occurred_at.as_str()));
        match &event.payload {
            Payload::Placed {
                customer_id,
                amount,
                currency,
            } => {
                set.extend([
                    "customer_id = :cust",
                    "amount = :amt",
                    "currency = :cur",
                    "placed_at = :occ",
                ]);
                put(":cust", s(customer_id.as_str()));
                put(":amt", n(amount.get()));
                put(":cur", s(currency.as_str()));
            }
            Payload::Paid {
                payment_id,
                amount,
                currency,
            } => {
                set.extend([
                    "payment_id = :pay",
                    "paid_amount = :amt",
                    "paid_currency = :cur",
                    "paid_at = :occ",
                ]);
                put(":pay", s(payment_id.as_str()));
                put(":amt", n(amount.get()));
                put(":cur", s(currency.as_str()));
            }
            Payload::Shipped {
                carrier,
                tracking_id,
            } => {
                set.extend([
                    "carrier = :carrier",
                    "tracking_id = :trk",
                    "shipped_at = :occ",
                ]);
                put(":carrier", s(carrier));
                put(":trk", s(tracking_id.as_str()));
            }
            Payload::Delivered => set.push("delivered_at = :occ"),
            Payload::Cancelled { reason } => {
                set.extend(["cancel_reason = :reason", "cancelled_at = :occ"]);
                put(":reason", s(reason));
            }
        }
        // Every value above is referenced (DynamoDB rejects unused ones):
        // :seq by SET even where the guard (Placed) does not use it.

        self.client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(event.order_id.as_str()))
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression(condition)
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }
}

/// What DynamoDB said to a conditional UpdateItem, for the adapters that
/// read the refused item themselves (the notifier's).
pub(crate) enum Conditional {
    Committed,
    /// The condition failed; the item (ALL_OLD) it was checked against.
    Refused(Option<HashMap<String, AttributeValue>>),
}

/// Send a conditional UpdateItem, mapping errors as every adapter does.
pub(crate) async fn send_conditional(
    request: UpdateItemFluentBuilder,
) -> Result<Conditional, StoreError> {
    match request.send().await {
        Ok(_) => Ok(Conditional::Committed),
        Err(err) => match classify_sdk_error(err) {
            Refusal::Condition(item) => Ok(Conditional::Refused(item)),
            Refusal::Error(e) => Err(e),
        },
    }
}

enum Refusal {
    Condition(Option<HashMap<String, AttributeValue>>),
    Error(StoreError),
}

/// Map an SDK error by its variant (and, for errors this SDK version does not
/// model, by the structured error code and HTTP status). The full error chain
/// is logged once here, where its context is still available.
fn classify_sdk_error(err: SdkError<UpdateItemError>) -> Refusal {
    let mapped = match &err {
        SdkError::ServiceError(ctx) => {
            let code = ctx.err().code().unwrap_or("Unknown").to_owned();
            match ctx.err() {
                UpdateItemError::ConditionalCheckFailedException(e) => {
                    return Refusal::Condition(e.item().cloned());
                }
                UpdateItemError::ProvisionedThroughputExceededException(_)
                | UpdateItemError::RequestLimitExceeded(_)
                | UpdateItemError::ThrottlingException(_) => StoreError::Throttled { code },
                UpdateItemError::ResourceNotFoundException(_) => StoreError::TableNotFound,
                UpdateItemError::InternalServerError(_) => StoreError::Server { code },
                // Concurrent transactions on the item: transient by definition.
                UpdateItemError::TransactionConflictException(_)
                | UpdateItemError::ReplicatedWriteConflictException(_) => {
                    StoreError::Server { code }
                }
                _ => by_code(code, ctx.raw().status().as_u16()),
            }
        }
        other => transport_error(other),
    };
    tracing::debug!(error = %DisplayErrorContext(&err), kind = %mapped, "DynamoDB call failed");
    Refusal::Error(mapped)
}

/// A service error this SDK version does not model as a variant of the
/// operation's error, mapped by its structured code and HTTP status.
pub(crate) fn by_code(code: String, status: u16) -> StoreError {
    match code.as_str() {
        "ThrottlingException"
        | "ProvisionedThroughputExceededException"
        | "RequestLimitExceeded" => StoreError::Throttled { code },
        "AccessDeniedException"
        | "UnrecognizedClientException"
        | "MissingAuthenticationTokenException"
        | "InvalidSignatureException" => StoreError::AccessDenied { code },
        _ if status >= 500 => StoreError::Server { code },
        _ => StoreError::Client { code },
    }
}

/// Errors that never reached a DynamoDB verdict: timeouts, connections,
/// unreadable responses, requests that could not be built.
pub(crate) fn transport_error<E, R>(err: &SdkError<E, R>) -> StoreError {
    match err {
        SdkError::TimeoutError(_) => StoreError::Timeout,
        SdkError::DispatchFailure(d) if d.is_timeout() => StoreError::Timeout,
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => StoreError::Network,
        SdkError::ConstructionFailure(_) => StoreError::Client {
            code: "ConstructionFailure".into(),
        },
        _ => StoreError::Network,
    }
}

/// Create a table with a string hash key, on demand. For tests, the local
/// demo and tooling; in AWS the tables come from template.yaml.
pub async fn create_table_with_key(
    client: &Client,
    table: &str,
    key: &str,
) -> Result<(), StoreError> {
    create(client, table, key, false).await
}

/// Create the orders table with its stream (old and new images), as
/// template.yaml does: the order notifier's outbox.
pub async fn create_table_with_stream(client: &Client, table: &str) -> Result<(), StoreError> {
    create(client, table, KEY, true).await
}

async fn create(client: &Client, table: &str, key: &str, stream: bool) -> Result<(), StoreError> {
    let stream = stream
        .then(|| {
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
        })
        .transpose()
        .map_err(|e| StoreError::Client {
            code: e.to_string(),
        })?;
    client
        .create_table()
        .set_stream_specification(stream)
        .table_name(table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(key)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(|e| StoreError::Client {
                    code: e.to_string(),
                })?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(key)
                .key_type(KeyType::Hash)
                .build()
                .map_err(|e| StoreError::Client {
                    code: e.to_string(),
                })?,
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .map_err(|e| {
            tracing::warn!(error = %DisplayErrorContext(&e), "CreateTable failed");
            StoreError::Client {
                code: e.code().unwrap_or("CreateTableFailed").to_owned(),
            }
        })?;
    // Real DynamoDB needs a moment; local servers answer ACTIVE at once.
    client
        .wait_until_table_exists()
        .table_name(table)
        .wait(Duration::from_secs(120))
        .await
        .map_err(|_| StoreError::Timeout)?;
    Ok(())
}

/// Create the orders table (hash key `order_id`, on-demand).
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    create_table_with_key(client, table, KEY).await
}

/// Format a time as RFC 3339 UTC with millisecond precision, e.g.
/// `2026-11-29T10:15:00.123Z`. (Days-to-civil from H. Hinnant's algorithm;
/// not worth a date crate for one timestamp.)
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z, a leap day.
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_798_761_599);
        assert_eq!(rfc3339(t), "2026-12-31T23:59:59.000Z");
    }
}
