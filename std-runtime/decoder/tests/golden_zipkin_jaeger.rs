//! The Zipkin and Jaeger exporters: golden files for the golden fixture (`golden/fixture.rs`,
//! the one trace every golden file is written from), and the rules each format's consumers
//! rely on, checked on that trace and on a real two-process run (the `nan_allreduce` example).
//!
//! `WAFFLE_BLESS=1 cargo test -p waffle-decode --test golden_zipkin_jaeger` rewrites the golden
//! files `tests/golden/{zipkin,jaeger}.json`; review the diff before committing it.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;
#[path = "golden/fixture.rs"]
mod fixture;

use fixture::{fixed_trace, golden};
use serde_json::Value as Json;
use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    process::Command,
};
use waffle_export::{export, Format};
use waffle_read::model::Trace;

fn exported(trace: &Trace, format: Format) -> Json {
    let mut out = Vec::new();
    export(trace, format, &mut out).expect("export");
    serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{format:?} output is not JSON: {e}"))
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
    use fixture::{AR0, AR1, CAUSE, STEP0, STEP1};
    let hex = |id: u64| format!("{id:016x}");
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
    for (name, parent) in [("orphan", None), ("late_ack", Some(hex(AR1)))] {
        let [s] = by_name(name)[..] else { panic!("one {name}") };
        assert_eq!((s["duration"].as_u64(), &s["tags"]["waffle.event"]), (Some(1), &Json::from("true")));
        assert_eq!(s["parentId"].as_str(), parent.as_deref(), "{name}");
    }
    let ar1 = by_name("allreduce").into_iter().find(|s| s["tags"]["rank"] == "1").unwrap();
    assert_eq!(ar1["tags"]["waffle.caused_by"], hex(CAUSE));
    assert_eq!(ar1["tags"]["waffle.correlate"], "allreduce=2");
    assert_eq!(by_name("report")[0]["tags"]["waffle.unresolved_links"], "1");
    assert_eq!(by_name("checkpoint")[0]["tags"]["waffle.unfinished"], "true");

    let jaeger = exported(&trace, Format::Jaeger);
    let spans = jaeger["data"][0]["spans"].as_array().unwrap();
    let refs = |id: u64| -> Vec<(String, String)> {
        let s = spans.iter().find(|s| s["spanID"] == hex(id)).unwrap();
        s["references"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["refType"].as_str().unwrap().into(), r["spanID"].as_str().unwrap().into()))
            .collect()
    };
    let r = |kind: &str, id: u64| (kind.to_owned(), hex(id));
    // Rank 0's allreduce: its parent, then the span holding its cause (rank 1's NaN input, an
    // event of rank 1's train_step). The same cause named by its symptom, a log, stays in the
    // log's `waffle.caused_by`: only a span's own links are references.
    assert_eq!(refs(AR0), [r("CHILD_OF", STEP0), r("FOLLOWS_FROM", STEP1)]);
    // Rank 1's: its parent, which also holds its cause (so FOLLOWS_FROM, once), then its
    // correlation peer before it.
    assert_eq!(refs(AR1), [r("FOLLOWS_FROM", STEP1), r("FOLLOWS_FROM", AR0)]);
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
            let again = refs[..n].iter().any(|o| o["spanID"] == r["spanID"]);
            assert!(!again, "a span referenced twice (Jaeger keeps one reference per span): {s}");
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
    let trace = waffle_read::decode::decode_files(&inputs).expect("decode").trace;
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

    let trace_id = format!("{:032x}", trace.processes[0].header.trace_id);
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
