//! Which order changes send which notification, and what a stored
//! notification record means for the next attempt. Pure: no SDK types, no
//! I/O.

use std::fmt;

use serde_json::{Value, json};
use tracing::Level;

use crate::core::error::StoreError;
use crate::core::outcome::{Failure, Unsettled, Verdict};
use crate::core::wire::{MAX_ID_BYTES, ParseError};
use crate::orders::domain::Status;

/// The notifications customers get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    /// The order became PLACED.
    OrderConfirmation,
    /// The order became SHIPPED.
    ShippingNotice,
    /// The order became CANCELLED.
    CancellationNotice,
}

impl Template {
    pub fn as_str(self) -> &'static str {
        match self {
            Template::OrderConfirmation => "order-confirmation",
            Template::ShippingNotice => "shipping-notice",
            Template::CancellationNotice => "cancellation-notice",
        }
    }

    /// The notification an order's arrival in `status` sends, if any.
    pub fn for_status(status: Status) -> Option<Template> {
        match status {
            Status::Placed => Some(Template::OrderConfirmation),
            Status::Shipped => Some(Template::ShippingNotice),
            Status::Cancelled => Some(Template::CancellationNotice),
            Status::Paid | Status::Delivered => None,
        }
    }
}

/// What the notifier reads from one stream record: the order and its status
/// before and after the change (None: no image, i.e. inserted or removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub order_id: String,
    pub old_status: Option<Status>,
    pub new_status: Option<Status>,
    /// From the new image, for the message body (never logged).
    pub customer_id: Option<String>,
    pub tracking_id: Option<String>,
    pub carrier: Option<String>,
}

/// A stream record that can never be read as an order change, as its dead
/// letter in the notifications table keeps it: where it was, the order if
/// its keys name one, and why it was refused. Never a value of its images:
/// they carry customer data, and [`ParseError`] never echoes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    id: String,
    /// The record's `eventID`.
    pub event_id: Option<String>,
    /// The record's `dynamodb.SequenceNumber`.
    pub sequence_number: Option<String>,
    /// `INSERT`, `MODIFY` or `REMOVE`.
    pub event_name: Option<String>,
    /// From the record's `Keys`, when they hold an `order_id` string.
    pub order_id: Option<String>,
    /// Why it cannot be read.
    pub error: ParseError,
}

/// What a dead letter's key ends in. A notification's key ends in
/// `#{template}`, and no template is this, so the two never collide.
pub const UNREADABLE_SUFFIX: &str = "#unreadable";

impl Unreadable {
    /// `None` without an eventID or a SequenceNumber of at most
    /// [`MAX_ID_BYTES`]: the record then has nothing stable to be recorded
    /// under.
    pub fn new(
        event_id: Option<String>,
        sequence_number: Option<String>,
        event_name: Option<String>,
        order_id: Option<String>,
        error: ParseError,
    ) -> Option<Unreadable> {
        let usable = |v: &Option<String>| v.clone().filter(|s| s.len() <= MAX_ID_BYTES);
        let id = match (usable(&event_id), usable(&sequence_number)) {
            (Some(e), _) => format!("stream:event:{e}{UNREADABLE_SUFFIX}"),
            (None, Some(s)) => format!("stream:sequence:{s}{UNREADABLE_SUFFIX}"),
            (None, None) => return None,
        };
        Some(Unreadable {
            id,
            event_id,
            sequence_number,
            event_name,
            order_id,
            error,
        })
    }

    /// The notifications table's key for the dead letter: the record's
    /// eventID (else its SequenceNumber), the same on every redelivery, so
    /// the record is recorded once however often it comes back.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// One notification to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub order_id: String,
    pub template: Template,
    pub customer_id: Option<String>,
    pub tracking_id: Option<String>,
    pub carrier: Option<String>,
}

impl Notification {
    /// The notifications table's key: one record per (order, template).
    pub fn id(&self) -> String {
        format!("{}#{}", self.order_id, self.template.as_str())
    }

    /// The provider deduplicates on this: the same on every retry, from any
    /// invocation, so a resend after a crash is not a second message.
    pub fn idempotency_key(&self) -> String {
        format!("order-{}-{}", self.order_id, self.template.as_str())
    }

