//! The library's errors, free of SDK types so the domain and the batch
//! logic can reason about them: storage failures ([`StoreError`]; the
//! `dynamo` module maps every operation's SDK error to one of these by its
//! structured error code and HTTP status, never by parsing a message),
//! configuration refused at a cold start ([`ConfigError`]) and traces that
//! could not be set up ([`TraceSetupError`]). The lowest layer: every other
//! module may name them.

use thiserror::Error;

/// Why the store (DynamoDB, or Valkey/Redis with feature `valkey`) did not
/// confirm a request, by structured error code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Throttled after the SDK's retries (`code` is DynamoDB's).
    #[error("throttled by DynamoDB ({code})")]
    Throttled {
        /// DynamoDB's error code.
        code: String,
    },
    /// No answer within the SDK's attempt or operation timeout.
    #[error("the store did not answer within its timeout")]
    Timeout,
    /// Cut off at the batch's cutoff, before DynamoDB answered.
    #[error("the invocation deadline came before DynamoDB confirmed the write")]
    DeadlineExceeded,
    /// Connection refused, reset or otherwise broken.
    #[error("could not reach the store (connection failed or was reset)")]
    Network,
    /// A 5xx from DynamoDB.
    #[error("the store's server failed ({code})")]
    Server {
        /// DynamoDB's error code.
        code: String,
    },
    /// The configured table does not exist (a deployment mistake).
    #[error("the table does not exist")]
    TableNotFound,
    /// The function's role may not do this (an IAM mistake).
    #[error("access denied ({code}): check the function's IAM policy")]
    AccessDenied {
        /// DynamoDB's error code.
        code: String,
    },
    /// Any other 4xx: the request itself is wrong.
    #[error("the store refused the request ({code})")]
    Client {
        /// DynamoDB's error code.
        code: String,
    },
    /// A stored item does not read as what the consumer wrote; the text
    /// names the attribute or type, never a value.
    #[error("the stored item is malformed: {0}")]
    CorruptItem(String),
    /// The record would be larger than DynamoDB's item limit (400 KB,
    /// with some headroom): not sent, since DynamoDB would refuse it.
    #[error("the record would be larger than the store's item limit (400 KB)")]
    ItemTooLarge,
    /// A conditional write was refused with no item to classify it by.
    #[error("the condition failed but no stored item came back (ALL_OLD not honoured?)")]
    RefusedWithoutItem,
    /// A refusal the returned item does not explain: a race, retried.
    #[error("the condition failed although the returned item satisfies it")]
    InconsistentRefusal,
    /// The store's server cannot serve this store (a Redis too old for
    /// the Valkey store's claim); `needs` says what it needs.
    #[error("the store's server is not supported: it needs {needs}")]
    Unsupported {
        /// What the store needs of its server.
        needs: &'static str,
    },
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
            | StoreError::ItemTooLarge
            | StoreError::CorruptItem(_)
            | StoreError::Unsupported { .. } => false,
        }
    }
}

/// Why a function refuses to start: reported as its cold-start error.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is unset or blank.
    #[error("environment variable {0} is required but not set")]
    Missing(&'static str),
    /// A variable is set to a value the function cannot use; `reason` says
    /// what is expected, never the value.
    #[error("environment variable {var} is invalid: {reason}")]
    Invalid {
        /// The variable's name.
        var: &'static str,
        /// What a valid value looks like.
        reason: String,
    },
}

/// Why the traces could not be set up (feature `otel`): the exporter could
/// not be built, e.g. from an endpoint that is not a URL.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct TraceSetupError(String);

impl TraceSetupError {
    /// The error, described.
    pub fn new(what: impl Into<String>) -> Self {
        TraceSetupError(what.into())
    }
}
