//! The OTLP and Chrome exporters on one fixed, hand-built trace, compared with golden files in
//! `tests/golden/` (`otlp.json`, `chrome.json`: pretty JSON, keys sorted). The OTLP protobuf is
//! checked by decoding it and rendering the same JSON. `WAFFLE_BLESS=1 cargo test` rewrites the
//! golden files; read the diff before committing one.
//!
//! The trace: two processes of one run (ranks 0 and 1, both pid 100 on different hosts), with
//! nesting, an unfinished span, a detached span with a child on another thread, an event with
//! a field of every value type, an event with no parent, a correlation pair across processes,
//! links to spans and to events across processes, a link to an id not in the trace, and a
//! stand-in for a span whose begin was lost (id 0) with a child.
//!
//! Chrome's JSON is also written from real runs (the `causal_pair` and `nan_allreduce`
//! examples) both ways, streamed from the files and from their decoded model, which must show
//! the same trace.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;

use std::{collections::BTreeMap, process::Command, sync::Arc};

use serde_json::Value as Json;
use waffle::{callsite::Kind, wire::FieldType};
use waffle_decode::{
    export::{self, otlp, Files, Format},
    model::{Callsite, Event, Process, Span, Thread, Trace, Value},
};

const T: u64 = 1_700_000_000_000_000_000;
const TRACE_ID: u128 = 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c;

fn callsite(name: &str, kind: Kind, fields: &[(&str, FieldType)], correlate: &str) -> Arc<Callsite> {
    Arc::new(Callsite {
        name: name.into(),
        module: "train".into(),
        file: "src/train.rs".into(),
        line: 1,
        kind,
        fields: fields.iter().map(|&(n, t)| (n.into(), t)).collect(),
        correlate: correlate.into(),
    })
}

struct SpanSpec<'a> {
    id: u64,
    parent: Option<u64>,
    depth: u32,
    callsite: &'a Arc<Callsite>,
    fields: Vec<Value>,
    times: (u64, u64),
}

fn span(s: SpanSpec<'_>) -> Span {
    Span {
        id: s.id,
        parent: s.parent,
        links: Vec::new(),
        correlation: None,
        detached: false,
        depth: s.depth,
        callsite: s.callsite.clone(),
        fields: s.fields,
        start_ns: T + s.times.0,
        end_ns: T + s.times.1,
        ended: true,
    }
}

fn event(id: u64, parent: Option<u64>, callsite: &Arc<Callsite>, fields: Vec<Value>, at: u64) -> Event {
    Event {
        id,
        parent,
        links: Vec::new(),
        correlation: None,
        callsite: callsite.clone(),
        fields,
        ts_ns: T + at,
    }
}

fn thread(tid: u64, name: &str, spans: Vec<Span>, events: Vec<Event>) -> Thread {
    Thread { stream: 0, tid, name: name.into(), spans, events, dropped: 0 }
}

fn process(rank: &str, host: &str, threads: Vec<Thread>) -> Process {
    Process {
        source: format!("rank{rank}.bin"),
        pid: 100,
        name: "trainer".into(),
        host: host.into(),
        labels: vec![("rank".into(), rank.into())],
        trace_id: TRACE_ID,
        parent_span: None,
        threads,
        dropped: 0,
        complete: true,
    }
}

/// Ids as the runtime makes them: a stream prefix in the upper 32 bits, a counter below.
const R0_MAIN: u64 = 0x1000_0000_0000_0000;
const R0_LOADER: u64 = 0x1000_0001_0000_0000;
const R1_MAIN: u64 = 0x2000_0000_0000_0000;
const R1_WORKER: u64 = 0x2000_0001_0000_0000;

