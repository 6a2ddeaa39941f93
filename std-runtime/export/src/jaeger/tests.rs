//! Edge cases of the span-list exporters (the golden files cover the ordinary ones): loops of
//! causes, an empty trace, a trace without a trace id, repeated ids, parents outside the trace.

use std::collections::HashMap;
use std::sync::Arc;
use waffle_read::fixtures;

use serde_json::Value as Json;
use waffle_wire::Kind;

use crate::model::{Callsite, Event, Span, Thread, Trace, Value};
use crate::{export, Format};

fn callsite(name: &str, kind: Kind) -> Arc<Callsite> {
    fixtures::callsite(name, kind, &["n"])
}

fn span(id: u64, parent: Option<u64>, links: &[u64], start_us: u64) -> Span {
    Span {
        id,
        parent,
        links: links.to_vec(),
        correlation: None,
        detached: false,
        depth: u32::from(parent.is_some()),
        callsite: callsite("s", Kind::Span),
        fields: vec![Value::U64(id)],
        start_ns: 1_700_000_000_000_000_000 + start_us * 1000,
        end_ns: 1_700_000_000_000_000_000 + (start_us + 10) * 1000,
        ended: true,
    }
}

fn trace(trace_id: u128, spans: Vec<Span>, events: Vec<Event>) -> Trace {
    let thread = Thread { stream: 0, tid: 1, name: String::new(), spans, events, dropped: 0 };
    let mut process = fixtures::process(1, "", vec![thread]);
    process.header.trace_id = trace_id;
    Trace { processes: vec![process] }
}

