//! A consumer of another domain on `lambda-idempotency`'s public API alone:
//! stock reservations (`ReservationRequested`, `ReservationConfirmed`,
//! `ReservationReleased`), each one conditional UpdateItem whose refusal is
//! classified from the item DynamoDB returns. docs/adapting.md walks
//! through it, part by part: the contract ([`parse`]), the outcomes
//! ([`ReservationOutcome`], the pure [`classify`]), the write and the
//! handler ([`ReservationHandler`]); `src/main.rs` is the Lambda `main`.

use std::fmt;

use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld;
use lambda_idempotency::dynamo::{Conditional, n, s, send_conditional};
use lambda_idempotency::tracing::{self, Level, Span, field};
use lambda_idempotency::wire::{Id, as_object, parse_wrapped, req_id, req_str, req_u64};
use lambda_idempotency::{
    BatchContext, Handler, ParseError, SqsMessage, StoreError, Unsettled, Verdict,
};

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
    /// The status the event leads to: with the guard (`condition`), the whole
    /// transition table.
    pub fn target(self) -> &'static str {
        match self {
            Kind::Requested => "REQUESTED",
            Kind::Confirmed => "CONFIRMED",
            Kind::Released => "RELEASED",
        }
    }

    /// The write's guard, the statuses the event may follow. A request
    /// founds the reservation; the others need it in one of the statuses
    /// they may follow (named as `:requested`, `:confirmed`, which the
    /// write sets only for the guards that use them: DynamoDB refuses an
    /// unused value).
    fn condition(self) -> &'static str {
        match self {
            Kind::Requested => "attribute_not_exists(reservation_id)",
            Kind::Confirmed => "#st = :requested",
            Kind::Released => "#st IN (:requested, :confirmed)",
        }
    }
}

/// One parsed, validated event.
#[derive(Debug, Clone)]
pub struct Reservation {
    pub id: Id,
    pub kind: Kind,
    /// The SKU and quantity: only a request carries them.
    pub stock: Option<(Id, u64)>,
}

/// Parse one body (plain, SNS- or EventBridge-wrapped) with the library's
/// strict readers: a specific error, never the value.
pub fn parse(body: Option<&str>) -> Result<Reservation, ParseError> {
    parse_wrapped(body, |v| {
        let obj = as_object(v, "(event)")?;
        let kind = match req_str(obj, "", "type")? {
            "ReservationRequested" => Kind::Requested,
            "ReservationConfirmed" => Kind::Confirmed,
            "ReservationReleased" => Kind::Released,
            _ => return Err(ParseError::UnknownType),
        };
        let stock = (kind == Kind::Requested)
            .then(|| Ok((req_id(obj, "", "sku")?, req_u64(obj, "", "quantity")?)))
            .transpose()?;
        Ok(Reservation {
            id: req_id(obj, "", "reservationId")?,
            kind,
            stock,
        })
    })
}

/// What happened to one record: this consumer's verdicts, and the shared
/// outcomes (Invalid, Failed, NotAttempted) with their labels, wording and
/// log levels from the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationOutcome {
    Applied,
    /// The reservation is already in this event's status.
    Duplicate,
    /// Confirmed or released before it was requested: retry later.
    Early,
    /// Can never apply (confirming a released reservation).
    Rejected,
    Unsettled(Unsettled),
}

impl From<Unsettled> for ReservationOutcome {
    fn from(u: Unsettled) -> Self {
        ReservationOutcome::Unsettled(u)
    }
}

impl fmt::Display for ReservationOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReservationOutcome::Unsettled(u) => u.fmt(f),
            own => f.write_str(own.label()),
        }
    }
}

