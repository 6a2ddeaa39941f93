//! The critical path of hand-built runs whose path is known, and what freeing its parts gains.

use super::*;
use crate::model::Process;
use crate::mpi_fixtures::{chain, collective, rank, span, MS, T0};

fn path(ranks: Vec<Process>, step: Option<i64>) -> CriticalPath {
    critical_path(&Trace { processes: ranks }, step).unwrap()
}

#[test]
fn the_path_goes_back_through_the_waits_to_the_delay() {
    let p = path(chain(), None);
    assert_eq!((p.start_ns, p.length_ns), (T0, 83 * MS));
    let segs: Vec<(i64, &str, u64, u64)> =
        p.segments.iter().map(|s| (s.rank, s.span.as_str(), (s.start_ns - T0) / MS, s.dur_ns / MS)).collect();
    assert_eq!(
        segs,
        [
            (2, "delay", 0, 80),
            (1, "MPI_Recv", 80, 1),
            (1, "gap MPI_Recv → MPI_Send", 81, 1),
            (0, "MPI_Recv", 82, 1)
        ]
    );
    assert_eq!(
        p.segments.iter().map(|s| s.dur_ns).sum::<u64>(),
        p.length_ns,
        "the segments sum to the length"
    );
    assert_eq!(p.segments[0].span_id, 0x30);
    let top = &p.contributors[0];
    assert_eq!((top.rank, top.span.as_str(), top.on_path_ns), (2, "delay", 80 * MS));
    assert_eq!(top.if_free_ns, Some(80 * MS), "free, the run takes its other 3 ms");
    let json = p.to_json();
    assert_eq!(json["length_ns"], 83 * MS);
    assert_eq!(json["segments"].as_array().unwrap().len(), 4);
    assert!(p
        .to_text()
        .contains("rank 2 thread 0: delay 80.000 ms (96.4 %); free, the run would be 80.000 ms shorter"));
}

#[test]
fn freeing_work_gains_no_more_than_the_next_longest_path_allows() {
    // Two ranks each compute before an allreduce: rank 0 for 50 ms, rank 1 for 40 ms.
    let ranks = vec![
        rank(
            0,
            vec![
                span(0x10, None, "solve", (0, 50), &[]),
                collective(0x11, "MPI_Allreduce", (50, 52), None, 1),
            ],
            vec![],
        ),
        rank(
            1,
            vec![
                span(0x20, None, "solve", (0, 40), &[]),
                collective(0x21, "MPI_Allreduce", (40, 52), None, 1),
            ],
            vec![],
        ),
    ];
    let p = path(ranks, None);
    assert_eq!(p.length_ns, 52 * MS);
    let top = &p.contributors[0];
    assert_eq!((top.rank, top.span.as_str(), top.on_path_ns), (0, "solve", 50 * MS));
    // Free, rank 1's 40 ms become the longest path: 10 ms shorter, not 50.
    assert_eq!(top.if_free_ns, Some(10 * MS));
}

#[test]
fn a_step_is_its_own_window() {
    let step = |id: u64, k: i64, times: (u64, u64)| span(id, None, "iteration", times, &[("iteration", k)]);
    let ranks = vec![
        rank(
            0,
            vec![
                step(0x10, 0, (0, 10)),
                collective(0x11, "MPI_Barrier", (5, 10), None, 1),
                step(0x12, 1, (10, 40)),
                collective(0x13, "MPI_Barrier", (12, 40), None, 2),
            ],
            vec![],
        ),
        rank(
            1,
            vec![
                step(0x20, 0, (0, 10)),
                collective(0x21, "MPI_Barrier", (9, 10), None, 1),
                step(0x22, 1, (10, 40)),
                span(0x24, Some(0x22), "slow", (10, 39), &[]),
                collective(0x23, "MPI_Barrier", (39, 40), None, 2),
            ],
            vec![],
        ),
    ];
    let mut ranks = ranks;
    for p in &mut ranks {
        for s in &mut p.threads[0].spans {
            if s.name() == "MPI_Barrier" {
                s.parent = Some(s.id - 1);
                s.depth = 1;
            }
        }
    }
    let trace = Trace { processes: ranks };
    let p = critical_path(&trace, Some(1)).unwrap();
    assert_eq!((p.step, p.start_ns - T0, p.length_ns), (Some(1), 10 * MS, 30 * MS));
    assert_eq!(p.contributors[0].span, "slow");
    assert_eq!(p.contributors[0].rank, 1);
    assert_eq!(p.segments.iter().map(|s| s.dur_ns).sum::<u64>(), 30 * MS);
    let e = critical_path(&trace, Some(7)).unwrap_err().to_string();
    assert!(e.contains("equal to 7"), "{e}");
}
