//! The outcome plumbing every consumer shares.
//!
//! What happened to one record is a [`RecordOutcome`]: the consumer's own
//! verdict ([`RecordOutcome::Settled`]: your Applied, Duplicate, Early…),
//! or one of the outcomes that are the
//! same for every consumer because they are decided before or outside its
//! rules: the record is not a valid event ([`RecordOutcome::Invalid`]), a
//! dependency failed ([`RecordOutcome::Failed`]: the `Err` of
//! [`Handler::apply`](crate::Handler::apply)), or the record was not attempted
//! ([`RecordOutcome::NotAttempted`]). The engine does the wrapping, so a
//! consumer's [`Verdict`] enum holds only its own verdicts; the shared
//! outcomes' labels, log levels, retry classes and wording live here, once,
//! and [`labels`] lists both.
//!
//! None of the shared outcomes is ever acknowledged: the message goes back
//! to its queue (or the stream batch is retried), which is what keeps
//! "nothing is lost" true for every consumer alike.

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
/// or a consumer's own type that can hold one (say, with the failures of an
/// HTTP provider it calls).
pub trait Failure:
    fmt::Display + fmt::Debug + Clone + Send + Sync + 'static + From<StoreError>
{
    /// Would the same request plausibly succeed later without anyone
    /// changing code or configuration? A failure that would not is logged at
    /// ERROR: someone has to act. Either way the record is retried.
    fn is_retryable(&self) -> bool;

    /// The handler found, part way, that the record cannot be attempted in
    /// this invocation (too little time left for a webhook request once a
    /// claim is confirmed, say). The engine then reports
    /// [`RecordOutcome::NotAttempted`] instead of `Failed`, so the record is
    /// classified like one the engine itself did not start. Nothing by
    /// default.
    fn not_attempted(&self) -> Option<Skip> {
        None
    }
}

impl Failure for StoreError {
    fn is_retryable(&self) -> bool {
        StoreError::is_retryable(self)
    }
}

/// What a consumer's own verdicts need to say; the shared outcomes are
/// [`RecordOutcome`]'s. A consumer's enum implements `Display` (its log
/// line's detail), lists its labels in `LABELS` and implements `label` and
/// `acknowledge`; `level` and `retry_class` have defaults.
pub trait Verdict: Clone + fmt::Display + Send + 'static {
    /// The labels of the consumer's own verdicts (not the shared ones,
    /// which [`labels`] adds): every one `label` can return, so that
    /// metrics report zeros for the outcomes that did not occur.
    const LABELS: &'static [&'static str];
    /// A stable name, used in logs and as the metric name: one of `LABELS`.
    fn label(&self) -> &'static str;
    /// May the message be deleted from its queue (or the stream move on)?
    /// Only when its effect is committed, or known never to need committing.
    fn acknowledge(&self) -> bool;
    /// How loudly the record's line is logged. INFO by default.
    fn level(&self) -> Level {
        Level::INFO
    }
    /// How soon the message should come back if this verdict is not
    /// acknowledged (see [`BackoffPolicy`](crate::backoff::BackoffPolicy)). By
    /// default it waits for a predecessor, as Early does; a verdict that can
    /// never change on a retry (a Conflict) should say
    /// [`RetryClass::Hopeless`]. Not asked for an acknowledged verdict.
    fn retry_class(&self) -> RetryClass {
        RetryClass::Predecessor
    }
}

