//! `hang` on hand-built MPI runs of three ranks, recorded as `waffle-mpi` records them: a
//! receive cycle, a chain, unmatched sends and receives, a collective a rank never entered,
//! a `MPI_Waitall` on a message that never came, `MPI_ANY_SOURCE`, and a clean run.

use super::*;
use crate::model::{Event, Span, Trace, Value};
use std::sync::Arc;
use waffle_read::fixtures;
use waffle_wire::Kind;

const T0: u64 = 1_700_000_000_000_000_000;
const SECOND: u64 = 1_000_000_000;
/// Every rank's recording ends 10 s after T0 (the run was killed then).
const KILLED: u64 = 10;

/// One rank's records: an open `main` span from 0 s, the calls inside it.
struct Rank {
    rank: i64,
    spans: Vec<Span>,
    events: Vec<Event>,
    next: u64,
}

fn comm(c: u64) -> (&'static str, Value) {
    ("comm", Value::U64(c))
}
fn peer(p: i64) -> (&'static str, Value) {
    ("peer", Value::I64(p))
}
fn tag(t: i64) -> (&'static str, Value) {
    ("tag", Value::I64(t))
}
fn request(r: u64) -> (&'static str, Value) {
    ("request", Value::U64(r))
}

impl Rank {
    fn new(rank: i64) -> Rank {
        let mut r = Rank { rank, spans: Vec::new(), events: Vec::new(), next: (rank as u64 + 1) << 32 };
        r.span("main", ("", None), &[], 0, None);
        r
    }

    fn callsite(name: &str, kind: Kind, fields: &[(&str, Value)], key: &str) -> Arc<crate::model::Callsite> {
        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        let mut cs = Arc::into_inner(fixtures::callsite(name, kind, &names)).expect("not shared");
        cs.correlate = key.to_owned().into();
        Arc::new(cs)
    }

    /// A call inside `main` (or `main` itself) from `start` s, ended at `end` s or open.
    fn span(
        &mut self,
        name: &str,
        (key, value): (&str, Option<u64>),
        fields: &[(&str, Value)],
        start: u64,
        end: Option<u64>,
    ) -> u64 {
        self.next += 1;
        let parent = (!self.spans.is_empty()).then(|| self.spans[0].id);
        self.spans.push(Span {
            id: self.next,
            parent,
            links: vec![],
            correlation: value,
            detached: false,
            depth: u32::from(parent.is_some()),
            callsite: Self::callsite(name, Kind::Span, fields, key),
            fields: fields.iter().map(|(_, v)| v.clone()).collect(),
            start_ns: T0 + start * SECOND,
            end_ns: T0 + end.unwrap_or(KILLED) * SECOND,
            ended: end.is_some(),
        });
        self.next
    }

    /// A message received in span `inside` at `at` s.
    fn received(&mut self, inside: u64, value: u64, fields: &[(&str, Value)], at: u64) {
        self.next += 1;
        self.events.push(Event {
            id: self.next,
            parent: Some(inside),
            links: vec![],
            correlation: Some(value),
            callsite: Self::callsite(waits::RECEIVED, Kind::Event, fields, "mpi.message<"),
            fields: fields.iter().map(|(_, v)| v.clone()).collect(),
            ts_ns: T0 + at * SECOND,
        });
    }

    /// Ends `main` at `at` s: the rank finished.
    fn finish(mut self, at: u64) -> Rank {
        (self.spans[0].ended, self.spans[0].end_ns) = (true, T0 + at * SECOND);
        self
    }
}

fn run(ranks: Vec<Rank>) -> Trace {
    let processes = ranks
        .into_iter()
        .map(|r| {
            let pid = r.rank as u32 + 100;
            let mut p = fixtures::process(pid, "rank", vec![fixtures::thread(pid.into(), r.spans, r.events)]);
            p.header.labels = vec![("rank".into(), r.rank.to_string())];
            (p.source, p.last_ns, p.complete) = (format!("rank{}.bin", r.rank), T0 + KILLED * SECOND, false);
            p
        })
        .collect();
    Trace { processes }
}

