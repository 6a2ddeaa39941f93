//! Unit tests of causality in the Perfetto exporter: flows between slices, and detached spans
//! on tracks of their own, checked the way trace_processor reads them.

use super::tests::{self, span};
use super::*;
use crate::model::{Event, Process, Span, Thread, Value};
use prost::Message;
use proto::{AnnotationValue, TrackDescriptor, TrackEvent};
use std::collections::{HashMap, HashSet};
use waffle_read::fixtures::{self, callsite, thread};
use waffle_wire::Kind;

fn process(name: &str, threads: Vec<Thread>) -> Process {
    fixtures::process(7, name, threads)
}

/// Causality across two processes:
/// - process a, main: `step` [100, 200] (correlated step=1) holding the event `cause` at 150;
/// - process b, main: `effect` [300, 400] caused by `cause`, by an id not in the trace and by
///   `cause` again, correlated step=1; a detached `task` [300, 500] begun inside `effect` (at the
///   same time: the file must still give `effect` first, as its arrow starts there); an
///   event `ack` at 350 caused by `step`; `later` [420, 480] correlated step=1; `poll`
///   [450, 460], made inside `task`'s context while `later` is open;
/// - process b, worker: `handle` [320, 330], made in `effect`'s context, and `inner` in it.
fn causal() -> Trace {
    let step = fixtures::keyed("step", Kind::Span, "step");
    let plain = |name| callsite(name, Kind::Span, &[]);
    let event = |id, parent, links: Vec<u64>, name, ts_ns| Event {
        id,
        parent,
        links,
        correlation: None,
        callsite: callsite(name, Kind::Event, &[]),
        fields: vec![],
        ts_ns,
    };
    let mut first = span(1, None, &step, vec![], [100, 200]);
    first.correlation = Some(1);
    let a = process("a", vec![thread(1, vec![first], vec![event(2, Some(1), vec![], "cause", 150)])]);

    let mut effect = span(101, None, &fixtures::keyed("effect", Kind::Span, "step"), vec![], [300, 400]);
    (effect.links, effect.correlation) = (vec![2, 999, 2], Some(1));
    let mut task = span(102, Some(101), &plain("task"), vec![], [300, 500]);
    task.detached = true;
    let mut later = span(104, None, &fixtures::keyed("later", Kind::Span, "step"), vec![], [420, 480]);
    later.correlation = Some(1);
    let poll = span(105, Some(102), &plain("poll"), vec![], [450, 460]);
    let main = thread(1, vec![effect, task, later, poll], vec![event(103, Some(101), vec![1], "ack", 350)]);
    let handle = span(110, Some(101), &plain("handle"), vec![], [320, 330]);
    let inner = span(111, Some(110), &plain("inner"), vec![], [321, 329]);
    let b = process("b", vec![main, thread(2, vec![handle, inner], vec![])]);
    Trace { processes: vec![a, b] }
}

/// A track event as trace_processor sees it, with names resolved.
#[derive(Debug)]
struct Seen {
    ts: u64,
    track: u64,
    kind: i32,
    name: Option<String>,
    args: HashMap<String, AnnotationValue>,
    out: Vec<u64>,
    into: Vec<u64>,
}

fn seen(trace: &Trace) -> (Vec<TrackDescriptor>, Vec<Seen>) {
    let mut bytes = Vec::new();
    write(trace, &mut bytes).unwrap();
    let (mut names, mut tracks, mut events) = (HashMap::new(), vec![], vec![]);
    for p in tests::resolved(proto::Trace::decode(bytes.as_slice()).unwrap().packet) {
        let seq = p.trusted_packet_sequence_id.unwrap();
        if let Some(d) = p.interned_data {
            let entries =
                d.event_names.iter().map(|e| (0, e)).chain(d.debug_annotation_names.iter().map(|e| (1, e)));
            for (table, e) in entries {
                names.insert((seq, table, e.iid.unwrap()), e.name.clone().unwrap());
            }
        }
        tracks.extend(p.track_descriptor);
        let Some(ev) = p.track_event else { continue };
        let args = ev
            .debug_annotations
            .iter()
            .map(|a| (names[&(seq, 1, a.name_iid.unwrap())].clone(), a.value.clone().unwrap()))
            .collect();
        events.push(Seen {
            ts: p.timestamp.unwrap(),
            track: ev.track_uuid.unwrap(),
            kind: ev.r#type.unwrap(),
            name: ev.name_iid.map(|i| names[&(seq, 0, i)].clone()),
            args,
            out: ev.flow_ids,
            into: ev.terminating_flow_ids,
        });
    }
    (tracks, events)
}

