//! The outcome plumbing every consumer shares.
//!
//! A consumer's outcome enum has its own verdicts (the order consumer's
//! Applied, Stale, Early…; the notifier's Sent, Busy…) and one variant,
//! `Unsettled`, holding an [`Unsettled`]: the outcomes that are the same for
//! every consumer because they are decided before or outside its rules — the
//! record is not a valid event, a dependency failed, or the record was not
//! attempted. Their labels, log levels and wording live here, once: a
//! consumer's `label` returns [`Unsettled::label`] for that variant, its
//! [`Verdict::LABELS`] lists only its own verdicts, and [`labels`] lists
//! both. No derive macro is needed (a consumer may use strum's
//! `IntoStaticStr` with `#[strum(transparent)]` on the variant: `Unsettled`
//! converts to its label).
//!
//! None of these is ever acknowledged: the message goes back to its queue
//! (or the stream batch is retried), which is what keeps "nothing is lost"
//! true for every consumer alike.

use std::fmt;

use tracing::Level;

use crate::backoff::RetryClass;
use crate::error::StoreError;
use crate::wire::ParseError;

/// Why a record was not attempted at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Too little time was left before the invocation deadline.
    Deadline,
    /// An earlier record of the same group (FIFO message group, stream
    /// partition key) failed in this batch, so applying this one would break
    /// the group's order.
    FifoGroupBlocked,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Skip::Deadline => "invocation deadline too close",
            Skip::FifoGroupBlocked => "an earlier record of its group failed in this batch",
        })
    }
}

/// A dependency failure as a consumer reports it: DynamoDB's [`StoreError`],
/// or a consumer's own type that can hold one (the notifier adds its
/// provider's failures).
pub trait Failure:
    fmt::Display + fmt::Debug + Clone + Send + Sync + 'static + From<StoreError>
{
    /// Would the same request plausibly succeed later without anyone
    /// changing code or configuration? A failure that would not is logged at
    /// ERROR: someone has to act. Either way the record is retried.
    fn is_retryable(&self) -> bool;
}

impl Failure for StoreError {
    fn is_retryable(&self) -> bool {
        StoreError::is_retryable(self)
    }
}

/// The outcomes shared by every consumer. Never acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsettled<F = StoreError> {
    /// The body is not a valid event: it cannot succeed as sent, and goes to
    /// the DLQ after its receives, where an operator can read why.
    Invalid(ParseError),
    /// A dependency did not confirm the effect.
    Failed(F),
    /// Not attempted in this invocation.
    NotAttempted(Skip),
}

impl<F> Unsettled<F> {
    /// The labels of the shared outcomes, in the order of the variants.
    pub const LABELS: [&'static str; 3] = ["Invalid", "Failed", "NotAttempted"];

    /// The variant's name: its log label and metric name.
    pub fn label(&self) -> &'static str {
        match self {
            Unsettled::Invalid(_) => Self::LABELS[0],
            Unsettled::Failed(_) => Self::LABELS[1],
            Unsettled::NotAttempted(_) => Self::LABELS[2],
        }
    }
}

/// The label, for a consumer whose enum derives strum's `IntoStaticStr`
/// with the variant holding `Unsettled` marked `#[strum(transparent)]`.
impl<F> From<&Unsettled<F>> for &'static str {
    fn from(u: &Unsettled<F>) -> Self {
        u.label()
    }
}

impl<F: Failure> Unsettled<F> {
    /// How loudly the record's line is logged: ERROR when someone has to act
    /// (a bad event, a failure that will not heal), WARN when it heals by
    /// itself.
    pub fn level(&self) -> Level {
        match self {
            Unsettled::Invalid(_) => Level::ERROR,
            Unsettled::Failed(e) if !e.is_retryable() => Level::ERROR,
            Unsettled::Failed(_) | Unsettled::NotAttempted(_) => Level::WARN,
        }
    }
}

