//! Device planes as xprof groups them into steps: which events the writer gives a
//! `correlation_id` (`ties.rs`) and with what value, read back with the prost structs; fields
//! named like the stats xprof's grouping reads.

use waffle_wire::Kind;

use super::proto::{StatValue, XPlane, XSpace};
use super::tests::{events, export, span, Read};
use super::*;
use crate::{
    decode::track::DEVICE_TID_BASE,
    model::{Event, Process, Span, Track, Value},
};
use waffle_read::fixtures::{self, thread};

/// A device track's thread `n` named `name`, holding `slices`.
fn track(process: &mut Process, name: &str, slices: Vec<Span>) {
    let n = process.threads.len();
    let mut t = thread(DEVICE_TID_BASE + n as u64, slices, vec![]);
    t.name = name.into();
    process.threads.push(t);
    let id = 0xdead_0000 + n as u64;
    process.tracks.push(Track {
        id,
        name: name.into(),
        ticks_per_second: 1_000_000_000,
        thread: n,
        syncs: vec![],
    });
}

/// A slice `id` over `times` launched by `by` (or by nothing), with `fields` after `track`.
fn slice(id: u64, times: [u64; 2], by: Option<u64>, fields: &[(&str, Value)]) -> Span {
    let names: Vec<&str> = ["track"].into_iter().chain(fields.iter().map(|(n, _)| *n)).collect();
    let cs = fixtures::callsite("kernel", Kind::Event, &names);
    let values = [Value::Str("t".into())].into_iter().chain(fields.iter().map(|(_, v)| v.clone())).collect();
    let mut s = span(&cs, id, None, times, values);
    s.links = by.into_iter().collect();
    s
}

/// One process on `main` (tid 1): steps 0x1 [0, 10 µs] (launches 0x2 and 0x3 in it) and 0x4
/// [20, 30 µs] (launch 0x5), 0x6 [40, 41 µs] with nothing tied to it; an event caused by 0x3,
/// which launches nothing. Device tracks:
/// - `gpu:0`: 0xa [1, 5 µs] launched by 0x2, 0xb [25, 28 µs] launched by 0x5;
/// - `gpu:0 / Stream #14`, no launchers: 0x14 [1.5, 2 µs] (in 0xa), 0x15 [12, 13 µs] (in no
///   step), 0x16 [29, 29.5 µs] (in step 0x4, after 0xb), 0x17 [26, 26.5 µs] (in 0xb, with the
///   profiler's own `correlation_id` and a `group_id` as fields), 0x18 [2.5, 2.6 µs] launched
///   by 0x999, which is not in the trace (in 0xa);
/// - `GPU 1`: 0x1e [1.5, 1.6 µs], in 0xa's time but on another device: in step 0x1.
fn gpu_trace() -> Trace {
    let step = fixtures::callsite("step", Kind::Span, &["step"]);
    let launch = fixtures::callsite("launch", Kind::Span, &[]);
    let note = Event {
        id: 0x7,
        parent: Some(0x1),
        links: vec![0x3],
        correlation: None,
        callsite: fixtures::callsite("note", Kind::Event, &[]),
        fields: vec![],
        ts_ns: tests::T0 + 5_000,
    };
    let main = thread(
        1,
        vec![
            span(&step, 0x1, None, [0, 10_000], vec![Value::U64(0)]),
            span(&launch, 0x2, Some(0x1), [100, 200], vec![]),
            span(&launch, 0x3, Some(0x1), [300, 400], vec![]),
            span(&step, 0x4, None, [20_000, 30_000], vec![Value::U64(1)]),
            span(&launch, 0x5, Some(0x4), [20_100, 20_200], vec![]),
            span(&step, 0x6, None, [40_000, 41_000], vec![Value::U64(2)]),
        ],
        vec![note],
    );
    let mut p = fixtures::process(9, "p", vec![main]);
    track(
        &mut p,
        "gpu:0",
        vec![slice(0xa, [1_000, 5_000], Some(0x2), &[]), slice(0xb, [25_000, 28_000], Some(0x5), &[])],
    );
    let profiler = [("correlation_id", Value::U64(7001)), ("group_id", Value::I64(3))];
    track(
        &mut p,
        "gpu:0 / Stream #14",
        vec![
            slice(0x14, [1_500, 2_000], None, &[]),
            slice(0x18, [2_500, 2_600], Some(0x999), &[]),
            slice(0x15, [12_000, 13_000], None, &[]),
            slice(0x17, [26_000, 26_500], None, &profiler),
            slice(0x16, [29_000, 29_500], None, &[]),
        ],
    );
    track(&mut p, "GPU 1", vec![slice(0x1e, [1_500, 1_600], None, &[])]);
    Trace { processes: vec![p] }
}

/// Every event of `plane` by its `waffle.id`: its `correlation_id`, if any, and its stats.
fn by_id(plane: &XPlane) -> Vec<(u64, Option<u64>, Read)> {
    let mut found = Vec::new();
    for line in &plane.lines {
        for e in events(plane, line) {
            let Some(StatValue::Str(id)) = e.stats.get("waffle.id") else { panic!("{e:?}") };
            let id = u64::from_str_radix(id, 16).unwrap();
            let correlation = match e.stats.get(device::CORRELATION_ID) {
                None => None,
                Some(StatValue::Uint64(c)) => Some(*c),
                Some(other) => panic!("correlation_id {other:?}: xprof reads it as uint64"),
            };
            found.push((id, correlation, e));
        }
    }
    found.sort_by_key(|(id, ..)| *id);
    found
}

fn ties(plane: &XPlane) -> Vec<(u64, Option<u64>)> {
    by_id(plane).into_iter().map(|(id, c, _)| (id, c)).collect()
}

