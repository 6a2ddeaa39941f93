//! Device tracks decoded: slices of a simulated device whose clock drifts against the host's
//! (+200 ppm, 5 s ahead) land within a stated tolerance of the host times they really took
//! (spans recorded around them), on a thread of their own named by the track; a single sync
//! maps with the nominal rate; `why` walks from a slice to the span that launched it; slices
//! of a track with no sync, or naming a track the file does not define, are left out with a
//! warning; overlapping slices nest, one outlasting its enclosing slice cut at its end. The
//! exporters' outputs are in `device_track_exports.rs`.

use std::time::{Duration, Instant};
use waffle_analyze::why::{why, Reached, Selector};
use waffle_read::decode::decode_files;
use waffle_read::model::{Process, Span, Value};

/// How far a slice may stick out of the host time it took (a `truth` span around the device's
/// readings): the sync pairs a device reading with a host reading taken a few hundred ns
/// later (more if the thread is preempted in between), and the session's calibration of
/// ticks to ns (measured: under 5 µs in a debug build).
const TOLERANCE_NS: u64 = 50_000;

/// A device clock counting 1 GHz nominal that runs 200 ppm fast and reads 5 s ahead.
struct DriftingClock {
    start: Instant,
}

impl DriftingClock {
    fn now(&self) -> u64 {
        let host = self.start.elapsed().as_nanos() as f64;
        (host * (1.0 + 200e-6)) as u64 + 5_000_000_000
    }
}

/// One session records at a time in a process.
static SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SESSION.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("waffle-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Records `kernels` kernels of `each`, each launched by a span, the device's work timed by
/// both clocks (a host span `truth` and the device's readings), with `syncs` syncs spread over
/// the run (one at the start if 1). Returns the decoded process.
fn record(dir: &std::path::Path, kernels: u64, each: Duration, syncs: u64) -> Process {
    let path = dir.join("run.bin");
    let _serial = serial();
    let session = waffle_std::Config::new(&path).start().unwrap();
    let device = DriftingClock { start: Instant::now() };
    let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
    gpu.sync(device.now());
    let mut synced = 1;
    for k in 0..kernels {
        let launch = waffle::span!("launch", k);
        let launched_by = launch.id();
        let truth = waffle::span!("truth", k);
        let b = device.now();
        spin(each);
        let e = device.now();
        drop(truth);
        drop(launch);
        waffle::track_slice!(gpu, "kernel", b, e, launched_by = launched_by, k);
        if synced < syncs && (k + 1) * (syncs - 1) / kernels >= synced {
            gpu.sync(device.now());
            synced += 1;
        }
    }
    session.stop().unwrap();
    let decoded = decode_files(&[path]).unwrap();
    assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
    decoded.trace.processes.into_iter().next().unwrap()
}

fn spans<'a>(p: &'a Process, name: &str) -> Vec<&'a Span> {
    p.threads.iter().flat_map(|t| &t.spans).filter(|s| s.name() == name).collect()
}

/// How far a kernel's slice sticks out of its `truth` span at most (the device was read inside
/// it), and the largest gap between them (the records' own cost, and any preemption between
/// the span's record and the device's reading).
fn worst_error(p: &Process) -> (u64, u64) {
    let track = &p.tracks[0];
    let slices = &p.threads[track.thread].spans;
    let truths = spans(p, "truth");
    assert_eq!(slices.len(), truths.len());
    let (mut worst, mut gap) = (0, 0);
    for (slice, truth) in slices.iter().zip(&truths) {
        // Fields: the track's name, then the slice's own (`k`, as the truth span has it).
        assert_eq!(slice.fields[0], Value::Str("GPU 0".into()));
        assert_eq!(slice.fields[1..], truth.fields[..]);
        let out =
            truth.start_ns.saturating_sub(slice.start_ns).max(slice.end_ns.saturating_sub(truth.end_ns));
        worst = worst.max(out);
        gap = gap
            .max(slice.start_ns.saturating_sub(truth.start_ns))
            .max(truth.end_ns.saturating_sub(slice.end_ns));
    }
    (worst, gap)
}

