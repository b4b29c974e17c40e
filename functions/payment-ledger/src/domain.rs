//! What a cancelled ledger transaction means. Pure: no SDK types, no I/O.
//!
//! DynamoDB cancels a TransactWriteItems as a whole and says why, item by
//! item, in its cancellation reasons; with `ReturnValuesOnConditionCheckFailure
//! = ALL_OLD` a failed condition also carries the item it was checked against.
//! The adapter turns those into a [`Cancellation`]; [`classify_cancellation`]
//! reads it index by index, most decisive first.
//!
//! An event the ledger cannot post (a refund beyond its capture, a currency
//! other than the account's, a refund of a capture that is itself parked)
//! describes money that moved at the provider, so it is never simply
//! dropped: it is parked in a suspense entry ([`Decision::Park`]) and
//! acknowledged only once that entry is written.
//! [`classify_park_refusal`] reads the stored item when the suspense entry
//! already exists.

use tracing::Level;

use crate::event::{LedgerEvent, Movement};
use lambda_idempotency::RetryClass;
use lambda_idempotency::StoreError;
use lambda_idempotency::Verdict;

/// A ledger entry as stored (the fields classification needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySnapshot {
    pub account_id: String,
    /// Signed: captures positive, refunds negative.
    pub amount: i128,
    pub currency: String,
    pub payment_id: String,
    /// Captures only: what can still be refunded.
    pub refundable: Option<i128>,
}

/// An account as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountSnapshot {
    pub currency: String,
    pub balance: i128,
}

/// Why DynamoDB cancelled one item of the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason<T> {
    /// This item was fine (code `None`).
    Ok,
    /// Its condition failed; the item it was checked against, if any.
    ConditionFailed(Option<T>),
    /// Another transaction or write was touching the item.
    TransactionConflict,
    Throttled {
        code: String,
    },
    Other {
        code: String,
    },
}

/// The cancellation reasons of one ledger transaction, by role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancellation {
    /// The new entry's Put (`attribute_not_exists(entry_id)`).
    pub entry: Reason<EntrySnapshot>,
    /// Refunds only: the capture entry's Update.
    pub capture: Option<Reason<EntrySnapshot>>,
    /// Refunds only: the ConditionCheck that the capture is not parked (its
    /// suspense entry does not exist); when it is, the item is that entry.
    pub capture_parked: Option<Reason<SuspenseSnapshot>>,
    /// The account's Update.
    pub account: Reason<AccountSnapshot>,
}

/// Why an event cannot be posted. It is parked in a suspense entry with
/// these facts (what an operator needs to resolve it), then acknowledged,
/// logged at WARN, counted and alarmed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuspenseReason {
    /// The refund is larger than what is left of its capture.
    OverRefund { refundable: i128, requested: u64 },
    /// The account holds another currency.
    CurrencyMismatch { account_currency: String },
    /// The refund's capture could not be posted and is parked itself, so
    /// there is nothing to refund from. `capture_entry` is the capture's
    /// suspense entry (`suspense:pay:{paymentId}`): resolving that one
    /// decides this one.
    CaptureParked { capture_entry: String },
}

impl SuspenseReason {
    /// The reason as stored in the suspense entry.
    pub fn code(&self) -> &'static str {
        match self {
            SuspenseReason::OverRefund { .. } => "over-refund",
            SuspenseReason::CurrencyMismatch { .. } => "currency-mismatch",
            SuspenseReason::CaptureParked { .. } => "capture-parked",
        }
    }
}

/// A suspense entry as stored (the fields classification needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspenseSnapshot {
    pub account_id: String,
    /// The event's amount as sent (unsigned: nothing was posted).
    pub amount: i128,
    pub currency: String,
    pub payment_id: String,
    /// Which write created it (see [`classify_park_refusal`]).
    pub attempt: String,
}

