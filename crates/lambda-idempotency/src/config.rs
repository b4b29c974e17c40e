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

/// How a batch is run: what the engine ([`process`](crate::engine::process)) needs of
/// [`Settings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
///
/// Its fields are read and set through methods that keep them in the
/// ranges [`Settings`] accepts: `BatchSettings::default()` and then, for
/// example, `.with_max_concurrency(16)?`.
pub struct BatchSettings {
    pub(crate) max_concurrency: usize,
    pub(crate) deadline_margin: Duration,
    pub(crate) max_receive_count: Option<u32>,
    pub(crate) key_order: KeyOrder,
    pub(crate) whole_batch_failure: WholeBatchFailure,
}

/// `MAX_CONCURRENCY`'s range: at least one group at a time (none would
/// never finish a batch), at most 256.
const CONCURRENCY: std::ops::RangeInclusive<u64> = 1..=256;
/// `DEADLINE_MARGIN_MS`'s range.
const MARGIN_MS: std::ops::RangeInclusive<u64> = 0..=60_000;
/// `MAX_RECEIVE_COUNT`'s range: SQS's own for a redrive policy.
const RECEIVES: std::ops::RangeInclusive<u64> = 1..=1_000;

/// `value` if it is in `range`, else the error `var`'s parser gives.
fn in_range(
    var: &'static str,
    value: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::Invalid {
            var,
            reason: format!("expected {}..={}", range.start(), range.end()),
        })
    }
}

