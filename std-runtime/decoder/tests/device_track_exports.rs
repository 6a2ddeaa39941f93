//! Device tracks in every format: a trace with two tracks (`GPU 0` with two kernels, `GPU 0 /
//! copy` with one copy), each slice launched by a host span, written in two streaming passes
//! (and Perfetto and Jaeger from the model too), and each output read back: the track where
//! the format puts it, the slices on it with their `track`, and the launch as an arrow, a link
//! or a correlation id; the tracks' definitions and syncs, which place the slices, in no format
//! as a span or an event. `--follow` sends the slices too, once the file is read.
//!
//! Over 400 lines because it is one recorded trace checked in each of seven formats: a
//! reader of the tracks per format (`shown_*`) beside the checks that use it, all on the same
//! recording.

use std::{collections::HashMap, path::PathBuf, sync::OnceLock};

use prost::Message;
use serde_json::Value as Json;
use waffle_export::{
    otlp,
    xspace::proto::{StatValue, XSpace},
    Files, Format,
};

#[path = "common/perfetto_pb.rs"]
mod pb;

#[path = "common/otlp_sink.rs"]
#[allow(dead_code)] // follow.rs uses the rest
mod otlp_sink;

/// The recorded file, and per slice (kernel, kernel, copy) its launching span's id.
fn recorded() -> &'static (PathBuf, Vec<u64>) {
    static FILE: OnceLock<(PathBuf, Vec<u64>)> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("waffle-device-exports-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.bin");
        let session = waffle_std::Config::new(&path).process_name("host").start().unwrap();
        // The device counts ns from 10^9, a clock of its own; synced at both ends. Nanoseconds,
        // not µs: a reading cut to a µs could map a slice up to 1 µs before the launch span
        // that began before it, and Jaeger's output keeps a cause that starts after its effect
        // as a tag, not a reference (export/jaeger.rs).
        let start = std::time::Instant::now();
        let device = || 1_000_000_000 + start.elapsed().as_nanos() as u64;
        let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
        let copy = waffle::Track::new("GPU 0 / copy", 1_000_000_000);
        gpu.sync(device());
        copy.sync(device());
        let mut launchers = Vec::new();
        for (track, name) in [(gpu, "kernel"), (gpu, "kernel"), (copy, "copy")] {
            let launch = waffle::span!("launch");
            let b = device();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let e = device();
            let launched_by = launch.id();
            launchers.push(launched_by.to_u64());
            drop(launch);
            match name {
                "kernel" => {
                    waffle::track_slice!(track, "kernel", b, e, launched_by = launched_by, bytes = 64u64)
                }
                _ => waffle::track_slice!(track, "copy", b, e, launched_by = launched_by),
            };
        }
        gpu.sync(device());
        copy.sync(device());
        session.stop().unwrap();
        (path, launchers)
    })
}

/// A slice's name.
fn is_slice(name: &Json) -> bool {
    name == "kernel" || name == "copy"
}

fn write(format: Format) -> Vec<u8> {
    let files = Files::scan(&[&recorded().0], format, &mut |_| {}).unwrap();
    assert!(files.warnings().is_empty(), "{:?}", files.warnings());
    let mut out = Vec::new();
    files.write(&mut out, &mut |_| {}).unwrap();
    out
}

fn from_model(format: Format) -> Vec<u8> {
    let trace = waffle_read::decode::decode_files(&[&recorded().0]).unwrap().trace;
    let mut out = Vec::new();
    waffle_export::export(&trace, format, &mut out).unwrap();
    out
}

/// A Perfetto track event, resolved: its track, name, kind, flows.
#[derive(Debug)]
struct Ev {
    track: u64,
    name: String,
    kind: i32,
    flows: Vec<u64>,
    terminating: Vec<u64>,
}

