//! The DynamoDB adapter: the only module that knows attribute names, builds
//! expressions or touches SDK types.
//!
//! One event = one `UpdateItem`. Its ConditionExpression is the state-machine
//! guard from [`EventKind::requires`] plus `last_event_seq = :prev` (the event
//! is the order's next one: seqs are contiguous per order), and it asks
//! for `ReturnValuesOnConditionCheckFailure = ALL_OLD` (`send_conditional`
//! sets it; the transaction item sets it itself): when the condition
//! fails DynamoDB returns the item it checked, so the refusal is classified
//! from the very state that caused it, with no second read (which could see a
//! different state) and no second request.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, Update};

use crate::domain::{
    MAX_PROCESSED_HASHES, MAX_REJECTED_EVENTS, OrderSnapshot, OrderView, Requires,
    processed_entry_with, window_after,
};
use crate::event::{OrderEvent, Payload};
use lambda_idempotency::StoreError;
use lambda_idempotency::dynamo::{Conditional, from_item, n, s, send_conditional, store_error};
use lambda_idempotency::time::rfc3339;

/// The table's hash key.
pub const KEY: &str = "order_id";

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
        // Hashed once, for `event_hash` and the processed_hashes entry.
        let hash = event.content_hash();
        // Both lists are replaced by bounded windows of what was observed
        // (the condition below guarantees it is still what is stored), so
        // an order that keeps receiving illegal events stays far below
        // DynamoDB's 400 KB item limit.
        let strings =
            |v: Vec<String>| AttributeValue::L(v.into_iter().map(AttributeValue::S).collect());
        let processed = window_after(
            &observed.processed_hashes,
            processed_entry_with(event, &hash),
            MAX_PROCESSED_HASHES,
        );
        let rejected = window_after(
            &observed.rejected_events,
            event.event_id.to_string(),
            MAX_REJECTED_EVENTS,
        );
        let values = HashMap::from([
            (":observed".to_owned(), s(observed.status.as_str())),
            (":prev".to_owned(), n(observed.last_event_seq)),
            (":seq".to_owned(), n(event.seq.get())),
            (":eid".to_owned(), s(event.event_id.as_str())),
            (":type".to_owned(), s(event.kind().as_str())),
            (":ph".to_owned(), strings(processed)),
            (":rej".to_owned(), strings(rejected)),
            // Items from before the count was kept start from their list.
            (":counted".to_owned(), n(observed.rejected_events.len())),
            (":one".to_owned(), n(1)),
            (":hash".to_owned(), AttributeValue::S(hash)),
            (":now".to_owned(), s(&rfc3339(SystemTime::now()))),
        ]);
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(event.order_id.as_str()))
            // `last_event_*` describe the last event *processed*; `history`
            // stays the list of applied events and `rejected_events` gets
            // this one (the latest ones; `rejected_count` counts them all),
            // so an audit can tell them apart.
            .update_expression(
                "SET last_event_seq = :seq, last_event_id = :eid, last_event_type = :type, \
                 event_hash = :hash, updated_at = :now, rejected_events = :rej, \
                 rejected_count = if_not_exists(rejected_count, :counted) + :one, \
                 processed_hashes = :ph",
            )
            .condition_expression("#st = :observed AND last_event_seq = :prev")
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(values));
        Self::send(request).await
    }

    async fn send(request: UpdateItemFluentBuilder) -> Result<Write, StoreError> {
        match send_conditional(request).await? {
            Conditional::Committed => Ok(Write::Applied),
            Conditional::Refused(item) => item
                .map(from_item::<OrderSnapshot>)
                .transpose()
                .map(Write::Refused),
        }
    }

    /// Build (without sending) the conditional UpdateItem for `event`. Public
    /// so the benchmark can measure the per-message CPU cost without I/O.
    pub fn update_request(&self, event: &OrderEvent) -> UpdateItemFluentBuilder {
        let e = expressions(event);
        self.client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(event.order_id.as_str()))
            .update_expression(e.update)
            .condition_expression(e.condition)
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(e.values))
    }

    /// The very same conditional write as [`Self::update_request`], as one
    /// item of a `TransactWriteItems`: the order API commits an OrderPlaced
    /// (seq 1) together with its idempotency record, and the item it writes
    /// must be the one the consumer would have written, so that the rest of
    /// the lifecycle arrives through SQS unchanged.
    pub fn transact_update(&self, event: &OrderEvent) -> Result<Update, StoreError> {
        self.transact_update_owned(event, None)
    }

    /// [`Self::transact_update`], also setting the order's `owner` (the
    /// order API's hash of the principal that placed it, which `GET
    /// /orders/{orderId}` compares): the consumer's item plus that one
    /// attribute, which the consumer's later writes leave alone.
    pub fn transact_update_owned(
        &self,
        event: &OrderEvent,
        owner: Option<&str>,
    ) -> Result<Update, StoreError> {
        let mut e = expressions(event);
        if let Some(owner) = owner {
            // Every expression starts with one SET clause and has no other.
            e.update.push_str(", #owner = :owner");
            e.values.insert(":owner".to_owned(), s(owner));
        }
        let mut update = Update::builder();
        if owner.is_some() {
            update = update.expression_attribute_names("#owner", OWNER);
        }
        update
            .table_name(&self.table)
            .key(KEY, s(event.order_id.as_str()))
            .update_expression(e.update)
            .condition_expression(e.condition)
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(e.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(StoreError::from)
    }

    /// The order as the read side shows it (`GET /orders/{orderId}`), or
    /// `None` when there is no such order. Strongly consistent: a client
    /// that was just answered 201 must find its order.
    pub async fn get(&self, order_id: &str) -> Result<Option<OrderView>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(order_id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| store_error(&e, "GetItem"))?;
        out.item.map(from_item::<OrderView>).transpose()
    }
}

/// The order item's attribute that names (as a hash) the order API caller
/// who placed it; absent on orders placed through SQS.
pub const OWNER: &str = "owner";

/// The parts of an event's conditional write, shared by the single
/// UpdateItem and the transactional form.
struct Expressions {
    update: String,
    condition: String,
    values: HashMap<String, AttributeValue>,
}

fn expressions(event: &OrderEvent) -> Expressions {
    let kind = event.kind();
    // At most 16 values (a Placed guarded by its contradiction, or a
    // transition from three statuses): one allocation for the map.
    let mut values: HashMap<String, AttributeValue> = HashMap::with_capacity(16);
    let mut put = |k: &str, v: AttributeValue| {
        values.insert(k.to_owned(), v);
    };

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
    // Hashed once, for `event_hash` and the processed_hashes entry.
    let hash = event.content_hash();
    put(
        ":ph",
        AttributeValue::L(vec![AttributeValue::S(processed_entry_with(event, &hash))]),
    );
    put(":hash", AttributeValue::S(hash));
    put(":now", s(&rfc3339(SystemTime::now())));
    put(":nil", AttributeValue::L(vec![]));
    put(":eidl", AttributeValue::L(vec![s(event.event_id.as_str())]));
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
    Expressions {
        update: format!("SET {}", set.join(", ")),
        condition,
        values,
    }
}
