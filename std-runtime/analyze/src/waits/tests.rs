//! Wait states and their root causes on hand-built runs whose answers are known, and the checks
//! that files are one whole run.

use super::*;
use crate::model::{Process, Span};
use crate::mpi_fixtures::{chain, collective, rank, received, send, span, wait, MS, T0};
use crate::timeline::Run;

fn run(ranks: Vec<Process>) -> Waits {
    waits(&Trace { processes: ranks })
}

fn cause<'a>(w: &'a Waits, rank: i64, span: &str) -> &'a RootCause {
    let found = w.root_causes.iter().find(|c| c.rank == rank && c.span == span);
    found.unwrap_or_else(|| panic!("no root cause {span} on rank {rank}: {:#?}", w.root_causes))
}

#[test]
fn a_late_sender_is_charged_to_what_the_sender_did_meanwhile() {
    let w = run(vec![
        rank(
            0,
            vec![span(0x10, None, "MPI_Recv", (0, 100), &[("peer", 1)])],
            vec![received(0x11, 0x10, 100, (1, 1))],
        ),
        rank(
            1,
            vec![span(0x20, None, "compute", (0, 90), &[]), send(0x21, "MPI_Send", (90, 91), 0, 1)],
            vec![],
        ),
    ]);
    assert_eq!(w.waits.len(), 1, "{w:#?}");
    let wait = &w.waits[0];
    assert_eq!((wait.rank, wait.kind, wait.wait_ns), (0, WaitKind::LateSender, 90 * MS));
    assert_eq!((wait.waited_for_rank, &*wait.waited_for), (1, "MPI_Send"));
    let c = &w.root_causes[0];
    assert_eq!((c.rank, c.span.as_str(), c.delay_ns, c.caused_wait_ns), (1, "compute", 90 * MS, 90 * MS));
    assert_eq!((c.span_id, c.start_ns), (0x20, T0));
    assert_eq!(wait.root_cause, Some(0));
    assert_eq!(w.total_wait_ns, 90 * MS);
    let json = w.to_json();
    assert_eq!(json["root_causes"][0]["caused_wait_ns"], 90 * MS);
    assert_eq!(json["waits"][0]["kind"], "late_sender");
    assert!(w.to_text().contains("rank 1 thread 0: compute took 90.000 ms that made others wait 90.000 ms"));
}

#[test]
fn a_delay_propagates_down_a_chain_of_ranks() {
    // Rank 2 computes 80 ms, then sends to 1; rank 1 passes it on to 0 at 82.
    let w = run(chain());
    let waited: Vec<(i64, u64)> = w.waits.iter().map(|x| (x.rank, x.wait_ns)).collect();
    assert_eq!(waited, [(0, 82 * MS), (1, 80 * MS)]);
    let c = cause(&w, 2, "delay");
    assert_eq!(w.root_causes[0], *c, "the delay comes first");
    assert_eq!((c.delay_ns, c.caused_wait_ns), (80 * MS, 160 * MS));
    assert_eq!((c.direct_ns, c.propagated_ns), (80 * MS, 80 * MS));
    // Rank 1's own 2 ms between its receive's wait and its send: its call, then the gap.
    assert_eq!(cause(&w, 1, "MPI_Recv").caused_wait_ns, MS);
    assert_eq!(cause(&w, 1, "gap MPI_Recv → MPI_Send").caused_wait_ns, MS);
    let charged: u64 = w.root_causes.iter().map(|c| c.caused_wait_ns).sum();
    assert_eq!(charged, w.total_wait_ns, "every nanosecond of waiting is charged once");
    // The delay's one piece was charged with both waits: rank 1's directly, rank 0's through it.
    let piece = w.charged.iter().find(|p| p.rank == 2).expect("the delay's piece");
    assert_eq!((w.root_causes[piece.root_cause].span.as_str(), piece.waits.len()), ("delay", 2));
    assert_eq!((piece.start_ns, piece.end_ns), (T0, T0 + 80 * MS));
}