/// What a cancelled transaction asks the ledger to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing more to write: this is the record's outcome.
    Settled(LedgerOutcome),
    /// The event can never be posted: park it in suspense, and acknowledge
    /// it only once the suspense entry is written.
    Park(SuspenseReason),
    /// The refusal says nothing about the event (contention, throttling, a
    /// reason DynamoDB did not fill in): the record failed, and is retried.
    Failed(StoreError),
}

/// A producer bug: the same business id with different content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerConflict {
    /// The entry exists with another account, amount, currency or payment.
    EntryDiffers,
    /// The refund names a capture of another account or currency.
    RefundDoesNotMatchCapture,
    /// The event is already parked in suspense with other content.
    SuspenseDiffers,
}

/// The ledger's verdict about one record (a record that got none is
/// invalid, failed or not attempted: [`lambda_idempotency::RecordOutcome`]).
#[derive(Debug, Clone, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum LedgerOutcome {
    /// The transaction committed (or was an SDK-retried / redelivered copy
    /// of one that had, within DynamoDB's 10-minute token window).
    Applied,
    /// The entry (or the suspense entry) already exists with the same content.
    Duplicate,
    /// A refund whose capture is not recorded yet: retry later.
    Early,
    /// The event cannot be posted and is now parked in its suspense entry
    /// (written by this attempt).
    Suspended(SuspenseReason),
    Conflict(LedgerConflict),
}

impl std::fmt::Display for LedgerOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LedgerOutcome::Applied => f.write_str("Applied"),
            LedgerOutcome::Duplicate => {
                f.write_str("Duplicate: already recorded (as an entry or in suspense)")
            }
            LedgerOutcome::Early => f.write_str("Early: the refund's capture is not recorded yet"),
            // Amounts are payment data: they stay out of the log line (the
            // variant keeps them for callers and tests).
            LedgerOutcome::Suspended(SuspenseReason::OverRefund { .. }) => f.write_str(
                "Suspended: the refund exceeds what is left on its capture; parked in suspense",
            ),
            LedgerOutcome::Suspended(SuspenseReason::CaptureParked { .. }) => f.write_str(
                "Suspended: the refund's capture is parked in suspense; parked in suspense too",
            ),
            LedgerOutcome::Suspended(SuspenseReason::CurrencyMismatch { account_currency }) => {
                write!(
                    f,
                    "Suspended: the account is in {account_currency}; parked in suspense"
                )
            }
            LedgerOutcome::Conflict(LedgerConflict::EntryDiffers) => {
                f.write_str("Conflict: the entry exists with different content")
            }
            LedgerOutcome::Conflict(LedgerConflict::RefundDoesNotMatchCapture) => {
                f.write_str("Conflict: the refund's account or currency differs from its capture")
            }
            LedgerOutcome::Conflict(LedgerConflict::SuspenseDiffers) => {
                f.write_str("Conflict: the event is already parked in suspense with other content")
            }
        }
    }
}

impl Verdict for LedgerOutcome {
    const LABELS: &'static [&'static str] =
        &["Applied", "Duplicate", "Early", "Suspended", "Conflict"];

    /// Only what is durably recorded may be deleted from the queue: a
    /// committed entry, a proven duplicate (of an entry or a suspense
    /// entry), or an event now parked in its suspense entry.
    fn acknowledge(&self) -> bool {
        matches!(
            self,
            LedgerOutcome::Applied | LedgerOutcome::Duplicate | LedgerOutcome::Suspended(_)
        )
    }

    fn label(&self) -> &'static str {
        // The variant's name (strum), so labels cannot drift from variants.
        self.into()
    }

    fn level(&self) -> Level {
        match self {
            LedgerOutcome::Applied | LedgerOutcome::Duplicate | LedgerOutcome::Early => Level::INFO,
            LedgerOutcome::Suspended(_) => Level::WARN,
            LedgerOutcome::Conflict(_) => Level::ERROR,
        }
    }

    /// A refund waits for its capture; a Conflict never resolves itself.
    fn retry_class(&self) -> RetryClass {
        match self {
            LedgerOutcome::Conflict(_) => RetryClass::Hopeless,
            _ => RetryClass::Predecessor,
        }
    }
}

