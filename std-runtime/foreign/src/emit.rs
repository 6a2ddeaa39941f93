//! Threads written as they come: each thread's events wait in a window, in begin order (see
//! [`hold`]), and the earliest are written once the window is full (a `trace.bin` stream needs its records in
//! time order, nested). What is written stays written, so a later event that begins before
//! the last one written means the file is not in time order per thread: the conversion then
//! starts again with a window that holds the whole file. Memory is the window per thread, the
//! open spans and the callsites.

use crate::chunk::ChunkWriter;
use crate::sites::Sites;
use std::io::{self, Write};
use waffle_wire::{
    envelope::{encode_frame, file_head},
    frame,
    frames::{Callsites, Clock, End, FramePayload, Header, Stream},
    tag, Calibration,
};

/// Events a thread holds before it writes the earliest half of them.
pub(crate) const WINDOW: usize = 1 << 12;

/// How far before the last held item a new one may go in its place; one that goes further
/// leaves the held items to be sorted when they are written.
const NEAR: usize = 64;

/// The order items of one thread are written in: by begin, an `E` before a span and a span
/// before an instant at one time, the longer of two spans first (it holds the other).
pub(crate) fn order(a: &Ev, b: &Ev) -> std::cmp::Ordering {
    a.start.cmp(&b.start).then(a.what.cmp(&b.what)).then(b.end.cmp(&a.end))
}

/// Adds `ev` to the items held, in its place after those it ties with (where a stable sort
/// would put it) while they are in order: most items come in order, and a span that a file
/// gives after what it holds (the profiler's step markers) comes a few items early. One that
/// comes further back is added at the end and leaves them to be sorted.
pub(crate) fn hold(pending: &mut Vec<Ev>, sorted: &mut bool, ev: Ev) {
    let at = match pending.last() {
        Some(last) if *sorted && order(last, &ev).is_gt() => {
            pending.partition_point(|held| order(held, &ev).is_le())
        }
        _ => pending.len(),
    };
    if pending.len() - at > NEAR {
        *sorted = false;
        pending.push(ev);
    } else {
        pending.insert(at, ev);
    }
}

/// The end of a span begun by `B` whose `E` has not come.
const OPEN: u64 = u64::MAX;

/// What an item is; the order items of one time are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum What {
    /// The `E` of a `B`: ends the innermost span `B` began.
    End,
    Span,
    Instant,
}

/// One item on its thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ev {
    pub start: u64,
    /// A span's end ([`OPEN`] for a `B`), else its start.
    pub end: u64,
    pub site: u32,
    pub what: What,
    /// Its correlation value (the key is its callsite's).
    pub correlation: Option<u64>,
    /// Its field values' bytes in its thread's arena.
    args: (u32, u32),
}

impl Ev {
    pub(crate) fn new(what: What, (start, end): (u64, u64), site: u32, correlation: Option<u64>) -> Ev {
        Ev { start, end, site, what, correlation, args: (0, 0) }
    }
}

/// The file's events are not in time order on one thread.
#[derive(Debug)]
pub(crate) struct Disorder;

/// One process's file.
pub(crate) struct Output {
    out: Box<dyn Write>,
    /// Callsites already described in it.
    described: usize,
    calibration: Calibration,
}

/// One thread of the input, a stream of one output.
pub(crate) struct Thread {
    pub output: usize,
    pub stream: u32,
    pub tid: u64,
    pub name: String,
    /// Items held, in the order they are written once `sorted` (else sorted first).
    pending: Vec<Ev>,
    /// Whether `pending` is in order: kept so by inserting an item that comes a little early
    /// in its place, and given up for one that comes far earlier (the flush then sorts).
    sorted: bool,
    arena: Vec<u8>,
    /// The begin of the latest item written: nothing earlier may come.
    written: u64,
    /// The latest time met.
    last: u64,
    ends: Vec<u64>,
    chunk: ChunkWriter,
    /// Whether its STREAM frame is written (again after a rename).
    named: bool,
}