#[test]
fn collectives_wait_for_their_last_member_or_their_root() {
    let w = run(vec![
        rank(0, vec![collective(0x10, "MPI_Bcast", (0, 50), Some(0), 1)], vec![]),
        rank(1, vec![collective(0x20, "MPI_Bcast", (10, 50), Some(0), 1)], vec![]),
    ]);
    assert!(w.waits.is_empty(), "the root came first: {w:#?}");
    let w = run(vec![
        rank(
            0,
            vec![
                span(0x11, None, "setup", (0, 40), &[]),
                collective(0x10, "MPI_Bcast", (40, 41), Some(0), 1),
            ],
            vec![],
        ),
        rank(1, vec![collective(0x20, "MPI_Bcast", (5, 41), Some(0), 1)], vec![]),
        rank(2, vec![collective(0x30, "MPI_Bcast", (10, 41), Some(0), 1)], vec![]),
    ]);
    let kinds: Vec<(i64, WaitKind, u64)> = w.waits.iter().map(|x| (x.rank, x.kind, x.wait_ns)).collect();
    assert_eq!(kinds, [(1, WaitKind::LateRoot, 35 * MS), (2, WaitKind::LateRoot, 30 * MS)]);
    assert_eq!(cause(&w, 0, "setup").caused_wait_ns, 65 * MS);
    let w = run(vec![
        rank(0, vec![collective(0x10, "MPI_Allreduce", (0, 30), None, 2)], vec![]),
        rank(
            1,
            vec![
                span(0x21, None, "solve", (0, 20), &[]),
                collective(0x20, "MPI_Allreduce", (20, 30), None, 2),
            ],
            vec![],
        ),
        rank(2, vec![collective(0x30, "MPI_Barrier", (0, 5), None, 3)], vec![]),
        rank(3, vec![collective(0x40, "MPI_Barrier", (3, 5), None, 3)], vec![]),
    ]);
    let kinds: Vec<(i64, WaitKind, u64)> = w.waits.iter().map(|x| (x.rank, x.kind, x.wait_ns)).collect();
    assert_eq!(kinds, [(0, WaitKind::Collective, 20 * MS), (2, WaitKind::Barrier, 3 * MS)]);
    assert_eq!(cause(&w, 1, "solve").caused_wait_ns, 20 * MS);
    assert_eq!(cause(&w, 3, "gap start → MPI_Barrier").caused_wait_ns, 3 * MS);
    let w = run(vec![
        rank(0, vec![collective(0x10, "MPI_Reduce", (0, 30), Some(0), 4)], vec![]),
        rank(1, vec![collective(0x20, "MPI_Reduce", (12, 30), Some(0), 4)], vec![]),
    ]);
    assert_eq!(
        w.waits.iter().map(|x| (x.kind, x.wait_ns)).collect::<Vec<_>>(),
        [(WaitKind::EarlyReduce, 12 * MS)]
    );
}

#[test]
fn the_wait_of_a_nonblocking_collective_waits_for_the_last_to_start_it() {
    // Rank 0 starts an Iallreduce at once and waits from 1 ms; rank 1 computes 25 ms first.
    let start = |id, times| Span {
        correlation: Some(0xc5),
        ..span(id, None, "MPI_Iallreduce", times, &[("request", 1)])
    };
    let w = run(vec![
        rank(0, vec![start(0x10, (0, 1)), wait(0x11, (1, 30), "1")], vec![]),
        rank(
            1,
            vec![span(0x20, None, "compute", (0, 25), &[]), start(0x21, (25, 26)), wait(0x22, (26, 30), "1")],
            vec![],
        ),
    ]);
    let kinds: Vec<(i64, &str, WaitKind, u64)> =
        w.waits.iter().map(|x| (x.rank, &*x.call, x.kind, x.wait_ns)).collect();
    assert_eq!(kinds, [(0, "MPI_Wait", WaitKind::Collective, 24 * MS)]);
    assert_eq!((&*w.waits[0].waited_for, w.root_causes[0].span.as_str()), ("MPI_Iallreduce", "compute"));
}