/// Declares a consumer's verdicts: the enum, its `Display` (the label)
/// and its [`Verdict`] (`LABELS`, `label`, `acknowledge`, `level`) from one
/// list, so they cannot disagree. Each verdict says whether its record is
/// acknowledged (`ack`: deleted from the queue, its effect committed or
/// never to be) or comes back (`retry`), and optionally how loudly it is
/// logged (`ack(warn)`, `retry(error)`; INFO otherwise). A verdict that needs more
/// (a [`RetryClass`] of its own, data in a variant) implements [`Verdict`]
/// by hand.
///
/// ```
/// use lambda_idempotency::{Verdict, verdicts};
///
/// verdicts! {
///     /// What a points event came to.
///     pub enum Points {
///         /// Added to or taken from the balance.
///         Applied => ack,
///         /// Seen before: nothing to do.
///         Duplicate => ack,
///         /// The balance cannot cover the redemption: never applies.
///         Rejected => ack(warn),
///         /// Waiting for an earlier event of the customer.
///         Early => retry,
///     }
/// }
///
/// assert_eq!(Points::LABELS, ["Applied", "Duplicate", "Rejected", "Early"]);
/// assert_eq!(Points::Rejected.label(), "Rejected");
/// assert_eq!(Points::Rejected.to_string(), "Rejected");
/// assert!(Points::Rejected.acknowledge() && !Points::Early.acknowledge());
/// assert_eq!(Points::Rejected.level(), lambda_idempotency::tracing::Level::WARN);
/// ```
#[macro_export]
macro_rules! verdicts {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident => $ack:ident $(($level:ident))?
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::Verdict::label(self))
            }
        }

        impl $crate::Verdict for $name {
            const LABELS: &'static [&'static str] = &[$(stringify!($variant)),+];
            fn label(&self) -> &'static str {
                match self {
                    $( Self::$variant => stringify!($variant), )+
                }
            }
            fn acknowledge(&self) -> bool {
                match self {
                    $( Self::$variant => $crate::verdicts!(@ack $ack), )+
                }
            }
            fn level(&self) -> $crate::tracing::Level {
                match self {
                    $( Self::$variant => $crate::verdicts!(@level $($level)?), )+
                }
            }
        }
    };
    (@ack ack) => { true };
    (@ack retry) => { false };
    (@level) => { $crate::tracing::Level::INFO };
    (@level warn) => { $crate::tracing::Level::WARN };
    (@level error) => { $crate::tracing::Level::ERROR };
}

/// What happened to one record: the consumer's verdict, or one of the
/// outcomes shared by every consumer (never acknowledged). `F` is the
/// handler's [`Failure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome<V, F = StoreError> {
    /// The handler's verdict about the event.
    Settled(V),
    /// The body is not a valid event: it cannot succeed as sent, and goes to
    /// the DLQ after its receives, where an operator can read why.
    Invalid(ParseError),
    /// A dependency did not confirm the effect.
    Failed(F),
    /// Not attempted in this invocation.
    NotAttempted(Skip),
}

impl<V, F> RecordOutcome<V, F> {
    /// The labels of the shared outcomes, in the order of the variants.
    pub const SHARED_LABELS: [&'static str; 3] = ["Invalid", "Failed", "NotAttempted"];

    /// The consumer's verdict, if the record got one.
    pub fn verdict(&self) -> Option<&V> {
        match self {
            RecordOutcome::Settled(v) => Some(v),
            _ => None,
        }
    }

    /// A dependency the record needs failed (DynamoDB, or a provider it
    /// calls), as opposed to a verdict about the event. A batch in which
    /// every record failed this way (or was not attempted) fails the
    /// invocation, so the outage shows in Lambda's Errors metric.
    pub fn is_dependency_failure(&self) -> bool {
        matches!(self, RecordOutcome::Failed(_))
    }

    /// The record was left for a later invocation.
    pub fn is_not_attempted(&self) -> bool {
        matches!(self, RecordOutcome::NotAttempted(_))
    }
}

impl<V: Verdict, F> RecordOutcome<V, F> {
    /// A stable name, used in logs and as the metric name: the verdict's
    /// label, or the shared outcome's.
    pub fn label(&self) -> &'static str {
        match self {
            RecordOutcome::Settled(v) => v.label(),
            RecordOutcome::Invalid(_) => Self::SHARED_LABELS[0],
            RecordOutcome::Failed(_) => Self::SHARED_LABELS[1],
            RecordOutcome::NotAttempted(_) => Self::SHARED_LABELS[2],
        }
    }

    /// What the batch acts on: only a verdict the consumer acknowledges,
    /// never a shared outcome.
    pub fn acknowledge(&self) -> bool {
        self.verdict().is_some_and(Verdict::acknowledge)
    }

    /// How soon the message should come back if it is not acknowledged
    /// (see [`BackoffPolicy`](crate::backoff::BackoffPolicy)): the shared outcomes
    /// are classified here, the verdicts by [`Verdict::retry_class`].
    pub fn retry_class(&self) -> RetryClass {
        match self {
            RecordOutcome::Settled(v) => v.retry_class(),
            RecordOutcome::Invalid(_) => RetryClass::Hopeless,
            RecordOutcome::Failed(_) => RetryClass::Dependency,
            // A group held behind its failed head comes right back behind
            // it. A record the deadline cut off waits like a dependency
            // failure: a batch that keeps running out of time is usually a
            // slow table, and coming back at once would spend its receives
            // in seconds.
            RecordOutcome::NotAttempted(Skip::FifoGroupBlocked) => RetryClass::Immediate,
            RecordOutcome::NotAttempted(Skip::Deadline) => RetryClass::Dependency,
        }
    }
}

