//! Sums by key in bounded, mostly sequential memory: what the first pass counts references
//! and correlation groups with.

/// Values that add up: what a [`Tally`] keeps per key.
pub(super) trait Add: Copy {
    fn add(&mut self, other: Self);
}

/// Sums by key, kept as a log of additions that is sorted and summed up whenever it has
/// doubled since the last time (and once at the end). An addition is a push where a map
/// would look its key up (a tree's nodes, or a hash table at random, far from the last one
/// touched), and memory stays within twice the keys (plus a fixed allowance).
pub(super) struct Tally<K, V> {
    log: Vec<(K, V)>,
    /// Entries after the last summing up.
    summed: usize,
}

impl<K, V> Default for Tally<K, V> {
    fn default() -> Self {
        Tally { log: Vec::new(), summed: 0 }
    }
}

impl<K: Ord + Copy, V: Add> Tally<K, V> {
    /// Entries the log may hold before it is first summed up.
    const ALLOWANCE: usize = 1 << 16;

    pub(super) fn add(&mut self, key: K, value: V) {
        self.log.push((key, value));
        if self.log.len() >= (2 * self.summed).max(Self::ALLOWANCE) {
            self.sum();
        }
    }

    fn sum(&mut self) {
        // Stable, and quick on runs: each thread adds its keys mostly in ascending order.
        self.log.sort_by_key(|&(k, _)| k);
        self.log.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1.add(later.1);
            }
            same
        });
        self.summed = self.log.len();
    }

    /// Each key once, with its sum, in key order.
    pub(super) fn into_sorted(mut self) -> Vec<(K, V)> {
        self.sum();
        self.log
    }
}
