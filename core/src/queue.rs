//! The per-stream SPSC queue: the only module that knows `bbqueue`.
//!
//! `bbqueue` changed its whole API between 0.5 and 0.7; it is pinned in the workspace and every
//! use of it is here, so an upgrade touches this file alone. The producer pushes whole chunks
//! (a chunk header plus many records staged by `local`), never single records: a grant/commit
//! pair per record was measured at ~40 ns, a chunk of a few kilobytes pays it once.
//!
//! Memory comes from whoever makes the slot: `waffle-std` leaks one boxed slice per stream and
//! recycles slots of finished threads; a bare-metal user hands in a `static mut` array.
//!
//! The slot also carries what its owner publishes about the records it has staged and not yet
//! pushed (`staged.rs`), so that a collector can copy them from a thread that blocks:
//! [`StreamSlot::mark`] and [`StreamSlot::snapshot`].

pub(crate) mod staged;

pub use staged::{Mark, Snapshot, MAX_STAGING};

use crate::wire::ChunkHead;
use bbqueue::{
    traits::{coordination::cas::AtomicCoord, notifier::polling::Polling, storage::Storage},
    BBQueue,
};
use core::{
    cell::UnsafeCell,
    ptr::NonNull,
    sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering},
};
use staged::Staged;

/// Byte storage owned elsewhere, valid for the life of the program.
struct RawStorage {
    ptr: NonNull<u8>,
    len: usize,
}

impl Storage for RawStorage {
    unsafe fn ptr_len(&self) -> (NonNull<u8>, usize) {
        (self.ptr, self.len)
    }
}

type Queue = BBQueue<RawStorage, AtomicCoord, Polling>;

/// One stream's queue and bookkeeping, shared by its producer (the thread that records) and
/// the consumer (the collector).
pub struct StreamSlot {
    queue: Queue,
    /// Where the owning thread stages records between pushes; touched only by the owner.
    staging: NonNull<[u8]>,
    index: u32,
    /// Records lost because the queue was full, in total (wraps on 32-bit targets).
    dropped: AtomicUsize,
    /// The stream's next span/event id, kept while no thread owns the slot. Written before
    /// `owned` is released and read after it is acquired, so the flag orders every access.
    next_id: UnsafeCell<u64>,
    /// Whether a thread currently owns the producer side.
    owned: AtomicBool,
    /// Counts claims, so that chunks name the owner that wrote them.
    generation: AtomicU32,
    /// What the owner publishes about its staging area for [`StreamSlot::snapshot`].
    staged: Staged,
}

// SAFETY: the storage is used only through `bbqueue`'s atomic coordination, which hands each
// byte range to exactly one side at a time; the staging area is written by its owner alone and
// read by others only through the seqlock of `staged.rs`, which discards a read that raced with
// a write; the other fields are atomics.
unsafe impl Sync for StreamSlot {}
// SAFETY: as above; nothing in the slot is tied to the thread that made it.
unsafe impl Send for StreamSlot {}

impl StreamSlot {
    /// Makes a slot whose queue lives in `queue` and whose owner stages records in `staging`,
    /// with stream number `index` and first id `first_id`.
    ///
    /// # Safety
    /// Both regions must stay valid, be disjoint, and be read or written by nothing but this
    /// slot, for as long as the slot lives. Two `&'static mut [u8]` meet this. A staging area
    /// longer than [`MAX_STAGING`] is used up to that length.
    pub unsafe fn new(queue: NonNull<[u8]>, staging: NonNull<[u8]>, index: u32, first_id: u64) -> StreamSlot {
        let storage = RawStorage { ptr: queue.cast(), len: queue.len() };
        let staging = NonNull::slice_from_raw_parts(staging.cast::<u8>(), staging.len().min(MAX_STAGING));
        StreamSlot {
            queue: Queue::new_with_storage(storage),
            staging,
            index,
            dropped: AtomicUsize::new(0),
            next_id: UnsafeCell::new(first_id),
            owned: AtomicBool::new(false),
            generation: AtomicU32::new(0),
            staged: Staged::new(),
        }
    }