#[test]
fn a_synchronous_send_waits_for_a_late_receiver() {
    let w = run(vec![
        rank(0, vec![send(0x10, "MPI_Ssend", (0, 60), 1, 5)], vec![]),
        rank(
            1,
            vec![
                span(0x21, None, "io", (0, 55), &[]),
                span(0x20, None, "MPI_Recv", (55, 60), &[("peer", 0)]),
            ],
            vec![received(0x22, 0x20, 60, (5, 0))],
        ),
    ]);
    let kinds: Vec<(i64, WaitKind, u64)> = w.waits.iter().map(|x| (x.rank, x.kind, x.wait_ns)).collect();
    assert_eq!(kinds, [(0, WaitKind::LateReceiver, 55 * MS)]);
    assert_eq!(w.root_causes[0].span, "io");
    // A send that returned before the receive was posted (buffered) waited for nothing.
    let w = run(vec![
        rank(0, vec![send(0x10, "MPI_Send", (0, 1), 1, 5)], vec![]),
        rank(
            1,
            vec![span(0x20, None, "MPI_Recv", (55, 60), &[("peer", 0)])],
            vec![received(0x22, 0x20, 60, (5, 0))],
        ),
    ]);
    assert!(w.waits.is_empty(), "{w:#?}");
}

#[test]
fn a_span_that_links_to_a_later_item_of_another_rank_waited_for_it() {
    let mut consumer = span(0x10, None, "consume", (0, 40), &[]);
    consumer.links = vec![0x21];
    let w = run(vec![
        rank(0, vec![consumer], vec![]),
        rank(
            1,
            vec![span(0x20, None, "produce", (0, 30), &[]), span(0x21, None, "publish", (30, 31), &[])],
            vec![],
        ),
    ]);
    let kinds: Vec<(WaitKind, u64, &str)> =
        w.waits.iter().map(|x| (x.kind, x.wait_ns, &*x.waited_for)).collect();
    assert_eq!(kinds, [(WaitKind::Linked, 31 * MS, "publish")]);
    assert_eq!(cause(&w, 1, "produce").caused_wait_ns, 30 * MS);
}

#[test]
fn files_of_another_run_or_a_missing_rank_are_refused() {
    let two = || vec![rank(0, vec![], vec![]), rank(1, vec![send(0x21, "MPI_Send", (0, 1), 0, 1)], vec![])];
    assert!(crate::timeline::check(&mut Run::from_trace(&Trace { processes: two() })).is_ok());
    let mut other = two();
    other[1].header.trace_id = 8;
    let e =
        crate::timeline::check(&mut Run::from_trace(&Trace { processes: other })).unwrap_err().to_string();
    assert!(e.contains("solver100.bin and solver101.bin are from different runs"), "{e}");
    // Ranks started without a launcher each draw a trace id: at the same time, one run.
    let mut apart = vec![
        rank(0, vec![span(0x10, None, "solve", (0, 5), &[])], vec![]),
        rank(1, vec![span(0x20, None, "solve", (2, 9), &[])], vec![]),
    ];
    apart[1].header.trace_id = 8;
    let mut together = Run::from_trace(&Trace { processes: apart });
    crate::timeline::check(&mut together).expect("one run");
    assert!(crate::timeline::cut_notes(&together)[0]
        .contains("have different trace ids but ran at the same time"));
    let mut twice = two();
    twice[1].header.labels = vec![("rank".into(), "0".into())];
    let e =
        crate::timeline::check(&mut Run::from_trace(&Trace { processes: twice })).unwrap_err().to_string();
    assert!(e.contains("are both rank 0"), "{e}");
    let mut sized = two();
    sized[0].header.labels.push(("size".into(), "3".into()));
    let e =
        crate::timeline::check(&mut Run::from_trace(&Trace { processes: sized })).unwrap_err().to_string();
    assert!(e.contains("rank 2 is missing: solver100.bin says the run had 3 ranks"), "{e}");
    let peer = vec![rank(0, vec![], vec![]), rank(1, vec![send(0x21, "MPI_Send", (0, 1), 2, 1)], vec![])];
    let e = crate::timeline::check(&mut Run::from_trace(&Trace { processes: peer })).unwrap_err().to_string();
    assert!(e.contains("rank 2 is missing: rank 1's MPI_Send names it as its peer"), "{e}");
    let gap = vec![rank(0, vec![], vec![]), rank(2, vec![], vec![])];
    let e = crate::timeline::check(&mut Run::from_trace(&Trace { processes: gap })).unwrap_err().to_string();
    assert!(e.contains("rank 1 is missing: rank 2 is given"), "{e}");
}
