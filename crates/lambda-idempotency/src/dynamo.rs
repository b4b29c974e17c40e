//! DynamoDB plumbing every consumer's adapter shares: the client's retry
//! and timeout policy, sending a conditional write and reading its refusal,
//! mapping SDK errors to [`StoreError`] by variant and code (never by
//! message), and reading the items DynamoDB returns (ALL_OLD, cancellation
//! reasons) into typed snapshots.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use serde::de::DeserializeOwned;

use crate::error::StoreError;

/// A string attribute.
pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// A number attribute (DynamoDB numbers travel as decimal text, so any
/// integer width fits).
pub fn n(v: impl std::fmt::Display) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// An item as DynamoDB returns it.
pub type Item = HashMap<String, AttributeValue>;

/// Read an item DynamoDB returned into a typed snapshot (serde_dynamo).
/// The error names the type, never a value: a stored item is business data.
pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item).map_err(|_| {
        let name = std::any::type_name::<T>();
        StoreError::CorruptItem(format!(
            "it does not read as a {}",
            name.rsplit("::").next().unwrap_or(name)
        ))
    })
}

/// One string attribute of an item.
pub fn string(item: &Item, key: &str) -> Result<String, StoreError> {
    match item.get(key) {
        Some(AttributeValue::S(v)) => Ok(v.clone()),
        _ => Err(StoreError::CorruptItem(format!("`{key}` is not a string"))),
    }
}

/// One number attribute of an item, parsed exactly (`FromStr`: any
/// integer width).
/// For widths serde_dynamo cannot read (it has no i128, which signed
/// amounts of up to 2^64 - 1 need); otherwise prefer [`from_item`].
pub fn number<T: std::str::FromStr>(item: &Item, key: &str) -> Result<T, StoreError> {
    match item.get(key) {
        Some(AttributeValue::N(v)) => v
            .parse()
            .map_err(|_| StoreError::CorruptItem(format!("`{key}` is not an integer"))),
        _ => Err(StoreError::CorruptItem(format!("`{key}` is not a number"))),
    }
}

/// Retry policy for every DynamoDB call, chosen so that the worst case fits
/// well inside a Lambda invocation: 3 attempts (the first plus 2 retries)
/// with jittered exponential backoff from 50 ms capped at 1 s. Throttling is
/// retried by the SDK's standard mode too; past these attempts the record is
/// reported as a batch item failure and SQS redelivers it later, which is a
/// far better backoff than burning the invocation's time.
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(50))
        .with_max_backoff(Duration::from_secs(1))
}

/// Timeouts: connect 1 s, one attempt 2 s, the whole operation (all attempts
/// and backoff) 5 s. A single UpdateItem normally takes single-digit
/// milliseconds; these bound a stuck connection. The batch code additionally
/// cuts every write off at the invocation deadline minus a safety margin.
pub fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(Duration::from_secs(2))
        .operation_timeout(Duration::from_secs(5))
        .build()
}

/// What DynamoDB said to a conditional write: committed, or refused with
/// the item its condition was checked against, to classify the refusal by.
#[derive(Debug, Clone, PartialEq)]
pub enum Conditional {
    /// The condition held and the write committed.
    Committed,
    /// The condition failed; the item it was checked against (`None`: there
    /// was no item). [`send_conditional`] always asks for it, so `None`
    /// never means "not returned".
    Refused(Option<Item>),
}

/// A conditional write [`send_conditional`] can send: an UpdateItem or a
/// PutItem fluent builder. Sealed: the refused item is read from each
/// operation's own error type, so only these two can be supported.
pub trait ConditionalWrite: sealed::Sealed {}

impl ConditionalWrite for UpdateItemFluentBuilder {}
impl ConditionalWrite for PutItemFluentBuilder {}

mod sealed {
    use super::*;

    /// Sends with ALL_OLD on refusal, and reads the refusal from the
    /// operation's error. In a private module so that adopters can name
    /// [`ConditionalWrite`](super::ConditionalWrite) but neither implement
    /// it nor call this (which would be a second way to send).
    pub trait Sealed {
        fn send_all_old(self) -> impl Future<Output = Result<Conditional, StoreError>> + Send;
    }

    impl Sealed for UpdateItemFluentBuilder {
        async fn send_all_old(self) -> Result<Conditional, StoreError> {
            let sent = self
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            conditional(sent, "UpdateItem", |e| match e {
                UpdateItemError::ConditionalCheckFailedException(e) => Some(e.item().cloned()),
                _ => None,
            })
        }
    }

    impl Sealed for PutItemFluentBuilder {
        async fn send_all_old(self) -> Result<Conditional, StoreError> {
            let sent = self
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            conditional(sent, "PutItem", |e| match e {
                PutItemError::ConditionalCheckFailedException(e) => Some(e.item().cloned()),
                _ => None,
            })
        }
    }
}

/// Send a conditional UpdateItem or PutItem, mapping errors as every
/// adapter does. It sets `ReturnValuesOnConditionCheckFailure = ALL_OLD`
/// itself, whatever the request says: a refusal without its item cannot be
/// told from one against no item, and an adapter that reads the item to
/// decide (duplicate or conflict) would retry such a refusal forever.
pub async fn send_conditional(request: impl ConditionalWrite) -> Result<Conditional, StoreError> {
    sealed::Sealed::send_all_old(request).await
}

