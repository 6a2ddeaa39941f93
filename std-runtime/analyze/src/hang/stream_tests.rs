//! `hang` on files without the model gives the report `hang` gives on the decoded model, on
//! runs recorded rank by rank, each in a process of its own that exits while stuck: receives
//! in a ring (one holding its message, one holding it from another thread), a collective a
//! rank never entered, a `Waitall` on a reused receive request (the last start counts), a
//! receive request never completed, a send request and a collective request,
//! `MPI_ANY_SOURCE` on a communicator only some ranks use, an open blocking send, sends
//! received and not, values recorded late (on a received message, and on a send: every send
//! is then read again), a copy cut short, and a run that finished.

use super::{hang, hang_files, Hang};
use crate::decode::decode_files;
use std::{
    path::{Path, PathBuf},
    sync::{Arc, Barrier},
};

/// The value of message `i` from `from`, the same on both sides.
fn message(from: i64, i: u64) -> u64 {
    (from as u64 + 1) << 32 | i
}

/// A completed receive of `value` with `request`, inside the innermost open span.
fn received(value: u64, request: u64) {
    waffle::event!("MPI message received", request, correlate = ("mpi.message<", value));
}

/// Rank `rank` of three (see the module docs); with `relabel`, a send's value is replaced
/// by one recorded late.
fn record(path: &Path, rank: i64, stuck: bool, relabel: bool) {
    let session = waffle_std::Config::new(path).label("rank", rank.to_string()).start().expect("start");
    let (next, prev) = ((rank + 1) % 3, (rank + 2) % 3);
    let main = waffle::span!("main");
    for i in 0..20u64 {
        {
            let _s = waffle::span!(
                "MPI_Send",
                comm = 5u64,
                peer = next,
                tag = 1i64,
                bytes = 8u64,
                correlate = ("mpi.message>", message(rank, i))
            );
        }
        if relabel && i == 4 {
            // Recorded after the send's end: a late value of the send, replacing its own.
            waffle::link_raw(&[waffle::SpanId::NULL; 0], Some(message(rank, 100 + i)));
        }
        // Rank 0 never receives rank 2's last message.
        if rank != 0 || i != 19 {
            let _r = waffle::span!("MPI_Recv", comm = 5u64, peer = prev, tag = 1i64, bytes = 8u64);
            if i == 7 {
                // A wrong value, corrected after the receive's end.
                received(1, 0);
            } else {
                received(message(prev, i), 0);
            }
        }
        if i == 7 {
            waffle::link_raw(&[waffle::SpanId::NULL; 0], Some(message(prev, i)));
        }
        if i % 4 == 0 {
            let _c = waffle::span!("MPI_Allreduce", comm = 5u64, correlate = ("mpi.collective", i / 4));
        }
    }
    if rank == 1 {
        // A communicator rank 2 never uses.
        let _s = waffle::span!("MPI_Barrier", comm = 6u64);
    }
    // Request 9 started twice: the first completed.
    {
        let _r =
            waffle::span!("MPI_Irecv", comm = 5u64, peer = prev, tag = 3i64, bytes = 8u64, request = 9u64);
    }
    {
        let _w = waffle::span!("MPI_Wait", requests = "9");
        received(message(prev, 1000), 9);
    }
    {
        let _r =
            waffle::span!("MPI_Irecv", comm = 5u64, peer = prev, tag = 4i64, bytes = 8u64, request = 9u64);
    }
    {
        let _s = waffle::span!(
            "MPI_Isend",
            comm = 5u64,
            peer = next,
            tag = 5i64,
            bytes = 8u64,
            request = 7u64,
            correlate = ("mpi.message>", message(rank, 2000))
        );
    }
    {
        let _r =
            waffle::span!("MPI_Irecv", comm = 5u64, peer = prev, tag = 6i64, bytes = 8u64, request = 12u64);
    }
    {
        // Rank 2's is another collective than the others'.
        let value = if rank == 2 { 98u64 } else { 99 };
        let _c = waffle::span!(
            "MPI_Iallreduce",
            comm = 5u64,
            request = 11u64,
            correlate = ("mpi.collective", value)
        );
    }
    // Each thread opens its spans and holds them until the process exits (or, in a run that
    // finished, ends them before the stop).
    let (ready, ended) = (Arc::new(Barrier::new(6)), Arc::new(Barrier::new(6)));
    let hold = |open: fn(i64) -> Vec<waffle::Span>| {
        let (ready, ended) = (ready.clone(), ended.clone());
        std::thread::spawn(move || {
            let spans = open(rank);
            ready.wait();
            if stuck {
                loop {
                    std::thread::park();
                }
            }
            drop(spans);
            ended.wait();
        });
    };
    hold(|rank| {
        let (next, comm, tag) = ((rank + 1) % 3, 5u64, 7i64);
        let recv = waffle::span!("MPI_Recv", comm, peer = next, tag, bytes = 8u64);
        if rank == 1 {
            received(message(next, 3000), 0);
        }
        if rank == 2 {
            // Received on another thread, inside the receive entered there.
            let ctx = waffle::Context::current();
            std::thread::spawn(move || {
                let _in = ctx.enter();
                received(message(next, 3000), 0);
            })
            .join()
            .unwrap();
        }
        vec![recv]
    });
    hold(|rank| {
        let collective = || waffle::span!("MPI_Allreduce", comm = 5u64, correlate = ("mpi.collective", 5u64));
        (rank != 2).then(collective).into_iter().collect()
    });
    hold(|_| vec![waffle::span!("MPI_Waitall", requests = "9, 7,11,12")]);
    hold(|rank| {
        let any = || waffle::span!("MPI_Recv", comm = 6u64, peer = -1i64, tag = -1i64, bytes = 8u64);
        (rank == 0).then(any).into_iter().collect()
    });
    hold(|rank| {
        let value = message(rank, 4000);
        let send = || {
            waffle::span!(
                "MPI_Ssend",
                comm = 5u64,
                peer = 2i64,
                tag = 8i64,
                correlate = ("mpi.message>", value)
            )
        };
        (rank == 1).then(send).into_iter().collect()
    });
    ready.wait();
    if !stuck {
        ended.wait();
        drop(main);
    }
    session.stop().expect("stop");
}

