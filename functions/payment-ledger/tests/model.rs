//! The model (a stateright model, with the harness of
//! crates/lambda-idempotency-models; here, beside the function, so that
//! removing the function removes its model too): the payment ledger's
//! transactional inbox, parking, and refunds of parked captures.
//!
//! # Actors
//! - **SQS**: one message per event (captures and refunds of one account),
//!   redelivered until deleted, in any order, possibly to two workers at
//!   once, at most `max_receives` times (then the DLQ).
//! - **Workers** (two Lambda instances, one message per batch), running
//!   `LedgerHandler::apply`: one TransactWriteItems (the entry's Put
//!   `attribute_not_exists`; for a refund, the capture's Update `exists AND
//!   account AND currency AND refundable >= :amt` and the ConditionCheck
//!   that the capture is not parked; the account's Update), with a
//!   ClientRequestToken per attempt; on cancellation `classify_cancellation`;
//!   on `Park`, the suspense entry's Put and `classify_park_refusal` if it
//!   is refused; then the batch engine's `RecordOutcome::acknowledge`.
//! - **The store**: entries, suspense entries and the account, with
//!   TransactWriteItems all-or-nothing, a reason per item on cancellation
//!   (ALL_OLD for each failed condition), and a committed token's request
//!   answered as a success again (the 10-minute window outlasts every SDK
//!   retry here).
//!
//! # Faults
//! Redelivery and duplicates, a worker crash between its requests, a
//! request throttled (not applied) or applied with its answer lost (the SDK
//! re-sends it, same token, while it has tries left).
//!
//! # Properties (every reachable state)
//! - `a balance equals the sum of the entries posted`.
//! - `every acknowledged event is posted or parked`.
//! - `a refund is Early only while its capture may still be posted` (never
//!   against a parked capture: it would wait for the DLQ).
//!
//! # Bounds
//! Two worlds of three events, two workers, three receives per message,
//! two SDK tries: `refunds` (a capture of 100 and two refunds of 60: one of
//! them is over what is left, whichever comes second) and `parked` (the
//! account is in INR; a capture in USD, parked; its refund; another
//! capture in INR): `refunds` 860,809 distinct states (4.9 M generated),
//! depth 26, about 18 s; `parked` 1,017,408 distinct (6.1 M), depth 29,
//! about 21 s (the function's test build, not optimised: the root's
//! profile optimises only the models' crate and stateright).
//!
//! # Outside the model
//! More than one account, the ClientRequestToken's 10-minute window
//! running out between the SDK's tries, DynamoDB's `None` reasons for
//! items it did not evaluate (every reason is filled in here), a suspense
//! entry's reason as the Put is answered (decided again from the same
//! store, which for these events cannot change it).
use std::fmt;

use lambda_idempotency::{RecordOutcome, StoreError};
use lambda_idempotency_models::idempotent::Fault;
use lambda_idempotency_models::trace::{Narrate, assert_caught, assert_holds, deep};
use payment_ledger::LedgerEvent;
use payment_ledger::domain::{
    AccountSnapshot, Cancellation, Decision, EntrySnapshot, LedgerOutcome, Reason,
    SuspenseSnapshot, classify_cancellation, classify_park_refusal,
};
use payment_ledger::event::{Movement, parse_body};
use stateright::{Model, Property};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The defect fixed before: the refund of a parked capture left to the
    /// DLQ. The ConditionCheck that the capture is not parked is not in the
    /// transaction (its reason is `Ok`), so the refund reads as Early.
    ParkedCaptureIgnored,
    /// Early is acknowledged (the verdict's rule answers true).
    AckEarly,
    /// The account's update is a write of its own after the transaction,
    /// not one of its items (not all-or-nothing).
    AccountOutsideTransaction,
}

#[derive(Debug, Clone)]
pub struct LedgerModel {
    pub events: Vec<LedgerEvent>,
    /// The account as it is before the events (currency), if it exists.
    pub account: Option<String>,
    pub workers: u8,
    pub max_receives: u8,
    pub sdk_tries: u8,
    pub mutation: Option<Mutation>,
}

