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

/// The delays, per class. Read once per cold start (from the environment:
/// `BackoffPolicy::from_lookup`, in the `config` module).
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
    /// a queue's ten receives an Early event's predecessor has at
    /// least 121 s (until the event's last receive; less after long
    /// throttling, see [`BackoffPolicy::after_throttling`]), and a failing
    /// dependency between about 12 and 25 minutes to recover, before the
    /// DLQ; both far inside any queue's retention.
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

/// An Early event whose first receives failed on throttling, against a
/// predecessor throttled alongside it ([`BackoffPolicy::after_throttling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterThrottling {
    /// The receives the event spent failing on the dependency before it
    /// was found Early; 0 for an event that was never throttled.
    pub throttled: u32,
    /// The least time between its first and its last throttled receive:
    /// how long the throttling lasted, at least.
    pub throttled_for_secs: u64,
    /// The least time from its last throttled receive (its first receive
    /// when never throttled) to its last receive: the predecessor must be
    /// applied before then.
    pub event_left_secs: u64,
    /// The longest the predecessor, handed out and throttled as often, can
    /// wait after that same receive before it comes back: the dependency
    /// curve's ceiling there. `None` when nothing was throttled.
    pub predecessor_back_secs: Option<u64>,
}

impl AfterThrottling {
    /// Is the predecessor back by the event's last receive in every draw?
    pub fn in_time(&self) -> bool {
        self.predecessor_back_secs
            .is_none_or(|back| back <= self.event_left_secs)
    }
}

impl BackoffPolicy {
    /// For each number of throttled receives `k` (0 up to the last but
    /// one), what is left of an Early event's `max_receive_count` receives
    /// once the throttling is over, against a predecessor throttled on as
    /// many receives (docs/retry-timing.md, "After throttling"). The event's
    /// receive count includes its throttled receives, so after them it has
    /// only `max_receive_count − k` receives left on the predecessor curve,
    /// while the predecessor may still wait out a delay of the dependency
    /// curve.
    pub fn after_throttling(&self, max_receive_count: u32) -> Vec<AfterThrottling> {
        let least = |class, n| self.ceiling_secs(class, n) / 2;
        let early_until_last = |from: u32| -> u64 {
            (from..max_receive_count)
                .map(|n| least(RetryClass::Predecessor, n))
                .fold(0u64, u64::saturating_add)
        };
        (0..max_receive_count)
            .map(|k| {
                if k == 0 {
                    return AfterThrottling {
                        throttled: 0,
                        throttled_for_secs: 0,
                        event_left_secs: early_until_last(1),
                        predecessor_back_secs: None,
                    };
                }
                AfterThrottling {
                    throttled: k,
                    throttled_for_secs: (1..k)
                        .map(|n| least(RetryClass::Dependency, n))
                        .fold(0u64, u64::saturating_add),
                    event_left_secs: least(RetryClass::Dependency, k)
                        .saturating_add(early_until_last(k + 1)),
                    predecessor_back_secs: Some(self.ceiling_secs(RetryClass::Dependency, k)),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ConfigError;
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

    #[test]
    fn after_long_throttling_an_early_event_can_run_out_before_its_predecessor() {
        let p = BackoffPolicy::default();
        let rows = p.after_throttling(10);
        assert_eq!(rows.len(), 10);
        // Never throttled: the predecessor has the Early curve's floors
        // until the last receive, 0 + 1 + 2 + 4 + 8 + 16 + 30 × 3.
        assert_eq!(rows[0].event_left_secs, 121);
        assert!(rows[0].in_time());
        // Six throttled receives: 80 s of the event's own dependency delay,
        // then 30 s × 3; the predecessor is back within 160 s.
        assert_eq!(
            (rows[6].event_left_secs, rows[6].predecessor_back_secs),
            (170, Some(160))
        );
        assert!(rows[6].in_time());
        // Seven: 150 + 30 × 2 = 210 s against a predecessor that may wait
        // 300 s. From here on the promise does not hold.
        assert_eq!(
            (rows[7].event_left_secs, rows[7].predecessor_back_secs),
            (210, Some(300))
        );
        let late: Vec<u32> = rows
            .iter()
            .filter(|r| !r.in_time())
            .map(|r| r.throttled)
            .collect();
        assert_eq!(late, [7, 8, 9]);
        // The last throttled receive before the last one can never be made
        // safe by the curves alone: the event and its predecessor draw
        // from the same dependency delay, and the event has no receive left
        // after it.
        let last = rows[9];
        assert_eq!(last.event_left_secs, 150);
        assert!(!last.in_time());
        // More receives move the line (docs/retry-timing.md): with 15, the
        // first row out of time is 10 throttled receives, 607 s of them.
        let first_late = p
            .after_throttling(15)
            .into_iter()
            .find(|r| !r.in_time())
            .map(|r| (r.throttled, r.throttled_for_secs));
        assert_eq!(first_late, Some((10, 607)));
    }
}
