//! [`Trace`]: the memory of every recording stream, the hooks that hand each stream its
//! queue, and the drain that turns the queues into frames.
//!
//! A stream is the records of code that can preempt the others: the main loop's, and each
//! interrupt priority level's (exceptions of one level never preempt each other). Each has a
//! [`BareStream`] (its staging state in `waffle`) and a [`StreamSlot`] over two arrays of this
//! struct: a bbqueue SPSC queue of `QUEUE` bytes, whose producer is the code recording that
//! stream and whose consumer is whoever calls [`Trace::drain`], and a staging area of
//! `STAGING` bytes where records gather into a chunk. No locks: a record of an interrupt never
//! waits for the main loop.

use crate::{
    frames::{self, HeaderFields},
    masked, Config, Output,
};
use core::{
    cell::UnsafeCell,
    mem::MaybeUninit,
    ptr::NonNull,
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering},
};
use waffle::{
    local::{set_stream_selector, BareStream, Local},
    queue::StreamSlot,
    runtime::{self, Hooks},
    wire::{frame, Calibration},
};

/// One interrupt level's state and memory: its recording stream and queue.
///
/// Everything here is zero (or uninitialised) until `start`, so that a `Trace` static lands in
/// `.bss`: a `BareStream` made in the static's initialiser has non-zero bytes, which would
/// put the whole static, queues included, in `.data` and so in flash as well.
struct Level<const QUEUE: usize, const STAGING: usize> {
    local: UnsafeCell<MaybeUninit<BareStream>>,
    slot: UnsafeCell<MaybeUninit<StreamSlot>>,
    queue: UnsafeCell<[u8; QUEUE]>,
    staging: UnsafeCell<[u8; STAGING]>,
    /// The owner generation whose STREAM frame was written (0: none yet); drainer only.
    described: AtomicU32,
}

impl<const QUEUE: usize, const STAGING: usize> Level<QUEUE, STAGING> {
    const fn new() -> Self {
        Level {
            local: UnsafeCell::new(MaybeUninit::uninit()),
            slot: UnsafeCell::new(MaybeUninit::uninit()),
            queue: UnsafeCell::new([0; QUEUE]),
            staging: UnsafeCell::new([0; STAGING]),
            described: AtomicU32::new(0),
        }
    }
}

/// Not started; started (slots made, hooks installed); finished.
const IDLE: u8 = 0;
const STARTING: u8 = 1;
const STARTED: u8 = 2;
const FINISHED: u8 = 3;

/// The recording memory of a firmware: `N` streams, each with a queue of `QUEUE` bytes and
/// a staging area of `STAGING` bytes (one chunk at most; a few hundred bytes suit a
/// microcontroller). Make it a `static` (it lands in `.bss`); its size is about
/// `N * (QUEUE + STAGING + 200)` bytes.
///
/// ```
/// static TRACE: waffle_metal::Trace<2, 1024, 256> = waffle_metal::Trace::new();
/// ```
pub struct Trace<const N: usize, const QUEUE: usize, const STAGING: usize> {
    levels: [Level<QUEUE, STAGING>; N],
    config: UnsafeCell<MaybeUninit<Config>>,
    hooks: UnsafeCell<MaybeUninit<Hooks>>,
    state: AtomicU8,
    epoch: AtomicU32,
    /// Whether the file head, HEADER and CALLSITES were written; drainer only.
    head_written: AtomicBool,
}

// SAFETY: the slots are made once in `start` before `state` becomes STARTED (a release) and
// reached only after reading STARTED (an acquire), and are `Sync` themselves; the queue and
// staging arrays are reached only through their slot; `config` and `hooks` are written once,
// before STARTED, and only read after; the `BareStream`s guard their own state.
unsafe impl<const N: usize, const QUEUE: usize, const STAGING: usize> Sync for Trace<N, QUEUE, STAGING> {}

/// The trace whose hooks are installed, as `*const Trace<N, QUEUE, STAGING>` of the started
/// one's parameters (only one trace is started per program).
static ACTIVE: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// What code outside every configured stream records into: nothing.
static OUTSIDE: BareStream = BareStream::refusing();

/// Why [`Trace::start`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    /// This trace, or another, was started already.
    AlreadyStarted,
    /// `Config::streams` names more streams than the trace has memory for, or none.
    Streams,
    /// `Config::ticks_per_second` is 0.
    Clock,
}