/// Does the stored entry say the same thing as this event? The eventId is
/// not compared: the entry id is the business key, and a re-published
/// event with a new eventId is the same capture or refund.
fn same_entry(ev: &LedgerEvent, stored: &EntrySnapshot) -> bool {
    stored.account_id == ev.account_id.as_str()
        && stored.amount == ev.signed_amount()
        && stored.currency == ev.currency.as_str()
        && stored.payment_id == ev.payment_id.as_str()
}

/// Decide what a cancelled transaction means for `ev`.
pub fn classify_cancellation(ev: &LedgerEvent, c: &Cancellation) -> Decision {
    let settled = Decision::Settled;
    // Contention and throttling first: the other reasons may be incomplete
    // (DynamoDB reports `None` for items it did not get to), so the only
    // safe reading is "retry".
    if let Some(t) = [
        transient(&c.entry),
        c.capture.as_ref().and_then(transient),
        c.capture_parked.as_ref().and_then(transient),
        transient(&c.account),
    ]
    .into_iter()
    .flatten()
    .next()
    {
        return Decision::Failed(t);
    }

    // 1. The entry: its id is the idempotency key.
    match &c.entry {
        Reason::ConditionFailed(Some(stored)) => {
            return settled(if same_entry(ev, stored) {
                LedgerOutcome::Duplicate
            } else {
                LedgerOutcome::Conflict(LedgerConflict::EntryDiffers)
            });
        }
        Reason::ConditionFailed(None) => {
            return Decision::Failed(StoreError::RefusedWithoutItem);
        }
        _ => {}
    }

    // 2. Refunds: the capture must not be parked. A parked capture never
    //    becomes an entry by itself (an account's currency never changes),
    //    so its refund would be Early until SQS gave up on it: the refund
    //    is parked too, naming the capture's suspense entry. Checked before
    //    the capture's own reason, which for a parked capture only says
    //    "missing", exactly as for a capture that has not arrived yet.
    match &c.capture_parked {
        Some(Reason::ConditionFailed(Some(parked))) => {
            return if parked.account_id != ev.account_id.as_str()
                || parked.currency != ev.currency.as_str()
            {
                settled(LedgerOutcome::Conflict(
                    LedgerConflict::RefundDoesNotMatchCapture,
                ))
            } else {
                Decision::Park(SuspenseReason::CaptureParked {
                    capture_entry: ev.capture_suspense_entry_id(),
                })
            };
        }
        Some(Reason::ConditionFailed(None)) => {
            return Decision::Failed(StoreError::RefusedWithoutItem);
        }
        _ => {}
    }

    // 3. Refunds: the capture must exist, match, and have enough left.
    if let (Movement::Refunded { .. }, Some(Reason::ConditionFailed(found))) =
        (&ev.movement, &c.capture)
    {
        let Some(capture) = found else {
            return settled(LedgerOutcome::Early);
        };
        if capture.account_id != ev.account_id.as_str() || capture.currency != ev.currency.as_str()
        {
            return settled(LedgerOutcome::Conflict(
                LedgerConflict::RefundDoesNotMatchCapture,
            ));
        }
        let refundable = capture.refundable.unwrap_or(0);
        if refundable < i128::from(ev.amount.get()) {
            // What is left on a capture only ever shrinks: this refund can
            // never be posted, and the money did leave at the provider.
            return Decision::Park(SuspenseReason::OverRefund {
                refundable,
                requested: ev.amount.get(),
            });
        }
        return Decision::Failed(StoreError::InconsistentRefusal);
    }

    // 4. The account: same currency (or, for a capture, a new account).
    match &c.account {
        // An account's currency never changes once set.
        Reason::ConditionFailed(Some(account)) if account.currency != ev.currency.as_str() => {
            Decision::Park(SuspenseReason::CurrencyMismatch {
                account_currency: account.currency.clone(),
            })
        }
        Reason::ConditionFailed(Some(_)) => Decision::Failed(StoreError::InconsistentRefusal),
        // A refund's account is created by its capture; if the capture
        // exists and the account does not, something else is wrong.
        Reason::ConditionFailed(None) => Decision::Failed(StoreError::RefusedWithoutItem),
        _ => {
            let code = [
                other_code(&c.entry),
                c.capture.as_ref().and_then(other_code),
                c.capture_parked.as_ref().and_then(other_code),
                other_code(&c.account),
            ]
            .into_iter()
            .flatten()
            .next()
            .unwrap_or_else(|| "TransactionCanceled".to_owned());
            Decision::Failed(StoreError::Client { code })
        }
    }
}