impl<V: Verdict, F: Failure> RecordOutcome<V, F> {
    /// How loudly the record's line is logged: the verdict's level; for the
    /// shared outcomes ERROR when someone has to act (a bad event, a
    /// failure that will not heal), WARN when it heals by itself.
    pub fn level(&self) -> Level {
        match self {
            RecordOutcome::Settled(v) => v.level(),
            RecordOutcome::Invalid(_) => Level::ERROR,
            RecordOutcome::Failed(e) if !e.is_retryable() => Level::ERROR,
            RecordOutcome::Failed(_) | RecordOutcome::NotAttempted(_) => Level::WARN,
        }
    }
}

impl<V: fmt::Display, F: fmt::Display> fmt::Display for RecordOutcome<V, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordOutcome::Settled(v) => v.fmt(f),
            RecordOutcome::Invalid(e) => write!(f, "Invalid: {e}"),
            RecordOutcome::Failed(e) => write!(f, "Failed: {e}"),
            RecordOutcome::NotAttempted(skip) => write!(f, "NotAttempted: {skip}"),
        }
    }
}

/// A verdict is a settled outcome, so a handler or a test can write
/// `verdict.into()`.
impl<V, F> From<V> for RecordOutcome<V, F> {
    fn from(verdict: V) -> Self {
        RecordOutcome::Settled(verdict)
    }
}

/// So that a test can compare an outcome with the verdict it expects:
/// `assert_eq!(outcome, MyVerdict::Applied)`.
impl<V: PartialEq, F> PartialEq<V> for RecordOutcome<V, F> {
    fn eq(&self, other: &V) -> bool {
        self.verdict() == Some(other)
    }
}