/// The arrows trace_processor draws, by slice name: events in time order (ties in file
/// order); a `flow_ids` id starts a flow or draws an arrow from its last slice; a terminating
/// id draws the last arrow and frees the id, or is ignored when no flow waits on it.
fn arrows(events: &[Seen]) -> Vec<(String, String)> {
    let mut order: Vec<_> = events.iter().filter(|e| e.kind != TYPE_SLICE_END).collect();
    order.sort_by_key(|e| e.ts);
    let (mut active, mut freed, mut arrows) = (HashMap::new(), HashSet::new(), vec![]);
    for e in order {
        let name = e.name.clone().unwrap();
        // Chains through spans matched by order are the only flows left open.
        let matched = e.args.contains_key(MATCHED);
        for f in &e.out {
            assert!(!freed.contains(f), "flow {f} reused after it ended");
            if let Some((from, _)) = active.insert(*f, (name.clone(), matched)) {
                arrows.push((from, name.clone()));
            }
        }
        for f in &e.into {
            let (from, _) =
                active.remove(f).unwrap_or_else(|| panic!("flow {f} ends at {name} before it starts"));
            arrows.push((from, name.clone()));
            freed.insert(*f);
        }
    }
    active.retain(|_, (_, matched)| !*matched);
    assert!(active.is_empty(), "flows never ended: {active:?}");
    arrows.sort();
    arrows
}

/// The chains of spans matched by order: per flow, its members' (time, process pid as the
/// track's, occurrence) in time order. Such flows are never terminated.
fn matched_chains(trace: &Trace) -> Vec<Vec<(u64, u64)>> {
    let (_, events) = seen(trace);
    let mut chains: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    for e in events.iter().filter(|e| e.kind == TYPE_SLICE_BEGIN) {
        let Some(AnnotationValue::Uint(k)) = e.args.get(MATCHED) else { continue };
        assert!(e.into.is_empty(), "a matched span ends no flow: {e:?}");
        assert_eq!(e.out.len(), 1, "{e:?}");
        chains.entry(e.out[0]).or_default().push((e.ts, *k));
    }
    chains.into_values().map(|mut c| (c.sort(), c).1).collect()
}

#[test]
fn spans_matched_by_order_are_joined_across_ranks() {
    let op = callsite("op", Kind::Span, &[]);
    let ops = |id: u64, starts: [u64; 3]| -> Vec<Span> {
        starts.iter().enumerate().map(|(k, &t)| span(id + k as u64, None, &op, vec![], [t, t + 40])).collect()
    };
    // Rank b begins its first and third op after a's, its second before.
    let two_ranks = Trace {
        processes: vec![
            process("a", vec![thread(1, ops(1, [100, 200, 300]), vec![])]),
            process("b", vec![thread(1, ops(11, [110, 190, 320]), vec![])]),
        ],
    };
    let expected = vec![vec![(100, 0), (110, 0)], vec![(190, 1), (200, 1)], vec![(300, 2), (320, 2)]];
    assert_eq!(matched_chains(&two_ranks), expected);

    // Different counts: nothing is matched, nothing drawn.
    let mut uneven = two_ranks;
    uneven.processes[1].threads[0].spans.pop();
    assert!(matched_chains(&uneven).is_empty());

    // One process, the ranks as threads told apart by a `rank` field.
    let ranked = callsite("op", Kind::Span, &["rank"]);
    let on_rank = |rank: u64, id: u64, starts: [u64; 3]| -> Vec<Span> {
        let s = starts.iter().enumerate();
        s.map(|(k, &t)| span(id + k as u64, None, &ranked, vec![Value::U64(rank)], [t, t + 40])).collect()
    };
    let threads = vec![
        thread(1, on_rank(0, 1, [100, 200, 300]), vec![]),
        thread(2, on_rank(1, 11, [110, 190, 320]), vec![]),
    ];
    let as_threads = Trace { processes: vec![process("a", threads)] };
    assert_eq!(matched_chains(&as_threads), expected);

    // The same threads without the field are one rank: nothing to match.
    let threads =
        vec![thread(1, ops(1, [100, 200, 300]), vec![]), thread(2, ops(11, [110, 190, 320]), vec![])];
    assert!(matched_chains(&Trace { processes: vec![process("a", threads)] }).is_empty());

    // A correlation key wins: those spans are joined by their key only.
    let keyed = fixtures::keyed("op", Kind::Span, "op");
    let mut a = span(1, None, &keyed, vec![], [100, 140]);
    let mut b = span(11, None, &keyed, vec![], [110, 150]);
    (a.correlation, b.correlation) = (Some(1), Some(1));
    let trace = Trace {
        processes: vec![
            process("a", vec![thread(1, vec![a], vec![])]),
            process("b", vec![thread(1, vec![b], vec![])]),
        ],
    };
    assert!(matched_chains(&trace).is_empty());
    assert_eq!(arrows(&seen(&trace).1), [("op".to_owned(), "op".to_owned())]);
}

