//! Which order changes send which notification, and what a stored
//! notification record means for the next attempt. Pure: no SDK types, no
//! I/O.

use std::fmt;

use serde_json::{Value, json};
use tracing::Level;

use crate::core::error::StoreError;
use crate::core::outcome::{Failure, Unsettled, Verdict};
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

    /// Done for good: delivered (now or before), refused for good, or
    /// nothing to deliver.
    fn acknowledge(&self) -> bool {
        matches!(
            self,
            NotifyOutcome::Sent
                | NotifyOutcome::AlreadySent
                | NotifyOutcome::NothingToSend
                | NotifyOutcome::Rejected { .. }
                | NotifyOutcome::AlreadyRejected
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
            | NotifyOutcome::Busy => Level::INFO,
            NotifyOutcome::Rejected { .. } => Level::WARN,
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
