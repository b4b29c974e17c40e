//! The ledger's DynamoDB adapter: the only ledger code that knows attribute
//! names, builds expressions or touches SDK types.
//!
//! One event = one `TransactWriteItems`: the new entry and the balance move
//! commit together or not at all, so "record the processed key" and "apply
//! the effect" can never be split by a crash, a timeout or a redelivery.
//! Every item asks for `ReturnValuesOnConditionCheckFailure = ALL_OLD`, so a
//! cancelled transaction is classified from the items that caused it, with
//! no second read.
//!
//! An event that can never be posted is parked with one conditional PutItem
//! of its suspense entry ([`LedgerStore::park`]) in the same table, under
//! `suspense:{entry id}`: written once, atomically, and read back from the
//! refusal (`ALL_OLD`) when it already exists. A refund's transaction also
//! checks that its capture is not parked (`suspense:pay:{paymentId}`, a key
//! it can derive), so that the refund of a parked capture is parked in turn
//! instead of waiting for a capture entry that will never be written.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use crate::domain::{
    AccountSnapshot, Cancellation, EntrySnapshot, Reason, SuspenseReason, SuspenseSnapshot,
};
use crate::event::{LedgerEvent, Movement};
use lambda_idempotency::StoreError;
use lambda_idempotency::dynamo::{Item, n, number, s, store_error, string};
use lambda_idempotency::time::{epoch_ms, unique_id};

/// The ledger table's hash key.
pub const ENTRY_KEY: &str = "entry_id";
/// The accounts table's hash key.
pub const ACCOUNT_KEY: &str = "account_id";

/// What DynamoDB said to one ledger transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Txn {
    Committed,
    Cancelled(Box<Cancellation>),
}

/// What DynamoDB said to a suspense entry's Put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parked {
    Written,
    /// The suspense entry exists. `attempt` is the id this Put wrote (so the
    /// classification can recognise an SDK retry of a Put that committed);
    /// `stored` the item DynamoDB returned, if any.
    Refused {
        attempt: String,
        stored: Option<SuspenseSnapshot>,
    },
}

#[derive(Debug, Clone)]
pub struct LedgerStore {
    client: Client,
    ledger_table: String,
    accounts_table: String,
}

impl LedgerStore {
    pub fn new(
        client: Client,
        ledger_table: impl Into<String>,
        accounts_table: impl Into<String>,
    ) -> Self {
        LedgerStore {
            client,
            ledger_table: ledger_table.into(),
            accounts_table: accounts_table.into(),
        }
    }

    /// Write `ev`'s entry and move its account's balance, atomically.
    pub async fn apply(&self, ev: &LedgerEvent) -> Result<Txn, StoreError> {
        let items = self.transaction(ev)?;
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            // One token per attempt (see `request_token`): the SDK's retry of
            // this call after a lost answer is a no-op reporting success; a
            // redelivery is judged by the entry's condition.
            .client_request_token(ev.request_token(&unique_id()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Txn::Committed),
            Err(err) => map_error(ev, err),
        }
    }

