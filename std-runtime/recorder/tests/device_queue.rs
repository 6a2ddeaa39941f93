//! `examples/device_queue.rs` run as a program: its kernels, timed by a device clock that
//! drifts +200 ppm and reads 40 s ahead, decode onto a `GPU 0` track in the host's time, each
//! after its launch began and inside the step that waited for it, in queue order.

mod common;

use std::process::Command;
use waffle_read::model::Span;

/// How far a mapped time may stray: the host reading of a sync follows the device reading by
/// the record's cost, and the device thread reads its clock a little after it dequeues.
const TOLERANCE_NS: u64 = 50_000;

#[test]
fn kernels_land_on_their_track_after_their_launch_and_inside_their_step() {
    let dir = std::env::temp_dir().join(format!("waffle-device-queue-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("device_queue.bin");
    let out = Command::new(common::example("device_queue")).arg(&path).output().expect("run the example");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("60 kernels"));

    let (p, warnings) = waffle_read::decode::decode_file(&path).expect("decode");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(p.tracks.len(), 1);
    let track = &p.tracks[0];
    assert_eq!((track.name.as_str(), track.ticks_per_second, track.syncs.len()), ("GPU 0", 1_000_000_000, 6));
    let slices = &p.threads[track.thread].spans;
    let names: Vec<&str> = slices.iter().take(3).map(Span::name).collect();
    assert_eq!(names, ["gemm", "softmax", "allreduce"]);
    assert_eq!(slices.len(), 60);

    let all: Vec<&Span> = p.threads.iter().flat_map(|t| &t.spans).collect();
    let by_id = |id: u64| *all.iter().find(|s| s.id == id).expect("a span of the trace");
    let mut previous_end = 0;
    for slice in slices {
        let launch = by_id(slice.links[0]);
        assert_eq!(launch.name(), "launch");
        let step = by_id(launch.parent.expect("a launch is inside its step"));
        assert!(
            slice.start_ns + TOLERANCE_NS >= launch.start_ns,
            "{} begins before its launch",
            slice.name()
        );
        assert!(slice.end_ns <= step.end_ns + TOLERANCE_NS, "{} ends after its step", slice.name());
        assert!(slice.start_ns + TOLERANCE_NS >= previous_end, "the queue runs in order");
        previous_end = slice.end_ns;
        // Its duration, on the host's clock: at least what it spun (more if the device thread
        // was preempted).
        let took = slice.end_ns - slice.start_ns;
        let spun = match slice.name() {
            "gemm" => 400_000,
            "softmax" => 150_000,
            _ => 300_000,
        };
        assert!(took + 1_000 >= spun, "{} took {took} ns", slice.name());
    }
    std::fs::remove_dir_all(dir).ok();
}
