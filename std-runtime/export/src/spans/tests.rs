//! The stream of spans on hand-built traces: where events go, how links and parents resolve
//! across threads and processes, stand-ins, repeated ids, and the cap on logs.

use std::sync::Arc;
use waffle_read::fixtures::{self, thread};

use waffle_wire::Kind;

use super::{one_pass::OnePass, *};
use crate::decode::stream::{self, Sink};
use crate::model::{Event, Process, Span, Thread, Value};
use waffle_wire::Calibration;

const T0: u64 = 1_700_000_000_000_000_000;

fn cs(name: &str, kind: Kind) -> Arc<Callsite> {
    fixtures::callsite(name, kind, &["n"])
}

fn span(id: u64, parent: Option<u64>, depth: u32, start: u64, end: u64) -> Span {
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth,
        callsite: cs(&format!("s{id:x}"), Kind::Span),
        fields: vec![Value::U64(id)],
        start_ns: T0 + start,
        end_ns: T0 + end,
        ended: true,
    }
}

fn event(id: u64, parent: Option<u64>, ts: u64, links: &[u64]) -> Event {
    Event {
        id,
        parent,
        links: links.to_vec(),
        correlation: None,
        callsite: cs(&format!("e{id:x}"), Kind::Event),
        fields: vec![Value::U64(id)],
        ts_ns: T0 + ts,
    }
}

fn process(pid: u32, threads: Vec<Thread>) -> Process {
    fixtures::process(pid, "p", threads)
}

/// A span as written, in owned parts.
#[derive(Debug)]
struct Got {
    id: u64,
    name: String,
    parent: Option<u64>,
    parent_anchor: Option<Anchor>,
    event: bool,
    logs: Vec<u64>,
    links: Vec<Link>,
    fields: usize,
}

#[derive(Default)]
struct Collect(Vec<Got>);

impl SpanWriter for Collect {
    fn span(&mut self, _ctx: &TraceInfo, s: &OutSpan<'_>) -> io::Result<()> {
        self.0.push(Got {
            id: s.id,
            name: s.callsite.name.to_string(),
            parent: s.parent,
            parent_anchor: s.parent_anchor,
            event: s.event,
            logs: s.logs.iter().map(|l| l.id).collect(),
            links: s.links.to_vec(),
            fields: s.fields.len(),
        });
        Ok(())
    }
}

fn spans(trace: &Trace) -> Vec<Got> {
    let mut c = Collect::default();
    write_trace(trace, &mut c).unwrap();
    c.0
}

fn named<'a>(got: &'a [Got], name: &str) -> &'a Got {
    got.iter().find(|g| g.name == name).unwrap_or_else(|| panic!("no {name} in {got:#?}"))
}

/// Records of one file with two threads, interleaved as chunks interleave them: thread 0 opens
/// span 1 (0 to 100); thread 1, in its context, records an event at 50 and one at 150 (after
/// the span ended, yet read while it was open); then thread 0 ends span 1.
fn interleaved<S: Sink<Span = usize>>(sink: &mut S) {
    records(sink, false);
}

/// [`interleaved`]'s file, or (`late_detach`) one where thread 0's span 1 holds a child span 2
/// and is detached (to follow a future) while the child is open.
fn records<S: Sink<Span = usize>>(sink: &mut S, late_detach: bool) {
    use crate::decode::{
        stream::{FileEnd, Header},
        Fields,
    };
    let ns = Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 };
    let header = Header { pid: 1, name: "p".into(), trace_id: 7, calibration: ns, ..Header::default() };
    let (span_cs, event_cs, fields) = (cs("s1", Kind::Span), cs("e", Kind::Event), Fields::new());
    let item = |id, parent, cs, ticks| stream::Item {
        id,
        parent,
        held: false,
        callsite: cs,
        callsite_index: 1,
        fields: &fields,
        ticks,
        depth: 0,
        links: &[],
        correlation: None,
    };
    sink.process("x.bin", &header);
    sink.thread(0, 0);
    sink.thread(1, 1);
    let s1 = sink.span_begin(0, &item(0x1, None, &span_cs, T0));
    if late_detach {
        let child_cs = cs("s2", Kind::Span);
        let s2 = sink.span_begin(0, &item(0x2, Some(0x1), &child_cs, T0 + 10));
        sink.detach(0, s1, 0x1);
        sink.span_end(0, s2, T0 + 20, true);
        sink.detached_end(0, s1, T0 + 100, true);
        sink.finish(&FileEnd { dropped: 0, complete: true });
        return;
    }
    sink.event(1, &item(0x11, Some(0x1), &event_cs, T0 + 50));
    sink.event(1, &item(0x12, Some(0x1), &event_cs, T0 + 150));
    sink.span_end(0, s1, T0 + 100, true);
    sink.finish(&FileEnd { dropped: 0, complete: true });
}

