//! What a cancelled ledger transaction means. Pure: no SDK types, no I/O.
//!
//! DynamoDB cancels a TransactWriteItems as a whole and says why, item by
//! item, in its cancellation reasons; with `ReturnValuesOnConditionCheckFailure
//! = ALL_OLD` a failed condition also carries the item it was checked against.
//! The adapter turns those into a [`Cancellation`]; [`classify_cancellation`]
//! reads it index by index, most decisive first.

use tracing::Level;

use crate::batch::{Skip, Verdict};
use crate::error::StoreError;
use crate::event::ParseError;
use crate::ledger::event::{LedgerEvent, Movement};

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
    /// The account's Update.
    pub account: Reason<AccountSnapshot>,
}

/// Why a refund is refused for good. Acknowledged, logged at WARN, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The refund is larger than what is left of its capture.
    OverRefund { refundable: i128, requested: u64 },
    /// The account holds another currency.
    CurrencyMismatch { account_currency: String },
}

/// A producer bug: the same business id with different content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerConflict {
    /// The entry exists with another account, amount, currency or payment.
    EntryDiffers,
    /// The refund names a capture of another account or currency.
    RefundDoesNotMatchCapture,
}

/// What happened to one ledger record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerOutcome {
    /// The transaction committed (or was an SDK-retried / redelivered copy
    /// of one that had, within DynamoDB's 10-minute token window).
    Applied,
    /// The entry already exists with the same content.
    Duplicate,
    /// A refund whose capture is not recorded yet: retry later.
    Early,
    Rejected(Rejection),
    Conflict(LedgerConflict),
    Invalid(ParseError),
    Failed(StoreError),
    NotAttempted(Skip),
}

impl LedgerOutcome {
    pub const LABELS: [&'static str; 8] = [
        "Applied",
        "Duplicate",
        "Early",
        "Rejected",
        "Conflict",
        "Invalid",
        "Failed",
        "NotAttempted",
    ];
}

impl std::fmt::Display for LedgerOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LedgerOutcome::Applied => f.write_str("Applied"),
            LedgerOutcome::Duplicate => f.write_str("Duplicate: the entry is already recorded"),
            LedgerOutcome::Early => f.write_str("Early: the refund's capture is not recorded yet"),
            // Amounts are payment data: they stay out of the log line (the
            // variant keeps them for callers and tests).
            LedgerOutcome::Rejected(Rejection::OverRefund { .. }) => {
                f.write_str("Rejected: the refund exceeds what is left on its capture")
            }
            LedgerOutcome::Rejected(Rejection::CurrencyMismatch { account_currency }) => {
                write!(f, "Rejected: the account is in {account_currency}")
            }
            LedgerOutcome::Conflict(LedgerConflict::EntryDiffers) => {
                f.write_str("Conflict: the entry exists with different content")
            }
            LedgerOutcome::Conflict(LedgerConflict::RefundDoesNotMatchCapture) => {
                f.write_str("Conflict: the refund's account or currency differs from its capture")
            }
            LedgerOutcome::Invalid(e) => write!(f, "Invalid: {e}"),
            LedgerOutcome::Failed(e) => write!(f, "Failed: {e}"),
            LedgerOutcome::NotAttempted(Skip::Deadline) => {
                f.write_str("NotAttempted: invocation deadline too close")
            }
            LedgerOutcome::NotAttempted(Skip::FifoGroupBlocked) => {
                f.write_str("NotAttempted: an earlier record of this FIFO group failed")
            }
        }
    }
}

