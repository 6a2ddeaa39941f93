//! Unit tests of `why` across ranks matched by order: the original C example's story, counts
//! that differ, ranks that share no name, ranks as threads told apart by a `rank` field, one
//! rank on two threads, and a correlation key winning over order.

use super::tests::{allreduce, callsite, it, names, process, It};
use super::*;
use crate::model::Thread;
use waffle_wire::Kind;

/// The original C example's story on two ranks: nothing ties the two ranks' `MPI_Allreduce_op`
/// spans together but their order; rank 1's is caused by the NaN it made.
fn by_order(rank0_ops: usize, rank1_ops: usize) -> Trace {
    let op = callsite("MPI_Allreduce_op", Kind::Span, &["rank"], "");
    let cause = callsite("Creating NaN on purpose", Kind::Event, &["rank"], "");
    let symptom = callsite("MPI_Allreduce result is NaN", Kind::Event, &[], "");
    let ops = |base: u64, n: usize, rank: u64| -> Vec<It> {
        (0..n as u64).map(|k| it(&op, base + k, None, 10 * k).fields(vec![Value::I64(rank as i64)])).collect()
    };
    // The symptom sits in rank 0's last op; rank 1's last op is caused by the NaN.
    let mut r0 = ops(0x100, rank0_ops, 0);
    r0.push(it(&symptom, 0x1ff, Some(0x100 + rank0_ops as u64 - 1), 10 * rank0_ops as u64));
    let mut r1 = vec![it(&cause, 0x2fe, None, 0).fields(vec![Value::I64(1)])];
    r1.extend(ops(0x200, rank1_ops, 1));
    let last = r1.last_mut().unwrap();
    last.links = vec![0x2fe];
    r1.push(it(&symptom, 0x2ff, Some(0x200 + rank1_ops as u64 - 1), 10 * rank1_ops as u64));
    Trace { processes: vec![process("0", 100, r0), process("1", 200, r1)] }
}

#[test]
fn the_same_collective_on_every_rank_is_one_operation() {
    let trace = by_order(3, 3);
    let e = why(&trace, &Selector::name("MPI_Allreduce result is NaN", 0)).unwrap();
    assert_eq!(e.symptom.id, 0x1ff);
    assert_eq!(
        names(&e.steps),
        [
            "inside MPI_Allreduce_op@0",
            "  matched by order with MPI_Allreduce_op@1",
            "    caused by Creating NaN on purpose@1",
        ]
    );
    assert_eq!(e.steps[1].occurrence, Some(2), "the third op on each rank");
    assert_eq!(e.steps[0].occurrence, None);
    assert_eq!(e.root_causes.iter().map(|r| r.id).collect::<Vec<_>>(), [0x2fe]);
    assert!(e.notes.is_empty());
    let text = e.to_text();
    assert!(
        text.contains(
            "  ← matched by order with span \"MPI_Allreduce_op\" 0000000000000202\n\
             \x20         rank 1 (rank1.bin, pid 200), thread main (tid 200), at +20.000 µs\n\
             \x20         rank=1\n\
             \x20         occurrence 2 of \"MPI_Allreduce_op\" on each rank: matched by order, not by a recorded link\n"
        ),
        "{text}"
    );
    let j = e.to_json();
    assert_eq!(j["steps"][1]["relation"], "matched by order with");
    assert_eq!(j["steps"][1]["occurrence"], 2);
    assert_eq!(j["steps"][0]["occurrence"], serde_json::Value::Null);

    // From rank 1's own symptom the link is direct; the match is shown too.
    let e = why(&trace, &Selector::name("MPI_Allreduce result is NaN", 1)).unwrap();
    assert_eq!(e.symptom.id, 0x2ff);
    assert_eq!(e.root_causes.iter().map(|r| r.id).collect::<Vec<_>>(), [0x2fe]);

    // Turned off, rank 0's chain stops at its own span.
    let off = Options { match_by_order: false };
    let e = why_with(&trace, &Selector::name("MPI_Allreduce result is NaN", 0), &off).unwrap();
    assert_eq!(names(&e.steps), ["inside MPI_Allreduce_op@0"]);
    assert!(e.root_causes.is_empty());
}

