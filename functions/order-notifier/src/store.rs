//! The notifications table: one record per (order, template), claimed
//! before a delivery and finished after it, each step one conditional
//! UpdateItem with `ReturnValuesOnConditionCheckFailure = ALL_OLD`; and the
//! dead letters of stream records that can never be read, one per record
//! ([`NotificationStore::record_unreadable`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::{Notification, Stored, Unreadable};
use lambda_idempotency::StoreError;
use lambda_idempotency::dynamo::{Conditional, from_item, n as num, s, send_conditional};

/// The table's hash key: `{orderId}#{template}`.
pub const KEY: &str = "notification_id";

const SENDING: &str = "SENDING";
const SENT: &str = "SENT";
const REJECTED: &str = "REJECTED";
/// A dead letter: a stream record that can never be read.
pub const UNREADABLE: &str = "UNREADABLE";

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Ours until the lease expires.
    Granted,
    /// Someone else's (or finished); the record it was checked against.
    Refused(Option<Stored>),
}

/// How a delivery ended, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Sent {
        http_status: u16,
    },
    /// Refused for good: the record keeps the status and why (a fixed
    /// text, no payload values), so a dropped notification is traceable.
    Rejected {
        http_status: u16,
        reason: &'static str,
    },
}

#[derive(Debug, Clone)]
pub struct NotificationStore {
    client: Client,
    table: String,
}

impl NotificationStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        NotificationStore {
            client,
            table: table.into(),
        }
    }

    /// Claim `n` for this attempt (`claim_id`) until `lease_until_ms`. Granted
    /// when nobody has it, or when the last claimant's lease expired (it
    /// crashed, or ran out of time, between sending and recording): sending
    /// again is then safe because the provider deduplicates on the key.
    /// The record keeps `claim_id`: an SDK re-send of this UpdateItem after
    /// its answer was lost is refused against this very claim, which
    /// [`crate::domain::classify_claim_refusal`] recognises.
    pub async fn claim(
        &self,
        n: &Notification,
        claim_id: &str,
        lease_until_ms: u64,
        now_ms: u64,
    ) -> Result<Claim, StoreError> {
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(&n.id()))
            .update_expression(
                "SET #st = :sending, lease_until = :lease, claim_id = :claim, order_id = :order, \
                 template = :template, idempotency_key = :key ADD attempts :one",
            )
            .condition_expression(
                "attribute_not_exists(notification_id) OR (#st = :sending AND lease_until < :now)",
            )
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":sending", s(SENDING))
            .expression_attribute_values(":lease", num(lease_until_ms))
            .expression_attribute_values(":claim", s(claim_id))
            .expression_attribute_values(":order", s(&n.order_id))
            .expression_attribute_values(":template", s(n.template.as_str()))
            .expression_attribute_values(":key", s(&n.idempotency_key()))
            .expression_attribute_values(":one", num(1))
            .expression_attribute_values(":now", num(now_ms));
        match send_conditional(request).await? {
            Conditional::Committed => Ok(Claim::Granted),
            Conditional::Refused(item) => {
                Ok(Claim::Refused(item.as_ref().map(stored).transpose()?))
            }
        }
    }

    /// Record how the delivery ended, if the claim is still ours. `false`:
    /// another invocation took the claim over after our lease expired; it
    /// sends under the same key, so nothing is lost or duplicated.
    pub async fn finish(
        &self,
        n: &Notification,
        claim_id: &str,
        how: Finish,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let (status, code, reason) = match how {
            Finish::Sent { http_status } => (SENT, http_status, None),
            Finish::Rejected {
                http_status,
                reason,
            } => (REJECTED, http_status, Some(reason)),
        };
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(&n.id()))
            .update_expression(if reason.is_some() {
                "SET #st = :final, http_status = :code, #reason = :reason, finished_at = :now \
                 REMOVE lease_until"
            } else {
                "SET #st = :final, http_status = :code, finished_at = :now REMOVE lease_until"
            })
            .condition_expression("#st = :sending AND claim_id = :claim")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":final", s(status))
            .expression_attribute_values(":code", num(u64::from(code)))
            .expression_attribute_values(":now", num(now_ms))
            .expression_attribute_values(":sending", s(SENDING))
            .expression_attribute_values(":claim", s(claim_id));
        let request = match reason {
            Some(reason) => request
                .expression_attribute_names("#reason", "reason")
                .expression_attribute_values(":reason", s(reason)),
            None => request,
        };
        Ok(matches!(
            send_conditional(request).await?,
            Conditional::Committed
        ))
    }

    /// Record a stream record that can never be read, once: `true` when this
    /// call wrote it, `false` when a delivery before did (the key is the
    /// record's, so a redelivery finds it). Only this write's failure holds
    /// the record, and its shard, for a retry. The item keeps where the
    /// record was and why it was refused, never a value of its images.
    pub async fn record_unreadable(&self, u: &Unreadable, now_ms: u64) -> Result<bool, StoreError> {
        let mut set = vec![
            "#st = :unreadable",
            "#reason = :reason",
            "recorded_at = :now",
        ];
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(u.id()))
            .condition_expression("attribute_not_exists(notification_id)")
            .expression_attribute_names("#st", "status")
            .expression_attribute_names("#reason", "reason")
            .expression_attribute_values(":unreadable", s(UNREADABLE))
            .expression_attribute_values(":reason", s(&u.error.to_string()))
            .expression_attribute_values(":now", num(now_ms));
        // What the record says of itself, where it says it.
        for (clause, placeholder, value) in [
            ("event_id = :event_id", ":event_id", &u.event_id),
            ("sequence_number = :seq", ":seq", &u.sequence_number),
            ("event_name = :event_name", ":event_name", &u.event_name),
            ("order_id = :order", ":order", &u.order_id),
        ] {
            if let Some(v) = value {
                set.push(clause);
                request = request.expression_attribute_values(placeholder, s(v));
            }
        }
        let request = request.update_expression(format!("SET {}", set.join(", ")));
        Ok(matches!(
            send_conditional(request).await?,
            Conditional::Committed
        ))
    }

    /// Give the claim back after a failed delivery, so that the retry does
    /// not wait for the lease to expire.
    pub async fn release(&self, n: &Notification, claim_id: &str) -> Result<(), StoreError> {
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(&n.id()))
            .update_expression("SET lease_until = :zero")
            .condition_expression("#st = :sending AND claim_id = :claim")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":zero", num(0))
            .expression_attribute_values(":sending", s(SENDING))
            .expression_attribute_values(":claim", s(claim_id));
        send_conditional(request).await.map(|_| ())
    }
}

