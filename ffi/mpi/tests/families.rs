//! The families of calls the ring leaves out (`programs/families.c`, `mpirun -np 3`, the library
//! preloaded): communicators made by `MPI_Comm_dup` and `MPI_Comm_split` keyed alike on their
//! members, persistent requests started by `MPI_Startall`, completions by `MPI_Waitany`,
//! `MPI_Waitsome`, `MPI_Wait` and `MPI_Test` with ignored statuses, a matched probe,
//! `MPI_Sendrecv`, nonblocking collectives and a window. Every message is one send and one
//! receive event with equal values; every collective one group of its communicator's members.
//! And `MPI_THREAD_MULTIPLE` (`programs/threads.c`): 4 threads per rank exchange messages at
//! once, each on its own tag, sharing the wrappers' counters, communicator cache and request
//! table; every message is still paired, request numbers are unique in each process, and each
//! `MPI_Waitall` lists exactly the four requests its own thread started before it.
//!
//! Needs Open MPI; skipped without it, except under `CI=true` or `WAFFLE_REQUIRE_MPI`.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use support::{event_int, events, field, messages, named, record, span_int, spans};
use waffle_read::model::Value;

#[test]
fn every_family_pairs_its_messages_and_groups_its_collectives() {
    let Some(trace) = record("families") else { return };
    let all = spans(&trace);
    let received = events(&trace);

    // Messages: 6 persistent, 6 nonblocking, 3 matched, 3 Sendrecv.
    let (sends, receives) = messages(&all, &received);
    assert_eq!((sends.len(), receives.len()), (18, 18));
    let mut by_kind: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (sender, send) in &sends {
        let (receiver, event) = receives[&send.correlation.unwrap()];
        // A Sendrecv's `peer` and `tag` are its receive half's; its send half is `dest`, `send_tag`.
        let (dest, tag) = if send.name() == "MPI_Sendrecv" { ("dest", "send_tag") } else { ("peer", "tag") };
        let name = send.name();
        assert_eq!((span_int(send, dest), event_int(event, "peer")), (*receiver, *sender), "{name}");
        assert_eq!(
            (event_int(event, "tag"), event_int(event, "comm")),
            (span_int(send, tag), span_int(send, "comm"))
        );
        let completed_in = all.iter().find(|(r, s)| r == receiver && Some(s.id) == event.parent).unwrap().1;
        *by_kind.entry((send.name(), completed_in.name())).or_default() += 1;
    }
    let expected: BTreeMap<(&str, &str), usize> = [
        (("MPI_Isend", "MPI_Mrecv"), 3),
        (("MPI_Isend", "MPI_Waitany"), 6),
        (("MPI_Sendrecv", "MPI_Sendrecv"), 3),
        (("MPI_Start", "MPI_Waitall"), 6),
    ]
    .into();
    assert_eq!(by_kind, expected, "(sent by, received in)");

    // Communicator keys: the duplicate and each half of the split agree across their members.
    let key = |rank: i64, name: &str| span_int(named(&all, rank, name)[0], "comm");
    let world = key(0, "MPI_Comm_dup");
    let dup: Vec<i64> = (0..3).map(|r| span_int(named(&all, r, "MPI_Barrier")[0], "comm")).collect();
    let half: Vec<i64> = (0..3).map(|r| span_int(named(&all, r, "MPI_Barrier")[1], "comm")).collect();
    assert!(dup.iter().all(|&k| k == dup[0] && k != world), "{dup:?}");
    assert!(half[0] == half[2] && half[0] != half[1] && half[1] != world, "{half:?}");
    assert_eq!(key(1, "MPI_Ibcast"), dup[0]);

    // Collectives: each group is one name on exactly its communicator's members.
    let mut groups: HashMap<u64, Vec<(i64, &str, i64)>> = HashMap::new();
    for (rank, s) in all.iter().filter(|(_, s)| s.callsite.correlate == "mpi.collective") {
        let comm = field(s.fields(), "comm").or(field(s.fields(), "window")).map_or(0, |v| match v {
            Value::U64(k) => *k as i64,
            _ => 0,
        });
        groups.entry(s.correlation.unwrap()).or_default().push((*rank, s.name(), comm));
    }
    let mut seen: Vec<(String, BTreeSet<i64>)> = Vec::new();
    for members in groups.values() {
        let name = members[0].1;
        assert!(members.iter().all(|m| m.1 == name && m.2 == members[0].2), "{members:?}");
        seen.push((name.to_owned(), members.iter().map(|m| m.0).collect()));
    }
    seen.sort();
    let all3: BTreeSet<i64> = [0, 1, 2].into();
    let expected: Vec<(String, BTreeSet<i64>)> = [
        ("MPI_Barrier", all3.clone()),
        ("MPI_Barrier", [0, 2].into()),
        ("MPI_Barrier", [1].into()),
        ("MPI_Comm_dup", all3.clone()),
        ("MPI_Comm_split", all3.clone()),
        ("MPI_Iallreduce", all3.clone()),
        ("MPI_Ibcast", all3.clone()),
        ("MPI_Win_allocate", all3.clone()),
        ("MPI_Win_fence", all3.clone()),
        ("MPI_Win_fence", all3.clone()),
        ("MPI_Win_free", all3.clone()),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_owned(), r))
    .collect();
    assert_eq!(seen, expected);

    // Requests, matched receives and windows.
    for rank in 0..3 {
        let mrecv = named(&all, rank, "MPI_Mrecv")[0];
        assert_eq!(
            (span_int(mrecv, "peer"), span_int(mrecv, "tag")),
            ((rank + 2) % 3, 6),
            "from the probe's status"
        );
        let ibcast = span_int(named(&all, rank, "MPI_Ibcast")[0], "request").to_string();
        let tests = named(&all, rank, "MPI_Test");
        assert!(!tests.is_empty());
        assert!(tests.iter().all(|t| field(t.fields(), "requests") == Some(&Value::Str(ibcast.clone()))));
        let starts = named(&all, rank, "MPI_Start");
        assert_eq!(starts.len(), 4, "two per MPI_Startall");
        let put = named(&all, rank, "MPI_Put")[0];
        assert_eq!((span_int(put, "target"), span_int(put, "bytes")), ((rank + 1) % 3, 4));
        assert_eq!(span_int(put, "window"), span_int(named(&all, 0, "MPI_Put")[0], "window"));
        let freed = named(&all, rank, "MPI_Request_free");
        assert_eq!(freed.len(), 2);
    }
}

