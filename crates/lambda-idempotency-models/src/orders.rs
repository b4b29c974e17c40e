//! The model of the order consumer (`orders`):
//! contiguous seqs, the state guard, Rejected in turn (its seq spent by a
//! recorded rejection), Early, Stale, Duplicate, Conflict, the bounded
//! windows of processed hashes and rejected ids, and the batch engine's
//! acknowledgement rule.
//!
//! # Actors
//! - **SQS** (standard queue): one message per event of one order. A
//!   message not deleted comes back (any time, any order); a message may
//!   also be handed to two workers at once (a duplicate copy, or its
//!   visibility timeout ending while the first still works on it). Each
//!   message is received at most `max_receives` times; after that it is in
//!   the DLQ.
//! - **Workers** (`workers` Lambda instances, one message per batch):
//!   each runs `OrderHandler::apply` step by step: the event's conditional
//!   UpdateItem; on refusal, `classify_refusal` of the item returned
//!   (ALL_OLD); for a Rejected event, the rejection's conditional write
//!   (`record_rejection`) and, if that is refused, `classify_refusal`
//!   again; then the batch engine's rule (`RecordOutcome::acknowledge`)
//!   deletes the message or leaves it to come back.
//! - **The store**: the order's item, conditions transcribed from
//!   `OrderStore` (`attribute_not_exists(order_id)` for seq 1's
//!   OrderPlaced; `#st IN (requires) AND last_event_seq = seq - 1`; the
//!   rejection's `#st = :observed AND last_event_seq = :prev`), atomic,
//!   ALL_OLD on refusal.
//!
//! # Faults
//! Redelivery of any message in any order, duplicates, a worker crash
//! between any two steps (its message comes back), a write throttled (not
//! applied) or applied with its answer lost (the SDK re-sends the same
//! request while it has tries left).
//!
//! # Decisions from the library
//! `classify_refusal` (every refusal), `EventKind::requires` and
//! `EventKind::target` (the guard and the transition), `window_after`
//! (the rejection's bounded lists, with the window the model is given),
//! `processed_entry` (the hashes), `Outcome::acknowledge` through the batch
//! engine's `RecordOutcome::acknowledge`.
//!
//! # Properties (every reachable state)
//! - `an acknowledged event is applied or durably recorded`: its seq is
//!   spent on the item (applied, or its rejection recorded).
//! - `the final item is the same for every delivery order and
//!   duplication`: once every message is acknowledged, the item (status,
//!   last seq, applied history, rejected ids) is the one in-order delivery
//!   gives.
//! - `no event is applied twice` (the item's `history` of applied ids).
//! - `nothing is acknowledged that a later redelivery would change`: no
//!   acknowledged event's write would ever be admitted again.
//!
//! # Bounds and size
//! Two worlds of three events, two workers, at most three receives per
//! message, two SDK tries: `legal` (OrderPlaced 1, OrderPaid 2,
//! OrderShipped 3) and `rejection` (OrderPlaced 1, OrderShipped 2, which
//! is illegal in its turn, OrderPaid 3). State counts in the tests' output
//! and docs/reliability.md: `legal` 34,223 distinct states (197 K
//! generated), depth 23, about 1.7 s; `rejection` 46,075 distinct (270 K),
//! about 2.8 s. `make model-check-deep` ([`OrdersModel::deep`]): four
//! events (a rejection, then two legal ones), windows of two entries.
//!
//! # Outside the model
//! The dedupe cache (`settle_without_io`: it only answers what DynamoDB
//! confirmed), batches of more than one message and FIFO groups (the
//! batch engine's per-key ordering), producer conflicts (two events with
//! one seq: the final item then depends on which came first, by design,
//! and the Conflict is not acknowledged), the transactional form.
use std::fmt;

use lambda_idempotency::{RecordOutcome, StoreError};
use orders::domain::{
    OrderSnapshot, Outcome, Requires, Status, classify_refusal, processed_entry, window_after,
};
use orders::event::{OrderEvent, parse_body};
use stateright::{Model, Property};

