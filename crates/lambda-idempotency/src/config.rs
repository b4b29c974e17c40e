//! Configuration every function reads the same way, once per cold start:
//! the batch settings and metrics destination ([`Settings`]), the retry
//! curves ([`BackoffPolicy::from_lookup`]), and the helpers each function's
//! own configuration is parsed with. Nothing here reads the environment
//! unless asked to ([`Settings::from_env`]); tests pass a lookup instead.

use std::time::Duration;

use crate::backoff::{BackoffPolicy, Curve, MAX_VISIBILITY_SECS};
pub use crate::error::ConfigError;

/// Groups applied at once when `MAX_CONCURRENCY` is unset.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;
/// Milliseconds left for answering Lambda when `DEADLINE_MARGIN_MS` is unset.
pub const DEFAULT_DEADLINE_MARGIN_MS: u64 = 2_000;

/// How a batch is run: what the engine ([`crate::process`]) needs of
/// [`Settings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Groups applied at once (one group's records are sequential).
    pub max_concurrency: usize,
    /// Time kept back before the invocation deadline.
    pub deadline_margin: Duration,
    /// The source queue's `maxReceiveCount`, if the function knows it. A
    /// strictly ordered group's failed record on its last receive then does
    /// not hold the group's later records back.
    pub max_receive_count: Option<u32>,
    /// Whether a failed record holds back the rest of its key on a source
    /// without an order of its own (an SQS standard queue).
    pub key_order: KeyOrder,
    /// What a batch whose every record failed on a dependency answers.
    pub whole_batch_failure: WholeBatchFailure,
}

/// On a source without an order of its own (an SQS standard queue), how
/// the records of one key (the handler's [`key`](crate::Handler::key)) are
/// applied within a batch. A FIFO queue, a DynamoDB stream and a Kinesis
/// shard are always strict, per message group or partition key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyOrder {
    /// One after another in [`rank`](crate::Handler::rank) order (ties in
    /// arrival order), each on its own: a record that fails does not stop
    /// the later ones of its key, which may then be refused for good (a
    /// redemption applied before the earn it needed, which failed on a
    /// throttle, is rejected). Fine when each record's effect stands alone
    /// or the handler's rules tell "too early" from "never" (a contiguous
    /// sequence number does).
    #[default]
    Ranked,
    /// As `Ranked`, and a record that is not acknowledged holds back the
    /// rest of its key in this batch: they are not attempted and go back to
    /// the queue with it (`NotAttempted`). Order holds within one batch
    /// only: a standard queue may hand a later record to another batch,
    /// before the failed one comes back. For order across batches, use a
    /// FIFO queue with the key as its `MessageGroupId`.
    Strict,
}

/// What a batch whose every record failed on a dependency (or was not
/// attempted after one did) answers Lambda.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WholeBatchFailure {
    /// Fail the invocation (`{name}.DependencyOutage`), so that the outage
    /// shows in Lambda's `Errors` metric and alarms; every record returns
    /// to the queue (the default, as Powertools'
    /// `raise_on_entire_batch_failure`).
    #[default]
    FailInvocation,
    /// Answer the partial-batch response listing every record, like any
    /// other batch: nothing in Lambda's `Errors` (alarm on the `Failed`
    /// metric instead), and the invocation succeeds.
    ReportEach,
}

impl Default for BatchSettings {
    /// The defaults of [`Settings`]: 8 groups at once, a 2 s margin, no
    /// known `maxReceiveCount`.
    fn default() -> Self {
        BatchSettings {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            deadline_margin: Duration::from_millis(DEFAULT_DEADLINE_MARGIN_MS),
            max_receive_count: None,
            key_order: KeyOrder::default(),
            whole_batch_failure: WholeBatchFailure::default(),
        }
    }
}

