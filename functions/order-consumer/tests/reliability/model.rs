//! The workload (orders, their valid event streams, duplicate deliveries) and
//! the oracle: what the table must hold once the queue has drained.
//!
//! The property, per order: each of its events applied exactly once, in seq
//! order. So `history` (the list of applied eventIds) equals the order's
//! eventIds in seq order, `last_event_seq` is its last seq and `status` the
//! status its last event leads to.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::db::{Db, Item};
use crate::sqs::{Audit, Queue, Settled};
use order_consumer::orders::domain::{MAX_REJECTED_EVENTS, Requires};
use order_consumer::orders::event::EventKind;
use order_consumer::testing::rng::Rng;

/// The valid event streams an order can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::VariantArray)]
pub enum Lifecycle {
    /// Placed → Paid → Shipped → Delivered.
    Delivered,
    /// Still in progress: Placed; Placed → Paid; Placed → Paid → Shipped.
    Placed,
    Paid,
    Shipped,
    /// Placed → Cancelled.
    CancelledUnpaid,
    /// Placed → Paid → Cancelled. The one stream in which a later event is
    /// legal before an earlier one (PLACED may be cancelled): BUG-1, found by
    /// this suite, lost the payment when the cancellation overtook it.
    CancelledAfterPayment,
}

impl Lifecycle {
    /// Every lifecycle, derived from the enum: a new one cannot be left out
    /// of the properties that draw from this list.
    pub const ALL: &'static [Lifecycle] = <Lifecycle as strum::VariantArray>::VARIANTS;

    /// Event types that can never apply once the lifecycle is over: every
    /// one on a finished order, the ones its last status does not allow
    /// otherwise (derived from the transition table). A rejection changes
    /// nothing but the seq, so any sequence of them is rejected, each in
    /// its turn.
    pub fn illegal_after(self) -> Vec<&'static str> {
        let last = self.kinds().last().map(|k| kind_of(k).target());
        EventKind::ALL
            .iter()
            .filter(|k| match k.requires() {
                Requires::Absent => true,
                Requires::StatusIn(from) => !last.is_some_and(|st| from.contains(&st)),
            })
            .map(|k| k.as_str())
            .collect()
    }

    pub fn kinds(self) -> &'static [&'static str] {
        match self {
            Lifecycle::Delivered => &["OrderPlaced", "OrderPaid", "OrderShipped", "OrderDelivered"],
            Lifecycle::Placed => &["OrderPlaced"],
            Lifecycle::Paid => &["OrderPlaced", "OrderPaid"],
            Lifecycle::Shipped => &["OrderPlaced", "OrderPaid", "OrderShipped"],
            Lifecycle::CancelledUnpaid => &["OrderPlaced", "OrderCancelled"],
            Lifecycle::CancelledAfterPayment => &["OrderPlaced", "OrderPaid", "OrderCancelled"],
        }
    }
}

pub fn target_status(kind: &str) -> &'static str {
    kind_of(kind).target().as_str()
}

/// The library's kind for a wire name (every model event has one).
fn kind_of(kind: &str) -> EventKind {
    EventKind::ALL
        .iter()
        .copied()
        .find(|k| k.as_str() == kind)
        .unwrap_or_else(|| panic!("unknown kind {kind}"))
}

#[derive(Debug, Clone)]
pub struct Event {
    pub order_id: String,
    pub event_id: String,
    pub seq: u64,
    pub kind: &'static str,
    /// The exact body: every copy of this event carries these bytes.
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct Order {
    pub order_id: String,
    pub events: Vec<Event>,
    /// Events after the order's last one that can never apply (producer
    /// bugs): a replacement OrderPlaced the producer sent again with a new
    /// eventId (events/07's `evt-1001-replaced`), an OrderPaid after the
    /// cancellation. They arrive in any order, with copies; each must wait
    /// for its turn (never found the order, never be forgotten at a gap),
    /// and in its turn be rejected and spend its seq.
    pub extras: Vec<Event>,
}

/// An event body as a producer sends it.
pub fn body(order_id: &str, event_id: &str, seq: u64, kind: &str, amount: u64) -> String {
    let data = match kind {
        "OrderPlaced" => {
            json!({"customerId": format!("cust-{order_id}"), "amount": amount, "currency": "INR"})
        }
        "OrderPaid" => {
            json!({"paymentId": format!("pay-{event_id}"), "amount": amount, "currency": "INR"})
        }
        "OrderShipped" => json!({"carrier": "BlueDart", "trackingId": format!("BD-{event_id}")}),
        "OrderCancelled" => json!({"reason": "customer request"}),
        "OrderDelivered" => json!({}),
        other => panic!("model::body has no data for {other}: add it (docs/adapting.md)"),
    };
    json!({"eventId": event_id, "orderId": order_id, "seq": seq, "type": kind,
           "occurredAt": "2026-11-29T10:15:00Z", "data": data})
    .to_string()
}

impl Order {
    /// Seqs are contiguous from `seq_start` (the contract: an order's
    /// OrderPlaced is its seq 1, each later event's seq its predecessor's
    /// plus one). A `seq_start` above 1 is for tests that seed the item as
    /// if the earlier seqs had been processed ([`Order::seed_item`]).
    pub fn new(order_id: String, lifecycle: Lifecycle, seq_start: u64) -> Order {
        let amount = 100 + (order_id.len() as u64 * 7919) % 100_000;
        let events = lifecycle
            .kinds()
            .iter()
            .enumerate()
            .map(|(i, &kind)| {
                let seq = seq_start + i as u64;
                let event_id = format!("evt-{order_id}-{seq}");
                Event {
                    body: body(&order_id, &event_id, seq, kind, amount),
                    order_id: order_id.clone(),
                    event_id,
                    seq,
                    kind,
                }
            })
            .collect();
        Order {
            order_id,
            events,
            extras: Vec::new(),
        }
    }

