//! The warm-container dedupe cache: a bounded map, kept across invocations of
//! a warm Lambda, of what DynamoDB confirmed per order: its highest processed
//! seq and the content hashes of its latest processed seqs.
//!
//! It is an optimisation, never the guarantee. It only ever answers
//! Duplicate or Stale, and only for an event whose exact content (eventId
//! included) it has seen DynamoDB confirm under that seq: a write that
//! committed, or the item a refused condition returned. So it can only
//! acknowledge an event that DynamoDB has already processed. Why that is
//! safe: an order's `last_event_seq` only grows (every write is conditional
//! on `last_event_seq = :seq - 1`), seqs are contiguous, so every seq at or
//! below a committed one was processed in its turn; and a processed
//! (seq, hash) is never replaced by different content under the same seq.
//! Anything the cache cannot prove (a seq it holds no hash for, other
//! content under a known seq, a later seq) goes to DynamoDB, whose
//! condition decides, and whose stored hashes report a changed payload as
//! a Conflict.
//!
//! # Memory
//!
//! Bounded twice: by entries (`DEDUPE_CACHE_SIZE`) and by bytes
//! (`DEDUPE_CACHE_MAX_BYTES`, by default an eighth of the function's
//! memory). Each entry's cost is estimated from its real parts (the order
//! id's length, the hashes kept) plus the map's own overhead; the estimate
//! is checked against a counting allocator in `tests/cache_memory.rs`, so
//! long ids cannot make the real footprint outgrow the bound.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::domain::{OrderSnapshot, Outcome};
use crate::event::OrderEvent;

/// How many of an order's latest processed seqs an entry keeps hashes for.
/// An order has a handful of events; older seqs are DynamoDB's to answer.
pub const MAX_SEQS_PER_ENTRY: usize = 8;

/// Bytes an entry costs beyond its order id and its hashes: the map's slot
/// (key, value, control byte) at its emptiest load factor, the eviction
/// queue's slot, the shared key's allocation and the hash list's buffer,
/// each with malloc's own overhead. Measured by `tests/cache_memory.rs`
/// (a counting allocator): 218 bytes for a 10-byte id and one event, 458
/// for a 256-byte id; rounded up.
pub const ENTRY_OVERHEAD_BYTES: usize = 192;
/// Bytes one more kept (seq, hash) costs: its slot in the list (with the
/// list's spare capacity) and the 32-character hash's own allocation
/// (measured: 40).
pub const HASH_BYTES: usize = 48;

/// What DynamoDB confirmed about one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The highest processed seq.
    pub seq: u64,
    /// (seq, content hash) of processed events, latest last, at most
    /// [`MAX_SEQS_PER_ENTRY`].
    pub hashes: Vec<(u64, Box<str>)>,
}

impl Committed {
    /// A write of `ev` committed.
    pub fn of_event(ev: &OrderEvent) -> Self {
        Committed {
            seq: ev.seq.get(),
            hashes: vec![(ev.seq.get(), ev.content_hash().into())],
        }
    }

    /// A refused write returned this item.
    pub fn of_snapshot(s: &OrderSnapshot) -> Self {
        let mut hashes: Vec<(u64, Box<str>)> = s
            .processed()
            .map(|(seq, hash)| (seq, hash.into()))
            .collect();
        if !hashes.iter().any(|(seq, _)| *seq == s.last_event_seq) {
            hashes.push((s.last_event_seq, s.event_hash.as_str().into()));
        }
        let mut c = Committed {
            seq: s.last_event_seq,
            hashes,
        };
        c.trim();
        c
    }

    fn hash_of(&self, seq: u64) -> Option<&str> {
        self.hashes
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, h)| &**h)
    }

    /// Learn `other` too: the highest seq, and every hash either knows.
    fn merge(&mut self, other: Committed) {
        self.seq = self.seq.max(other.seq);
        for (seq, hash) in other.hashes {
            if self.hash_of(seq).is_none() {
                self.hashes.push((seq, hash));
            }
        }
        self.trim();
    }

    /// Keep the latest [`MAX_SEQS_PER_ENTRY`] seqs, in seq order.
    fn trim(&mut self) {
        self.hashes.sort_unstable_by_key(|(seq, _)| *seq);
        let extra = self.hashes.len().saturating_sub(MAX_SEQS_PER_ENTRY);
        self.hashes.drain(..extra);
    }

    /// The estimated bytes of this entry under `order_id`.
    fn bytes(&self, order_id: &str) -> usize {
        ENTRY_OVERHEAD_BYTES + order_id.len() + self.hashes.len() * HASH_BYTES
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// The key is shared with `order` (one allocation per order id).
    map: HashMap<Arc<str>, Committed>,
    /// Insertion order, for eviction.
    order: VecDeque<Arc<str>>,
    /// The estimated bytes of every entry.
    bytes: usize,
}

/// Bounded, thread-safe; capacity 0 disables it. The lock is never held
/// across an await: every method is a few map operations.
#[derive(Debug)]
pub struct DedupeCache {
    capacity: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

impl DedupeCache {
    /// At most `capacity` orders and about `max_bytes` bytes.
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        DedupeCache {
            capacity,
            max_bytes,
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

    /// The estimated bytes held (at most the byte bound).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
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
        // A later seq may apply; a seq without a kept hash, or with another
        // hash (a conflict), is DynamoDB's to decide and report.
        if seq > c.seq || c.hash_of(seq)? != ev.content_hash() {
            return None;
        }
        Some(if seq == c.seq {
            Outcome::Duplicate
        } else {
            Outcome::Stale { last_seq: c.seq }
        })
    }