    /// Park `ev` in its suspense entry: the event's fields, why it cannot be
    /// posted and the facts needed to resolve it. One conditional Put, so
    /// the entry is written whole or not at all, and only once.
    pub async fn park(
        &self,
        ev: &LedgerEvent,
        reason: &SuspenseReason,
    ) -> Result<Parked, StoreError> {
        // The SDK re-sends the same request on its retries, so they share it.
        let attempt = unique_id();
        let parked_at = epoch_ms();
        let mut item: Item = HashMap::from([
            (ENTRY_KEY.to_owned(), s(&ev.suspense_entry_id())),
            ("event_id".to_owned(), s(ev.event_id.as_str())),
            ("event_type".to_owned(), s(ev.type_name())),
            ("payment_id".to_owned(), s(ev.payment_id.as_str())),
            ("account_id".to_owned(), s(ev.account_id.as_str())),
            // As sent, unsigned: unlike an entry's, it moved no balance.
            ("amount".to_owned(), n(i128::from(ev.amount.get()))),
            ("currency".to_owned(), s(ev.currency.as_str())),
            ("occurred_at".to_owned(), s(ev.occurred_at.as_str())),
            ("suspense_reason".to_owned(), s(reason.code())),
            (
                "parked_at".to_owned(),
                AttributeValue::N(parked_at.to_string()),
            ),
            ("parked_attempt".to_owned(), s(&attempt)),
        ]);
        if let Movement::Refunded { refund_id } = &ev.movement {
            item.insert("refund_id".to_owned(), s(refund_id.as_str()));
        }
        match reason {
            SuspenseReason::OverRefund { refundable, .. } => {
                item.insert("capture_refundable".to_owned(), n(*refundable));
            }
            SuspenseReason::CurrencyMismatch { account_currency } => {
                item.insert("account_currency".to_owned(), s(account_currency));
            }
            SuspenseReason::CaptureParked { capture_entry } => {
                item.insert("capture_suspense_entry".to_owned(), s(capture_entry));
            }
        }
        let result = self
            .client
            .put_item()
            .table_name(&self.ledger_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(entry_id)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Parked::Written),
            Err(err) => map_put_error(err).map(|stored| Parked::Refused { attempt, stored }),
        }
    }

    /// The transaction's items, in the order [`map_error`] reads the
    /// cancellation reasons: the new entry, (refunds) the capture and the
    /// check that it is not parked, the account. Nothing in them varies between the SDK's retries of one
    /// call (no processing time inside), which the ClientRequestToken
    /// requires: the same token with other parameters would be an
    /// IdempotentParameterMismatch.
    fn transaction(&self, ev: &LedgerEvent) -> Result<Vec<TransactWriteItem>, StoreError> {
        let amount = i128::from(ev.amount.get());
        let all_old = ReturnValuesOnConditionCheckFailure::AllOld;
        let built = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Client {
            code: format!("request: {e}"),
        };

        let mut entry: HashMap<String, AttributeValue> = HashMap::from([
            (ENTRY_KEY.to_owned(), s(&ev.entry_id())),
            ("account_id".to_owned(), s(ev.account_id.as_str())),
            ("amount".to_owned(), n(ev.signed_amount())),
            ("currency".to_owned(), s(ev.currency.as_str())),
            ("payment_id".to_owned(), s(ev.payment_id.as_str())),
            ("event_id".to_owned(), s(ev.event_id.as_str())),
            ("event_type".to_owned(), s(ev.type_name())),
            ("occurred_at".to_owned(), s(ev.occurred_at.as_str())),
        ]);
        match &ev.movement {
            Movement::Captured => {
                // DynamoDB conditions cannot add, so a capture carries what
                // is left to refund, and a refund's condition compares with it.
                entry.insert("refundable".to_owned(), n(amount));
                entry.insert("refunded".to_owned(), n(0));
            }
            Movement::Refunded { refund_id } => {
                entry.insert("refund_id".to_owned(), s(refund_id.as_str()));
            }
        }
        let put_entry = Put::builder()
            .table_name(&self.ledger_table)
            .set_item(Some(entry))
            // The entry id is the idempotency key: it can be written once.
            .condition_expression("attribute_not_exists(entry_id)")
            .return_values_on_condition_check_failure(all_old.clone())
            .build()
            .map_err(built)?;
        let mut items = vec![TransactWriteItem::builder().put(put_entry).build()];

        if let Movement::Refunded { .. } = ev.movement {
            let capture = Update::builder()
                .table_name(&self.ledger_table)
                .key(ENTRY_KEY, s(&ev.capture_entry_id()))
                .update_expression("SET refundable = refundable - :amt ADD refunded :amt")
                // The capture exists (else the refund is early), belongs to
                // the same account and currency, and has enough left.
                .condition_expression(
                    "attribute_exists(entry_id) AND account_id = :acct AND currency = :cur \
                     AND refundable >= :amt",
                )
                .expression_attribute_values(":amt", n(amount))
                .expression_attribute_values(":acct", s(ev.account_id.as_str()))
                .expression_attribute_values(":cur", s(ev.currency.as_str()))
                .return_values_on_condition_check_failure(all_old.clone())
                .build()
                .map_err(built)?;
            items.push(TransactWriteItem::builder().update(capture).build());
            // A capture that could not be posted is parked under a key the
            // refund can derive. While it is, the refund can never be
            // posted either: this check fails, returns that suspense entry,
            // and the refund is parked naming it (not Early until SQS gives
            // up). In the transaction rather than read after an Early
            // cancellation: the refusal carries the entry, as the other
            // items' do, and the decision is taken on one snapshot.
            let not_parked = ConditionCheck::builder()
                .table_name(&self.ledger_table)
                .key(ENTRY_KEY, s(&ev.capture_suspense_entry_id()))
                .condition_expression("attribute_not_exists(entry_id)")
                .return_values_on_condition_check_failure(all_old.clone())
                .build()
                .map_err(built)?;
            items.push(
                TransactWriteItem::builder()
                    .condition_check(not_parked)
                    .build(),
            );
        }

        let account = Update::builder()
            .table_name(&self.accounts_table)
            .key(ACCOUNT_KEY, s(ev.account_id.as_str()))
            .update_expression(
                "SET currency = if_not_exists(currency, :cur) ADD balance :delta, entry_count :one",
            )
            .condition_expression(match ev.movement {
                // A capture may open the account; it must not mix currencies.
                Movement::Captured => "attribute_not_exists(account_id) OR currency = :cur",
                Movement::Refunded { .. } => "attribute_exists(account_id) AND currency = :cur",
            })
            .expression_attribute_values(":cur", s(ev.currency.as_str()))
            .expression_attribute_values(":delta", n(ev.signed_amount()))
            .expression_attribute_values(":one", n(1))
            .return_values_on_condition_check_failure(all_old)
            .build()
            .map_err(built)?;
        items.push(TransactWriteItem::builder().update(account).build());
        Ok(items)
    }
}

