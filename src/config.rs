//! Configuration, read once per cold start from the environment.

use std::time::Duration;

use thiserror::Error;

use crate::batch::{Metrics, Settings};

pub const DEFAULT_MAX_CONCURRENCY: usize = 8;
pub const DEFAULT_DEADLINE_MARGIN_MS: u64 = 2_000;
pub const DEFAULT_METRICS_NAMESPACE: &str = "OrderConsumer";
pub const DEFAULT_DEDUPE_CACHE_SIZE: usize = 10_000;

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

    pub fn settings(&self) -> Settings {
        Settings {
            max_concurrency: self.max_concurrency,
            deadline_margin: self.deadline_margin,
        }
    }

    pub fn metrics(&self) -> Metrics<'_> {
        Metrics {
            namespace: &self.metrics_namespace,
            function_name: &self.function_name,
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

/// The order consumer's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TABLE_NAME` (required): the orders table.
    pub table_name: String,
    /// `DEDUPE_CACHE_SIZE` (default 10000, 0 disables): how many orders
    /// the warm container remembers (their latest processed seqs' content
    /// hashes), so that redelivered duplicates cost no DynamoDB request.
    pub dedupe_cache_size: usize,
    /// `DEDUPE_CACHE_MAX_BYTES`: the cache's memory bound, whatever the ids'
    /// lengths (an entry takes from about 0.22 KB with short ids and one
    /// event to about 0.74 KB with 256-byte ids and 8 events, measured by
    /// `tests/cache_memory.rs`; see [`crate::cache`]). Default: an eighth of the function's memory
    /// (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, set by Lambda), or 32 MiB where
    /// that is unknown; at most half of it.
    pub dedupe_cache_max_bytes: usize,
    /// `MAX_CONCURRENCY`, `DEADLINE_MARGIN_MS`, `METRICS_NAMESPACE` (default
    /// `OrderConsumer`).
    pub runtime: Runtime,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required but not set")]
    Missing(&'static str),
    #[error("environment variable {var} is invalid: {reason}")]
    Invalid { var: &'static str, reason: String },
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Build from any lookup function (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let table_name = required(&get, "TABLE_NAME")?;
        let dedupe_cache_size = parse_in(
            &get,
            "DEDUPE_CACHE_SIZE",
            DEFAULT_DEDUPE_CACHE_SIZE as u64,
            0..=10_000_000,
        )? as usize;
        const MIB: u64 = 1024 * 1024;
        // Lambda's own variable, not the user's: a value an emulator sets
        // oddly (or not at all) falls back to the fixed default instead of
        // failing the cold start.
        let memory = get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|mb| (128..=10_240).contains(mb))
            .map(|mb| mb * MIB);
        let dedupe_cache_max_bytes = parse_in(
            &get,
            "DEDUPE_CACHE_MAX_BYTES",
            memory.map_or(32 * MIB, |m| m / 8),
            0..=memory.map_or(16 * 1024 * MIB, |m| m / 2),
        )? as usize;
        Ok(Config {
            table_name,
            dedupe_cache_size,
            dedupe_cache_max_bytes,
            runtime: Runtime::from_lookup(&get, DEFAULT_METRICS_NAMESPACE, "order-consumer")?,
        })
    }
}

pub(crate) fn parse_in(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn table_name_is_required() {
        assert_eq!(cfg(&[]), Err(ConfigError::Missing("TABLE_NAME")));
        assert_eq!(
            cfg(&[("TABLE_NAME", " ")]),
            Err(ConfigError::Missing("TABLE_NAME"))
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let c = cfg(&[("TABLE_NAME", "orders")]).unwrap();
        assert_eq!(c.runtime.max_concurrency, DEFAULT_MAX_CONCURRENCY);
        assert_eq!(
            c.runtime.deadline_margin,
            Duration::from_millis(DEFAULT_DEADLINE_MARGIN_MS)
        );
        let c = cfg(&[
            ("TABLE_NAME", "orders"),
            ("MAX_CONCURRENCY", "32"),
            ("DEADLINE_MARGIN_MS", "500"),
        ])
        .unwrap();
        assert_eq!(
            (c.runtime.max_concurrency, c.runtime.deadline_margin),
            (32, Duration::from_millis(500))
        );
    }

    #[test]
    fn the_cache_is_bounded_by_the_functions_memory() {
        let c = cfg(&[("TABLE_NAME", "t")]).unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 32 << 20);
        let c = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
        ])
        .unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 32 << 20);
        let c = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ])
        .unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 16 << 20);
        let c = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "odd"),
        ])
        .unwrap();
        assert_eq!(c.dedupe_cache_max_bytes, 32 << 20);
        // More than half the function's memory is refused at cold start.
        let err = cfg(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
            ("DEDUPE_CACHE_MAX_BYTES", &(200u64 << 20).to_string()),
        ])
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    var: "DEDUPE_CACHE_MAX_BYTES",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn out_of_range_is_a_clear_error() {
        for bad in ["0", "257", "many", "-1"] {
            let err = cfg(&[("TABLE_NAME", "t"), ("MAX_CONCURRENCY", bad)]).unwrap_err();
            assert!(
                matches!(
                    err,
                    ConfigError::Invalid {
                        var: "MAX_CONCURRENCY",
                        ..
                    }
                ),
                "{bad}"
            );
        }
    }
}
