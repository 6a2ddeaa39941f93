//! The profile of a hand-built run whose numbers are known.

use waffle_read::fixtures::{callsite, keyed, process, thread};
use waffle_wire::Kind;

use super::*;
use crate::model::{Event, Span, Value};

const MS: u64 = 1_000_000;

fn span(id: u64, parent: Option<u64>, name: &str, (start, end): (u64, u64)) -> Span {
    Span {
        id,
        parent,
        links: vec![],
        correlation: None,
        detached: false,
        depth: u32::from(parent.is_some()),
        callsite: mpi(if name == "MPI_Send" {
            keyed(name, Kind::Span, "mpi.message>")
        } else {
            callsite(name, Kind::Span, &[])
        }),
        fields: vec![],
        start_ns: start * MS,
        end_ns: end * MS,
        ended: true,
    }
}

/// `cs` as `waffle-mpi` records it if it is named `MPI_...`.
fn mpi(cs: std::sync::Arc<crate::model::Callsite>) -> std::sync::Arc<crate::model::Callsite> {
    if !cs.name.starts_with("MPI_") {
        return cs;
    }
    let mut c = (*cs).clone();
    c.module = "waffle_mpi::sites".into();
    std::sync::Arc::new(c)
}

#[test]
fn self_time_mpi_time_and_the_matrix() {
    // Rank 0: step [0, 100] holding compute [0, 60] and a send [60, 70]; step again [100, 150].
    let mut send = span(0x13, Some(0x10), "MPI_Send", (60, 70));
    send.correlation = Some(9);
    let r0 = vec![
        span(0x10, None, "step", (0, 100)),
        span(0x11, Some(0x10), "compute", (0, 60)),
        send,
        span(0x14, None, "step", (100, 150)),
    ];
    // Rank 1: a receive [0, 80] in which message 9 arrived, 4096 bytes.
    let mut received = Event {
        id: 0x21,
        parent: Some(0x20),
        links: vec![],
        correlation: Some(9),
        callsite: callsite("MPI message received", Kind::Event, &["bytes"]),
        fields: vec![Value::U64(4096)],
        ts_ns: 80 * MS,
    };
    let mut cs = (*received.callsite).clone();
    cs.correlate = "mpi.message<".into();
    received.callsite = std::sync::Arc::new(cs);
    let mut p0 = process(10, "p", vec![thread(1, r0, vec![])]);
    p0.header.labels.push(("rank".into(), "0".into()));
    let mut p1 =
        process(11, "p", vec![thread(1, vec![span(0x20, None, "MPI_Recv", (0, 80))], vec![received])]);
    p1.header.labels.push(("rank".into(), "1".into()));
    let p = profile(&Trace { processes: vec![p1, p0] });
    let row = |rank: i64, name: &str| p.rows.iter().find(|r| r.rank == rank && r.name == name).unwrap();
    let step = row(0, "step");
    assert_eq!((step.count, step.total_ns, step.self_ns), (2, 150 * MS, 80 * MS));
    assert!((step.percent - 100.0).abs() < 1e-9, "{step:?}");
    assert_eq!(row(0, "compute").self_ns, 60 * MS);
    assert_eq!(p.rows[0].name, "step", "the most time first");
    let ranks: Vec<(i64, u64, u64)> = p.ranks.iter().map(|r| (r.rank, r.wall_ns, r.mpi_ns)).collect();
    assert_eq!(ranks, [(0, 150 * MS, 10 * MS), (1, 80 * MS, 80 * MS)]);
    assert_eq!(p.matrix.ranks, [0, 1]);
    assert_eq!((p.matrix.count[0][1], p.matrix.bytes[0][1], p.matrix.count[1][0]), (1, 4096, 0));
    let json = p.to_json();
    assert_eq!(json["messages"]["bytes"][0][1], 4096);
    assert_eq!(json["rows"][0]["self_ns"], 80 * MS);
    let html = p.to_html();
    assert!(html.contains("\"bytes\":[[0,4096],[0,0]]") && !html.contains("</script><script src"), "{html}");
    assert!(p.to_text().contains("rank 1: 80.000 ms wall, 80.000 ms in MPI (100.0 %)"), "{}", p.to_text());
}
