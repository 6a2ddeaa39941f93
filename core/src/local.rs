//! What runs on the user's thread: staging records and handing chunks to the queue.
//!
//! Each thread (or, without `std`, each [`BareStream`]: the main loop, an interrupt level) has
//! a [`Local`]: the slot it owns,
//! a staging area inside that slot, and the few numbers needed to write deltas. A record is
//! encoded straight into the staging area; when the area is full, or the oldest staged record
//! is older than the flush interval, the whole area becomes one chunk pushed into the slot's
//! queue with a header that makes it decodable on its own (base timestamp, first id, open-span
//! depth, records dropped before it). If the queue is full the chunk is dropped and counted.
//!
//! So that a thread which blocks right after a record does not keep it from the file, with
//! `std` each record also publishes how far the area is filled (one `Release` store of a word
//! into the slot), and each chunk its head (a seqlock, in `queue/staged.rs`): the runtime's
//! collector copies what an idle thread has staged without the thread's help.
//!
//! Nothing here allocates, locks or calls the system once a thread has its slot.

use crate::{
    clock,
    encode::Writer,
    queue::StreamSlot,
    runtime,
    wire::{
        chunk::{ChunkHead, MAX_CHUNK_PREFIX_LEN},
        tag, zigzag,
    },
};

/// Ticks a staged record may wait before its chunk is pushed, until the runtime sets it.
const DEFAULT_FLUSH_TICKS: u64 = 1 << 22; // about 1.4 ms of a 3 GHz TSC

static FLUSH_TICKS: core::sync::atomic::AtomicUsize =
    core::sync::atomic::AtomicUsize::new(DEFAULT_FLUSH_TICKS as usize);

/// Sets how many clock ticks a record may sit staged before its chunk is pushed. The runtime
/// derives it from its calibration (1 ms by default); it bounds how much an idle-then-killed
/// thread can lose.
pub fn set_flush_ticks(ticks: u64) {
    let ticks = usize::try_from(ticks).unwrap_or(usize::MAX).max(1);
    FLUSH_TICKS.store(ticks, core::sync::atomic::Ordering::Relaxed);
}

/// Where a stream without a slot publishes its fill: nobody reads it.
static NO_FILL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// An empty staging area, for streams without a slot.
const fn no_staging() -> &'static mut [u8] {
    // SAFETY: a zero-length slice over a dangling, aligned, non-null pointer is valid and
    // aliases nothing.
    unsafe { core::slice::from_raw_parts_mut(core::ptr::NonNull::dangling().as_ptr(), 0) }
}

/// One recording stream's state.
pub struct Local {
    slot: Option<&'static StreamSlot>,
    staging: &'static mut [u8],
    /// The slot's published fill (`len | records << half a word`), stored after each record.
    fill: &'static core::sync::atomic::AtomicUsize,
    /// Staged bytes.
    len: usize,
    /// Staged records.
    records: u64,
    /// Timestamp of the last record written (the base of the next delta).
    last_ts: u64,
    /// Base timestamp, first id and depth of the staged chunk.
    chunk_ts: u64,
    chunk_id: u64,
    chunk_depth: u64,
    /// Id the next span or event takes.
    next_id: u64,
    /// Spans begun and not ended, plus contexts entered and not exited.
    depth: u64,
    /// Id of the innermost open span or entered context (0: none), for `Context::current`.
    current: u64,
    /// Records lost since the last chunk that reached the queue.
    dropped: u64,
    flush_ticks: u64,
    /// The slot's owner generation, written in every chunk header.
    generation: u32,
    /// Session epoch this state belongs to (0: none yet).
    epoch: u32,
    /// Set while acquiring a slot, so that a record made meanwhile is not taken re-entrantly.
    busy: bool,
    /// Head sampling's per-stream state (`local/sample.rs`).
    sampling: sample::State,
}

impl Local {
    /// A stream that has recorded nothing yet.
    pub const EMPTY: Local = Local {
        slot: None,
        staging: no_staging(),
        fill: &NO_FILL,
        len: 0,
        records: 0,
        last_ts: 0,
        chunk_ts: 0,
        chunk_id: 0,
        chunk_depth: 0,
        next_id: 0,
        depth: 0,
        current: 0,
        dropped: 0,
        flush_ticks: DEFAULT_FLUSH_TICKS,
        generation: 0,
        epoch: 0,
        busy: false,
        sampling: sample::State::EMPTY,
    };

    /// Makes sure this stream has a slot of the current session; `false` if it has none.
    #[inline(always)]
    fn ready(&mut self, state: u32) -> bool {
        if self.epoch == state && self.slot.is_some() {
            return true;
        }
        self.activate(state)
    }

    /// Writes one span-begin or event record; returns the id it took, or 0 if none.
    #[inline(always)]
    pub fn record<F: Fn(&mut Writer<'_>)>(
        &mut self,
        state: u32,
        record_tag: u8,
        callsite: u32,
        fields: &F,
    ) -> u64 {
        if !self.ready(state) {
            return forward::record(record_tag, callsite, fields).0;
        }
        self.write_record(record_tag, callsite, fields)
    }

    /// [`Local::record`] in a stream that is ready.
    #[inline(always)]
    fn write_record<F: Fn(&mut Writer<'_>)>(&mut self, record_tag: u8, callsite: u32, fields: &F) -> u64 {
        // Sampling: a root while roots are decided, or inside a dropped root (cold).
        if self.depth < self.sampling.watch {
            if let Some(id) = self.sample(record_tag) {
                return id;
            }
        }
        let ts = clock::now();
        let mut w = Writer::new(self.staging, self.len);
        w.byte(record_tag);
        w.varint(u64::from(callsite));
        w.varint(zigzag(ts.wrapping_sub(self.last_ts) as i64));
        fields(&mut w);
        let id = self.next_id;
        self.next_id += 1;
        if record_tag == tag::SPAN_BEGIN {
            self.depth += 1;
        }
        let (pos, overflowed) = (w.pos(), w.overflowed());
        if overflowed {
            self.record_slow(ts, record_tag, callsite, fields);
        } else {
            self.commit(pos, ts);
        }
        id
    }