/// Every label of `V`'s records: its own verdicts' names and the shared
/// ones, so that metrics report zeros for outcomes that did not occur.
pub fn labels<V: Verdict>() -> impl Iterator<Item = &'static str> {
    V::LABELS
        .iter()
        .copied()
        .chain(RecordOutcome::<V>::SHARED_LABELS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Toy {
        Done,
        Early,
        Conflict,
    }

    impl fmt::Display for Toy {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.label())
        }
    }

    impl Verdict for Toy {
        const LABELS: &'static [&'static str] = &["Done", "Early", "Conflict"];
        fn label(&self) -> &'static str {
            match self {
                Toy::Done => "Done",
                Toy::Early => "Early",
                Toy::Conflict => "Conflict",
            }
        }
        fn acknowledge(&self) -> bool {
            matches!(self, Toy::Done)
        }
        fn level(&self) -> Level {
            match self {
                Toy::Conflict => Level::ERROR,
                _ => Level::INFO,
            }
        }
        fn retry_class(&self) -> RetryClass {
            match self {
                Toy::Conflict => RetryClass::Hopeless,
                _ => RetryClass::Predecessor,
            }
        }
    }

    type Outcome = RecordOutcome<Toy>;

    fn invalid() -> Outcome {
        RecordOutcome::Invalid(ParseError::MissingBody)
    }

    /// A failure that says, part way, that its record was not attempted.
    #[derive(Debug, Clone)]
    struct Late;

    impl fmt::Display for Late {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("late")
        }
    }

    impl From<StoreError> for Late {
        fn from(_: StoreError) -> Self {
            Late
        }
    }

    impl Failure for Late {
        fn is_retryable(&self) -> bool {
            true
        }
        fn not_attempted(&self) -> Option<Skip> {
            Some(Skip::Deadline)
        }
    }

    #[test]
    fn the_shared_labels_follow_the_verdicts_labels() {
        assert_eq!(
            labels::<Toy>().collect::<Vec<_>>(),
            [
                "Done",
                "Early",
                "Conflict",
                "Invalid",
                "Failed",
                "NotAttempted"
            ]
        );
        assert_eq!(Outcome::Settled(Toy::Early).label(), "Early");
        assert_eq!(invalid().label(), "Invalid");
        assert_eq!(Outcome::Failed(StoreError::Timeout).label(), "Failed");
        assert_eq!(
            Outcome::NotAttempted(Skip::Deadline).label(),
            "NotAttempted"
        );
    }

    #[test]
    fn shared_outcomes_are_logged_by_whether_someone_has_to_act() {
        let denied = Outcome::Failed(StoreError::AccessDenied {
            code: "AccessDeniedException".into(),
        });
        assert_eq!(Outcome::Failed(StoreError::Timeout).level(), Level::WARN);
        assert_eq!(denied.level(), Level::ERROR);
        assert_eq!(invalid().level(), Level::ERROR);
        assert_eq!(
            Outcome::NotAttempted(Skip::FifoGroupBlocked).level(),
            Level::WARN
        );
        assert_eq!(Outcome::NotAttempted(Skip::Deadline).level(), Level::WARN);
        // A verdict's own level, and the default.
        assert_eq!(Outcome::Settled(Toy::Conflict).level(), Level::ERROR);
        assert_eq!(Outcome::Settled(Toy::Done).level(), Level::INFO);
        assert_eq!(Level::INFO, {
            #[derive(Clone)]
            struct Plain;
            impl fmt::Display for Plain {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("Plain")
                }
            }
            impl Verdict for Plain {
                const LABELS: &'static [&'static str] = &["Plain"];
                fn label(&self) -> &'static str {
                    "Plain"
                }
                fn acknowledge(&self) -> bool {
                    true
                }
            }
            Plain.level()
        });
    }

    #[test]
    fn only_an_acknowledged_verdict_is_acknowledged() {
        assert!(Outcome::Settled(Toy::Done).acknowledge());
        assert!(!Outcome::Settled(Toy::Early).acknowledge());
        for o in [
            invalid(),
            Outcome::Failed(StoreError::Timeout),
            Outcome::NotAttempted(Skip::Deadline),
            Outcome::NotAttempted(Skip::FifoGroupBlocked),
        ] {
            assert!(!o.acknowledge(), "{o}");
        }
        let timeout = Outcome::Failed(StoreError::Timeout);
        assert!(timeout.is_dependency_failure() && !timeout.is_not_attempted());
        assert!(Outcome::NotAttempted(Skip::Deadline).is_not_attempted());
        assert!(!invalid().is_dependency_failure() && !invalid().is_not_attempted());
        assert!(!Outcome::Settled(Toy::Early).is_dependency_failure());
    }

    #[test]
    fn every_shared_outcome_has_its_retry_class_and_verdicts_keep_theirs() {
        for (o, class) in [
            (invalid(), RetryClass::Hopeless),
            (Outcome::Failed(StoreError::Timeout), RetryClass::Dependency),
            (
                Outcome::NotAttempted(Skip::Deadline),
                RetryClass::Dependency,
            ),
            (
                Outcome::NotAttempted(Skip::FifoGroupBlocked),
                RetryClass::Immediate,
            ),
            (Outcome::Settled(Toy::Early), RetryClass::Predecessor),
            (Outcome::Settled(Toy::Conflict), RetryClass::Hopeless),
        ] {
            assert_eq!(o.retry_class(), class, "{o}");
        }
    }

    #[test]
    fn an_outcome_reads_as_its_verdict_or_its_shared_wording() {
        assert_eq!(Outcome::Settled(Toy::Early).to_string(), "Early");
        assert_eq!(
            Outcome::NotAttempted(Skip::Deadline).to_string(),
            "NotAttempted: invocation deadline too close"
        );
        assert_eq!(invalid().to_string(), "Invalid: the record has no body");
        assert!(
            Outcome::Failed(StoreError::Timeout)
                .to_string()
                .starts_with("Failed: ")
        );
    }

    #[test]
    fn an_outcome_equals_the_verdict_it_holds_and_nothing_else() {
        assert_eq!(Outcome::Settled(Toy::Done), Toy::Done);
        assert_ne!(Outcome::Settled(Toy::Early), Toy::Done);
        assert_ne!(invalid(), Toy::Done);
        assert_ne!(Outcome::Failed(StoreError::Timeout), Toy::Done);
        assert_eq!(Outcome::Settled(Toy::Done).verdict(), Some(&Toy::Done));
        assert_eq!(Outcome::NotAttempted(Skip::Deadline).verdict(), None);
        assert_eq!(Outcome::from(Toy::Early), Outcome::Settled(Toy::Early));
    }

    #[test]
    fn a_failure_may_say_its_record_was_not_attempted() {
        assert_eq!(Late.not_attempted(), Some(Skip::Deadline));
        assert_eq!(StoreError::Timeout.not_attempted(), None);
    }
}