#[test]
fn threads_sharing_the_tables_keep_every_message_and_request_apart() {
    let Some(trace) = record("threads") else { return };
    let all = spans(&trace);
    let received = events(&trace);
    let (sends, receives) = messages(&all, &received);
    // 3 ranks x 4 threads x 100 rounds x 3 messages (two Isends, the Sendrecv's send).
    assert_eq!((sends.len(), receives.len()), (3600, 3600), "a value shared by two messages would show here");
    for (sender, send) in &sends {
        let (receiver, event) = receives[&send.correlation.unwrap()];
        let dest = if send.name() == "MPI_Sendrecv" { "dest" } else { "peer" };
        assert_eq!((span_int(send, dest), event_int(event, "peer")), (*receiver, *sender));
    }

    for p in &trace.processes {
        let mut ids = HashSet::new();
        for t in &p.threads {
            // The requests this thread started, in order, and what its Waitalls listed.
            let mut started: Vec<i64> = Vec::new();
            for s in &t.spans {
                match s.name() {
                    "MPI_Isend" | "MPI_Irecv" => {
                        let id = span_int(s, "request");
                        assert!(ids.insert(id), "request {id} numbered twice in {}", p.source);
                        started.push(id);
                    }
                    "MPI_Waitall" => {
                        let Some(Value::Str(list)) = field(s.fields(), "requests") else {
                            panic!("no requests")
                        };
                        let last: Vec<String> =
                            started[started.len() - 4..].iter().map(i64::to_string).collect();
                        assert_eq!(
                            list,
                            &last.join(","),
                            "{}: a Waitall lists its own thread's requests",
                            p.source
                        );
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(ids.len(), 1600, "{}: 4 threads x 100 rounds x 4 requests", p.source);
    }
}