    /// The same order, with events of `kinds` after its last event (each
    /// illegal there: see [`Lifecycle::illegal_after`]).
    pub fn with_extras(mut self, kinds: &[&'static str]) -> Order {
        for &kind in kinds {
            let seq = self.sent().last().map_or(1, |e| e.seq) + 1;
            let event_id = format!("evt-{}-x{seq}", self.order_id);
            self.extras.push(Event {
                body: body(&self.order_id, &event_id, seq, kind, 1),
                order_id: self.order_id.clone(),
                event_id,
                seq,
                kind,
            });
        }
        self
    }

    /// Every event the producer sends for this order.
    pub fn sent(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().chain(&self.extras)
    }

    /// The table must end with every event applied in seq order and the
    /// extras (if any) rejected, each in its turn: their seqs spent, nothing
    /// else changed. The same item for every delivery order and every number
    /// of copies.
    pub fn expected(&self) -> Item {
        let last = self.events.last().unwrap();
        let processed_last = self.extras.last().unwrap_or(last);
        Item {
            status: target_status(last.kind).to_owned(),
            last_event_seq: processed_last.seq.to_string(),
            last_event_id: processed_last.event_id.clone(),
            history: self.events.iter().map(|e| e.event_id.clone()).collect(),
            // The latest ones: an order keeps a bounded window of them.
            rejected: self.extras[self.extras.len().saturating_sub(MAX_REJECTED_EVENTS)..]
                .iter()
                .map(|e| e.event_id.clone())
                .collect(),
        }
    }
}

/// A set of orders and the index the audits need.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    pub orders: Vec<Order>,
}

impl Workload {
    /// `n` orders named `{prefix}-{i}`, lifecycles drawn from `mix`.
    pub fn random(prefix: &str, n: usize, mix: &[Lifecycle], rng: &mut Rng) -> Workload {
        let orders = (0..n)
            .map(|i| {
                let lc = mix[rng.below(mix.len())];
                Order::new(format!("{prefix}-{i}"), lc, 1)
            })
            .collect();
        Workload { orders }
    }

    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.orders.iter().flat_map(|o| o.sent())
    }

    /// Send every event once, in a shuffled order, plus duplicates: with
    /// probability `dup_rate` an event gets a second copy, half of them with
    /// the same SQS messageId (redelivery), half with a new one (the
    /// producer re-published it). Returns the number of messages sent.
    pub fn send_all(&self, queue: &Queue, dup_rate: f64, rng: &mut Rng) -> usize {
        let mut sends: Vec<(&Event, bool)> = Vec::new();
        for e in self.events() {
            sends.push((e, false));
            if rng.chance(dup_rate) {
                sends.push((e, true));
            }
        }
        rng.shuffle(&mut sends);
        let mut ids: HashMap<&str, String> = HashMap::new();
        let mut n = 0;
        // Originals first get their messageIds, so a same-id copy can reuse one.
        let mut copies = Vec::new();
        for (e, is_copy) in sends {
            if is_copy {
                copies.push(e);
                continue;
            }
            ids.insert(e.event_id.as_str(), queue.send(e.body.clone(), None));
            n += 1;
        }
        for e in copies {
            let same_id = rng.chance(0.5);
            queue.send(
                e.body.clone(),
                same_id.then(|| ids[e.event_id.as_str()].clone()),
            );
            n += 1;
        }
        n
    }

