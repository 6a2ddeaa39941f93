//! The Zipkin and Jaeger exporters: golden files for a fixed, hand-built trace, and the rules
//! each format's consumers rely on, checked on that trace and on a real two-process run (the
//! `nan_allreduce` example).
//!
//! The fixed trace has two processes (ranks 0 and 1 of `Trainer`, on two hosts), nesting, a
//! link across processes, a correlation pair, an event with a field of every value type
//! (and the values JSON and browsers cannot hold), an unfinished span, a placeholder for a span
//! whose begin was dropped (with a child span and an event inside it), an event outside any
//! span, an event after its parent ended, and a link to an id that is not in the trace.
//!
//! `WAFFLE_BLESS=1 cargo test -p waffle-std --test golden_zipkin_jaeger` rewrites the golden
//! files `tests/golden/{zipkin,jaeger}.json`; review the diff before committing it.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;

use serde_json::{Map, Value as Json};
use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};
use waffle::{callsite::Kind, wire::FieldType};
use waffle_decode::{
    export::{export, Format},
    model::{Callsite, Event, Process, Span, Thread, Trace, Value},
};

const T0: u64 = 1_700_000_000_000_000_000; // ns since the Unix epoch
const TRACE_ID: u128 = 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736;
const R0: u64 = 0x0001_2000_0000_0000; // rank 0's id prefix (salt, stream 0)
const R1: u64 = 0x0003_4000_0000_0000; // rank 1's

fn callsite(name: &str, kind: Kind, fields: &[&str], correlate: &str) -> Arc<Callsite> {
    Arc::new(Callsite {
        name: name.into(),
        module: "trainer".into(),
        file: "trainer.rs".into(),
        line: 1,
        kind,
        fields: fields.iter().map(|f| (f.to_string(), FieldType::Dynamic)).collect(),
        correlate: correlate.into(),
    })
}

fn span(cs: &Arc<Callsite>, id: u64, parent: Option<u64>, depth: u32, start_ns: u64, end_ns: u64) -> Span {
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth,
        callsite: cs.clone(),
        fields: vec![],
        start_ns: T0 + start_ns,
        end_ns: T0 + end_ns,
        ended: true,
    }
}

fn event(cs: &Arc<Callsite>, id: u64, parent: Option<u64>, ts_ns: u64, fields: Vec<Value>) -> Event {
    Event { id, parent, links: vec![], correlation: None, callsite: cs.clone(), fields, ts_ns: T0 + ts_ns }
}

fn thread(tid: u64, name: &str, spans: Vec<Span>, events: Vec<Event>) -> Thread {
    Thread { stream: 0, tid, name: name.into(), spans, events, dropped: 0 }
}

fn process(rank: &str, pid: u32, host: &str, threads: Vec<Thread>) -> Process {
    Process {
        source: format!("rank{rank}.bin"),
        pid,
        name: "Trainer".into(),
        host: host.into(),
        labels: vec![("rank".into(), rank.into())],
        trace_id: TRACE_ID,
        parent_span: None,
        threads,
        dropped: 0,
        complete: true,
    }
}

