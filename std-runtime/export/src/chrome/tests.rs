//! The Chrome writer on hand-built traces: where flows bind (by the rule in `rows`, as the
//! Python consumer test applies it), nesting, events as instants or slices, detached rows, and
//! what the writer holds once a trace is written.

use std::sync::Arc;
use waffle_read::fixtures::{self, thread};

use waffle_wire::Kind;

use super::*;
use crate::model::{Callsite, Event, Span, Thread, Value};

const T0: u64 = 1_700_000_000_000_000_000;

fn cs(name: &str, kind: Kind) -> Arc<Callsite> {
    fixtures::callsite(name, kind, &["n"])
}

fn span(name: &str, id: u64, parent: Option<u64>, start: u64, end: u64) -> Span {
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth: 0,
        callsite: cs(name, Kind::Span),
        fields: vec![Value::U64(id)],
        start_ns: T0 + start,
        end_ns: T0 + end,
        ended: true,
    }
}

fn event(name: &str, id: u64, parent: Option<u64>, ts: u64, links: &[u64]) -> Event {
    Event {
        id,
        parent,
        links: links.to_vec(),
        correlation: None,
        callsite: cs(name, Kind::Event),
        fields: vec![Value::U64(id)],
        ts_ns: T0 + ts,
    }
}

fn trace(threads: Vec<Thread>) -> Trace {
    Trace { processes: vec![fixtures::process(1, "p", threads)] }
}

fn export(trace: &Trace) -> Vec<Json> {
    let mut out = Vec::new();
    write(trace, &mut out).unwrap();
    let doc: Json = serde_json::from_slice(&out).expect("the document parses");
    doc["traceEvents"].as_array().unwrap().clone()
}

/// Nanoseconds since the origin of a `ts` or `dur`.
fn ns(v: &Json) -> u64 {
    (v.as_f64().unwrap() * 1000.0).round() as u64
}

/// A complete event: (row, start, end, name, args).
type Slice<'a> = ((i64, i64), u64, u64, &'a str, &'a Json);

fn slices(events: &[Json]) -> Vec<Slice<'_>> {
    let row = |e: &Json| (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
    let x = events.iter().filter(|e| e["ph"] == "X");
    x.map(|e| (row(e), ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"]), e["name"].as_str().unwrap(), &e["args"]))
        .collect()
}

fn named<'a>(events: &'a [Json], name: &str) -> Slice<'a> {
    *slices(events).iter().find(|s| s.3 == name).unwrap_or_else(|| panic!("no slice {name}"))
}

/// The binding rule: the innermost slice on the row with `start <= ts < end`, else a
/// zero-length slice at `ts`.
fn bound(events: &[Json], row: (i64, i64), ts: u64) -> Option<&str> {
    let on_row: Vec<Slice<'_>> = slices(events).into_iter().filter(|s| s.0 == row).collect();
    let inside = on_row.iter().filter(|s| s.1 <= ts && ts < s.2);
    let innermost = inside.max_by_key(|s| (s.1, std::cmp::Reverse(s.2)));
    innermost.or_else(|| on_row.iter().find(|s| s.1 == ts && s.2 == ts)).map(|s| s.3)
}

/// Each flow as (name, the slice its `s` binds to, the slice its `f` binds to).
fn arrows(events: &[Json]) -> Vec<(String, Option<&str>, Option<&str>)> {
    let flow = |ph: &str, id: &Json| events.iter().find(|e| e["ph"] == ph && &e["id"] == id).unwrap();
    let at = |e: &Json| bound(events, (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()), ns(&e["ts"]));
    let starts = events.iter().filter(|e| e["ph"] == "s");
    starts
        .map(|s| {
            let f = flow("f", &s["id"]);
            assert_eq!(f["bp"], "e");
            (s["name"].as_str().unwrap().to_owned(), at(s), at(f))
        })
        .collect()
}