#[test]
fn events_of_other_threads_are_logs_only_within_their_span() {
    let mut state = state::State::new(LOGS);
    interleaved(&mut Assembler::new(&mut state, NoWrite));
    state.seal();
    let mut c = Collect::default();
    interleaved(&mut Assembler::new(&mut state, &mut c));
    let got = c.0;
    assert_eq!(named(&got, "s1").logs, [0x11], "{got:#?}");
    let late = got.iter().find(|g| g.id == 0x12).expect("the late event");
    assert!(late.event && late.parent == Some(0x1));
    let anchor = late.parent_anchor.expect("its parent is on another thread");
    assert_eq!((anchor.thread, anchor.ts_ns), (0, T0));
    // Played back from a model, thread after thread, the span has ended when the worker's
    // events are read: both are spans of their own.
    let main = thread(1, vec![span(0x1, None, 0, 0, 100)], vec![]);
    let worker = thread(2, vec![], vec![event(0x11, Some(0x1), 50, &[]), event(0x12, Some(0x1), 150, &[])]);
    let got = spans(&Trace { processes: vec![process(1, vec![main, worker])] });
    assert_eq!(named(&got, "s1").fields, 1, "fields are read in the second pass");
    assert_eq!(got.iter().filter(|g| g.event && g.parent == Some(0x1)).count(), 2);
}

#[test]
fn links_resolve_to_the_span_showing_the_cause_across_files() {
    // File 1 links to an event of file 2 (read later), which is a log of its span.
    let effect = Span { links: vec![0x2_0002, 0x2_0099], ..span(0x1_0001, None, 0, 10, 20) };
    let a = process(1, vec![thread(1, vec![effect], vec![])]);
    let b = process(
        2,
        vec![thread(2, vec![span(0x2_0001, None, 0, 0, 30)], vec![event(0x2_0002, Some(0x2_0001), 5, &[])])],
    );
    let got = spans(&Trace { processes: vec![a, b] });
    let links = &named(&got, "s10001").links;
    assert_eq!(links.len(), 2);
    assert_eq!((links[0].span, links[0].resolved, links[0].target_event), (0x2_0001, true, Some(0x2_0002)));
    assert_eq!(links[0].anchor.map(|a| (a.process, a.ts_ns)), Some((1, T0 + 5)));
    assert_eq!((links[1].span, links[1].resolved), (0x2_0099, false), "not in the trace");
    assert_eq!(named(&got, "s20001").logs, [0x2_0002]);
}

#[test]
fn a_span_shows_at_most_logs_events() {
    let events = (0..LOGS as u64 + 2).map(|k| event(0x100 + k, Some(0x1), k, &[])).collect();
    let got = spans(&Trace {
        processes: vec![process(1, vec![thread(1, vec![span(0x1, None, 0, 0, 1000)], events)])],
    });
    assert_eq!(named(&got, "s1").logs.len(), LOGS);
    let own: Vec<&Got> = got.iter().filter(|g| g.event).collect();
    assert_eq!(own.len(), 2);
    assert!(own.iter().all(|g| g.parent == Some(0x1)), "the rest are spans of their own, its children");
}

#[test]
fn stand_ins_and_repeats_get_fresh_ids_that_skip_used_ones() {
    // A stand-in (id 0) holds a child and an event; the trace also uses the first fresh id.
    let used = 0xffff_ffff_0000_0001;
    let t1 = thread(
        1,
        vec![span(0, None, 0, 0, 100), span(0x5, None, 1, 10, 20), span(used, None, 0, 200, 300)],
        vec![event(0x6, None, 50, &[])],
    );
    let got = spans(&Trace { processes: vec![process(1, vec![t1])] });
    let stand_in = got.iter().find(|g| g.name == "s0").unwrap();
    assert_eq!(stand_in.id, 0xffff_ffff_0000_0002, "fresh ids skip ids in use");
    assert_eq!(named(&got, "s5").parent, Some(stand_in.id));
    assert_eq!(stand_in.logs, [0x6]);

    // The same file twice: the second copy's items get fresh ids; links name the first.
    let one = || {
        let effect = Span { links: vec![0x1], ..span(0x2, None, 0, 20, 30) };
        process(1, vec![thread(1, vec![span(0x1, None, 0, 0, 10), effect], vec![])])
    };
    let got = spans(&Trace { processes: vec![one(), one()] });
    let ids: Vec<u64> = got.iter().map(|g| g.id).collect();
    assert_eq!(ids, [0x1, 0x2, 0xffff_ffff_0000_0001, 0xffff_ffff_0000_0002]);
    assert!(got.iter().filter(|g| g.name == "s2").all(|g| g.links[0].span == 0x1));
}