/// The suspense entry's Put (`attribute_not_exists`) was refused: the entry
/// exists. `attempt` identifies this Put; `stored` is the item returned with
/// `ALL_OLD`.
///
/// - Written by this very Put (its first attempt committed, the answer was
///   lost, the SDK retried): the event is parked now, so it is `Suspended`
///   and counted, like any other first parking.
/// - The same event content (a redelivery, or a re-publish under a new
///   eventId): already parked, `Duplicate`. The reason's facts are not
///   compared: what is left on a capture may have shrunk since.
/// - Other content under the same key: a producer bug, `Conflict`.
pub fn classify_park_refusal(
    ev: &LedgerEvent,
    reason: SuspenseReason,
    attempt: &str,
    stored: Option<&SuspenseSnapshot>,
) -> Result<LedgerOutcome, StoreError> {
    Ok(match stored {
        None => return Err(StoreError::RefusedWithoutItem),
        Some(s) if !same_suspense(ev, s) => {
            LedgerOutcome::Conflict(LedgerConflict::SuspenseDiffers)
        }
        Some(s) if s.attempt == attempt => LedgerOutcome::Suspended(reason),
        Some(_) => LedgerOutcome::Duplicate,
    })
}

/// Does the suspense entry hold this event? The same fields as
/// [`same_entry`], for the same reason: the key is the business id.
fn same_suspense(ev: &LedgerEvent, stored: &SuspenseSnapshot) -> bool {
    stored.account_id == ev.account_id.as_str()
        && stored.amount == i128::from(ev.amount.get())
        && stored.currency == ev.currency.as_str()
        && stored.payment_id == ev.payment_id.as_str()
}

fn transient<T>(r: &Reason<T>) -> Option<StoreError> {
    match r {
        Reason::TransactionConflict => Some(StoreError::Server {
            code: "TransactionConflict".to_owned(),
        }),
        Reason::Throttled { code } => Some(StoreError::Throttled { code: code.clone() }),
        _ => None,
    }
}