impl<F: fmt::Display> fmt::Display for Unsettled<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsettled::Invalid(e) => write!(f, "Invalid: {e}"),
            Unsettled::Failed(e) => write!(f, "Failed: {e}"),
            Unsettled::NotAttempted(skip) => write!(f, "NotAttempted: {skip}"),
        }
    }
}

/// What the batch needs to know about a consumer's per-record outcome.
///
/// A consumer's enum implements `Display` and `From<Unsettled<Failure>>`,
/// and here names its `Failure`, lists its own labels in `LABELS` and
/// implements `unsettled`, `acknowledge`, `label` and `level`. The rest is
/// provided.
pub trait Verdict: Clone + fmt::Display + Send + 'static + From<Unsettled<Self::Failure>> {
    /// What `Unsettled::Failed` carries for this consumer.
    type Failure: Failure;
    /// The labels of the consumer's own verdicts (not the shared ones,
    /// which [`labels`] adds): every one `label` can return for them, so
    /// that metrics report zeros for the outcomes that did not occur.
    const LABELS: &'static [&'static str];
    /// The shared outcome, if this is one.
    fn unsettled(&self) -> Option<&Unsettled<Self::Failure>>;
    /// May the message be deleted from its queue (or the stream move on)?
    /// Only when its effect is committed, or known never to need committing.
    /// The batch asks [`Verdict::acknowledged`], which never lets an
    /// `Unsettled` outcome through, whatever this says.
    fn acknowledge(&self) -> bool;
    /// A stable name, used in logs and as the metric name: one of
    /// `LABELS`, or [`Unsettled::label`] for the shared outcomes.
    fn label(&self) -> &'static str;
    /// How loudly the record's line is logged; for `Unsettled`, delegate to
    /// [`Unsettled::level`].
    fn level(&self) -> Level;

    /// The record is not a valid event.
    /// What the batch acts on: acknowledged by the consumer, and not one of
    /// the shared outcomes (which are never acknowledged).
    fn acknowledged(&self) -> bool {
        self.unsettled().is_none() && self.acknowledge()
    }
    /// The record is not a valid event.
    fn invalid(error: ParseError) -> Self {
        Unsettled::Invalid(error).into()
    }
    /// The record was not attempted in this invocation.
    fn not_attempted(skip: Skip) -> Self {
        Unsettled::NotAttempted(skip).into()
    }
    /// DynamoDB did not confirm the record's write.
    fn failed(error: StoreError) -> Self {
        Unsettled::Failed(error.into()).into()
    }
    /// A dependency the record needs failed (DynamoDB, or the notifier's
    /// provider), as opposed to a verdict about the event. A batch in which
    /// every record failed this way (or was not attempted) fails the
    /// invocation, so the outage shows in Lambda's Errors metric.
    fn is_dependency_failure(&self) -> bool {
        matches!(self.unsettled(), Some(Unsettled::Failed(_)))
    }
    /// The record was left for a later invocation.
    fn is_not_attempted(&self) -> bool {
        matches!(self.unsettled(), Some(Unsettled::NotAttempted(_)))
    }
    /// How soon the message should come back if it is not acknowledged
    /// (see [`BackoffPolicy`](crate::BackoffPolicy)). The shared outcomes are classified
    /// here; the consumer's own through [`Verdict::own_retry_class`].
    fn retry_class(&self) -> RetryClass {
        match self.unsettled() {
            Some(Unsettled::Invalid(_)) => RetryClass::Hopeless,
            Some(Unsettled::Failed(_)) => RetryClass::Dependency,
            // A group held behind its failed head comes right back behind
            // it. A record the deadline cut off waits like a dependency
            // failure: a batch that keeps running out of time is usually a
            // slow table, and coming back at once would spend its receives
            // in seconds.
            Some(Unsettled::NotAttempted(Skip::FifoGroupBlocked)) => RetryClass::Immediate,
            Some(Unsettled::NotAttempted(Skip::Deadline)) => RetryClass::Dependency,
            None => self.own_retry_class(),
        }
    }
    /// The retry class of the consumer's own unacknowledged verdicts. By
    /// default they wait for a predecessor, as Early does; a verdict that
    /// can never change on a retry (a Conflict) should say
    /// [`RetryClass::Hopeless`].
    fn own_retry_class(&self) -> RetryClass {
        RetryClass::Predecessor
    }
}

