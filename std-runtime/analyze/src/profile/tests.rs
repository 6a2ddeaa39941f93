//! The profile of a hand-built run whose numbers are known.

use super::*;
use crate::model::Value;
use crate::mpi_fixtures::{rank, received, send, span, MS};

#[test]
fn self_time_mpi_time_and_the_matrix() {
    // Rank 0: step [0, 100] holding compute [0, 60] and a send [60, 70]; step again [100, 150].
    let mut message = send(0x13, "MPI_Send", (60, 70), 1, 9);
    (message.parent, message.depth) = (Some(0x10), 1);
    let r0 = vec![
        span(0x10, None, "step", (0, 100), &[]),
        span(0x11, Some(0x10), "compute", (0, 60), &[]),
        message,
        span(0x14, None, "step", (100, 150), &[]),
    ];
    // Rank 1: a receive [0, 80] in which message 9 arrived, 4096 bytes.
    let mut arrived = received(0x21, 0x20, 80, (9, 0));
    arrived.fields[0] = Value::U64(4096);
    let r1 = vec![span(0x20, None, "MPI_Recv", (0, 80), &[])];
    let p = profile(&Trace { processes: vec![rank(1, r1, vec![arrived]), rank(0, r0, vec![])] });
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
