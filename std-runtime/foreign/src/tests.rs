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
    {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 30.0, "dur": 12.25, "args": {"correlation": 55, "External id": 2, "device": 0, "stream": 7, "grid": [4, 1, 1]}},
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

/// Converts the file at `path` with a window of `window` events per thread into files beside
/// it, and returns what was said and each file's bytes.
fn convert_at(path: &Path, window: usize) -> Result<(Converted, Vec<Vec<u8>>), Error> {
    let d = path.parent().unwrap().to_owned();
    let stem = path.file_name().unwrap().to_string_lossy().into_owned();
    let out = |i: usize| d.join(format!("{stem}.{i}.bin"));
    let done = convert_window(
        json::Input::Path(path),
        path,
        &mut |i, _| Ok(Box::new(std::fs::File::create(out(i))?) as Box<dyn Write>),
        window,
    )?;
    let bytes = (0..done.processes.len()).map(|i| std::fs::read(out(i)).unwrap()).collect();
    Ok((done, bytes))
}

/// Converts `json` and decodes every process it gives.
fn convert(name: &str, bytes: &[u8]) -> (Converted, Vec<Model>) {
    let d = dir(name);
    let path = d.join(name);
    std::fs::write(&path, bytes).unwrap();
    let (done, files) = convert_at(&path, emit::WINDOW).unwrap();
    let models = files
        .iter()
        .map(|f| {
            let (p, warnings) =
                waffle_read::decode::decode_reader(f.as_slice(), Path::new("converted")).unwrap();
            assert!(warnings.is_empty(), "{warnings:?}");
            p
        })
        .collect();
    (done, models)
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
    assert!(conv.profiler);
    let [p] = models.as_slice() else { panic!("one process, not {}", models.len()) };
    assert_eq!((p.header.pid, p.header.name.as_str(), p.header.label("rank")), (100, "python3", Some("3")));
    // The host thread, then GPU 0's stream 7.
    let names: Vec<_> = p.threads.iter().map(|t| (t.tid, t.name.as_str())).collect();
    assert_eq!(names, [(101, "main"), (DEVICE_TID_BASE, "GPU 0 / stream 7")]);
    assert_eq!(p.header.label("device.queues"), Some("1"), "one device listed");

    let step = span(p, "ProfilerStep");
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
    let gpu_step = gpu.spans.iter().find(|s| s.callsite.name == "ProfilerStep").unwrap();
    // Each launch is the cause of its work: one directed correlation value per pair.
    assert_eq!((&*launch.callsite.correlate, &*kernel.callsite.correlate), ("launch>", "launch<"));
    assert_eq!(kernel.correlation, launch.correlation);
    assert_eq!(memcpy.correlation, copy.correlation);
    assert!(kernel.correlation.is_some() && kernel.correlation != memcpy.correlation);
    assert_eq!((kernel.parent, memcpy.parent), (Some(gpu_step.id), Some(gpu_step.id)));
    assert_eq!(kernel.end_ns - kernel.start_ns, 12_250);
    // The operation that launched it, by its External id; the copy's launch has none.
    assert_eq!(field(kernel, "launch.op"), &Value::Str("aten::mm".into()));
    assert!(memcpy.callsite.field_index("launch.op").is_none());

    // The forward-backward flow: an event inside each op, the backward's caused by the
    // forward's; the ac2g flow adds nothing.
    let bwd = span(p, "aten::mm_backward");
    let flow: Vec<_> = p.threads[0].events.iter().filter(|e| e.callsite.name == "fwdbwd").collect();
    let keys: Vec<_> = flow.iter().map(|e| (e.parent, &*e.callsite.correlate)).collect();
    assert_eq!(keys, [(Some(mm.id), "flow>"), (Some(bwd.id), "flow<")]);
    assert_eq!(flow[0].correlation, flow[1].correlation);
    assert!(!p.threads.iter().flat_map(|t| &t.events).any(|e| e.callsite.name == "ac2g"));
    let instant = p.threads[0].events.iter().find(|e| e.callsite.name == "[memory]").unwrap();
    assert_eq!(instant.fields, [Value::I64(-512)]);
    assert_eq!(instant.parent, Some(bwd.id));
    // The async event is said, not silently dropped.
    assert!(conv.warnings.iter().any(|w| w.contains("1 events of phase \"b\"")), "{:?}", conv.warnings);
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
    let bytes = |p: &Path| convert_at(p, emit::WINDOW).unwrap().1;
    // The same bytes but for the correlation values, which are salted with the file's name.
    let unsalted = |p: &Path| {
        let copy = d.join("same-name");
        std::fs::copy(p, &copy).unwrap();
        bytes(&copy)
    };
    assert_eq!(unsalted(&plain), unsalted(&zipped));
    assert_ne!(bytes(&plain), bytes(&zipped));
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
            (DEVICE_TID_BASE, "device 1 / stream 7", 2),
            (DEVICE_TID_BASE + 1, "device 1 / stream 8", 1)
        ]
    );
    let c = span(p, "c");
    assert_eq!((c.parent, c.end_ns - c.start_ns), (Some(span(p, "a").id), 5_000), "cut at a's end");
    assert!(conv.warnings.iter().any(|w| w.contains("1 slices outlasted")), "{:?}", conv.warnings);
}

