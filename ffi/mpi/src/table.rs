//! A fixed-size, lock-free hash table of `u64` keys and a few `u64` words per slot, with an
//! overflow map behind a lock for what does not fit.
//!
//! The MPI wrappers look up communicators and requests and bump message counters on every call,
//! from any thread (`MPI_THREAD_MULTIPLE`): a lock there would be taken on every call, contended
//! when threads communicate at once. Here a lookup is a linear probe of atomic loads, an insert
//! one compare-and-swap of the key, a removal one store of a tombstone. The slots are a static
//! array (zeroed memory, paged in as used), so nothing allocates on that path.
//!
//! What the table promises and what it leaves to its users:
//! - a key is claimed by exactly one slot at a time, even when threads insert it at once (the
//!   compare-and-swap decides, the loser probes again and finds it);
//! - a slot's words are plain atomics: a reader on another thread sees what was written before
//!   the handle it looks up reached that thread (MPI hands a request or communicator to another
//!   thread only through the user's own synchronisation, after the wrapper that stored the words
//!   returned), so words are stored with `Release` and loaded with `Acquire`;
//! - removal leaves a tombstone that a later insert reuses (MPI recycles handle values, which
//!   then fall on the same slots).
//!
//! A probe longer than [`MAX_PROBE`] or a full table sends the key to the overflow map, a
//! `Mutex<HashMap>` that lookups consult only once something was put there.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex,
    },
};

/// A key no slot holds: an empty slot.
const EMPTY: u64 = 0;
/// A removed key: probes continue past it, inserts reuse it.
const TOMB: u64 = u64::MAX;
/// A slot [`Table::push`] claimed and is still filling: probes pass it, as a key of another
/// value, until its words are stored and its key published after them.
const BUSY: u64 = u64::MAX - 1;
/// The longest probe before the overflow map takes a key.
pub const MAX_PROBE: usize = 64;

/// One slot: a key and `W` words.
pub struct Slot<const W: usize> {
    key: AtomicU64,
    words: [AtomicU64; W],
}

impl<const W: usize> Slot<W> {
    const fn new() -> Self {
        Slot { key: AtomicU64::new(EMPTY), words: [const { AtomicU64::new(0) }; W] }
    }

    /// Word `i`.
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Acquire)
    }

    /// Adds `n` to word `i`, returning what it held: a counter shared by threads.
    #[inline]
    pub fn fetch_add(&self, i: usize, n: u64) -> u64 {
        self.words[i].fetch_add(n, Ordering::AcqRel)
    }

    fn load(&self) -> [u64; W] {
        std::array::from_fn(|i| self.get(i))
    }

    fn store(&self, words: &[u64; W]) {
        for (w, &v) in self.words.iter().zip(words) {
            w.store(v, Ordering::Release);
        }
    }
}

/// `N` slots (a power of two) of `W` words, and the overflow.
pub struct Table<const N: usize, const W: usize> {
    slots: [Slot<W>; N],
    overflowed: AtomicBool,
    overflow: Mutex<Option<HashMap<u64, Vec<[u64; W]>>>>,
}

impl<const N: usize, const W: usize> Default for Table<N, W> {
    fn default() -> Self {
        Self::new()
    }
}

/// Spreads handle values (pointers: aligned, clustered) over the slots.
#[inline]
fn home(key: u64, n: usize) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & (n - 1)
}

/// A key the table can hold: `EMPTY` and `TOMB` are taken, so they are moved aside.
#[inline]
fn storable(key: u64) -> u64 {
    match key {
        EMPTY => 1 << 63,
        TOMB => (1 << 63) | 1,
        BUSY => (1 << 63) | 2,
        k => k,
    }
}

impl<const N: usize, const W: usize> Table<N, W> {
    /// An empty table (a `const`, for statics).
    pub const fn new() -> Self {
        Table {
            slots: [const { Slot::new() }; N],
            overflowed: AtomicBool::new(false),
            overflow: Mutex::new(None),
        }
    }

