//! The order API's DynamoDB adapter: the only module of the API that knows
//! the idempotency table's attribute names or touches SDK types.
//!
//! A first request costs two writes: a conditional PutItem that claims the
//! key (IN_PROGRESS, leased until the invocation's deadline), then one
//! TransactWriteItems that writes the order (the order consumer's own
//! OrderPlaced write, [`OrderStore::transact_update`]) and completes the
//! key with the response, so no crash can leave one without the other. A
//! repeat costs one refused PutItem: the refusal brings the stored record
//! back (ALL_OLD), so a replay needs no read at all.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};

use crate::domain::{Record, StoredResponse};
use lambda_idempotency::StoreError;
use lambda_idempotency::dynamo::{Item, n, number, s, store_error, string};
use order_consumer::orders::event::OrderEvent;
use order_consumer::orders::store::OrderStore;

/// The idempotency table's hash key.
pub const KEY: &str = "idempotency_key";
/// The idempotency table's TTL attribute (epoch seconds).
pub const TTL_ATTRIBUTE: &str = "expires_at";

const IN_PROGRESS: &str = "IN_PROGRESS";
const COMPLETED: &str = "COMPLETED";

/// A claim to make: the key, the request's fingerprint, who claims it and
/// until when.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    /// [`crate::domain::record_key`].
    pub key: &'a str,
    /// [`crate::domain::fingerprint`] of the body.
    pub fingerprint: &'a str,
    /// Unique to this attempt: only it may complete or release the claim.
    pub attempt: &'a str,
    /// Epoch milliseconds: the invocation's deadline.
    pub lease_until: u64,
    /// Epoch seconds.
    pub expires_at: u64,
    /// Epoch milliseconds.
    pub now_ms: u64,
}

/// Orders and idempotency records, each in its table.
#[derive(Debug, Clone)]
pub struct ApiStore {
    client: Client,
    table: String,
    orders: OrderStore,
}

impl ApiStore {
    /// The adapter for the idempotency `table` and the `orders` store.
    pub fn new(client: Client, table: impl Into<String>, orders: OrderStore) -> Self {
        ApiStore {
            client,
            table: table.into(),
            orders,
        }
    }

    /// The orders store (reads for `GET /orders/{orderId}`).
    pub fn orders(&self) -> &OrderStore {
        &self.orders
    }

