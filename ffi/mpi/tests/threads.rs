//! `MPI_THREAD_MULTIPLE` (`programs/threads.c`, `mpirun -np 3`, the library preloaded): 4
//! threads per rank exchange messages at once, each on its own tag, sharing the wrappers'
//! counters, communicator cache and request table. Every message is still one send span and one
//! receive event with equal values, request numbers are unique in each process, and each
//! `MPI_Waitall` lists exactly the four requests its own thread started before it.
//!
//! Needs Open MPI; skipped without it, except under `CI=true` or `WAFFLE_REQUIRE_MPI`.

mod support;

use std::collections::{HashMap, HashSet};
use support::{event_int, events, field, record, span_int, spans};
use waffle_decode::model::Value;

#[test]
fn threads_sharing_the_tables_keep_every_message_and_request_apart() {
    let Some(trace) = record("threads") else { return };
    let all = spans(&trace);
    let received = events(&trace);
    let sends: Vec<_> = all.iter().filter(|(_, s)| s.callsite.correlate == "mpi.message>").collect();
    let receives: HashMap<u64, _> = received
        .iter()
        .filter(|(_, e)| e.callsite.correlate == "mpi.message<")
        .map(|r| (r.1.correlation.unwrap(), r))
        .collect();
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