#[test]
fn a_span_detached_under_its_child_is_anchored_off_the_row() {
    let mut state = state::State::new(LOGS);
    records(&mut Assembler::new(&mut state, NoWrite), true);
    state.seal();
    let mut c = Collect::default();
    records(&mut Assembler::new(&mut state, &mut c), true);
    let child = named(&c.0, "s2");
    assert_eq!(child.parent, Some(0x1));
    let anchor = child.parent_anchor.expect("the parent left the thread's row");
    assert_eq!((anchor.detached, anchor.ts_ns), (Some(0x1), T0));
}

/// [`Collect`], as a one-pass writer.
#[derive(Default)]
struct Live(Collect);

impl SpanWriter for Live {
    const ONE_PASS: bool = true;
    fn span(&mut self, ctx: &TraceInfo, s: &OutSpan<'_>) -> io::Result<()> {
        self.0.span(ctx, s)
    }
}

/// A file where a stand-in (id 0) holds a child and an event that links ahead, to a span read
/// after it.
fn ahead<S: Sink<Span = usize>>(sink: &mut S) {
    use crate::decode::{
        stream::{FileEnd, Header},
        Fields,
    };
    let ns = Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 };
    let header = Header { pid: 1, name: "p".into(), calibration: ns, ..Header::default() };
    let fields = Fields::new();
    let (s0, s5, s7, e6) =
        (cs("s0", Kind::Span), cs("s5", Kind::Span), cs("s7", Kind::Span), cs("e6", Kind::Event));
    let item = |id, callsite, ticks, links| stream::Item {
        id,
        parent: None,
        held: false,
        callsite,
        callsite_index: 1,
        fields: &fields,
        ticks,
        depth: 0,
        links,
        correlation: None,
    };
    sink.process("x.bin", &header);
    sink.thread(0, 0);
    let stand_in = sink.span_begin(0, &item(0, &s0, T0, &[]));
    let child = sink.span_begin(0, &item(0x5, &s5, T0 + 10, &[]));
    sink.span_end(0, child, T0 + 20, true);
    sink.event(0, &item(0x6, &e6, T0 + 30, &[0x7]));
    sink.span_end(0, stand_in, T0 + 100, true);
    let later = sink.span_begin(0, &item(0x7, &s7, T0 + 200, &[]));
    sink.span_end(0, later, T0 + 300, true);
    sink.finish(&FileEnd { dropped: 0, complete: true });
}

#[test]
fn one_pass_assembles_as_the_two_where_nothing_needs_looking_ahead() {
    // An event of another thread within the span is a log of it; the one after is its own.
    let mut pass = OnePass::new();
    let mut live = Live::default();
    interleaved(&mut pass.assembler(&mut live));
    let got = live.0 .0;
    assert_eq!(named(&got, "s1").logs, [0x11], "{got:#?}");
    let late = got.iter().find(|g| g.id == 0x12).expect("the late event");
    assert!(late.event && late.parent == Some(0x1));
    assert_eq!(pass.process().map(|p| (p.spans, p.events, p.complete)), Some((1, 2, true)));

    // Both ways, the stand-in gets the first fresh id and holds its child and its event; the
    // event's link ahead resolves in two passes by the plan, in one by the id recorded.
    let mut state = state::State::new(LOGS);
    ahead(&mut Assembler::new(&mut state, NoWrite));
    state.seal();
    let mut two = Collect::default();
    ahead(&mut Assembler::new(&mut state, &mut two));
    let mut pass = OnePass::new();
    let mut one = Live::default();
    ahead(&mut pass.assembler(&mut one));
    type Shape = (u64, String, Option<u64>, Vec<u64>, Vec<(u64, bool)>);
    let shape = |got: &[Got]| -> Vec<Shape> {
        let links = |g: &Got| g.links.iter().map(|l| (l.span, l.resolved)).collect();
        got.iter().map(|g| (g.id, g.name.clone(), g.parent, g.logs.clone(), links(g))).collect()
    };
    let fresh = 0xffff_ffff_0000_0001;
    let want = vec![
        (0x5, "s5".to_owned(), Some(fresh), vec![], vec![]),
        (fresh, "s0".to_owned(), None, vec![0x6], vec![(0x7, true)]),
        (0x7, "s7".to_owned(), None, vec![], vec![]),
    ];
    assert_eq!(shape(&two.0), want);
    assert_eq!(shape(&one.0 .0), want);
}
