//! Configuration every function reads the same way, once per cold start:
//! the batch settings and metrics destination ([`Runtime`]), and the
//! helpers each function's own configuration is parsed with.

use std::time::Duration;

use thiserror::Error;

use crate::core::batch::Settings;

/// Groups applied at once when `MAX_CONCURRENCY` is unset.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;
/// Milliseconds left for answering Lambda when `DEADLINE_MARGIN_MS` is unset.
pub const DEFAULT_DEADLINE_MARGIN_MS: u64 = 2_000;

/// What every function of this project reads the same way: how a batch
/// runs and where its metrics go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// `MAX_CONCURRENCY` (default 8, 1..=256): how many groups (orders,
    /// accounts) of one batch are applied concurrently. One group's records
    /// are always sequential.
    pub max_concurrency: usize,
    /// `DEADLINE_MARGIN_MS` (default 2000): stop starting records when less
    /// than this is left before the invocation deadline, and cut in-flight
    /// writes off at that point, leaving time to answer Lambda.
    pub deadline_margin: Duration,
    /// `METRICS_NAMESPACE`: CloudWatch namespace of the Embedded Metric
    /// Format line (each function has its own default).
    pub metrics_namespace: String,
    /// `AWS_LAMBDA_FUNCTION_NAME` (set by Lambda): the metric dimension.
    pub function_name: String,
}

impl Runtime {
    /// Read the shared settings through `get` (the environment in a function,
    /// a map in tests), with `default_namespace` and `default_function` for
    /// what is unset.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        default_namespace: &str,
        default_function: &str,
    ) -> Result<Self, ConfigError> {
        let optional = |var: &str, default: &str| {
            get(var)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Ok(Runtime {
            max_concurrency: parse_in(
                get,
                "MAX_CONCURRENCY",
                DEFAULT_MAX_CONCURRENCY as u64,
                1..=256,
            )? as usize,
            deadline_margin: Duration::from_millis(parse_in(
                get,
                "DEADLINE_MARGIN_MS",
                DEFAULT_DEADLINE_MARGIN_MS,
                0..=60_000,
            )?),
            metrics_namespace: optional("METRICS_NAMESPACE", default_namespace),
            function_name: optional("AWS_LAMBDA_FUNCTION_NAME", default_function),
        })
    }

    /// What the batch machinery needs of these settings.
    pub fn settings(&self) -> Settings {
        Settings {
            max_concurrency: self.max_concurrency,
            deadline_margin: self.deadline_margin,
        }
    }
}

/// A variable that must be set and not blank.
pub fn required(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<String, ConfigError> {
    get(var)
        .filter(|s| !s.trim().is_empty())
        .ok_or(ConfigError::Missing(var))
}

/// Why a function refuses to start: reported as its cold-start error.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
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

/// An optional integer variable within `range`, or `default` when unset.
pub fn parse_in(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    let Some(raw) = get(var).filter(|s| !s.trim().is_empty()) else {
        return Ok(default);
    };
    match raw.trim().parse::<u64>() {
        Ok(v) if range.contains(&v) => Ok(v),
        _ => Err(ConfigError::Invalid {
            var,
            reason: format!("expected an integer in {}..={}", range.start(), range.end()),
        }),
    }
}
