//! When a message that failed comes back: a delay per outcome class,
//! exponential in the message's receive count, jittered, capped.
//!
//! Without it a message reported in `batchItemFailures` reappears only when
//! its whole visibility timeout has run out (180 s by default), whatever the
//! reason: an Early event waits minutes for a predecessor that arrived a
//! second later, and a poison message takes five timeouts to reach the DLQ.
//! The delay is applied by setting the message's visibility before the
//! batch answers; this module only decides how long. The decision can only
//! change *when* a message comes back, never *whether*: it stays in
//! `batchItemFailures` either way.
//!
//! The jitter is drawn uniformly between half the exponential ceiling and
//! the ceiling ("equal jitter"), which spreads the retries of messages that
//! failed together, such as a throttled burst, instead of bringing them
//! back in one wave. It is not full jitter (zero to the ceiling) because a
//! message's receives are a budget: after `maxReceiveCount` of them it goes
//! to the DLQ, and full jitter could spend them all in a second or two,
//! sending a good Early event to the DLQ before its predecessor has had a
//! fair chance. With the floor, the least time a message of a class spends
//! waiting over its receives is known ([`BackoffPolicy::least_case_secs`]).

use std::time::Duration;

use crate::core::config::{ConfigError, parse_in};

/// Why a message goes back, as far as its retry timing is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryClass {
    /// Waits for another message (an Early event's predecessor): soon, and
    /// a little later each time.
    Predecessor,
    /// A dependency failed or throttled: give it room to recover.
    Dependency,
    /// Will fail the same way on every receive (Invalid, Conflict): no
    /// reason to wait, so it reaches the DLQ quickly.
    Hopeless,
    /// Held behind its FIFO group's failed head: nothing is wrong with it,
    /// and SQS keeps it behind the head anyway.
    Immediate,
}

/// An exponential curve: `base · 2^(receive − 1)`, at most `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Curve {
    /// The ceiling on the first receive.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
}

impl Curve {
    /// The ceiling of the delay after the `receive_count`-th receive (1 for
    /// a message received once), in whole seconds, as SQS takes them.
    pub fn ceiling_secs(&self, receive_count: u32) -> u64 {
        let doublings = receive_count.saturating_sub(1).min(32);
        let grown = self.base.as_secs().saturating_mul(1u64 << doublings);
        grown.min(self.cap.as_secs())
    }
}

/// The delays, per class. Read once per cold start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// For [`RetryClass::Predecessor`].
    pub predecessor: Curve,
    /// For [`RetryClass::Dependency`].
    pub dependency: Curve,
}

/// The jitter draw: uniform in `0..=spread`.
pub fn jitter(spread: u64) -> u64 {
    fastrand::u64(0..=spread)
}

/// SQS refuses a visibility timeout above 12 hours.
pub const MAX_VISIBILITY_SECS: u64 = 43_200;