fn edges(h: &Hang) -> Vec<(i64, i64, WaitKind)> {
    h.waits.iter().map(|w| (w.from, w.to, w.kind)).collect()
}

fn cycles(h: &Hang) -> Vec<Vec<i64>> {
    h.deadlocks.iter().map(|d| d.ranks.clone()).collect()
}

/// Each rank receives from another, in a ring 0 <- 2 <- 1 <- 0: nobody sends.
fn ring() -> Trace {
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    for (r, from) in [(0, 1), (1, 2), (2, 0)] {
        ranks[r].span("MPI_Recv", ("", None), &[comm(5), peer(from), tag(7)], 4, None);
    }
    run(ranks)
}

#[test]
fn a_receive_cycle_is_a_deadlock() {
    let h = hang(&ring());
    assert!(h.stuck());
    let r = WaitKind::Receive;
    assert_eq!(edges(&h), [(0, 1, r), (1, 2, r), (2, 0, r)]);
    assert_eq!(cycles(&h), [vec![0, 1, 2]]);
    assert_eq!(h.unmatched_receives.len(), 3);
    assert!(h.unmatched_sends.is_empty());

    // Innermost first, open from its begin to the kill.
    let t0 = &h.threads[0];
    let open: Vec<(&str, u64)> = t0.open.iter().map(|o| (o.name.as_str(), o.for_ns)).collect();
    assert_eq!(open, [("MPI_Recv", 6 * SECOND), ("main", 10 * SECOND)]);
    assert_eq!((t0.rank, t0.file.as_str()), (Some(0), "rank0.bin"));

    let text = h.to_text();
    assert!(text.contains("deadlock: rank 0 -> rank 1 -> rank 2 -> rank 0\n"), "{text}");
    assert!(
        text.contains("rank 0 (rank0.bin, pid 100): not closed cleanly\n  thread t100 (tid 100)\n"),
        "{text}"
    );
    assert!(text.contains("    MPI_Recv  open for 6.000 s  comm=5 peer=1 tag=7\n"), "{text}");
    assert!(text.contains("  rank 2 -> rank 0  MPI_Recv (comm 5, tag 7)\n"), "{text}");
    let j = h.to_json();
    assert_eq!(j["stuck"], true);
    assert_eq!(j["deadlocks"], serde_json::json!([{ "ranks": [0, 1, 2] }]));
    assert_eq!(j["threads"][0]["open"][0]["name"], "MPI_Recv");
    assert_eq!(j["threads"][0]["open"][0]["for_ns"], 6 * SECOND);
    assert_eq!(j["threads"][0]["open"][0]["fields"]["peer"], 1);
    assert_eq!(
        j["waits"][0],
        serde_json::json!({
            "from": 0, "to": 1, "call": "MPI_Recv", "kind": "receive", "request": null,
            "started_by": null, "comm": 5, "tag": 7, "file": "rank0.bin",
        })
    );
}

#[test]
fn cycles_start_at_their_lowest_rank_and_each_is_named_once() {
    // 0 waits for 2, 2 for 1, 1 for 0; and 1 and 2 also wait for each other.
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    for (r, from) in [(0, 2), (2, 1), (1, 0), (1, 2)] {
        ranks[r].span("MPI_Recv", ("", None), &[comm(5), peer(from), tag(0)], 4, None);
    }
    let h = hang(&run(ranks));
    assert_eq!(cycles(&h), [vec![0, 2, 1], vec![1, 2]]);
    let text = h.to_text();
    assert!(
        text.contains(
            "deadlock: rank 0 -> rank 2 -> rank 1 -> rank 0\ndeadlock: rank 1 -> rank 2 -> rank 1\n"
        ),
        "{text}"
    );
}