    /// Remember what DynamoDB confirmed for `order_id`. Keeps the highest
    /// seq, so a slower concurrent writer's older news cannot move it back.
    pub fn record(&self, order_id: &str, committed: Committed) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        let inner = &mut *inner;
        match inner.map.get_mut(order_id) {
            Some(existing) => {
                let before = existing.bytes(order_id);
                existing.merge(committed);
                inner.bytes = inner.bytes - before + existing.bytes(order_id);
            }
            None => {
                let key: Arc<str> = order_id.into();
                inner.bytes += committed.bytes(order_id);
                inner.map.insert(key.clone(), committed);
                inner.order.push_back(key);
            }
        }
        // Evict the oldest until both bounds hold (the newest entry stays
        // even if it alone is over the byte bound: it is small).
        while inner.order.len() > 1
            && (inner.order.len() > self.capacity || inner.bytes > self.max_bytes)
        {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(c) = inner.map.remove(&old) {
                inner.bytes -= c.bytes(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_body;

    const BIG: usize = usize::MAX;

    fn ev(order: &str, seq: u64, id: &str) -> OrderEvent {
        let body = format!(
            r#"{{"eventId":"{id}","orderId":"{order}","seq":{seq},"type":"OrderCancelled","occurredAt":"2026-01-01T00:00:00Z","data":{{"reason":"r"}}}}"#
        );
        parse_body(Some(&body)).unwrap()
    }

    fn learn(cache: &DedupeCache, evs: &[&OrderEvent]) {
        for e in evs {
            cache.record(e.order_id.as_str(), Committed::of_event(e));
        }
    }

    #[test]
    fn proves_only_duplicate_and_stale_of_the_same_content() {
        let cache = DedupeCache::new(10, BIG);
        let (e2, e3) = (ev("o", 2, "e2"), ev("o", 3, "e3"));
        assert_eq!(cache.check(&e3), None, "empty cache proves nothing");
        learn(&cache, &[&e2, &e3]);
        assert_eq!(cache.check(&e3), Some(Outcome::Duplicate));
        assert_eq!(cache.check(&e2), Some(Outcome::Stale { last_seq: 3 }));
        // An older seq with other content or another eventId: a conflict,
        // which only DynamoDB's stored hashes may report.
        assert_eq!(cache.check(&ev("o", 2, "other")), None);
        assert_eq!(cache.check(&ev("o", 3, "other")), None);
        // A seq it holds no hash for: not provable here.
        assert_eq!(cache.check(&ev("o", 1, "e1")), None);
        // A later event may apply: DynamoDB decides.
        assert_eq!(cache.check(&ev("o", 4, "e4")), None);
        assert_eq!(cache.check(&ev("p", 1, "x")), None);
    }

    #[test]
    fn keeps_the_highest_committed_seq() {
        let cache = DedupeCache::new(10, BIG);
        let (e5, e3) = (ev("o", 5, "e5"), ev("o", 3, "e3"));
        learn(&cache, &[&e5, &e3]);
        assert_eq!(cache.check(&e5), Some(Outcome::Duplicate));
        assert_eq!(cache.check(&e3), Some(Outcome::Stale { last_seq: 5 }));
    }

    #[test]
    fn keeps_hashes_for_the_latest_seqs_only() {
        let cache = DedupeCache::new(10, BIG);
        let evs: Vec<OrderEvent> = (1..=12).map(|s| ev("o", s, &format!("e{s}"))).collect();
        learn(&cache, &evs.iter().collect::<Vec<_>>());
        let first_kept = 12 - MAX_SEQS_PER_ENTRY as u64 + 1;
        for e in &evs {
            let seq = e.seq.get();
            let expected = match seq {
                12 => Some(Outcome::Duplicate),
                s if s >= first_kept => Some(Outcome::Stale { last_seq: 12 }),
                _ => None,
            };
            assert_eq!(cache.check(e), expected, "seq {seq}");
        }
    }

    #[test]
    fn is_bounded_by_entries_and_evicts_the_oldest() {
        let cache = DedupeCache::new(2, BIG);
        for o in ["a", "b", "c"] {
            learn(&cache, &[&ev(o, 1, "e")]);
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.check(&ev("a", 1, "e")), None, "evicted");
        assert_eq!(cache.check(&ev("c", 1, "e")), Some(Outcome::Duplicate));
    }

    #[test]
    fn is_bounded_by_bytes_whatever_the_id_length() {
        let long = |i: usize| format!("{i:0>256}");
        let one = Committed::of_event(&ev(&long(0), 1, "e")).bytes(&long(0));
        let cache = DedupeCache::new(1_000_000, 10 * one);
        for i in 0..100 {
            learn(&cache, &[&ev(&long(i), 1, "e")]);
            assert!(cache.bytes() <= 10 * one, "{} bytes", cache.bytes());
        }
        assert_eq!(cache.len(), 10);
        assert_eq!(
            cache.check(&ev(&long(99), 1, "e")),
            Some(Outcome::Duplicate)
        );
        assert_eq!(cache.check(&ev(&long(0), 1, "e")), None, "evicted");
        // Growing an entry counts too.
        let cache = DedupeCache::new(10, BIG);
        learn(&cache, &[&ev("o", 1, "e1")]);
        let before = cache.bytes();
        learn(&cache, &[&ev("o", 2, "e2")]);
        assert_eq!(cache.bytes(), before + HASH_BYTES);
    }

    #[test]
    fn capacity_zero_disables_it() {
        let cache = DedupeCache::new(0, BIG);
        let e = ev("o", 1, "e");
        learn(&cache, &[&e]);
        assert_eq!(cache.check(&e), None);
        assert!(cache.is_empty());
    }
}