    /// The webhook's JSON body.
    pub fn body(&self) -> Value {
        json!({
            "orderId": self.order_id,
            "template": self.template.as_str(),
            "customerId": self.customer_id,
            "carrier": self.carrier,
            "trackingId": self.tracking_id,
        })
    }
}

/// The notification a change sends: only a *transition into* PLACED,
/// SHIPPED or CANCELLED. A replayed image, a change that keeps the status
/// (a rejection recorded on the order), a removal: nothing.
pub fn notification_for(change: &Change) -> Option<Notification> {
    let new = change.new_status?;
    if change.old_status == Some(new) {
        return None;
    }
    Some(Notification {
        order_id: change.order_id.clone(),
        template: Template::for_status(new)?,
        customer_id: change.customer_id.clone(),
        tracking_id: change.tracking_id.clone(),
        carrier: change.carrier.clone(),
    })
}

/// A notification record as stored: its `status` attribute names the
/// variant (the other attributes are ignored here).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(tag = "status", rename_all = "UPPERCASE")]
pub enum Stored {
    /// Claimed by an invocation until `lease_until_ms` (epoch ms).
    Sending {
        #[serde(rename = "lease_until")]
        lease_until_ms: u64,
    },
    Sent,
    Rejected,
}

/// Why a delivery attempt failed and must be retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyError {
    Store(StoreError),
    /// The provider answered 5xx, 408, 425, 429 or 409 (a concurrent
    /// request with the same key): its own, transient trouble.
    Provider {
        status: u16,
    },
    /// The provider answered a redirect or a 4xx other than 422 (and the
    /// transient ones): the URL, the credentials or the request's contract
    /// is wrong, for every notification alike. Retried until an operator
    /// fixes it, and logged at ERROR.
    Misconfigured {
        status: u16,
    },
    /// No answer in time, or no connection.
    ProviderUnreachable,
}

impl fmt::Display for NotifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifyError::Store(e) => write!(f, "{e}"),
            NotifyError::Provider { status } => write!(f, "the provider answered HTTP {status}"),
            NotifyError::Misconfigured { status } if (300..400).contains(status) => write!(
                f,
                "the provider answered a redirect (HTTP {status}), which is not followed: \
                 fix the webhook URL; retried until then"
            ),
            NotifyError::Misconfigured { status } => write!(
                f,
                "the provider refused the request itself (HTTP {status}): the webhook URL, \
                 credentials or payload contract needs fixing; retried until then"
            ),
            NotifyError::ProviderUnreachable => {
                f.write_str("the provider did not answer in time (or could not be reached)")
            }
        }
    }
}

/// What happened to one stream record.
#[derive(Debug, Clone, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum NotifyOutcome {
    /// Delivered now (the provider accepted it under its idempotency key).
    Sent,
    /// Recorded as sent before: nothing sent.
    AlreadySent,
    /// Not a notifying transition.
    NothingToSend,
    /// The provider refused this notification for good (422); recorded
    /// REJECTED with the status and a fixed reason, counted and alarmed on.
    Rejected { status: u16 },
    /// Recorded as rejected before.
    AlreadyRejected,
    /// Another invocation holds a live claim on it: retry later.
    Busy,
    /// The record can never be read (a malformed image, an unknown status,
    /// no order id): recorded now in the notifications table with the
    /// reason, counted, alarmed on and logged at ERROR, then acknowledged so
    /// that the records behind it on its shard go on.
    Unreadable(ParseError),
    /// An unreadable record that was recorded before (a redelivery).
    AlreadyUnreadable(ParseError),
    /// Invalid, Failed (the notifications table or the provider) or
    /// NotAttempted, as for every consumer.
    #[strum(transparent)]
    Unsettled(Unsettled<NotifyError>),
}

impl From<Unsettled<NotifyError>> for NotifyOutcome {
    fn from(u: Unsettled<NotifyError>) -> Self {
        NotifyOutcome::Unsettled(u)
    }
}

impl From<StoreError> for NotifyError {
    fn from(e: StoreError) -> Self {
        NotifyError::Store(e)
    }
}