#[test]
fn a_chain_waits_without_a_deadlock() {
    // 0 receives from 1; 1 is stuck in a synchronous send to 2, which finished.
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    ranks[0].span("MPI_Recv", ("", None), &[comm(5), peer(1), tag(1)], 4, None);
    ranks[1].span(
        "MPI_Ssend",
        ("mpi.message>", Some(11)),
        &[comm(5), peer(2), tag(2), ("bytes", Value::U64(8))],
        5,
        None,
    );
    let finished = ranks.pop().unwrap().finish(3);
    ranks.push(finished);
    let h = hang(&run(ranks));
    assert_eq!(edges(&h), [(0, 1, WaitKind::Receive), (1, 2, WaitKind::Send)]);
    assert!(h.deadlocks.is_empty());
    assert!(h.threads[2].open.is_empty());
    assert_eq!(h.unmatched_sends.len(), 1);
    let send = &h.unmatched_sends[0];
    assert_eq!(
        (send.rank, send.call.as_str(), send.peer, send.bytes, send.open),
        (Some(1), "MPI_Ssend", Some(2), Some(8), true)
    );
    // Rank 1's send goes to rank 2: nothing could satisfy rank 0's receive.
    assert_eq!(h.unmatched_receives.iter().map(|m| m.rank).collect::<Vec<_>>(), [Some(0)]);
    let text = h.to_text();
    assert!(
        text.contains("no deadlock: the waits form no cycle\n") && !text.contains("deadlock: rank"),
        "{text}"
    );
    assert!(text.contains("rank 2 (rank2.bin, pid 102): not closed cleanly\n  nothing open\n"), "{text}");
    assert!(
        text.contains("unmatched sends\n  rank 1 MPI_Ssend to rank 2 (comm 5, tag 2, 8 bytes), still open\n"),
        "{text}"
    );
    assert!(
        text.contains("unmatched receives\n  rank 0 MPI_Recv from rank 1 (comm 5, tag 1), still open\n"),
        "{text}"
    );
}

#[test]
fn an_unmatched_send_can_satisfy_only_a_receive_that_fits() {
    // Rank 0's eager send to rank 1 (tag 3) completed but was never received.
    let build = |recv_tag: i64| {
        let mut ranks: Vec<Rank> = (0..2).map(Rank::new).collect();
        ranks[0].span("MPI_Send", ("mpi.message>", Some(42)), &[comm(5), peer(1), tag(3)], 1, Some(2));
        ranks[1].span("MPI_Recv", ("", None), &[comm(5), peer(0), tag(recv_tag)], 4, None);
        hang(&run(ranks))
    };
    let h = build(4);
    assert_eq!(h.unmatched_sends.len(), 1);
    assert!(!h.unmatched_sends[0].open);
    assert_eq!(h.unmatched_receives.len(), 1, "tag 4 cannot take a tag-3 message");
    assert!(build(3).unmatched_receives.is_empty());
    assert!(build(-1).unmatched_receives.is_empty(), "any tag takes it");
    // The matched message is not unmatched.
    let mut ranks: Vec<Rank> = (0..2).map(Rank::new).collect();
    ranks[0].span("MPI_Send", ("mpi.message>", Some(42)), &[comm(5), peer(1), tag(3)], 1, Some(2));
    let recv = ranks[1].span("MPI_Recv", ("", None), &[comm(5), peer(0), tag(3)], 1, Some(2));
    ranks[1].received(recv, 42, &[comm(5), peer(0), tag(3), request(0)], 2);
    assert!(hang(&run(ranks)).unmatched_sends.is_empty());
}

