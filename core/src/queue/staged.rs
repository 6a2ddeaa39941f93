//! What the owner of a slot publishes about its staging area, so that the collector can copy
//! records a blocked thread staged and never pushed: a seqlock over the chunk head, and the fill.
//!
//! A thread that blocks (in an MPI call, on a lock, in a sleep) right after beginning a span does
//! not record again, so its staged records would reach the queue only when it wakes or exits.
//! The collector cannot take them from the owner (the owner never locks), but it can copy them:
//!
//! - per record (with `std`), the owner stores how far its staging area is filled,
//!   `len | records << HALF`, with `Release` ordering: one plain store of a word on x86, no
//!   read-modify-write;
//! - per chunk (rarely), the owner publishes the chunk's head fields between two increments of
//!   a sequence number, seqlock-style: odd while the head and the area change (from just before
//!   a chunk is pushed to when the next chunk's head is set), even when they are stable.
//!
//! The reader ([`Staged::copy`]) loads the sequence, the head, the fill, copies the staged
//! bytes, fences, and loads the sequence again; if it moved (or was odd), the copy may be torn
//! and is thrown away. Because the sequence turns odd *before* a chunk is pushed, a reader that
//! still sees the same sequence after draining the queue knows the chunk it copied was not in
//! what it drained.

use crate::wire::ChunkHead;
use core::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};

/// Bits of the fill word that hold the length; the records count is above them.
pub(crate) const FILL_SHIFT: u32 = usize::BITS / 2;
/// The largest staging area whose fill can be published: its length must fit in the low half
/// of a word (4 GiB on 64-bit targets, 64 KiB - 1 on 32-bit ones). Larger areas are cut to it.
pub const MAX_STAGING: usize = (1 << FILL_SHIFT) - 1;

/// The published state of one slot's staging area. On a cache line of its own: the owner
/// stores the fill after every record, and that store should not pull in a line the collector
/// writes while it drains (the queue's indices beside it in the slot).
/// (Not on bare metal, without `std`: there the fill is not published, see `local.rs`, and a
/// 64-byte alignment would only cost RAM.)
#[cfg_attr(feature = "std", repr(align(64)))]
pub(crate) struct Staged {
    /// The seqlock's sequence: odd while the owner changes chunks.
    seq: AtomicU32,
    /// `len | records << FILL_SHIFT` of the chunk being staged.
    fill: AtomicUsize,
    /// The chunk head: generation, then base ts, first id, depth and dropped as (low, high)
    /// halves, so that 32-bit targets without 64-bit atomics publish it the same way.
    head: [AtomicU32; 9],
}

/// A consistent view of what the owner has staged, as [`crate::queue::StreamSlot::snapshot`]
/// returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The head the staged records will have when they are pushed as a chunk (with `records`
    /// the count staged now).
    pub head: ChunkHead,
    /// Bytes of records copied.
    pub len: usize,
    /// The chunk's sequence number: unchanged while the same chunk is being staged.
    pub seq: u32,
}

/// How far the current chunk is staged, as cheap to read as two loads: what the collector
/// compares from one pass to the next to tell an idle owner from a busy one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    /// The chunk's sequence number (odd: the owner is changing chunks).
    pub seq: u32,
    /// Bytes staged.
    pub len: usize,
    /// Records staged.
    pub records: usize,
}

impl Staged {
    pub(crate) const fn new() -> Staged {
        Staged { seq: AtomicU32::new(0), fill: AtomicUsize::new(0), head: [const { AtomicU32::new(0) }; 9] }
    }

    /// The fill word, which the owner caches to publish each record with one store.
    pub(crate) fn fill_word(&self) -> &AtomicUsize {
        &self.fill
    }

    /// Owner: the staged records are about to be pushed, or the head to change. Called before
    /// the push, so that a reader who sees the old sequence after draining the queue knows the
    /// chunk was not yet in the queue when it drained.
    #[inline]
    pub(crate) fn changing(&self) {
        let s = self.seq.load(Ordering::Relaxed); // only the owner writes it
        if s & 1 == 0 {
            self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        }
        // Orders the odd sequence before the pushes and stores that follow: a reader that
        // acquires any of them sees the sequence moved.
        fence(Ordering::Release);
    }

