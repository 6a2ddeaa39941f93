//! The second pass: packets written as records arrive.
//!
//! Each thread is one sequence with its own interning tables, indexed by callsite so that no
//! record hashes a string; a span's begin and end nest because the records come in their
//! stream's order. Every sequence starts with defaults (its thread track, its incremental
//! clock), so a packet carries neither its track nor an absolute time: its timestamp is the
//! time since the sequence's previous packet. A detached span (known from the [`Plan`]) gets a
//! track of its own when it begins, which its packets name; its end waits on its thread's
//! sequence until that sequence's time passes it, so the sequence's time never goes back. Flow
//! ids come from the plan: an item that others refer to starts its flows, each referrer takes
//! the next one (`causal.rs`).
//!
//! A writer starts at a process and writes it and those after it: one writer writes every
//! file, or, where the plan allows it ([`Plan::apart`]), each file has a writer of its own
//! (on a thread of its own) and the outputs are joined in file order. Either way every process
//! starts from what the plan says of it (its uuids, its sequence ids, the references met
//! before it), so the bytes are the same.

use std::{
    cmp::Reverse,
    io::{self, Write},
    sync::Arc,
};
use waffle_wire::{Calibration, Converter};

use prost::Message;

use super::{
    clock_snapshot, first_packet,
    groups::{Group, GroupKey},
    order::OrderSite,
    packet::Packets,
    plan::{made_uuids, Found, Met, Part, Plan},
    process_track, proto,
    put::{Tag, TRACE_PACKET_KEY},
    sequence::{Seq, Special},
    TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use crate::{
    decode::{
        stream::{FileEnd, Header, Item, Sink},
        FieldValue,
    },
    reader::Warning,
    Error,
    {
        index::{IdMap, Keys},
        passes::{Pass, Records},
    },
};

mod causal;
mod steps;

use causal::Causal;
use steps::Steps;

/// Packets are handed to the output in blocks of about this size.
const BLOCK: usize = 1 << 20;

/// The [`Sink`] that writes the `.pftrace`.
pub(super) struct Writer<'o> {
    out: &'o mut dyn Write,
    error: Option<io::Error>,
    plan: Arc<Plan>,
    /// What the writer takes of the plan for each process it comes to, in order.
    parts: std::vec::IntoIter<Part>,
    /// Per referenced item (as the plan's targets), its references met so far; and those
    /// met in this process, to start the next afresh when files are written apart.
    met: Vec<Met>,
    touched: Vec<u32>,
    /// The large correlation groups, counting their members as they come.
    large: IdMap<GroupKey, Group>,
    /// Correlation keys by callsite, as the plan numbers them.
    keys: Keys,
    found: Found,
    /// The calibration of the next file, when known in advance (its last CLOCK frame's).
    next_calibration: Option<Calibration>,
    cal: Converter,
    process: usize,
    process_track: u64,
    seqs: Vec<Seq>,
    /// The last uuid given to a track made on the way (a detached span's, a thread's steps).
    made_uuid: u64,
    ev: Packets,
    causal: Causal,
    /// The current process's callsites matched by order, by callsite index.
    order: Vec<OrderSite>,
    /// Step spans and their tracks.
    steps: Steps,
}

impl<'o> Writer<'o> {
    /// A writer of every process of `plan`, from the first.
    pub(super) fn new(out: &'o mut dyn Write, mut plan: Plan) -> Self {
        let parts = std::mem::take(&mut plan.parts);
        let large = std::mem::take(&mut plan.large);
        Writer::from(out, Arc::new(plan), parts, large, 0)
    }

