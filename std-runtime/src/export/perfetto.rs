//! Perfetto exporter: a [`Trace`] as a `.pftrace` (Perfetto's `Trace` proto) for
//! ui.perfetto.dev and trace_processor.
//!
//! The mapping:
//! - each [`Process`] is a process track (`TrackDescriptor` with a `ProcessDescriptor`), named
//!   `rank N (pid P)` when the header has a `rank` label; its host and labels become
//!   `process_labels`. All processes share the model's time base, Unix nanoseconds;
//! - each [`Thread`] is a thread track parented to its process track, with its own
//!   `trusted_packet_sequence_id`;
//! - a span is a `TYPE_SLICE_BEGIN` and a `TYPE_SLICE_END` on its thread's track, an event a
//!   `TYPE_INSTANT`; fields are debug annotations, and a span that never ended gets
//!   `waffle.unfinished = true` and ends at its `end_ns`;
//! - a detached span (an instrumented future's, which may end on another thread) is a slice on
//!   a track of its own under its process track, named after the span (see `layout`);
//! - causality becomes flows, arrows from slice to slice, carried by span begins and instants
//!   (see `flows`): links, correlation groups, and parents on another track. Annotations make
//!   them readable: `waffle.caused_by` (the linked ids in hex), `waffle.unresolved_links` (how
//!   many of them are not in the trace), `waffle.correlate` (`key=value`), and `waffle.id` on
//!   every item a link names.
//!
//! The rules the trace processor enforces, and how they are met:
//! - pids must differ between processes and tids between threads, but ranks on different hosts
//!   can share them: duplicates (and ids that are 0 or do not fit an `i32`) are remapped to
//!   fresh ids above Linux's largest pid, and a main thread (tid = pid) follows its process;
//! - track uuids are unique over the whole trace;
//! - event and annotation names are interned per sequence, each entry sent in the packet that
//!   first uses it; a sequence's first packet clears incremental state (flags 3,
//!   `first_packet_on_sequence`), and every later packet using an iid says it needs it (flag 2);
//! - a slice end closes the innermost open slice, so each thread's records are emitted by
//!   walking its span tree (begin, children in record order, end) with times clamped to never
//!   go backwards;
//! - flow ids are unique over the trace and written unpacked, as proto2 has them.
//!
//! Output is streamed packet by packet; only one thread's event order is held in memory (and
//! the flow ids of the items that have any).

use std::collections::{HashMap, HashSet};
use std::io::{self, BufWriter, Write};

use prost::Message;

use crate::model::{Callsite, Item, ItemRef, Process, Thread, Trace, Value};

mod flows;
mod layout;
mod proto;

use flows::Flows;
use layout::{Layout, Step};
use proto::{AnnotationValue, DebugAnnotation, InternedString, TracePacket, TrackEvent};

const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
const TYPE_SLICE_BEGIN: i32 = 1;
const TYPE_SLICE_END: i32 = 2;
const TYPE_INSTANT: i32 = 3;
/// Track uuids count up from here ("WAFF"), away from the small numbers other tools use.
const UUID_BASE: u64 = 0x5741_4646_0000_0000;
/// Remapped pids and tids start above Linux's `PID_MAX_LIMIT`, so they never look real.
const FRESH_ID_BASE: i64 = 1 << 22;
/// The annotation marking a span whose end was never recorded.
const UNFINISHED: &str = "waffle.unfinished";
/// Annotations that spell out causality: the linked ids, the links left unresolved, the
/// correlation, and the id of an item that a link names.
const CAUSED_BY: &str = "waffle.caused_by";
const UNRESOLVED: &str = "waffle.unresolved_links";
const CORRELATE: &str = "waffle.correlate";
const ID: &str = "waffle.id";

/// Writes `trace` to `out` as a Perfetto `.pftrace`.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let mut out = PacketWriter { out: BufWriter::new(out), buf: Vec::new() };
    let ids = Ids::assign(trace);
    let flows = Flows::assign(trace);
    let mut uuid = UUID_BASE;
    let mut seq_id = 0u32;
    for (p, process) in trace.processes.iter().enumerate() {
        let pid = ids.pids[p];
        uuid += 1;
        let process_uuid = uuid;
        seq_id += 1;
        let mut packet = first_packet(seq_id);
        packet.track_descriptor = Some(process_track(process, pid, process_uuid));
        out.put(&packet)?;
        for (t, thread) in process.threads.iter().enumerate() {
            uuid += 1;
            seq_id += 1;
            let mut packet = first_packet(seq_id);
            packet.previous_packet_dropped = (thread.dropped > 0).then_some(true);
            packet.track_descriptor = Some(proto::TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(process_uuid),
                thread: Some(proto::ThreadDescriptor {
                    pid: Some(pid),
                    tid: Some(ids.tids[p][t]),
                    thread_name: (!thread.name.is_empty()).then(|| thread.name.clone()),
                }),
                ..Default::default()
            });
            out.put(&packet)?;
            let mut seq = Sequence::new(seq_id, uuid, (p, t));
            for (i, span) in thread.spans.iter().enumerate().filter(|(_, s)| s.detached) {
                uuid += 1;
                seq.detached.insert(i, uuid);
                out.put(&TracePacket {
                    trusted_packet_sequence_id: Some(seq_id),
                    track_descriptor: Some(proto::TrackDescriptor {
                        uuid: Some(uuid),
                        parent_uuid: Some(process_uuid),
                        name: Some(span.name().to_owned()),
                        ..Default::default()
                    }),
                    ..Default::default()
                })?;
            }
            for step in Layout::of(thread).steps(thread) {
                out.put(&seq.packet(thread, step, &flows))?;
            }
        }
    }
    out.out.flush()
}

