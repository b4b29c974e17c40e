//! The order API's DynamoDB adapter: the idempotency table's layout (the
//! library's store over it) and the one write only the order API makes.
//!
//! A first request costs two writes: the layer's conditional PutItem that
//! claims the key (IN_PROGRESS, leased until the invocation's deadline),
//! then one TransactWriteItems that writes the order (the order consumer's
//! own OrderPlaced write, [`OrderStore::transact_update_owned`]) and
//! completes the key with the response, so no crash can leave one without
//! the other. A repeat costs one refused PutItem: the refusal brings the
//! stored record back (ALL_OLD), so a replay needs no read at all.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::TransactWriteItem;
use lambda_http::http::header::{CONTENT_TYPE, LOCATION};

use crate::domain::StoredResponse;
use lambda_idempotency::StoreError;
use lambda_idempotency::config::ConfigError;
use lambda_idempotency::dynamo::{Item, number, string};
use lambda_idempotency::idempotency::{
    Claim, IdempotencyOptions, IdempotencyStore, IdempotencyTable, TransactError,
};
use orders::event::OrderEvent;
use orders::store::OrderStore;

/// The idempotency table's hash key.
pub const KEY: &str = "idempotency_key";
/// The idempotency table's TTL attribute (epoch seconds).
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// A key completed by the order API before it ran on the library's layer
/// (up to cbe2055) kept its response in attributes of its own, not in
/// `data`: the status (N), the body (S) and the `Location` (S). Its key,
/// TTL, `status`, `fingerprint`, `attempt` and `lease_until` are the
/// layer's, byte for byte.
const LEGACY_STATUS: &str = "response_status";
const LEGACY_BODY: &str = "response_body";
const LEGACY_LOCATION: &str = "location";

/// The stored response of a key the previous build completed, as the layer
/// stores one: so that a repeat within `IDEMPOTENCY_TTL_SECONDS` of an
/// in-place upgrade replays what that build answered (its status, body,
/// `Location`, and the `application/json` it always sent) instead of a
/// 500. Errors name the attribute, never its value.
pub fn legacy_output(item: &Item) -> Result<String, StoreError> {
    let status: u16 = number(item, LEGACY_STATUS)?;
    Ok(StoredResponse::new(status)
        .header(CONTENT_TYPE.as_str(), "application/json")
        .header(LOCATION.as_str(), string(item, LEGACY_LOCATION)?)
        .text(string(item, LEGACY_BODY)?)
        .encode())
}

/// Orders and idempotency records, each in its table.
#[derive(Debug, Clone)]
pub struct ApiStore {
    idempotency: IdempotencyStore,
    orders: OrderStore,
}

impl ApiStore {
    /// The idempotency `table` (hash key [`KEY`], TTL [`TTL_ATTRIBUTE`];
    /// keys expire after the store's default until [`ApiStore::with_expiry`])
    /// and the `orders` store. Fails on a table name DynamoDB would refuse.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        orders: OrderStore,
    ) -> Result<Self, ConfigError> {
        let table = IdempotencyTable::new(table)?
            .key_attribute(KEY)?
            .ttl_attribute(TTL_ATTRIBUTE)?;
        Ok(ApiStore {
            idempotency: IdempotencyStore::new(client, table, IdempotencyOptions::default())?
                .legacy_output(legacy_output),
            orders,
        })
    }

    /// The same store, its keys answering for `secs` seconds (at least
    /// one: `IDEMPOTENCY_TTL_SECONDS` is read in 1..=31536000).
    pub fn with_expiry(&self, secs: u64) -> Self {
        let options = IdempotencyOptions {
            expiry: std::time::Duration::from_secs(secs.max(1)),
            ..self.idempotency.options().clone()
        };
        ApiStore {
            // At least a second: the one expiry the store refuses is
            // shorter, so the fallback (the store as it is) never runs.
            idempotency: self
                .idempotency
                .with_options(options)
                .unwrap_or_else(|_| self.idempotency.clone()),
            orders: self.orders.clone(),
        }
    }

    /// The idempotency store (claims, completions, releases).
    pub fn idempotency(&self) -> &IdempotencyStore {
        &self.idempotency
    }

    /// The orders store (reads for `GET /orders/{orderId}`).
    pub fn orders(&self) -> &OrderStore {
        &self.orders
    }

    /// Write the order and complete the claim with `response`, in one
    /// TransactWriteItems whose ClientRequestToken is the attempt id (the
    /// store's `transact`: a re-send after a lost answer is answered as the
    /// success it was). `owner` ([`crate::domain::owner_of`]) is written on
    /// the order, for `GET /orders/{orderId}` to show it to its owner only.
    pub async fn commit(
        &self,
        c: &Claim<'_>,
        order: &OrderEvent,
        owner: &str,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let complete = self.idempotency.completion(c, &response.encode())?;
        let place = self.orders.transact_update_owned(order, Some(owner))?;
        let items = vec![complete, TransactWriteItem::builder().update(place).build()];
        match self.idempotency.transact(c, items).await {
            Ok(()) => Ok(()),
            // Lost the lease (it ran out), an order id taken, or a
            // conflicting transaction: nothing was written, and a retry
            // with the same key decides afresh.
            Err(TransactError::Cancelled { reasons }) => Err(match reasons.as_slice() {
                [_, _] if reasons.iter().any(|r| r == "TransactionConflict") => {
                    StoreError::Server {
                        code: "TransactionConflict".into(),
                    }
                }
                _ => StoreError::InconsistentRefusal,
            }),
            Err(TransactError::Store(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;
    use lambda_idempotency::http::StoredBody;

    fn old_completed() -> Item {
        Item::from([
            (LEGACY_STATUS.to_owned(), AttributeValue::N("201".into())),
            (
                LEGACY_BODY.to_owned(),
                AttributeValue::S(r#"{"orderId":"ord_1"}"#.into()),
            ),
            (
                LEGACY_LOCATION.to_owned(),
                AttributeValue::S("/orders/ord_1".into()),
            ),
        ])
    }

    #[test]
    fn a_previous_builds_response_reads_as_the_layers_stored_response() {
        let output = legacy_output(&old_completed()).expect("reads");
        let stored = StoredResponse::decode(&output).expect("the layer's JSON");
        assert_eq!(stored.status, 201);
        assert_eq!(
            stored.headers,
            [
                ("content-type".to_owned(), "application/json".to_owned()),
                ("location".to_owned(), "/orders/ord_1".to_owned()),
            ]
        );
        assert_eq!(
            stored.body,
            StoredBody::Text(r#"{"orderId":"ord_1"}"#.into())
        );
    }

    #[test]
    fn a_malformed_previous_record_names_the_attribute_not_its_value() {
        for (name, bad) in [
            (LEGACY_STATUS, None),
            (LEGACY_STATUS, Some(AttributeValue::S("secret".into()))),
            (LEGACY_STATUS, Some(AttributeValue::N("70000".into()))),
            (LEGACY_BODY, None),
            (LEGACY_BODY, Some(AttributeValue::N("7".into()))),
            (LEGACY_LOCATION, None),
        ] {
            let mut item = old_completed();
            item.insert(
                LEGACY_BODY.to_owned(),
                AttributeValue::S("secret-body".into()),
            );
            match bad {
                Some(v) => item.insert(name.to_owned(), v),
                None => item.remove(name),
            };
            let Err(StoreError::CorruptItem(why)) = legacy_output(&item) else {
                panic!("{name}: a malformed record read")
            };
            assert!(why.contains(&format!("`{name}`")), "{why}");
            assert!(!why.contains("secret") && !why.contains("70000"), "{why}");
        }
    }
}