impl<const N: usize, const QUEUE: usize, const STAGING: usize> Trace<N, QUEUE, STAGING> {
    /// The memory of a trace that has not started.
    pub const fn new() -> Self {
        Trace {
            levels: [const { Level::new() }; N],
            config: UnsafeCell::new(MaybeUninit::uninit()),
            hooks: UnsafeCell::new(MaybeUninit::uninit()),
            state: AtomicU8::new(IDLE),
            epoch: AtomicU32::new(0),
            head_written: AtomicBool::new(false),
        }
    }

    /// Starts recording: installs `config.clock` as waffle's clock, the stream selector and
    /// the hooks that give each stream its queue. Call it once, before the interrupts that
    /// record are enabled.
    pub fn start(&'static self, config: Config) -> Result<(), StartError> {
        if config.streams.is_empty() || config.streams.len() > N {
            return Err(StartError::Streams);
        }
        if config.ticks_per_second == 0 {
            return Err(StartError::Clock);
        }
        if ACTIVE
            .compare_exchange(
                core::ptr::null_mut(),
                self as *const Self as *mut (),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
            || self.state.compare_exchange(IDLE, STARTING, Ordering::AcqRel, Ordering::Acquire).is_err()
        {
            return Err(StartError::AlreadyStarted);
        }
        for (i, c) in self.levels.iter().enumerate() {
            let first_id = (config.salt & 0xf_ffff) << 44 | (i as u64 & 0xfff) << 32 | 1;
            let queue = NonNull::new(c.queue.get()).expect("a static's address is not null");
            let staging = NonNull::new(c.staging.get()).expect("a static's address is not null");
            // SAFETY: the two arrays are this stream's own, disjoint, live as long as the
            // `'static` trace, and are reached by nothing but this slot from here on.
            let slot = unsafe { StreamSlot::new(queue, staging, i as u32, first_id) };
            // SAFETY: STARTING is ours alone (the exchange above), and nothing reads the slot
            // or the stream before STARTED.
            unsafe {
                (*c.slot.get()).write(slot);
                (*c.local.get()).write(BareStream::new());
            }
        }
        waffle::clock::set_clock(config.clock);
        // A chunk is pushed at the first record that finds its oldest about a millisecond old.
        waffle::local::set_flush_ticks((config.ticks_per_second / 1000).max(1));
        waffle::runtime::set_trace_id(waffle::TraceId::from_u128(config.trace_id));
        // SAFETY: as for the slots: written once while STARTING, read only after STARTED.
        let hooks = unsafe {
            (*self.config.get()).write(config);
            (*self.hooks.get()).write(Hooks { acquire: Self::acquire, release: |_| {} })
        };
        set_stream_selector(Self::select);
        self.state.store(STARTED, Ordering::Release);
        self.epoch.store(runtime::install(hooks), Ordering::Release);
        Ok(())
    }

    /// Whether recording is on.
    fn started(&self) -> bool {
        self.state.load(Ordering::Acquire) == STARTED
    }

    /// Whether the slots and the configuration were made (recording on, or finished).
    fn made(&self) -> bool {
        self.state.load(Ordering::Acquire) >= STARTED
    }

    fn config(&self) -> &Config {
        // SAFETY: called only after `made` (or `started`) saw STARTED or FINISHED, which
        // follow the write.
        unsafe { (*self.config.get()).assume_init_ref() }
    }

    fn slot(&self, i: usize) -> &StreamSlot {
        // SAFETY: as for `config`: every slot was written before STARTED.
        unsafe { (*self.levels[i].slot.get()).assume_init_ref() }
    }

    fn stream(&self, i: usize) -> &BareStream {
        // SAFETY: as for `config`: every stream was written before STARTED.
        unsafe { (*self.levels[i].local.get()).assume_init_ref() }
    }

    /// The started trace, if it is this type's.
    fn active() -> Option<&'static Self> {
        let p = ACTIVE.load(Ordering::Acquire) as *const Self;
        // SAFETY: `select` and `acquire` are installed only by `start` of a trace of this
        // type, which stored its own `'static` address first.
        let t = unsafe { p.as_ref()? };
        t.started().then_some(t)
    }