#[test]
fn links_correlations_and_foreign_parents_are_arrows() {
    let (_, events) = seen(&causal());
    let expected = [
        ("cause", "effect"),  // the link, once although named twice
        ("effect", "handle"), // a context entered on another thread
        ("effect", "later"),  // the correlation chain step -> effect -> later
        ("effect", "task"),   // a detached span, on its own track, from its parent
        ("step", "ack"),      // a link from another process
        ("step", "effect"),   // the correlation chain
        ("task", "poll"),     // made in the detached span's context
    ];
    let expected: Vec<_> = expected.iter().map(|&(a, b)| (a.to_owned(), b.to_owned())).collect();
    assert_eq!(arrows(&events), expected);

    // One id per relation, on every event of it.
    let mut uses: HashMap<u64, (usize, usize)> = HashMap::new();
    for e in &events {
        assert!(e.kind != TYPE_SLICE_END || e.out.is_empty() && e.into.is_empty(), "flows on a begin");
        e.out.iter().for_each(|f| uses.entry(*f).or_default().0 += 1);
        e.into.iter().for_each(|f| uses.entry(*f).or_default().1 += 1);
    }
    assert_eq!(uses.len(), 6, "two links, one correlation group, three foreign parents");
    for (f, (out, into)) in uses {
        assert_eq!(into, 1, "flow {f} ends once");
        assert!(out >= 1, "flow {f} starts");
    }

    let by_name = |n: &str| events.iter().find(|e| e.name.as_deref() == Some(n)).unwrap();
    let effect = &by_name("effect").args;
    let str_arg = |args: &HashMap<String, AnnotationValue>, k: &str| match &args[k] {
        AnnotationValue::Str(s) => s.clone(),
        v => panic!("{k} = {v:?}"),
    };
    assert_eq!(str_arg(effect, CAUSED_BY), "0000000000000002, 00000000000003e7, 0000000000000002");
    assert_eq!(effect[UNRESOLVED], AnnotationValue::Uint(1), "the id not in the trace");
    assert_eq!(str_arg(effect, CORRELATE), "step=1");
    assert_eq!(str_arg(&by_name("cause").args, ID), "0000000000000002", "a cause shows its id");
    assert!(!by_name("handle").args.contains_key(ID));
}

#[test]
fn a_link_to_nothing_draws_nothing() {
    let mut trace = causal();
    for p in &mut trace.processes {
        for t in &mut p.threads {
            t.spans.iter_mut().for_each(|s| (s.links, s.parent, s.correlation) = (vec![12345], None, None));
            t.events.iter_mut().for_each(|e| (e.links, e.parent, e.correlation) = (vec![], None, None));
        }
    }
    let (_, events) = seen(&trace);
    assert!(events.iter().all(|e| e.out.is_empty() && e.into.is_empty()));
    let begins = events.iter().filter(|e| e.kind == TYPE_SLICE_BEGIN);
    assert!(begins.clone().all(|e| e.args[UNRESOLVED] == AnnotationValue::Uint(1)));
    assert!(begins.clone().all(|e| !e.args.contains_key(CORRELATE)));
}

#[test]
fn detached_spans_get_their_own_tracks_and_threads_still_nest() {
    let (tracks, events) = seen(&causal());
    let task = tracks.iter().find(|d| d.name.as_deref() == Some("task")).expect("a track for the task");
    assert!(task.thread.is_none() && task.process.is_none());
    let b =
        tracks.iter().find(|d| d.process.as_ref().is_some_and(|p| p.process_name.as_deref() == Some("b")));
    assert_eq!(task.parent_uuid, b.unwrap().uuid, "under its process");
    let on_task: Vec<_> =
        events.iter().filter(|e| e.track == task.uuid.unwrap()).map(|e| (e.kind, e.ts)).collect();
    assert_eq!(on_task, [(TYPE_SLICE_BEGIN, 300), (TYPE_SLICE_END, 500)]);

    // Each track's slices nest, and each slice or instant sits in the span open around it.
    let mut stacks: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut inside = vec![];
    for e in &events {
        let stack = stacks.entry(e.track).or_default();
        let top = stack.last().map(|(n, _)| n.clone());
        match e.kind {
            TYPE_SLICE_BEGIN => {
                inside.push((e.name.clone().unwrap(), top));
                stack.push((e.name.clone().unwrap(), e.ts));
            }
            TYPE_SLICE_END => assert!(stack.pop().unwrap().1 <= e.ts),
            _ => inside.push((e.name.clone().unwrap(), top)),
        }
    }
    assert!(stacks.values().all(Vec::is_empty));
    inside.sort();
    let parent = |n: &str| inside.iter().find(|(c, _)| c == n).unwrap().1.as_deref();
    assert_eq!(parent("ack"), Some("effect"));
    assert_eq!(parent("task"), None, "alone on its track");
    assert_eq!(parent("poll"), Some("later"), "where its thread was, not in its detached parent");
    assert_eq!(parent("handle"), None, "its parent is on another thread");
    assert_eq!(parent("inner"), Some("handle"));
}

