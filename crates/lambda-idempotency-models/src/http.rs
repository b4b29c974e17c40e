//! The model of the HTTP Idempotency-Key layer
//! (`lambda_idempotency::http::IdempotentService::serve`): claim scoped by
//! principal, completion with the stored response, 409 while in progress,
//! 422 for a key reused with another body or route, release on
//! 5xx/408/429, the cutoff before the deadline.
//!
//! # Actors
//! - **Requests** (`requests`): each with a principal (`alice`, `bob`),
//!   the same Idempotency-Key, a body (`A`, `B`) and a route (`POST
//!   /orders`, `PUT /orders`), each served by its own invocation.
//! - **The service** behind the layer: answers 201 (its business effect
//!   done), 500 or 429 (nothing done), nondeterministically.
//! - **The store**: one DynamoDB item per record key (the key
//!   [`record_key`] makes of the principal's scope and the
//!   Idempotency-Key), conditions as in `IdempotencyStore` (see
//!   [`crate::idempotent`]), atomic, ALL_OLD on refusal.
//! - **The environment**: time, TTL deletion (any time after expiry),
//!   Lambda's timeout at the deadline.
//!
//! # Faults
//! Each request to the store may be throttled or lose its answer after
//! being applied (the SDK re-sends the same request while it has tries
//! left); an invocation may crash between any two steps; a store call
//! still unanswered at the cutoff (deadline less the margin) is answered
//! 503 and nothing is given back. Clocks are exact here (skew is checked
//! on the same protocol in [`crate::idempotent`]).
//!
//! # Decisions from the library
//! The record key: [`record_key`]; a refused claim: `classify`; a replay
//! or a 422 for another route: [`replay`] (the layer's, extracted for this
//! model); release or completion after the service: [`after_service`]
//! (extracted likewise); the stored response's bytes:
//! [`StoredResponse::encode_for`] and back.
//!
//! # Properties (every reachable state)
//! - `at most one business effect per (principal, key) while a completed
//!   record or a live lease holds it`.
//! - `a replay is byte-identical to the first answer` (and is of a
//!   committed completion).
//! - `another principal never receives it`.
//! - `a key reused with another body or route is never replayed` (it is
//!   422, or 409 while the first is in progress).
//! - `no request is answered 409 by its own claim`.
//! - `no 5xx or 429 is replayed`.
//!
//! # Bounds and size
//! Two worlds of three requests each (`principals`: alice A POST, alice A
//! POST, bob A POST; `reuse`: alice A POST, alice B POST, alice A PUT),
//! deadline 3 s after a request's start, cutoff margin 1 s, expiry 2 s,
//! ticks of 1 s up to 4 s, two SDK tries: `principals` 2,570,067
//! distinct states (10.1 M generated), depth 23, about 13 s on two cores;
//! `reuse` 1,025,415 distinct (3.7 M), about 3 s. `make
//! model-check-deep` ([`HttpModel::deep`]): four requests (a retry,
//! another body and route, another principal), 5 s.
//!
//! # Outside the model
//! The transactional form ([`lambda_idempotency::http::Committed`]), the
//! store's in-memory cache (checked in [`crate::idempotent`]), clock skew
//! (likewise), a response too large to store, requests without a
//! principal or key (refused before any write), more than one key.
use std::collections::BTreeMap;
use std::fmt;

use lambda_http::http::StatusCode;
use lambda_idempotency::http::{
    AfterService, Answered, ReplayRefused, Scope, StoredResponse, after_service, record_key, replay,
};
use lambda_idempotency::idempotency::{
    Claimed, Record, Refusal, Stored, claim_expires_at, classify, is_expired, lease_is_live,
};
use stateright::{Model, Property};