    /// The selector: the stream `config.stream_of` names, or one that records nothing.
    fn select() -> &'static BareStream {
        match Self::active() {
            Some(t) => match (t.config().stream_of)() {
                i if i < N => t.stream(i),
                _ => &OUTSIDE,
            },
            None => &OUTSIDE,
        }
    }

    /// The hook: the calling stream's slot, claimed (each stream has one for good).
    fn acquire() -> Option<&'static StreamSlot> {
        let t = Self::active()?;
        let i = (t.config().stream_of)();
        if i >= t.config().streams.len() {
            return None;
        }
        let slot = t.slot(i);
        slot.try_claim()?;
        Some(slot)
    }

    /// Writes what the queues hold as frames to `output`: the first time, the file head,
    /// HEADER and the CALLSITES of every callsite in the firmware; then a STREAM frame for a
    /// stream that began recording, and DATA frames of its chunks. Call it from the main
    /// loop, as often as the output keeps up with; interrupts keep recording meanwhile. Nothing
    /// happens before [`start`](Self::start). Not re-entrant: one caller at a time.
    pub fn drain<S: Output>(&self, output: &mut S) -> Result<(), S::Error> {
        if !self.started() {
            return Ok(());
        }
        self.drain_made(output)
    }

    /// [`drain`](Self::drain) once the slots are made.
    fn drain_made<S: Output>(&self, output: &mut S) -> Result<(), S::Error> {
        let config = self.config();
        if !self.head_written.load(Ordering::Relaxed) {
            frames::file_head(output)?;
            let calibration = Calibration {
                anchor_ticks: 0,
                anchor_unix_ns: config.unix_ns_at_zero,
                ticks: config.ticks_per_second,
                ns: 1_000_000_000,
            };
            let h = HeaderFields {
                name: config.name,
                host: config.host,
                calibration,
                salt: config.salt,
                trace_id: config.trace_id,
            };
            frames::frame(output, frame::HEADER, |out| frames::header(&h, out))?;
            frames::all_callsites(output)?;
            self.head_written.store(true, Ordering::Relaxed);
        }
        for (i, c) in self.levels.iter().enumerate().take(config.streams.len()) {
            let slot = self.slot(i);
            let generation = slot.generation();
            if generation != 0 && c.described.load(Ordering::Relaxed) != generation {
                let name = config.streams[i];
                frames::frame(output, frame::STREAM, |out| frames::stream(i as u32, generation, name, out))?;
                c.described.store(generation, Ordering::Relaxed);
            }
            // The queue hands over its committed bytes in at most two pieces (before and
            // after it wraps); two passes take everything that was there when this began.
            for _ in 0..2 {
                let mut result = Ok(());
                slot.drain_with(|chunks| {
                    result = frames::frame(output, frame::DATA, |out| frames::data(i as u32, chunks, out))
                });
                result?;
            }
        }
        Ok(())
    }

    /// Ends the trace: pushes what every stream has staged (with interrupts masked, so that
    /// none records meanwhile), drains, and writes END with each stream's dropped records.
    /// Recording stops; spans still open stay open in the file.
    pub fn finish<S: Output>(&self, output: &mut S) -> Result<(), S::Error> {
        if self.state.compare_exchange(STARTED, FINISHED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Ok(());
        }
        runtime::uninstall(self.epoch.load(Ordering::Acquire));
        masked(|| {
            // With std (a host), the calling thread's own stream; on bare metal each one.
            waffle::flush();
            for i in 0..N {
                self.stream(i).with(Local::flush);
            }
        });
        self.drain_made(output)?;
        let n = self.config().streams.len();
        let mut drops = [(0u32, 0u64); N];
        for (i, d) in drops.iter_mut().enumerate().take(n) {
            *d = (i as u32, self.slot(i).dropped());
        }
        frames::frame(output, frame::END, |out| frames::end(&drops[..n], out))
    }

    /// Records each stream dropped so far because its queue was full, by stream.
    pub fn dropped(&self, stream: usize) -> u64 {
        if !self.made() || stream >= self.config().streams.len() {
            return 0;
        }
        self.slot(stream).dropped()
    }
}

impl<const N: usize, const QUEUE: usize, const STAGING: usize> Default for Trace<N, QUEUE, STAGING> {
    fn default() -> Self {
        Self::new()
    }
}