/// Where [`a_rank_recorded_alone`] records, and what: `path`, rank, stuck, relabel.
const RECORD: &str = "WAFFLE_HANG_STREAM_RECORD";

/// Not a test on its own: records one rank when [`RECORD`] says so, in a process of its
/// own as a rank would be, which exits while its threads are stuck.
#[test]
fn a_rank_recorded_alone() {
    let Ok(what) = std::env::var(RECORD) else { return };
    let parts: Vec<&str> = what.split(',').collect();
    let flag = |i: usize| parts[i] == "1";
    record(Path::new(parts[0]), parts[1].parse().unwrap(), flag(2), flag(3));
    std::process::exit(0);
}

/// A run's files, and a copy of the first cut short.
fn run(name: &str, stuck: bool, relabel: bool) -> Vec<PathBuf> {
    let extra = format!(",{},{}", u8::from(stuck), u8::from(relabel));
    crate::recorded::ranks(
        &format!("hang-stream-{name}"),
        "hang::stream_tests::a_rank_recorded_alone",
        RECORD,
        3,
        &extra,
    )
}

/// Both reports on `paths`; they must agree.
fn both(paths: &[PathBuf]) -> Hang {
    let decoded = decode_files(paths).expect("decode");
    let from_model = hang(&decoded.trace);
    let (from_files, warnings) = hang_files(paths).expect("read");
    assert_eq!(from_files, from_model, "{}", from_model.to_text());
    assert_eq!(warnings, decoded.warnings);
    from_model
}

#[test]
fn streaming_reports_what_the_model_reports() {
    let paths = run("stuck", true, false);
    let report = both(&paths[..3]);
    let text = report.to_text();
    // The run holds what the test is about.
    assert!(text.contains("deadlock"), "{text}");
    assert!(!report.unmatched_sends.is_empty() && !report.unmatched_receives.is_empty(), "{text}");
    let kinds = |k: fn(&super::WaitKind) -> bool| report.waits.iter().filter(|w| k(&w.kind)).count();
    assert!(kinds(|k| matches!(k, super::WaitKind::Collective)) > 0, "{text}");
    assert!(kinds(|k| matches!(k, super::WaitKind::Request(9))) == 0, "{text}");
    assert!(kinds(|k| matches!(k, super::WaitKind::Request(12))) > 0, "{text}");
    assert!(kinds(|k| matches!(k, super::WaitKind::Request(7))) > 0, "{text}");
    assert!(kinds(|k| matches!(k, super::WaitKind::Request(11))) > 0, "{text}");
    assert!(kinds(|k| matches!(k, super::WaitKind::Send)) > 0, "{text}");
    // Rank 1's receive holds its message; rank 2's from another thread.
    let receives: Vec<i64> = report
        .waits
        .iter()
        .filter(|w| w.kind == super::WaitKind::Receive && w.call == "MPI_Recv" && w.comm == Some(5))
        .map(|w| w.from)
        .collect();
    assert_eq!(receives, [0], "{text}");
    both(&[paths[3].clone(), paths[1].clone(), paths[2].clone()]);
}

#[test]
fn a_value_recorded_late_on_a_send_is_read_alike() {
    let paths = run("relabel", true, true);
    both(&paths[..3]);
    both(&paths[1..]);
}

#[test]
fn a_finished_run_has_nothing_stuck_either_way() {
    let paths = run("clean", false, false);
    let report = both(&paths[..3]);
    assert!(!report.stuck(), "{}", report.to_text());
}
