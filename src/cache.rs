//! The warm-container dedupe cache: a bounded map, kept across invocations of
//! a warm Lambda, of the last *committed* (seq, eventId, content hash) per
//! order.
//!
//! It is an optimisation, never the guarantee. It only ever answers
//! Duplicate or Stale, and it is filled only from what DynamoDB confirmed (a
//! write that committed, or the item a refused condition returned), so it can
//! only acknowledge an event that DynamoDB has already processed. Why that
//! is safe: an order's `last_event_seq` only grows (every write is
//! conditional on `last_event_seq = :seq - 1`), seqs are contiguous, so every
//! seq at or below a committed one was processed in its turn; and a
//! committed (seq, eventId, hash) is never replaced by different content
//! under the same seq. Anything the cache cannot prove
//! goes to DynamoDB, whose condition decides.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::domain::{OrderSnapshot, Outcome};
use crate::event::OrderEvent;

/// What DynamoDB confirmed as an order's latest applied event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub seq: u64,
    pub event_id: String,
    pub hash: String,
}

impl Committed {
    pub fn of_event(ev: &OrderEvent) -> Self {
        Committed {
            seq: ev.seq.get(),
            event_id: ev.event_id.to_string(),
            hash: ev.content_hash(),
        }
    }

    pub fn of_snapshot(s: &OrderSnapshot) -> Self {
        Committed {
            seq: s.last_event_seq,
            event_id: s.last_event_id.clone(),
            hash: s.event_hash.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, Committed>,
    /// Insertion order, for eviction. Bounded by `capacity` like the map.
    order: VecDeque<String>,
}

/// Bounded, thread-safe; capacity 0 disables it. The lock is never held
/// across an await: every method is a few map operations.
#[derive(Debug)]
pub struct DedupeCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl DedupeCache {
    pub fn new(capacity: usize) -> Self {
        DedupeCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the map inconsistent
        // in a way that matters (worst case: a missing entry), so a poisoned
        // lock is simply taken over.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Duplicate or Stale if the cache proves it; None means "ask DynamoDB".
    pub fn check(&self, ev: &OrderEvent) -> Option<Outcome> {
        if self.capacity == 0 {
            return None;
        }
        let inner = self.lock();
        let c = inner.map.get(ev.order_id.as_str())?;
        let seq = ev.seq.get();
        if seq < c.seq {
            Some(Outcome::Stale { last_seq: c.seq })
        } else if seq == c.seq && ev.event_id.as_str() == c.event_id && ev.content_hash() == c.hash
        {
            Some(Outcome::Duplicate)
        } else {
            // Same seq with other content is a conflict, a higher seq may
            // apply: both are DynamoDB's to decide.
            None
        }
    }

    /// Remember what DynamoDB confirmed for `order_id`. Keeps the highest
    /// seq, so a slower concurrent writer's older news cannot move it back.
    pub fn record(&self, order_id: &str, committed: Committed) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        match inner.map.get_mut(order_id) {
            Some(existing) => {
                if committed.seq > existing.seq {
                    *existing = committed;
                }
            }
            None => {
                inner.map.insert(order_id.to_owned(), committed);
                inner.order.push_back(order_id.to_owned());
                while inner.order.len() > self.capacity {
                    if let Some(old) = inner.order.pop_front() {
                        inner.map.remove(&old);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_body;

    fn ev(order: &str, seq: u64, id: &str) -> OrderEvent {
        let body = format!(
            r#"{{"eventId":"{id}","orderId":"{order}","seq":{seq},"type":"OrderCancelled","occurredAt":"2026-01-01T00:00:00Z","data":{{"reason":"r"}}}}"#
        );
        parse_body(Some(&body)).unwrap()
    }

    #[test]
    fn proves_only_duplicate_and_stale() {
        let cache = DedupeCache::new(10);
        let e3 = ev("o", 3, "e3");
        assert_eq!(cache.check(&e3), None, "empty cache proves nothing");
        cache.record("o", Committed::of_event(&e3));
        assert_eq!(cache.check(&e3), Some(Outcome::Duplicate));
        assert_eq!(
            cache.check(&ev("o", 2, "e2")),
            Some(Outcome::Stale { last_seq: 3 })
        );
        // Same seq, other event or content: not provable here.
        assert_eq!(cache.check(&ev("o", 3, "other")), None);
        // A later event may apply: DynamoDB decides.
        assert_eq!(cache.check(&ev("o", 4, "e4")), None);
        assert_eq!(cache.check(&ev("p", 1, "x")), None);
    }

    #[test]
    fn keeps_the_highest_committed_seq() {
        let cache = DedupeCache::new(10);
        cache.record("o", Committed::of_event(&ev("o", 5, "e5")));
        cache.record("o", Committed::of_event(&ev("o", 3, "e3")));
        assert_eq!(cache.check(&ev("o", 5, "e5")), Some(Outcome::Duplicate));
        assert_eq!(
            cache.check(&ev("o", 4, "e4")),
            Some(Outcome::Stale { last_seq: 5 })
        );
    }

    #[test]
    fn is_bounded_and_evicts_the_oldest() {
        let cache = DedupeCache::new(2);
        for o in ["a", "b", "c"] {
            cache.record(o, Committed::of_event(&ev(o, 1, "e")));
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.check(&ev("a", 1, "e")), None, "evicted");
        assert_eq!(cache.check(&ev("c", 1, "e")), Some(Outcome::Duplicate));
    }

    #[test]
    fn capacity_zero_disables_it() {
        let cache = DedupeCache::new(0);
        let e = ev("o", 1, "e");
        cache.record("o", Committed::of_event(&e));
        assert_eq!(cache.check(&e), None);
        assert!(cache.is_empty());
    }
}
