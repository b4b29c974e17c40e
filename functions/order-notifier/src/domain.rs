//! Which order changes send which notification, and what a stored
//! notification record means for the next attempt. Pure: no SDK types, no
//! I/O.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};
use tracing::Level;

use lambda_idempotency::StoreError;
use lambda_idempotency::wire::{MAX_ID_BYTES, ParseError};
use lambda_idempotency::{Failure, Skip, Verdict};
use orders::domain::Status;

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
    /// Claimed by an attempt (`claim_id`) until `lease_until_ms` (epoch ms).
    Sending {
        #[serde(rename = "lease_until")]
        lease_until_ms: u64,
        claim_id: String,
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
    /// The claim was confirmed too late for its lease to cover the whole
    /// webhook request ([`LeasePolicy::may_post`]): nothing was sent, the
    /// claim was given back.
    LeaseTooShort,
    /// The claim was confirmed with too little of the invocation left for
    /// the whole webhook request ([`LeasePolicy::may_post`]): nothing was
    /// sent, the claim was given back. Reported as not attempted
    /// ([`Failure::not_attempted`]), not as a failure.
    DeadlineTooClose,
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
            NotifyError::LeaseTooShort => f.write_str(
                "the claim was confirmed too late for its lease to cover the webhook request; \
                 nothing was sent",
            ),
            NotifyError::DeadlineTooClose => f.write_str(
                "too little of the invocation was left for the webhook request; nothing was sent",
            ),
        }
    }
}

/// The notifier's verdict about one stream record (a record that got none
/// is invalid, failed or not attempted: [`lambda_idempotency::RecordOutcome`]).
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
            NotifyError::Provider { .. }
            | NotifyError::ProviderUnreachable
            | NotifyError::LeaseTooShort
            | NotifyError::DeadlineTooClose => true,
        }
    }

    /// The deadline check before the POST: the record is left for the
    /// next invocation, like one the batch itself had no time to start.
    fn not_attempted(&self) -> Option<Skip> {
        matches!(self, NotifyError::DeadlineTooClose).then_some(Skip::Deadline)
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
        }
    }
}

impl Verdict for NotifyOutcome {
    const LABELS: &'static [&'static str] = &[
        "Sent",
        "AlreadySent",
        "NothingToSend",
        "Rejected",
        "AlreadyRejected",
        "Busy",
        "Unreadable",
        "AlreadyUnreadable",
    ];

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
        }
    }
}

/// What a refused claim means for the attempt that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRefusal {
    /// Refused against this attempt's own claim: the SDK re-sent an
    /// UpdateItem that had committed, its answer lost. The claim is held.
    Ours,
    /// Someone else's claim, or a finished record: this is the outcome.
    Settled(NotifyOutcome),
}

/// The claim made by `claim_id` at `now_ms` was refused; `stored` is the
/// record it was checked against (`Err`: a refusal that makes no sense
/// against it; retry and look again). A SENDING record with this attempt's own
/// `claim_id` is the claim itself, seen again after a lost answer (the id is
/// unique to one attempt, so it can be no one else's): answering Busy there
/// would hold the notification back, and with it the shard, until the
/// lease ends, in exactly the failure the claim exists for.
pub fn classify_claim_refusal(
    stored: Option<&Stored>,
    claim_id: &str,
    now_ms: u64,
) -> Result<ClaimRefusal, NotifyError> {
    let outcome = match stored {
        Some(Stored::Sending {
            claim_id: claimed_by,
            ..
        }) if claimed_by == claim_id => return Ok(ClaimRefusal::Ours),
        Some(Stored::Sent) => NotifyOutcome::AlreadySent,
        Some(Stored::Rejected) => NotifyOutcome::AlreadyRejected,
        Some(Stored::Sending { lease_until_ms, .. }) if *lease_until_ms >= now_ms => {
            NotifyOutcome::Busy
        }
        // An expired claim should have been taken over: look again.
        Some(Stored::Sending { .. }) => {
            return Err(NotifyError::Store(StoreError::InconsistentRefusal));
        }
        None => return Err(NotifyError::Store(StoreError::RefusedWithoutItem)),
    };
    Ok(ClaimRefusal::Settled(outcome))
}

/// How long one delivery attempt holds its claim, and whether its POST may
/// start. While the lease runs, no other attempt sends the notification; so
/// the lease must still cover the whole POST (its timeout, end to end) at
/// the moment the claim is confirmed, not merely when it was sent: the
/// claim's UpdateItem alone may take seconds with the SDK's retries.
///
/// The lease is written with the claim, before it is confirmed, so it
/// allows for the longest the claim may take; [`LeasePolicy::may_post`]
/// then checks, from the moment of confirmation, that it does cover the
/// POST, and that the invocation has the time for it: a POST the batch
/// would cut off at its cutoff is a delivery nobody can know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasePolicy {
    /// The longest the claim's UpdateItem may take, retries and backoff
    /// included (the SDK's operation timeout).
    pub claim: Duration,
    /// The webhook request's bound, end to end.
    pub post: Duration,
    /// On top of both: invocations on other hosts read the lease with
    /// their own clocks, and the POST starts a moment after the check.
    pub margin: Duration,
}

/// Why a POST may not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooLate {
    /// The invocation's time left (to its cutoff) cannot cover the POST.
    Deadline,
    /// The lease no longer covers the POST and the margin.
    Lease,
}

impl LeasePolicy {
    /// The lease (epoch ms) to claim with, sent at `now_ms` with `left`
    /// before the invocation's cutoff: time for the claim to be confirmed
    /// as late as it may be and for the whole POST after it, plus the
    /// margin. Never longer than the invocation can use (a POST starts only
    /// if it can end before the cutoff), so that a retry after a crash does
    /// not wait for time nobody would have used.
    pub fn lease_until(&self, now_ms: u64, left: Duration) -> u64 {
        let attempt = self.claim.saturating_add(self.post);
        let span = attempt.min(left).saturating_add(self.margin);
        now_ms.saturating_add(u64::try_from(span.as_millis()).unwrap_or(u64::MAX))
    }