/// The fixed trace the golden files show.
fn fixed_trace() -> Trace {
    let step = callsite("train_step", Kind::Span, &["round"], "");
    let allreduce = callsite("allreduce", Kind::Span, &["rank", "bytes"], "allreduce");
    let symptom = callsite(
        "Output buffer is NaN after AllReduce",
        Kind::Event,
        &["count", "delta", "loss", "ok", "note", "big", "low", "bad"],
        "",
    );
    let nan_in = callsite("Input buffer contains NaN", Kind::Event, &["rank", "suggestion"], "");
    let lost = callsite("(begin lost: records dropped)", Kind::Span, &[], "");
    let read = callsite("read_batch", Kind::Span, &["batch"], "");
    let load = callsite("load", Kind::Span, &["path"], "");
    let beat = callsite("heartbeat", Kind::Event, &["seq"], "");
    let retry = callsite("retry", Kind::Event, &[], "");
    let late = callsite("late_ack", Kind::Event, &[], "");

    // Rank 0: train_step ⊃ allreduce ⊃ the symptom; the allreduce is caused by rank 1's NaN.
    let mut s1 = span(&step, R0 | 1, None, 0, 0, 900_000);
    s1.fields = vec![Value::U64(2)];
    let mut s2 = span(&allreduce, R0 | 2, Some(R0 | 1), 1, 100_500, 700_250);
    s2.fields = vec![Value::U64(0), Value::U64(4096)];
    s2.correlation = Some(2);
    s2.links = vec![R1 | 2];
    let mut e1 = event(
        &symptom,
        R0 | 3,
        Some(R0 | 2),
        650_000,
        vec![
            Value::U64(3),
            Value::I64(-7),
            Value::F64(0.25),
            Value::Bool(true),
            Value::Str("two words, \"quoted\"".into()),
            Value::U64(u64::MAX),
            Value::I64(i64::MIN),
            Value::F64(f64::NAN),
        ],
    );
    e1.links = vec![R1 | 3];
    let main0 = thread(4100, "main", vec![s1, s2], vec![e1]);

    // Rank 0's loader: a span whose begin was lost (with a child and an event inside it), an
    // event between spans, and a span that never ended.
    let loader_base = R0 | (1 << 32);
    let mut s3 = span(&lost, 0, None, 0, 0, 300_000);
    s3.ended = false;
    let mut s4 = span(&read, loader_base | 5, None, 1, 10_000, 20_000);
    s4.fields = vec![Value::I64(12)];
    let mut s5 = span(&load, loader_base | 8, None, 0, 400_000, 950_000);
    s5.fields = vec![Value::Str("/data/shard-3".into())];
    s5.ended = false;
    let e2 = event(&beat, loader_base | 7, None, 380_000, vec![Value::U64(1)]);
    let e3 = event(&retry, loader_base | 6, None, 25_000, vec![]);
    let mut loader = thread(4101, "loader", vec![s3, s4, s5], vec![e3, e2]);
    loader.stream = 1;
    loader.dropped = 2;
    let mut rank0 = process("0", 4100, "node-a", vec![main0, loader]);
    rank0.dropped = 2;

    // Rank 1: train_step ⊃ (the NaN input, allreduce); an acknowledgement after the allreduce
    // ended; the allreduce also names an id that is not in the trace.
    let mut s6 = span(&step, R1 | 1, None, 0, 50_000, 880_000);
    s6.fields = vec![Value::U64(2)];
    let suggestion = Value::Str("Check data loading pipeline for this rank.".into());
    let e4 = event(&nan_in, R1 | 2, Some(R1 | 1), 110_000, vec![Value::U64(1), suggestion]);
    let mut s7 = span(&allreduce, R1 | 3, Some(R1 | 1), 1, 120_000, 690_000);
    s7.fields = vec![Value::U64(1), Value::U64(4096)];
    s7.correlation = Some(2);
    s7.links = vec![R1 | 2, 0xdead_beef];
    let e5 = event(&late, R1 | 4, Some(R1 | 3), 700_000, vec![]);
    let mut rank1 = process("1", 4200, "node-b", vec![thread(4200, "main", vec![s6, s7], vec![e4, e5])]);
    rank1.complete = false;
    Trace { processes: vec![rank0, rank1] }
}

fn exported(trace: &Trace, format: Format) -> Json {
    let mut out = Vec::new();
    export(trace, format, &mut out).expect("export");
    serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{format:?} output is not JSON: {e}"))
}

/// The same value with every object's keys in sorted order, whatever order serde_json keeps.
fn sorted(v: &Json) -> Json {
    match v {
        Json::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            Json::Object(keys.into_iter().map(|k| (k.clone(), sorted(&o[k]))).collect::<Map<_, _>>())
        }
        Json::Array(a) => Json::Array(a.iter().map(sorted).collect()),
        v => v.clone(),
    }
}

fn golden(name: &str, actual: &Json) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let text = serde_json::to_string_pretty(&sorted(actual)).unwrap() + "\n";
    if std::env::var_os("WAFFLE_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with WAFFLE_BLESS=1 to create it", path.display()));
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{} differs from the export, first at line {}:\n  golden: {}\n  export: {}\n\
             If the change is intended, rerun with WAFFLE_BLESS=1 and review the diff.",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            text.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