use crate::idempotent::Fault;
use crate::trace::Narrate;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The defect fixed before: an event that cannot apply from the
    /// current status is Rejected at a gap (before its turn) instead of
    /// Early: `classify_refusal`'s `Early` with an order becomes
    /// `Rejected` when the event's `requires()` excludes the status.
    RejectAtGap,
    /// A failed record is acknowledged (the batch engine's rule answers
    /// true for `Failed`): ack before the write's answer is known.
    AckFailures,
    /// A Rejected event is acknowledged without recording the rejection
    /// (its seq not spent).
    NoRejectionRecord,
}

#[derive(Debug, Clone)]
pub struct OrdersModel {
    pub events: Vec<OrderEvent>,
    pub workers: u8,
    pub max_receives: u8,
    pub sdk_tries: u8,
    /// The windows' size given to `window_after` (the code's are 64 and
    /// 32; a small one exercises the eviction).
    pub window: usize,
    pub mutation: Option<Mutation>,
    /// The item in-order delivery gives (computed by [`Self::reference`]).
    pub expected: Option<Item>,
}

fn event(kind: &str, seq: u64) -> OrderEvent {
    let data = match kind {
        "OrderPlaced" => r#"{"customerId":"c","amount":5,"currency":"USD"}"#,
        "OrderPaid" => r#"{"paymentId":"p","amount":5,"currency":"USD"}"#,
        "OrderShipped" => r#"{"carrier":"UPS","trackingId":"t"}"#,
        "OrderCancelled" => r#"{"reason":"r"}"#,
        _ => "{}",
    };
    let body = format!(
        r#"{{"eventId":"e{seq}","orderId":"o","seq":{seq},"type":"{kind}","occurredAt":"2026-01-01T00:00:00Z","data":{data}}}"#
    );
    parse_body(Some(&body)).expect("a valid event")
}

impl OrdersModel {
    fn of(kinds: &[&str]) -> Self {
        let events = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| event(k, i as u64 + 1))
            .collect();
        OrdersModel {
            events,
            workers: 2,
            max_receives: 3,
            sdk_tries: 2,
            window: 64,
            mutation: None,
            expected: None,
        }
        .reference()
    }
    /// Three legal transitions in a row.
    pub fn legal() -> Self {
        Self::of(&["OrderPlaced", "OrderPaid", "OrderShipped"])
    }
    /// A transition illegal in its turn between two legal ones.
    pub fn rejection() -> Self {
        Self::of(&["OrderPlaced", "OrderShipped", "OrderPaid"])
    }
    /// `make model-check-deep`: four events (a rejection, then two
    /// legal), windows of two entries.
    pub fn deep() -> Self {
        OrdersModel {
            window: 2,
            ..Self::of(&["OrderPlaced", "OrderShipped", "OrderPaid", "OrderShipped"])
        }
        .reference()
    }
    pub fn with(mut self, m: Mutation) -> Self {
        self.mutation = Some(m);
        self
    }

    /// The final item of in-order delivery, no faults: each event
    /// delivered once, in seq order, to one worker.
    fn reference(mut self) -> Self {
        let clean = OrdersModel {
            workers: 1,
            mutation: None,
            expected: None,
            ..self.clone()
        };
        let mut s = clean.init_states().remove(0);
        for m in 0..self.events.len() {
            s = clean
                .next_state(
                    &s,
                    Action::Receive {
                        worker: 0,
                        msg: m as u8,
                    },
                )
                .expect("rx");
            while let Some(a) = clean.step_of(&s) {
                s = clean.next_state(&s, a).expect("step");
            }
        }
        self.expected = s.item;
        self
    }

    /// The fault-free next step of worker 0 (for the reference run).
    fn step_of(&self, s: &State) -> Option<Action> {
        match s.workers[0] {
            Worker::Applying { .. } => Some(Action::Apply {
                worker: 0,
                fault: Fault::None,
            }),
            Worker::Recording { .. } => Some(Action::Record {
                worker: 0,
                fault: Fault::None,
            }),
            Worker::Idle => None,
        }
    }

    fn snapshot(&self, it: &Item) -> OrderSnapshot {
        let ev = &self.events[usize::from(it.last_event)];
        OrderSnapshot {
            status: it.status,
            last_event_seq: it.last_seq,
            last_event_id: ev.event_id.to_string(),
            event_hash: ev.content_hash(),
            processed_hashes: it
                .processed
                .iter()
                .map(|&e| processed_entry(&self.events[usize::from(e)]))
                .collect(),
            rejected_events: it
                .rejected
                .iter()
                .map(|&e| self.events[usize::from(e)].event_id.to_string())
                .collect(),
        }
    }

    /// The event's write condition, transcribed from `OrderStore`.
    fn admits(&self, ev: &OrderEvent, item: Option<&Item>) -> bool {
        match (ev.kind().requires(), item) {
            (Requires::Absent, None) => ev.seq.get() == 1,
            (Requires::Absent, Some(_)) => false,
            (Requires::StatusIn(_), None) => false,
            (Requires::StatusIn(from), Some(it)) => {
                from.contains(&it.status) && it.last_seq == ev.seq.get() - 1
            }
        }
    }

    /// The classification, by the library, with the mutation applied.
    fn classify(&self, ev: &OrderEvent, item: Option<&Item>) -> Result<Outcome, StoreError> {
        let snap = item.map(|it| self.snapshot(it));
        let out = classify_refusal(ev, snap.as_ref());
        if self.mutation == Some(Mutation::RejectAtGap)
            && let Ok(Outcome::Early {
                current: Some(st),
                event,
            }) = &out
            && let Requires::StatusIn(from) = event.requires()
            && !from.contains(st)
        {
            return Ok(Outcome::Rejected {
                current: Some(*st),
                event: *event,
            });
        }
        out
    }

    /// The batch engine's rule, with the mutation applied.
    fn acknowledge(&self, r: &Result<Outcome, StoreError>) -> bool {
        let outcome: RecordOutcome<Outcome, StoreError> = match r {
            Ok(o) => RecordOutcome::Settled(o.clone()),
            Err(e) => RecordOutcome::Failed(e.clone()),
        };
        if self.mutation == Some(Mutation::AckFailures)
            && matches!(outcome, RecordOutcome::Failed(_))
        {
            return true;
        }
        outcome.acknowledge()
    }

    /// A worker's verdict is in: delete the message or let it come back.
    fn settle(&self, s: &mut State, w: usize, msg: u8, r: Result<Outcome, StoreError>) {
        let m = usize::from(msg);
        if self.acknowledge(&r) {
            let ev = &self.events[m];
            if s.item.as_ref().is_none_or(|it| it.last_seq < ev.seq.get()) {
                s.ghost.acked_unrecorded = true;
            }
            s.msgs[m].acked = true;
        }
        s.last_verdict = Some((msg, verdict_name(&r)));
        s.workers[w] = Worker::Idle;
    }
}

