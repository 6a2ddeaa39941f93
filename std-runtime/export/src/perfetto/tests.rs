//! Unit tests of the Perfetto exporter: its output decoded with our own message structs.

use super::*;
use crate::model::{Callsite, Event, Process, Span, Thread, Value};
use prost::Message;
use proto::AnnotationValue;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use waffle_read::fixtures::callsite;
use waffle_wire::Header;
use waffle_wire::Kind;

pub(super) fn span(
    id: u64,
    parent: Option<u64>,
    cs: &Arc<Callsite>,
    fields: Vec<Value>,
    t: [u64; 2],
) -> Span {
    let (callsite, depth) = (cs.clone(), u32::from(parent.is_some()));
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth,
        callsite,
        fields,
        start_ns: t[0],
        end_ns: t[1],
        ended: true,
    }
}

/// Two ranks with the same pid and tids; nesting with ties at 100, 150 and 200; an event
/// with every value type; an unfinished span on a thread that dropped records.
pub(super) fn sample() -> Trace {
    let outer = callsite("outer", Kind::Span, &["n"]);
    let inner = callsite("inner", Kind::Span, &[]);
    let ev = callsite("ev", Kind::Event, &["u", "i", "f", "b", "s"]);
    let values = vec![
        Value::U64(u64::MAX),
        Value::I64(-5),
        Value::F64(0.5),
        Value::Bool(true),
        Value::Str("x".into()),
    ];
    let event = |id, parent, ts_ns| Event {
        id,
        parent,
        links: vec![],
        correlation: None,
        callsite: ev.clone(),
        fields: values.clone(),
        ts_ns,
    };
    let process = |rank: &str, b: u64| {
        let spans = vec![
            span(b + 1, None, &outer, vec![Value::U64(7)], [100, 200]),
            span(b + 2, Some(b + 1), &inner, vec![], [100, 150]),
            span(b + 3, Some(b + 1), &inner, vec![], [150, 200]),
        ];
        let events = vec![event(b + 9, Some(b + 3), 150), event(b + 10, None, 250)];
        let main = Thread { stream: 0, tid: 42, name: "main".into(), spans, events, dropped: 0 };
        let mut open = span(b + 20, None, &outer, vec![Value::U64(1)], [300, 400]);
        open.ended = false;
        let worker =
            Thread { stream: 1, tid: 43, name: String::new(), spans: vec![open], events: vec![], dropped: 3 };
        let (source, host) = (format!("{rank}.bin"), format!("node{rank}"));
        let labels = vec![("rank".into(), rank.into())];
        let threads = vec![main, worker];
        Process {
            source,
            header: Header { pid: 42, name: "sim".into(), host, labels, trace_id: 1, ..Header::default() },
            threads,
            dropped: 3,
            complete: true,
            last_ns: 0,
            tracks: Vec::new(),
        }
    };
    Trace { processes: vec![process("0", 0), process("1", 100)] }
}

/// The packets as written.
fn raw_packets() -> Vec<TracePacket> {
    let mut bytes = Vec::new();
    write(&sample(), &mut bytes).unwrap();
    proto::Trace::decode(bytes.as_slice()).unwrap().packet
}

/// The packets as written, with what they leave to their sequence filled in.
fn packets() -> Vec<TracePacket> {
    resolved(raw_packets())
}

/// `packets` as the trace processor reads them: each track event gets its sequence's default
/// track if it names none, and each timestamp becomes an absolute time (BOOTTIME, Unix ns
/// here) through its clock: the packet's, else its sequence's default, else BOOTTIME. A
/// sequence's clock (64 to 127) is known from a clock snapshot on that sequence that also
/// reads BOOTTIME; if incremental, each packet's timestamp adds to the clock's last value.
pub(super) fn resolved(packets: Vec<TracePacket>) -> Vec<TracePacket> {
    // Per sequence: defaults (clock, track); per (sequence, clock): (incremental, value now,
    // BOOTTIME minus the clock at the snapshot).
    let mut defaults: HashMap<u32, (Option<u32>, Option<u64>)> = HashMap::new();
    let mut clocks: HashMap<(u32, u32), (bool, u64, i128)> = HashMap::new();
    let mut out = Vec::with_capacity(packets.len());
    for mut p in packets {
        let seq = p.trusted_packet_sequence_id.expect("every packet is on a sequence");
        if let Some(d) = &p.trace_packet_defaults {
            let track = d.track_event_defaults.as_ref().and_then(|t| t.track_uuid);
            defaults.insert(seq, (d.timestamp_clock_id, track));
        }
        if let Some(snapshot) = &p.clock_snapshot {
            let reading = |id| snapshot.clocks.iter().find(|c| c.clock_id == Some(id));
            let boot = reading(BOOTTIME).expect("a snapshot reads BOOTTIME").timestamp.unwrap();
            for c in &snapshot.clocks {
                let id = c.clock_id.unwrap();
                if (64..128).contains(&id) {
                    let at = c.timestamp.unwrap();
                    let offset = i128::from(boot) - i128::from(at);
                    clocks.insert((seq, id), (c.is_incremental == Some(true), at, offset));
                }
            }
            out.push(p);
            continue;
        }
        let (clock, track) = defaults.get(&seq).copied().unwrap_or_default();
        if let Some(ts) = p.timestamp {
            match p.timestamp_clock_id.or(clock) {
                Some(id) if (64..128).contains(&id) => {
                    let (incremental, now, offset) = clocks.get_mut(&(seq, id)).expect("a snapshot first");
                    *now = if *incremental { *now + ts } else { ts };
                    p.timestamp = Some(u64::try_from(i128::from(*now) + *offset).unwrap());
                }
                Some(id) => assert_eq!(id, BOOTTIME, "only BOOTTIME among global clocks"),
                None => {}
            }
        }
        if let Some(ev) = &mut p.track_event {
            ev.track_uuid = ev.track_uuid.or(track);
        }
        out.push(p);
    }
    out
}