impl Default for BackoffPolicy {
    /// An Early event's predecessor is usually a moment behind it: start at
    /// 1 s and stay under a minute. A dependency that failed after the SDK's
    /// own retries needs longer: start at 5 s, stay under 5 minutes. With
    /// the template's ten receives an Early event has between 151 s and
    /// 303 s for its predecessor, and a failing dependency between about 12
    /// and 25 minutes to recover, before the DLQ; both far inside any
    /// queue's retention.
    fn default() -> Self {
        BackoffPolicy {
            predecessor: Curve {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(60),
            },
            dependency: Curve {
                base: Duration::from_secs(5),
                cap: Duration::from_secs(300),
            },
        }
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

    fn curve(&self, class: RetryClass) -> Option<&Curve> {
        match class {
            RetryClass::Predecessor => Some(&self.predecessor),
            RetryClass::Dependency => Some(&self.dependency),
            RetryClass::Hopeless | RetryClass::Immediate => None,
        }
    }

    /// The largest delay `class` can get after the `receive_count`-th
    /// receive, in seconds.
    pub fn ceiling_secs(&self, class: RetryClass, receive_count: u32) -> u64 {
        self.curve(class)
            .map_or(0, |c| c.ceiling_secs(receive_count))
    }

    /// The delay, in whole seconds: half the ceiling plus a jitter drawn by
    /// `draw(n)`, uniform in `0..=n` for the other half
    /// ([`jitter`] draws at random, tests pass their own).
    pub fn delay_secs(
        &self,
        class: RetryClass,
        receive_count: u32,
        draw: impl FnOnce(u64) -> u64,
    ) -> u64 {
        let ceiling = self.ceiling_secs(class, receive_count);
        let floor = ceiling / 2;
        let spread = ceiling - floor;
        floor + draw(spread).min(spread)
    }

    /// The least a message of `class` spends waiting over
    /// `max_receive_count` receives (the jitter's floors): how long an
    /// Early event's predecessor has, at least, before the event goes to
    /// the DLQ.
    pub fn least_case_secs(&self, class: RetryClass, max_receive_count: u32) -> u64 {
        (1..=max_receive_count)
            .map(|n| self.ceiling_secs(class, n) / 2)
            .fold(0u64, u64::saturating_add)
    }

    /// The most a message of `class` can spend waiting over
    /// `max_receive_count` receives: what must stay well inside the source
    /// queue's retention (or the message expires there instead of reaching
    /// the DLQ).
    pub fn worst_case_secs(&self, class: RetryClass, max_receive_count: u32) -> u64 {
        (1..=max_receive_count)
            .map(|n| self.ceiling_secs(class, n))
            .fold(0u64, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn policy(env: &[(&str, &str)]) -> Result<BackoffPolicy, ConfigError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        BackoffPolicy::from_lookup(&|k| env.get(k).cloned())
    }

    #[test]
    fn each_class_has_its_curve() {
        let p = BackoffPolicy::default();
        let ceilings = |class| {
            (1..=7)
                .map(|n| p.ceiling_secs(class, n))
                .collect::<Vec<_>>()
        };
        assert_eq!(ceilings(RetryClass::Predecessor), [1, 2, 4, 8, 16, 32, 60]);
        assert_eq!(
            ceilings(RetryClass::Dependency),
            [5, 10, 20, 40, 80, 160, 300]
        );
        assert_eq!(ceilings(RetryClass::Hopeless), [0; 7]);
        assert_eq!(ceilings(RetryClass::Immediate), [0; 7]);
        // A receive count of 0 (absent attribute) is treated as the first.
        assert_eq!(p.ceiling_secs(RetryClass::Predecessor, 0), 1);
        // Huge receive counts saturate at the cap, never overflow.
        assert_eq!(p.ceiling_secs(RetryClass::Dependency, u32::MAX), 300);
    }

    #[test]
    fn the_jitter_stays_between_half_the_ceiling_and_the_ceiling() {
        let p = BackoffPolicy::default();
        assert_eq!(p.delay_secs(RetryClass::Predecessor, 3, |c| c), 4);
        assert_eq!(
            p.delay_secs(RetryClass::Predecessor, 3, |_| 0),
            2,
            "the floor"
        );
        assert_eq!(
            p.delay_secs(RetryClass::Predecessor, 3, |_| 1_000),
            4,
            "clamped"
        );
        assert_eq!(p.delay_secs(RetryClass::Predecessor, 1, |_| 0), 0);
        assert_eq!(p.delay_secs(RetryClass::Hopeless, 9, |c| c), 0);
        for _ in 0..1_000 {
            let v = p.delay_secs(RetryClass::Dependency, 4, jitter);
            assert!((20..=40).contains(&v), "{v}");
        }
        let draws: std::collections::HashSet<u64> = (0..1_000)
            .map(|_| p.delay_secs(RetryClass::Dependency, 4, jitter))
            .collect();
        assert!(draws.len() > 10, "the jitter spreads the delays: {draws:?}");
    }

    #[test]
    fn the_worst_case_over_the_redrive_budget_is_known() {
        let p = BackoffPolicy::default();
        assert_eq!(
            p.worst_case_secs(RetryClass::Predecessor, 5),
            1 + 2 + 4 + 8 + 16
        );
        assert_eq!(
            p.worst_case_secs(RetryClass::Dependency, 5),
            5 + 10 + 20 + 40 + 80
        );
        assert_eq!(p.worst_case_secs(RetryClass::Hopeless, 5), 0);
        // A good Early event has at least this long before the DLQ, with
        // the template's default of 10 receives: minutes, not seconds.
        assert_eq!(p.least_case_secs(RetryClass::Predecessor, 5), 1 + 2 + 4 + 8);
        assert_eq!(
            p.least_case_secs(RetryClass::Predecessor, 10),
            1 + 2 + 4 + 8 + 16 + 30 * 4
        );
        assert_eq!(p.worst_case_secs(RetryClass::Predecessor, 10), 303);
    }

    #[test]
    fn the_curves_are_configurable_and_checked() {
        let p = policy(&[
            ("BACKOFF_EARLY_BASE_SECS", "2"),
            ("BACKOFF_EARLY_CAP_SECS", "10"),
            ("BACKOFF_FAILED_BASE_SECS", "0"),
        ])
        .expect("valid");
        assert_eq!(p.ceiling_secs(RetryClass::Predecessor, 4), 10);
        assert_eq!(p.ceiling_secs(RetryClass::Dependency, 4), 0);
        assert_eq!(policy(&[]), Ok(BackoffPolicy::default()));
        for bad in [
            [("BACKOFF_EARLY_CAP_SECS", "0")],
            [("BACKOFF_FAILED_BASE_SECS", "43201")],
            [("BACKOFF_EARLY_BASE_SECS", "soon")],
        ] {
            let err = policy(&bad).expect_err("invalid");
            assert!(!err.to_string().contains("soon"), "{err}");
        }
    }
}
