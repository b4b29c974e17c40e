//! A fourth consumer, of another domain, on the public core only: stock
//! reservations (`ReservationRequested`, `ReservationConfirmed`,
//! `ReservationReleased`), each one conditional UpdateItem whose refusal is
//! classified from the item DynamoDB returns. docs/adapting.md walks
//! through it; `cargo run --example reservations` runs it against a local
//! DynamoDB, and its tests run with the suite.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld;
use lambda_idempotency::Function;
use lambda_idempotency::Settings;
use lambda_idempotency::StoreError;
use lambda_idempotency::dynamo::{Conditional, n, s, send_conditional};
use lambda_idempotency::wire::{
    Id, ParseError, as_object, parse_wrapped, req_id, req_str, req_u64,
};
use lambda_idempotency::{BatchContext, Handler};
use lambda_idempotency::{Unsettled, Verdict};
use order_consumer::testing;
use tracing::{Level, Span, field};

/// The three events. Each leads to the status of its name (strum:
/// `REQUESTED`…) from the statuses its guard allows: that is the whole
/// transition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "UPPERCASE")]
pub enum Kind {
    Requested,
    Confirmed,
    Released,
}

impl Kind {
    fn target(self) -> &'static str {
        self.into()
    }
    /// The write's guard. A request founds the reservation; the others need
    /// it in one of the statuses they may follow.
    fn condition(self) -> &'static str {
        match self {
            Kind::Requested => "attribute_not_exists(reservation_id)",
            Kind::Confirmed => "#st = :requested",
            Kind::Released => "#st IN (:requested, :confirmed)",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Reservation {
    pub id: Id,
    pub kind: Kind,
    /// Only a request carries the SKU and quantity.
    pub stock: Option<(Id, u64)>,
}

/// Parse one body (plain, SNS- or EventBridge-wrapped) with the core's
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

/// What happened to one record. `Unsettled` (Invalid, Failed, NotAttempted)
/// is the core's, with its labels, wording and log levels.
#[derive(
    Debug, Clone, PartialEq, Eq, strum::Display, strum::IntoStaticStr, strum::VariantNames,
)]
pub enum ReservationOutcome {
    Applied,
    /// The reservation is already in this event's status.
    Duplicate,
    /// Confirmed or released before it was requested: retry later.
    Early,
    /// Can never apply (confirming a released reservation).
    Rejected,
    #[strum(transparent)]
    Unsettled(Unsettled),
}

impl From<Unsettled> for ReservationOutcome {
    fn from(u: Unsettled) -> Self {
        ReservationOutcome::Unsettled(u)
    }
}

impl Verdict for ReservationOutcome {
    type Failure = StoreError;
    const LABELS: &'static [&'static str] = &["Applied", "Duplicate", "Early", "Rejected"];
    fn unsettled(&self) -> Option<&Unsettled> {
        match self {
            ReservationOutcome::Unsettled(u) => Some(u),
            _ => None,
        }
    }
    fn acknowledge(&self) -> bool {
        use ReservationOutcome::*;
        matches!(self, Applied | Duplicate | Rejected)
    }
    fn label(&self) -> &'static str {
        self.into()
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