#[test]
fn zipkin_golden() {
    let trace = fixed_trace();
    let json = exported(&trace, Format::Zipkin);
    check_zipkin(&json, &trace);
    golden("zipkin.json", &json);
}

#[test]
fn jaeger_golden() {
    let trace = fixed_trace();
    let json = exported(&trace, Format::Jaeger);
    check_jaeger(&json, &trace);
    golden("jaeger.json", &json);
}

/// The mapping choices the golden files encode, spelled out.
#[test]
fn fixed_trace_mapping() {
    let trace = fixed_trace();
    let zipkin = exported(&trace, Format::Zipkin);
    let by_name = |name: &str| -> Vec<&Json> {
        zipkin.as_array().unwrap().iter().filter(|s| s["name"] == name).collect()
    };
    // The placeholder got a fresh id, and its child and inner event came back to it.
    let [lost] = by_name("(begin lost: records dropped)")[..] else { panic!("one placeholder") };
    assert_eq!(lost["id"], "ffffffff00000001");
    assert_eq!(by_name("read_batch")[0]["parentId"], lost["id"]);
    assert!(lost["annotations"][0]["value"].as_str().unwrap().starts_with("retry"));
    // Events outside any span or after their parent are 1-µs spans of their own.
    for (name, parent) in [("heartbeat", None), ("late_ack", Some(format!("{:016x}", R1 | 3)))] {
        let [s] = by_name(name)[..] else { panic!("one {name}") };
        assert_eq!((s["duration"].as_u64(), &s["tags"]["waffle.event"]), (Some(1), &Json::from("true")));
        assert_eq!(s["parentId"].as_str(), parent.as_deref(), "{name}");
    }
    let ar1 = by_name("allreduce").into_iter().find(|s| s["tags"]["rank"] == "1").unwrap();
    assert_eq!(ar1["tags"]["waffle.caused_by"], format!("{:016x},{:016x}", R1 | 2, 0xdead_beef_u64));
    assert_eq!(ar1["tags"]["waffle.unresolved_links"], "1");
    assert_eq!(ar1["tags"]["waffle.correlate"], "allreduce=2");
    assert_eq!(by_name("load")[0]["tags"]["waffle.unfinished"], "true");

    let jaeger = exported(&trace, Format::Jaeger);
    let spans = jaeger["data"][0]["spans"].as_array().unwrap();
    let refs = |id: u64| -> Vec<(String, String)> {
        let s = spans.iter().find(|s| s["spanID"] == format!("{id:016x}")).unwrap();
        s["references"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["refType"].as_str().unwrap().into(), r["spanID"].as_str().unwrap().into()))
            .collect()
    };
    let r = |kind: &str, id: u64| (kind.to_owned(), format!("{id:016x}"));
    // Rank 0's allreduce: its parent, then the span holding its cause (rank 1's NaN input).
    assert_eq!(refs(R0 | 2), [r("CHILD_OF", R0 | 1), r("FOLLOWS_FROM", R1 | 1)]);
    // Rank 1's: its parent, the span holding its cause, its correlation peer before it.
    assert_eq!(refs(R1 | 3), [r("CHILD_OF", R1 | 1), r("FOLLOWS_FROM", R1 | 1), r("FOLLOWS_FROM", R0 | 2)]);
}

