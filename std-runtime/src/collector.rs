//! The collector thread: drains every stream's queue into `trace.bin`.
//!
//! One pass every drain interval (1 ms by default): write a STREAM frame for each new owner of
//! a slot, then one DATA frame per read of each queue (reads hold whole chunks), then recycle
//! slots whose threads exited. The file is flushed after each pass that wrote something, so a
//! process killed outright loses at most what was staged or queued in the last interval. At
//! stop, a last pass runs, then the refined clock calibration and per-stream drop totals.

use crate::{
    clock,
    frames::{FrameWriter, Payload},
    registry,
};
use std::{
    collections::HashMap,
    fs::File,
    io::{self, BufWriter},
    sync::{mpsc, Arc},
    thread,
    time::Duration,
};
use waffle::wire::frame;

/// Totals of one session, returned by [`Session::stop`](crate::Session::stop).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes of record chunks written.
    pub data_bytes: u64,
    /// DATA frames written.
    pub data_frames: u64,
    /// Records dropped because a queue was full, over all streams.
    pub dropped: u64,
    /// Streams that recorded.
    pub streams: u64,
    /// Threads that recorded nothing because the process reached its stream limit.
    pub refused_threads: u64,
}

pub(crate) struct Collector {
    stop: mpsc::Sender<()>,
    handle: thread::JoinHandle<io::Result<Stats>>,
}

impl Collector {
    pub(crate) fn spawn(
        writer: FrameWriter<BufWriter<File>>,
        start: Arc<clock::Start>,
        interval: Duration,
    ) -> io::Result<Collector> {
        let (stop, stopped) = mpsc::channel();
        let handle = thread::Builder::new()
            .name("waffle-collector".into())
            .spawn(move || run(writer, &start, interval, stopped))?;
        Ok(Collector { stop, handle })
    }

    pub(crate) fn finish(self) -> io::Result<Stats> {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_else(|_| Err(io::Error::other("the waffle collector thread panicked")))
    }
}

struct State {
    out: FrameWriter<BufWriter<File>>,
    stats: Stats,
    /// Drop count of each slot when this session first saw it, to report this session's share.
    dropped_at_start: HashMap<u32, u64>,
    /// Run-time callsites already in the file.
    dynamic_written: usize,
}

fn run(
    out: FrameWriter<BufWriter<File>>,
    start: &clock::Start,
    interval: Duration,
    stopped: mpsc::Receiver<()>,
) -> io::Result<Stats> {
    let mut st = State { out, stats: Stats::default(), dropped_at_start: HashMap::new(), dynamic_written: 0 };
    loop {
        let stopping = !matches!(stopped.recv_timeout(interval), Err(mpsc::RecvTimeoutError::Timeout));
        if pass(&mut st)? {
            st.out.flush()?;
        }
        if stopping {
            break;
        }
    }
    pass(&mut st)?;
    let cal = start.measure();
    let mut p = Payload::new();
    p.varint(cal.anchor_ticks).varint(cal.anchor_unix_ns).varint(cal.ticks).varint(cal.ns);
    st.out.frame(frame::CLOCK, &[&p.0])?;
    let mut p = Payload::new();
    let mut totals: Vec<_> = st.dropped_at_start.iter().map(|(&s, &d0)| (s, d0)).collect();
    totals.sort_unstable();
    let slots = registry::slots();
    p.varint(totals.len() as u64);
    for (stream, d0) in totals {
        let d = slots[stream as usize].dropped().saturating_sub(d0);
        st.stats.dropped += d;
        p.varint(u64::from(stream)).varint(d);
    }
    st.out.frame(frame::END, &[&p.0])?;
    st.out.flush()?;
    // Best effort: a device such as /dev/null cannot be synced, and the data is written.
    let _ = st.out.get_mut().get_ref().sync_data();
    st.stats.streams = st.dropped_at_start.len() as u64;
    st.stats.refused_threads = registry::refused();
    Ok(st.stats)
}

/// One drain of everything; returns whether anything was written.
///
/// The queues are read first and written last, so that every callsite registered and every
/// owner announced before a chunk was pushed is in the file before that chunk.
fn pass(st: &mut State) -> io::Result<bool> {
    let released = registry::take_released();
    let mut drained: Vec<(u32, Vec<u8>)> = Vec::new();
    for slot in registry::slots() {
        st.dropped_at_start.entry(slot.index()).or_insert_with(|| slot.dropped());
        while slot.drain_with(|bytes| drained.push((slot.index(), bytes.to_vec()))) > 0 {}
    }
    let mut wrote = false;
    let new_callsites = crate::dynamic::since(st.dynamic_written);
    for (n, chunk) in new_callsites.chunks(1024).enumerate() {
        let first = st.dynamic_written + n * 1024;
        crate::session::write_callsites(
            &mut st.out,
            crate::dynamic::FIRST_DYNAMIC_ID + first as u32,
            chunk.iter().map(|c| crate::session::CallsiteDesc::Model(c)),
        )?;
        wrote = true;
    }
    st.dynamic_written += new_callsites.len();
    for owner in registry::take_new_owners() {
        let mut p = Payload::new();
        p.varint(u64::from(owner.stream)).varint(u64::from(owner.generation)).varint(0);
        p.varint(owner.tid).str(&owner.name);
        st.out.frame(frame::STREAM, &[&p.0])?;
        wrote = true;
    }
    for (stream, bytes) in drained {
        let mut head = Payload::new();
        head.varint(u64::from(stream));
        st.out.frame(frame::DATA, &[&head.0, &bytes])?;
        st.stats.data_bytes += bytes.len() as u64;
        st.stats.data_frames += 1;
        wrote = true;
    }
    registry::make_free(released);
    Ok(wrote)
}