#[test]
fn flow_ids_are_written_unpacked() {
    let mut packets = packet::Packets::with_capacity(0);
    packets.begin(7, put::Tag::new(10 << 3, 1));
    packets.end(TYPE_INSTANT, put::Tag::NONE, Some(5), &[1, 2], &[3]);
    let bytes = packets.bytes().to_vec();
    // Field 47, wire type 1 (fixed64): key 47 << 3 | 1 = 0x179, varint f9 02; field 48: 81 03.
    let keys = |key: [u8; 2]| bytes.windows(2).filter(|w| *w == key).count();
    assert_eq!((keys([0xf9, 0x02]), keys([0x81, 0x03])), (2, 1));
    let trace = proto::Trace::decode(bytes.as_slice()).unwrap();
    let event = trace.packet[0].track_event.as_ref().unwrap();
    assert_eq!((&event.flow_ids[..], &event.terminating_flow_ids[..]), (&[1, 2][..], &[3][..]));
    // The messages the tests decode with read them the same way.
    let ev = TrackEvent { flow_ids: vec![1, 2], terminating_flow_ids: vec![3], ..Default::default() };
    let bytes = ev.encode_to_vec();
    let keys = |key: [u8; 2]| bytes.windows(2).filter(|w| *w == key).count();
    assert_eq!((keys([0xf9, 0x02]), keys([0x81, 0x03])), (2, 1));
    assert_eq!(bytes.len(), 3 * (2 + 8));
}

#[test]
fn each_message_is_one_arrow_from_its_cause_to_its_effect() {
    let trace = fixtures::messages();
    let (_, events) = seen(&trace);
    // Every flow id is started once and ended once: exactly one arrow each.
    let (mut started, mut ended) = (HashMap::new(), HashMap::new());
    for e in &events {
        e.out.iter().for_each(|&f| *started.entry(f).or_insert(0) += 1);
        e.into.iter().for_each(|&f| *ended.entry(f).or_insert(0) += 1);
    }
    assert!(started.values().chain(ended.values()).all(|&n| n == 1), "{started:?} {ended:?}");
    assert_eq!(started.keys().collect::<HashSet<_>>(), ended.keys().collect::<HashSet<_>>());
    let received = "MPI message received".to_owned();
    let send = "MPI_Send".to_owned();
    let arrow = |from: &str, to: &str| (from.to_owned(), to.to_owned());
    // Two messages across processes (the unanswered send has none), and the fan: each of its
    // two causes to each of its two effects, never back.
    let expected = vec![
        (send.clone(), received.clone()),
        (send, received),
        arrow("fan out 0", "fan in 1"),
        arrow("fan out 0", "fan in 2"),
        arrow("fan out 1", "fan in 1"),
        arrow("fan out 1", "fan in 2"),
    ];
    assert_eq!(arrows(&events), expected);
    // The arrows join the right ranks: rank 0's send ends in rank 1's receive, rank 2's in
    // rank 0's.
    let track_of = |name: &str, ts: u64| {
        events.iter().find(|e| e.name.as_deref() == Some(name) && e.ts == ts).map(|e| e.track).unwrap()
    };
    let t0 = 1_700_000_000_000_000_000;
    let flows_of = |name: &str, ts: u64| {
        let e = events.iter().find(|e| e.name.as_deref() == Some(name) && e.ts == ts).unwrap();
        (e.out.clone(), e.into.clone())
    };
    let (sent, _) = flows_of("MPI_Send", t0 + 100);
    let (_, got) = flows_of("MPI message received", t0 + 140);
    assert_eq!((sent.len(), &sent), (1, &got));
    assert_ne!(track_of("MPI_Send", t0 + 100), track_of("MPI message received", t0 + 140));
    let (unanswered, _) = flows_of("MPI_Send", t0 + 160);
    assert!(unanswered.is_empty());
}
