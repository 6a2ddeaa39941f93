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
mod sink;
mod steps;

use causal::Causal;
use steps::Steps;

/// Packets are handed to the output in blocks of about this size.
const BLOCK: usize = 1 << 20;

/// The [`Sink`] that writes the `.pftrace`.
pub(super) struct PacketWriter<'o> {
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

impl<'o> PacketWriter<'o> {
    /// A writer of every process of `plan`, from the first.
    pub(super) fn new(out: &'o mut dyn Write, mut plan: Plan) -> Self {
        let parts = std::mem::take(&mut plan.parts);
        let large = std::mem::take(&mut plan.large);
        PacketWriter::from(out, Arc::new(plan), parts, large, 0)
    }

    /// A writer of the processes from `first` on, whose parts of the plan are `parts`.
    pub(super) fn from(
        out: &'o mut dyn Write,
        plan: Arc<Plan>,
        parts: Vec<Part>,
        large: IdMap<GroupKey, Group>,
        first: usize,
    ) -> Self {
        PacketWriter {
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

/// The second pass: one writer over every file, so sequence ids and track uuids run on.
impl Pass for PacketWriter<'_> {
    fn read(&mut self, records: &mut Records<'_>) -> Result<Vec<Warning>, Error> {
        self.next_calibration = records.calibration();
        records.decode(self)
    }

    /// Every file read: the detached ends still waiting, then the last block.
    fn finish(self) -> io::Result<()> {
        self.close()
    }
}