/// The record's status and, while SENDING, its lease (serde_dynamo reads
/// the `status` tag; see [`Stored`]).
fn stored(item: &HashMap<String, AttributeValue>) -> Result<Stored, StoreError> {
    from_item(item.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(attrs: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
        let mut item = HashMap::from([
            (KEY.to_owned(), s("ord-1#SHIPPED")),
            ("claim_id".to_owned(), s("c-1")),
        ]);
        item.extend(attrs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        item
    }

    #[test]
    fn a_stored_record_is_read_by_its_status() {
        let cases = [
            (item(&[("status", s(SENT))]), Stored::Sent),
            (
                item(&[("status", s(REJECTED)), ("http_status", num(422))]),
                Stored::Rejected,
            ),
            (
                item(&[
                    ("status", s(SENDING)),
                    ("lease_until", num(1_700_000_000_123u64)),
                ]),
                Stored::Sending {
                    lease_until_ms: 1_700_000_000_123,
                    claim_id: "c-1".into(),
                },
            ),
        ];
        for (item, want) in cases {
            assert_eq!(stored(&item), Ok(want));
        }
    }

    #[test]
    fn a_malformed_record_is_corrupt_and_its_values_are_not_echoed() {
        for bad in [
            item(&[("status", s(SENDING))]),
            item(&[("status", s(SENDING)), ("lease_until", s("soon-secret"))]),
            item(&[("status", s("DELIVERED-secret"))]),
            item(&[]),
        ] {
            match stored(&bad) {
                Err(StoreError::CorruptItem(why)) => assert!(!why.contains("secret"), "{why}"),
                other => panic!("{other:?}"),
            }
        }
    }
}