/// What every function reads the same way: how a batch runs, where its
/// metrics go and how soon a returned message comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `MAX_CONCURRENCY` (default 8, 1..=256): how many groups (keys:
    /// customers, accounts) of one batch are applied concurrently. One group's records
    /// are always sequential.
    pub max_concurrency: usize,
    /// `DEADLINE_MARGIN_MS` (default 2000): stop starting records when less
    /// than this is left before the invocation deadline, and cut in-flight
    /// writes off at that point, leaving time to answer Lambda.
    pub deadline_margin: Duration,
    /// Where its metrics go and what its log lines are keyed by.
    pub telemetry: Telemetry,
    /// `RETRY_BACKOFF` (`on`, the default, or `off`) and the
    /// `BACKOFF_*` curves ([`BackoffPolicy::from_lookup`]): how soon an SQS
    /// message that is not acknowledged comes back. `None` when off: it
    /// then comes back after the queue's visibility timeout.
    pub retry_backoff: Option<BackoffPolicy>,
    /// `MAX_RECEIVE_COUNT` (1..=1000, unset by default): the source queue's
    /// redrive `maxReceiveCount` (set both from one deployment parameter). On a FIFO queue a failed record on its last receive then
    /// no longer holds its group's later records back
    /// ([`BatchSettings::max_receive_count`]). Unset: every failed record
    /// holds them back.
    pub max_receive_count: Option<u32>,
}

/// What names a function in its metrics and log lines, read the same way
/// by every function (the batch consumers through [`Settings`], the order
/// API on its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Telemetry {
    /// `METRICS_NAMESPACE`: CloudWatch namespace of the Embedded Metric
    /// Format line (each function has its own default).
    pub metrics_namespace: String,
    /// `AWS_LAMBDA_FUNCTION_NAME` (set by Lambda): the metric dimension.
    pub function_name: String,
    /// `POWERTOOLS_SERVICE_NAME` (default: the function's own name, e.g.
    /// `loyalty-points`): the `service` key of every log line and the
    /// `service` dimension of the metrics, as Powertools names them.
    pub service: String,
}

impl Telemetry {
    /// Read through `get`, with `default_namespace` and `default_function`
    /// for what is unset or blank.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        default_namespace: &str,
        default_function: &str,
    ) -> Self {
        let optional = |var: &str, default: &str| {
            get(var)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Telemetry {
            metrics_namespace: optional("METRICS_NAMESPACE", default_namespace),
            function_name: optional("AWS_LAMBDA_FUNCTION_NAME", default_function),
            service: optional("POWERTOOLS_SERVICE_NAME", default_function),
        }
    }
}

impl Settings {
    /// Read the shared settings from the process environment, with
    /// `default_namespace` and `default_function` for what is unset: the
    /// template's variables (`MAX_CONCURRENCY` 1..=256, `DEADLINE_MARGIN_MS`
    /// 0..=60000, `RETRY_BACKOFF` and the `BACKOFF_*` curves 0..=43200,
    /// `MAX_RECEIVE_COUNT` 1..=1000, `METRICS_NAMESPACE`,
    /// `POWERTOOLS_SERVICE_NAME`, `AWS_LAMBDA_FUNCTION_NAME`).
    pub fn from_env(default_namespace: &str, default_function: &str) -> Result<Self, ConfigError> {
        Self::from_lookup(
            &|k: &str| std::env::var(k).ok(),
            default_namespace,
            default_function,
        )
    }