/// Counts of what was changed on the way.
#[derive(Debug, Default)]
pub(crate) struct Changed {
    pub cut: u64,
    pub unmatched_end: u64,
    pub unclosed: u64,
}

/// Every thread and output of one conversion.
pub(crate) struct Emit {
    pub threads: Vec<Thread>,
    pub outputs: Vec<Output>,
    pub changed: Changed,
    window: usize,
}

fn frame_out(out: &mut dyn Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let bytes = encode_frame(kind, payload)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a frame over the format's 16 MiB"))?;
    out.write_all(&bytes)
}

impl Emit {
    /// `window`: events each thread holds before writing (`usize::MAX`: all, to the end).
    pub(crate) fn new(window: usize) -> Emit {
        Emit { threads: Vec::new(), outputs: Vec::new(), changed: Changed::default(), window }
    }

    /// A new output file, its head and HEADER written.
    pub(crate) fn output(&mut self, mut out: Box<dyn Write>, header: &Header) -> io::Result<usize> {
        out.write_all(&file_head())?;
        frame_out(&mut *out, frame::HEADER, &header.encode())?;
        self.outputs.push(Output { out, described: 0, calibration: header.calibration });
        Ok(self.outputs.len() - 1)
    }

    /// A new thread of output `output`; its salt makes its ids.
    pub(crate) fn thread(&mut self, output: usize, tid: u64, name: String, salt: u64) -> usize {
        let stream = self.threads.iter().filter(|t| t.output == output).count() as u32 + 1;
        let first = salt << 44 | u64::from(stream) << 32 | 1;
        self.threads.push(Thread {
            output,
            stream,
            tid,
            name,
            pending: Vec::new(),
            sorted: true,
            arena: Vec::new(),
            written: 0,
            last: 0,
            ends: Vec::new(),
            chunk: ChunkWriter::new(stream, first),
            named: false,
        });
        self.threads.len() - 1
    }

    /// Names thread `t` anew (metadata that came after its first events).
    pub(crate) fn rename(&mut self, t: usize, name: String) {
        let th = &mut self.threads[t];
        th.named = th.named && th.name == name;
        th.name = name;
    }

    /// The last calibration of output `o`: its CLOCK frame at the end.
    pub(crate) fn calibrate(&mut self, o: usize, calibration: Calibration) {
        self.outputs[o].calibration = calibration;
    }

    /// Adds an item to thread `t` with its encoded fields, writing the earliest held items
    /// when its window is full.
    pub(crate) fn push(
        &mut self,
        t: usize,
        mut ev: Ev,
        fields: &[u8],
        sites: &Sites,
    ) -> Result<io::Result<()>, Disorder> {
        let th = &mut self.threads[t];
        if ev.start < th.written {
            return Err(Disorder);
        }
        let from = th.arena.len() as u32;
        th.arena.extend_from_slice(fields);
        ev.args = (from, th.arena.len() as u32);
        th.last = th.last.max(ev.start).max(if ev.end == OPEN { 0 } else { ev.end });
        hold(&mut th.pending, &mut th.sorted, ev);
        if th.pending.len() >= self.window.saturating_mul(2) {
            return Ok(self.flush(t, self.window, sites));
        }
        Ok(Ok(()))
    }

