//! The collector thread: drains every stream's queue into `trace.bin`.
//!
//! One pass every drain interval (1 ms by default): copy what idle threads have staged
//! (`tails.rs`), write a STREAM frame for each new owner of a slot, then one DATA frame per read
//! of each queue (reads hold whole chunks), then the copies as TAIL frames, then recycle slots
//! whose threads exited. The file is flushed (written to the OS) after each pass that wrote
//! something, so a process killed outright loses at most what was staged or queued in the last
//! interval or two, blocked threads included (see `docs/reliability.md` for the measured
//! window). At stop, a last pass runs, copying what every thread still has staged, then the
//! refined clock calibration and per-stream drop totals.
//!
//! A SIGTERM or SIGINT caught by `signals.rs` ends the session the same way from this thread:
//! the loop notices the flag within a few milliseconds, closes the file and says so, and the
//! signal handler then lets the signal kill the process.
//!
//! The collector sleeps on a condition variable rather than a channel, so that a thread that is
//! about to die (a panic hook) can ask for a pass and a file flush right away, without a handle
//! to the session: see [`request_flush`].
//!
//! One thread serves every session of the process, one after another: spawned at the first
//! start, it waits for the next session when one stops.

use crate::{clock, frames::FrameWriter, live::Output, registry, signals, tails::Tails};
use std::{
    cell::Cell,
    collections::{HashMap, HashSet},
    io,
    panic::AssertUnwindSafe,
    sync::{mpsc, Arc, Condvar, Mutex, MutexGuard},
    thread,
    time::{Duration, Instant},
};
use waffle::wire::{Clock, DataHead, Drops, End, Stream};

/// Totals of one session, returned by [`Session::stop`](crate::Session::stop).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes of record chunks written.
    pub data_bytes: u64,
    /// DATA frames written.
    pub data_frames: u64,
    /// Records dropped because a queue was full, over all streams.
    pub dropped: u64,
    /// Streams (thread buffers) that had an owner during the session.
    pub streams: u64,
    /// Stream slots the process has made so far, over all sessions. Slots of exited threads
    /// are reused once drained, so this stays near the most threads recording at once.
    pub slots: u64,
    /// Threads that recorded nothing because the process reached its stream limit.
    pub refused_threads: u64,
    /// TAIL frames written: copies of records that idle (blocked) threads had staged.
    pub tail_frames: u64,
}

/// What wakes the collector before its interval is up.
struct SignalState {
    /// A collector thread is running.
    running: bool,
    /// The session is stopping: one last pass, then the closing frames.
    stop: bool,
    /// Flush requests made, and the last one served by a pass that flushed the file.
    requested: u64,
    served: u64,
}

static SIGNAL: Mutex<SignalState> =
    Mutex::new(SignalState { running: false, stop: false, requested: 0, served: 0 });
static WAKE: Condvar = Condvar::new();

thread_local! {
    static IS_COLLECTOR: Cell<bool> = const { Cell::new(false) };
}

fn signal() -> MutexGuard<'static, SignalState> {
    // Every update is a single field store, so a poisoned lock is still consistent.
    SIGNAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks the running collector (if any) for a drain pass and a file flush now, and waits up to
/// `timeout` for it; returns whether it was done. Records still staged by other threads are not
/// included: each thread pushes its own (`waffle::flush`). Called by the panic hook; returns at
/// once on the collector thread itself.
pub(crate) fn request_flush(timeout: Duration) -> bool {
    if IS_COLLECTOR.with(Cell::get) {
        return false;
    }
    let mut g = signal();
    if !g.running {
        return false;
    }
    g.requested += 1;
    let want = g.requested;
    WAKE.notify_all();
    let deadline = Instant::now() + timeout;
    while g.running && g.served < want {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        g = WAKE.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0;
    }
    g.served >= want
}

/// Marks the collector stopped when its thread ends, however it ends, so that nobody waits on it.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        let mut g = signal();
        g.running = false;
        g.served = g.requested;
        WAKE.notify_all();
        signals::closed(); // a signal handler waiting for this thread need wait no more
    }
}