    /// Read the shared settings through `get` (a map in tests), with
    /// `default_namespace` and `default_function` for what is unset.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        default_namespace: &str,
        default_function: &str,
    ) -> Result<Self, ConfigError> {
        Ok(Settings {
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
            telemetry: Telemetry::from_lookup(get, default_namespace, default_function),
            retry_backoff: match get("RETRY_BACKOFF")
                .map(|s| s.trim().to_ascii_lowercase())
                .as_deref()
            {
                None | Some("") | Some("on") => Some(BackoffPolicy::from_lookup(get)?),
                Some("off") => None,
                Some(_) => {
                    return Err(ConfigError::Invalid {
                        var: "RETRY_BACKOFF",
                        reason: "expected on or off".into(),
                    });
                }
            },
            max_receive_count: match get("MAX_RECEIVE_COUNT").filter(|s| !s.trim().is_empty()) {
                // SQS's own range for a redrive policy's maxReceiveCount.
                Some(_) => Some(parse_in(get, "MAX_RECEIVE_COUNT", 0, 1..=1_000)? as u32),
                None => None,
            },
        })
    }

    /// What the batch machinery needs of these settings.
    pub fn batch(&self) -> BatchSettings {
        BatchSettings {
            max_concurrency: self.max_concurrency,
            deadline_margin: self.deadline_margin,
            max_receive_count: self.max_receive_count,
            ..BatchSettings::default()
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

impl BackoffPolicy {
    /// `BACKOFF_EARLY_BASE_SECS`, `BACKOFF_EARLY_CAP_SECS`,
    /// `BACKOFF_FAILED_BASE_SECS`, `BACKOFF_FAILED_CAP_SECS` (0..=43200;
    /// defaults in [`BackoffPolicy::default`]). A cap below its base is a
    /// configuration error rather than a silent clamp.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let d = BackoffPolicy::default();
        let curve = |base_var, cap_var, default: Curve| -> Result<Curve, ConfigError> {
            let range = 0..=MAX_VISIBILITY_SECS;
            let base = parse_in(get, base_var, default.base.as_secs(), range.clone())?;
            let cap = parse_in(get, cap_var, default.cap.as_secs(), range)?;
            if cap < base {
                return Err(ConfigError::Invalid {
                    var: cap_var,
                    reason: format!("must be at least {base_var}"),
                });
            }
            Ok(Curve {
                base: Duration::from_secs(base),
                cap: Duration::from_secs(cap),
            })
        };
        Ok(BackoffPolicy {
            predecessor: curve(
                "BACKOFF_EARLY_BASE_SECS",
                "BACKOFF_EARLY_CAP_SECS",
                d.predecessor,
            )?,
            dependency: curve(
                "BACKOFF_FAILED_BASE_SECS",
                "BACKOFF_FAILED_CAP_SECS",
                d.dependency,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(env: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        };
        Settings::from_lookup(&get, "Ns", "fn")
    }

    #[test]
    fn retry_backoff_is_on_by_default_and_can_be_turned_off() {
        let on = runtime(&[]).expect("defaults");
        assert_eq!(on.retry_backoff, Some(BackoffPolicy::default()));
        assert_eq!(
            runtime(&[("RETRY_BACKOFF", " ON ")])
                .expect("on")
                .retry_backoff,
            Some(BackoffPolicy::default())
        );
        assert_eq!(
            runtime(&[("RETRY_BACKOFF", "off")])
                .expect("off")
                .retry_backoff,
            None
        );
        // Off means off: the curves are not even read.
        assert_eq!(
            runtime(&[("RETRY_BACKOFF", "off"), ("BACKOFF_EARLY_CAP_SECS", "x")])
                .expect("off")
                .retry_backoff,
            None
        );
        let err = runtime(&[("RETRY_BACKOFF", "sometimes")]).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "environment variable RETRY_BACKOFF is invalid: expected on or off"
        );
        let err = runtime(&[("BACKOFF_FAILED_CAP_SECS", "1")]).expect_err("cap below base");
        assert!(err.to_string().contains("BACKOFF_FAILED_CAP_SECS"), "{err}");
    }

    #[test]
    fn max_receive_count_is_optional_and_in_sqs_range() {
        assert_eq!(runtime(&[]).expect("unset").max_receive_count, None);
        assert_eq!(
            runtime(&[("MAX_RECEIVE_COUNT", " ")])
                .expect("blank")
                .max_receive_count,
            None
        );
        let r = runtime(&[("MAX_RECEIVE_COUNT", "10")]).expect("set");
        assert_eq!(r.max_receive_count, Some(10));
        assert_eq!(r.batch().max_receive_count, Some(10));
        for bad in ["0", "1001", "ten", "-1"] {
            let err = runtime(&[("MAX_RECEIVE_COUNT", bad)]).expect_err("refused");
            assert_eq!(
                err.to_string(),
                "environment variable MAX_RECEIVE_COUNT is invalid: expected an integer in 1..=1000"
            );
        }
    }
}
