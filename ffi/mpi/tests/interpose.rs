//! `libwaffle_mpi.so` preloaded into MPI programs that include nothing of waffle, run under
//! `mpirun -np 3` with `WAFFLE_OUTPUT=DIR/rank%r.bin`: every call on every rank with its fields,
//! one `mpi.message>` span and one `mpi.message<` event per message with equal values, one
//! `mpi.collective` group per collective spanning the ranks, wildcard receives resolved from
//! their status (`programs/ring.c`); a program with spans of its own, linked with
//! `libwaffle.so`, whose MPI spans nest under them in one file per rank (`programs/nested.c`);
//! a deadlocked program stopped by a timeout (`programs/deadlock.c`); and the symbols both
//! libraries export.
//!
//! Needs Open MPI; skipped without it, except under `CI=true` or `WAFFLE_REQUIRE_MPI`.

mod support;

use std::{collections::HashMap, sync::OnceLock};
use support::{event_int, events, field, named, record, span_int, spans};
use waffle_read::model::{Event, Span, Trace, Value};

/// The ring program's trace, recorded once for the tests that read it (None: no MPI).
fn ring() -> Option<&'static Trace> {
    static TRACE: OnceLock<Option<Trace>> = OnceLock::new();
    TRACE.get_or_init(|| record("ring")).as_ref()
}

#[test]
fn every_call_of_the_ring_is_recorded_with_its_fields() {
    let Some(trace) = ring() else { return };
    let all = spans(trace);
    let world = span_int(named(&all, 0, "MPI_Bcast")[0], "comm");
    for rank in 0..3 {
        let (right, left) = ((rank + 1) % 3, (rank + 2) % 3);
        let count = |name: &str| named(&all, rank, name).len();
        let wildcard = if rank == 0 { (0, 2) } else { (1, 0) };
        assert_eq!(count("MPI_Init"), 1);
        assert_eq!(count("MPI_Send"), 2 + wildcard.0, "rank {rank}");
        assert_eq!(count("MPI_Recv"), 2 + wildcard.1, "rank {rank}");
        assert_eq!((count("MPI_Isend"), count("MPI_Irecv"), count("MPI_Waitall")), (2, 2, 1));
        assert_eq!((count("MPI_Bcast"), count("MPI_Allreduce"), count("MPI_Finalize")), (1, 1, 1));
        for (_, s) in all.iter().filter(|(r, s)| *r == rank && !s.name().starts_with("MPI_Wait")) {
            let fields = ["MPI_Init", "MPI_Finalize"].contains(&s.name()).then_some(None);
            let comm = field(s.fields(), "comm");
            assert_eq!(
                fields.unwrap_or(comm),
                fields.unwrap_or(Some(&Value::U64(world as u64))),
                "{}",
                s.name()
            );
        }
        let sends = named(&all, rank, "MPI_Send");
        for s in &sends[..2] {
            assert_eq!((span_int(s, "peer"), span_int(s, "tag"), span_int(s, "bytes")), (right, 7, 4));
        }
        let recvs = named(&all, rank, "MPI_Recv");
        for s in &recvs[..2] {
            assert_eq!((span_int(s, "peer"), span_int(s, "tag"), span_int(s, "bytes")), (left, 7, 4));
        }
        let irecvs = named(&all, rank, "MPI_Irecv");
        let isends = named(&all, rank, "MPI_Isend");
        let peers: Vec<i64> = irecvs.iter().chain(&isends).map(|s| span_int(s, "peer")).collect();
        assert_eq!(peers, [left, right, right, left]);
        for s in irecvs.iter().chain(&isends) {
            assert_eq!((span_int(s, "tag"), span_int(s, "bytes")), (9, 32));
        }
        let ids: Vec<String> =
            irecvs.iter().chain(&isends).map(|s| span_int(s, "request").to_string()).collect();
        let waitall = named(&all, rank, "MPI_Waitall")[0];
        assert_eq!(field(waitall.fields(), "requests"), Some(&Value::Str(ids.join(","))), "rank {rank}");
        let bcast = named(&all, rank, "MPI_Bcast")[0];
        assert_eq!((span_int(bcast, "root"), span_int(bcast, "bytes")), (1, 16));
        let allreduce = named(&all, rank, "MPI_Allreduce")[0];
        assert_eq!(field(allreduce.fields(), "op"), Some(&Value::Str("MPI_MAX".into())));
        assert_eq!(span_int(allreduce, "bytes"), 24);
        assert!(all.iter().filter(|(r, _)| *r == rank).all(|(_, s)| s.ended));
    }
}