/// Slices on one row lie inside each other or apart, never across an end.
fn assert_nests(events: &[Json]) {
    let mut all = slices(events);
    all.sort_by_key(|s| (s.0, s.1, std::cmp::Reverse(s.2)));
    let mut open: Vec<Slice<'_>> = Vec::new();
    for s in all {
        while open.last().is_some_and(|o| o.0 != s.0 || o.2 <= s.1) {
            open.pop();
        }
        if let Some(o) = open.last() {
            assert!(s.2 <= o.2, "{} crosses the end of {}", s.3, o.3);
        }
        open.push(s);
    }
}

#[test]
fn a_span_binds_its_flows_past_a_child_begun_with_it() {
    // p holds c (begun in the same nanosecond) and d right after it, then e; q, on another
    // thread, is caused by p.
    let a = thread(
        1,
        vec![
            span("p", 0x1, None, 0, 100),
            span("c", 0x2, Some(0x1), 0, 40),
            span("d", 0x3, Some(0x1), 40, 60),
            span("e", 0x4, Some(0x1), 70, 80),
        ],
        vec![],
    );
    let q = Span { links: vec![0x1], ..span("q", 0x11, None, 200, 210) };
    let events = export(&trace(vec![a, thread(2, vec![q], vec![])]));
    assert_nests(&events);
    assert_eq!(arrows(&events), [("caused_by".to_owned(), Some("p"), Some("q"))]);
    let s = events.iter().find(|e| e["ph"] == "s").unwrap();
    assert_eq!(ns(&s["ts"]), 60, "the first time in p that no child covers");
}

#[test]
fn a_child_that_outlives_its_parent_stretches_the_parent() {
    let t = thread(1, vec![span("p", 0x1, None, 0, 50), span("c", 0x2, Some(0x1), 10, 80)], vec![]);
    let events = export(&trace(vec![t]));
    assert_nests(&events);
    let (p, c) = (named(&events, "p"), named(&events, "c"));
    assert_eq!((p.1, p.2, &p.4["waffle.stretched"]), (0, 80, &json!(true)));
    assert_eq!((c.1, c.2, c.4.get("waffle.stretched")), (10, 80, None));
}

#[test]
fn events_in_flows_without_an_enclosing_slice_are_zero_length_slices() {
    let t = thread(
        1,
        vec![span("s", 0x1, None, 0, 100)],
        vec![
            event("inside", 0x2, Some(0x1), 10, &[]),
            event("linked", 0x3, None, 200, &[]),
            event("alone", 0x4, None, 300, &[]),
            event("causes", 0x5, None, 400, &[0x1]),
        ],
    );
    let q = Span { links: vec![0x2, 0x3], ..span("q", 0x11, None, 500, 510) };
    let events = export(&trace(vec![t, thread(2, vec![q], vec![])]));
    let phase = |name: &str| events.iter().find(|e| e["name"] == name).unwrap()["ph"].as_str().unwrap();
    assert_eq!([phase("inside"), phase("linked"), phase("alone"), phase("causes")], ["i", "X", "i", "X"]);
    // A zero-length slice that is an event says so; a span does not.
    let flag =
        |name: &str| events.iter().find(|e| e["name"] == name).unwrap()["args"].get("waffle.event").cloned();
    assert_eq!([flag("linked"), flag("causes"), flag("s")], [Some(json!(true)), Some(json!(true)), None]);
    let mut arrows = arrows(&events);
    arrows.sort();
    let arrow = |from, to| ("caused_by".to_owned(), Some(from), Some(to));
    assert_eq!(arrows, [arrow("linked", "q"), arrow("s", "causes"), arrow("s", "q")]);
}

