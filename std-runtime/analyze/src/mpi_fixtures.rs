//! Hand-built MPI runs for the unit tests of the analyses of why a run is slow: spans named and
//! keyed as `waffle-mpi` records them, times in ms.

use std::sync::Arc;

use waffle_read::fixtures::{process, thread};
use waffle_wire::{FieldDesc, FieldType, Kind};

use crate::model::{Callsite, Event, Process, Span, Value};

pub(crate) const MS: u64 = 1_000_000;
pub(crate) const T0: u64 = 1_700_000_000_000_000_000;

pub(crate) fn site(name: &str, kind: Kind, key: &str, fields: &[&str]) -> Arc<Callsite> {
    Arc::new(Callsite {
        name: name.to_owned().into(),
        module: if name.starts_with("MPI_") { "waffle_mpi::sites" } else { "m" }.into(),
        file: "m.rs".into(),
        line: 1,
        kind,
        fields: fields.iter().map(|n| FieldDesc::new(*n, FieldType::Dynamic)).collect(),
        correlate: key.to_owned().into(),
    })
}

/// A span `[start, end]` ms of `name`; MPI calls get the fields the library records.
pub(crate) fn span(
    id: u64,
    parent: Option<u64>,
    name: &str,
    (start, end): (u64, u64),
    fields: &[(&str, i64)],
) -> Span {
    let key = match name {
        "MPI_Send" | "MPI_Ssend" => "mpi.message>",
        "MPI_Bcast" | "MPI_Allreduce" | "MPI_Barrier" | "MPI_Reduce" | "MPI_Iallreduce" => "mpi.collective",
        _ => "",
    };
    let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth: u32::from(parent.is_some()),
        callsite: site(name, Kind::Span, key, &names),
        fields: fields.iter().map(|f| Value::I64(f.1)).collect(),
        start_ns: T0 + start * MS,
        end_ns: T0 + end * MS,
        ended: true,
    }
}

/// A send of message `m` to `peer`.
pub(crate) fn send(id: u64, name: &str, times: (u64, u64), peer: i64, m: u64) -> Span {
    Span { correlation: Some(m), ..span(id, None, name, times, &[("peer", peer)]) }
}

/// A collective call, number `k` on the communicator.
pub(crate) fn collective(id: u64, name: &str, times: (u64, u64), root: Option<i64>, k: u64) -> Span {
    let fields: Vec<(&str, i64)> = root.map(|r| ("root", r)).into_iter().collect();
    Span { correlation: Some(0xc0 + k), ..span(id, None, name, times, &fields) }
}

/// The event of message `m`, sent by rank `from`, received at `at` ms inside span `parent`.
pub(crate) fn received(id: u64, parent: u64, at: u64, (m, from): (u64, i64)) -> Event {
    Event {
        id,
        parent: Some(parent),
        links: vec![],
        correlation: Some(m),
        callsite: site("MPI message received", Kind::Event, "mpi.message<", &["bytes", "request", "peer"]),
        fields: vec![Value::U64(8), Value::U64(0), Value::I64(from)],
        ts_ns: T0 + at * MS,
    }
}

pub(crate) fn rank(r: i64, spans: Vec<Span>, events: Vec<Event>) -> Process {
    let mut p = process(100 + r as u32, "solver", vec![thread(1, spans, events)]);
    p.header.labels.push(("rank".into(), r.to_string()));
    p
}

/// Rank 2 computes 80 ms, then sends to 1; rank 1 passes it on to 0 at 82.
pub(crate) fn chain() -> Vec<Process> {
    vec![
        rank(
            0,
            vec![span(0x10, None, "MPI_Recv", (0, 83), &[("peer", 1)])],
            vec![received(0x11, 0x10, 83, (2, 1))],
        ),
        rank(
            1,
            vec![
                span(0x20, None, "MPI_Recv", (0, 81), &[("peer", 2)]),
                send(0x21, "MPI_Send", (82, 83), 0, 2),
            ],
            vec![received(0x22, 0x20, 81, (1, 2))],
        ),
        rank(
            2,
            vec![span(0x30, None, "delay", (0, 80), &[]), send(0x31, "MPI_Send", (80, 81), 1, 1)],
            vec![],
        ),
    ]
}

/// An `MPI_Wait` `[start, end]` ms listing the requests `requests` ("1,2").
pub(crate) fn wait(id: u64, times: (u64, u64), requests: &str) -> Span {
    let mut w = span(id, None, "MPI_Wait", times, &[]);
    w.callsite = site("MPI_Wait", Kind::Span, "", &["requests"]);
    w.fields = vec![Value::Str(requests.to_owned())];
    w
}
