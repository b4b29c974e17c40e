//! Loyalty points: `PointsEarned` and `PointsRedeemed` events applied once
//! per `eventId` to a customer's balance, in order per customer, from an
//! SQS queue or a Kinesis stream with one handler; and a voucher redeemed
//! once, whatever the retries, with `Idempotent`.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue as Av, TransactWriteItem, Update};
use lambda_idempotency::dynamo::{Conditional, send_conditional};
use lambda_idempotency::{
    BatchContext, Handler, IdempotencyError, Idempotent, MessageRecord, ParseError, StoreError,
    verdicts,
};
use serde::{Deserialize, Serialize};

/// One event, as producers send it: `{"type": "PointsEarned", "eventId":
/// "e-1", "customerId": "c-1", "points": 100}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PointsEvent {
    #[serde(rename = "type")]
    pub kind: Kind,
    pub event_id: String,
    pub customer_id: String,
    pub points: u64,
}

/// The event types (any other `type` is an invalid record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Kind {
    PointsEarned,
    PointsRedeemed,
}

verdicts! {
    /// What an event came to.
    pub enum Points {
        /// Added to, or taken from, the balance.
        Applied => ack,
        /// Applied before (a redelivery).
        Duplicate => ack,
        /// A redemption the balance cannot cover: never applies.
        Rejected => ack(warn),
    }
}

/// The handler, for records of any source `R` (`SqsMessage`,
/// `KinesisMessage`): one conditional UpdateItem per event on the
/// customer's item (`customerId`: `balance`, and the `events` applied).
pub struct Loyalty {
    pub client: Client,
    pub table: String,
}

impl<R: MessageRecord> Handler<R> for Loyalty {
    type Event = PointsEvent;
    type Verdict = Points;
    type Failure = StoreError;

    fn parse(&self, record: &R) -> Result<PointsEvent, ParseError> {
        record.json()
    }
    /// One customer's events one after another.
    fn key(&self, event: &PointsEvent) -> String {
        event.customer_id.clone()
    }
    async fn apply(&self, e: &PointsEvent, _: &BatchContext) -> Result<Points, StoreError> {
        let (points, id) = (e.points.to_string(), Av::S(e.event_id.clone()));
        // Every event id is kept on the item: a real balance bounds this set
        // (the template's consumers keep a contiguous sequence instead).
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("customerId", Av::S(e.customer_id.clone()))
            .expression_attribute_values(":ids", Av::Ss(vec![e.event_id.clone()]))
            .expression_attribute_values(":id", id)
            .expression_attribute_values(":p", Av::N(points));
        let update = match e.kind {
            Kind::PointsEarned => update
                .update_expression("ADD balance :p, events :ids")
                .condition_expression("NOT contains(events, :id)"),
            Kind::PointsRedeemed => update
                .update_expression("ADD events :ids SET balance = balance - :p")
                .condition_expression("NOT contains(events, :id) AND balance >= :p"),
        };
        // A refusal comes back with the item it was checked against.
        Ok(match send_conditional(update).await? {
            Conditional::Committed => Points::Applied,
            Conditional::Refused(Some(item))
                if item
                    .get("events")
                    .and_then(|v| v.as_ss().ok())
                    .is_some_and(|ids| ids.contains(&e.event_id)) =>
            {
                Points::Duplicate
            }
            Conditional::Refused(_) => Points::Rejected,
        })
    }
}

/// A voucher redemption: its points credited to the customer once.
#[derive(Debug, Serialize, Deserialize)]
pub struct Voucher {
    pub voucher_id: String,
    pub customer_id: String,
    pub points: u64,
}

/// The credit and the voucher's idempotency record commit in one
/// transaction: a retry replays the first answer and credits nothing. The
/// customer's item keeps the vouchers it was credited, so a retry after
/// the record expired is refused (`IdempotencyError::Cancelled`), not
/// credited again.
pub async fn redeem(
    vouchers: &Idempotent<Voucher, u64>,
    table: &str,
    voucher: Voucher,
    deadline: u64,
) -> Result<u64, IdempotencyError<StoreError>> {
    vouchers
        .call_transact(voucher, deadline, |v| async move {
            let credit = Update::builder()
                .table_name(table)
                .key("customerId", Av::S(v.customer_id))
                .update_expression("ADD balance :p, vouchers :vs")
                .condition_expression("NOT contains(vouchers, :v)")
                .expression_attribute_values(":p", Av::N(v.points.to_string()))
                .expression_attribute_values(":vs", Av::Ss(vec![v.voucher_id.clone()]))
                .expression_attribute_values(":v", Av::S(v.voucher_id))
                .build()?;
            let credit = TransactWriteItem::builder().update(credit).build();
            Ok((v.points, vec![credit]))
        })
        .await
}