    /// Compare the table with the oracle. Returns every violation found.
    pub fn violations(&self, table: &HashMap<String, Item>) -> Vec<String> {
        let mut v = Vec::new();
        let known: HashSet<&str> = self.orders.iter().map(|o| o.order_id.as_str()).collect();
        for o in &self.orders {
            let exp = o.expected();
            let Some(got) = table.get(&o.order_id) else {
                v.push(format!("{}: missing from the table (lost)", o.order_id));
                continue;
            };
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for h in &got.history {
                *counts.entry(h.as_str()).or_default() += 1;
            }
            for (id, c) in &counts {
                if *c > 1 {
                    v.push(format!(
                        "{}: {id} applied {c} times (history {:?})",
                        o.order_id, got.history
                    ));
                }
            }
            if got.rejected != exp.rejected {
                v.push(format!(
                    "{}: rejected events {:?}, expected {:?}",
                    o.order_id, got.rejected, exp.rejected
                ));
            }
            for id in counts.keys() {
                if !o.events.iter().any(|e| e.event_id == *id) {
                    v.push(format!(
                        "{}: unknown event {id} in history {:?}",
                        o.order_id, got.history
                    ));
                }
            }
            for e in &o.events {
                if !counts.contains_key(e.event_id.as_str()) {
                    v.push(format!(
                        "{}: {} ({} seq {}) never applied (history {:?})",
                        o.order_id, e.event_id, e.kind, e.seq, got.history
                    ));
                }
            }
            if got.history != exp.history
                && counts.values().all(|c| *c == 1)
                && counts.len() == exp.history.len()
            {
                v.push(format!(
                    "{}: applied out of seq order: {:?}, expected {:?}",
                    o.order_id, got.history, exp.history
                ));
            }
            if got.status != exp.status
                || got.last_event_seq != exp.last_event_seq
                || got.last_event_id != exp.last_event_id
            {
                v.push(format!(
                    "{}: final state {}/seq {}/{}, expected {}/seq {}/{}",
                    o.order_id,
                    got.status,
                    got.last_event_seq,
                    got.last_event_id,
                    exp.status,
                    exp.last_event_seq,
                    exp.last_event_id
                ));
            }
        }
        // Items of this workload's prefixes that it never produced.
        let prefixes: HashSet<&str> = self
            .orders
            .iter()
            .filter_map(|o| o.order_id.rsplit_once('-').map(|(p, _)| p))
            .collect();
        for id in table.keys() {
            let ours = id
                .rsplit_once('-')
                .is_some_and(|(p, _)| prefixes.contains(p));
            if ours && !known.contains(id.as_str()) {
                v.push(format!("{id}: unexpected item"));
            }
        }
        v
    }

    /// Assert the table matches the oracle, showing the first violations.
    pub async fn assert_converged(&self, db: &Db) {
        let table = db.scan().await;
        let v = self.violations(&table);
        assert!(
            v.is_empty(),
            "{} violation(s) of 'each event applied once, in seq order':\n  {}",
            v.len(),
            v.iter().take(25).cloned().collect::<Vec<_>>().join("\n  ")
        );
    }
}

/// The ack-time audit: every message the ESM deletes must have its effect
/// committed *at that moment*, i.e. its eventId must already be in its
/// order's history, or (an extra event) in its rejected events
/// (for the streams used here, Duplicate and Stale both mean "this very
/// event is already processed"). Violations are collected, not panicked
/// on, so the test can report all of them.
pub fn ack_audit(db: &Arc<Db>) -> (Audit, Arc<Mutex<Vec<String>>>) {
    let violations: Arc<Mutex<Vec<String>>> = Default::default();
    let (db, out) = (db.clone(), violations.clone());
    let audit: Audit = Arc::new(move |settled: Settled| {
        let (db, out) = (db.clone(), out.clone());
        let fut: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            for (message_id, body) in settled.deleted {
                let Ok(v) = serde_json::from_str::<Value>(&body) else {
                    out.lock()
                        .unwrap()
                        .push(format!("{message_id}: deleted, but its body is not JSON"));
                    continue;
                };
                let (Some(order), Some(event)) = (
                    v.get("orderId").and_then(Value::as_str),
                    v.get("eventId").and_then(Value::as_str),
                ) else {
                    out.lock().unwrap().push(format!(
                        "{message_id}: deleted, but its body is not an event"
                    ));
                    continue;
                };
                let item = db.item(order).await;
                let history = item.as_ref().map(|i| i.history.clone()).unwrap_or_default();
                let rejected = item.map(|i| i.rejected).unwrap_or_default();
                if !history.iter().chain(&rejected).any(|h| h == event) {
                    out.lock().unwrap().push(format!(
                        "{message_id} ({event} of {order}) was acknowledged but is not committed: history {history:?}"
                    ));
                }
            }
        });
        fut
    });
    (audit, violations)
}

pub fn assert_no_violations(what: &str, v: &Mutex<Vec<String>>) {
    let v = v.lock().unwrap();
    assert!(
        v.is_empty(),
        "{} {what} violation(s):\n  {}",
        v.len(),
        v.iter().take(25).cloned().collect::<Vec<_>>().join("\n  ")
    );
}
