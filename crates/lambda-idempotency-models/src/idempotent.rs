//! The model of [`Idempotent::call`](lambda_idempotency::idempotency::Idempotent)
//! (claim with lease, completion, release on failure, expiry, cache).
//!
//! # Actors
//! - **Calls** (`calls`): invocations with the same key, each in a Lambda
//!   instance (calls on one instance share its in-memory cache), each with
//!   a payload (`A`, or `B` for "same key, other payload"). A call follows
//!   `Idempotent::call`: cache lookup, claim (conditional PutItem), run the
//!   body, complete (conditional UpdateItem) or release (conditional
//!   DeleteItem).
//! - **The store**: one DynamoDB item, the conditions transcribed from
//!   `IdempotencyStore` (claim: `attribute_not_exists OR #ex <= :now_s OR
//!   (#st = :inp AND #lu <= :now_ms)`; complete and release: `#at = :mine
//!   AND #st = :inp`), each checked atomically, ALL_OLD on refusal.
//! - **The environment**: time (ticks), TTL deletion (any time after the
//!   expiry, or never), Lambda's timeout (an invocation still running at
//!   its deadline is killed).
//!
//! # Faults
//! Every request may be throttled (not applied) or lose its answer after
//! the store applied it; the SDK then re-sends the *same* request (same
//! `:now`, same attempt) while it has tries left, else the call gets the
//! error. A call may crash between any two steps. Each call's clock is
//! off true time by at most `skew_ms` (chosen per call: -skew, 0, +skew).
//!
//! # Decisions from the library
//! Every refused claim is classified by
//! [`lambda_idempotency::idempotency::classify`]; whether a claim may
//! replace the record it finds is
//! [`lambda_idempotency::idempotency::may_take_over`] (the rule both
//! stores apply: DynamoDB's condition expression, Valkey's check between
//! `WATCH` and `EXEC`); every other expiry test (the cache) is
//! [`lambda_idempotency::idempotency::is_expired`]. The model adds no
//! logic of its own to any of them. What the wrapper does with each answer
//! (replay, error, release on failure, keep the key on a failed
//! completion) follows `Idempotent::call` step by step.
//!
//! # Properties (in every reachable state)
//! - `body runs at most once per key while a completed record or a live
//!   lease holds it`: no claim ever overwrites a completed record before
//!   its expiry, nor a live lease, and no two bodies run at once; with a
//!   clock skew δ, "before its expiry" is "before, less δ"; a lease is
//!   judged in true time, since the claim's lease test
//!   (`lease_is_live`) allows for clocks `CLOCK_SKEW_ALLOWANCE` apart.
//! - `every output answered is the committed one`: an output answered to a
//!   caller is one that a completion committed, and no completion commits
//!   while another committed one is live.
//! - `no caller is told InProgress by its own claim`.
//! - `no expired record is served as completed` (by more than δ).
//! - `a failed run gives its key back` (unless its release itself failed:
//!   then the lease, which ends at the deadline, bounds the lock).
//!
//! # Bounds and size
//! `make test` ([`IdempotentModel::small`]): three calls of one key (two
//! with payload A on instance 0, sharing its cache; one with payload B on
//! instance 1), each call's deadline 2 s after its start, expiry 2 s,
//! ticks of 1 s up to 4 s, two SDK tries per request, no clock skew:
//! 2,354,005 distinct states (6.7 M generated), depth 24, about 8 s on two
//! cores. With a clock skew of ±1 s (two calls, payload A, on two
//! instances): 362,493 distinct states, about 1.4 s. `make
//! model-check-deep` ([`IdempotentModel::deep`]): the three calls over 5 s,
//! and the three-call world with skew (64 M distinct states, 192 M
//! generated, about 6 minutes on two cores).
//!
//! # Outside the model
//! Requests are applied by the store when sent (a request is not held in
//! the network past its sender's life); the SDK's re-sent request carries
//! the `:now` read at the call's start, so a replay is judged against the
//! expiry at that reading: a record that expires while the claim's answer
//! is on its way (the SDK's retries) is still replayed once. One key (keys
//! are independent items). A clock further off than the stated skew.
use std::fmt;

use lambda_idempotency::idempotency::{
    Claimed, Record, Refusal, Stored, claim_expires_at, classify, is_expired, may_take_over,
};
use stateright::{Model, Property};