/// A running session's hold on the collector thread: [`Collector::finish`] stops the session's
/// loop and takes what it returns.
pub(crate) struct Collector {
    done: mpsc::Receiver<io::Result<Stats>>,
}

/// What one session asks of the collector thread.
struct Job {
    writer: FrameWriter<Output>,
    start: Arc<clock::Start>,
    interval: Duration,
    baseline: HashMap<u32, u64>,
    tails: Tails,
    done: mpsc::SyncSender<io::Result<Stats>>,
}

/// The collector thread of this process, once one is spawned: it waits for the next session's
/// [`Job`] between sessions, so that a session's start and stop cost no thread spawn and join
/// (most of their time before, `benches/README.md`, "Fuzzing"). Its pid tells a child made by
/// `fork`, which has no such thread, from the process that spawned it.
static THREAD: Mutex<Option<(u32, mpsc::Sender<Job>)>> = Mutex::new(None);

impl Collector {
    pub(crate) fn spawn(
        writer: FrameWriter<Output>,
        start: Arc<clock::Start>,
        interval: Duration,
    ) -> io::Result<Collector> {
        {
            let mut g = signal();
            g.running = true;
            g.stop = false;
            g.served = g.requested;
        }
        // Drop counts of the slots earlier sessions made, so that this session reports its own.
        let baseline: HashMap<u32, u64> =
            registry::slots().iter().map(|s| (s.index(), s.dropped())).collect();
        // Before the session begins: any owner now recorded in an earlier one.
        let tails = Tails::after(&registry::slots());
        signals::arm();
        let (done, finished) = mpsc::sync_channel(1);
        let job = Job { writer, start, interval, baseline, tails, done };
        match hand_over(job) {
            Ok(()) => Ok(Collector { done: finished }),
            Err(e) => {
                signal().running = false;
                signals::disarm();
                Err(e)
            }
        }
    }

    pub(crate) fn finish(self) -> io::Result<Stats> {
        signal().stop = true;
        WAKE.notify_all();
        let stats = self.done.recv().unwrap_or_else(|_| {
            Err(io::Error::other("the waffle collector thread ended without closing the file"))
        });
        signals::disarm();
        stats
    }
}

/// Gives `job` to the collector thread, spawning it first if this process has none (the first
/// session, or a thread that is gone).
fn hand_over(job: Job) -> io::Result<()> {
    let mut thread = THREAD.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let job = match thread.as_ref() {
        Some((owner, jobs)) if *owner == pid => match jobs.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(job)) => job,
        },
        _ => job,
    };
    let (jobs, next) = mpsc::channel::<Job>();
    thread::Builder::new().name("waffle-collector".into()).spawn(move || {
        IS_COLLECTOR.with(|c| c.set(true));
        // The signal handler waits for this thread: it must run on another.
        signals::block_here();
        for job in next {
            let Job { writer, start, interval, baseline, tails, done } = job;
            let stats = {
                let _running = Running;
                // A panic ends this session with an error, not the thread: the next session
                // still finds it.
                std::panic::catch_unwind(AssertUnwindSafe(|| run(writer, &start, interval, baseline, tails)))
                    .unwrap_or_else(|_| Err(io::Error::other("the waffle collector thread panicked")))
            };
            let _ = done.send(stats);
        }
    })?;
    jobs.send(job).map_err(|_| io::Error::other("the waffle collector thread ended at its start"))?;
    *thread = Some((pid, jobs));
    Ok(())
}

struct State {
    out: FrameWriter<Output>,
    stats: Stats,
    /// Drop count of each slot when this session started (0 for slots made since), to report
    /// this session's share.
    dropped_at_start: HashMap<u32, u64>,
    /// Slots that had an owner in this session.
    owned: HashSet<u32>,
    /// Run-time callsites already in the file.
    dynamic_written: usize,
    /// Copies of what idle threads staged.
    tails: Tails,
}