/// Zipkin's rules (zipkin2-api.yaml and what the server enforces), and that nothing is lost:
/// every span is a span, every event an annotation or a span of its own.
fn check_zipkin(json: &Json, trace: &Trace) {
    let spans = json.as_array().expect("a list of spans");
    let hex = |s: &Json, len: usize| {
        let s = s.as_str().unwrap_or_else(|| panic!("{s} is not a string"));
        assert!(s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{s}");
        assert!(s.bytes().any(|b| b != b'0'), "all zero: {s}");
        s.to_owned()
    };
    let ids: HashSet<String> = spans.iter().map(|s| hex(&s["id"], 16)).collect();
    assert_eq!(ids.len(), spans.len(), "ids are unique");
    let trace_id = hex(&spans[0]["traceId"], 32);
    let (mut annotations, mut event_spans) = (0, 0);
    for s in spans {
        assert_eq!(hex(&s["traceId"], 32), trace_id, "one trace");
        assert!(s.get("kind").is_none(), "no kind: {s}");
        if let Some(parent) = s.get("parentId") {
            assert_ne!(parent, &s["id"]);
            assert!(ids.contains(&hex(parent, 16)), "parent in the trace: {s}");
        }
        assert!(s["name"].is_string(), "{s}");
        let start = s["timestamp"].as_u64().expect("integer timestamp");
        let duration = s["duration"].as_u64().expect("integer duration");
        assert!(start > 1_000_000_000_000_000 && duration >= 1, "{s}");
        let service = s["localEndpoint"]["serviceName"].as_str().unwrap();
        assert!(!service.is_empty() && service == service.to_lowercase(), "{s}");
        assert!(s["tags"].as_object().unwrap().values().all(Json::is_string), "string tags: {s}");
        assert!(s["tags"]["process.pid"].is_string() && s["tags"]["thread.id"].is_string(), "{s}");
        for a in s.get("annotations").and_then(Json::as_array).into_iter().flatten() {
            let ts = a["timestamp"].as_u64().unwrap();
            assert!((start..=start + duration).contains(&ts), "annotation within its span: {s}");
            assert!(a["value"].is_string());
            annotations += 1;
        }
        event_spans += usize::from(s["tags"]["waffle.event"] == "true");
    }
    let (n_spans, n_events) = counts(trace);
    assert_eq!(spans.len(), n_spans + event_spans, "every span, plus events of their own");
    assert_eq!(annotations + event_spans, n_events, "every event");
}

/// Jaeger's rules (its JSON model and its UI's `transformTraceData`): ids, µs times, typed
/// tags, `processID`s that name processes, references in the trace with CHILD_OF first, a tree
/// (first reference = parent) that reaches every span, logs within their span.
fn check_jaeger(json: &Json, trace: &Trace) {
    let [t] = &json["data"].as_array().expect("data")[..] else { panic!("one trace") };
    let trace_id = t["traceID"].as_str().unwrap();
    assert!(trace_id.len() == 32 && u128::from_str_radix(trace_id, 16).unwrap() != 0);
    let processes = t["processes"].as_object().unwrap();
    assert_eq!(processes.len(), trace.processes.len());
    for p in processes.values() {
        assert!(!p["serviceName"].as_str().unwrap().is_empty());
        p["tags"].as_array().unwrap().iter().for_each(check_tag);
    }
    let spans = t["spans"].as_array().unwrap();
    let index: HashMap<&str, usize> =
        spans.iter().enumerate().map(|(k, s)| (s["spanID"].as_str().unwrap(), k)).collect();
    assert_eq!(index.len(), spans.len(), "span ids are unique");
    let mut first_ref = vec![None; spans.len()];
    let mut event_spans = 0;
    let mut logs = 0;
    for (k, s) in spans.iter().enumerate() {
        let id = s["spanID"].as_str().unwrap();
        assert!(id.len() == 16 && u64::from_str_radix(id, 16).unwrap() != 0, "{id}");
        assert_eq!(s["traceID"], trace_id);
        assert!(processes.contains_key(s["processID"].as_str().unwrap()), "{s}");
        let start = s["startTime"].as_u64().expect("µs start");
        let duration = s["duration"].as_u64().expect("µs duration");
        assert!(start > 1_000_000_000_000_000, "µs since the epoch: {s}");
        let refs = s["references"].as_array().unwrap();
        for (n, r) in refs.iter().enumerate() {
            assert_eq!(r["traceID"], trace_id);
            let target = index.get(r["spanID"].as_str().unwrap()).expect("reference in the trace");
            assert_ne!(*target, k, "no reference to itself");
            match r["refType"].as_str().unwrap() {
                "CHILD_OF" => assert_eq!(n, 0, "CHILD_OF first: {s}"),
                "FOLLOWS_FROM" => {}
                other => panic!("refType {other}"),
            }
            if n == 0 {
                first_ref[k] = Some(*target);
            }
        }
        s["tags"].as_array().unwrap().iter().for_each(check_tag);
        for l in s["logs"].as_array().unwrap() {
            let ts = l["timestamp"].as_u64().unwrap();
            assert!((start..=start + duration).contains(&ts), "log within its span: {s}");
            let fields = l["fields"].as_array().unwrap();
            assert_eq!(fields[0]["key"], "event");
            fields.iter().for_each(check_tag);
            logs += 1;
        }
        let is_event = s["tags"].as_array().unwrap().iter().any(|t| t["key"] == "waffle.event");
        event_spans += usize::from(is_event);
    }
    // The UI's tree: every span must reach a root through first references, without a loop.
    for k in 0..spans.len() {
        let (mut at, mut steps) = (k, 0);
        while let Some(up) = first_ref[at] {
            (at, steps) = (up, steps + 1);
            assert!(steps <= spans.len(), "span {} is on a loop of references", spans[k]["spanID"]);
        }
    }
    let (n_spans, n_events) = counts(trace);
    assert_eq!(spans.len(), n_spans + event_spans);
    assert_eq!(logs + event_spans, n_events);
}

fn check_tag(tag: &Json) {
    let value = &tag["value"];
    assert!(tag["key"].is_string(), "{tag}");
    let ok = match tag["type"].as_str().unwrap() {
        "string" => value.is_string(),
        "bool" => value.is_boolean(),
        "int64" => value.as_i64().is_some_and(|v| v.unsigned_abs() < 1 << 53),
        "float64" => value.is_f64() || value.is_i64() || value.is_u64(),
        _ => false,
    };
    assert!(ok, "badly typed tag {tag}");
}

fn counts(trace: &Trace) -> (usize, usize) {
    let threads = trace.processes.iter().flat_map(|p| &p.threads);
    threads.fold((0, 0), |(s, e), t| (s + t.spans.len(), e + t.events.len()))
}

/// The `nan_allreduce` example's binary.
fn example() -> PathBuf {
    common::example("nan_allreduce")
}

/// A real run of two processes, exported through the CLI (format from the file name), checked
/// against the same rules; and the NaN's story readable in both.
#[test]
fn nan_allreduce_exports_follow_the_rules() {
    let dir = std::env::temp_dir().join(format!("waffle-zj-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(example()).arg(&dir).output().expect("run the example");
    assert!(out.status.success(), "the example failed: {}", String::from_utf8_lossy(&out.stderr));
    let inputs = [dir.join("rank0.bin"), dir.join("rank1.bin")];
    let trace = waffle_decode::decode::decode_files(&inputs).expect("decode").trace;
    let read = |file: &str| -> Json {
        let path = dir.join(file);
        let out = Command::new(env!("CARGO_BIN_EXE_waffle-decode"))
            .args(&inputs)
            .arg("-o")
            .arg(&path)
            .output()
            .expect("run waffle-decode");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("JSON")
    };
    let (zipkin, jaeger) = (read("run.zipkin.json"), read("run.jaeger.json"));
    check_zipkin(&zipkin, &trace);
    check_jaeger(&jaeger, &trace);

    let trace_id = format!("{:032x}", trace.processes[0].trace_id);
    assert_eq!(zipkin[0]["traceId"], trace_id);
    assert_eq!(jaeger["data"][0]["traceID"], trace_id);
    let allreduces = zipkin.as_array().unwrap().iter().filter(|s| s["name"] == "allreduce").count();
    assert_eq!(allreduces, 8, "4 rounds on 2 ranks");
    // Rank 1's round-2 allreduce names the NaN input, which is shown with its id.
    let spans = jaeger["data"][0]["spans"].as_array().unwrap();
    let tag = |s: &Json, key: &str| -> Option<Json> {
        s["tags"].as_array().unwrap().iter().find(|t| t["key"] == key).map(|t| t["value"].clone())
    };
    let caused = spans
        .iter()
        .filter(|s| {
            s["operationName"] == "allreduce" && tag(s, "waffle.correlate") == Some("allreduce=2".into())
        })
        .find_map(|s| tag(s, "waffle.caused_by"))
        .expect("a round-2 allreduce with a cause");
    let cause = spans
        .iter()
        .flat_map(|s| s["logs"].as_array().unwrap())
        .find(|l| {
            l["fields"].as_array().unwrap().iter().any(|f| f["key"] == "waffle.id" && f["value"] == caused)
        })
        .expect("the cause is a log with its id");
    assert_eq!(cause["fields"][0]["value"], "Input buffer contains NaN");
    let _ = std::fs::remove_dir_all(&dir);
}
