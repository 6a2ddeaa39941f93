//! Small traces in the profiler's shape, written here, converted and read back with the
//! reference decoder: what each event became, where it sits, and what caused it.

use super::*;
use std::io::Write;
use waffle_read::model::{Process as Model, Span, Value};
use waffle_wire::reserved::track::DEVICE_TID_BASE;

/// A profile of one step: a host thread that runs an op which launches a kernel and a copy on
/// GPU 0's stream 7, the step on the GPU too, a forward-backward flow, names from metadata.
const PROFILE: &str = r#"{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "H200"}],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}},
    {"ph": "M", "name": "thread_name", "pid": 100, "tid": 101, "args": {"name": "main"}},
    {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": 101, "ts": 10.0, "dur": 100.0, "args": {"External id": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 101, "ts": 20.0, "dur": 30.5, "args": {"External id": 2, "Input Dims": [[2, 3], [3, 4]], "Sequence number": 7, "Fwd thread id": 0}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101, "ts": 25.0, "dur": 4.0, "args": {"correlation": 55, "cbid": 211}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 100, "tid": 101, "ts": 40.0, "dur": 3.0, "args": {"correlation": 56, "cbid": 41}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm_backward", "pid": 100, "tid": 101, "ts": 60.0, "dur": 20.0, "args": {"External id": 3}},
    {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 30.0, "dur": 12.25, "args": {"correlation": 55, "device": 0, "stream": 7, "grid": [4, 1, 1]}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 45.0, "dur": 2.0, "args": {"correlation": 56, "bytes": 4096}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 29.0, "dur": 20.0},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 55, "pid": 100, "tid": 101, "ts": 25.0},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 55, "pid": 0, "tid": 7, "ts": 30.0, "bp": "e"},
    {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 7, "pid": 100, "tid": 101, "ts": 20.0},
    {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 7, "pid": 100, "tid": 101, "ts": 60.0, "bp": "e"},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100, "tid": 101, "ts": 70.0, "s": "t", "args": {"Bytes": -512}},
    {"ph": "b", "cat": "async", "name": "prefetch", "id": 1, "pid": 100, "tid": 101, "ts": 11.0}
  ]
}"#;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-foreign-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Converts `json` and decodes every process it gives.
fn convert(name: &str, bytes: &[u8]) -> (Conversion, Vec<Model>) {
    let d = dir(name);
    let path = d.join(name);
    std::fs::write(&path, bytes).unwrap();
    let mut conv = Conversion::read(&path).unwrap();
    let mut models = Vec::new();
    for i in 0..conv.processes().len() {
        let out = d.join(format!("{i}.bin"));
        let mut f = std::fs::File::create(&out).unwrap();
        conv.write(i, &mut f).unwrap();
        drop(f);
        let (p, warnings) = waffle_read::decode::decode_file(&out).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        models.push(p);
    }
    (conv, models)
}

fn span<'a>(p: &'a Model, name: &str) -> &'a Span {
    p.threads
        .iter()
        .flat_map(|t| &t.spans)
        .find(|s| s.callsite.name == name)
        .unwrap_or_else(|| panic!("no span {name}"))
}

fn field<'a>(s: &'a Span, key: &str) -> &'a Value {
    &s.fields[s.callsite.field_index(key).unwrap_or_else(|| panic!("{} has no {key}", s.callsite.name))]
}

#[test]
fn a_profile_keeps_threads_nesting_causes_and_steps() {
    let (conv, models) = convert("profile.json", PROFILE.as_bytes());
    assert!(conv.is_profiler());
    let [p] = models.as_slice() else { panic!("one process, not {}", models.len()) };
    assert_eq!((p.header.pid, p.header.name.as_str(), p.header.label("rank")), (100, "python3", Some("3")));
    // The host thread, then GPU 0's stream 7.
    let names: Vec<_> = p.threads.iter().map(|t| (t.tid, t.name.as_str())).collect();
    assert_eq!(names, [(101, "main"), (DEVICE_TID_BASE, "GPU 0 stream 7")]);

    let step = span(p, "ProfilerStep#1");
    let mm = span(p, "aten::mm");
    let launch = span(p, "cudaLaunchKernel");
    let copy = span(p, "cudaMemcpyAsync");
    assert_eq!(step.callsite.field_names().next(), Some("step"));
    assert_eq!(field(step, "step"), &Value::U64(1));
    assert_eq!((mm.parent, launch.parent, copy.parent), (Some(step.id), Some(mm.id), Some(mm.id)));
    assert_eq!(p.header.calibration.anchor_unix_ns, 1_700_000_000_000_000_000);
    assert_eq!((mm.start_ns, mm.end_ns), (1_700_000_000_000_020_000, 1_700_000_000_000_050_500));
    assert_eq!(field(mm, "Input Dims"), &Value::Str("[[2,3],[3,4]]".into()));
    assert_eq!(field(mm, "External id"), &Value::U64(2));
    assert_eq!(mm.callsite.module, "cpu_op");

    // The kernel and the copy on the stream, inside the GPU's step, caused by their launches.
    let gpu = &p.threads[1];
    let kernel = gpu.spans.iter().find(|s| s.callsite.name == "sm90_gemm").unwrap();
    let memcpy = gpu.spans.iter().find(|s| s.callsite.name.starts_with("Memcpy")).unwrap();
    let gpu_step = gpu.spans.iter().find(|s| s.callsite.name == "ProfilerStep#1").unwrap();
    assert_eq!(
        (kernel.links.as_slice(), memcpy.links.as_slice()),
        ([launch.id].as_slice(), [copy.id].as_slice())
    );
    assert_eq!((kernel.parent, memcpy.parent), (Some(gpu_step.id), Some(gpu_step.id)));
    assert_eq!(kernel.end_ns - kernel.start_ns, 12_250);

    // The backward op is caused by its forward op (the flow), and the ac2g flow adds nothing.
    let bwd = span(p, "aten::mm_backward");
    assert_eq!(bwd.links, [mm.id]);
    let instant = p.threads[0].events.iter().find(|e| e.callsite.name == "[memory]").unwrap();
    assert_eq!(instant.fields, [Value::I64(-512)]);
    assert_eq!(instant.parent, Some(bwd.id));
    // The async event is said, not silently dropped.
    assert!(conv.warnings().iter().any(|w| w.contains("1 events of phase \"b\"")), "{:?}", conv.warnings());
}