fn run(
    out: FrameWriter<Output>,
    start: &clock::Start,
    interval: Duration,
    dropped_at_start: HashMap<u32, u64>,
    tails: Tails,
) -> io::Result<Stats> {
    let mut st = State {
        out,
        stats: Stats::default(),
        dropped_at_start,
        owned: HashSet::new(),
        dynamic_written: 0,
        tails,
    };
    loop {
        let (stopping, request) = wait(interval);
        if pass(&mut st, false)? {
            st.out.flush()?;
        }
        let mut g = signal();
        if g.served < request {
            g.served = request;
            WAKE.notify_all();
        }
        drop(g);
        if stopping {
            break;
        }
    }
    pass(&mut st, true)?;
    st.out.write(&Clock { calibration: start.measure() })?;
    let mut totals: Vec<_> = st.dropped_at_start.iter().map(|(&s, &d0)| (s, d0)).collect();
    totals.sort_unstable();
    let slots = registry::slots();
    let mut end = End::default();
    for (stream, d0) in totals {
        let dropped = slots[stream as usize].dropped().saturating_sub(d0);
        st.stats.dropped += dropped;
        end.drops.push(Drops { stream, dropped });
    }
    st.out.write(&end)?;
    st.out.flush()?;
    // Best effort: a device such as /dev/null cannot be synced, and the data is written.
    let _ = st.out.get_mut().sync_data();
    st.stats.streams = st.owned.len() as u64;
    st.stats.slots = slots.len() as u64;
    st.stats.refused_threads = registry::refused();
    st.stats.tail_frames = st.tails.frames;
    signals::closed();
    Ok(st.stats)
}

/// Waits for the end of the interval, a stop, a flush request or a caught signal; returns
/// whether to stop, and the requests made so far. A signal handler cannot use the condition
/// variable, so the wait looks at its flag every [`signals::POLL`].
fn wait(interval: Duration) -> (bool, u64) {
    let deadline = Instant::now() + interval;
    let mut g = signal();
    loop {
        if g.stop || g.requested != g.served || signals::caught() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        g = WAKE.wait_timeout(g, left.min(signals::POLL)).unwrap_or_else(|e| e.into_inner()).0;
    }
    (g.stop || signals::caught(), g.requested)
}

/// One drain of everything; returns whether anything was written. `last`: the stop's pass,
/// which copies what every thread still has staged.
///
/// The queues are read first and written last, so that every callsite registered and every
/// owner announced before a chunk was pushed is in the file before that chunk. Staged records
/// are copied before the queues are read, and written after them (see `tails.rs`).
fn pass(st: &mut State, last: bool) -> io::Result<bool> {
    let released = registry::take_released();
    let slots = registry::slots();
    st.tails.take(&slots, last);
    let mut drained: Vec<(u32, Vec<u8>)> = Vec::new();
    for slot in slots {
        st.dropped_at_start.entry(slot.index()).or_insert(0);
        while slot.drain_with(|bytes| drained.push((slot.index(), bytes.to_vec()))) > 0 {}
    }
    let mut wrote = false;
    let new_callsites = crate::dynamic::since(st.dynamic_written);
    for (n, chunk) in new_callsites.chunks(1024).enumerate() {
        let first = st.dynamic_written + n * 1024;
        crate::header::write_callsites(
            &mut st.out,
            crate::dynamic::first_dynamic_id() + first as u32,
            chunk.iter().map(|c| waffle::wire::CallsiteDesc::clone(c)).collect(),
        )?;
        wrote = true;
    }
    st.dynamic_written += new_callsites.len();
    for owner in registry::take_new_owners() {
        st.owned.insert(owner.stream);
        st.out.write(&Stream {
            stream: owner.stream,
            generation: owner.generation,
            module: 0,
            tid: owner.tid,
            name: (&owner.name).into(),
        })?;
        wrote = true;
    }
    for (stream, bytes) in drained {
        st.out.data(DataHead { stream }, &bytes)?;
        st.stats.data_bytes += bytes.len() as u64;
        st.stats.data_frames += 1;
        wrote = true;
    }
    wrote |= st.tails.write(&mut st.out)?;
    registry::make_free(released);
    Ok(wrote)
}
