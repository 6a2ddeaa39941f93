//! The OTLP and Chrome exporters on the golden fixture (`golden/fixture.rs`, the one trace
//! every golden file is written from), compared with golden files in `tests/golden/`
//! (`otlp.json`, `chrome.json`: pretty JSON, keys sorted). The OTLP protobuf is checked by
//! decoding it and rendering the same JSON. `WAFFLE_BLESS=1 cargo test` rewrites the golden
//! files; read the diff before committing one.
//!
//! Chrome's JSON is also written from real runs (the `causal_pair` and `nan_allreduce`
//! examples) both ways, streamed from the files and from their decoded model, which must show
//! the same trace.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;
#[path = "golden/fixture.rs"]
mod fixture;

use std::{collections::BTreeMap, process::Command};

use fixture::{fixed_trace, golden, TRACE_ID};
use serde_json::Value as Json;
use waffle_export::{otlp, Files, Format};

fn exported(format: Format) -> Vec<u8> {
    let mut out = Vec::new();
    waffle_export::export(&fixed_trace(), format, &mut out).expect("export");
    out
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
        let trace = waffle_read::decode::decode_files(&paths).unwrap().trace;
        waffle_export::export(&trace, Format::Chrome, &mut modelled).unwrap();
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
    use fixture::{ABSENT, AR0, ORPHAN, STEP0, SYMPTOM};
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
            (hex(AR0), caused_by.clone(), named(SYMPTOM)),
            (hex(STEP0), caused_by.clone(), None),
            (hex(ORPHAN), caused_by.clone(), named(ORPHAN)),
            (hex(ABSENT), caused_by, None),
        ]
    );
    // The orphan event is a zero-length span of its own, under its own id.
    let orphan = by_name("orphan")[0];
    assert_eq!(orphan["spanId"], hex(ORPHAN));
    assert_eq!(orphan["startTimeUnixNano"], orphan["endTimeUnixNano"]);
    assert_eq!(attr(orphan, "waffle.event"), Some(serde_json::json!({"boolValue": true})));
    // The stand-in has a fresh id, its child has it as parent, and the event inside it is one
    // of its events.
    let stand_in = by_name("(begin lost: records dropped)")[0];
    assert_eq!(stand_in["spanId"], "ffffffff00000001");
    assert_eq!(by_name("read_batch")[0]["parentSpanId"], "ffffffff00000001");
    assert_eq!(stand_in["events"][0]["name"], "retry");
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
        trace.processes.iter_mut().for_each(|p| p.header.trace_id = 0);
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
    trace.processes[1].header.trace_id = 7;
    assert_eq!(trace_ids(&otlp::to_json(&trace)), [format!("{:032x}", 7)].into());
}
