//! The XSpace writer on hand-built traces, read back with the prost structs: the plane, its
//! lines and events (offsets and durations in picoseconds, the order xprof nests them in),
//! stats, step markers, several processes on one plane, and the directory layout.

use std::{collections::HashMap, sync::Arc};

use prost::Message;
use waffle_wire::Kind;

use super::proto::{StatValue, XLine, XPlane, XSpace};
use super::*;
use crate::model::{Callsite, Event, Span, Thread, Value};
use waffle_read::fixtures::{self, thread};

pub(super) const T0: u64 = 1_700_000_000_000_000_000;

pub(super) fn span(
    cs: &Arc<Callsite>,
    id: u64,
    parent: Option<u64>,
    [start, end]: [u64; 2],
    fields: Vec<Value>,
) -> Span {
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth: u32::from(parent.is_some()),
        callsite: cs.clone(),
        fields,
        start_ns: T0 + start,
        end_ns: T0 + end,
        ended: true,
    }
}

fn read(bytes: &[u8]) -> XSpace {
    XSpace::decode(bytes).expect("the XSpace decodes")
}

pub(super) fn export(trace: &Trace, options: &Options) -> XSpace {
    let mut out = Vec::new();
    write(trace, options, &mut out).unwrap();
    read(&out)
}

/// An event as read back: its name, offset and duration (ps), and its stats by name.
#[derive(Debug)]
pub(super) struct Read {
    pub(super) name: String,
    pub(super) offset_ps: i64,
    pub(super) duration_ps: i64,
    pub(super) stats: HashMap<String, StatValue>,
}

pub(super) fn events(plane: &XPlane, line: &XLine) -> Vec<Read> {
    let stat_name = |id: i64| plane.stat_metadata[&id].name.clone();
    line.events
        .iter()
        .map(|e| Read {
            name: plane.event_metadata[&e.metadata_id].name.clone(),
            offset_ps: e.offset_ps,
            duration_ps: e.duration_ps,
            stats: e.stats.iter().map(|s| (stat_name(s.metadata_id), s.value.clone().unwrap())).collect(),
        })
        .collect()
}

/// One process: thread 1 has `iteration` [1000, 5000] around `compute` [1500, 4500] with a
/// `tick` event at 2000 in it; thread 2 has two `batch` spans with a `step` field (42, then a
/// string) and a `plain` one. Thread 2's first record (500) is the process's earliest.
pub(super) fn sample() -> Trace {
    let iteration = fixtures::callsite("iteration", Kind::Span, &["n"]);
    let compute = fixtures::callsite("compute", Kind::Span, &["waffle.id", "ok"]);
    let batch = fixtures::callsite("batch", Kind::Span, &["step"]);
    let plain = fixtures::callsite("plain", Kind::Span, &[]);
    let tick = Event {
        id: 3,
        parent: Some(2),
        links: vec![1],
        correlation: None,
        callsite: fixtures::callsite("tick", Kind::Event, &["x"]),
        fields: vec![Value::F64(0.5)],
        ts_ns: T0 + 2000,
    };
    let t1 = thread(
        1,
        vec![
            span(&iteration, 1, None, [1000, 5000], vec![Value::U64(7)]),
            span(&compute, 2, Some(1), [1500, 4500], vec![Value::Str("mine".into()), Value::Bool(true)]),
        ],
        vec![tick],
    );
    let t2 = thread(
        2,
        vec![
            span(&batch, 4, None, [500, 900], vec![Value::U64(42)]),
            span(&batch, 5, None, [950, 990], vec![Value::Str("x".into())]),
            span(&plain, 6, None, [995, 999], vec![]),
        ],
        vec![],
    );
    Trace { processes: vec![fixtures::process(9, "p", vec![t1, t2])] }
}