fn fixed_trace() -> Trace {
    use FieldType as F;
    let train_step = callsite("train_step", Kind::Span, &[("round", F::U64)], "");
    let allreduce = callsite("allreduce", Kind::Span, &[("count", F::U64)], "allreduce");
    let checkpoint = callsite("checkpoint", Kind::Span, &[], "");
    let prefetch = callsite("prefetch", Kind::Span, &[("batch", F::U64)], "");
    // A field named like an attribute of the mapping: the field's value wins.
    let decode = callsite("decode", Kind::Span, &[("thread.name", F::Str)], "");
    let report = callsite("report", Kind::Span, &[], "");
    let tail = callsite("tail", Kind::Span, &[], "");
    let lost = callsite("(begin lost: records dropped)", Kind::Span, &[], "");
    let symptom = callsite("Output buffer is NaN after AllReduce", Kind::Event, &[("rank", F::U64)], "");
    let cause =
        callsite("Input buffer contains NaN", Kind::Event, &[("rank", F::U64), ("suggestion", F::Str)], "");
    let sample = callsite(
        "sample",
        Kind::Event,
        &[
            ("u", F::U64),
            ("big", F::U64),
            ("i", F::I64),
            ("f", F::F64),
            ("nan", F::F64),
            ("ok", F::Bool),
            ("s", F::Str),
        ],
        "",
    );
    let orphan = callsite("orphan", Kind::Event, &[], "");

    let (step1, cause_id, ar1, report_id) = (R1_MAIN | 1, R1_MAIN | 2, R1_MAIN | 3, R1_MAIN | 4);
    // Rank 0, main thread: train_step { sample; allreduce { symptom }; checkpoint (unfinished) };
    // the symptom names rank 1's cause event as its cause.
    let (step0, ar0, ckpt, symptom_id, sample_id) =
        (R0_MAIN | 1, R0_MAIN | 3, R0_MAIN | 5, R0_MAIN | 4, R0_MAIN | 2);
    let mut ar0_span = span(SpanSpec {
        id: ar0,
        parent: Some(step0),
        depth: 1,
        callsite: &allreduce,
        fields: vec![Value::U64(8)],
        times: (2_000, 8_000),
    });
    ar0_span.correlation = Some(2);
    let mut ckpt_span = span(SpanSpec {
        id: ckpt,
        parent: Some(step0),
        depth: 1,
        callsite: &checkpoint,
        fields: vec![],
        times: (9_000, 9_500),
    });
    ckpt_span.ended = false;
    let main0 = thread(
        100,
        "main",
        vec![
            span(SpanSpec {
                id: step0,
                parent: None,
                depth: 0,
                callsite: &train_step,
                fields: vec![Value::U64(2)],
                times: (0, 10_000),
            }),
            ar0_span,
            ckpt_span,
        ],
        vec![
            event(
                sample_id,
                Some(step0),
                &sample,
                vec![
                    Value::U64(42),
                    Value::U64(u64::MAX),
                    Value::I64(-5),
                    Value::F64(0.25),
                    Value::F64(f64::NAN),
                    Value::Bool(true),
                    Value::Str("héllo \"q\"".into()),
                ],
                1_000,
            ),
            Event {
                links: vec![cause_id],
                ..event(symptom_id, Some(ar0), &symptom, vec![Value::U64(0)], 7_000)
            },
        ],
    );
    // Rank 0, loader thread: a detached prefetch (begun in train_step's context, ending after
    // it) and its child decode on this thread; an event with no parent.
    let (prefetch_id, decode_id, orphan_id) = (R0_LOADER | 1, R0_LOADER | 2, R0_LOADER | 3);
    let mut prefetch_span = span(SpanSpec {
        id: prefetch_id,
        parent: Some(step0),
        depth: 0,
        callsite: &prefetch,
        fields: vec![Value::U64(7)],
        times: (3_000, 12_000),
    });
    prefetch_span.detached = true;
    let loader = thread(
        101,
        "loader",
        vec![
            prefetch_span,
            span(SpanSpec {
                id: decode_id,
                parent: Some(prefetch_id),
                depth: 0,
                callsite: &decode,
                fields: vec![Value::Str("decoder".into())],
                times: (4_000, 5_000),
            }),
        ],
        vec![event(orphan_id, None, &orphan, vec![], 11_000)],
    );

    // Rank 1, main thread: train_step { cause; allreduce (caused by cause) }; report, caused by
    // rank 0's symptom, rank 0's train_step, the orphan event and an id not in the trace.
    let mut ar1_span = span(SpanSpec {
        id: ar1,
        parent: Some(step1),
        depth: 1,
        callsite: &allreduce,
        fields: vec![Value::U64(8)],
        times: (2_500, 8_500),
    });
    ar1_span.correlation = Some(2);
    ar1_span.links = vec![cause_id];
    let mut report_span = span(SpanSpec {
        id: report_id,
        parent: None,
        depth: 0,
        callsite: &report,
        fields: vec![],
        times: (11_000, 11_500),
    });
    report_span.links = vec![symptom_id, step0, orphan_id, 0xdead, symptom_id];
    let main1 = thread(
        100,
        "main",
        vec![
            span(SpanSpec {
                id: step1,
                parent: None,
                depth: 0,
                callsite: &train_step,
                fields: vec![Value::U64(2)],
                times: (500, 10_500),
            }),
            ar1_span,
            report_span,
        ],
        vec![event(
            cause_id,
            Some(step1),
            &cause,
            vec![Value::U64(1), Value::Str("Check data loading pipeline for this rank.".into())],
            1_500,
        )],
    );
    // Rank 1, worker thread: a stand-in (its begin was lost) with a child, which the decoder
    // leaves without a parent.
    let mut stand_in = span(SpanSpec {
        id: 0,
        parent: None,
        depth: 0,
        callsite: &lost,
        fields: vec![],
        times: (600, 3_000),
    });
    stand_in.ended = false;
    let worker = thread(
        102,
        "worker",
        vec![
            stand_in,
            span(SpanSpec {
                id: R1_WORKER | 1,
                parent: None,
                depth: 1,
                callsite: &tail,
                fields: vec![],
                times: (1_000, 2_000),
            }),
        ],
        vec![],
    );

    Trace {
        processes: vec![
            process("0", "node-a", vec![main0, loader]),
            process("1", "node-b", vec![main1, worker]),
        ],
    }
}

