//! A consumer of another domain on `lambda-idempotency`'s public API alone:
//! stock reservations (`ReservationRequested`, `ReservationConfirmed`,
//! `ReservationReleased`), each one conditional UpdateItem whose refusal is
//! classified from the item DynamoDB returns. docs/adapting.md walks
//! through it, part by part: the contract ([`parse`]), the outcomes
//! ([`ReservationOutcome`], the pure [`classify`]), the write and the
//! handler ([`ReservationHandler`]); `src/main.rs` is the Lambda `main`.

use lambda_idempotency::dynamo::{Conditional, n, s, send_conditional};
use lambda_idempotency::wire::{Id, as_object, parse_wrapped, req_id, req_str, req_u64};
use lambda_idempotency::{BatchContext, Handler, ParseError, StoreError, verdicts};

/// The function's name: the `errorType` prefix of its invocation errors.
pub const NAME: &str = "Reservations";

/// The three events, in the order they apply to one reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Requested,
    Confirmed,
    Released,
}

impl Kind {
    /// The transition table: the status the event leads to, the write's
    /// guard (the statuses it may follow; a request founds the reservation)
    /// and the statuses the guard names, which the write sets as `:NAME`
    /// (DynamoDB refuses a value the expression does not use).
    pub fn rule(self) -> (&'static str, &'static str, &'static [&'static str]) {
        match self {
            Kind::Requested => ("REQUESTED", "attribute_not_exists(reservation_id)", &[]),
            Kind::Confirmed => ("CONFIRMED", "#st = :REQUESTED", &["REQUESTED"]),
            Kind::Released => ("RELEASED", "#st IN (:REQUESTED, :CONFIRMED)", &LIVE),
        }
    }
}

/// The statuses of a live reservation: what a release may follow.
const LIVE: [&str; 2] = ["REQUESTED", "CONFIRMED"];

/// One parsed, validated event.
#[derive(Debug, Clone)]
pub struct Reservation {
    pub id: Id,
    pub kind: Kind,
    /// The SKU and quantity: only a request carries them.
    pub stock: Option<(Id, u64)>,
}

verdicts! {
    /// What the rules decided for one record. The shared outcomes (Invalid,
    /// Failed, NotAttempted) are the library's: the batch reports each
    /// record as a `RecordOutcome<ReservationOutcome>` around this.
    pub enum ReservationOutcome {
        Applied => ack,
        /// The reservation is already in this event's status.
        Duplicate => ack,
        /// Confirmed or released before it was requested: retry later.
        Early => retry,
        /// Can never apply (confirming a released reservation).
        Rejected => ack(warn),
    }
}

/// Refused: what does the stored status (ALL_OLD) say? Pure. `Err` for a
/// refusal the stored item cannot explain.
pub fn classify(kind: Kind, stored: Option<&str>) -> Result<ReservationOutcome, StoreError> {
    match stored {
        Some(st) if st == kind.rule().0 => Ok(ReservationOutcome::Duplicate),
        Some(_) => Ok(ReservationOutcome::Rejected),
        None if kind != Kind::Requested => Ok(ReservationOutcome::Early),
        // The guard of a request refuses only an existing item.
        None => Err(StoreError::RefusedWithoutItem),
    }
}

/// The handler: one conditional UpdateItem per reservation event, to
/// `table` (hash key `reservation_id`, a string).
pub struct ReservationHandler {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl Handler<lambda_idempotency::SqsMessage> for ReservationHandler {
    type Event = Reservation;
    type Verdict = ReservationOutcome;
    type Failure = StoreError;

    /// Parse one body (plain, SNS- or EventBridge-wrapped) with the
    /// library's strict readers: a specific error, never the value.
    fn parse(&self, record: &lambda_idempotency::SqsMessage) -> Result<Reservation, ParseError> {
        parse_wrapped(record.body.as_deref(), |v| {
            let obj = as_object(v, "(event)")?;
            let kind = match req_str(obj, "", "type")? {
                "ReservationRequested" => Kind::Requested,
                "ReservationConfirmed" => Kind::Confirmed,
                "ReservationReleased" => Kind::Released,
                _ => {
                    return Err(ParseError::UnknownType {
                        path: "type".into(),
                    });
                }
            };
            let stock = (kind == Kind::Requested)
                .then(|| Ok((req_id(obj, "", "sku")?, req_u64(obj, "", "quantity")?)))
                .transpose()?;
            let id = req_id(obj, "", "reservationId")?;
            Ok(Reservation { id, kind, stock })
        })
    }
    fn key(&self, r: &Reservation) -> String {
        r.id.to_string()
    }
    /// Within one reservation, a batch applies Requested before Confirmed
    /// before Released.
    fn rank(&self, r: &Reservation) -> u64 {
        r.kind as u64
    }
    async fn apply(&self, r: &Reservation, _: &BatchContext) -> Result<Self::Verdict, StoreError> {
        let (to, guard, follows) = r.kind.rule();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reservation_id", s(r.id.as_str()))
            .update_expression("SET #st = :to")
            .condition_expression(guard)
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":to", s(to));
        for status in follows {
            update = update.expression_attribute_values(format!(":{status}"), s(status));
        }
        // Only a request carries stock (`parse`).
        if let Some((sku, qty)) = &r.stock {
            update = update
                .update_expression("SET #st = :to, sku = :sku, quantity = :qty")
                .expression_attribute_values(":sku", s(sku.as_str()))
                .expression_attribute_values(":qty", n(qty));
        }
        // A failure DynamoDB did not confirm goes back as `?`: the batch
        // reports it as Failed. A refusal brings the stored item back
        // (send_conditional asks for ALL_OLD): no second read.
        let Conditional::Refused(item) = send_conditional(update).await? else {
            return Ok(ReservationOutcome::Applied);
        };
        let status = item.as_ref().and_then(|i| i.get("status")?.as_s().ok());
        classify(r.kind, status.map(String::as_str))
    }
}
