//! The model (a stateright model, with the harness of
//! crates/lambda-idempotency-models; here, beside the function, so that
//! removing the function removes its model too): the order notifier (`functions/order-notifier`):
//! the claim with a lease, the check before the POST, the webhook under a
//! deterministic Idempotency-Key, the finishing write, release on failure.
//!
//! # Actors
//! - **Attempts** (`attempts` invocations): each takes the stream record
//!   that asks for one notification and runs `NotifierHandler::apply`: the
//!   claim (a conditional UpdateItem, `attribute_not_exists OR (#st =
//!   :sending AND lease_until < :now)`, lease by `LeasePolicy::lease_until`),
//!   `classify_claim_refusal` on a refusal, `LeasePolicy::may_post` once the
//!   claim is confirmed, the POST, `Delivery::of_status` of its answer,
//!   `finish` (`#st = :sending AND claim_id = :claim`) or `release`.
//!   Attempts may overlap (a retry while an earlier one still runs on
//!   another host): more than the stream gives, never less.
//! - **The provider**: answers 200, 422 or 503, or nothing within the
//!   POST's timeout; a POST is in flight from its start until it is
//!   answered, or (its invocation crashed or cut off) until its timeout.
//! - **The store**: the notification's record, atomic, ALL_OLD on refusal.
//!
//! # Faults
//! The claim may take up to the SDK's operation timeout (`claim`) before it
//! is applied and answered; any write may be throttled or lose its answer
//! (the SDK re-sends the same request, same `:now`, once); an attempt may
//! crash at any point, and is cut off at its invocation's cutoff; clocks
//! differ pairwise by at most `skew_ms`, which is the stated bound and
//! must not exceed the policy's margin.
//!
//! # Decisions from the library
//! `LeasePolicy::lease_until`, `LeasePolicy::may_post`,
//! `classify_claim_refusal`, `Delivery::of_status`, and the batch engine's
//! `RecordOutcome::acknowledge` (with `Failure::not_attempted` for a
//! POST refused for lack of time).
//!
//! # Properties (every reachable state)
//! - `at most one POST per notification is in flight at any time`.
//! - `every acknowledged notification is sent or durably recorded as not
//!   sendable`: once every invocation that took the record has acknowledged
//!   it (none failed, so the stream moves on), the provider accepted it or
//!   the record is REJECTED. (An attempt whose `finish` is refused as taken
//!   over acknowledges at once, leaving the notification to the attempt that
//!   took over, whose own invocation is retried if it fails: hence "every".)
//!
//! # Bounds and size
//! Two attempts, claim ≤ 1 s, POST ≤ 2 s, margin 1 s, clocks up to 1 s
//! apart (the bound: not more than the margin), invocations with 1 s or
//! 3 s before their cutoff, ticks of 1 s up to 6 s: 367,642 distinct
//! states (1.03 M generated), depth 20, about 3 s (the function's test
//! build, not optimised). `make model-check-deep`: three attempts.
//!
//! # Outside the model
//! The provider's side: its deduplication on the Idempotency-Key is not
//! modelled (a POST is counted whatever the provider does with it; it
//! answers each POST independently), nor a provider still working on a
//! POST after its timeout (a POST is in flight at most its timeout). A
//! clock difference larger than the margin. The unreadable-record path
//! (one conditional Put).
use std::fmt;
use std::time::Duration;

use lambda_idempotency::RecordOutcome;
use lambda_idempotency::StoreError;
use order_notifier::domain::{
    ClaimRefusal, LeasePolicy, NotifyError, NotifyOutcome, Stored, TooLate, classify_claim_refusal,
};
use order_notifier::webhook::Delivery;
use stateright::{Model, Property};

use lambda_idempotency_models::idempotent::Fault;
use lambda_idempotency_models::trace::{Narrate, assert_caught, assert_holds, deep};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The defect fixed before: the lease shorter than its POST. The lease
    /// is asked of a policy without the POST (`post: 0`), and the check
    /// before the POST is not made.
    LeaseShorterThanPost,
    /// The check before the POST (`may_post`) is not made.
    NoCheckBeforePost,
    /// A provider failure (503, no answer) is acknowledged.
    AckProviderFailure,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NotifierModel {
    pub attempts: u8,
    pub policy_ms: (u64, u64, u64),
    /// Time before the cutoff an invocation may start with.
    pub lefts_ms: Vec<u64>,
    pub tick_ms: u64,
    pub horizon_ms: u64,
    pub skew_ms: u64,
    pub sdk_tries: u8,
    pub mutation: Option<Mutation>,
}