#[test]
fn begin_end_pairs_nest_and_processes_stay_apart() {
    let json = r#"{"traceEvents": [
      {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "args": {"a": 1}},
      {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 1, "args": {"b": true}},
      {"ph": "X", "name": "leaf", "pid": 1, "tid": 1, "ts": 1.5, "dur": 0.2},
      {"ph": "E", "pid": 1, "tid": 1, "ts": 2, "args": {"c": true}},
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
    assert_eq!((inner.start_ns, inner.end_ns, outer.end_ns), (1_000, 2_000, 3_000));
    assert_eq!(span(a, "leaf").parent, Some(inner.id));
    assert_eq!(span(b, "open").end_ns, 3_000, "ended at its thread's last time");
    assert_ne!(outer.id, span(b, "other").id, "the processes' ids differ");
    let w = conv.warnings.join("\n");
    assert!(w.contains("1 ends (`E`) without a begin") && w.contains("1 begins (`B`) without an end"), "{w}");
}

#[test]
fn a_cut_file_keeps_what_came_before_with_a_warning() {
    let cut = &PROFILE[..PROFILE.find("\"cudaMemcpyAsync\"").unwrap()];
    let (conv, models) = convert("cut.json", cut.as_bytes());
    let p = &models[0];
    assert!(p.threads.iter().flat_map(|t| &t.spans).any(|s| s.callsite.name == "cudaLaunchKernel"));
    assert!(!p.threads.iter().flat_map(|t| &t.spans).any(|s| s.callsite.name == "aten::mm_backward"));
    let w = conv.warnings.join("\n");
    assert!(w.contains(&format!("at byte {}", cut.len())) && w.contains("cut short"), "{w}");
}