#[test]
fn gzip_gives_the_same_trace() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(PROFILE.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let d = dir("gzip");
    let (plain, zipped) = (d.join("a.json"), d.join("a.json.gz"));
    std::fs::write(&plain, PROFILE).unwrap();
    std::fs::write(&zipped, gz).unwrap();
    assert_eq!((sniff(&plain).unwrap(), sniff(&zipped).unwrap()), (Some(Form::Json), Some(Form::Gzip)));
    let bytes = |p: &Path| {
        let mut out = Vec::new();
        Conversion::read(p).unwrap().write(0, &mut out).unwrap();
        out
    };
    assert_eq!(bytes(&plain), bytes(&zipped));
}

#[test]
fn overlapping_streams_are_threads_of_their_own_and_overlap_on_one_is_cut() {
    let json = r#"[
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 1, "dur": 1, "args": {"correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "a", "pid": 1, "tid": 7, "ts": 10, "dur": 10, "args": {"correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "b", "pid": 1, "tid": 8, "ts": 12, "dur": 10},
      {"ph": "X", "cat": "kernel", "name": "c", "pid": 1, "tid": 7, "ts": 15, "dur": 10}
    ]"#;
    let (conv, models) = convert("streams.json", json.as_bytes());
    let [p] = models.as_slice() else { panic!() };
    let tids: Vec<_> = p.threads.iter().map(|t| (t.tid, t.name.as_str(), t.spans.len())).collect();
    assert_eq!(
        tids,
        [
            (9, "", 1),
            (DEVICE_TID_BASE, "device 1 stream 7", 2),
            (DEVICE_TID_BASE + 1, "device 1 stream 8", 1)
        ]
    );
    let c = span(p, "c");
    assert_eq!((c.parent, c.end_ns - c.start_ns), (Some(span(p, "a").id), 5_000), "cut at a's end");
    assert!(conv.warnings().iter().any(|w| w.contains("1 slices outlasted")), "{:?}", conv.warnings());
}

#[test]
fn begin_end_pairs_nest_and_processes_stay_apart() {
    let json = r#"{"traceEvents": [
      {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "args": {"a": 1}},
      {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 1},
      {"ph": "E", "pid": 1, "tid": 1, "ts": 2, "args": {"b": true}},
      {"ph": "E", "pid": 1, "tid": 1, "ts": 3},
      {"ph": "E", "pid": 1, "tid": 1, "ts": 4},
      {"ph": "X", "name": "other", "pid": 2, "tid": 5, "ts": 1, "dur": 1},
      {"ph": "B", "name": "open", "pid": 2, "tid": 5, "ts": 3}
    ]}"#;
    let (conv, models) = convert("be.json", json.as_bytes());
    assert_eq!(models.len(), 2);
    let (a, b) = (&models[0], &models[1]);
    let (outer, inner) = (span(a, "outer"), span(a, "inner"));
    assert_eq!((inner.parent, field(inner, "b")), (Some(outer.id), &Value::Bool(true)));
    assert_eq!(span(b, "open").end_ns, 3_000, "ended at its thread's last time");
    assert_ne!(outer.id, span(b, "other").id, "the processes' ids differ");
    let w = conv.warnings().join("\n");
    assert!(w.contains("1 ends (`E`) without a begin") && w.contains("1 begins (`B`) without an end"), "{w}");
}

#[test]
fn a_cut_file_keeps_what_came_before_with_a_warning() {
    let cut = &PROFILE[..PROFILE.find("\"cudaMemcpyAsync\"").unwrap()];
    let (conv, models) = convert("cut.json", cut.as_bytes());
    let p = &models[0];
    assert!(p.threads.iter().flat_map(|t| &t.spans).any(|s| s.callsite.name == "cudaLaunchKernel"));
    assert!(!p.threads.iter().flat_map(|t| &t.spans).any(|s| s.callsite.name == "aten::mm_backward"));
    let w = conv.warnings().join("\n");
    assert!(w.contains(&format!("at byte {}", cut.len())) && w.contains("cut short"), "{w}");
}

#[test]
fn bad_input_names_the_byte() {
    let d = dir("bad");
    let path = d.join("bad.json");
    let text = r#"{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}"#;
    std::fs::write(&path, text).unwrap();
    let err = Conversion::read(&path).err().expect("an error").to_string();
    let at = text.find(",,").unwrap() + 1;
    assert!(
        err.contains(&format!("at byte {at}")) && err.contains("bad.json") && err.contains("column"),
        "{err}"
    );

    std::fs::write(&path, r#"{"traceEvents": 7}"#).unwrap();
    let err = Conversion::read(&path).err().expect("an error").to_string();
    assert!(err.contains("array of trace events"), "{err}");

    std::fs::write(
        &path,
        r#"{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}"#,
    )
    .unwrap();
    let err = Conversion::read(&path).err().expect("an error").to_string();
    assert!(err.contains("no slice or instant"), "{err}");

    std::fs::write(&path, b"\x89WFL\r\n\x1a\n").unwrap();
    assert_eq!(sniff(&path).unwrap(), None);
}