fn check_perfetto(out: &[u8]) {
    let trace = pb::Trace::decode(out).unwrap();
    let tracks: Vec<&pb::Track> = trace.packet.iter().filter_map(|p| p.track.as_ref()).collect();
    let process = tracks.iter().find(|t| t.process.is_some()).expect("a process track");
    let device: Vec<&&pb::Track> =
        tracks.iter().filter(|t| t.thread.is_none() && t.process.is_none()).collect();
    let names: Vec<&str> = device.iter().map(|t| t.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["GPU 0", "GPU 0 / copy"], "device tracks, named, not threads");
    assert!(device.iter().all(|t| t.parent == process.uuid), "children of the process track");
    // Events with their sequence's track and interned names.
    let (mut default_track, mut interned) = (HashMap::new(), HashMap::new());
    let mut events = Vec::new();
    for p in &trace.packet {
        let seq = p.seq.unwrap_or(0);
        if let Some(t) = p.defaults.as_ref().and_then(|d| d.event.as_ref()).and_then(|e| e.track) {
            default_track.insert(seq, t);
        }
        for n in p.interned.iter().flat_map(|i| &i.names) {
            interned.insert((seq, n.iid.unwrap()), n.name.clone().unwrap());
        }
        if let Some(e) = &p.event {
            events.push(Ev {
                track: e.track.or(default_track.get(&seq).copied()).unwrap(),
                name: e.name_iid.map(|i| interned[&(seq, i)].clone()).unwrap_or_default(),
                kind: e.kind.unwrap_or(0),
                flows: e.flow_ids.clone(),
                terminating: e.terminating.clone(),
            });
        }
    }
    const BEGIN: i32 = 1;
    let on = |track: u64| events.iter().filter(move |e| e.track == track && e.kind == BEGIN);
    let kernels: Vec<&Ev> = on(device[0].uuid.unwrap()).collect();
    let copies: Vec<&Ev> = on(device[1].uuid.unwrap()).collect();
    assert_eq!(kernels.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["kernel", "kernel"]);
    assert_eq!(copies.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["copy"]);
    // Each slice ends a flow that one launch span begins.
    let launches: Vec<&Ev> = events.iter().filter(|e| e.name == "launch" && e.kind == BEGIN).collect();
    assert_eq!(launches.len(), 3);
    for (slice, launch) in kernels.iter().chain(&copies).zip(&launches) {
        let arrow = |a: &Ev, b: &Ev| a.flows.iter().any(|f| b.terminating.contains(f) || b.flows.contains(f));
        assert!(arrow(launch, slice), "no flow from {launch:?} to {slice:?}");
    }
}

#[test]
fn perfetto_draws_a_track_per_device_queue_under_the_process_with_flows_from_the_launches() {
    check_perfetto(&write(Format::Perfetto));
    check_perfetto(&from_model(Format::Perfetto));
}

fn check_jaeger(out: &[u8]) {
    let json: Json = serde_json::from_slice(out).unwrap();
    let spans = json["data"][0]["spans"].as_array().unwrap();
    let id = |s: &Json| u64::from_str_radix(s["spanID"].as_str().unwrap(), 16).unwrap();
    let launchers = &recorded().1;
    let slices: Vec<&Json> = spans.iter().filter(|s| is_slice(&s["operationName"])).collect();
    assert_eq!(slices.len(), 3, "{slices:?}");
    for (slice, launcher) in slices.iter().zip(launchers) {
        let tags = slice["tags"].as_array().unwrap();
        let track = tags.iter().find(|t| t["key"] == "track").expect("a track tag");
        assert!(track["value"].as_str().unwrap().starts_with("GPU 0"));
        let refs = slice["references"].as_array().unwrap();
        let follows: Vec<u64> = refs
            .iter()
            .filter(|r| r["refType"] == "FOLLOWS_FROM")
            .map(|r| u64::from_str_radix(r["spanID"].as_str().unwrap(), 16).unwrap())
            .collect();
        assert_eq!(follows, [*launcher], "the launch is the one reference");
        let launch = spans.iter().find(|s| id(s) == *launcher).unwrap();
        assert!(slice["startTime"].as_u64() >= launch["startTime"].as_u64());
    }
}

#[test]
fn jaeger_spans_carry_their_track_and_follow_from_their_launch() {
    check_jaeger(&write(Format::Jaeger));
    check_jaeger(&from_model(Format::Jaeger));
}