impl BatchSettings {
    /// Groups applied at once (one group's records are sequential).
    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }

    /// Time kept back before the invocation deadline.
    pub fn deadline_margin(&self) -> Duration {
        self.deadline_margin
    }

    /// The source queue's `maxReceiveCount`, if the function knows it. A
    /// strictly ordered group's failed record on its last receive then
    /// does not hold the group's later records back.
    pub fn max_receive_count(&self) -> Option<u32> {
        self.max_receive_count
    }

    /// Whether a failed record holds back the rest of its key on a source
    /// without an order of its own (an SQS standard queue).
    pub fn key_order(&self) -> KeyOrder {
        self.key_order
    }

    /// What a batch whose every record failed on a dependency answers.
    pub fn whole_batch_failure(&self) -> WholeBatchFailure {
        self.whole_batch_failure
    }

    /// With `groups` applied at once: 1 to 256 (`MAX_CONCURRENCY`'s range).
    pub fn with_max_concurrency(mut self, groups: usize) -> Result<Self, ConfigError> {
        let n = u64::try_from(groups).unwrap_or(u64::MAX);
        self.max_concurrency = in_range("MAX_CONCURRENCY", n, CONCURRENCY)? as usize;
        Ok(self)
    }

    /// With `margin` kept back before the deadline: at most 60 s
    /// (`DEADLINE_MARGIN_MS`'s range), whole milliseconds.
    pub fn with_deadline_margin(mut self, margin: Duration) -> Result<Self, ConfigError> {
        let ms = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        self.deadline_margin =
            Duration::from_millis(in_range("DEADLINE_MARGIN_MS", ms, MARGIN_MS)?);
        Ok(self)
    }

    /// With the source queue's `maxReceiveCount` (1 to 1000, SQS's range),
    /// or `None` when unknown.
    pub fn with_max_receive_count(mut self, count: Option<u32>) -> Result<Self, ConfigError> {
        self.max_receive_count = match count {
            Some(n) => Some(in_range("MAX_RECEIVE_COUNT", u64::from(n), RECEIVES)? as u32),
            None => None,
        };
        Ok(self)
    }

    /// With `order` for the keys of a source without an order of its own.
    pub fn with_key_order(mut self, order: KeyOrder) -> Self {
        self.key_order = order;
        self
    }

    /// With `whole` as the answer to a batch whose every record failed on
    /// a dependency.
    pub fn with_whole_batch_failure(mut self, whole: WholeBatchFailure) -> Self {
        self.whole_batch_failure = whole;
        self
    }
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
///
/// Read once per cold start ([`Settings::from_env`], or
/// [`Settings::from_lookup`] in tests), which checks every range; read back
/// through its methods.
pub struct Settings {
    pub(crate) max_concurrency: usize,
    pub(crate) deadline_margin: Duration,
    pub(crate) telemetry: Telemetry,
    pub(crate) retry_backoff: Option<BackoffPolicy>,
    pub(crate) max_receive_count: Option<u32>,
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
                CONCURRENCY,
            )? as usize,
            deadline_margin: Duration::from_millis(parse_in(
                get,
                "DEADLINE_MARGIN_MS",
                DEFAULT_DEADLINE_MARGIN_MS,
                MARGIN_MS,
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
                Some(_) => Some(parse_in(get, "MAX_RECEIVE_COUNT", 0, RECEIVES)? as u32),
                None => None,
            },
        })
    }

    /// `MAX_CONCURRENCY` (default 8, 1..=256): how many groups (keys:
    /// customers, accounts) of one batch are applied concurrently. One
    /// group's records are always sequential.
    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }

    /// `DEADLINE_MARGIN_MS` (default 2000): stop starting records when less
    /// than this is left before the invocation deadline, and cut in-flight
    /// writes off at that point, leaving time to answer Lambda.
    pub fn deadline_margin(&self) -> Duration {
        self.deadline_margin
    }

    /// Where its metrics go and what its log lines are keyed by.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// `RETRY_BACKOFF` (`on`, the default, or `off`) and the `BACKOFF_*`
    /// curves ([`BackoffPolicy::from_lookup`]): how soon an SQS message
    /// that is not acknowledged comes back. `None` when off: it then comes
    /// back after the queue's visibility timeout.
    pub fn retry_backoff(&self) -> Option<&BackoffPolicy> {
        self.retry_backoff.as_ref()
    }

    /// `MAX_RECEIVE_COUNT` (1..=1000, unset by default): the source queue's
    /// redrive `maxReceiveCount` (set both from one deployment parameter).
    /// On a FIFO queue a failed record on its last receive then no longer
    /// holds its group's later records back
    /// ([`BatchSettings::max_receive_count`]). Unset: every failed record
    /// holds them back.
    pub fn max_receive_count(&self) -> Option<u32> {
        self.max_receive_count
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

    #[test]
    fn batch_settings_are_set_only_within_the_variables_ranges() {
        let d = BatchSettings::default();
        for ok in [1, 8, 256] {
            assert_eq!(
                d.with_max_concurrency(ok).map(|s| s.max_concurrency()),
                Ok(ok)
            );
        }
        // None at a time would never finish a batch.
        for bad in [0, 257, usize::MAX] {
            let e = d.with_max_concurrency(bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    ConfigError::Invalid {
                        var: "MAX_CONCURRENCY",
                        ..
                    }
                ),
                "{e}"
            );
        }
        let margin = Duration::from_millis(60_000);
        assert_eq!(
            d.with_deadline_margin(margin).map(|s| s.deadline_margin()),
            Ok(margin)
        );
        for bad in [Duration::from_millis(60_001), Duration::MAX] {
            let e = d.with_deadline_margin(bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    ConfigError::Invalid {
                        var: "DEADLINE_MARGIN_MS",
                        ..
                    }
                ),
                "{e}"
            );
        }
        for ok in [None, Some(1), Some(1_000)] {
            assert_eq!(
                d.with_max_receive_count(ok).map(|s| s.max_receive_count()),
                Ok(ok)
            );
        }
        for bad in [0, 1_001] {
            let e = d.with_max_receive_count(Some(bad)).unwrap_err();
            assert!(
                matches!(
                    e,
                    ConfigError::Invalid {
                        var: "MAX_RECEIVE_COUNT",
                        ..
                    }
                ),
                "{e}"
            );
        }
        let strict = d
            .with_key_order(KeyOrder::Strict)
            .with_whole_batch_failure(WholeBatchFailure::ReportEach);
        assert_eq!(
            (strict.key_order(), strict.whole_batch_failure()),
            (KeyOrder::Strict, WholeBatchFailure::ReportEach)
        );
        // The environment's defaults are the same settings.
        let read = Settings::from_lookup(&|_: &str| None, "Ns", "fn").unwrap();
        assert_eq!(read.batch(), d);
    }
}