use crate::trace::Narrate;

/// A defect re-introduced into the decisions the model gets from the
/// library: each flips one answer in a documented way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The defect fixed before: a refusal against this attempt's own
    /// claim (its PutItem committed, the answer was lost, the SDK re-sent
    /// it) read as "in progress": `classify`'s `Held` for the attempt's
    /// own record becomes `Refused(InProgress)`.
    OwnClaimInProgress,
    /// The cache answers an entry whatever its expiry (`is_expired` not
    /// asked).
    CacheIgnoresExpiry,
    /// A failed body does not give its claim back.
    NoReleaseOnFailure,
    /// The output is answered as soon as the body returns, before the
    /// completion's answer (ack before the write).
    AnswerBeforeCompletion,
    /// The defects fixed before: a lease taken over as soon as the
    /// claimer's own clock passes its end, with no allowance for the
    /// clocks of two hosts disagreeing (`lease_is_live` without
    /// `CLOCK_SKEW_ALLOWANCE`), and an in-progress record that expires
    /// with its lease (`claim_expires_at` without it). Caught in the world
    /// with clock skew.
    NoSkewAllowance,
    /// Every claim in progress treated as abandoned: taken over whatever
    /// its lease and its expiry (`may_take_over` not asked for it), as a
    /// store whose takeover reads only the record's status would: two
    /// bodies run at once.
    TakeOverLiveLease,
}

/// One call: where it runs and with which payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallSpec {
    pub instance: u8,
    /// 0: payload A, 1: payload B.
    pub payload: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotentModel {
    pub calls: Vec<CallSpec>,
    /// A call's deadline (its lease's end) after its start, ms.
    pub lease_ms: u64,
    /// How long a completed output is replayed, s.
    pub expiry_s: u64,
    pub tick_ms: u64,
    /// No step after this (true time, ms).
    pub horizon_ms: u64,
    /// The largest clock error of an instance, ms.
    pub skew_ms: u64,
    /// Tries the SDK makes of one request (1: no retry).
    pub sdk_tries: u8,
    pub mutation: Option<Mutation>,
}

impl IdempotentModel {
    /// The `make test` bounds.
    pub fn small() -> Self {
        IdempotentModel {
            calls: vec![
                CallSpec {
                    instance: 0,
                    payload: 0,
                },
                CallSpec {
                    instance: 0,
                    payload: 0,
                },
                CallSpec {
                    instance: 1,
                    payload: 1,
                },
            ],
            lease_ms: 2000,
            expiry_s: 2,
            tick_ms: 1000,
            horizon_ms: 4000,
            skew_ms: 0,
            sdk_tries: 2,
            mutation: None,
        }
    }

    /// `make model-check-deep`: the same three calls over a longer
    /// horizon (5 s).
    pub fn deep() -> Self {
        IdempotentModel {
            horizon_ms: 5000,
            ..Self::small()
        }
    }

    pub fn with(mut self, m: Mutation) -> Self {
        self.mutation = Some(m);
        self
    }

    fn fp(&self, call: usize) -> String {
        format!("fp-{}", ["A", "B"][usize::from(self.calls[call].payload)])
    }
}

fn attempt(call: u8) -> String {
    format!("attempt-{call}")
}
fn output_text(call: u8) -> String {
    format!("{{\"by\":{call}}}")
}

/// The store's item, as DynamoDB holds it (the attempt stays on a
/// completed record: the completion does not remove it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Item {
    pub completed: bool,
    pub payload: u8,
    pub attempt: u8,
    pub lease_until_ms: u64,
    pub expires_at: u64,
    /// The call whose body produced the stored output.
    pub output: Option<u8>,
}