    /// May the POST start now: the claim confirmed at `confirmed_ms`, with
    /// `left` before the invocation's cutoff, under the lease it wrote
    /// (`lease_until_ms`)? Only if the whole POST fits before the cutoff,
    /// and the lease outlasts it by the margin.
    pub fn may_post(
        &self,
        confirmed_ms: u64,
        left: Duration,
        lease_until_ms: u64,
    ) -> Result<(), TooLate> {
        if left < self.post {
            return Err(TooLate::Deadline);
        }
        let needed = self.post.saturating_add(self.margin);
        let needed = u64::try_from(needed.as_millis()).unwrap_or(u64::MAX);
        if lease_until_ms < confirmed_ms.saturating_add(needed) {
            return Err(TooLate::Lease);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_idempotency::RecordOutcome;

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
        let record = |o: &NotifyOutcome| RecordOutcome::<_, NotifyError>::Settled(o.clone());
        assert!(record(&first).acknowledge() && record(&again).acknowledge());
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
        let sending = |lease_until_ms, claim_id: &str| Stored::Sending {
            lease_until_ms,
            claim_id: claim_id.into(),
        };
        let settled = |o| Ok(ClaimRefusal::Settled(o));
        let cases = [
            (Some(Stored::Sent), settled(NotifyOutcome::AlreadySent)),
            (
                Some(Stored::Rejected),
                settled(NotifyOutcome::AlreadyRejected),
            ),
            (Some(sending(9, "other")), settled(NotifyOutcome::Busy)),
            // This attempt's own claim, seen again by the SDK's re-send of
            // an UpdateItem that committed unseen: held, whatever its lease
            // (the POST checks the lease before it starts).
            (Some(sending(9, "mine")), Ok(ClaimRefusal::Ours)),
            (Some(sending(1, "mine")), Ok(ClaimRefusal::Ours)),
            (
                Some(sending(1, "other")),
                Err(NotifyError::Store(StoreError::InconsistentRefusal)),
            ),
            (
                None,
                Err(NotifyError::Store(StoreError::RefusedWithoutItem)),
            ),
        ];
        for (stored, want) in cases {
            assert_eq!(
                classify_claim_refusal(stored.as_ref(), "mine", 5),
                want,
                "{stored:?}"
            );
        }
        assert!(NotifyOutcome::Sent.acknowledge());
        assert!(NotifyOutcome::NothingToSend.acknowledge());
        assert!(!NotifyOutcome::Busy.acknowledge());
        assert!(
            !RecordOutcome::<NotifyOutcome, _>::Failed(NotifyError::ProviderUnreachable)
                .acknowledge()
        );
    }

    const S: u64 = 1_000;

    fn policy(claim: u64, post: u64, margin: u64) -> LeasePolicy {
        LeasePolicy {
            claim: Duration::from_secs(claim),
            post: Duration::from_secs(post),
            margin: Duration::from_secs(margin),
        }
    }

    #[test]
    fn the_lease_allows_for_the_claim_and_the_whole_post_within_the_invocation() {
        let secs = Duration::from_secs;
        let now = 1_000_000 * S;
        // (policy, time left to the cutoff, lease from now)
        let cases = [
            // The claim's allowance and the POST, plus the margin.
            (policy(5, 3, 1), secs(60), 9 * S),
            (policy(5, 30, 1), secs(600), 36 * S),
            // No longer than the invocation can use, plus the margin.
            (policy(5, 3, 1), secs(4), 5 * S),
            (policy(5, 3, 1), secs(0), S),
            (policy(5, 3, 0), secs(8), 8 * S),
        ];
        for (p, left, lease) in cases {
            assert_eq!(p.lease_until(now, left), now + lease, "{p:?} {left:?}");
        }
        assert_eq!(
            policy(5, 3, 1).lease_until(u64::MAX - 1, secs(60)),
            u64::MAX,
            "saturates"
        );
    }

    #[test]
    fn the_post_starts_only_if_the_invocation_and_the_lease_cover_all_of_it() {
        let secs = Duration::from_secs;
        let p = policy(5, 3, 1);
        let sent = 1_000_000 * S;
        let lease = p.lease_until(sent, secs(60)); // sent + 9 s
        // (confirmed after sending, time left to the cutoff then, verdict)
        let cases = [
            (0, secs(60), Ok(())),
            // A claim slow by its whole allowance still has the POST covered.
            (5 * S, secs(55), Ok(())),
            // Slower than its allowance (the lease was written for less).
            (5 * S + 1, secs(55), Err(TooLate::Lease)),
            (9 * S, secs(51), Err(TooLate::Lease)),
            // The invocation cannot cover the POST: not started, whatever
            // the lease.
            (0, secs(3), Ok(())),
            (
                0,
                secs(3) - Duration::from_millis(1),
                Err(TooLate::Deadline),
            ),
            (6 * S, Duration::ZERO, Err(TooLate::Deadline)),
        ];
        for (after, left, want) in cases {
            assert_eq!(
                p.may_post(sent + after, left, lease),
                want,
                "{after} {left:?}"
            );
        }
        // A lease cut to the invocation's time still covers a POST that
        // fits it: the two checks agree.
        let short = p.lease_until(sent, secs(4)); // sent + 5 s
        assert_eq!(p.may_post(sent + S, secs(3), short), Ok(()));
        assert_eq!(
            p.may_post(sent + 2 * S, secs(2), short),
            Err(TooLate::Deadline)
        );
    }
}