#[test]
fn otlp_spans_carry_their_track_and_link_to_their_launch() {
    let out = write(Format::Otlp);
    let json = otlp::protobuf_to_json(&out).unwrap();
    let spans: Vec<&Json> = json["resourceSpans"][0]["scopeSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["spans"].as_array().unwrap())
        .collect();
    let launch_ids: Vec<&str> =
        spans.iter().filter(|s| s["name"] == "launch").map(|s| s["spanId"].as_str().unwrap()).collect();
    let slices: Vec<&&Json> = spans.iter().filter(|s| is_slice(&s["name"])).collect();
    assert_eq!(slices.len(), 3);
    for (slice, launch) in slices.iter().zip(&launch_ids) {
        let attributes = slice["attributes"].as_array().unwrap();
        let track = attributes.iter().find(|a| a["key"] == "track").expect("a track attribute");
        assert!(track["value"]["stringValue"].as_str().unwrap().starts_with("GPU 0"));
        assert_eq!(slice["links"][0]["spanId"].as_str(), Some(*launch));
        assert!(slice.get("parentSpanId").is_none_or(|p| p.as_str() == Some("")), "no parent: {slice}");
    }
}

#[test]
fn zipkin_spans_carry_their_track_and_name_their_launch() {
    let json: Json = serde_json::from_slice(&write(Format::Zipkin)).unwrap();
    let spans = json.as_array().unwrap();
    let slices: Vec<&Json> = spans.iter().filter(|s| is_slice(&s["name"])).collect();
    assert_eq!(slices.len(), 3);
    for (slice, launcher) in slices.iter().zip(&recorded().1) {
        assert!(slice["tags"]["track"].as_str().unwrap().starts_with("GPU 0"));
        assert_eq!(slice["tags"]["waffle.caused_by"].as_str(), Some(format!("{launcher:016x}").as_str()));
        assert!(slice.get("parentId").is_none());
    }
}

#[test]
fn chrome_draws_each_track_as_a_thread_row() {
    let json: Json = serde_json::from_slice(&write(Format::Chrome)).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let rows: HashMap<u64, &str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap()))
        .collect();
    let on = |name: &str| -> Vec<&str> {
        let tid = rows.iter().find(|(_, n)| **n == name).map(|(t, _)| *t).expect("a row for the track");
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"].as_u64() == Some(tid))
            .map(|e| e["name"].as_str().unwrap())
            .collect()
    };
    assert_eq!(on("GPU 0"), ["kernel", "kernel"]);
    assert_eq!(on("GPU 0 / copy"), ["copy"]);
    assert!(events.iter().any(|e| e["ph"] == "f" || e["ph"] == "t"), "flow events for the launches");
}

#[test]
fn xspace_puts_the_tracks_on_a_device_plane() {
    let space = XSpace::decode(write(Format::Xspace).as_slice()).unwrap();
    let planes: Vec<&str> = space.planes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(planes, ["/host:CPU", "/device:GPU:0"]);
    let device = &space.planes[1];
    let lines: Vec<(&str, i64)> = device.lines.iter().map(|l| (l.name.as_str(), l.id)).collect();
    assert_eq!(lines, [("GPU 0", 0), ("GPU 0 / copy", 1)]);
    let correlation =
        device.stat_metadata.values().find(|m| m.name == "correlation_id").expect("the stat").id;
    let mut launched = Vec::new();
    for line in &device.lines {
        for e in &line.events {
            let name = &device.event_metadata[&e.metadata_id].name;
            assert!(name == "kernel" || name == "copy", "{name}");
            let stat = e.stats.iter().find(|s| s.metadata_id == correlation).expect("a correlation id");
            let Some(StatValue::Uint64(id)) = stat.value else { panic!("{stat:?}") };
            launched.push(id);
        }
    }
    assert_eq!(launched, recorded().1);
    assert!(
        space.planes[0].lines.iter().all(|l| !l.name.starts_with("GPU")),
        "no device line on the host plane"
    );
    // Each launch carries the same value: xprof ties a kernel to the host event whose
    // correlation_id it shares.
    let host = &space.planes[0];
    let correlation = host.stat_metadata.values().find(|m| m.name == "correlation_id").expect("the stat").id;
    let mut launches = Vec::new();
    for e in host.lines.iter().flat_map(|l| &l.events) {
        if host.event_metadata[&e.metadata_id].name == "launch" {
            let stat = e.stats.iter().find(|s| s.metadata_id == correlation).expect("a correlation id");
            let Some(StatValue::Uint64(id)) = stat.value else { panic!("{stat:?}") };
            launches.push(id);
        }
    }
    assert_eq!(launches, recorded().1);
}

