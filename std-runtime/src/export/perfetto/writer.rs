//! The second pass: packets written as records arrive.
//!
//! Each thread is one sequence with its own interning tables, indexed by callsite so that no
//! record hashes a string; a span's begin and end nest because the records come in their
//! stream's order. A detached span (known from the [`Plan`]) gets a track of its own when it
//! begins; its end waits on its thread's sequence until that sequence's time passes it, so the
//! sequence's time never goes back. Flow ids come from the plan: an item that others refer to
//! starts its flows, each referrer takes the next one.

use std::{
    cmp::Reverse,
    fmt::Write as _,
    io::{self, Write},
};

use prost::Message;

use super::{
    first_packet,
    packet::{Packets, TRACE_PACKET_KEY},
    plan::{Plan, ProcessPlan},
    process_track, proto,
    sequence::{Seq, Special},
    TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END, UUID_BASE,
};
use crate::{
    clock::{Calibration, Converter},
    decode::{
        stream::{FileEnd, Header, Item, Sink},
        FieldValue,
    },
};

/// Packets are handed to the output in blocks of about this size.
const BLOCK: usize = 1 << 20;

/// The flow ids and causal annotations of the item being written.
#[derive(Default)]
struct Causal {
    out: Vec<u64>,
    into: Vec<u64>,
    text: String,
}

/// The [`Sink`] that writes the `.pftrace`.
pub(super) struct Writer<'o> {
    out: &'o mut dyn Write,
    error: Option<io::Error>,
    plan: Plan,
    /// The calibration of the next file, when known in advance (its last CLOCK frame's).
    pub(super) next_calibration: Option<Calibration>,
    cal: Converter,
    process: usize,
    process_track: u64,
    seqs: Vec<Seq>,
    next_uuid: u64,
    next_seq: u32,
    ev: Packets,
    causal: Causal,
}