pub struct ReservationHandler {
    client: aws_sdk_dynamodb::Client,
    table: String,
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
        let mut update = self
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
        update = match (r.kind, &r.stock) {
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

/// The Lambda function: the handler plus the core's shared settings.
pub fn function(client: aws_sdk_dynamodb::Client, table: &str) -> Function<ReservationHandler> {
    let env = |k: &str| std::env::var(k).ok();
    let runtime = Settings::from_lookup(&env, "Reservations", "reservations")
        .unwrap_or_else(|e| panic!("configuration: {e}"));
    let handler = ReservationHandler {
        client,
        table: table.to_owned(),
    };
    Function::builder(handler)
        .name("Reservations")
        .and_then(|b| b.settings(runtime).build())
        .unwrap_or_else(|e| panic!("building the function: {e}"))
}

/// Run one batch, as Lambda would, against a local DynamoDB, and print
/// each record's outcome.
#[tokio::main]
async fn main() {
    let db = testing::TestDb::new().await;
    let table = db.extra_table("reservations", "reservation_id").await;
    let f = function(db.client.clone(), &table);
    let event = batch_of(&[
        requested("r-1"),
        other("r-2", "ReservationConfirmed"),
        requested("r-1"),
    ]);
    let (report, _) = f.handle_batch(&event, testing::far_deadline()).await;
    for r in &report.records {
        println!("{} {}", r.record_id.as_deref().unwrap_or("-"), r.outcome);
    }
}

fn requested(id: &str) -> String {
    format!(
        r#"{{"type":"ReservationRequested","reservationId":"{id}","sku":"sku-1","quantity":2}}"#
    )
}

fn other(id: &str, kind: &str) -> String {
    format!(r#"{{"type":"{kind}","reservationId":"{id}"}}"#)
}

fn batch_of(bodies: &[String]) -> SqsEvent {
    testing::batch(
        bodies
            .iter()
            .enumerate()
            .map(|(i, b)| testing::record(&format!("m-{i}"), b))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every label a verdict can return is listed for the metrics: the
    /// variants' names (strum's, the label), less the shared outcomes'
    /// wrapper, are exactly `LABELS`.
    #[test]
    fn labels_cover_every_verdict() {
        let own: Vec<&str> = <ReservationOutcome as strum::VariantNames>::VARIANTS
            .iter()
            .copied()
            .filter(|v| *v != "Unsettled")
            .collect();
        assert_eq!(ReservationOutcome::LABELS, own.as_slice());
    }

    async fn run(f: &Function<ReservationHandler>, bodies: &[String]) -> Vec<&'static str> {
        let (report, _) = f
            .handle_batch(&batch_of(bodies), testing::far_deadline())
            .await;
        report.outcomes().map(|o| o.label()).collect()
    }

    #[tokio::test]
    async fn each_event_applies_once_in_its_turn() {
        let db = testing::TestDb::new().await;
        let table = db.extra_table("reservations", "reservation_id").await;
        let f = function(db.client.clone(), &table);
        let confirm = other("r-1", "ReservationConfirmed");
        assert_eq!(
            run(&f, std::slice::from_ref(&confirm)).await,
            ["Early"],
            "confirmed before requested"
        );
        assert_eq!(
            run(&f, &[requested("r-1"), requested("r-1")]).await,
            ["Applied", "Duplicate"]
        );
        assert_eq!(
            run(&f, &[confirm.clone(), confirm.clone()]).await,
            ["Applied", "Duplicate"]
        );
        let release = other("r-1", "ReservationReleased");
        assert_eq!(run(&f, std::slice::from_ref(&release)).await, ["Applied"]);
        assert_eq!(
            run(&f, &[confirm]).await,
            ["Rejected"],
            "confirmed after release"
        );
        assert_eq!(
            run(&f, &["{not json".to_owned(), other("r-1", "Teleported")]).await,
            ["Invalid", "Invalid"]
        );
        let item = db
            .client
            .get_item()
            .table_name(&table)
            .key("reservation_id", s("r-1"))
            .send()
            .await
            .expect("GetItem")
            .item
            .expect("item");
        assert_eq!(
            item.get("status")
                .and_then(|v| v.as_s().ok())
                .map(String::as_str),
            Some("RELEASED")
        );
        assert_eq!(
            item.get("quantity")
                .and_then(|v| v.as_n().ok())
                .map(String::as_str),
            Some("2")
        );
    }

    #[test]
    fn a_refusal_is_read_from_the_stored_status() {
        use ReservationOutcome::*;
        assert_eq!(classify(Kind::Confirmed, Some("CONFIRMED")), Duplicate);
        assert_eq!(classify(Kind::Confirmed, None), Early);
        assert_eq!(classify(Kind::Confirmed, Some("RELEASED")), Rejected);
        assert_eq!(classify(Kind::Requested, Some("CONFIRMED")), Rejected);
        assert_eq!(
            classify(Kind::Requested, None),
            ReservationOutcome::failed(StoreError::RefusedWithoutItem)
        );
    }
}