fn plane<'s>(space: &'s XSpace, name: &str) -> &'s XPlane {
    space.planes.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no plane {name}"))
}

#[test]
fn device_slices_are_tied_to_their_launch_or_their_step() {
    let space = export(&gpu_trace(), &Options::default());
    let names: Vec<&str> = space.planes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["/host:CPU", "/device:GPU:0", "/device:GPU:1"]);
    assert_eq!(
        ties(plane(&space, HOST_PLANE)),
        [
            (0x1, Some(0x1)),
            (0x2, Some(0x2)),
            (0x3, None),
            (0x4, Some(0x4)),
            (0x5, Some(0x5)),
            (0x6, None),
            (0x7, None)
        ],
        "launchers of slices, and steps that slices are tied to, carry their own id; \
         a span only an event links to does not"
    );
    assert_eq!(
        ties(plane(&space, "/device:GPU:0")),
        [
            (0xa, Some(0x2)),
            (0xb, Some(0x5)),
            (0x14, Some(0x2)),
            (0x15, None),
            (0x16, Some(0x4)),
            (0x17, Some(0x5)),
            (0x18, Some(0x2)),
        ],
        "a slice takes its launcher's id, else that of the launched slice it runs in, else its step's"
    );
    assert_eq!(ties(plane(&space, "/device:GPU:1")), [(0x1e, Some(0x1))], "another device's slice: its step");
}

#[test]
fn fields_do_not_pass_for_the_stats_xprof_groups_by() {
    let space = export(&gpu_trace(), &Options::default());
    let device = plane(&space, "/device:GPU:0");
    let (_, correlation, e) = by_id(device).into_iter().find(|(id, ..)| *id == 0x17).unwrap();
    assert_eq!(correlation, Some(0x5), "the export's correlation_id, not the field's");
    assert_eq!(e.stats["field.correlation_id"], StatValue::Uint64(7001));
    assert_eq!(e.stats["field.group_id"], StatValue::Int64(3));
    for plane in &space.planes {
        let names: Vec<&str> = plane.stat_metadata.values().map(|m| m.name.as_str()).collect();
        assert!(
            !names.contains(&"group_id"),
            "a group_id stat makes xprof take the space as grouped: {names:?}"
        );
    }
    // On the host too, and on a step marker, whose `step_num` is the export's.
    let cs = fixtures::callsite("batch", Kind::Span, &["step", "step_num", "_r", "flow"]);
    let values = vec![Value::U64(4), Value::Str("x".into()), Value::I64(0), Value::F64(2.5)];
    let t = thread(1, vec![span(&cs, 1, None, [0, 10], values)], vec![]);
    let space = export(&Trace { processes: vec![fixtures::process(9, "p", vec![t])] }, &Options::default());
    let e = &events(&space.planes[0], &space.planes[0].lines[0])[0];
    assert_eq!(e.stats["step_num"], StatValue::Int64(4));
    assert_eq!(e.stats["_r"], StatValue::Int64(1));
    assert_eq!(e.stats["field.step_num"], StatValue::Str("x".into()));
    assert_eq!(e.stats["field._r"], StatValue::Int64(0));
    assert_eq!(e.stats["field.flow"], StatValue::Double(2.5));
    assert!(!e.stats.contains_key("flow"), "xprof's trace viewer reads `flow` as an arrow");
}

#[test]
fn a_trace_without_device_tracks_gets_no_correlation_ids() {
    let space = export(&tests::sample(), &Options { step_spans: vec!["iteration".into()] });
    let names: Vec<&str> = space.planes[0].stat_metadata.values().map(|m| m.name.as_str()).collect();
    assert!(!names.contains(&device::CORRELATION_ID), "{names:?}");
}

#[test]
fn slices_tie_to_their_own_process_and_launchers_on_detached_rows() {
    // Process 1: a step with a detached (async) launch that overlaps the step's next span, so
    // that it goes to a row of detached spans; process 2 on the same plane: a slice in process
    // 1's step time, but of its own process, which has no step.
    let step = fixtures::callsite("step", Kind::Span, &["step"]);
    let launch = fixtures::callsite("launch", Kind::Span, &[]);
    let mut detached = span(&launch, 0x2, Some(0x1), [100, 3_000], vec![]);
    detached.detached = true;
    let main = thread(
        1,
        vec![
            span(&step, 0x1, None, [0, 10_000], vec![Value::U64(0)]),
            detached,
            span(&launch, 0x3, Some(0x1), [200, 300], vec![]),
        ],
        vec![],
    );
    let mut p1 = fixtures::process(1, "a", vec![main]);
    track(&mut p1, "gpu:0", vec![slice(0xa, [1_000, 2_000], Some(0x2), &[])]);
    let mut p2 = fixtures::process(2, "b", vec![thread(5, vec![], vec![])]);
    track(&mut p2, "gpu:0 / Stream #7", vec![slice(0x20, [4_000, 5_000], None, &[])]);
    let space = export(&Trace { processes: vec![p1, p2] }, &Options::default());
    let host = plane(&space, HOST_PLANE);
    let rows: Vec<&str> = host.lines.iter().map(|l| l.name.as_str()).collect();
    assert!(rows.contains(&"a (pid 1): detached spans"), "{rows:?}");
    assert_eq!(ties(host), [(0x1, None), (0x2, Some(0x2)), (0x3, None)]);
    assert_eq!(ties(plane(&space, "/device:GPU:0")), [(0xa, Some(0x2)), (0x20, None)]);
    // Tied events still decode whole, and the output is the same bytes every time.
    let bytes = |t: &Trace| {
        let mut out = Vec::new();
        write(t, &Options::default(), &mut out).unwrap();
        out
    };
    assert_eq!(bytes(&gpu_trace()), bytes(&gpu_trace()));
}