    /// A writer of the processes from `first` on, whose parts of the plan are `parts`.
    pub(super) fn from(
        out: &'o mut dyn Write,
        plan: Arc<Plan>,
        parts: Vec<Part>,
        large: IdMap<GroupKey, Group>,
        first: usize,
    ) -> Self {
        Writer {
            out,
            error: None,
            met: vec![Met::default(); plan.targets.len()],
            touched: Vec::new(),
            keys: plan.keys.clone(),
            plan,
            parts: parts.into_iter(),
            large,
            found: [(0, usize::MAX); 8],
            next_calibration: None,
            cal: Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 }.converter(),
            process: first.wrapping_sub(1),
            process_track: 0,
            seqs: Vec::new(),
            made_uuid: 0,
            ev: Packets::with_capacity(BLOCK + (64 << 10)),
            causal: Causal::default(),
            order: Vec::new(),
            steps: Steps::default(),
        }
    }

    /// Writes what is left; the first write error, if any.
    fn close(mut self) -> io::Result<()> {
        self.drain(true);
        match self.error.take() {
            Some(e) => Err(e),
            None => self.out.flush(),
        }
    }

    /// Hands the packets written so far to the output once there are enough (or `all`).
    /// Checked after every packet, so the check is inlined and the write is not.
    #[inline(always)]
    fn drain(&mut self, all: bool) {
        if all || self.ev.len() >= BLOCK {
            self.write_out();
        }
    }

    #[cold]
    #[inline(never)]
    fn write_out(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(self.ev.bytes()) {
                self.error = Some(e);
            }
        }
        self.ev.clear();
    }

    fn message(&mut self, packet: &proto::TracePacket) {
        let mut bytes = vec![TRACE_PACKET_KEY];
        packet.encode_length_delimited(&mut bytes).expect("a Vec grows");
        self.ev.put(&bytes);
        self.drain(false);
    }

    /// A uuid for a track made on the way.
    fn uuid(&mut self) -> u64 {
        self.made_uuid += 1;
        self.made_uuid
    }

    /// Time `ticks` on sequence `t` in Unix ns, after writing the detached ends that come
    /// before it.
    #[inline(always)]
    fn time(&mut self, t: usize, ticks: u64) -> u64 {
        let ts = self.cal.to_unix_ns(ticks);
        if !self.seqs[t].ends.is_empty() {
            self.ends_before(t, ts);
        }
        ts
    }

    /// Writes the detached ends of sequence `t` that come before `ts`.
    #[cold]
    fn ends_before(&mut self, t: usize, ts: u64) {
        while let Some(&Reverse((end, track, ended))) = self.seqs[t].ends.peek() {
            if end >= ts.max(self.seqs[t].last_ts) {
                break;
            }
            self.seqs[t].ends.pop();
            self.end_packet(t, end, Some(track), ended);
        }
    }

    /// A slice end at `ts` on sequence `t`: on `track`, or on the thread's track if `None`.
    #[cold]
    fn end_packet(&mut self, t: usize, ts: u64, track: Option<u64>, ended: bool) {
        let seq = &mut self.seqs[t];
        let delta = seq.advance(ts);
        if ended && track.is_none() {
            self.ev.slice_end(delta, seq.key);
        } else {
            self.ev.begin(delta, seq.key);
            if !ended {
                let iid = seq.special(Special::Unfinished, &mut self.ev);
                self.ev.annotation(iid, FieldValue::Bool(true));
            }
            self.ev.end(TYPE_SLICE_END, Tag::NONE, track, &[], &[]);
        }
        self.drain(false);
    }

    /// Whether `id` is a referenced item of thread `t`, and which.
    #[inline(always)]
    fn target(&mut self, t: usize, id: u64) -> Option<usize> {
        let (ids, seq) = (&self.plan.ids, &mut self.seqs[t]);
        // Between the last id looked for and the next target: not one (most items).
        if (seq.looked..seq.next_target).contains(&id) || id == 0 {
            return None;
        }
        let i = seek(ids, seq.cursor, |&x| x < id);
        (seq.cursor, seq.looked, seq.next_target) = (i, id, ids.get(i).copied().unwrap_or(u64::MAX));
        (seq.next_target == id).then_some(i)
    }

    /// Writes a span's begin or an event on `track` (`None`: the thread's).
    #[inline(always)]
    fn item(&mut self, t: usize, r: &Item<'_>, kind: i32, track: Option<u64>, target: Option<usize>) {
        let at_ns = self.time(t, r.ticks);
        let seq = &mut self.seqs[t];
        let delta = seq.advance(at_ns);
        let parent_elsewhere = match r.parent {
            Some(parent) => track.is_some() || seq.open.last() != Some(&parent),
            None => false,
        };
        let key = seq.key;
        let (name, names) = seq.names(r, &mut self.ev);
        // Matched by order with the same span on other ranks (spans only; stand-ins, id 0, not).
        let matched = match self.order.get(r.callsite_index as usize) {
            Some(o) if o.name != OrderSite::NONE && kind == TYPE_SLICE_BEGIN && r.id != 0 => Some(*o),
            _ => None,
        };
        if target.is_some()
            || !r.links.is_empty()
            || parent_elsewhere
            || r.correlation.is_some()
            || matched.is_some()
        {
            // Causes and effects: rare, and written out of line.
            self.ev.begin(delta, key);
            self.ev.fields(names, r.fields);
            self.causal(t, r, at_ns, kind, name, track, target, matched);
        } else {
            self.ev.event(delta, key, kind, name, track, names, r.fields);
        }
        self.drain(false);
    }
}