/// The first packet of a sequence: it clears (and so starts) the incremental state.
fn first_packet(seq_id: u32) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(seq_id),
        sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE),
        first_packet_on_sequence: Some(true),
        ..Default::default()
    }
}

fn process_track(process: &Process, pid: i32, uuid: u64) -> proto::TrackDescriptor {
    let name = match process.label("rank") {
        Some(rank) => format!("rank {rank} (pid {})", process.pid),
        None => process.name.clone(),
    };
    let mut labels = Vec::with_capacity(process.labels.len() + 1);
    if !process.host.is_empty() {
        labels.push(format!("host={}", process.host));
    }
    labels.extend(process.labels.iter().map(|(k, v)| format!("{k}={v}")));
    proto::TrackDescriptor {
        uuid: Some(uuid),
        name: Some(name),
        process: Some(proto::ProcessDescriptor {
            pid: Some(pid),
            process_name: Some(process.name.clone()),
            process_labels: labels,
        }),
        ..Default::default()
    }
}

/// The pid of each process and the tid of each thread as written: unique over the trace.
struct Ids {
    pids: Vec<i32>,
    tids: Vec<Vec<i64>>,
}

impl Ids {
    fn assign(trace: &Trace) -> Ids {
        // Pids and tids share one space, as they do in the kernel: a tid equal to another
        // process's pid would make the trace processor think it is that process's main thread.
        let mut used = HashSet::new();
        let mut next_fresh = FRESH_ID_BASE;
        let mut claim = |wanted: Option<i64>, used: &mut HashSet<i64>| -> i64 {
            let id = match wanted {
                Some(id) if id > 0 && id <= i64::from(i32::MAX) && !used.contains(&id) => id,
                _ => loop {
                    next_fresh += 1;
                    if !used.contains(&next_fresh) {
                        break next_fresh;
                    }
                },
            };
            used.insert(id);
            id
        };
        let pids: Vec<i64> = trace.processes.iter().map(|p| claim(Some(p.pid.into()), &mut used)).collect();
        let tids = trace
            .processes
            .iter()
            .zip(&pids)
            .map(|(process, &pid)| {
                let mut main_taken = false;
                let mut tids = Vec::with_capacity(process.threads.len());
                for thread in &process.threads {
                    if thread.tid == u64::from(process.pid) && !main_taken {
                        main_taken = true;
                        tids.push(pid);
                    } else {
                        tids.push(claim(i64::try_from(thread.tid).ok(), &mut used));
                    }
                }
                tids
            })
            .collect();
        // `claim` only hands out ids up to i32::MAX or fresh ones just above 2^22.
        let pids = pids.into_iter().map(|p| i32::try_from(p).unwrap_or(i32::MAX)).collect();
        Ids { pids, tids }
    }
}

/// One thread's packet sequence: its tracks, its interning tables and its clock.
struct Sequence<'t> {
    id: u32,
    /// The thread track.
    track: u64,
    /// The tracks of the thread's detached spans, by span index.
    detached: HashMap<usize, u64>,
    /// The thread's process and index, for looking up flows.
    at: (usize, usize),
    event_names: HashMap<&'t str, u64>,
    annotation_names: HashMap<&'t str, u64>,
    last_ts: u64,
}

/// The parts of a span (at its begin) or an event that its track event shows.
struct Record<'t> {
    item: Item,
    id: u64,
    callsite: &'t Callsite,
    fields: &'t [Value],
    links: &'t [u64],
    correlation: Option<u64>,
    unfinished: bool,
}

impl<'t> Sequence<'t> {
    fn new(id: u32, track: u64, at: (usize, usize)) -> Self {
        let (event_names, annotation_names) = (HashMap::new(), HashMap::new());
        Sequence { id, track, detached: HashMap::new(), at, event_names, annotation_names, last_ts: 0 }
    }