fn other_code<T>(r: &Reason<T>) -> Option<String> {
    match r {
        Reason::Other { code } => Some(code.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_body;
    use lambda_idempotency::wire::ParseError;
    use lambda_idempotency::{Skip, labels};
    use serde_json::json;

    fn capture(amount: u64) -> LedgerEvent {
        let v = json!({"eventId": "e1", "type": "PaymentCaptured", "paymentId": "p1",
                       "accountId": "a1", "amount": amount, "currency": "INR",
                       "occurredAt": "2026-11-29T10:15:00Z"});
        parse_body(Some(&v.to_string())).unwrap()
    }

    fn refund(amount: u64) -> LedgerEvent {
        let v = json!({"eventId": "e2", "type": "PaymentRefunded", "paymentId": "p1",
                       "refundId": "r1", "accountId": "a1", "amount": amount,
                       "currency": "INR", "occurredAt": "2026-11-29T11:15:00Z"});
        parse_body(Some(&v.to_string())).unwrap()
    }

    fn entry(account: &str, amount: i128, refundable: Option<i128>) -> EntrySnapshot {
        EntrySnapshot {
            account_id: account.into(),
            amount,
            currency: "INR".into(),
            payment_id: "p1".into(),
            refundable,
        }
    }

    fn cancel(
        entry: Reason<EntrySnapshot>,
        capture: Option<Reason<EntrySnapshot>>,
        account: Reason<AccountSnapshot>,
    ) -> Cancellation {
        Cancellation {
            entry,
            // A refund's capture is not parked unless a test says so.
            capture_parked: capture.as_ref().map(|_| Reason::Ok),
            capture,
            account,
        }
    }

    #[test]
    fn an_existing_entry_is_a_duplicate_only_with_the_same_content() {
        let c = capture(500);
        let same = cancel(
            Reason::ConditionFailed(Some(entry("a1", 500, Some(500)))),
            None,
            Reason::Ok,
        );
        assert_eq!(
            classify_cancellation(&c, &same),
            Decision::Settled(LedgerOutcome::Duplicate)
        );
        for other in [entry("a1", 499, Some(499)), entry("a2", 500, Some(500))] {
            let differs = cancel(Reason::ConditionFailed(Some(other)), None, Reason::Ok);
            assert_eq!(
                classify_cancellation(&c, &differs),
                Decision::Settled(LedgerOutcome::Conflict(LedgerConflict::EntryDiffers))
            );
        }
        let r = refund(200);
        let same = cancel(
            Reason::ConditionFailed(Some(entry("a1", -200, None))),
            Some(Reason::ConditionFailed(Some(entry("a1", 500, Some(0))))),
            Reason::Ok,
        );
        assert_eq!(
            classify_cancellation(&r, &same),
            Decision::Settled(LedgerOutcome::Duplicate)
        );
    }

    #[test]
    fn refunds_are_early_parked_or_conflicting_by_their_capture() {
        let r = refund(200);
        let missing = cancel(Reason::Ok, Some(Reason::ConditionFailed(None)), Reason::Ok);
        assert_eq!(
            classify_cancellation(&r, &missing),
            Decision::Settled(LedgerOutcome::Early)
        );
        let spent = cancel(
            Reason::Ok,
            Some(Reason::ConditionFailed(Some(entry("a1", 500, Some(100))))),
            Reason::Ok,
        );
        assert_eq!(
            classify_cancellation(&r, &spent),
            Decision::Park(SuspenseReason::OverRefund {
                refundable: 100,
                requested: 200
            })
        );
        let elsewhere = cancel(
            Reason::Ok,
            Some(Reason::ConditionFailed(Some(entry("a9", 500, Some(500))))),
            Reason::Ok,
        );
        assert_eq!(
            classify_cancellation(&r, &elsewhere),
            Decision::Settled(LedgerOutcome::Conflict(
                LedgerConflict::RefundDoesNotMatchCapture
            ))
        );
    }

    /// The refund of a capture parked in suspense: its transaction is
    /// cancelled by the ConditionCheck on the capture's suspense entry (and
    /// the capture's Update, which finds no capture, and the account's,
    /// which holds another currency). It is parked, naming that entry,
    /// never Early: the capture will not be posted by any redelivery.
    #[test]
    fn the_refund_of_a_parked_capture_is_parked_naming_the_capture_s_suspense_entry() {
        let r = refund(200);
        let parked_capture = |account: &str, currency: &str| SuspenseSnapshot {
            account_id: account.into(),
            amount: 500,
            currency: currency.into(),
            payment_id: "p1".into(),
            attempt: "earlier".into(),
        };
        let account_in_usd = Reason::ConditionFailed(Some(AccountSnapshot {
            currency: "USD".into(),
            balance: 10,
        }));
        let with_parked =
            |parked: Reason<SuspenseSnapshot>, account: Reason<AccountSnapshot>| Cancellation {
                entry: Reason::Ok,
                capture: Some(Reason::ConditionFailed(None)),
                capture_parked: Some(parked),
                account,
            };
        let want = Decision::Park(SuspenseReason::CaptureParked {
            capture_entry: "suspense:pay:p1".into(),
        });
        // Whatever the account says (it holds another currency, or matches).
        for account in [account_in_usd.clone(), Reason::Ok] {
            assert_eq!(
                classify_cancellation(
                    &r,
                    &with_parked(
                        Reason::ConditionFailed(Some(parked_capture("a1", "INR"))),
                        account
                    )
                ),
                want
            );
        }
        // The capture is missing and not parked: it has not arrived yet.
        assert_eq!(
            classify_cancellation(&r, &with_parked(Reason::Ok, account_in_usd.clone())),
            Decision::Settled(LedgerOutcome::Early)
        );
        // Parked under another account or currency than the refund names.
        for other in [parked_capture("a2", "INR"), parked_capture("a1", "USD")] {
            assert_eq!(
                classify_cancellation(
                    &r,
                    &with_parked(Reason::ConditionFailed(Some(other)), Reason::Ok)
                ),
                Decision::Settled(LedgerOutcome::Conflict(
                    LedgerConflict::RefundDoesNotMatchCapture
                ))
            );
        }
        // Refused without the item: unreadable, retried.
        assert_eq!(
            classify_cancellation(&r, &with_parked(Reason::ConditionFailed(None), Reason::Ok)),
            Decision::Failed(StoreError::RefusedWithoutItem)
        );
        // A redelivery of a refund already posted stays a Duplicate.
        let posted = Cancellation {
            entry: Reason::ConditionFailed(Some(entry("a1", -200, None))),
            ..with_parked(
                Reason::ConditionFailed(Some(parked_capture("a1", "INR"))),
                Reason::Ok,
            )
        };
        assert_eq!(
            classify_cancellation(&r, &posted),
            Decision::Settled(LedgerOutcome::Duplicate)
        );
        // Contention on the check is retried like any other.
        assert!(matches!(
            classify_cancellation(&r, &with_parked(Reason::TransactionConflict, Reason::Ok)),
            Decision::Failed(StoreError::Server { .. })
        ));
        let code = SuspenseReason::CaptureParked {
            capture_entry: "suspense:pay:p1".into(),
        };
        assert_eq!(code.code(), "capture-parked");
        let shown = LedgerOutcome::Suspended(code).to_string();
        assert!(shown.contains("parked in suspense"), "{shown}");
    }

    #[test]
    fn a_currency_mismatch_is_parked() {
        let c = capture(500);
        let usd = cancel(
            Reason::Ok,
            None,
            Reason::ConditionFailed(Some(AccountSnapshot {
                currency: "USD".into(),
                balance: 10,
            })),
        );
        assert_eq!(
            classify_cancellation(&c, &usd),
            Decision::Park(SuspenseReason::CurrencyMismatch {
                account_currency: "USD".into()
            })
        );
    }

    #[test]
    fn contention_and_throttling_are_retried_whatever_else_is_reported() {
        let c = capture(500);
        let conflict = cancel(
            Reason::ConditionFailed(Some(entry("a1", 500, Some(500)))),
            None,
            Reason::TransactionConflict,
        );
        assert!(matches!(
            classify_cancellation(&c, &conflict),
            Decision::Failed(StoreError::Server { .. })
        ));
        let throttled = cancel(
            Reason::Throttled {
                code: "ThrottlingError".into(),
            },
            None,
            Reason::Ok,
        );
        assert!(matches!(
            classify_cancellation(&c, &throttled),
            Decision::Failed(StoreError::Throttled { .. })
        ));
        let odd = cancel(
            Reason::Other {
                code: "ValidationError".into(),
            },
            None,
            Reason::Ok,
        );
        assert_eq!(
            classify_cancellation(&c, &odd),
            Decision::Failed(StoreError::Client {
                code: "ValidationError".into()
            })
        );
    }

    #[test]
    fn only_settled_outcomes_are_acknowledged() {
        assert!(LedgerOutcome::Applied.acknowledge());
        assert!(LedgerOutcome::Duplicate.acknowledge());
        // Acknowledged only because its suspense entry is written: the
        // outcome exists only after the Put committed (see `Ledger::apply`).
        assert!(
            LedgerOutcome::Suspended(SuspenseReason::CurrencyMismatch {
                account_currency: "USD".into()
            })
            .acknowledge()
        );
        assert!(!LedgerOutcome::Conflict(LedgerConflict::SuspenseDiffers).acknowledge());
        assert!(!LedgerOutcome::Early.acknowledge());
        assert!(!LedgerOutcome::Conflict(LedgerConflict::EntryDiffers).acknowledge());
        type Record = lambda_idempotency::RecordOutcome<LedgerOutcome>;
        assert!(!Record::Failed(StoreError::Timeout).acknowledge());
        assert!(!Record::Invalid(ParseError::MissingBody).acknowledge());
        assert!(!Record::NotAttempted(Skip::Deadline).acknowledge());
    }

    fn parked(account: &str, amount: i128, currency: &str, attempt: &str) -> SuspenseSnapshot {
        SuspenseSnapshot {
            account_id: account.into(),
            amount,
            currency: currency.into(),
            payment_id: "p1".into(),
            attempt: attempt.into(),
        }
    }

    #[test]
    fn a_refused_suspense_entry_is_ours_a_duplicate_or_a_conflict_by_its_content() {
        let over = SuspenseReason::OverRefund {
            refundable: 100,
            requested: 200,
        };
        let suspended = LedgerOutcome::Suspended(over.clone());
        let differs = LedgerOutcome::Conflict(LedgerConflict::SuspenseDiffers);
        let r = refund(200);
        let cases: [(
            &str,
            Option<SuspenseSnapshot>,
            Result<LedgerOutcome, StoreError>,
        ); 7] = [
            // The SDK retried this very Put after its answer was lost.
            (
                "ours",
                Some(parked("a1", 200, "INR", "this")),
                Ok(suspended),
            ),
            // A redelivery (or a re-publish) of the parked event.
            (
                "redelivery",
                Some(parked("a1", 200, "INR", "earlier")),
                Ok(LedgerOutcome::Duplicate),
            ),
            (
                "other amount",
                Some(parked("a1", 201, "INR", "earlier")),
                Ok(differs.clone()),
            ),
            (
                "other account",
                Some(parked("a2", 200, "INR", "earlier")),
                Ok(differs.clone()),
            ),
            (
                "other currency",
                Some(parked("a1", 200, "USD", "earlier")),
                Ok(differs.clone()),
            ),
            (
                "other payment",
                Some(SuspenseSnapshot {
                    payment_id: "p2".into(),
                    ..parked("a1", 200, "INR", "earlier")
                }),
                Ok(differs),
            ),
            ("no item", None, Err(StoreError::RefusedWithoutItem)),
        ];
        for (name, stored, want) in cases {
            assert_eq!(
                classify_park_refusal(&r, over.clone(), "this", stored.as_ref()),
                want,
                "{name}"
            );
        }
        // The reason's facts are not content: what is left on the capture
        // may have shrunk between the parking and the redelivery.
        let later = SuspenseReason::OverRefund {
            refundable: 0,
            requested: 200,
        };
        assert_eq!(
            classify_park_refusal(
                &r,
                later,
                "this",
                Some(&parked("a1", 200, "INR", "earlier"))
            ),
            Ok(LedgerOutcome::Duplicate)
        );
    }

    #[test]
    fn a_suspended_event_is_counted_and_logged_at_warn_without_its_amounts() {
        let o = LedgerOutcome::Suspended(SuspenseReason::OverRefund {
            refundable: 123_457,
            requested: 987_654,
        });
        assert_eq!(o.label(), "Suspended");
        assert!(labels::<LedgerOutcome>().any(|l| l == "Suspended"));
        assert_eq!(o.level(), Level::WARN);
        let shown = o.to_string();
        assert!(
            !shown.contains("123457") && !shown.contains("987654"),
            "{shown}"
        );
        assert!(shown.contains("parked in suspense"), "{shown}");
        assert_eq!(
            LedgerOutcome::Conflict(LedgerConflict::SuspenseDiffers).level(),
            Level::ERROR
        );
        assert_eq!(
            SuspenseReason::CurrencyMismatch {
                account_currency: "USD".into()
            }
            .code(),
            "currency-mismatch"
        );
    }
}