    /// Owner: a new chunk starts with `head` and nothing staged.
    pub(crate) fn started(&self, head: &ChunkHead) {
        self.changing();
        let halves = |v: u64| [v as u32, (v >> 32) as u32];
        let [a, b] = halves(head.base_ts);
        let [c, d] = halves(head.first_id);
        let [e, f] = halves(head.depth);
        let [g, h] = halves(head.dropped);
        for (slot, v) in self.head.iter().zip([head.generation, a, b, c, d, e, f, g, h]) {
            slot.store(v, Ordering::Relaxed);
        }
        self.fill.store(0, Ordering::Relaxed);
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Release);
    }

    /// Reader: the current sequence and fill.
    pub(crate) fn mark(&self) -> Mark {
        let seq = self.seq.load(Ordering::Acquire);
        let (len, records) = unpack(self.fill.load(Ordering::Acquire));
        Mark { seq, len, records }
    }

    /// Reader: copies the staged records of `staging` into `out` (which must be at least as
    /// long as the staging area) if the owner holds the chunk still while they are read.
    ///
    /// `staging` is the area the owner writes with plain stores; see the SAFETY comment inside.
    pub(crate) fn copy(&self, staging: *const u8, capacity: usize, out: &mut [u8]) -> Option<Snapshot> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 == 1 {
            return None;
        }
        let h: [u32; 9] = core::array::from_fn(|i| self.head[i].load(Ordering::Relaxed));
        let joined = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
        // Acquire: the bytes of every record this fill counts were written before it.
        let (len, records) = unpack(self.fill.load(Ordering::Acquire));
        if records == 0 || len > capacity || len > out.len() {
            return None;
        }
        read_staged(staging, &mut out[..len]);
        // Orders the reads above before the second load of the sequence: if any byte read was
        // written after the owner moved on, that load sees the sequence moved.
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != seq {
            return None; // torn: the owner pushed or started a chunk meanwhile
        }
        let head = ChunkHead {
            generation: h[0],
            base_ts: joined(h[1], h[2]),
            first_id: joined(h[3], h[4]),
            depth: joined(h[5], h[6]),
            dropped: joined(h[7], h[8]),
            records: records as u64,
        };
        Some(Snapshot { head, len, seq })
    }
}

/// The owner's fill word for `len` bytes and `records` records.
#[cfg(feature = "std")]
#[inline(always)]
pub(crate) fn pack(len: usize, records: u64) -> usize {
    len | (records as usize) << FILL_SHIFT
}

fn unpack(fill: usize) -> (usize, usize) {
    (fill & MAX_STAGING, fill >> FILL_SHIFT)
}

/// Copies `out.len()` bytes from `staging` while the owner may be writing them.
///
/// ThreadSanitizer, run on this crate's hand-off test by `scripts/test.sh`, is told to ignore
/// races in this function (`scripts/tsan.supp`, which names it): a read that races with the
/// owner's write is exactly the torn copy the seqlock throws away. Every other access of the
/// seqlock (the sequence, the head, the fill) is still checked; a copy the seqlock let through
/// torn would show in that test's comparison of every snapshot with the chunk it copied.
#[inline(never)]
fn read_staged(staging: *const u8, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        // SAFETY: `staging` points to the slot's staging area, valid for the life of the slot
        // (`StreamSlot::new`'s contract) and at least `out.len()` bytes long (checked against the
        // area's capacity in `Staged::copy`). The owner may be writing these bytes with plain
        // stores right now: the read is volatile, so that the compiler neither merges nor elides
        // it, and its value is used only if the sequence is unchanged afterwards (the fence and
        // second load in `Staged::copy`), which proves no byte was being rewritten: the owner
        // rewrites the area only after it made the sequence odd. A torn copy is discarded and
        // never decoded, as in crossbeam's `AtomicCell` fallback (its seqlock reads the value
        // with a volatile read and validates it after).
        *b = unsafe { staging.add(i).read_volatile() };
    }
}