    /// The packet for one step, defining the names it uses that this sequence has not seen.
    fn packet(&mut self, thread: &'t Thread, step: Step, flows: &Flows) -> TracePacket {
        let (kind, ts, record) = match step {
            Step::Begin(i) => {
                let s = &thread.spans[i];
                let record = Record {
                    item: Item::Span(i),
                    id: s.id,
                    callsite: &s.callsite,
                    fields: &s.fields,
                    links: &s.links,
                    correlation: s.correlation,
                    unfinished: !s.ended,
                };
                (TYPE_SLICE_BEGIN, s.start_ns, Some(record))
            }
            Step::End(i) => (TYPE_SLICE_END, thread.spans[i].end_ns, None),
            Step::Instant(i) => {
                let e = &thread.events[i];
                let record = Record {
                    item: Item::Event(i),
                    id: e.id,
                    callsite: &e.callsite,
                    fields: &e.fields,
                    links: &e.links,
                    correlation: e.correlation,
                    unfinished: false,
                };
                (TYPE_INSTANT, e.ts_ns, Some(record))
            }
        };
        let track = match step {
            Step::Begin(i) | Step::End(i) => self.detached.get(&i).copied().unwrap_or(self.track),
            Step::Instant(_) => self.track,
        };
        let mut event = TrackEvent { r#type: Some(kind), track_uuid: Some(track), ..Default::default() };
        let mut new = proto::InternedData::default();
        let uses_iids = record.is_some();
        if let Some(r) = record {
            event.name_iid = Some(intern(&mut self.event_names, &r.callsite.name, &mut new.event_names));
            let mut annotate = |name: &'t str, value: AnnotationValue| {
                let name_iid =
                    Some(intern(&mut self.annotation_names, name, &mut new.debug_annotation_names));
                event.debug_annotations.push(DebugAnnotation { name_iid, value: Some(value) });
            };
            let names = r.callsite.fields.iter().map(|(name, _)| name.as_str());
            for (name, value) in names.zip(r.fields) {
                annotate(name, annotation_value(value));
            }
            if r.unfinished {
                annotate(UNFINISHED, AnnotationValue::Bool(true));
            }
            let ends = flows.get(&ItemRef { process: self.at.0, thread: self.at.1, item: r.item });
            if ends.is_some_and(|e| e.is_cause) {
                annotate(ID, AnnotationValue::Str(format!("{:016x}", r.id)));
            }
            if !r.links.is_empty() {
                let ids: Vec<String> = r.links.iter().map(|id| format!("{id:016x}")).collect();
                annotate(CAUSED_BY, AnnotationValue::Str(ids.join(", ")));
            }
            if let Some(unresolved) = ends.map(|e| e.unresolved).filter(|&n| n > 0) {
                annotate(UNRESOLVED, AnnotationValue::Uint(unresolved));
            }
            if let (Some(value), false) = (r.correlation, r.callsite.correlate.is_empty()) {
                annotate(CORRELATE, AnnotationValue::Str(format!("{}={value}", r.callsite.correlate)));
            }
            if let Some(ends) = ends {
                event.flow_ids.clone_from(&ends.out);
                event.terminating_flow_ids.clone_from(&ends.into);
            }
        }
        // Out-of-order input (a child outliving its parent) must not make time run backwards.
        self.last_ts = self.last_ts.max(ts);
        let defines = !new.event_names.is_empty() || !new.debug_annotation_names.is_empty();
        TracePacket {
            timestamp: Some(self.last_ts),
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: uses_iids.then_some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: defines.then_some(new),
            track_event: Some(event),
            ..Default::default()
        }
    }
}

fn annotation_value(value: &Value) -> AnnotationValue {
    match value {
        Value::U64(v) => AnnotationValue::Uint(*v),
        Value::I64(v) => AnnotationValue::Int(*v),
        Value::F64(v) => AnnotationValue::Double(*v),
        Value::Bool(v) => AnnotationValue::Bool(*v),
        Value::Str(v) => AnnotationValue::Str(v.clone()),
    }
}

/// The iid of `name` in `table` (iids start at 1; 0 is invalid), adding it to `new` if it is
/// new to the sequence.
fn intern<'t>(table: &mut HashMap<&'t str, u64>, name: &'t str, new: &mut Vec<InternedString>) -> u64 {
    let next = table.len() as u64 + 1;
    let iid = *table.entry(name).or_insert(next);
    if iid == next {
        new.push(InternedString { iid: Some(iid), name: Some(name.to_owned()) });
    }
    iid
}

/// Writes packets as the `Trace` message's repeated field 1, one at a time.
struct PacketWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> PacketWriter<W> {
    fn put(&mut self, packet: &TracePacket) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(0x0a); // field 1 (`packet`), wire type 2 (length-delimited)
        packet.encode_length_delimited(&mut self.buf).map_err(io::Error::other)?;
        self.out.write_all(&self.buf)
    }
}

#[cfg(test)]
mod causal_tests;
#[cfg(test)]
mod tests;