#[test]
fn bad_input_names_the_byte() {
    let d = dir("bad");
    let path = d.join("bad.json");
    let text = r#"{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}"#;
    std::fs::write(&path, text).unwrap();
    let err = convert_at(&path, emit::WINDOW).expect_err("an error").to_string();
    let at = text.find(",,").unwrap() + 1;
    assert!(
        err.contains(&format!("at byte {at}"))
            && err.contains("bad.json")
            && err.contains("key must be a string"),
        "{err}"
    );

    std::fs::write(&path, r#"{"traceEvents": 7}"#).unwrap();
    let err = convert_at(&path, emit::WINDOW).expect_err("an error").to_string();
    assert!(err.contains("array of trace events"), "{err}");

    std::fs::write(
        &path,
        r#"{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}"#,
    )
    .unwrap();
    let err = convert_at(&path, emit::WINDOW).expect_err("an error").to_string();
    assert!(err.contains("no slice or instant"), "{err}");

    // Trailing data, and a file that ends before any event.
    std::fs::write(&path, r#"[{"ph": "i", "ts": 1}] x"#).unwrap();
    let err = convert_at(&path, emit::WINDOW).expect_err("an error").to_string();
    assert!(err.contains("data after the trace at byte 23"), "{err}");
    std::fs::write(&path, r#"{"traceEvents": [{"ph": "#).unwrap();
    let err = convert_at(&path, emit::WINDOW).expect_err("an error").to_string();
    assert!(err.contains("ends before its first event at byte 24"), "{err}");

    std::fs::write(&path, b"\x89WFL\r\n\x1a\n").unwrap();
    assert_eq!(sniff(&path).unwrap(), None);
}

/// Events of one thread in reverse time order, `n` of them, each holding an instant.
fn reversed(n: usize) -> String {
    let ev: Vec<String> = (0..n)
        .rev()
        .flat_map(|i| {
            let ts = i as f64 * 10.0;
            [
                format!(r#"{{"ph": "X", "name": "s{}", "pid": 1, "tid": 2, "ts": {ts}, "dur": 5}}"#, i % 3),
                format!(r#"{{"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": {}}}"#, ts + 1.0),
            ]
        })
        .collect();
    format!("[{}]", ev.join(",\n"))
}

#[test]
fn a_small_window_writes_the_same_file_and_disorder_reads_again() {
    let d = dir("window");
    // In order: a window of 4 events writes what a window of the whole file writes.
    let ordered = d.join("ordered.json");
    std::fs::write(&ordered, PROFILE).unwrap();
    let (small, whole) = (convert_at(&ordered, 4).unwrap(), convert_at(&ordered, usize::MAX).unwrap());
    assert_eq!(small.1, whole.1);
    assert!(small.0.warnings.iter().all(|w| !w.contains("out of time order")), "{:?}", small.0.warnings);

    // Out of order by more than the window: read again holding every event, the same trace.
    let backwards = d.join("backwards.json");
    std::fs::write(&backwards, reversed(50)).unwrap();
    let (done, files) = convert_at(&backwards, 4).unwrap();
    assert!(
        done.warnings[0].contains("out of time order") && done.warnings[0].contains("read again"),
        "{:?}",
        done.warnings
    );
    assert_eq!(files, convert_at(&backwards, usize::MAX).unwrap().1);
    let (p, _) = waffle_read::decode::decode_reader(files[0].as_slice(), Path::new("b")).unwrap();
    let spans = &p.threads[0].spans;
    assert_eq!(spans.len(), 50);
    assert!(spans.windows(2).all(|w| w[0].start_ns < w[1].start_ns));
    let marks = &p.threads[0].events;
    assert!(marks.iter().zip(spans).all(|(m, s)| m.parent == Some(s.id)), "each mark inside its slice");
}

#[test]
fn events_across_the_reads_of_a_large_file_are_all_kept() {
    // About 1 MB: every 64 KiB read ends inside some event, some of them long.
    let ev: Vec<String> = (0..4000)
        .map(|i| {
            let pad = "ab\\\"c".repeat(i % 97);
            format!(r#"{{"ph": "X", "name": "op{i}", "pid": 1, "tid": 1, "ts": {}, "dur": 5, "args": {{"pad": "{pad}", "n": {i}}}}}"#, i * 10)
        })
        .collect();
    let (done, models) = convert("large.json", format!("[\n{}\n]", ev.join(",\n")).as_bytes());
    assert_eq!(done.processes[0].events, 4000);
    let spans = &models[0].threads[0].spans;
    assert_eq!(spans.len(), 4000);
    for (i, s) in spans.iter().enumerate() {
        assert_eq!(
            (&*s.callsite.name, &s.fields[1]),
            (format!("op{i}").as_str(), &Value::Str("ab\"c".repeat(i % 97)))
        );
        assert_eq!(s.fields[0], Value::U64(i as u64));
    }
}

#[test]
fn bytes_in_memory_convert_as_the_file_does() {
    let d = dir("memory");
    let path = d.join("memory.json");
    std::fs::write(&path, PROFILE).unwrap();
    let from_file = convert_at(&path, emit::WINDOW).unwrap().1;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(PROFILE.as_bytes()).unwrap();
    for bytes in [PROFILE.as_bytes().to_vec(), gz.finish().unwrap()] {
        let outs = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let sink = std::rc::Rc::clone(&outs);
        convert_bytes(&bytes, &path, &mut |_, _| {
            let shared = Shared(std::rc::Rc::new(std::cell::RefCell::new(Vec::new())));
            sink.borrow_mut().push(std::rc::Rc::clone(&shared.0));
            Ok(Box::new(shared) as Box<dyn Write>)
        })
        .unwrap();
        let got: Vec<Vec<u8>> = outs.borrow().iter().map(|o| o.borrow().clone()).collect();
        assert_eq!(got, from_file);
    }
}

/// A writer into a buffer the test keeps.
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn items_held_in_place_come_out_as_a_stable_sort_puts_them() {
    use emit::{hold, order, Ev, What};
    // Items mostly in order, some a few places early, some far back, with ties of begin,
    // kind and end; each one's site is its arrival number, so that ties show their order.
    let mut r = crate::parse_tests::Rng(0x2545_f491_4f6c_dd1d);
    let mut next = |n: u64| r.below(n);
    for round in 0..200 {
        let (mut held, mut sorted, mut arrived) = (Vec::new(), true, Vec::new());
        let mut t = 1000u64;
        for k in 0..300u32 {
            t += next(3);
            let start = match next(20) {
                0 => t.saturating_sub(next(40)),
                1 if round % 2 == 0 => t.saturating_sub(200 + next(800)),
                _ => t,
            };
            let what = [What::Span, What::Instant, What::End][next(3) as usize];
            let end = if what == What::Span { start + next(4) } else { start };
            let ev = Ev::new(what, (start, end), k, None);
            arrived.push(ev);
            hold(&mut held, &mut sorted, ev);
        }
        if !sorted {
            held.sort_by(order);
        }
        arrived.sort_by(order);
        let ids = |v: &[Ev]| v.iter().map(|e| e.site).collect::<Vec<_>>();
        assert_eq!(ids(&held), ids(&arrived), "round {round}");
    }
}