impl NotifierModel {
    pub fn small() -> Self {
        NotifierModel {
            attempts: 2,
            policy_ms: (1000, 2000, 1000),
            lefts_ms: vec![1000, 3000],
            tick_ms: 1000,
            horizon_ms: 6000,
            skew_ms: 1000,
            sdk_tries: 2,
            mutation: None,
        }
    }
    /// `make model-check-deep`: three attempts.
    pub fn deep() -> Self {
        NotifierModel {
            attempts: 3,
            ..Self::small()
        }
    }
    pub fn with(mut self, m: Mutation) -> Self {
        self.mutation = Some(m);
        self
    }
    fn policy(&self) -> LeasePolicy {
        let (c, p, m) = self.policy_ms;
        LeasePolicy {
            claim: Duration::from_millis(c),
            post: Duration::from_millis(p),
            margin: Duration::from_millis(m),
        }
    }
    fn post_ms(&self) -> u64 {
        self.policy_ms.1
    }
}

/// The notification's record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Item {
    Sending { by: u8, lease_until_ms: u64 },
    Sent,
    Rejected,
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Sending { by, lease_until_ms } => {
                write!(
                    f,
                    "SENDING{{claim of attempt#{by}, lease until {lease_until_ms}ms}}"
                )
            }
            Item::Sent => f.write_str("SENT"),
            Item::Rejected => f.write_str("REJECTED"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pc {
    Idle,
    /// The claim, sent at `sent_ms` (true time) with `now_ms` (its clock).
    Claiming {
        sent_ms: u64,
        now_ms: u64,
        lease_until_ms: u64,
        tries: u8,
    },
    /// The POST, started at `started_ms`.
    Posting {
        started_ms: u64,
    },
    Finishing {
        sent: bool,
        tries: u8,
    },
    Releasing {
        then: Verdict,
    },
    Done(Verdict),
    Dead,
}

/// What an attempt came to (before the batch's rule).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verdict {
    Outcome(String),
    Error(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attempt {
    pub pc: Pc,
    pub offset: u64,
    /// True time of its cutoff.
    pub cutoff_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// POSTs not answered: (attempt, latest end, true time).
    pub in_flight: Vec<(u8, u64)>,
    pub two_in_flight: bool,
    pub accepted: bool,
    pub posts: u8,
    pub acked: bool,
    /// Attempts that acknowledged the record, and that did not (failed,
    /// not attempted, crashed: their invocations are retried).
    pub acks: u8,
    pub failures: u8,
    pub busy: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub t: u64,
    pub item: Option<Item>,
    pub attempts: Vec<Attempt>,
    pub ghost: Ghost,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Start {
        attempt: u8,
        offset: u64,
        left_ms: u64,
    },
    Claim {
        attempt: u8,
        fault: Fault,
    },
    /// The SDK's operation timeout: the claim is given up (unapplied).
    ClaimTimesOut {
        attempt: u8,
    },
    Answer {
        attempt: u8,
        status: Option<u16>,
    },
    Finish {
        attempt: u8,
        fault: Fault,
    },
    Release {
        attempt: u8,
        fault: Fault,
    },
    Crash {
        attempt: u8,
    },
    Tick,
}

impl State {
    /// Every invocation that took the record has finished and acknowledged
    /// it (none failed, so none is retried: the stream has moved on), yet
    /// the provider accepted nothing and the record is not REJECTED.
    pub fn given_up_unsent(&self) -> bool {
        let quiet = self
            .attempts
            .iter()
            .all(|a| matches!(a.pc, Pc::Idle | Pc::Done(_) | Pc::Dead));
        quiet
            && self.ghost.acks > 0
            && self.ghost.failures == 0
            && !self.ghost.accepted
            && self.item != Some(Item::Rejected)
    }
}

impl NotifierModel {
    fn clock(&self, s: &State, a: usize) -> u64 {
        s.t + s.attempts[a].offset
    }

    /// The batch engine's rule on the verdict, with the mutation.
    fn settle(&self, s: &mut State, a: usize, r: Result<NotifyOutcome, NotifyError>) {
        let outcome: RecordOutcome<NotifyOutcome, NotifyError> = match r.clone() {
            Ok(o) => RecordOutcome::Settled(o),
            Err(e) => match lambda_idempotency::Failure::not_attempted(&e) {
                Some(skip) => RecordOutcome::NotAttempted(skip),
                None => RecordOutcome::Failed(e),
            },
        };
        let mut ack = outcome.acknowledge();
        if self.mutation == Some(Mutation::AckProviderFailure)
            && matches!(
                r,
                Err(NotifyError::Provider { .. } | NotifyError::ProviderUnreachable)
            )
        {
            ack = true;
        }
        if ack {
            s.ghost.acked = true;
            s.ghost.acks += 1;
        } else {
            s.ghost.failures += 1;
        }
        let v = match &r {
            Ok(o) => Verdict::Outcome(o.to_string()),
            Err(e) => Verdict::Error(e.to_string()),
        };
        s.attempts[a].pc = Pc::Done(v);
    }

    fn fail(&self, s: &mut State, a: usize, e: NotifyError) {
        s.attempts[a].pc = Pc::Releasing {
            then: Verdict::Error(format!("{e:?}")),
        };
    }

    /// The claim is confirmed (granted, or refused against its own
    /// claim): the check before the POST.
    fn confirmed(&self, s: &mut State, a: usize, lease_until_ms: u64) {
        let left = Duration::from_millis(s.attempts[a].cutoff_ms.saturating_sub(s.t));
        let skip = matches!(
            self.mutation,
            Some(Mutation::NoCheckBeforePost | Mutation::LeaseShorterThanPost)
        );
        if !skip
            && let Err(late) = self
                .policy()
                .may_post(self.clock(s, a), left, lease_until_ms)
        {
            let e = match late {
                TooLate::Deadline => NotifyError::DeadlineTooClose,
                TooLate::Lease => NotifyError::LeaseTooShort,
            };
            self.fail(s, a, e);
            return;
        }
        let end = s.t + self.post_ms();
        if s.ghost
            .in_flight
            .iter()
            .any(|&(b, until)| b as usize != a && until >= s.t)
        {
            s.ghost.two_in_flight = true;
        }
        s.ghost.in_flight.push((a as u8, end));
        s.ghost.posts += 1;
        s.attempts[a].pc = Pc::Posting { started_ms: s.t };
    }

    fn end_post(s: &mut State, a: usize) {
        s.ghost.in_flight.retain(|&(b, _)| b as usize != a);
    }
}

fn error_of(v: &Verdict) -> NotifyError {
    match v {
        Verdict::Error(e) if e.starts_with("DeadlineTooClose") => NotifyError::DeadlineTooClose,
        Verdict::Error(e) if e.starts_with("LeaseTooShort") => NotifyError::LeaseTooShort,
        Verdict::Error(e) if e.starts_with("ProviderUnreachable") => {
            NotifyError::ProviderUnreachable
        }
        Verdict::Error(e) if e.starts_with("Provider") => NotifyError::Provider { status: 503 },
        _ => NotifyError::Store(StoreError::Network),
    }
}

impl Model for NotifierModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            t: 0,
            item: None,
            attempts: vec![
                Attempt {
                    pc: Pc::Idle,
                    offset: 0,
                    cutoff_ms: 0
                };
                usize::from(self.attempts)
            ],
            ghost: Ghost::default(),
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let faults = [Fault::None, Fault::AnswerLost, Fault::Throttled];
        let claim_ms = self.policy_ms.0;
        for (i, at) in s.attempts.iter().enumerate() {
            let attempt = i as u8;
            match &at.pc {
                Pc::Idle => {
                    // Any time, acknowledged or not: an attempt that fails
                    // has its own invocation retried, whatever another
                    // attempt acknowledged (a redelivery).
                    {
                        let offsets: &[u64] = if self.skew_ms == 0 {
                            &[0]
                        } else {
                            &[0, self.skew_ms]
                        };
                        for &offset in offsets {
                            for &left_ms in &self.lefts_ms {
                                out.push(Action::Start {
                                    attempt,
                                    offset,
                                    left_ms,
                                });
                            }
                        }
                    }
                }
                Pc::Claiming { sent_ms, .. } => {
                    if s.t <= sent_ms + claim_ms {
                        out.extend(faults.iter().map(|&fault| Action::Claim { attempt, fault }));
                    } else {
                        out.push(Action::ClaimTimesOut { attempt });
                    }
                }
                Pc::Posting { .. } => {
                    for status in [Some(200), Some(422), Some(503), None] {
                        out.push(Action::Answer { attempt, status });
                    }
                }
                Pc::Finishing { .. } => out.extend(
                    faults
                        .iter()
                        .map(|&fault| Action::Finish { attempt, fault }),
                ),
                Pc::Releasing { .. } => {
                    out.push(Action::Release {
                        attempt,
                        fault: Fault::None,
                    });
                    out.push(Action::Release {
                        attempt,
                        fault: Fault::Throttled,
                    });
                }
                Pc::Done(_) | Pc::Dead => {}
            }
            if !matches!(at.pc, Pc::Idle | Pc::Done(_) | Pc::Dead) {
                out.push(Action::Crash { attempt });
            }
        }
        // Time passes only when no POST is due to end now (a POST ends by
        // its timeout).
        let due = s.attempts.iter().any(
            |a| matches!(a.pc, Pc::Posting { started_ms } if started_ms + self.post_ms() <= s.t),
        );
        if s.t + self.tick_ms <= self.horizon_ms && !due {
            out.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.t += self.tick_ms;
                // The batch's cutoff drops the record's future: nothing is
                // given back (a POST so cut stays in flight to its timeout).
                for a in 0..s.attempts.len() {
                    let live = !matches!(s.attempts[a].pc, Pc::Idle | Pc::Done(_) | Pc::Dead);
                    if live && s.attempts[a].cutoff_ms <= s.t {
                        s.attempts[a].pc = Pc::Dead;
                        s.ghost.failures += 1;
                    }
                }
                let t = s.t;
                s.ghost.in_flight.retain(|&(_, until)| until >= t);
            }
            Action::Crash { attempt } => {
                s.attempts[usize::from(attempt)].pc = Pc::Dead;
                s.ghost.failures += 1;
            }
            Action::Start {
                attempt,
                offset,
                left_ms,
            } => {
                let a = usize::from(attempt);
                s.attempts[a].offset = offset;
                s.attempts[a].cutoff_ms = s.t + left_ms;
                let now = self.clock(&s, a);
                let mut policy = self.policy();
                if self.mutation == Some(Mutation::LeaseShorterThanPost) {
                    policy.post = Duration::ZERO;
                }
                let lease_until_ms = policy.lease_until(now, Duration::from_millis(left_ms));
                s.attempts[a].pc = Pc::Claiming {
                    sent_ms: s.t,
                    now_ms: now,
                    lease_until_ms,
                    tries: 0,
                };
            }
            Action::ClaimTimesOut { attempt } => {
                let a = usize::from(attempt);
                self.fail(&mut s, a, NotifyError::Store(StoreError::Timeout));
            }
            Action::Claim { attempt, fault } => {
                let a = usize::from(attempt);
                let Pc::Claiming {
                    sent_ms,
                    now_ms,
                    lease_until_ms,
                    tries,
                } = s.attempts[a].pc
                else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                if fault == Fault::Throttled {
                    if retry_left {
                        s.attempts[a].pc = Pc::Claiming {
                            sent_ms,
                            now_ms,
                            lease_until_ms,
                            tries,
                        };
                    } else {
                        self.fail(&mut s, a, NotifyError::Store(StoreError::Network));
                    }
                    return Some(s);
                }
                let admits = match &s.item {
                    None => true,
                    Some(Item::Sending {
                        lease_until_ms: l, ..
                    }) => *l < now_ms,
                    Some(_) => false,
                };
                if admits {
                    s.item = Some(Item::Sending {
                        by: attempt,
                        lease_until_ms,
                    });
                    if fault == Fault::AnswerLost {
                        if retry_left {
                            s.attempts[a].pc = Pc::Claiming {
                                sent_ms,
                                now_ms,
                                lease_until_ms,
                                tries,
                            };
                        } else {
                            self.fail(&mut s, a, NotifyError::Store(StoreError::Network));
                        }
                        return Some(s);
                    }
                    self.confirmed(&mut s, a, lease_until_ms);
                    return Some(s);
                }
                let stored = s.item.as_ref().map(|it| match it {
                    Item::Sending { by, lease_until_ms } => Stored::Sending {
                        lease_until_ms: *lease_until_ms,
                        claim_id: format!("claim-{by}"),
                    },
                    Item::Sent => Stored::Sent,
                    Item::Rejected => Stored::Rejected,
                });
                match classify_claim_refusal(stored.as_ref(), &format!("claim-{attempt}"), now_ms) {
                    Ok(ClaimRefusal::Ours) => self.confirmed(&mut s, a, lease_until_ms),
                    Ok(ClaimRefusal::Settled(outcome)) => {
                        if outcome == NotifyOutcome::Busy {
                            s.ghost.busy = true;
                        }
                        self.settle(&mut s, a, Ok(outcome));
                    }
                    Err(e) => self.settle(&mut s, a, Err(e)),
                }
            }
            Action::Answer { attempt, status } => {
                let a = usize::from(attempt);
                Self::end_post(&mut s, a);
                match status.map(Delivery::of_status) {
                    Some(Delivery::Accepted(_)) => {
                        s.ghost.accepted = true;
                        s.attempts[a].pc = Pc::Finishing {
                            sent: true,
                            tries: 0,
                        };
                    }
                    Some(Delivery::Refused(_)) => {
                        s.attempts[a].pc = Pc::Finishing {
                            sent: false,
                            tries: 0,
                        };
                    }
                    Some(Delivery::Retry(code)) => {
                        self.fail(&mut s, a, NotifyError::Provider { status: code })
                    }
                    Some(Delivery::Unreachable) | None => {
                        self.fail(&mut s, a, NotifyError::ProviderUnreachable)
                    }
                }
            }
            Action::Finish { attempt, fault } => {
                let a = usize::from(attempt);
                let Pc::Finishing { sent, tries } = s.attempts[a].pc else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                let outcome = if sent {
                    NotifyOutcome::Sent
                } else {
                    NotifyOutcome::Rejected { status: 422 }
                };
                if fault == Fault::Throttled {
                    if retry_left {
                        s.attempts[a].pc = Pc::Finishing { sent, tries };
                    } else {
                        self.fail(&mut s, a, NotifyError::Store(StoreError::Network));
                    }
                    return Some(s);
                }
                let admits = matches!(s.item, Some(Item::Sending { by, .. }) if by == attempt);
                if admits {
                    s.item = Some(if sent { Item::Sent } else { Item::Rejected });
                    if fault == Fault::AnswerLost && retry_left {
                        s.attempts[a].pc = Pc::Finishing { sent, tries };
                        return Some(s);
                    }
                    if fault == Fault::AnswerLost {
                        self.fail(&mut s, a, NotifyError::Store(StoreError::Network));
                        return Some(s);
                    }
                }
                // Committed, or refused (`Ok(false)`: taken over, or its
                // own re-sent write): the outcome either way.
                self.settle(&mut s, a, Ok(outcome));
            }
            Action::Release { attempt, fault } => {
                let a = usize::from(attempt);
                let Pc::Releasing { then } = s.attempts[a].pc.clone() else {
                    return None;
                };
                if fault != Fault::Throttled
                    && let Some(Item::Sending { by, lease_until_ms }) = &mut s.item
                    && *by == attempt
                {
                    *lease_until_ms = 0;
                }
                self.settle(&mut s, a, Err(error_of(&then)));
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "at most one POST per notification is in flight at any time",
                |_, s: &State| !s.ghost.two_in_flight,
            ),
            Property::always(
                "every acknowledged notification is sent or durably recorded as not sendable",
                |_, s: &State| !s.given_up_unsent(),
            ),
            Property::sometimes(
                "sometimes: the notification is sent and acknowledged",
                |_, s: &State| s.ghost.acked && s.item == Some(Item::Sent),
            ),
            Property::sometimes("sometimes: a second attempt is Busy", |_, s: &State| {
                s.ghost.busy
            }),
            Property::sometimes(
                "sometimes: it is POSTed twice (one after the other)",
                |_, s: &State| s.ghost.posts >= 2,
            ),
        ]
    }
}