#[test]
fn packets_leave_their_track_and_time_to_their_sequence() {
    let packets = raw_packets();
    let events: Vec<_> = packets.iter().filter(|p| p.track_event.is_some()).collect();
    // Every thread sequence starts with its defaults and its clock.
    for p in packets.iter().filter(|p| p.track_descriptor.as_ref().is_some_and(|d| d.thread.is_some())) {
        let d = p.trace_packet_defaults.as_ref().expect("a thread's sequence has defaults");
        let track = d.track_event_defaults.as_ref().unwrap().track_uuid;
        assert_eq!(track, p.track_descriptor.as_ref().unwrap().uuid, "the thread's track");
        assert_eq!(d.timestamp_clock_id, Some(64));
        let seq = p.trusted_packet_sequence_id;
        let snapshot =
            packets.iter().find(|q| q.trusted_packet_sequence_id == seq && q.clock_snapshot.is_some());
        let clocks = &snapshot.expect("a clock snapshot").clock_snapshot.as_ref().unwrap().clocks;
        let readings: Vec<_> =
            clocks.iter().map(|c| (c.clock_id.unwrap(), c.timestamp.unwrap(), c.is_incremental)).collect();
        assert_eq!(readings, [(64, 0, Some(true)), (BOOTTIME, 0, None)]);
    }
    // Events on their thread's track name none; times are small steps after the first.
    assert!(events.iter().all(|p| p.track_event.as_ref().unwrap().track_uuid.is_none()));
    let mut seen = HashSet::new();
    for p in events {
        let (seq, ts) = (p.trusted_packet_sequence_id.unwrap(), p.timestamp.unwrap());
        if !seen.insert(seq) {
            assert!(ts <= 250, "a step of the sequence's clock: {ts}");
        }
    }
}

#[test]
fn sequence_flags_and_interning() {
    // (sequence, table: 0 event names / 1 annotation names, iid) -> name
    let mut defined = HashMap::new();
    let mut seen = HashSet::new();
    for p in packets() {
        let seq = p.trusted_packet_sequence_id.expect("every packet is on a sequence");
        assert_ne!(seq, 0);
        if seen.insert(seq) {
            assert_eq!(p.sequence_flags, Some(3), "first packet of {seq} clears state");
            assert_eq!(p.first_packet_on_sequence, Some(true));
        } else {
            assert_eq!(p.first_packet_on_sequence, None);
            assert_eq!(p.sequence_flags.unwrap_or(0) & 1, 0, "state cleared only once");
        }
        if let Some(data) = &p.interned_data {
            let entries = data
                .event_names
                .iter()
                .map(|e| (0, e))
                .chain(data.debug_annotation_names.iter().map(|e| (1, e)));
            for (table, e) in entries {
                assert_ne!(e.iid, Some(0));
                assert!(
                    defined.insert((seq, table, e.iid.unwrap()), e.name.clone()).is_none(),
                    "defined twice"
                );
            }
        }
        let Some(ev) = &p.track_event else { continue };
        let used: Vec<_> = ev
            .name_iid
            .map(|i| (0, i))
            .into_iter()
            .chain(ev.debug_annotations.iter().map(|a| (1, a.name_iid.unwrap())))
            .collect();
        if !used.is_empty() {
            assert_eq!(p.sequence_flags, Some(2), "a later packet using iids needs state");
        }
        for (table, iid) in used {
            assert!(
                defined.contains_key(&(seq, table, iid)),
                "iid {iid} used on {seq} before its definition"
            );
        }
    }
}