use crate::idempotent::Fault;
use crate::trace::Narrate;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The defect fixed before: the API's 409 to its own claim after a
    /// lost answer (`classify`'s `Held` for the attempt's own record read
    /// as `InProgress`).
    Own409,
    /// The record key made without the principal (every caller's scope
    /// read as anonymous by [`record_key`]).
    ScopeIgnoresPrincipal,
    /// A completed record replays on any route (the route [`replay`] is
    /// asked with is the stored one).
    NoRouteCheck,
    /// Every status is stored ([`after_service`] asked as if the service
    /// had answered 200).
    StoreEveryStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestSpec {
    /// 0: alice, 1: bob.
    pub principal: u8,
    /// 0: body A, 1: body B.
    pub body: u8,
    /// 0: POST /orders, 1: PUT /orders.
    pub route: u8,
}

const PRINCIPALS: [&str; 2] = ["alice", "bob"];
const BODIES: [&str; 2] = ["A", "B"];
const ROUTES: [&str; 2] = ["POST /orders", "PUT /orders"];
const STATUSES: [u16; 3] = [201, 500, 429];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpModel {
    pub requests: Vec<RequestSpec>,
    pub deadline_ms: u64,
    pub margin_ms: u64,
    pub expiry_s: u64,
    pub tick_ms: u64,
    pub horizon_ms: u64,
    pub sdk_tries: u8,
    pub mutation: Option<Mutation>,
    /// Each request's record key index (requests whose [`record_key`]s
    /// are equal share one), computed once by [`Self::keyed`].
    pub keys: Vec<u8>,
    /// Each request's stored output per status ([`STATUSES`]), encoded
    /// once by the library's [`StoredResponse::encode_for`].
    pub outputs: Vec<Vec<String>>,
}

impl HttpModel {
    /// Compute the record keys (after any change of requests or
    /// mutation).
    pub fn keyed(mut self) -> Self {
        let keys: Vec<String> = (0..self.requests.len()).map(|i| self.key(i)).collect();
        self.keys = keys
            .iter()
            .map(|k| keys.iter().position(|o| o == k).unwrap_or(0) as u8)
            .collect();
        self.outputs = (0..self.requests.len())
            .map(|i| {
                STATUSES
                    .iter()
                    .map(|&st| self.response(i as u8, st).encode_for(self.route(i)))
                    .collect()
            })
            .collect();
        self
    }
    fn base(requests: Vec<RequestSpec>) -> Self {
        HttpModel {
            requests,
            deadline_ms: 3000,
            margin_ms: 1000,
            expiry_s: 2,
            tick_ms: 1000,
            horizon_ms: 4000,
            sdk_tries: 2,
            mutation: None,
            keys: vec![],
            outputs: vec![],
        }
        .keyed()
    }
    /// alice twice, bob once, one body, one route.
    pub fn principals() -> Self {
        let r = |principal| RequestSpec {
            principal,
            body: 0,
            route: 0,
        };
        Self::base(vec![r(0), r(0), r(1)])
    }
    /// alice with the key, then with another body, then on another route.
    pub fn reuse() -> Self {
        let r = |body, route| RequestSpec {
            principal: 0,
            body,
            route,
        };
        Self::base(vec![r(0, 0), r(1, 0), r(0, 1)])
    }
    /// `make model-check-deep`: four requests (a retry, another body,
    /// another route, another principal), a longer horizon.
    pub fn deep() -> Self {
        let r = |principal, body, route| RequestSpec {
            principal,
            body,
            route,
        };
        HttpModel {
            horizon_ms: 5000,
            ..Self::base(vec![r(0, 0, 0), r(0, 0, 0), r(0, 1, 1), r(1, 0, 0)])
        }
    }
    pub fn with(mut self, m: Mutation) -> Self {
        self.mutation = Some(m);
        self.keyed()
    }