#[test]
fn a_collective_waits_for_the_rank_that_never_entered_it() {
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    for r in &mut ranks {
        r.span("MPI_Allreduce", ("mpi.collective", Some(100)), &[comm(9)], 1, Some(2));
    }
    ranks[0].span("MPI_Allreduce", ("mpi.collective", Some(101)), &[comm(9)], 3, None);
    ranks[1].span("MPI_Allreduce", ("mpi.collective", Some(101)), &[comm(9)], 4, None);
    ranks[2].span("compute", ("", None), &[], 3, None);
    let h = hang(&run(ranks));
    let c = WaitKind::Collective;
    assert_eq!(edges(&h), [(0, 2, c), (1, 2, c)]);
    assert!(h.deadlocks.is_empty());
    let text = h.to_text();
    assert!(
        text.contains("  rank 0 -> rank 2  MPI_Allreduce (comm 9): rank 2 has not entered it\n"),
        "{text}"
    );
}

#[test]
fn a_waitall_waits_for_the_irecv_whose_message_never_came() {
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    ranks[0].span("MPI_Irecv", ("", None), &[comm(5), peer(1), tag(0), request(1)], 1, Some(1));
    ranks[0].span("MPI_Irecv", ("", None), &[comm(5), peer(2), tag(0), request(2)], 1, Some(1));
    let wait = ranks[0].span("MPI_Waitall", ("", None), &[("requests", Value::Str("1,2".into()))], 2, None);
    ranks[0].received(wait, 77, &[comm(5), peer(1), tag(0), request(1)], 3);
    ranks[1].span("MPI_Send", ("mpi.message>", Some(77)), &[comm(5), peer(0), tag(0)], 2, Some(3));
    let finished = [ranks.pop().unwrap().finish(2), ranks.pop().unwrap().finish(4)];
    ranks.extend(finished.into_iter().rev());
    let h = hang(&run(ranks));
    assert_eq!(edges(&h), [(0, 2, WaitKind::Request(2))]);
    assert_eq!(h.waits[0].started_by.as_deref(), Some("MPI_Irecv"));
    assert_eq!(h.unmatched_receives.len(), 1);
    let r = &h.unmatched_receives[0];
    assert_eq!((r.call.as_str(), r.peer, r.request, r.open), ("MPI_Irecv", Some(2), Some(2), false));
    assert!(h.unmatched_sends.is_empty());
    let text = h.to_text();
    assert!(
        text.contains("  rank 0 -> rank 2  MPI_Waitall: request 2 (MPI_Irecv, comm 5, tag 0)\n"),
        "{text}"
    );
}

#[test]
fn a_wait_on_a_nonblocking_send_or_collective_waits_as_they_would() {
    // Rank 0 waits on an Isend rank 1 never received and on an Iallreduce rank 2 never began;
    // rank 1 received rank 0's other Isend; rank 2 finished after one allreduce.
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    for r in &mut ranks {
        r.span("MPI_Allreduce", ("mpi.collective", Some(1)), &[comm(9)], 1, Some(2));
    }
    ranks[0].span(
        "MPI_Isend",
        ("mpi.message>", Some(50)),
        &[comm(9), peer(1), tag(0), request(1)],
        3,
        Some(3),
    );
    ranks[0].span(
        "MPI_Isend",
        ("mpi.message>", Some(51)),
        &[comm(9), peer(1), tag(0), request(2)],
        3,
        Some(3),
    );
    ranks[0].span("MPI_Iallreduce", ("mpi.collective", Some(2)), &[comm(9), request(3)], 3, Some(3));
    ranks[0].span("MPI_Waitall", ("", None), &[("requests", Value::Str("1,2,3".into()))], 4, None);
    ranks[1].span("MPI_Iallreduce", ("mpi.collective", Some(2)), &[comm(9), request(1)], 3, Some(3));
    let recv = ranks[1].span("MPI_Recv", ("", None), &[comm(9), peer(0), tag(0)], 3, Some(4));
    ranks[1].received(recv, 51, &[comm(9), peer(0), tag(0), request(0)], 4);
    let finished = ranks.pop().unwrap().finish(3);
    let ranks = vec![ranks.remove(0), ranks.remove(0).finish(5), finished];
    let h = hang(&run(ranks));
    assert_eq!(edges(&h), [(0, 1, WaitKind::Request(1)), (0, 2, WaitKind::Request(3))]);
    let started: Vec<_> = h.waits.iter().map(|w| w.started_by.as_deref()).collect();
    assert_eq!(started, [Some("MPI_Isend"), Some("MPI_Iallreduce")]);
    assert_eq!(h.unmatched_sends.iter().map(|m| m.request).collect::<Vec<_>>(), [Some(1)]);
}