impl Item {
    fn record(&self, model: &IdempotentModel) -> Record {
        let fingerprint = format!("fp-{}", ["A", "B"][usize::from(self.payload)]);
        let _ = model;
        match self.output {
            Some(o) if self.completed => Record::Completed {
                fingerprint,
                stored: Stored {
                    output: output_text(o),
                    expires_at: self.expires_at,
                },
            },
            _ => Record::InProgress {
                fingerprint,
                attempt: attempt(self.attempt),
                lease_until_ms: self.lease_until_ms,
                expires_at: self.expires_at,
            },
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = ["A", "B"][usize::from(self.payload)];
        if self.completed {
            write!(
                f,
                "COMPLETED{{payload {p}, output of call#{}, by attempt-{}, expires {}s}}",
                self.output.unwrap_or(255),
                self.attempt,
                self.expires_at
            )
        } else {
            write!(
                f,
                "IN_PROGRESS{{payload {p}, attempt-{}, lease until {}ms, expires {}s}}",
                self.attempt, self.lease_until_ms, self.expires_at
            )
        }
    }
}

/// Where a call is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pc {
    Idle,
    /// The PutItem is (re)sent; `tries` made so far.
    Claiming {
        tries: u8,
    },
    /// The body runs.
    Running,
    /// The UpdateItem is (re)sent, with the clock read after the body.
    Completing {
        now_ms: u64,
        tries: u8,
    },
    /// The DeleteItem is sent; then the call answers `then`.
    Releasing {
        then: Answer,
    },
    Done(Answer),
    /// Crashed, or killed at its deadline.
    Dead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Ran,
    Replayed,
    Cache,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Answer {
    Output { of: u8, source: Source },
    InProgress,
    OtherPayload,
    StoreError,
    FunctionError,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Call {
    pub pc: Pc,
    /// This call's clock minus true time.
    pub offset: i64,
    /// The clock at its start (the claim's `:now`, re-sent as is).
    pub now_ms: u64,
    /// True time of its deadline = its lease's end.
    pub deadline_ms: u64,
    pub lease_until_ms: u64,
    /// Its release's DeleteItem failed (throttled): the lease bounds it.
    pub release_failed: bool,
}

/// Ghost state: what happened, for the properties (never read by the
/// protocol).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    pub overwrote_live: bool,
    pub overlapping_runs: bool,
    pub uncommitted_output: bool,
    pub second_live_completion: bool,
    pub own_in_progress: bool,
    pub expired_served: bool,
    pub lock_kept: bool,
    /// Calls whose completion committed, and the expiry they committed.
    pub committed: Vec<(u8, u64)>,
    pub runs: u8,
    pub replays: u8,
    pub held_after_lost_answer: bool,
    pub reclaimed_expired: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub t: u64,
    pub item: Option<Item>,
    pub calls: Vec<Call>,
    /// Per instance: (payload, output's call, expires_at).
    pub caches: Vec<Option<(u8, u8, u64)>>,
    pub ghost: Ghost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    None,
    /// Applied by the store, answer lost.
    AnswerLost,
    /// Not applied (throttled, 5xx).
    Throttled,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Start { call: u8, offset: i64 },
    Claim { call: u8, fault: Fault },
    BodyOk { call: u8 },
    BodyFails { call: u8 },
    Complete { call: u8, fault: Fault },
    Release { call: u8, fault: Fault },
    Crash { call: u8 },
    Tick,
    TtlDeletes,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl IdempotentModel {
    fn clock(&self, s: &State, call: usize) -> u64 {
        s.t.saturating_add_signed(s.calls[call].offset)
    }

    /// The claim's condition: no record, or the library's takeover rule,
    /// `may_take_over` (which the DynamoDB store sends as its condition
    /// expression and the Valkey store evaluates between `WATCH` and
    /// `EXEC`), with the mutations applied.
    fn claim_admits(&self, item: Option<&Item>, now_ms: u64) -> bool {
        let Some(i) = item else {
            return true;
        };
        match self.mutation {
            // `lease_is_live` without its allowance: the rule as it was.
            Some(Mutation::NoSkewAllowance) => {
                is_expired(i.expires_at, now_ms) || (!i.completed && i.lease_until_ms <= now_ms)
            }
            // Any claim in progress taken over, its lease not asked.
            Some(Mutation::TakeOverLiveLease) if !i.completed => true,
            _ => may_take_over(&i.record(self), now_ms),
        }
    }

    fn answer(&self, s: &mut State, call: usize, a: Answer) {
        if let Answer::Output { of, source } = &a {
            if !s.ghost.committed.iter().any(|(c, _)| c == of) {
                s.ghost.uncommitted_output = true;
            }
            if *source != Source::Ran {
                s.ghost.replays += 1;
            }
        }
        s.calls[call].pc = Pc::Done(a);
    }

    /// Release or not, as `Idempotent::call` does on a failure.
    fn fail(&self, s: &mut State, call: usize, then: Answer, release: bool) {
        if release {
            s.calls[call].pc = Pc::Releasing { then };
        } else {
            self.answer(s, call, then);
        }
    }
}

impl Model for IdempotentModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            t: 0,
            item: None,
            calls: vec![
                Call {
                    pc: Pc::Idle,
                    offset: 0,
                    now_ms: 0,
                    deadline_ms: 0,
                    lease_until_ms: 0,
                    release_failed: false,
                };
                self.calls.len()
            ],
            caches: vec![None; 4],
            ghost: Ghost::default(),
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let faults = [Fault::None, Fault::AnswerLost, Fault::Throttled];
        for (i, c) in s.calls.iter().enumerate() {
            let call = i as u8;
            match c.pc {
                Pc::Idle => {
                    let skew = self.skew_ms as i64;
                    let offsets: &[i64] = if skew == 0 { &[0] } else { &[-skew, 0, skew] };
                    for &offset in offsets {
                        out.push(Action::Start { call, offset });
                    }
                }
                Pc::Claiming { .. } => {
                    out.extend(faults.iter().map(|&fault| Action::Claim { call, fault }))
                }
                Pc::Running => {
                    out.push(Action::BodyOk { call });
                    out.push(Action::BodyFails { call });
                }
                Pc::Completing { .. } => {
                    out.extend(faults.iter().map(|&fault| Action::Complete { call, fault }))
                }
                Pc::Releasing { .. } => {
                    out.push(Action::Release {
                        call,
                        fault: Fault::None,
                    });
                    out.push(Action::Release {
                        call,
                        fault: Fault::Throttled,
                    });
                }
                Pc::Done(_) | Pc::Dead => {}
            }
            if matches!(
                c.pc,
                Pc::Claiming { .. } | Pc::Running | Pc::Completing { .. } | Pc::Releasing { .. }
            ) {
                out.push(Action::Crash { call });
            }
        }
        if s.t + self.tick_ms <= self.horizon_ms {
            out.push(Action::Tick);
        }
        if let Some(item) = &s.item
            && item.expires_at * 1000 <= s.t
        {
            out.push(Action::TtlDeletes);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.t += self.tick_ms;
                for c in &mut s.calls {
                    let live = !matches!(c.pc, Pc::Idle | Pc::Done(_) | Pc::Dead);
                    if live && c.deadline_ms <= s.t {
                        // Lambda's timeout: the invocation ends.
                        c.pc = Pc::Dead;
                    }
                }
            }
            Action::TtlDeletes => s.item = None,
            Action::Crash { call } => s.calls[usize::from(call)].pc = Pc::Dead,
            Action::Start { call, offset } => {
                let i = usize::from(call);
                let spec = self.calls[i];
                s.calls[i].offset = offset;
                let now = self.clock(&s, i);
                s.calls[i].now_ms = now;
                s.calls[i].deadline_ms = s.t + self.lease_ms;
                // The lease is the deadline (under the 15 min cap).
                s.calls[i].lease_until_ms = s.t + self.lease_ms;
                if s.calls[i].lease_until_ms <= now {
                    self.answer(&mut s, i, Answer::StoreError);
                    return Some(s);
                }
                let inst = usize::from(spec.instance);
                if let Some((payload, of, exp)) = s.caches[inst] {
                    let fresh = self.mutation == Some(Mutation::CacheIgnoresExpiry)
                        || !is_expired(exp, now);
                    if fresh {
                        if exp * 1000 + self.skew_ms <= s.t {
                            s.ghost.expired_served = true;
                        }
                        let a = if payload == spec.payload {
                            Answer::Output {
                                of,
                                source: Source::Cache,
                            }
                        } else {
                            Answer::OtherPayload
                        };
                        self.answer(&mut s, i, a);
                        return Some(s);
                    }
                    s.caches[inst] = None;
                }
                s.calls[i].pc = Pc::Claiming { tries: 0 };
            }
            Action::Claim { call, fault } => {
                let i = usize::from(call);
                let Pc::Claiming { tries } = s.calls[i].pc else {
                    return None;
                };
                let tries = tries + 1;
                let spec = self.calls[i];
                let now = s.calls[i].now_ms;
                let retry_left = tries < self.sdk_tries;
                if fault == Fault::Throttled {
                    if retry_left {
                        s.calls[i].pc = Pc::Claiming { tries };
                    } else {
                        // `Err(e)`: release (the claim may have committed
                        // unseen), then answer the error.
                        self.fail(&mut s, i, Answer::StoreError, true);
                    }
                    return Some(s);
                }
                if self.claim_admits(s.item.as_ref(), now) {
                    if let Some(old) = &s.item {
                        if old.completed && old.expires_at * 1000 > s.t + self.skew_ms {
                            s.ghost.overwrote_live = true;
                        }
                        // A lease is taken over only once it has ended in
                        // true time: the claim's skew allowance covers the
                        // claimer's clock being ahead.
                        if !old.completed && old.lease_until_ms > s.t {
                            s.ghost.overwrote_live = true;
                        }
                        if is_expired(old.expires_at, now) {
                            s.ghost.reclaimed_expired = true;
                        }
                    }
                    let by_expiry = now / 1000 + self.expiry_s;
                    let lease_until = s.calls[i].lease_until_ms;
                    let expires_at = if self.mutation == Some(Mutation::NoSkewAllowance) {
                        by_expiry.max(lease_until.div_ceil(1000))
                    } else {
                        claim_expires_at(by_expiry, lease_until)
                    };
                    s.item = Some(Item {
                        completed: false,
                        payload: spec.payload,
                        attempt: call,
                        lease_until_ms: s.calls[i].lease_until_ms,
                        expires_at,
                        output: None,
                    });
                    if fault == Fault::AnswerLost {
                        if retry_left {
                            s.calls[i].pc = Pc::Claiming { tries };
                        } else {
                            self.fail(&mut s, i, Answer::StoreError, true);
                        }
                        return Some(s);
                    }
                    self.start_body(&mut s, i);
                    return Some(s);
                }
                // Refused: ALL_OLD, classified by the library.
                let old = s.item.clone().expect("a refusal has an item");
                let record = old.record(self);
                let mut claimed = classify(&self.fp(i), &attempt(call), Some(&record), now);
                if self.mutation == Some(Mutation::OwnClaimInProgress)
                    && claimed == Ok(Claimed::Held)
                {
                    claimed = Ok(Claimed::Refused(Refusal::InProgress {
                        lease_until_ms: old.lease_until_ms,
                    }));
                }
                match claimed {
                    Ok(Claimed::Held) => {
                        if tries > 1 {
                            s.ghost.held_after_lost_answer = true;
                        }
                        self.start_body(&mut s, i);
                    }
                    Ok(Claimed::Refused(Refusal::Completed(stored))) => {
                        let of = old.output.expect("completed");
                        debug_assert_eq!(stored.output, output_text(of));
                        // Judged when the call read its clock (the
                        // claim's `:now`): the answer can arrive after a
                        // record that was live then has expired (see
                        // docs/reliability.md).
                        let read_at = s.calls[i].deadline_ms - self.lease_ms;
                        if stored.expires_at * 1000 + self.skew_ms <= read_at {
                            s.ghost.expired_served = true;
                        }
                        s.caches[usize::from(spec.instance)] =
                            Some((spec.payload, of, stored.expires_at));
                        self.answer(
                            &mut s,
                            i,
                            Answer::Output {
                                of,
                                source: Source::Replayed,
                            },
                        );
                    }
                    Ok(Claimed::Refused(Refusal::OtherPayload)) => {
                        self.answer(&mut s, i, Answer::OtherPayload)
                    }
                    Ok(Claimed::Refused(Refusal::InProgress { .. })) => {
                        if !old.completed && old.attempt == call {
                            s.ghost.own_in_progress = true;
                        }
                        self.answer(&mut s, i, Answer::InProgress);
                    }
                    Err(_) => self.fail(&mut s, i, Answer::StoreError, true),
                }
            }
            Action::BodyOk { call } => {
                let i = usize::from(call);
                let now = self.clock(&s, i);
                s.calls[i].pc = Pc::Completing {
                    now_ms: now,
                    tries: 0,
                };
                if self.mutation == Some(Mutation::AnswerBeforeCompletion) {
                    // The answer goes out now; the completion is still
                    // sent (by a detached task), modelled as going on.
                    if !s.ghost.committed.iter().any(|(c, _)| *c == call) {
                        s.ghost.uncommitted_output = true;
                    }
                }
            }
            Action::BodyFails { call } => {
                let i = usize::from(call);
                let release = self.mutation != Some(Mutation::NoReleaseOnFailure);
                self.fail(&mut s, i, Answer::FunctionError, release);
                if !release
                    && s.item
                        .as_ref()
                        .is_some_and(|it| !it.completed && it.attempt == call)
                {
                    s.ghost.lock_kept = true;
                }
            }
            Action::Complete { call, fault } => {
                let i = usize::from(call);
                let Pc::Completing { now_ms, tries } = s.calls[i].pc else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                if fault == Fault::Throttled {
                    if retry_left {
                        s.calls[i].pc = Pc::Completing { now_ms, tries };
                    } else {
                        // `complete` failed: the key is kept (no release).
                        self.answer(&mut s, i, Answer::StoreError);
                    }
                    return Some(s);
                }
                let admits = s
                    .item
                    .as_ref()
                    .is_some_and(|it| !it.completed && it.attempt == call);
                if admits {
                    let expires_at = now_ms / 1000 + self.expiry_s;
                    if s.ghost
                        .committed
                        .iter()
                        .any(|(_, exp)| exp * 1000 > s.t + self.skew_ms)
                    {
                        s.ghost.second_live_completion = true;
                    }
                    s.ghost.committed.push((call, expires_at));
                    let it = s.item.as_mut().expect("admitted");
                    it.completed = true;
                    it.output = Some(call);
                    it.expires_at = expires_at;
                    if fault == Fault::AnswerLost {
                        if retry_left {
                            s.calls[i].pc = Pc::Completing { now_ms, tries };
                        } else {
                            self.answer(&mut s, i, Answer::StoreError);
                        }
                        return Some(s);
                    }
                    self.completed(&mut s, i, expires_at);
                    return Some(s);
                }
                // Refused: its own completed record (a re-sent completion
                // whose first answer was lost) is a success.
                let own = s
                    .item
                    .as_ref()
                    .is_some_and(|it| it.completed && it.attempt == call);
                if own {
                    let exp = s.item.as_ref().map_or(0, |it| it.expires_at);
                    self.completed(&mut s, i, exp);
                } else {
                    self.answer(&mut s, i, Answer::StoreError);
                }
            }
            Action::Release { call, fault } => {
                let i = usize::from(call);
                let Pc::Releasing { then } = s.calls[i].pc.clone() else {
                    return None;
                };
                if fault == Fault::Throttled {
                    s.calls[i].release_failed = true;
                } else if s
                    .item
                    .as_ref()
                    .is_some_and(|it| !it.completed && it.attempt == call)
                {
                    s.item = None;
                }
                self.answer(&mut s, i, then);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "body runs at most once per key while a completed record or a live lease holds it",
                |_, s: &State| !s.ghost.overwrote_live && !s.ghost.overlapping_runs,
            ),
            Property::always(
                "every output answered is the committed one",
                |_, s: &State| !s.ghost.uncommitted_output && !s.ghost.second_live_completion,
            ),
            Property::always(
                "no caller is told InProgress by its own claim",
                |_, s: &State| !s.ghost.own_in_progress,
            ),
            Property::always(
                "no expired record is served as completed",
                |_, s: &State| !s.ghost.expired_served,
            ),
            Property::always("a failed run gives its key back", |_, s: &State| {
                !s.ghost.lock_kept
            }),
            Property::sometimes("sometimes: an output is replayed", |_, s: &State| {
                s.ghost.replays > 0
            }),
            Property::sometimes(
                "sometimes: a lost claim answer is held on the SDK's retry",
                |_, s: &State| s.ghost.held_after_lost_answer,
            ),
            Property::sometimes(
                "sometimes: the body runs twice (after a lease or expiry)",
                |_, s: &State| s.ghost.runs >= 2,
            ),
            Property::sometimes(
                "sometimes: an expired record is claimed again",
                |_, s: &State| s.ghost.reclaimed_expired,
            ),
            Property::sometimes(
                "sometimes: another caller is told InProgress",
                |_, s: &State| s.calls.iter().any(|c| c.pc == Pc::Done(Answer::InProgress)),
            ),
        ]
    }
}