#[test]
fn threads_are_lines_of_the_host_plane_with_times_in_picoseconds() {
    let space = export(&sample(), &Options::default());
    assert_eq!(space.planes.len(), 1);
    let plane = &space.planes[0];
    assert_eq!(plane.name, "/host:CPU");
    assert!(space.hostnames.is_empty(), "the fixture's host is unknown");
    let ids: Vec<(i64, &str)> = plane.lines.iter().map(|l| (l.id, l.name.as_str())).collect();
    assert_eq!(ids, [(1, "t1"), (2, "t2")]);
    for line in &plane.lines {
        assert_eq!(line.timestamp_ns, (T0 + 500) as i64, "every line counts from the process's first record");
        assert_eq!(line.display_id, line.id);
    }

    let t1 = events(plane, &plane.lines[0]);
    let names: Vec<&str> = t1.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["iteration", "compute", "tick"], "by start, the enclosing event first");
    assert_eq!((t1[0].offset_ps, t1[0].duration_ps), (500_000, 4_000_000));
    assert_eq!((t1[1].offset_ps, t1[1].duration_ps), (1_000_000, 3_000_000));
    assert_eq!((t1[2].offset_ps, t1[2].duration_ps), (1_500_000, 0), "an event is an instant");
    assert_eq!(plane.lines[0].duration_ps, 4_500_000, "the line ends with its last event");

    assert_eq!(t1[0].stats["n"], StatValue::Uint64(7));
    assert_eq!(t1[0].stats["waffle.id"], StatValue::Str("0000000000000001".into()));
    assert!(!t1[0].stats.contains_key("waffle.parent"));
    assert_eq!(t1[1].stats["waffle.id"], StatValue::Str("mine".into()), "a field keeps its name");
    assert_eq!(t1[1].stats["ok"], StatValue::Uint64(1), "a bool is 0 or 1");
    assert_eq!(t1[1].stats["waffle.parent"], StatValue::Str("0000000000000001".into()));
    assert_eq!(t1[2].stats["x"], StatValue::Double(0.5));
    assert_eq!(t1[2].stats["waffle.caused_by"], StatValue::Str("0000000000000001".into()));
    assert_eq!(t1[2].stats["waffle.parent"], StatValue::Str("0000000000000002".into()));
    // An event is told from a span of no length by a stat of its own.
    assert_eq!(t1[2].stats["waffle.event"], StatValue::Uint64(1));
    assert!(t1.iter().take(2).all(|span| !span.stats.contains_key("waffle.event")));

    let t2 = events(plane, &plane.lines[1]);
    assert_eq!((t2[0].name.as_str(), t2[0].offset_ps), ("batch", 0), "the earliest record is offset 0");
    assert_eq!(t2[0].stats["step"], StatValue::Uint64(42));
    // Names are interned: two batches, one metadata.
    let batch_ids: Vec<i64> = plane.lines[1].events.iter().map(|e| e.metadata_id).take(2).collect();
    assert_eq!(batch_ids[0], batch_ids[1]);
    assert_eq!(plane.event_metadata.len(), 5);
    for (id, m) in &plane.event_metadata {
        assert_eq!(*id, m.id);
    }
    for (id, m) in &plane.stat_metadata {
        assert_eq!(*id, m.id);
    }
}

#[test]
fn steps_are_named_spans_and_spans_with_a_step_field() {
    let step = |r: &Read| (r.stats.get("_r").cloned(), r.stats.get("step_num").cloned());
    let marked = |n: i64| (Some(StatValue::Int64(1)), Some(StatValue::Int64(n)));

    let space = export(&sample(), &Options::default());
    let plane = &space.planes[0];
    let (t1, t2) = (events(plane, &plane.lines[0]), events(plane, &plane.lines[1]));
    assert_eq!(step(&t1[0]), (None, None), "iteration is no step unless named");
    assert_eq!(step(&t2[0]), marked(42), "a step field gives the number");
    assert_eq!(step(&t2[1]), marked(1), "a step field that is no number: the count so far");
    assert_eq!(step(&t2[2]), (None, None));

    let options = Options { step_spans: vec!["iteration".into()] };
    let space = export(&sample(), &options);
    let plane = &space.planes[0];
    let (t1, t2) = (events(plane, &plane.lines[0]), events(plane, &plane.lines[1]));
    // Spans end in thread order here: thread 1's iteration is the first step counted.
    assert_eq!(step(&t1[0]), marked(0));
    assert_eq!(step(&t1[1]), (None, None), "its child is no step");
    assert_eq!(step(&t1[2]), (None, None), "nor is an event");
    assert_eq!(step(&t2[0]), marked(42));
}

fn two_hosts() -> Trace {
    let cs = fixtures::callsite("work", Kind::Span, &[]);
    let process = |pid: u32, host: &str, start: u64| {
        let t: Thread =
            thread(1, vec![span(&cs, u64::from(pid) << 8, None, [start, start + 10], vec![])], vec![]);
        let mut p = fixtures::process(pid, "rank", vec![t]);
        p.header.host = host.into();
        p
    };
    Trace { processes: vec![process(1, "alpha", 100), process(2, "beta", 50)] }
}