#[test]
fn each_message_is_one_send_span_and_one_receive_event_with_equal_values() {
    let Some(trace) = ring() else { return };
    let all = spans(trace);
    let received = events(trace);
    let sends: Vec<&(i64, &Span)> =
        all.iter().filter(|(_, s)| s.callsite.correlate == "mpi.message>").collect();
    let receives: Vec<&(i64, &Event)> =
        received.iter().filter(|(_, e)| e.callsite.correlate == "mpi.message<").collect();
    // 6 around the ring, 6 nonblocking, 2 to the wildcard receives.
    assert_eq!((sends.len(), receives.len()), (14, 14));
    let by_value: HashMap<u64, &(i64, &Event)> =
        receives.iter().map(|r| (r.1.correlation.unwrap(), *r)).collect();
    assert_eq!(by_value.len(), 14, "every message's value is its own");
    for (sender, send) in sends {
        let (receiver, event) = by_value.get(&send.correlation.unwrap()).unwrap_or_else(|| {
            panic!("no receive for {} on rank {sender} to {}", send.name(), span_int(send, "peer"))
        });
        assert_eq!(event.name(), "MPI message received");
        assert_eq!(span_int(send, "peer"), *receiver);
        assert_eq!(event_int(event, "peer"), *sender);
        assert_eq!(event_int(event, "tag"), span_int(send, "tag"));
        assert_eq!(event_int(event, "bytes"), span_int(send, "bytes"));
        assert_eq!(event_int(event, "comm"), span_int(send, "comm"));
    }
    // Completed in MPI_Waitall, the nonblocking receives' events are inside it and name their
    // requests; blocking receives say 0. The span in which a receive completed ends at the time
    // of its (last) receive event, which is read once MPI has returned.
    for (rank, event) in &received {
        let parent =
            all.iter().find(|(r, s)| r == rank && Some(s.id) == event.parent).expect("a parent span").1;
        let request = event_int(event, "request");
        match parent.name() {
            "MPI_Waitall" => {
                let irecvs: Vec<i64> =
                    named(&all, *rank, "MPI_Irecv").iter().map(|s| span_int(s, "request")).collect();
                assert!(irecvs.contains(&request), "{request} not in {irecvs:?}");
            }
            "MPI_Recv" => assert_eq!(request, 0),
            other => panic!("a receive completed in {other}"),
        }
        let last = received
            .iter()
            .filter(|(r, e)| r == rank && e.parent == event.parent)
            .map(|(_, e)| e.ts_ns)
            .max()
            .unwrap();
        assert!(parent.start_ns <= event.ts_ns, "{} began after its receive event", parent.name());
        assert_eq!(parent.end_ns, last, "{} ends at its last receive event", parent.name());
    }
}

#[test]
fn each_collective_is_one_group_across_the_ranks() {
    let Some(trace) = ring() else { return };
    let all = spans(trace);
    let mut groups: HashMap<u64, Vec<(i64, &str)>> = HashMap::new();
    for (rank, s) in all.iter().filter(|(_, s)| s.callsite.correlate == "mpi.collective") {
        groups.entry(s.correlation.unwrap()).or_default().push((*rank, s.name()));
    }
    let mut found: Vec<Vec<(i64, &str)>> = groups.into_values().collect();
    found.iter_mut().for_each(|g| g.sort());
    found.sort();
    assert_eq!(
        found,
        [
            vec![(0, "MPI_Allreduce"), (1, "MPI_Allreduce"), (2, "MPI_Allreduce")],
            vec![(0, "MPI_Bcast"), (1, "MPI_Bcast"), (2, "MPI_Bcast")],
        ]
    );
}

#[test]
fn wildcard_receives_are_resolved_from_their_status() {
    let Some(trace) = ring() else { return };
    let all = spans(trace);
    let wild: Vec<&Span> =
        named(&all, 0, "MPI_Recv").into_iter().filter(|s| span_int(s, "peer") == -1).collect();
    assert_eq!(wild.len(), 2);
    let received = events(trace);
    let mut sources = Vec::new();
    for s in wild {
        assert_eq!(span_int(s, "tag"), -1, "MPI_ANY_TAG is -1");
        let (_, event) = received.iter().find(|(r, e)| *r == 0 && e.parent == Some(s.id)).expect("its event");
        let source = event_int(event, "peer");
        assert_eq!(event_int(event, "tag"), 100 + source, "the actual tag, from the status");
        sources.push(source);
    }
    sources.sort();
    assert_eq!(sources, [1, 2]);
}

/// `why` follows messages: from every receive event it reaches, by the relation of messages,
/// the send span on the rank the message came from (and never walks from a send forward).
#[test]
fn why_walks_from_each_receive_to_its_send_on_the_other_rank() {
    use waffle_analyze::why::{why, Relation, Selector};
    let Some(trace) = ring() else { return };
    let all = spans(trace);
    let received = events(trace);
    for (receiver, event) in received.iter().filter(|(_, e)| e.callsite.correlate == "mpi.message<") {
        let explained = why(trace, &Selector::Id(event.id)).expect("why");
        let messages: Vec<_> = explained
            .steps
            .iter()
            .filter(|s| s.relation == Relation::Message && s.from == event.id)
            .filter_map(|s| s.item())
            .collect();
        assert_eq!(messages.len(), 1, "rank {receiver}: one message reached, {:#?}", explained.steps);
        let send = all.iter().find(|(_, s)| s.id == messages[0].id).expect("the send span");
        assert_eq!(send.0, event_int(event, "peer"), "the send is on the rank the message came from");
        assert_eq!(send.1.correlation, event.correlation);
    }
    for (_, send) in all.iter().filter(|(_, s)| s.callsite.correlate == "mpi.message>") {
        let explained = why(trace, &Selector::Id(send.id)).expect("why");
        assert!(
            explained.steps.iter().all(|s| s.relation != Relation::Message),
            "a send was walked forward to its receive: {:#?}",
            explained.steps
        );
    }
}