/// The one core of both operations: a failed condition is an answer (with
/// the item `refused` reads from the operation's error), anything else a
/// [`StoreError`] by code.
fn conditional<O, E>(
    sent: Result<O, SdkError<E, HttpResponse>>,
    operation: &'static str,
    refused: impl FnOnce(&E) -> Option<Option<Item>>,
) -> Result<Conditional, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match sent {
        Ok(_) => Ok(Conditional::Committed),
        Err(err) => {
            if let SdkError::ServiceError(ctx) = &err
                && let Some(item) = refused(ctx.err())
            {
                return Ok(Conditional::Refused(item));
            }
            Err(store_error(&err, operation))
        }
    }
}

/// Map any DynamoDB operation's failure to a [`StoreError`], once for all
/// adapters: a service error by its structured code and HTTP status (the
/// same codes on every operation: what a modelled variant would say),
/// anything else as a transport failure. The full error chain is logged
/// once here, at DEBUG, where its context is still available. Each adapter
/// handles the one refusal that is not an error for it (a failed condition,
/// a cancelled transaction) before calling this.
pub fn store_error<E>(err: &SdkError<E, HttpResponse>, operation: &'static str) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let mapped = match err {
        SdkError::ServiceError(ctx) => by_code(
            ctx.err().code().unwrap_or("Unknown").to_owned(),
            ctx.raw().status().as_u16(),
        ),
        other => transport_error(other),
    };
    tracing::debug!(error = %DisplayErrorContext(err), kind = %mapped, operation, "DynamoDB call failed");
    mapped
}

/// A service error, mapped by its structured code and HTTP status.
pub fn by_code(code: String, status: u16) -> StoreError {
    match code.as_str() {
        "ThrottlingException"
        | "ProvisionedThroughputExceededException"
        | "RequestLimitExceeded" => StoreError::Throttled { code },
        "AccessDeniedException"
        | "UnrecognizedClientException"
        | "MissingAuthenticationTokenException"
        | "InvalidSignatureException" => StoreError::AccessDenied { code },
        "ResourceNotFoundException" => StoreError::TableNotFound,
        // Concurrent writes or transactions on the item, or the same
        // transaction token still being processed: transient by definition.
        "TransactionConflictException"
        | "ReplicatedWriteConflictException"
        | "TransactionInProgressException"
        | "InternalServerError" => StoreError::Server { code },
        // Same token, other parameters: cannot happen with a deterministic
        // request, and retrying would not help.
        "IdempotentParameterMismatchException" => StoreError::Client { code },
        _ if status >= 500 => StoreError::Server { code },
        _ => StoreError::Client { code },
    }
}

/// A request the SDK's builder refused (a required field left unset, as
/// `Put::builder().build()` without a table): the error a
/// `TransactWriteItem` or an `Update` built by hand converts to with `?`,
/// the same as [`transport_error`]'s for a request that could not be built.
impl From<aws_sdk_dynamodb::error::BuildError> for StoreError {
    fn from(_: aws_sdk_dynamodb::error::BuildError) -> Self {
        StoreError::Client {
            code: "ConstructionFailure".into(),
        }
    }
}

/// Errors that never reached a DynamoDB verdict: timeouts, connections,
/// unreadable responses, requests that could not be built.
pub fn transport_error<E, R>(err: &SdkError<E, R>) -> StoreError {
    match err {
        SdkError::TimeoutError(_) => StoreError::Timeout,
        SdkError::DispatchFailure(d) if d.is_timeout() => StoreError::Timeout,
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => StoreError::Network,
        SdkError::ConstructionFailure(_) => StoreError::Client {
            code: "ConstructionFailure".into(),
        },
        _ => StoreError::Network,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A builder that refused (a `Put` without its table) is a client
    /// error with `?`, never a panic and never retried.
    #[test]
    fn a_request_the_builder_refused_is_a_construction_failure() {
        let refused = aws_sdk_dynamodb::types::Put::builder()
            .build()
            .expect_err("a Put needs a table");
        let e = StoreError::from(refused);
        assert_eq!(
            e,
            StoreError::Client {
                code: "ConstructionFailure".into()
            }
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn numbers_read_exactly_at_any_width_and_errors_name_the_attribute_only() {
        let item = Item::from([
            ("big".to_owned(), n(-18_446_744_073_709_551_615i128)),
            ("text".to_owned(), s("secret-1")),
            ("odd".to_owned(), AttributeValue::N("12.5".into())),
        ]);
        assert_eq!(
            number::<i128>(&item, "big"),
            Ok(-18_446_744_073_709_551_615)
        );
        assert_eq!(string(&item, "text").as_deref(), Ok("secret-1"));
        for err in [
            number::<i128>(&item, "odd"),
            number::<i128>(&item, "text"),
            number::<i128>(&item, "missing"),
        ] {
            let Err(StoreError::CorruptItem(why)) = err else {
                panic!("{err:?}")
            };
            assert!(!why.contains("12.5") && !why.contains("secret"), "{why}");
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Snapshot {
            big: u64,
        }
        let Err(StoreError::CorruptItem(why)) = from_item::<Snapshot>(item) else {
            panic!("a negative number is not a u64")
        };
        assert!(
            !why.contains("18446744073709551615") && why.contains("Snapshot"),
            "{why}"
        );
    }
}