fn capture(id: u8, payment: &str, amount: u64, currency: &str) -> LedgerEvent {
    let v = format!(
        r#"{{"eventId":"e{id}","type":"PaymentCaptured","paymentId":"{payment}","accountId":"a1","amount":{amount},"currency":"{currency}","occurredAt":"2026-11-29T10:15:00Z"}}"#
    );
    parse_body(Some(&v)).expect("a capture")
}

fn refund(id: u8, payment: &str, refund: &str, amount: u64, currency: &str) -> LedgerEvent {
    let v = format!(
        r#"{{"eventId":"e{id}","type":"PaymentRefunded","paymentId":"{payment}","refundId":"{refund}","accountId":"a1","amount":{amount},"currency":"{currency}","occurredAt":"2026-11-29T11:15:00Z"}}"#
    );
    parse_body(Some(&v)).expect("a refund")
}

impl LedgerModel {
    pub fn refunds() -> Self {
        LedgerModel {
            events: vec![
                capture(1, "p1", 100, "INR"),
                refund(2, "p1", "r1", 60, "INR"),
                refund(3, "p1", "r2", 60, "INR"),
            ],
            account: None,
            workers: 2,
            max_receives: 3,
            sdk_tries: 2,
            mutation: None,
        }
    }
    pub fn parked() -> Self {
        LedgerModel {
            events: vec![
                capture(1, "p1", 100, "USD"),
                refund(2, "p1", "r1", 50, "USD"),
                capture(3, "p2", 70, "INR"),
            ],
            account: Some("INR".into()),
            ..Self::refunds()
        }
    }
    /// `make model-check-deep`: a fourth event (a refund of the second
    /// capture in the parked world), three workers.
    pub fn deep() -> Self {
        let mut m = Self::parked();
        m.events.push(refund(4, "p2", "r2", 30, "INR"));
        m.workers = 3;
        m
    }
    pub fn with(mut self, m: Mutation) -> Self {
        self.mutation = Some(m);
        self
    }
}

/// An entry (posted) as stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    pub event: u8,
    pub amount: i128,
    /// Captures: what is left to refund.
    pub refundable: Option<i128>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Store {
    /// entry id -> entry.
    pub entries: Vec<(String, Entry)>,
    /// suspense entry id -> (event, the attempt that wrote it).
    pub suspense: Vec<(String, u8, u16)>,
    pub account: Option<(String, i128)>,
    /// Committed ClientRequestTokens (attempt numbers).
    pub tokens: Vec<u16>,
}

impl Store {
    fn entry(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|(k, _)| k == id).map(|(_, e)| e)
    }
    fn suspended(&self, id: &str) -> Option<(u8, u16)> {
        self.suspense
            .iter()
            .find(|(k, ..)| k == id)
            .map(|(_, e, a)| (*e, *a))
    }
}

impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .entries
            .iter()
            .map(|(k, e)| format!("{k}={:+}", e.amount))
            .collect();
        let parked: Vec<&str> = self.suspense.iter().map(|(k, ..)| k.as_str()).collect();
        write!(
            f,
            "entries [{}], suspense [{}], account {}",
            entries.join(", "),
            parked.join(", "),
            self.account
                .as_ref()
                .map_or("none".to_owned(), |(c, b)| format!("{b} {c}"))
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Worker {
    Idle,
    /// The transaction, token `attempt`.
    Transacting {
        msg: u8,
        attempt: u16,
        tries: u8,
    },
    /// (Mutation) the account's own write after the entry.
    Account {
        msg: u8,
    },
    /// The suspense entry's Put.
    Parking {
        msg: u8,
        attempt: u16,
        reason: String,
        tries: u8,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Msg {
    pub receives: u8,
    pub acked: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    pub acked_unrecorded: bool,
    pub early_on_parked: bool,
    pub suspended: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub store: Store,
    pub msgs: Vec<Msg>,
    pub workers: Vec<Worker>,
    pub ghost: Ghost,
    pub last_verdict: Option<(u8, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Receive { worker: u8, msg: u8 },
    Transact { worker: u8, fault: Fault },
    AccountWrite { worker: u8 },
    Park { worker: u8, fault: Fault },
    Crash { worker: u8 },
}

impl LedgerModel {
    fn ev(&self, m: u8) -> &LedgerEvent {
        &self.events[usize::from(m)]
    }

    fn entry_snapshot(&self, e: &Entry) -> EntrySnapshot {
        let ev = self.ev(e.event);
        EntrySnapshot {
            account_id: ev.account_id.to_string(),
            amount: e.amount,
            currency: ev.currency.as_str().to_owned(),
            payment_id: ev.payment_id.to_string(),
            refundable: e.refundable,
        }
    }

    fn suspense_snapshot(&self, event: u8, attempt: u16) -> SuspenseSnapshot {
        let ev = self.ev(event);
        SuspenseSnapshot {
            account_id: ev.account_id.to_string(),
            amount: i128::from(ev.amount.get()),
            currency: ev.currency.as_str().to_owned(),
            payment_id: ev.payment_id.to_string(),
            attempt: format!("park-{attempt}"),
        }
    }

    /// The transaction's items checked on one snapshot, as DynamoDB does:
    /// `None` if every condition holds, else the reasons.
    fn cancellation(&self, st: &Store, m: u8) -> Option<Cancellation> {
        let ev = self.ev(m);
        let amount = i128::from(ev.amount.get());
        let entry = match st.entry(&ev.entry_id()) {
            Some(e) => Reason::ConditionFailed(Some(self.entry_snapshot(e))),
            None => Reason::Ok,
        };
        let (capture, capture_parked) = match ev.movement {
            Movement::Captured => (None, None),
            Movement::Refunded { .. } => {
                let cap = st.entry(&ev.capture_entry_id());
                let ok = cap.is_some_and(|c| {
                    let cev = self.ev(c.event);
                    cev.account_id == ev.account_id
                        && cev.currency == ev.currency
                        && c.refundable.unwrap_or(0) >= amount
                });
                let capture = if ok {
                    Reason::Ok
                } else {
                    Reason::ConditionFailed(cap.map(|c| self.entry_snapshot(c)))
                };
                let parked = match st.suspended(&ev.capture_suspense_entry_id()) {
                    Some((e, a)) if self.mutation != Some(Mutation::ParkedCaptureIgnored) => {
                        Reason::ConditionFailed(Some(self.suspense_snapshot(e, a)))
                    }
                    _ => Reason::Ok,
                };
                (Some(capture), Some(parked))
            }
        };
        let account = if self.mutation == Some(Mutation::AccountOutsideTransaction) {
            Reason::Ok
        } else {
            let ok = match (&ev.movement, &st.account) {
                (Movement::Captured, None) => true,
                (_, Some((cur, _))) => cur == ev.currency.as_str(),
                (Movement::Refunded { .. }, None) => false,
            };
            if ok {
                Reason::Ok
            } else {
                Reason::ConditionFailed(st.account.as_ref().map(|(c, b)| AccountSnapshot {
                    currency: c.clone(),
                    balance: *b,
                }))
            }
        };
        let all_ok = matches!(entry, Reason::Ok)
            && capture.as_ref().is_none_or(|r| matches!(r, Reason::Ok))
            && capture_parked
                .as_ref()
                .is_none_or(|r| matches!(r, Reason::Ok))
            && matches!(account, Reason::Ok);
        (!all_ok).then_some(Cancellation {
            entry,
            capture,
            capture_parked,
            account,
        })
    }

    fn commit(&self, st: &mut Store, m: u8, attempt: u16) {
        let ev = self.ev(m);
        let amount = i128::from(ev.amount.get());
        st.entries.push((
            ev.entry_id(),
            Entry {
                event: m,
                amount: ev.signed_amount(),
                refundable: matches!(ev.movement, Movement::Captured).then_some(amount),
            },
        ));
        if let Movement::Refunded { .. } = ev.movement {
            let id = ev.capture_entry_id();
            if let Some((_, c)) = st.entries.iter_mut().find(|(k, _)| *k == id) {
                c.refundable = c.refundable.map(|r| r - amount);
            }
        }
        if self.mutation != Some(Mutation::AccountOutsideTransaction) {
            Self::post_balance(st, ev);
        }
        st.tokens.push(attempt);
    }

    fn post_balance(st: &mut Store, ev: &LedgerEvent) {
        let (cur, bal) = st
            .account
            .get_or_insert_with(|| (ev.currency.as_str().to_owned(), 0));
        let _ = cur;
        *bal += ev.signed_amount();
    }

    fn acknowledge(&self, r: &Result<LedgerOutcome, StoreError>) -> bool {
        if self.mutation == Some(Mutation::AckEarly) && matches!(r, Ok(LedgerOutcome::Early)) {
            return true;
        }
        let o: RecordOutcome<LedgerOutcome, StoreError> = match r {
            Ok(o) => RecordOutcome::Settled(o.clone()),
            Err(e) => RecordOutcome::Failed(e.clone()),
        };
        o.acknowledge()
    }

    fn settle(&self, s: &mut State, w: usize, m: u8, r: Result<LedgerOutcome, StoreError>) {
        let ev = self.ev(m);
        if matches!(r, Ok(LedgerOutcome::Early))
            && s.store.suspended(&ev.capture_suspense_entry_id()).is_some()
        {
            s.ghost.early_on_parked = true;
        }
        if matches!(r, Ok(LedgerOutcome::Suspended(_))) {
            s.ghost.suspended = true;
        }
        if self.acknowledge(&r) {
            let recorded = s.store.entry(&ev.entry_id()).is_some()
                || s.store.suspended(&ev.suspense_entry_id()).is_some();
            if !recorded {
                s.ghost.acked_unrecorded = true;
            }
            s.msgs[usize::from(m)].acked = true;
        }
        s.last_verdict = Some((
            m,
            match &r {
                Ok(o) => o.to_string(),
                Err(e) => format!("Failed: {e}"),
            },
        ));
        s.workers[w] = Worker::Idle;
    }
}

impl Model for LedgerModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: Store {
                entries: vec![],
                suspense: vec![],
                account: self.account.clone().map(|c| (c, 0)),
                tokens: vec![],
            },
            msgs: vec![Msg::default(); self.events.len()],
            workers: vec![Worker::Idle; usize::from(self.workers)],
            ghost: Ghost::default(),
            last_verdict: None,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let faults = [Fault::None, Fault::AnswerLost, Fault::Throttled];
        for (w, wk) in s.workers.iter().enumerate() {
            let worker = w as u8;
            match wk {
                Worker::Idle => {
                    for (m, msg) in s.msgs.iter().enumerate() {
                        if !msg.acked && msg.receives < self.max_receives {
                            out.push(Action::Receive {
                                worker,
                                msg: m as u8,
                            });
                        }
                    }
                }
                Worker::Transacting { .. } => {
                    out.extend(
                        faults
                            .iter()
                            .map(|&fault| Action::Transact { worker, fault }),
                    );
                    out.push(Action::Crash { worker });
                }
                Worker::Account { .. } => {
                    out.push(Action::AccountWrite { worker });
                    out.push(Action::Crash { worker });
                }
                Worker::Parking { .. } => {
                    out.extend(faults.iter().map(|&fault| Action::Park { worker, fault }));
                    out.push(Action::Crash { worker });
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        s.last_verdict = None;
        match action {
            Action::Receive { worker, msg } => {
                s.msgs[usize::from(msg)].receives += 1;
                // Unique per receive (not a global counter: states that
                // differ only in it would be explored apart).
                let attempt = u16::from(msg) * 16 + u16::from(s.msgs[usize::from(msg)].receives);
                s.workers[usize::from(worker)] = Worker::Transacting {
                    msg,
                    attempt,
                    tries: 0,
                };
            }
            Action::Crash { worker } => s.workers[usize::from(worker)] = Worker::Idle,
            Action::AccountWrite { worker } => {
                let w = usize::from(worker);
                let Worker::Account { msg } = s.workers[w] else {
                    return None;
                };
                Self::post_balance(&mut s.store, self.ev(msg));
                self.settle(&mut s, w, msg, Ok(LedgerOutcome::Applied));
            }
            Action::Transact { worker, fault } => {
                let w = usize::from(worker);
                let Worker::Transacting {
                    msg,
                    attempt,
                    tries,
                } = s.workers[w]
                else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                if fault == Fault::Throttled {
                    if retry_left {
                        s.workers[w] = Worker::Transacting {
                            msg,
                            attempt,
                            tries,
                        };
                    } else {
                        let e = StoreError::Throttled {
                            code: "ThrottlingException".into(),
                        };
                        self.settle(&mut s, w, msg, Err(e));
                    }
                    return Some(s);
                }
                // The token of a committed request: DynamoDB answers success.
                if s.store.tokens.contains(&attempt) {
                    self.settle(&mut s, w, msg, Ok(LedgerOutcome::Applied));
                    return Some(s);
                }
                match self.cancellation(&s.store, msg) {
                    None => {
                        self.commit(&mut s.store, msg, attempt);
                        if fault == Fault::AnswerLost {
                            if retry_left {
                                s.workers[w] = Worker::Transacting {
                                    msg,
                                    attempt,
                                    tries,
                                };
                            } else {
                                self.settle(&mut s, w, msg, Err(StoreError::Network));
                            }
                        } else if self.mutation == Some(Mutation::AccountOutsideTransaction) {
                            s.workers[w] = Worker::Account { msg };
                        } else {
                            self.settle(&mut s, w, msg, Ok(LedgerOutcome::Applied));
                        }
                    }
                    Some(c) => match classify_cancellation(self.ev(msg), &c) {
                        Decision::Settled(o) => self.settle(&mut s, w, msg, Ok(o)),
                        Decision::Failed(e) => self.settle(&mut s, w, msg, Err(e)),
                        Decision::Park(reason) => {
                            let attempt = attempt + 1000;
                            s.workers[w] = Worker::Parking {
                                msg,
                                attempt,
                                reason: format!("{reason:?}"),
                                tries: 0,
                            };
                            // The reason is decided again from the same
                            // cancellation when the Put is answered.
                            let _ = reason;
                        }
                    },
                }
            }
            Action::Park { worker, fault } => {
                let w = usize::from(worker);
                let Worker::Parking {
                    msg,
                    attempt,
                    reason,
                    tries,
                } = s.workers[w].clone()
                else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                let ev = self.ev(msg);
                // The reason as decided (the cancellation of the snapshot
                // the transaction saw is not kept: re-derived from it is
                // the same code path; only its Debug is in the state).
                let decided = |st: &Store| match self
                    .cancellation(st, msg)
                    .map(|c| classify_cancellation(ev, &c))
                {
                    Some(Decision::Park(r)) => Some(r),
                    _ => None,
                };
                if fault == Fault::Throttled {
                    if retry_left {
                        s.workers[w] = Worker::Parking {
                            msg,
                            attempt,
                            reason,
                            tries,
                        };
                    } else {
                        let e = StoreError::Throttled {
                            code: "ThrottlingException".into(),
                        };
                        self.settle(&mut s, w, msg, Err(e));
                    }
                    return Some(s);
                }
                let id = ev.suspense_entry_id();
                match s.store.suspended(&id) {
                    None => {
                        s.store.suspense.push((id, msg, attempt));
                        s.store.suspense.sort();
                        if fault == Fault::AnswerLost && retry_left {
                            s.workers[w] = Worker::Parking {
                                msg,
                                attempt,
                                reason,
                                tries,
                            };
                            return Some(s);
                        }
                        if fault == Fault::AnswerLost {
                            self.settle(&mut s, w, msg, Err(StoreError::Network));
                            return Some(s);
                        }
                        let r = decided(&s.store).map(LedgerOutcome::Suspended);
                        let r = r.ok_or(StoreError::InconsistentRefusal);
                        self.settle(&mut s, w, msg, r);
                    }
                    Some((e, a)) => {
                        let stored = self.suspense_snapshot(e, a);
                        let r = match decided(&s.store) {
                            Some(reason) => classify_park_refusal(
                                ev,
                                reason,
                                &format!("park-{attempt}"),
                                Some(&stored),
                            ),
                            None => Err(StoreError::InconsistentRefusal),
                        };
                        self.settle(&mut s, w, msg, r);
                    }
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "a balance equals the sum of the entries posted",
                |_, s: &State| {
                    let sum: i128 = s.store.entries.iter().map(|(_, e)| e.amount).sum();
                    s.store.account.as_ref().map_or(0, |(_, b)| *b) == sum
                },
            ),
            Property::always(
                "every acknowledged event is posted or parked",
                |_, s: &State| !s.ghost.acked_unrecorded,
            ),
            Property::always(
                "a refund is Early only while its capture may still be posted",
                |_, s: &State| !s.ghost.early_on_parked,
            ),
            Property::sometimes(
                "sometimes: every message is acknowledged",
                |_, s: &State| s.msgs.iter().all(|m| m.acked),
            ),
            Property::sometimes("sometimes: an event is parked", |_, s: &State| {
                s.ghost.suspended
            }),
        ]
    }
}

impl Narrate for LedgerModel {
    fn narrate(&self, before: &State, action: &Action, after: &State) -> String {
        let ev = |m: u8| {
            let e = self.ev(m);
            format!(
                "e{} ({} {} {} {})",
                m + 1,
                e.type_name(),
                e.entry_id(),
                e.amount.get(),
                e.currency.as_str()
            )
        };
        let verdict = || match &after.last_verdict {
            Some((m, v)) => format!(
                " -> {v}; {}",
                if after.msgs[usize::from(*m)].acked {
                    "message DELETED"
                } else {
                    "message left to come back"
                }
            ),
            None => match action {
                Action::Transact { worker, .. } => match &after.workers[usize::from(*worker)] {
                    Worker::Parking { reason, .. } => {
                        format!(" -> cannot be posted: parks it ({reason})")
                    }
                    _ => String::new(),
                },
                _ => String::new(),
            },
        };
        let msg_of = |w: u8| match &before.workers[usize::from(w)] {
            Worker::Transacting { msg, .. }
            | Worker::Parking { msg, .. }
            | Worker::Account { msg } => *msg,
            Worker::Idle => 0,
        };
        match action {
            Action::Receive { worker, msg } => format!(
                "SQS delivers {} to worker {worker} (receive #{})",
                ev(*msg),
                after.msgs[usize::from(*msg)].receives
            ),
            Action::Crash { worker } => format!("worker {worker} crashes"),
            Action::AccountWrite { worker } => format!(
                "worker {worker} writes the account for {}: {}{}",
                ev(msg_of(*worker)),
                after.store,
                verdict()
            ),
            Action::Transact { worker, fault } | Action::Park { worker, fault } => {
                let name = if matches!(action, Action::Transact { .. }) {
                    "TransactWriteItems"
                } else {
                    "PutItem suspense"
                };
                let what = match fault {
                    Fault::Throttled => "throttled".to_owned(),
                    _ if before.store != after.store => format!("committed: {}", after.store),
                    _ => format!("CANCELLED/REFUSED against {}", before.store),
                };
                let lost = if *fault == Fault::AnswerLost {
                    " (answer LOST)"
                } else {
                    ""
                };
                format!(
                    "worker {worker} sends {name} for {}: {what}{lost}{}",
                    ev(msg_of(*worker)),
                    verdict()
                )
            }
        }
    }

    fn summary(&self, s: &State) -> String {
        let msgs: Vec<String> = s
            .msgs
            .iter()
            .enumerate()
            .map(|(i, m)| {
                format!(
                    "e{}: {} receives{}",
                    i + 1,
                    m.receives,
                    if m.acked { ", acked" } else { "" }
                )
            })
            .collect();
        format!("{}; {}; ghost {:?}", s.store, msgs.join(", "), s.ghost)
    }
}

#[test]
fn holds_for_refunds() {
    assert_holds(LedgerModel::refunds());
}

#[test]
fn holds_with_a_parked_capture() {
    assert_holds(if deep() {
        LedgerModel::deep()
    } else {
        LedgerModel::parked()
    });
}

fn caught(m: LedgerModel, property: &'static str) {
    let mutation = m.mutation;
    let (len, history) = assert_caught(m, property);
    println!("{mutation:?} caught by `{property}` in {len} steps:\n{history}");
}

#[test]
fn mutation_parked_capture_ignored_is_caught() {
    caught(
        LedgerModel::parked().with(Mutation::ParkedCaptureIgnored),
        "a refund is Early only while its capture may still be posted",
    );
}

#[test]
fn mutation_ack_early_is_caught() {
    caught(
        LedgerModel::refunds().with(Mutation::AckEarly),
        "every acknowledged event is posted or parked",
    );
}

#[test]
fn mutation_account_outside_transaction_is_caught() {
    caught(
        LedgerModel::refunds().with(Mutation::AccountOutsideTransaction),
        "a balance equals the sum of the entries posted",
    );
}
