//! Errors from the storage layer, free of SDK types so the domain and the
//! batch logic can reason about them. [`crate::core::dynamo::store_error`]
//! maps every operation's SDK error to one of these by its structured error
//! code and HTTP status, never by parsing a message.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    #[error("throttled by DynamoDB ({code})")]
    Throttled { code: String },
    #[error("DynamoDB did not answer within the SDK timeout")]
    Timeout,
    #[error("the invocation deadline came before DynamoDB confirmed the write")]
    DeadlineExceeded,
    #[error("could not reach DynamoDB (connection failed or was reset)")]
    Network,
    #[error("DynamoDB server error ({code})")]
    Server { code: String },
    #[error("the table does not exist")]
    TableNotFound,
    #[error("access denied ({code}): check the function's IAM policy")]
    AccessDenied { code: String },
    #[error("DynamoDB refused the request ({code})")]
    Client { code: String },
    #[error("the stored item is malformed: {0}")]
    CorruptItem(String),
    #[error("the condition failed but no stored item came back (ALL_OLD not honoured?)")]
    RefusedWithoutItem,
    #[error("the condition failed although the returned item satisfies it")]
    InconsistentRefusal,
}

impl StoreError {
    /// Would the same request plausibly succeed later without anyone
    /// changing code or configuration? Both kinds are reported to SQS as
    /// failures (nothing is acknowledged that was not committed); this only
    /// decides how loudly we log and whether the batch counts as an
    /// infrastructure outage.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Throttled { .. }
            | StoreError::Timeout
            | StoreError::DeadlineExceeded
            | StoreError::Network
            | StoreError::Server { .. }
            | StoreError::RefusedWithoutItem
            | StoreError::InconsistentRefusal => true,
            StoreError::TableNotFound
            | StoreError::AccessDenied { .. }
            | StoreError::Client { .. }
            | StoreError::CorruptItem(_) => false,
        }
    }
}
