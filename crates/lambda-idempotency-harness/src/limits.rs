//! What a batch cannot beat under network latency (`make bench`, section
//! `latency`): every DynamoDB request waits one round trip, an order's
//! messages are written one after another (each write's condition is the
//! previous one's result), and at most `concurrency` requests are in
//! flight. The benchmark divides a batch's size by this many round trips
//! times the latency to state the highest rate any consumer could reach,
//! and how close each one stays to it.

use std::collections::HashMap;

/// The fewest sequential round trips a batch needs: the longest per-order
/// chain of writes (`writes_per_message` for each of an order's messages),
/// or all of the batch's writes spread over `concurrency` slots, whichever
/// is longer. A lower bound: a scheduler can only reach it, not beat it.
/// `concurrency` 0 counts as 1; an empty batch needs none.
pub fn critical_path_round_trips<'a>(
    order_of_each_message: impl IntoIterator<Item = &'a str>,
    writes_per_message: usize,
    concurrency: usize,
) -> usize {
    let mut chains: HashMap<&str, usize> = HashMap::new();
    let mut messages = 0usize;
    for order in order_of_each_message {
        *chains.entry(order).or_default() += 1;
        messages += 1;
    }
    let longest_chain = chains.values().copied().max().unwrap_or(0) * writes_per_message;
    let spread = (messages * writes_per_message).div_ceil(concurrency.max(1));
    longest_chain.max(spread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_order_chain_bounds_a_batch_with_enough_slots() {
        // Orders a (3 messages), b (2), c (1): six writes, a's three in a row.
        let batch = ["a", "b", "a", "c", "b", "a"];
        assert_eq!(critical_path_round_trips(batch, 1, 64), 3);
        // Three writes per message (Powertools: claim, write, complete).
        assert_eq!(critical_path_round_trips(batch, 3, 64), 9);
    }

    #[test]
    fn too_few_slots_spread_the_batch_over_more_round_trips() {
        let batch = ["a", "b", "a", "c", "b", "a"];
        assert_eq!(critical_path_round_trips(batch, 1, 2), 3);
        assert_eq!(critical_path_round_trips(batch, 1, 1), 6);
        // One slot, three writes each: every write in a row.
        assert_eq!(critical_path_round_trips(batch, 3, 1), 18);
        // Six writes over four slots: two rounds, below the chain of three.
        assert_eq!(critical_path_round_trips(batch, 1, 4), 3);
        // 100 single-message orders over 8 slots: 13 rounds (ceil).
        let singles: Vec<String> = (0..100).map(|i| format!("o{i}")).collect();
        assert_eq!(
            critical_path_round_trips(singles.iter().map(String::as_str), 1, 8),
            13
        );
    }

    #[test]
    fn edge_cases_need_no_round_trip_or_count_one_slot() {
        assert_eq!(critical_path_round_trips([], 1, 8), 0);
        assert_eq!(critical_path_round_trips(["a", "b"], 1, 0), 2);
    }
}