/// Every label of `O`: its own verdicts' names and the shared ones, so that
/// metrics report zeros for outcomes that did not occur.
pub fn labels<O: Verdict>() -> impl Iterator<Item = &'static str> {
    O::LABELS.iter().copied().chain(Unsettled::<()>::LABELS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Toy {
        Done,
        Unsettled(Unsettled),
    }

    impl From<Unsettled> for Toy {
        fn from(u: Unsettled) -> Self {
            Toy::Unsettled(u)
        }
    }

    impl fmt::Display for Toy {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Toy::Done => f.write_str("Done"),
                Toy::Unsettled(u) => u.fmt(f),
            }
        }
    }

    impl Verdict for Toy {
        type Failure = StoreError;
        const LABELS: &'static [&'static str] = &["Done"];
        fn unsettled(&self) -> Option<&Unsettled> {
            match self {
                Toy::Unsettled(u) => Some(u),
                Toy::Done => None,
            }
        }
        fn acknowledge(&self) -> bool {
            matches!(self, Toy::Done)
        }
        fn label(&self) -> &'static str {
            match self {
                Toy::Done => "Done",
                Toy::Unsettled(u) => u.label(),
            }
        }
        fn level(&self) -> Level {
            match self {
                Toy::Done => Level::INFO,
                Toy::Unsettled(u) => u.level(),
            }
        }
    }

    #[test]
    fn shared_labels_replace_the_wrapper_variant() {
        assert_eq!(
            labels::<Toy>().collect::<Vec<_>>(),
            ["Done", "Invalid", "Failed", "NotAttempted"]
        );
        assert_eq!(Toy::failed(StoreError::Timeout).label(), "Failed");
        assert_eq!(Toy::invalid(ParseError::MissingBody).label(), "Invalid");
        assert_eq!(Toy::not_attempted(Skip::Deadline).label(), "NotAttempted");
    }

    #[test]
    fn shared_outcomes_are_classified_and_logged_once() {
        let timeout = Toy::failed(StoreError::Timeout);
        let denied = Toy::failed(StoreError::AccessDenied {
            code: "AccessDeniedException".into(),
        });
        assert!(timeout.is_dependency_failure() && !timeout.is_not_attempted());
        assert!(Toy::not_attempted(Skip::Deadline).is_not_attempted());
        assert!(!Toy::invalid(ParseError::MissingBody).is_dependency_failure());
        assert_eq!(timeout.level(), Level::WARN);
        assert_eq!(denied.level(), Level::ERROR);
        assert_eq!(Toy::invalid(ParseError::MissingBody).level(), Level::ERROR);
        assert_eq!(
            Toy::not_attempted(Skip::FifoGroupBlocked).level(),
            Level::WARN
        );
        assert_eq!(
            Toy::not_attempted(Skip::Deadline).to_string(),
            "NotAttempted: invocation deadline too close"
        );
        for o in [timeout, denied, Toy::invalid(ParseError::MissingBody)] {
            assert!(!o.acknowledge());
        }
        assert!(Toy::Done.acknowledge() && Toy::Done.unsettled().is_none());
        assert_eq!(
            Toy::invalid(ParseError::MissingBody).retry_class(),
            RetryClass::Hopeless
        );
        assert_eq!(
            Toy::failed(StoreError::Timeout).retry_class(),
            RetryClass::Dependency
        );
        assert_eq!(
            Toy::not_attempted(Skip::Deadline).retry_class(),
            RetryClass::Dependency
        );
        assert_eq!(
            Toy::not_attempted(Skip::FifoGroupBlocked).retry_class(),
            RetryClass::Immediate
        );
        assert_eq!(Toy::Done.level(), Level::INFO);
    }
}
