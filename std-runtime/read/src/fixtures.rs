//! Pieces of hand-built traces for the unit tests of the reader and the layers above it (the
//! `fixtures` feature).

use std::sync::Arc;

use waffle_wire::{FieldDesc, FieldType, Header, Kind};

use crate::model::{Callsite, Event, Process, Span, Thread};

/// A callsite with these field names (any value type).
pub fn callsite(name: &str, kind: Kind, fields: &[&str]) -> Arc<Callsite> {
    let fields = fields.iter().map(|n| FieldDesc::new(*n, FieldType::Dynamic)).collect();
    let (module, file) = ("m".into(), "m.rs".into());
    Arc::new(Callsite {
        name: name.to_owned().into(),
        module,
        file,
        line: 1,
        kind,
        fields,
        correlate: "".into(),
    })
}

/// A callsite without fields, correlated by `key` (`mpi.message>`: see [`crate::correlation`]).
pub fn keyed(name: &str, kind: Kind, key: &str) -> Arc<Callsite> {
    let mut cs = Arc::into_inner(callsite(name, kind, &[])).expect("not shared");
    cs.correlate = key.to_owned().into();
    Arc::new(cs)
}

/// Thread `tid`, named `t<tid>`, on stream `tid`.
pub fn thread(tid: u64, spans: Vec<Span>, events: Vec<Event>) -> Thread {
    Thread { stream: tid as u32, tid, name: format!("t{tid}"), spans, events, dropped: 0 }
}

/// Process `name` with pid `pid`, read from `<name><pid>.bin`, trace id 7, with these threads,
/// complete and without drops.
pub fn process(pid: u32, name: &str, threads: Vec<Thread>) -> Process {
    Process {
        source: format!("{name}{pid}.bin"),
        header: Header {
            pid,
            name: name.into(),
            host: String::new(),
            labels: vec![],
            trace_id: 7,
            ..Header::default()
        },
        threads,
        dropped: 0,
        complete: true,
        last_ns: 0,
        tracks: Vec::new(),
    }
}

/// Messages between three ranks, as directed correlations (`mpi.message>` on the send,
/// `mpi.message<` on the receive event; times in ns after an epoch of 1.7e18):
/// - rank 0 sends 0x11 [100, 120] to rank 1, which receives it in 0x22 at 140 inside its
///   `MPI_Recv` 0x21 [90, 150], inside `main` 0x20 [0, 1000];
/// - rank 2 sends 0x31 [250, 260] to rank 0, received in 0x13 at 290 inside rank 0's
///   `MPI_Wait` 0x12 [255, 300];
/// - rank 1's send 0x23 [160, 170] is never received;
/// - events `fan out 0` (0x14, rank 0, 400) and `fan out 1` (0x24, rank 1, 410) are causes
///   (`fan>`) of `fan in 1` (0x25, rank 1, 510) and `fan in 2` (0x32, rank 2, 500) (`fan<`).
pub fn messages() -> crate::model::Trace {
    const T0: u64 = 1_700_000_000_000_000_000;
    let (send, recv) = (
        keyed("MPI_Send", Kind::Span, "mpi.message>"),
        keyed("MPI message received", Kind::Event, "mpi.message<"),
    );
    let span = |id, parent: Option<u64>, cs: &Arc<Callsite>, value: Option<u64>, [a, b]: [u64; 2]| Span {
        id,
        parent,
        links: vec![],
        correlation: value,
        detached: false,
        depth: u32::from(parent.is_some()),
        callsite: cs.clone(),
        fields: vec![],
        start_ns: T0 + a,
        end_ns: T0 + b,
        ended: true,
    };
    let event = |id, parent, cs: &Arc<Callsite>, value, ts| Event {
        id,
        parent,
        links: vec![],
        correlation: Some(value),
        callsite: cs.clone(),
        fields: vec![],
        ts_ns: T0 + ts,
    };
    let plain = |name| callsite(name, Kind::Span, &[]);
    let fan_out = |k: u64| keyed(&format!("fan out {k}"), Kind::Event, "fan>");
    let fan_in = |k: u64| keyed(&format!("fan in {k}"), Kind::Event, "fan<");
    let rank = |pid: u32, threads| {
        let mut p = process(pid, "mpi", threads);
        p.header.labels = vec![("rank".into(), (pid - 1).to_string())];
        p
    };
    let r0 = thread(
        1,
        vec![
            span(0x11, None, &send, Some(5), [100, 120]),
            span(0x12, None, &plain("MPI_Wait"), None, [255, 300]),
        ],
        vec![event(0x13, Some(0x12), &recv, 6, 290), event(0x14, None, &fan_out(0), 9, 400)],
    );
    let r1 = thread(
        2,
        vec![
            span(0x20, None, &plain("main"), None, [0, 1000]),
            span(0x21, Some(0x20), &plain("MPI_Recv"), None, [90, 150]),
            span(0x23, Some(0x20), &send, Some(7), [160, 170]),
        ],
        vec![
            event(0x22, Some(0x21), &recv, 5, 140),
            event(0x24, Some(0x20), &fan_out(1), 9, 410),
            event(0x25, Some(0x20), &fan_in(1), 9, 510),
        ],
    );
    let r2 = thread(
        3,
        vec![span(0x31, None, &send, Some(6), [250, 260])],
        vec![event(0x32, None, &fan_in(2), 9, 500)],
    );
    crate::model::Trace { processes: vec![rank(1, vec![r0]), rank(2, vec![r1]), rank(3, vec![r2])] }
}