fn exported(format: Format) -> Vec<u8> {
    let mut out = Vec::new();
    export::export(&fixed_trace(), format, &mut out).expect("export");
    out
}

/// Compares `json` with `tests/golden/<name>`, or rewrites it under `WAFFLE_BLESS=1`.
fn golden(name: &str, json: &Json) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let mut text = serde_json::to_string_pretty(json).expect("render");
    text.push('\n');
    if std::env::var_os("WAFFLE_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("create tests/golden");
        std::fs::write(&path, &text).expect("write golden file");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (WAFFLE_BLESS=1 creates it)", path.display()));
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0) + 1;
        panic!(
            "{} differs from the export, first at line {line}:\n  golden: {}\n  now:    {}\n\
             (WAFFLE_BLESS=1 cargo test rewrites it; review the diff)",
            path.display(),
            want.lines().nth(line - 1).unwrap_or("<end>"),
            text.lines().nth(line - 1).unwrap_or("<end>"),
        );
    }
}

#[test]
fn otlp_json_matches_golden() {
    let json: Json = serde_json::from_slice(&exported(Format::OtlpJson)).expect("OTLP/JSON parses");
    assert_eq!(json, otlp::to_json(&fixed_trace()));
    golden("otlp.json", &json);
}

#[test]
fn otlp_protobuf_says_what_the_json_says() {
    let pb = exported(Format::Otlp);
    let decoded = otlp::protobuf_to_json(&pb).expect("the protobuf decodes");
    assert_eq!(decoded, otlp::to_json(&fixed_trace()));
}

