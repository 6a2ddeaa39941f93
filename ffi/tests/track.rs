//! Device tracks from C: `tests/c/track.c` records a track in a 1 MHz clock of its own, two
//! syncs and two slices launched by a span and an event, against the shared library; the
//! decoded trace puts the slices on the track, in the host's time, inside and after their
//! launchers.

mod common;

use common::{command, compile, decode, run_ok, scratch, Link, C_FLAGS};
use waffle_read::model::Value;

#[test]
fn c_slices_land_on_their_track_after_their_launchers() {
    let dir = scratch("track");
    let exe = dir.join("track");
    let source = common::ffi_dir().join("tests/c/track.c");
    compile(&common::cc(), C_FLAGS, &[source], &exe, Link::Shared, &[]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    let trace = decode(&[trace_file]);
    let p = &trace.processes[0];
    let host = &p.threads[0];
    let events: Vec<&str> = host.events.iter().map(|e| e.name()).collect();
    assert_eq!(events, ["track", "track.sync", "copy issued", "track", "track.sync", "track.sync"]);
    let launch = host.spans.iter().find(|s| s.name() == "launch").expect("the launch span");
    let copy = host.events.iter().find(|e| e.name() == "copy issued").expect("the copy event");

    assert_eq!(p.tracks.len(), 2, "{:?}", p.tracks);
    let dma = &p.tracks[1];
    assert_eq!((dma.name.as_str(), dma.syncs.len()), ("DMA", 1));
    let [copy_slice] = &p.threads[dma.thread].spans[..] else { panic!("one slice on DMA") };
    let fields: Vec<(&str, &Value)> = copy_slice.fields().collect();
    assert_eq!(
        fields,
        [
            ("track", &Value::Str("DMA".into())),
            ("bytes", &Value::U64(64)),
            ("dir", &Value::Str("h2d".into()))
        ]
    );
    let track = &p.tracks[0];
    assert_eq!((track.name.as_str(), track.ticks_per_second, track.syncs.len()), ("GPU 0", 1_000_000, 2));
    let gpu = &p.threads[track.thread];
    assert_eq!(gpu.name, "GPU 0");
    let names: Vec<&str> = gpu.spans.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["kernel", "memcpy"]);
    let (kernel, memcpy) = (&gpu.spans[0], &gpu.spans[1]);
    let fields: Vec<(&str, &Value)> = kernel.fields().collect();
    let Some(&(_, &Value::U64(device_us))) = fields.get(2) else { panic!("{fields:?}") };
    assert_eq!(
        fields,
        [
            ("track", &Value::Str("GPU 0".into())),
            ("bytes", &Value::U64(4096)),
            ("device_us", &Value::U64(device_us))
        ]
    );
    assert_eq!(kernel.links, [launch.id]);
    assert_eq!(memcpy.links, [copy.id]);
    // The device clock is the host's monotonic clock in µs: mapped through the syncs, the
    // kernel lies inside its launching span and lasts what the device measured (at least the
    // 2 ms it spun), the copy after its event.
    let slack = 50_000; // ns: µs truncation, and the host reading taken after the device's
    assert!(kernel.start_ns + slack >= launch.start_ns, "{kernel:?} {launch:?}");
    assert!(kernel.end_ns <= launch.end_ns + slack, "{kernel:?} {launch:?}");
    let took = kernel.end_ns - kernel.start_ns;
    assert!(
        device_us >= 2_000 && took.abs_diff(device_us * 1_000) <= slack,
        "{took} ns for {device_us} µs; {track:?}"
    );
    assert!(memcpy.start_ns + slack >= copy.ts_ns, "{memcpy:?} {copy:?}");
    let _ = std::fs::remove_dir_all(dir);
}