    fn overflow(&self) -> std::sync::MutexGuard<'_, Option<HashMap<u64, Vec<[u64; W]>>>> {
        self.overflow.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot holding `key`, if it is in the slots.
    #[inline]
    fn find(&self, key: u64) -> Option<&Slot<W>> {
        let key = storable(key);
        let start = home(key, N);
        for i in 0..MAX_PROBE.min(N) {
            let slot = &self.slots[(start + i) & (N - 1)];
            match slot.key.load(Ordering::Acquire) {
                k if k == key => return Some(slot),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// The slot of `key`, claimed for it if it had none (or always a new one, with `another`:
    /// a key held by several slots); `None` if the probe found no room.
    fn claim(&self, key: u64, another: bool) -> Option<&Slot<W>> {
        let key = storable(key);
        let start = home(key, N);
        'again: loop {
            let mut free: Option<(&Slot<W>, u64)> = None;
            for i in 0..MAX_PROBE.min(N) {
                let slot = &self.slots[(start + i) & (N - 1)];
                match slot.key.load(Ordering::Acquire) {
                    k if k == key && !another => return Some(slot),
                    TOMB => free = free.or(Some((slot, TOMB))),
                    EMPTY => {
                        free = free.or(Some((slot, EMPTY)));
                        break;
                    }
                    _ => {}
                }
            }
            let (slot, was) = free?;
            // A slot for one more holder of a key is claimed busy: its words are not yet there.
            let claimed = if another { BUSY } else { key };
            match slot.key.compare_exchange(was, claimed, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(slot),
                Err(_) => continue 'again, // another thread took it: look again
            }
        }
    }

    /// The words of `key`, if present.
    #[inline]
    pub fn get(&self, key: u64) -> Option<[u64; W]> {
        if let Some(slot) = self.find(key) {
            return Some(slot.load());
        }
        if self.overflowed.load(Ordering::Acquire) {
            return self.overflow().as_ref().and_then(|m| m.get(&key)?.first().copied());
        }
        None
    }

    /// Sets the words of `key` (inserting it, or replacing what it had).
    pub fn put(&self, key: u64, words: [u64; W]) {
        match self.claim(key, false) {
            Some(slot) => slot.store(&words),
            None => {
                self.overflow().get_or_insert_with(HashMap::new).entry(key).or_default().insert(0, words);
                self.overflowed.store(true, Ordering::Release);
            }
        }
    }

    /// Adds `words` under `key` beside what it may hold already: [`Table::take`] then returns
    /// them one by one (the first found first; in the order of insertion unless a tombstone let
    /// a later one in ahead).
    pub fn push(&self, key: u64, words: [u64; W]) {
        match self.claim(key, true) {
            Some(slot) => {
                // The key last: a reader that finds it finds these words, not a previous
                // holder's (the slot may be a tombstone reused).
                slot.store(&words);
                slot.key.store(storable(key), Ordering::Release);
            }
            None => {
                self.overflow().get_or_insert_with(HashMap::new).entry(key).or_default().push(words);
                self.overflowed.store(true, Ordering::Release);
            }
        }
    }

    /// Removes `key`, returning its words.
    pub fn take(&self, key: u64) -> Option<[u64; W]> {
        self.take_least(key, |_| 0)
    }

    /// Removes one of the slots holding `key`, the one whose words `score` lowest (the first
    /// found among equals), returning its words. Threads taking one key at once each get another slot:
    /// the slot is released by a compare-and-swap of its key, and a thread that loses it looks
    /// again. A slot taken and pushed again for the same key between this thread's read of its
    /// words and its swap is noticed (the words differ) and given back. The choice by score is
    /// not atomic with other threads' pushes and takes of the same key: a user that needs
    /// "each thread gets its own" under concurrent holders of one key serialises them
    /// ([`crate::requests`] does).
    pub fn take_least(&self, key: u64, score: impl Fn(&[u64; W]) -> u64) -> Option<[u64; W]> {
        let stored = storable(key);
        let start = home(stored, N);
        'again: loop {
            let mut best: Option<(&Slot<W>, [u64; W], u64)> = None;
            for i in 0..MAX_PROBE.min(N) {
                let slot = &self.slots[(start + i) & (N - 1)];
                match slot.key.load(Ordering::Acquire) {
                    k if k == stored => {
                        let words = slot.load();
                        let s = score(&words);
                        if best.as_ref().is_none_or(|b| s < b.2) {
                            best = Some((slot, words, s));
                        }
                    }
                    EMPTY => break,
                    _ => {}
                }
            }
            if let Some((slot, words, _)) = best {
                if slot.key.compare_exchange(stored, TOMB, Ordering::AcqRel, Ordering::Acquire).is_err() {
                    continue 'again;
                }
                // Ours now. Taken and pushed again for the same key since the read above, it
                // holds another holder's words: hand those back and choose again.
                let now = slot.load();
                if now != words {
                    self.push(key, now);
                    continue 'again;
                }
                return Some(words);
            }
            break;
        }
        if self.overflowed.load(Ordering::Acquire) {
            let mut overflow = self.overflow();
            let held = overflow.as_mut()?.get_mut(&key)?;
            let at = (0..held.len()).min_by_key(|&i| score(&held[i])).unwrap_or(0);
            let words = (at < held.len()).then(|| held.remove(at));
            if held.is_empty() {
                overflow.as_mut()?.remove(&key);
            }
            return words;
        }
        None
    }

    /// Adds one to word 0 of `key` (0 if it was absent) and returns the value before: the
    /// counters of messages and collectives. Threads counting one key at once each get their
    /// own number.
    #[inline]
    pub fn count(&self, key: u64) -> u64 {
        if let Some(slot) = self.find(key).or_else(|| self.claim(key, false)) {
            return slot.fetch_add(0, 1);
        }
        let mut overflow = self.overflow();
        let held = overflow.get_or_insert_with(HashMap::new).entry(key).or_default();
        self.overflowed.store(true, Ordering::Release);
        if held.is_empty() {
            held.push([0; W]);
        }
        held[0][0] += 1;
        held[0][0] - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_take_and_tombstones() {
        static T: Table<8, 2> = Table::new();
        assert_eq!(T.get(5), None);
        T.put(5, [1, 2]);
        T.put(0, [3, 4]); // the empty key is moved aside, not lost
        T.put(u64::MAX, [5, 6]);
        assert_eq!((T.get(5), T.get(0), T.get(u64::MAX)), (Some([1, 2]), Some([3, 4]), Some([5, 6])));
        assert_eq!(T.take(5), Some([1, 2]));
        assert_eq!(T.get(5), None);
        T.put(5, [7, 8]);
        assert_eq!(T.get(5), Some([7, 8]));
        // More keys than slots: the rest overflow and are still found.
        for k in 100..120 {
            T.put(k, [k, 0]);
        }
        for k in 100..120 {
            assert_eq!(T.get(k), Some([k, 0]), "key {k}");
        }
        assert_eq!(T.take(119), Some([119, 0]));
        assert_eq!(T.get(119), None);
    }

    #[test]
    fn a_key_pushed_twice_is_taken_twice() {
        // Open MPI hands out one static, already complete request for every send that completed
        // at once: one handle, several requests.
        static T: Table<16, 1> = Table::new();
        T.push(7, [1]);
        T.push(7, [2]);
        assert_eq!((T.take(7), T.take(7), T.take(7)), (Some([1]), Some([2]), None));
        // A score picks among them: the lowest, the first found among equals.
        T.push(7, [1]);
        T.push(7, [2]);
        T.push(7, [3]);
        assert_eq!(T.take_least(7, |w| u64::from(w[0] != 2)), Some([2]));
        assert_eq!(T.take_least(7, |w| 10 - w[0]), Some([3]));
        assert_eq!(T.take(7), Some([1]));
        static FULL: Table<1, 1> = Table::new();
        FULL.push(3, [1]);
        FULL.push(3, [2]); // into the overflow
        FULL.push(3, [3]);
        assert_eq!(
            (FULL.take(3), FULL.take(3), FULL.take(3), FULL.take(3)),
            (Some([1]), Some([2]), Some([3]), None)
        );
    }

    #[test]
    fn threads_counting_one_key_get_distinct_numbers() {
        static T: Table<64, 1> = Table::new();
        let got: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> =
                (0..8).map(|_| s.spawn(|| (0..1000).map(|_| T.count(42)).collect::<Vec<_>>())).collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8000).collect::<Vec<_>>());
        // Overflowing keys count too.
        static SMALL: Table<2, 1> = Table::new();
        for k in 0..5 {
            assert_eq!(SMALL.count(k), 0);
            assert_eq!(SMALL.count(k), 1);
        }
    }
}