#[test]
fn chrome_matches_golden() {
    let json: Json = serde_json::from_slice(&exported(Format::Chrome)).expect("Chrome JSON parses");
    golden("chrome.json", &json);
}

/// Chrome's events with nothing that depends on the order spans end in: each event as text,
/// with a row named by its thread (and by its span, for a detached span's row) instead of its
/// tid, without flow ids and row sort indexes; counted.
fn chrome_shown(json: &Json) -> BTreeMap<String, usize> {
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let row = |e: &Json| (e["pid"].to_string(), e["tid"].to_string());
    let mut names = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name") {
        names.insert(row(e), e["args"]["name"].clone());
    }
    for e in events.iter().filter(|e| e["ph"] == "X" && e["args"]["waffle.detached"] == true) {
        names.insert(row(e), serde_json::json!([e["name"], e["args"]["waffle.id"]]));
    }
    let mut shown = BTreeMap::new();
    for e in events.iter().filter(|e| e["name"] != "thread_sort_index") {
        let mut e = e.clone();
        if e.get("tid").is_some() {
            e["tid"] = names[&row(&e)].clone();
        }
        if let Some(flow) = e.as_object_mut().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
            flow.remove("id");
        }
        *shown.entry(e.to_string()).or_default() += 1;
    }
    shown
}

