//! The process-wide pool of stream slots behind waffle's producer hooks.
//!
//! A thread's first record in a session calls [`acquire`]: it gets a free slot (one whose
//! previous owner has exited and whose queue the collector has emptied) or a new one, and its
//! OS thread id and name are noted for the collector to write. When the thread exits, its
//! staged records are pushed and [`release`] parks the slot until the collector has drained it,
//! after which another thread may take it. Slots are never freed: their number is bounded by
//! the most threads recording at once, and their queues are reused.

use std::{
    ptr::NonNull,
    sync::{Mutex, MutexGuard},
};
use waffle::{queue::StreamSlot, runtime::Hooks};

/// The most streams one process can have: the stream part of an id has 12 bits.
pub const MAX_STREAMS: usize = 4096;

/// Who owns a stream now, as the collector writes it in a STREAM frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Stream (slot) index.
    pub stream: u32,
    /// Owner generation of the slot.
    pub generation: u32,
    /// OS thread id.
    pub tid: u64,
    /// Thread name, "" if none.
    pub name: String,
}

struct Inner {
    slots: Vec<&'static StreamSlot>,
    /// Slots whose owner left and whose queue may still hold chunks.
    draining: Vec<u32>,
    /// Slots ready for a new owner.
    free: Vec<u32>,
    /// Ownership changes not yet written by the collector.
    new_owners: Vec<Owner>,
    queue_bytes: usize,
    staging_bytes: usize,
    salt: u32,
    /// Threads refused a slot because `MAX_STREAMS` was reached.
    refused: u64,
}

static INNER: Mutex<Inner> = Mutex::new(Inner {
    slots: Vec::new(),
    draining: Vec::new(),
    free: Vec::new(),
    new_owners: Vec::new(),
    queue_bytes: 4 << 20,
    staging_bytes: 16 << 10,
    salt: 0,
    refused: 0,
});

/// The hooks `waffle_std` installs into waffle's producer side.
pub static HOOKS: Hooks = Hooks { acquire, release };

fn inner() -> MutexGuard<'static, Inner> {
    // A panic while holding the lock leaves the pool consistent (every change is one push or
    // pop), so a poisoned lock is still usable.
    INNER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the sizes of slots made from now on, and the process salt of their ids.
pub fn configure(queue_bytes: usize, staging_bytes: usize, salt: u32) {
    let mut g = inner();
    g.queue_bytes = queue_bytes;
    g.staging_bytes = staging_bytes;
    g.salt = salt;
}

fn current_thread() -> (u64, String) {
    // SAFETY: gettid has no preconditions and cannot fail.
    #[cfg(target_os = "linux")]
    let tid = unsafe { libc::gettid() } as u64;
    #[cfg(not(target_os = "linux"))]
    let tid = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::thread::current().id().hash(&mut h);
        h.finish() & 0x7fff_ffff
    };
    (tid, std::thread::current().name().unwrap_or("").to_owned())
}

/// Set in the child of a `fork`: the pool's lock may be held by a parent thread that does not
/// exist in the child, so the child never takes it.
static FORKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks this process as the child of a `fork` (see [`FORKED`]).
pub(crate) fn mark_forked() {
    FORKED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this process is the child of a `fork` made after a session started.
pub(crate) fn forked() -> bool {
    FORKED.load(std::sync::atomic::Ordering::Relaxed)
}

fn acquire() -> Option<&'static StreamSlot> {
    if forked() {
        return None;
    }
    let (tid, name) = current_thread();
    let mut g = inner();
    let slot = match g.free.pop() {
        Some(i) => g.slots[i as usize],
        None => {
            if g.slots.len() >= MAX_STREAMS {
                g.refused += 1;
                return None;
            }
            let index = g.slots.len() as u32;
            let queue = NonNull::from(Box::leak(vec![0u8; g.queue_bytes].into_boxed_slice()));
            let staging = NonNull::from(Box::leak(vec![0u8; g.staging_bytes].into_boxed_slice()));
            let first_id = waffle::ids::stream_id_base(g.salt, index);
            // SAFETY: both regions were just leaked, so they live forever, are disjoint, and
            // nothing else holds a reference to them.
            let slot: &'static StreamSlot =
                Box::leak(Box::new(unsafe { StreamSlot::new(queue, staging, index, first_id) }));
            g.slots.push(slot);
            slot
        }
    };
    let generation = slot.try_claim()?; // free slots are unowned, so this succeeds
    g.new_owners.push(Owner { stream: slot.index(), generation, tid, name });
    Some(slot)
}

fn release(slot: &'static StreamSlot) {
    if forked() {
        return; // the slot stays with the parent's pool copy, unused
    }
    inner().draining.push(slot.index());
}

/// Every slot made so far.
pub fn slots() -> Vec<&'static StreamSlot> {
    inner().slots.clone()
}

/// Ownership changes since the last call.
pub fn take_new_owners() -> Vec<Owner> {
    std::mem::take(&mut inner().new_owners)
}

/// Takes the slots released so far. The collector calls this before a drain pass and hands
/// them to [`make_free`] after it: their owners pushed their last chunk before releasing, so
/// the pass empties them for good.
pub fn take_released() -> Vec<u32> {
    std::mem::take(&mut inner().draining)
}

/// Lets new owners take these slots (see [`take_released`]).
pub fn make_free(slots: Vec<u32>) {
    inner().free.extend(slots);
}

/// Slots a thread owns now (used at stop to wait for exiting threads).
pub fn owned() -> usize {
    inner().slots.iter().filter(|s| s.is_owned()).count()
}

/// Threads refused a slot because the stream limit was reached.
pub fn refused() -> u64 {
    inner().refused
}
