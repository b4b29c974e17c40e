//! The in-memory cache of completed records: a repeat in the same process
//! (a warm Lambda environment) is answered without a request. Bounded by
//! bytes, not entries: an output can be anything from a few bytes to
//! DynamoDB's 400 KB item, and what a Lambda's memory can spare is a size.
//! Least recently used goes first. Only completed records are cached
//! (they never change until they expire); an in-progress one is always
//! asked of DynamoDB.

use std::collections::{BTreeMap, HashMap};

use super::Stored;

/// What one entry is charged beyond its text: the map slots, the order
/// index and the strings' headers, roughly.
const OVERHEAD: usize = 128;

struct Entry {
    fingerprint: String,
    stored: Stored,
    /// Its position in `order`.
    tick: u64,
    bytes: usize,
}

/// A byte-bounded LRU of completed records, keyed by the item key.
#[derive(Default)]
pub(super) struct Cache {
    limit: usize,
    used: usize,
    tick: u64,
    entries: HashMap<String, Entry>,
    /// tick -> key: the oldest use first.
    order: BTreeMap<u64, String>,
}

/// Its size only: the entries are user data (outputs, keys).
impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("limit", &self.limit)
            .field("used", &self.used)
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl Cache {
    /// A cache holding at most `limit` bytes (0: holds nothing).
    pub(super) fn new(limit: usize) -> Self {
        Cache {
            limit,
            ..Cache::default()
        }
    }

    /// The bytes held now.
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used
    }

    /// The record completed under `key`, with its fingerprint, unless it
    /// expired at `now_ms` (then it is dropped).
    pub(super) fn get(&mut self, key: &str, now_ms: u64) -> Option<(String, Stored)> {
        let expired = super::is_expired(self.entries.get(key)?.stored.expires_at, now_ms);
        if expired {
            self.remove(key);
            return None;
        }
        self.tick += 1;
        let tick = self.tick;
        let entry = self.entries.get_mut(key)?;
        self.order.remove(&entry.tick);
        entry.tick = tick;
        self.order.insert(tick, key.to_owned());
        Some((entry.fingerprint.clone(), entry.stored.clone()))
    }

    /// Remember `key` completed with `stored`; the least recently used
    /// entries go until it fits. One larger than the whole cache is not
    /// kept.
    pub(super) fn put(&mut self, key: &str, fingerprint: &str, stored: &Stored) {
        let bytes = key
            .len()
            .saturating_add(fingerprint.len())
            .saturating_add(stored.output.len())
            .saturating_add(OVERHEAD);
        self.remove(key);
        if bytes > self.limit {
            return;
        }
        while self.used.saturating_add(bytes) > self.limit {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.used -= e.bytes;
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.to_owned());
        self.entries.insert(
            key.to_owned(),
            Entry {
                fingerprint: fingerprint.to_owned(),
                stored: stored.clone(),
                tick: self.tick,
                bytes,
            },
        );
        self.used += bytes;
    }

    /// Forget `key`.
    pub(super) fn remove(&mut self, key: &str) {
        if let Some(e) = self.entries.remove(key) {
            self.order.remove(&e.tick);
            self.used -= e.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(output: &str, expires_at: u64) -> Stored {
        Stored {
            output: output.into(),
            expires_at,
        }
    }

    #[test]
    fn the_cache_stays_within_its_bytes_and_drops_the_least_recently_used() {
        let one = 1 + 1 + 10 + OVERHEAD;
        let mut c = Cache::new(3 * one);
        for k in ["a", "b", "c"] {
            c.put(k, "f", &stored("0123456789", 10));
        }
        assert_eq!(c.used(), 3 * one);
        // "a" used again: "b" is now the oldest, and goes for "d".
        assert!(c.get("a", 0).is_some());
        c.put("d", "f", &stored("0123456789", 10));
        assert!(c.used() <= 3 * one);
        assert!(c.get("b", 0).is_none());
        for k in ["a", "c", "d"] {
            assert_eq!(
                c.get(k, 0).map(|(f, s)| (f, s.output)),
                Some(("f".into(), "0123456789".into())),
                "{k}"
            );
        }
        // Larger than the whole cache: not kept, nothing else evicted.
        c.put("e", "f", &stored(&"x".repeat(4 * one), 10));
        assert!(c.get("e", 0).is_none() && c.get("a", 0).is_some());
        // Expired at the stored time: dropped on the read.
        assert!(c.get("a", 10_000).is_none());
        assert_eq!(c.used(), 2 * one);
        // Off.
        let mut off = Cache::new(0);
        off.put("a", "f", &stored("x", 10));
        assert!(off.get("a", 0).is_none());
        assert_eq!(off.used(), 0);
    }
}
