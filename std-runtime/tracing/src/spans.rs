//! Which waffle span each live `tracing` span is, by `tracing` span id, without a lock.
//!
//! Every enter and close needs the waffle id of a span made elsewhere, maybe on another
//! thread. The registry's extensions could hold it, but reaching them takes a slab lookup, a
//! lock and a hash map, and inserting boxes the value: about three quarters of what the layer
//! added to a span in `benches/` (README). So the ids live in a fixed open-addressed table of
//! atomics, keyed by the `tracing` id (which the registry keeps unique among live spans): a
//! slot is claimed by a compare-and-swap at creation and freed (a tombstone, reused by later
//! claims) at close. A span whose probe sequence is full goes to the registry's extensions
//! instead, and a flag says to look there.
//!
//! Ordering: the value is written after the key's swap, with relaxed stores; whoever looks a
//! span up holds its handle, which reached that thread after the creation returned, through
//! whatever synchronisation moved it, so the stores are visible to it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

const SLOTS: usize = 1 << 14;
const PROBES: usize = 32;
const FREE: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;

struct Slot {
    key: AtomicU64,
    id: AtomicU64,
    epoch: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array below
const EMPTY: Slot = Slot { key: AtomicU64::new(FREE), id: AtomicU64::new(0), epoch: AtomicU32::new(0) };
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// Set once a span did not fit, so that lookups that miss the table try the extensions.
static OVERFLOWED: AtomicBool = AtomicBool::new(false);

/// A recorded span: its waffle id and the session that recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) id: u64,
    pub(crate) epoch: u32,
}

#[inline(always)]
fn home(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50) as usize % SLOTS
}

/// Keeps `r` for `tracing` span `key`; `false` if its probe sequence is full (the caller
/// keeps it in the extensions, and [`overflowed`] says so from then on).
#[inline]
pub(crate) fn insert(key: u64, r: Recorded) -> bool {
    if key == FREE || key == TOMBSTONE {
        return false;
    }
    let start = home(key);
    for i in 0..PROBES {
        let slot = &TABLE[(start + i) % SLOTS];
        let k = slot.key.load(Ordering::Relaxed);
        if (k == FREE || k == TOMBSTONE)
            && slot.key.compare_exchange(k, key, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            slot.id.store(r.id, Ordering::Relaxed);
            slot.epoch.store(r.epoch, Ordering::Relaxed);
            return true;
        }
    }
    OVERFLOWED.store(true, Ordering::Relaxed);
    false
}

#[inline]
fn find(key: u64) -> Option<&'static Slot> {
    if key == FREE || key == TOMBSTONE {
        return None;
    }
    let start = home(key);
    for i in 0..PROBES {
        let slot = &TABLE[(start + i) % SLOTS];
        match slot.key.load(Ordering::Acquire) {
            k if k == key => return Some(slot),
            FREE => return None,
            _ => {}
        }
    }
    None
}

/// What was kept for `tracing` span `key`, if it is in the table.
#[inline]
pub(crate) fn get(key: u64) -> Option<Recorded> {
    find(key).map(|s| Recorded { id: s.id.load(Ordering::Relaxed), epoch: s.epoch.load(Ordering::Relaxed) })
}

/// Takes what was kept for `tracing` span `key` out of the table.
#[inline]
pub(crate) fn remove(key: u64) -> Option<Recorded> {
    let slot = find(key)?;
    let r = Recorded { id: slot.id.load(Ordering::Relaxed), epoch: slot.epoch.load(Ordering::Relaxed) };
    slot.key.store(TOMBSTONE, Ordering::Release);
    Some(r)
}

/// Whether some span was kept in the extensions rather than the table.
#[inline]
pub(crate) fn overflowed() -> bool {
    OVERFLOWED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_found_until_removed_and_a_full_sequence_overflows() {
        // Keys that share one home slot, found by search.
        let target = home(1 << 40);
        let keys: Vec<u64> = (1u64 << 40..).filter(|&k| home(k) == target).take(PROBES + 1).collect();
        for (n, &k) in keys[..PROBES].iter().enumerate() {
            assert!(insert(k, Recorded { id: n as u64 + 1, epoch: 7 }));
        }
        assert!(!insert(keys[PROBES], Recorded { id: 99, epoch: 7 }), "the sequence is full");
        assert!(overflowed());
        assert_eq!(get(keys[3]), Some(Recorded { id: 4, epoch: 7 }));
        assert_eq!(remove(keys[3]), Some(Recorded { id: 4, epoch: 7 }));
        assert_eq!(get(keys[3]), None);
        assert_eq!(get(keys[4]), Some(Recorded { id: 5, epoch: 7 }), "found past a tombstone");
        assert!(insert(keys[PROBES], Recorded { id: 99, epoch: 8 }), "the tombstone is reused");
        assert_eq!(get(keys[PROBES]), Some(Recorded { id: 99, epoch: 8 }));
        for &k in &keys {
            remove(k);
        }
    }
}