fn verdict_name(r: &Result<Outcome, StoreError>) -> String {
    match r {
        Ok(o) => o.to_string(),
        Err(e) => format!("Failed: {e}"),
    }
}

/// The order's item: only what the protocol reads or the properties
/// compare; ids and hashes are derived from the events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Item {
    pub status: Status,
    pub last_seq: u64,
    /// The last processed event (index).
    pub last_event: u8,
    /// `processed_hashes`: events (indices), oldest first.
    pub processed: Vec<u8>,
    /// `rejected_events`.
    pub rejected: Vec<u8>,
    /// `history`: applied events.
    pub history: Vec<u8>,
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids = |v: &[u8]| {
            v.iter()
                .map(|e| format!("e{}", e + 1))
                .collect::<Vec<_>>()
                .join(",")
        };
        write!(
            f,
            "{{status {}, last_event_seq {} (e{}), history [{}], rejected [{}]}}",
            self.status,
            self.last_seq,
            self.last_event + 1,
            ids(&self.history),
            ids(&self.rejected)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Worker {
    Idle,
    Applying {
        msg: u8,
        tries: u8,
    },
    /// Recording the rejection decided from `observed`.
    Recording {
        msg: u8,
        observed: Item,
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
    pub applied_twice: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub item: Option<Item>,
    pub msgs: Vec<Msg>,
    pub workers: Vec<Worker>,
    pub ghost: Ghost,
    /// For the history only: the last verdict (message, outcome).
    pub last_verdict: Option<(u8, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// SQS hands message `msg` (a first delivery, a redelivery or a
    /// duplicate copy) to an idle worker.
    Receive {
        worker: u8,
        msg: u8,
    },
    Apply {
        worker: u8,
        fault: Fault,
    },
    Record {
        worker: u8,
        fault: Fault,
    },
    Crash {
        worker: u8,
    },
}

impl Model for OrdersModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            item: None,
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
                Worker::Applying { .. } => {
                    out.extend(faults.iter().map(|&fault| Action::Apply { worker, fault }));
                    out.push(Action::Crash { worker });
                }
                Worker::Recording { .. } => {
                    out.extend(faults.iter().map(|&fault| Action::Record { worker, fault }));
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
                s.workers[usize::from(worker)] = Worker::Applying { msg, tries: 0 };
            }
            Action::Crash { worker } => s.workers[usize::from(worker)] = Worker::Idle,
            Action::Apply { worker, fault } => {
                let w = usize::from(worker);
                let Worker::Applying { msg, tries } = s.workers[w].clone() else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                let ev = &self.events[usize::from(msg)];
                if fault == Fault::Throttled {
                    if retry_left {
                        s.workers[w] = Worker::Applying { msg, tries };
                    } else {
                        let e = StoreError::Throttled {
                            code: "ProvisionedThroughputExceededException".into(),
                        };
                        self.settle(&mut s, w, msg, Err(e));
                    }
                    return Some(s);
                }
                if self.admits(ev, s.item.as_ref()) {
                    let mut it = s.item.clone().unwrap_or(Item {
                        status: ev.kind().target(),
                        last_seq: 0,
                        last_event: msg,
                        processed: vec![],
                        rejected: vec![],
                        history: vec![],
                    });
                    if it.history.contains(&msg) {
                        s.ghost.applied_twice = true;
                    }
                    it.status = ev.kind().target();
                    it.last_seq = ev.seq.get();
                    it.last_event = msg;
                    it.processed.push(msg);
                    it.history.push(msg);
                    s.item = Some(it);
                    if fault == Fault::AnswerLost {
                        if retry_left {
                            s.workers[w] = Worker::Applying { msg, tries };
                        } else {
                            self.settle(&mut s, w, msg, Err(StoreError::Network));
                        }
                        return Some(s);
                    }
                    self.settle(&mut s, w, msg, Ok(Outcome::Applied));
                    return Some(s);
                }
                let outcome = self.classify(ev, s.item.as_ref());
                match (&outcome, &s.item) {
                    (Ok(Outcome::Rejected { .. }), Some(observed))
                        if self.mutation != Some(Mutation::NoRejectionRecord) =>
                    {
                        s.workers[w] = Worker::Recording {
                            msg,
                            observed: observed.clone(),
                            tries: 0,
                        };
                    }
                    _ => self.settle(&mut s, w, msg, outcome),
                }
            }
            Action::Record { worker, fault } => {
                let w = usize::from(worker);
                let Worker::Recording {
                    msg,
                    observed,
                    tries,
                } = s.workers[w].clone()
                else {
                    return None;
                };
                let tries = tries + 1;
                let retry_left = tries < self.sdk_tries;
                let ev = &self.events[usize::from(msg)];
                if fault == Fault::Throttled {
                    if retry_left {
                        s.workers[w] = Worker::Recording {
                            msg,
                            observed,
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
                let admits = s.item.as_ref().is_some_and(|it| {
                    it.status == observed.status && it.last_seq == observed.last_seq
                });
                if admits {
                    // The windows, by the code's function.
                    let idx = |v: &[u8]| v.iter().map(u8::to_string).collect::<Vec<_>>();
                    let back = |v: Vec<String>| v.iter().filter_map(|x| x.parse().ok()).collect();
                    let it = s.item.as_mut().expect("admitted");
                    it.processed = back(window_after(
                        &idx(&observed.processed),
                        msg.to_string(),
                        self.window,
                    ));
                    it.rejected = back(window_after(
                        &idx(&observed.rejected),
                        msg.to_string(),
                        self.window,
                    ));
                    it.last_seq = ev.seq.get();
                    it.last_event = msg;
                    if fault == Fault::AnswerLost {
                        if retry_left {
                            s.workers[w] = Worker::Recording {
                                msg,
                                observed,
                                tries,
                            };
                        } else {
                            self.settle(&mut s, w, msg, Err(StoreError::Network));
                        }
                        return Some(s);
                    }
                    let outcome = self.classify(ev, Some(&observed));
                    self.settle(&mut s, w, msg, outcome);
                    return Some(s);
                }
                // Refused: classify what is there now (`OrderHandler::apply`).
                let outcome = match self.classify(ev, s.item.as_ref()) {
                    Ok(Outcome::Rejected { .. }) => Err(StoreError::InconsistentRefusal),
                    other => other,
                };
                self.settle(&mut s, w, msg, outcome);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "an acknowledged event is applied or durably recorded",
                |_, s: &State| !s.ghost.acked_unrecorded,
            ),
            Property::always(
                "the final item is the same for every delivery order and duplication",
                |m: &OrdersModel, s: &State| {
                    !s.msgs.iter().all(|x| x.acked) || s.item == m.expected
                },
            ),
            Property::always("no event is applied twice", |_, s: &State| {
                !s.ghost.applied_twice
            }),
            Property::always(
                "nothing is acknowledged that a later redelivery would change",
                |m: &OrdersModel, s: &State| {
                    s.msgs
                        .iter()
                        .enumerate()
                        .all(|(i, x)| !x.acked || !m.admits(&m.events[i], s.item.as_ref()))
                },
            ),
            Property::sometimes(
                "sometimes: every message is acknowledged",
                |_, s: &State| s.msgs.iter().all(|x| x.acked),
            ),
            Property::sometimes("sometimes: an event waits as Early", |_, s: &State| {
                s.last_verdict
                    .as_ref()
                    .is_some_and(|v| v.1.starts_with("Early"))
            }),
            Property::sometimes(
                "sometimes: a redelivery is a Duplicate or Stale",
                |_, s: &State| {
                    s.last_verdict
                        .as_ref()
                        .is_some_and(|v| v.1.starts_with("Duplicate") || v.1.starts_with("Stale"))
                },
            ),
        ]
    }
}

impl Narrate for OrdersModel {
    fn narrate(&self, before: &State, action: &Action, after: &State) -> String {
        let ev = |m: u8| {
            let e = &self.events[usize::from(m)];
            format!("e{} ({} seq {})", m + 1, e.kind(), e.seq.get())
        };
        let item = |s: &State| {
            s.item
                .as_ref()
                .map_or("no item".to_owned(), ToString::to_string)
        };
        let verdict = || match &after.last_verdict {
            None if matches!(action, Action::Apply { worker, .. }
                if matches!(after.workers[usize::from(*worker)], Worker::Recording { .. })
                    && !matches!(before.workers[usize::from(*worker)], Worker::Recording { .. })) =>
            {
                " -> Rejected: records the rejection before acknowledging".to_owned()
            }
            Some((m, v)) => format!(
                " -> {v}; {}",
                if after.msgs[usize::from(*m)].acked {
                    "message DELETED (acknowledged)"
                } else {
                    "message left to come back"
                }
            ),
            None => String::new(),
        };
        match action {
            Action::Receive { worker, msg } => format!(
                "SQS delivers {} to worker {worker} (receive #{})",
                ev(*msg),
                after.msgs[usize::from(*msg)].receives
            ),
            Action::Crash { worker } => format!("worker {worker} crashes"),
            Action::Apply { worker, fault } | Action::Record { worker, fault } => {
                let msg = match &before.workers[usize::from(*worker)] {
                    Worker::Applying { msg, .. } | Worker::Recording { msg, .. } => *msg,
                    Worker::Idle => 0,
                };
                let name = if matches!(action, Action::Apply { .. }) {
                    "UpdateItem apply"
                } else {
                    "UpdateItem record_rejection"
                };
                let what = match fault {
                    Fault::Throttled => "throttled, not applied".to_owned(),
                    _ if before.item != after.item => format!("applied: {}", item(after)),
                    _ => format!("REFUSED, ALL_OLD = {}", item(before)),
                };
                let lost = if *fault == Fault::AnswerLost {
                    " (answer LOST)"
                } else {
                    ""
                };
                format!(
                    "worker {worker} sends {name} for {}: {what}{lost}{}",
                    ev(msg),
                    verdict()
                )
            }
        }
    }

    fn summary(&self, s: &State) -> String {
        let item = s
            .item
            .as_ref()
            .map_or("no item".to_owned(), ToString::to_string);
        let expected = self
            .expected
            .as_ref()
            .map_or("no item".to_owned(), ToString::to_string);
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
        format!(
            "item {item} (in order: {expected}); {}; ghost {:?}",
            msgs.join(", "),
            s.ghost
        )
    }
}