#[test]
fn follow_mode_sends_the_slices_once_the_file_is_read() {
    let (path, launchers) = recorded();
    let sink = otlp_sink::OtlpSink::start();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_waffle-decode"))
        .args(["--follow", path.to_str().unwrap(), "--send", &sink.target()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let trace = waffle_read::decode::decode_files(&[path]).unwrap().trace;
    let p = &trace.processes[0];
    let slices: Vec<String> =
        p.tracks.iter().flat_map(|t| &p.threads[t.thread].spans).map(|s| format!("{:016x}", s.id)).collect();
    assert_eq!(slices.len(), launchers.len());
    let received = sink.received();
    assert!(slices.iter().all(|id| received.contains_key(id)), "{slices:?} not all in {:?}", received.keys());
}

/// What an output shows as the names of spans and events, and as the keys of their fields.
struct Shown {
    names: Vec<String>,
    keys: Vec<String>,
}

impl Shown {
    /// The tracks' definitions (`track`: `track.name`, `track.rate`) and syncs (`track.sync`:
    /// `track.id`, `track.ticks`) are records of the file, not of the program: no span or event
    /// shows them (`decode/track.rs`). The slices do show, with their `track` field.
    fn assert_no_track_records(&self, format: &str) {
        for name in &self.names {
            assert!(name != "track" && name != "track.sync", "{format} shows a {name:?} record");
        }
        for key in &self.keys {
            assert!(
                !["track.name", "track.rate", "track.id", "track.ticks"].contains(&key.as_str()),
                "{format} shows a definition's or a sync's field {key:?}"
            );
        }
        assert_eq!(
            self.names.iter().filter(|n| *n == "kernel").count(),
            2,
            "{format}: the kernels are there"
        );
        assert!(self.keys.iter().any(|k| k == "track"), "{format}: the slices' track field is there");
    }
}

fn keys_of(items: &Json, key: &str) -> Vec<String> {
    items.as_array().into_iter().flatten().map(|kv| kv[key].as_str().unwrap().to_owned()).collect()
}

fn shown_jaeger(out: &[u8]) -> Shown {
    let json: Json = serde_json::from_slice(out).unwrap();
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    for span in json["data"][0]["spans"].as_array().unwrap() {
        names.push(span["operationName"].as_str().unwrap().to_owned());
        keys.extend(keys_of(&span["tags"], "key"));
        for log in span["logs"].as_array().unwrap() {
            names.push(log["fields"][0]["value"].as_str().unwrap().to_owned());
            keys.extend(keys_of(&log["fields"], "key"));
        }
    }
    Shown { names, keys }
}

fn shown_zipkin(out: &[u8]) -> Shown {
    let json: Json = serde_json::from_slice(out).unwrap();
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    for span in json.as_array().unwrap() {
        names.push(span["name"].as_str().unwrap().to_owned());
        keys.extend(span["tags"].as_object().unwrap().keys().cloned());
        for a in span["annotations"].as_array().into_iter().flatten() {
            // `name key=value ...`: these names have no spaces.
            let mut words = a["value"].as_str().unwrap().split(' ');
            names.push(words.next().unwrap().to_owned());
            keys.extend(words.filter_map(|w| w.split_once('=')).map(|(k, _)| k.to_owned()));
        }
    }
    Shown { names, keys }
}

fn shown_otlp(json: &Json) -> Shown {
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    for rs in json["resourceSpans"].as_array().unwrap() {
        for span in rs["scopeSpans"].as_array().unwrap().iter().flat_map(|s| s["spans"].as_array().unwrap()) {
            names.push(span["name"].as_str().unwrap().to_owned());
            keys.extend(keys_of(&span["attributes"], "key"));
            for e in span["events"].as_array().into_iter().flatten() {
                names.push(e["name"].as_str().unwrap().to_owned());
                keys.extend(keys_of(&e["attributes"], "key"));
            }
        }
    }
    Shown { names, keys }
}

fn shown_chrome(out: &[u8]) -> Shown {
    let json: Json = serde_json::from_slice(out).unwrap();
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    for e in json["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X" || e["ph"] == "i") {
        names.push(e["name"].as_str().unwrap().to_owned());
        keys.extend(e["args"].as_object().unwrap().keys().cloned());
    }
    Shown { names, keys }
}

fn shown_xspace(out: &[u8]) -> Shown {
    let space = XSpace::decode(out).unwrap();
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    for plane in &space.planes {
        for e in plane.lines.iter().flat_map(|l| &l.events) {
            names.push(plane.event_metadata[&e.metadata_id].name.clone());
            keys.extend(e.stats.iter().map(|s| plane.stat_metadata[&s.metadata_id].name.clone()));
        }
    }
    Shown { names, keys }
}

fn shown_perfetto(out: &[u8]) -> Shown {
    let trace = pb::Trace::decode(out).unwrap();
    let (mut event_names, mut arg_names) = (HashMap::new(), HashMap::new());
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    for p in &trace.packet {
        let seq = p.seq.unwrap_or(0);
        if let Some(i) = &p.interned {
            event_names.extend(i.names.iter().map(|n| ((seq, n.iid.unwrap()), n.name.clone().unwrap())));
            arg_names.extend(i.arg_names.iter().map(|n| ((seq, n.iid.unwrap()), n.name.clone().unwrap())));
        }
        if let Some(e) = &p.event {
            names.extend(e.name_iid.map(|i| event_names[&(seq, i)].clone()));
            keys.extend(e.args.iter().filter_map(|a| a.name_iid).map(|i| arg_names[&(seq, i)].clone()));
        }
    }
    Shown { names, keys }
}

#[test]
fn perfetto_shows_no_track_definition_or_sync() {
    shown_perfetto(&write(Format::Perfetto)).assert_no_track_records("perfetto");
    shown_perfetto(&from_model(Format::Perfetto)).assert_no_track_records("perfetto from the model");
}

#[test]
fn jaeger_shows_no_track_definition_or_sync() {
    shown_jaeger(&write(Format::Jaeger)).assert_no_track_records("jaeger");
    shown_jaeger(&from_model(Format::Jaeger)).assert_no_track_records("jaeger from the model");
}

#[test]
fn zipkin_shows_no_track_definition_or_sync() {
    shown_zipkin(&write(Format::Zipkin)).assert_no_track_records("zipkin");
    shown_zipkin(&from_model(Format::Zipkin)).assert_no_track_records("zipkin from the model");
}

#[test]
fn otlp_shows_no_track_definition_or_sync() {
    let json = |out: Vec<u8>| -> Json { serde_json::from_slice(&out).unwrap() };
    shown_otlp(&json(write(Format::OtlpJson))).assert_no_track_records("otlp json");
    shown_otlp(&json(from_model(Format::OtlpJson))).assert_no_track_records("otlp json from the model");
    let protobuf = otlp::protobuf_to_json(&write(Format::Otlp)).unwrap();
    shown_otlp(&protobuf).assert_no_track_records("otlp protobuf");
}

#[test]
fn chrome_shows_no_track_definition_or_sync() {
    shown_chrome(&write(Format::Chrome)).assert_no_track_records("chrome");
    shown_chrome(&from_model(Format::Chrome)).assert_no_track_records("chrome from the model");
}

#[test]
fn xspace_shows_no_track_definition_or_sync() {
    shown_xspace(&write(Format::Xspace)).assert_no_track_records("xspace");
    shown_xspace(&from_model(Format::Xspace)).assert_no_track_records("xspace from the model");
}