    fn scope(&self, req: usize) -> Scope {
        if self.mutation == Some(Mutation::ScopeIgnoresPrincipal) {
            return Scope::Anonymous;
        }
        Scope::Iam(PRINCIPALS[usize::from(self.requests[req].principal)].to_owned())
    }
    /// The record key of a request, by the layer's function.
    fn key(&self, req: usize) -> String {
        record_key(&self.scope(req), "key-1")
    }
    fn fp(&self, req: usize) -> String {
        format!("fp-{}", BODIES[usize::from(self.requests[req].body)])
    }
    /// What the layer checks a replay against: the request's route, and
    /// its target (the route with the query and identity headers, which
    /// this world does not vary, so the route stands for it).
    fn route(&self, req: usize) -> Answered<'static> {
        let route = ROUTES[usize::from(self.requests[req].route)];
        Answered {
            route,
            target: route,
        }
    }
    /// The response request `req`'s service answered with `status`: its
    /// body says who made it, so a replay to another shows.
    fn response(&self, req: u8, status: u16) -> StoredResponse {
        let spec = self.requests[usize::from(req)];
        StoredResponse::new(status)
            .header("content-type", "application/json")
            .text(format!(
                "{{\"order\":\"made by request {req} of {}\"}}",
                PRINCIPALS[usize::from(spec.principal)]
            ))
    }
}