    /// Claim the key: `Ok(None)` when this attempt now holds it, or the
    /// stored record the claim was refused against (`Some(None)`: refused
    /// without one). The condition admits an absent key, an expired one
    /// (whatever DynamoDB's TTL has deleted yet) and one whose lease is
    /// over (its invocation ended without completing). The record carries
    /// the attempt id: an SDK retry of this PutItem after its answer was
    /// lost is refused against this attempt's own record, which
    /// [`crate::domain::classify`] recognises.
    pub async fn claim(&self, c: &Claim<'_>) -> Result<Option<Option<Record>>, StoreError> {
        let item = HashMap::from([
            (KEY.to_owned(), s(c.key)),
            ("status".to_owned(), s(IN_PROGRESS)),
            ("fingerprint".to_owned(), s(c.fingerprint)),
            ("attempt".to_owned(), s(c.attempt)),
            ("lease_until".to_owned(), n(c.lease_until)),
            (TTL_ATTRIBUTE.to_owned(), n(c.expires_at)),
        ]);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(#k) OR #ex <= :now_s OR (#st = :inp AND #lu <= :now_ms)",
            )
            .expression_attribute_names("#k", KEY)
            .expression_attribute_names("#ex", TTL_ATTRIBUTE)
            .expression_attribute_names("#st", "status")
            .expression_attribute_names("#lu", "lease_until")
            .expression_attribute_values(":now_s", n(c.now_ms / 1000))
            .expression_attribute_values(":now_ms", n(c.now_ms))
            .expression_attribute_values(":inp", s(IN_PROGRESS))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(None),
            Err(SdkError::ServiceError(ctx))
                if matches!(ctx.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                let stored = match ctx.err() {
                    PutItemError::ConditionalCheckFailedException(e) => e.item(),
                    _ => None,
                };
                Ok(Some(stored.map(record).transpose()?))
            }
            Err(e) => Err(store_error(&e, "PutItem")),
        }
    }

    /// Write the order and complete the claim with `response`, in one
    /// TransactWriteItems. The attempt id is the transaction's
    /// ClientRequestToken, and the SDK re-sends the same request (token
    /// included) on its retries, so a retry of a transaction that committed
    /// unseen is answered as a success instead of a cancellation (DynamoDB
    /// keeps a token for 10 minutes, far longer than the SDK's retries
    /// take). Without one of ours (an attempt id over 36 characters) the
    /// SDK fills in a token of its own, once per call: the same holds.
    /// `owner` ([`crate::domain::owner_of`]) is written on the order,
    /// for `GET /orders/{orderId}` to show it to its owner only.
    pub async fn commit(
        &self,
        c: &Claim<'_>,
        order: &OrderEvent,
        owner: &str,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let complete = Update::builder()
            .table_name(&self.table)
            .key(KEY, s(c.key))
            .update_expression(
                "SET #st = :done, response_status = :code, response_body = :body, \
                 #loc = :loc, order_id = :oid REMOVE #lu",
            )
            .condition_expression("#at = :mine AND #st = :inp")
            .expression_attribute_names("#st", "status")
            .expression_attribute_names("#loc", "location")
            .expression_attribute_names("#lu", "lease_until")
            .expression_attribute_names("#at", "attempt")
            .expression_attribute_values(":done", s(COMPLETED))
            .expression_attribute_values(":inp", s(IN_PROGRESS))
            .expression_attribute_values(":mine", s(c.attempt))
            .expression_attribute_values(":code", n(response.status))
            .expression_attribute_values(":body", s(&response.body))
            .expression_attribute_values(":loc", s(&response.location))
            .expression_attribute_values(":oid", s(order.order_id.as_str()))
            .build()
            .map_err(|_| StoreError::Client {
                code: "ConstructionFailure".into(),
            })?;
        let place = self.orders.transact_update_owned(order, Some(owner))?;
        let mut request = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(complete).build())
            .transact_items(TransactWriteItem::builder().update(place).build());
        // DynamoDB allows tokens of up to 36 characters.
        if c.attempt.len() <= 36 {
            request = request.client_request_token(c.attempt);
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(ctx))
                if matches!(
                    ctx.err(),
                    TransactWriteItemsError::TransactionCanceledException(_)
                ) =>
            {
                // Lost the lease (it ran out), an order id taken, or a
                // conflicting transaction: nothing was written, and a retry
                // with the same key decides afresh.
                let codes: Vec<&str> = match ctx.err() {
                    TransactWriteItemsError::TransactionCanceledException(e) => e
                        .cancellation_reasons()
                        .iter()
                        .map(|r| r.code().unwrap_or("None"))
                        .collect(),
                    _ => vec![],
                };
                tracing::warn!(reasons = ?codes, "order transaction cancelled");
                Err(match codes.as_slice() {
                    [_, _] if codes.contains(&"TransactionConflict") => StoreError::Server {
                        code: "TransactionConflict".into(),
                    },
                    _ => StoreError::InconsistentRefusal,
                })
            }
            Err(e) => Err(store_error(&e, "TransactWriteItems")),
        }
    }

    /// Give the key back after a failed commit, so that the client's retry
    /// is not held off by 409 until the lease ends. Only this attempt's
    /// claim, and only while still in progress: a transaction that did
    /// commit unseen keeps its record. Best effort: if this fails too, the
    /// lease still ends at the deadline.
    pub async fn release(&self, c: &Claim<'_>) {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(KEY, s(c.key))
            .condition_expression("#at = :mine AND #st = :inp")
            .expression_attribute_names("#st", "status")
            .expression_attribute_names("#at", "attempt")
            .expression_attribute_values(":mine", s(c.attempt))
            .expression_attribute_values(":inp", s(IN_PROGRESS))
            .send()
            .await;
        if let Err(e) = result {
            let e = store_error(&e, "DeleteItem");
            tracing::warn!(error = %e, "could not release the idempotency key; its lease ends at the deadline");
        }
    }
}

/// A stored idempotency record, read strictly: errors name the attribute.
fn record(item: &Item) -> Result<Record, StoreError> {
    let fingerprint = string(item, "fingerprint")?;
    let expires_at = number(item, TTL_ATTRIBUTE)?;
    match string(item, "status")?.as_str() {
        IN_PROGRESS => Ok(Record::InProgress {
            fingerprint,
            attempt: string(item, "attempt")?,
            lease_until: number(item, "lease_until")?,
            expires_at,
        }),
        COMPLETED => Ok(Record::Completed {
            fingerprint,
            response: StoredResponse {
                status: number(item, "response_status")?,
                body: string(item, "response_body")?,
                location: string(item, "location")?,
                expires_at,
            },
        }),
        _ => Err(StoreError::CorruptItem(
            "`status` is not a known state".into(),
        )),
    }
}