#[test]
fn tracks_are_unique_and_parented() {
    let packets = packets();
    let tracks: Vec<_> = packets.iter().filter_map(|p| p.track_descriptor.as_ref()).collect();
    let uuids: HashSet<_> = tracks.iter().map(|d| d.uuid.unwrap()).collect();
    assert_eq!(uuids.len(), tracks.len(), "unique uuids");
    let pids: HashMap<_, _> =
        tracks.iter().filter_map(|d| Some((d.uuid?, d.process.as_ref()?.pid?))).collect();
    assert_eq!(pids.len(), 2);
    assert_ne!(pids.values().min(), pids.values().max(), "the shared pid is remapped");
    assert!(tracks.iter().any(|d| d.name.as_deref() == Some("rank 1 (pid 42)")));
    let mut tids = HashSet::new();
    for (d, t) in tracks.iter().filter_map(|d| Some((d, d.thread.as_ref()?))) {
        assert_eq!(pids.get(&d.parent_uuid.unwrap()), t.pid.as_ref(), "thread inside its process");
        assert!(tids.insert(t.tid.unwrap()), "unique tids");
        let is_main = t.thread_name.as_deref() == Some("main");
        assert_eq!(is_main, t.tid.unwrap() == i64::from(t.pid.unwrap()), "main thread follows its pid");
    }
    assert_eq!(tids.len(), 4);
    assert_eq!(packets.iter().filter(|p| p.previous_packet_dropped == Some(true)).count(), 2);
}

#[test]
fn slices_balance_and_nest() {
    let (mut names, mut stacks, mut log) = (HashMap::new(), HashMap::<u64, Vec<String>>::new(), vec![]);
    let mut last_ts = HashMap::new();
    for p in packets() {
        let seq = p.trusted_packet_sequence_id.unwrap();
        for e in p.interned_data.iter().flat_map(|d| &d.event_names) {
            names.insert((seq, e.iid.unwrap()), e.name.clone().unwrap());
        }
        let Some(ev) = &p.track_event else { continue };
        let (track, ts) = (ev.track_uuid.unwrap(), p.timestamp.unwrap());
        assert!(ts >= last_ts.insert(track, ts).unwrap_or(0), "time runs forward on a track");
        let stack = stacks.entry(track).or_default();
        let name = ev.name_iid.map(|i| names[&(seq, i)].clone());
        let values: Vec<_> = ev.debug_annotations.iter().map(|a| a.value.clone().unwrap()).collect();
        match ev.r#type.unwrap() {
            TYPE_SLICE_BEGIN => {
                stack.push(name.unwrap());
                log.push(format!("{ts} {} depth {} {values:?}", stack[stack.len() - 1], stack.len()));
            }
            TYPE_SLICE_END => {
                let name = stack.pop().expect("an open slice");
                // An end's annotations are added to its slice by the trace processor.
                let args = if values.is_empty() { String::new() } else { format!(" {values:?}") };
                log.push(format!("{ts} end {name}{args}"));
            }
            TYPE_INSTANT => log.push(format!("{ts} {} in {:?}", name.unwrap(), stack.last())),
            t => panic!("type {t}"),
        }
    }
    assert!(stacks.values().all(Vec::is_empty), "every begin ended");
    // Rank 0: the tie at 150 ends the first inner before the second begins, and the event
    // at 150 lands in the second; the unfinished span says so (on its end) and ends at its
    // end_ns. Both ranks have two "inner" spans: matched by order, each says its occurrence.
    let expected = [
        "100 outer depth 1 [Uint(7)]",
        "100 inner depth 2 [Uint(0)]",
        "150 end inner",
        "150 inner depth 2 [Uint(1)]",
        "150 ev in Some(\"inner\")",
        "200 end inner",
        "200 end outer",
        "250 ev in None",
        "300 outer depth 1 [Uint(1)]",
        "400 end outer [Bool(true)]",
    ];
    assert_eq!(log[..expected.len()], expected);
}

#[test]
fn values_map_to_their_annotation_types() {
    let packets = packets();
    let ev = packets
        .iter()
        .filter_map(|p| p.track_event.as_ref())
        .find(|e| e.r#type == Some(TYPE_INSTANT))
        .unwrap();
    let values: Vec<_> = ev.debug_annotations.iter().map(|a| a.value.clone().unwrap()).collect();
    use AnnotationValue::*;
    assert_eq!(values, [Uint(u64::MAX), Int(-5), Double(0.5), Bool(true), Str("x".into())]);
}