    /// Writes the `n` earliest items of thread `t`.
    fn flush(&mut self, t: usize, n: usize, sites: &Sites) -> io::Result<()> {
        let th = &mut self.threads[t];
        if !th.sorted {
            th.pending.sort_by(order);
            th.sorted = true;
        }
        let n = n.min(th.pending.len());
        let items: Vec<Ev> = th.pending.drain(..n).collect();
        for e in &items {
            if th.chunk.full() {
                let depth = th.ends.len();
                let chunk = th.chunk.close(depth);
                write_chunk(&mut self.outputs[th.output], th, sites, &chunk.payload)?;
            }
            let ends = &mut th.ends;
            while let Some(&end) = ends.last().filter(|&&end| end <= e.start) {
                ends.pop();
                th.chunk.end(end);
            }
            let fields = &th.arena[e.args.0 as usize..e.args.1 as usize];
            match e.what {
                What::End => match ends.iter().rposition(|&end| end == OPEN) {
                    Some(i) => {
                        self.changed.cut += (ends.len() - i - 1) as u64;
                        while ends.len() > i {
                            ends.pop();
                            th.chunk.end(e.start);
                        }
                    }
                    None => self.changed.unmatched_end += 1,
                },
                What::Span => {
                    let end = match ends.last() {
                        Some(&outer) if e.end > outer => {
                            self.changed.cut += 1;
                            outer
                        }
                        _ => e.end,
                    };
                    th.chunk.item(tag::SPAN_BEGIN, e.site, e.start, fields);
                    ends.push(end);
                }
                What::Instant => th.chunk.item(tag::EVENT, e.site, e.start, fields),
            }
            if let (Some(v), false) = (e.correlation, e.what == What::End) {
                th.chunk.correlate(v);
            }
            th.written = e.start;
        }
        // The fields of what is still held, moved to the front of the arena.
        if th.pending.is_empty() {
            th.arena.clear();
        } else {
            let base = th.pending.iter().map(|e| e.args.0).min().unwrap_or(0);
            th.arena.drain(..base as usize);
            for e in &mut th.pending {
                e.args = (e.args.0 - base, e.args.1 - base);
            }
        }
        Ok(())
    }

    /// Writes everything still held, ends what is open, and closes every output.
    pub(crate) fn finish(&mut self, sites: &Sites) -> io::Result<()> {
        for t in 0..self.threads.len() {
            self.flush(t, usize::MAX, sites)?;
            let th = &mut self.threads[t];
            while let Some(end) = th.ends.pop() {
                if end == OPEN {
                    self.changed.unclosed += 1;
                }
                th.chunk.end(if end == OPEN { th.last } else { end });
            }
            let o = &mut self.outputs[th.output];
            if th.chunk.records > 0 {
                let chunk = th.chunk.close(0);
                write_chunk(o, th, sites, &chunk.payload)?;
            } else {
                describe(o, th, sites)?;
            }
        }
        for o in &mut self.outputs {
            frame_out(&mut *o.out, frame::CLOCK, &Clock { calibration: o.calibration }.encode())?;
            frame_out(&mut *o.out, frame::END, &End::default().encode())?;
            o.out.flush()?;
        }
        Ok(())
    }
}

/// The callsites output `o` has not described yet, and thread `th`'s STREAM if not written.
fn describe(o: &mut Output, th: &mut Thread, sites: &Sites) -> io::Result<()> {
    if o.described < sites.list.len() {
        let descs: Vec<_> = sites.list[o.described..].iter().map(|s| s.desc()).collect();
        for (n, part) in descs.chunks(1024).enumerate() {
            let first = (o.described + n * 1024) as u32;
            frame_out(
                &mut *o.out,
                frame::CALLSITES,
                &Callsites { module: 0, first, callsites: part.to_vec() }.encode(),
            )?;
        }
        o.described = sites.list.len();
    }
    if !th.named {
        let s = Stream {
            stream: th.stream,
            generation: 1,
            module: 0,
            tid: th.tid,
            name: th.name.as_str().into(),
        };
        frame_out(&mut *o.out, frame::STREAM, &s.encode())?;
        th.named = true;
    }
    Ok(())
}

fn write_chunk(o: &mut Output, th: &mut Thread, sites: &Sites, payload: &[u8]) -> io::Result<()> {
    describe(o, th, sites)?;
    frame_out(&mut *o.out, frame::DATA, payload)
}