    /// The stream number given at creation.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// Records dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) as u64
    }

    /// Whether a thread owns the producer side now.
    pub fn is_owned(&self) -> bool {
        self.owned.load(Ordering::Acquire)
    }

    /// Claims the producer side, returning the new owner's generation (1 for the first owner),
    /// or `None` if another owner has it. Every chunk the owner pushes carries the generation,
    /// so a reused slot's chunks are told apart by owner.
    pub fn try_claim(&self) -> Option<u32> {
        self.owned.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        Some(self.generation.fetch_add(1, Ordering::AcqRel).wrapping_add(1))
    }

    /// The generation of the current (or last) owner.
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// Gives the producer side back, remembering where the id counter stood.
    pub(crate) fn unclaim(&self, next_id: u64) {
        // SAFETY: only the owner calls this, before it releases `owned`; nobody else touches
        // `next_id` until they have claimed the slot, which synchronises with that release.
        unsafe { *self.next_id.get() = next_id };
        self.owned.store(false, Ordering::Release);
    }

    /// The staging area, for the owner.
    ///
    /// # Safety
    /// Only the thread that claimed the slot may call this, and it must drop the reference
    /// before it unclaims the slot.
    pub(crate) unsafe fn staging(&self) -> &'static mut [u8] {
        // SAFETY: the caller owns the slot, so no other reference to the staging area exists;
        // `new`'s contract keeps the memory valid and exclusive to this slot.
        unsafe { &mut *self.staging.as_ptr() }
    }

    /// The id counter, for the owner that just claimed the slot.
    pub(crate) fn next_id(&self) -> u64 {
        // SAFETY: called by the owner after its claim (an acquire that follows the previous
        // owner's release in `unclaim`); no one writes `next_id` while it is owned.
        unsafe { *self.next_id.get() }
    }

    /// Bytes of the staging area.
    pub fn staging_capacity(&self) -> usize {
        self.staging.len()
    }

    /// The word the owner stores each record's fill in (see `staged.rs`).
    pub(crate) fn fill_word(&self) -> &AtomicUsize {
        self.staged.fill_word()
    }

    /// Owner: the staged chunk is about to be pushed or its head to change.
    pub(crate) fn chunk_changing(&self) {
        self.staged.changing();
    }

    /// Owner: a new chunk starts with `head`, nothing staged yet.
    pub(crate) fn chunk_started(&self, head: &ChunkHead) {
        self.staged.started(head);
    }

    /// How far the owner's current chunk is staged (any thread; two loads).
    pub fn mark(&self) -> Mark {
        self.staged.mark()
    }

    /// Copies the records the owner has staged and not pushed into `out`, with the head their
    /// chunk will have, if it can be done without tearing (any thread, while the owner keeps
    /// recording: a copy that raced with a push or a new chunk is thrown away and `None`
    /// returned). `None` too when nothing is staged or `out` is shorter than the staged bytes
    /// (`staging_capacity` bytes always suffice), and always without `std`, where owners do not
    /// publish their fill.
    pub fn snapshot(&self, out: &mut [u8]) -> Option<Snapshot> {
        self.staged.copy(self.staging.as_ptr().cast::<u8>(), self.staging.len(), out)
    }

    pub(crate) fn count_dropped(&self, records: u64) {
        self.dropped.fetch_add(records as usize, Ordering::Relaxed);
    }

    /// Producer side: appends `head` then `body` as one contiguous piece, or returns `false`
    /// (nothing written) when there is no room. Never blocks.
    pub(crate) fn push(&self, head: &[u8], body: &[u8]) -> bool {
        let len = head.len() + body.len();
        match self.queue.stream_producer().grant_exact(len) {
            Ok(mut grant) => {
                grant[..head.len()].copy_from_slice(head);
                grant[head.len()..len].copy_from_slice(body);
                grant.commit(len);
                true
            }
            Err(_) => false,
        }
    }

    /// Consumer side: hands the oldest committed bytes (whole chunks, never a split one) to `f`
    /// and frees them. Returns the number of bytes consumed, 0 when the queue is empty.
    ///
    /// Only one consumer may call this at a time (the collector).
    pub fn drain_with(&self, f: impl FnOnce(&[u8])) -> usize {
        match self.queue.stream_consumer().read() {
            Ok(grant) => {
                let n = grant.len();
                f(&grant);
                grant.release(n);
                n
            }
            Err(_) => 0,
        }
    }
}