fn json(trace: &Trace, format: Format) -> Json {
    let mut out = Vec::new();
    export(trace, format, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// Each span's references, by span id.
fn jaeger_refs(trace: &Trace) -> HashMap<String, Vec<(String, String)>> {
    let j = json(trace, Format::Jaeger);
    let spans = j["data"][0]["spans"].as_array().unwrap().clone();
    spans
        .iter()
        .map(|s| {
            let refs = s["references"].as_array().unwrap();
            let refs = refs
                .iter()
                .map(|r| (r["refType"].as_str().unwrap().into(), r["spanID"].as_str().unwrap().into()));
            (s["spanID"].as_str().unwrap().to_owned(), refs.collect())
        })
        .collect()
}

fn id(n: u64) -> String {
    format!("{n:016x}")
}

/// Following first references from any span ends (at a root), as Jaeger's UI needs.
fn assert_tree(refs: &HashMap<String, Vec<(String, String)>>) {
    for start in refs.keys() {
        let mut at = start;
        for _ in 0..=refs.len() {
            match refs.get(at).and_then(|r| r.first()) {
                Some((_, up)) => at = up,
                None => break,
            }
        }
        assert!(refs.get(at).is_none_or(|r| r.is_empty()), "a loop of first references from {start}");
    }
}

#[test]
fn causes_that_loop_never_loop_the_ui_tree() {
    // 1 and 2 name each other; 3 names 5, and 5, a child of 4, names 3. A first reference
    // always points back in time; references after a parent are free.
    let t = trace(
        7,
        vec![
            span(1, None, &[2], 0),
            span(2, None, &[1], 1),
            span(3, None, &[5], 2),
            span(4, None, &[], 3),
            span(5, Some(4), &[3], 4),
        ],
        vec![],
    );
    let refs = jaeger_refs(&t);
    let ff = |n: u64| ("FOLLOWS_FROM".to_owned(), id(n));
    assert_eq!(refs[&id(1)], [], "2 is later than 1: following it could close the loop 1 → 2 → 1");
    assert_eq!(refs[&id(2)], [ff(1)], "the earlier cause leads");
    assert_eq!(refs[&id(3)], [], "5 is later than 3");
    assert_eq!(refs[&id(5)], [("CHILD_OF".to_owned(), id(4)), ff(3)], "after CHILD_OF, any cause is safe");
    assert_tree(&refs);
    // The tag keeps the cause left out.
    let j = json(&t, Format::Jaeger);
    let one =
        j["data"][0]["spans"].as_array().unwrap().iter().find(|s| s["spanID"] == id(1)).unwrap().clone();
    let tags = one["tags"].as_array().unwrap();
    assert!(tags.iter().any(|t| t["key"] == "waffle.caused_by" && t["value"] == id(2)));
}

#[test]
fn a_parent_that_is_a_cause_is_referenced_once() {
    // 5's parent 4 is also its cause, and 3 is a cause too: 4 once, as FOLLOWS_FROM, first (what
    // Jaeger makes of the OTLP parent and link); 6 is a plain child.
    let t = trace(
        7,
        vec![
            span(3, None, &[], 0),
            span(4, None, &[], 1),
            span(5, Some(4), &[4, 3], 2),
            span(6, Some(4), &[], 3),
        ],
        vec![],
    );
    let refs = jaeger_refs(&t);
    let ff = |n: u64| ("FOLLOWS_FROM".to_owned(), id(n));
    assert_eq!(refs[&id(5)], [ff(4), ff(3)]);
    assert_eq!(refs[&id(6)], [("CHILD_OF".to_owned(), id(4))]);
    assert_tree(&refs);
}

#[test]
fn the_first_earlier_cause_leads() {
    // 2 names 3 (later) and then 1 (earlier): 1 leads, 3 comes after it.
    let t = trace(7, vec![span(1, None, &[], 0), span(2, None, &[3, 1], 1), span(3, None, &[], 2)], vec![]);
    let refs = jaeger_refs(&t);
    let ff = |n: u64| ("FOLLOWS_FROM".to_owned(), id(n));
    assert_eq!(refs[&id(2)], [ff(1), ff(3)]);
    assert_tree(&refs);
}

#[test]
fn a_span_without_a_parent_hangs_under_a_later_cause_only_where_no_loop_can_pass() {
    // Ranks 1 to 4, times in µs. An `MPI_Recv` (1) posted at 0 receives at 5 the message of an
    // `MPI_Send` (0x11) that began at 3: later, but a root that references nothing, so no loop
    // of first references can pass through it. Two `MPI_Sendrecv` (0x21 at 200, 0x31 at 202)
    // exchange messages: the later follows the earlier; the earlier's one cause is later and
    // references it, so it gets no reference and names the span in a tag. A span (0x41) whose
    // event (0x42) names an earlier span (0x51) follows from that span.
    let (send, recv) = (
        fixtures::keyed("MPI_Send", Kind::Span, "mpi.message>"),
        fixtures::keyed("MPI message received", Kind::Event, "mpi.message<"),
    );
    let sendrecv = fixtures::keyed("MPI_Sendrecv", Kind::Span, "mpi.message>");
    let sent = |id, cs: &Arc<Callsite>, value, start| Span {
        correlation: Some(value),
        callsite: cs.clone(),
        ..span(id, None, &[], start)
    };
    let received = |id, parent, value, at: u64| Event {
        id,
        parent: Some(parent),
        links: vec![],
        correlation: Some(value),
        callsite: recv.clone(),
        fields: vec![],
        ts_ns: 1_700_000_000_000_000_000 + at * 1000,
    };
    let plain = |id, start| Span { callsite: callsite("MPI_Recv", Kind::Span), ..span(id, None, &[], start) };
    let noted = Event {
        links: vec![0x51],
        correlation: None,
        callsite: callsite("noted", Kind::Event),
        ..received(0x42, 0x41, 0, 405)
    };
    let rank = |pid: u32, spans, events| {
        fixtures::process(pid, "mpi", vec![fixtures::thread(pid.into(), spans, events)])
    };
    let t = Trace {
        processes: vec![
            rank(1, vec![plain(0x1, 0), plain(0x41, 400)], vec![received(0x2, 0x1, 1, 5), noted]),
            rank(2, vec![sent(0x11, &send, 1, 3), span(0x51, None, &[], 380)], vec![]),
            rank(3, vec![sent(0x21, &sendrecv, 2, 200)], vec![received(0x22, 0x21, 3, 205)]),
            rank(4, vec![sent(0x31, &sendrecv, 3, 202)], vec![received(0x32, 0x31, 2, 207)]),
        ],
    };
    let refs = jaeger_refs(&t);
    let ff = |n: u64| ("FOLLOWS_FROM".to_owned(), id(n));
    assert_eq!(refs[&id(0x1)], [ff(0x11)], "the send references nothing: no loop can pass it");
    assert_eq!(refs[&id(0x31)], [ff(0x21)], "the earlier cause leads");
    assert_eq!(refs[&id(0x21)], [], "its one cause is later and references it");
    assert_eq!(refs[&id(0x41)], [ff(0x51)], "an event's cause is its span's too");
    assert_tree(&refs);
    let j = json(&t, Format::Jaeger);
    let tag = |span: u64, key: &str| {
        let spans = j["data"][0]["spans"].as_array().unwrap();
        let s = spans.iter().find(|s| s["spanID"] == id(span)).unwrap();
        s["tags"].as_array().unwrap().iter().find(|t| t["key"] == key).map(|t| t["value"].clone())
    };
    assert_eq!(tag(0x21, "waffle.follows_from"), Some(Json::from(id(0x31))));
    for span in [0x1, 0x31, 0x41, 0x11] {
        assert_eq!(tag(span, "waffle.follows_from"), None, "{span:x} references all it follows from");
    }
}

#[test]
fn empty_traces_are_valid_documents() {
    let empty = Trace::default();
    assert_eq!(json(&empty, Format::Zipkin), serde_json::json!([]));
    let j = json(&empty, Format::Jaeger);
    assert_eq!(j["data"][0]["spans"], serde_json::json!([]));
    assert_eq!(j["data"][0]["processes"], serde_json::json!({}));
}

#[test]
fn a_trace_without_an_id_gets_a_stable_non_zero_one() {
    let t = trace(0, vec![span(1, None, &[], 0)], vec![]);
    let a = json(&t, Format::Zipkin)[0]["traceId"].as_str().unwrap().to_owned();
    assert_eq!(a.len(), 32);
    assert_ne!(u128::from_str_radix(&a, 16).unwrap(), 0);
    assert_eq!(json(&t, Format::Zipkin)[0]["traceId"], a.as_str(), "the same files, the same id");
    assert_eq!(json(&t, Format::Jaeger)["data"][0]["traceID"], a.as_str());
}

#[test]
fn repeated_ids_and_foreign_parents() {
    // Span 1 twice, and a span whose parent is in another (absent) process.
    let t =
        trace(7, vec![span(1, None, &[], 0), span(1, None, &[], 20), span(2, Some(0x99), &[], 40)], vec![]);
    let z = json(&t, Format::Zipkin);
    let spans = z.as_array().unwrap();
    assert_eq!(spans[0]["id"], id(1));
    assert_eq!(spans[1]["id"], "ffffffff00000001", "the repeat gets a fresh id");
    assert!(spans[2].get("parentId").is_none(), "a parent not in the trace is not a parentId");
    assert_eq!(spans[2]["tags"]["waffle.unresolved_parent"], id(0x99));
    assert_eq!(spans[2]["localEndpoint"]["serviceName"], "waffle", "a process without a name");
}

#[test]
fn events_repeated_within_a_microsecond_stay_distinct_in_zipkin() {
    let cs = callsite("tick", Kind::Event);
    let ev = |id: u64, ns: u64| Event {
        id,
        parent: Some(1),
        links: vec![],
        correlation: None,
        callsite: cs.clone(),
        fields: vec![Value::U64(0)],
        ts_ns: 1_700_000_000_000_000_000 + 1000 + ns,
    };
    let t = trace(7, vec![span(1, None, &[], 0)], vec![ev(2, 100), ev(3, 200)]);
    let z = json(&t, Format::Zipkin);
    let values: Vec<&str> =
        z[0]["annotations"].as_array().unwrap().iter().map(|a| a["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["tick n=0", "tick n=0 waffle.id=0000000000000003"]);
}

#[test]
fn a_received_message_links_to_its_send_and_never_back() {
    let trace = fixtures::messages();
    // Jaeger: the receive follows from the send; a send follows from nothing.
    let refs = jaeger_refs(&trace);
    let follows = |span: u64| -> Vec<String> {
        let r = &refs[&id(span)];
        r.iter().filter(|(kind, _)| kind == "FOLLOWS_FROM").map(|(_, s)| s.clone()).collect()
    };
    assert_eq!(refs[&id(0x21)], [("CHILD_OF".into(), id(0x20)), ("FOLLOWS_FROM".into(), id(0x11))]);
    assert_eq!(follows(0x12), [id(0x31)]);
    for send in [0x11, 0x23, 0x31] {
        assert!(follows(send).is_empty(), "{:?}", refs[&id(send)]);
    }
    assert_tree(&refs);

    // Zipkin has no links: the receive names the send in a tag; sends name nothing.
    let zipkin = json(&trace, Format::Zipkin);
    let tag = |span: u64| {
        let s = zipkin.as_array().unwrap().iter().find(|s| s["id"] == id(span)).unwrap();
        s["tags"]["waffle.message_from"].as_str().map(str::to_owned)
    };
    assert_eq!(tag(0x21), Some(id(0x11)));
    assert_eq!(tag(0x12), Some(id(0x31)));
    assert_eq!((tag(0x11), tag(0x23), tag(0x31)), (None, None, None));
    // `main` shows `fan in 1`, caused by `fan out 1` (shown by `main` too) and `fan out 0`.
    assert_eq!(tag(0x20), Some(id(0x14)));

    // OTLP: a native link from the receive's span to the send's, marked as a message.
    let otlp = json(&trace, Format::OtlpJson);
    let mut spans = Vec::new();
    for rs in otlp["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            spans.extend(ss["spans"].as_array().unwrap().iter().cloned());
        }
    }
    let links = |span: u64| -> Vec<(String, String)> {
        let hex = id(span);
        let s = spans.iter().find(|s| s["spanId"] == hex.as_str()).unwrap_or_else(|| panic!("{hex}"));
        let attr = |l: &Json, key: &str| {
            let attrs = l["attributes"].as_array().unwrap();
            let a = attrs.iter().find(|a| a["key"] == key).unwrap();
            a["value"]["stringValue"].as_str().unwrap().to_owned()
        };
        let links = s["links"].as_array().into_iter().flatten();
        links.map(|l| (l["spanId"].as_str().unwrap().to_owned(), attr(l, "waffle.link"))).collect()
    };
    assert_eq!(links(0x21), [(id(0x11), "message".to_owned())]);
    assert_eq!(links(0x12), [(id(0x31), "message".to_owned())]);
    for send in [0x11, 0x23, 0x31] {
        assert!(links(send).is_empty());
    }
}