/// Map a failed TransactWriteItems: a cancellation to its reasons, by role;
/// everything else to a [`StoreError`] by variant (or, if unmodelled, by
/// structured code).
fn map_error(
    ev: &LedgerEvent,
    err: SdkError<TransactWriteItemsError, HttpResponse>,
) -> Result<Txn, StoreError> {
    if let SdkError::ServiceError(ctx) = &err
        && let TransactWriteItemsError::TransactionCanceledException(e) = ctx.err()
    {
        return cancellation(ev, e.cancellation_reasons()).map(|c| Txn::Cancelled(Box::new(c)));
    }
    Err(store_error(&err, "TransactWriteItems"))
}

/// Map a failed suspense Put: a refused condition to the stored entry (or
/// `None` if DynamoDB sent none back), everything else to a [`StoreError`].
fn map_put_error(
    err: SdkError<PutItemError, HttpResponse>,
) -> Result<Option<SuspenseSnapshot>, StoreError> {
    if let SdkError::ServiceError(ctx) = &err
        && let PutItemError::ConditionalCheckFailedException(e) = ctx.err()
    {
        return e.item().map(suspense_snapshot).transpose();
    }
    Err(store_error(&err, "PutItem"))
}

fn cancellation(
    ev: &LedgerEvent,
    reasons: &[CancellationReason],
) -> Result<Cancellation, StoreError> {
    let refund = matches!(ev.movement, Movement::Refunded { .. });
    let expected = if refund { 4 } else { 2 };
    if reasons.len() != expected {
        return Err(StoreError::Client {
            code: format!(
                "TransactionCanceled with {} reasons for {expected} items",
                reasons.len()
            ),
        });
    }
    Ok(Cancellation {
        entry: reason(&reasons[0], entry_snapshot)?,
        capture: if refund {
            Some(reason(&reasons[1], entry_snapshot)?)
        } else {
            None
        },
        capture_parked: if refund {
            Some(reason(&reasons[2], suspense_snapshot)?)
        } else {
            None
        },
        account: reason(&reasons[expected - 1], account_snapshot)?,
    })
}

fn reason<T>(
    r: &CancellationReason,
    snapshot: fn(&Item) -> Result<T, StoreError>,
) -> Result<Reason<T>, StoreError> {
    Ok(match r.code().unwrap_or("None") {
        "None" => Reason::Ok,
        "ConditionalCheckFailed" => Reason::ConditionFailed(r.item().map(snapshot).transpose()?),
        "TransactionConflict" => Reason::TransactionConflict,
        code @ ("ThrottlingError" | "ProvisionedThroughputExceeded" | "RequestLimitExceeded") => {
            Reason::Throttled {
                code: code.to_owned(),
            }
        }
        code => Reason::Other {
            code: code.to_owned(),
        },
    })
}

fn entry_snapshot(item: &Item) -> Result<EntrySnapshot, StoreError> {
    Ok(EntrySnapshot {
        account_id: string(item, "account_id")?,
        amount: number(item, "amount")?,
        currency: string(item, "currency")?,
        payment_id: string(item, "payment_id")?,
        refundable: item
            .contains_key("refundable")
            .then(|| number(item, "refundable"))
            .transpose()?,
    })
}

fn suspense_snapshot(item: &Item) -> Result<SuspenseSnapshot, StoreError> {
    Ok(SuspenseSnapshot {
        account_id: string(item, "account_id")?,
        amount: number(item, "amount")?,
        currency: string(item, "currency")?,
        payment_id: string(item, "payment_id")?,
        // Only used to recognise this Put's own retry: an entry an operator
        // rewrote without it is simply not ours.
        attempt: string(item, "parked_attempt").unwrap_or_default(),
    })
}

fn account_snapshot(item: &Item) -> Result<AccountSnapshot, StoreError> {
    Ok(AccountSnapshot {
        currency: string(item, "currency")?,
        balance: number(item, "balance")?,
    })
}