impl Failure for NotifyError {
    /// A misconfigured provider (a redirect, a 4xx other than 422) fails
    /// every notification alike until an operator fixes it.
    fn is_retryable(&self) -> bool {
        match self {
            NotifyError::Store(e) => e.is_retryable(),
            NotifyError::Misconfigured { .. } => false,
            NotifyError::Provider { .. } | NotifyError::ProviderUnreachable => true,
        }
    }
}

impl fmt::Display for NotifyOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifyOutcome::Sent => f.write_str("Sent"),
            NotifyOutcome::AlreadySent => f.write_str("AlreadySent: recorded as sent before"),
            NotifyOutcome::NothingToSend => {
                f.write_str("NothingToSend: not a transition that notifies")
            }
            NotifyOutcome::Rejected { status } => {
                write!(f, "Rejected: the provider refused it (HTTP {status})")
            }
            NotifyOutcome::AlreadyRejected => f.write_str("AlreadyRejected: recorded as rejected"),
            NotifyOutcome::Busy => f.write_str("Busy: another invocation is sending it"),
            NotifyOutcome::Unreadable(e) => write!(
                f,
                "Unreadable: {e}; recorded in the notifications table and skipped"
            ),
            NotifyOutcome::AlreadyUnreadable(e) => {
                write!(f, "AlreadyUnreadable: {e}; recorded before")
            }
            NotifyOutcome::Unsettled(u) => u.fmt(f),
        }
    }
}

impl Verdict for NotifyOutcome {
    type Failure = NotifyError;

    fn unsettled(&self) -> Option<&Unsettled<NotifyError>> {
        match self {
            NotifyOutcome::Unsettled(u) => Some(u),
            _ => None,
        }
    }

    /// Done for good: delivered (now or before), refused for good, nothing
    /// to deliver, or unreadable and durably recorded as such.
    fn acknowledge(&self) -> bool {
        matches!(
            self,
            NotifyOutcome::Sent
                | NotifyOutcome::AlreadySent
                | NotifyOutcome::NothingToSend
                | NotifyOutcome::Rejected { .. }
                | NotifyOutcome::AlreadyRejected
                | NotifyOutcome::Unreadable(_)
                | NotifyOutcome::AlreadyUnreadable(_)
        )
    }

    fn label(&self) -> &'static str {
        // The variant's name (strum), so labels cannot drift from variants.
        self.into()
    }

    fn level(&self) -> Level {
        match self {
            NotifyOutcome::Sent
            | NotifyOutcome::AlreadySent
            | NotifyOutcome::NothingToSend
            | NotifyOutcome::AlreadyRejected
            | NotifyOutcome::AlreadyUnreadable(_)
            | NotifyOutcome::Busy => Level::INFO,
            NotifyOutcome::Rejected { .. } => Level::WARN,
            // Someone has to look at the producer of the record.
            NotifyOutcome::Unreadable(_) => Level::ERROR,
            NotifyOutcome::Unsettled(u) => u.level(),
        }
    }
}