#[test]
fn an_event_at_its_spans_end_binds_its_arrows_to_the_span() {
    // An MPI receive: `recv` ends when `received` is recorded (100), which names `send` on
    // another thread; and `sent` inside `send`, at its end too, names nothing but is named by
    // `ack`. By the binding rule a flow at 100 on recv's row would bind to nothing.
    let recv = span("recv", 0x1, None, 0, 100);
    let send = span("send", 0x11, None, 20, 60);
    let events = export(&trace(vec![
        thread(
            1,
            vec![recv],
            vec![event("received", 0x2, Some(0x1), 100, &[0x11]), event("ack", 0x3, None, 300, &[0x12])],
        ),
        thread(2, vec![send], vec![event("sent", 0x12, Some(0x11), 60, &[])]),
    ]));
    assert_nests(&events);
    let mut arrows = arrows(&events);
    arrows.sort();
    let arrow = |from, to| ("caused_by".to_owned(), Some(from), Some(to));
    assert_eq!(arrows, [arrow("send", "ack"), arrow("send", "recv")]);
    // Inside its span, an event's arrow still ends at its own time.
    let inside = export(&trace(vec![
        thread(
            1,
            vec![span("recv", 0x1, None, 0, 100)],
            vec![event("received", 0x2, Some(0x1), 70, &[0x11])],
        ),
        thread(2, vec![span("send", 0x11, None, 20, 60)], vec![]),
    ]));
    let f = inside.iter().find(|e| e["ph"] == "f").unwrap();
    assert_eq!(ns(&f["ts"]), 70);
}

#[test]
fn a_detached_span_has_a_row_and_an_arrow_from_its_parent() {
    let mut d = span("d", 0x2, Some(0x1), 10, 500);
    d.detached = true;
    let t = thread(1, vec![span("p", 0x1, None, 0, 100), d, span("after", 0x3, None, 600, 700)], vec![]);
    let k = span("k", 0x11, Some(0x2), 200, 300);
    let events = export(&trace(vec![t, thread(2, vec![k], vec![])]));
    assert_nests(&events);
    let d = named(&events, "d");
    let row_name = events
        .iter()
        .position(|e| e["name"] == "thread_name" && e["tid"] == d.0 .1 && e["args"]["name"] == "d");
    let x = events.iter().position(|e| e["ph"] == "X" && e["name"] == "d");
    assert!(row_name.is_some() && row_name < x, "its row is named before its slice");
    assert_ne!(d.0, named(&events, "p").0);
    let mut arrows = arrows(&events);
    arrows.sort();
    let arrow = |from, to| ("parent".to_owned(), Some(from), Some(to));
    assert_eq!(arrows, [arrow("d", "k"), arrow("p", "d")]);
    let ids: Vec<u64> = events.iter().filter(|e| e["ph"] == "s").map(|e| e["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [1, 2], "numbered in the order written");
}

#[test]
fn nothing_is_held_per_record() {
    // Every round: a span holding two more and an event, on two threads; a few links across.
    let held = |rounds: u64| {
        let threads = (0..2u64)
            .map(|t| {
                let base = (t + 1) << 32;
                let mut spans = Vec::new();
                let mut events = Vec::new();
                for r in 0..rounds {
                    let (id, at) = (base + 4 * r + 1, 100 * r);
                    spans.push(span("outer", id, None, at, at + 90));
                    spans.push(span("inner", id + 1, Some(id), at + 10, at + 40));
                    spans.push(span("inner", id + 2, Some(id), at + 50, at + 80));
                    let links =
                        if t == 1 && r % (rounds / 4) == 0 { vec![(1 << 32) + 4 * r + 1] } else { vec![] };
                    events.push(event("mark", id + 3, Some(id + 1), at + 20, &links));
                }
                thread(t + 1, spans, events)
            })
            .collect();
        let mut out = Vec::new();
        let mut w = ChromeWriter::new(&mut out);
        crate::spans::write_trace(&trace(threads), &mut w).unwrap();
        let held = (w.rows.open_parents() + w.enclosed.len(), w.flows.held());
        w.finish().unwrap();
        held
    };
    assert_eq!(held(40), (0, (4, 0)), "the four spans that links name, nothing open or waiting for its span");
    assert_eq!(held(4000), held(40));
}

#[test]
fn an_empty_trace_is_an_empty_document() {
    let mut out = Vec::new();
    write(&Trace { processes: vec![] }, &mut out).unwrap();
    let doc: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["traceEvents"], json!([]));
    assert_eq!(doc["otherData"]["waffle_origin_unix_ns"], "0");
}
