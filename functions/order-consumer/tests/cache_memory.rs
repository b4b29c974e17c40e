//! The dedupe cache's byte bound is only as good as its per-entry estimate.
//! This binary counts every heap byte the cache allocates (a global
//! allocator of its own, which is why it is a test target apart) and checks
//! that the estimate the bound is enforced with is never below what the
//! entries really take, for short and for 256-byte ids, right after the
//! map has grown (its emptiest, costliest moment per entry).
//!
//! It prints the measured bytes per entry, the figures docs/ quote.

// A global allocator is unsafe to implement; it only forwards to System.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use order_consumer::orders::cache::{Committed, DedupeCache};
use order_consumer::orders::event::{OrderEvent, parse_body};

/// What malloc adds to each allocation (its chunk header and alignment),
/// counted on top of the requested size.
const MALLOC_OVERHEAD: isize = 16;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize + MALLOC_OVERHEAD, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize + MALLOC_OVERHEAD, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn event(order: &str, seq: u64) -> OrderEvent {
    let body = format!(
        r#"{{"eventId":"evt-{seq}","orderId":"{order}","seq":{seq},"type":"OrderCancelled","occurredAt":"2026-01-01T00:00:00Z","data":{{"reason":"r"}}}}"#
    );
    parse_body(Some(&body)).expect("valid event")
}

/// Fill a cache with `n` orders of `seqs` events each; return (measured,
/// estimated) bytes per entry.
fn measure(n: usize, id: impl Fn(usize) -> String, seqs: u64) -> (f64, f64) {
    // Built before counting: the events and their hashes are the caller's,
    // not the cache's.
    let mut learned: Vec<(String, Vec<Committed>)> = (0..n)
        .map(|i| {
            let order = id(i);
            let commits = (1..=seqs)
                .map(|s| Committed::of_event(&event(&order, s)))
                .collect();
            (order, commits)
        })
        .collect();
    let cache = DedupeCache::new(usize::MAX, usize::MAX);
    let before = LIVE.load(Ordering::Relaxed);
    let mut passed_in = 0isize;
    // By reference: the ids must outlive the measurement (dropping them
    // would subtract bytes that are not the cache's).
    for (order, commits) in &mut learned {
        for c in std::mem::take(commits) {
            // The cache takes ownership of what `record` is given: count it
            // as the cache's (it was allocated before `before`).
            passed_in += c
                .hashes
                .iter()
                .map(|(_, h)| h.len() as isize + MALLOC_OVERHEAD)
                .sum::<isize>()
                + (c.hashes.capacity() * std::mem::size_of::<(u64, Box<str>)>()) as isize
                + MALLOC_OVERHEAD;
            cache.record(order, c);
        }
    }
    let measured = (LIVE.load(Ordering::Relaxed) - before + passed_in) as f64 / n as f64;
    let estimated = cache.bytes() as f64 / n as f64;
    assert_eq!(cache.len(), n);
    (measured, estimated)
}

#[test]
fn the_byte_estimate_is_never_below_the_real_footprint() {
    let short = |i: usize| format!("ord-{i:06}");
    let long = |i: usize| format!("{i:0>256}");
    // 1,000 entries, and 14,337: one past the map's growth from 16,384
    // slots (7/8 full) to 32,768, its worst bytes per entry.
    for n in [1_000, 14_337] {
        for (name, id, seqs) in [
            ("short ids, 1 event", &short as &dyn Fn(usize) -> String, 1),
            ("short ids, 8 events", &short, 8),
            ("256-byte ids, 1 event", &long, 1),
            ("256-byte ids, 8 events", &long, 8),
        ] {
            let (measured, estimated) = measure(n, id, seqs);
            println!(
                "{n} entries, {name}: measured {measured:.0} B/entry, estimated {estimated:.0} B/entry"
            );
            assert!(
                estimated >= measured,
                "{n} entries, {name}: the estimate ({estimated:.0} B) is below the real footprint ({measured:.0} B)"
            );
        }
    }
}