    /// Writes a span-begin record and makes the span current; returns its id (0 if not
    /// recorded) and the id that was current before, for [`Local::end`].
    #[inline(always)]
    pub fn begin<F: Fn(&mut Writer<'_>)>(&mut self, state: u32, callsite: u32, fields: &F) -> (u64, u64) {
        if !self.ready(state) {
            return forward::record(tag::SPAN_BEGIN, callsite, fields);
        }
        let id = self.write_record(tag::SPAN_BEGIN, callsite, fields);
        let prev = self.current;
        if id != 0 {
            self.current = id;
        }
        (id, prev)
    }

    /// The innermost open span or entered context of this stream (0: none); in a joined
    /// session, of the thread's stream in the copy of waffle that runs it.
    #[inline(always)]
    pub fn current(&self) -> u64 {
        if self.slot.is_none() {
            if let Some(current) = forward::current() {
                return current;
            }
        }
        self.current
    }

    /// Writes a span-end record for the innermost open span and makes `prev` current again.
    #[inline(always)]
    pub fn end(&mut self, state: u32, prev: u64) {
        self.end_with(state, prev, false);
    }

    /// [`Local::end`] at the timestamp of this stream's last record, without reading the
    /// clock: for a span whose last record (an event marking its outcome, say) was written
    /// just before it ends.
    #[inline(always)]
    pub fn end_at_last(&mut self, state: u32, prev: u64) {
        self.end_with(state, prev, true);
    }

    #[inline(always)]
    fn end_with(&mut self, state: u32, prev: u64, at_last: bool) {
        self.current = prev;
        if self.leave_dropped() {
            return;
        }
        // A span begun in a session ends in it even after recording is paused.
        let state = if state == 0 { self.epoch } else { state };
        if !self.ready(state) {
            return forward::end(prev, at_last);
        }
        let ts = if at_last { self.last_ts } else { clock::now() };
        let mut w = Writer::new(self.staging, self.len);
        w.byte(tag::SPAN_END);
        w.varint(zigzag(ts.wrapping_sub(self.last_ts) as i64));
        let (pos, overflowed) = (w.pos(), w.overflowed());
        self.depth = self.depth.saturating_sub(1);
        if overflowed {
            self.record_slow(ts, tag::SPAN_END, 0, &|_: &mut Writer<'_>| {});
        } else {
            self.commit(pos, ts);
        }
    }

    #[inline(always)]
    fn commit(&mut self, pos: usize, ts: u64) {
        self.staged(pos);
        self.last_ts = ts;
        if ts.wrapping_sub(self.chunk_ts) > self.flush_ticks {
            self.flush();
        }
    }

    /// Counts one more staged record ending at `pos` and publishes the fill. Every record goes
    /// through here, timed or not (a link or correlation right before a thread blocks must be in
    /// the collector's copy too).
    #[inline(always)]
    fn staged(&mut self, pos: usize) {
        self.len = pos;
        self.records += 1;
        // One plain store (x86: `mov`): the record's bytes are visible to whoever acquires it.
        // Only with `std`, whose collector copies what blocked threads staged; a bare-metal
        // stream drains its own queue and would pay a barrier per record (`dmb` on Arm).
        #[cfg(feature = "std")]
        self.fill.store(crate::queue::staged::pack(pos, self.records), core::sync::atomic::Ordering::Release);
    }

    /// The record did not fit: push what is staged and write it into the empty area, or, if it
    /// cannot fit even there, drop it and restart the chunk after it so the decoder's counts
    /// (ids, depth) stay exact.
    #[cold]
    #[inline(never)]
    fn record_slow(&mut self, ts: u64, record_tag: u8, callsite: u32, fields: &dyn Fn(&mut Writer<'_>)) {
        self.flush();
        let mut w = Writer::new(self.staging, 0);
        let takes_id = record_tag == tag::SPAN_BEGIN || record_tag == tag::EVENT;
        w.byte(record_tag);
        if takes_id {
            w.varint(u64::from(callsite));
        }
        w.varint(zigzag(ts.wrapping_sub(self.last_ts) as i64));
        fields(&mut w);
        let (pos, overflowed) = (w.pos(), w.overflowed());
        if overflowed {
            if let Some(slot) = self.slot {
                slot.count_dropped(1);
            }
            self.dropped += 1;
            self.last_ts = ts;
            self.start_chunk();
        } else {
            // The empty chunk's header was set before this record changed id and depth.
            self.chunk_id = self.next_id - u64::from(takes_id);
            self.chunk_depth = self.depth - u64::from(record_tag == tag::SPAN_BEGIN)
                + u64::from(record_tag == tag::SPAN_END);
            self.publish_head();
            self.commit(pos, ts);
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.release();
    }
}

mod causal;
mod chunks;
mod forward;

pub mod sample;

mod tls;

pub use tls::{set_stream_selector, with_local, BareStream};
#[cfg(feature = "std")]
pub use tls::{thread_handle, with_local_at, ThreadLocal};

/// Pushes this thread's staged records into its queue now. The runtime's collector picks them
/// up on its next pass. (A thread that parks need not call it: `waffle-std`'s collector copies
/// what an idle thread staged within about two drain intervals.)
pub fn flush() {
    with_local(Local::flush);
}