#[test]
fn several_processes_share_the_plane_of_one_file() {
    let space = export(&two_hosts(), &Options::default());
    assert_eq!(space.hostnames, ["alpha", "beta"]);
    assert_eq!(space.planes.len(), 1);
    let plane = &space.planes[0];
    let lines: Vec<(i64, &str, i64)> =
        plane.lines.iter().map(|l| (l.id, l.name.as_str(), l.timestamp_ns - T0 as i64)).collect();
    assert_eq!(
        lines,
        [(1, "rank (pid 1): t1", 100), (2, "rank (pid 2): t1", 50)],
        "a tid taken already gets a fresh id; each line counts from its own process"
    );
}

#[test]
fn a_directory_gets_one_file_per_host_in_the_profile_layout() {
    let dir = std::env::temp_dir().join(format!("waffle-xspace-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let written = write_dir(&two_hosts(), &Options::default(), &dir, None).unwrap();
    let run = dir.join("plugins/profile/2023_11_14_22_13_20");
    assert_eq!(written, [run.join("alpha.xplane.pb"), run.join("beta.xplane.pb")]);
    for (path, host) in written.iter().zip(["alpha", "beta"]) {
        let space = read(&std::fs::read(path).unwrap());
        assert_eq!(space.hostnames, [host]);
        assert_eq!(space.planes.len(), 1);
        assert_eq!(space.planes[0].lines.len(), 1);
        assert_eq!(space.planes[0].lines[0].name, "t1", "one process a plane: no prefix");
    }
    let named = write_dir(&two_hosts(), &Options::default(), &dir, Some("mine")).unwrap();
    assert_eq!(named[0], dir.join("plugins/profile/mine/alpha.xplane.pb"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_names_are_utc_times() {
    assert_eq!(run_name(T0), "2023_11_14_22_13_20");
    assert_eq!(run_name(0), "1970_01_01_00_00_00");
    assert_eq!(run_name(951_782_400_000_000_000), "2000_02_29_00_00_00", "a leap day");
    assert_eq!(file_name(""), "localhost");
    assert_eq!(file_name("a/b"), "a_b");
}

#[test]
fn detached_spans_get_rows_of_their_own_that_nest() {
    let cs = |name: &str| fixtures::callsite(name, Kind::Span, &[]);
    let detached = |name: &str, id, [a, b]: [u64; 2]| {
        let mut d = span(&cs(name), id, Some(1), [a, b], vec![]);
        d.detached = true;
        d
    };
    let t = thread(
        7,
        vec![
            span(&cs("p"), 1, None, [0, 100], vec![]),
            detached("d1", 2, [10, 500]),
            detached("d2", 3, [20, 300]),
            detached("d3", 4, [600, 700]),
            span(&cs("after"), 5, None, [150, 250], vec![]),
        ],
        vec![],
    );
    let space = export(&Trace { processes: vec![fixtures::process(9, "p", vec![t])] }, &Options::default());
    let plane = &space.planes[0];
    let names = |l: &XLine| events(plane, l).into_iter().map(|e| e.name).collect::<Vec<_>>();
    let lines: Vec<(i64, &str, Vec<String>)> =
        plane.lines.iter().map(|l| (l.id, l.name.as_str(), names(l))).collect();
    assert_eq!(
        lines,
        [
            (7, "t7", vec!["p".to_owned(), "after".to_owned()]),
            (8, "detached spans", vec!["d1".to_owned(), "d3".to_owned()]),
            (9, "detached spans 2", vec!["d2".to_owned()]),
        ],
        "the thread's line nests; overlapping detached spans take separate rows, ids above the tids"
    );
    let d3 = &events(plane, &plane.lines[1])[1];
    assert_eq!((d3.offset_ps, d3.duration_ps), (600_000, 100_000), "events keep their times on a row");
    assert_eq!(plane.lines[1].duration_ps, 700_000);
    assert_eq!(plane.lines[2].duration_ps, 300_000);
}

#[test]
fn the_same_trace_gives_the_same_bytes() {
    let bytes = || {
        let mut out = Vec::new();
        write(&sample(), &Options { step_spans: vec!["iteration".into()] }, &mut out).unwrap();
        out
    };
    let first = bytes();
    for _ in 0..8 {
        assert_eq!(bytes(), first, "metadata maps are written in id order");
    }
}

#[test]
fn an_empty_trace_is_an_empty_plane() {
    let space = export(&Trace { processes: vec![] }, &Options::default());
    assert_eq!(space.planes.len(), 1);
    assert!(space.planes[0].lines.is_empty());
}