#[test]
fn a_drifting_device_clock_is_mapped_onto_the_host_time_it_took() {
    let dir = scratch("device-drift");
    let p = record(&dir, 40, Duration::from_millis(5), 6);
    assert_eq!(p.tracks.len(), 1);
    let track = &p.tracks[0];
    assert_eq!((track.name.as_str(), track.ticks_per_second, track.syncs.len()), ("GPU 0", 1_000_000_000, 6));
    let thread = &p.threads[track.thread];
    assert_eq!(thread.name, "GPU 0");
    assert!(thread.events.is_empty());
    let (worst, gap) = worst_error(&p);
    eprintln!(
        "drift +200 ppm, 6 syncs over {} ms: slices out of their span by {worst} ns at most, {gap} ns within",
        40 * 5
    );
    assert!(worst <= TOLERANCE_NS, "a slice lies {worst} ns outside the time it took");
    // Each slice sits inside its launching span (its first link), on the track's thread.
    let launches = spans(&p, "launch");
    for (slice, launch) in thread.spans.iter().zip(&launches) {
        assert_eq!(slice.links.first(), Some(&launch.id));
        assert!(
            slice.start_ns + TOLERANCE_NS >= launch.start_ns && slice.end_ns <= launch.end_ns + TOLERANCE_NS
        );
        assert_eq!((slice.depth, slice.parent), (0, None));
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn one_sync_maps_with_the_nominal_rate() {
    let dir = scratch("device-one-sync");
    let p = record(&dir, 10, Duration::from_millis(2), 1);
    assert_eq!(p.tracks[0].syncs.len(), 1);
    // Over ~20 ms, 200 ppm of drift is 4 µs: within the tolerance even uncorrected.
    let (worst, gap) = worst_error(&p);
    eprintln!("one sync, ~20 ms: slices out of their span by {worst} ns at most, {gap} ns within");
    assert!(worst <= TOLERANCE_NS, "a slice lies {worst} ns outside the time it took");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn why_walks_from_a_slice_to_the_span_that_launched_it() {
    let dir = scratch("device-why");
    let path = dir.join("run.bin");
    let _serial = serial();
    let session = waffle_std::Config::new(&path).start().unwrap();
    let gpu = waffle::Track::new("GPU 0", 1_000);
    gpu.sync(0);
    let launch = waffle::span!("submit gemm");
    let launched_by = launch.id();
    drop(launch);
    let id = waffle::track_slice!(gpu, "gemm", 1u64, 2u64, launched_by = launched_by);
    session.stop().unwrap();
    let trace = decode_files(&[path]).unwrap().trace;
    let answer = why(&trace, &Selector::Id(id.to_u64())).unwrap();
    assert_eq!(answer.symptom.name, "gemm");
    let reached: Vec<String> = answer
        .steps
        .iter()
        .filter_map(|s| match &s.reached {
            Reached::Item(i) => Some(i.name.clone()),
            _ => None,
        })
        .collect();
    assert!(reached.contains(&"submit gemm".to_owned()), "{reached:?}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn slices_of_a_track_without_a_sync_or_definition_are_left_out_with_a_warning() {
    let dir = scratch("device-no-sync");
    let path = dir.join("run.bin");
    let _serial = serial();
    let session = waffle_std::Config::new(&path).start().unwrap();
    let gpu = waffle::Track::new("GPU 9", 1_000);
    waffle::track_slice!(gpu, "lost", 1u64, 2u64);
    // A track this file never defined (another process's, or a made-up id).
    waffle::track_slice!(waffle::Track::from_id(0x1234), "stray", 1u64, 2u64);
    session.stop().unwrap();
    let decoded = decode_files(&[&path]).unwrap();
    let p = &decoded.trace.processes[0];
    assert!(p.tracks.is_empty());
    assert!(spans(p, "lost").is_empty() && spans(p, "stray").is_empty());
    let messages: Vec<&str> = decoded.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("\"GPU 9\"") && messages[0].contains("no usable sync"), "{messages:?}");
    assert!(
        messages[1].contains("0000000000001234") && messages[1].contains("does not define"),
        "{messages:?}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn overlapping_slices_nest_and_one_outlasting_its_enclosing_slice_is_cut() {
    let dir = scratch("device-nesting");
    let path = dir.join("run.bin");
    let _serial = serial();
    let session = waffle_std::Config::new(&path).start().unwrap();
    // A 1 GHz device clock synced once: device ticks are host nanoseconds after the sync.
    let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
    gpu.sync(0);
    waffle::track_slice!(gpu, "a", 1_000u64, 5_000u64);
    waffle::track_slice!(gpu, "b", 2_000u64, 3_000u64); // inside a
    waffle::track_slice!(gpu, "c", 4_000u64, 7_000u64); // begins in a, outlasts it
    waffle::track_slice!(gpu, "d", 8_000u64, 9_000u64);
    session.stop().unwrap();
    let p = decode_files(&[path]).unwrap().trace.processes.into_iter().next().unwrap();
    let sync_ns = p.tracks[0].syncs[0].host;
    let slices = &p.threads[p.tracks[0].thread].spans;
    let got: Vec<(&str, u32, u64, u64)> =
        slices.iter().map(|s| (s.name(), s.depth, s.start_ns - sync_ns, s.end_ns - sync_ns)).collect();
    let expected =
        [("a", 0, 1_000, 5_000), ("b", 1, 2_000, 3_000), ("c", 1, 4_000, 5_000), ("d", 0, 8_000, 9_000)];
    for (g, e) in got.iter().zip(&expected) {
        assert!(g.0 == e.0 && g.1 == e.1 && g.2.abs_diff(e.2) <= 2 && g.3.abs_diff(e.3) <= 2, "{got:?}");
    }
    assert_eq!(got.len(), 4);
    let a = slices[0].id;
    assert_eq!([slices[1].parent, slices[2].parent, slices[3].parent], [Some(a), Some(a), None]);
    std::fs::remove_dir_all(dir).ok();
}