impl Verdict for ReservationOutcome {
    type Failure = StoreError;
    /// The metric names of the verdicts above (the shared ones are added);
    /// `label` returns one of them, and a test checks the two agree.
    const LABELS: &'static [&'static str] = &["Applied", "Duplicate", "Early", "Rejected"];
    fn unsettled(&self) -> Option<&Unsettled> {
        match self {
            ReservationOutcome::Unsettled(u) => Some(u),
            _ => None,
        }
    }
    /// Deleted from the queue: committed, or never to be committed. Early
    /// comes back until its predecessor has applied.
    fn acknowledge(&self) -> bool {
        use ReservationOutcome::*;
        matches!(self, Applied | Duplicate | Rejected)
    }
    fn label(&self) -> &'static str {
        match self {
            ReservationOutcome::Applied => "Applied",
            ReservationOutcome::Duplicate => "Duplicate",
            ReservationOutcome::Early => "Early",
            ReservationOutcome::Rejected => "Rejected",
            ReservationOutcome::Unsettled(u) => u.label(),
        }
    }
    fn level(&self) -> Level {
        match self {
            ReservationOutcome::Rejected => Level::WARN,
            ReservationOutcome::Unsettled(u) => u.level(),
            _ => Level::INFO,
        }
    }
}

/// Refused: what does the stored status (ALL_OLD) say? Pure.
pub fn classify(kind: Kind, stored: Option<&str>) -> ReservationOutcome {
    match stored {
        Some(st) if st == kind.target() => ReservationOutcome::Duplicate,
        Some(_) => ReservationOutcome::Rejected,
        None if kind != Kind::Requested => ReservationOutcome::Early,
        // The guard of a request refuses only an existing item.
        None => ReservationOutcome::failed(StoreError::RefusedWithoutItem),
    }
}

/// The handler: one conditional UpdateItem per reservation event.
pub struct ReservationHandler {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl ReservationHandler {
    /// Writes to `table` (hash key `reservation_id`, a string).
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        let table = table.into();
        ReservationHandler { client, table }
    }
}

impl Handler for ReservationHandler {
    type Record = SqsMessage;
    type Event = Reservation;
    type Outcome = ReservationOutcome;

    fn parse(&self, record: &SqsMessage) -> Result<Reservation, ParseError> {
        parse(record.body.as_deref())
    }
    fn key(&self, r: &Reservation) -> String {
        r.id.to_string()
    }
    /// Within one reservation, a batch applies Requested before Confirmed
    /// before Released.
    fn rank(&self, r: &Reservation) -> u64 {
        r.kind as u64
    }
    fn span(&self, record_id: &str, r: Option<&Reservation>) -> Span {
        let id = r.map(|r| r.id.as_str());
        tracing::info_span!(
            "record",
            message_id = record_id,
            reservation_id = id,
            outcome = field::Empty
        )
    }

    async fn apply(
        &self,
        r: &Reservation,
        _cx: &BatchContext,
    ) -> Result<ReservationOutcome, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reservation_id", s(r.id.as_str()))
            .update_expression("SET #st = :to")
            .condition_expression(r.kind.condition())
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":to", s(r.kind.target()))
            // A refusal brings the stored item back: no second read.
            .return_values_on_condition_check_failure(AllOld);
        let update = match (r.kind, &r.stock) {
            (Kind::Requested, Some((sku, qty))) => update
                .update_expression("SET #st = :to, sku = :sku, quantity = :qty")
                .expression_attribute_values(":sku", s(sku.as_str()))
                .expression_attribute_values(":qty", n(*qty)),
            // `parse` gives every request its stock.
            (Kind::Requested, None) => {
                let sku = ParseError::MissingField { path: "sku".into() };
                return Ok(ReservationOutcome::invalid(sku));
            }
            (Kind::Confirmed, _) => {
                update.expression_attribute_values(":requested", s("REQUESTED"))
            }
            (Kind::Released, _) => update
                .expression_attribute_values(":requested", s("REQUESTED"))
                .expression_attribute_values(":confirmed", s("CONFIRMED")),
        };
        // A failure DynamoDB did not confirm goes back as `?`: the batch
        // reports it as Failed.
        Ok(match send_conditional(update).await? {
            Conditional::Committed => ReservationOutcome::Applied,
            Conditional::Refused(item) => {
                let status = item.as_ref().and_then(|i| i.get("status")?.as_s().ok());
                classify(r.kind, status.map(String::as_str))
            }
        })
    }
}