impl IdempotentModel {
    fn start_body(&self, s: &mut State, i: usize) {
        // Another body still running whose lease is live in true time:
        // they overlap (the skew allowance of the claim's lease test
        // covers clocks up to it apart).
        for (j, c) in s.calls.iter().enumerate() {
            if j != i && c.pc == Pc::Running && c.lease_until_ms > s.t {
                s.ghost.overlapping_runs = true;
            }
        }
        s.ghost.runs += 1;
        s.calls[i].pc = Pc::Running;
    }

    fn completed(&self, s: &mut State, i: usize, expires_at: u64) {
        let spec = self.calls[i];
        s.caches[usize::from(spec.instance)] = Some((spec.payload, i as u8, expires_at));
        self.answer(
            s,
            i,
            Answer::Output {
                of: i as u8,
                source: Source::Ran,
            },
        );
    }
}

impl Narrate for IdempotentModel {
    fn narrate(&self, before: &State, action: &Action, after: &State) -> String {
        let who = |c: u8| {
            let spec = self.calls[usize::from(c)];
            format!(
                "call#{c} (instance {}, payload {})",
                spec.instance,
                ["A", "B"][usize::from(spec.payload)]
            )
        };
        let item = |s: &State| {
            s.item
                .as_ref()
                .map_or("no item".to_owned(), ToString::to_string)
        };
        let outcome = |c: u8| match &after.calls[usize::from(c)].pc {
            Pc::Done(a) => format!(" -> answers {a:?}"),
            Pc::Running => " -> holds the key, runs the body".to_owned(),
            Pc::Releasing { then } => format!(" -> releases, then answers {then:?}"),
            other => format!(" -> {other:?}"),
        };
        let t = format!("[t={}ms]", before.t);
        match action {
            Action::Tick => format!("{t} time passes to {}ms", after.t),
            Action::TtlDeletes => format!("{t} DynamoDB's TTL deletes {}", item(before)),
            Action::Crash { call } => format!("{t} {} crashes", who(*call)),
            Action::Start { call, offset } => format!(
                "{t} {} starts (clock {offset:+}ms, deadline {}ms){}",
                who(*call),
                after.calls[usize::from(*call)].deadline_ms,
                outcome(*call)
            ),
            Action::Claim { call, fault } | Action::Complete { call, fault } => {
                let (req, committed) = match action {
                    Action::Claim { .. } => ("PutItem claim", before.item != after.item),
                    _ => ("UpdateItem completion", before.item != after.item),
                };
                let what = match (fault, committed) {
                    (Fault::Throttled, _) => "throttled, not applied".to_owned(),
                    (_, true) => format!("applied: {}", item(after)),
                    (_, false) => format!("REFUSED, ALL_OLD = {}", item(before)),
                };
                let lost = if *fault == Fault::AnswerLost {
                    " (answer LOST)"
                } else {
                    ""
                };
                format!(
                    "{t} {} sends {req}: {what}{lost}{}",
                    who(*call),
                    outcome(*call)
                )
            }
            Action::BodyOk { call } => format!(
                "{t} {}'s body returns its output{}",
                who(*call),
                outcome(*call)
            ),
            Action::BodyFails { call } => {
                format!("{t} {}'s body fails{}", who(*call), outcome(*call))
            }
            Action::Release { call, fault } => format!(
                "{t} {} sends DeleteItem release: {}{}",
                who(*call),
                match fault {
                    Fault::Throttled => "throttled".to_owned(),
                    _ if before.item != after.item => "deleted its claim".to_owned(),
                    _ => format!("refused (not its in-progress claim), item {}", item(before)),
                },
                outcome(*call)
            ),
        }
    }

    fn summary(&self, s: &State) -> String {
        let item = s
            .item
            .as_ref()
            .map_or("no item".to_owned(), ToString::to_string);
        let calls: Vec<String> = s
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| format!("call#{i}: {:?}", c.pc))
            .collect();
        format!("store: {item}; {}; ghost: {:?}", calls.join(", "), s.ghost)
    }
}