fn attempt(req: u8) -> String {
    format!("attempt-{req}")
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Item {
    pub completed: bool,
    /// The request that claimed it (its attempt; kept when completed).
    pub by: u8,
    pub body: u8,
    pub lease_until_ms: u64,
    pub expires_at: u64,
    /// The stored response's status (the request is `by`).
    pub status: Option<u16>,
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = BODIES[usize::from(self.body)];
        match self.status {
            Some(st) if self.completed => write!(
                f,
                "COMPLETED{{body {b}, response {st} of request#{}, expires {}s}}",
                self.by, self.expires_at
            ),
            _ => write!(
                f,
                "IN_PROGRESS{{body {b}, attempt-{}, lease until {}ms, expires {}s}}",
                self.by, self.lease_until_ms, self.expires_at
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pc {
    Idle,
    Claiming { tries: u8 },
    Serving,
    Completing { status: u16, tries: u8 },
    Releasing { then: Answer },
    Done(Answer),
    Dead,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The service's own response.
    Served(u16),
    /// A stored response replayed: whose, which status.
    Replayed {
        of: u8,
        status: u16,
    },
    Conflict409,
    KeyReused422,
    Unavailable503,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Req {
    pub pc: Pc,
    pub start_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    pub overwrote_live: bool,
    pub overlapping: bool,
    pub replay_not_identical: bool,
    pub other_principal: bool,
    pub reused_replayed: bool,
    pub own_409: bool,
    pub error_replayed: bool,
    /// (record key index, request) of every committed completion.
    pub committed: Vec<(u8, u8)>,
    pub replays: u8,
    pub effects: u8,
    pub reused_422: bool,
    pub other_409: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub t: u64,
    /// Record key index -> item.
    pub items: BTreeMap<u8, Item>,
    pub reqs: Vec<Req>,
    pub ghost: Ghost,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Start { req: u8 },
    Claim { req: u8, fault: Fault },
    CutOff { req: u8 },
    Service { req: u8, status: u16 },
    Complete { req: u8, fault: Fault },
    Release { req: u8, fault: Fault },
    Crash { req: u8 },
    Tick,
    TtlDeletes { key: u8 },
}

impl HttpModel {
    /// Record key indices: requests whose record keys (by the library's
    /// function) are equal share an index.
    fn key_index(&self, req: usize) -> u8 {
        self.keys[req]
    }
    fn cutoff(&self, s: &State, i: usize) -> u64 {
        s.reqs[i].start_ms + self.deadline_ms - self.margin_ms
    }
    /// The claim's condition, transcribed from `IdempotencyStore::claim`
    /// (its two tests are the library's own).
    fn claim_admits(item: Option<&Item>, now_ms: u64) -> bool {
        match item {
            None => true,
            Some(i) => {
                is_expired(i.expires_at, now_ms)
                    || (!i.completed && !lease_is_live(i.lease_until_ms, now_ms))
            }
        }
    }
    fn record(&self, it: &Item) -> Record {
        let fingerprint = format!("fp-{}", BODIES[usize::from(it.body)]);
        match it.status {
            Some(st) if it.completed => Record::Completed {
                fingerprint,
                stored: Stored {
                    output: self.outputs[usize::from(it.by)]
                        [STATUSES.iter().position(|&x| x == st).unwrap_or(0)]
                    .clone(),
                    expires_at: it.expires_at,
                },
            },
            _ => Record::InProgress {
                fingerprint,
                attempt: attempt(it.by),
                lease_until_ms: it.lease_until_ms,
                expires_at: it.expires_at,
            },
        }
    }
    fn answer(&self, s: &mut State, i: usize, a: Answer) {
        s.reqs[i].pc = Pc::Done(a);
    }
    fn start_service(&self, s: &mut State, i: usize) {
        let k = self.key_index(i);
        for (j, r) in s.reqs.iter().enumerate() {
            if j != i
                && self.key_index(j) == k
                && r.pc == Pc::Serving
                && r.start_ms + self.deadline_ms > s.t
            {
                s.ghost.overlapping = true;
            }
        }
        s.reqs[i].pc = Pc::Serving;
    }
}

impl Model for HttpModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            t: 0,
            items: BTreeMap::new(),
            reqs: vec![
                Req {
                    pc: Pc::Idle,
                    start_ms: 0
                };
                self.requests.len()
            ],
            ghost: Ghost::default(),
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let faults = [Fault::None, Fault::AnswerLost, Fault::Throttled];
        for (i, r) in s.reqs.iter().enumerate() {
            let req = i as u8;
            match r.pc {
                Pc::Idle => out.push(Action::Start { req }),
                Pc::Claiming { .. } => {
                    if s.t >= self.cutoff(s, i) {
                        out.push(Action::CutOff { req });
                    } else {
                        out.extend(faults.iter().map(|&fault| Action::Claim { req, fault }));
                    }
                }
                Pc::Serving => out.extend(
                    STATUSES
                        .iter()
                        .map(|&status| Action::Service { req, status }),
                ),
                Pc::Completing { .. } => {
                    out.extend(faults.iter().map(|&fault| Action::Complete { req, fault }))
                }
                Pc::Releasing { .. } => {
                    if s.t >= self.cutoff(s, i) {
                        out.push(Action::CutOff { req });
                    } else {
                        out.push(Action::Release {
                            req,
                            fault: Fault::None,
                        });
                        out.push(Action::Release {
                            req,
                            fault: Fault::Throttled,
                        });
                    }
                }
                Pc::Done(_) | Pc::Dead => {}
            }
            if !matches!(r.pc, Pc::Idle | Pc::Done(_) | Pc::Dead) {
                out.push(Action::Crash { req });
            }
        }
        if s.t + self.tick_ms <= self.horizon_ms {
            out.push(Action::Tick);
        }
        for (k, it) in &s.items {
            if it.expires_at * 1000 <= s.t {
                out.push(Action::TtlDeletes { key: *k });
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.t += self.tick_ms;
                for r in &mut s.reqs {
                    if !matches!(r.pc, Pc::Idle | Pc::Done(_) | Pc::Dead)
                        && r.start_ms + self.deadline_ms <= s.t
                    {
                        r.pc = Pc::Dead;
                    }
                }
            }
            Action::TtlDeletes { key } => {
                s.items.remove(&key);
            }
            Action::Crash { req } => s.reqs[usize::from(req)].pc = Pc::Dead,
            Action::Start { req } => {
                let i = usize::from(req);
                s.reqs[i].start_ms = s.t;
                s.reqs[i].pc = Pc::Claiming { tries: 0 };
            }
            Action::CutOff { req } => {
                let i = usize::from(req);
                let a = match &s.reqs[i].pc {
                    Pc::Releasing { then } => then.clone(),
                    _ => Answer::Unavailable503,
                };
                self.answer(&mut s, i, a);
            }
            Action::Claim { req, fault } => {
                let i = usize::from(req);
                let Pc::Claiming { tries } = s.reqs[i].pc else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                let now = s.reqs[i].start_ms;
                let k = self.key_index(i);
                let spec = self.requests[i];
                if fault == Fault::Throttled {
                    s.reqs[i].pc = if retry_left {
                        Pc::Claiming { tries }
                    } else {
                        Pc::Releasing {
                            then: Answer::Unavailable503,
                        }
                    };
                    return Some(s);
                }
                if Self::claim_admits(s.items.get(&k), now) {
                    if let Some(old) = s.items.get(&k) {
                        let live = if old.completed {
                            old.expires_at * 1000 > s.t
                        } else {
                            old.lease_until_ms > s.t
                        };
                        if live {
                            s.ghost.overwrote_live = true;
                        }
                    }
                    let lease_until = now + self.deadline_ms;
                    s.items.insert(
                        k,
                        Item {
                            completed: false,
                            by: req,
                            body: spec.body,
                            lease_until_ms: lease_until,
                            expires_at: claim_expires_at(now / 1000 + self.expiry_s, lease_until),
                            status: None,
                        },
                    );
                    if fault == Fault::AnswerLost {
                        s.reqs[i].pc = if retry_left {
                            Pc::Claiming { tries }
                        } else {
                            Pc::Releasing {
                                then: Answer::Unavailable503,
                            }
                        };
                        return Some(s);
                    }
                    self.start_service(&mut s, i);
                    return Some(s);
                }
                let old = s.items.get(&k).cloned().expect("refused against an item");
                let mut claimed =
                    classify(&self.fp(i), &attempt(req), Some(&self.record(&old)), now);
                if self.mutation == Some(Mutation::Own409) && claimed == Ok(Claimed::Held) {
                    claimed = Ok(Claimed::Refused(Refusal::InProgress {
                        lease_until_ms: old.lease_until_ms,
                    }));
                }
                match claimed {
                    Ok(Claimed::Held) => self.start_service(&mut s, i),
                    Ok(Claimed::Refused(Refusal::Completed(stored))) => {
                        let route = if self.mutation == Some(Mutation::NoRouteCheck) {
                            self.route(usize::from(old.by))
                        } else {
                            self.route(i)
                        };
                        match replay(&stored.output, route) {
                            Ok(response) => {
                                let of = old.by;
                                let producer = self.requests[usize::from(of)];
                                let first = self.response(of, old.status.unwrap_or(0));
                                if response != first || !s.ghost.committed.contains(&(k, of)) {
                                    s.ghost.replay_not_identical = true;
                                }
                                if producer.principal != spec.principal {
                                    s.ghost.other_principal = true;
                                }
                                if producer.body != spec.body || producer.route != spec.route {
                                    s.ghost.reused_replayed = true;
                                }
                                if response.status >= 500 || response.status == 429 {
                                    s.ghost.error_replayed = true;
                                }
                                s.ghost.replays += 1;
                                self.answer(
                                    &mut s,
                                    i,
                                    Answer::Replayed {
                                        of,
                                        status: response.status,
                                    },
                                );
                            }
                            Err(ReplayRefused::OtherRequest) => {
                                s.ghost.reused_422 = true;
                                self.answer(&mut s, i, Answer::KeyReused422);
                            }
                            Err(ReplayRefused::Corrupt(_)) => {
                                self.answer(&mut s, i, Answer::Unavailable503)
                            }
                        }
                    }
                    Ok(Claimed::Refused(Refusal::OtherPayload)) => {
                        s.ghost.reused_422 = true;
                        self.answer(&mut s, i, Answer::KeyReused422);
                    }
                    Ok(Claimed::Refused(Refusal::InProgress { .. })) => {
                        if !old.completed && old.by == req {
                            s.ghost.own_409 = true;
                        } else {
                            s.ghost.other_409 = true;
                        }
                        self.answer(&mut s, i, Answer::Conflict409);
                    }
                    Err(_) => {
                        s.reqs[i].pc = Pc::Releasing {
                            then: Answer::Unavailable503,
                        }
                    }
                }
            }
            Action::Service { req, status } => {
                let i = usize::from(req);
                let asked = if self.mutation == Some(Mutation::StoreEveryStatus) {
                    200
                } else {
                    status
                };
                let code = StatusCode::from_u16(asked).expect("a status");
                if status == 201 {
                    s.ghost.effects += 1;
                }
                match after_service(code, false) {
                    AfterService::Release => {
                        s.reqs[i].pc = Pc::Releasing {
                            then: Answer::Served(status),
                        }
                    }
                    AfterService::Complete => s.reqs[i].pc = Pc::Completing { status, tries: 0 },
                    AfterService::AlreadyCommitted => {
                        self.answer(&mut s, i, Answer::Served(status))
                    }
                }
            }
            Action::Complete { req, fault } => {
                let i = usize::from(req);
                let Pc::Completing { status, tries } = s.reqs[i].pc else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                let k = self.key_index(i);
                if fault == Fault::Throttled {
                    if retry_left {
                        s.reqs[i].pc = Pc::Completing { status, tries };
                    } else {
                        self.answer(&mut s, i, Answer::Unavailable503);
                    }
                    return Some(s);
                }
                let admits = s
                    .items
                    .get(&k)
                    .is_some_and(|it| !it.completed && it.by == req);
                if admits {
                    let it = s.items.get_mut(&k).expect("admitted");
                    it.completed = true;
                    it.status = Some(status);
                    it.expires_at = s.t / 1000 + self.expiry_s;
                    s.ghost.committed.push((k, req));
                    if fault == Fault::AnswerLost {
                        if retry_left {
                            s.reqs[i].pc = Pc::Completing { status, tries };
                        } else {
                            self.answer(&mut s, i, Answer::Unavailable503);
                        }
                        return Some(s);
                    }
                    self.answer(&mut s, i, Answer::Served(status));
                    return Some(s);
                }
                let own = s
                    .items
                    .get(&k)
                    .is_some_and(|it| it.completed && it.by == req);
                let a = if own {
                    Answer::Served(status)
                } else {
                    Answer::Unavailable503
                };
                self.answer(&mut s, i, a);
            }
            Action::Release { req, fault } => {
                let i = usize::from(req);
                let Pc::Releasing { then } = s.reqs[i].pc.clone() else {
                    return None;
                };
                let k = self.key_index(i);
                if fault != Fault::Throttled
                    && s.items
                        .get(&k)
                        .is_some_and(|it| !it.completed && it.by == req)
                {
                    s.items.remove(&k);
                }
                self.answer(&mut s, i, then);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut props = vec![
            Property::always(
                "at most one business effect per (principal, key) while a completed record or a live lease holds it",
                |_, s: &State| !s.ghost.overwrote_live && !s.ghost.overlapping,
            ),
            Property::always(
                "a replay is byte-identical to the first answer",
                |_, s: &State| !s.ghost.replay_not_identical,
            ),
            Property::always("another principal never receives it", |_, s: &State| {
                !s.ghost.other_principal
            }),
            Property::always(
                "a key reused with another body or route is never replayed",
                |_, s: &State| !s.ghost.reused_replayed,
            ),
            Property::always(
                "no request is answered 409 by its own claim",
                |_, s: &State| !s.ghost.own_409,
            ),
            Property::always("no 5xx or 429 is replayed", |_, s: &State| {
                !s.ghost.error_replayed
            }),
        ];
        let r = &self.requests;
        if (0..r.len()).any(|i| (0..i).any(|j| r[i] == r[j])) {
            props.push(Property::sometimes(
                "sometimes: a response is replayed",
                |_, s: &State| s.ghost.replays > 0,
            ));
        }
        if r.iter()
            .any(|x| x.principal == r[0].principal && (x.body, x.route) != (r[0].body, r[0].route))
        {
            props.push(Property::sometimes(
                "sometimes: a reused key is answered 422",
                |_, s: &State| s.ghost.reused_422,
            ));
        }
        props.extend([
            Property::sometimes(
                "sometimes: another request is answered 409",
                |_, s: &State| s.ghost.other_409,
            ),
            Property::sometimes("sometimes: the service runs twice", |_, s: &State| {
                s.ghost.effects >= 2
            }),
        ]);
        props
    }
}

impl Narrate for HttpModel {
    fn narrate(&self, before: &State, action: &Action, after: &State) -> String {
        let who = |r: u8| {
            let spec = self.requests[usize::from(r)];
            format!(
                "request#{r} ({}, body {}, {})",
                PRINCIPALS[usize::from(spec.principal)],
                BODIES[usize::from(spec.body)],
                ROUTES[usize::from(spec.route)]
            )
        };
        let item = |s: &State, r: u8| {
            s.items
                .get(&self.key_index(usize::from(r)))
                .map_or("no item".to_owned(), ToString::to_string)
        };
        let outcome = |r: u8| match &after.reqs[usize::from(r)].pc {
            Pc::Done(a) => format!(" -> answers {a:?}"),
            Pc::Serving => " -> holds the key, calls the service".to_owned(),
            Pc::Releasing { then } => format!(" -> releases, then answers {then:?}"),
            other => format!(" -> {other:?}"),
        };
        let t = format!("[t={}ms]", before.t);
        match action {
            Action::Tick => format!("{t} time passes to {}ms", after.t),
            Action::TtlDeletes { key } => format!(
                "{t} DynamoDB's TTL deletes {}",
                before
                    .items
                    .get(key)
                    .map_or("-".to_owned(), ToString::to_string)
            ),
            Action::Crash { req } => format!("{t} {} crashes", who(*req)),
            Action::Start { req } => format!("{t} {} arrives", who(*req)),
            Action::CutOff { req } => {
                format!("{t} {}: the cutoff comes{}", who(*req), outcome(*req))
            }
            Action::Service { req, status } => {
                format!(
                    "{t} {}'s service answers {status}{}",
                    who(*req),
                    outcome(*req)
                )
            }
            Action::Claim { req, fault } | Action::Complete { req, fault } => {
                let name = if matches!(action, Action::Claim { .. }) {
                    "PutItem claim"
                } else {
                    "UpdateItem completion"
                };
                let changed = item(before, *req) != item(after, *req);
                let what = match (fault, changed) {
                    (Fault::Throttled, _) => "throttled, not applied".to_owned(),
                    (_, true) => format!("applied: {}", item(after, *req)),
                    (_, false) => format!("REFUSED, ALL_OLD = {}", item(before, *req)),
                };
                let lost = if *fault == Fault::AnswerLost {
                    " (answer LOST)"
                } else {
                    ""
                };
                format!(
                    "{t} {} sends {name}: {what}{lost}{}",
                    who(*req),
                    outcome(*req)
                )
            }
            Action::Release { req, fault } => format!(
                "{t} {} sends DeleteItem release ({}){}",
                who(*req),
                if *fault == Fault::Throttled {
                    "throttled"
                } else {
                    "sent"
                },
                outcome(*req)
            ),
        }
    }

    fn summary(&self, s: &State) -> String {
        let items: Vec<String> = s
            .items
            .iter()
            .map(|(k, it)| format!("key#{k}: {it}"))
            .collect();
        let reqs: Vec<String> = s
            .reqs
            .iter()
            .enumerate()
            .map(|(i, r)| format!("request#{i}: {:?}", r.pc))
            .collect();
        format!(
            "store: [{}]; {}; ghost: {:?}",
            items.join(", "),
            reqs.join(", "),
            s.ghost
        )
    }
}