#[test]
fn any_source_waits_for_every_other_rank_of_the_communicator() {
    // Ranks 0, 1 and 3 use comm 5; rank 2 only comm 6.
    let mut ranks: Vec<Rank> = (0..4).map(Rank::new).collect();
    ranks[0].span("MPI_Recv", ("", None), &[comm(5), peer(-1), tag(-1)], 4, None);
    ranks[1].span("MPI_Barrier", ("mpi.collective", Some(1)), &[comm(5)], 1, Some(2));
    ranks[2].span("MPI_Barrier", ("mpi.collective", Some(2)), &[comm(6)], 1, Some(2));
    ranks[3].span("MPI_Probe", ("", None), &[comm(5), peer(-2), tag(0)], 4, None);
    let h = hang(&run(ranks));
    let r = WaitKind::Receive;
    // MPI_PROC_NULL waits for nobody.
    assert_eq!(edges(&h), [(0, 1, r), (0, 3, r)]);
}

#[test]
fn a_clean_run_has_nothing_stuck() {
    let mut ranks: Vec<Rank> = (0..3).map(Rank::new).collect();
    ranks[0].span("MPI_Send", ("mpi.message>", Some(5)), &[comm(5), peer(1), tag(0)], 1, Some(2));
    let recv = ranks[1].span("MPI_Recv", ("", None), &[comm(5), peer(0), tag(0)], 1, Some(2));
    ranks[1].received(recv, 5, &[comm(5), peer(0), tag(0), request(0)], 2);
    let ranks: Vec<Rank> = ranks.into_iter().map(|r| r.finish(3)).collect();
    let h = hang(&run(ranks));
    assert!(!h.stuck());
    assert!(h.waits.is_empty() && h.unmatched_sends.is_empty() && h.unmatched_receives.is_empty());
    let text = h.to_text();
    assert_eq!(
        text,
        "nothing is stuck: no thread of the 3 processes was inside a span when its recording ended\n"
    );
    assert_eq!(h.to_json()["stuck"], false);
    assert_eq!(h.to_json()["threads"].as_array().unwrap().len(), 3);
}

#[test]
fn durations_read_in_their_unit() {
    assert_eq!(render::duration(800), "800 ns");
    assert_eq!(render::duration(3_500), "3.5 µs");
    assert_eq!(render::duration(15_250_000), "15.250 ms");
    assert_eq!(render::duration(2 * SECOND), "2.000 s");
}

#[test]
fn every_cycle_of_a_dense_graph_once_up_to_the_limit() {
    // Six ranks each receiving from any source: every rank waits for every other.
    let mut ranks: Vec<Rank> = (0..6).map(Rank::new).collect();
    for r in &mut ranks {
        r.span("MPI_Recv", ("", None), &[comm(5), peer(-1), tag(0)], 4, None);
    }
    let h = hang(&run(ranks));
    assert_eq!(h.waits.len(), 30);
    // Cycles of k ranks among 6: C(6, k) (k - 1)!, for k = 2..6: 15 + 40 + 90 + 144 + 120.
    assert_eq!((h.deadlocks.len(), h.deadlocks_truncated), (409, false));
    let distinct: std::collections::HashSet<_> = cycles(&h).into_iter().collect();
    assert_eq!(distinct.len(), 409);
    assert!(h.deadlocks.iter().all(|d| d.ranks.iter().all(|&r| r >= d.ranks[0])));
    let (some, truncated) = cycles::elementary(&h.waits, 10);
    assert_eq!((some.len(), truncated), (10, true));
}