impl<'o> Writer<'o> {
    pub(super) fn new(out: &'o mut dyn Write, plan: Plan) -> Self {
        Writer {
            out,
            error: None,
            plan,
            next_calibration: None,
            cal: Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 }.converter(),
            process: usize::MAX,
            process_track: 0,
            seqs: Vec::new(),
            next_uuid: UUID_BASE,
            next_seq: 0,
            ev: Packets::with_capacity(BLOCK + (64 << 10)),
            causal: Causal::default(),
        }
    }

    /// Writes what is left; the first write error, if any.
    pub(super) fn finish(mut self) -> io::Result<()> {
        self.drain(true);
        match self.error.take() {
            Some(e) => Err(e),
            None => self.out.flush(),
        }
    }

    /// Hands the packets written so far to the output once there are enough (or `all`).
    #[inline]
    fn drain(&mut self, all: bool) {
        if all || self.ev.bytes().len() >= BLOCK {
            if self.error.is_none() {
                if let Err(e) = self.out.write_all(self.ev.bytes()) {
                    self.error = Some(e);
                }
            }
            self.ev.clear();
        }
    }

    fn message(&mut self, packet: &proto::TracePacket) {
        let mut bytes = vec![TRACE_PACKET_KEY];
        packet.encode_length_delimited(&mut bytes).expect("a Vec grows");
        self.ev.put(&bytes);
        self.drain(false);
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    /// Time `ticks` on sequence `t`, after writing the detached ends that come before it: as
    /// converted, and as written (never before the sequence's last packet).
    fn time(&mut self, t: usize, ticks: u64) -> (u64, u64) {
        let ts = self.cal.to_unix_ns(ticks);
        while let Some(&Reverse((end, track, ended))) = self.seqs[t].ends.peek() {
            if end >= ts.max(self.seqs[t].last_ts) {
                break;
            }
            self.seqs[t].ends.pop();
            self.end_packet(t, end, track, ended);
        }
        let seq = &mut self.seqs[t];
        seq.last_ts = seq.last_ts.max(ts);
        (ts, seq.last_ts)
    }

    fn end_packet(&mut self, t: usize, ts: u64, track: u64, ended: bool) {
        let seq = &mut self.seqs[t];
        seq.last_ts = seq.last_ts.max(ts);
        self.ev.begin(seq.last_ts, seq.id);
        if !ended {
            let iid = seq.special(Special::Unfinished, &mut self.ev);
            self.ev.annotation(iid, FieldValue::Bool(true));
        }
        self.ev.end(TYPE_SLICE_END, None, track, &[], &[]);
        self.drain(false);
    }

    /// Whether `id` is a referenced item of thread `t`, and which.
    fn target(&mut self, t: usize, id: u64) -> Option<usize> {
        let (targets, seq) = (&self.plan.targets, &mut self.seqs[t]);
        if id == 0 || targets.is_empty() {
            return None;
        }
        let mut i = seq.cursor.min(targets.len());
        if i > 0 && targets[i - 1].id >= id {
            i = targets.partition_point(|x| x.id < id);
        }
        while i < targets.len() && targets[i].id < id {
            i += 1;
        }
        seq.cursor = i;
        (i < targets.len() && targets[i].id == id).then_some(i)
    }

    /// Writes a span's begin or an event on `track`.
    fn item(&mut self, t: usize, r: &Item<'_>, kind: i32, track: u64, detached: bool, target: Option<usize>) {
        let (at_ns, ts) = self.time(t, r.ticks);
        let Writer { plan, seqs, ev, causal, process, .. } = self;
        let seq = &mut seqs[t];
        let (out, into) = (&mut causal.out, &mut causal.into);
        out.clear();
        into.clear();
        ev.begin(ts, seq.id);
        let name = seq.callsite(r, ev);
        // Causes: this item starts the flows of those that refer to it.
        let mut is_cause = false;
        if let Some(i) = target {
            let tg = &mut plan.targets[i];
            if !tg.written {
                tg.written = true;
                out.extend((0..u64::from(tg.links)).map(|k| tg.link_base + k));
                out.extend((0..u64::from(tg.children)).map(|k| tg.child_base + k));
                is_cause = tg.links > 0;
            }
        }
        if is_cause {
            causal.text.clear();
            let _ = write!(causal.text, "{:016x}", r.id);
            let iid = seq.special(Special::Id, ev);
            ev.annotation(iid, FieldValue::Str(&causal.text));
        }
        // Effects: it ends a flow from each cause in the trace, once per cause.
        let mut unresolved = 0u64;
        for (k, &cause) in r.links.iter().enumerate() {
            if cause == r.id || r.links[..k].contains(&cause) {
                continue;
            }
            match plan.target(cause).map(|i| &mut plan.targets[i]) {
                Some(tg) if tg.links_met < tg.links => {
                    into.push(tg.link_base + u64::from(tg.links_met));
                    tg.links_met += 1;
                }
                Some(_) => {}
                None => unresolved += 1,
            }
        }
        if !r.links.is_empty() {
            causal.text.clear();
            for (k, id) in r.links.iter().enumerate() {
                let _ = write!(causal.text, "{}{id:016x}", if k == 0 { "" } else { ", " });
            }
            let iid = seq.special(Special::CausedBy, ev);
            ev.annotation(iid, FieldValue::Str(&causal.text));
        }
        if unresolved > 0 {
            let iid = seq.special(Special::Unresolved, ev);
            ev.annotation(iid, FieldValue::U64(unresolved));
        }
        // A parent that does not hold it on its track: an arrow from the parent.
        if let Some(parent) = r.parent {
            let inside = !detached && seq.open.iter().rev().any(|&o| o == parent);
            if !inside {
                if let Some(tg) = plan.target(parent).map(|i| &mut plan.targets[i]) {
                    if tg.children_met < tg.children {
                        into.push(tg.child_base + u64::from(tg.children_met));
                        tg.children_met += 1;
                    }
                }
            }
        }
        // A correlation group: one flow through its members in time order.
        if let (Some(value), key) = (r.correlation, &r.callsite.correlate) {
            if !key.is_empty() {
                causal.text.clear();
                let _ = write!(causal.text, "{key}={value}");
                let iid = seq.special(Special::Correlate, ev);
                ev.annotation(iid, FieldValue::Str(&causal.text));
                let key = plan.keys.number(r.callsite_index, key, false);
                if let Some(g) = key.and_then(|key| plan.groups.get(&(key, value))) {
                    // The plan ordered members by their time as converted, not as written.
                    let member = (at_ns, *process, t, r.id);
                    if member == g.last {
                        into.push(g.flow)
                    } else {
                        out.push(g.flow)
                    }
                }
            }
        }
        ev.end(kind, Some(name), track, out, into);
        self.drain(false);
    }
}