#[test]
fn chrome_streamed_from_files_shows_what_the_model_shows() {
    let dir = std::env::temp_dir().join(format!("waffle-chrome-stream-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (example, files) in
        [("causal_pair", ["a.bin", "b.bin"]), ("nan_allreduce", ["rank0.bin", "rank1.bin"])]
    {
        let run = dir.join(example);
        let out = Command::new(common::example(example)).arg(&run).output().expect("run the example");
        assert!(out.status.success(), "{example}: {}", String::from_utf8_lossy(&out.stderr));
        let paths: Vec<_> = files.iter().map(|f| run.join(f)).collect();
        let mut streamed = Vec::new();
        Files::scan(&paths, Format::Chrome, &mut |_| {}).unwrap().write(&mut streamed, &mut |_| {}).unwrap();
        let mut modelled = Vec::new();
        let trace = waffle_decode::decode::decode_files(&paths).unwrap().trace;
        export::export(&trace, Format::Chrome, &mut modelled).unwrap();
        let (streamed, modelled): (Json, Json) =
            (serde_json::from_slice(&streamed).unwrap(), serde_json::from_slice(&modelled).unwrap());
        assert_eq!(streamed["otherData"], modelled["otherData"], "{example}");
        assert_eq!(chrome_shown(&streamed), chrome_shown(&modelled), "{example}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The OTLP mapping's promises, checked on the structure rather than on the text.
#[test]
fn otlp_links_events_and_ids() {
    let json = otlp::to_json(&fixed_trace());
    let spans: Vec<&Json> = json["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rs| rs["scopeSpans"][0]["spans"].as_array().unwrap())
        .collect();
    let by_name =
        |name: &str| -> Vec<&Json> { spans.iter().copied().filter(|s| s["name"] == name).collect() };
    let attr = |item: &Json, key: &str| -> Option<Json> {
        item["attributes"].as_array()?.iter().find(|kv| kv["key"] == key).map(|kv| kv["value"].clone())
    };
    let hex = |id: u64| format!("{id:016x}");
    let mut ids = std::collections::HashSet::new();
    for s in &spans {
        assert_eq!(s["traceId"], format!("{TRACE_ID:032x}"));
        let id = s["spanId"].as_str().unwrap();
        assert!(id.len() == 16 && id != "0000000000000000" && ids.insert(id.to_owned()), "{id}");
        assert_eq!(s["kind"], 1);
        let keys: Vec<&Json> =
            s["attributes"].as_array().map_or(vec![], |a| a.iter().map(|kv| &kv["key"]).collect());
        assert_eq!(keys.len(), keys.iter().collect::<std::collections::HashSet<_>>().len(), "{s}");
    }
    // The symptom is an event of rank 0's allreduce; report links to that span, naming it.
    let report = by_name("report")[0];
    let links: Vec<(String, Option<Json>, Option<Json>)> = report["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (l["spanId"].as_str().unwrap().to_owned(), attr(l, "waffle.link"), attr(l, "waffle.cause_event"))
        })
        .collect();
    let caused_by = Some(serde_json::json!({"stringValue": "caused_by"}));
    let named = |id: u64| Some(serde_json::json!({ "stringValue": hex(id) }));
    assert_eq!(
        links,
        vec![
            (hex(R0_MAIN | 3), caused_by.clone(), named(R0_MAIN | 4)),
            (hex(R0_MAIN | 1), caused_by.clone(), None),
            (hex(R0_LOADER | 3), caused_by.clone(), named(R0_LOADER | 3)),
            (hex(0xdead), caused_by, None),
        ]
    );
    // The orphan event is a zero-length span of its own, under its own id.
    let orphan = by_name("orphan")[0];
    assert_eq!(orphan["spanId"], hex(R0_LOADER | 3));
    assert_eq!(orphan["startTimeUnixNano"], orphan["endTimeUnixNano"]);
    assert_eq!(attr(orphan, "waffle.event"), Some(serde_json::json!({"boolValue": true})));
    // The stand-in has a fresh id, and its child has it as parent.
    let stand_in = by_name("(begin lost: records dropped)")[0];
    assert_eq!(stand_in["spanId"], "ffffffff00000001");
    assert_eq!(by_name("tail")[0]["parentSpanId"], "ffffffff00000001");
    // Of the correlated allreduces, the later links to the earlier, the first of the group.
    let mut ar = by_name("allreduce");
    assert_eq!(ar.len(), 2);
    ar.sort_by_key(|s| s["startTimeUnixNano"].as_str().unwrap().parse::<u64>().unwrap());
    let correlated = |a: &Json, b: &Json| {
        a["links"].as_array().into_iter().flatten().any(|l| {
            l["spanId"] == b["spanId"]
                && attr(l, "waffle.correlate") == Some(serde_json::json!({"stringValue": "allreduce=2"}))
        })
    };
    assert!(correlated(ar[1], ar[0]), "{}", ar[1]);
    assert!(!correlated(ar[0], ar[1]), "{}", ar[0]);
    // The unfinished checkpoint is marked and has no status.
    let ckpt = by_name("checkpoint")[0];
    assert_eq!(attr(ckpt, "waffle.unfinished"), Some(serde_json::json!({"boolValue": true})));
    assert!(ckpt.get("status").is_none());
}

/// Files recorded without a trace id still export one trace, under a stable, non-zero id.
#[test]
fn otlp_trace_id_fallback() {
    let unnamed = || {
        let mut trace = fixed_trace();
        trace.processes.iter_mut().for_each(|p| p.trace_id = 0);
        trace
    };
    let trace_ids = |json: &Json| -> std::collections::BTreeSet<String> {
        let spans = json["resourceSpans"].as_array().unwrap().iter();
        spans
            .flat_map(|rs| rs["scopeSpans"][0]["spans"].as_array().unwrap())
            .map(|s| s["traceId"].as_str().unwrap().to_owned())
            .collect()
    };
    let ids = trace_ids(&otlp::to_json(&unnamed()));
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = ids.first().unwrap();
    assert!(id.len() == 32 && id.chars().any(|c| c != '0'), "{id}");
    assert_eq!(trace_ids(&otlp::to_json(&unnamed())), ids, "the same files give the same id");

    // Only the second process has one: it names the trace.
    let mut trace = unnamed();
    trace.processes[1].trace_id = 7;
    assert_eq!(trace_ids(&otlp::to_json(&trace)), [format!("{:032x}", 7)].into());
}