#[test]
fn different_counts_invent_no_cause_and_say_why() {
    // Rank 0 has 3 ops, rank 1 has 2: which of rank 1's is rank 0's third is anyone's guess.
    let trace = by_order(3, 2);
    let e = why(&trace, &Selector::id(0x1ff)).unwrap();
    assert_eq!(names(&e.steps), ["inside MPI_Allreduce_op@0"]);
    assert!(e.root_causes.is_empty());
    assert_eq!(
        e.notes,
        ["\"MPI_Allreduce_op\" is not matched by order: the ranks have different numbers of it \
          (3 on rank 0 (rank field 0), 2 on rank 1 (rank field 1))"]
    );
    let text = e.to_text();
    assert!(text.contains("Root cause: none found"), "{text}");
    assert!(text.ends_with(&format!("\nNotes\n  {}\n", e.notes[0])), "{text}");
    assert_eq!(e.to_json()["notes"][0], e.notes[0].as_str());
}

#[test]
fn ranks_that_share_no_span_name_are_not_matched() {
    let mut trace = by_order(2, 2);
    // Rank 1's ops get another name: nothing in common with rank 0 but the event names.
    let other = callsite("MPI_Bcast_op", Kind::Span, &["rank"], "");
    for s in &mut trace.processes[1].threads[0].spans {
        s.callsite = other.clone();
    }
    let e = why(&trace, &Selector::name("MPI_Allreduce result is NaN", 0)).unwrap();
    assert_eq!(names(&e.steps), ["inside MPI_Allreduce_op@0"]);
    assert!(e.root_causes.is_empty());
    assert!(e.notes.is_empty());
}

#[test]
fn ranks_as_threads_are_told_apart_by_their_rank_field() {
    // One process, the two ranks on two threads, each span with its rank as a field.
    let mut trace = by_order(2, 2);
    let mut r1 = trace.processes.pop().unwrap().threads.pop().unwrap();
    r1.stream = 1;
    r1.tid = 101;
    trace.processes[0].threads.push(r1);
    let e = why(&trace, &Selector::name("MPI_Allreduce result is NaN", 0)).unwrap();
    assert_eq!(e.symptom.id, 0x1ff);
    assert_eq!(e.steps[1].relation, Relation::MatchedByOrder);
    assert_eq!(e.steps[1].id(), 0x201);
    assert_eq!(e.root_causes.iter().map(|r| r.id).collect::<Vec<_>>(), [0x2fe]);

    // Without the field the two threads are one rank: nothing to match it with.
    for th in &mut trace.processes[0].threads {
        for s in &mut th.spans {
            s.fields.clear();
        }
    }
    let e = why(&trace, &Selector::name("MPI_Allreduce result is NaN", 0)).unwrap();
    assert!(e.root_causes.is_empty());
    assert!(e.notes.is_empty());

    // A rank whose spans of the name are on two threads has no order the others share.
    let mut trace = by_order(2, 2);
    let mut second = empty_like(&trace.processes[0].threads[0], 1);
    second.spans.push(trace.processes[0].threads[0].spans.remove(0));
    trace.processes[0].threads.push(second);
    let e = why(&trace, &Selector::id(0x1ff)).unwrap();
    assert!(e.root_causes.is_empty());
    assert_eq!(
        e.notes,
        ["\"MPI_Allreduce_op\" is not matched by order: rank 0 (rank field 0) has it on more than one thread"]
    );
}

/// An empty thread like `like`, on stream `stream`.
fn empty_like(like: &Thread, stream: u32) -> Thread {
    Thread {
        stream,
        tid: like.tid + u64::from(stream),
        name: format!("{} {stream}", like.name),
        spans: vec![],
        events: vec![],
        dropped: 0,
    }
}

#[test]
fn an_explicit_correlation_wins_over_order() {
    // The allreduce spans carry correlation values that pair round 1 of rank 0 with round 2 of
    // rank 1 (say, the program counts its rounds differently per rank): the key is followed.
    let mut trace = allreduce();
    for (s, v) in
        trace.processes[1].threads[0].spans.iter_mut().filter(|s| s.name() == "allreduce").zip([2, 1])
    {
        s.correlation = Some(v);
    }
    let e = why(&trace, &Selector::name("Output buffer is NaN after AllReduce", 0)).unwrap();
    let steps = names(&e.steps);
    assert_eq!(steps[..2], ["inside allreduce@0", "  correlated with allreduce@1"]);
    assert_eq!(e.steps[1].id(), 0x202, "round 2 of rank 0 goes with the span whose key says 2");
    assert!(e.steps.iter().all(|s| s.id() != 0x205 || s.relation != Relation::MatchedByOrder));
}