impl Verdict for LedgerOutcome {
    const LABELS: &'static [&'static str] = &LedgerOutcome::LABELS;

    fn invalid(error: ParseError) -> Self {
        LedgerOutcome::Invalid(error)
    }

    fn not_attempted(skip: Skip) -> Self {
        LedgerOutcome::NotAttempted(skip)
    }

    fn failed(error: StoreError) -> Self {
        LedgerOutcome::Failed(error)
    }

    /// Only a committed entry, a proven duplicate, or a refund that can
    /// never apply may be deleted from the queue.
    fn acknowledge(&self) -> bool {
        matches!(
            self,
            LedgerOutcome::Applied | LedgerOutcome::Duplicate | LedgerOutcome::Rejected(_)
        )
    }

    fn label(&self) -> &'static str {
        match self {
            LedgerOutcome::Applied => "Applied",
            LedgerOutcome::Duplicate => "Duplicate",
            LedgerOutcome::Early => "Early",
            LedgerOutcome::Rejected(_) => "Rejected",
            LedgerOutcome::Conflict(_) => "Conflict",
            LedgerOutcome::Invalid(_) => "Invalid",
            LedgerOutcome::Failed(_) => "Failed",
            LedgerOutcome::NotAttempted(_) => "NotAttempted",
        }
    }

    fn is_dependency_failure(&self) -> bool {
        matches!(self, LedgerOutcome::Failed(_))
    }

    fn is_not_attempted(&self) -> bool {
        matches!(self, LedgerOutcome::NotAttempted(_))
    }

    fn level(&self) -> Level {
        match self {
            LedgerOutcome::Applied | LedgerOutcome::Duplicate | LedgerOutcome::Early => Level::INFO,
            LedgerOutcome::Rejected(_) | LedgerOutcome::NotAttempted(_) => Level::WARN,
            LedgerOutcome::Failed(e) if e.is_retryable() => Level::WARN,
            LedgerOutcome::Failed(_) | LedgerOutcome::Conflict(_) | LedgerOutcome::Invalid(_) => {
                Level::ERROR
            }
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
pub fn classify_cancellation(ev: &LedgerEvent, c: &Cancellation) -> LedgerOutcome {
    // Contention and throttling first: the other reasons may be incomplete
    // (DynamoDB reports `None` for items it did not get to), so the only
    // safe reading is "retry".
    if let Some(t) = [
        transient(&c.entry),
        c.capture.as_ref().and_then(transient),
        transient(&c.account),
    ]
    .into_iter()
    .flatten()
    .next()
    {
        return LedgerOutcome::Failed(t);
    }

    // 1. The entry: its id is the idempotency key.
    match &c.entry {
        Reason::ConditionFailed(Some(stored)) => {
            return if same_entry(ev, stored) {
                LedgerOutcome::Duplicate
            } else {
                LedgerOutcome::Conflict(LedgerConflict::EntryDiffers)
            };
        }
        Reason::ConditionFailed(None) => {
            return LedgerOutcome::Failed(StoreError::RefusedWithoutItem);
        }
        _ => {}
    }

    // 2. Refunds: the capture must exist, match, and have enough left.
    if let (Movement::Refunded { .. }, Some(Reason::ConditionFailed(found))) =
        (&ev.movement, &c.capture)
    {
        let Some(capture) = found else {
            return LedgerOutcome::Early;
        };
        if capture.account_id != ev.account_id.as_str() || capture.currency != ev.currency.as_str()
        {
            return LedgerOutcome::Conflict(LedgerConflict::RefundDoesNotMatchCapture);
        }
        let refundable = capture.refundable.unwrap_or(0);
        if refundable < i128::from(ev.amount.get()) {
            return LedgerOutcome::Rejected(Rejection::OverRefund {
                refundable,
                requested: ev.amount.get(),
            });
        }
        return LedgerOutcome::Failed(StoreError::InconsistentRefusal);
    }

    // 3. The account: same currency (or, for a capture, a new account).
    match &c.account {
        Reason::ConditionFailed(Some(account)) if account.currency != ev.currency.as_str() => {
            LedgerOutcome::Rejected(Rejection::CurrencyMismatch {
                account_currency: account.currency.clone(),
            })
        }
        Reason::ConditionFailed(Some(_)) => LedgerOutcome::Failed(StoreError::InconsistentRefusal),
        // A refund's account is created by its capture; if the capture
        // exists and the account does not, something else is wrong.
        Reason::ConditionFailed(None) => LedgerOutcome::Failed(StoreError::RefusedWithoutItem),
        _ => {
            let code = [
                other_code(&c.entry),
                c.capture.as_ref().and_then(other_code),
                other_code(&c.account),
            ]
            .into_iter()
            .flatten()
            .next()
            .unwrap_or_else(|| "TransactionCanceled".to_owned());
            LedgerOutcome::Failed(StoreError::Client { code })
        }
    }
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
    use crate::ledger::event::parse_ledger_body;
    use serde_json::json;

    fn capture(amount: u64) -> LedgerEvent {
        let v = json!({"eventId": "e1", "type": "PaymentCaptured", "paymentId": "p1",
                       "accountId": "a1", "amount": amount, "currency": "INR",
                       "occurredAt": "2026-11-29T10:15:00Z"});
        parse_ledger_body(Some(&v.to_string())).unwrap()
    }

    fn refund(amount: u64) -> LedgerEvent {
        let v = json!({"eventId": "e2", "type": "PaymentRefunded", "paymentId": "p1",
                       "refundId": "r1", "accountId": "a1", "amount": amount,
                       "currency": "INR", "occurredAt": "2026-11-29T11:15:00Z"});
        parse_ledger_body(Some(&v.to_string())).unwrap()
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
        assert_eq!(classify_cancellation(&c, &same), LedgerOutcome::Duplicate);
        for other in [entry("a1", 499, Some(499)), entry("a2", 500, Some(500))] {
            let differs = cancel(Reason::ConditionFailed(Some(other)), None, Reason::Ok);
            assert_eq!(
                classify_cancellation(&c, &differs),
                LedgerOutcome::Conflict(LedgerConflict::EntryDiffers)
            );
        }
        let r = refund(200);
        let same = cancel(
            Reason::ConditionFailed(Some(entry("a1", -200, None))),
            Some(Reason::ConditionFailed(Some(entry("a1", 500, Some(0))))),
            Reason::Ok,
        );
        assert_eq!(classify_cancellation(&r, &same), LedgerOutcome::Duplicate);
    }

    #[test]
    fn refunds_are_early_rejected_or_conflicting_by_their_capture() {
        let r = refund(200);
        let missing = cancel(Reason::Ok, Some(Reason::ConditionFailed(None)), Reason::Ok);
        assert_eq!(classify_cancellation(&r, &missing), LedgerOutcome::Early);
        let spent = cancel(
            Reason::Ok,
            Some(Reason::ConditionFailed(Some(entry("a1", 500, Some(100))))),
            Reason::Ok,
        );
        assert_eq!(
            classify_cancellation(&r, &spent),
            LedgerOutcome::Rejected(Rejection::OverRefund {
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
            LedgerOutcome::Conflict(LedgerConflict::RefundDoesNotMatchCapture)
        );
    }

    #[test]
    fn a_currency_mismatch_is_rejected() {
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
            LedgerOutcome::Rejected(Rejection::CurrencyMismatch {
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
            LedgerOutcome::Failed(StoreError::Server { .. })
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
            LedgerOutcome::Failed(StoreError::Throttled { .. })
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
            LedgerOutcome::Failed(StoreError::Client {
                code: "ValidationError".into()
            })
        );
    }

    #[test]
    fn only_settled_outcomes_are_acknowledged() {
        assert!(LedgerOutcome::Applied.acknowledge());
        assert!(LedgerOutcome::Duplicate.acknowledge());
        assert!(
            LedgerOutcome::Rejected(Rejection::CurrencyMismatch {
                account_currency: "USD".into()
            })
            .acknowledge()
        );
        assert!(!LedgerOutcome::Early.acknowledge());
        assert!(!LedgerOutcome::Conflict(LedgerConflict::EntryDiffers).acknowledge());
        assert!(!LedgerOutcome::Failed(StoreError::Timeout).acknowledge());
        assert!(!LedgerOutcome::Invalid(ParseError::MissingBody).acknowledge());
        assert!(!LedgerOutcome::NotAttempted(Skip::Deadline).acknowledge());
    }
}
