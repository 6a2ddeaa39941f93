//! Perfetto exporter: a [`Trace`] as a `.pftrace` (Perfetto's `Trace` proto) for
//! ui.perfetto.dev and trace_processor.
//!
//! The mapping:
//! - each [`Process`] is a process track (`TrackDescriptor` with a `ProcessDescriptor`), named
//!   `rank N (pid P)` when the header has a `rank` label; its host and labels become
//!   `process_labels`;
//! - each [`Thread`] is a thread track parented to its process track, with its own
//!   `trusted_packet_sequence_id`;
//! - a span is a `TYPE_SLICE_BEGIN` and a `TYPE_SLICE_END` on its thread's track, an event a
//!   `TYPE_INSTANT`; fields are debug annotations, and a span that never ended gets
//!   `waffle.unfinished = true` and ends at its `end_ns`.
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
//!   walking its span tree (parent begin, children and events in time order, parent end) with
//!   times clamped to never go backwards.
//!
//! Output is streamed packet by packet; only one thread's event order is held in memory.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufWriter, Write};

use prost::Message;

use crate::model::{Process, Thread, Trace, Value};

mod proto;

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

/// Writes `trace` to `out` as a Perfetto `.pftrace`.
pub fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let mut out = PacketWriter { out: BufWriter::new(out), buf: Vec::new() };
    let ids = Ids::assign(trace);
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
            let mut seq = Sequence::new(seq_id, uuid);
            for step in event_order(thread) {
                out.put(&seq.packet(thread, step))?;
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

/// One record of a thread's track, by index into its spans or events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Begin(usize),
    End(usize),
    Instant(usize),
}

/// A thread's records in the order that nests: a span's begin, then its child spans and
/// events in time order (an event first when tied with a child's begin, since it is not in
/// that child), then its end. A parent missing from the thread makes a span or event top-level.
fn event_order(thread: &Thread) -> Vec<Step> {
    let spans = &thread.spans;
    // Ids of 0 are placeholders and not unique; a parent must come earlier (spans are in begin
    // order), which also rules out cycles in damaged input.
    let index: HashMap<u64, usize> =
        spans.iter().enumerate().filter(|(_, s)| s.id != 0).map(|(i, s)| (s.id, i)).collect();
    let parent_of = |parent: Option<u64>, limit: usize| {
        parent.and_then(|id| index.get(&id).copied()).filter(|&i| i < limit)
    };
    // Children of span i in kids[i]; top level in kids[spans.len()]. Sort key: (time, event
    // before span), stable so spans keep begin order and events keep time order.
    let mut kids: Vec<Vec<(u64, u8, Step)>> = vec![Vec::new(); spans.len() + 1];
    for (i, span) in spans.iter().enumerate() {
        let slot = parent_of(span.parent, i).unwrap_or(spans.len());
        kids[slot].push((span.start_ns, 1, Step::Begin(i)));
    }
    for (i, event) in thread.events.iter().enumerate() {
        let slot = parent_of(event.parent, spans.len()).unwrap_or(spans.len());
        kids[slot].push((event.ts_ns, 0, Step::Instant(i)));
    }
    for list in &mut kids {
        list.sort_by_key(|&(ts, rank, _)| (ts, rank));
    }

    let mut order = Vec::with_capacity(2 * spans.len() + thread.events.len());
    // An explicit stack of (list, position), so deep nesting cannot overflow the call stack.
    let mut stack = vec![(spans.len(), 0usize)];
    while let Some((list, pos)) = stack.last_mut() {
        match kids[*list].get(*pos) {
            Some(&(_, _, step)) => {
                *pos += 1;
                order.push(step);
                if let Step::Begin(i) = step {
                    stack.push((i, 0));
                }
            }
            None => {
                let list = *list;
                stack.pop();
                if list < spans.len() {
                    order.push(Step::End(list));
                }
            }
        }
    }
    order
}

/// One thread's packet sequence: its track, its interning tables and its clock.
struct Sequence<'t> {
    id: u32,
    track: u64,
    event_names: HashMap<&'t str, u64>,
    annotation_names: HashMap<&'t str, u64>,
    last_ts: u64,
}

impl<'t> Sequence<'t> {
    fn new(id: u32, track: u64) -> Self {
        let (event_names, annotation_names) = (HashMap::new(), HashMap::new());
        Sequence { id, track, event_names, annotation_names, last_ts: 0 }
    }

    /// The packet for one step, defining the names it uses that this sequence has not seen.
    fn packet(&mut self, thread: &'t Thread, step: Step) -> TracePacket {
        static TRUE: Value = Value::Bool(true);
        let (kind, ts, record) = match step {
            Step::Begin(i) => {
                let s = &thread.spans[i];
                (TYPE_SLICE_BEGIN, s.start_ns, Some((&*s.callsite, &s.fields, !s.ended)))
            }
            Step::End(i) => (TYPE_SLICE_END, thread.spans[i].end_ns, None),
            Step::Instant(i) => {
                let e = &thread.events[i];
                (TYPE_INSTANT, e.ts_ns, Some((&*e.callsite, &e.fields, false)))
            }
        };
        let mut event = TrackEvent { r#type: Some(kind), track_uuid: Some(self.track), ..Default::default() };
        let mut new = proto::InternedData::default();
        if let Some((callsite, values, unfinished)) = record {
            event.name_iid = Some(intern(&mut self.event_names, &callsite.name, &mut new.event_names));
            let names = callsite.fields.iter().map(|(name, _)| name.as_str());
            let unfinished = unfinished.then_some((UNFINISHED, &TRUE));
            for (name, value) in names.zip(values).chain(unfinished) {
                let names = &mut new.debug_annotation_names;
                let name_iid = Some(intern(&mut self.annotation_names, name, names));
                event
                    .debug_annotations
                    .push(DebugAnnotation { name_iid, value: Some(annotation_value(value)) });
            }
        }
        // Out-of-order input (a child outliving its parent) must not make time run backwards.
        self.last_ts = self.last_ts.max(ts);
        let defines = !new.event_names.is_empty() || !new.debug_annotation_names.is_empty();
        TracePacket {
            timestamp: Some(self.last_ts),
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: record.is_some().then_some(SEQ_NEEDS_INCREMENTAL_STATE),
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
mod tests;