/// The claim was refused; `stored` is the record it was checked against.
pub fn classify_claim_refusal(stored: Option<&Stored>, now_ms: u64) -> NotifyOutcome {
    match stored {
        Some(Stored::Sent) => NotifyOutcome::AlreadySent,
        Some(Stored::Rejected) => NotifyOutcome::AlreadyRejected,
        Some(Stored::Sending { lease_until_ms }) if *lease_until_ms >= now_ms => {
            NotifyOutcome::Busy
        }
        // An expired claim should have been taken over: look again.
        Some(Stored::Sending { .. }) => NotifyOutcome::Unsettled(Unsettled::Failed(
            NotifyError::Store(StoreError::InconsistentRefusal),
        )),
        None => NotifyOutcome::Unsettled(Unsettled::Failed(NotifyError::Store(
            StoreError::RefusedWithoutItem,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(old: Option<Status>, new: Option<Status>) -> Change {
        Change {
            order_id: "ord-1".into(),
            old_status: old,
            new_status: new,
            customer_id: Some("c".into()),
            tracking_id: None,
            carrier: None,
        }
    }

    #[test]
    fn only_transitions_into_placed_shipped_cancelled_notify() {
        use Status::*;
        let t = |old, new| notification_for(&change(old, new)).map(|n| n.template);
        assert_eq!(t(None, Some(Placed)), Some(Template::OrderConfirmation));
        assert_eq!(t(Some(Paid), Some(Shipped)), Some(Template::ShippingNotice));
        assert_eq!(
            t(Some(Placed), Some(Cancelled)),
            Some(Template::CancellationNotice)
        );
        assert_eq!(
            t(Some(Paid), Some(Cancelled)),
            Some(Template::CancellationNotice)
        );
        assert_eq!(t(Some(Placed), Some(Paid)), None);
        assert_eq!(t(Some(Shipped), Some(Delivered)), None);
        // The same image again (a rejection spent a seq; a replay): nothing.
        assert_eq!(t(Some(Shipped), Some(Shipped)), None);
        assert_eq!(t(Some(Placed), None), None, "removal");
    }

    #[test]
    fn keys_are_deterministic_per_order_and_template() {
        let n = notification_for(&change(Some(Status::Paid), Some(Status::Shipped))).unwrap();
        assert_eq!(n.id(), "ord-1#shipping-notice");
        assert_eq!(n.idempotency_key(), "order-ord-1-shipping-notice");
        assert_eq!(n.body()["template"], "shipping-notice");
    }

    #[test]
    fn an_unreadable_record_is_keyed_by_its_event_id_else_its_sequence_number() {
        let err = ParseError::MissingField {
            path: "Keys.order_id".into(),
        };
        let u = |e: Option<&str>, s: Option<&str>| {
            Unreadable::new(
                e.map(str::to_owned),
                s.map(str::to_owned),
                Some("MODIFY".into()),
                None,
                err.clone(),
            )
            .map(|u| u.id().to_owned())
        };
        assert_eq!(
            u(Some("ev-1"), Some("100")).as_deref(),
            Some("stream:event:ev-1#unreadable")
        );
        assert_eq!(
            u(None, Some("100")).as_deref(),
            Some("stream:sequence:100#unreadable")
        );
        let huge = "e".repeat(MAX_ID_BYTES + 1);
        assert_eq!(
            u(Some(&huge), Some("100")).as_deref(),
            Some("stream:sequence:100#unreadable")
        );
        assert_eq!(u(None, None), None);
        // Never a notification's key: those end in a template.
        for t in [
            Template::OrderConfirmation,
            Template::ShippingNotice,
            Template::CancellationNotice,
        ] {
            assert_ne!(format!("#{}", t.as_str()), UNREADABLE_SUFFIX);
        }
    }

    #[test]
    fn an_unreadable_record_is_acknowledged_once_recorded_and_logged_at_error() {
        let err = ParseError::InvalidValue {
            path: "NewImage.status".into(),
            reason: "is not an order status",
        };
        let first = NotifyOutcome::Unreadable(err.clone());
        let again = NotifyOutcome::AlreadyUnreadable(err);
        assert!(first.acknowledged() && again.acknowledged());
        assert_eq!(first.level(), Level::ERROR);
        assert_eq!(again.level(), Level::INFO);
        assert_eq!(first.label(), "Unreadable");
        assert_eq!(again.label(), "AlreadyUnreadable");
        assert_eq!(
            first.to_string(),
            "Unreadable: `NewImage.status` is invalid: is not an order status; \
             recorded in the notifications table and skipped"
        );
    }

    #[test]
    fn a_refused_claim_is_read_from_the_stored_record() {
        assert_eq!(
            classify_claim_refusal(Some(&Stored::Sent), 5),
            NotifyOutcome::AlreadySent
        );
        assert_eq!(
            classify_claim_refusal(Some(&Stored::Rejected), 5),
            NotifyOutcome::AlreadyRejected
        );
        assert_eq!(
            classify_claim_refusal(Some(&Stored::Sending { lease_until_ms: 9 }), 5),
            NotifyOutcome::Busy
        );
        assert!(matches!(
            classify_claim_refusal(Some(&Stored::Sending { lease_until_ms: 1 }), 5),
            NotifyOutcome::Unsettled(Unsettled::Failed(_))
        ));
        assert!(NotifyOutcome::Sent.acknowledge());
        assert!(NotifyOutcome::NothingToSend.acknowledge());
        assert!(!NotifyOutcome::Busy.acknowledge());
        assert!(
            !NotifyOutcome::Unsettled(Unsettled::Failed(NotifyError::ProviderUnreachable))
                .acknowledge()
        );
    }
}