/// The first index of sorted `items` at which `before` is false, looked for from `from`
/// onwards first (where the previous search of an ascending series ended).
#[inline]
fn seek<T>(items: &[T], from: usize, before: impl Fn(&T) -> bool) -> usize {
    let mut i = from.min(items.len());
    if i > 0 && !before(&items[i - 1]) {
        return items.partition_point(before);
    }
    // A few steps forward, then a search of the rest.
    for _ in 0..4 {
        if i == items.len() || !before(&items[i]) {
            return i;
        }
        i += 1;
    }
    i + items[i..].partition_point(before)
}

impl Seq {
    /// Moves the sequence's clock to `ts` (never back): by how much.
    #[inline]
    fn advance(&mut self, ts: u64) -> u64 {
        let ts = ts.max(self.last_ts);
        let delta = ts - self.last_ts;
        self.last_ts = ts;
        delta
    }
}

/// The second pass: one writer over every file, so sequence ids and track uuids run on.
impl Pass for Writer<'_> {
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error> {
        self.next_calibration = records.calibration();
        records.decode(self)
    }

    /// Every file read: the detached ends still waiting, then the last block.
    fn finish(self) -> io::Result<()> {
        self.close()
    }
}

impl Sink for Writer<'_> {
    /// The span's own track if detached, `STEP` and its track for a step, else 0 (the thread's).
    type Span = u64;

    /// Writes the process's track and its threads' tracks, each thread's as the first packet
    /// of its sequence (with the sequence's defaults), then each sequence's clock.
    fn process(&mut self, _source: &str, header: &Header) {
        self.process = self.process.wrapping_add(1);
        let p = self.process;
        self.cal = self.next_calibration.take().unwrap_or(header.calibration).converter();
        self.keys.next_process();
        self.steps.next_process();
        let part = self.parts.next().unwrap_or_default();
        self.order = part.order;
        if self.plan.apart {
            // As if this process were the first the writer met: what the files before met
            // comes from the plan.
            for i in self.touched.drain(..) {
                self.met[i as usize] = Met::default();
            }
            for (i, met) in part.met {
                self.met[i as usize] = met;
                self.touched.push(i);
            }
        }
        self.made_uuid = made_uuids(p);
        let (first_uuid, first_seq) = self.plan.firsts[p];
        self.process_track = first_uuid;
        let mut packet = first_packet(first_seq);
        let plan: &crate::process::ProcessInfo = &self.plan.processes[p];
        packet.track_descriptor = Some(process_track(&plan.header, self.plan.pids[p], self.process_track));
        self.message(&packet);
        self.seqs.clear();
        let mut queues = part.queues.into_iter();
        for t in 0..self.plan.processes[p].threads.len() {
            let (track, id) = (first_uuid + 1 + t as u64, first_seq + 1 + t as u32);
            let thread = &self.plan.processes[p].threads[t];
            let mut packet = first_packet(id);
            packet.previous_packet_dropped = (thread.dropped > 0).then_some(true);
            let ids = (self.plan.pids[p], self.plan.tids[p][t]);
            packet.track_descriptor =
                Some(super::track::thread_track(thread, track, self.process_track, ids));
            packet.trace_packet_defaults = Some(super::defaults(track));
            self.message(&packet);
            self.message(&clock_snapshot(id));
            self.seqs.push(Seq::new(id, queues.next().unwrap_or_default()));
        }
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        if thread >= self.seqs.len() && self.error.is_none() {
            self.error = Some(io::Error::other("a trace file changed while it was being exported"));
        }
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    #[inline(always)]
    fn span_begin(&mut self, t: usize, r: &Item<'_>) -> u64 {
        if t >= self.seqs.len() {
            return 0;
        }
        let target = self.target(t, r.id);
        if !target.is_some_and(|i| self.plan.targets[i].detached) {
            if self.steps.is_step(r) {
                return self.step_begin(t, r, target);
            }
            self.item(t, r, TYPE_SLICE_BEGIN, None, target);
            self.seqs[t].open.push(r.id);
            return 0;
        }
        let track = self.uuid();
        let packet = proto::TracePacket {
            trusted_packet_sequence_id: Some(self.seqs[t].id),
            track_descriptor: Some(proto::TrackDescriptor {
                uuid: Some(track),
                parent_uuid: Some(self.process_track),
                name: Some(r.callsite.name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.message(&packet);
        self.item(t, r, TYPE_SLICE_BEGIN, Some(track), target);
        track
    }

    #[inline(always)]
    fn event(&mut self, t: usize, r: &Item<'_>) {
        if t >= self.seqs.len() {
            return;
        }
        let target = self.target(t, r.id);
        self.item(t, r, TYPE_INSTANT, None, target);
    }

    #[inline(always)]
    fn span_end(&mut self, t: usize, span: u64, ticks: u64, ended: bool) {
        if t >= self.seqs.len() {
            return;
        }
        if span != 0 {
            // A step, or on a track of its own yet ended on its stack: only if the two passes
            // read different records. It still ends on its own track.
            return self.off_thread_end(t, span, ticks, ended);
        }
        let ts = self.time(t, ticks);
        let seq = &mut self.seqs[t];
        seq.open.pop();
        if ended {
            self.ev.slice_end(seq.advance(ts), seq.key);
            self.drain(false);
        } else {
            self.end_packet(t, ts, None, false);
        }
    }

    fn detach(&mut self, t: usize, span: u64, id: u64) {
        // The plan knows every detached span, so it began on a track of its own. Were it on the
        // thread's track (the two passes read different records), it ends there now, where it
        // leaves the thread, rather than never.
        if span == 0 && t < self.seqs.len() && self.seqs[t].open.last() == Some(&id) {
            self.seqs[t].open.pop();
            let ts = self.seqs[t].last_ts;
            self.end_packet(t, ts, None, false);
        }
    }

    fn detached_end(&mut self, t: usize, span: u64, ticks: u64, ended: bool) {
        if t >= self.seqs.len() || span == 0 {
            return;
        }
        let ts = self.cal.to_unix_ns(ticks);
        self.seqs[t].ends.push(Reverse((ts, span, ended)));
    }

    fn finish(&mut self, _end: &FileEnd) {
        for t in 0..self.seqs.len() {
            while let Some(Reverse((ts, track, ended))) = self.seqs[t].ends.pop() {
                self.end_packet(t, ts, Some(track), ended);
            }
        }
    }
}