impl Sink for Writer<'_> {
    /// The span's own track if it is detached, else 0 (its thread's track).
    type Span = u64;

    /// Writes the process's track and its threads' tracks, each thread's as the first packet
    /// of its sequence.
    fn process(&mut self, header: &Header) {
        self.process = self.process.wrapping_add(1);
        let p = self.process;
        self.cal = self.next_calibration.take().unwrap_or(header.calibration).converter();
        self.plan.keys.next_process();
        self.process_track = self.uuid();
        self.next_seq += 1;
        let mut packet = first_packet(self.next_seq);
        let plan: &ProcessPlan = &self.plan.processes[p];
        packet.track_descriptor = Some(process_track(&plan.header, self.plan.pids[p], self.process_track));
        self.message(&packet);
        self.seqs.clear();
        for t in 0..self.plan.processes[p].threads.len() {
            let (track, id) = (self.uuid(), self.next_seq + 1);
            self.next_seq = id;
            let thread = &self.plan.processes[p].threads[t];
            let mut packet = first_packet(id);
            packet.previous_packet_dropped = (thread.dropped > 0).then_some(true);
            packet.track_descriptor = Some(proto::TrackDescriptor {
                uuid: Some(track),
                parent_uuid: Some(self.process_track),
                thread: Some(proto::ThreadDescriptor {
                    pid: Some(self.plan.pids[p]),
                    tid: Some(self.plan.tids[p][t]),
                    thread_name: (!thread.name.is_empty()).then(|| thread.name.clone()),
                }),
                ..Default::default()
            });
            self.message(&packet);
            self.seqs.push(Seq::new(id, track));
        }
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        if thread >= self.seqs.len() && self.error.is_none() {
            self.error = Some(io::Error::other("a trace file changed while it was being exported"));
        }
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    fn span_begin(&mut self, t: usize, r: &Item<'_>) -> u64 {
        if t >= self.seqs.len() {
            return 0;
        }
        let target = self.target(t, r.id);
        let detached = target.is_some_and(|i| self.plan.targets[i].detached);
        if !detached {
            self.seqs[t].open.push(r.id);
            let track = self.seqs[t].track;
            self.item(t, r, TYPE_SLICE_BEGIN, track, false, target);
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
        self.item(t, r, TYPE_SLICE_BEGIN, track, true, target);
        track
    }

    fn event(&mut self, t: usize, r: &Item<'_>) {
        if t >= self.seqs.len() {
            return;
        }
        let target = self.target(t, r.id);
        let track = self.seqs[t].track;
        self.item(t, r, TYPE_INSTANT, track, false, target);
    }

    fn span_end(&mut self, t: usize, span: u64, ticks: u64, ended: bool) {
        if t >= self.seqs.len() {
            return;
        }
        if span != 0 {
            // On a track of its own, yet ended on its stack: only if the two passes read
            // different records. It still ends on its own track.
            return self.detached_end(t, span, ticks, ended);
        }
        let (_, ts) = self.time(t, ticks);
        self.seqs[t].open.pop();
        let track = self.seqs[t].track;
        self.end_packet(t, ts, track, ended);
    }

    fn detach(&mut self, t: usize, span: u64, id: u64) {
        // The plan knows every detached span, so it began on a track of its own. Were it on the
        // thread's track (the two passes read different records), it ends there now, where it
        // leaves the thread, rather than never.
        if span == 0 && t < self.seqs.len() && self.seqs[t].open.last() == Some(&id) {
            self.seqs[t].open.pop();
            let (ts, track) = (self.seqs[t].last_ts, self.seqs[t].track);
            self.end_packet(t, ts, track, false);
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
                self.end_packet(t, ts, track, ended);
            }
        }
    }
}