impl Narrate for NotifierModel {
    fn narrate(&self, before: &State, action: &Action, after: &State) -> String {
        let item = |s: &State| {
            s.item
                .as_ref()
                .map_or("no record".to_owned(), ToString::to_string)
        };
        let pc = |a: u8| match &after.attempts[usize::from(a)].pc {
            Pc::Done(v) => format!(
                " -> {v:?}{}",
                if after.ghost.acked && !before.ghost.acked {
                    ", ACKNOWLEDGED"
                } else {
                    ""
                }
            ),
            Pc::Posting { .. } => " -> POST starts".to_owned(),
            other => format!(" -> {other:?}"),
        };
        let t = format!("[t={}ms]", before.t);
        match action {
            Action::Tick => format!("{t} time passes to {}ms", after.t),
            Action::Start {
                attempt,
                offset,
                left_ms,
            } => format!(
                "{t} attempt#{attempt} starts (clock +{offset}ms, {left_ms}ms to its cutoff){}",
                pc(*attempt)
            ),
            Action::Claim { attempt, fault } | Action::Finish { attempt, fault } => {
                let name = if matches!(action, Action::Claim { .. }) {
                    "claim"
                } else {
                    "finish"
                };
                let what = match fault {
                    Fault::Throttled => "throttled".to_owned(),
                    _ if before.item != after.item => format!("applied: {}", item(after)),
                    _ => format!("REFUSED, ALL_OLD = {}", item(before)),
                };
                let lost = if *fault == Fault::AnswerLost {
                    " (answer LOST)"
                } else {
                    ""
                };
                format!(
                    "{t} attempt#{attempt} sends UpdateItem {name}: {what}{lost}{}",
                    pc(*attempt)
                )
            }
            Action::ClaimTimesOut { attempt } => {
                format!("{t} attempt#{attempt}'s claim times out{}", pc(*attempt))
            }
            Action::Answer { attempt, status } => format!(
                "{t} the provider answers attempt#{attempt}'s POST: {}{}",
                status.map_or("nothing (timeout)".to_owned(), |c| c.to_string()),
                pc(*attempt)
            ),
            Action::Release { attempt, fault } => format!(
                "{t} attempt#{attempt} releases ({}){}",
                if *fault == Fault::Throttled {
                    "throttled"
                } else {
                    "sent"
                },
                pc(*attempt)
            ),
            Action::Crash { attempt } => format!("{t} attempt#{attempt} crashes"),
        }
    }

    fn summary(&self, s: &State) -> String {
        let item = s
            .item
            .as_ref()
            .map_or("no record".to_owned(), ToString::to_string);
        format!(
            "record {item}; POSTs in flight (attempt, until): {:?}; ghost {:?}",
            s.ghost.in_flight, s.ghost
        )
    }
}

#[test]
fn holds() {
    assert_holds(if deep() {
        NotifierModel::deep()
    } else {
        NotifierModel::small()
    });
}

fn caught(m: Mutation, property: &'static str) {
    let (len, history) = assert_caught(NotifierModel::small().with(m), property);
    println!("{m:?} caught by `{property}` in {len} steps:\n{history}");
}

#[test]
fn mutation_lease_shorter_than_post_is_caught() {
    caught(
        Mutation::LeaseShorterThanPost,
        "at most one POST per notification is in flight at any time",
    );
}

#[test]
fn mutation_no_check_before_post_is_caught() {
    caught(
        Mutation::NoCheckBeforePost,
        "at most one POST per notification is in flight at any time",
    );
}

#[test]
fn mutation_ack_provider_failure_is_caught() {
    caught(
        Mutation::AckProviderFailure,
        "every acknowledged notification is sent or durably recorded as not sendable",
    );
}
